//! The parameters of `ADD` and `DEL`, parsed by the draft's ABNF rules:
//! `CDI_REQUEST=<resource-spec>:<amount>,...`, `CDI_REQUEST_ID` and
//! `CDI_REQUEST_NUMA_LOCALITY=<node-id>,...`. Pure functions over strings.
//!
//! ```abnf
//! resource-spec    = resource-type [ hyphen resource-subtype ]
//! resource-subtype = 1*15alnum
//! resource-type    = ALPHA *15alnum
//! request-id       = alnum *63alnum-hyp
//! ```

use std::fmt;
use std::str::FromStr;

use super::{Code, Failure};

/// Longest `resource-type` (`ALPHA *15alnum`).
const MAX_TYPE: usize = 16;
/// Longest `resource-subtype` (`1*15alnum`).
const MAX_SUBTYPE: usize = 15;
/// Longest `request-id` (`alnum *63alnum-hyp`).
const MAX_REQUEST_ID: usize = 64;

fn alnum(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// Whether `s` is a `resource-type`: a letter, then up to 15 letters or
/// digits.
pub fn is_resource_type(s: &str) -> bool {
    s.len() <= MAX_TYPE && s.starts_with(|c: char| c.is_ascii_alphabetic()) && alnum(s)
}

/// Whether `s` is a `request-id`: a letter or digit, then up to 63
/// letters, digits or hyphens.
pub fn is_request_id(s: &str) -> bool {
    s.len() <= MAX_REQUEST_ID
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// A `resource-spec`: `gpu`, or `gpu-numa0` (type `gpu`, subtype `numa0`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourceSpec {
    /// The `resource-type`.
    pub resource_type: String,
    /// The `resource-subtype`, if any.
    pub subtype: Option<String>,
}

impl FromStr for ResourceSpec {
    type Err = String;

    /// Parses by the ABNF; the error says what is wrong.
    fn from_str(s: &str) -> Result<Self, String> {
        let (t, sub) = match s.split_once('-') {
            Some((t, sub)) => (t, Some(sub)),
            None => (s, None),
        };
        if !is_resource_type(t) {
            return Err(format!(
                "{s:?} is not a resource-spec: the type must be a letter then at most {} letters or digits",
                MAX_TYPE - 1
            ));
        }
        if let Some(sub) = sub
            && (sub.is_empty() || sub.len() > MAX_SUBTYPE || !alnum(sub))
        {
            return Err(format!(
                "{s:?} is not a resource-spec: the subtype after '-' must be 1 to {MAX_SUBTYPE} letters or digits"
            ));
        }
        Ok(ResourceSpec {
            resource_type: t.to_string(),
            subtype: sub.map(str::to_string),
        })
    }
}

impl fmt::Display for ResourceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.subtype {
            Some(sub) => write!(f, "{}-{sub}", self.resource_type),
            None => f.write_str(&self.resource_type),
        }
    }
}

/// What a resource-spec asks of cdigen's pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Want {
    /// Any device of the pool (the bare type).
    Any,
    /// A device on this NUMA node (subtype `numa<N>`).
    Numa(u32),
}

impl ResourceSpec {
    /// The spec of the plain type, as INFO reports it.
    pub fn of_type(t: &str) -> Self {
        ResourceSpec {
            resource_type: t.to_string(),
            subtype: None,
        }
    }

    /// The spec `<type>-numa<N>`.
    pub fn numa(t: &str, node: u32) -> Self {
        ResourceSpec {
            resource_type: t.to_string(),
            subtype: Some(format!("numa{node}")),
        }
    }

    /// What this spec asks for, when cdigen supports it for a plugin of
    /// type `plugin_type`: the type itself, or the subtype `numa<N>`
    /// (`N` in decimal without leading zeros).
    pub fn want(&self, plugin_type: &str) -> Option<Want> {
        if self.resource_type != plugin_type {
            return None;
        }
        let Some(sub) = &self.subtype else {
            return Some(Want::Any);
        };
        let n = sub.strip_prefix("numa")?;
        let canonical = n.bytes().all(|b| b.is_ascii_digit()) && (n == "0" || !n.starts_with('0'));
        if !canonical {
            return None;
        }
        n.parse().ok().map(Want::Numa)
    }
}

/// One `<resource-spec>:<amount>` of `CDI_REQUEST`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// The resource-spec as given.
    pub spec: ResourceSpec,
    /// What it asks for.
    pub want: Want,
    /// How many devices.
    pub amount: u32,
}

fn bad_parameter(details: String) -> Failure {
    Failure::new(Code::Parameter, "Invalid parameter").details(details)
}

/// Parses `CDI_REQUEST` for a plugin of type `plugin_type`, item by item:
/// a malformed item is [`Code::Parameter`], a well-formed resource-spec
/// cdigen does not serve [`Code::ResourceSpec`] (checked before the
/// amount, so `gpu-memory:2048Mi` is an unsupported resource-spec), an
/// amount that is not a positive integer [`Code::Parameter`]. A spec
/// listed twice is [`Code::Parameter`].
///
/// # Errors
/// The [`Failure`] of the first bad item.
pub fn parse_request(value: Option<&str>, plugin_type: &str) -> Result<Vec<Item>, Failure> {
    let Some(value) = value else {
        return Err(bad_parameter("CDI_REQUEST is not set".into()));
    };
    if value.is_empty() {
        return Err(bad_parameter("CDI_REQUEST is empty".into()));
    }
    let mut items: Vec<Item> = Vec::new();
    for part in value.split(',') {
        let Some((spec, amount)) = part.split_once(':') else {
            return Err(bad_parameter(format!(
                "CDI_REQUEST: {part:?} is not <resource-spec>:<amount>"
            )));
        };
        let spec: ResourceSpec = spec
            .parse()
            .map_err(|e| bad_parameter(format!("CDI_REQUEST: {e}")))?;
        let Some(want) = spec.want(plugin_type) else {
            return Err(
                Failure::new(Code::ResourceSpec, "resource-spec unsupported")
                    .details(format!("Unsupported resource-spec: {spec}")),
            );
        };
        let amount = parse_amount(amount).ok_or_else(|| {
            bad_parameter(format!(
                "CDI_REQUEST: the amount of {spec}, {amount:?}, is not a positive integer"
            ))
        })?;
        if items.iter().any(|i| i.spec == spec) {
            return Err(bad_parameter(format!(
                "CDI_REQUEST: {spec} is listed twice"
            )));
        }
        items.push(Item { spec, want, amount });
    }
    Ok(items)
}

/// A positive decimal integer (digits only: no sign, no unit).
fn parse_amount(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok().filter(|n| *n > 0)
}

/// Checks `CDI_REQUEST_ID`.
///
/// # Errors
/// [`Code::Parameter`] when it is missing or not a `request-id`.
pub fn parse_request_id(value: Option<&str>) -> Result<String, Failure> {
    match value {
        None => Err(bad_parameter("CDI_REQUEST_ID is not set".into())),
        Some(v) if is_request_id(v) => Ok(v.to_string()),
        Some(v) => Err(bad_parameter(format!(
            "CDI_REQUEST_ID {v:?} is not a request-id: a letter or digit, then at most {} letters, digits or hyphens",
            MAX_REQUEST_ID - 1
        ))),
    }
}

/// Parses `CDI_REQUEST_NUMA_LOCALITY`: comma-separated NUMA node numbers,
/// in order of preference, duplicates dropped. Unset or empty means no
/// preference.
///
/// # Errors
/// [`Code::Parameter`] for anything that is not a list of integers.
pub fn parse_numa_locality(value: Option<&str>) -> Result<Vec<u32>, Failure> {
    let Some(value) = value.filter(|v| !v.is_empty()) else {
        return Ok(Vec::new());
    };
    let mut nodes = Vec::new();
    for part in value.split(',') {
        let node = (!part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
            .then(|| part.parse::<u32>().ok())
            .flatten()
            .ok_or_else(|| {
                bad_parameter(format!(
                    "CDI_REQUEST_NUMA_LOCALITY: {part:?} is not a NUMA node number (expected a comma-separated list of integers)"
                ))
            })?;
        if !nodes.contains(&node) {
            nodes.push(node);
        }
    }
    Ok(nodes)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;
    use proptest::prelude::*;

    fn spec(s: &str) -> Result<ResourceSpec, String> {
        s.parse()
    }

    #[test]
    fn resource_specs_by_the_abnf() {
        assert_eq!(
            spec("gpu").unwrap(),
            ResourceSpec {
                resource_type: "gpu".into(),
                subtype: None
            }
        );
        assert_eq!(
            spec("gpu-memory").unwrap(),
            ResourceSpec {
                resource_type: "gpu".into(),
                subtype: Some("memory".into())
            }
        );
        assert!(spec("a1234567890123456").is_err(), "type of 17");
        assert_eq!(
            spec("a123456789012345").unwrap().to_string(),
            "a123456789012345"
        );
        for bad in [
            "",
            "1gpu",
            "gpu-",
            "-gpu",
            "gpu-a-b",
            "gpu_x",
            "gpu-1234567890123456",
            "gpü",
            "gpu ",
        ] {
            assert!(spec(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            spec("gpu-").unwrap_err(),
            "\"gpu-\" is not a resource-spec: the subtype after '-' must be 1 to 15 letters or digits"
        );
        assert_eq!(
            spec("1gpu").unwrap_err(),
            "\"1gpu\" is not a resource-spec: the type must be a letter then at most 15 letters or digits"
        );
    }

    #[test]
    fn supported_subtypes_are_numa_nodes() {
        let want = |s: &str| spec(s).unwrap().want("gpu");
        assert_eq!(want("gpu"), Some(Want::Any));
        assert_eq!(want("gpu-numa0"), Some(Want::Numa(0)));
        assert_eq!(want("gpu-numa12"), Some(Want::Numa(12)));
        assert_eq!(want("gpu-numa01"), None);
        assert_eq!(want("gpu-numa"), None);
        assert_eq!(want("gpu-numa99999999999"), None);
        assert_eq!(want("gpu-memory"), None);
        assert_eq!(want("tty"), None);
        assert_eq!(want("GPU"), None);
    }

    #[test]
    fn requests_item_by_item() {
        let items = parse_request(Some("gpu:1,gpu-numa1:2"), "gpu").unwrap();
        assert_eq!(
            items,
            [
                Item {
                    spec: spec("gpu").unwrap(),
                    want: Want::Any,
                    amount: 1
                },
                Item {
                    spec: spec("gpu-numa1").unwrap(),
                    want: Want::Numa(1),
                    amount: 2
                }
            ]
        );
        let err = |v: &str| parse_request(Some(v), "gpu").unwrap_err();
        // The seed's example: an unsupported subtype wins over its amount.
        let e = err("gpu:1,gpu-memory:2048Mi");
        assert_eq!(e.code, Code::ResourceSpec);
        assert_eq!(
            e.details.as_deref(),
            Some("Unsupported resource-spec: gpu-memory")
        );
        let e = err("tty:3");
        assert_eq!(e.code, Code::ResourceSpec);
        assert_eq!(e.details.as_deref(), Some("Unsupported resource-spec: tty"));
        for (v, details) in [
            (
                "gpu",
                "CDI_REQUEST: \"gpu\" is not <resource-spec>:<amount>",
            ),
            (
                "gpu:0",
                "CDI_REQUEST: the amount of gpu, \"0\", is not a positive integer",
            ),
            (
                "gpu:+1",
                "CDI_REQUEST: the amount of gpu, \"+1\", is not a positive integer",
            ),
            (
                "gpu:1Gi",
                "CDI_REQUEST: the amount of gpu, \"1Gi\", is not a positive integer",
            ),
            (
                "gpu:4294967296",
                "CDI_REQUEST: the amount of gpu, \"4294967296\", is not a positive integer",
            ),
            (
                "gpu:1,",
                "CDI_REQUEST: \"\" is not <resource-spec>:<amount>",
            ),
            ("gpu:1,gpu:2", "CDI_REQUEST: gpu is listed twice"),
            (
                "gpu_x:1",
                "CDI_REQUEST: \"gpu_x\" is not a resource-spec: the type must be a letter then at most 15 letters or digits",
            ),
        ] {
            let e = err(v);
            assert_eq!(e.code, Code::Parameter, "{v}");
            assert_eq!(e.details.as_deref(), Some(details), "{v}");
        }
        assert_eq!(
            parse_request(None, "gpu").unwrap_err().details.as_deref(),
            Some("CDI_REQUEST is not set")
        );
        assert_eq!(
            parse_request(Some(""), "gpu")
                .unwrap_err()
                .details
                .as_deref(),
            Some("CDI_REQUEST is empty")
        );
    }

    #[test]
    fn request_ids() {
        assert_eq!(parse_request_id(Some("1234")).unwrap(), "1234");
        let uuid = "0f8fad5b-d9cb-469f-a165-70867728950e";
        assert_eq!(parse_request_id(Some(uuid)).unwrap(), uuid);
        assert!(parse_request_id(Some(&"a".repeat(64))).is_ok());
        for bad in ["", "-a", "a b", "a_b", "é"] {
            assert_eq!(
                parse_request_id(Some(bad)).unwrap_err().code,
                Code::Parameter,
                "{bad:?}"
            );
        }
        assert_eq!(
            parse_request_id(Some(&"a".repeat(65))).unwrap_err().code,
            Code::Parameter
        );
        assert_eq!(
            parse_request_id(None).unwrap_err().details.as_deref(),
            Some("CDI_REQUEST_ID is not set")
        );
    }

    #[test]
    fn numa_locality() {
        assert_eq!(parse_numa_locality(None).unwrap(), Vec::<u32>::new());
        assert_eq!(parse_numa_locality(Some("")).unwrap(), Vec::<u32>::new());
        assert_eq!(parse_numa_locality(Some("1,0,1")).unwrap(), [1, 0]);
        for bad in ["a", "1,", ",1", "-1", "1 ,2", "99999999999"] {
            let e = parse_numa_locality(Some(bad)).unwrap_err();
            assert_eq!(e.code, Code::Parameter, "{bad:?}");
        }
        assert_eq!(
            parse_numa_locality(Some("x"))
                .unwrap_err()
                .details
                .as_deref(),
            Some(
                "CDI_REQUEST_NUMA_LOCALITY: \"x\" is not a NUMA node number (expected a comma-separated list of integers)"
            )
        );
    }

    proptest! {
        #[test]
        fn parsers_never_panic(s in "\\PC{0,80}") {
            let _ = s.parse::<ResourceSpec>();
            let _ = parse_request(Some(&s), "gpu");
            let _ = parse_request_id(Some(&s));
            let _ = parse_numa_locality(Some(&s));
        }

        #[test]
        fn valid_specs_round_trip(s in "[A-Za-z][A-Za-z0-9]{0,15}(-[A-Za-z0-9]{1,15})?") {
            let parsed: ResourceSpec = s.parse().unwrap();
            prop_assert_eq!(parsed.to_string(), s);
        }

        #[test]
        fn accepted_specs_match_the_abnf(s in "[A-Za-z0-9_-]{0,40}") {
            let abnf = |t: &str, sub: Option<&str>| {
                is_resource_type(t)
                    && sub.is_none_or(|x| !x.is_empty() && x.len() <= 15 && alnum(x))
            };
            let expected = match s.split_once('-') {
                Some((t, sub)) => abnf(t, Some(sub)),
                None => abnf(&s, None),
            };
            prop_assert_eq!(s.parse::<ResourceSpec>().is_ok(), expected);
        }

        #[test]
        fn request_ids_match_the_abnf(s in "[A-Za-z0-9-]{1,64}", long in "[a-z0-9]{65,80}") {
            prop_assert_eq!(is_request_id(&s), !s.starts_with('-'));
            prop_assert!(!is_request_id(&long));
        }

        #[test]
        fn well_formed_requests_parse_back(
            items in proptest::collection::btree_map(0u32..64, 1u32..1000, 1..6),
            with_plain in any::<bool>(),
            plain_amount in 1u32..100,
        ) {
            let mut parts: Vec<String> = items.iter().map(|(n, a)| format!("gpu-numa{n}:{a}")).collect();
            if with_plain {
                parts.insert(0, format!("gpu:{plain_amount}"));
            }
            let parsed = parse_request(Some(&parts.join(",")), "gpu").unwrap();
            prop_assert_eq!(parsed.len(), parts.len());
            for (item, part) in parsed.iter().zip(&parts) {
                prop_assert_eq!(&format!("{}:{}", item.spec, item.amount), part);
            }
        }
    }
}

//! CDI names: `kind` (`vendor/class`), device names, and fully-qualified
//! device names (`vendor/class=name`), with the reference library's
//! character rules and the spec text's length limits.
//!
//! Stricter than the reference library where released runtimes break:
//! a one-character vendor or class crashes every released Go CDI library,
//! so it is refused here.

use std::fmt;

/// Longest vendor (a DNS subdomain).
pub const MAX_VENDOR_LEN: usize = 253;
/// Longest class (the spec text's limit).
pub const MAX_CLASS_LEN: usize = 63;

/// Why a name is not a valid CDI name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The name is empty.
    #[error("invalid {what}: empty name")]
    Empty {
        /// What was being checked (`vendor`, `class`, `device name`).
        what: &'static str,
    },
    /// The name breaks a rule.
    #[error("invalid {what} {name:?}: {reason}")]
    Invalid {
        /// What was being checked.
        what: &'static str,
        /// The offending name.
        name: String,
        /// What was expected.
        reason: String,
    },
}

fn invalid(what: &'static str, name: &str, reason: impl Into<String>) -> NameError {
    NameError::Invalid {
        what,
        name: name.to_string(),
        reason: reason.into(),
    }
}

/// Checks the shared vendor/class charset: ASCII letter first, letter or
/// digit last, `[A-Za-z0-9_.-]` in between.
fn check_vendor_or_class(what: &'static str, name: &str, max: usize) -> Result<(), NameError> {
    let bytes = name.as_bytes();
    let (Some(&first), Some(&last)) = (bytes.first(), bytes.last()) else {
        return Err(NameError::Empty { what });
    };
    if bytes.len() < 2 {
        return Err(invalid(
            what,
            name,
            "must be at least 2 characters (released CDI libraries crash on 1)",
        ));
    }
    if bytes.len() > max {
        return Err(invalid(
            what,
            name,
            format!("must be at most {max} characters, not {}", bytes.len()),
        ));
    }
    if !first.is_ascii_alphabetic() {
        return Err(invalid(what, name, "must start with an ASCII letter"));
    }
    if !last.is_ascii_alphanumeric() {
        return Err(invalid(
            what,
            name,
            "must end with an ASCII letter or digit",
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        return Err(invalid(
            what,
            name,
            format!("invalid character {c:?} (allowed: A-Z a-z 0-9 _ . -)"),
        ));
    }
    Ok(())
}

/// Validates a vendor (`amd.com`): DNS-subdomain-like, 2 to 253 characters.
///
/// # Errors
/// A [`NameError`] saying which rule failed.
pub fn validate_vendor(vendor: &str) -> Result<(), NameError> {
    check_vendor_or_class("vendor", vendor, MAX_VENDOR_LEN)?;
    if vendor.contains("..") {
        return Err(invalid(
            "vendor",
            vendor,
            "must be a DNS subdomain (empty label between dots)",
        ));
    }
    Ok(())
}

/// Validates a class (`gpu`): 2 to 63 characters.
///
/// # Errors
/// A [`NameError`] saying which rule failed.
pub fn validate_class(class: &str) -> Result<(), NameError> {
    check_vendor_or_class("class", class, MAX_CLASS_LEN)
}

/// Validates a device name: letter or digit at both ends,
/// `[A-Za-z0-9_.:-]` in between.
///
/// # Errors
/// A [`NameError`] saying which rule failed.
pub fn validate_device_name(name: &str) -> Result<(), NameError> {
    const WHAT: &str = "device name";
    let bytes = name.as_bytes();
    let (Some(&first), Some(&last)) = (bytes.first(), bytes.last()) else {
        return Err(NameError::Empty { what: WHAT });
    };
    if !first.is_ascii_alphanumeric() {
        return Err(invalid(
            WHAT,
            name,
            "must start with an ASCII letter or digit",
        ));
    }
    if !last.is_ascii_alphanumeric() {
        return Err(invalid(
            WHAT,
            name,
            "must end with an ASCII letter or digit",
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-')))
    {
        return Err(invalid(
            WHAT,
            name,
            format!("invalid character {c:?} (allowed: A-Z a-z 0-9 _ . : -)"),
        ));
    }
    Ok(())
}

/// A parsed and validated `vendor/class`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Kind {
    vendor: String,
    class: String,
}

impl Kind {
    /// Parses `vendor/class`, splitting at the first `/` as the reference
    /// library does (a second `/` fails the class charset).
    ///
    /// # Errors
    /// A [`NameError`] for a missing `/` or an invalid vendor or class.
    pub fn parse(kind: &str) -> Result<Self, NameError> {
        let Some((vendor, class)) = kind.split_once('/') else {
            return Err(if kind.is_empty() {
                NameError::Empty { what: "kind" }
            } else {
                invalid("kind", kind, "must be vendor/class, e.g. example.com/gpu")
            });
        };
        validate_vendor(vendor)?;
        validate_class(class)?;
        Ok(Kind {
            vendor: vendor.to_string(),
            class: class.to_string(),
        })
    }

    /// The vendor part (`amd.com`).
    pub fn vendor(&self) -> &str {
        &self.vendor
    }

    /// The class part (`gpu`).
    pub fn class(&self) -> &str {
        &self.class
    }

    /// The file stem the reference library's `GenerateSpecName` gives:
    /// `vendor-class`.
    pub fn spec_file_stem(&self) -> String {
        format!("{}-{}", self.vendor, self.class)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.vendor, self.class)
    }
}

/// A fully-qualified device name, `vendor/class=name`: what a user passes
/// to `podman run --device`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QualifiedName {
    kind: Kind,
    name: String,
}

impl QualifiedName {
    /// Builds a qualified name from a kind and a device name.
    ///
    /// # Errors
    /// A [`NameError`] when the device name is invalid.
    pub fn new(kind: Kind, name: &str) -> Result<Self, NameError> {
        validate_device_name(name)?;
        Ok(QualifiedName {
            kind,
            name: name.to_string(),
        })
    }

    /// Parses `vendor/class=name` (split at the first `=`, then the kind at
    /// the first `/`).
    ///
    /// # Errors
    /// A [`NameError`] naming the part that is invalid.
    pub fn parse(s: &str) -> Result<Self, NameError> {
        let Some((kind, name)) = s.split_once('=') else {
            return Err(invalid(
                "qualified device name",
                s,
                "must be vendor/class=name",
            ));
        };
        QualifiedName::new(Kind::parse(kind)?, name)
    }

    /// The kind part.
    pub fn kind(&self) -> &Kind {
        &self.kind
    }

    /// The device name part.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Display for QualifiedName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.kind, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(r: Result<impl fmt::Debug, NameError>) -> String {
        match r {
            Ok(v) => format!("ok {v:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn kinds() {
        let cases = [
            ("vendor.com/device", "ok"),
            ("foo.bar.baz/foo-bar123.B_az", "ok"),
            ("nvidia.com/gpu", "ok"),
            ("", "invalid kind: empty name"),
            (
                "foo",
                "invalid kind \"foo\": must be vendor/class, e.g. example.com/gpu",
            ),
            ("/gpu", "invalid vendor: empty name"),
            ("vendor.com/", "invalid class: empty name"),
            (
                "vendor.com/foo/bar",
                "invalid class \"foo/bar\": invalid character '/' (allowed: A-Z a-z 0-9 _ . -)",
            ),
            (
                "vendor.com-/device",
                "invalid vendor \"vendor.com-\": must end with an ASCII letter or digit",
            ),
            (
                "vendor.com/device=",
                "invalid class \"device=\": must end with an ASCII letter or digit",
            ),
            (
                "v/gpu",
                "invalid vendor \"v\": must be at least 2 characters (released CDI libraries crash on 1)",
            ),
            (
                "vendor.com/g",
                "invalid class \"g\": must be at least 2 characters (released CDI libraries crash on 1)",
            ),
            (
                "1vendor.com/gpu",
                "invalid vendor \"1vendor.com\": must start with an ASCII letter",
            ),
            (
                "vendor.com/1gpu",
                "invalid class \"1gpu\": must start with an ASCII letter",
            ),
            (
                "vendor..com/gpu",
                "invalid vendor \"vendor..com\": must be a DNS subdomain (empty label between dots)",
            ),
        ];
        for (input, want) in cases {
            let got = reason(Kind::parse(input));
            if want == "ok" {
                assert!(got.starts_with("ok"), "{input}: {got}");
            } else {
                assert_eq!(got, want, "{input}");
            }
        }
    }

    #[test]
    fn class_length_limit() {
        let ok = format!("vendor.com/{}", "a".repeat(63));
        assert!(Kind::parse(&ok).is_ok());
        let long = format!("vendor.com/{}", "a".repeat(64));
        assert_eq!(
            reason(Kind::parse(&long)),
            format!(
                "invalid class \"{}\": must be at most 63 characters, not 64",
                "a".repeat(64)
            )
        );
    }

    #[test]
    fn device_names() {
        for ok in ["0", "gpu0", "1:0", "GPU-1234-abcd", "a.b_c-d:e", "x"] {
            assert_eq!(validate_device_name(ok), Ok(()), "{ok}");
        }
        let bad = [
            ("", "invalid device name: empty name"),
            (
                "-a",
                "invalid device name \"-a\": must start with an ASCII letter or digit",
            ),
            (
                "a:",
                "invalid device name \"a:\": must end with an ASCII letter or digit",
            ),
            (
                "a b",
                "invalid device name \"a b\": invalid character ' ' (allowed: A-Z a-z 0-9 _ . : -)",
            ),
            (
                "a=b",
                "invalid device name \"a=b\": invalid character '=' (allowed: A-Z a-z 0-9 _ . : -)",
            ),
            (
                "gpü0",
                "invalid device name \"gpü0\": invalid character 'ü' (allowed: A-Z a-z 0-9 _ . : -)",
            ),
        ];
        for (input, want) in bad {
            assert_eq!(reason(validate_device_name(input)), want);
        }
    }

    #[test]
    fn qualified_names_round_trip() {
        let q = QualifiedName::parse("nvidia.com/gpu=0").expect("valid");
        assert_eq!(q.kind().vendor(), "nvidia.com");
        assert_eq!(q.kind().class(), "gpu");
        assert_eq!(q.name(), "0");
        assert_eq!(q.to_string(), "nvidia.com/gpu=0");
        assert_eq!(q.kind().spec_file_stem(), "nvidia.com-gpu");
        assert_eq!(
            reason(QualifiedName::parse("nvidia.com/gpu")),
            "invalid qualified device name \"nvidia.com/gpu\": must be vendor/class=name"
        );
        assert_eq!(
            reason(QualifiedName::parse("nvidia.com/gpu=a=b")),
            "invalid device name \"a=b\": invalid character '=' (allowed: A-Z a-z 0-9 _ . : -)"
        );
    }

    mod prop {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn parse_never_panics(s in "\\PC{0,80}") {
                let _ = QualifiedName::parse(&s);
                let _ = Kind::parse(&s);
            }

            #[test]
            fn valid_names_round_trip(
                vendor in "[a-z][a-z0-9-]{0,10}[a-z0-9](\\.[a-z][a-z0-9]{1,5})?",
                class in "[a-z][a-z0-9_.-]{0,20}[a-z0-9]",
                name in "[A-Za-z0-9]([A-Za-z0-9_.:-]{0,20}[A-Za-z0-9])?",
            ) {
                let s = format!("{vendor}/{class}={name}");
                let q = QualifiedName::parse(&s).map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(q.to_string(), s);
            }
        }
    }
}

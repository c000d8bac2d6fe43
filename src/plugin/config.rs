//! The plugin configuration the caller passes on stdin
//! (`/etc/cdi/<type>.d/<plugin>.conf`), checked field by field so that an
//! error names the field.

use serde_json::{Map, Value};

use super::request::is_resource_type;
use super::{Code, Failure};

/// Largest configuration read from stdin.
pub const MAX_CONFIG_BYTES: usize = 1 << 20;

/// A plugin configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `cdiVersion`: the draft version the configuration follows.
    pub cdi_version: String,
    /// `name`: descriptive only.
    pub name: String,
    /// `type`: the `resource-type` this plugin serves (`gpu`).
    pub resource_type: String,
    /// `plugin`: the binary's name; cdigen takes it as the generator that
    /// defines the device pool, unless `args.generator` names one.
    pub plugin: String,
    /// `args`, as cdigen reads them.
    pub args: Args,
}

/// The `args` cdigen understands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Args {
    /// `generator`: the generator whose devices form the pool (default:
    /// `plugin`).
    pub generator: Option<String>,
    /// `want_device_nodes` (alias `want_device_types`, the draft's prose
    /// name): node roles to hand out (`primary`, `render`); empty means the
    /// generator's.
    pub want_device_nodes: Vec<String>,
    /// `vendorid_whitelist`: PCI vendor IDs (`"0x1234"`); empty means any.
    pub vendorid_whitelist: Vec<String>,
    /// `num_system_reserved`: how many devices at the start of the pool
    /// are never handed out; when given, it replaces the generator's own
    /// `reserve` (the same notion: `generic-tty` reserves 12 VTs either
    /// way).
    pub num_system_reserved: Option<u32>,
}

impl Config {
    /// The generator that defines the pool.
    pub fn generator(&self) -> &str {
        self.args.generator.as_deref().unwrap_or(&self.plugin)
    }
}

fn bad(details: String) -> Failure {
    Failure::new(Code::Config, "Invalid configuration").details(details)
}

/// The `cdiVersion` of a configuration, read leniently (for the version
/// of error replies before the configuration is checked).
pub fn peek_version(bytes: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(bytes).ok()?;
    v.get("cdiVersion")?.as_str().map(str::to_string)
}

/// Parses and checks a configuration. Keys cdigen does not know, at the
/// top level or in `args`, are returned as warnings and otherwise ignored
/// (the draft leaves `args` to each plugin).
///
/// # Errors
/// [`Code::Config`] naming the field that is missing or wrong.
pub fn parse(bytes: &[u8]) -> Result<(Config, Vec<String>), Failure> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(bad("no configuration on stdin".into()));
    }
    if bytes.len() > MAX_CONFIG_BYTES {
        return Err(bad(format!(
            "the configuration on stdin is larger than {MAX_CONFIG_BYTES} bytes"
        )));
    }
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| bad(format!("the configuration on stdin is not JSON: {e}")))?;
    let Value::Object(top) = value else {
        return Err(bad("the configuration must be a JSON object".into()));
    };
    let mut warnings = Vec::new();
    for key in top.keys() {
        if !matches!(
            key.as_str(),
            "cdiVersion" | "name" | "type" | "plugin" | "args"
        ) {
            warnings.push(format!("configuration: ignoring unknown field {key:?}"));
        }
    }
    let cdi_version = string(&top, "cdiVersion", "")?;
    let name = string(&top, "name", "")?;
    let resource_type = string(&top, "type", "")?;
    if !is_resource_type(&resource_type) {
        return Err(bad(format!(
            "type: {resource_type:?} is not a resource-type (a letter then at most 15 letters or digits)"
        )));
    }
    let plugin = string(&top, "plugin", "")?;
    let args = match top.get("args") {
        None | Some(Value::Null) => Args::default(),
        Some(Value::Object(a)) => parse_args(a, &mut warnings)?,
        Some(_) => return Err(bad("args: must be an object".into())),
    };
    Ok((
        Config {
            cdi_version,
            name,
            resource_type,
            plugin,
            args,
        },
        warnings,
    ))
}

fn string(obj: &Map<String, Value>, key: &str, prefix: &str) -> Result<String, Failure> {
    match obj.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        None => Err(bad(format!("missing field {prefix}{key}"))),
        Some(_) => Err(bad(format!("{prefix}{key}: must be a string"))),
    }
}

fn strings(value: &Value, field: &str) -> Result<Vec<String>, Failure> {
    let Value::Array(items) = value else {
        return Err(bad(format!("args.{field}: must be a list of strings")));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, v)| match v {
            Value::String(s) => Ok(s.clone()),
            _ => Err(bad(format!("args.{field}[{i}]: must be a string"))),
        })
        .collect()
}

fn parse_args(a: &Map<String, Value>, warnings: &mut Vec<String>) -> Result<Args, Failure> {
    let mut args = Args::default();
    if a.contains_key("want_device_nodes") && a.contains_key("want_device_types") {
        return Err(bad(
            "args: want_device_nodes and want_device_types (its alias) are both given".into(),
        ));
    }
    for (key, value) in a {
        match key.as_str() {
            "generator" => match value {
                Value::String(s) => args.generator = Some(s.clone()),
                _ => return Err(bad("args.generator: must be a string".into())),
            },
            "want_device_nodes" | "want_device_types" => {
                args.want_device_nodes = strings(value, key)?;
            }
            "vendorid_whitelist" => args.vendorid_whitelist = strings(value, key)?,
            "num_system_reserved" => {
                args.num_system_reserved = Some(
                    value
                        .as_u64()
                        .and_then(|n| u32::try_from(n).ok())
                        .ok_or_else(|| {
                            bad("args.num_system_reserved: must be a non-negative integer".into())
                        })?,
                );
            }
            other => warnings.push(format!("configuration: ignoring unknown args.{other}")),
        }
    }
    Ok(args)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// The draft's `/etc/cdi/gpu.d/drm.conf`.
    const DRM_CONF: &str = r#"{
      "cdiVersion": "0.0.1",
      "name": "DRM GPUs from vendor International Amazing Graphics Inc.",
      "type": "gpu",
      "plugin": "drm",
      "args": {
        "want_device_nodes" : [ "primary", "render" ],
        "vendorid_whitelist": [ "0x1234", "0x2345" ]
      }
    }"#;

    /// The draft's `/etc/cdi/tty.d/generic.conf`.
    const TTY_CONF: &str = r#"{
      "cdiVersion": "0.0.1",
      "name": "TTYs",
      "type": "tty",
      "plugin": "generic-tty",
      "args": { "num_system_reserved": 12 }
    }"#;

    fn details(text: &str) -> String {
        let e = parse(text.as_bytes()).unwrap_err();
        assert_eq!(e.code, Code::Config);
        e.details.unwrap()
    }

    #[test]
    fn the_drafts_examples() {
        let (c, w) = parse(DRM_CONF.as_bytes()).unwrap();
        assert!(w.is_empty());
        assert_eq!(c.cdi_version, "0.0.1");
        assert_eq!(c.resource_type, "gpu");
        assert_eq!(c.generator(), "drm");
        assert_eq!(c.args.want_device_nodes, ["primary", "render"]);
        assert_eq!(c.args.vendorid_whitelist, ["0x1234", "0x2345"]);
        assert_eq!(c.args.num_system_reserved, None);
        let (c, _) = parse(TTY_CONF.as_bytes()).unwrap();
        assert_eq!(c.generator(), "generic-tty");
        assert_eq!(c.args.num_system_reserved, Some(12));
    }

    #[test]
    fn unknown_keys_are_warnings_and_the_alias_is_read() {
        let text = r#"{"cdiVersion":"0.0.1","name":"n","type":"gpu","plugin":"drm","extra":1,
            "args":{"want_device_types":["render"],"generator":"amd-gpu","colour":"red"}}"#;
        let (c, w) = parse(text.as_bytes()).unwrap();
        assert_eq!(c.args.want_device_nodes, ["render"]);
        assert_eq!(c.generator(), "amd-gpu");
        assert_eq!(
            w,
            [
                "configuration: ignoring unknown field \"extra\"",
                "configuration: ignoring unknown args.colour"
            ]
        );
    }

    #[test]
    fn errors_name_the_field() {
        assert_eq!(details(""), "no configuration on stdin");
        assert_eq!(details("[1]"), "the configuration must be a JSON object");
        assert!(details("{").starts_with("the configuration on stdin is not JSON: EOF"));
        assert_eq!(
            details(r#"{"cdiVersion":"0.0.1","type":"gpu","plugin":"drm"}"#),
            "missing field name"
        );
        assert_eq!(
            details(r#"{"cdiVersion":"0.0.1","name":"n","type":"gpu","plugin":7}"#),
            "plugin: must be a string"
        );
        assert_eq!(
            details(r#"{"cdiVersion":"0.0.1","name":"n","type":"g-pu","plugin":"drm"}"#),
            "type: \"g-pu\" is not a resource-type (a letter then at most 15 letters or digits)"
        );
        let with_args = |args: &str| {
            details(&format!(
                r#"{{"cdiVersion":"0.0.1","name":"n","type":"gpu","plugin":"drm","args":{args}}}"#
            ))
        };
        assert_eq!(with_args("[]"), "args: must be an object");
        assert_eq!(
            with_args(r#"{"num_system_reserved":-1}"#),
            "args.num_system_reserved: must be a non-negative integer"
        );
        assert_eq!(
            with_args(r#"{"vendorid_whitelist":["0x1234",5]}"#),
            "args.vendorid_whitelist[1]: must be a string"
        );
        assert_eq!(
            with_args(r#"{"want_device_nodes":"render"}"#),
            "args.want_device_nodes: must be a list of strings"
        );
        assert_eq!(
            with_args(r#"{"want_device_nodes":[],"want_device_types":[]}"#),
            "args: want_device_nodes and want_device_types (its alias) are both given"
        );
        let big = format!("{{\"name\":\"{}\"}}", "x".repeat(MAX_CONFIG_BYTES));
        assert_eq!(
            details(&big),
            "the configuration on stdin is larger than 1048576 bytes"
        );
    }

    #[test]
    fn peeking_the_version_is_lenient() {
        assert_eq!(peek_version(DRM_CONF.as_bytes()).as_deref(), Some("0.0.1"));
        assert_eq!(peek_version(br#"{"cdiVersion":1}"#), None);
        assert_eq!(peek_version(b"nonsense"), None);
    }
}

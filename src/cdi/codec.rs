//! Reading and writing spec files as JSON or YAML.
//!
//! Reading is strict (unknown fields and duplicate keys are errors), as
//! runtimes read. Writing is canonical: devices in natural name order,
//! maps sorted, fields in the reference library's order, so the same spec
//! always gives the same bytes. YAML output quotes every string scalar,
//! because runtimes read YAML 1.1, where an unquoted `on`, `yes` or `0777`
//! silently becomes a boolean or a number.

use std::cmp::Ordering;
use std::path::Path;

use super::spec::Spec;

/// A spec file encoding, chosen by the file extension as runtimes do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// `.json`
    Json,
    /// `.yaml`
    Yaml,
}

impl Format {
    /// The format of a spec file, or `None` when runtimes would not load it
    /// (only `.json` and `.yaml` are loaded; `.yml` is not).
    pub fn from_path(path: &Path) -> Option<Format> {
        // By name suffix, as runtimes match: a file named just `.json` counts.
        let name = path.file_name()?.to_str()?;
        if name.ends_with(".json") {
            Some(Format::Json)
        } else if name.ends_with(".yaml") {
            Some(Format::Yaml)
        } else {
            None
        }
    }

    /// The file extension, without the dot.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::Yaml => "yaml",
        }
    }
}

/// Why bytes could not be read as a spec.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// Nothing but whitespace.
    #[error("file is empty (expected a CDI spec)")]
    Empty,
    /// JSON syntax or a field the model does not know.
    #[error("invalid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// YAML syntax or a field the model does not know.
    #[error("invalid YAML: {0}")]
    Yaml(String),
    /// Not UTF-8.
    #[error("not UTF-8 text")]
    NotUtf8,
}

/// Why a spec could not be serialized.
#[derive(Debug, thiserror::Error)]
pub enum SerializeError {
    /// JSON serialization failed.
    #[error("cannot serialize as JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// YAML serialization failed.
    #[error("cannot serialize as YAML: {0}")]
    Yaml(#[from] serde_saphyr::ser::Error),
}

/// Parses a spec strictly.
///
/// # Errors
/// [`ParseError`] for empty input, bad syntax, unknown fields or duplicate
/// keys.
pub fn parse(bytes: &[u8], format: Format) -> Result<Spec, ParseError> {
    let text = std::str::from_utf8(bytes).map_err(|_| ParseError::NotUtf8)?;
    if text.trim().is_empty() {
        return Err(ParseError::Empty);
    }
    match format {
        Format::Json => Ok(serde_json::from_str(text)?),
        Format::Yaml => {
            let options = serde_saphyr::options! {
                duplicate_keys: serde_saphyr::options::DuplicateKeyPolicy::Error,
                with_snippet: false,
            };
            serde_saphyr::from_str_with_options(text, options)
                // The user-facing wording (the default has developer hints).
                .map_err(|e| {
                    ParseError::Yaml(e.render_with_formatter(&serde_saphyr::UserMessageFormatter))
                })
        }
    }
}

/// Serializes a spec as written by cdigen: pretty JSON or fully quoted YAML,
/// ending with a newline.
///
/// # Errors
/// [`SerializeError`] if the serializer fails (not expected for this model).
pub fn to_bytes(spec: &Spec, format: Format) -> Result<Vec<u8>, SerializeError> {
    match format {
        Format::Json => {
            let mut out = serde_json::to_vec_pretty(spec)?;
            out.push(b'\n');
            Ok(out)
        }
        Format::Yaml => {
            let options = serde_saphyr::ser_options! {
                quote_all: true,
            };
            let mut out = String::from("---\n");
            out.push_str(&serde_saphyr::to_string_with_options(spec, options)?);
            if !out.ends_with('\n') {
                out.push('\n');
            }
            Ok(out.into_bytes())
        }
    }
}

/// Puts a spec in canonical order: devices sorted by name in natural order
/// (`gpu2` before `gpu10`). Edits keep their order: it is meaningful.
pub fn canonicalize(spec: &mut Spec) {
    spec.devices
        .sort_by(|a, b| natural_cmp(&a.name, &b.name).then_with(|| a.name.cmp(&b.name)));
}

/// Compares strings with runs of ASCII digits compared as numbers.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    loop {
        match (a.first(), b.first()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let da = a.iter().take_while(|c| c.is_ascii_digit()).count();
                let db = b.iter().take_while(|c| c.is_ascii_digit()).count();
                let (na, ra) = a.split_at(da);
                let (nb, rb) = b.split_at(db);
                let strip =
                    |n: &'_ [u8]| -> usize { n.iter().position(|c| *c != b'0').unwrap_or(n.len()) };
                let (ta, tb) = (
                    na.get(strip(na)..).unwrap_or(&[]),
                    nb.get(strip(nb)..).unwrap_or(&[]),
                );
                let ord = ta.len().cmp(&tb.len()).then_with(|| ta.cmp(tb));
                if ord != Ordering::Equal {
                    return ord;
                }
                a = ra;
                b = rb;
            }
            (Some(x), Some(y)) => {
                if x != y {
                    return x.cmp(y);
                }
                a = a.get(1..).unwrap_or(&[]);
                b = b.get(1..).unwrap_or(&[]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cdi::spec::{ContainerEdits, Device, DeviceNode};

    fn sample() -> Spec {
        let dev = |name: &str| Device {
            name: name.into(),
            container_edits: ContainerEdits {
                env: vec![format!("NAME={name}")],
                device_nodes: vec![DeviceNode {
                    path: "/dev/dri/card1".into(),
                    node_type: "c".into(),
                    major: 226,
                    minor: 1,
                    file_mode: Some(0o660),
                    permissions: "rw".into(),
                    gid: Some(44),
                    ..Default::default()
                }],
                ..Default::default()
            },
            ..Default::default()
        };
        Spec {
            cdi_version: "0.5.0".into(),
            kind: "example.com/gpu".into(),
            devices: vec![dev("10"), dev("on"), dev("2"), dev("0777"), dev("yes")],
            ..Default::default()
        }
    }

    #[test]
    fn natural_order() {
        let mut names = vec!["gpu10", "gpu2", "a", "gpu02", "1:10", "1:9", "10", "9", ""];
        names.sort_by(|a, b| natural_cmp(a, b).then_with(|| a.cmp(b)));
        assert_eq!(
            names,
            ["", "1:9", "1:10", "9", "10", "a", "gpu02", "gpu2", "gpu10"]
        );
    }

    #[test]
    fn json_round_trip_is_byte_identical() {
        let mut s = sample();
        canonicalize(&mut s);
        let bytes = to_bytes(&s, Format::Json).expect("serialize");
        let back = parse(&bytes, Format::Json).expect("parse");
        assert_eq!(back, s);
        assert_eq!(to_bytes(&back, Format::Json).expect("serialize"), bytes);
        let names: Vec<_> = s.devices.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["2", "10", "0777", "on", "yes"]);
    }

    #[test]
    fn yaml_quotes_every_string_scalar() {
        let mut s = sample();
        canonicalize(&mut s);
        let bytes = to_bytes(&s, Format::Yaml).expect("serialize");
        let text = String::from_utf8(bytes.clone()).expect("utf8");
        assert!(text.starts_with("---\n"), "{text}");
        for line in text.lines().skip(1) {
            // Every "key: value" or "- value" whose value is a string must be quoted.
            let value = line
                .trim_start()
                .trim_start_matches("- ")
                .split_once(": ")
                .map_or(line.trim_start().trim_start_matches("- "), |(_, v)| v);
            let numeric_field = ["major:", "minor:", "fileMode:", "gid:"]
                .iter()
                .any(|f| line.trim_start().trim_start_matches("- ").starts_with(f));
            if value.is_empty() || line.trim_end().ends_with(':') || numeric_field {
                continue;
            }
            assert!(
                value.starts_with('\'') || value.starts_with('"'),
                "unquoted scalar in line {line:?}\n{text}"
            );
        }
        let back = parse(&bytes, Format::Yaml).expect("parse");
        assert_eq!(back, s);
    }

    #[test]
    fn strict_reading() {
        let err = |text: &str, f: Format| match parse(text.as_bytes(), f) {
            Ok(s) => format!("parsed {s:?}"),
            Err(e) => e.to_string(),
        };
        assert_eq!(err("", Format::Json), "file is empty (expected a CDI spec)");
        assert_eq!(
            err("  \n", Format::Yaml),
            "file is empty (expected a CDI spec)"
        );
        let unknown = r#"{"cdiVersion":"0.3.0","kind":"a.com/b","devices":[],"xyzzy":1}"#;
        assert!(err(unknown, Format::Json).contains("unknown field `xyzzy`"));
        let dup = r#"{"cdiVersion":"0.3.0","cdiVersion":"0.5.0","kind":"a.com/b","devices":[]}"#;
        assert!(err(dup, Format::Json).contains("duplicate field `cdiVersion`"));
        let dup_ann = r#"{"cdiVersion":"0.6.0","kind":"a.com/b","annotations":{"a":"1","a":"2"},"devices":[]}"#;
        assert!(
            err(dup_ann, Format::Json).contains("duplicate key \"a\""),
            "{}",
            err(dup_ann, Format::Json)
        );
        let yaml_dup = "cdiVersion: 0.3.0\nkind: a.com/b\nkind: a.com/c\ndevices: []\n";
        assert!(
            err(yaml_dup, Format::Yaml)
                .to_lowercase()
                .contains("duplicate")
        );
        let yaml_unknown = "cdiVersion: 0.3.0\nkind: a.com/b\ndevices: []\nxyzzy: 1\n";
        assert!(err(yaml_unknown, Format::Yaml).contains("xyzzy"));
        assert_eq!(
            match parse(&[0xff, 0xfe], Format::Json) {
                Err(e) => e.to_string(),
                Ok(_) => String::new(),
            },
            "not UTF-8 text"
        );
    }

    #[test]
    fn extension_picks_format() {
        assert_eq!(
            Format::from_path(Path::new("/etc/cdi/a.json")),
            Some(Format::Json)
        );
        assert_eq!(Format::from_path(Path::new("a.yaml")), Some(Format::Yaml));
        assert_eq!(Format::from_path(Path::new("a.yml")), None);
        assert_eq!(Format::from_path(Path::new("a.json.tmp")), None);
        assert_eq!(
            Format::from_path(Path::new("/etc/cdi/.json")),
            Some(Format::Json)
        );
    }
}

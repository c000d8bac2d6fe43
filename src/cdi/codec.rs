//! Reading and writing spec files as JSON or YAML.
//!
//! Reading is strict (unknown fields and duplicate keys are errors), as
//! runtimes read, and reads YAML as runtimes do: as YAML 1.1 (see
//! `codec/yaml.rs`), where an unquoted `on` is a boolean. An unquoted
//! YAML 1.1 boolean, number or null where the spec wants a string is an
//! error that says what a runtime sees. Errors never quote the file's
//! content: spec directories are shared, and a spec file may be a symlink
//! to any file. Text is first parsed into a tree (syntax errors give a line,
//! a column and a fixed description), then the typed [`Spec`] is read from
//! the tree by a deserializer whose errors keep only a location such as
//! `devices[0].containerEdits.env[1]` and the kind of problem (see
//! `codec/tree.rs`).
//!
//! Writing is canonical: devices in natural name order,
//! maps sorted, fields in the reference library's order, so the same spec
//! always gives the same bytes. YAML output quotes every string scalar,
//! because runtimes read YAML 1.1, where an unquoted `on`, `yes` or `0777`
//! silently becomes a boolean or a number.

mod json;
mod tree;
mod yaml;

use std::cmp::Ordering;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::spec::{Device, Spec};

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
    ///
    /// Decided by the name's bytes, as runtimes decide: a name that is not
    /// UTF-8 still loads.
    pub fn from_path(path: &Path) -> Option<Format> {
        // By name suffix, as runtimes match: a file named just `.json` counts.
        let name = path.file_name()?.as_bytes();
        if name.ends_with(b".json") {
            Some(Format::Json)
        } else if name.ends_with(b".yaml") {
            Some(Format::Yaml)
        } else {
            None
        }
    }

    /// The name in messages (`JSON`, `YAML`).
    pub fn name(self) -> &'static str {
        match self {
            Format::Json => "JSON",
            Format::Yaml => "YAML",
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

/// Why bytes could not be read as a spec. No message quotes the content,
/// beyond a bounded, escaped field name or YAML 1.1 word.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Nothing but whitespace.
    #[error("file is empty (expected a CDI spec)")]
    Empty,
    /// Not UTF-8.
    #[error("not UTF-8 text")]
    NotUtf8,
    /// Bad syntax.
    #[error("invalid {}: {description} at line {line} column {column}", format.name())]
    Syntax {
        /// JSON or YAML.
        format: Format,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// A fixed description of the problem.
        description: String,
    },
    /// Well-formed, but not a spec: a wrong type, an unknown field, a
    /// duplicate key, or a YAML 1.1 surprise.
    #[error("invalid {}: {}{problem}", format.name(), location_prefix(location))]
    Content {
        /// JSON or YAML.
        format: Format,
        /// Where, such as `devices[0].name` (empty for the document).
        location: String,
        /// What is wrong.
        problem: String,
    },
}

fn location_prefix(location: &str) -> String {
    if location.is_empty() {
        String::new()
    } else {
        format!("{location}: ")
    }
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

/// Parses a spec strictly, YAML as YAML 1.1.
///
/// # Errors
/// [`ParseError`] for empty input, bad syntax, wrong types, unknown fields,
/// duplicate keys, or an unquoted YAML 1.1 boolean, number or null where a
/// string belongs. The message never quotes the content.
pub fn parse(bytes: &[u8], format: Format) -> Result<Spec, ParseError> {
    let text = std::str::from_utf8(bytes).map_err(|_| ParseError::NotUtf8)?;
    if text.trim().is_empty() {
        return Err(ParseError::Empty);
    }
    let node = match format {
        Format::Json => json::parse(text),
        Format::Yaml => yaml::parse(text),
    }
    .map_err(|e| ParseError::Syntax {
        format,
        line: e.line,
        column: e.column,
        description: e.description,
    })?;
    tree::from_node(&node).map_err(|e| ParseError::Content {
        format,
        location: e.location.unwrap_or_default(),
        problem: e.problem,
    })
}

/// Parses one CDI device from JSON as strictly as [`parse`] reads a whole
/// spec (unknown fields and duplicate keys are errors, messages never
/// quote the content), locations relative to the device
/// (`containerEdits.env[1]`). The renderer reads each device a template
/// writes with it, so that no more than one device is ever parsed at once.
///
/// # Errors
/// [`ParseError`] as for [`parse`]; [`ParseError::Empty`] for nothing but
/// whitespace.
pub fn parse_device_json(text: &str) -> Result<Device, ParseError> {
    if text.trim().is_empty() {
        return Err(ParseError::Empty);
    }
    let node = json::parse(text).map_err(|e| ParseError::Syntax {
        format: Format::Json,
        line: e.line,
        column: e.column,
        description: e.description,
    })?;
    tree::from_node(&node).map_err(|e| ParseError::Content {
        format: Format::Json,
        location: e.location.unwrap_or_default(),
        problem: e.problem,
    })
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
/// (`gpu2` before `gpu10`, `0000:05:00.0` before `0000:4f:00.0`). Edits keep their order: it is meaningful.
pub fn canonicalize(spec: &mut Spec) {
    spec.devices
        .sort_by(|a, b| natural_cmp(&a.name, &b.name).then_with(|| a.name.cmp(&b.name)));
}

/// Compares strings in natural order: runs of ASCII digits compared as
/// numbers (`gpu2` before `gpu10`), and PCI addresses compared as
/// addresses, by value (`0000:05:00.0` before `0000:4f:00.0`, which digit
/// runs would put the other way round: they are hex).
///
/// A PCI address is `DOMAIN:BB:DD.F` (4 to 8 hex digits of domain, either
/// case), or the same with `-` for each separator as names made of it have
/// it (`0000-4f-00-0`), starting a string or after a character that is not
/// a letter or digit, and not followed by one. Each string is cut into
/// tokens on its own (an address, a digit run, a byte), so the order is
/// total whatever the strings hold. Strings differing only in leading
/// zeros of a number compare equal (`gpu02`, `gpu2`): callers break the
/// tie.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut a, mut b) = (Tokens::new(a), Tokens::new(b));
    loop {
        match (a.next(), b.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) => {
                let ord = x.cmp(&y);
                if ord != Ordering::Equal {
                    return ord;
                }
            }
        }
    }
}

/// A piece of a string in natural order. Ordered by the byte a piece
/// sorts as (a number or an address as the digit `0`, among the bytes
/// where a digit is), then a number before an address (`0` before
/// `0000:05:00.0`, as an index before the address), then by value.
#[derive(Debug, PartialEq, Eq)]
enum Token<'a> {
    /// A byte that starts no number or address.
    Byte(u8),
    /// A PCI address, by value.
    Pci(u64),
    /// A digit run without its leading zeros: by length, then digits.
    Number(usize, &'a [u8]),
}

impl Token<'_> {
    /// The byte the token sorts as.
    fn lead(&self) -> u8 {
        match self {
            Token::Byte(b) => *b,
            Token::Pci(..) | Token::Number(..) => b'0',
        }
    }
}

impl PartialOrd for Token<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(Ord::cmp(self, other))
    }
}

impl Ord for Token<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        let rank = |t: &Token<'_>| match t {
            Token::Byte(_) => 0u8,
            Token::Number(..) => 1,
            Token::Pci(..) => 2,
        };
        self.lead()
            .cmp(&other.lead())
            .then_with(|| rank(self).cmp(&rank(other)))
            .then_with(|| match (self, other) {
                (Token::Pci(x), Token::Pci(y)) => x.cmp(y),
                (Token::Number(lx, x), Token::Number(ly, y)) => lx.cmp(ly).then(x.cmp(y)),
                _ => Ordering::Equal,
            })
    }
}

/// The tokens of a string, left to right.
struct Tokens<'a> {
    rest: &'a [u8],
    /// Whether the byte before `rest` is an ASCII letter or digit.
    after_alnum: bool,
}

impl<'a> Tokens<'a> {
    fn new(s: &'a str) -> Self {
        Tokens {
            rest: s.as_bytes(),
            after_alnum: false,
        }
    }
}

impl<'a> Iterator for Tokens<'a> {
    type Item = Token<'a>;

    fn next(&mut self) -> Option<Token<'a>> {
        let first = *self.rest.first()?;
        let (token, len) = match pci_address_at(self.rest).filter(|_| !self.after_alnum) {
            Some((value, len)) => (Token::Pci(value), len),
            None if first.is_ascii_digit() => {
                let len = self.rest.iter().take_while(|c| c.is_ascii_digit()).count();
                let digits = self.rest.get(..len).unwrap_or_default();
                let zeros = digits.iter().take_while(|c| **c == b'0').count();
                let value = digits.get(zeros..).unwrap_or_default();
                (Token::Number(value.len(), value), len)
            }
            None => (Token::Byte(first), 1),
        };
        self.rest = self.rest.get(len..).unwrap_or_default();
        self.after_alnum = match token {
            Token::Byte(b) => b.is_ascii_alphanumeric(),
            Token::Pci(..) | Token::Number(..) => true,
        };
        Some(token)
    }
}

/// The PCI address `s` starts with (`0000:4f:00.0`, `0000-4f-00-0`): its
/// value and length in bytes; `None` when it starts with none, or the
/// address runs on into a letter or digit.
fn pci_address_at(s: &[u8]) -> Option<(u64, usize)> {
    let hex = |at: usize, n: usize| -> Option<u64> {
        let digits = s.get(at..at + n)?;
        digits.iter().try_fold(0u64, |v, c| {
            let d = char::from(*c).to_digit(16)?;
            Some(v << 4 | u64::from(d))
        })
    };
    let domain_len = s
        .iter()
        .take(9)
        .take_while(|c| c.is_ascii_hexdigit())
        .count();
    if !(4..=8).contains(&domain_len) {
        return None;
    }
    let sep = *s.get(domain_len)?;
    let last_sep = match sep {
        b':' => b'.',
        b'-' => b'-',
        _ => return None,
    };
    let domain = hex(0, domain_len)?;
    let bus = hex(domain_len + 1, 2)?;
    let device = hex(domain_len + 4, 2)?;
    let function = hex(domain_len + 7, 1)?;
    if s.get(domain_len + 3) != Some(&sep) || s.get(domain_len + 6) != Some(&last_sep) {
        return None;
    }
    let len = domain_len + 8;
    if s.get(len).is_some_and(u8::is_ascii_alphanumeric) {
        return None;
    }
    Some((domain << 24 | bus << 16 | device << 8 | function, len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cdi::spec::{ContainerEdits, Device, DeviceNode};
    use proptest::prelude::*;

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
    fn pci_addresses_sort_by_value() {
        let mut names = vec![
            "0000:4f:00.0",
            "0000:05:00.0",
            "0000:05:00.0/xcp10",
            "0000:05:00.0/xcp2",
            "0000:a0:00.0",
            "0000:9f:01.1",
            "0000:10:00.0",
            "0001:00:00.0",
            "10000:e1:00.0",
            "pci-0000:4F:00.0",
            "pci-0000:3b:00.0",
            "sriov-0000-4f-00-2",
            "sriov-0000-05-00-2",
            "gpu10",
            "gpu2",
        ];
        names.sort_by(|a, b| natural_cmp(a, b).then_with(|| a.cmp(b)));
        assert_eq!(
            names,
            [
                "0000:05:00.0",
                "0000:05:00.0/xcp2",
                "0000:05:00.0/xcp10",
                "0000:10:00.0",
                "0000:4f:00.0",
                "0000:9f:01.1",
                "0000:a0:00.0",
                "0001:00:00.0",
                "10000:e1:00.0",
                "gpu2",
                "gpu10",
                "pci-0000:3b:00.0",
                "pci-0000:4F:00.0",
                "sriov-0000-05-00-2",
                "sriov-0000-4f-00-2",
            ]
        );
        // Not addresses: run on into a letter or digit, or after one.
        assert_eq!(
            natural_cmp("0000:05:00.0a", "0000:4f:00.0a"),
            Ordering::Greater
        );
        assert_eq!(
            natural_cmp("x0000:05:00.0", "x0000:4f:00.0"),
            Ordering::Greater
        );
        assert_eq!(natural_cmp("0000:05:00", "0000:4f:00"), Ordering::Greater);
    }

    proptest! {
        /// A total order whatever the strings: antisymmetric and
        /// transitive over strings made of address-like pieces.
        #[test]
        fn natural_order_is_total(v in proptest::collection::vec("(0000[:-][0-9a-fA-F]{1,2}[:.-]?[0-9a-g]{0,2}[.-]?[0-9x]?|[0-9a-z]{1,3}|[:./-]){1,5}", 3)) {
            let (a, b, c) = (&v[0], &v[1], &v[2]);
            prop_assert_eq!(natural_cmp(a, b), natural_cmp(b, a).reverse());
            if natural_cmp(a, b) != Ordering::Greater && natural_cmp(b, c) != Ordering::Greater {
                prop_assert_ne!(natural_cmp(a, c), Ordering::Greater, "{} {} {}", a, b, c);
            }
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

    fn err(text: &str, f: Format) -> String {
        match parse(text.as_bytes(), f) {
            Ok(s) => format!("parsed {s:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn strict_reading() {
        assert_eq!(err("", Format::Json), "file is empty (expected a CDI spec)");
        assert_eq!(
            err("  \n", Format::Yaml),
            "file is empty (expected a CDI spec)"
        );
        let unknown = r#"{"cdiVersion":"0.3.0","kind":"a.com/b","devices":[],"xyzzy":1}"#;
        assert_eq!(
            err(unknown, Format::Json),
            "invalid JSON: unknown field \"xyzzy\", expected one of cdiVersion, kind, \
             annotations, devices, containerEdits"
        );
        let dup = r#"{"cdiVersion":"0.3.0","cdiVersion":"0.5.0","kind":"a.com/b","devices":[]}"#;
        assert_eq!(
            err(dup, Format::Json),
            "invalid JSON: duplicate key \"cdiVersion\""
        );
        let dup_ann = r#"{"cdiVersion":"0.6.0","kind":"a.com/b","annotations":{"a":"1","a":"2"},"devices":[]}"#;
        assert_eq!(
            err(dup_ann, Format::Json),
            "invalid JSON: annotations: duplicate key \"a\""
        );
        let yaml_dup = "cdiVersion: 0.3.0\nkind: a.com/b\nkind: a.com/c\ndevices: []\n";
        assert_eq!(
            err(yaml_dup, Format::Yaml),
            "invalid YAML: duplicate key \"kind\""
        );
        let yaml_unknown = "cdiVersion: 0.3.0\nkind: a.com/b\ndevices: []\nxyzzy: 1\n";
        assert_eq!(
            err(yaml_unknown, Format::Yaml),
            "invalid YAML: unknown field \"xyzzy\", expected one of cdiVersion, kind, \
             annotations, devices, containerEdits"
        );
        assert_eq!(
            match parse(&[0xff, 0xfe], Format::Json) {
                Err(e) => e.to_string(),
                Ok(_) => String::new(),
            },
            "not UTF-8 text"
        );
    }

    #[test]
    fn errors_say_where_and_what_never_the_value() {
        let spec = |edits: &str| {
            format!(
                r#"{{"cdiVersion":"0.5.0","kind":"a.com/b","devices":[{{"name":"x","containerEdits":{edits}}}]}}"#
            )
        };
        assert_eq!(
            err(&spec(r#"{"env":["A=1",{"k":"secret"}]}"#), Format::Json),
            "invalid JSON: devices[0].containerEdits.env[1]: expected a string, found a map"
        );
        assert_eq!(
            err(
                &spec(r#"{"deviceNodes":[{"path":"p","major":"secret"}]}"#),
                Format::Json
            ),
            "invalid JSON: devices[0].containerEdits.deviceNodes[0].major: expected a 64-bit \
             integer, found a string"
        );
        assert_eq!(
            err(
                &spec(r#"{"deviceNodes":[{"path":"p","fileMode":-1}]}"#),
                Format::Json
            ),
            "invalid JSON: devices[0].containerEdits.deviceNodes[0].fileMode: expected an \
             integer from 0 to 4294967295, found an integer out of that range"
        );
        assert_eq!(
            err(r#""root:$6$secret:19000:0:99999:7:::""#, Format::Json),
            "invalid JSON: expected a map, found a string"
        );
        assert_eq!(
            err("root:x:0:0:root:/root:/bin/bash\n", Format::Yaml),
            "invalid YAML: expected a map, found a string"
        );
        assert_eq!(
            err("{\"cdiVersion\": \"secret", Format::Json),
            "invalid JSON: EOF while parsing a string at line 1 column 22"
        );
        assert_eq!(
            err("kind: [secret\n", Format::Yaml),
            "invalid YAML: unclosed bracket '[' at line 1 column 7"
        );
        assert_eq!(
            err("kind: \"secret\" x\n", Format::Yaml),
            "invalid YAML: invalid trailing content after double-quoted scalar at line 1 column 16"
        );
        // A shadow file's line is a YAML map whose key is the hash.
        assert_eq!(
            err("root:$6$secret:19000:0:99999:7:::\n", Format::Yaml),
            "invalid YAML: unknown field (not shown: not a name), expected one of cdiVersion, \
             kind, annotations, devices, containerEdits"
        );
        // A key is named on the path only when it is a name.
        let text = "{\"cdiVersion\":\"0.6.0\",\"kind\":\"a.com/b\",\"annotations\":\
                    {\"example.com/a\":\"x\",\"secret\\u001b]0;\":1}}";
        assert_eq!(
            err(text, Format::Json),
            "invalid JSON: annotations[key 2]: expected a string, found an integer"
        );
        let text = "{\"cdiVersion\":\"0.6.0\",\"kind\":\"a.com/b\",\"annotations\":\
                    {\"example.com/a\":[]}}";
        assert_eq!(
            err(text, Format::Json),
            "invalid JSON: annotations[\"example.com/a\"]: expected a string, found a sequence"
        );
    }

    #[test]
    fn yaml_1_1_scalars_in_string_positions_say_what_runtimes_see() {
        let dev = |field: &str| {
            format!(
                "cdiVersion: \"0.6.0\"\nkind: \"a.com/b\"\ndevices:\n  - {field}\n    containerEdits:\n      env: [\"A=1\"]\n"
            )
        };
        let cases = [
            (
                dev("name: on"),
                "devices[0].name: unquoted on is a boolean in YAML 1.1, which runtimes read: \
                 they see \"true\"; quote it",
            ),
            (
                dev("name: 0777"),
                "devices[0].name: unquoted 0777 is a number in YAML 1.1, which runtimes read: \
                 they see \"511\"; quote it",
            ),
            (
                dev("name: 0x10"),
                "devices[0].name: unquoted 0x10 is a number in YAML 1.1, which runtimes read: \
                 they see \"16\"; quote it",
            ),
            (
                dev("name: 1e3"),
                "devices[0].name: unquoted 1e3 is a number in YAML 1.1, which runtimes read: \
                 they see \"1000\"; quote it",
            ),
            (
                dev("name: 1.0"),
                "devices[0].name: unquoted 1.0 is a number in YAML 1.1, which runtimes read: \
                 they see \"1\"; quote it",
            ),
            (
                dev("name: ~"),
                "devices[0].name: unquoted ~ is null in YAML 1.1, which runtimes read: \
                 they see no value (an empty string); quote it",
            ),
            (
                dev("name:"),
                "devices[0].name: an empty value is null in YAML 1.1, which runtimes read: \
                 they see no value (an empty string); quote it",
            ),
            (
                dev("name: x\n    annotations: {x: yes}"),
                "devices[0].annotations.x: unquoted yes is a boolean in YAML 1.1, which \
                 runtimes read: they see \"true\"; quote it",
            ),
            (
                dev("name: x\n    annotations: {no: \"x\"}"),
                "devices[0].annotations: unquoted key no is a boolean in YAML 1.1, which \
                 runtimes read: they see \"false\"; quote it",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(
                err(&text, Format::Yaml),
                format!("invalid YAML: {want}"),
                "{text}"
            );
        }
        // Number positions take the YAML 1.1 value: 0644 is octal.
        let node = "cdiVersion: \"0.5.0\"\nkind: \"a.com/b\"\ndevices:\n  - name: \"x\"\n    \
                    containerEdits:\n      deviceNodes:\n        - path: \"/dev/x\"\n          \
                    fileMode: 0644\n          major: 0x10\n";
        let spec = parse(node.as_bytes(), Format::Yaml).expect("parses");
        let n = &spec.devices[0].container_edits.device_nodes[0];
        assert_eq!((n.file_mode, n.major), (Some(420), 16));
        // Quoted, or tagged !!str, it is a string.
        let quoted = dev("name: !!str on\n  - name: 'off'");
        let spec = parse(quoted.as_bytes(), Format::Yaml);
        assert!(spec.is_ok(), "{spec:?}");
    }

    /// A secret, as a hostile file would hold it; never in a message. `$`
    /// makes it no field name, so not even an unknown key may quote it.
    const MARKER: &str = "$6$SeCrEt";

    fn hostile_text() -> impl Strategy<Value = (String, Format)> {
        let secret = "[a-z0-9:/ ]{0,8}".prop_map(|s| format!("{MARKER}{s}"));
        let json_slot = prop_oneof![
            Just(r#"{"cdiVersion":@}"#),
            Just(
                r#"{"cdiVersion":"0.5.0","kind":"a.com/b","devices":[{"name":"x","containerEdits":{"deviceNodes":[{"path":"p","major":@}]}}]}"#
            ),
            Just(
                r#"{"cdiVersion":"0.5.0","kind":"a.com/b","devices":[{"name":"x","containerEdits":{"env":[{"k":@}]}}]}"#
            ),
            Just(r#"{"cdiVersion":"0.5.0","kind":"a.com/b","devices":[@]}"#),
            Just(r#"{"annotations":{"a":[@]}}"#),
            Just(r#"{"devices":[{"containerEdits":{"mounts":[{"options":{"x":@}}]}}]}"#),
            Just(r#"[@]"#),
            Just(r#"@"#),
        ];
        let yaml_slot = prop_oneof![
            Just("cdiVersion: @\ndevices: [@]\n"),
            Just(
                "devices:\n  - name: x\n    containerEdits:\n      deviceNodes:\n        - major: @\n"
            ),
            Just("devices:\n  - containerEdits: {env: [{k: @}]}\n"),
            Just("annotations: {a: [@]}\n"),
            Just("kind: @\nkind: @\n"),
            Just("@: 1\n"),
            Just("? @\n: 1\n"),
            Just("devices: &a [@]\nkind: *a\n"),
            Just("@\n"),
            Just("- @\n"),
            Just("devices: !!str @\n"),
        ];
        let json = (json_slot, secret.clone(), any::<bool>()).prop_map(|(t, s, quoted)| {
            let v = if quoted {
                serde_json::to_string(&s).unwrap_or_default()
            } else {
                s
            };
            (t.replace('@', &v), Format::Json)
        });
        let yaml = (yaml_slot, secret.clone(), 0..4usize).prop_map(|(t, s, style)| {
            let v = match style {
                0 => s,
                1 => format!("'{s}'"),
                2 => format!("\"{s}\""),
                _ => format!("|\n  {s}\n"),
            };
            (t.replace('@', &v), Format::Yaml)
        });
        let raw = (".{0,40}", secret, ".{0,40}", any::<bool>()).prop_map(|(a, s, b, j)| {
            (
                format!("{a}{s}{b}"),
                if j { Format::Json } else { Format::Yaml },
            )
        });
        prop_oneof![json, yaml, raw]
    }

    fn word() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::sample::select(vec![
                "on", "off", "yes", "no", "y", "n", "~", "null", "true", "0777", "0x10", "1e3",
                "1.0", ".inf", "<<", "", "- x", "a: b", "#c", "'q'", "\"d\"", "&a", "*a", "!!str",
            ])
            .prop_map(str::to_string),
            "[ -~]{0,12}",
            ".{0,8}",
        ]
    }

    proptest! {
        #[test]
        fn errors_never_echo_hostile_content((text, format) in hostile_text()) {
            if let Err(e) = parse(text.as_bytes(), format) {
                let message = e.to_string();
                prop_assert!(!message.contains("SeCrEt"), "{message}\n{text}");
            }
        }

        #[test]
        fn parsing_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..300), json in any::<bool>()) {
            let format = if json { Format::Json } else { Format::Yaml };
            let _ = parse(&bytes, format);
        }

        #[test]
        fn written_yaml_reads_back_identically(
            names in prop::collection::vec(word(), 1..4),
            env in prop::collection::vec(word(), 0..3),
            annotations in prop::collection::btree_map(word(), word(), 0..3),
            mode in prop::option::of(0u32..0o7777),
        ) {
            let spec = Spec {
                cdi_version: "0.6.0".into(),
                kind: "example.com/gpu".into(),
                annotations,
                devices: names
                    .iter()
                    .map(|n| Device {
                        name: n.clone(),
                        container_edits: ContainerEdits {
                            env: env.clone(),
                            device_nodes: vec![DeviceNode {
                                path: n.clone(),
                                file_mode: mode,
                                ..Default::default()
                            }],
                            ..Default::default()
                        },
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            };
            for format in [Format::Yaml, Format::Json] {
                let bytes = to_bytes(&spec, format).map_err(|e| TestCaseError::fail(e.to_string()))?;
                let back = parse(&bytes, format);
                prop_assert_eq!(back.as_ref(), Ok(&spec), "{}", String::from_utf8_lossy(&bytes));
            }
        }
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

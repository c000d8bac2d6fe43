//! YAML text to a [`Node`] tree, read as runtimes read it: YAML 1.1.
//!
//! Runtimes parse spec files with go-yaml v2 (through sigs.k8s.io/yaml),
//! a YAML 1.1 reader: an unquoted `on`, `yes` or `y` is a boolean, `0777`
//! an octal integer, `0x10` hexadecimal, `1e3` a float, `~` or nothing a
//! null. The events come from `granit-parser` (a YAML 1.2 parser that keeps
//! each scalar's style), and plain scalars are resolved here by go-yaml
//! v2's rules. The tree keeps the text of a plain scalar that resolved to
//! something other than a string, so that the typed read can say what a
//! runtime sees where a string was meant.
//!
//! Hostile input is bounded: aliases may expand to at most [`MAX_NODES`]
//! nodes and [`MAX_ALIAS_BYTES`] of copied text in all (the "billion
//! laughs"; an anchor's copy counts too), nesting is at most [`MAX_DEPTH`],
//! only one document is read, merge keys (`<<`) are refused (write the
//! entries out), and only the core tags (`!!str`, `!!int`, …) are known.
//! Errors give a line, a column and a fixed description, never the text.

use std::borrow::Cow;
use std::collections::HashMap;

use granit_parser::{ErrorKind, Event, Options, Parser, ScalarStyle, ScanError, Span, Tag};

use super::tree::{Node, SyntaxError};

/// The most nodes a document may have, aliases expanded.
pub(crate) const MAX_NODES: usize = 1_000_000;
/// The deepest nesting of sequences and maps, aliases expanded.
pub(crate) const MAX_DEPTH: usize = 128;
/// The most scalar bytes aliases may copy in all (one long string
/// repeated by aliases is a "billion laughs" too).
pub(crate) const MAX_ALIAS_BYTES: usize = 16 << 20;

enum Frame {
    Seq(Vec<Node>, usize),
    Map(Vec<(Node, Node)>, Option<Node>, usize),
}

/// An anchored node with its size in nodes, depth and scalar bytes.
struct Anchored {
    node: Node,
    size: usize,
    depth: usize,
    bytes: usize,
}

struct Builder {
    stack: Vec<Frame>,
    anchors: HashMap<usize, Anchored>,
    nodes: usize,
    alias_bytes: usize,
    root: Option<Node>,
}

fn error(span: &Span, description: &str) -> SyntaxError {
    SyntaxError {
        line: span.start.line(),
        column: span.start.col() + 1,
        description: description.to_string(),
    }
}

fn scan_error(e: &ScanError) -> SyntaxError {
    let description = match e.kind() {
        // These carry a character or the input's own words: say no more.
        ErrorKind::UnexpectedCharacter { .. } => "unexpected character".to_string(),
        ErrorKind::InputIo { .. } | ErrorKind::InputDecoding { .. } | ErrorKind::Custom(_) => {
            "invalid input".to_string()
        }
        other => other.to_string(),
    };
    SyntaxError {
        line: e.marker().line(),
        column: e.marker().col() + 1,
        description,
    }
}

fn scalar_bytes(node: &Node) -> usize {
    match node {
        Node::Str(s) => s.len(),
        Node::Null(p) | Node::Bool(_, p) | Node::Int(_, p) | Node::Float(_, p) => {
            p.as_deref().map_or(0, str::len)
        }
        Node::Seq(items) => items.iter().map(scalar_bytes).sum(),
        Node::Map(entries) => entries
            .iter()
            .map(|(k, v)| scalar_bytes(k) + scalar_bytes(v))
            .sum(),
    }
}

fn depth(node: &Node) -> usize {
    match node {
        Node::Seq(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Node::Map(entries) => {
            1 + entries
                .iter()
                .map(|(k, v)| depth(k).max(depth(v)))
                .max()
                .unwrap_or(0)
        }
        _ => 0,
    }
}

impl Builder {
    fn count(&mut self, n: usize, span: &Span) -> Result<(), SyntaxError> {
        self.nodes = self.nodes.saturating_add(n);
        if self.nodes > MAX_NODES {
            return Err(error(
                span,
                "too many nodes (aliases expand to more than 1000000)",
            ));
        }
        Ok(())
    }

    fn copy_bytes(&mut self, n: usize, span: &Span) -> Result<(), SyntaxError> {
        self.alias_bytes = self.alias_bytes.saturating_add(n);
        if self.alias_bytes > MAX_ALIAS_BYTES {
            return Err(error(span, "aliases copy more than 16 MiB of text"));
        }
        Ok(())
    }

    fn open(&mut self, frame: Frame, span: &Span) -> Result<(), SyntaxError> {
        self.count(1, span)?;
        if self.stack.len() >= MAX_DEPTH {
            return Err(error(span, "nested deeper than 128 levels"));
        }
        self.stack.push(frame);
        Ok(())
    }

    fn is_key_position(&self) -> bool {
        matches!(self.stack.last(), Some(Frame::Map(_, None, _)))
    }

    fn push(&mut self, node: Node, anchor: usize, span: &Span) -> Result<(), SyntaxError> {
        if anchor != 0 {
            let (size, bytes) = (node.size(), scalar_bytes(&node));
            // The anchor's own copy counts against the limits too.
            self.count(size, span)?;
            self.copy_bytes(bytes, span)?;
            let anchored = Anchored {
                node: node.clone(),
                size,
                depth: depth(&node),
                bytes,
            };
            self.anchors.insert(anchor, anchored);
        }
        match self.stack.last_mut() {
            None => {
                if self.root.is_some() {
                    return Err(error(span, "more than one YAML document"));
                }
                self.root = Some(node);
            }
            Some(Frame::Seq(items, _)) => items.push(node),
            Some(Frame::Map(entries, key, _)) => match key.take() {
                None => *key = Some(node),
                Some(k) => entries.push((k, node)),
            },
        }
        Ok(())
    }

    fn close(&mut self, span: &Span) -> Result<(), SyntaxError> {
        let (node, anchor) = match self.stack.pop() {
            Some(Frame::Seq(items, anchor)) => (Node::Seq(items), anchor),
            Some(Frame::Map(entries, None, anchor)) => (Node::Map(entries), anchor),
            Some(Frame::Map(_, Some(_), _)) | None => {
                return Err(error(span, "unbalanced collection"));
            }
        };
        self.push(node, anchor, span)
    }

    fn alias(&mut self, id: usize, span: &Span) -> Result<(), SyntaxError> {
        let Some(a) = self.anchors.get(&id) else {
            return Err(error(span, "alias to an anchor that is not complete"));
        };
        let (size, d, bytes) = (a.size, a.depth, a.bytes);
        if self.stack.len() + d > MAX_DEPTH {
            return Err(error(span, "nested deeper than 128 levels"));
        }
        // Counted before the copy is made.
        self.count(size, span)?;
        self.copy_bytes(bytes, span)?;
        let node = self
            .anchors
            .get(&id)
            .map_or(Node::Null(None), |a| a.node.clone());
        self.push(node, 0, span)
    }
}

/// Parses one YAML document into a tree, resolving plain scalars by YAML
/// 1.1. An empty document is null.
pub(crate) fn parse(text: &str) -> Result<Node, SyntaxError> {
    let mut options = Options::default();
    // As libyaml (and so go-yaml) reads a block scalar on the last line.
    options.block_scalar_eof_without_line_feed = true;
    let parser = Parser::new_from_str_with_options(text, options);
    let mut b = Builder {
        stack: Vec::new(),
        anchors: HashMap::new(),
        nodes: 0,
        alias_bytes: 0,
        root: None,
    };
    let mut documents = 0usize;
    for item in parser {
        let (event, span) = item.map_err(|e| scan_error(&e))?;
        match event {
            Event::DocumentStart(..) => {
                documents += 1;
                if documents > 1 {
                    return Err(error(&span, "more than one YAML document"));
                }
            }
            Event::Scalar(value, style, anchor, tag) => {
                if b.is_key_position()
                    && style == ScalarStyle::Plain
                    && tag.is_none()
                    && value == "<<"
                {
                    return Err(error(
                        &span,
                        "merge keys (<<) are not supported: write the entries out",
                    ));
                }
                // An empty node comes as `~` with an empty span: keep it empty,
                // so that messages say what the file says.
                let empty = span.start.index() == span.end.index();
                let value = if empty && style == ScalarStyle::Plain {
                    Cow::Borrowed("")
                } else {
                    value
                };
                let node = resolve_scalar(&value, style, tag.as_deref())
                    .map_err(|what| error(&span, what))?;
                b.count(1, &span)?;
                b.push(node, anchor, &span)?;
            }
            Event::SequenceStart(_, anchor, tag) => {
                check_collection_tag(tag.as_deref(), "seq").map_err(|w| error(&span, w))?;
                b.open(Frame::Seq(Vec::new(), anchor), &span)?;
            }
            Event::MappingStart(_, anchor, tag) => {
                check_collection_tag(tag.as_deref(), "map").map_err(|w| error(&span, w))?;
                b.open(Frame::Map(Vec::new(), None, anchor), &span)?;
            }
            Event::SequenceEnd | Event::MappingEnd => b.close(&span)?,
            Event::Alias(id) => b.alias(id, &span)?,
            _ => {}
        }
    }
    Ok(b.root.unwrap_or(Node::Null(Some("".into()))))
}

fn check_collection_tag(tag: Option<&Tag>, core: &str) -> Result<(), &'static str> {
    match tag {
        None => Ok(()),
        Some(t) if t.core_suffix() == Some(core) => Ok(()),
        Some(t) if t.handle() == "!" && t.suffix().is_empty() => Ok(()),
        Some(_) => Err("unsupported YAML tag (only the core tags are read)"),
    }
}

fn resolve_scalar(
    value: &str,
    style: ScalarStyle,
    tag: Option<&Tag>,
) -> Result<Node, &'static str> {
    let Some(tag) = tag else {
        return Ok(if style == ScalarStyle::Plain {
            resolve_plain(value)
        } else {
            Node::Str(value.to_string())
        });
    };
    if tag.handle() == "!" && tag.suffix().is_empty() {
        return Ok(Node::Str(value.to_string()));
    }
    let resolved = resolve_plain(value);
    let node = match (tag.core_suffix(), resolved) {
        (Some("str"), _) => Node::Str(value.to_string()),
        (Some("null"), Node::Null(_)) => Node::Null(None),
        (Some("bool"), Node::Bool(b, _)) => Node::Bool(b, None),
        (Some("int"), Node::Int(i, _)) => Node::Int(i, None),
        (Some("float"), Node::Float(f, _)) => Node::Float(f, None),
        #[allow(clippy::cast_precision_loss)]
        (Some("float"), Node::Int(i, _)) => Node::Float(i as f64, None),
        (Some("null" | "bool" | "int" | "float"), _) => {
            return Err("the value does not match its tag");
        }
        _ => return Err("unsupported YAML tag (only the core tags are read)"),
    };
    Ok(node)
}

/// Resolves a plain scalar as go-yaml v2 does (YAML 1.1).
pub(crate) fn resolve_plain(s: &str) -> Node {
    let plain = || Some(Box::<str>::from(s));
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Node::Null(plain()),
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Node::Bool(true, plain());
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Node::Bool(false, plain());
        }
        ".nan" | ".NaN" | ".NAN" => return Node::Float(f64::NAN, plain()),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Node::Float(f64::INFINITY, plain());
        }
        "-.inf" | "-.Inf" | "-.INF" => return Node::Float(f64::NEG_INFINITY, plain()),
        _ => {}
    }
    match s.as_bytes().first() {
        Some(b'0'..=b'9' | b'+' | b'-') => {
            let digits: String = s.chars().filter(|c| *c != '_').collect();
            if let Some(i) = go_parse_int(&digits) {
                return Node::Int(i, plain());
            }
            if is_yaml_float(&digits)
                && let Ok(f) = digits.parse::<f64>()
                && f.is_finite()
            {
                return Node::Float(f, plain());
            }
        }
        Some(b'.') => {
            if is_yaml_float(s)
                && let Ok(f) = s.parse::<f64>()
            {
                return Node::Float(f, plain());
            }
        }
        _ => {}
    }
    Node::Str(s.to_string())
}

/// Go's `strconv.ParseInt(s, 0, 64)`, then `ParseUint(s, 0, 64)`: an
/// optional sign, then `0x`/`0o`/`0b` or a leading `0` (octal) or decimal.
fn go_parse_int(s: &str) -> Option<i128> {
    let (sign, rest) = match s.as_bytes().first() {
        Some(b'+') => (Some(false), s.get(1..)?),
        Some(b'-') => (Some(true), s.get(1..)?),
        _ => (None, s),
    };
    if rest.is_empty() {
        return None;
    }
    let lower = rest.get(..2).map(str::to_ascii_lowercase);
    let (radix, digits) = match lower.as_deref() {
        Some("0x") if rest.len() >= 3 => (16, rest.get(2..)?),
        Some("0o") if rest.len() >= 3 => (8, rest.get(2..)?),
        Some("0b") if rest.len() >= 3 => (2, rest.get(2..)?),
        _ if rest.starts_with('0') => (8, rest.get(1..)?),
        _ => (10, rest),
    };
    let mut v: u128 = 0;
    for c in digits.chars() {
        let d = c.to_digit(radix)?;
        v = v
            .checked_mul(u128::from(radix))?
            .checked_add(u128::from(d))?;
        if v > u128::from(u64::MAX) {
            return None;
        }
    }
    let v = i128::try_from(v).ok()?;
    match sign {
        Some(true) => (v <= 1 << 63).then_some(-v),
        Some(false) => (v <= i128::from(i64::MAX)).then_some(v),
        None => Some(v),
    }
}

/// go-yaml v2's float pattern:
/// `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn is_yaml_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    let digits = |i: &mut usize| {
        let start = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - start
    };
    if matches!(b.first(), Some(b'+' | b'-')) {
        i += 1;
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if digits(&mut i) == 0 {
            return false;
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            digits(&mut i);
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 32)`: how sigs.k8s.io/yaml turns
/// a YAML float into a string field (`1e3` → `1000`, `1e6` → `1e+06`).
pub(crate) fn go_format_float32(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    #[allow(clippy::cast_possible_truncation)]
    let x = f as f32;
    let sign = if x.is_sign_negative() { "-" } else { "" };
    if x == 0.0 {
        return format!("{sign}0");
    }
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let nd = i32::try_from(digits.len()).unwrap_or(i32::MAX);
    if !(-4..6).contains(&exp) {
        let (first, rest) = digits.split_at(1.min(digits.len()));
        let dot = if rest.is_empty() { "" } else { "." };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{dot}{rest}e{esign}{:02}", exp.abs());
    }
    let dp = exp + 1;
    let body = if dp <= 0 {
        format!(
            "0.{}{digits}",
            "0".repeat(usize::try_from(-dp).unwrap_or(0))
        )
    } else if dp >= nd {
        format!(
            "{digits}{}",
            "0".repeat(usize::try_from(dp - nd).unwrap_or(0))
        )
    } else {
        let (a, b) = digits.split_at(usize::try_from(dp).unwrap_or(0));
        format!("{a}.{b}")
    };
    format!("{sign}{body}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scalar(s: &str) -> Node {
        resolve_plain(s)
    }

    #[test]
    fn plain_scalars_resolve_as_go_yaml_v2() {
        for s in ["on", "On", "ON", "yes", "y", "Y", "true", "True"] {
            assert!(matches!(scalar(s), Node::Bool(true, _)), "{s}");
        }
        for s in ["off", "no", "n", "N", "false", "FALSE"] {
            assert!(matches!(scalar(s), Node::Bool(false, _)), "{s}");
        }
        for s in ["", "~", "null", "Null", "NULL"] {
            assert!(matches!(scalar(s), Node::Null(_)), "{s}");
        }
        let ints = [
            ("0777", 511),
            ("0644", 420),
            ("0x10", 16),
            ("0X1f", 31),
            ("0o17", 15),
            ("0b101", 5),
            ("-0x10", -16),
            ("+12", 12),
            ("1_000", 1000),
            ("0", 0),
            ("-9223372036854775808", i128::from(i64::MIN)),
            ("18446744073709551615", i128::from(u64::MAX)),
        ];
        for (s, want) in ints {
            assert_eq!(scalar(s), Node::Int(want, Some(s.into())), "{s}");
        }
        let floats = [
            ("1e3", 1000.0),
            ("1.0", 1.0),
            ("09", 9.0),
            (".5", 0.5),
            ("-1.5e-3", -0.0015),
            ("+18446744073709551616", 18_446_744_073_709_551_616.0),
        ];
        for (s, want) in floats {
            assert_eq!(scalar(s), Node::Float(want, Some(s.into())), "{s}");
        }
        for s in [
            "0x",
            "1e400",
            "0o",
            "08x",
            "1.2.3",
            "2001-12-14",
            "-",
            "+",
            "abc",
            "1:2",
            ".",
            "0x1p3",
            "1e",
            "Yes!",
            "nul",
        ] {
            assert_eq!(scalar(s), Node::Str(s.into()), "{s}");
        }
        assert!(matches!(scalar(".inf"), Node::Float(f, _) if f == f64::INFINITY));
        assert!(matches!(scalar("-.Inf"), Node::Float(f, _) if f == f64::NEG_INFINITY));
        assert!(matches!(scalar(".NaN"), Node::Float(f, _) if f.is_nan()));
    }

    #[test]
    fn floats_format_as_go_does_for_string_fields() {
        let cases = [
            (1000.0, "1000"),
            (1.0, "1"),
            (0.5, "0.5"),
            (1e6, "1e+06"),
            (123_456.0, "123456"),
            (123_456_789.0, "1.2345679e+08"),
            (0.0001, "0.0001"),
            (0.000_015, "1.5e-05"),
            (-2.5, "-2.5"),
            (0.1, "0.1"),
            (std::f64::consts::PI, "3.1415927"),
            (1e30, "1e+30"),
            (0.0, "0"),
            (f64::INFINITY, "+Inf"),
            (f64::NAN, "NaN"),
        ];
        for (f, want) in cases {
            assert_eq!(go_format_float32(f), want, "{f}");
        }
    }

    #[test]
    fn styles_and_tags() {
        let doc = "a: 'on'\nb: \"0777\"\nc: !!str on\nd: on\ne: !!int 0x10\nf: |\n  x";
        let Ok(Node::Map(entries)) = parse(doc) else {
            panic!("not a map")
        };
        let values: Vec<&Node> = entries.iter().map(|(_, v)| v).collect();
        assert_eq!(
            values,
            [
                &Node::Str("on".into()),
                &Node::Str("0777".into()),
                &Node::Str("on".into()),
                &Node::Bool(true, Some("on".into())),
                &Node::Int(16, None),
                &Node::Str("x".into()),
            ]
        );
        let err = |t: &str| parse(t).err().map(|e| e.description).unwrap_or_default();
        assert_eq!(
            err("a: !!int x\n"),
            "the value does not match its tag".to_string()
        );
        assert_eq!(
            err("a: !foo x\n"),
            "unsupported YAML tag (only the core tags are read)"
        );
        assert_eq!(
            err("a: &x {b: 1}\nc:\n  <<: *x\n"),
            "merge keys (<<) are not supported: write the entries out"
        );
        assert_eq!(err("a: 1\n---\nb: 2\n"), "more than one YAML document");
    }

    #[test]
    fn aliases_are_bounded() {
        // Billion laughs: each level multiplies by ten.
        let mut doc = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let prev = format!("*a{}", i - 1);
            let list = [prev.as_str(); 10].join(", ");
            doc.push_str(&format!("a{i}: &a{i} [{list}]\n"));
        }
        let e = parse(&doc).expect_err("too big");
        assert_eq!(
            e.description,
            "too many nodes (aliases expand to more than 1000000)"
        );
        // Deep nesting through aliases.
        let mut doc = String::from("a0: &a0 [1]\n");
        for i in 1..200 {
            doc.push_str(&format!("a{i}: &a{i} [*a{}]\n", i - 1));
        }
        let e = parse(&doc).expect_err("too deep");
        assert_eq!(e.description, "nested deeper than 128 levels");
        let deep = format!("{}{}", "[".repeat(300), "]".repeat(300));
        assert!(parse(&deep).is_err());
        // One long string, repeated.
        let long = "x".repeat(1 << 20);
        let doc = format!("a: &a \"{long}\"\nb: [{}]\n", ["*a"; 20].join(", "));
        let e = parse(&doc).expect_err("too much text");
        assert_eq!(e.description, "aliases copy more than 16 MiB of text");
        // A small alias is fine.
        assert!(parse("a: &x [1, 2]\nb: *x\n").is_ok());
    }
}

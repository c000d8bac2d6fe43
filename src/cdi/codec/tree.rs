//! A parsed document as a tree, and a serde deserializer from that tree
//! into the typed spec whose errors never carry the document's content.
//!
//! Spec files are untrusted: a spec directory may hold a symlink to any
//! file, and `validate` and `list` print why a file does not load. serde's
//! own errors quote the offending value (`invalid type: string "root:$6$…"`),
//! so the typed spec is read from a [`Node`] tree through [`NodeDe`], whose
//! [`DeError`] keeps only the location (`devices[0].containerEdits.env[1]`)
//! and the kind of problem (`expected a string, found a map`). A name is
//! quoted only where it is the problem (an unknown field, a duplicate key,
//! a map key on the path), and only when it looks like a name (see
//! [`is_name`]): a shadow file's line `root:$6$…:` parses as a YAML map
//! whose one key is the hash, and must not be printed. A YAML plain scalar that YAML 1.1 reads as a
//! boolean, number or null is quoted too: its text is one of a fixed set of
//! words or a number, and saying what a runtime sees needs it.

use std::borrow::Cow;
use std::fmt::{self, Display};

use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};

/// The longest name an error quotes, in characters.
pub(crate) const MAX_QUOTED: usize = 64;

/// A document node, in a form both JSON and YAML 1.1 reduce to.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    /// `null`, or a YAML 1.1 null (`~`, `null`, empty).
    Null(Plain),
    /// A boolean.
    Bool(bool, Plain),
    /// An integer (JSON, or a YAML 1.1 int such as `0777` = 511).
    Int(i128, Plain),
    /// A floating-point number.
    Float(f64, Plain),
    /// A string.
    Str(String),
    /// A sequence.
    Seq(Vec<Node>),
    /// A mapping, entries in document order (duplicates kept, checked when
    /// read).
    Map(Vec<(Node, Node)>),
}

/// The text of a YAML plain scalar that resolved to something other than a
/// string, or `None` (JSON, quoted or tagged YAML).
pub(crate) type Plain = Option<Box<str>>;

impl Node {
    /// The kind, for "found …" in messages.
    fn kind(&self) -> &'static str {
        match self {
            Node::Null(_) => "null",
            Node::Bool(..) => "a boolean",
            Node::Int(..) => "an integer",
            Node::Float(..) => "a floating-point number",
            Node::Str(_) => "a string",
            Node::Seq(_) => "a sequence",
            Node::Map(_) => "a map",
        }
    }

    /// The string a runtime (sigs.k8s.io/yaml) turns this scalar into where
    /// it expects a string; `None` for null and collections.
    fn runtime_string(&self) -> Option<Cow<'_, str>> {
        match self {
            Node::Str(s) => Some(Cow::Borrowed(s)),
            Node::Bool(b, _) => Some(Cow::Borrowed(if *b { "true" } else { "false" })),
            Node::Int(i, _) => Some(Cow::Owned(i.to_string())),
            Node::Float(f, _) => Some(Cow::Owned(super::yaml::go_format_float32(*f))),
            Node::Null(_) | Node::Seq(_) | Node::Map(_) => None,
        }
    }

    fn plain(&self) -> Option<&str> {
        match self {
            Node::Null(p) | Node::Bool(_, p) | Node::Int(_, p) | Node::Float(_, p) => p.as_deref(),
            Node::Str(_) | Node::Seq(_) | Node::Map(_) => None,
        }
    }

    /// The number of nodes in this tree (for alias expansion limits).
    pub(crate) fn size(&self) -> usize {
        match self {
            Node::Seq(items) => items.iter().map(Node::size).sum::<usize>() + 1,
            Node::Map(entries) => {
                entries
                    .iter()
                    .map(|(k, v)| k.size() + v.size())
                    .sum::<usize>()
                    + 1
            }
            _ => 1,
        }
    }
}

/// Whether `s` may be quoted in a message: a field or annotation name (at
/// most [`MAX_QUOTED`] characters of `[A-Za-z0-9._/-]`), not content.
pub(crate) fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_QUOTED
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '-'))
}

/// `s` quoted when it is a name, else a fixed phrase.
fn quote_name(s: &str) -> String {
    if is_name(s) {
        format!("\"{s}\"")
    } else {
        "(not shown: not a name)".to_string()
    }
}

/// `s` quoted and escaped, cut at [`MAX_QUOTED`] characters.
pub(crate) fn quote_bounded(s: &str) -> String {
    crate::text::quoted(s, MAX_QUOTED)
}

/// Bad syntax: where (1-based line and column), and a fixed description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    pub(crate) line: usize,
    pub(crate) column: usize,
    pub(crate) description: String,
}

/// A location in the document, built on the stack as the deserializer
/// descends and rendered only for an error.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Path<'a> {
    parent: Option<&'a Path<'a>>,
    seg: Seg<'a>,
}

#[derive(Debug, Clone, Copy)]
enum Seg<'a> {
    Root,
    Key(&'a str),
    /// A map entry whose key is not a name (1-based).
    Entry(usize),
    Index(usize),
}

impl<'a> Path<'a> {
    /// The document itself.
    pub(crate) const ROOT: Path<'static> = Path {
        parent: None,
        seg: Seg::Root,
    };

    fn key(&'a self, key: &'a str, entry: usize) -> Path<'a> {
        Path {
            parent: Some(self),
            seg: if is_name(key) {
                Seg::Key(key)
            } else {
                Seg::Entry(entry)
            },
        }
    }

    fn index(&'a self, i: usize) -> Path<'a> {
        Path {
            parent: Some(self),
            seg: Seg::Index(i),
        }
    }

    fn render(&self) -> String {
        let mut segs = Vec::new();
        let mut at = Some(self);
        while let Some(p) = at {
            segs.push(p.seg);
            at = p.parent;
        }
        let mut out = String::new();
        for seg in segs.iter().rev() {
            match seg {
                Seg::Root => {}
                Seg::Index(i) => out.push_str(&format!("[{i}]")),
                Seg::Entry(i) => out.push_str(&format!("[key {i}]")),
                Seg::Key(k) => {
                    if k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                        if !out.is_empty() {
                            out.push('.');
                        }
                        out.push_str(k);
                    } else {
                        out.push_str(&format!("[\"{k}\"]"));
                    }
                }
            }
        }
        out
    }
}

/// Why the tree is not a spec: where, and a problem built only from fixed
/// words and bounded, escaped names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DeError {
    /// Where, once known (the innermost deserializer sets it).
    pub(crate) location: Option<String>,
    /// What is wrong.
    pub(crate) problem: String,
}

impl DeError {
    fn new(problem: impl Into<String>) -> DeError {
        DeError {
            location: None,
            problem: problem.into(),
        }
    }

    fn at(mut self, path: &Path<'_>) -> DeError {
        if self.location.is_none() {
            self.location = Some(path.render());
        }
        self
    }
}

impl Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.location.as_deref() {
            Some(l) if !l.is_empty() => write!(f, "{l}: {}", self.problem),
            _ => f.write_str(&self.problem),
        }
    }
}

impl std::error::Error for DeError {}

fn unexpected_kind(u: &de::Unexpected<'_>) -> &'static str {
    use de::Unexpected as U;
    match u {
        U::Bool(_) => "a boolean",
        U::Unsigned(_) | U::Signed(_) => "an integer",
        U::Float(_) => "a floating-point number",
        U::Char(_) => "a character",
        U::Str(_) => "a string",
        U::Bytes(_) => "bytes",
        U::Unit => "null",
        U::Option => "an optional value",
        U::NewtypeStruct => "a newtype struct",
        U::Seq => "a sequence",
        U::Map => "a map",
        U::Enum => "an enum",
        U::UnitVariant | U::NewtypeVariant | U::TupleVariant | U::StructVariant => "a variant",
        U::Other(_) => "another value",
    }
}

fn one_of(names: &'static [&'static str]) -> String {
    if names.is_empty() {
        "there are none".into()
    } else {
        format!("expected one of {}", names.join(", "))
    }
}

impl de::Error for DeError {
    fn custom<T: Display>(_msg: T) -> Self {
        // The message may quote content: keep none of it.
        DeError::new("invalid value")
    }

    fn invalid_type(unexp: de::Unexpected<'_>, exp: &dyn de::Expected) -> Self {
        // `exp` comes from the spec's own types ("a string", "u32").
        DeError::new(format!("expected {exp}, found {}", unexpected_kind(&unexp)))
    }

    fn invalid_value(unexp: de::Unexpected<'_>, exp: &dyn de::Expected) -> Self {
        DeError::new(format!(
            "invalid value ({}), expected {exp}",
            unexpected_kind(&unexp)
        ))
    }

    fn invalid_length(len: usize, exp: &dyn de::Expected) -> Self {
        DeError::new(format!("expected {exp}, found {len} elements"))
    }

    fn unknown_variant(variant: &str, expected: &'static [&'static str]) -> Self {
        DeError::new(format!(
            "unknown variant {}, {}",
            quote_name(variant),
            one_of(expected)
        ))
    }

    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        DeError::new(format!(
            "unknown field {}, {}",
            quote_name(field),
            one_of(expected)
        ))
    }

    fn missing_field(field: &'static str) -> Self {
        DeError::new(format!("missing field {field}"))
    }

    fn duplicate_field(field: &'static str) -> Self {
        DeError::new(format!("duplicate key {}", quote_name(field)))
    }
}

/// Deserializes `T` from `node`.
pub(crate) fn from_node<T: de::DeserializeOwned>(node: &Node) -> Result<T, DeError> {
    T::deserialize(NodeDe {
        node,
        path: &Path::ROOT,
        key: false,
    })
}

/// A serde deserializer over one node, knowing where it is.
pub(crate) struct NodeDe<'a> {
    node: &'a Node,
    path: &'a Path<'a>,
    /// The node is a mapping key (messages say so).
    key: bool,
}

impl<'a> NodeDe<'a> {
    fn err(&self, problem: impl Into<String>) -> DeError {
        DeError::new(problem).at(self.path)
    }

    fn type_error(&self, expected: &str) -> DeError {
        let what = if self.key { "a key: " } else { "" };
        self.err(format!(
            "{what}expected {expected}, found {}",
            self.node.kind()
        ))
    }

    /// A string was expected: a YAML plain scalar that YAML 1.1 reads as
    /// something else gets the message that says what runtimes see.
    fn not_a_string(&self) -> DeError {
        let Some(text) = self.node.plain() else {
            return self.type_error("a string");
        };
        let what = match self.node {
            Node::Bool(..) => "a boolean",
            Node::Int(..) | Node::Float(..) => "a number",
            _ => "null",
        };
        let seen = match (self.node.runtime_string(), self.key) {
            (Some(s), _) => quote_bounded(&s),
            (None, true) => "a key they cannot use, and fail to load the file".into(),
            (None, false) => "no value (an empty string)".into(),
        };
        let unquoted = if text.is_empty() {
            if self.key {
                "an empty key".to_string()
            } else {
                "an empty value".to_string()
            }
        } else {
            let key = if self.key { "key " } else { "" };
            format!("unquoted {key}{}", bounded_plain(text))
        };
        self.err(format!(
            "{unquoted} is {what} in YAML 1.1, which runtimes read: they see {seen}; quote it"
        ))
    }

    fn int<T: TryFrom<i128>>(&self, expected: &str) -> Result<T, DeError> {
        match self.node {
            Node::Int(i, _) => T::try_from(*i).map_err(|_| {
                self.err(format!(
                    "expected {expected}, found an integer out of that range"
                ))
            }),
            _ => Err(self.type_error(expected)),
        }
    }

    fn map_access(&self, entries: &'a [(Node, Node)]) -> Result<NodeMap<'a>, DeError> {
        let mut seen: Vec<Cow<'_, str>> = Vec::new();
        for (k, _) in entries {
            if let Some(name) = k.runtime_string() {
                if seen.contains(&name) {
                    return Err(self.err(format!("duplicate key {}", quote_name(&name))));
                }
                seen.push(name);
            }
        }
        Ok(NodeMap {
            entries: entries.iter().enumerate(),
            value: None,
            path: self.path,
        })
    }
}

/// The plain text of a YAML 1.1 non-string, bounded: it is a fixed word
/// (`on`, `~`) or a number.
fn bounded_plain(text: &str) -> String {
    let mut out: String = text
        .chars()
        .take(MAX_QUOTED)
        .flat_map(char::escape_debug)
        .collect();
    if text.chars().count() > MAX_QUOTED {
        out.push('…');
    }
    out
}

macro_rules! ints {
    ($($method:ident $visit:ident $t:ty, $what:literal;)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
            let v: $t = self.int($what)?;
            visitor.$visit::<DeError>(v).map_err(|e| e.at(self.path))
        }
    )*};
}

impl<'de, 'a> de::Deserializer<'de> for NodeDe<'a> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let path = self.path;
        match self.node {
            Node::Null(_) => visitor.visit_unit::<DeError>(),
            Node::Bool(b, _) => visitor.visit_bool::<DeError>(*b),
            Node::Int(i, _) => match i64::try_from(*i) {
                Ok(v) => visitor.visit_i64::<DeError>(v),
                Err(_) => match u64::try_from(*i) {
                    Ok(v) => visitor.visit_u64::<DeError>(v),
                    Err(_) => visitor.visit_i128::<DeError>(*i),
                },
            },
            Node::Float(f, _) => visitor.visit_f64::<DeError>(*f),
            Node::Str(s) => visitor.visit_str::<DeError>(s),
            Node::Seq(items) => visitor.visit_seq(NodeSeq {
                items: items.iter().enumerate(),
                path,
            }),
            Node::Map(entries) => visitor.visit_map(self.map_access(entries)?),
        }
        .map_err(|e| e.at(path))
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.node {
            Node::Bool(b, _) => visitor
                .visit_bool::<DeError>(*b)
                .map_err(|e| e.at(self.path)),
            _ => Err(self.type_error("a boolean")),
        }
    }

    ints! {
        deserialize_i8 visit_i8 i8, "an integer from -128 to 127";
        deserialize_i16 visit_i16 i16, "an integer from -32768 to 32767";
        deserialize_i32 visit_i32 i32, "an integer from -2147483648 to 2147483647";
        deserialize_i64 visit_i64 i64, "a 64-bit integer";
        deserialize_u8 visit_u8 u8, "an integer from 0 to 255";
        deserialize_u16 visit_u16 u16, "an integer from 0 to 65535";
        deserialize_u32 visit_u32 u32, "an integer from 0 to 4294967295";
        deserialize_u64 visit_u64 u64, "an integer from 0 to 18446744073709551615";
    }

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_f64(visitor)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        #[allow(clippy::cast_precision_loss)]
        let v = match self.node {
            Node::Int(i, _) => *i as f64,
            Node::Float(f, _) => *f,
            _ => return Err(self.type_error("a number")),
        };
        visitor.visit_f64::<DeError>(v).map_err(|e| e.at(self.path))
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.node {
            Node::Str(s) => visitor.visit_str::<DeError>(s).map_err(|e| e.at(self.path)),
            _ => Err(self.not_a_string()),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_any(visitor)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_any(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let path = self.path;
        match self.node {
            Node::Null(_) => visitor.visit_none::<DeError>(),
            _ => visitor.visit_some(self),
        }
        .map_err(|e| e.at(path))
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.node {
            Node::Null(_) => visitor.visit_unit::<DeError>().map_err(|e| e.at(self.path)),
            _ => Err(self.type_error("null")),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        let path = self.path;
        visitor.visit_newtype_struct(self).map_err(|e| e.at(path))
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.node {
            Node::Seq(items) => visitor
                .visit_seq(NodeSeq {
                    items: items.iter().enumerate(),
                    path: self.path,
                })
                .map_err(|e| e.at(self.path)),
            _ => Err(self.type_error("a sequence")),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.node {
            Node::Map(entries) => visitor
                .visit_map(self.map_access(entries)?)
                .map_err(|e| e.at(self.path)),
            _ => Err(self.type_error("a map")),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_map(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        match self.node {
            Node::Str(s) => {
                let d: de::value::StrDeserializer<'_, DeError> = s.as_str().into_deserializer();
                visitor.visit_enum(d).map_err(|e| e.at(self.path))
            }
            _ => Err(self.not_a_string()),
        }
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_unit::<DeError>()
    }
}

struct NodeSeq<'a> {
    items: std::iter::Enumerate<std::slice::Iter<'a, Node>>,
    path: &'a Path<'a>,
}

impl<'de, 'a> SeqAccess<'de> for NodeSeq<'a> {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DeError> {
        let Some((i, node)) = self.items.next() else {
            return Ok(None);
        };
        let path = self.path.index(i);
        seed.deserialize(NodeDe {
            node,
            path: &path,
            key: false,
        })
        .map(Some)
        .map_err(|e| e.at(&path))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

struct NodeMap<'a> {
    entries: std::iter::Enumerate<std::slice::Iter<'a, (Node, Node)>>,
    value: Option<(usize, &'a Node, &'a Node)>,
    path: &'a Path<'a>,
}

impl<'de, 'a> MapAccess<'de> for NodeMap<'a> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        let Some((i, (k, v))) = self.entries.next() else {
            return Ok(None);
        };
        self.value = Some((i, k, v));
        seed.deserialize(NodeDe {
            node: k,
            path: self.path,
            key: true,
        })
        .map(Some)
        .map_err(|e| e.at(self.path))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        let Some((i, k, v)) = self.value.take() else {
            return Err(DeError::new("value without a key").at(self.path));
        };
        let name = match k {
            Node::Str(s) => s.as_str(),
            _ => "",
        };
        let path = self.path.key(name, i + 1);
        seed.deserialize(NodeDe {
            node: v,
            path: &path,
            key: false,
        })
        .map_err(|e| e.at(&path))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_render_keys_and_indices() {
        let root = Path::ROOT;
        let devices = root.key("devices", 1);
        let zero = devices.index(0);
        let edits = zero.key("containerEdits", 2);
        let env = edits.key("env", 1);
        let one = env.index(1);
        assert_eq!(one.render(), "devices[0].containerEdits.env[1]");
        let ann = root.key("annotations", 3);
        let named = ann.key("example.com/a-b", 1);
        assert_eq!(named.render(), "annotations[\"example.com/a-b\"]");
        let odd = ann.key("a.b/c d\n", 2);
        assert_eq!(odd.render(), "annotations[key 2]");
        let long = "x".repeat(65);
        assert_eq!(root.key(&long, 7).render(), "[key 7]");
        assert_eq!(root.key("root:$6$hash:", 1).render(), "[key 1]");
    }

    #[test]
    fn quoting_is_bounded_and_escaped() {
        assert_eq!(quote_bounded("a\u{1b}[31m\""), "\"a\\u{1b}[31m\\\"\"");
        assert_eq!(quote_bounded(&"é".repeat(70)).chars().count(), 64 + 3);
    }
}

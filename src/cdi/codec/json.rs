//! JSON text to a [`Node`] tree: syntax only, every key kept (duplicates
//! are found when the tree is read), errors without content.

use std::fmt;

use serde::Deserialize;
use serde::de::{MapAccess, SeqAccess, Visitor};

use super::tree::{Node, SyntaxError};

/// Parses JSON into a tree. serde_json's description of a syntax error is
/// always one of its fixed phrases.
pub(crate) fn parse(text: &str) -> Result<Node, SyntaxError> {
    serde_json::from_str::<JsonNode>(text)
        .map(|n| n.0)
        .map_err(|e| {
            let description = if e.is_syntax() || e.is_eof() {
                // "<fixed phrase> at line L column C": keep the phrase.
                let full = e.to_string();
                let suffix = format!(" at line {} column {}", e.line(), e.column());
                full.strip_suffix(&suffix).unwrap_or(&full).to_string()
            } else {
                "invalid JSON value".to_string()
            };
            SyntaxError {
                line: e.line(),
                column: e.column(),
                description,
            }
        })
}

struct JsonNode(Node);

impl<'de> Deserialize<'de> for JsonNode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NodeVisitor).map(JsonNode)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Node, E> {
        Ok(Node::Null(None))
    }

    fn visit_bool<E>(self, v: bool) -> Result<Node, E> {
        Ok(Node::Bool(v, None))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Node, E> {
        Ok(Node::Int(v.into(), None))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Node, E> {
        Ok(Node::Int(v.into(), None))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Node, E> {
        Ok(Node::Float(v, None))
    }

    fn visit_str<E>(self, v: &str) -> Result<Node, E> {
        Ok(Node::Str(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Node, E> {
        Ok(Node::Str(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(JsonNode(n)) = seq.next_element()? {
            items.push(n);
        }
        Ok(Node::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries = Vec::new();
        while let Some((JsonNode(k), JsonNode(v))) = map.next_entry()? {
            entries.push((k, v));
        }
        Ok(Node::Map(entries))
    }
}

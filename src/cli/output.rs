//! Machine-readable output shared by the commands: `-o text|json|yaml`.
//!
//! Every command that prints a document writes it through
//! [`write_structured`], which encodes the whole document before writing a
//! byte: stdout then holds either one complete document or, when the
//! command fails, nothing (the error goes to stderr). Paths in documents
//! are serialized with [`crate::text::lossy_path`], so a file name that is
//! not UTF-8 cannot make encoding fail.
//!
//! Documents carry host text as it is, quoted by their format, but never a
//! character a terminal would act on: JSON escapes C0 controls itself, and
//! [`TerminalSafe`] also writes C1 controls, bidirectional overrides and
//! line separators as `\uXXXX` (the same string to a JSON reader). YAML
//! escapes every control character and the separators itself
//! (bidirectional overrides are left as they are).

use std::io::{self, Write};

use anyhow::Context as _;
use clap::ValueEnum;
use serde::Serialize;

/// How a command prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Plain text, for people.
    Text,
    /// One JSON document.
    Json,
    /// One YAML document (every string quoted).
    Yaml,
}

/// `value` as pretty JSON or quoted YAML, ending in a newline.
pub(crate) fn encode<T: Serialize>(format: OutputFormat, value: &T) -> anyhow::Result<Vec<u8>> {
    match format {
        OutputFormat::Yaml => {
            let options = serde_saphyr::ser_options! { quote_all: true };
            let mut text = serde_saphyr::to_string_with_options(value, options)
                .context("cannot encode the output as YAML")?;
            if !text.ends_with('\n') {
                text.push('\n');
            }
            Ok(text.into_bytes())
        }
        OutputFormat::Json | OutputFormat::Text => {
            let mut bytes = Vec::new();
            let mut ser = serde_json::Serializer::with_formatter(
                &mut bytes,
                TerminalSafe(serde_json::ser::PrettyFormatter::new()),
            );
            value
                .serialize(&mut ser)
                .context("cannot encode the output as JSON")?;
            bytes.push(b'\n');
            Ok(bytes)
        }
    }
}

/// serde_json's pretty formatter, also writing the characters
/// [`crate::text::needs_escape`] names that JSON leaves raw (C1 controls,
/// bidirectional formatting, line separators) as `\uXXXX` escapes.
struct TerminalSafe(serde_json::ser::PrettyFormatter<'static>);

impl serde_json::ser::Formatter for TerminalSafe {
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut rest = fragment;
        while let Some(at) = rest.find(crate::text::needs_escape) {
            let (clean, tail) = rest.split_at(at);
            writer.write_all(clean.as_bytes())?;
            let mut chars = tail.chars();
            if let Some(c) = chars.next() {
                // All of them are in the Basic Multilingual Plane.
                write!(writer, "\\u{:04x}", u32::from(c))?;
            }
            rest = chars.as_str();
        }
        writer.write_all(rest.as_bytes())
    }

    fn begin_array<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.begin_array(writer)
    }

    fn end_array<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_array(writer)
    }

    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.0.begin_array_value(writer, first)
    }

    fn end_array_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_array_value(writer)
    }

    fn begin_object<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.begin_object(writer)
    }

    fn end_object<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_object(writer)
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.0.begin_object_key(writer, first)
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.begin_object_value(writer)
    }

    fn end_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_object_value(writer)
    }
}

/// Writes `value` as pretty JSON or quoted YAML, in one write once it is
/// wholly encoded: nothing is written when encoding fails.
pub(crate) fn write_structured<T: Serialize>(
    out: &mut dyn Write,
    format: OutputFormat,
    value: &T,
) -> anyhow::Result<()> {
    let bytes = encode(format, value)?;
    out.write_all(&bytes)?;
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_escapes_what_a_terminal_would_act_on_and_stays_the_same_string() {
        let s = "a\x1b[31m\r\n\u{9b}2J\u{202e}b\u{2028}é日";
        let bytes = encode(OutputFormat::Json, &[s]).unwrap();
        let text = String::from_utf8(bytes).unwrap();
        assert_eq!(
            text,
            "[\n  \"a\\u001b[31m\\r\\n\\u009b2J\\u202eb\\u2028é日\"\n]\n"
        );
        let back: Vec<String> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, [s]);
    }

    #[test]
    fn json_is_pretty_printed_as_before() {
        let v = serde_json::json!({"a": [1, {"b": null}], "c": []});
        let text = String::from_utf8(encode(OutputFormat::Json, &v).unwrap()).unwrap();
        assert_eq!(
            text,
            format!("{}\n", serde_json::to_string_pretty(&v).unwrap())
        );
    }
}

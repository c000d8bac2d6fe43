//! Machine-readable output shared by the commands: `-o text|json|yaml`.
//!
//! Every command that prints a document writes it through
//! [`write_structured`], which encodes the whole document before writing a
//! byte: stdout then holds either one complete document or, when the
//! command fails, nothing (the error goes to stderr). Paths in documents
//! are serialized with [`crate::text::lossy_path`], so a file name that is
//! not UTF-8 cannot make encoding fail.

use std::io::Write;

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
            let mut bytes =
                serde_json::to_vec_pretty(value).context("cannot encode the output as JSON")?;
            bytes.push(b'\n');
            Ok(bytes)
        }
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

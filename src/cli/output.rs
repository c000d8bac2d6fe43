//! Machine-readable output shared by the commands: `-o text|json|yaml`.

use std::io::Write;

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

/// Writes `value` as pretty JSON or quoted YAML.
pub(crate) fn write_structured<T: Serialize>(
    out: &mut dyn Write,
    format: OutputFormat,
    value: &T,
) -> anyhow::Result<()> {
    match format {
        OutputFormat::Yaml => {
            let options = serde_saphyr::ser_options! { quote_all: true };
            let text = serde_saphyr::to_string_with_options(value, options)?;
            out.write_all(text.as_bytes())?;
            if !text.ends_with('\n') {
                writeln!(out)?;
            }
        }
        OutputFormat::Json | OutputFormat::Text => {
            // As an io::Error, so that a closed pipe is recognised as one.
            serde_json::to_writer_pretty(&mut *out, value).map_err(std::io::Error::from)?;
            writeln!(out)?;
        }
    }
    Ok(())
}

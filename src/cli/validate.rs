//! `cdigen validate`: checks spec files and directories by the rules
//! runtimes apply, per file and across files (conflicts, shadowing).

use std::io::Write;

use super::output::{OutputFormat, write_structured};
use super::{EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, ValidateArgs, ValidateFormat};
use crate::cdi::dirs::{FileReport, Input, Severity, scan};
use crate::text::{Escaped, path};

/// `validate -o json`: `{"valid", "inputErrors", "files"}`.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Document<'a> {
    valid: bool,
    input_errors: &'a [String],
    files: &'a [FileReport],
}

pub(crate) fn run(args: &ValidateArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    let inputs: Vec<Input> = super::inputs(&args.paths);
    let result = scan(&inputs);
    // An input that cannot be read is an environment error, like elsewhere.
    let code = if !result.input_errors.is_empty() {
        EXIT_ERROR
    } else if result.has_errors() {
        EXIT_FINDINGS
    } else {
        EXIT_OK
    };
    match args.output_format {
        ValidateFormat::Json => {
            let doc = Document {
                valid: !result.has_errors(),
                input_errors: &result.input_errors,
                files: &result.files,
            };
            write_structured(out, OutputFormat::Json, &doc)?;
        }
        ValidateFormat::Text => {
            let (mut errors, mut warnings) = (0, 0);
            for e in &result.input_errors {
                writeln!(out, "error: {}", Escaped(e))?;
                errors += 1;
            }
            for f in &result.files {
                if f.findings.is_empty() {
                    writeln!(
                        out,
                        "{}: ok ({})",
                        path(&f.path),
                        plural(f.devices.len(), "device")
                    )?;
                }
                for x in &f.findings {
                    let sev = match x.severity {
                        Severity::Error => {
                            errors += 1;
                            "error"
                        }
                        Severity::Warning => {
                            warnings += 1;
                            "warning"
                        }
                    };
                    let at = if x.location.is_empty() {
                        String::new()
                    } else {
                        format!("{}: ", Escaped(&x.location))
                    };
                    writeln!(out, "{}: {sev}: {at}{}", path(&f.path), Escaped(&x.message))?;
                }
            }
            writeln!(
                out,
                "{} checked: {}, {}",
                plural(result.files.len(), "file"),
                plural(errors, "error"),
                plural(warnings, "warning")
            )?;
        }
    }
    Ok(code)
}

/// `1 file`, `2 files`.
fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

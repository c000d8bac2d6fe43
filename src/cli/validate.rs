//! `cdigen validate`: checks spec files and directories by the rules
//! runtimes apply, per file and across files (conflicts, shadowing).

use std::io::Write;

use super::{EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, ValidateArgs, ValidateFormat};
use crate::cdi::dirs::{Input, Severity, scan};

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
            let doc = serde_json::json!({
                "valid": !result.has_errors(),
                "inputErrors": result.input_errors,
                "files": result.files,
            });
            // As an io::Error, so that a closed pipe is recognised as one.
            serde_json::to_writer_pretty(&mut *out, &doc).map_err(std::io::Error::from)?;
            writeln!(out)?;
        }
        ValidateFormat::Text => {
            let (mut errors, mut warnings) = (0, 0);
            for e in &result.input_errors {
                writeln!(out, "error: {e}")?;
                errors += 1;
            }
            for f in &result.files {
                if f.findings.is_empty() {
                    writeln!(
                        out,
                        "{}: ok ({})",
                        f.path.display(),
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
                        format!("{}: ", x.location)
                    };
                    writeln!(out, "{}: {sev}: {at}{}", f.path.display(), x.message)?;
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

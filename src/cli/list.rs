//! `cdigen list`: the fully-qualified device names a user can pass to
//! `podman run --device`, resolved across spec directories as runtimes do.

use std::io::Write;

use super::output::{OutputFormat, write_structured};
use super::{EXIT_ERROR, EXIT_OK, ListArgs};
use crate::cdi::dirs::{Input, Severity, scan};

pub(crate) fn run(args: &ListArgs, out: &mut dyn Write, err: &mut dyn Write) -> anyhow::Result<u8> {
    let inputs: Vec<Input> = if args.spec_dirs.is_empty() {
        super::default_inputs()
    } else {
        args.spec_dirs
            .iter()
            .map(|p| Input {
                path: p.clone(),
                explicit: true,
            })
            .collect()
    };
    let result = scan(&inputs);
    for e in &result.input_errors {
        writeln!(err, "cdigen: {e}")?;
    }
    // Problems go to stderr; the listing goes on with what resolved.
    for f in &result.files {
        for finding in f.findings.iter().filter(|x| x.severity == Severity::Error) {
            let at = if finding.location.is_empty() {
                String::new()
            } else {
                format!("{}: ", finding.location)
            };
            writeln!(err, "cdigen: {}: {at}{}", f.path.display(), finding.message)?;
        }
    }
    match args.output_format {
        OutputFormat::Text => {
            for d in &result.devices {
                writeln!(out, "{}", d.name)?;
            }
        }
        format => write_structured(out, format, &result.devices)?,
    }
    // A spec dir the user named that cannot be read is an environment error.
    Ok(if result.input_errors.is_empty() {
        EXIT_OK
    } else {
        EXIT_ERROR
    })
}

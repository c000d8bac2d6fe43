//! `cdigen list`: the fully-qualified device names a user can pass to
//! `podman run --device`, resolved across spec directories as runtimes do.

use std::io::Write;

use super::output::{OutputFormat, write_structured};
use super::{EXIT_ERROR, EXIT_OK, ListArgs};
use crate::cdi::dirs::{Input, Severity, scan};
use crate::text::{Escaped, path};

pub(crate) fn run(args: &ListArgs, out: &mut dyn Write, err: &mut dyn Write) -> anyhow::Result<u8> {
    if args.discovered {
        return discovered(args, out, err);
    }
    let inputs: Vec<Input> = super::inputs(&args.spec_dirs);
    let result = scan(&inputs);
    for e in &result.input_errors {
        writeln!(err, "cdigen: {}", Escaped(e))?;
    }
    // Problems go to stderr; the listing goes on with what resolved.
    for f in &result.files {
        for finding in f.findings.iter().filter(|x| x.severity == Severity::Error) {
            let at = if finding.location.is_empty() {
                String::new()
            } else {
                format!("{}: ", Escaped(&finding.location))
            };
            writeln!(
                err,
                "cdigen: {}: {at}{}",
                path(&f.path),
                Escaped(&finding.message)
            )?;
        }
    }
    match args.output_format {
        OutputFormat::Text => {
            for d in &result.devices {
                writeln!(out, "{}", Escaped(&d.name))?;
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

/// A name `generate` would write, with its spec file name and generator.
#[derive(serde::Serialize)]
struct WouldWrite {
    name: String,
    file: String,
    generator: String,
}

/// `list --discovered`: the names `generate` would produce now.
fn discovered(args: &ListArgs, out: &mut dyn Write, err: &mut dyn Write) -> anyhow::Result<u8> {
    let (generators, templates, broken) = super::pipeline::definitions(&args.defs, &args.source)?;
    let broken = super::pipeline::report_broken(err, &broken)?;
    let (_root, found) = super::pipeline::discover_for_generate(&args.source, &generators)?;
    let plans = crate::generate::plan_all(&generators, &templates, &found, None);
    let code = if plans.failed.is_empty() && !broken {
        EXIT_OK
    } else {
        super::EXIT_FINDINGS
    };
    for f in plans.failed {
        super::print_error(err, &anyhow::Error::from(f.error))?;
    }
    let mut rows: Vec<WouldWrite> = plans
        .planned
        .iter()
        .flat_map(|p| {
            p.names().into_iter().map(|name| WouldWrite {
                name,
                file: p.file.clone(),
                generator: p.generator.clone(),
            })
        })
        .collect();
    rows.sort_by(|a, b| crate::cdi::codec::natural_cmp(&a.name, &b.name));
    match args.output_format {
        OutputFormat::Text => {
            for r in &rows {
                writeln!(out, "{}", Escaped(&r.name))?;
            }
        }
        format => write_structured(out, format, &rows)?,
    }
    Ok(code)
}

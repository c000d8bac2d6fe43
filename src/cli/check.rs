//! `cdigen check`: plans every file as `generate` does and compares it
//! with the disk, writing nothing; the engine is [`crate::check`].

use std::io::Write;

use super::output::{OutputFormat, write_structured};
use super::{CheckArgs, EXIT_FINDINGS, EXIT_OK};
use crate::check::{self, Dirs, Severity, plural};
use crate::generate::plan_all;
use crate::text::{Escaped, path};

pub(crate) fn run(
    args: &CheckArgs,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<u8> {
    let (generators, templates, broken) = super::pipeline::definitions(&args.defs, &args.source)?;
    let broken = super::pipeline::report_broken(err, &broken)?;
    if generators.is_empty() {
        if broken {
            return Ok(EXIT_FINDINGS);
        }
        anyhow::bail!("no generator selected (check --generator, --backend and `enabled`)");
    }
    let (root, found) = super::pipeline::discover_for_generate(&args.source, &generators)?;
    let plans = plan_all(&generators, &templates, &found, args.format.map(Into::into));
    let spec_dirs = crate::generate::coexist::runtime_dirs(&root, &args.spec_dirs);
    let dirs = Dirs {
        output_dir: args.output_dir.clone(),
        devinfo_dir: args.devinfo_dir.clone(),
        spec_dirs,
    };
    let report = check::run(&root, &plans, &dirs);
    match args.output_format {
        OutputFormat::Text => {
            for f in &report.findings {
                let warning = if f.severity == Severity::Warning {
                    " (warning)"
                } else {
                    ""
                };
                let device = f
                    .device
                    .as_ref()
                    .map(|d| format!("{}: ", Escaped(d)))
                    .unwrap_or_default();
                writeln!(
                    out,
                    "{}{warning}: {}: {device}{}",
                    f.kind.as_str(),
                    path(&f.file),
                    Escaped(&f.reason)
                )?;
            }
            writeln!(
                out,
                "{}: {} and {} checked, {}, {}",
                if report.current {
                    "current"
                } else {
                    "not current"
                },
                plural(report.checked.specs, "spec file"),
                plural(report.checked.device_info, "device-info file"),
                plural(report.count(Severity::Error), "problem"),
                plural(report.count(Severity::Warning), "warning"),
            )?;
        }
        format => write_structured(out, format, &report)?,
    }
    Ok(if report.current && !broken {
        EXIT_OK
    } else {
        EXIT_FINDINGS
    })
}

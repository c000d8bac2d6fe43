//! `cdigen generate`: discover, render, validate and write specs.

use std::io::Write;
use std::path::Path;

use anyhow::Context as _;

use super::{EXIT_FINDINGS, EXIT_OK, GenerateArgs};
use crate::generate::{Action, Planned, apply_all, plan_all, preview_all};
use crate::text;
use crate::write::ManagedDir;
use crate::write::Outcome;

pub(crate) fn run(
    args: &GenerateArgs,
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
    let spec_dirs = crate::generate::coexist::runtime_dirs(&root, &args.spec_dirs);
    let format = args.format.map(Into::into);
    let planning = plan_all(&generators, &templates, &found, format);
    // The plans hold all that writing needs: the devices found go before
    // the spec directories are read (the root's lookups went when
    // discovery ended: `pipeline::discover`).
    drop(found);
    drop(root);
    let mut failed = broken || !planning.failed.is_empty();
    for f in planning.failed {
        super::print_error(err, &anyhow::Error::from(f.error))?;
    }
    let plans: Vec<Planned> = planning.planned;

    if let Some(target) = &args.output {
        return write_single(target, &plans, args, out, failed);
    }

    if args.dry_run {
        // The same lines as the real run, each prefixed with "would be".
        let previewed = preview_all(
            &args.output_dir,
            &args.devinfo_dir,
            &spec_dirs,
            &generators,
            &plans,
        )?;
        for p in &previewed.specs {
            let c = &p.change;
            writeln!(
                out,
                "would be {}: {} ({})",
                c.action.as_str(),
                text::path(&c.path),
                devices(c.devices)
            )?;
            if args.diff && c.action != Action::Unchanged && c.action != Action::LeftAlone {
                write_diff(out, p)?;
            }
        }
        for p in &previewed.devinfo {
            let c = &p.change;
            writeln!(
                out,
                "would be {}: {}",
                c.action.as_str(),
                text::path(&c.path)
            )?;
        }
        for e in previewed.errors {
            super::print_error(err, &anyhow::Error::from(e))?;
            failed = true;
        }
        return Ok(if failed { EXIT_FINDINGS } else { EXIT_OK });
    }

    let applied = apply_all(
        &args.output_dir,
        &args.devinfo_dir,
        &spec_dirs,
        &generators,
        &plans,
    )?;
    for c in &applied.specs {
        writeln!(
            out,
            "{}: {} ({})",
            c.action.as_str(),
            text::path(&c.path),
            devices(c.devices)
        )?;
    }
    for c in &applied.devinfo {
        writeln!(out, "{}: {}", c.action.as_str(), text::path(&c.path))?;
    }
    for e in applied.errors {
        super::print_error(err, &anyhow::Error::from(e))?;
        failed = true;
    }
    if plans.iter().all(|p| p.spec.is_none()) && !failed {
        tracing::info!("no device matched any generator");
    }
    Ok(if failed { EXIT_FINDINGS } else { EXIT_OK })
}

/// A unified diff of a foreseen change, for `--dry-run --diff`.
fn write_diff(out: &mut dyn Write, p: &crate::generate::Preview) -> std::io::Result<()> {
    let old = p
        .old
        .as_deref()
        .map(String::from_utf8_lossy)
        .unwrap_or_default();
    let new = String::from_utf8_lossy(&p.new);
    let diff = similar::TextDiff::from_lines(old.as_ref(), new.as_ref());
    let shown = text::path(&p.change.path).to_string();
    let name = shown.trim_start_matches('/');
    let diff = diff
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{name}"), &format!("b/{name}"))
        .to_string();
    // The old file may hold anything: each line escaped.
    for line in diff.split_inclusive('\n') {
        let line = line.strip_suffix('\n').unwrap_or(line);
        writeln!(out, "{}", text::Escaped(line))?;
    }
    Ok(())
}

/// `--output FILE|-`: exactly one spec, to stdout or one file.
fn write_single(
    target: &Path,
    plans: &[Planned],
    args: &GenerateArgs,
    out: &mut dyn Write,
    failed: bool,
) -> anyhow::Result<u8> {
    let with_spec: Vec<&Planned> = plans.iter().filter(|p| p.spec.is_some()).collect();
    let plan = match with_spec.as_slice() {
        [one] => *one,
        [] if failed => return Ok(EXIT_FINDINGS),
        [] => anyhow::bail!("no device matched the selected generators: nothing to write"),
        many => {
            let names: Vec<&str> = many.iter().map(|p| p.generator.as_str()).collect();
            anyhow::bail!(
                "--output writes one spec, but {} generators produced one ({}); pick one with --generator",
                many.len(),
                names.join(", ")
            );
        }
    };
    if target == Path::new("-") {
        out.write_all(&plan.bytes)?;
        return Ok(if failed { EXIT_FINDINGS } else { EXIT_OK });
    }
    let dir = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => Path::new(".").to_path_buf(),
    };
    let name = target
        .file_name()
        .context("--output needs a file name")?
        .to_str()
        .with_context(|| {
            format!(
                "--output {}: cdigen writes only file names that are UTF-8",
                text::path(target)
            )
        })?;
    let wanted = crate::cdi::Format::from_path(target).with_context(|| {
        format!(
            "{}: the file name must end in .json or .yaml (runtimes load only those)",
            text::path(target)
        )
    })?;
    let bytes = if args.format.map(Into::into) == Some(wanted) || args.format.is_none() {
        match &plan.spec {
            Some(spec) => crate::cdi::codec::to_bytes(spec, wanted)?,
            None => plan.bytes.clone(),
        }
    } else {
        anyhow::bail!(
            "--format disagrees with the extension of {}",
            text::path(target)
        );
    };
    if args.dry_run {
        writeln!(out, "would write {}", text::path(target))?;
        return Ok(EXIT_OK);
    }
    let mut managed = ManagedDir::open(&dir)?;
    let outcome = managed.write(name, &bytes, &plan.generator)?;
    let word = match outcome {
        Outcome::Created => "created",
        Outcome::Updated => "updated",
        Outcome::Unchanged => "unchanged",
    };
    writeln!(out, "{word}: {}", text::path(target))?;
    Ok(if failed { EXIT_FINDINGS } else { EXIT_OK })
}

/// `1 device`, `2 devices`.
fn devices(n: usize) -> String {
    if n == 1 {
        "1 device".into()
    } else {
        format!("{n} devices")
    }
}

//! Shared setup of the commands that discover: open the root, run the
//! backends, load generator definitions and templates
//! ([`crate::generate::inputs`], from the flags).

use std::path::Path;

use super::{DefinitionArgs, SourceArgs};
use crate::discover::{self, Discovery};
use crate::generate::inputs;
use crate::generator::{self, Loaded};
use crate::render::Templates;
use crate::root::HostRoot;
use crate::text;

/// Opens the root and runs discovery for `generators` (what they ask the
/// generic backend to scan; see [`discover::discover_for`]). The root
/// must look like a Linux host before and after
/// ([`HostRoot::check_host`]): no device found there is not the host's
/// answer.
pub(crate) fn discover(
    source: &SourceArgs,
    generators: &[Loaded],
) -> anyhow::Result<(HostRoot, Discovery)> {
    let root = source.host_root()?;
    let scan = generator::scan(generators.iter().map(|l| &l.generator));
    let found = discover::discover_for(&root, &source.backends, &scan)?;
    // sysfs gone during discovery: what it found is not the host's.
    root.check_host()?;
    // Discovery's lookups are most of the memory held at this point; what
    // comes after looks up little.
    root.forget_lookups();
    for w in &found.warnings {
        tracing::warn!("{}: {}", text::path(&w.path), w.message);
    }
    Ok((root, found))
}

/// The devices `generate` needs for `generators`: those of `--backend`
/// (when given), plus the generic devices their `join`s add, so that
/// `--backend drm` still gives AMD GPUs `/dev/kfd` ([`inputs::backends`]).
pub(crate) fn discover_for_generate(
    source: &SourceArgs,
    generators: &[Loaded],
) -> anyhow::Result<(HostRoot, Discovery)> {
    let mut source = source.clone();
    source.backends = inputs::backends(&source.backends, generators);
    discover(&source, generators)
}

/// The definitions to run: `--generator` names (enabled or not), or every
/// enabled one ([`inputs::generators`]).
pub(crate) fn generators(
    dir: Option<&Path>,
    only: &[String],
) -> anyhow::Result<(Vec<Loaded>, Vec<generator::Broken>)> {
    inputs::generators(dir, only)
}

/// Prints each broken definition as a failed generator (`cdigen: generator
/// "x" not run ...: FILE: what is wrong at line N`); true when there was
/// one, for the exit status of a partial failure.
pub(crate) fn report_broken(
    err: &mut dyn std::io::Write,
    broken: &[generator::Broken],
) -> std::io::Result<bool> {
    for b in broken {
        writeln!(err, "cdigen: {}", text::Escaped(&b.to_string()))?;
    }
    Ok(!broken.is_empty())
}

/// The definitions and templates of `--generators`, `--templates` and
/// `--generator`, for the backends of `--backend` ([`inputs::definitions`]).
pub(crate) fn definitions(
    defs: &DefinitionArgs,
    source: &SourceArgs,
) -> anyhow::Result<(Vec<Loaded>, Templates, Vec<generator::Broken>)> {
    inputs::definitions(&defs.definitions(), &source.backends)
}

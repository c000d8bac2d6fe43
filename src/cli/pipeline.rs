//! Shared setup of the commands that discover: open the root, run the
//! backends, load generator definitions and templates.

use std::path::{Path, PathBuf};

use super::{DefinitionArgs, SourceArgs};
use crate::discover::{self, Discovery};
use crate::generator::{self, Loaded};
use crate::render::Templates;
use crate::root::HostRoot;
use crate::text;

/// Where user templates live when `--templates` is not given.
pub(crate) const USER_TEMPLATES: &str = "/etc/cdigen/templates";

/// Opens the root and runs discovery for `generators` (what they ask the
/// generic backend to scan; see [`discover::discover_for`]).
pub(crate) fn discover(
    source: &SourceArgs,
    generators: &[Loaded],
) -> anyhow::Result<(HostRoot, Discovery)> {
    let root = source.host_root()?;
    let scan = generator::scan(generators.iter().map(|l| &l.generator));
    let found = discover::discover_for(&root, &source.backends, &scan)?;
    for w in &found.warnings {
        tracing::warn!("{}: {}", text::path(&w.path), w.message);
    }
    Ok((root, found))
}

/// The devices `generate` needs for `generators`: those of `--backend`
/// (when given), plus the generic devices their `join`s add, so that
/// `--backend drm` still gives AMD GPUs `/dev/kfd`.
pub(crate) fn discover_for_generate(
    source: &SourceArgs,
    generators: &[Loaded],
) -> anyhow::Result<(HostRoot, Discovery)> {
    let mut source = source.clone();
    source.backends = generate_backends(&source, generators);
    discover(&source, generators)
}

/// The backends whose devices (and warnings) `generators` need:
/// `--backend`, else the backends of the generators (every enabled one,
/// or those `--generator` names; empty when there are none: all), plus
/// the generic backend when a generator `join`s generic devices. Every
/// backend still runs, for precedence; the others are not reported.
pub(crate) fn generate_backends(source: &SourceArgs, generators: &[Loaded]) -> Vec<String> {
    let mut backends = source.backends.clone();
    if backends.is_empty() {
        for l in generators {
            if !backends.contains(&l.generator.backend) {
                backends.push(l.generator.backend.clone());
            }
        }
    }
    let generic = discover::generic::NAME.to_string();
    if !backends.is_empty()
        && !backends.contains(&generic)
        && generators.iter().any(|l| !l.generator.join.is_empty())
    {
        backends.push(generic);
    }
    backends
}

/// A user directory (`--generators`, `--templates` or their environment
/// variables, else the default) as it is to be read: `None` when it does
/// not exist, whether given or the default, which is then skipped with a
/// debug line (a DaemonSet or a unit names the directory where the host
/// may keep them). A path that exists but cannot be read as a directory
/// (a file, no permission) is kept, and reading it fails naming it.
fn user_dir(dir: Option<&Path>, default: &str, what: &str) -> Option<PathBuf> {
    let dir = dir.map_or_else(|| PathBuf::from(default), Path::to_path_buf);
    match dir.try_exists() {
        Ok(false) => {
            tracing::debug!("{}: no such directory: no user {what}", text::path(&dir));
            None
        }
        Ok(true) | Err(_) => Some(dir),
    }
}

/// Loads the definitions (built-in, then `dir`, default
/// `/etc/cdigen/generators.d`, skipped when missing) and picks the ones to
/// run: the `only` names (enabled or not), or every enabled one.
pub(crate) fn generators(dir: Option<&Path>, only: &[String]) -> anyhow::Result<Vec<Loaded>> {
    let user = user_dir(dir, generator::USER_DIR, "generator definitions");
    let all = generator::load(user.as_slice())?;
    for name in only {
        if !all.iter().any(|l| &l.generator.name == name) {
            let known: Vec<&str> = all.iter().map(|l| l.generator.name.as_str()).collect();
            anyhow::bail!("unknown generator {name:?} (known: {})", known.join(", "));
        }
    }
    Ok(all
        .into_iter()
        .filter(|l| {
            if only.is_empty() {
                l.generator.enabled
            } else {
                only.contains(&l.generator.name)
            }
        })
        .collect())
}

/// Loads generators (built-in, then the user directory) and templates
/// (built-in, then the user directory), and picks the ones to run:
/// `--generator` names, or every enabled one (of the selected backends).
/// A user directory that does not exist is skipped, given or not.
pub(crate) fn definitions(
    defs: &DefinitionArgs,
    source: &SourceArgs,
) -> anyhow::Result<(Vec<Loaded>, Templates)> {
    let templates_dir = user_dir(defs.templates.as_deref(), USER_TEMPLATES, "templates");
    let templates = Templates::load(templates_dir.as_deref())?;
    let chosen: Vec<Loaded> = generators(defs.generators.as_deref(), &defs.only)?
        .into_iter()
        .filter(|l| source.backends.is_empty() || source.backends.contains(&l.generator.backend))
        .collect();
    for l in &chosen {
        if !templates.names().contains(&l.generator.template.as_str()) {
            anyhow::bail!(
                "{}: template {:?} does not exist (known: {})",
                text::path(&l.source),
                l.generator.template,
                templates.names().join(", ")
            );
        }
    }
    Ok((chosen, templates))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(backends: &[&str]) -> SourceArgs {
        SourceArgs {
            root: PathBuf::from("/"),
            backends: backends.iter().map(|b| b.to_string()).collect(),
            driver_root: None,
            library_search_path: Vec::new(),
            hook_path: None,
            no_nvml: false,
        }
    }

    #[test]
    fn backends_asked_for_by_flag_or_by_generator() {
        let all = generator::load(&[]).unwrap();
        let named = |names: &[&str]| -> Vec<Loaded> {
            all.iter()
                .filter(|l| names.contains(&l.generator.name.as_str()))
                .cloned()
                .collect()
        };
        assert_eq!(
            generate_backends(&source(&[]), &named(&["usb-serial"])),
            ["generic"]
        );
        assert_eq!(
            generate_backends(&source(&[]), &named(&["nvidia", "vfio"])),
            ["nvidia", "vfio"]
        );
        // amd-gpu joins /dev/kfd from the generic backend.
        assert_eq!(
            generate_backends(&source(&["drm"]), &named(&["amd-gpu"])),
            ["drm", "generic"]
        );
        assert_eq!(
            generate_backends(&source(&[]), &named(&["amd-gpu"])),
            ["drm", "generic"]
        );
        // No generator: nothing narrows the run.
        assert!(generate_backends(&source(&[]), &[]).is_empty());
    }
}

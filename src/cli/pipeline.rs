//! Shared setup of the commands that discover: open the root, run the
//! backends, load generator definitions and templates.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::{DefinitionArgs, SourceArgs};
use crate::discover::{self, Discovery};
use crate::generator::{self, Loaded};
use crate::render::Templates;
use crate::root::HostRoot;

/// Where user templates live when `--templates` is not given.
pub(crate) const USER_TEMPLATES: &str = "/etc/cdigen/templates";

/// Opens the root and runs discovery.
pub(crate) fn discover(source: &SourceArgs) -> anyhow::Result<(HostRoot, Discovery)> {
    let root = HostRoot::open(&source.root)
        .with_context(|| format!("cannot use {} as the root", source.root.display()))?
        .with_driver_root(&source.driver_root);
    let found = discover::discover(&root, &source.backends)?;
    for w in &found.warnings {
        tracing::warn!("{}: {}", w.path.display(), w.message);
    }
    Ok((root, found))
}

/// Loads generators (built-in, then the user directory) and templates, and
/// picks the ones to run: `--generator` names, or every enabled one (of the
/// selected backends).
pub(crate) fn definitions(
    defs: &DefinitionArgs,
    source: &SourceArgs,
) -> anyhow::Result<(Vec<Loaded>, Templates)> {
    let user_dir = defs
        .generators
        .clone()
        .unwrap_or_else(|| PathBuf::from(generator::USER_DIR));
    let all = generator::load(&[user_dir])?;
    let templates_dir = match &defs.templates {
        Some(d) => Some(d.clone()),
        None => Some(PathBuf::from(USER_TEMPLATES)).filter(|p| Path::new(p).is_dir()),
    };
    let templates = Templates::load(templates_dir.as_deref())?;
    for name in &defs.only {
        if !all.iter().any(|l| &l.generator.name == name) {
            let known: Vec<&str> = all.iter().map(|l| l.generator.name.as_str()).collect();
            anyhow::bail!("unknown generator {name:?} (known: {})", known.join(", "));
        }
    }
    let chosen: Vec<Loaded> = all
        .into_iter()
        .filter(|l| {
            if defs.only.is_empty() {
                l.generator.enabled
            } else {
                defs.only.contains(&l.generator.name)
            }
        })
        .filter(|l| source.backends.is_empty() || source.backends.contains(&l.generator.backend))
        .collect();
    for l in &chosen {
        if !templates.names().contains(&l.generator.template.as_str()) {
            anyhow::bail!(
                "{}: template {:?} does not exist (known: {})",
                l.source.display(),
                l.generator.template,
                templates.names().join(", ")
            );
        }
    }
    Ok((chosen, templates))
}

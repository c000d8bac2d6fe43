//! [`Pipeline`]: the watch's [`Regenerate`], the same discover → plan →
//! write steps as `cdigen generate`, restricted to the affected
//! generators.
//!
//! Only the affected generators are planned and written, and the writer
//! leaves files with unchanged bytes untouched. A full pass discovers with
//! every backend; an event pass only with the backends whose devices the
//! affected generators use ([`backends_of`]). Precedence between backends
//! still needs the others (a GPU the NVIDIA backend claims is not the DRM
//! backend's): their latest claims are kept from the pass that last ran
//! them ([`discover::discover_again`]). That is safe because the events
//! that did not affect their generators are of subsystems they do not
//! listen to ([`discover::Backend::uevent_subsystems`]): they would find
//! what they found, and their generators' files, which are not
//! regenerated, hold what the kept claims say.
//!
//! What an event touched is not narrowed further (to the PCI function an
//! event names, say): a backend's devices depend on others' (a VF's on its
//! PF and on the numbering of every PF's RDMA devices, a VFIO device's on
//! its IOMMU group's other members), so rediscovering one device of a
//! backend is not safe in general.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use super::{FileChange, Pass, Regenerate, Scope, Watched};
use crate::cdi::{self, Format};
use crate::discover;
use crate::generate::{
    Action, Change, Definitions, Host, Planned, apply_all_until, inputs, plan_all,
};
use crate::generator::Loaded;
use crate::render::Templates;
use crate::root::HostRoot;

/// udevd keeps this file while its event queue is not empty (what
/// `udevadm settle` waits for).
const UDEV_QUEUE: &str = "/run/udev/queue";

/// udevd's control socket: it exists while udevd runs.
const UDEV_CONTROL: &str = "/run/udev/control";

/// The `generate` pipeline over fixed arguments.
pub struct Pipeline {
    source: Host,
    defs: Definitions,
    output_dir: PathBuf,
    devinfo_dir: PathBuf,
    format: Option<Format>,
    generators: Vec<Loaded>,
    templates: Templates,
    /// The last discovery's warnings: a warning is logged when it
    /// appears, not again at every pass while it stays.
    warned: BTreeSet<(PathBuf, String)>,
    /// Whether generators write their device-info files (off for the
    /// device plugin, which writes them on allocation).
    device_info: bool,
    /// Each generator's latest plan (what its files on disk say), by name.
    plans: BTreeMap<String, Arc<Planned>>,
    /// The spec directories runtimes read (`--spec-dir`); empty: the
    /// standard ones under the root ([`crate::generate::coexist::runtime_dirs`]).
    spec_dirs: Vec<PathBuf>,
    /// The MIG instances ([`super::mig::fingerprint`]) when the NVIDIA
    /// generators last ran and found GPUs: polled for changes while set.
    mig: Option<Vec<String>>,
    /// Each backend's latest claims, for the event passes that do not run
    /// it again.
    claims: discover::ClaimCache,
}

/// The backends whose devices the generators in `scope` use: their own,
/// and the generic backend for a generic `match` or a `join` (which the
/// generic backend scans).
pub fn backends_of(generators: &[Loaded], scope: &Scope) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for g in generators
        .iter()
        .map(|l| &l.generator)
        .filter(|g| scope.contains(&g.name))
    {
        out.insert(g.backend.clone());
        if g.source.is_some() || !g.join.is_empty() {
            out.insert(discover::generic::NAME.to_string());
        }
    }
    out
}

/// The subsystems among [`subsystems_of`] whose parentless devices (under
/// `/devices/virtual/<subsystem>/`) cannot change what `loaded` generates.
/// None for a generic generator, which may match any device.
pub fn physical_only_of(loaded: &Loaded) -> Vec<String> {
    let g = &loaded.generator;
    if g.source.is_some() {
        return Vec::new();
    }
    discover::backend(&g.backend)
        .map(|b| b.physical_only_subsystems())
        .unwrap_or_default()
        .iter()
        .map(|s| (*s).to_string())
        .collect()
}

/// The uevent subsystems of a generator: its backend's (see
/// [`discover::Backend::uevent_subsystems`]), or for a generic generator
/// the subsystem its `match` scans, plus those of its `join`s (`kfd` for
/// `amd-gpu`); `None` (any event) for a backend that does not say.
pub fn subsystems_of(loaded: &Loaded) -> Option<Vec<String>> {
    let g = &loaded.generator;
    let mut out: Vec<String> = match &g.source {
        Some(m) => vec![m.subsystem.clone()],
        None => discover::backend(&g.backend)
            .ok()?
            .uevent_subsystems()?
            .iter()
            .map(|x| (*x).to_string())
            .collect(),
    };
    for j in &g.join {
        if !out.contains(&j.source.subsystem) {
            out.push(j.source.subsystem.clone());
        }
    }
    Some(out)
}

impl Pipeline {
    /// Loads the definitions and checks the arguments, as `generate` does;
    /// the root must look like a Linux host now ([`Host::open`]).
    ///
    /// # Errors
    /// An unknown backend or generator, invalid definitions or templates,
    /// no generator selected, or a root that is not a host.
    pub fn new(
        source: Host,
        defs: Definitions,
        output_dir: PathBuf,
        devinfo_dir: PathBuf,
        format: Option<Format>,
    ) -> anyhow::Result<Self> {
        for name in &source.backends {
            discover::backend(name)?;
        }
        source.open()?;
        let (generators, templates) = load(&defs, &source)?;
        Ok(Pipeline {
            source,
            defs,
            output_dir,
            devinfo_dir,
            format,
            generators,
            templates,
            warned: BTreeSet::new(),
            device_info: true,
            plans: BTreeMap::new(),
            spec_dirs: Vec::new(),
            mig: None,
            claims: discover::ClaimCache::new(),
        })
    }

    /// Turns the generators' device-info files off (`false`): the device
    /// plugin writes them for allocated devices only.
    pub fn with_device_info(mut self, on: bool) -> Self {
        self.device_info = on;
        if !on {
            no_device_info(&mut self.generators);
        }
        self
    }

    /// The spec directories runtimes read (`--spec-dir`), where another
    /// tool's file defining one of a spec's devices keeps it from being
    /// written; none: `/etc/cdi` and `/var/run/cdi` under the root.
    pub fn with_spec_dirs(mut self, dirs: Vec<PathBuf>) -> Self {
        self.spec_dirs = dirs;
        self
    }

    /// The generator definitions in use.
    pub fn generators(&self) -> &[Loaded] {
        &self.generators
    }

    /// The latest plan of each generator (by name) that planned: what its
    /// files on disk hold. A generator whose last plan failed keeps its
    /// previous one, as its files are left as they were.
    pub fn plans(&self) -> &BTreeMap<String, Arc<Planned>> {
        &self.plans
    }

    /// [`Regenerate::regenerate`], also handing back the root the pass saw
    /// the host through: its lookups (symlinks, directories) are still
    /// those of the host the pass found, so a reader of the same devices
    /// right after it (the device plugin's and DRA driver's inventory)
    /// sees what the pass saw, at a fraction of the lookups. Drop it soon:
    /// it goes stale as the host changes.
    ///
    /// # Errors
    /// As [`Regenerate::regenerate`].
    pub fn regenerate_seeing(
        &mut self,
        scope: &Scope,
        stop: &dyn Fn() -> bool,
    ) -> anyhow::Result<(Pass, HostRoot)> {
        let started = Instant::now();
        let root = self.root().map_err(keeping)?;
        let backends = inputs::backends(&self.source.backends, &self.generators);
        // Taken before discovery: a MIG change after it is seen by the
        // next poll.
        let nvidia_in_scope = self.nvidia_generators().any(|g| scope.contains(g));
        let mig = nvidia_in_scope.then(|| super::mig::fingerprint(&root));
        let wanted = match scope {
            Scope::All => None,
            Scope::Only(_) => Some(backends_of(&self.generators, scope)),
        };
        let again = |b: &str| wanted.as_ref().is_none_or(|w| w.contains(b));
        let rediscovered: Vec<String> = discover::backend_names()
            .into_iter()
            .filter(|b| again(b) || !self.claims.contains_key(b))
            .map(str::to_string)
            .collect();
        let scan = crate::generator::scan(self.generators.iter().map(|l| &l.generator));
        let found = discover::discover_again(&root, &backends, &scan, &again, &mut self.claims)?;
        // sysfs gone during discovery: what it found is not the host's.
        if let Err(e) = root.check_host() {
            self.claims.clear();
            return Err(keeping(e.into()));
        }
        if nvidia_in_scope {
            let gpus = found.devices.iter().any(|d| d.backend == NVIDIA);
            self.mig = mig.filter(|_| gpus);
        }
        let warnings: BTreeSet<(PathBuf, String)> = found
            .warnings
            .iter()
            .map(|w| (w.path.clone(), w.message.clone()))
            .collect();
        for (path, message) in warnings.difference(&self.warned) {
            tracing::warn!("{}: {message}", path.display());
        }
        self.warned = warnings;
        let selected: Vec<Loaded> = self
            .generators
            .iter()
            .filter(|l| scope.contains(&l.generator.name))
            .cloned()
            .collect();
        let discovered = Instant::now();
        let planning = plan_all(&selected, &self.templates, &found, self.format);
        let planned = Instant::now();
        let plans = planning.planned;
        let plan_errors = planning.failed.into_iter().map(|f| f.error);
        let before = old_names(&self.output_dir, &plans);
        let spec_dirs = crate::generate::coexist::runtime_dirs(&root, &self.spec_dirs);
        let applied = apply_all_until(
            &self.output_dir,
            &self.devinfo_dir,
            &spec_dirs,
            &selected,
            &plans,
            stop,
        )?;
        tracing::debug!(
            "discovered {} devices in {} ms ({}), planned {} in {} ms, wrote in {} ms",
            found.devices.len(),
            discovered.duration_since(started).as_millis(),
            rediscovered.join(", "),
            selected.len(),
            planned.duration_since(discovered).as_millis(),
            planned.elapsed().as_millis()
        );
        let mut pass = Pass {
            generators: selected.iter().map(|l| l.generator.name.clone()).collect(),
            rediscovered,
            changes: Vec::new(),
            errors: plan_errors
                .into_iter()
                .chain(applied.errors)
                .map(|e| format!("{:#}", anyhow::Error::from(e)))
                .collect(),
        };
        for c in applied.specs.iter().filter(|c| changed(c)) {
            let old = before
                .iter()
                .find(|(path, _)| *path == c.path)
                .map(|(_, names)| names.clone())
                .unwrap_or_default();
            let new: BTreeSet<String> = plans
                .iter()
                .find(|p| self.output_dir.join(&p.file) == c.path)
                .map(|p| p.names().into_iter().collect())
                .unwrap_or_default();
            pass.changes.push(FileChange {
                path: c.path.clone(),
                action: c.action,
                devices: Some(c.devices),
                added: new.difference(&old).cloned().collect(),
                removed: old.difference(&new).cloned().collect(),
            });
        }
        // What is on disk now: a plan whose spec was written (or found
        // unchanged); one that failed to write leaves the old file, and
        // its generator keeps the old plan.
        for p in &plans {
            let path = self.output_dir.join(&p.file);
            if p.spec.is_none() || applied.specs.iter().any(|c| c.path == path) {
                let mut kept = p.clone();
                kept.bytes = Vec::new();
                kept.devinfo = Vec::new();
                self.plans.insert(p.generator.clone(), Arc::new(kept));
            }
        }
        for c in applied.devinfo.iter().filter(|c| changed(c)) {
            pass.changes.push(FileChange {
                path: c.path.clone(),
                action: c.action,
                devices: None,
                added: Vec::new(),
                removed: Vec::new(),
            });
        }
        Ok((pass, root))
    }

    /// The host as `--root` gives it.
    ///
    /// # Errors
    /// When the root cannot be used.
    pub fn host_root(&self) -> anyhow::Result<HostRoot> {
        self.root()
    }

    fn root(&self) -> anyhow::Result<HostRoot> {
        self.source.open()
    }
}

fn no_device_info(generators: &mut [Loaded]) {
    for l in generators {
        l.generator.device_info = false;
    }
}

fn load(defs: &Definitions, source: &Host) -> anyhow::Result<(Vec<Loaded>, Templates)> {
    let (generators, templates, broken) = inputs::definitions(defs, &source.backends)?;
    // A broken definition fails its generators only: the others keep
    // being served (on every reload, until it is fixed).
    for b in &broken {
        tracing::error!("{b}");
    }
    if generators.is_empty() {
        anyhow::bail!("no generator selected (check --generator, --backend and `enabled`)");
    }
    Ok((generators, templates))
}

impl Regenerate for Pipeline {
    fn watched(&self) -> Vec<Watched> {
        self.generators
            .iter()
            .map(|l| Watched {
                name: l.generator.name.clone(),
                subsystems: subsystems_of(l),
                physical_only: physical_only_of(l),
            })
            .collect()
    }

    fn reload(&mut self) -> anyhow::Result<()> {
        let (mut generators, templates) = load(&self.defs, &self.source)?;
        if !self.device_info {
            no_device_info(&mut generators);
        }
        let names: BTreeSet<&str> = generators
            .iter()
            .map(|l| l.generator.name.as_str())
            .collect();
        self.plans.retain(|g, _| names.contains(g.as_str()));
        // What the generic backend scans may have changed.
        self.claims.clear();
        self.generators = generators;
        self.templates = templates;
        Ok(())
    }

    fn regenerate(&mut self, scope: &Scope, stop: &dyn Fn() -> bool) -> anyhow::Result<Pass> {
        Ok(self.regenerate_seeing(scope, stop)?.0)
    }

    fn udev_busy(&self) -> bool {
        self.root().is_ok_and(|r| r.exists(Path::new(UDEV_QUEUE)))
    }

    fn udev_running(&self) -> bool {
        self.root().is_ok_and(|r| r.exists(Path::new(UDEV_CONTROL)))
    }

    fn poll_every(&self) -> Option<std::time::Duration> {
        self.mig.as_ref().map(|_| super::mig::POLL)
    }

    fn poll(&mut self) -> Option<Scope> {
        let before = self.mig.as_ref()?;
        let now = super::mig::fingerprint(&self.root().ok()?);
        if now == *before {
            return None;
        }
        tracing::debug!("MIG instances changed: regenerating the NVIDIA generators");
        Some(Scope::Only(
            self.nvidia_generators().map(str::to_string).collect(),
        ))
    }
}

/// The NVIDIA backend's name.
const NVIDIA: &str = "nvidia";

impl Pipeline {
    /// The generators of the NVIDIA backend (those MIG changes affect).
    fn nvidia_generators(&self) -> impl Iterator<Item = &str> {
        self.generators
            .iter()
            .filter(|l| l.generator.backend == NVIDIA)
            .map(|l| l.generator.name.as_str())
    }
}

/// A root that is not (or no longer) a host, as a pass's error: nothing is
/// written or removed, and the servers keep the devices of the last pass
/// (they are handed no new inventory), until the host is back.
fn keeping(e: anyhow::Error) -> anyhow::Error {
    anyhow::anyhow!("{e:#}: keeping the files and devices of the last pass")
}

fn changed(c: &Change) -> bool {
    c.action != Action::Unchanged
}

/// The device names in the spec files the plans may replace or remove, as
/// they are before writing: (path, names). Files that do not parse give no
/// names (the change is still logged).
fn old_names(dir: &Path, plans: &[Planned]) -> Vec<(PathBuf, BTreeSet<String>)> {
    let mut out = Vec::new();
    for p in plans {
        let path = dir.join(&p.file);
        let Ok(crate::write::OnDisk::Bytes(bytes)) = crate::write::on_disk(&path) else {
            continue;
        };
        if bytes == p.bytes {
            continue;
        }
        let names = Format::from_path(&path)
            .and_then(|f| cdi::codec::parse(&bytes, f).ok())
            .map(|spec| {
                cdi::dirs::qualified_names(&spec)
                    .iter()
                    .map(ToString::to_string)
                    .collect()
            })
            .unwrap_or_default();
        out.push((path, names));
    }
    out
}

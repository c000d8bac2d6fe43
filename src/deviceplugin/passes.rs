//! The watch's [`Regenerate`] for the Kubernetes servers (`device-plugin`
//! and `dra-driver`): the pipeline keeps the specs current, and after
//! every pass the [`Inventory`] is rebuilt from its plans and the host's
//! `/dev` and handed to the server's [`AfterPass`].
//!
//! Colliding device IDs in the first pass stop the process (the reason is
//! kept for `run` to return); later ones are logged, and neither device is
//! offered.
//!
//! The devices' health signals send no event ([`super::signals`]): every
//! [`signals::POLL`] between passes the inventory is rebuilt from the
//! last plans, and handed on when it changed. NVIDIA XID errors
//! ([`super::xid`]) are heard by a thread of their own, started after the
//! first pass that has NVIDIA devices and stopped with the passes; what it
//! records counts from the next poll.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::inventory::{self, Inventory, ResourceDef};
use super::signals::{self, Checks};
use super::xid;
use crate::root::HostRoot;
use anyhow::Context as _;

use crate::watch::{self, Control, EventSource, Pass, Pipeline, Regenerate, Scope, Watched};

/// What a server does with the inventory of each pass.
pub trait AfterPass: Send {
    /// The (resource, ID) of the devices live allocations hold: kept,
    /// unhealthy, while gone. `previous` is the last inventory.
    fn held(&mut self, previous: &Inventory) -> BTreeSet<(String, String)>;
    /// Takes the inventory of a pass that started at `since`; `first` for
    /// the first pass.
    fn after(&mut self, inventory: &Inventory, first: bool, since: Instant);
}

/// The pipeline, then the inventory, then `A`.
pub struct Passes<A> {
    pipeline: Pipeline,
    defs: Vec<ResourceDef>,
    output_dir: PathBuf,
    previous: Inventory,
    control: Arc<Control>,
    fatal: Arc<Mutex<Option<anyhow::Error>>>,
    first: bool,
    after: A,
    checks: Checks,
    /// When the health signals are read next between passes.
    next_health: Instant,
    /// Opens the XID events, until a pass has NVIDIA devices.
    xid_open: Option<xid::Open>,
    /// The XID watch, once started (stopped when dropped).
    xid: Option<xid::Watch>,
}

impl<A: AfterPass> Passes<A> {
    /// Passes of `pipeline` writing into `output_dir`, offering the
    /// resources of its generators to `after`; a collision in the first
    /// pass is put in `fatal` and stops `control`.
    ///
    /// # Errors
    /// Invalid resources, or none at all.
    pub fn new(
        pipeline: Pipeline,
        output_dir: PathBuf,
        control: Arc<Control>,
        fatal: Arc<Mutex<Option<anyhow::Error>>>,
        after: A,
    ) -> anyhow::Result<Self> {
        let defs = inventory::resources(pipeline.generators())?;
        if defs.is_empty() {
            anyhow::bail!(
                "no generator advertises a resource (each has device_plugin.enabled: false, or none is selected)"
            );
        }
        Ok(Passes {
            pipeline,
            defs,
            output_dir,
            previous: Inventory::default(),
            control,
            fatal,
            first: true,
            after,
            checks: Checks::default(),
            next_health: Instant::now() + signals::POLL,
            xid_open: Some(xid::nvml()),
            xid: None,
        })
    }

    /// The same, hearing XID events from what `open` opens instead of
    /// NVML.
    #[must_use]
    pub fn with_xid_events(mut self, open: xid::Open) -> Self {
        self.xid_open = Some(open);
        self
    }

    /// The same, acting on health as `checks` say (`--ignore-health`).
    #[must_use]
    pub fn with_checks(mut self, checks: Checks) -> Self {
        self.checks = checks;
        self
    }

    /// Runs the watch over these passes on this thread, with the events of
    /// the source `open_source` opens, until `control` stops it; then the
    /// passes are dropped, and with them what `A` holds (the channels its
    /// server reads end).
    ///
    /// The servers run on another thread ([`serve_beside`]): the passes
    /// allocate most, and on the main thread they use the allocator's main
    /// heap, which gives memory back between passes as `cdigen watch`'s
    /// does. The servers' thread shares that heap when the process runs
    /// with one allocator arena ([`crate::cli::arena`]); with an arena of
    /// its own it keeps its peak beside it.
    ///
    /// # Errors
    /// The source cannot open, or the watch's own error.
    pub fn run_here(
        mut self,
        config: &watch::Config,
        open_source: impl FnOnce() -> anyhow::Result<Box<dyn EventSource>>,
        control: &Control,
    ) -> anyhow::Result<()> {
        let r = open_source().and_then(|mut source| {
            watch::run(config, source.as_mut(), &mut self, control, &mut |_| {})
        });
        drop(self);
        r.map(|_| ())
    }

    /// The inventory after a pass, read through the root the pass saw the
    /// host through (`root`).
    fn publish(&mut self, root: &HostRoot, since: Instant) {
        let started = Instant::now();
        // After a pass, the signals of what it changed; the poll, on its
        // own schedule however often passes come, reads every device's.
        let read = if self.first {
            self.next_health = Instant::now() + signals::POLL;
            inventory::Read::All
        } else {
            inventory::Read::Changed
        };
        let Some((inv, collisions)) = self.build(Some(root), read) else {
            return;
        };
        tracing::debug!(
            "inventory built in {} ms (health signals read); the pass before it took {} ms",
            started.elapsed().as_millis(),
            started.saturating_duration_since(since).as_millis()
        );
        if self.first && !collisions.is_empty() {
            let all: Vec<String> = collisions.iter().map(ToString::to_string).collect();
            if let Ok(mut f) = self.fatal.lock() {
                *f = Some(anyhow::anyhow!("{}", all.join("\n")));
            }
            self.control.stop();
            return;
        }
        for c in &collisions {
            tracing::warn!("{c}; offering neither");
        }
        self.start_xid();
        let first = std::mem::replace(&mut self.first, false);
        self.after.after(&inv, first, since);
        self.previous = inv;
    }

    /// Starts the XID watch when the plans have an NVIDIA device (with
    /// its driver's files) and it was not started yet; its health counts
    /// from the next build. No NVML (or `--no-nvml`) is one informational
    /// line.
    fn start_xid(&mut self) {
        if self.xid_open.is_none() {
            return;
        }
        let Some(files) = self
            .pipeline
            .plans()
            .values()
            .flat_map(|p| p.devices.iter())
            .find(|d| d.nvidia.is_some())
            .and_then(|d| d.driver_files.clone())
        else {
            return;
        };
        let Some(open) = self.xid_open.take() else {
            return;
        };
        let root = match self.pipeline.host_root() {
            Ok(r) => r,
            Err(e) => {
                tracing::info!("NVIDIA XID events are not watched: {e:#}");
                return;
            }
        };
        let runner = match open(&root, &files.files) {
            Ok(r) => r,
            Err(why) => {
                tracing::info!("NVIDIA XID events are not watched: {why}");
                return;
            }
        };
        let health = xid::XidHealth::default();
        match xid::Watch::start(runner, health.clone(), self.checks.clone()) {
            Ok(w) => {
                self.checks = self.checks.clone().with_vendor(Arc::new(health));
                self.xid = Some(w);
            }
            Err(e) => {
                tracing::warn!("NVIDIA XID events are not watched: cannot start a thread: {e}")
            }
        }
    }

    /// The inventory of the last plans and the host now, through `seen`
    /// (the root of the pass just made) or a root opened afresh; `None`
    /// when the root cannot be opened (logged).
    fn build(
        &mut self,
        seen: Option<&HostRoot>,
        read: inventory::Read,
    ) -> Option<(Inventory, inventory::Collisions)> {
        let fresh;
        let root = match seen {
            Some(r) => r,
            None => match self.pipeline.host_root() {
                Ok(r) => {
                    fresh = r;
                    &fresh
                }
                Err(e) => {
                    tracing::error!("{e:#}");
                    return None;
                }
            },
        };
        let held = self.after.held(&self.previous);
        Some(inventory::build_with(
            &self.defs,
            self.pipeline.plans(),
            root,
            &self.output_dir,
            &self.previous,
            &held,
            &self.checks,
            read,
        ))
    }

    /// Between passes: the inventory again, handed on when the devices'
    /// health (or anything else) changed. Collisions are the next pass's
    /// to report.
    fn check_health(&mut self) {
        self.next_health = Instant::now() + signals::POLL;
        if self.first {
            return;
        }
        let Some((inv, _)) = self.build(None, inventory::Read::All) else {
            return;
        };
        if inv != self.previous {
            tracing::debug!("the devices' health changed");
            self.after.after(&inv, false, Instant::now());
            self.previous = inv;
        }
    }
}

/// Runs `server` on a thread named `name` while `passes` run on this one
/// ([`Passes::run_here`]), and waits for both: the passes' end closes what
/// the server reads, and the server's end, a panic included, stops
/// `control` and so the passes.
///
/// # Errors
/// The thread cannot start or panicked, or the passes' error.
pub fn serve_beside<A: AfterPass>(
    name: &str,
    server: impl FnOnce() + Send + 'static,
    passes: Passes<A>,
    config: &watch::Config,
    open_source: impl FnOnce() -> anyhow::Result<Box<dyn EventSource>>,
    control: &Arc<Control>,
) -> anyhow::Result<()> {
    /// Stops the passes when the server ends, by a panic too.
    struct StopOnEnd(Arc<Control>);
    impl Drop for StopOnEnd {
        fn drop(&mut self) {
            self.0.stop();
        }
    }
    let stop = StopOnEnd(Arc::clone(control));
    let serving = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let _stop = stop;
            server();
        })
        .with_context(|| format!("cannot start the {name} thread"))?;
    let watched = passes.run_here(config, open_source, control);
    serving
        .join()
        .map_err(|_| anyhow::anyhow!("the {name} thread panicked"))?;
    watched
}

impl<A: AfterPass> Regenerate for Passes<A> {
    fn watched(&self) -> Vec<Watched> {
        self.pipeline.watched()
    }

    fn reload(&mut self) -> anyhow::Result<()> {
        self.pipeline.reload()?;
        match inventory::resources(self.pipeline.generators()) {
            Ok(defs) => self.defs = defs,
            Err(e) => tracing::error!("{e} (keeping the previous resources)"),
        }
        Ok(())
    }

    fn regenerate(&mut self, scope: &Scope, stop: &dyn Fn() -> bool) -> anyhow::Result<Pass> {
        let since = Instant::now();
        let (pass, root) = self.pipeline.regenerate_seeing(scope, stop)?;
        self.publish(&root, since);
        Ok(pass)
    }

    fn udev_busy(&self) -> bool {
        self.pipeline.udev_busy()
    }

    fn udev_running(&self) -> bool {
        self.pipeline.udev_running()
    }

    fn poll_every(&self) -> Option<Duration> {
        let health = self
            .next_health
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(100));
        Some(self.pipeline.poll_every().map_or(health, |p| p.min(health)))
    }

    fn poll(&mut self) -> Option<Scope> {
        if Instant::now() >= self.next_health {
            self.check_health();
        }
        self.pipeline.poll()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;
    use std::path::Path;

    /// Records each inventory it is handed.
    struct Record(Arc<Mutex<Vec<Inventory>>>);

    impl AfterPass for Record {
        fn held(&mut self, _: &Inventory) -> BTreeSet<(String, String)> {
            BTreeSet::new()
        }
        fn after(&mut self, inventory: &Inventory, _: bool, _: Instant) {
            self.0.lock().unwrap().push(inventory.clone());
        }
    }

    /// The entry of the device `id` in `inv`.
    fn entry<'i>(inv: &'i Inventory, id: &str) -> &'i crate::deviceplugin::inventory::Entry {
        inv.resources
            .values()
            .flat_map(|r| r.devices.values())
            .find(|e| e.device.id == id)
            .unwrap()
    }

    /// Whether the VF `0000:3b:00.3` of `inv` is healthy.
    fn vf_healthy(inv: &Inventory) -> bool {
        entry(inv, "0000:3b:00.3").healthy()
    }

    /// Passes over a copy of the example fixture (its GPU split into MIG
    /// devices gi1/ci0 and gi2/ci0, a VF `0000:3b:00.3`) in `tmp`,
    /// recording into `seen`: the root and the passes.
    fn example(
        tmp: &tempfile::TempDir,
        seen: &Arc<Mutex<Vec<Inventory>>>,
    ) -> (std::path::PathBuf, Passes<Record>) {
        let root = tmp.path().join("root");
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/example/root");
        let ok = std::process::Command::new("cp")
            .arg("-a")
            .arg(&fixture)
            .arg(&root)
            .status()
            .unwrap()
            .success();
        assert!(ok);
        let cdi = tmp.path().join("cdi");
        let pipeline = Pipeline::new(
            crate::generate::Host {
                root: root.clone(),
                backends: Vec::new(),
                driver_root: None,
                library_search_path: Vec::new(),
                hook_path: Some("/usr/bin/cdigen".into()),
                no_nvml: true,
            },
            crate::generate::Definitions {
                generators: Some("/nonexistent-cdigen-user-generators".into()),
                templates: None,
                only: Vec::new(),
            },
            cdi.clone(),
            tmp.path().join("devinfo"),
            None,
        )
        .unwrap()
        .with_device_info(false);
        let passes = Passes::new(
            pipeline,
            cdi,
            Arc::new(Control::new().unwrap()),
            Arc::default(),
            Record(Arc::clone(seen)),
        )
        .unwrap();
        (root, passes)
    }

    /// XID events reach the inventory, and with it the DRA slices' taints
    /// and both health streams, through the passes (with NVML's events a
    /// double: the binary cannot take one): a MIG instance's XID makes
    /// that MIG device unhealthy, the whole GPU's both; an application
    /// XID nothing. The watch starts after the first pass with NVIDIA
    /// devices, and stops with the passes.
    #[test]
    fn xid_events_taint_the_gpus_devices_through_the_passes() {
        use crate::deviceplugin::xid::double;
        use crate::dra::{health, names, slices};
        const GPU: &str = "GPU-6f1d3c2a-8b4e-4a7f-9c21-0d5e7b3a9f10";
        let tmp = tempfile::tempdir().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (dbl, script) = double::double(&[GPU], None);
        let opened = Arc::new(Mutex::new(Vec::new()));
        let files_seen = Arc::clone(&opened);
        let (_, passes) = example(&tmp, &seen);
        let mut passes = passes.with_xid_events(Box::new(move |_, files| {
            files_seen.lock().unwrap().push(files.len());
            Ok(dbl.runner())
        }));
        passes.regenerate(&Scope::All, &|| false).unwrap();
        // Opened once, with the driver's files, after the first pass.
        assert_eq!(opened.lock().unwrap().len(), 1);
        assert!(opened.lock().unwrap()[0] > 0);
        // Polls until the inventory handed on changes (the thread records
        // what it hears in its own time).
        let next = |passes: &mut Passes<Record>| -> Vec<names::DraDevice> {
            let before = seen.lock().unwrap().len();
            let deadline = Instant::now() + Duration::from_secs(10);
            while seen.lock().unwrap().len() == before && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
                passes.next_health = Instant::now();
                passes.poll();
            }
            assert_eq!(seen.lock().unwrap().len(), before + 1, "no new inventory");
            names::devices(seen.lock().unwrap().last().unwrap())
        };
        let by = |devices: &[names::DraDevice], name: &str| -> names::DraDevice {
            devices
                .iter()
                .find(|d| d.name.ends_with(name))
                .unwrap_or_else(|| panic!("no {name}"))
                .clone()
        };
        let taints = |d: &names::DraDevice| -> Vec<(String, String)> {
            slices::device(d, "dra.cdigen.io")
                .taints
                .unwrap_or_default()
                .into_iter()
                .map(|t| (t.value.unwrap_or_default(), t.effect))
                .collect()
        };
        // An application XID, then one of MIG instance gi2/ci0.
        script.xid(GPU, 13, None);
        script.xid(GPU, 94, Some((2, 0)));
        let devices = next(&mut passes);
        let (mig1, mig2) = (by(&devices, "mig-1-0"), by(&devices, "mig-2-0"));
        assert!(taints(&mig1).is_empty());
        assert_eq!(taints(&mig2), [("NvidiaXid94".into(), "NoSchedule".into())]);
        let report = health::report(&devices, "node-1", 0, Duration::from_secs(30));
        let of = |name: &str| report.iter().find(|h| h.device.ends_with(name)).unwrap();
        assert!(of("mig-1-0").healthy);
        assert!(!of("mig-2-0").healthy);
        assert_eq!(
            of("mig-2-0").message,
            format!("NVML reported XID 94 on MIG device gi2/ci0 of GPU {GPU}")
        );
        // The device plugin's entry (ListAndWatch's health) is the same.
        assert!(!mig2.entry.healthy() && mig1.entry.healthy());
        // The whole GPU's: both MIG devices; the VF not.
        script.xid(GPU, 79, None);
        let devices = next(&mut passes);
        assert_eq!(
            taints(&by(&devices, "mig-1-0")),
            [("NvidiaXid79".into(), "NoSchedule".into())]
        );
        assert_eq!(
            taints(&by(&devices, "mig-2-0")),
            [
                ("NvidiaXid94".into(), "NoSchedule".into()),
                ("NvidiaXid79".into(), "NoSchedule".into())
            ]
        );
        assert!(taints(&by(&devices, "0000-3b-00-3")).is_empty());
        // It stays: the next pass keeps it.
        passes.regenerate(&Scope::All, &|| false).unwrap();
        let last = names::devices(seen.lock().unwrap().last().unwrap());
        assert_eq!(taints(&by(&last, "mig-1-0")).len(), 1);
        // Dropping the passes stops the watch (within a wait).
        let started = Instant::now();
        drop(passes);
        assert!(started.elapsed() < crate::deviceplugin::xid::WAIT * 3);
    }

    /// No NVIDIA device, no XID watch: the opener is never called (NVML
    /// never loaded) and the passes go on.
    #[test]
    fn no_nvidia_device_means_no_xid_watch() {
        let tmp = tempfile::tempdir().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (root, passes) = example(&tmp, &seen);
        std::fs::remove_dir_all(root.join("proc/driver/nvidia")).unwrap();
        let mut passes = passes.with_xid_events(Box::new(|_, _| panic!("opened")));
        passes.regenerate(&Scope::All, &|| false).unwrap();
        assert!(passes.xid.is_none() && passes.xid_open.is_some());
        assert_eq!(seen.lock().unwrap().len(), 1);
    }

    /// Between passes the signals are read again on the poll: a rise of a
    /// VF's AER fatal counter reaches the server without a pass, once; a
    /// poll that sees no change hands nothing on.
    #[test]
    fn the_health_poll_hands_on_a_changed_inventory_without_a_pass() {
        let tmp = tempfile::tempdir().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (root, mut passes) = example(&tmp, &seen);
        let vf = root.join("sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.3");
        std::fs::write(vf.join("aer_dev_fatal"), "TOTAL_ERR_FATAL 0\n").unwrap();
        // Before the first pass the poll reads nothing.
        passes.next_health = Instant::now();
        assert!(passes.poll().is_none());
        assert!(seen.lock().unwrap().is_empty());
        passes.regenerate(&Scope::All, &|| false).unwrap();
        assert_eq!(seen.lock().unwrap().len(), 1);
        assert!(vf_healthy(&seen.lock().unwrap()[0]));
        // The poll is due within the health period.
        assert!(passes.poll_every().unwrap() <= signals::POLL);
        // Not due yet: nothing read.
        std::fs::write(vf.join("aer_dev_fatal"), "TOTAL_ERR_FATAL 1\n").unwrap();
        passes.poll();
        assert_eq!(seen.lock().unwrap().len(), 1);
        // Due: the VF turns unhealthy, handed on once.
        passes.next_health = Instant::now();
        passes.poll();
        assert_eq!(seen.lock().unwrap().len(), 2);
        assert!(!vf_healthy(&seen.lock().unwrap()[1]));
        passes.next_health = Instant::now();
        passes.poll();
        assert_eq!(seen.lock().unwrap().len(), 2);
    }

    /// A pass after the first reads the signals of the devices it found
    /// new or changed only: an unchanged VF keeps its verdict (and its
    /// counter's baseline) until the poll, which passes do not put off.
    #[test]
    fn a_later_pass_reads_the_signals_of_what_changed_and_the_poll_of_all() {
        let tmp = tempfile::tempdir().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (root, mut passes) = example(&tmp, &seen);
        let vf = root.join("sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.3");
        std::fs::write(vf.join("aer_dev_fatal"), "TOTAL_ERR_FATAL 0\n").unwrap();
        passes.regenerate(&Scope::All, &|| false).unwrap();
        assert!(vf_healthy(&seen.lock().unwrap()[0]));
        let due = passes.next_health;
        // The VF's counter rises; a pass that does not change the VF
        // keeps its verdict and does not put the poll off.
        std::fs::write(vf.join("aer_dev_fatal"), "TOTAL_ERR_FATAL 2\n").unwrap();
        std::thread::sleep(Duration::from_millis(5));
        passes.regenerate(&Scope::All, &|| false).unwrap();
        assert!(vf_healthy(seen.lock().unwrap().last().unwrap()));
        assert_eq!(passes.next_health, due);
        // The VF changes (its driver goes): the pass reads its signals,
        // against the baseline of the first reading.
        std::fs::remove_file(vf.join("driver")).unwrap();
        passes.regenerate(&Scope::All, &|| false).unwrap();
        let inv = seen.lock().unwrap().last().unwrap().clone();
        let why = entry(&inv, "0000:3b:00.3")
            .unhealthy
            .clone()
            .unwrap()
            .to_string();
        assert!(why.contains("2 new fatal PCIe error(s)"), "{why}");
        assert!(why.contains("no driver is bound"), "{why}");
        // Another VF, unchanged, whose counter rose: kept healthy by a
        // pass, unhealthy once the poll reads every device's.
        let other = root.join("sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.2");
        let healthy = |inv: &Inventory| entry(inv, "0000:3b:00.2").healthy();
        std::fs::write(other.join("aer_dev_fatal"), "TOTAL_ERR_FATAL 0\n").unwrap();
        passes.next_health = Instant::now();
        passes.poll();
        assert!(healthy(seen.lock().unwrap().last().unwrap()));
        std::fs::write(other.join("aer_dev_fatal"), "TOTAL_ERR_FATAL 1\n").unwrap();
        passes.regenerate(&Scope::All, &|| false).unwrap();
        assert!(healthy(seen.lock().unwrap().last().unwrap()));
        passes.next_health = Instant::now();
        passes.poll();
        assert!(!healthy(seen.lock().unwrap().last().unwrap()));
    }
}

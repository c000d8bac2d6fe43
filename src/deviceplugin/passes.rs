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
//! last plans, and handed on when it changed.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::inventory::{self, Inventory, ResourceDef};
use super::signals::{self, Checks};
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
        })
    }

    /// The same, acting on health as `checks` say (`--ignore-health`).
    #[must_use]
    pub fn with_checks(mut self, checks: Checks) -> Self {
        self.checks = checks;
        self
    }

    /// Runs the watch over these passes on a thread of its own, with the
    /// events of the source `open_source` opens there, until `control`
    /// stops it; then the passes are dropped, and with them what `A` holds
    /// (the channels its server reads end).
    ///
    /// # Errors
    /// The thread cannot start; the handle gives the watch's own error.
    pub fn spawn(
        mut self,
        config: &watch::Config,
        open_source: impl FnOnce() -> anyhow::Result<Box<dyn EventSource>> + Send + 'static,
        control: Arc<Control>,
    ) -> anyhow::Result<std::thread::JoinHandle<anyhow::Result<()>>>
    where
        A: 'static,
    {
        let config = config.clone();
        std::thread::Builder::new()
            .name("watch".into())
            .spawn(move || {
                let mut source = open_source()?;
                let r = watch::run(&config, source.as_mut(), &mut self, &control, &mut |_| {});
                drop(self);
                r.map(|_| ())
            })
            .context("cannot start the watch thread")
    }

    fn publish(&mut self, since: Instant) {
        self.next_health = Instant::now() + signals::POLL;
        let Some((inv, collisions)) = self.build() else {
            return;
        };
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
        let first = std::mem::replace(&mut self.first, false);
        self.after.after(&inv, first, since);
        self.previous = inv;
    }

    /// The inventory of the last plans and the host now; `None` when the
    /// root cannot be opened (logged).
    fn build(&mut self) -> Option<(Inventory, inventory::Collisions)> {
        let root = match self.pipeline.host_root() {
            Ok(r) => r,
            Err(e) => {
                tracing::error!("{e:#}");
                return None;
            }
        };
        let held = self.after.held(&self.previous);
        Some(inventory::build_with(
            &self.defs,
            self.pipeline.plans(),
            &root,
            &self.output_dir,
            &self.previous,
            &held,
            &self.checks,
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
        let Some((inv, _)) = self.build() else {
            return;
        };
        if inv != self.previous {
            tracing::debug!("the devices' health changed");
            self.after.after(&inv, false, Instant::now());
            self.previous = inv;
        }
    }
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
        let pass = self.pipeline.regenerate(scope, stop)?;
        self.publish(since);
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

//! `cdigen watch`: keeps specs current while devices come and go.
//!
//! The loop ([`run`]): one full generation at start, then it waits for
//! device events from an [`EventSource`] (kernel uevents over netlink, or
//! udevd's through libudev with the `udev` feature, or none), maps each
//! event's subsystem to the generators it can affect ([`Watched`]),
//! debounces ([`Debouncer`]), and regenerates only those generators through
//! the `generate` pipeline ([`Regenerate`], implemented by [`Pipeline`]),
//! which writes only files whose bytes changed. It also regenerates
//! everything every `interval` (a missed event, or a change that sends
//! none such as a MIG reconfiguration, is not missed for ever) and on
//! SIGHUP (after re-reading the generator definitions); SIGTERM and SIGINT
//! end it cleanly.
//!
//! Each changed file is logged on one line, at info level, without a
//! timestamp (journald and kubelet add theirs).

pub mod debounce;
pub mod netlink;
mod pipeline;
mod ready;
pub mod source;
#[cfg(feature = "udev")]
pub mod udev;

use std::collections::BTreeSet;
use std::fmt;
use std::io::{self, Read as _, Write as _};
use std::os::fd::{AsFd as _, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub use debounce::{Debouncer, Scope};
pub use pipeline::{Pipeline, subsystems_of};
pub use source::{DeviceEvent, Event, EventSource, NoEvents};

use crate::generate::Action;

/// How the loop behaves.
#[derive(Debug, Clone)]
pub struct Config {
    /// Quiet period after the last event before regenerating.
    pub debounce: Duration,
    /// Longest wait after the first event of a burst.
    pub max_delay: Duration,
    /// Full regeneration period.
    pub interval: Duration,
    /// File created once the first full generation succeeded, removed on
    /// exit.
    pub ready_file: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            debounce: Duration::from_millis(500),
            max_delay: Duration::from_secs(5),
            interval: Duration::from_secs(600),
            ready_file: None,
        }
    }
}

/// A generator the watch manages, and the uevent subsystems that can
/// change its output (`None`: any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watched {
    /// Generator name.
    pub name: String,
    /// Subsystems whose events regenerate it.
    pub subsystems: Option<Vec<String>>,
}

/// The generators an event affects; `None` when none.
pub fn affected(watched: &[Watched], event: &Event) -> Option<Scope> {
    let dev = match event {
        Event::Lost => return Some(Scope::All),
        Event::Device(d) => d,
    };
    let names: BTreeSet<String> = watched
        .iter()
        .filter(|w| {
            w.subsystems
                .as_ref()
                .is_none_or(|s| s.contains(&dev.subsystem))
        })
        .map(|w| w.name.clone())
        .collect();
    (!names.is_empty()).then_some(Scope::Only(names))
}

/// The union of the subsystems of `watched`; `None` when one of them
/// takes any event.
pub fn all_subsystems(watched: &[Watched]) -> Option<BTreeSet<String>> {
    let mut all = BTreeSet::new();
    for w in watched {
        all.extend(w.subsystems.as_ref()?.iter().cloned());
    }
    Some(all)
}

/// What regenerates the files: the `generate` pipeline ([`Pipeline`]) or a
/// test double.
pub trait Regenerate {
    /// The generators and the subsystems each depends on.
    fn watched(&self) -> Vec<Watched>;
    /// Re-reads the generator definitions and templates (SIGHUP).
    ///
    /// # Errors
    /// When they are invalid; the previous ones stay in use.
    fn reload(&mut self) -> anyhow::Result<()>;
    /// Discovers devices, regenerates the generators in `scope` and writes
    /// what changed.
    ///
    /// # Errors
    /// When discovery cannot run or a directory cannot be written at all;
    /// single files that fail are in [`Pass::errors`].
    fn regenerate(&mut self, scope: &Scope) -> anyhow::Result<Pass>;
    /// Whether udevd is still processing events (so nodes and links may
    /// be missing): the regeneration waits, up to the maximum delay.
    fn udev_busy(&self) -> bool {
        false
    }
}

/// What one regeneration did.
#[derive(Debug, Clone, Default)]
pub struct Pass {
    /// The generators regenerated.
    pub generators: Vec<String>,
    /// Files created, updated or removed (unchanged ones are not listed).
    pub changes: Vec<FileChange>,
    /// Generators or files that failed, each message naming its file.
    pub errors: Vec<String>,
}

/// One file a regeneration changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    /// The file.
    pub path: PathBuf,
    /// What was done.
    pub action: Action,
    /// CDI devices in the spec now; `None` for device-info files.
    pub devices: Option<usize>,
    /// Fully-qualified device names that appeared.
    pub added: Vec<String>,
    /// Fully-qualified device names that went away.
    pub removed: Vec<String>,
}

impl fmt::Display for FileChange {
    /// `updated /var/run/cdi/amd.com-gpu.yaml: 2 devices (added amd.com/gpu=1)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let word = match self.action {
            Action::Created => "wrote",
            Action::Updated => "updated",
            other => other.as_str(),
        };
        write!(f, "{word} {}", self.path.display())?;
        if let Some(n) = self.devices.filter(|_| self.action != Action::Removed) {
            write!(f, ": {}", count(n as u64, "device"))?;
        }
        let mut parts = Vec::new();
        for (word, names) in [("added", &self.added), ("removed", &self.removed)] {
            if !names.is_empty() {
                parts.push(format!("{word} {}", shorten(names)));
            }
        }
        if !parts.is_empty() {
            write!(f, " ({})", parts.join("; "))?;
        }
        Ok(())
    }
}

/// `1 file`, `2 files`.
fn count(n: u64, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// Most device names one log line lists.
const MAX_NAMES: usize = 8;

/// `a, b, c`, or `a, b, ... and 92 more` for long lists (a pool of a
/// thousand VFs stays one readable line).
fn shorten(names: &[String]) -> String {
    let shown: Vec<&str> = names.iter().take(MAX_NAMES).map(String::as_str).collect();
    match names.len().checked_sub(MAX_NAMES) {
        Some(more) if more > 0 => format!("{} and {more} more", shown.join(", ")),
        _ => shown.join(", "),
    }
}

/// Counters of a watch run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Events received.
    pub events: u64,
    /// Regenerations of every generator at start, on the timer and on
    /// SIGHUP.
    pub full_passes: u64,
    /// Regenerations after events (of every generator when events were
    /// lost).
    pub event_passes: u64,
    /// Files created, updated or removed.
    pub files_changed: u64,
}

/// Signals to the loop: stop, reload; and the descriptor that wakes an
/// event source when one arrives.
#[derive(Debug)]
pub struct Control {
    term: Arc<AtomicBool>,
    hup: Arc<AtomicBool>,
    wake_rx: UnixStream,
    wake_tx: UnixStream,
    signals: Vec<signal_hook::SigId>,
}

impl Control {
    /// A control with no signal handler installed.
    ///
    /// # Errors
    /// When the wake socket pair cannot be made.
    pub fn new() -> io::Result<Self> {
        let (wake_tx, wake_rx) = UnixStream::pair()?;
        wake_rx.set_nonblocking(true)?;
        wake_tx.set_nonblocking(true)?;
        Ok(Control {
            term: Arc::new(AtomicBool::new(false)),
            hup: Arc::new(AtomicBool::new(false)),
            wake_rx,
            wake_tx,
            signals: Vec::new(),
        })
    }

    /// Routes SIGTERM and SIGINT to [`Control::stop`] and SIGHUP to
    /// [`Control::reload`] (for this process, until dropped).
    ///
    /// # Errors
    /// When a handler cannot be installed.
    pub fn handle_signals(&mut self) -> io::Result<()> {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        for (sig, flag) in [
            (SIGTERM, &self.term),
            (SIGINT, &self.term),
            (SIGHUP, &self.hup),
        ] {
            // The flag first: handlers run in the order registered, so the
            // flag is set when the wake byte arrives.
            self.signals
                .push(signal_hook::flag::register(sig, Arc::clone(flag))?);
            self.signals.push(signal_hook::low_level::pipe::register(
                sig,
                self.wake_tx.try_clone()?,
            )?);
        }
        Ok(())
    }

    /// Asks the loop to end (what SIGTERM does).
    pub fn stop(&self) {
        self.term.store(true, Ordering::SeqCst);
        self.wake();
    }

    /// Asks the loop to re-read definitions and regenerate everything
    /// (what SIGHUP does).
    pub fn reload(&self) {
        self.hup.store(true, Ordering::SeqCst);
        self.wake();
    }

    fn wake(&self) {
        // A full socket already wakes the loop.
        let _ = (&self.wake_tx).write(&[1]);
    }

    /// The descriptor event sources wait on besides their own.
    pub fn wake_fd(&self) -> BorrowedFd<'_> {
        self.wake_rx.as_fd()
    }

    fn drain(&self) {
        let mut buf = [0u8; 64];
        while matches!((&self.wake_rx).read(&mut buf), Ok(n) if n > 0) {}
    }

    fn stopping(&self) -> bool {
        self.term.load(Ordering::SeqCst)
    }

    fn take_reload(&self) -> bool {
        self.hup.swap(false, Ordering::SeqCst)
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        for id in self.signals.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

/// Why a pass runs (for the debug log).
#[derive(Debug, Clone, Copy)]
enum Reason {
    Start,
    Events,
    Timer,
    Reload,
}

/// The state of one watch run.
struct Watch<'a> {
    config: &'a Config,
    regen: &'a mut dyn Regenerate,
    observe: &'a mut dyn FnMut(&Pass),
    summary: Summary,
    ready: Option<ready::Ready>,
}

impl Watch<'_> {
    fn pass(&mut self, scope: &Scope, reason: Reason) {
        let full = *scope == Scope::All;
        match reason {
            Reason::Events => self.summary.event_passes += 1,
            Reason::Start | Reason::Timer | Reason::Reload => self.summary.full_passes += 1,
        }
        let started = Instant::now();
        match self.regen.regenerate(scope) {
            Ok(pass) => {
                for c in &pass.changes {
                    tracing::info!("{c}");
                }
                for e in &pass.errors {
                    tracing::error!("{e}");
                }
                self.summary.files_changed += pass.changes.len() as u64;
                tracing::debug!(
                    "regenerated {} ({reason:?}) in {} ms: {} changed, {} failed",
                    pass.generators.join(", "),
                    started.elapsed().as_millis(),
                    pass.changes.len(),
                    pass.errors.len()
                );
                if full && pass.errors.is_empty() && self.ready.is_none() {
                    self.become_ready();
                }
                (self.observe)(&pass);
            }
            Err(e) => tracing::error!("{e:#}"),
        }
    }

    fn become_ready(&mut self) {
        match ready::Ready::announce(self.config.ready_file.as_deref()) {
            Ok(r) => self.ready = Some(r),
            Err(e) => tracing::error!("{e:#}"),
        }
    }
}

/// Runs the watch until `control` is stopped: a full generation, then
/// event-driven, periodic and SIGHUP regenerations. `observe` sees every
/// pass (tests count them).
///
/// # Errors
/// When the ready file cannot be prepared. Failures while running are
/// logged and retried at the next event or re-check.
pub fn run(
    config: &Config,
    source: &mut dyn EventSource,
    regen: &mut dyn Regenerate,
    control: &Control,
    observe: &mut dyn FnMut(&Pass),
) -> anyhow::Result<Summary> {
    ready::check_unused(config.ready_file.as_deref())?;
    let mut watch = Watch {
        config,
        regen,
        observe,
        summary: Summary::default(),
        ready: None,
    };
    let mut watched = watch.regen.watched();
    let mut debouncer = Debouncer::new(config.debounce, config.max_delay);
    let mut source_failed = false;
    tracing::info!(
        "watching {} (events: {}; full re-check every {})",
        count(watched.len() as u64, "generator"),
        source.name(),
        humantime::format_duration(config.interval)
    );
    watch.pass(&Scope::All, Reason::Start);
    let mut next_full = Instant::now() + config.interval;
    while !control.stopping() {
        if control.take_reload() {
            let _ = sd_notify::notify(&reloading());
            match watch.regen.reload() {
                Ok(()) => watched = watch.regen.watched(),
                Err(e) => tracing::error!("{e:#} (keeping the previous definitions)"),
            }
            debouncer.clear();
            watch.pass(&Scope::All, Reason::Reload);
            next_full = Instant::now() + config.interval;
            if watch.ready.is_some() {
                let _ = sd_notify::notify(&[sd_notify::NotifyState::Ready]);
            }
            continue;
        }
        let now = Instant::now();
        if now >= next_full {
            debouncer.clear();
            watch.pass(&Scope::All, Reason::Timer);
            next_full = Instant::now() + config.interval;
            continue;
        }
        if debouncer.deadline().is_some_and(|d| d <= now) {
            if !debouncer.overdue(now) && watch.regen.udev_busy() {
                tracing::debug!("udev is still processing events: waiting");
                debouncer.postpone(now);
            } else if let Some(scope) = debouncer.take_due(now) {
                watch.pass(&scope, Reason::Events);
                continue;
            }
        }
        let until = debouncer.deadline().map_or(next_full, |d| d.min(next_full));
        let timeout = until.saturating_duration_since(now);
        let got = if source_failed {
            NoEvents.next(timeout, control.wake_fd())
        } else {
            source.next(timeout, control.wake_fd())
        };
        match got {
            Ok(Some(event)) => {
                watch.summary.events += 1;
                match affected(&watched, &event) {
                    Some(scope) => {
                        tracing::trace!("{event:?}: regenerating {scope:?}");
                        debouncer.note(Instant::now(), scope);
                    }
                    None => tracing::trace!("{event:?}: no generator affected"),
                }
            }
            Ok(None) => control.drain(),
            Err(e) => {
                tracing::error!(
                    "cannot read {} events any more: {e}; relying on the re-check every {}",
                    source.name(),
                    humantime::format_duration(config.interval)
                );
                source_failed = true;
                debouncer.note(Instant::now(), Scope::All);
            }
        }
    }
    let _ = sd_notify::notify(&[sd_notify::NotifyState::Stopping]);
    if let Some(r) = watch.ready.take() {
        r.withdraw();
    }
    let s = watch.summary;
    tracing::info!(
        "stopping after {}, {} ({} full), {} changed",
        count(s.events, "event"),
        count(s.full_passes + s.event_passes, "regeneration"),
        s.full_passes,
        count(s.files_changed, "file")
    );
    Ok(watch.summary)
}

/// `RELOADING=1` with the timestamp systemd 253+ requires.
fn reloading() -> Vec<sd_notify::NotifyState<'static>> {
    let mut states = vec![sd_notify::NotifyState::Reloading];
    if let Ok(t) = sd_notify::NotifyState::monotonic_usec_now() {
        states.push(t);
    }
    states
}

#[cfg(test)]
mod tests;

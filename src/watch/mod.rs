//! `cdigen watch`: keeps specs current while devices come and go.
//!
//! The loop ([`run`]): one full generation at start, then it waits for
//! device events from an [`EventSource`] (kernel uevents over netlink, or
//! udevd's through libudev with the `udev` feature, or none), maps each
//! event's subsystem to the generators it can affect ([`Watched`]), and
//! regenerates only those generators through the `generate` pipeline
//! ([`Regenerate`], implemented by [`Pipeline`]), which writes only files
//! whose bytes changed. When is the [`Debouncer`]'s: the first event of a
//! quiet period at once (leading edge), the events that follow it
//! coalesced into a pass once none came for the debounce, or the maximum
//! delay after the first of them (trailing edge); where udevd runs, a pass
//! made at once is made again on the trailing edge, as udev may still have
//! been making the event's links. It also regenerates
//! everything every `interval` (a missed event, or a change that sends
//! none such as a MIG reconfiguration, is not missed for ever) and on
//! SIGHUP (after re-reading the generator definitions); SIGTERM and SIGINT
//! end it cleanly, also while it waits for another cdigen run's lock on an
//! output directory.
//!
//! The debounce (and the interval) is at least [`MIN_DEBOUNCE`], so the
//! loop never waits zero time over and over (as it would while udevd's
//! queue stays busy). Every duration also has an upper bound
//! ([`MAX_DEBOUNCE`], [`MAX_DELAY`], [`MAX_INTERVAL`]): the CLI refuses
//! more, [`run`] clamps its configuration to them, and the loop's arithmetic
//! on instants cannot overflow.
//!
//! Changes that send no uevent are polled for where that is cheap
//! ([`Regenerate::poll`]): a MIG reconfiguration is seen within seconds
//! ([`mig`]) while NVIDIA GPUs exist.
//!
//! Events of parentless devices (`/devices/virtual/net/...`: the veths,
//! bridges and taps of containers) affect no generator whose backend only
//! describes hardware ([`Watched::physical_only`]). Events lost to a full
//! receive buffer regenerate everything; the periodic pass is the safety
//! net for a loss no source reports.
//!
//! Readiness (`--ready-file`, systemd's `READY=1`) is given once the first
//! full pass has completed: what could be written is on disk, even if some
//! generators or files failed (each failure is logged as an error, and
//! systemd's `STATUS=` says how many and the first, until a later pass
//! clears it). Only a pass that fails as a whole (discovery cannot run, an
//! output directory cannot be created, opened or locked) withholds it;
//! such a pass is retried after 1 s, then after twice as long each time, up
//! to the interval.
//!
//! Each changed file is logged on one line, at info level, without a
//! timestamp (journald and kubelet add theirs).

pub mod debounce;
pub mod mig;
pub mod netlink;
mod pipeline;
mod ready;
pub mod source;
mod status;
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

pub use debounce::{Debouncer, Edge, Scope, Step};
pub use pipeline::{Pipeline, backends_of, physical_only_of, subsystems_of};
pub use source::{DeviceEvent, Event, EventSource, NoEvents};

use crate::generate::Action;

/// Shortest debounce: the loop never waits less than this between two
/// looks at a busy udev queue.
pub const MIN_DEBOUNCE: Duration = Duration::from_millis(10);

/// Longest debounce (`--debounce`): a quiet period longer than a minute
/// would only hold back the specs of devices that came.
pub const MAX_DEBOUNCE: Duration = Duration::from_secs(60);

/// Longest `--max-delay`: under a steady stream of events, specs lag the
/// host by at most this.
pub const MAX_DELAY: Duration = Duration::from_secs(3600);

/// Longest `--interval`: a change that sends no event and is not polled
/// for (nodes made by nvidia-modprobe) is caught within a day.
pub const MAX_INTERVAL: Duration = Duration::from_secs(24 * 3600);

/// First retry after a pass that failed as a whole (the default of
/// [`Config::first_retry`]).
pub const FIRST_RETRY: Duration = Duration::from_secs(1);

/// `now + d`, for a `d` at most [`MAX_INTERVAL`] (as [`run`] bounds its
/// configuration): never overflows, capped at `now + MAX_INTERVAL` should
/// an instant that far away not be representable.
fn after(now: Instant, d: Duration) -> Instant {
    now.checked_add(d.min(MAX_INTERVAL))
        .or_else(|| now.checked_add(Duration::from_secs(1)))
        .unwrap_or(now)
}

/// How the loop behaves.
#[derive(Debug, Clone)]
pub struct Config {
    /// The quiet period (from [`MIN_DEBOUNCE`] to [`MAX_DEBOUNCE`]): an
    /// event after this long without events or passes is regenerated at
    /// once; the events that follow it are regenerated together once none
    /// came for this long.
    pub debounce: Duration,
    /// Longest wait of an event that follows another, under a steady
    /// stream of them (at most [`MAX_DELAY`]).
    pub max_delay: Duration,
    /// Full regeneration period (from [`MIN_DEBOUNCE`] to
    /// [`MAX_INTERVAL`]).
    pub interval: Duration,
    /// Wait before retrying a pass that failed as a whole; doubled after
    /// each failure in a row, up to `interval`.
    pub first_retry: Duration,
    /// File created once the first full generation completed, removed on
    /// exit.
    pub ready_file: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            debounce: Duration::from_millis(500),
            max_delay: Duration::from_secs(5),
            interval: Duration::from_secs(600),
            first_retry: FIRST_RETRY,
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
    /// Subsystems whose parentless devices (`/devices/virtual/<subsystem>/`,
    /// such as a container's veth for `net`) cannot change its output:
    /// their events do not regenerate it.
    pub physical_only: Vec<String>,
}

impl Watched {
    /// Whether `dev` can change this generator's output.
    fn cares(&self, dev: &DeviceEvent) -> bool {
        let listed = self
            .subsystems
            .as_ref()
            .is_none_or(|s| s.contains(&dev.subsystem));
        listed && !(self.physical_only.contains(&dev.subsystem) && parentless(dev))
    }
}

/// Whether the event is about a device with no parent: the kernel puts
/// those in `/sys/devices/virtual/<subsystem>/`.
fn parentless(dev: &DeviceEvent) -> bool {
    dev.devpath
        .strip_prefix("/devices/virtual/")
        .and_then(|rest| rest.strip_prefix(dev.subsystem.as_str()))
        .is_some_and(|rest| rest.starts_with('/'))
}

/// The generators an event affects; `None` when none.
pub fn affected(watched: &[Watched], event: &Event) -> Option<Scope> {
    let dev = match event {
        Event::Lost => return Some(Scope::All),
        Event::Device(d) => d,
    };
    let names: BTreeSet<String> = watched
        .iter()
        .filter(|w| w.cares(dev))
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
    /// what changed. While it waits for another process's lock on an
    /// output directory it calls `stop`, and gives up (an error) when that
    /// returns true.
    ///
    /// # Errors
    /// When discovery cannot run or a directory cannot be written at all;
    /// single files that fail are in [`Pass::errors`].
    fn regenerate(&mut self, scope: &Scope, stop: &dyn Fn() -> bool) -> anyhow::Result<Pass>;
    /// Whether udevd is still processing events (so nodes and links may
    /// be missing): the regeneration waits, up to the maximum delay.
    fn udev_busy(&self) -> bool {
        false
    }
    /// Whether udevd runs on the host: after a kernel event it may still
    /// be adding links and setting permissions, so a pass made at once is
    /// made again once its queue is empty ([`debounce`]).
    fn udev_running(&self) -> bool {
        false
    }
    /// How often to look for changes that send no uevent ([`Regenerate::poll`]);
    /// `None`: there is nothing to look for now.
    fn poll_every(&self) -> Option<Duration> {
        None
    }
    /// Looks for changes that send no uevent (a MIG reconfiguration:
    /// [`mig`]); the generators to regenerate when one is seen.
    fn poll(&mut self) -> Option<Scope> {
        None
    }
}

/// What one regeneration did.
#[derive(Debug, Clone, Default)]
pub struct Pass {
    /// The generators regenerated.
    pub generators: Vec<String>,
    /// The backends that discovered again (every one on a full pass; on
    /// an event pass, those the generators use: the others' latest claims
    /// were kept).
    pub rediscovered: Vec<String>,
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
    /// lost) or after a poll saw a change ([`Regenerate::poll`]).
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
#[derive(Clone, Copy)]
enum Reason {
    Start,
    Event(Edge),
    Timer,
    Reload,
    Retry,
}

impl Reason {
    /// For the debug log.
    fn as_str(self) -> &'static str {
        match self {
            Reason::Start => "start",
            Reason::Event(Edge::Leading) => "event, at once",
            Reason::Event(Edge::Trailing) => "events, coalesced",
            Reason::Timer => "periodic re-check",
            Reason::Reload => "reload",
            Reason::Retry => "retry",
        }
    }
}

/// The state of one watch run.
struct Watch<'a> {
    config: &'a Config,
    regen: &'a mut dyn Regenerate,
    control: &'a Control,
    observe: &'a mut dyn FnMut(&Pass),
    summary: Summary,
    /// Whether READY=1 was sent (the first full pass completed).
    ready: bool,
    /// The ready file, once written.
    ready_file: Option<ready::ReadyFile>,
    /// Errors still standing, for STATUS=.
    errors: status::Errors,
    /// The STATUS= line last sent.
    status: String,
    /// The wait before the next retry, after passes that failed as a
    /// whole in a row.
    backoff: Option<Duration>,
}

impl Watch<'_> {
    /// Runs one pass. `Some(wait)`: it failed as a whole, retry after
    /// `wait`.
    fn pass(&mut self, scope: &Scope, reason: Reason) -> Option<Duration> {
        let full = *scope == Scope::All;
        match reason {
            Reason::Event(_) => self.summary.event_passes += 1,
            Reason::Start | Reason::Timer | Reason::Reload | Reason::Retry => {
                self.summary.full_passes += 1
            }
        }
        let started = Instant::now();
        let control = self.control;
        match self.regen.regenerate(scope, &|| control.stopping()) {
            Ok(pass) => {
                for c in &pass.changes {
                    tracing::info!("{c}");
                }
                for e in &pass.errors {
                    tracing::error!("{e}");
                }
                self.summary.files_changed += pass.changes.len() as u64;
                tracing::debug!(
                    "regenerated {} ({}) in {} ms: {} changed, {} failed",
                    pass.generators.join(", "),
                    reason.as_str(),
                    started.elapsed().as_millis(),
                    pass.changes.len(),
                    pass.errors.len()
                );
                self.backoff = None;
                self.errors.update(scope, &pass.errors);
                let status = self.errors.status();
                if full && !self.ready {
                    self.become_ready(status);
                } else {
                    if full {
                        self.write_ready_file();
                    }
                    self.set_status(status);
                }
                (self.observe)(&pass);
                None
            }
            Err(e) if self.control.stopping() => {
                tracing::info!("{e:#}");
                None
            }
            Err(e) => {
                let wait = self
                    .backoff
                    .map_or(self.config.first_retry, |d| d.saturating_mul(2));
                let wait = wait.min(self.config.interval);
                self.backoff = Some(wait);
                let retry = humantime::format_duration(wait);
                tracing::error!("{e:#} (retrying in {retry})");
                self.set_status(status::one_line(&format!(
                    "regeneration failed, retrying in {retry}: {e:#}"
                )));
                Some(wait)
            }
        }
    }

    /// Writes the ready file (if any) and tells systemd, with `status`.
    fn become_ready(&mut self, status: String) {
        self.write_ready_file();
        let mut states = vec![sd_notify::NotifyState::Ready];
        if status != self.status {
            states.push(sd_notify::NotifyState::Status(&status));
        }
        let _ = sd_notify::notify(&states);
        self.status = status;
        self.ready = true;
    }

    /// Writes the ready file, if one is asked for and not written yet (a
    /// failure is logged, and retried at the next full pass).
    fn write_ready_file(&mut self) {
        if let (Some(path), None) = (&self.config.ready_file, &self.ready_file) {
            match ready::ReadyFile::write(path) {
                Ok(f) => self.ready_file = Some(f),
                Err(e) => tracing::error!("{e:#}"),
            }
        }
    }

    /// Sends STATUS= when it changed.
    fn set_status(&mut self, status: String) {
        if status != self.status {
            let _ = sd_notify::notify(&[sd_notify::NotifyState::Status(&status)]);
            self.status = status;
        }
    }
}

/// Runs the watch until `control` is stopped: a full generation, then
/// event-driven, periodic and SIGHUP regenerations. `observe` sees every
/// pass that completed (tests count them).
///
/// # Errors
/// When the ready file's directory is missing or the file is not ours.
/// Failures while running are logged and retried.
pub fn run(
    config: &Config,
    source: &mut dyn EventSource,
    regen: &mut dyn Regenerate,
    control: &Control,
    observe: &mut dyn FnMut(&Pass),
) -> anyhow::Result<Summary> {
    ready::check_unused(config.ready_file.as_deref())?;
    let config = &Config {
        debounce: config.debounce.clamp(MIN_DEBOUNCE, MAX_DEBOUNCE),
        max_delay: config.max_delay.min(MAX_DELAY),
        interval: config.interval.clamp(MIN_DEBOUNCE, MAX_INTERVAL),
        first_retry: config.first_retry.clamp(MIN_DEBOUNCE, MAX_INTERVAL),
        ..config.clone()
    };
    let mut watch = Watch {
        config,
        regen,
        control,
        observe,
        summary: Summary::default(),
        ready: false,
        ready_file: None,
        errors: status::Errors::default(),
        status: String::new(),
        backoff: None,
    };
    let mut watched = watch.regen.watched();
    let mut filter = all_subsystems(&watched);
    let mut debouncer = Debouncer::new(config.debounce, config.max_delay);
    let mut source_failed = false;
    tracing::info!(
        "watching {} (events: {}; full re-check every {})",
        count(watched.len() as u64, "generator"),
        source.name(),
        humantime::format_duration(config.interval)
    );
    // When the next full pass is due: after the interval, or sooner to
    // retry a pass that failed as a whole.
    let next_full =
        |retry: Option<Duration>| after(Instant::now(), retry.unwrap_or(config.interval));
    let mut next = next_full(watch.pass(&Scope::All, Reason::Start));
    debouncer.done(Instant::now(), None);
    // When to look next for changes that send no event, while there is
    // something to look for.
    let mut next_poll: Option<Instant> = None;
    while !control.stopping() {
        next_poll = match (watch.regen.poll_every(), next_poll) {
            (None, _) => None,
            (Some(every), None) => Some(after(Instant::now(), every)),
            (Some(_), due) => due,
        };
        if control.take_reload() {
            let _ = sd_notify::notify(&reloading());
            match watch.regen.reload() {
                Ok(()) => watched = watch.regen.watched(),
                Err(e) => tracing::error!("{e:#} (keeping the previous definitions)"),
            }
            let wanted = all_subsystems(&watched);
            if wanted != filter {
                match source.filter_subsystems(wanted.as_ref()) {
                    Ok(()) => filter = wanted,
                    Err(e) => tracing::error!(
                        "cannot listen to the new definitions' subsystems: {e}; \
relying on the re-check every {} for them",
                        humantime::format_duration(config.interval)
                    ),
                }
            }
            debouncer.clear();
            let was_ready = watch.ready;
            next = next_full(watch.pass(&Scope::All, Reason::Reload));
            debouncer.done(Instant::now(), None);
            // The reload is over (systemd waits for READY=1 after
            // RELOADING=1); a first readiness was just sent.
            if was_ready {
                let _ = sd_notify::notify(&[sd_notify::NotifyState::Ready]);
            }
            continue;
        }
        let now = Instant::now();
        if now >= next {
            debouncer.clear();
            let reason = if watch.backoff.is_some() {
                Reason::Retry
            } else {
                Reason::Timer
            };
            next = next_full(watch.pass(&Scope::All, reason));
            debouncer.done(Instant::now(), None);
            continue;
        }
        if let Some(due) = next_poll
            && due <= now
        {
            if let Some(scope) = watch.regen.poll() {
                tracing::debug!("a change no event reports: regenerating {scope:?}");
                debouncer.event(now, scope);
            }
            next_poll = watch
                .regen
                .poll_every()
                .map(|every| after(Instant::now(), every));
            continue;
        }
        let mut udev_busy = || {
            let busy = watch.regen.udev_busy();
            if busy {
                tracing::debug!("udev is still processing events: waiting");
            }
            busy
        };
        let due = match debouncer.step(now, &mut udev_busy) {
            Step::Regenerate(scope, edge) => {
                // A pass made at once is made again after the quiet
                // period when udev may not have finished with the event:
                // it was busy before or after the pass, or it runs and
                // the event came from the kernel, before udev's rules.
                let leading = edge == Edge::Leading;
                let busy_before = leading && watch.regen.udev_busy();
                let failed = watch.pass(&scope, Reason::Event(edge));
                let confirm = leading
                    && (busy_before
                        || watch.regen.udev_busy()
                        || (!source.after_udev() && watch.regen.udev_running()));
                if confirm {
                    tracing::debug!(
                        "udev may still be at work: regenerating again once it is idle"
                    );
                }
                debouncer.done(Instant::now(), confirm.then_some(scope));
                if let Some(retry) = failed {
                    // What the events changed is caught by the retry.
                    next = next.min(after(Instant::now(), retry));
                }
                continue;
            }
            Step::WaitUntil(due) => Some(due),
            Step::Idle => None,
        };
        let until = due.map_or(next, |d| d.min(next));
        let until = next_poll.map_or(until, |p| p.min(until));
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
                        debouncer.event(Instant::now(), scope);
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
                debouncer.event(Instant::now(), Scope::All);
            }
        }
    }
    let _ = sd_notify::notify(&[sd_notify::NotifyState::Stopping]);
    if let Some(r) = watch.ready_file.take() {
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

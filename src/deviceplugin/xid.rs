//! NVIDIA XID errors as device health: a thread waits on NVML's events
//! ([`crate::discover::nvidia::events`]) and records the XIDs and lost
//! GPUs it hears of ([`XidHealth`]); every inventory asks it about each
//! device ([`signals::VendorHealth`]).
//!
//! - An XID is [`Code::NvidiaXid`] (`NvidiaXid79`), a lost GPU
//!   (`NVML_ERROR_GPU_IS_LOST`) [`Code::NvidiaGpuLost`]. The XIDs of the
//!   application rather than the GPU ([`signals::APPLICATION_XIDS`], as
//!   NVIDIA's device plugin and DRA driver skip them) are ignored by
//!   default; `--ignore-health` names more (`NvidiaXid48`) or all
//!   (`NvidiaXid`). An ignored XID is logged and not recorded.
//! - Attribution: an XID of the whole GPU makes the GPU and each of its
//!   MIG devices unhealthy; one of a MIG instance (the event names its GPU
//!   and compute instance) that MIG device and the GPU as a whole (which
//!   holds it), not its sibling MIG devices.
//! - An XID stays for the life of the process, as in NVIDIA's drivers:
//!   NVML reports an error once, and nothing later says it was fixed
//!   (the recovery an XID needs, a GPU reset or a reboot, sends no
//!   event). Restarting cdigen after the repair clears it, as it clears
//!   the AER counters' baseline.
//! - The wait is bounded ([`WAIT`]) and the thread stops when the watch
//!   does ([`Watch`]'s drop); a timeout is no error. NVML failing
//!   [`MAX_FAILURES`] times in a row is logged once and the thread ends:
//!   what it recorded stays, nothing more is learned until a restart.
//! - At most [`MAX_XIDS`] XIDs are recorded per GPU (each distinct XID and
//!   instance once): the rest are logged; the taints stay few.
//! - GPUs NVML lists when the watch starts (the first pass that has
//!   NVIDIA devices) are watched; one added later is not until a restart.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use super::signals::{self, Checks, Code, Problem};
use crate::discover::nvidia::events::{
    EventError, Registration, Runner, UNKNOWN_XID, XidEvent, XidEvents,
};
use crate::model::{Device, DriverFile};
use crate::root::HostRoot;

/// The longest one wait for an event takes: how long a stop waits for
/// the thread.
pub const WAIT: Duration = Duration::from_millis(500);

/// NVML failures in a row after which the watch ends.
pub const MAX_FAILURES: u32 = 3;

/// The most XIDs recorded per GPU.
pub const MAX_XIDS: usize = 4;

/// An XID recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Record {
    xid: u64,
    instance: Option<(u32, u32)>,
}

#[derive(Debug, Default)]
struct Seen {
    /// By GPU UUID, in the order heard.
    xids: BTreeMap<String, Vec<Record>>,
    /// GPU UUIDs.
    lost: BTreeSet<String>,
}

/// What the watch has heard, shared with the passes.
#[derive(Debug, Clone, Default)]
pub struct XidHealth(Arc<Mutex<Seen>>);

impl XidHealth {
    fn seen<T>(&self, f: impl FnOnce(&mut Seen) -> T) -> T {
        let mut guard = match self.0.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(&mut guard)
    }

    /// Records `e`: `Ok(true)` when it is new, `Ok(false)` when already
    /// recorded, `Err(())` when the GPU has [`MAX_XIDS`] already.
    fn record(&self, e: &XidEvent) -> Result<bool, ()> {
        self.seen(|s| {
            let list = s.xids.entry(e.gpu.clone()).or_default();
            let r = Record {
                xid: e.xid,
                instance: e.instance,
            };
            if list.contains(&r) {
                Ok(false)
            } else if list.len() >= MAX_XIDS {
                Err(())
            } else {
                list.push(r);
                Ok(true)
            }
        })
    }

    /// Records GPU `gpu` as lost; whether it is new.
    fn lose(&self, gpu: &str) -> bool {
        self.seen(|s| s.lost.insert(gpu.to_string()))
    }

    /// The GPUs recorded as lost.
    fn lost(&self) -> BTreeSet<String> {
        self.seen(|s| s.lost.clone())
    }
}

impl signals::VendorHealth for XidHealth {
    /// The XIDs and loss of `d`'s GPU that concern it (see the module).
    fn problems(&self, d: &Device) -> Vec<Problem> {
        let Some(nv) = &d.nvidia else {
            return Vec::new();
        };
        let gpu = &nv.gpu_uuid;
        let mig = nv.mig.as_ref().map(|m| (m.gi, m.ci));
        self.seen(|s| {
            let mut out = Vec::new();
            if s.lost.contains(gpu) {
                out.push(Problem {
                    code: Code::NvidiaGpuLost,
                    detail: format!(
                        "NVML says GPU {gpu} is lost (fallen off the bus or inaccessible)"
                    ),
                });
            }
            for r in s.xids.get(gpu).into_iter().flatten() {
                let concerns = match (mig, r.instance) {
                    (None, _) | (Some(_), None) => true,
                    (Some(m), Some(i)) => m == i,
                };
                if !concerns {
                    continue;
                }
                let what = if r.xid == UNKNOWN_XID {
                    "an XID NVML does not know (999)".to_string()
                } else {
                    format!("XID {}", r.xid)
                };
                let place = match r.instance {
                    Some((gi, ci)) => format!("MIG device gi{gi}/ci{ci} of GPU {gpu}"),
                    None => format!("GPU {gpu}"),
                };
                out.push(Problem {
                    code: Code::NvidiaXid(Some(r.xid)),
                    detail: format!("NVML reported {what} on {place}"),
                });
            }
            out
        })
    }
}

/// Opens the XID events of the host's NVIDIA driver: from the host root
/// and the driver's files, the [`Runner`], or why there is none.
pub type Open = Box<dyn FnOnce(&HostRoot, &[DriverFile]) -> Result<Runner, String> + Send>;

/// NVML's own events: the library [`Library::for_root`] allows (never
/// with `--no-nvml`).
///
/// [`Library::for_root`]: crate::discover::nvidia::nvml::Library::for_root
pub fn nvml() -> Open {
    #[cfg(feature = "nvml")]
    {
        Box::new(|root, files| {
            crate::discover::nvidia::nvml::Library::for_root(root, files)
                .map(crate::discover::nvidia::events::runner)
        })
    }
    #[cfg(not(feature = "nvml"))]
    {
        Box::new(|_, _| Err("built without NVML".into()))
    }
}

/// The watch's thread: stopped and joined (for at most a few waits) when
/// dropped.
#[derive(Debug)]
pub struct Watch {
    stop: Arc<AtomicBool>,
    done: mpsc::Receiver<()>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watch {
    /// Starts the thread: `runner` opens the events, which are recorded
    /// into `health` as `checks` say. No source (no NVML) is one
    /// informational line.
    ///
    /// # Errors
    /// The thread cannot start.
    pub fn start(runner: Runner, health: XidHealth, checks: Checks) -> std::io::Result<Watch> {
        let stop = Arc::new(AtomicBool::new(false));
        let (done_tx, done) = mpsc::channel();
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("xid".into())
            .spawn(move || {
                let r = runner(&mut |events| run(events, &health, &checks, &flag));
                if let Err(why) = r {
                    tracing::info!("NVIDIA XID events are not watched: {why}");
                }
                let _ = done_tx.send(());
            })?;
        Ok(Watch {
            stop,
            done,
            thread: Some(thread),
        })
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // A wait is bounded; an NVML call that hangs all the same is left
        // behind rather than hanging the shutdown.
        match self.done.recv_timeout(WAIT * 4 + Duration::from_secs(1)) {
            Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                if let Some(t) = self.thread.take() {
                    let _ = t.join();
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                tracing::warn!("the NVIDIA XID watch did not stop in time; left behind");
            }
        }
    }
}

/// Logs the registrations and records the lost GPUs; the number watched.
fn registered(regs: &[Registration], health: &XidHealth) -> usize {
    let mut watched = 0;
    for r in regs {
        match &r.result {
            Ok(()) => watched += 1,
            Err(EventError::NotSupported) => tracing::info!(
                "GPU {}: NVML cannot report its XID errors (not supported); its health comes from sysfs only",
                r.gpu
            ),
            Err(EventError::GpuLost) => {
                if health.lose(&r.gpu) {
                    tracing::warn!(
                        "GPU {}: NVML says it is lost; unhealthy (NvidiaGpuLost)",
                        r.gpu
                    );
                }
            }
            Err(e) => tracing::warn!("GPU {}: its XID errors cannot be watched: {e}", r.gpu),
        }
    }
    watched
}

/// The watch over `events` until `stop`, NVML failing [`MAX_FAILURES`]
/// times in a row, or no GPU left to watch.
pub fn run(events: &mut dyn XidEvents, health: &XidHealth, checks: &Checks, stop: &AtomicBool) {
    let regs = match events.register(&health.lost()) {
        Ok(r) => r,
        Err(e) => {
            tracing::info!("NVIDIA XID events are not watched: {e}");
            return;
        }
    };
    let watched = registered(&regs, health);
    if watched == 0 {
        tracing::info!("NVIDIA XID events are not watched: no GPU can report them");
        return;
    }
    let ignored: Vec<String> = checks
        .ignored()
        .iter()
        .filter(|c| matches!(c, Code::NvidiaXid(_)))
        .map(|c| c.to_string())
        .collect();
    tracing::info!(
        "watching the XID errors of {watched} NVIDIA GPU(s){}",
        if ignored.is_empty() {
            String::new()
        } else {
            format!(" (ignoring {})", ignored.join(", "))
        }
    );
    let mut failures = 0;
    while !stop.load(Ordering::SeqCst) {
        let why = match events.wait(WAIT) {
            Ok(Some(e)) => {
                failures = 0;
                heard(&e, health, checks);
                continue;
            }
            Ok(None) | Err(EventError::Timeout) => {
                failures = 0;
                continue;
            }
            Err(EventError::GpuLost) => match relist(events, health) {
                Ok(0) => {
                    tracing::info!("NVIDIA XID events: no GPU left to watch");
                    return;
                }
                Ok(_) => {
                    failures = 0;
                    continue;
                }
                Err(why) => why,
            },
            Err(e) => e.to_string(),
        };
        failures += 1;
        if failures >= MAX_FAILURES {
            tracing::warn!(
                "NVIDIA XID events are no longer watched (until cdigen restarts): {why}"
            );
            return;
        }
        tracing::debug!("waiting for NVIDIA XID events: {why}");
        // Not at once again: NVML may answer the same at once.
        std::thread::sleep(WAIT);
    }
}

/// After a wait said a GPU is lost: a new set of the GPUs not lost, the
/// ones that cannot join it because they are lost recorded so. The number
/// watched; `Err` when NVML fails, or no GPU was found lost (then the
/// loss is counted as a failure rather than blamed on every GPU).
fn relist(events: &mut dyn XidEvents, health: &XidHealth) -> Result<usize, String> {
    let before = health.lost();
    let regs = events
        .register(&before)
        .map_err(|e| format!("a GPU is lost, and the GPUs cannot be listed again: {e}"))?;
    let watched = registered(&regs, health);
    if health.lost().len() == before.len() && watched > 0 {
        return Err("NVML says a GPU is lost, and every GPU still answers".into());
    }
    Ok(watched)
}

/// Records (or logs, when ignored or one too many) the XID `e`.
fn heard(e: &XidEvent, health: &XidHealth, checks: &Checks) {
    let code = Code::NvidiaXid(Some(e.xid));
    let place = match e.instance {
        Some((gi, ci)) => format!("GPU {} MIG device gi{gi}/ci{ci}", e.gpu),
        None => format!("GPU {}", e.gpu),
    };
    if checks.ignores(code) {
        tracing::info!("{place}: XID {} (ignored: --ignore-health)", e.xid);
        return;
    }
    match health.record(e) {
        Ok(true) => tracing::warn!("{place}: XID {}; unhealthy ({code})", e.xid),
        Ok(false) => tracing::debug!("{place}: XID {} again", e.xid),
        Err(()) => tracing::warn!(
            "{place}: XID {} (not recorded: {MAX_XIDS} XIDs are already)",
            e.xid
        ),
    }
}

/// A scripted [`XidEvents`] for tests: the GPUs' registrations (which a
/// test may change while it runs), and the waits' answers sent through a
/// channel; a wait with nothing sent times out after its timeout, as
/// NVML's does.
#[cfg(test)]
pub mod double {
    use super::*;

    /// The GPUs (UUIDs) and how their registration goes.
    pub type Gpus = Arc<Mutex<Vec<(String, Result<(), EventError>)>>>;

    /// The double; [`Script`] drives it.
    pub struct Double {
        gpus: Gpus,
        register_error: Option<EventError>,
        answers: mpsc::Receiver<Result<Option<XidEvent>, EventError>>,
        /// The `skip` of each register call.
        pub registers: Arc<Mutex<Vec<BTreeSet<String>>>>,
        taken: Arc<std::sync::atomic::AtomicUsize>,
    }

    /// What a test keeps to drive a [`Double`].
    #[derive(Clone)]
    pub struct Script {
        /// The GPUs and how their registration goes.
        pub gpus: Gpus,
        /// The next waits' answers.
        pub answers: mpsc::Sender<Result<Option<XidEvent>, EventError>>,
        /// The `skip` of each register call.
        pub registers: Arc<Mutex<Vec<BTreeSet<String>>>>,
        /// How many answers were sent, and how many waits took one.
        sent: Arc<std::sync::atomic::AtomicUsize>,
        taken: Arc<std::sync::atomic::AtomicUsize>,
    }

    impl Script {
        /// Sends the next wait's answer.
        pub fn send(&self, answer: Result<Option<XidEvent>, EventError>) {
            self.sent.fetch_add(1, Ordering::SeqCst);
            self.answers.send(answer).unwrap_or_default();
        }

        /// Sends an XID of `gpu` (in `instance`).
        pub fn xid(&self, gpu: &str, xid: u64, instance: Option<(u32, u32)>) {
            self.send(Ok(Some(XidEvent {
                gpu: gpu.into(),
                xid,
                instance,
            })));
        }

        /// Whether every answer sent was taken by a wait.
        pub fn all_taken(&self) -> bool {
            self.taken.load(Ordering::SeqCst) >= self.sent.load(Ordering::SeqCst)
        }
    }

    /// A double of `gpus` (all registering fine), registration failing
    /// with `register_error` when given.
    pub fn double(gpus: &[&str], register_error: Option<EventError>) -> (Double, Script) {
        let (tx, rx) = mpsc::channel();
        let list = Arc::new(Mutex::new(
            gpus.iter().map(|g| (g.to_string(), Ok(()))).collect(),
        ));
        let registers = Arc::default();
        let taken: Arc<std::sync::atomic::AtomicUsize> = Arc::default();
        (
            Double {
                gpus: Arc::clone(&list),
                register_error,
                answers: rx,
                registers: Arc::clone(&registers),
                taken: Arc::clone(&taken),
            },
            Script {
                gpus: list,
                answers: tx,
                registers,
                sent: Arc::default(),
                taken,
            },
        )
    }

    impl Double {
        /// The double as a [`Runner`].
        pub fn runner(mut self) -> Runner {
            Box::new(move |body| {
                body(&mut self);
                Ok(())
            })
        }
    }

    impl XidEvents for Double {
        fn register(&mut self, skip: &BTreeSet<String>) -> Result<Vec<Registration>, EventError> {
            if let Ok(mut r) = self.registers.lock() {
                r.push(skip.clone());
            }
            if let Some(e) = &self.register_error {
                return Err(e.clone());
            }
            let gpus = self.gpus.lock().map(|g| g.clone()).unwrap_or_default();
            Ok(gpus
                .into_iter()
                .filter(|(g, _)| !skip.contains(g))
                .map(|(gpu, result)| Registration { gpu, result })
                .collect())
        }

        fn wait(&mut self, timeout: Duration) -> Result<Option<XidEvent>, EventError> {
            assert!(!timeout.is_zero(), "a wait without a bound");
            match self.answers.recv_timeout(timeout) {
                Ok(a) => {
                    self.taken.fetch_add(1, Ordering::SeqCst);
                    a
                }
                Err(_) => {
                    // Disconnected: nothing more will come; the timeout
                    // all the same.
                    std::thread::sleep(Duration::from_millis(5));
                    Err(EventError::Timeout)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::double::double;
    use super::*;
    use crate::model::{MigInfo, NvidiaInfo};
    use signals::VendorHealth as _;

    const GPU: &str = "GPU-6f1d3c2a-8b4e-4a7f-9c21-0d5e7b3a9f10";
    const OTHER: &str = "GPU-00000000-0000-0000-0000-000000000002";

    fn gpu(uuid: &str) -> Device {
        Device {
            id: "0000:41:00.0".into(),
            nvidia: Some(NvidiaInfo {
                gpu_uuid: uuid.into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn mig(gi: u32, ci: u32) -> Device {
        let mut d = gpu(GPU);
        d.id = format!("0000:41:00.0/gi{gi}/ci{ci}");
        if let Some(nv) = d.nvidia.as_mut() {
            nv.mig = Some(MigInfo {
                parent: "0000:41:00.0".into(),
                gi,
                ci,
                ..Default::default()
            });
        }
        d
    }

    fn codes(h: &XidHealth, d: &Device) -> Vec<String> {
        h.problems(d)
            .into_iter()
            .map(|p| p.code.to_string())
            .collect()
    }

    /// Runs the watch over a double of GPU and OTHER until `script` has
    /// sent what it sends and the thread heard it; then stops it.
    fn watch(
        checks: Checks,
        register_error: Option<EventError>,
        script: impl FnOnce(&double::Script),
    ) -> (XidHealth, double::Script) {
        let (d, s) = double(&[GPU, OTHER], register_error);
        let health = XidHealth::default();
        let w = Watch::start(d.runner(), health.clone(), checks).unwrap();
        script(&s);
        // One more XID of the other GPU; once a wait took it, the stop
        // (which joins the thread) comes after it was heard.
        s.xid(OTHER, 79, None);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::time::Instant::now() < deadline
            && !s.all_taken()
            && !w.thread.as_ref().unwrap().is_finished()
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        drop(w);
        (health, s)
    }

    #[test]
    fn an_xid_of_the_whole_gpu_is_the_gpus_and_all_its_mig_devices() {
        let (h, _) = watch(Checks::default(), None, |s| s.xid(GPU, 48, None));
        assert_eq!(codes(&h, &gpu(GPU)), ["NvidiaXid48"]);
        assert_eq!(codes(&h, &mig(1, 0)), ["NvidiaXid48"]);
        assert_eq!(codes(&h, &mig(2, 0)), ["NvidiaXid48"]);
        assert_eq!(
            h.problems(&mig(2, 0))[0].detail,
            format!("NVML reported XID 48 on GPU {GPU}")
        );
        // Not another GPU's, nor a device that is no NVIDIA GPU.
        assert_eq!(codes(&h, &gpu(OTHER)), ["NvidiaXid79"]);
        assert!(codes(&h, &Device::default()).is_empty());
    }

    #[test]
    fn an_xid_of_a_mig_instance_is_that_mig_device_and_the_gpu_only() {
        let (h, _) = watch(Checks::default(), None, |s| {
            s.xid(GPU, 94, Some((2, 0)));
            s.xid(GPU, 999, Some((7, 1)));
        });
        assert_eq!(codes(&h, &mig(2, 0)), ["NvidiaXid94"]);
        assert_eq!(
            h.problems(&mig(2, 0))[0].detail,
            format!("NVML reported XID 94 on MIG device gi2/ci0 of GPU {GPU}")
        );
        assert!(codes(&h, &mig(1, 0)).is_empty());
        assert!(codes(&h, &mig(2, 1)).is_empty());
        // The GPU holds them both, the one cdigen does not know too.
        assert_eq!(codes(&h, &gpu(GPU)), ["NvidiaXid94", "NvidiaXid999"]);
        assert_eq!(
            h.problems(&gpu(GPU))[1].detail,
            format!(
                "NVML reported an XID NVML does not know (999) on MIG device gi7/ci1 of GPU {GPU}"
            )
        );
    }

    #[test]
    fn application_xids_and_the_ignored_ones_are_not_recorded() {
        let (h, _) = watch(Checks::default(), None, |s| {
            for x in signals::APPLICATION_XIDS {
                s.xid(GPU, x, None);
            }
        });
        assert!(codes(&h, &gpu(GPU)).is_empty());
        // --ignore-health NvidiaXid63: that one too, and the application
        // ones no longer (the list replaces the default).
        let checks = Checks::ignoring(signals::parse_ignore("NvidiaXid63").unwrap());
        let (h, _) = watch(checks, None, |s| {
            s.xid(GPU, 63, None);
            s.xid(GPU, 13, None);
        });
        assert_eq!(codes(&h, &gpu(GPU)), ["NvidiaXid13"]);
        // `default,...` keeps the default's; `NvidiaXid` ignores every XID.
        let checks = Checks::ignoring(signals::parse_ignore("default,NvidiaXid63").unwrap());
        let (h, _) = watch(checks, None, |s| {
            s.xid(GPU, 63, None);
            s.xid(GPU, 13, None);
            s.xid(GPU, 48, None);
        });
        assert_eq!(codes(&h, &gpu(GPU)), ["NvidiaXid48"]);
        let (h, _) = watch(Checks::ignoring([Code::NvidiaXid(None)]), None, |s| {
            s.xid(GPU, 48, None);
        });
        assert!(codes(&h, &gpu(GPU)).is_empty());
        assert!(codes(&h, &gpu(OTHER)).is_empty());
    }

    #[test]
    fn each_xid_is_recorded_once_and_at_most_a_few_per_gpu() {
        let (h, _) = watch(Checks::ignoring([]), None, |s| {
            for x in [48, 48, 62, 63, 64, 74, 79] {
                s.xid(GPU, x, None);
            }
        });
        assert_eq!(
            codes(&h, &gpu(GPU)),
            ["NvidiaXid48", "NvidiaXid62", "NvidiaXid63", "NvidiaXid64"]
        );
    }

    #[test]
    fn a_lost_gpu_is_found_by_listing_again_and_left_out_of_the_new_set() {
        let (h, s) = watch(Checks::default(), None, |s| {
            s.gpus.lock().unwrap()[0].1 = Err(EventError::GpuLost);
            s.send(Err(EventError::GpuLost));
        });
        assert_eq!(codes(&h, &gpu(GPU)), ["NvidiaGpuLost"]);
        assert_eq!(codes(&h, &mig(1, 0)), ["NvidiaGpuLost"]);
        assert_eq!(
            h.problems(&gpu(GPU))[0].detail,
            format!("NVML says GPU {GPU} is lost (fallen off the bus or inaccessible)")
        );
        // The other GPU is still watched (its XID 79 was heard after).
        assert_eq!(codes(&h, &gpu(OTHER)), ["NvidiaXid79"]);
        // Listed again, the lost GPU failing to join.
        assert_eq!(s.registers.lock().unwrap().len(), 2);
    }

    #[test]
    fn nvml_failing_ends_the_watch_and_keeps_what_it_heard() {
        // Failing at the start: nothing watched, nothing recorded.
        let (h, s) = watch(
            Checks::default(),
            Some(EventError::Failed("Uninitialized".into())),
            |_| {},
        );
        assert!(codes(&h, &gpu(OTHER)).is_empty());
        assert_eq!(s.registers.lock().unwrap().len(), 1);
        // Every GPU too old to report XIDs: nothing watched.
        let (d, s) = double(&[GPU], None);
        s.gpus.lock().unwrap()[0].1 = Err(EventError::NotSupported);
        let health = XidHealth::default();
        let stop = AtomicBool::new(false);
        let mut d = d;
        run(&mut d, &health, &Checks::default(), &stop);
        assert_eq!(s.registers.lock().unwrap().len(), 1);
        // Failing while waiting: MAX_FAILURES in a row end it; an XID
        // between resets the count.
        let (d, s) = double(&[GPU], None);
        let health = XidHealth::default();
        let failed = || Err(EventError::Failed("Unknown Error".into()));
        s.send(failed());
        s.send(failed());
        s.xid(GPU, 48, None);
        for _ in 0..MAX_FAILURES {
            s.send(failed());
        }
        s.xid(GPU, 79, None);
        let mut d = d;
        let started = std::time::Instant::now();
        run(&mut d, &health, &Checks::default(), &stop);
        assert_eq!(codes(&health, &gpu(GPU)), ["NvidiaXid48"]);
        assert!(started.elapsed() >= WAIT * 4, "{:?}", started.elapsed());
        // A GPU lost that no listing finds: a failure, not every GPU lost.
        let (d, s) = double(&[GPU, OTHER], None);
        let health = XidHealth::default();
        for _ in 0..MAX_FAILURES {
            s.send(Err(EventError::GpuLost));
        }
        let mut d = d;
        run(&mut d, &health, &Checks::default(), &stop);
        assert!(codes(&health, &gpu(GPU)).is_empty());
        assert_eq!(s.registers.lock().unwrap().len(), 1 + MAX_FAILURES as usize);
    }

    /// NVML's opener never loads the library with `--no-nvml`, nor from
    /// a root that is not the host without the driver's own file: the
    /// reason is the informational line.
    #[cfg(feature = "nvml")]
    #[test]
    fn no_nvml_means_no_source() {
        let root = HostRoot::open(std::path::Path::new("/"))
            .unwrap()
            .with_nvml(false);
        let Err(why) = nvml()(&root, &[]) else {
            panic!("a source with --no-nvml");
        };
        assert_eq!(why, "NVML not asked (--no-nvml)");
        let dir = tempfile::tempdir().unwrap();
        let root = HostRoot::open(dir.path()).unwrap();
        let Err(why) = nvml()(&root, &[]) else {
            panic!("a source without the driver's library");
        };
        assert!(
            why.starts_with("no libnvidia-ml.so.<version> among the driver's files"),
            "{why}"
        );
    }

    #[test]
    fn the_watch_stops_within_a_wait() {
        let (d, _s) = double(&[GPU], None);
        let w = Watch::start(d.runner(), XidHealth::default(), Checks::default()).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let started = std::time::Instant::now();
        drop(w);
        assert!(started.elapsed() < WAIT * 2, "{:?}", started.elapsed());
        // A runner with no source: the thread ends by itself.
        let w = Watch::start(
            Box::new(|_| Err("NVML not asked (--no-nvml)".into())),
            XidHealth::default(),
            Checks::default(),
        )
        .unwrap();
        drop(w);
    }
}

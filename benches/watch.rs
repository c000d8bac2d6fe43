//! Benchmark: `cdigen watch` from one device event to the spec on disk,
//! and how many passes a storm of events costs.
//!
//! A real `cdigen watch` (the built binary, `--source netlink`, its
//! default `--debounce 500ms` and `--max-delay 5s`) runs over a copy of a
//! machine; the benchmark changes the tree under it (a device hidden, then
//! restored) and sends the uevent the kernel would send, in the kernel's
//! format, to the `NETLINK_KOBJECT_UEVENT` group (1). Where `unshare -n`
//! works (root), the benchmark runs itself again in a private network
//! namespace, so that what it sends reaches only the watch it starts (the
//! kernel's own uevents still reach every namespace; an idle machine sends
//! none). Elsewhere the same loop and pipeline run in this process
//! (`cdigen::watch::run`, the events from a channel), as the output says.
//!
//! Three changes: on the fixture intel-laptop, its NPU comes and goes (an
//! `accel` event); on a synthetic machine (tests/support/synth.rs) of 8
//! Mellanox PFs x 128 VFs with 64 vDPA devices and 64 AMD GPUs, its last
//! VF (a `pci` event, which every built-in generator listens to: every
//! backend discovers again), then its last GPU's DRM nodes (a `drm`
//! event: the DRM, generic and NVIDIA backends discover again, the SR-IOV,
//! vDPA and VFIO backends' claims are kept). For each, medians of
//! [`RUNS`] changes, taken alternately:
//! 1. `at once`: a change whose event comes after a quiet period (the
//!    leading edge), from the event sent to the spec file showing it;
//! 2. `coalesced`: the same change when its event follows another by less
//!    than the debounce (the trailing edge): the debounce, then a pass;
//! 3. `full pass`: a reload's pass (SIGHUP) on the unchanged machine, every
//!    backend and generator, as every event pass was before the leading
//!    edge and the partial discovery: the old figure is the debounce and a
//!    full pass, and `at once / old` the ratio to it. The pass at once is
//!    split into discovery, planning and writing (from the watch's debug
//!    log: `discovered ... in N ms (backends), planned ... in N ms, wrote
//!    in N ms`), with the backends that discovered;
//! 4. a storm: the change and 9,999 more events of its device sent at
//!    once; when the spec showed the change, and how many passes the storm
//!    cost (the target is at most 5), from the log.
//!
//! Run with `cargo bench --bench watch` (about three minutes).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[allow(dead_code)] // the builders other than the NIC machine's
#[path = "../tests/support/synth.rs"]
mod synth;

#[path = "support/netns.rs"]
mod netns;

use std::fs;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use cdigen::watch::netlink::KERNEL_GROUP;
use cdigen::watch::{Config, Control, DeviceEvent, Event, EventSource};
use rustix::net::{SendFlags, netlink, sendto};

/// Changes per edge and machine.
const RUNS: usize = 9;
/// cdigen's default `--debounce`.
const DEBOUNCE: Duration = Duration::from_millis(500);
/// Events in the storm.
const STORM: usize = 10_000;
/// The most passes a storm may cost.
const STORM_TARGET: usize = 5;
const WAIT: Duration = Duration::from_secs(60);
/// The watch's log filter: its passes and their times.
const LOG_FILTER: &str = "warn,cdigen::watch=debug";

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// One uevent.
#[derive(Debug, Clone)]
struct Uevent {
    action: &'static str,
    subsystem: &'static str,
    devpath: String,
}

/// A device that comes and goes under a running watch.
struct Change {
    /// What the output says.
    label: String,
    /// Restores (true) or hides (false) it in the tree.
    toggle: Box<dyn Fn(bool)>,
    /// The uevent of its coming (true) or going.
    event: Box<dyn Fn(bool) -> Uevent>,
    /// Whether the spec on disk shows it present (true) or gone.
    shows: Box<dyn Fn(bool) -> bool>,
}

/// The NPU of the fixture intel-laptop (copied to `dir/root`).
fn npu(dir: &Path) -> Change {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/intel-laptop/root");
    let ok = Command::new("cp")
        .arg("-a")
        .arg(&src)
        .arg(dir.join("root"))
        .status()
        .unwrap()
        .success();
    assert!(ok, "cp -a {}", src.display());
    let link = dir.join("root/sys/class/accel/accel0");
    let aside = dir.join("accel0.aside");
    let spec = dir.join("cdi/intel.com-npu.yaml");
    Change {
        label: "intel-laptop, its NPU (accel)".into(),
        toggle: Box::new(move |present| {
            if present {
                fs::rename(&aside, &link).unwrap();
            } else {
                fs::rename(&link, &aside).unwrap();
            }
        }),
        event: Box::new(|present| Uevent {
            action: if present { "add" } else { "remove" },
            subsystem: "accel",
            devpath: "/devices/pci0000:00/0000:00:0b.0/accel/accel0".into(),
        }),
        shows: Box::new(move |present| spec.exists() == present),
    }
}

/// The last VF of a synthetic machine of 8 PFs x 128 VFs, 64 vDPA
/// devices and 64 AMD GPUs (built in `dir/root`).
fn vf(dir: &Path) -> Change {
    let root = dir.join("root");
    synth::sriov_nics(&root, 8, 128, 64);
    synth::amd_gpus(&root, 64);
    let mut vfs = synth::vf_links(&root);
    assert_eq!(vfs.len(), 1024);
    let link = vfs.pop().unwrap();
    let target = fs::read_link(&link).unwrap();
    // ../../../devices/pci0100:48/... -> /devices/pci0100:48/...
    let t = target.to_str().unwrap();
    let devpath = format!("/{}", &t[t.find("devices/").unwrap()..]);
    let address = link.file_name().unwrap().to_str().unwrap().to_string();
    let spec = dir.join("cdi/cdigen.io-vf.yaml");
    Change {
        label: "8 PFs x 128 VFs, 64 vDPA, 64 AMD GPUs; a VF (pci)".into(),
        toggle: Box::new(move |present| {
            if present {
                std::os::unix::fs::symlink(&target, &link).unwrap();
            } else {
                fs::remove_file(&link).unwrap();
            }
        }),
        event: Box::new(move |present| Uevent {
            action: if present { "add" } else { "remove" },
            subsystem: "pci",
            devpath: devpath.clone(),
        }),
        shows: Box::new(move |present| {
            fs::read_to_string(&spec).is_ok_and(|t| t.contains(&address) == present)
        }),
    }
}

/// The last of the 64 AMD GPUs of the same synthetic machine: its card
/// and render node come and go (a `drm` event: the DRM and NVIDIA
/// generators', whose backends run again; the SR-IOV, vDPA and VFIO
/// backends' claims are kept).
fn gpu(dir: &Path) -> Change {
    let root = dir.join("root");
    synth::sriov_nics(&root, 8, 128, 64);
    synth::amd_gpus(&root, 64);
    let class = root.join("sys/class/drm");
    let names = ["card127", "renderD191"];
    for n in names {
        assert!(class.join(n).exists(), "{n}");
    }
    let aside = dir.join("aside");
    fs::create_dir(&aside).unwrap();
    let spec = dir.join("cdi/amd.com-gpu.yaml");
    Change {
        label: "the same machine; a GPU's DRM nodes (drm)".into(),
        toggle: Box::new(move |present| {
            for n in names {
                let (from, to) = (class.join(n), aside.join(n));
                if present {
                    fs::rename(to, from).unwrap();
                } else {
                    fs::rename(from, to).unwrap();
                }
            }
        }),
        event: Box::new(|present| Uevent {
            action: if present { "add" } else { "remove" },
            subsystem: "drm",
            devpath: "/devices/pci0000:00/0000:00:01.0/0000:40:00.0/drm/renderD191".into(),
        }),
        shows: Box::new(move |present| {
            fs::read_to_string(&spec).is_ok_and(|t| t.contains("renderD191") == present)
        }),
    }
}

/// A running watch over `dir/root`, writing to `dir/cdi`, logging to
/// `dir/log`.
trait Watcher {
    /// Delivers `e`.
    fn fire(&mut self, e: &Uevent);
    /// Asks for a reload and a full pass (SIGHUP).
    fn reload(&mut self);
    /// Stops the watch.
    fn stop(self: Box<Self>);
}

/// `cdigen watch --source netlink`, the events sent to the kernel's
/// uevent group.
struct Binary {
    child: Child,
    socket: OwnedFd,
    seq: u64,
}

impl Binary {
    fn start(dir: &Path, socket: OwnedFd) -> Binary {
        let mut child = Command::new(env!("CARGO_BIN_EXE_cdigen"))
            .current_dir(dir)
            .args(["watch", "--root", "root", "--output-dir", "cdi"])
            .args(["--devinfo-dir", "devinfo", "--source", "netlink"])
            .args(["--ready-file", "ready"])
            .env_remove("CDIGEN_ROOT")
            .env_remove("CDIGEN_TEMPLATES")
            .env_remove("JOURNAL_STREAM")
            .env_remove("NOTIFY_SOCKET")
            .env("CDIGEN_GENERATORS", "/nonexistent-cdigen-user-generators")
            .env("CDIGEN_NO_NVML", "1")
            .env("RUST_LOG", LOG_FILTER)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(dir.join("log")).unwrap())
            .spawn()
            .unwrap();
        let end = Instant::now() + WAIT;
        while !dir.join("ready").exists() {
            if let Some(s) = child.try_wait().unwrap() {
                panic!("exited with {s}: {}", read(&dir.join("log")));
            }
            assert!(
                Instant::now() < end,
                "not ready: {}",
                read(&dir.join("log"))
            );
            thread::sleep(Duration::from_millis(10));
        }
        Binary {
            child,
            socket,
            seq: 0,
        }
    }
}

impl Watcher for Binary {
    fn fire(&mut self, e: &Uevent) {
        self.seq += 1;
        let Uevent {
            action,
            subsystem,
            devpath,
        } = e;
        let packet = format!(
            "{action}@{devpath}\0ACTION={action}\0DEVPATH={devpath}\0SUBSYSTEM={subsystem}\0SEQNUM={}\0",
            self.seq
        );
        let group = netlink::SocketAddrNetlink::new(0, KERNEL_GROUP);
        sendto(&self.socket, packet.as_bytes(), SendFlags::empty(), &group).unwrap();
    }

    fn reload(&mut self) {
        let ok = Command::new("kill")
            .args(["-HUP", &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -HUP");
    }

    fn stop(mut self: Box<Self>) {
        let ok = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -TERM");
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{status}");
    }
}

/// The same loop and pipeline in this process, the events from a channel.
struct InProcess {
    tx: Sender<Event>,
    control: Arc<Control>,
    handle: thread::JoinHandle<()>,
}

/// Events from a channel.
struct Channel(Receiver<Event>);

impl EventSource for Channel {
    fn name(&self) -> &'static str {
        "channel"
    }
    fn next(&mut self, timeout: Duration, _: BorrowedFd<'_>) -> std::io::Result<Option<Event>> {
        // Short steps: the loop sees Control::stop without the wake fd.
        Ok(self
            .0
            .recv_timeout(timeout.min(Duration::from_millis(5)))
            .ok())
    }
}

impl InProcess {
    fn start(dir: &Path) -> InProcess {
        use cdigen::generate::{Definitions, Host};
        let mut pipeline = cdigen::watch::Pipeline::new(
            Host {
                root: dir.join("root"),
                backends: Vec::new(),
                driver_root: None,
                library_search_path: Vec::new(),
                hook_path: Some("/usr/bin/cdigen".into()),
                no_nvml: true,
            },
            Definitions {
                generators: Some("/nonexistent-cdigen-user-generators".into()),
                templates: None,
                only: Vec::new(),
            },
            dir.join("cdi"),
            dir.join("devinfo"),
            None,
        )
        .unwrap();
        let (tx, rx) = channel();
        let control = Arc::new(Control::new().unwrap());
        let c = Arc::clone(&control);
        let started = Arc::new(Mutex::new(false));
        let s = Arc::clone(&started);
        let handle = thread::spawn(move || {
            let config = Config::default();
            cdigen::watch::run(&config, &mut Channel(rx), &mut pipeline, &c, &mut |_| {
                *s.lock().unwrap() = true;
            })
            .unwrap();
        });
        let end = Instant::now() + WAIT;
        while !*started.lock().unwrap() {
            assert!(Instant::now() < end, "no first pass");
            thread::sleep(Duration::from_millis(10));
        }
        InProcess {
            tx,
            control,
            handle,
        }
    }
}

impl Watcher for InProcess {
    fn fire(&mut self, e: &Uevent) {
        self.tx
            .send(Event::Device(DeviceEvent {
                action: e.action.into(),
                subsystem: e.subsystem.into(),
                devpath: e.devpath.clone(),
            }))
            .unwrap();
    }

    fn reload(&mut self) {
        self.control.reload();
    }

    fn stop(self: Box<Self>) {
        self.control.stop();
        self.handle.join().unwrap();
    }
}

/// Sends this process's log (the in-process watch's) to `dir/log`.
fn log_to(path: &Path) {
    let file = fs::File::create(path).unwrap();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(LOG_FILTER))
        .with_ansi(false)
        .with_writer(Mutex::new(file))
        .init();
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_default()
}

/// One pass of the log: its reason, time, and the pipeline's steps
/// (discover, plan, write).
struct PassLine {
    at_once: bool,
    full: bool,
    took: Duration,
    steps: [Duration; 3],
    /// The backends that discovered.
    ran: String,
}

/// The numbers after each `in` of a line, as milliseconds.
fn millis_after_in(line: &str) -> Vec<Duration> {
    line.split(" in ")
        .skip(1)
        .filter_map(|rest| rest.split(' ').next()?.parse().ok())
        .map(Duration::from_millis)
        .collect()
}

/// The passes in the watch's log: the pipeline's `discovered 3 devices in
/// 5 ms, planned 2 in 1 ms, wrote in 1 ms`, then the loop's `regenerated
/// a, b (event, at once) in 7 ms: ...`.
fn passes(log: &Path) -> Vec<PassLine> {
    let mut steps = [Duration::ZERO; 3];
    let mut ran = String::new();
    let mut out = Vec::new();
    for l in read(log).lines() {
        if l.contains(" discovered ") {
            if let [d, p, w] = millis_after_in(l)[..] {
                steps = [d, p, w];
            }
            if let (Some(a), Some(b)) = (l.find(" ms ("), l.find("), planned")) {
                ran = l[a + 5..b].to_string();
            }
            continue;
        }
        let Some(at) = l.find("regenerated ") else {
            continue;
        };
        let rest = &l[at..];
        let (Some(open), Some(close)) = (rest.rfind(" ("), rest.rfind(") in ")) else {
            continue;
        };
        let reason = &rest[open + 2..close];
        let Some(&took) = millis_after_in(rest).last() else {
            continue;
        };
        out.push(PassLine {
            at_once: reason == "event, at once",
            full: !reason.starts_with("event"),
            took,
            steps,
            ran: ran.clone(),
        });
    }
    out
}

/// Waits until the log has `n` passes.
fn wait_passes(log: &Path, n: usize) {
    let end = Instant::now() + WAIT;
    while passes(log).len() < n {
        assert!(
            Instant::now() < end,
            "waiting for {n} passes: {}",
            read(log)
        );
        thread::sleep(Duration::from_millis(1));
    }
}

/// Waits until `shows` holds; when it did.
fn wait_shown(shows: &dyn Fn() -> bool) -> Instant {
    let end = Instant::now() + WAIT;
    loop {
        let now = Instant::now();
        if shows() {
            return now;
        }
        assert!(now < end, "the spec never showed the change");
        thread::sleep(Duration::from_millis(1));
    }
}

/// What one machine gave.
struct Row {
    label: String,
    at_once: Duration,
    coalesced: Duration,
    pass: Duration,
    /// Discover, plan, write, of the pass at once.
    steps: [Duration; 3],
    /// The backends it discovered with.
    ran: String,
    /// A full pass on the unchanged machine (SIGHUP): every backend and
    /// generator, as every event pass was before.
    full_pass: Duration,
    storm_current: Duration,
    storm_passes: usize,
    storm_full: usize,
    /// Events the watch received of the storm's (the rest overflowed its
    /// socket's buffer, which it hears of as lost events).
    storm_received: u64,
}

/// The events the watch says it received, from its last line (`stopping
/// after 20 events, ...`).
fn events_received(log: &Path) -> u64 {
    read(log)
        .lines()
        .rev()
        .find_map(|l| {
            let rest = &l[l.find("stopping after ")? + 15..];
            rest.split(' ').next()?.parse().ok()
        })
        .unwrap_or_default()
}

/// Runs the measurements on `change` under `w`, logging to `log`.
fn measure(change: &Change, mut w: Box<dyn Watcher>, log: &Path) -> Row {
    let mut expected = passes(log).len();
    let mut fired = 0u64;
    let (mut at_once, mut coalesced) = (Vec::new(), Vec::new());
    let mut present = true;
    for i in 0..2 * RUNS {
        // A quiet period since the last pass.
        wait_passes(log, expected);
        thread::sleep(DEBOUNCE + Duration::from_millis(100));
        let trailing = i % 2 == 1;
        if trailing {
            // Another event of the device first, regenerated at once;
            // the change's then comes within the debounce of its pass.
            w.fire(&Uevent {
                action: "change",
                ..(change.event)(present)
            });
            fired += 1;
            expected += 1;
            wait_passes(log, expected);
        }
        present = !present;
        (change.toggle)(present);
        let t = Instant::now();
        w.fire(&(change.event)(present));
        fired += 1;
        let d = wait_shown(&|| (change.shows)(present)) - t;
        if trailing {
            &mut coalesced
        } else {
            &mut at_once
        }
        .push(d);
        expected += 1;
    }
    wait_passes(log, expected);
    let at_once_passes: Vec<PassLine> = passes(log).into_iter().filter(|p| p.at_once).collect();
    let pass = median(at_once_passes.iter().map(|p| p.took).collect());
    let steps = [0, 1, 2].map(|i| median(at_once_passes.iter().map(|p| p.steps[i]).collect()));
    let ran = at_once_passes
        .last()
        .map(|p| p.ran.clone())
        .unwrap_or_default();

    // A full pass, as a reload makes it.
    let mut full = Vec::new();
    for _ in 0..3 {
        w.reload();
        expected += 1;
        wait_passes(log, expected);
        full.extend(passes(log).last().map(|p| p.took));
    }
    let full_pass = median(full);

    // The storm: the change first, then the device's other events.
    thread::sleep(DEBOUNCE + Duration::from_millis(100));
    let before = passes(log).len();
    present = !present;
    (change.toggle)(present);
    let t = Instant::now();
    w.fire(&(change.event)(present));
    let noise = Uevent {
        action: "change",
        ..(change.event)(present)
    };
    for _ in 1..STORM {
        w.fire(&noise);
    }
    let storm_current = wait_shown(&|| (change.shows)(present)) - t;
    // Until no pass came for three quiet periods.
    let mut n = passes(log).len();
    loop {
        thread::sleep(3 * DEBOUNCE);
        let now = passes(log).len();
        if now == n {
            break;
        }
        n = now;
    }
    w.stop();
    let storm_received = events_received(log).saturating_sub(fired);
    let storm: Vec<PassLine> = passes(log).into_iter().skip(before).collect();
    Row {
        label: change.label.clone(),
        at_once: median(at_once),
        coalesced: median(coalesced),
        pass,
        steps,
        ran,
        full_pass,
        storm_current,
        storm_passes: storm.len(),
        storm_full: storm.iter().filter(|p| p.full).count(),
        storm_received,
    }
}

fn main() {
    if let Some(code) = netns::in_private_netns() {
        std::process::exit(code);
    }
    let socket = netns::uevent_socket();
    let how = match &socket {
        Ok(_) => "the binary, --source netlink; kernel-format uevents on group 1 (private netns)"
            .to_string(),
        Err(why) => format!("cdigen::watch::run in this process, events from a channel ({why})"),
    };
    let mut rows = Vec::new();
    let builders: [fn(&Path) -> Change; 3] = [npu, vf, gpu];
    // In this process, one log for both machines (one subscriber per
    // process).
    let shared = tempfile::tempdir().unwrap();
    let shared_log = shared.path().join("log");
    if socket.is_err() {
        log_to(&shared_log);
    }
    for build in builders {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let change = build(dir);
        let (w, log): (Box<dyn Watcher>, PathBuf) = match &socket {
            Ok(fd) => (
                Box::new(Binary::start(dir, fd.try_clone().unwrap())),
                dir.join("log"),
            ),
            Err(_) => (Box::new(InProcess::start(dir)), shared_log.clone()),
        };
        assert!((change.shows)(true), "the device is there at start");
        rows.push(measure(&change, w, &log));
    }

    println!("cdigen watch: a device event to the spec on disk; {how}");
    println!(
        "--debounce {DEBOUNCE:?} (the default); medians of {RUNS} changes each way, alternated"
    );
    println!(
        "  {:<52} {:>9} {:>10} {:>6} {:>9} {:>13}",
        "machine, change", "at once", "coalesced", "ratio", "full pass", "at once / old"
    );
    for r in &rows {
        // Before the leading edge and the partial discovery: the debounce
        // and a full pass.
        let old = DEBOUNCE + r.full_pass;
        println!(
            "  {:<52} {:>9} {:>10} {:>5.2}x {:>9} {:>13}",
            r.label,
            format!("{:.1?}", r.at_once),
            format!("{:.1?}", r.coalesced),
            r.at_once.as_secs_f64() / r.coalesced.as_secs_f64(),
            format!("{:.0?}", r.full_pass),
            format!(
                "{:.2}x of {:.0?}",
                r.at_once.as_secs_f64() / old.as_secs_f64(),
                old
            ),
        );
    }
    println!("  the pass at once = discover + plan + write, and the backends that discovered:");
    for r in &rows {
        println!(
            "  {:<52} {:.0?} = {:?} + {:?} + {:?}; {}",
            r.label, r.pass, r.steps[0], r.steps[1], r.steps[2], r.ran
        );
    }
    println!(
        "storm: the change and {} more events of its device, sent at once",
        STORM - 1
    );
    for r in &rows {
        println!(
            "  {:<52} {} received; spec current after {:.1?}; {} passes ({} full), target <= {STORM_TARGET}: {}",
            r.label,
            r.storm_received,
            r.storm_current,
            r.storm_passes,
            r.storm_full,
            if r.storm_passes <= STORM_TARGET {
                "met"
            } else {
                "NOT met"
            }
        );
    }
}

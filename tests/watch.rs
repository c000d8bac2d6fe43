//! `cdigen watch` on copies of fixture machines changed under it: the loop
//! driven by scripted events (and by kernel-format packets through the
//! netlink source's parser) over the real generate pipeline, and the
//! binary under signals.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[path = "support/machine.rs"]
mod support;

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::fd::BorrowedFd;
use std::os::unix::fs::MetadataExt as _;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use cdigen::generate::Action;
use cdigen::generate::{Definitions, Host};
use cdigen::watch::{
    Config, Control, DeviceEvent, Event, EventSource, Pass, Pipeline, Summary, run,
};
use support::machine;

/// The NPU's class link on the intel-laptop machine: hidden before the
/// watch starts, restored to "add" the device.
const NPU_LINK: &str = "sys/class/accel/accel0";

/// Events from a channel (see the unit tests for why the short steps).
struct Scripted(Receiver<Event>);

impl EventSource for Scripted {
    fn name(&self) -> &'static str {
        "scripted"
    }
    fn next(&mut self, timeout: Duration, _: BorrowedFd<'_>) -> io::Result<Option<Event>> {
        Ok(self
            .0
            .recv_timeout(timeout.min(Duration::from_millis(5)))
            .ok())
    }
}

fn dev(action: &str, subsystem: &str, devpath: &str) -> Event {
    Event::Device(DeviceEvent {
        action: action.into(),
        subsystem: subsystem.into(),
        devpath: devpath.into(),
    })
}

/// The generate pipeline over `tmp/root`, writing to `tmp/cdi` and
/// `tmp/devinfo`, built-in definitions only.
fn pipeline(tmp: &Path) -> Pipeline {
    pipeline_with(tmp, Path::new("/nonexistent-cdigen-user-generators"))
}

/// [`pipeline`] with the user generator definitions in `generators`.
fn pipeline_with(tmp: &Path, generators: &Path) -> Pipeline {
    Pipeline::new(
        Host {
            root: tmp.join("root"),
            backends: Vec::new(),
            driver_root: None,
            library_search_path: Vec::new(),
            hook_path: Some("/usr/bin/cdigen".into()),
            no_nvml: true,
        },
        Definitions {
            generators: Some(generators.into()),
            templates: None,
            only: Vec::new(),
        },
        tmp.join("cdi"),
        tmp.join("devinfo"),
        None,
    )
    .unwrap()
}

struct Running {
    tx: Sender<Event>,
    control: Arc<Control>,
    passes: Arc<Mutex<Vec<Pass>>>,
    handle: thread::JoinHandle<Summary>,
}

impl Running {
    fn passes(&self) -> usize {
        self.passes.lock().unwrap().len()
    }

    fn wait_passes(&self, n: usize) {
        eventually(&format!("{n} passes"), || self.passes() >= n);
    }

    fn stop(self) -> (Summary, Vec<Pass>) {
        self.control.stop();
        let summary = self.handle.join().unwrap();
        let passes = self.passes.lock().unwrap().clone();
        (summary, passes)
    }
}

/// Runs the watch over `tmp`'s machine on a thread.
fn start(tmp: &Path, debounce_ms: u64) -> Running {
    start_with(pipeline(tmp), debounce_ms)
}

/// Runs the watch over `regen` on a thread.
fn start_with(mut regen: Pipeline, debounce_ms: u64) -> Running {
    let (tx, rx) = channel();
    let control = Arc::new(Control::new().unwrap());
    let passes = Arc::new(Mutex::new(Vec::new()));
    let (c, p) = (Arc::clone(&control), Arc::clone(&passes));
    let config = Config {
        debounce: Duration::from_millis(debounce_ms),
        max_delay: Duration::from_secs(5),
        interval: Duration::from_secs(3600),
        ..Config::default()
    };
    let handle = thread::spawn(move || {
        let mut source = Scripted(rx);
        run(&config, &mut source, &mut regen, &c, &mut |pass| {
            p.lock().unwrap().push(pass.clone())
        })
        .unwrap()
    });
    let running = Running {
        tx,
        control,
        passes,
        handle,
    };
    running.wait_passes(1);
    running
}

fn eventually(what: &str, f: impl Fn() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(20), "timed out: {what}");
        thread::sleep(Duration::from_millis(10));
    }
}

/// (mtime in ns, inode) of every file in the output directories, state
/// files included.
fn stamps(tmp: &Path) -> BTreeMap<PathBuf, (i128, u64)> {
    let mut out = BTreeMap::new();
    for dir in ["cdi", "devinfo"] {
        for e in fs::read_dir(tmp.join(dir)).unwrap() {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            let ns = i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec());
            out.insert(e.path(), (ns, m.ino()));
        }
    }
    out
}

fn hide_npu(root: &Path) -> PathBuf {
    let aside = root.parent().unwrap().join("accel0.aside");
    fs::rename(root.join(NPU_LINK), &aside).unwrap();
    aside
}

#[test]
fn a_burst_of_5000_events_gives_at_most_two_regenerations_and_a_current_spec() {
    let (tmp, root) = machine("intel-laptop");
    let aside = hide_npu(&root);
    let w = start(tmp.path(), 200);
    let npu = tmp.path().join("cdi/intel.com-npu.yaml");
    assert!(!npu.exists(), "no NPU at start");
    let gpu = tmp.path().join("cdi/intel.com-gpu.yaml");
    assert!(gpu.exists());

    fs::rename(&aside, root.join(NPU_LINK)).unwrap();
    let sent = Instant::now();
    for i in 0..5000 {
        let e = match i % 4 {
            0 => dev(
                "add",
                "accel",
                "/devices/pci0000:00/0000:00:0b.0/accel/accel0",
            ),
            1 => dev(
                "change",
                "drm",
                "/devices/pci0000:00/0000:00:02.0/drm/card1",
            ),
            2 => dev("bind", "pci", "/devices/pci0000:00/0000:00:0b.0"),
            _ => dev("change", "tty", "/devices/virtual/tty/tty1"),
        };
        w.tx.send(e).unwrap();
    }
    eventually("the NPU spec", || npu.exists());
    let current_after = sent.elapsed();
    // Let anything else the burst would cause happen.
    thread::sleep(Duration::from_millis(800));
    let (summary, passes) = w.stop();

    assert_eq!(summary.events, 5000);
    assert_eq!(summary.full_passes, 1);
    assert!(
        (1..=2).contains(&summary.event_passes),
        "5000 events gave {} regenerations",
        summary.event_passes
    );
    assert!(
        current_after < Duration::from_secs(5),
        "spec current {current_after:?} after the burst began"
    );
    let text = fs::read_to_string(&npu).unwrap();
    let golden =
        fs::read_to_string("fixtures/intel-laptop/expected/cdi/intel.com-npu.yaml").unwrap();
    assert_eq!(text, golden, "the same spec generate writes");
    // The NPU appeared once, in the first event pass.
    let created: Vec<String> = passes
        .iter()
        .flat_map(|p| &p.changes)
        .filter(|c| c.path == npu)
        .map(ToString::to_string)
        .collect();
    assert_eq!(created.len(), 1, "{created:?}");
}

#[test]
fn an_unchanged_host_gets_no_write_however_many_events() {
    let (tmp, _root) = machine("example");
    let w = start(tmp.path(), 50);
    let before = stamps(tmp.path());
    assert!(
        before.keys().any(|p| p.ends_with("cdi/amd.com-gpu.yaml"))
            && before.keys().any(|p| p.ends_with("cdi/.cdigen-state"))
            && before
                .keys()
                .any(|p| p.ends_with("devinfo/cdigen.io-vdpa-vdpa0-device.json")),
        "{before:?}"
    );
    for _ in 0..200 {
        w.tx.send(dev("change", "pci", "/devices/pci0000:00/0000:00:01.1"))
            .unwrap();
    }
    w.tx.send(Event::Lost).unwrap();
    w.wait_passes(2);
    w.control.reload();
    let n = w.passes();
    w.wait_passes(n + 1);
    let (summary, passes) = w.stop();

    assert!(
        summary.event_passes >= 1 && summary.full_passes == 2,
        "{summary:?}"
    );
    assert_eq!(
        summary.files_changed,
        passes[0].changes.len() as u64,
        "only the start pass wrote"
    );
    for p in &passes[1..] {
        assert!(p.changes.is_empty(), "{:?}", p.changes);
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        assert_eq!(p.generators.len(), 11, "pci and lost events affect all");
    }
    assert_eq!(
        stamps(tmp.path()),
        before,
        "no file touched, state included"
    );
}

#[test]
fn a_device_added_then_removed_is_written_then_removed_by_its_generators_only() {
    let (tmp, root) = machine("intel-laptop");
    let aside = hide_npu(&root);
    let w = start(tmp.path(), 50);
    let npu = tmp.path().join("cdi/intel.com-npu.yaml");

    fs::rename(&aside, root.join(NPU_LINK)).unwrap();
    w.tx.send(dev(
        "add",
        "accel",
        "/devices/pci0000:00/0000:00:0b.0/accel/accel0",
    ))
    .unwrap();
    w.wait_passes(2);
    assert!(npu.exists());

    fs::rename(root.join(NPU_LINK), &aside).unwrap();
    w.tx.send(dev(
        "remove",
        "accel",
        "/devices/pci0000:00/0000:00:0b.0/accel/accel0",
    ))
    .unwrap();
    w.wait_passes(3);
    assert!(!npu.exists());
    let (summary, passes) = w.stop();
    assert_eq!(summary.event_passes, 2);

    // Only the DRM backend's generators ran for accel events.
    for p in &passes[1..] {
        assert!(p.generators.contains(&"intel-npu".to_string()));
        assert!(
            !p.generators.contains(&"vfio".to_string()),
            "{:?}",
            p.generators
        );
        assert!(!p.generators.contains(&"nvidia-gpu".to_string()));
    }
    let lines: Vec<String> = passes[1..]
        .iter()
        .flat_map(|p| p.changes.iter().map(ToString::to_string))
        .collect();
    let shown = npu.display();
    assert_eq!(
        lines,
        [
            format!("wrote {shown}: 2 devices (added intel.com/npu=0, intel.com/npu=all)"),
            format!("removed {shown} (removed intel.com/npu=0, intel.com/npu=all)"),
        ]
    );
    assert_eq!(passes[2].changes[0].action, Action::Removed);
}

/// The leading edge over the real pipeline: with a debounce far longer
/// than a pass, an event after a quiet period is on disk long before the
/// debounce is over. Where udevd runs (its control socket under the
/// root), the pass is made again once the quiet period is over, in case
/// udev was still making links for the event.
#[test]
fn one_event_after_a_quiet_period_is_written_at_once_and_made_again_where_udev_runs() {
    const DEBOUNCE: Duration = Duration::from_millis(800);
    let (tmp, root) = machine("intel-laptop");
    let aside = hide_npu(&root);
    let w = start(tmp.path(), DEBOUNCE.as_millis() as u64);
    let npu = tmp.path().join("cdi/intel.com-npu.yaml");
    let event = |action: &str| {
        dev(
            action,
            "accel",
            "/devices/pci0000:00/0000:00:0b.0/accel/accel0",
        )
    };
    thread::sleep(DEBOUNCE + Duration::from_millis(50));
    fs::rename(&aside, root.join(NPU_LINK)).unwrap();
    let sent = Instant::now();
    w.tx.send(event("add")).unwrap();
    eventually("the NPU spec", || npu.exists());
    let took = sent.elapsed();
    assert!(took < DEBOUNCE, "written {took:?} after the event");

    // udevd runs: the pass at once is followed by another.
    w.wait_passes(2);
    fs::create_dir_all(root.join("run/udev")).unwrap();
    fs::write(root.join("run/udev/control"), "").unwrap();
    thread::sleep(DEBOUNCE + Duration::from_millis(50));
    fs::rename(root.join(NPU_LINK), &aside).unwrap();
    let sent = Instant::now();
    w.tx.send(event("remove")).unwrap();
    eventually("the NPU spec gone", || !npu.exists());
    let took = sent.elapsed();
    w.wait_passes(4);
    let again = sent.elapsed();
    thread::sleep(Duration::from_millis(200));
    let (summary, passes) = w.stop();
    assert!(took < DEBOUNCE, "removed {took:?} after the event");
    assert!(again >= DEBOUNCE, "made again {again:?} after the event");
    assert_eq!(summary.event_passes, 3, "{passes:?}");
    assert_eq!(passes[3].generators, passes[2].generators);
    assert!(passes[3].changes.is_empty(), "{:?}", passes[3].changes);
}

#[test]
fn a_containers_veth_regenerates_nothing_and_a_vfs_netdev_only_the_netdev_readers() {
    let (tmp, _root) = machine("example");
    let w = start(tmp.path(), 20);
    for (action, name) in [
        ("add", "veth1a2b3c"),
        ("move", "eth0"),
        ("remove", "veth1a2b3c"),
    ] {
        w.tx.send(dev(action, "net", &format!("/devices/virtual/net/{name}")))
            .unwrap();
    }
    w.tx.send(dev(
        "add",
        "net",
        "/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.2/net/ens1f0v0",
    ))
    .unwrap();
    w.wait_passes(2);
    // Nothing more comes of the veths.
    thread::sleep(Duration::from_millis(300));
    let (summary, passes) = w.stop();
    assert_eq!(summary.events, 4);
    assert_eq!(summary.event_passes, 1, "{passes:?}");
    // The backends that read PCI functions' netdevs (the RDMA backend
    // names a port's netdev: it cannot tell a VF's from a PF's here).
    assert_eq!(passes[1].generators, ["rdma", "sriov", "vdpa"]);
    assert_eq!(passes[1].rediscovered, ["sriov", "vdpa", "rdma"]);
    assert!(passes[1].changes.is_empty() && passes[1].errors.is_empty());
}

/// On every fixture machine, an event of every subsystem the generators
/// listen to, on an unchanged host, changes nothing: the event pass (which
/// runs only its generators' backends, the others' claims kept) plans
/// what the full pass did.
#[test]
fn on_every_fixture_an_event_pass_of_any_subsystem_plans_what_a_full_pass_did() {
    use cdigen::watch::{Regenerate as _, Scope, affected, all_subsystems};
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut names: Vec<String> = fs::read_dir(&fixtures)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().join("root").is_dir())
        .map(|e| e.file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert!(names.len() >= 10, "{names:?}");
    for name in names {
        let (tmp, _root) = machine(&name);
        let mut p = pipeline(tmp.path());
        let never = || false;
        let full = p.regenerate(&Scope::All, &never).unwrap();
        let watched = p.watched();
        // Each scope once (a pci event's is every generator's).
        let mut scopes: Vec<(String, Scope)> = Vec::new();
        for s in all_subsystems(&watched).unwrap() {
            let devpath = format!("/devices/pci0000:00/0000:00:01.0/{s}/x");
            let scope = affected(&watched, &dev("change", &s, &devpath)).unwrap();
            if scope != Scope::All && !scopes.iter().any(|(_, x)| *x == scope) {
                scopes.push((s, scope));
            }
        }
        for (s, scope) in scopes {
            let pass = p.regenerate(&scope, &never).unwrap();
            assert!(
                pass.changes.is_empty(),
                "{name}, a {s} event: {:?}",
                pass.changes
            );
            for e in &pass.errors {
                assert!(full.errors.contains(e), "{name}, a {s} event: {e}");
            }
        }
    }
}

/// An event pass discovers only with the backends its generators use;
/// the others' claims from the last pass that ran them still hold: the
/// NVIDIA A100's DRM card stays out of a DRM generator that takes every
/// vendor, as NVIDIA's backend claims it.
#[test]
fn an_event_pass_rediscovers_only_its_generators_backends_and_keeps_the_others_claims() {
    let (tmp, _root) = machine("example");
    let defs = tmp.path().join("generators");
    fs::create_dir(&defs).unwrap();
    fs::write(
        defs.join("any-drm.yaml"),
        "name: any-drm\nbackend: drm\nkind: cdigen.io/anydrm\nnames: [index, all]\n\
template: drm\noutput:\n  format: yaml\n",
    )
    .unwrap();
    let w = start_with(pipeline_with(tmp.path(), &defs), 20);
    let spec = tmp.path().join("cdi/cdigen.io-anydrm.yaml");
    let text = fs::read_to_string(&spec).unwrap();
    // The AMD GPU's card, not the A100's.
    assert!(
        text.contains("/dev/dri/card1") && !text.contains("/dev/dri/card0"),
        "{text}"
    );
    w.tx.send(dev("change", "kfd", "/devices/virtual/kfd/kfd"))
        .unwrap();
    w.wait_passes(2);
    let (_, passes) = w.stop();
    assert_eq!(passes[0].rediscovered.len(), 8, "every backend at start");
    assert_eq!(passes[1].rediscovered, ["drm", "generic"]);
    assert!(passes[1].generators.contains(&"any-drm".to_string()));
    assert!(!passes[1].generators.contains(&"nvidia".to_string()));
    assert!(passes[1].changes.is_empty(), "{:?}", passes[1].changes);
    assert!(passes[1].errors.is_empty(), "{:?}", passes[1].errors);
    assert_eq!(fs::read_to_string(&spec).unwrap(), text);
}

/// What udev is asked to filter on: the subsystems of the generators
/// loaded (the generic backend itself takes any event, so the union of
/// the backends' lists would be no filter at all).
#[test]
fn a_mig_instance_created_without_any_event_is_in_the_spec_within_seconds() {
    let (tmp, root) = machine("example");
    let running = start(tmp.path(), 50);
    let spec = tmp.path().join("cdi/nvidia.com-gpu.yaml");
    let names = || -> Vec<String> {
        let text = fs::read_to_string(&spec).unwrap();
        text.lines()
            .filter_map(|l| l.strip_prefix("- name: "))
            .map(|n| n.trim_matches('\'').to_string())
            .collect()
    };
    assert_eq!(
        names(),
        [
            "0",
            "0:0",
            "0:1",
            "GPU-6f1d3c2a-8b4e-4a7f-9c21-0d5e7b3a9f10",
            "all"
        ]
    );
    let before = running.passes();
    // `nvidia-smi mig -cgi ... -C`: GPU instance 3 with compute instance
    // 0 appears in procfs (cap minors from the driver's static table); no
    // uevent is sent, and no scripted event either.
    let mig = root.join("proc/driver/nvidia/capabilities/gpu0/mig");
    let made = root.join("gi3.new");
    fs::create_dir_all(made.join("ci0")).unwrap();
    let access = |minor: u32| {
        format!("DeviceFileMinor: {minor}\nDeviceFileMode: 292\nDeviceFileModify: 1\n")
    };
    fs::write(made.join("ci0/access"), access(31)).unwrap();
    fs::write(made.join("access"), access(30)).unwrap();
    let gi = mig.join("gi3");
    let t = Instant::now();
    fs::rename(&made, &gi).unwrap();
    eventually("the new MIG device in the spec", || {
        names().contains(&"0:2".to_string())
    });
    let took = t.elapsed();
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_eq!(
        names(),
        [
            "0",
            "0:0",
            "0:1",
            "0:2",
            "GPU-6f1d3c2a-8b4e-4a7f-9c21-0d5e7b3a9f10",
            "all"
        ]
    );
    // Destroyed again: gone from the spec as quickly.
    fs::remove_dir_all(&gi).unwrap();
    eventually("the MIG device gone", || {
        !names().contains(&"0:2".to_string())
    });
    let (summary, passes) = running.stop();
    // Only the NVIDIA backend's generators ran for it (one pass each way,
    // maybe a second if a poll fell between two writes).
    assert!(passes.len() - before >= 2, "{summary:?}");
    for p in &passes[before..] {
        assert_eq!(p.generators, ["nvidia", "nvidia-imex"]);
    }
    assert_eq!(summary.events, 0);
}

#[test]
fn the_event_filter_is_the_union_of_the_loaded_generators_subsystems() {
    use cdigen::watch::{Regenerate as _, all_subsystems};
    let (tmp, _root) = machine("empty");
    let all = all_subsystems(&pipeline(tmp.path()).watched()).expect("a filter");
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    assert_eq!(
        all,
        [
            "accel",
            "drm",
            "infiniband",
            "infiniband_mad",
            "infiniband_verbs",
            "kfd",
            "mei",
            "misc",
            "module",
            "net",
            "pci",
            "platform",
            "vdpa",
            "vfio",
            "vfio-dev",
            "vhost-vdpa",
            "virtio"
        ]
    );
}

#[test]
fn kernel_packets_through_the_netlink_parser_drive_the_loop() {
    let (tmp, root) = machine("intel-laptop");
    let aside = hide_npu(&root);
    let (tx, rx) = UnixDatagram::pair().unwrap();
    let mut source = cdigen::watch::netlink::Netlink::from_fd(rx.into());
    let mut regen = pipeline(tmp.path());
    let control = Control::new().unwrap();
    let config = Config {
        debounce: Duration::from_millis(50),
        ..Config::default()
    };
    let npu = tmp.path().join("cdi/intel.com-npu.yaml");
    let summary = thread::scope(|s| {
        s.spawn(|| {
            thread::sleep(Duration::from_millis(300));
            fs::rename(&aside, root.join(NPU_LINK)).unwrap();
            tx.send(b"garbage").unwrap();
            tx.send(
                b"add@/devices/pci0000:00/0000:00:0b.0/accel/accel0\0ACTION=add\0\
                  DEVPATH=/devices/pci0000:00/0000:00:0b.0/accel/accel0\0SUBSYSTEM=accel\0\
                  MAJOR=261\0MINOR=0\0DEVNAME=accel/accel0\0SEQNUM=4711\0",
            )
            .unwrap();
            eventually("the NPU spec", || npu.exists());
            control.stop();
        });
        run(&config, &mut source, &mut regen, &control, &mut |_| {}).unwrap()
    });
    assert_eq!(summary.events, 1, "the garbage packet is skipped");
    assert_eq!(summary.event_passes, 1);
}

// --- The binary -----------------------------------------------------------

/// `cdigen watch --source none` over `tmp/root`, stderr to `tmp/log`.
fn spawn_watch(tmp: &Path, extra: &[&str], env: &[(&str, String)]) -> Child {
    let log = fs::File::create(tmp.join("log")).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cdigen"));
    cmd.current_dir(tmp)
        .args([
            "watch",
            "--root",
            "root",
            "--output-dir",
            "cdi",
            "--source",
            "none",
            "--ready-file",
            "ready",
        ])
        .args(extra)
        .env_remove("CDIGEN_ROOT")
        .env_remove("CDIGEN_TEMPLATES")
        .env_remove("RUST_LOG")
        .env_remove("JOURNAL_STREAM")
        .env_remove("NOTIFY_SOCKET")
        .env("CDIGEN_GENERATORS", "/nonexistent-cdigen-user-generators")
        .env("CDIGEN_DEVINFO_DIR", "devinfo")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{sig}"), &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{sig}");
}

/// Waits for the process to end, at most `limit`: its exit code.
fn wait_exit(child: &mut Child, limit: Duration) -> Option<i32> {
    let t = Instant::now();
    while t.elapsed() < limit {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    panic!("still running after {limit:?}");
}

fn log_of(tmp: &Path) -> String {
    fs::read_to_string(tmp.join("log")).unwrap()
}

#[test]
fn sighup_regenerates_and_sigterm_exits_0_promptly_removing_the_ready_file() {
    let (tmp, root) = machine("intel-laptop");
    let aside = hide_npu(&root);
    let mut child = spawn_watch(tmp.path(), &[], &[]);
    let ready = tmp.path().join("ready");
    eventually("ready file", || ready.exists());
    let npu = tmp.path().join("cdi/intel.com-npu.yaml");
    assert!(!npu.exists());

    fs::rename(&aside, root.join(NPU_LINK)).unwrap();
    signal(&child, "HUP");
    eventually("the NPU spec after SIGHUP", || npu.exists());

    let t = Instant::now();
    signal(&child, "TERM");
    let code = wait_exit(&mut child, Duration::from_secs(5));
    assert_eq!(code, Some(0), "{}", log_of(tmp.path()));
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "took {:?}",
        t.elapsed()
    );
    assert!(!ready.exists(), "ready file removed on exit");

    let log = log_of(tmp.path());
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(
        lines,
        [
            " INFO watching 11 generators (events: none; full re-check every 10m)",
            " INFO wrote cdi/intel.com-gpu.yaml: 2 devices (added intel.com/gpu=0, intel.com/gpu=all)",
            " INFO wrote cdi/intel.com-npu.yaml: 2 devices (added intel.com/npu=0, intel.com/npu=all)",
            " INFO stopping after 0 events, 2 regenerations (2 full), 2 files changed",
        ],
        "{log}"
    );
}

/// sysfs gone for a while (a remount, a chroot's before it is mounted):
/// the passes meanwhile fail and say why, every file stays; once it is
/// back, passes run again (and see what changed meanwhile).
#[test]
fn a_root_whose_sysfs_vanishes_keeps_every_file_until_it_is_back() {
    let (tmp, root) = machine("example");
    let mut child = spawn_watch(tmp.path(), &[], &[]);
    let ready = tmp.path().join("ready");
    eventually("ready file", || ready.exists());
    let cdi = tmp.path().join("cdi");
    let before = support::visible_names(&cdi);
    assert!(
        before.contains(&"amd.com-gpu.yaml".to_string()),
        "{before:?}"
    );
    assert!(!support::visible_names(&tmp.path().join("devinfo")).is_empty());
    let specs = stamps(tmp.path());

    let away = tmp.path().join("sys.away");
    fs::rename(root.join("sys"), &away).unwrap();
    signal(&child, "HUP");
    let said = "root does not look like a Linux host: sys/devices, sys/bus and sys/class are \
                missing: keeping the files and devices of the last pass (retrying in 1s)";
    eventually("the failed pass logged", || {
        log_of(tmp.path()).contains(said)
    });
    // The retry a second later fails the same way.
    eventually("the retry logged", || {
        log_of(tmp.path())
            .contains("keeping the files and devices of the last pass (retrying in 2s)")
    });
    assert_eq!(support::visible_names(&cdi), before);
    assert_eq!(stamps(tmp.path()), specs, "no file touched");

    // Back, without the AMD GPU: the next retry removes its spec.
    for n in ["card1", "renderD128"] {
        fs::remove_file(away.join("class/drm").join(n)).unwrap();
    }
    fs::rename(&away, root.join("sys")).unwrap();
    let amd = cdi.join("amd.com-gpu.yaml");
    eventually("the AMD spec removed by a pass once sysfs is back", || {
        !amd.exists()
    });
    assert_eq!(support::visible_names(&cdi).len(), before.len() - 1);
    signal(&child, "TERM");
    assert_eq!(
        wait_exit(&mut child, Duration::from_secs(5)),
        Some(0),
        "{}",
        log_of(tmp.path())
    );
}

#[test]
fn systemd_hears_ready_reloading_and_stopping_and_sigint_exits_0() {
    let (tmp, _root) = machine("empty");
    let notify_path = tmp.path().join("notify");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let recv = || {
        let mut buf = [0u8; 256];
        let n = notify.recv(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    let mut child = spawn_watch(
        tmp.path(),
        &[],
        &[("NOTIFY_SOCKET", notify_path.display().to_string())],
    );
    assert_eq!(recv(), "READY=1\n");
    assert!(tmp.path().join("ready").exists(), "ready file first");
    signal(&child, "HUP");
    let reloading = recv();
    assert!(
        reloading.starts_with("RELOADING=1\nMONOTONIC_USEC="),
        "{reloading}"
    );
    assert_eq!(recv(), "READY=1\n");
    signal(&child, "INT");
    assert_eq!(recv(), "STOPPING=1\n");
    assert_eq!(wait_exit(&mut child, Duration::from_secs(5)), Some(0));
}

/// A datagram socket standing in for systemd's notify socket.
struct Notify(UnixDatagram, PathBuf);

impl Notify {
    fn bind(tmp: &Path) -> Self {
        let path = tmp.join("notify");
        let socket = UnixDatagram::bind(&path).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Notify(socket, path)
    }

    fn env(&self) -> (&'static str, String) {
        ("NOTIFY_SOCKET", self.1.display().to_string())
    }

    fn recv(&self) -> String {
        let mut buf = [0u8; 4096];
        let n = self.0.recv(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }
}

/// A spec another tool wrote, defining `intel.com/gpu=0` as cdigen's
/// intel-gpu generator does.
const FOREIGN: &str = "cdiVersion: 0.5.0
kind: intel.com/gpu
devices:
- name: \"0\"
  containerEdits:
    deviceNodes:
    - path: /dev/dri/card1
";

#[test]
fn a_generator_failing_at_start_still_gives_readiness_with_a_status() {
    let (tmp, _root) = machine("intel-laptop");
    fs::create_dir(tmp.path().join("cdi")).unwrap();
    fs::write(tmp.path().join("cdi/other-tool.yaml"), FOREIGN).unwrap();
    let notify = Notify::bind(tmp.path());
    let mut child = spawn_watch(tmp.path(), &[], &[notify.env()]);
    let error = "not writing cdi/intel.com-gpu.yaml: intel.com/gpu=0 is already defined in \
cdi/other-tool.yaml, which cdigen did not write (runtimes would drop both definitions); remove \
cdi/other-tool.yaml (or move it out of the spec directories) if cdigen is to provide these devices; \
or, to keep that file, turn cdigen's generator \"intel-gpu\" off (`enabled: false` in a copy of its \
definition in /etc/cdigen/generators.d)";
    // The status line is cut short; the log has it whole.
    let status = &error[..error.find("keep that fi").unwrap() + "keep that fi".len()];
    assert_eq!(
        notify.recv(),
        format!("READY=1\nSTATUS=1 error: {status}...\n")
    );
    assert!(tmp.path().join("ready").exists(), "ready file first");
    assert!(
        !tmp.path().join("cdi/intel.com-gpu.yaml").exists(),
        "the conflicting spec is not written"
    );

    // The other tool's spec goes away: the next full pass writes the spec
    // and clears the status.
    fs::remove_file(tmp.path().join("cdi/other-tool.yaml")).unwrap();
    signal(&child, "HUP");
    assert!(notify.recv().starts_with("RELOADING=1\n"));
    assert_eq!(notify.recv(), "STATUS=\n");
    assert_eq!(notify.recv(), "READY=1\n");
    assert!(tmp.path().join("cdi/intel.com-gpu.yaml").exists());
    signal(&child, "TERM");
    assert_eq!(notify.recv(), "STOPPING=1\n");
    assert_eq!(wait_exit(&mut child, Duration::from_secs(5)), Some(0));
    let log = log_of(tmp.path());
    assert!(log.contains(&format!("ERROR {error}\n")), "{log}");
    assert!(
        log.contains(" INFO wrote cdi/intel.com-gpu.yaml: 2 devices"),
        "{log}"
    );
}

#[test]
fn an_output_directory_that_cannot_be_made_withholds_readiness_and_is_retried() {
    let (tmp, _root) = machine("intel-laptop");
    // A file where the output directory should be.
    fs::write(tmp.path().join("cdi"), "").unwrap();
    let notify = Notify::bind(tmp.path());
    let mut child = spawn_watch(tmp.path(), &[], &[notify.env()]);
    let status = notify.recv();
    assert!(
        status.starts_with("STATUS=regeneration failed, retrying in 1s: cannot write to cdi: "),
        "{status}"
    );
    assert!(!tmp.path().join("ready").exists(), "not ready");
    // The retry 1 s later fails again, and says so.
    let t = Instant::now();
    let status = notify.recv();
    assert!(
        status.starts_with("STATUS=regeneration failed, retrying in 2s: "),
        "{status}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "retried after 1 s, not 10 min"
    );
    // Fixed: the next retry makes it ready.
    fs::remove_file(tmp.path().join("cdi")).unwrap();
    assert_eq!(notify.recv(), "READY=1\nSTATUS=\n");
    assert!(tmp.path().join("ready").exists());
    signal(&child, "TERM");
    assert_eq!(notify.recv(), "STOPPING=1\n");
    assert_eq!(wait_exit(&mut child, Duration::from_secs(5)), Some(0));
}

#[test]
fn sigterm_ends_the_wait_for_a_lock_another_process_holds() {
    let (tmp, _root) = machine("intel-laptop");
    let held = cdigen::write::lock_dir(&tmp.path().join("cdi")).unwrap();
    let mut child = spawn_watch(tmp.path(), &[], &[]);
    // Warned after 1 s of waiting, naming the holder (this test, whose
    // PID the lock file holds).
    let warning = format!(
        " WARN waiting for the lock cdi/.cdigen.lock, held by PID {} (another cdigen run writing \
         cdi): waiting until it ends (--lock-timeout sets a limit)",
        std::process::id()
    );
    eventually("waiting for the lock", || {
        log_of(tmp.path()).contains(&warning)
    });
    let t = Instant::now();
    signal(&child, "TERM");
    let code = wait_exit(&mut child, Duration::from_secs(5));
    let took = t.elapsed();
    drop(held);
    assert_eq!(code, Some(0), "{}", log_of(tmp.path()));
    assert!(took < Duration::from_secs(1), "took {took:?}");
    assert!(!tmp.path().join("ready").exists(), "never ready");
    let log = log_of(tmp.path());
    assert!(!log.contains("ERROR"), "{log}");
    assert!(
        log.contains("stopped waiting to lock cdi/.cdigen.lock: asked to stop"),
        "{log}"
    );
}

#[test]
fn under_journald_each_line_carries_its_priority() {
    let (tmp, root) = machine("intel-laptop");
    let aside = hide_npu(&root);
    // systemd sets JOURNAL_STREAM to the device and inode of the stream
    // stderr is connected to: here the log file.
    fs::File::create(tmp.path().join("log")).unwrap();
    let m = fs::metadata(tmp.path().join("log")).unwrap();
    let stream = format!("{}:{}", m.dev(), m.ino());
    // A ready file of a killed earlier run is replaced.
    fs::write(tmp.path().join("ready"), "cdigen watch ready: pid 1\n").unwrap();
    let mut child = spawn_watch(
        tmp.path(),
        &["--generator", "intel-npu"],
        &[("JOURNAL_STREAM", stream)],
    );
    let ready = tmp.path().join("ready");
    eventually("ready file", || {
        fs::read_to_string(&ready).is_ok_and(|t| !t.contains("pid 1\n"))
    });
    fs::rename(&aside, root.join(NPU_LINK)).unwrap();
    signal(&child, "HUP");
    eventually("the NPU spec", || {
        tmp.path().join("cdi/intel.com-npu.yaml").exists()
    });
    signal(&child, "TERM");
    assert_eq!(wait_exit(&mut child, Duration::from_secs(5)), Some(0));
    let log = log_of(tmp.path());
    assert_eq!(
        log.lines().collect::<Vec<_>>(),
        [
            "<6>watching 1 generator (events: none; full re-check every 10m)",
            "<6>wrote cdi/intel.com-npu.yaml: 2 devices (added intel.com/npu=0, intel.com/npu=all)",
            "<6>stopping after 0 events, 2 regenerations (2 full), 1 file changed",
        ],
        "{log}"
    );
}

#[test]
fn bad_arguments_exit_2_with_the_reason() {
    let (tmp, _root) = machine("empty");
    let (code, _, err) =
        support::cdigen(tmp.path(), &["watch", "--root", "root", "--interval", "0s"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("invalid value '0s' for '--interval <DURATION>': must be at least 1s"),
        "{err}"
    );
    let (code, _, err) = support::cdigen(
        tmp.path(),
        &["watch", "--root", "root", "--debounce", "soon"],
    );
    assert_eq!(code, 2);
    assert!(err.contains("examples: 500ms, 5s, 10m"), "{err}");
    for arg in ["--debounce", "--max-delay"] {
        let (code, _, err) = support::cdigen(tmp.path(), &["watch", "--root", "root", arg, "0"]);
        assert_eq!(code, 2);
        assert!(
            err.contains(&format!(
                "invalid value '0' for '{arg} <DURATION>': must be at least 10ms"
            )),
            "{err}"
        );
    }
    let (code, _, err) = support::cdigen(
        tmp.path(),
        &["watch", "--root", "root", "--ready-file", "nowhere/ready"],
    );
    assert_eq!(code, 2);
    assert_eq!(
        err,
        "cdigen: --ready-file nowhere/ready: the directory nowhere does not exist\n"
    );
    let (code, _, err) = support::cdigen(
        tmp.path(),
        &["watch", "--root", "root", "--generator", "nope"],
    );
    assert_eq!(code, 2);
    assert!(
        err.starts_with("cdigen: unknown generator \"nope\""),
        "{err}"
    );
}

#[cfg(not(feature = "udev"))]
#[test]
fn source_udev_without_the_feature_says_what_to_rebuild_with() {
    let (tmp, _root) = machine("empty");
    let (code, _, err) =
        support::cdigen(tmp.path(), &["watch", "--root", "root", "--source", "udev"]);
    assert_eq!(code, 2);
    assert_eq!(
        err,
        "cdigen: this cdigen was built without udev support: rebuild with `cargo build --features udev` \
(needs libudev-dev and pkg-config), or use --source netlink (kernel uevents, no libudev)\n"
    );
}

#[test]
fn a_foreign_ready_file_is_refused() {
    let (tmp, _root) = machine("empty");
    fs::write(tmp.path().join("ready"), "mine\n").unwrap();
    let (code, _, err) = support::cdigen(
        tmp.path(),
        &[
            "watch",
            "--root",
            "root",
            "--source",
            "none",
            "--ready-file",
            "ready",
        ],
    );
    assert_eq!(code, 2);
    assert_eq!(
        err,
        "cdigen: refusing to use --ready-file ready: it exists and was not written by cdigen watch\n"
    );
    assert_eq!(
        fs::read_to_string(tmp.path().join("ready")).unwrap(),
        "mine\n"
    );
}

/// Real udev event delivery: umockdev's testbed stands in for udevd and
/// sends libudev-format `add` events, which the binary (built with the
/// `udev` feature, libudev preloaded with umockdev) receives through its
/// libudev monitor, filtered on the generators' subsystems (an `input`
/// event never reaches the watch), and regenerates. Needs `umockdev` and `python3-gi`
/// with `gir1.2-umockdev-1.0` (Debian), which CI installs to run it.
#[cfg(feature = "udev")]
#[test]
#[ignore = "needs umockdev-wrapper and /usr/bin/python3 with gi.repository.UMockdev"]
fn udev_events_from_umockdev_reach_the_watch() {
    let (tmp, root) = machine("intel-laptop");
    let aside = hide_npu(&root);
    let script = tmp.path().join("umockdev.py");
    fs::write(
        &script,
        r#"
import os, subprocess, sys, time
import gi
gi.require_version('UMockdev', '1.0')
from gi.repository import UMockdev
cdigen, link, aside = sys.argv[1:4]
tb = UMockdev.Testbed.new()
syspath = tb.add_device('accel', 'accel0', None, ['dev', '261:0'], ['DEVNAME', 'accel/accel0'])
other = tb.add_device('input', 'event9', None, ['dev', '13:73'], ['DEVNAME', 'input/event9'])
env = dict(os.environ, LD_PRELOAD='libumockdev-preload.so.0', UMOCKDEV_DIR=tb.get_root_dir(),
           RUST_LOG='cdigen::watch=trace', CDIGEN_GENERATORS='/nonexistent-cdigen-user-generators',
           CDIGEN_DEVINFO_DIR='devinfo')
with open('log', 'w') as log:
    p = subprocess.Popen([cdigen, 'watch', '--source', 'udev', '--root', 'root', '--output-dir', 'cdi',
                          '--debounce', '50ms', '--ready-file', 'ready'], env=env, stderr=log)
def wait_for(path):
    for _ in range(200):
        if os.path.exists(path):
            return True
        time.sleep(0.05)
    return False
ok = wait_for('ready')
os.rename(aside, link)
tb.uevent(other, 'add')
tb.uevent(syspath, 'add')
ok = ok and wait_for('cdi/intel.com-npu.yaml')
p.terminate()
sys.exit(0 if ok and p.wait() == 0 else 1)
"#,
    )
    .unwrap();
    let out = Command::new("umockdev-wrapper")
        .current_dir(tmp.path())
        .arg("/usr/bin/python3")
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_cdigen"))
        .arg(root.join(NPU_LINK))
        .arg(&aside)
        .output()
        .expect("umockdev-wrapper (Debian package umockdev)");
    let log = log_of(tmp.path());
    assert!(
        out.status.success(),
        "{}\n{log}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        log.contains(" INFO watching 11 generators (events: udev; "),
        "{log}"
    );
    assert!(
        log.contains(
            r#"TRACE Device(DeviceEvent { action: "add", subsystem: "accel", devpath: "/devices/accel0" })"#
        ),
        "{log}"
    );
    assert!(
        log.contains(" INFO wrote cdi/intel.com-npu.yaml: 2 devices (added intel.com/npu=0, intel.com/npu=all)"),
        "{log}"
    );
    assert!(
        !log.contains(r#"subsystem: "input""#),
        "filtered out by libudev: {log}"
    );
}

/// A broken user definition fails its generator only: watch starts, the
/// others' specs are written, and the log names the file and line.
#[test]
fn a_broken_definition_fails_its_generator_and_watch_serves_the_others() {
    let (tmp, _root) = machine("intel-laptop");
    let gens = tmp.path().join("gens");
    fs::create_dir(&gens).unwrap();
    fs::write(gens.join("intel-npu.yaml"), "name: intel-npu\nkind: [\n").unwrap();
    let mut child = spawn_watch(
        tmp.path(),
        &[],
        &[("CDIGEN_GENERATORS", gens.display().to_string())],
    );
    eventually("ready file", || tmp.path().join("ready").exists());
    assert!(tmp.path().join("cdi/intel.com-gpu.yaml").is_file());
    assert!(!tmp.path().join("cdi/intel.com-npu.yaml").exists());
    signal(&child, "TERM");
    assert_eq!(wait_exit(&mut child, Duration::from_secs(5)), Some(0));
    let log = log_of(tmp.path());
    assert!(
        log.contains(&format!(
            "generator \"intel-npu\" not run (its files are left as they are): {}/intel-npu.yaml: ",
            gens.display()
        )),
        "{log}"
    );
}

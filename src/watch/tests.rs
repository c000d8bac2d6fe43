//! The loop with a scripted event source and a recording regenerator.

use std::collections::BTreeSet;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread;

use super::*;

/// Events from a channel; waits in short steps so that the loop sees
/// `Control::stop` quickly even without the wake descriptor. Records the
/// subsystem filters it is given.
struct Scripted(Receiver<Event>, Arc<Mutex<Vec<Option<BTreeSet<String>>>>>);

impl EventSource for Scripted {
    fn name(&self) -> &'static str {
        "scripted"
    }
    fn next(&mut self, timeout: Duration, _: BorrowedFd<'_>) -> io::Result<Option<Event>> {
        match self.0.recv_timeout(timeout.min(Duration::from_millis(5))) {
            Ok(e) => Ok(Some(e)),
            Err(_) => Ok(None),
        }
    }
    fn filter_subsystems(&mut self, subsystems: Option<&BTreeSet<String>>) -> io::Result<()> {
        self.1.lock().unwrap().push(subsystems.cloned());
        Ok(())
    }
}

/// Fails on every read.
struct Broken(u32);

impl EventSource for Broken {
    fn name(&self) -> &'static str {
        "broken"
    }
    fn next(&mut self, _: Duration, _: BorrowedFd<'_>) -> io::Result<Option<Event>> {
        self.0 += 1;
        Err(io::Error::other("socket gone"))
    }
}

#[derive(Default)]
struct Log {
    scopes: Vec<Scope>,
    /// When each pass began.
    times: Vec<Instant>,
    reloads: u32,
}

/// Three generators: `gpu` on drm/pci, `vf` on pci/net (physical netdevs
/// only), `sockets` on none (`tty` too after a reload); the first
/// `fail_first` passes report an error, the first `err_first` fail as a
/// whole.
struct Recorder {
    log: Arc<Mutex<Log>>,
    fail_first: u32,
    err_first: u32,
    busy_until: Option<Instant>,
}

impl Recorder {
    fn new(log: &Arc<Mutex<Log>>) -> Self {
        Recorder {
            log: Arc::clone(log),
            fail_first: 0,
            err_first: 0,
            busy_until: None,
        }
    }
}

impl Regenerate for Recorder {
    fn watched(&self) -> Vec<Watched> {
        let sockets = if self.log.lock().unwrap().reloads == 0 {
            Vec::new()
        } else {
            vec!["tty".into()]
        };
        vec![
            Watched {
                name: "gpu".into(),
                subsystems: Some(vec!["drm".into(), "pci".into()]),
                physical_only: Vec::new(),
            },
            Watched {
                name: "vf".into(),
                subsystems: Some(vec!["pci".into(), "net".into()]),
                physical_only: vec!["net".into()],
            },
            Watched {
                name: "sockets".into(),
                subsystems: Some(sockets),
                physical_only: Vec::new(),
            },
        ]
    }
    fn reload(&mut self) -> anyhow::Result<()> {
        self.log.lock().unwrap().reloads += 1;
        Ok(())
    }
    fn regenerate(&mut self, scope: &Scope, _: &dyn Fn() -> bool) -> anyhow::Result<Pass> {
        let mut log = self.log.lock().unwrap();
        log.scopes.push(scope.clone());
        log.times.push(Instant::now());
        drop(log);
        if self.err_first > 0 {
            self.err_first -= 1;
            anyhow::bail!("cannot write to cdi: it is a file");
        }
        let mut pass = Pass::default();
        if self.fail_first > 0 {
            self.fail_first -= 1;
            pass.errors.push("gen.yaml: broken".into());
        }
        Ok(pass)
    }
    fn udev_busy(&self) -> bool {
        self.busy_until.is_some_and(|t| Instant::now() < t)
    }
}

fn dev(subsystem: &str) -> Event {
    Event::Device(DeviceEvent {
        action: "add".into(),
        subsystem: subsystem.into(),
        devpath: format!("/devices/pci0000:00/0000:00:01.0/{subsystem}/x"),
    })
}

fn only(names: &[&str]) -> Scope {
    Scope::Only(names.iter().map(|n| n.to_string()).collect())
}

fn config(debounce_ms: u64, max_ms: u64) -> Config {
    Config {
        debounce: Duration::from_millis(debounce_ms),
        max_delay: Duration::from_millis(max_ms),
        interval: Duration::from_secs(3600),
        first_retry: Duration::from_millis(200),
        ready_file: None,
    }
}

type Filters = Arc<Mutex<Vec<Option<BTreeSet<String>>>>>;

/// Runs the loop on a thread: (event sender, control, handle).
fn start(
    config: Config,
    regen: Recorder,
) -> (
    Sender<Event>,
    Arc<Control>,
    thread::JoinHandle<anyhow::Result<Summary>>,
) {
    let (tx, control, _, handle) = start_filtered(config, regen);
    (tx, control, handle)
}

/// [`start`], with the filters the source was given.
fn start_filtered(
    config: Config,
    mut regen: Recorder,
) -> (
    Sender<Event>,
    Arc<Control>,
    Filters,
    thread::JoinHandle<anyhow::Result<Summary>>,
) {
    let (tx, rx) = channel();
    let control = Arc::new(Control::new().unwrap());
    let filters = Filters::default();
    let (c, f) = (Arc::clone(&control), Arc::clone(&filters));
    let handle = thread::spawn(move || {
        let mut source = Scripted(rx, f);
        run(&config, &mut source, &mut regen, &c, &mut |_| {})
    });
    (tx, control, filters, handle)
}

/// Waits until `f` holds, for at most 10 s.
fn eventually(what: &str, f: impl Fn() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(10), "timed out: {what}");
        thread::sleep(Duration::from_millis(5));
    }
}

/// Waits until the start pass is done and a quiet period of `ms` has
/// passed: the next event is a leading edge.
fn quiet_after_start(log: &Arc<Mutex<Log>>, ms: u64) {
    eventually("start pass", || log.lock().unwrap().scopes.len() == 1);
    thread::sleep(Duration::from_millis(ms + 20));
}

#[test]
fn a_burst_of_5000_events_is_one_pass_at_once_and_one_after_it() {
    let log = Arc::new(Mutex::new(Log::default()));
    let (tx, control, handle) = start(config(200, 5000), Recorder::new(&log));
    quiet_after_start(&log, 200);
    for i in 0..5000 {
        tx.send(dev(if i % 2 == 0 { "drm" } else { "tty" }))
            .unwrap();
    }
    eventually("event passes", || log.lock().unwrap().scopes.len() >= 3);
    // Nothing more comes of the burst.
    thread::sleep(Duration::from_millis(500));
    control.stop();
    let summary = handle.join().unwrap().unwrap();
    let log = log.lock().unwrap();
    assert_eq!(log.scopes.first(), Some(&Scope::All));
    // The first event at once, the rest after the quiet period; one more
    // if the machine stalled the loop for a quiet period.
    assert!((2..=3).contains(&summary.event_passes), "{summary:?}");
    assert!(log.scopes.iter().skip(1).all(|s| *s == only(&["gpu"])));
    assert_eq!(summary.events, 5000);
    assert_eq!(summary.full_passes, 1);
}

#[test]
fn events_of_other_subsystems_regenerate_nothing() {
    let log = Arc::new(Mutex::new(Log::default()));
    let (tx, control, handle) = start(config(20, 100), Recorder::new(&log));
    for s in ["tty", "block", "input"] {
        tx.send(dev(s)).unwrap();
    }
    thread::sleep(Duration::from_millis(200));
    control.stop();
    let summary = handle.join().unwrap().unwrap();
    assert_eq!(summary.events, 3);
    assert_eq!(log.lock().unwrap().scopes, [Scope::All]);
}

#[test]
fn the_union_of_affected_generators_is_regenerated_and_lost_events_mean_all() {
    let log = Arc::new(Mutex::new(Log::default()));
    let (tx, control, handle) = start(config(200, 1000), Recorder::new(&log));
    quiet_after_start(&log, 200);
    // The first at once; the two that follow it together.
    tx.send(dev("drm")).unwrap();
    tx.send(dev("net")).unwrap();
    tx.send(dev("drm")).unwrap();
    eventually("two passes", || log.lock().unwrap().scopes.len() == 3);
    tx.send(dev("net")).unwrap();
    tx.send(Event::Lost).unwrap();
    eventually("third pass", || log.lock().unwrap().scopes.len() == 4);
    control.stop();
    handle.join().unwrap().unwrap();
    assert_eq!(
        log.lock().unwrap().scopes,
        [Scope::All, only(&["gpu"]), only(&["gpu", "vf"]), Scope::All]
    );
}

#[test]
fn reload_rereads_definitions_and_regenerates_everything() {
    let log = Arc::new(Mutex::new(Log::default()));
    let (_tx, control, handle) = start(config(50, 1000), Recorder::new(&log));
    eventually("start pass", || log.lock().unwrap().scopes.len() == 1);
    control.reload();
    eventually("reload pass", || log.lock().unwrap().scopes.len() == 2);
    control.stop();
    handle.join().unwrap().unwrap();
    let log = log.lock().unwrap();
    assert_eq!(log.reloads, 1);
    assert_eq!(log.scopes, [Scope::All, Scope::All]);
}

#[test]
fn the_timer_regenerates_everything_without_events() {
    let log = Arc::new(Mutex::new(Log::default()));
    let mut c = config(50, 1000);
    c.interval = Duration::from_millis(30);
    let (_tx, control, handle) = start(c, Recorder::new(&log));
    eventually("three passes", || log.lock().unwrap().scopes.len() >= 3);
    control.stop();
    let summary = handle.join().unwrap().unwrap();
    assert!(summary.full_passes >= 3);
    assert_eq!(summary.event_passes, 0);
}

#[test]
fn a_busy_udev_gets_a_pass_at_once_then_another_once_idle_but_not_past_the_max_delay() {
    let log = Arc::new(Mutex::new(Log::default()));
    let mut regen = Recorder::new(&log);
    // Busy for far longer than the max delay.
    regen.busy_until = Some(Instant::now() + Duration::from_secs(3600));
    let (tx, control, handle) = start(config(20, 400), regen);
    quiet_after_start(&log, 20);
    let sent = Instant::now();
    tx.send(dev("pci")).unwrap();
    eventually("the pass at once", || log.lock().unwrap().scopes.len() == 2);
    let at_once = sent.elapsed();
    eventually("the pass once udev is idle", || {
        log.lock().unwrap().scopes.len() == 3
    });
    thread::sleep(Duration::from_millis(100));
    control.stop();
    handle.join().unwrap().unwrap();
    let log = log.lock().unwrap();
    let waited = log.times[2] - log.times[1];
    assert!(
        at_once < Duration::from_millis(390),
        "the first pass came after {at_once:?}"
    );
    assert!(
        waited >= Duration::from_millis(390),
        "made again after {waited:?} although udev was busy"
    );
    assert_eq!(
        log.scopes[1..],
        [only(&["gpu", "vf"]), only(&["gpu", "vf"])]
    );
}

#[test]
fn with_udev_idle_and_not_running_one_event_is_one_pass() {
    let log = Arc::new(Mutex::new(Log::default()));
    let (tx, control, handle) = start(config(20, 400), Recorder::new(&log));
    quiet_after_start(&log, 20);
    tx.send(dev("drm")).unwrap();
    eventually("the pass", || log.lock().unwrap().scopes.len() == 2);
    thread::sleep(Duration::from_millis(200));
    control.stop();
    let summary = handle.join().unwrap().unwrap();
    assert_eq!(summary.event_passes, 1);
}

#[test]
fn a_broken_source_falls_back_to_the_timer_without_spinning() {
    let log = Arc::new(Mutex::new(Log::default()));
    let control = Control::new().unwrap();
    let mut regen = Recorder::new(&log);
    let mut source = Broken(0);
    let mut c = config(10, 10);
    c.interval = Duration::from_millis(40);
    thread::scope(|s| {
        s.spawn(|| {
            eventually("passes", || log.lock().unwrap().scopes.len() >= 3);
            control.stop();
        });
        run(&c, &mut source, &mut regen, &control, &mut |_| {}).unwrap();
    });
    assert_eq!(source.0, 1, "the broken source is read once");
    // After the failure everything is regenerated (events may be lost).
    assert_eq!(log.lock().unwrap().scopes.get(1), Some(&Scope::All));
}

#[test]
fn ready_after_the_first_full_pass_even_when_some_generators_failed() {
    let tmp = tempfile::tempdir().unwrap();
    let ready = tmp.path().join("ready");
    let log = Arc::new(Mutex::new(Log::default()));
    let mut regen = Recorder::new(&log);
    regen.fail_first = 1;
    let mut c = config(20, 100);
    c.ready_file = Some(ready.clone());
    let (_tx, control, handle) = start(c, regen);
    eventually("ready", || ready.exists());
    assert_eq!(
        log.lock().unwrap().scopes,
        [Scope::All],
        "after the start pass"
    );
    let text = std::fs::read_to_string(&ready).unwrap();
    assert_eq!(
        text,
        format!("cdigen watch ready: pid {}\n", std::process::id())
    );
    control.stop();
    handle.join().unwrap().unwrap();
    assert!(!ready.exists(), "removed on exit");
}

#[test]
fn a_pass_failing_as_a_whole_withholds_readiness_and_is_retried_with_backoff() {
    let tmp = tempfile::tempdir().unwrap();
    let ready = tmp.path().join("ready");
    let log = Arc::new(Mutex::new(Log::default()));
    let mut regen = Recorder::new(&log);
    regen.err_first = 3;
    let mut c = config(20, 100);
    c.ready_file = Some(ready.clone());
    c.first_retry = Duration::from_millis(100);
    let started = Instant::now();
    let (tx, control, handle) = start(c, regen);
    eventually("start pass", || log.lock().unwrap().scopes.len() == 1);
    // An event pass (which fails too) is no full pass: still not ready.
    tx.send(dev("drm")).unwrap();
    eventually("event pass", || log.lock().unwrap().scopes.len() == 2);
    assert!(!ready.exists());
    // Retries at +100 ms (after the start pass), then +200 ms (after the
    // event pass, the second failure in a row) succeeds.
    eventually("ready", || ready.exists());
    let waited = started.elapsed();
    control.stop();
    let summary = handle.join().unwrap().unwrap();
    let log = log.lock().unwrap();
    assert_eq!(
        log.scopes,
        [Scope::All, only(&["gpu"]), Scope::All, Scope::All],
        "start, event, two retries"
    );
    assert_eq!(summary.full_passes, 3);
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(3),
        "ready after {waited:?}: retried sooner than the interval, with backoff"
    );
}

#[test]
fn the_backoff_doubles_up_to_the_interval() {
    let log = Arc::new(Mutex::new(Log::default()));
    let mut regen = Recorder::new(&log);
    regen.err_first = u32::MAX;
    let mut c = config(20, 100);
    c.first_retry = Duration::from_millis(50);
    c.interval = Duration::from_millis(150);
    let (_tx, control, handle) = start(c, regen);
    eventually("six passes", || log.lock().unwrap().scopes.len() >= 6);
    control.stop();
    handle.join().unwrap().unwrap();
    let log = log.lock().unwrap();
    assert!(log.scopes.iter().all(|s| *s == Scope::All));
    let gaps: Vec<Duration> = log.times.windows(2).map(|w| w[1] - w[0]).collect();
    // Waits of 50, 100, 150, 150, 150 ms (unbounded doubling would wait
    // 200, 400, 800 ms for the last three).
    let ms = Duration::from_millis;
    assert!(
        gaps[0] >= ms(50) && gaps[1] >= ms(100) && gaps[2] >= ms(150),
        "{gaps:?}"
    );
    assert!(gaps[4] >= ms(150) && gaps[4] < ms(600), "{gaps:?}");
}

#[test]
fn a_ready_file_replaced_after_start_is_left_on_exit() {
    let tmp = tempfile::tempdir().unwrap();
    let ready = tmp.path().join("ready");
    let log = Arc::new(Mutex::new(Log::default()));
    let mut c = config(20, 100);
    c.ready_file = Some(ready.clone());
    let (_tx, control, handle) = start(c, Recorder::new(&log));
    eventually("ready", || ready.exists());
    std::fs::write(&ready, "cdigen watch ready: pid 1\n").unwrap();
    control.stop();
    handle.join().unwrap().unwrap();
    assert_eq!(
        std::fs::read_to_string(&ready).unwrap(),
        "cdigen watch ready: pid 1\n",
        "another run's file is kept"
    );
}

#[test]
fn a_ready_file_in_a_missing_or_non_directory_is_refused_at_start() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("file"), "").unwrap();
    for (path, why) in [
        (
            tmp.path().join("missing/ready"),
            "the directory {dir} does not exist",
        ),
        (tmp.path().join("file/ready"), "{dir} is not a directory"),
    ] {
        let log = Arc::new(Mutex::new(Log::default()));
        let mut c = config(20, 100);
        c.ready_file = Some(path.clone());
        let (_tx, _control, handle) = start(c, Recorder::new(&log));
        let err = handle.join().unwrap().unwrap_err();
        let dir = path.parent().unwrap().display().to_string();
        assert_eq!(
            err.to_string(),
            format!(
                "--ready-file {}: {}",
                path.display(),
                why.replace("{dir}", &dir)
            )
        );
        assert!(log.lock().unwrap().scopes.is_empty(), "nothing ran");
    }
}

#[test]
fn a_foreign_file_at_the_ready_path_is_refused_and_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let ready = tmp.path().join("ready");
    std::fs::write(&ready, "precious\n").unwrap();
    let log = Arc::new(Mutex::new(Log::default()));
    let mut c = config(20, 100);
    c.ready_file = Some(ready.clone());
    let (_tx, _control, handle) = start(c, Recorder::new(&log));
    let err = handle.join().unwrap().unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "refusing to use --ready-file {}: it exists and was not written by cdigen watch",
            ready.display()
        )
    );
    assert_eq!(std::fs::read_to_string(&ready).unwrap(), "precious\n");
    assert!(log.lock().unwrap().scopes.is_empty(), "nothing ran");
}

#[test]
fn a_stale_ready_file_is_removed_at_start() {
    let tmp = tempfile::tempdir().unwrap();
    let ready = tmp.path().join("ready");
    std::fs::write(&ready, "cdigen watch ready: pid 1\n").unwrap();
    let log = Arc::new(Mutex::new(Log::default()));
    let mut regen = Recorder::new(&log);
    regen.err_first = 1;
    let mut c = config(20, 100);
    c.ready_file = Some(ready.clone());
    c.first_retry = Duration::from_secs(3600);
    let (_tx, control, handle) = start(c, regen);
    eventually("start pass", || log.lock().unwrap().scopes.len() == 1);
    assert!(!ready.exists(), "not ready yet: the old file is gone");
    control.stop();
    handle.join().unwrap().unwrap();
}

#[test]
fn change_lines_name_the_file_the_count_and_the_names() {
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let c = FileChange {
        path: "/var/run/cdi/amd.com-gpu.yaml".into(),
        action: Action::Updated,
        devices: Some(2),
        added: names(&["amd.com/gpu=1"]),
        removed: Vec::new(),
    };
    assert_eq!(
        c.to_string(),
        "updated /var/run/cdi/amd.com-gpu.yaml: 2 devices (added amd.com/gpu=1)"
    );
    let c = FileChange {
        path: "/run/cdi/x.yaml".into(),
        action: Action::Removed,
        devices: Some(0),
        added: Vec::new(),
        removed: names(&["a/b=0", "a/b=all"]),
    };
    assert_eq!(
        c.to_string(),
        "removed /run/cdi/x.yaml (removed a/b=0, a/b=all)"
    );
    let many: Vec<String> = (0..100).map(|i| format!("v/f={i}")).collect();
    let c = FileChange {
        path: "v.yaml".into(),
        action: Action::Created,
        devices: Some(1),
        added: many,
        removed: Vec::new(),
    };
    assert_eq!(
        c.to_string(),
        "wrote v.yaml: 1 device (added v/f=0, v/f=1, v/f=2, v/f=3, v/f=4, v/f=5, v/f=6, v/f=7 and 92 more)"
    );
    let c = FileChange {
        path: "/dp/x-device.json".into(),
        action: Action::Created,
        devices: None,
        added: Vec::new(),
        removed: Vec::new(),
    };
    assert_eq!(c.to_string(), "wrote /dp/x-device.json");
}

#[test]
fn affected_maps_subsystems_to_generators() {
    let w = vec![
        Watched {
            name: "a".into(),
            subsystems: Some(vec!["drm".into()]),
            physical_only: Vec::new(),
        },
        Watched {
            name: "any".into(),
            subsystems: None,
            physical_only: Vec::new(),
        },
    ];
    assert_eq!(affected(&w, &dev("drm")), Some(only(&["a", "any"])));
    assert_eq!(affected(&w, &dev("tty")), Some(only(&["any"])));
    assert_eq!(affected(&w[..1], &dev("tty")), None);
    assert_eq!(affected(&w[..1], &Event::Lost), Some(Scope::All));
    assert_eq!(all_subsystems(&w), None);
    assert_eq!(
        all_subsystems(&w[..1]),
        Some(["drm".to_string()].into_iter().collect())
    );
}

#[test]
fn parentless_devices_affect_no_generator_of_hardware_only() {
    let log = Arc::new(Mutex::new(Log::default()));
    let w = Recorder::new(&log).watched();
    let ev = |subsystem: &str, devpath: &str| {
        Event::Device(DeviceEvent {
            action: "add".into(),
            subsystem: subsystem.into(),
            devpath: devpath.into(),
        })
    };
    // A container's veth, a bridge: `vf` reads only netdevs with a parent.
    assert_eq!(
        affected(&w, &ev("net", "/devices/virtual/net/veth1a2b3c")),
        None
    );
    assert_eq!(affected(&w, &ev("net", "/devices/virtual/net/cni0")), None);
    // A VF's netdev.
    let vf = "/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.2/net/ens1f0v0";
    assert_eq!(affected(&w, &ev("net", vf)), Some(only(&["vf"])));
    // A VDUSE device's virtio netdev is under /devices/virtual, with a
    // parent: it counts.
    let vduse = "/devices/virtual/vduse/d0/vdpa0/virtio0/net/eth0";
    assert_eq!(affected(&w, &ev("net", vduse)), Some(only(&["vf"])));
    // Only whole path components: `network` is not `net`.
    let other = "/devices/virtual/network/x";
    assert_eq!(affected(&w, &ev("net", other)), Some(only(&["vf"])));
    // A parentless device of a subsystem a generator takes whole.
    let card = "/devices/virtual/drm/card9";
    assert_eq!(affected(&w, &ev("drm", card)), Some(only(&["gpu"])));
}

#[test]
fn the_sriov_and_vdpa_generators_take_only_netdevs_with_a_parent() {
    let all = crate::generator::load(&[]).unwrap();
    let of = |name: &str| {
        let g = all.iter().find(|l| l.generator.name == name).unwrap();
        physical_only_of(g)
    };
    assert_eq!(of("sriov"), ["net", "infiniband"]);
    assert_eq!(of("vdpa"), ["net"]);
    assert!(of("amd-gpu").is_empty());
    assert!(
        of("generic-tty").is_empty(),
        "a generic match may be any device"
    );
}

#[test]
fn a_reload_refilters_the_source_when_the_subsystems_change() {
    let log = Arc::new(Mutex::new(Log::default()));
    let (tx, control, filters, handle) = start_filtered(config(20, 100), Recorder::new(&log));
    eventually("start pass", || log.lock().unwrap().scopes.len() == 1);
    control.reload();
    eventually("first reload", || log.lock().unwrap().scopes.len() == 2);
    control.reload();
    eventually("second reload", || log.lock().unwrap().scopes.len() == 3);
    // `sockets` now listens to tty.
    tx.send(dev("tty")).unwrap();
    eventually("tty pass", || log.lock().unwrap().scopes.len() == 4);
    control.stop();
    handle.join().unwrap().unwrap();
    let want: BTreeSet<String> = ["drm", "net", "pci", "tty"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(
        *filters.lock().unwrap(),
        [Some(want)],
        "once: the second reload changed nothing"
    );
    assert_eq!(log.lock().unwrap().scopes[3], only(&["sockets"]));
}

#[test]
fn waiting_for_a_held_lock_ends_when_asked_to_stop_and_succeeds_once_free() {
    let tmp = tempfile::tempdir().unwrap();
    let held = crate::write::lock_dir(tmp.path()).unwrap();
    let asked = std::cell::Cell::new(0);
    let t = Instant::now();
    let err = crate::write::lock_dir_until(tmp.path(), &|| {
        asked.set(asked.get() + 1);
        asked.get() >= 3
    })
    .unwrap_err();
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_millis(200) && waited < Duration::from_secs(5),
        "two retries of 100 ms, then stopped: {waited:?}"
    );
    let lock = tmp.path().join(crate::write::LOCK_FILE);
    assert_eq!(
        format!("{:#}", anyhow::Error::from(err)),
        format!("stopped waiting to lock {}: asked to stop", lock.display())
    );
    thread::scope(|s| {
        s.spawn(|| {
            thread::sleep(Duration::from_millis(150));
            drop(held);
        });
        crate::write::lock_dir_until(tmp.path(), &|| false).unwrap();
    });
}

/// A generic generator listens to the subsystem its `match` scans, and a
/// `join` adds its own subsystem to any generator's.
#[test]
fn generic_generators_listen_to_their_match_and_joins_add_theirs() {
    let all = crate::generator::load(&[]).unwrap();
    let of = |name: &str| {
        let g = all.iter().find(|l| l.generator.name == name).unwrap();
        subsystems_of(g).unwrap()
    };
    assert_eq!(of("generic-tty"), ["tty"]);
    assert_eq!(of("usb-serial"), ["tty"]);
    assert_eq!(of("accel"), ["accel"]);
    // The DRM backend's own list already has kfd: no duplicate.
    assert_eq!(
        of("amd-gpu"),
        ["drm", "accel", "kfd", "mei", "pci", "platform"]
    );
    let mut g = all
        .iter()
        .find(|l| l.generator.name == "intel-gpu")
        .unwrap()
        .clone();
    let amd = all.iter().find(|l| l.generator.name == "amd-gpu").unwrap();
    g.generator.join = amd.generator.join.clone();
    g.generator.join[0].source.subsystem = "misc".into();
    assert_eq!(
        subsystems_of(&g).unwrap(),
        ["drm", "accel", "kfd", "mei", "pci", "platform", "misc"]
    );
}

/// Instants after any duration never overflow: capped at the longest
/// interval (the CLI refuses more; `--interval 18446744073709551615s`
/// panicked here).
#[test]
fn instants_after_a_duration_are_capped() {
    let now = Instant::now();
    assert_eq!(after(now, Duration::MAX), now + MAX_INTERVAL);
    assert_eq!(
        after(now, Duration::from_secs(u64::MAX)),
        now + MAX_INTERVAL
    );
    assert_eq!(
        after(now, Duration::from_secs(5)),
        now + Duration::from_secs(5)
    );
}

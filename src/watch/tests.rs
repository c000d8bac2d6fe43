//! The loop with a scripted event source and a recording regenerator.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread;

use super::*;

/// Events from a channel; waits in short steps so that the loop sees
/// `Control::stop` quickly even without the wake descriptor.
struct Scripted(Receiver<Event>);

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
    reloads: u32,
}

/// Two generators: `gpu` on drm/pci, `vf` on pci/net; `fail_first` full
/// passes report an error.
struct Recorder {
    log: Arc<Mutex<Log>>,
    fail_first: u32,
    busy_until: Option<Instant>,
}

impl Recorder {
    fn new(log: &Arc<Mutex<Log>>) -> Self {
        Recorder {
            log: Arc::clone(log),
            fail_first: 0,
            busy_until: None,
        }
    }
}

impl Regenerate for Recorder {
    fn watched(&self) -> Vec<Watched> {
        vec![
            Watched {
                name: "gpu".into(),
                subsystems: Some(vec!["drm".into(), "pci".into()]),
            },
            Watched {
                name: "vf".into(),
                subsystems: Some(vec!["pci".into(), "net".into()]),
            },
            Watched {
                name: "sockets".into(),
                subsystems: Some(Vec::new()),
            },
        ]
    }
    fn reload(&mut self) -> anyhow::Result<()> {
        self.log.lock().unwrap().reloads += 1;
        Ok(())
    }
    fn regenerate(&mut self, scope: &Scope) -> anyhow::Result<Pass> {
        self.log.lock().unwrap().scopes.push(scope.clone());
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
        devpath: format!("/devices/virtual/{subsystem}/x"),
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
        ready_file: None,
    }
}

/// Runs the loop on a thread: (event sender, control, handle).
fn start(
    config: Config,
    mut regen: Recorder,
) -> (
    Sender<Event>,
    Arc<Control>,
    thread::JoinHandle<anyhow::Result<Summary>>,
) {
    let (tx, rx) = channel();
    let control = Arc::new(Control::new().unwrap());
    let c = Arc::clone(&control);
    let handle = thread::spawn(move || {
        let mut source = Scripted(rx);
        run(&config, &mut source, &mut regen, &c, &mut |_| {})
    });
    (tx, control, handle)
}

/// Waits until `f` holds, for at most 10 s.
fn eventually(what: &str, f: impl Fn() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(10), "timed out: {what}");
        thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_burst_of_5000_events_is_one_regeneration_of_the_affected_generators() {
    let log = Arc::new(Mutex::new(Log::default()));
    let (tx, control, handle) = start(config(200, 5000), Recorder::new(&log));
    eventually("start pass", || log.lock().unwrap().scopes.len() == 1);
    for i in 0..5000 {
        tx.send(dev(if i % 2 == 0 { "drm" } else { "tty" }))
            .unwrap();
    }
    eventually("event pass", || log.lock().unwrap().scopes.len() >= 2);
    // Nothing more comes of the burst.
    thread::sleep(Duration::from_millis(500));
    control.stop();
    let summary = handle.join().unwrap().unwrap();
    let log = log.lock().unwrap();
    assert_eq!(log.scopes.first(), Some(&Scope::All));
    // One pass, two if the machine stalled the loop for a quiet period.
    assert!((1..=2).contains(&summary.event_passes), "{summary:?}");
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
    let (tx, control, handle) = start(config(50, 1000), Recorder::new(&log));
    eventually("start pass", || log.lock().unwrap().scopes.len() == 1);
    tx.send(dev("drm")).unwrap();
    tx.send(dev("net")).unwrap();
    eventually("first pass", || log.lock().unwrap().scopes.len() == 2);
    tx.send(dev("net")).unwrap();
    tx.send(Event::Lost).unwrap();
    eventually("second pass", || log.lock().unwrap().scopes.len() == 3);
    control.stop();
    handle.join().unwrap().unwrap();
    assert_eq!(
        log.lock().unwrap().scopes,
        [Scope::All, only(&["gpu", "vf"]), Scope::All]
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
fn waits_while_udev_is_busy_but_not_past_the_max_delay() {
    let log = Arc::new(Mutex::new(Log::default()));
    let mut regen = Recorder::new(&log);
    // Busy for far longer than the max delay.
    regen.busy_until = Some(Instant::now() + Duration::from_secs(3600));
    let (tx, control, handle) = start(config(20, 400), regen);
    eventually("start pass", || log.lock().unwrap().scopes.len() == 1);
    let sent = Instant::now();
    tx.send(dev("pci")).unwrap();
    eventually("event pass", || log.lock().unwrap().scopes.len() == 2);
    let waited = sent.elapsed();
    control.stop();
    handle.join().unwrap().unwrap();
    assert!(
        waited >= Duration::from_millis(390),
        "regenerated after {waited:?} although udev was busy"
    );
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
fn ready_file_after_the_first_successful_full_pass_and_removed_on_exit() {
    let tmp = tempfile::tempdir().unwrap();
    let ready = tmp.path().join("ready");
    let log = Arc::new(Mutex::new(Log::default()));
    let mut regen = Recorder::new(&log);
    regen.fail_first = 1;
    let mut c = config(20, 100);
    c.ready_file = Some(ready.clone());
    let (tx, control, handle) = start(c, regen);
    eventually("start pass", || log.lock().unwrap().scopes.len() == 1);
    assert!(!ready.exists(), "the start pass failed: not ready");
    // An event pass succeeding is not enough: it covers some generators.
    tx.send(dev("drm")).unwrap();
    eventually("event pass", || log.lock().unwrap().scopes.len() == 2);
    assert!(!ready.exists());
    control.reload();
    eventually("ready", || ready.exists());
    let text = std::fs::read_to_string(&ready).unwrap();
    assert!(text.starts_with("cdigen watch ready: pid "), "{text}");
    control.stop();
    handle.join().unwrap().unwrap();
    assert!(!ready.exists(), "removed on exit");
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
    regen.fail_first = 1;
    let mut c = config(20, 100);
    c.ready_file = Some(ready.clone());
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
        },
        Watched {
            name: "any".into(),
            subsystems: None,
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
    assert_eq!(of("amd-gpu"), ["drm", "accel", "kfd", "pci", "platform"]);
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
        ["drm", "accel", "kfd", "pci", "platform", "misc"]
    );
}

//! Benchmark: `cdigen dra-driver` publishing 1000 SR-IOV VFs (8 Mellanox
//! PFs x 125 VFs, tests/support/synth.rs; 1008 devices, 8 ResourceSlices)
//! to the fake API server of tests/support/apiserver.rs. Each figure is a
//! median over repetitions, printed with a baseline measured in the same
//! run and their ratio:
//!
//! 1. Slice update latency after hotplug: a VF hidden from (then restored
//!    to) the tree, SIGHUP (a reload and a full pass), until the fake API
//!    server has recorded the last slice write saying so; against
//!    `cdigen watch` through the same changes with the same trigger (until
//!    its spec on disk says so: the same pipeline without the API side),
//!    and a one-shot `cdigen generate`. The driver and `watch` run side by
//!    side and each change is timed on both, one after the other (the
//!    driver first on even changes, `watch` first on odd ones): the ratio
//!    is the median of the pairs' ratios, so that a machine whose speed
//!    drifts moves both figures of a pair alike (as in `ratios`). Also the
//!    driver's own figure, from its log: the pass's start to the slices
//!    written.
//! 2. The driver's memory (VmHWM, VmRSS from /proc/<pid>/status) after its
//!    first publication and after the changes, against `cdigen watch` on
//!    the same machine at the same points, and where each is resident
//!    then (`/proc/<pid>/smaps`: heap, anonymous mappings, the binary,
//!    libraries).
//!
//! Run with `cargo bench --bench dra_api` (under a minute);
//! `DRA_API_KEEP_LOG=FILE` keeps the driver's log there.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[path = "../tests/support/apiserver.rs"]
mod apiserver;
#[allow(dead_code)] // the other machines
#[path = "../tests/support/synth.rs"]
mod synth;

#[path = "support/procs.rs"]
mod procs;

use procs::{Proc, WAIT, cdigen, median, memory, memory_parts_line, mib, row, spec_shows};

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::thread;
use std::time::{Duration, Instant};

use apiserver::FakeApi;
use serde_json::Value;

const PFS: usize = 8;
const VFS_PER_PF: usize = 125;
const VFS: usize = PFS * VFS_PER_PF;
const NODE: &str = "bench-node";
/// Hide + restore cycles (two changes each).
const CHANGE_CYCLES: usize = 10;
/// One-shot `cdigen generate` runs.
const GENERATE_RUNS: usize = 5;

/// Spawns `cdigen <args>` over `dir/root` (`--source none`, ready file
/// `ready_file`), logging to `log`, and waits until ready.
fn spawn_ready(dir: &Path, args: &[&str], ready_file: &str, log: &Path, kubeconfig: &Path) -> Proc {
    let mut p = Proc(
        cdigen(dir)
            .args(args)
            .args([
                "--root",
                "root",
                "--source",
                "none",
                "--ready-file",
                ready_file,
            ])
            .env("KUBECONFIG", kubeconfig)
            .env(
                "RUST_LOG",
                "info,cdigen::dra=debug,cdigen::deviceplugin::passes=debug",
            )
            .stderr(fs::File::create(log).unwrap())
            .spawn()
            .unwrap(),
    );
    let end = Instant::now() + WAIT;
    while !dir.join(ready_file).exists() {
        if let Some(s) = p.0.try_wait().unwrap() {
            panic!("exited with {s}: {}", fs::read_to_string(log).unwrap());
        }
        assert!(Instant::now() < end, "timed out waiting for {ready_file}");
        thread::sleep(Duration::from_millis(10));
    }
    p
}

/// The first VF of the machine, in the pool's first slice (its devices
/// are in address order), so that one gone would move every later
/// device a place up if devices did not keep their slices: its
/// `bus/pci/devices` link (removed to hide it), the link's target, its
/// address.
fn first_vf(root: &Path) -> (PathBuf, PathBuf, String) {
    let mut vfs = synth::vf_links(root);
    assert_eq!(vfs.len(), VFS);
    let link = vfs.remove(0);
    let target = fs::read_link(&link).unwrap();
    let address = link.file_name().unwrap().to_str().unwrap().to_string();
    (link, target, address)
}

/// Every device name the fake server's slices hold.
fn published_devices(api: &FakeApi) -> Vec<String> {
    api.slices()
        .values()
        .flat_map(|s| s["spec"]["devices"].as_array().cloned().unwrap_or_default())
        .filter_map(|d| d["name"].as_str().map(str::to_string))
        .collect()
}

/// Hides and restores the VF [`CHANGE_CYCLES`] times; after each change,
/// SIGHUP to each of `to` in turn (the first of them first on even
/// changes, last on odd ones), its `seen(present, since)` waiting until
/// the change shows there and saying when it did. For each of `to`, the
/// times to hidden and to restored, in the order of the changes.
#[allow(clippy::type_complexity)]
fn cycle(
    vf: &(PathBuf, PathBuf, String),
    to: &[(&Proc, &dyn Fn(bool, Instant) -> Instant)],
) -> Vec<(Vec<Duration>, Vec<Duration>)> {
    let (link, target, _) = vf;
    let mut out = vec![(vec![], vec![]); to.len()];
    for n in 0..CHANGE_CYCLES * 2 {
        let present = n % 2 == 1;
        if present {
            std::os::unix::fs::symlink(target, link).unwrap();
        } else {
            fs::remove_file(link).unwrap();
        }
        let mut order: Vec<usize> = (0..to.len()).collect();
        if (n / 2) % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let (p, seen) = to[i];
            thread::sleep(Duration::from_millis(50));
            let t = Instant::now();
            p.signal("HUP");
            let d = seen(present, t) - t;
            let (gone, back) = &mut out[i];
            if present { back } else { gone }.push(d);
        }
    }
    out
}

/// The median of the ratios `a[i] / b[i]`.
fn median_ratio(a: &[Duration], b: &[Duration]) -> f64 {
    let mut r: Vec<f64> = a
        .iter()
        .zip(b)
        .map(|(a, b)| a.as_secs_f64() / b.as_secs_f64())
        .collect();
    r.sort_by(f64::total_cmp);
    r.get(r.len() / 2).copied().unwrap_or_default()
}

/// A row of paired figures: the medians of `a` and `b` and the median of
/// their pairs' ratios.
fn pair_row(what: &str, a: &[Duration], b: &[Duration], b_name: &str) {
    println!(
        "  {what:<38} {:>11} {:>11} {:>8.2}x  ({b_name})",
        format!("{:.2?}", median(a.to_vec())),
        format!("{:.2?}", median(b.to_vec())),
        median_ratio(a, b)
    );
}

/// The numbers `<n> ms` after `key` in the driver's debug lines.
fn logged_after(log: &str, key: &str) -> Vec<Duration> {
    log.lines()
        .filter_map(|l| l.split_once(key))
        .filter_map(|(_, rest)| rest.trim_start().split(' ').next()?.parse::<u64>().ok())
        .map(Duration::from_millis)
        .collect()
}

/// The "<n> ms after the pass" figures of the driver's log.
fn logged_latencies(log: &str) -> Vec<Duration> {
    log.lines()
        .filter_map(|l| l.strip_suffix(" ms after the pass"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .map(Duration::from_millis)
        .collect()
}

fn main() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let root = dir.join("root");
    synth::sriov_nics(&root, PFS, VFS_PER_PF, 0);
    let vf = first_vf(&root);
    let vf_name = cdigen::dra::names::label(&format!("sriov-{}", vf.2));
    let api = FakeApi::start_on(NODE);
    let kubeconfig = api.kubeconfig(dir);

    let t_start = Instant::now();
    let log = dir.join("driver.log");
    let driver = spawn_ready(
        dir,
        &[
            "dra-driver",
            "--node",
            NODE,
            "--output-dir",
            "cdi",
            "--devinfo-dir",
            "devinfo",
            "--plugin-dir",
            "plugins",
            "--registry-dir",
            "registry",
        ],
        "ready",
        &log,
        &kubeconfig,
    );
    // Whole: the VF hidden is in the first slice, every PF and VF in all.
    let end = Instant::now() + WAIT;
    while {
        let published = published_devices(&api);
        !published.contains(&vf_name) || published.len() < PFS + VFS
    } {
        assert!(Instant::now() < end, "the first publication never came");
        thread::sleep(Duration::from_millis(5));
    }
    let startup = t_start.elapsed();
    let slices = api.slices().len();
    let devices = published_devices(&api).len();
    // Settled (the first publication's writes all done).
    thread::sleep(Duration::from_millis(200));
    let mut mem = vec![("driver, first publication", memory(driver.pid()))];
    let driver_parts_first = memory_parts_line(driver.pid());

    // `cdigen watch` beside it, through the same changes.
    let watch = spawn_ready(
        dir,
        &[
            "watch",
            "--output-dir",
            "w-cdi",
            "--devinfo-dir",
            "w-devinfo",
        ],
        "w-ready",
        &dir.join("watch.log"),
        &kubeconfig,
    );
    thread::sleep(Duration::from_millis(200));
    let watch_first = memory(watch.pid());
    let watch_parts_first = memory_parts_line(watch.pid());
    let spec = dir.join("w-cdi/cdigen.io-vf.yaml");

    // 1. Hotplug -> slices written on the server, and the spec by watch.
    // The slices are looked at only when the server has taken a write
    // (copying them holds the lock the server answers under), and the
    // time is the server's of the last slice write.
    let slice_seen = |present: bool, since: Instant| {
        let end = Instant::now() + WAIT;
        let mut seen = None;
        loop {
            let n = api.write_count();
            if seen != Some(n) {
                seen = Some(n);
                if published_devices(&api).contains(&vf_name) == present {
                    return api
                        .write_times()
                        .into_iter()
                        .filter(|(r, at)| r == "resourceslices" && *at >= since)
                        .map(|(_, at)| at)
                        .max()
                        .unwrap_or_else(Instant::now);
                }
            }
            assert!(Instant::now() < end, "the change never showed");
            thread::sleep(Duration::from_millis(1));
        }
    };
    let spec_seen = |present: bool, _: Instant| spec_shows(&spec, &vf.2, present);
    let mut timed = cycle(&vf, &[(&driver, &slice_seen), (&watch, &spec_seen)]);
    let (w_gone, w_back) = timed.pop().unwrap();
    let (gone, back) = timed.pop().unwrap();
    mem.push(("driver, after the changes", memory(driver.pid())));
    let driver_parts = memory_parts_line(driver.pid());
    let watch_after = memory(watch.pid());
    let watch_parts = memory_parts_line(watch.pid());
    watch.signal("TERM");
    drop(watch);
    let text = fs::read_to_string(&log).unwrap();
    if let Some(keep) = std::env::var_os("DRA_API_KEEP_LOG") {
        fs::write(&keep, &text).unwrap();
        println!("  the driver's log kept at {}", Path::new(&keep).display());
    }
    let logged = logged_latencies(&text);
    // Where the time goes (the driver's debug lines): the pass, then the
    // inventory, devices and slices, then the list before the writes.
    let parts = [
        (
            "the pass and its inventory",
            logged_after(&text, "DEBUG pass and its inventory"),
        ),
        (
            "the pass alone",
            logged_after(&text, "the pass before it took"),
        ),
        (
            "its inventory (health signals)",
            logged_after(&text, "inventory built in"),
        ),
        (
            "inventory + devices + slices",
            logged_after(&text, "slices in"),
        ),
        ("list before writing", logged_after(&text, "list took")),
    ];
    driver.signal("TERM");
    let mut driver = driver;
    let _ = driver.0.wait();
    let left: Vec<Value> = api.slices().into_values().collect();
    assert!(left.is_empty(), "slices left after SIGTERM: {}", left.len());

    // Baseline: one-shot generate.
    let mut generate = vec![];
    for i in 0..GENERATE_RUNS {
        let out = dir.join(format!("generate-{i}"));
        let t = Instant::now();
        let s = cdigen(dir)
            .args(["generate", "--root", "root"])
            .arg("--output-dir")
            .arg(out.join("cdi"))
            .arg("--devinfo-dir")
            .arg(out.join("devinfo"))
            .stderr(Stdio::null())
            .status()
            .unwrap();
        generate.push(t.elapsed());
        assert!(s.success());
    }

    println!(
        "cdigen dra-driver, {PFS} PFs x {VFS_PER_PF} VFs: {devices} devices in {slices} ResourceSlices \
(published {startup:.2?} after start)"
    );
    println!(
        "  {:<38} {:>11} {:>11} {:>9}",
        "median of", "time", "baseline", "ratio"
    );
    let generate = median(generate);
    println!(
        "1. hotplug -> slices written on the API server, {CHANGE_CYCLES} changes each; trigger: SIGHUP (reload + full pass);\n   \
         ratio: the median of each change's driver / watch"
    );
    pair_row(
        "VF hidden, slice written",
        &gone,
        &w_gone,
        "watch: spec written",
    );
    pair_row(
        "VF restored, slice written",
        &back,
        &w_back,
        "watch: spec written",
    );
    let all: Vec<Duration> = gone.into_iter().chain(back).collect();
    row(
        "either, slice written",
        median(all),
        generate,
        "one-shot cdigen generate",
    );
    if !logged.is_empty() {
        row(
            "driver's log: pass start -> written",
            median(logged.clone()),
            generate,
            "one-shot cdigen generate",
        );
        println!("  ({} figures from the driver's log)", logged.len());
    }

    println!("  where the driver's time goes (its debug log, medians over every pass):");
    for (what, v) in parts {
        if !v.is_empty() {
            println!("    {what:<36} {:>11}", format!("{:.2?}", median(v)));
        }
    }

    println!("2. memory, against cdigen watch on the same machine at the same point");
    println!(
        "  {:<38} {:>11} {:>11} {:>9} {:>11} {:>11} {:>9}",
        "", "VmHWM", "watch", "ratio", "VmRSS", "watch", "ratio"
    );
    for (i, (what, (hwm, rss))) in mem.iter().enumerate() {
        let (w_hwm, w_rss) = if i == 0 { watch_first } else { watch_after };
        println!(
            "  {what:<38} {:>11} {:>11} {:>8.2}x {:>11} {:>11} {:>8.2}x",
            mib(*hwm),
            mib(w_hwm),
            *hwm as f64 / w_hwm as f64,
            mib(*rss),
            mib(w_rss),
            *rss as f64 / w_rss as f64
        );
    }
    println!("  where it is resident (/proc/PID/smaps, Rss by mapping):");
    println!("    driver, first publication: {driver_parts_first}");
    println!("    watch, the same point:     {watch_parts_first}");
    println!("    driver, after the changes: {driver_parts}");
    println!("    watch, the same point:     {watch_parts}");
}

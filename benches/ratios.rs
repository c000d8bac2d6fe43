//! Benchmark: the figures of issue 14 (performance) as ratios, all
//! measured in one run, so that they can be reproduced anywhere.
//!
//! Run with `cargo bench --bench ratios` (about two minutes on 2 cores).
//! `RATIOS_PAIRS=N` sets the pairs per ratio (default 9, at least 7),
//! `RATIOS_DIR=DIR` where the machines are built (default cargo's
//! `target/tmp`; keep it on a disk, not tmpfs), and `RATIOS_KEEP=1`
//! leaves them there afterwards. It builds, under cargo's `target/tmp`, the issue's
//! machine with tests/support/synth.rs (`Mix::ISSUE_14`: 8 Mellanox PFs x
//! 128 VFs, 64 vDPA devices, 64 AMD GPUs with `/dev/kfd`, 16 A100s x 7
//! MIG instances with the driver root of the `dgx-8gpu` fixture, 64 NVMe
//! drives on vfio-pci: 1345 devices) and one of half its size, each with
//! the PCI ID database `lspci` reads (`/usr/share/misc/pci.ids` of this
//! machine when there is one, else the fixtures' excerpt) and the hook
//! program NVIDIA specs name (`/usr/bin/cdigen-hook`), as a host has.
//! `cdigen` is the binary cargo builds for this benchmark (the bench
//! profile, optimized: `CARGO_BIN_EXE_cdigen`), run as a whole process
//! with `--root` on the machine, `--no-nvml`, and user definitions and
//! templates pointed at directories that do not exist; stdout goes to
//! `/dev/null`.
//!
//! A ratio is the median, over paired runs A then B (A B A B ..., after
//! one warm-up of each), of time(A) / time(B); the medians of A and B are
//! printed beside it. Shared machines are noisy: the ratios are the
//! figures, the times only say where they come from.
//!
//! - **baseline**: a compiled minimal reader, this benchmark's own binary
//!   run again as a process (`__ratios-read LIST`) that reads exactly the
//!   files and symlinks one discovery read (the manifest `dev.manifest`
//!   included): `std::fs::read` of each file, `readlink` of each link, no
//!   parsing. The set is recorded in this process through the root
//!   abstraction (`HostRoot::recording`, `take_record`) during one
//!   discovery as `generate` runs it (every enabled generator). Directory
//!   listings are not in it (the record does not tell a listed directory
//!   from one only passed through).
//! - **generate (unchanged) / baseline**: `cdigen generate` into output
//!   directories that already hold its files (`--output-dir`,
//!   `--devinfo-dir`, `--spec-dir` the output directory, as on a host
//!   where `/var/run/cdi` is one of the runtimes' directories).
//! - **check / baseline**: `cdigen check` of those files (current: exit 0).
//! - **discover / baseline** and **list --discovered / baseline**.
//! - **discover / lspci**: `lspci -vmm -A linux-sysfs -O
//!   sysfs.path=ROOT/sys/bus/pci -i ROOT/usr/share/misc/pci.ids` (pciutils'
//!   `sysfs.path` is the bus directory, not `/sys`) on the same tree, when
//!   `lspci` is installed; the output says when it is not.
//! - **first write / minimal crash-safe write**: in this process, the
//!   write stage alone on plans made once: `generate::apply_all` (what
//!   `generate` runs) into empty directories, against writing the same
//!   spec and device-info files (`.cdigen-state` and `.cdigen.lock`, the
//!   writer's own bookkeeping, left out) the minimal safe way: per file a
//!   temporary file, its content, `fsync`, `rename`; then one `fsync` per
//!   directory. On a disk, not tmpfs, so the `fsync`s cost what they cost.
//! - **scaling**: generate (unchanged) on the issue's machine / on the
//!   half machine: time(2N) / time(N).
//! - **peak RSS** of generate (unchanged): the process's `VmHWM`, sampled
//!   from `/proc/PID/status` every 0.5 ms until it exits (the high-water
//!   mark: a sample after the peak reads the peak; no `getrusage` without
//!   unsafe code), the largest of 3 runs; per device, and the marginal
//!   cost per device of a machine with the NICs alone (VFs and vDPA
//!   devices) and with the NVIDIA GPUs alone (GPUs and MIG devices) over
//!   an empty root.
//! - **bytes written** by every unchanged generate of the first figure:
//!   the sizes of the files in the output directories whose inode, size,
//!   mtime or ctime changed, plus files created or removed. Must be 0.
//!   The writer's lock file (`.cdigen.lock`) is left out: every run
//!   writes its PID there, for a waiter to name the holder, and no
//!   runtime reads it (the CDI caches reload on `.json`/`.yaml` files).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[allow(dead_code)] // the builders the mixed machine does not call directly
#[path = "../tests/support/synth.rs"]
mod synth;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs::{self, File};
use std::io::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cdigen::generate::{apply_all, plan_all};
use cdigen::generator::{self, Loaded};
use cdigen::render::Templates;
use cdigen::root::HostRoot;
use cdigen::write::{LOCK_FILE, STATE_FILE};
use synth::Mix;

/// The argument that makes this binary the minimal reader.
const READ: &str = "__ratios-read";
/// Pairs per ratio unless `RATIOS_PAIRS` says otherwise.
const PAIRS: usize = 9;
/// Runs whose peak RSS is taken (the largest counts).
const RSS_RUNS: usize = 3;
const CDIGEN: &str = env!("CARGO_BIN_EXE_cdigen");

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(READ) {
        minimal_read(Path::new(&args[2]));
        return;
    }
    bench();
}

/// The minimal reader: every file of the list read whole, every link
/// read; records are `f<path>` or `l<path>`, NUL-terminated.
fn minimal_read(list: &Path) {
    let list = fs::read(list).expect("list");
    let mut bytes = 0usize;
    for rec in list.split(|b| *b == 0).filter(|r| !r.is_empty()) {
        let (kind, path) = rec.split_at(1);
        let path = Path::new(OsStr::from_bytes(path));
        bytes += match kind {
            b"f" => fs::read(path).expect("file").len(),
            b"l" => fs::read_link(path).expect("link").as_os_str().len(),
            _ => panic!("bad record"),
        };
    }
    std::hint::black_box(bytes);
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Paired runs: `pairs` times A then B, after one warm-up of each.
/// Returns (median A, median B, median of the per-pair ratios A / B).
fn paired(
    pairs: usize,
    mut a: impl FnMut() -> Duration,
    mut b: impl FnMut() -> Duration,
) -> (Duration, Duration, f64) {
    a();
    b();
    let (mut ta, mut tb, mut r) = (vec![], vec![], vec![]);
    for _ in 0..pairs {
        let x = a().as_secs_f64();
        let y = b().as_secs_f64();
        ta.push(x);
        tb.push(y);
        r.push(x / y);
    }
    (
        Duration::from_secs_f64(median(ta)),
        Duration::from_secs_f64(median(tb)),
        median(r),
    )
}

/// Times one whole process; it must exit 0 (its stderr is shown if not).
fn timed(mut cmd: Command) -> Duration {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let t = Instant::now();
    let out = cmd.output().expect("spawn");
    let elapsed = t.elapsed();
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    elapsed
}

/// One machine of the benchmark, built and generated once.
struct Machine {
    label: &'static str,
    root: PathBuf,
    cdi: PathBuf,
    devinfo: PathBuf,
    /// What the minimal reader reads (see [`minimal_read`]).
    reads: PathBuf,
    /// Devices discovery finds, and per backend.
    devices: usize,
    backends: BTreeMap<String, usize>,
    /// Files and links in `reads`.
    files: usize,
    links: usize,
    /// Directories that do not exist, for user definitions and templates.
    none: PathBuf,
}

impl Machine {
    /// Builds the machine `build` writes, records what discovery reads and
    /// generates its files once.
    fn new(work: &Path, label: &'static str, build: impl FnOnce(&Path)) -> Machine {
        let dir = work.join(label);
        let root = dir.join("root");
        // What every Linux host has: `generate` refuses a root without it.
        for d in ["sys/class", "sys/devices", "sys/bus"] {
            fs::create_dir_all(root.join(d)).unwrap();
        }
        build(&root);
        pci_ids(&root);
        hook_program(&root);
        let (backends, files, links) = record(&root, &dir.join("reads"));
        let m = Machine {
            label,
            cdi: dir.join("cdi"),
            devinfo: dir.join("devinfo"),
            reads: dir.join("reads"),
            none: dir.join("none"),
            root,
            devices: backends.values().sum(),
            backends,
            files,
            links,
        };
        timed(m.cdigen("generate"));
        m
    }

    /// `cdigen <command>` on this machine, with its output directories
    /// for the commands that take them.
    fn cdigen(&self, command: &str) -> Command {
        let mut c = Command::new(CDIGEN);
        c.env_clear()
            .env("CDIGEN_NO_NVML", "1")
            .env("CDIGEN_GENERATORS", &self.none)
            .env("CDIGEN_TEMPLATES", &self.none)
            .args(command.split(' '))
            .arg("--root")
            .arg(&self.root);
        if command == "generate" || command == "check" {
            c.arg("--output-dir")
                .arg(&self.cdi)
                .arg("--devinfo-dir")
                .arg(&self.devinfo)
                .arg("--spec-dir")
                .arg(&self.cdi);
        }
        c
    }

    /// The minimal reader of what discovery read here.
    fn baseline(&self) -> Command {
        let mut c = Command::new(std::env::current_exe().unwrap());
        c.env_clear().arg(READ).arg(&self.reads);
        c
    }
}

/// Puts the PCI ID database `lspci` reads under `root` (the fixtures'
/// excerpt where this machine has none).
fn pci_ids(root: &Path) {
    let host = Path::new("/usr/share/misc/pci.ids");
    let src = if host.is_file() {
        host.to_path_buf()
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/example/root/usr/share/misc/pci.ids")
    };
    let dst = root.join("usr/share/misc/pci.ids");
    fs::create_dir_all(dst.parent().unwrap()).unwrap();
    fs::copy(src, dst).unwrap();
}

/// The hook program NVIDIA specs name, where the package installs it, as
/// on a host: without it `check` finds the specs' hooks missing (exit 1).
/// Never run here; only its presence is checked.
fn hook_program(root: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let hook = root.join("usr/bin/cdigen-hook");
    fs::create_dir_all(hook.parent().unwrap()).unwrap();
    fs::write(&hook, "#!/bin/sh\nexit 1\n").unwrap();
    fs::set_permissions(&hook, fs::Permissions::from_mode(0o755)).unwrap();
}

/// The built-in generators `generate` runs.
fn enabled() -> Vec<Loaded> {
    generator::load(&[])
        .unwrap()
        .into_iter()
        .filter(|l| l.generator.enabled)
        .collect()
}

/// Opens `root` as `generate` does here (driver root detected, NVML off).
fn open(root: &Path) -> HostRoot {
    HostRoot::open(root)
        .unwrap()
        .with_driver_root_or_detect(None)
        .with_nvml(false)
}

/// Runs one discovery as `generate` does on a recording root and writes
/// the files and links it read to `list`, as disk paths. Returns the
/// devices found per backend and the numbers of files and links.
fn record(root: &Path, list: &Path) -> (BTreeMap<String, usize>, usize, usize) {
    let host = HostRoot::open(root)
        .unwrap()
        .recording()
        .with_driver_root_or_detect(None)
        .with_nvml(false);
    let gens = enabled();
    let found = cdigen::discover::discover_for(
        &host,
        &[],
        &cdigen::generator::scan(gens.iter().map(|l| &l.generator)),
    )
    .unwrap();
    assert!(found.warnings.is_empty(), "{:?}", found.warnings);
    let record = host.take_record();
    let mut out = Vec::new();
    let mut put = |kind: u8, path: &Path| {
        out.push(kind);
        out.extend_from_slice(path.as_os_str().as_bytes());
        out.push(0);
    };
    // Read when the root was opened, before the recording.
    let manifest = root.join(cdigen::root::DEV_MANIFEST);
    if manifest.exists() {
        put(b'f', &manifest);
    }
    // Host paths (absolute) under the root on disk.
    let disk = |p: &Path| root.join(p.strip_prefix("/").unwrap_or(p));
    for p in record.files.keys() {
        put(b'f', &disk(p));
    }
    for p in record.links.keys() {
        put(b'l', &disk(p));
    }
    fs::write(list, out).unwrap();
    let mut backends = BTreeMap::new();
    for d in &found.devices {
        *backends.entry(d.backend.clone()).or_default() += 1;
    }
    (
        backends,
        record.files.len() + usize::from(manifest.exists()),
        record.links.len(),
    )
}

/// What the output directories hold: per file, (inode, size, mtime,
/// ctime).
fn state(dirs: &[&Path]) -> BTreeMap<PathBuf, (u64, u64, i128, i128)> {
    let mut out = BTreeMap::new();
    for dir in dirs {
        for e in fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            // The lock holds its holder's PID, written by every run so a
            // waiter can name it; runtimes read `.json`/`.yaml` only.
            if e.file_name() == cdigen::write::LOCK_FILE {
                continue;
            }
            let m = e.metadata().unwrap();
            let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
            out.insert(
                e.path(),
                (
                    m.ino(),
                    m.size(),
                    ns(m.mtime(), m.mtime_nsec()),
                    ns(m.ctime(), m.ctime_nsec()),
                ),
            );
        }
    }
    out
}

/// Bytes and files an unchanged run changed, from the states before and
/// after it.
fn written(
    before: &BTreeMap<PathBuf, (u64, u64, i128, i128)>,
    after: &BTreeMap<PathBuf, (u64, u64, i128, i128)>,
) -> (u64, usize) {
    let mut bytes = 0;
    let mut files = 0;
    for (p, now) in after {
        if before.get(p) != Some(now) {
            bytes += now.1;
            files += 1;
        }
    }
    files += before.keys().filter(|p| !after.contains_key(*p)).count();
    (bytes, files)
}

/// The largest `VmHWM` (KiB) of `RSS_RUNS` runs of `cmd`.
fn peak_rss_kib(mut make: impl FnMut() -> Command) -> u64 {
    let mut peak = 0;
    for _ in 0..RSS_RUNS {
        let mut child = make()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let status = format!("/proc/{}/status", child.id());
        let mut hwm = 0;
        loop {
            if let Ok(text) = fs::read_to_string(&status)
                && text.lines().next() == Some("Name:\tcdigen")
                && let Some(kib) = text
                    .lines()
                    .find_map(|l| l.strip_prefix("VmHWM:"))
                    .and_then(|v| v.trim().trim_end_matches(" kB").parse::<u64>().ok())
            {
                hwm = hwm.max(kib);
            }
            if let Some(st) = child.try_wait().unwrap() {
                assert!(st.success(), "{st}");
                break;
            }
            std::thread::sleep(Duration::from_micros(500));
        }
        assert!(hwm > 0, "no VmHWM sample");
        peak = peak.max(hwm);
    }
    peak
}

/// Writes `files` (path, bytes) the minimal crash-safe way: per file a
/// new temporary file beside it, the bytes, fsync, rename; then one fsync
/// of each directory.
fn minimal_write(files: &[(PathBuf, Vec<u8>)]) {
    let mut dirs: Vec<&Path> = Vec::new();
    for (path, bytes) in files {
        let dir = path.parent().unwrap();
        if !dirs.contains(&dir) {
            fs::create_dir_all(dir).unwrap();
            dirs.push(dir);
        }
        let mut tmp_name = OsStr::new(".").to_os_string();
        tmp_name.push(path.file_name().unwrap());
        tmp_name.push(".tmp");
        let tmp = dir.join(tmp_name);
        let mut f = File::create_new(&tmp).unwrap();
        f.write_all(bytes).unwrap();
        f.sync_all().unwrap();
        fs::rename(&tmp, path).unwrap();
    }
    for dir in dirs {
        File::open(dir).unwrap().sync_all().unwrap();
    }
}

/// The files of `dirs` but the writer's own, with their bytes, as paths
/// under `to` (`to/0/...`, `to/1/...`).
fn files_of(dirs: &[&Path], to: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for (i, dir) in dirs.iter().enumerate() {
        let mut names: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n != STATE_FILE && n != LOCK_FILE)
            .collect();
        names.sort();
        for n in names {
            let bytes = fs::read(dir.join(&n)).unwrap();
            out.push((to.join(i.to_string()).join(n), bytes));
        }
    }
    out
}

fn row(figure: &str, (a, b, ratio): (Duration, Duration, f64), target: &str) {
    println!(
        "{figure:<44} {ratio:>7.2}  {:>10} {:>10}  {target}",
        format!("{:.1} ms", a.as_secs_f64() * 1e3),
        format!("{:.1} ms", b.as_secs_f64() * 1e3),
    );
}

fn bench() {
    let pairs = std::env::var("RATIOS_PAIRS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(PAIRS)
        .max(7);
    let base = std::env::var_os("RATIOS_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")), PathBuf::from);
    fs::create_dir_all(&base).unwrap();
    let dir = tempfile::Builder::new()
        .prefix("ratios-")
        .tempdir_in(&base)
        .unwrap();
    // RATIOS_KEEP: leave the machines and outputs for a look afterwards.
    let (_removed_at_exit, work) = if std::env::var_os("RATIOS_KEEP").is_some() {
        let kept = dir.keep();
        println!("keeping {}", kept.display());
        (None, kept)
    } else {
        let path = dir.path().to_path_buf();
        (Some(dir), path)
    };
    let work = work.as_path();

    let t = Instant::now();
    let big = Machine::new(work, "issue-14", |r| synth::mixed(r, Mix::ISSUE_14));
    let half = Machine::new(work, "half", |r| synth::mixed(r, Mix::ISSUE_14.half()));
    println!(
        "machines built and generated in {:.1?}; {pairs} pairs per ratio; cdigen {CDIGEN}",
        t.elapsed()
    );
    for m in [&big, &half] {
        let by_backend: Vec<String> = m.backends.iter().map(|(b, n)| format!("{b} {n}")).collect();
        println!(
            "  {:<9} {} devices ({}); discovery reads {} files and {} links",
            m.label,
            m.devices,
            by_backend.join(", "),
            m.files,
            m.links
        );
    }
    println!(
        "\n{:<44} {:>7}  {:>10} {:>10}  target (issue 14)",
        "figure (issue-14 machine)", "ratio", "A", "B"
    );

    // Unchanged generate, with what each run wrote.
    let dirs = [big.cdi.as_path(), big.devinfo.as_path()];
    let (mut bytes, mut changed) = (0, 0);
    let gen_ratio = paired(
        pairs,
        || {
            let before = state(&dirs);
            let d = timed(big.cdigen("generate"));
            let (b, f) = written(&before, &state(&dirs));
            bytes += b;
            changed += f;
            d
        },
        || timed(big.baseline()),
    );
    row("generate (unchanged) / baseline", gen_ratio, "<= 2");
    for (command, target) in [
        ("check", "<= 2"),
        ("discover", ""),
        ("list --discovered", ""),
    ] {
        row(
            &format!("{command} / baseline"),
            paired(
                pairs,
                || timed(big.cdigen(command)),
                || timed(big.baseline()),
            ),
            target,
        );
    }
    let lspci = || {
        let mut c = Command::new("lspci");
        c.env_clear()
            .arg("-vmm")
            .args(["-A", "linux-sysfs", "-O"])
            .arg(format!(
                "sysfs.path={}",
                big.root.join("sys/bus/pci").display()
            ))
            .arg("-i")
            .arg(big.root.join("usr/share/misc/pci.ids"));
        c
    };
    let lspci_note = match lspci().output() {
        Ok(out) if out.status.success() => {
            row(
                "discover / lspci -vmm",
                paired(pairs, || timed(big.cdigen("discover")), || timed(lspci())),
                "< 1",
            );
            let text = String::from_utf8_lossy(&out.stdout);
            let warnings = String::from_utf8_lossy(&out.stderr).lines().count();
            format!(
                "lspci listed {} PCI functions ({warnings} lines on stderr), names from the \
                 root's pci.ids, as cdigen's",
                text.matches("\nSlot:").count() + usize::from(text.starts_with("Slot:"))
            )
        }
        Ok(out) => panic!("lspci failed: {}", String::from_utf8_lossy(&out.stderr)),
        Err(e) => {
            println!("{:<44} {:>7}", "discover / lspci -vmm", "-");
            format!("lspci: {e}: install pciutils for this figure")
        }
    };

    // The write stage, in this process, on plans made once.
    let gens = enabled();
    let templates = Templates::load(None).unwrap();
    let host = open(&big.root);
    let found = cdigen::discover::discover_for(
        &host,
        &[],
        &cdigen::generator::scan(gens.iter().map(|l| &l.generator)),
    )
    .unwrap();
    let plans = plan_all(&gens, &templates, &found, None);
    assert!(plans.failed.is_empty());
    let writes = work.join("writes");
    let mut n = 0;
    let mut fresh = || {
        n += 1;
        let d = writes.join(n.to_string());
        (d.join("cdi"), d.join("devinfo"))
    };
    let (cdi, devinfo) = fresh();
    let applied = apply_all(
        &cdi,
        &devinfo,
        std::slice::from_ref(&cdi),
        &gens,
        &plans.planned,
    )
    .unwrap();
    assert!(applied.errors.is_empty());
    let files = files_of(&[&cdi, &devinfo], &writes.join("template"));
    let total: usize = files.iter().map(|(_, b)| b.len()).sum();
    let mut m = 0;
    let write_ratio = paired(
        pairs,
        || {
            let (cdi, devinfo) = fresh();
            let t = Instant::now();
            let applied = apply_all(
                &cdi,
                &devinfo,
                std::slice::from_ref(&cdi),
                &gens,
                &plans.planned,
            )
            .unwrap();
            let d = t.elapsed();
            assert!(applied.errors.is_empty());
            d
        },
        || {
            m += 1;
            let to = writes.join(format!("minimal-{m}"));
            let mine: Vec<_> = files
                .iter()
                .map(|(p, b)| {
                    (
                        to.join(p.strip_prefix(writes.join("template")).unwrap()),
                        b.clone(),
                    )
                })
                .collect();
            let t = Instant::now();
            minimal_write(&mine);
            t.elapsed()
        },
    );
    row(
        &format!("first write / minimal write ({} files)", files.len()),
        write_ratio,
        "<= 1.3",
    );
    row(
        "scaling: generate 2N / N",
        paired(
            pairs,
            || timed(big.cdigen("generate")),
            || timed(half.cdigen("generate")),
        ),
        "<= 2.2",
    );
    println!(
        "\nunchanged generate wrote {bytes} bytes ({changed} files changed; the lock's PID left out) over {} runs (target: 0)",
        pairs + 1
    );
    println!(
        "generate (unchanged): {:.0} us per device; first write: {} files, {} KiB",
        gen_ratio.0.as_secs_f64() * 1e6 / big.devices as f64,
        files.len(),
        total / 1024
    );
    println!("{lspci_note}");

    // Memory.
    let nics = Machine::new(work, "nics", |r| {
        synth::sriov_nics(
            r,
            Mix::ISSUE_14.pfs,
            Mix::ISSUE_14.vfs_per_pf,
            Mix::ISSUE_14.vdpa,
        );
    });
    let nvidia = Machine::new(work, "nvidia", |r| {
        synth::nvidia_gpus(r, Mix::ISSUE_14.nvidia, Mix::ISSUE_14.migs);
    });
    let empty = Machine::new(work, "empty", |_| {});
    let rss = |m: &Machine| peak_rss_kib(|| m.cdigen("generate"));
    let (r_big, r_nics, r_nv, r_empty) = (rss(&big), rss(&nics), rss(&nvidia), rss(&empty));
    let per = |r: u64, m: &Machine| (r.saturating_sub(r_empty)) as f64 / m.devices as f64;
    println!(
        "\npeak RSS of generate (unchanged): {:.1} MiB on the issue-14 machine (target <= 16 MiB), \
         {:.1} KiB per device; {:.1} MiB on an empty root",
        r_big as f64 / 1024.0,
        r_big as f64 / big.devices as f64,
        r_empty as f64 / 1024.0
    );
    println!(
        "  over the empty root: {:.1} KiB per device ({} devices); NICs alone {:.1} MiB, \
         {:.1} KiB per VF or vDPA device ({}); NVIDIA alone {:.1} MiB, {:.1} KiB per GPU or \
         MIG device ({})",
        per(r_big, &big),
        big.devices,
        r_nics as f64 / 1024.0,
        per(r_nics, &nics),
        nics.devices,
        r_nv as f64 / 1024.0,
        per(r_nv, &nvidia),
        nvidia.devices
    );
}

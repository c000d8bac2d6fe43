//! Benchmark: `generate` on synthetic machines with many GPUs, and with
//! many SR-IOV VFs and vDPA devices.
//!
//! Run with `cargo bench --bench generate`. Builds machines
//! (tests/support/synth.rs) of 64 and 1024 AMD GPUs, and of 8 Mellanox PFs
//! with 8 VFs each (8 vDPA devices) and with 128 VFs each (1024 VFs, 64
//! vDPA devices), then times, per size, the median of several runs of:
//! discovery, planning (select + render + validate + serialize, plus
//! device-info files, for every built-in generator), the first write into
//! an empty spec dir (and, for the NIC machines, an empty device-info
//! dir), an unchanged re-run of the whole pipeline, and `check` of the
//! written (current) files: discovery, planning and the comparison.
//!
//! Then the NVIDIA driver's files (`discover::nvidia::driver::find`) on
//! the fixture machines' driver trees, one per host layout (Debian with a
//! linker cache, RHEL's lib64 with one, NixOS's lib/ without one, a tree
//! without cache or soname links, whose sonames come from the ELF files),
//! against a minimal reader of the same set: the cache read once and each
//! file found `stat`ed once.
//!
//! Last, `watch`'s MIG poll (`cdigen::watch::mig`), which runs every 2 s
//! while NVIDIA GPUs exist: one poll (a fresh root and the listing of the
//! MIG capability directories) on the 1024-GPU machine given the MIG
//! procfs tree of 8 GPUs split into 7 instances each, against an
//! unchanged re-run of the whole pipeline on the same machine.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::path::Path;
use std::time::{Duration, Instant};

#[allow(dead_code)] // the NVIDIA, VFIO and mixed machines
#[path = "../tests/support/synth.rs"]
mod synth;

use cdigen::check;
use cdigen::discover;
use cdigen::generate::{apply, apply_devinfo, plan_all, plan_one};
use cdigen::generator;
use cdigen::render::Templates;
use cdigen::root::HostRoot;
use cdigen::watch::mig;

const RUNS: usize = 7;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// The built-in generators `generate` runs by default.
fn enabled_generators() -> Vec<generator::Loaded> {
    let all = generator::load(&[]).expect("generators");
    all.into_iter().filter(|l| l.generator.enabled).collect()
}

/// One run of the pipeline: times of discovery, planning and writing,
/// with the number of devices found and of device-info files planned.
/// Device-info files are written into `devinfo` when given.
fn pipeline(
    root: &Path,
    out: &Path,
    devinfo: Option<&Path>,
) -> (Duration, Duration, Duration, usize, usize) {
    let t0 = Instant::now();
    let host = HostRoot::open(root).expect("root");
    let gens = enabled_generators();
    let found = discover::discover_for(
        &host,
        &[],
        &cdigen::generator::scan(gens.iter().map(|l| &l.generator)),
    )
    .expect("discover");
    assert!(found.warnings.is_empty(), "{:?}", found.warnings);
    let t1 = Instant::now();
    let templates = Templates::load(None).expect("templates");
    let plans: Vec<_> = gens
        .iter()
        .map(|g| plan_one(g, &templates, &found, None).expect("plan"))
        .collect();
    let with_devinfo: Vec<&str> = gens
        .iter()
        .filter(|g| g.generator.device_info)
        .map(|g| g.generator.name.as_str())
        .collect();
    let infos = plans
        .iter()
        .filter(|p| with_devinfo.contains(&p.generator.as_str()))
        .map(|p| p.devinfo.len())
        .sum();
    let t2 = Instant::now();
    let (_, errors) = apply(out, &[], &plans).expect("apply");
    assert!(errors.is_empty(), "{errors:?}");
    if let Some(dir) = devinfo {
        let (_, errors) = apply_devinfo(dir, &plans, &with_devinfo).expect("apply_devinfo");
        assert!(errors.is_empty(), "{errors:?}");
    }
    let t3 = Instant::now();
    (t1 - t0, t2 - t1, t3 - t2, found.devices.len(), infos)
}

/// `cdigen check` of what [`pipeline`] wrote: everything must be current.
fn check_current(root: &Path, out: &Path, devinfo: Option<&Path>) -> Duration {
    let t = Instant::now();
    let host = HostRoot::open(root).expect("root");
    let gens = enabled_generators();
    let found = discover::discover_for(
        &host,
        &[],
        &cdigen::generator::scan(gens.iter().map(|l| &l.generator)),
    )
    .expect("discover");
    let templates = Templates::load(None).expect("templates");
    let plans = plan_all(&gens, &templates, &found, None);
    let dirs = check::Dirs {
        output_dir: out.to_path_buf(),
        devinfo_dir: devinfo.map_or_else(|| out.join("no-devinfo"), Path::to_path_buf),
        spec_dirs: vec![out.to_path_buf()],
    };
    let report = check::run(&host, &plans, &dirs);
    let elapsed = t.elapsed();
    assert!(report.current, "{:?}", report.findings);
    elapsed
}

/// Times the pipeline on the machine `build` writes, and prints one row.
fn row(label: &str, build: impl FnOnce(&Path), devinfo: bool) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("root");
    build(&root);
    let (mut d, mut p, mut w, mut re, mut ck) = (vec![], vec![], vec![], vec![], vec![]);
    let (mut devices, mut infos) = (0, 0);
    for i in 0..RUNS {
        let out = tmp.path().join(format!("cdi-{i}"));
        let info_dir = tmp.path().join(format!("devinfo-{i}"));
        let info_dir = devinfo.then_some(info_dir.as_path());
        let (a, b, c, n, k) = pipeline(&root, &out, info_dir);
        (devices, infos) = (n, k);
        d.push(a);
        p.push(b);
        w.push(c);
        let t = Instant::now();
        pipeline(&root, &out, info_dir);
        re.push(t.elapsed());
        ck.push(check_current(&root, &out, info_dir));
    }
    let devices = if devinfo {
        format!("{devices} ({infos} info)")
    } else {
        devices.to_string()
    };
    println!(
        "{label:<14} {devices:<17} {:<11?} {:<11?} {:<13?} {:<22?} {:?}",
        median(d),
        median(p),
        median(w),
        median(re),
        median(ck)
    );
}

/// The MIG procfs tree of `gpus` GPUs with 7 GPU instances of one
/// compute instance each (an A100/H100 split into 1g slices), cap files
/// with the driver's minors.
fn mig_tree(root: &Path, gpus: u32) {
    let caps = root.join("proc/driver/nvidia/capabilities");
    let access = |minor: u32| {
        format!("DeviceFileMinor: {minor}\nDeviceFileMode: 292\nDeviceFileModify: 1\n")
    };
    for gpu in 0..gpus {
        for gi in 1..=7u32 {
            let dir = caps.join(format!("gpu{gpu}/mig/gi{gi}"));
            std::fs::create_dir_all(dir.join("ci0")).unwrap();
            std::fs::write(dir.join("access"), access(3 + 135 * gpu + 9 * gi)).unwrap();
            std::fs::write(dir.join("ci0/access"), access(4 + 135 * gpu + 9 * gi)).unwrap();
        }
    }
}

/// One MIG poll as `watch` runs it: a fresh root, then the fingerprint.
fn poll_once(root: &Path) -> usize {
    let host = HostRoot::open(root).expect("root");
    mig::fingerprint(&host).len()
}

/// Times one MIG poll on the machine `build` writes (plus [`mig_tree`]),
/// against an unchanged re-run of the pipeline there, and prints it.
fn poll_row(label: &str, build: impl FnOnce(&Path)) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("root");
    build(&root);
    mig_tree(&root, 8);
    let out = tmp.path().join("cdi");
    pipeline(&root, &out, None);
    let mut rerun = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        pipeline(&root, &out, None);
        rerun.push(t.elapsed());
    }
    let mut polls = Vec::new();
    let mut entries = 0;
    for _ in 0..(RUNS * 15) {
        let t = Instant::now();
        entries = poll_once(&root);
        polls.push(t.elapsed());
    }
    assert_eq!(entries, 8 * 7 * 4);
    let (rerun, poll) = (median(rerun), median(polls));
    println!(
        "{label:<14} {entries:<8} {poll:<11?} {rerun:<22?} {:<10.5} {:.5}%",
        poll.as_secs_f64() / rerun.as_secs_f64(),
        100.0 * poll.as_secs_f64() / mig::POLL.as_secs_f64()
    );
}

/// Times the driver-file search on fixture machine `machine` against
/// the minimal reader of what it finds, and prints it.
fn driver_row(machine: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(machine)
        .join("root");
    let version_text =
        std::fs::read_to_string(root.join("proc/driver/nvidia/version")).expect("version");
    let version = discover::nvidia::proc::parse_driver_version(&version_text).expect("version");
    let find = || {
        let host = HostRoot::open(&root)
            .expect("root")
            .with_driver_root_or_detect(None);
        discover::nvidia::driver::find(&host, Some(&version), &mut discover::Report::default())
    };
    let found = find();
    assert!(found.problem.is_none(), "{machine}: {:?}", found.problem);
    let driver_root = root.join(found.root.trim_start_matches('/'));
    let minimal = || {
        let mut n = 0usize;
        if let Ok(cache) = std::fs::read(driver_root.join("etc/ld.so.cache")) {
            n += cache.len();
        }
        for f in &found.files {
            let p = root.join(f.host_path.trim_start_matches('/'));
            n += std::fs::metadata(&p).map(|m| m.len() as usize).unwrap_or(0);
        }
        n
    };
    let (mut ours, mut base) = (Vec::new(), Vec::new());
    for _ in 0..(RUNS * 5) {
        let t = Instant::now();
        std::hint::black_box(find());
        ours.push(t.elapsed());
        let t = Instant::now();
        std::hint::black_box(minimal());
        base.push(t.elapsed());
    }
    let (ours, base) = (median(ours), median(base));
    println!(
        "{machine:<14} {:<6} {ours:<11?} {base:<11?} {:.1}",
        found.files.len(),
        ours.as_secs_f64() / base.as_secs_f64()
    );
}

fn main() {
    let header = "devices           discover    plan        write(first)  full-rerun(unchanged)  check(current)";
    println!("AMD GPUs\n{:<14} {header}", "gpus");
    for gpus in [64usize, 1024] {
        row(&gpus.to_string(), |root| synth::amd_gpus(root, gpus), false);
    }
    println!("\nSR-IOV NICs (switchdev, RDMA) and vDPA; specs + device-info files");
    println!("{:<14} {header}", "pfs x vfs/vdpa");
    for (pfs, vfs, vdpa) in [(8usize, 8usize, 8usize), (8, 128, 64)] {
        row(
            &format!("{pfs}x{vfs}/{vdpa}"),
            |root| synth::sriov_nics(root, pfs, vfs, vdpa),
            true,
        );
    }
    println!("\nNVIDIA driver files per host layout (fixture trees)");
    println!("{:<14} files  find        minimal     ratio", "machine");
    for m in ["dgx-8gpu", "old-driver", "h100-vm", "missing-node"] {
        driver_row(m);
    }
    println!(
        "\nwatch's MIG poll (every {:?} while NVIDIA GPUs exist), 8 GPUs x 7 MIG instances",
        mig::POLL
    );
    println!(
        "{:<14} entries  poll        full-rerun(unchanged)  ratio      of one core",
        "gpus"
    );
    poll_row("1024", |root| synth::amd_gpus(root, 1024));
}

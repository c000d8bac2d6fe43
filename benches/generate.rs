//! Benchmark: `generate` on synthetic machines with many GPUs.
//!
//! Run with `cargo bench --bench generate`. Builds machines of 64 and 1024
//! AMD GPUs (tests/support/synth.rs), then times, per size, the median of
//! several runs of: discovery, planning (select + render + validate +
//! serialize for every built-in generator), the first write into an empty
//! spec dir, and an unchanged re-run of the whole pipeline.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::path::Path;
use std::time::{Duration, Instant};

#[path = "../tests/support/synth.rs"]
mod synth;

use cdigen::discover;
use cdigen::generate::{apply, plan_one};
use cdigen::generator;
use cdigen::render::Templates;
use cdigen::root::HostRoot;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn pipeline(root: &Path, out: &Path) -> (Duration, Duration, Duration, usize) {
    let t0 = Instant::now();
    let host = HostRoot::open(root).expect("root");
    let found = discover::discover(&host, &[]).expect("discover");
    let t1 = Instant::now();
    let gens = generator::load(&[]).expect("generators");
    let templates = Templates::load(None).expect("templates");
    let plans: Vec<_> = gens
        .iter()
        .map(|g| plan_one(g, &templates, &found, None).expect("plan"))
        .collect();
    let t2 = Instant::now();
    let (_, errors) = apply(out, &plans).expect("apply");
    assert!(errors.is_empty());
    let t3 = Instant::now();
    (t1 - t0, t2 - t1, t3 - t2, found.devices.len())
}

fn main() {
    let runs = 7;
    println!("size  devices  discover    plan        write(first)  full-rerun(unchanged)");
    for gpus in [64usize, 1024] {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("root");
        synth::amd_gpus(&root, gpus);
        let (mut d, mut p, mut w, mut re) = (vec![], vec![], vec![], vec![]);
        let mut devices = 0;
        for i in 0..runs {
            let out = tmp.path().join(format!("cdi-{i}"));
            let (a, b, c, n) = pipeline(&root, &out);
            devices = n;
            d.push(a);
            p.push(b);
            w.push(c);
            let t = Instant::now();
            pipeline(&root, &out);
            re.push(t.elapsed());
        }
        println!(
            "{gpus:<5} {devices:<8} {:<11?} {:<11?} {:<13?} {:?}",
            median(d),
            median(p),
            median(w),
            median(re)
        );
    }
}

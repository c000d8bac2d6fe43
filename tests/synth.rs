//! Checks the synthetic machine builder used by the benchmark, so the
//! benchmark measures a tree discovery really understands.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[path = "support/synth.rs"]
mod synth;

use cdigen::root::HostRoot;

#[test]
fn synthetic_machine_is_fully_discovered() {
    let tmp = tempfile::tempdir().unwrap();
    synth::amd_gpus(tmp.path(), 300);
    let root = HostRoot::open(tmp.path()).unwrap();
    let found = cdigen::discover::discover(&root, &[]).unwrap();
    assert_eq!(found.warnings, vec![]);
    assert_eq!(found.devices.len(), 300);
    let d = &found.devices[299];
    assert_eq!(d.id, "0001:32:00.0");
    assert_eq!(d.driver.as_deref(), Some("amdgpu"));
    let nodes: Vec<&str> = d.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(nodes, ["card599", "renderD427"]);
    assert_eq!(d.links.len(), 2);
    assert_eq!(d.nodes[0].host.map(|h| h.gid), Some(44));
}

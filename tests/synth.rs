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

/// Names of a device's nodes with their numbers.
fn nodes(d: &cdigen::model::Device) -> Vec<(String, String, u32, u32)> {
    d.nodes
        .iter()
        .map(|n| (n.name.clone(), n.path.clone(), n.major, n.minor))
        .collect()
}

fn node(name: &str, path: &str, major: u32, minor: u32) -> (String, String, u32, u32) {
    (name.to_string(), path.to_string(), major, minor)
}

#[test]
fn synthetic_nics_are_fully_discovered() {
    let tmp = tempfile::tempdir().unwrap();
    synth::sriov_nics(tmp.path(), 8, 16, 8);
    let root = HostRoot::open(tmp.path()).unwrap();
    let found = cdigen::discover::discover(&root, &[]).unwrap();
    assert_eq!(found.warnings, vec![]);
    let count = |b: &str| found.devices.iter().filter(|d| d.backend == b).count();
    assert_eq!(count("sriov"), 128);
    assert_eq!(count("vdpa"), 8);
    assert_eq!(found.devices.len(), 136);
    let get = |backend: &str, id: &str| {
        found
            .devices
            .iter()
            .find(|d| d.backend == backend && d.id == id)
            .unwrap_or_else(|| panic!("no {backend} device {id}"))
    };

    // VF 5 of PF 0 (bus 3b; routing ID 0x3b00 + 2 + 5 = 3b:00.7): RDMA
    // devices are numbered after the 8 PFs', so mlx5_13; it carries vdpa5.
    let vf = get("sriov", "0100:3b:00.7");
    assert_eq!(vf.driver.as_deref(), Some("mlx5_core"));
    assert_eq!(vf.numa_node, Some(0));
    let pci = vf.pci.as_ref().unwrap();
    assert_eq!(
        (pci.vendor_id.as_str(), pci.device_id.as_str()),
        ("0x15b3", "0x101e")
    );
    let net = vf.net.as_ref().unwrap();
    assert_eq!(net.netdevs, ["ens1f0v5"]);
    assert_eq!(net.pf.as_deref(), Some("0100:3b:00.0"));
    assert_eq!(net.pf_netdev.as_deref(), Some("ens1f0np0"));
    assert_eq!(net.vf_index, Some(5));
    assert_eq!(net.representor.as_deref(), Some("ens1f0npf0vf5"));
    assert_eq!(net.rdma_devices, ["mlx5_13"]);
    assert_eq!(net.link_type.as_deref(), Some("ether"));
    assert_eq!(
        nodes(vf),
        [
            node("uverbs13", "/dev/infiniband/uverbs13", 231, 192 + 13),
            node("issm13", "/dev/infiniband/issm13", 231, 64 + 13),
            node("umad13", "/dev/infiniband/umad13", 231, 13),
            node("rdma_cm", "/dev/infiniband/rdma_cm", 10, 125),
            node("vhost-vdpa-5", "/dev/vhost-vdpa-5", 240, 5),
        ]
    );
    assert_eq!(vf.nodes[0].host.map(|h| h.mode), Some(0o666));
    let v = vf.vdpa.as_ref().unwrap();
    assert_eq!(
        (v.name.as_str(), v.driver.as_deref(), v.path.as_deref()),
        ("vdpa5", Some("vhost"), Some("/dev/vhost-vdpa-5"))
    );

    // VF 14 of PF 6 (bus 0x3b + 2*6 = 0x47; routing ID 2 + 14 = 16 = 02.0):
    // RDMA index 8 + 6*16 + 14 = 118, past the fixed uverbs (32) and umad
    // (64) minors, so in the dynamic regions; no vDPA device.
    let vf = get("sriov", "0100:47:02.0");
    let net = vf.net.as_ref().unwrap();
    assert_eq!(net.netdevs, ["ens7f0v14"]);
    assert_eq!(net.pf.as_deref(), Some("0100:47:00.0"));
    assert_eq!(net.pf_netdev.as_deref(), Some("ens7f0np0"));
    assert_eq!(net.vf_index, Some(14));
    assert_eq!(net.representor.as_deref(), Some("ens7f0npf0vf14"));
    assert_eq!(net.rdma_devices, ["mlx5_118"]);
    assert_eq!(vf.numa_node, Some(0));
    assert_eq!(vf.vdpa, None);
    assert_eq!(
        nodes(vf),
        [
            node("uverbs118", "/dev/infiniband/uverbs118", 235, 118 - 32),
            node("issm118", "/dev/infiniband/issm118", 234, 8128 + 118 - 64),
            node("umad118", "/dev/infiniband/umad118", 234, 118 - 64),
            node("rdma_cm", "/dev/infiniband/rdma_cm", 10, 125),
        ]
    );
    // The last VF of the last PF: 2 + 15 = 17 = 02.1 on bus 0x49.
    assert_eq!(
        get("sriov", "0100:49:02.1").net.as_ref().unwrap().vf_index,
        Some(15)
    );

    // The vDPA device on that first VF.
    let d = get("vdpa", "vdpa5");
    assert_eq!(d.driver.as_deref(), Some("vhost_vdpa"));
    assert_eq!(d.bus, "vdpa");
    let v = d.vdpa.as_ref().unwrap();
    assert_eq!(v.driver.as_deref(), Some("vhost"));
    assert_eq!(v.path.as_deref(), Some("/dev/vhost-vdpa-5"));
    assert_eq!(v.pci_address.as_deref(), Some("0100:3b:00.7"));
    assert_eq!(
        nodes(d),
        [node("vhost-vdpa-5", "/dev/vhost-vdpa-5", 240, 5)]
    );
    assert_eq!(d.nodes[0].host.map(|h| h.mode), Some(0o600));
    let net = d.net.as_ref().unwrap();
    assert_eq!(net.pf.as_deref(), Some("0100:3b:00.0"));
    assert_eq!(net.vf_index, Some(5));
    assert_eq!(net.representor.as_deref(), Some("ens1f0npf0vf5"));
    // vDPA devices sit on the first VFs: PF 0's VF 0..7.
    let mut parents: Vec<&str> = found
        .devices
        .iter()
        .filter_map(|d| d.vdpa.as_ref()?.pci_address.as_deref())
        .collect();
    parents.sort_unstable();
    parents.dedup();
    assert_eq!(
        parents,
        [
            "0100:3b:00.2",
            "0100:3b:00.3",
            "0100:3b:00.4",
            "0100:3b:00.5",
            "0100:3b:00.6",
            "0100:3b:00.7",
            "0100:3b:01.0",
            "0100:3b:01.1"
        ]
    );
}

#[test]
fn gpus_and_nics_share_one_root() {
    let tmp = tempfile::tempdir().unwrap();
    synth::amd_gpus(tmp.path(), 300);
    synth::sriov_nics(tmp.path(), 2, 40, 3);
    let root = HostRoot::open(tmp.path()).unwrap();
    let found = cdigen::discover::discover(&root, &[]).unwrap();
    assert_eq!(found.warnings, vec![]);
    let count = |b: &str| found.devices.iter().filter(|d| d.backend == b).count();
    assert_eq!((count("drm"), count("sriov"), count("vdpa")), (300, 80, 3));
    let gpu = found
        .devices
        .iter()
        .find(|d| d.id == "0001:32:00.0")
        .unwrap();
    assert_eq!(gpu.nodes[0].host.map(|h| h.gid), Some(44));
    let vf = found
        .devices
        .iter()
        .find(|d| d.id == "0100:3d:05.1")
        .unwrap();
    assert_eq!(vf.net.as_ref().unwrap().vf_index, Some(39));
    assert!(vf.nodes.iter().all(|n| n.host.is_some()));
}

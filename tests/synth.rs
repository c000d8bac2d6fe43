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
    // The VFs' bus links the hotplug tests and benches hide one of.
    let links = synth::vf_links(tmp.path());
    assert_eq!(links.len(), 128);
    assert!(links.is_sorted());
    // Each PF's own RDMA device (mlx5_<p>) is the RDMA backend's.
    assert_eq!(count("rdma"), 8);
    assert_eq!(found.devices.len(), 144);
    let get = |backend: &str, id: &str| {
        found
            .devices
            .iter()
            .find(|d| d.backend == backend && d.id == id)
            .unwrap_or_else(|| panic!("no {backend} device {id}"))
    };

    let pf = get("rdma", "0100:3b:00.0");
    assert_eq!(pf.net.as_ref().unwrap().rdma_devices, ["mlx5_0"]);
    assert_eq!(pf.net.as_ref().unwrap().netdevs, ["ens1f0np0"]);
    assert_eq!(
        nodes(pf)[0],
        node("uverbs0", "/dev/infiniband/uverbs0", 231, 192)
    );

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

/// Opens a synthetic root as `generate` does on a machine with an NVIDIA
/// driver root (found at `/run/nvidia/driver`), NVML off.
fn open(path: &std::path::Path) -> HostRoot {
    HostRoot::open(path)
        .unwrap()
        .with_driver_root_or_detect(None)
        .with_nvml(false)
}

#[test]
fn synthetic_nvidia_gpus_with_mig_and_a_driver_root() {
    let tmp = tempfile::tempdir().unwrap();
    synth::nvidia_gpus(tmp.path(), 3, 7);
    let root = open(tmp.path());
    let found = cdigen::discover::discover(&root, &[]).unwrap();
    assert_eq!(found.warnings, vec![]);
    assert!(found.devices.iter().all(|d| d.backend == "nvidia"));
    // Each GPU and its MIG devices, and the management device.
    assert_eq!(found.devices.len(), 3 * (1 + 7) + 1);
    let get = |id: &str| found.devices.iter().find(|d| d.id == id).unwrap();

    // GPU 1: Device Minor 1, behind root port 0200:02:01.0.
    let gpu = get("0200:03:00.0");
    let nv = gpu.nvidia.as_ref().unwrap();
    assert_eq!(nv.model, "NVIDIA A100-SXM4-40GB");
    assert_eq!(nv.minor, 1);
    assert_eq!(nv.driver_version.as_deref(), Some(synth::NVIDIA_RELEASE));
    assert!(nv.mig_enabled);
    assert_eq!(gpu.numa_node, Some(1));
    assert_eq!(
        nodes(gpu),
        [
            node("nvidia1", "/dev/nvidia1", 195, 1),
            node("nvidiactl", "/dev/nvidiactl", 195, 255),
            node("nvidia-modeset", "/dev/nvidia-modeset", 195, 254),
            node("nvidia-uvm", "/dev/nvidia-uvm", 237, 0),
            node("nvidia-uvm-tools", "/dev/nvidia-uvm-tools", 237, 1),
            node("nvidia-cap1", "/dev/nvidia-caps/nvidia-cap1", 238, 1),
            node("nvidia-cap2", "/dev/nvidia-caps/nvidia-cap2", 238, 2),
        ]
    );
    assert!(gpu.nodes.iter().all(|n| n.host.is_some()));

    // Its last MIG instance, gi13/ci0: minors 3 + 135 + 9 * 13 (+ 1).
    let mig = get("0200:03:00.0/gi13/ci0");
    let info = mig.nvidia.as_ref().unwrap().mig.as_ref().unwrap();
    assert_eq!((info.gi, info.ci), (13, 0));
    assert_eq!(
        nodes(mig)[..3],
        [
            node("nvidia1", "/dev/nvidia1", 195, 1),
            node("nvidia-cap255", "/dev/nvidia-caps/nvidia-cap255", 238, 255),
            node("nvidia-cap256", "/dev/nvidia-caps/nvidia-cap256", 238, 256),
        ]
    );
    assert_eq!(mig.nodes[1].host.map(|h| h.mode), Some(0o444));

    // The driver's files, from the copied fixture tree and its cache.
    let driver = gpu.driver_files.as_ref().unwrap();
    assert_eq!(driver.problem, None);
    assert_eq!(driver.root, "/run/nvidia/driver");
    assert_eq!(driver.version.as_deref(), Some(synth::NVIDIA_RELEASE));
    assert!(
        driver
            .files
            .iter()
            .any(|f| f.host_path.ends_with("/libcuda.so.550.90.07")),
        "{:?}",
        driver.files
    );
}

#[test]
fn synthetic_vfio_functions() {
    let tmp = tempfile::tempdir().unwrap();
    synth::vfio_functions(tmp.path(), 3);
    let found = cdigen::discover::discover(&open(tmp.path()), &[]).unwrap();
    assert_eq!(found.warnings, vec![]);
    assert_eq!(found.devices.len(), 3);
    assert!(found.devices.iter().all(|d| d.backend == "vfio"));
    // The third: behind root port 0300:04:01.0 (group 3004), group 3005.
    let d = &found.devices[2];
    assert_eq!(d.id, "0300:05:00.0");
    assert_eq!(d.driver.as_deref(), Some("vfio-pci"));
    let vfio = d.vfio.as_ref().unwrap();
    assert_eq!(
        (vfio.group.as_str(), vfio.mode.as_str()),
        ("3005", "legacy")
    );
    assert_eq!(vfio.group_devices, ["0300:05:00.0"]);
    assert_eq!(
        nodes(d),
        [
            node("vfio", "/dev/vfio/vfio", 10, 196),
            node("3005", "/dev/vfio/3005", 242, 2),
            node("iommu", "/dev/iommu", 10, 124),
            node("vfio2", "/dev/vfio/devices/vfio2", 241, 2),
        ]
    );
    assert!(d.nodes.iter().all(|n| n.host.is_some()));
}

/// Every builder on one root: each backend finds its devices, and the
/// `amd-gpu` generator gives each AMD GPU `/dev/kfd`.
#[test]
fn mixed_machine_is_fully_discovered() {
    let tmp = tempfile::tempdir().unwrap();
    let mix = synth::Mix {
        pfs: 2,
        vfs_per_pf: 6,
        vdpa: 3,
        amd: 4,
        nvidia: 2,
        migs: 7,
        vfio: 5,
    };
    synth::mixed(tmp.path(), mix);
    let root = open(tmp.path());
    let gens = cdigen::generator::load(&[]).unwrap();
    let enabled: Vec<_> = gens.iter().filter(|l| l.generator.enabled).collect();
    let found = cdigen::discover::discover_for(
        &root,
        &[],
        &cdigen::generator::scan(enabled.iter().map(|l| &l.generator)),
    )
    .unwrap();
    assert_eq!(found.warnings, vec![]);
    // The NVIDIA backend's management device is no GPU: not counted.
    let count = |b: &str| {
        found
            .devices
            .iter()
            .filter(|d| d.backend == b && d.id != "management")
            .count()
    };
    assert_eq!(
        (
            count("drm"),
            count("sriov"),
            count("vdpa"),
            count("nvidia"),
            count("vfio")
        ),
        mix.expected()
    );
    assert_eq!(mix.expected(), (4, 12, 3, 16, 5));
    assert_eq!(count("generic"), 1, "/dev/kfd");
    let templates = cdigen::render::Templates::load(None).unwrap();
    let amd = enabled
        .iter()
        .find(|l| l.generator.name == "amd-gpu")
        .unwrap();
    let plan = cdigen::generate::plan_one(amd, &templates, &found, None).unwrap();
    let spec = String::from_utf8(plan.bytes.clone()).unwrap();
    assert_eq!(spec.matches("path: '/dev/kfd'").count(), 4 + 1, "{spec}");
}

/// Each PCI function's `config` says what its text attributes say, as
/// `lspci -A linux-sysfs` reads it.
#[test]
fn pci_config_matches_the_attributes() {
    let tmp = tempfile::tempdir().unwrap();
    synth::mixed(
        tmp.path(),
        synth::Mix {
            pfs: 1,
            vfs_per_pf: 2,
            vdpa: 0,
            amd: 1,
            nvidia: 1,
            migs: 0,
            vfio: 1,
        },
    );
    let bus = tmp.path().join("sys/bus/pci/devices");
    let mut seen = 0;
    for entry in std::fs::read_dir(&bus).unwrap() {
        let dir = entry.unwrap().path();
        let config = std::fs::read(dir.join("config")).unwrap();
        assert_eq!(config.len(), 64, "{}", dir.display());
        let attr = |name: &str| {
            let text = std::fs::read_to_string(dir.join(name)).unwrap();
            u32::from_str_radix(text.trim().trim_start_matches("0x"), 16).unwrap()
        };
        let word = |at: usize| u32::from(u16::from_le_bytes([config[at], config[at + 1]]));
        assert_eq!(word(0), attr("vendor"), "{}", dir.display());
        assert_eq!(word(2), attr("device"), "{}", dir.display());
        let class = u32::from_le_bytes([config[9], config[10], config[11], 0]);
        assert_eq!(class, attr("class"), "{}", dir.display());
        let bridge = class >> 8 == 0x0604;
        assert_eq!(config[0x0e], u8::from(bridge), "{}", dir.display());
        if !bridge {
            assert_eq!(word(0x2c), attr("subsystem_vendor"), "{}", dir.display());
            assert_eq!(word(0x2e), attr("subsystem_device"), "{}", dir.display());
        }
        seen += 1;
    }
    // The AMD GPU, root port + PF + 2 VFs, root port + A100, root port +
    // NVMe.
    assert_eq!(seen, 9);
}

/// The benchmark's machine has the issue's 1345 devices (with `/dev/kfd`,
/// which the generic backend finds), and its half machine half of them.
#[test]
fn issue_14_machine_size() {
    let sum = |m: synth::Mix| {
        let (drm, sriov, vdpa, nvidia, vfio) = m.expected();
        drm + sriov + vdpa + nvidia + vfio
    };
    assert_eq!(sum(synth::Mix::ISSUE_14) + 1, 1345);
    assert_eq!(sum(synth::Mix::ISSUE_14.half()) * 2, 1344);
}

//! AMD Instinct compute partitions (XCP) for the DRM backend.
//!
//! amdgpu splits a GPU such as the MI300X into 1 (SPX), 2 (DPX), 3 (TPX),
//! 4 (QPX) or one per XCD (CPX) compute partitions. Partition 0 is the PCI
//! device's own DRM device (`amdgpu_xcp.c`, `amdgpu_xcp_dev_alloc()`:
//! "xcp #0 shares drm device setting with adev"); for partitions 1 to
//! `MAX_XCP - 1` (7) the driver registers a platform device
//! `amdgpu_xcp_<N>` at probe (`amdxcp/amdgpu_xcp_drv.c`,
//! `amdgpu_xcp_drm_dev_alloc()`: `platform_device_register_simple(
//! "amdgpu_xcp_%d", -1, NULL, 0)`, `amdgpu_xcp.<N>` on kernels before
//! that name), numbered across all GPUs, each with its own `drm/card<N>`
//! and `drm/renderD<N>`, whatever the mode: in SPX all seven of a GPU are
//! idle. Nothing in sysfs links such a device to its GPU.
//!
//! The KFD topology ([`super::super::kfd`]) does: each active partition is
//! a KFD node whose `drm_render_minor` is its render node and whose
//! `domain` and `location_id` name its GPU. So an `amdgpu_xcp` DRM device
//! whose render node is in the topology becomes a partition device of its
//! GPU (the GPU's PCI identity, driver and NUMA node, id
//! `<address>/xcp<k>`, attribute `partition` = k, the partition's node id,
//! which the kernel puts in `location_id`); one that is not is idle and
//! offered nowhere, without a warning (idle partitions are normal). AMD
//! GPUs with a `current_compute_partition` file get the
//! `compute_partition` and `memory_partition` attributes and `partition`
//! 0, and so do their partitions.
//!
//! A GPU whose mode needs more partitions than the topology has nodes for
//! (DPX 2, TPX 3, QPX 4, CPX one per XCD) is reported on its
//! `current_compute_partition` file: a partition without a KFD node cannot
//! be told from an idle device, so it is offered nowhere.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::super::Report;
use super::super::devnode::by_path_links;
use super::super::kfd::{self, GpuNode, Topology};
use super::super::pci::link;
use crate::model::{Device, Node};
use crate::root::{HostRoot, sys_path};
use crate::sysfs::PciAddress;

/// The attribute with the partition's index within its GPU.
pub const PARTITION: &str = "partition";
/// The attribute with the GPU's compute partition mode (`SPX`, `CPX`).
pub const COMPUTE_PARTITION: &str = "compute_partition";
/// The attribute with the GPU's memory partition mode (`NPS1`, `NPS4`).
pub const MEMORY_PARTITION: &str = "memory_partition";

/// A DRM device whose parent is an `amdgpu_xcp` platform device.
#[derive(Debug, Clone)]
pub(super) struct XcpGroup {
    /// The platform device's real sysfs path.
    pub parent: PathBuf,
    /// Its name (`amdgpu_xcp_3`).
    pub name: String,
    /// Its card and render nodes, as read.
    pub nodes: Vec<Node>,
}

/// Whether `name` is the name amdgpu's partition driver gives its platform
/// devices: `amdgpu_xcp_<N>`, or `amdgpu_xcp.<N>` on older kernels.
pub(super) fn is_xcp_name(name: &str) -> bool {
    let digits = name
        .strip_prefix("amdgpu_xcp_")
        .or_else(|| name.strip_prefix("amdgpu_xcp."));
    digits.is_some_and(|d| !d.is_empty() && d.len() <= 4 && d.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether the DRM parent at `parent` is an `amdgpu_xcp` platform device.
pub(super) fn is_xcp_parent(root: &HostRoot, parent: &Path, report: &mut Report) -> bool {
    parent
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(is_xcp_name)
        && link(root, &parent.join("subsystem"), report).as_deref() == Some("platform")
}

/// How many partitions a compute partition mode has: CPX has one per XCD
/// (8 on MI300X, 6 on MI300A, 4 on MI308X), which `xcds` says when known
/// (else at least 2); `exact` is false for that guess.
fn partitions_needed(mode: &str, xcds: Option<usize>) -> Option<(usize, bool)> {
    match mode {
        "DPX" => Some((2, true)),
        "TPX" => Some((3, true)),
        "QPX" => Some((4, true)),
        "CPX" => Some(xcds.map_or((2, false), |n| (n, true))),
        _ => None,
    }
}

/// The number of XCDs of a GPU, from its `available_compute_partition`,
/// which amdgpu derives from it (`amdgpu_gfx.c`,
/// `amdgpu_xcp_update_supported_modes()`): `SPX, DPX, QPX, CPX` with 8,
/// `SPX, TPX, CPX` with 6, `SPX, DPX, CPX` with 4, `SPX, CPX` with 2 (or
/// 1, taken as 2).
fn xcds_from_available(available: &str) -> Option<usize> {
    let modes: Vec<&str> = available.split(',').map(str::trim).collect();
    let has = |m: &str| modes.contains(&m);
    if !has("CPX") {
        return None;
    }
    Some(if has("QPX") {
        8
    } else if has("TPX") {
        6
    } else if has("DPX") {
        4
    } else {
        2
    })
}

/// The partition number of each of a GPU's KFD nodes other than its own
/// (partition 0), in node order. The kernel ORs a partition's node id into
/// `location_id` (`kfd_topology_add_device()`: `location_id |= node_id`
/// when the GPU has several nodes; one kernel put it in bits 28-31), and
/// node `k` is partition `k`. When that does not give distinct numbers
/// from 1 (a GPU whose function number is not 0, a kernel that does not
/// say), the nodes are numbered 1, 2, ... in node order.
fn partition_numbers(gpu: &PciAddress, nodes: &[&GpuNode]) -> Vec<usize> {
    let id = pci_dev_id(gpu);
    let from_location = |n: &GpuNode| -> Option<usize> {
        let high = n.location_id >> 28;
        let k = if high != 0 {
            high
        } else if id & 7 == 0 {
            n.location_id & 7
        } else {
            return None;
        };
        usize::try_from(k).ok().filter(|&k| k > 0)
    };
    let said: Vec<Option<usize>> = nodes.iter().map(|n| from_location(n)).collect();
    let mut seen = std::collections::BTreeSet::new();
    if said.iter().all(|k| k.is_some_and(|k| seen.insert(k))) {
        said.into_iter().flatten().collect()
    } else {
        (1..=nodes.len()).collect()
    }
}

/// Reads a partition mode file of a GPU (`None` when absent, or unusable
/// with a warning).
fn read_mode(root: &HostRoot, path: &Path, report: &mut Report) -> Option<String> {
    match root.read_attr_opt(path) {
        Ok(Some(v)) => {
            let v = v.trim();
            if !v.is_empty() && v.len() <= 16 && v.bytes().all(|b| b.is_ascii_alphanumeric()) {
                Some(v.to_string())
            } else {
                report.warn(
                    path,
                    format!("{v:?} is not a partition mode (SPX, CPX, NPS1, ...); ignoring it"),
                );
                None
            }
        }
        Ok(None) => None,
        Err(e) => {
            report.warn(path, format!("{}; ignoring it", e.reason()));
            None
        }
    }
}

/// Records the partition modes of an AMD PCI GPU at real path `dir` in its
/// attributes (`compute_partition`, `memory_partition`, and `partition` 0
/// when it has a compute partition mode).
pub(super) fn read_modes(root: &HostRoot, dir: &Path, dev: &mut Device, report: &mut Report) {
    if let Some(m) = read_mode(root, &dir.join("current_compute_partition"), report) {
        dev.attrs.insert(COMPUTE_PARTITION.into(), m);
        dev.attrs.insert(PARTITION.into(), "0".into());
    }
    if let Some(m) = read_mode(root, &dir.join("current_memory_partition"), report) {
        dev.attrs.insert(MEMORY_PARTITION.into(), m);
    }
}

/// `bus << 8 | devfn`: the kernel's `pci_dev_id()`.
fn pci_dev_id(a: &PciAddress) -> u32 {
    u32::from(a.bus) << 8 | u32::from(a.device) << 3 | u32::from(a.function)
}

/// Which of `gpus` a KFD node is part of, by its `domain` and
/// `location_id`: the GPU whose `pci_dev_id()` it is, else the one GPU it
/// is with a partition's node id (below 8) ORed in. `Err` says why none.
fn owner(node: &GpuNode, gpus: &[PciAddress]) -> Result<usize, String> {
    // The low 16 bits are pci_dev_id() (a kernel that briefly put the node
    // id in bits 28-31 leaves them alone).
    let id = node.location_id & 0xffff;
    let in_domain = |a: &PciAddress| a.domain == node.domain;
    let exact: Vec<usize> = (0..gpus.len())
        .filter(|&i| {
            gpus.get(i)
                .is_some_and(|a| in_domain(a) && pci_dev_id(a) == id)
        })
        .collect();
    let near: Vec<usize> = (0..gpus.len())
        .filter(|&i| {
            gpus.get(i)
                .is_some_and(|a| in_domain(a) && (pci_dev_id(a) | (id & 7)) == id)
        })
        .collect();
    let named = || {
        let bus = (id >> 8) & 0xff;
        let slot = (id >> 3) & 0x1f;
        format!(
            "domain {} location_id {} (PCI {:04x}:{bus:02x}:{slot:02x}.x)",
            node.domain, node.location_id, node.domain
        )
    };
    match (exact.as_slice(), near.as_slice()) {
        ([i], _) | ([], [i]) => Ok(*i),
        ([], []) => Err(format!("{} is no AMD GPU with DRM nodes here", named())),
        _ => Err(format!("{} could be several AMD GPUs", named())),
    }
}

/// The KFD topology, read when the backend found an AMD GPU or an
/// `amdgpu_xcp` device (`Missing` otherwise, without reading it).
pub(super) fn topology(
    root: &HostRoot,
    devices: &[Device],
    xcps: &[XcpGroup],
    report: &mut Report,
) -> Topology {
    let amd = devices
        .iter()
        .any(|d| d.pci.as_ref().is_some_and(|p| p.vendor_id == "0x1002"));
    if xcps.is_empty() && !amd {
        return Topology::Missing;
    }
    kfd::read(root, report)
}

/// Gives each AMD GPU of `devices` the UUID of its KFD node (the node
/// with its render node), when that has a `unique_id`
/// ([`kfd::gpu_uuid`]).
pub(super) fn set_uuids(topology: &Topology, devices: &mut [Device]) {
    for d in devices
        .iter_mut()
        .filter(|d| d.pci.as_ref().is_some_and(|p| p.vendor_id == "0x1002"))
    {
        let Some(render) = d.nodes.iter().find(|n| n.role == "render") else {
            continue;
        };
        if let Some(id) = topology
            .by_render_minor(render.minor)
            .and_then(|n| n.unique_id)
        {
            d.uuid = Some(kfd::gpu_uuid(id));
        }
    }
}

/// The partition devices of `xcps` (the GPUs are `devices`, found by the
/// backend), and the warnings for GPUs whose mode needs partitions the
/// KFD topology ([`topology`]) does not list.
pub(super) fn partitions(
    root: &HostRoot,
    devices: &[Device],
    xcps: Vec<XcpGroup>,
    topology: &Topology,
    report: &mut Report,
) -> Vec<Device> {
    // The AMD GPUs, by PCI address.
    let gpus: Vec<(&Device, PciAddress)> = devices
        .iter()
        .filter(|d| d.pci.as_ref().is_some_and(|p| p.vendor_id == "0x1002"))
        .filter_map(|d| Some((d, d.pci.as_ref()?.address.parse().ok()?)))
        .collect();
    let partitioned = |d: &Device| {
        d.attrs
            .get(COMPUTE_PARTITION)
            .and_then(|m| partitions_needed(m, None))
            .is_some()
    };
    if xcps.is_empty() && !gpus.iter().any(|(d, _)| partitioned(d)) {
        return Vec::new();
    }
    let addresses: Vec<PciAddress> = gpus.iter().map(|(_, a)| *a).collect();
    // GPU index -> its KFD nodes, in node order.
    let mut owned: BTreeMap<usize, Vec<&GpuNode>> = BTreeMap::new();
    // KFD node number -> why it has no GPU.
    let mut orphans: BTreeMap<u32, String> = BTreeMap::new();
    for node in topology.nodes() {
        match owner(node, &addresses) {
            Ok(i) => owned.entry(i).or_default().push(node),
            Err(why) => {
                orphans.insert(node.node, why);
            }
        }
    }
    // The GPU and partition number of each render minor of a partition
    // other than a GPU's own.
    let own_render = |d: &Device| d.nodes.iter().find(|n| n.role == "render").map(|n| n.minor);
    let mut index: BTreeMap<u32, (usize, usize)> = BTreeMap::new();
    for (&i, nodes) in &owned {
        let Some((gpu, address)) = gpus.get(i) else {
            continue;
        };
        let own = own_render(gpu);
        let others: Vec<&GpuNode> = nodes
            .iter()
            .copied()
            .filter(|n| Some(n.render_minor) != own)
            .collect();
        for (n, k) in others.iter().zip(partition_numbers(address, &others)) {
            index.insert(n.render_minor, (i, k));
        }
    }
    let mut out = Vec::new();
    for x in xcps {
        let Some(render) = x.nodes.iter().find(|n| n.role == "render") else {
            tracing::debug!("{}: no render node, so no partition", x.parent.display());
            continue;
        };
        let Some(node) = topology.by_render_minor(render.minor) else {
            tracing::debug!(
                "{}: {} is in no KFD node: an idle partition",
                x.parent.display(),
                render.name
            );
            continue;
        };
        let Some(&(i, k)) = index.get(&render.minor) else {
            let why = orphans.get(&node.node).cloned().unwrap_or_default();
            report.warn(
                &node.path,
                format!(
                    "KFD node {} ({}): {why}; {} is offered nowhere",
                    node.node, render.name, x.name
                ),
            );
            continue;
        };
        let Some((gpu, _)) = gpus.get(i) else {
            continue;
        };
        let kept = super::host_nodes_in_order(root, x.nodes, report);
        if kept.is_empty() {
            continue;
        }
        let mut attrs = BTreeMap::new();
        for key in [COMPUTE_PARTITION, MEMORY_PARTITION] {
            if let Some(v) = gpu.attrs.get(key) {
                attrs.insert(key.to_string(), v.clone());
            }
        }
        attrs.insert(PARTITION.into(), k.to_string());
        out.push(Device {
            backend: "drm".into(),
            id: format!("{}/xcp{k}", gpu.id),
            sysfs_path: x.parent.display().to_string(),
            bus: gpu.bus.clone(),
            pci: gpu.pci.clone(),
            pci_function: Some(gpu.sysfs_path.clone()),
            driver: gpu.driver.clone(),
            numa_node: gpu.numa_node,
            links: by_path_links(root, &format!("platform-{}", x.name), &kept, report),
            nodes: kept,
            attrs,
            uuid: node.unique_id.map(kfd::gpu_uuid),
            ..Default::default()
        });
    }
    // GPUs whose mode needs more partitions than the topology lists.
    let nodes_dir = sys_path(kfd::NODES);
    for (i, (gpu, _)) in gpus.iter().enumerate() {
        let Some(mode) = gpu.attrs.get(COMPUTE_PARTITION) else {
            continue;
        };
        let xcds = if mode == "CPX" {
            let path = Path::new(&gpu.sysfs_path).join("available_compute_partition");
            match root.read_attr_opt(&path) {
                Ok(v) => v.as_deref().and_then(xcds_from_available),
                Err(e) => {
                    report.warn(&path, format!("{}; ignoring it", e.reason()));
                    None
                }
            }
        } else {
            None
        };
        let Some((needed, exact)) = partitions_needed(mode, xcds) else {
            continue;
        };
        let found = owned.get(&i).map_or(0, Vec::len);
        if found >= needed {
            continue;
        }
        let at_least = if exact { "" } else { "at least " };
        let why = match topology {
            Topology::Missing => format!(
                "there is no KFD topology ({}: is amdgpu's KFD loaded?) to say which amdgpu_xcp \
                 devices are its partitions",
                nodes_dir.display()
            ),
            Topology::Unreadable(reason) => format!(
                "the KFD topology ({}) cannot be read ({reason}) to say which amdgpu_xcp devices \
                 are its partitions",
                nodes_dir.display()
            ),
            Topology::Nodes(_) => format!(
                "the KFD topology ({}) lists {found}; a partition without a KFD node cannot be \
                 told from an idle amdgpu_xcp device",
                nodes_dir.display()
            ),
        };
        report.warn(
            Path::new(&gpu.sysfs_path).join("current_compute_partition"),
            format!(
                "GPU {} is in {mode} mode ({at_least}{needed} compute partitions), but {why}; \
                 only the partitions with a KFD node are offered",
                gpu.id
            ),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> PciAddress {
        s.parse().unwrap()
    }

    fn node(n: u32, domain: u32, location_id: u32) -> GpuNode {
        GpuNode {
            node: n,
            path: PathBuf::from(format!("/sys/class/kfd/kfd/topology/nodes/{n}/properties")),
            render_minor: 128 + n,
            domain,
            location_id,
            unique_id: None,
        }
    }

    #[test]
    fn xcp_names() {
        for ok in ["amdgpu_xcp_0", "amdgpu_xcp_13", "amdgpu_xcp.7"] {
            assert!(is_xcp_name(ok), "{ok}");
        }
        for bad in [
            "amdgpu_xcp",
            "amdgpu_xcp_",
            "amdgpu_xcp_x",
            "amdgpu_xcp_1a",
            "amdgpu_xcp_123456",
            "0000:05:00.0",
            "simple-framebuffer.0",
        ] {
            assert!(!is_xcp_name(bad), "{bad}");
        }
    }

    #[test]
    fn nodes_belong_to_the_gpu_their_location_names() {
        let gpus = [
            addr("0000:05:00.0"),
            addr("0000:85:00.0"),
            addr("0001:05:00.0"),
        ];
        // A GPU in SPX, and partition 0 of a partitioned one: pci_dev_id().
        assert_eq!(owner(&node(1, 0, 0x0500), &gpus), Ok(0));
        assert_eq!(owner(&node(2, 0, 0x8500), &gpus), Ok(1));
        assert_eq!(owner(&node(3, 1, 0x0500), &gpus), Ok(2));
        // Partitions 1-7 of a partitioned GPU: the node id ORed in.
        for k in 1..8 {
            assert_eq!(owner(&node(4, 0, 0x0500 | k), &gpus), Ok(0), "{k}");
        }
        // The kernel that put the node id in bits 28-31.
        assert_eq!(owner(&node(5, 0, 3 << 28 | 0x8500), &gpus), Ok(1));
        // Nothing there: another bus, slot or domain.
        for (domain, loc) in [(0, 0x0600), (0, 0x0508), (2, 0x0500)] {
            let e = owner(&node(6, domain, loc), &gpus).unwrap_err();
            assert!(e.contains("is no AMD GPU with DRM nodes here"), "{e}");
        }
        assert_eq!(
            owner(&node(6, 0, 0x0508), &gpus).unwrap_err(),
            "domain 0 location_id 1288 (PCI 0000:05:01.x) is no AMD GPU with DRM nodes here"
        );
        // An exact match wins over a partition of a function 0 beside it;
        // two functions a node could be a partition of are ambiguous.
        let two = [addr("0000:05:00.0"), addr("0000:05:00.1")];
        assert_eq!(owner(&node(7, 0, 0x0501), &two), Ok(1));
        let two = [addr("0000:05:00.0"), addr("0000:05:00.2")];
        let e = owner(&node(7, 0, 0x0503), &two).unwrap_err();
        assert!(e.contains("could be several AMD GPUs"), "{e}");
    }

    #[test]
    fn modes_and_what_they_need() {
        assert_eq!(partitions_needed("SPX", Some(8)), None);
        assert_eq!(partitions_needed("DPX", Some(8)), Some((2, true)));
        assert_eq!(partitions_needed("TPX", Some(6)), Some((3, true)));
        assert_eq!(partitions_needed("QPX", None), Some((4, true)));
        assert_eq!(partitions_needed("CPX", Some(8)), Some((8, true)));
        assert_eq!(partitions_needed("CPX", None), Some((2, false)));
        assert_eq!(partitions_needed("UNKNOWN", None), None);
        for (available, xcds) in [
            ("SPX, DPX, QPX, CPX", Some(8)),
            ("SPX, TPX, CPX", Some(6)),
            ("SPX, DPX, CPX", Some(4)),
            ("SPX, CPX", Some(2)),
            ("Not supported", None),
            ("", None),
        ] {
            assert_eq!(xcds_from_available(available), xcds, "{available:?}");
        }
    }

    #[test]
    fn partitions_are_numbered_by_the_node_id_in_location_id() {
        let gpu = addr("0000:05:00.0");
        let nodes: Vec<GpuNode> = [1, 2, 4, 7]
            .iter()
            .map(|&k| node(k, 0, 0x0500 | k))
            .collect();
        let refs: Vec<&GpuNode> = nodes.iter().collect();
        // Partition 3 has no node: the others keep their numbers.
        assert_eq!(partition_numbers(&gpu, &refs), [1, 2, 4, 7]);
        // The kernel that used bits 28-31.
        let high: Vec<GpuNode> = [1, 2]
            .iter()
            .map(|&k| node(k, 0, k << 28 | 0x0500))
            .collect();
        assert_eq!(
            partition_numbers(&gpu, &high.iter().collect::<Vec<_>>()),
            [1, 2]
        );
        // A location_id without the node id (all say 0), repeated numbers, or
        // a GPU whose function is not 0: node order.
        for (gpu, locs) in [
            (addr("0000:05:00.0"), [0x0500, 0x0500, 0x0500]),
            (addr("0000:05:00.0"), [0x0501, 0x0501, 0x0502]),
            (addr("0000:05:00.1"), [0x0501, 0x0503, 0x0505]),
        ] {
            let nodes: Vec<GpuNode> = locs.iter().zip(3..).map(|(&l, n)| node(n, 0, l)).collect();
            let refs: Vec<&GpuNode> = nodes.iter().collect();
            assert_eq!(partition_numbers(&gpu, &refs), [1, 2, 3], "{locs:?}");
        }
    }
}

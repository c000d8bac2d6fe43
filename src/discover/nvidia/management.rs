//! The management device: what a container that manages the GPUs rather
//! than computing on one of them needs, as one device (NVIDIA's Fabric
//! Manager, DCGM, the IMEX daemon, `nvidia-smi mig`): every GPU's
//! `/dev/nvidiaN`, the control nodes, and the privileged nodes no GPU
//! device carries:
//!
//! - the MIG `config` and `monitor` capabilities
//!   (`/proc/driver/nvidia/capabilities/mig/{config,monitor}`), whether or
//!   not MIG is enabled;
//! - the fabric-management capabilities: NVLink's
//!   (`/proc/driver/nvidia-nvlink/capabilities/fabric-mgmt`, which Fabric
//!   Manager needs on NVSwitch systems) and IMEX's
//!   (`/proc/driver/nvidia/capabilities/fabric-imex-mgmt`), each a
//!   `/dev/nvidia-caps/nvidia-capN` of the `nvidia-caps` major, N its
//!   `DeviceFileMinor`;
//! - `/dev/nvidia-nvlink` (minor 0 of `nvidia-nvlink`), written with its
//!   numbers when the module has its major, as `nvidia-modprobe` makes it
//!   on demand;
//! - with NVSwitches (entries of `/proc/driver/nvidia-nvswitch/devices`,
//!   `procfs_nvswitch.c` of open-gpu-kernel-modules), `nvidia-nvswitchctl`
//!   (minor 255 of `nvidia-nvswitch`) and each `/dev/nvidia-nvswitchN` that
//!   exists with that major (N < 64, `NVSWITCH_DEVICE_INSTANCE_MAX`). The
//!   driver gives a switch the first free minor, and procfs does not say
//!   which, so only nodes that exist are offered: fewer than there are
//!   switches is said.
//!
//! nvidia-ctk's management mode leaves the NVSwitch and NVLink nodes out;
//! Fabric Manager's guide lists them as what it opens, so they are here.
//! Every node but the control nodes has the role [`ROLE`], which no GPU
//! generator takes: only the opt-in `nvidia-management` generator does.

use std::collections::BTreeMap;

use super::{numbered_node, proc};
use crate::discover::Report;
use crate::model::{Device, Node};
use crate::root::{HostRoot, dev_path, proc_path};

/// The role of the management device's own nodes.
pub const ROLE: &str = "nvidia-management";

/// Most NVSwitches the driver numbers (`NVSWITCH_DEVICE_INSTANCE_MAX`).
const MAX_SWITCHES: u32 = 64;

/// The minor of `nvidia-nvswitchctl`.
const SWITCH_CTL_MINOR: u32 = 255;

/// The management device, from the GPUs' nodes and the control nodes
/// found, the `/proc/devices` majors, and the `nvidia-caps` major.
pub fn device(
    root: &HostRoot,
    gpu_nodes: &[Node],
    control: &[Node],
    majors: &BTreeMap<String, u32>,
    report: &mut Report,
) -> Device {
    let mut nodes: Vec<Node> = gpu_nodes.iter().map(|n| as_role(n.clone())).collect();
    nodes.sort_by_key(|n| n.minor);
    if let Some(&caps) = majors.get("nvidia-caps") {
        for file in [
            "driver/nvidia/capabilities/mig/config",
            "driver/nvidia/capabilities/mig/monitor",
            "driver/nvidia-nvlink/capabilities/fabric-mgmt",
            "driver/nvidia/capabilities/fabric-imex-mgmt",
        ] {
            if let Some(n) = capability(root, &proc_path(file), caps, report) {
                nodes.push(n);
            }
        }
    }
    if let Some(&major) = majors.get("nvidia-nvlink")
        && let Some(n) = numbered_node(
            root,
            ROLE,
            dev_path("nvidia-nvlink"),
            major,
            0,
            true,
            report,
        )
    {
        nodes.push(n);
    }
    nodes.extend(switches(root, majors, report));
    nodes.extend(control.iter().cloned());
    nodes.dedup_by(|a, b| a.path == b.path);
    Device {
        backend: "nvidia".into(),
        id: "management".into(),
        sysfs_path: String::new(),
        bus: "virtual".into(),
        nodes,
        ..Default::default()
    }
}

fn as_role(mut n: Node) -> Node {
    n.role = ROLE.to_string();
    n
}

/// The `nvidia-caps` node of the capability file `path`, when the driver
/// has it.
fn capability(
    root: &HostRoot,
    path: &std::path::Path,
    major: u32,
    report: &mut Report,
) -> Option<Node> {
    let text = root.read_attr_opt(path).ok().flatten()?;
    let Some(c) = proc::parse_capability(&text) else {
        report.warn(
            path,
            "no numeric DeviceFileMinor; leaving this capability out of the management device",
        );
        return None;
    };
    numbered_node(
        root,
        ROLE,
        dev_path(&format!("nvidia-caps/nvidia-cap{}", c.minor)),
        major,
        c.minor,
        true,
        report,
    )
}

/// `nvidia-nvswitchctl` and the `nvidia-nvswitchN` nodes, where the
/// driver has NVSwitches.
fn switches(root: &HostRoot, majors: &BTreeMap<String, u32>, report: &mut Report) -> Vec<Node> {
    let Some(&major) = majors.get("nvidia-nvswitch") else {
        return Vec::new();
    };
    let dir = proc_path("driver/nvidia-nvswitch/devices");
    let count = root
        .list_dir_opt(&dir)
        .unwrap_or_default()
        .iter()
        .filter(|n| n.parse::<crate::sysfs::PciAddress>().is_ok())
        .count();
    if count == 0 {
        return Vec::new();
    }
    let mut out: Vec<Node> = numbered_node(
        root,
        ROLE,
        dev_path("nvidia-nvswitchctl"),
        major,
        SWITCH_CTL_MINOR,
        true,
        report,
    )
    .into_iter()
    .collect();
    let found: Vec<Node> = (0..MAX_SWITCHES)
        .filter_map(|n| {
            numbered_node(
                root,
                ROLE,
                dev_path(&format!("nvidia-nvswitch{n}")),
                major,
                n,
                false,
                report,
            )
        })
        .collect();
    if found.len() < count {
        report.warn(
            &dir,
            format!(
                "{count} NVSwitches, but {} /dev/nvidia-nvswitchN nodes: the driver does not say which \
                 minor each switch has, so only existing nodes are given (`nvidia-modprobe -s -c N` makes \
                 node N); regenerate once they exist",
                found.len()
            ),
        );
    }
    out.extend(found);
    out
}

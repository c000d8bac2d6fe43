//! GPUDirect's character devices, each one device of its own, where its
//! module is loaded (its name is in `/proc/devices`):
//!
//! - GDRCopy (`gdrdrv`, github.com/NVIDIA/gdrcopy): `register_chrdev` with
//!   the name `gdrdrv`; the module makes no node, its install scripts
//!   `mknod /dev/gdrdrv c <major> 0`. Offered with its numbers, made or
//!   not (the runtime creates it in the container).
//! - GPUDirect Storage (`nvidia-fs`, github.com/NVIDIA/gds-nvidia-fs):
//!   the region `nvidia-fs` with 16 minors (`MAX_NVFS_DEVICES`), one class
//!   device `nvidia-fs<N>` of minor N each, which udev makes
//!   `/dev/nvidia-fs<N>`. The nodes that exist with those numbers are
//!   offered together; none is said.
//!
//! Something else at a node's path, or a node of other numbers, is left
//! out with a warning. nvidia-ctk gives these in its `gdrcopy` and `gds`
//! modes; here the opt-in generators `nvidia-gdrcopy` and `nvidia-gds`
//! take them by their roles ([`GDRDRV_ROLE`], [`NVIDIA_FS_ROLE`]).

use std::collections::BTreeMap;

use super::numbered_node;
use crate::discover::Report;
use crate::model::{Device, Node};
use crate::root::{HostRoot, dev_path, proc_path};

/// The role of `/dev/gdrdrv`.
pub const GDRDRV_ROLE: &str = "nvidia-gdrdrv";
/// The role of the `/dev/nvidia-fsN` nodes.
pub const NVIDIA_FS_ROLE: &str = "nvidia-fs";
/// How many minors `nvidia-fs` registers (`MAX_NVFS_DEVICES`).
const NVIDIA_FS_MINORS: u32 = 16;

fn device(id: &str, nodes: Vec<Node>) -> Device {
    Device {
        backend: "nvidia".into(),
        id: id.into(),
        sysfs_path: String::new(),
        bus: "virtual".into(),
        nodes,
        ..Default::default()
    }
}

/// The GPUDirect devices whose modules `majors` (of `/proc/devices`)
/// name.
pub fn devices(
    root: &HostRoot,
    majors: &BTreeMap<String, u32>,
    report: &mut Report,
) -> Vec<Device> {
    let mut out = Vec::new();
    if let Some(&major) = majors.get("gdrdrv")
        && let Some(n) = numbered_node(
            root,
            GDRDRV_ROLE,
            dev_path("gdrdrv"),
            major,
            0,
            true,
            report,
        )
    {
        out.push(device("gdrdrv", vec![n]));
    }
    if let Some(&major) = majors.get("nvidia-fs") {
        let nodes: Vec<Node> = (0..NVIDIA_FS_MINORS)
            .filter_map(|n| {
                numbered_node(
                    root,
                    NVIDIA_FS_ROLE,
                    dev_path(&format!("nvidia-fs{n}")),
                    major,
                    n,
                    false,
                    report,
                )
            })
            .collect();
        if nodes.is_empty() {
            report.warn(
                proc_path("devices"),
                "nvidia-fs (GPUDirect Storage) is loaded but /dev has no nvidia-fsN node \
                 (udev makes them); offering no GPUDirect Storage device",
            );
        } else {
            out.push(device("nvidia-fs", nodes));
        }
    }
    out
}

//! VFIO backend: PCI devices bound to `vfio-pci` (or a `*-vfio-pci`
//! variant such as `mlx5-vfio-pci`), and the VFIO nodes any such device
//! needs (shared with the SR-IOV backend, whose VFs may be on vfio-pci).
//!
//! Two ways to reach a device, both reported as nodes with their role:
//! - legacy: the container node `/dev/vfio/vfio` (misc 10:196,
//!   `/sys/class/misc/vfio/dev`) plus the group node `/dev/vfio/<group>`,
//!   or `/dev/vfio/noiommu-<group>` when the group's `name` reads
//!   `vfio-noiommu`. Its numbers come from `/sys/class/vfio/<entry>/dev`:
//!   the minor is an allocation index, not the group number.
//! - iommufd: `/dev/iommu` (misc, dynamic minor, `/sys/class/misc/iommu/dev`)
//!   plus the device's cdev `/dev/vfio/devices/vfioX`, from
//!   `<pci>/vfio-dev/vfioX/dev`.
//!
//! The mode a host offers is chosen per device: legacy when its group node
//! exists, else iommufd when its cdev does ([`VfioInfo::mode`]); generators
//! can override it. When the host's `/dev` can be read, a node listed in
//! sysfs but missing from `/dev` is reported and not used.
//!
//! A group with several devices is all-or-nothing: the group node opens
//! every device in it. [`VfioInfo::group_devices`] lists them so that specs
//! and users can see it.

use std::cell::OnceCell;
use std::path::Path;

use super::devnode::{OnHost, on_host, with_host_checked};
use super::pci::{link, read_function};
use super::{Backend, Context, Error, Report};
use crate::model::{Device, Node, VfioInfo};
use crate::root::{HostRoot, sys_path};
use crate::sysfs::node_number;

/// The VFIO backend.
#[derive(Debug, Clone, Copy)]
pub struct Vfio;

/// Whether a driver name is a VFIO PCI driver.
pub fn is_vfio_driver(driver: &str) -> bool {
    driver == "vfio-pci" || driver.ends_with("-vfio-pci")
}

impl Backend for Vfio {
    fn name(&self) -> &'static str {
        "vfio"
    }

    fn precedence(&self) -> u8 {
        20
    }

    fn uevent_subsystems(&self) -> Option<&'static [&'static str]> {
        // vfio-pci binding (pci), group nodes (vfio), iommufd cdevs
        // (vfio-dev), /dev/vfio/vfio and /dev/iommu (misc).
        Some(&["pci", "vfio", "vfio-dev", "misc"])
    }

    fn discover(&self, cx: &Context, report: &mut Report) -> Result<Vec<Device>, Error> {
        let root = cx.root;
        let root_err = |source| Error::Root {
            backend: "vfio",
            source,
        };
        let bus = sys_path("bus/pci/devices");
        let names = root.list_dir_opt(&bus).map_err(root_err)?;
        let mut devices = Vec::new();
        let shared = VfioShared::default();
        for name in names {
            let entry = bus.join(&name);
            let Some(driver) = link(root, &entry.join("driver"), report) else {
                continue;
            };
            if !is_vfio_driver(&driver) {
                continue;
            }
            let dir = match root.resolve(&entry) {
                Ok(d) => d,
                Err(e) => {
                    report.warn(&entry, format!("{}; skipping", e.reason()));
                    continue;
                }
            };
            let Some(f) = read_function(root, &dir, cx.pci_ids(), report) else {
                continue;
            };
            let Some((vfio, nodes)) = vfio_nodes(root, &dir, &f.info.address, &shared, report)
            else {
                continue;
            };
            devices.push(Device {
                backend: "vfio".into(),
                id: f.info.address.clone(),
                sysfs_path: dir.display().to_string(),
                bus: "pci".into(),
                driver: f.driver,
                numa_node: f.numa_node,
                pci: Some(f.info),
                nodes,
                vfio: Some(vfio),
                ..Default::default()
            });
        }
        Ok(devices)
    }
}

/// The nodes every VFIO device shares, read once per pass (and so warned
/// about once): the legacy container `/dev/vfio/vfio` and iommufd's
/// `/dev/iommu`, each when a device first needs it.
#[derive(Debug, Default)]
pub struct VfioShared {
    container: OnceCell<Option<Node>>,
    iommufd: OnceCell<Option<Node>>,
}

impl VfioShared {
    fn container(&self, root: &HostRoot, report: &mut Report) -> Option<Node> {
        self.container
            .get_or_init(|| misc_node(root, "vfio", "vfio-container", "vfio/vfio", report))
            .clone()
    }

    fn iommufd(&self, root: &HostRoot, report: &mut Report) -> Option<Node> {
        self.iommufd
            .get_or_init(|| misc_node(root, "iommu", "iommufd", "iommu", report))
            .clone()
    }
}

/// The misc device `name` (`/sys/class/misc/<name>`) at `/dev/<devname>`,
/// as the host has it.
pub(crate) fn misc_node(
    root: &HostRoot,
    name: &str,
    role: &str,
    devname: &str,
    report: &mut Report,
) -> Option<Node> {
    super::devnode::read_node(
        root,
        &sys_path(&format!("class/misc/{name}")),
        name,
        role,
        devname,
        report,
    )
    .and_then(|n| require_host_node(root, n, report))
}

/// Checks a node against the host's `/dev`: keeps it (with mode and owner)
/// when it is there as a character device or when `/dev` cannot be read;
/// drops it with a warning when `/dev` is readable and the node is missing
/// or something else.
pub(crate) fn require_host_node(root: &HostRoot, node: Node, report: &mut Report) -> Option<Node> {
    match on_host(root, &node) {
        OnHost::Char(e) => Some(with_host_checked(node, &e, report)),
        OnHost::Other(kind) => {
            report.warn(
                &node.path,
                format!("not a character device (a {kind}); not using it"),
            );
            None
        }
        OnHost::Missing if root.has_devfs() => {
            report.warn(
                &node.path,
                format!(
                    "listed in sysfs ({}:{}) but missing from /dev; not using it",
                    node.major, node.minor
                ),
            );
            None
        }
        OnHost::Missing => Some(node),
        OnHost::Unreadable(e) => {
            report.warn(&node.path, format!("{}; not using it", e.reason()));
            None
        }
    }
}

/// The VFIO facts and nodes of the PCI function at real path `dir`.
/// `None` (with a warning) when it has no IOMMU group or no usable node.
pub fn vfio_nodes(
    root: &HostRoot,
    dir: &Path,
    address: &str,
    shared: &VfioShared,
    report: &mut Report,
) -> Option<(VfioInfo, Vec<Node>)> {
    let Some(group) = link(root, &dir.join("iommu_group"), report) else {
        report.warn(
            dir.join("iommu_group"),
            format!("{address} is bound to a VFIO driver but has no IOMMU group; skipping it"),
        );
        return None;
    };
    let group_dir = sys_path(&format!("kernel/iommu_groups/{group}"));
    let noiommu = root
        .read_attr_opt(&group_dir.join("name"))
        .ok()
        .flatten()
        .is_some_and(|n| n == "vfio-noiommu");
    let mut group_devices = root
        .list_dir_opt(&group_dir.join("devices"))
        .unwrap_or_default();
    if !group_devices.iter().any(|d| d == address) {
        group_devices.push(address.to_string());
    }
    group_devices.sort();

    let mut nodes = Vec::new();
    // Legacy: container + group node.
    let entry_name = if noiommu {
        format!("noiommu-{group}")
    } else {
        group.clone()
    };
    let group_node = super::devnode::read_node(
        root,
        &sys_path(&format!("class/vfio/{entry_name}")),
        &entry_name,
        "vfio-group",
        &format!("vfio/{entry_name}"),
        report,
    )
    .and_then(|n| require_host_node(root, n, report));
    let container = shared.container(root, report);
    // iommufd: cdev + /dev/iommu.
    let cdev = root
        .list_dir_opt(&dir.join("vfio-dev"))
        .unwrap_or_default()
        .into_iter()
        .find(|n| node_number(n, "vfio").is_some())
        .and_then(|n| {
            super::devnode::read_node(
                root,
                &dir.join("vfio-dev").join(&n),
                &n,
                "vfio-cdev",
                &format!("vfio/devices/{n}"),
                report,
            )
        })
        .and_then(|n| require_host_node(root, n, report));
    let iommufd = if cdev.is_some() {
        shared.iommufd(root, report)
    } else {
        None
    };
    let legacy_ok = group_node.is_some() && container.is_some();
    let iommufd_ok = cdev.is_some() && iommufd.is_some();
    let mode = if legacy_ok {
        "legacy"
    } else if iommufd_ok {
        "iommufd"
    } else {
        report.warn(
            dir,
            format!(
                "{address}: neither the VFIO group node (legacy) nor the device cdev with /dev/iommu \
                 (iommufd) is available; skipping it"
            ),
        );
        return None;
    };
    if legacy_ok {
        nodes.extend(container);
        nodes.extend(group_node);
    }
    if iommufd_ok {
        nodes.extend(iommufd);
        nodes.extend(cdev);
    }
    if group_devices.len() > 1 {
        tracing::info!(
            "{address}: IOMMU group {group} has {} devices ({}): a container given one gets the group",
            group_devices.len(),
            group_devices.join(", ")
        );
    }
    Some((
        VfioInfo {
            group,
            noiommu,
            group_devices,
            mode: mode.to_string(),
        },
        nodes,
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// The shared nodes are read when first needed and then kept for the
    /// pass: a second device does not read `/sys/class/misc/vfio` again,
    /// and a new pass does.
    #[test]
    fn the_shared_nodes_are_read_once_per_pass() {
        let tmp = tempfile::tempdir().unwrap();
        let misc = tmp.path().join("sys/class/misc/vfio");
        std::fs::create_dir_all(&misc).unwrap();
        std::fs::write(misc.join("dev"), "10:196\n").unwrap();
        let root = HostRoot::open(tmp.path()).unwrap();
        let mut report = Report::default();
        let pass = VfioShared::default();
        let node = pass.container(&root, &mut report).unwrap();
        assert_eq!(
            (node.path.as_str(), node.major, node.minor),
            ("/dev/vfio/vfio", 10, 196)
        );
        std::fs::remove_file(misc.join("dev")).unwrap();
        assert_eq!(pass.container(&root, &mut report), Some(node));
        assert!(report.warnings.is_empty());
        let next = VfioShared::default();
        assert_eq!(next.container(&root, &mut report), None);
    }
}

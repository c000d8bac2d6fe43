//! Device selection: which discovered devices a generator takes, and which
//! of their nodes. A separate stage from discovery, so backends never
//! filter by policy.

use serde::{Deserialize, Serialize};

use crate::model::{Device, Node};
use crate::sysfs::parse_hex_id;

/// Node roles the backends produce.
pub const NODE_ROLES: [&str; 29] = [
    "primary",
    "render",
    "accel",
    "accel-control",
    "mei",
    "kfd",
    "vfio-container",
    "vfio-group",
    "vfio-cdev",
    "iommufd",
    "rdma-verbs",
    "rdma-mad",
    "rdma-cm",
    "vhost-net",
    "tun",
    "vhost-vdpa",
    "nvidia-gpu",
    "nvidia-cap",
    "nvidia-control",
    "nvidia-modeset",
    "nvidia-uvm",
    "nvidia-uvm-tools",
    "nvidia-mig-config",
    "nvidia-mig-monitor",
    "nvidia-imex-channel",
    "nvidia-management",
    "nvidia-gdrdrv",
    "nvidia-fs",
    "generic",
];

/// Roles that never make a device selected on their own: shared nodes
/// (ROCm's kfd, RDMA's rdma_cm, vhost-net and tun, the NVIDIA control
/// nodes). The CDI plugin also treats them as never held exclusively.
pub const SHARED_ROLES: [&str; 8] = [
    "kfd",
    "rdma-cm",
    "vhost-net",
    "tun",
    "nvidia-control",
    "nvidia-modeset",
    "nvidia-uvm",
    "nvidia-uvm-tools",
];

/// Selectors; an empty list means "any".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Select {
    /// PCI vendor IDs to take (`"0x1002"`); non-PCI devices never match a
    /// non-empty list.
    #[serde(default)]
    pub vendor_ids: Vec<String>,
    /// PCI vendor IDs to leave out.
    #[serde(default)]
    pub exclude_vendor_ids: Vec<String>,
    /// Drivers to take (`amdgpu`).
    #[serde(default)]
    pub drivers: Vec<String>,
    /// Drivers to leave out (`nvidia`: the NVIDIA backend's GPUs, which it
    /// claims or reports). A device bound to no driver is not left out.
    #[serde(default)]
    pub exclude_drivers: Vec<String>,
    /// Buses to take (`pci`, `platform`).
    #[serde(default)]
    pub buses: Vec<String>,
    /// Node roles to keep (see [`NODE_ROLES`]); the seed's
    /// `want_device_nodes`. A device whose only wanted nodes are shared
    /// ones (kfd, rdma-cm, vhost-net, tun) is not taken, unless the
    /// backend has no nodes to offer for it at all (a netdev-only VF).
    #[serde(default)]
    pub node_roles: Vec<String>,
    /// PCI device IDs to take (`"0x101e"`), as the SR-IOV device plugin's
    /// `devices`.
    #[serde(default)]
    pub device_ids: Vec<String>,
    /// PCI addresses to take (`0000:3b:00.2`).
    #[serde(default)]
    pub pci_addresses: Vec<String>,
    /// PF netdev names (`ens1f0np0`), for VFs: the SR-IOV device plugin's
    /// `pfNames` (without its `#range` suffix).
    #[serde(default)]
    pub pf_names: Vec<String>,
    /// PF PCI addresses, for VFs: the SR-IOV device plugin's `rootDevices`.
    #[serde(default)]
    pub pf_addresses: Vec<String>,
    /// Link types (`ether`, `infiniband`), for network devices.
    #[serde(default)]
    pub link_types: Vec<String>,
    /// Network interface names (`ens1f0np0`, `ibp152s0`): a device is
    /// taken when one of its own netdevs is listed (a VF's, an RDMA
    /// device's ports'), as the RDMA shared device plugin's `ifNames`.
    #[serde(default)]
    pub if_names: Vec<String>,
}

/// Checks selector values; returns the field and the message.
pub(crate) fn check(s: &Select) -> Result<(), (String, String)> {
    for (field, list) in [
        ("vendor_ids", &s.vendor_ids),
        ("exclude_vendor_ids", &s.exclude_vendor_ids),
    ] {
        for (i, v) in list.iter().enumerate() {
            if parse_hex_id(v, 4).is_none() {
                return Err((
                    format!("{field}[{i}]"),
                    format!("{v:?} is not a PCI vendor ID like \"0x1002\""),
                ));
            }
        }
    }
    for (i, v) in s.device_ids.iter().enumerate() {
        if parse_hex_id(v, 4).is_none() {
            return Err((
                format!("device_ids[{i}]"),
                format!("{v:?} is not a PCI device ID like \"0x101e\""),
            ));
        }
    }
    for (field, list) in [
        ("pci_addresses", &s.pci_addresses),
        ("pf_addresses", &s.pf_addresses),
    ] {
        for (i, v) in list.iter().enumerate() {
            if v.parse::<crate::sysfs::PciAddress>()
                .map(|a| a.to_string())
                .as_deref()
                != Ok(v.as_str())
            {
                return Err((
                    format!("{field}[{i}]"),
                    format!("{v:?} is not a PCI address like \"0000:3b:00.2\" (lowercase)"),
                ));
            }
        }
    }
    for (i, v) in s.link_types.iter().enumerate() {
        if !matches!(v.as_str(), "ether" | "infiniband") {
            return Err((
                format!("link_types[{i}]"),
                format!("{v:?} is not a link type (expected ether or infiniband)"),
            ));
        }
    }
    for (i, v) in s.if_names.iter().enumerate() {
        if !crate::discover::infiniband::is_netdev_name(v) {
            return Err((
                format!("if_names[{i}]"),
                format!(
                    "{v:?} is not a network interface name (1-15 printable characters, no / : or ,)"
                ),
            ));
        }
    }
    for (i, r) in s.node_roles.iter().enumerate() {
        if !NODE_ROLES.contains(&r.as_str()) {
            return Err((
                format!("node_roles[{i}]"),
                format!(
                    "{r:?} is not a node role (expected one of {})",
                    NODE_ROLES.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

fn same_id(a: &str, b: &str) -> bool {
    parse_hex_id(a, 4).is_some() && parse_hex_id(a, 4) == parse_hex_id(b, 4)
}

impl Select {
    /// The device with only the wanted nodes, or `None` when it is not
    /// selected.
    pub fn apply(&self, d: &Device) -> Option<Device> {
        let vendor = d.pci.as_ref().map(|p| p.vendor_id.as_str());
        if !self.vendor_ids.is_empty()
            && !vendor.is_some_and(|v| self.vendor_ids.iter().any(|w| same_id(w, v)))
        {
            return None;
        }
        if vendor.is_some_and(|v| self.exclude_vendor_ids.iter().any(|w| same_id(w, v))) {
            return None;
        }
        if !self.drivers.is_empty()
            && !d
                .driver
                .as_ref()
                .is_some_and(|drv| self.drivers.contains(drv))
        {
            return None;
        }
        if d.driver
            .as_ref()
            .is_some_and(|drv| self.exclude_drivers.contains(drv))
        {
            return None;
        }
        if !self.buses.is_empty() && !self.buses.contains(&d.bus) {
            return None;
        }
        let device_id = d.pci.as_ref().map(|p| p.device_id.as_str());
        if !self.device_ids.is_empty()
            && !device_id.is_some_and(|v| self.device_ids.iter().any(|w| same_id(w, v)))
        {
            return None;
        }
        let address = d.pci.as_ref().map(|p| p.address.as_str());
        if !self.pci_addresses.is_empty()
            && !address.is_some_and(|a| self.pci_addresses.iter().any(|w| w == a))
        {
            return None;
        }
        let net = d.net.as_ref();
        if !self.pf_names.is_empty()
            && !net
                .and_then(|n| n.pf_netdev.as_ref())
                .is_some_and(|p| self.pf_names.contains(p))
        {
            return None;
        }
        if !self.pf_addresses.is_empty()
            && !net
                .and_then(|n| n.pf.as_ref())
                .is_some_and(|p| self.pf_addresses.contains(p))
        {
            return None;
        }
        if !self.link_types.is_empty()
            && !net
                .and_then(|n| n.link_type.as_ref())
                .is_some_and(|l| self.link_types.contains(l))
        {
            return None;
        }
        if !self.if_names.is_empty()
            && !net.is_some_and(|n| n.netdevs.iter().any(|d| self.if_names.contains(d)))
        {
            return None;
        }
        let nodes: Vec<Node> = d
            .nodes
            .iter()
            .filter(|n| self.node_roles.is_empty() || self.node_roles.contains(&n.role))
            .cloned()
            .collect();
        // A device selected only for a shared node (kfd) is not a match;
        // a device without any own node (a netdev-only VF) still is.
        let own = |n: &Node| !SHARED_ROLES.contains(&n.role.as_str());
        if d.nodes.iter().any(own) {
            if !nodes.iter().any(own) {
                return None;
            }
        } else if d.net.is_none() && d.vdpa.is_none() {
            return None;
        }
        let links = d
            .links
            .iter()
            .filter(|l| nodes.iter().any(|n| n.path == l.node))
            .cloned()
            .collect();
        Some(Device {
            nodes,
            links,
            ..d.clone()
        })
    }
}

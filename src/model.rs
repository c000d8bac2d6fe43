//! The device model: what discovery found, independent of CDI.
//!
//! Backends produce [`Device`]s; generators select among them and templates
//! turn them into spec content. Everything here is plain data with a
//! stable order, serialized as-is for `cdigen discover -o json` and for
//! template contexts.

use std::collections::BTreeMap;

use serde::Serialize;

/// A device found on the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Device {
    /// The backend that found it (`drm`).
    pub backend: String,
    /// Stable identity: the PCI address (`0000:03:00.0`) or, for other
    /// buses, `<bus>:<name>` (`platform:fec00000.v3d`).
    pub id: String,
    /// Real sysfs path of the device (`/sys/devices/...`): the key under
    /// which backends claim devices.
    pub sysfs_path: String,
    /// Bus of the device (`pci`, `platform`, `usb`, ...).
    pub bus: String,
    /// PCI details, for PCI devices.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pci: Option<PciInfo>,
    /// Bound driver, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// NUMA node, when the device has an affinity.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub numa_node: Option<u32>,
    /// Device nodes that give access to it.
    pub nodes: Vec<Node>,
    /// `/dev` symlinks that name its nodes (`/dev/dri/by-path/...`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<Link>,
    /// Backend-specific facts (`compatible`, `devtype`, ...).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub attrs: BTreeMap<String, String>,
}

/// PCI identity of a device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PciInfo {
    /// `0000:03:00.0`.
    pub address: String,
    /// Vendor ID, `0x1002`.
    pub vendor_id: String,
    /// Device ID, `0x744c`.
    pub device_id: String,
    /// Subsystem vendor ID, when present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subsystem_vendor_id: Option<String>,
    /// Subsystem device ID, when present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subsystem_device_id: Option<String>,
    /// Class code, `0x030000`.
    pub class: String,
    /// Vendor name from the PCI ID database, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vendor_name: Option<String>,
    /// Device name from the PCI ID database, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    /// IOMMU group number, when the IOMMU is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iommu_group: Option<String>,
}

/// A device node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Node {
    /// What the node is for: `primary`, `render`, `accel`, `kfd`, ...
    pub role: String,
    /// Kernel name (`card1`).
    pub name: String,
    /// Host path (`/dev/dri/card1`).
    pub path: String,
    /// `c` (character) or `b` (block).
    #[serde(rename = "type")]
    pub node_type: String,
    /// Major number, from sysfs.
    pub major: u32,
    /// Minor number, from sysfs.
    pub minor: u32,
    /// The node as it is in the host's `/dev`, when it exists there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<HostNode>,
}

/// Mode and owner of a node in the host's `/dev`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HostNode {
    /// Permission bits.
    pub mode: u32,
    /// Owner uid.
    pub uid: u32,
    /// Group gid.
    pub gid: u32,
}

/// A `/dev` symlink naming one of a device's nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Link {
    /// The link (`/dev/dri/by-path/pci-0000:03:00.0-card`).
    pub path: String,
    /// Its target as written (`../card1`).
    pub target: String,
    /// The node it names (`/dev/dri/card1`).
    pub node: String,
}

//! Device selection: which discovered devices a generator takes, and which
//! of their nodes. A separate stage from discovery, so backends never
//! filter by policy.

use serde::{Deserialize, Serialize};

use crate::model::{Device, Node};
use crate::sysfs::parse_hex_id;

/// Node roles the backends produce.
pub const NODE_ROLES: [&str; 4] = ["primary", "render", "accel", "kfd"];

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
    /// Buses to take (`pci`, `platform`).
    #[serde(default)]
    pub buses: Vec<String>,
    /// Node roles to keep (`primary`, `render`, `accel`, `kfd`); a device
    /// with none of them is not taken. The seed's `want_device_nodes`.
    #[serde(default)]
    pub node_roles: Vec<String>,
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
        if !self.buses.is_empty() && !self.buses.contains(&d.bus) {
            return None;
        }
        let nodes: Vec<Node> = d
            .nodes
            .iter()
            .filter(|n| self.node_roles.is_empty() || self.node_roles.contains(&n.role))
            .cloned()
            .collect();
        // A device selected only for a shared node (kfd) is not a match.
        if !nodes.iter().any(|n| n.role != "kfd") {
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

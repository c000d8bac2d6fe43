//! The typed CDI spec model, field for field as the reference library's
//! `specs-go` defines it at spec version 1.1.0.
//!
//! Field order is the order Go writes, so serialized output is stable.
//! Every struct rejects unknown fields (the reference library parses
//! strictly, and a runtime fails to load a file with a field it does not
//! know). Maps reject duplicate keys (a strict map deserializer).
//!
//! Removed fields (`intelRdt.enableCMT` and `intelRdt.enableMBM`, gone in
//! 1.1.0) are not modelled: a v1.1.0 runtime rejects them, so we do too.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A CDI spec: one vendor/class (`kind`) and the devices it defines.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Spec {
    /// The spec version this file claims (`"0.5.0"`). Required.
    #[serde(default)]
    pub cdi_version: String,
    /// `vendor/class`, e.g. `amd.com/gpu`. Required.
    #[serde(default)]
    pub kind: String,
    /// Free-form key/value pairs. Added in CDI v0.6.0.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "strict_map::deserialize"
    )]
    pub annotations: BTreeMap<String, String>,
    /// The devices a user can request. Required, at least one.
    #[serde(default)]
    pub devices: Vec<Device>,
    /// Edits applied when any device of this spec is requested.
    #[serde(default, skip_serializing_if = "ContainerEdits::is_empty")]
    pub container_edits: ContainerEdits,
}

/// One requestable device (`vendor/class=name`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Device {
    /// The device name, unique within the spec. Required.
    #[serde(default)]
    pub name: String,
    /// Free-form key/value pairs. Added in CDI v0.6.0.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "strict_map::deserialize"
    )]
    pub annotations: BTreeMap<String, String>,
    /// Edits applied when this device is requested. Required, non-empty.
    #[serde(default)]
    pub container_edits: ContainerEdits,
}

/// Edits to a container's OCI spec.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContainerEdits {
    /// `NAME=value` entries appended to the container environment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// Device nodes to create in the container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_nodes: Vec<DeviceNode>,
    /// Network devices moved into the container. Added in CDI v1.1.0.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub net_devices: Vec<NetDevice>,
    /// OCI hooks to run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<Hook>,
    /// Mounts to add.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mounts: Vec<Mount>,
    /// Linux resctrl settings. Added in CDI v0.7.0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intel_rdt: Option<IntelRdt>,
    /// Supplementary group IDs for the container process (0 is ignored).
    /// Added in CDI v0.7.0.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_gids: Vec<u32>,
}

impl ContainerEdits {
    /// True when the edits would change nothing.
    pub fn is_empty(&self) -> bool {
        self.env.is_empty()
            && self.device_nodes.is_empty()
            && self.net_devices.is_empty()
            && self.hooks.is_empty()
            && self.mounts.is_empty()
            && self.intel_rdt.is_none()
            && self.additional_gids.is_empty()
    }
}

/// A device node to create in the container.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeviceNode {
    /// Path in the container. Required.
    #[serde(default)]
    pub path: String,
    /// Path on the host when it differs from `path`. Added in CDI v0.5.0.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host_path: String,
    /// `c`, `b`, `u`, `p`, or empty (the runtime stats the host node).
    #[serde(default, rename = "type", skip_serializing_if = "String::is_empty")]
    pub node_type: String,
    /// Major number; 0 means unset.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub major: i64,
    /// Minor number; 0 means unset (as in the reference library).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub minor: i64,
    /// File mode, written as a decimal number (438 = 0o666).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_mode: Option<u32>,
    /// Cgroup access: any of `r`, `w`, `m`; empty means `rwm`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub permissions: String,
    /// Owner in the container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    /// Group in the container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid: Option<u32>,
}

/// A mount to add to the container.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Mount {
    /// Source on the host. Required.
    #[serde(default)]
    pub host_path: String,
    /// Destination in the container. Required.
    #[serde(default)]
    pub container_path: String,
    /// OCI mount options (`ro`, `nosuid`, `bind`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
    /// Filesystem type. Added in CDI v0.4.0.
    #[serde(default, rename = "type", skip_serializing_if = "String::is_empty")]
    pub mount_type: String,
}

/// An OCI hook.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Hook {
    /// When the hook runs (`createContainer`, ...). Required.
    #[serde(default)]
    pub hook_name: String,
    /// Absolute path of the executable. Required.
    #[serde(default)]
    pub path: String,
    /// argv, including argv\[0\].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// `NAME=value` environment of the hook.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// Seconds before the hook is aborted; must be > 0 when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<i64>,
}

/// Linux resctrl settings. Added in CDI v0.7.0.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IntelRdt {
    /// Class of service name.
    #[serde(default, rename = "closID", skip_serializing_if = "String::is_empty")]
    pub clos_id: String,
    /// L3 cache allocation schema.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub l3_cache_schema: String,
    /// Memory bandwidth allocation schema.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mem_bw_schema: String,
    /// Raw schemata lines. Added in CDI v1.1.0 (present, even empty, needs it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schemata: Option<Vec<String>>,
    /// Enable resctrl monitoring. Added in CDI v1.1.0. Kept as an option so
    /// that a present `false` is seen: a v1.0 runtime rejects the key itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_monitoring: Option<bool>,
}

/// A host network interface moved into the container. Added in CDI v1.1.0.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetDevice {
    /// Interface name on the host. Required.
    #[serde(default)]
    pub host_interface_name: String,
    /// Interface name in the container. Required.
    #[serde(default)]
    pub name: String,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

/// Deserializes a string map and rejects duplicate keys, which serde's
/// `BTreeMap` would otherwise resolve silently (last one wins).
pub(crate) mod strict_map {
    use std::collections::BTreeMap;
    use std::fmt;

    use serde::Deserializer;
    use serde::de::{Error, MapAccess, Visitor};

    struct StrictMap;

    impl<'de> Visitor<'de> for StrictMap {
        type Value = BTreeMap<String, String>;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a map of strings to strings")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
            let mut map = BTreeMap::new();
            while let Some((key, value)) = access.next_entry::<String, String>()? {
                if map.contains_key(&key) {
                    return Err(A::Error::custom(format!("duplicate key {key:?}")));
                }
                map.insert(key, value);
            }
            Ok(map)
        }

        fn visit_unit<E: Error>(self) -> Result<Self::Value, E> {
            Ok(BTreeMap::new())
        }

        fn visit_none<E: Error>(self) -> Result<Self::Value, E> {
            Ok(BTreeMap::new())
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<String, String>, D::Error> {
        d.deserialize_any(StrictMap)
    }
}

//! CDI spec versions and the minimum version a spec's content needs.
//!
//! Mirrors the reference library's `specs-go/version.go`: a table of
//! versions, newest first, each with a predicate "does this spec use a
//! feature added in this version?". Writers put the minimum in
//! `cdiVersion`, so that the oldest runtime able to read the content can.

use std::fmt;

use super::spec::{ContainerEdits, Spec};

/// A CDI spec version known to the reference library.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Version {
    /// 0.1.0 (pre-release; no longer accepted).
    V0_1_0,
    /// 0.2.0 (pre-release; no longer accepted).
    V0_2_0,
    /// 0.3.0: the first tagged release, the baseline.
    V0_3_0,
    /// 0.4.0: `mounts[].type`.
    V0_4_0,
    /// 0.5.0: `deviceNodes[].hostPath`, device names starting with a digit.
    V0_5_0,
    /// 0.6.0: annotations, `.` in the class.
    V0_6_0,
    /// 0.7.0: `intelRdt`, `additionalGids`.
    V0_7_0,
    /// 0.8.0: API change only.
    V0_8_0,
    /// 1.0.0: API change only.
    V1_0_0,
    /// 1.1.0: `netDevices`, `intelRdt.schemata`, `intelRdt.enableMonitoring`.
    V1_1_0,
}

impl Version {
    /// Every known version, oldest first.
    pub const ALL: [Version; 10] = [
        Version::V0_1_0,
        Version::V0_2_0,
        Version::V0_3_0,
        Version::V0_4_0,
        Version::V0_5_0,
        Version::V0_6_0,
        Version::V0_7_0,
        Version::V0_8_0,
        Version::V1_0_0,
        Version::V1_1_0,
    ];
    /// The oldest version still accepted by runtimes.
    pub const EARLIEST: Version = Version::V0_3_0;
    /// The newest version this model knows.
    pub const CURRENT: Version = Version::V1_1_0;

    /// The version as written in `cdiVersion` (`"0.5.0"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Version::V0_1_0 => "0.1.0",
            Version::V0_2_0 => "0.2.0",
            Version::V0_3_0 => "0.3.0",
            Version::V0_4_0 => "0.4.0",
            Version::V0_5_0 => "0.5.0",
            Version::V0_6_0 => "0.6.0",
            Version::V0_7_0 => "0.7.0",
            Version::V0_8_0 => "0.8.0",
            Version::V1_0_0 => "1.0.0",
            Version::V1_1_0 => "1.1.0",
        }
    }

    /// Parses a `cdiVersion` value. One leading `v` is accepted, as the
    /// reference library does; anything else must be a known version.
    pub fn parse(s: &str) -> Option<Version> {
        let bare = s.strip_prefix('v').unwrap_or(s);
        Version::ALL.into_iter().find(|v| v.as_str() == bare)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The minimum version a spec needs, with the first feature that needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// The minimum version.
    pub version: Version,
    /// What needs it, e.g. `annotations on device "gpu0"`; empty at the
    /// baseline.
    pub because: String,
}

/// Computes the minimum `cdiVersion` the spec's content needs.
pub fn minimum_required(spec: &Spec) -> Requirement {
    // Newest first: the first version whose predicate fires wins.
    type Check = fn(&Spec) -> Option<String>;
    let checks: [(Version, Check); 5] = [
        (Version::V1_1_0, needs_1_1_0),
        (Version::V0_7_0, needs_0_7_0),
        (Version::V0_6_0, needs_0_6_0),
        (Version::V0_5_0, needs_0_5_0),
        (Version::V0_4_0, needs_0_4_0),
    ];
    for (version, check) in checks {
        if let Some(because) = check(spec) {
            return Requirement { version, because };
        }
    }
    Requirement {
        version: Version::EARLIEST,
        because: String::new(),
    }
}

/// All containerEdits of the spec with a label saying where they are.
fn all_edits(spec: &Spec) -> impl Iterator<Item = (String, &ContainerEdits)> {
    std::iter::once(("spec containerEdits".to_string(), &spec.container_edits)).chain(
        spec.devices
            .iter()
            .map(|d| (format!("device {:?}", d.name), &d.container_edits)),
    )
}

fn first_edit(
    spec: &Spec,
    pred: impl Fn(&ContainerEdits) -> Option<&'static str>,
) -> Option<String> {
    all_edits(spec).find_map(|(at, e)| pred(e).map(|what| format!("{what} in {at}")))
}

fn needs_1_1_0(spec: &Spec) -> Option<String> {
    first_edit(spec, |e| {
        if !e.net_devices.is_empty() {
            return Some("netDevices");
        }
        let rdt = e.intel_rdt.as_ref()?;
        if rdt.schemata.is_some() {
            Some("intelRdt.schemata")
        } else if rdt.enable_monitoring.is_some() {
            // Stricter than Go (which only counts `true`): a runtime with a
            // v1.0 library rejects the key whatever its value.
            Some("intelRdt.enableMonitoring")
        } else {
            None
        }
    })
}

fn needs_0_7_0(spec: &Spec) -> Option<String> {
    first_edit(spec, |e| {
        if e.intel_rdt.is_some() {
            Some("intelRdt")
        } else if !e.additional_gids.is_empty() {
            Some("additionalGids")
        } else {
            None
        }
    })
}

fn needs_0_6_0(spec: &Spec) -> Option<String> {
    if !spec.annotations.is_empty() {
        return Some("spec annotations".into());
    }
    if let Some(d) = spec.devices.iter().find(|d| !d.annotations.is_empty()) {
        return Some(format!("annotations on device {:?}", d.name));
    }
    match spec.kind.split_once('/') {
        Some((_, class)) if class.contains('.') => Some(format!("'.' in class {class:?}")),
        _ => None,
    }
}

fn needs_0_5_0(spec: &Spec) -> Option<String> {
    if let Some(d) = spec
        .devices
        .iter()
        .find(|d| d.name.starts_with(|c: char| c.is_ascii_digit()))
    {
        return Some(format!("device name {:?} starts with a digit", d.name));
    }
    first_edit(spec, |e| {
        e.device_nodes
            .iter()
            .any(|n| !n.host_path.is_empty())
            .then_some("deviceNodes[].hostPath")
    })
}

fn needs_0_4_0(spec: &Spec) -> Option<String> {
    first_edit(spec, |e| {
        e.mounts
            .iter()
            .any(|m| !m.mount_type.is_empty())
            .then_some("mounts[].type")
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::cdi::spec::{Device, DeviceNode, IntelRdt, Mount, NetDevice};

    fn base() -> Spec {
        Spec {
            cdi_version: "0.3.0".into(),
            kind: "vendor.com/gpu".into(),
            devices: vec![Device {
                name: "gpu0".into(),
                container_edits: ContainerEdits {
                    env: vec!["A=b".into()],
                    ..Default::default()
                },
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn min(f: impl FnOnce(&mut Spec)) -> (String, String) {
        let mut s = base();
        f(&mut s);
        let r = minimum_required(&s);
        (r.version.to_string(), r.because)
    }

    #[test]
    fn parse_versions() {
        assert_eq!(Version::parse("0.5.0"), Some(Version::V0_5_0));
        assert_eq!(Version::parse("v1.1.0"), Some(Version::V1_1_0));
        assert_eq!(Version::parse("vv1.1.0"), None);
        assert_eq!(Version::parse("0.0.0"), None);
        assert_eq!(Version::parse(""), None);
        assert_eq!(Version::parse("1.1"), None);
    }

    #[test]
    fn minimum_versions_per_feature() {
        assert_eq!(min(|_| {}), ("0.3.0".into(), String::new()));
        assert_eq!(
            min(|s| s.devices[0].container_edits.mounts.push(Mount {
                host_path: "tmpfs".into(),
                container_path: "/x".into(),
                mount_type: "tmpfs".into(),
                ..Default::default()
            })),
            ("0.4.0".into(), "mounts[].type in device \"gpu0\"".into())
        );
        assert_eq!(
            min(|s| s.devices[0].name = "0".into()),
            (
                "0.5.0".into(),
                "device name \"0\" starts with a digit".into()
            )
        );
        assert_eq!(
            min(|s| s.container_edits.device_nodes.push(DeviceNode {
                path: "/dev/a".into(),
                host_path: "/dev/a".into(),
                ..Default::default()
            })),
            (
                "0.5.0".into(),
                "deviceNodes[].hostPath in spec containerEdits".into()
            )
        );
        assert_eq!(
            min(|s| s.devices[0].annotations = BTreeMap::from([("a".into(), "b".into())])),
            ("0.6.0".into(), "annotations on device \"gpu0\"".into())
        );
        assert_eq!(
            min(|s| s.annotations = BTreeMap::from([("a".into(), "b".into())])),
            ("0.6.0".into(), "spec annotations".into())
        );
        assert_eq!(
            min(|s| s.kind = "vendor.com/gpu.v2".into()),
            ("0.6.0".into(), "'.' in class \"gpu.v2\"".into())
        );
        assert_eq!(
            min(|s| s.devices[0].container_edits.intel_rdt = Some(IntelRdt::default())),
            ("0.7.0".into(), "intelRdt in device \"gpu0\"".into())
        );
        assert_eq!(
            min(|s| s.devices[0].container_edits.additional_gids = vec![44]),
            ("0.7.0".into(), "additionalGids in device \"gpu0\"".into())
        );
        assert_eq!(
            min(
                |s| s.devices[0].container_edits.net_devices.push(NetDevice {
                    host_interface_name: "eth1".into(),
                    name: "net1".into(),
                })
            ),
            ("1.1.0".into(), "netDevices in device \"gpu0\"".into())
        );
        assert_eq!(
            min(|s| s.devices[0].container_edits.intel_rdt = Some(IntelRdt {
                schemata: Some(vec![]),
                ..Default::default()
            })),
            (
                "1.1.0".into(),
                "intelRdt.schemata in device \"gpu0\"".into()
            )
        );
        assert_eq!(
            min(|s| s.devices[0].container_edits.intel_rdt = Some(IntelRdt {
                enable_monitoring: Some(false),
                ..Default::default()
            })),
            (
                "1.1.0".into(),
                "intelRdt.enableMonitoring in device \"gpu0\"".into()
            )
        );
    }
}

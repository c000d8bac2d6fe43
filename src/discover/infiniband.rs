//! RDMA devices as sysfs shows them: what the SR-IOV backend (the RDMA
//! devices of VFs) and the RDMA backend (every other RDMA device) share,
//! read once per discovery run into the run's [`Cache`]
//! ([`super::Context::infiniband`]), and the parsers of their values.
//!
//! An RDMA device is `/sys/class/infiniband/<name>`: the RDMA core
//! (`drivers/infiniband/core/device.c`) registers it under its driver's
//! device, so it is `<pci>/infiniband/<name>`, or
//! `/sys/devices/virtual/infiniband/<name>` for the software devices (rxe,
//! siw), which have no parent. User space reaches it through character
//! devices that the RDMA core's clients make with the same parent, so they
//! sit in glue directories beside `infiniband/`:
//!
//! - `infiniband_verbs/uverbsN` (ib_uverbs, `uverbs_main.c`), one per
//!   device; its `ibdev` names the device; `/dev/infiniband/uverbsN`;
//! - `infiniband_mad/umadN` and `issmN` (ib_umad, `user_mad.c`), one pair
//!   per port that has MADs (InfiniBand and RoCE, not iWARP); `ibdev` and
//!   `port` name the device and port; N counts ports over all devices, so
//!   it is not the device's uverbs number;
//! - `/sys/class/misc/rdma_cm` (rdma_ucm, `ucma.c`): one node,
//!   `/dev/infiniband/rdma_cm`, for every device.
//!
//! The char devices are listed through their class views, as rdma-core
//! and Mellanox's rdmamap do, and kept by the real path of the device they
//! live under ([`Index::under`]): the SR-IOV backend takes every one under
//! a VF, the RDMA backend those under a device's parent whose `ibdev`
//! names that device. Everything is read through the [`HostRoot`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::devnode::read_named_node;
use super::vfio::require_host_node;
use super::{Report, Warning};
use crate::model::Node;
use crate::root::{HostRoot, sys_path};
use crate::sysfs::node_number;

/// Where the RDMA devices are listed.
pub const CLASS: &str = "class/infiniband";

/// The class views of the char devices, with the name prefixes kept
/// (`abi_version`, a class attribute file, is not a device).
const CHAR_CLASSES: [(&str, &[&str]); 2] = [
    ("infiniband_verbs", &["uverbs"]),
    ("infiniband_mad", &["umad", "issm"]),
];

/// The rdma_cm misc device.
const RDMA_CM: &str = "class/misc/rdma_cm";

/// What one discovery run has read of the RDMA char devices.
#[derive(Debug, Default)]
pub struct Cache {
    index: OnceLock<Index>,
}

impl Cache {
    /// The char devices and rdma_cm, read on first use.
    pub fn get(&self, root: &HostRoot) -> &Index {
        self.index.get_or_init(|| read_index(root))
    }
}

/// The RDMA char devices of a host.
#[derive(Debug, Default)]
pub struct Index {
    /// Char devices by the real path of the device they live under (the
    /// PCI function, or `/sys/devices/virtual`), in class order (verbs,
    /// then mad; each by name).
    by_parent: BTreeMap<PathBuf, Vec<CharDev>>,
    /// Class entries that could not be resolved for another reason than
    /// being gone (a link out of the root, a loop), as warnings.
    pub unresolved: Vec<Warning>,
    /// `/dev/infiniband/rdma_cm`.
    pub rdma_cm: RdmaCm,
}

impl Index {
    /// The char devices that live under the device at real path `parent`.
    pub fn under(&self, parent: &Path) -> &[CharDev] {
        self.by_parent.get(parent).map_or(&[], Vec::as_slice)
    }
}

/// One char device (`uverbs0`, `umad1`, `issm1`).
#[derive(Debug, Clone)]
pub struct CharDev {
    /// Its kernel name.
    pub name: String,
    /// Its class view entry (`/sys/class/infiniband_verbs/uverbs0`).
    pub entry: PathBuf,
    /// The RDMA device its `ibdev` names, or what is wrong with that file.
    pub ibdev: Result<String, Warning>,
    /// Its node (`rdma-verbs` or `rdma-mad`); `None` when it has none
    /// usable (see `warnings`).
    pub node: Option<Node>,
    /// What reading its node found wrong.
    pub warnings: Vec<Warning>,
}

/// The rdma_cm node as read.
#[derive(Debug, Clone, Default)]
pub struct RdmaCm {
    /// Its node (`rdma-cm`), when the host has a usable one.
    pub node: Option<Node>,
    /// Whether sysfs has no rdma_cm at all (rdma_ucm not loaded).
    pub missing: bool,
    /// What reading it found wrong.
    pub warnings: Vec<Warning>,
}

impl RdmaCm {
    /// Its sysfs entry, named in warnings (`/sys/class/misc/rdma_cm`).
    pub fn entry() -> PathBuf {
        sys_path(RDMA_CM)
    }
}

fn read_index(root: &HostRoot) -> Index {
    let mut index = Index::default();
    let mut report = Report::default();
    for (class, prefixes) in CHAR_CLASSES {
        let dir = sys_path(&format!("class/{class}"));
        let names = match root.list_dir_opt(&dir) {
            Ok(n) => n,
            Err(e) => {
                report.warn(
                    &dir,
                    format!("{}; its RDMA char devices are left out", e.reason()),
                );
                continue;
            }
        };
        for name in names {
            let Some(prefix) = prefixes.iter().find(|p| node_number(&name, p).is_some()) else {
                continue;
            };
            let entry = dir.join(&name);
            let real = match root.resolve(&entry) {
                Ok(r) => r,
                // Gone since the listing: removed with its device.
                Err(e) if e.is_not_found() => continue,
                Err(e) => {
                    report.warn(&entry, format!("{}; skipping {name}", e.reason()));
                    continue;
                }
            };
            let Some(parent) = real.parent().and_then(Path::parent) else {
                continue;
            };
            let role = if *prefix == "uverbs" {
                "rdma-verbs"
            } else {
                "rdma-mad"
            };
            let mut own = Report::default();
            let node = read_named_node(
                root,
                &entry,
                &name,
                role,
                &format!("infiniband/{name}"),
                &mut own,
            )
            .and_then(|n| require_host_node(root, n, &mut own));
            let dev = CharDev {
                ibdev: read_ibdev(root, &entry, &name),
                name,
                entry,
                node,
                warnings: own.warnings,
            };
            index
                .by_parent
                .entry(parent.to_path_buf())
                .or_default()
                .push(dev);
        }
    }
    index.unresolved = report.warnings;
    index.rdma_cm = read_rdma_cm(root);
    index
}

/// The RDMA device `<entry>/ibdev` names, or the warning that it names none.
fn read_ibdev(root: &HostRoot, entry: &Path, name: &str) -> Result<String, Warning> {
    let path = entry.join("ibdev");
    let message = match root.read_attr_opt(&path) {
        Ok(Some(v)) if is_rdma_name(&v) => return Ok(v),
        Ok(Some(v)) => format!(
            "{} is not an RDMA device name, so which device {name} is for is unknown; skipping it",
            crate::text::quoted(&v, 80)
        ),
        Ok(None) => {
            format!("no such file, so which RDMA device {name} is for is unknown; skipping it")
        }
        Err(e) => format!(
            "{}, so which RDMA device {name} is for is unknown; skipping it",
            e.reason()
        ),
    };
    Err(Warning {
        path,
        message,
        backend: "",
    })
}

fn read_rdma_cm(root: &HostRoot) -> RdmaCm {
    let entry = RdmaCm::entry();
    let mut report = Report::default();
    let node = read_named_node(
        root,
        &entry,
        "rdma_cm",
        "rdma-cm",
        "infiniband/rdma_cm",
        &mut report,
    )
    .and_then(|n| require_host_node(root, n, &mut report));
    RdmaCm {
        missing: !root.exists(&entry),
        node,
        warnings: report.warnings,
    }
}

/// Replays `warnings` (read once, for the run) into `report`, under the
/// backend that reports them.
pub fn replay(warnings: &[Warning], report: &mut Report) {
    for w in warnings {
        report.warn(w.path.clone(), w.message.clone());
    }
}

/// An RDMA device name cdigen uses: 1 to 63 ASCII letters, digits, `_`,
/// `.` and `-`, starting with a letter or digit (`mlx5_0`, `mlx5_bond_0`,
/// `rocep59s0f0`, `rxe0`). The kernel allows more (any name without `/`
/// or `%`, up to 63 bytes), but every driver and rdma-core's renaming
/// stay within this; a name outside it would be unsafe in the comma lists
/// of device-info files and variables.
pub fn is_rdma_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
}

/// A network interface name as the kernel accepts one (`dev_valid_name`:
/// 1 to 15 bytes, not `.` or `..`, no `/`, `:` or whitespace), printable
/// ASCII, and without `,` (it would split the comma lists it goes into).
pub fn is_netdev_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 15
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|c| c.is_ascii_graphic() && !matches!(c, b'/' | b':' | b','))
}

/// Parses a numbered sysfs value of the RDMA core, `"<number>: <name>"`
/// (`node_type` `1: CA`, a port's `state` `4: ACTIVE`, `phys_state`
/// `5: LinkUp`): the number and the name. The name is 1 to 32 printable
/// ASCII characters (`usNIC UDP`, `<unknown>`).
pub fn parse_numbered(s: &str) -> Option<(u32, &str)> {
    let (number, name) = s.split_once(": ")?;
    if number.is_empty() || number.len() > 3 || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if name.is_empty()
        || name.len() > 32
        || name.starts_with(' ')
        || name.ends_with(' ')
        || !name.bytes().all(|b| b == b' ' || b.is_ascii_graphic())
    {
        return None;
    }
    Some((number.parse().ok()?, name))
}

/// Checks a GUID as the RDMA core writes it (`node_guid`,
/// `sys_image_guid`): four groups of four lower-case hex digits joined
/// by `:` (`b8ce:f603:00a1:b2c4`).
pub fn parse_guid(s: &str) -> Option<&str> {
    let mut groups = 0;
    for g in s.split(':') {
        groups += 1;
        if g.len() != 4
            || !g
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return None;
        }
    }
    (groups == 4).then_some(s)
}

/// The link type a port's `link_layer` means, as the SR-IOV device plugin
/// and the RDMA shared device plugin spell it: `InfiniBand` →
/// `infiniband`, `Ethernet` (RoCE, iWARP) → `ether`; anything else
/// (`Unknown`) → `None`.
pub fn link_type(link_layer: &str) -> Option<&'static str> {
    match link_layer {
        "InfiniBand" => Some("infiniband"),
        "Ethernet" => Some("ether"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn numbered_values() {
        assert_eq!(parse_numbered("1: CA"), Some((1, "CA")));
        assert_eq!(parse_numbered("4: RNIC"), Some((4, "RNIC")));
        assert_eq!(parse_numbered("6: usNIC UDP"), Some((6, "usNIC UDP")));
        assert_eq!(parse_numbered("4: ACTIVE"), Some((4, "ACTIVE")));
        assert_eq!(parse_numbered("5: LinkUp"), Some((5, "LinkUp")));
        assert_eq!(parse_numbered("9: <unknown>"), Some((9, "<unknown>")));
        for bad in [
            "",
            "CA",
            "1:CA",
            "1: ",
            ": CA",
            "x: CA",
            "1234: CA",
            "-1: CA",
            "1:  CA",
            "1: CA ",
            "1: C\tA",
            "1: C\u{e9}",
            "1: CA\n",
        ] {
            assert_eq!(parse_numbered(bad), None, "{bad:?}");
        }
        let long = format!("1: {}", "A".repeat(33));
        assert_eq!(parse_numbered(&long), None);
    }

    #[test]
    fn guids() {
        assert_eq!(
            parse_guid("b8ce:f603:00a1:b2c4"),
            Some("b8ce:f603:00a1:b2c4")
        );
        assert_eq!(
            parse_guid("0000:0000:0000:0000"),
            Some("0000:0000:0000:0000")
        );
        for bad in [
            "",
            "b8ce:f603:00a1",
            "b8ce:f603:00a1:b2c4:0000",
            "B8CE:F603:00A1:B2C4",
            "b8cef60300a1b2c4",
            "b8ce:f603:00a1:b2c",
            "b8ce:f603:00a1:b2cg",
        ] {
            assert_eq!(parse_guid(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn names() {
        for good in [
            "mlx5_0",
            "mlx5_bond_0",
            "rocep59s0f0",
            "ibp152s0",
            "rxe0",
            "qib0",
        ] {
            assert!(is_rdma_name(good), "{good}");
        }
        for bad in ["", "_x", "-x", "mlx5 0", "mlx5/0", "a,b", "mlx5_0\n", "é"] {
            assert!(!is_rdma_name(bad), "{bad:?}");
        }
        assert!(is_rdma_name(&"a".repeat(63)));
        assert!(!is_rdma_name(&"a".repeat(64)));
        for good in ["ens1f0np0", "ibp152s0", "eth0", "a-b_c.d@e"] {
            assert!(is_netdev_name(good), "{good}");
        }
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "a:1",
            "a b",
            "a,b",
            "0123456789abcdef",
        ] {
            assert!(!is_netdev_name(bad), "{bad:?}");
        }
        assert_eq!(link_type("InfiniBand"), Some("infiniband"));
        assert_eq!(link_type("Ethernet"), Some("ether"));
        assert_eq!(link_type("Unknown"), None);
    }

    proptest! {
        #[test]
        fn numbered_values_round_trip(n in 0u32..1000, name in "[A-Za-z<>_][A-Za-z <>_]{0,30}[A-Za-z<>_]") {
            let text = format!("{n}: {name}");
            prop_assert_eq!(parse_numbered(&text), Some((n, name.as_str())));
        }

        #[test]
        fn parsers_never_panic_and_accept_only_what_they_say(s in "\\PC{0,80}") {
            if let Some((n, name)) = parse_numbered(&s) {
                prop_assert_eq!(format!("{n}: {name}"), s.clone());
            }
            if let Some(g) = parse_guid(&s) {
                prop_assert_eq!(g.len(), 19);
            }
            // A name cdigen uses is one the device-info spec accepts in
            // `rdma-device`, and needs no escaping in a path or a list.
            if is_rdma_name(&s) {
                let info = crate::devinfo::DeviceInfo {
                    device_type: crate::devinfo::DeviceType::Pci,
                    version: crate::devinfo::VERSION.into(),
                    pci: Some(crate::devinfo::Pci {
                        pci_address: Some("0000:17:00.0".into()),
                        rdma_device: Some(s.clone()),
                        ..Default::default()
                    }),
                    vdpa: None,
                    vhost_user: None,
                    memif: None,
                };
                prop_assert_eq!(crate::devinfo::validate(&info), vec![]);
                prop_assert!(crate::discover::devnode::is_safe_devname(&s));
            }
            if is_netdev_name(&s) {
                prop_assert!(!s.contains(',') && !s.contains('/'));
            }
        }
    }
}

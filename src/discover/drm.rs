//! DRM backend: GPUs (card and render nodes) and accel devices.
//!
//! Reads `/sys/class/drm` and `/sys/class/accel`, keeping entries named
//! exactly `card<N>`, `renderD<N>` or `accel<N>` that have a `dev` file
//! (`"226:1\n"`; one without it is skipped with a warning); connectors (`card1-DP-1`), `version` and legacy
//! `controlD*` entries are skipped. habanalabs' control node
//! (`accel_controlD<N>`, in the accel class with the driver's own major)
//! joins its device as `accel-control`: management tools need it. Nodes are grouped by their parent
//! device (the real path of `<entry>/device`): card and render numbers of
//! one GPU are unrelated, so pairing by number would be wrong. PCI parents
//! are identified by address, others by bus and name.
//!
//! The MEI node of an Intel discrete GPU's graphics security controller
//! (`<gpu>/i915.mei-gscfi.<id>/mei/mei<N>`, or `xe.`; an auxiliary device
//! of the GPU) joins the GPU as `mei`. Only MEI devices whose parent is a
//! child of a DRM parent are taken: the chipset's own ME
//! (`0000:00:16.0/mei/mei0`) belongs to no GPU.
//!
//! ROCm's compute node `/dev/kfd` is not a DRM node: the `amd-gpu`
//! definition joins it to AMD GPUs declaratively (`join`, found by the
//! generic backend), partitions included (they have their GPU's driver).
//!
//! AMD Instinct compute partitions ([`xcp`]): a DRM device whose parent is
//! an `amdgpu_xcp_<N>` platform device is a partition of the GPU the KFD
//! topology ties its render node to (`<address>/xcp<k>`, with the GPU's
//! PCI identity), or an idle partition device, which is offered nowhere.
//!
//! `/dev/dri/by-path/<ID_PATH>-card|render` links are recorded when they
//! exist on the host and name the node; they are symlinks, so they must
//! never become CDI device nodes (runtimes `lstat` device paths).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::devnode::{by_path_links, check_host_node, read_named_node};
use super::pci::{link, read_function};
use super::pciids::PciIds;
use super::{Backend, Context, Error, Report};

pub mod xcp;
use crate::model::{Device, Node};
use crate::root::{HostRoot, sys_path};
use crate::sysfs::{node_number, parse_uevent};

/// The DRM backend.
#[derive(Debug, Clone, Copy)]
pub struct Drm;

/// Role order: primary, render, accel, then the rest.
fn role_rank(role: &str) -> u8 {
    match role {
        "primary" => 0,
        "render" => 1,
        "accel" => 2,
        "accel-control" => 3,
        "mei" => 4,
        _ => 5,
    }
}

impl Backend for Drm {
    fn name(&self) -> &'static str {
        "drm"
    }

    fn precedence(&self) -> u8 {
        10
    }

    fn uevent_subsystems(&self) -> Option<&'static [&'static str]> {
        // Cards, render and accel nodes come and go with their PCI or
        // platform device binding a driver; /dev/kfd is its own class.
        Some(&["drm", "accel", "kfd", "mei", "pci", "platform"])
    }

    fn discover(&self, cx: &Context, report: &mut Report) -> Result<Vec<Device>, Error> {
        let root = cx.root;
        let root_err = |source| Error::Root {
            backend: "drm",
            source,
        };
        // parent real path -> nodes
        let mut groups: BTreeMap<PathBuf, Vec<Node>> = BTreeMap::new();
        for (class, prefixes) in [
            ("drm", &[("card", "primary"), ("renderD", "render")][..]),
            (
                "accel",
                &[("accel", "accel"), ("accel_controlD", "accel-control")][..],
            ),
        ] {
            let class_dir = sys_path(&format!("class/{class}"));
            for name in root.list_dir_opt(&class_dir).map_err(root_err)? {
                let Some(role) = prefixes
                    .iter()
                    .find(|(p, _)| node_number(&name, p).is_some())
                    .map(|(_, r)| *r)
                else {
                    continue;
                };
                let entry = class_dir.join(&name);
                let default_devname = match class {
                    "accel" => format!("accel/{name}"),
                    _ => format!("dri/{name}"),
                };
                let Some(node) =
                    read_named_node(root, &entry, &name, role, &default_devname, report)
                else {
                    continue;
                };
                match root.resolve(&entry.join("device")) {
                    Ok(parent) => groups.entry(parent).or_default().push(node),
                    Err(e) => report.warn(
                        entry.join("device"),
                        format!(
                            "{}; cannot tell which device {name} belongs to, skipping it",
                            e.reason()
                        ),
                    ),
                }
            }
        }
        if groups.is_empty() {
            return Ok(Vec::new());
        }
        add_gpu_mei(root, &mut groups, report).map_err(root_err)?;
        let ids = cx.pci_ids();
        let mut devices = Vec::new();
        let mut xcps = Vec::new();
        for (parent, nodes) in groups {
            if xcp::is_xcp_parent(root, &parent, report) {
                let name = parent
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or_default()
                    .to_string();
                xcps.push(xcp::XcpGroup {
                    parent,
                    name,
                    nodes,
                });
                continue;
            }
            let Some(mut dev) = read_parent(root, &parent, ids, report) else {
                continue;
            };
            if dev.pci.as_ref().is_some_and(|p| p.vendor_id == "0x1002") {
                xcp::read_modes(root, &parent, &mut dev, report);
            }
            let kept = host_nodes_in_order(root, nodes, report);
            if kept.is_empty() {
                continue;
            }
            dev.links = by_path_links(root, &id_path(&dev), &kept, report);
            dev.nodes = kept;
            devices.push(dev);
        }
        let topology = xcp::topology(root, &devices, &xcps, report);
        xcp::set_uuids(&topology, &mut devices);
        let partitions = xcp::partitions(root, &devices, xcps, &topology, report);
        devices.extend(partitions);
        Ok(devices)
    }
}

/// A device's nodes in role order (primary, render, accel, ...), then by
/// minor, each checked against the host's `/dev` ([`check_host_node`]):
/// one that is not a character device there is dropped with a warning.
fn host_nodes_in_order(root: &HostRoot, mut nodes: Vec<Node>, report: &mut Report) -> Vec<Node> {
    nodes.sort_by(|a, b| {
        (role_rank(&a.role), a.minor, &a.name).cmp(&(role_rank(&b.role), b.minor, &b.name))
    });
    nodes
        .into_iter()
        .filter_map(|n| check_host_node(root, n, report))
        .collect()
}

/// Adds to each group the MEI nodes of its parent's auxiliary devices
/// (`<gpu>/<aux>/mei/mei<N>`); a MEI device elsewhere is no GPU's.
fn add_gpu_mei(
    root: &HostRoot,
    groups: &mut BTreeMap<PathBuf, Vec<Node>>,
    report: &mut Report,
) -> Result<(), crate::root::Error> {
    let class_dir = sys_path("class/mei");
    for name in root.list_dir_opt(&class_dir)? {
        if node_number(&name, "mei").is_none() {
            continue;
        }
        let entry = class_dir.join(&name);
        // Which device it is under decides whether it is a GPU's at all;
        // one that cannot be resolved is no GPU's that we know of.
        let Ok(aux) = root.resolve(&entry.join("device")) else {
            continue;
        };
        let Some(nodes) = aux.parent().and_then(|gpu| groups.get_mut(gpu)) else {
            continue;
        };
        if let Some(node) = read_named_node(root, &entry, &name, "mei", &name, report) {
            nodes.push(node);
        }
    }
    Ok(())
}

/// Reads the parent device of a group of nodes.
fn read_parent(
    root: &HostRoot,
    parent: &Path,
    ids: Option<&PciIds>,
    report: &mut Report,
) -> Option<Device> {
    let name = parent.file_name()?.to_str()?.to_string();
    let bus = link(root, &parent.join("subsystem"), report).unwrap_or_else(|| "virtual".into());
    let mut dev = Device {
        backend: "drm".into(),
        id: format!("{bus}:{name}"),
        sysfs_path: parent.display().to_string(),
        bus: bus.clone(),
        pci: None,
        driver: None,
        numa_node: None,
        nodes: Vec::new(),
        links: Vec::new(),
        attrs: BTreeMap::new(),
        ..Default::default()
    };
    if bus == "pci" {
        let f = read_function(root, parent, ids, report)?;
        dev.id = f.info.address.clone();
        dev.driver = f.driver;
        dev.numa_node = f.numa_node;
        dev.pci = Some(f.info);
    } else {
        dev.driver = link(root, &parent.join("driver"), report);
        let uevent = parent.join("uevent");
        if let Ok(Some(text)) = root.read_attr_opt(&uevent)
            && let Some((_, c)) = parse_uevent(&text)
                .into_iter()
                .find(|(k, _)| *k == "OF_COMPATIBLE_0")
        {
            dev.attrs.insert("compatible".into(), c.to_string());
        }
    }
    Some(dev)
}

/// udev's `ID_PATH` of a DRM parent: `pci-<address>`, or `<bus>-<name>`
/// (`platform-fec00000.v3d`).
fn id_path(dev: &Device) -> String {
    match &dev.pci {
        Some(p) => format!("pci-{}", p.address),
        None => format!(
            "{}-{}",
            dev.bus,
            dev.sysfs_path.rsplit('/').next().unwrap_or("")
        ),
    }
}

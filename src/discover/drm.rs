//! DRM backend: GPUs (card and render nodes) and accel devices.
//!
//! Reads `/sys/class/drm` and `/sys/class/accel`, keeping entries named
//! exactly `card<N>`, `renderD<N>` or `accel<N>` that have a `dev` file
//! (`"226:1\n"`); connectors (`card1-DP-1`), `version` and legacy
//! `controlD*` entries are skipped. Nodes are grouped by their parent
//! device (the real path of `<entry>/device`): card and render numbers of
//! one GPU are unrelated, so pairing by number would be wrong. PCI parents
//! are identified by address, others by bus and name.
//!
//! For amdgpu GPUs the ROCm compute node `/dev/kfd` (`/sys/class/kfd/kfd`)
//! is added with role `kfd`: ROCm needs it alongside the render node.
//!
//! `/dev/dri/by-path/<ID_PATH>-card|render` links are recorded when they
//! exist on the host and name the node; they are symlinks, so they must
//! never become CDI device nodes (runtimes `lstat` device paths).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::devnode::{OnHost, on_host, with_host_checked};
use super::pci::{link, read_function};
use super::pciids::PciIds;
use super::{Backend, Context, Error, Report};
use crate::model::{Device, Link, Node};
use crate::root::{DevKind, HostRoot, dev_path, parse_majmin, sys_path};
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
        _ => 3,
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
        Some(&["drm", "accel", "kfd", "pci", "platform"])
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
            ("accel", &[("accel", "accel")][..]),
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
                let Some(node) = read_node(root, &entry, &name, role, class, report) else {
                    continue;
                };
                match root.resolve(&entry.join("device")) {
                    Ok(parent) => groups.entry(parent).or_default().push(node),
                    Err(e) => report.warn(
                        entry.join("device"),
                        format!("{e}; cannot tell which device {name} belongs to, skipping it"),
                    ),
                }
            }
        }
        if groups.is_empty() {
            return Ok(Vec::new());
        }
        let ids = cx.pci_ids();
        let kfd = read_kfd(root, report);
        let mut devices = Vec::new();
        for (parent, mut nodes) in groups {
            let Some(mut dev) = read_parent(root, &parent, ids, report) else {
                continue;
            };
            if dev.driver.as_deref() == Some("amdgpu")
                && let Some(k) = &kfd
            {
                nodes.push(k.clone());
            }
            nodes.sort_by(|a, b| {
                (role_rank(&a.role), a.minor, &a.name).cmp(&(role_rank(&b.role), b.minor, &b.name))
            });
            let mut kept = Vec::new();
            for node in nodes {
                if let Some(n) = check_host_node(root, node, report) {
                    kept.push(n);
                }
            }
            if kept.is_empty() {
                continue;
            }
            dev.links = by_path_links(root, &dev, &kept, report);
            dev.nodes = kept;
            devices.push(dev);
        }
        Ok(devices)
    }
}

/// Reads a class entry's `dev` and `uevent` into a node.
fn read_node(
    root: &HostRoot,
    entry: &Path,
    name: &str,
    role: &str,
    class: &str,
    report: &mut Report,
) -> Option<Node> {
    let dev_file = entry.join("dev");
    let value = match root.read_attr_opt(&dev_file) {
        Ok(Some(v)) => v,
        Ok(None) => return None, // not a numbered device
        Err(e) => {
            report.warn(&dev_file, format!("{e}; skipping {name}"));
            return None;
        }
    };
    let Some((major, minor)) = parse_majmin(&value) else {
        report.warn(
            &dev_file,
            format!("{value:?} is not MAJOR:MINOR; skipping {name}"),
        );
        return None;
    };
    let default_devname = match class {
        "accel" => format!("accel/{name}"),
        _ => format!("dri/{name}"),
    };
    let devname = devname_from_uevent(root, entry, major, minor, report).unwrap_or(default_devname);
    Some(Node {
        role: role.to_string(),
        name: name.to_string(),
        path: dev_path(&devname).display().to_string(),
        node_type: "c".into(),
        major,
        minor,
        host: None,
    })
}

/// `DEVNAME` from a uevent file, cross-checked against `dev`. Returns
/// `None` (use the default) when absent or unsafe.
fn devname_from_uevent(
    root: &HostRoot,
    entry: &Path,
    major: u32,
    minor: u32,
    report: &mut Report,
) -> Option<String> {
    let path = entry.join("uevent");
    let text = match root.read_attr_opt(&path) {
        Ok(t) => t?,
        Err(e) => {
            report.warn(&path, format!("{e}; using the default device name"));
            return None;
        }
    };
    let kv = parse_uevent(&text);
    let get = |k: &str| kv.iter().find(|(key, _)| *key == k).map(|(_, v)| *v);
    if let (Some(ma), Some(mi)) = (get("MAJOR"), get("MINOR"))
        && (ma != major.to_string() || mi != minor.to_string())
    {
        report.warn(
            &path,
            format!("MAJOR={ma} MINOR={mi} disagrees with dev {major}:{minor}; trusting dev"),
        );
    }
    let name = get("DEVNAME")?;
    if !is_safe_devname(name) {
        report.warn(
            &path,
            format!("DEVNAME {name:?} is not a plain path below /dev; using the default"),
        );
        return None;
    }
    Some(name.to_string())
}

/// A relative path of plain components (`dri/card1`): no `..`, no empty or
/// hidden components, only `[A-Za-z0-9_.:-]`.
pub(crate) fn is_safe_devname(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && name.split('/').all(|c| {
            !c.is_empty()
                && !c.starts_with('.')
                && c.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'))
        })
}

/// The ROCm compute node, when the kfd driver is loaded.
fn read_kfd(root: &HostRoot, report: &mut Report) -> Option<Node> {
    let entry = sys_path("class/kfd/kfd");
    if !root.exists(&entry) {
        return None;
    }
    read_node(root, &entry, "kfd", "kfd", "kfd", report).map(|mut n| {
        if n.path == "/dev/dri/kfd" {
            n.path = dev_path("kfd").display().to_string();
        }
        n
    })
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

/// Looks the node up in the host's `/dev`: records mode and owner when it is
/// a character device, drops it (with a warning) when something else sits
/// at its path (a runtime would refuse the container).
fn check_host_node(root: &HostRoot, node: Node, report: &mut Report) -> Option<Node> {
    match on_host(root, &node) {
        OnHost::Missing => Some(node),
        OnHost::Char(e) => Some(with_host_checked(node, &e, report)),
        OnHost::Other(kind) => {
            report.warn(
                &node.path,
                format!(
                    "not a character device (a {kind:?}); runtimes would refuse it, skipping this node"
                ),
            );
            None
        }
        OnHost::Unreadable(e) => {
            report.warn(&node.path, format!("{e}; not using host mode/owner"));
            Some(node)
        }
    }
}

/// `/dev/dri/by-path/<ID_PATH>-card|render` links that exist on the host and
/// name one of the device's nodes.
fn by_path_links(root: &HostRoot, dev: &Device, nodes: &[Node], report: &mut Report) -> Vec<Link> {
    let id_path = match &dev.pci {
        Some(p) => format!("pci-{}", p.address),
        None => format!(
            "{}-{}",
            dev.bus,
            dev.sysfs_path.rsplit('/').next().unwrap_or("")
        ),
    };
    let mut links = Vec::new();
    for node in nodes {
        let suffix = match node.role.as_str() {
            "primary" => "card",
            "render" => "render",
            _ => continue,
        };
        let link_path = dev_path(&format!("dri/by-path/{id_path}-{suffix}"));
        match root.dev_entry(&link_path) {
            Ok(Some(e)) if e.kind == DevKind::Symlink => {
                let target = e.target.unwrap_or_default();
                let names_node = Path::new(&target).file_name().and_then(|n| n.to_str())
                    == Some(node.name.as_str());
                if names_node {
                    links.push(Link {
                        path: link_path.display().to_string(),
                        target,
                        node: node.path.clone(),
                    });
                } else {
                    report.warn(
                        &link_path,
                        format!("points to {target:?}, not to {}; ignoring it", node.name),
                    );
                }
            }
            Ok(_) => {}
            Err(e) => report.warn(&link_path, format!("{e}; ignoring it")),
        }
    }
    links
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devnames() {
        assert!(is_safe_devname("dri/card1"));
        assert!(is_safe_devname("accel/accel0"));
        assert!(!is_safe_devname("../etc/passwd"));
        assert!(!is_safe_devname("dri/../card1"));
        assert!(!is_safe_devname("/dev/dri/card1"));
        assert!(!is_safe_devname("dri//card1"));
        assert!(!is_safe_devname("dri/card1\"x"));
        assert!(!is_safe_devname(""));
    }
}

//! Device nodes shared by the backends: reading a class device's node from
//! its sysfs `dev` and `uevent` files, and what the host's `/dev` says
//! about it. Each backend decides what a missing or wrong entry means for
//! its devices.

use std::path::Path;

use super::Report;
use crate::model::{HostNode, Link, Node};
use crate::root::{DevEntry, DevKind, Error, HostRoot, dev_path, parse_majmin};
use crate::sysfs::parse_uevent;

/// A node's entry in the host's `/dev`.
pub(crate) enum OnHost {
    /// A character device.
    Char(DevEntry),
    /// Nothing there (or no `/dev` to look at).
    Missing,
    /// Something that is not a character device.
    Other(DevKind),
    /// The lookup failed.
    Unreadable(Error),
}

/// Looks `node` up in the host's `/dev`.
pub(crate) fn on_host(root: &HostRoot, node: &Node) -> OnHost {
    match root.dev_entry(Path::new(&node.path)) {
        Ok(Some(e)) if e.kind == DevKind::Char => OnHost::Char(e),
        Ok(Some(e)) => OnHost::Other(e.kind),
        Ok(None) => OnHost::Missing,
        Err(e) => OnHost::Unreadable(e),
    }
}

/// Records the host node's mode and owner on `node`.
pub(crate) fn with_host(mut node: Node, e: &DevEntry) -> Node {
    node.host = Some(HostNode {
        mode: e.mode,
        uid: e.uid,
        gid: e.gid,
    });
    node
}

/// [`with_host`], warning when the host node's numbers differ from the
/// ones the kernel reports (a stale node): the kernel's are kept.
pub(crate) fn with_host_checked(node: Node, e: &DevEntry, report: &mut Report) -> Node {
    if (e.major, e.minor) != (node.major, node.minor) {
        report.warn(
            &node.path,
            format!(
                "host node is {}:{} but sysfs says {}:{} (stale node?); trusting sysfs",
                e.major, e.minor, node.major, node.minor
            ),
        );
    }
    with_host(node, e)
}

/// Reads a class device's character node from `<entry>/dev`
/// (`"226:1\n"`, authoritative) and `<entry>/uevent` (`DEVNAME=dri/card1`,
/// else `default_devname`, a path below `/dev`). `None` when the entry has
/// no `dev` (not a numbered device) or a malformed one (with a warning).
pub(crate) fn read_node(
    root: &HostRoot,
    entry: &Path,
    name: &str,
    role: &str,
    default_devname: &str,
    report: &mut Report,
) -> Option<Node> {
    read_node_as(root, entry, name, role, default_devname, false, report)
}

/// [`read_node`] for an entry whose name says it is a device node
/// (`card1`, `renderD128`, `accel0`): when the entry exists without a `dev`
/// file, it is skipped with a warning naming that file, instead of being
/// taken for a device without a number. The kernel's `device_add` creates
/// `dev` after the directory, its class link and `uevent`, and
/// `device_del` removes it first, so a device being registered or removed
/// looks like this for a moment.
pub(crate) fn read_named_node(
    root: &HostRoot,
    entry: &Path,
    name: &str,
    role: &str,
    default_devname: &str,
    report: &mut Report,
) -> Option<Node> {
    read_node_as(root, entry, name, role, default_devname, true, report)
}

fn read_node_as(
    root: &HostRoot,
    entry: &Path,
    name: &str,
    role: &str,
    default_devname: &str,
    named: bool,
    report: &mut Report,
) -> Option<Node> {
    let dev_file = entry.join("dev");
    let value = match root.read_attr_opt(&dev_file) {
        Ok(Some(v)) => v,
        Ok(None) => {
            if named && root.exists(entry) {
                report.warn(
                    &dev_file,
                    format!("no such file, so {name} has no device number (being added or removed?); skipping it"),
                );
            }
            return None; // not a numbered device
        }
        Err(e) => {
            report.warn(&dev_file, format!("{}; skipping {name}", e.reason()));
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
    let devname = match devname_from_uevent(root, entry, major, minor, report) {
        Some(d) => d,
        // The default comes from the entry's own name: as untrusted as
        // DEVNAME.
        None if is_safe_devname(default_devname) => default_devname.to_string(),
        None => {
            report.warn(
                entry.join("uevent"),
                format!(
                    "no usable DEVNAME, and {default_devname:?} is not a plain path below /dev; skipping {name}"
                ),
            );
            return None;
        }
    };
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
            report.warn(
                &path,
                format!("{}; using the default device name", e.reason()),
            );
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

/// Looks the node up in the host's `/dev`: records mode and owner when it is
/// a character device, drops it (with a warning) when something else sits
/// at its path (a runtime would refuse the container).
pub(crate) fn check_host_node(root: &HostRoot, node: Node, report: &mut Report) -> Option<Node> {
    match on_host(root, &node) {
        OnHost::Missing => Some(node),
        OnHost::Char(e) => Some(with_host_checked(node, &e, report)),
        OnHost::Other(kind) => {
            report.warn(
                &node.path,
                format!(
                    "not a character device (a {kind}); runtimes would refuse it, skipping this node"
                ),
            );
            None
        }
        OnHost::Unreadable(e) => {
            report.warn(
                &node.path,
                format!("{}; not using host mode/owner", e.reason()),
            );
            Some(node)
        }
    }
}

/// The `/dev/dri/by-path/<id_path>-card|render` links (`id_path` is udev's
/// `ID_PATH` of the device: `pci-0000:01:00.0`) that exist on the host and
/// name one of `nodes` (its primary and render nodes). A link that names
/// another node, or cannot be examined, is left out with a warning. Used
/// by every backend whose devices have DRM nodes (DRM, NVIDIA).
pub fn by_path_links(
    root: &HostRoot,
    id_path: &str,
    nodes: &[Node],
    report: &mut Report,
) -> Vec<Link> {
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
            Err(e) => report.warn(&link_path, format!("{}; ignoring it", e.reason())),
        }
    }
    links
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A root with `sys/class/drm/card1` (a directory without `dev`),
    /// `sys/class/drm/card2/dev` and no `card3`.
    fn drm_root() -> (tempfile::TempDir, HostRoot) {
        let tmp = tempfile::tempdir().unwrap();
        let class = tmp.path().join("sys/class/drm");
        std::fs::create_dir_all(class.join("card1")).unwrap();
        std::fs::create_dir_all(class.join("card2")).unwrap();
        std::fs::write(class.join("card2/dev"), "226:2\n").unwrap();
        let root = HostRoot::open(tmp.path()).unwrap();
        (tmp, root)
    }

    fn warnings(report: &Report) -> Vec<String> {
        report
            .warnings
            .iter()
            .map(|w| format!("{}: {}", w.path.display(), w.message))
            .collect()
    }

    #[test]
    fn a_named_node_without_dev_is_a_warning() {
        let (_tmp, root) = drm_root();
        let class = crate::root::sys_path("class/drm");
        let mut report = Report::default();
        let read = |name: &str, report: &mut Report| {
            read_named_node(
                &root,
                &class.join(name),
                name,
                "primary",
                &format!("dri/{name}"),
                report,
            )
        };
        assert!(read("card1", &mut report).is_none());
        assert_eq!(
            read("card2", &mut report).map(|n| (n.path, n.major, n.minor)),
            Some(("/dev/dri/card2".to_string(), 226, 2))
        );
        assert!(
            read("card3", &mut report).is_none(),
            "no entry: nothing to say"
        );
        assert_eq!(
            warnings(&report),
            [
                "/sys/class/drm/card1/dev: no such file, so card1 has no device number (being added or removed?); skipping it"
            ]
        );
        // A device that may have no number (the generic backend's) is
        // skipped quietly.
        let mut report = Report::default();
        assert!(
            read_node(
                &root,
                &class.join("card1"),
                "card1",
                "x",
                "card1",
                &mut report
            )
            .is_none()
        );
        assert!(report.warnings.is_empty());
    }

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

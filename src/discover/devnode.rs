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
        None => match devname_refusal(default_devname) {
            None => default_devname.to_string(),
            Some(why) => {
                report.warn(
                    entry.join("uevent"),
                    format!(
                        "no usable DEVNAME, and {default_devname:?} is not a plain path below /dev: it {why}; skipping {name}"
                    ),
                );
                return None;
            }
        },
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
    if let Some(why) = devname_refusal(name) {
        report.warn(
            &path,
            format!("DEVNAME {name:?} is not a plain path below /dev: it {why}; using the default"),
        );
        return None;
    }
    Some(name.to_string())
}

/// Longest name below `/dev` accepted (a kernel `DEVNAME` is far shorter;
/// a udev link name is at most a few components of `NAME_MAX`).
const MAX_DEVNAME_LEN: usize = 1024;

/// Longest component (`NAME_MAX`).
const MAX_COMPONENT_LEN: usize = 255;

/// Whether `name` is a relative path below `/dev` cdigen uses
/// ([`devname_refusal`] gives no reason to refuse it).
pub(crate) fn is_safe_devname(name: &str) -> bool {
    devname_refusal(name).is_none()
}

/// Why `name`, a path below `/dev` the host gives (a kernel `DEVNAME`, a
/// default from a sysfs entry name, a udev link), is refused; `None` when
/// it is accepted.
///
/// Accepted is what the kernel and udev make: ASCII letters and digits,
/// udev's `# + - . : = @ _` (systemd `allow_listed_char_for_devnode`),
/// `,` (kernel names taken from device-tree nodes: the CMA heap
/// `dma_heap/linux,cma`), udev's `\xHH` escapes, and printable non-ASCII
/// UTF-8 (udev keeps a valid multibyte character of a USB product name:
/// `usb-Qualcomm_Snapdragon™…`). Refused is what would leave `/dev` or be
/// read as something else on its way to a runtime: an absolute path, an
/// empty, `.` or `..` component, control characters (a newline would
/// split a line), whitespace (udev writes it as `\x20`), invisible or
/// bidirectional formatting characters (a name that reads as another),
/// and any other ASCII punctuation (quotes, `$`, `*`, `/` doubled, ...),
/// which neither makes.
pub(crate) fn devname_refusal(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("is empty".into());
    }
    if name.len() > MAX_DEVNAME_LEN {
        return Some(format!(
            "is longer than {MAX_DEVNAME_LEN} bytes ({})",
            name.len()
        ));
    }
    if name.starts_with('/') {
        return Some("is absolute, not a path below /dev (dri/card1)".into());
    }
    for c in name.split('/') {
        match c {
            "" => return Some("has an empty component (a doubled or trailing /)".into()),
            "." | ".." => return Some(format!("has a {c:?} component, which could leave /dev")),
            _ if c.len() > MAX_COMPONENT_LEN => {
                return Some(format!(
                    "has a component longer than {MAX_COMPONENT_LEN} bytes"
                ));
            }
            _ => {}
        }
    }
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        let refused = match c {
            '\\' => {
                let hex: String = chars.clone().take(3).collect();
                let mut h = hex.chars();
                if h.next() == Some('x') && h.all(|d| d.is_ascii_hexdigit()) && hex.len() == 3 {
                    chars.nth(2);
                    continue;
                }
                "a \\ that is not udev's \\xHH escape"
            }
            c if c.is_ascii_alphanumeric() || "#+,-.:=@_/".contains(c) => continue,
            c if c.is_control() => "a control character",
            c if c.is_whitespace() => "whitespace (udev writes it as \\x20)",
            '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{2069}'
            | '\u{feff}' => "an invisible or bidirectional formatting character",
            c if c.is_ascii() => {
                "a character neither the kernel nor udev puts in a device name \
                 (letters, digits, # + , - . : = @ _ and non-ASCII UTF-8 are accepted)"
            }
            _ => continue,
        };
        return Some(format!("contains {c:?}: {refused}"));
    }
    None
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

    #[test]
    fn names_the_kernel_and_udev_make_are_accepted() {
        for name in [
            // drivers/dma-buf/dma-heap.c: "dma_heap/%s", the CMA heap named
            // after its device-tree node.
            "dma_heap/linux,cma",
            "dma_heap/system",
            // udev by-id links: a UTF-8 product name kept as is, udev's
            // allowed punctuation, its \xHH escapes (by-label).
            "serial/by-id/usb-Qualcomm_Snapdragon\u{2122}_X_Elite_0123-if00",
            "serial/by-id/usb-Prolific_Technology_Inc._USB-Serial_Controller_D-if00-port0",
            "disk/by-label/My\\x20Disk",
            "input/by-id/usb-Logitech_USB_Receiver-if01-event-mouse",
            "a#b+c=d@e:f",
            ".hidden",
            "bus/usb/001/002",
        ] {
            assert_eq!(devname_refusal(name), None, "{name}");
        }
    }

    #[test]
    fn unsafe_names_are_refused_with_the_reason() {
        let long = "a".repeat(256);
        let cases: &[(&str, &str)] = &[
            ("", "is empty"),
            (
                "/dev/null",
                "is absolute, not a path below /dev (dri/card1)",
            ),
            ("dri/", "has an empty component (a doubled or trailing /)"),
            (
                "dri/../../etc/shadow",
                "has a \"..\" component, which could leave /dev",
            ),
            ("./null", "has a \".\" component, which could leave /dev"),
            (&long, "has a component longer than 255 bytes"),
            ("tty\nUSB0", "contains '\\n': a control character"),
            ("tty\u{85}", "contains '\\u{85}': a control character"),
            (
                "usb-My Cable",
                "contains ' ': whitespace (udev writes it as \\x20)",
            ),
            (
                "usb-My\u{a0}Cable",
                "contains '\\u{a0}': whitespace (udev writes it as \\x20)",
            ),
            (
                "usb-\u{202e}lmth.exe",
                "contains '\\u{202e}': an invisible or bidirectional formatting character",
            ),
            (
                "a\\x2",
                "contains '\\\\': a \\ that is not udev's \\xHH escape",
            ),
            (
                "a\\y20",
                "contains '\\\\': a \\ that is not udev's \\xHH escape",
            ),
            (
                "evil\"name",
                "contains '\"': a character neither the kernel nor udev puts in a device name \
                 (letters, digits, # + , - . : = @ _ and non-ASCII UTF-8 are accepted)",
            ),
            (
                "$(reboot)",
                "contains '$': a character neither the kernel nor udev puts in a device name \
                 (letters, digits, # + , - . : = @ _ and non-ASCII UTF-8 are accepted)",
            ),
        ];
        for (name, why) in cases {
            assert_eq!(devname_refusal(name).as_deref(), Some(*why), "{name:?}");
        }
        assert!(devname_refusal(&"a/".repeat(600)).is_some());
    }
}

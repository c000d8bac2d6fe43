//! The generic backend: character devices of any sysfs class or bus (`tty`,
//! `kfd`, `accel`, `hidraw`, `usbmisc`, `usb`, ...), found by
//! configuration only.
//!
//! What it scans is the run's [`Scan`] ([`super::Context::with_scan`]),
//! plain data built from the run's generator definitions: each definition
//! with `backend: generic` declares a [`scan::Match`], and any definition
//! may `join` shared nodes found the same way. An empty scan finds
//! nothing.
//!
//! For each source, the entries of `/sys/class/<subsystem>` and
//! `/sys/bus/<subsystem>/devices` whose kernel name matches are read: the
//! node from `dev` (`"188:0\n"`) and `uevent` (`DEVNAME=ttyUSB0`, default
//! `/dev/<name>`), the `uevent` properties, the attribute globs (udev
//! `ATTRS{}`: all on the device or all on one ancestor), the `parent` (the
//! nearest ancestor of a bus and device type). A device matched by several
//! definitions is reported once, with every definition that matched it in
//! [`GenericInfo`], so that selection (a separate stage) can take the
//! devices of one definition.
//!
//! Recorded attributes are bounded ([`MAX_VALUE_LEN`]) printable text; a
//! value that is not is left out with a warning naming its file. `/dev`
//! symlinks (`/dev/serial/by-id/...`) are recorded when they name the
//! node; they are never device nodes. A device below a PCI function (a
//! USB serial adapter behind an xHCI controller) takes that function's
//! NUMA node ([`pci_numa_node`]).

pub mod scan;

pub use scan::{Scan, Source, Usage, join_tag};

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use super::devnode::{check_host_node, devname_refusal, read_node};
use super::{Backend, Context, Error, Report};
use crate::cdi::codec::natural_cmp;
use crate::model::{Device, GenericInfo, Link, Node, UsbPort};
use crate::root::{DevKind, HostRoot, dev_path, sys_path};
use crate::sysfs::{parse_numa_node, parse_uevent};
use scan::{Compiled, MAX_VALUE_LEN};

/// The backend's name in definitions and `--backend`.
pub const NAME: &str = "generic";

/// Role of a generic device's node (a `join` gives joined nodes its own).
pub const ROLE: &str = "generic";

/// Most ancestors looked at above a device (real sysfs trees are about a
/// dozen deep).
const MAX_DEPTH: usize = 64;

/// Largest attribute file read for a match (sysfs values are a page).
const MAX_READ: u64 = 4096;

/// The generic backend.
#[derive(Debug, Clone, Copy)]
pub struct Generic;

impl Backend for Generic {
    fn name(&self) -> &'static str {
        NAME
    }

    /// Lowest of the hardware backends: a device another backend reports
    /// (a PCI function matched on bus `pci`) is theirs.
    fn precedence(&self) -> u8 {
        1
    }

    fn discover(&self, cx: &Context, report: &mut Report) -> Result<Vec<Device>, Error> {
        let root = cx.root;
        let sources = cx.scan().sources();
        let subsystems: BTreeSet<&str> = sources
            .iter()
            .map(|s| s.matcher.source.subsystem.as_str())
            .collect();
        let mut links = LinkDirs::default();
        let mut devices: BTreeMap<String, Device> = BTreeMap::new();
        let mut groups: Groups<'_> = BTreeMap::new();
        for subsystem in subsystems {
            let mine: Vec<&Source> = sources
                .iter()
                .filter(|s| s.matcher.source.subsystem == subsystem)
                .collect();
            for (entry, on_bus) in entries(root, subsystem, report) {
                let Some(name) = entry.file_name().and_then(|n| n.to_str()) else {
                    continue;
                };
                let named: Vec<&Source> = mine
                    .iter()
                    .copied()
                    .filter(|s| s.matcher.name_matches(name))
                    .collect();
                if named.is_empty() {
                    continue;
                }
                let Some((dev, grouped)) = read_device(
                    root, &entry, name, subsystem, on_bus, &named, &mut links, report,
                ) else {
                    continue;
                };
                for (source, parent) in grouped {
                    groups
                        .entry((parent, source.generator.clone()))
                        .or_insert_with(|| (source, Vec::new()))
                        .1
                        .push(dev.clone());
                }
                let info = dev.generic.as_ref();
                if info.is_some_and(|g| !g.matched_by.is_empty() || !g.joined_by.is_empty()) {
                    devices.entry(dev.id.clone()).or_insert(dev);
                }
            }
        }
        for dev in grouped_devices(root, groups, report) {
            if devices.contains_key(&dev.id) {
                report.warn(
                    &dev.sysfs_path,
                    format!(
                        "the group {} has the identity of a node found on its own; not reporting the group",
                        dev.id
                    ),
                );
                continue;
            }
            devices.insert(dev.id.clone(), dev);
        }
        Ok(devices.into_values().collect())
    }
}

/// The nodes each grouping source found, by (parent, generator).
type Groups<'a> = BTreeMap<(PathBuf, String), (&'a Source, Vec<Device>)>;

/// One device per parent and generator of `groups` (`group: parent`): every
/// node found below the parent, its links, its parent's exposed attributes,
/// driver and NUMA node; named from the parent (`xdma:0000:04:00.0`).
/// Two generators that group one parent's nodes alike share the device;
/// one that groups other nodes of the same parent gets none, with a
/// warning naming both.
fn grouped_devices(root: &HostRoot, groups: Groups<'_>, report: &mut Report) -> Vec<Device> {
    let mut out: Vec<Device> = Vec::new();
    let mut attrs = Attrs::new(root);
    for ((parent, generator), (source, mut members)) in groups {
        let Some(parent_name) = parent.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let subsystem = &source.matcher.source.subsystem;
        members.sort_by(|a, b| natural_cmp(&a.id, &b.id));
        let mut nodes: Vec<Node> = Vec::new();
        let mut dev_links: Vec<Link> = Vec::new();
        for m in &members {
            nodes.extend(m.nodes.iter().cloned());
            dev_links.extend(m.links.iter().cloned());
        }
        dev_links.sort_by(|a, b| a.path.cmp(&b.path));
        dev_links.dedup();
        let id = format!("{subsystem}:{parent_name}");
        if let Some(same) = out.iter_mut().find(|d| d.id == id) {
            if same.nodes == nodes {
                if let Some(g) = same.generic.as_mut() {
                    g.matched_by.push(generator);
                }
            } else {
                let first = same
                    .generic
                    .as_ref()
                    .and_then(|g| g.matched_by.first().cloned())
                    .unwrap_or_default();
                report.warn(
                    &parent,
                    format!(
                        "generators {first:?} and {generator:?} group different {subsystem} nodes of {parent_name}; only {first:?} gets a device of them"
                    ),
                );
            }
            continue;
        }
        let mut exposed = BTreeMap::new();
        for a in &source.expose {
            match attrs.get(&parent, a, report) {
                Some(Read {
                    value: Value::Text(t),
                    ..
                }) => {
                    exposed.insert(a.clone(), t);
                }
                Some(Read {
                    path,
                    value: Value::Hostile(why),
                }) => report.warn(path, format!("{why}; not recording {a} of {parent_name}")),
                None => {}
            }
        }
        let bus = root
            .link_name(&parent.join("subsystem"))
            .ok()
            .flatten()
            .unwrap_or_else(|| "virtual".into());
        let sysfs_path = parent.display().to_string();
        let numa_node = pci_numa_node(root, &sysfs_path, report);
        out.push(Device {
            backend: NAME.into(),
            id,
            driver: root.link_name(&parent.join("driver")).ok().flatten(),
            numa_node,
            nodes,
            links: dev_links,
            attrs: exposed,
            generic: Some(GenericInfo {
                subsystem: subsystem.clone(),
                name: parent_name.to_string(),
                matched_by: vec![generator],
                group: Some(bus.clone()),
                ..Default::default()
            }),
            bus,
            sysfs_path,
            ..Default::default()
        });
    }
    out
}

/// The class and bus entries of `subsystem` (`/sys/class/tty/ttyUSB0`),
/// each once (a name in both views is the same device), with whether it
/// came from the bus view.
fn entries(root: &HostRoot, subsystem: &str, report: &mut Report) -> Vec<(PathBuf, bool)> {
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for (dir, on_bus) in [
        (sys_path(&format!("class/{subsystem}")), false),
        (sys_path(&format!("bus/{subsystem}/devices")), true),
    ] {
        let names = match root.list_dir_opt(&dir) {
            Ok(n) => n,
            Err(e) => {
                report.warn(&dir, format!("{}; not scanning it", e.reason()));
                continue;
            }
        };
        for n in names {
            if seen.insert(n.clone()) {
                out.push((dir.join(n), on_bus));
            }
        }
    }
    out
}

/// Reads one entry, returns the device when a source matches it, with the
/// grouping sources (`group: parent`) that matched it and the parent each
/// groups it under (the device's `matched_by` lists only the others).
#[allow(clippy::too_many_arguments)]
fn read_device<'s>(
    root: &HostRoot,
    entry: &Path,
    name: &str,
    subsystem: &str,
    on_bus: bool,
    sources: &[&'s Source],
    links: &mut LinkDirs,
    report: &mut Report,
) -> Option<(Device, Vec<(&'s Source, PathBuf)>)> {
    // Class directories hold attribute files too (`abi_version`): only
    // entries with a device number are devices.
    match read_value(root, &entry.join("dev")) {
        Ok(None) => return None,
        Ok(Some(_)) => {}
        Err(e) => {
            report.warn(entry.join("dev"), format!("{e}; skipping {name}"));
            return None;
        }
    }
    let node = read_node(root, entry, name, ROLE, name, report)?;
    let real = match root.resolve(entry) {
        Ok(p) => p,
        Err(e) => {
            report.warn(entry, format!("{}; skipping {name}", e.reason()));
            return None;
        }
    };
    let chain = ancestors(&real);
    let uevent_path = real.join("uevent");
    let uevent_text = match read_value(root, &uevent_path) {
        Ok(t) => t.unwrap_or_default(),
        Err(e) => {
            report.warn(&uevent_path, format!("{e}; skipping {name}"));
            return None;
        }
    };
    let uevent = parse_uevent(&uevent_text);
    let mut attrs = Attrs::new(root);
    let mut matched: Vec<(&'s Source, Option<PathBuf>)> = Vec::new();
    for s in sources.iter().copied() {
        if !s.matcher.properties_match(&uevent) {
            continue;
        }
        if !attrs_match(&s.matcher, &chain, &mut attrs, report) {
            continue;
        }
        let parent = match &s.matcher.source.parent {
            None => None,
            Some(p) => {
                match find_parent(root, &chain, &p.subsystem, p.devtype.as_deref(), report) {
                    Some(dir) => Some(dir),
                    None => continue,
                }
            }
        };
        matched.push((s, parent));
    }
    if matched.is_empty() {
        return None;
    }
    let node = check_host_node(root, node, report)?;
    let bus = if on_bus {
        subsystem.to_string()
    } else {
        root.link_name(&real.join("device/subsystem"))
            .ok()
            .flatten()
            .unwrap_or_else(|| "virtual".into())
    };
    let driver_link = if on_bus {
        real.join("driver")
    } else {
        real.join("device/driver")
    };
    let driver = root.link_name(&driver_link).ok().flatten();
    let mut recorded = BTreeMap::new();
    let mut info = GenericInfo {
        subsystem: subsystem.to_string(),
        name: name.to_string(),
        ..Default::default()
    };
    let mut dirs = BTreeSet::new();
    let mut grouped = Vec::new();
    for (s, parent) in &matched {
        match (s.usage, parent) {
            (Usage::Match, Some(p)) if s.matcher.groups() => grouped.push((*s, p.clone())),
            (Usage::Match, _) => info.matched_by.push(s.generator.clone()),
            (Usage::Join(i), _) => info.joined_by.push(join_tag(&s.generator, i)),
        }
        for a in &s.expose {
            if recorded.contains_key(a) {
                continue;
            }
            let from = std::iter::once(real.as_path()).chain(parent.as_deref());
            for dir in from {
                if let Some(v) = attrs.get(dir, a, report) {
                    recorded.insert(a.clone(), v);
                    break;
                }
            }
        }
        dirs.extend(s.link_dirs.iter().cloned());
    }
    info.matched_by.dedup();
    info.joined_by.dedup();
    let mut dev_links = Vec::new();
    for d in &dirs {
        dev_links.extend(links.naming(root, d, &node, report));
    }
    dev_links.sort_by(|a, b| a.path.cmp(&b.path));
    dev_links.dedup();
    let exposed = recorded
        .into_iter()
        .filter_map(|(k, v)| {
            let path = v.path;
            match v.value {
                Value::Text(t) => Some((k, t)),
                Value::Hostile(why) => {
                    report.warn(path, format!("{why}; not recording {k} of {name}"));
                    None
                }
            }
        })
        .collect();
    if matched.iter().any(|(s, _)| s.usb) {
        info.usb = usb_port(root, &chain, &mut attrs, report);
    }
    let sysfs_path = real.display().to_string();
    let numa_node = pci_numa_node(root, &sysfs_path, report);
    let device = Device {
        backend: NAME.into(),
        id: format!("{subsystem}:{name}"),
        sysfs_path,
        bus,
        driver,
        numa_node,
        nodes: vec![node],
        links: dev_links,
        attrs: exposed,
        generic: Some(info),
        ..Default::default()
    };
    Some((device, grouped))
}

/// Where a node below a USB device sits ([`UsbPort`]): the nearest
/// `usb_device` above it (not a root hub), its interface and usb-serial
/// port, and the host controller the root hub hangs off. `None` for a
/// node not below one.
fn usb_port(
    root: &HostRoot,
    chain: &[PathBuf],
    attrs: &mut Attrs<'_>,
    report: &mut Report,
) -> Option<UsbPort> {
    let mut interface = None;
    let mut port = None;
    for (i, dir) in chain.iter().enumerate().skip(1) {
        let bus = root.link_name(&dir.join("subsystem")).ok().flatten();
        match bus.as_deref() {
            Some("usb-serial") if port.is_none() => {
                port = attrs
                    .get(dir, "port_number", report)
                    .and_then(|r| match r.value {
                        Value::Text(t) => t.parse::<u32>().ok().or_else(|| {
                            report
                                .warn(&r.path, format!("{t:?} is not a port number; ignoring it"));
                            None
                        }),
                        Value::Hostile(why) => {
                            report.warn(&r.path, format!("{why}; ignoring it"));
                            None
                        }
                    });
            }
            Some("usb") => {
                let devtype = read_value(root, &dir.join("uevent"))
                    .ok()
                    .flatten()
                    .and_then(|t| {
                        parse_uevent(&t)
                            .iter()
                            .find(|(k, _)| *k == "DEVTYPE")
                            .map(|(_, v)| (*v).to_string())
                    });
                match devtype.as_deref() {
                    Some("usb_interface") if interface.is_none() => {
                        interface =
                            attrs.get(dir, "bInterfaceNumber", report).and_then(|r| {
                                match r.value {
                                    Value::Text(t)
                                        if (1..=2).contains(&t.len())
                                            && t.bytes().all(|b| b.is_ascii_hexdigit()) =>
                                    {
                                        Some(format!("{:0>2}", t.to_ascii_lowercase()))
                                    }
                                    Value::Text(t) => {
                                        report.warn(
                                            &r.path,
                                            format!(
                                                "{t:?} is not an interface number; ignoring it"
                                            ),
                                        );
                                        None
                                    }
                                    Value::Hostile(why) => {
                                        report.warn(&r.path, format!("{why}; ignoring it"));
                                        None
                                    }
                                }
                            });
                    }
                    Some("usb_device") => {
                        return usb_device(root, dir, chain.get(i + 1..)?, attrs, report).map(
                            |(device, path, serial)| UsbPort {
                                device,
                                path,
                                serial,
                                interface,
                                port,
                            },
                        );
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    None
}

/// The kernel name, port path and serial number of the USB device at
/// `dir` (`above`: its ancestors, nearest first). `None` for a root hub
/// (`usb1`: the controller itself) or a name that is not `<bus>-<ports>`.
fn usb_device(
    root: &HostRoot,
    dir: &Path,
    above: &[PathBuf],
    attrs: &mut Attrs<'_>,
    report: &mut Report,
) -> Option<(String, String, Option<String>)> {
    let name = dir.file_name()?.to_str()?;
    let (_bus, ports) = name.split_once('-')?;
    // The root hub is the first ancestor that is not a USB device of the
    // same bus; the controller is its parent (`0000:0e:00.3`).
    let hub = above.iter().find(|d| {
        d.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("usb") && !n.contains('-'))
    })?;
    let controller = hub.parent()?;
    let controller_name = controller.file_name()?.to_str()?;
    let controller_bus = root
        .link_name(&controller.join("subsystem"))
        .ok()
        .flatten()
        .unwrap_or_else(|| "platform".into());
    let path = format!("{controller_bus}-{controller_name}-usb-{ports}");
    let serial = match attrs.get(dir, "serial", report) {
        Some(Read {
            value: Value::Text(t),
            ..
        }) => Some(t).filter(|t| !t.trim().is_empty()),
        Some(Read {
            path,
            value: Value::Hostile(why),
        }) => {
            report.warn(path, format!("{why}; naming {name} by its port"));
            None
        }
        None => None,
    };
    Some((name.to_string(), path, serial))
}

/// The NUMA node of the PCI function `sysfs_path` is below
/// ([`crate::model::nearest_pci_function`]): its `numa_node`, `None` when
/// -1, absent, or not a node number (with a warning naming the file).
fn pci_numa_node(root: &HostRoot, sysfs_path: &str, report: &mut Report) -> Option<u32> {
    let function = crate::model::nearest_pci_function(sysfs_path)?;
    let path = Path::new(function).join("numa_node");
    match read_value(root, &path) {
        Ok(Some(v)) => parse_numa_node(&v).unwrap_or_else(|| {
            report.warn(&path, format!("{v:?} is not a NUMA node; ignoring it"));
            None
        }),
        Ok(None) => None,
        Err(e) => {
            report.warn(&path, format!("{e}; ignoring it"));
            None
        }
    }
}

/// The device's real path and its ancestors up to (not including)
/// `/sys/devices`, nearest first.
fn ancestors(real: &Path) -> Vec<PathBuf> {
    let top = Path::new("/sys/devices");
    let mut out = Vec::new();
    let mut here = Some(real);
    while let Some(p) = here {
        if p == top || !p.starts_with(top) || out.len() >= MAX_DEPTH {
            break;
        }
        out.push(p.to_path_buf());
        here = p.parent();
    }
    out
}

/// udev `ATTRS{}`: every attribute glob holds on the device itself or every
/// one on the same ancestor.
fn attrs_match(m: &Compiled, chain: &[PathBuf], attrs: &mut Attrs, report: &mut Report) -> bool {
    if m.attrs().is_empty() {
        return true;
    }
    chain.iter().any(|dir| {
        m.attrs().iter().all(|(k, glob)| {
            attrs
                .get(dir, k, report)
                .is_some_and(|v| matches!(&v.value, Value::Text(t) if glob.is_match(t)))
        })
    })
}

/// The nearest ancestor (the device itself excluded) on bus `subsystem`,
/// with `DEVTYPE=devtype` when given.
fn find_parent(
    root: &HostRoot,
    chain: &[PathBuf],
    subsystem: &str,
    devtype: Option<&str>,
    report: &mut Report,
) -> Option<PathBuf> {
    for dir in chain.iter().skip(1) {
        let bus = root.link_name(&dir.join("subsystem")).ok().flatten();
        if bus.as_deref() != Some(subsystem) {
            continue;
        }
        let Some(want) = devtype else {
            return Some(dir.clone());
        };
        let path = dir.join("uevent");
        match read_value(root, &path) {
            Ok(Some(text)) => {
                if parse_uevent(&text)
                    .iter()
                    .any(|(k, v)| *k == "DEVTYPE" && *v == want)
                {
                    return Some(dir.clone());
                }
            }
            Ok(None) => {}
            Err(e) => report.warn(&path, e),
        }
    }
    None
}

/// A file's text without its trailing newline, `None` when absent (or a
/// directory: `device` is a link, not an attribute; or below a file);
/// bounded to [`MAX_READ`] bytes.
fn read_value(root: &HostRoot, path: &Path) -> Result<Option<String>, String> {
    match root.read_limited(path, MAX_READ) {
        Ok(bytes) => {
            let mut text = String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())?;
            if text.ends_with('\n') {
                text.pop();
            }
            Ok(Some(text))
        }
        Err(e) if e.is_not_found() => Ok(None),
        // A link to a device (`device`, `subsystem`), not an attribute; or
        // a path below a file (a class attribute file's `dev`).
        Err(crate::root::Error::Io { cause, .. })
            if matches!(
                cause.kind(),
                std::io::ErrorKind::IsADirectory | std::io::ErrorKind::NotADirectory
            ) =>
        {
            Ok(None)
        }
        Err(crate::root::Error::NotRegular {
            what: "a directory",
            ..
        }) => Ok(None),
        // The warning names the file: only why.
        Err(e) => Err(e.reason()),
    }
}

/// An attribute value as read.
#[derive(Debug, Clone)]
enum Value {
    /// Printable text within bounds.
    Text(String),
    /// Present, but not a value to use (why).
    Hostile(String),
}

/// A value with the file it came from.
#[derive(Debug, Clone)]
struct Read {
    path: PathBuf,
    value: Value,
}

/// Attribute reads of one device and its ancestors, each file read once.
struct Attrs<'a> {
    root: &'a HostRoot,
    cache: BTreeMap<PathBuf, Option<Read>>,
}

impl<'a> Attrs<'a> {
    fn new(root: &'a HostRoot) -> Self {
        Attrs {
            root,
            cache: BTreeMap::new(),
        }
    }

    /// The attribute `name` of the device at `dir`; `None` when absent or
    /// unreadable (with a warning).
    fn get(&mut self, dir: &Path, name: &str, report: &mut Report) -> Option<Read> {
        let path = dir.join(name);
        if let Some(hit) = self.cache.get(&path) {
            return hit.clone();
        }
        let read = match read_value(self.root, &path) {
            Ok(None) => None,
            Ok(Some(text)) => Some(Read {
                path: path.clone(),
                value: checked(text),
            }),
            Err(e) => {
                report.warn(&path, format!("{e}; treating {name} as absent"));
                None
            }
        };
        self.cache.insert(path, read.clone());
        read
    }
}

/// Whether a value is fit to record: bounded, printable, one line.
fn checked(text: String) -> Value {
    if text.len() > MAX_VALUE_LEN {
        Value::Hostile(format!("value longer than {MAX_VALUE_LEN} bytes"))
    } else if let Some(c) = text.chars().find(|c| c.is_control()) {
        Value::Hostile(format!("value contains the control character {c:?}"))
    } else {
        Value::Text(text)
    }
}

/// `/dev` directories listed once per run: their symlinks with targets.
#[derive(Default)]
struct LinkDirs {
    dirs: BTreeMap<String, Vec<(PathBuf, String)>>,
}

impl LinkDirs {
    /// The links of `/dev/<dir>` that name `node`.
    fn naming(
        &mut self,
        root: &HostRoot,
        dir: &str,
        node: &Node,
        report: &mut Report,
    ) -> Vec<Link> {
        let entries = self
            .dirs
            .entry(dir.to_string())
            .or_insert_with(|| list_links(root, dir, report));
        entries
            .iter()
            .filter(|(path, target)| {
                path.parent()
                    .and_then(|d| lexical_join(d, target))
                    .is_some_and(|t| t == Path::new(&node.path))
            })
            .map(|(path, target)| Link {
                path: path.display().to_string(),
                target: target.clone(),
                node: node.path.clone(),
            })
            .collect()
    }
}

/// The symlinks of `/dev/<dir>` (a missing directory has none).
fn list_links(root: &HostRoot, dir: &str, report: &mut Report) -> Vec<(PathBuf, String)> {
    let host = dev_path(dir);
    let names = match root.dev_list(&host) {
        Ok(n) => n,
        Err(e) => {
            report.warn(&host, format!("{}; not recording its links", e.reason()));
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for n in names {
        let path = host.join(&n);
        match root.dev_entry(&path) {
            Ok(Some(e)) if e.kind == DevKind::Symlink => {
                let target = e.target.unwrap_or_default();
                if let Some(why) = devname_refusal(&format!("{dir}/{n}")) {
                    report.warn(
                        &path,
                        format!("not a plain name below /dev: it {why}; not recording this link"),
                    );
                    continue;
                }
                out.push((path, target));
            }
            Ok(_) => {}
            Err(e) => report.warn(&path, format!("{}; ignoring it", e.reason())),
        }
    }
    out
}

/// `base` joined with a relative link target, `..` resolved lexically
/// (`/dev/serial/by-id` + `../../ttyUSB0` = `/dev/ttyUSB0`); `None` when it
/// leaves `/dev` or the target is absolute.
fn lexical_join(base: &Path, target: &str) -> Option<PathBuf> {
    let t = Path::new(target);
    if t.is_absolute() {
        return None;
    }
    let mut out = base.to_path_buf();
    for c in t.components() {
        match c {
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            _ => return None,
        }
    }
    out.starts_with("/dev").then_some(out)
}

#[cfg(test)]
mod tests;

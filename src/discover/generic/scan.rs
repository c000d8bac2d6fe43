//! What the generic backend is asked to scan, as plain data: a [`Match`]
//! (a sysfs class or bus, kernel-name globs, udev-like attribute and
//! property matches, attributes and `/dev` links to record) as a
//! definition writes it, compiled ([`Compiled`]) into the [`Source`]s of a
//! [`Scan`]; and how a device a definition's `join` found is tagged
//! ([`join_tag`]).
//!
//! Discovery owns these types; the generator definitions embed [`Match`]
//! and build a [`Scan`] from their `match` and `join` sections.
//!
//! Patterns are globs (`ttyUSB*`, `tty[1-9]`, `0403`), compiled with
//! `globset` when a definition is parsed, so a bad pattern is an error
//! naming the file and the field.

use std::collections::{BTreeMap, BTreeSet};

use globset::{Glob, GlobBuilder, GlobMatcher};
use serde::{Deserialize, Serialize};

/// Devices of one sysfs class or bus, by name and attributes.
///
/// ```yaml
/// match:
///   subsystem: tty
///   name: ["ttyUSB*", "ttyACM*"]
///   attrs: {idVendor: "0403"}
///   parent: {subsystem: usb, devtype: usb_device}
///   expose: [serial, idVendor, idProduct]
///   links: [serial/by-id, serial/by-path]
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Match {
    /// The class or bus (`tty`, `accel`, `hidraw`, `usb`): the entries of
    /// `/sys/class/<subsystem>` and `/sys/bus/<subsystem>/devices` that
    /// have a character device number (a `dev` file).
    pub subsystem: String,
    /// Globs on the kernel name (`ttyUSB*`); empty: every name.
    #[serde(default)]
    pub name: Vec<String>,
    /// Attribute globs, as udev's `ATTRS{}`: all must hold on the device
    /// itself or all on one of its ancestors.
    #[serde(default)]
    pub attrs: BTreeMap<String, String>,
    /// Globs on keys of the device's own `uevent` file (`DEVTYPE`,
    /// `DRIVER`, `INTERFACE`); udev's database is not read.
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
    /// The device's "parent": its nearest ancestor of this bus (and device
    /// type). A device without one does not match. Exposed attributes are
    /// read from the device, then from it.
    #[serde(default)]
    pub parent: Option<Parent>,
    /// Attributes to record in the device's `attrs` (for names and
    /// templates): read from the device itself, else from `parent`.
    /// Attributes named in `attrs` and by `attr` names are recorded too.
    #[serde(default)]
    pub expose: Vec<String>,
    /// Directories below `/dev` (`serial/by-id`) whose symlinks naming the
    /// device's node are recorded (and bind-mounted, with `links: mount`).
    #[serde(default)]
    pub links: Vec<String>,
    /// `parent`: one device per `parent`, with every matched node below it
    /// (an FPGA card's 25 `xdma0_*` nodes on one PCI function, an ALSA
    /// card's control and PCM nodes), named from the parent. Default: one
    /// device per node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<Group>,
}

/// How a [`Match`] makes devices of the nodes it finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Group {
    /// Every matched node below one `parent` is one device.
    Parent,
}

/// The ancestor a [`Match`] reads exposed attributes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Parent {
    /// Its bus (`usb`, `pci`, `platform`).
    pub subsystem: String,
    /// Its `DEVTYPE` from `uevent` (`usb_device`, not `usb_interface`).
    #[serde(default)]
    pub devtype: Option<String>,
}

/// Longest attribute value recorded or matched (sysfs values are short;
/// anything longer is not a name or an ID).
pub const MAX_VALUE_LEN: usize = 256;

/// A [`Match`] with its globs compiled.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// The match as written.
    pub source: Match,
    names: Vec<GlobMatcher>,
    attrs: Vec<(String, GlobMatcher)>,
    properties: Vec<(String, GlobMatcher)>,
}

/// A glob as the definitions use them: `*` and `?` never cross `/`, `\`
/// escapes, `[...]` classes, `{a,b}` alternatives.
fn glob(pattern: &str) -> Result<GlobMatcher, String> {
    if pattern.is_empty() {
        return Err("empty pattern (use \"*\" for any value)".into());
    }
    if pattern.len() > MAX_VALUE_LEN {
        return Err(format!("pattern longer than {MAX_VALUE_LEN} bytes"));
    }
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map(|g: Glob| g.compile_matcher())
        .map_err(|e| format!("{pattern:?} is not a valid glob: {}", e.kind()))
}

/// A sysfs attribute file name (`idVendor`, `serial`, `bInterfaceClass`).
fn is_attr_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && !s.starts_with('.')
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// A class, bus or device type name (`tty`, `usb-serial`, `usb_device`).
pub(crate) fn is_subsystem_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'-'))
}

/// A `uevent` key (`DEVTYPE`, `ID_VENDOR`).
fn is_property_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

impl Match {
    /// Checks and compiles the match; the error is (field, message), the
    /// field relative to the match (`name[0]`).
    pub fn compile(&self) -> Result<Compiled, (String, String)> {
        if !is_subsystem_name(&self.subsystem) {
            return Err((
                "subsystem".into(),
                format!(
                    "{:?} is not a class or bus name like \"tty\" or \"usb-serial\"",
                    self.subsystem
                ),
            ));
        }
        if self.subsystem == "block" {
            return Err((
                "subsystem".into(),
                "block devices are not supported (the generic backend hands out character devices)"
                    .into(),
            ));
        }
        let names = self
            .name
            .iter()
            .enumerate()
            .map(|(i, p)| glob(p).map_err(|m| (format!("name[{i}]"), m)))
            .collect::<Result<Vec<_>, _>>()?;
        let mut attrs = Vec::new();
        for (k, v) in &self.attrs {
            if !is_attr_name(k) {
                return Err((
                    format!("attrs.{k}"),
                    format!("{k:?} is not a sysfs attribute name like \"idVendor\""),
                ));
            }
            attrs.push((k.clone(), glob(v).map_err(|m| (format!("attrs.{k}"), m))?));
        }
        let mut properties = Vec::new();
        for (k, v) in &self.properties {
            if !is_property_name(k) {
                return Err((
                    format!("properties.{k}"),
                    format!("{k:?} is not a uevent key like \"DEVTYPE\" (A-Z 0-9 _)"),
                ));
            }
            properties.push((
                k.clone(),
                glob(v).map_err(|m| (format!("properties.{k}"), m))?,
            ));
        }
        if let Some(p) = &self.parent {
            if !is_subsystem_name(&p.subsystem) {
                return Err((
                    "parent.subsystem".into(),
                    format!("{:?} is not a bus name like \"usb\"", p.subsystem),
                ));
            }
            if let Some(t) = &p.devtype
                && !is_subsystem_name(t)
            {
                return Err((
                    "parent.devtype".into(),
                    format!("{t:?} is not a device type like \"usb_device\""),
                ));
            }
        }
        for (i, a) in self.expose.iter().enumerate() {
            if !is_attr_name(a) {
                return Err((
                    format!("expose[{i}]"),
                    format!("{a:?} is not a sysfs attribute name like \"serial\""),
                ));
            }
        }
        for (i, l) in self.links.iter().enumerate() {
            check_link_dir(l).map_err(|m| (format!("links[{i}]"), m))?;
        }
        if self.group == Some(Group::Parent) && self.parent.is_none() {
            return Err((
                "group".into(),
                "`group: parent` needs `parent`: the bus of the device whose nodes make one device, like `parent: {subsystem: pci}`".into(),
            ));
        }
        Ok(Compiled {
            source: self.clone(),
            names,
            attrs,
            properties,
        })
    }
}

/// Checks a directory below `/dev` given as `serial/by-id`.
pub(crate) fn check_link_dir(dir: &str) -> Result<(), String> {
    if crate::discover::devnode::is_safe_devname(dir) {
        Ok(())
    } else {
        Err(format!(
            "{dir:?} is not a directory below /dev like \"serial/by-id\" (relative, no ..)"
        ))
    }
}

/// Checks an attribute name used by an `attr` name strategy.
pub(crate) fn check_attr_name(name: &str) -> Result<(), String> {
    if is_attr_name(name) {
        Ok(())
    } else {
        Err(format!("{name:?} is not an attribute name like \"serial\""))
    }
}

impl Compiled {
    /// Whether every matched node below one parent makes one device.
    pub fn groups(&self) -> bool {
        self.source.group == Some(Group::Parent)
    }

    /// Whether the kernel name matches (any of the globs; none: any name).
    pub fn name_matches(&self, name: &str) -> bool {
        self.names.is_empty() || self.names.iter().any(|g| g.is_match(name))
    }

    /// The attribute globs, by attribute name.
    pub fn attrs(&self) -> &[(String, GlobMatcher)] {
        &self.attrs
    }

    /// Whether the device's `uevent` pairs satisfy every property glob.
    pub fn properties_match(&self, uevent: &[(&str, &str)]) -> bool {
        self.properties.iter().all(|(k, g)| {
            uevent
                .iter()
                .find(|(key, _)| key == k)
                .is_some_and(|(_, v)| g.is_match(v))
        })
    }
}

/// Whether a source selects devices for its definition or joins their
/// nodes to the definition's devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    /// The definition's `match`.
    Match,
    /// The definition's `join` entry of this index.
    Join(usize),
}

/// One thing to scan for, from one generator definition.
#[derive(Debug, Clone)]
pub struct Source {
    /// The definition's name.
    pub generator: String,
    /// Match or join.
    pub usage: Usage,
    /// The compiled match.
    pub matcher: Compiled,
    /// Attributes to record: the match's `expose` and `attrs`, and the
    /// definition's `attr` names.
    pub expose: BTreeSet<String>,
    /// `/dev` directories whose links to record: the match's `links` and
    /// the definition's `link` names.
    pub link_dirs: BTreeSet<String>,
    /// Whether to record where the node sits on USB (for the definition's
    /// `usb` name strategy).
    pub usb: bool,
}

/// What the generic backend scans in one discovery run: the `match` and
/// `join` sections of the run's generator definitions, as [`Source`]s.
/// Empty: it finds nothing.
#[derive(Debug, Clone, Default)]
pub struct Scan {
    sources: Vec<Source>,
}

impl Scan {
    /// Nothing to scan.
    pub const fn new() -> Self {
        Scan {
            sources: Vec::new(),
        }
    }

    /// What to scan, in definition order.
    pub fn sources(&self) -> &[Source] {
        &self.sources
    }
}

impl FromIterator<Source> for Scan {
    fn from_iter<I: IntoIterator<Item = Source>>(iter: I) -> Self {
        Scan {
            sources: iter.into_iter().collect(),
        }
    }
}

/// How the generic backend records that a device was found by a
/// generator's `join[i]`: `amd-gpu.join[0]`.
pub fn join_tag(generator: &str, i: usize) -> String {
    format!("{generator}.join[{i}]")
}

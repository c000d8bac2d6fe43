//! NPWG device-info files (Device Information Specification v1.1.0).
//!
//! A device plugin that hands out network devices (SR-IOV VFs, vDPA
//! devices, vhost-user or memif sockets) can describe each allocated device
//! in a small JSON file, so that Multus and CNI plugins know what the
//! opaque device ID stands for. Device-plugin files live in [`DP_DIR`] and
//! are named by [`file_name`]; Multus copies them to [`CNI_DIR`] for the
//! CNI plugin chain and into the pod's `network-status` annotation.
//!
//! This module has the typed model ([`DeviceInfo`]), a validator
//! ([`validate()`]) that collects every problem with its location (such as
//! `pci.pci-address`), the encoder ([`to_bytes`], byte-identical to the
//! reference Go library's `json.Marshal`), a strict parser ([`parse`]), and
//! the file-name convention ([`file_name`], [`checked_file_name`],
//! [`dp_path`]).

use std::fmt::{self, Write as _};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use crate::cdi::validate::Problem;
use crate::sysfs::PciAddress;

#[cfg(test)]
mod tests;

/// The specification version cdigen writes.
pub const VERSION: &str = "1.1.0";

/// Where device plugins write their device-info files.
pub const DP_DIR: &str = "/var/run/k8s.cni.cncf.io/devinfo/dp";

/// Where Multus writes the per-attachment copies for CNI plugins.
pub const CNI_DIR: &str = "/var/run/k8s.cni.cncf.io/devinfo/cni";

/// The longest file name Linux accepts (`NAME_MAX`), in bytes.
pub const MAX_FILE_NAME: usize = 255;

/// One device-info file: what kind of device, and the section describing it.
///
/// Exactly the section named by `device_type` should be present; the
/// model allows any combination so that [`validate()`] can say what is
/// wrong with a file rather than the parser refusing it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceInfo {
    /// `type`: which section describes the device.
    #[serde(rename = "type")]
    pub device_type: DeviceType,
    /// `version`: the specification version, `MAJOR.MINOR.PATCH`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// `pci`: a PCI device (an SR-IOV VF, say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci: Option<Pci>,
    /// `vdpa`: a vDPA device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vdpa: Option<Vdpa>,
    /// `vhost-user`: a vhost-user socket.
    #[serde(
        rename = "vhost-user",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub vhost_user: Option<VhostUser>,
    /// `memif`: a memif socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memif: Option<Memif>,
}

/// The `type` of a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DeviceType {
    /// `pci`
    #[serde(rename = "pci")]
    Pci,
    /// `vdpa`
    #[serde(rename = "vdpa")]
    Vdpa,
    /// `vhost-user`
    #[serde(rename = "vhost-user")]
    VhostUser,
    /// `memif`
    #[serde(rename = "memif")]
    Memif,
}

impl DeviceType {
    /// Every type, in the specification's order.
    pub const ALL: [DeviceType; 4] = [
        DeviceType::Pci,
        DeviceType::Vdpa,
        DeviceType::VhostUser,
        DeviceType::Memif,
    ];

    /// The JSON spelling, which is also the name of the matching section.
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceType::Pci => "pci",
            DeviceType::Vdpa => "vdpa",
            DeviceType::VhostUser => "vhost-user",
            DeviceType::Memif => "memif",
        }
    }
}

impl fmt::Display for DeviceType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `pci` section. Every key is optional in the model; [`validate()`]
/// requires `pci-address`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pci {
    /// `pci-address`: the device's address, `dddd:bb:dd.f`.
    #[serde(rename = "pci-address", default, skip_serializing_if = "is_absent")]
    pub pci_address: Option<String>,
    /// `vhost-net`: path of the vhost-net character device (DPDK's
    /// exceptional path).
    #[serde(rename = "vhost-net", default, skip_serializing_if = "is_absent")]
    pub vhost_net: Option<String>,
    /// `rdma-device`: the RDMA device name(s), comma-separated.
    #[serde(rename = "rdma-device", default, skip_serializing_if = "is_absent")]
    pub rdma_device: Option<String>,
    /// `pf-pci-address`: the physical function's address, `dddd:bb:dd.f`.
    #[serde(rename = "pf-pci-address", default, skip_serializing_if = "is_absent")]
    pub pf_pci_address: Option<String>,
    /// `representor-device`: the VF representor's interface name.
    #[serde(
        rename = "representor-device",
        default,
        skip_serializing_if = "is_absent"
    )]
    pub representor_device: Option<String>,
}

/// The `vdpa` section. Every key is optional in the model; [`validate()`]
/// requires `parent-device`, `driver` and `path`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Vdpa {
    /// `parent-device`: the name under `/sys/bus/vdpa/devices` (`vdpa0`).
    #[serde(rename = "parent-device", default, skip_serializing_if = "is_absent")]
    pub parent_device: Option<String>,
    /// `driver`: the vDPA bus driver in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<VdpaDriver>,
    /// `path`: the absolute path of the vhost or virtio device.
    #[serde(default, skip_serializing_if = "is_absent")]
    pub path: Option<String>,
    /// `pci-address`: the backing PCI function's address, `dddd:bb:dd.f`.
    #[serde(rename = "pci-address", default, skip_serializing_if = "is_absent")]
    pub pci_address: Option<String>,
    /// `pf-pci-address`: the physical function's address, `dddd:bb:dd.f`.
    #[serde(rename = "pf-pci-address", default, skip_serializing_if = "is_absent")]
    pub pf_pci_address: Option<String>,
    /// `representor-device`: the VF representor's interface name.
    #[serde(
        rename = "representor-device",
        default,
        skip_serializing_if = "is_absent"
    )]
    pub representor_device: Option<String>,
}

/// The vDPA bus driver (not the kernel module name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VdpaDriver {
    /// `vhost`: `vhost_vdpa`, a `/dev/vhost-vdpa-N` character device.
    Vhost,
    /// `virtio`: `virtio_vdpa`, a kernel virtio device.
    Virtio,
}

impl VdpaDriver {
    /// The JSON spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            VdpaDriver::Vhost => "vhost",
            VdpaDriver::Virtio => "virtio",
        }
    }
}

/// The `vhost-user` section. Every key is optional in the model;
/// [`validate()`] requires both.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VhostUser {
    /// `mode`: which side creates the socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<VhostUserMode>,
    /// `path`: the socket file.
    #[serde(default, skip_serializing_if = "is_absent")]
    pub path: Option<String>,
}

/// Which side of a vhost-user socket creates it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VhostUserMode {
    /// `client`: the host creates the socket; the container attaches.
    Client,
    /// `server`: the container creates the socket; the host attaches.
    Server,
}

impl VhostUserMode {
    /// The JSON spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            VhostUserMode::Client => "client",
            VhostUserMode::Server => "server",
        }
    }
}

/// The `memif` section. Every key is optional in the model; [`validate()`]
/// requires all three.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Memif {
    /// `role`: which side creates the socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<MemifRole>,
    /// `path`: the socket file.
    #[serde(default, skip_serializing_if = "is_absent")]
    pub path: Option<String>,
    /// `mode`: what the interface carries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<MemifMode>,
}

/// Which side of a memif socket creates it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemifRole {
    /// `master`: the container creates the socket; the host attaches.
    Master,
    /// `slave`: the host creates the socket; the container attaches.
    Slave,
}

impl MemifRole {
    /// The JSON spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            MemifRole::Master => "master",
            MemifRole::Slave => "slave",
        }
    }
}

/// What a memif interface carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MemifMode {
    /// `ethernet`: Ethernet frames.
    Ethernet,
    /// `ip`: IP packets.
    Ip,
    /// `inject-punt`: reserved by the specification, not implemented.
    InjectPunt,
}

impl MemifMode {
    /// The JSON spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            MemifMode::Ethernet => "ethernet",
            MemifMode::Ip => "ip",
            MemifMode::InjectPunt => "inject-punt",
        }
    }
}

/// Go's `omitempty` for a string: absent and empty are both left out.
fn is_absent(s: &Option<String>) -> bool {
    s.as_deref().is_none_or(str::is_empty)
}

// ---------------------------------------------------------------------------
// Validation

struct Collector {
    problems: Vec<Problem>,
}

impl Collector {
    fn push(&mut self, location: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem {
            location: location.into(),
            message: message.into(),
        });
    }
}

/// What a required key should hold, for "missing" messages.
const EXPECT_PCI_ADDRESS: &str = "a PCI address such as \"0000:3b:00.2\"";

/// Validates a device-info record; an empty result means valid.
///
/// Locations are JSON keys (`version`, `pci`, `vdpa.path`). Every present
/// section is checked, including one that should not be there.
pub fn validate(info: &DeviceInfo) -> Vec<Problem> {
    let mut c = Collector {
        problems: Vec::new(),
    };
    check_version(&mut c, &info.version);

    let present = [
        (DeviceType::Pci, info.pci.is_some()),
        (DeviceType::Vdpa, info.vdpa.is_some()),
        (DeviceType::VhostUser, info.vhost_user.is_some()),
        (DeviceType::Memif, info.memif.is_some()),
    ];
    let t = info.device_type;
    for (section, is_present) in present {
        if section == t && !is_present {
            c.push(
                section.as_str(),
                format!("missing (required when \"type\" is \"{t}\")"),
            );
        } else if section != t && is_present {
            c.push(
                section.as_str(),
                format!(
                    "not allowed when \"type\" is \"{t}\" (only the \"{t}\" section may be present)"
                ),
            );
        }
    }

    if let Some(p) = &info.pci {
        check_pci(&mut c, p);
    }
    if let Some(v) = &info.vdpa {
        check_vdpa(&mut c, v);
    }
    if let Some(v) = &info.vhost_user {
        if v.mode.is_none() {
            c.push(
                "vhost-user.mode",
                "missing (required; expected \"client\" or \"server\")",
            );
        }
        required(
            &mut c,
            "vhost-user.path",
            v.path.as_deref(),
            "an absolute socket path such as \"/var/run/vhost.sock\"",
            path_problem,
        );
    }
    if let Some(m) = &info.memif {
        if m.role.is_none() {
            c.push(
                "memif.role",
                "missing (required; expected \"master\" or \"slave\")",
            );
        }
        required(
            &mut c,
            "memif.path",
            m.path.as_deref(),
            "an absolute socket path such as \"/run/memif/memif1.sock\"",
            path_problem,
        );
        if m.mode.is_none() {
            c.push(
                "memif.mode",
                "missing (required; expected \"ethernet\", \"ip\" or \"inject-punt\")",
            );
        }
    }
    c.problems
}

fn check_version(c: &mut Collector, version: &str) {
    if version.is_empty() {
        c.push(
            "version",
            format!(
                "missing or empty (expected a MAJOR.MINOR.PATCH version such as \"{VERSION}\")"
            ),
        );
        return;
    }
    let mut parts = 0;
    let well_formed = version.split('.').all(|n| {
        parts += 1;
        !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && (n == "0" || !n.starts_with('0'))
    });
    if !well_formed || parts != 3 {
        c.push(
            "version",
            format!(
                "{version:?} is not a MAJOR.MINOR.PATCH version (expected three dot-separated \
                 numbers without leading zeros, such as \"{VERSION}\")"
            ),
        );
    }
}

fn check_pci(c: &mut Collector, p: &Pci) {
    required(
        c,
        "pci.pci-address",
        p.pci_address.as_deref(),
        EXPECT_PCI_ADDRESS,
        pci_address_problem,
    );
    optional(c, "pci.vhost-net", p.vhost_net.as_deref(), path_problem);
    optional(c, "pci.rdma-device", p.rdma_device.as_deref(), rdma_problem);
    optional(
        c,
        "pci.pf-pci-address",
        p.pf_pci_address.as_deref(),
        pci_address_problem,
    );
    optional(
        c,
        "pci.representor-device",
        p.representor_device.as_deref(),
        interface_name_problem,
    );
}

fn check_vdpa(c: &mut Collector, v: &Vdpa) {
    required(
        c,
        "vdpa.parent-device",
        v.parent_device.as_deref(),
        "a vDPA device name such as \"vdpa0\"",
        parent_device_problem,
    );
    if v.driver.is_none() {
        c.push(
            "vdpa.driver",
            "missing (required; expected \"vhost\" or \"virtio\")",
        );
    }
    required(
        c,
        "vdpa.path",
        v.path.as_deref(),
        "an absolute device path such as \"/dev/vhost-vdpa-0\"",
        path_problem,
    );
    optional(
        c,
        "vdpa.pci-address",
        v.pci_address.as_deref(),
        pci_address_problem,
    );
    optional(
        c,
        "vdpa.pf-pci-address",
        v.pf_pci_address.as_deref(),
        pci_address_problem,
    );
    optional(
        c,
        "vdpa.representor-device",
        v.representor_device.as_deref(),
        interface_name_problem,
    );
}

/// A required string key: missing and empty are reported (an empty string
/// is left out when written, as the reference library does), then `check`.
fn required(
    c: &mut Collector,
    at: &str,
    value: Option<&str>,
    expected: &str,
    check: fn(&str) -> Option<String>,
) {
    match value {
        None => c.push(at, format!("missing (required; expected {expected})")),
        Some("") => c.push(at, format!("empty (required; expected {expected})")),
        Some(v) => {
            if let Some(p) = check(v) {
                c.push(at, p);
            }
        }
    }
}

/// An optional string key: an empty value is reported (it would be left
/// out when written), then `check`.
fn optional(c: &mut Collector, at: &str, value: Option<&str>, check: fn(&str) -> Option<String>) {
    match value {
        None => {}
        Some("") => c.push(at, "empty (leave the key out instead)"),
        Some(v) => {
            if let Some(p) = check(v) {
                c.push(at, p);
            }
        }
    }
}

/// A PCI address in the kernel's canonical spelling (lowercase hex,
/// `%04x:%02x:%02x.%x`).
fn pci_address_problem(s: &str) -> Option<String> {
    match s.parse::<PciAddress>() {
        Err(_) => Some(format!(
            "{s:?} is not a PCI address (expected dddd:bb:dd.f, such as \"0000:3b:00.2\")"
        )),
        Ok(a) => {
            let canonical = a.to_string();
            (canonical != s).then(|| {
                format!("{s:?} is not in canonical form (expected {canonical:?}: lowercase dddd:bb:dd.f)")
            })
        }
    }
}

/// An absolute path without NUL or newline.
fn path_problem(p: &str) -> Option<String> {
    if !p.starts_with('/') {
        return Some(format!(
            "{p:?} is not an absolute path (expected a path starting with \"/\")"
        ));
    }
    p.chars().find(|ch| matches!(ch, '\0' | '\n')).map(|ch| {
        format!("{p:?} contains {ch:?} (a path must not contain a NUL byte or a newline)")
    })
}

/// A comma-separated list of RDMA device names (`mlx5_2` or
/// `mlx5_2,mlx5_3`), as the SR-IOV device plugin joins them.
fn rdma_problem(s: &str) -> Option<String> {
    for (i, name) in s.split(',').enumerate() {
        if name.is_empty() {
            return Some(format!(
                "{s:?} has an empty name at position {} (expected comma-separated RDMA device \
                 names such as \"mlx5_2\" or \"mlx5_2,mlx5_3\")",
                i + 1
            ));
        }
        if let Some(ch) = name
            .chars()
            .find(|ch| ch.is_whitespace() || ch.is_control() || *ch == '/')
        {
            return Some(format!(
                "{s:?} has {name:?}, which contains {ch:?} (expected comma-separated RDMA \
                 device names without whitespace or '/', such as \"mlx5_2,mlx5_3\")"
            ));
        }
    }
    None
}

/// The kernel's `dev_valid_name`: 1 to 15 bytes, not `.` or `..`, no `/`,
/// `:` or whitespace.
fn interface_name_problem(name: &str) -> Option<String> {
    if name.len() > 15 {
        return Some(format!(
            "{name:?} is longer than 15 bytes (expected an interface name; the kernel's IFNAMSIZ \
             limit)"
        ));
    }
    if name == "." || name == ".." {
        return Some(format!("{name:?} is not an interface name"));
    }
    name.chars()
        .find(|ch| *ch == '/' || *ch == ':' || ch.is_whitespace() || ch.is_control())
        .map(|ch| format!("{name:?} contains {ch:?}, not allowed in an interface name"))
}

/// A vDPA device name: one directory entry of `/sys/bus/vdpa/devices`.
fn parent_device_problem(name: &str) -> Option<String> {
    if name == "." || name == ".." {
        return Some(format!(
            "{name:?} is not a device name (expected a name under /sys/bus/vdpa/devices, such \
             as \"vdpa0\")"
        ));
    }
    name.chars()
        .find(|ch| *ch == '/' || ch.is_whitespace() || ch.is_control())
        .map(|ch| {
            format!(
                "{name:?} contains {ch:?} (expected a name under /sys/bus/vdpa/devices, such as \
                 \"vdpa0\")"
            )
        })
}

// ---------------------------------------------------------------------------
// Encoding

/// Why bytes could not be read as device information.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// Nothing but whitespace.
    #[error("file is empty (expected NPWG device information)")]
    Empty,
    /// Not UTF-8.
    #[error("not UTF-8 text")]
    NotUtf8,
    /// JSON syntax, a key the model does not know, a duplicate key, or a
    /// value outside an enumeration.
    #[error("invalid device information JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// Parses device information strictly: unknown and duplicate keys, values
/// outside the enumerations, and trailing data are errors. It does not
/// [`validate()`].
///
/// # Errors
/// [`ParseError`] saying what is wrong.
pub fn parse(bytes: &[u8]) -> Result<DeviceInfo, ParseError> {
    let text = std::str::from_utf8(bytes).map_err(|_| ParseError::NotUtf8)?;
    if text.trim().is_empty() {
        return Err(ParseError::Empty);
    }
    Ok(serde_json::from_str(text)?)
}

/// Encodes device information exactly as the reference Go library
/// (`json.Marshal`) does: compact, keys in the specification's order,
/// absent or empty strings left out, `<`, `>`, `&`, U+2028 and U+2029
/// escaped as `\u003c` and so on, and no trailing newline.
pub fn to_bytes(info: &DeviceInfo) -> Vec<u8> {
    let mut out = String::with_capacity(128);
    let mut o = Object::open(&mut out);
    o.field("type", Some(info.device_type.as_str()));
    o.field("version", Some(&info.version));
    if let Some(p) = &info.pci {
        let mut s = o.object("pci");
        s.field("pci-address", p.pci_address.as_deref());
        s.field("vhost-net", p.vhost_net.as_deref());
        s.field("rdma-device", p.rdma_device.as_deref());
        s.field("pf-pci-address", p.pf_pci_address.as_deref());
        s.field("representor-device", p.representor_device.as_deref());
        s.close();
    }
    if let Some(v) = &info.vdpa {
        let mut s = o.object("vdpa");
        s.field("parent-device", v.parent_device.as_deref());
        s.field("driver", v.driver.map(VdpaDriver::as_str));
        s.field("path", v.path.as_deref());
        s.field("pci-address", v.pci_address.as_deref());
        s.field("pf-pci-address", v.pf_pci_address.as_deref());
        s.field("representor-device", v.representor_device.as_deref());
        s.close();
    }
    if let Some(v) = &info.vhost_user {
        let mut s = o.object("vhost-user");
        s.field("mode", v.mode.map(VhostUserMode::as_str));
        s.field("path", v.path.as_deref());
        s.close();
    }
    if let Some(m) = &info.memif {
        let mut s = o.object("memif");
        s.field("role", m.role.map(MemifRole::as_str));
        s.field("path", m.path.as_deref());
        s.field("mode", m.mode.map(MemifMode::as_str));
        s.close();
    }
    o.close();
    out.into_bytes()
}

/// A JSON object being written: keys in call order, comma-separated.
struct Object<'a> {
    out: &'a mut String,
    first: bool,
}

impl<'a> Object<'a> {
    fn open(out: &'a mut String) -> Self {
        out.push('{');
        Object { out, first: true }
    }

    fn key(&mut self, key: &str) {
        if !self.first {
            self.out.push(',');
        }
        self.first = false;
        write_go_string(self.out, key);
        self.out.push(':');
    }

    /// A string member, left out when absent or empty (`omitempty`).
    fn field(&mut self, key: &str, value: Option<&str>) {
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            self.key(key);
            write_go_string(self.out, v);
        }
    }

    /// An object member; the caller fills and closes it.
    fn object(&mut self, key: &str) -> Object<'_> {
        self.key(key);
        Object::open(self.out)
    }

    fn close(self) {
        self.out.push('}');
    }
}

/// A JSON string as Go's `encoding/json` writes it with HTML escaping (the
/// `json.Marshal` default, Go 1.22 and later).
fn write_go_string(out: &mut String, s: &str) {
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\0'..='\u{1f}' | '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                // Writing to a String cannot fail.
                let _ = write!(out, "\\u{:04x}", u32::from(ch));
            }
            _ => out.push(ch),
        }
    }
    out.push('"');
}

// ---------------------------------------------------------------------------
// File names

/// Which input of a device-info file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NamePart {
    /// The resource name (`nvidia.com/mlx_rdma`).
    Resource,
    /// The device ID (`0000:3b:00.2`).
    DeviceId,
}

impl fmt::Display for NamePart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NamePart::Resource => "resource name",
            NamePart::DeviceId => "device ID",
        })
    }
}

/// Why a resource name and device ID do not make a plain file name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FileNameError {
    /// One of the inputs is unusable.
    #[error("{part} {value:?}: {reason}")]
    Part {
        /// Which input.
        part: NamePart,
        /// The input as given.
        value: String,
        /// What is wrong and what was expected.
        reason: String,
    },
    /// Both are fine, but the file name is too long for Linux.
    #[error("file name {name:?} is {len} bytes (at most {MAX_FILE_NAME})")]
    TooLong {
        /// The file name.
        name: String,
        /// Its length in bytes.
        len: usize,
    },
}

/// The device-plugin file name, `<resource>-<deviceID>-device.json`, with
/// every `/` in both replaced by `-` as the reference library does (colons,
/// as in a PCI address, are kept). Nothing is checked: see
/// [`checked_file_name`].
pub fn file_name(resource: &str, device_id: &str) -> String {
    format!(
        "{}-{}-device.json",
        resource.replace('/', "-"),
        device_id.replace('/', "-")
    )
}

/// [`file_name`], refusing inputs that would not make a plain, portable
/// file name: an empty input, a character outside `A-Z a-z 0-9 . _ : -`
/// (before `/` is replaced), a `/`-separated segment that is empty, `.` or
/// `..`, or a result longer than [`MAX_FILE_NAME`].
///
/// # Errors
/// [`FileNameError`] naming the input at fault.
pub fn checked_file_name(resource: &str, device_id: &str) -> Result<String, FileNameError> {
    check_name_part(NamePart::Resource, resource)?;
    check_name_part(NamePart::DeviceId, device_id)?;
    let name = file_name(resource, device_id);
    if name.len() > MAX_FILE_NAME {
        let len = name.len();
        return Err(FileNameError::TooLong { name, len });
    }
    Ok(name)
}

/// The full path of a device-plugin file: [`DP_DIR`] joined with
/// [`checked_file_name`].
///
/// # Errors
/// [`FileNameError`] naming the input at fault.
pub fn dp_path(resource: &str, device_id: &str) -> Result<PathBuf, FileNameError> {
    Ok(PathBuf::from(DP_DIR).join(checked_file_name(resource, device_id)?))
}

fn check_name_part(part: NamePart, value: &str) -> Result<(), FileNameError> {
    let fail = |reason: String| {
        Err(FileNameError::Part {
            part,
            value: value.to_string(),
            reason,
        })
    };
    if value.is_empty() {
        return fail("must not be empty".into());
    }
    if let Some(ch) = value
        .chars()
        .find(|ch| !(ch.is_ascii_alphanumeric() || matches!(ch, '.' | '_' | ':' | '-' | '/')))
    {
        return fail(format!(
            "contains {ch:?} (expected only A-Z a-z 0-9 . _ : - and /, which becomes -)"
        ));
    }
    if let Some(seg) = value
        .split('/')
        .find(|seg| seg.is_empty() || *seg == "." || *seg == "..")
    {
        return fail(if seg.is_empty() {
            "has an empty \"/\"-separated segment (a leading, trailing or doubled \"/\")".into()
        } else {
            format!(
                "has a {seg:?} segment (\".\" and \"..\" are not allowed, alone or between \"/\")"
            )
        });
    }
    Ok(())
}

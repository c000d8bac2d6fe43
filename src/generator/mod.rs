//! Generator definitions: which devices of which backend go into which
//! spec, named how, rendered by which template, written where.
//!
//! Definitions are YAML files (`generators/*.yaml`). The shipped ones are
//! embedded in the binary; a user directory adds definitions or replaces a
//! shipped one of the same `name`. Parsing is strict: an unknown key or a
//! bad value is an error naming the file, the line, and what was expected.
//! Two definitions that would write one file are refused together
//! ([`check_shared_outputs`]). What a run's definitions ask the generic
//! backend to scan is built here ([`scan`]), as discovery's plain data.

pub mod select;
pub mod source;

pub use source::scan;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::cdi::{Format, Kind, Version};
use crate::fsio::Links;

/// The shipped definitions: (file name, content).
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "amd-gpu.yaml",
        include_str!("../../generators/amd-gpu.yaml"),
    ),
    (
        "intel-gpu.yaml",
        include_str!("../../generators/intel-gpu.yaml"),
    ),
    (
        "intel-npu.yaml",
        include_str!("../../generators/intel-npu.yaml"),
    ),
    (
        "intel-gpu-mei.yaml",
        include_str!("../../generators/intel-gpu-mei.yaml"),
    ),
    ("gaudi.yaml", include_str!("../../generators/gaudi.yaml")),
    ("drm.yaml", include_str!("../../generators/drm.yaml")),
    (
        "bmc-display.yaml",
        include_str!("../../generators/bmc-display.yaml"),
    ),
    ("vfio.yaml", include_str!("../../generators/vfio.yaml")),
    ("sriov.yaml", include_str!("../../generators/sriov.yaml")),
    ("vdpa.yaml", include_str!("../../generators/vdpa.yaml")),
    ("nvidia.yaml", include_str!("../../generators/nvidia.yaml")),
    (
        "nvidia-imex.yaml",
        include_str!("../../generators/nvidia-imex.yaml"),
    ),
    (
        "nvidia-management.yaml",
        include_str!("../../generators/nvidia-management.yaml"),
    ),
    (
        "nvidia-gdrcopy.yaml",
        include_str!("../../generators/nvidia-gdrcopy.yaml"),
    ),
    (
        "nvidia-gds.yaml",
        include_str!("../../generators/nvidia-gds.yaml"),
    ),
    (
        "generic-tty.yaml",
        include_str!("../../generators/generic-tty.yaml"),
    ),
    (
        "usb-serial.yaml",
        include_str!("../../generators/usb-serial.yaml"),
    ),
    ("accel.yaml", include_str!("../../generators/accel.yaml")),
    (
        "dma-heap.yaml",
        include_str!("../../generators/dma-heap.yaml"),
    ),
    ("xdma.yaml", include_str!("../../generators/xdma.yaml")),
    ("alsa.yaml", include_str!("../../generators/alsa.yaml")),
    ("rdma.yaml", include_str!("../../generators/rdma.yaml")),
    (
        "rdma-shared.yaml",
        include_str!("../../generators/rdma-shared.yaml"),
    ),
];

/// Where users put their own definitions.
pub const USER_DIR: &str = "/etc/cdigen/generators.d";

/// One generator definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Generator {
    /// Unique name; also the owner recorded for the files it writes.
    pub name: String,
    /// What it is for.
    #[serde(default)]
    pub description: String,
    /// Whether `generate` runs it.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// The backend whose devices it takes (`drm`).
    pub backend: String,
    /// CDI kind of the spec, `vendor/class`.
    pub kind: String,
    /// What the `generic` backend scans for this generator (required with
    /// backend `generic`, refused with any other).
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub source: Option<source::Match>,
    /// Shared nodes (found by the generic backend) added to every device
    /// this generator selects, like ROCm's `/dev/kfd` for AMD GPUs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub join: Vec<source::Join>,
    /// Which devices to take.
    #[serde(default)]
    pub select: select::Select,
    /// Leave out the first N selected devices, in identity order (natural
    /// order of kernel names: `tty2` before `tty10`): the seed's
    /// `num_system_reserved`. Reserved devices are in no CDI device, `all`
    /// included.
    #[serde(default)]
    pub reserve: u32,
    /// Device names to emit, in order; each selected device gets one CDI
    /// device per strategy (plus one `all` device if listed).
    #[serde(default = "default_names")]
    pub names: Vec<NameStrategy>,
    /// Template name (`templates/<name>.json.hbs`).
    pub template: String,
    /// Output file and format.
    #[serde(default)]
    pub output: Output,
    /// How device nodes are written.
    #[serde(default)]
    pub device_nodes: NodeSettings,
    /// How `/dev/dri/by-path` style links reach the container.
    #[serde(default)]
    pub links: LinkMode,
    /// Pin `cdiVersion` (default: the minimum the content needs).
    #[serde(default)]
    pub cdi_version: Option<String>,
    /// Which VFIO nodes devices get (VFIO devices and VFs on vfio-pci).
    #[serde(default)]
    pub vfio_mode: VfioMode,
    /// Also write an NPWG device-info file (v1.1.0) for every device, with
    /// the kind as resource name and the device's identity as device ID.
    #[serde(default)]
    pub device_info: bool,
    /// Device-info entries that are not hardware (vhost-user and memif
    /// sockets): written as given when `device_info` is on.
    #[serde(default)]
    pub static_devices: Vec<StaticDevice>,
    /// How `cdigen device-plugin` offers the devices to the kubelet.
    #[serde(default)]
    pub device_plugin: DevicePlugin,
    /// The driver files the devices' containers get (backend `nvidia`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<DriverSettings>,
    /// How `cdigen dra-driver` prepares the devices.
    #[serde(default, skip_serializing_if = "Dra::is_default")]
    pub dra: Dra,
}

/// A generator's DRA driver settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dra {
    /// Whether a claim whose DeviceClass asks for it (`passthrough:
    /// vfio-pci` in its configuration) may have a device (a PCI function)
    /// unbound from its host driver and bound to `vfio-pci` while the claim
    /// is prepared (KubeVirt's passthrough); off by default.
    #[serde(default, skip_serializing_if = "is_false")]
    pub vfio_passthrough: bool,
}

impl Dra {
    fn is_default(&self) -> bool {
        *self == Dra::default()
    }
}

/// Which of a driver's user-space files a generator's spec gives, and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DriverSettings {
    /// What containers get the driver for (default compute, utility,
    /// video, graphics; `display` adds the Xorg modules).
    #[serde(default = "default_capabilities")]
    pub capabilities: Vec<crate::model::Capability>,
    /// Whether the driver's libraries must be found: `required` fails the
    /// generator when `libcuda` of the running version is not there (or
    /// another version is), `optional` writes what there is with a
    /// warning, `none` gives device nodes only.
    #[serde(default)]
    pub files: DriverFiles,
    /// Whether the spec asks the runtime to run `cdigen hook` (linker
    /// cache, soname and development links, CUDA forward compatibility);
    /// `false` is the no-hook mode: links are bind mounts, and the
    /// container's linker cache is left alone.
    #[serde(default = "yes")]
    pub hooks: bool,
}

impl Default for DriverSettings {
    fn default() -> Self {
        DriverSettings {
            capabilities: default_capabilities(),
            files: DriverFiles::default(),
            hooks: true,
        }
    }
}

fn default_capabilities() -> Vec<crate::model::Capability> {
    use crate::model::Capability::*;
    vec![Compute, Utility, Video, Graphics]
}

/// Whether a generator needs the driver's files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DriverFiles {
    /// Fail without them.
    #[default]
    Required,
    /// Give what there is; warn about what is missing.
    Optional,
    /// Device nodes only.
    None,
}

/// A generator's device plugin settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DevicePlugin {
    /// Whether `cdigen device-plugin` advertises the devices (turn off
    /// where another plugin already serves the resource, such as NVIDIA's
    /// own for `nvidia.com/gpu`).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// The extended resource name pods request (default: the kind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// How many containers may hold each offered device at once: it is
    /// advertised as this many units (IDs `<ID>-0`, `<ID>-1`, ...), and
    /// every unit gives the same CDI device, as the RDMA shared device
    /// plugin's `rdmaHcaMax` (default 1: each device to one container).
    /// At most [`MAX_REPLICAS`].
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub replicas: u32,
    /// Whether the resource is registered with the kubelet while the host
    /// has none of its devices (it then shows as 0 allocatable); by
    /// default it is registered once its first device is found.
    #[serde(default, skip_serializing_if = "is_false")]
    pub register_empty: bool,
    /// The resources of other device plugins that serve these same devices
    /// (`nvidia.com/gpu`; a trailing `*` matches a prefix:
    /// `nvidia.com/mig-*`): while one of them is served on the node, the
    /// devices are not offered, so that one device never goes to two pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vendor_resources: Vec<String>,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if
fn is_false(b: &bool) -> bool {
    !*b
}

/// The most units one device may be advertised as
/// ([`DevicePlugin::replicas`]).
pub const MAX_REPLICAS: u32 = 10_000;

fn one() -> u32 {
    1
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if
fn is_one(n: &u32) -> bool {
    *n == 1
}

impl Default for DevicePlugin {
    fn default() -> Self {
        DevicePlugin {
            enabled: true,
            resource: None,
            replicas: 1,
            register_empty: false,
            vendor_resources: Vec::new(),
        }
    }
}

/// A device-info entry from configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticDevice {
    /// The device ID in the file name (`vhostuser0`).
    pub id: String,
    /// The device-info content, as in the NPWG spec (`type`, `version`,
    /// and the section of that type).
    pub device_info: crate::devinfo::DeviceInfo,
}

/// Which VFIO nodes to give a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VfioMode {
    /// What the host offers: legacy when the group node exists, else
    /// iommufd.
    #[default]
    Auto,
    /// `/dev/vfio/vfio` and the group node.
    Legacy,
    /// `/dev/iommu` and the device cdev `/dev/vfio/devices/vfioX`.
    Iommufd,
    /// Every VFIO node the host has; the application picks.
    Both,
}

impl VfioMode {
    /// The mode as written in a definition (`auto`, `legacy`).
    pub fn as_str(self) -> &'static str {
        match self {
            VfioMode::Auto => "auto",
            VfioMode::Legacy => "legacy",
            VfioMode::Iommufd => "iommufd",
            VfioMode::Both => "both",
        }
    }

    /// Whether a node of `role` is kept for a device whose host mode is
    /// `host_mode` (`legacy` or `iommufd`).
    pub fn keeps(self, role: &str, host_mode: &str) -> bool {
        let legacy = matches!(role, "vfio-container" | "vfio-group");
        let iommufd = matches!(role, "vfio-cdev" | "iommufd");
        if !legacy && !iommufd {
            return true;
        }
        match self {
            VfioMode::Both => true,
            VfioMode::Legacy => legacy,
            VfioMode::Iommufd => iommufd,
            VfioMode::Auto => {
                (legacy && host_mode == "legacy") || (iommufd && host_mode == "iommufd")
            }
        }
    }
}

fn yes() -> bool {
    true
}

fn default_names() -> Vec<NameStrategy> {
    vec![NameStrategy::Index, NameStrategy::All]
}

/// How CDI device names are made.
///
/// Written as a word (`index`), or as a one-key map for the strategies
/// that take a value (`{attr: serial}`). A device the strategy cannot
/// name (no such attribute, an invalid CDI name) gets no name from it,
/// with a warning; a name two devices would share is given to neither.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NameStrategy {
    /// `0`, `1`, ... in order of identity (PCI address order).
    Index,
    /// The identity: PCI address `0000:03:00.0`, or `platform:gpu`.
    Pci,
    /// PCI address and device ID as Intel's DRA driver and CDI generator
    /// name devices (`0000-03-00-0-0x56c0`), so their specs and ours name
    /// a device alike. Non-PCI devices get no name from it.
    PciUid,
    /// The first node's kernel name: `card1` (or `renderD128`, `accel0`);
    /// for a generic device grouped by parent (`group: parent`), the
    /// parent's (`card0`, `0000:04:00.0`).
    Node,
    /// One extra device named `all` with every selected device's edits.
    All,
    /// One device per IOMMU group, named by the group number (VFIO): the
    /// honest unit when a group holds several devices.
    Group,
    /// The device's UUID (`GPU-...`; `MIG-...` when known), as
    /// `nvidia-ctk --device-name-strategy=uuid` names them.
    Uuid,
    /// The value of one of the device's recorded attributes (`serial`:
    /// the USB serial number of a serial adapter).
    Attr(String),
    /// The file name of the symlink in this directory below `/dev` that
    /// names the device's node (`serial/by-path`: a stable port name);
    /// the first in sorted order when there are several.
    Link(String),
    /// A node below a USB device (a serial adapter's port) by that
    /// device's serial number, as udev's `/dev/serial/by-id` links name
    /// it: `A10K5PQR` when the device has one matched node; with several
    /// (a quad-port FT4232H, an LTE modem's AT, GNSS and diagnostic
    /// ports), each by serial and interface, `A10K5PQR-if02`, and
    /// `-port1` after it when an interface has several. A device without
    /// a serial number is named by where it is plugged instead,
    /// `pci-0000:0e:00.3-usb-1.2` (then `-if02`, `-port1` likewise).
    Usb,
    /// A handlebars template over the device, as `cdigen discover -o json`
    /// shows it (`"{{attrs.idVendor}}-{{attrs.serial}}"`), rendered strictly:
    /// a missing value leaves the device unnamed, with a warning.
    Template(String),
}

impl std::fmt::Display for NameStrategy {
    /// As written in a definition: `index`, `attr: serial`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NameStrategy::Attr(v) | NameStrategy::Link(v) | NameStrategy::Template(v) => {
                write!(f, "{}: {v:?}", self.as_str())
            }
            _ => write!(f, "{:?}", self.as_str()),
        }
    }
}

impl NameStrategy {
    /// The strategy's word as written in a definition (`index`, `attr`).
    pub fn as_str(&self) -> &'static str {
        match self {
            NameStrategy::Index => "index",
            NameStrategy::Pci => "pci",
            NameStrategy::PciUid => "pci-uid",
            NameStrategy::Node => "node",
            NameStrategy::All => "all",
            NameStrategy::Group => "group",
            NameStrategy::Uuid => "uuid",
            NameStrategy::Usb => "usb",
            NameStrategy::Attr(_) => "attr",
            NameStrategy::Link(_) => "link",
            NameStrategy::Template(_) => "template",
        }
    }
}

/// Longest name template accepted.
pub const MAX_NAME_TEMPLATE_LEN: usize = 512;

/// Checks a `template` name strategy: it must compile (strict handlebars,
/// over the device as `cdigen discover -o json` shows it).
///
/// Unescaped output (`{{{x}}}`) is allowed here: a name is rendered with no
/// escaping in any spelling, and what it gives must be a valid CDI device
/// name ([`crate::render::render_name`]), so a value can only make it
/// invalid.
///
/// # Errors
/// What is wrong, for the definition's error message.
pub fn check_name_template(template: &str) -> Result<(), String> {
    if template.trim().is_empty() {
        return Err("empty template".into());
    }
    if template.len() > MAX_NAME_TEMPLATE_LEN {
        return Err(format!(
            "template longer than {MAX_NAME_TEMPLATE_LEN} bytes"
        ));
    }
    handlebars::Template::compile(template)
        .map(|_| ())
        .map_err(|e| format!("{template:?} is not a valid template: {e}"))
}

/// Output file settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Output {
    /// File name without extension (default `<vendor>-<class>`, the
    /// reference library's convention).
    #[serde(default)]
    pub file: Option<String>,
    /// `json` or `yaml`.
    #[serde(default = "default_format")]
    pub format: Format,
}

fn default_format() -> Format {
    Format::Yaml
}

impl Default for Output {
    fn default() -> Self {
        Output {
            file: None,
            format: default_format(),
        }
    }
}

/// How device nodes are described.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSettings {
    /// Write `type`, `major` and `minor` (from sysfs). On: the container
    /// gets the node even when the host creates it lazily, and a runtime
    /// need not stat the host. Off: the runtime stats the host node at
    /// container start (always current, but the node must exist then).
    #[serde(default = "yes")]
    pub numbers: bool,
    /// Write `fileMode`, `uid` and `gid` from the host node when it exists.
    /// Off by default: the runtime then fills the mode from the host and
    /// makes the node usable by the container's user.
    #[serde(default)]
    pub owner: bool,
}

impl Default for NodeSettings {
    fn default() -> Self {
        NodeSettings {
            numbers: true,
            owner: false,
        }
    }
}

/// How `/dev` symlinks (like `/dev/dri/by-path/pci-...-card`) reach the
/// container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LinkMode {
    /// Bind-mount each link that exists on the host at the same path (the
    /// mount follows the link to the node); no hook binary needed.
    #[default]
    Mount,
    /// Leave links out.
    None,
}

/// A definition that cannot be used; every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Not readable.
    #[error("cannot read {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A definition file that is not a regular file, too large, or
    /// unreadable (the message names it).
    #[error(transparent)]
    File(#[from] crate::fsio::Error),
    /// Not valid YAML for a definition (the message has the line).
    #[error("{}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong, with line and column.
        message: String,
    },
    /// A bad value.
    #[error("{}: {field}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The field (`kind`, `select.vendor_ids[0]`).
        field: String,
        /// What is wrong and what was expected.
        message: String,
    },
    /// Two definitions would write one file: they would overwrite each
    /// other's on every run.
    #[error(transparent)]
    SharedOutput(Box<SharedOutput>),
    /// Two files define the same name in one directory.
    #[error("{}: generator {name:?} is also defined in {}", path.display(), other.display())]
    Duplicate {
        /// The file.
        path: PathBuf,
        /// The other file.
        other: PathBuf,
        /// The name.
        name: String,
    },
}

/// Two definitions that would write one file ([`check_shared_outputs`]).
#[derive(Debug, thiserror::Error)]
#[error(
    "generators {first:?} ({}) and {second:?} ({}) both write {what}: give one a different {fix}",
    first_source.display(),
    second_source.display()
)]
pub struct SharedOutput {
    /// The generator defined first (built-in ones before user ones).
    pub first: String,
    /// Its definition file.
    pub first_source: PathBuf,
    /// The other generator.
    pub second: String,
    /// Its definition file.
    pub second_source: PathBuf,
    /// The file or files both write.
    pub what: String,
    /// What to change (`kind or output.file`, `kind`).
    pub fix: &'static str,
}

/// A definition with the file it came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The definition.
    pub generator: Generator,
    /// Where it came from (`builtin:amd-gpu.yaml` or a real path).
    pub source: PathBuf,
}

/// Parses and checks one definition.
///
/// # Errors
/// [`Error`] naming `path`.
pub fn parse(path: &Path, text: &str) -> Result<Generator, Error> {
    let options = serde_saphyr::options! {
        duplicate_keys: serde_saphyr::options::DuplicateKeyPolicy::Error,
        with_snippet: false,
    };
    let g: Generator =
        serde_saphyr::from_str_with_options(text, options).map_err(|e| Error::Parse {
            path: path.to_path_buf(),
            // The user-facing wording: the default one has developer hints
            // ("set DuplicateKeyPolicy in Options").
            message: e.render_with_formatter(&serde_saphyr::UserMessageFormatter),
        })?;
    check(path, &g)?;
    Ok(g)
}

fn check(path: &Path, g: &Generator) -> Result<(), Error> {
    let invalid = |field: &str, message: String| Error::Invalid {
        path: path.to_path_buf(),
        field: field.to_string(),
        message,
    };
    if !is_plain_name(&g.name) {
        return Err(invalid(
            "name",
            format!(
                "{:?} must be 1-64 characters of a-z 0-9 - _ starting with a letter or digit",
                g.name
            ),
        ));
    }
    crate::discover::backend(&g.backend).map_err(|e| invalid("backend", e.to_string()))?;
    match (&g.source, g.backend == crate::discover::generic::NAME) {
        (None, true) => {
            return Err(invalid(
                "match",
                "required with backend generic: which class or bus to scan, like `match: {subsystem: tty, name: [\"ttyUSB*\"]}`".into(),
            ));
        }
        (Some(_), false) => {
            return Err(invalid(
                "match",
                format!(
                    "only for backend generic (backend {} has `select`)",
                    g.backend
                ),
            ));
        }
        (Some(m), true) => {
            m.compile()
                .map_err(|(field, message)| invalid(&format!("match.{field}"), message))?;
        }
        (None, false) => {}
    }
    for (i, j) in g.join.iter().enumerate() {
        j.source
            .compile()
            .map_err(|(field, message)| invalid(&format!("join[{i}].match.{field}"), message))?;
        if j.source.group.is_some() {
            return Err(invalid(
                &format!("join[{i}].match.group"),
                "only in a generator's own `match`: joined nodes are added to its devices one by one".into(),
            ));
        }
        if !select::NODE_ROLES.contains(&j.role.as_str()) {
            return Err(invalid(
                &format!("join[{i}].role"),
                format!(
                    "{:?} is not a node role (expected one of {})",
                    j.role,
                    select::NODE_ROLES.join(", ")
                ),
            ));
        }
    }
    Kind::parse(&g.kind).map_err(|e| invalid("kind", e.to_string()))?;
    if g.driver.is_some() && g.backend != "nvidia" {
        return Err(invalid(
            "driver",
            format!(
                "only for backend nvidia (backend {} has no driver files)",
                g.backend
            ),
        ));
    }
    if let Some(d) = &g.driver
        && d.capabilities.is_empty()
        && d.files != DriverFiles::None
    {
        return Err(invalid(
            "driver.capabilities",
            "must list at least one of compute, utility, video, graphics, display (or set `files: none`)".into(),
        ));
    }
    if !is_plain_name(&g.template) {
        return Err(invalid(
            "template",
            format!(
                "{:?} must be a template name like \"drm\" (templates/<name>.json.hbs)",
                g.template
            ),
        ));
    }
    if g.names.is_empty() {
        return Err(invalid(
            "names",
            "must list at least one name strategy (index, pci, pci-uid, node, group, uuid, usb, attr, link, template, all)".into(),
        ));
    }
    if g.names == [NameStrategy::All] {
        tracing::debug!("{}: only an `all` device", path.display());
    }
    let mut seen = Vec::new();
    for (i, n) in g.names.iter().enumerate() {
        if seen.contains(&n) {
            return Err(invalid(&format!("names[{i}]"), format!("{n} listed twice")));
        }
        seen.push(n);
        let field = format!("names[{i}].{}", n.as_str());
        match n {
            NameStrategy::Attr(a) => {
                crate::discover::generic::scan::check_attr_name(a)
                    .map_err(|m| invalid(&field, m))?;
            }
            NameStrategy::Link(dir) => {
                crate::discover::generic::scan::check_link_dir(dir)
                    .map_err(|m| invalid(&field, m))?;
            }
            NameStrategy::Template(t) => {
                check_name_template(t).map_err(|m| invalid(&field, m))?;
            }
            _ => {}
        }
    }
    if let Some(file) = &g.output.file {
        let plain = file
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        if !plain
            || file.is_empty()
            || file.len() > 200
            || file.starts_with('.')
            || file.ends_with(".json")
            || file.ends_with(".yaml")
        {
            return Err(invalid(
                "output.file",
                format!(
                    "{file:?} must be a plain file name without extension (A-Z a-z 0-9 . _ -, not starting with '.'); the extension comes from output.format"
                ),
            ));
        }
    }
    if let Some(v) = &g.cdi_version
        && Version::parse(v).is_none_or(|v| v < Version::EARLIEST)
    {
        return Err(invalid(
            "cdi_version",
            format!(
                "{v:?} is not a CDI version from {} to {}",
                Version::EARLIEST,
                Version::CURRENT
            ),
        ));
    }
    for (i, sd) in g.static_devices.iter().enumerate() {
        if let Err(e) = crate::devinfo::checked_file_name(&g.kind, &sd.id) {
            return Err(invalid(&format!("static_devices[{i}].id"), e.to_string()));
        }
        let problems = crate::devinfo::validate(&sd.device_info);
        if let Some(p) = problems.first() {
            return Err(invalid(
                &format!("static_devices[{i}].device_info.{}", p.location),
                p.message.clone(),
            ));
        }
    }
    if !(1..=MAX_REPLICAS).contains(&g.device_plugin.replicas) {
        return Err(invalid(
            "device_plugin.replicas",
            format!(
                "{} is not from 1 to {MAX_REPLICAS} (how many containers may hold each device at once)",
                g.device_plugin.replicas
            ),
        ));
    }
    if !g.static_devices.is_empty() && !g.device_info {
        return Err(invalid(
            "static_devices",
            "only written as device-info files: set device_info: true".into(),
        ));
    }
    select::check(&g.select)
        .map_err(|(field, message)| invalid(&format!("select.{field}"), message))
}

fn is_plain_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_'))
}

impl Generator {
    /// The output file name with extension, for `format`.
    pub fn file_name(&self, format: Format) -> String {
        format!("{}.{}", self.file_stem(), format.extension())
    }

    /// The output file name without extension: `output.file`, else
    /// `<vendor>-<class>` of the kind.
    pub fn file_stem(&self) -> String {
        match &self.output.file {
            Some(f) => f.clone(),
            None => Kind::parse(&self.kind)
                .map(|k| k.spec_file_stem())
                .unwrap_or_else(|_| self.name.clone()),
        }
    }
}

/// Largest generator definition file read.
pub const MAX_DEFINITION_BYTES: u64 = 1 << 20;

/// A user definition file that cannot be used, and the generators it
/// takes out of the run ([`load_each`]).
#[derive(Debug)]
pub struct Broken {
    /// The generator names it blocks: its file stem and, when the text
    /// still gives one, its `name:`. A built-in (or an earlier
    /// directory's definition) of one of these names is not run either:
    /// a broken override never falls back to what it overrides.
    pub names: Vec<String>,
    /// Why it cannot be used, naming the file (and the line).
    pub error: Error,
}

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.names.iter().map(|n| format!("{n:?}")).collect();
        let (what, their) = if names.len() == 1 {
            ("generator", "its")
        } else {
            ("generators", "their")
        };
        write!(
            f,
            "{what} {} not run ({their} files are left as they are): {}",
            names.join(", "),
            self.error
        )
    }
}

/// What [`load_each`] found: the definitions to use, and the broken ones.
#[derive(Debug, Default)]
pub struct Definitions {
    /// The usable definitions, by name; none of a broken file's names.
    pub loaded: Vec<Loaded>,
    /// The user definition files that cannot be used, in reading order.
    pub broken: Vec<Broken>,
}

impl Definitions {
    /// All or nothing: the definitions, or the first broken file's error.
    ///
    /// # Errors
    /// The first broken definition.
    pub fn strict(self) -> Result<Vec<Loaded>, Error> {
        match self.broken.into_iter().next() {
            Some(b) => Err(b.error),
            None => Ok(self.loaded),
        }
    }
}

/// Loads the shipped definitions, then each user directory in order (a
/// later definition of the same name replaces an earlier one), all or
/// nothing ([`load_each`], then [`Definitions::strict`]).
///
/// # Errors
/// The first [`Error`] met.
pub fn load(user_dirs: &[PathBuf]) -> Result<Vec<Loaded>, Error> {
    load_each(user_dirs)?.strict()
}

/// The names a user definition file that does not load would have
/// defined, best effort: its file stem (`nvidia.yaml` overrides
/// `nvidia` by the documented convention of copying the built-in), and its
/// `name:`, read leniently from text that is YAML (any other field may be
/// wrong) or, failing that, from a top-level `name:` line.
fn broken_names(path: &Path, text: Option<&str>) -> Vec<String> {
    #[derive(Deserialize)]
    struct NameOnly {
        name: String,
    }
    let mut names = Vec::new();
    if let Some(stem) = path.file_stem().and_then(|s| s.to_str()) {
        names.push(stem.to_string());
    }
    let named = text.and_then(|t| {
        serde_saphyr::from_str::<NameOnly>(t)
            .ok()
            .map(|n| n.name)
            .or_else(|| {
                t.lines().find_map(|l| {
                    let v = l.strip_prefix("name:")?.split('#').next()?.trim();
                    let v = v.trim_matches(|c| c == '"' || c == '\'');
                    (!v.is_empty()).then(|| v.to_string())
                })
            })
    });
    let plausible = |n: &str| {
        n.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    if let Some(n) = named
        && plausible(&n)
        && !names.contains(&n)
    {
        names.push(n);
    }
    names
}

/// Loads the shipped definitions, then each user directory in order (a
/// later definition of the same name replaces an earlier one). Missing
/// user directories are skipped. A user file that cannot be read or
/// parsed is [`Broken`]: it takes the generators it would define out of
/// the run (built-ins of its names included) and the others go on, so
/// that a typo in one file never stops the others nor silently drops or
/// replaces a spec.
///
/// # Errors
/// What involves more than one file, or none: a user directory that cannot
/// be listed, two files of one directory defining one name, two
/// definitions writing one file.
pub fn load_each(user_dirs: &[PathBuf]) -> Result<Definitions, Error> {
    let mut by_name: BTreeMap<String, Loaded> = BTreeMap::new();
    let mut broken: Vec<Broken> = Vec::new();
    for (file, text) in BUILTIN {
        let source = PathBuf::from(format!("builtin:generators/{file}"));
        let g = parse(&source, text)?;
        by_name.insert(
            g.name.clone(),
            Loaded {
                generator: g,
                source,
            },
        );
    }
    for dir in user_dirs {
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => {
                return Err(Error::Read {
                    path: dir.clone(),
                    source,
                });
            }
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
            .collect();
        files.sort();
        let mut here: BTreeMap<String, PathBuf> = BTreeMap::new();
        let earlier = broken.len();
        for path in files {
            // An administrator may link a definition in; the link is
            // followed only to a regular file, read bounded.
            let g = match crate::fsio::read_to_string(&path, MAX_DEFINITION_BYTES, Links::Follow) {
                Ok(text) => parse(&path, &text).map_err(|e| (e, Some(text))),
                Err(e) => Err((e.into(), None)),
            };
            let g = match g {
                Ok(g) => g,
                Err((error, text)) => {
                    let names = broken_names(&path, text.as_deref());
                    for n in &names {
                        by_name.remove(n);
                    }
                    broken.push(Broken { names, error });
                    continue;
                }
            };
            if let Some(other) = here.insert(g.name.clone(), path.clone()) {
                return Err(Error::Duplicate {
                    path,
                    other,
                    name: g.name,
                });
            }
            // A good definition of a name an earlier directory's broken
            // file blocked replaces it, as it would that file; one of its
            // own directory stays blocked (the two would be duplicates).
            for b in broken.iter_mut().take(earlier) {
                b.names.retain(|n| *n != g.name);
            }
            by_name.insert(
                g.name.clone(),
                Loaded {
                    generator: g,
                    source: path,
                },
            );
        }
    }
    let blocked: Vec<&String> = broken.iter().flat_map(|b| &b.names).collect();
    let loaded: Vec<Loaded> = by_name
        .into_values()
        .filter(|l| !blocked.contains(&&l.generator.name))
        .collect();
    check_shared_outputs(&loaded)?;
    Ok(Definitions { loaded, broken })
}

/// Refuses two definitions that write one file: the same spec file (the
/// same kind without `output.file`, or the same `output.file`; the format
/// does not count, as `--format` can make it the same), or, when both write
/// device-info files, the same kind (device-info files are named by kind
/// and device). Every definition counts, enabled or not: a disabled one
/// still runs with `--generator` (and in `plugin`), and would take the file
/// over from the other one, which takes it back on its next run.
///
/// # Errors
/// [`Error::SharedOutput`] for the first such pair, built-in definitions
/// named first.
pub fn check_shared_outputs(all: &[Loaded]) -> Result<(), Error> {
    let mut ordered: Vec<&Loaded> = all.iter().collect();
    ordered.sort_by_key(|l| !l.source.to_string_lossy().starts_with("builtin:"));
    for (i, a) in ordered.iter().enumerate() {
        for b in ordered.iter().skip(i + 1) {
            let (ga, gb) = (&a.generator, &b.generator);
            let shared = if ga.file_stem() == gb.file_stem() {
                let (fa, fb) = (
                    ga.file_name(ga.output.format),
                    gb.file_name(gb.output.format),
                );
                Some((
                    if fa == fb {
                        fa
                    } else {
                        format!("{fa} and {fb} (one file with --format)")
                    },
                    "kind or output.file",
                ))
            } else if ga.device_info
                && gb.device_info
                && ga.kind.replace('/', "-") == gb.kind.replace('/', "-")
            {
                Some((
                    format!(
                        "the device-info files {}",
                        crate::devinfo::file_name(&ga.kind, "*")
                    ),
                    "kind",
                ))
            } else {
                None
            };
            if let Some((what, fix)) = shared {
                return Err(Error::SharedOutput(Box::new(SharedOutput {
                    first: ga.name.clone(),
                    first_source: a.source.clone(),
                    second: gb.name.clone(),
                    second_source: b.source.clone(),
                    what,
                    fix,
                })));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;

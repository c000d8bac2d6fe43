//! What a container gets when a runtime injects CDI devices: the OCI edits
//! the reference library (Go, v1.1.0, `Cache.InjectDevices` and
//! `ContainerEdits.Apply`) makes, in its order and with its conflicts, and
//! what is worth knowing about them (`cdigen inject`).
//!
//! The library's semantics, as its source reads:
//!
//! - Devices are looked up by their exact `vendor/class=name` string in
//!   the resolved view of the spec directories ([`super::dirs::scan`]); an
//!   unknown name fails the whole injection (`unresolvable CDI devices a,
//!   b`) and nothing is applied.
//! - For each requested device, in order: its spec's own edits the first
//!   time a device of that spec (that file) is requested, then the
//!   device's edits. The edits are concatenated field by field and applied
//!   once, field by field: env, device nodes, net devices, mounts, hooks,
//!   intelRdt, additional GIDs.
//! - Env: an entry replaces, in place, an entry of the same name added
//!   before it, else it is appended. (Entries the container had before are
//!   keyed by their whole `NAME=value` text, a quirk of runtime-tools: a
//!   CDI variable does not replace the image's, it is appended after it.
//!   The fragment here is what injection into an empty spec adds.)
//! - Device nodes: type, numbers and mode missing from the spec are taken
//!   from the host node (`lstat` of `hostPath`, else `path`; here under
//!   the root); a node whose spec gives a type and a major (or type `p`)
//!   needs no host node. An earlier node with the same path is removed,
//!   the new one appended, and for types `b` and `c` a cgroup rule is
//!   appended (`allow`, permissions default `rwm`); earlier rules stay.
//! - Mounts: an earlier mount with the same destination is removed, the
//!   new one appended; then all mounts are sorted, stably, by the number
//!   of `/` in the cleaned destination.
//! - Hooks are appended per hook name; net devices are keyed by host
//!   interface (later wins); the last intelRdt wins; additional GIDs are
//!   appended once each, 0 skipped.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::dirs::{Input, Scan, Severity};
use super::name::QualifiedName;
use super::spec::{ContainerEdits, DeviceNode, Mount};

/// The OCI edits injection adds to an empty container spec, as the OCI
/// runtime spec (v1.3.0) writes them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Oci {
    /// `process.env`, in order.
    pub env: Vec<String>,
    /// `linux.devices`, in order.
    pub devices: Vec<OciDevice>,
    /// `linux.resources.devices`: the cgroup device rules, in order.
    pub cgroup_devices: Vec<CgroupRule>,
    /// `mounts`, in order (sorted as the library sorts them).
    pub mounts: Vec<OciMount>,
    /// `hooks`.
    pub hooks: Hooks,
    /// `process.user.additionalGids`.
    pub additional_gids: Vec<u32>,
    /// `linux.intelRdt`.
    pub intel_rdt: Option<OciIntelRdt>,
    /// `linux.netDevices`: host interface name to the name in the container.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub net_devices: BTreeMap<String, OciNetDevice>,
}

/// An OCI `linux.devices` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OciDevice {
    /// Path in the container.
    pub path: String,
    /// `c`, `b`, `u` or `p`.
    #[serde(rename = "type")]
    pub node_type: String,
    /// Major number.
    pub major: i64,
    /// Minor number.
    pub minor: i64,
    /// Permission bits (decimal in JSON).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_mode: Option<u32>,
    /// Owner.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    /// Group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gid: Option<u32>,
}

/// An OCI `linux.resources.devices` rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CgroupRule {
    /// Always true for injected devices.
    pub allow: bool,
    /// `c` or `b`.
    #[serde(rename = "type")]
    pub node_type: String,
    /// Major number.
    pub major: i64,
    /// Minor number.
    pub minor: i64,
    /// Any of `r`, `w`, `m`.
    pub access: String,
}

/// An OCI mount.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OciMount {
    /// Path in the container.
    pub destination: String,
    /// Filesystem type.
    #[serde(rename = "type", skip_serializing_if = "String::is_empty")]
    pub mount_type: String,
    /// Source on the host.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub source: String,
    /// Mount options.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
}

/// An OCI hook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OciHook {
    /// Executable.
    pub path: String,
    /// argv.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Environment.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// Seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<i64>,
}

/// The OCI hooks, by when they run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Hooks {
    /// `prestart` (deprecated by OCI, still run).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub prestart: Vec<OciHook>,
    /// `createRuntime`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub create_runtime: Vec<OciHook>,
    /// `createContainer`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub create_container: Vec<OciHook>,
    /// `startContainer`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub start_container: Vec<OciHook>,
    /// `poststart`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub poststart: Vec<OciHook>,
    /// `poststop`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub poststop: Vec<OciHook>,
}

impl Hooks {
    /// Every hook with its name, in the order OCI lists the names.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &OciHook)> {
        [
            ("prestart", &self.prestart),
            ("createRuntime", &self.create_runtime),
            ("createContainer", &self.create_container),
            ("startContainer", &self.start_container),
            ("poststart", &self.poststart),
            ("poststop", &self.poststop),
        ]
        .into_iter()
        .flat_map(|(name, hooks)| hooks.iter().map(move |h| (name, h)))
    }

    fn list(&mut self, name: &str) -> Option<&mut Vec<OciHook>> {
        Some(match name {
            "prestart" => &mut self.prestart,
            "createRuntime" => &mut self.create_runtime,
            "createContainer" => &mut self.create_container,
            "startContainer" => &mut self.start_container,
            "poststart" => &mut self.poststart,
            "poststop" => &mut self.poststop,
            _ => return None,
        })
    }
}

/// OCI `linux.intelRdt`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OciIntelRdt {
    /// Class of service.
    #[serde(rename = "closID", skip_serializing_if = "String::is_empty")]
    pub clos_id: String,
    /// Raw schemata lines.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub schemata: Vec<String>,
    /// L3 cache schema.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub l3_cache_schema: String,
    /// Memory bandwidth schema.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub mem_bw_schema: String,
    /// Monitoring.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub enable_monitoring: bool,
}

/// OCI `linux.netDevices` value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OciNetDevice {
    /// Name in the container.
    pub name: String,
}

/// Where an edit comes from: a requested device, or its spec's own edits
/// (applied with the first device of that spec).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Origin {
    /// The requested device (`vendor/class=name`).
    pub device: String,
    /// True for the spec-level edits that came with this device.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub spec_level: bool,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let device = crate::text::Escaped(&self.device);
        if self.spec_level {
            write!(f, "the spec of {device}")
        } else {
            write!(f, "{device}")
        }
    }
}

/// One set of edits with where it comes from, in the order it is applied.
#[derive(Debug, Clone, Copy)]
pub struct Edits<'a> {
    /// The device (or its spec) it comes from.
    pub origin: &'a Origin,
    /// The edits.
    pub edits: &'a ContainerEdits,
}

/// What a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FindingKind {
    /// A requested device does not resolve: nothing is injected.
    Unresolved,
    /// The library refuses to apply the edits: nothing is injected.
    InjectionFailed,
    /// The device is also defined in an earlier spec directory, whose
    /// definition is not used.
    ShadowedDefinition,
    /// Two edits set one variable to different values: the later wins.
    EnvCollision,
    /// Two edits give one container node path: the later replaces the
    /// earlier (whose cgroup rule stays).
    ShadowedNode,
    /// Two edits give one mount destination: the later replaces the earlier.
    ShadowedMount,
    /// Two edits move one host interface: the later name wins.
    ShadowedNetDevice,
    /// Two edits set intelRdt: the later wins.
    ShadowedIntelRdt,
    /// A device node's host path or a mount's source does not exist on
    /// the host.
    MissingHostPath,
    /// A device node's host path is not the node the spec describes (not
    /// a device node, or another type or numbers).
    HostNodeMismatch,
    /// A hook the container gets would let it run code as root on the
    /// host: no `env`, or a program others could change
    /// ([`super::hook_check`]). A warning: runtimes run it anyway.
    UnsafeHook,
}

impl FindingKind {
    /// The name used in output (`env-collision`).
    pub fn name(self) -> &'static str {
        match self {
            FindingKind::Unresolved => "unresolved",
            FindingKind::InjectionFailed => "injection-failed",
            FindingKind::ShadowedDefinition => "shadowed-definition",
            FindingKind::EnvCollision => "env-collision",
            FindingKind::ShadowedNode => "shadowed-node",
            FindingKind::ShadowedMount => "shadowed-mount",
            FindingKind::ShadowedNetDevice => "shadowed-net-device",
            FindingKind::ShadowedIntelRdt => "shadowed-intel-rdt",
            FindingKind::MissingHostPath => "missing-host-path",
            FindingKind::HostNodeMismatch => "host-node-mismatch",
            FindingKind::UnsafeHook => "unsafe-hook",
        }
    }
}

/// Something worth knowing about an injection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// What it is about.
    pub kind: FindingKind,
    /// Errors mean nothing is injected; warnings do not stop it.
    pub severity: Severity,
    /// The variable, path, interface or device name concerned.
    pub subject: String,
    /// The devices (or their specs) involved, in the order applied; for
    /// an env collision each with the value it sets.
    pub sources: Vec<Source>,
    /// The files involved (definitions of a device), in scan order.
    #[serde(skip_serializing_if = "Vec::is_empty", serialize_with = "lossy_paths")]
    pub files: Vec<PathBuf>,
    /// What happens, in a sentence.
    pub message: String,
}

/// Paths as strings, lossily (see [`crate::text::lossy_path`]).
fn lossy_paths<S: serde::Serializer>(paths: &[PathBuf], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(paths.iter().map(|p| p.to_string_lossy()))
}

/// A device (or its spec) involved in a finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Source {
    /// Which device, or its spec.
    #[serde(flatten)]
    pub origin: Origin,
    /// The value it sets (env collisions).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

impl Source {
    fn of(origin: &Origin) -> Self {
        Source {
            origin: origin.clone(),
            value: None,
        }
    }
}

/// A host node as `lstat` sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostEntry {
    /// A device node or FIFO.
    Node {
        /// `c`, `b` or `p`.
        node_type: &'static str,
        /// Major number.
        major: i64,
        /// Minor number.
        minor: i64,
        /// Permission bits (`st_mode & 0o7777`).
        mode: u32,
    },
    /// Something else: what it is (`a symbolic link`, `a directory`, ...).
    Other(&'static str),
}

/// The host that injection looks at (the runtime's host): the library
/// `lstat`s device nodes; cdigen also checks that mount sources exist.
pub trait Host {
    /// `lstat` of a host path: `None` when it does not exist.
    ///
    /// # Errors
    /// Why it could not be examined (the reason only, not the path).
    fn lstat(&self, path: &str) -> Result<Option<HostEntry>, String>;
    /// Whether a host path exists.
    fn exists(&self, path: &str) -> bool;
    /// Whether a host path is a program a hook may name
    /// ([`crate::trust::program`]; only looked at, never run).
    ///
    /// # Errors
    /// Why not, naming the host path at fault.
    fn program(
        &self,
        path: &std::path::Path,
    ) -> Result<std::path::PathBuf, crate::trust::Untrusted> {
        crate::trust::program(path)
    }
}

impl Host for crate::root::HostRoot {
    fn lstat(&self, path: &str) -> Result<Option<HostEntry>, String> {
        use crate::root::DevKind;
        let entry = self.dev_entry(Path::new(path)).map_err(|e| e.reason())?;
        Ok(entry.map(|e| match e.kind {
            DevKind::Char | DevKind::Block => HostEntry::Node {
                node_type: if e.kind == DevKind::Char { "c" } else { "b" },
                major: i64::from(e.major),
                minor: i64::from(e.minor),
                mode: e.mode,
            },
            DevKind::Symlink => HostEntry::Other("a symbolic link"),
            DevKind::Dir => HostEntry::Other("a directory"),
            DevKind::Other => HostEntry::Other("not a device node"),
        }))
    }

    fn exists(&self, path: &str) -> bool {
        let p = Path::new(path);
        // A `/dev` entry of a fixture's manifest exists only there.
        crate::root::HostRoot::exists(self, p) || matches!(self.dev_entry(p), Ok(Some(_)))
    }

    fn program(&self, path: &Path) -> Result<std::path::PathBuf, crate::trust::Untrusted> {
        crate::root::HostRoot::program(self, path)
    }
}

/// The result of applying edits.
#[derive(Debug, Clone, Default)]
pub struct Applied {
    /// What the container gets; `None` when the library refuses.
    pub oci: Option<Oci>,
    /// The library's error, when it refuses.
    pub error: Option<String>,
    /// Warnings (and the refusal, as an error).
    pub findings: Vec<Finding>,
}

/// What injecting some devices gives: the document `cdigen inject -o json`
/// prints.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Injection {
    /// The devices requested, in order.
    pub devices: Vec<String>,
    /// Whether the runtime would inject them (no error finding).
    pub injected: bool,
    /// What the container gets (`null` when not injected).
    pub oci: Option<Oci>,
    /// The library's error when it refuses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Everything worth knowing, in the order found.
    pub findings: Vec<Finding>,
}

/// Injects `devices` (exact `vendor/class=name` strings, in order) as a
/// runtime would with the spec directories `scan` saw (`inputs` are what
/// was scanned, for messages), looking at `host` for device nodes.
pub fn inject(scan: &Scan, inputs: &[Input], devices: &[String], host: &dyn Host) -> Injection {
    let mut findings = Vec::new();
    let resolved: HashMap<&str, &super::dirs::ResolvedDevice> =
        scan.devices.iter().map(|d| (d.name.as_str(), d)).collect();
    // Origins first (the edits borrow them).
    let mut origins: Vec<(Origin, Origin)> = Vec::new();
    let mut picked: Vec<(usize, &ContainerEdits)> = Vec::new();
    let mut unresolved: Vec<&str> = Vec::new();
    for name in devices {
        let found = resolved.get(name.as_str()).and_then(|r| {
            let spec = scan.files.get(r.file)?.spec.as_ref()?;
            let device_name = name.split_once('=').map(|(_, n)| n)?;
            let device = spec.devices.iter().find(|d| d.name == device_name)?;
            Some((r, &device.container_edits))
        });
        match found {
            Some((r, edits)) => {
                shadowed_definitions(scan, name, r, &mut findings);
                origins.push((
                    Origin {
                        device: name.clone(),
                        spec_level: true,
                    },
                    Origin {
                        device: name.clone(),
                        spec_level: false,
                    },
                ));
                picked.push((r.file, edits));
            }
            None => {
                unresolved.push(name);
                findings.push(Finding {
                    kind: FindingKind::Unresolved,
                    severity: Severity::Error,
                    subject: name.clone(),
                    sources: Vec::new(),
                    files: unresolved_files(scan, name),
                    message: why_unresolved(scan, inputs, name),
                });
            }
        }
    }
    if !unresolved.is_empty() {
        return Injection {
            devices: devices.to_vec(),
            injected: false,
            oci: None,
            error: Some(format!(
                "unresolvable CDI devices {}",
                unresolved.join(", ")
            )),
            findings,
        };
    }
    let mut edits: Vec<Edits<'_>> = Vec::new();
    let mut seen_specs: Vec<usize> = Vec::new();
    for ((spec_origin, device_origin), (file, device_edits)) in origins.iter().zip(&picked) {
        if !seen_specs.contains(file) {
            seen_specs.push(*file);
            if let Some(spec) = scan.files.get(*file).and_then(|f| f.spec.as_ref()) {
                edits.push(Edits {
                    origin: spec_origin,
                    edits: &spec.container_edits,
                });
            }
        }
        edits.push(Edits {
            origin: device_origin,
            edits: device_edits,
        });
    }
    let applied = apply(&edits, host);
    findings.extend(applied.findings);
    for ((spec_origin, device_origin), (file, _)) in origins.iter().zip(&picked) {
        unsafe_hooks(scan, *file, spec_origin, device_origin, host, &mut findings);
    }
    Injection {
        devices: devices.to_vec(),
        injected: applied.oci.is_some(),
        oci: applied.oci,
        error: applied.error,
        findings,
    }
}

/// A warning for each hook the device `device_origin` gets from the spec
/// file `file` that [`super::hook_check`] finds at fault: its own, and the
/// spec's (once, with the first device of that spec).
fn unsafe_hooks(
    scan: &Scan,
    file: usize,
    spec_origin: &Origin,
    device_origin: &Origin,
    host: &dyn Host,
    findings: &mut Vec<Finding>,
) {
    let Some(report) = scan.files.get(file) else {
        return;
    };
    let Some(spec) = &report.spec else { return };
    let device_name = device_origin.device.split_once('=').map_or("", |(_, n)| n);
    for h in super::hook_check::inspect(spec, &|p| host.program(p)) {
        let origin = match &h.device {
            None => spec_origin,
            Some(d) if d == device_name => device_origin,
            Some(_) => continue,
        };
        let kind = if h.missing {
            FindingKind::MissingHostPath
        } else {
            FindingKind::UnsafeHook
        };
        let finding = Finding {
            kind,
            severity: Severity::Warning,
            subject: h.path,
            sources: vec![Source::of(origin)],
            files: vec![report.path.clone()],
            // The spec file named in the text too: the hook is its.
            message: format!(
                "{}: {}: {}",
                crate::text::path(&report.path),
                h.location,
                h.message
            ),
        };
        // The spec's own hooks come with every device of it, and a device
        // may be asked for twice: once each.
        let seen = findings.iter().any(|f| {
            f.kind == finding.kind && f.message == finding.message && f.files == finding.files
        });
        if !seen {
            findings.push(finding);
        }
    }
}

/// A warning for each earlier spec directory that also defines `name`
/// (its definition is not used).
fn shadowed_definitions(
    scan: &Scan,
    name: &str,
    winner: &super::dirs::ResolvedDevice,
    findings: &mut Vec<Finding>,
) {
    let Some(won) = scan.files.get(winner.file) else {
        return;
    };
    for f in scan
        .files
        .iter()
        .filter(|f| f.loaded && f.input < won.input && defines(f, name))
    {
        findings.push(Finding {
            kind: FindingKind::ShadowedDefinition,
            severity: Severity::Warning,
            subject: name.to_string(),
            sources: Vec::new(),
            files: vec![f.path.clone(), won.path.clone()],
            message: format!(
                "defined in {}, shadowed by {} (a later spec directory wins): that definition \
                 is used",
                crate::text::path(&f.path),
                crate::text::path(&won.path)
            ),
        });
    }
}

/// Whether a file defines the device `name` (`vendor/class=name`).
fn defines(f: &super::dirs::FileReport, name: &str) -> bool {
    let Some(kind) = &f.kind else {
        return false;
    };
    name.split_once('=')
        .is_some_and(|(k, n)| k == kind && f.devices.iter().any(|d| d == n))
}

/// The files that define an unresolved device, in scan order.
fn unresolved_files(scan: &Scan, name: &str) -> Vec<PathBuf> {
    scan.files
        .iter()
        .filter(|f| defines(f, name))
        .map(|f| f.path.clone())
        .collect()
}

/// Why a runtime does not resolve `name`.
fn why_unresolved(scan: &Scan, inputs: &[Input], name: &str) -> String {
    if let Err(e) = QualifiedName::parse(name) {
        return format!("not a CDI device name (vendor/class=name): {e}");
    }
    let loaded: Vec<&super::dirs::FileReport> = scan
        .files
        .iter()
        .filter(|f| f.loaded && defines(f, name))
        .collect();
    // Two files of one directory: runtimes drop every definition.
    for (i, f) in loaded.iter().enumerate() {
        let same: Vec<&&super::dirs::FileReport> = loaded
            .iter()
            .skip(i)
            .filter(|g| g.input == f.input)
            .collect();
        if same.len() > 1 {
            let files: Vec<String> = same
                .iter()
                .map(|g| crate::text::path(&g.path).to_string())
                .collect();
            let dir = inputs
                .get(f.input)
                .map(|d| crate::text::path(&d.path).to_string())
                .unwrap_or_default();
            let elsewhere = loaded.iter().filter(|g| g.input != f.input).count();
            let also = if elsewhere > 0 {
                " (the definition in another directory included)"
            } else {
                ""
            };
            return format!(
                "defined in {} files of {dir} ({}): runtimes drop every definition of a \
                 conflicting device{also}",
                same.len(),
                files.join(", ")
            );
        }
    }
    let unloaded: Vec<&super::dirs::FileReport> = scan
        .files
        .iter()
        .filter(|f| !f.loaded && defines(f, name))
        .collect();
    if let Some(f) = unloaded.first() {
        let why = f
            .findings
            .iter()
            .find(|x| x.severity == Severity::Error)
            .map(|x| {
                if x.location.is_empty() {
                    x.message.clone()
                } else {
                    format!("{}: {}", x.location, x.message)
                }
            })
            .unwrap_or_default();
        return format!(
            "defined only in {}, which runtimes do not load: {why}",
            crate::text::path(&f.path)
        );
    }
    let dirs: Vec<String> = inputs
        .iter()
        .map(|i| crate::text::path(&i.path).to_string())
        .collect();
    format!("no such device in {}", dirs.join(", "))
}

/// Applies edits in order as the library does, into an empty OCI spec,
/// looking at `host` for device nodes and mount sources.
pub fn apply(edits: &[Edits<'_>], host: &dyn Host) -> Applied {
    let mut findings = Vec::new();
    let mut oci = Oci {
        env: apply_env(edits, &mut findings),
        ..Oci::default()
    };
    if let Err(error) = apply_nodes(edits, host, &mut oci, &mut findings) {
        let error = format!("failed to inject devices: {error}");
        findings.push(Finding {
            kind: FindingKind::InjectionFailed,
            severity: Severity::Error,
            subject: String::new(),
            sources: Vec::new(),
            files: Vec::new(),
            message: error.clone(),
        });
        return Applied {
            oci: None,
            error: Some(error),
            findings,
        };
    }
    apply_net_devices(edits, &mut oci, &mut findings);
    apply_mounts(edits, host, &mut oci, &mut findings);
    for e in edits {
        for h in &e.edits.hooks {
            let hook = OciHook {
                path: h.path.clone(),
                args: h.args.clone(),
                env: h.env.clone(),
                timeout: h.timeout,
            };
            let Some(list) = oci.hooks.list(&h.hook_name) else {
                let error = format!(
                    "failed to inject devices: unknown hook name {}",
                    go_quote(&h.hook_name)
                );
                findings.push(Finding {
                    kind: FindingKind::InjectionFailed,
                    severity: Severity::Error,
                    subject: h.hook_name.clone(),
                    sources: vec![Source::of(e.origin)],
                    files: Vec::new(),
                    message: error.clone(),
                });
                return Applied {
                    oci: None,
                    error: Some(error),
                    findings,
                };
            };
            list.push(hook);
        }
    }
    apply_intel_rdt(edits, &mut oci, &mut findings);
    for e in edits {
        for &gid in &e.edits.additional_gids {
            if gid != 0 && !oci.additional_gids.contains(&gid) {
                oci.additional_gids.push(gid);
            }
        }
    }
    Applied {
        oci: Some(oci),
        error: None,
        findings,
    }
}

/// `AddMultipleProcessEnv` over an empty environment: replace in place by
/// name, else append. One finding per variable set to different values.
fn apply_env(edits: &[Edits<'_>], findings: &mut Vec<Finding>) -> Vec<String> {
    let mut env: Vec<String> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    // Per variable, in order of first setting: who set what.
    let mut history: Vec<(&str, Vec<(&Origin, &str)>)> = Vec::new();
    for e in edits {
        for entry in &e.edits.env {
            let (key, value) = entry.split_once('=').unwrap_or((entry, ""));
            match index.get(key) {
                Some(&i) => {
                    if let Some(slot) = env.get_mut(i) {
                        slot.clone_from(entry);
                    }
                }
                None => {
                    index.insert(key, env.len());
                    env.push(entry.clone());
                }
            }
            match history.iter_mut().find(|(k, _)| *k == key) {
                Some((_, sets)) => sets.push((e.origin, value)),
                None => history.push((key, vec![(e.origin, value)])),
            }
        }
    }
    for (key, sets) in history {
        let Some(&(last_origin, last)) = sets.last() else {
            continue;
        };
        if sets.iter().all(|(_, v)| *v == last) {
            continue;
        }
        let q = |s: &str| crate::text::quoted(s, 80);
        let who: Vec<String> = sets
            .iter()
            .map(|(o, v)| format!("to {} by {o}", q(v)))
            .collect();
        findings.push(Finding {
            kind: FindingKind::EnvCollision,
            severity: Severity::Warning,
            subject: key.to_string(),
            sources: sets
                .iter()
                .map(|(o, v)| Source {
                    origin: (*o).clone(),
                    value: Some((*v).to_string()),
                })
                .collect(),
            files: Vec::new(),
            message: format!(
                "set {}: the container sees {} (from {last_origin}, the later wins)",
                who.join(", "),
                q(last)
            ),
        });
    }
    env
}

/// `type major:minor` of a node, for messages.
fn numbers(node_type: &str, major: i64, minor: i64) -> String {
    if node_type == "p" {
        "p".to_string()
    } else {
        format!("{node_type} {major}:{minor}")
    }
}

/// Device nodes: fill from the host, replace by path, add cgroup rules.
fn apply_nodes(
    edits: &[Edits<'_>],
    host: &dyn Host,
    oci: &mut Oci,
    findings: &mut Vec<Finding>,
) -> Result<(), String> {
    // The origin of each entry of `oci.devices`.
    let mut from: Vec<&Origin> = Vec::new();
    for e in edits {
        for node in &e.edits.device_nodes {
            let dev = fill(node, host, e.origin, findings)?;
            if let Some(i) = oci.devices.iter().position(|d| d.path == dev.path) {
                let old = oci.devices.remove(i);
                let old_from = if i < from.len() {
                    Some(from.remove(i))
                } else {
                    None
                };
                if old != dev {
                    let mut sources: Vec<Source> = old_from.into_iter().map(Source::of).collect();
                    sources.push(Source::of(e.origin));
                    let earlier = old_from.map(|o| format!(" from {o}")).unwrap_or_default();
                    findings.push(Finding {
                        kind: FindingKind::ShadowedNode,
                        severity: Severity::Warning,
                        subject: dev.path.clone(),
                        sources,
                        files: Vec::new(),
                        message: format!(
                            "{}{earlier} is replaced by {} from {} (the later wins; the \
                             earlier's cgroup rule stays)",
                            describe_device(&old),
                            describe_device(&dev),
                            e.origin
                        ),
                    });
                }
            }
            if dev.node_type == "b" || dev.node_type == "c" {
                oci.cgroup_devices.push(CgroupRule {
                    allow: true,
                    node_type: dev.node_type.clone(),
                    major: dev.major,
                    minor: dev.minor,
                    access: if node.permissions.is_empty() {
                        "rwm".to_string()
                    } else {
                        node.permissions.clone()
                    },
                });
            }
            oci.devices.push(dev);
            from.push(e.origin);
        }
    }
    Ok(())
}

/// `c 226:1, mode 0666` for messages.
fn describe_device(d: &OciDevice) -> String {
    let mut s = numbers(&d.node_type, d.major, d.minor);
    if let Some(m) = d.file_mode {
        s.push_str(&format!(" mode {m:04o}"));
    }
    if let Some(u) = d.uid {
        s.push_str(&format!(" uid {u}"));
    }
    if let Some(g) = d.gid {
        s.push_str(&format!(" gid {g}"));
    }
    s
}

/// The library's `fillMissingInfo` and `toOCI` for one node, with findings
/// about the host node.
fn fill(
    node: &DeviceNode,
    host: &dyn Host,
    origin: &Origin,
    findings: &mut Vec<Finding>,
) -> Result<OciDevice, String> {
    let minimal = !node.node_type.is_empty() && (node.major != 0 || node.node_type == "p");
    let host_path = if node.host_path.is_empty() {
        &node.path
    } else {
        &node.host_path
    };
    let mut dev = OciDevice {
        path: node.path.clone(),
        node_type: node.node_type.clone(),
        major: node.major,
        minor: node.minor,
        file_mode: node.file_mode,
        uid: node.uid,
        gid: node.gid,
    };
    let finding = |kind, message: String| Finding {
        kind,
        severity: Severity::Warning,
        subject: host_path.clone(),
        sources: vec![Source::of(origin)],
        files: Vec::new(),
        message,
    };
    let entry = match host.lstat(host_path) {
        Ok(Some(HostEntry::Node {
            node_type,
            major,
            minor,
            mode,
        })) => (node_type, major, minor, mode),
        Ok(None) if minimal => {
            findings.push(finding(
                FindingKind::MissingHostPath,
                format!(
                    "device node of {origin} is not on the host: the runtime creates {} from \
                     the spec's numbers ({})",
                    crate::text::Escaped(&node.path),
                    numbers(&dev.node_type, dev.major, dev.minor)
                ),
            ));
            return Ok(dev);
        }
        Ok(None) => {
            // `unix.Lstat` gives a bare errno: no path in its text.
            return Err(format!(
                "failed to stat CDI host device {}: no such file or directory",
                go_quote(host_path)
            ));
        }
        Ok(Some(HostEntry::Other(what))) if minimal => {
            findings.push(finding(
                FindingKind::HostNodeMismatch,
                format!(
                    "device node of {origin} is {what} on the host, not a device node: the \
                     runtime creates {} from the spec's numbers ({})",
                    crate::text::Escaped(&node.path),
                    numbers(&dev.node_type, dev.major, dev.minor)
                ),
            ));
            return Ok(dev);
        }
        Ok(Some(HostEntry::Other(_))) => {
            return Err(format!(
                "failed to stat CDI host device {}: not a device node",
                go_quote(host_path)
            ));
        }
        Err(reason) if minimal => {
            findings.push(finding(
                FindingKind::MissingHostPath,
                format!(
                    "device node of {origin} cannot be examined on the host ({reason}): the \
                     runtime uses the spec's numbers ({})",
                    numbers(&dev.node_type, dev.major, dev.minor)
                ),
            ));
            return Ok(dev);
        }
        Err(reason) => {
            return Err(format!(
                "failed to stat CDI host device {}: {reason}",
                go_quote(host_path)
            ));
        }
    };
    let (host_type, host_major, host_minor, mode) = entry;
    if dev.file_mode.is_none() {
        dev.file_mode = Some(mode);
    }
    if !minimal {
        if dev.node_type.is_empty() {
            dev.node_type = host_type.to_string();
        }
        if dev.node_type != host_type {
            return Err(format!(
                "CDI device ({}, {}), host type mismatch ({}, {host_type})",
                go_quote(&node.path),
                go_quote(host_path),
                dev.node_type
            ));
        }
        if dev.node_type != "p" && dev.major == 0 {
            dev.major = host_major;
            dev.minor = host_minor;
        }
    }
    // `u` is an unbuffered character device: a `c` node on the host.
    let spec_type = if dev.node_type == "u" {
        "c"
    } else {
        &dev.node_type
    };
    let differs = spec_type != host_type
        || (host_type != "p" && (dev.major, dev.minor) != (host_major, host_minor));
    if differs {
        findings.push(finding(
            FindingKind::HostNodeMismatch,
            format!(
                "device node of {origin}: the spec says {}, the host's node is {}: the container \
                 gets the spec's",
                numbers(&dev.node_type, dev.major, dev.minor),
                numbers(host_type, host_major, host_minor)
            ),
        ));
    }
    Ok(dev)
}

/// Net devices: keyed by host interface, the later wins.
fn apply_net_devices(edits: &[Edits<'_>], oci: &mut Oci, findings: &mut Vec<Finding>) {
    let mut from: BTreeMap<&str, &Origin> = BTreeMap::new();
    for e in edits {
        for n in &e.edits.net_devices {
            let new = OciNetDevice {
                name: n.name.clone(),
            };
            if let Some(old) = oci.net_devices.insert(n.host_interface_name.clone(), new)
                && old.name != n.name
            {
                let earlier = from.get(n.host_interface_name.as_str()).copied();
                let mut sources: Vec<Source> = earlier.into_iter().map(Source::of).collect();
                sources.push(Source::of(e.origin));
                findings.push(Finding {
                    kind: FindingKind::ShadowedNetDevice,
                    severity: Severity::Warning,
                    subject: n.host_interface_name.clone(),
                    sources,
                    files: Vec::new(),
                    message: format!(
                        "moved into the container as {}{} and as {} by {}: the later wins",
                        crate::text::quoted(&old.name, 80),
                        earlier.map(|o| format!(" by {o}")).unwrap_or_default(),
                        crate::text::quoted(&n.name, 80),
                        e.origin
                    ),
                });
            }
            from.insert(&n.host_interface_name, e.origin);
        }
    }
}

/// Mounts: replace by destination, append, then sort as the library does.
fn apply_mounts(edits: &[Edits<'_>], host: &dyn Host, oci: &mut Oci, findings: &mut Vec<Finding>) {
    let mut from: Vec<&Origin> = Vec::new();
    for e in edits {
        for m in &e.edits.mounts {
            let new = to_oci_mount(m);
            if let Some(i) = oci
                .mounts
                .iter()
                .position(|x| x.destination == new.destination)
            {
                let old = oci.mounts.remove(i);
                let old_from = if i < from.len() {
                    Some(from.remove(i))
                } else {
                    None
                };
                if old != new {
                    let mut sources: Vec<Source> = old_from.into_iter().map(Source::of).collect();
                    sources.push(Source::of(e.origin));
                    findings.push(Finding {
                        kind: FindingKind::ShadowedMount,
                        severity: Severity::Warning,
                        subject: new.destination.clone(),
                        sources,
                        files: Vec::new(),
                        message: format!(
                            "the mount of {}{} is replaced by that of {} from {} (the later wins)",
                            crate::text::Escaped(&old.source),
                            old_from.map(|o| format!(" from {o}")).unwrap_or_default(),
                            crate::text::Escaped(&new.source),
                            e.origin
                        ),
                    });
                }
            }
            // A source that is not a path (`tmpfs`, `proc`) is not looked up.
            if new.source.starts_with('/') && !host.exists(&new.source) {
                findings.push(Finding {
                    kind: FindingKind::MissingHostPath,
                    severity: Severity::Warning,
                    subject: new.source.clone(),
                    sources: vec![Source::of(e.origin)],
                    files: Vec::new(),
                    message: format!(
                        "the source of the mount at {} from {} is not on the host: the runtime \
                         fails to start the container",
                        crate::text::Escaped(&new.destination),
                        e.origin
                    ),
                });
            }
            oci.mounts.push(new);
            from.push(e.origin);
        }
    }
    // `sort.Stable` by depth: Rust's sort is stable too.
    oci.mounts.sort_by_key(|m| depth(&m.destination));
}

fn to_oci_mount(m: &Mount) -> OciMount {
    OciMount {
        destination: m.container_path.clone(),
        mount_type: m.mount_type.clone(),
        source: m.host_path.clone(),
        options: m.options.clone(),
    }
}

/// The number of `/` in Go's `filepath.Clean(path)`: how the library
/// orders mounts (`/` and `/a` count 1, `a` and `` count 0).
pub fn depth(path: &str) -> usize {
    let rooted = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => match parts.last() {
                Some(&last) if last != ".." => {
                    parts.pop();
                }
                // `/..` is `/`; a relative path keeps its leading `..`.
                _ if rooted => {}
                _ => parts.push(".."),
            },
            c => parts.push(c),
        }
    }
    if rooted {
        parts.len().max(1)
    } else {
        parts.len().saturating_sub(1)
    }
}

/// IntelRdt: the last one wins.
fn apply_intel_rdt(edits: &[Edits<'_>], oci: &mut Oci, findings: &mut Vec<Finding>) {
    let mut from: Option<&Origin> = None;
    for e in edits {
        let Some(rdt) = &e.edits.intel_rdt else {
            continue;
        };
        let new = OciIntelRdt {
            clos_id: rdt.clos_id.clone(),
            schemata: rdt.schemata.clone().unwrap_or_default(),
            l3_cache_schema: rdt.l3_cache_schema.clone(),
            mem_bw_schema: rdt.mem_bw_schema.clone(),
            enable_monitoring: rdt.enable_monitoring.unwrap_or(false),
        };
        if let (Some(old), Some(old_from)) = (&oci.intel_rdt, from)
            && *old != new
        {
            findings.push(Finding {
                kind: FindingKind::ShadowedIntelRdt,
                severity: Severity::Warning,
                subject: "intelRdt".to_string(),
                sources: vec![Source::of(old_from), Source::of(e.origin)],
                files: Vec::new(),
                message: format!(
                    "set by {old_from} and by {}: the later replaces it whole",
                    e.origin
                ),
            });
        }
        oci.intel_rdt = Some(new);
        from = Some(e.origin);
    }
}

/// A string quoted as Go's `%q` quotes it (for the library's messages):
/// `"`, `\` and controls escaped.
fn go_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\x7f' => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if crate::text::needs_escape(c) => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests;

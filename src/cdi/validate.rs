//! Validation of a CDI spec by the reference library's rules, stricter
//! where the spec text is or where released runtimes break.
//!
//! One function, [`validate`], serves both `generate` (nothing invalid is
//! ever written) and `cdigen validate`. It collects every problem instead
//! of stopping at the first, each with a location such as
//! `device "gpu0": containerEdits.deviceNodes[0].type`.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use super::name::{Kind, validate_device_name};
use super::spec::{ContainerEdits, DeviceNode, Hook, IntelRdt, Mount, NetDevice, Spec};
use super::version::{Version, minimum_required};

/// Hook names the reference library accepts (exact case).
pub const HOOK_NAMES: [&str; 6] = [
    "prestart",
    "createRuntime",
    "createContainer",
    "startContainer",
    "poststart",
    "poststop",
];

/// Largest total size of annotation keys and values (Kubernetes' limit).
pub const MAX_ANNOTATIONS_SIZE: usize = 256 * 1024;

/// One thing wrong with a spec.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Problem {
    /// Where: `kind`, `device "gpu0": containerEdits.env[1]`, ...
    pub location: String,
    /// What is wrong and what was expected.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.location, self.message)
    }
}

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

/// Validates a whole spec; an empty result means valid.
pub fn validate(spec: &Spec) -> Vec<Problem> {
    let mut c = Collector {
        problems: Vec::new(),
    };
    check_version(&mut c, spec);
    if let Err(e) = Kind::parse(&spec.kind) {
        c.push("kind", e.to_string());
    }
    check_annotations(&mut c, "annotations", &spec.annotations);
    check_edits(&mut c, "containerEdits", &spec.container_edits);

    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, dev) in spec.devices.iter().enumerate() {
        let at = if dev.name.is_empty() {
            format!("devices[{i}]")
        } else {
            format!("device {:?}", dev.name)
        };
        if let Err(e) = validate_device_name(&dev.name) {
            c.push(format!("{at}: name"), e.to_string());
        }
        *seen.entry(dev.name.as_str()).or_default() += 1;
        check_annotations(&mut c, &format!("{at}: annotations"), &dev.annotations);
        if dev.container_edits.is_empty() {
            c.push(
                format!("{at}: containerEdits"),
                "must not be empty (a device needs at least one edit)",
            );
        }
        check_edits(
            &mut c,
            &format!("{at}: containerEdits"),
            &dev.container_edits,
        );
    }
    let mut dups: Vec<_> = seen.into_iter().filter(|(_, n)| *n > 1).collect();
    dups.sort();
    for (name, n) in dups {
        c.push(
            format!("device {name:?}"),
            format!("defined {n} times in this spec (device names must be unique)"),
        );
    }
    if spec.devices.is_empty() {
        c.push("devices", "at least one device is required");
    }
    c.problems
}

fn check_version(c: &mut Collector, spec: &Spec) {
    if spec.cdi_version.is_empty() {
        c.push(
            "cdiVersion",
            "missing or empty (expected a CDI version such as \"0.5.0\")",
        );
        return;
    }
    let Some(declared) = Version::parse(&spec.cdi_version) else {
        c.push(
            "cdiVersion",
            format!(
                "unknown version {:?} (expected one of {} .. {})",
                spec.cdi_version,
                Version::EARLIEST,
                Version::CURRENT
            ),
        );
        return;
    };
    if declared < Version::EARLIEST {
        c.push(
            "cdiVersion",
            format!(
                "{declared} is no longer accepted: must be at least {}",
                Version::EARLIEST
            ),
        );
        return;
    }
    let need = minimum_required(spec);
    if declared < need.version {
        c.push(
            "cdiVersion",
            format!(
                "is {declared}, but the content needs at least {} ({})",
                need.version, need.because
            ),
        );
    }
}

/// Checks `NAME=value` entries (the reference library's rule: a `=` after
/// a non-empty name), and refuses NUL, which no environment can carry.
fn check_env(c: &mut Collector, at: &str, env: &[String]) {
    for (i, e) in env.iter().enumerate() {
        match e.find('=') {
            None | Some(0) => c.push(format!("{at}[{i}]"), format!("{e:?} is not NAME=value")),
            Some(_) if e.contains('\0') => {
                c.push(format!("{at}[{i}]"), "must not contain a NUL byte")
            }
            Some(_) => {}
        }
    }
}

fn check_edits(c: &mut Collector, at: &str, e: &ContainerEdits) {
    check_env(c, &format!("{at}.env"), &e.env);
    for (i, n) in e.device_nodes.iter().enumerate() {
        check_device_node(c, &format!("{at}.deviceNodes[{i}]"), n);
    }
    for (i, n) in e.net_devices.iter().enumerate() {
        check_net_device(c, &format!("{at}.netDevices[{i}]"), n);
        // Runtimes refuse two entries moving the same host interface or
        // creating the same container interface.
        let earlier = e.net_devices.get(..i).unwrap_or_default();
        if earlier
            .iter()
            .any(|o| o.host_interface_name == n.host_interface_name)
        {
            c.push(
                format!("{at}.netDevices[{i}].hostInterfaceName"),
                format!("{:?} is listed twice", n.host_interface_name),
            );
        }
        if earlier.iter().any(|o| o.name == n.name) {
            c.push(
                format!("{at}.netDevices[{i}].name"),
                format!("{:?} is listed twice", n.name),
            );
        }
    }
    for (i, h) in e.hooks.iter().enumerate() {
        check_hook(c, &format!("{at}.hooks[{i}]"), h);
    }
    for (i, m) in e.mounts.iter().enumerate() {
        check_mount(c, &format!("{at}.mounts[{i}]"), m);
    }
    if let Some(rdt) = &e.intel_rdt {
        check_intel_rdt(c, &format!("{at}.intelRdt"), rdt);
    }
}

fn check_device_node(c: &mut Collector, at: &str, n: &DeviceNode) {
    if n.path.is_empty() {
        c.push(format!("{at}.path"), "must not be empty");
    }
    if !matches!(n.node_type.as_str(), "" | "b" | "c" | "u" | "p") {
        c.push(
            format!("{at}.type"),
            format!(
                "{:?} is not a device type (expected \"c\", \"b\", \"u\", \"p\" or empty)",
                n.node_type
            ),
        );
    }
    if let Some(bad) = n
        .permissions
        .chars()
        .find(|ch| !matches!(ch, 'r' | 'w' | 'm'))
    {
        c.push(
            format!("{at}.permissions"),
            format!("{:?} has {bad:?} (expected only r, w and m)", n.permissions),
        );
    }
    if n.major < 0 {
        c.push(format!("{at}.major"), format!("{} is negative", n.major));
    }
    if n.minor < 0 {
        c.push(format!("{at}.minor"), format!("{} is negative", n.minor));
    }
}

/// The kernel's `dev_valid_name`: 1 to 15 bytes, not `.` or `..`, no `/`,
/// `:` or whitespace.
fn interface_name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("must not be empty".into());
    }
    if name.len() > 15 {
        return Some(format!(
            "{name:?} is longer than 15 bytes (the kernel's IFNAMSIZ limit)"
        ));
    }
    if name == "." || name == ".." {
        return Some(format!("{name:?} is not an interface name"));
    }
    if let Some(ch) = name
        .chars()
        .find(|ch| *ch == '/' || *ch == ':' || ch.is_whitespace() || ch.is_control())
    {
        return Some(format!(
            "{name:?} contains {ch:?}, not allowed in an interface name"
        ));
    }
    None
}

fn check_net_device(c: &mut Collector, at: &str, n: &NetDevice) {
    if let Some(p) = interface_name_problem(&n.host_interface_name) {
        c.push(format!("{at}.hostInterfaceName"), p);
    }
    if let Some(p) = interface_name_problem(&n.name) {
        c.push(format!("{at}.name"), p);
    }
}

fn check_hook(c: &mut Collector, at: &str, h: &Hook) {
    if !HOOK_NAMES.contains(&h.hook_name.as_str()) {
        c.push(
            format!("{at}.hookName"),
            format!(
                "{:?} is not a hook name (expected one of {})",
                h.hook_name,
                HOOK_NAMES.join(", ")
            ),
        );
    }
    if h.path.is_empty() {
        c.push(format!("{at}.path"), "must not be empty");
    } else if !h.path.starts_with('/') {
        c.push(
            format!("{at}.path"),
            format!("{:?} must be an absolute path", h.path),
        );
    }
    check_env(c, &format!("{at}.env"), &h.env);
    if let Some(t) = h.timeout
        && t <= 0
    {
        c.push(
            format!("{at}.timeout"),
            format!("{t} must be greater than zero when set"),
        );
    }
}

fn check_mount(c: &mut Collector, at: &str, m: &Mount) {
    if m.host_path.is_empty() {
        c.push(format!("{at}.hostPath"), "must not be empty");
    }
    if m.container_path.is_empty() {
        c.push(format!("{at}.containerPath"), "must not be empty");
    }
}

fn check_intel_rdt(c: &mut Collector, at: &str, rdt: &IntelRdt) {
    let id = rdt.clos_id.as_str();
    // "/" names the root class of service (CDI v1.1.0).
    if id == "/" {
        return;
    }
    let problem = if id.len() >= 4096 {
        Some(format!("is {} bytes (must be shorter than 4096)", id.len()))
    } else if id == "." || id == ".." {
        Some(format!("{id:?} is not a valid name"))
    } else if id.contains('/') || id.contains('\n') {
        Some(format!("{id:?} must not contain '/' or a newline"))
    } else {
        None
    };
    if let Some(p) = problem {
        c.push(format!("{at}.closID"), p);
    }
}

fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|label| {
            let b = label.as_bytes();
            match (b.first(), b.last()) {
                (Some(f), Some(l)) => {
                    f.is_ascii_alphanumeric()
                        && l.is_ascii_alphanumeric()
                        && b.iter()
                            .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || *ch == b'-')
                }
                _ => false,
            }
        })
}

fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => {
            b.len() <= 63
                && f.is_ascii_alphanumeric()
                && l.is_ascii_alphanumeric()
                && b.iter()
                    .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// Checks annotation keys as Kubernetes qualified names (after lowercasing,
/// as the reference library's intended rule does) and the total size.
fn check_annotations(c: &mut Collector, at: &str, annotations: &BTreeMap<String, String>) {
    let mut size = 0;
    for (key, value) in annotations {
        size += key.len() + value.len();
        let lower = key.to_ascii_lowercase();
        let ok = match lower.split_once('/') {
            Some((prefix, name)) => is_dns1123_subdomain(prefix) && is_qualified_name_part(name),
            None => is_qualified_name_part(&lower),
        };
        if !ok {
            c.push(
                format!("{at}[{key:?}]"),
                "key is not a Kubernetes qualified name (expected [prefix/]name: a DNS subdomain \
                 prefix, and a name of at most 63 characters from A-Z a-z 0-9 - _ . starting and \
                 ending with a letter or digit)",
            );
        }
    }
    if size > MAX_ANNOTATIONS_SIZE {
        c.push(
            at,
            format!("keys and values total {size} bytes (at most {MAX_ANNOTATIONS_SIZE})"),
        );
    }
}

/// An environment variable two CDI devices of a spec set to different
/// values ([`env_collision`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvCollision {
    /// The variable name.
    pub variable: String,
    /// The device that sets it first, in spec order.
    pub first: String,
    /// Its value there.
    pub first_value: String,
    /// A later device that sets it to another value.
    pub second: String,
    /// Its value there.
    pub second_value: String,
}

/// The first variable (in spec order) that two CDI devices of `spec` set
/// to different values, if any.
///
/// CDI runtimes (the Go library in containerd, CRI-O, podman) merge the
/// `containerEdits.env` of every device injected into a container by
/// variable name, the last value winning: a container given both devices
/// would silently lose one value. Within one device the last entry of a
/// name is its value, as at injection. One name with one value everywhere
/// (`VFIO_GROUP_<n>_DEVICES` in every device of the group) is no
/// collision. The `all` device stands for every other one and is never
/// injected with them in practice: it is left out. Spec-level edits and
/// hook environments are not per device and not compared.
pub fn env_collision(spec: &Spec) -> Option<EnvCollision> {
    // variable -> (device, value) of the first device that sets it
    let mut seen: std::collections::BTreeMap<&str, (&str, &str)> =
        std::collections::BTreeMap::new();
    for d in spec.devices.iter().filter(|d| d.name != "all") {
        // The device's own env, as injection leaves it (last one wins),
        // in the order of first appearance.
        let mut own: Vec<(&str, &str)> = Vec::new();
        for entry in &d.container_edits.env {
            let Some((variable, value)) = entry.split_once('=') else {
                continue;
            };
            match own.iter_mut().find(|(v, _)| *v == variable) {
                Some(slot) => slot.1 = value,
                None => own.push((variable, value)),
            }
        }
        for (variable, value) in own {
            match seen.get(variable) {
                Some(&(first, first_value)) if first_value != value => {
                    return Some(EnvCollision {
                        variable: variable.to_string(),
                        first: first.to_string(),
                        first_value: first_value.to_string(),
                        second: d.name.clone(),
                        second_value: value.to_string(),
                    });
                }
                Some(_) => {}
                None => {
                    seen.insert(variable, (&d.name, value));
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cdi::spec::Device;

    fn spec() -> Spec {
        Spec {
            cdi_version: "0.3.0".into(),
            kind: "vendor.com/gpu".into(),
            devices: vec![Device {
                name: "gpu0".into(),
                container_edits: ContainerEdits {
                    device_nodes: vec![DeviceNode {
                        path: "/dev/dri/card0".into(),
                        ..Default::default()
                    }],
                    ..Default::default()
                },
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    /// Applies `f` to a valid spec and returns the problems as strings.
    fn problems(f: impl FnOnce(&mut Spec)) -> Vec<String> {
        let mut s = spec();
        f(&mut s);
        validate(&s).iter().map(ToString::to_string).collect()
    }

    fn edits(s: &mut Spec) -> &mut ContainerEdits {
        &mut s.devices[0].container_edits
    }

    #[test]
    fn valid_spec_has_no_problems() {
        assert_eq!(problems(|_| {}), Vec::<String>::new());
    }

    #[test]
    fn version_rules() {
        assert_eq!(
            problems(|s| s.cdi_version.clear()),
            ["cdiVersion: missing or empty (expected a CDI version such as \"0.5.0\")"]
        );
        assert_eq!(
            problems(|s| s.cdi_version = "0.0.0".into()),
            ["cdiVersion: unknown version \"0.0.0\" (expected one of 0.3.0 .. 1.1.0)"]
        );
        assert_eq!(
            problems(|s| s.cdi_version = "0.2.0".into()),
            ["cdiVersion: 0.2.0 is no longer accepted: must be at least 0.3.0"]
        );
        assert_eq!(
            problems(|s| {
                s.devices[0].name = "0".into();
            }),
            [
                "cdiVersion: is 0.3.0, but the content needs at least 0.5.0 (device name \"0\" starts with a digit)"
            ]
        );
        assert_eq!(
            problems(|s| s.cdi_version = "v0.3.0".into()),
            Vec::<String>::new()
        );
    }

    #[test]
    fn kind_rules() {
        assert_eq!(
            problems(|s| s.kind = "vendor.com".into()),
            ["kind: invalid kind \"vendor.com\": must be vendor/class, e.g. example.com/gpu"]
        );
        assert_eq!(
            problems(|s| s.kind = "v/gpu".into()),
            [
                "kind: invalid vendor \"v\": must be at least 2 characters (released CDI libraries crash on 1)"
            ]
        );
    }

    #[test]
    fn device_rules() {
        assert_eq!(
            problems(|s| s.devices.clear()),
            ["devices: at least one device is required"]
        );
        assert_eq!(
            problems(|s| s.devices[0].name = "gpu 0".into()),
            [
                "device \"gpu 0\": name: invalid device name \"gpu 0\": invalid character ' ' (allowed: A-Z a-z 0-9 _ . : -)"
            ]
        );
        assert_eq!(
            problems(|s| s.devices[0].name.clear()),
            ["devices[0]: name: invalid device name: empty name"]
        );
        assert_eq!(
            problems(|s| s.devices[0].container_edits = ContainerEdits::default()),
            [
                "device \"gpu0\": containerEdits: must not be empty (a device needs at least one edit)"
            ]
        );
        assert_eq!(
            problems(|s| {
                let d = s.devices[0].clone();
                s.devices.push(d);
            }),
            ["device \"gpu0\": defined 2 times in this spec (device names must be unique)"]
        );
    }

    #[test]
    fn env_rules() {
        assert_eq!(
            problems(|s| edits(s).env = vec![
                "A=1".into(),
                "B=".into(),
                "FOO".into(),
                "=x".into(),
                "".into()
            ]),
            [
                "device \"gpu0\": containerEdits.env[2]: \"FOO\" is not NAME=value",
                "device \"gpu0\": containerEdits.env[3]: \"=x\" is not NAME=value",
                "device \"gpu0\": containerEdits.env[4]: \"\" is not NAME=value",
            ]
        );
        assert_eq!(
            problems(|s| s.container_edits.env = vec!["A=\0".into()]),
            ["containerEdits.env[0]: must not contain a NUL byte"]
        );
    }

    #[test]
    fn device_node_rules() {
        assert_eq!(
            problems(|s| {
                let n = &mut edits(s).device_nodes[0];
                n.path.clear();
                n.node_type = "x".into();
                n.permissions = "rwx".into();
                n.major = -1;
                n.minor = -2;
            }),
            [
                "device \"gpu0\": containerEdits.deviceNodes[0].path: must not be empty",
                "device \"gpu0\": containerEdits.deviceNodes[0].type: \"x\" is not a device type (expected \"c\", \"b\", \"u\", \"p\" or empty)",
                "device \"gpu0\": containerEdits.deviceNodes[0].permissions: \"rwx\" has 'x' (expected only r, w and m)",
                "device \"gpu0\": containerEdits.deviceNodes[0].major: -1 is negative",
                "device \"gpu0\": containerEdits.deviceNodes[0].minor: -2 is negative",
            ]
        );
        for ok in ["c", "b", "u", "p", ""] {
            assert_eq!(
                problems(|s| edits(s).device_nodes[0].node_type = ok.into()),
                Vec::<String>::new()
            );
        }
        assert_eq!(
            problems(|s| edits(s).device_nodes[0].permissions = "mwrr".into()),
            Vec::<String>::new()
        );
        assert_eq!(
            problems(|s| edits(s).device_nodes[0].permissions = "none".into()),
            [
                "device \"gpu0\": containerEdits.deviceNodes[0].permissions: \"none\" has 'n' (expected only r, w and m)"
            ]
        );
    }

    #[test]
    fn mount_rules() {
        assert_eq!(
            problems(|s| edits(s).mounts.push(Mount::default())),
            [
                "device \"gpu0\": containerEdits.mounts[0].hostPath: must not be empty",
                "device \"gpu0\": containerEdits.mounts[0].containerPath: must not be empty",
            ]
        );
    }

    #[test]
    fn hook_rules() {
        assert_eq!(
            problems(|s| edits(s).hooks.push(Hook {
                hook_name: "CreateContainer".into(),
                path: "bin/hook".into(),
                env: vec!["X".into()],
                timeout: Some(0),
                ..Default::default()
            })),
            [
                "device \"gpu0\": containerEdits.hooks[0].hookName: \"CreateContainer\" is not a hook name (expected one of prestart, createRuntime, createContainer, startContainer, poststart, poststop)",
                "device \"gpu0\": containerEdits.hooks[0].path: \"bin/hook\" must be an absolute path",
                "device \"gpu0\": containerEdits.hooks[0].env[0]: \"X\" is not NAME=value",
                "device \"gpu0\": containerEdits.hooks[0].timeout: 0 must be greater than zero when set",
            ]
        );
        assert_eq!(
            problems(|s| edits(s).hooks.push(Hook {
                hook_name: "createContainer".into(),
                ..Default::default()
            })),
            ["device \"gpu0\": containerEdits.hooks[0].path: must not be empty"]
        );
        for name in HOOK_NAMES {
            assert_eq!(
                problems(|s| edits(s).hooks.push(Hook {
                    hook_name: name.into(),
                    path: "/usr/bin/hook".into(),
                    timeout: Some(5),
                    ..Default::default()
                })),
                Vec::<String>::new()
            );
        }
    }

    #[test]
    fn intel_rdt_rules() {
        let at = "device \"gpu0\": containerEdits.intelRdt.closID";
        let check = |id: &str| {
            problems(|s| {
                s.cdi_version = "0.7.0".into();
                edits(s).intel_rdt = Some(IntelRdt {
                    clos_id: id.into(),
                    ..Default::default()
                });
            })
        };
        assert_eq!(check("clos1"), Vec::<String>::new());
        assert_eq!(check("/"), Vec::<String>::new());
        assert_eq!(check(""), Vec::<String>::new());
        assert_eq!(check("."), [format!("{at}: \".\" is not a valid name")]);
        assert_eq!(check(".."), [format!("{at}: \"..\" is not a valid name")]);
        assert_eq!(
            check("a/b"),
            [format!("{at}: \"a/b\" must not contain '/' or a newline")]
        );
        assert_eq!(
            check("a\nb"),
            [format!("{at}: \"a\\nb\" must not contain '/' or a newline")]
        );
        assert_eq!(
            check(&"x".repeat(4096)),
            [format!("{at}: is 4096 bytes (must be shorter than 4096)")]
        );
    }

    #[test]
    fn net_device_rules() {
        let check = |host: &str, name: &str| {
            problems(|s| {
                s.cdi_version = "1.1.0".into();
                edits(s).net_devices.push(NetDevice {
                    host_interface_name: host.into(),
                    name: name.into(),
                });
            })
        };
        assert_eq!(check("enp1s0f0v1", "net1"), Vec::<String>::new());
        assert_eq!(
            check("", "a/b"),
            [
                "device \"gpu0\": containerEdits.netDevices[0].hostInterfaceName: must not be empty",
                "device \"gpu0\": containerEdits.netDevices[0].name: \"a/b\" contains '/', not allowed in an interface name",
            ]
        );
        assert_eq!(
            check("averyveryverylongname", "eth 0"),
            [
                "device \"gpu0\": containerEdits.netDevices[0].hostInterfaceName: \"averyveryverylongname\" is longer than 15 bytes (the kernel's IFNAMSIZ limit)",
                "device \"gpu0\": containerEdits.netDevices[0].name: \"eth 0\" contains ' ', not allowed in an interface name",
            ]
        );
    }

    #[test]
    fn annotation_rules() {
        let check = |key: &str| {
            problems(|s| {
                s.cdi_version = "0.6.0".into();
                s.annotations.insert(key.into(), "v".into());
            })
        };
        for ok in [
            "key",
            "cdi.k8s.io/device.vfio",
            "Example.COM/Name_1",
            "a",
            "a-b.c_d",
        ] {
            assert_eq!(check(ok), Vec::<String>::new(), "{ok}");
        }
        for bad in [
            "inva$$lid_CDIKEY",
            "/name",
            "pre fix/name",
            "-a",
            "a/",
            &"n".repeat(64),
        ] {
            let got = check(bad);
            assert_eq!(got.len(), 1, "{bad}: {got:?}");
            assert!(
                got[0].starts_with(&format!(
                    "annotations[{bad:?}]: key is not a Kubernetes qualified name"
                )),
                "{got:?}"
            );
        }
        assert_eq!(
            problems(|s| {
                s.cdi_version = "0.6.0".into();
                s.devices[0]
                    .annotations
                    .insert("big".into(), "x".repeat(MAX_ANNOTATIONS_SIZE));
            }),
            ["device \"gpu0\": annotations: keys and values total 262147 bytes (at most 262144)"]
        );
    }
}

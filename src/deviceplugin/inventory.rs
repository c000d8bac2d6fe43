//! What the device plugins advertise: for each resource, its devices by
//! ID, with their CDI names, health and placement.
//!
//! Built after every watch pass from the pipeline's plans (the specs on
//! disk) and the host's `/dev` and sysfs, through the root: nothing here
//! reads the host any other way. A device is unhealthy when it cannot be
//! used now ([`health`]) or its PCI signals say so ([`signals`]), less the
//! codes the admin ignores.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::ids;
use super::preferred::Placement;
use super::signals::{self, Checks, Code, Unhealthy};
use crate::generate::Planned;
use crate::generator::Loaded;
use crate::model::Device;
use crate::root::{DevKind, HostRoot};

/// A resource one device plugin serves, from a generator definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceDef {
    /// The extended resource name (`cdigen.io/vf`).
    pub name: String,
    /// The generator whose devices it offers.
    pub generator: String,
    /// The generator's CDI kind.
    pub kind: String,
    /// The generator's definition file.
    pub source: PathBuf,
    /// How many units each offered device is advertised as
    /// (`device_plugin.replicas`; 1: each device to one container).
    pub replicas: u32,
    /// Whether the generator names only `all`: then that one CDI device,
    /// the pool of all it selects, is what is offered.
    pub pool: bool,
    /// Whether it is registered while it has no device
    /// (`device_plugin.register_empty`).
    pub register_empty: bool,
    /// Other plugins' resources that serve the same devices
    /// (`device_plugin.vendor_resources`; `domain/prefix*` for a prefix):
    /// while one is served on the node, the devices are not offered.
    pub vendor_resources: Vec<String>,
}

/// Why the device plugin cannot start with these definitions.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    /// A resource name the kubelet would refuse.
    #[error(
        "generator {generator} ({}): {name:?} is not an extended resource name: {why} \
(set device_plugin.resource to a name like example.com/device, or device_plugin.enabled: false)",
        file.display()
    )]
    ResourceName {
        /// The generator.
        generator: String,
        /// Its definition file.
        file: PathBuf,
        /// The name.
        name: String,
        /// What is wrong with it.
        why: String,
    },
    /// Two generators offering one resource.
    #[error(
        "generators {first} ({}) and {second} ({}) both offer resource {name}: rename one \
(device_plugin.resource) or turn one off (device_plugin.enabled: false)",
        first_source.display(), second_source.display()
    )]
    SharedResource {
        /// The resource.
        name: String,
        /// The first generator.
        first: String,
        /// Its definition file.
        first_source: PathBuf,
        /// The second generator.
        second: String,
        /// Its definition file.
        second_source: PathBuf,
    },
    /// A `device_plugin.vendor_resources` entry that names no resource.
    #[error(
        "generator {generator} ({}): device_plugin.vendor_resources: {entry:?} is not another \
plugin's resource name: {why} (list names like nvidia.com/gpu, or nvidia.com/mig-* for a prefix)",
        file.display()
    )]
    VendorResource {
        /// The generator.
        generator: String,
        /// Its definition file.
        file: PathBuf,
        /// The entry.
        entry: String,
        /// What is wrong with it.
        why: String,
    },
    /// Devices of one generator that would get one ID.
    #[error(
        "generator {generator} ({}): devices {first} and {second} would both have device plugin ID {id:?}",
        file.display()
    )]
    IdCollision {
        /// The generator.
        generator: String,
        /// Its definition file.
        file: PathBuf,
        /// The ID.
        id: String,
        /// One device's identity.
        first: String,
        /// The other's.
        second: String,
    },
}

/// The resources of the enabled generators that advertise their devices,
/// in generator order.
///
/// # Errors
/// A name that is not an extended resource name, or one two generators
/// share, naming the generators and their files.
pub fn resources(generators: &[Loaded]) -> Result<Vec<ResourceDef>, Error> {
    let mut out: Vec<ResourceDef> = Vec::new();
    for l in generators {
        let g = &l.generator;
        if !g.enabled || !g.device_plugin.enabled {
            continue;
        }
        let name = g
            .device_plugin
            .resource
            .clone()
            .unwrap_or_else(|| default_resource(&g.name, &g.kind));
        if let Err(why) = check_resource_name(&name) {
            return Err(Error::ResourceName {
                generator: g.name.clone(),
                file: l.source.clone(),
                name,
                why,
            });
        }
        for entry in &g.device_plugin.vendor_resources {
            if let Err(why) = check_vendor_resource(entry) {
                return Err(Error::VendorResource {
                    generator: g.name.clone(),
                    file: l.source.clone(),
                    entry: entry.clone(),
                    why,
                });
            }
        }
        if let Some(other) = out.iter().find(|r| r.name == name) {
            return Err(Error::SharedResource {
                name,
                first: other.generator.clone(),
                first_source: other.source.clone(),
                second: g.name.clone(),
                second_source: l.source.clone(),
            });
        }
        out.push(ResourceDef {
            name,
            generator: g.name.clone(),
            kind: g.kind.clone(),
            source: l.source.clone(),
            replicas: g.device_plugin.replicas.max(1),
            pool: g.names == [crate::generator::NameStrategy::All],
            register_empty: g.device_plugin.register_empty,
            vendor_resources: g.device_plugin.vendor_resources.clone(),
        });
    }
    Ok(out)
}

/// cdigen's own domain: resource names in it are cdigen's alone.
pub const OWN_DOMAIN: &str = "cdigen.io";

/// The resource a generator advertises when its definition names none: its
/// kind when that is in cdigen's own domain (`cdigen.io/vf`), else
/// `cdigen.io/<generator>` (`cdigen.io/nvidia` for kind `nvidia.com/gpu`).
/// A vendor's name (`nvidia.com/gpu`, `amd.com/gpu`) is what that vendor's
/// device plugin registers: two plugins of one name on a node replace each
/// other at the kubelet, so a vendor name is only ever an explicit choice
/// (`device_plugin.resource`), for a user migrating from that plugin.
pub fn default_resource(generator: &str, kind: &str) -> String {
    match kind.split_once('/') {
        Some((OWN_DOMAIN, _)) => kind.to_string(),
        _ => format!("{OWN_DOMAIN}/{generator}"),
    }
}

/// Checks a `device_plugin.vendor_resources` entry: an extended resource
/// name ([`check_resource_name`]) outside cdigen's own domain, or one with
/// a trailing `*` (a prefix of such names: `nvidia.com/mig-*`).
///
/// # Errors
/// What is wrong, in words.
pub fn check_vendor_resource(entry: &str) -> Result<(), String> {
    let name = match entry.strip_suffix('*') {
        // Any name the prefix starts fits; `x` stands for the rest.
        Some(prefix) => format!("{prefix}x"),
        None => entry.to_string(),
    };
    if name.contains('*') {
        return Err("only a trailing * (a prefix) is a pattern".into());
    }
    if name
        .split_once('/')
        .is_some_and(|(domain, _)| domain == OWN_DOMAIN)
    {
        return Err(format!("{OWN_DOMAIN} is cdigen's own domain"));
    }
    check_resource_name(&name)
}

/// Checks `name` as the kubelet's `IsExtendedResourceName` does: a
/// `domain/name` outside the `kubernetes.io` domain, where
/// `requests.<domain>` is a DNS subdomain (at most 253 characters) and the
/// name at most 63 characters of `A-Z a-z 0-9 - _ .`, starting and ending
/// with a letter or digit.
///
/// # Errors
/// What is wrong, in words.
pub fn check_resource_name(name: &str) -> Result<(), String> {
    let Some((domain, short)) = name.split_once('/') else {
        return Err("it needs a domain: domain/name".into());
    };
    if short.contains('/') {
        return Err("it has more than one '/'".into());
    }
    if name.contains("kubernetes.io/") {
        return Err("the kubernetes.io domain is Kubernetes' own".into());
    }
    if name.starts_with("requests.") {
        return Err("it must not start with \"requests.\"".into());
    }
    let prefix = format!("requests.{domain}");
    if domain.is_empty() || prefix.len() > 253 {
        return Err("the domain must be 1 to 244 characters".into());
    }
    for label in domain.split('.') {
        let ok = !label.is_empty()
            && label.len() <= 63
            && label
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !ok {
            return Err(format!(
                "domain label {label:?} must be 1-63 characters of a-z 0-9 -, not starting or ending with -"
            ));
        }
    }
    let alnum = |c: char| c.is_ascii_alphanumeric();
    let ok = !short.is_empty()
        && short.len() <= 63
        && short.starts_with(alnum)
        && short.ends_with(alnum)
        && short
            .chars()
            .all(|c| alnum(c) || matches!(c, '-' | '_' | '.'));
    if !ok {
        return Err(format!(
            "{short:?} must be 1-63 characters of A-Z a-z 0-9 - _ ., starting and ending with a letter or digit"
        ));
    }
    Ok(())
}

/// One advertised device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its device plugin ID.
    pub id: String,
    /// The fully-qualified CDI name Allocate returns (`cdigen.io/vf=0000:3b:00.2`).
    pub cdi_name: String,
    /// Why it is unhealthy; `None` when healthy.
    pub unhealthy: Option<Unhealthy>,
    /// Where it sits (NUMA node, PCIe path, MIG parent).
    pub placement: Placement,
    /// The device as discovered (as last seen, for one that vanished).
    pub device: Arc<Device>,
    /// Whether the host still has it (false: it vanished while allocated).
    pub present: bool,
}

impl Entry {
    /// Whether the kubelet may hand it out.
    pub fn healthy(&self) -> bool {
        self.unhealthy.is_none()
    }
}

/// One resource's devices.
#[derive(Debug, Clone)]
pub struct Resource {
    /// What it is.
    pub def: ResourceDef,
    /// The spec file its CDI names are in.
    pub spec_file: PathBuf,
    /// Its devices, by ID.
    pub devices: BTreeMap<String, Entry>,
    /// The generator's plan (its spec), for the legacy edits.
    pub plan: Option<Arc<Planned>>,
    /// The other plugin's resource that serves these devices now
    /// (`device_plugin.vendor_resources`): then none is offered, and the
    /// resource is not registered (or, registered already, lists none).
    pub withheld: Option<String>,
}

impl PartialEq for Resource {
    /// Equal when they advertise the same and their specs are the same.
    fn eq(&self, other: &Self) -> bool {
        self.def == other.def
            && self.spec_file == other.spec_file
            && self.devices == other.devices
            && self.withheld == other.withheld
            && self.plan.as_ref().map(|p| &p.spec) == other.plan.as_ref().map(|p| &p.spec)
    }
}

impl Eq for Resource {}

/// Every resource's devices.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inventory {
    /// By resource name.
    pub resources: BTreeMap<String, Resource>,
    /// The AER counts first seen of the devices offered: the next build's
    /// baseline ([`signals::Baseline`]).
    pub baseline: signals::Baseline,
}

/// What [`build`] found wrong besides health: ID collisions (both devices
/// are left out).
pub type Collisions = Vec<Error>;

/// What a resource offers: each device the plan names alone, by its
/// steadiest CDI name (a GPU split into MIG devices only as those), or,
/// for a pool, the one `all` device (the pool's [`pool_device`]); with
/// the reason each is unhealthy.
fn offered(
    def: &ResourceDef,
    plan: &Planned,
    root: &HostRoot,
    check: &mut signals::Pass<'_>,
    known: Option<&Resource>,
) -> Vec<(String, Arc<Device>, Option<Unhealthy>)> {
    // The verdict of the previous inventory on this very device, when it
    // is kept ([`Read::Changed`]).
    let kept = |d: &Device| {
        let prev = known?
            .devices
            .get(&unit_id(&ids::device_id(d), 0, def.replicas))?;
        (prev.present && *prev.device == *d).then(|| prev.unhealthy.clone())
    };
    if def.pool {
        let Some(all) = plan.named.iter().find(|n| n.name == "all") else {
            return Vec::new();
        };
        let members: Vec<&Device> = plan
            .devices
            .iter()
            .filter(|d| all.ids.contains(&d.id))
            .map(|d| &**d)
            .collect();
        if members.is_empty() {
            return Vec::new();
        }
        let pool = pool_device(&members);
        let unhealthy = kept(&pool).unwrap_or_else(|| {
            members
                .iter()
                .find_map(|m| judged(root, m, check).map(|why| why.prefixed(&m.id)))
        });
        return vec![(all.name.clone(), Arc::new(pool), unhealthy)];
    }
    let mut out = Vec::new();
    for d in &plan.devices {
        let Some(name) = cdi_name(plan, d) else {
            continue;
        };
        if split_into_mig(plan, d) {
            // Its MIG devices are offered: the GPU as a whole would be
            // handed out twice.
            continue;
        }
        let unhealthy = kept(d).unwrap_or_else(|| judged(root, d, check));
        out.push((name, Arc::clone(d), unhealthy));
    }
    out
}

/// The device a pool's units stand for: its members' nodes (each once),
/// for health, and their NUMA node when they share one, for placement. It
/// is no one PCI or network device: the plugin sets no per-request
/// variables and writes no device-info file for it, as the RDMA shared
/// device plugin does not.
pub fn pool_device(members: &[&Device]) -> Device {
    let mut nodes: Vec<crate::model::Node> = Vec::new();
    for n in members.iter().flat_map(|d| d.nodes.iter()) {
        if !nodes.iter().any(|x| x.path == n.path) {
            nodes.push(n.clone());
        }
    }
    let numa = members.first().and_then(|d| d.numa_node);
    Device {
        backend: members
            .first()
            .map(|d| d.backend.clone())
            .unwrap_or_default(),
        id: "all".into(),
        numa_node: numa.filter(|n| members.iter().all(|d| d.numa_node == Some(*n))),
        nodes,
        ..Default::default()
    }
}

/// The device plugin ID of unit `k` of a device whose ID is `id`, when
/// it is advertised as `replicas` units: `<id>-<k>` (the ID itself when it
/// is one unit). `k` has no `-`, so two devices' units never share an ID.
pub fn unit_id(id: &str, k: u32, replicas: u32) -> String {
    if replicas <= 1 {
        id.to_string()
    } else {
        ids::clean(&format!("{id}-{k}"))
    }
}

/// Builds the inventory from the current plans of the generators (by
/// generator name), checking each device's health in the host's `/dev`
/// and sysfs with the default [`Checks`] ([`build_with`]).
pub fn build(
    defs: &[ResourceDef],
    plans: &BTreeMap<String, Arc<Planned>>,
    root: &HostRoot,
    output_dir: &Path,
    previous: &Inventory,
    allocated: &BTreeSet<(String, String)>,
) -> (Inventory, Collisions) {
    build_with(
        defs,
        plans,
        root,
        output_dir,
        previous,
        allocated,
        &Checks::default(),
        Read::All,
    )
}

/// Whose health signals a build reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// Every device's: at start, and on the health poll.
    All,
    /// Only those of devices new or changed since the previous inventory:
    /// after a pass, whose cost then follows what changed. The others keep
    /// their verdict (and their counters' baseline) until the next poll,
    /// which reads every device's ([`signals::POLL`]).
    Changed,
}

/// Builds the inventory from the current plans of the generators (by
/// generator name), checking each device's health in the host's `/dev`
/// and sysfs ([`health`], [`signals`]; AER counters against `previous`'s
/// baseline), less what `checks` ignores. A device of `previous` that is
/// gone but allocated (`allocated` holds (resource, ID)) stays,
/// unhealthy. A resource with replicas offers each device as that many
/// units, each an entry of its own.
// What a build reads and against what: each argument is one of the
// passes' own fields.
#[allow(clippy::too_many_arguments)]
pub fn build_with(
    defs: &[ResourceDef],
    plans: &BTreeMap<String, Arc<Planned>>,
    root: &HostRoot,
    output_dir: &Path,
    previous: &Inventory,
    allocated: &BTreeSet<(String, String)>,
    checks: &Checks,
    read: Read,
) -> (Inventory, Collisions) {
    let mut inventory = Inventory::default();
    let mut collisions = Vec::new();
    let mut check = match read {
        Read::All => signals::Pass::new(checks, &previous.baseline),
        Read::Changed => signals::Pass::carrying(checks, &previous.baseline),
    };
    for def in defs {
        let plan = plans.get(&def.generator);
        let spec_file = plan.map_or_else(|| output_dir.to_path_buf(), |p| output_dir.join(&p.file));
        let mut devices: BTreeMap<String, Entry> = BTreeMap::new();
        let mut clashing: BTreeSet<String> = BTreeSet::new();
        let known = match read {
            Read::All => None,
            Read::Changed => previous.resources.get(&def.name),
        };
        let offers = plan
            .map(|p| offered(def, p, root, &mut check, known))
            .unwrap_or_default();
        for (name, d, unhealthy) in offers {
            let base = ids::device_id(&d);
            let placement = placement(&d);
            for k in 0..def.replicas.max(1) {
                let id = unit_id(&base, k, def.replicas);
                if let Some(other) = devices.get(&id) {
                    if k == 0 {
                        collisions.push(Error::IdCollision {
                            generator: def.generator.clone(),
                            file: def.source.clone(),
                            id: id.clone(),
                            first: other.device.id.clone(),
                            second: d.id.clone(),
                        });
                    }
                    clashing.insert(id);
                    continue;
                }
                devices.insert(
                    id.clone(),
                    Entry {
                        id,
                        cdi_name: format!("{}={name}", def.kind),
                        unhealthy: unhealthy.clone(),
                        placement: placement.clone(),
                        device: Arc::clone(&d),
                        present: true,
                    },
                );
            }
        }
        for id in &clashing {
            devices.remove(id);
        }
        if let Some(old) = previous.resources.get(&def.name) {
            for (id, e) in &old.devices {
                let held = allocated.contains(&(def.name.clone(), id.clone()));
                if held && !devices.contains_key(id) && !clashing.contains(id) {
                    devices.insert(
                        id.clone(),
                        Entry {
                            unhealthy: checks.judge(
                                &e.device.id,
                                vec![signals::Problem {
                                    code: Code::GoneWhileAllocated,
                                    detail: "gone from the host while allocated".into(),
                                }],
                            ),
                            present: false,
                            ..e.clone()
                        },
                    );
                }
            }
        }
        inventory.resources.insert(
            def.name.clone(),
            Resource {
                def: def.clone(),
                spec_file,
                devices,
                plan: plan.cloned(),
                withheld: None,
            },
        );
    }
    inventory.baseline = check.finish();
    (inventory, collisions)
}

/// Whether `d` is a GPU whose MIG devices the plan also offers.
fn split_into_mig(plan: &Planned, d: &Device) -> bool {
    d.nvidia.as_ref().is_some_and(|n| n.mig.is_none())
        && plan.devices.iter().any(|m| {
            m.nvidia
                .as_ref()
                .and_then(|n| n.mig.as_ref())
                .is_some_and(|mig| mig.parent == d.id)
        })
}

/// The steadiest CDI name the plan gives `d` alone (never `all`).
fn cdi_name(plan: &Planned, d: &Device) -> Option<String> {
    plan.named
        .iter()
        .filter(|n| n.ids.len() == 1 && n.ids.first() == Some(&d.id) && n.name != "all")
        .min_by_key(|n| n.stability)
        .map(|n| n.name.clone())
}

/// Why `d` cannot be used now: its first node missing from `/dev` or with
/// other numbers than the kernel's, and a PCI device with no driver bound.
pub fn health(root: &HostRoot, d: &Device) -> Vec<signals::Problem> {
    let mut out = Vec::new();
    let mut problem = |code, detail| out.push(signals::Problem { code, detail });
    for n in &d.nodes {
        match root.dev_entry(Path::new(&n.path)) {
            Ok(Some(e)) if e.kind == DevKind::Char || e.kind == DevKind::Block => {
                if (e.major, e.minor) != (n.major, n.minor) {
                    problem(
                        Code::DeviceNodeMismatch,
                        format!(
                            "{} is {}:{}, the kernel says {}:{}",
                            n.path, e.major, e.minor, n.major, n.minor
                        ),
                    );
                    break;
                }
            }
            Ok(Some(_)) => {
                problem(
                    Code::NotADeviceNode,
                    format!("{} is not a device node", n.path),
                );
                break;
            }
            Ok(None) => {
                problem(Code::DeviceNodeMissing, format!("{} is missing", n.path));
                break;
            }
            Err(e) => {
                problem(
                    Code::DeviceNodeUnreadable,
                    format!("{} cannot be read: {}", n.path, e.reason()),
                );
                break;
            }
        }
    }
    if d.pci.is_some() && d.driver.is_none() {
        problem(Code::NoDriverBound, "no driver is bound".into());
    }
    out
}

/// Why `d` is unhealthy: its [`health`], PCI signals ([`signals`]) and
/// vendor signals ([`signals::VendorHealth`]: NVIDIA XIDs), less what the
/// admin ignores.
fn judged(root: &HostRoot, d: &Device, check: &mut signals::Pass<'_>) -> Option<Unhealthy> {
    let mut problems = health(root, d);
    problems.extend(check.pci(root, d));
    problems.extend(check.checks().vendor_problems(d));
    check.checks().judge(&d.id, problems)
}

/// Where `d` sits: its NUMA node, its path below `/sys/devices` (that of
/// its PCI function when it is elsewhere: an AMD partition's GPU), its MIG
/// parent.
pub fn placement(d: &Device) -> Placement {
    let pci_path = d
        .pci_function
        .as_deref()
        .unwrap_or(&d.sysfs_path)
        .strip_prefix("/sys/devices/")
        .map(|p| {
            p.split('/')
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    Placement {
        numa: d.numa_node,
        pci_path,
        parent: d
            .nvidia
            .as_ref()
            .and_then(|n| n.mig.as_ref())
            .map(|m| m.parent.clone()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn vendor_resources_are_names_or_prefixes_of_another_domain() {
        assert_eq!(check_vendor_resource("nvidia.com/gpu"), Ok(()));
        assert_eq!(check_vendor_resource("nvidia.com/mig-*"), Ok(()));
        assert_eq!(check_vendor_resource("gpu.intel.com/*"), Ok(()));
        assert_eq!(
            check_vendor_resource("cdigen.io/nvidia"),
            Err("cdigen.io is cdigen's own domain".into())
        );
        assert_eq!(
            check_vendor_resource("nvidia.com/*-gpu"),
            Err("only a trailing * (a prefix) is a pattern".into())
        );
        assert_eq!(
            check_vendor_resource("gpu"),
            Err("it needs a domain: domain/name".into())
        );
    }

    use crate::model::{Node, NvidiaInfo, PciInfo};
    use crate::render::Named;

    const UUID: &str = "GPU-4a6a7a6c-5b1f-6d5a-9c3b-0e1f2a3b4c5d";

    /// A root whose `/dev` has `/dev/nvidia0` and `/dev/nvidia1` (195:0
    /// and 195:1) only.
    fn host() -> (tempfile::TempDir, HostRoot) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("dev.manifest"),
            "/dev/nvidia0 c 195:0 0666 0 0\n/dev/nvidia1 c 195:1 0666 0 0\n",
        )
        .unwrap();
        let root = HostRoot::open(dir.path()).unwrap();
        (dir, root)
    }

    /// An NVIDIA GPU at `addr` with `uuid` and `/dev/nvidia<minor>`.
    fn gpu(addr: &str, uuid: &str, minor: u32) -> Device {
        Device {
            backend: "nvidia".into(),
            id: addr.into(),
            sysfs_path: format!("/sys/devices/pci0000:00/{addr}"),
            bus: "pci".into(),
            pci: Some(PciInfo {
                address: addr.into(),
                vendor_id: "0x10de".into(),
                device_id: "0x2330".into(),
                subsystem_vendor_id: None,
                subsystem_device_id: None,
                class: "0x030200".into(),
                vendor_name: None,
                device_name: None,
                iommu_group: None,
            }),
            driver: Some("nvidia".into()),
            numa_node: Some(minor),
            nodes: vec![Node {
                role: "gpu".into(),
                name: format!("nvidia{minor}"),
                path: format!("/dev/nvidia{minor}"),
                node_type: "c".into(),
                major: 195,
                minor,
                host: None,
            }],
            nvidia: Some(NvidiaInfo {
                gpu_uuid: uuid.into(),
                minor,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// The nvidia generator's plan for `devices`: each named by its index
    /// and (stabler) its UUID, plus `all`.
    fn plan(devices: Vec<Device>) -> BTreeMap<String, Arc<Planned>> {
        let mut named = Vec::new();
        for (i, d) in devices.iter().enumerate() {
            named.push(Named {
                name: i.to_string(),
                ids: vec![d.id.clone()],
                stability: 5,
            });
            named.push(Named {
                name: d.nvidia.as_ref().unwrap().gpu_uuid.clone(),
                ids: vec![d.id.clone()],
                stability: 0,
            });
        }
        named.push(Named {
            name: "all".into(),
            ids: devices.iter().map(|d| d.id.clone()).collect(),
            stability: 9,
        });
        let p = Planned {
            generator: "nvidia".into(),
            file: "nvidia.com-gpu.yaml".into(),
            spec: None,
            bytes: Vec::new(),
            devinfo: Vec::new(),
            device_info: false,
            devices: devices.into_iter().map(Arc::new).collect(),
            named,
        };
        BTreeMap::from([("nvidia".to_string(), Arc::new(p))])
    }

    fn defs() -> Vec<ResourceDef> {
        vec![ResourceDef {
            name: "nvidia.com/gpu".into(),
            generator: "nvidia".into(),
            kind: "nvidia.com/gpu".into(),
            source: PathBuf::from("builtin:generators/nvidia.yaml"),
            replicas: 1,
            pool: false,
            register_empty: false,
            vendor_resources: Vec::new(),
        }]
    }

    /// (ID, CDI name, why unhealthy) of the resource's devices.
    fn listed(inv: &Inventory) -> Vec<(String, String, Option<String>)> {
        inv.resources["nvidia.com/gpu"]
            .devices
            .values()
            .map(|e| {
                let why = e.unhealthy.as_ref().map(ToString::to_string);
                (e.id.clone(), e.cdi_name.clone(), why)
            })
            .collect()
    }

    #[test]
    fn devices_get_their_id_the_steadiest_name_and_health() {
        let (_dir, root) = host();
        let other = "GPU-ffffffff-5b1f-6d5a-9c3b-0e1f2a3b4c5d";
        let mut renumbered = gpu("0000:43:00.0", "GPU-43", 1);
        renumbered.nodes[0].minor = 7;
        let mut unbound = gpu("0000:44:00.0", "GPU-44", 0);
        unbound.driver = None;
        let plans = plan(vec![
            gpu("0000:41:00.0", UUID, 0),
            gpu("0000:42:00.0", other, 2),
            renumbered,
            unbound,
        ]);
        let (inv, collisions) = build(
            &defs(),
            &plans,
            &root,
            Path::new("/cdi"),
            &Inventory::default(),
            &BTreeSet::new(),
        );
        assert!(collisions.is_empty());
        assert_eq!(
            listed(&inv),
            [
                (
                    "GPU-43".into(),
                    "nvidia.com/gpu=GPU-43".into(),
                    Some("/dev/nvidia1 is 195:1, the kernel says 195:7".into())
                ),
                (
                    "GPU-44".into(),
                    "nvidia.com/gpu=GPU-44".into(),
                    Some("no driver is bound".into())
                ),
                (UUID.into(), format!("nvidia.com/gpu={UUID}"), None),
                (
                    other.into(),
                    format!("nvidia.com/gpu={other}"),
                    Some("/dev/nvidia2 is missing".into())
                ),
            ]
        );
        let r = &inv.resources["nvidia.com/gpu"];
        assert_eq!(r.spec_file, Path::new("/cdi/nvidia.com-gpu.yaml"));
        assert!(!r.devices.contains_key("all"));
        assert_eq!(r.devices[UUID].placement.numa, Some(0));
    }

    #[test]
    fn entries_share_the_plans_devices() {
        let (_dir, root) = host();
        let plans = plan(vec![gpu("0000:41:00.0", UUID, 0)]);
        let (inv, _) = build(
            &defs(),
            &plans,
            &root,
            Path::new("/cdi"),
            &Inventory::default(),
            &BTreeSet::new(),
        );
        let entry = &inv.resources["nvidia.com/gpu"].devices[UUID];
        assert!(Arc::ptr_eq(&entry.device, &plans["nvidia"].devices[0]));
    }

    #[test]
    fn replicas_are_units_of_one_device_and_a_pool_offers_all() {
        let (_dir, root) = host();
        let plans = plan(vec![
            gpu("0000:41:00.0", UUID, 0),
            gpu("0000:42:00.0", "GPU-42", 1),
        ]);
        let shared = |pool: bool| ResourceDef {
            replicas: 3,
            pool,
            ..defs().remove(0)
        };
        let build_with = |def: ResourceDef| {
            let (inv, collisions) = build(
                &[def],
                &plans,
                &root,
                Path::new("/cdi"),
                &Inventory::default(),
                &BTreeSet::new(),
            );
            assert!(collisions.is_empty(), "{collisions:?}");
            inv
        };
        // Each device as three units, each unit its device's CDI name,
        // health and placement.
        let inv = build_with(shared(false));
        let units: Vec<(String, String, Option<String>)> = listed(&inv);
        let want = |id: &str, name: &str, why: Option<&str>| {
            (0..3)
                .map(|k| {
                    (
                        format!("{id}-{k}"),
                        name.to_string(),
                        why.map(str::to_string),
                    )
                })
                .collect::<Vec<_>>()
        };
        let mut expected = want("GPU-42", "nvidia.com/gpu=GPU-42", None);
        expected.extend(want(UUID, &format!("nvidia.com/gpu={UUID}"), None));
        assert_eq!(units, expected);
        let r = &inv.resources["nvidia.com/gpu"];
        assert_eq!(r.devices["GPU-42-2"].placement.numa, Some(1));
        assert!(Arc::ptr_eq(
            &r.devices["GPU-42-0"].device,
            &r.devices["GPU-42-1"].device
        ));
        // A pool: the `all` device, as three units, with both GPUs' nodes
        // and no NUMA node (they are on two).
        let inv = build_with(shared(true));
        assert_eq!(
            listed(&inv),
            (0..3)
                .map(|k| (format!("all-{k}"), "nvidia.com/gpu=all".to_string(), None))
                .collect::<Vec<_>>()
        );
        let pool = &inv.resources["nvidia.com/gpu"].devices["all-0"];
        let nodes: Vec<&str> = pool.device.nodes.iter().map(|n| n.path.as_str()).collect();
        assert_eq!(nodes, ["/dev/nvidia0", "/dev/nvidia1"]);
        assert_eq!(pool.placement.numa, None);
        assert!(pool.device.pci.is_none() && pool.device.net.is_none());
        // A member that cannot be used makes every unit unhealthy.
        let plans = plan(vec![
            gpu("0000:41:00.0", UUID, 0),
            gpu("0000:42:00.0", "GPU-42", 2),
        ]);
        let (inv, _) = build(
            &[shared(true)],
            &plans,
            &root,
            Path::new("/cdi"),
            &Inventory::default(),
            &BTreeSet::new(),
        );
        let why = inv.resources["nvidia.com/gpu"].devices["all-1"]
            .unhealthy
            .as_ref()
            .map(ToString::to_string);
        assert_eq!(
            why.as_deref(),
            Some("0000:42:00.0: /dev/nvidia2 is missing")
        );
    }

    #[test]
    fn unit_ids_never_collide() {
        assert_eq!(unit_id("0000:3b:00.0", 0, 1), "0000:3b:00.0");
        assert_eq!(unit_id("0000:3b:00.0", 7, 10), "0000:3b:00.0-7");
        // `a`'s unit 10 and `a-1`'s unit 0 differ: the unit number has no `-`.
        assert_ne!(unit_id("a", 10, 20), unit_id("a-1", 0, 20));
        let long = "x".repeat(63);
        let (a, b) = (unit_id(&long, 1, 2), unit_id(&long, 0, 2));
        assert!(a.len() <= ids::MAX_LEN && a != b, "{a} {b}");
    }

    #[test]
    fn colliding_ids_are_reported_and_neither_device_is_advertised() {
        let (_dir, root) = host();
        // Two GPUs that report one UUID (a broken driver state), and a
        // third that is fine.
        let plans = plan(vec![
            gpu("0000:41:00.0", UUID, 0),
            gpu("0000:42:00.0", UUID, 1),
            gpu("0000:43:00.0", "GPU-43", 1),
        ]);
        let (inv, collisions) = build(
            &defs(),
            &plans,
            &root,
            Path::new("/cdi"),
            &Inventory::default(),
            &BTreeSet::new(),
        );
        assert_eq!(
            collisions,
            [Error::IdCollision {
                generator: "nvidia".into(),
                file: PathBuf::from("builtin:generators/nvidia.yaml"),
                id: UUID.into(),
                first: "0000:41:00.0".into(),
                second: "0000:42:00.0".into(),
            }]
        );
        assert_eq!(
            collisions[0].to_string(),
            format!(
                "generator nvidia (builtin:generators/nvidia.yaml): devices 0000:41:00.0 and \
                 0000:42:00.0 would both have device plugin ID \"{UUID}\""
            )
        );
        let ids: Vec<String> = listed(&inv).into_iter().map(|(id, _, _)| id).collect();
        assert_eq!(ids, ["GPU-43"]);

        // A third device with the ID: one more collision, still neither.
        let plans = plan(vec![
            gpu("0000:41:00.0", UUID, 0),
            gpu("0000:42:00.0", UUID, 1),
            gpu("0000:43:00.0", UUID, 1),
        ]);
        let allocated = BTreeSet::from([("nvidia.com/gpu".to_string(), UUID.to_string())]);
        let (inv, collisions) = build(&defs(), &plans, &root, Path::new("/cdi"), &inv, &allocated);
        assert_eq!(collisions.len(), 2);
        assert!(listed(&inv).is_empty(), "{:?}", listed(&inv));
    }

    #[test]
    fn a_device_gone_while_allocated_stays_unhealthy_until_released() {
        let (_dir, root) = host();
        let both = plan(vec![
            gpu("0000:41:00.0", UUID, 0),
            gpu("0000:43:00.0", "GPU-43", 1),
        ]);
        let (before, _) = build(
            &defs(),
            &both,
            &root,
            Path::new("/cdi"),
            &Inventory::default(),
            &BTreeSet::new(),
        );
        let one = plan(vec![gpu("0000:43:00.0", "GPU-43", 1)]);
        let held = BTreeSet::from([("nvidia.com/gpu".to_string(), UUID.to_string())]);
        let (gone, _) = build(&defs(), &one, &root, Path::new("/cdi"), &before, &held);
        assert_eq!(
            listed(&gone),
            [
                ("GPU-43".into(), "nvidia.com/gpu=GPU-43".into(), None),
                (
                    UUID.into(),
                    format!("nvidia.com/gpu={UUID}"),
                    Some("gone from the host while allocated".into())
                ),
            ]
        );
        assert!(!gone.resources["nvidia.com/gpu"].devices[UUID].present);
        // Still held on the next pass; dropped once released.
        let (again, _) = build(&defs(), &one, &root, Path::new("/cdi"), &gone, &held);
        assert_eq!(again, gone);
        let (released, _) = build(
            &defs(),
            &one,
            &root,
            Path::new("/cdi"),
            &gone,
            &BTreeSet::new(),
        );
        assert_eq!(listed(&released).len(), 1);
        // Not allocated: simply gone.
        let (dropped, _) = build(
            &defs(),
            &one,
            &root,
            Path::new("/cdi"),
            &before,
            &BTreeSet::new(),
        );
        assert_eq!(listed(&dropped).len(), 1);
    }

    #[test]
    fn resources_default_to_cdigens_own_domain() {
        assert_eq!(default_resource("sriov", "cdigen.io/vf"), "cdigen.io/vf");
        assert_eq!(
            default_resource("nvidia", "nvidia.com/gpu"),
            "cdigen.io/nvidia"
        );
        assert_eq!(
            default_resource("amd-gpu", "amd.com/gpu"),
            "cdigen.io/amd-gpu"
        );
        assert_eq!(
            default_resource("gaudi", "intel.com/gaudi"),
            "cdigen.io/gaudi"
        );
        let all = crate::generator::load(&[]).unwrap();
        let names: Vec<String> = resources(&all)
            .unwrap()
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert!(
            names.iter().all(|n| n.starts_with("cdigen.io/")),
            "{names:?}"
        );
        // A definition's vendor resource that names none is refused,
        // naming the generator and its file.
        let mut bad = all.clone();
        let nvidia = bad
            .iter_mut()
            .find(|l| l.generator.name == "nvidia")
            .unwrap();
        nvidia.generator.device_plugin.vendor_resources = vec!["cdigen.io/*".into()];
        let source = nvidia.source.display().to_string();
        assert_eq!(
            resources(&bad).unwrap_err().to_string(),
            format!(
                "generator nvidia ({source}): device_plugin.vendor_resources: \"cdigen.io/*\" is not \
                 another plugin's resource name: cdigen.io is cdigen's own domain (list names like \
                 nvidia.com/gpu, or nvidia.com/mig-* for a prefix)"
            )
        );
    }

    #[test]
    fn resource_names_follow_the_kubelet() {
        for ok in [
            "cdigen.io/vf",
            "amd.com/gpu",
            "nvidia.com/mig-1g.10gb",
            "a.b/C_d.e-9",
        ] {
            assert_eq!(check_resource_name(ok), Ok(()), "{ok}");
        }
        for (bad, why) in [
            ("gpu", "it needs a domain: domain/name"),
            ("a/b/c", "it has more than one '/'"),
            (
                "kubernetes.io/gpu",
                "the kubernetes.io domain is Kubernetes' own",
            ),
            (
                "x.kubernetes.io/gpu",
                "the kubernetes.io domain is Kubernetes' own",
            ),
            ("requests.x/gpu", "it must not start with \"requests.\""),
            (
                "Vendor.com/gpu",
                "domain label \"Vendor\" must be 1-63 characters of a-z 0-9 -, not starting or ending with -",
            ),
            (
                "vendor.com/-gpu",
                "\"-gpu\" must be 1-63 characters of A-Z a-z 0-9 - _ ., starting and ending with a letter or digit",
            ),
            ("/gpu", "the domain must be 1 to 244 characters"),
        ] {
            assert_eq!(check_resource_name(bad), Err(why.to_string()), "{bad}");
        }
        let long = format!("vendor.com/{}", "g".repeat(64));
        assert!(check_resource_name(&long).is_err());
    }
}

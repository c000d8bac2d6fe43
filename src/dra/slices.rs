//! The ResourceSlices of a node: its devices ([`super::names`]) in one
//! pool named after the node, with their attributes, capacities and
//! taints, chunked to the API's limits.
//!
//! What a device publishes ([`attributes`], [`capacity`]), highest
//! priority first; a device keeps the first [`MAX_PROPERTIES`] of them
//! that it has (the API's limit on attributes plus capacities), and a
//! string value longer than [`MAX_STRING`] is left out (never cut short):
//!
//! 1. the standard attributes, `resource.kubernetes.io/pciBusID`,
//!    `pcieRoot` and `numaNode` (omitted when the kernel says -1), of the
//!    PCI function the device is or is part of
//!    ([`Model::pci_function_path`]: an AMD partition's GPU, a vDPA
//!    device's VF, the nearest PCI function above a generic device);
//! 2. what cdigen knows it as: `kind` (the CDI kind), `cdiName` (its name
//!    in that kind), `resource`, `generator`, `class`, `backend`,
//!    `healthy`; for a shared device (`device_plugin.replicas` above 1,
//!    `allowMultipleAllocations`), the consumable capacity `shares`
//!    ([`shares_capacity`]);
//! 3. what it is: `vendorID`, `deviceID`, `driver`, `model`, `vendor`,
//!    `uuid`;
//! 4. for a MIG device: `parentUUID`, `migProfile`, and the capacities
//!    `memory` and `computeSlices` read from the profile;
//! 5. for a network device: `pfName`, `pfPCIAddress`, `vfIndex`,
//!    `netdev`, `linkType`, `rdmaDevice`, `representor`; and for a VF,
//!    vDPA or RDMA device on PCI, what Multus reads in its DRA mode (as
//!    SR-IOV's DRA driver publishes it): `k8s.cni.cncf.io/resourceName`
//!    (the device plugin resource, `cdigen.io/vf`: a
//!    NetworkAttachmentDefinition's `k8s.v1.cni.cncf.io/resourceName`
//!    names it) and `k8s.cni.cncf.io/deviceID` (the PCI address, which
//!    Multus hands the CNI plugin);
//! 6. `nodeKinds` (the roles of its device nodes, NVIDIA's control nodes
//!    left out, comma-separated) and `devNode` (its first node);
//! 7. what its generator definition exposes (`attrs`: a USB adapter's
//!    `serial`, `idVendor`, ...; an AMD partition's `compute_partition`),
//!    each under its own name when that is an attribute name and not one
//!    of the above;
//! 8. `subsystem`, `iommuGroup`, `vfioMode`, `vdpaName`, `vdpaDriver`,
//!    `driverVersion`, `pciClass`, `subsystemVendorID`,
//!    `subsystemDeviceID`.
//!
//! Unqualified names are under the driver's domain in CEL:
//! `device.attributes["dra.cdigen.io"].pfName`.
//!
//! An unhealthy device keeps its place and gets a taint per reason
//! ([`unhealthy_taints`]); a pool with a tainted device is chunked at
//! [`MAX_DEVICES_WITH_TAINTS`] devices per slice, otherwise at
//! [`MAX_DEVICES`].
//!
//! The slices' owner, the node's `Node` ([`node_owner`]), is the
//! publisher's to add ([`super::publish`]): it needs the Node's UID from
//! the API server, so `--print-slices`, offline, prints slices without it.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{
    CapacityRequestPolicy, CapacityRequestPolicyRange, Counter, CounterSet, Device,
    DeviceAttribute, DeviceCapacity, DeviceCounterConsumption, DeviceTaint, ResourcePool,
    ResourceSlice, ResourceSliceSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use sha2::{Digest, Sha256};

use super::names::DraDevice;
use crate::deviceplugin::signals::Unhealthy;
use crate::model::{Device as Model, NVIDIA_CONTROL_ROLES};

/// The API's limit on devices per slice.
pub const MAX_DEVICES: usize = 128;

/// The API's limit on devices per slice when a device of it has taints.
pub const MAX_DEVICES_WITH_TAINTS: usize = 64;

/// The API's limit on a device's attributes and capacities together.
pub const MAX_PROPERTIES: usize = 32;

/// The API's limit on a device's taints.
pub const MAX_TAINTS: usize = 16;

/// The API's limit on a string attribute's length.
pub const MAX_STRING: usize = 64;

/// The API's limit on an attribute name (a C identifier, before the
/// domain).
pub const MAX_ATTRIBUTE_NAME: usize = 32;

/// The API's limit on a driver name (a DNS subdomain).
pub const MAX_DRIVER_NAME: usize = 63;

/// The API's limit on a DNS subdomain (a node name, a slice name).
pub const MAX_SUBDOMAIN: usize = 253;

/// The domain of the standard attributes.
pub const STANDARD_DOMAIN: &str = "resource.kubernetes.io";

/// The domain of the attributes Multus reads from a network device.
pub const CNI_DOMAIN: &str = "k8s.cni.cncf.io";

/// One attribute or capacity a device publishes.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Attr(DeviceAttribute),
    Cap(Quantity),
    /// A capacity claims consume ([`shares_capacity`]).
    Consumable(DeviceCapacity),
}

fn text(s: &str) -> Value {
    Value::Attr(DeviceAttribute {
        string: Some(s.to_string()),
        ..DeviceAttribute::default()
    })
}

fn int(i: i64) -> Value {
    Value::Attr(DeviceAttribute {
        int: Some(i),
        ..DeviceAttribute::default()
    })
}

fn boolean(b: bool) -> Value {
    Value::Attr(DeviceAttribute {
        bool: Some(b),
        ..DeviceAttribute::default()
    })
}

/// The candidates of a device, in priority order, before the limits.
struct Candidates {
    out: Vec<(String, Value)>,
}

impl Candidates {
    fn push(&mut self, name: &str, v: Value) {
        if self.out.iter().any(|(n, _)| n == name) {
            return;
        }
        self.out.push((name.to_string(), v));
    }
    fn string(&mut self, name: &str, v: Option<&str>) {
        if let Some(v) = v.filter(|v| !v.is_empty()) {
            self.push(name, text(v));
        }
    }
}

/// Every attribute and capacity `d` has, in priority order (see the
/// [module docs](self)), before the limits.
fn candidates(d: &DraDevice) -> Vec<(String, Value)> {
    let m: &Model = &d.entry.device;
    let mut c = Candidates { out: Vec::new() };
    // 1. Standard.
    let bus_id = pci_bus_id(m);
    c.string(&format!("{STANDARD_DOMAIN}/pciBusID"), bus_id);
    if bus_id.is_some() {
        c.string(
            &format!("{STANDARD_DOMAIN}/pcieRoot"),
            m.pci_function_path().and_then(pcie_root),
        );
    }
    if let Some(n) = m.numa_node.or(d.entry.placement.numa) {
        c.push(&format!("{STANDARD_DOMAIN}/numaNode"), int(i64::from(n)));
    }
    // 2. cdigen's names.
    c.string("kind", Some(&d.kind));
    let cdi = d.entry.cdi_name.split_once('=').map(|(_, n)| n);
    c.string("cdiName", cdi);
    c.string("resource", Some(&d.resource));
    c.string("generator", Some(&d.generator));
    c.string("class", Some(class(m)));
    c.string("backend", Some(&m.backend));
    c.push("healthy", boolean(d.entry.healthy()));
    if d.shared {
        c.push(SHARES, Value::Consumable(shares_capacity(d.shares)));
    }
    // 3. Identity.
    let pci = m.pci.as_ref();
    c.string("vendorID", pci.map(|p| p.vendor_id.as_str()));
    c.string("deviceID", pci.map(|p| p.device_id.as_str()));
    c.string("driver", m.driver.as_deref());
    let nv = m.nvidia.as_ref();
    let model = nv
        .map(|n| n.model.as_str())
        .filter(|s| !s.is_empty())
        .or_else(|| pci.and_then(|p| p.device_name.as_deref()));
    c.string("model", model);
    c.string("vendor", pci.and_then(|p| p.vendor_name.as_deref()));
    let mig = nv.and_then(|n| n.mig.as_ref());
    c.string("uuid", m.any_uuid());
    // 4. MIG.
    if let Some(mig) = mig {
        c.string("parentUUID", nv.map(|n| n.gpu_uuid.as_str()));
        c.string("migProfile", mig.profile.as_deref());
        if let Some((slices, gib)) = mig.profile.as_deref().and_then(mig_profile) {
            c.push("memory", Value::Cap(Quantity(format!("{gib}Gi"))));
            c.push("computeSlices", Value::Cap(Quantity(slices.to_string())));
        }
    }
    // 5. Network.
    let net = m.net.as_ref();
    c.string("pfName", net.and_then(|n| n.pf_netdev.as_deref()));
    c.string("pfPCIAddress", net.and_then(|n| n.pf.as_deref()));
    if let Some(i) = net.and_then(|n| n.vf_index) {
        c.push("vfIndex", int(i64::from(i)));
    }
    let netdev = net
        .and_then(|n| n.netdevs.first())
        .or_else(|| m.vdpa.as_ref().and_then(|v| v.netdev.as_ref()));
    c.string("netdev", netdev.map(String::as_str));
    c.string("linkType", net.and_then(|n| n.link_type.as_deref()));
    let rdma = net
        .and_then(|n| n.rdma_devices.first())
        .or_else(|| m.rdma.as_ref().map(|r| &r.name));
    c.string("rdmaDevice", rdma.map(String::as_str));
    c.string("representor", net.and_then(|n| n.representor.as_deref()));
    if net.is_some() || m.vdpa.is_some() || m.rdma.is_some() {
        // What Multus reads from a claim's network device (its DRA mode):
        // the name a NetworkAttachmentDefinition's resourceName annotation
        // gives, and the device ID it hands the CNI plugin, as SR-IOV's
        // device plugin and DRA driver give them.
        if let Some(id) = bus_id {
            c.string(&format!("{CNI_DOMAIN}/resourceName"), Some(&d.resource));
            c.string(&format!("{CNI_DOMAIN}/deviceID"), Some(id));
        }
    }
    // 6. Nodes.
    c.string("nodeKinds", node_kinds(m).as_deref());
    let first = m
        .nodes
        .iter()
        .find(|n| !NVIDIA_CONTROL_ROLES.contains(&n.role.as_str()));
    c.string("devNode", first.map(|n| n.path.as_str()));
    // 7. What the definition exposes.
    for (k, v) in &m.attrs {
        if is_attribute_name(k) {
            c.string(k, Some(v));
        } else {
            tracing::debug!(
                "DRA device {}: {k:?} is not an attribute name; not published",
                d.name
            );
        }
    }
    // 8. The rest.
    c.string(
        "subsystem",
        m.generic.as_ref().map(|g| g.subsystem.as_str()),
    );
    let group = m
        .vfio
        .as_ref()
        .map(|v| v.group.as_str())
        .or_else(|| pci.and_then(|p| p.iommu_group.as_deref()));
    c.string("iommuGroup", group);
    c.string("vfioMode", m.vfio.as_ref().map(|v| v.mode.as_str()));
    c.string("vdpaName", m.vdpa.as_ref().map(|v| v.name.as_str()));
    c.string(
        "vdpaDriver",
        m.vdpa.as_ref().and_then(|v| v.driver.as_deref()),
    );
    c.string(
        "driverVersion",
        nv.and_then(|n| n.driver_version.as_deref()),
    );
    c.string("pciClass", pci.map(|p| p.class.as_str()));
    c.string(
        "subsystemVendorID",
        pci.and_then(|p| p.subsystem_vendor_id.as_deref()),
    );
    c.string(
        "subsystemDeviceID",
        pci.and_then(|p| p.subsystem_device_id.as_deref()),
    );
    c.out
}

/// The capacity a shared device's claims consume, one share each unless
/// a request asks for more (KEP-5075).
pub const SHARES: &str = "shares";

/// A shared device's [`SHARES`] capacity: `shares` (its pool's
/// `device_plugin.replicas`, the device plugin's units), of which a claim
/// takes 1 by default and any whole number up to all of them, so that at
/// most `shares` claims hold it at once, as at most `shares` containers
/// hold its device plugin units. A device with fewer than 2 shares is not
/// shared and has none (the API wants min + step within the value).
pub fn shares_capacity(shares: u32) -> DeviceCapacity {
    let one = || Quantity("1".into());
    DeviceCapacity {
        value: Quantity(shares.to_string()),
        request_policy: Some(CapacityRequestPolicy {
            default: Some(one()),
            valid_range: Some(CapacityRequestPolicyRange {
                min: one(),
                max: None,
                step: Some(one()),
            }),
            valid_values: None,
        }),
    }
}

/// What `d` publishes: its [`candidates`] without the string values over
/// [`MAX_STRING`] (each said in a debug log), the first
/// [`MAX_PROPERTIES`] of them.
fn properties(d: &DraDevice) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (name, v) in candidates(d) {
        if let Value::Attr(DeviceAttribute {
            string: Some(s), ..
        }) = &v
            && s.len() > MAX_STRING
        {
            tracing::debug!(
                "DRA device {}: {name} is {} characters, over the API's {MAX_STRING}; not published: {s:?}",
                d.name,
                s.len()
            );
            continue;
        }
        if out.len() == MAX_PROPERTIES {
            tracing::debug!(
                "DRA device {}: {name} left out: {MAX_PROPERTIES} attributes and capacities already",
                d.name
            );
            continue;
        }
        out.push((name, v));
    }
    out
}

/// The attributes `d` publishes (see the [module docs](self)): what a
/// DeviceClass selects on, and what a claim's metadata carries.
pub fn attributes(d: &DraDevice) -> BTreeMap<String, DeviceAttribute> {
    properties(d)
        .into_iter()
        .filter_map(|(n, v)| match v {
            Value::Attr(a) => Some((n, a)),
            Value::Cap(_) | Value::Consumable(_) => None,
        })
        .collect()
}

/// The capacities `d` publishes: a shared device's `shares`, a MIG
/// device's `memory` and `computeSlices` (from its profile); none for
/// other devices, whose memory cdigen does not know.
pub fn capacity(d: &DraDevice) -> BTreeMap<String, DeviceCapacity> {
    properties(d)
        .into_iter()
        .filter_map(|(n, v)| match v {
            Value::Cap(q) => Some((
                n,
                DeviceCapacity {
                    value: q,
                    ..DeviceCapacity::default()
                },
            )),
            Value::Consumable(c) => Some((n, c)),
            Value::Attr(_) => None,
        })
        .collect()
}

/// The PCI address of `m` (extended BDF), or of the function a vDPA
/// device lives on, or of the nearest PCI function above it in sysfs (a
/// generic device's: the USB controller of a serial adapter).
fn pci_bus_id(m: &Model) -> Option<&str> {
    m.pci
        .as_ref()
        .map(|p| p.address.as_str())
        .or_else(|| m.vdpa.as_ref().and_then(|v| v.pci_address.as_deref()))
        .or_else(|| {
            let f = m.pci_function_path()?;
            f.rsplit_once('/').map(|(_, bdf)| bdf)
        })
}

/// The PCIe root of a device at `sysfs_path`: the first component below
/// `/sys/devices` when it is a host bridge, `pci<domain>:<bus>`
/// (`pci0000:3a`).
pub fn pcie_root(sysfs_path: &str) -> Option<&str> {
    let first = sysfs_path
        .strip_prefix("/sys/devices/")?
        .split('/')
        .next()?;
    let (domain, bus) = first.strip_prefix("pci")?.split_once(':')?;
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    (hex(domain, 4) && hex(bus, 2)).then_some(first)
}

/// What kind of device `m` is, in one word: `mig`, `gpu` (a GPU, or a
/// PCI display controller), `vdpa`, `vf` (a VF, whatever driver it is
/// bound to: `vfioMode` says when that is VFIO), `vfio` (another device
/// bound to VFIO), `rdma`, `accel` (a PCI processing accelerator), `net`
/// (another PCI network controller), for a generic device its subsystem
/// (`tty`), else its backend.
pub fn class(m: &Model) -> &str {
    if let Some(n) = &m.nvidia {
        if n.mig.is_some() {
            return "mig";
        }
        if m.pci.is_some() {
            return "gpu";
        }
    }
    if m.backend == "vdpa" {
        return "vdpa";
    }
    if m.net.as_ref().is_some_and(|n| n.pf.is_some()) {
        return "vf";
    }
    if m.vfio.is_some() {
        return "vfio";
    }
    if m.rdma.is_some() {
        return "rdma";
    }
    if let Some(p) = &m.pci {
        let base = p.class.trim_start_matches("0x").get(..2).unwrap_or("");
        match base {
            "03" => return "gpu",
            "12" => return "accel",
            "02" => return "net",
            _ => {}
        }
    }
    if let Some(g) = &m.generic {
        return &g.subsystem;
    }
    &m.backend
}

/// The roles of `m`'s device nodes, each once, in node order, NVIDIA's
/// control nodes left out: `primary,render`.
fn node_kinds(m: &Model) -> Option<String> {
    let mut roles: Vec<&str> = Vec::new();
    for n in &m.nodes {
        let r = n.role.as_str();
        if !NVIDIA_CONTROL_ROLES.contains(&r) && !roles.contains(&r) {
            roles.push(r);
        }
    }
    (!roles.is_empty()).then(|| roles.join(","))
}

/// A MIG profile's compute slices and memory in GiB: `3g.40gb` → (3, 40);
/// `1g.10gb+me` → (1, 10).
fn mig_profile(profile: &str) -> Option<(u32, u32)> {
    let (g, rest) = profile.split_once("g.")?;
    let gb = rest.split('+').next()?.strip_suffix("gb")?;
    Some((g.parse().ok()?, gb.parse().ok()?))
}

/// Whether `name` is an unqualified attribute name: a C identifier of at
/// most [`MAX_ATTRIBUTE_NAME`] characters.
pub fn is_attribute_name(name: &str) -> bool {
    let mut b = name.bytes();
    b.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
        && name.len() <= MAX_ATTRIBUTE_NAME
}

/// The taints of an unhealthy device: for each of its reasons' codes
/// ([`Code`]), once, key `<driver>/unhealthy`, value the code, effect the
/// code's ([`Code::effect`]: `NoExecute` for a fatal PCIe error, else
/// `NoSchedule`); the whole reason is in the log and the health stream.
/// One per code (a device has far fewer than [`MAX_TAINTS`]: one node
/// problem, the PCI signals, at most [`crate::deviceplugin::xid::MAX_XIDS`]
/// XIDs), cut to the API's limit all the same.
pub fn unhealthy_taints(driver: &str, why: &Unhealthy) -> Vec<DeviceTaint> {
    why.codes()
        .into_iter()
        .take(MAX_TAINTS)
        .map(|code| DeviceTaint {
            key: format!("{driver}/unhealthy"),
            value: Some(code.as_str().to_string()),
            effect: code.effect().as_str().into(),
            time_added: None,
        })
        .collect()
}

/// The API's Device for `d`.
pub fn device(d: &DraDevice, driver: &str) -> Device {
    let props = properties(d);
    let attributes: BTreeMap<String, DeviceAttribute> = props
        .iter()
        .filter_map(|(n, v)| match v {
            Value::Attr(a) => Some((n.clone(), a.clone())),
            Value::Cap(_) | Value::Consumable(_) => None,
        })
        .collect();
    let capacity: BTreeMap<String, DeviceCapacity> = props
        .into_iter()
        .filter_map(|(n, v)| match v {
            Value::Cap(q) => Some((
                n,
                DeviceCapacity {
                    value: q,
                    ..DeviceCapacity::default()
                },
            )),
            Value::Consumable(c) => Some((n, c)),
            Value::Attr(_) => None,
        })
        .collect();
    let taints = d.entry.unhealthy.as_ref().map(|why| {
        tracing::debug!("DRA device {} is unhealthy: {why}", d.name);
        unhealthy_taints(driver, why)
    });
    Device {
        name: d.name.clone(),
        attributes: (!attributes.is_empty()).then_some(attributes),
        capacity: (!capacity.is_empty()).then_some(capacity),
        allow_multiple_allocations: d.shared.then_some(true),
        taints,
        ..Device::default()
    }
}

/// The API's limit on counter sets per slice.
pub const MAX_COUNTER_SETS: usize = 8;

/// Counters in whole units and their unit suffix (`""`, `"Gi"`).
type Share = BTreeMap<String, (i64, &'static str)>;

/// What one partition of a GPU takes of its GPU's counters: the GPU's
/// identity (its PCI address) and the counters.
fn partition_share(m: &Model) -> Option<(String, Share)> {
    let mut out = BTreeMap::new();
    if let Some(mig) = m.nvidia.as_ref().and_then(|n| n.mig.as_ref()) {
        // A MIG device: its profile's compute slices and memory.
        let (slices, gib) = mig.profile.as_deref().and_then(mig_profile)?;
        out.insert("compute-slices".to_string(), (i64::from(slices), ""));
        out.insert("memory".to_string(), (i64::from(gib), "Gi"));
        return Some((mig.parent.clone(), out));
    }
    // An AMD compute partition: one of the partitions of a mode that has
    // several; in CPX, one per XCD.
    let mode = m.attrs.get("compute_partition")?;
    m.attrs.get("partition")?;
    if mode == "SPX" {
        return None;
    }
    out.insert("partitions".to_string(), (1, ""));
    if mode == "CPX" {
        out.insert("xcds".to_string(), (1, ""));
    }
    Some((m.pci.as_ref()?.address.clone(), out))
}

/// The shared counters of the pool's partitioned GPUs (KEP-4815), and
/// what each of `devices` consumes of them, by index. A GPU's counter set
/// (`gpu-<address>`) holds what its partitions take together: an AMD
/// GPU's `partitions` (and in CPX `xcds`: one partition per XCD), a MIG
/// GPU's `compute-slices` and `memory` (from the profiles, only when NVML
/// named every MIG device's). The partitions are the ones that exist,
/// disjoint, and the whole GPU is not offered beside them (MIG mode or a
/// partition mode makes it unusable as one device), so the counters
/// describe the split without constraining the existing partitions;
/// dynamic partitioning would add the whole GPU, consuming all.
pub fn counters(
    devices: &[DraDevice],
) -> (Vec<CounterSet>, BTreeMap<usize, DeviceCounterConsumption>) {
    let mut groups: BTreeMap<String, Vec<(usize, Option<Share>)>> = BTreeMap::new();
    for (i, d) in devices.iter().enumerate() {
        let m = &d.entry.device;
        if let Some(mig) = m.nvidia.as_ref().and_then(|n| n.mig.as_ref()) {
            let share = partition_share(m).map(|(_, s)| s);
            groups
                .entry(mig.parent.clone())
                .or_default()
                .push((i, share));
        } else if let Some((gpu, share)) = partition_share(m) {
            groups.entry(gpu).or_default().push((i, Some(share)));
        }
    }
    let mut sets = Vec::new();
    let mut uses = BTreeMap::new();
    for (gpu, members) in groups {
        if members.iter().any(|(_, s)| s.is_none()) {
            continue;
        }
        let name = super::names::label(&format!("gpu-{gpu}"));
        let mut total = Share::new();
        for (i, share) in members.into_iter().filter_map(|(i, s)| Some((i, s?))) {
            for (k, (n, unit)) in &share {
                let t = total.entry(k.clone()).or_insert((0, unit));
                t.0 = t.0.saturating_add(*n);
            }
            uses.insert(
                i,
                DeviceCounterConsumption {
                    counter_set: name.clone(),
                    counters: quantities(&share),
                },
            );
        }
        sets.push(CounterSet {
            name,
            counters: quantities(&total),
        });
    }
    (sets, uses)
}

fn quantities(share: &Share) -> BTreeMap<String, Counter> {
    share
        .iter()
        .map(|(k, (n, unit))| {
            (
                k.clone(),
                Counter {
                    value: Quantity(format!("{n}{unit}")),
                },
            )
        })
        .collect()
}

/// The slices publishing `devices` for `node`, pool generation
/// `generation`: at least one (an empty pool says the node has none), at
/// most [`MAX_DEVICES`] devices each, [`MAX_DEVICES_WITH_TAINTS`] when
/// one of the pool's devices is unhealthy or consumes counters; then the
/// pool's shared [`counters`], [`MAX_COUNTER_SETS`] per slice, in slices
/// without devices (the API allows one or the other). The order of
/// `devices` is kept.
pub fn slices(
    devices: &[DraDevice],
    driver: &str,
    node: &str,
    generation: i64,
) -> Vec<ResourceSlice> {
    slices_since(devices, None, driver, node, generation, |_| false)
        .0
        .into_iter()
        .filter_map(|(_, s)| s)
        .collect()
}

/// How many devices each slice of `devices` holds ([`slices`]).
fn devices_per_slice(
    devices: &[DraDevice],
    uses: &BTreeMap<usize, DeviceCounterConsumption>,
) -> usize {
    if !uses.is_empty() || devices.iter().any(|d| d.entry.unhealthy.is_some()) {
        MAX_DEVICES_WITH_TAINTS
    } else {
        MAX_DEVICES
    }
}

/// Which devices each slice of a pool holds, by name, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Layout {
    /// The most devices a slice holds.
    per_slice: usize,
    /// The devices' names of each slice with devices, in order.
    slices: Vec<Vec<String>>,
    /// How many slices the pool has (with those of counter sets).
    count: i64,
    /// Whether the pool had counters (its devices were laid out in order).
    counters: bool,
}

/// Where each device of `devices` goes when the pool was laid out as
/// `before` (indexes into `devices`, per slice, each in the order of
/// `devices`): a device stays in its slice; a new one goes to the slice
/// of the device before it in `devices` (or else after it) when that has
/// room, as a device that comes back goes back where it was, else to the
/// first slice with room, else to a new one at the end; a slice left
/// empty stays (an empty slice is valid), but not at the end. `None` when
/// `before` holds another number of devices per slice than `per_slice`.
fn sticky(devices: &[DraDevice], before: &Layout, per_slice: usize) -> Option<Vec<Vec<usize>>> {
    if before.per_slice != per_slice || per_slice == 0 {
        return None;
    }
    let by_name: std::collections::HashMap<&str, usize> = devices
        .iter()
        .enumerate()
        .map(|(i, d)| (d.name.as_str(), i))
        .collect();
    // The slice of each device placed.
    let mut slot: Vec<Option<usize>> = vec![None; devices.len()];
    let mut sizes: Vec<usize> = vec![0; before.slices.len()];
    for (k, names) in before.slices.iter().enumerate() {
        for n in names {
            if let Some(&i) = by_name.get(n.as_str())
                && let Some(s) = slot.get_mut(i)
                && s.is_none()
            {
                *s = Some(k);
                if let Some(size) = sizes.get_mut(k) {
                    *size += 1;
                }
            }
        }
    }
    for i in 0..devices.len() {
        if slot.get(i).copied().flatten().is_some() {
            continue;
        }
        let room = |k: usize| sizes.get(k).is_some_and(|&n| n < per_slice);
        let before_it = (0..i).rev().find_map(|j| slot.get(j).copied().flatten());
        let after_it = (i + 1..devices.len()).find_map(|j| slot.get(j).copied().flatten());
        let k = before_it
            .filter(|&k| room(k))
            .or_else(|| after_it.filter(|&k| room(k)))
            .or_else(|| sizes.iter().position(|&n| n < per_slice))
            .unwrap_or_else(|| {
                sizes.push(0);
                sizes.len() - 1
            });
        if let Some(size) = sizes.get_mut(k) {
            *size += 1;
        }
        if let Some(s) = slot.get_mut(i) {
            *s = Some(k);
        }
    }
    while sizes.len() > 1 && sizes.last() == Some(&0) {
        sizes.pop();
    }
    let mut placed: Vec<Vec<usize>> = sizes.iter().map(|&n| Vec::with_capacity(n)).collect();
    for (i, k) in slot.iter().enumerate() {
        if let Some(p) = k.and_then(|k| placed.get_mut(k)) {
            p.push(i);
        }
    }
    Some(placed)
}

/// [`slices`], by name, with `None` for each slice that says what it
/// said before and that `had` says is still held. `before` is the pool's
/// layout and devices when the slices were last made: its devices stay in
/// their slices ([`sticky`]) while the pool's slices hold as many devices
/// each and the pool has no counters (which number devices in order), so
/// that a device gone or come changes its own slice, not every slice
/// after it. A slice says what it said when it has the same devices
/// (equal, in the same order) and the pool as many slices. Also the
/// layout made.
pub fn slices_since(
    devices: &[DraDevice],
    before: Option<(&Layout, &[DraDevice])>,
    driver: &str,
    node: &str,
    generation: i64,
    had: impl Fn(&str) -> bool,
) -> (Vec<(String, Option<ResourceSlice>)>, Layout) {
    let (sets, uses) = counters(devices);
    let per_slice = devices_per_slice(devices, &uses);
    let counted = !sets.is_empty() || !uses.is_empty();
    let before = before.filter(|(b, _)| !counted && !b.counters);
    let placed: Vec<Vec<usize>> = before
        .and_then(|(layout, _)| sticky(devices, layout, per_slice))
        .unwrap_or_else(|| {
            let all: Vec<usize> = (0..devices.len()).collect();
            if all.is_empty() {
                vec![Vec::new()]
            } else {
                all.chunks(per_slice).map(<[usize]>::to_vec).collect()
            }
        });
    let chunks: Vec<Vec<&DraDevice>> = placed
        .iter()
        .map(|p| p.iter().filter_map(|&i| devices.get(i)).collect())
        .collect();
    let set_chunks: Vec<&[CounterSet]> = sets.chunks(MAX_COUNTER_SETS).collect();
    let count = i64::try_from(chunks.len() + set_chunks.len()).unwrap_or(i64::MAX);
    let layout = Layout {
        per_slice,
        slices: chunks
            .iter()
            .map(|c| c.iter().map(|d| d.name.clone()).collect())
            .collect(),
        count,
        counters: counted,
    };
    // Whether slice `i` holds `chunk` as it did before.
    let then: std::collections::HashMap<&str, &DraDevice> = before
        .map(|(_, d)| d.iter().map(|d| (d.name.as_str(), d)).collect())
        .unwrap_or_default();
    let same = |i: usize, chunk: &[&DraDevice]| {
        before.is_some_and(|(b, _)| {
            b.count == count
                && b.slices.get(i).is_some_and(|names| {
                    names.len() == chunk.len()
                        && names.iter().zip(chunk).all(|(n, d)| {
                            *n == d.name && then.get(n.as_str()).is_some_and(|t| *t == *d)
                        })
                })
        })
    };
    let slice = |i: usize, devices, shared_counters| ResourceSlice {
        metadata: ObjectMeta {
            name: Some(slice_name(node, driver, i)),
            ..ObjectMeta::default()
        },
        spec: ResourceSliceSpec {
            driver: driver.to_string(),
            node_name: Some(node.to_string()),
            pool: ResourcePool {
                name: node.to_string(),
                generation,
                resource_slice_count: count,
            },
            devices,
            shared_counters,
            ..ResourceSliceSpec::default()
        },
    };
    let mut out = Vec::new();
    for (i, (chunk, at)) in chunks.iter().zip(&placed).enumerate() {
        let name = slice_name(node, driver, i);
        if same(i, chunk) && had(&name) {
            out.push((name, None));
            continue;
        }
        let list = chunk
            .iter()
            .zip(at)
            .map(|(d, k)| {
                let mut dev = device(d, driver);
                if let Some(u) = uses.get(k) {
                    dev.consumes_counters = Some(vec![u.clone()]);
                }
                dev
            })
            .collect();
        out.push((name, Some(slice(i, Some(list), None))));
    }
    // The API wants counter sets in slices of their own, after the
    // devices' (whose names stay).
    for sets in set_chunks {
        let i = out.len();
        out.push((
            slice_name(node, driver, i),
            Some(slice(i, None, Some(sets.to_vec()))),
        ));
    }
    (out, layout)
}

/// The Node `node` (UID `uid`) as the controlling owner of its slices:
/// the garbage collector deletes them with the Node.
pub fn node_owner(node: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "v1".to_string(),
        kind: "Node".to_string(),
        name: node.to_string(),
        uid: uid.to_string(),
        controller: Some(true),
        block_owner_deletion: None,
    }
}

/// The name of slice `i` of `node`'s pool: `<node>-<driver>-<i>`, the
/// driver's dots made dashes, lower case; a name over [`MAX_SUBDOMAIN`]
/// keeps the node's head and ends in a hash of the whole.
pub fn slice_name(node: &str, driver: &str, i: usize) -> String {
    let tail = format!("-{}-{i}", driver.replace('.', "-"));
    let whole = format!("{node}{tail}").to_ascii_lowercase();
    if whole.len() <= MAX_SUBDOMAIN {
        return whole;
    }
    let digest = Sha256::digest(whole.as_bytes());
    let hex: String = digest.iter().take(5).map(|b| format!("{b:02x}")).collect();
    let keep = MAX_SUBDOMAIN.saturating_sub(tail.len() + hex.len() + 1);
    let head: String = node
        .chars()
        .take(keep)
        .collect::<String>()
        .to_ascii_lowercase();
    let head = head.trim_end_matches(['-', '.']);
    let mut out = format!("{head}-{hex}{tail}").to_ascii_lowercase();
    out.truncate(MAX_SUBDOMAIN);
    out
}

/// Checks `name` as the API checks a DNS subdomain (a node name): at most
/// [`MAX_SUBDOMAIN`] characters, dot-separated labels of `a-z 0-9 -`,
/// each starting and ending with a letter or digit.
///
/// # Errors
/// What is wrong, in words.
pub fn check_subdomain(name: &str, max: usize) -> Result<(), String> {
    if name.is_empty() {
        return Err("it is empty".into());
    }
    if name.len() > max {
        return Err(format!("it is {} characters, over {max}", name.len()));
    }
    for label in name.split('.') {
        let ok = !label.is_empty()
            && label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !ok {
            return Err(format!(
                "{label:?} is not a DNS label (a-z 0-9 -, starting and ending with a letter or digit)"
            ));
        }
    }
    Ok(())
}

/// Checks a node name (the slices' nodeName and pool).
///
/// # Errors
/// What is wrong, naming the node.
pub fn check_node_name(node: &str) -> Result<(), String> {
    check_subdomain(node, MAX_SUBDOMAIN)
        .map_err(|why| format!("node name {node:?} is not a DNS subdomain: {why}"))
}

/// Checks a driver name (a DNS subdomain of at most [`MAX_DRIVER_NAME`]
/// characters: it is also the domain of the driver's attributes).
///
/// # Errors
/// What is wrong, naming the driver.
pub fn check_driver_name(driver: &str) -> Result<(), String> {
    check_subdomain(driver, MAX_DRIVER_NAME)
        .map_err(|why| format!("driver name {driver:?} is not a DNS subdomain: {why}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use std::sync::Arc;

    use super::*;
    use crate::deviceplugin::inventory::{Entry, placement};
    use crate::model::{MigInfo, NetInfo, NvidiaInfo, test_node, test_pci};

    fn vf() -> Model {
        Model {
            backend: "sriov".into(),
            id: "0000:3b:00.2".into(),
            sysfs_path: "/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.2".into(),
            bus: "pci".into(),
            pci: Some(test_pci("0000:3b:00.2")),
            driver: Some("mlx5_core".into()),
            numa_node: Some(0),
            nodes: vec![test_node(
                "rdma-verbs",
                "uverbs2",
                "/dev/infiniband/uverbs2",
                231,
                194,
            )],
            net: Some(NetInfo {
                netdevs: vec!["ens1f0v0".into()],
                pf: Some("0000:3b:00.0".into()),
                pf_netdev: Some("ens1f0".into()),
                vf_index: Some(0),
                link_type: Some("ether".into()),
                ..NetInfo::default()
            }),
            ..Model::default()
        }
    }

    fn dra(m: Model, unhealthy: Option<&str>) -> DraDevice {
        DraDevice {
            name: "sriov-0000-3b-00-2".into(),
            resource: "cdigen.io/vf".into(),
            generator: "sriov".into(),
            kind: "cdigen.io/vf".into(),
            shared: false,
            shares: 1,
            entry: Entry {
                id: m.id.clone(),
                cdi_name: format!("cdigen.io/vf={}", m.id),
                unhealthy: unhealthy.map(Into::into),
                placement: placement(&m),
                device: Arc::new(m),
                present: true,
            },
        }
    }

    fn s(a: &DeviceAttribute) -> &str {
        a.string.as_deref().unwrap()
    }

    #[test]
    fn a_vf_has_the_standard_and_network_attributes() {
        let a = attributes(&dra(vf(), None));
        assert_eq!(s(&a["resource.kubernetes.io/pciBusID"]), "0000:3b:00.2");
        assert_eq!(s(&a["resource.kubernetes.io/pcieRoot"]), "pci0000:3a");
        assert_eq!(a["resource.kubernetes.io/numaNode"].int, Some(0));
        assert_eq!(s(&a["pfName"]), "ens1f0");
        assert_eq!(a["vfIndex"].int, Some(0));
        assert_eq!(s(&a["class"]), "vf");
        assert_eq!(s(&a["cdiName"]), "0000:3b:00.2");
        assert_eq!(s(&a["kind"]), "cdigen.io/vf");
        assert_eq!(s(&a["vendorID"]), "0x15b3");
        assert_eq!(s(&a["linkType"]), "ether");
        assert_eq!(s(&a["nodeKinds"]), "rdma-verbs");
        assert_eq!(a["healthy"].bool, Some(true));
        assert_eq!(s(&a["k8s.cni.cncf.io/resourceName"]), "cdigen.io/vf");
        assert_eq!(s(&a["k8s.cni.cncf.io/deviceID"]), "0000:3b:00.2");
        assert!(capacity(&dra(vf(), None)).is_empty());
        for (k, v) in &a {
            let set = [v.int.is_some(), v.bool.is_some(), v.string.is_some()];
            assert_eq!(set.iter().filter(|x| **x).count(), 1, "{k}: {v:?}");
        }
    }

    #[test]
    fn numa_node_unknown_is_left_out() {
        let mut m = vf();
        m.numa_node = None;
        let a = attributes(&dra(m, None));
        assert!(!a.contains_key("resource.kubernetes.io/numaNode"), "{a:?}");
        assert!(a.contains_key("resource.kubernetes.io/pcieRoot"));
    }

    #[test]
    fn pcie_root_is_the_host_bridge_only() {
        assert_eq!(
            pcie_root("/sys/devices/pci0000:3a/0000:3a:00.0"),
            Some("pci0000:3a")
        );
        assert_eq!(
            pcie_root("/sys/devices/pci10000:00/x"),
            None,
            "a VMD domain of 5 digits is not in the standard's form"
        );
        assert_eq!(pcie_root("/sys/devices/platform/soc/fe00.v3d"), None);
        assert_eq!(pcie_root(""), None);
    }

    #[test]
    fn a_partition_and_a_device_below_pci_have_the_pci_attributes() {
        // An AMD partition: a platform device, on its GPU's function.
        let mut m = vf();
        m.net = None;
        m.sysfs_path = "/sys/devices/platform/amdgpu_xcp_0".into();
        m.pci_function = Some("/sys/devices/pci0000:00/0000:00:01.1/0000:05:00.0".into());
        m.pci = Some(test_pci("0000:05:00.0"));
        let a = attributes(&dra(m, None));
        assert_eq!(s(&a["resource.kubernetes.io/pciBusID"]), "0000:05:00.0");
        assert_eq!(s(&a["resource.kubernetes.io/pcieRoot"]), "pci0000:00");
        assert!(
            !a.keys().any(|k| k.starts_with(CNI_DOMAIN)),
            "not a network device"
        );
        // A generic device (a USB serial adapter) below an xHCI function.
        let g = Model {
            backend: "generic".into(),
            id: "tty:ttyUSB0".into(),
            sysfs_path: "/sys/devices/pci0000:00/0000:00:08.1/0000:0e:00.3/usb3/3-2/3-2:1.0/ttyUSB0/tty/ttyUSB0".into(),
            numa_node: Some(1),
            ..Model::default()
        };
        let a = attributes(&dra(g, None));
        assert_eq!(s(&a["resource.kubernetes.io/pciBusID"]), "0000:0e:00.3");
        assert_eq!(s(&a["resource.kubernetes.io/pcieRoot"]), "pci0000:00");
        assert_eq!(a["resource.kubernetes.io/numaNode"].int, Some(1));
        // Outside PCI: none of them.
        let p = Model {
            backend: "generic".into(),
            sysfs_path: "/sys/devices/platform/serial8250/tty/ttyS0".into(),
            ..Model::default()
        };
        let a = attributes(&dra(p, None));
        assert!(!a.keys().any(|k| k.starts_with(STANDARD_DOMAIN)), "{a:?}");
    }

    #[test]
    fn a_mig_device_has_its_profile_as_capacity() {
        let mut m = vf();
        m.backend = "nvidia".into();
        m.net = None;
        m.nvidia = Some(NvidiaInfo {
            model: "NVIDIA A100 80GB PCIe".into(),
            gpu_uuid: "GPU-1".into(),
            mig: Some(MigInfo {
                parent: "0000:41:00.0".into(),
                gi: 1,
                ci: 0,
                uuid: Some("MIG-2".into()),
                profile: Some("3g.40gb".into()),
            }),
            ..NvidiaInfo::default()
        });
        let d = dra(m, None);
        let a = attributes(&d);
        assert_eq!(s(&a["uuid"]), "MIG-2");
        assert_eq!(s(&a["parentUUID"]), "GPU-1");
        assert_eq!(s(&a["migProfile"]), "3g.40gb");
        assert_eq!(s(&a["class"]), "mig");
        let c = capacity(&d);
        assert_eq!(c["memory"].value, Quantity("40Gi".into()));
        assert_eq!(c["computeSlices"].value, Quantity("3".into()));
        assert_eq!(mig_profile("1g.10gb+me"), Some((1, 10)));
        assert_eq!(mig_profile("7g.80gb"), Some((7, 80)));
        assert_eq!(mig_profile("weird"), None);
    }

    fn mig(gi: u32, profile: Option<&str>, parent: &str) -> DraDevice {
        let mut m = vf();
        m.backend = "nvidia".into();
        m.net = None;
        m.nvidia = Some(NvidiaInfo {
            gpu_uuid: format!("GPU-{parent}"),
            mig: Some(MigInfo {
                parent: parent.into(),
                gi,
                ci: 0,
                uuid: None,
                profile: profile.map(str::to_string),
            }),
            ..NvidiaInfo::default()
        });
        let mut d = dra(m, None);
        d.name = format!("mig-{parent}-{gi}");
        d
    }

    #[test]
    fn mig_devices_with_profiles_share_their_gpus_counters() {
        let devices = [
            mig(1, Some("3g.40gb"), "0000:41:00.0"),
            mig(2, Some("4g.40gb"), "0000:41:00.0"),
            dra(vf(), None),
            // NVML named one MIG device of this GPU only: no counters.
            mig(1, Some("1g.10gb"), "0000:c1:00.0"),
            mig(2, None, "0000:c1:00.0"),
        ];
        let (sets, uses) = counters(&devices);
        assert_eq!(sets.len(), 1, "{sets:?}");
        assert_eq!(sets[0].name, "gpu-0000-41-00-0");
        assert_eq!(
            sets[0].counters["compute-slices"].value,
            Quantity("7".into())
        );
        assert_eq!(sets[0].counters["memory"].value, Quantity("80Gi".into()));
        assert_eq!(uses.keys().copied().collect::<Vec<_>>(), [0, 1]);
        assert_eq!(uses[&0].counters["memory"].value, Quantity("40Gi".into()));
        assert_eq!(
            uses[&1].counters["compute-slices"].value,
            Quantity("4".into())
        );
        let s = slices(&devices, "dra.cdigen.io", "node-1", 1);
        assert_eq!(sizes(&s), [5, 0]);
        assert!(s[1].spec.devices.is_none() && s[0].spec.shared_counters.is_none());
        assert_eq!(s[1].spec.shared_counters.as_ref().unwrap().len(), 1);
        assert_eq!(s[0].spec.pool.resource_slice_count, 2);
        let consumes: Vec<bool> = s[0]
            .spec
            .devices
            .as_ref()
            .unwrap()
            .iter()
            .map(|d| d.consumes_counters.is_some())
            .collect();
        assert_eq!(consumes, [true, true, false, false, false]);
    }

    #[test]
    fn counter_sets_are_chunked_and_devices_that_consume_at_64() {
        let devices: Vec<DraDevice> = (0..20)
            .flat_map(|g| {
                let parent = format!("0000:{g:02x}:00.0");
                (1..=7).map(move |gi| mig(gi, Some("1g.10gb"), &parent))
            })
            .collect();
        let s = slices(&devices, "dra.cdigen.io", "node-1", 1);
        // 140 devices at 64 a slice, then 20 sets at 8 a slice.
        assert_eq!(sizes(&s), [64, 64, 12, 0, 0, 0]);
        let sets: Vec<usize> = s
            .iter()
            .map(|x| x.spec.shared_counters.as_ref().map_or(0, Vec::len))
            .collect();
        assert_eq!(sets, [0, 0, 0, 8, 8, 4]);
        assert!(s.iter().all(|x| x.spec.pool.resource_slice_count == 6));
    }

    #[test]
    fn an_over_long_string_is_left_out_not_cut() {
        let mut m = vf();
        let long = "x".repeat(MAX_STRING + 1);
        m.attrs.insert("serial".into(), long);
        m.attrs.insert("product".into(), "y".repeat(MAX_STRING));
        m.attrs.insert("not-a-name".into(), "z".into());
        let a = attributes(&dra(m, None));
        assert!(!a.contains_key("serial"), "{a:?}");
        assert_eq!(s(&a["product"]).len(), MAX_STRING);
        assert!(!a.contains_key("not-a-name"));
    }

    #[test]
    fn at_most_32_properties_and_the_lowest_priority_go() {
        let mut m = vf();
        for i in 0..40 {
            m.attrs.insert(format!("extra{i:02}"), "v".into());
        }
        let d = dra(m, None);
        let all = candidates(&d);
        assert!(all.len() > MAX_PROPERTIES + 10, "{}", all.len());
        let a = attributes(&d);
        assert_eq!(a.len() + capacity(&d).len(), MAX_PROPERTIES);
        // The standard and identity attributes come first and stay; the
        // exposed ones fill up what is left, in name order; the rest goes.
        for k in [
            "resource.kubernetes.io/pciBusID",
            "kind",
            "cdiName",
            "pfName",
            "nodeKinds",
            "extra00",
        ] {
            assert!(a.contains_key(k), "{k} missing: {:?}", a.keys());
        }
        for k in ["extra39", "pciClass", "subsystemDeviceID"] {
            assert!(!a.contains_key(k), "{k} kept: {:?}", a.keys());
        }
        let kept: Vec<&String> = all.iter().map(|(n, _)| n).take(MAX_PROPERTIES).collect();
        let mut want: Vec<&String> = kept.clone();
        want.sort();
        let mut got: Vec<&String> = a.keys().collect();
        got.sort();
        assert_eq!(got, want);
    }

    #[test]
    fn an_unhealthy_device_is_tainted_once_per_code_with_its_effect() {
        use crate::deviceplugin::signals::{Code, Problem};
        let mut d = dra(vf(), None);
        d.entry.unhealthy = Some(Unhealthy::new(
            Code::DeviceNodeMissing,
            "/dev/infiniband/uverbs2 is missing",
        ));
        let t = device(&d, "dra.cdigen.io").taints.unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].key, "dra.cdigen.io/unhealthy");
        assert_eq!(t[0].value.as_deref(), Some("DeviceNodeMissing"));
        assert_eq!(t[0].effect, "NoSchedule");
        assert_eq!(attributes(&d)["healthy"].bool, Some(false));
        // Several reasons: a taint per code, in order, each once; a fatal
        // PCIe error evicts.
        let problem = |code, detail: &str| Problem {
            code,
            detail: detail.into(),
        };
        d.entry.unhealthy = Some(Unhealthy {
            problems: vec![
                problem(Code::AerFatal, "1 new fatal PCIe error(s)"),
                problem(Code::LinkWidthDegraded, "PCIe link x8 of x16"),
                problem(Code::AerFatal, "its PF's too"),
            ],
        });
        let t = device(&d, "x.io").taints.unwrap();
        let got: Vec<(&str, &str, &str)> = t
            .iter()
            .map(|t| {
                (
                    t.key.as_str(),
                    t.value.as_deref().unwrap(),
                    t.effect.as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("x.io/unhealthy", "AERFatal", "NoExecute"),
                ("x.io/unhealthy", "LinkWidthDegraded", "NoSchedule")
            ]
        );
        // Every code is a label value, and only AERFatal evicts.
        for c in Code::ALL {
            let v = c.as_str();
            assert!(
                v.len() <= 63 && v.bytes().all(|b| b.is_ascii_alphanumeric()),
                "{v}"
            );
            assert_eq!(c.effect().as_str() == "NoExecute", c == Code::AerFatal);
        }
        // XIDs: one taint each, NoSchedule; never more than the API's
        // limit.
        d.entry.unhealthy = Some(Unhealthy {
            problems: (0..40)
                .map(|x| problem(Code::NvidiaXid(Some(x)), "NVML reported it"))
                .chain([problem(Code::NvidiaGpuLost, "lost")])
                .collect(),
        });
        let t = device(&d, "x.io").taints.unwrap();
        assert_eq!(t.len(), MAX_TAINTS);
        assert_eq!(t[1].value.as_deref(), Some("NvidiaXid1"));
        assert_eq!(t[1].effect, "NoSchedule");
        // A reason with no code of its own.
        let d = dra(vf(), Some("anything else"));
        assert_eq!(
            device(&d, "x.io").taints.unwrap()[0].value.as_deref(),
            Some("Unhealthy")
        );
    }

    #[test]
    fn the_inventory_health_reasons_have_codes() {
        use crate::deviceplugin::signals::Code;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("dev.manifest"),
            "/dev/infiniband/uverbs2 c 231:9 0666 0 0\n/dev/x d\n",
        )
        .unwrap();
        let root = crate::root::HostRoot::open(dir.path()).unwrap();
        let codes = |m: &Model| -> Vec<Code> {
            crate::deviceplugin::inventory::health(&root, m)
                .into_iter()
                .map(|p| p.code)
                .collect()
        };
        let mismatch = vf();
        assert_eq!(codes(&mismatch), [Code::DeviceNodeMismatch]);
        let mut missing = vf();
        missing.nodes[0].path = "/dev/nope".into();
        assert_eq!(codes(&missing), [Code::DeviceNodeMissing]);
        let mut dir_node = vf();
        dir_node.nodes[0].path = "/dev/x".into();
        assert_eq!(codes(&dir_node), [Code::NotADeviceNode]);
        let mut unbound = vf();
        unbound.nodes.clear();
        unbound.driver = None;
        assert_eq!(codes(&unbound), [Code::NoDriverBound]);
    }

    #[test]
    fn a_shared_device_allows_multiple_allocations() {
        let mut d = dra(vf(), None);
        assert_eq!(device(&d, "x.io").allow_multiple_allocations, None);
        assert_eq!(device(&d, "x.io").capacity, None);
        d.shared = true;
        d.shares = 8;
        let dev = device(&d, "x.io");
        assert_eq!(dev.allow_multiple_allocations, Some(true));
        let c = &dev.capacity.unwrap()[SHARES];
        assert_eq!(c.value, Quantity("8".into()));
        let p = c.request_policy.as_ref().unwrap();
        assert_eq!(p.default, Some(Quantity("1".into())));
        let r = p.valid_range.as_ref().unwrap();
        assert_eq!(r.min, Quantity("1".into()));
        assert_eq!(r.step, Some(Quantity("1".into())));
        assert_eq!(p.valid_values, None);
    }

    fn many(n: usize, unhealthy_at: Option<usize>) -> Vec<DraDevice> {
        (0..n)
            .map(|i| {
                let mut d = dra(
                    vf(),
                    (Some(i) == unhealthy_at).then_some("no driver is bound"),
                );
                d.name = format!("dev-{i}");
                d
            })
            .collect()
    }

    fn sizes(s: &[ResourceSlice]) -> Vec<usize> {
        s.iter()
            .map(|x| x.spec.devices.as_ref().map_or(0, Vec::len))
            .collect()
    }

    /// The slices of `devices` after `before`'s: which were made (true)
    /// or left as they were, and the devices of each.
    fn after(
        devices: &[DraDevice],
        before: &[DraDevice],
        had: bool,
    ) -> (Vec<bool>, Vec<Vec<String>>) {
        let (_, layout) = slices_since(before, None, "dra.cdigen.io", "node-1", 0, |_| false);
        let (made, now) = slices_since(
            devices,
            Some((&layout, before)),
            "dra.cdigen.io",
            "node-1",
            0,
            |_| had,
        );
        (made.iter().map(|(_, s)| s.is_some()).collect(), now.slices)
    }

    fn made(devices: &[DraDevice], before: &[DraDevice], had: bool) -> Vec<bool> {
        after(devices, before, had).0
    }

    #[test]
    fn a_pass_makes_again_only_the_slices_whose_devices_changed() {
        let before = many(300, None);
        // The same devices: no slice to make.
        assert_eq!(made(&before, &before, true), [false, false, false]);
        // The last device gone: its slice only.
        assert_eq!(made(&before[..299], &before, true), [false, false, true]);
        // A device of the first slice changed: that slice only.
        let mut changed = before.clone();
        changed[5].entry.id = "other".into();
        assert_eq!(made(&changed, &before, true), [true, false, false]);
        // The first device gone: the others stay where they were.
        let (made_now, placed) = after(&before[1..], &before, true);
        assert_eq!(made_now, [true, false, false]);
        assert_eq!(placed[0].len(), 127);
        assert_eq!(placed[0][0], "dev-1");
        assert_eq!(placed[1][0], "dev-128");
        // And back: where it was, in its place.
        let (_, gone) = slices_since(&before, None, "d.io", "n", 0, |_| false);
        let (_, gone) = slices_since(&before[1..], Some((&gone, &before)), "d.io", "n", 0, |_| {
            true
        });
        let (_, back) = slices_since(&before, Some((&gone, &before[1..])), "d.io", "n", 0, |_| {
            true
        });
        let (_, fresh) = slices_since(&before, None, "d.io", "n", 0, |_| false);
        assert_eq!(back, fresh);
        // Made afresh, in order.
        let (_, layout) = slices_since(&before[1..], None, "d.io", "n", 0, |_| false);
        assert_eq!(layout.slices[0].len(), 128);
        assert_eq!(layout.slices[1][0], "dev-129");
        // A slice not held any more is made again.
        assert_eq!(made(&before, &before, false), [true, true, true]);
        // A pool laid out otherwise: a taint makes slices of 64.
        assert_eq!(made(&many(300, Some(299)), &before, true), [true; 5]);
        // A slice more (129 devices in two slices): every slice, whose
        // count changed.
        assert_eq!(made(&many(129, None), &before[..128], true), [true, true]);
        // What is left out is what `slices` made of it.
        let all = slices(&before, "dra.cdigen.io", "node-1", 0);
        let (_, layout) = slices_since(&before, None, "dra.cdigen.io", "node-1", 0, |_| false);
        let (since, _) = slices_since(
            &before[..299],
            Some((&layout, &before)),
            "dra.cdigen.io",
            "node-1",
            0,
            |_| true,
        );
        let fresh = slices(&before[..299], "dra.cdigen.io", "node-1", 0);
        for (i, (name, s)) in since.iter().enumerate() {
            assert_eq!(Some(name), fresh[i].metadata.name.as_ref());
            match s {
                Some(s) => assert_eq!(s, &fresh[i]),
                None => assert_eq!(all[i], fresh[i]),
            }
        }
    }

    #[test]
    fn devices_stay_in_their_slices_as_others_come_and_go() {
        let all = many(300, None);
        // A whole slice's devices gone (a PF's VFs): the slice stays,
        // empty, and the others as they were.
        let without: Vec<DraDevice> = all
            .iter()
            .filter(|d| !(128..256).contains(&d.name[4..].parse::<usize>().unwrap()))
            .cloned()
            .collect();
        let (made_now, placed) = after(&without, &all, true);
        assert_eq!(made_now, [false, true, false]);
        assert_eq!(
            placed.iter().map(Vec::len).collect::<Vec<_>>(),
            [128, 0, 44]
        );
        // New devices fill the first slice with room, then a new one.
        let (_, layout) = slices_since(&without, None, "d.io", "n", 0, |_| false);
        let (_, layout) = slices_since(&without, Some((&layout, &without)), "d.io", "n", 0, |_| {
            true
        });
        assert_eq!(layout.slices.len(), 2, "made afresh: in order");
        let mut more = all.clone();
        more.extend(many(400, None).into_iter().skip(300));
        let (_, placed) = after(&more, &all, true);
        assert_eq!(
            placed.iter().map(Vec::len).collect::<Vec<_>>(),
            [128, 128, 128, 16]
        );
        // A trailing slice left empty goes.
        let (made_now, placed) = after(&all[..200], &all, true);
        assert_eq!(made_now, [true, true], "the pool's count changed");
        assert_eq!(placed.len(), 2);
    }

    #[test]
    fn chunked_at_128_or_64_with_taints() {
        let s = slices(&many(300, None), "dra.cdigen.io", "node-1", 3);
        assert_eq!(sizes(&s), [128, 128, 44]);
        let s = slices(&many(300, Some(299)), "dra.cdigen.io", "node-1", 3);
        assert_eq!(sizes(&s), [64, 64, 64, 64, 44]);
        for x in &s {
            assert_eq!(x.spec.pool.resource_slice_count, 5);
            assert_eq!(x.spec.pool.generation, 3);
            assert_eq!(x.spec.pool.name, "node-1");
            assert_eq!(x.spec.node_name.as_deref(), Some("node-1"));
        }
        let names: Vec<_> = s.iter().map(|x| x.metadata.name.clone().unwrap()).collect();
        assert_eq!(names[0], "node-1-dra-cdigen-io-0");
        assert_eq!(names[4], "node-1-dra-cdigen-io-4");
        let empty = slices(&[], "dra.cdigen.io", "node-1", 1);
        assert_eq!(sizes(&empty), [0]);
        assert_eq!(empty[0].spec.pool.resource_slice_count, 1);
    }

    #[test]
    fn slice_names_are_subdomains() {
        let long = format!("{}.example", "a".repeat(250));
        let n = slice_name(&long, "dra.cdigen.io", 12);
        assert!(n.len() <= MAX_SUBDOMAIN, "{}", n.len());
        check_subdomain(&n, MAX_SUBDOMAIN).unwrap();
        assert!(n.ends_with("-dra-cdigen-io-12"), "{n}");
        assert_ne!(n, slice_name(&format!("{long}x"), "dra.cdigen.io", 12));
        assert_eq!(slice_name("Node-1", "d.io", 0), "node-1-d-io-0");
    }

    #[test]
    fn names_are_checked() {
        check_node_name("node-1.example.com").unwrap();
        assert_eq!(
            check_node_name("Node_1").unwrap_err(),
            "node name \"Node_1\" is not a DNS subdomain: \"Node_1\" is not a DNS label \
(a-z 0-9 -, starting and ending with a letter or digit)"
        );
        assert!(
            check_node_name(&"a".repeat(254))
                .unwrap_err()
                .contains("over 253")
        );
        check_driver_name("dra.cdigen.io").unwrap();
        assert!(
            check_driver_name(&format!("{}.io", "a".repeat(61)))
                .unwrap_err()
                .contains("over 63")
        );
        assert!(is_attribute_name("compute_partition"));
        assert!(!is_attribute_name("9lives"));
        assert!(!is_attribute_name(&"a".repeat(33)));
    }
}

//! Allocate's answer for one container: the CDI names of its devices, the
//! per-request environment CDI cannot express, and optionally the legacy
//! `devices`/`mounts`/`envs` fields.
//!
//! CDI merges `env` by variable name, so the specs name each device's
//! variable per device (`PCIDEVICE_CDIGEN_IO_VF_0000_3B_00_2`). The
//! variables existing consumers read for the whole request are set here:
//!
//! - network devices (SR-IOV VFs, vDPA): `PCIDEVICE_<RESOURCE>`, the PCI
//!   addresses comma-separated, and `PCIDEVICE_<RESOURCE>_INFO`, a JSON
//!   object per address in the SR-IOV device plugin's shape
//!   (`{"0000:3b:00.2":{"generic":{"deviceID":"0000:3b:00.2"},"rdma":{…}}}`);
//! - VFIO devices: `PCI_RESOURCE_<RESOURCE>`, the addresses
//!   comma-separated, which KubeVirt's virt-launcher reads.
//!
//! `<RESOURCE>` is the resource name upper-cased with every other
//! character made `_` (`cdigen.io/vf` → `CDIGEN_IO_VF`).

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value, json};

use super::api::v1beta1::{CdiDevice, ContainerAllocateResponse, DeviceSpec, Mount};
use super::inventory::{Entry, Resource};
use crate::model::Device;
use crate::render::env_suffix;

/// Why an Allocate (or PreStartContainer) is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejected {
    /// An ID the plugin never advertised.
    #[error("resource {resource}: unknown device ID {id}")]
    Unknown {
        /// The resource.
        resource: String,
        /// The ID, quoted and escaped.
        id: String,
    },
    /// An advertised device that cannot be used now.
    #[error("resource {resource}: device {id} is unhealthy: {why}")]
    Unhealthy {
        /// The resource.
        resource: String,
        /// The ID.
        id: String,
        /// Why.
        why: String,
    },
}

/// The entries of `ids`, in the order asked, each once; the first unknown
/// or unhealthy one refuses the request.
///
/// # Errors
/// [`Rejected`] naming the ID.
pub fn entries<'a>(resource: &'a Resource, ids: &[String]) -> Result<Vec<&'a Entry>, Rejected> {
    let mut out: Vec<&Entry> = Vec::new();
    for id in ids {
        let Some(e) = resource.devices.get(id) else {
            return Err(Rejected::Unknown {
                resource: resource.def.name.clone(),
                id: crate::text::quoted(id, 80),
            });
        };
        if let Some(why) = &e.unhealthy {
            return Err(Rejected::Unhealthy {
                resource: resource.def.name.clone(),
                id: id.clone(),
                why: why.clone(),
            });
        }
        if !out.iter().any(|x| x.id == e.id) {
            out.push(e);
        }
    }
    Ok(out)
}

/// The answer for one container holding `entries` of `resource`.
pub fn response(
    resource: &Resource,
    entries: &[&Entry],
    legacy: bool,
) -> ContainerAllocateResponse {
    let mut r = ContainerAllocateResponse {
        cdi_devices: entries
            .iter()
            .map(|e| CdiDevice {
                name: e.cdi_name.clone(),
            })
            .collect(),
        envs: request_env(&resource.def.name, entries),
        ..Default::default()
    };
    if legacy {
        add_legacy(resource, entries, &mut r);
    }
    r
}

/// The PCI address a device is known by to network consumers.
fn pci_address(d: &Device) -> Option<&str> {
    d.pci
        .as_ref()
        .map(|p| p.address.as_str())
        .or_else(|| d.vdpa.as_ref().and_then(|v| v.pci_address.as_deref()))
}

fn is_network(d: &Device) -> bool {
    d.net.is_some() || d.vdpa.is_some()
}

fn is_vfio_passthrough(d: &Device) -> bool {
    d.vfio.is_some() && !is_network(d)
}

/// The per-request variables of `entries` (see the module docs).
pub fn request_env(resource: &str, entries: &[&Entry]) -> HashMap<String, String> {
    let suffix = env_suffix(resource);
    let mut env = HashMap::new();
    let net: Vec<(&str, &Device)> = entries
        .iter()
        .filter(|e| is_network(&e.device))
        .filter_map(|e| pci_address(&e.device).map(|a| (a, e.device.as_ref())))
        .collect();
    if !net.is_empty() {
        let addrs: Vec<&str> = net.iter().map(|(a, _)| *a).collect();
        env.insert(format!("PCIDEVICE_{suffix}"), addrs.join(","));
        let mut info = Map::new();
        for (a, d) in &net {
            info.insert((*a).to_string(), device_info(a, d));
        }
        env.insert(
            format!("PCIDEVICE_{suffix}_INFO"),
            Value::Object(info).to_string(),
        );
    }
    let vfio: Vec<&str> = entries
        .iter()
        .filter(|e| is_vfio_passthrough(&e.device))
        .filter_map(|e| pci_address(&e.device))
        .collect();
    if !vfio.is_empty() {
        env.insert(format!("PCI_RESOURCE_{suffix}"), vfio.join(","));
    }
    env
}

/// One address's entry of `PCIDEVICE_<RESOURCE>_INFO`: `generic` with the
/// device ID, and the nodes by protocol (`rdma`, `vfio`, `vdpa`, `vhost`),
/// as the SR-IOV device plugin's info providers name them.
fn device_info(address: &str, d: &Device) -> Value {
    let mut by_proto: BTreeMap<&str, Map<String, Value>> = BTreeMap::new();
    for n in &d.nodes {
        let (proto, key) = match n.role.as_str() {
            "rdma-verbs" => ("rdma", "uverbs"),
            "rdma-mad" => ("rdma", "umad"),
            "rdma-cm" => ("rdma", "rdma_cm"),
            "vfio-group" => ("vfio", "dev-mount"),
            "vfio-container" => ("vfio", "mount"),
            "vfio-cdev" => ("vfio", "cdev-mount"),
            "iommufd" => ("vfio", "iommufd-mount"),
            "vhost-vdpa" => ("vdpa", "mount"),
            "vhost-net" => ("vhost", "net-mount"),
            "tun" => ("vhost", "tun-mount"),
            _ => continue,
        };
        let slot = by_proto.entry(proto).or_default();
        // A role with several nodes (two uverbs of a dual-port VF): the
        // first stays, as the SR-IOV device plugin keeps one per key.
        slot.entry(key.to_string())
            .or_insert_with(|| Value::String(n.path.clone()));
    }
    let mut out = Map::new();
    out.insert("generic".into(), json!({ "deviceID": address }));
    for (proto, m) in by_proto {
        out.insert(proto.into(), Value::Object(m));
    }
    Value::Object(out)
}

/// Adds the edits of the devices' CDI entries (and the spec's own) as the
/// legacy fields, for runtimes without CDI: device nodes, bind mounts and
/// variables. Hooks have no legacy form and are left out.
fn add_legacy(resource: &Resource, entries: &[&Entry], r: &mut ContainerAllocateResponse) {
    let Some(spec) = resource.plan.as_ref().and_then(|p| p.spec.as_ref()) else {
        return;
    };
    let names: Vec<&str> = entries
        .iter()
        .filter_map(|e| e.cdi_name.split_once('=').map(|(_, n)| n))
        .collect();
    let edits = std::iter::once(&spec.container_edits).chain(
        spec.devices
            .iter()
            .filter(|d| names.contains(&d.name.as_str()))
            .map(|d| &d.container_edits),
    );
    for e in edits {
        for n in &e.device_nodes {
            if r.devices.iter().any(|x| x.container_path == n.path) {
                continue;
            }
            r.devices.push(DeviceSpec {
                container_path: n.path.clone(),
                host_path: if n.host_path.is_empty() {
                    n.path.clone()
                } else {
                    n.host_path.clone()
                },
                permissions: if n.permissions.is_empty() {
                    "rw".into()
                } else {
                    n.permissions.clone()
                },
            });
        }
        for m in &e.mounts {
            if r.mounts
                .iter()
                .any(|x| x.container_path == m.container_path)
            {
                continue;
            }
            r.mounts.push(Mount {
                container_path: m.container_path.clone(),
                host_path: m.host_path.clone(),
                read_only: m.options.iter().any(|o| o == "ro"),
            });
        }
        for v in &e.env {
            if let Some((k, val)) = v.split_once('=') {
                r.envs
                    .entry(k.to_string())
                    .or_insert_with(|| val.to_string());
            }
        }
    }
}

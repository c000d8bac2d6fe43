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
//!   (`{"0000:3b:00.2":{"generic":{"deviceID":"0000:3b:00.2"},"rdma":{…}}}`),
//!   naming only the nodes the container gets (those of the device's CDI
//!   entry and of its spec);
//! - VFIO devices: `PCI_RESOURCE_<RESOURCE>`, the addresses
//!   comma-separated, which KubeVirt's virt-launcher reads.
//!
//! `<RESOURCE>` is the resource name upper-cased with every other
//! character made `_` (`cdigen.io/vf` → `CDIGEN_IO_VF`).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

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
    let mut seen = std::collections::BTreeSet::new();
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
                why: why.to_string(),
            });
        }
        if seen.insert(e.id.as_str()) {
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
    // Units of one shared device give one CDI device.
    let mut cdi_devices: Vec<CdiDevice> = Vec::new();
    for e in entries {
        if !cdi_devices.iter().any(|c| c.name == e.cdi_name) {
            cdi_devices.push(CdiDevice {
                name: e.cdi_name.clone(),
            });
        }
    }
    let mut r = ContainerAllocateResponse {
        cdi_devices,
        envs: request_env(resource, entries),
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

/// The per-request variables of `entries` of `resource` (see the module
/// docs).
pub fn request_env(resource: &Resource, entries: &[&Entry]) -> HashMap<String, String> {
    let suffix = env_suffix(&resource.def.name);
    let mut env = HashMap::new();
    let mut net: Vec<(&str, &Entry)> = Vec::new();
    for e in entries.iter().filter(|e| is_network(&e.device)) {
        // Several units of one shared device: its address once.
        if let Some(a) = pci_address(&e.device)
            && !net.iter().any(|(x, _)| *x == a)
        {
            net.push((a, *e));
        }
    }
    if !net.is_empty() {
        let addrs: Vec<&str> = net.iter().map(|(a, _)| *a).collect();
        env.insert(format!("PCIDEVICE_{suffix}"), addrs.join(","));
        let mut info = Map::new();
        for (a, e) in &net {
            let given = given_nodes(resource, e);
            info.insert((*a).to_string(), device_info(a, &e.device, given.as_ref()));
        }
        env.insert(
            format!("PCIDEVICE_{suffix}_INFO"),
            Value::Object(info).to_string(),
        );
    }
    let mut vfio: Vec<&str> = Vec::new();
    for a in entries
        .iter()
        .filter(|e| is_vfio_passthrough(&e.device))
        .filter_map(|e| pci_address(&e.device))
    {
        if !vfio.contains(&a) {
            vfio.push(a);
        }
    }
    if !vfio.is_empty() {
        env.insert(format!("PCI_RESOURCE_{suffix}"), vfio.join(","));
    }
    env
}

/// The edits a container given the devices `names` of `spec` gets: the
/// spec's own, then each device's, in spec order.
fn edits_of<'a>(
    spec: &'a crate::cdi::Spec,
    names: &'a [&'a str],
) -> impl Iterator<Item = &'a crate::cdi::ContainerEdits> + 'a {
    std::iter::once(&spec.container_edits).chain(
        spec.devices
            .iter()
            .filter(|d| names.contains(&d.name.as_str()))
            .map(|d| &d.container_edits),
    )
}

/// The device nodes the container gets with `e`, host path to container
/// path: those of its CDI device and of its spec as a whole. `None` when
/// the spec is not known (then every node of the device counts).
fn given_nodes(resource: &Resource, e: &Entry) -> Option<BTreeMap<String, String>> {
    let spec = resource.plan.as_ref()?.spec.as_ref()?;
    let name = e.cdi_name.split_once('=').map(|(_, n)| n)?;
    let names = [name];
    let edits = edits_of(spec, &names);
    Some(
        edits
            .flat_map(|e| e.device_nodes.iter())
            .map(|n| {
                let host = if n.host_path.is_empty() {
                    &n.path
                } else {
                    &n.host_path
                };
                (host.clone(), n.path.clone())
            })
            .collect(),
    )
}

/// One address's entry of `PCIDEVICE_<RESOURCE>_INFO`: `generic` with the
/// device ID, and the nodes by protocol (`rdma`, `vfio`, `vdpa`, `vhost`),
/// with the keys the SR-IOV device plugin's info providers use (`rdma`
/// also names the RDMA device, `rdma_dev`). Only nodes in `given` (host
/// path to container path) are named, by their path in the container.
fn device_info(address: &str, d: &Device, given: Option<&BTreeMap<String, String>>) -> Value {
    let mut by_proto: BTreeMap<&str, Map<String, Value>> = BTreeMap::new();
    for n in &d.nodes {
        let name = Path::new(&n.path)
            .file_name()
            .and_then(|f| f.to_str())
            .unwrap_or_default();
        let (proto, key) = match n.role.as_str() {
            "rdma-verbs" => ("rdma", "uverbs"),
            "rdma-mad" if name.starts_with("issm") => ("rdma", "issm"),
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
        let path = match given {
            Some(g) => match g.get(&n.path) {
                Some(p) => p.clone(),
                None => continue, // not in the container
            },
            None => n.path.clone(),
        };
        let slot = by_proto.entry(proto).or_default();
        // A role with several nodes (two uverbs of a dual-port VF): the
        // first stays, as the SR-IOV device plugin keeps one per key.
        slot.entry(key.to_string())
            .or_insert_with(|| Value::String(path));
    }
    if let Some(rdma) = by_proto.get_mut("rdma")
        && let Some(dev) = d.net.as_ref().and_then(|n| n.rdma_devices.first())
    {
        rdma.insert("rdma_dev".into(), Value::String(dev.clone()));
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
    for e in edits_of(spec, &names) {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use std::path::PathBuf;
    use std::sync::Arc;

    use super::*;
    use crate::cdi::{ContainerEdits, Device as CdiDevice, DeviceNode, Spec};
    use crate::deviceplugin::inventory::ResourceDef;
    use crate::generate::Planned;
    use crate::model::{NetInfo, Node, VfioInfo, test_pci};

    fn node(role: &str, path: &str) -> Node {
        Node {
            role: role.into(),
            name: path.rsplit('/').next().unwrap().into(),
            path: path.into(),
            node_type: "c".into(),
            major: 231,
            minor: 0,
            host: None,
        }
    }

    fn vf(addr: &str, nodes: Vec<Node>, vfio: bool) -> Device {
        Device {
            id: addr.into(),
            pci: Some(test_pci(addr)),
            nodes,
            net: Some(NetInfo {
                rdma_devices: if vfio { vec![] } else { vec!["mlx5_2".into()] },
                ..Default::default()
            }),
            vfio: vfio.then(|| VfioInfo {
                group: "43".into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn entry(d: Device) -> Entry {
        Entry {
            id: d.id.clone(),
            cdi_name: format!("cdigen.io/vf={}", d.id),
            unhealthy: None,
            placement: Default::default(),
            device: Arc::new(d),
            present: true,
        }
    }

    /// The resource whose spec gives each device the nodes in `given`
    /// (None: no spec known).
    fn resource(given: Option<&[(&str, &[&str])]>) -> Resource {
        let spec = given.map(|g| Spec {
            cdi_version: "0.5.0".into(),
            kind: "cdigen.io/vf".into(),
            devices: g
                .iter()
                .map(|(name, paths)| CdiDevice {
                    name: (*name).into(),
                    container_edits: ContainerEdits {
                        device_nodes: paths
                            .iter()
                            .map(|p| DeviceNode {
                                path: (*p).into(),
                                ..Default::default()
                            })
                            .collect(),
                        ..Default::default()
                    },
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        });
        Resource {
            def: ResourceDef {
                name: "cdigen.io/vf".into(),
                generator: "sriov".into(),
                kind: "cdigen.io/vf".into(),
                source: PathBuf::from("builtin:generators/sriov.yaml"),
                replicas: 1,
                pool: false,
                register_empty: false,
                vendor_resources: Vec::new(),
            },
            spec_file: PathBuf::from("/cdi/cdigen.io-vf.yaml"),
            devices: BTreeMap::new(),
            plan: Some(Arc::new(Planned {
                generator: "sriov".into(),
                file: "cdigen.io-vf.yaml".into(),
                spec,
                bytes: Vec::new(),
                devinfo: Vec::new(),
                device_info: false,
                devices: Vec::new(),
                named: Vec::new(),
            })),
            withheld: None,
        }
    }

    fn info(env: &HashMap<String, String>) -> Value {
        serde_json::from_str(&env["PCIDEVICE_CDIGEN_IO_VF_INFO"]).unwrap()
    }

    #[test]
    fn info_names_each_rdma_node_by_its_kind_and_the_rdma_device() {
        let rdma = entry(vf(
            "0000:3b:00.2",
            vec![
                node("rdma-verbs", "/dev/infiniband/uverbs2"),
                node("rdma-mad", "/dev/infiniband/issm2"),
                node("rdma-mad", "/dev/infiniband/umad2"),
                node("rdma-cm", "/dev/infiniband/rdma_cm"),
            ],
            false,
        ));
        let env = request_env(&resource(None), &[&rdma]);
        assert_eq!(env["PCIDEVICE_CDIGEN_IO_VF"], "0000:3b:00.2");
        assert_eq!(
            info(&env),
            json!({"0000:3b:00.2": {
                "generic": {"deviceID": "0000:3b:00.2"},
                "rdma": {
                    "uverbs": "/dev/infiniband/uverbs2",
                    "issm": "/dev/infiniband/issm2",
                    "umad": "/dev/infiniband/umad2",
                    "rdma_cm": "/dev/infiniband/rdma_cm",
                    "rdma_dev": "mlx5_2",
                },
            }})
        );
    }

    #[test]
    fn info_names_only_the_nodes_the_container_gets() {
        // A VF on vfio-pci with both VFIO modes on the host, handed out in
        // legacy mode; vhost-net exists but the spec does not give it.
        let d = vf(
            "0000:3b:00.4",
            vec![
                node("vfio-container", "/dev/vfio/vfio"),
                node("vfio-group", "/dev/vfio/43"),
                node("iommufd", "/dev/iommu"),
                node("vfio-cdev", "/dev/vfio/devices/vfio0"),
                node("vhost-net", "/dev/vhost-net"),
                node("tun", "/dev/net/tun"),
            ],
            true,
        );
        let e = entry(d);
        let given: &[(&str, &[&str])] = &[("0000:3b:00.4", &["/dev/vfio/vfio", "/dev/vfio/43"])];
        let env = request_env(&resource(Some(given)), &[&e]);
        assert_eq!(
            info(&env),
            json!({"0000:3b:00.4": {
                "generic": {"deviceID": "0000:3b:00.4"},
                "vfio": {"mount": "/dev/vfio/vfio", "dev-mount": "/dev/vfio/43"},
            }})
        );
        assert!(
            !env.contains_key("PCI_RESOURCE_CDIGEN_IO_VF"),
            "a network VF on vfio-pci is a network device"
        );
        // Without the spec, every node the device has.
        let env = request_env(&resource(None), &[&e]);
        let all = info(&env);
        assert_eq!(
            all["0000:3b:00.4"]["vfio"]["cdev-mount"],
            "/dev/vfio/devices/vfio0"
        );
        assert_eq!(all["0000:3b:00.4"]["vhost"]["net-mount"], "/dev/vhost-net");
    }
}

/// Allocate's answer as a whole: names, variables, refusals, legacy edits.
#[cfg(test)]
mod response_tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use std::collections::BTreeMap;
    use std::path::PathBuf;
    use std::sync::Arc;

    use super::*;
    use crate::deviceplugin::inventory::ResourceDef;
    use crate::model::{NetInfo, VfioInfo, test_node, test_pci};

    fn entry(d: Device, unhealthy: Option<&str>) -> Entry {
        Entry {
            id: d.id.clone(),
            cdi_name: format!("cdigen.io/vf={}", d.id),
            unhealthy: unhealthy.map(Into::into),
            placement: Default::default(),
            device: Arc::new(d),
            present: true,
        }
    }

    fn vf(addr: &str, n: u32) -> Device {
        Device {
            backend: "sriov".into(),
            id: addr.into(),
            pci: Some(test_pci(addr)),
            driver: Some("mlx5_core".into()),
            net: Some(NetInfo::default()),
            nodes: vec![
                test_node(
                    "rdma-verbs",
                    &format!("uverbs{n}"),
                    &format!("/dev/infiniband/uverbs{n}"),
                    231,
                    192 + n,
                ),
                test_node("rdma-cm", "rdma_cm", "/dev/infiniband/rdma_cm", 10, 58),
            ],
            ..Default::default()
        }
    }

    fn resource(name: &str, entries: Vec<Entry>) -> Resource {
        Resource {
            def: ResourceDef {
                name: name.into(),
                generator: "sriov".into(),
                kind: "cdigen.io/vf".into(),
                source: PathBuf::from("builtin:generators/sriov.yaml"),
                replicas: 1,
                pool: false,
                register_empty: false,
                vendor_resources: Vec::new(),
            },
            spec_file: PathBuf::from("/var/run/cdi/cdigen.io-vf.yaml"),
            devices: entries
                .into_iter()
                .map(|e| (e.id.clone(), e))
                .collect::<BTreeMap<_, _>>(),
            plan: None,
            withheld: None,
        }
    }

    #[test]
    fn network_devices_get_the_sriov_plugins_variables() {
        let r = resource(
            "cdigen.io/vf",
            vec![
                entry(vf("0000:3b:00.2", 2), None),
                entry(vf("0000:3b:00.3", 3), None),
            ],
        );
        let ids = ["0000:3b:00.3".to_string(), "0000:3b:00.2".to_string()];
        let es = entries(&r, &ids).unwrap();
        let resp = response(&r, &es, false);
        let names: Vec<&str> = resp.cdi_devices.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(
            names,
            ["cdigen.io/vf=0000:3b:00.3", "cdigen.io/vf=0000:3b:00.2"]
        );
        assert_eq!(
            resp.envs["PCIDEVICE_CDIGEN_IO_VF"],
            "0000:3b:00.3,0000:3b:00.2"
        );
        let info: serde_json::Value =
            serde_json::from_str(&resp.envs["PCIDEVICE_CDIGEN_IO_VF_INFO"]).unwrap();
        assert_eq!(
            info,
            serde_json::json!({
                "0000:3b:00.2": {"generic": {"deviceID": "0000:3b:00.2"},
                                 "rdma": {"uverbs": "/dev/infiniband/uverbs2", "rdma_cm": "/dev/infiniband/rdma_cm"}},
                "0000:3b:00.3": {"generic": {"deviceID": "0000:3b:00.3"},
                                 "rdma": {"uverbs": "/dev/infiniband/uverbs3", "rdma_cm": "/dev/infiniband/rdma_cm"}}
            })
        );
        assert_eq!(resp.envs.len(), 2);
        assert!(
            resp.devices.is_empty() && resp.mounts.is_empty(),
            "no legacy edits unless asked"
        );
    }

    #[test]
    fn vfio_devices_get_kubevirts_variable() {
        let mut d = vf("0000:81:00.0", 0);
        d.net = None;
        d.vfio = Some(VfioInfo {
            group: "42".into(),
            mode: "legacy".into(),
            ..Default::default()
        });
        d.nodes = vec![test_node("vfio-group", "42", "/dev/vfio/42", 511, 0)];
        let r = resource("cdigen.io/vfio", vec![entry(d, None)]);
        let es = entries(&r, &["0000:81:00.0".to_string()]).unwrap();
        let env = request_env(&r, &es);
        assert_eq!(
            env.into_iter().collect::<BTreeMap<_, _>>(),
            BTreeMap::from([(
                "PCI_RESOURCE_CDIGEN_IO_VFIO".to_string(),
                "0000:81:00.0".to_string()
            )])
        );
    }

    #[test]
    fn unknown_and_unhealthy_ids_are_refused_by_name() {
        let r = resource(
            "cdigen.io/vf",
            vec![entry(
                vf("0000:3b:00.2", 2),
                Some("/dev/infiniband/uverbs2 is missing"),
            )],
        );
        assert_eq!(
            entries(&r, &["0000:3b:00.2".to_string()])
                .unwrap_err()
                .to_string(),
            "resource cdigen.io/vf: device 0000:3b:00.2 is unhealthy: /dev/infiniband/uverbs2 is missing"
        );
        assert_eq!(
            entries(&r, &["x\u{1b}[31m".to_string()])
                .unwrap_err()
                .to_string(),
            "resource cdigen.io/vf: unknown device ID \"x\\u{1b}[31m\""
        );
        let long = "a".repeat(10_000);
        let msg = entries(&r, &[long]).unwrap_err().to_string();
        assert!(
            msg.len() < 200,
            "a hostile ID is bounded in the message: {msg}"
        );
    }

    #[test]
    fn a_device_named_twice_is_handed_out_once() {
        let r = resource(
            "cdigen.io/vf",
            vec![
                entry(vf("0000:3b:00.2", 2), None),
                entry(vf("0000:3b:00.3", 3), None),
            ],
        );
        let ids: Vec<String> = ["0000:3b:00.3", "0000:3b:00.2", "0000:3b:00.3"]
            .iter()
            .cycle()
            .take(3000)
            .map(|s| (*s).to_string())
            .collect();
        let es = entries(&r, &ids).unwrap();
        let got: Vec<&str> = es.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(got, ["0000:3b:00.3", "0000:3b:00.2"]);
    }

    #[test]
    fn legacy_edits_come_from_the_spec() {
        let spec = crate::cdi::codec::parse(
            br#"{"cdiVersion":"0.5.0","kind":"cdigen.io/vf",
                "containerEdits":{"deviceNodes":[{"path":"/dev/infiniband/rdma_cm"}]},
                "devices":[{"name":"0000:3b:00.2","containerEdits":{
                    "env":["PCIDEVICE_CDIGEN_IO_VF_0000_3B_00_2=0000:3b:00.2"],
                    "deviceNodes":[{"path":"/dev/infiniband/uverbs2","permissions":"rw"}],
                    "mounts":[{"hostPath":"/h","containerPath":"/c","options":["ro","bind"]}]}},
                  {"name":"0000:3b:00.3","containerEdits":{"deviceNodes":[{"path":"/dev/infiniband/uverbs3"}]}}]}"#,
            crate::cdi::Format::Json,
        )
        .unwrap();
        let mut r = resource("cdigen.io/vf", vec![entry(vf("0000:3b:00.2", 2), None)]);
        r.plan = Some(Arc::new(crate::generate::Planned {
            generator: "sriov".into(),
            file: "cdigen.io-vf.yaml".into(),
            spec: Some(spec),
            bytes: Vec::new(),
            devinfo: Vec::new(),
            device_info: false,
            devices: Vec::new(),
            named: Vec::new(),
        }));
        let es = entries(&r, &["0000:3b:00.2".to_string()]).unwrap();
        let resp = response(&r, &es, true);
        let nodes: Vec<(&str, &str, &str)> = resp
            .devices
            .iter()
            .map(|d| {
                (
                    d.container_path.as_str(),
                    d.host_path.as_str(),
                    d.permissions.as_str(),
                )
            })
            .collect();
        assert_eq!(
            nodes,
            [
                ("/dev/infiniband/rdma_cm", "/dev/infiniband/rdma_cm", "rw"),
                ("/dev/infiniband/uverbs2", "/dev/infiniband/uverbs2", "rw")
            ]
        );
        assert_eq!(resp.mounts.len(), 1);
        assert!(resp.mounts[0].read_only && resp.mounts[0].host_path == "/h");
        assert_eq!(
            resp.envs["PCIDEVICE_CDIGEN_IO_VF_0000_3B_00_2"],
            "0000:3b:00.2"
        );
        assert_eq!(resp.envs["PCIDEVICE_CDIGEN_IO_VF"], "0000:3b:00.2");
    }
}

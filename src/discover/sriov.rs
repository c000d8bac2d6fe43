//! SR-IOV backend: the virtual functions (VFs) of PCI physical functions.
//!
//! A PF has `sriov_totalvfs`; its VFs are the targets of its `virtfnN`
//! links (N is the VF index), and each VF links back with `physfn`. Every
//! PCI function with a `physfn` is a VF here, so a VF whose PF vanished or
//! whose `virtfn` link dangles is seen and reported instead of silently
//! missed.
//!
//! Per VF: its netdevs (`<vf>/net/*`); its RDMA devices
//! (`<vf>/infiniband/*`) with their char nodes (`infiniband_verbs/uverbsN`,
//! `infiniband_mad/umadN`, `issmN`, all under the VF) and the shared
//! `/dev/infiniband/rdma_cm`; the PF's netdev and, in switchdev mode, the
//! VF's representor, found among the PF's netdevs by `phys_port_name`
//! (`p0` is the uplink, `pf0vf<N>` the representor of VF N; the PF's `net/`
//! lists both, so the first entry is not the PF netdev there); `/dev/vhost-net`
//! and `/dev/net/tun` as optional nodes (only when both exist, as the
//! SR-IOV device plugin does); VFIO nodes when the VF is on vfio-pci; and a
//! vDPA device it carries.
//!
//! What a PF says about its VFs ([`super::pf::PfInfo`]) and the vDPA
//! devices are read once per discovery run, into the run's
//! [`super::pf::Cache`], which the vDPA backend shares; the RDMA char
//! devices and rdma_cm likewise ([`super::infiniband::Index`], shared
//! with the RDMA backend, which takes the RDMA devices that are not VFs').

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::infiniband::{self, Index};
use super::pci::read_function;
use super::pciids::PciIds;
use super::pf::Cache;
use super::vfio::{VfioShared, is_vfio_driver, misc_node, vfio_nodes};
use super::{Backend, Context, Error, Report};
use crate::model::{Device, NetInfo, Node};
use crate::root::{HostRoot, sys_path};

/// The SR-IOV backend.
#[derive(Debug, Clone, Copy)]
pub struct Sriov;

impl Backend for Sriov {
    fn name(&self) -> &'static str {
        "sriov"
    }

    fn precedence(&self) -> u8 {
        30
    }

    fn uevent_subsystems(&self) -> Option<&'static [&'static str]> {
        // VFs appear as PCI functions when sriov_numvfs is written; their
        // netdevs, RDMA devices and vhost-net/tun nodes follow, and their
        // RDMA char devices whenever ib_uverbs and ib_umad load.
        Some(&[
            "pci",
            "net",
            "infiniband",
            "infiniband_verbs",
            "infiniband_mad",
            "misc",
        ])
    }

    fn physical_only_subsystems(&self) -> &'static [&'static str] {
        // Only the netdevs and RDMA devices under a PCI function
        // (`<pci>/net/*`, `<pci>/infiniband/*`) are read.
        &["net", "infiniband"]
    }

    fn discover(&self, cx: &Context, report: &mut Report) -> Result<Vec<Device>, Error> {
        let root = cx.root;
        let root_err = |source| Error::Root {
            backend: "sriov",
            source,
        };
        let bus = sys_path("bus/pci/devices");
        let names = root.list_dir_opt(&bus).map_err(root_err)?;
        let vfs: Vec<String> = names
            .iter()
            .filter(|n| {
                root.link_name(&bus.join(n).join("physfn"))
                    .ok()
                    .flatten()
                    .is_some()
            })
            .cloned()
            .collect();
        // PFs with virtfn links that lead nowhere.
        for n in &names {
            let dir = bus.join(n);
            for l in cx.pf().virtfn_links(root, &dir) {
                if let Err(e) = root.resolve(&dir.join(&l)) {
                    report.warn(
                        dir.join(&l),
                        format!(
                            "{}; VF {l} of {n} is listed but its device is missing",
                            e.reason()
                        ),
                    );
                }
            }
        }
        if vfs.is_empty() {
            return Ok(Vec::new());
        }
        let ids = cx.pci_ids();
        let vdpa_by_parent = cx.pf().vdpa_by_parent(root);
        let rdma = cx.infiniband();
        let extra = shared_nodes(root, rdma, report);
        let mut devices = Vec::new();
        for name in vfs {
            let entry = bus.join(&name);
            let vf = Vf {
                ids,
                vdpa_by_parent: &vdpa_by_parent,
                shared: &extra,
                cache: cx.pf(),
                rdma,
            };
            if let Some(d) = read_vf(root, &entry, &vf, report) {
                devices.push(d);
            }
        }
        Ok(devices)
    }
}

/// Nodes every VF may use: rdma_cm, vhost-net and tun.
struct Shared {
    rdma_cm: Option<Node>,
    vhost_net: Vec<Node>,
    /// For VFs bound to vfio-pci.
    vfio: VfioShared,
}

fn shared_nodes(root: &HostRoot, rdma: &Index, report: &mut Report) -> Shared {
    infiniband::replay(&rdma.rdma_cm.warnings, report);
    let vhost = misc_node(root, "vhost-net", "vhost-net", "vhost-net", report);
    let tun = misc_node(root, "tun", "tun", "net/tun", report);
    let vhost_net = match (vhost, tun) {
        (Some(v), Some(t)) => vec![v, t],
        _ => Vec::new(),
    };
    Shared {
        rdma_cm: rdma.rdma_cm.node.clone(),
        vhost_net,
        vfio: VfioShared::default(),
    }
}

/// What every VF is read with.
struct Vf<'a> {
    ids: Option<&'a PciIds>,
    vdpa_by_parent: &'a BTreeMap<PathBuf, (crate::model::VdpaInfo, Option<Node>)>,
    shared: &'a Shared,
    cache: &'a Cache,
    rdma: &'a Index,
}

fn read_vf(root: &HostRoot, entry: &Path, vf: &Vf, report: &mut Report) -> Option<Device> {
    let Vf {
        ids,
        vdpa_by_parent,
        shared,
        cache,
        rdma,
    } = *vf;
    let name = entry.file_name()?.to_str()?.to_string();
    let dir = match root.resolve(entry) {
        Ok(d) => d,
        Err(e) => {
            report.warn(entry, format!("{}; skipping", e.reason()));
            return None;
        }
    };
    let pf_dir = match root.resolve(&dir.join("physfn")) {
        Ok(p) => p,
        Err(e) => {
            report.warn(
                dir.join("physfn"),
                format!(
                    "{}; the PF of VF {name} is gone, skipping the VF",
                    e.reason()
                ),
            );
            return None;
        }
    };
    let pf = pf_dir.file_name()?.to_str()?.to_string();
    let f = read_function(root, &dir, ids, report)?;
    let pf_info = cache.pf_info(root, &pf_dir);
    let vf_index = pf_info.vf_index.get(&name).copied();
    if vf_index.is_none() {
        report.warn(
            &pf_dir,
            format!("PF {pf} has no virtfn link to {name}; its VF index is unknown"),
        );
    }
    let pf_netdev = pf_info.netdev.clone();
    let representor = vf_index.and_then(|i| pf_info.representors.get(&i).cloned());
    let netdevs = root.list_dir_opt(&dir.join("net")).unwrap_or_default();
    let rdma_devices: Vec<String> = root
        .list_dir_opt(&dir.join("infiniband"))
        .unwrap_or_default();
    let mut nodes = Vec::new();
    let mut vfio = None;
    if f.driver.as_deref().is_some_and(is_vfio_driver) {
        let (info, n) = vfio_nodes(root, &dir, &f.info.address, &shared.vfio, report)?;
        vfio = Some(info);
        nodes.extend(n);
    }
    if !rdma_devices.is_empty() {
        // Every RDMA char device under the VF is its RDMA device's.
        for c in rdma.under(&dir) {
            infiniband::replay(&c.warnings, report);
            nodes.extend(c.node.clone());
        }
        nodes.extend(shared.rdma_cm.clone());
    }
    nodes.extend(shared.vhost_net.iter().cloned());
    let link_type = rdma_devices
        .first()
        .and_then(|r| {
            root.read_attr_opt(&dir.join("infiniband").join(r).join("ports/1/link_layer"))
                .ok()
                .flatten()
        })
        .map(|l| infiniband::link_type(&l).unwrap_or("ether").to_string())
        .or_else(|| match f.info.class.get(..6) {
            Some("0x0207") => Some("infiniband".to_string()),
            Some("0x0200") => Some("ether".to_string()),
            _ => None,
        });
    let mut vdpa = None;
    if let Some((v, node)) = vdpa_by_parent.get(&dir) {
        let mut v = v.clone();
        v.pci_address = Some(f.info.address.clone());
        vdpa = Some(v);
        nodes.extend(node.clone());
    }
    Some(Device {
        backend: "sriov".into(),
        id: f.info.address.clone(),
        sysfs_path: dir.display().to_string(),
        bus: "pci".into(),
        driver: f.driver,
        numa_node: f.numa_node,
        pci: Some(f.info),
        nodes,
        net: Some(NetInfo {
            netdevs,
            pf: Some(pf),
            pf_netdev,
            vf_index,
            representor,
            rdma_devices,
            link_type,
        }),
        vfio,
        vdpa,
        ..Default::default()
    })
}

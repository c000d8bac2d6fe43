//! vDPA backend: devices on the vdpa bus (`/sys/bus/vdpa/devices/*`).
//!
//! Names are arbitrary (`vdpa0`, `vdpa:0000:3b:00.5`). The parent is the
//! directory the device really lives in: for mlx5 the PCI function (a VF),
//! for simulators a root device. The driver is the basename of
//! `<vdpa>/driver`:
//! - `vhost_vdpa`: a child `vhost-vdpa-N` with a `dev` file (it has no class
//!   and an empty `uevent`) gives `/dev/vhost-vdpa-N`;
//! - `virtio_vdpa`: a `virtioN` device, next to the vdpa device or under
//!   it, carries a netdev; there is no node, so such a device gets a
//!   device-info file but no CDI device node;
//! - no driver: reported and skipped.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use super::pci::link;
use super::sriov::{PfInfo, pf_info};
use super::vfio::require_host_node;
use super::{Backend, Context, Error, Report};
use crate::model::{Device, NetInfo, Node, VdpaInfo};
use crate::root::{HostRoot, sys_path};
use crate::sysfs::{PciAddress, node_number};

/// The vDPA backend.
#[derive(Debug, Clone, Copy)]
pub struct Vdpa;

/// One vdpa device as sysfs shows it.
struct Found {
    real: PathBuf,
    info: VdpaInfo,
    node: Option<Node>,
}

fn read_one(root: &HostRoot, name: &str, report: &mut Report) -> Option<Found> {
    let entry = sys_path("bus/vdpa/devices").join(name);
    let real = match root.resolve(&entry) {
        Ok(r) => r,
        Err(e) => {
            report.warn(
                &entry,
                format!("{}; skipping vDPA device {name}", e.reason()),
            );
            return None;
        }
    };
    let parent = real.parent()?.to_path_buf();
    let pci_address = parent
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| n.parse::<PciAddress>().is_ok())
        .map(str::to_string);
    let kernel_driver = link(root, &real.join("driver"), report);
    let mut info = VdpaInfo {
        name: name.to_string(),
        driver: None,
        path: None,
        pci_address,
        netdev: None,
    };
    let mut node = None;
    match kernel_driver.as_deref() {
        Some("vhost_vdpa") => {
            info.driver = Some("vhost".into());
            let child = root
                .list_dir_opt(&real)
                .unwrap_or_default()
                .into_iter()
                .find(|c| node_number(c, "vhost-vdpa-").is_some());
            match child {
                Some(c) => {
                    node = super::devnode::read_node(
                        root,
                        &real.join(&c),
                        &c,
                        "vhost-vdpa",
                        &c,
                        report,
                    )
                    .and_then(|n| require_host_node(root, n, report));
                    info.path = node.as_ref().map(|n| n.path.clone());
                }
                None => report.warn(
                    &real,
                    format!(
                        "vDPA device {name} is bound to vhost_vdpa but has no vhost-vdpa-N child"
                    ),
                ),
            }
        }
        Some("virtio_vdpa") => {
            info.driver = Some("virtio".into());
            // The virtio device sits under the vdpa device or next to it.
            let virtio = [real.clone(), parent.clone()].into_iter().find_map(|d| {
                root.list_dir_opt(&d)
                    .unwrap_or_default()
                    .into_iter()
                    .find(|c| node_number(c, "virtio").is_some())
            });
            match virtio {
                Some(v) => {
                    info.path = Some(
                        sys_path(&format!("bus/virtio/devices/{v}"))
                            .display()
                            .to_string(),
                    );
                    let dir = if root.exists(&real.join(&v)) {
                        real.join(&v)
                    } else {
                        parent.join(&v)
                    };
                    info.netdev = root
                        .list_dir_opt(&dir.join("net"))
                        .unwrap_or_default()
                        .into_iter()
                        .next();
                }
                None => report.warn(
                    &real,
                    format!(
                        "vDPA device {name} is bound to virtio_vdpa but no virtio device was found"
                    ),
                ),
            }
        }
        Some(other) => report.warn(
            real.join("driver"),
            format!("vDPA device {name} is bound to an unknown driver {other:?}; skipping it"),
        ),
        None => report.warn(
            &real,
            format!("vDPA device {name} has no driver bound; skipping it"),
        ),
    }
    Some(Found { real, info, node })
}

/// vDPA devices keyed by the real path of their parent (for the SR-IOV
/// backend: the VF that carries them). Devices without a usable driver are
/// left out.
pub(crate) fn by_parent(root: &HostRoot) -> BTreeMap<PathBuf, (VdpaInfo, Option<Node>)> {
    let mut quiet = Report::default();
    let mut out = BTreeMap::new();
    for name in root
        .list_dir_opt(&sys_path("bus/vdpa/devices"))
        .unwrap_or_default()
    {
        // Problems are reported once, by the vDPA backend itself.
        if let Some(f) = read_one(root, &name, &mut quiet)
            && f.info.driver.is_some()
            && f.info.path.is_some()
            && let Some(parent) = f.real.parent()
        {
            out.insert(parent.to_path_buf(), (f.info, f.node));
        }
    }
    out
}

impl Backend for Vdpa {
    fn name(&self) -> &'static str {
        "vdpa"
    }

    fn precedence(&self) -> u8 {
        30
    }

    fn uevent_subsystems(&self) -> Option<&'static [&'static str]> {
        Some(&["vdpa", "vhost-vdpa", "virtio", "net", "pci"])
    }

    fn physical_only_subsystems(&self) -> &'static [&'static str] {
        // Only the netdev under a virtio device (`<virtio>/net/*`) is read.
        &["net"]
    }

    fn discover(&self, cx: &Context, report: &mut Report) -> Result<Vec<Device>, Error> {
        let root = cx.root;
        let names = root
            .list_dir_opt(&sys_path("bus/vdpa/devices"))
            .map_err(|source| Error::Root {
                backend: "vdpa",
                source,
            })?;
        let mut devices = Vec::new();
        let mut pf_cache: HashMap<PathBuf, PfInfo> = HashMap::new();
        for name in names {
            let Some(f) = read_one(root, &name, report) else {
                continue;
            };
            if f.info.driver.is_none() || f.info.path.is_none() {
                continue;
            }
            let parent = f.real.parent().map(Path::to_path_buf).unwrap_or_default();
            let net = f.info.pci_address.as_ref().map(|address| {
                let pf_dir = root.resolve(&parent.join("physfn")).ok();
                // What the PF says about its VFs, read once per PF.
                let pf = pf_dir.as_ref().map(|dir| {
                    pf_cache
                        .entry(dir.clone())
                        .or_insert_with(|| pf_info(root, dir))
                });
                let vf_index = pf.as_ref().and_then(|p| p.vf_index.get(address).copied());
                let pf_netdev = pf.as_ref().and_then(|p| p.netdev.clone());
                let representor = vf_index
                    .and_then(|i| pf.as_ref().and_then(|p| p.representors.get(&i).cloned()));
                NetInfo {
                    netdevs: f.info.netdev.iter().cloned().collect(),
                    pf: pf_dir
                        .as_ref()
                        .and_then(|p| p.file_name())
                        .and_then(|n| n.to_str())
                        .map(str::to_string),
                    pf_netdev,
                    vf_index,
                    representor,
                    ..Default::default()
                }
            });
            devices.push(Device {
                backend: "vdpa".into(),
                id: name.clone(),
                sysfs_path: f.real.display().to_string(),
                bus: "vdpa".into(),
                driver: f.info.driver.as_ref().map(|d| format!("{d}_vdpa")),
                nodes: f.node.into_iter().collect(),
                net,
                vdpa: Some(f.info),
                ..Default::default()
            });
        }
        Ok(devices)
    }
}

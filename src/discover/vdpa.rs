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
//!
//! The bus is read once per discovery run into the run's
//! [`super::pf::Cache`], which the SR-IOV backend reads too (for the VFs
//! that carry a vDPA device); this backend reports what reading found, and
//! gives a device on a VF its PF's view of it ([`super::pf::PfInfo`]).

use std::path::Path;

use super::{Backend, Context, Error, Report};
use crate::model::{Device, NetInfo};

/// The vDPA backend.
#[derive(Debug, Clone, Copy)]
pub struct Vdpa;

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
        let entries = cx.pf().vdpa_devices(root).map_err(|source| Error::Root {
            backend: "vdpa",
            source,
        })?;
        let mut devices = Vec::new();
        for e in entries {
            for w in &e.warnings {
                report.warn(w.path.clone(), w.message.clone());
            }
            let Some(f) = e.device.clone() else {
                continue;
            };
            if f.info.driver.is_none() || f.info.path.is_none() {
                continue;
            }
            let parent = f.real.parent().map(Path::to_path_buf).unwrap_or_default();
            let net = f.info.pci_address.as_ref().map(|address| {
                let pf_dir = root.resolve(&parent.join("physfn")).ok();
                // What the PF says about its VFs, read once per PF.
                let pf = pf_dir.as_ref().map(|dir| cx.pf().pf_info(root, dir));
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
                id: e.name.clone(),
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

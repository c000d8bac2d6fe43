//! What the SR-IOV and vDPA backends share, read once per discovery run
//! and kept in the run's [`Cache`] ([`super::Context::pf`]), so that when
//! both run neither reads again what the other read:
//!
//! - what a PF says about its VFs ([`PfInfo`]: the VF indices from its
//!   `virtfnN` links, its netdev, the VF representors), and the `virtfnN`
//!   links of every PCI function;
//! - the vDPA devices (`/sys/bus/vdpa/devices/*`, see [`super::vdpa`]),
//!   with the warnings reading them gave, and their index by the device
//!   they live under ([`Cache::vdpa_by_parent`]: for the SR-IOV backend,
//!   the VF that carries them).
//!
//! Everything is read through the [`HostRoot`].

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use super::pci::link;
use super::vfio::require_host_node;
use super::{Report, Warning};
use crate::model::{Node, VdpaInfo};
use crate::root::{self, HostRoot, sys_path};
use crate::sysfs::{PciAddress, node_number};

/// Where the vdpa bus lists its devices.
const VDPA_BUS: &str = "bus/vdpa/devices";

/// What one discovery run has read of PFs and vDPA devices.
#[derive(Debug, Default)]
pub struct Cache {
    /// `virtfnN` links by the real path of the PCI function.
    virtfns: Mutex<HashMap<PathBuf, Vec<String>>>,
    /// PF information by the real path of the PF.
    pfs: Mutex<HashMap<PathBuf, Arc<PfInfo>>>,
    /// The vdpa bus, once listed.
    vdpa: OnceLock<Vec<VdpaEntry>>,
}

/// One entry of the vdpa bus as read.
#[derive(Debug, Clone)]
pub struct VdpaEntry {
    /// Its name on the bus (`vdpa0`).
    pub name: String,
    /// The device; `None` when it could not be resolved.
    pub device: Option<VdpaDevice>,
    /// What was wrong with it, for the vDPA backend to report.
    pub warnings: Vec<Warning>,
}

impl Cache {
    /// The `virtfnN` links of the PCI function at `dir` (any path to it),
    /// in VF index order; none when it cannot be resolved or listed.
    pub fn virtfn_links(&self, root: &HostRoot, dir: &Path) -> Vec<String> {
        let Ok(real) = root.resolve(dir) else {
            return Vec::new();
        };
        if let Some(hit) = lock(&self.virtfns).get(&real) {
            return hit.clone();
        }
        let links = read_virtfn_links(root, &real);
        lock(&self.virtfns).insert(real, links.clone());
        links
    }

    /// What the PF at real path `pf_dir` says about its VFs.
    pub fn pf_info(&self, root: &HostRoot, pf_dir: &Path) -> Arc<PfInfo> {
        if let Some(hit) = lock(&self.pfs).get(pf_dir) {
            return Arc::clone(hit);
        }
        let info = Arc::new(read_pf_info(root, self, pf_dir));
        lock(&self.pfs).insert(pf_dir.to_path_buf(), Arc::clone(&info));
        info
    }

    /// The entries of the vdpa bus, in name order.
    ///
    /// # Errors
    /// When the bus cannot be listed (then nothing is kept, and a later
    /// call lists it again).
    pub fn vdpa_devices(&self, root: &HostRoot) -> Result<&[VdpaEntry], root::Error> {
        if let Some(v) = self.vdpa.get() {
            return Ok(v);
        }
        let names = root.list_dir_opt(&sys_path(VDPA_BUS))?;
        let entries = names
            .into_iter()
            .map(|name| {
                let mut report = Report::default();
                let device = read_one(root, &name, &mut report);
                VdpaEntry {
                    name,
                    device,
                    warnings: report.warnings,
                }
            })
            .collect();
        Ok(self.vdpa.get_or_init(|| entries))
    }

    /// The usable vDPA devices (with a driver and a node or virtio device)
    /// keyed by the real path of their parent (for the SR-IOV backend: the
    /// VF that carries them); none when the bus cannot be listed. Problems
    /// are the vDPA backend's to report.
    pub fn vdpa_by_parent(&self, root: &HostRoot) -> BTreeMap<PathBuf, (VdpaInfo, Option<Node>)> {
        let mut out = BTreeMap::new();
        for e in self.vdpa_devices(root).unwrap_or_default() {
            if let Some(f) = &e.device
                && f.info.driver.is_some()
                && f.info.path.is_some()
                && let Some(parent) = f.real.parent()
            {
                out.insert(parent.to_path_buf(), (f.info.clone(), f.node.clone()));
            }
        }
        out
    }
}

/// The map behind `m`, also after a panic elsewhere (it only caches reads).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `virtfnN` links of the PCI function at real path `dir`, in VF index
/// order; none when it cannot be listed.
fn read_virtfn_links(root: &HostRoot, dir: &Path) -> Vec<String> {
    let mut v: Vec<(u32, String)> = root
        .list_dir_opt(dir)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|n| node_number(&n, "virtfn").map(|i| (i, n)))
        .collect();
    v.sort();
    v.into_iter().map(|(_, n)| n).collect()
}

/// What a PF says about its VFs: each VF's index (from `virtfnN`), the
/// PF's netdev, and the VF representors by index. Read once per PF and
/// discovery run ([`Cache::pf_info`]).
#[derive(Debug, Clone, Default)]
pub struct PfInfo {
    /// VF PCI address → VF index.
    pub vf_index: BTreeMap<String, u32>,
    /// The PF's netdev: the uplink (`phys_port_name` `p<N>`) in switchdev
    /// mode, else the first entry of its `net/`.
    pub netdev: Option<String>,
    /// VF index → representor netdev (`phys_port_name` `pf<M>vf<index>`).
    pub representors: BTreeMap<u32, String>,
}

/// Reads a PF's [`PfInfo`] (its `virtfnN` links from `cache`). In
/// switchdev mode the PF's `net/` lists the uplink and every representor;
/// without readable port names (legacy mode) the first entry is the PF's
/// netdev and there are no representors.
fn read_pf_info(root: &HostRoot, cache: &Cache, pf_dir: &Path) -> PfInfo {
    let mut info = PfInfo::default();
    for l in cache.virtfn_links(root, pf_dir) {
        if let (Some(i), Ok(Some(target))) =
            (node_number(&l, "virtfn"), root.link_name(&pf_dir.join(&l)))
        {
            info.vf_index.insert(target, i);
        }
    }
    let netdevs = root.list_dir_opt(&pf_dir.join("net")).unwrap_or_default();
    let mut uplink = None;
    for n in &netdevs {
        let Some(port) = root
            .read_attr_opt(&pf_dir.join("net").join(n).join("phys_port_name"))
            .ok()
            .flatten()
        else {
            continue;
        };
        if node_number(&port, "p").is_some() {
            if uplink.is_none() {
                uplink = Some(n.clone());
            }
        } else if let Some((head, vf)) = port.split_once("vf") {
            let pf_part_ok = head.starts_with("pf") || head.starts_with('c');
            if let (true, Ok(i)) = (pf_part_ok, vf.parse::<u32>()) {
                info.representors.entry(i).or_insert_with(|| n.clone());
            }
        }
    }
    info.netdev = uplink.or_else(|| netdevs.first().cloned());
    info
}

/// One vdpa device as sysfs shows it.
#[derive(Debug, Clone)]
pub struct VdpaDevice {
    /// Its real sysfs path; the parent directory is the device it lives
    /// under (a VF for mlx5).
    pub real: PathBuf,
    /// What it is: name, driver, node or virtio device, netdev, PCI
    /// address of the parent.
    pub info: VdpaInfo,
    /// `/dev/vhost-vdpa-N` (driver `vhost_vdpa`).
    pub node: Option<Node>,
}

/// Reads one entry of the vdpa bus, with warnings for what is wrong;
/// `None` when it cannot be resolved.
fn read_one(root: &HostRoot, name: &str, report: &mut Report) -> Option<VdpaDevice> {
    let entry = sys_path(VDPA_BUS).join(name);
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
    Some(VdpaDevice { real, info, node })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discover::{Backend, Context, sriov::Sriov, vdpa::Vdpa};
    use crate::model::Device;

    fn run(backend: &dyn Backend, cx: &Context) -> (Vec<Device>, Vec<Warning>) {
        let mut report = Report::default();
        let devices = backend.discover(cx, &mut report).unwrap();
        (devices, report.warnings)
    }

    #[test]
    fn sriov_and_vdpa_read_the_pfs_and_the_vdpa_bus_once_per_run() {
        // The virtio-vdpa machine (VFs carrying vDPA devices, an unbound
        // one that gives a warning, a PF in switchdev mode), copied so that
        // it can change between the backends of one run.
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("root");
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/virtio-vdpa/root");
        let copied = std::process::Command::new("cp")
            .arg("-a")
            .arg(&fixture)
            .arg(&base)
            .status()
            .unwrap();
        assert!(copied.success());
        let alone = |backend: &dyn Backend| {
            let root = HostRoot::open(&base).unwrap();
            run(backend, &Context::new(&root))
        };
        let sriov = alone(&Sriov);
        let vdpa = alone(&Vdpa);
        assert!(sriov.0.iter().any(|d| d.vdpa.is_some()), "{sriov:?}");
        assert!(
            vdpa.0
                .iter()
                .any(|d| d.net.as_ref().is_some_and(|n| n.representor.is_some())),
            "{vdpa:?}"
        );
        assert!(!vdpa.1.is_empty(), "the unbound vdpa1 is reported");
        // One run of both: the vDPA backend reports what the SR-IOV backend
        // read of the vdpa bus and the PF, not what is there now.
        let root = HostRoot::open(&base).unwrap();
        let cx = Context::new(&root);
        assert_eq!(run(&Sriov, &cx), sriov);
        std::fs::remove_dir_all(base.join("sys/bus/vdpa")).unwrap();
        std::fs::remove_dir_all(base.join("sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/net"))
            .unwrap();
        assert_eq!(run(&Vdpa, &cx), vdpa);
        // A new run reads again.
        assert_ne!(alone(&Vdpa), vdpa);
    }
}

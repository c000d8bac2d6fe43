//! NVIDIA backend: GPUs and MIG devices from procfs and sysfs alone (no
//! NVML needed, so it works early in boot and with a broken library).
//!
//! - GPUs: `/proc/driver/nvidia/gpus/<BDF>/information` (model, UUID,
//!   `Device Minor`, bus location); excluded GPUs are skipped. The PCI
//!   device under `/sys/bus/pci/devices/<BDF>` gives vendor, NUMA node and
//!   DRM nodes, and is the key under which this backend claims the GPU from
//!   the DRM backend. GPUs whose files say the same `Device Minor` are all
//!   skipped with a warning (each would get the one `/dev/nvidiaN`), and a
//!   GPU bound to `nvidia` without a procfs entry is reported.
//! - Numbers: `/dev/nvidiaN` is major `nvidia` (or `nvidia-frontend` before
//!   driver 550.40) from `/proc/devices`, minor = `Device Minor`;
//!   `nvidiactl` 255 and `nvidia-modeset` 254 share that major;
//!   `nvidia-uvm` and `nvidia-uvm-tools` are minors 0 and 1 of `nvidia-uvm`;
//!   MIG capability nodes `/dev/nvidia-caps/nvidia-capN` use `nvidia-caps`.
//! - Control nodes the driver creates lazily (`nvidia-uvm` appears when a
//!   CUDA program first runs `nvidia-modprobe`): when their module is loaded
//!   (its major is in `/proc/devices`), they are written with their numbers
//!   even if the host has not created them, so the container gets them;
//!   when it is not loaded, they are left out with a warning saying CUDA
//!   will not work.
//! - MIG: configured GPU instances are the `gi<G>/` directories under
//!   `/proc/driver/nvidia/capabilities/gpu<minor>/mig/`, compute instances
//!   their `ci<C>/` subdirectories; their `access` files give the cap
//!   minors. A MIG device needs its parent's `/dev/nvidiaN` and both cap
//!   nodes. The parent GPU stays requestable, as with `nvidia-ctk`.
//! - Index order is PCI bus order, as `nvidia-smi` numbers GPUs.
//! - IMEX channels whose nodes exist ([`imex`]), where the driver has GPUs.
//! - The management device ([`management`]): every GPU node and the
//!   privileged nodes (MIG config/monitor, fabric management, NVLink,
//!   NVSwitches) for Fabric Manager, DCGM and the like.
//! - GPUDirect's devices ([`gpudirect`]): GDRCopy's `/dev/gdrdrv` and GPUDirect
//!   Storage's `/dev/nvidia-fsN`, where their modules are loaded.
//! - NVML's XID events, for the servers' device health ([`events`]).

pub mod driver;
pub mod events;
pub mod gpudirect;
pub mod imex;
pub mod management;
pub mod nvml;
pub mod proc;

use std::path::{Path, PathBuf};

use super::devnode::{self, OnHost, on_host};
use super::pci::read_function;
use super::{Backend, Context, Error, Report};
use crate::model::{Device, MigInfo, Node, NvidiaInfo};
use crate::root::{HostRoot, dev_path, proc_path, sys_path};
use crate::sysfs::node_number;

/// The NVIDIA backend.
#[derive(Debug, Clone, Copy)]
pub struct Nvidia;

fn char_node(role: &str, path: PathBuf, major: u32, minor: u32) -> Node {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    Node {
        role: role.to_string(),
        name,
        path: path.display().to_string(),
        node_type: "c".into(),
        major,
        minor,
        host: None,
    }
}

/// The node `path` of `major:minor`, with the host's mode and owner. A
/// character device there with other numbers, or something else there,
/// is skipped with a warning; a missing one is written with its numbers
/// when `write_missing` (a node the driver's tools make on demand), else
/// left out.
pub(super) fn numbered_node(
    root: &HostRoot,
    role: &str,
    path: PathBuf,
    major: u32,
    minor: u32,
    write_missing: bool,
    report: &mut Report,
) -> Option<Node> {
    let node = char_node(role, path.clone(), major, minor);
    match on_host(root, &node) {
        OnHost::Char(e) if (e.major, e.minor) != (major, minor) => {
            report.warn(
                &path,
                format!(
                    "is {}:{}, not {major}:{minor} as /proc/devices says; leaving it out",
                    e.major, e.minor
                ),
            );
            None
        }
        OnHost::Char(e) => Some(devnode::with_host(node, &e)),
        OnHost::Other(kind) => {
            report.warn(
                &path,
                format!("not a character device (a {kind}); leaving it out"),
            );
            None
        }
        OnHost::Missing | OnHost::Unreadable(_) => write_missing.then_some(node),
    }
}

/// Looks a node up in `/dev`: mode and owner when it is there; `Err` with
/// a reason when something else is there.
fn with_host(root: &HostRoot, node: Node) -> Result<Node, String> {
    match on_host(root, &node) {
        OnHost::Char(e) => Ok(devnode::with_host(node, &e)),
        OnHost::Other(kind) => Err(format!("not a character device (a {kind})")),
        OnHost::Missing | OnHost::Unreadable(_) => Ok(node),
    }
}

impl Backend for Nvidia {
    fn name(&self) -> &'static str {
        "nvidia"
    }

    fn precedence(&self) -> u8 {
        40
    }

    fn uevent_subsystems(&self) -> Option<&'static [&'static str]> {
        // Loading the driver (module), GPUs binding it (pci) and nvidia-drm
        // (drm). MIG reconfiguration sends no event: `watch` polls for it
        // (crate::watch::mig); nodes made by nvidia-modprobe, on its
        // periodic re-check.
        Some(&["pci", "module", "drm"])
    }

    fn discover(&self, cx: &Context, report: &mut Report) -> Result<Vec<Device>, Error> {
        let root = cx.root;
        let gpus_dir = proc_path("driver/nvidia/gpus");
        let entries = root.list_dir_opt(&gpus_dir).map_err(|source| Error::Root {
            backend: "nvidia",
            source,
        })?;
        unlisted_gpus(root, &entries, report);
        if entries.is_empty() {
            return Ok(Vec::new());
        }
        let version = root
            .read_attr_opt(&proc_path("driver/nvidia/version"))
            .ok()
            .flatten()
            .and_then(|t| proc::parse_driver_version(&t));
        let devices_file = proc_path("devices");
        let majors = match root.read_attr(&devices_file) {
            Ok(t) => proc::parse_char_majors(&t),
            Err(e) => {
                report.warn(
                    &devices_file,
                    format!(
                        "{}; cannot number NVIDIA nodes, skipping NVIDIA GPUs",
                        e.reason()
                    ),
                );
                return Ok(Vec::new());
            }
        };
        let Some(major) = proc::nvidia_major(&majors) else {
            report.warn(
                &devices_file,
                "no `nvidia` (or `nvidia-frontend`) character device: the driver is not loaded; skipping NVIDIA GPUs",
            );
            return Ok(Vec::new());
        };
        let control = control_nodes(
            root,
            major,
            majors.get("nvidia-uvm").copied(),
            majors.contains_key("nvidia-modeset"),
            report,
        );
        let driver = std::sync::Arc::new(driver::find(root, version.as_deref(), report));
        let caps_major = majors.get("nvidia-caps").copied();
        let mig_admin = mig_admin_nodes(root, caps_major);
        let ids = cx.pci_ids();

        let mut gpus: Vec<Device> = Vec::new();
        let mut gpu_nodes: Vec<Node> = Vec::new();
        for (bdf, info_path, info) in
            unique_minors(gpu_information(root, &gpus_dir, entries, report), report)
        {
            if info.bus_location != bdf {
                report.warn(
                    &info_path,
                    format!(
                        "bus location {} differs from the directory name; using {}",
                        info.bus_location, info.bus_location
                    ),
                );
            }
            let pci_entry = sys_path(&format!("bus/pci/devices/{}", info.bus_location));
            let Ok(pci_dir) = root.resolve(&pci_entry) else {
                report.warn(
                    &pci_entry,
                    "the GPU listed in procfs has no PCI device in sysfs; skipping it",
                );
                continue;
            };
            let Some(f) = read_function(root, &pci_dir, ids, report) else {
                continue;
            };
            let gpu_node = char_node(
                "nvidia-gpu",
                dev_path(&format!("nvidia{}", info.minor)),
                major,
                info.minor,
            );
            let gpu_node = match root.dev_entry(Path::new(&gpu_node.path)) {
                Ok(None) if root.has_devfs() => {
                    report.warn(
                        &gpu_node.path,
                        format!(
                            "GPU {} ({}) is in procfs but its node is missing from /dev; writing it with its numbers ({major}:{})",
                            info.bus_location, info.uuid, info.minor
                        ),
                    );
                    gpu_node
                }
                _ => match with_host(root, gpu_node) {
                    Ok(n) => n,
                    Err(why) => {
                        report.warn(
                            dev_path(&format!("nvidia{}", info.minor)),
                            format!("{why}; skipping this GPU"),
                        );
                        continue;
                    }
                },
            };
            gpu_nodes.push(gpu_node.clone());
            let mut nodes = vec![gpu_node.clone()];
            let drm = drm_nodes(root, &pci_dir, report);
            // udev's /dev/dri/by-path links, as the DRM backend records them.
            let links =
                devnode::by_path_links(root, &format!("pci-{}", f.info.address), &drm, report);
            nodes.extend(drm);
            nodes.extend(control.iter().cloned());
            let migs = mig_devices(root, info.minor, caps_major, report);
            if !migs.is_empty() {
                // MIG management (nvidia-smi mig ...) needs these; generators
                // give them only when they ask for the roles.
                nodes.extend(mig_admin.iter().cloned());
            }
            let nv = NvidiaInfo {
                model: info.model.clone(),
                gpu_uuid: info.uuid.clone(),
                minor: info.minor,
                driver_version: version.clone(),
                mig_enabled: !migs.is_empty(),
                mig: None,
            };
            for (gi, ci, gi_node, ci_node) in migs {
                let mut mig_nodes = vec![gpu_node.clone(), gi_node, ci_node];
                mig_nodes.extend(control.iter().cloned());
                gpus.push(Device {
                    backend: "nvidia".into(),
                    id: format!("{}/gi{gi}/ci{ci}", f.info.address),
                    sysfs_path: format!("{}/mig/gi{gi}/ci{ci}", pci_dir.display()),
                    bus: "pci".into(),
                    pci: Some(f.info.clone()),
                    driver: f.driver.clone(),
                    numa_node: f.numa_node,
                    nodes: mig_nodes,
                    driver_files: Some(driver.clone()),
                    nvidia: Some(NvidiaInfo {
                        mig: Some(MigInfo {
                            parent: f.info.address.clone(),
                            gi,
                            ci,
                            uuid: None,
                            profile: None,
                        }),
                        ..nv.clone()
                    }),
                    ..Default::default()
                });
            }
            gpus.push(Device {
                backend: "nvidia".into(),
                id: f.info.address.clone(),
                sysfs_path: pci_dir.display().to_string(),
                bus: "pci".into(),
                pci: Some(f.info),
                driver: f.driver,
                numa_node: f.numa_node,
                nodes,
                links,
                driver_files: Some(driver.clone()),
                nvidia: Some(nv),
                ..Default::default()
            });
        }
        // NVML: the system's for the host itself, else the driver root's
        // own file when it may be trusted; never with --no-nvml.
        #[cfg(feature = "nvml")]
        if !gpus.is_empty() {
            match nvml::Library::for_root(root, &driver.files) {
                Ok(lib) => nvml::enrich(&mut gpus, &lib, report),
                Err(why) => tracing::info!("{why}"),
            }
        }
        if !gpus.is_empty() {
            gpus.extend(imex::channels(root, &majors, report));
            let mut m = management::device(root, &gpu_nodes, &control, &majors, report);
            m.driver_files = Some(driver.clone());
            gpus.push(m);
            gpus.extend(gpudirect::devices(root, &majors, report));
        }
        Ok(gpus)
    }
}

/// Warns about each GPU (a display-class PCI function: NVSwitches are
/// bound to `nvidia` too and have no entry) bound to the `nvidia` driver
/// that has no `/proc/driver/nvidia/gpus/<address>` among `entries`. That
/// entry gives the GPU's `Device Minor` (N of `/dev/nvidiaN`) and UUID, so
/// without it the GPU gets no NVIDIA device. It happens while the driver
/// probes the GPU (the kernel links a device to its driver before calling
/// the driver's probe, and `nv_pci_probe` adds the entry near its end) and
/// when the driver could not create the entry (it goes on without it).
fn unlisted_gpus(root: &HostRoot, entries: &[String], report: &mut Report) {
    let driver_dir = sys_path("bus/pci/drivers/nvidia");
    for name in root.list_dir_opt(&driver_dir).unwrap_or_default() {
        if name.parse::<crate::sysfs::PciAddress>().is_err() || entries.contains(&name) {
            continue;
        }
        let class = root
            .read_attr_opt(&driver_dir.join(&name).join("class"))
            .ok()
            .flatten()
            .and_then(|c| crate::sysfs::parse_hex_id(&c, 6));
        if class.is_some_and(|c| c >> 16 == 0x03) {
            report.warn(
                driver_dir.join(&name),
                format!(
                    "GPU {name} is bound to nvidia but has no {} entry, which gives its \
                     /dev/nvidiaN minor and UUID (the driver is still probing it, or could not \
                     create the entry: see the kernel log); it is in no NVIDIA spec until it has one",
                    proc_path("driver/nvidia/gpus").join(&name).display()
                ),
            );
        }
    }
}

/// The `information` file of each GPU directory (`entries` of
/// `gpus_dir`), parsed: (directory name, file, contents). Unreadable or
/// malformed files and GPUs the driver excludes are skipped with a
/// warning.
fn gpu_information(
    root: &HostRoot,
    gpus_dir: &Path,
    entries: Vec<String>,
    report: &mut Report,
) -> Vec<(String, PathBuf, proc::Information)> {
    let mut out = Vec::new();
    for bdf in entries {
        let info_path = gpus_dir.join(&bdf).join("information");
        let info = match root
            .read_attr(&info_path)
            .map_err(|e| e.reason())
            .and_then(|t| proc::parse_information(&t).map_err(|e| e.to_string()))
        {
            Ok(i) => i,
            Err(e) => {
                report.warn(&info_path, format!("{e}; skipping this GPU"));
                continue;
            }
        };
        if info.excluded {
            report.warn(
                &info_path,
                "GPU excluded by the driver (NVreg_ExcludedGpus); skipping it",
            );
            continue;
        }
        out.push((bdf, info_path, info));
    }
    out
}

/// Keeps the GPUs whose `Device Minor` no other GPU claims. Two GPUs with
/// one minor would both get `/dev/nvidiaN`, which is only one of them (and
/// which one cannot be told), and share its MIG capability files: like a
/// name two devices would share, the minor goes to neither, each skipped
/// with a warning naming the other.
fn unique_minors(
    infos: Vec<(String, PathBuf, proc::Information)>,
    report: &mut Report,
) -> Vec<(String, PathBuf, proc::Information)> {
    let mut by_minor: std::collections::BTreeMap<u32, Vec<&str>> =
        std::collections::BTreeMap::new();
    for (_, _, info) in &infos {
        by_minor
            .entry(info.minor)
            .or_default()
            .push(info.bus_location.as_str());
    }
    let shared: std::collections::BTreeMap<u32, String> = by_minor
        .into_iter()
        .filter(|(_, gpus)| gpus.len() > 1)
        .map(|(minor, gpus)| (minor, gpus.join(" and ")))
        .collect();
    infos
        .into_iter()
        .filter(|(_, info_path, info)| match shared.get(&info.minor) {
            None => true,
            Some(gpus) => {
                report.warn(
                    info_path,
                    format!(
                        "Device Minor {minor} is claimed by GPUs {gpus}: /dev/nvidia{minor} would be \
                         given for each but is only one of them; skipping GPU {}",
                        info.bus_location,
                        minor = info.minor,
                    ),
                );
                false
            }
        })
        .collect()
}

/// `nvidiactl`, `nvidia-modeset`, `nvidia-uvm`, `nvidia-uvm-tools`: the
/// nodes of the [`NVIDIA_CONTROL_ROLES`](crate::model::NVIDIA_CONTROL_ROLES).
fn control_nodes(
    root: &HostRoot,
    major: u32,
    uvm: Option<u32>,
    modeset_named: bool,
    report: &mut Report,
) -> Vec<Node> {
    let mut out = vec![char_node(
        "nvidia-control",
        dev_path("nvidiactl"),
        major,
        255,
    )];
    // nvidia-modeset is only there with the modeset module: loaded when
    // its node exists, when /proc/devices names it (drivers >= 550.40), or
    // when /sys/module/nvidia_modeset exists. Then it is written with its
    // numbers, like nvidia-uvm, even if the node was not created yet.
    let modeset = char_node("nvidia-modeset", dev_path("nvidia-modeset"), major, 254);
    let loaded = matches!(root.dev_entry(Path::new(&modeset.path)), Ok(Some(_)))
        || modeset_named
        || root.exists(&sys_path("module/nvidia_modeset"))
        || !root.has_devfs();
    if loaded {
        out.push(modeset);
    }
    match uvm {
        Some(m) => {
            out.push(char_node("nvidia-uvm", dev_path("nvidia-uvm"), m, 0));
            out.push(char_node("nvidia-uvm-tools", dev_path("nvidia-uvm-tools"), m, 1));
        }
        None => report.warn(
            proc_path("devices"),
            "nvidia-uvm is not loaded (no `nvidia-uvm` in /proc/devices): CUDA programs in containers will fail \
             until it is (run `nvidia-modprobe -u -c=0`, then regenerate); its nodes are left out",
        ),
    }
    out.into_iter()
        .filter_map(|n| {
            let path = n.path.clone();
            match with_host(root, n) {
                Ok(n) => Some(n),
                Err(why) => {
                    report.warn(&path, format!("{why}; leaving it out"));
                    None
                }
            }
        })
        .collect()
}

/// The MIG `config` and `monitor` capability nodes (roles
/// `nvidia-mig-config`, `nvidia-mig-monitor`), when the driver has them.
fn mig_admin_nodes(root: &HostRoot, caps_major: Option<u32>) -> Vec<Node> {
    let Some(major) = caps_major else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (file, role) in [
        ("config", "nvidia-mig-config"),
        ("monitor", "nvidia-mig-monitor"),
    ] {
        let path = proc_path(&format!("driver/nvidia/capabilities/mig/{file}"));
        let Some(c) = root
            .read_attr_opt(&path)
            .ok()
            .flatten()
            .and_then(|t| proc::parse_capability(&t))
        else {
            continue;
        };
        let node = char_node(
            role,
            dev_path(&format!("nvidia-caps/nvidia-cap{}", c.minor)),
            major,
            c.minor,
        );
        if let Ok(n) = with_host(root, node) {
            out.push(n);
        }
    }
    out
}

/// The GPU's DRM card and render nodes (with nvidia-drm loaded).
fn drm_nodes(root: &HostRoot, pci_dir: &Path, report: &mut Report) -> Vec<Node> {
    let mut out = Vec::new();
    for name in root.list_dir_opt(&pci_dir.join("drm")).unwrap_or_default() {
        let role = if node_number(&name, "card").is_some() {
            "primary"
        } else if node_number(&name, "renderD").is_some() {
            "render"
        } else {
            continue;
        };
        if let Some(n) = crate::discover::devnode::read_named_node(
            root,
            &pci_dir.join("drm").join(&name),
            &name,
            role,
            &format!("dri/{name}"),
            report,
        ) {
            match with_host(root, n) {
                Ok(n) => out.push(n),
                Err(why) => report.warn(
                    dev_path(&format!("dri/{name}")),
                    format!("{why}; leaving it out"),
                ),
            }
        }
    }
    out
}

/// MIG devices of GPU `minor`: (gi, ci, gi cap node, ci cap node), in
/// (gi, ci) order.
fn mig_devices(
    root: &HostRoot,
    minor: u32,
    caps_major: Option<u32>,
    report: &mut Report,
) -> Vec<(u32, u32, Node, Node)> {
    let mig_dir = proc_path(&format!("driver/nvidia/capabilities/gpu{minor}/mig"));
    let mut gis: Vec<(u32, String)> = root
        .list_dir_opt(&mig_dir)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|n| node_number(&n, "gi").map(|i| (i, n)))
        .collect();
    if gis.is_empty() {
        return Vec::new();
    }
    let Some(caps_major) = caps_major else {
        report.warn(
            proc_path("devices"),
            format!("GPU with minor {minor} has MIG instances but `nvidia-caps` is not in /proc/devices; skipping its MIG devices"),
        );
        return Vec::new();
    };
    gis.sort();
    let cap = |path: &Path, report: &mut Report| -> Option<Node> {
        let text = match root.read_attr(path) {
            Ok(t) => t,
            Err(e) => {
                report.warn(path, format!("{}; skipping this MIG instance", e.reason()));
                return None;
            }
        };
        let Some(c) = proc::parse_capability(&text) else {
            report.warn(
                path,
                "no numeric DeviceFileMinor; skipping this MIG instance",
            );
            return None;
        };
        let node = char_node(
            "nvidia-cap",
            dev_path(&format!("nvidia-caps/nvidia-cap{}", c.minor)),
            caps_major,
            c.minor,
        );
        with_host(root, node).ok()
    };
    let mut out = Vec::new();
    for (gi, gi_name) in gis {
        let gi_dir = mig_dir.join(&gi_name);
        let Some(gi_node) = cap(&gi_dir.join("access"), report) else {
            continue;
        };
        let mut cis: Vec<(u32, String)> = root
            .list_dir_opt(&gi_dir)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|n| node_number(&n, "ci").map(|i| (i, n)))
            .collect();
        cis.sort();
        for (ci, ci_name) in cis {
            if let Some(ci_node) = cap(&gi_dir.join(&ci_name).join("access"), report) {
                if ci_node.minor != proc::mig_minor(minor, gi, Some(ci)) {
                    report.warn(
                        gi_dir.join(&ci_name).join("access"),
                        format!(
                            "DeviceFileMinor {} differs from the static table's {}; trusting the file",
                            ci_node.minor,
                            proc::mig_minor(minor, gi, Some(ci))
                        ),
                    );
                }
                out.push((gi, ci, gi_node.clone(), ci_node));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;

//! Passthrough by rebinding: a PCI function the claim's DeviceClass asks
//! to pass through (`passthrough: vfio-pci` in its [`super::prepare::
//! DeviceConfig`]), of a generator that allows it (`dra.vfio_passthrough`),
//! is taken from its host driver and bound to `vfio-pci` at prepare, and
//! given back at unprepare, as KubeVirt needs for VM passthrough.
//!
//! The kernel's interface (Documentation/ABI/testing/sysfs-bus-pci):
//! `driver_override` names the only driver that may bind the function
//! (an empty write clears it); the current driver's `unbind` releases it;
//! `/sys/bus/pci/drivers_probe` makes the bus probe it again, binding the
//! override. The function's IOMMU group must be viable for VFIO
//! (Documentation/driver-api/vfio.rst): every other member driverless,
//! on a VFIO driver, on `pci-stub`, or a bridge; it is checked first and a
//! member on a host driver refuses the claim.
//!
//! Binding, in order, each step checked: the intent (the address, the
//! claim, the original driver) is saved in the checkpoint; then
//! `driver_override` ← `vfio-pci`, `<driver>/unbind` ← address,
//! `drivers_probe` ← address, and the `driver` link must then be
//! `vfio-pci`. The claim's CDI device gets the VFIO nodes the host now has
//! ([`crate::discover::vfio::vfio_nodes`]: the group node and
//! `/dev/vfio/vfio`, or the iommufd cdev and `/dev/iommu`). Restoring:
//! `driver_override` cleared, `vfio-pci/unbind`, `drivers_probe`, and the
//! original driver must be back. A record whose claim was never
//! checkpointed as prepared (a crash in between), or one being restored,
//! is restored at the next start or the next call for that claim.
//!
//! A function is in use, and not given back, while another prepared claim
//! holds its device, or a process has its VFIO group node or cdev open
//! (`/proc/<pid>/fd/*`, read through the root: unbinding `vfio-pci` then
//! would block in the kernel until the process lets go).
//!
//! The writes go through [`PciWriter`]: the host's sysfs
//! ([`HostRoot::write_pci_attr`], [`Kernel`]), or in tests a fixture root
//! with a simulated kernel.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::checkpoint::Checkpoint;
pub use super::checkpoint::{Rebind, Step, is_pci_address};
use super::names::DraDevice;
use crate::cdi::spec::DeviceNode;
use crate::discover::vfio::is_vfio_driver;
use crate::root::{self, HostRoot, proc_path, sys_path};

/// The driver functions are bound to.
pub const VFIO_PCI: &str = "vfio-pci";

/// The VFIO nodes every VFIO user opens, which say nothing of one
/// function being in use.
const SHARED_NODES: [&str; 2] = ["/dev/vfio/vfio", "/dev/iommu"];

/// Most processes looked at for an open VFIO node.
const MAX_PROCS: usize = 1 << 16;

/// Most descriptors looked at per process.
const MAX_FDS: usize = 1 << 16;

/// Writes PCI driver-binding attributes: the host's sysfs, or a test's
/// simulated kernel over a fixture root.
pub trait PciWriter: Send + Sync + std::fmt::Debug {
    /// Writes `value` to the attribute `attr` (a host path under
    /// `/sys/bus/pci`) of `root`.
    ///
    /// # Errors
    /// The write's failure (the kernel's errno), naming the file.
    fn write(&self, root: &HostRoot, attr: &Path, value: &str) -> Result<(), root::Error>;
}

/// The running kernel: [`HostRoot::write_pci_attr`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Kernel;

impl PciWriter for Kernel {
    fn write(&self, root: &HostRoot, attr: &Path, value: &str) -> Result<(), root::Error> {
        root.write_pci_attr(attr, value)
    }
}

fn device_dir(address: &str) -> PathBuf {
    sys_path(&format!("bus/pci/devices/{address}"))
}

/// The driver `address` is bound to now (`None`: none), read afresh.
///
/// # Errors
/// A function that is not there or cannot be read, naming the file.
pub fn driver_of(root: &HostRoot, address: &str) -> Result<Option<String>, String> {
    let root = root.fresh();
    let dir = device_dir(address);
    if !root.exists(&dir) {
        return Err(format!("PCI function {address}: {} is gone", dir.display()));
    }
    root.link_name(&dir.join("driver"))
        .map_err(|e| format!("PCI function {address}: {e}"))
}

/// The IOMMU group of `address` and its other members, checked viable for
/// VFIO: each driverless, on a VFIO driver or `pci-stub`, or a PCI bridge
/// (class 0604 or 0607), as the kernel's `vfio_dev_viable` requires.
///
/// # Errors
/// No IOMMU group, an unreadable group, or a member on a host driver,
/// named with what to do.
pub fn check_group(root: &HostRoot, address: &str) -> Result<(String, Vec<String>), String> {
    let root = root.fresh();
    let link = device_dir(address).join("iommu_group");
    let Some(group) = root
        .link_name(&link)
        .map_err(|e| format!("PCI function {address}: {e}"))?
    else {
        return Err(format!(
            "PCI function {address} has no IOMMU group ({} is missing): enable the IOMMU \
             (intel_iommu=on or amd_iommu=on on the kernel command line) to pass it through",
            link.display()
        ));
    };
    let members_dir = link.join("devices");
    let members = root
        .list_dir(&members_dir)
        .map_err(|e| format!("PCI function {address}: IOMMU group {group}: {e}"))?;
    let mut others = Vec::new();
    for m in members.into_iter().filter(|m| m != address) {
        let driver = root
            .link_name(&device_dir(&m).join("driver"))
            .map_err(|e| format!("PCI function {address}: IOMMU group {group}: {e}"))?;
        let class = root
            .read_attr_opt(&device_dir(&m).join("class"))
            .ok()
            .flatten()
            .unwrap_or_default();
        let bridge = class.starts_with("0x0604") || class.starts_with("0x0607");
        match driver {
            Some(d) if !bridge && !is_vfio_driver(&d) && d != "pci-stub" => {
                return Err(format!(
                    "PCI function {address} cannot be passed through: {m}, in its IOMMU group {group} \
                     ({}), is bound to the host driver {d}; the group is only usable by VFIO when \
                     every member is on vfio-pci or no driver: unbind {m} \
                     (echo {m} > /sys/bus/pci/drivers/{d}/unbind) or allocate it too",
                    members_dir.display()
                ));
            }
            _ => others.push(m),
        }
    }
    Ok((group, others))
}

/// Writes one attribute, naming it and the function in the error.
fn write(
    root: &HostRoot,
    w: &dyn PciWriter,
    address: &str,
    attr: &Path,
    value: &str,
    what: &str,
) -> Result<(), String> {
    w.write(root, attr, value).map_err(|e| {
        format!(
            "PCI function {address}: cannot {what} (writing {value:?} to {}): {}",
            attr.display(),
            e.reason()
        )
    })
}

/// Binds `address` to `vfio-pci`: `driver_override`, the current
/// driver's `unbind`, `drivers_probe`, then checks the `driver` link.
///
/// # Errors
/// A write the kernel refused or a function not on `vfio-pci` after it,
/// naming the file and what to do.
pub fn bind_vfio(root: &HostRoot, w: &dyn PciWriter, address: &str) -> Result<(), String> {
    let dir = device_dir(address);
    write(
        root,
        w,
        address,
        &dir.join("driver_override"),
        VFIO_PCI,
        "set its driver override",
    )?;
    match driver_of(root, address)? {
        Some(d) if d == VFIO_PCI => return Ok(()),
        Some(d) => write(
            root,
            w,
            address,
            &sys_path(&format!("bus/pci/drivers/{d}/unbind")),
            address,
            &format!("unbind it from {d}"),
        )?,
        None => {}
    }
    write(
        root,
        w,
        address,
        &sys_path("bus/pci/drivers_probe"),
        address,
        "probe it for vfio-pci",
    )?;
    match driver_of(root, address)? {
        Some(d) if d == VFIO_PCI => Ok(()),
        other => Err(format!(
            "PCI function {address}: after drivers_probe it is bound to {}, not vfio-pci: is the \
             vfio-pci module loaded (modprobe vfio-pci)?",
            other.as_deref().unwrap_or("no driver")
        )),
    }
}

/// Gives `address` back to `original`: clears `driver_override`, unbinds
/// it from `vfio-pci` (only from it: a driver someone else bound stays),
/// probes it, and checks that `original` has it.
///
/// # Errors
/// A write the kernel refused, or another driver (or none) after the
/// probe, naming the file and what to do.
pub fn restore(
    root: &HostRoot,
    w: &dyn PciWriter,
    address: &str,
    original: Option<&str>,
) -> Result<(), String> {
    let dir = device_dir(address);
    if !root.fresh().exists(&dir) {
        // Gone (the PF's VFs were removed): nothing to give back.
        return Ok(());
    }
    write(
        root,
        w,
        address,
        &dir.join("driver_override"),
        "\n",
        "clear its driver override",
    )?;
    let now = driver_of(root, address)?;
    if now.as_deref() == original {
        return Ok(());
    }
    if let Some(d) = now.as_deref().filter(|d| is_vfio_driver(d)) {
        write(
            root,
            w,
            address,
            &sys_path(&format!("bus/pci/drivers/{d}/unbind")),
            address,
            &format!("unbind it from {d}"),
        )?;
    } else if now.is_some() {
        return Err(format!(
            "PCI function {address} is bound to {}, neither vfio-pci nor its original driver {}: \
             leaving it alone",
            now.unwrap_or_default(),
            original.unwrap_or("(none)")
        ));
    }
    let Some(original) = original else {
        return Ok(());
    };
    write(
        root,
        w,
        address,
        &sys_path("bus/pci/drivers_probe"),
        address,
        &format!("probe it for {original}"),
    )?;
    match driver_of(root, address)? {
        Some(d) if d == original => Ok(()),
        other => Err(format!(
            "PCI function {address}: after drivers_probe it is bound to {}, not its original \
             driver {original}: bind it by hand (echo {address} > /sys/bus/pci/drivers/{original}/bind)",
            other.as_deref().unwrap_or("no driver")
        )),
    }
}

/// The VFIO nodes of `address` (on `vfio-pci`) as the host has them now,
/// as CDI device nodes.
///
/// # Errors
/// No usable node (no group node nor iommufd cdev), with the discovery's
/// warnings.
pub fn vfio_nodes(root: &HostRoot, address: &str) -> Result<Vec<DeviceNode>, String> {
    let root = root
        .reopen()
        .map_err(|e| format!("PCI function {address}: {e}"))?;
    let dir = root
        .resolve(&device_dir(address))
        .map_err(|e| format!("PCI function {address}: {e}"))?;
    let mut report = crate::discover::Report::default();
    let Some((_, nodes)) = crate::discover::vfio::vfio_nodes(
        &root,
        &dir,
        address,
        &crate::discover::vfio::VfioShared::default(),
        &mut report,
    ) else {
        let why: Vec<String> = report
            .warnings
            .iter()
            .map(|w| format!("{}: {}", w.path.display(), w.message))
            .collect();
        return Err(format!(
            "PCI function {address} is on vfio-pci but has no VFIO node to give: {}",
            why.join("; ")
        ));
    };
    Ok(nodes
        .into_iter()
        .map(|n| DeviceNode {
            path: n.path.clone(),
            node_type: "c".into(),
            major: i64::from(n.major),
            minor: i64::from(n.minor),
            ..DeviceNode::default()
        })
        .collect())
}

/// The first process with one of `nodes` (host paths) open, as
/// `pid <n> (<comm>)`, from `/proc/<pid>/fd/*` through the root (`None`:
/// none, or no `/proc` to look at).
pub fn opened_by(root: &HostRoot, nodes: &[String]) -> Option<String> {
    let root = root.fresh();
    let pids = root.list_dir_opt(&proc_path("")).ok()?;
    for pid in pids
        .iter()
        .filter(|p| p.bytes().all(|b| b.is_ascii_digit()))
        .take(MAX_PROCS)
    {
        let fd_dir = proc_path(&format!("{pid}/fd"));
        let Ok(fds) = root.list_dir_opt(&fd_dir) else {
            continue;
        };
        for fd in fds.iter().take(MAX_FDS) {
            let Ok(Some(target)) = root.raw_link(&fd_dir.join(fd)) else {
                continue;
            };
            if nodes.iter().any(|n| Path::new(n) == target) {
                let comm = root
                    .read_attr_opt(&proc_path(&format!("{pid}/comm")))
                    .ok()
                    .flatten()
                    .unwrap_or_default();
                return Some(format!("pid {pid} ({})", crate::text::escape(&comm)));
            }
        }
    }
    None
}

/// What passthrough needs: the host, how to write to it, and the
/// checkpoint's directory.
#[derive(Debug, Clone)]
pub struct Host<'a> {
    /// The host.
    pub root: &'a HostRoot,
    /// How attributes are written.
    pub writer: &'a dyn PciWriter,
    /// Where the checkpoint is saved.
    pub driver_dir: &'a Path,
}

impl Host<'_> {
    fn save(&self, state: &Checkpoint) -> Result<(), String> {
        super::checkpoint::save(self.driver_dir, state)
    }

    /// Binds the functions `addresses` of claim `uid` to `vfio-pci`,
    /// each recorded in `state` (and saved) before its first write; their
    /// VFIO nodes, by address. On a failure, what this call bound is given
    /// back and its records dropped.
    ///
    /// # Errors
    /// A group that is not viable, a function another claim holds, or a
    /// write that failed, naming the function and the file.
    pub fn bind_claim(
        &self,
        state: &mut Checkpoint,
        uid: &str,
        targets: &[(String, String)],
    ) -> Result<BTreeMap<String, Vec<DeviceNode>>, String> {
        let mut out = BTreeMap::new();
        for (device, a) in targets {
            if let Some((other, _)) = state
                .claims
                .iter()
                .find(|(u, c)| *u != uid && c.devices.iter().any(|d| d.device == *device))
            {
                return Err(format!(
                    "device {device} (PCI function {a}) is prepared for claim {other} too: not \
                     taking it from its driver"
                ));
            }
            match self.bind_one(state, uid, device, a) {
                Ok(nodes) => {
                    out.insert(a.clone(), nodes);
                }
                Err(e) => {
                    if let Err(undo) = self.restore_claim(state, uid, &BTreeSet::new()) {
                        tracing::warn!("claim {uid}: giving back what it bound: {undo}");
                    }
                    return Err(e);
                }
            }
        }
        Ok(out)
    }

    fn bind_one(
        &self,
        state: &mut Checkpoint,
        uid: &str,
        device: &str,
        address: &str,
    ) -> Result<Vec<DeviceNode>, String> {
        if !is_pci_address(address) {
            return Err(format!(
                "{:?} is not a PCI address: cannot pass it through",
                crate::text::escape(address)
            ));
        }
        if let Some(r) = state.rebinds.get(address)
            && r.claim != uid
        {
            return Err(format!(
                "PCI function {address} is passed through for claim {} already",
                r.claim
            ));
        }
        check_group(self.root, address)?;
        let original = match state.rebinds.get(address) {
            Some(r) => r.original.clone(),
            None => driver_of(self.root, address)?,
        };
        state.rebinds.insert(
            address.to_string(),
            Rebind {
                claim: uid.to_string(),
                device: device.to_string(),
                original: original.clone(),
                step: Step::Binding,
            },
        );
        self.save(state)?;
        tracing::info!(
            "claim {uid}: binding PCI function {address} to vfio-pci (from {})",
            original.as_deref().unwrap_or("no driver")
        );
        bind_vfio(self.root, self.writer, address)?;
        vfio_nodes(self.root, address)
    }

    /// Marks claim `uid`'s records bound (the caller saves them with the
    /// claim).
    pub fn mark_bound(state: &mut Checkpoint, uid: &str) {
        for r in state.rebinds.values_mut().filter(|r| r.claim == uid) {
            r.step = Step::Bound;
        }
    }

    /// Gives back every function of claim `uid`, refusing while one is in
    /// use: held by another prepared claim (`held`: the devices the other
    /// claims hold, by name), or its VFIO nodes
    /// open in a process. Each record is marked restoring (saved) before
    /// its first write and dropped (saved) once its driver is back.
    ///
    /// # Errors
    /// A function in use, or a write that failed, naming them.
    pub fn restore_claim(
        &self,
        state: &mut Checkpoint,
        uid: &str,
        held: &BTreeSet<String>,
    ) -> Result<(), String> {
        let mine: Vec<(String, Option<String>)> = state
            .rebinds
            .iter()
            .filter(|(_, r)| r.claim == uid)
            .map(|(a, r)| (a.clone(), r.original.clone()))
            .collect();
        for (address, r) in state.rebinds.iter().filter(|(_, r)| r.claim == uid) {
            let device = &r.device;
            if held.contains(device) {
                return Err(format!(
                    "PCI function {address} (device {device}) is in use by another prepared claim: \
                     not giving it back to its driver yet (unprepare that claim first)"
                ));
            }
            if driver_of(self.root, address).ok().flatten().as_deref() == Some(VFIO_PCI)
                && let Ok(nodes) = vfio_nodes(self.root, address)
            {
                // The group node or cdev: /dev/vfio/vfio and /dev/iommu
                // are every VFIO user's.
                let paths: Vec<String> = nodes
                    .into_iter()
                    .map(|n| n.path)
                    .filter(|p| !SHARED_NODES.contains(&p.as_str()))
                    .collect();
                if let Some(who) = opened_by(self.root, &paths) {
                    return Err(format!(
                        "PCI function {address} is in use: {who} has {} open; not unbinding it from \
                         vfio-pci (the kernel would wait for it); stop that process, the kubelet \
                         retries",
                        paths.join(" or ")
                    ));
                }
            }
        }
        for (address, original) in mine {
            if let Some(r) = state.rebinds.get_mut(&address)
                && r.step != Step::Restoring
            {
                r.step = Step::Restoring;
                self.save(state)?;
            }
            restore(self.root, self.writer, &address, original.as_deref())?;
            state.rebinds.remove(&address);
            self.save(state)?;
            tracing::info!(
                "claim {uid}: PCI function {address} is back on {}",
                original.as_deref().unwrap_or("no driver")
            );
        }
        Ok(())
    }

    /// Undoes what a crash left: every record whose claim is not prepared,
    /// or that was being restored. Each failure is returned in words; its
    /// record stays for the next try.
    pub fn recover(&self, state: &mut Checkpoint) -> Vec<String> {
        let stale: Vec<String> = state
            .rebinds
            .values()
            .filter(|r| r.step == Step::Restoring || !state.claims.contains_key(&r.claim))
            .map(|r| r.claim.clone())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut errors = Vec::new();
        for uid in stale {
            if let Err(e) = self.restore_claim(state, &uid, &held(state, &uid)) {
                errors.push(format!("claim {uid}: {e}"));
            }
        }
        errors
    }
}

/// The preparer's passthrough settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// How PCI attributes are written ([`Kernel`] on a host).
    pub writer: std::sync::Arc<dyn PciWriter>,
    /// The generators whose devices may be rebound
    /// (`dra.vfio_passthrough`).
    pub generators: std::collections::BTreeSet<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            writer: std::sync::Arc::new(Kernel),
            generators: std::collections::BTreeSet::new(),
        }
    }
}

/// The devices claims other than `uid` hold, by name.
fn held(state: &Checkpoint, uid: &str) -> BTreeSet<String> {
    state
        .claims
        .iter()
        .filter(|(u, _)| *u != uid)
        .flat_map(|(_, c)| c.devices.iter().map(|d| d.device.clone()))
        .collect()
}

/// The PCI function of `d`, when its generator allows passthrough
/// (`settings`) and it is a PCI function one claim holds alone.
///
/// # Errors
/// Why it cannot be passed through, naming it and what to do.
pub fn function_of(settings: &Settings, d: &DraDevice) -> Result<String, String> {
    if !settings.generators.contains(&d.generator) {
        return Err(format!(
            "device {}: its class asks for passthrough, which generator {} does not allow \
             (set dra.vfio_passthrough: true in its definition)",
            d.name, d.generator
        ));
    }
    if d.shared {
        return Err(format!(
            "device {}: a shared device (device_plugin.replicas) cannot be passed through",
            d.name
        ));
    }
    match d.entry.device.pci.as_ref().map(|p| p.address.as_str()) {
        Some(a) if is_pci_address(a) => Ok(a.to_string()),
        _ => Err(format!(
            "device {}: not a PCI function: it cannot be passed through",
            d.name
        )),
    }
}

/// Prepares claim `uid`'s passthrough: gives back what an earlier,
/// interrupted prepare of it left (its records are stale: the claim is not
/// prepared), binds `targets` (device name, PCI address) to `vfio-pci`,
/// and runs `write` with their VFIO nodes by address; when `write` fails,
/// gives them back. Blocking.
///
/// # Errors
/// As [`Host::bind_claim`], or `write`'s.
pub fn prepare<W>(
    root: &HostRoot,
    settings: &Settings,
    driver_dir: &Path,
    state: &mut Checkpoint,
    uid: &str,
    targets: &[(String, String)],
    write: impl FnOnce(&BTreeMap<String, Vec<DeviceNode>>) -> Result<W, String>,
) -> Result<W, String> {
    let host = Host {
        root,
        writer: settings.writer.as_ref(),
        driver_dir,
    };
    if state.rebinds.values().any(|r| r.claim == uid) {
        host.restore_claim(state, uid, &held(state, uid))?;
    }
    if targets.is_empty() {
        return write(&BTreeMap::new());
    }
    let nodes = host.bind_claim(state, uid, targets)?;
    write(&nodes).inspect_err(|_| {
        if let Err(undo) = host.restore_claim(state, uid, &BTreeSet::new()) {
            tracing::warn!("claim {uid}: giving back what it bound: {undo}");
        }
    })
}

/// Unprepares claim `uid`'s passthrough: every function it had goes back
/// to its driver ([`Host::restore_claim`]). Blocking.
///
/// # Errors
/// A function in use, or a write that failed.
pub fn unprepare(
    root: &HostRoot,
    settings: &Settings,
    driver_dir: &Path,
    state: &mut Checkpoint,
    uid: &str,
) -> Result<(), String> {
    if !state.rebinds.values().any(|r| r.claim == uid) {
        return Ok(());
    }
    let host = Host {
        root,
        writer: settings.writer.as_ref(),
        driver_dir,
    };
    host.restore_claim(state, uid, &held(state, uid))
}

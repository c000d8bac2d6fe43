//! NVML enrichment: what procfs cannot say (MIG device UUIDs), and a cross
//! check of what it does say (GPU count, UUIDs, minors), from NVIDIA's
//! management library when it loads.
//!
//! NVML is never required: `libnvidia-ml.so.1` is opened at run time
//! (`nvml-wrapper` uses dlopen), and when it is missing or broken, one
//! informational line is logged and the procfs result stands. The source
//! is behind [`GpuSource`] so that tests use a double instead of a driver.

use crate::discover::Report;
use crate::model::Device;
use crate::sysfs::PciAddress;

/// One GPU as NVML reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvmlGpu {
    /// `GPU-...`.
    pub uuid: String,
    /// PCI bus ID, normalized to `0000:41:00.0` (NVML writes 8 domain digits).
    pub bus_id: String,
    /// Device minor, when NVML gives it.
    pub minor: Option<u32>,
    /// UUIDs of its MIG devices, in NVML's index order.
    pub mig_uuids: Vec<String>,
    /// Profiles of its MIG devices (`3g.40gb`), in the same order, when
    /// NVML names them.
    pub mig_profiles: Vec<Option<String>>,
}

/// The MIG profile in an NVML MIG device name:
/// `NVIDIA A100 80GB PCIe MIG 3g.40gb` → `3g.40gb`.
pub fn profile_from_name(name: &str) -> Option<String> {
    let (_, profile) = name.rsplit_once("MIG ")?;
    let profile = profile.trim();
    (!profile.is_empty() && !profile.contains(char::is_whitespace)).then(|| profile.to_string())
}

/// Where GPU facts come from.
pub trait GpuSource {
    /// Every GPU, or why the source cannot be used.
    ///
    /// # Errors
    /// A message when the library cannot be loaded or queried.
    fn gpus(&self) -> Result<Vec<NvmlGpu>, String>;
}

/// `00000000:41:00.0` → `0000:41:00.0`.
pub fn normalize_bus_id(bus_id: &str) -> Option<String> {
    bus_id
        .to_ascii_lowercase()
        .parse::<PciAddress>()
        .ok()
        .map(|a| a.to_string())
}

/// Cross-checks the procfs view against `source` and adds MIG UUIDs.
/// Disagreements are warnings; procfs stays authoritative for nodes.
pub fn enrich(devices: &mut [Device], source: &dyn GpuSource, report: &mut Report) {
    let nvml = match source.gpus() {
        Ok(g) => g,
        Err(e) => {
            tracing::info!("NVML is not available ({e}); using what procfs says");
            return;
        }
    };
    let here = "NVML";
    let gpu_count = devices
        .iter()
        .filter(|d| d.nvidia.as_ref().is_some_and(|n| n.mig.is_none()))
        .count();
    if gpu_count != nvml.len() {
        report.warn(
            here,
            format!("NVML sees {} GPUs, procfs {gpu_count}", nvml.len()),
        );
    }
    let gpu_ids: Vec<String> = devices
        .iter()
        .filter(|d| d.nvidia.as_ref().is_some_and(|n| n.mig.is_none()))
        .map(|d| d.id.clone())
        .collect();
    for id in gpu_ids {
        let Some(n) = nvml.iter().find(|g| g.bus_id == id) else {
            report.warn(here, format!("NVML does not list the GPU at {id}"));
            continue;
        };
        if let Some(d) = devices.iter().find(|d| d.id == id)
            && let Some(nv) = &d.nvidia
        {
            if nv.gpu_uuid != n.uuid {
                report.warn(
                    here,
                    format!(
                        "GPU {id}: NVML says UUID {}, procfs {}",
                        n.uuid, nv.gpu_uuid
                    ),
                );
            }
            if n.minor.is_some_and(|m| m != nv.minor) {
                report.warn(
                    here,
                    format!(
                        "GPU {id}: NVML says minor {}, procfs {}",
                        n.minor.unwrap_or_default(),
                        nv.minor
                    ),
                );
            }
        }
        // MIG devices of this GPU, in (gi, ci) order as the backend lists them.
        let migs: Vec<&mut Device> = devices
            .iter_mut()
            .filter(|d| {
                d.nvidia
                    .as_ref()
                    .and_then(|nv| nv.mig.as_ref())
                    .is_some_and(|m| m.parent == id)
            })
            .collect();
        if migs.len() != n.mig_uuids.len() {
            if !(migs.is_empty() && n.mig_uuids.is_empty()) {
                report.warn(
                    here,
                    format!(
                        "GPU {id}: NVML sees {} MIG devices, procfs {}; MIG UUIDs left out",
                        n.mig_uuids.len(),
                        migs.len()
                    ),
                );
            }
            continue;
        }
        for (i, (d, uuid)) in migs.into_iter().zip(&n.mig_uuids).enumerate() {
            if let Some(m) = d.nvidia.as_mut().and_then(|nv| nv.mig.as_mut()) {
                m.uuid = Some(uuid.clone());
                m.profile = n.mig_profiles.get(i).cloned().flatten();
            }
        }
    }
}

/// NVML itself, loaded at run time.
#[cfg(feature = "nvml")]
#[derive(Debug, Default, Clone, Copy)]
pub struct Library;

#[cfg(feature = "nvml")]
impl GpuSource for Library {
    fn gpus(&self) -> Result<Vec<NvmlGpu>, String> {
        let nvml = nvml_wrapper::Nvml::init().map_err(|e| e.to_string())?;
        let count = nvml.device_count().map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        for i in 0..count {
            let d = nvml.device_by_index(i).map_err(|e| e.to_string())?;
            let uuid = d.uuid().map_err(|e| e.to_string())?;
            let bus = d.pci_info().map_err(|e| e.to_string())?.bus_id;
            let bus_id = normalize_bus_id(&bus).ok_or_else(|| format!("bad PCI bus ID {bus:?}"))?;
            let mut mig_uuids = Vec::new();
            let mut mig_profiles = Vec::new();
            if d.mig_mode().is_ok_and(|m| m.current == 1) {
                let max = d.mig_device_count().unwrap_or(0);
                for j in 0..max {
                    if let Ok(m) = d.mig_device_by_index(j)
                        && let Ok(u) = m.uuid()
                    {
                        mig_uuids.push(u);
                        mig_profiles.push(m.name().ok().and_then(|n| profile_from_name(&n)));
                    }
                }
            }
            out.push(NvmlGpu {
                uuid,
                bus_id,
                minor: d.minor_number().ok(),
                mig_uuids,
                mig_profiles,
            });
        }
        Ok(out)
    }
}

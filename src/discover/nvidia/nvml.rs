//! NVML enrichment: what procfs cannot say (MIG device UUIDs), and a cross
//! check of what it does say (GPU count, UUIDs, minors), from NVIDIA's
//! management library when it loads.
//!
//! NVML is never required: `libnvidia-ml.so.1` is opened at run time
//! (`nvml-wrapper` uses dlopen), and when it is missing or broken, one
//! informational line is logged and the procfs result stands. The source
//! is behind [`GpuSource`] so that tests use a double instead of a driver.
//!
//! MIG devices are matched to procfs's by their GPU and compute instance
//! IDs, never by position (NVML's index order is not procfs's (gi, ci)
//! order, and a UUID given to the wrong slice would hand a container
//! other hardware than it asked for). nvml-wrapper 0.13 does not wrap the
//! two calls that give the IDs, so the real library ([`Library`]) reports
//! MIG devices without them: their UUIDs are then given only on a GPU
//! with a single MIG device, where the match is certain.

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
    /// Its MIG devices, in NVML's index order (which is not procfs's
    /// (gi, ci) order: they are matched by their instance IDs).
    pub migs: Vec<NvmlMig>,
}

/// One MIG device (a compute instance) as NVML reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvmlMig {
    /// GPU instance ID (`nvmlDeviceGetGpuInstanceId` of the MIG device
    /// handle), when known.
    pub gi: Option<u32>,
    /// Compute instance ID (`nvmlDeviceGetComputeInstanceId`), when known.
    pub ci: Option<u32>,
    /// `MIG-...`.
    pub uuid: String,
    /// The MIG profile (`3g.40gb`), when NVML names it.
    pub profile: Option<String>,
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
        match_migs(devices, &id, &n.migs, report);
    }
}

/// Gives the MIG devices procfs found on GPU `id` the UUIDs and profiles
/// of NVML's MIG devices with the same GPU and compute instance IDs. A
/// procfs MIG device NVML does not list, or one NVML lists that procfs
/// does not, is a warning naming the GPU and the IDs. NVML devices whose
/// IDs are not known are matched only when the GPU has exactly one MIG
/// device in both views (never by position: NVML's index order is not
/// the (gi, ci) order).
fn match_migs(devices: &mut [Device], id: &str, nvml: &[NvmlMig], report: &mut Report) {
    let here = "NVML";
    let mut migs: Vec<&mut crate::model::MigInfo> = devices
        .iter_mut()
        .filter_map(|d| d.nvidia.as_mut().and_then(|nv| nv.mig.as_mut()))
        .filter(|m| m.parent == id)
        .collect();
    let (known, unknown): (Vec<&NvmlMig>, Vec<&NvmlMig>) =
        nvml.iter().partition(|m| m.gi.is_some() && m.ci.is_some());
    if !unknown.is_empty() {
        if let ([m], [one], []) = (migs.as_mut_slice(), unknown.as_slice(), known.as_slice()) {
            m.uuid = Some(one.uuid.clone());
            m.profile = one.profile.clone();
            return;
        }
        tracing::info!(
            "GPU {id}: NVML does not say which GPU and compute instance {} of its MIG devices \
             are; their UUIDs are left out",
            unknown.len()
        );
    }
    for m in migs.iter_mut() {
        match known
            .iter()
            .find(|k| k.gi == Some(m.gi) && k.ci == Some(m.ci))
        {
            Some(k) => {
                m.uuid = Some(k.uuid.clone());
                m.profile = k.profile.clone();
            }
            // Among those without IDs, maybe: nothing to say.
            None if !unknown.is_empty() => {}
            None => report.warn(
                here,
                format!(
                    "GPU {id}: NVML lists no MIG device gi{}/ci{} (procfs does); its MIG UUID is left out",
                    m.gi, m.ci
                ),
            ),
        }
    }
    for k in known {
        if !migs
            .iter()
            .any(|m| k.gi == Some(m.gi) && k.ci == Some(m.ci))
        {
            report.warn(
                here,
                format!(
                    "GPU {id}: NVML lists MIG device gi{}/ci{} ({}) that procfs does not; it is left out",
                    k.gi.unwrap_or_default(),
                    k.ci.unwrap_or_default(),
                    k.uuid
                ),
            );
        }
    }
}

/// NVML itself, loaded at run time: `libnvidia-ml.so.1` through the
/// system's loader, or a given file ([`Library::for_root`]).
#[cfg(feature = "nvml")]
#[derive(Debug, Default, Clone)]
pub struct Library {
    /// The library file on disk; `None`: the system's `libnvidia-ml.so.1`.
    pub path: Option<std::path::PathBuf>,
}

/// The driver's NVML library among its files (host paths): the
/// host file of `libnvidia-ml.so.<version>`.
pub fn library_file(files: &[crate::model::DriverFile]) -> Option<&str> {
    files
        .iter()
        .find(|m| {
            std::path::Path::new(&m.container_path)
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix("libnvidia-ml.so."))
                .is_some_and(|v| v.contains('.'))
        })
        .map(|m| m.host_path.as_str())
}

#[cfg(feature = "nvml")]
impl Library {
    /// The NVML to ask about the host `root` describes, or why none may
    /// be loaded: `--no-nvml`; when `root` and its driver root are `/`,
    /// the system's library; else the driver's own file among `mounts`
    /// (the host at `/host` in a DaemonSet, the GPU operator's driver
    /// root), loaded by its path on disk only when only root could have
    /// put it there ([`HostRoot::trusted_file`]): loading a library runs
    /// its code.
    ///
    /// # Errors
    /// Why NVML is not asked, for an informational line.
    ///
    /// [`HostRoot::trusted_file`]: crate::root::HostRoot::trusted_file
    pub fn for_root(
        root: &crate::root::HostRoot,
        files: &[crate::model::DriverFile],
    ) -> Result<Library, String> {
        use std::path::Path;
        if !root.nvml_allowed() {
            return Err("NVML not asked (--no-nvml)".into());
        }
        if root.is_host() && root.driver_root() == Path::new("/") {
            return Ok(Library::default());
        }
        let Some(host) = library_file(files) else {
            return Err(format!(
                "no libnvidia-ml.so.<version> among the driver's files under {}; NVML not asked",
                root.driver_root().display()
            ));
        };
        match root.trusted_file(Path::new(host)) {
            Ok(path) => Ok(Library { path: Some(path) }),
            Err(why) => Err(format!(
                "not loading NVML from {host} (loading it would run its code): {why}; using what procfs says"
            )),
        }
    }
}

#[cfg(feature = "nvml")]
impl Library {
    /// Loads and initializes NVML.
    ///
    /// # Errors
    /// The library cannot be loaded or initialized, in words.
    pub fn init(&self) -> Result<nvml_wrapper::Nvml, String> {
        match &self.path {
            Some(p) => nvml_wrapper::Nvml::builder()
                .lib_path(p.as_os_str())
                .init()
                .map_err(|e| format!("{}: {e}", p.display())),
            None => nvml_wrapper::Nvml::init().map_err(|e| e.to_string()),
        }
    }
}

#[cfg(feature = "nvml")]
impl GpuSource for Library {
    fn gpus(&self) -> Result<Vec<NvmlGpu>, String> {
        let nvml = self.init()?;
        let count = nvml.device_count().map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        for i in 0..count {
            let d = nvml.device_by_index(i).map_err(|e| e.to_string())?;
            let uuid = d.uuid().map_err(|e| e.to_string())?;
            let bus = d.pci_info().map_err(|e| e.to_string())?.bus_id;
            let bus_id = normalize_bus_id(&bus).ok_or_else(|| format!("bad PCI bus ID {bus:?}"))?;
            let mut migs = Vec::new();
            if d.mig_mode().is_ok_and(|m| m.current == 1) {
                let max = d.mig_device_count().unwrap_or(0);
                for j in 0..max {
                    if let Ok(m) = d.mig_device_by_index(j)
                        && let Ok(u) = m.uuid()
                    {
                        // nvml-wrapper 0.13 has no safe call for
                        // nvmlDeviceGetGpuInstanceId and
                        // nvmlDeviceGetComputeInstanceId (listed among its
                        // unwrapped functions), and this crate forbids
                        // `unsafe`: the IDs stay unknown, and `enrich`
                        // matches only what is certain without them.
                        migs.push(NvmlMig {
                            gi: None,
                            ci: None,
                            uuid: u,
                            profile: m.name().ok().and_then(|n| profile_from_name(&n)),
                        });
                    }
                }
            }
            out.push(NvmlGpu {
                uuid,
                bus_id,
                minor: d.minor_number().ok(),
                migs,
            });
        }
        Ok(out)
    }
}

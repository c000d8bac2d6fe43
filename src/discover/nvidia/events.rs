//! NVML's event API, as the servers' device health reads it: critical XID
//! errors of the GPUs (`nvmlDeviceRegisterEvents` with
//! `nvmlEventTypeXidCriticalError`, `nvmlEventSetWait_v2`). The health
//! side ([`crate::deviceplugin::xid`]) goes through [`XidEvents`], so that
//! tests use a double instead of a driver.
//!
//! What NVML documents and this keeps:
//!
//! - a wait returns the next event, or `NVML_ERROR_TIMEOUT` when none came
//!   within its timeout (or an interrupt ended it early): never a wait
//!   without a bound here ([`XidEvents::wait`] takes one);
//! - an event's `eventData` is the XID (999: one NVML does not know), its
//!   `gpuInstanceId`/`computeInstanceId` the MIG instance it happened in,
//!   `0xFFFFFFFF` ([`NOT_MIG`]) when it concerns the whole GPU;
//! - registering a GPU may fail with `NVML_ERROR_NOT_SUPPORTED` (a GPU
//!   too old to report XIDs), and anything may fail with
//!   `NVML_ERROR_GPU_IS_LOST` (a GPU fallen off the bus).
//!
//! nvml-wrapper 0.13 wraps the event API without the two instance IDs
//! (its `EventData` has the device, the type and the XID), and this crate
//! forbids `unsafe`: the real source ([`runner`]) reports every XID as
//! the whole GPU's. The health side attributes MIG instances when a
//! source names them.

use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

/// What NVML writes for the GPU and compute instance of an event that
/// concerns the whole GPU (and of any event when MIG is off).
pub const NOT_MIG: u32 = 0xFFFF_FFFF;

/// The XID NVML reports when it does not know the error.
pub const UNKNOWN_XID: u64 = 999;

/// One critical XID error, as NVML reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XidEvent {
    /// The GPU's UUID (`GPU-...`).
    pub gpu: String,
    /// The XID (`eventData`; [`UNKNOWN_XID`]: NVML does not know it).
    pub xid: u64,
    /// The MIG instance it happened in, (GPU instance, compute instance);
    /// `None` for the whole GPU.
    pub instance: Option<(u32, u32)>,
}

/// The instance of an event from NVML's `gpuInstanceId` and
/// `computeInstanceId`: `None` when either is [`NOT_MIG`].
pub fn instance(gi: u32, ci: u32) -> Option<(u32, u32)> {
    (gi != NOT_MIG && ci != NOT_MIG).then_some((gi, ci))
}

/// Why an event call failed, by NVML's return code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventError {
    /// `NVML_ERROR_TIMEOUT`: no event within the timeout.
    Timeout,
    /// `NVML_ERROR_NOT_SUPPORTED`: the GPU cannot report the events.
    NotSupported,
    /// `NVML_ERROR_GPU_IS_LOST`: a GPU fell off the bus or is otherwise
    /// inaccessible.
    GpuLost,
    /// Anything else, in words.
    Failed(String),
}

impl fmt::Display for EventError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EventError::Timeout => f.write_str("timed out"),
            EventError::NotSupported => f.write_str("not supported"),
            EventError::GpuLost => f.write_str("the GPU is lost"),
            EventError::Failed(why) => f.write_str(why),
        }
    }
}

/// One GPU's registration for XID events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    /// The GPU's UUID (or, when NVML cannot say it, `GPU index N`).
    pub gpu: String,
    /// Whether its events are watched.
    pub result: Result<(), EventError>,
}

/// NVML's XID events.
pub trait XidEvents {
    /// A new event set (replacing the previous one) with the critical XID
    /// errors of every GPU NVML lists, but those in `skip` (UUIDs): each
    /// GPU's outcome.
    ///
    /// # Errors
    /// NVML cannot list the GPUs or make a set.
    fn register(&mut self, skip: &BTreeSet<String>) -> Result<Vec<Registration>, EventError>;

    /// The next event of the set, waiting at most `timeout`; `Ok(None)`
    /// for an event that is no XID.
    ///
    /// # Errors
    /// [`EventError::Timeout`] when none came; NVML's error else.
    fn wait(&mut self, timeout: Duration) -> Result<Option<XidEvent>, EventError>;
}

/// Runs a body with an event source made on the calling thread (NVML's
/// event set borrows the library it came from, so both live in the one
/// call); `Err` says why there is no source.
pub type Runner = Box<dyn FnOnce(&mut dyn FnMut(&mut dyn XidEvents)) -> Result<(), String> + Send>;

/// The real source over `lib`: NVML loaded and initialized on the thread
/// that runs it.
#[cfg(feature = "nvml")]
pub fn runner(lib: super::nvml::Library) -> Runner {
    Box::new(move |body| {
        let nvml = lib.init()?;
        let mut events = Nvml {
            nvml: &nvml,
            set: None,
        };
        body(&mut events);
        Ok(())
    })
}

/// NVML's event set over a loaded library.
#[cfg(feature = "nvml")]
struct Nvml<'n> {
    nvml: &'n nvml_wrapper::Nvml,
    set: Option<nvml_wrapper::EventSet<'n>>,
}

#[cfg(feature = "nvml")]
fn error(e: nvml_wrapper::error::NvmlError) -> EventError {
    use nvml_wrapper::error::NvmlError;
    match e {
        NvmlError::Timeout => EventError::Timeout,
        NvmlError::NotSupported => EventError::NotSupported,
        NvmlError::GpuLost => EventError::GpuLost,
        e => EventError::Failed(e.to_string()),
    }
}

#[cfg(feature = "nvml")]
impl<'n> Nvml<'n> {
    /// A new set with the critical XID errors of `devices` (each was
    /// registered once already).
    fn set_of(
        &self,
        devices: &[nvml_wrapper::Device<'n>],
    ) -> Result<nvml_wrapper::EventSet<'n>, EventError> {
        use nvml_wrapper::bitmasks::event::EventTypes;
        let mut set = self.nvml.create_event_set().map_err(error)?;
        for d in devices {
            set = d
                .register_events(EventTypes::CRITICAL_XID_ERROR, set)
                .map_err(|e| error(e.error))?;
        }
        Ok(set)
    }
}

#[cfg(feature = "nvml")]
impl XidEvents for Nvml<'_> {
    fn register(&mut self, skip: &BTreeSet<String>) -> Result<Vec<Registration>, EventError> {
        use nvml_wrapper::bitmasks::event::EventTypes;
        self.set = None;
        let count = self.nvml.device_count().map_err(error)?;
        let mut set = Some(self.nvml.create_event_set().map_err(error)?);
        let mut watched = Vec::new();
        let mut out = Vec::new();
        for i in 0..count {
            let d = match self.nvml.device_by_index(i) {
                Ok(d) => d,
                Err(e) => {
                    out.push(Registration {
                        gpu: format!("GPU index {i}"),
                        result: Err(error(e)),
                    });
                    continue;
                }
            };
            let gpu = match d.uuid() {
                Ok(u) => u,
                Err(e) => {
                    out.push(Registration {
                        gpu: format!("GPU index {i}"),
                        result: Err(error(e)),
                    });
                    continue;
                }
            };
            if skip.contains(&gpu) {
                continue;
            }
            let supported = d.supported_event_types().map_err(error).and_then(|t| {
                if t.contains(EventTypes::CRITICAL_XID_ERROR) {
                    Ok(())
                } else {
                    Err(EventError::NotSupported)
                }
            });
            let result = match (supported, set.take()) {
                (Err(e), s) => {
                    set = s;
                    Err(e)
                }
                (Ok(()), None) => Err(EventError::Failed("no event set".into())),
                (Ok(()), Some(s)) => match d.register_events(EventTypes::CRITICAL_XID_ERROR, s) {
                    Ok(s) => {
                        set = Some(s);
                        Ok(())
                    }
                    // nvml-wrapper freed the set: a new one with the GPUs
                    // registered so far.
                    Err(e) => {
                        set = Some(self.set_of(&watched)?);
                        Err(error(e.error))
                    }
                },
            };
            if result.is_ok() {
                watched.push(d);
            }
            out.push(Registration { gpu, result });
        }
        self.set = set;
        Ok(out)
    }

    fn wait(&mut self, timeout: Duration) -> Result<Option<XidEvent>, EventError> {
        use nvml_wrapper::bitmasks::event::EventTypes;
        use nvml_wrapper::enums::event::XidError;
        let set = self
            .set
            .as_ref()
            .ok_or_else(|| EventError::Failed("no event set".into()))?;
        // Never 0: a bound, always.
        let ms = u32::try_from(timeout.as_millis())
            .unwrap_or(u32::MAX)
            .max(1);
        let data = set.wait(ms).map_err(error)?;
        if !data.event_type.contains(EventTypes::CRITICAL_XID_ERROR) {
            return Ok(None);
        }
        let xid = match data.event_data {
            Some(XidError::Value(v)) => v,
            Some(XidError::Unknown) | None => UNKNOWN_XID,
        };
        let gpu = data.device.uuid().map_err(error)?;
        Ok(Some(XidEvent {
            gpu,
            xid,
            instance: None,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instances_are_mig_only_when_nvml_names_both() {
        assert_eq!(instance(NOT_MIG, NOT_MIG), None);
        assert_eq!(instance(1, NOT_MIG), None);
        assert_eq!(instance(NOT_MIG, 0), None);
        assert_eq!(instance(2, 0), Some((2, 0)));
        assert_eq!(EventError::GpuLost.to_string(), "the GPU is lost");
        assert_eq!(EventError::Failed("x".into()).to_string(), "x");
    }
}

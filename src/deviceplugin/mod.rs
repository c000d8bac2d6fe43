//! `cdigen device-plugin`: the kubelet's device plugin API (v1beta1, with
//! CDI devices: KEP-4009) over the same device model as `generate` and
//! `watch`.
//!
//! One process serves one device plugin per resource. The watch loop keeps
//! the specs current; after each pass the [`inventory`] is rebuilt from the
//! pipeline's plans and the host's `/dev`, and every plugin's ListAndWatch
//! stream gets the new list.
//!
//! - [`passes`]: the watch's passes, each followed by a new inventory
//!   (shared with `dra-driver`).
//! - [`run`]: the process: the watch on the main thread, and on another per resource a server
//!   that registers with the kubelet and re-registers after it restarts.
//! - [`inventory`]: resources, device IDs ([`ids`]), CDI names, health and
//!   placement, rebuilt after every pass; [`signals`]: health beyond
//!   presence (PCIe AER counters, the link), its codes and what the admin
//!   ignores; [`xid`]: NVIDIA XID errors from NVML.
//! - [`server`]: the `DevicePlugin` service; [`allocate`] builds Allocate's
//!   answer; [`preferred`] GetPreferredAllocation's choice; [`devinfo`] the
//!   device-info files of allocated network devices, and [`held`] the
//!   devices handed out, on disk, so that a restart never removes a file a
//!   pod still uses.
//! - [`kubelet`]: the kubelet as a client (registration, pod resources);
//!   [`api`]: the generated gRPC code of `proto/*.proto`.

pub mod allocate;
pub mod api;
pub mod devinfo;
pub mod held;
pub mod ids;
pub mod inventory;
pub mod kubelet;
pub mod passes;
pub mod preferred;
pub mod run;
pub mod server;
pub mod signals;
pub mod vendor;
pub mod xid;

pub use run::{Options, run};

//! cdigen discovers the devices a Linux host has and writes the files
//! container runtimes and Kubernetes need to hand them to containers:
//! Container Device Interface (CDI) specs and device-info files.
//!
//! The pipeline, one module per stage:
//!
//! ```text
//! root → discovery → device model → render → validate → write
//! ```
//!
//! - [`root`]: the host as seen through `--root`; the only reader of
//!   sysfs, procfs and `/dev`. [`sysfs`] has the pure value parsers.
//!   [`fsio`] is how every file is opened and read: never a FIFO or a
//!   device node, never through a symlink where it must not, bounded.
//! - [`discover`]: one backend per device family behind one trait (DRM,
//!   VFIO, SR-IOV, vDPA, NVIDIA, and the generic backend, which finds any
//!   character device a generator definition describes), producing the
//!   [`model`].
//! - [`generator`]: the declarative generator definitions and device
//!   selection; [`render`]: the handlebars templates.
//! - [`cdi`]: the CDI spec model, names, versions, validation, encoding, and
//!   the runtime's view of spec directories (used by `validate`/`list`),
//!   and injection as the runtimes' library does it (`inject`);
//!   [`devinfo`]: the NPWG device-info model.
//! - [`generate`]: the pipeline from discovered devices to files, through
//!   [`mod@write`], the safe writer (atomic, idempotent, ownership-checked);
//!   [`check`] compares what is on disk with what it would write.
//! - [`snapshot`]: records what discovery read into a fixture tree;
//!   [`ldcache`]: the glibc linker cache reader for driver files;
//!   [`elf`]: a shared library's machine and soname, for driver roots
//!   without a cache.
//! - [`hook`]: `cdigen hook`, the OCI `createContainer` hooks NVIDIA specs
//!   name (links, CUDA forward compatibility, the linker cache), confined
//!   to the container's root ([`hook::inroot`]).
//! - [`plugin`]: the 2017 draft's CDI plugin protocol (`cdigen plugin`):
//!   allocates discovered devices to request IDs.
//! - [`deviceplugin`]: `cdigen device-plugin`, the kubelet's device plugin
//!   API over the watch's plans; [`dra`]: `cdigen dra-driver`, the same
//!   devices as DRA ResourceSlices and the kubelet's DRA plugin service.
//!   Their kubelet-facing sockets accept connections through [`front`],
//!   which makes what grpc-go clients send acceptable to tonic.
//! - [`trust`]: whether a host program may be run as root (hook paths,
//!   `--ldconfig`).
//! - [`text`]: escaping of host-derived text for terminals and logs.
//! - [`cli`]: the command-line interface; `src/main.rs` is a thin shell
//!   over it.
//!
//! The module graph has no cycles (`tests/modules.rs` checks it): discovery
//! knows nothing of generator definitions (what the generic backend scans
//! is plain data, [`discover::generic::Scan`], that [`generator::scan`]
//! builds); the definitions know nothing of rendering; [`watch`],
//! [`deviceplugin`], [`dra`] and [`cli`] sit on top and take plain settings
//! ([`generate::inputs`]).

pub mod cdi;
pub mod check;
pub mod cli;
pub mod deviceplugin;
pub mod devinfo;
pub mod discover;
pub mod dra;
pub mod elf;
pub mod front;
pub mod fsio;
pub mod generate;
pub mod generator;
pub mod hook;
pub mod ldcache;
pub mod model;
pub mod plugin;
pub mod render;
pub mod root;
pub mod snapshot;
pub mod sysfs;
pub mod text;
pub mod trust;
pub mod watch;
pub mod write;

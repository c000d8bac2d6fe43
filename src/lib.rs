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
//! - [`cdi`]: the CDI spec model, names, versions, validation, encoding,
//!   and the runtime's view of spec directories (used by `validate`/`list`).
//! - [`write`]: the safe writer (atomic, idempotent, ownership-checked).
//! - [`cli`]: the command-line interface; `src/main.rs` is a thin shell
//!   over it.

pub mod cdi;
pub mod cli;
pub mod devinfo;
pub mod discover;
pub mod generate;
pub mod generator;
pub mod model;
pub mod render;
pub mod root;
pub mod snapshot;
pub mod sysfs;
pub mod write;

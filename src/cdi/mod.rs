//! The Container Device Interface (CDI) spec: model, names, versions,
//! validation, encoding, the view of spec directories that runtimes
//! build, and what injecting devices gives a container ([`inject`]).
//!
//! In the pipeline this is the output format: rendered specs are parsed
//! into [`Spec`], checked with [`validate()`], and serialized with
//! [`codec::to_bytes`] before the writer puts them on disk.
//!
//! Spec files on disk are untrusted (spec directories are shared, and a
//! spec may be a symlink to any file): [`codec::parse`] never quotes their
//! content in an error, and [`dirs`] opens a spec only when it is, or a
//! symlink leads to, a regular file.

pub mod codec;
pub mod dirs;
pub mod hook_check;
pub mod inject;
pub mod name;
pub mod spec;
pub mod validate;
pub mod version;

use std::path::{Path, PathBuf};

pub use codec::Format;
pub use name::{Kind, QualifiedName};
pub use spec::{ContainerEdits, Device, DeviceNode, Hook, IntelRdt, Mount, NetDevice, Spec};
pub use validate::{Problem, validate};
pub use version::Version;

/// The static spec directory (packages and install hooks).
pub const STATIC_DIR: &str = "/etc/cdi";
/// The dynamic spec directory (regenerated at run time; cleared at boot).
pub const DYNAMIC_DIR: &str = "/var/run/cdi";
/// The directories runtimes read by default, lowest priority first.
pub const DEFAULT_SPEC_DIRS: [&str; 2] = [STATIC_DIR, DYNAMIC_DIR];

/// Largest spec file read (the largest real specs are a few MB).
pub const MAX_SPEC_BYTES: u64 = 64 << 20;

/// Why a spec file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Not a regular file (a symlink to one is followed), too large, or
    /// unreadable; never opened when not a regular file.
    #[error(transparent)]
    File(#[from] crate::fsio::Error),
    /// The extension is not one runtimes load.
    #[error("{}: not a spec file name (runtimes load only *.json and *.yaml)", path.display())]
    Extension {
        /// The file.
        path: PathBuf,
    },
    /// The content is not a spec.
    #[error("{}: {cause}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        cause: Box<codec::ParseError>,
    },
}

/// Reads and strictly parses one spec file (format from its extension).
/// A symlink is followed, as runtimes follow it, but only to a regular
/// file; nothing else is opened ([`crate::fsio`]).
///
/// # Errors
/// [`LoadError`] naming the file.
pub fn load_file(path: &Path) -> Result<Spec, LoadError> {
    parse_file(path, &read_file(path)?)
}

/// Reads one spec file as [`load_file`] does, without parsing it.
///
/// # Errors
/// [`LoadError`] naming the file.
pub fn read_file(path: &Path) -> Result<Vec<u8>, LoadError> {
    Format::from_path(path).ok_or_else(|| LoadError::Extension {
        path: path.to_path_buf(),
    })?;
    // Runtimes follow a symlinked spec file: so does this, but only to a
    // regular file (never a FIFO or device), and bounded.
    Ok(crate::fsio::read(
        path,
        MAX_SPEC_BYTES,
        crate::fsio::Links::Follow,
    )?)
}

/// Strictly parses the bytes of the spec file `path` (format from its
/// extension), as [`load_file`] does.
///
/// # Errors
/// [`LoadError`] naming the file.
pub fn parse_file(path: &Path, bytes: &[u8]) -> Result<Spec, LoadError> {
    let format = Format::from_path(path).ok_or_else(|| LoadError::Extension {
        path: path.to_path_buf(),
    })?;
    codec::parse(bytes, format).map_err(|cause| LoadError::Parse {
        path: path.to_path_buf(),
        cause: Box::new(cause),
    })
}

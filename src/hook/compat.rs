//! `cdigen hook enable-cuda-compat --host-driver-version V`: CUDA forward
//! compatibility.
//!
//! A CUDA image may carry a newer user-space driver than the host's in
//! `/usr/local/cuda/compat` (`libcuda.so.555.42.06` and its links, from
//! NVIDIA's `cuda-compat` package), which lets CUDA programs built for a
//! newer CUDA run on an older kernel driver. It must only be used when it
//! is newer: when the highest `libcuda.so.X.Y.Z` there (a regular file)
//! has a major version above the host driver's, this step writes
//! [`COMPAT_CONF`] listing [`COMPAT_DIR`], so that the linker cache finds
//! that libcuda before the host's (files in `/etc/ld.so.conf.d` are read
//! in name order, and `update-ldcache` also puts the directory first on
//! ldconfig's command line). Otherwise it writes nothing, and removes a
//! [`COMPAT_CONF`] an earlier start of the same container left behind
//! (the host driver may have been upgraded since).

use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::Error;
use super::inroot::{InRoot, Kind};

/// Where CUDA images keep the forward-compatible driver.
pub const COMPAT_DIR: &str = "/usr/local/cuda/compat";
/// The linker configuration this step writes.
pub const COMPAT_CONF: &str = "/etc/ld.so.conf.d/00-cdigen-cuda-compat.conf";
/// Most entries read from [`COMPAT_DIR`].
pub const MAX_COMPAT_ENTRIES: usize = 4096;
/// The file name prefix of the compat libcuda.
const LIBCUDA_PREFIX: &str = "libcuda.so.";
/// Most components of a version (`550.90.07` has three).
const MAX_PARTS: usize = 4;
/// Most digits of one component (fits a `u32`).
const MAX_DIGITS: usize = 9;

/// A driver version: numbers separated by dots (`550.90.07`), compared
/// number by number, shown as given.
#[derive(Debug, Clone)]
pub struct DriverVersion {
    text: String,
    parts: Vec<u32>,
}

impl DriverVersion {
    /// Parses `550.90.07`: one to four components of one to nine decimal
    /// digits each.
    pub fn parse(text: &str) -> Option<DriverVersion> {
        let mut parts = Vec::new();
        for part in text.split('.') {
            if part.is_empty()
                || part.len() > MAX_DIGITS
                || !part.bytes().all(|b| b.is_ascii_digit())
            {
                return None;
            }
            parts.push(part.parse().ok()?);
            if parts.len() > MAX_PARTS {
                return None;
            }
        }
        Some(DriverVersion {
            text: text.to_string(),
            parts,
        })
    }

    /// The major version: the first number.
    pub fn major(&self) -> u32 {
        self.parts.first().copied().unwrap_or(0)
    }

    /// The numbers.
    pub fn parts(&self) -> &[u32] {
        &self.parts
    }
}

impl PartialEq for DriverVersion {
    fn eq(&self, other: &Self) -> bool {
        self.parts == other.parts
    }
}

impl Eq for DriverVersion {}

impl PartialOrd for DriverVersion {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for DriverVersion {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.parts.cmp(&other.parts)
    }
}

impl fmt::Display for DriverVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Parses `--host-driver-version`.
///
/// # Errors
/// [`Error::BadArg`] naming the value.
pub fn parse_host_version(text: &str) -> Result<DriverVersion, Error> {
    DriverVersion::parse(text).ok_or_else(|| Error::BadArg {
        flag: "--host-driver-version",
        value: text.into(),
        why: "not a driver version (expected numbers separated by dots, such as 550.90.07)".into(),
    })
}

/// What [`enable_cuda_compat`] found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// [`COMPAT_CONF`] written: the image's compat driver is newer.
    Enabled {
        /// The compat driver's version.
        compat: DriverVersion,
    },
    /// The image's compat driver is not newer than the host's: nothing
    /// written.
    NotNewer {
        /// The compat driver's version.
        compat: DriverVersion,
        /// Whether a [`COMPAT_CONF`] left from an earlier start was
        /// removed.
        removed_stale: bool,
    },
    /// The image has no compat driver.
    NoCompat {
        /// Whether a [`COMPAT_CONF`] left from an earlier start was
        /// removed.
        removed_stale: bool,
    },
    /// The compat driver is newer, but the root is read-only: nothing
    /// written.
    ReadOnly {
        /// The compat driver's version.
        compat: DriverVersion,
    },
}

/// The highest version among the regular files `libcuda.so.X.Y[.Z]` of
/// [`COMPAT_DIR`] in `root`; `None` when there is none or no directory.
///
/// # Errors
/// [`Error::InRoot`]: the directory cannot be read, or has more than
/// [`MAX_COMPAT_ENTRIES`] entries.
pub fn compat_version(root: &InRoot) -> Result<Option<DriverVersion>, Error> {
    let entries = match root.list_dir(Path::new(COMPAT_DIR), MAX_COMPAT_ENTRIES) {
        Ok(entries) => entries,
        Err(e) if e.is_not_found() || e.is_not_dir() => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    Ok(entries
        .iter()
        .filter(|(_, kind)| *kind == Kind::File)
        .filter_map(|(name, _)| {
            let name = std::str::from_utf8(name.as_bytes()).ok()?;
            let version = DriverVersion::parse(name.strip_prefix(LIBCUDA_PREFIX)?)?;
            // `libcuda.so.1` is the soname, not a version.
            (version.parts().len() >= 2).then_some(version)
        })
        .max())
}

/// Enables the image's CUDA compat driver when it is newer than `host`
/// (see the module docs).
///
/// # Errors
/// [`Error::InRoot`]: the compat directory cannot be read, or
/// [`COMPAT_CONF`] cannot be written or removed (something other than a
/// regular file there included).
pub fn enable_cuda_compat(root: &InRoot, host: &DriverVersion) -> Result<Outcome, Error> {
    let compat = compat_version(root)?;
    match compat {
        Some(compat) if compat.major() > host.major() => {
            let content = format!(
                "# Written by cdigen hook enable-cuda-compat: the CUDA forward-compatible driver {compat} (the host's is {host}).\n{COMPAT_DIR}\n"
            );
            match root.write_file(Path::new(COMPAT_CONF), content.as_bytes()) {
                Ok(()) => Ok(Outcome::Enabled { compat }),
                Err(e) if e.is_read_only() => Ok(Outcome::ReadOnly { compat }),
                Err(e) => Err(e.into()),
            }
        }
        Some(compat) => Ok(Outcome::NotNewer {
            compat,
            removed_stale: remove_stale(root)?,
        }),
        None => Ok(Outcome::NoCompat {
            removed_stale: remove_stale(root)?,
        }),
    }
}

fn remove_stale(root: &InRoot) -> Result<bool, Error> {
    match root.remove_file(Path::new(COMPAT_CONF)) {
        Ok(removed) => Ok(removed),
        // Nothing can have been written there either.
        Err(e) if e.is_read_only() => Ok(false),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests;

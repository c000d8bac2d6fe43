//! `cdigen hook`: the OCI `createContainer` hooks cdigen's NVIDIA specs
//! name, standalone and fast (no lock, no generator definitions).
//!
//! A runtime (runc, crun) runs the host binary a spec's
//! `containerEdits.hooks` names after the container's mounts are set up
//! and before `pivot_root`, with the OCI state on stdin
//! (`{"ociVersion", "id", "status", "pid", "bundle", "annotations"}`).
//! The container's root filesystem is `root.path` of the bundle's
//! `config.json` (relative to the bundle, or absolute). A hook that fails
//! fails the container's start, showing its stderr.
//!
//! The flow of every step: [`read_state`] (bounded), [`open_root`] (the
//! bundle's `config.json` through [`crate::fsio`], bounded, then the root
//! as an [`inroot::InRoot`]), then the step itself:
//!
//! - [`symlinks`]: `create-symlinks`, the links a driver's libraries and
//!   DRM by-path names need;
//! - [`compat`]: `enable-cuda-compat`, CUDA forward compatibility;
//! - [`ldconfig`]: `update-ldcache`, the container's linker cache;
//! - [`profile`]: `update-application-profile`, the driver's application
//!   profile that shows EGL and Vulkan only the container's GPUs.
//!
//! The container root is untrusted: every path in it is resolved inside it
//! ([`inroot`]), so no symlink in the image can make a hook write outside
//! it, and no FIFO or device in it is ever opened.

pub mod compat;
pub mod inroot;
pub mod ldconfig;
pub mod profile;
pub mod symlinks;

use std::io::{self, Read};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::fsio;
use inroot::InRoot;

/// Largest OCI state read from stdin.
pub const MAX_STATE: u64 = 1 << 20;
/// Largest `config.json` read from the bundle.
pub const MAX_CONFIG: u64 = 4 << 20;

/// Why a hook failed; each variant says what, and names the file or
/// argument. Causes are part of the message, not a chain of errors.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Stdin could not be read.
    #[error("cannot read the container state from stdin: {0}")]
    StateRead(io::Error),
    /// Stdin holds more than [`MAX_STATE`] bytes.
    #[error("the container state on stdin is larger than {MAX_STATE} bytes")]
    StateTooLarge,
    /// Stdin is not an OCI state.
    #[error("the container state on stdin is not valid: {0}")]
    StateJson(serde_json::Error),
    /// The state's bundle is empty.
    #[error("the container state on stdin has an empty bundle")]
    NoBundle,
    /// `config.json` could not be read.
    #[error("{0}")]
    Config(fsio::Error),
    /// `config.json` is not an OCI runtime configuration.
    #[error("{}: not a valid OCI runtime configuration: {cause}", path.display())]
    ConfigJson {
        /// The file.
        path: PathBuf,
        /// The cause.
        cause: serde_json::Error,
    },
    /// `config.json` has no `root.path`.
    #[error("{}: no root.path", path.display())]
    NoRootPath {
        /// The file.
        path: PathBuf,
    },
    /// The container root is the host's `/`.
    #[error("{}: the container root is the host's root directory: refusing to change it", root.display())]
    HostRoot {
        /// The root.
        root: PathBuf,
    },
    /// An operation in the container root failed.
    #[error(transparent)]
    InRoot(#[from] inroot::Error),
    /// A command-line argument is not what the step accepts.
    #[error("{flag} {}: {why}", crate::text::path(Path::new(value)))]
    BadArg {
        /// The flag (`--link`).
        flag: &'static str,
        /// The value given.
        value: std::ffi::OsString,
        /// What is wrong with it.
        why: String,
    },
    /// More of an argument than a step accepts.
    #[error("more than {limit} {flag} arguments")]
    TooMany {
        /// The flag (`--link`).
        flag: &'static str,
        /// The limit.
        limit: usize,
    },
    /// No ldconfig to run.
    #[error("no ldconfig found (looked for {tried}); name one with --ldconfig")]
    NoLdconfig {
        /// The paths looked at.
        tried: String,
    },
    /// ldconfig could not be started.
    #[error("cannot run {}: {cause}", path.display())]
    LdconfigSpawn {
        /// The ldconfig.
        path: PathBuf,
        /// The cause.
        cause: io::Error,
    },
    /// The ldconfig to run is not a static program.
    #[error(
        "{}: {why}: ldconfig runs inside the container root, where an interpreter or libraries it loads would be the image's; name a statically linked ldconfig with --ldconfig (on Ubuntu /sbin/ldconfig is a shell script, /sbin/ldconfig.real the program)",
        path.display()
    )]
    LdconfigNotStatic {
        /// The ldconfig.
        path: PathBuf,
        /// What it is instead.
        why: String,
    },
    /// ldconfig could not be isolated from the host (nothing was run).
    #[error("cannot isolate ldconfig from the host, so it was not run: {why}")]
    LdconfigIsolation {
        /// The step that failed and why.
        why: String,
    },
    /// The isolated process (`cdigen-ldconfig-isolated`) failed before
    /// ldconfig ran: its own message.
    #[error("{message}")]
    Isolated {
        /// What it said (one line).
        message: String,
    },
    /// ldconfig ran too long.
    #[error("{command} did not finish within {}: killed it", humantime::format_duration(*limit))]
    LdconfigTimeout {
        /// The command line, shortened.
        command: String,
        /// The limit.
        limit: std::time::Duration,
    },
    /// ldconfig failed.
    #[error("{command} failed ({status}){}", stderr_suffix(stderr))]
    LdconfigFailed {
        /// The command line, shortened.
        command: String,
        /// `exit status 1`, `killed by signal 9`.
        status: String,
        /// What it said on stderr (bounded).
        stderr: String,
    },
}

fn stderr_suffix(stderr: &str) -> String {
    if stderr.is_empty() {
        String::new()
    } else {
        format!(": {stderr}")
    }
}

/// The part of the OCI state the hooks use.
#[derive(Debug, Clone, Deserialize)]
pub struct State {
    /// The container's ID.
    #[serde(default)]
    pub id: Option<String>,
    /// The bundle directory, holding `config.json`.
    pub bundle: PathBuf,
}

/// Reads the OCI state from `input`: at most [`MAX_STATE`] bytes of JSON.
///
/// # Errors
/// [`Error::StateRead`], [`Error::StateTooLarge`], [`Error::StateJson`],
/// [`Error::NoBundle`].
pub fn read_state(input: &mut dyn Read) -> Result<State, Error> {
    let mut buf = Vec::new();
    input
        .take(MAX_STATE + 1)
        .read_to_end(&mut buf)
        .map_err(Error::StateRead)?;
    if buf.len() as u64 > MAX_STATE {
        return Err(Error::StateTooLarge);
    }
    let state: State = serde_json::from_slice(&buf).map_err(Error::StateJson)?;
    if state.bundle.as_os_str().is_empty() {
        return Err(Error::NoBundle);
    }
    Ok(state)
}

#[derive(Deserialize)]
struct Config {
    #[serde(default)]
    root: Option<ConfigRoot>,
    #[serde(default)]
    linux: Option<ConfigLinux>,
}

#[derive(Deserialize)]
struct ConfigLinux {
    #[serde(default)]
    devices: Vec<ConfigDevice>,
}

/// A device node of `config.json`'s `linux.devices`: one the runtime
/// creates in the container (CDI's `deviceNodes` end up there).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ConfigDevice {
    /// Its path in the container (`/dev/nvidia0`).
    pub path: PathBuf,
    /// `c`, `b`, `u` or `p`.
    #[serde(default, rename = "type")]
    pub kind: String,
    /// Its major number.
    #[serde(default)]
    pub major: Option<i64>,
    /// Its minor number.
    #[serde(default)]
    pub minor: Option<i64>,
}

/// `<bundle>/config.json`, parsed, and its path.
fn read_config(bundle: &Path) -> Result<(PathBuf, Config), Error> {
    let path = bundle.join("config.json");
    let bytes = fsio::read(&path, MAX_CONFIG, fsio::Links::Follow).map_err(Error::Config)?;
    let config: Config = serde_json::from_slice(&bytes).map_err(|cause| Error::ConfigJson {
        path: path.clone(),
        cause,
    })?;
    Ok((path, config))
}

#[derive(Deserialize)]
struct ConfigRoot {
    #[serde(default)]
    path: Option<PathBuf>,
}

/// The container's root filesystem: `root.path` of `<bundle>/config.json`
/// (read through [`crate::fsio`], at most [`MAX_CONFIG`] bytes), joined to
/// the bundle when relative.
///
/// # Errors
/// [`Error::Config`], [`Error::ConfigJson`], [`Error::NoRootPath`].
pub fn container_root(bundle: &Path) -> Result<PathBuf, Error> {
    let (path, config) = read_config(bundle)?;
    match config.root.and_then(|r| r.path) {
        Some(root) if !root.as_os_str().is_empty() => Ok(bundle.join(root)),
        _ => Err(Error::NoRootPath { path }),
    }
}

/// The device nodes the runtime creates in the container: `linux.devices`
/// of `<bundle>/config.json` (read as [`container_root`] reads it).
///
/// # Errors
/// [`Error::Config`], [`Error::ConfigJson`].
pub fn container_devices(bundle: &Path) -> Result<Vec<ConfigDevice>, Error> {
    let (_, config) = read_config(bundle)?;
    Ok(config.linux.map(|l| l.devices).unwrap_or_default())
}

/// Opens the container root of `state` (see [`container_root`]),
/// refusing the host's own root directory.
///
/// # Errors
/// As [`container_root`]; [`Error::InRoot`] when the root cannot be
/// opened; [`Error::HostRoot`].
pub fn open_root(state: &State) -> Result<InRoot, Error> {
    let root = container_root(&state.bundle)?;
    let opened = InRoot::open(&root)?;
    let st = rustix::fs::fstat(opened.root_fd()).map_err(|e| inroot::Error::Root {
        root: root.clone(),
        cause: e.into(),
    })?;
    if let Ok(host) = std::fs::metadata("/")
        && host.dev() == st.st_dev
        && host.ino() == st.st_ino
    {
        return Err(Error::HostRoot { root });
    }
    Ok(opened)
}

/// A host program named by a path option of a step (`--ldconfig`): it must
/// be absolute (a hook's working directory is the container's root, so a
/// relative path would run the image's program as root) and trusted as
/// [`crate::trust::program`] says: a regular file that no one but root
/// could have put there.
///
/// # Errors
/// [`Error::BadArg`] naming `flag` and why.
pub fn host_program(flag: &'static str, path: &Path) -> Result<PathBuf, Error> {
    crate::trust::program(path).map_err(|why| Error::BadArg {
        flag,
        value: path.into(),
        why: why.reason_for(path),
    })?;
    Ok(path.to_path_buf())
}

#[cfg(test)]
mod tests;

/// Helpers for the hook tests: FIFOs, a time limit, tree listings.
#[cfg(test)]
pub(crate) mod test_support {
    #![allow(clippy::unwrap_used, clippy::panic)]

    use std::collections::BTreeSet;
    use std::path::Path;
    use std::sync::mpsc;
    use std::time::Duration;

    pub(crate) use crate::fsio::test_support::mkfifo;

    /// Runs `f` on a thread, failing the test when it takes more than 10
    /// seconds (a FIFO opened would block for ever).
    pub(crate) fn with_timeout<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(v) => v,
            Err(mpsc::RecvTimeoutError::Timeout) => panic!("blocked: still running after 10 s"),
            Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the checked code panicked"),
        }
    }

    /// A tmpfs mounted on a temp dir, filled by the caller, then made
    /// read-only; unmounted when dropped. `None` (with the reason printed)
    /// where mounting is not allowed (not root, no `CAP_SYS_ADMIN`).
    pub(crate) struct ReadOnlyMount {
        dir: tempfile::TempDir,
    }

    impl ReadOnlyMount {
        pub(crate) fn new(fill: impl FnOnce(&Path)) -> Option<ReadOnlyMount> {
            let dir = tempfile::tempdir().unwrap();
            let mounted = std::process::Command::new("mount")
                .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
                .arg(dir.path())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if !mounted {
                println!("skipped: cannot mount a tmpfs here (needs root)");
                return None;
            }
            let m = ReadOnlyMount { dir };
            fill(m.path());
            let status = std::process::Command::new("mount")
                .args(["-o", "remount,ro"])
                .arg(m.path())
                .status()
                .unwrap();
            assert!(status.success(), "remount read-only");
            Some(m)
        }

        pub(crate) fn path(&self) -> &Path {
            self.dir.path()
        }
    }

    impl Drop for ReadOnlyMount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount")
                .arg(self.dir.path())
                .status();
        }
    }

    /// Every path under `dir`, relative, symlinks not followed.
    pub(crate) fn listing(dir: &Path) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        let mut todo = vec![dir.to_path_buf()];
        while let Some(d) = todo.pop() {
            for entry in std::fs::read_dir(&d).unwrap() {
                let path = entry.unwrap().path();
                out.insert(path.strip_prefix(dir).unwrap().display().to_string());
                if std::fs::symlink_metadata(&path).unwrap().is_dir() {
                    todo.push(path);
                }
            }
        }
        out
    }
}

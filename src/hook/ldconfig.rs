//! `cdigen hook update-ldcache --folder DIR ... [--ldconfig PATH]`: makes
//! the container's linker cache (`/etc/ld.so.cache`) list the driver
//! libraries mounted into it, so that programs that find their libraries
//! through the cache (not only the loader's built-in directories) load
//! them.
//!
//! The **host's** ldconfig (the image's own is never run) must be a static
//! program ([`isolate::load_program`]); then this step writes
//! [`DRIVER_CONF`] with the folders, one per line (for the container's own
//! later `ldconfig` runs), and starts its own binary again under the name
//! [`ISOLATED_NAME`] ([`isolate::main`]), which runs ldconfig
//! inside the container root in new namespaces, where no path of the image
//! can reach the host: no `/proc`, `/sys` or other view of it, no old root,
//! no device that opens. `ldconfig -r ROOT` alone is not enough: it chroots
//! into a root whose `/proc/1/root` is the host's `/`.
//!
//! ldconfig's command line is `-i -C /etc/ld.so.cache -f /etc/ld.so.conf
//! [COMPAT_DIR] FOLDER...`: `-i` so that it reads every library itself
//! instead of trusting the image's aux cache; the folders so that they are
//! cached even when the image's `/etc/ld.so.conf` does not include
//! `/etc/ld.so.conf.d`. Directories on the command line come before every
//! configured one in the cache, so when `enable-cuda-compat` has enabled
//! the image's compat driver ([`super::compat::COMPAT_CONF`] is there),
//! its directory goes first, ahead of the host's libcuda. Neither `-X`
//! nor `-N`: the soname links ldconfig makes in the folders are how the
//! driver's libraries are found by soname, and the cache is the point;
//! isolated, both are written inside the root only.
//!
//! The isolated process runs in its own process group, killed after a
//! time limit (30 s from the command line) with ldconfig; their stderr is
//! kept (the first [`MAX_STDERR`] bytes) for the error when it fails.
//!
//! On a read-only root (the configuration file cannot be written:
//! `EROFS`), nothing is run: [`Outcome::ReadOnly`].

pub mod isolate;

use std::io::Read;
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::{Component, Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use super::Error;
use super::compat::{COMPAT_CONF, COMPAT_DIR};
use super::inroot::{InRoot, Kind, MAX_PATH};

/// The linker configuration this step writes.
pub const DRIVER_CONF: &str = "/etc/ld.so.conf.d/00-cdigen-driver.conf";
/// Most `--folder` arguments.
pub const MAX_FOLDERS: usize = 64;
/// The host's ldconfig, the first of these that is a file: Ubuntu's real
/// binary (`/sbin/ldconfig` is a shell script there), then the usual
/// places.
pub const DEFAULT_LDCONFIG: [&str; 3] = [
    "/sbin/ldconfig.real",
    "/sbin/ldconfig",
    "/usr/sbin/ldconfig",
];
/// How long ldconfig may run.
pub const TIMEOUT: Duration = Duration::from_secs(30);
/// Most bytes of ldconfig's stderr kept.
pub const MAX_STDERR: usize = 8 << 10;
/// The program `update-ldcache` starts for the isolated step: its own
/// binary.
pub const SELF_EXE: &str = "/proc/self/exe";
/// The name `update-ldcache` starts its own binary under, which makes it
/// [`isolate::main`]: no subcommand, so no completion or man page offers
/// it.
pub const ISOLATED_NAME: &str = "cdigen-ldconfig-isolated";
/// The environment the isolated step gets (nothing else of the hook's).
const PATH_ENV: &str = "/usr/sbin:/usr/bin:/sbin:/bin";

/// One `--folder`: an absolute, normalized path in the container, without
/// the characters ldconfig's configuration syntax gives a meaning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Folder(String);

impl Folder {
    /// Checks a folder: absolute, at most 4096 bytes, no empty, `.` or
    /// `..` component, no trailing `/`, no whitespace, control character,
    /// `#` (a comment in ld.so.conf) or `=` (a library type there).
    ///
    /// # Errors
    /// [`Error::BadArg`] saying what is wrong.
    pub fn parse(s: &str) -> Result<Folder, Error> {
        let bad = |why: &str| Error::BadArg {
            flag: "--folder",
            value: s.into(),
            why: why.to_string(),
        };
        if s.len() > MAX_PATH {
            return Err(bad("longer than 4096 bytes"));
        }
        if !s.starts_with('/') {
            return Err(bad("not an absolute path"));
        }
        if s.chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '#' || c == '=')
        {
            return Err(bad(
                "contains whitespace, a control character, # or =, which ld.so.conf would misread",
            ));
        }
        if Path::new(s).components().any(|c| c == Component::ParentDir) {
            return Err(bad("must not contain .."));
        }
        let normalized = s == "/"
            || s.get(1..)
                .is_some_and(|rest| rest.split('/').all(|c| !c.is_empty() && c != "."));
        if !normalized {
            return Err(bad(
                "not a normalized path (no empty or . component, no trailing /)",
            ));
        }
        Ok(Folder(s.to_string()))
    }

    /// The path.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Parses every `--folder`, at most [`MAX_FOLDERS`]; repeated ones are
/// kept once, in first-seen order.
///
/// # Errors
/// [`Error::TooMany`]; [`Error::BadArg`] for the first bad one.
pub fn parse_folders(args: &[String]) -> Result<Vec<Folder>, Error> {
    if args.len() > MAX_FOLDERS {
        return Err(Error::TooMany {
            flag: "--folder",
            limit: MAX_FOLDERS,
        });
    }
    let mut out: Vec<Folder> = Vec::with_capacity(args.len());
    for arg in args {
        let folder = Folder::parse(arg)?;
        if !out.contains(&folder) {
            out.push(folder);
        }
    }
    Ok(out)
}

/// The ldconfig to run: `explicit` when given (it must be a trusted
/// program: [`crate::hook::host_program`]), else
/// the first of [`DEFAULT_LDCONFIG`] that is one.
///
/// # Errors
/// [`Error::BadArg`] for an `explicit` path that is not trusted;
/// [`Error::NoLdconfig`].
pub fn find_ldconfig(explicit: Option<&Path>) -> Result<PathBuf, Error> {
    match explicit {
        Some(path) => crate::hook::host_program("--ldconfig", path),
        None => find_ldconfig_in(&DEFAULT_LDCONFIG.map(Path::new)),
    }
}

/// The first of `candidates` that is a file (following symlinks).
///
/// # Errors
/// [`Error::NoLdconfig`] listing them.
pub fn find_ldconfig_in(candidates: &[&Path]) -> Result<PathBuf, Error> {
    candidates
        .iter()
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file()))
        .map(|p| p.to_path_buf())
        .ok_or_else(|| Error::NoLdconfig {
            tried: candidates
                .iter()
                .map(|p| crate::text::path(p).to_string())
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// What [`update_ldcache`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The configuration was written and ldconfig ran.
    Updated,
    /// The root is read-only: nothing written, ldconfig not run.
    ReadOnly,
}

/// The content of [`DRIVER_CONF`].
fn driver_conf(folders: &[Folder]) -> String {
    let mut out = String::from(
        "# Written by cdigen hook update-ldcache: the driver libraries mounted into this container.\n",
    );
    for f in folders {
        out.push_str(f.as_str());
        out.push('\n');
    }
    out
}

/// Checks `ldconfig`, writes [`DRIVER_CONF`] and runs `ldconfig` isolated
/// in the root (see the module docs), killing it after `timeout`.
///
/// # Errors
/// As [`isolate::load_program`]; [`Error::InRoot`] when the configuration
/// cannot be written (other than read-only); [`Error::LdconfigSpawn`],
/// [`Error::Isolated`], [`Error::LdconfigTimeout`],
/// [`Error::LdconfigFailed`].
pub fn update_ldcache(
    root: &InRoot,
    folders: &[Folder],
    ldconfig: &Path,
    timeout: Duration,
) -> Result<Outcome, Error> {
    update_ldcache_with(root, folders, ldconfig, Path::new(SELF_EXE), timeout)
}

/// [`update_ldcache`] with `cdigen` at `runner` (tests give a stand-in).
///
/// # Errors
/// As [`update_ldcache`].
pub fn update_ldcache_with(
    root: &InRoot,
    folders: &[Folder],
    ldconfig: &Path,
    runner: &Path,
    timeout: Duration,
) -> Result<Outcome, Error> {
    // Refused before anything is written; the isolated step checks the
    // bytes it runs again.
    isolate::load_program(ldconfig)?;
    match root.write_file(Path::new(DRIVER_CONF), driver_conf(folders).as_bytes()) {
        Ok(()) => {}
        Err(e) if e.is_read_only() => return Ok(Outcome::ReadOnly),
        Err(e) => return Err(e.into()),
    }
    let root_path = std::path::absolute(root.path()).unwrap_or_else(|_| root.path().to_path_buf());
    let mut args: Vec<std::ffi::OsString> = vec![
        "--root".into(),
        root_path.clone().into(),
        "--ldconfig".into(),
        ldconfig.into(),
        "--".into(),
        // Every library read, none taken from the image's aux cache.
        "-i".into(),
        // Explicit: a host's ldconfig may be built with other defaults.
        "-C".into(),
        "/etc/ld.so.cache".into(),
        "-f".into(),
        "/etc/ld.so.conf".into(),
    ];
    if root.kind(Path::new(COMPAT_CONF))? == Some(Kind::File) {
        args.push(COMPAT_DIR.into());
    }
    args.extend(folders.iter().map(|f| f.as_str().into()));
    let command = format!(
        "{} in {}",
        crate::text::path(ldconfig),
        crate::text::path(&root_path)
    );
    run(runner, ISOLATED_NAME, &args, &command, timeout)?;
    Ok(Outcome::Updated)
}

/// Runs `program` named `name` with `args` (see the module docs for how).
fn run(
    program: &Path,
    name: &str,
    args: &[std::ffi::OsString],
    command: &str,
    timeout: Duration,
) -> Result<(), Error> {
    let mut child = Command::new(program)
        .arg0(name)
        .args(args)
        .env_clear()
        .env("PATH", PATH_ENV)
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|cause| Error::LdconfigSpawn {
            path: program.to_path_buf(),
            cause,
        })?;
    let kept = Arc::new(Mutex::new(Vec::new()));
    let (done_tx, done_rx) = mpsc::channel();
    if let Some(stderr) = child.stderr.take() {
        let kept = Arc::clone(&kept);
        std::thread::spawn(move || {
            drain(stderr, &kept);
            let _ = done_tx.send(());
        });
    }
    let status = wait(&mut child, timeout).map_err(|()| Error::LdconfigTimeout {
        command: command.to_string(),
        limit: timeout,
    })?;
    // What it left running may hold the pipe open: do not wait for ever.
    let _ = done_rx.recv_timeout(Duration::from_secs(1));
    let said = {
        let bytes = kept.lock().unwrap_or_else(|p| p.into_inner());
        one_line(&String::from_utf8_lossy(&bytes))
    };
    if status.success() {
        if !said.is_empty() {
            tracing::debug!("{command}: {said}");
        }
        return Ok(());
    }
    if status.code() == Some(i32::from(isolate::EXIT_ISOLATION)) && !said.is_empty() {
        return Err(Error::Isolated { message: said });
    }
    Err(Error::LdconfigFailed {
        command: command.to_string(),
        status: describe_status(status),
        stderr: said,
    })
}

/// Waits for `child` at most `timeout`; past it, kills its process group
/// (and it) and reaps it.
fn wait(child: &mut std::process::Child, timeout: Duration) -> Result<ExitStatus, ()> {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(1);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) => {}
            // Cannot happen for a child of ours; treat as gone.
            Err(_) => return Err(()),
        }
        let now = Instant::now();
        if now >= deadline {
            let pid = rustix::process::Pid::from_child(child);
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            let _ = child.kill();
            let _ = child.wait();
            return Err(());
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// Reads `from` to its end, keeping the first [`MAX_STDERR`] bytes.
fn drain(mut from: impl Read, kept: &Mutex<Vec<u8>>) {
    let mut buf = [0u8; 4096];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let mut kept = kept.lock().unwrap_or_else(|p| p.into_inner());
                let room = MAX_STDERR.saturating_sub(kept.len());
                kept.extend(buf.iter().take(n.min(room)));
            }
        }
    }
}

/// Lines of output as one line: trimmed, non-empty lines joined by `; `.
fn one_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

fn describe_status(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        (None, None) => status.to_string(),
    }
}

#[cfg(test)]
mod tests;

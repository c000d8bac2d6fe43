//! ldconfig run where the image cannot reach the host: the child side of
//! `update-ldcache`, which the hook starts as a new process of its own
//! binary named [`super::ISOLATED_NAME`] ([`main`]).
//!
//! A `createContainer` hook runs in the container's mount namespace before
//! `pivot_root`: the container's mounts are there (its `/proc`, `/sys`,
//! `/dev`, the driver libraries), and the process's root is still the
//! host's `/`. `ldconfig -r ROOT` chroots into the root and trusts the
//! image's paths from there, but the container's `/proc/1/root` is the
//! host's `/` again: an image could make ldconfig read host files as its
//! configuration and write its cache, aux cache and soname links on the
//! host. So ldconfig never sees the host tree at all:
//!
//! 1. The program is read whole (at most [`MAX_PROGRAM`]) and must be a
//!    static ELF executable for this machine (no `PT_INTERP`): a dynamic
//!    one would load its interpreter and libraries from the image, a script
//!    its shell. Exactly those bytes are run, from a copy (step 6).
//! 2. `unshare` new mount, PID, network, IPC and UTS namespaces (root with
//!    `CAP_SYS_ADMIN` only: without them it fails, and nothing runs), and
//!    `/` is made recursively private, so nothing done here propagates.
//! 3. The mounts under the root are read from `/proc/self/mountinfo`, then
//!    the root is bound onto itself (with its mounts), made the root with
//!    `pivot_root`, and the old root detached: no path leads to the host.
//! 4. Every pseudo filesystem under it ([`PSEUDO_FILESYSTEMS`]: `proc`,
//!    `sysfs`, `cgroup`, `devtmpfs`, `nsfs`, ...), the host's views, is
//!    detached, and checked gone with `statfs`. What stays is the image and
//!    the runtime's own mounts (the driver libraries the cache must list).
//! 5. Every mount that stays is remounted `nodev,nosuid` (its other flags
//!    kept) and checked: no device node, the image's own included, can be
//!    opened as a configuration file or library.
//! 6. A tmpfs that is mounted nowhere (`fsopen`/`fsmount`, Linux 5.2)
//!    gets a copy of the program and becomes the working directory. The
//!    capability bounding set is cut to `CAP_DAC_OVERRIDE`,
//!    `CAP_DAC_READ_SEARCH` and `CAP_FOWNER` (what writing the image's
//!    files as root may need), with `no_new_privs`; then `./ldconfig`
//!    runs as the new PID namespace's first process, with an empty
//!    environment (but `PATH` and `LC_ALL=C`), umask 022, and without
//!    `-r`: its root already is the container's.
//!
//! Inside, every absolute path, symlink target and `include` resolves in
//! the container root, where nothing leads out: `/var/cache/ldconfig ->
//! /proc/1/root/...` or `/etc -> /proc/1/root/etc` only name missing
//! files. What it writes (`/etc/ld.so.cache`, the aux cache, soname links)
//! lands in the image, or in a mount the runtime gave the container.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read as _, Write as _};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStringExt as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use rustix::fs::{Mode, OFlags, StatVfsMountFlags};
use rustix::io::Errno;
use rustix::mount::{
    FsMountFlags, FsOpenFlags, MountAttrFlags, MountFlags, MountPropagationFlags, UnmountFlags,
};
use rustix::thread::{CapabilitySet, UnshareFlags};

use super::super::Error;
use crate::elf;

/// Exit status of the isolated process when it could not isolate or
/// start ldconfig (ldconfig's own are 0 and 1).
pub const EXIT_ISOLATION: u8 = 125;
/// Largest ldconfig read (glibc's is about 1 MiB).
pub const MAX_PROGRAM: u64 = 64 << 20;
/// Largest `/proc/self/mountinfo` read.
const MAX_MOUNTINFO: u64 = 16 << 20;
/// The filesystems that are views of the host (its processes, kernel,
/// devices, namespaces), detached from the root before ldconfig runs.
pub const PSEUDO_FILESYSTEMS: &[&str] = &[
    "proc",
    "sysfs",
    "cgroup",
    "cgroup2",
    "devtmpfs",
    "devpts",
    "mqueue",
    "debugfs",
    "tracefs",
    "securityfs",
    "configfs",
    "fusectl",
    "bpf",
    "binfmt_misc",
    "pstore",
    "efivarfs",
    "nsfs",
    "selinuxfs",
    "smackfs",
    "autofs",
    "rpc_pipefs",
    "hugetlbfs",
    "fuse.lxcfs",
];
/// `statfs` magic numbers of [`PSEUDO_FILESYSTEMS`]: what must not be at
/// a detached mount point afterwards.
const PSEUDO_MAGIC: &[u64] = &[
    0x9fa0,      // proc
    0x6265_6572, // sysfs
    0x0027_e0eb, // cgroup
    0x6367_7270, // cgroup2
    0x1cd1,      // devpts
    0x1980_0202, // mqueue
    0x6462_6720, // debugfs
    0x7472_6163, // tracefs
    0x7363_6673, // securityfs
    0x6265_6570, // configfs
    0x6573_5543, // fusectl
    0xcafe_4a11, // bpf
    0x4249_4e4d, // binfmt_misc
    0x6165_676c, // pstore
    0xde5e_81e4, // efivarfs
    0x6e73_6673, // nsfs
    0xf97c_ff8c, // selinuxfs
    0x4341_5d53, // smackfs
    0x0187,      // autofs
    0x6767_6767, // rpc_pipefs
    0x9584_58f6, // hugetlbfs
];
/// The capabilities ldconfig keeps: writing and replacing the image's
/// files as root, whoever owns them (user-namespaced images).
const KEEP: CapabilitySet = CapabilitySet::DAC_OVERRIDE
    .union(CapabilitySet::DAC_READ_SEARCH)
    .union(CapabilitySet::FOWNER);
/// The environment ldconfig gets (nothing else of the hook's).
const PATH_ENV: &str = "/usr/sbin:/usr/bin:/sbin:/bin";

/// An isolation step that failed.
fn failed(what: impl std::fmt::Display, cause: impl Into<io::Error>) -> Error {
    let cause: io::Error = cause.into();
    let hint = if cause.raw_os_error() == Some(Errno::PERM.raw_os_error()) {
        " (it needs root with CAP_SYS_ADMIN)"
    } else {
        ""
    };
    Error::LdconfigIsolation {
        why: format!("{what}: {cause}{hint}"),
    }
}

/// Reads `path`, the ldconfig to run: a regular file of at most
/// [`MAX_PROGRAM`] bytes, a static ELF executable for this machine.
///
/// # Errors
/// [`Error::LdconfigSpawn`] when it cannot be opened or read;
/// [`Error::LdconfigNotStatic`] for anything else.
pub fn load_program(path: &Path) -> Result<Vec<u8>, Error> {
    let spawn = |cause| Error::LdconfigSpawn {
        path: path.to_path_buf(),
        cause,
    };
    let not_static = |why: String| Error::LdconfigNotStatic {
        path: path.to_path_buf(),
        why,
    };
    let file = File::open(path).map_err(spawn)?;
    let meta = file.metadata().map_err(spawn)?;
    if !meta.is_file() {
        return Err(not_static(format!(
            "{}, not a program",
            crate::fsio::describe(meta.file_type())
        )));
    }
    if meta.len() > MAX_PROGRAM {
        return Err(not_static(format!("larger than {} MiB", MAX_PROGRAM >> 20)));
    }
    let mut bytes = Vec::new();
    file.take(MAX_PROGRAM + 1)
        .read_to_end(&mut bytes)
        .map_err(spawn)?;
    if bytes.len() as u64 > MAX_PROGRAM {
        return Err(not_static(format!("larger than {} MiB", MAX_PROGRAM >> 20)));
    }
    match elf::linking(bytes.as_slice()) {
        Ok(elf::Linking::Static) => Ok(bytes),
        Ok(elf::Linking::Dynamic) => Err(not_static(
            "dynamically linked (it names a program interpreter)".into(),
        )),
        Err(elf::Error::Malformed(why)) => Err(not_static(format!(
            "not an ELF executable for this machine ({why})"
        ))),
        Err(elf::Error::Io(cause)) => Err(spawn(cause)),
    }
}

/// One line of `/proc/self/mountinfo`: what the isolation needs of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    /// The mount point (octal escapes decoded).
    pub point: PathBuf,
    /// The per-mount options (`rw,nosuid,relatime`).
    pub options: String,
    /// The filesystem type (`proc`, `ext4`, `fuse.lxcfs`).
    pub fstype: String,
}

/// The mounts of `text` (a `mountinfo` file), in its order; malformed
/// lines are skipped.
pub fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let sep = fields.iter().skip(6).position(|f| *f == "-")? + 6;
            Some(MountEntry {
                point: unescape(fields.get(4)?),
                options: (*fields.get(5)?).to_string(),
                fstype: (*fields.get(sep + 1)?).to_string(),
            })
        })
        .collect()
}

/// Decodes mountinfo's `\ooo` escapes (space, tab, newline, backslash).
fn unescape(s: &str) -> PathBuf {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| c == b'\\' && d.iter().all(|x| (b'0'..=b'7').contains(x)))
            .map(|d| d.iter().fold(0u32, |n, x| n * 8 + u32::from(x - b'0')));
        match octal.and_then(|n| u8::try_from(n).ok()) {
            Some(byte) => {
                out.push(byte);
                i += 4;
            }
            None => {
                out.push(c);
                i += 1;
            }
        }
    }
    PathBuf::from(OsString::from_vec(out))
}

/// Whether `fstype` is one of [`PSEUDO_FILESYSTEMS`].
pub fn is_pseudo(fstype: &str) -> bool {
    PSEUDO_FILESYSTEMS.contains(&fstype)
}

/// What to do with the mounts once the root is `/`: paths are in the new
/// root.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The pseudo filesystems' mount points, in mountinfo's order (a
    /// point twice where two are stacked).
    pub detach: Vec<PathBuf>,
    /// The mounts that stay, `/` first, with the flags they have.
    pub keep: Vec<(PathBuf, MountFlags)>,
}

/// The [`Plan`] for the container root `root` (canonical) from the
/// mounts of [`parse_mountinfo`].
pub fn plan(mounts: &[MountEntry], root: &Path) -> Plan {
    let mut out = Plan::default();
    // `/` is a bind of the mount holding the root (the deepest, the last
    // of those stacked there): its flags.
    let holder = mounts
        .iter()
        .filter(|m| root.starts_with(&m.point))
        .max_by_key(|m| m.point.components().count());
    out.keep.push((
        PathBuf::from("/"),
        holder.map_or(MountFlags::empty(), |m| flags(&m.options)),
    ));
    for m in mounts {
        let Ok(rel) = m.point.strip_prefix(root) else {
            continue;
        };
        if rel.as_os_str().is_empty() {
            continue;
        }
        let inner = Path::new("/").join(rel);
        if is_pseudo(&m.fstype) {
            out.detach.push(inner);
        } else {
            out.keep.push((inner, flags(&m.options)));
        }
    }
    out
}

/// The per-mount flags of mountinfo's options that a bind remount must
/// repeat to keep them.
fn flags(options: &str) -> MountFlags {
    options
        .split(',')
        .fold(MountFlags::empty(), |acc, o| match o {
            "ro" => acc | MountFlags::RDONLY,
            "nosuid" => acc | MountFlags::NOSUID,
            "nodev" => acc | MountFlags::NODEV,
            "noexec" => acc | MountFlags::NOEXEC,
            "noatime" => acc | MountFlags::NOATIME,
            "nodiratime" => acc | MountFlags::NODIRATIME,
            "relatime" => acc | MountFlags::RELATIME,
            "nosymfollow" => acc | MountFlags::NOSYMFOLLOW,
            _ => acc,
        })
}

/// Steps 2 to 5 of the module docs on the calling thread: afterwards its
/// root is the container root `root`, with no host view in it. The other
/// threads of the process are left where they are (the mount namespace is
/// the thread's own).
///
/// # Errors
/// [`Error::LdconfigIsolation`] naming the step that failed.
pub fn enter(root: &Path) -> Result<(), Error> {
    // Safe for these flags: only the file descriptor table (`FILES`) may
    // not be unshared by safe code, and it is not.
    #[allow(deprecated)]
    rustix::thread::unshare(
        UnshareFlags::NEWNS
            | UnshareFlags::NEWPID
            | UnshareFlags::NEWNET
            | UnshareFlags::NEWIPC
            | UnshareFlags::NEWUTS,
    )
    .map_err(|e| failed("cannot make new namespaces (unshare)", e))?;
    rustix::mount::mount_change(
        "/",
        MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
    )
    .map_err(|e| failed("cannot make / private", e))?;
    let root = std::fs::canonicalize(root)
        .map_err(|e| failed(format_args!("{}", crate::text::path(root)), e))?;
    let mountinfo = read_mountinfo()?;
    let plan = plan(&parse_mountinfo(&mountinfo), &root);
    rustix::mount::mount_bind_recursive(&root, &root).map_err(|e| {
        failed(
            format_args!("cannot bind {} onto itself", crate::text::path(&root)),
            e,
        )
    })?;
    let dir = rustix::fs::open(
        &root,
        OFlags::DIRECTORY | OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| failed(format_args!("{}", crate::text::path(&root)), e))?;
    rustix::process::fchdir(&dir).map_err(|e| failed("fchdir to the root", e))?;
    // The old root ends up on top of the new one, and is detached there.
    rustix::process::pivot_root(".", ".").map_err(|e| failed("pivot_root", e))?;
    rustix::mount::unmount(".", UnmountFlags::DETACH)
        .map_err(|e| failed("cannot detach the old root", e))?;
    rustix::process::chdir("/").map_err(|e| failed("chdir /", e))?;
    apply(&plan)
}

/// `/proc/self/mountinfo`, bounded.
fn read_mountinfo() -> Result<String, Error> {
    let path = "/proc/self/mountinfo";
    let mut text = String::new();
    File::open(path)
        .and_then(|f| f.take(MAX_MOUNTINFO).read_to_string(&mut text))
        .map_err(|e| failed(path, e))?;
    Ok(text)
}

/// Steps 4 and 5: detaches the pseudo filesystems and remounts the rest
/// `nodev,nosuid`, checking both.
fn apply(plan: &Plan) -> Result<(), Error> {
    let shown = |p: &Path| crate::text::path(p).to_string();
    let mut detached: Vec<&Path> = Vec::new();
    for point in &plan.detach {
        // Gone with a mount above it.
        if detached.iter().any(|d| point != d && point.starts_with(d)) {
            continue;
        }
        rustix::mount::unmount(point, UnmountFlags::DETACH | UnmountFlags::NOFOLLOW)
            .map_err(|e| failed(format_args!("cannot detach {}", shown(point)), e))?;
        detached.push(point);
    }
    for point in &detached {
        if let Ok(st) = rustix::fs::statfs(*point)
            && PSEUDO_MAGIC.contains(&(st.f_type as u64))
        {
            return Err(failed(
                format_args!("{} is still a view of the host", shown(point)),
                io::Error::other("detached, but a pseudo filesystem is there"),
            ));
        }
    }
    for (point, flags) in &plan.keep {
        if detached.iter().any(|d| point.starts_with(d)) {
            continue;
        }
        match rustix::mount::mount_remount(
            point,
            *flags | MountFlags::BIND | MountFlags::NODEV | MountFlags::NOSUID,
            "",
        ) {
            Ok(()) => {}
            // Under a mount made later over a directory above it: no path
            // reaches it.
            Err(Errno::NOENT) => continue,
            Err(e) => {
                return Err(failed(
                    format_args!("cannot remount {} nodev", shown(point)),
                    e,
                ));
            }
        }
        let st = rustix::fs::statvfs(point)
            .map_err(|e| failed(format_args!("statvfs {}", shown(point)), e))?;
        if !st.f_flag.contains(StatVfsMountFlags::NODEV) {
            return Err(failed(
                format_args!("{} is not nodev", shown(point)),
                io::Error::other("remounted, but devices still open"),
            ));
        }
    }
    Ok(())
}

/// A tmpfs mounted nowhere holding `program` as `ldconfig`: its
/// descriptor, for [`rustix::process::fchdir`].
fn stage(program: &[u8]) -> Result<OwnedFd, Error> {
    let fs = rustix::mount::fsopen("tmpfs", FsOpenFlags::FSOPEN_CLOEXEC)
        .map_err(|e| failed("fsopen tmpfs", e))?;
    rustix::mount::fsconfig_set_string(&fs, "mode", "0700")
        .and_then(|()| rustix::mount::fsconfig_create(&fs))
        .map_err(|e| failed("cannot create a tmpfs", e))?;
    let mnt = rustix::mount::fsmount(
        &fs,
        FsMountFlags::FSMOUNT_CLOEXEC,
        MountAttrFlags::MOUNT_ATTR_NODEV | MountAttrFlags::MOUNT_ATTR_NOSUID,
    )
    .map_err(|e| failed("fsmount tmpfs", e))?;
    let fd = rustix::fs::openat(
        &mnt,
        "ldconfig",
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o500),
    )
    .map_err(|e| failed("cannot copy ldconfig", e))?;
    File::from(fd)
        .write_all(program)
        .map_err(|e| failed("cannot copy ldconfig", e))?;
    Ok(mnt)
}

/// Cuts the capability bounding set to [`KEEP`] and sets `no_new_privs`.
fn drop_privileges() -> Result<(), Error> {
    for bit in 0..64u32 {
        let cap = CapabilitySet::from_bits_retain(1 << bit);
        if KEEP.contains(cap) {
            continue;
        }
        match rustix::thread::remove_capability_from_bounding_set(cap) {
            Ok(()) => {}
            // Past the kernel's last capability.
            Err(Errno::INVAL) => break,
            Err(e) => return Err(failed("cannot drop capabilities", e)),
        }
    }
    rustix::thread::set_no_new_privs(true).map_err(|e| failed("no_new_privs", e))
}

/// The binary's entry when it runs as [`super::ISOLATED_NAME`] (`argv[0]`,
/// as `update-ldcache` starts it): `--root DIR --ldconfig PATH -- ARG...`,
/// exactly. Runs [`run`]; its error is one line on stderr and
/// [`EXIT_ISOLATION`]. `None` for any other name.
pub fn main(argv: &[OsString]) -> Option<u8> {
    let name = argv.first().map(Path::new)?.file_name()?;
    if name != super::ISOLATED_NAME {
        return None;
    }
    let result = match argv.get(1..) {
        Some([root_flag, root, ldconfig_flag, ldconfig, dashes, args @ ..])
            if root_flag == "--root" && ldconfig_flag == "--ldconfig" && dashes == "--" =>
        {
            run(Path::new(root), Path::new(ldconfig), args)
        }
        _ => Err(Error::LdconfigIsolation {
            why: format!(
                "usage: {} --root DIR --ldconfig PATH -- ARG... (update-ldcache runs it)",
                super::ISOLATED_NAME
            ),
        }),
    };
    Some(match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{}", crate::text::Escaped(&e.to_string()));
            EXIT_ISOLATION
        }
    })
}

/// Runs `ldconfig` with `args` isolated in `root` (see the module docs),
/// returning its exit status (128 + the signal when one killed it).
///
/// # Errors
/// As [`load_program`] and [`enter`]; [`Error::LdconfigIsolation`] when
/// the copy cannot be made or started.
pub fn run(root: &Path, ldconfig: &Path, args: &[OsString]) -> Result<u8, Error> {
    let program = load_program(ldconfig)?;
    enter(root)?;
    let staged = stage(&program)?;
    drop(program);
    drop_privileges()?;
    rustix::process::umask(Mode::from_raw_mode(0o022));
    rustix::process::fchdir(&staged).map_err(|e| failed("fchdir to the copy", e))?;
    let status = Command::new("./ldconfig")
        .args(args)
        .env_clear()
        .env("PATH", PATH_ENV)
        .env("LC_ALL", "C")
        // Inherited: update-ldcache gives /dev/null (no device opens
        // here) and the pipe it reads.
        .stdin(Stdio::inherit())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .status()
        .map_err(|e| failed("cannot start ldconfig", e))?;
    Ok(match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(u8::MAX),
        (None, Some(sig)) => {
            eprintln!("ldconfig was killed by signal {sig}");
            u8::try_from(128 + sig).unwrap_or(u8::MAX)
        }
        (None, None) => u8::MAX,
    })
}

#[cfg(test)]
mod tests;

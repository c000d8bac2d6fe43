//! The host root: the only reader of sysfs, procfs and devfs.
//!
//! Every backend reads the host through a [`HostRoot`], built from
//! `--root DIR` (default `/`). Callers name *host* paths, built with
//! [`sys_path`], [`proc_path`] and [`dev_path`]; the root maps them to the
//! files under `DIR`. Paths written into specs are host paths, never
//! prefixed by the root, so output does not depend on where a fixture
//! lives.
//!
//! Symlinks are resolved physically (relative targets from the link's real
//! directory, as the kernel does) and never leave the root: a `..` above
//! it is an error for that path, not a read of the host. An absolute
//! target is taken relative to the root (chroot semantics).
//!
//! `/dev` comes from `lstat` under the root, or, for fixtures (git cannot
//! store device nodes), from a manifest file `DIR/dev.manifest` describing
//! each node: see `fixtures/README.md`.
//!
//! A root can record every path it reads; `cdigen snapshot` uses that to
//! copy exactly what discovery looked at.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io;
use std::os::fd::{AsFd as _, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::fsio::Stat;

/// The root's lookup caches: keyed by paths' bytes (60 to 100 of them in
/// sysfs), hashed by foldhash, randomly seeded per process as the
/// standard library's SipHash is, and cheaper (SipHash took 3% of
/// `generate`'s time on the `ratios` machine).
type Map<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// `O_NOFOLLOW | O_CLOEXEC | O_NOCTTY` for [`HostRoot::write_pci_attr`].
fn libc_flags() -> i32 {
    (rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::CLOEXEC | rustix::fs::OFlags::NOCTTY).bits()
        as i32
}

/// Whether `host` is one of the PCI driver-binding attributes
/// [`HostRoot::write_pci_attr`] may write: no `..`, no `.`.
pub fn is_pci_binding_attr(host: &Path) -> bool {
    let parts: Vec<&str> = match host
        .components()
        .map(|c| match c {
            Component::RootDir => Some(""),
            Component::Normal(n) => n.to_str(),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()
    {
        Some(p) => p,
        None => return false,
    };
    let plain = |s: &str| !s.is_empty() && !s.starts_with('.') && !s.contains('/');
    match parts.as_slice() {
        ["", "sys", "bus", "pci", "drivers_probe"] => true,
        ["", "sys", "bus", "pci", "devices", addr, "driver_override"] => plain(addr),
        [
            "",
            "sys",
            "bus",
            "pci",
            "drivers",
            driver,
            "bind" | "unbind",
        ] => plain(driver),
        _ => false,
    }
}

/// Name of the devfs manifest at the top of a fixture root.
pub const DEV_MANIFEST: &str = "dev.manifest";
/// Largest file the root reads (sysfs attributes are a page at most).
pub const MAX_READ: u64 = 1 << 20;
/// Where the GPU operator's driver container puts the driver's files.
pub const OPERATOR_DRIVER_ROOT: &str = "/run/nvidia/driver";
/// Largest file [`HostRoot::open_file`] keeps in a recording.
const MAX_RECORDED_OPEN: u64 = 1 << 20;
/// Where container runtimes find the hook program (the static
/// `cdigen-hook`) on the host unless told otherwise: where the package
/// installs it.
pub const DEFAULT_HOOK_PATH: &str = "/usr/bin/cdigen-hook";
/// Largest devfs manifest read.
pub const MAX_MANIFEST: u64 = 16 << 20;
/// Most symlinks followed while resolving one path (the kernel's limit).
const MAX_LINKS: usize = 40;
/// Most directories a root holds open ([`OpenDirs`]): an eighth of the
/// process's descriptor limit (128 under the usual 1024; a daemon has
/// several roots at once, and its sockets), at least 32 and at most 4096.
fn open_dirs_cap() -> usize {
    static CAP: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CAP.get_or_init(|| {
        rustix::process::getrlimit(rustix::process::Resource::Nofile)
            .current
            .map_or(4096, |soft| {
                usize::try_from(soft / 8).map_or(4096, |c| c.clamp(32, 4096))
            })
    })
}
/// The sysfs directories every Linux host has: a root without one of them
/// is not a host (a wrong `--root`, or sysfs not mounted), not a host
/// without devices ([`HostRoot::check_host`]).
pub const HOST_DIRS: [&str; 3] = ["/sys/devices", "/sys/bus", "/sys/class"];

/// A host path under `/sys`.
pub fn sys_path(rel: &str) -> PathBuf {
    Path::new("/sys").join(rel.trim_start_matches('/'))
}

/// A host path under `/proc`.
pub fn proc_path(rel: &str) -> PathBuf {
    Path::new("/proc").join(rel.trim_start_matches('/'))
}

/// A host path under `/dev`.
pub fn dev_path(rel: &str) -> PathBuf {
    Path::new("/dev").join(rel.trim_start_matches('/'))
}

/// What reading the host can fail on; every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be read.
    #[error("{}: {cause}", disk.display())]
    Io {
        /// The host path.
        path: PathBuf,
        /// Where it is on disk (under the root).
        disk: PathBuf,
        /// The cause (shown inline: warnings print only the top message).
        cause: io::Error,
    },
    /// A symlink points outside the root.
    #[error("{}: symlink {} points outside the root {}", path.display(), link.display(), root.display())]
    Escape {
        /// The host path being resolved.
        path: PathBuf,
        /// The link that escapes (host path).
        link: PathBuf,
        /// The root.
        root: PathBuf,
    },
    /// Too many symlinks.
    #[error("{}: too many levels of symbolic links", path.display())]
    Loop {
        /// The host path.
        path: PathBuf,
    },
    /// Not a text attribute.
    #[error("{}: not UTF-8 text", disk.display())]
    NotUtf8 {
        /// Where it is on disk.
        disk: PathBuf,
    },
    /// A FIFO, device node, directory or socket where a file was to be
    /// read: never opened (a FIFO would block, a device's driver would be
    /// called).
    #[error("{}: {what}, not a regular file: not reading it", disk.display())]
    NotRegular {
        /// The host path.
        path: PathBuf,
        /// Where it is on disk.
        disk: PathBuf,
        /// What it is (`a FIFO`, ...).
        what: &'static str,
    },
    /// Larger than the limit for that file.
    #[error("{}: larger than {limit} bytes", disk.display())]
    TooLarge {
        /// Where it is on disk.
        disk: PathBuf,
        /// The limit.
        limit: u64,
    },
    /// The root lacks directories every Linux host has ([`HOST_DIRS`]).
    #[error("{}", not_a_host(root, missing, hint.as_deref()))]
    NotAHost {
        /// The root.
        root: PathBuf,
        /// The host paths missing (`sys/devices`, ...).
        missing: Vec<String>,
        /// What the user may have meant.
        hint: Option<String>,
    },
    /// A bad line in the devfs manifest.
    #[error("{}:{line}: {message}", path.display())]
    Manifest {
        /// The manifest file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

impl Error {
    /// The error as met resolving `host`, a path under the one this error
    /// was met resolving (escapes and loops name the path asked for).
    fn resolving(self, host: &Path) -> Error {
        match self {
            Error::Escape { link, root, .. } => Error::Escape {
                path: host.to_path_buf(),
                link,
                root,
            },
            Error::Loop { .. } => Error::Loop {
                path: host.to_path_buf(),
            },
            other => other,
        }
    }

    /// What went wrong, without the file it went wrong on (a symlink that
    /// leaves the root is still named: it may be another path).
    pub fn reason(&self) -> String {
        use Error as E;
        match self {
            E::Io { cause, .. } => cause.to_string(),
            E::Escape { link, root, .. } => format!(
                "symlink {} points outside the root {}",
                link.display(),
                root.display()
            ),
            E::Loop { .. } => "too many levels of symbolic links".into(),
            E::NotUtf8 { .. } => "not UTF-8 text".into(),
            E::TooLarge { limit, .. } => format!("larger than {limit} bytes"),
            E::NotRegular { what, .. } => format!("{what}, not a regular file: not reading it"),
            // Another file (the manifest), or the root: named in full.
            E::Manifest { .. } | E::NotAHost { .. } => self.to_string(),
        }
    }

    /// True when the error means "no such file".
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Io { cause, .. } if cause.kind() == io::ErrorKind::NotFound)
    }
}

/// `fixtures/example does not look like a Linux host: sys/devices and
/// sys/bus are missing (did you mean ...?)`.
fn not_a_host(root: &Path, missing: &[String], hint: Option<&str>) -> String {
    let list = match missing {
        [one] => format!("{one} is"),
        [init @ .., last] => format!("{} and {last} are", init.join(", ")),
        [] => "nothing is".into(),
    };
    let hint = hint.map(|h| format!(" ({h})")).unwrap_or_default();
    format!(
        "{} does not look like a Linux host: {list} missing{hint}",
        crate::text::path(root)
    )
}

/// What a `/dev` entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DevKind {
    /// Character device.
    Char,
    /// Block device.
    Block,
    /// Symbolic link.
    Symlink,
    /// Directory.
    Dir,
    /// Regular file, FIFO, socket...
    Other,
}

impl std::fmt::Display for DevKind {
    /// In words, for messages: `character device`, `directory`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DevKind::Char => "character device",
            DevKind::Block => "block device",
            DevKind::Symlink => "symbolic link",
            DevKind::Dir => "directory",
            DevKind::Other => "regular file, FIFO or socket",
        })
    }
}

/// A `/dev` entry as `lstat` (or the manifest) sees it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DevEntry {
    /// What it is.
    pub kind: DevKind,
    /// Major number (device nodes).
    pub major: u32,
    /// Minor number (device nodes).
    pub minor: u32,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Link target (symlinks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

/// What a recording root saw, for `cdigen snapshot`.
#[derive(Debug, Default, Clone)]
pub struct Record {
    /// Host paths of files read, with their content.
    pub files: BTreeMap<PathBuf, Vec<u8>>,
    /// Host paths of symlinks met, with their raw targets.
    pub links: BTreeMap<PathBuf, PathBuf>,
    /// Host paths of directories listed.
    pub dirs: std::collections::BTreeSet<PathBuf>,
    /// Regular files seen in listed directories but not read: a replay
    /// lists the same names, so they exist there as empty files.
    pub listed_files: std::collections::BTreeSet<PathBuf>,
    /// `/dev` entries looked up (None: looked up but absent).
    pub dev: BTreeMap<PathBuf, Option<DevEntry>>,
}

/// Directories of the root held open (`O_PATH`), by real host path, so
/// that a lookup below one walks one component, not the whole path from
/// `/` (sysfs paths are deep). When `cap` are open, the less recently
/// used half is closed.
#[derive(Debug)]
struct OpenDirs {
    by_path: Map<OsString, (Arc<OwnedFd>, u64)>,
    /// The root directory itself.
    base: Option<Arc<OwnedFd>>,
    /// Uses so far, for the least recently used.
    uses: u64,
    /// Most held open ([`open_dirs_cap`]).
    cap: usize,
}

impl Default for OpenDirs {
    fn default() -> Self {
        OpenDirs {
            by_path: Map::default(),
            base: None,
            uses: 0,
            cap: open_dirs_cap(),
        }
    }
}

impl OpenDirs {
    /// Holds `fd`, the directory at the real host path `path`, last used
    /// `now`, making room first.
    fn hold(&mut self, path: &Path, fd: Arc<OwnedFd>, now: u64) {
        self.make_room();
        self.by_path
            .insert(path.as_os_str().to_os_string(), (fd, now));
    }

    /// Closes the less recently used half when `cap` are open (one sort
    /// per `cap / 2` directories opened, not a scan per directory).
    fn make_room(&mut self) {
        if self.by_path.len() < self.cap {
            return;
        }
        let mut uses: Vec<u64> = self.by_path.values().map(|(_, used)| *used).collect();
        let keep = self.cap / 2;
        let cut = uses.len().saturating_sub(keep);
        if cut >= uses.len() {
            return;
        }
        let oldest_kept = *uses.select_nth_unstable(cut).1;
        self.by_path.retain(|_, (_, used)| *used >= oldest_kept);
    }
}

#[derive(Debug, Clone)]
enum DevFs {
    Real,
    /// A fixture's `dev.manifest`, by [`manifest_key`].
    Manifest(Arc<Map<OsString, DevEntry>>),
}

/// A `/dev` path as the manifest's map has it: its bytes, made normal
/// (`/dev//a/` is `/dev/a`) when they are not (a hashed path is looked up
/// by its bytes, not its components).
fn manifest_key(p: &Path) -> std::borrow::Cow<'_, OsStr> {
    let b = p.as_os_str().as_bytes();
    let odd = b.windows(2).any(|w| w == b"//")
        || b.windows(3).any(|w| w == b"/./")
        || (b.len() > 1 && b.ends_with(b"/"))
        || b.ends_with(b"/.");
    if !odd {
        std::borrow::Cow::Borrowed(p.as_os_str())
    } else {
        std::borrow::Cow::Owned(p.components().collect::<PathBuf>().into_os_string())
    }
}

/// The host as seen through `--root`.
#[derive(Debug)]
pub struct HostRoot {
    base: PathBuf,
    devfs: DevFs,
    record: Option<Mutex<Record>>,
    /// Where the NVIDIA driver's user-space files are (a host path; `/` by
    /// default, `/run/nvidia/driver` with the GPU operator, say).
    driver_root: PathBuf,
    /// More directories to look for the driver's libraries in (host
    /// paths), after the usual ones.
    library_search_path: Vec<PathBuf>,
    /// Where container runtimes find cdigen on the host (for the hooks
    /// specs ask them to run).
    hook_path: PathBuf,
    /// What to say once when a spec's hooks are given [`Self::hook_path`]
    /// (a default chosen for want of an installed cdigen).
    hook_path_warning: Option<String>,
    /// Whether NVIDIA's NVML library may be loaded (`--no-nvml` turns it
    /// off): loading a library runs its code.
    nvml: bool,
    /// Symlink lookups by host path (None: exists, not a link), keyed by
    /// the path's bytes (hashing a `Path` walks its components). Make a new
    /// root for each discovery run so that changes are seen.
    links: Mutex<Map<Box<OsStr>, Option<Box<Path>>>>,
    /// Real host paths of the directories resolved, by the host path
    /// asked for; as short-lived as `links`.
    dirs: Mutex<Map<Box<OsStr>, Box<Path>>>,
    /// Directories held open; as short-lived as `links`.
    open_dirs: Mutex<OpenDirs>,
    /// The directory the last file was looked up in: discovery reads
    /// attributes of one directory in a row, and this skips both caches'
    /// lookups for them; as short-lived as `links`.
    last_dir: Mutex<Option<LastDir>>,
}

/// What the last step of a resolution examined: the entry's `lstat`, and
/// the directory it is in, open.
struct Examined {
    stat: Stat,
    dir: Arc<OwnedFd>,
}

/// A directory as [`HostRoot::parent_dir`] found it.
#[derive(Debug)]
struct LastDir {
    /// The host path asked for.
    host: OsString,
    /// Its real host path.
    real: PathBuf,
    /// It, open.
    fd: Arc<OwnedFd>,
}

impl HostRoot {
    /// Opens a root directory. When `DIR/dev.manifest` exists, `/dev` is
    /// read from it instead of from `DIR/dev`.
    ///
    /// # Errors
    /// [`Error`] when the root is not a readable directory or the manifest
    /// is malformed.
    pub fn open(base: &Path) -> Result<Self, Error> {
        let root_error = |cause| Error::Io {
            path: PathBuf::from("/"),
            disk: base.to_path_buf(),
            cause,
        };
        let meta = fs::metadata(base).map_err(root_error)?;
        if !meta.is_dir() {
            return Err(root_error(io::Error::new(
                io::ErrorKind::NotADirectory,
                "the root is not a directory",
            )));
        }
        // A root that cannot be listed is the root's problem, not that of
        // the first file looked up in it.
        fs::read_dir(base).map_err(|e| {
            root_error(io::Error::new(
                e.kind(),
                format!("cannot read the root directory: {e}"),
            ))
        })?;
        let mut root = HostRoot {
            base: base.to_path_buf(),
            devfs: DevFs::Real,
            record: None,
            driver_root: PathBuf::from("/"),
            library_search_path: Vec::new(),
            hook_path: PathBuf::from(DEFAULT_HOOK_PATH),
            hook_path_warning: None,
            nvml: true,
            links: Mutex::default(),
            dirs: Mutex::default(),
            open_dirs: Mutex::default(),
            last_dir: Mutex::default(),
        };
        // Read like every other root file: resolved inside the root, a
        // regular file, bounded.
        let host = PathBuf::from("/").join(DEV_MANIFEST);
        match root.read_limited(&host, MAX_MANIFEST) {
            Ok(bytes) => {
                let disk = root.disk_path(&host);
                let text =
                    String::from_utf8(bytes).map_err(|_| Error::NotUtf8 { disk: disk.clone() })?;
                let entries = parse_manifest(&disk, &text)?;
                root.devfs = DevFs::Manifest(Arc::new(
                    entries
                        .into_iter()
                        .map(|(p, e)| (manifest_key(&p).into_owned(), e))
                        .collect(),
                ));
            }
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
        // Lookups made while opening must not outlive it.
        root.forget_lookups();
        Ok(root)
    }

    /// Drops what this root remembers of its lookups (links, directories
    /// resolved and held open), freeing their memory: after a discovery
    /// run, whose many lookups they are for, they are most of what a
    /// command holds. Later lookups look again.
    pub fn forget_lookups(&self) {
        if let Ok(mut cache) = self.links.lock() {
            *cache = Map::default();
        }
        if let Ok(mut cache) = self.dirs.lock() {
            *cache = Map::default();
        }
        if let Ok(mut open) = self.open_dirs.lock() {
            *open = OpenDirs::default();
        }
        if let Ok(mut last) = self.last_dir.lock() {
            *last = None;
        }
    }

    /// [`HostRoot::open`] for discovery: the root must also look like a
    /// Linux host ([`HostRoot::check_host`]).
    ///
    /// # Errors
    /// As [`HostRoot::open`], and [`Error::NotAHost`].
    pub fn open_host(base: &Path) -> Result<Self, Error> {
        let root = Self::open(base)?;
        root.check_host()?;
        Ok(root)
    }

    /// Checks that the root looks like a Linux host: each of [`HOST_DIRS`]
    /// is a directory (symlinks followed inside the root). A root without
    /// them is a wrong `--root` or a host whose sysfs is not mounted (or
    /// went away): discovering there would find no device, and removing
    /// every file written for the devices that are there would follow.
    /// Looked at afresh at every call (only symlinks are cached).
    ///
    /// # Errors
    /// [`Error::NotAHost`] naming the root and each directory missing,
    /// with a hint when `<root>/root` is a host or `<root>/sys` is empty.
    pub fn check_host(&self) -> Result<(), Error> {
        let missing: Vec<String> = HOST_DIRS
            .iter()
            .filter(|d| {
                !self
                    .resolve(Path::new(d))
                    .is_ok_and(|real| fs::metadata(self.disk_path(&real)).is_ok_and(|m| m.is_dir()))
            })
            .map(|d| d.trim_start_matches('/').to_string())
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let inner = self.base.join("root");
        let sys = self.base.join("sys");
        let hint = if HOST_DIRS
            .iter()
            .all(|d| inner.join(d.trim_start_matches('/')).is_dir())
        {
            Some(format!("did you mean {}?", crate::text::path(&inner)))
        } else if fs::read_dir(&sys).is_ok_and(|mut d| d.next().is_none()) {
            Some(format!(
                "{} is empty: is sysfs mounted?",
                crate::text::path(&sys)
            ))
        } else {
            None
        };
        Err(Error::NotAHost {
            root: self.base.clone(),
            missing,
            hint,
        })
    }

    /// Sets where the NVIDIA driver's files are (a host path).
    pub fn with_driver_root(mut self, driver_root: &Path) -> Self {
        self.driver_root = driver_root.to_path_buf();
        self
    }

    /// Sets where the NVIDIA driver's files are: `driver_root`, or when
    /// not given, [`OPERATOR_DRIVER_ROOT`] if that is a directory with
    /// something in it, else `/`.
    pub fn with_driver_root_or_detect(self, driver_root: Option<&Path>) -> Self {
        let detected = match driver_root {
            Some(d) => d.to_path_buf(),
            None => {
                let op = Path::new(OPERATOR_DRIVER_ROOT);
                if self.list_dir_opt(op).is_ok_and(|e| !e.is_empty()) {
                    op.to_path_buf()
                } else {
                    PathBuf::from("/")
                }
            }
        };
        self.with_driver_root(&detected)
    }

    /// Where the NVIDIA driver's files are (a host path).
    pub fn driver_root(&self) -> &Path {
        &self.driver_root
    }

    /// Sets more directories (host paths) to look for the driver's
    /// libraries in.
    pub fn with_library_search_path(mut self, dirs: &[PathBuf]) -> Self {
        self.library_search_path = dirs.to_vec();
        self
    }

    /// More directories to look for the driver's libraries in.
    pub fn library_search_path(&self) -> &[PathBuf] {
        &self.library_search_path
    }

    /// Sets where container runtimes find cdigen on the host.
    pub fn with_hook_path(mut self, path: &Path) -> Self {
        self.hook_path = path.to_path_buf();
        self
    }

    /// Sets what to say (once a process, as a warning) when a spec's
    /// hooks are given the hook path: why it is that one.
    pub fn with_hook_path_warning(mut self, warning: String) -> Self {
        self.hook_path_warning = Some(warning);
        self
    }

    /// Where container runtimes find cdigen on the host
    /// ([`DEFAULT_HOOK_PATH`] unless set).
    pub fn hook_path(&self) -> &Path {
        &self.hook_path
    }

    /// [`Self::hook_path`] for the hooks of a spec: says the warning set
    /// with [`Self::with_hook_path_warning`], once a process.
    pub fn hook_path_for_spec(&self) -> &Path {
        static WARNED: std::sync::Once = std::sync::Once::new();
        if let Some(w) = &self.hook_path_warning {
            WARNED.call_once(|| tracing::warn!("{w}"));
        }
        &self.hook_path
    }

    /// Opens a regular file for reading (links inside the root followed),
    /// without reading it: for files read in pieces (shared libraries).
    ///
    /// # Errors
    /// [`Error`] naming the file; [`Error::NotRegular`] for anything but a
    /// regular file.
    pub fn open_file(&self, host: &Path) -> Result<(PathBuf, fs::File), Error> {
        let real = self.resolve(host)?;
        let disk = self.disk_path(&real);
        let file = crate::fsio::open(&disk, crate::fsio::Links::Refuse).map_err(|e| match e {
            crate::fsio::Error::NotRegular { what, .. } => Error::NotRegular {
                path: host.to_path_buf(),
                disk: disk.clone(),
                what,
            },
            other => self.io_error(host, io::Error::other(other.reason())),
        })?;
        // A snapshot keeps what was opened when it is small (a fixture's
        // libraries); a real driver's libraries are too large to carry, and
        // are found through the linker cache, which is kept.
        if self.record.is_some()
            && let Ok(bytes) = self.read_limited(host, MAX_RECORDED_OPEN)
        {
            self.note(|r| {
                r.files.insert(real.clone(), bytes);
            });
        }
        Ok((real, file))
    }

    /// Sets whether NVIDIA's NVML library may be loaded (`--no-nvml`).
    pub fn with_nvml(mut self, allowed: bool) -> Self {
        self.nvml = allowed;
        self
    }

    /// Whether NVIDIA's NVML library may be loaded.
    pub fn nvml_allowed(&self) -> bool {
        self.nvml
    }

    /// Starts recording every path read (see [`HostRoot::take_record`]).
    pub fn recording(mut self) -> Self {
        self.record = Some(Mutex::new(Record::default()));
        self
    }

    /// What was recorded so far (empty when not recording).
    pub fn take_record(&self) -> Record {
        self.record
            .as_ref()
            .and_then(|m| m.lock().ok().map(|mut r| std::mem::take(&mut *r)))
            .unwrap_or_default()
    }

    fn note(&self, f: impl FnOnce(&mut Record)) {
        if let Some(m) = &self.record
            && let Ok(mut r) = m.lock()
        {
            f(&mut r);
        }
    }

    /// The same root as it is now, for a later look at the host: its
    /// settings and devfs, none of this one's lookups (which are kept for
    /// one discovery run) nor its recording.
    pub fn fresh(&self) -> HostRoot {
        HostRoot {
            base: self.base.clone(),
            devfs: self.devfs.clone(),
            record: None,
            driver_root: self.driver_root.clone(),
            library_search_path: self.library_search_path.clone(),
            hook_path: self.hook_path.clone(),
            hook_path_warning: self.hook_path_warning.clone(),
            nvml: self.nvml,
            links: Mutex::default(),
            dirs: Mutex::default(),
            open_dirs: Mutex::default(),
            last_dir: Mutex::default(),
        }
    }

    /// Whether the host path `path` is a program only the host's root
    /// could have put there ([`crate::trust::program_in`] on this root):
    /// how the hooks of specs are looked at (never run).
    ///
    /// # Errors
    /// [`crate::trust::Untrusted`], naming the host path at fault.
    pub fn program(&self, path: &Path) -> Result<PathBuf, crate::trust::Untrusted> {
        crate::trust::program_in(&self.base, path)
    }

    /// Whether this is the running host's own `/` (no `--root`).
    pub fn is_host(&self) -> bool {
        self.base == Path::new("/")
    }

    /// Where a host directory is on disk, its symlinks followed inside the
    /// root (the host path itself when it cannot be resolved), for a
    /// reader of files that are not the host tree's: the CDI spec
    /// directories runtimes read, which the spec loader reads by their
    /// rules. The host tree itself is read only through this type's
    /// methods: the root directory is never handed out to build paths on.
    pub fn resolved_disk_path(&self, host: &Path) -> PathBuf {
        if self.is_host() {
            return host.to_path_buf();
        }
        let real = self.resolve(host).unwrap_or_else(|_| host.to_path_buf());
        self.disk_path(&real)
    }

    /// The root directory on disk.
    #[cfg(test)]
    fn base(&self) -> &Path {
        &self.base
    }

    /// Where a host path is on disk (no symlink resolution).
    fn disk_path(&self, host: &Path) -> PathBuf {
        let mut p = self.base.clone();
        for c in host.components() {
            if let Component::Normal(n) = c {
                p.push(n);
            }
        }
        p
    }

    fn io_error(&self, host: &Path, source: io::Error) -> Error {
        Error::Io {
            path: host.to_path_buf(),
            disk: self.disk_path(host),
            cause: source,
        }
    }

    /// An open descriptor of the real host directory `real` (a path with
    /// no symlink in it, as resolution makes them): held open, else opened
    /// from the nearest ancestor held open, one component at a time and
    /// never through a symlink (a directory swapped for one since it was
    /// resolved is an error, not followed).
    fn dir_fd(&self, real: &Path) -> io::Result<Arc<OwnedFd>> {
        let mut open = self
            .open_dirs
            .lock()
            .map_err(|_| io::Error::other("the root's open directories are poisoned"))?;
        open.uses += 1;
        let now = open.uses;
        // The components below the nearest directory held open.
        let mut below: Vec<&OsStr> = Vec::new();
        let mut at = real;
        let mut fd = loop {
            if let Some((fd, used)) = open.by_path.get_mut(at.as_os_str()) {
                *used = now;
                break Arc::clone(fd);
            }
            match (at.parent(), at.file_name()) {
                (Some(parent), Some(name)) => {
                    below.push(name);
                    at = parent;
                }
                (None, _) if at == Path::new("/") => {
                    if let Some(base) = &open.base {
                        break Arc::clone(base);
                    }
                    let flags = rustix::fs::OFlags::PATH
                        | rustix::fs::OFlags::DIRECTORY
                        | rustix::fs::OFlags::CLOEXEC;
                    let base = Arc::new(rustix::fs::open(
                        &self.base,
                        flags,
                        rustix::fs::Mode::empty(),
                    )?);
                    open.base = Some(Arc::clone(&base));
                    break base;
                }
                _ => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "not an absolute path without `..`",
                    ));
                }
            }
        };
        if below.is_empty() {
            return Ok(fd);
        }
        let mut path = at.to_path_buf();
        for name in below.into_iter().rev() {
            fd = Arc::new(open_dir_in(fd.as_fd(), name)?);
            path.push(name);
            open.hold(&path, Arc::clone(&fd), now);
        }
        Ok(fd)
    }

    /// The open directory of the real host path `here` and its last
    /// component: where one lookup finds it.
    fn entry_at<'p>(&self, here: &'p Path) -> io::Result<(Arc<OwnedFd>, &'p OsStr)> {
        match (here.parent(), here.file_name()) {
            (Some(parent), Some(name)) => Ok((self.dir_fd(parent)?, name)),
            _ => Err(io::Error::from_raw_os_error(
                rustix::io::Errno::ISDIR.raw_os_error(),
            )),
        }
    }

    /// Whether the host path (whose parents are real directories) is a
    /// symlink, and its target. Existing entries are cached for the life of
    /// this root: sysfs links do not change during one discovery run, and
    /// deep device paths share most of their components.
    fn link_target(&self, here: &Path) -> Result<Option<PathBuf>, Error> {
        if let Ok(cache) = self.links.lock()
            && let Some(hit) = cache.get(here.as_os_str())
        {
            return Ok(hit.as_deref().map(Path::to_path_buf));
        }
        let (dir, name) = self.entry_at(here).map_err(|e| self.io_error(here, e))?;
        if likely_link(here) {
            return self.read_link_in(&dir, name, here);
        }
        // What a walk meets is mostly directories, which it goes into next:
        // opened (never through a link) and held, one call says it is no
        // link and opens it; anything else is no directory (`ENOTDIR`).
        match open_dir_in(dir.as_fd(), name) {
            Ok(fd) => {
                if let Ok(mut open) = self.open_dirs.lock() {
                    open.uses += 1;
                    let now = open.uses;
                    open.hold(here, Arc::new(fd), now);
                }
                if let Ok(mut cache) = self.links.lock() {
                    cache.insert(here.as_os_str().into(), None);
                }
                return Ok(None);
            }
            Err(rustix::io::Errno::NOTDIR) => {}
            Err(e) => return Err(self.io_error(here, e.into())),
        }
        self.read_link_in(&dir, name, here)
    }

    /// Reads the entry `name` of the open directory `dir` (the real host
    /// path `here`) as a link, and caches what it is: its target, or none
    /// when it is no link.
    fn read_link_in(
        &self,
        dir: &OwnedFd,
        name: &OsStr,
        here: &Path,
    ) -> Result<Option<PathBuf>, Error> {
        // `readlink` says both: a link's target, or `EINVAL` for an entry
        // that is not one.
        let target = match rustix::fs::readlinkat(dir.as_fd(), name, Vec::new()) {
            Ok(t) => Some(PathBuf::from(OsString::from_vec(t.into_bytes()))),
            Err(rustix::io::Errno::INVAL) => None,
            Err(e) => return Err(self.io_error(here, e.into())),
        };
        if let Ok(mut cache) = self.links.lock() {
            cache.insert(here.as_os_str().into(), target.as_deref().map(Box::from));
        }
        Ok(target)
    }

    /// Resolves a host path to its real host path: every symlink followed
    /// physically, never leaving the root.
    ///
    /// # Errors
    /// [`Error::Io`] (not found, permission), [`Error::Escape`],
    /// [`Error::Loop`].
    pub fn resolve(&self, host: &Path) -> Result<PathBuf, Error> {
        Ok(self.resolve_entry(host)?.0)
    }

    /// [`HostRoot::resolve`], with what `lstat` says of the entry found
    /// and its directory, open, when that was its last step. The parent
    /// directory's resolution is remembered for the life of this root
    /// (sysfs reads many attributes of one directory), so a path whose
    /// last component is not a link costs one lookup and one `lstat`;
    /// anything else (a link at the end, a `..` in the path, a recording
    /// root) takes the full walk.
    fn resolve_entry(&self, host: &Path) -> Result<(PathBuf, Option<Examined>), Error> {
        if self.record.is_none()
            && !has_parent_dir(host)
            && let (Some(parent), Some(name)) = (host.parent(), host.file_name())
        {
            let (here, dir) = self
                .parent_dir(parent, name)
                .map_err(|e| e.resolving(host))?;
            // A link read before needs no `lstat` to be known for one.
            let known_link = self
                .links
                .lock()
                .is_ok_and(|c| matches!(c.get(here.as_os_str()), Some(Some(_))));
            if !known_link {
                let stat = crate::fsio::lstat_in(dir.as_fd(), name)
                    .map_err(|e| self.io_error(&here, e))?;
                if !crate::fsio::is_symlink(&stat) {
                    return Ok((here, Some(Examined { stat, dir })));
                }
                // Known for a link: read from the directory at hand, not
                // tried for one first.
                self.read_link_in(&dir, name, &here)?;
            }
            // A link at the end (`driver`, `physfn`): the walk goes on from
            // the parent, reading the link once and caching it.
            let mut parent = here;
            parent.pop();
            let real = self.walk(host, parent, Path::new(name))?;
            return Ok((real, None));
        }
        Ok((self.resolve_walk(host)?, None))
    }

    /// The real host path of `parent/name` (`parent` a directory, `name`
    /// not yet looked at) and `parent`, open: the directory of the last
    /// call again, or [`Self::resolve_dir`] and [`Self::dir_fd`].
    fn parent_dir(&self, parent: &Path, name: &OsStr) -> Result<(PathBuf, Arc<OwnedFd>), Error> {
        if let Ok(last) = self.last_dir.lock()
            && let Some(l) = last.as_ref()
            && l.host.as_bytes() == parent.as_os_str().as_bytes()
        {
            return Ok((l.real.join(name), Arc::clone(&l.fd)));
        }
        let real = self.resolve_dir(parent)?;
        let here = real.join(name);
        let fd = self.dir_fd(&real).map_err(|e| self.io_error(&here, e))?;
        if let Ok(mut last) = self.last_dir.lock() {
            *last = Some(LastDir {
                host: parent.as_os_str().to_os_string(),
                real,
                fd: Arc::clone(&fd),
            });
        }
        Ok((here, fd))
    }

    /// The real host path of a directory (its type is not checked), from
    /// the cache of directories resolved before: the nearest ancestor
    /// resolved before, then one component at a time, each step cached.
    fn resolve_dir(&self, host: &Path) -> Result<PathBuf, Error> {
        let cached = |p: &Path| {
            self.dirs
                .lock()
                .ok()
                .and_then(|c| c.get(p.as_os_str()).map(|d| d.to_path_buf()))
        };
        if let Some(hit) = cached(host) {
            return Ok(hit);
        }
        if self.record.is_some() || has_parent_dir(host) {
            return self.resolve_walk(host);
        }
        // The components below the nearest resolved ancestor, deepest first.
        let mut missing: Vec<&std::ffi::OsStr> = Vec::new();
        let mut at = host;
        let mut real = loop {
            if let Some(hit) = cached(at) {
                break hit;
            }
            match (at.parent(), at.file_name()) {
                (Some(parent), Some(name)) => {
                    missing.push(name);
                    at = parent;
                }
                _ => break PathBuf::from("/"),
            }
        };
        let mut asked = at.to_path_buf();
        for name in missing.into_iter().rev() {
            asked.push(name);
            real = self
                .walk(host, std::mem::take(&mut real), Path::new(name))
                .map_err(|e| e.resolving(host))?;
            if let Ok(mut cache) = self.dirs.lock() {
                cache.insert(asked.as_os_str().into(), real.as_path().into());
            }
        }
        Ok(real)
    }

    /// The full resolution: component by component, each symlink's target
    /// checked to stay inside the root.
    fn resolve_walk(&self, host: &Path) -> Result<PathBuf, Error> {
        self.walk(host, PathBuf::from("/"), host)
    }

    /// Resolves the components of `rest` below the real host path `real`
    /// (for `host`, which errors name), one path pushed and popped in
    /// place, each component a slice of `rest` or of a link's target.
    fn walk(&self, host: &Path, mut real: PathBuf, rest: &Path) -> Result<PathBuf, Error> {
        let mut depth = real
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .count();
        // The links met (where, and their targets).
        let mut met: Vec<(PathBuf, PathBuf)> = Vec::new();
        // The paths whose components are left, innermost last: `rest`
        // (None), then each target met (its index in `met`, which names
        // the link if a `..` of it escapes), with the byte offset of the
        // component next.
        let mut stack: Vec<(Option<usize>, usize)> = vec![(None, 0)];
        while let Some(top) = stack.last_mut() {
            let from = top.0;
            let text = match from {
                None => rest.as_os_str().as_bytes(),
                Some(i) => met.get(i).map_or(&[][..], |m| m.1.as_os_str().as_bytes()),
            };
            let Some((start, end)) = next_component(text, top.1) else {
                stack.pop();
                continue;
            };
            top.1 = end;
            let c = text.get(start..end).unwrap_or_default();
            if c == b".." {
                if depth == 0 {
                    let link = from.and_then(|i| met.get(i)).map(|m| m.0.clone());
                    return Err(Error::Escape {
                        path: host.to_path_buf(),
                        link: link.unwrap_or_else(|| host.to_path_buf()),
                        root: self.base.clone(),
                    });
                }
                real.pop();
                depth -= 1;
                continue;
            }
            real.push(OsStr::from_bytes(c));
            depth += 1;
            let Some(target) = self.link_target(&real)? else {
                continue;
            };
            if met.len() >= MAX_LINKS {
                return Err(Error::Loop {
                    path: host.to_path_buf(),
                });
            }
            let here = real.clone();
            self.note(|r| {
                r.links.insert(here.clone(), target.clone());
            });
            real.pop();
            depth -= 1;
            if target.is_absolute() {
                real = PathBuf::from("/");
                depth = 0;
            } else {
                // A relative target must stay inside the root.
                let mut level = depth as isize;
                for tc in target.components() {
                    match tc {
                        Component::ParentDir => level -= 1,
                        Component::Normal(_) => level += 1,
                        _ => {}
                    }
                    if level < 0 {
                        return Err(Error::Escape {
                            path: host.to_path_buf(),
                            link: here,
                            root: self.base.clone(),
                        });
                    }
                }
            }
            stack.push((Some(met.len()), 0));
            met.push((here, target));
        }
        let resolved = real;
        if self.record.is_some() {
            // A replay must find what this run found (driver files are
            // only checked for existence): remember what the path is.
            if let Ok(meta) = fs::metadata(self.disk_path(&resolved)) {
                self.note(|r| {
                    if meta.is_dir() {
                        r.dirs.insert(resolved.clone());
                    } else {
                        r.listed_files.insert(resolved.clone());
                    }
                });
            }
        }
        Ok(resolved)
    }

    /// Reads a whole file (at most [`MAX_READ`] bytes).
    ///
    /// # Errors
    /// [`Error`] naming the file.
    pub fn read(&self, host: &Path) -> Result<Vec<u8>, Error> {
        self.read_limited(host, MAX_READ)
    }

    /// Reads a whole file of at most `limit` bytes.
    ///
    /// # Errors
    /// [`Error`] naming the file; [`Error::TooLarge`] past the limit.
    pub fn read_limited(&self, host: &Path, limit: u64) -> Result<Vec<u8>, Error> {
        let (real, examined) = self.resolve_entry(host)?;
        // `resolve` followed every link inside the root: the file itself
        // is no link, and it must be a regular file (a FIFO would hang the
        // read, a device node must never be opened). The `lstat` of the
        // resolution, when it made one, is that check.
        let name = real.file_name().unwrap_or_default();
        let read = match &examined {
            Some(e) => crate::fsio::read_in(e.dir.as_fd(), name, &real, Some(&e.stat), limit),
            None => {
                let (dir, name) = self.entry_at(&real).map_err(|e| self.io_error(host, e))?;
                crate::fsio::read_in(dir.as_fd(), name, &real, None, limit)
            }
        };
        let buf = read.map_err(|e| match e {
            crate::fsio::Error::Io { source, .. } => self.io_error(host, source),
            crate::fsio::Error::NotRegular { what, .. } => Error::NotRegular {
                path: host.to_path_buf(),
                disk: self.disk_path(host),
                what,
            },
            crate::fsio::Error::TooLarge { limit, .. } => Error::TooLarge {
                disk: self.disk_path(&real),
                limit,
            },
            crate::fsio::Error::NotUtf8 { .. } => Error::NotUtf8 {
                disk: self.disk_path(&real),
            },
        })?;
        self.note(|r| {
            r.files.insert(real.clone(), buf.clone());
        });
        Ok(buf)
    }

    /// Reads a text attribute without its trailing newline.
    ///
    /// # Errors
    /// [`Error`] naming the file (missing, unreadable, not UTF-8).
    pub fn read_attr(&self, host: &Path) -> Result<String, Error> {
        let bytes = self.read(host)?;
        let mut text = String::from_utf8(bytes).map_err(|_| Error::NotUtf8 {
            disk: self.disk_path(host),
        })?;
        if text.ends_with('\n') {
            text.pop();
        }
        Ok(text)
    }

    /// Like [`HostRoot::read_attr`], but a missing file is `None`.
    ///
    /// # Errors
    /// [`Error`] for anything but "not found".
    pub fn read_attr_opt(&self, host: &Path) -> Result<Option<String>, Error> {
        match self.read_attr(host) {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Lists a directory's entry names, sorted. Names that are not UTF-8
    /// are skipped (no kernel name we use is).
    ///
    /// # Errors
    /// [`Error`] naming the directory.
    pub fn list_dir(&self, host: &Path) -> Result<Vec<String>, Error> {
        let real = self.resolve(host)?;
        let fd = self.dir_fd(&real).map_err(|e| self.io_error(host, e))?;
        let listing = rustix::fs::openat(
            fd.as_fd(),
            ".",
            rustix::fs::OFlags::RDONLY
                | rustix::fs::OFlags::DIRECTORY
                | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .and_then(rustix::fs::Dir::new)
        .map_err(|e| self.io_error(host, e.into()))?;
        let mut names = Vec::new();
        for entry in listing {
            let entry = entry.map_err(|e| self.io_error(host, e.into()))?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            match std::str::from_utf8(name) {
                Ok(n) => names.push(n.to_string()),
                Err(_) => tracing::warn!(
                    "{}: skipping entry with a non-UTF-8 name {:?}",
                    self.disk_path(&real).display(),
                    OsStr::from_bytes(name)
                ),
            }
        }
        names.sort();
        if self.record.is_some() {
            // A replay must list the same entries: remember what each is
            // (links with their targets; files as names only, their
            // content is recorded when read).
            for n in &names {
                let here = real.join(n);
                let disk = self.disk_path(&here);
                let Ok(meta) = fs::symlink_metadata(&disk) else {
                    continue;
                };
                if meta.file_type().is_symlink() {
                    if let Ok(t) = fs::read_link(&disk) {
                        self.note(|r| {
                            r.links.insert(here.clone(), t);
                        });
                    }
                } else if meta.is_dir() {
                    self.note(|r| {
                        r.dirs.insert(here.clone());
                    });
                } else {
                    self.note(|r| {
                        r.listed_files.insert(here.clone());
                    });
                }
            }
        }
        self.note(|r| {
            r.dirs.insert(real.clone());
        });
        Ok(names)
    }

    /// Like [`HostRoot::list_dir`], but a missing directory is empty.
    ///
    /// # Errors
    /// [`Error`] for anything but "not found".
    pub fn list_dir_opt(&self, host: &Path) -> Result<Vec<String>, Error> {
        match self.list_dir(host) {
            Ok(v) => Ok(v),
            Err(e) if e.is_not_found() => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// Whether a host path exists (following symlinks inside the root).
    pub fn exists(&self, host: &Path) -> bool {
        self.resolve(host).is_ok()
    }

    /// The last component of a symlink's target (`driver` → `amdgpu`), or
    /// `None` when the path does not exist. The link is not followed, so
    /// this works whatever the link's depth.
    ///
    /// # Errors
    /// [`Error`] when the path exists but is not a symlink or is unreadable.
    pub fn link_name(&self, host: &Path) -> Result<Option<String>, Error> {
        let parent = match host.parent() {
            Some(p) => match self.resolve_dir(p) {
                Ok(p) => p,
                Err(e) if e.is_not_found() => return Ok(None),
                Err(e) => return Err(e),
            },
            None => return Ok(None),
        };
        let Some(name) = host.file_name() else {
            return Ok(None);
        };
        let here = parent.join(name);
        // Through the link cache: the same links (`driver`, `physfn`) are
        // also resolved through.
        let target = match self.link_target(&here) {
            Ok(Some(t)) => t,
            Ok(None) => {
                // What `readlink` says of a file that is not a link.
                let not_a_link =
                    io::Error::from_raw_os_error(rustix::io::Errno::INVAL.raw_os_error());
                return Err(self.io_error(host, not_a_link));
            }
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
        self.note(|r| {
            r.links.insert(here.clone(), target.clone());
        });
        Ok(target
            .file_name()
            .and_then(|n| n.to_str())
            .map(str::to_string))
    }

    /// Where the host file `host` is on disk, as an absolute path with no
    /// symlink in it, when it may be trusted with code execution (a
    /// library to load): it is a regular file, and it and every directory
    /// above it on disk, from `/` down, are owned by root (uid 0) and
    /// writable by no group or other user, so that only root could have
    /// put it there or could swap it before it is opened. Symlinks in the
    /// host path are followed inside the root first.
    ///
    /// # Errors
    /// Why the file is not trusted, naming the path at fault.
    pub fn trusted_file(&self, host: &Path) -> Result<PathBuf, String> {
        let real = self.resolve(host).map_err(|e| e.reason())?;
        let disk = self.disk_path(&real);
        let disk = fs::canonicalize(&disk).map_err(|e| format!("{}: {e}", disk.display()))?;
        let mut at = PathBuf::new();
        let last = disk.components().count();
        for (i, c) in disk.components().enumerate() {
            at.push(c);
            let meta = fs::symlink_metadata(&at).map_err(|e| format!("{}: {e}", at.display()))?;
            let kind = if meta.file_type().is_symlink() {
                EntryKind::Symlink
            } else if meta.is_dir() {
                EntryKind::Dir
            } else if meta.is_file() {
                EntryKind::File
            } else {
                EntryKind::Other
            };
            untrusted(kind, meta.uid(), meta.mode(), i + 1 == last)
                .map_err(|why| format!("{} {why}", at.display()))?;
        }
        Ok(disk)
    }

    /// The raw target of the symlink `host` (`/proc/<pid>/fd/<n>` →
    /// `/dev/vfio/41`), its parents resolved inside the root; `None` when
    /// it does not exist or is not a link. Never followed.
    ///
    /// # Errors
    /// [`Error`] when it exists but cannot be read.
    pub fn raw_link(&self, host: &Path) -> Result<Option<PathBuf>, Error> {
        let (Some(parent), Some(name)) = (host.parent(), host.file_name()) else {
            return Ok(None);
        };
        let parent = match self.resolve_dir(parent) {
            Ok(p) => p,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
        let disk = self.disk_path(&parent.join(name));
        match fs::read_link(&disk) {
            Ok(t) => Ok(Some(t)),
            Err(e)
                if e.kind() == io::ErrorKind::NotFound
                    || e.raw_os_error() == Some(rustix::io::Errno::INVAL.raw_os_error()) =>
            {
                Ok(None)
            }
            Err(e) => Err(self.io_error(host, e)),
        }
    }

    /// The same root re-opened: as [`HostRoot::fresh`], with a fixture's
    /// devfs manifest read again (the host's `/dev` is always read now).
    ///
    /// # Errors
    /// As [`HostRoot::open`].
    pub fn reopen(&self) -> Result<HostRoot, Error> {
        let mut fresh = self.fresh();
        if matches!(self.devfs, DevFs::Manifest(_)) {
            fresh.devfs = HostRoot::open(&self.base)?.devfs;
        }
        Ok(fresh)
    }

    /// Writes `value` to a PCI driver-binding attribute of sysfs, the one
    /// write cdigen makes to the host tree (the DRA driver's passthrough):
    /// `/sys/bus/pci/devices/<address>/driver_override`,
    /// `/sys/bus/pci/drivers/<driver>/bind` or `unbind`, or
    /// `/sys/bus/pci/drivers_probe`. Anything else is refused without
    /// opening it. The path is resolved inside the root; the attribute is
    /// opened write-only, never created, never through a symlink, and must
    /// be a regular file; `value` goes in one `write` (sysfs takes a
    /// store as one call), so the kernel's errno comes back as the error.
    ///
    /// # Errors
    /// A path outside those, or the write's failure, naming the file.
    pub fn write_pci_attr(&self, host: &Path, value: &str) -> Result<(), Error> {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        if !is_pci_binding_attr(host) {
            return Err(self.io_error(
                host,
                io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "cdigen writes only driver_override, bind, unbind and drivers_probe under /sys/bus/pci",
                ),
            ));
        }
        let real = self.fresh().resolve(host)?;
        let disk = self.disk_path(&real);
        let mut file = fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .custom_flags(libc_flags())
            .open(&disk)
            .map_err(|e| self.io_error(host, e))?;
        let meta = file.metadata().map_err(|e| self.io_error(host, e))?;
        if !meta.is_file() {
            return Err(Error::NotRegular {
                path: host.to_path_buf(),
                disk,
                what: "not a file",
            });
        }
        let n = file
            .write(value.as_bytes())
            .map_err(|e| self.io_error(host, e))?;
        if n != value.len() {
            return Err(self.io_error(
                host,
                io::Error::new(
                    io::ErrorKind::WriteZero,
                    format!("the kernel took {n} of {} bytes", value.len()),
                ),
            ));
        }
        Ok(())
    }

    /// Whether this root has a `/dev` to look at (a manifest, or a `dev`
    /// directory). Without one, no statement about missing nodes is made.
    pub fn has_devfs(&self) -> bool {
        match &self.devfs {
            DevFs::Manifest(_) => true,
            DevFs::Real => self.disk_path(Path::new("/dev")).is_dir(),
        }
    }

    /// Looks up a `/dev` entry without following it: from the manifest, or
    /// by `lstat` under the root. `None` when it does not exist.
    ///
    /// # Errors
    /// [`Error`] when it cannot be examined.
    pub fn dev_entry(&self, host: &Path) -> Result<Option<DevEntry>, Error> {
        let entry = match &self.devfs {
            DevFs::Manifest(map) => map.get::<OsStr>(&manifest_key(host)).cloned(),
            DevFs::Real => self.lstat_dev(host)?,
        };
        self.note(|r| {
            r.dev.insert(host.to_path_buf(), entry.clone());
        });
        Ok(entry)
    }

    /// Entries of a `/dev` directory (sorted names), from the manifest or
    /// the filesystem.
    ///
    /// # Errors
    /// [`Error`] when the directory cannot be read.
    pub fn dev_list(&self, host: &Path) -> Result<Vec<String>, Error> {
        match &self.devfs {
            DevFs::Manifest(map) => {
                let mut names: Vec<String> = map
                    .keys()
                    .map(Path::new)
                    .filter(|p| p.parent() == Some(host))
                    .filter_map(|p| p.file_name()?.to_str().map(str::to_string))
                    .collect();
                names.sort();
                for n in &names {
                    let p = host.join(n);
                    let e = map.get::<OsStr>(&manifest_key(&p)).cloned();
                    self.note(|r| {
                        r.dev.insert(p, e);
                    });
                }
                Ok(names)
            }
            DevFs::Real => {
                let names = self.list_dir_opt(host)?;
                for n in &names {
                    self.dev_entry(&host.join(n))?;
                }
                Ok(names)
            }
        }
    }

    fn lstat_dev(&self, host: &Path) -> Result<Option<DevEntry>, Error> {
        let (Some(parent), Some(name)) = (host.parent(), host.file_name()) else {
            return Ok(None);
        };
        let parent = match self.resolve(parent) {
            Ok(p) => p,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
        let disk = self.disk_path(&parent.join(name));
        let meta = match fs::symlink_metadata(&disk) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.io_error(host, e)),
        };
        let ft = meta.file_type();
        let kind = if ft.is_char_device() {
            DevKind::Char
        } else if ft.is_block_device() {
            DevKind::Block
        } else if ft.is_symlink() {
            DevKind::Symlink
        } else if ft.is_dir() {
            DevKind::Dir
        } else {
            DevKind::Other
        };
        let target = if kind == DevKind::Symlink {
            fs::read_link(&disk)
                .ok()
                .map(|t| t.to_string_lossy().into_owned())
        } else {
            None
        };
        let rdev = meta.rdev();
        let numbered = matches!(kind, DevKind::Char | DevKind::Block);
        Ok(Some(DevEntry {
            kind,
            major: if numbered { rustix::fs::major(rdev) } else { 0 },
            minor: if numbered { rustix::fs::minor(rdev) } else { 0 },
            mode: meta.mode() & 0o7777,
            uid: meta.uid(),
            gid: meta.gid(),
            target,
        }))
    }
}

/// What an entry on the way to a trusted file is ([`HostRoot::trusted_file`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EntryKind {
    Dir,
    File,
    Symlink,
    Other,
}

/// Why an entry on the way to a trusted file (`last`: the file itself)
/// with this owner and mode is not trusted; `Ok` when it is.
fn untrusted(kind: EntryKind, uid: u32, mode: u32, last: bool) -> Result<(), String> {
    match (kind, last) {
        (EntryKind::Symlink, _) => return Err("is a symlink".into()),
        (EntryKind::File, true) | (EntryKind::Dir, false) => {}
        (_, true) => return Err("is not a regular file".into()),
        (_, false) => return Err("is not a directory".into()),
    }
    if uid != 0 {
        return Err(format!("is owned by uid {uid}, not root"));
    }
    if mode & 0o002 != 0 {
        return Err("is writable by others".into());
    }
    if mode & 0o020 != 0 {
        return Err("is writable by its group".into());
    }
    Ok(())
}

/// Opens the directory `name` of `dir` to be held (`O_PATH`), never
/// through a link: `ENOTDIR` for a link or anything else but a directory.
fn open_dir_in(dir: BorrowedFd<'_>, name: &OsStr) -> rustix::io::Result<OwnedFd> {
    let flags = rustix::fs::OFlags::PATH
        | rustix::fs::OFlags::DIRECTORY
        | rustix::fs::OFlags::NOFOLLOW
        | rustix::fs::OFlags::CLOEXEC;
    rustix::fs::openat(dir, name, flags, rustix::fs::Mode::empty())
}

/// Whether the kernel makes the sysfs entry at the real host path `p` a
/// link (`device`, `driver`, `physfn`, the devices of `/sys/class/<c>`
/// and `/sys/bus/<b>/devices`): a lookup that reads it as one first saves
/// a call where it is one, and costs one where it is not (a fixture's
/// odd tree). It decides no more than the order of two lookups that
/// together say what the entry is.
fn likely_link(p: &Path) -> bool {
    const LINKS: [&[u8]; 9] = [
        b"device",
        b"driver",
        b"subsystem",
        b"physfn",
        b"iommu_group",
        b"iommu",
        b"firmware_node",
        b"of_node",
        b"module",
    ];
    let bytes = p.as_os_str().as_bytes();
    let name = p.file_name().map_or(&[][..], OsStr::as_bytes);
    if LINKS.contains(&name) || name.starts_with(b"virtfn") {
        return true;
    }
    let parent = p.parent().map_or(&[][..], |d| d.as_os_str().as_bytes());
    let under = |prefix: &[u8]| {
        parent
            .strip_prefix(prefix)
            .is_some_and(|rest| !rest.is_empty() && !rest.contains(&b'/'))
    };
    bytes.starts_with(b"/sys/")
        && (under(b"/sys/class/")
            || under(b"/sys/dev/")
            || (parent.starts_with(b"/sys/bus/") && parent.ends_with(b"/devices")))
}

/// Whether `p` has a `..` component, by its bytes (as
/// [`Path::components`] would say, without parsing every component).
fn has_parent_dir(p: &Path) -> bool {
    p.as_os_str()
        .as_bytes()
        .split(|b| *b == b'/')
        .any(|c| c == b"..")
}

/// The next component of the path `bytes` from byte `from` (`/`s and
/// `.`s skipped; `..` is one): its start and end, or None at the end.
fn next_component(bytes: &[u8], mut from: usize) -> Option<(usize, usize)> {
    loop {
        let rest = bytes.get(from..)?;
        let skip = rest.iter().take_while(|&&b| b == b'/').count();
        let start = from + skip;
        let len = bytes
            .get(start..)?
            .iter()
            .take_while(|&&b| b != b'/')
            .count();
        if len == 0 {
            return None;
        }
        if bytes.get(start..start + len) == Some(&b"."[..]) {
            from = start + len;
            continue;
        }
        return Some((start, start + len));
    }
}

/// Parses the text of a devfs manifest (`dev.manifest`, as
/// [`format_manifest`] writes it) exactly as [`HostRoot`] reads one; errors
/// name the file as `dev.manifest`. The entry point for tests and fuzzing.
///
/// # Errors
/// [`Error::Manifest`] for the first malformed or repeated line.
pub fn parse_manifest_text(text: &str) -> Result<BTreeMap<PathBuf, DevEntry>, Error> {
    parse_manifest(Path::new("dev.manifest"), text)
}

/// Parses a devfs manifest: `PATH c|b MAJ:MIN MODE UID GID`, `PATH l
/// TARGET`, or `PATH d`, one per line; `#` comments. `PATH` and `TARGET`
/// are unescaped by [`unescape_manifest_field`].
fn parse_manifest(file: &Path, text: &str) -> Result<BTreeMap<PathBuf, DevEntry>, Error> {
    let mut map = BTreeMap::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let err = |message: String| Error::Manifest {
            path: file.to_path_buf(),
            line: i + 1,
            message,
        };
        let cols: Vec<&str> = line.split_whitespace().collect();
        let (raw_path, kind) = match cols.as_slice() {
            [p, k, ..] => (*p, *k),
            _ => return Err(err(format!("expected PATH TYPE ..., got {line:?}"))),
        };
        let path = unescape_manifest_field(raw_path)
            .map(|b| PathBuf::from(OsString::from_vec(b)))
            .map_err(|why| err(format!("path {raw_path:?}: {why}")))?;
        let bytes = path.as_os_str().as_bytes();
        if !bytes.starts_with(b"/dev/")
            || bytes.split(|b| *b == b'/').any(|c| c == b".." || c == b".")
        {
            return Err(err(format!(
                "{raw_path:?} is not a normalized path under /dev"
            )));
        }
        let entry = match (kind, cols.as_slice()) {
            ("c" | "b", [_, _, majmin, mode, uid, gid]) => {
                let (major, minor) = parse_majmin(majmin)
                    .ok_or_else(|| err(format!("{majmin:?} is not MAJOR:MINOR")))?;
                let mode = u32::from_str_radix(mode, 8)
                    .ok()
                    .filter(|m| *m <= 0o7777)
                    .ok_or_else(|| err(format!("{mode:?} is not an octal mode like 0660")))?;
                let uid = uid
                    .parse()
                    .map_err(|_| err(format!("{uid:?} is not a numeric uid")))?;
                let gid = gid
                    .parse()
                    .map_err(|_| err(format!("{gid:?} is not a numeric gid")))?;
                DevEntry {
                    kind: if kind == "c" {
                        DevKind::Char
                    } else {
                        DevKind::Block
                    },
                    major,
                    minor,
                    mode,
                    uid,
                    gid,
                    target: None,
                }
            }
            ("l", [_, _, target]) => DevEntry {
                kind: DevKind::Symlink,
                major: 0,
                minor: 0,
                mode: 0o777,
                uid: 0,
                gid: 0,
                target: Some(
                    unescape_manifest_field(target)
                        .ok()
                        .and_then(|b| String::from_utf8(b).ok())
                        .ok_or_else(|| {
                            err(format!(
                                "link target {target:?}: a bad escape or not UTF-8 once unescaped"
                            ))
                        })?,
                ),
            },
            ("d", [_, _]) => DevEntry {
                kind: DevKind::Dir,
                major: 0,
                minor: 0,
                mode: 0o755,
                uid: 0,
                gid: 0,
                target: None,
            },
            _ => {
                return Err(err(format!(
                    "expected `PATH c|b MAJ:MIN MODE UID GID`, `PATH l TARGET` or `PATH d`, got {line:?}"
                )));
            }
        };
        if map.insert(path, entry).is_some() {
            return Err(err(format!("{raw_path} listed twice")));
        }
    }
    Ok(map)
}

/// Parses a sysfs `dev` value, `"226:128"`, into (major, minor).
pub fn parse_majmin(s: &str) -> Option<(u32, u32)> {
    let (a, b) = s.trim().split_once(':')?;
    let digits = |x: &str| !x.is_empty() && x.len() <= 10 && x.bytes().all(|c| c.is_ascii_digit());
    if !digits(a) || !digits(b) {
        return None;
    }
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// Writes a devfs manifest for `entries` (used by `cdigen snapshot`).
/// `PATH` and `TARGET` are escaped by [`escape_manifest_field`], so any
/// name (a space, a newline, `#`, bytes that are not UTF-8) reads back as
/// it was. Entries the format cannot describe are left out: regular files
/// and the like ([`DevKind::Other`]), and links without a target (Linux
/// has no empty link targets).
pub fn format_manifest(entries: &BTreeMap<PathBuf, DevEntry>) -> String {
    let mut out = String::from(
        "# cdigen devfs manifest: the /dev entries discovery looked at.\n\
         # PATH c|b MAJ:MIN MODE UID GID | PATH l TARGET | PATH d\n",
    );
    for (path, e) in entries {
        let p = escape_manifest_field(path.as_os_str().as_bytes());
        match e.kind {
            DevKind::Char | DevKind::Block => {
                let t = if e.kind == DevKind::Char { "c" } else { "b" };
                out.push_str(&format!(
                    "{p} {t} {}:{} {:04o} {} {}\n",
                    e.major, e.minor, e.mode, e.uid, e.gid
                ));
            }
            DevKind::Symlink => {
                // A link whose target could not be read cannot be described.
                if let Some(t) = e.target.as_deref().filter(|t| !t.is_empty()) {
                    let t = escape_manifest_field(t.as_bytes());
                    out.push_str(&format!("{p} l {t}\n"));
                }
            }
            DevKind::Dir => out.push_str(&format!("{p} d\n")),
            DevKind::Other => {}
        }
    }
    out
}

/// Escapes a manifest column (`PATH`, `TARGET`): printable ASCII other
/// than `\` and `#` is written as is, `\` as `\\`, and every other byte
/// (space, tab, newline, control characters, `#`, DEL, each byte of a
/// non-ASCII or non-UTF-8 name) as `\xHH` (two lowercase hex digits), so a
/// column never holds whitespace or starts a comment.
pub fn escape_manifest_field(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'#' => out.push_str("\\x23"),
            0x21..=0x7e => out.push(char::from(b)),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out
}

/// Reverses [`escape_manifest_field`]: `\\` is a backslash, `\xHH` (hex,
/// either case) the byte HH; any other character stands for itself (a
/// hand-written manifest may hold UTF-8 names as they are).
///
/// # Errors
/// A message for a `\` followed by anything else, or a short `\x`.
pub fn unescape_manifest_field(field: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(field.len());
    let mut rest = field.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        rest = tail;
        if b != b'\\' {
            out.push(b);
            continue;
        }
        match rest {
            [b'\\', tail @ ..] => {
                out.push(b'\\');
                rest = tail;
            }
            [b'x', h, l, tail @ ..] => {
                let hex = |c: u8| char::from(c).to_digit(16);
                let (Some(h), Some(l)) = (hex(*h), hex(*l)) else {
                    return Err("`\\x` must be followed by two hex digits".into());
                };
                // Two hex digits are at most 0xff.
                out.push(u8::try_from(h * 16 + l).unwrap_or(u8::MAX));
                rest = tail;
            }
            _ => {
                return Err("a backslash must start `\\\\` or `\\xHH` (two hex digits)".into());
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;

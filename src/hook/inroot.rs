//! A directory tree that may be hostile, changed only from inside: the
//! filesystem primitive of `cdigen hook`, usable wherever cdigen must
//! create or replace files under a root it does not trust (a container's
//! root filesystem, before the container starts).
//!
//! Every path is a path *in the root* (`/etc/ld.so.conf.d`), resolved as a
//! chroot would resolve it: an absolute symlink target starts again at the
//! root, `..` never climbs above it, and no symlink, relative or absolute,
//! leads out of it. Resolution is the kernel's `openat2` with
//! `RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS` on a descriptor of the root
//! (so `/proc/self/root`-style links are refused too). On kernels without
//! `openat2` (before Linux 5.6) or where it is filtered out, [`InRoot`]
//! walks the path one component at a time itself, reading each symlink and
//! following at most [`MAX_LINKS`] of them, with the same result.
//!
//! Only directories are resolved that way. Everything else is done with
//! one name relative to the resolved parent directory's descriptor and
//! never follows a symlink at that name: `mkdirat`, `symlinkat`,
//! `readlinkat`, `statat` without following, `openat` with
//! `O_CREAT | O_EXCL | O_NOFOLLOW` for a new temporary file, `renameat` to
//! replace. Nothing here opens an existing file other than a directory, so
//! no FIFO can block and no device's driver is ever called.
//!
//! Directories are created with mode 0755 whatever the umask. A dangling
//! symlink met while creating directories is followed, inside the root:
//! `usr -> /somewhere` makes `/somewhere/...` in the root.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::io::{self, Write as _};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// Longest path accepted, in bytes (the kernel's `PATH_MAX`).
pub const MAX_PATH: usize = 4096;
/// Most symlinks followed while resolving one path (the kernel's limit).
pub const MAX_LINKS: usize = 40;
/// Most components the fallback walk visits for one path, symlink targets
/// included: a bound on the work, which [`MAX_PATH`] and [`MAX_LINKS`]
/// already imply.
const MAX_STEPS: usize = (MAX_LINKS + 1) * MAX_PATH;
/// How often `openat2` is retried when the kernel saw a concurrent rename
/// (`EAGAIN`) before giving up.
const OPENAT2_RETRIES: usize = 16;
/// Mode of the directories created (before no umask: it is set
/// explicitly).
const DIR_MODE: u32 = 0o755;

/// How paths are resolved inside the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolver {
    /// The kernel's `openat2` with `RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS`.
    Openat2,
    /// A component-by-component walk that reads each symlink itself: the
    /// fallback where `openat2` is missing.
    Walk,
}

/// What a directory entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
    /// A FIFO.
    Fifo,
    /// A socket.
    Socket,
    /// A character device.
    CharDevice,
    /// A block device.
    BlockDevice,
    /// Anything else.
    Unknown,
}

impl Kind {
    fn of(ft: FileType) -> Kind {
        match ft {
            FileType::RegularFile => Kind::File,
            FileType::Directory => Kind::Dir,
            FileType::Symlink => Kind::Symlink,
            FileType::Fifo => Kind::Fifo,
            FileType::Socket => Kind::Socket,
            FileType::CharacterDevice => Kind::CharDevice,
            FileType::BlockDevice => Kind::BlockDevice,
            _ => Kind::Unknown,
        }
    }

    /// For messages: `a regular file`, `a FIFO`, ...
    pub fn describe(self) -> &'static str {
        match self {
            Kind::File => "a regular file",
            Kind::Dir => "a directory",
            Kind::Symlink => "a symbolic link",
            Kind::Fifo => "a FIFO",
            Kind::Socket => "a socket",
            Kind::CharDevice => "a character device",
            Kind::BlockDevice => "a block device",
            Kind::Unknown => "an unknown kind of file",
        }
    }
}

/// What [`InRoot::symlink`] found or did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Symlink {
    /// The link was created.
    Created,
    /// The link was there already, with the same target.
    Present,
    /// Something else is at the link's path: left alone.
    Occupied(Occupant),
}

/// What is at a path where a link was to be created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Occupant {
    /// A symlink to another target.
    Link(OsString),
    /// Anything but a symlink.
    Other(Kind),
}

/// Why an operation in the root failed; every variant names the path in
/// the root (or, for [`Error::Root`], the root itself).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The root directory cannot be opened.
    #[error("{}: cannot open the container root: {cause}", root.display())]
    Root {
        /// The root, as a host path.
        root: PathBuf,
        /// The cause (in the message, not a chained error).
        cause: io::Error,
    },
    /// A path could not be resolved, created, listed or written.
    #[error("{}: {cause}", path.display())]
    Io {
        /// The path in the root.
        path: PathBuf,
        /// The cause (in the message, not a chained error).
        cause: io::Error,
    },
    /// Something other than a regular file where one is to be replaced or
    /// removed: left alone, never opened.
    #[error("{}: {} is there, not a regular file: not {action} it", path.display(), what.describe())]
    NotRegular {
        /// The path in the root.
        path: PathBuf,
        /// What is there.
        what: Kind,
        /// `replacing`, `removing`.
        action: &'static str,
    },
    /// Not a path this module accepts.
    #[error("{}: {why}", path.display())]
    BadPath {
        /// The path as given.
        path: PathBuf,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A directory with more entries than the caller allows.
    #[error("{}: more than {limit} entries: not reading it", path.display())]
    TooManyEntries {
        /// The path in the root.
        path: PathBuf,
        /// The limit.
        limit: usize,
    },
}

impl Error {
    /// The error number, for errors of the system.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            Error::Root { cause, .. } | Error::Io { cause, .. } => {
                cause.raw_os_error().map(Errno::from_raw_os_error)
            }
            _ => None,
        }
    }

    /// True when the root's filesystem is mounted read-only (`EROFS`).
    pub fn is_read_only(&self) -> bool {
        self.errno() == Some(Errno::ROFS)
    }

    /// True when the path, or a directory on the way, does not exist.
    pub fn is_not_found(&self) -> bool {
        self.errno() == Some(Errno::NOENT)
    }

    /// True when a component on the way is not a directory.
    pub fn is_not_dir(&self) -> bool {
        self.errno() == Some(Errno::NOTDIR)
    }
}

/// A root directory, with every operation confined to it.
#[derive(Debug)]
pub struct InRoot {
    fd: OwnedFd,
    path: PathBuf,
    resolver: Resolver,
}

/// A path in the root, split: the components (`..` kept, `.` and empty
/// ones dropped), without a leading `/`.
type Components = Vec<OsString>;

fn split(path: &Path) -> Result<Components, Error> {
    let bytes = path.as_os_str().as_bytes();
    if bytes.len() > MAX_PATH {
        return Err(Error::BadPath {
            path: path.to_path_buf(),
            why: "longer than 4096 bytes",
        });
    }
    Ok(split_bytes(bytes))
}

fn split_bytes(bytes: &[u8]) -> Components {
    bytes
        .split(|b| *b == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
        .map(|c| OsStr::from_bytes(c).to_os_string())
        .collect()
}

/// The path in the root that `comps` spell, for messages.
fn shown(comps: &[OsString]) -> PathBuf {
    let mut p = PathBuf::from("/");
    p.extend(comps);
    p
}

/// `comps` as a relative path for `openat2` (`.` for the root).
fn relative(comps: &[OsString]) -> OsString {
    if comps.is_empty() {
        return OsString::from(".");
    }
    let mut out = OsString::new();
    for (i, c) in comps.iter().enumerate() {
        if i > 0 {
            out.push("/");
        }
        out.push(c);
    }
    out
}

fn io_err(path: PathBuf) -> impl FnOnce(Errno) -> Error {
    move |e| Error::Io {
        path,
        cause: io::Error::from(e),
    }
}

/// The last component of `path`, which must name an entry (not the root,
/// not `..`), and the components of its parent.
fn parent_and_name(path: &Path) -> Result<(Components, OsString), Error> {
    let mut comps = split(path)?;
    match comps.pop() {
        Some(name) if name != ".." => Ok((comps, name)),
        _ => Err(Error::BadPath {
            path: path.to_path_buf(),
            why: "does not end in a file name",
        }),
    }
}

const DIR_FLAGS: OFlags = OFlags::PATH.union(OFlags::DIRECTORY).union(OFlags::CLOEXEC);

impl InRoot {
    /// Opens the root directory `path` (a host path: symlinks in it are
    /// followed as usual), resolving with `openat2` where the kernel has
    /// it and walking otherwise.
    ///
    /// # Errors
    /// [`Error::Root`] when it cannot be opened as a directory.
    pub fn open(path: &Path) -> Result<InRoot, Error> {
        let fd = Self::open_fd(path)?;
        let probe = rustix::fs::openat2(
            &fd,
            ".",
            DIR_FLAGS,
            Mode::empty(),
            ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS,
        );
        let resolver = match probe {
            Ok(_) => Resolver::Openat2,
            // Missing (Linux < 5.6), or refused by a seccomp filter.
            Err(Errno::NOSYS | Errno::PERM) => Resolver::Walk,
            Err(e) => {
                return Err(Error::Root {
                    root: path.to_path_buf(),
                    cause: e.into(),
                });
            }
        };
        Ok(InRoot {
            fd,
            path: path.to_path_buf(),
            resolver,
        })
    }

    /// Opens the root directory `path` with the given resolver (tests run
    /// every operation with both).
    ///
    /// # Errors
    /// [`Error::Root`] when it cannot be opened as a directory.
    pub fn with_resolver(path: &Path, resolver: Resolver) -> Result<InRoot, Error> {
        Ok(InRoot {
            fd: Self::open_fd(path)?,
            path: path.to_path_buf(),
            resolver,
        })
    }

    fn open_fd(path: &Path) -> Result<OwnedFd, Error> {
        rustix::fs::open(path, DIR_FLAGS, Mode::empty()).map_err(|e| Error::Root {
            root: path.to_path_buf(),
            cause: e.into(),
        })
    }

    /// The root, as the host path it was opened with.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How paths are resolved.
    pub fn resolver(&self) -> Resolver {
        self.resolver
    }

    /// An `O_PATH` descriptor of the root itself.
    pub fn root_fd(&self) -> &OwnedFd {
        &self.fd
    }

    fn root_dup(&self) -> Result<OwnedFd, Errno> {
        rustix::fs::openat(&self.fd, ".", DIR_FLAGS, Mode::empty())
    }

    /// Resolves the directory `comps` inside the root.
    fn resolve(&self, comps: &[OsString]) -> Result<OwnedFd, Errno> {
        match self.resolver {
            Resolver::Openat2 => self.resolve_openat2(comps),
            Resolver::Walk => self.resolve_walk(comps),
        }
    }

    fn resolve_openat2(&self, comps: &[OsString]) -> Result<OwnedFd, Errno> {
        let rel = relative(comps);
        let mut last = Errno::AGAIN;
        for _ in 0..OPENAT2_RETRIES {
            match rustix::fs::openat2(
                &self.fd,
                rel.as_os_str(),
                DIR_FLAGS,
                Mode::empty(),
                ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS,
            ) {
                // A rename elsewhere while `..` was resolved: try again.
                Err(Errno::AGAIN) => last = Errno::AGAIN,
                other => return other,
            }
        }
        Err(last)
    }

    /// The fallback: one component at a time, each opened with
    /// `O_NOFOLLOW` relative to the last, symlinks read and spliced into
    /// the rest of the path (an absolute target restarts at the root),
    /// `..` taken from the names walked so far, never above the root.
    fn resolve_walk(&self, comps: &[OsString]) -> Result<OwnedFd, Errno> {
        let mut todo: VecDeque<OsString> = comps.iter().cloned().collect();
        let mut names: Vec<OsString> = Vec::new();
        let mut cur = self.root_dup()?;
        let mut links = 0usize;
        let mut steps = 0usize;
        while let Some(c) = todo.pop_front() {
            steps += 1;
            if steps > MAX_STEPS {
                return Err(Errno::NAMETOOLONG);
            }
            if c.is_empty() || c == "." {
                continue;
            }
            if c == ".." {
                // The names walked are real directories, not links: their
                // parent is the walk's parent (re-walked, not `..` of the
                // descriptor, which a rename could move).
                if names.pop().is_some() {
                    cur = self.reopen(&names)?;
                }
                continue;
            }
            let st = rustix::fs::statat(&cur, c.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)?;
            match FileType::from_raw_mode(st.st_mode) {
                FileType::Directory => {
                    cur = rustix::fs::openat(
                        &cur,
                        c.as_os_str(),
                        DIR_FLAGS | OFlags::NOFOLLOW,
                        Mode::empty(),
                    )?;
                    names.push(c);
                }
                FileType::Symlink => {
                    links += 1;
                    if links > MAX_LINKS {
                        return Err(Errno::LOOP);
                    }
                    let target = rustix::fs::readlinkat(&cur, c.as_os_str(), Vec::new())?;
                    let bytes = target.as_bytes();
                    if bytes.is_empty() {
                        return Err(Errno::NOENT);
                    }
                    if bytes.first() == Some(&b'/') {
                        names.clear();
                        cur = self.root_dup()?;
                    }
                    for part in split_bytes(bytes).into_iter().rev() {
                        todo.push_front(part);
                    }
                }
                _ => return Err(Errno::NOTDIR),
            }
        }
        Ok(cur)
    }

    fn reopen(&self, names: &[OsString]) -> Result<OwnedFd, Errno> {
        let mut cur = self.root_dup()?;
        for n in names {
            cur = rustix::fs::openat(
                &cur,
                n.as_os_str(),
                DIR_FLAGS | OFlags::NOFOLLOW,
                Mode::empty(),
            )?;
        }
        Ok(cur)
    }

    /// An `O_PATH` descriptor of the directory `path` in the root.
    ///
    /// # Errors
    /// [`Error::Io`] naming `path` (missing, not a directory, too many
    /// links); [`Error::BadPath`] for a path over [`MAX_PATH`].
    pub fn dir(&self, path: &Path) -> Result<OwnedFd, Error> {
        let comps = split(path)?;
        self.resolve(&comps).map_err(io_err(shown(&comps)))
    }

    /// An `O_PATH` descriptor of the directory `path` in the root, creating
    /// it and its missing parents (mode 0755) as `mkdir -p` would, except
    /// that a dangling symlink on the way is followed, inside the root, and
    /// its target created.
    ///
    /// # Errors
    /// [`Error::Io`] naming `path`: a component that is not a directory
    /// (`ENOTDIR`), too many links (`ELOOP`), a read-only filesystem
    /// (`EROFS`, see [`Error::is_read_only`]).
    pub fn dir_all(&self, path: &Path) -> Result<OwnedFd, Error> {
        let comps = split(path)?;
        let shown_path = shown(&comps);
        self.dir_all_comps(comps).map_err(io_err(shown_path))
    }

    /// `mkdir -p` inside the root. The longest prefix of the path that
    /// exists is found by bisection (resolving a prefix fails from the
    /// first missing component on); from there each component is created
    /// or, when it is a real directory, entered, with one name relative to
    /// the last directory and no link followed. A dangling symlink is
    /// spliced into the path (its target from the root when absolute, else
    /// from where the link is), and a `..` below the existing prefix
    /// restarts the search: both go back through the resolver, so the
    /// result is what resolving the path gives once the directories exist.
    /// The path, links spliced in, is at most [`MAX_PATH`] bytes, which
    /// bounds the work.
    fn dir_all_comps(&self, mut comps: Components) -> Result<OwnedFd, Errno> {
        let mut links = 0usize;
        'restart: loop {
            match self.resolve(&comps) {
                Err(Errno::NOENT) => {}
                other => return other,
            }
            // The empty prefix (the root) resolves, the whole path does not.
            let (mut have, mut missing) = (0, comps.len());
            while missing - have > 1 {
                let mid = have + (missing - have) / 2;
                match self.resolve(comps.get(..mid).unwrap_or_default()) {
                    Ok(_) => have = mid,
                    Err(Errno::NOENT) => missing = mid,
                    Err(e) => return Err(e),
                }
            }
            let mut dir = self.resolve(comps.get(..have).unwrap_or_default())?;
            for i in have..comps.len() {
                let Some(name) = comps.get(i) else {
                    break;
                };
                if name == ".." {
                    // Never first (its prefix exists, so it would have
                    // resolved): the directories before it exist now.
                    continue 'restart;
                }
                match rustix::fs::statat(&dir, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
                    Err(Errno::NOENT) => {
                        make_dir(&dir, name)?;
                        dir = enter(&dir, name)?;
                    }
                    Ok(st) => match FileType::from_raw_mode(st.st_mode) {
                        FileType::Directory => dir = enter(&dir, name)?,
                        FileType::Symlink => {
                            links += 1;
                            if links > MAX_LINKS {
                                return Err(Errno::LOOP);
                            }
                            let target =
                                rustix::fs::readlinkat(&dir, name.as_os_str(), Vec::new())?;
                            let bytes = target.as_bytes();
                            if bytes.is_empty() {
                                return Err(Errno::NOENT);
                            }
                            let mut spliced: Components = if bytes.first() == Some(&b'/') {
                                Vec::new()
                            } else {
                                comps.get(..i).map(<[OsString]>::to_vec).unwrap_or_default()
                            };
                            spliced.extend(split_bytes(bytes));
                            spliced.extend(comps.get(i + 1..).unwrap_or_default().iter().cloned());
                            let len: usize = spliced.iter().map(|c| c.len() + 1).sum();
                            if len > MAX_PATH {
                                return Err(Errno::NAMETOOLONG);
                            }
                            comps = spliced;
                            continue 'restart;
                        }
                        _ => return Err(Errno::NOTDIR),
                    },
                    Err(e) => return Err(e),
                }
            }
            // Resolved again, so that what is returned is what the
            // resolver gives for the path.
            return self.resolve(&comps);
        }
    }

    /// What is at `path` (not following a symlink there), or `None`.
    ///
    /// # Errors
    /// [`Error::Io`] when the parent directory cannot be resolved (a
    /// missing parent is `Ok(None)`).
    pub fn kind(&self, path: &Path) -> Result<Option<Kind>, Error> {
        let (parent, name) = parent_and_name(path)?;
        let shown_path = shown_with(&parent, &name);
        let dir = match self.resolve(&parent) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(None),
            Err(e) => return Err(io_err(shown_path)(e)),
        };
        match rustix::fs::statat(&dir, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(Kind::of(FileType::from_raw_mode(st.st_mode)))),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(io_err(shown_path)(e)),
        }
    }

    /// Creates the symlink `link` (a path in the root) with the text
    /// `target`, creating its parent directories. An existing link with
    /// that target is [`Symlink::Present`]; anything else there is left
    /// alone ([`Symlink::Occupied`]).
    ///
    /// # Errors
    /// [`Error::Io`] naming the link's path (a parent that cannot be
    /// created: see [`Error::is_not_dir`], [`Error::is_read_only`]);
    /// [`Error::BadPath`] for a link path that names no entry.
    pub fn symlink(&self, target: &OsStr, link: &Path) -> Result<Symlink, Error> {
        let (parent, name) = parent_and_name(link)?;
        let shown_path = shown_with(&parent, &name);
        let dir = self
            .dir_all_comps(parent)
            .map_err(io_err(shown_path.clone()))?;
        // Twice at most: a link created between the look and the create
        // is looked at again.
        let mut last = Errno::EXIST;
        for _ in 0..2 {
            match rustix::fs::statat(&dir, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
                Err(Errno::NOENT) => match rustix::fs::symlinkat(target, &dir, name.as_os_str()) {
                    Ok(()) => return Ok(Symlink::Created),
                    Err(e) => last = e,
                },
                Ok(st) => {
                    let kind = Kind::of(FileType::from_raw_mode(st.st_mode));
                    if kind != Kind::Symlink {
                        return Ok(Symlink::Occupied(Occupant::Other(kind)));
                    }
                    let there = rustix::fs::readlinkat(&dir, name.as_os_str(), Vec::new())
                        .map_err(io_err(shown_path.clone()))?;
                    let there = OsStr::from_bytes(there.as_bytes());
                    return Ok(if there == target {
                        Symlink::Present
                    } else {
                        Symlink::Occupied(Occupant::Link(there.to_os_string()))
                    });
                }
                Err(e) => last = e,
            }
            if last != Errno::EXIST {
                break;
            }
        }
        Err(io_err(shown_path)(last))
    }

    /// Writes `content` to the file `path` in the root (mode 0644),
    /// creating its parent directories, atomically: a new temporary file
    /// in the same directory (`O_CREAT | O_EXCL | O_NOFOLLOW`), renamed
    /// over `path`. Only a regular file at `path` is replaced; anything
    /// else there is an error and left alone (never opened).
    ///
    /// # Errors
    /// [`Error::NotRegular`]; [`Error::Io`] naming `path` (see
    /// [`Error::is_read_only`]).
    pub fn write_file(&self, path: &Path, content: &[u8]) -> Result<(), Error> {
        let (parent, name) = parent_and_name(path)?;
        let shown_path = shown_with(&parent, &name);
        let dir = self
            .dir_all_comps(parent)
            .map_err(io_err(shown_path.clone()))?;
        match rustix::fs::statat(&dir, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Err(Errno::NOENT) => {}
            Ok(st) => {
                let kind = Kind::of(FileType::from_raw_mode(st.st_mode));
                if kind != Kind::File {
                    return Err(Error::NotRegular {
                        path: shown_path,
                        what: kind,
                        action: "replacing",
                    });
                }
            }
            Err(e) => return Err(io_err(shown_path)(e)),
        }
        let (tmp, fd) = create_temp(&dir, &name).map_err(io_err(shown_path.clone()))?;
        let written = write_all(fd, content)
            .and_then(|()| rustix::fs::renameat(&dir, tmp.as_os_str(), &dir, name.as_os_str()));
        if let Err(e) = written {
            let _ = rustix::fs::unlinkat(&dir, tmp.as_os_str(), AtFlags::empty());
            return Err(io_err(shown_path)(e));
        }
        Ok(())
    }

    /// Removes the regular file `path` in the root. Returns whether there
    /// was one; a missing file or parent is `Ok(false)`.
    ///
    /// # Errors
    /// [`Error::NotRegular`] for anything else there (left alone);
    /// [`Error::Io`] naming `path`.
    pub fn remove_file(&self, path: &Path) -> Result<bool, Error> {
        let (parent, name) = parent_and_name(path)?;
        let shown_path = shown_with(&parent, &name);
        let dir = match self.resolve(&parent) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(false),
            Err(e) => return Err(io_err(shown_path)(e)),
        };
        match rustix::fs::statat(&dir, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Err(Errno::NOENT) => return Ok(false),
            Ok(st) => {
                let kind = Kind::of(FileType::from_raw_mode(st.st_mode));
                if kind != Kind::File {
                    return Err(Error::NotRegular {
                        path: shown_path,
                        what: kind,
                        action: "removing",
                    });
                }
            }
            Err(e) => return Err(io_err(shown_path)(e)),
        }
        match rustix::fs::unlinkat(&dir, name.as_os_str(), AtFlags::empty()) {
            Ok(()) => Ok(true),
            Err(Errno::NOENT) => Ok(false),
            Err(e) => Err(io_err(shown_path)(e)),
        }
    }

    /// The entries of the directory `path` in the root (without `.` and
    /// `..`), each with what it is (not following symlinks), in the order
    /// the filesystem gives them.
    ///
    /// # Errors
    /// [`Error::TooManyEntries`] beyond `limit`; [`Error::Io`] naming
    /// `path` (see [`Error::is_not_found`]).
    pub fn list_dir(&self, path: &Path, limit: usize) -> Result<Vec<(OsString, Kind)>, Error> {
        let comps = split(path)?;
        let shown_path = shown(&comps);
        let at = self.resolve(&comps).map_err(io_err(shown_path.clone()))?;
        let fd = rustix::fs::openat(
            &at,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NONBLOCK,
            Mode::empty(),
        )
        .map_err(io_err(shown_path.clone()))?;
        let mut dir = rustix::fs::Dir::new(fd).map_err(io_err(shown_path.clone()))?;
        let mut out = Vec::new();
        while let Some(entry) = dir.read() {
            let entry = entry.map_err(io_err(shown_path.clone()))?;
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            if name == "." || name == ".." {
                continue;
            }
            if out.len() == limit {
                return Err(Error::TooManyEntries {
                    path: shown_path,
                    limit,
                });
            }
            let kind = match entry.file_type() {
                FileType::Unknown => {
                    match rustix::fs::statat(&at, name, AtFlags::SYMLINK_NOFOLLOW) {
                        Ok(st) => Kind::of(FileType::from_raw_mode(st.st_mode)),
                        // Gone since it was listed.
                        Err(Errno::NOENT) => continue,
                        Err(e) => return Err(io_err(shown_path)(e)),
                    }
                }
                ft => Kind::of(ft),
            };
            out.push((name.to_os_string(), kind));
        }
        Ok(out)
    }
}

fn shown_with(parent: &[OsString], name: &OsStr) -> PathBuf {
    let mut p = shown(parent);
    p.push(name);
    p
}

/// Opens the directory `name` in `dir`, refusing a symlink.
fn enter(dir: &OwnedFd, name: &OsStr) -> Result<OwnedFd, Errno> {
    rustix::fs::openat(dir, name, DIR_FLAGS | OFlags::NOFOLLOW, Mode::empty())
}

/// Creates the directory `name` in `parent` with mode 0755 (whatever the
/// umask); one that exists is fine (the caller resolves it again).
fn make_dir(parent: &OwnedFd, name: &OsStr) -> Result<(), Errno> {
    match rustix::fs::mkdirat(parent, name, Mode::from_raw_mode(DIR_MODE)) {
        Ok(()) => {
            let fd = rustix::fs::openat(
                parent,
                name,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )?;
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(DIR_MODE))
        }
        Err(Errno::EXIST) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Creates a new temporary file next to `name` in `dir`: a hidden name no
/// one else uses, opened with `O_EXCL | O_NOFOLLOW`, mode 0644.
fn create_temp(dir: &OwnedFd, name: &OsStr) -> Result<(OsString, OwnedFd), Errno> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut last = Errno::EXIST;
    for _ in 0..16 {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let mut tmp = OsString::from(".");
        tmp.push(name);
        tmp.push(format!(".cdigen-{}-{n}-{nanos}.tmp", std::process::id()));
        match rustix::fs::openat(
            dir,
            tmp.as_os_str(),
            OFlags::WRONLY
                | OFlags::CREATE
                | OFlags::EXCL
                | OFlags::NOFOLLOW
                | OFlags::CLOEXEC
                | OFlags::NOCTTY,
            Mode::from_raw_mode(0o644),
        ) {
            Ok(fd) => {
                // The umask may have taken bits the readers need.
                if let Err(e) = rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o644)) {
                    let _ = rustix::fs::unlinkat(dir, tmp.as_os_str(), AtFlags::empty());
                    return Err(e);
                }
                return Ok((tmp, fd));
            }
            Err(Errno::EXIST) => last = Errno::EXIST,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

fn write_all(fd: OwnedFd, content: &[u8]) -> Result<(), Errno> {
    let mut file = std::fs::File::from(fd);
    file.write_all(content)
        .map_err(|e| e.raw_os_error().map_or(Errno::IO, Errno::from_raw_os_error))
}

#[cfg(test)]
mod tests;

//! Opening and reading files cdigen does not trust, in one place.
//!
//! Every file cdigen reads can be written by someone else: sysfs and
//! procfs content under `--root`, the devfs manifest, generator
//! definitions, templates, spec files, and cdigen's own state, lock and
//! allocation files in directories other tools share. So every read and
//! every open of cdigen's own files goes through here, and:
//!
//! - **never opens a non-regular file**: the type is checked with `lstat`
//!   (or `stat`, where a symlink may be followed) *before* the open, so a
//!   FIFO never blocks the process and a device node's driver is never
//!   called; the open itself adds `O_NONBLOCK | O_NOCTTY`, and `fstat` on
//!   the opened file must show the same regular file (a swap between the
//!   check and the open is refused, not followed);
//! - **never follows a symlink where it must not**: [`Links::Refuse`]
//!   opens with `O_NOFOLLOW`; [`Links::Follow`] follows only to a regular
//!   file (as runtimes read spec directories);
//! - **never reads more than a limit**, so `/dev/zero` behind a link or a
//!   huge file cannot exhaust memory.
//!
//! Errors name the path and say what was found instead (`a FIFO`, `a
//! symbolic link`, ...).

use std::ffi::OsStr;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::os::fd::BorrowedFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

pub use rustix::fs::Stat;
use rustix::fs::{AtFlags, FileType, OFlags};

/// Which file is at a path, told apart from any file there before it:
/// device, inode, and birth time to the nanosecond (the change time where
/// the filesystem keeps no birth time). An inode number alone is not
/// enough: ext4 gives the number of a file just deleted to the next one
/// created, so a socket re-created by a restarting server often has its
/// predecessor's; its birth time is new.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId {
    dev: u64,
    ino: u64,
    born: (i64, i64),
}

impl FileId {
    /// The identity of the file `meta` describes.
    pub fn of(meta: &Metadata) -> FileId {
        let born = meta
            .created()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or((meta.ctime(), meta.ctime_nsec()), |d| {
                (
                    i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
                    i64::from(d.subsec_nanos()),
                )
            });
        FileId {
            dev: meta.dev(),
            ino: meta.ino(),
            born,
        }
    }

    /// The identity of what is at `path` (a symlink itself, not followed);
    /// `None` when nothing is.
    pub fn at(path: &Path) -> Option<FileId> {
        std::fs::symlink_metadata(path).ok().map(|m| FileId::of(&m))
    }
}

/// What to do when the path itself is a symbolic link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// Refuse it: cdigen's own files, and paths already resolved inside a
    /// root.
    Refuse,
    /// Follow it, but only to a regular file (spec files, which runtimes
    /// follow; definitions and templates an administrator links in).
    Follow,
}

/// Why a file was not read; every variant names the path.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be examined, opened or read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause (inline: warnings print only the top message).
        source: io::Error,
    },
    /// Not a regular file: never opened.
    #[error("{}: {}", path.display(), not_regular(what, *via_link))]
    NotRegular {
        /// The path.
        path: PathBuf,
        /// What is there (`a FIFO`, `a symbolic link`, ...).
        what: &'static str,
        /// Whether `path` is a symlink to it (with [`Links::Follow`]).
        via_link: bool,
    },
    /// Larger than the limit for that file.
    #[error("{}: larger than {limit} bytes: not reading it", path.display())]
    TooLarge {
        /// The path.
        path: PathBuf,
        /// The limit.
        limit: u64,
    },
    /// Not UTF-8 text where text is expected.
    #[error("{}: not UTF-8 text", path.display())]
    NotUtf8 {
        /// The path.
        path: PathBuf,
    },
}

impl Error {
    /// True when the error means "no such file" (a dangling symlink
    /// followed included).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }

    /// What is wrong, without the path (for messages that name it
    /// already).
    pub fn reason(&self) -> String {
        match self {
            Error::Io { source, .. } => source.to_string(),
            Error::NotRegular { what, via_link, .. } => not_regular(what, *via_link),
            Error::TooLarge { limit, .. } => format!("larger than {limit} bytes: not reading it"),
            Error::NotUtf8 { .. } => "not UTF-8 text".into(),
        }
    }

    /// The path the error is about.
    pub fn path(&self) -> &Path {
        match self {
            Error::Io { path, .. }
            | Error::NotRegular { path, .. }
            | Error::TooLarge { path, .. }
            | Error::NotUtf8 { path } => path,
        }
    }
}

/// What a file type is, for messages: `a FIFO`, `a directory`, ...
pub fn describe(ft: std::fs::FileType) -> &'static str {
    describe_kind(kind_of(ft))
}

/// The kind of file `ft` is, as a raw mode says it.
fn kind_of(ft: std::fs::FileType) -> FileType {
    if ft.is_file() {
        FileType::RegularFile
    } else if ft.is_dir() {
        FileType::Directory
    } else if ft.is_symlink() {
        FileType::Symlink
    } else if ft.is_fifo() {
        FileType::Fifo
    } else if ft.is_socket() {
        FileType::Socket
    } else if ft.is_char_device() {
        FileType::CharacterDevice
    } else if ft.is_block_device() {
        FileType::BlockDevice
    } else {
        FileType::Unknown
    }
}

/// Refuses anything but a regular file, saying what `path` is instead.
fn regular(path: &Path, kind: FileType) -> Result<(), Error> {
    if kind == FileType::RegularFile {
        return Ok(());
    }
    Err(Error::NotRegular {
        path: path.to_path_buf(),
        what: describe_kind(kind),
        via_link: false,
    })
}

/// Checks that a file just opened (`kind`, its device and inode `now`)
/// is the regular file examined before the open (`before`).
fn same_file(
    path: &Path,
    kind: FileType,
    now: (u64, u64),
    before: (u64, u64),
) -> Result<(), Error> {
    regular(path, kind)?;
    if now != before {
        return Err(Error::Io {
            path: path.to_path_buf(),
            source: io::Error::other("the file was replaced while it was being opened"),
        });
    }
    Ok(())
}

/// `a FIFO, not a regular file: not opening it`, or `a symbolic link to a
/// FIFO, ...` when followed.
fn not_regular(what: &str, via_link: bool) -> String {
    if via_link {
        format!("a symbolic link to {what}, not a regular file: not opening it")
    } else {
        format!("{what}, not a regular file: not opening it")
    }
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Flags of every open: no blocking on a FIFO swapped in, no controlling
/// terminal, and (for [`Links::Refuse`]) no symlink followed.
fn open_flags(links: Links) -> i32 {
    let mut flags = OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    if links == Links::Refuse {
        flags |= OFlags::NOFOLLOW;
    }
    // The flag bits are small positive values: the cast cannot wrap.
    flags.bits() as i32
}

/// The metadata of `path` as `links` sees it, refusing anything but a
/// regular file.
fn regular_meta(path: &Path, links: Links) -> Result<Metadata, Error> {
    let own = std::fs::symlink_metadata(path).map_err(io_error(path))?;
    let via_link = links == Links::Follow && own.file_type().is_symlink();
    let meta = if via_link {
        std::fs::metadata(path).map_err(|e| {
            let why = if e.kind() == io::ErrorKind::NotFound {
                "a symbolic link whose target does not exist".to_string()
            } else {
                format!("a symbolic link that cannot be followed: {e}")
            };
            Error::Io {
                path: path.to_path_buf(),
                source: io::Error::new(e.kind(), why),
            }
        })?
    } else {
        own
    };
    if !meta.file_type().is_file() {
        return Err(Error::NotRegular {
            path: path.to_path_buf(),
            what: describe(meta.file_type()),
            via_link,
        });
    }
    Ok(meta)
}

/// Checks that an opened file is the regular file examined before the
/// open (same device and inode).
fn same_regular(path: &Path, file: &File, before: &Metadata) -> Result<Metadata, Error> {
    let now = file.metadata().map_err(io_error(path))?;
    same_file(
        path,
        kind_of(now.file_type()),
        (now.dev(), now.ino()),
        (before.dev(), before.ino()),
    )?;
    Ok(now)
}

/// Opens a regular file for reading, as [`read`] does, without reading it.
///
/// # Errors
/// [`Error`] naming the path: missing, not a regular file, a symlink
/// with [`Links::Refuse`], unreadable.
pub fn open(path: &Path, links: Links) -> Result<File, Error> {
    let before = regular_meta(path, links)?;
    open_examined(path, links, &before)
}

/// Opens the regular file `before` (examined by the caller) describes,
/// refusing another one found there by the open.
fn open_examined(path: &Path, links: Links, before: &Metadata) -> Result<File, Error> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(open_flags(links))
        .open(path)
        .map_err(|e| refused_link(path, e))?;
    same_regular(path, &file, before)?;
    Ok(file)
}

/// `ELOOP` from `O_NOFOLLOW` means a symlink appeared at the path.
fn refused_link(path: &Path, e: io::Error) -> Error {
    if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
        Error::NotRegular {
            path: path.to_path_buf(),
            what: "a symbolic link",
            via_link: false,
        }
    } else {
        Error::Io {
            path: path.to_path_buf(),
            source: e,
        }
    }
}

/// Reads a whole regular file of at most `limit` bytes.
///
/// # Errors
/// [`Error`] naming the path: missing, not a regular file (never
/// opened), a symlink with [`Links::Refuse`], larger than `limit`,
/// unreadable.
pub fn read(path: &Path, limit: u64, links: Links) -> Result<Vec<u8>, Error> {
    let file = open(path, links)?;
    read_open(path, file, limit, None)
}

/// The `lstat` of the entry `name` of the directory `dir`: one lookup,
/// whatever the directory's depth.
///
/// # Errors
/// The `fstatat`'s error.
pub fn lstat_in(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<Stat> {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).map_err(io::Error::from)
}

/// Whether an `lstat` result is a symbolic link.
pub fn is_symlink(stat: &Stat) -> bool {
    FileType::from_raw_mode(stat.st_mode) == FileType::Symlink
}

/// Reads the regular file `name` of the directory `dir` (opened by the
/// caller), at most `limit` bytes, as [`read`] does with
/// [`Links::Refuse`]: `before` is its `lstat` when the caller has just
/// made one (sparing a second look), else it is made here; anything but a
/// regular file is never opened, and the file opened must be the one
/// examined. Each step looks up one name, not a whole path. `path` names
/// the file in errors.
///
/// # Errors
/// As [`read`]; also when the file opened is not the one examined.
pub fn read_in(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    path: &Path,
    before: Option<&Stat>,
    limit: u64,
) -> Result<Vec<u8>, Error> {
    let looked;
    let before = match before {
        Some(b) => b,
        None => {
            looked = lstat_in(dir, name).map_err(io_error(path))?;
            &looked
        }
    };
    regular(path, FileType::from_raw_mode(before.st_mode))?;
    let flags =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, name, flags, rustix::fs::Mode::empty())
        .map_err(|e| refused_link(path, io::Error::from(e)))?;
    let now = rustix::fs::fstat(&fd).map_err(|e| io_error(path)(io::Error::from(e)))?;
    same_file(
        path,
        FileType::from_raw_mode(now.st_mode),
        (now.st_dev, now.st_ino),
        (before.st_dev, before.st_ino),
    )?;
    read_open(path, File::from(fd), limit, Some(now.st_size))
}

/// [`describe`] for a file type from a raw mode.
pub fn describe_kind(kind: FileType) -> &'static str {
    match kind {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symbolic link",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Unknown => "an unknown kind of file",
    }
}

/// Reads an opened file, at most `limit` bytes. The first read goes to
/// a buffer on the stack, so that an attribute (a few bytes) is one read,
/// the read that says it ended, and one allocation of its size.
///
/// `size` is the file's size as `fstat` said after the open: a first
/// read shorter than asked for that has read at least that much (and
/// more than nothing) has read the whole file as it was then, and no read
/// more is made to hear it end (a regular file's read is short only at
/// its end). Sizes that do not tell take the read more: sysfs says 4096
/// for every attribute, procfs 0 (and its reads can be short before the
/// end).
fn read_open(path: &Path, mut file: File, limit: u64, size: Option<i64>) -> Result<Vec<u8>, Error> {
    let mut first = [0u8; 1024];
    let most = usize::try_from(limit.saturating_add(1)).map_or(first.len(), |l| l.min(first.len()));
    let n = loop {
        match file.read(first.get_mut(..most).unwrap_or_default()) {
            Ok(n) => break n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_error(path)(e)),
        }
    };
    let mut buf = first.get(..n).unwrap_or_default().to_vec();
    let whole =
        n < most && size.is_some_and(|s| u64::try_from(s).is_ok_and(|s| s > 0 && n as u64 >= s));
    if n > 0 && !whole {
        file.take(limit.saturating_add(1).saturating_sub(n as u64))
            .read_to_end(&mut buf)
            .map_err(io_error(path))?;
    }
    if buf.len() as u64 > limit {
        return Err(Error::TooLarge {
            path: path.to_path_buf(),
            limit,
        });
    }
    Ok(buf)
}

/// [`read`], but a missing file is `None`.
///
/// # Errors
/// As [`read`], for anything but "not found".
pub fn read_opt(path: &Path, limit: u64, links: Links) -> Result<Option<Vec<u8>>, Error> {
    match read(path, limit, links) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// [`read`] as UTF-8 text.
///
/// # Errors
/// As [`read`], and [`Error::NotUtf8`].
pub fn read_to_string(path: &Path, limit: u64, links: Links) -> Result<String, Error> {
    let bytes = read(path, limit, links)?;
    String::from_utf8(bytes).map_err(|_| Error::NotUtf8 {
        path: path.to_path_buf(),
    })
}

/// Opens (creating it when `create` and it is missing) one of cdigen's
/// own files for reading and writing, such as a lock file: never through
/// a symlink and never anything but a regular file, which is checked
/// before the open (a FIFO or device node is not opened at all) and
/// again after it.
///
/// # Errors
/// [`Error`] naming the path.
pub fn open_owned(path: &Path, create: bool) -> Result<File, Error> {
    match open_owned_once(path, create) {
        // Another process created it between the check and the open.
        Err(Error::Io { source, .. }) if source.kind() == io::ErrorKind::AlreadyExists => {
            open_owned_once(path, false)
        }
        other => other,
    }
}

fn open_owned_once(path: &Path, create: bool) -> Result<File, Error> {
    let before = match regular_meta(path, Links::Refuse) {
        Ok(m) => Some(m),
        Err(e) if e.is_not_found() && create => None,
        Err(e) => return Err(e),
    };
    let mut options = OpenOptions::new();
    options
        .read(true)
        .write(true)
        .mode(0o644)
        .custom_flags(open_flags(Links::Refuse));
    if before.is_none() {
        // Created by this open (O_EXCL): nothing to follow, nothing to race.
        options.create_new(true);
    }
    let file = options.open(path).map_err(|e| refused_link(path, e))?;
    match &before {
        Some(before) => {
            same_regular(path, &file, before)?;
        }
        None => {
            let meta = file.metadata().map_err(io_error(path))?;
            regular(path, kind_of(meta.file_type()))?;
        }
    }
    Ok(file)
}

#[cfg(test)]
mod tests;

/// Helpers for tests of code that must not block on a FIFO.
#[cfg(test)]
pub(crate) mod test_support {
    #![allow(clippy::unwrap_used)]

    use std::path::Path;
    use std::time::{Duration, Instant};

    /// Makes a FIFO at `path`.
    pub(crate) fn mkfifo(path: &Path) {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            path,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
    }

    /// Runs `f`, failing the test when it blocks (a FIFO opened).
    pub(crate) fn quick<T>(f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        assert!(start.elapsed() < Duration::from_secs(5), "blocked");
        out
    }
}

//! The safe writer: the only code that changes files in spec and
//! device-info directories.
//!
//! Guarantees:
//! - **Atomic**: content goes to a temp file in the target directory whose
//!   name ends in `.tmp` (runtimes watch the directory and load only
//!   `*.json`/`*.yaml`), is fsynced and made mode 0644, then renamed over
//!   the target; the directory is fsynced (once per batch of files, after
//!   the last rename). There is never a moment with no file or a partial
//!   one.
//! - **Idempotent**: unchanged bytes leave the file untouched (its mtime
//!   stays, so runtimes do not reload).
//! - **Ownership**: a state file in the directory (`.cdigen-state`, which
//!   runtimes ignore) records the SHA-256 of every file cdigen wrote. A file
//!   is cdigen's only while its content still matches; anything else (another
//!   tool's file, or one an admin edited) is never overwritten or deleted.
//!   A marker inside the spec would be an annotation, which raises
//!   `cdiVersion` to 0.6.0 and breaks older runtimes.
//! - **Serialized**: an advisory lock (`.cdigen.lock`) orders concurrent
//!   runs; a run that crashed leaves at most `.cdigen-*.tmp` files, which the
//!   next run removes under the lock. The hash of the file about to be
//!   written is recorded before the rename, so a crash between rename and
//!   state update does not orphan the file.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Name of the ownership state file inside a managed directory.
pub const STATE_FILE: &str = ".cdigen-state";
/// Name of the lock file inside a managed directory.
pub const LOCK_FILE: &str = ".cdigen.lock";
const TMP_PREFIX: &str = ".cdigen-";
const TMP_SUFFIX: &str = ".tmp";
/// Mode of every file written (runtimes, rootless podman included, read it).
pub const FILE_MODE: u32 = 0o644;
/// Mode of directories created.
pub const DIR_MODE: u32 = 0o755;
/// Largest state file read (a record is about 150 bytes: 100,000 files).
pub const MAX_STATE_BYTES: u64 = 16 << 20;
/// Largest existing output file read to compare it with new content.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// What the writer can fail on; every variant names the path.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A filesystem operation failed.
    #[error("{action} {}", path.display())]
    Io {
        /// What was being done (`cannot create`, `cannot rename to`, ...).
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The target exists and cdigen cannot prove it wrote it.
    #[error(
        "refusing to {action} {}: not written by cdigen, or changed since (remove it or move it away first)",
        path.display()
    )]
    NotOwned {
        /// `overwrite` or `remove`.
        action: &'static str,
        /// The file.
        path: PathBuf,
    },
    /// The target is a symlink, a directory or another non-regular file.
    #[error("refusing to replace {}: {what}, not a regular file", path.display())]
    NotRegular {
        /// The path.
        path: PathBuf,
        /// What is there (`a symbolic link`, `a FIFO`, ...).
        what: &'static str,
    },
    /// A file cdigen reads (its state, an output file to compare) is not
    /// a regular file, too large, or unreadable.
    #[error(transparent)]
    Read(#[from] crate::fsio::Error),
    /// A file name that is not a plain name.
    #[error(
        "invalid file name {name:?}: expected a plain name of A-Z a-z 0-9 . _ - : not starting with '.'"
    )]
    BadName {
        /// The name.
        name: String,
    },
    /// Another process holds a server's lock ([`lock_instance`]).
    #[error(
        "{} is held by {holder}: another instance serves this directory (stop it, or give each instance its own directory)",
        path.display()
    )]
    Held {
        /// The lock file.
        path: PathBuf,
        /// Who holds it: `PID <n>`, or `another process` when its PID is
        /// not known.
        holder: String,
    },
    /// Another process held a directory's lock for longer than the lock
    /// timeout ([`set_lock_timeout`]).
    #[error(
        "timed out after {} waiting for the lock {}, held by {holder} (another cdigen run writing {}; --lock-timeout)",
        humantime::format_duration(*waited),
        path.display(),
        path.parent().unwrap_or(Path::new("/")).display()
    )]
    LockTimeout {
        /// The lock file.
        path: PathBuf,
        /// Who holds it ([`Holder`]).
        holder: Holder,
        /// How long this process waited (the timeout).
        waited: std::time::Duration,
    },
    /// The state file exists but cannot be understood.
    #[error("{}: corrupt state file (remove it to start over; cdigen then owns no file in this directory): {reason}", path.display())]
    BadState {
        /// The state file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

fn io_err<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> Error + 'a {
    move |source| Error::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The file did not exist.
    Created,
    /// The file existed with other content.
    Updated,
    /// The file already had these bytes; nothing was touched.
    Unchanged,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct State {
    version: u32,
    files: BTreeMap<String, Record>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Record {
    /// Which generator wrote it (stale files are pruned per owner).
    owner: String,
    /// SHA-256 of contents cdigen wrote (two while a write is in flight).
    sha256: Vec<String>,
}

fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// A directory cdigen manages, locked for the lifetime of this value.
#[derive(Debug)]
pub struct ManagedDir {
    dir: PathBuf,
    state: State,
    _lock: DirLock,
}

impl ManagedDir {
    /// Opens (creating with mode 0755 if needed) and locks a directory,
    /// removes temp files a crashed run left, and loads the state file.
    ///
    /// # Errors
    /// [`Error`] when the directory cannot be created, locked or read.
    pub fn open(dir: &Path) -> Result<Self, Error> {
        Self::open_locked(dir, lock_dir(dir)?)
    }

    /// [`ManagedDir::open`] for a long-running process: waits for the lock
    /// as [`lock_dir_until`] does, giving up when `stop` returns true.
    ///
    /// # Errors
    /// As [`ManagedDir::open`], and when `stop` ended the wait.
    pub fn open_until(dir: &Path, stop: &dyn Fn() -> bool) -> Result<Self, Error> {
        Self::open_locked(dir, lock_dir_until(dir, stop)?)
    }

    fn open_locked(dir: &Path, lock: DirLock) -> Result<Self, Error> {
        // Under the lock: no other cdigen is writing one now.
        remove_temp_files(dir)?;
        let me = ManagedDir {
            dir: dir.to_path_buf(),
            state: State::default(),
            _lock: lock,
        };
        let state = me.load_state()?;
        Ok(ManagedDir { state, ..me })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    fn load_state(&self) -> Result<State, Error> {
        load_state(&self.dir)
    }

    fn save_state(&self) -> Result<(), Error> {
        let mut bytes = serde_json::to_vec_pretty(&self.state).map_err(|e| Error::BadState {
            path: self.dir.join(STATE_FILE),
            reason: e.to_string(),
        })?;
        bytes.push(b'\n');
        replace(&self.dir, STATE_FILE, &bytes)
    }

    /// Whether cdigen wrote `name` and it is still a regular file with
    /// the content written.
    pub fn owns(&self, name: &str) -> bool {
        self.state.files.contains_key(name)
            && matches!(
                on_disk(&self.dir.join(name)),
                Ok(OnDisk::Bytes(b)) if owns(&self.state, name, &b)
            )
    }

    /// Files recorded for `owner`, sorted.
    pub fn owned_by(&self, owner: &str) -> Vec<String> {
        owned_by(&self.state, owner)
    }

    /// Writes `bytes` to `name` atomically, on behalf of `owner` (the
    /// generator that produced it).
    ///
    /// # Errors
    /// [`Error::NotOwned`] when `name` exists with other content that cdigen
    /// did not write; [`Error::NotRegular`] for a symlink or directory;
    /// [`Error::Io`] on filesystem failures.
    pub fn write(&mut self, name: &str, bytes: &[u8], owner: &str) -> Result<Outcome, Error> {
        let items = [(name.to_string(), bytes.to_vec())];
        match self.write_batch(&items, owner).into_iter().next() {
            Some((_, result)) => result,
            None => Ok(Outcome::Unchanged),
        }
    }

    /// Writes several files for `owner`, each as [`ManagedDir::write`] does,
    /// but saving the state file twice in all instead of twice per file
    /// (the intents of every file before the first rename, the final
    /// hashes after the last). Returns each file's result, in order.
    pub fn write_batch(
        &mut self,
        items: &[(String, Vec<u8>)],
        owner: &str,
    ) -> Vec<(String, Result<Outcome, Error>)> {
        let mut results: Vec<(String, Result<Outcome, Error>)> = Vec::new();
        // (index into results, bytes, new hash) of the files to write.
        let mut pending: Vec<(usize, &[u8], String)> = Vec::new();
        let mut dirty = false;
        for (name, bytes) in items {
            match self.prepare(name, bytes, owner) {
                Ok(Prepared::Unchanged { record_changed }) => {
                    dirty |= record_changed;
                    results.push((name.clone(), Ok(Outcome::Unchanged)));
                }
                Ok(Prepared::Write { outcome, new_hash }) => {
                    dirty = true;
                    results.push((name.clone(), Ok(outcome)));
                    pending.push((results.len() - 1, bytes.as_slice(), new_hash));
                }
                Err(e) => results.push((name.clone(), Err(e))),
            }
        }
        // Record the intents first: after a crash either hash proves
        // ownership.
        if dirty && let Err(e) = self.save_state() {
            let why = e.to_string();
            for (i, _, _) in &pending {
                if let Some((name, r)) = results.get_mut(*i) {
                    *r = Err(Error::Io {
                        action: "cannot record the intent to write",
                        path: self.dir.join(name.as_str()),
                        source: io::Error::other(why.clone()),
                    });
                }
            }
            return results;
        }
        // Each file is synced before its rename; the directory, with every
        // rename in it, once after the last.
        let mut renamed: Vec<(usize, &String)> = Vec::new();
        for (i, bytes, new_hash) in &pending {
            let Some((name, r)) = results.get_mut(*i) else {
                continue;
            };
            match replace_unsynced(&self.dir, name, bytes) {
                Ok(()) => renamed.push((*i, new_hash)),
                Err(e) => *r = Err(e),
            }
        }
        if !renamed.is_empty()
            && let Err(e) = sync_dir(&self.dir)
        {
            // Not known to be durable: not recorded as written (the saved
            // intents still prove the new content ours).
            let why =
                std::error::Error::source(&e).map_or_else(|| e.to_string(), ToString::to_string);
            for (i, _) in renamed.drain(..) {
                if let Some((_, r)) = results.get_mut(i) {
                    *r = Err(Error::Io {
                        action: "cannot sync directory",
                        path: self.dir.clone(),
                        source: io::Error::other(why.clone()),
                    });
                }
            }
        }
        for (i, new_hash) in renamed {
            if let Some((name, _)) = results.get(i)
                && let Some(rec) = self.state.files.get_mut(name.as_str())
            {
                rec.sha256 = vec![new_hash.clone()];
            }
        }
        if !pending.is_empty()
            && let Err(e) = self.save_state()
        {
            // The files are written and still provably ours (the saved
            // intents list their hashes); only the tidy-up failed.
            tracing::warn!("{e}");
        }
        results
    }

    /// Decides what writing `bytes` to `name` means, refusing files cdigen
    /// does not own, and records the intent in memory.
    fn prepare(&mut self, name: &str, bytes: &[u8], owner: &str) -> Result<Prepared, Error> {
        let (outcome, existing) = decide(&self.state, &self.dir, name, bytes)?;
        let new_hash = sha256_hex(bytes);
        if outcome == Outcome::Unchanged {
            // Same bytes: do not touch. Keep the record current if ours
            // (the bytes on disk are ones cdigen wrote; a file edited
            // since is not adopted back, like a foreign one).
            let mut record_changed = false;
            if let Some(rec) = self.state.files.get_mut(name)
                && rec.sha256.contains(&new_hash)
                && (rec.sha256 != [new_hash.clone()] || rec.owner != owner)
            {
                rec.sha256 = vec![new_hash];
                rec.owner = owner.to_string();
                record_changed = true;
            }
            return Ok(Prepared::Unchanged { record_changed });
        }
        let mut hashes: Vec<String> = existing.iter().map(|b| sha256_hex(b)).collect();
        hashes.push(new_hash.clone());
        self.state.files.insert(
            name.to_string(),
            Record {
                owner: owner.to_string(),
                sha256: hashes,
            },
        );
        Ok(Prepared::Write { outcome, new_hash })
    }

    /// Removes the files recorded for `owner` that are not in `keep`, when
    /// their content still proves cdigen wrote them, as
    /// [`Ownership::stale`] decides. Returns the removed names and those
    /// left alone (changed by someone else, or no longer a regular file:
    /// cdigen forgets them and never touches them again).
    ///
    /// # Errors
    /// [`Error::Io`] on filesystem failures; [`Error::Read`] when a file
    /// cannot be examined (nothing is removed then).
    pub fn remove_stale(&mut self, owner: &str, keep: &BTreeSet<String>) -> Result<Pruned, Error> {
        let decisions = stale_files(&self.state, &self.dir, owner, keep)?;
        let mut pruned = Pruned::default();
        for (name, decision) in &decisions {
            let path = self.dir.join(name);
            match decision {
                Stale::Remove => {
                    fs::remove_file(&path).map_err(io_err("cannot remove", &path))?;
                    pruned.removed.push(name.clone());
                }
                Stale::LeftAlone(_) => pruned.left_alone.push(name.clone()),
                Stale::Gone => {}
            }
        }
        if decisions.is_empty() {
            return Ok(pruned);
        }
        if !pruned.removed.is_empty() {
            sync_dir(&self.dir)?;
        }
        for (name, _) in &decisions {
            self.state.files.remove(name);
        }
        self.save_state()?;
        Ok(pruned)
    }
}

/// What `generate` does with a file it recorded for a generator that no
/// longer writes it (see [`Ownership::stale`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stale {
    /// Still the content cdigen wrote: removed.
    Remove,
    /// Changed since, or no longer a regular file: left alone and
    /// forgotten.
    LeftAlone(LeftAlone),
    /// Already gone: forgotten.
    Gone,
}

/// Why a stale file is left alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeftAlone {
    /// Its content is not what cdigen wrote.
    Changed,
    /// It is a symlink, a directory or another non-regular file (what).
    NotRegular(&'static str),
}

/// The files of `state` recorded for `owner` but not in `keep`, sorted,
/// with what becomes of each.
fn stale_files(
    state: &State,
    dir: &Path,
    owner: &str,
    keep: &BTreeSet<String>,
) -> Result<Vec<(String, Stale)>, Error> {
    let mut out = Vec::new();
    for name in owned_by(state, owner) {
        if keep.contains(&name) {
            continue;
        }
        let decision = match on_disk(&dir.join(&name))? {
            OnDisk::Absent => Stale::Gone,
            OnDisk::NotRegular(what) => Stale::LeftAlone(LeftAlone::NotRegular(what)),
            OnDisk::Bytes(b) if owns(state, &name, &b) => Stale::Remove,
            OnDisk::Bytes(_) => Stale::LeftAlone(LeftAlone::Changed),
        };
        out.push((name, decision));
    }
    Ok(out)
}

/// Whether `bytes` are content cdigen recorded writing to `name`.
fn owns(state: &State, name: &str, bytes: &[u8]) -> bool {
    state
        .files
        .get(name)
        .is_some_and(|r| r.sha256.contains(&sha256_hex(bytes)))
}

/// What writing `bytes` to `name` in `dir` does, given what is there: the
/// one decision of [`ManagedDir::write`] and [`Ownership::would_write`].
/// Returns the outcome and the bytes on disk.
fn decide(
    state: &State,
    dir: &Path,
    name: &str,
    bytes: &[u8],
) -> Result<(Outcome, Option<Vec<u8>>), Error> {
    check_name(name)?;
    let target = dir.join(name);
    match on_disk(&target)? {
        OnDisk::Absent => Ok((Outcome::Created, None)),
        OnDisk::NotRegular(what) => Err(Error::NotRegular { path: target, what }),
        OnDisk::Bytes(old) => {
            let outcome = if old == bytes {
                Outcome::Unchanged
            } else if owns(state, name, &old) {
                Outcome::Updated
            } else {
                return Err(Error::NotOwned {
                    action: "overwrite",
                    path: target,
                });
            };
            Ok((outcome, Some(old)))
        }
    }
}

/// What is at a path in a managed directory, examined without following
/// a symlink or opening anything but a regular file.
#[derive(Debug)]
pub enum OnDisk {
    /// Nothing.
    Absent,
    /// Not a regular file (what it is).
    NotRegular(&'static str),
    /// A regular file with this content.
    Bytes(Vec<u8>),
}

/// Examines `path` (see [`OnDisk`]); files larger than
/// [`MAX_FILE_BYTES`] are an error.
///
/// # Errors
/// [`Error::Read`] when the file cannot be examined or read.
pub fn on_disk(path: &Path) -> Result<OnDisk, Error> {
    match crate::fsio::read(path, MAX_FILE_BYTES, crate::fsio::Links::Refuse) {
        Ok(b) => Ok(OnDisk::Bytes(b)),
        Err(e) if e.is_not_found() => Ok(OnDisk::Absent),
        Err(crate::fsio::Error::NotRegular { what, .. }) => Ok(OnDisk::NotRegular(what)),
        Err(e) => Err(e.into()),
    }
}

/// What [`ManagedDir::prepare`] decided.
enum Prepared {
    /// Same bytes on disk; the record may have been refreshed.
    Unchanged {
        /// Whether the in-memory state changed.
        record_changed: bool,
    },
    /// The file must be written; its intent is recorded in memory.
    Write {
        /// Created or updated.
        outcome: Outcome,
        /// Hash of the new content.
        new_hash: String,
    },
}

/// The result of [`ManagedDir::remove_stale`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Pruned {
    /// Files removed.
    pub removed: Vec<String>,
    /// Files cdigen once wrote but that were changed since; not touched.
    pub left_alone: Vec<String>,
}

/// Reads `dir`'s state file; an absent one is an empty state.
fn load_state(dir: &Path) -> Result<State, Error> {
    let path = dir.join(STATE_FILE);
    let bytes = match crate::fsio::read(&path, MAX_STATE_BYTES, crate::fsio::Links::Refuse) {
        Ok(b) => b,
        Err(e) if e.is_not_found() => {
            return Ok(State {
                version: 1,
                files: BTreeMap::new(),
            });
        }
        Err(e) => return Err(e.into()),
    };
    let state: State = serde_json::from_slice(&bytes).map_err(|e| Error::BadState {
        path: path.clone(),
        reason: e.to_string(),
    })?;
    if state.version != 1 {
        return Err(Error::BadState {
            path,
            reason: format!("unknown version {}", state.version),
        });
    }
    // Names are data, not paths: only names the writer itself accepts
    // (no `/`, no `..`, no hidden file) can be joined to the directory.
    if let Some(bad) = state.files.keys().find(|n| check_name(n).is_err()) {
        return Err(Error::BadState {
            path,
            reason: format!(
                "entry {} is not a plain file name cdigen writes; not touching any file it names",
                crate::text::quoted(bad, 64)
            ),
        });
    }
    Ok(state)
}

/// A read-only view of what cdigen owns in a directory, for `check`: it
/// reads the state file without taking the lock, and never creates or
/// changes anything (not even the directory). A write in flight is no
/// problem: its intent lists both hashes, so either content proves
/// ownership, as it does for the writer.
#[derive(Debug, Default)]
pub struct Ownership {
    state: State,
}

impl Ownership {
    /// Reads the state file of `dir`; a missing directory or state file
    /// means cdigen owns nothing there.
    ///
    /// # Errors
    /// [`Error::Io`] when the state file cannot be read,
    /// [`Error::BadState`] when it cannot be understood.
    pub fn read(dir: &Path) -> Result<Self, Error> {
        Ok(Ownership {
            state: load_state(dir)?,
        })
    }

    /// The generator that wrote `name`, when the state records it (its
    /// content may have changed since: see [`Ownership::owns`]).
    pub fn owner(&self, name: &str) -> Option<&str> {
        self.state.files.get(name).map(|r| r.owner.as_str())
    }

    /// Whether `bytes` are content cdigen wrote to `name`: only then would
    /// `generate` overwrite or remove it.
    pub fn owns(&self, name: &str, bytes: &[u8]) -> bool {
        owns(&self.state, name, bytes)
    }

    /// Files recorded for `owner`, sorted.
    pub fn owned_by(&self, owner: &str) -> Vec<String> {
        owned_by(&self.state, owner)
    }

    /// Whether the state records no file at all.
    pub fn is_empty(&self) -> bool {
        self.state.files.is_empty()
    }

    /// The files in `dir` recorded for `owner` but not in `keep`, and
    /// what [`ManagedDir::remove_stale`] would do with each: the one
    /// decision the real run, `--dry-run` and `check` share.
    ///
    /// # Errors
    /// [`Error::Read`] when a file cannot be examined.
    pub fn stale(
        &self,
        dir: &Path,
        owner: &str,
        keep: &BTreeSet<String>,
    ) -> Result<Vec<(String, Stale)>, Error> {
        stale_files(&self.state, dir, owner, keep)
    }

    /// What writing `bytes` to `name` in `dir` would do, as
    /// [`ManagedDir::write`] decides, without writing: the outcome, and
    /// the bytes on disk now.
    ///
    /// # Errors
    /// As [`ManagedDir::write`] would refuse: [`Error::NotOwned`],
    /// [`Error::NotRegular`], [`Error::BadName`], [`Error::Read`].
    pub fn would_write(
        &self,
        dir: &Path,
        name: &str,
        bytes: &[u8],
    ) -> Result<(Outcome, Option<Vec<u8>>), Error> {
        decide(&self.state, dir, name, bytes)
    }
}

/// Files of `state` recorded for `owner`, sorted.
fn owned_by(state: &State, owner: &str) -> Vec<String> {
    state
        .files
        .iter()
        .filter(|(_, r)| r.owner == owner)
        .map(|(n, _)| n.clone())
        .collect()
}

/// Creates `dir` and its missing parents with mode [`DIR_MODE`] whatever
/// the umask (runtimes, rootless podman included, must read them); the
/// mode of directories that already exist is left alone.
fn create_dirs(dir: &Path) -> Result<(), Error> {
    let missing: Vec<&Path> = dir
        .ancestors()
        .take_while(|p| !p.as_os_str().is_empty() && fs::symlink_metadata(p).is_err())
        .collect();
    fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)
        .map_err(io_err("cannot create directory", dir))?;
    for p in missing {
        fs::set_permissions(p, fs::Permissions::from_mode(DIR_MODE))
            .map_err(io_err("cannot set mode of", p))?;
    }
    Ok(())
}

fn sync_dir(dir: &Path) -> Result<(), Error> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err("cannot sync directory", dir))
}

fn check_name(name: &str) -> Result<(), Error> {
    let ok = !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':'));
    if ok {
        Ok(())
    } else {
        Err(Error::BadName {
            name: name.to_string(),
        })
    }
}

/// The advisory lock of a directory (its [`LOCK_FILE`]), held until
/// dropped: every cdigen process that changes files in the directory holds
/// it. The kernel releases it when the process dies, even by `kill -9`.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

/// Creates `dir` (mode [`DIR_MODE`]) if needed and takes its lock, waiting
/// while another process holds it, for at most the lock timeout
/// ([`set_lock_timeout`]; no limit unless set).
///
/// # Errors
/// [`Error::Io`] when the directory cannot be created or the lock file
/// opened or locked; [`Error::LockTimeout`] when the wait timed out.
pub fn lock_dir(dir: &Path) -> Result<DirLock, Error> {
    lock_dir_until(dir, &|| false)
}

/// How often a wait for a lock tries it again.
const LOCK_RETRY: std::time::Duration = std::time::Duration::from_millis(100);
/// How long a wait for a lock lasts before it says so (at the default
/// verbosity: a run that seems to hang is waiting).
pub const LOCK_WARN_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// The process's lock timeout in milliseconds (`u64::MAX`: none).
static LOCK_TIMEOUT_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(u64::MAX);

/// Sets how long this process waits for another process's lock on a
/// directory it writes (`--lock-timeout`) before it fails with
/// [`Error::LockTimeout`]; `None` (the default): as long as it takes.
pub fn set_lock_timeout(timeout: Option<std::time::Duration>) {
    let ms = timeout.map_or(u64::MAX, |t| {
        u64::try_from(t.as_millis()).unwrap_or(u64::MAX - 1)
    });
    LOCK_TIMEOUT_MS.store(ms, std::sync::atomic::Ordering::Relaxed);
}

fn lock_timeout() -> Option<std::time::Duration> {
    match LOCK_TIMEOUT_MS.load(std::sync::atomic::Ordering::Relaxed) {
        u64::MAX => None,
        ms => Some(std::time::Duration::from_millis(ms)),
    }
}

/// [`lock_dir`] for a long-running process that must stay stoppable: while
/// another process holds the lock it tries again every 100 ms instead of
/// blocking, and gives up as soon as `stop` returns true (`cdigen watch`
/// on SIGTERM, whose handler does not interrupt a blocking lock). A wait
/// of more than [`LOCK_WARN_AFTER`] is logged once as a warning naming the
/// holder.
///
/// # Errors
/// As [`lock_dir`]; when `stop` ended the wait, [`Error::Io`] with an
/// [`io::ErrorKind::Interrupted`] cause.
pub fn lock_dir_until(dir: &Path, stop: &dyn Fn() -> bool) -> Result<DirLock, Error> {
    let (file, lock_path) = open_lock_file(dir)?;
    wait_for_lock(dir, file, lock_path, stop, lock_timeout())
}

/// [`lock_dir_until`] on the lock file `dir/name` (which `dir` must hold)
/// rather than the directory's [`LOCK_FILE`]: a lock that serializes what
/// several processes do in `dir` while each may also take the
/// directory's own lock inside it (as the rolling update of a kubelet
/// plugin does with its checkpoint).
///
/// # Errors
/// As [`lock_dir_until`].
pub fn lock_file_until(dir: &Path, name: &str, stop: &dyn Fn() -> bool) -> Result<DirLock, Error> {
    let lock_path = dir.join(name);
    let file = crate::fsio::open_owned(&lock_path, true)?;
    wait_for_lock(dir, file, lock_path, stop, lock_timeout())
}

/// Who holds a lock, as the PID its holder wrote in the lock file says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holder(pub Option<u32>);

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(pid) => write!(f, "PID {pid}"),
            None => f.write_str("PID unknown"),
        }
    }
}

/// The PID in a lock file's first bytes: the decimal number cdigen
/// writes (1 to 10 digits, then at most a newline). The file is anyone's
/// input (an older cdigen writes nothing, a hostile one anything): what
/// is not such a number, or is 0 or over `u32`, is no PID.
pub fn parse_holder(bytes: &[u8]) -> Holder {
    let digits = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    if digits.is_empty() || digits.len() > 10 || !digits.iter().all(u8::is_ascii_digit) {
        return Holder(None);
    }
    let pid = std::str::from_utf8(digits)
        .ok()
        .and_then(|d| d.parse::<u32>().ok())
        .filter(|&p| p > 0);
    Holder(pid)
}

/// Reads the holder's PID from the lock file `file` (its first 16 bytes,
/// wherever the file's offset is).
fn read_holder(file: &File) -> Holder {
    use std::os::unix::fs::FileExt as _;
    let mut buf = [0u8; 16];
    match file.read_at(&mut buf, 0) {
        Ok(n) => parse_holder(buf.get(..n).unwrap_or_default()),
        Err(_) => Holder(None),
    }
}

/// Writes this process's PID into the lock file it now holds, for the
/// next process that waits ([`Holder`]), unless the file says so already
/// (a long-running process takes the lock again and again: the file is
/// then not touched); a failure only costs that note.
fn write_holder(mut file: &File, lock_path: &Path) {
    use std::io::Seek as _;
    if read_holder(file) == Holder(Some(std::process::id())) {
        return;
    }
    let written = file
        .set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| writeln!(file, "{}", std::process::id()));
    if let Err(e) = written {
        tracing::debug!(
            "cannot write this process's PID into {}: {e}",
            lock_path.display()
        );
    }
}

/// Takes the lock of `file` (at `lock_path`, in `dir`), trying again every
/// [`LOCK_RETRY`] until `stop`, or until `timeout` has passed; writes this
/// process's PID into it once taken.
fn wait_for_lock(
    dir: &Path,
    file: File,
    lock_path: PathBuf,
    stop: &dyn Fn() -> bool,
    timeout: Option<std::time::Duration>,
) -> Result<DirLock, Error> {
    let started = std::time::Instant::now();
    let mut waiting = false;
    let mut warned = false;
    loop {
        match file.try_lock() {
            Ok(()) => {
                write_holder(&file, &lock_path);
                return Ok(DirLock { _file: file });
            }
            Err(fs::TryLockError::WouldBlock) => {}
            Err(fs::TryLockError::Error(e)) => return Err(io_err("cannot lock", &lock_path)(e)),
        }
        if stop() {
            return Err(Error::Io {
                action: "stopped waiting to lock",
                path: lock_path,
                source: io::Error::new(io::ErrorKind::Interrupted, "asked to stop"),
            });
        }
        let waited = started.elapsed();
        if let Some(t) = timeout
            && waited >= t
        {
            let holder = read_holder(&file);
            return Err(Error::LockTimeout {
                path: lock_path,
                holder,
                waited: t,
            });
        }
        if !waiting {
            tracing::info!("waiting for another cdigen run on {}", dir.display());
            waiting = true;
        }
        if !warned && waited >= LOCK_WARN_AFTER {
            let until = match timeout {
                Some(t) => format!("for up to {}", humantime::format_duration(t)),
                None => "until it ends (--lock-timeout sets a limit)".to_string(),
            };
            tracing::warn!(
                "waiting for the lock {}, held by {} (another cdigen run writing {}): waiting {until}",
                lock_path.display(),
                read_holder(&file),
                dir.display(),
            );
            warned = true;
        }
        let left = timeout.map_or(LOCK_RETRY, |t| t.saturating_sub(waited).min(LOCK_RETRY));
        std::thread::sleep(left.max(std::time::Duration::from_millis(1)));
    }
}

/// Takes the lock `dir/name` (a file `dir` must hold) for the life of one
/// server in the directory it serves in, at once or not at all, and
/// writes this process's PID into it: a second server on the directory
/// fails at start instead of fighting the first over its sockets. The
/// kernel releases it when the process dies, even by `kill -9`.
///
/// # Errors
/// [`Error::Held`] naming the lock file and the holder's PID (read from
/// the file) when another process holds it; [`Error::Io`] or
/// [`Error::Read`] when it cannot be opened or locked.
pub fn lock_instance(dir: &Path, name: &str) -> Result<DirLock, Error> {
    let path = dir.join(name);
    let file = crate::fsio::open_owned(&path, true)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => {
            let pid = read_holder(&file).0;
            return Err(Error::Held {
                path,
                holder: pid.map_or_else(|| "another process".into(), |p| format!("PID {p}")),
            });
        }
        Err(fs::TryLockError::Error(e)) => return Err(io_err("cannot lock", &path)(e)),
    }
    {
        use std::io::Seek as _;
        let mut f = &file;
        f.set_len(0)
            .and_then(|()| f.rewind())
            .and_then(|()| writeln!(f, "{}", std::process::id()))
            .map_err(io_err("cannot write", &path))?;
    }
    Ok(DirLock { _file: file })
}

/// What the instance lock `dir/name` ([`lock_instance`]) says of its
/// server.
#[derive(Debug)]
pub enum Instance {
    /// No such file (or not a regular file): nothing can be told.
    Unknown,
    /// A live process holds it.
    Held,
    /// Free: its server is gone (the kernel released the lock when it
    /// died). Held now by the caller, so that no server of that name
    /// starts while the caller removes what the dead one left.
    Gone(DirLock),
}

/// Longest pod UID accepted (a Kubernetes UID is a 36-character UUID).
pub const MAX_POD_UID: usize = 64;

/// Checks a pod UID (`--pod-uid`), which names an instance's sockets and
/// lock: 1 to [`MAX_POD_UID`] ASCII letters, digits and `-`, not starting
/// with `-` (a UUID is), so never a path, never hidden.
///
/// # Errors
/// What is wrong with it, in words.
pub fn check_pod_uid(uid: &str) -> Result<(), String> {
    let ok = !uid.is_empty()
        && uid.len() <= MAX_POD_UID
        && !uid.starts_with('-')
        && uid.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "pod UID {}: not a UID (1 to {MAX_POD_UID} letters, digits and '-', as metadata.uid is)",
            crate::text::quoted(uid, 80)
        ))
    }
}

/// Looks at the instance lock `dir/name` of another server without
/// creating it, never through a symbolic link.
pub fn instance(dir: &Path, name: &str) -> Instance {
    let path = dir.join(name);
    if !fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_file()) {
        return Instance::Unknown;
    }
    let Ok(file) = crate::fsio::open_owned(&path, false) else {
        return Instance::Unknown;
    };
    match file.try_lock() {
        Ok(()) => Instance::Gone(DirLock { _file: file }),
        Err(fs::TryLockError::WouldBlock) => Instance::Held,
        Err(fs::TryLockError::Error(_)) => Instance::Unknown,
    }
}

/// Creates `dir` if needed and opens its lock file: (file, its path).
fn open_lock_file(dir: &Path) -> Result<(File, PathBuf), Error> {
    create_dirs(dir)?;
    let lock_path = dir.join(LOCK_FILE);
    // Never through a symlink (root would create a file anywhere) and
    // never a FIFO (the open would hang).
    let file = crate::fsio::open_owned(&lock_path, true)?;
    Ok((file, lock_path))
}

/// Takes `dir`'s lock (creating `dir`) and removes the temp files an
/// interrupted run left there ([`remove_temp_files`]): how a process
/// starts on a directory it writes with [`replace`] (the
/// [`ManagedDir`]s do it whenever they open). Returns the lock.
///
/// # Errors
/// As [`lock_dir`] and [`remove_temp_files`].
pub fn lock_and_tidy(dir: &Path) -> Result<DirLock, Error> {
    let lock = lock_dir(dir)?;
    remove_temp_files(dir)?;
    Ok(lock)
}

/// Whether `name` is one of the temp files [`replace`] makes
/// (`.cdigen-<random>.tmp`).
pub fn is_temp_name(name: &str) -> bool {
    name.starts_with(TMP_PREFIX) && name.ends_with(TMP_SUFFIX)
}

/// Removes the temp files (`.cdigen-*.tmp`) an interrupted run left in
/// `dir`; nothing else, and only regular files. Call it with the
/// directory's lock held.
///
/// # Errors
/// [`Error::Io`] when the directory cannot be read or a file removed.
pub fn remove_temp_files(dir: &Path) -> Result<(), Error> {
    let entries = fs::read_dir(dir).map_err(io_err("cannot read directory", dir))?;
    for entry in entries {
        let entry = entry.map_err(io_err("cannot read directory", dir))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        if is_temp_name(name) {
            let p = entry.path();
            // Only regular files are ours: another tool's directory or
            // link of that name is left alone (unlinking a link is safe,
            // but it is not ours to remove either).
            let ft = entry.file_type().map_err(io_err("cannot stat", &p))?;
            if !ft.is_file() {
                tracing::warn!(
                    "{}: {}, not a temp file cdigen left: leaving it alone",
                    p.display(),
                    crate::fsio::describe(ft)
                );
                continue;
            }
            tracing::info!("removing {} left by an interrupted run", p.display());
            fs::remove_file(&p).map_err(io_err("cannot remove", &p))?;
        }
    }
    Ok(())
}

/// Atomically replaces `dir/name` with `bytes`: temp file in `dir`, mode
/// [`FILE_MODE`], fsync, rename, fsync the directory. A reader sees the
/// old content or the new, never a part. No ownership check: callers
/// decide whether the file is theirs to replace.
///
/// # Errors
/// [`Error::Io`] naming the file that could not be written.
pub fn replace(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), Error> {
    replace_unsynced(dir, name, bytes)?;
    sync_dir(dir)
}

/// [`replace`] without the directory's fsync: for a batch, which syncs
/// the directory once after its last rename.
fn replace_unsynced(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), Error> {
    let target = dir.join(name);
    let mut tmp = tempfile::Builder::new()
        .prefix(TMP_PREFIX)
        .suffix(TMP_SUFFIX)
        .tempfile_in(dir)
        .map_err(io_err("cannot create a temp file in", dir))?;
    let tmp_path = tmp.path().to_path_buf();
    tmp.as_file()
        .set_permissions(fs::Permissions::from_mode(FILE_MODE))
        .map_err(io_err("cannot set mode of", &tmp_path))?;
    tmp.write_all(bytes)
        .map_err(io_err("cannot write", &tmp_path))?;
    tmp.as_file()
        .sync_all()
        .map_err(io_err("cannot sync", &tmp_path))?;
    tmp.persist(&target)
        .map_err(|e| io_err("cannot rename to", &target)(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests;

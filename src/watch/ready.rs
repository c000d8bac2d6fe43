//! The `--ready-file` (for a Kubernetes exec probe such as `test -e FILE`),
//! written once the first full generation completed. systemd's `READY=1`
//! is sent at the same moment by the loop, whether the file could be
//! written or not.
//!
//! The ready file is written atomically (a temp file renamed over it) with
//! a marker line naming this process, and removed on exit only while it
//! still holds that line. A file already at that path at start is replaced
//! only when it carries the marker (left by an earlier run that was
//! killed); anything else there is refused, never deleted.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// First bytes of every ready file.
const MARKER: &str = "cdigen watch ready";

/// The ready file this process wrote.
#[derive(Debug)]
pub(super) struct ReadyFile {
    path: PathBuf,
    content: String,
}

/// Reads a ready file: never through a symlink or from a FIFO, at most
/// 4 KiB (ours are one short line).
fn read_small(path: &Path) -> Result<Vec<u8>, crate::fsio::Error> {
    crate::fsio::read(path, 4096, crate::fsio::Links::Refuse)
}

/// The directory `path` is in.
fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Checks at start that `file`'s directory exists and that `file` is free
/// or a stale ready file, and removes a stale one (this run is not ready
/// yet).
pub(super) fn check_unused(file: Option<&Path>) -> anyhow::Result<()> {
    let Some(path) = file else { return Ok(()) };
    let dir = parent(path);
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => anyhow::bail!(
            "--ready-file {}: {} is not a directory",
            path.display(),
            dir.display()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => anyhow::bail!(
            "--ready-file {}: the directory {} does not exist",
            path.display(),
            dir.display()
        ),
        Err(e) => Err(e).with_context(|| format!("--ready-file {}", path.display()))?,
    }
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("--ready-file {}", path.display())),
        Ok(m) => {
            let ours =
                m.is_file() && read_small(path).is_ok_and(|b| b.starts_with(MARKER.as_bytes()));
            if !ours {
                anyhow::bail!(
                    "refusing to use --ready-file {}: it exists and was not written by cdigen watch",
                    path.display()
                );
            }
            std::fs::remove_file(path)
                .with_context(|| format!("cannot remove the stale {}", path.display()))
        }
    }
}

impl ReadyFile {
    /// Writes the ready file at `path`.
    pub(super) fn write(path: &Path) -> anyhow::Result<ReadyFile> {
        let dir = parent(path);
        let content = format!("{MARKER}: pid {}\n", std::process::id());
        let mut tmp = tempfile::Builder::new()
            .prefix(".cdigen-ready-")
            .tempfile_in(dir)
            .with_context(|| format!("cannot create the ready file in {}", dir.display()))?;
        tmp.write_all(content.as_bytes())
            .and_then(|()| tmp.as_file().sync_all())
            .with_context(|| format!("cannot write {}", tmp.path().display()))?;
        tmp.persist(path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        tracing::debug!("ready: {}", path.display());
        Ok(ReadyFile {
            path: path.to_path_buf(),
            content,
        })
    }

    /// Removes the ready file (on exit), unless something else replaced it
    /// since.
    pub(super) fn withdraw(self) {
        let path = &self.path;
        match read_small(path) {
            Ok(bytes) if bytes == self.content.as_bytes() => {}
            Ok(_) => {
                tracing::warn!(
                    "not removing {}: it was replaced since this watch wrote it",
                    path.display()
                );
                return;
            }
            Err(e) if e.is_not_found() => return,
            Err(e) => {
                tracing::warn!("{e}; not removing it");
                return;
            }
        }
        if let Err(e) = std::fs::remove_file(path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!("cannot remove {}: {e}", path.display());
        }
    }
}

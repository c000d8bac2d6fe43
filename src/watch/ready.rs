//! Readiness: the `--ready-file` (for a Kubernetes exec probe such as
//! `test -e FILE`) and systemd's `READY=1` (for `Type=notify` units), given
//! once the first full generation succeeded.
//!
//! The ready file is written atomically (a temp file renamed over it) with
//! a marker line, and removed on exit. A file already at that path is
//! replaced only when it carries the marker (left by an earlier run that
//! was killed); anything else there is refused, never deleted.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// First bytes of every ready file.
const MARKER: &str = "cdigen watch ready";

/// Readiness given: the ready file written, if any.
#[derive(Debug)]
pub(super) struct Ready {
    file: Option<PathBuf>,
}

/// Checks at start that `file` is free or a stale ready file, and removes
/// a stale one (this run is not ready yet).
pub(super) fn check_unused(file: Option<&Path>) -> anyhow::Result<()> {
    let Some(path) = file else { return Ok(()) };
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("--ready-file {}", path.display())),
        Ok(m) => {
            let ours =
                m.is_file() && std::fs::read(path).is_ok_and(|b| b.starts_with(MARKER.as_bytes()));
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

impl Ready {
    /// Writes the ready file (if any) and tells systemd.
    pub(super) fn announce(file: Option<&Path>) -> anyhow::Result<Ready> {
        if let Some(path) = file {
            let dir = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            let mut tmp = tempfile::Builder::new()
                .prefix(".cdigen-ready-")
                .tempfile_in(dir)
                .with_context(|| format!("cannot create the ready file in {}", dir.display()))?;
            writeln!(tmp, "{MARKER}: pid {}", std::process::id())
                .and_then(|()| tmp.as_file().sync_all())
                .with_context(|| format!("cannot write {}", tmp.path().display()))?;
            tmp.persist(path)
                .with_context(|| format!("cannot create {}", path.display()))?;
            tracing::debug!("ready: {}", path.display());
        }
        let _ = sd_notify::notify(&[sd_notify::NotifyState::Ready]);
        Ok(Ready {
            file: file.map(Path::to_path_buf),
        })
    }

    /// Removes the ready file (on exit).
    pub(super) fn withdraw(self) {
        if let Some(path) = &self.file
            && let Err(e) = std::fs::remove_file(path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!("cannot remove {}: {e}", path.display());
        }
    }
}

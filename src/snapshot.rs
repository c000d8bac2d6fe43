//! `cdigen snapshot`: copies what discovery reads from a host into a
//! fixture tree, so a machine can be attached to a bug report and replayed.
//!
//! The copy is exactly the [`Record`] of a recording [`crate::root::HostRoot`]
//! after a discovery run: the files read (with their content), the symlinks
//! met (with their raw targets), the directories listed, and the `/dev`
//! entries looked up (as a `dev.manifest`, since git cannot store device
//! nodes). Nothing else of the host is copied.

use std::fs;
use std::path::{Component, Path, PathBuf};

use serde::Serialize;

use crate::root::{DEV_MANIFEST, Record, format_manifest};

/// Why a snapshot could not be written.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The output directory exists and is not empty.
    #[error("{}: exists and is not empty; choose a new directory", path.display())]
    NotEmpty {
        /// The directory.
        path: PathBuf,
    },
    /// Writing failed.
    #[error("cannot write {}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// What was written.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Summary {
    /// Files copied.
    pub files: usize,
    /// Symlinks recreated.
    pub links: usize,
    /// `/dev` entries described in the manifest.
    pub dev_entries: usize,
}

/// The on-disk location of a host path under `out`.
fn under(out: &Path, host: &Path) -> PathBuf {
    let mut p = out.to_path_buf();
    for c in host.components() {
        if let Component::Normal(n) = c {
            p.push(n);
        }
    }
    p
}

/// Writes `record` as a fixture tree under `out` (created; must be new or
/// empty).
///
/// # Errors
/// [`Error`] naming the path that could not be written.
pub fn write(record: &Record, out: &Path) -> Result<Summary, Error> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    if let Ok(mut entries) = fs::read_dir(out)
        && entries.next().is_some()
    {
        return Err(Error::NotEmpty {
            path: out.to_path_buf(),
        });
    }
    fs::create_dir_all(out).map_err(io(out))?;
    let mut summary = Summary::default();
    for dir in &record.dirs {
        let p = under(out, dir);
        fs::create_dir_all(&p).map_err(io(&p))?;
    }
    for host in record
        .listed_files
        .difference(&record.files.keys().cloned().collect())
    {
        let p = under(out, host);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).map_err(io(parent))?;
        }
        fs::write(&p, b"").map_err(io(&p))?;
    }
    for (host, content) in &record.files {
        let p = under(out, host);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).map_err(io(parent))?;
        }
        fs::write(&p, content).map_err(io(&p))?;
        summary.files += 1;
    }
    for (host, target) in &record.links {
        let p = under(out, host);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).map_err(io(parent))?;
        }
        match fs::symlink_metadata(&p) {
            Ok(_) => continue, // already there (a dir of the same name would be a bug upstream)
            Err(_) => std::os::unix::fs::symlink(target, &p).map_err(io(&p))?,
        }
        summary.links += 1;
    }
    // A replay must look like a host (`HostRoot::check_host`), even one
    // where discovery listed none of these.
    for host in crate::root::HOST_DIRS {
        let p = under(out, Path::new(host));
        fs::create_dir_all(&p).map_err(io(&p))?;
    }
    let present: std::collections::BTreeMap<PathBuf, crate::root::DevEntry> = record
        .dev
        .iter()
        .filter_map(|(p, e)| e.clone().map(|e| (p.clone(), e)))
        // Regular files and the like are not device nodes: runtimes refuse
        // them, and the manifest has no way to say it.
        .filter(|(_, e)| e.kind != crate::root::DevKind::Other)
        .collect();
    summary.dev_entries = present.len();
    let manifest = out.join(DEV_MANIFEST);
    fs::write(&manifest, format_manifest(&present)).map_err(io(&manifest))?;
    Ok(summary)
}

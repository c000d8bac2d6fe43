//! Device-info files (NPWG) for allocated network devices, as the SR-IOV
//! device plugin writes them: `<resource>-<ID>-device.json` in the
//! device-info directory when a device is allocated, removed when no live
//! allocation needs it any more.
//!
//! Files go through the same writer as `generate`'s (atomic, owned by the
//! generator, never overwriting a file cdigen did not write). Under the
//! same lock, the devices handed out are recorded ([`super::held`]) before
//! their files are written, and a prune decides from that record (brought
//! up to date by the caller) which files go.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use super::held::{self, Held};
use super::inventory::{Entry, Inventory, Resource};
use crate::devinfo;
use crate::write::ManagedDir;

/// Longest wait for another cdigen's lock on the directory.
const LOCK_WAIT: Duration = Duration::from_secs(10);

/// The device-info file of `e` (name, bytes), for a network device whose
/// description is valid.
pub fn file_for(resource: &Resource, e: &Entry) -> Option<(String, Vec<u8>)> {
    if e.device.net.is_none() && e.device.vdpa.is_none() {
        return None;
    }
    let info = crate::generate::device_info(&e.device)?;
    if !devinfo::validate(&info).is_empty() {
        return None;
    }
    let name = devinfo::checked_file_name(&resource.def.name, &e.id).ok()?;
    Some((name, devinfo::to_bytes(&info)))
}

fn open(dir: &Path) -> Result<ManagedDir, String> {
    let deadline = Instant::now() + LOCK_WAIT;
    ManagedDir::open_until(dir, &|| Instant::now() >= deadline)
        .map_err(|e| format!("{:#}", anyhow::Error::from(e)))
}

/// Writes the device-info files of `entries` into `dir`.
///
/// # Errors
/// The first file or the directory that failed, named.
pub fn write(dir: &Path, resource: &Resource, entries: &[&Entry]) -> Result<(), String> {
    let files: Vec<(String, Vec<u8>)> = entries
        .iter()
        .filter_map(|e| file_for(resource, e))
        .collect();
    if files.is_empty() {
        return Ok(());
    }
    let mut managed = open(dir)?;
    // On disk before the files: a restart that finds a file finds it held.
    let mut recorded = match held::load(dir) {
        Ok(h) => h.unwrap_or_default(),
        Err(e) => {
            tracing::warn!("{e}; replacing it");
            Held::new()
        }
    };
    let now = Instant::now();
    for e in entries {
        recorded.insert(
            (resource.def.name.clone(), e.id.clone()),
            held::Entry {
                since: now,
                listed: false,
            },
        );
    }
    held::save(dir, &recorded)?;
    for (_, result) in managed.write_batch(&files, &resource.def.generator) {
        result.map_err(|e| format!("{:#}", anyhow::Error::from(e)))?;
    }
    Ok(())
}

/// Removes the device-info files of each resource's generator whose
/// device is not held. Under the directory's lock, `decide` gets the
/// record of held devices on disk (`None`: unreadable, after a warning)
/// and returns the devices held now ((resource, ID)), having saved what
/// it decided; when it fails, nothing is removed. Returns what failed.
pub fn prune(
    dir: &Path,
    inventory: &Inventory,
    decide: impl FnOnce(Option<Held>) -> Result<BTreeSet<(String, String)>, String>,
) -> Vec<String> {
    if !dir.exists() {
        return Vec::new();
    }
    let mut managed = match open(dir) {
        Ok(m) => m,
        Err(e) => return vec![e],
    };
    let recorded = match held::load(dir) {
        Ok(h) => Some(h.unwrap_or_default()),
        Err(e) => {
            tracing::warn!("{e}; rewriting it from the allocations known");
            None
        }
    };
    let live = match decide(recorded) {
        Ok(live) => live,
        Err(e) => return vec![format!("{e}; not removing any device-info file")],
    };
    let mut errors = Vec::new();
    for r in inventory.resources.values() {
        let keep: BTreeSet<String> = r
            .devices
            .values()
            .filter(|e| live.contains(&(r.def.name.clone(), e.id.clone())))
            .filter_map(|e| devinfo::checked_file_name(&r.def.name, &e.id).ok())
            .collect();
        if let Err(e) = managed.remove_stale(&r.def.generator, &keep) {
            errors.push(format!("{:#}", anyhow::Error::from(e)));
        }
    }
    errors
}

/// Whether `dir` holds device-info files cdigen wrote (a missing or
/// unreadable directory: false; an unreadable state file: true, as it may).
pub fn has_files(dir: &Path) -> bool {
    crate::write::Ownership::read(dir).map_or_else(|_| dir.exists(), |o| !o.is_empty())
}

//! The devices the device plugin handed out, on disk: `.cdigen-allocated`
//! in the device-info directory, beside the files it protects (a wiped
//! directory takes both).
//!
//! Allocations otherwise live only in memory: after a restart (`kill -9`,
//! a rollout, an OOM kill) the plugin would not know which device-info
//! files running pods still use. Allocate records its devices here before
//! it writes their files, and every prune writes what it decided, both
//! under the directory's lock; a new process starts from this file.
//!
//! The file is read back as untrusted input: at most [`MAX_BYTES`], a
//! strict schema (unknown fields refused), a version, a SHA-256 checksum of
//! the devices, bounded names. Times are Unix seconds, so they survive the
//! restart; a time in the future counts as now.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::fsio::{self, Links};

/// The file's name in the device-info directory (hidden: the writer never
/// writes such a name, runtimes and CNI plugins never read it).
pub const FILE: &str = ".cdigen-allocated";

/// The schema version written and the only one read.
pub const VERSION: u32 = 1;

/// Largest file read (a device is under 100 bytes).
pub const MAX_BYTES: u64 = 4 << 20;

/// Longest resource name or device ID accepted.
pub const MAX_NAME: usize = 1024;

/// One device handed out: since when, and whether the kubelet has listed
/// it since (see `run::update_held`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// When it was handed out (or first listed).
    pub since: Instant,
    /// Whether the kubelet's pod resources API has listed it.
    pub listed: bool,
}

/// The devices handed out, by (resource, device ID).
pub type Held = BTreeMap<(String, String), Entry>;

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct OnDisk {
    version: u32,
    /// SHA-256 (hex) of the compact JSON of `devices`.
    checksum: String,
    devices: Vec<Record>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Record {
    resource: String,
    id: String,
    /// Unix seconds.
    since: u64,
    listed: bool,
}

/// The file's path in the device-info directory `dir`.
pub fn path(dir: &Path) -> PathBuf {
    dir.join(FILE)
}

fn checksum(devices: &[Record]) -> Result<String, String> {
    let bytes = serde_json::to_vec(devices).map_err(|e| e.to_string())?;
    Ok(Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// Seconds since the Unix epoch now.
fn wall_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Reads the file in `dir`: `None` when there is none.
///
/// # Errors
/// An unreadable, oversized, malformed, wrong-version or corrupted file,
/// in words naming it.
pub fn load(dir: &Path) -> Result<Option<Held>, String> {
    let file = path(dir);
    let bad = |why: String| format!("{}: {why}", file.display());
    let Some(bytes) =
        fsio::read_opt(&file, MAX_BYTES, Links::Refuse).map_err(|e| bad(e.reason()))?
    else {
        return Ok(None);
    };
    parse(&bytes, Instant::now(), wall_now())
        .map(Some)
        .map_err(bad)
}

/// Parses the file's content, its times taken against `now` (an instant)
/// and `wall` (the same moment in Unix seconds).
///
/// # Errors
/// Malformed, wrong-version or corrupted content, or a name that is empty,
/// too long or holds a control character; in words, without the file's
/// name.
pub fn parse(bytes: &[u8], now: Instant, wall: u64) -> Result<Held, String> {
    let on_disk: OnDisk = serde_json::from_slice(bytes)
        .map_err(|e| format!("not a record of allocated devices: {e}"))?;
    if on_disk.version != VERSION {
        return Err(format!(
            "version {} (this cdigen reads version {VERSION})",
            on_disk.version
        ));
    }
    if checksum(&on_disk.devices)? != on_disk.checksum {
        return Err("checksum mismatch: the file is corrupted".into());
    }
    let mut held = Held::new();
    for r in on_disk.devices {
        for name in [&r.resource, &r.id] {
            if name.is_empty() || name.len() > MAX_NAME || name.chars().any(char::is_control) {
                return Err(format!(
                    "{} is not a resource name or device ID",
                    crate::text::quoted(name, 64)
                ));
            }
        }
        let age = Duration::from_secs(wall.saturating_sub(r.since));
        let since = now.checked_sub(age).unwrap_or(now);
        held.insert(
            (r.resource, r.id),
            Entry {
                since,
                listed: r.listed,
            },
        );
    }
    Ok(held)
}

/// The file's content for `held`, times taken against `now` and `wall`.
///
/// # Errors
/// What could not be encoded.
pub fn to_bytes(held: &Held, now: Instant, wall: u64) -> Result<Vec<u8>, String> {
    let devices: Vec<Record> = held
        .iter()
        .map(|((resource, id), e)| Record {
            resource: resource.clone(),
            id: id.clone(),
            since: wall.saturating_sub(now.saturating_duration_since(e.since).as_secs()),
            listed: e.listed,
        })
        .collect();
    let on_disk = OnDisk {
        version: VERSION,
        checksum: checksum(&devices)?,
        devices,
    };
    let mut bytes = serde_json::to_vec_pretty(&on_disk).map_err(|e| e.to_string())?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// Writes `held` into `dir` atomically. The caller holds the directory's
/// lock.
///
/// # Errors
/// What could not be written, naming the file.
pub fn save(dir: &Path, held: &Held) -> Result<(), String> {
    let file = path(dir);
    let bad = |why: String| format!("cannot write {}: {why}", file.display());
    let bytes = to_bytes(held, Instant::now(), wall_now()).map_err(bad)?;
    crate::write::replace(dir, FILE, &bytes)
        .map_err(|e| bad(format!("{:#}", anyhow::Error::from(e))))
}

/// Which devices are listed, by key: what a save must keep current (the
/// times only ever move back to when a device was handed out).
pub fn listed(held: &Held) -> BTreeMap<&(String, String), bool> {
    held.iter().map(|(k, e)| (k, e.listed)).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn key(id: &str) -> (String, String) {
        ("cdigen.io/vf".into(), id.into())
    }

    #[test]
    fn round_trips_with_ages_and_refuses_what_is_not_its_own() {
        let now = Instant::now();
        let wall = 1_800_000_000;
        let held = Held::from([
            (
                key("0000:3b:00.2"),
                Entry {
                    since: now - Duration::from_secs(30),
                    listed: true,
                },
            ),
            (
                key("0000:3b:00.3"),
                Entry {
                    since: now,
                    listed: false,
                },
            ),
        ]);
        let bytes = to_bytes(&held, now, wall).unwrap();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(text.contains("\"since\": 1799999970"), "{text}");
        // Read 10 s later: 10 s older.
        let later = now + Duration::from_secs(10);
        let back = parse(&bytes, later, wall + 10).unwrap();
        assert_eq!(listed(&back), listed(&held));
        let e = back[&key("0000:3b:00.2")];
        assert_eq!(later.duration_since(e.since), Duration::from_secs(40));
        // A time ahead of the clock (it was set back): now.
        let back = parse(&bytes, now, wall - 100).unwrap();
        assert_eq!(back[&key("0000:3b:00.3")].since, now);

        let err = |b: &[u8]| parse(b, now, wall).unwrap_err();
        assert!(err(b"\x00garbage").starts_with("not a record of allocated devices: "));
        let edited = text.replace("\"listed\": false", "\"listed\": true");
        assert_eq!(
            err(edited.as_bytes()),
            "checksum mismatch: the file is corrupted"
        );
        let v2 = text.replace("\"version\": 1", "\"version\": 2");
        assert_eq!(
            err(v2.as_bytes()),
            "version 2 (this cdigen reads version 1)"
        );
        let extra = text.replacen("{", "{\"x\": 1, ", 1);
        assert!(err(extra.as_bytes()).contains("unknown field `x`"));
        // A control character in a name, however checksummed.
        let mut bad = Held::new();
        bad.insert(
            ("cdigen.io/vf".into(), "a\nb".into()),
            Entry {
                since: now,
                listed: false,
            },
        );
        let b = to_bytes(&bad, now, wall).unwrap();
        assert_eq!(err(&b), "\"a\\nb\" is not a resource name or device ID");
    }

    #[test]
    fn load_names_the_file_and_bounds_its_size() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(load(tmp.path()).unwrap(), None);
        let held = Held::from([(
            key("0000:3b:00.2"),
            Entry {
                since: Instant::now(),
                listed: false,
            },
        )]);
        save(tmp.path(), &held).unwrap();
        assert_eq!(listed(&load(tmp.path()).unwrap().unwrap()), listed(&held));
        std::fs::write(path(tmp.path()), vec![b' '; (MAX_BYTES + 1) as usize]).unwrap();
        assert_eq!(
            load(tmp.path()).unwrap_err(),
            format!(
                "{}: larger than {MAX_BYTES} bytes: not reading it",
                path(tmp.path()).display()
            )
        );
        std::fs::remove_file(path(tmp.path())).unwrap();
        crate::fsio::test_support::mkfifo(&path(tmp.path()));
        let e = crate::fsio::test_support::quick(|| load(tmp.path()).unwrap_err());
        assert!(
            e.ends_with("a FIFO, not a regular file: not opening it"),
            "{e}"
        );
    }
}

//! The driver's checkpoint: the claims it has prepared, so that
//! NodeUnprepareResources works after a restart without asking the API
//! server, and a repeated NodePrepareResources answers what the first did.
//!
//! One file, `<plugin dir>/<driver>/checkpoint.json`, replaced atomically
//! after every change. In a rolling update two instances share it: each
//! call re-reads it under [`SERIALIZE_LOCK`] and writes it back before
//! letting go. It is read at start as untrusted input: at most
//! [`MAX_BYTES`], a strict schema (unknown fields refused), a version and
//! a SHA-256 checksum of the claims. A file that fails any of these is
//! reported (naming the file) and the driver starts with no claims rather
//! than stopping. Nothing in it names a path: the files a claim owns are
//! named from its UID (checked by [`is_safe_uid`]) by the code that writes
//! them.
//!
//! The PCI functions the driver rebound to `vfio-pci` for a claim
//! ([`super::passthrough`]) are recorded by address, each with the driver
//! it had, before the first write to sysfs: a crash between unbinding and
//! binding is undone at the next start. The field is left out while
//! empty, so a checkpoint written before it existed still loads (and its
//! checksum, of the claims alone, still holds).

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::fsio::{self, Links};

/// The checkpoint's file name in the driver's directory.
pub const FILE: &str = "checkpoint.json";

/// The lock every prepare and unprepare of every instance of the driver
/// holds in its directory while it re-reads, changes and writes the
/// checkpoint, in a rolling update (`--pod-uid`): two instances serve at
/// once, and neither ever writes over what the other recorded.
pub const SERIALIZE_LOCK: &str = ".cdigen-dra-serialize.lock";

/// The schema version written and the only one read.
pub const VERSION: u32 = 1;

/// Largest checkpoint read (a claim is a few hundred bytes).
pub const MAX_BYTES: u64 = 16 << 20;

/// Longest claim UID accepted (a Kubernetes UID is a 36-character UUID).
pub const MAX_UID_LEN: usize = 64;

/// One device of a prepared claim, as NodePrepareResources answered it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PreparedDevice {
    /// The requests of the claim it was allocated for.
    pub requests: Vec<String>,
    /// Its pool (the node).
    pub pool: String,
    /// Its name in the pool.
    pub device: String,
    /// The CDI devices the runtime injects for it.
    pub cdi_ids: Vec<String>,
    /// Whether it was allocated for administrative access (the result's
    /// `adminAccess`): the device may be prepared for other claims at the
    /// same time, and nothing done for this claim may have an exclusive
    /// effect on it (such as rebinding its driver), nor be undone for the
    /// others when this claim is unprepared. Absent (false) in a
    /// checkpoint of an earlier cdigen, which reads the same.
    #[serde(default, skip_serializing_if = "is_false")]
    pub admin_access: bool,
}

#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_false(b: &bool) -> bool {
    !*b
}

/// A prepared claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PreparedClaim {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its devices of this driver.
    pub devices: Vec<PreparedDevice>,
    /// Whether a per-claim CDI spec was written for it.
    pub spec: bool,
    /// Whether a device metadata file was written for it.
    pub metadata: bool,
}

/// Where a rebinding stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Step {
    /// Recorded before the first write: the function may be on its
    /// driver, on none, or on `vfio-pci`.
    Binding,
    /// On `vfio-pci`, for a prepared claim.
    Bound,
    /// Being given back.
    Restoring,
}

/// A function rebound for a claim, as the checkpoint records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rebind {
    /// The claim's UID.
    pub claim: String,
    /// The device's name in the pool.
    pub device: String,
    /// The driver it had (`None`: none).
    pub original: Option<String>,
    /// Where it stands.
    pub step: Step,
}

/// Whether `a` is a PCI address `DDDD:BB:DD.F` (lower-case hex).
pub fn is_pci_address(a: &str) -> bool {
    let hex = |c: u8| c.is_ascii_digit() || (b'a'..=b'f').contains(&c);
    a.len() == 12
        && a.bytes().enumerate().all(|(i, c)| match i {
            4 | 7 => c == b':',
            10 => c == b'.',
            11 => (b'0'..=b'7').contains(&c),
            _ => hex(c),
        })
}

/// Whether `d` may name a driver directory.
fn is_driver_name(d: &str) -> bool {
    !d.is_empty()
        && d.len() <= 64
        && !d.starts_with('.')
        && d.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

/// Checks a checkpoint record (untrusted input).
///
/// # Errors
/// A bad address, claim UID or driver name, in words.
pub fn check_record(address: &str, r: &Rebind) -> Result<(), String> {
    if !is_pci_address(address) {
        return Err(format!(
            "rebound function {:?} is not a PCI address",
            crate::text::escape(address)
        ));
    }
    if !is_safe_uid(&r.claim) {
        return Err(format!(
            "rebound function {address}: its claim is not a UID"
        ));
    }
    if let Some(d) = &r.original
        && !is_driver_name(d)
    {
        return Err(format!(
            "rebound function {address}: original driver {:?} is not a driver name",
            crate::text::escape(d)
        ));
    }
    Ok(())
}

/// The prepared claims, by UID.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checkpoint {
    /// By claim UID.
    pub claims: BTreeMap<String, PreparedClaim>,
    /// The PCI functions rebound for passthrough, by address.
    pub rebinds: BTreeMap<String, Rebind>,
}

/// The file's layout.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct OnDisk {
    version: u32,
    /// SHA-256 (hex) of the compact JSON of `claims`.
    checksum: String,
    claims: BTreeMap<String, PreparedClaim>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    rebinds: BTreeMap<String, Rebind>,
}

/// Whether `uid` may name files: 1 to [`MAX_UID_LEN`] of `a-z A-Z 0-9 -`
/// (a UUID is), so never a path, never hidden.
pub fn is_safe_uid(uid: &str) -> bool {
    !uid.is_empty()
        && uid.len() <= MAX_UID_LEN
        && !uid.starts_with('-')
        && uid.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// SHA-256 of the claims' compact JSON, followed by the rebinds' when
/// there are any (so that a checkpoint without them sums as before).
fn checksum(
    claims: &BTreeMap<String, PreparedClaim>,
    rebinds: &BTreeMap<String, Rebind>,
) -> Result<String, String> {
    let mut bytes = serde_json::to_vec(claims).map_err(|e| e.to_string())?;
    if !rebinds.is_empty() {
        bytes.extend(serde_json::to_vec(rebinds).map_err(|e| e.to_string())?);
    }
    Ok(Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// The checkpoint's path in `dir` (the driver's directory).
pub fn path(dir: &Path) -> PathBuf {
    dir.join(FILE)
}

/// Reads the checkpoint in `dir`: `Ok` with the claims (none when there is
/// no file), or `Err` with what is wrong with it, naming the file (the
/// caller warns and starts empty).
///
/// # Errors
/// An unreadable, oversized, malformed, wrong-version or corrupted file,
/// or a claim UID that [`is_safe_uid`] refuses.
pub fn load(dir: &Path) -> Result<Checkpoint, String> {
    let file = path(dir);
    let bad = |why: String| format!("checkpoint {}: {why}", file.display());
    let Some(bytes) =
        fsio::read_opt(&file, MAX_BYTES, Links::Refuse).map_err(|e| bad(e.reason()))?
    else {
        return Ok(Checkpoint::default());
    };
    parse(&bytes).map_err(bad)
}

/// The names of the devices the checkpoint in a directory holds, read
/// again only when the file changed: the passes ask at every health poll,
/// and the file is replaced (a new inode) at every save, by this instance
/// or another one sharing it in a rolling update.
#[derive(Debug, Default)]
pub struct HeldDevices {
    /// The file read last: (device, inode, size, mtime s, mtime ns); `None`
    /// when it was missing or unreadable (so read again next time).
    seen: Option<(u64, u64, u64, i64, i64)>,
    names: BTreeSet<String>,
}

impl HeldDevices {
    /// The devices the prepared claims in `dir`'s checkpoint hold; none when
    /// it is missing or unreadable (the plugin warns about it).
    pub fn names(&mut self, dir: &Path) -> &BTreeSet<String> {
        let now = std::fs::symlink_metadata(path(dir))
            .ok()
            .map(|m| (m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec()));
        if now.is_none() || now != self.seen {
            let read = load(dir).ok();
            self.seen = now.filter(|_| read.is_some());
            self.names = read
                .into_iter()
                .flat_map(|c| c.claims.into_values())
                .flat_map(|c| c.devices.into_iter().map(|d| d.device))
                .collect();
        }
        &self.names
    }
}

/// Parses a checkpoint file's content, as [`load`] does once it is read.
///
/// # Errors
/// Malformed, wrong-version or corrupted content, or a claim UID that
/// [`is_safe_uid`] refuses; in words, without the file's name.
pub fn parse(bytes: &[u8]) -> Result<Checkpoint, String> {
    let on_disk: OnDisk =
        serde_json::from_slice(bytes).map_err(|e| format!("not a checkpoint: {e}"))?;
    if on_disk.version != VERSION {
        return Err(format!(
            "version {} (this cdigen reads version {VERSION})",
            on_disk.version
        ));
    }
    if checksum(&on_disk.claims, &on_disk.rebinds)? != on_disk.checksum {
        return Err("checksum mismatch: the file is corrupted".into());
    }
    if let Some(uid) = on_disk.claims.keys().find(|u| !is_safe_uid(u)) {
        return Err(format!("claim UID {uid:?} is not a UID"));
    }
    for (address, r) in &on_disk.rebinds {
        check_record(address, r)?;
    }
    Ok(Checkpoint {
        claims: on_disk.claims,
        rebinds: on_disk.rebinds,
    })
}

/// Writes `checkpoint` into `dir` atomically, creating `dir`, under the
/// directory's lock (see [`tidy`]).
///
/// # Errors
/// What could not be written, naming the file.
pub fn save(dir: &Path, checkpoint: &Checkpoint) -> Result<(), String> {
    let file = path(dir);
    let bad = |why: String| format!("cannot write checkpoint {}: {why}", file.display());
    let bytes = to_bytes(checkpoint).map_err(bad)?;
    let _lock =
        crate::write::lock_dir(dir).map_err(|e| bad(format!("{:#}", anyhow::Error::from(e))))?;
    crate::write::replace(dir, FILE, &bytes)
        .map_err(|e| bad(format!("{:#}", anyhow::Error::from(e))))
}

/// At start: removes the temp files a driver killed while writing its
/// checkpoint or a metadata file left in `driver_dir` and its metadata
/// directories ([`super::metadata::tidy`]), each under that directory's
/// lock ([`crate::write::lock_and_tidy`]); nothing else is touched.
///
/// # Errors
/// A directory that cannot be locked or read, or a file that cannot be
/// removed, named.
pub fn tidy(driver_dir: &Path) -> Result<(), String> {
    crate::write::lock_and_tidy(driver_dir).map_err(|e| format!("{:#}", anyhow::Error::from(e)))?;
    super::metadata::tidy(driver_dir)
}

/// The file content [`save`] writes for `checkpoint`.
///
/// # Errors
/// What could not be encoded.
pub fn to_bytes(checkpoint: &Checkpoint) -> Result<Vec<u8>, String> {
    let on_disk = OnDisk {
        version: VERSION,
        checksum: checksum(&checkpoint.claims, &checkpoint.rebinds)?,
        claims: checkpoint.claims.clone(),
        rebinds: checkpoint.rebinds.clone(),
    };
    let mut bytes = serde_json::to_vec_pretty(&on_disk).map_err(|e| e.to_string())?;
    bytes.push(b'\n');
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// The fuzz corpus's seed is a checkpoint this version reads.
    #[test]
    fn the_fuzz_seed_is_a_valid_checkpoint() {
        let seed = include_bytes!("../../fuzz/corpus/dra_input/checkpoint.json");
        let c = parse(seed).unwrap();
        assert_eq!(c.claims.len(), 1);
        assert_eq!(parse(&to_bytes(&c).unwrap()).unwrap(), c);
    }

    fn sample() -> Checkpoint {
        let mut c = Checkpoint::default();
        c.claims.insert(
            "6f1d3c2a-8b4e-4a7f-9c21-0d5e7b3a9f10".into(),
            PreparedClaim {
                namespace: "default".into(),
                name: "gpu".into(),
                devices: vec![PreparedDevice {
                    requests: vec!["gpu".into()],
                    pool: "node1".into(),
                    device: "sriov-0000-3b-00-2".into(),
                    cdi_ids: vec!["cdigen.io/vf=0000:3b:00.2".into()],
                    admin_access: false,
                }],
                spec: true,
                metadata: false,
            },
        );
        c
    }

    /// A checkpoint as cdigen wrote it before `adminAccess` (and with a
    /// claim whose metadata file is of the earlier layout).
    const EARLIER: &str = include_str!("../../tests/data/checkpoint-before-admin-access.json");

    /// The earlier checkpoint is read (its devices not for admin access)
    /// and written back byte for byte: its checksum holds both ways, so an
    /// earlier cdigen reads what this one writes of it.
    #[test]
    fn an_earlier_checkpoint_is_read_and_written_alike() {
        let c = parse(EARLIER.as_bytes()).unwrap();
        let claim = &c.claims["6f1d3c2a-8b4e-4a7f-9c21-0d5e7b3a9f10"];
        assert!(claim.metadata && !claim.devices[0].admin_access);
        assert_eq!(String::from_utf8(to_bytes(&c).unwrap()).unwrap(), EARLIER);
        let mut admin = c.clone();
        admin
            .claims
            .values_mut()
            .for_each(|c| c.devices[0].admin_access = true);
        let text = String::from_utf8(to_bytes(&admin).unwrap()).unwrap();
        assert!(text.contains("\"adminAccess\": true"), "{text}");
        assert_eq!(parse(text.as_bytes()).unwrap(), admin);
    }

    #[test]
    fn round_trip_and_absent() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path()).unwrap(), Checkpoint::default());
        save(dir.path(), &sample()).unwrap();
        assert_eq!(load(dir.path()).unwrap(), sample());
    }

    /// The held devices are read again when the file is replaced or
    /// removed, not while it stays the same file (same inode, size and
    /// time), and an unreadable one holds nothing.
    #[test]
    fn held_devices_are_read_again_only_when_the_file_changed() {
        let dir = tempfile::tempdir().unwrap();
        let mut held = HeldDevices::default();
        assert!(held.names(dir.path()).is_empty());
        save(dir.path(), &sample()).unwrap();
        let vf = BTreeSet::from(["sriov-0000-3b-00-2".to_string()]);
        assert_eq!(held.names(dir.path()), &vf);
        // The same file, its bytes changed behind its back: not read again.
        let file = path(dir.path());
        let mtime = std::fs::metadata(&file).unwrap().modified().unwrap();
        let len = std::fs::metadata(&file).unwrap().len();
        std::fs::write(&file, vec![b' '; usize::try_from(len).unwrap()]).unwrap();
        let f = std::fs::File::options().write(true).open(&file).unwrap();
        f.set_modified(mtime).unwrap();
        assert_eq!(held.names(dir.path()), &vf);
        // Replaced, as save does: read again (unreadable: nothing held).
        std::fs::write(dir.path().join("new"), b"{").unwrap();
        std::fs::rename(dir.path().join("new"), &file).unwrap();
        assert!(held.names(dir.path()).is_empty());
        let mut other = sample();
        for c in other.claims.values_mut() {
            c.devices[0].device = "vf-b".into();
        }
        save(dir.path(), &other).unwrap();
        assert_eq!(
            held.names(dir.path()),
            &BTreeSet::from(["vf-b".to_string()])
        );
        std::fs::remove_file(&file).unwrap();
        assert!(held.names(dir.path()).is_empty());
    }

    #[test]
    fn garbage_is_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = path(dir.path());
        let shown = file.display().to_string();
        std::fs::write(&file, "{garbage").unwrap();
        let e = load(dir.path()).unwrap_err();
        assert!(
            e.starts_with(&format!("checkpoint {shown}: not a checkpoint")),
            "{e}"
        );

        save(dir.path(), &sample()).unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        std::fs::write(&file, text.replace("\"gpu\"", "\"gpX\"")).unwrap();
        let e = load(dir.path()).unwrap_err();
        assert_eq!(
            e,
            format!("checkpoint {shown}: checksum mismatch: the file is corrupted")
        );

        std::fs::write(&file, text.replace("\"version\": 1", "\"version\": 7")).unwrap();
        let e = load(dir.path()).unwrap_err();
        assert_eq!(
            e,
            format!("checkpoint {shown}: version 7 (this cdigen reads version 1)")
        );

        std::fs::write(
            &file,
            text.replace("\"spec\"", "\"path\": \"/etc\", \"spec\""),
        )
        .unwrap();
        let e = load(dir.path()).unwrap_err();
        assert!(e.contains("unknown field `path`"), "{e}");
    }

    #[test]
    fn unsafe_uids_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = sample();
        let v = c.claims.values().next().unwrap().clone();
        c.claims.insert("../../etc".into(), v);
        save(dir.path(), &c).unwrap();
        let e = load(dir.path()).unwrap_err();
        assert!(e.ends_with("claim UID \"../../etc\" is not a UID"), "{e}");
        assert!(is_safe_uid("6f1d3c2a-8b4e-4a7f-9c21-0d5e7b3a9f10"));
        for bad in ["", ".x", "a/b", "-x", &"a".repeat(65), "a b"] {
            assert!(!is_safe_uid(bad), "{bad}");
        }
    }

    /// A checkpoint written before rebinds existed (no `rebinds`, its
    /// checksum of the claims alone) loads; one with rebinds round-trips,
    /// and its checksum covers them.
    #[test]
    fn rebinds_extend_the_checkpoint_compatibly() {
        let old = serde_json::json!({
            "version": 1,
            "checksum": checksum(&sample().claims, &BTreeMap::new()).unwrap(),
            "claims": sample().claims,
        });
        let loaded = parse(&serde_json::to_vec(&old).unwrap()).unwrap();
        assert_eq!(loaded, sample());
        assert!(loaded.rebinds.is_empty());
        // Without rebinds, the file is what an older cdigen writes.
        assert!(
            !String::from_utf8(to_bytes(&sample()).unwrap())
                .unwrap()
                .contains("rebinds")
        );

        let mut c = sample();
        c.rebinds.insert(
            "0000:3b:00.2".into(),
            Rebind {
                claim: "6f1d3c2a-8b4e-4a7f-9c21-0d5e7b3a9f10".into(),
                device: "sriov-0000-3b-00-2".into(),
                original: Some("mlx5_core".into()),
                step: Step::Binding,
            },
        );
        let text = String::from_utf8(to_bytes(&c).unwrap()).unwrap();
        assert!(text.contains("\"step\": \"binding\""), "{text}");
        assert_eq!(parse(text.as_bytes()).unwrap(), c);
        let e = parse(text.replace("mlx5_core", "mlx4_core").as_bytes()).unwrap_err();
        assert_eq!(e, "checksum mismatch: the file is corrupted");
        let e = parse(
            text.replace("\"step\"", "\"path\": \"/x\", \"step\"")
                .as_bytes(),
        )
        .unwrap_err();
        assert!(e.contains("unknown field `path`"), "{e}");
    }

    #[test]
    fn rebind_addresses_and_records_are_checked() {
        assert!(is_pci_address("0000:3b:00.2"));
        for bad in [
            "0000:3b:00.8",
            "0000:3B:00.2",
            "../../x",
            "0000:3b:00.2/",
            "",
        ] {
            assert!(!is_pci_address(bad), "{bad}");
        }
        let r = Rebind {
            claim: "u1".into(),
            device: "sriov-0000-3b-00-2".into(),
            original: Some("mlx5_core".into()),
            step: Step::Bound,
        };
        assert_eq!(check_record("0000:3b:00.2", &r), Ok(()));
        let e = check_record("../x", &r).unwrap_err();
        assert_eq!(e, "rebound function \"../x\" is not a PCI address");
        let bad = Rebind {
            original: Some("../evil".into()),
            ..r
        };
        let e = check_record("0000:3b:00.2", &bad).unwrap_err();
        assert!(
            e.ends_with("original driver \"../evil\" is not a driver name"),
            "{e}"
        );
    }

    #[test]
    fn a_symlink_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("other"), "{}").unwrap();
        std::os::unix::fs::symlink("other", path(dir.path())).unwrap();
        let e = load(dir.path()).unwrap_err();
        assert!(e.contains("checkpoint.json"), "{e}");
    }
}

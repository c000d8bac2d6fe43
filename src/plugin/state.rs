//! The plugin's allocations on disk: one JSON file (`allocations.json`) in
//! the state directory, changed only under the directory's lock and
//! replaced atomically (temp file, fsync, rename), so that concurrent
//! plugin processes never hand one device to two requests and a process
//! killed at any point leaves the old file or the new one, never a mix.
//!
//! Version 2: each allocation names its generator (allocations are
//! scoped by request ID, generator and resource-spec), and each device
//! its sysfs path (checked to tell a device gone from the host) and the
//! nodes it holds exclusively and shared (see [`super::alloc`]).

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::alloc::Held;
use super::request::{ResourceSpec, is_request_id};
use crate::write::{self, DirLock};

/// Name of the allocations file in the state directory.
pub const STATE_FILE: &str = "allocations.json";
/// Format version of the allocations file.
pub const VERSION: u32 = 2;

/// Why the allocations cannot be read or saved; every variant names the
/// file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Locking, reading or replacing failed.
    #[error(transparent)]
    Write(#[from] write::Error),
    /// The file cannot be read.
    #[error("cannot read {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The file is not a valid allocations file. Its allocations are not
    /// discarded: an admin must look at it.
    #[error("{}: corrupt allocations file (fix or remove it; removing it forgets every allocation): {reason}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// Largest allocations file read.
pub const MAX_STATE_BYTES: u64 = 16 << 20;

/// The allocations file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct State {
    /// Format version, [`VERSION`].
    pub version: u32,
    /// Every allocation held, oldest first.
    pub allocations: Vec<Allocation>,
}

impl Default for State {
    fn default() -> Self {
        State {
            version: VERSION,
            allocations: Vec::new(),
        }
    }
}

/// The devices one request holds for one resource-spec of one generator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Allocation {
    /// `CDI_REQUEST_ID` of the ADD.
    pub request_id: String,
    /// The resource-spec (`gpu`, `gpu-numa0`).
    pub resource: String,
    /// The generator whose pool the devices came from (the configuration's
    /// `plugin` or `args.generator`): two plugins of one type are kept
    /// apart by it.
    pub generator: String,
    /// The devices, in the order they were handed out.
    pub devices: Vec<AllocatedDevice>,
    /// When, in seconds since the Unix epoch.
    pub allocated_at: u64,
}

impl Allocation {
    /// The resource-type of the allocation.
    pub fn resource_type(&self) -> &str {
        self.resource
            .split_once('-')
            .map_or(self.resource.as_str(), |(t, _)| t)
    }
}

/// One allocated device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllocatedDevice {
    /// The backend that found it (`drm`).
    pub backend: String,
    /// Its stable identity (`0000:03:00.0`, `platform:gpu`).
    pub id: String,
    /// Its sysfs path (`/sys/devices/...`): the device is gone from the
    /// host when this path is (a MIG device's path is not in sysfs: it is
    /// gone when discovery no longer reports it).
    pub sysfs_path: String,
    /// Its NUMA node, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_node: Option<u32>,
    /// The host device nodes handed out for it.
    pub nodes: Vec<String>,
    /// The nodes it holds exclusively (its own, handed out or not).
    pub exclusive: Vec<String>,
    /// The nodes it holds shared with other devices.
    pub shared: Vec<String>,
}

impl AllocatedDevice {
    /// The key that makes a device unique: (backend, id).
    pub fn key(&self) -> (&str, &str) {
        (&self.backend, &self.id)
    }
}

impl State {
    /// Checks what serde cannot: the version, names by the ABNF, each
    /// (request, generator, resource) once, each device in one allocation
    /// only, each device's nodes either its exclusive or its shared ones
    /// (the handed-out ones among them), and no node held exclusively by
    /// one device and in any way by another.
    fn check(&self) -> Result<(), String> {
        if self.version != VERSION {
            return Err(format!(
                "unknown version {} (this cdigen reads version {VERSION})",
                self.version
            ));
        }
        let mut held = BTreeSet::new();
        let mut devices = BTreeSet::new();
        // Node path -> (allocation index, device id, exclusive).
        let mut nodes: BTreeMap<&str, (usize, &str, bool)> = BTreeMap::new();
        for (i, a) in self.allocations.iter().enumerate() {
            if !is_request_id(&a.request_id) {
                return Err(format!(
                    "allocations[{i}]: {:?} is not a request-id",
                    a.request_id
                ));
            }
            if let Err(e) = a.resource.parse::<ResourceSpec>() {
                return Err(format!("allocations[{i}]: {e}"));
            }
            if a.generator.is_empty() {
                return Err(format!("allocations[{i}]: the generator is empty"));
            }
            if !held.insert((&a.request_id, &a.generator, &a.resource)) {
                return Err(format!(
                    "allocations[{i}]: request {} holds {} of generator {} twice",
                    a.request_id, a.resource, a.generator
                ));
            }
            for d in &a.devices {
                let at = format!("allocations[{i}]: device {} ({})", d.id, d.backend);
                if !devices.insert(d.key()) {
                    return Err(format!("{at} is also in another allocation"));
                }
                if !d.sysfs_path.starts_with('/') {
                    return Err(format!(
                        "{at}: sysfs_path {:?} is not an absolute path",
                        d.sysfs_path
                    ));
                }
                if let Some(n) = d.nodes.iter().find(|n| !d.holds(n)) {
                    return Err(format!(
                        "{at}: node {n} is handed out but neither exclusive nor shared"
                    ));
                }
                if let Some(n) = d.exclusive.iter().find(|n| d.shared.contains(n)) {
                    return Err(format!("{at}: node {n} is both exclusive and shared"));
                }
                let all = d
                    .exclusive
                    .iter()
                    .map(|n| (n, true))
                    .chain(d.shared.iter().map(|n| (n, false)));
                for (n, exclusive) in all {
                    match nodes.get(n.as_str()) {
                        Some((j, other, other_exclusive)) if exclusive || *other_exclusive => {
                            return Err(format!(
                                "{at}: node {n} is also held by device {other} of allocations[{j}], and one of them holds it exclusively"
                            ));
                        }
                        Some(_) => {}
                        None => {
                            nodes.insert(n, (i, &d.id, exclusive));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// What every allocation holds.
    pub fn held(&self) -> Held {
        let mut held = Held::default();
        for d in self.allocations.iter().flat_map(|a| &a.devices) {
            held.hold(&d.backend, &d.id, &d.exclusive, &d.shared);
        }
        held
    }
}

impl AllocatedDevice {
    fn holds(&self, node: &String) -> bool {
        self.exclusive.contains(node) || self.shared.contains(node)
    }
}

/// The state directory, locked, with its allocations loaded.
#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
    /// The allocations, as on disk until [`Store::save`].
    pub state: State,
    _lock: DirLock,
}

impl Store {
    /// Creates the directory if needed, takes its lock (waiting for other
    /// plugin processes), removes temp files a killed process left, and
    /// loads the allocations (none when the file does not exist).
    ///
    /// # Errors
    /// [`Error`] naming the directory or file.
    pub fn open(dir: &Path) -> Result<Store, Error> {
        let lock = write::lock_and_tidy(dir)?;
        let path = dir.join(STATE_FILE);
        // Another tool can write this file: never through a symlink,
        // never a FIFO, bounded.
        let state = match crate::fsio::read(&path, MAX_STATE_BYTES, crate::fsio::Links::Refuse) {
            Ok(bytes) => {
                let state: State = serde_json::from_slice(&bytes).map_err(|e| Error::Corrupt {
                    path: path.clone(),
                    reason: e.to_string(),
                })?;
                state.check().map_err(|reason| Error::Corrupt {
                    path: path.clone(),
                    reason,
                })?;
                state
            }
            Err(e) if e.is_not_found() => State::default(),
            Err(e) => return Err(Error::Write(write::Error::Read(e))),
        };
        Ok(Store {
            dir: dir.to_path_buf(),
            state,
            _lock: lock,
        })
    }

    /// The allocations file.
    pub fn path(&self) -> PathBuf {
        self.dir.join(STATE_FILE)
    }

    /// Replaces the file with the allocations held in memory.
    ///
    /// # Errors
    /// [`Error`] naming the file.
    pub fn save(&self) -> Result<(), Error> {
        let mut bytes = serde_json::to_vec_pretty(&self.state).map_err(|e| Error::Corrupt {
            path: self.path(),
            reason: e.to_string(),
        })?;
        bytes.push(b'\n');
        write::replace(&self.dir, STATE_FILE, &bytes)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;
    use std::fs;

    fn device(id: &str) -> AllocatedDevice {
        AllocatedDevice {
            backend: "drm".into(),
            id: id.into(),
            sysfs_path: format!("/sys/devices/pci0000:00/{id}"),
            numa_node: Some(0),
            nodes: vec![format!("/dev/dri/{id}")],
            exclusive: vec![format!("/dev/dri/{id}")],
            shared: vec!["/dev/ctl".into()],
        }
    }

    fn allocation(rid: &str, resource: &str, ids: &[&str]) -> Allocation {
        Allocation {
            request_id: rid.into(),
            resource: resource.into(),
            generator: "drm".into(),
            devices: ids.iter().map(|i| device(i)).collect(),
            allocated_at: 1,
        }
    }

    fn corrupt(dir: &Path, text: &str) -> String {
        fs::write(dir.join(STATE_FILE), text).unwrap();
        Store::open(dir).unwrap_err().to_string()
    }

    fn state(allocations: Vec<Allocation>) -> String {
        serde_json::to_string(&State {
            version: VERSION,
            allocations,
        })
        .unwrap()
    }

    #[test]
    fn saves_and_loads_back() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        {
            let mut s = Store::open(&dir).unwrap();
            assert_eq!(s.state, State::default());
            s.state
                .allocations
                .push(allocation("1234", "gpu-numa0", &["0000:01:00.0"]));
            s.save().unwrap();
        }
        let s = Store::open(&dir).unwrap();
        assert_eq!(s.state.allocations.len(), 1);
        assert_eq!(s.state.allocations[0].resource_type(), "gpu");
        let mut expected = Held::default();
        expected.hold(
            "drm",
            "0000:01:00.0",
            &["/dev/dri/0000:01:00.0".to_string()],
            &["/dev/ctl".to_string()],
        );
        assert_eq!(s.state.held(), expected);
        // Only the file and the lock: no temp file is left behind.
        let mut names: Vec<String> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, [".cdigen.lock", STATE_FILE]);
    }

    #[test]
    fn a_corrupt_file_is_an_error_naming_it_and_is_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let path = dir.join(STATE_FILE).display().to_string();
        let prefix = format!(
            "{path}: corrupt allocations file (fix or remove it; removing it forgets every allocation): "
        );
        assert_eq!(
            corrupt(dir, "{\"version\":2,\"allocations\":["),
            format!("{prefix}EOF while parsing a list at line 1 column 28")
        );
        assert_eq!(
            corrupt(dir, "{\"version\":1,\"allocations\":[]}"),
            format!("{prefix}unknown version 1 (this cdigen reads version 2)")
        );
        assert_eq!(
            corrupt(
                dir,
                &state(vec![
                    allocation("a", "gpu", &["0000:01:00.0"]),
                    allocation("b", "gpu", &["0000:01:00.0"]),
                ])
            ),
            format!(
                "{prefix}allocations[1]: device 0000:01:00.0 (drm) is also in another allocation"
            )
        );
        assert_eq!(
            corrupt(
                dir,
                &state(vec![
                    allocation("a", "gpu", &[]),
                    allocation("a", "gpu", &[])
                ])
            ),
            format!("{prefix}allocations[1]: request a holds gpu of generator drm twice")
        );
        assert_eq!(
            corrupt(dir, &state(vec![allocation("-a", "gpu", &[])])),
            format!("{prefix}allocations[0]: \"-a\" is not a request-id")
        );
        // A node held exclusively by one device and by another at all.
        let mut b = allocation("b", "gpu", &["2"]);
        b.devices[0].shared.push("/dev/dri/1".into());
        assert_eq!(
            corrupt(dir, &state(vec![allocation("a", "gpu", &["1"]), b])),
            format!(
                "{prefix}allocations[1]: device 2 (drm): node /dev/dri/1 is also held by device 1 of allocations[0], and one of them holds it exclusively"
            )
        );
        let mut b = allocation("b", "gpu", &["2"]);
        b.devices[0].exclusive.push("/dev/ctl".into());
        b.devices[0].shared.clear();
        assert_eq!(
            corrupt(dir, &state(vec![allocation("a", "gpu", &["1"]), b])),
            format!(
                "{prefix}allocations[1]: device 2 (drm): node /dev/ctl is also held by device 1 of allocations[0], and one of them holds it exclusively"
            )
        );
        let mut a = allocation("a", "gpu", &["1"]);
        a.devices[0].nodes.push("/dev/other".into());
        assert_eq!(
            corrupt(dir, &state(vec![a])),
            format!(
                "{prefix}allocations[0]: device 1 (drm): node /dev/other is handed out but neither exclusive nor shared"
            )
        );
        let mut a = allocation("a", "gpu", &["1"]);
        a.devices[0].shared.push("/dev/dri/1".into());
        assert_eq!(
            corrupt(dir, &state(vec![a])),
            format!(
                "{prefix}allocations[0]: device 1 (drm): node /dev/dri/1 is both exclusive and shared"
            )
        );
        let mut a = allocation("a", "gpu", &["1"]);
        a.devices[0].sysfs_path = "sys/x".into();
        assert_eq!(
            corrupt(dir, &state(vec![a])),
            format!(
                "{prefix}allocations[0]: device 1 (drm): sysfs_path \"sys/x\" is not an absolute path"
            )
        );
        assert!(
            corrupt(dir, "{\"version\":2,\"allocations\":[],\"x\":1}")
                .starts_with(&format!("{prefix}unknown field `x`"))
        );
        // The file is left as it was for an admin to look at.
        assert_eq!(
            fs::read_to_string(dir.join(STATE_FILE)).unwrap(),
            "{\"version\":2,\"allocations\":[],\"x\":1}"
        );
    }

    #[test]
    fn shared_nodes_and_generators_keep_allocations_apart() {
        let tmp = tempfile::tempdir().unwrap();
        // Two devices sharing /dev/ctl; one request ID holding gpu of two
        // generators.
        let mut other = allocation("a", "gpu", &["2"]);
        other.generator = "amd-gpu".into();
        fs::write(
            tmp.path().join(STATE_FILE),
            state(vec![allocation("a", "gpu", &["1"]), other]),
        )
        .unwrap();
        let s = Store::open(tmp.path()).unwrap();
        assert_eq!(s.state.allocations.len(), 2);
    }

    #[test]
    fn temp_files_of_a_killed_process_are_removed() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join(".cdigen-abc.tmp"), "{\"version\":").unwrap();
        let _s = Store::open(tmp.path()).unwrap();
        assert!(!tmp.path().join(".cdigen-abc.tmp").exists());
    }
}

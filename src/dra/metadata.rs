//! Device metadata for the container, in the style of KEP-5304 (the DRA
//! "downward API", the successor of NPWG device-info files): one JSON file
//! per prepared claim with its devices' requests, names, attributes and
//! network data, mounted read-only into the container through the
//! per-claim CDI spec ([`super::prepare`]).
//!
//! On the node: `<plugin dir>/<driver>/metadata/<claim UID>.json`. In the
//! container: [`CONTAINER_DIR`]`/<driver>/<claim name>.json`.
//!
//! The layout follows the KEP's `DeviceMetadata` (`apiVersion`
//! [`API_VERSION`], requests, their devices with attributes and
//! `networkData`); the KEP is alpha and its API may still move, so the
//! version here is cdigen's own.
//!
//! ```json
//! {"apiVersion": "metadata.dra.cdigen.io/v1alpha1", "kind": "DeviceMetadata",
//!  "driver": "dra.cdigen.io",
//!  "claim": {"namespace": "default", "name": "vf", "uid": "…"},
//!  "requests": [{"name": "vf", "devices": [{"pool": "node1",
//!    "device": "sriov-0000-3b-00-2",
//!    "attributes": {"resource.kubernetes.io/pciBusID": {"string": "0000:3b:00.2"}},
//!    "networkData": {"interfaceName": "ens1f0v0", "hardwareAddress": "…"}}]}]}
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::resource::v1::{DeviceAttribute, NetworkDeviceData};
use serde::Serialize;

/// The `apiVersion` of the file.
pub const API_VERSION: &str = "metadata.dra.cdigen.io/v1alpha1";

/// The `kind` of the file.
pub const KIND: &str = "DeviceMetadata";

/// The directory the files are mounted under in the container (then
/// `<driver>/<claim name>.json`), the KEP's.
pub const CONTAINER_DIR: &str = "/var/run/kubernetes.io/dra-device-attributes";

/// The metadata directory's name in the driver's directory.
pub const DIR: &str = "metadata";

/// The claim a file is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClaimMeta {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its UID.
    pub uid: String,
}

/// One allocated device.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceMeta {
    /// Its pool.
    pub pool: String,
    /// Its name in the pool.
    pub device: String,
    /// Its attributes, as its ResourceSlice publishes them.
    pub attributes: BTreeMap<String, DeviceAttribute>,
    /// Its network interface, for a network device.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_data: Option<NetworkDeviceData>,
}

/// One request of the claim and its devices.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestMeta {
    /// The request's name (`gpu`, or `gpu/small` for a subrequest).
    pub name: String,
    /// Its devices of this driver.
    pub devices: Vec<DeviceMeta>,
}

/// A metadata file.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceMetadata {
    /// [`API_VERSION`].
    pub api_version: &'static str,
    /// [`KIND`].
    pub kind: &'static str,
    /// The driver.
    pub driver: String,
    /// The claim.
    pub claim: ClaimMeta,
    /// Its requests served by this driver, in allocation order.
    pub requests: Vec<RequestMeta>,
}

impl DeviceMetadata {
    /// The file of `claim`, its devices given with their request, in
    /// allocation order (a request's devices together, as they come).
    pub fn new(driver: &str, claim: ClaimMeta, devices: Vec<(String, DeviceMeta)>) -> Self {
        let mut requests: Vec<RequestMeta> = Vec::new();
        for (request, device) in devices {
            match requests.iter_mut().find(|r| r.name == request) {
                Some(r) => r.devices.push(device),
                None => requests.push(RequestMeta {
                    name: request,
                    devices: vec![device],
                }),
            }
        }
        DeviceMetadata {
            api_version: API_VERSION,
            kind: KIND,
            driver: driver.to_string(),
            claim,
            requests,
        }
    }
}

/// The metadata directory of the driver whose directory is `driver_dir`.
pub fn dir(driver_dir: &Path) -> PathBuf {
    driver_dir.join(DIR)
}

/// The file name of claim `uid` (a UID [`super::checkpoint::is_safe_uid`]
/// accepts).
pub fn file_name(uid: &str) -> String {
    format!("{uid}.json")
}

/// Where the file of claim `claim_name` appears in the container.
pub fn container_path(driver: &str, claim_name: &str) -> String {
    format!("{CONTAINER_DIR}/{driver}/{claim_name}.json")
}

/// Writes `meta` for its claim into the metadata directory under
/// `driver_dir` (created 0755), atomically, under the directory's lock;
/// returns the file's path.
///
/// # Errors
/// What could not be written, naming the file.
pub fn write(driver_dir: &Path, meta: &DeviceMetadata) -> Result<PathBuf, String> {
    let d = dir(driver_dir);
    let name = file_name(&meta.claim.uid);
    let file = d.join(&name);
    let bad = |why: String| format!("cannot write device metadata {}: {why}", file.display());
    let mut bytes = serde_json::to_vec_pretty(meta).map_err(|e| bad(e.to_string()))?;
    bytes.push(b'\n');
    let chain = |e: crate::write::Error| bad(format!("{:#}", anyhow::Error::from(e)));
    // Creates the directory (0755); its temp files are removed at start
    // under this lock ([`super::checkpoint::tidy`]).
    let _lock = crate::write::lock_dir(&d).map_err(chain)?;
    crate::write::replace(&d, &name, &bytes).map_err(chain)?;
    Ok(file)
}

/// Removes the file of claim `uid` under `driver_dir`, when it is a
/// regular file (anything else there is left alone and reported).
///
/// # Errors
/// A path that is not a regular file, or a failed removal, named.
pub fn remove(driver_dir: &Path, uid: &str) -> Result<(), String> {
    let file = dir(driver_dir).join(file_name(uid));
    match std::fs::symlink_metadata(&file) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("{}: {e}", file.display())),
        Ok(m) if !m.file_type().is_file() => Err(format!(
            "{} is {}, not a metadata file; leaving it alone",
            file.display(),
            crate::fsio::describe(m.file_type())
        )),
        Ok(_) => std::fs::remove_file(&file)
            .map_err(|e| format!("cannot remove {}: {e}", file.display())),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn written_grouped_by_request_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let dev = |name: &str| DeviceMeta {
            pool: "node1".into(),
            device: name.into(),
            attributes: BTreeMap::from([(
                "resource.kubernetes.io/pciBusID".to_string(),
                DeviceAttribute {
                    string: Some("0000:3b:00.2".into()),
                    ..DeviceAttribute::default()
                },
            )]),
            network_data: None,
        };
        let meta = DeviceMetadata::new(
            "dra.cdigen.io",
            ClaimMeta {
                namespace: "ns".into(),
                name: "c".into(),
                uid: "u-1".into(),
            },
            vec![
                ("a".into(), dev("d1")),
                ("b".into(), dev("d2")),
                ("a".into(), dev("d3")),
            ],
        );
        let file = write(dir.path(), &meta).unwrap();
        assert_eq!(file, dir.path().join("metadata/u-1.json"));
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        assert_eq!(v["apiVersion"], API_VERSION);
        assert_eq!(v["requests"][0]["name"], "a");
        assert_eq!(v["requests"][0]["devices"][1]["device"], "d3");
        assert_eq!(v["requests"][1]["devices"][0]["device"], "d2");
        assert_eq!(
            v["requests"][0]["devices"][0]["attributes"]["resource.kubernetes.io/pciBusID"]["string"],
            "0000:3b:00.2"
        );
        remove(dir.path(), "u-1").unwrap();
        assert!(!file.exists());
        remove(dir.path(), "u-1").unwrap();
        std::fs::create_dir(&file).unwrap();
        let e = remove(dir.path(), "u-1").unwrap_err();
        assert!(
            e.ends_with("is a directory, not a metadata file; leaving it alone"),
            "{e}"
        );
        assert_eq!(
            container_path("dra.cdigen.io", "c"),
            "/var/run/kubernetes.io/dra-device-attributes/dra.cdigen.io/c.json"
        );
    }
}

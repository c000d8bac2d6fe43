//! Device metadata for the container, in the format and at the place of
//! KEP-5304 (the DRA "downward API", the successor of NPWG device-info
//! files) as `k8s.io/dynamic-resource-allocation` writes it: one file per
//! request of a prepared claim, with its devices' names, attributes and
//! network data, mounted read-only into the container through the
//! per-claim CDI spec ([`super::prepare`]). Consumers built on the
//! upstream decoder (`devicemetadata.ReadResourceClaimMetadata…`) read it.
//!
//! In the container (upstream's layout, consumer-facing):
//! [`CONTAINER_DIR`]`/resourceclaims/<claim name>/<request>/<driver>-metadata.json`,
//! or `…/resourceclaimtemplates/<pod claim name>/<request>/…` for a claim
//! made from a template (its [`POD_CLAIM_ANNOTATION`]). `<request>` is the
//! base request: a subrequest `gpu/small` is filed under `gpu`, and named
//! in full inside.
//!
//! On the node: `<plugin dir>/<driver>/`[`DIR`]`/<claim UID>/<request>/metadata.json`.
//! Upstream keys the claim's directory by `<namespace>_<name>`; cdigen by
//! its UID, as all its per-claim files, so that a claim re-created under
//! the same name while the old one is still prepared never shares files
//! with it, and nothing but a checked UID and a checked DNS label ever
//! names a path.
//!
//! The content is byte for byte what the upstream encoder writes for
//! `metadata.resource.k8s.io/v1alpha1` (Go's `json.MarshalIndent` of the
//! versioned struct, two spaces, HTML characters escaped, then a newline):
//! `kind`, `apiVersion`, `metadata` (claim name, namespace, UID,
//! generation 1), `podClaimName`, `requests` with one request and its
//! devices (`driver`, `pool`, `name`, `attributes`, `networkData`), the
//! empty ones left out as Go's `omitempty` does.
//!
//! cdigen 0.x before this wrote its own `metadata.dra.cdigen.io/v1alpha1`
//! file per claim at `<driver>/`[`LEGACY_DIR`]`/<uid>.json`; unprepare
//! still removes one ([`remove`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::resource::v1::{DeviceAttribute, NetworkDeviceData};
use serde::Serialize;

/// The `apiVersion` of the file, upstream's.
pub const API_VERSION: &str = "metadata.resource.k8s.io/v1alpha1";

/// The `kind` of the file.
pub const KIND: &str = "DeviceMetadata";

/// The directory the files are mounted under in the container.
pub const CONTAINER_DIR: &str = "/var/run/kubernetes.io/dra-device-attributes";

/// The container subdirectory of claims the pod names directly.
pub const CLAIMS_SUBDIR: &str = "resourceclaims";

/// The container subdirectory of claims made from a template, by the
/// pod's name for the claim.
pub const TEMPLATES_SUBDIR: &str = "resourceclaimtemplates";

/// Appended to the driver's name to name the file in the container.
pub const FILE_SUFFIX: &str = "-metadata.json";

/// The annotation the API server's claim controller puts on a claim made
/// from a template: the pod's name for it (`pod.spec.resourceClaims[].name`).
pub const POD_CLAIM_ANNOTATION: &str = "resource.kubernetes.io/pod-claim-name";

/// The metadata directory's name in the driver's directory (upstream's).
pub const DIR: &str = "dra-device-metadata";

/// A request's file name on the node (upstream's).
pub const HOST_FILE: &str = "metadata.json";

/// The directory of the files of cdigen before KEP-5304's format.
pub const LEGACY_DIR: &str = "metadata";

/// The claim a file is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimMeta {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its UID.
    pub uid: String,
    /// The pod's name for it, for a claim made from a template.
    pub pod_claim_name: Option<String>,
}

/// One allocated device.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceMeta {
    /// Its pool.
    pub pool: String,
    /// Its name in the pool.
    pub device: String,
    /// Its attributes, as its ResourceSlice publishes them.
    pub attributes: BTreeMap<String, DeviceAttribute>,
    /// Its network interface, for a network device.
    pub network_data: Option<NetworkDeviceData>,
}

/// `metadata.resource.k8s.io/v1alpha1` `DeviceMetadata`, its fields in the
/// Go struct's order and with its `omitempty`s.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct File {
    kind: &'static str,
    api_version: &'static str,
    metadata: ObjectMeta,
    #[serde(skip_serializing_if = "Option::is_none")]
    pod_claim_name: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    requests: Vec<Request>,
}

/// The part of `ObjectMeta` the writer sets, in its order.
#[derive(Debug, Clone, PartialEq, Serialize)]
struct ObjectMeta {
    #[serde(skip_serializing_if = "String::is_empty")]
    name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    namespace: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    uid: String,
    #[serde(skip_serializing_if = "is_zero")]
    generation: i64,
}

#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero(n: &i64) -> bool {
    *n == 0
}

#[derive(Debug, Clone, PartialEq, Serialize)]
struct Request {
    name: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    devices: Vec<Device>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
struct Device {
    driver: String,
    pool: String,
    name: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    attributes: BTreeMap<String, Attribute>,
    #[serde(skip_serializing_if = "Option::is_none")]
    network_data: Option<NetworkData>,
}

/// `resource.k8s.io/v1` `DeviceAttribute` in the Go struct's order.
#[derive(Debug, Clone, PartialEq, Serialize)]
struct Attribute {
    #[serde(skip_serializing_if = "Option::is_none")]
    int: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bool: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    string: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<String>,
}

/// `resource.k8s.io/v1` `NetworkDeviceData` in the Go struct's order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
struct NetworkData {
    #[serde(skip_serializing_if = "String::is_empty")]
    interface_name: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    ips: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    hardware_address: String,
}

impl File {
    /// The file of request `request` (`<request>` or
    /// `<request>/<subrequest>`) of `claim`, with its `devices` of
    /// `driver` in allocation order.
    pub fn new(driver: &str, claim: &ClaimMeta, request: &str, devices: &[DeviceMeta]) -> Self {
        let devices = devices
            .iter()
            .map(|d| Device {
                driver: driver.to_string(),
                pool: d.pool.clone(),
                name: d.device.clone(),
                attributes: d
                    .attributes
                    .iter()
                    .map(|(k, a)| {
                        let a = Attribute {
                            int: a.int,
                            bool: a.bool,
                            string: a.string.clone(),
                            version: a.version.clone(),
                        };
                        (k.clone(), a)
                    })
                    .collect(),
                network_data: d.network_data.as_ref().map(|n| NetworkData {
                    interface_name: n.interface_name.clone().unwrap_or_default(),
                    ips: n.ips.clone().unwrap_or_default(),
                    hardware_address: n.hardware_address.clone().unwrap_or_default(),
                }),
            })
            .collect();
        File {
            kind: KIND,
            api_version: API_VERSION,
            metadata: ObjectMeta {
                name: claim.name.clone(),
                namespace: claim.namespace.clone(),
                uid: claim.uid.clone(),
                generation: 1,
            },
            pod_claim_name: claim.pod_claim_name.clone(),
            requests: vec![Request {
                name: request.to_string(),
                devices,
            }],
        }
    }

    /// The file's bytes, as the upstream encoder writes them.
    ///
    /// # Errors
    /// What could not be encoded.
    pub fn to_bytes(&self) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        let mut ser = serde_json::Serializer::with_formatter(&mut out, GoFormatter::default());
        self.serialize(&mut ser).map_err(|e| e.to_string())?;
        out.push(b'\n');
        Ok(out)
    }
}

/// Go's `json.MarshalIndent(v, "", "  ")`: serde_json's pretty output,
/// with the characters Go escapes beyond JSON's own (`<`, `>`, `&`,
/// U+2028, U+2029) as `\u` escapes. Control characters are escaped alike
/// by both (`\b \f \n \r \t`, else `\u00xx`).
#[derive(Default)]
struct GoFormatter(serde_json::ser::PrettyFormatter<'static>);

impl serde_json::ser::Formatter for GoFormatter {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let bytes = fragment.as_bytes();
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            if matches!(c, '<' | '>' | '&' | '\u{2028}' | '\u{2029}') {
                w.write_all(bytes.get(start..i).unwrap_or_default())?;
                write!(w, "\\u{:04x}", u32::from(c))?;
                start = i + c.len_utf8();
            }
        }
        w.write_all(bytes.get(start..).unwrap_or_default())
    }
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object_value(w)
    }
}

/// The base request of `request` (`gpu` of `gpu/small`), when it and its
/// subrequest are DNS labels (what the API allows): safe as a file name.
///
/// # Errors
/// A request name that is not one, in words.
pub fn base_request(request: &str) -> Result<&str, String> {
    let (base, sub) = match request.split_once('/') {
        Some((b, s)) => (b, Some(s)),
        None => (request, None),
    };
    if !super::names::is_label(base) || !sub.is_none_or(super::names::is_label) {
        return Err(format!(
            "request name {:?} is not a DNS label, or two joined by /",
            crate::text::escape(request)
        ));
    }
    Ok(base)
}

/// The pod's name for a claim made from a template, from its
/// [`POD_CLAIM_ANNOTATION`] (absent for a claim the pod names directly).
///
/// # Errors
/// An annotation that is not a DNS label (what a pod's claim name is).
pub fn pod_claim_name(
    annotations: Option<&BTreeMap<String, String>>,
) -> Result<Option<String>, String> {
    let Some(v) = annotations.and_then(|a| a.get(POD_CLAIM_ANNOTATION)) else {
        return Ok(None);
    };
    if !super::names::is_label(v) {
        return Err(format!(
            "annotation {POD_CLAIM_ANNOTATION} {:?} is not a DNS label",
            crate::text::escape(v)
        ));
    }
    Ok(Some(v.clone()))
}

/// The metadata directory of the driver whose directory is `driver_dir`.
pub fn dir(driver_dir: &Path) -> PathBuf {
    driver_dir.join(DIR)
}

/// The directory of claim `uid`'s files (a UID
/// [`super::checkpoint::is_safe_uid`] accepts).
pub fn claim_dir(driver_dir: &Path, uid: &str) -> PathBuf {
    dir(driver_dir).join(uid)
}

/// The node's file of base request `base` of claim `uid`.
pub fn host_path(driver_dir: &Path, uid: &str, base: &str) -> PathBuf {
    claim_dir(driver_dir, uid).join(base).join(HOST_FILE)
}

/// Where the file of base request `base` of `claim` appears in the
/// container.
pub fn container_path(driver: &str, claim: &ClaimMeta, base: &str) -> String {
    let (sub, name) = match &claim.pod_claim_name {
        Some(p) if !p.is_empty() => (TEMPLATES_SUBDIR, p.as_str()),
        _ => (CLAIMS_SUBDIR, claim.name.as_str()),
    };
    format!("{CONTAINER_DIR}/{sub}/{name}/{base}/{driver}{FILE_SUFFIX}")
}

/// `path` is a directory, not a link to one, or absent.
fn real_dir_or_absent(path: &Path) -> Result<(), String> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("{}: {e}", path.display())),
        Ok(m) if m.file_type().is_dir() => Ok(()),
        Ok(m) => Err(format!(
            "{} is {}, not a directory; leaving it alone",
            path.display(),
            crate::fsio::describe(m.file_type())
        )),
    }
}

/// Writes the file `bytes` of base request `base` of claim `uid` under
/// `driver_dir` (directories 0755, the file 0644, as upstream), atomically,
/// under the metadata directory's lock; returns the file's path.
///
/// # Errors
/// What could not be written, naming the file.
pub fn write(driver_dir: &Path, uid: &str, base: &str, bytes: &[u8]) -> Result<PathBuf, String> {
    let file = host_path(driver_dir, uid, base);
    let bad = |why: String| format!("cannot write device metadata {}: {why}", file.display());
    let chain = |e: crate::write::Error| bad(format!("{:#}", anyhow::Error::from(e)));
    // Creates the directory (0755); temp files are removed at start under
    // this lock ([`tidy`]).
    let _lock = crate::write::lock_dir(&dir(driver_dir)).map_err(chain)?;
    let claim = claim_dir(driver_dir, uid);
    let request = claim.join(base);
    for d in [&claim, &request] {
        real_dir_or_absent(d).map_err(bad)?;
        if let Err(e) = std::fs::create_dir(d)
            && e.kind() != std::io::ErrorKind::AlreadyExists
        {
            return Err(bad(format!("cannot create {}: {e}", d.display())));
        }
    }
    crate::write::replace(&request, HOST_FILE, bytes).map_err(chain)?;
    Ok(file)
}

/// Removes the files of claim `uid` under `driver_dir`: its directory of
/// request files, and the file of cdigen's earlier format. Only regular
/// files cdigen names and the directories holding them are removed;
/// anything else there is left alone and reported.
///
/// # Errors
/// What is in the way or could not be removed, named.
pub fn remove(driver_dir: &Path, uid: &str) -> Result<(), String> {
    remove_legacy(driver_dir, uid)?;
    let claim = claim_dir(driver_dir, uid);
    let _lock = match std::fs::symlink_metadata(&claim) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("{}: {e}", claim.display())),
        Ok(m) if !m.file_type().is_dir() => {
            return Err(format!(
                "{} is {}, not a metadata directory; leaving it alone",
                claim.display(),
                crate::fsio::describe(m.file_type())
            ));
        }
        Ok(_) => crate::write::lock_dir(&dir(driver_dir))
            .map_err(|e| format!("{:#}", anyhow::Error::from(e)))?,
    };
    let entries = |d: &Path| {
        std::fs::read_dir(d)
            .and_then(Iterator::collect::<Result<Vec<_>, _>>)
            .map_err(|e| format!("cannot read {}: {e}", d.display()))
    };
    for request in entries(&claim)? {
        let path = request.path();
        let ft = request
            .file_type()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if !ft.is_dir() {
            return Err(format!(
                "{} is {}, not a request's metadata directory; leaving it alone",
                path.display(),
                crate::fsio::describe(ft)
            ));
        }
        for f in entries(&path)? {
            let p = f.path();
            let name = f.file_name();
            let ours = name
                .to_str()
                .is_some_and(|n| n == HOST_FILE || crate::write::is_temp_name(n));
            let ft = f.file_type().map_err(|e| format!("{}: {e}", p.display()))?;
            if !ours || !ft.is_file() {
                return Err(format!(
                    "{} is {}, not a metadata file; leaving it alone",
                    p.display(),
                    crate::fsio::describe(ft)
                ));
            }
            std::fs::remove_file(&p).map_err(|e| format!("cannot remove {}: {e}", p.display()))?;
        }
        std::fs::remove_dir(&path).map_err(|e| format!("cannot remove {}: {e}", path.display()))?;
    }
    std::fs::remove_dir(&claim).map_err(|e| format!("cannot remove {}: {e}", claim.display()))
}

/// Removes claim `uid`'s file of cdigen's earlier format, when it is a
/// regular file. A container that mounted it keeps what it read: the
/// mount holds the file.
fn remove_legacy(driver_dir: &Path, uid: &str) -> Result<(), String> {
    let file = driver_dir.join(LEGACY_DIR).join(format!("{uid}.json"));
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

/// At start: the temp files a driver killed while writing left in the
/// metadata directories under `driver_dir` (the current layout's request
/// directories and the earlier layout's directory), removed under the
/// metadata directory's lock; nothing else is touched.
///
/// # Errors
/// A directory that cannot be locked or read, or a file that cannot be
/// removed, named.
pub fn tidy(driver_dir: &Path) -> Result<(), String> {
    let chain = |e: crate::write::Error| format!("{:#}", anyhow::Error::from(e));
    let legacy = driver_dir.join(LEGACY_DIR);
    if legacy.is_dir() {
        crate::write::lock_and_tidy(&legacy).map_err(chain)?;
    }
    let top = dir(driver_dir);
    if !top.is_dir() {
        return Ok(());
    }
    let _lock = crate::write::lock_and_tidy(&top).map_err(chain)?;
    let subdirs = |d: &Path| -> Result<Vec<PathBuf>, String> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(d).map_err(|e| format!("cannot read {}: {e}", d.display()))? {
            let e = e.map_err(|e| format!("cannot read {}: {e}", d.display()))?;
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                out.push(e.path());
            }
        }
        Ok(out)
    };
    for claim in subdirs(&top)? {
        for request in subdirs(&claim)? {
            crate::write::remove_temp_files(&request).map_err(chain)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;

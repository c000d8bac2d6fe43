//! NodePrepareResources and NodeUnprepareResources, behind the gRPC
//! services of [`super::plugin`].
//!
//! Preparing a claim:
//! 1. its UID must be one ([`checkpoint::is_safe_uid`]); a claim already
//!    prepared is answered from the checkpoint, nothing rewritten;
//! 2. the claim is read from the API server ([`ClaimApi`]); its UID must
//!    be the kubelet's (a claim re-created under the same name is another
//!    claim) and it must be allocated;
//! 3. its allocation results of this driver in this node's pool are taken
//!    (others are another driver's or node's business); each device must
//!    be one this node offers now, or the claim fails naming it;
//! 4. the opaque configuration of this driver ([`DeviceConfig`]) adds
//!    environment variables to the devices of the requests it names;
//!    A DeviceClass's `passthrough: vfio-pci` has the PCI functions of
//!    the requests it names bound to `vfio-pci` first, their VFIO nodes in
//!    the per-claim spec ([`super::passthrough`]); unpreparing gives them
//!    back before anything else.
//! 5. with device metadata on ([`Options::metadata`]), a file per request
//!    of the claim, KEP-5304's ([`super::metadata`]);
//! 6. when a device has variables or the claim a metadata file, a
//!    transient per-claim CDI spec in the CDI directory:
//!    `k8s.<driver>-claim_<uid>.json`, kind `k8s.<driver>/claim`, a device
//!    `<uid>-<device>` per allocated device carrying its variables and the
//!    metadata mount;
//! 7. for network devices (a VF or vDPA device with a netdev), the claim's
//!    `status.devices` gets a `Ready` condition, `networkData` (interface,
//!    MAC address read from the host now) and `data`, the NPWG device-info
//!    content, as the CNI DRA driver reports them. A failure to write the
//!    status is logged and does not fail the claim: the devices are ready
//!    for the container either way, and the status is information (the
//!    driver needs `update` on `resourceclaims/status` for it);
//! 8. the answer is checkpointed.
//!
//! Each device's CDI IDs are its name in cdigen's own spec (the device
//! plugin's) and, when the per-claim spec has it, `k8s.<driver>/claim=
//! <uid>-<device>`. Its request name is the allocation result's, a
//! subrequest as `<request>/<subrequest>`, as the kubelet expects.
//!
//! A result with `adminAccess` (a monitoring claim, which the scheduler
//! allocates a device whatever other claims hold) is prepared like any
//! other, beside the device's other claims: everything written here is
//! the claim's own. What acts on the device itself, for one claim at a
//! time (passthrough's rebinding), skips the devices whose
//! [`Planned::admin_access`] / [`PreparedDevice::admin_access`] is set,
//! and is not undone when such a claim is unprepared.
//!
//! Unpreparing removes the per-claim spec and metadata files and forgets
//! the claim; one never prepared (or already unprepared) is a success.
//!
//! What calls change on the node (the claims' files and the checkpoint)
//! is changed one call at a time, as the kubelet plugin helper of
//! Kubernetes does (with [`Options::serialize`], one call of all the
//! driver's instances at a time, each starting from the checkpoint on
//! disk); the API server is asked outside that lock, so that
//! unpreparing, which needs no API call, never waits on it (a prepare
//! waiting on a hung API server holds up only itself).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::resource::v1::{
    AllocatedDeviceStatus, DeviceAttribute, DeviceRequestAllocationResult, NetworkDeviceData,
    ResourceClaim,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use serde::Deserialize;
use tokio::sync::{Mutex, watch};

use super::ClaimApi;
use super::checkpoint::{self, Checkpoint, PreparedClaim, PreparedDevice};
use super::metadata::{self, ClaimMeta, DeviceMeta};
use super::names::DraDevice;
use super::passthrough;
use crate::cdi::spec::{ContainerEdits, Device as CdiDevice, Mount, Spec};
use crate::root::{HostRoot, sys_path};
use crate::write::ManagedDir;

/// The `apiVersion` of [`DeviceConfig`].
pub const CONFIG_API_VERSION: &str = "dra.cdigen.io/v1alpha1";

/// The `kind` of [`DeviceConfig`].
pub const CONFIG_KIND: &str = "DeviceConfig";

/// The API's limit on an opaque configuration's parameters.
pub const MAX_PARAMETERS: usize = 10 * 1024;

/// Most variables one configuration sets.
pub const MAX_ENV: usize = 128;

/// Most claims one request may name (a pod has far fewer).
pub const MAX_CLAIMS: usize = 1024;

/// The CDI class of per-claim specs (kind `k8s.<driver>/claim`).
pub const CLAIM_CLASS: &str = "claim";

/// Longest wait for the CDI directory's lock (the watch may hold it
/// through a pass).
const LOCK_WAIT: Duration = Duration::from_secs(10);

/// Largest interface address file read.
const MAX_ADDRESS: u64 = 256;

/// A device's attributes as its ResourceSlice publishes them, for the
/// metadata file (`slices::attributes`, once the slices have them).
pub type AttributesFn = Arc<dyn Fn(&DraDevice) -> BTreeMap<String, DeviceAttribute> + Send + Sync>;

/// How claims are prepared.
#[derive(Clone)]
pub struct Options {
    /// The driver's name.
    pub driver: String,
    /// The node: the pool whose devices are ours.
    pub node: String,
    /// The driver's directory (`<plugin dir>/<driver>`): checkpoint and
    /// metadata files.
    pub driver_dir: PathBuf,
    /// Where per-claim CDI specs are written (`/var/run/cdi`).
    pub cdi_dir: PathBuf,
    /// The host as `--root` gives it: interface addresses are read from
    /// its `/sys/class/net`, confined to it.
    pub root: Arc<HostRoot>,
    /// Whether each prepared claim gets a device metadata file mounted
    /// into its containers.
    pub metadata: bool,
    /// The attributes of a device, for the metadata file.
    pub attributes: AttributesFn,
    /// Whether other instances of the driver share the checkpoint (a
    /// rolling update): each call then takes
    /// [`checkpoint::SERIALIZE_LOCK`] and re-reads the checkpoint first.
    pub serialize: bool,
    /// Passthrough by rebinding ([`super::passthrough`]).
    pub passthrough: passthrough::Settings,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("driver", &self.driver)
            .field("node", &self.node)
            .field("driver_dir", &self.driver_dir)
            .field("cdi_dir", &self.cdi_dir)
            .field("root", &self.root)
            .field("metadata", &self.metadata)
            .field("serialize", &self.serialize)
            .field("passthrough", &self.passthrough)
            .finish_non_exhaustive()
    }
}

/// A claim as the kubelet names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRef {
    /// Its namespace.
    pub namespace: String,
    /// Its UID.
    pub uid: String,
    /// Its name.
    pub name: String,
}

/// The opaque configuration cdigen reads (`opaque.parameters` of a
/// configuration whose `opaque.driver` is this driver), strictly:
///
/// ```yaml
/// apiVersion: dra.cdigen.io/v1alpha1
/// kind: DeviceConfig
/// env: {MY_VAR: value}
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeviceConfig {
    /// [`CONFIG_API_VERSION`].
    pub api_version: String,
    /// [`CONFIG_KIND`].
    pub kind: String,
    /// Variables set in the containers of the devices it applies to.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// `vfio-pci`: the devices it applies to are bound to `vfio-pci` while
    /// the claim is prepared ([`super::passthrough`]); a DeviceClass's
    /// only.
    #[serde(default)]
    pub passthrough: Option<String>,
}

/// Parses and checks one configuration's parameters.
///
/// # Errors
/// What is wrong with them, in words.
pub fn parse_config(parameters: &serde_json::Value) -> Result<DeviceConfig, String> {
    let size = serde_json::to_vec(parameters).map_or(usize::MAX, |b| b.len());
    if size > MAX_PARAMETERS {
        return Err(format!(
            "parameters of {size} bytes; at most {MAX_PARAMETERS}"
        ));
    }
    let c: DeviceConfig = serde_json::from_value(parameters.clone())
        .map_err(|e| format!("not a {CONFIG_KIND}: {e}"))?;
    if c.api_version != CONFIG_API_VERSION || c.kind != CONFIG_KIND {
        return Err(format!(
            "apiVersion {:?}, kind {:?}: this driver reads apiVersion {CONFIG_API_VERSION}, kind {CONFIG_KIND}",
            c.api_version, c.kind
        ));
    }
    if c.env.len() > MAX_ENV {
        return Err(format!("{} variables; at most {MAX_ENV}", c.env.len()));
    }
    for (k, v) in &c.env {
        check_env(k, v)?;
    }
    if let Some(p) = c.passthrough.as_deref()
        && p != passthrough::VFIO_PCI
    {
        return Err(format!(
            "passthrough: {:?}: the only passthrough is {}",
            crate::text::escape(p),
            passthrough::VFIO_PCI
        ));
    }
    Ok(c)
}

/// A variable name of `A-Z a-z 0-9 _` not starting with a digit, and a
/// value without NUL.
fn check_env(name: &str, value: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 256
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !ok {
        return Err(format!(
            "env: {:?} is not a variable name (A-Z a-z 0-9 _, not starting with a digit)",
            crate::text::escape(name)
        ));
    }
    if value.contains('\0') {
        return Err(format!("env: {name}: the value has a NUL byte"));
    }
    Ok(())
}

/// Whether a configuration naming `requests` applies to the result of
/// `request` (`<request>` or `<request>/<subrequest>`): all when it names
/// none; naming the request covers its subrequests.
fn applies(requests: &[String], request: &str) -> bool {
    let main = request.split_once('/').map_or(request, |(m, _)| m);
    requests.is_empty() || requests.iter().any(|r| r == request || r == main)
}

/// One device of a claim to prepare.
#[derive(Debug, Clone)]
pub struct Planned {
    /// The allocation result's request.
    pub request: String,
    /// The device.
    pub device: DraDevice,
    /// Variables from the configuration, `NAME=value`, sorted by name.
    pub env: Vec<String>,
    /// Whether the result is for administrative access
    /// ([`PreparedDevice::admin_access`]).
    pub admin_access: bool,
    /// The PCI function to bind to `vfio-pci` for the claim (its class
    /// asks for passthrough; not for an admin access).
    pub passthrough: Option<String>,
}

/// Whether `s` is a DNS subdomain (what the API allows as a claim name):
/// safe as a file name.
fn is_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(super::names::is_label)
}

/// The devices of `claim` to prepare for the kubelet's `want`, from the
/// current `devices`.
///
/// # Errors
/// A claim that is not the one asked for, not allocated, or allocated a
/// device this node does not offer, or has a bad configuration.
pub fn plan(
    opts: &Options,
    claim: &ResourceClaim,
    want: &ClaimRef,
    devices: &[DraDevice],
) -> Result<Vec<Planned>, String> {
    let uid = claim.metadata.uid.as_deref().unwrap_or_default();
    if uid != want.uid {
        return Err(format!(
            "the API server's claim {}/{} has UID {uid:?}, not {:?}: it was deleted and re-created",
            want.namespace, want.name, want.uid
        ));
    }
    if !is_subdomain(&want.name) {
        return Err(format!(
            "claim name {:?} is not a DNS subdomain",
            crate::text::escape(&want.name)
        ));
    }
    let Some(alloc) = claim
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
    else {
        return Err("the claim is not allocated".into());
    };
    // Class configuration first, the claim's after it, so that the
    // claim's wins, as the API says.
    let mut configs: Vec<(
        usize,
        &k8s_openapi::api::resource::v1::DeviceAllocationConfiguration,
    )> = alloc.config.iter().flatten().enumerate().collect();
    configs.sort_by_key(|(_, c)| c.source != "FromClass");
    let mut parsed: Vec<(Vec<String>, DeviceConfig)> = Vec::new();
    for (i, c) in configs {
        let Some(o) = c.opaque.as_ref().filter(|o| o.driver == opts.driver) else {
            continue;
        };
        let config = parse_config(&o.parameters.0)
            .map_err(|e| format!("config[{i}] ({}): {e}", c.source))?;
        if config.passthrough.is_some() && c.source != "FromClass" {
            return Err(format!(
                "config[{i}] ({}): passthrough is an administrator's choice: only a DeviceClass's \
                 configuration may set it, not a claim's",
                c.source
            ));
        }
        parsed.push((c.requests.clone().unwrap_or_default(), config));
    }
    let by_name: BTreeMap<&str, &DraDevice> =
        devices.iter().map(|d| (d.name.as_str(), d)).collect();
    let ours: Vec<&DeviceRequestAllocationResult> = alloc
        .results
        .iter()
        .flatten()
        .filter(|r| r.driver == opts.driver && r.pool == opts.node)
        .collect();
    let admin_requests: BTreeSet<&str> = claim
        .spec
        .devices
        .iter()
        .flat_map(|d| d.requests.iter().flatten())
        .filter(|r| r.exactly.as_ref().and_then(|e| e.admin_access) == Some(true))
        .map(|r| r.name.as_str())
        .collect();
    let mut out = Vec::new();
    for r in ours {
        metadata::base_request(&r.request)?;
        // The allocator grants admin access only to a request of the
        // claim's spec that asks for it (never a subrequest, which cannot);
        // the API server checked the namespace's label when the claim and
        // its allocation were written.
        if r.admin_access == Some(true) && !admin_requests.contains(r.request.as_str()) {
            return Err(format!(
                "the allocation grants admin access to request {}, which does not ask for it",
                crate::text::escape(&r.request)
            ));
        }
        let Some(d) = by_name.get(r.device.as_str()) else {
            return Err(format!(
                "device {:?} of pool {} (request {}) is not offered by this node now",
                crate::text::escape(&r.device),
                r.pool,
                r.request
            ));
        };
        let mut env: BTreeMap<&str, &str> = BTreeMap::new();
        let mut pass = false;
        for (requests, c) in &parsed {
            if applies(requests, &r.request) {
                env.extend(c.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
                pass |= c.passthrough.is_some();
            }
        }
        // An admin access looks at a device in use: never rebound.
        let pass = pass && r.admin_access != Some(true);
        out.push(Planned {
            request: r.request.clone(),
            device: (*d).clone(),
            env: env.iter().map(|(k, v)| format!("{k}={v}")).collect(),
            admin_access: r.admin_access == Some(true),
            passthrough: if pass {
                Some(passthrough::function_of(&opts.passthrough, d)?)
            } else {
                None
            },
        });
    }
    Ok(out)
}

/// The per-claim spec's kind: `k8s.<driver>/claim`.
pub fn claim_kind(driver: &str) -> String {
    format!("k8s.{driver}/{CLAIM_CLASS}")
}

/// The per-claim spec's file name: `k8s.<driver>-claim_<uid>.json`.
pub fn claim_spec_file(driver: &str, uid: &str) -> String {
    format!("k8s.{driver}-{CLAIM_CLASS}_{uid}.json")
}

/// Who the per-claim specs belong to in the CDI directory's state.
fn owner(driver: &str) -> String {
    format!("dra:{driver}")
}

/// The network interface of a device, with its MAC address read from the
/// host's `/sys/class/net` now, through `root` (absent when it cannot be
/// read, or its links leave the root).
fn network_data(root: &HostRoot, d: &DraDevice) -> Option<NetworkDeviceData> {
    let dev = &d.entry.device;
    let ifname = dev
        .net
        .as_ref()
        .and_then(|n| n.netdevs.first().cloned())
        .or_else(|| dev.vdpa.as_ref().and_then(|v| v.netdev.clone()))?;
    if ifname.is_empty() || ifname.contains('/') || ifname.starts_with('.') {
        return None;
    }
    let file = sys_path(&format!("class/net/{ifname}/address"));
    let mac = root
        .read_limited(&file, MAX_ADDRESS)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| {
            !s.is_empty() && s.len() <= 128 && s.bytes().all(|b| b.is_ascii_hexdigit() || b == b':')
        });
    Some(NetworkDeviceData {
        interface_name: Some(ifname),
        hardware_address: mac,
        ips: None,
    })
}

/// The status entry of a network device.
fn device_status(opts: &Options, d: &DraDevice, net: NetworkDeviceData) -> AllocatedDeviceStatus {
    let data = crate::generate::device_info(&d.entry.device)
        .filter(|i| crate::devinfo::validate(i).is_empty())
        .and_then(|i| serde_json::from_slice(&crate::devinfo::to_bytes(&i)).ok())
        .map(RawExtension);
    AllocatedDeviceStatus {
        driver: opts.driver.clone(),
        pool: opts.node.clone(),
        device: d.name.clone(),
        conditions: Some(vec![Condition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: "NetworkInterfaceReady".into(),
            message: "cdigen prepared the device".into(),
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::now()),
            observed_generation: None,
        }]),
        data,
        network_data: Some(net),
        share_id: None,
    }
}

/// What writing a claim's files produced.
struct Written {
    devices: Vec<PreparedDevice>,
    spec: bool,
    metadata: bool,
    status: Vec<AllocatedDeviceStatus>,
}

/// Writes the metadata files and the per-claim spec of `want`'s `planned`
/// devices (`pod_claim_name`: the pod's name for a claim made from a
/// template; `vfio`: the VFIO nodes of the functions passed through, by
/// PCI address); returns the answer. Blocking.
fn write_files(
    opts: &Options,
    want: &ClaimRef,
    pod_claim_name: Option<&str>,
    planned: &[Planned],
    vfio: &BTreeMap<String, Vec<crate::cdi::spec::DeviceNode>>,
) -> Result<Written, String> {
    let mut status = Vec::new();
    let mut nets: Vec<Option<NetworkDeviceData>> = Vec::new();
    // The host now, none of an earlier claim's lookups.
    let root = opts.root.fresh();
    for p in planned {
        let net = network_data(&root, &p.device);
        if let Some(n) = &net {
            status.push(device_status(opts, &p.device, n.clone()));
        }
        nets.push(net);
    }
    // The metadata file of each base request, and its mount.
    let mut mounts: BTreeMap<&str, Mount> = BTreeMap::new();
    if opts.metadata {
        let claim = ClaimMeta {
            namespace: want.namespace.clone(),
            name: want.name.clone(),
            uid: want.uid.clone(),
            pod_claim_name: pod_claim_name.map(String::from),
        };
        // By request (`<request>` or `<request>/<subrequest>`), in
        // allocation order, as the upstream writer groups them.
        let mut requests: Vec<(&str, Vec<DeviceMeta>)> = Vec::new();
        for (p, net) in planned.iter().zip(&nets) {
            let device = DeviceMeta {
                pool: opts.node.clone(),
                device: p.device.name.clone(),
                attributes: (opts.attributes)(&p.device),
                network_data: net.clone(),
            };
            match requests.iter_mut().find(|(r, _)| *r == p.request) {
                Some((_, devices)) => devices.push(device),
                None => requests.push((&p.request, vec![device])),
            }
        }
        for (request, devices) in &requests {
            let base = metadata::base_request(request)?;
            if mounts.contains_key(base) {
                return Err(format!(
                    "the allocation has results for two subrequests of request {base}"
                ));
            }
            let bytes = metadata::File::new(&opts.driver, &claim, request, devices).to_bytes()?;
            let file = metadata::write(&opts.driver_dir, &want.uid, base, &bytes)?;
            mounts.insert(
                base,
                Mount {
                    host_path: file.to_string_lossy().into_owned(),
                    container_path: metadata::container_path(&opts.driver, &claim, base),
                    options: ["ro", "nosuid", "nodev", "bind"].map(String::from).to_vec(),
                    mount_type: "bind".into(),
                },
            );
        }
    }
    let kind = claim_kind(&opts.driver);
    let mut spec = Spec {
        kind: kind.clone(),
        ..Spec::default()
    };
    let mut devices = Vec::new();
    for p in planned {
        let mount = metadata::base_request(&p.request)
            .ok()
            .and_then(|b| mounts.get(b));
        // A function passed through is the claim's device alone: its VFIO
        // nodes, not what the generator's spec says of its host driver.
        let nodes = p.passthrough.as_ref().and_then(|a| vfio.get(a));
        let mut ids = if nodes.is_some() {
            Vec::new()
        } else {
            vec![p.device.entry.cdi_name.clone()]
        };
        if !p.env.is_empty() || mount.is_some() || nodes.is_some() {
            let name = format!("{}-{}", want.uid, p.device.name);
            ids.push(format!("{kind}={name}"));
            spec.devices.push(CdiDevice {
                name,
                container_edits: ContainerEdits {
                    env: p.env.clone(),
                    device_nodes: nodes.cloned().unwrap_or_default(),
                    mounts: mount.into_iter().cloned().collect(),
                    ..ContainerEdits::default()
                },
                ..CdiDevice::default()
            });
        }
        devices.push(PreparedDevice {
            requests: vec![p.request.clone()],
            pool: opts.node.clone(),
            device: p.device.name.clone(),
            cdi_ids: ids,
            admin_access: p.admin_access,
        });
    }
    let has_spec = !spec.devices.is_empty();
    if has_spec {
        write_spec(opts, &want.uid, &mut spec)?;
    }
    Ok(Written {
        devices,
        spec: has_spec,
        metadata: !mounts.is_empty(),
        status,
    })
}

fn open_cdi_dir(dir: &Path) -> Result<ManagedDir, String> {
    let deadline = Instant::now() + LOCK_WAIT;
    ManagedDir::open_until(dir, &|| Instant::now() >= deadline)
        .map_err(|e| format!("{:#}", anyhow::Error::from(e)))
}

/// Validates and writes claim `uid`'s spec.
fn write_spec(opts: &Options, uid: &str, spec: &mut Spec) -> Result<(), String> {
    spec.cdi_version = crate::cdi::version::minimum_required(spec)
        .version
        .as_str()
        .to_string();
    let problems = crate::cdi::validate::validate(spec);
    if let Some(p) = problems.first() {
        return Err(format!(
            "the per-claim CDI spec would be invalid: {}: {}",
            p.location, p.message
        ));
    }
    let bytes = crate::cdi::codec::to_bytes(spec, crate::cdi::codec::Format::Json)
        .map_err(|e| format!("per-claim CDI spec: {e}"))?;
    let mut dir = open_cdi_dir(&opts.cdi_dir)?;
    dir.write(
        &claim_spec_file(&opts.driver, uid),
        &bytes,
        &owner(&opts.driver),
    )
    .map_err(|e| format!("{:#}", anyhow::Error::from(e)))?;
    Ok(())
}

/// Removes claim `uid`'s spec, when cdigen wrote it (one changed since, or
/// not a regular file, is left alone). Blocking.
fn remove_spec(opts: &Options, uid: &str) -> Result<(), String> {
    let name = claim_spec_file(&opts.driver, uid);
    if crate::fsio::FileId::at(&opts.cdi_dir.join(&name)).is_none() {
        return Ok(());
    }
    let mut dir = open_cdi_dir(&opts.cdi_dir)?;
    let who = owner(&opts.driver);
    let keep: BTreeSet<String> = dir
        .owned_by(&who)
        .into_iter()
        .filter(|n| *n != name)
        .collect();
    let pruned = dir
        .remove_stale(&who, &keep)
        .map_err(|e| format!("{:#}", anyhow::Error::from(e)))?;
    if !pruned.removed.contains(&name) {
        tracing::warn!(
            "{}: not written by cdigen, or changed since; leaving it alone",
            opts.cdi_dir.join(&name).display()
        );
    }
    Ok(())
}

/// Longest wait for [`checkpoint::SERIALIZE_LOCK`] (another instance's
/// call holds it while it writes files, never across an API call).
pub const SERIALIZE_WAIT: Duration = Duration::from_secs(30);

/// The claims prepared, locked for one call: with [`Options::serialize`],
/// every instance's lock held too and the claims just re-read from disk.
struct Locked<'a> {
    state: tokio::sync::MutexGuard<'a, Checkpoint>,
    _serial: Option<crate::write::DirLock>,
}

impl std::ops::Deref for Locked<'_> {
    type Target = Checkpoint;
    fn deref(&self) -> &Checkpoint {
        &self.state
    }
}

impl std::ops::DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut Checkpoint {
        &mut self.state
    }
}

/// Prepares and unprepares claims, one call at a time.
pub struct Preparer {
    opts: Options,
    api: Arc<dyn ClaimApi>,
    devices: watch::Receiver<Arc<Vec<DraDevice>>>,
    state: Mutex<Checkpoint>,
}

impl std::fmt::Debug for Preparer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Preparer")
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

/// One claim's answer: its devices, or why not, in words.
pub type Answer<T> = Result<T, String>;

impl Preparer {
    /// A preparer over the checkpoint in `opts.driver_dir`, the API
    /// server `api`, and the devices this node offers now (`devices`, fed
    /// after every watch pass). A checkpoint that cannot be read is
    /// logged (a warning naming the file) and the preparer starts with no
    /// claims; the warning is returned too.
    pub fn new(
        opts: Options,
        api: Arc<dyn ClaimApi>,
        devices: watch::Receiver<Arc<Vec<DraDevice>>>,
    ) -> (Self, Option<String>) {
        let (state, warning) = match checkpoint::load(&opts.driver_dir) {
            Ok(c) => (c, None),
            Err(e) => {
                let w = format!("{e}; starting with no prepared claims");
                tracing::warn!("{w}");
                (Checkpoint::default(), Some(w))
            }
        };
        let me = Preparer {
            opts,
            api,
            devices,
            state: Mutex::new(state),
        };
        (me, warning)
    }

    /// Gives back the PCI functions a crash left rebound
    /// ([`passthrough::Host::recover`]); what could not be, in words.
    pub async fn recover(&self) -> Vec<String> {
        let mut state = match self.lock().await {
            Ok(s) => s,
            Err(e) => return vec![e],
        };
        if state.rebinds.is_empty() {
            return Vec::new();
        }
        let (opts, mut st) = (self.opts.clone(), state.clone());
        let done = tokio::task::spawn_blocking(move || {
            let host = passthrough::Host {
                root: &opts.root,
                writer: opts.passthrough.writer.as_ref(),
                driver_dir: &opts.driver_dir,
            };
            let errors = host.recover(&mut st);
            (errors, st)
        })
        .await;
        match done {
            Ok((errors, st)) => {
                *state = st;
                errors
            }
            Err(e) => vec![format!("passthrough: {e}")],
        }
    }

    /// The options.
    pub fn options(&self) -> &Options {
        &self.opts
    }

    /// The prepared claims now (with [`Options::serialize`], as on disk
    /// now, when it can be read).
    pub async fn prepared(&self) -> Checkpoint {
        match self.lock().await {
            Ok(locked) => locked.clone(),
            Err(_) => self.state.lock().await.clone(),
        }
    }

    /// Locks the claims for one call. With [`Options::serialize`], waits
    /// (at most [`SERIALIZE_WAIT`]) for the other instances' calls, then
    /// re-reads the checkpoint: what another instance prepared or
    /// unprepared is known. A checkpoint that cannot be read is warned
    /// about, and the claims known here stand.
    async fn lock(&self) -> Result<Locked<'_>, String> {
        let mut state = self.state.lock().await;
        if !self.opts.serialize {
            return Ok(Locked {
                state,
                _serial: None,
            });
        }
        let dir = self.opts.driver_dir.clone();
        let (serial, loaded) = tokio::task::spawn_blocking(move || {
            let deadline = Instant::now() + SERIALIZE_WAIT;
            let lock = crate::write::lock_file_until(&dir, checkpoint::SERIALIZE_LOCK, &|| {
                Instant::now() >= deadline
            })
            .map_err(|e| {
                format!(
                    "another instance of the driver kept the checkpoint locked for {}s: {:#}",
                    SERIALIZE_WAIT.as_secs(),
                    anyhow::Error::from(e)
                )
            })?;
            Ok::<_, String>((lock, checkpoint::load(&dir)))
        })
        .await
        .map_err(|e| format!("checkpoint lock: {e}"))??;
        match loaded {
            Ok(c) => *state = c,
            Err(e) => tracing::warn!("{e}; going on with the claims this instance knows"),
        }
        Ok(Locked {
            state,
            _serial: Some(serial),
        })
    }

    /// Prepares `claims`: each one's answer, by UID, in order.
    pub async fn prepare(&self, claims: &[ClaimRef]) -> Vec<(String, Answer<Vec<PreparedDevice>>)> {
        let mut out = Vec::new();
        for c in claims {
            let answer = self.prepare_one(c).await.map_err(|e| {
                let e = format!("claim {}/{} ({}): {e}", c.namespace, c.name, c.uid);
                tracing::warn!("NodePrepareResources: {e}");
                e
            });
            out.push((c.uid.clone(), answer));
        }
        out
    }

    /// Prepares one claim. The state is locked only to look the claim up
    /// and to write its files and the checkpoint, never across an API call.
    async fn prepare_one(&self, want: &ClaimRef) -> Result<Vec<PreparedDevice>, String> {
        if !checkpoint::is_safe_uid(&want.uid) {
            return Err("the UID is not a UID".into());
        }
        if let Some(p) = self.lock().await?.claims.get(&want.uid) {
            return Ok(p.devices.clone());
        }
        let claim = self
            .api
            .get_claim(&want.namespace, &want.name)
            .await
            .map_err(|e| format!("cannot read it from the API server: {e}"))?;
        let (devices, status) = {
            let mut state = self.lock().await?;
            // Prepared meanwhile (the kubelet retried): that answer.
            if let Some(p) = state.claims.get(&want.uid) {
                return Ok(p.devices.clone());
            }
            let devices = Arc::clone(&self.devices.borrow());
            let planned = plan(&self.opts, &claim, want, &devices)?;
            let pod_claim = metadata::pod_claim_name(claim.metadata.annotations.as_ref())?;
            let (opts, w, p) = (self.opts.clone(), want.clone(), planned);
            let mut st = state.clone();
            let done = tokio::task::spawn_blocking(move || {
                let targets: Vec<(String, String)> = p
                    .iter()
                    .filter_map(|p| Some((p.device.name.clone(), p.passthrough.clone()?)))
                    .collect();
                let written = passthrough::prepare(
                    &opts.root,
                    &opts.passthrough,
                    &opts.driver_dir,
                    &mut st,
                    &w.uid,
                    &targets,
                    |vfio| {
                        let written = write_files(&opts, &w, pod_claim.as_deref(), &p, vfio);
                        // A claim that failed leaves no metadata behind (its
                        // UID is in no checkpoint: the files are nobody's).
                        if written.is_err()
                            && let Err(e) = metadata::remove(&opts.driver_dir, &w.uid)
                        {
                            tracing::warn!("claim {}/{}: {e}", w.namespace, w.name);
                        }
                        written
                    },
                );
                (written, st)
            })
            .await;
            let (written, st) = match done {
                Ok(d) => d,
                Err(e) => {
                    // What the writer saved before it died stands.
                    if let Ok(c) = checkpoint::load(&self.opts.driver_dir) {
                        *state = c;
                    }
                    return Err(format!("writer: {e}"));
                }
            };
            *state = st;
            let written = written?;
            passthrough::Host::mark_bound(&mut state, &want.uid);
            state.claims.insert(
                want.uid.clone(),
                PreparedClaim {
                    namespace: want.namespace.clone(),
                    name: want.name.clone(),
                    devices: written.devices.clone(),
                    spec: written.spec,
                    metadata: written.metadata,
                },
            );
            if let Err(e) = self.save(&state).await {
                state.claims.remove(&want.uid);
                return Err(e);
            }
            (written.devices, written.status)
        };
        if !status.is_empty() {
            let set = self
                .api
                .set_device_status(&want.namespace, &want.name, &self.opts.driver, status)
                .await;
            if let Err(e) = set {
                tracing::warn!(
                    "claim {}/{}: cannot write its device status (the claim is prepared anyway): {e}",
                    want.namespace,
                    want.name
                );
            }
        }
        tracing::info!(
            "prepared claim {}/{} ({}): {}",
            want.namespace,
            want.name,
            want.uid,
            devices
                .iter()
                .map(|d| d.device.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        Ok(devices)
    }

    async fn save(&self, state: &Checkpoint) -> Result<(), String> {
        let (dir, snapshot) = (self.opts.driver_dir.clone(), state.clone());
        tokio::task::spawn_blocking(move || checkpoint::save(&dir, &snapshot))
            .await
            .map_err(|e| format!("checkpoint writer: {e}"))?
    }

    /// Unprepares `claims`: each one's answer, by UID, in order. A claim
    /// not prepared is a success.
    pub async fn unprepare(&self, claims: &[ClaimRef]) -> Vec<(String, Answer<()>)> {
        let mut state = match self.lock().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("NodeUnprepareResources: {e}");
                return claims
                    .iter()
                    .map(|c| (c.uid.clone(), Err(e.clone())))
                    .collect();
            }
        };
        let mut out = Vec::new();
        for c in claims {
            let answer = self.unprepare_one(&mut state, c).await.map_err(|e| {
                let e = format!("claim {}/{} ({}): {e}", c.namespace, c.name, c.uid);
                tracing::warn!("NodeUnprepareResources: {e}");
                e
            });
            out.push((c.uid.clone(), answer));
        }
        out
    }

    async fn unprepare_one(&self, state: &mut Checkpoint, want: &ClaimRef) -> Result<(), String> {
        if !checkpoint::is_safe_uid(&want.uid) {
            return Err("the UID is not a UID".into());
        }
        // Functions passed through go back to their drivers first; one in
        // use keeps the claim prepared, for the kubelet to retry.
        let (opts, uid) = (self.opts.clone(), want.uid.clone());
        let mut st = state.clone();
        let (restored, st) = tokio::task::spawn_blocking(move || {
            let r = passthrough::unprepare(
                &opts.root,
                &opts.passthrough,
                &opts.driver_dir,
                &mut st,
                &uid,
            );
            (r, st)
        })
        .await
        .map_err(|e| format!("passthrough: {e}"))?;
        *state = st;
        restored?;
        // The files are named from the UID: removed even when the
        // checkpoint lost the claim (a crash between writing them and it).
        let (opts, uid) = (self.opts.clone(), want.uid.clone());
        tokio::task::spawn_blocking(move || {
            remove_spec(&opts, &uid)?;
            metadata::remove(&opts.driver_dir, &uid)
        })
        .await
        .map_err(|e| format!("remover: {e}"))??;
        if let Some(old) = state.claims.remove(&want.uid) {
            if let Err(e) = self.save(state).await {
                state.claims.insert(want.uid.clone(), old);
                return Err(e);
            }
            tracing::info!(
                "unprepared claim {}/{} ({})",
                want.namespace,
                want.name,
                want.uid
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::dra::{ApiError, ApiFuture};
    use serde_json::json;

    /// An API server no unprepare may call.
    struct NoApi;

    impl ClaimApi for NoApi {
        fn get_claim<'a>(&'a self, _: &'a str, _: &'a str) -> ApiFuture<'a, ResourceClaim> {
            Box::pin(async { Err(ApiError("no API server here".into())) })
        }
        fn set_device_status<'a>(
            &'a self,
            _: &'a str,
            _: &'a str,
            _: &'a str,
            _: Vec<AllocatedDeviceStatus>,
        ) -> ApiFuture<'a, ()> {
            Box::pin(async { Err(ApiError("no API server here".into())) })
        }
    }

    fn preparer(dir: &Path, serialize: bool) -> Preparer {
        let opts = Options {
            driver: "dra.cdigen.io".into(),
            node: "n".into(),
            driver_dir: dir.to_path_buf(),
            cdi_dir: dir.join("cdi"),
            root: Arc::new(HostRoot::open(Path::new("/")).unwrap()),
            metadata: false,
            attributes: Arc::new(|_| BTreeMap::new()),
            serialize,
            passthrough: passthrough::Settings::default(),
        };
        let (_tx, rx) = watch::channel(Arc::new(Vec::new()));
        Preparer::new(opts, Arc::new(NoApi), rx).0
    }

    fn with(uids: &[&str]) -> Checkpoint {
        let mut c = Checkpoint::default();
        for u in uids {
            c.claims.insert(
                (*u).into(),
                PreparedClaim {
                    namespace: "ns".into(),
                    name: (*u).into(),
                    devices: Vec::new(),
                    spec: false,
                    metadata: false,
                },
            );
        }
        c
    }

    fn uids(c: &Checkpoint) -> Vec<&str> {
        c.claims.keys().map(String::as_str).collect()
    }

    fn claim(uid: &str) -> ClaimRef {
        ClaimRef {
            namespace: "ns".into(),
            uid: uid.into(),
            name: uid.into(),
        }
    }

    /// Serialized (a rolling update), every call starts from the
    /// checkpoint on disk, waiting while another instance holds the lock;
    /// alone, the claims in memory stand.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn serialized_calls_start_from_the_checkpoint_on_disk() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        checkpoint::save(dir, &with(&["a"])).unwrap();
        let shared = preparer(dir, true);
        let alone = preparer(dir, false);
        // Another instance prepared b.
        checkpoint::save(dir, &with(&["a", "b"])).unwrap();
        assert_eq!(uids(&shared.prepared().await), ["a", "b"]);
        assert_eq!(uids(&alone.prepared().await), ["a"]);
        // Unpreparing b here keeps a, which only the disk had... and
        // another instance's c written meanwhile, under the lock.
        let other =
            crate::write::lock_file_until(dir, checkpoint::SERIALIZE_LOCK, &|| false).unwrap();
        let call = tokio::spawn(async move { shared.unprepare(&[claim("b")]).await });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!call.is_finished(), "waits for the other instance's call");
        checkpoint::save(dir, &with(&["a", "b", "c"])).unwrap();
        drop(other);
        let answers = call.await.unwrap();
        assert_eq!(answers, [("b".to_string(), Ok(()))]);
        assert_eq!(uids(&checkpoint::load(dir).unwrap()), ["a", "c"]);
    }

    #[test]
    fn configs_are_strict() {
        let ok = parse_config(&json!({
            "apiVersion": CONFIG_API_VERSION, "kind": CONFIG_KIND, "env": {"A_1": "x y"}
        }))
        .unwrap();
        assert_eq!(ok.env["A_1"], "x y");
        let e = parse_config(&json!({"apiVersion": "x/v1", "kind": "DeviceConfig"})).unwrap_err();
        assert_eq!(
            e,
            "apiVersion \"x/v1\", kind \"DeviceConfig\": this driver reads apiVersion dra.cdigen.io/v1alpha1, kind DeviceConfig"
        );
        let e = parse_config(&json!({
            "apiVersion": CONFIG_API_VERSION, "kind": CONFIG_KIND, "mounts": []
        }))
        .unwrap_err();
        assert!(
            e.starts_with("not a DeviceConfig: unknown field `mounts`"),
            "{e}"
        );
        let e = parse_config(&json!({
            "apiVersion": CONFIG_API_VERSION, "kind": CONFIG_KIND, "env": {"1A": "x"}
        }))
        .unwrap_err();
        assert_eq!(
            e,
            "env: \"1A\" is not a variable name (A-Z a-z 0-9 _, not starting with a digit)"
        );
        let e = parse_config(&json!({
            "apiVersion": CONFIG_API_VERSION, "kind": CONFIG_KIND, "env": {"A": "\u{0}"}
        }))
        .unwrap_err();
        assert_eq!(e, "env: A: the value has a NUL byte");
        let e = parse_config(&json!({"x": "y".repeat(11000)})).unwrap_err();
        assert!(e.ends_with("bytes; at most 10240"), "{e}");
    }

    #[test]
    fn configs_apply_to_requests_and_their_subrequests() {
        assert!(applies(&[], "a"));
        assert!(applies(&["a".into()], "a"));
        assert!(applies(&["a".into()], "a/small"));
        assert!(applies(&["a/small".into()], "a/small"));
        assert!(!applies(&["a/big".into()], "a/small"));
        assert!(!applies(&["b".into()], "a"));
    }

    #[test]
    fn names() {
        assert_eq!(claim_kind("dra.cdigen.io"), "k8s.dra.cdigen.io/claim");
        assert_eq!(
            claim_spec_file("dra.cdigen.io", "u1"),
            "k8s.dra.cdigen.io-claim_u1.json"
        );
        assert!(is_subdomain("my-claim.a"));
        assert!(!is_subdomain("../x"));
        assert!(!is_subdomain("a/b"));
    }
}

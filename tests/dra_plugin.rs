//! The DRA driver's kubelet side at its contracts: a fake plugin watcher
//! on the registration socket, and NodePrepareResources /
//! NodeUnprepareResources over the DRA socket in both versions, with a
//! fake API server holding claims, over devices generated from a fixture
//! machine.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[path = "support/claims.rs"]
mod claims;
#[path = "support/machine.rs"]
mod support;
#[path = "support/watcher.rs"]
mod watcher;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use cdigen::dra::ClaimApi;
use cdigen::dra::api::{v1, v1beta1};
use cdigen::dra::names::{self, DraDevice};
use cdigen::dra::plugin::{self, Config, RegistrationState, Running};
use claims::FakeApi;
use k8s_openapi::api::resource::v1::ResourceClaim;
use serde_json::{Value, json};
use tokio::sync::{oneshot, watch};

/// Devices generated from `tmp/root` into `tmp/cdi`, as the driver's
/// watch loop has them.
fn devices(tmp: &Path) -> Vec<DraDevice> {
    support::dra_devices(&tmp.join("root"), &tmp.join("cdi"))
}

const DRIVER: &str = "dra.cdigen.io";
const NODE: &str = "node1";
const VF: &str = "sriov-0000-3b-00-2";
const VF2: &str = "sriov-0000-3b-00-3";
const GPU: &str = "amd-gpu-0000-03-00-0";
const UID1: &str = "6f1d3c2a-8b4e-4a7f-9c21-0d5e7b3a9f10";
const UID2: &str = "0b9f2a44-1c3d-4e5f-8a7b-6c5d4e3f2a1b";
const UID3: &str = "a1b2c3d4-0000-4000-8000-000000000003";

/// An allocated claim: results (driver, pool, device, request), config
/// entries as the API has them.
fn claim(
    name: &str,
    uid: &str,
    results: &[(&str, &str, &str, &str)],
    config: Value,
) -> ResourceClaim {
    let results: Vec<Value> = results
        .iter()
        .map(|(driver, pool, device, request)| {
            json!({"driver": driver, "pool": pool, "device": device, "request": request})
        })
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"namespace": "ns", "name": name, "uid": uid},
        "spec": {},
        "status": {"allocation": {"devices": {"results": results, "config": config}}},
    }))
    .unwrap()
}

/// An opaque configuration of ours for `requests` setting `env`.
fn env_config(source: &str, requests: &[&str], env: Value) -> Value {
    json!({
        "source": source,
        "requests": requests,
        "opaque": {"driver": DRIVER, "parameters": {
            "apiVersion": "dra.cdigen.io/v1alpha1", "kind": "DeviceConfig", "env": env}},
    })
}

struct Env {
    tmp: tempfile::TempDir,
    devices: Vec<DraDevice>,
    api: Arc<FakeApi>,
}

impl Env {
    fn new(api: FakeApi) -> Env {
        let (tmp, _root) = support::machine("example");
        let devices = devices(tmp.path());
        Env {
            tmp,
            devices,
            api: Arc::new(api),
        }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.tmp.path().join(p)
    }

    fn config(&self, metadata: bool) -> Config {
        let root = cdigen::root::HostRoot::open(&self.path("root")).unwrap();
        let mut c = Config::new(
            DRIVER,
            NODE,
            &self.path("plugins"),
            &self.path("registry"),
            Arc::new(root),
        );
        c.prepare.cdi_dir = self.path("cdi");
        c.prepare.metadata = metadata;
        c
    }

    async fn start(&self, metadata: bool) -> (Running, oneshot::Sender<()>) {
        self.start_with(self.config(metadata)).await
    }

    /// Starts the plugin with `config` over this environment's devices and
    /// API, until the returned sender is used or dropped.
    async fn start_with(&self, config: Config) -> (Running, oneshot::Sender<()>) {
        let (_tx, rx) = watch::channel(Arc::new(self.devices.clone()));
        let (stop, stopped) = oneshot::channel::<()>();
        let running = plugin::start(
            config,
            Arc::clone(&self.api) as Arc<dyn ClaimApi>,
            rx,
            async move {
                let _ = stopped.await;
            },
        )
        .await
        .unwrap();
        (running, stop)
    }

    fn dra_socket(&self) -> PathBuf {
        self.path("plugins").join(DRIVER).join("dra.sock")
    }
}

/// A DRA client as the kubelet's DRA manager dials one: `connect` sends
/// `:authority` `localhost`, as its `grpc.NewClient("unix:" + endpoint)`
/// does (pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go).
async fn v1_client(
    sock: &Path,
) -> v1::dra_plugin_client::DraPluginClient<tonic::transport::Channel> {
    v1::dra_plugin_client::DraPluginClient::new(
        cdigen::deviceplugin::kubelet::connect(sock).await.unwrap(),
    )
}

async fn v1beta1_client(
    sock: &Path,
) -> v1beta1::dra_plugin_client::DraPluginClient<tonic::transport::Channel> {
    v1beta1::dra_plugin_client::DraPluginClient::new(
        cdigen::deviceplugin::kubelet::connect(sock).await.unwrap(),
    )
}

fn v1_claim(name: &str, uid: &str) -> v1::Claim {
    v1::Claim {
        namespace: "ns".into(),
        uid: uid.into(),
        name: name.into(),
    }
}

async fn prepare(
    sock: &Path,
    claims: &[(&str, &str)],
) -> BTreeMap<String, v1::NodePrepareResourceResponse> {
    let mut c = v1_client(sock).await;
    c.node_prepare_resources(v1::NodePrepareResourcesRequest {
        claims: claims.iter().map(|(n, u)| v1_claim(n, u)).collect(),
    })
    .await
    .unwrap()
    .into_inner()
    .claims
    .into_iter()
    .collect()
}

async fn unprepare(sock: &Path, claims: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut c = v1_client(sock).await;
    c.node_unprepare_resources(v1::NodeUnprepareResourcesRequest {
        claims: claims.iter().map(|(n, u)| v1_claim(n, u)).collect(),
    })
    .await
    .unwrap()
    .into_inner()
    .claims
    .into_iter()
    .map(|(k, v)| (k, v.error))
    .collect()
}

/// (device, CDI IDs) of an answer.
fn ids(r: &v1::NodePrepareResourceResponse) -> Vec<(String, Vec<String>)> {
    r.devices
        .iter()
        .map(|d| {
            assert_eq!(d.pool_name, NODE);
            (d.device_name.clone(), d.cdi_device_ids.clone())
        })
        .collect()
}

fn claim_spec(env: &Env, uid: &str) -> PathBuf {
    env.path("cdi")
        .join(format!("k8s.{DRIVER}-claim_{uid}.json"))
}

/// The node's metadata file of request `request` of claim `uid`.
fn request_metadata(env: &Env, uid: &str, request: &str) -> PathBuf {
    metadata_dir(env, uid).join(request).join("metadata.json")
}

/// The node's metadata directory of claim `uid` (its requests' files).
fn metadata_dir(env: &Env, uid: &str) -> PathBuf {
    env.path("plugins")
        .join(DRIVER)
        .join("dra-device-metadata")
        .join(uid)
}

/// The metadata of the claim `uid` prepared from `claim("…")` (its `vf`
/// request).
fn metadata_file(env: &Env, uid: &str) -> PathBuf {
    request_metadata(env, uid, "vf")
}

/// The spec at `path`, loaded and validated by cdigen's validator.
fn valid_spec(path: &Path) -> cdigen::cdi::spec::Spec {
    let spec = cdigen::cdi::load_file(path).unwrap();
    let problems = cdigen::cdi::validate::validate(&spec);
    assert!(problems.is_empty(), "{problems:?}");
    spec
}

/// The plugin watcher's side, as the kubelet's grpc-go client sends it
/// (the socket's path, percent-encoded, as `:authority`; tests/support/
/// watcher.rs): GetInfo, then NotifyRegistrationStatus on the same
/// connection; old sockets are replaced, anything else is refused; both
/// sockets go at shutdown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fake_plugin_watcher_registers_the_driver() {
    let env = Env::new(FakeApi::default());
    // A socket a previous run left.
    fs::create_dir_all(env.path("plugins").join(DRIVER)).unwrap();
    let _old = std::os::unix::net::UnixListener::bind(env.dra_socket()).unwrap();
    let (mut running, stop) = env.start(true).await;
    assert_eq!(
        running.registration_socket,
        env.path("registry").join("dra.cdigen.io-reg.sock")
    );
    assert!(running.checkpoint_warning.is_none());
    let mut reg = watcher::Watcher::dial(&running.registration_socket)
        .await
        .unwrap();
    assert!(
        reg.authority().starts_with("%2F")
            && reg.authority().ends_with("%2Fdra.cdigen.io-reg.sock"),
        "{}",
        reg.authority()
    );
    let info = reg.get_info().await.unwrap();
    assert_eq!(info.r#type, "DRAPlugin");
    assert_eq!(info.name, DRIVER);
    assert_eq!(Path::new(&info.endpoint), env.dra_socket());
    assert_eq!(
        info.supported_versions,
        ["v1.DRAPlugin", "v1beta1.DRAPlugin"]
    );
    // The endpoint answers (an empty request).
    assert!(prepare(Path::new(&info.endpoint), &[]).await.is_empty());
    assert_eq!(*running.registration.borrow(), RegistrationState::Pending);
    reg.notify(false, "version mismatch").await.unwrap();
    assert_eq!(
        *running.registration.borrow_and_update(),
        RegistrationState::Failed("version mismatch".into())
    );
    reg.notify(true, "").await.unwrap();
    running.registration.changed().await.unwrap();
    assert_eq!(
        *running.registration.borrow(),
        RegistrationState::Registered
    );
    let (dra, regsock) = (
        running.dra_socket.clone(),
        running.registration_socket.clone(),
    );
    drop(reg);
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), running.wait())
        .await
        .unwrap();
    assert!(!dra.exists() && !regsock.exists());

    // Something that is not a socket at a socket's path: refused, kept.
    fs::write(&regsock, "not mine").unwrap();
    let (_tx, rx) = watch::channel(Arc::new(Vec::new()));
    let e = plugin::start(
        env.config(true),
        Arc::clone(&env.api) as Arc<dyn ClaimApi>,
        rx,
        async {},
    )
    .await
    .unwrap_err()
    .to_string();
    assert_eq!(
        e,
        format!(
            "{} is a regular file, not a socket: not touching it (remove it, or choose another directory)",
            regsock.display()
        )
    );
    assert_eq!(fs::read_to_string(&regsock).unwrap(), "not mine");
    assert!(
        !dra.exists(),
        "the DRA socket is removed when the start fails"
    );
}

/// Hostile clients on the registration and DRA sockets (not HTTP/2, a
/// never-ending header block, a silent one) get their connections closed
/// or wait alone: the plugin watcher still registers the driver on its
/// own connection, and the DRA service still answers, to a client sending
/// the watcher's kind of authority too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_clients_do_not_keep_the_watcher_out() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    let env = Env::new(FakeApi::default());
    let (running, stop) = env.start(false).await;
    let closed = |mut c: tokio::net::UnixStream| async move {
        let mut sink = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut sink))
            .await
            .expect("the connection is closed")
            .map(|_| ())
    };
    let mut silent_ones = Vec::new();
    for sock in [&running.registration_socket, &running.dra_socket] {
        let mut silent = tokio::net::UnixStream::connect(sock).await.unwrap();
        silent.write_all(b"PRI * HTTP/2.0\r\n").await.unwrap();
        let mut garbage = tokio::net::UnixStream::connect(sock).await.unwrap();
        garbage
            .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .await
            .unwrap();
        let _ = closed(garbage).await;
        let mut endless = tokio::net::UnixStream::connect(sock).await.unwrap();
        let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        hello.extend([0, 0, 0, 4, 0, 0, 0, 0, 0]);
        // HEADERS without END_HEADERS, then CONTINUATIONs past 64 KiB.
        hello.extend([0, 0, 1, 1, 0, 0, 0, 0, 1, 0x82]);
        endless.write_all(&hello).await.unwrap();
        for _ in 0..80 {
            let mut f = vec![0, 4, 0, 9, 0, 0, 0, 0, 1];
            f.extend([0x82; 1024]);
            if endless.write_all(&f).await.is_err() {
                break;
            }
        }
        let _ = closed(endless).await;
        silent_ones.push(silent);
    }
    let info = watcher::register(&running.registration_socket)
        .await
        .unwrap();
    assert_eq!(info.name, DRIVER);
    let mut w = running.registration.clone();
    tokio::time::timeout(
        Duration::from_secs(5),
        w.wait_for(|s| *s == RegistrationState::Registered),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(prepare(&running.dra_socket, &[]).await.is_empty());
    drop(silent_ones);
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), running.wait())
        .await
        .unwrap();
}

/// An allocated claim resolves to cdigen's CDI names plus the per-claim
/// device (variables of the opaque configuration, the metadata mount) on
/// both service versions; other drivers' and pools' results are not
/// ours; a VF's status is written; a second prepare answers the same
/// without reading the claim again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepare_answers_cdi_ids_on_both_versions() {
    let env = Env::new(FakeApi::default());
    env.api.add(claim(
        "net",
        UID1,
        &[
            (DRIVER, NODE, VF, "vf"),
            (DRIVER, NODE, GPU, "gpu"),
            ("gpu.example.com", NODE, "gpu-0", "gpu"),
            (DRIVER, "other-node", VF2, "vf"),
        ],
        json!([
            env_config("FromClass", &[], json!({"A": "class", "B": "class"})),
            env_config("FromClaim", &["vf"], json!({"A": "claim"})),
            {"source": "FromClaim", "opaque": {"driver": "gpu.example.com", "parameters": {"x": 1}}},
        ]),
    ));
    let (running, stop) = env.start(true).await;
    let sock = running.dra_socket.clone();
    let r = prepare(&sock, &[("net", UID1)]).await;
    let one = &r[UID1];
    assert_eq!(one.error, "");
    let kind = "k8s.dra.cdigen.io/claim";
    assert_eq!(
        ids(one),
        [
            (
                VF.to_string(),
                vec![
                    "cdigen.io/vf=0000:3b:00.2".to_string(),
                    format!("{kind}={UID1}-{VF}")
                ]
            ),
            (
                GPU.to_string(),
                vec!["amd.com/gpu=0".to_string(), format!("{kind}={UID1}-{GPU}")]
            ),
        ]
    );
    assert_eq!(one.devices[0].request_names, ["vf"]);
    assert_eq!(one.devices[1].request_names, ["gpu"]);
    // The per-claim spec: valid, the claim's variables over the class's.
    let spec = valid_spec(&claim_spec(&env, UID1));
    assert_eq!(spec.kind, kind);
    let edits: BTreeMap<&str, &cdigen::cdi::spec::ContainerEdits> = spec
        .devices
        .iter()
        .map(|d| (d.name.as_str(), &d.container_edits))
        .collect();
    assert_eq!(
        edits[format!("{UID1}-{VF}").as_str()].env,
        ["A=claim", "B=class"]
    );
    assert_eq!(
        edits[format!("{UID1}-{GPU}").as_str()].env,
        ["A=class", "B=class"]
    );
    // Each device mounts the file of its request, at KEP-5304's path.
    let mount = &edits[format!("{UID1}-{GPU}").as_str()].mounts[0];
    assert_eq!(edits[format!("{UID1}-{GPU}").as_str()].mounts.len(), 1);
    assert_eq!(
        Path::new(&mount.host_path),
        request_metadata(&env, UID1, "gpu")
    );
    assert_eq!(
        mount.container_path,
        "/var/run/kubernetes.io/dra-device-attributes/resourceclaims/net/gpu/dra.cdigen.io-metadata.json"
    );
    let mount = &edits[format!("{UID1}-{VF}").as_str()].mounts[0];
    assert_eq!(Path::new(&mount.host_path), metadata_file(&env, UID1));
    assert_eq!(
        mount.container_path,
        "/var/run/kubernetes.io/dra-device-attributes/resourceclaims/net/vf/dra.cdigen.io-metadata.json"
    );
    // The metadata files, one per request, upstream's format.
    let meta: Value =
        serde_json::from_slice(&fs::read(metadata_file(&env, UID1)).unwrap()).unwrap();
    assert_eq!(meta["kind"], "DeviceMetadata");
    assert_eq!(meta["apiVersion"], "metadata.resource.k8s.io/v1alpha1");
    assert_eq!(
        meta["metadata"],
        json!({"namespace": "ns", "name": "net", "uid": UID1, "generation": 1})
    );
    assert_eq!(meta["requests"].as_array().unwrap().len(), 1);
    assert_eq!(meta["requests"][0]["name"], "vf");
    let vf = &meta["requests"][0]["devices"][0];
    assert_eq!(vf["driver"], DRIVER);
    assert_eq!(vf["pool"], NODE);
    assert_eq!(vf["name"], VF);
    // The attributes are the device's in its ResourceSlice.
    assert_eq!(vf["attributes"]["resource"]["string"], "cdigen.io/vf");
    assert_eq!(
        vf["attributes"]["resource.kubernetes.io/pciBusID"]["string"],
        "0000:3b:00.2"
    );
    assert_eq!(vf["attributes"]["pfName"]["string"], "ens1f0np0");
    assert_eq!(
        vf["networkData"],
        json!({"interfaceName": "ens1f0v0", "hardwareAddress": "9a:2c:11:4e:00:10"})
    );
    let gpu: Value =
        serde_json::from_slice(&fs::read(request_metadata(&env, UID1, "gpu")).unwrap()).unwrap();
    assert_eq!(gpu["requests"][0]["name"], "gpu");
    assert_eq!(gpu["requests"][0]["devices"][0]["name"], GPU);
    // The VF's status, as the CNI DRA driver reports it.
    {
        let statuses = env.api.statuses.lock().unwrap();
        assert_eq!(statuses.len(), 1);
        let (ns, name, driver, devices) = &statuses[0];
        assert_eq!(
            (ns.as_str(), name.as_str(), driver.as_str()),
            ("ns", "net", DRIVER)
        );
        assert_eq!(devices.len(), 1, "only the VF is a network device");
        let s = serde_json::to_value(&devices[0]).unwrap();
        assert_eq!(s["driver"], DRIVER);
        assert_eq!(s["pool"], NODE);
        assert_eq!(s["device"], VF);
        assert_eq!(s["conditions"][0]["type"], "Ready");
        assert_eq!(s["conditions"][0]["status"], "True");
        assert_eq!(s["conditions"][0]["reason"], "NetworkInterfaceReady");
        assert_eq!(
            s["networkData"],
            json!({"interfaceName": "ens1f0v0", "hardwareAddress": "9a:2c:11:4e:00:10"})
        );
        assert_eq!(s["data"]["type"], "pci");
        assert_eq!(s["data"]["pci"]["pci-address"], "0000:3b:00.2");
    }
    // Idempotent: the same answer, from the checkpoint.
    let gets = env.api.gets();
    let again = prepare(&sock, &[("net", UID1)]).await;
    assert_eq!(again[UID1], *one);
    assert_eq!(env.api.gets(), gets, "no second read of the claim");

    // v1beta1, without metadata: a device with no variables is cdigen's
    // name alone.
    env.api.add(claim(
        "plain",
        UID2,
        &[(DRIVER, NODE, VF2, "a"), (DRIVER, NODE, GPU, "b/small")],
        json!([env_config("FromClaim", &["b"], json!({"ONLY_B": "1"}))]),
    ));
    let mut c = v1beta1_client(&sock).await;
    let r = c
        .node_prepare_resources(v1beta1::NodePrepareResourcesRequest {
            claims: vec![v1beta1::Claim {
                namespace: "ns".into(),
                uid: UID2.into(),
                name: "plain".into(),
            }],
        })
        .await
        .unwrap()
        .into_inner();
    let two = &r.claims[UID2];
    assert_eq!(two.error, "");
    let got: Vec<(String, Vec<String>, Vec<String>)> = two
        .devices
        .iter()
        .map(|d| {
            (
                d.device_name.clone(),
                d.request_names.clone(),
                d.cdi_device_ids.clone(),
            )
        })
        .collect();
    // Metadata is on for this plugin: both devices have a per-claim device.
    assert_eq!(
        got,
        [
            (
                VF2.to_string(),
                vec!["a".to_string()],
                vec![
                    "cdigen.io/vf=0000:3b:00.3".to_string(),
                    format!("{kind}={UID2}-{VF2}")
                ]
            ),
            (
                GPU.to_string(),
                vec!["b/small".to_string()],
                vec!["amd.com/gpu=0".to_string(), format!("{kind}={UID2}-{GPU}")]
            ),
        ]
    );
    let spec = valid_spec(&claim_spec(&env, UID2));
    let gpu = spec.devices.iter().find(|d| d.name.ends_with(GPU)).unwrap();
    assert_eq!(
        gpu.container_edits.env,
        ["ONLY_B=1"],
        "a subrequest takes its request's config"
    );
    let vf = spec.devices.iter().find(|d| d.name.ends_with(VF2)).unwrap();
    assert!(vf.container_edits.env.is_empty());

    // What a runtime does with the answer: the Rust CDI library
    // injects every ID from the specs on disk.
    if let Some(tool) = support::cdi_rs("prepare_answers_cdi_ids_on_both_versions") {
        let all: Vec<String> = one
            .devices
            .iter()
            .flat_map(|d| d.cdi_device_ids.clone())
            .collect();
        let spec = inject(&env, &tool, &all);
        let env_set: BTreeSet<&str> = spec["process"]["env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        // Both devices set A; the later one (the GPU's, the class's value)
        // is what the container sees, as with any two CDI devices.
        assert_eq!(
            env_set,
            BTreeSet::from([
                "A=class",
                "B=class",
                "PATH=/usr/bin:/bin",
                "PCIDEVICE_CDIGEN_IO_VF_0000_3B_00_2=0000:3b:00.2",
            ])
        );
        let mounts: Vec<&str> = spec["mounts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["destination"].as_str().unwrap())
            .collect();
        assert!(
            mounts.contains(&"/var/run/kubernetes.io/dra-device-attributes/resourceclaims/net/vf/dra.cdigen.io-metadata.json"),
            "{mounts:?}"
        );
        let paths: Vec<&str> = spec["linux"]["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["path"].as_str().unwrap())
            .collect();
        for want in ["/dev/infiniband/uverbs2", "/dev/dri/renderD128", "/dev/kfd"] {
            assert!(paths.contains(&want), "{want} missing from {paths:?}");
        }
    }
    stop.send(()).unwrap();
    running.wait().await;
}

/// Injects `names` into a minimal OCI spec with cdi-rs from `tmp/cdi`;
/// returns the spec.
fn inject(env: &Env, tool: &Path, names: &[String]) -> Value {
    let config = env.path("config.json");
    let oci = json!({
        "ociVersion": "1.2.0",
        "process": {"args": ["sh"], "cwd": "/", "env": ["PATH=/usr/bin:/bin"], "user": {"uid": 0, "gid": 0}},
        "root": {"path": "rootfs"},
        "linux": {},
    });
    fs::write(&config, serde_json::to_vec_pretty(&oci).unwrap()).unwrap();
    let out = Command::new(tool)
        .arg("inject-bundle")
        .arg(env.path("cdi"))
        .arg(&config)
        .args(names)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cdi-rs: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&fs::read(&config).unwrap()).unwrap()
}

/// Every claim of a request gets an answer: the failures name what is
/// wrong, the good claim is prepared beside them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_claim_gets_an_answer_and_failures_say_why() {
    let env = Env::new(FakeApi {
        refuse_status: true,
        ..FakeApi::default()
    });
    env.api
        .add(claim("good", UID1, &[(DRIVER, NODE, VF, "vf")], json!([])));
    env.api.add(claim(
        "unknown",
        UID2,
        &[(DRIVER, NODE, "sriov-9999", "vf")],
        json!([]),
    ));
    env.api.add(claim(
        "recreated",
        "ffffffff-0000-4000-8000-000000000000",
        &[],
        json!([]),
    ));
    let mut unallocated = claim("unallocated", UID3, &[], json!([]));
    unallocated.status = None;
    env.api.add(unallocated);
    let bad_uid = "b0000000-0000-4000-8000-000000000001";
    env.api.add(claim(
        "badconfig",
        bad_uid,
        &[(DRIVER, NODE, VF2, "vf")],
        json!([{"source": "FromClaim", "opaque": {"driver": DRIVER, "parameters": {
            "apiVersion": "dra.cdigen.io/v1alpha1", "kind": "DeviceConfig", "mounts": ["/"]}}}]),
    ));
    let (running, stop) = env.start(false).await;
    let sock = running.dra_socket.clone();
    let missing = "c0000000-0000-4000-8000-000000000002";
    let recreated = "d0000000-0000-4000-8000-000000000003";
    let r = prepare(
        &sock,
        &[
            ("good", UID1),
            ("unknown", UID2),
            ("recreated", recreated),
            ("unallocated", UID3),
            ("badconfig", bad_uid),
            ("gone", missing),
            ("x", "../../etc"),
        ],
    )
    .await;
    let errors: BTreeMap<&str, &str> = r
        .iter()
        .map(|(k, v)| (k.as_str(), v.error.as_str()))
        .collect();
    assert_eq!(
        errors,
        BTreeMap::from([
            ("../../etc", "claim ns/x (../../etc): the UID is not a UID"),
            (UID1, ""),
            (
                UID2,
                "claim ns/unknown (0b9f2a44-1c3d-4e5f-8a7b-6c5d4e3f2a1b): device \"sriov-9999\" of pool node1 (request vf) is not offered by this node now"
            ),
            (
                UID3,
                "claim ns/unallocated (a1b2c3d4-0000-4000-8000-000000000003): the claim is not allocated"
            ),
            (
                bad_uid,
                "claim ns/badconfig (b0000000-0000-4000-8000-000000000001): config[0] (FromClaim): not a DeviceConfig: unknown field `mounts`, expected one of `apiVersion`, `kind`, `env`, `passthrough`"
            ),
            (
                missing,
                "claim ns/gone (c0000000-0000-4000-8000-000000000002): cannot read it from the API server: resourceclaims.resource.k8s.io \"gone\" not found"
            ),
            (
                recreated,
                "claim ns/recreated (d0000000-0000-4000-8000-000000000003): the API server's claim ns/recreated has UID \"ffffffff-0000-4000-8000-000000000000\", not \"d0000000-0000-4000-8000-000000000003\": it was deleted and re-created"
            ),
        ])
    );
    // Without metadata and variables, no per-claim spec: cdigen's name.
    assert_eq!(
        ids(&r[UID1]),
        [(
            VF.to_string(),
            vec!["cdigen.io/vf=0000:3b:00.2".to_string()]
        )]
    );
    assert!(!claim_spec(&env, UID1).exists());
    assert!(!metadata_dir(&env, UID1).exists());
    // The status write was refused: logged, the claim prepared anyway.
    assert_eq!(env.api.statuses.lock().unwrap().len(), 1);
    let prepared = running.preparer.prepared().await;
    assert_eq!(prepared.claims.keys().collect::<Vec<_>>(), [UID1]);
    stop.send(()).unwrap();
    running.wait().await;
}

/// Unprepare removes the claim's files and forgets it; after a restart it
/// works from the checkpoint alone; an unknown claim is a success; a
/// garbage checkpoint is a warning and an empty start.
/// A driver killed while writing its checkpoint or a metadata file leaves
/// `.cdigen-*.tmp` files (up to the checkpoint's size each): the next
/// start removes them from the driver's and the metadata directory, and
/// nothing else (a look-alike of another tool, the checkpoint, the
/// prepared claims' files).
#[tokio::test(flavor = "multi_thread")]
async fn a_start_removes_the_temp_files_a_killed_driver_left_and_nothing_else() {
    let env = Env::new(FakeApi::default());
    env.api
        .add(claim("a", UID1, &[(DRIVER, NODE, VF, "vf")], json!([])));
    let (running, stop) = env.start(true).await;
    let r = prepare(&running.dra_socket, &[("a", UID1)]).await;
    assert_eq!(r[UID1].error, "");
    stop.send(()).unwrap();
    running.wait().await;

    let driver_dir = env.path("plugins").join(DRIVER);
    let meta_dir = metadata_dir(&env, UID1).join("vf");
    let leftovers = [
        driver_dir.join(".cdigen-Xa91kq.tmp"),
        meta_dir.join(".cdigen-7fQz2m.tmp"),
    ];
    let foreign = [
        driver_dir.join(".cdigen-Xa91kq.tmp.orig"),
        driver_dir.join("cdigen-Xa91kq.tmp"),
        meta_dir.join(".cdigen-7fQz2m.tmpx"),
    ];
    for f in leftovers.iter().chain(&foreign) {
        fs::write(f, "{\"version\": 1, \"checks").unwrap();
    }
    let (running, stop) = env.start(true).await;
    assert_eq!(running.checkpoint_warning, None);
    for f in &leftovers {
        assert!(!f.exists(), "{} left", f.display());
    }
    for f in &foreign {
        assert!(f.exists(), "{} removed", f.display());
    }
    assert!(metadata_file(&env, UID1).is_file() && claim_spec(&env, UID1).is_file());
    assert_eq!(
        running
            .preparer
            .prepared()
            .await
            .claims
            .keys()
            .collect::<Vec<_>>(),
        [UID1]
    );
    stop.send(()).unwrap();
    running.wait().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unprepare_works_across_a_restart_from_the_checkpoint() {
    let env = Env::new(FakeApi::default());
    env.api
        .add(claim("a", UID1, &[(DRIVER, NODE, GPU, "gpu")], json!([])));
    env.api
        .add(claim("b", UID2, &[(DRIVER, NODE, VF, "vf")], json!([])));
    let (running, stop) = env.start(true).await;
    let sock = running.dra_socket.clone();
    let r = prepare(&sock, &[("a", UID1), ("b", UID2)]).await;
    assert_eq!((r[UID1].error.as_str(), r[UID2].error.as_str()), ("", ""));
    for uid in [UID1, UID2] {
        assert!(claim_spec(&env, uid).is_file());
        assert!(metadata_dir(&env, uid).is_dir());
    }
    let e = unprepare(&sock, &[("a", UID1), ("never", UID3)]).await;
    assert_eq!(
        e,
        BTreeMap::from([(UID1.into(), String::new()), (UID3.into(), String::new())])
    );
    assert!(!claim_spec(&env, UID1).exists() && !metadata_dir(&env, UID1).exists());
    stop.send(()).unwrap();
    running.wait().await;

    // A new process over the same directories; the API server no longer
    // has the claim.
    env.api.claims.lock().unwrap().clear();
    let (running, stop) = env.start(true).await;
    assert_eq!(
        running
            .preparer
            .prepared()
            .await
            .claims
            .keys()
            .collect::<Vec<_>>(),
        [UID2]
    );
    let gets = env.api.gets();
    // Prepared again: the checkpoint's answer.
    let again = prepare(&running.dra_socket, &[("b", UID2)]).await;
    assert_eq!(again[UID2], r[UID2]);
    let mut c = v1beta1_client(&running.dra_socket).await;
    let u = c
        .node_unprepare_resources(v1beta1::NodeUnprepareResourcesRequest {
            claims: vec![v1beta1::Claim {
                namespace: "ns".into(),
                uid: UID2.into(),
                name: "b".into(),
            }],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(u.claims[UID2].error, "");
    assert_eq!(env.api.gets(), gets, "no API call");
    assert!(!claim_spec(&env, UID2).exists() && !metadata_dir(&env, UID2).exists());
    assert!(running.preparer.prepared().await.claims.is_empty());
    stop.send(()).unwrap();
    running.wait().await;

    // Garbage in the checkpoint: a warning naming it, an empty start.
    let cp = env.path("plugins").join(DRIVER).join("checkpoint.json");
    fs::write(&cp, "\u{0}garbage").unwrap();
    let (running, stop) = env.start(true).await;
    let w = running.checkpoint_warning.clone().unwrap();
    assert!(
        w.starts_with(&format!("checkpoint {}: not a checkpoint: ", cp.display()))
            && w.ends_with("; starting with no prepared claims"),
        "{w}"
    );
    assert!(running.preparer.prepared().await.claims.is_empty());
    stop.send(()).unwrap();
    running.wait().await;
}

/// Unpreparing needs no API call, so a hung API server never holds it up,
/// even while a prepare waits on it; that prepare completes once the API
/// answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unprepare_never_waits_on_a_hung_api_server() {
    let env = Env::new(FakeApi::default());
    env.api
        .add(claim("a", UID1, &[(DRIVER, NODE, GPU, "gpu")], json!([])));
    env.api
        .add(claim("b", UID2, &[(DRIVER, NODE, VF, "vf")], json!([])));
    let (running, stop) = env.start(true).await;
    let sock = running.dra_socket.clone();
    let r = prepare(&sock, &[("a", UID1)]).await;
    assert_eq!(r[UID1].error, "");

    // The API server hangs; a prepare of b waits on it.
    let hung = env.api.gate.write().await;
    let gets = env.api.gets();
    let waiting = tokio::spawn({
        let sock = sock.clone();
        async move { prepare(&sock, &[("b", UID2)]).await }
    });
    while env.api.gets() == gets {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let started = std::time::Instant::now();
    let e = tokio::time::timeout(Duration::from_secs(2), unprepare(&sock, &[("a", UID1)]))
        .await
        .expect("unprepare waited on the hung API server");
    assert_eq!(e, BTreeMap::from([(UID1.into(), String::new())]));
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(!claim_spec(&env, UID1).exists() && !metadata_dir(&env, UID1).exists());
    assert!(
        !waiting.is_finished(),
        "the prepare waits on the API server"
    );

    // The API answers: b is prepared.
    drop(hung);
    let r = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(r[UID2].error, "");
    assert_eq!(
        running
            .preparer
            .prepared()
            .await
            .claims
            .keys()
            .collect::<Vec<_>>(),
        [UID2]
    );
    stop.send(()).unwrap();
    running.wait().await;
}

// --- Rolling update: two instances at once ---------------------------------

const POD_A: &str = "11111111-aaaa-4aaa-8aaa-aaaaaaaaaaaa";
const POD_B: &str = "22222222-bbbb-4bbb-8bbb-bbbbbbbbbbbb";

impl Env {
    /// Starts the instance of pod `uid` (a rolling update's) over this
    /// environment's directories.
    async fn start_pod(&self, uid: &str) -> (Running, oneshot::Sender<()>) {
        self.start_with(self.config(true).with_pod_uid(uid)).await
    }
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

/// Two instances of the driver, pods A and B, serve at once over the same
/// directories, each on its own sockets: a claim prepared through A is
/// known to B (answered from the checkpoint, no API call) and unprepared
/// through it; prepares on both at once never lose an entry; A stopping
/// removes only its own sockets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_of_a_rolling_update_share_the_checkpoint() {
    let env = Env::new(FakeApi::default());
    env.api
        .add(claim("a", UID1, &[(DRIVER, NODE, GPU, "gpu")], json!([])));
    env.api
        .add(claim("b", UID2, &[(DRIVER, NODE, VF, "vf")], json!([])));
    env.api
        .add(claim("c", UID3, &[(DRIVER, NODE, VF2, "vf")], json!([])));
    let (a, stop_a) = env.start_pod(POD_A).await;
    let (b, stop_b) = env.start_pod(POD_B).await;
    let driver_dir = env.path("plugins").join(DRIVER);
    assert_eq!(a.dra_socket, driver_dir.join(format!("dra-{POD_A}.sock")));
    assert_eq!(b.dra_socket, driver_dir.join(format!("dra-{POD_B}.sock")));
    assert_eq!(
        names(&env.path("registry")),
        [
            format!("{DRIVER}-{POD_A}-reg.sock"),
            format!("{DRIVER}-{POD_B}-reg.sock")
        ]
    );
    // Both registered, as the kubelet's plugin watcher does it (its
    // percent-encoded socket path as :authority): each one's GetInfo names
    // its own DRA socket.
    for r in [&a, &b] {
        let info = watcher::register(&r.registration_socket).await.unwrap();
        assert_eq!(info.name, DRIVER);
        assert_eq!(Path::new(&info.endpoint), r.dra_socket);
    }

    let r = prepare(&a.dra_socket, &[("a", UID1)]).await;
    assert_eq!(r[UID1].error, "");
    assert_eq!(
        b.preparer
            .prepared()
            .await
            .claims
            .keys()
            .collect::<Vec<_>>(),
        [UID1],
        "B sees what A prepared"
    );
    let gets = env.api.gets();
    let again = prepare(&b.dra_socket, &[("a", UID1)]).await;
    assert_eq!(again[UID1], r[UID1], "B answers from A's checkpoint");
    assert_eq!(env.api.gets(), gets, "no API call");
    assert_eq!(unprepare(&b.dra_socket, &[("a", UID1)]).await[UID1], "");
    assert!(!claim_spec(&env, UID1).exists() && !metadata_dir(&env, UID1).exists());
    assert!(
        a.preparer.prepared().await.claims.is_empty(),
        "A sees it gone"
    );

    // At once on both: neither write loses the other's claim.
    let (ra, rb) = tokio::join!(
        prepare(&a.dra_socket, &[("b", UID2)]),
        prepare(&b.dra_socket, &[("c", UID3)])
    );
    assert_eq!((ra[UID2].error.as_str(), rb[UID3].error.as_str()), ("", ""));
    let on_disk = cdigen::dra::checkpoint::load(&driver_dir).unwrap();
    assert_eq!(on_disk.claims.keys().collect::<Vec<_>>(), [UID2, UID3]);

    // A stops: its sockets go, B's stay and B serves on.
    stop_a.send(()).unwrap();
    a.wait().await;
    assert!(!driver_dir.join(format!("dra-{POD_A}.sock")).exists());
    assert_eq!(
        names(&env.path("registry")),
        [format!("{DRIVER}-{POD_B}-reg.sock")]
    );
    assert!(b.dra_socket.exists());
    let e = unprepare(&b.dra_socket, &[("b", UID2), ("c", UID3)]).await;
    assert_eq!((e[UID2].as_str(), e[UID3].as_str()), ("", ""));
    assert!(
        cdigen::dra::checkpoint::load(&driver_dir)
            .unwrap()
            .claims
            .is_empty()
    );
    stop_b.send(()).unwrap();
    b.wait().await;
    assert!(names(&env.path("registry")).is_empty());
}

/// A new instance removes the sockets of an instance whose lock proves it
/// gone (killed before it could remove them), and leaves those of a live
/// instance, and those nothing tells about (with a warning).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_instance_clears_only_the_sockets_of_a_dead_one() {
    let env = Env::new(FakeApi::default());
    let driver_dir = env.path("plugins").join(DRIVER);
    let registry = env.path("registry");
    fs::create_dir_all(&driver_dir).unwrap();
    fs::create_dir_all(&registry).unwrap();
    let dead = "33333333-dddd-4ddd-8ddd-dddddddddddd";
    let alive = "44444444-eeee-4eee-8eee-eeeeeeeeeeee";
    let unknown = "55555555-ffff-4fff-8fff-ffffffffffff";
    let mut keep = Vec::new();
    for uid in [dead, alive, unknown] {
        keep.push(
            std::os::unix::net::UnixListener::bind(driver_dir.join(format!("dra-{uid}.sock")))
                .unwrap(),
        );
        keep.push(
            std::os::unix::net::UnixListener::bind(
                registry.join(format!("{DRIVER}-{uid}-reg.sock")),
            )
            .unwrap(),
        );
    }
    // The dead one's lock file, free; the live one's, held.
    let lock = |uid: &str| driver_dir.join(format!(".cdigen-dra-driver-{uid}.lock"));
    fs::write(lock(dead), "1\n").unwrap();
    let _live = plugin::lock_driver_dir(&driver_dir, Some(alive)).unwrap();
    let (b, stop_b) = env.start_pod(POD_B).await;
    assert!(!driver_dir.join(format!("dra-{dead}.sock")).exists());
    assert!(!registry.join(format!("{DRIVER}-{dead}-reg.sock")).exists());
    assert!(!lock(dead).exists());
    for uid in [alive, unknown] {
        assert!(driver_dir.join(format!("dra-{uid}.sock")).exists(), "{uid}");
        assert!(
            registry.join(format!("{DRIVER}-{uid}-reg.sock")).exists(),
            "{uid}"
        );
    }
    // The live one's lock refuses a second instance of its pod.
    let e = plugin::lock_driver_dir(&driver_dir, Some(alive))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(&format!("cannot serve in {}", driver_dir.display())),
        "{e}"
    );
    let e = plugin::lock_driver_dir(&driver_dir, Some("../x"))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("pod UID \"../x\": not a UID"), "{e}");
    stop_b.send(()).unwrap();
    b.wait().await;
}

/// A device in a health report, as a fake kubelet reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Health {
    pool: String,
    device: String,
    health: String,
    message: String,
    timeout: i64,
}

/// A fake kubelet's resource health stream over the DRA socket, of either
/// version: [`HealthStream::next`] gives each report.
macro_rules! health_stream {
    ($name:ident, $v:ident) => {
        struct $name(tonic::Streaming<cdigen::dra::api::$v::NodeWatchResourcesResponse>);

        impl $name {
            async fn open(sock: &Path) -> $name {
                use cdigen::dra::api::$v as h;
                let mut c = h::dra_resource_health_client::DraResourceHealthClient::new(
                    cdigen::deviceplugin::kubelet::connect(sock).await.unwrap(),
                );
                let s = c
                    .node_watch_resources(h::NodeWatchResourcesRequest {})
                    .await
                    .unwrap()
                    .into_inner();
                $name(s)
            }

            /// The next report, `None` when the stream ended with OK;
            /// waits at most [`HEALTH_WAIT`].
            async fn next(&mut self) -> Option<Vec<Health>> {
                let m = tokio::time::timeout(HEALTH_WAIT, self.0.message())
                    .await
                    .expect("no health report in time")
                    .unwrap()?;
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_secs();
                Some(
                    m.devices
                        .into_iter()
                        .map(|d| {
                            let age = now.abs_diff(u64::try_from(d.last_updated_time).unwrap());
                            assert!(age < 60, "{d:?}");
                            let id = d.device.clone().unwrap();
                            Health {
                                pool: id.pool_name,
                                device: id.device_name,
                                health: d.health().as_str_name().to_string(),
                                message: d.message,
                                timeout: d.health_check_timeout_seconds,
                            }
                        })
                        .collect(),
                )
            }
        }
    };
}

health_stream!(HealthV1alpha1, health_v1alpha1);
health_stream!(HealthV1, health_v1);

/// How long a health report is waited for.
const HEALTH_WAIT: Duration = Duration::from_secs(10);

/// The resource health stream as the 1.36 kubelet (`v1alpha1`) and later
/// ones (`v1`) read it over the DRA socket: a full report when it opens,
/// every device of the pool under the names the slices publish and
/// NodePrepareResources answers, HEALTHY; a device whose node stops
/// matching the kernel's numbers turns UNHEALTHY with the inventory's
/// reason (the health of the slices' taints); the report comes again
/// every period unasked; a kubelet that goes away leaves no stream behind;
/// at shutdown the stream ends with OK.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_health_stream_reports_every_device_and_follows_its_health() {
    let env = Env::new(FakeApi::default());
    env.api
        .add(claim("net", UID1, &[(DRIVER, NODE, VF2, "vf")], json!([])));
    let (devices_tx, devices_rx) = watch::channel(Arc::new(env.devices.clone()));
    let mut config = env.config(false);
    config.health_period = Duration::from_millis(200);
    let (stop, stopped) = oneshot::channel::<()>();
    let running = plugin::start(
        config,
        Arc::clone(&env.api) as Arc<dyn ClaimApi>,
        devices_rx,
        async move {
            let _ = stopped.await;
        },
    )
    .await
    .unwrap();
    let sock = running.dra_socket.clone();
    let healthy: Vec<Health> = env
        .devices
        .iter()
        .map(|d| Health {
            pool: NODE.into(),
            device: d.name.clone(),
            health: "HEALTHY".into(),
            message: String::new(),
            timeout: 1,
        })
        .collect();
    assert!(healthy.iter().any(|h| h.device == VF2), "{healthy:?}");

    let mut a = HealthV1alpha1::open(&sock).await;
    let mut b = HealthV1::open(&sock).await;
    assert_eq!(a.next().await.unwrap(), healthy);
    assert_eq!(b.next().await.unwrap(), healthy);
    // The names NodePrepareResources answers are the reported ones.
    let r = prepare(&sock, &[("net", UID1)]).await;
    assert_eq!(ids(&r[UID1])[0].0, VF2);

    // uverbs3 (VF 0000:3b:00.3's) gets other numbers than the kernel's.
    support::edit_manifest(&env.path("root"), |l| {
        Some(if l.starts_with("/dev/infiniband/uverbs3 ") {
            l.replace("231:195", "231:199")
        } else {
            l.to_string()
        })
    });
    devices_tx.send_replace(Arc::new(devices(env.tmp.path())));
    let mut sick = healthy.clone();
    let vf2 = sick.iter_mut().find(|h| h.device == VF2).unwrap();
    vf2.health = "UNHEALTHY".into();
    vf2.message = "/dev/infiniband/uverbs3 is 231:199, the kernel says 231:195".into();
    let mut got = a.next().await.unwrap();
    while got != sick {
        assert_eq!(got, healthy, "neither the old report nor the new");
        got = a.next().await.unwrap();
    }
    let mut got = b.next().await.unwrap();
    while got != sick {
        assert_eq!(got, healthy, "neither the old report nor the new");
        got = b.next().await.unwrap();
    }
    // Nothing changes: the report comes again, every period.
    let start = std::time::Instant::now();
    assert_eq!(a.next().await.unwrap(), sick);
    assert_eq!(a.next().await.unwrap(), sick);
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );

    // A kubelet that goes away: its stream's task ends.
    let open = devices_tx.receiver_count();
    drop(a);
    let end = std::time::Instant::now() + HEALTH_WAIT;
    while devices_tx.receiver_count() != open - 1 {
        assert!(
            std::time::Instant::now() < end,
            "the stream outlived its kubelet"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // Shutdown ends the other stream with OK, and the plugin stops.
    stop.send(()).unwrap();
    loop {
        match b.next().await {
            None => break,
            Some(r) => assert_eq!(r, sick),
        }
    }
    drop(b);
    running.wait().await;
}

/// A VF whose PCIe AER fatal counter rises after the driver first read
/// it: the next pass publishes it with the `AERFatal` taint (NoExecute),
/// and the health stream turns it UNHEALTHY with the file and the counts;
/// the other devices stay healthy. Counts already there at the first
/// reading are the baseline, not a problem. With `AERFatal` ignored
/// (`--ignore-health`) the same rise leaves it healthy and untainted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rising_aer_fatal_counter_taints_the_vf_and_turns_it_unhealthy() {
    use cdigen::deviceplugin::inventory::Inventory;
    use cdigen::deviceplugin::signals::{Checks, Code};
    let env = Env::new(FakeApi::default());
    let (root, cdi) = (env.path("root"), env.path("cdi"));
    let vf = root.join("sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.3");
    let counts = |surprise: u32, total: u32| {
        format!(
            "Undefined 0\nData Link Protocol 0\nSurprise Down Error {surprise}\n\
             Poisoned TLP 0\nCompletion Timeout 1\nTOTAL_ERR_FATAL {total}\n"
        )
    };
    fs::write(vf.join("aer_dev_fatal"), counts(0, 1)).unwrap();
    let checks = Checks::default();
    let ignoring = Checks::ignoring([Code::AerFatal]);
    let first = support::inventory_after(&root, &cdi, &Inventory::default(), &checks);
    let first_ignoring = support::inventory_after(&root, &cdi, &Inventory::default(), &ignoring);
    let devices = names::devices(&first);
    assert!(devices.iter().all(|d| d.entry.healthy()), "{devices:?}");

    let (devices_tx, devices_rx) = watch::channel(Arc::new(devices));
    let mut config = env.config(false);
    config.health_period = Duration::from_millis(200);
    let (stop, stopped) = oneshot::channel::<()>();
    let running = plugin::start(
        config,
        Arc::clone(&env.api) as Arc<dyn ClaimApi>,
        devices_rx,
        async move {
            let _ = stopped.await;
        },
    )
    .await
    .unwrap();
    let mut stream = HealthV1::open(&running.dra_socket).await;
    let healthy = stream.next().await.unwrap();
    assert!(healthy.iter().all(|h| h.health == "HEALTHY"), "{healthy:?}");

    // A surprise down: the fatal total rises from 1 to 2.
    fs::write(vf.join("aer_dev_fatal"), counts(1, 2)).unwrap();
    let second = support::inventory_after(&root, &cdi, &first, &checks);
    let devices = names::devices(&second);
    let sick: Vec<&DraDevice> = devices.iter().filter(|d| !d.entry.healthy()).collect();
    assert_eq!(sick.len(), 1, "{devices:?}");
    assert_eq!(sick[0].name, VF2);
    let why = "1 new fatal PCIe error(s) (Surprise Down Error +1): /sys/devices/pci0000:3a/\
         0000:3a:00.0/0000:3b:00.3/aer_dev_fatal TOTAL_ERR_FATAL is 2, 1 when cdigen first read it";
    // The slices: the VF tainted, evicting the pods that do not tolerate it.
    let published = cdigen::dra::slices::slices(&devices, DRIVER, NODE, 2);
    let taints: Vec<(String, String, String)> = published
        .iter()
        .flat_map(|s| s.spec.devices.clone().unwrap_or_default())
        .flat_map(|d| {
            d.taints.unwrap_or_default().into_iter().map(move |t| {
                (
                    d.name.clone(),
                    format!("{}={}", t.key, t.value.unwrap()),
                    t.effect,
                )
            })
        })
        .collect();
    assert_eq!(
        taints,
        [(
            VF2.to_string(),
            "dra.cdigen.io/unhealthy=AERFatal".to_string(),
            "NoExecute".to_string()
        )]
    );
    // The health stream: UNHEALTHY, with the reason.
    devices_tx.send_replace(Arc::new(devices.clone()));
    let mut want = healthy.clone();
    let h = want.iter_mut().find(|h| h.device == VF2).unwrap();
    h.health = "UNHEALTHY".into();
    h.message = why.to_string();
    let mut got = stream.next().await.unwrap();
    while got != want {
        assert_eq!(got, healthy, "neither the old report nor the new");
        got = stream.next().await.unwrap();
    }
    // It stays so on the next pass: the baseline is the first reading.
    let third = support::inventory_after(&root, &cdi, &second, &checks);
    assert!(
        !names::devices(&third)
            .iter()
            .find(|d| d.name == VF2)
            .unwrap()
            .entry
            .healthy()
    );

    // Ignored: the same rise leaves every device healthy and untainted.
    let ignored = support::inventory_after(&root, &cdi, &first_ignoring, &ignoring);
    let devices = names::devices(&ignored);
    assert!(devices.iter().all(|d| d.entry.healthy()), "{devices:?}");
    let published = cdigen::dra::slices::slices(&devices, DRIVER, NODE, 3);
    assert!(
        published
            .iter()
            .flat_map(|s| s.spec.devices.clone().unwrap_or_default())
            .all(|d| d.taints.is_none())
    );
    devices_tx.send_replace(Arc::new(devices));
    let mut got = stream.next().await.unwrap();
    while got != healthy {
        assert_eq!(got, want, "neither the old report nor the new");
        got = stream.next().await.unwrap();
    }

    stop.send(()).unwrap();
    drop(stream);
    running.wait().await;
}

/// A claim allocated for admin access by `request` of its spec (which
/// asks for it, `spec_admin`) to `device`, as the allocator writes it.
fn admin_claim(name: &str, uid: &str, device: &str, spec_admin: bool) -> ResourceClaim {
    serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"namespace": "ns", "name": name, "uid": uid},
        "spec": {"devices": {"requests": [{"name": "vf", "exactly": {
            "deviceClassName": "vf.cdigen.io", "adminAccess": spec_admin}}]}},
        "status": {"allocation": {"devices": {"results": [{
            "driver": DRIVER, "pool": NODE, "device": device, "request": "vf",
            "adminAccess": true}]}}},
    }))
    .unwrap()
}

/// What the checkpoint holds of claim `uid`: its devices' admin access.
async fn admin_flags(running: &Running, uid: &str) -> Vec<bool> {
    running.preparer.prepared().await.claims[uid]
        .devices
        .iter()
        .map(|d| d.admin_access)
        .collect()
}

/// A claim with admin access (resource.k8s.io/v1 `adminAccess`, for
/// monitoring) gets a device another claim has prepared, in either order;
/// the checkpoint holds both, the admin one marked; unpreparing one
/// leaves the other's files alone; its metadata file is upstream's
/// (which has no field for admin access).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_access_claim_shares_a_prepared_device() {
    let env = Env::new(FakeApi::default());
    env.api
        .add(claim("a", UID1, &[(DRIVER, NODE, VF, "vf")], json!([])));
    env.api.add(admin_claim("mon", UID2, VF, true));
    let (running, stop) = env.start(true).await;
    let sock = running.dra_socket.clone();

    let r = prepare(&sock, &[("a", UID1)]).await;
    assert_eq!(r[UID1].error, "");
    let r = prepare(&sock, &[("mon", UID2)]).await;
    assert_eq!(r[UID2].error, "");
    assert_eq!(r[UID2].devices[0].device_name, VF);
    assert_eq!(admin_flags(&running, UID1).await, [false]);
    assert_eq!(admin_flags(&running, UID2).await, [true]);
    let on_disk =
        fs::read_to_string(env.path("plugins").join(DRIVER).join("checkpoint.json")).unwrap();
    assert_eq!(
        on_disk.matches("\"adminAccess\": true").count(),
        1,
        "{on_disk}"
    );
    let meta: Value =
        serde_json::from_slice(&fs::read(metadata_file(&env, UID2)).unwrap()).unwrap();
    let device = meta["requests"][0]["devices"][0].as_object().unwrap();
    assert_eq!(
        device.keys().map(String::as_str).collect::<Vec<_>>(),
        ["attributes", "driver", "name", "networkData", "pool"]
    );

    // Unpreparing the admin claim leaves the other's files.
    assert_eq!(unprepare(&sock, &[("mon", UID2)]).await[UID2], "");
    assert!(!claim_spec(&env, UID2).exists() && !metadata_dir(&env, UID2).exists());
    assert!(claim_spec(&env, UID1).is_file() && metadata_file(&env, UID1).is_file());
    // And the other way round: prepared again, then the normal claim goes.
    assert_eq!(prepare(&sock, &[("mon", UID2)]).await[UID2].error, "");
    assert_eq!(unprepare(&sock, &[("a", UID1)]).await[UID1], "");
    assert!(claim_spec(&env, UID2).is_file() && metadata_file(&env, UID2).is_file());
    assert_eq!(
        running
            .preparer
            .prepared()
            .await
            .claims
            .keys()
            .collect::<Vec<_>>(),
        [UID2]
    );
    // A normal claim prepared while the admin claim holds the device.
    assert_eq!(prepare(&sock, &[("a", UID1)]).await[UID1].error, "");
    assert_eq!(admin_flags(&running, UID1).await, [false]);
    stop.send(()).unwrap();
    running.wait().await;
}

/// Admin access only where the claim's spec asks for it, as the allocator
/// grants it: a result that says so for a request that does not is
/// refused, naming the request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_access_the_spec_does_not_ask_for_is_refused() {
    let env = Env::new(FakeApi::default());
    env.api.add(admin_claim("mon", UID2, VF, false));
    let (running, stop) = env.start(true).await;
    let r = prepare(&running.dra_socket, &[("mon", UID2)]).await;
    assert!(
        r[UID2].error.ends_with(
            "the allocation grants admin access to request vf, which does not ask for it"
        ),
        "{}",
        r[UID2].error
    );
    assert!(running.preparer.prepared().await.claims.is_empty());
    assert!(!claim_spec(&env, UID2).exists() && !metadata_dir(&env, UID2).exists());
    stop.send(()).unwrap();
    running.wait().await;
}

/// A claim made from a template (the claim controller's
/// `resource.kubernetes.io/pod-claim-name` annotation) has its metadata
/// under `resourceclaimtemplates/<pod's name for it>`, as upstream's;
/// hostile request names and annotations never name a path: the claim
/// fails saying why, and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_paths_of_templates_and_hostile_names() {
    let env = Env::new(FakeApi::default());
    let mut templated = claim(
        "pod-a-vf-x7k2q",
        UID1,
        &[(DRIVER, NODE, VF, "vf")],
        json!([]),
    );
    templated.metadata.annotations = Some(BTreeMap::from([(
        "resource.kubernetes.io/pod-claim-name".to_string(),
        "vf-claim".to_string(),
    )]));
    env.api.add(templated);
    env.api.add(claim(
        "bad-request",
        UID2,
        &[(DRIVER, NODE, VF, "../../x")],
        json!([]),
    ));
    let mut bad_annotation = claim(
        "bad-annotation",
        UID3,
        &[(DRIVER, NODE, VF, "vf")],
        json!([]),
    );
    bad_annotation.metadata.annotations = Some(BTreeMap::from([(
        "resource.kubernetes.io/pod-claim-name".to_string(),
        "../../etc".to_string(),
    )]));
    env.api.add(bad_annotation);
    let (running, stop) = env.start(true).await;
    let r = prepare(
        &running.dra_socket,
        &[
            ("pod-a-vf-x7k2q", UID1),
            ("bad-request", UID2),
            ("bad-annotation", UID3),
        ],
    )
    .await;
    assert_eq!(r[UID1].error, "");
    let spec = valid_spec(&claim_spec(&env, UID1));
    assert_eq!(
        spec.devices[0].container_edits.mounts[0].container_path,
        "/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/vf-claim/vf/dra.cdigen.io-metadata.json"
    );
    let meta: Value =
        serde_json::from_slice(&fs::read(metadata_file(&env, UID1)).unwrap()).unwrap();
    assert_eq!(meta["podClaimName"], "vf-claim");
    assert_eq!(meta["metadata"]["name"], "pod-a-vf-x7k2q");
    assert!(
        r[UID2]
            .error
            .ends_with("request name \"../../x\" is not a DNS label, or two joined by /"),
        "{}",
        r[UID2].error
    );
    assert!(
        r[UID3].error.ends_with(
            "annotation resource.kubernetes.io/pod-claim-name \"../../etc\" is not a DNS label"
        ),
        "{}",
        r[UID3].error
    );
    for uid in [UID2, UID3] {
        assert!(!claim_spec(&env, uid).exists() && !metadata_dir(&env, uid).exists());
    }
    let plugins = env.path("plugins");
    let mut found = Vec::new();
    let mut stack = vec![plugins.clone()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p.clone());
            }
            found.push(p);
        }
    }
    assert!(found.iter().all(|p| p.starts_with(&plugins)));
    assert!(!env.path("x").exists() && !env.path("etc").exists());
    stop.send(()).unwrap();
    running.wait().await;
}

/// A claim prepared by the cdigen before KEP-5304's layout (its
/// checkpoint, its metadata file at `<driver>/metadata/<uid>.json`) is
/// answered from the checkpoint after the upgrade, and unprepared: the
/// earlier file removed, the claim forgotten.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_prepared_before_the_upgrade_is_unprepared() {
    const EARLIER: &str = include_str!("data/checkpoint-before-admin-access.json");
    let env = Env::new(FakeApi::default());
    let driver_dir = env.path("plugins").join(DRIVER);
    let old_file = driver_dir.join("metadata").join(format!("{UID1}.json"));
    fs::create_dir_all(old_file.parent().unwrap()).unwrap();
    fs::write(driver_dir.join("checkpoint.json"), EARLIER).unwrap();
    fs::write(
        &old_file,
        r#"{"apiVersion": "metadata.dra.cdigen.io/v1alpha1", "kind": "DeviceMetadata"}"#,
    )
    .unwrap();
    let (running, stop) = env.start(true).await;
    assert_eq!(running.checkpoint_warning, None);
    let again = prepare(&running.dra_socket, &[("old", UID1)]).await;
    assert_eq!(again[UID1].error, "");
    assert_eq!(
        again[UID1].devices[0].cdi_device_ids,
        ["cdigen.io/vf=0000:3b:00.2"]
    );
    assert_eq!(env.api.gets(), 0, "answered from the checkpoint");
    assert_eq!(
        unprepare(&running.dra_socket, &[("old", UID1)]).await[UID1],
        ""
    );
    assert!(!old_file.exists());
    assert!(running.preparer.prepared().await.claims.is_empty());
    stop.send(()).unwrap();
    running.wait().await;
}

/// Results for two subrequests of one request (which the allocator never
/// writes: it picks one) would share one metadata file: the claim fails
/// saying so, and leaves no file behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_subrequests_of_a_request_fail_the_claim_and_leave_nothing() {
    let env = Env::new(FakeApi::default());
    env.api.add(claim(
        "two",
        UID1,
        &[(DRIVER, NODE, VF, "vf/a"), (DRIVER, NODE, VF2, "vf/b")],
        json!([]),
    ));
    let (running, stop) = env.start(true).await;
    let r = prepare(&running.dra_socket, &[("two", UID1)]).await;
    assert!(
        r[UID1]
            .error
            .ends_with("the allocation has results for two subrequests of request vf"),
        "{}",
        r[UID1].error
    );
    assert!(!metadata_dir(&env, UID1).exists() && !claim_spec(&env, UID1).exists());
    assert!(running.preparer.prepared().await.claims.is_empty());
    stop.send(()).unwrap();
    running.wait().await;
}

//! Benchmark: `NodePrepareResources` and `NodeUnprepareResources` of the
//! DRA kubelet plugin ([`cdigen::dra::plugin`]) over its Unix socket, on
//! the `example` machine's devices, with an in-memory API server (no
//! network: what is measured is cdigen's part). Each figure is a median
//! over repetitions, printed with a baseline measured in the same run and
//! their ratio:
//!
//! - baseline: a no-op RPC (the registration socket's `GetInfo`) on a
//!   connection of the same kind;
//! - prepare of a claim of one VF with device metadata on (the claim read,
//!   the per-claim CDI spec and the metadata file written, the network
//!   status sent, the checkpoint written) and unprepare of it;
//! - the same with metadata off (the checkpoint only);
//! - a prepare repeated for a claim already prepared (the checkpointed
//!   answer).
//!
//! Run with `cargo bench --bench dra` (a few seconds).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[path = "../tests/support/machine.rs"]
mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cdigen::dra::api::pluginregistration::InfoRequest;
use cdigen::dra::api::pluginregistration::registration_client::RegistrationClient;
use cdigen::dra::api::v1;
use cdigen::dra::names::DraDevice;
use cdigen::dra::plugin::{self, Config};
use cdigen::dra::{ApiError, ApiFuture, ClaimApi};
use k8s_openapi::api::resource::v1::{AllocatedDeviceStatus, ResourceClaim};
use serde_json::json;
use tokio::sync::{oneshot, watch};

const DRIVER: &str = "dra.cdigen.io";
const NODE: &str = "node1";
const VF: &str = "sriov-0000-3b-00-2";
const RUNS: usize = 300;

/// Claims by name; status writes accepted and dropped.
#[derive(Default)]
struct Api(Mutex<BTreeMap<String, ResourceClaim>>);

impl ClaimApi for Api {
    fn get_claim<'a>(&'a self, _ns: &'a str, name: &'a str) -> ApiFuture<'a, ResourceClaim> {
        let found = self.0.lock().unwrap().get(name).cloned();
        Box::pin(async move { found.ok_or_else(|| ApiError(format!("{name}: not found"))) })
    }
    fn set_device_status<'a>(
        &'a self,
        _ns: &'a str,
        _name: &'a str,
        _driver: &'a str,
        _devices: Vec<AllocatedDeviceStatus>,
    ) -> ApiFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
}

fn uid(i: usize) -> String {
    format!("00000000-0000-4000-8000-{i:012}")
}

fn claim(name: &str, uid: &str) -> ResourceClaim {
    serde_json::from_value(json!({
        "metadata": {"namespace": "ns", "name": name, "uid": uid},
        "spec": {},
        "status": {"allocation": {"devices": {"results": [
            {"driver": DRIVER, "pool": NODE, "device": VF, "request": "vf"}]}}},
    }))
    .unwrap()
}

fn devices(tmp: &Path) -> Vec<DraDevice> {
    support::dra_devices(&tmp.join("root"), &tmp.join("cdi"))
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn show(what: &str, d: Duration, base: Duration) {
    println!(
        "{what:<58} {:>9.1} µs  {:>6.1}x the no-op RPC",
        d.as_secs_f64() * 1e6,
        d.as_secs_f64() / base.as_secs_f64()
    );
}

/// (prepare, repeated prepare, unprepare) medians with metadata on or off.
async fn measure(metadata: bool) -> (Duration, Duration, Duration, Duration) {
    let (tmp, _root) = support::machine("example");
    let api = Arc::new(Api::default());
    for i in 0..RUNS {
        api.0
            .lock()
            .unwrap()
            .insert(format!("c{i}"), claim(&format!("c{i}"), &uid(i)));
    }
    let mut config = Config::new(
        DRIVER,
        NODE,
        &tmp.path().join("plugins"),
        &tmp.path().join("registry"),
        Arc::new(cdigen::root::HostRoot::open(&tmp.path().join("root")).unwrap()),
    );
    config.prepare.cdi_dir = tmp.path().join("cdi");
    config.prepare.metadata = metadata;
    let dra_socket = config.dra_socket();
    let reg_socket = config.registration_socket();
    let (_tx, rx) = watch::channel(Arc::new(devices(tmp.path())));
    let (stop, stopped) = oneshot::channel::<()>();
    let running = plugin::start(config, api as Arc<dyn ClaimApi>, rx, async move {
        let _ = stopped.await;
    })
    .await
    .unwrap();
    let mut dra = v1::dra_plugin_client::DraPluginClient::new(
        cdigen::deviceplugin::kubelet::connect(&dra_socket)
            .await
            .unwrap(),
    );
    let mut reg = RegistrationClient::new(
        cdigen::deviceplugin::kubelet::connect(&reg_socket)
            .await
            .unwrap(),
    );
    let req = |i: usize| v1::Claim {
        namespace: "ns".into(),
        uid: uid(i),
        name: format!("c{i}"),
    };
    let (mut base, mut prep, mut again, mut unprep) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..RUNS {
        let t = Instant::now();
        reg.get_info(InfoRequest {}).await.unwrap();
        base.push(t.elapsed());

        let t = Instant::now();
        let r = dra
            .node_prepare_resources(v1::NodePrepareResourcesRequest {
                claims: vec![req(i)],
            })
            .await
            .unwrap()
            .into_inner();
        prep.push(t.elapsed());
        let answer = &r.claims[&uid(i)];
        assert!(answer.error.is_empty(), "{}", answer.error);
        assert_eq!(answer.devices[0].device_name, VF);

        let t = Instant::now();
        dra.node_prepare_resources(v1::NodePrepareResourcesRequest {
            claims: vec![req(i)],
        })
        .await
        .unwrap();
        again.push(t.elapsed());

        let t = Instant::now();
        let r = dra
            .node_unprepare_resources(v1::NodeUnprepareResourcesRequest {
                claims: vec![req(i)],
            })
            .await
            .unwrap()
            .into_inner();
        unprep.push(t.elapsed());
        assert!(r.claims[&uid(i)].error.is_empty());
    }
    let _ = stop.send(());
    running.wait().await;
    (median(base), median(prep), median(again), median(unprep))
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    println!("DRA plugin, example machine, one VF per claim, {RUNS} claims each, medians:");
    for metadata in [true, false] {
        let (base, prep, again, unprep) = rt.block_on(measure(metadata));
        let m = if metadata {
            "metadata on"
        } else {
            "metadata off"
        };
        show("no-op RPC (GetInfo), the baseline", base, base);
        show(&format!("NodePrepareResources, {m}"), prep, base);
        show(
            &format!("NodePrepareResources again (checkpointed), {m}"),
            again,
            base,
        );
        show(&format!("NodeUnprepareResources, {m}"), unprep, base);
    }
}

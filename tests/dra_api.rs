//! The DRA driver against a fake API server (tests/support/apiserver.rs):
//! ResourceClaim status writes next to other drivers' entries and under
//! conflicts; the slice publisher's creates, updates, deletes and pool
//! generations; repair after a wipe, a change by someone else and API
//! errors; and `cdigen dra-driver` itself on a copy of a fixture machine,
//! through hotplug, a wipe, a stale slice and SIGTERM, never touching
//! other nodes' or drivers' slices.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[path = "support/apiserver.rs"]
mod apiserver;
#[path = "support/machine.rs"]
mod support;
#[allow(dead_code)] // the other machines
#[path = "support/synth.rs"]
mod synth;
#[path = "support/watcher.rs"]
mod watcher;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use apiserver::FakeApi;
use cdigen::dra::kubeapi::KubeClaims;
use cdigen::dra::publish::{Desired, Outcome, Publisher};
use cdigen::dra::{ClaimApi, slices};
use k8s_openapi::api::resource::v1::{AllocatedDeviceStatus, Device, ResourceSlice};
use serde_json::{Value, json};
use tokio::sync::watch as tw;

/// How long anything may take before a test gives up.
const WAIT: Duration = Duration::from_secs(30);

const DRIVER: &str = "dra.cdigen.io";
const NODE: &str = "node-a";

// --- helpers ---------------------------------------------------------------

/// Slices of `node` for `driver`, one per list of device names, as
/// `slices()` names and shapes them (generation 0: the publisher's to set).
fn wanted(driver: &str, node: &str, chunks: &[&[&str]]) -> Vec<ResourceSlice> {
    let count = i64::try_from(chunks.len()).unwrap();
    chunks
        .iter()
        .enumerate()
        .map(|(i, names)| {
            let mut s = slices::slices(&[], driver, node, 0).remove(0);
            s.metadata.name = Some(slices::slice_name(node, driver, i));
            s.spec.pool.resource_slice_count = count;
            s.spec.devices = Some(
                names
                    .iter()
                    .map(|n| Device {
                        name: (*n).to_string(),
                        ..Device::default()
                    })
                    .collect(),
            );
            s
        })
        .collect()
}

/// A slice someone else publishes.
fn foreign(name: &str, driver: &str, node: &str) -> Value {
    json!({
        "metadata": {"name": name},
        "spec": {
            "driver": driver, "nodeName": node,
            "pool": {"name": node, "generation": 7, "resourceSliceCount": 1},
            "devices": [{"name": "theirs"}],
        },
    })
}

/// The names of the slices held, of (driver, node).
fn names_of(s: &BTreeMap<String, Value>, driver: &str, node: &str) -> BTreeSet<String> {
    s.iter()
        .filter(|(_, v)| {
            v["spec"]["driver"] == json!(driver) && v["spec"]["nodeName"] == json!(node)
        })
        .map(|(n, _)| n.clone())
        .collect()
}

/// The device names of the slice `name`.
fn devices_of(s: &BTreeMap<String, Value>, name: &str) -> Vec<String> {
    s[name]["spec"]["devices"]
        .as_array()
        .map(|d| {
            d.iter()
                .map(|d| d["name"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn generation(s: &BTreeMap<String, Value>, name: &str) -> i64 {
    s[name]["spec"]["pool"]["generation"].as_i64().unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn status(driver: &str, device: &str) -> AllocatedDeviceStatus {
    AllocatedDeviceStatus {
        driver: driver.into(),
        pool: NODE.into(),
        device: device.into(),
        ..AllocatedDeviceStatus::default()
    }
}

/// The node selector the scheduler gives a claim allocated devices of
/// `node`'s pool.
fn on_node(node: &str) -> Value {
    json!({"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": [node]},
    ]}]})
}

/// A claim's allocation of one of our devices on `node`.
fn allocation(node: &str) -> Value {
    json!({
        "nodeSelector": on_node(node),
        "devices": {"results": [{"driver": DRIVER, "pool": node, "device": "nic0", "request": "r"}]},
    })
}

// --- claims ------------------------------------------------------------------

/// Admin access, as 1.36's API server checks it: a claim in a namespace
/// labelled `resource.kubernetes.io/admin-access: "true"` may be allocated
/// a device for admin access, and the driver's status write on it is
/// accepted (the allocation granted it already); an allocation written
/// newly granting it in a namespace without the label is refused.
#[test]
fn admin_access_needs_the_namespace_label_and_the_drivers_status_write_passes() {
    let api = FakeApi::start();
    api.put_namespace("mon", &[(apiserver::ADMIN_LABEL, "true")]);
    api.put_namespace("plain", &[(apiserver::ADMIN_LABEL, "yes")]);
    let mut alloc = allocation(NODE);
    alloc["devices"]["results"][0]["adminAccess"] = json!(true);
    let request = json!({"devices": {"requests": [
        {"name": "vf", "exactly": {"deviceClassName": "vf", "adminAccess": true}}]}});
    api.put_claim(json!({
        "metadata": {"namespace": "mon", "name": "claim", "uid": "u1"},
        "spec": request,
        "status": {"allocation": alloc},
    }));
    let rt = runtime();
    let claims = rt.block_on(async { KubeClaims::new(api.client()) });
    rt.block_on(claims.set_device_status("mon", "claim", DRIVER, vec![status(DRIVER, "vf")]))
        .unwrap();
    let stored = api.claim("mon", "claim").unwrap();
    assert_eq!(stored["status"]["devices"][0]["device"], "vf");
    assert_eq!(
        stored["status"]["allocation"]["devices"]["results"][0]["adminAccess"],
        true
    );

    // Granted newly where the label is not "true": refused.
    api.put_claim(json!({
        "metadata": {"namespace": "plain", "name": "claim", "uid": "u2"},
        "spec": {},
    }));
    let raw: kube::Api<k8s_openapi::api::resource::v1::ResourceClaim> =
        rt.block_on(async { kube::Api::namespaced(api.client(), "plain") });
    let patch = kube::api::Patch::Merge(json!({"status": {"allocation": alloc}}));
    let e = rt
        .block_on(raw.patch_status("claim", &kube::api::PatchParams::default(), &patch))
        .unwrap_err();
    let e = e.to_string();
    assert!(
        e.contains(
            "status.allocation.devices.results[0].adminAccess: Forbidden: admin access to devices requires the `resource.kubernetes.io/admin-access: true` label on the containing namespace"
        ),
        "{e}"
    );
    assert!(api.claim("plain", "claim").unwrap()["status"].is_null());
}

/// `status.devices`: our entries replaced, other drivers' kept, through a
/// merge patch by field manager cdigen; nothing written when nothing
/// changes; a write by someone else in between is retried and kept.
#[test]
fn claim_status_replaces_only_our_entries_and_survives_conflicts() {
    let api = FakeApi::start();
    api.put_claim(json!({
        "metadata": {"namespace": "ns", "name": "claim", "uid": "u1"},
        "spec": {},
        "status": {"allocation": allocation(NODE), "devices": [
            {"driver": "other.example.com", "pool": NODE, "device": "nic0"},
            {"driver": DRIVER, "pool": NODE, "device": "old"},
        ]},
    }));
    let rt = runtime();
    let claims = rt.block_on(async { KubeClaims::new(api.client()) });
    let claims: Arc<dyn ClaimApi> = Arc::new(claims);

    let claim = rt.block_on(claims.get_claim("ns", "claim")).unwrap();
    assert_eq!(claim.metadata.uid.as_deref(), Some("u1"));

    rt.block_on(claims.set_device_status("ns", "claim", DRIVER, vec![status(DRIVER, "new")]))
        .unwrap();
    let devices = &api.claim("ns", "claim").unwrap()["status"]["devices"];
    assert_eq!(
        *devices,
        json!([
            {"driver": "other.example.com", "pool": NODE, "device": "nic0"},
            {"driver": DRIVER, "pool": NODE, "device": "new"},
        ])
    );
    let patches: Vec<_> = api
        .writes()
        .into_iter()
        .filter(|w| w.verb == "patch")
        .collect();
    assert_eq!(patches.len(), 1);
    assert_eq!(patches[0].field_manager.as_deref(), Some("cdigen"));
    let patch_requests = || {
        api.requests()
            .into_iter()
            .filter(|r| r.method == "PATCH")
            .map(|r| (r.path, r.status))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        patch_requests(),
        [(
            "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/claim/status".to_string(),
            200
        )]
    );

    // Again, the same: nothing to write.
    rt.block_on(claims.set_device_status("ns", "claim", DRIVER, vec![status(DRIVER, "new")]))
        .unwrap();
    assert_eq!(
        patch_requests().len(),
        1,
        "an unchanged status is not written"
    );

    // Another driver writes its entry between our read and our patch: the
    // patch conflicts (409), and the next try keeps its entry.
    api.interfere_with_next_patch(json!([
        {"driver": "other.example.com", "pool": NODE, "device": "nic0"},
        {"driver": "third.example.com", "pool": NODE, "device": "x"},
        {"driver": DRIVER, "pool": NODE, "device": "new"},
    ]));
    rt.block_on(claims.set_device_status(
        "ns",
        "claim",
        DRIVER,
        vec![status(DRIVER, "a"), status(DRIVER, "b")],
    ))
    .unwrap();
    assert_eq!(
        api.claim("ns", "claim").unwrap()["status"]["devices"],
        json!([
            {"driver": "other.example.com", "pool": NODE, "device": "nic0"},
            {"driver": "third.example.com", "pool": NODE, "device": "x"},
            {"driver": DRIVER, "pool": NODE, "device": "a"},
            {"driver": DRIVER, "pool": NODE, "device": "b"},
        ])
    );
    let statuses: Vec<u16> = patch_requests().into_iter().map(|(_, s)| s).collect();
    assert_eq!(statuses, [200, 409, 200]);

    // Errors name the claim.
    let err = rt.block_on(claims.get_claim("ns", "missing")).unwrap_err();
    assert_eq!(err.to_string(), "ResourceClaim ns/missing not found");
    api.fail_next(1, 500);
    let err = rt.block_on(claims.get_claim("ns", "claim")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot get ResourceClaim ns/claim: the API server says injected failure (500 InternalError)"
    );
    let err = rt
        .block_on(claims.set_device_status("ns", "missing", DRIVER, vec![]))
        .unwrap_err();
    assert_eq!(err.to_string(), "ResourceClaim ns/missing not found");
}

/// 1.36 authorizes a change of `status.devices` per driver
/// (DRAResourceClaimGranularStatusAuthorization): the deployed
/// ClusterRole lets the driver patch its own entries of claims allocated
/// on the node its token names (`associated-node:patch` on
/// `resourceclaims/driver`, named after the driver). A claim of another
/// node, another driver's name, a token without the node and the role of
/// before are refused as the API server refuses them (422), and the
/// error carries its words.
#[test]
fn status_writes_need_the_drivers_granular_permission() {
    let api = FakeApi::start();
    for (name, node) in [("here", NODE), ("there", "node-b")] {
        api.put_claim(json!({
            "metadata": {"namespace": "ns", "name": name, "uid": name},
            "spec": {},
            "status": {"allocation": allocation(node)},
        }));
    }
    let rt = runtime();
    let claims = rt.block_on(async { KubeClaims::new(api.client()) });
    let write = |name: &str, driver: &str, device: &str| {
        rt.block_on(claims.set_device_status(
            "ns",
            name,
            driver,
            vec![AllocatedDeviceStatus {
                driver: driver.into(),
                pool: NODE.into(),
                device: device.into(),
                ..AllocatedDeviceStatus::default()
            }],
        ))
        .map_err(|e| e.to_string())
    };
    let refused = |name: &str, verbs: &str| {
        format!(
            "cannot update the status of ResourceClaim ns/{name}: the API server says \
             ResourceClaim.resource.k8s.io \"{name}\" is invalid: status.devices: Forbidden: \
             changing status.devices requires resource=\"resourceclaims/driver\", verb=\"[{verbs}]\" \
             permission: User \"system:serviceaccount:cdigen:cdigen-dra\" cannot {} resource \
             \"resourceclaims/driver\" in API group \"resource.k8s.io\" in the namespace \"ns\" (422 Invalid)",
            verbs.split(' ').next().unwrap()
        )
    };
    let devices = |name: &str| api.claim("ns", name).unwrap()["status"]["devices"].clone();

    write("here", DRIVER, "nic0").unwrap();
    assert_eq!(devices("here")[0]["device"], json!("nic0"));
    let asked: Vec<(String, String, String, bool)> = api
        .checks()
        .into_iter()
        .filter(|c| c.attributes.subresource == "driver")
        .map(|c| {
            let a = c.attributes;
            (a.verb, a.namespace, a.name, c.allowed)
        })
        .collect();
    assert_eq!(
        asked,
        [(
            "associated-node:patch".to_string(),
            "ns".to_string(),
            DRIVER.to_string(),
            true
        )]
    );

    // A claim allocated on another node: only arbitrary-node would do.
    assert_eq!(
        write("there", DRIVER, "nic0"),
        Err(refused("there", "arbitrary-node:patch"))
    );
    assert_eq!(devices("there"), Value::Null);
    // Another driver's entries: the rule names ours only.
    assert_eq!(
        write("here", "gpu.example.com", "gpu0"),
        Err(refused(
            "here",
            "associated-node:patch arbitrary-node:patch"
        ))
    );
    // A token that names no node.
    api.set_token_node(None);
    assert_eq!(
        write("here", DRIVER, "nic1"),
        Err(refused("here", "arbitrary-node:patch"))
    );
    api.set_token_node(Some(NODE));
    // The ClusterRole before 1.36's check: the status subresource only.
    let before = |resources: &[&str], verbs: &[&str]| apiserver::Rule {
        api_groups: vec!["resource.k8s.io".into()],
        resources: resources.iter().map(|r| (*r).to_string()).collect(),
        verbs: verbs.iter().map(|v| (*v).to_string()).collect(),
        resource_names: vec![],
    };
    api.set_rules(Some(vec![
        before(&["resourceclaims"], &["get", "list", "watch"]),
        before(&["resourceclaims/status"], &["update", "patch"]),
    ]));
    assert_eq!(
        write("here", DRIVER, "nic1"),
        Err(refused(
            "here",
            "associated-node:patch arbitrary-node:patch"
        ))
    );
    assert_eq!(devices("here")[0]["device"], json!("nic0"));
}

// --- the publisher, one round at a time -------------------------------------

/// Creates, updates with the next generation, deletes stale slices of our
/// (driver, node), adopts what is already there after a restart, and
/// never touches other nodes' or drivers' slices.
#[test]
fn sync_creates_updates_deletes_and_bumps_the_generation() {
    let api = FakeApi::start();
    api.put_slice(foreign("other-node", DRIVER, "node-b"));
    api.put_slice(foreign("other-driver", "gpu.example.com", NODE));
    let rt = runtime();
    let mut p = rt.block_on(async { Publisher::new(api.client(), DRIVER, NODE) });
    let ours = |s: &BTreeMap<String, Value>| names_of(s, DRIVER, NODE);
    let s0 = slices::slice_name(NODE, DRIVER, 0);
    let s1 = slices::slice_name(NODE, DRIVER, 1);

    // First: created, generation 1.
    let two = wanted(DRIVER, NODE, &[&["a", "b"], &["c"]]);
    let out = rt.block_on(p.sync(&two)).unwrap();
    assert_eq!(
        out,
        Outcome {
            created: 2,
            generation: 1,
            ..Outcome::default()
        }
    );
    let s = api.slices();
    assert_eq!(ours(&s), BTreeSet::from([s0.clone(), s1.clone()]));
    assert_eq!(devices_of(&s, &s0), ["a", "b"]);
    assert_eq!(devices_of(&s, &s1), ["c"]);
    let owner = node_owner(&api.node_uid(NODE).unwrap());
    for name in [&s0, &s1] {
        assert_eq!(s[name]["metadata"]["ownerReferences"], owner);
        assert_eq!(generation(&s, name), 1);
        assert_eq!(s[name]["spec"]["pool"]["resourceSliceCount"], json!(2));
        assert_eq!(s[name]["spec"]["pool"]["name"], json!(NODE));
    }
    // The writes carry our field manager.
    assert!(
        api.writes()
            .iter()
            .all(|w| w.field_manager.as_deref() == Some("cdigen"))
    );

    // The same again: nothing written.
    let writes = api.writes().len();
    let out = rt.block_on(p.sync(&two)).unwrap();
    assert!(!out.wrote(), "{out:?}");
    assert_eq!(api.writes().len(), writes);

    // A device goes: both slices at generation 2 (count and content).
    let one = wanted(DRIVER, NODE, &[&["a", "c"]]);
    let out = rt.block_on(p.sync(&one)).unwrap();
    assert_eq!(
        out,
        Outcome {
            updated: 1,
            deleted: 1,
            generation: 2,
            ..Outcome::default()
        }
    );
    let s = api.slices();
    assert_eq!(ours(&s), BTreeSet::from([s0.clone()]));
    assert_eq!(devices_of(&s, &s0), ["a", "c"]);
    assert_eq!(generation(&s, &s0), 2);
    assert_eq!(s[&s0]["spec"]["pool"]["resourceSliceCount"], json!(1));

    // A stale slice of ours appears (an older driver's): deleted; the
    // content did not change, so the generation stays.
    let mut stale = foreign("stale", DRIVER, NODE);
    stale["spec"]["pool"]["generation"] = json!(1);
    api.put_slice(stale);
    let out = rt.block_on(p.sync(&one)).unwrap();
    assert_eq!(
        out,
        Outcome {
            deleted: 1,
            generation: 2,
            ..Outcome::default()
        }
    );
    assert!(!api.slices().contains_key("stale"));

    // Someone publishes our pool above us: we go above them.
    let mut high = api.slices()[&s0].clone();
    high["spec"]["pool"]["generation"] = json!(9);
    api.put_slice(high);
    let out = rt.block_on(p.sync(&one)).unwrap();
    assert_eq!((out.updated, out.generation), (1, 10));

    // A restart with the same content adopts the slices as they are.
    let mut again = rt.block_on(async { Publisher::new(api.client(), DRIVER, NODE) });
    let writes = api.writes().len();
    let out = rt.block_on(again.sync(&one)).unwrap();
    assert_eq!(
        out,
        Outcome {
            generation: 10,
            ..Outcome::default()
        }
    );
    assert_eq!(api.writes().len(), writes);
    // ... and a restart with other content starts above what it finds.
    let out = rt.block_on(again.sync(&two)).unwrap();
    assert_eq!((out.created, out.updated, out.generation), (1, 1, 11));

    // The list asked for our slices only.
    let list = api
        .requests()
        .into_iter()
        .find(|r| r.method == "GET" && r.path.ends_with("/resourceslices"))
        .unwrap();
    assert!(
        list.query
            .contains("fieldSelector=spec.driver%3Ddra.cdigen.io%2Cspec.nodeName%3Dnode-a"),
        "{}",
        list.query
    );

    // All of ours go; the others stay as they were.
    assert_eq!(rt.block_on(again.delete_all()).unwrap(), 2);
    let s = api.slices();
    assert_eq!(
        s.keys().cloned().collect::<Vec<_>>(),
        ["other-driver", "other-node"]
    );
    // (resourceVersion 1 is the Node's.)
    assert_eq!(s["other-node"]["metadata"]["resourceVersion"], json!("2"));
    assert_eq!(s["other-driver"]["metadata"]["resourceVersion"], json!("3"));
    assert!(
        api.writes()
            .iter()
            .all(|w| w.name != "other-node" && w.name != "other-driver"),
        "other nodes' and drivers' slices are never written"
    );

    // Errors name the slices.
    api.fail_next(1, 500);
    let err = rt.block_on(again.sync(&two)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot list the ResourceSlices of dra.cdigen.io on node node-a: the API server says injected failure (500 InternalError)"
    );
}

/// The owner references the slices of [`NODE`] must carry: its Node, of
/// UID `uid`, as their controller.
fn node_owner(uid: &str) -> Value {
    json!([{"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": uid, "controller": true}])
}

/// Whether `s`'s slice `name` names the Node of UID `uid` as its owner.
fn owned_by(s: &BTreeMap<String, Value>, name: &str, uid: &str) -> bool {
    s.get(name)
        .is_some_and(|v| v["metadata"]["ownerReferences"] == node_owner(uid))
}

/// Slices name their node's Node as their controlling owner, so the
/// garbage collector deletes them with it: a slice of ours naming no
/// owner (an older driver's) is replaced to name it; a Node re-created
/// under the same name (a new UID) gets the slices re-created naming the
/// new one; while there is no Node nothing is published, and the Node's
/// return publishes again; without the right to read Nodes the error
/// says so.
/// A pool with partitioned GPUs (the MI300X in CPX mode) reaches the API
/// server as printed: the devices' counter consumptions, the counter set
/// in a slice without devices, and a second round writes nothing.
#[test]
fn shared_counters_reach_the_api_server() {
    let yaml = fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/mi300x-cpx/expected/dra/resourceslices.yaml"),
    )
    .unwrap();
    let mut want: Vec<ResourceSlice> = serde_saphyr::from_str_multiple(&yaml).unwrap();
    for s in &mut want {
        s.metadata.name = s
            .metadata
            .name
            .as_deref()
            .map(|n| n.replace("node-1", NODE));
        s.spec.node_name = Some(NODE.into());
        s.spec.pool.name = NODE.into();
        s.spec.pool.generation = 0;
    }
    assert_eq!(want.len(), 2);
    let api = FakeApi::start();
    let rt = runtime();
    let mut p = rt.block_on(async { Publisher::new(api.client(), DRIVER, NODE) });
    let out = rt.block_on(p.sync(&want)).unwrap();
    assert_eq!(out.created, 2);
    let s = api.slices();
    let s0 = slices::slice_name(NODE, DRIVER, 0);
    let s1 = slices::slice_name(NODE, DRIVER, 1);
    let counters = &s[&s1]["spec"];
    assert!(counters.get("devices").is_none(), "{counters}");
    assert_eq!(
        counters["sharedCounters"],
        json!([{"name": "gpu-0000-05-00-0", "counters": {
            "partitions": {"value": "8"}, "xcds": {"value": "8"}}}])
    );
    let devices = s[&s0]["spec"]["devices"].as_array().unwrap();
    assert!(s[&s0]["spec"].get("sharedCounters").is_none());
    let consuming = devices
        .iter()
        .filter(|d| d["consumesCounters"][0]["counterSet"] == json!("gpu-0000-05-00-0"))
        .count();
    assert_eq!(consuming, 8);
    let again = rt.block_on(p.sync(&want)).unwrap();
    assert!(!again.wrote(), "{again:?}");
}

#[test]
fn slices_are_owned_by_their_node() {
    let api = FakeApi::start();
    let rt = runtime();
    let s0 = slices::slice_name(NODE, DRIVER, 0);
    let one = wanted(DRIVER, NODE, &[&["a"]]);
    let mut old = serde_json::to_value(&one[0]).unwrap();
    old["spec"]["pool"]["generation"] = json!(3);
    api.put_slice(old);
    let publisher = rt.block_on(async {
        Publisher::new(api.client(), DRIVER, NODE)
            .with_backoff(Duration::from_millis(50), Duration::from_millis(200))
    });
    let (_tx, rx) = tw::channel(Some(Arc::new(Desired::new(one.clone(), Instant::now()))));
    let (stop_tx, stop_rx) = tw::channel(false);
    let task = rt.spawn(publisher.run(rx, stop_rx));
    let uid = api.node_uid(NODE).unwrap();
    let s = api.wait_slices(WAIT, "the old slice owned", |s| owned_by(s, &s0, &uid));
    assert_eq!(generation(&s, &s0), 3, "adopted: the content is the same");

    // The Node is re-created: the collector deletes the slices, which
    // are re-created naming the new Node.
    let second = api.put_node(NODE);
    assert_ne!(second, uid);
    api.wait_slices(WAIT, "the slices of the new Node", |s| {
        owned_by(s, &s0, &second)
    });

    // No Node: nothing can be published until it is back.
    assert_eq!(api.delete_node(NODE), 1);
    let end = Instant::now() + WAIT;
    while !api
        .requests()
        .iter()
        .any(|r| r.path == format!("/api/v1/nodes/{NODE}") && r.status == 404)
    {
        assert!(Instant::now() < end, "the Node was not read again");
        thread::sleep(Duration::from_millis(10));
    }
    assert!(api.slices().is_empty());
    let third = api.put_node(NODE);
    api.wait_slices(WAIT, "the slices of the third Node", |s| {
        owned_by(s, &s0, &third)
    });
    stop_tx.send(true).unwrap();
    rt.block_on(task).unwrap();

    // The read of the Node, like every other, needs its rule.
    let mut rules = apiserver::shipped_rules();
    rules.retain(|r| !r.resources.contains(&"nodes".to_string()));
    api.set_rules(Some(rules));
    let mut p = rt.block_on(async { Publisher::new(api.client(), DRIVER, NODE) });
    let err = rt
        .block_on(p.sync(&wanted(DRIVER, NODE, &[&["a"]])))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot get Node node-a: forbidden (nodes \"node-a\" is forbidden: User \"system:serviceaccount:cdigen:cdigen-dra\" \
         cannot get resource \"nodes\" in API group \"\" at the cluster scope); check the driver's RBAC"
    );
    assert!(api.slices().is_empty());
}

// --- the publisher running ----------------------------------------------------

/// The publisher's loop: publishes, re-creates after a wipe, restores a
/// slice changed by someone else, retries through API errors, follows a
/// new content (one slice changed: replaced at the same generation),
/// keeps watching after the server ends its watch, and deletes its
/// slices (only those) when stopped.
#[test]
fn run_repairs_wipes_and_changes_and_retries_errors() {
    let api = FakeApi::start();
    api.put_slice(foreign("other-node", DRIVER, "node-b"));
    let rt = runtime();
    let publisher = rt.block_on(async {
        Publisher::new(api.client(), DRIVER, NODE)
            .with_backoff(Duration::from_millis(50), Duration::from_millis(200))
    });
    let desired = |chunks: &[&[&str]]| {
        Some(Arc::new(Desired::new(
            wanted(DRIVER, NODE, chunks),
            Instant::now(),
        )))
    };
    let (tx, rx) = tw::channel(desired(&[&["a", "b"]]));
    let (stop_tx, stop_rx) = tw::channel(false);
    let task = rt.spawn(publisher.run(rx, stop_rx));
    let s0 = slices::slice_name(NODE, DRIVER, 0);
    let has = |devs: &'static [&'static str], g: i64| {
        let s0 = s0.clone();
        move |s: &BTreeMap<String, Value>| {
            s.get(&s0).is_some_and(|v| {
                devices_of(s, &s0) == devs && v["spec"]["pool"]["generation"] == json!(g)
            })
        }
    };
    api.wait_slices(WAIT, "the first publication", has(&["a", "b"], 1));

    // The kubelet wipes the node's slices: re-created (the content is the
    // same, so is the generation).
    assert_eq!(api.wipe(NODE), 1);
    api.wait_slices(WAIT, "re-creation after a wipe", has(&["a", "b"], 1));

    // Someone changes our slice: put back.
    let mut changed = api.slices()[&s0].clone();
    changed["spec"]["devices"] = json!([{"name": "intruder"}]);
    api.put_slice(changed);
    api.wait_slices(WAIT, "the slice restored", has(&["a", "b"], 1));

    // The API server fails for a while, then works: the wipe is repaired.
    api.fail_next(4, 500);
    api.wipe(NODE);
    api.wait_slices(WAIT, "re-creation through errors", has(&["a", "b"], 1));
    let failed = api.requests().iter().filter(|r| r.status == 500).count();
    assert_eq!(failed, 4);

    // The watch ends (the server's timeout): still watched after.
    api.end_watches();
    thread::sleep(Duration::from_millis(200));
    api.wipe(NODE);
    api.wait_slices(
        WAIT,
        "re-creation after the watch ended",
        has(&["a", "b"], 1),
    );

    // New content in the one slice: replaced, at the same generation
    // (one update is atomic: the pool is never seen half old, half new).
    tx.send(desired(&[&["a", "b", "c"]])).unwrap();
    api.wait_slices(WAIT, "the new content", has(&["a", "b", "c"], 1));

    // Our own writes are not news: no list after the last one settled.
    thread::sleep(Duration::from_millis(300));
    let before = api.requests().len();
    thread::sleep(Duration::from_millis(500));
    let after: Vec<_> = api.requests().into_iter().skip(before).collect();
    assert!(
        after.is_empty(),
        "requests while nothing changed: {after:?}"
    );

    // Stopped: ours deleted, the other node's kept.
    stop_tx.send(true).unwrap();
    rt.block_on(task).unwrap();
    assert_eq!(
        api.slices().keys().cloned().collect::<Vec<_>>(),
        ["other-node"]
    );
    assert!(api.writes().iter().all(|w| w.name != "other-node"));
}

/// A publisher running on `api` with `first` wanted (generation 0
/// slices): the sender of what is wanted, the stop, and its task.
fn start_publisher(
    rt: &tokio::runtime::Runtime,
    api: &FakeApi,
    first: Vec<ResourceSlice>,
) -> (
    tw::Sender<Option<Arc<Desired>>>,
    tw::Sender<bool>,
    tokio::task::JoinHandle<()>,
) {
    let publisher = rt.block_on(async {
        Publisher::new(api.client(), DRIVER, NODE)
            .with_backoff(Duration::from_millis(50), Duration::from_millis(200))
    });
    let (tx, rx) = tw::channel(Some(Arc::new(Desired::new(first, Instant::now()))));
    let (stop_tx, stop_rx) = tw::channel(false);
    let task = rt.spawn(publisher.run(rx, stop_rx));
    (tx, stop_tx, task)
}

/// Whether our slices on `api` are `want`'s (names and devices), all at
/// generation `g`.
fn pool_is(s: &BTreeMap<String, Value>, want: &[&[&str]], g: i64) -> bool {
    let names: BTreeSet<String> = (0..want.len())
        .map(|i| slices::slice_name(NODE, DRIVER, i))
        .collect();
    names_of(s, DRIVER, NODE) == names
        && want.iter().enumerate().all(|(i, devs)| {
            let name = slices::slice_name(NODE, DRIVER, i);
            devices_of(s, &name) == *devs
                && generation(s, &name) == g
                && s[&name]["spec"]["pool"]["resourceSliceCount"] == json!(want.len())
        })
}

/// The slice writes after the first `from`: (verb, name), in order.
fn slice_writes(api: &FakeApi, from: usize) -> Vec<(String, String)> {
    api.writes()
        .into_iter()
        .skip(from)
        .filter(|w| w.resource == "resourceslices")
        .map(|w| (w.verb, w.name))
        .collect()
}

/// Waits until nothing more is asked of the server for `quiet`.
fn settle(api: &FakeApi, quiet: Duration) {
    let end = Instant::now() + WAIT;
    loop {
        let before = api.requests().len();
        thread::sleep(quiet);
        if api.requests().len() == before {
            return;
        }
        assert!(Instant::now() < end, "the publisher never settled");
    }
}

/// The publisher keeps the pool's state from its watch, not from lists:
/// one list at the start, then a slice deleted or edited by another
/// client is repaired through the watch (only that slice written), and
/// new content writes only what changed: one slice changed is one update
/// at the same generation; two slices changed, or a slice more, go to
/// the next generation in every slice (the pool is never seen as a mix).
#[test]
fn run_writes_only_what_changed_and_repairs_through_the_watch() {
    let api = FakeApi::start();
    api.put_slice(foreign("other-node", DRIVER, "node-b"));
    let rt = runtime();
    let three: &[&[&str]] = &[&["a", "b"], &["c", "d"], &["e"]];
    let (tx, stop_tx, task) = start_publisher(&rt, &api, wanted(DRIVER, NODE, three));
    api.wait_slices(WAIT, "the first publication", |s| pool_is(s, three, 1));
    settle(&api, Duration::from_millis(200));
    assert_eq!(api.slice_requests("list").len(), 1);
    let s1 = slices::slice_name(NODE, DRIVER, 1);
    let s2 = slices::slice_name(NODE, DRIVER, 2);
    let send = |chunks: &[&[&str]]| {
        tx.send(Some(Arc::new(Desired::new(
            wanted(DRIVER, NODE, chunks),
            Instant::now(),
        ))))
        .unwrap();
    };

    // Another client deletes a slice: re-created, and only it.
    let from = api.writes().len();
    assert!(api.remove_slice(&s1));
    api.wait_slices(WAIT, "the deleted slice back", |s| pool_is(s, three, 1));
    settle(&api, Duration::from_millis(200));
    assert_eq!(slice_writes(&api, from), [("create".into(), s1.clone())]);

    // Another client edits a slice: put back, only it.
    let from = api.writes().len();
    let mut edited = api.slices()[&s2].clone();
    edited["spec"]["devices"] = json!([{"name": "intruder"}]);
    api.put_slice(edited);
    api.wait_slices(WAIT, "the edited slice restored", |s| pool_is(s, three, 1));
    settle(&api, Duration::from_millis(200));
    assert_eq!(slice_writes(&api, from), [("update".into(), s2.clone())]);
    assert_eq!(
        api.slice_requests("list").len(),
        1,
        "repaired through the watch, without a list"
    );

    // One slice's devices change: that slice only, same generation.
    let from = api.writes().len();
    let one_changed: &[&[&str]] = &[&["a", "b"], &["c", "d"], &["f"]];
    send(one_changed);
    api.wait_slices(WAIT, "one slice changed", |s| pool_is(s, one_changed, 1));
    settle(&api, Duration::from_millis(200));
    assert_eq!(slice_writes(&api, from), [("update".into(), s2.clone())]);

    // A device moves from one slice to another: two slices change, so
    // every slice goes to generation 2.
    let from = api.writes().len();
    let moved: &[&[&str]] = &[&["a", "b"], &["c"], &["d", "f"]];
    send(moved);
    api.wait_slices(WAIT, "a device moved", |s| pool_is(s, moved, 2));
    settle(&api, Duration::from_millis(200));
    let writes = slice_writes(&api, from);
    assert_eq!(writes.len(), 3, "{writes:?}");
    assert!(
        writes.iter().all(|(verb, _)| verb == "update"),
        "{writes:?}"
    );

    // A slice more: created, and the others at generation 3 (the count).
    let from = api.writes().len();
    let four: &[&[&str]] = &[&["a", "b"], &["c"], &["d", "f"], &["g"]];
    send(four);
    api.wait_slices(WAIT, "a slice more", |s| pool_is(s, four, 3));
    settle(&api, Duration::from_millis(200));
    let mut verbs: Vec<String> = slice_writes(&api, from).into_iter().map(|w| w.0).collect();
    verbs.sort();
    assert_eq!(verbs, ["create", "update", "update", "update"]);

    // Still one list; the other node's slice never written.
    assert_eq!(api.slice_requests("list").len(), 1);
    stop_tx.send(true).unwrap();
    rt.block_on(task).unwrap();
    assert!(api.writes().iter().all(|w| w.name != "other-node"));
}

/// The watch's resourceVersion bookkeeping: a watch ended by the server
/// is made again from the last event's resourceVersion; after a
/// bookmark, from the bookmark's, so events compacted away meanwhile (of
/// other nodes, not watched) cost nothing; from a compacted
/// resourceVersion, the server's 410 Expired leads to exactly one list,
/// and the watch goes on from the list's resourceVersion, still
/// repairing without listing.
#[test]
fn watch_follows_bookmarks_and_lists_once_after_410() {
    let api = FakeApi::start();
    let rt = runtime();
    let one: &[&[&str]] = &[&["a"]];
    let (_tx, stop_tx, task) = start_publisher(&rt, &api, wanted(DRIVER, NODE, one));
    api.wait_slices(WAIT, "the first publication", |s| pool_is(s, one, 1));
    settle(&api, Duration::from_millis(200));
    let watches = |api: &FakeApi| api.slice_requests("watch");
    let from_rv = |r: &apiserver::Request| -> String {
        r.query
            .split('&')
            .find_map(|p| p.strip_prefix("resourceVersion="))
            .unwrap()
            .to_string()
    };
    let first = watches(&api);
    assert_eq!(first.len(), 1);
    assert!(
        first[0].query.contains("allowWatchBookmarks=true"),
        "{}",
        first[0].query
    );
    assert!(
        first[0]
            .query
            .contains("fieldSelector=spec.driver%3Ddra.cdigen.io%2Cspec.nodeName%3Dnode-a"),
        "{}",
        first[0].query
    );
    let published =
        api.slices()[&slices::slice_name(NODE, DRIVER, 0)]["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string();

    // The server's watch ends: watched again from our last event.
    api.end_watches();
    let end = Instant::now() + WAIT;
    while watches(&api).len() < 2 {
        assert!(Instant::now() < end, "not watched again");
        thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(from_rv(&watches(&api)[1]), published);

    // Others write; a bookmark says where the server is: the next watch
    // starts there, so compacting the others' events is no 410.
    for _ in 0..3 {
        api.write_elsewhere();
    }
    api.bookmark();
    let end = Instant::now() + WAIT;
    while api.bookmarks_sent() < 1 {
        assert!(Instant::now() < end, "no bookmark sent");
        thread::sleep(Duration::from_millis(10));
    }
    let marked = api.compact();
    api.end_watches();
    let end = Instant::now() + WAIT;
    while watches(&api).len() < 3 {
        assert!(Instant::now() < end, "not watched again after the bookmark");
        thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(from_rv(&watches(&api)[2]), marked.to_string());
    settle(&api, Duration::from_millis(200));
    assert_eq!(
        api.slice_requests("list").len(),
        1,
        "no list after a bookmark"
    );

    // Without a bookmark, a compaction past our resourceVersion: the
    // server answers the next watch with 410 Expired; one list, then a
    // watch from the list's resourceVersion; nothing written.
    let writes = api.writes().len();
    api.write_elsewhere();
    let compacted = api.compact();
    // (A watch ended within a second with nothing sent is a failure that
    // lists, as client-go's reflector has it: this one has lived longer.)
    thread::sleep(Duration::from_millis(1100));
    api.end_watches();
    let end = Instant::now() + WAIT;
    while api.slice_requests("list").len() < 2 {
        assert!(Instant::now() < end, "no list after the 410");
        thread::sleep(Duration::from_millis(10));
    }
    settle(&api, Duration::from_millis(300));
    assert_eq!(
        api.slice_requests("list").len(),
        2,
        "one list after the 410"
    );
    let all = watches(&api);
    assert_eq!(all.len(), 5, "{all:?}");
    assert_eq!(
        from_rv(&all[3]),
        marked.to_string(),
        "the watch that got 410"
    );
    assert_eq!(from_rv(&all[4]), compacted.to_string(), "from the list's");
    assert_eq!(
        api.writes().len(),
        writes,
        "the list showed nothing to write"
    );

    // The watch after the list works: a slice deleted by someone else is
    // re-created without another list.
    assert!(api.remove_slice(&slices::slice_name(NODE, DRIVER, 0)));
    api.wait_slices(WAIT, "the slice back", |s| pool_is(s, one, 1));
    assert_eq!(api.slice_requests("list").len(), 2);
    stop_tx.send(true).unwrap();
    rt.block_on(task).unwrap();
}

/// The fake API server's watch as the real one answers: from a
/// compacted resourceVersion, a 200 whose one event is an ERROR carrying
/// a 410 Expired Status; bookmarks only when asked for, with the
/// resourceVersion the server is at.
#[test]
fn fake_watch_answers_410_and_bookmarks_as_the_api_server() {
    use kube::api::{Api, WatchEvent, WatchParams};
    use tokio_stream::StreamExt as _;
    let api = FakeApi::start();
    let rt = runtime();
    api.put_slice(foreign("s", DRIVER, NODE));
    api.write_elsewhere();
    let compacted = api.compact();
    let slices: Api<ResourceSlice> = rt.block_on(async { Api::all(api.client()) });
    let params = WatchParams::default().timeout(5);
    let first = rt.block_on(async {
        let mut w = Box::pin(slices.watch(&params, "2").await.unwrap());
        w.next().await.unwrap().unwrap()
    });
    match first {
        WatchEvent::Error(s) => {
            assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
            assert_eq!(
                s.message,
                format!("too old resource version: 2 ({compacted})")
            );
        }
        other => panic!("not a 410: {other:?}"),
    }
    // From where the server is: a bookmark when one is sent.
    let rv = compacted.to_string();
    let got = rt.block_on(async {
        let mut w = Box::pin(slices.watch(&params, &rv).await.unwrap());
        api.write_elsewhere();
        api.bookmark();
        w.next().await.unwrap().unwrap()
    });
    match got {
        WatchEvent::Bookmark(b) => {
            assert_eq!(b.metadata.resource_version, (compacted + 1).to_string());
        }
        other => panic!("not a bookmark: {other:?}"),
    }
}

// --- cdigen dra-driver ----------------------------------------------------------

/// The slices `cdigen dra-driver` should publish for the tree at
/// `tmp/root` (built-in generators), at pool generation `g`: the same
/// pipeline, inventory, names and `slices()`, in this process.
fn expected(tmp: &Path, g: i64) -> Vec<ResourceSlice> {
    let devices = support::dra_devices(&tmp.join("root"), &tmp.join("expected-cdi"));
    slices::slices(&devices, DRIVER, NODE, g)
}

/// What the server holds of `driver`'s slices of `node`, as slices.
fn published(api: &FakeApi) -> Vec<ResourceSlice> {
    api.slices()
        .into_values()
        .filter(|v| v["spec"]["driver"] == json!(DRIVER) && v["spec"]["nodeName"] == json!(NODE))
        .map(|v| serde_json::from_value(v).unwrap())
        .collect()
}

/// Whether the published slices say `want` (names and specs).
fn says(api: &FakeApi, want: &[ResourceSlice]) -> bool {
    let got: BTreeMap<Option<String>, _> = published(api)
        .into_iter()
        .map(|s| (s.metadata.name, s.spec))
        .collect();
    let want: BTreeMap<Option<String>, _> = want
        .iter()
        .map(|s| (s.metadata.name.clone(), s.spec.clone()))
        .collect();
    got == want
}

/// `cdigen dra-driver`, started by a test.
struct Driver(support::Daemon);

impl std::ops::Deref for Driver {
    type Target = support::Daemon;
    fn deref(&self) -> &support::Daemon {
        &self.0
    }
}

impl std::ops::DerefMut for Driver {
    fn deref_mut(&mut self) -> &mut support::Daemon {
        &mut self.0
    }
}

impl Driver {
    fn spawn(tmp: &Path, kubeconfig: Option<&Path>, extra: &[&str]) -> Driver {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_cdigen"));
        cmd.current_dir(tmp)
            .env("CDIGEN_NO_NVML", "1")
            .args([
                "dra-driver",
                "--root",
                "root",
                "--output-dir",
                "cdi",
                "--devinfo-dir",
                "devinfo",
                "--source",
                "none",
                "--plugin-dir",
                "plugins",
                "--registry-dir",
                "registry",
            ])
            .args(extra)
            .env_remove("CDIGEN_ROOT")
            .env_remove("CDIGEN_DRIVER_ROOT")
            .env_remove("CDIGEN_TEMPLATES")
            .env_remove("CDIGEN_DRA_DRIVER")
            .env_remove("NODE_NAME")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("KUBERNETES_SERVICE_PORT")
            .env_remove("JOURNAL_STREAM")
            .env_remove("NOTIFY_SOCKET")
            .env_remove("GLIBC_TUNABLES")
            .env("HOME", tmp)
            .env("RUST_LOG", "info")
            .env("CDIGEN_GENERATORS", "/nonexistent-cdigen-user-generators");
        match kubeconfig {
            Some(k) => cmd.env("KUBECONFIG", k),
            None => cmd.env("KUBECONFIG", tmp.join("no-kubeconfig")),
        };
        Driver(support::Daemon::spawn(cmd, tmp))
    }

    /// Waits until the published slices say `want`.
    fn wait_published(&self, api: &FakeApi, want: &[ResourceSlice], what: &str) {
        let end = Instant::now() + WAIT;
        while !says(api, want) {
            assert!(
                Instant::now() < end,
                "timed out waiting for {what}; published: {}\nlog:\n{}",
                serde_json::to_string_pretty(&api.slices()).unwrap(),
                self.log()
            );
            thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Hides a VF of the example machine from sysfs (its bus entry and the
/// PF's `virtfn` link), as its removal does; returns what puts it back.
fn unplug_vf(root: &Path, addr: &str, virtfn: &str) -> impl FnOnce() {
    let aside = root.parent().unwrap().join(format!("aside-{addr}"));
    fs::create_dir(&aside).unwrap();
    let pf = root.join("sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0");
    let links = [
        (
            root.join("sys/bus/pci/devices").join(addr),
            aside.join("bus"),
        ),
        (pf.join(virtfn), aside.join("virtfn")),
    ];
    for (from, to) in &links {
        fs::rename(from, to).unwrap();
    }
    move || {
        for (from, to) in &links {
            fs::rename(to, from).unwrap();
        }
        fs::remove_dir(&aside).unwrap();
    }
}

/// `cdigen dra-driver` on the example machine: publishes what `slices()`
/// makes of its devices; a VF unplugged then replugged updates the pool
/// (its one slice replaced each time, at the same generation: one update
/// is atomic); a wipe is repaired, a stale slice of ours
/// deleted; on SIGTERM it exits 0 and its slices are gone; other nodes'
/// and drivers' slices are never written.
#[test]
fn driver_publishes_follows_hotplug_repairs_and_cleans_up() {
    let (tmp, root) = support::machine("example");
    let api = FakeApi::start();
    api.put_slice(foreign("other-node", DRIVER, "node-b"));
    api.put_slice(foreign("other-driver", "gpu.example.com", NODE));
    let kubeconfig = api.kubeconfig(tmp.path());
    let mut driver = Driver::spawn(tmp.path(), Some(&kubeconfig), &["--node", NODE]);

    let all = expected(tmp.path(), 1);
    let names: Vec<String> = all
        .iter()
        .flat_map(|s| s.spec.devices.clone().unwrap_or_default())
        .map(|d| d.name)
        .collect();
    assert!(
        names.contains(&"sriov-0000-3b-00-3".to_string()),
        "the example machine's VFs are among its devices: {names:?}"
    );
    driver.wait_published(&api, &all, "the first publication");
    // It ran itself again with one allocator arena for its threads
    // (cli::arena).
    #[cfg(target_env = "gnu")]
    assert_eq!(
        driver.environ("GLIBC_TUNABLES"),
        [b"glibc.malloc.arena_max=1"]
    );

    // Hotplug: a VF goes; the next pass publishes without it.
    let replug = unplug_vf(&root, "0000:3b:00.3", "virtfn1");
    let without = expected(tmp.path(), 1);
    assert_eq!(without.len(), 1, "the example machine's pool is one slice");
    assert_ne!(without, all);
    driver.signal("HUP");
    driver.wait_published(&api, &without, "the VF gone, generation 1");
    let log = driver.wait_log(
        "the ResourceSlices of dra.cdigen.io on node node-a: generation 1: 0 created, 1 updated, 0 deleted, ",
    );
    assert!(log.contains("ms after the pass"), "{log}");
    replug();
    driver.signal("HUP");
    driver.wait_published(&api, &all, "the VF back, generation 1");

    // The kubelet wipes the node's slices: ours come back, at the same
    // generation (nothing changed).
    let ours = published(&api).len();
    assert_eq!(api.wipe(NODE), ours + 1);
    driver.wait_published(&api, &all, "re-creation after a wipe");
    driver.wait_log("generation 1: 1 created, 0 updated, 0 deleted, repaired");
    assert!(
        !api.slices().contains_key("other-driver"),
        "the wipe took it"
    );
    api.put_slice(foreign("other-driver", "gpu.example.com", NODE));

    // A stale slice of ours (another driver instance's): deleted.
    let mut stale = foreign("stale", DRIVER, NODE);
    stale["spec"]["pool"]["generation"] = json!(1);
    api.put_slice(stale);
    let end = Instant::now() + WAIT;
    while api.slices().contains_key("stale") {
        assert!(
            Instant::now() < end,
            "the stale slice stays:\n{}",
            driver.log()
        );
        thread::sleep(Duration::from_millis(10));
    }
    driver.wait_published(&api, &all, "ours, after the stale one");

    // SIGTERM: ours deleted, exit 0; the others untouched.
    driver.signal("TERM");
    assert_eq!(driver.wait_exit(), Some(0), "{}", driver.log());
    assert_eq!(
        api.slices().keys().cloned().collect::<Vec<_>>(),
        ["other-driver", "other-node"],
        "{}",
        driver.log()
    );
    assert!(
        api.writes()
            .iter()
            .all(|w| w.name != "other-node" && w.name != "other-driver"),
        "other nodes' and drivers' slices are never written"
    );
}

/// A pool of three slices (2 PFs x 130 VFs): the first VF gone writes
/// the first slice only (the others' devices stay where they were, not a
/// place up), at the same generation; back, it is where it was, and the
/// pool is what a fresh start publishes.
#[test]
fn a_vf_gone_from_the_front_of_the_pool_changes_its_own_slice() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    synth::sriov_nics(&root, 2, 130, 0);
    let api = FakeApi::start();
    let kubeconfig = api.kubeconfig(tmp.path());
    let mut driver = Driver::spawn(tmp.path(), Some(&kubeconfig), &["--node", NODE]);
    let all = expected(tmp.path(), 1);
    assert_eq!(all.len(), 3, "a pool of three slices");
    driver.wait_published(&api, &all, "the first publication");
    settle(&api, Duration::from_millis(300));

    // The first VF of the pool: the first device of the first slice
    // that is a VF.
    let mut vfs = synth::vf_links(&root);
    let link = vfs.remove(0);
    let target = fs::read_link(&link).unwrap();
    let address = link.file_name().unwrap().to_str().unwrap().to_string();
    let name = cdigen::dra::names::label(&format!("sriov-{address}"));
    let first: Vec<String> = all[0]
        .spec
        .devices
        .iter()
        .flatten()
        .map(|d| d.name.clone())
        .collect();
    assert!(
        first.contains(&name),
        "{name} in the first slice: {first:?}"
    );

    let from = api.writes().len();
    fs::remove_file(&link).unwrap();
    driver.signal("HUP");
    driver.wait_log("generation 1: 0 created, 1 updated, 0 deleted, ");
    settle(&api, Duration::from_millis(300));
    assert_eq!(
        slice_writes(&api, from),
        [("update".to_string(), all[0].metadata.name.clone().unwrap())],
        "{}",
        driver.log()
    );
    let now = published(&api);
    let devices = |s: &ResourceSlice| -> Vec<String> {
        s.spec
            .devices
            .iter()
            .flatten()
            .map(|d| d.name.clone())
            .collect()
    };
    let by_name = |n: &str| {
        now.iter()
            .find(|s| s.metadata.name.as_deref() == Some(n))
            .unwrap()
    };
    let mut left = first.clone();
    left.retain(|d| *d != name);
    assert_eq!(
        devices(by_name(all[0].metadata.name.as_deref().unwrap())),
        left
    );
    for s in &all[1..] {
        assert_eq!(
            devices(by_name(s.metadata.name.as_deref().unwrap())),
            devices(s)
        );
    }

    let from = api.writes().len();
    std::os::unix::fs::symlink(&target, &link).unwrap();
    driver.signal("HUP");
    driver.wait_published(&api, &all, "the VF back in its place");
    settle(&api, Duration::from_millis(300));
    assert_eq!(
        slice_writes(&api, from),
        [("update".to_string(), all[0].metadata.name.clone().unwrap())]
    );
    driver.signal("TERM");
    assert_eq!(driver.wait_exit(), Some(0), "{}", driver.log());
}

/// sysfs gone for a while under a running `cdigen dra-driver`: its passes
/// fail and say so, the published slices stay as they were (none deleted,
/// none rewritten), the specs too; once sysfs is back, passes publish
/// again.
#[test]
fn driver_keeps_its_slices_while_sysfs_is_gone() {
    let (tmp, root) = support::machine("example");
    let api = FakeApi::start();
    let kubeconfig = api.kubeconfig(tmp.path());
    let driver = Driver::spawn(tmp.path(), Some(&kubeconfig), &["--node", NODE]);
    let all = expected(tmp.path(), 1);
    driver.wait_published(&api, &all, "the first publication");
    let writes = api.writes().len();
    let specs = support::visible_names(&tmp.path().join("cdi"));

    let away = tmp.path().join("sys.away");
    fs::rename(root.join("sys"), &away).unwrap();
    driver.signal("HUP");
    driver.wait_log(
        "root does not look like a Linux host: sys/devices, sys/bus and sys/class are missing: \
         keeping the files and devices of the last pass (retrying in 1s)",
    );
    driver.wait_log("keeping the files and devices of the last pass (retrying in 2s)");
    assert!(says(&api, &all), "{}", driver.log());
    assert_eq!(api.writes().len(), writes, "no slice written or deleted");
    assert_eq!(support::visible_names(&tmp.path().join("cdi")), specs);

    // Back, without a VF: the next retry publishes without it.
    fs::rename(&away, root.join("sys")).unwrap();
    let replug = unplug_vf(&root, "0000:3b:00.3", "virtfn1");
    // (One update of the pool's one slice: the same generation.)
    driver.wait_published(&api, &expected(tmp.path(), 1), "the VF gone");
    replug();
}

/// `cdigen dra-driver` killed while writing its checkpoint or a metadata
/// file leaves `.cdigen-*.tmp` files behind: the next start removes them
/// (from the driver's directory, its metadata directory and the CDI
/// directory), and only them.
#[test]
fn driver_start_removes_temp_files_left_by_a_killed_driver() {
    let (tmp, _root) = support::machine("example");
    let driver_dir = tmp.path().join("plugins").join(DRIVER);
    // The earlier layout's metadata directory, and a request's of the
    // current one.
    let meta_dir = driver_dir.join("metadata");
    let request_dir =
        driver_dir.join("dra-device-metadata/6f1d3c2a-8b4e-4a7f-9c21-0d5e7b3a9f10/vf");
    let cdi = tmp.path().join("cdi");
    for d in [&meta_dir, &request_dir, &cdi] {
        fs::create_dir_all(d).unwrap();
    }
    let big = vec![b'{'; 1 << 20];
    let leftovers = [
        driver_dir.join(".cdigen-Xa91kq.tmp"),
        meta_dir.join(".cdigen-7fQz2m.tmp"),
        request_dir.join(".cdigen-Rk2v9a.tmp"),
        cdi.join(".cdigen-p0Lw3e.tmp"),
    ];
    let foreign = [
        driver_dir.join(".cdigen-Xa91kq.tmp.orig"),
        driver_dir.join("cdigen-Xa91kq.tmp"),
        meta_dir.join(".cdigen-notes"),
        request_dir.join("notes"),
        cdi.join(".cdigen-p0Lw3e.tmp~"),
    ];
    for f in leftovers.iter().chain(&foreign) {
        fs::write(f, &big).unwrap();
    }
    let api = FakeApi::start();
    let kubeconfig = api.kubeconfig(tmp.path());
    let mut driver = Driver::spawn(tmp.path(), Some(&kubeconfig), &["--node", NODE]);
    driver.wait_published(&api, &expected(tmp.path(), 1), "the first publication");
    let sock = driver_dir.join("dra.sock");
    let end = Instant::now() + WAIT;
    while !sock.exists() {
        assert!(Instant::now() < end, "no DRA socket:\n{}", driver.log());
        thread::sleep(Duration::from_millis(10));
    }
    for f in &leftovers {
        assert!(!f.exists(), "{} left:\n{}", f.display(), driver.log());
    }
    for f in &foreign {
        assert!(f.exists(), "{} removed", f.display());
    }
    driver.signal("TERM");
    assert_eq!(driver.wait_exit(), Some(0), "{}", driver.log());
}

/// A second `cdigen dra-driver` of the same name on the node's plugin
/// directory refuses to start, naming the lock file and the first one's
/// PID, before it publishes anything: the first keeps its sockets and its
/// slices (the second would otherwise delete them on its way out).
#[test]
fn a_second_driver_on_the_directory_refuses_to_start() {
    let (tmp, _root) = support::machine("example");
    let api = FakeApi::start();
    let kubeconfig = api.kubeconfig(tmp.path());
    let first = Driver::spawn(tmp.path(), Some(&kubeconfig), &["--node", NODE]);
    first.wait_published(&api, &expected(tmp.path(), 1), "the first publication");
    let dra_socket = tmp.path().join("plugins/dra.cdigen.io/dra.sock");
    let reg_socket = tmp.path().join("registry/dra.cdigen.io-reg.sock");
    let end = Instant::now() + WAIT;
    while !reg_socket.exists() {
        assert!(
            Instant::now() < end,
            "no registration socket:\n{}",
            first.log()
        );
        thread::sleep(Duration::from_millis(10));
    }
    let identity = |p: &Path| {
        use std::os::unix::fs::MetadataExt as _;
        fs::symlink_metadata(p).map(|m| (m.dev(), m.ino())).ok()
    };
    let sockets = (identity(&dra_socket), identity(&reg_socket));
    let writes = api.writes().len();

    // The second: its own working directory (and log), the same plugin
    // and registry directories.
    let (tmp2, _root2) = support::machine("example");
    for d in ["plugins", "registry"] {
        std::os::unix::fs::symlink(tmp.path().join(d), tmp2.path().join(d)).unwrap();
    }
    let mut second = Driver::spawn(tmp2.path(), Some(&kubeconfig), &["--node", NODE]);
    let code = second.wait_exit();
    let log = second.log();
    assert_ne!(code, Some(0), "{log}");
    let lock = tmp2
        .path()
        .join("plugins/dra.cdigen.io/.cdigen-dra-driver.lock");
    assert!(
        log.contains(&format!(
            "{} is held by PID {}: another instance serves this directory",
            lock.display(),
            first.pid()
        )),
        "{log}"
    );
    assert_eq!((identity(&dra_socket), identity(&reg_socket)), sockets);
    assert_eq!(api.writes().len(), writes, "the second wrote nothing");
    first.wait_published(&api, &expected(tmp.path(), 1), "the first's slices, kept");
}

/// `cdigen dra-driver` without a node name, or without an API server,
/// says so and fails (exit status 2).
#[test]
fn driver_needs_a_node_and_an_api_server() {
    let (tmp, _root) = support::machine("example");
    let mut driver = Driver::spawn(tmp.path(), None, &[]);
    assert_eq!(driver.wait_exit(), Some(2));
    let log = driver.log();
    assert!(
        log.contains(
            "cdigen dra-driver: no node name: give --node NAME or set NODE_NAME (in a DaemonSet, \
from the downward API's spec.nodeName); the slices are published for it"
        ),
        "{log}"
    );

    let mut driver = Driver::spawn(tmp.path(), None, &["--node", NODE]);
    assert_eq!(driver.wait_exit(), Some(2));
    let log = driver.log();
    assert!(
        log.contains("cannot reach the Kubernetes API:")
            && log.contains("(running outside a pod needs KUBECONFIG)"),
        "{log}"
    );

    let mut driver = Driver::spawn(tmp.path(), None, &["--node", "Node_A"]);
    assert_eq!(driver.wait_exit(), Some(2));
    let log = driver.log();
    assert!(
        log.contains(
            "cdigen: node name \"Node_A\" is not a DNS subdomain: \"Node_A\" is not a DNS label \
             (a-z 0-9 -, starting and ending with a letter or digit)"
        ),
        "{log}"
    );
}

/// The claim the end-to-end tests prepare: VF 0000:3b:00.3 with an
/// opaque env configuration.
const E2E_UID: &str = "6f1d3c2a-8b4e-4a7f-9c21-0d5e7b3a9f10";
const E2E_VF: &str = "sriov-0000-3b-00-3";

/// `cdigen dra-driver` on a copy of the example machine, registered by a
/// fake plugin watcher, with claim `ns/net` (E2E_UID, E2E_VF) prepared
/// over v1: (tempdir, root, API, driver, runtime, GetInfo's answer, the
/// prepared device, the registration and DRA sockets).
struct Prepared {
    tmp: tempfile::TempDir,
    root: PathBuf,
    api: FakeApi,
    driver: Driver,
    rt: tokio::runtime::Runtime,
    info: cdigen::dra::api::pluginregistration::PluginInfo,
    device: cdigen::dra::api::v1::Device,
    reg_socket: PathBuf,
    dra_socket: PathBuf,
}

fn prepare_e2e() -> Prepared {
    prepare_e2e_with(|_, _| {})
}

/// [`prepare_e2e`] with the machine changed first by `change` (given the
/// tempdir and the root).
fn prepare_e2e_with(change: impl FnOnce(&Path, &Path)) -> Prepared {
    use cdigen::dra::api::v1;

    let (tmp, root) = support::machine("example");
    change(tmp.path(), &root);
    let api = FakeApi::start();
    let kubeconfig = api.kubeconfig(tmp.path());
    let driver = Driver::spawn(tmp.path(), Some(&kubeconfig), &["--node", NODE]);
    driver.wait_published(&api, &expected(tmp.path(), 1), "the first publication");
    api.put_claim(json!({
        "metadata": {"namespace": "ns", "name": "net", "uid": E2E_UID},
        "spec": {},
        "status": {"allocation": {"nodeSelector": on_node(NODE), "devices": {
            "results": [{"driver": DRIVER, "pool": NODE, "device": E2E_VF, "request": "vf"}],
            "config": [{"source": "FromClaim", "requests": ["vf"], "opaque": {
                "driver": DRIVER, "parameters": {"apiVersion": "dra.cdigen.io/v1alpha1",
                    "kind": "DeviceConfig", "env": {"NCCL_IB_HCA": "mlx5_3"}}}}],
        }}},
    }));

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let reg_socket = tmp.path().join("registry/dra.cdigen.io-reg.sock");
    let dra_socket = tmp.path().join("plugins/dra.cdigen.io/dra.sock");
    let end = Instant::now() + WAIT;
    while !reg_socket.exists() {
        assert!(
            Instant::now() < end,
            "no registration socket:\n{}",
            driver.log()
        );
        thread::sleep(Duration::from_millis(10));
    }
    let (info, answer) = rt.block_on(async {
        // The plugin watcher as the kubelet's grpc-go client sends it.
        let info = watcher::register(&reg_socket).await.unwrap();
        let mut dra = v1::dra_plugin_client::DraPluginClient::new(
            cdigen::deviceplugin::kubelet::connect(&dra_socket)
                .await
                .unwrap(),
        );
        let answer = dra
            .node_prepare_resources(v1::NodePrepareResourcesRequest {
                claims: vec![v1::Claim {
                    namespace: "ns".into(),
                    uid: E2E_UID.into(),
                    name: "net".into(),
                }],
            })
            .await
            .unwrap()
            .into_inner();
        (info, answer)
    });
    let claim = &answer.claims[E2E_UID];
    assert_eq!(claim.error, "", "{}", driver.log());
    let [device] = claim.devices.as_slice() else {
        panic!("{claim:?}")
    };
    let device = device.clone();
    Prepared {
        tmp,
        root,
        api,
        driver,
        rt,
        info,
        device,
        reg_socket,
        dra_socket,
    }
}

/// The whole driver as the kubelet meets it: `cdigen dra-driver` on the
/// example machine registers through its registration socket (a fake
/// plugin watcher calls GetInfo and NotifyRegistrationStatus), and
/// NodePrepareResources for a claim the (fake) API server holds, allocated
/// a VF with an opaque env config, answers the VF's CDI name and the
/// per-claim device; the claim's status gets the VF's network data; the
/// Rust CDI library injects both names from the specs on disk; a
/// prepared VF that is unplugged stays published, tainted; unprepare
/// removes the per-claim spec; SIGTERM takes the sockets away.
#[test]
fn driver_registers_and_prepares_a_claim_end_to_end() {
    use cdigen::dra::api::v1;

    const UID: &str = E2E_UID;
    const VF: &str = E2E_VF;
    let Prepared {
        tmp,
        root,
        api,
        mut driver,
        rt,
        info,
        device: dev,
        reg_socket,
        dra_socket,
    } = prepare_e2e();
    assert_eq!(
        (info.r#type.as_str(), info.name.as_str()),
        ("DRAPlugin", DRIVER)
    );
    assert!(
        Path::new(&info.endpoint).is_absolute()
            && info.endpoint.ends_with("plugins/dra.cdigen.io/dra.sock"),
        "{info:?}"
    );
    assert_eq!(
        info.supported_versions,
        ["v1.DRAPlugin", "v1beta1.DRAPlugin"]
    );
    assert_eq!(
        (dev.pool_name.as_str(), dev.device_name.as_str()),
        (NODE, VF)
    );
    let per_claim = format!("k8s.dra.cdigen.io/claim={UID}-{VF}");
    assert_eq!(
        dev.cdi_device_ids,
        ["cdigen.io/vf=0000:3b:00.3", per_claim.as_str()]
    );

    // The claim's status: the VF's interface, as the CNI DRA driver says it.
    let status = &api.claim("ns", "net").unwrap()["status"]["devices"];
    assert_eq!(status[0]["driver"], json!(DRIVER));
    assert_eq!(status[0]["device"], json!(VF));
    assert_eq!(status[0]["conditions"][0]["type"], json!("Ready"));
    assert_eq!(status[0]["networkData"]["interfaceName"], json!("ens1f0v1"));

    // The Rust CDI library resolves both names from the specs on disk.
    if let Some(tool) = support::cdi_rs("driver_registers_and_prepares_a_claim_end_to_end") {
        let config = tmp.path().join("config.json");
        fs::write(
            &config,
            serde_json::to_vec(&json!({
                "ociVersion": "1.2.0",
                "process": {"args": ["sh"], "cwd": "/", "env": [], "user": {"uid": 0, "gid": 0}},
                "root": {"path": "rootfs"},
                "linux": {},
            }))
            .unwrap(),
        )
        .unwrap();
        let out = Command::new(tool)
            .arg("inject-bundle")
            .arg(tmp.path().join("cdi"))
            .arg(&config)
            .args(&dev.cdi_device_ids)
            .output()
            .unwrap();
        assert!(out.status.success(), "cdi-rs: {out:?}");
        let oci: Value = serde_json::from_slice(&fs::read(&config).unwrap()).unwrap();
        let env: Vec<&str> = oci["process"]["env"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(env.contains(&"NCCL_IB_HCA=mlx5_3"), "{env:?}");
        let devices: Vec<&str> = oci["linux"]["devices"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|d| d["path"].as_str())
            .collect();
        assert!(devices.contains(&"/dev/infiniband/uverbs3"), "{devices:?}");
        let mounts: Vec<&str> = oci["mounts"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["destination"].as_str())
            .collect();
        assert!(
            mounts.contains(
                &"/var/run/kubernetes.io/dra-device-attributes/resourceclaims/net/vf/dra.cdigen.io-metadata.json"
            ),
            "{mounts:?}"
        );
    }

    // Unplugged while prepared: still published, with the taint.
    let replug = unplug_vf(&root, "0000:3b:00.3", "virtfn1");
    driver.signal("HUP");
    let end = Instant::now() + WAIT;
    loop {
        let tainted = published(&api).iter().any(|s| {
            s.spec.devices.iter().flatten().any(|d| {
                d.name == VF
                    && d.taints.iter().flatten().any(|t| {
                        t.key == "dra.cdigen.io/unhealthy"
                            && t.value.as_deref() == Some("GoneWhileAllocated")
                    })
            })
        });
        if tainted {
            break;
        }
        assert!(
            Instant::now() < end,
            "the prepared VF is not published tainted:\n{}",
            driver.log()
        );
        thread::sleep(Duration::from_millis(20));
    }
    replug();

    let unprepared = rt.block_on(async {
        let mut dra = v1::dra_plugin_client::DraPluginClient::new(
            cdigen::deviceplugin::kubelet::connect(&dra_socket)
                .await
                .unwrap(),
        );
        dra.node_unprepare_resources(v1::NodeUnprepareResourcesRequest {
            claims: vec![v1::Claim {
                namespace: "ns".into(),
                uid: UID.into(),
                name: "net".into(),
            }],
        })
        .await
        .unwrap()
        .into_inner()
    });
    assert_eq!(unprepared.claims[UID].error, "");
    assert!(
        !tmp.path()
            .join(format!("cdi/k8s.dra.cdigen.io-claim_{UID}.json"))
            .exists()
    );

    driver.signal("TERM");
    assert_eq!(driver.wait_exit(), Some(0), "{}", driver.log());
    assert!(
        !reg_socket.exists() && !dra_socket.exists(),
        "{}",
        driver.log()
    );

    // The deployed ClusterRole allowed every request the driver made (and
    // 1.36's check of its status write), and grants nothing it did not use.
    let checks = api.checks();
    let denied: Vec<_> = checks.iter().filter(|c| !c.allowed).collect();
    assert!(denied.is_empty(), "refused: {denied:#?}");
    let used: BTreeSet<(String, String, String)> = checks
        .iter()
        .map(|c| {
            let a = &c.attributes;
            (a.api_group.clone(), a.resource_path(), a.verb.clone())
        })
        .collect();
    let granted: BTreeSet<(String, String, String)> = apiserver::shipped_rules()
        .iter()
        .flat_map(|r| {
            r.api_groups.iter().flat_map(move |g| {
                r.resources.iter().flat_map(move |res| {
                    r.verbs
                        .iter()
                        .map(move |v| (g.clone(), res.clone(), v.clone()))
                })
            })
        })
        .collect();
    assert_eq!(used, granted, "the ClusterRole against what the driver did");
}

/// A root whose interface directory is an absolute symlink: the address
/// NodePrepareResources publishes in the claim's status is read inside
/// the root (an absolute target taken from the root, as everywhere), never
/// from the file the link names on the host running cdigen.
#[test]
fn the_published_address_is_read_inside_the_root() {
    const MARKER: &str = "de:ad:be:ef:13:37";
    const INSIDE: &str = "02:00:00:00:00:01";
    let mut outside = PathBuf::new();
    let Prepared { api, driver, .. } = prepare_e2e_with(|tmp, root| {
        // On the host: a directory the link names, with the marker.
        outside = tmp.join("outside/ens1f0v1");
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("address"), format!("{MARKER}\n")).unwrap();
        // In the root, at that path: another address.
        let inside = root.join(outside.strip_prefix("/").unwrap());
        fs::create_dir_all(&inside).unwrap();
        fs::write(inside.join("address"), format!("{INSIDE}\n")).unwrap();
        let link = root.join("sys/class/net/ens1f0v1");
        fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink(&outside, &link).unwrap();
    });
    assert!(outside.is_absolute());
    let claim = api.claim("ns", "net").unwrap();
    let text = claim.to_string();
    assert!(
        !text.contains(MARKER),
        "the host's file was published: {text}"
    );
    let net = &claim["status"]["devices"][0]["networkData"];
    assert_eq!(net["interfaceName"], json!("ens1f0v1"), "{}", driver.log());
    assert_eq!(net["hardwareAddress"], json!(INSIDE), "{}", driver.log());
}

/// The health stream as the 1.36 kubelet reads it (`v1alpha1`) from
/// `cdigen dra-driver`: every device of the published slices under the
/// same names, the prepared one as NodePrepareResources named it,
/// HEALTHY; its RDMA node renumbered in /dev, it turns UNHEALTHY with the
/// inventory's reason after the next pass; SIGTERM ends the stream with
/// OK.
#[test]
fn driver_streams_its_devices_health() {
    use cdigen::dra::api::health_v1alpha1 as h;

    let Prepared {
        tmp,
        root,
        mut driver,
        rt,
        device,
        dra_socket,
        ..
    } = prepare_e2e();
    // (device, health, message) of a report, checking the pool.
    let read = |m: h::NodeWatchResourcesResponse| -> Vec<(String, String, String)> {
        m.devices
            .into_iter()
            .map(|d| {
                let id = d.device.clone().unwrap();
                assert_eq!(id.pool_name, NODE, "{d:?}");
                assert_eq!(d.health_check_timeout_seconds, 30, "{d:?}");
                (
                    id.device_name,
                    d.health().as_str_name().to_string(),
                    d.message,
                )
            })
            .collect()
    };
    let mut stream = rt.block_on(async {
        let mut c = h::dra_resource_health_client::DraResourceHealthClient::new(
            cdigen::deviceplugin::kubelet::connect(&dra_socket)
                .await
                .unwrap(),
        );
        c.node_watch_resources(h::NodeWatchResourcesRequest {})
            .await
            .unwrap()
            .into_inner()
    });
    let mut next = || -> Option<h::NodeWatchResourcesResponse> {
        rt.block_on(async {
            tokio::time::timeout(WAIT, stream.message())
                .await
                .expect("no health report in time")
                .unwrap()
        })
    };
    let names: Vec<String> = expected(tmp.path(), 1)
        .iter()
        .flat_map(|s| s.spec.devices.iter().flatten().map(|d| d.name.clone()))
        .collect();
    let healthy: Vec<(String, String, String)> = names
        .iter()
        .map(|n| (n.clone(), "HEALTHY".into(), String::new()))
        .collect();
    assert!(names.contains(&device.device_name), "{names:?}");
    assert_eq!(device.pool_name, NODE);
    assert_eq!(read(next().unwrap()), healthy, "{}", driver.log());

    // The VF's RDMA node gets other numbers than the kernel's.
    support::edit_manifest(&root, |l| {
        Some(if l.starts_with("/dev/infiniband/uverbs3 ") {
            l.replace("231:195", "231:199")
        } else {
            l.to_string()
        })
    });
    driver.signal("HUP");
    let mut sick = healthy.clone();
    let vf = sick.iter_mut().find(|d| d.0 == E2E_VF).unwrap();
    vf.1 = "UNHEALTHY".into();
    vf.2 = "/dev/infiniband/uverbs3 is 231:199, the kernel says 231:195".into();
    let mut got = read(next().unwrap());
    while got != sick {
        assert_eq!(got, healthy, "{}", driver.log());
        got = read(next().unwrap());
    }

    driver.signal("TERM");
    while let Some(m) = next() {
        assert_eq!(read(m), sick);
    }
    // The fake kubelet's connection goes, so the driver need not wait it out.
    drop(stream);
    drop(rt);
    assert_eq!(driver.wait_exit(), Some(0), "{}", driver.log());
}

/// `cdigen dra-driver` with the API server hung while a prepare waits on
/// it: NodeUnprepareResources, which needs no API call, answers at once
/// and removes the claim's files; the prepare completes once the API
/// answers.
#[test]
fn unprepare_answers_while_the_api_server_hangs() {
    use cdigen::dra::api::v1;

    const UID2: &str = "0b9f2a44-1c3d-4e5f-8a7b-6c5d4e3f2a1b";
    let Prepared {
        tmp,
        api,
        mut driver,
        rt,
        dra_socket,
        ..
    } = prepare_e2e();
    api.put_claim(json!({
        "metadata": {"namespace": "ns", "name": "net2", "uid": UID2},
        "spec": {},
        "status": {"allocation": {"nodeSelector": on_node(NODE), "devices": {
            "results": [{"driver": DRIVER, "pool": NODE, "device": "sriov-0000-3b-00-2", "request": "vf"}],
        }}},
    }));
    let claim = |name: &str, uid: &str| v1::Claim {
        namespace: "ns".into(),
        uid: uid.into(),
        name: name.into(),
    };
    api.hang_claims(true);
    let waiting = thread::spawn({
        let (sock, claim) = (dra_socket.clone(), claim("net2", UID2));
        move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let mut dra = v1::dra_plugin_client::DraPluginClient::new(
                    cdigen::deviceplugin::kubelet::connect(&sock).await.unwrap(),
                );
                dra.node_prepare_resources(v1::NodePrepareResourcesRequest {
                    claims: vec![claim],
                })
                .await
                .unwrap()
                .into_inner()
            })
        }
    });
    let end = Instant::now() + WAIT;
    while api.hanging() == 0 {
        assert!(Instant::now() < end, "no request hangs:\n{}", driver.log());
        thread::sleep(Duration::from_millis(10));
    }
    let started = Instant::now();
    let unprepared = rt.block_on(async {
        let mut dra = v1::dra_plugin_client::DraPluginClient::new(
            cdigen::deviceplugin::kubelet::connect(&dra_socket)
                .await
                .unwrap(),
        );
        tokio::time::timeout(
            Duration::from_secs(2),
            dra.node_unprepare_resources(v1::NodeUnprepareResourcesRequest {
                claims: vec![claim("net", E2E_UID)],
            }),
        )
        .await
    });
    let took = started.elapsed();
    let unprepared = unprepared
        .unwrap_or_else(|_| panic!("unprepare waited on the hung API server:\n{}", driver.log()))
        .unwrap()
        .into_inner();
    assert_eq!(unprepared.claims[E2E_UID].error, "");
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert!(
        !tmp.path()
            .join(format!("cdi/k8s.dra.cdigen.io-claim_{E2E_UID}.json"))
            .exists()
    );
    assert!(
        !waiting.is_finished(),
        "the prepare waits on the API server"
    );

    api.hang_claims(false);
    let answer = waiting.join().unwrap();
    assert_eq!(answer.claims[UID2].error, "", "{}", driver.log());
    driver.signal("TERM");
    assert_eq!(driver.wait_exit(), Some(0), "{}", driver.log());
}

/// What a pod gets: the devices of a claim the driver prepared, injected
/// by the Rust CDI library, in a container runc really starts over the
/// example machine's `/dev` (`run-in-container.sh`): the VF's RDMA nodes,
/// the variable its opaque configuration set, and the claim's device
/// metadata file, readable inside.
#[test]
#[ignore = "needs root and runc: .ci/run runs it"]
fn a_prepared_claim_works_in_a_real_container() {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/tools/cdi-check/run-in-container.sh");
    if !script.is_file() {
        assert!(
            std::env::var_os("CDIGEN_REQUIRE_SHARED").is_none(),
            "no {} (CDIGEN_REQUIRE_SHARED is set)",
            script.display()
        );
        eprintln!("skipped: no ../shared/tools/cdi-check/run-in-container.sh beside the crate");
        return;
    }
    let Prepared {
        tmp,
        root,
        mut driver,
        device,
        ..
    } = prepare_e2e();
    let host = tmp.path().join("host");
    fs::create_dir(&host).unwrap();
    fs::copy(root.join("dev.manifest"), host.join("dev.manifest")).unwrap();
    let out = Command::new("bash")
        .arg(&script)
        .arg("--host-overlay")
        .arg(&host)
        .arg(tmp.path().join("cdi"))
        .args(&device.cdi_device_ids)
        .args([
            "--",
            "sh",
            "-c",
            "ls -l /dev/infiniband/uverbs3 /dev/infiniband/rdma_cm; echo \"HCA=$NCCL_IB_HCA\"; \
             cat /var/run/kubernetes.io/dra-device-attributes/resourceclaims/net/vf/dra.cdigen.io-metadata.json",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("run-in-container: exit 0"),
        "{stdout}{stderr}"
    );
    let uverbs = stdout
        .lines()
        .find(|l| l.ends_with("/dev/infiniband/uverbs3"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        uverbs.starts_with('c') && uverbs.contains("231, 195"),
        "{uverbs}"
    );
    assert!(stdout.contains("HCA=mlx5_3"), "{stdout}");
    let meta_start = stdout.find('{').unwrap_or_else(|| panic!("{stdout}"));
    let meta_end = stdout.rfind('}').unwrap();
    let meta: Value = serde_json::from_str(&stdout[meta_start..=meta_end]).unwrap();
    assert_eq!(meta["apiVersion"], "metadata.resource.k8s.io/v1alpha1");
    assert_eq!(meta["metadata"]["uid"], json!(E2E_UID), "{meta}");
    assert_eq!(
        meta["requests"][0]["devices"][0]["name"],
        json!(E2E_VF),
        "{meta}"
    );
    driver.signal("TERM");
    assert_eq!(driver.wait_exit(), Some(0), "{}", driver.log());
}

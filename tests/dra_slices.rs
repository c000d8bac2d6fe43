//! The ResourceSlices `cdigen dra-driver --print-slices` prints for each
//! fixture machine: exactly `expected/dra/resourceslices.yaml` (node
//! `node-1`; `CDIGEN_BLESS=1 cargo test --test dra_slices` rewrites them;
//! review the diff before committing), each within the API's limits as
//! checked here; the schema is checked by `.ci/check-kubernetes.sh`.
//!
//! Also the command's errors: no node name, a node name that is not a DNS
//! subdomain; a string value over 64 characters left out; and a PCIe link
//! below its width tainting the devices on it, unless ignored.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[path = "support/golden.rs"]
mod golden;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::api::resource::v1::ResourceSlice;

const NODE: &str = "node-1";
const DRIVER: &str = "dra.cdigen.io";

use golden::{bless, cdigen, fixtures_dir, machines};

fn print_slices(root: &Path, extra: &[&str]) -> String {
    let mut args = vec![
        "dra-driver",
        "--print-slices",
        "--node",
        NODE,
        "--root",
        root.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let (code, stdout, stderr) = cdigen(&args);
    assert_eq!(code, 0, "{}: {stderr}", root.display());
    stdout
}

/// A definitions directory enabling the built-in `usb-serial` generator,
/// as the README tells users to (a copy with `enabled: true`).
fn usb_serial_enabled(dir: &Path) -> PathBuf {
    enabled(dir, "usb-serial")
}

/// A definitions directory with the shipped definition `name`, enabled.
fn enabled(dir: &Path, name: &str) -> PathBuf {
    let defs = dir.join("generators.d");
    fs::create_dir_all(&defs).unwrap();
    let text = fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("generators/{name}.yaml")),
    )
    .unwrap();
    assert!(text.contains("\nenabled: false\n"));
    fs::write(
        defs.join(format!("{name}.yaml")),
        text.replace("\nenabled: false\n", "\nenabled: true\n"),
    )
    .unwrap();
    defs
}

/// A definition that groups the nodes of one parent (`group: parent`)
/// publishes one DRA device per parent: the XDMA card's 27 nodes are one
/// allocatable device, each ALSA card one.
#[test]
fn a_grouped_device_is_one_dra_device() {
    let tmp = tempfile::tempdir().unwrap();
    enabled(tmp.path(), "xdma");
    let defs = enabled(tmp.path(), "alsa");
    let yaml = print_slices(
        &fixtures_dir().join("serial-host/root"),
        &["--generators", defs.to_str().unwrap()],
    );
    let devices: Vec<_> = parse(&yaml)
        .iter()
        .flat_map(|s| s.spec.devices.clone().unwrap_or_default())
        .filter(|d| d.name.starts_with("xdma-") || d.name.starts_with("alsa-"))
        .collect();
    let names: BTreeSet<String> = devices
        .iter()
        .map(|d| {
            d.attributes.as_ref().unwrap()["cdiName"]
                .string
                .clone()
                .unwrap()
        })
        .collect();
    assert_eq!(
        names,
        BTreeSet::from(["0000:02:00.0".into(), "Generic".into(), "HDMI".into()]),
        "{yaml}"
    );
    let fpga = devices
        .iter()
        .find(|d| d.name.starts_with("xdma-"))
        .unwrap();
    let a = fpga.attributes.as_ref().unwrap();
    assert_eq!(
        a["resource.kubernetes.io/pciBusID"].string.as_deref(),
        Some("0000:02:00.0")
    );
}

fn golden(path: &Path, actual: &str, failures: &mut Vec<String>) {
    if bless() {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, actual).unwrap();
        return;
    }
    match fs::read_to_string(path) {
        Ok(expected) if expected == actual => {}
        Ok(expected) => failures.push(format!(
            "{} differs:\n{}",
            path.display(),
            similar::TextDiff::from_lines(expected.as_str(), actual)
                .unified_diff()
                .header("expected", "actual")
        )),
        Err(e) => failures.push(format!("{}: {e}", path.display())),
    }
}

/// The slices of `machine` with the generator definitions in `defs`,
/// compared with its golden `expected/dra/resourceslices-<name>.yaml` and
/// checked against the API's limits (failures collected).
fn with_definitions(
    machine: &str,
    defs: &Path,
    name: &str,
    failures: &mut Vec<String>,
) -> Vec<ResourceSlice> {
    let root = fixtures_dir().join(machine).join("root");
    let yaml = print_slices(&root, &["--generators", defs.to_str().unwrap()]);
    golden(
        &fixtures_dir()
            .join(machine)
            .join(format!("expected/dra/resourceslices-{name}.yaml")),
        &yaml,
        failures,
    );
    let slices = parse(&yaml);
    failures.extend(
        limits(&slices)
            .into_iter()
            .map(|why| format!("{machine} ({name}): {why}")),
    );
    slices
}

fn parse(yaml: &str) -> Vec<ResourceSlice> {
    serde_saphyr::from_str_multiple(yaml).unwrap()
}

fn is_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn is_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_label)
}

fn is_c_identifier(s: &str) -> bool {
    let mut b = s.bytes();
    s.len() <= 32
        && b.next()
            .is_some_and(|f| f.is_ascii_alphabetic() || f == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// Whether `s` is a label value (at most 63 of `A-Z a-z 0-9 - _ .`,
/// starting and ending with a letter or digit, or empty).
fn is_label_value(s: &str) -> bool {
    s.is_empty()
        || (s.len() <= 63
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            && s.starts_with(|c: char| c.is_ascii_alphanumeric())
            && s.ends_with(|c: char| c.is_ascii_alphanumeric()))
}

/// A whole-number quantity (`8`, `40Gi`) in its unit.
fn quantity(q: &str) -> i64 {
    let digits = q.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    digits.parse().unwrap_or(i64::MAX)
}

/// The API's limits on one node's pool, as the API server validates them:
/// what is wrong, in words.
fn limits(slices: &[ResourceSlice]) -> Vec<String> {
    let mut bad = Vec::new();
    if slices.is_empty() {
        bad.push("no slice: an empty pool is one slice without devices".into());
    }
    let mut names = BTreeSet::new();
    let mut slice_names = BTreeSet::new();
    let mut counter_sets = BTreeSet::new();
    // What the devices consume of each counter set, summed, against what
    // the set holds: the existing partitions fit their GPU.
    let mut consumed: std::collections::BTreeMap<(String, String), i64> = Default::default();
    let mut held: std::collections::BTreeMap<(String, String), i64> = Default::default();
    for s in slices {
        for set in s.spec.shared_counters.as_deref().unwrap_or_default() {
            for (k, c) in &set.counters {
                held.insert((set.name.clone(), k.clone()), quantity(&c.value.0));
            }
        }
        for d in s.spec.devices.as_deref().unwrap_or_default() {
            let uses = d.consumes_counters.as_deref().unwrap_or_default();
            if uses.len() > 2 {
                bad.push(format!(
                    "{}: consumes from {} counter sets, over 2",
                    d.name,
                    uses.len()
                ));
            }
            for u in uses {
                for (k, c) in &u.counters {
                    *consumed
                        .entry((u.counter_set.clone(), k.clone()))
                        .or_default() += quantity(&c.value.0);
                }
            }
        }
    }
    for (key, n) in &consumed {
        match held.get(key) {
            None => bad.push(format!(
                "counter {key:?} is consumed but no counter set holds it"
            )),
            Some(h) if n > h => bad.push(format!("counter {key:?}: {n} consumed, {h} held")),
            Some(_) => {}
        }
    }
    for s in slices {
        let name = s.metadata.name.clone().unwrap_or_default();
        if !is_subdomain(&name) {
            bad.push(format!("slice name {name:?} is not a DNS subdomain"));
        }
        if !slice_names.insert(name.clone()) {
            bad.push(format!("slice name {name:?} twice"));
        }
        let spec = &s.spec;
        if spec.driver != DRIVER || spec.node_name.as_deref() != Some(NODE) {
            bad.push(format!(
                "{name}: driver {} node {:?}",
                spec.driver, spec.node_name
            ));
        }
        if spec.pool.name != NODE {
            bad.push(format!("{name}: pool {}", spec.pool.name));
        }
        if spec.pool.generation != slices[0].spec.pool.generation {
            bad.push(format!("{name}: generation differs from the first slice's"));
        }
        if usize::try_from(spec.pool.resource_slice_count).ok() != Some(slices.len()) {
            bad.push(format!(
                "{name}: resourceSliceCount {} but {} slices",
                spec.pool.resource_slice_count,
                slices.len()
            ));
        }
        if spec.devices.is_some() && spec.shared_counters.is_some() {
            bad.push(format!("{name}: both devices and sharedCounters"));
        }
        let sets = spec.shared_counters.as_deref().unwrap_or_default();
        if sets.len() > 8 {
            bad.push(format!("{name}: {} counter sets, over 8", sets.len()));
        }
        for set in sets {
            if !is_label(&set.name) || set.counters.is_empty() || set.counters.len() > 32 {
                bad.push(format!("{name}: counter set {set:?}"));
            }
            if !counter_sets.insert(set.name.clone()) {
                bad.push(format!("counter set {:?} twice in the pool", set.name));
            }
        }
        let devices = spec.devices.as_deref().unwrap_or_default();
        let tainted = devices
            .iter()
            .any(|d| d.taints.is_some() || d.consumes_counters.is_some());
        let max = if tainted { 64 } else { 128 };
        if devices.len() > max {
            bad.push(format!("{name}: {} devices, over {max}", devices.len()));
        }
        for d in devices {
            if !is_label(&d.name) {
                bad.push(format!("device name {:?} is not a DNS label", d.name));
            }
            if !names.insert(d.name.clone()) {
                bad.push(format!("device name {:?} twice in the pool", d.name));
            }
            let attrs = d.attributes.clone().unwrap_or_default();
            let caps = d.capacity.clone().unwrap_or_default();
            if attrs.len() + caps.len() > 32 {
                bad.push(format!(
                    "{}: {} attributes and capacities",
                    d.name,
                    attrs.len() + caps.len()
                ));
            }
            for (k, c) in &caps {
                if c.request_policy.is_some() && d.allow_multiple_allocations != Some(true) {
                    bad.push(format!(
                        "{}: capacity {k} has a requestPolicy but the device does not allow multiple allocations",
                        d.name
                    ));
                }
            }
            let keys = attrs.keys().chain(caps.keys());
            for k in keys {
                let ok = match k.split_once('/') {
                    Some((domain, id)) => {
                        is_subdomain(domain) && domain.len() <= 63 && is_c_identifier(id)
                    }
                    None => is_c_identifier(k),
                };
                if !ok {
                    bad.push(format!("{}: attribute name {k:?}", d.name));
                }
            }
            for (k, a) in &attrs {
                let set = [
                    a.int.is_some(),
                    a.bool.is_some(),
                    a.string.is_some(),
                    a.version.is_some(),
                ];
                if set.iter().filter(|x| **x).count() != 1 {
                    bad.push(format!("{}: {k}: not exactly one value", d.name));
                }
                if a.string.as_ref().is_some_and(|s| s.len() > 64) {
                    bad.push(format!("{}: {k}: over 64 characters", d.name));
                }
            }
            for t in d.taints.as_deref().unwrap_or_default() {
                if t.key != format!("{DRIVER}/unhealthy")
                    || !["NoSchedule", "NoExecute"].contains(&t.effect.as_str())
                    || !is_label_value(t.value.as_deref().unwrap_or(""))
                {
                    bad.push(format!("{}: taint {t:?}", d.name));
                }
            }
            if d.taints.as_ref().is_some_and(|t| t.len() > 16) {
                bad.push(format!("{}: over 16 taints", d.name));
            }
        }
    }
    bad
}

/// Every fixture machine's slices: the golden, and within the limits.
#[test]
fn every_machine_matches_its_golden_slices() {
    let mut failures = Vec::new();
    let all = machines();
    assert!(
        all.len() >= 5,
        "expected the fixture machines, found {all:?}"
    );
    let mut devices = 0;
    for m in &all {
        let root = fixtures_dir().join(m).join("root");
        let yaml = print_slices(&root, &[]);
        golden(
            &fixtures_dir()
                .join(m)
                .join("expected/dra/resourceslices.yaml"),
            &yaml,
            &mut failures,
        );
        let slices = parse(&yaml);
        for why in limits(&slices) {
            failures.push(format!("{m}: {why}"));
        }
        devices += slices
            .iter()
            .map(|s| s.spec.devices.as_ref().map_or(0, Vec::len))
            .sum::<usize>();
    }
    // The opt-in USB serial generator (enabled by a user definition) on
    // the machine with adapters: what the README's example selects on.
    let tmp = tempfile::tempdir().unwrap();
    let defs = usb_serial_enabled(tmp.path());
    with_definitions("serial-host", &defs, "usb-serial", &mut failures);
    // The Coral Edge TPU of `edge-server` by its user's definition: a
    // generic device with its PCI function's pciBusID, pcieRoot, numaNode.
    let defs = fixtures_dir().join("edge-server/generators.d");
    let tpu = with_definitions("edge-server", &defs, "coral-tpu", &mut failures);
    let apex = tpu
        .iter()
        .flat_map(|s| s.spec.devices.iter().flatten())
        .find(|d| {
            d.attributes.as_ref().is_some_and(|a| {
                a.get("generator").and_then(|v| v.string.as_deref()) == Some("coral-tpu")
            })
        })
        .expect("the TPU's device");
    let a = apex.attributes.as_ref().unwrap();
    let text = |k: &str| a.get(k).and_then(|v| v.string.clone());
    assert_eq!(
        text("resource.kubernetes.io/pciBusID").as_deref(),
        Some("0000:05:00.0")
    );
    assert_eq!(
        text("resource.kubernetes.io/pcieRoot").as_deref(),
        Some("pci0000:00")
    );
    assert_eq!(a["resource.kubernetes.io/numaNode"].int, Some(0));
    assert!(
        devices >= 30,
        "expected the fixtures' devices, got {devices}"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The standard attributes and the ones the README's examples select on
/// are where the fixtures say.
#[test]
fn the_examples_attributes_are_published() {
    let yaml = print_slices(&fixtures_dir().join("example/root"), &[]);
    let slices = parse(&yaml);
    let devices: Vec<_> = slices
        .iter()
        .flat_map(|s| s.spec.devices.clone().unwrap_or_default())
        .collect();
    let vf = devices
        .iter()
        .find(|d| d.name == "sriov-0000-3b-00-2")
        .expect("the VF 0000:3b:00.2");
    let a = vf.attributes.as_ref().unwrap();
    let s = |k: &str| a[k].string.clone().unwrap();
    assert_eq!(s("resource.kubernetes.io/pciBusID"), "0000:3b:00.2");
    assert_eq!(s("resource.kubernetes.io/pcieRoot"), "pci0000:3a");
    assert_eq!(a["resource.kubernetes.io/numaNode"].int, Some(0));
    assert_eq!(s("pfName"), "ens1f0np0");
    assert_eq!(a["vfIndex"].int, Some(0));
    assert_eq!(s("class"), "vf");
    assert_eq!(s("kind"), "cdigen.io/vf");
    // What Multus reads in its DRA mode: the resource a
    // NetworkAttachmentDefinition names, the PCI address for the CNI.
    assert_eq!(s("k8s.cni.cncf.io/resourceName"), "cdigen.io/vf");
    assert_eq!(s("k8s.cni.cncf.io/deviceID"), "0000:3b:00.2");
    // vdpa0 has no NUMA node in the fixture: no numaNode attribute.
    let vdpa = devices.iter().find(|d| d.name == "vdpa-vdpa0").unwrap();
    let a = vdpa.attributes.as_ref().unwrap();
    assert!(!a.contains_key("resource.kubernetes.io/numaNode"), "{a:?}");
    assert_eq!(
        a["k8s.cni.cncf.io/resourceName"].string.as_deref(),
        Some("cdigen.io/vdpa")
    );
    assert_eq!(
        a["k8s.cni.cncf.io/deviceID"].string.as_deref(),
        Some("0000:3b:00.5")
    );
    let rdma = devices
        .iter()
        .find(|d| d.name == "rdma-0000-3b-00-0")
        .unwrap();
    let a = rdma.attributes.as_ref().unwrap();
    assert_eq!(
        a["k8s.cni.cncf.io/resourceName"].string.as_deref(),
        Some("cdigen.io/rdma")
    );
    assert_eq!(
        a["k8s.cni.cncf.io/deviceID"].string.as_deref(),
        Some("0000:3b:00.0")
    );
    let gpu = devices
        .iter()
        .find(|d| d.name == "amd-gpu-0000-03-00-0")
        .unwrap();
    assert!(
        !gpu.attributes
            .as_ref()
            .unwrap()
            .keys()
            .any(|k| k.starts_with("k8s.cni.cncf.io/")),
        "a GPU is no network device"
    );

    let tmp = tempfile::tempdir().unwrap();
    let defs = usb_serial_enabled(tmp.path());
    let yaml = print_slices(
        &fixtures_dir().join("serial-host/root"),
        &["--generators", defs.to_str().unwrap()],
    );
    let serials: BTreeSet<String> = parse(&yaml)
        .iter()
        .flat_map(|s| s.spec.devices.clone().unwrap_or_default())
        .filter(|d| d.name.starts_with("usb-serial-"))
        .filter_map(|d| d.attributes.unwrap()["cdiName"].string.clone())
        .collect();
    // The generator names each single-port adapter by its serial number,
    // each port of a multi-port one by serial and interface, and one
    // without a serial by its port path: every port is one DRA device.
    let want: BTreeSet<String> = [
        "85734323231351E0E1A1",
        "A10K5PQR",
        "pci-0000:0e:00.3-usb-5",
        "pci-0000:0e:00.3-usb-1.4",
    ]
    .into_iter()
    .map(String::from)
    .chain((0..4).map(|i| format!("FT4QA7B2-if0{i}")))
    .chain((0..4).map(|i| format!("0123456789ABCDEF-if0{i}")))
    .collect();
    assert_eq!(serials, want);
}

/// The MI300X in CPX mode: its eight partitions consume one XCD each of
/// their GPU's counter set, published in a slice of its own; the SPX GPU
/// and the other devices consume none.
#[test]
fn amd_partitions_share_their_gpus_counters() {
    let yaml = print_slices(&fixtures_dir().join("mi300x-cpx/root"), &[]);
    let slices = parse(&yaml);
    assert!(limits(&slices).is_empty(), "{:?}", limits(&slices));
    let sets: Vec<_> = slices
        .iter()
        .flat_map(|s| s.spec.shared_counters.clone().unwrap_or_default())
        .collect();
    assert_eq!(sets.len(), 1, "{sets:?}");
    assert_eq!(sets[0].name, "gpu-0000-05-00-0");
    assert_eq!(sets[0].counters["xcds"].value.0, "8");
    assert_eq!(sets[0].counters["partitions"].value.0, "8");
    for d in slices
        .iter()
        .flat_map(|s| s.spec.devices.clone().unwrap_or_default())
    {
        let uses = d.consumes_counters.clone().unwrap_or_default();
        if d.name.starts_with("amd-gpu-0000-05-00-0") {
            assert_eq!(uses.len(), 1, "{}", d.name);
            assert_eq!(uses[0].counter_set, "gpu-0000-05-00-0");
            assert_eq!(uses[0].counters["xcds"].value.0, "1");
        } else {
            assert!(uses.is_empty(), "{}", d.name);
        }
    }
}

/// Every device on a PCI function carries the standard PCI attributes:
/// an AMD GPU's partitions (platform devices) those of their GPU, a USB
/// serial adapter those of its USB controller.
#[test]
fn every_pci_device_has_its_pcie_root() {
    let yaml = print_slices(&fixtures_dir().join("mi300x-cpx/root"), &[]);
    let parts: Vec<_> = parse(&yaml)
        .iter()
        .flat_map(|s| s.spec.devices.clone().unwrap_or_default())
        .filter(|d| d.name.starts_with("amd-gpu-0000-05-00-0"))
        .collect();
    assert_eq!(parts.len(), 8, "{parts:?}");
    for d in &parts {
        let a = d.attributes.as_ref().unwrap();
        let s = |k: &str| a.get(k).and_then(|v| v.string.clone());
        assert_eq!(
            s("resource.kubernetes.io/pcieRoot").as_deref(),
            Some("pci0000:00"),
            "{}",
            d.name
        );
        assert_eq!(
            s("resource.kubernetes.io/pciBusID").as_deref(),
            Some("0000:05:00.0")
        );
        assert_eq!(a["resource.kubernetes.io/numaNode"].int, Some(0));
    }
    let tmp = tempfile::tempdir().unwrap();
    let defs = usb_serial_enabled(tmp.path());
    let yaml = print_slices(
        &fixtures_dir().join("serial-host/root"),
        &["--generators", defs.to_str().unwrap()],
    );
    let serial: Vec<_> = parse(&yaml)
        .iter()
        .flat_map(|s| s.spec.devices.clone().unwrap_or_default())
        .filter(|d| d.name.starts_with("usb-serial-"))
        .collect();
    assert_eq!(serial.len(), 12);
    for d in &serial {
        let a = d.attributes.as_ref().unwrap();
        assert_eq!(
            a["resource.kubernetes.io/pciBusID"].string.as_deref(),
            Some("0000:0e:00.3")
        );
        assert_eq!(
            a["resource.kubernetes.io/pcieRoot"].string.as_deref(),
            Some("pci0000:00")
        );
        // The controller's numa_node is -1: no numaNode.
        assert!(!a.contains_key("resource.kubernetes.io/numaNode"));
    }
}

/// The opt-in `rdma-shared` pool (1000 device plugin units per device)
/// publishes each RDMA device once, with a `shares` capacity of 1000 that
/// claims consume one at a time (KEP-5075).
#[test]
fn a_shared_pool_publishes_a_consumable_capacity() {
    let tmp = tempfile::tempdir().unwrap();
    let defs = tmp.path().join("generators.d");
    fs::create_dir_all(&defs).unwrap();
    let text = fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("generators/rdma-shared.yaml"),
    )
    .unwrap();
    assert!(text.contains("\nenabled: false\n") && text.contains("replicas: 1000"));
    fs::write(
        defs.join("rdma-shared.yaml"),
        text.replace("\nenabled: false\n", "\nenabled: true\n"),
    )
    .unwrap();
    let yaml = print_slices(
        &fixtures_dir().join("rdma-host/root"),
        &["--generators", defs.to_str().unwrap()],
    );
    let slices = parse(&yaml);
    assert!(limits(&slices).is_empty(), "{:?}", limits(&slices));
    let shared: Vec<_> = slices
        .iter()
        .flat_map(|s| s.spec.devices.clone().unwrap_or_default())
        .filter(|d| d.name.starts_with("rdma-shared-"))
        .collect();
    assert!(!shared.is_empty(), "{yaml}");
    for d in &shared {
        assert_eq!(d.allow_multiple_allocations, Some(true), "{}", d.name);
        let c = &d.capacity.as_ref().unwrap()["shares"];
        assert_eq!(c.value.0, "1000");
        let p = c.request_policy.as_ref().unwrap();
        assert_eq!(p.default.as_ref().unwrap().0, "1");
        let r = p.valid_range.as_ref().unwrap();
        assert_eq!(
            (r.min.0.as_str(), r.step.as_ref().unwrap().0.as_str()),
            ("1", "1")
        );
        assert_eq!(r.max, None);
    }
    // A device that is not shared has no policy (the API refuses one).
    for d in slices
        .iter()
        .flat_map(|s| s.spec.devices.clone().unwrap_or_default())
        .filter(|d| d.allow_multiple_allocations.is_none())
    {
        for c in d.capacity.unwrap_or_default().values() {
            assert!(c.request_policy.is_none(), "{}", d.name);
        }
    }
}

/// Printing writes no spec: the output directory stays absent.
#[test]
fn print_slices_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cdi");
    let devinfo = tmp.path().join("devinfo");
    let yaml = print_slices(
        &fixtures_dir().join("example/root"),
        &[
            "--output-dir",
            out.to_str().unwrap(),
            "--devinfo-dir",
            devinfo.to_str().unwrap(),
        ],
    );
    assert!(
        yaml.starts_with("---\napiVersion: 'resource.k8s.io/v1'\nkind: 'ResourceSlice'\n"),
        "{yaml}"
    );
    assert!(!out.exists() && !devinfo.exists());
}

#[test]
fn print_slices_needs_a_node_name() {
    let root = fixtures_dir().join("example/root");
    let (code, stdout, stderr) = cdigen(&[
        "dra-driver",
        "--print-slices",
        "--root",
        root.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert_eq!(stdout, "");
    assert_eq!(
        stderr,
        "cdigen: no node name: pass --node NAME or set NODE_NAME (the slices' nodeName and pool)\n"
    );
}

#[test]
fn print_slices_refuses_a_node_name_that_is_not_a_subdomain() {
    let root = fixtures_dir().join("example/root");
    let (code, stdout, stderr) = cdigen(&[
        "dra-driver",
        "--print-slices",
        "--node",
        "Node_1",
        "--root",
        root.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert_eq!(stdout, "");
    assert_eq!(
        stderr,
        "cdigen: node name \"Node_1\" is not a DNS subdomain: \"Node_1\" is not a DNS label \
(a-z 0-9 -, starting and ending with a letter or digit)\n"
    );
    let (code, _, stderr) = cdigen(&[
        "dra-driver",
        "--print-slices",
        "--node",
        "node-1",
        "--driver-name",
        "Not_A.Domain",
        "--root",
        root.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(
        stderr.starts_with("cdigen: driver name \"Not_A.Domain\" is not a DNS subdomain"),
        "{stderr}"
    );
}

/// A USB adapter whose manufacturer string is 80 characters: that
/// attribute is left out (not cut short), the rest of the device stays.
#[test]
fn an_over_long_attribute_value_is_left_out() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let status = Command::new("cp")
        .arg("-a")
        .arg(fixtures_dir().join("serial-host/root"))
        .arg(&root)
        .status()
        .unwrap();
    assert!(status.success());
    let file = root.join("sys/devices/pci0000:00/0000:00:08.1/0000:0e:00.3/usb1/1-2/manufacturer");
    fs::write(&file, format!("{}\n", "M".repeat(80))).unwrap();
    let defs = usb_serial_enabled(tmp.path());
    let yaml = print_slices(&root, &["--generators", defs.to_str().unwrap()]);
    let slices = parse(&yaml);
    assert!(limits(&slices).is_empty(), "{:?}", limits(&slices));
    let devices: Vec<_> = slices
        .iter()
        .flat_map(|s| s.spec.devices.clone().unwrap_or_default())
        .collect();
    let by_serial = |serial: &str| {
        devices
            .iter()
            .find(|d| d.attributes.as_ref().unwrap()["cdiName"].string.as_deref() == Some(serial))
            .unwrap()
            .attributes
            .clone()
            .unwrap()
    };
    let ftdi = by_serial("A10K5PQR");
    assert!(!ftdi.contains_key("manufacturer"), "{ftdi:?}");
    assert!(ftdi.contains_key("idVendor"), "{ftdi:?}");
    let arduino = by_serial("85734323231351E0E1A1");
    assert_eq!(
        arduino["manufacturer"].string.as_deref(),
        Some("Arduino (www.arduino.cc)")
    );
}

/// The DRA DaemonSet: its arguments are ones `cdigen dra-driver` takes
/// (run here with `--print-slices`, the host's `/` being the fixture
/// `example`), its kubelet directories are cdigen's defaults and mounted,
/// `NODE_NAME` is the pod's node, and it runs only on the nodes labelled
/// `cdigen.io/mode=dra`, which the device plugin's DaemonSet avoids.
#[test]
fn the_dra_daemonset_and_the_per_node_switch() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |p: &str| -> serde_json::Value {
        serde_saphyr::from_str(&fs::read_to_string(repo.join(p)).unwrap()).unwrap()
    };
    let ds = read("deploy/kubernetes/overlays/dra/daemonset.yaml");
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(pod["nodeSelector"]["cdigen.io/mode"], "dra");
    assert_eq!(pod["serviceAccountName"], "cdigen-dra");
    let c = &pod["containers"][0];
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(args[0], "dra-driver");
    let plugin_dir = format!("--plugin-dir={}", cdigen::dra::PLUGIN_DIR);
    let registry_dir = format!("--registry-dir={}", cdigen::dra::REGISTRY_DIR);
    assert!(args.contains(&plugin_dir.as_str()), "{args:?}");
    assert!(args.contains(&registry_dir.as_str()), "{args:?}");
    let mounts: Vec<&str> = c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["mountPath"].as_str().unwrap())
        .collect();
    // The driver's own directory of the kubelet's plugin directory, not
    // the other plugins'.
    let driver_dir = format!("{}/{}", cdigen::dra::PLUGIN_DIR, cdigen::dra::DRIVER_NAME);
    assert!(!mounts.contains(&cdigen::dra::PLUGIN_DIR), "{mounts:?}");
    for dir in [
        driver_dir.as_str(),
        cdigen::dra::REGISTRY_DIR,
        cdigen::cdi::DYNAMIC_DIR,
        "/host/sys",
        "/host/proc",
        "/host/dev",
    ] {
        assert!(mounts.contains(&dir), "{dir} not mounted: {mounts:?}");
    }
    let node = c["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "NODE_NAME")
        .unwrap();
    assert_eq!(node["valueFrom"]["fieldRef"]["fieldPath"], "spec.nodeName");

    // The arguments parse: printed with --print-slices on the fixture.
    let tmp = tempfile::tempdir().unwrap();
    let mut run: Vec<String> = args
        .iter()
        .map(|a| match a.split_once('=') {
            Some(("--root", _)) => {
                format!("--root={}", fixtures_dir().join("example/root").display())
            }
            Some((flag, path)) if path.starts_with('/') => {
                format!(
                    "{flag}={}",
                    tmp.path().join(path.trim_start_matches('/')).display()
                )
            }
            _ => (*a).to_string(),
        })
        .collect();
    run.extend(["--print-slices".into(), "--node".into(), NODE.into()]);
    let run: Vec<&str> = run.iter().map(String::as_str).collect();
    let (code, stdout, stderr) = cdigen(&run);
    assert_eq!(code, 0, "{run:?}: {stderr}");
    assert_eq!(
        stdout,
        fs::read_to_string(fixtures_dir().join("example/expected/dra/resourceslices.yaml"))
            .unwrap()
    );

    let dp = read("deploy/kubernetes/overlays/device-plugin/daemonset.yaml");
    let terms = &dp["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"];
    assert_eq!(
        terms,
        &serde_json::json!([{"matchExpressions": [
            {"key": "cdigen.io/mode", "operator": "NotIn", "values": ["dra"]}
        ]}])
    );
}

/// A PF whose PCIe link trained on 8 of its 16 lanes: its VFs (which have
/// no link of their own) are published with the `LinkWidthDegraded`
/// taint (NoSchedule) and `healthy: false`, the other devices untouched;
/// `--ignore-health LinkWidthDegraded` (or `CDIGEN_IGNORE_HEALTH`)
/// publishes them untainted; a name that is no code is refused.
#[test]
fn a_degraded_link_taints_the_devices_on_it_unless_ignored() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let ok = Command::new("cp")
        .arg("-a")
        .arg(fixtures_dir().join("example/root"))
        .arg(&root)
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let pf = root.join("sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0");
    fs::write(pf.join("current_link_width"), "8\n").unwrap();
    fs::write(pf.join("max_link_width"), "16\n").unwrap();
    fs::write(pf.join("current_link_speed"), "16.0 GT/s PCIe\n").unwrap();
    fs::write(pf.join("max_link_speed"), "16.0 GT/s PCIe\n").unwrap();
    let tainted = |yaml: &str| -> Vec<(String, String, String, Option<bool>)> {
        let slices = parse(yaml);
        assert_eq!(limits(&slices), Vec::<String>::new());
        slices
            .iter()
            .flat_map(|s| s.spec.devices.clone().unwrap_or_default())
            .flat_map(|d| {
                let healthy = d.attributes.as_ref().and_then(|a| a["healthy"].bool);
                d.taints
                    .unwrap_or_default()
                    .into_iter()
                    .map(move |t| (d.name.clone(), t.value.unwrap(), t.effect, healthy))
            })
            .collect()
    };
    let got = tainted(&print_slices(&root, &[]));
    let want: Vec<(String, String, String, Option<bool>)> = [
        "rdma-0000-3b-00-0",
        "sriov-0000-3b-00-2",
        "sriov-0000-3b-00-3",
        "sriov-0000-3b-00-4",
        "sriov-0000-3b-00-5",
    ]
    .iter()
    .map(|n| {
        (
            n.to_string(),
            "LinkWidthDegraded".to_string(),
            "NoSchedule".to_string(),
            Some(false),
        )
    })
    .collect();
    assert_eq!(got, want);
    let ignored = print_slices(&root, &["--ignore-health", "linkwidthdegraded,AERFatal"]);
    assert_eq!(tainted(&ignored), []);
    let out = Command::new(env!("CARGO_BIN_EXE_cdigen"))
        .args(["dra-driver", "--print-slices", "--node", NODE, "--root"])
        .arg(&root)
        .env("CDIGEN_GENERATORS", "/nonexistent-cdigen-user-generators")
        .env("CDIGEN_NO_NVML", "1")
        .env("CDIGEN_IGNORE_HEALTH", "LinkWidthDegraded")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(tainted(&String::from_utf8(out.stdout).unwrap()), []);
    let (code, out, err) = cdigen(&[
        "dra-driver",
        "--print-slices",
        "--node",
        NODE,
        "--root",
        root.to_str().unwrap(),
        "--ignore-health",
        "AERFatal,Sick",
    ]);
    assert_eq!((code, out.as_str()), (2, ""));
    assert!(
        err.contains("\"Sick\" is not a health code (one of DeviceNodeMissing, "),
        "{err}"
    );
}

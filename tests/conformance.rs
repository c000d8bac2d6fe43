//! Conformance of cdigen's CDI model, validator, directory view and writer
//! against the reference material in `tests/data/cdi-schema` (the upstream
//! example specs with their expected verdicts, the spec-directory cache
//! scenarios, the official JSON schema: see its README for their origin),
//! and sample specs written for the external `cdi-check` tool.
//!
//! That data is a copy of `../shared/cdi-schema`, which CI keeps beside the
//! crate. Where `../shared` is present, one test checks that the copy has not
//! drifted; a clone without it skips that test, saying so
//! (`CDIGEN_REQUIRE_SHARED=1`, as CI sets it, makes that a failure).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use cdigen::cdi::dirs::{Finding, Input, Severity, scan};
use cdigen::cdi::version::{Version, minimum_required};
use cdigen::cdi::{
    ContainerEdits, Device, DeviceNode, Format, Hook, IntelRdt, Mount, NetDevice, Spec, codec,
    load_file, validate,
};
use cdigen::write::{ManagedDir, Outcome};
use serde_json::Value;

// ---------------------------------------------------------------- schema data

/// `tests/data/cdi-schema`: the official schema and the upstream example
/// specs, in the repository.
fn schema_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/cdi-schema")
}

fn testdata() -> PathBuf {
    schema_dir().join("testdata")
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: invalid JSON: {e}", path.display()))
}

/// Every regular file under `dir`, as paths relative to `dir`, sorted.
fn files_under(dir: &Path) -> BTreeSet<String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeSet<String>) {
        let entries =
            std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let rel = path.strip_prefix(root).unwrap();
                out.insert(rel.to_str().unwrap().to_string());
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(dir, dir, &mut out);
    out
}

// ---------------------------------------------------------------- 1. verdicts per file

/// What loading and validating a file must give.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// Loads, and `validate` finds nothing.
    Valid,
    /// `load_file` fails; the error is `"<path>: <this>"`.
    LoadError(&'static str),
    /// Loads, and `validate` reports exactly these problems (`location: message`).
    Problems(&'static [&'static str]),
}

impl Expect {
    fn is_valid(self) -> bool {
        matches!(self, Expect::Valid)
    }
}

/// Every spec file under testdata/{good,bad,extracted/valid,extracted/invalid,cdi-rs},
/// relative to testdata/, with the exact outcome. Each message was checked
/// against the reason recorded for the file (MANIFEST.json or README.md).
const VERDICTS: &[(&str, Expect)] = &[
    // Upstream schema examples: valid under the schema and the Go library.
    ("good/minimal.json", Expect::Valid),
    ("good/spec-example.json", Expect::Valid),
    // Upstream "bad" examples. empty.json has zero bytes (cdi.ReadSpec rejects it).
    (
        "bad/empty.json",
        Expect::LoadError("file is empty (expected a CDI spec)"),
    ),
    // `{}`: misses the required cdiVersion, kind and devices.
    (
        "bad/explicit-empty.json",
        Expect::Problems(&[
            "cdiVersion: missing or empty (expected a CDI version such as \"0.5.0\")",
            "kind: invalid kind: empty name",
            "devices: at least one device is required",
        ]),
    ),
    // Go test literals (extracted/MANIFEST.json).
    ("extracted/valid/spec2.yaml", Expect::Valid),
    ("extracted/valid/spec3.yaml", Expect::Valid),
    ("extracted/valid/valid-0.3.0-env.yaml", Expect::Valid),
    ("extracted/valid/valid-0.4.0-mount-type.yaml", Expect::Valid),
    ("extracted/valid/valid-three-devices.yaml", Expect::Valid),
    // Reason: "device name \"dev1\" defined twice in one spec".
    (
        "extracted/invalid/conflicting-devices.yaml",
        Expect::Problems(&[
            "device \"dev1\": defined 2 times in this spec (device names must be unique)",
        ]),
    ),
    // Reason: empty data ("no Spec data"). The file has zero bytes.
    (
        "extracted/invalid/empty.yaml",
        Expect::LoadError("file is empty (expected a CDI spec)"),
    ),
    // Reason: invalid version "0.0.0" (not a known spec version).
    (
        "extracted/invalid/invalid-cdi-version.yaml",
        Expect::Problems(&[
            "cdiVersion: unknown version \"0.0.0\" (expected one of 0.3.0 .. 1.1.0)",
        ]),
    ),
    // Reason: class "device=" must end with a letter or digit.
    (
        "extracted/invalid/invalid-class.yaml",
        Expect::Problems(&[
            "kind: invalid class \"device=\": must end with an ASCII letter or digit",
        ]),
    ),
    // Reason: cdiVersion "" is not a known version. The key is present but
    // empty; cdigen says "missing" (same message as an absent key).
    (
        "extracted/invalid/invalid-spec1.yaml",
        Expect::Problems(&[
            "cdiVersion: missing or empty (expected a CDI version such as \"0.5.0\")",
        ]),
    ),
    // Reason: no devices ("invalid spec, no devices").
    (
        "extracted/invalid/invalid-spec2.yaml",
        Expect::Problems(&["devices: at least one device is required"]),
    ),
    // Reason: vendor "vendor.com-" must end with a letter or digit.
    (
        "extracted/invalid/invalid-vendor.yaml",
        Expect::Problems(&[
            "kind: invalid vendor \"vendor.com-\": must end with an ASCII letter or digit",
        ]),
    ),
    // Reason: invalid version "" (cdiVersion absent).
    (
        "extracted/invalid/missing-cdi-version.yaml",
        Expect::Problems(&[
            "cdiVersion: missing or empty (expected a CDI version such as \"0.5.0\")",
        ]),
    ),
    // Reason: device without containerEdits ("invalid device, empty device edits").
    (
        "extracted/invalid/missing-required-edits.yaml",
        Expect::Problems(&[
            "device \"dev1\": containerEdits: must not be empty (a device needs at least one edit)",
        ]),
    ),
    // Reason: kind missing (vendor/class empty).
    (
        "extracted/invalid/missing-vendor-class.yaml",
        Expect::Problems(&["kind: invalid kind: empty name"]),
    ),
    // Reason: strict unmarshal rejects unknown field "xyzzy".
    (
        "extracted/invalid/unparsable.yaml",
        Expect::LoadError(
            "invalid YAML: unknown field \"xyzzy\", expected one of cdiVersion, kind, annotations, \
             devices, containerEdits",
        ),
    ),
    // Rust port fixtures (cdi-rs/MANIFEST.json); where Go and Rust differ,
    // the stricter verdict (invalid) is ours.
    // Go: invalid since lib v1.0.0; Rust: invalid.
    (
        "cdi-rs/cdi-empty-devices.yaml",
        Expect::Problems(&["devices: at least one device is required"]),
    ),
    // Go pkg/cdi: accepted (its annotation check is a no-op); Rust: invalid.
    (
        "cdi-rs/cdi-invalid-annotation.yaml",
        Expect::Problems(&[
            "annotations[\"inva$$lid_CDIKEY\"]: key is not a Kubernetes qualified name (expected \
             [prefix/]name: a DNS subdomain prefix, and a name of at most 63 characters from A-Z \
             a-z 0-9 - _ . starting and ending with a letter or digit)",
        ]),
    ),
    // Both: unknown field unknownTopLevel.
    (
        "cdi-rs/cdi-unknown-field.yaml",
        Expect::LoadError(
            "invalid YAML: unknown field \"unknownTopLevel\", expected one of cdiVersion, kind, \
             annotations, devices, containerEdits",
        ),
    ),
    // Go: valid (false is the zero value); Rust: invalid (the key needs 1.1.0).
    (
        "cdi-rs/cdi-v1.0-enable-monitoring.yaml",
        Expect::Problems(&[
            "cdiVersion: is 1.0.0, but the content needs at least 1.1.0 \
             (intelRdt.enableMonitoring in spec containerEdits)",
        ]),
    ),
    // Go v1.1.0: unknown field enableCMT; Rust: valid below 1.1.0.
    (
        "cdi-rs/cdi-v1.0-legacy-intel-rdt.yaml",
        Expect::LoadError(
            "invalid YAML: containerEdits.intelRdt: unknown field \"enableCMT\", expected one of \
             closID, l3CacheSchema, memBwSchema, schemata, enableMonitoring",
        ),
    ),
    ("cdi-rs/cdi-v1.1-good.yaml", Expect::Valid),
    // Both: unknown field enableCMT.
    (
        "cdi-rs/cdi-v1.1-legacy-intel-rdt.yaml",
        Expect::LoadError(
            "invalid YAML: containerEdits.intelRdt: unknown field \"enableCMT\", expected one of \
             closID, l3CacheSchema, memBwSchema, schemata, enableMonitoring",
        ),
    ),
];

/// The spec-directory scenarios, covered by the `cache_*` tests.
const CACHE_FILES: &[&str] = &[
    "extracted/cache/conflict/run/vendor1-other.yaml",
    "extracted/cache/conflict/run/vendor1.yaml",
    "extracted/cache/override/etc/vendor1.yaml",
    "extracted/cache/override/run/vendor1.yaml",
];

const MANIFESTS: &[&str] = &["cdi-rs/MANIFEST.json", "extracted/MANIFEST.json"];

fn expected(rel: &str) -> Expect {
    VERDICTS
        .iter()
        .find(|(f, _)| *f == rel)
        .map(|(_, e)| *e)
        .unwrap_or_else(|| panic!("{rel}: no expected verdict in VERDICTS"))
}

/// Loads and validates a file, and describes the outcome in a form that can
/// be compared with [`Expect`].
fn outcome(path: &Path) -> Result<Vec<String>, String> {
    match load_file(path) {
        Err(e) => Err(e.to_string()),
        Ok(spec) => Ok(validate(&spec).iter().map(ToString::to_string).collect()),
    }
}

fn check_file(rel: &str) {
    let path = testdata().join(rel);
    let got = outcome(&path);
    match expected(rel) {
        Expect::Valid => assert_eq!(got, Ok(vec![]), "{rel}: expected valid"),
        Expect::LoadError(msg) => assert_eq!(
            got,
            Err(format!("{}: {msg}", path.display())),
            "{rel}: expected a load error"
        ),
        Expect::Problems(problems) => {
            assert!(
                !problems.is_empty(),
                "{rel}: an invalid file needs problems"
            );
            let want: Vec<String> = problems.iter().map(ToString::to_string).collect();
            assert_eq!(got, Ok(want), "{rel}: expected exactly these problems");
        }
    }
}

#[test]
fn every_testdata_file_is_covered() {
    let on_disk = files_under(&testdata());
    let mut known: BTreeSet<String> = VERDICTS.iter().map(|(f, _)| f.to_string()).collect();
    assert_eq!(known.len(), VERDICTS.len(), "duplicate entry in VERDICTS");
    known.extend(CACHE_FILES.iter().map(ToString::to_string));
    known.extend(MANIFESTS.iter().map(ToString::to_string));
    let unknown: Vec<_> = on_disk.difference(&known).collect();
    let missing: Vec<_> = known.difference(&on_disk).collect();
    assert!(
        unknown.is_empty(),
        "testdata files no test covers (add them to VERDICTS or CACHE_FILES): {unknown:?}"
    );
    assert!(
        missing.is_empty(),
        "files the test expects but testdata lacks: {missing:?}"
    );
}

#[test]
fn good_and_bad_by_directory() {
    for (dir, want_valid) in [("good", true), ("bad", false)] {
        let files = files_under(&testdata().join(dir));
        assert!(!files.is_empty(), "testdata/{dir} is empty");
        for f in files {
            let rel = format!("{dir}/{f}");
            assert_eq!(
                expected(&rel).is_valid(),
                want_valid,
                "{rel}: verdict must follow its directory"
            );
            check_file(&rel);
        }
    }
}

#[test]
fn extracted_specs_follow_manifest() {
    let manifest = read_json(&testdata().join("extracted/MANIFEST.json"));
    let cases = manifest["cases"].as_array().expect("cases array");
    let mut from_manifest = BTreeSet::new();
    let mut dirs = BTreeSet::new();
    for case in cases {
        let file = case["file"].as_str().expect("file");
        let expect = case["expect"].as_str().expect("expect");
        let reason = case["reason"].as_str().expect("reason");
        if let Some(dir) = file.strip_suffix('/') {
            // Directory scenarios: covered by the cache_* tests.
            dirs.insert((dir.to_string(), expect.to_string()));
            continue;
        }
        let rel = format!("extracted/{file}");
        let want_valid = match expect {
            "valid" => true,
            "invalid" => false,
            other => panic!("{rel}: unknown verdict {other:?}"),
        };
        assert_eq!(
            expected(&rel).is_valid(),
            want_valid,
            "{rel}: MANIFEST says {expect} ({reason})"
        );
        check_file(&rel);
        assert!(from_manifest.insert(rel.clone()), "{rel} twice in MANIFEST");
    }
    assert_eq!(
        dirs,
        BTreeSet::from([
            ("cache/conflict".to_string(), "conflict".to_string()),
            ("cache/override".to_string(), "valid-directory".to_string()),
        ]),
        "directory scenarios in the MANIFEST"
    );
    // Every file of valid/ and invalid/ is in the MANIFEST (and so was checked).
    for dir in ["valid", "invalid"] {
        for f in files_under(&testdata().join("extracted").join(dir)) {
            let rel = format!("extracted/{dir}/{f}");
            assert!(
                from_manifest.contains(&rel),
                "{rel} is not in extracted/MANIFEST.json"
            );
        }
    }
}

/// A MANIFEST verdict string: `valid...`/`ACCEPTED...` or `invalid...`/`REJECTED...`.
fn manifest_says_valid(file: &str, who: &str, verdict: &str) -> bool {
    if verdict.starts_with("valid") || verdict.starts_with("ACCEPTED") {
        true
    } else if verdict.starts_with("invalid") || verdict.starts_with("REJECTED") {
        false
    } else {
        panic!("{file}: cannot read the {who} verdict {verdict:?}")
    }
}

#[test]
fn cdi_rs_fixtures_take_the_stricter_verdict() {
    let manifest = read_json(&testdata().join("cdi-rs/MANIFEST.json"));
    let cases = manifest["cases"].as_array().expect("cases array");
    let mut listed = BTreeSet::new();
    let mut disagreements = 0;
    for case in cases {
        let file = case["file"].as_str().expect("file");
        let go = manifest_says_valid(file, "go_head", case["go_head"].as_str().expect("go_head"));
        let rust = manifest_says_valid(
            file,
            "rust_crate",
            case["rust_crate"].as_str().expect("rust_crate"),
        );
        if go != rust {
            disagreements += 1;
        }
        let rel = format!("cdi-rs/{file}");
        assert_eq!(
            expected(&rel).is_valid(),
            go && rust,
            "{rel}: Go says {}, Rust says {}; the stricter verdict wins",
            case["go_head"],
            case["rust_crate"]
        );
        check_file(&rel);
        assert!(listed.insert(rel.clone()), "{rel} twice in MANIFEST");
    }
    // README.md: "They differ on three files."
    assert_eq!(
        disagreements, 3,
        "Go/Rust disagreements in cdi-rs/MANIFEST.json"
    );
    for f in files_under(&testdata().join("cdi-rs")) {
        if f == "MANIFEST.json" {
            continue;
        }
        let rel = format!("cdi-rs/{f}");
        assert!(
            listed.contains(&rel),
            "{rel} is not in cdi-rs/MANIFEST.json"
        );
    }
}

// ---------------------------------------------------------------- 2. spec directories

fn cache_input(rel: &str) -> Input {
    Input {
        path: testdata().join("extracted/cache").join(rel),
        explicit: true,
    }
}

fn resolved(scan: &cdigen::cdi::dirs::Scan) -> BTreeMap<String, PathBuf> {
    scan.devices
        .iter()
        .map(|d| (d.name.clone(), d.path.clone()))
        .collect()
}

#[test]
fn cache_override_later_directory_wins() {
    let etc = cache_input("override/etc");
    let run = cache_input("override/run");
    let etc_file = etc.path.join("vendor1.yaml");
    let run_file = run.path.join("vendor1.yaml");
    let s = scan(&[etc, run]);

    assert!(s.input_errors.is_empty(), "{:?}", s.input_errors);
    assert!(!s.has_errors(), "{s:#?}");
    let reports: Vec<&Path> = s.files.iter().map(|f| f.path.as_path()).collect();
    assert_eq!(reports, [etc_file.as_path(), run_file.as_path()]);
    assert_eq!(
        s.files[0].findings,
        [Finding {
            severity: Severity::Warning,
            location: "device \"vendor1.com/device=dev1\"".into(),
            message: format!(
                "shadowed by {} (a later spec directory wins)",
                run_file.display()
            ),
        }],
        "one shadowing warning on etc/vendor1.yaml"
    );
    assert_eq!(s.files[1].findings, [], "run/vendor1.yaml is clean");
    assert_eq!(
        resolved(&s),
        BTreeMap::from([
            ("vendor1.com/device=dev1".to_string(), run_file),
            ("vendor1.com/device=dev2".to_string(), etc_file),
        ])
    );
}

#[test]
fn cache_conflict_drops_the_device_and_blames_both_files() {
    let run = cache_input("conflict/run");
    let main = run.path.join("vendor1.yaml");
    let other = run.path.join("vendor1-other.yaml");
    let s = scan(&[run]);

    assert!(s.input_errors.is_empty(), "{:?}", s.input_errors);
    assert!(s.has_errors());
    let conflict = |with: &Path| Finding {
        severity: Severity::Error,
        location: "device \"vendor1.com/device=dev1\"".into(),
        message: format!(
            "also defined in {} in the same directory: runtimes drop every definition of a \
             conflicting device",
            with.display()
        ),
    };
    // Files are reported in name order.
    let reports: Vec<&Path> = s.files.iter().map(|f| f.path.as_path()).collect();
    assert_eq!(reports, [other.as_path(), main.as_path()]);
    assert_eq!(s.files[0].findings, [conflict(&main)]);
    assert_eq!(s.files[1].findings, [conflict(&other)]);
    assert!(
        s.files.iter().all(|f| f.has_errors()),
        "both files get the error"
    );
    assert_eq!(
        resolved(&s),
        BTreeMap::from([("vendor1.com/device=dev2".to_string(), main)]),
        "dev1 is dropped, dev2 still resolves"
    );
}

// ---------------------------------------------------------------- 3. official JSON schema

/// The official schema, with `defs.json` registered next to `schema.json`
/// so that its relative `$ref`s resolve, and no retrieval from anywhere else.
fn schema_validator() -> jsonschema::Validator {
    let dir = schema_dir();
    let schema = read_json(&dir.join("schema.json"));
    let defs = read_json(&dir.join("defs.json"));
    let base = "file:///cdi-schema/";
    let registry = jsonschema::Registry::new()
        .draft(jsonschema::Draft::Draft7)
        .add(format!("{base}defs.json"), defs)
        .expect("register defs.json")
        .prepare()
        .expect("prepare the schema registry");
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft7)
        .with_base_uri(format!("{base}schema.json"))
        .with_registry(&registry)
        .offline()
        .build(&schema)
        .expect("build the CDI schema validator")
}

fn schema_errors(v: &jsonschema::Validator, doc: &Value) -> Vec<String> {
    v.iter_errors(doc)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

/// A spec file as a JSON value, parsed without cdigen's model (YAML through
/// serde-saphyr into a generic value).
fn raw_document(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    if path.extension().is_some_and(|e| e == "json") {
        serde_json::from_str(&text).unwrap()
    } else {
        serde_saphyr::from_str(&text).unwrap()
    }
}

#[test]
fn schema_validator_resolves_defs_and_rejects_bad_documents() {
    let v = schema_validator();
    // The `$ref`s into defs.json are live: a bad device node is caught.
    let bad_node = serde_json::json!({
        "cdiVersion": "0.3.0", "kind": "vendor.com/device",
        "devices": [{"name": "d", "containerEdits": {"deviceNodes": [{"major": "x"}]}}]
    });
    let errors = schema_errors(&v, &bad_node);
    assert_eq!(errors.len(), 2, "{errors:?}");
    let bad = read_json(&testdata().join("bad/explicit-empty.json"));
    let errors = schema_errors(&v, &bad);
    assert_eq!(errors.len(), 3, "{errors:?}");
}

#[test]
fn good_files_pass_the_schema() {
    let v = schema_validator();
    let files = files_under(&testdata().join("good"));
    assert!(!files.is_empty());
    for f in files {
        let path = testdata().join("good").join(&f);
        let doc = read_json(&path);
        assert_eq!(schema_errors(&v, &doc), Vec::<String>::new(), "good/{f}");
    }
}

#[test]
fn every_file_cdigen_accepts_passes_the_schema() {
    // The schema is a necessary condition: nothing cdigen calls valid may fail it.
    let v = schema_validator();
    for (rel, expect) in VERDICTS {
        if expect.is_valid() {
            let doc = raw_document(&testdata().join(rel));
            assert_eq!(schema_errors(&v, &doc), Vec::<String>::new(), "{rel}");
        }
    }
}

fn node(path: &str, major: i64, minor: i64) -> DeviceNode {
    DeviceNode {
        path: path.into(),
        node_type: "c".into(),
        major,
        minor,
        ..Default::default()
    }
}

fn device(name: &str, edits: ContainerEdits) -> Device {
    Device {
        name: name.into(),
        container_edits: edits,
        ..Default::default()
    }
}

/// Sets `cdiVersion` to the minimum the content needs, as cdigen writes it.
fn at_minimum_version(mut spec: Spec) -> Spec {
    spec.cdi_version = minimum_required(&spec).version.as_str().to_string();
    spec
}

/// Varied specs covering every field the model has, with the minimum
/// version each must get.
fn schema_samples() -> Vec<(&'static str, Version, Spec)> {
    let gpu = Spec {
        kind: "example.com/gpu".into(),
        devices: vec![
            device(
                "card1",
                ContainerEdits {
                    device_nodes: vec![
                        DeviceNode {
                            file_mode: Some(0o660),
                            permissions: "rw".into(),
                            uid: Some(0),
                            gid: Some(44),
                            ..node("/dev/dri/card1", 226, 1)
                        },
                        DeviceNode {
                            host_path: "/dev/dri/renderD128".into(),
                            file_mode: Some(0o666),
                            permissions: "rwm".into(),
                            gid: Some(109),
                            ..node("/dev/dri/renderD128", 226, 128)
                        },
                    ],
                    env: vec!["EXAMPLE_VISIBLE_DEVICES=card1".into()],
                    ..Default::default()
                },
            ),
            device(
                "0",
                ContainerEdits {
                    device_nodes: vec![node("/dev/dri/card0", 226, 0)],
                    ..Default::default()
                },
            ),
        ],
        container_edits: ContainerEdits {
            env: vec!["EXAMPLE_DRIVER=1".into(), "EMPTY=".into()],
            mounts: vec![
                Mount {
                    host_path: "/usr/lib/x86_64-linux-gnu/libexample.so.1".into(),
                    container_path: "/usr/lib/x86_64-linux-gnu/libexample.so.1".into(),
                    options: vec!["ro".into(), "nosuid".into(), "nodev".into(), "bind".into()],
                    ..Default::default()
                },
                Mount {
                    host_path: "tmpfs".into(),
                    container_path: "/var/cache/example".into(),
                    options: vec!["nosuid".into(), "size=65536k".into()],
                    mount_type: "tmpfs".into(),
                },
            ],
            hooks: vec![Hook {
                hook_name: "createContainer".into(),
                path: "/usr/bin/example-hook".into(),
                args: vec!["example-hook".into(), "update-ldcache".into()],
                env: vec!["LD_LIBRARY_PATH=/usr/lib".into()],
                timeout: Some(30),
            }],
            ..Default::default()
        },
        ..Default::default()
    };
    let annotated = Spec {
        kind: "example.com/gpu.v2".into(),
        annotations: BTreeMap::from([("example.com/generator".into(), "cdigen".into())]),
        devices: vec![Device {
            annotations: BTreeMap::from([("example.com/pci".into(), "0000:03:00.0".into())]),
            ..device(
                "gpu0",
                ContainerEdits {
                    device_nodes: vec![node("/dev/dri/card1", 226, 1)],
                    ..Default::default()
                },
            )
        }],
        ..Default::default()
    };
    let rdt = Spec {
        kind: "example.com/accel".into(),
        devices: vec![device(
            "accel0",
            ContainerEdits {
                device_nodes: vec![node("/dev/accel/accel0", 261, 0)],
                additional_gids: vec![44, 993],
                intel_rdt: Some(IntelRdt {
                    clos_id: "accel".into(),
                    l3_cache_schema: "L3:0=ff".into(),
                    mem_bw_schema: "MB:0=50".into(),
                    ..Default::default()
                }),
                ..Default::default()
            },
        )],
        ..Default::default()
    };
    let v110 = Spec {
        kind: "example.com/nic".into(),
        devices: vec![device(
            "vf1",
            ContainerEdits {
                net_devices: vec![NetDevice {
                    host_interface_name: "enp1s0f0v1".into(),
                    name: "net1".into(),
                }],
                ..Default::default()
            },
        )],
        container_edits: ContainerEdits {
            intel_rdt: Some(IntelRdt {
                clos_id: "/".into(),
                schemata: Some(vec!["L3:0=ffff".into(), "MB:0=100".into()]),
                enable_monitoring: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    vec![
        ("gpu", Version::V0_5_0, gpu),
        ("annotated", Version::V0_6_0, annotated),
        ("rdt", Version::V0_7_0, rdt),
        ("v1.1.0", Version::V1_1_0, v110),
    ]
}

#[test]
fn serialized_specs_pass_the_schema_at_the_minimum_version() {
    let v = schema_validator();
    for (label, want_version, spec) in schema_samples() {
        let spec = at_minimum_version(spec);
        assert_eq!(
            validate(&spec),
            [],
            "{label}: the sample must be valid for cdigen"
        );
        let need = minimum_required(&spec).version;
        assert_eq!(need, want_version, "{label}: minimum version");

        let json = codec::to_bytes(&spec, Format::Json).unwrap();
        let doc: Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(
            schema_errors(&v, &doc),
            Vec::<String>::new(),
            "{label} (JSON)"
        );
        assert_eq!(
            doc["cdiVersion"],
            need.as_str(),
            "{label}: the version written is minimum_required"
        );
        assert_eq!(
            codec::parse(&json, Format::Json).unwrap(),
            spec,
            "{label}: JSON round trip"
        );

        let yaml = codec::to_bytes(&spec, Format::Yaml).unwrap();
        let doc: Value = serde_saphyr::from_slice(&yaml).unwrap();
        assert_eq!(
            schema_errors(&v, &doc),
            Vec::<String>::new(),
            "{label} (YAML)"
        );
        assert_eq!(doc["cdiVersion"], need.as_str(), "{label} (YAML)");
        assert_eq!(
            codec::parse(&yaml, Format::Yaml).unwrap(),
            spec,
            "{label}: YAML round trip"
        );
    }
}

// ---------------------------------------------------------------- 4. specs for cdi-check

/// Owner recorded in the managed directory's state file.
const OWNER: &str = "conformance-test";

/// Realistic specs for the external checker (podman 4.3 knows cdiVersion up
/// to 0.5.0, so each stays at or below it): file name, spec.
fn cdi_check_specs() -> Vec<(&'static str, Spec)> {
    let render = |name: &str, card: i64, render: i64| {
        device(
            name,
            ContainerEdits {
                device_nodes: vec![
                    DeviceNode {
                        file_mode: Some(0o660),
                        permissions: "rw".into(),
                        gid: Some(44),
                        ..node(&format!("/dev/dri/card{card}"), 226, card)
                    },
                    DeviceNode {
                        file_mode: Some(0o666),
                        permissions: "rw".into(),
                        ..node(&format!("/dev/dri/renderD{render}"), 226, render)
                    },
                ],
                env: vec![format!("EXAMPLE_GPU_CARD{card}=card{card}")],
                ..Default::default()
            },
        )
    };
    // Names YAML 1.1 would misread unquoted (`on`/`yes` are booleans, `0777`
    // is octal 511), and names starting with a digit (cdiVersion 0.5.0).
    let gpu = Spec {
        kind: "example.com/gpu".into(),
        devices: vec![
            render("card1", 1, 128),
            render("1", 1, 128),
            render("0777", 2, 129),
            render("on", 1, 128),
            render("yes", 2, 129),
        ],
        container_edits: ContainerEdits {
            env: vec!["EXAMPLE_GPU_DRIVER=example".into()],
            ..Default::default()
        },
        ..Default::default()
    };
    // Plain character devices with letter names: stays at 0.3.0.
    let null = Spec {
        kind: "example.com/null".into(),
        devices: vec![
            device(
                "null",
                ContainerEdits {
                    device_nodes: vec![DeviceNode {
                        file_mode: Some(0o666),
                        permissions: "rwm".into(),
                        ..node("/dev/null", 1, 3)
                    }],
                    ..Default::default()
                },
            ),
            device(
                "zero",
                ContainerEdits {
                    device_nodes: vec![DeviceNode {
                        file_mode: Some(0o666),
                        ..node("/dev/zero", 1, 5)
                    }],
                    env: vec!["EXAMPLE_ZERO=1".into()],
                    ..Default::default()
                },
            ),
        ],
        ..Default::default()
    };
    // A typed mount (0.4.0) and a device-node hostPath (0.5.0).
    let scratch = Spec {
        kind: "example.com/scratch".into(),
        devices: vec![
            device(
                "tmp",
                ContainerEdits {
                    mounts: vec![Mount {
                        host_path: "tmpfs".into(),
                        container_path: "/scratch".into(),
                        options: vec!["nosuid".into(), "nodev".into(), "size=16m".into()],
                        mount_type: "tmpfs".into(),
                    }],
                    env: vec!["SCRATCH_DIR=/scratch".into()],
                    ..Default::default()
                },
            ),
            device(
                "null0",
                ContainerEdits {
                    device_nodes: vec![DeviceNode {
                        host_path: "/dev/null".into(),
                        ..node("/dev/example-null0", 1, 3)
                    }],
                    ..Default::default()
                },
            ),
        ],
        ..Default::default()
    };
    vec![
        ("example.com-gpu.yaml", gpu),
        ("example.com-null.json", null),
        ("example.com-scratch.yaml", scratch),
    ]
}

#[test]
fn write_specs_for_cdi_check() {
    let _tmp;
    let dir = match std::env::var_os("CDIGEN_CDI_CHECK_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => {
            _tmp = tempfile::tempdir().unwrap();
            _tmp.path().join("cdi")
        }
    };
    let mut managed =
        ManagedDir::open(&dir).unwrap_or_else(|e| panic!("cannot open {}: {e}", dir.display()));
    let mut expected_devices = BTreeMap::new();
    let mut versions = BTreeMap::new();
    for (file, spec) in cdi_check_specs() {
        let mut spec = at_minimum_version(spec);
        codec::canonicalize(&mut spec);
        assert_eq!(validate(&spec), [], "{file}: must be valid");
        let version = minimum_required(&spec).version;
        assert!(
            version <= Version::V0_5_0,
            "{file}: needs {version}, but podman 4.3 reads only up to 0.5.0"
        );
        versions.insert(file, version);
        let format = Format::from_path(Path::new(file)).unwrap();
        let bytes = codec::to_bytes(&spec, format).unwrap();
        assert_eq!(
            codec::parse(&bytes, format).unwrap(),
            spec,
            "{file}: round trip"
        );
        let outcome = managed
            .write(file, &bytes, OWNER)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(
            matches!(
                outcome,
                Outcome::Created | Outcome::Updated | Outcome::Unchanged
            ),
            "{file}: {outcome:?}"
        );
        assert_eq!(std::fs::read(dir.join(file)).unwrap(), bytes, "{file}");
        assert!(managed.owns(file), "{file}: recorded as written by cdigen");
        // A second write of the same bytes touches nothing.
        assert_eq!(
            managed.write(file, &bytes, OWNER).unwrap(),
            Outcome::Unchanged
        );
        for d in &spec.devices {
            expected_devices.insert(format!("{}={}", spec.kind, d.name), dir.join(file));
        }
    }
    assert_eq!(
        versions,
        BTreeMap::from([
            ("example.com-gpu.yaml", Version::V0_5_0),
            ("example.com-null.json", Version::V0_3_0),
            ("example.com-scratch.yaml", Version::V0_5_0),
        ])
    );
    // Files an earlier run of this test wrote under other names go away.
    let keep: BTreeSet<String> = versions.keys().map(ToString::to_string).collect();
    let pruned = managed.remove_stale(OWNER, &keep).unwrap();
    assert!(pruned.left_alone.is_empty(), "{pruned:?}");
    assert_eq!(
        managed.owned_by(OWNER),
        keep.iter().cloned().collect::<Vec<_>>()
    );
    drop(managed);

    // The YAML quotes the names YAML 1.1 would turn into a boolean or number.
    let gpu = std::fs::read_to_string(dir.join("example.com-gpu.yaml")).unwrap();
    for name in ["on", "yes", "0777", "1"] {
        assert!(
            gpu.contains(&format!("- name: '{name}'\n"))
                || gpu.contains(&format!("- name: \"{name}\"\n")),
            "device name {name} is not quoted:\n{gpu}"
        );
    }

    // The runtime's view of the directory: every device resolves, no errors.
    let s = scan(&[Input {
        path: dir.clone(),
        explicit: true,
    }]);
    assert!(!s.has_errors(), "{s:#?}");
    assert!(
        s.files.iter().all(|f| f.findings.is_empty()),
        "{:#?}",
        s.files
    );
    let got: BTreeMap<String, PathBuf> = resolved(&s);
    for (name, path) in &expected_devices {
        assert_eq!(got.get(name), Some(path), "{name}");
    }
    let ours: BTreeSet<&str> = cdi_check_specs().iter().map(|(f, _)| *f).collect();
    let files_in_dir: BTreeSet<String> = s
        .files
        .iter()
        .map(|f| f.path.file_name().unwrap().to_str().unwrap().to_string())
        .collect();
    for f in &ours {
        assert!(files_in_dir.contains(*f), "{f} not seen by scan");
    }
    eprintln!(
        "wrote {} spec files ({} devices) to {}",
        ours.len(),
        expected_devices.len(),
        dir.display()
    );
}

// ---------------------------------------------------------------- the copy and ../shared

/// Set (to anything but empty or `0`) to make a missing `../shared` a
/// failure instead of a skip, as CI does.
const REQUIRE_SHARED_VAR: &str = "CDIGEN_REQUIRE_SHARED";

/// `../shared/cdi-schema` beside the crate, where CI keeps the reference
/// data; None (a skip, printed) when it is not there, a failure instead when
/// `CDIGEN_REQUIRE_SHARED` is set.
fn shared_schema_dir(test: &str) -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/cdi-schema");
    if dir.is_dir() {
        return Some(dir);
    }
    let required = std::env::var_os(REQUIRE_SHARED_VAR).is_some_and(|v| !v.is_empty() && v != "0");
    assert!(
        !required,
        "{test}: {} is missing, and {REQUIRE_SHARED_VAR} requires it: put shared/ beside the \
         crate directory",
        dir.display()
    );
    // Straight to stderr: the test harness captures `eprintln!`, and this
    // line must show in a passing run.
    let _ = writeln!(
        std::io::stderr(),
        "skipped {test}: no ../shared/cdi-schema beside the crate (CI has it; \
         {REQUIRE_SHARED_VAR}=1 makes this a failure)"
    );
    None
}

#[test]
fn in_repo_schema_data_matches_shared() {
    let Some(shared) = shared_schema_dir("in_repo_schema_data_matches_shared") else {
        return;
    };
    let ours = schema_dir();
    // The README is the one file the copy changes (it says where the data
    // comes from and how it is kept in step).
    let mut want = files_under(&shared);
    let mut got = files_under(&ours);
    assert!(want.remove("README.md") && got.remove("README.md"));
    assert_eq!(
        got,
        want,
        "{} and {} hold different files: copy shared/cdi-schema again",
        ours.display(),
        shared.display()
    );
    for rel in &want {
        assert!(
            std::fs::read(ours.join(rel)).unwrap() == std::fs::read(shared.join(rel)).unwrap(),
            "{rel} differs between {} and {}: copy shared/cdi-schema again",
            ours.display(),
            shared.display()
        );
    }
    assert!(
        want.contains("schema.json") && want.contains("LICENSE"),
        "{want:?}"
    );
}

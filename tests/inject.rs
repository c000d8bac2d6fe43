//! `cdigen inject` end to end: its OCI fragment against the official CDI
//! library's (`../shared/tools/cdi-go/cdi-go inject`, the Go library v1.1.0
//! that runtimes use) for every fixture machine's golden specs and a
//! hand-made spec with every kind of conflict, and its exact output and
//! exit codes for the errors a user meets.
//!
//! Without `../shared` the differential tests say they skipped and pass,
//! unless `CDIGEN_REQUIRE_SHARED` is set (CI sets it).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs the binary in `dir`; returns (exit code, stdout, stderr).
fn cdigen(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = assert_cmd::Command::cargo_bin("cdigen")
        .unwrap()
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .env_remove("CDIGEN_ROOT")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().expect("exited, not killed by a signal"),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn write(dir: &Path, rel: &str, text: &str) {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

// --- Against the official CDI library -------------------------------------

/// Set (to anything but empty or `0`) to make a missing `../shared` a
/// failure instead of a skip, as CI does.
const REQUIRE_SHARED_VAR: &str = "CDIGEN_REQUIRE_SHARED";

/// `../shared/tools/cdi-go/cdi-go` beside the crate; None (a skip, printed)
/// when it is not there, a failure instead when `CDIGEN_REQUIRE_SHARED`
/// is set.
fn cdi_go(test: &str) -> Option<PathBuf> {
    let tool = repo().join("../shared/tools/cdi-go/cdi-go");
    if tool.is_file() {
        return Some(tool);
    }
    let required = std::env::var_os(REQUIRE_SHARED_VAR).is_some_and(|v| !v.is_empty() && v != "0");
    assert!(
        !required,
        "{test}: {} is missing, and {REQUIRE_SHARED_VAR} requires it: put shared/ beside the \
         crate directory",
        tool.display()
    );
    // Straight to stderr: the harness captures `eprintln!`, and this line
    // must show in a passing run.
    let _ = writeln!(
        std::io::stderr(),
        "skipped {test}: no ../shared/tools/cdi-go/cdi-go beside the crate (CI has it; \
         {REQUIRE_SHARED_VAR}=1 makes this a failure)"
    );
    None
}

/// What the library's injection gives: the fragment, or its error.
#[derive(Debug, PartialEq)]
enum Outcome {
    Injected(Value),
    Refused(String),
}

/// `cdi-go inject DIR DEVICE...`, normalized: the `PATH=/bin` it starts
/// its container's environment with is dropped (cdigen injects into an
/// empty spec), and so are nulls, empty lists and empty objects (Go writes
/// a missing list as null, cdigen as []).
fn library(tool: &Path, dir: &Path, devices: &[String]) -> Outcome {
    let out = Command::new(tool)
        .arg("inject")
        .arg(dir)
        .args(devices)
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        !stdout.lines().any(|l| l.starts_with("ERROR ")),
        "the library cannot load {}: {stdout}",
        dir.display()
    );
    if let Some(line) = stdout.lines().find(|l| l.starts_with("INJECT-ERROR ")) {
        assert_eq!(out.status.code(), Some(1), "{stdout}");
        let error = line.trim_start_matches("INJECT-ERROR ");
        let error = error.rsplit_once(" unresolved: ").map_or(error, |(e, _)| e);
        return Outcome::Refused(error.to_string());
    }
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let mut v: Value = serde_json::from_str(&stdout).unwrap();
    let env = v["env"].as_array_mut().unwrap();
    assert_eq!(env.first(), Some(&Value::from("PATH=/bin")), "{stdout}");
    env.remove(0);
    Outcome::Injected(normalize(v))
}

/// `cdigen inject --root / --spec-dir DIR -o json DEVICE...` (the host's
/// `/dev`, as the library sees it), normalized as [`library`] is; the
/// net devices, which the tool does not print, are left out.
fn ours(dir: &Path, devices: &[String]) -> Outcome {
    let mut args = vec![
        "inject",
        "--root",
        "/",
        "--spec-dir",
        dir.to_str().unwrap(),
        "-o",
        "json",
    ];
    args.extend(devices.iter().map(String::as_str));
    let (code, stdout, stderr) = cdigen(&repo(), &args);
    let doc: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout} {stderr} (exit {code})"));
    if doc["injected"] == Value::Bool(true) {
        assert_eq!(code, 0, "{stdout}");
        let mut oci = doc["oci"].clone();
        oci.as_object_mut().unwrap().remove("netDevices");
        Outcome::Injected(normalize(oci))
    } else {
        assert_eq!(code, 1, "{stdout}");
        assert_eq!(doc["oci"], Value::Null);
        Outcome::Refused(doc["error"].as_str().unwrap().to_string())
    }
}

/// Drops nulls, empty lists and empty objects, recursively.
fn normalize(v: Value) -> Value {
    let empty = |v: &Value| match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    };
    match v {
        Value::Object(o) => Value::Object(
            o.into_iter()
                .map(|(k, v)| (k, normalize(v)))
                .filter(|(_, v)| !empty(v))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(normalize).collect()),
        v => v,
    }
}

/// The device names of the specs in `dir`, per spec file, in file order.
fn names_by_spec(dir: &Path) -> Vec<Vec<String>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
        .iter()
        .map(|f| {
            let spec = cdigen::cdi::load_file(f).unwrap();
            spec.devices
                .iter()
                .map(|d| format!("{}={}", spec.kind, d.name))
                .collect()
        })
        .collect()
}

/// The requests tried on a machine: each device alone; per spec, its
/// first two devices, both orders; the first device of every two specs;
/// every device of the machine at once (nodes shared by devices, `all`
/// with the rest).
fn requests(specs: &[Vec<String>]) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = specs.iter().flatten().map(|d| vec![d.clone()]).collect();
    for names in specs {
        if let [a, b, ..] = names.as_slice() {
            out.push(vec![a.clone(), b.clone()]);
            out.push(vec![b.clone(), a.clone()]);
        }
    }
    for (i, a) in specs.iter().enumerate() {
        for b in specs.iter().skip(i + 1) {
            if let (Some(x), Some(y)) = (a.first(), b.first()) {
                out.push(vec![x.clone(), y.clone()]);
                out.push(vec![y.clone(), x.clone()]);
            }
        }
    }
    out.push(specs.iter().flatten().cloned().collect());
    out
}

/// Compares every request on `dir`; returns how many were compared, and
/// the differences.
fn compare(tool: &Path, dir: &Path, requests: &[Vec<String>]) -> (usize, Vec<String>) {
    let mut failures = Vec::new();
    for devices in requests {
        let theirs = library(tool, dir, devices);
        let mine = ours(dir, devices);
        if theirs != mine {
            failures.push(format!(
                "{} {devices:?}:\n  library: {theirs:?}\n  cdigen:  {mine:?}",
                dir.display()
            ));
        }
    }
    (requests.len(), failures)
}

#[test]
fn every_fixture_injects_as_the_official_library_does() {
    let Some(tool) = cdi_go("every_fixture_injects_as_the_official_library_does") else {
        return;
    };
    let mut machines: Vec<PathBuf> = std::fs::read_dir(repo().join("fixtures"))
        .unwrap()
        .map(|e| e.unwrap().path().join("expected/cdi"))
        .filter(|p| p.is_dir())
        .collect();
    machines.sort();
    assert!(machines.len() >= 10, "{machines:?}");
    let (mut compared, mut failures) = (0, Vec::new());
    for dir in &machines {
        let specs = names_by_spec(dir);
        if specs.is_empty() {
            continue; // a machine with nothing to give
        }
        let (n, f) = compare(&tool, dir, &requests(&specs));
        compared += n;
        failures.extend(f);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(compared > 100, "only {compared} requests");
}

/// Two specs with every conflict the library resolves: env set by a spec
/// and by devices, a node replaced, nodes without numbers (filled from
/// the host's `/dev/null` and `/dev/zero`, which every Linux host has), a
/// `u` node, mounts replaced and sorted, hooks, GIDs, intelRdt.
const CONFLICTS: &str = r#"{"cdiVersion": "0.7.0", "kind": "example.com/conflict",
  "containerEdits": {
    "env": ["SHARED=spec", "SPEC=1"],
    "additionalGids": [44, 0, 44],
    "mounts": [{"hostPath": "/usr", "containerPath": "/opt/a/b"}],
    "hooks": [{"hookName": "createContainer", "path": "/bin/spec-hook"}]
  },
  "devices": [
    {"name": "a", "containerEdits": {
      "env": ["SHARED=a", "A=1"],
      "additionalGids": [109],
      "deviceNodes": [
        {"path": "/dev/null"},
        {"path": "/dev/cdigen-x", "type": "c", "major": 5, "minor": 1, "permissions": "r"},
        {"path": "/dev/cdigen-u", "type": "u", "major": 5, "minor": 1},
        {"path": "/dev/in-container", "hostPath": "/dev/zero", "fileMode": 384, "uid": 0, "gid": 5}
      ],
      "mounts": [
        {"hostPath": "/x", "containerPath": "/m", "options": ["bind", "ro"]},
        {"hostPath": "/y", "containerPath": "/m/a/b/c/d"},
        {"hostPath": "tmpfs", "containerPath": "rel", "type": "tmpfs"}
      ],
      "hooks": [
        {"hookName": "prestart", "path": "/bin/h0", "args": ["h0", "x"], "timeout": 5},
        {"hookName": "createContainer", "path": "/bin/h1", "env": ["K=V"]}
      ],
      "intelRdt": {"closID": "a"}
    }},
    {"name": "b", "containerEdits": {
      "env": ["SHARED=b", "A=1"],
      "deviceNodes": [{"path": "/dev/cdigen-x", "type": "c", "major": 5, "minor": 2}],
      "mounts": [{"hostPath": "/x2", "containerPath": "/m"}],
      "hooks": [{"hookName": "poststop", "path": "/bin/h2"}],
      "intelRdt": {"closID": "b", "l3CacheSchema": "L3:0=f"}
    }}
  ]}"#;

const OTHER: &str = r#"{"cdiVersion": "0.5.0", "kind": "example.com/other",
  "containerEdits": {"env": ["SHARED=other"]},
  "devices": [
    {"name": "c", "containerEdits": {"env": ["SHARED=c"], "mounts": [{"hostPath": "/z", "containerPath": "/m"}]}},
    {"name": "gone", "containerEdits": {"deviceNodes": [{"path": "/dev/cdigen-no-such-node"}]}}
  ]}"#;

#[test]
fn conflicts_resolve_as_in_the_official_library() {
    let Some(tool) = cdi_go("conflicts_resolve_as_in_the_official_library") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "conflict.json", CONFLICTS);
    write(tmp.path(), "other.json", OTHER);
    let s = |v: &[&str]| v.iter().map(|d| d.to_string()).collect::<Vec<String>>();
    let requests = [
        s(&["example.com/conflict=a", "example.com/conflict=b"]),
        s(&["example.com/conflict=b", "example.com/conflict=a"]),
        s(&[
            "example.com/conflict=a",
            "example.com/other=c",
            "example.com/conflict=b",
        ]),
        s(&[
            "example.com/other=c",
            "example.com/conflict=a",
            "example.com/conflict=a",
        ]),
        s(&["example.com/conflict=a", "example.com/other=gone"]),
        s(&["example.com/conflict=a", "example.com/nope=x", "nope"]),
    ];
    let (n, failures) = compare(&tool, tmp.path(), &requests);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(n, 6);
    // The comparison saw what it is about (not two empty fragments).
    let Outcome::Injected(v) = ours(tmp.path(), &requests[2]) else {
        panic!("not injected");
    };
    assert_eq!(v["env"], serde_json::json!(["SHARED=b", "SPEC=1", "A=1"]));
    assert_eq!(v["devices"][0]["type"], "c");
    assert_eq!(v["devices"][0]["major"], 1);
    assert_eq!(
        ours(tmp.path(), &requests[4]),
        Outcome::Refused(
            "failed to inject devices: failed to stat CDI host device \"/dev/cdigen-no-such-node\": \
             no such file or directory"
                .into()
        )
    );
}

// --- What a user sees -------------------------------------------------------

const GPU: &str = r#"{"cdiVersion": "0.5.0", "kind": "example.com/gpu",
  "containerEdits": {"env": ["GPU_DRIVER=1"]},
  "devices": [
    {"name": "0", "containerEdits": {
      "env": ["VISIBLE=0"],
      "deviceNodes": [{"path": "/dev/card0", "type": "c", "major": 226, "minor": 0},
                      {"path": "/dev/null"}],
      "mounts": [{"hostPath": "/dev/by-path/card0", "containerPath": "/dev/by-path/card0", "options": ["bind", "rw"]}]
    }},
    {"name": "1", "containerEdits": {
      "env": ["VISIBLE=1"],
      "deviceNodes": [{"path": "/dev/card1", "type": "c", "major": 226, "minor": 2}]
    }}
  ]}"#;

/// A temp dir with `cdi/gpu.json` and `root/dev.manifest` (`/dev/null`,
/// card0 and its link; card1 has other numbers on this host).
fn machine() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "cdi/gpu.json", GPU);
    write(
        tmp.path(),
        "root/dev.manifest",
        "/dev/null c 1:3 0666 0 0\n/dev/card0 c 226:0 0660 0 44\n/dev/card1 c 226:1 0660 0 44\n\
         /dev/by-path d\n/dev/by-path/card0 l ../card0\n",
    );
    tmp
}

#[test]
fn inject_prints_the_edits_then_the_findings() {
    let tmp = machine();
    let (code, out, err) = cdigen(
        tmp.path(),
        &[
            "inject",
            "--spec-dir",
            "cdi",
            "--root",
            "root",
            "example.com/gpu=0",
            "example.com/gpu=1",
        ],
    );
    assert_eq!((code, err.as_str()), (0, ""));
    assert_eq!(
        out,
        "env:
  GPU_DRIVER=1
  VISIBLE=1
devices:
  /dev/card0: c 226:0 mode 0660
  /dev/null: c 1:3 mode 0666
  /dev/card1: c 226:2 mode 0660
cgroup device rules:
  allow c 226:0 rwm
  allow c 1:3 rwm
  allow c 226:2 rwm
mounts:
  /dev/by-path/card0: /dev/by-path/card0 options bind,rw
warning: env-collision: VISIBLE: set to \"0\" by example.com/gpu=0, to \"1\" by example.com/gpu=1: the container sees \"1\" (from example.com/gpu=1, the later wins)
warning: host-node-mismatch: /dev/card1: device node of example.com/gpu=1: the spec says c 226:2, the host's node is c 226:1: the container gets the spec's
injected 2 devices: 2 warnings
"
    );
}

#[test]
fn inject_json_is_one_document_with_the_fragment_and_the_findings() {
    let tmp = machine();
    let (code, out, _) = cdigen(
        tmp.path(),
        &[
            "inject",
            "--spec-dir",
            "cdi",
            "--root",
            "root",
            "-o",
            "json",
            "example.com/gpu=1",
        ],
    );
    assert_eq!(code, 0);
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        doc,
        serde_json::json!({
            "devices": ["example.com/gpu=1"],
            "injected": true,
            "oci": {
                "env": ["GPU_DRIVER=1", "VISIBLE=1"],
                "devices": [{"path": "/dev/card1", "type": "c", "major": 226, "minor": 2, "fileMode": 432}],
                "cgroupDevices": [{"allow": true, "type": "c", "major": 226, "minor": 2, "access": "rwm"}],
                "mounts": [],
                "hooks": {},
                "additionalGids": [],
                "intelRdt": null
            },
            "findings": [{
                "kind": "host-node-mismatch",
                "severity": "warning",
                "subject": "/dev/card1",
                "sources": [{"device": "example.com/gpu=1"}],
                "message": "device node of example.com/gpu=1: the spec says c 226:2, the host's node is c 226:1: the container gets the spec's"
            }]
        })
    );
}

#[test]
fn inject_unknown_and_malformed_names_are_unresolved() {
    let tmp = machine();
    let (code, out, err) = cdigen(
        tmp.path(),
        &[
            "inject",
            "--spec-dir",
            "cdi",
            "--root",
            "root",
            "example.com/gpu=0",
            "example.com/gpu=7",
            "gpu0",
        ],
    );
    assert_eq!((code, err.as_str()), (1, ""));
    assert_eq!(
        out,
        "error: unresolved: example.com/gpu=7: no such device in cdi
error: unresolved: gpu0: not a CDI device name (vendor/class=name): invalid qualified device name \"gpu0\": must be vendor/class=name
not injected: unresolvable CDI devices example.com/gpu=7, gpu0
"
    );
}

#[test]
fn inject_a_device_two_files_of_one_directory_define_is_dropped() {
    let tmp = machine();
    write(tmp.path(), "cdi/copy.json", GPU);
    let (code, out, err) = cdigen(
        tmp.path(),
        &[
            "inject",
            "--spec-dir",
            "cdi",
            "--root",
            "root",
            "example.com/gpu=1",
        ],
    );
    assert_eq!((code, err.as_str()), (1, ""));
    assert_eq!(
        out,
        "error: unresolved: example.com/gpu=1: defined in 2 files of cdi (cdi/copy.json, cdi/gpu.json): \
         runtimes drop every definition of a conflicting device
not injected: unresolvable CDI devices example.com/gpu=1
"
    );
}

#[test]
fn inject_a_later_directory_shadows_an_earlier_definition() {
    let tmp = machine();
    write(
        tmp.path(),
        "run/gpu.json",
        &GPU.replace("VISIBLE=1", "VISIBLE=one"),
    );
    let (code, out, _) = cdigen(
        tmp.path(),
        &[
            "inject",
            "--spec-dir",
            "cdi",
            "--spec-dir",
            "run",
            "--root",
            "root",
            "example.com/gpu=1",
        ],
    );
    assert_eq!(code, 0);
    assert!(
        out.starts_with("env:\n  GPU_DRIVER=1\n  VISIBLE=one\n"),
        "{out}"
    );
    assert!(
        out.contains(
            "warning: shadowed-definition: example.com/gpu=1: defined in cdi/gpu.json, shadowed by \
             run/gpu.json (a later spec directory wins): that definition is used\n"
        ),
        "{out}"
    );
}

#[test]
fn inject_a_spec_dir_that_does_not_exist_is_an_error_naming_it() {
    let tmp = machine();
    for format in ["text", "json"] {
        let (code, out, err) = cdigen(
            tmp.path(),
            &[
                "inject",
                "--spec-dir",
                "cdi",
                "--spec-dir",
                "nope",
                "-o",
                format,
                "example.com/gpu=0",
            ],
        );
        assert_eq!(
            (code, out.as_str(), err.as_str()),
            (
                2,
                "",
                "cdigen: cannot read nope: No such file or directory (os error 2)\n"
            )
        );
    }
}

#[test]
fn inject_a_node_without_numbers_missing_on_the_host_is_refused() {
    let tmp = machine();
    write(
        tmp.path(),
        "cdi/gone.json",
        r#"{"cdiVersion": "0.3.0", "kind": "example.com/gone",
            "devices": [{"name": "x", "containerEdits": {"deviceNodes": [{"path": "/dev/gone"}]}}]}"#,
    );
    let (code, out, _) = cdigen(
        tmp.path(),
        &[
            "inject",
            "--spec-dir",
            "cdi",
            "--root",
            "root",
            "example.com/gone=x",
        ],
    );
    assert_eq!(code, 1);
    assert_eq!(
        out,
        "not injected: failed to inject devices: failed to stat CDI host device \"/dev/gone\": no such \
         file or directory\n"
    );
}

#[test]
fn inject_needs_a_device_and_a_readable_root() {
    let tmp = machine();
    let (code, _, err) = cdigen(tmp.path(), &["inject", "--spec-dir", "cdi"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("the following required arguments were not provided"),
        "{err}"
    );
    let (code, out, err) = cdigen(
        tmp.path(),
        &[
            "inject",
            "--spec-dir",
            "cdi",
            "--root",
            "no-root",
            "example.com/gpu=0",
        ],
    );
    assert_eq!((code, out.as_str()), (2, ""));
    assert!(
        err.starts_with("cdigen: cannot use no-root as the root: "),
        "{err}"
    );
}

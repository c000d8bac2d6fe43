//! `cdigen inject` end to end: its OCI fragment against the CDI libraries'
//! for every fixture machine's golden specs and a hand-made spec with every
//! kind of conflict: the Go library v1.1.0 that containerd, CRI-O, Docker
//! and podman use, through its answers recorded in
//! `../shared/reference/cdi-go-recorded`, and the Rust CDI library
//! (`../shared/tools/cdi-rs/cdi-rs`, the cncf-tags port) live, where the
//! two libraries agree. Then its exact output and exit codes for the errors
//! a user meets.
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

// --- Against the CDI libraries ----------------------------------------------

/// Set (to anything but empty or `0`) to make a missing `../shared` a
/// failure instead of a skip, as CI does.
const REQUIRE_SHARED_VAR: &str = "CDIGEN_REQUIRE_SHARED";

/// The Go library's recorded answers, beside the crate.
const RECORDED: &str = "../shared/reference/cdi-go-recorded";
/// The commit whose golden specs the Go library's answers were recorded
/// on (`RECORDED/README.md`).
const RECORDED_AT: &str = "7dea01b75f950c631e97a5a5a2eddb1b5a822831";
/// The Rust CDI library as a command (`../shared/tools/cdi-rs/README.md`).
const RUST_CDI: &str = "../shared/tools/cdi-rs/cdi-rs";

/// Prints that `test` skipped and why, unless `CDIGEN_REQUIRE_SHARED`
/// makes that a failure.
fn skip(test: &str, why: &str) {
    let required = std::env::var_os(REQUIRE_SHARED_VAR).is_some_and(|v| !v.is_empty() && v != "0");
    assert!(
        !required,
        "{test}: {why}, and {REQUIRE_SHARED_VAR} requires it"
    );
    // Straight to stderr: the harness captures `eprintln!`, and this line
    // must show in a passing run.
    let _ = writeln!(
        std::io::stderr(),
        "skipped {test}: {why} (CI has it; {REQUIRE_SHARED_VAR}=1 makes this a failure)"
    );
}

/// `rel` (relative to the crate) when it exists; None (a skip, printed)
/// when it is not there, a failure instead when `CDIGEN_REQUIRE_SHARED`
/// is set.
fn shared(test: &str, rel: &str) -> Option<PathBuf> {
    let path = repo().join(rel);
    if path.exists() {
        return Some(path);
    }
    skip(test, &format!("no {rel} beside the crate"));
    None
}

/// What a library's injection gives: the fragment, or its error.
#[derive(Debug, PartialEq)]
enum Outcome {
    Injected(Value),
    Refused(String),
}

/// A library's `inject` answer (`cdi-go`'s format, which the Rust CDI
/// library's command keeps), normalized: the `PATH=/bin` it starts its
/// container's environment with is dropped (cdigen injects into an empty
/// spec), and so are nulls, empty lists and empty objects (Go writes a
/// missing list as null, cdigen as []).
fn outcome(exit: Option<i32>, stdout: &str) -> Outcome {
    assert!(
        !stdout.lines().any(|l| l.starts_with("ERROR ")),
        "the library cannot load the specs: {stdout}"
    );
    if let Some(line) = stdout.lines().find(|l| l.starts_with("INJECT-ERROR ")) {
        assert_eq!(exit, Some(1), "{stdout}");
        let error = line.trim_start_matches("INJECT-ERROR ");
        let error = error.rsplit_once(" unresolved: ").map_or(error, |(e, _)| e);
        return Outcome::Refused(error.to_string());
    }
    assert_eq!(exit, Some(0), "{stdout}");
    let mut v: Value = serde_json::from_str(stdout).unwrap();
    let env = v["env"].as_array_mut().unwrap();
    assert_eq!(env.first(), Some(&Value::from("PATH=/bin")), "{stdout}");
    env.remove(0);
    Outcome::Injected(normalize(v))
}

/// `cdi-rs inject DIR DEVICE...`: the Rust CDI library's answer.
fn library(tool: &Path, dir: &Path, devices: &[String]) -> Outcome {
    let out = Command::new(tool)
        .arg("inject")
        .arg(dir)
        .args(devices)
        .output()
        .unwrap();
    outcome(out.status.code(), &String::from_utf8(out.stdout).unwrap())
}

/// `cdigen inject --root / --spec-dir DIR -o json DEVICE...` (the host's
/// `/dev`, as the libraries see it), normalized as [`outcome`] is; the
/// net devices, which the tools do not print, are left out.
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

/// The number of `/` in a mount destination once cleaned as Go's
/// `filepath.Clean` does (repeated and trailing `/`, `.`, and `..`
/// resolved lexically): the Go library's mount order key.
fn go_depth(destination: &str) -> usize {
    let mut parts: Vec<&str> = Vec::new();
    let rooted = destination.starts_with('/');
    for part in destination.split('/') {
        match part {
            "" | "." => {}
            ".." if parts.last().is_some_and(|p| *p != "..") => {
                parts.pop();
            }
            ".." if rooted => {}
            p => parts.push(p),
        }
    }
    let clean = parts.join("/");
    usize::from(rooted) + clean.matches('/').count()
}

/// Whether the Rust CDI library's answer and cdigen's (which follows the
/// Go library) agree, up to the differences between the two libraries
/// that `../shared/tools/cdi-rs/README.md` documents and that apply here:
/// - row 12: the Go library stable-sorts all mounts by the depth of their
///   destination (parents first); the Rust library keeps the specs' order;
/// - row 13: the Go library copies a node's `fileMode` from the host node
///   when the spec gives none; the Rust library never sets it;
/// - row 15: the Rust library drops the cause of an injection error
///   (`failed to inject devices: filling missing info failed.`).
fn agrees(rust: &Outcome, ours: &Outcome) -> bool {
    match (rust, ours) {
        (Outcome::Injected(rust), Outcome::Injected(ours)) => {
            let mut rust = rust.clone();
            let mut ours = ours.clone();
            if let Some(mounts) = rust.get_mut("mounts").and_then(Value::as_array_mut) {
                mounts.sort_by_key(|m| go_depth(m["destination"].as_str().unwrap_or("")));
            }
            let rust_nodes = rust["devices"].as_array().cloned().unwrap_or_default();
            if let Some(nodes) = ours.get_mut("devices").and_then(Value::as_array_mut) {
                for (mine, theirs) in nodes.iter_mut().zip(&rust_nodes) {
                    if mine["path"] == theirs["path"] && theirs.get("fileMode").is_none() {
                        mine.as_object_mut().unwrap().remove("fileMode");
                    }
                }
            }
            rust == ours
        }
        (Outcome::Refused(rust), Outcome::Refused(ours)) => {
            rust == ours
                || (rust == "failed to inject devices: filling missing info failed."
                    && ours.starts_with("failed to inject devices: "))
        }
        _ => false,
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

/// One recorded answer of the Go library (`RECORDED/inject.jsonl`).
struct Recorded {
    dir: String,
    devices: Vec<String>,
    outcome: Outcome,
}

/// Every recorded answer, in file order.
fn recorded(file: &Path) -> Vec<Recorded> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).unwrap();
            let exit = v["exit"].as_i64().and_then(|e| i32::try_from(e).ok());
            Recorded {
                dir: v["dir"].as_str().unwrap().to_string(),
                devices: serde_json::from_value(v["devices"].clone()).unwrap(),
                outcome: outcome(exit, v["stdout"].as_str().unwrap()),
            }
        })
        .collect()
}

/// The spec directories `dirs` as they were at [`RECORDED_AT`], what the
/// Go library was given, extracted from the repository's history into a
/// temporary directory; None when git or that commit is not there.
fn at_recorded_commit(dirs: &[&str]) -> Option<tempfile::TempDir> {
    let tmp = tempfile::tempdir().unwrap();
    let archive = Command::new("git")
        .arg("-C")
        .arg(repo())
        .args(["archive", "--format=tar", RECORDED_AT, "--"])
        .args(dirs)
        .output()
        .ok()?;
    if !archive.status.success() {
        return None;
    }
    let mut tar = Command::new("tar")
        .arg("-x")
        .arg("-C")
        .arg(tmp.path())
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    tar.stdin
        .take()
        .unwrap()
        .write_all(&archive.stdout)
        .unwrap();
    assert!(tar.wait().unwrap().success());
    Some(tmp)
}

/// Whether `dir` (relative to the crate) differs today from what it was at
/// [`RECORDED_AT`].
fn changed_since_recording(dir: &str) -> bool {
    !Command::new("git")
        .arg("-C")
        .arg(repo())
        .args(["diff", "--quiet", RECORDED_AT, "--", dir])
        .status()
        .unwrap()
        .success()
}

/// cdigen against the Go library's recorded answers for every device of
/// every fixture machine's golden specs, on the specs the library was
/// given (taken from the repository's history, so a golden that changed
/// since still has its recording checked). The directories that changed
/// since are named: for their specs as they are now, only the live
/// comparison with the Rust library below speaks.
#[test]
fn every_fixture_injects_as_the_go_library_recorded() {
    let test = "every_fixture_injects_as_the_go_library_recorded";
    let Some(file) = shared(test, &format!("{RECORDED}/inject.jsonl")) else {
        return;
    };
    let answers: Vec<Recorded> = recorded(&file)
        .into_iter()
        .filter(|r| r.dir.starts_with("fixtures/"))
        .collect();
    let mut dirs: Vec<&str> = answers.iter().map(|r| r.dir.as_str()).collect();
    dirs.dedup();
    assert!(dirs.len() >= 10, "{dirs:?}");
    let Some(tree) = at_recorded_commit(&dirs) else {
        skip(
            test,
            &format!("no commit {RECORDED_AT} in the repository's history"),
        );
        return;
    };
    let changed: Vec<&&str> = dirs.iter().filter(|d| changed_since_recording(d)).collect();
    if !changed.is_empty() {
        let _ = writeln!(
            std::io::stderr(),
            "{test}: changed since the Go library's recording, compared as they were at \
             {RECORDED_AT} (their current specs only with the Rust CDI library): {changed:?}"
        );
    }
    let mut failures = Vec::new();
    for r in &answers {
        let mine = ours(&tree.path().join(&r.dir), &r.devices);
        if r.outcome != mine {
            failures.push(format!(
                "{} {:?}:\n  Go library: {:?}\n  cdigen:     {mine:?}",
                r.dir, r.devices, r.outcome
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        answers.len() > 200,
        "only {} recorded requests",
        answers.len()
    );
}

/// cdigen against the Rust CDI library, live, on every fixture machine's
/// golden specs as they are now, where the two libraries agree (see
/// [`agrees`]).
#[test]
fn every_fixture_injects_as_the_rust_library_does_where_the_libraries_agree() {
    let test = "every_fixture_injects_as_the_rust_library_does_where_the_libraries_agree";
    let Some(tool) = shared(test, RUST_CDI) else {
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
        for devices in requests(&specs) {
            if devices.is_empty() {
                continue; // a machine with nothing to give
            }
            compared += 1;
            let theirs = library(&tool, dir, &devices);
            let mine = ours(dir, &devices);
            if !agrees(&theirs, &mine) {
                failures.push(format!(
                    "{} {devices:?}:\n  Rust library: {theirs:?}\n  cdigen:       {mine:?}",
                    dir.display()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(compared > 100, "only {compared} requests");
}

/// The six requests over the recording's two specs with every conflict
/// the libraries resolve (`RECORDED/conflict.json`, `other.json`): env set
/// by a spec and by devices, a node replaced, nodes without numbers
/// (filled from the host's `/dev/null` and `/dev/zero`, which every Linux
/// host has), a `u` node, mounts replaced and sorted, hooks, GIDs,
/// intelRdt, a missing host node, unresolvable names. cdigen gives the Go
/// library's recorded answers, and agrees with the Rust library live.
#[test]
fn conflicts_resolve_as_in_the_cdi_libraries() {
    let test = "conflicts_resolve_as_in_the_cdi_libraries";
    let (Some(file), Some(tool)) = (
        shared(test, &format!("{RECORDED}/inject.jsonl")),
        shared(test, RUST_CDI),
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    for spec in ["conflict.json", "other.json"] {
        std::fs::copy(file.with_file_name(spec), tmp.path().join(spec)).unwrap();
    }
    let answers: Vec<Recorded> = recorded(&file)
        .into_iter()
        .filter(|r| r.dir.starts_with("conflicts"))
        .collect();
    assert_eq!(answers.len(), 6);
    let mut failures = Vec::new();
    for r in &answers {
        let mine = ours(tmp.path(), &r.devices);
        if r.outcome != mine {
            failures.push(format!(
                "{:?}:\n  Go library: {:?}\n  cdigen:     {mine:?}",
                r.devices, r.outcome
            ));
        }
        let rust = library(&tool, tmp.path(), &r.devices);
        if !agrees(&rust, &mine) {
            failures.push(format!(
                "{:?}:\n  Rust library: {rust:?}\n  cdigen:       {mine:?}",
                r.devices
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The comparison saw what it is about (not two empty fragments).
    let Outcome::Injected(v) = ours(tmp.path(), &answers[2].devices) else {
        panic!("not injected");
    };
    assert_eq!(v["env"], serde_json::json!(["SHARED=b", "SPEC=1", "A=1"]));
    assert_eq!(v["devices"][0]["type"], "c");
    assert_eq!(v["devices"][0]["major"], 1);
    let depths: Vec<usize> = v["mounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| go_depth(m["destination"].as_str().unwrap()))
        .collect();
    assert!(depths.windows(2).all(|w| w[0] <= w[1]), "{v}");
    assert_eq!(
        ours(tmp.path(), &answers[4].devices),
        Outcome::Refused(
            "failed to inject devices: failed to stat CDI host device \"/dev/cdigen-no-such-node\": \
             no such file or directory"
                .into()
        )
    );
}

#[test]
fn go_depth_cleans_as_go_does() {
    for (dest, depth) in [
        ("/", 1),
        ("rel", 0),
        ("/m", 1),
        ("/m/", 1),
        ("//m//a/./b", 3),
        ("/m/a/../b", 2),
        ("/../m", 1),
        ("a/../../b", 1),
        ("../a/b", 2),
    ] {
        assert_eq!(go_depth(dest), depth, "{dest}");
    }
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

/// A hook's program is looked for on the host under --root, as the
/// runtime there would: one missing there (though this machine has it)
/// is a warning naming the spec file, the device and the path; one there
/// is fine (though this machine has none).
#[test]
fn inject_warns_of_a_hook_program_missing_on_the_host_under_root() {
    use std::os::unix::fs::PermissionsExt as _;
    let tmp = machine();
    write(
        tmp.path(),
        "hooked/thing.json",
        r#"{"cdiVersion": "0.5.0", "kind": "example.com/thing",
  "devices": [{"name": "a", "containerEdits": {"env": ["X=1"], "hooks": [
    {"hookName": "createContainer", "path": "/bin/sh", "env": ["PATH=/bin"]},
    {"hookName": "createContainer", "path": "/opt/vendor/bin/vendor-hook", "env": ["PATH=/bin"]}]}}]}"#,
    );
    let hook = tmp.path().join("root/opt/vendor/bin/vendor-hook");
    write(tmp.path(), "root/opt/vendor/bin/vendor-hook", "#!/bin/sh\n");
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (code, out, err) = cdigen(
        tmp.path(),
        &[
            "inject",
            "--spec-dir",
            "hooked",
            "--root",
            "root",
            "example.com/thing=a",
        ],
    );
    assert_eq!((code, err.as_str()), (0, ""));
    assert_eq!(
        out.lines()
            .filter(|l| l.starts_with("warning: "))
            .collect::<Vec<_>>(),
        [
            "warning: missing-host-path: /bin/sh: hooked/thing.json: device \"a\": containerEdits.hooks[0]: \"createContainer\" hook \"/bin/sh\": /bin: No such file or directory (os error 2): runtimes fail to start a container given it"
        ],
        "{out}"
    );
}

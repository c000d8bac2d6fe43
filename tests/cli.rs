//! End-to-end tests of the `cdigen` binary: exact output and exit codes of
//! `validate`, `list` and the usage errors, on spec files written by hand
//! into temporary directories.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::io::BufRead;
use std::path::Path;
use std::process::Stdio;

use assert_cmd::Command;
use tempfile::TempDir;

/// The binary, run in `dir` (so that the paths it prints are the relative
/// ones the test passes), with no logging from the environment.
fn cdigen(dir: &Path) -> Command {
    let mut cmd = Command::cargo_bin("cdigen").unwrap();
    cmd.current_dir(dir)
        .env_remove("RUST_LOG")
        .env_remove("CDIGEN_ROOT")
        // Hooks name cdigen-hook where the package installs it (as the
        // goldens do).
        .env("CDIGEN_HOOK_PATH", "/usr/bin/cdigen-hook");
    cmd
}

/// Runs the binary; returns (exit code, stdout, stderr).
fn run(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = cdigen(dir).args(args).output().unwrap();
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

/// A valid spec, by hand: kind `example.com/gpu`, devices gpu10 and gpu2
/// (in that order, to check the natural sort of the listing).
const GPU_JSON: &str = r#"{
  "cdiVersion": "0.3.0",
  "kind": "example.com/gpu",
  "devices": [
    {"name": "gpu10", "containerEdits": {"deviceNodes": [{"path": "/dev/gpu10"}]}},
    {"name": "gpu2", "containerEdits": {"deviceNodes": [{"path": "/dev/gpu2"}]}}
  ]
}
"#;

const NET_YAML: &str = r#"cdiVersion: "0.3.0"
kind: example.com/net
devices:
  - name: eth0
    containerEdits:
      env: ["NET=eth0"]
"#;

/// Invalid: an env entry without `=`, a device node without a path.
const INVALID_YAML: &str = r#"cdiVersion: "0.3.0"
kind: example.com/gpu
devices:
  - name: gpu0
    containerEdits:
      env: ["NOEQUALS"]
      deviceNodes:
        - path: ""
"#;

/// Valid, but `*.yml` is not loaded by runtimes.
const YML: &str = r#"cdiVersion: "0.3.0"
kind: example.com/yml
devices:
  - name: ignored
    containerEdits:
      env: ["A=1"]
"#;

/// A valid JSON spec with `n` devices `dev0`..: large output for the broken
/// pipe tests.
fn many_devices(n: usize) -> String {
    let devices: Vec<String> = (0..n)
        .map(|i| format!(r#"{{"name": "dev{i}", "containerEdits": {{"env": ["DEV={i}"]}}}}"#))
        .collect();
    format!(
        "{{\"cdiVersion\": \"0.3.0\", \"kind\": \"example.com/many\", \"devices\": [\n{}\n]}}\n",
        devices.join(",\n")
    )
}

// --- validate ---------------------------------------------------------------

#[test]
fn validate_valid_file() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "gpu.json", GPU_JSON);
    let (code, out, err) = run(dir.path(), &["validate", "gpu.json"]);
    assert_eq!(
        out,
        "gpu.json: ok (2 devices)\n1 file checked: 0 errors, 0 warnings\n"
    );
    assert_eq!(err, "");
    assert_eq!(code, 0);
}

#[test]
fn validate_valid_dir_lists_each_file() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "cdi/gpu.json", GPU_JSON);
    write(dir.path(), "cdi/net.yaml", NET_YAML);
    let (code, out, err) = run(dir.path(), &["validate", "cdi"]);
    assert_eq!(
        out,
        "cdi/gpu.json: ok (2 devices)\n\
         cdi/net.yaml: ok (1 device)\n\
         2 files checked: 0 errors, 0 warnings\n"
    );
    assert_eq!(err, "");
    assert_eq!(code, 0);
}

#[test]
fn validate_warns_about_devices_setting_one_variable_to_different_values() {
    let dir = TempDir::new().unwrap();
    // A foreign spec, as the SR-IOV device plugin's CDI mode writes them:
    // two VFs, one variable. Same name and same value is no collision.
    write(
        dir.path(),
        "vf.yaml",
        "cdiVersion: 0.5.0\nkind: example.com/vf\ndevices:\n\
         - name: a\n  containerEdits:\n    env: [\"PCIDEVICE_X=0000:01:00.0\", \"SAME=1\"]\n\
         - name: b\n  containerEdits:\n    env: [\"SAME=1\", \"PCIDEVICE_X=0000:01:00.1\"]\n",
    );
    let (code, out, err) = run(dir.path(), &["validate", "vf.yaml"]);
    assert_eq!(
        out,
        "vf.yaml: warning: devices \"a\" and \"b\": both set \"PCIDEVICE_X\" (to \"0000:01:00.0\" \
         and \"0000:01:00.1\"): runtimes merge the env of the devices a container gets by variable \
         name, so a container given both sees only one of the values\n\
         1 file checked: 0 errors, 1 warning\n"
    );
    assert_eq!(err, "");
    assert_eq!(code, 0, "a warning: the spec is valid");
}

/// Any producer's spec: a createContainer hook without env (runc gives it
/// the container's environment: an image's LD_PRELOAD) is an error; so is
/// a program others can write, and a program missing or not executable
/// (every container given the device fails to start).
#[test]
fn validate_reports_hooks_that_run_a_containers_code_as_root() {
    let dir = TempDir::new().unwrap();
    let open = dir.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::write(open.join("hook"), "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(
        &open,
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o777),
    )
    .unwrap();
    write(
        dir.path(),
        "hooks.json",
        &format!(
            r#"{{"cdiVersion": "0.5.0", "kind": "example.com/gpu",
  "containerEdits": {{"hooks": [
    {{"hookName": "createContainer", "path": "/bin/sh", "args": ["sh", "-c", "true"]}},
    {{"hookName": "createContainer", "path": "/nonexistent/hook", "env": ["A=1"]}}]}},
  "devices": [{{"name": "a", "containerEdits": {{"hooks": [
    {{"hookName": "poststop", "path": "{}/hook"}},
    {{"hookName": "poststop", "path": "{}/data"}}]}}}}]}}"#,
            open.display(),
            dir.path().display()
        ),
    );
    write(dir.path(), "data", "#!/bin/sh\n");
    std::fs::set_permissions(
        dir.path().join("data"),
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o644),
    )
    .unwrap();
    let (code, out, err) = run(dir.path(), &["validate", "hooks.json"]);
    let out = out.replace(&dir.path().display().to_string(), "T");
    assert_eq!(
        out,
        "hooks.json: error: containerEdits.hooks[0]: \"createContainer\" hook \"/bin/sh\": no env: \
         runtimes run it with the container's environment, so an image's LD_PRELOAD or LD_AUDIT \
         loads the image's code into it, as root on the host (give it an env, such as \
         [\"PATH=/usr/sbin:/usr/bin:/sbin:/bin\"])\n\
         hooks.json: error: containerEdits.hooks[1]: \"createContainer\" hook \"/nonexistent/hook\": \
         /nonexistent: No such file or directory (os error 2): runtimes fail to start a container given it\n\
         hooks.json: error: device \"a\": containerEdits.hooks[0]: \"poststop\" hook \"T/open/hook\": \
         T/open is writable by others: whoever can change it runs code as root on the host\n\
         hooks.json: error: device \"a\": containerEdits.hooks[1]: \"poststop\" hook \"T/data\": \
         is not executable (mode 0644): runtimes fail to start a container given it\n\
         1 file checked: 4 errors, 0 warnings\n"
    );
    assert_eq!(err, "");
    assert_eq!(code, 1);
}

#[test]
fn validate_invalid_file_names_the_file_and_location() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "bad.yaml", INVALID_YAML);
    let (code, out, err) = run(dir.path(), &["validate", "bad.yaml"]);
    assert_eq!(
        out,
        "bad.yaml: error: device \"gpu0\": containerEdits.env[0]: \"NOEQUALS\" is not NAME=value\n\
         bad.yaml: error: device \"gpu0\": containerEdits.deviceNodes[0].path: must not be empty\n\
         1 file checked: 2 errors, 0 warnings\n"
    );
    assert_eq!(err, "");
    assert_eq!(code, 1);
}

#[test]
fn validate_unparsable_file() {
    let dir = TempDir::new().unwrap();
    write(
        dir.path(),
        "cut.json",
        r#"{"cdiVersion": "0.3.0", "kind": "#,
    );
    let (code, out, err) = run(dir.path(), &["validate", "cut.json"]);
    assert_eq!(
        out,
        "cut.json: error: invalid JSON: EOF while parsing a value at line 1 column 32\n\
         1 file checked: 1 error, 0 warnings\n"
    );
    assert_eq!(err, "");
    assert_eq!(code, 1);
}

#[test]
fn validate_conflict_in_one_dir_is_an_error_on_both_files() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "cdi/a.json", GPU_JSON);
    // The same kind and device gpu2 (only), in YAML.
    write(
        dir.path(),
        "cdi/b.yaml",
        "cdiVersion: \"0.3.0\"\nkind: example.com/gpu\ndevices:\n  - name: gpu2\n    \
         containerEdits:\n      deviceNodes:\n        - path: /dev/gpu2\n",
    );
    let (code, out, err) = run(dir.path(), &["validate", "cdi"]);
    assert_eq!(
        out,
        "cdi/a.json: error: device \"example.com/gpu=gpu2\": also defined in cdi/b.yaml in the \
         same directory: runtimes drop every definition of a conflicting device\n\
         cdi/b.yaml: error: device \"example.com/gpu=gpu2\": also defined in cdi/a.json in the \
         same directory: runtimes drop every definition of a conflicting device\n\
         2 files checked: 2 errors, 0 warnings\n"
    );
    assert_eq!(err, "");
    assert_eq!(code, 1);

    // Runtimes drop gpu2 altogether; gpu10 (in one file only) still resolves.
    let (code, out, err) = run(dir.path(), &["list", "--spec-dir", "cdi"]);
    assert_eq!(out, "example.com/gpu=gpu10\n");
    assert_eq!(
        err,
        "cdigen: cdi/a.json: device \"example.com/gpu=gpu2\": also defined in cdi/b.yaml in the \
         same directory: runtimes drop every definition of a conflicting device\n\
         cdigen: cdi/b.yaml: device \"example.com/gpu=gpu2\": also defined in cdi/a.json in the \
         same directory: runtimes drop every definition of a conflicting device\n"
    );
    assert_eq!(code, 0);
}

#[test]
fn validate_shadowing_by_a_later_dir_is_a_warning() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "etc/net.yaml", NET_YAML);
    write(
        dir.path(),
        "run/net.json",
        r#"{"cdiVersion": "0.3.0", "kind": "example.com/net",
        "devices": [{"name": "eth0", "containerEdits": {"env": ["NET=run"]}}]}"#,
    );
    let (code, out, err) = run(dir.path(), &["validate", "etc", "run"]);
    assert_eq!(
        out,
        "etc/net.yaml: warning: device \"example.com/net=eth0\": shadowed by run/net.json (a \
         later spec directory wins)\n\
         run/net.json: ok (1 device)\n\
         2 files checked: 0 errors, 1 warning\n"
    );
    assert_eq!(err, "");
    assert_eq!(code, 0);

    // The later directory's definition is the one listed.
    let (code, out, _) = run(
        dir.path(),
        &[
            "list",
            "--spec-dir",
            "etc",
            "--spec-dir",
            "run",
            "-o",
            "json",
        ],
    );
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        doc,
        serde_json::json!([{"name": "example.com/net=eth0", "path": "run/net.json"}])
    );
    assert_eq!(code, 0);
}

#[test]
fn validate_yml_file_is_a_warning() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "cdi/old.yml", YML);
    let (code, out, err) = run(dir.path(), &["validate", "cdi"]);
    assert_eq!(
        out,
        "cdi/old.yml: warning: ignored by runtimes: only *.json and *.yaml files are loaded\n\
         1 file checked: 0 errors, 1 warning\n"
    );
    assert_eq!(err, "");
    assert_eq!(code, 0);
}

#[test]
fn validate_json_output() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "cdi/gpu.json", GPU_JSON);
    write(dir.path(), "cdi/bad.yaml", INVALID_YAML);
    let (code, out, err) = run(dir.path(), &["validate", "-o", "json", "cdi", "missing"]);
    assert_eq!(err, "");
    assert_eq!(code, 2, "an unreadable input is an environment error");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        doc,
        serde_json::json!({
            "valid": false,
            "inputErrors": ["cannot read missing: No such file or directory (os error 2)"],
            "files": [
                {
                    "path": "cdi/bad.yaml",
                    "kind": "example.com/gpu",
                    "devices": ["gpu0"],
                    "findings": [
                        {
                            "severity": "error",
                            "location": "device \"gpu0\": containerEdits.env[0]",
                            "message": "\"NOEQUALS\" is not NAME=value"
                        },
                        {
                            "severity": "error",
                            "location": "device \"gpu0\": containerEdits.deviceNodes[0].path",
                            "message": "must not be empty"
                        }
                    ]
                },
                {
                    "path": "cdi/gpu.json",
                    "kind": "example.com/gpu",
                    "devices": ["gpu10", "gpu2"],
                    "findings": []
                }
            ]
        })
    );
}

#[test]
fn validate_json_output_when_valid() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "gpu.json", GPU_JSON);
    let (code, out, err) = run(
        dir.path(),
        &["validate", "--output-format", "json", "gpu.json"],
    );
    assert_eq!(err, "");
    assert_eq!(code, 0);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["valid"], true);
    assert_eq!(doc["inputErrors"], serde_json::json!([]));
    assert_eq!(doc["files"][0]["findings"], serde_json::json!([]));
}

#[test]
fn validate_missing_path() {
    let dir = TempDir::new().unwrap();
    let (code, out, err) = run(dir.path(), &["validate", "nope"]);
    assert_eq!(
        out,
        "error: cannot read nope: No such file or directory (os error 2)\n\
         0 files checked: 1 error, 0 warnings\n"
    );
    assert_eq!(err, "");
    assert_eq!(code, 2);
}

// --- list -------------------------------------------------------------------

/// `etc`: gpu.json (gpu10, gpu2), net.yaml (eth0), bad.yaml (invalid),
/// old.yml (ignored).
fn list_fixture() -> TempDir {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "etc/gpu.json", GPU_JSON);
    write(dir.path(), "etc/net.yaml", NET_YAML);
    write(dir.path(), "etc/bad.yaml", INVALID_YAML);
    write(dir.path(), "etc/old.yml", YML);
    dir
}

const LIST_ERRORS: &str = "cdigen: etc/bad.yaml: device \"gpu0\": containerEdits.env[0]: \
                           \"NOEQUALS\" is not NAME=value\n\
                           cdigen: etc/bad.yaml: device \"gpu0\": \
                           containerEdits.deviceNodes[0].path: must not be empty\n";

#[test]
fn list_text_in_natural_order_with_problems_on_stderr() {
    let dir = list_fixture();
    let (code, out, err) = run(dir.path(), &["list", "--spec-dir", "etc"]);
    // gpu2 before gpu10; nothing from bad.yaml (invalid) nor old.yml.
    assert_eq!(
        out,
        "example.com/gpu=gpu2\nexample.com/gpu=gpu10\nexample.com/net=eth0\n"
    );
    assert_eq!(err, LIST_ERRORS);
    assert_eq!(code, 0);
}

#[test]
fn list_json() {
    let dir = list_fixture();
    let (code, out, err) = run(dir.path(), &["list", "--spec-dir", "etc", "-o", "json"]);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        doc,
        serde_json::json!([
            {"name": "example.com/gpu=gpu2", "path": "etc/gpu.json"},
            {"name": "example.com/gpu=gpu10", "path": "etc/gpu.json"},
            {"name": "example.com/net=eth0", "path": "etc/net.yaml"}
        ])
    );
    assert_eq!(err, LIST_ERRORS);
    assert_eq!(code, 0);
}

#[test]
fn list_yaml() {
    let dir = list_fixture();
    let (code, out, err) = run(
        dir.path(),
        &["list", "--spec-dir", "etc", "--output-format", "yaml"],
    );
    assert_eq!(
        out,
        "- name: 'example.com/gpu=gpu2'\n  path: 'etc/gpu.json'\n\
         - name: 'example.com/gpu=gpu10'\n  path: 'etc/gpu.json'\n\
         - name: 'example.com/net=eth0'\n  path: 'etc/net.yaml'\n"
    );
    assert_eq!(err, LIST_ERRORS);
    assert_eq!(code, 0);
}

#[test]
fn list_empty_dir() {
    let dir = TempDir::new().unwrap();
    std::fs::create_dir(dir.path().join("empty")).unwrap();
    let (code, out, err) = run(dir.path(), &["list", "--spec-dir", "empty"]);
    assert_eq!((code, out.as_str(), err.as_str()), (0, "", ""));
    let (code, out, err) = run(dir.path(), &["list", "--spec-dir", "empty", "-o", "json"]);
    assert_eq!((code, out.as_str(), err.as_str()), (0, "[]\n", ""));
}

#[test]
fn list_missing_spec_dir_is_an_environment_error() {
    let dir = list_fixture();
    let (code, out, err) = run(
        dir.path(),
        &["list", "--spec-dir", "nope", "--spec-dir", "etc"],
    );
    // The other directory is still listed.
    assert_eq!(
        out,
        "example.com/gpu=gpu2\nexample.com/gpu=gpu10\nexample.com/net=eth0\n"
    );
    assert_eq!(
        err,
        format!("cdigen: cannot read nope: No such file or directory (os error 2)\n{LIST_ERRORS}")
    );
    assert_eq!(code, 2);
}

// --- the rest ---------------------------------------------------------------

#[test]
fn generate_and_discover_need_a_readable_root() {
    let dir = TempDir::new().unwrap();
    for sub in ["generate", "discover"] {
        let (code, out, err) = run(dir.path(), &[sub, "--root", "no-such-root"]);
        assert_eq!(out, "", "{sub}");
        assert_eq!(
            err,
            "cdigen: cannot use no-such-root as the root: no-such-root: No such file or directory (os error 2)\n",
            "{sub}"
        );
        assert_eq!(code, 2, "{sub}");
    }
}

#[test]
fn unknown_flag_is_a_usage_error() {
    let dir = TempDir::new().unwrap();
    let (code, out, err) = run(dir.path(), &["list", "--bogus"]);
    assert_eq!(out, "");
    assert_eq!(
        err,
        "error: unexpected argument '--bogus' found\n\n\
         Usage: cdigen list [OPTIONS]\n\n\
         For more information, try '--help'.\n"
    );
    assert_eq!(code, 2);
}

#[test]
fn missing_subcommand_and_bad_value_are_usage_errors() {
    let dir = TempDir::new().unwrap();
    let (code, out, err) = run(dir.path(), &[]);
    assert_eq!((code, out.as_str()), (2, ""));
    assert!(err.contains("Usage: cdigen [OPTIONS] <COMMAND>"), "{err}");

    let (code, out, err) = run(dir.path(), &["list", "-o", "xml"]);
    assert_eq!((code, out.as_str()), (2, ""));
    assert!(
        err.starts_with("error: invalid value 'xml' for '--output-format <OUTPUT_FORMAT>'"),
        "{err}"
    );
    // validate has no YAML output.
    let (code, _, err) = run(dir.path(), &["validate", "-o", "yaml"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn version() {
    let dir = TempDir::new().unwrap();
    let (code, out, err) = run(dir.path(), &["-V"]);
    assert_eq!(out, format!("cdigen {}\n", env!("CARGO_PKG_VERSION")));
    assert_eq!((code, err.as_str()), (0, ""));
    let (code, out, err) = run(dir.path(), &["--version"]);
    assert_eq!((code, err.as_str()), (0, ""));
    assert_version(&out, "cdigen");
    let hook = std::process::Command::new(env!("CARGO_BIN_EXE_cdigen-hook"))
        .arg("--version")
        .output()
        .unwrap();
    assert_eq!(hook.status.code(), Some(0));
    assert_version(&String::from_utf8(hook.stdout).unwrap(), "cdigen-hook");
}

/// `out` is what `PROGRAM --version` prints for this tree. A tree with
/// changes now may have had them only in files the build does not watch
/// (tests, docs): then the revision may lack its `-dirty`.
fn assert_version(out: &str, program: &str) {
    let want = expected_version(program);
    let lenient = want.replacen("-dirty\n", "\n", 1);
    assert!(out == want || out == lenient, "{out:?}, expected {want:?}");
}

/// What `PROGRAM --version` prints: the version, the commit this tree
/// is at (with `-dirty` when tracked files differ; `unknown` without git)
/// and the features this test was built with.
fn expected_version(program: &str) -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env("GIT_OPTIONAL_LOCKS", "0")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8(o.stdout).unwrap().trim().to_string())
    };
    let top = git(&["rev-parse", "--show-toplevel"]).map(|t| Path::new(&t).canonicalize().unwrap());
    let here = Path::new(env!("CARGO_MANIFEST_DIR"))
        .canonicalize()
        .unwrap();
    let revision = match std::env::var("CDIGEN_BUILD_REVISION") {
        Ok(r) if !r.is_empty() => r,
        _ if top.as_deref() == Some(here.as_path()) => {
            let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap();
            let dirty = !git(&["status", "--porcelain", "--untracked-files=no"])
                .unwrap()
                .is_empty();
            if dirty {
                format!("{commit}-dirty")
            } else {
                commit
            }
        }
        _ => "unknown".into(),
    };
    let mut features = Vec::new();
    if cfg!(feature = "nvml") {
        features.push("nvml");
    }
    if cfg!(feature = "udev") {
        features.push("udev");
    }
    let features = if features.is_empty() {
        "none".to_string()
    } else {
        features.join(",")
    };
    format!(
        "{program} {}\nrevision: {revision}\nfeatures: {features}\n",
        env!("CARGO_PKG_VERSION")
    )
}

#[test]
fn help() {
    let dir = TempDir::new().unwrap();
    let (code, out, err) = run(dir.path(), &["--help"]);
    assert_eq!((code, err.as_str()), (0, ""));
    assert!(out.contains("Usage: cdigen [OPTIONS] <COMMAND>"), "{out}");
    for sub in ["generate", "discover", "list", "validate"] {
        assert!(out.contains(&format!("\n  {sub} ")), "{sub}: {out}");
    }
    assert!(out.contains("Exit status: 0 success"), "{out}");

    let (code, out, err) = run(dir.path(), &["help", "validate"]);
    assert_eq!((code, err.as_str()), (0, ""));
    assert!(
        out.contains("Usage: cdigen validate [OPTIONS] [PATH]..."),
        "{out}"
    );
    let (code, out, err) = run(dir.path(), &["list", "-h"]);
    assert_eq!((code, err.as_str()), (0, ""));
    assert!(out.contains("Usage: cdigen list [OPTIONS]"), "{out}");
}

#[test]
fn quiet_and_verbose_conflict() {
    let dir = list_fixture();
    for args in [
        &["-q", "-v", "list", "--spec-dir", "etc"][..],
        &["list", "--spec-dir", "etc", "-v", "--quiet"][..],
    ] {
        let (code, out, err) = run(dir.path(), args);
        assert_eq!(out, "", "{args:?}");
        assert!(
            err.starts_with("error: the argument '--quiet' cannot be used with '--verbose...'")
                || err.starts_with(
                    "error: the argument '--verbose...' cannot be used with '--quiet'"
                ),
            "{args:?}: {err}"
        );
        assert_eq!(code, 2, "{args:?}");
    }
    // Each on its own is fine, before or after the subcommand.
    for args in [
        &["-q", "list", "--spec-dir", "etc"][..],
        &["list", "--spec-dir", "etc", "-vv"][..],
    ] {
        let (code, out, _) = run(dir.path(), args);
        assert_eq!(code, 0, "{args:?}");
        assert_eq!(out.lines().count(), 3, "{args:?}");
    }
}

/// `cdigen list | head -n1`: the reader goes away after one line, with
/// far more than a pipe buffer (64 KiB) of output still to come. The write
/// fails with EPIPE (Rust ignores SIGPIPE), which must end the command
/// quietly with status 0.
#[test]
fn closed_stdout_is_not_an_error() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "cdi/many.json", &many_devices(5000));
    let cases: [(&[&str], &str); 4] = [
        (&["list", "--spec-dir", "cdi"], "example.com/many=dev0\n"),
        (&["list", "--spec-dir", "cdi", "-o", "json"], "[\n"),
        (
            &["list", "--spec-dir", "cdi", "-o", "yaml"],
            "- name: 'example.com/many=dev0'\n",
        ),
        (&["validate", "-o", "json", "cdi"], "{\n"),
    ];
    for (args, first) in cases {
        // Make sure the output would not fit in the pipe.
        let full = cdigen(dir.path()).args(args).output().unwrap();
        assert!(full.status.success(), "{args:?}");
        assert!(
            full.stdout.len() > 64 * 1024,
            "{args:?}: {}",
            full.stdout.len()
        );

        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_cdigen"))
            .args(args)
            .current_dir(dir.path())
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut reader = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        assert_eq!(line, first, "{args:?}");
        drop(reader);
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err, "", "{args:?}");
        assert_eq!(out.status.code(), Some(0), "{args:?}");
    }
}

/// A user directory that does not exist is skipped, whether it is the
/// default or given (`--templates`, `CDIGEN_TEMPLATES`, and the same for the
/// generators): a DaemonSet or a unit may name a host directory that only
/// some hosts have. One that exists but is no directory is an error that
/// names it.
#[test]
fn missing_templates_and_generators_dirs_are_skipped_given_or_not() {
    let dir = TempDir::new().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/example/root");
    let expected = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/example/expected/cdi");
    let root = root.to_str().unwrap();
    let generate = |out: &str, args: &[&str], env: &[(&str, &str)]| {
        let mut cmd = cdigen(dir.path());
        cmd.args(["generate", "-vv", "--root", root, "--output-dir", out])
            .args(args)
            .env("CDIGEN_DEVINFO_DIR", format!("{out}-devinfo"))
            .env_remove("CDIGEN_GENERATORS")
            .env_remove("CDIGEN_TEMPLATES");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        (
            out.status.code().unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let flags = ["--generators", "no-gens", "--templates", "no-tpl"];
    let env = [
        ("CDIGEN_GENERATORS", "no-gens"),
        ("CDIGEN_TEMPLATES", "no-tpl"),
    ];
    for (out, args, env) in [("flags", &flags[..], &[][..]), ("env", &[], &env[..])] {
        let (code, err) = generate(out, args, env);
        assert_eq!(code, 0, "{out}: {err}");
        for line in [
            "no-gens: no such directory: no user generator definitions",
            "no-tpl: no such directory: no user templates",
        ] {
            assert!(err.contains(line), "{out}: {err}");
        }
        // What the built-in definitions write for this machine.
        let cdi = dir.path().join(out);
        let mut names: Vec<String> = std::fs::read_dir(&cdi)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| !n.starts_with('.'))
            .collect();
        names.sort();
        assert!(!names.is_empty(), "{out}");
        for name in &names {
            assert_eq!(
                std::fs::read_to_string(cdi.join(name)).unwrap(),
                std::fs::read_to_string(expected.join(name)).unwrap(),
                "{out}: {name}"
            );
        }
        assert_eq!(names.len(), std::fs::read_dir(&expected).unwrap().count());
    }

    // A file where a directory is expected: an error naming it, nothing written.
    write(dir.path(), "tpl-file", "");
    let (code, err) = generate(
        "file",
        &["--generators", "no-gens", "--templates", "tpl-file"],
        &[],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.ends_with("cdigen: cannot read tpl-file: Not a directory (os error 20)\n"),
        "{err}"
    );
    assert!(!dir.path().join("file").exists());
}

// --- untrusted spec files: symlinks, file types, names, YAML 1.1 -------------

/// Runs the binary with a time limit (a FIFO read would hang it); returns
/// (exit code, stdout, stderr), decoded lossily.
fn run_bounded(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = cdigen(dir)
        .args(args)
        .timeout(std::time::Duration::from_secs(30))
        .output()
        .unwrap();
    (
        out.status.code().expect("exited in time, not killed"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A shadow file's line: a YAML map whose one key holds the hash.
const SHADOW: &str = "root:$6$SeCrEtHaSh$Zq/9:19000:0:99999:7:::\nbin:*:19000:0:99999:7:::\n";

#[test]
fn symlinked_spec_to_a_secret_is_read_but_its_content_never_echoed() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "secret/shadow", SHADOW);
    write(dir.path(), "secret/token", "\"SeCrEtHaSh\"\n");
    std::fs::create_dir(dir.path().join("cdi")).unwrap();
    for (link, target) in [
        ("cdi/a.yaml", "../secret/shadow"),
        ("cdi/b.json", "../secret/shadow"),
        ("cdi/c.json", "../secret/token"),
        ("cdi/d.yaml", "../secret/token"),
    ] {
        std::os::unix::fs::symlink(target, dir.path().join(link)).unwrap();
    }
    let (code, out, err) = run_bounded(dir.path(), &["validate", "cdi"]);
    assert_eq!(
        out,
        "cdi/a.yaml: error: invalid YAML: unknown field (not shown: not a name), expected one \
         of cdiVersion, kind, annotations, devices, containerEdits\n\
         cdi/b.json: error: invalid JSON: expected value at line 1 column 1\n\
         cdi/c.json: error: invalid JSON: expected a map, found a string\n\
         cdi/d.yaml: error: invalid YAML: expected a map, found a string\n\
         4 files checked: 4 errors, 0 warnings\n"
    );
    assert_eq!((code, err.as_str()), (1, ""));
    let (code, out, err) = run_bounded(dir.path(), &["validate", "-o", "json", "cdi"]);
    assert!(!out.contains("SeCrEt"), "{out}");
    assert_eq!((code, err.as_str()), (1, ""));
    let (code, out, err) = run_bounded(dir.path(), &["list", "--spec-dir", "cdi"]);
    assert_eq!(out, "");
    assert!(!err.contains("SeCrEt"), "{err}");
    assert_eq!(
        err.lines().next(),
        Some(
            "cdigen: cdi/a.yaml: invalid YAML: unknown field (not shown: not a name), expected \
             one of cdiVersion, kind, annotations, devices, containerEdits"
        )
    );
    assert_eq!(code, 0);
}

#[test]
fn symlinked_spec_is_followed_only_to_a_regular_file() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "real/gpu.json", GPU_JSON);
    std::fs::create_dir_all(dir.path().join("cdi")).unwrap();
    std::fs::create_dir_all(dir.path().join("real/dir")).unwrap();
    let fifo = dir.path().join("real/fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    for (link, target) in [
        ("cdi/a-ok.json", "../real/gpu.json"),
        ("cdi/b-fifo.json", "../real/fifo"),
        ("cdi/c-dir.yaml", "../real/dir"),
        ("cdi/d-gone.json", "../real/missing.json"),
        ("cdi/e-dev.yaml", "/dev/zero"),
    ] {
        std::os::unix::fs::symlink(target, dir.path().join(link)).unwrap();
    }
    // A FIFO with a spec name, not through a symlink; a real subdirectory
    // with one is skipped, as runtimes skip it.
    let made = std::process::Command::new("mkfifo")
        .arg(dir.path().join("cdi/f-fifo.yaml"))
        .status()
        .unwrap();
    assert!(made.success());
    std::fs::create_dir(dir.path().join("cdi/g-sub.json")).unwrap();
    let (code, out, err) = run_bounded(dir.path(), &["validate", "cdi"]);
    assert_eq!(
        out,
        "cdi/a-ok.json: ok (2 devices)\n\
         cdi/b-fifo.json: error: a symbolic link to a FIFO, not a regular file: not opening it\n\
         cdi/c-dir.yaml: error: a symbolic link to a directory, not a regular file: not \
         opening it\n\
         cdi/d-gone.json: error: cannot read: a symbolic link whose target does not exist\n\
         cdi/e-dev.yaml: error: a symbolic link to a character device, not a regular file: \
         not opening it\n\
         cdi/f-fifo.yaml: error: a FIFO, not a regular file: not opening it\n\
         6 files checked: 5 errors, 0 warnings\n"
    );
    assert_eq!((code, err.as_str()), (1, ""));
    let (code, out, err) = run_bounded(dir.path(), &["list", "--spec-dir", "cdi"]);
    assert_eq!(out, "example.com/gpu=gpu2\nexample.com/gpu=gpu10\n");
    assert_eq!(
        err,
        "cdigen: cdi/b-fifo.json: a symbolic link to a FIFO, not a regular file: not opening it\n\
         cdigen: cdi/c-dir.yaml: a symbolic link to a directory, not a regular file: not \
         opening it\n\
         cdigen: cdi/d-gone.json: cannot read: a symbolic link whose target does not exist\n\
         cdigen: cdi/e-dev.yaml: a symbolic link to a character device, not a regular file: \
         not opening it\n\
         cdigen: cdi/f-fifo.yaml: a FIFO, not a regular file: not opening it\n"
    );
    assert_eq!(code, 0);
    // Named on its own, a FIFO is not opened either.
    let (code, out, _) = run_bounded(dir.path(), &["validate", "cdi/f-fifo.yaml"]);
    assert_eq!(
        out,
        "cdi/f-fifo.yaml: error: a FIFO, not a regular file: not opening it\n\
         1 file checked: 1 error, 0 warnings\n"
    );
    assert_eq!(code, 1);
}

#[test]
fn spec_with_a_non_utf8_name_is_loaded_and_printed_lossily() {
    use std::os::unix::ffi::OsStrExt;
    let dir = TempDir::new().unwrap();
    std::fs::create_dir(dir.path().join("cdi")).unwrap();
    let name = std::ffi::OsStr::from_bytes(b"gpu\xff.json");
    std::fs::write(dir.path().join("cdi").join(name), GPU_JSON).unwrap();
    // The same device in a second file: runtimes drop both.
    write(
        dir.path(),
        "cdi/other.yaml",
        "cdiVersion: \"0.3.0\"\nkind: example.com/gpu\ndevices:\n  - name: gpu2\n    \
         containerEdits:\n      env: [\"A=1\"]\n",
    );
    let (code, out, err) = run_bounded(dir.path(), &["validate", "cdi"]);
    assert_eq!(
        out,
        "cdi/gpu\\xff.json: error: device \"example.com/gpu=gpu2\": also defined in \
         cdi/other.yaml in the same directory: runtimes drop every definition of a \
         conflicting device\n\
         cdi/other.yaml: error: device \"example.com/gpu=gpu2\": also defined in \
         cdi/gpu\\xff.json in the same directory: runtimes drop every definition of a \
         conflicting device\n\
         2 files checked: 2 errors, 0 warnings\n"
    );
    assert_eq!((code, err.as_str()), (1, ""));
    let (code, out, _) = run_bounded(dir.path(), &["validate", "-o", "json", "cdi"]);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["files"][0]["path"], "cdi/gpu\u{fffd}.json");
    assert_eq!(code, 1);
    let (code, out, _) = run_bounded(dir.path(), &["list", "--spec-dir", "cdi", "-o", "json"]);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        doc,
        serde_json::json!([{"name": "example.com/gpu=gpu10", "path": "cdi/gpu\u{fffd}.json"}])
    );
    assert_eq!(code, 0);
}

#[test]
fn yaml_is_read_as_runtimes_read_it_yaml_1_1() {
    let dir = TempDir::new().unwrap();
    write(
        dir.path(),
        "cdi/on.yaml",
        "cdiVersion: \"0.6.0\"\nkind: example.com/sw\ndevices:\n  - name: on\n    \
         containerEdits:\n      env: [\"A=1\"]\n",
    );
    write(
        dir.path(),
        "cdi/yes.yaml",
        "cdiVersion: \"0.6.0\"\nkind: example.com/ann\nannotations: {x: yes}\ndevices:\n  \
         - name: \"a\"\n    containerEdits:\n      env: [\"A=1\"]\n",
    );
    // Quoted, the same words are strings; a plain octal number where a
    // number belongs is what runtimes read (0644 = 420).
    write(
        dir.path(),
        "cdi/quoted.yaml",
        "cdiVersion: \"0.6.0\"\nkind: example.com/ok\nannotations: {x: \"yes\"}\ndevices:\n  \
         - name: 'on'\n    containerEdits:\n      deviceNodes:\n        - path: /dev/x\n          \
         fileMode: 0644\n",
    );
    let (code, out, err) = run_bounded(dir.path(), &["validate", "cdi"]);
    assert_eq!(
        out,
        "cdi/on.yaml: error: invalid YAML: devices[0].name: unquoted on is a boolean in YAML \
         1.1, which runtimes read: they see \"true\"; quote it\n\
         cdi/quoted.yaml: ok (1 device)\n\
         cdi/yes.yaml: error: invalid YAML: annotations.x: unquoted yes is a boolean in YAML \
         1.1, which runtimes read: they see \"true\"; quote it\n\
         3 files checked: 2 errors, 0 warnings\n"
    );
    assert_eq!((code, err.as_str()), (1, ""));
    let (code, out, err) = run_bounded(dir.path(), &["list", "--spec-dir", "cdi"]);
    assert_eq!(out, "example.com/ok=on\n");
    assert_eq!(
        err,
        "cdigen: cdi/on.yaml: invalid YAML: devices[0].name: unquoted on is a boolean in YAML \
         1.1, which runtimes read: they see \"true\"; quote it\n\
         cdigen: cdi/yes.yaml: invalid YAML: annotations.x: unquoted yes is a boolean in YAML \
         1.1, which runtimes read: they see \"true\"; quote it\n"
    );
    assert_eq!(code, 0);
}

/// A cdigen run from a build directory (as this test's is) or a download
/// never writes its own path into a spec's hooks: that file moves or
/// goes, and someone other than root may change it. The hooks name the
/// package's /usr/bin/cdigen-hook, and a warning says so; --hook-path
/// chooses.
#[test]
fn generate_from_a_build_directory_names_the_installed_hook_and_warns() {
    let dir = TempDir::new().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/example/root");
    let exe = Path::new(env!("CARGO_BIN_EXE_cdigen"))
        .canonicalize()
        .unwrap();
    let generate = |out: &str, hook_path: Option<&str>| {
        let mut cmd = cdigen(dir.path());
        cmd.env_remove("CDIGEN_HOOK_PATH")
            .env(
                "CDIGEN_DEVINFO_DIR",
                dir.path().join(format!("{out}-devinfo")),
            )
            .args([
                "generate",
                "--root",
                root.to_str().unwrap(),
                "--output-dir",
                out,
            ]);
        if let Some(p) = hook_path {
            cmd.args(["--hook-path", p]);
        }
        let o = cmd.output().unwrap();
        let spec =
            std::fs::read_to_string(dir.path().join(out).join("nvidia.com-gpu.yaml")).unwrap();
        (o.status.code(), String::from_utf8(o.stderr).unwrap(), spec)
    };
    let (code, err, spec) = generate("cdi", None);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        spec.matches("path: '/usr/bin/cdigen-hook'\n").count(),
        4,
        "{spec}"
    );
    let build_dir = exe.parent().unwrap().display().to_string();
    assert!(!spec.contains(&build_dir), "{spec}");
    let warning = format!(
        "cdigen runs from {}, not from an installed location (/usr/bin, /usr/sbin, /usr/local/bin, \
         /usr/local/sbin, /bin, /sbin, /opt/cdigen/bin): the hooks of NVIDIA specs name \
         /usr/bin/cdigen-hook instead; give --hook-path (or CDIGEN_HOOK_PATH) to name another \
         installed, root-owned program\n",
        exe.display()
    );
    assert_eq!(err.matches(&warning).count(), 1, "{err}");
    // Chosen: no warning.
    let (code, err, spec) = generate("cdi2", Some("/opt/cdigen/bin/cdigen-hook"));
    assert_eq!((code, err.as_str()), (Some(0), ""));
    assert_eq!(
        spec.matches("path: '/opt/cdigen/bin/cdigen-hook'\n")
            .count(),
        4,
        "{spec}"
    );
    assert!(!spec.contains("/usr/bin/cdigen-hook"), "{spec}");
}

/// A run that finds the output directory locked by another says so after
/// a second, naming the lock file and the PID the holder wrote in it, and
/// with --lock-timeout gives up with exit status 3 and a message.
#[test]
fn generate_waiting_for_the_lock_says_who_holds_it_and_times_out() {
    use std::io::Write as _;
    let dir = TempDir::new().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/example/root");
    let out = dir.path().join("cdi");
    std::fs::create_dir(&out).unwrap();
    let lock_path = out.join(".cdigen.lock");
    let mut lock = std::fs::File::create(&lock_path).unwrap();
    lock.lock().unwrap();
    writeln!(lock, "{}", std::process::id()).unwrap();
    let generate = |timeout: &str| {
        let started = std::time::Instant::now();
        let o = cdigen(dir.path())
            .env("CDIGEN_DEVINFO_DIR", dir.path().join("devinfo"))
            .args(["generate", "--root", root.to_str().unwrap(), "--output-dir"])
            .arg(&out)
            .args(["--lock-timeout", timeout])
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8(o.stderr).unwrap(),
            started.elapsed(),
        )
    };
    let (code, err, took) = generate("2s");
    assert_eq!(code, Some(3), "{err}");
    assert!(took >= std::time::Duration::from_secs(2), "{took:?}");
    let waiting = format!(
        "waiting for the lock {}, held by PID {} (another cdigen run writing {}): waiting for up to 2s\n",
        lock_path.display(),
        std::process::id(),
        out.display()
    );
    assert_eq!(err.matches(&waiting).count(), 1, "{err}");
    assert!(
        err.ends_with(&format!(
            "cdigen: cannot write to {}: timed out after 2s waiting for the lock {}, held by PID {} (another cdigen run writing {}; --lock-timeout)\n",
            out.display(),
            lock_path.display(),
            std::process::id(),
            out.display()
        )),
        "{err}"
    );
    // Under a second it says nothing until it gives up.
    let (code, err, _) = generate("300ms");
    assert_eq!(code, Some(3), "{err}");
    assert_eq!(
        err,
        format!(
            "cdigen: cannot write to {}: timed out after 300ms waiting for the lock {}, held by PID {} (another cdigen run writing {}; --lock-timeout)\n",
            out.display(),
            lock_path.display(),
            std::process::id(),
            out.display()
        )
    );
    // Released: the run goes through.
    drop(lock);
    let (code, err, _) = generate("2s");
    assert_eq!((code, err.as_str()), (Some(0), ""));
    // It wrote its PID in the lock file (its own, not this test's).
    let pid = std::fs::read_to_string(&lock_path).unwrap();
    assert!(
        pid.ends_with('\n') && pid.trim().parse::<u32>().is_ok(),
        "{pid:?}"
    );
    assert_ne!(pid, format!("{}\n", std::process::id()));
}

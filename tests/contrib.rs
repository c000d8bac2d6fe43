//! The files for running cdigen the ways users do (`contrib/`, `deploy/`):
//! the driver-install hook, run for real on a fixture machine, and the
//! agreement of the systemd units, the udev rule and the Kubernetes
//! DaemonSet with the binary's defaults (where it writes) and with each
//! other. The units, the rule and the manifests are also checked by their
//! own tools in CI (`.ci/check-*.sh`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[path = "support/machine.rs"]
mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use support::visible_names;
use tempfile::TempDir;

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn read(rel: &str) -> String {
    fs::read_to_string(repo(rel)).unwrap()
}

/// Runs the hook with the fixture machine `example` as the host, a fake
/// `logger` that records its arguments, and output in a temp dir:
/// (temp dir, exit code, stderr, what was logged).
fn hook(args: &[&str]) -> (TempDir, i32, String, String) {
    let tmp = TempDir::new().unwrap();
    let bin = tmp.path().join("bin");
    fs::create_dir(&bin).unwrap();
    let log = tmp.path().join("logger.log");
    let logger = bin.join("logger");
    fs::write(
        &logger,
        format!("#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\n", log.display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    fs::set_permissions(&logger, fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let out = Command::new("sh")
        .arg(repo("contrib/hooks/cdigen-driver-hook"))
        .args(args)
        .env("PATH", path)
        .env("CDIGEN", env!("CARGO_BIN_EXE_cdigen"))
        .env("CDIGEN_ROOT", repo("fixtures/example/root"))
        .env("CDIGEN_HOOK_OUTPUT_DIR", tmp.path().join("cdi"))
        .env("CDIGEN_DEVINFO_DIR", tmp.path().join("devinfo"))
        .env("CDIGEN_GENERATORS", "/nonexistent-cdigen-user-generators")
        .env_remove("CDIGEN_TEMPLATES")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let logged = fs::read_to_string(&log).unwrap_or_default();
    (
        tmp,
        out.status.code().unwrap(),
        String::from_utf8(out.stderr).unwrap(),
        logged,
    )
}

#[test]
fn hook_writes_the_named_generators_specs_and_logs() {
    let (tmp, code, stderr, logged) = hook(&["nvidia", "vfio"]);
    assert_eq!(code, 0, "{stderr}");
    let cdi = tmp.path().join("cdi");
    assert_eq!(
        visible_names(&cdi),
        ["cdigen.io-vfio.yaml", "nvidia.com-gpu.yaml"]
    );
    // The same specs generate writes for the whole machine.
    for name in visible_names(&cdi) {
        assert_eq!(
            fs::read_to_string(cdi.join(&name)).unwrap(),
            read(&format!("fixtures/example/expected/cdi/{name}")),
            "{name}"
        );
    }
    let msg = format!("CDI specs in {} are current", cdi.display());
    assert!(stderr.contains(&format!("cdigen-hook: {msg}")), "{stderr}");
    assert_eq!(logged, format!("-t cdigen-hook -p user.info -- {msg}\n"));
}

#[test]
fn hook_passes_on_cdigens_failure_and_logs_it() {
    let (tmp, code, stderr, logged) = hook(&["no-such-generator"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("cdigen: unknown generator \"no-such-generator\""),
        "{stderr}"
    );
    assert_eq!(
        logged,
        "-t cdigen-hook -p user.err -- cdigen generate failed (exit 2)\n"
    );
    assert!(visible_names(&tmp.path().join("cdi")).is_empty());
}

/// `Key=value` lines of a unit file, in order.
fn unit_values(unit: &str, key: &str) -> Vec<String> {
    read(&format!("contrib/systemd/{unit}"))
        .lines()
        .filter_map(|l| l.strip_prefix(&format!("{key}=")))
        .map(String::from)
        .collect()
}

/// A default output directory as the units name it (`/var/run` is a
/// symlink to `/run`; systemd wants the real path).
fn run_path(dir: &str) -> String {
    dir.replacen("/var/run/", "/run/", 1)
}

#[test]
fn units_can_write_where_cdigen_writes_by_default() {
    let dirs = [
        run_path(cdigen::cdi::DYNAMIC_DIR),
        run_path(cdigen::devinfo::DP_DIR),
    ];
    for unit in ["cdigen-generate.service", "cdigen-watch.service"] {
        let rw = unit_values(unit, "ReadWritePaths");
        assert_eq!(rw, [dirs.join(" ")], "{unit}");
        // Created before the sandbox is set up (a missing ReadWritePaths=
        // entry fails the unit).
        assert_eq!(
            unit_values(unit, "ExecStartPre"),
            [format!("+mkdir -p {}", dirs.join(" "))],
            "{unit}"
        );
        // The packaged binary, with the defaults (no --output-dir).
        let start = unit_values(unit, "ExecStart");
        assert_eq!(start.len(), 1, "{unit}");
        assert!(
            start[0].starts_with("/usr/bin/cdigen "),
            "{unit}: {start:?}"
        );
        assert!(!start[0].contains("--output-dir"), "{unit}: {start:?}");
        assert_eq!(unit_values(unit, "CapabilityBoundingSet"), [""], "{unit}");
    }
    assert_eq!(
        unit_values("cdigen-generate.path", "Unit"),
        ["cdigen-generate.service"]
    );
}

#[test]
fn the_udev_rule_starts_the_generate_unit() {
    let rule = read("contrib/udev/99-cdigen.rules");
    let wants: Vec<&str> = rule
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split("ENV{SYSTEMD_WANTS}+=\"").nth(1))
        .map(|rest| rest.split('"').next().unwrap())
        .collect();
    assert_eq!(wants, ["cdigen-generate.service"]);
    assert!(rule.contains("RUN+=\"/usr/bin/systemctl --no-block start cdigen-generate.service\""));
    assert!(repo("contrib/systemd/cdigen-generate.service").is_file());
}

#[test]
fn the_daemonset_writes_where_cdigen_writes_by_default() {
    let ds = read("deploy/kubernetes/daemonset.yaml");
    for dir in [cdigen::cdi::DYNAMIC_DIR, cdigen::devinfo::DP_DIR] {
        // Mounted from the same host path at the same container path, and
        // the only writable host paths (the others are readOnly).
        assert!(ds.contains(&format!("mountPath: {dir}\n")), "{dir}");
        assert!(ds.contains(&format!("path: {dir}\n")), "{dir}");
    }
    assert!(ds.contains(&format!("--output-dir={}\n", cdigen::cdi::DYNAMIC_DIR)));
    assert!(ds.contains(&format!("--devinfo-dir={}\n", cdigen::devinfo::DP_DIR)));
    // The readiness probe looks for the file watch is told to create.
    assert!(ds.contains("- --ready-file=/run/cdigen/ready\n"));
    assert!(ds.contains(r#"command: ["test", "-e", "/run/cdigen/ready"]"#));
    assert!(ds.contains("mountPath: /run/cdigen\n"));
    // The host root is read-only, recursively where possible.
    assert!(ds.contains("mountPath: /host\n              readOnly: true\n"));
    assert!(ds.contains("capabilities:\n              drop: [\"ALL\"]"));
}

//! Every device of every fixture machine, in a real container: the golden
//! specs are injected by the official CDI Go library and runc starts the
//! container (`../shared/tools/cdi-check/run-in-container.sh`, over a fake
//! host tree made from the fixture's `dev.manifest` and driver tree), and
//! inside it each device node is checked for its type and numbers, each
//! variable for its value and each mount (the `/dev/.../by-path` links, the
//! driver's files) for being there.
//!
//! Needs root and runc (the script installs it): ignored by default, run by
//! `.ci/run` with `--ignored`. Without `../shared` it says so and passes,
//! unless `CDIGEN_REQUIRE_SHARED=1`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use cdigen::cdi::{self, ContainerEdits, Format};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// What a device's edits (with the spec's own) should give the container,
/// and the shell lines that print what it got, one line per item.
fn expectations(spec: &ContainerEdits, device: &ContainerEdits) -> (Vec<String>, Vec<String>) {
    let mut want = BTreeSet::new();
    let mut script = Vec::new();
    for e in [spec, device] {
        for n in &e.device_nodes {
            let what = match n.node_type.as_str() {
                "b" => "block special file",
                _ => "character special file",
            };
            if n.node_type.is_empty() {
                // No numbers in the spec: the library takes the host's.
                want.insert(format!("node {} {what}", n.path));
                script.push(format!(
                    "echo \"node {} $(stat -c '%F' {})\"",
                    n.path, n.path
                ));
            } else {
                want.insert(format!(
                    "node {} {what} {:x} {:x}",
                    n.path, n.major, n.minor
                ));
                script.push(format!(
                    "echo \"node {} $(stat -c '%F %t %T' {})\"",
                    n.path, n.path
                ));
            }
        }
        for v in &e.env {
            let (k, _) = v.split_once('=').unwrap();
            want.insert(format!("env {v}"));
            script.push(format!("echo \"env {k}=${{{k}}}\""));
        }
        for m in &e.mounts {
            want.insert(format!("mount {}", m.container_path));
            script.push(format!(
                "test -e '{0}' && echo 'mount {0}' || echo 'mount {0} missing'",
                m.container_path
            ));
        }
    }
    (want.into_iter().collect(), script)
}

/// The fake host of `machine`: its `dev.manifest`, and its driver tree
/// where the goldens were made from (`/run/nvidia/driver`).
fn host_overlay(machine: &Path, into: &Path) {
    fs::create_dir_all(into).unwrap();
    fs::copy(machine.join("root/dev.manifest"), into.join("dev.manifest")).unwrap();
    let driver = machine.join("driver-root");
    if driver.is_dir() {
        fs::create_dir_all(into.join("run/nvidia")).unwrap();
        let ok = Command::new("cp")
            .arg("-a")
            .arg(&driver)
            .arg(into.join("run/nvidia/driver"))
            .status()
            .unwrap()
            .success();
        assert!(ok);
    }
}

#[test]
#[ignore = "needs root and runc: .ci/run runs it"]
fn every_fixture_device_works_in_a_real_container() {
    let script = repo().join("../shared/tools/cdi-check/run-in-container.sh");
    if !script.is_file() {
        assert!(
            std::env::var_os("CDIGEN_REQUIRE_SHARED").is_none(),
            "no {} (CDIGEN_REQUIRE_SHARED is set)",
            script.display()
        );
        eprintln!("skipped: no ../shared/tools/cdi-check/run-in-container.sh beside the crate");
        return;
    }
    let tmp = tempfile::TempDir::new().unwrap();
    let mut machines: Vec<PathBuf> = fs::read_dir(repo().join("fixtures"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("expected/cdi").is_dir() && p.join("root/dev.manifest").is_file())
        .collect();
    machines.sort();
    let mut checked = 0;
    let mut failures = Vec::new();
    for m in &machines {
        let name = m.file_name().unwrap().to_string_lossy().into_owned();
        let host = tmp.path().join(&name);
        host_overlay(m, &host);
        let specs = m.join("expected/cdi");
        let mut files: Vec<PathBuf> = fs::read_dir(&specs)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| Format::from_path(p).is_some())
            .collect();
        files.sort();
        for f in files {
            let spec =
                cdi::codec::parse(&fs::read(&f).unwrap(), Format::from_path(&f).unwrap()).unwrap();
            for d in &spec.devices {
                let device = format!("{}={}", spec.kind, d.name);
                let (want, lines) = expectations(&spec.container_edits, &d.container_edits);
                let out = Command::new("bash")
                    .arg(&script)
                    .arg("--host-overlay")
                    .arg(&host)
                    .arg(&specs)
                    .arg(&device)
                    .args(["--", "sh", "-c", &lines.join("\n")])
                    .output()
                    .unwrap();
                let stdout = String::from_utf8_lossy(&out.stdout);
                let got: BTreeSet<String> = stdout
                    .lines()
                    .filter(|l| !l.starts_with("run-in-container:"))
                    .map(str::to_string)
                    .collect();
                let missing: Vec<&String> = want.iter().filter(|w| !got.contains(*w)).collect();
                let ran = stdout.contains("run-in-container: exit 0");
                if !out.status.success() || !ran || !missing.is_empty() {
                    failures.push(format!(
                        "{name}: {device}: missing {missing:?}\n{stdout}{}",
                        String::from_utf8_lossy(&out.stderr)
                    ));
                }
                checked += 1;
            }
        }
    }
    eprintln!(
        "{checked} devices of {} machines checked in containers",
        machines.len()
    );
    assert!(checked > 50, "only {checked} devices checked");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

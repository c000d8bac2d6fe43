//! Every device of every fixture machine, in a real container, in both
//! image layouts (Debian's `/usr/lib/x86_64-linux-gnu`, and RHEL's
//! `/usr/lib64`): specs are generated for the machine with the hooks
//! pointing at this build's `cdigen-hook`, checked to be the goldens but for
//! that path, injected by the Rust CDI library, and runc starts the
//! container (`../shared/tools/cdi-check/run-in-container.sh`, over a fake
//! host tree made from the fixture's `dev.manifest` and driver tree). The
//! hooks run for real (`cdigen hook`, the host's `ldconfig`). Inside, it
//! checks:
//!
//! - each device node's type and numbers, each variable's value, each
//!   mount (the `/dev/.../by-path` links, the driver's files);
//! - for NVIDIA, each link the hooks were to make, and that every driver
//!   library of a linker-cache folder **loads** by its soname (`dlopen`),
//!   that `ldconfig -p` lists it, that the development links
//!   (`libcuda.so`) load, and that the application profile names the
//!   container's GPUs.
//!
//! The fixture machines' driver trees cover the host layouts: Debian with
//! a cache (dgx-8gpu, example, no-uvm), RHEL's `/usr/lib64` (old-driver),
//! NixOS's `lib/` without a cache (h100-vm), and a tree nothing ran
//! `ldconfig` on (missing-node).
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

/// Where the fixture machines' driver trees go (as in tests/fixtures.rs).
const DRIVER_ROOT: &str = "run/nvidia/driver";

/// The value of each `--NAME` argument of the hooks `step` of `e`.
fn hook_args(e: &ContainerEdits, step: &str, flag: &str) -> Vec<String> {
    let mut out = Vec::new();
    for h in e
        .hooks
        .iter()
        .filter(|h| h.args.get(2).map(String::as_str) == Some(step))
    {
        let mut it = h.args.iter();
        while let Some(a) = it.next() {
            if a == flag {
                out.push(it.next().unwrap().clone());
            }
        }
    }
    out
}

/// What a device's edits (with the spec's own) should give the container,
/// and the shell lines that print what it got, one line per item. `host`
/// is the fake host tree (for the sonames of the driver's libraries).
fn expectations(
    spec: &ContainerEdits,
    device: &ContainerEdits,
    host: &Path,
) -> (Vec<String>, Vec<String>) {
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
        // The links the hooks make, and what they are for.
        let mut libs = BTreeSet::new();
        for link in hook_args(e, "create-symlinks", "--link") {
            let (_, path) = link.split_once("::").unwrap();
            want.insert(format!("link {path}"));
            script.push(format!(
                "test -L '{0}' -a -e '{0}' && echo 'link {0}' || echo 'link {0} missing'",
                path
            ));
            let name = Path::new(path).file_name().unwrap().to_str().unwrap();
            // Development links (libcuda.so) are what Triton and
            // torch.compile open.
            if name.ends_with(".so") && !path.contains("/gbm/") {
                libs.insert(name.to_string());
            }
        }
        // Every library of a cache folder: by soname, through the cache.
        let folders = hook_args(e, "update-ldcache", "--folder");
        for m in &e.mounts {
            let dir = Path::new(&m.container_path).parent().unwrap();
            if !folders.iter().any(|f| Path::new(f) == dir) {
                continue;
            }
            let file = host.join(m.host_path.trim_start_matches('/'));
            let Ok(f) = fs::File::open(&file) else {
                continue;
            };
            if let Ok(lib) = cdigen::elf::read(&f)
                && let Some(soname) = lib.soname
            {
                want.insert(format!("ldcache {soname}"));
                script.push(format!(
                    "ldconfig -p | grep -q '^[[:space:]]{soname} (' && echo 'ldcache {soname}' || echo 'ldcache {soname} missing'"
                ));
                libs.insert(soname);
            }
        }
        for l in libs {
            want.insert(format!("dlopen {l} OK"));
            script.push(format!("dlprobe {l}"));
        }
    }
    // The application profile names the container's GPUs (bit N for
    // /dev/nvidiaN's minor N).
    if [spec, device].iter().any(|e| {
        e.hooks
            .iter()
            .any(|h| h.args.get(2).map(String::as_str) == Some("update-application-profile"))
    }) {
        let mask = [spec, device]
            .iter()
            .flat_map(|e| &e.device_nodes)
            .filter(|n| {
                n.path
                    .strip_prefix("/dev/nvidia")
                    .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
            })
            .fold(0u64, |m, n| m | 1 << n.minor);
        want.insert(if mask == 0 {
            "profile none".to_string()
        } else {
            format!("profile EGLVisibleDGPUDevices\",0x{mask:x}")
        });
        script.push(
            "echo \"profile $(grep -o 'EGLVisibleDGPUDevices\",0x[0-9a-f]*' \
             /etc/nvidia/nvidia-application-profiles-rc.d/10-cdigen-container.conf 2>/dev/null || echo none)\""
                .to_string(),
        );
    }
    (want.into_iter().collect(), script)
}

fn cp(from: &Path, to: &Path) {
    fs::create_dir_all(to.parent().unwrap()).unwrap();
    let ok = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap()
        .success();
    assert!(ok, "cp -a {}", from.display());
}

/// The fake host of `machine`: its `dev.manifest`, and its driver tree
/// where the specs are made from.
fn host_overlay(machine: &Path, into: &Path) {
    fs::create_dir_all(into).unwrap();
    fs::copy(machine.join("root/dev.manifest"), into.join("dev.manifest")).unwrap();
    let driver = machine.join("root").join(DRIVER_ROOT);
    if driver.is_dir() {
        cp(&driver, &into.join(DRIVER_ROOT));
    }
}

/// Generates `machine`'s specs into `out` with hooks that run this
/// build's cdigen-hook, and checks they are the goldens but for that path.
fn specs(machine: &Path, work: &Path, out: &Path) {
    let bin = env!("CARGO_BIN_EXE_cdigen-hook");
    let run = Command::new(env!("CARGO_BIN_EXE_cdigen"))
        .args(["generate", "--root"])
        .arg(machine.join("root"))
        .args(["--hook-path", bin])
        .arg("--output-dir")
        .arg(out)
        .arg("--devinfo-dir")
        .arg(work.join("devinfo"))
        .env("CDIGEN_GENERATORS", "/nonexistent-cdigen-user-generators")
        .env_remove("CDIGEN_TEMPLATES")
        .env_remove("CDIGEN_LIBRARY_SEARCH_PATH")
        .env_remove("CDIGEN_DRIVER_ROOT")
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}: {}",
        machine.display(),
        String::from_utf8_lossy(&run.stderr)
    );
    for e in fs::read_dir(machine.join("expected/cdi")).unwrap() {
        let golden = e.unwrap().path();
        if Format::from_path(&golden).is_none() {
            continue;
        }
        let ours = fs::read_to_string(out.join(golden.file_name().unwrap())).unwrap();
        let want = fs::read_to_string(&golden)
            .unwrap()
            .replace("'/usr/bin/cdigen-hook'", &format!("'{bin}'"));
        assert!(
            ours == want,
            "{}: generated differs from the golden but for the hook path",
            golden.display()
        );
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
    let mut loaded = 0;
    let mut failures = Vec::new();
    for m in &machines {
        let name = m.file_name().unwrap().to_string_lossy().into_owned();
        let host = tmp.path().join(&name).join("host");
        host_overlay(m, &host);
        let specs_dir = tmp.path().join(&name).join("cdi");
        specs(m, &tmp.path().join(&name), &specs_dir);
        // A machine with nothing to give (`empty`) gets no spec directory.
        let mut files: Vec<PathBuf> = fs::read_dir(&specs_dir)
            .map(|d| {
                d.map(|e| e.unwrap().path())
                    .filter(|p| Format::from_path(p).is_some())
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        for f in files {
            let spec =
                cdi::codec::parse(&fs::read(&f).unwrap(), Format::from_path(&f).unwrap()).unwrap();
            for d in &spec.devices {
                let device = format!("{}={}", spec.kind, d.name);
                let (want, lines) = expectations(&spec.container_edits, &d.container_edits, &host);
                for layout in ["debian", "lib64"] {
                    let out = Command::new("bash")
                        .arg(&script)
                        .args(["--layout", layout, "--host-overlay"])
                        .arg(&host)
                        .arg(&specs_dir)
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
                            "{name} ({layout} image): {device}: missing {missing:?}\n{stdout}{}",
                            String::from_utf8_lossy(&out.stderr)
                        ));
                    }
                    loaded += want.iter().filter(|w| w.starts_with("dlopen ")).count();
                    // What loads, per machine and image layout, for the
                    // first device of a spec with driver libraries.
                    if d.name == spec.devices[0].name
                        && want.iter().any(|w| w.starts_with("dlopen "))
                    {
                        let count = |p: &str, ok: &dyn Fn(&str) -> bool| {
                            let all: Vec<&String> =
                                want.iter().filter(|w| w.starts_with(p)).collect();
                            let got = all.iter().filter(|w| got.contains(**w) && ok(w)).count();
                            format!("{got}/{}", all.len())
                        };
                        eprintln!(
                            "{name} ({layout} image) {device}: dlopen by soname or link {}, in ldconfig -p {}, libcuda.so {}",
                            count("dlopen ", &|_| true),
                            count("ldcache ", &|_| true),
                            if got.contains("dlopen libcuda.so OK") {
                                "loads"
                            } else {
                                "does not load"
                            }
                        );
                    }
                    checked += 1;
                }
            }
        }
    }
    eprintln!(
        "{checked} device containers of {} machines in 2 image layouts; {loaded} library loads checked",
        machines.len()
    );
    assert!(checked > 100, "only {checked} device containers checked");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

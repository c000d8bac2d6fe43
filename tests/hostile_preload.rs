//! Hostile images against the NVIDIA hooks (CVE-2025-23266,
//! "NVIDIAScape"): a runtime runs a `createContainer` hook with no `env`
//! with the container's environment and the container's root as working
//! directory, so an image's `LD_PRELOAD=/proc/self/cwd/evil.so` (or
//! `LD_AUDIT`) had its library loaded into the hook, as root on the host.
//!
//! The image here is a CDI device of its own (`hostile.example/image`):
//! its `env` sets `LD_PRELOAD` or `LD_AUDIT` for the container, as an
//! image's `ENV` does, and it mounts `evil.so` into the container's root.
//! The library, built here with `cc`, writes a marker file into a host
//! directory (also mounted into the container) from wherever it is loaded:
//! a constructor for `LD_PRELOAD`, `la_version` for `LD_AUDIT`. runc starts
//! the container with cdigen's NVIDIA spec of the `example` machine and
//! that device (`../shared/tools/cdi-check/run-in-container.sh`); inside,
//! the driver libraries must load (`dlprobe`, run without those
//! variables), and no marker may appear:
//!
//! - with the spec as cdigen writes it (each hook has an `env`), whether
//!   the hook program is `cdigen` or the static `cdigen-hook`;
//! - with every hook's `env` removed (an older spec still on disk), when
//!   the hook program is the static `cdigen-hook` (no program interpreter:
//!   no loader reads those variables).
//!
//! A control run (no `env`, the dynamically linked `cdigen`) must leave a
//! marker: the harness does see a library loaded into a hook.
//!
//! Needs root, runc and a C compiler (the script installs runc), and
//! builds the static `cdigen-hook` (`cargo rustc --bin cdigen-hook -- -C
//! target-feature=+crt-static`): ignored by default, run by `.ci/run` with
//! `--ignored`. Without `../shared` it says so and passes, unless
//! `CDIGEN_REQUIRE_SHARED=1`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use cdigen::cdi::{self, Format};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The library a hostile image carries: it leaves a file in `markers`
/// from each process that loads it, named after how and by which program.
fn evil_library(work: &Path, markers: &Path) -> PathBuf {
    let src = work.join("evil.c");
    fs::write(
        &src,
        r#"#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
static void mark(const char *how) {
    char exe[256] = "", path[1024];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) exe[n] = 0;
    const char *base = strrchr(exe, '/');
    snprintf(path, sizeof path, "%s/%s-%d-%s", MARKERS, how, (int)getpid(), base ? base + 1 : "unknown");
    int fd = open(path, O_CREAT | O_WRONLY, 0644);
    if (fd >= 0) close(fd);
}
__attribute__((constructor)) static void preloaded(void) { mark("preload"); }
unsigned int la_version(unsigned int v) { mark("audit"); return v; }
"#,
    )
    .unwrap();
    let lib = work.join("evil.so");
    let out = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(format!("-DMARKERS=\"{}\"", markers.display()))
        .arg(&src)
        .output()
        .expect("cc runs");
    assert!(
        out.status.success(),
        "cc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    lib
}

/// Builds `cdigen-hook` statically (default features: the `udev` one
/// links libudev, which has no static archive) and copies it to `work`.
fn static_hook(work: &Path) -> PathBuf {
    let out = Command::new(env!("CARGO"))
        .current_dir(repo())
        .args([
            "rustc",
            "--bin",
            "cdigen-hook",
            "--message-format=json",
            "--",
            "-C",
            "target-feature=+crt-static",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo rustc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let exe = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["reason"] == "compiler-artifact" && v["target"]["name"] == "cdigen-hook")
        .find_map(|v| v["executable"].as_str().map(PathBuf::from))
        .expect("cargo names the executable");
    let dest = work.join("cdigen-hook");
    fs::copy(&exe, &dest).unwrap();
    fs::set_permissions(&dest, fs::Permissions::from_mode(0o755)).unwrap();
    dest
}

/// Whether the ELF executable at `path` has a program interpreter
/// (`PT_INTERP`): the dynamic loader that reads `LD_PRELOAD`.
fn has_interpreter(path: &Path) -> bool {
    let b = fs::read(path).unwrap();
    assert_eq!(&b[..4], b"\x7fELF");
    assert_eq!(b[4], 2, "64-bit");
    let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(b[0x20..0x28].try_into().unwrap()) as usize;
    let (size, count) = (u16_at(0x36), u16_at(0x38));
    assert!(count > 0, "no program headers");
    (0..count).any(|i| {
        let o = phoff + i * size;
        u32::from_le_bytes(b[o..o + 4].try_into().unwrap()) == 3
    })
}

fn markers_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The script, or `None` (said why) where `../shared` is missing.
fn script() -> Option<PathBuf> {
    let script = repo().join("../shared/tools/cdi-check/run-in-container.sh");
    if script.is_file() {
        return Some(script);
    }
    assert!(
        std::env::var_os("CDIGEN_REQUIRE_SHARED").is_none(),
        "no {} (CDIGEN_REQUIRE_SHARED is set)",
        script.display()
    );
    eprintln!("skipped: no ../shared/tools/cdi-check/run-in-container.sh beside the crate");
    None
}

#[test]
#[ignore = "builds the static hook and needs cc: .ci/run runs it"]
fn the_static_hook_has_no_interpreter_and_ignores_ld_preload_and_ld_audit() {
    let work = tempfile::tempdir().unwrap();
    let markers = work.path().join("markers");
    fs::create_dir(&markers).unwrap();
    let lib = evil_library(work.path(), &markers);
    let hook = static_hook(work.path());
    assert!(!has_interpreter(&hook), "{} is not static", hook.display());
    assert!(has_interpreter(Path::new(env!("CARGO_BIN_EXE_cdigen"))));
    let run = |program: &Path| {
        Command::new(program)
            .args(["hook", "update-ldcache", "--folder", "/usr/lib64"])
            .env("LD_PRELOAD", &lib)
            .env("LD_AUDIT", &lib)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let out = run(&hook);
    // It ran (and refused the empty state), loading nothing.
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).starts_with("cdigen hook update-ldcache: "),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(markers_in(&markers), Vec::<String>::new());
    // The control: the dynamically linked cdigen loads it both ways.
    run(Path::new(env!("CARGO_BIN_EXE_cdigen")));
    let got = markers_in(&markers);
    assert!(
        got.iter().any(|m| m.starts_with("preload-"))
            && got.iter().any(|m| m.starts_with("audit-")),
        "{got:?}"
    );
}

/// The NVIDIA specs of `machine` into `out`, hooks naming `hook`; with
/// `env: false`, every hook's `env` removed, as in a spec older than it.
fn nvidia_specs(machine: &Path, work: &Path, out: &Path, hook: &Path, env: bool) {
    let run = Command::new(env!("CARGO_BIN_EXE_cdigen"))
        .args(["generate", "--generator", "nvidia", "--root"])
        .arg(machine.join("root"))
        .arg("--hook-path")
        .arg(hook)
        .arg("--output-dir")
        .arg(out)
        .arg("--devinfo-dir")
        .arg(work.join("devinfo"))
        .env("CDIGEN_GENERATORS", "/nonexistent-cdigen-user-generators")
        .env("CDIGEN_NO_NVML", "1")
        .env_remove("CDIGEN_TEMPLATES")
        .env_remove("CDIGEN_LIBRARY_SEARCH_PATH")
        .env_remove("CDIGEN_DRIVER_ROOT")
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let path = out.join("nvidia.com-gpu.yaml");
    let mut spec = cdi::codec::parse(&fs::read(&path).unwrap(), Format::Yaml).unwrap();
    assert!(!spec.container_edits.hooks.is_empty());
    assert!(spec.container_edits.hooks.iter().all(|h| !h.env.is_empty()));
    if !env {
        for h in &mut spec.container_edits.hooks {
            h.env.clear();
        }
        fs::write(&path, cdi::codec::to_bytes(&spec, Format::Yaml).unwrap()).unwrap();
    }
}

/// The hostile image as a CDI device: its variables (`preload`, `audit`),
/// its `evil.so` in the container's root, the markers directory.
fn hostile_spec(dir: &Path, lib: &Path, markers: &Path) {
    let lib = lib.display().to_string();
    let markers = markers.display().to_string();
    let mounts = serde_json::json!([
        {"hostPath": lib, "containerPath": "/evil.so", "options": ["bind", "ro"]},
        {"hostPath": markers, "containerPath": markers, "options": ["bind", "rw"]},
    ]);
    // Through the working directory (the container's root, for a hook),
    // and by an absolute path on the host.
    let value = format!("/proc/self/cwd/evil.so:{lib}");
    let spec = serde_json::json!({
        "cdiVersion": "0.5.0",
        "kind": "hostile.example/image",
        "devices": [
            {"name": "preload", "containerEdits": {"env": [format!("LD_PRELOAD={value}")], "mounts": mounts}},
            {"name": "audit", "containerEdits": {"env": [format!("LD_AUDIT={value}")], "mounts": mounts}},
        ],
    });
    fs::write(dir.join("hostile.json"), spec.to_string()).unwrap();
}

#[test]
#[ignore = "needs root and runc: .ci/run runs it"]
fn hostile_images_load_nothing_into_the_hooks_and_the_driver_still_loads() {
    let Some(script) = script() else { return };
    let machine = repo().join("fixtures/example");
    let work = tempfile::tempdir().unwrap();
    let markers = work.path().join("markers");
    fs::create_dir(&markers).unwrap();
    fs::set_permissions(&markers, fs::Permissions::from_mode(0o777)).unwrap();
    let lib = evil_library(work.path(), &markers);
    let static_hook = static_hook(work.path());
    assert!(!has_interpreter(&static_hook));
    let dynamic = PathBuf::from(env!("CARGO_BIN_EXE_cdigen"));
    // The fake host: the machine's nodes and driver tree.
    let host = work.path().join("host");
    fs::create_dir_all(host.join("run/nvidia")).unwrap();
    fs::copy(machine.join("root/dev.manifest"), host.join("dev.manifest")).unwrap();
    let ok = Command::new("cp")
        .arg("-a")
        .arg(machine.join("root/run/nvidia/driver"))
        .arg(host.join("run/nvidia/driver"))
        .status()
        .unwrap()
        .success();
    assert!(ok);
    // Inside: the driver loads (dlprobe without the image's variables,
    // which would load evil.so into dlprobe itself: the image's own
    // business, not the hooks').
    let inside = "env -u LD_PRELOAD -u LD_AUDIT dlprobe libcuda.so.1 libnvidia-ml.so.1 libcuda.so";
    let mut failures = Vec::new();
    let run = |name: &str, hook: &Path, env: bool, image: &str| -> (bool, Vec<String>) {
        let dir = work.path().join(format!("{name}-{image}"));
        let specs = dir.join("cdi");
        fs::create_dir_all(&specs).unwrap();
        nvidia_specs(&machine, &dir, &specs, hook, env);
        hostile_spec(&specs, &lib, &markers);
        let out = Command::new("bash")
            .arg(&script)
            .arg("--host-overlay")
            .arg(&host)
            .arg(&specs)
            .args([
                "nvidia.com/gpu=0",
                &format!("hostile.example/image={image}"),
            ])
            .args(["--", "sh", "-c", inside])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let loaded = out.status.success()
            && stdout.contains("run-in-container: exit 0")
            && ["libcuda.so.1", "libnvidia-ml.so.1", "libcuda.so"]
                .iter()
                .all(|l| stdout.contains(&format!("dlopen {l} OK")));
        let found = markers_in(&markers);
        for m in &found {
            fs::remove_file(markers.join(m)).unwrap();
        }
        eprintln!("{name} ({image}): driver loads: {loaded}, markers: {found:?}");
        if !loaded {
            eprintln!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
        }
        (loaded, found)
    };
    for image in ["preload", "audit"] {
        for (name, hook, env) in [
            ("spec-with-env-cdigen", dynamic.as_path(), true),
            ("spec-with-env-static-hook", static_hook.as_path(), true),
            ("spec-without-env-static-hook", static_hook.as_path(), false),
        ] {
            let (loaded, found) = run(name, hook, env, image);
            if !loaded || !found.is_empty() {
                failures.push(format!(
                    "{name} ({image}): driver loads: {loaded}, markers: {found:?}"
                ));
            }
        }
        // The control: what the flaw was.
        let (_, found) = run("control-without-env-cdigen", &dynamic, false, image);
        assert!(
            found.iter().any(|m| m.starts_with(&format!("{image}-"))),
            "the control run left no {image} marker: the harness would not see the flaw ({found:?})"
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

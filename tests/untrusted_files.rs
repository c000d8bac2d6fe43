//! Every file cdigen touches is untrusted (issue 11, items 1, 2 and 5),
//! end to end through the binary: names in state files are data, never
//! paths; cdigen's own files (lock, state, temp, outputs, allocations)
//! are never opened through a symlink or as anything but a regular file;
//! every read is bounded and type-checked, so a FIFO or a device node
//! anywhere never hangs or feeds a command; and `--dry-run` lists every
//! removal the real run makes.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[path = "support/machine.rs"]
mod support;

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use support::machine;

/// Runs `cdigen` in `cwd` like `support::cdigen`, but fails the test
/// instead of hanging when the command blocks: (code, stdout, stderr).
fn run(cwd: &Path, args: &[&str]) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cdigen"))
        .current_dir(cwd)
        .args(args)
        .env_remove("CDIGEN_ROOT")
        .env_remove("CDIGEN_TEMPLATES")
        .env_remove("RUST_LOG")
        .env("CDIGEN_GENERATORS", "/nonexistent-cdigen-user-generators")
        .env("CDIGEN_DEVINFO_DIR", "devinfo")
        .env("CDIGEN_STATE_DIR", "state")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("cdigen {args:?} blocked for 30 s");
        }
        thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr,
    )
}

fn mkfifo(path: &Path) {
    let ok = Command::new("mkfifo").arg(path).status().unwrap().success();
    assert!(ok, "mkfifo {}", path.display());
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn generate(cwd: &Path) {
    let (code, _, err) = run(cwd, &["generate", "--root", "root", "--output-dir", "cdi"]);
    assert_eq!(code, 0, "{err}");
}

// ---- 1. State files are data, not paths -----------------------------------

/// Every spelling of a name that is not a plain file name, recorded for a
/// generator with the hash of the file it names: never removed, never
/// advised for removal, and the state named as corrupt.
#[test]
fn a_state_entry_that_is_not_a_plain_name_is_corruption_and_nothing_is_touched() {
    let (tmp, _root) = machine("intel-laptop");
    let cwd = tmp.path();
    generate(cwd);
    let victim = cwd.join("victim");
    fs::write(&victim, b"precious\n").unwrap();
    let hash = sha256(b"precious\n");
    let abs = victim.display().to_string();
    for bad in [
        "../victim",
        abs.as_str(),
        "sub/../../victim",
        "..",
        ".cdigen-state",
        "",
        "a\nb",
    ] {
        let state_path = cwd.join("cdi/.cdigen-state");
        let mut state: serde_json::Value =
            serde_json::from_slice(&fs::read(&state_path).unwrap()).unwrap();
        let saved = state.clone();
        state["files"][bad] = serde_json::json!({"owner": "drm", "sha256": [hash]});
        fs::write(&state_path, serde_json::to_vec(&state).unwrap()).unwrap();
        let quoted = format!("{bad:?}");
        let corrupt = format!(
            "{}: corrupt state file (remove it to start over; cdigen then owns no file in this \
             directory): entry {quoted} is not a plain file name cdigen writes; not touching any \
             file it names",
            Path::new("cdi/.cdigen-state").display()
        );

        let (code, out, err) = run(cwd, &["generate", "--root", "root", "--output-dir", "cdi"]);
        assert_eq!(code, 2, "{bad:?}: {out}{err}");
        assert!(err.contains(&corrupt), "{bad:?}: {err}");
        assert_eq!(fs::read(&victim).unwrap(), b"precious\n", "{bad:?}");

        let (code, out, err) = run(
            cwd,
            &[
                "generate",
                "--root",
                "root",
                "--output-dir",
                "cdi",
                "--dry-run",
            ],
        );
        assert_eq!(code, 2, "{bad:?}: {out}{err}");
        assert!(err.contains(&corrupt), "{bad:?}: {err}");
        assert!(!out.contains("victim"), "{out}");

        let (code, out, err) = run(
            cwd,
            &[
                "check",
                "--root",
                "root",
                "--output-dir",
                "cdi",
                "--spec-dir",
                "cdi",
            ],
        );
        assert_eq!(code, 1, "{bad:?}: {out}{err}");
        assert!(!out.contains("would remove"), "{bad:?}: {out}");
        assert!(
            out.contains("unreadable: cdi/.cdigen-state: corrupt state file: entry"),
            "{bad:?}: {out}"
        );
        assert!(fs::read(&victim).is_ok());
        fs::write(&state_path, serde_json::to_vec(&saved).unwrap()).unwrap();
    }
    // With the state restored, all is well again.
    let (code, _, err) = run(cwd, &["generate", "--root", "root", "--output-dir", "cdi"]);
    assert_eq!(code, 0, "{err}");
}

// ---- 2. cdigen's own files: no symlink, no FIFO ---------------------------

#[test]
fn a_symlinked_lock_never_creates_its_target_and_a_fifo_lock_never_hangs() {
    let (tmp, _root) = machine("intel-laptop");
    let cwd = tmp.path();
    fs::create_dir(cwd.join("cdi")).unwrap();
    let target = cwd.join("created-by-root");
    symlink(&target, cwd.join("cdi/.cdigen.lock")).unwrap();
    let (code, _, err) = run(cwd, &["generate", "--root", "root", "--output-dir", "cdi"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("cdi/.cdigen.lock: a symbolic link, not a regular file: not opening it"),
        "{err}"
    );
    assert!(!target.exists());

    fs::remove_file(cwd.join("cdi/.cdigen.lock")).unwrap();
    mkfifo(&cwd.join("cdi/.cdigen.lock"));
    let (code, _, err) = run(cwd, &["generate", "--root", "root", "--output-dir", "cdi"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("cdi/.cdigen.lock: a FIFO, not a regular file: not opening it"),
        "{err}"
    );
    // The plugin's lock and allocations are cdigen's own files too.
    fs::create_dir(cwd.join("state")).unwrap();
    mkfifo(&cwd.join("state/allocations.json"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_cdigen"))
        .current_dir(cwd)
        .args(["plugin", "--root", "root", "--state-dir", "state"])
        .env("CDI_COMMAND", "ADD")
        .env("CDI_VERSION", "0.0.1")
        .env("CDI_REQUEST", "gpu:1")
        .env("CDI_REQUEST_ID", "1")
        .env("CDIGEN_GENERATORS", "/nonexistent-cdigen-user-generators")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().unwrap();
        let _ = stdin.write_all(
            br#"{"cdiVersion": "0.0.1", "name": "gpus", "type": "gpu", "plugin": "drm"}"#,
        );
    }
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(start.elapsed() < Duration::from_secs(30), "plugin blocked");
        thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    let reply: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(reply["error"], 104, "{reply}");
    assert!(
        reply["details"]
            .as_str()
            .unwrap()
            .contains("state/allocations.json: a FIFO, not a regular file: not opening it"),
        "{reply}"
    );
}

#[test]
fn a_state_file_or_output_that_is_a_link_or_fifo_is_refused_by_name() {
    let (tmp, _root) = machine("intel-laptop");
    let cwd = tmp.path();
    generate(cwd);
    // The state file replaced by a link to a copy of itself elsewhere:
    // refused, not followed.
    let copy = cwd.join("state-copy");
    fs::copy(cwd.join("cdi/.cdigen-state"), &copy).unwrap();
    fs::remove_file(cwd.join("cdi/.cdigen-state")).unwrap();
    symlink(&copy, cwd.join("cdi/.cdigen-state")).unwrap();
    let (code, _, err) = run(cwd, &["generate", "--root", "root", "--output-dir", "cdi"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("cdi/.cdigen-state: a symbolic link, not a regular file: not opening it"),
        "{err}"
    );
    fs::remove_file(cwd.join("cdi/.cdigen-state")).unwrap();
    fs::rename(&copy, cwd.join("cdi/.cdigen-state")).unwrap();

    // An output file replaced by a FIFO: refused without blocking; the
    // other generator's file is still written.
    fs::remove_file(cwd.join("cdi/intel.com-npu.yaml")).unwrap();
    mkfifo(&cwd.join("cdi/intel.com-npu.yaml"));
    let (code, out, err) = run(cwd, &["generate", "--root", "root", "--output-dir", "cdi"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("refusing to replace cdi/intel.com-npu.yaml: a FIFO, not a regular file"),
        "{err}"
    );
    assert!(out.contains("unchanged: cdi/intel.com-gpu.yaml"), "{out}");
    // check says the same, without blocking either.
    let (code, out, _) = run(
        cwd,
        &[
            "check",
            "--root",
            "root",
            "--output-dir",
            "cdi",
            "--spec-dir",
            "cdi",
        ],
    );
    assert_eq!(code, 1);
    assert!(
        out.contains(
            "foreign: cdi/intel.com-npu.yaml: a FIFO, not a regular file: generate will not replace it"
        ),
        "{out}"
    );
}

#[test]
fn a_temp_name_that_is_not_a_regular_file_is_left_alone() {
    let (tmp, _root) = machine("intel-laptop");
    let cwd = tmp.path();
    fs::create_dir_all(cwd.join("cdi/.cdigen-planted.tmp")).unwrap();
    fs::write(cwd.join("cdi/.cdigen-planted.tmp/keep"), b"x").unwrap();
    let (code, _, err) = run(cwd, &["generate", "--root", "root", "--output-dir", "cdi"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(
            "cdi/.cdigen-planted.tmp: a directory, not a temp file cdigen left: leaving it alone"
        ),
        "{err}"
    );
    assert!(cwd.join("cdi/.cdigen-planted.tmp/keep").exists());
}

// ---- 5. Every read bounded and type-checked -------------------------------

#[test]
fn a_fifo_anywhere_under_the_root_is_a_warning_not_a_hang() {
    let (tmp, root) = machine("intel-laptop");
    let cwd = tmp.path();
    let npu = "sys/devices/pci0000:00/0000:00:0b.0";
    for f in [
        format!("{npu}/vendor"),
        "proc/devices".to_string(),
        "usr/share/misc/pci.ids".to_string(),
    ] {
        fs::remove_file(root.join(&f)).unwrap();
        mkfifo(&root.join(&f));
    }
    let (code, out, err) = run(cwd, &["discover", "--root", "root"]);
    assert_eq!(code, 0, "{out}{err}");
    // A sysfs file is named by its host path, a file of the root's own by
    // where it is.
    for f in [
        format!("/{npu}/vendor: a FIFO, not a regular file: not reading it; skipping device"),
        "root/usr/share/misc/pci.ids: a FIFO, not a regular file: not reading it".to_string(),
    ] {
        assert!(err.contains(&f), "{f}: {err}");
    }
    // The iGPU is still found.
    assert!(out.contains("0000:00:02.0"), "{out}");

    // A FIFO manifest: an error naming it, at once.
    fs::remove_file(root.join("dev.manifest")).unwrap();
    mkfifo(&root.join("dev.manifest"));
    let (code, _, err) = run(cwd, &["generate", "--root", "root", "--output-dir", "cdi"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("root/dev.manifest: a FIFO, not a regular file: not reading it"),
        "{err}"
    );
}

#[test]
fn definitions_templates_and_specs_are_read_only_from_regular_files() {
    let (tmp, _root) = machine("intel-laptop");
    let cwd = tmp.path();
    fs::create_dir(cwd.join("gens")).unwrap();
    mkfifo(&cwd.join("gens/hang.yaml"));
    let (code, _, err) = run(
        cwd,
        &[
            "generate",
            "--root",
            "root",
            "--output-dir",
            "cdi",
            "--generators",
            "gens",
        ],
    );
    assert_eq!(code, 1, "{err}"); // that generator fails, the others run
    assert!(
        err.contains("gens/hang.yaml: a FIFO, not a regular file: not opening it"),
        "{err}"
    );
    fs::remove_file(cwd.join("gens/hang.yaml")).unwrap();
    symlink("/dev/zero", cwd.join("gens/zero.yaml")).unwrap();
    let (code, _, err) = run(
        cwd,
        &[
            "generate",
            "--root",
            "root",
            "--output-dir",
            "cdi",
            "--generators",
            "gens",
        ],
    );
    assert_eq!(code, 1, "{err}"); // that generator fails, the others run
    assert!(
        err.contains("gens/zero.yaml: a symbolic link to a character device, not a regular file: not opening it"),
        "{err}"
    );

    fs::create_dir(cwd.join("tpl")).unwrap();
    symlink("/dev/zero", cwd.join("tpl/drm.json.hbs")).unwrap();
    let (code, _, err) = run(
        cwd,
        &[
            "generate",
            "--root",
            "root",
            "--output-dir",
            "cdi",
            "--templates",
            "tpl",
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("tpl/drm.json.hbs: a symbolic link to a character device, not a regular file: not opening it"),
        "{err}"
    );

    // validate FILE and validate DIR: a link to /dev/zero or a FIFO is a
    // finding naming it, at once, never read.
    fs::create_dir(cwd.join("specs")).unwrap();
    symlink("/dev/zero", cwd.join("specs/zero.yaml")).unwrap();
    mkfifo(&cwd.join("specs/fifo.json"));
    let (code, out, err) = run(cwd, &["validate", "specs/zero.yaml"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("a character device, not a regular file: not opening it"),
        "{out}"
    );
    let (code, out, err) = run(cwd, &["validate", "specs/fifo.json"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("a FIFO, not a regular file: not opening it"),
        "{out}"
    );
    let (code, out, err) = run(cwd, &["list", "--spec-dir", "specs"]);
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn watch_with_a_fifo_under_the_root_becomes_ready_and_stops_on_sigterm() {
    let (tmp, root) = machine("intel-laptop");
    let cwd = tmp.path();
    let vendor = root.join("sys/devices/pci0000:00/0000:00:0b.0/vendor");
    fs::remove_file(&vendor).unwrap();
    mkfifo(&vendor);
    let mut child = Command::new(env!("CARGO_BIN_EXE_cdigen"))
        .current_dir(cwd)
        .args([
            "watch",
            "--root",
            "root",
            "--output-dir",
            "cdi",
            "--source",
            "none",
            "--ready-file",
            "ready",
        ])
        .env("CDIGEN_GENERATORS", "/nonexistent-cdigen-user-generators")
        .env("CDIGEN_DEVINFO_DIR", "devinfo")
        .env_remove("NOTIFY_SOCKET")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !cwd.join("ready").exists() {
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("watch never became ready");
        }
        thread::sleep(Duration::from_millis(20));
    }
    let ok = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert_eq!(status.code(), Some(0));
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "SIGTERM ignored");
        thread::sleep(Duration::from_millis(10));
    }
}

// ---- --dry-run lists every removal the real run makes ---------------------

#[test]
fn dry_run_lists_every_removal_the_real_run_makes() {
    let (tmp, root) = machine("sriov-legacy");
    let cwd = tmp.path();
    generate(cwd);
    // One VF gone: its device-info file goes; the spec is updated.
    let vf = "sys/bus/pci/devices/0000:17:01.3";
    let real = fs::canonicalize(root.join(vf)).unwrap();
    fs::remove_dir_all(&real).unwrap();
    fs::remove_file(root.join(vf)).unwrap();
    // A file of ours under a name its generator no longer writes (an
    // older release, another format): recorded for the generator, so the
    // real run removes it too.
    let state_path = cwd.join("cdi/.cdigen-state");
    let mut state: serde_json::Value =
        serde_json::from_slice(&fs::read(&state_path).unwrap()).unwrap();
    let (name, record) = state["files"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .map(|(n, r)| (n.clone(), r.clone()))
        .unwrap();
    fs::copy(cwd.join("cdi").join(&name), cwd.join("cdi/old-name.json")).unwrap();
    state["files"]["old-name.json"] = record;
    fs::write(&state_path, serde_json::to_vec(&state).unwrap()).unwrap();
    // Another tool's file: neither run touches it.
    fs::write(cwd.join("cdi/foreign.json"), b"{}").unwrap();
    let (code, out, err) = run(
        cwd,
        &[
            "generate",
            "--root",
            "root",
            "--output-dir",
            "cdi",
            "--dry-run",
        ],
    );
    let (real_code, real_out, real_err) =
        run(cwd, &["generate", "--root", "root", "--output-dir", "cdi"]);
    assert_eq!(code, real_code, "{err}{real_err}");
    let removed = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.contains("removed: "))
            .map(|l| l.trim_start_matches("would be ").to_string())
            .collect()
    };
    let would = removed(&out);
    assert_eq!(
        would,
        removed(&real_out),
        "dry run:\n{out}\nreal:\n{real_out}"
    );
    assert!(
        would
            .iter()
            .any(|l| l.contains("devinfo/cdigen.io-vf-0000:17:01.3-device.json")),
        "{out}"
    );
    assert!(
        would.iter().any(|l| l.contains("cdi/old-name.json")),
        "{out}"
    );
    assert!(!out.contains("foreign.json"), "{out}");
    assert!(!cwd.join("cdi/old-name.json").exists());
    assert!(cwd.join("cdi/foreign.json").exists());
}

//! `cdigen check` end to end: generate into temp dirs from a copy of a
//! fixture machine, change the machine or the files, and check the exact
//! report and exit status. Also: check writes nothing, ever.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[path = "support/machine.rs"]
mod support;

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::SystemTime;

use support::{cdigen, machine};

/// The Intel iGPU of `intel-laptop`.
const IGPU: &str = "sys/devices/pci0000:00/0000:00:02.0";
/// The one VF of `sriov-legacy` bound to vfio-pci (group 24).
const VFIO_VF: &str = "0000:17:01.2";

const CURRENT_LAPTOP: &str =
    "current: 2 spec files and 0 device-info files checked, 0 problems, 0 warnings\n";

fn generate(cwd: &Path) {
    let (code, _, err) = cdigen(cwd, &["generate", "--root", "root", "--output-dir", "cdi"]);
    assert_eq!(code, 0, "{err}");
}

/// `cdigen check` with the output dir as the only spec dir, plus `extra`:
/// (exit code, stdout).
fn check(cwd: &Path, extra: &[&str]) -> (i32, String) {
    let mut args = vec![
        "check",
        "--root",
        "root",
        "--output-dir",
        "cdi",
        "--spec-dir",
        "cdi",
    ];
    args.extend_from_slice(extra);
    let (code, out, err) = cdigen(cwd, &args);
    assert!(!err.contains("panicked"), "check must never panic: {err}");
    (code, out)
}

/// Every entry under `dir` (recursively, dot files included) with its
/// type, mtime and content: what must not change while check runs.
fn tree(dir: &Path) -> Vec<(String, SystemTime, Vec<u8>)> {
    let mut out = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return out;
    };
    for e in entries {
        let e = e.unwrap();
        let p = e.path();
        let meta = fs::symlink_metadata(&p).unwrap();
        let content = if meta.is_file() {
            fs::read(&p).unwrap()
        } else {
            Vec::new()
        };
        out.push((p.display().to_string(), meta.modified().unwrap(), content));
        if meta.is_dir() {
            out.extend(tree(&p));
        }
    }
    out.sort();
    out
}

/// Changes the major:minor of a DRM node everywhere the machine records
/// it: sysfs `dev`, `uevent`, the `sys/dev/char` link and the dev manifest.
fn renumber(root: &Path, class_dir: &str, node: &str, old: (u32, u32), new: (u32, u32)) {
    let dir = root.join(class_dir);
    fs::write(dir.join("dev"), format!("{}:{}\n", new.0, new.1)).unwrap();
    let uevent = fs::read_to_string(dir.join("uevent")).unwrap();
    let uevent = uevent
        .replace(&format!("MAJOR={}\n", old.0), &format!("MAJOR={}\n", new.0))
        .replace(&format!("MINOR={}\n", old.1), &format!("MINOR={}\n", new.1));
    fs::write(dir.join("uevent"), uevent).unwrap();
    let chr = root.join("sys/dev/char");
    let target = fs::read_link(chr.join(format!("{}:{}", old.0, old.1))).unwrap();
    fs::remove_file(chr.join(format!("{}:{}", old.0, old.1))).unwrap();
    std::os::unix::fs::symlink(target, chr.join(format!("{}:{}", new.0, new.1))).unwrap();
    support::edit_manifest(root, |line| {
        Some(if line.split_whitespace().next() == Some(node) {
            line.replace(
                &format!(" {}:{} ", old.0, old.1),
                &format!(" {}:{} ", new.0, new.1),
            )
        } else {
            line.to_string()
        })
    });
}

/// Removes the manifest entry of `node`.
fn drop_node(root: &Path, node: &str) {
    let path = root.join("dev.manifest");
    let text = fs::read_to_string(&path).unwrap();
    let kept: String = text
        .lines()
        .filter(|l| l.split_whitespace().next() != Some(node))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(kept, text, "{node} is in the manifest");
    fs::write(&path, kept).unwrap();
}

// ---------------------------------------------------------------- current

#[test]
fn current_right_after_generate_and_check_touches_nothing() {
    let (tmp, _root) = machine("example");
    // The NVIDIA spec's hooks name a program the machine (under --root)
    // has: a missing one is a problem.
    let hook = tmp.path().join("root/usr/bin/cdigen-hook");
    fs::create_dir_all(hook.parent().unwrap()).unwrap();
    fs::write(&hook, "#!/bin/sh\n").unwrap();
    fs::set_permissions(&hook, fs::Permissions::from_mode(0o755)).unwrap();
    let (code, out, err) = cdigen(
        tmp.path(),
        &[
            "generate",
            "--root",
            "root",
            "--output-dir",
            "cdi",
            "--hook-path",
            "/usr/bin/cdigen-hook",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("devinfo/"), "device-info files written: {out}");
    let before = (
        tree(&tmp.path().join("cdi")),
        tree(&tmp.path().join("devinfo")),
    );
    let (code, out) = check(tmp.path(), &["--hook-path", "/usr/bin/cdigen-hook"]);
    assert_eq!(
        out,
        "current: 6 spec files and 6 device-info files checked, 0 problems, 0 warnings\n"
    );
    assert_eq!(code, 0);
    // Gone from the host: every NVIDIA container would fail to start.
    fs::remove_file(&hook).unwrap();
    let (code, out) = check(tmp.path(), &["--hook-path", "/usr/bin/cdigen-hook"]);
    assert!(
        out.starts_with(
            "missing-hook: cdi/nvidia.com-gpu.yaml: containerEdits.hooks[0]: \"createContainer\" hook \"/usr/bin/cdigen-hook\": No such file or directory (os error 2): runtimes fail to start a container given it\n"
        ),
        "{out}"
    );
    assert!(
        out.ends_with(
            "not current: 6 spec files and 6 device-info files checked, 4 problems, 0 warnings\n"
        ),
        "{out}"
    );
    assert_eq!(code, 1);
    let after_removal = (
        tree(&tmp.path().join("cdi")),
        tree(&tmp.path().join("devinfo")),
    );
    assert_eq!(before, after_removal, "check changed a file or an mtime");
    let after = (
        tree(&tmp.path().join("cdi")),
        tree(&tmp.path().join("devinfo")),
    );
    assert_eq!(before, after, "check changed a file or an mtime");
}

#[test]
fn check_creates_nothing_not_even_a_directory_lock_or_state() {
    let (tmp, _root) = machine("intel-laptop");
    let (code, out) = check(tmp.path(), &[]);
    assert_eq!(
        out,
        "missing: cdi/intel.com-gpu.yaml: not on disk: generate would write it (2 devices)\n\
         missing: cdi/intel.com-npu.yaml: not on disk: generate would write it (2 devices)\n\
         not current: 2 spec files and 0 device-info files checked, 2 problems, 0 warnings\n"
    );
    assert_eq!(code, 1);
    assert!(!tmp.path().join("cdi").exists());
    assert!(!tmp.path().join("devinfo").exists());
    // An existing empty directory stays empty.
    fs::create_dir(tmp.path().join("cdi")).unwrap();
    let (code, _) = check(tmp.path(), &[]);
    assert_eq!(code, 1);
    assert_eq!(fs::read_dir(tmp.path().join("cdi")).unwrap().count(), 0);
}

// ---------------------------------------------------------------- stale

#[test]
fn changed_major_minor_is_stale_with_both_numbers() {
    let (tmp, root) = machine("intel-laptop");
    generate(tmp.path());
    assert_eq!(check(tmp.path(), &[]), (0, CURRENT_LAPTOP.to_string()));
    // card1 comes back as 226:2 (after a module reload, say).
    renumber(
        &root,
        &format!("{IGPU}/drm/card1"),
        "/dev/dri/card1",
        (226, 1),
        (226, 2),
    );
    let (code, out) = check(tmp.path(), &[]);
    assert_eq!(
        out,
        "stale: cdi/intel.com-gpu.yaml: intel.com/gpu=0: /dev/dri/card1 is 226:1 on disk but 226:2 now\n\
         stale: cdi/intel.com-gpu.yaml: intel.com/gpu=all: /dev/dri/card1 is 226:1 on disk but 226:2 now\n\
         not current: 2 spec files and 0 device-info files checked, 2 problems, 0 warnings\n"
    );
    assert_eq!(code, 1);
    // generate fixes it, and check agrees.
    generate(tmp.path());
    assert_eq!(check(tmp.path(), &[]), (0, CURRENT_LAPTOP.to_string()));
}

#[test]
fn device_gone_is_stale_and_its_device_info_file_an_orphan() {
    let (tmp, root) = machine("sriov-legacy");
    generate(tmp.path());
    assert_eq!(
        check(tmp.path(), &[]).1,
        "current: 1 spec file and 4 device-info files checked, 0 problems, 0 warnings\n"
    );
    // The VF on vfio-pci goes away, and its group node with it.
    fs::remove_file(root.join("sys/bus/pci/devices").join(VFIO_VF)).unwrap();
    drop_node(&root, "/dev/vfio/24");
    let (code, out) = check(tmp.path(), &[]);
    assert_eq!(
        out,
        "stale: cdi/cdigen.io-vf.yaml: cdigen.io/vf=0000:17:01.2: device gone: /dev/vfio/24 no longer exists on the host\n\
         orphan: devinfo/cdigen.io-vf-0000:17:01.2-device.json: its device is gone (generator \"sriov\" no longer selects it): generate would remove it\n\
         not current: 1 spec file and 4 device-info files checked, 2 problems, 0 warnings\n"
    );
    assert_eq!(code, 1);
    // A device gone while its nodes remain (unbound, say) says just that.
    fs::remove_file(root.join("sys/bus/pci/devices/0000:17:01.3")).unwrap();
    let out = check(tmp.path(), &[]).1;
    assert!(
        out.contains(
            "stale: cdi/cdigen.io-vf.yaml: cdigen.io/vf=0000:17:01.3: device gone (no longer discovered)\n"
        ),
        "{out}"
    );
}

#[test]
fn new_device_is_stale_and_its_device_info_file_missing() {
    let (tmp, root) = machine("sriov-legacy");
    let vf = root.join("sys/bus/pci/devices/0000:17:01.3");
    let target = fs::read_link(&vf).unwrap();
    fs::remove_file(&vf).unwrap();
    generate(tmp.path());
    // The VF appears (SR-IOV reconfigured).
    std::os::unix::fs::symlink(target, &vf).unwrap();
    let (code, out) = check(tmp.path(), &[]);
    assert_eq!(
        out,
        "stale: cdi/cdigen.io-vf.yaml: cdigen.io/vf=0000:17:01.3: new device (not in the file on disk)\n\
         missing: devinfo/cdigen.io-vf-0000:17:01.3-device.json: not on disk: generate would write it\n\
         not current: 1 spec file and 4 device-info files checked, 2 problems, 0 warnings\n"
    );
    assert_eq!(code, 1);
}

#[test]
fn deleted_device_info_file_is_missing() {
    let (tmp, _root) = machine("sriov-legacy");
    generate(tmp.path());
    fs::remove_file(
        tmp.path()
            .join("devinfo/cdigen.io-vf-0000:17:01.0-device.json"),
    )
    .unwrap();
    let (code, out) = check(tmp.path(), &[]);
    assert_eq!(
        out,
        "missing: devinfo/cdigen.io-vf-0000:17:01.0-device.json: not on disk: generate would write it\n\
         not current: 1 spec file and 4 device-info files checked, 1 problem, 0 warnings\n"
    );
    assert_eq!(code, 1);
}

#[test]
fn every_device_gone_makes_the_spec_an_orphan() {
    let (tmp, root) = machine("intel-laptop");
    generate(tmp.path());
    fs::remove_file(root.join("sys/class/accel/accel0")).unwrap();
    drop_node(&root, "/dev/accel/accel0");
    let (code, out) = check(tmp.path(), &[]);
    assert_eq!(
        out,
        "orphan: cdi/intel.com-npu.yaml: generator \"intel-npu\" selects no device now: generate would remove it\n\
         not current: 2 spec files and 0 device-info files checked, 1 problem, 0 warnings\n"
    );
    assert_eq!(code, 1);
    // Changed by hand since: generate leaves it, and check says to remove it.
    fs::write(tmp.path().join("cdi/intel.com-npu.yaml"), "# edited\n").unwrap();
    assert_eq!(
        check(tmp.path(), &[]).1.lines().next().unwrap(),
        "orphan: cdi/intel.com-npu.yaml: generator \"intel-npu\" selects no device now, but it was \
         changed since cdigen wrote it: generate will leave it alone and forget it; remove it by hand"
    );
}

#[test]
fn hand_edited_spec_is_stale_and_says_generate_will_not_overwrite_it() {
    let (tmp, _root) = machine("intel-laptop");
    generate(tmp.path());
    let path = tmp.path().join("cdi/intel.com-gpu.yaml");
    let text = fs::read_to_string(&path).unwrap();
    fs::write(&path, text.replacen("'bind'", "'rbind'", 1)).unwrap();
    let (code, out) = check(tmp.path(), &[]);
    assert_eq!(
        out,
        "stale: cdi/intel.com-gpu.yaml: changed since cdigen wrote it: generate will not overwrite it (remove it or move it away)\n\
         stale: cdi/intel.com-gpu.yaml: intel.com/gpu=0: content differs: containerEdits.mounts[0].options[0] is \"rbind\" on disk but \"bind\" now\n\
         not current: 2 spec files and 0 device-info files checked, 2 problems, 0 warnings\n"
    );
    assert_eq!(code, 1);
    // Not even a spec any more.
    fs::write(&path, "cdiVersion: [\n").unwrap();
    let out = check(tmp.path(), &[]).1;
    let second = out.lines().nth(1).unwrap();
    assert!(
        second.starts_with("stale: cdi/intel.com-gpu.yaml: the file on disk cannot be parsed: "),
        "{out}"
    );
}

#[test]
fn a_file_with_our_name_that_cdigen_did_not_write_is_foreign() {
    let (tmp, _root) = machine("intel-laptop");
    fs::create_dir(tmp.path().join("cdi")).unwrap();
    fs::write(
        tmp.path().join("cdi/intel.com-gpu.yaml"),
        "# someone else's\n",
    )
    .unwrap();
    std::os::unix::fs::symlink("/etc/passwd", tmp.path().join("cdi/intel.com-npu.yaml")).unwrap();
    let (code, out) = check(tmp.path(), &[]);
    assert_eq!(
        out,
        "foreign: cdi/intel.com-gpu.yaml: not written by cdigen: generate will not overwrite it (remove it or move it away)\n\
         foreign: cdi/intel.com-npu.yaml: a symbolic link, not a regular file: generate will not replace it\n\
         not current: 2 spec files and 0 device-info files checked, 2 problems, 0 warnings\n"
    );
    assert_eq!(code, 1);
}

#[test]
fn identical_file_cdigen_has_no_record_of_is_a_warning() {
    let (tmp, _root) = machine("intel-laptop");
    generate(tmp.path());
    fs::remove_file(tmp.path().join("cdi/.cdigen-state")).unwrap();
    let (code, out) = check(tmp.path(), &[]);
    assert_eq!(
        out,
        "unowned (warning): cdi/intel.com-gpu.yaml: current, but cdigen has no record of writing it: generate will refuse to update it when it changes\n\
         unowned (warning): cdi/intel.com-npu.yaml: current, but cdigen has no record of writing it: generate will refuse to update it when it changes\n\
         current: 2 spec files and 0 device-info files checked, 0 problems, 2 warnings\n"
    );
    assert_eq!(code, 0);
}

#[test]
fn corrupt_state_file_is_a_finding_naming_it() {
    let (tmp, _root) = machine("intel-laptop");
    generate(tmp.path());
    fs::write(tmp.path().join("cdi/.cdigen-state"), "{").unwrap();
    let (code, out) = check(tmp.path(), &[]);
    let first = out.lines().next().unwrap();
    assert!(
        first.starts_with("unreadable: cdi/.cdigen-state: corrupt state file: EOF while parsing"),
        "{out}"
    );
    assert!(
        first.ends_with("; generate will not write in cdi until it is removed"),
        "{out}"
    );
    assert_eq!(
        out.lines().nth(1).unwrap(),
        "not current: 0 spec files and 0 device-info files checked, 1 problem, 0 warnings"
    );
    assert_eq!(code, 1);
}

// ---------------------------------------------------------------- runtimes' view

const FOREIGN_GPU0: &str = "{\"cdiVersion\":\"0.5.0\",\"kind\":\"intel.com/gpu\",\"devices\":[{\"name\":\"0\",\"containerEdits\":{\"env\":[\"A=1\"]}}]}";

#[test]
fn foreign_spec_defining_our_name_in_the_same_dir_is_competing() {
    let (tmp, _root) = machine("intel-laptop");
    generate(tmp.path());
    fs::write(tmp.path().join("cdi/other.json"), FOREIGN_GPU0).unwrap();
    let (code, out) = check(tmp.path(), &[]);
    assert_eq!(
        out,
        "competing: cdi/intel.com-gpu.yaml: intel.com/gpu=0: also defined in cdi/other.json, which cdigen did not write: runtimes would drop both definitions, and generate will not write this file; remove cdi/other.json (or move it out of the spec directories) if cdigen is to provide these devices; or, to keep that file, turn cdigen's generator \"intel-gpu\" off (`enabled: false` in a copy of its definition in /etc/cdigen/generators.d)\n\
         not current: 2 spec files and 0 device-info files checked, 1 problem, 0 warnings\n"
    );
    assert_eq!(code, 1);
}

#[test]
fn cdigens_spec_in_the_same_dir_defining_our_name_is_a_conflict() {
    let (tmp, _root) = machine("intel-laptop");
    generate(tmp.path());
    // A copy of intel-gpu under another name and file, written by cdigen.
    let defs = tmp.path().join("defs");
    fs::create_dir(&defs).unwrap();
    fs::write(
        defs.join("copy.yaml"),
        "name: copy\nbackend: drm\nkind: intel.com/gpu\nselect: {vendor_ids: [\"0x8086\"], node_roles: [primary, render]}\nnames: [index]\ntemplate: drm\noutput: {file: copy}\n",
    )
    .unwrap();
    let (code, _, err) = cdigen(
        tmp.path(),
        &[
            "generate",
            "--root",
            "root",
            "--output-dir",
            "cdi",
            "--generators",
            "defs",
            "--generator",
            "copy",
        ],
    );
    assert_eq!(code, 1, "{err}");
    assert_eq!(
        err,
        "cdigen: not writing cdi/copy.yaml: intel.com/gpu=0 is already defined in cdi/intel.com-gpu.yaml, which cdigen's generator \"intel-gpu\" wrote; runtimes would drop both definitions\n"
    );
}

#[test]
fn a_later_spec_dir_shadows_ours_and_ours_shadows_an_earlier_one() {
    let (tmp, _root) = machine("intel-laptop");
    generate(tmp.path());
    let dirs = [
        "--spec-dir",
        "early",
        "--spec-dir",
        "cdi",
        "--spec-dir",
        "late",
    ];
    // cdigen's own spec in another directory (a driver hook's in /etc/cdi,
    // say): shadowing, not another tool.
    let (code, _, err) = cdigen(
        tmp.path(),
        &[
            "generate",
            "--root",
            "root",
            "--output-dir",
            "early",
            "--generator",
            "intel-gpu",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let (code, out) = check(tmp.path(), &dirs);
    assert_eq!(
        out,
        "shadows (warning): cdi/intel.com-gpu.yaml: intel.com/gpu=0: overrides the definition in early/intel.com-gpu.yaml (an earlier spec directory): runtimes use this one\n\
         shadows (warning): cdi/intel.com-gpu.yaml: intel.com/gpu=all: overrides the definition in early/intel.com-gpu.yaml (an earlier spec directory): runtimes use this one\n\
         current: 2 spec files and 0 device-info files checked, 0 problems, 2 warnings\n"
    );
    assert_eq!(code, 0, "runtimes see our device: only a warning");
    fs::rename(tmp.path().join("early"), tmp.path().join("late")).unwrap();
    let (code, out) = check(tmp.path(), &dirs);
    assert_eq!(
        out,
        "shadowed: cdi/intel.com-gpu.yaml: intel.com/gpu=0: overridden by late/intel.com-gpu.yaml: a later spec directory wins, so runtimes use that definition, not this one\n\
         shadowed: cdi/intel.com-gpu.yaml: intel.com/gpu=all: overridden by late/intel.com-gpu.yaml: a later spec directory wins, so runtimes use that definition, not this one\n\
         not current: 2 spec files and 0 device-info files checked, 2 problems, 0 warnings\n"
    );
    assert_eq!(code, 1, "runtimes do not see our device");
}

#[test]
fn another_tools_spec_in_another_spec_dir_is_competing() {
    let (tmp, _root) = machine("intel-laptop");
    generate(tmp.path());
    for d in ["early", "late"] {
        fs::create_dir(tmp.path().join(d)).unwrap();
    }
    let dirs = [
        "--spec-dir",
        "early",
        "--spec-dir",
        "cdi",
        "--spec-dir",
        "late",
    ];
    // Earlier or later, another tool writes the name: an error either way.
    for d in ["early", "late"] {
        fs::write(tmp.path().join(d).join("other.json"), FOREIGN_GPU0).unwrap();
        let (code, out) = check(tmp.path(), &dirs);
        assert_eq!(
            out,
            format!(
                "competing: cdi/intel.com-gpu.yaml: intel.com/gpu=0: also defined in {d}/other.json, which cdigen did not write: runtimes would use only the definition in the later spec directory, and generate will not write this file; remove {d}/other.json (or move it out of the spec directories) if cdigen is to provide these devices; or, to keep that file, turn cdigen's generator \"intel-gpu\" off (`enabled: false` in a copy of its definition in /etc/cdigen/generators.d)\n\
                 not current: 2 spec files and 0 device-info files checked, 1 problem, 0 warnings\n"
            )
        );
        assert_eq!(code, 1);
        fs::remove_file(tmp.path().join(d).join("other.json")).unwrap();
    }
    // Intel's generator's file, by its name and kind: the report says so.
    fs::write(tmp.path().join("early/intel.com-gpu.yaml"), FOREIGN_GPU0).unwrap();
    let (code, out) = check(tmp.path(), &dirs);
    assert_eq!(
        out,
        "competing: cdi/intel.com-gpu.yaml: intel.com/gpu=0: also defined in early/intel.com-gpu.yaml, which cdigen did not write: runtimes would use only the definition in the later spec directory, and generate will not write this file; it looks like the output of intel-cdi-specs-generator (Intel's resource drivers for Kubernetes), which writes it each time it is run: stop running it for these devices (a script, cron job or DaemonSet may), then remove early/intel.com-gpu.yaml; or, to keep that file, turn cdigen's generator \"intel-gpu\" off (`enabled: false` in a copy of its definition in /etc/cdigen/generators.d)\n\
         not current: 2 spec files and 0 device-info files checked, 1 problem, 0 warnings\n"
    );
    assert_eq!(code, 1);
    fs::remove_file(tmp.path().join("early/intel.com-gpu.yaml")).unwrap();
    // Files runtimes do not load (invalid, *.yml) compete with nothing.
    fs::write(tmp.path().join("late/other.yml"), FOREIGN_GPU0).unwrap();
    fs::write(
        tmp.path().join("late/bad.json"),
        FOREIGN_GPU0.replace("0.5.0", "9.9"),
    )
    .unwrap();
    assert_eq!(check(tmp.path(), &dirs), (0, CURRENT_LAPTOP.to_string()));
}

/// Any producer's spec in the spec directories: a hook without env, or
/// whose program others can change, is an error; so is one whose program
/// is not there to run (missing, or not executable), looked for on the
/// host under --root, not on this machine.
#[test]
fn unsafe_hooks_in_any_spec_are_errors() {
    let (tmp, _root) = machine("intel-laptop");
    generate(tmp.path());
    fs::create_dir(tmp.path().join("other")).unwrap();
    let root = tmp.path().join("root");
    let program = |host: &str, mode: u32| {
        let p = root.join(host.trim_start_matches('/'));
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, "#!/bin/sh\n").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
    };
    program("/usr/bin/tool", 0o755);
    program("/usr/bin/data", 0o644);
    program("/opt/open/hook", 0o755);
    fs::set_permissions(root.join("opt/open"), fs::Permissions::from_mode(0o777)).unwrap();
    let spec = r#"{"cdiVersion": "0.5.0", "kind": "vendor.example/thing",
  "containerEdits": {"hooks": [
    {"hookName": "createContainer", "path": "/usr/bin/tool", "args": ["sh", "-c", "true"]},
    {"hookName": "poststop", "path": "/nonexistent/hook", "env": ["A=1"]},
    {"hookName": "poststop", "path": "/usr/bin/data", "env": ["A=1"]},
    {"hookName": "poststop", "path": "/usr/bin/tool", "env": ["A=1"]}]},
  "devices": [{"name": "a", "containerEdits": {"env": ["X=1"], "hooks": [
    {"hookName": "startContainer", "path": "/opt/open/hook", "env": ["A=1"]}]}}]}"#;
    fs::write(tmp.path().join("other/thing.json"), spec).unwrap();
    let (code, out) = check(tmp.path(), &["--spec-dir", "other"]);
    assert_eq!(
        out,
        "unsafe-hook: other/thing.json: containerEdits.hooks[0]: \"createContainer\" hook \"/usr/bin/tool\": no env: runtimes run it with the container's environment, so an image's LD_PRELOAD or LD_AUDIT loads the image's code into it, as root on the host (give it an env, such as [\"PATH=/usr/sbin:/usr/bin:/sbin:/bin\"])\n\
         missing-hook: other/thing.json: containerEdits.hooks[1]: \"poststop\" hook \"/nonexistent/hook\": /nonexistent: No such file or directory (os error 2): runtimes fail to start a container given it\n\
         missing-hook: other/thing.json: containerEdits.hooks[2]: \"poststop\" hook \"/usr/bin/data\": is not executable (mode 0644): runtimes fail to start a container given it\n\
         unsafe-hook: other/thing.json: vendor.example/thing=a: device \"a\": containerEdits.hooks[0]: \"startContainer\" hook \"/opt/open/hook\": /opt/open is writable by others: whoever can change it runs code as root on the host\n\
         not current: 2 spec files and 0 device-info files checked, 4 problems, 0 warnings\n"
    );
    assert_eq!(code, 1, "an unsafe or missing hook turns a monitor red");
}

#[test]
fn output_dir_outside_the_spec_dirs_is_a_warning() {
    let (tmp, _root) = machine("intel-laptop");
    generate(tmp.path());
    let (code, out, _) = cdigen(
        tmp.path(),
        &[
            "check",
            "--root",
            "root",
            "--output-dir",
            "cdi",
            "--spec-dir",
            "elsewhere",
        ],
    );
    assert_eq!(
        out,
        "not-loaded (warning): cdi: not one of the spec directories (elsewhere): runtimes that read only those do not see these devices (name the runtime's directories with --spec-dir)\n\
         current: 2 spec files and 0 device-info files checked, 0 problems, 1 warning\n"
    );
    assert_eq!(code, 0);
}

// ---------------------------------------------------------------- output and errors

#[test]
fn json_report_has_stable_fields() {
    let (tmp, root) = machine("intel-laptop");
    generate(tmp.path());
    renumber(
        &root,
        &format!("{IGPU}/drm/card1"),
        "/dev/dri/card1",
        (226, 1),
        (226, 2),
    );
    fs::write(tmp.path().join("cdi/other.json"), FOREIGN_GPU0).unwrap();
    let (code, out) = check(tmp.path(), &["-o", "json"]);
    assert_eq!(code, 1);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        doc,
        serde_json::json!({
            "current": false,
            "checked": {"specs": 2, "deviceInfo": 0},
            "findings": [
                {
                    "kind": "stale",
                    "severity": "error",
                    "file": "cdi/intel.com-gpu.yaml",
                    "generator": "intel-gpu",
                    "device": "intel.com/gpu=0",
                    "reason": "/dev/dri/card1 is 226:1 on disk but 226:2 now"
                },
                {
                    "kind": "stale",
                    "severity": "error",
                    "file": "cdi/intel.com-gpu.yaml",
                    "generator": "intel-gpu",
                    "device": "intel.com/gpu=all",
                    "reason": "/dev/dri/card1 is 226:1 on disk but 226:2 now"
                },
                {
                    "kind": "competing",
                    "severity": "error",
                    "file": "cdi/intel.com-gpu.yaml",
                    "generator": "intel-gpu",
                    "device": "intel.com/gpu=0",
                    "other": "cdi/other.json",
                    "reason": "also defined in cdi/other.json, which cdigen did not write: runtimes would drop both definitions, and generate will not write this file; remove cdi/other.json (or move it out of the spec directories) if cdigen is to provide these devices; or, to keep that file, turn cdigen's generator \"intel-gpu\" off (`enabled: false` in a copy of its definition in /etc/cdigen/generators.d)"
                }
            ]
        })
    );
    // Current: an empty list.
    fs::remove_file(tmp.path().join("cdi/other.json")).unwrap();
    generate(tmp.path());
    let (code, out) = check(tmp.path(), &["-o", "json"]);
    assert_eq!(code, 0);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        doc,
        serde_json::json!({"current": true, "checked": {"specs": 2, "deviceInfo": 0}, "findings": []})
    );
}

#[test]
fn a_generator_that_fails_is_a_finding() {
    let (tmp, _root) = machine("intel-laptop");
    generate(tmp.path());
    let tpl = tmp.path().join("tpl");
    fs::create_dir(&tpl).unwrap();
    fs::write(
        tpl.join("drm.json.hbs"),
        "{\"cdiVersion\": \"0.3.0\", \"kind\": {{json kind}}, \"devices\": [{{json no_such_thing}}]}\n",
    )
    .unwrap();
    let (code, out) = check(tmp.path(), &["--templates", "tpl"]);
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with(
            "failed: cdi/intel.com-gpu.yaml: generator \"intel-gpu\" (builtin:generators/intel-gpu.yaml): tpl/drm.json.hbs: "
        ),
        "{out}"
    );
    assert!(lines[0].contains("no_such_thing"), "{out}");
    assert!(
        lines[0].ends_with("; its files are left as they are"),
        "{out}"
    );
    assert!(
        lines[1].starts_with("failed: cdi/intel.com-npu.yaml: "),
        "{out}"
    );
    assert_eq!(
        lines[2],
        "not current: 0 spec files and 0 device-info files checked, 2 problems, 0 warnings"
    );
    assert_eq!(
        lines.len(),
        3,
        "both generators use the drm template: {out}"
    );
    assert_eq!(code, 1);
}

#[test]
fn usage_and_environment_errors_exit_2() {
    let (tmp, _root) = machine("intel-laptop");
    let (code, out, err) = cdigen(
        tmp.path(),
        &["check", "--root", "nowhere", "--output-dir", "cdi"],
    );
    assert_eq!((code, out.as_str()), (2, ""));
    assert!(
        err.starts_with("cdigen: cannot use nowhere as the root"),
        "{err}"
    );
    let (code, _, err) = cdigen(
        tmp.path(),
        &["check", "--root", "root", "--generator", "nope"],
    );
    assert_eq!(code, 2);
    assert!(
        err.starts_with("cdigen: unknown generator \"nope\""),
        "{err}"
    );
}

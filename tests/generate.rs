//! `cdigen generate` end to end on copies of fixture machines, changed to
//! exercise failures: broken definitions and templates, hostile or
//! unreadable sysfs entries, foreign files, stale files, dry runs.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[path = "support/machine.rs"]
mod support;

use std::fs;
use std::path::Path;

use support::{cdigen, machine};

const AMD: &str = "sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/0000:02:00.0/0000:03:00.0";

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .map(|e| {
            e.map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn broken_generator_file_fails_only_its_generator() {
    let (tmp, _root) = machine("example");
    let gens = tmp.path().join("gens");
    fs::create_dir(&gens).unwrap();
    fs::write(
        gens.join("mine.yaml"),
        "name: mine\nbackend: drm\nkind: example.com/gpu\ntemplate: drm\nvendorids: [\"0x1002\"]\n",
    )
    .unwrap();
    let (code, out, err) = cdigen(
        tmp.path(),
        &[
            "generate",
            "--root",
            "root",
            "--generators",
            "gens",
            "--output-dir",
            "cdi",
        ],
    );
    assert!(out.contains("created: cdi/amd.com-gpu.yaml"), "{out}");
    assert!(
        err.starts_with(
            "cdigen: generator \"mine\" not run (its files are left as they are): \
             gens/mine.yaml: unknown field `vendorids`"
        ),
        "{err}"
    );
    assert!(err.contains("line 5"), "the line is named: {err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(code, 1);
}

#[test]
fn bad_value_in_generator_names_field() {
    let (tmp, _root) = machine("example");
    let gens = tmp.path().join("gens");
    fs::create_dir(&gens).unwrap();
    fs::write(
        gens.join("mine.yaml"),
        "name: mine\nbackend: drm\nkind: x/gpu\ntemplate: drm\n",
    )
    .unwrap();
    let (code, _, err) = cdigen(
        tmp.path(),
        &[
            "generate",
            "--root",
            "root",
            "--generators",
            "gens",
            "--output-dir",
            "cdi",
        ],
    );
    assert_eq!(
        err,
        "cdigen: generator \"mine\" not run (its files are left as they are): gens/mine.yaml: kind: invalid vendor \"x\": must be at least 2 characters (released CDI libraries crash on 1)\n"
    );
    assert_eq!(code, 1);
    assert!(tmp.path().join("cdi/amd.com-gpu.yaml").is_file());
}

#[test]
fn template_with_missing_variable_writes_nothing() {
    let (tmp, _root) = machine("example");
    let tpl = tmp.path().join("tpl");
    fs::create_dir(&tpl).unwrap();
    fs::write(
        tpl.join("drm.json.hbs"),
        "{\"cdiVersion\": \"0.3.0\", \"kind\": {{json kind}}, \"devices\": [{{json no_such_thing}}]}\n",
    )
    .unwrap();
    let (code, out, err) = cdigen(
        tmp.path(),
        &[
            "generate",
            "--root",
            "root",
            "--backend",
            "drm",
            "--templates",
            "tpl",
            "--output-dir",
            "cdi",
        ],
    );
    assert_eq!(out, "");
    assert!(
        err.starts_with(
            "cdigen: generator \"amd-gpu\" (builtin:generators/amd-gpu.yaml): tpl/drm.json.hbs: "
        ),
        "{err}"
    );
    assert!(err.contains("no_such_thing"), "{err}");
    assert_eq!(code, 1);
    assert!(!tmp.path().join("cdi").exists(), "nothing may be written");
}

#[test]
fn unreadable_dev_file_skips_that_node_with_a_warning() {
    let (tmp, root) = machine("example");
    let dev = root.join(AMD).join("drm/card1/dev");
    fs::remove_file(&dev).unwrap();
    fs::create_dir(&dev).unwrap(); // reading it fails with EISDIR, even as root
    let (code, out, err) = cdigen(
        tmp.path(),
        &[
            "generate",
            "--root",
            "root",
            "--backend",
            "drm",
            "--output-dir",
            "cdi",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "created: cdi/amd.com-gpu.yaml (2 devices)\n");
    // The path once: the warning names it, the error only says why.
    assert!(
        err.contains(
            " WARN /sys/class/drm/card1/dev: a directory, not a regular file: not reading it; skipping card1\n"
        ),
        "{err}"
    );
    let spec = fs::read_to_string(tmp.path().join("cdi/amd.com-gpu.yaml")).unwrap();
    assert!(!spec.contains("/dev/dri/card1'"), "{spec}");
    assert!(spec.contains("/dev/dri/renderD128"), "{spec}");
}

#[test]
fn malformed_dev_value_is_skipped() {
    let (tmp, root) = machine("example");
    fs::write(root.join(AMD).join("drm/renderD128/dev"), "226:x\n").unwrap();
    let (code, _, err) = cdigen(
        tmp.path(),
        &[
            "generate",
            "--root",
            "root",
            "--backend",
            "drm",
            "--output-dir",
            "cdi",
        ],
    );
    assert_eq!(code, 0);
    assert!(
        err.contains(
            "/sys/class/drm/renderD128/dev: \"226:x\" is not MAJOR:MINOR; skipping renderD128"
        ),
        "{err}"
    );
}

#[test]
fn symlink_escaping_the_root_is_an_error_for_that_device_only() {
    let (tmp, root) = machine("example");
    let link = root.join(AMD).join("drm/card1/device");
    fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink("../../../../../../../../../../../../../etc", &link).unwrap();
    let (code, out, err) = cdigen(
        tmp.path(),
        &[
            "generate",
            "--root",
            "root",
            "--backend",
            "drm",
            "--output-dir",
            "cdi",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("points outside the root"), "{err}");
    assert!(
        err.contains("cannot tell which device card1 belongs to, skipping it"),
        "{err}"
    );
    // The render node still makes the AMD GPU a device.
    assert_eq!(out, "created: cdi/amd.com-gpu.yaml (2 devices)\n");
}

#[test]
fn hostile_uevent_devname_cannot_inject() {
    let (tmp, root) = machine("example");
    fs::write(
        root.join(AMD).join("drm/card1/uevent"),
        "MAJOR=226\nMINOR=1\nDEVNAME=dri/card1\", \"extra\": \"x\nDEVTYPE=drm_minor\n",
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
            "--format",
            "json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("is not a plain path below /dev: it "), "{err}");
    let spec: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(tmp.path().join("cdi/amd.com-gpu.json")).unwrap())
            .unwrap();
    assert_eq!(
        spec["devices"][0]["containerEdits"]["deviceNodes"][0],
        serde_json::json!({"path": "/dev/dri/card1", "type": "c", "major": 226, "minor": 1})
    );
}

#[test]
fn hostile_pci_name_is_data() {
    let (tmp, root) = machine("example");
    let ids = root.join("usr/share/misc/pci.ids");
    let text = fs::read_to_string(&ids).unwrap();
    let text = text.replace("Navi 31", "Navi \"31\", \"extra\": {{kind}} \\ \u{7}");
    fs::write(&ids, text).unwrap();
    let (code, out, err) = cdigen(tmp.path(), &["discover", "--root", "root", "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let name = doc["devices"][0]["pci"]["device_name"].as_str().unwrap();
    assert!(
        name.starts_with("Navi \"31\", \"extra\": {{kind}} \\ \u{7}"),
        "{name}"
    );
}

#[test]
fn foreign_file_defining_the_same_device_is_refused() {
    let (tmp, _root) = machine("example");
    let cdi = tmp.path().join("cdi");
    fs::create_dir(&cdi).unwrap();
    let foreign = "{\"cdiVersion\":\"0.5.0\",\"kind\":\"amd.com/gpu\",\"devices\":[{\"name\":\"0\",\"containerEdits\":{\"env\":[\"A=1\"]}}]}";
    fs::write(cdi.join("amd.json"), foreign).unwrap();
    let (code, out, err) = cdigen(
        tmp.path(),
        &[
            "generate",
            "--root",
            "root",
            "--backend",
            "drm",
            "--output-dir",
            "cdi",
        ],
    );
    assert_eq!(out, "");
    assert_eq!(
        err,
        "cdigen: not writing cdi/amd.com-gpu.yaml: amd.com/gpu=0 is already defined in cdi/amd.json, which cdigen did not write (runtimes would drop both definitions); it looks like the output of `amd-ctk cdi generate` (ROCm's container toolkit), which writes it each time it is run: stop running it (a script or cron job may), then remove cdi/amd.json; or, to keep that file, turn cdigen's generator \"amd-gpu\" off (`enabled: false` in a copy of its definition in /etc/cdigen/generators.d)\n"
    );
    assert_eq!(code, 1);
    assert_eq!(fs::read_to_string(cdi.join("amd.json")).unwrap(), foreign);
    assert!(!cdi.join("amd.com-gpu.yaml").exists());
}

/// Two of cdigen's generators defining one device in one run: the first
/// writes, and the second, checked after it, is refused naming the first's
/// file; `--dry-run` foresees the same, as the run it previews would see
/// the first file written.
#[test]
fn a_generator_written_earlier_in_the_run_keeps_a_later_one_from_its_names() {
    let (tmp, _root) = machine("intel-laptop");
    let defs = tmp.path().join("defs");
    fs::create_dir(&defs).unwrap();
    for name in ["a", "b"] {
        fs::write(
            defs.join(format!("{name}.yaml")),
            format!(
                "name: {name}\nbackend: drm\nkind: intel.com/gpu\nselect: {{vendor_ids: [\"0x8086\"], node_roles: [primary, render]}}\nnames: [index]\ntemplate: drm\noutput: {{file: {name}}}\n"
            ),
        )
        .unwrap();
    }
    let refusal = "cdigen: not writing cdi/b.yaml: intel.com/gpu=0 is already defined in cdi/a.yaml, \
which cdigen's generator \"a\" wrote; runtimes would drop both definitions\n";
    let args = [
        "generate",
        "--root",
        "root",
        "--output-dir",
        "cdi",
        "--generators",
        "defs",
        "--generator",
        "a",
        "--generator",
        "b",
        "-q",
    ];
    let mut dry = args.to_vec();
    dry.push("--dry-run");
    let (code, _, err) = cdigen(tmp.path(), &dry);
    assert_eq!((code, err.as_str()), (1, refusal));
    assert!(!tmp.path().join("cdi").exists());
    let (code, _, err) = cdigen(tmp.path(), &args);
    assert_eq!((code, err.as_str()), (1, refusal));
    assert!(tmp.path().join("cdi/a.yaml").exists());
    assert!(!tmp.path().join("cdi/b.yaml").exists());
}

#[test]
fn foreign_file_with_a_non_utf8_name_defining_the_same_device_is_refused() {
    use std::os::unix::ffi::OsStrExt;
    // Runtimes load a *.json by its name's bytes, UTF-8 or not.
    let (tmp, _root) = machine("example");
    let cdi = tmp.path().join("cdi");
    fs::create_dir(&cdi).unwrap();
    let foreign = "{\"cdiVersion\":\"0.5.0\",\"kind\":\"amd.com/gpu\",\"devices\":[{\"name\":\"0\",\"containerEdits\":{\"env\":[\"A=1\"]}}]}";
    let name = std::ffi::OsStr::from_bytes(b"amd\xff.json");
    fs::write(cdi.join(name), foreign).unwrap();
    let (code, out, err) = cdigen(
        tmp.path(),
        &[
            "generate",
            "--root",
            "root",
            "--backend",
            "drm",
            "--output-dir",
            "cdi",
        ],
    );
    assert_eq!(out, "");
    assert_eq!(
        err,
        "cdigen: not writing cdi/amd.com-gpu.yaml: amd.com/gpu=0 is already defined in cdi/amd\u{fffd}.json, which cdigen did not write (runtimes would drop both definitions); remove cdi/amd\u{fffd}.json (or move it out of the spec directories) if cdigen is to provide these devices; or, to keep that file, turn cdigen's generator \"amd-gpu\" off (`enabled: false` in a copy of its definition in /etc/cdigen/generators.d)\n"
    );
    assert_eq!(code, 1);
    assert!(!cdi.join("amd.com-gpu.yaml").exists());
}

#[test]
fn foreign_file_with_our_name_is_never_overwritten() {
    let (tmp, _root) = machine("example");
    let cdi = tmp.path().join("cdi");
    fs::create_dir(&cdi).unwrap();
    fs::write(cdi.join("amd.com-gpu.yaml"), "# mine\n").unwrap();
    let (code, _, err) = cdigen(
        tmp.path(),
        &[
            "generate",
            "--root",
            "root",
            "--backend",
            "drm",
            "--output-dir",
            "cdi",
        ],
    );
    assert_eq!(
        err,
        "cdigen: refusing to overwrite cdi/amd.com-gpu.yaml: not written by cdigen, or changed since (remove it or move it away first)\n"
    );
    assert_eq!(code, 1);
    assert_eq!(
        fs::read_to_string(cdi.join("amd.com-gpu.yaml")).unwrap(),
        "# mine\n"
    );
}

#[test]
fn stale_spec_is_removed_when_the_device_goes_away() {
    let (tmp, root) = machine("example");
    let (code, out, _) = cdigen(
        tmp.path(),
        &[
            "generate",
            "--root",
            "root",
            "--backend",
            "drm",
            "--output-dir",
            "cdi",
        ],
    );
    assert_eq!(code, 0);
    assert_eq!(out, "created: cdi/amd.com-gpu.yaml (2 devices)\n");
    // Unplug the AMD GPU: drop its DRM class entries.
    for n in ["card1", "renderD128"] {
        fs::remove_file(root.join("sys/class/drm").join(n)).unwrap();
    }
    let (code, out, err) = cdigen(
        tmp.path(),
        &[
            "generate",
            "--root",
            "root",
            "--backend",
            "drm",
            "--output-dir",
            "cdi",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "removed: cdi/amd.com-gpu.yaml (0 devices)\n");
    assert_eq!(
        names_in(&tmp.path().join("cdi")),
        [".cdigen-state", ".cdigen.lock"]
    );
}

/// A `--root` that is not a host (one level too high, or a chroot whose
/// sysfs is not mounted) is an error naming what is missing, with a hint;
/// no spec or device-info file is removed. `discover` refuses it too.
#[test]
fn a_root_that_is_not_a_host_is_an_error_and_removes_nothing() {
    let (tmp, root) = machine("example");
    let generate = |root: &str| {
        cdigen(
            tmp.path(),
            &["generate", "--root", root, "--output-dir", "cdi", "-vv"],
        )
    };
    let (code, _, err) = generate("root");
    assert_eq!(code, 0, "{err}");
    let cdi = tmp.path().join("cdi");
    let devinfo = tmp.path().join("devinfo");
    let (specs, infos) = (names_in(&cdi), names_in(&devinfo));
    assert!(specs.len() > 2 && infos.len() > 2, "{specs:?} {infos:?}");

    // The directory above the root.
    let (code, out, err) = generate(".");
    assert_eq!(code, 2, "{out}");
    assert_eq!(out, "");
    assert!(
        err.ends_with(
            "cdigen: . does not look like a Linux host: sys/devices, sys/bus and sys/class are \
             missing (did you mean ./root?)\n"
        ),
        "{err}"
    );
    // A root whose sysfs is not mounted: an empty sys/.
    fs::rename(root.join("sys"), tmp.path().join("sys.away")).unwrap();
    fs::create_dir(root.join("sys")).unwrap();
    let (code, out, err) = generate("root");
    assert_eq!(code, 2, "{out}");
    assert!(
        err.ends_with(
            "cdigen: root does not look like a Linux host: sys/devices, sys/bus and sys/class are \
             missing (root/sys is empty: is sysfs mounted?)\n"
        ),
        "{err}"
    );
    // One of them missing: named alone.
    fs::remove_dir(root.join("sys")).unwrap();
    fs::rename(tmp.path().join("sys.away"), root.join("sys")).unwrap();
    fs::rename(root.join("sys/class"), tmp.path().join("class.away")).unwrap();
    let (code, _, err) = generate("root");
    assert_eq!(code, 2);
    assert!(
        err.ends_with("cdigen: root does not look like a Linux host: sys/class is missing\n"),
        "{err}"
    );
    let (code, out, err) = cdigen(tmp.path(), &["discover", "--root", "root"]);
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    assert!(err.contains("sys/class is missing"), "{err}");
    assert_eq!(names_in(&cdi), specs, "no spec removed");
    assert_eq!(names_in(&devinfo), infos, "no device-info file removed");

    // Back: nothing to do.
    fs::rename(tmp.path().join("class.away"), root.join("sys/class")).unwrap();
    let (code, out, err) = generate("root");
    assert_eq!(code, 0, "{err}");
    assert!(
        !out.is_empty() && out.lines().all(|l| l.starts_with("unchanged: ")),
        "{out}"
    );
}

#[test]
fn dry_run_with_diff_writes_nothing() {
    let (tmp, _root) = machine("intel-laptop");
    let (code, out, err) = cdigen(
        tmp.path(),
        &[
            "generate",
            "--root",
            "root",
            "--output-dir",
            "cdi",
            "--dry-run",
            "--diff",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("would be created: cdi/intel.com-gpu.yaml (2 devices)\n--- a/cdi/intel.com-gpu.yaml\n+++ b/cdi/intel.com-gpu.yaml\n"), "{out}");
    assert!(out.contains("+kind: 'intel.com/gpu'\n"), "{out}");
    assert!(
        out.contains("would be created: cdi/intel.com-npu.yaml (2 devices)\n"),
        "{out}"
    );
    assert!(!tmp.path().join("cdi").exists());
}

#[test]
fn output_to_stdout_needs_exactly_one_spec() {
    let (tmp, _root) = machine("intel-laptop");
    let (code, _, err) = cdigen(tmp.path(), &["generate", "--root", "root", "--output", "-"]);
    assert_eq!(
        err,
        "cdigen: --output writes one spec, but 2 generators produced one (intel-gpu, intel-npu); pick one with --generator\n"
    );
    assert_eq!(code, 2);
    let (code, out, err) = cdigen(
        tmp.path(),
        &[
            "generate",
            "--root",
            "root",
            "--output",
            "-",
            "--generator",
            "intel-npu",
            "--format",
            "json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let spec: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(spec["kind"], "intel.com/npu");
    assert_eq!(spec["cdiVersion"], "0.5.0");
}

#[test]
fn output_to_a_file_uses_its_extension() {
    let (tmp, _root) = machine("intel-laptop");
    let (code, out, err) = cdigen(
        tmp.path(),
        &[
            "generate",
            "--root",
            "root",
            "--output",
            "out/gpu.json",
            "--generator",
            "intel-gpu",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "created: out/gpu.json\n");
    let spec: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(tmp.path().join("out/gpu.json")).unwrap())
            .unwrap();
    assert_eq!(spec["kind"], "intel.com/gpu");
    let (code, _, err) = cdigen(
        tmp.path(),
        &[
            "generate",
            "--root",
            "root",
            "--output",
            "out/gpu.yml",
            "--generator",
            "intel-gpu",
        ],
    );
    assert_eq!(
        err,
        "cdigen: out/gpu.yml: the file name must end in .json or .yaml (runtimes load only those)\n"
    );
    assert_eq!(code, 2);
}

#[test]
fn unknown_backend_and_generator_are_usage_errors() {
    let (tmp, _root) = machine("empty");
    let (code, _, err) = cdigen(
        tmp.path(),
        &["discover", "--root", "root", "--backend", "gpu"],
    );
    assert_eq!(
        err,
        "cdigen: unknown backend \"gpu\" (known: drm, vfio, sriov, vdpa, rdma, nvidia, generic, static)\n"
    );
    assert_eq!(code, 2);
    let (code, _, err) = cdigen(
        tmp.path(),
        &[
            "generate",
            "--root",
            "root",
            "--generator",
            "nope",
            "--output-dir",
            "cdi",
        ],
    );
    assert_eq!(
        err,
        "cdigen: unknown generator \"nope\" (known: accel, alsa, amd-gpu, bmc-display, dma-heap, drm, gaudi, generic-tty, intel-gpu, intel-gpu-mei, intel-npu, nvidia, nvidia-gdrcopy, nvidia-gds, nvidia-imex, nvidia-management, rdma, rdma-shared, sriov, usb-serial, vdpa, vfio, xdma)\n"
    );
    assert_eq!(code, 2);
}

#[test]
fn the_nvidia_backend_claims_nvidia_gpus_from_drm() {
    let (tmp, _root) = machine("example");
    let gens = tmp.path().join("gens");
    fs::create_dir(&gens).unwrap();
    fs::write(
        gens.join("nv.yaml"),
        "name: nv-drm\nbackend: drm\nkind: example.com/nvdrm\nselect:\n  vendor_ids: [\"0x10de\"]\nnames: [pci, node]\ntemplate: drm\n",
    )
    .unwrap();
    // A DRM generator for NVIDIA GPUs finds nothing: the NVIDIA backend
    // owns them, whatever generator asks.
    let (code, _, err) = cdigen(
        tmp.path(),
        &[
            "generate",
            "--root",
            "root",
            "--generators",
            "gens",
            "--generator",
            "nv-drm",
            "--output",
            "-",
        ],
    );
    assert_eq!(
        err,
        "cdigen: no device matched the selected generators: nothing to write\n"
    );
    assert_eq!(code, 2);
    // The NVIDIA spec has the GPU's DRM nodes; owner: true takes mode and
    // owner from the host's /dev (the manifest).
    fs::write(
        gens.join("nvidia.yaml"),
        "name: nvidia\nbackend: nvidia\nkind: nvidia.com/gpu\nnames: [index]\ntemplate: nvidia\noutput:\n  format: json\ndevice_nodes:\n  owner: true\n",
    )
    .unwrap();
    let (code, out, err) = cdigen(
        tmp.path(),
        &[
            "generate",
            "--root",
            "root",
            "--generators",
            "gens",
            "--generator",
            "nvidia",
            "--output",
            "-",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let spec: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(spec["devices"][0]["name"], "0");
    assert_eq!(
        spec["devices"][0]["containerEdits"]["deviceNodes"][1],
        serde_json::json!({"path": "/dev/dri/card0", "type": "c", "major": 226, "fileMode": 0o660, "gid": 44, "uid": 0})
    );
}

/// The Arduino Uno of `serial-host` (a ttyACM named by its serial number).
const ARDUINO: &str = "sys/devices/pci0000:00/0000:00:08.1/0000:0e:00.3/usb1/1-3";

#[test]
fn unescaped_template_output_is_refused_so_a_usb_product_cannot_inject_env() {
    let (tmp, root) = machine("serial-host");
    fs::write(
        root.join(ARDUINO).join("product"),
        "Uno\", \"LD_PRELOAD=/tmp/evil.so\n",
    )
    .unwrap();
    let tpl = tmp.path().join("tpl");
    fs::create_dir(&tpl).unwrap();
    let template = "{\"cdiVersion\": \"0.3.0\", \"kind\": {{json kind}}, \"devices\": [\
        {{#each devices}}{{#unless @first}},{{/unless}}{\"name\": {{json name}}, \
        \"containerEdits\": {\"env\": [\"PRODUCT_{{name_env}}=VALUE\"]}}{{/each}}]}\n";
    let col = template.find("VALUE").unwrap() + 1;
    let generate = || {
        cdigen(
            tmp.path(),
            &[
                "generate",
                "--root",
                "root",
                "--generator",
                "usb-serial",
                "--templates",
                "tpl",
                "--output-dir",
                "cdi",
                "--format",
                "json",
            ],
        )
    };
    for raw in [
        "{{~{members.0.attrs.product}~}}",
        "{{ {members.0.attrs.product} }}",
        "{{~&members.0.attrs.product}}",
        "{{{members.0.attrs.product}}}",
        "{{& members.0.attrs.product}}",
    ] {
        fs::write(tpl.join("generic.json.hbs"), template.replace("VALUE", raw)).unwrap();
        let (code, out, err) = generate();
        assert_eq!(out, "", "{raw}");
        assert_eq!(
            err,
            format!(
                "cdigen: tpl/generic.json.hbs: line 1, col {col}: unescaped output ({{{{{{value}}}}}} \
                 or {{{{&value}}}}, in any spelling) is not allowed: use {{{{json value}}}} or \
                 \"{{{{value}}}}\", which escape values as JSON\n"
            ),
            "{raw}"
        );
        assert_eq!(code, 2, "{raw}");
        assert!(!tmp.path().join("cdi").exists(), "nothing may be written");
    }
    // Escaped, the product string is one env entry, as data.
    fs::write(
        tpl.join("generic.json.hbs"),
        template.replace("VALUE", "{{members.0.attrs.product}}"),
    )
    .unwrap();
    let (code, _, err) = generate();
    assert_eq!(code, 0, "{err}");
    let spec: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(tmp.path().join("cdi/cdigen.io-serial.json")).unwrap(),
    )
    .unwrap();
    let uno = spec["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "85734323231351E0E1A1")
        .unwrap();
    assert_eq!(
        uno["containerEdits"]["env"],
        serde_json::json!(["PRODUCT_85734323231351E0E1A1=Uno\", \"LD_PRELOAD=/tmp/evil.so"])
    );
}

/// A contract-2 template (docs/generators.md): its device part renders each
/// CDI device on its own, values as data; what it writes that is not one
/// CDI device, and a contract this version does not know, are refused
/// naming the file (and the device).
#[test]
fn a_contract_2_user_template_renders_each_device_and_names_what_is_wrong() {
    let (tmp, root) = machine("serial-host");
    fs::write(
        root.join(ARDUINO).join("product"),
        "Uno\", \"LD_PRELOAD=/tmp/evil.so\n",
    )
    .unwrap();
    let tpl = tmp.path().join("tpl");
    fs::create_dir(&tpl).unwrap();
    let template = "{{!-- cdigen-template: 2 --}}\n{{#*inline \"device\"}}\nDEVICE\n{{/inline}}\n\
        {\"cdiVersion\": \"0.3.0\", \"kind\": {{json kind}}}\n";
    let one = "{\"name\": {{json name}}, \"containerEdits\": {\"env\": \
        [\"PRODUCT_{{name_env}}={{members.0.attrs.product}}\"]}}";
    let generate = |device: &str| {
        fs::write(
            tpl.join("generic.json.hbs"),
            template.replace("DEVICE", device),
        )
        .unwrap();
        cdigen(
            tmp.path(),
            &[
                "generate",
                "--root",
                "root",
                "--generator",
                "usb-serial",
                "--templates",
                "tpl",
                "--output-dir",
                "cdi",
                "--format",
                "json",
            ],
        )
    };
    // One device part that writes two devices: the generator fails,
    // naming the file and the CDI device, and writes nothing.
    let (code, out, err) = generate(&format!("{one}\n{one}"));
    assert_eq!(out, "");
    assert_eq!(
        err,
        "cdigen: generator \"usb-serial\" (builtin:generators/usb-serial.yaml): \
         tpl/generic.json.hbs: device part, CDI device \"85734323231351E0E1A1\": rendered \
         output is not one valid CDI device: invalid JSON: trailing characters at line 2 \
         column 1\n"
    );
    assert_eq!(code, 1);
    assert!(!tmp.path().join("cdi").exists(), "nothing may be written");
    // A contract this version does not know is refused at load.
    fs::write(
        tpl.join("generic.json.hbs"),
        template
            .replace("DEVICE", one)
            .replace("cdigen-template: 2", "cdigen-template: 3"),
    )
    .unwrap();
    let (code, out, err) = cdigen(
        tmp.path(),
        &[
            "generate",
            "--root",
            "root",
            "--templates",
            "tpl",
            "--output-dir",
            "cdi",
        ],
    );
    assert_eq!(out, "");
    assert_eq!(
        err,
        "cdigen: tpl/generic.json.hbs: line 1, col 1: template contract 3 is not known to this \
         cdigen (it knows 1, 2): write the template to one of those\n"
    );
    assert_eq!(code, 2);
    assert!(!tmp.path().join("cdi").exists(), "nothing may be written");
    // Written right, the product string is one env entry, as data.
    let (code, _, err) = generate(one);
    assert_eq!(code, 0, "{err}");
    let spec: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(tmp.path().join("cdi/cdigen.io-serial.json")).unwrap(),
    )
    .unwrap();
    let uno = spec["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "85734323231351E0E1A1")
        .unwrap();
    assert_eq!(
        uno["containerEdits"]["env"],
        serde_json::json!(["PRODUCT_85734323231351E0E1A1=Uno\", \"LD_PRELOAD=/tmp/evil.so"])
    );
}

#[test]
fn two_generators_writing_one_spec_are_refused_at_load() {
    // The README's recipe done halfway: sriov.yaml copied and renamed, its
    // kind kept. Both would write cdigen.io-vf.yaml, each run undoing the
    // other's.
    let (tmp, _root) = machine("example");
    let gens = tmp.path().join("gens");
    fs::create_dir(&gens).unwrap();
    let sriov =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("generators/sriov.yaml"))
            .unwrap();
    fs::write(
        gens.join("pool.yaml"),
        sriov.replace("name: sriov", "name: my-pool"),
    )
    .unwrap();
    let common = [
        "--root",
        "root",
        "--generators",
        "gens",
        "--output-dir",
        "cdi",
    ];
    for (cmd, extra) in [
        ("generate", &[][..]),
        ("check", &[][..]),
        // Naming one of them does not help: the other one writes the file
        // on the next plain run.
        ("generate", &["--generator", "my-pool"][..]),
    ] {
        let args: Vec<&str> = [cmd].iter().chain(&common).chain(extra).copied().collect();
        let (code, out, err) = cdigen(tmp.path(), &args);
        assert_eq!(out, "", "{args:?}");
        assert_eq!(
            err,
            "cdigen: generators \"sriov\" (builtin:generators/sriov.yaml) and \"my-pool\" \
             (gens/pool.yaml) both write cdigen.io-vf.yaml: give one a different kind or \
             output.file\n",
            "{args:?}"
        );
        assert_eq!(code, 2, "{args:?}");
        assert!(!tmp.path().join("cdi").exists(), "nothing may be written");
        assert!(
            !tmp.path().join("devinfo").exists(),
            "nothing may be written"
        );
    }
    // With a kind of its own, both are written.
    fs::write(
        gens.join("pool.yaml"),
        sriov
            .replace("name: sriov", "name: my-pool")
            .replace("kind: cdigen.io/vf", "kind: example.com/pool"),
    )
    .unwrap();
    let (code, _, err) = cdigen(
        tmp.path(),
        &[
            "generate",
            "--root",
            "root",
            "--generators",
            "gens",
            "--output-dir",
            "cdi",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let names = names_in(&tmp.path().join("cdi"));
    assert!(
        names.contains(&"cdigen.io-vf.yaml".to_string()),
        "{names:?}"
    );
    assert!(
        names.contains(&"example.com-pool.yaml".to_string()),
        "{names:?}"
    );
}

/// `generators/nvidia.yaml` with its `driver:` section replaced by `driver`.
fn nvidia_definition(gens: &Path, driver: &str) {
    let builtin =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("generators/nvidia.yaml"))
            .unwrap();
    let (head, rest) = builtin.split_once("driver:\n").unwrap();
    let (_, tail) = rest.split_once("output:").unwrap();
    fs::create_dir_all(gens).unwrap();
    fs::write(
        gens.join("nvidia.yaml"),
        format!("{head}{driver}\noutput:{tail}"),
    )
    .unwrap();
}

fn generate_nvidia(tmp: &Path, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec![
        "generate",
        "--root",
        "root",
        "--generator",
        "nvidia",
        "--output-dir",
        "cdi",
    ];
    args.extend(extra);
    cdigen(tmp, &args)
}

#[test]
fn without_libcuda_the_nvidia_generator_fails_saying_where_it_looked() {
    let (tmp, root) = machine("h100-vm");
    fs::remove_dir_all(root.join("run/nvidia/driver")).unwrap();
    let (code, out, err) = generate_nvidia(tmp.path(), &[]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains(
            "generator \"nvidia\": no libcuda.so.580.159.04 under the driver root /: looked in \
             /etc/ld.so.cache (not usable) and /usr/lib/x86_64-linux-gnu, \
             /usr/lib/aarch64-linux-gnu, /usr/lib64, /lib/x86_64-linux-gnu, \
             /lib/aarch64-linux-gnu, /lib64, /usr/lib, /lib; point --driver-root or \
             --library-search-path at the driver's files; not writing a spec without the \
             driver's libraries (set `driver: {files: optional}` or `{files: none}` in \
             builtin:generators/nvidia.yaml for specs with device nodes only)"
        ),
        "{err}"
    );
    assert!(!tmp.path().join("cdi/nvidia.com-gpu.yaml").exists());

    // The opt-out: device nodes only.
    nvidia_definition(&tmp.path().join("gens"), "driver:\n  files: none");
    let (code, _, err) = generate_nvidia(tmp.path(), &["--generators", "gens"]);
    assert_eq!(code, 0, "{err}");
    let spec = fs::read_to_string(tmp.path().join("cdi/nvidia.com-gpu.yaml")).unwrap();
    assert!(spec.contains("/dev/nvidia0") && !spec.contains("mounts:") && !spec.contains("hooks:"));
}

#[test]
fn a_driver_tree_of_another_version_fails_the_generator() {
    let (tmp, root) = machine("h100-vm");
    let lib = root.join("run/nvidia/driver/lib");
    fs::rename(
        lib.join("libcuda.so.580.159.04"),
        lib.join("libcuda.so.575.57.08"),
    )
    .unwrap();
    let (code, _, err) = generate_nvidia(tmp.path(), &[]);
    assert_eq!(code, 1);
    assert!(
        err.contains(
            "the running driver is 580.159.04 (/proc/driver/nvidia/version) but the libraries \
             under /run/nvidia/driver are 575.57.08 (/run/nvidia/driver/lib/libcuda.so.575.57.08)"
        ),
        "{err}"
    );
    // `optional`: what there is, with a warning.
    nvidia_definition(&tmp.path().join("gens"), "driver:\n  files: optional");
    let (code, _, err) = generate_nvidia(tmp.path(), &["--generators", "gens"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("writing the spec without the driver's libraries"),
        "{err}"
    );
    let spec = fs::read_to_string(tmp.path().join("cdi/nvidia.com-gpu.yaml")).unwrap();
    assert!(spec.contains("libnvidia-ml.so.580.159.04") && !spec.contains("libcuda.so"));
}

#[test]
fn without_hooks_links_are_bind_mounts_and_capabilities_select() {
    let (tmp, _root) = machine("old-driver");
    nvidia_definition(
        &tmp.path().join("gens"),
        "driver:\n  capabilities: [compute]\n  hooks: false",
    );
    let (code, _, err) = generate_nvidia(tmp.path(), &["--generators", "gens"]);
    assert_eq!(code, 0, "{err}");
    let spec = fs::read_to_string(tmp.path().join("cdi/nvidia.com-gpu.yaml")).unwrap();
    assert!(!spec.contains("hooks:"), "{spec}");
    for path in [
        "/usr/lib64/libcuda.so.535.183.01",
        "/usr/lib64/libcuda.so.1",
        "/usr/lib64/libcuda.so'",
    ] {
        assert!(
            spec.contains(&format!("containerPath: '{path}")),
            "{path}: {spec}"
        );
    }
    // compute only: no NVML (utility), no EGL (graphics)
    assert!(
        !spec.contains("libnvidia-ml") && !spec.contains("libEGL"),
        "{spec}"
    );
}

#[test]
fn a_driver_section_is_only_for_the_nvidia_backend() {
    let (tmp, _root) = machine("example");
    let gens = tmp.path().join("gens");
    fs::create_dir(&gens).unwrap();
    fs::write(
        gens.join("mine.yaml"),
        "name: mine\nbackend: drm\nkind: example.com/gpu\ntemplate: drm\ndriver:\n  hooks: false\n",
    )
    .unwrap();
    let (code, _, err) = cdigen(
        tmp.path(),
        &[
            "generate",
            "--root",
            "root",
            "--generators",
            "gens",
            "--output-dir",
            "cdi",
        ],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("driver: only for backend nvidia (backend drm has no driver files)"),
        "{err}"
    );
}

// ------------------------------------------------- other producers of our names

/// nvidia-ctk's `nvidia-cdi-refresh` output: `nvidia.com/gpu` devices `0`
/// and `all`, as the example machine's NVIDIA generator names them.
const NVIDIA_CTK_SPEC: &str = "{\"cdiVersion\":\"0.5.0\",\"kind\":\"nvidia.com/gpu\",\"devices\":[{\"name\":\"0\",\"containerEdits\":{\"env\":[\"A=1\"]}},{\"name\":\"all\",\"containerEdits\":{\"env\":[\"A=1\"]}}]}";

/// How cdigen says that nvidia-ctk's refresh units write `file`.
fn nvidia_ctk_fix(file: &str) -> String {
    format!(
        "it is written by nvidia-ctk's nvidia-cdi-refresh units: stop them with \
         `systemctl disable --now nvidia-cdi-refresh.path nvidia-cdi-refresh.service` and \
         `systemctl mask nvidia-cdi-refresh.service` (the toolkit's udev rule starts the service \
         whenever the driver's devices appear, enabled or not), then remove {file}{KEEP_NVIDIA}"
    )
}

/// The alternative every refusal over another tool's file offers.
const KEEP_NVIDIA: &str = "; or, to keep that file, turn cdigen's generator \"nvidia\" off \
    (`enabled: false` in a copy of its definition in /etc/cdigen/generators.d)";

/// The example machine with the host's `/var/run` a link to `/run` (as on
/// most distributions) and nvidia-ctk's spec in `/run/cdi`: generate
/// writes to the root's `/etc/cdi`, as a driver hook does, and the
/// standard spec directories are read under the root.
fn machine_with_nvidia_ctk() -> tempfile::TempDir {
    let (tmp, root) = machine("example");
    fs::create_dir_all(root.join("run/cdi")).unwrap();
    fs::create_dir_all(root.join("var")).unwrap();
    std::os::unix::fs::symlink("/run", root.join("var/run")).unwrap();
    fs::write(root.join("run/cdi/nvidia.yaml"), NVIDIA_CTK_SPEC).unwrap();
    tmp
}

const TO_ETC: [&str; 5] = ["--root", "root", "--output-dir", "root/etc/cdi", "-q"];

#[test]
fn nvidia_ctks_spec_in_the_other_standard_dir_keeps_ours_unwritten_and_says_how_to_stop_it() {
    let tmp = machine_with_nvidia_ctk();
    let expected = format!(
        "cdigen: not writing root/etc/cdi/nvidia.com-gpu.yaml: nvidia.com/gpu=0 is already defined in \
         root/run/cdi/nvidia.yaml, which cdigen did not write (runtimes would use only the definition \
         in the later spec directory); {}\n",
        nvidia_ctk_fix("root/run/cdi/nvidia.yaml")
    );
    // The dry run refuses as the real run does.
    let mut args = vec!["generate"];
    args.extend(TO_ETC);
    args.push("--dry-run");
    let (code, out, err) = cdigen(tmp.path(), &args);
    assert_eq!(err, expected);
    assert!(!out.contains("nvidia.com-gpu"), "{out}");
    assert!(
        out.contains("would be created: root/etc/cdi/amd.com-gpu.yaml"),
        "{out}"
    );
    assert_eq!(code, 1);
    // The NVIDIA generator fails; the others write their specs.
    args.pop();
    let (code, _, err) = cdigen(tmp.path(), &args);
    assert_eq!(err, expected);
    assert_eq!(code, 1);
    assert_eq!(
        support::visible_names(&tmp.path().join("root/etc/cdi")),
        [
            "amd.com-gpu.yaml",
            "cdigen.io-rdma.yaml",
            "cdigen.io-vdpa.yaml",
            "cdigen.io-vf.yaml",
            "cdigen.io-vfio.yaml"
        ]
    );
    assert_eq!(
        fs::read_to_string(tmp.path().join("root/run/cdi/nvidia.yaml")).unwrap(),
        NVIDIA_CTK_SPEC
    );
    // check: a finding of its own kind, per device.
    let mut args = vec!["check"];
    args.extend(TO_ETC);
    let (code, out, _) = cdigen(tmp.path(), &args);
    let finding = |device: &str| {
        format!(
            "competing: root/etc/cdi/nvidia.com-gpu.yaml: nvidia.com/gpu={device}: also defined in \
             root/run/cdi/nvidia.yaml, which cdigen did not write: runtimes would use only the \
             definition in the later spec directory, and generate will not write this file; {}\n",
            nvidia_ctk_fix("root/run/cdi/nvidia.yaml")
        )
    };
    assert_eq!(
        out,
        format!(
            "missing: root/etc/cdi/nvidia.com-gpu.yaml: not on disk: generate would write it (5 devices)\n\
             {}{}not current: 6 spec files and 6 device-info files checked, 3 problems, 0 warnings\n",
            finding("0"),
            finding("all")
        )
    );
    assert_eq!(code, 1);
    // Gone (the units disabled, the file removed): ours is written.
    fs::remove_file(tmp.path().join("root/run/cdi/nvidia.yaml")).unwrap();
    let mut args = vec!["generate"];
    args.extend(TO_ETC);
    let (code, _, err) = cdigen(tmp.path(), &args);
    assert_eq!((code, err.as_str()), (0, ""));
    assert!(
        tmp.path()
            .join("root/etc/cdi/nvidia.com-gpu.yaml")
            .is_file()
    );
}

#[test]
fn cdigens_own_spec_in_the_other_standard_dir_is_not_another_producer() {
    let tmp = machine_with_nvidia_ctk();
    fs::remove_file(tmp.path().join("root/run/cdi/nvidia.yaml")).unwrap();
    // cdigen writes the NVIDIA spec to /var/run/cdi (watch, say) and to
    // /etc/cdi (a driver hook): both its own. (root/var/run is a link to
    // the host's /run: the output directory is named by its real path.)
    for dir in ["root/run/cdi", "root/etc/cdi"] {
        let (code, out, err) = cdigen(
            tmp.path(),
            &[
                "generate",
                "--root",
                "root",
                "--output-dir",
                dir,
                "--generator",
                "nvidia",
            ],
        );
        assert_eq!((code, err.as_str()), (0, ""), "{dir}");
        assert_eq!(
            out,
            format!("created: {dir}/nvidia.com-gpu.yaml (5 devices)\n")
        );
    }
    // The one in /etc/cdi is overridden by the one in /var/run/cdi: that is
    // shadowing (check's own finding), not another tool.
    let (code, out, _) = cdigen(
        tmp.path(),
        &[
            "check",
            "--root",
            "root",
            "--output-dir",
            "root/etc/cdi",
            "--generator",
            "nvidia",
        ],
    );
    assert!(!out.contains("competing"), "{out}");
    assert_eq!(
        out.lines().next().unwrap(),
        "shadowed: root/etc/cdi/nvidia.com-gpu.yaml: nvidia.com/gpu=0: overridden by \
         root/run/cdi/nvidia.com-gpu.yaml: a later spec directory wins, so runtimes use that \
         definition, not this one"
    );
    assert_eq!(code, 1);
}

#[test]
fn other_tools_files_are_recognized_by_name_directory_and_kind() {
    use cdigen::generate::coexist::Producer;
    let p = |path: &str, kind: &str| Producer::recognize(Path::new(path), kind);
    // nvidia-cdi-refresh writes /var/run/cdi (= /run/cdi), under any root.
    for path in [
        "/var/run/cdi/nvidia.yaml",
        "/run/cdi/nvidia.yaml",
        "/host/run/cdi/nvidia.json",
    ] {
        assert_eq!(
            p(path, "nvidia.com/gpu"),
            Some(Producer::NvidiaCdiRefresh),
            "{path}"
        );
    }
    // NVIDIA's documented place for a hand-run `nvidia-ctk cdi generate`.
    for path in ["/etc/cdi/nvidia.yaml", "/host/etc/cdi/nvidia.json"] {
        assert_eq!(
            p(path, "nvidia.com/gpu"),
            Some(Producer::NvidiaCtkGenerate),
            "{path}"
        );
    }
    assert_eq!(
        p("/etc/cdi/amd.json", "amd.com/gpu"),
        Some(Producer::AmdCtk)
    );
    assert_eq!(
        p("/etc/cdi/intel.com-gpu.yaml", "intel.com/gpu"),
        Some(Producer::IntelCdiSpecsGenerator)
    );
    assert_eq!(
        p("/etc/cdi/intel.com-npu.yaml", "intel.com/npu"),
        Some(Producer::IntelCdiSpecsGenerator)
    );
    // Another name or kind: an unknown producer.
    assert_eq!(p("/etc/cdi/nvidia.yaml", "example.com/gpu"), None);
    assert_eq!(p("/run/cdi/gpus.yaml", "nvidia.com/gpu"), None);
    assert_eq!(p("/etc/cdi/amd.yaml", "amd.com/gpu"), None);
    assert_eq!(
        Producer::AmdCtk.how_to_stop(Path::new("/etc/cdi/amd.json")),
        "it looks like the output of `amd-ctk cdi generate` (ROCm's container toolkit), which \
         writes it each time it is run: stop running it (a script or cron job may), then remove \
         /etc/cdi/amd.json"
    );
    assert_eq!(
        cdigen::generate::coexist::fix(None, Path::new("/etc/cdi/x.yaml"), "drm"),
        "remove /etc/cdi/x.yaml (or move it out of the spec directories) if cdigen is to provide \
         these devices; or, to keep that file, turn cdigen's generator \"drm\" off (`enabled: \
         false` in a copy of its definition in /etc/cdigen/generators.d)"
    );
}

/// NVIDIA's documented `nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`,
/// met by the boot unit's run into /var/run/cdi: not blamed on the refresh
/// units (whose advice would not help); the other generators still write,
/// and the exit status says the run was not whole.
#[test]
fn a_hand_written_nvidia_spec_in_etc_cdi_gets_its_own_advice_not_the_refresh_units() {
    let (tmp, root) = machine("example");
    fs::create_dir_all(root.join("etc/cdi")).unwrap();
    fs::write(root.join("etc/cdi/nvidia.yaml"), NVIDIA_CTK_SPEC).unwrap();
    let args = [
        "generate",
        "--root",
        "root",
        "--output-dir",
        "root/run/cdi",
        "-q",
    ];
    let (code, _, err) = cdigen(tmp.path(), &args);
    assert_eq!(
        err,
        format!(
            "cdigen: not writing root/run/cdi/nvidia.com-gpu.yaml: nvidia.com/gpu=0 is already \
             defined in root/etc/cdi/nvidia.yaml, which cdigen did not write (runtimes would use \
             only the definition in the later spec directory); it is not from nvidia-ctk's \
             nvidia-cdi-refresh units (they write /var/run/cdi/nvidia.yaml) but looks like the \
             output of `nvidia-ctk cdi generate --output=root/etc/cdi/nvidia.yaml`, which writes \
             it only when run (by hand, a script or an installer): remove \
             root/etc/cdi/nvidia.yaml (or move it out of the spec directories) and stop whatever \
             runs that command{KEEP_NVIDIA}\n"
        )
    );
    assert!(!err.contains("systemctl"), "{err}");
    assert_eq!(code, 1);
    assert_eq!(
        support::visible_names(&root.join("run/cdi")),
        [
            "amd.com-gpu.yaml",
            "cdigen.io-rdma.yaml",
            "cdigen.io-vdpa.yaml",
            "cdigen.io-vf.yaml",
            "cdigen.io-vfio.yaml"
        ]
    );
}

// ------------------------------------------------------------------ NVML

#[test]
fn nvml_of_a_driver_root_is_loaded_only_when_root_alone_could_have_put_it_there() {
    use std::os::unix::fs::PermissionsExt as _;
    let (tmp, root) = support::machine("dgx-8gpu");
    // Whoever runs the tests, and wherever the temp directory is: a
    // directory on the way that its group may write.
    let lib_dir = root.join("run/nvidia/driver/usr/lib/x86_64-linux-gnu");
    fs::set_permissions(&lib_dir, fs::Permissions::from_mode(0o775)).unwrap();
    let run = |extra: &[&str]| {
        let mut cmd = assert_cmd::Command::cargo_bin("cdigen").unwrap();
        cmd.current_dir(tmp.path())
            .args([
                "discover",
                "--root",
                "root",
                "--driver-root",
                support::DRIVER_ROOT,
                "-v",
            ])
            .args(extra)
            .env("CDIGEN_GENERATORS", "/nonexistent-cdigen-user-generators")
            .env_remove("CDIGEN_NO_NVML")
            .env_remove("RUST_LOG");
        let out = cmd.output().unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stderr).unwrap()
    };
    let err = run(&[]);
    let line = err
        .lines()
        .find(|l| l.contains("NVML"))
        .unwrap_or_else(|| panic!("{err}"));
    let prefix = " INFO not loading NVML from /run/nvidia/driver/usr/lib/x86_64-linux-gnu/\
                  libnvidia-ml.so.550.90.07 (loading it would run its code): ";
    assert!(line.starts_with(prefix), "{line}");
    assert!(line.ends_with("; using what procfs says"), "{line}");
    // The directory at fault is named: ours, or one above it.
    let at = line[prefix.len()..].split(' ').next().unwrap();
    assert!(
        fs::canonicalize(&lib_dir).unwrap().starts_with(at),
        "{line}"
    );
    // --no-nvml: not even looked at.
    let err = run(&["--no-nvml"]);
    assert!(err.contains(" INFO NVML not asked (--no-nvml)\n"), "{err}");
    assert!(!err.contains("not loading NVML"), "{err}");
}

// ------------------------------------------------- broken user definitions

/// A typo in one user definition fails only the generators it defines: a
/// copy of the built-in `nvidia` with a misspelt field blocks the built-in
/// (no silent fallback) and leaves its spec on disk as it was; a file that
/// is not YAML at all blocks its file stem; every other generator writes,
/// and the exit status is a partial failure's.
#[test]
fn a_broken_definition_fails_only_its_generator_and_never_falls_back_to_the_builtin() {
    let (tmp, _root) = machine("example");
    let (code, _, err) = cdigen(
        tmp.path(),
        &["generate", "--root", "root", "--output-dir", "cdi", "-q"],
    );
    assert_eq!((code, err.as_str()), (0, ""));
    let nvidia = tmp.path().join("cdi/nvidia.com-gpu.yaml");
    let before = fs::read(&nvidia).unwrap();
    let gens = tmp.path().join("gens");
    fs::create_dir(&gens).unwrap();
    let builtin = cdigen::generator::BUILTIN
        .iter()
        .find(|(f, _)| *f == "nvidia.yaml")
        .unwrap()
        .1;
    fs::write(
        gens.join("nvidia.yaml"),
        builtin.replace("capabilities:", "capabilites:"),
    )
    .unwrap();
    fs::write(gens.join("vfio.yaml"), "name: [vfio\n").unwrap();
    let args = [
        "generate",
        "--root",
        "root",
        "--generators",
        "gens",
        "--output-dir",
        "cdi",
        "-q",
    ];
    let (code, _, err) = cdigen(tmp.path(), &args);
    assert_eq!(code, 1, "{err}");
    let mut lines = err.lines();
    assert!(lines.next().unwrap().starts_with(
        "cdigen: generator \"nvidia\" not run (its files are left as they are): gens/nvidia.yaml: unknown field `capabilites`"
    ), "{err}");
    assert!(
        lines.next().unwrap().starts_with(
            "cdigen: generator \"vfio\" not run (its files are left as they are): gens/vfio.yaml: "
        ),
        "{err}"
    );
    assert_eq!(lines.next(), None, "{err}");
    assert_eq!(fs::read(&nvidia).unwrap(), before);
    assert_eq!(
        support::visible_names(&tmp.path().join("cdi")),
        [
            "amd.com-gpu.yaml",
            "cdigen.io-rdma.yaml",
            "cdigen.io-vdpa.yaml",
            "cdigen.io-vf.yaml",
            "cdigen.io-vfio.yaml",
            "nvidia.com-gpu.yaml"
        ]
    );
    // check and list say the same, and go on with the others.
    let mut check = vec!["check"];
    check.extend(&args[1..]);
    let (code, _, cerr) = cdigen(tmp.path(), &check);
    assert_eq!(cerr, err);
    assert_eq!(code, 1);
}

//! VFIO, SR-IOV and vDPA end to end on copies of fixture machines, changed
//! to exercise edge cases: a VF whose PF vanished, a `virtfn` link to a
//! missing device, a group node missing from `/dev`, a device-info file
//! another tool wrote, configured vhost-user and memif entries.

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

const PF: &str = "sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0";
const VF0: &str = "sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.2";

fn relink(path: &Path, target: &str) {
    fs::remove_file(path).unwrap();
    std::os::unix::fs::symlink(target, path).unwrap();
}

#[test]
fn vf_whose_pf_vanished_is_reported_and_skipped() {
    let (tmp, root) = machine("example");
    relink(&root.join(VF0).join("physfn"), "../0000:3b:00.7");
    let (code, out, err) = cdigen(
        tmp.path(),
        &[
            "list",
            "--discovered",
            "--root",
            "root",
            "--backend",
            "sriov",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("the PF of VF 0000:3b:00.2 is gone, skipping the VF"),
        "{err}"
    );
    assert_eq!(
        out,
        "cdigen.io/vf=0000:3b:00.3\ncdigen.io/vf=0000:3b:00.4\ncdigen.io/vf=0000:3b:00.5\n"
    );
}

#[test]
fn virtfn_link_to_a_missing_device_is_reported() {
    let (tmp, root) = machine("example");
    std::os::unix::fs::symlink("../0000:3b:01.7", root.join(PF).join("virtfn7")).unwrap();
    let (code, out, err) = cdigen(
        tmp.path(),
        &["discover", "--root", "root", "--backend", "sriov"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("/sys/bus/pci/devices/0000:3b:00.0/virtfn7: ")
            && err.contains("VF virtfn7 of 0000:3b:00.0 is listed but its device is missing"),
        "{err}"
    );
    // The four real VFs are still there.
    assert_eq!(
        out.lines().filter(|l| l.starts_with("sriov")).count(),
        4,
        "{out}"
    );
}

#[test]
fn group_node_missing_from_dev_falls_back_to_iommufd() {
    let (tmp, root) = machine("example");
    let manifest = root.join("dev.manifest");
    let text = fs::read_to_string(&manifest).unwrap();
    let without: String = text
        .lines()
        .filter(|l| !l.starts_with("/dev/vfio/50 "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(text, without, "the fixture has /dev/vfio/50");
    fs::write(&manifest, without).unwrap();
    let (code, out, err) = cdigen(
        tmp.path(),
        &[
            "generate",
            "--root",
            "root",
            "--generator",
            "vfio",
            "--output",
            "-",
            "--format",
            "json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("/dev/vfio/50: listed in sysfs (242:1) but missing from /dev; not using it"),
        "{err}"
    );
    let spec: serde_json::Value = serde_json::from_str(&out).unwrap();
    let nvme = &spec["devices"][0];
    assert_eq!(nvme["name"], "0000:81:00.0");
    let paths: Vec<&str> = nvme["containerEdits"]["deviceNodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["/dev/iommu", "/dev/vfio/devices/vfio1"]);
}

#[test]
fn forcing_a_mode_the_host_lacks_leaves_the_device_out() {
    let (tmp, _root) = machine("iommufd-host");
    let gens = tmp.path().join("gens");
    fs::create_dir(&gens).unwrap();
    fs::write(
        gens.join("legacy.yaml"),
        "name: legacy\nbackend: vfio\nkind: example.com/vfio\ntemplate: vfio\nvfio_mode: legacy\nnames: [pci]\n",
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
            "legacy",
            "--output-dir",
            "cdi",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "");
    assert!(
        err.contains("generator legacy: 0000:c2:00.0 offers no VFIO node for mode legacy (the host uses iommufd); leaving it out"),
        "{err}"
    );
    assert!(!tmp.path().join("cdi").exists());
}

#[test]
fn both_modes_when_asked() {
    let (tmp, _root) = machine("vfio-gpu");
    let gens = tmp.path().join("gens");
    fs::create_dir(&gens).unwrap();
    fs::write(
        gens.join("both.yaml"),
        "name: both\nbackend: vfio\nkind: example.com/vfio\ntemplate: vfio\nvfio_mode: both\nnames: [group]\n",
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
            "both",
            "--output",
            "-",
            "--format",
            "json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let spec: serde_json::Value = serde_json::from_str(&out).unwrap();
    // One device for the whole group, honest about what it opens.
    assert_eq!(spec["devices"].as_array().unwrap().len(), 1);
    let d = &spec["devices"][0];
    assert_eq!(d["name"], "32");
    assert_eq!(
        d["containerEdits"]["env"],
        serde_json::json!([
            "PCI_RESOURCE_EXAMPLE_COM_VFIO_32=0000:65:00.0,0000:65:00.1",
            "VFIO_GROUP_32_DEVICES=0000:65:00.0,0000:65:00.1"
        ])
    );
    let paths: Vec<&str> = d["containerEdits"]["deviceNodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        [
            "/dev/vfio/vfio",
            "/dev/vfio/32",
            "/dev/iommu",
            "/dev/vfio/devices/vfio0",
            "/dev/vfio/devices/vfio1"
        ]
    );
}

#[test]
fn foreign_device_info_file_is_left_alone_and_reported() {
    let (tmp, _root) = machine("example");
    let info = tmp.path().join("devinfo");
    fs::create_dir(&info).unwrap();
    let foreign = info.join("cdigen.io-vf-0000:3b:00.2-device.json");
    fs::write(
        &foreign,
        "{\"type\":\"pci\",\"version\":\"1.1.0\",\"pci\":{\"pci-address\":\"0000:3b:00.2\"}}",
    )
    .unwrap();
    let (code, out, err) = cdigen(
        tmp.path(),
        &[
            "generate",
            "--root",
            "root",
            "--backend",
            "sriov",
            "--output-dir",
            "cdi",
        ],
    );
    assert_eq!(code, 1, "{out}{err}");
    assert_eq!(
        err,
        "cdigen: refusing to overwrite devinfo/cdigen.io-vf-0000:3b:00.2-device.json: not written by cdigen, or changed since (remove it or move it away first)\n"
    );
    assert_eq!(
        fs::read_to_string(&foreign).unwrap(),
        "{\"type\":\"pci\",\"version\":\"1.1.0\",\"pci\":{\"pci-address\":\"0000:3b:00.2\"}}"
    );
    // The others were written.
    assert_eq!(
        support::visible_names(&info),
        [
            "cdigen.io-vf-0000:3b:00.2-device.json",
            "cdigen.io-vf-0000:3b:00.3-device.json",
            "cdigen.io-vf-0000:3b:00.4-device.json",
            "cdigen.io-vf-0000:3b:00.5-device.json",
        ]
    );
    assert!(
        out.contains("created: cdi/cdigen.io-vf.yaml (4 devices)\n"),
        "{out}"
    );
}

#[test]
fn device_info_files_go_away_with_their_devices() {
    let (tmp, root) = machine("sriov-legacy");
    let run = || {
        cdigen(
            tmp.path(),
            &["generate", "--root", "root", "--output-dir", "cdi"],
        )
    };
    let (code, _, err) = run();
    assert_eq!(code, 0, "{err}");
    assert_eq!(support::visible_names(&tmp.path().join("devinfo")).len(), 4);
    // Disable SR-IOV on the PF: the VFs disappear.
    for n in [
        "0000:17:01.0",
        "0000:17:01.1",
        "0000:17:01.2",
        "0000:17:01.3",
    ] {
        fs::remove_file(root.join("sys/bus/pci/devices").join(n)).unwrap();
    }
    let (code, out, err) = run();
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("removed: cdi/cdigen.io-vf.yaml (0 devices)\n"),
        "{out}"
    );
    assert!(
        out.contains("removed: devinfo/cdigen.io-vf-0000:17:01.0-device.json\n"),
        "{out}"
    );
    assert_eq!(
        support::visible_names(&tmp.path().join("devinfo")),
        Vec::<String>::new()
    );
}

#[test]
fn configured_vhost_user_and_memif_entries() {
    let (tmp, _root) = machine("empty");
    let gens = tmp.path().join("gens");
    fs::create_dir(&gens).unwrap();
    fs::write(
        gens.join("sockets.yaml"),
        r#"name: sockets
backend: static
kind: example.com/userspace
template: drm
device_info: true
static_devices:
  - id: vhost0
    device_info:
      type: vhost-user
      version: "1.1.0"
      vhost-user: {mode: server, path: /var/run/vhost0.sock}
  - id: memif0
    device_info:
      type: memif
      version: "1.1.0"
      memif: {role: master, path: /var/run/memif0.sock, mode: ethernet}
"#,
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
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "created: devinfo/example.com-userspace-memif0-device.json\n\
         created: devinfo/example.com-userspace-vhost0-device.json\n"
    );
    assert_eq!(
        fs::read_to_string(
            tmp.path()
                .join("devinfo/example.com-userspace-vhost0-device.json")
        )
        .unwrap(),
        r#"{"type":"vhost-user","version":"1.1.0","vhost-user":{"mode":"server","path":"/var/run/vhost0.sock"}}"#
    );
    assert_eq!(
        fs::read_to_string(
            tmp.path()
                .join("devinfo/example.com-userspace-memif0-device.json")
        )
        .unwrap(),
        r#"{"type":"memif","version":"1.1.0","memif":{"role":"master","path":"/var/run/memif0.sock","mode":"ethernet"}}"#
    );
}

#[test]
fn invalid_configured_entry_names_the_field() {
    let (tmp, _root) = machine("empty");
    let gens = tmp.path().join("gens");
    fs::create_dir(&gens).unwrap();
    fs::write(
        gens.join("bad.yaml"),
        "name: bad\nbackend: static\nkind: example.com/xx\ntemplate: drm\ndevice_info: true\nstatic_devices:\n  - id: v0\n    device_info:\n      type: vhost-user\n      version: \"1.1.0\"\n      vhost-user: {mode: server, path: relative.sock}\n",
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
    assert_eq!(code, 1);
    assert!(
        err.starts_with(
            "cdigen: generator \"bad\" not run (its files are left as they are): \
             gens/bad.yaml: static_devices[0].device_info."
        ),
        "{err}"
    );
    assert!(err.contains("relative.sock"), "{err}");
}

/// `virtio-vdpa`'s vDPA simulator device, bound to vhost_vdpa.
const SIM: &str = "sys/devices/vdpasim_net";

/// Renames `virtio-vdpa`'s `vdpa2` to `name` (a name the kernel allows:
/// any but `/` and NUL).
fn rename_vdpa2(root: &Path, name: &str) {
    fs::rename(root.join(SIM).join("vdpa2"), root.join(SIM).join(name)).unwrap();
    for link in ["bus/vdpa/devices", "bus/vdpa/drivers/vhost_vdpa"] {
        let dir = root.join("sys").join(link);
        fs::remove_file(dir.join("vdpa2")).unwrap();
        std::os::unix::fs::symlink(
            format!("../../../devices/vdpasim_net/{name}"),
            dir.join(name),
        )
        .unwrap();
    }
}

#[test]
fn one_odd_vdpa_name_leaves_out_that_device_only() {
    for (bad, warning) in [
        (
            "-vdpa2",
            "generator vdpa: -vdpa2: invalid device name \"-vdpa2\": must start with an ASCII \
             letter or digit, so no name from `\"pci\"`",
        ),
        (
            "vdpa\"2",
            "generator vdpa: leaving out \"vdpa\\\"2\": its device-info file cannot be named: \
             device ID \"vdpa\\\"2\": contains '\"' (expected only A-Z a-z 0-9 . _ : - and /, \
             which becomes -)\n",
        ),
        (
            "vdpa=2",
            "generator vdpa: leaving out \"vdpa=2\": its device-info file cannot be named: \
             device ID \"vdpa=2\": contains '=' (expected only A-Z a-z 0-9 . _ : - and /, which \
             becomes -)\n",
        ),
        (
            "vdpa{{2",
            "generator vdpa: leaving out \"vdpa{{2\": its device-info file cannot be named: \
             device ID \"vdpa{{2\": contains '{' (expected only A-Z a-z 0-9 . _ : - and /, which \
             becomes -)\n",
        ),
        (
            "vdpa\n2",
            "generator vdpa: leaving out \"vdpa\\n2\": its device-info file would be invalid: \
             vdpa.parent-device: \"vdpa\\n2\" contains '\\n' (expected a name under \
             /sys/bus/vdpa/devices, such as \"vdpa0\")\n",
        ),
        (
            "vdpa 2",
            "generator vdpa: leaving out \"vdpa 2\": its device-info file would be invalid: \
             vdpa.parent-device: \"vdpa 2\" contains ' ' (expected a name under \
             /sys/bus/vdpa/devices, such as \"vdpa0\")\n",
        ),
    ] {
        let (tmp, root) = machine("virtio-vdpa");
        rename_vdpa2(&root, bad);
        let (code, out, err) = cdigen(
            tmp.path(),
            &[
                "generate",
                "--root",
                "root",
                "--backend",
                "vdpa",
                "--output-dir",
                "cdi",
            ],
        );
        assert_eq!(code, 0, "{bad:?}: {err}");
        assert_eq!(
            out,
            "created: cdi/cdigen.io-vdpa.yaml (1 device)\n\
             created: devinfo/cdigen.io-vdpa-vdpa:0000:3b:00.2-device.json\n",
            "{bad:?}"
        );
        assert!(err.contains(warning), "{bad:?}: {err}");
        let (code, list, err) = cdigen(tmp.path(), &["list", "--spec-dir", "cdi"]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(list, "cdigen.io/vdpa=vdpa:0000:3b:00.2\n", "{bad:?}");
        assert_eq!(
            support::visible_names(&tmp.path().join("devinfo")),
            ["cdigen.io-vdpa-vdpa:0000:3b:00.2-device.json"],
            "{bad:?}"
        );
    }
}

#[test]
fn vdpa_names_that_give_one_variable_name_fail_their_generator_only() {
    // `vdpa-0000-3b-00.2` and `vdpa:0000:3b:00.2` are two valid CDI names
    // with one variable suffix (`VDPA_0000_3B_00_2`): their devices would
    // set one variable to two values, which a runtime merging env by name
    // cannot keep. The vdpa generator fails, naming both; the VFs are
    // written.
    let (tmp, root) = machine("virtio-vdpa");
    rename_vdpa2(&root, "vdpa-0000-3b-00.2");
    let (code, out, err) = cdigen(
        tmp.path(),
        &["generate", "--root", "root", "--output-dir", "cdi"],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        out.contains("created: cdi/cdigen.io-vf.yaml (2 devices)\n"),
        "{out}"
    );
    assert!(!tmp.path().join("cdi/cdigen.io-vdpa.yaml").exists());
    assert!(
        err.contains(
            "generator \"vdpa\": devices \"vdpa-0000-3b-00.2\" and \"vdpa:0000:3b:00.2\" of \
             cdigen.io-vdpa.yaml both set \"VDPA_DEVICE_CDIGEN_IO_VDPA_VDPA_0000_3B_00_2\" (to \
             \"vdpa-0000-3b-00.2\" and \"vdpa:0000:3b:00.2\"): CDI runtimes merge the env of all \
             injected devices by variable name, so a container given both would see only one of \
             the values; the two device names give one variable suffix ({{name_env}} is \
             VDPA_0000_3B_00_2): rename one of the devices, or name them with another strategy\n"
        ),
        "{err}"
    );
}

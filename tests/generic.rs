//! The generic backend end to end on copies of the `serial-host` fixture:
//! a device family added with one YAML file, the opt-in definitions run by
//! name, `discover` scanning what the definitions declare, names that
//! collide, and `/dev/kfd` joined under `--backend drm`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[path = "support/machine.rs"]
mod support;

use std::fs;

use support::{cdigen, machine};

const USB1: &str = "sys/devices/pci0000:00/0000:00:08.1/0000:0e:00.3/usb1";

/// A security-key family: hidraw nodes of Yubico USB devices, named from a
/// template over the USB device's product ID.
const YUBIKEY: &str = "\
name: yubikey
description: Yubico security keys (hidraw)
backend: generic
kind: example.com/yubikey
match:
  subsystem: hidraw
  attrs: {idVendor: \"1050\"}
  parent: {subsystem: usb, devtype: usb_device}
  expose: [idProduct, product]
names: [{template: \"yubikey-{{attrs.idProduct}}\"}, node]
template: generic
";

#[test]
fn a_new_device_family_from_one_yaml_file() {
    let (tmp, _root) = machine("serial-host");
    let dir = tmp.path();
    fs::create_dir(dir.join("gens")).unwrap();
    fs::write(dir.join("gens/yubikey.yaml"), YUBIKEY).unwrap();

    let (code, out, err) = cdigen(
        dir,
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
    assert_eq!((code, err.as_str()), (0, ""), "{out}");
    assert_eq!(
        out,
        "created: cdi/amd.com-gpu.yaml (2 devices)\n\
         created: cdi/intel.com-gaudi.yaml (2 devices)\n\
         created: cdi/example.com-yubikey.yaml (2 devices)\n"
    );
    assert_eq!(
        fs::read_to_string(dir.join("cdi/example.com-yubikey.yaml")).unwrap(),
        "---\n\
         cdiVersion: '0.3.0'\n\
         kind: 'example.com/yubikey'\n\
         devices:\n\
         - name: 'hidraw0'\n\
         \x20 containerEdits:\n\
         \x20   deviceNodes:\n\
         \x20   - path: '/dev/hidraw0'\n\
         \x20     type: 'c'\n\
         \x20     major: 236\n\
         - name: 'yubikey-0407'\n\
         \x20 containerEdits:\n\
         \x20   deviceNodes:\n\
         \x20   - path: '/dev/hidraw0'\n\
         \x20     type: 'c'\n\
         \x20     major: 236\n"
    );
    let (code, out, _) = cdigen(dir, &["validate", "cdi"]);
    assert_eq!(code, 0, "{out}");
    let (_, out, _) = cdigen(dir, &["list", "--spec-dir", "cdi"]);
    assert!(
        out.contains("example.com/yubikey=hidraw0\nexample.com/yubikey=yubikey-0407\n"),
        "{out}"
    );

    // discover scans what the definitions declare, and says who matched.
    let (code, out, err) = cdigen(
        dir,
        &[
            "discover",
            "--root",
            "root",
            "--generators",
            "gens",
            "--backend",
            "generic",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "BACKEND  DEVICE          DRIVER       NUMA  NODES    NAME\n\
         generic  hidraw:hidraw0  hid-generic  -     hidraw0  YubiKey OTP+FIDO+CCID\n\
         generic  kfd:kfd         -            -     kfd\n"
    );
    let (_, json, _) = cdigen(
        dir,
        &[
            "discover",
            "--root",
            "root",
            "--generators",
            "gens",
            "--backend",
            "generic",
            "-o",
            "json",
        ],
    );
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["devices"][0]["generic"]["matched_by"][0], "yubikey");
    assert_eq!(v["devices"][0]["attrs"]["idProduct"], "0407");
    assert_eq!(
        v["devices"][1]["generic"]["joined_by"][0],
        "amd-gpu.join[0]"
    );
}

#[test]
fn a_broken_pattern_in_a_user_definition_fails_only_its_generator() {
    let (tmp, _root) = machine("serial-host");
    let dir = tmp.path();
    fs::create_dir(dir.join("gens")).unwrap();
    fs::write(
        dir.join("gens/yubikey.yaml"),
        YUBIKEY.replace("\"1050\"", "\"10[50\""),
    )
    .unwrap();
    let (code, out, err) = cdigen(
        dir,
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
        (code, err.as_str()),
        (
            1,
            "cdigen: generator \"yubikey\" not run (its files are left as they are): \
             gens/yubikey.yaml: match.attrs.idVendor: \"10[50\" is not a valid glob: \
             unclosed character class; missing ']'\n"
        )
    );
    assert!(out.contains("created: cdi/amd.com-gpu.yaml"), "{out}");
    // discover reads the definitions too.
    let (code, _, err) = cdigen(dir, &["discover", "--root", "root", "--generators", "gens"]);
    assert_eq!(code, 1);
    assert!(
        err.starts_with(
            "cdigen: generator \"yubikey\" not run (its files are left as they are): \
             gens/yubikey.yaml: match.attrs.idVendor"
        ),
        "{err}"
    );
}

#[test]
fn the_seeds_tty_plugin_definition_by_name() {
    let (tmp, _root) = machine("serial-host");
    let dir = tmp.path();
    // Disabled by default: a plain run does not scan the VTs...
    let (_, out, _) = cdigen(dir, &["discover", "--root", "root", "--backend", "generic"]);
    assert_eq!(out.lines().count(), 2, "{out}");
    // ...naming it does.
    let (code, out, _) = cdigen(
        dir,
        &[
            "discover",
            "--root",
            "root",
            "--backend",
            "generic",
            "--generator",
            "generic-tty",
        ],
    );
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), 1 + 63, "tty1..tty63:\n{out}");
    assert!(!out.contains("tty:tty0 ") && !out.contains("ttyS") && !out.contains("ttyUSB"));
    let (code, out, err) = cdigen(
        dir,
        &[
            "list",
            "--discovered",
            "--root",
            "root",
            "--generator",
            "generic-tty",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let names: Vec<&str> = out.lines().collect();
    assert_eq!(names.len(), 51);
    assert_eq!(
        names[..3],
        [
            "cdigen.io/tty=tty13",
            "cdigen.io/tty=tty14",
            "cdigen.io/tty=tty15"
        ]
    );
    assert_eq!(names[50], "cdigen.io/tty=tty63");
}

#[test]
fn adapters_sharing_a_serial_number_get_no_name() {
    let (tmp, root) = machine("serial-host");
    let dir = tmp.path();
    let args = [
        "generate",
        "--root",
        "root",
        "--generator",
        "usb-serial",
        "--output-dir",
        "cdi",
    ];
    assert_eq!(cdigen(dir, &args).0, 0);
    let spec = fs::read_to_string(dir.join("cdi/cdigen.io-serial.yaml")).unwrap();
    assert!(spec.contains("- name: 'A10K5PQR'\n"), "{spec}");
    // The Arduino reports the FTDI's serial number.
    fs::write(root.join(USB1).join("1-3/serial"), "A10K5PQR\n").unwrap();
    let (code, out, err) = cdigen(dir, &args);
    assert_eq!(code, 0, "{err}");
    // Neither adapter is named, and the warning says which adapters and
    // where they are plugged; the other ports keep their names.
    assert_eq!(out, "updated: cdi/cdigen.io-serial.yaml (10 devices)\n");
    assert_eq!(
        err.lines()
            .map(|l| l.trim_start_matches(" WARN "))
            .collect::<Vec<_>>(),
        [
            "generator usb-serial: \"A10K5PQR\" would name tty:ttyACM0 (USB device 1-3 at \
             pci-0000:0e:00.3-usb-3) and tty:ttyUSB0 (USB device 1-2 at pci-0000:0e:00.3-usb-2); \
             naming none of them so",
        ]
    );
    // A name written before the clash is gone: it names hardware that
    // cannot be told apart any more.
    let spec = fs::read_to_string(dir.join("cdi/cdigen.io-serial.yaml")).unwrap();
    assert!(!spec.contains("A10K5PQR"), "{spec}");
    assert!(spec.contains("- name: 'FT4QA7B2-if03'\n"), "{spec}");
}

/// Each port of a multi-port USB device is named by serial and interface
/// (an FT4232H, an LTE modem), an adapter without a serial number by its
/// port path; before, all of them were dropped.
#[test]
fn every_port_of_a_usb_device_gets_a_name() {
    let (tmp, _root) = machine("serial-host");
    let dir = tmp.path();
    let (code, out, err) = cdigen(
        dir,
        &[
            "list",
            "--discovered",
            "--root",
            "root",
            "--generator",
            "usb-serial",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(err, "");
    for name in [
        "cdigen.io/serial=A10K5PQR",
        "cdigen.io/serial=FT4QA7B2-if00",
        "cdigen.io/serial=FT4QA7B2-if03",
        "cdigen.io/serial=0123456789ABCDEF-if02",
        "cdigen.io/serial=pci-0000:0e:00.3-usb-1.4",
        "cdigen.io/serial=pci-0000:0e:00.3-usb-5",
    ] {
        assert!(out.contains(name), "{name} not in {out}");
    }
}

/// `group: parent` needs a `parent` to group by: the definition is refused
/// with the file and the field.
#[test]
fn a_group_without_a_parent_is_refused() {
    let (tmp, _root) = machine("serial-host");
    let dir = tmp.path();
    fs::create_dir(dir.join("gens")).unwrap();
    fs::write(
        dir.join("gens/fpga.yaml"),
        "name: fpga\nbackend: generic\nkind: example.com/fpga\ntemplate: generic\n\
         match: {subsystem: xdma, group: parent}\n",
    )
    .unwrap();
    let (code, _, err) = cdigen(dir, &["discover", "--root", "root", "--generators", "gens"]);
    assert_eq!(
        (code, err.as_str()),
        (
            1,
            "cdigen: generator \"fpga\" not run (its files are left as they are): \
             gens/fpga.yaml: match.group: `group: parent` needs `parent`: the bus of the device \
             whose nodes make one device, like `parent: {subsystem: pci}`\n"
        )
    );
}

#[test]
fn kfd_is_joined_under_backend_drm_too() {
    let (tmp, _root) = machine("serial-host");
    let dir = tmp.path();
    let (code, out, err) = cdigen(
        dir,
        &[
            "generate",
            "--root",
            "root",
            "--backend",
            "drm",
            "--generator",
            "amd-gpu",
            "--output",
            "-",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.matches("path: '/dev/kfd'").count(), 2, "{out}");
}

/// Two strategies giving a device the same name (`node`, and a template
/// yielding the kernel name) make one CDI device, not a collision.
#[test]
fn one_device_named_alike_by_two_strategies_is_one_cdi_device() {
    let (tmp, _root) = machine("serial-host");
    let dir = tmp.path();
    fs::create_dir(dir.join("gens")).unwrap();
    fs::write(
        dir.join("gens/keys.yaml"),
        YUBIKEY.replace(
            "names: [{template: \"yubikey-{{attrs.idProduct}}\"}, node]",
            "names: [node, {template: \"{{generic.name}}\"}]",
        ),
    )
    .unwrap();
    let (code, out, err) = cdigen(
        dir,
        &[
            "generate",
            "--root",
            "root",
            "--generators",
            "gens",
            "--generator",
            "yubikey",
            "--output",
            "-",
        ],
    );
    assert_eq!((code, err.as_str()), (0, ""), "{out}");
    assert_eq!(out.matches("- name: ").count(), 1, "{out}");
    assert!(out.contains("- name: 'hidraw0'"), "{out}");
}

/// A class entry whose name is not a plain /dev path, without a usable
/// DEVNAME, is skipped with a warning naming its uevent file: the entry's
/// name is as untrusted as DEVNAME.
#[test]
fn an_entry_name_that_is_no_plain_dev_path_is_skipped() {
    let (tmp, root) = machine("serial-host");
    let dir = tmp.path();
    let class = root.join("sys/class/hidraw");
    let link = fs::read_link(class.join("hidraw0")).unwrap();
    let odd_link = link.parent().unwrap().join("hidraw\"x y");
    let odd = class.join(&odd_link);
    fs::rename(class.join(&link), &odd).unwrap();
    fs::remove_file(class.join("hidraw0")).unwrap();
    std::os::unix::fs::symlink(&odd_link, class.join("hidraw\"x y")).unwrap();
    let uevent = odd.join("uevent");
    let text = fs::read_to_string(&uevent).unwrap();
    let without: String = text
        .lines()
        .filter(|l| !l.starts_with("DEVNAME="))
        .map(|l| format!("{l}\n"))
        .collect();
    fs::write(&uevent, without).unwrap();
    fs::create_dir(dir.join("gens")).unwrap();
    fs::write(
        dir.join("gens/keys.yaml"),
        YUBIKEY
            .replace(
                "names: [{template: \"yubikey-{{attrs.idProduct}}\"}, node]",
                "names: [index]",
            )
            .replace("  attrs: {idVendor: \"1050\"}\n", ""),
    )
    .unwrap();
    let (code, out, err) = cdigen(
        dir,
        &[
            "discover",
            "--root",
            "root",
            "--generators",
            "gens",
            "--generator",
            "yubikey",
            "--backend",
            "generic",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("hidraw\"x y"), "{out}");
    assert!(
        err.contains(
            "/hidraw/hidraw\"x y/uevent: no usable DEVNAME, and \"hidraw\\\"x y\" is not a plain path below /dev: it contains '\"': a character neither the kernel nor udev puts in a device name (letters, digits, # + , - . : = @ _ and non-ASCII UTF-8 are accepted); skipping hidraw\"x y"
        ),
        "{err}"
    );
}

/// The CMA heap's node is `/dev/dma_heap/linux,cma`, the name the kernel
/// gives it (its device-tree node): kept as it is, without a warning, and
/// named `cma` by the `dma-heap` definition, since a comma is no CDI name.
/// A DEVNAME that would leave `/dev` is refused with the reason, and the
/// entry's own name used instead.
#[test]
fn the_cma_heap_keeps_its_kernel_name() {
    let (tmp, root) = machine("rpi");
    let dir = tmp.path();
    let args = [
        "generate",
        "--root",
        "root",
        "--generator",
        "dma-heap",
        "--output",
        "-",
        "--format",
        "json",
    ];
    let (code, out, err) = cdigen(dir, &args);
    assert_eq!((code, err.as_str()), (0, ""), "{out}");
    let spec: serde_json::Value = serde_json::from_str(&out).unwrap();
    let devices: Vec<(&str, &str)> = spec["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["name"].as_str().unwrap(),
                d["containerEdits"]["deviceNodes"][0]["path"]
                    .as_str()
                    .unwrap(),
            )
        })
        .collect();
    assert_eq!(
        devices,
        [
            ("all", "/dev/dma_heap/linux,cma"),
            ("cma", "/dev/dma_heap/linux,cma"),
            ("system", "/dev/dma_heap/system"),
        ]
    );

    let uevent = root.join("sys/devices/virtual/dma_heap/linux,cma/uevent");
    fs::write(
        &uevent,
        "MAJOR=248\nMINOR=1\nDEVNAME=dma_heap/../../etc/shadow\n",
    )
    .unwrap();
    let (code, out, err) = cdigen(dir, &args);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        err.contains(
            "/sys/class/dma_heap/linux,cma/uevent: DEVNAME \"dma_heap/../../etc/shadow\" \
             is not a plain path below /dev: it has a \"..\" component, which could leave /dev; \
             using the default"
        ),
        "{err}"
    );
    assert!(!out.contains("shadow"), "{out}");
    assert!(out.contains("\"/dev/linux,cma\""), "{out}");
}

/// A by-id link udev made from a UTF-8 product name is recorded like any
/// other, and one whose name no udev makes (a quote) is left out, saying
/// why.
#[test]
fn a_by_id_link_with_a_utf8_product_name_is_recorded() {
    let (tmp, root) = machine("serial-host");
    let dir = tmp.path();
    let utf8 = "/dev/serial/by-id/usb-Qualcomm_Snapdragon\u{2122}_X55_5G_0123-if00-port0";
    let manifest = fs::read_to_string(root.join("dev.manifest")).unwrap()
        + &format!("{utf8} l ../../ttyUSB0\n/dev/serial/by-id/usb-evil\"name l ../../ttyUSB0\n");
    fs::write(root.join("dev.manifest"), manifest).unwrap();
    let (code, out, err) = cdigen(
        dir,
        &[
            "discover",
            "--root",
            "root",
            "--generator",
            "usb-serial",
            "-o",
            "json",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    let found: serde_json::Value = serde_json::from_str(&out).unwrap();
    let links: Vec<&str> = found["devices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["id"] == "tty:ttyUSB0")
        .flat_map(|d| d["links"].as_array().unwrap())
        .map(|l| l["path"].as_str().unwrap())
        .collect();
    assert!(links.contains(&utf8), "{links:?}");
    assert!(!err.contains("Snapdragon"), "{err}");
    assert!(
        err.contains(
            "/dev/serial/by-id/usb-evil\"name: not a plain name below /dev: it contains '\"'"
        ),
        "{err}"
    );
}

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use super::*;

use std::fs;

use proptest::prelude::*;

use crate::generator::{Generator, parse};
use crate::model::UsbPort;

// ---------------------------------------------------------------- a tree

const HCD: &str = "sys/devices/pci0000:00/0000:00:14.0";

fn write(root: &Path, rel: &str, text: &[u8]) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

/// A relative symlink at `at` to `to` (both root-relative), as sysfs makes
/// them.
fn link(root: &Path, at: &str, to: &str) {
    let from: Vec<&str> = at.split('/').collect();
    let to_parts: Vec<&str> = to.split('/').collect();
    let dir = &from[..from.len() - 1];
    let common = dir
        .iter()
        .zip(&to_parts)
        .take_while(|(a, b)| a == b)
        .count();
    let text = "../".repeat(dir.len() - common) + &to_parts[common..].join("/");
    let p = root.join(at);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(text, p).unwrap();
}

/// A USB device under the root hub: `1-<port>` with the given attributes.
fn usb_device(root: &Path, path: &str, attrs: &[(&str, &str)]) {
    write(
        root,
        &format!("{path}/uevent"),
        b"DEVTYPE=usb_device\nDRIVER=usb\n",
    );
    for (k, v) in attrs {
        write(root, &format!("{path}/{k}"), format!("{v}\n").as_bytes());
    }
    link(root, &format!("{path}/subsystem"), "sys/bus/usb");
    link(root, &format!("sys/bus/usb/devices/{}", base(path)), path);
}

fn base(path: &str) -> &str {
    path.rsplit('/').next().unwrap()
}

/// A usb-serial adapter on port `port`: interface, usb-serial port, tty.
fn adapter(root: &Path, port: u32, minor: u32, attrs: &[(&str, &str)]) -> String {
    let dev = format!("{HCD}/usb1/1-{port}");
    usb_device(root, &dev, attrs);
    let intf = format!("{dev}/1-{port}:1.0");
    write(
        root,
        &format!("{intf}/uevent"),
        b"DEVTYPE=usb_interface\nDRIVER=ftdi_sio\n",
    );
    link(root, &format!("{intf}/subsystem"), "sys/bus/usb");
    write(root, &format!("{intf}/bInterfaceNumber"), b"00\n");
    let name = format!("ttyUSB{minor}");
    let port_dir = format!("{intf}/{name}");
    write(root, &format!("{port_dir}/uevent"), b"DRIVER=ftdi_sio\n");
    write(root, &format!("{port_dir}/port_number"), b"0\n");
    link(root, &format!("{port_dir}/subsystem"), "sys/bus/usb-serial");
    link(
        root,
        &format!("{port_dir}/driver"),
        "sys/bus/usb-serial/drivers/ftdi_sio",
    );
    write(root, "sys/bus/usb-serial/drivers/ftdi_sio/bind", b"");
    tty(root, &port_dir, &name, 188, minor)
}

/// A tty class device under `parent` (None: virtual).
fn tty(root: &Path, parent: &str, name: &str, major: u32, minor: u32) -> String {
    let p = if parent.is_empty() {
        format!("sys/devices/virtual/tty/{name}")
    } else {
        format!("{parent}/tty/{name}")
    };
    write(
        root,
        &format!("{p}/dev"),
        format!("{major}:{minor}\n").as_bytes(),
    );
    write(
        root,
        &format!("{p}/uevent"),
        format!("MAJOR={major}\nMINOR={minor}\nDEVNAME={name}\n").as_bytes(),
    );
    link(root, &format!("{p}/subsystem"), "sys/class/tty");
    if !parent.is_empty() {
        link(root, &format!("{p}/device"), parent);
    }
    link(root, &format!("sys/class/tty/{name}"), &p);
    p
}

/// Two FTDI-like adapters (the second without a serial number) under a
/// root hub that has one, a VT, and a `/dev` with their nodes and links.
fn machine() -> (tempfile::TempDir, HostRoot) {
    let tmp = tempfile::tempdir().unwrap();
    let r = tmp.path();
    write(r, &format!("{HCD}/uevent"), b"DRIVER=xhci_hcd\n");
    link(r, &format!("{HCD}/subsystem"), "sys/bus/pci");
    let hub = format!("{HCD}/usb1");
    usb_device(r, &hub, &[("idVendor", "1d6b"), ("serial", "0000:00:14.0")]);
    write(r, &format!("{hub}/dev"), b"189:0\n");
    adapter(
        r,
        1,
        0,
        &[
            ("idVendor", "0403"),
            ("idProduct", "6001"),
            ("serial", "A10K5PQR"),
            ("product", "FT232R USB UART"),
        ],
    );
    write(r, &format!("{HCD}/usb1/1-1/dev"), b"189:1\n");
    adapter(r, 2, 1, &[("idVendor", "1a86"), ("idProduct", "7523")]);
    tty(r, "", "tty5", 4, 5);
    write(
        r,
        "dev.manifest",
        b"/dev/ttyUSB0 c 188:0 0660 0 20\n\
          /dev/ttyUSB1 c 188:1 0660 0 20\n\
          /dev/tty5 c 4:5 0620 0 5\n\
          /dev/bus d\n/dev/bus/usb d\n/dev/bus/usb/001 d\n\
          /dev/bus/usb/001/002 c 189:1 0664 0 0\n\
          /dev/serial d\n/dev/serial/by-id d\n\
          /dev/serial/by-id/usb-FTDI_FT232R_USB_UART_A10K5PQR-if00-port0 l ../../ttyUSB0\n\
          /dev/serial/by-id/usb-1a86_USB_Serial-if00-port0 l ../../ttyUSB1\n",
    );
    let root = HostRoot::open(r).unwrap();
    (tmp, root)
}

/// A generic definition named `name` with this `match` (YAML).
fn def(name: &str, m: &str) -> Generator {
    parse(
        Path::new("test.yaml"),
        &format!(
            "name: {name}\nbackend: generic\nkind: example.com/dev\ntemplate: generic\nmatch: {m}\n"
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn run(root: &HostRoot, generators: &[&Generator]) -> (Vec<Device>, Vec<String>) {
    let scan = crate::generator::scan(generators.iter().copied());
    let cx = Context::new(root).with_scan(&scan);
    let mut report = Report::default();
    let devices = Generic.discover(&cx, &mut report).unwrap();
    let warnings = report
        .warnings
        .iter()
        .map(|w| format!("{}: {}", w.path.display(), w.message))
        .collect();
    (devices, warnings)
}

fn ids(devices: &[Device]) -> Vec<&str> {
    devices.iter().map(|d| d.id.as_str()).collect()
}

const SERIAL: &str = "{subsystem: tty, name: [\"ttyUSB*\"], parent: {subsystem: usb, devtype: usb_device}, expose: [serial, idVendor, product], links: [serial/by-id]}";

// ---------------------------------------------------------------- tests

#[test]
fn nothing_to_scan_without_definitions() {
    let (_t, root) = machine();
    assert_eq!(run(&root, &[]), (vec![], vec![]));
}

#[test]
fn a_usb_serial_adapter_with_its_node_parent_attributes_and_links() {
    let (_t, root) = machine();
    let g = def("serial", SERIAL);
    let (devices, warnings) = run(&root, &[&g]);
    assert_eq!(warnings, Vec::<String>::new());
    assert_eq!(ids(&devices), ["tty:ttyUSB0", "tty:ttyUSB1"]);
    let d = &devices[0];
    assert_eq!(
        *d,
        Device {
            backend: "generic".into(),
            id: "tty:ttyUSB0".into(),
            sysfs_path: format!("/{HCD}/usb1/1-1/1-1:1.0/ttyUSB0/tty/ttyUSB0"),
            bus: "usb-serial".into(),
            driver: Some("ftdi_sio".into()),
            nodes: vec![Node {
                role: "generic".into(),
                name: "ttyUSB0".into(),
                path: "/dev/ttyUSB0".into(),
                node_type: "c".into(),
                major: 188,
                minor: 0,
                host: Some(crate::model::HostNode {
                    mode: 0o660,
                    uid: 0,
                    gid: 20
                }),
            }],
            links: vec![Link {
                path: "/dev/serial/by-id/usb-FTDI_FT232R_USB_UART_A10K5PQR-if00-port0".into(),
                target: "../../ttyUSB0".into(),
                node: "/dev/ttyUSB0".into(),
            }],
            attrs: [
                ("idVendor", "0403"),
                ("product", "FT232R USB UART"),
                ("serial", "A10K5PQR"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
            generic: Some(GenericInfo {
                subsystem: "tty".into(),
                name: "ttyUSB0".into(),
                matched_by: vec!["serial".into()],
                joined_by: vec![],
                usb: None,
                group: None,
            }),
            ..Default::default()
        }
    );
    // The second adapter has no serial number: the root hub's (the
    // controller's PCI address) is never taken for it.
    assert_eq!(
        devices[1].attrs.get("serial"),
        None,
        "{:?}",
        devices[1].attrs
    );
    assert_eq!(
        devices[1].attrs.get("idVendor").map(String::as_str),
        Some("1a86")
    );
    assert_eq!(
        devices[1].links[0].path,
        "/dev/serial/by-id/usb-1a86_USB_Serial-if00-port0"
    );
}

#[test]
fn without_a_parent_only_the_devices_own_attributes_are_recorded() {
    let (_t, root) = machine();
    let g = def(
        "serial",
        "{subsystem: tty, name: [ttyUSB0], expose: [serial, dev]}",
    );
    let (devices, _) = run(&root, &[&g]);
    assert_eq!(ids(&devices), ["tty:ttyUSB0"]);
    let attrs: Vec<(&str, &str)> = devices[0]
        .attrs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(attrs, [("dev", "188:0")]);
}

#[test]
fn a_required_parent_that_is_missing_means_no_match() {
    let (_t, root) = machine();
    let g = def(
        "vt",
        "{subsystem: tty, name: [\"tty*\"], parent: {subsystem: usb}}",
    );
    // tty5 is virtual: no USB ancestor.
    assert_eq!(ids(&run(&root, &[&g]).0), ["tty:ttyUSB0", "tty:ttyUSB1"]);
    let g = def(
        "vt",
        "{subsystem: tty, parent: {subsystem: usb, devtype: usb_interface}}",
    );
    assert_eq!(ids(&run(&root, &[&g]).0), ["tty:ttyUSB0", "tty:ttyUSB1"]);
    let g = def(
        "vt",
        "{subsystem: tty, parent: {subsystem: pci, devtype: usb_device}}",
    );
    assert_eq!(ids(&run(&root, &[&g]).0), Vec::<&str>::new());
}

#[test]
fn name_globs() {
    let (_t, root) = machine();
    for (pattern, want) in [
        ("[\"ttyUSB*\"]", vec!["tty:ttyUSB0", "tty:ttyUSB1"]),
        ("[\"tty[0-9]\"]", vec!["tty:tty5"]),
        ("[\"tty?\", ttyUSB1]", vec!["tty:tty5", "tty:ttyUSB1"]),
        ("[\"tty{5,USB0}\"]", vec!["tty:tty5", "tty:ttyUSB0"]),
        ("[\"*\"]", vec!["tty:tty5", "tty:ttyUSB0", "tty:ttyUSB1"]),
        ("[]", vec!["tty:tty5", "tty:ttyUSB0", "tty:ttyUSB1"]),
        ("[ttyS0]", vec![]),
    ] {
        let g = def("t", &format!("{{subsystem: tty, name: {pattern}}}"));
        assert_eq!(ids(&run(&root, &[&g]).0), want, "{pattern}");
    }
}

#[test]
fn attrs_match_like_udev_attrs_on_one_device_of_the_chain() {
    let (_t, root) = machine();
    let matched = |attrs: &str| {
        let g = def(
            "t",
            &format!("{{subsystem: tty, name: [\"ttyUSB*\"], attrs: {attrs}}}"),
        );
        run(&root, &[&g])
            .0
            .into_iter()
            .map(|d| d.id)
            .collect::<Vec<_>>()
    };
    assert_eq!(matched("{idVendor: \"0403\"}"), ["tty:ttyUSB0"]);
    assert_eq!(
        matched("{idVendor: \"04*\", idProduct: \"6001\"}"),
        ["tty:ttyUSB0"]
    );
    // The root hub's vendor is above both (udev's ATTRS would match too).
    assert_eq!(
        matched("{idVendor: \"1d6b\"}"),
        ["tty:ttyUSB0", "tty:ttyUSB1"]
    );
    // All on one device: the adapter has the vendor, the hub the serial.
    assert_eq!(
        matched("{idVendor: \"0403\", serial: \"0000:*\"}"),
        Vec::<String>::new()
    );
    // The device's own attributes count (dev is on the tty itself).
    assert_eq!(matched("{dev: \"188:1\"}"), ["tty:ttyUSB1"]);
    assert_eq!(matched("{nothere: \"*\"}"), Vec::<String>::new());
}

#[test]
fn properties_match_the_devices_own_uevent() {
    let (_t, root) = machine();
    let g = def(
        "t",
        "{subsystem: tty, properties: {DEVNAME: \"ttyUSB*\", MAJOR: \"188\"}}",
    );
    assert_eq!(ids(&run(&root, &[&g]).0), ["tty:ttyUSB0", "tty:ttyUSB1"]);
    // DRIVER is the usb-serial port's, not the tty's: no match.
    let g = def("t", "{subsystem: tty, properties: {DRIVER: \"*\"}}");
    assert_eq!(ids(&run(&root, &[&g]).0), Vec::<&str>::new());
}

#[test]
fn bus_devices_with_a_number_match_and_interfaces_without_one_do_not() {
    let (_t, root) = machine();
    let g = def(
        "t",
        "{subsystem: usb, attrs: {idVendor: \"0403\"}, expose: [serial]}",
    );
    let (devices, warnings) = run(&root, &[&g]);
    assert_eq!(warnings, Vec::<String>::new());
    assert_eq!(ids(&devices), ["usb:1-1"]);
    let d = &devices[0];
    assert_eq!((d.bus.as_str(), d.driver.as_deref()), ("usb", None));
    // No DEVNAME in this uevent: the node is /dev/<name>.
    assert_eq!(
        (d.nodes[0].path.as_str(), d.nodes[0].minor),
        ("/dev/1-1", 1)
    );
    assert_eq!(d.attrs.get("serial").map(String::as_str), Some("A10K5PQR"));
}

#[test]
fn a_device_matched_by_two_definitions_is_reported_once_with_both() {
    let (_t, root) = machine();
    let a = def("a", "{subsystem: tty, name: [ttyUSB0], expose: [dev]}");
    let b = def("b", SERIAL);
    let (devices, _) = run(&root, &[&a, &b]);
    assert_eq!(ids(&devices), ["tty:ttyUSB0", "tty:ttyUSB1"]);
    let info = devices[0].generic.as_ref().unwrap();
    assert_eq!(info.matched_by, ["a", "b"]);
    assert_eq!(devices[1].generic.as_ref().unwrap().matched_by, ["b"]);
    // Both definitions' attributes are recorded.
    assert!(devices[0].attrs.contains_key("dev") && devices[0].attrs.contains_key("serial"));
}

#[test]
fn joins_tag_the_devices_with_the_join() {
    let (_t, root) = machine();
    let g = parse(
        Path::new("j.yaml"),
        "name: gpus\nbackend: drm\nkind: example.com/gpu\ntemplate: drm\n\
         join:\n  - match: {subsystem: tty, name: [tty5]}\n    role: kfd\n",
    )
    .unwrap();
    let (devices, _) = run(&root, &[&g]);
    assert_eq!(ids(&devices), ["tty:tty5"]);
    let info = devices[0].generic.as_ref().unwrap();
    assert_eq!(info.matched_by, Vec::<String>::new());
    assert_eq!(info.joined_by, ["gpus.join[0]"]);
    assert_eq!(devices[0].nodes[0].role, "generic");
}

#[test]
fn names_strategies_add_what_they_need_to_the_scan() {
    let (_t, root) = machine();
    let g = parse(
        Path::new("n.yaml"),
        "name: s\nbackend: generic\nkind: example.com/serial\ntemplate: generic\n\
         match: {subsystem: tty, name: [ttyUSB0], parent: {subsystem: usb, devtype: usb_device}}\n\
         names: [{attr: serial}, {link: serial/by-id}]\n",
    )
    .unwrap();
    let (devices, _) = run(&root, &[&g]);
    assert_eq!(
        devices[0].attrs.get("serial").map(String::as_str),
        Some("A10K5PQR")
    );
    assert_eq!(devices[0].links.len(), 1);
}

#[test]
fn hostile_values_are_left_out_with_a_warning_naming_the_file() {
    let (t, _) = machine();
    let r = t.path();
    let dev = format!("{HCD}/usb1/1-1");
    let long = "x".repeat(MAX_VALUE_LEN + 1);
    fs::write(r.join(&dev).join("serial"), b"A1\nB2\n").unwrap();
    fs::write(r.join(&dev).join("product"), format!("{long}\n")).unwrap();
    fs::write(r.join(&dev).join("idVendor"), b"\xff\xfe\n").unwrap();
    let root = HostRoot::open(r).unwrap();
    let g = def("serial", SERIAL);
    let (devices, warnings) = run(&root, &[&g]);
    assert_eq!(ids(&devices), ["tty:ttyUSB0", "tty:ttyUSB1"]);
    assert!(devices[0].attrs.is_empty(), "{:?}", devices[0].attrs);
    let d = format!("/{dev}");
    assert_eq!(
        warnings,
        [
            format!("{d}/idVendor: not UTF-8 text; treating idVendor as absent"),
            format!("{d}/product: value longer than 256 bytes; not recording product of ttyUSB0"),
            format!(
                "{d}/serial: value contains the control character '\\n'; not recording serial of ttyUSB0"
            ),
        ]
    );
}

#[test]
fn hostile_devname_dev_and_link_names() {
    let (t, _) = machine();
    let r = t.path();
    let tty0 = format!("{HCD}/usb1/1-1/1-1:1.0/ttyUSB0/tty/ttyUSB0");
    let tty1 = format!("{HCD}/usb1/1-2/1-2:1.0/ttyUSB1/tty/ttyUSB1");
    fs::write(
        r.join(&tty0).join("uevent"),
        b"MAJOR=188\nMINOR=0\nDEVNAME=../etc/shadow\n",
    )
    .unwrap();
    fs::write(r.join(&tty1).join("dev"), b"188:one\n").unwrap();
    let manifest = fs::read_to_string(r.join("dev.manifest")).unwrap()
        + "/dev/serial/by-id/evil\"name l ../../ttyUSB0\n\
           /dev/serial/by-id/elsewhere l ../../tty5\n\
           /dev/serial/by-id/up l ../../../ttyUSB0\n";
    fs::write(r.join("dev.manifest"), manifest).unwrap();
    let root = HostRoot::open(r).unwrap();
    let g = def("serial", SERIAL);
    let (devices, warnings) = run(&root, &[&g]);
    assert_eq!(ids(&devices), ["tty:ttyUSB0"]);
    assert_eq!(devices[0].nodes[0].path, "/dev/ttyUSB0");
    let links: Vec<&str> = devices[0].links.iter().map(|l| l.path.as_str()).collect();
    assert_eq!(
        links,
        ["/dev/serial/by-id/usb-FTDI_FT232R_USB_UART_A10K5PQR-if00-port0"]
    );
    assert_eq!(
        warnings,
        [
            "/sys/class/tty/ttyUSB0/uevent: DEVNAME \"../etc/shadow\" is not a plain path below /dev: it has a \"..\" component, which could leave /dev; using the default".to_string(),
            "/dev/serial/by-id/evil\"name: not a plain name below /dev: it contains '\"': a character neither \
             the kernel nor udev puts in a device name (letters, digits, # + , - . : = @ _ and non-ASCII \
             UTF-8 are accepted); not recording this link"
                .to_string(),
            "/sys/class/tty/ttyUSB1/dev: \"188:one\" is not MAJOR:MINOR; skipping ttyUSB1".to_string(),
        ]
    );
}

#[test]
fn link_names_udev_makes_are_recorded_without_warnings() {
    // A UTF-8 product name udev keeps as is, its allowed punctuation and a
    // \xHH escape (systemd allow_listed_char_for_devnode, encode_devnode_name).
    let (t, _) = machine();
    let r = t.path();
    let utf8 = "/dev/serial/by-id/usb-Qualcomm_Snapdragon\u{2122}_X_Elite_0123-if00-port0";
    let escaped = "/dev/serial/by-id/usb-My\\x20Cable+v2=1@a#b-if00-port0";
    let manifest = fs::read_to_string(r.join("dev.manifest")).unwrap()
        + &format!(
            "{utf8} l ../../ttyUSB0\n{} l ../../ttyUSB0\n",
            crate::root::escape_manifest_field(escaped.as_bytes())
        );
    fs::write(r.join("dev.manifest"), manifest).unwrap();
    let root = HostRoot::open(r).unwrap();
    let g = def("serial", SERIAL);
    let (devices, warnings) = run(&root, &[&g]);
    assert!(warnings.is_empty(), "{warnings:?}");
    let usb0 = devices.iter().find(|d| d.id == "tty:ttyUSB0").unwrap();
    let links: Vec<&str> = usb0.links.iter().map(|l| l.path.as_str()).collect();
    assert_eq!(
        links,
        [
            "/dev/serial/by-id/usb-FTDI_FT232R_USB_UART_A10K5PQR-if00-port0",
            escaped,
            utf8,
        ]
    );
}

#[test]
fn something_else_at_the_node_path_drops_the_device() {
    let (t, _) = machine();
    let r = t.path();
    let manifest = fs::read_to_string(r.join("dev.manifest"))
        .unwrap()
        .replace("/dev/ttyUSB1 c 188:1 0660 0 20", "/dev/ttyUSB1 l ttyUSB0");
    fs::write(r.join("dev.manifest"), manifest).unwrap();
    let root = HostRoot::open(r).unwrap();
    let g = def("serial", SERIAL);
    let (devices, warnings) = run(&root, &[&g]);
    assert_eq!(ids(&devices), ["tty:ttyUSB0"]);
    assert_eq!(
        warnings,
        [
            "/dev/ttyUSB1: not a character device (a symbolic link); runtimes would refuse it, skipping this node"
        ]
    );
}

#[test]
fn class_attribute_files_are_not_devices() {
    let (t, _) = machine();
    write(t.path(), "sys/class/tty/abi_version", b"1\n");
    let root = HostRoot::open(t.path()).unwrap();
    let g = def("t", "{subsystem: tty, name: [\"*\"]}");
    let (devices, warnings) = run(&root, &[&g]);
    assert_eq!(ids(&devices), ["tty:tty5", "tty:ttyUSB0", "tty:ttyUSB1"]);
    assert_eq!(warnings, Vec::<String>::new());
}

#[test]
fn a_missing_class_and_bus_is_no_error() {
    let (_t, root) = machine();
    let g = def("t", "{subsystem: hidraw}");
    assert_eq!(run(&root, &[&g]), (vec![], vec![]));
}

#[test]
fn the_generic_backend_yields_to_every_other_backend() {
    // Precedence: a PCI function matched on bus pci is another backend's.
    let others = crate::discover::BACKENDS
        .iter()
        .filter(|b| !matches!(b.name(), NAME | "static"));
    for b in others {
        assert!(b.precedence() > Generic.precedence(), "{}", b.name());
    }
}

#[test]
fn ancestors_stop_at_sys_devices() {
    assert_eq!(
        ancestors(Path::new("/sys/devices/a/b")),
        [
            PathBuf::from("/sys/devices/a/b"),
            PathBuf::from("/sys/devices/a")
        ]
    );
    assert_eq!(ancestors(Path::new("/sys/class/x")), Vec::<PathBuf>::new());
}

#[test]
fn lexical_joins() {
    let j = |b: &str, t: &str| lexical_join(Path::new(b), t).map(|p| p.display().to_string());
    assert_eq!(
        j("/dev/serial/by-id", "../../ttyUSB0").as_deref(),
        Some("/dev/ttyUSB0")
    );
    assert_eq!(
        j("/dev/serial/by-id", "./../x").as_deref(),
        Some("/dev/serial/x")
    );
    assert_eq!(j("/dev/serial/by-id", "../../../etc/passwd"), None);
    assert_eq!(j("/dev/serial/by-id", "/dev/ttyUSB0"), None);
}

proptest! {
    #[test]
    fn lexical_join_never_leaves_dev(target in "[a-z./]{0,24}") {
        if let Some(p) = lexical_join(Path::new("/dev/serial/by-id"), &target) {
            prop_assert!(p.starts_with("/dev"));
            prop_assert!(p.components().all(|c| !matches!(c, Component::ParentDir)));
        }
    }

    #[test]
    fn checked_values_are_bounded_printable_text(text in "\\PC{0,300}|[\\x00-\\x7f]{0,20}") {
        match checked(text.clone()) {
            Value::Text(t) => {
                prop_assert!(t.len() <= MAX_VALUE_LEN);
                prop_assert!(!t.chars().any(char::is_control));
                prop_assert_eq!(t, text);
            }
            Value::Hostile(_) => {
                prop_assert!(text.len() > MAX_VALUE_LEN || text.chars().any(char::is_control));
            }
        }
    }
}

#[test]
fn join_tags_name_the_entry() {
    assert_eq!(join_tag("amd-gpu", 0), "amd-gpu.join[0]");
}

// ---------------------------------------------------------------- usb, groups

/// A generic definition named `name` with this `match` and `names` (YAML).
fn def_named(name: &str, m: &str, names: &str) -> Generator {
    parse(
        Path::new("test.yaml"),
        &format!(
            "name: {name}\nbackend: generic\nkind: example.com/dev\ntemplate: generic\nmatch: {m}\nnames: {names}\n"
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_usb_strategy_records_where_each_port_sits() {
    let (_t, root) = machine();
    let g = def_named("serial", SERIAL, "[usb]");
    let (devices, warnings) = run(&root, &[&g]);
    assert_eq!(warnings, Vec::<String>::new());
    let usb = |i: usize| devices[i].generic.as_ref().unwrap().usb.clone();
    assert_eq!(
        usb(0),
        Some(UsbPort {
            device: "1-1".into(),
            path: "pci-0000:00:14.0-usb-1".into(),
            serial: Some("A10K5PQR".into()),
            interface: Some("00".into()),
            port: Some(0),
        })
    );
    // No serial number of its own: the root hub's is not taken.
    assert_eq!(
        usb(1),
        Some(UsbPort {
            device: "1-2".into(),
            path: "pci-0000:00:14.0-usb-2".into(),
            serial: None,
            interface: Some("00".into()),
            port: Some(0),
        })
    );
    // Without the strategy nothing more is read.
    let (devices, _) = run(&root, &[&def("serial", SERIAL)]);
    assert!(
        devices
            .iter()
            .all(|d| d.generic.as_ref().unwrap().usb.is_none())
    );
}

#[test]
fn a_bad_interface_or_port_number_is_left_out_with_a_warning() {
    let (t, root) = machine();
    let intf = format!("{HCD}/usb1/1-1/1-1:1.0");
    write(t.path(), &format!("{intf}/bInterfaceNumber"), b"0x1\n");
    write(t.path(), &format!("{intf}/ttyUSB0/port_number"), b"-1\n");
    let g = def_named("serial", SERIAL, "[usb]");
    let (devices, warnings) = run(&root, &[&g]);
    let u = devices[0].generic.as_ref().unwrap().usb.clone().unwrap();
    assert_eq!((u.interface, u.port), (None, None));
    assert_eq!(
        warnings,
        [
            format!("/{intf}/ttyUSB0/port_number: \"-1\" is not a port number; ignoring it"),
            format!("/{intf}/bInterfaceNumber: \"0x1\" is not an interface number; ignoring it"),
        ]
    );
}

/// A class device `name` of `class` below `parent`, with its node.
fn class_node(root: &Path, parent: &str, class: &str, name: &str, minor: u32) {
    let p = format!("{parent}/{class}/{name}");
    write(
        root,
        &format!("{p}/dev"),
        format!("234:{minor}\n").as_bytes(),
    );
    write(
        root,
        &format!("{p}/uevent"),
        format!("MAJOR=234\nMINOR={minor}\nDEVNAME={name}\n").as_bytes(),
    );
    link(
        root,
        &format!("{p}/subsystem"),
        &format!("sys/class/{class}"),
    );
    link(root, &format!("{p}/device"), parent);
    link(root, &format!("sys/class/{class}/{name}"), &p);
}

/// Two FPGA functions with xdma-like nodes: 0000:00:02.0 with three,
/// 0000:00:03.0 with one; and one node of the class below no PCI function.
fn fpga_machine() -> (tempfile::TempDir, HostRoot) {
    let tmp = tempfile::tempdir().unwrap();
    let r = tmp.path();
    let mut manifest = String::new();
    for (f, nodes) in [
        (
            "0000:00:02.0",
            &["xdma0_user", "xdma0_h2c_10", "xdma0_h2c_2"][..],
        ),
        ("0000:00:03.0", &["xdma1_user"][..]),
    ] {
        let dir = format!("sys/devices/pci0000:00/{f}");
        write(r, &format!("{dir}/uevent"), b"DRIVER=xdma\n");
        write(r, &format!("{dir}/vendor"), b"0x10ee\n");
        link(r, &format!("{dir}/subsystem"), "sys/bus/pci");
        link(r, &format!("{dir}/driver"), "sys/bus/pci/drivers/xdma");
        for n in nodes {
            let minor = u32::try_from(manifest.lines().count()).unwrap();
            class_node(r, &dir, "xdma", n, minor);
            manifest.push_str(&format!("/dev/{n} c 234:{minor} 0600 0 0\n"));
        }
    }
    write(r, "sys/devices/virtual/xdma/xdma_stray/dev", b"234:99\n");
    write(
        r,
        "sys/devices/virtual/xdma/xdma_stray/uevent",
        b"DEVNAME=xdma_stray\n",
    );
    link(
        r,
        "sys/class/xdma/xdma_stray",
        "sys/devices/virtual/xdma/xdma_stray",
    );
    manifest.push_str("/dev/xdma_stray c 234:99 0600 0 0\n");
    write(r, "dev.manifest", manifest.as_bytes());
    let root = HostRoot::open(r).unwrap();
    (tmp, root)
}

const GROUPED: &str =
    "{subsystem: xdma, parent: {subsystem: pci}, group: parent, expose: [vendor]}";

#[test]
fn group_parent_makes_one_device_of_the_nodes_below_one_parent() {
    let (_t, root) = fpga_machine();
    let g = def("fpga", GROUPED);
    let (devices, warnings) = run(&root, &[&g]);
    assert_eq!(warnings, Vec::<String>::new());
    assert_eq!(ids(&devices), ["xdma:0000:00:02.0", "xdma:0000:00:03.0"]);
    let d = &devices[0];
    let names: Vec<&str> = d.nodes.iter().map(|n| n.name.as_str()).collect();
    // Every node of the function, in natural order; the stray node below
    // no PCI function is in no group.
    assert_eq!(names, ["xdma0_h2c_2", "xdma0_h2c_10", "xdma0_user"]);
    assert_eq!(d.sysfs_path, "/sys/devices/pci0000:00/0000:00:02.0");
    assert_eq!(d.bus, "pci");
    assert_eq!(d.driver.as_deref(), Some("xdma"));
    assert_eq!(d.attrs.get("vendor").map(String::as_str), Some("0x10ee"));
    let info = d.generic.as_ref().unwrap();
    assert_eq!(
        (
            info.name.as_str(),
            info.group.as_deref(),
            &info.matched_by[..]
        ),
        ("0000:00:02.0", Some("pci"), &["fpga".to_string()][..])
    );
}

#[test]
fn a_grouping_and_a_plain_definition_each_get_their_devices() {
    let (_t, root) = fpga_machine();
    let grouped = def("fpga", GROUPED);
    let plain = def("nodes", "{subsystem: xdma, name: [\"*_user\"]}");
    let same = def("fpga2", GROUPED);
    let (devices, warnings) = run(&root, &[&grouped, &plain, &same]);
    assert_eq!(warnings, Vec::<String>::new());
    assert_eq!(
        ids(&devices),
        [
            "xdma:0000:00:02.0",
            "xdma:0000:00:03.0",
            "xdma:xdma0_user",
            "xdma:xdma1_user"
        ]
    );
    // Two definitions that group alike share the group device; the plain
    // one's devices are the nodes alone.
    assert_eq!(
        devices[0].generic.as_ref().unwrap().matched_by,
        ["fpga", "fpga2"]
    );
    assert_eq!(devices[2].generic.as_ref().unwrap().matched_by, ["nodes"]);
    assert_eq!(devices[2].nodes.len(), 1);
}

#[test]
fn two_definitions_grouping_other_nodes_of_one_parent_are_told() {
    let (_t, root) = fpga_machine();
    let all = def("fpga", GROUPED);
    let user = def(
        "user",
        "{subsystem: xdma, name: [\"*_user\"], parent: {subsystem: pci}, group: parent}",
    );
    let (devices, warnings) = run(&root, &[&all, &user]);
    assert_eq!(ids(&devices), ["xdma:0000:00:02.0", "xdma:0000:00:03.0"]);
    assert_eq!(devices[0].nodes.len(), 3);
    // 0000:00:03.0 has one node: both group it alike.
    assert_eq!(
        devices[1].generic.as_ref().unwrap().matched_by,
        ["fpga", "user"]
    );
    assert_eq!(
        warnings,
        [
            "/sys/devices/pci0000:00/0000:00:02.0: generators \"fpga\" and \"user\" group different \
          xdma nodes of 0000:00:02.0; only \"fpga\" gets a device of them"
        ]
    );
}

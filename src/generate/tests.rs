#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use super::*;

use crate::model::{GenericInfo, PciInfo};

use crate::model::test_node as node;

fn generic(subsystem: &str, name: &str, minor: u32, matched: &[&str], joined: &[&str]) -> Device {
    Device {
        backend: "generic".into(),
        id: format!("{subsystem}:{name}"),
        sysfs_path: format!("/sys/devices/virtual/{subsystem}/{name}"),
        bus: "virtual".into(),
        nodes: vec![node("generic", name, &format!("/dev/{name}"), 4, minor)],
        generic: Some(GenericInfo {
            subsystem: subsystem.into(),
            name: name.into(),
            matched_by: matched.iter().map(|s| (*s).to_string()).collect(),
            joined_by: joined.iter().map(|s| (*s).to_string()).collect(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn gpu(addr: &str, driver: &str, card: u32) -> Device {
    Device {
        backend: "drm".into(),
        id: addr.into(),
        sysfs_path: format!("/sys/devices/pci0000:00/{addr}"),
        bus: "pci".into(),
        pci: Some(PciInfo {
            address: addr.into(),
            vendor_id: "0x1002".into(),
            device_id: "0x73ff".into(),
            subsystem_vendor_id: None,
            subsystem_device_id: None,
            class: "0x030000".into(),
            vendor_name: None,
            device_name: None,
            iommu_group: None,
        }),
        driver: Some(driver.into()),
        nodes: vec![node(
            "primary",
            &format!("card{card}"),
            &format!("/dev/dri/card{card}"),
            226,
            card,
        )],
        ..Default::default()
    }
}

fn generator(yaml: &str) -> Generator {
    crate::generator::parse(std::path::Path::new("test.yaml"), yaml).unwrap()
}

fn ids(devices: &[Device]) -> Vec<&str> {
    devices.iter().map(|d| d.id.as_str()).collect()
}

const TTY: &str = "name: generic-tty\nbackend: generic\nkind: cdigen.io/tty\n\
                   template: generic\nmatch: {subsystem: tty}\nnames: [node]\n";

/// VTs tty1..tty20 (found by `generic-tty`), shuffled.
fn vts() -> Discovery {
    let mut devices: Vec<Device> = (1..=20)
        .rev()
        .map(|n| generic("tty", &format!("tty{n}"), n, &["generic-tty"], &[]))
        .collect();
    devices.swap(3, 11);
    Discovery {
        devices,
        warnings: vec![],
    }
}

#[test]
fn reserve_leaves_out_the_first_devices_in_natural_order() {
    let g = generator(&format!("{TTY}reserve: 12\n"));
    let got = select_devices(&g, &vts());
    assert_eq!(
        ids(&got),
        (13..=20).map(|n| format!("tty:tty{n}")).collect::<Vec<_>>()
    );
    // The seed's example: three TTYs from the first free ones.
    let first: Vec<&str> = got
        .iter()
        .take(3)
        .map(|d| d.nodes[0].path.as_str())
        .collect();
    assert_eq!(first, ["/dev/tty13", "/dev/tty14", "/dev/tty15"]);
    // Reserving more than there are leaves nothing, without an error.
    let g = generator(&format!("{TTY}reserve: 4294967295\n"));
    assert_eq!(select_devices(&g, &vts()), vec![]);
    let g = generator(TTY);
    assert_eq!(select_devices(&g, &vts()).len(), 20);
}

#[test]
fn a_generic_generator_takes_only_the_devices_its_match_found() {
    let mut d = vts();
    d.devices
        .push(generic("tty", "ttyUSB0", 0, &["usb-serial"], &[]));
    d.devices
        .push(generic("tty", "ttyS0", 64, &["generic-tty", "other"], &[]));
    d.devices
        .push(generic("kfd", "kfd", 0, &[], &["generic-tty.join[0]"]));
    let g = generator(TTY);
    let got = select_devices(&g, &d);
    assert_eq!(got.len(), 21);
    assert!(got.iter().any(|x| x.id == "tty:ttyS0"));
    assert!(
        !got.iter()
            .any(|x| x.id == "tty:ttyUSB0" || x.id == "kfd:kfd")
    );
}

#[test]
fn joined_nodes_go_to_the_devices_bound_to_the_listed_drivers() {
    let g = generator(
        "name: amd\nbackend: drm\nkind: amd.com/gpu\ntemplate: drm\n\
         select: {node_roles: [primary, kfd]}\n\
         join:\n  - match: {subsystem: kfd}\n    role: kfd\n    drivers: [amdgpu]\n",
    );
    let d = Discovery {
        devices: vec![
            gpu("0000:0c:00.0", "amdgpu", 0),
            gpu("0000:03:00.0", "radeon", 1),
            generic("kfd", "kfd", 0, &[], &["amd.join[0]"]),
            generic("kfd", "other", 1, &[], &["someone-else.join[0]"]),
        ],
        warnings: vec![],
    };
    let got = select_devices(&g, &d);
    assert_eq!(ids(&got), ["0000:03:00.0", "0000:0c:00.0"]);
    let nodes = |d: &Device| {
        d.nodes
            .iter()
            .map(|n| format!("{}={}", n.role, n.path))
            .collect::<Vec<_>>()
    };
    assert_eq!(nodes(&got[0]), ["primary=/dev/dri/card1"]);
    assert_eq!(nodes(&got[1]), ["primary=/dev/dri/card0", "kfd=/dev/kfd"]);
    // node_roles filters joined nodes like any other.
    let g2 = generator(
        "name: amd\nbackend: drm\nkind: amd.com/gpu\ntemplate: drm\n\
         select: {node_roles: [primary]}\n\
         join:\n  - match: {subsystem: kfd}\n    role: kfd\n",
    );
    assert!(
        select_devices(&g2, &d)
            .iter()
            .all(|x| x.nodes.iter().all(|n| n.role == "primary"))
    );
    // A device whose only wanted node is the joined, shared one is not
    // selected for it.
    let g3 = generator(
        "name: amd\nbackend: drm\nkind: amd.com/gpu\ntemplate: drm\n\
         select: {node_roles: [kfd]}\n\
         join:\n  - match: {subsystem: kfd}\n    role: kfd\n",
    );
    assert_eq!(select_devices(&g3, &d), vec![]);
}

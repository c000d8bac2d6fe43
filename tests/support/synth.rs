//! Builds synthetic machines with many GPUs, laid out as real sysfs is
//! (devices under `sys/devices`, relative class links, `dev`/`uevent`
//! files, connectors as noise, a `dev.manifest`). Used by the benchmark
//! and by a test that checks discovery finds every GPU.

use std::fmt::Write as _;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

/// Writes a machine with `gpus` AMD GPUs (each with card, render node and
/// two connectors) under `root`.
pub fn amd_gpus(root: &Path, gpus: usize) {
    let w = |p: &Path, text: &str| {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    };
    let class = root.join("sys/class/drm");
    fs::create_dir_all(&class).unwrap();
    fs::create_dir_all(root.join("sys/bus/pci/drivers/amdgpu")).unwrap();
    w(&class.join("version"), "drm 1.1.0 20060810\n");
    let mut manifest = String::from("# synthetic\n");
    for i in 0..gpus {
        // One root port per GPU, spread over domains/buses.
        let bus = (i % 250) + 1;
        let domain = i / 250;
        let port = format!("{domain:04x}:00:01.{}", 0);
        let bdf = format!("{domain:04x}:{bus:02x}:00.0");
        let rel = format!("devices/pci{domain:04x}:00/{port}/{bdf}");
        let dev = root.join("sys").join(&rel);
        if i % 250 == 0 {
            w(
                &root
                    .join("sys/devices")
                    .join(format!("pci{domain:04x}:00/{port}/vendor")),
                "0x1022\n",
            );
        }
        for (attr, val) in [
            ("vendor", "0x1002\n"),
            ("device", "0x744c\n"),
            ("subsystem_vendor", "0x1da2\n"),
            ("subsystem_device", "0xe471\n"),
            ("class", "0x030000\n"),
            ("numa_node", "-1\n"),
        ] {
            w(&dev.join(attr), val);
        }
        // sys/devices/pciD:00/port/bdf is 4 levels below sys.
        symlink("../../../../bus/pci/drivers/amdgpu", dev.join("driver")).unwrap();
        symlink("../../../../bus/pci", dev.join("subsystem")).unwrap();
        let card = 2 * i + 1;
        let render = 128 + i;
        for (name, minor) in [
            (format!("card{card}"), card),
            (format!("renderD{render}"), render),
        ] {
            let node = dev.join("drm").join(&name);
            w(&node.join("dev"), &format!("226:{minor}\n"));
            w(
                &node.join("uevent"),
                &format!("MAJOR=226\nMINOR={minor}\nDEVNAME=dri/{name}\nDEVTYPE=drm_minor\n"),
            );
            symlink(format!("../../../{bdf}"), node.join("device")).unwrap();
            symlink(format!("../../{rel}/drm/{name}"), class.join(&name)).unwrap();
            let mode = if name.starts_with("card") {
                "0660 0 44"
            } else {
                "0666 0 109"
            };
            writeln!(manifest, "/dev/dri/{name} c 226:{minor} {mode}").unwrap();
            let suffix = if name.starts_with("card") {
                "card"
            } else {
                "render"
            };
            writeln!(manifest, "/dev/dri/by-path/pci-{bdf}-{suffix} l ../{name}").unwrap();
        }
        for conn in ["DP-1", "HDMI-A-1"] {
            let name = format!("card{card}-{conn}");
            let c = dev.join("drm").join(format!("card{card}")).join(&name);
            w(&c.join("status"), "disconnected\n");
            w(&c.join("uevent"), "DEVTYPE=drm_connector\n");
            symlink(
                format!("../../{rel}/drm/card{card}/{name}"),
                class.join(&name),
            )
            .unwrap();
        }
    }
    w(&root.join("dev.manifest"), &manifest);
}

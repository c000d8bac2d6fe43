//! Builds small synthetic DRM machines for the CDI plugin tests: PCI GPUs
//! of any vendor and NUMA node, GPU `i` at `0000:<i+1>:00.0` with
//! `card<i>` and `renderD<128+i>` (so the first is the draft's
//! `/dev/dri/card0` + `/dev/dri/renderD128`), laid out as real sysfs is
//! (relative class and bus links, `dev`/`uevent` files, a `dev.manifest`).
//! [`unbind_gpu`] unbinds one from its driver, [`remove_gpu`] unplugs one.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

use std::fmt::Write as _;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

/// One GPU.
#[derive(Debug, Clone, Copy)]
pub struct Gpu {
    /// PCI vendor ID (`"0x1234"`).
    pub vendor: &'static str,
    /// NUMA node, or none (`-1`).
    pub numa: Option<u32>,
}

/// The sysfs path of GPU `i` under `sys/`.
fn rel(i: usize) -> String {
    let port = format!("0000:00:{:02x}.0", i + 1);
    let bdf = format!("0000:{:02x}:00.0", i + 1);
    format!("devices/pci0000:00/{port}/{bdf}")
}

/// Writes a machine with `gpus` under `root` (driver `iagpu`).
pub fn pci_gpus(root: &Path, gpus: &[Gpu]) {
    let w = |p: &Path, text: &str| {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    };
    let class = root.join("sys/class/drm");
    fs::create_dir_all(&class).unwrap();
    fs::create_dir_all(root.join("sys/bus/pci/drivers/iagpu")).unwrap();
    w(&class.join("version"), "drm 1.1.0 20060810\n");
    w(&root.join("proc/devices"), "Character devices:\n226 drm\n");
    let mut manifest = String::from("# synthetic DRM GPUs\n/dev/dri d\n/dev/dri/by-path d\n");
    for (i, gpu) in gpus.iter().enumerate() {
        let rel = rel(i);
        let bdf = rel.rsplit('/').next().unwrap().to_string();
        let dev = root.join("sys").join(&rel);
        let numa = gpu.numa.map_or("-1".to_string(), |n| n.to_string());
        for (attr, val) in [
            ("vendor", format!("{}\n", gpu.vendor)),
            ("device", "0x0001\n".to_string()),
            ("class", "0x030000\n".to_string()),
            ("numa_node", format!("{numa}\n")),
        ] {
            w(&dev.join(attr), &val);
        }
        // sys/devices/pci0000:00/port/bdf is 4 levels below sys.
        symlink("../../../../bus/pci/drivers/iagpu", dev.join("driver")).unwrap();
        symlink("../../../../bus/pci", dev.join("subsystem")).unwrap();
        symlink(
            format!("../../../../{rel}"),
            root.join("sys/bus/pci/drivers/iagpu").join(&bdf),
        )
        .unwrap();
        fs::create_dir_all(root.join("sys/bus/pci/devices")).unwrap();
        symlink(
            format!("../../../{rel}"),
            root.join("sys/bus/pci/devices").join(&bdf),
        )
        .unwrap();
        for (name, minor, suffix, mode) in [
            (format!("card{i}"), i, "card", "0660 0 44"),
            (
                format!("renderD{}", 128 + i),
                128 + i,
                "render",
                "0666 0 109",
            ),
        ] {
            let node = dev.join("drm").join(&name);
            w(&node.join("dev"), &format!("226:{minor}\n"));
            w(
                &node.join("uevent"),
                &format!("MAJOR=226\nMINOR={minor}\nDEVNAME=dri/{name}\nDEVTYPE=drm_minor\n"),
            );
            symlink(format!("../../../{bdf}"), node.join("device")).unwrap();
            symlink(format!("../../{rel}/drm/{name}"), class.join(&name)).unwrap();
            writeln!(manifest, "/dev/dri/{name} c 226:{minor} {mode}").unwrap();
            writeln!(manifest, "/dev/dri/by-path/pci-{bdf}-{suffix} l ../{name}").unwrap();
        }
    }
    fs::write(root.join("dev.manifest"), manifest).unwrap();
}

/// Removes a file that may be gone already.
fn remove_if_there(path: &Path) {
    match fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => panic!("{}: {e}", path.display()),
        _ => {}
    }
}

/// Unbinds GPU `i` from its driver, as `echo BDF > .../unbind` does: its
/// DRM nodes and the `driver` links go, the PCI device stays.
pub fn unbind_gpu(root: &Path, i: usize) {
    let class = root.join("sys/class/drm");
    remove_if_there(&class.join(format!("card{i}")));
    remove_if_there(&class.join(format!("renderD{}", 128 + i)));
    let bdf = format!("0000:{:02x}:00.0", i + 1);
    remove_if_there(&root.join("sys/bus/pci/drivers/iagpu").join(&bdf));
    let dev = root.join("sys").join(rel(i));
    remove_if_there(&dev.join("driver"));
    if dev.join("drm").exists() {
        fs::remove_dir_all(dev.join("drm")).unwrap();
    }
}

/// Unplugs GPU `i` (bound or not): its device directory and every link to
/// it go.
pub fn remove_gpu(root: &Path, i: usize) {
    unbind_gpu(root, i);
    let bdf = format!("0000:{:02x}:00.0", i + 1);
    fs::remove_file(root.join("sys/bus/pci/devices").join(&bdf)).unwrap();
    fs::remove_dir_all(root.join("sys").join(rel(i))).unwrap();
}

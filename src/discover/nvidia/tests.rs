//! The NVIDIA backend on small trees built in a tempdir, with the procfs
//! text of a real H100 host (driver 580.159.04).

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use super::*;
use crate::generator::{Generator, NameStrategy};

const INFO: &str = "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 41\nGPU UUID: \t GPU-af3e0279-1df1-2cad-1e37-2509bedadba2\nVideo BIOS: \t 96.00.da.00.0c\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\nBus Location: \t 0000:00:06.0\nDevice Minor: \t 0\nGPU Firmware: \t 580.159.04\nGPU Excluded:\t No\n";
const VERSION: &str = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)  \nGCC version:  gcc version 15.3.0 (GCC) \n";
const DEVICES: &str = "Character devices:\n  1 mem\n 10 misc\n195 nvidia\n195 nvidiactl\n238 nvidia-uvm\n241 nvidia-caps\n\nBlock devices:\n  7 loop\n";

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

/// One H100 at 0000:00:06.0; `mig` adds gi1/ci0 and gi2/ci0; `manifest`
/// is the dev.manifest text.
fn h100(mig: bool, manifest: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let r = tmp.path();
    write(r, "proc/driver/nvidia/version", VERSION);
    write(r, "proc/driver/nvidia/gpus/0000:00:06.0/information", INFO);
    write(r, "proc/devices", DEVICES);
    let dev = "sys/devices/pci0000:00/0000:00:06.0";
    for (a, v) in [
        ("vendor", "0x10de\n"),
        ("device", "0x2330\n"),
        ("class", "0x030200\n"),
        ("numa_node", "-1\n"),
    ] {
        write(r, &format!("{dev}/{a}"), v);
    }
    fs::create_dir_all(r.join("sys/bus/pci/drivers/nvidia")).unwrap();
    fs::create_dir_all(r.join("sys/bus/pci/devices")).unwrap();
    symlink(
        "../../../bus/pci/drivers/nvidia",
        r.join(dev).join("driver"),
    )
    .unwrap();
    symlink("../../../bus/pci", r.join(dev).join("subsystem")).unwrap();
    symlink(
        "../../../devices/pci0000:00/0000:00:06.0",
        r.join("sys/bus/pci/devices/0000:00:06.0"),
    )
    .unwrap();
    let caps = "proc/driver/nvidia/capabilities";
    write(
        r,
        &format!("{caps}/mig/config"),
        "DeviceFileMinor: 1\nDeviceFileMode: 256\n",
    );
    fs::create_dir_all(r.join(caps).join("gpu0/mig")).unwrap();
    if mig {
        for (gi, ci, gm, cm) in [(1, 0, 12, 13), (2, 0, 21, 22)] {
            write(
                r,
                &format!("{caps}/gpu0/mig/gi{gi}/access"),
                &format!("DeviceFileMinor: {gm}\nDeviceFileMode: 292\n"),
            );
            write(
                r,
                &format!("{caps}/gpu0/mig/gi{gi}/ci{ci}/access"),
                &format!("DeviceFileMinor: {cm}\nDeviceFileMode: 292\n"),
            );
        }
    }
    write(r, "dev.manifest", manifest);
    tmp
}

const FULL_DEV: &str = "/dev/nvidia0 c 195:0 0666 0 0\n/dev/nvidiactl c 195:255 0666 0 0\n/dev/nvidia-uvm c 238:0 0666 0 0\n/dev/nvidia-uvm-tools c 238:1 0666 0 0\n";

/// The GPUs and MIG devices found, and the warnings.
fn run(tmp: &tempfile::TempDir) -> (Vec<Device>, Vec<String>) {
    let (devices, warnings) = run_all(tmp);
    (
        devices.into_iter().filter(|d| d.bus == "pci").collect(),
        warnings,
    )
}

/// Every device found (the management device too), and the warnings.
fn run_all(tmp: &tempfile::TempDir) -> (Vec<Device>, Vec<String>) {
    let root = HostRoot::open(tmp.path()).unwrap();
    let mut report = Report::default();
    let devices = Nvidia
        .discover(&crate::discover::Context::new(&root), &mut report)
        .unwrap();
    let warnings = report
        .warnings
        .iter()
        .map(|w| format!("{}: {}", w.path.display(), w.message))
        .collect();
    (devices, warnings)
}

fn node_list(d: &Device) -> Vec<String> {
    d.nodes
        .iter()
        .map(|n| format!("{} {}:{} {}", n.path, n.major, n.minor, n.role))
        .collect()
}

#[test]
fn a_real_h100_without_mig() {
    let (devices, warnings) = run(&h100(false, FULL_DEV));
    assert_eq!(warnings, Vec::<String>::new());
    assert_eq!(devices.len(), 1);
    let d = &devices[0];
    assert_eq!(d.id, "0000:00:06.0");
    assert_eq!(d.sysfs_path, "/sys/devices/pci0000:00/0000:00:06.0");
    assert_eq!(
        node_list(d),
        [
            "/dev/nvidia0 195:0 nvidia-gpu",
            "/dev/nvidiactl 195:255 nvidia-control",
            "/dev/nvidia-uvm 238:0 nvidia-uvm",
            "/dev/nvidia-uvm-tools 238:1 nvidia-uvm-tools",
        ],
        "no nvidia-modeset: the host has none"
    );
    let nv = d.nvidia.as_ref().unwrap();
    assert_eq!(nv.gpu_uuid, "GPU-af3e0279-1df1-2cad-1e37-2509bedadba2");
    assert_eq!(nv.driver_version.as_deref(), Some("580.159.04"));
    assert!(!nv.mig_enabled);
}

#[test]
fn mig_devices_and_their_names() {
    let dev =
        format!("{FULL_DEV}/dev/nvidia-caps d\n/dev/nvidia-caps/nvidia-cap12 c 241:12 0444 0 0\n");
    let (devices, warnings) = run(&h100(true, &dev));
    assert_eq!(warnings, Vec::<String>::new());
    let ids: Vec<&str> = devices.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "0000:00:06.0/gi1/ci0",
            "0000:00:06.0/gi2/ci0",
            "0000:00:06.0"
        ]
    );
    // The parent GPU carries the MIG management node (mig/config, minor 1),
    // which generators give only when asked for.
    assert!(
        node_list(&devices[2])
            .contains(&"/dev/nvidia-caps/nvidia-cap1 241:1 nvidia-mig-config".to_string()),
        "{:?}",
        node_list(&devices[2])
    );
    assert_eq!(
        node_list(&devices[0])[..3],
        [
            "/dev/nvidia0 195:0 nvidia-gpu".to_string(),
            "/dev/nvidia-caps/nvidia-cap12 241:12 nvidia-cap".into(),
            "/dev/nvidia-caps/nvidia-cap13 241:13 nvidia-cap".into(),
        ]
    );
    // Names as nvidia-ctk gives them.
    let g: Generator = crate::generator::parse(
        Path::new("builtin:generators/nvidia.yaml"),
        include_str!("../../../generators/nvidia.yaml"),
    )
    .unwrap();
    assert_eq!(
        g.names,
        [NameStrategy::Index, NameStrategy::Uuid, NameStrategy::All]
    );
    let ctx = crate::render::context(&g, &devices);
    let names: Vec<&str> = ctx.devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "0",
            "0:0",
            "0:1",
            "GPU-af3e0279-1df1-2cad-1e37-2509bedadba2",
            "all"
        ]
    );
    let common: Vec<&str> = ctx.common_nodes.iter().map(|n| n.path.as_str()).collect();
    assert_eq!(
        common,
        ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]
    );
    let spec = crate::render::Templates::load(None)
        .unwrap()
        .render(&g, &devices)
        .unwrap();
    assert_eq!(spec.devices.len(), 5);
    assert_eq!(spec.container_edits.device_nodes.len(), 3);
    assert_eq!(
        spec.devices[1]
            .container_edits
            .device_nodes
            .iter()
            .map(|n| n.path.as_str())
            .collect::<Vec<_>>(),
        [
            "/dev/nvidia0",
            "/dev/nvidia-caps/nvidia-cap12",
            "/dev/nvidia-caps/nvidia-cap13"
        ]
    );
}

#[test]
fn uvm_not_loaded_is_said_and_left_out() {
    let tmp = h100(false, FULL_DEV);
    write(
        tmp.path(),
        "proc/devices",
        "Character devices:\n195 nvidia\n241 nvidia-caps\n",
    );
    let (devices, warnings) = run(&tmp);
    assert_eq!(
        warnings,
        [
            "/proc/devices: nvidia-uvm is not loaded (no `nvidia-uvm` in /proc/devices): CUDA programs in \
          containers will fail until it is (run `nvidia-modprobe -u -c=0`, then regenerate); its nodes are left out"
        ]
    );
    assert_eq!(
        node_list(&devices[0]),
        [
            "/dev/nvidia0 195:0 nvidia-gpu",
            "/dev/nvidiactl 195:255 nvidia-control"
        ]
    );
}

#[test]
fn uvm_loaded_but_not_created_is_written_with_its_numbers() {
    let (devices, warnings) = run(&h100(
        false,
        "/dev/nvidia0 c 195:0 0666 0 0\n/dev/nvidiactl c 195:255 0666 0 0\n",
    ));
    assert_eq!(warnings, Vec::<String>::new());
    assert_eq!(
        node_list(&devices[0])[2..],
        [
            "/dev/nvidia-uvm 238:0 nvidia-uvm".to_string(),
            "/dev/nvidia-uvm-tools 238:1 nvidia-uvm-tools".into()
        ]
    );
}

#[test]
fn old_driver_naming_and_missing_gpu_node() {
    let tmp = h100(false, "/dev/nvidiactl c 195:255 0666 0 0\n");
    write(
        tmp.path(),
        "proc/devices",
        "Character devices:\n195 nvidia-frontend\n511 nvidia-uvm\n",
    );
    let (devices, warnings) = run(&tmp);
    assert_eq!(
        warnings,
        [
            "/dev/nvidia0: GPU 0000:00:06.0 (GPU-af3e0279-1df1-2cad-1e37-2509bedadba2) is in procfs but its node is \
          missing from /dev; writing it with its numbers (195:0)"
        ]
    );
    assert_eq!(node_list(&devices[0])[0], "/dev/nvidia0 195:0 nvidia-gpu");
    assert_eq!(
        node_list(&devices[0])[2],
        "/dev/nvidia-uvm 511:0 nvidia-uvm"
    );
}

#[test]
fn no_driver_and_bad_information() {
    let tmp = h100(false, FULL_DEV);
    write(tmp.path(), "proc/devices", "Character devices:\n  1 mem\n");
    let (devices, warnings) = run(&tmp);
    assert!(devices.is_empty());
    assert_eq!(
        warnings,
        [
            "/proc/devices: no `nvidia` (or `nvidia-frontend`) character device: the driver is not loaded; skipping NVIDIA GPUs"
        ]
    );
    let tmp = h100(false, FULL_DEV);
    write(
        tmp.path(),
        "proc/driver/nvidia/gpus/0000:00:06.0/information",
        &INFO.replace("Device Minor: \t 0", "Device Minor: \t x"),
    );
    let (devices, warnings) = run(&tmp);
    assert!(devices.is_empty());
    assert_eq!(
        warnings,
        [
            "/proc/driver/nvidia/gpus/0000:00:06.0/information: \"Device Minor\" is \"x\", expected a number \
          from 0 to 254; skipping this GPU"
        ]
    );
}

/// A test double for NVML.
struct Fake(Result<Vec<nvml::NvmlGpu>, String>);

impl nvml::GpuSource for Fake {
    fn gpus(&self) -> Result<Vec<nvml::NvmlGpu>, String> {
        self.0.clone()
    }
}

fn enrich_with(devices: &mut [Device], fake: Fake) -> Vec<String> {
    let mut report = Report::default();
    nvml::enrich(devices, &fake, &mut report);
    report.warnings.iter().map(|w| w.message.clone()).collect()
}

/// The MIG UUIDs of `devices`, in their order (`None` for the GPU).
fn mig_uuids(devices: &[Device]) -> Vec<Option<&str>> {
    devices
        .iter()
        .map(|d| {
            d.nvidia
                .as_ref()
                .unwrap()
                .mig
                .as_ref()
                .and_then(|m| m.uuid.as_deref())
        })
        .collect()
}

/// NVML's view of the H100 with `migs`: (gi, ci, uuid, profile).
fn nvml_h100(migs: &[(Option<u32>, Option<u32>, &str, &str)]) -> nvml::NvmlGpu {
    nvml::NvmlGpu {
        uuid: "GPU-af3e0279-1df1-2cad-1e37-2509bedadba2".into(),
        bus_id: nvml::normalize_bus_id("00000000:00:06.0").unwrap(),
        minor: Some(0),
        migs: migs
            .iter()
            .map(|(gi, ci, uuid, profile)| nvml::NvmlMig {
                gi: *gi,
                ci: *ci,
                uuid: uuid.to_string(),
                profile: Some(profile.to_string()),
            })
            .collect(),
    }
}

#[test]
fn nvml_mig_uuids_go_by_instance_ids_not_position() {
    let dev = format!("{FULL_DEV}/dev/nvidia-caps d\n");
    let (mut devices, _) = run(&h100(true, &dev));
    // procfs lists gi1/ci0 then gi2/ci0; NVML's index order is another.
    let warnings = enrich_with(
        &mut devices,
        Fake(Ok(vec![nvml_h100(&[
            (Some(2), Some(0), "MIG-bbb", "4g.40gb"),
            (Some(1), Some(0), "MIG-aaa", "3g.40gb"),
        ])])),
    );
    assert_eq!(warnings, Vec::<String>::new());
    assert_eq!(
        mig_uuids(&devices),
        [Some("MIG-aaa"), Some("MIG-bbb"), None]
    );
    let profiles: Vec<Option<&str>> = devices
        .iter()
        .filter_map(|d| d.nvidia.as_ref().unwrap().mig.as_ref())
        .map(|m| m.profile.as_deref())
        .collect();
    assert_eq!(profiles, [Some("3g.40gb"), Some("4g.40gb")]);
    // uuid names now include the MIG UUIDs.
    let g: Generator = crate::generator::parse(
        Path::new("nvidia.yaml"),
        "name: n\nbackend: nvidia\nkind: nvidia.com/gpu\ntemplate: nvidia\nnames: [uuid]\n",
    )
    .unwrap();
    let names: Vec<String> = crate::render::context(&g, &devices)
        .devices
        .iter()
        .map(|d| d.name.clone())
        .collect();
    assert_eq!(
        names,
        [
            "GPU-af3e0279-1df1-2cad-1e37-2509bedadba2",
            "MIG-aaa",
            "MIG-bbb"
        ]
    );
}

#[test]
fn nvml_disagreements_are_warnings_naming_gpu_and_instances() {
    let dev = format!("{FULL_DEV}/dev/nvidia-caps d\n");
    let (mut devices, _) = run(&h100(true, &dev));
    let mut other = nvml_h100(&[
        (Some(1), Some(0), "MIG-aaa", "3g.40gb"),
        (Some(3), Some(1), "MIG-ccc", "1g.10gb"),
    ]);
    other.uuid = "GPU-other".into();
    other.minor = Some(3);
    let warnings = enrich_with(
        &mut devices,
        Fake(Ok(vec![other.clone(), {
            let mut x = other;
            x.bus_id = "0000:00:07.0".into();
            x
        }])),
    );
    assert_eq!(
        warnings,
        [
            "NVML sees 2 GPUs, procfs 1",
            "GPU 0000:00:06.0: NVML says UUID GPU-other, procfs GPU-af3e0279-1df1-2cad-1e37-2509bedadba2",
            "GPU 0000:00:06.0: NVML says minor 3, procfs 0",
            "GPU 0000:00:06.0: NVML lists no MIG device gi2/ci0 (procfs does); its MIG UUID is left out",
            "GPU 0000:00:06.0: NVML lists MIG device gi3/ci1 (MIG-ccc) that procfs does not; it is left out",
        ]
    );
    // The one both list gets its UUID; procfs stands for the rest.
    assert_eq!(mig_uuids(&devices), [Some("MIG-aaa"), None, None]);
}

#[test]
fn nvml_mig_devices_without_instance_ids_are_matched_only_when_certain() {
    let dev = format!("{FULL_DEV}/dev/nvidia-caps d\n");
    // Two on each side, no IDs (what nvml-wrapper 0.13 gives): which is
    // which cannot be told, so no UUID, and no warning either.
    let (mut devices, _) = run(&h100(true, &dev));
    let warnings = enrich_with(
        &mut devices,
        Fake(Ok(vec![nvml_h100(&[
            (None, None, "MIG-aaa", "3g.40gb"),
            (None, None, "MIG-bbb", "3g.40gb"),
        ])])),
    );
    assert_eq!(warnings, Vec::<String>::new());
    assert_eq!(mig_uuids(&devices), [None, None, None]);
    // One on each side: it is that one.
    let tmp = h100(true, &dev);
    fs::remove_dir_all(
        tmp.path()
            .join("proc/driver/nvidia/capabilities/gpu0/mig/gi2"),
    )
    .unwrap();
    let (mut devices, _) = run(&tmp);
    let warnings = enrich_with(
        &mut devices,
        Fake(Ok(vec![nvml_h100(&[(None, None, "MIG-aaa", "7g.80gb")])])),
    );
    assert_eq!(warnings, Vec::<String>::new());
    assert_eq!(mig_uuids(&devices), [Some("MIG-aaa"), None]);
}

#[test]
fn nvml_missing_is_not_a_warning() {
    let (mut devices, _) = run(&h100(false, FULL_DEV));
    let before = devices.clone();
    let warnings = enrich_with(
        &mut devices,
        Fake(Err(
            "libnvidia-ml.so.1: cannot open shared object file".into()
        )),
    );
    assert_eq!(warnings, Vec::<String>::new());
    assert_eq!(devices, before);
}

#[test]
fn mig_profiles_from_nvml_names() {
    assert_eq!(
        nvml::profile_from_name("NVIDIA A100 80GB PCIe MIG 3g.40gb").as_deref(),
        Some("3g.40gb")
    );
    assert_eq!(
        nvml::profile_from_name("NVIDIA H100 80GB HBM3 MIG 1g.10gb+me").as_deref(),
        Some("1g.10gb+me")
    );
    assert_eq!(nvml::profile_from_name("NVIDIA H100 80GB HBM3"), None);
    assert_eq!(nvml::profile_from_name("MIG "), None);
}

#[test]
fn bus_ids_normalize() {
    assert_eq!(
        nvml::normalize_bus_id("00000000:41:00.0").as_deref(),
        Some("0000:41:00.0")
    );
    assert_eq!(
        nvml::normalize_bus_id("0000:41:00.0").as_deref(),
        Some("0000:41:00.0")
    );
    assert_eq!(
        nvml::normalize_bus_id("00000000:AB:00.0").as_deref(),
        Some("0000:ab:00.0")
    );
    assert_eq!(nvml::normalize_bus_id("garbage"), None);
}

#[cfg(feature = "nvml")]
#[test]
fn the_real_library_fails_softly_without_a_driver() {
    // On machines without libnvidia-ml this is an error string, never a
    // panic; on a GPU host it lists the GPUs.
    use nvml::GpuSource as _;
    match nvml::Library::default().gpus() {
        Ok(gpus) => assert!(gpus.iter().all(|g| g.uuid.starts_with("GPU-"))),
        Err(e) => assert!(!e.is_empty()),
    }
}

/// Builds a tiny ELF shared object with the system C compiler.
fn shared_object(dir: &Path, file: &str, soname: &str) {
    let src = dir.join("x.c");
    fs::create_dir_all(dir).unwrap();
    fs::write(&src, "int f(void) { return 0; }\n").unwrap();
    let ok = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-nostdlib", "-o"])
        .arg(dir.join(file))
        .arg(&src)
        .arg(format!("-Wl,-soname,{soname}"))
        .status()
        .expect("the driver-files test needs a C compiler (Debian package gcc)")
        .success();
    assert!(ok);
    fs::remove_file(src).unwrap();
}

#[test]
fn driver_files_of_the_running_version() {
    let tmp = h100(false, FULL_DEV);
    let r = tmp.path();
    let lib = r.join("usr/lib/x86_64-linux-gnu");
    for (base, soname) in [
        ("libcuda.so", "libcuda.so.1"),
        ("libnvidia-ml.so", "libnvidia-ml.so.1"),
    ] {
        let file = format!("{base}.580.159.04");
        shared_object(&lib, &file, soname);
        symlink(&file, lib.join(soname)).unwrap();
    }
    // A leftover of an older driver, and a library that is not NVIDIA's.
    shared_object(
        &lib.join("old"),
        "libnvidia-ptxjitcompiler.so.535.183.01",
        "libnvidia-ptxjitcompiler.so.1",
    );
    symlink(
        "libnvidia-ptxjitcompiler.so.535.183.01",
        lib.join("old/libnvidia-ptxjitcompiler.so.1"),
    )
    .unwrap();
    shared_object(&lib, "libz.so.1.3", "libz.so.1");
    write(
        r,
        "etc/ld.so.conf",
        "/usr/lib/x86_64-linux-gnu\n/usr/lib/x86_64-linux-gnu/old\n",
    );
    let ldconfig = ["/sbin/ldconfig", "/usr/sbin/ldconfig"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
        .expect("ldconfig (Debian package libc-bin)");
    let ok = std::process::Command::new(ldconfig)
        .args([
            "-X",
            "-i",
            "-f",
            "/etc/ld.so.conf",
            "-C",
            "/etc/ld.so.cache",
            "-r",
        ])
        .arg(r)
        .status()
        .unwrap()
        .success();
    assert!(ok);
    write(r, "usr/bin/nvidia-smi", "#!/bin/sh\n");
    write(r, "lib/firmware/nvidia/580.159.04/gsp_ga10x.bin", "x");
    write(r, "lib/firmware/nvidia/570.86.15/gsp_ga10x.bin", "x");

    let root = HostRoot::open(r).unwrap();
    let mut report = Report::default();
    let devices = Nvidia
        .discover(&crate::discover::Context::new(&root), &mut report)
        .unwrap();
    assert_eq!(report.warnings, vec![]);
    let files: Vec<String> = devices[0]
        .driver_files
        .as_ref()
        .unwrap()
        .files
        .iter()
        .map(describe)
        .collect();
    let lib = "/usr/lib/x86_64-linux-gnu";
    assert_eq!(
        files,
        [
            "compute firmware /lib/firmware/nvidia/580.159.04/gsp_ga10x.bin <- /lib/firmware/nvidia/580.159.04/gsp_ga10x.bin".to_string(),
            "utility executable /usr/bin/nvidia-smi <- /usr/bin/nvidia-smi".to_string(),
            format!(
                "compute library {lib}/libcuda.so.580.159.04 <- {lib}/libcuda.so.580.159.04 \
                 [{lib}/libcuda.so.1 -> libcuda.so.580.159.04, {lib}/libcuda.so -> libcuda.so.1]"
            ),
            format!(
                "utility library {lib}/libnvidia-ml.so.580.159.04 <- {lib}/libnvidia-ml.so.580.159.04 \
                 [{lib}/libnvidia-ml.so.1 -> libnvidia-ml.so.580.159.04]"
            ),
        ]
    );
    // A driver root elsewhere: host paths under it, container paths not.
    let moved = tempfile::tempdir().unwrap();
    let dr = moved.path().join("run/nvidia/driver");
    fs::create_dir_all(dr.parent().unwrap()).unwrap();
    assert!(
        std::process::Command::new("cp")
            .arg("-a")
            .arg(r)
            .arg(&dr)
            .status()
            .unwrap()
            .success()
    );
    // Same tree, read through `/run/nvidia/driver` inside a root that has it.
    let outer = HostRoot::open(moved.path())
        .unwrap()
        .with_driver_root(Path::new("/run/nvidia/driver"));
    let d = driver::find(&outer, Some("580.159.04"), &mut Report::default());
    assert_eq!(d.problem, None);
    assert!(
        d.files.iter().any(|f| f.host_path
            == "/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04"
            && f.container_path == "/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04"),
        "{:?}",
        d.files
    );
}

/// One driver file as `capability kind container <- host [links]`.
fn describe(f: &crate::model::DriverFile) -> String {
    let kind = serde_json::to_value(f.kind).unwrap();
    let links: Vec<String> = f
        .links
        .iter()
        .map(|l| format!("{} -> {}", l.path, l.target))
        .collect();
    let mut s = format!(
        "{} {} {} <- {}",
        f.capability.as_str(),
        kind.as_str().unwrap(),
        f.container_path,
        f.host_path
    );
    if !links.is_empty() {
        s.push_str(&format!(" [{}]", links.join(", ")));
    }
    s
}

#[test]
fn corrupt_linker_cache_is_said() {
    let tmp = h100(false, FULL_DEV);
    write(
        tmp.path(),
        "etc/ld.so.cache",
        "glibc-ld.so.cache1.1 garbage",
    );
    let root = HostRoot::open(tmp.path()).unwrap();
    let mut report = Report::default();
    let devices = Nvidia
        .discover(&crate::discover::Context::new(&root), &mut report)
        .unwrap();
    assert_eq!(
        devices.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(),
        ["0000:00:06.0", "management"],
        "the GPU is still there"
    );
    let d = devices[0].driver_files.as_ref().unwrap();
    assert!(d.files.is_empty());
    let w: Vec<String> = report
        .warnings
        .iter()
        .map(|w| format!("{}: {}", w.path.display(), w.message))
        .collect();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].starts_with("/etc/ld.so.cache: "), "{w:?}");
    assert!(
        w[0].ends_with("; looking for the driver's libraries by name instead"),
        "{w:?}"
    );
    // No libcuda anywhere: said, with where it looked.
    assert_eq!(
        d.problem.as_deref(),
        Some(
            "no libcuda.so.580.159.04 under the driver root /: looked in /etc/ld.so.cache (not \
             usable) and /usr/lib/x86_64-linux-gnu, /usr/lib/aarch64-linux-gnu, /usr/lib64, \
             /lib/x86_64-linux-gnu, /lib/aarch64-linux-gnu, /lib64, /usr/lib, /lib; point \
             --driver-root or --library-search-path at the driver's files"
        )
    );
}

#[test]
fn without_a_linker_cache_libraries_are_found_by_name() {
    let tmp = h100(false, FULL_DEV);
    let r = tmp.path();
    let lib64 = r.join("usr/lib64");
    // No soname links (nothing ran ldconfig): the sonames come from the files.
    shared_object(&lib64, "libcuda.so.580.159.04", "libcuda.so.1");
    shared_object(&lib64, "libcuda.so.535.183.01", "libcuda.so.1");
    shared_object(&lib64, "libnvidia-ml.so.580.159.04", "libnvidia-ml.so.1");
    shared_object(&lib64, "libother.so.580.159.04", "libother.so.1");
    // Not an ELF object: said, left out.
    write(r, "usr/lib64/libnvidia-cfg.so.580.159.04", "x");
    // Only with --library-search-path.
    shared_object(
        &r.join("opt/nv/lib"),
        "libnvcuvid.so.580.159.04",
        "libnvcuvid.so.1",
    );
    let root = HostRoot::open(r)
        .unwrap()
        .with_library_search_path(&[PathBuf::from("/opt/nv/lib")]);
    let mut report = Report::default();
    let d = driver::find(&root, Some("580.159.04"), &mut report);
    let w: Vec<String> = report
        .warnings
        .iter()
        .map(|w| format!("{}: {}", w.path.display(), w.message))
        .collect();
    assert_eq!(
        w,
        [
            "/usr/lib64/libnvidia-cfg.so.580.159.04: not an ELF shared object: no ELF magic \
          number; leaving it out"
        ]
    );
    assert_eq!(d.problem, None);
    let got: Vec<String> = d.files.iter().map(describe).collect();
    assert_eq!(
        got,
        [
            "video library /opt/nv/lib/libnvcuvid.so.580.159.04 <- /opt/nv/lib/libnvcuvid.so.580.159.04 \
             [/opt/nv/lib/libnvcuvid.so.1 -> libnvcuvid.so.580.159.04]",
            "compute library /usr/lib64/libcuda.so.580.159.04 <- /usr/lib64/libcuda.so.580.159.04 \
             [/usr/lib64/libcuda.so.1 -> libcuda.so.580.159.04, /usr/lib64/libcuda.so -> libcuda.so.1]",
            "utility library /usr/lib64/libnvidia-ml.so.580.159.04 <- /usr/lib64/libnvidia-ml.so.580.159.04 \
             [/usr/lib64/libnvidia-ml.so.1 -> libnvidia-ml.so.580.159.04]",
        ]
    );
}

/// The libraries drivers 580 and 590 added (nvidia-container-toolkit
/// 1.19/1.20 list them): the CUDA 12 NVVM beside CUDA 13's, which must not
/// be taken for each other, and Tile IR's compiler, whose soname is its
/// versioned file.
#[test]
fn nvvm70_and_tileiras_are_compute_libraries() {
    let tmp = h100(false, FULL_DEV);
    let r = tmp.path();
    let lib64 = r.join("usr/lib64");
    shared_object(&lib64, "libcuda.so.590.48.01", "libcuda.so.1");
    shared_object(&lib64, "libnvidia-nvvm.so.590.48.01", "libnvidia-nvvm.so.4");
    shared_object(
        &lib64,
        "libnvidia-nvvm70.so.590.48.01",
        "libnvidia-nvvm70.so.4",
    );
    shared_object(
        &lib64,
        "libnvidia-tileiras.so.590.48.01",
        "libnvidia-tileiras.so.590.48.01",
    );
    let root = HostRoot::open(r).unwrap();
    let mut report = Report::default();
    let d = driver::find(&root, Some("590.48.01"), &mut report);
    assert_eq!(report.warnings, vec![]);
    let got: Vec<String> = d
        .files
        .iter()
        .map(describe)
        .filter(|f| f.contains("nvvm") || f.contains("tileiras"))
        .collect();
    assert_eq!(
        got,
        [
            "compute library /usr/lib64/libnvidia-nvvm.so.590.48.01 <- /usr/lib64/libnvidia-nvvm.so.590.48.01 \
             [/usr/lib64/libnvidia-nvvm.so.4 -> libnvidia-nvvm.so.590.48.01]",
            "compute library /usr/lib64/libnvidia-nvvm70.so.590.48.01 <- /usr/lib64/libnvidia-nvvm70.so.590.48.01 \
             [/usr/lib64/libnvidia-nvvm70.so.4 -> libnvidia-nvvm70.so.590.48.01]",
            "compute library /usr/lib64/libnvidia-tileiras.so.590.48.01 <- /usr/lib64/libnvidia-tileiras.so.590.48.01",
        ]
    );
}

#[test]
fn a_driver_of_another_version_is_said() {
    let tmp = h100(false, FULL_DEV);
    let r = tmp.path();
    shared_object(
        &r.join("usr/lib64"),
        "libcuda.so.535.183.01",
        "libcuda.so.1",
    );
    let root = HostRoot::open(r).unwrap();
    let d = driver::find(&root, Some("580.159.04"), &mut Report::default());
    assert_eq!(
        d.problem.as_deref(),
        Some(
            "the running driver is 580.159.04 (/proc/driver/nvidia/version) but the libraries \
             under / are 535.183.01 (/usr/lib64/libcuda.so.535.183.01): the user-space driver \
             does not match the kernel module (reboot after a driver upgrade, or point \
             --driver-root at the running driver's files)"
        )
    );
    let none = driver::find(&root, None, &mut Report::default());
    assert_eq!(
        none.problem.as_deref(),
        Some(
            "the running driver's version is unknown (/proc/driver/nvidia/version is missing or \
             unreadable), so its libraries cannot be chosen"
        )
    );
}

/// Adds a GPU at `bdf` (PCI class `class`, bound to nvidia, with the
/// driver directory's back link) to a tree made by [`h100`]; with
/// `minor`, also its procfs `information` (that minor, its own UUID).
fn add_gpu(r: &Path, bdf: &str, class: &str, minor: Option<u32>) {
    let dev = format!("sys/devices/pci0000:00/{bdf}");
    for (a, v) in [
        ("vendor", "0x10de\n"),
        ("device", "0x2330\n"),
        ("class", class),
        ("numa_node", "-1\n"),
    ] {
        write(r, &format!("{dev}/{a}"), v);
    }
    symlink(
        "../../../bus/pci/drivers/nvidia",
        r.join(&dev).join("driver"),
    )
    .unwrap();
    symlink("../../../bus/pci", r.join(&dev).join("subsystem")).unwrap();
    symlink(
        format!("../../../devices/pci0000:00/{bdf}"),
        r.join("sys/bus/pci/devices").join(bdf),
    )
    .unwrap();
    symlink(
        format!("../../../../devices/pci0000:00/{bdf}"),
        r.join("sys/bus/pci/drivers/nvidia").join(bdf),
    )
    .unwrap();
    if let Some(minor) = minor {
        let last = bdf.rsplit(':').next().unwrap_or_default();
        write(
            r,
            &format!("proc/driver/nvidia/gpus/{bdf}/information"),
            &INFO
                .replace("0000:00:06.0", bdf)
                .replace("Device Minor: \t 0", &format!("Device Minor: \t {minor}"))
                .replace(
                    "2509bedadba2",
                    &format!("2509bedad{}", last.replace('.', "")),
                ),
        );
    }
}

#[test]
fn gpus_sharing_a_device_minor_are_both_skipped() {
    let tmp = h100(false, FULL_DEV);
    symlink(
        "../../../../devices/pci0000:00/0000:00:06.0",
        tmp.path().join("sys/bus/pci/drivers/nvidia/0000:00:06.0"),
    )
    .unwrap();
    add_gpu(tmp.path(), "0000:00:07.0", "0x030200\n", Some(0));
    add_gpu(tmp.path(), "0000:00:08.0", "0x030200\n", Some(1));
    let (devices, warnings) = run(&tmp);
    assert_eq!(
        warnings,
        [
            "/proc/driver/nvidia/gpus/0000:00:06.0/information: Device Minor 0 is claimed by GPUs \
             0000:00:06.0 and 0000:00:07.0: /dev/nvidia0 would be given for each but is only one of \
             them; skipping GPU 0000:00:06.0",
            "/proc/driver/nvidia/gpus/0000:00:07.0/information: Device Minor 0 is claimed by GPUs \
             0000:00:06.0 and 0000:00:07.0: /dev/nvidia0 would be given for each but is only one of \
             them; skipping GPU 0000:00:07.0",
            "/dev/nvidia1: GPU 0000:00:08.0 (GPU-af3e0279-1df1-2cad-1e37-2509bedad080) is in procfs \
             but its node is missing from /dev; writing it with its numbers (195:1)",
        ]
    );
    let ids: Vec<&str> = devices.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, ["0000:00:08.0"]);
    assert_eq!(node_list(&devices[0])[0], "/dev/nvidia1 195:1 nvidia-gpu");
}

#[test]
fn a_gpu_bound_to_nvidia_without_procfs_entry_is_reported() {
    let tmp = h100(false, FULL_DEV);
    symlink(
        "../../../../devices/pci0000:00/0000:00:06.0",
        tmp.path().join("sys/bus/pci/drivers/nvidia/0000:00:06.0"),
    )
    .unwrap();
    // A GPU the driver is still probing (or could not list), and an
    // NVSwitch (bound to nvidia, never in procfs): only the GPU is reported.
    add_gpu(tmp.path(), "0000:00:07.0", "0x030200\n", None);
    add_gpu(tmp.path(), "0000:00:09.0", "0x068000\n", None);
    let want = "/sys/bus/pci/drivers/nvidia/0000:00:07.0: GPU 0000:00:07.0 is bound to nvidia but \
                has no /proc/driver/nvidia/gpus/0000:00:07.0 entry, which gives its /dev/nvidiaN \
                minor and UUID (the driver is still probing it, or could not create the entry: see \
                the kernel log); it is in no NVIDIA spec until it has one";
    let (devices, warnings) = run(&tmp);
    assert_eq!(warnings, [want]);
    let ids: Vec<&str> = devices.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, ["0000:00:06.0"]);
    // Nothing in procfs at all: still said.
    fs::remove_dir_all(tmp.path().join("proc/driver/nvidia/gpus/0000:00:06.0")).unwrap();
    add_gpu(tmp.path(), "0000:00:0a.0", "0x030000\n", None);
    let (devices, warnings) = run(&tmp);
    assert!(devices.is_empty());
    assert_eq!(warnings.len(), 3, "{warnings:?}");
    assert!(
        warnings[0]
            .starts_with("/sys/bus/pci/drivers/nvidia/0000:00:06.0: GPU 0000:00:06.0 is bound")
    );
    assert_eq!(warnings[1], want);
    assert!(
        warnings[2]
            .starts_with("/sys/bus/pci/drivers/nvidia/0000:00:0a.0: GPU 0000:00:0a.0 is bound")
    );
}

#[test]
fn nvmls_library_file_is_the_driver_roots_versioned_one() {
    let m = |host: &str, container: &str| crate::model::DriverFile {
        capability: crate::model::Capability::Utility,
        kind: crate::model::FileKind::Library,
        host_path: host.into(),
        container_path: container.into(),
        links: Vec::new(),
    };
    let lib = "/run/nvidia/driver/usr/lib64/libnvidia-ml.so.550.90.07";
    let mounts = [
        m(
            "/run/nvidia/driver/usr/lib64/libcuda.so.550.90.07",
            "/usr/lib64/libcuda.so.550.90.07",
        ),
        m(lib, "/usr/lib64/libnvidia-ml.so.550.90.07"),
    ];
    assert_eq!(nvml::library_file(&mounts), Some(lib));
    assert_eq!(nvml::library_file(&mounts[..1]), None);
}

#[cfg(feature = "nvml")]
#[test]
fn nvml_is_the_systems_on_the_host_and_never_with_no_nvml() {
    let host = HostRoot::open(Path::new("/")).unwrap();
    assert_eq!(nvml::Library::for_root(&host, &[]).unwrap().path, None);
    let host = HostRoot::open(Path::new("/")).unwrap().with_nvml(false);
    assert_eq!(
        nvml::Library::for_root(&host, &[]).unwrap_err(),
        "NVML not asked (--no-nvml)"
    );
    // Another root: the driver root's own file, and there is none.
    let tmp = h100(false, FULL_DEV);
    let root = HostRoot::open(tmp.path()).unwrap();
    assert_eq!(
        nvml::Library::for_root(&root, &[]).unwrap_err(),
        "no libnvidia-ml.so.<version> among the driver's files under /; NVML not asked"
    );
}

/// `/proc/devices` of an NVSwitch system with GDRCopy and GPUDirect
/// Storage loaded.
const FABRIC_DEVICES: &str = "Character devices:\n  1 mem\n195 nvidia\n195 nvidiactl\n236 nvidia-nvswitch\n237 nvidia-nvlink\n238 nvidia-uvm\n241 nvidia-caps\n242 gdrdrv\n243 nvidia-fs\n\nBlock devices:\n  7 loop\n";

fn by_id<'a>(devices: &'a [Device], id: &str) -> Option<&'a Device> {
    devices.iter().find(|d| d.id == id)
}

#[test]
fn the_management_device_has_every_gpu_and_the_privileged_nodes() {
    let manifest = format!(
        "{FULL_DEV}/dev/nvidia-caps/nvidia-cap1 c 241:1 0400 0 0\n\
         /dev/nvidia-nvswitchctl c 236:255 0666 0 0\n/dev/nvidia-nvswitch0 c 236:0 0666 0 0\n\
         /dev/nvidia-nvswitch1 c 236:1 0666 0 0\n"
    );
    let tmp = h100(false, &manifest);
    let r = tmp.path();
    write(r, "proc/devices", FABRIC_DEVICES);
    write(
        r,
        "proc/driver/nvidia-nvlink/capabilities/fabric-mgmt",
        "DeviceFileMinor: 0\nDeviceFileMode: 256\nDeviceFileModify: 1\n",
    );
    // Three switches, two nodes: the third is said.
    for bdf in ["0000:05:00.0", "0000:06:00.0", "0000:07:00.0"] {
        write(
            r,
            &format!("proc/driver/nvidia-nvswitch/devices/{bdf}/information"),
            "BIOS Version: 96.10.6D.00.01\n",
        );
    }
    let (devices, warnings) = run_all(&tmp);
    let m = by_id(&devices, "management").expect("a management device");
    assert_eq!(m.bus, "virtual");
    assert!(m.driver_files.is_some());
    assert_eq!(
        node_list(m),
        [
            "/dev/nvidia0 195:0 nvidia-management",
            "/dev/nvidia-caps/nvidia-cap1 241:1 nvidia-management",
            "/dev/nvidia-caps/nvidia-cap0 241:0 nvidia-management",
            "/dev/nvidia-nvlink 237:0 nvidia-management",
            "/dev/nvidia-nvswitchctl 236:255 nvidia-management",
            "/dev/nvidia-nvswitch0 236:0 nvidia-management",
            "/dev/nvidia-nvswitch1 236:1 nvidia-management",
            "/dev/nvidiactl 195:255 nvidia-control",
            "/dev/nvidia-uvm 238:0 nvidia-uvm",
            "/dev/nvidia-uvm-tools 238:1 nvidia-uvm-tools",
        ]
    );
    assert!(
        warnings.contains(
            &"/proc/driver/nvidia-nvswitch/devices: 3 NVSwitches, but 2 /dev/nvidia-nvswitchN nodes: \
              the driver does not say which minor each switch has, so only existing nodes are given \
              (`nvidia-modprobe -s -c N` makes node N); regenerate once they exist"
                .to_string()
        ),
        "{warnings:?}"
    );
    // The default generator does not take it: its GPU nodes have another role.
    let nvidia: Generator = crate::generator::parse(
        Path::new("builtin:generators/nvidia.yaml"),
        include_str!("../../../generators/nvidia.yaml"),
    )
    .unwrap();
    assert!(nvidia.select.apply(m).is_none());
}

#[test]
fn without_nvswitches_or_caps_the_management_device_is_the_gpus() {
    let tmp = h100(false, FULL_DEV);
    let (devices, warnings) = run_all(&tmp);
    assert_eq!(warnings, Vec::<String>::new());
    let m = by_id(&devices, "management").unwrap();
    // No nvidia-nvlink or nvidia-nvswitch major in /proc/devices; the MIG
    // config capability's node, not made yet, with its numbers.
    assert_eq!(
        node_list(m),
        [
            "/dev/nvidia0 195:0 nvidia-management",
            "/dev/nvidia-caps/nvidia-cap1 241:1 nvidia-management",
            "/dev/nvidiactl 195:255 nvidia-control",
            "/dev/nvidia-uvm 238:0 nvidia-uvm",
            "/dev/nvidia-uvm-tools 238:1 nvidia-uvm-tools",
        ]
    );
    assert!(by_id(&devices, "gdrdrv").is_none() && by_id(&devices, "nvidia-fs").is_none());
}

#[test]
fn gpudirect_devices_where_their_modules_are_loaded() {
    let manifest = format!(
        "{FULL_DEV}/dev/nvidia-fs0 c 243:0 0666 0 0\n/dev/nvidia-fs1 c 243:1 0666 0 0\n\
         /dev/nvidia-fs2 c 243:7 0666 0 0\n"
    );
    let tmp = h100(false, &manifest);
    write(tmp.path(), "proc/devices", FABRIC_DEVICES);
    let (devices, warnings) = run_all(&tmp);
    // gdrdrv's node was not made: written with its numbers.
    assert_eq!(
        node_list(by_id(&devices, "gdrdrv").unwrap()),
        ["/dev/gdrdrv 242:0 nvidia-gdrdrv"]
    );
    assert_eq!(
        node_list(by_id(&devices, "nvidia-fs").unwrap()),
        [
            "/dev/nvidia-fs0 243:0 nvidia-fs",
            "/dev/nvidia-fs1 243:1 nvidia-fs"
        ]
    );
    assert!(
        warnings.contains(
            &"/dev/nvidia-fs2: is 243:7, not 243:2 as /proc/devices says; leaving it out"
                .to_string()
        ),
        "{warnings:?}"
    );
}

#[test]
fn gpudirect_nodes_that_are_not_devices_are_said_and_left_out() {
    let manifest = format!("{FULL_DEV}/dev/gdrdrv d\n");
    let tmp = h100(false, &manifest);
    write(tmp.path(), "proc/devices", FABRIC_DEVICES);
    let (devices, warnings) = run_all(&tmp);
    assert!(by_id(&devices, "gdrdrv").is_none());
    assert!(by_id(&devices, "nvidia-fs").is_none());
    for w in [
        "/dev/gdrdrv: not a character device (a directory); leaving it out",
        "/proc/devices: nvidia-fs (GPUDirect Storage) is loaded but /dev has no nvidia-fsN node \
         (udev makes them); offering no GPUDirect Storage device",
    ] {
        assert!(warnings.contains(&w.to_string()), "{w}\n{warnings:?}");
    }
}

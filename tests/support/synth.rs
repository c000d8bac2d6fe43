//! Builds synthetic machines laid out as real sysfs is (devices under
//! `sys/devices`, relative class and bus links computed by the kernel's
//! rule, `dev`/`uevent` files, a PCI `config` per function, noise entries,
//! a `dev.manifest`): AMD GPUs ([`amd_gpus`], [`amd_kfd`]), Mellanox
//! SR-IOV NICs with RDMA and vDPA ([`sriov_nics`]), NVIDIA A100s with MIG
//! instances and a driver root ([`nvidia_gpus`]) and NVMe drives on
//! vfio-pci ([`vfio_functions`]). All may be called on the same root (once
//! each; [`mixed`] does, with the sizes of a [`Mix`]): they use disjoint
//! PCI domains, IOMMU groups and majors, and add to one `dev.manifest` and
//! one `proc/devices`. Used by the benchmarks and by tests that check
//! discovery finds every device.

use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

/// Appends `lines` to `root/dev.manifest`, creating it with a header.
fn append_manifest(root: &Path, lines: &str) {
    let path = root.join("dev.manifest");
    let new = !path.exists();
    let mut f = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap();
    if new {
        f.write_all(b"# synthetic\n").unwrap();
    }
    f.write_all(lines.as_bytes()).unwrap();
}

/// The first 64 bytes of a PCI function's configuration space, as the
/// `config` attribute shows them to a reader without `CAP_SYS_ADMIN`:
/// `ids` = vendor, device, subsystem vendor, subsystem device; `class` =
/// base class, subclass and programming interface (`0x030000`). All
/// fields little-endian at their standard offsets; header type 1 (a
/// bridge, class `0x0604xx`) has no subsystem IDs there. No capability
/// list (status bit 4 clear), so readers stop at the header. `lspci -A
/// linux-sysfs` reads it for what the text attributes do not say.
fn pci_config(ids: [u16; 4], class: u32, revision: u8) -> Vec<u8> {
    let [vendor, device, sub_vendor, sub_device] = ids;
    let mut c = vec![0u8; 64];
    c[0..2].copy_from_slice(&vendor.to_le_bytes());
    c[2..4].copy_from_slice(&device.to_le_bytes());
    // Command: memory space and bus master enabled.
    c[4..6].copy_from_slice(&0x0006u16.to_le_bytes());
    c[8] = revision;
    c[9..12].copy_from_slice(&class.to_le_bytes()[..3]);
    let bridge = class >> 8 == 0x0604;
    c[0x0e] = u8::from(bridge);
    if !bridge {
        c[0x2c..0x2e].copy_from_slice(&sub_vendor.to_le_bytes());
        c[0x2e..0x30].copy_from_slice(&sub_device.to_le_bytes());
        // Interrupt pin INTA#.
        c[0x3d] = 1;
    }
    c
}

/// Adds character-device majors to `root/proc/devices` (created in the
/// kernel's format when missing; a line already there is kept once), so
/// that builders called on one root share it.
fn add_proc_devices(root: &Path, chars: &[(usize, &str)]) {
    let path = root.join("proc/devices");
    let mut lines: std::collections::BTreeSet<(usize, String)> = std::collections::BTreeSet::new();
    if let Ok(text) = fs::read_to_string(&path) {
        let chars = text
            .split("\n\n")
            .next()
            .unwrap()
            .lines()
            .skip(1)
            .map(|l| l.trim().split_once(' ').unwrap());
        for (major, name) in chars {
            lines.insert((major.parse().unwrap(), name.to_string()));
        }
    }
    for (major, name) in chars {
        lines.insert((*major, (*name).to_string()));
    }
    let mut text = String::from("Character devices:\n");
    for (major, name) in &lines {
        writeln!(text, "{major:3} {name}").unwrap();
    }
    text.push_str("\nBlock devices:\n  7 loop\n259 blkext\n");
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// Writes a machine with `gpus` AMD GPUs (each with card, render node and
/// two connectors, on the PCI bus bound to amdgpu) under `root`.
pub fn amd_gpus(root: &Path, gpus: usize) {
    let w = |p: &Path, text: &str| {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    };
    let class = root.join("sys/class/drm");
    fs::create_dir_all(&class).unwrap();
    fs::create_dir_all(root.join("sys/bus/pci/drivers/amdgpu")).unwrap();
    w(&class.join("version"), "drm 1.1.0 20060810\n");
    let mut manifest = String::new();
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
        fs::write(
            dev.join("config"),
            pci_config([0x1002, 0x744c, 0x1da2, 0xe471], 0x03_0000, 0xc8),
        )
        .unwrap();
        // sys/devices/pciD:00/port/bdf is 4 levels below sys.
        symlink("../../../../bus/pci/drivers/amdgpu", dev.join("driver")).unwrap();
        symlink("../../../../bus/pci", dev.join("subsystem")).unwrap();
        // The bus's and the driver's views, as on a real host (lspci lists
        // the bus).
        for (dir, up) in [("bus/pci/devices", 3), ("bus/pci/drivers/amdgpu", 4)] {
            let at = root.join("sys").join(dir);
            fs::create_dir_all(&at).unwrap();
            symlink(format!("{}{rel}", "../".repeat(up)), at.join(&bdf)).unwrap();
        }
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
    append_manifest(root, &manifest);
}

/// PCI domain of the NICs: far above the domains [`amd_gpus`] uses (one
/// per 250 GPUs), so both machines fit in one root.
const NIC_DOMAIN: u32 = 0x0100;
/// First IOMMU group number of the NICs (root ports, PFs, VFs in order).
const FIRST_IOMMU_GROUP: usize = 38;
/// Dynamic majors of the `infiniband_verbs` / `infiniband_mad` regions
/// the kernel allocates for uverbs devices past the 32 fixed minors
/// (231:192..223) and umad/issm devices past the 64 fixed ones (231:0..63
/// and 231:64..127). Illustrative, like the reference machine's majors.
const UVERBS_DYN_MAJOR: usize = 235;
const UMAD_DYN_MAJOR: usize = 234;
/// Size of the dynamic umad region (`IB_UMAD_MAX_PORTS - 64`): issm
/// minors follow the umad ones in it.
const UMAD_DYN_MINORS: usize = 8192 - 64;
/// `vhost-vdpa` chrdev major (dynamic; the reference machine's value).
const VHOST_VDPA_MAJOR: usize = 240;
/// Longest interface name the kernel accepts (`IFNAMSIZ - 1`).
const IFNAMSIZ_MAX: usize = 15;

/// Where the synthetic NIC machine puts PCI functions and RDMA devices.
struct NicLayout {
    /// Buses one PF's functions span (PF, its absent port 1, VFs; 256
    /// functions a bus).
    buses_per_pf: usize,
    /// VFs per PF.
    vfs: usize,
    /// PFs.
    pfs: usize,
}

impl NicLayout {
    fn new(pfs: usize, vfs: usize) -> Self {
        // VF routing IDs follow the PF's: offset 2, stride 1.
        let buses_per_pf = (vfs + 2).div_ceil(256);
        let layout = NicLayout {
            buses_per_pf,
            vfs,
            pfs,
        };
        if pfs > 0 {
            let last = layout.root_bus(pfs - 1) + buses_per_pf;
            assert!(
                last <= 0xff,
                "{pfs} PFs x {vfs} VFs need buses up to {last:#x}, more than one PCI domain has"
            );
        }
        layout
    }

    /// Bus of the root port (and host bridge) above PF `p`.
    fn root_bus(&self, p: usize) -> usize {
        0x3a + p * (self.buses_per_pf + 1)
    }

    /// PCI address of PF `p`.
    fn pf(&self, p: usize) -> String {
        format!("{NIC_DOMAIN:04x}:{:02x}:00.0", self.root_bus(p) + 1)
    }

    /// PCI address of VF `n` of PF `p` (routing ID = PF + 2 + n).
    fn vf(&self, p: usize, n: usize) -> String {
        let rid = ((self.root_bus(p) + 1) << 8) + 2 + n;
        format!(
            "{NIC_DOMAIN:04x}:{:02x}:{:02x}.{:x}",
            rid >> 8,
            (rid >> 3) & 0x1f,
            rid & 7
        )
    }

    /// RDMA device index of PF `p` (PFs register first).
    fn pf_rdma(&self, p: usize) -> usize {
        p
    }

    /// RDMA device index of VF `n` of PF `p` (`mlx5_<index>`; its uverbs,
    /// umad and issm devices carry the same index).
    fn vf_rdma(&self, p: usize, n: usize) -> usize {
        self.pfs + p * self.vfs + n
    }

    /// Global VF number (vDPA devices go to the first ones).
    fn vf_number(&self, p: usize, n: usize) -> usize {
        p * self.vfs + n
    }
}

/// `dev` of uverbs device `i`: 32 fixed minors from 231:192, then the
/// dynamic region (as `ib_uverbs_add_one` does).
fn uverbs_dev(i: usize) -> (usize, usize) {
    if i < 32 {
        (231, 192 + i)
    } else {
        (UVERBS_DYN_MAJOR, i - 32)
    }
}

/// `dev` of umad device `i` (one port per RDMA device): 64 fixed minors
/// from 231:0, then the dynamic region.
fn umad_dev(i: usize) -> (usize, usize) {
    if i < 64 {
        (231, i)
    } else {
        (UMAD_DYN_MAJOR, i - 64)
    }
}

/// `dev` of issm device `i`: 231:64+i, then after the umad minors of the
/// dynamic region.
fn issm_dev(i: usize) -> (usize, usize) {
    if i < 64 {
        (231, 64 + i)
    } else {
        (UMAD_DYN_MAJOR, UMAD_DYN_MINORS + i - 64)
    }
}

/// The name udev would give, or the kernel's `eth<N>` when it would not
/// fit in `IFNAMSIZ`.
fn ifname(preferred: String, ifindex: usize) -> String {
    if preferred.len() <= IFNAMSIZ_MAX {
        preferred
    } else {
        format!("eth{ifindex}")
    }
}

/// Writes under `root/sys`; paths are relative to `sys`.
struct Sys<'a> {
    sys: std::path::PathBuf,
    manifest: &'a mut String,
}

impl Sys<'_> {
    /// Writes attribute `rel` (relative to `sys`) as `value` + `\n`.
    fn attr(&self, rel: &str, value: &str) {
        self.raw(rel, &format!("{value}\n"));
    }

    /// Writes file `rel` with exactly `bytes`.
    fn raw(&self, rel: &str, bytes: &str) {
        let p = self.sys.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, bytes).unwrap();
    }

    /// Writes binary file `rel` with exactly `bytes`.
    fn bytes(&self, rel: &str, bytes: &[u8]) {
        let p = self.sys.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, bytes).unwrap();
    }

    fn dir(&self, rel: &str) {
        fs::create_dir_all(self.sys.join(rel)).unwrap();
    }

    /// Creates link `at` pointing to `to` (both relative to `sys`), with
    /// the relative target the kernel writes: `..` from the link's
    /// directory up to the deepest common ancestor of that directory and
    /// the target's parent, then down to the target.
    fn link(&self, at: &str, to: &str) {
        let from: Vec<&str> = at.split('/').collect();
        let from_dir = &from[..from.len() - 1];
        let to: Vec<&str> = to.split('/').collect();
        let common = from_dir
            .iter()
            .zip(&to[..to.len() - 1])
            .take_while(|(a, b)| a == b)
            .count();
        let target = format!(
            "{}{}",
            "../".repeat(from_dir.len() - common),
            to[common..].join("/")
        );
        let p = self.sys.join(at);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        symlink(target, p).unwrap();
    }

    /// A numbered class-like device at `dir`: `dev`, `uevent`, its
    /// `/sys/dev/char` link and its manifest line.
    fn char_dev(
        &mut self,
        dir: &str,
        (major, minor): (usize, usize),
        devname: &str,
        devmode: Option<&str>,
        mode: &str,
    ) {
        self.attr(&format!("{dir}/dev"), &format!("{major}:{minor}"));
        let mut uevent = format!("MAJOR={major}\nMINOR={minor}\nDEVNAME={devname}\n");
        if let Some(m) = devmode {
            writeln!(uevent, "DEVMODE={m}").unwrap();
        }
        self.raw(&format!("{dir}/uevent"), &uevent);
        self.link(&format!("dev/char/{major}:{minor}"), dir);
        writeln!(self.manifest, "/dev/{devname} c {major}:{minor} {mode} 0 0").unwrap();
    }

    /// A netdev `name` of the PCI function at `func` (glue dir `net/`).
    fn netdev(
        &self,
        func: &str,
        name: &str,
        ifindex: usize,
        mac: &str,
        port: Option<(&str, &str)>,
    ) {
        let d = format!("{func}/net/{name}");
        self.attr(&format!("{d}/ifindex"), &ifindex.to_string());
        self.attr(&format!("{d}/iflink"), &ifindex.to_string());
        self.attr(&format!("{d}/type"), "1");
        self.attr(&format!("{d}/address"), mac);
        self.attr(&format!("{d}/operstate"), "up");
        self.attr(&format!("{d}/mtu"), "1500");
        self.raw(
            &format!("{d}/uevent"),
            &format!("INTERFACE={name}\nIFINDEX={ifindex}\n"),
        );
        if let Some((port_name, switch_id)) = port {
            self.attr(&format!("{d}/phys_port_name"), port_name);
            self.attr(&format!("{d}/phys_switch_id"), switch_id);
        }
        self.link(&format!("{d}/device"), func);
        self.link(&format!("{d}/subsystem"), "class/net");
        self.link(&format!("class/net/{name}"), &d);
    }

    /// RDMA device `mlx5_<i>` of the PCI function at `func`, on netdev
    /// `ndev`, with its uverbs, umad and issm char devices.
    fn rdma(&mut self, func: &str, i: usize, ndev: &str, guid: &str) {
        let ib = format!("mlx5_{i}");
        let d = format!("{func}/infiniband/{ib}");
        self.attr(&format!("{d}/node_type"), "1: CA");
        self.attr(&format!("{d}/node_guid"), guid);
        self.attr(&format!("{d}/sys_image_guid"), guid);
        self.attr(&format!("{d}/hca_type"), "MT4125");
        self.attr(&format!("{d}/fw_ver"), "22.39.1002");
        self.raw(&format!("{d}/uevent"), &format!("NAME={ib}\n"));
        self.attr(&format!("{d}/ports/1/link_layer"), "Ethernet");
        self.attr(&format!("{d}/ports/1/state"), "4: ACTIVE");
        self.attr(&format!("{d}/ports/1/phys_state"), "5: LinkUp");
        self.attr(&format!("{d}/ports/1/gid_attrs/ndevs/0"), ndev);
        self.attr(&format!("{d}/ports/1/gid_attrs/types/0"), "IB/RoCE v1");
        self.link(&format!("{d}/device"), func);
        self.link(&format!("{d}/subsystem"), "class/infiniband");
        self.link(&format!("class/infiniband/{ib}"), &d);
        let v = format!("{func}/infiniband_verbs/uverbs{i}");
        self.attr(&format!("{v}/ibdev"), &ib);
        self.attr(&format!("{v}/abi_version"), "1");
        self.char_dev(
            &v,
            uverbs_dev(i),
            &format!("infiniband/uverbs{i}"),
            Some("0666"),
            "0666",
        );
        self.link(&format!("{v}/device"), func);
        self.link(&format!("{v}/subsystem"), "class/infiniband_verbs");
        self.link(&format!("class/infiniband_verbs/uverbs{i}"), &v);
        for (name, dev) in [
            (format!("umad{i}"), umad_dev(i)),
            (format!("issm{i}"), issm_dev(i)),
        ] {
            let m = format!("{func}/infiniband_mad/{name}");
            self.attr(&format!("{m}/ibdev"), &ib);
            self.attr(&format!("{m}/port"), "1");
            self.char_dev(&m, dev, &format!("infiniband/{name}"), None, "0600");
            self.link(&format!("{m}/device"), func);
            self.link(&format!("{m}/subsystem"), "class/infiniband_mad");
            self.link(&format!("class/infiniband_mad/{name}"), &m);
        }
    }

    /// The `i`th endpoint of its own host bridge (`pci<dom>:<2i>`) and root
    /// port (`<dom>:<2i>:01.0`, IOMMU group `group`), on bus `2i + 1`:
    /// function `00.0` with `ids`, bound to `driver`, in group `group + 1`.
    /// Returns the endpoint's `devices/...` path.
    fn behind_root_port(
        &self,
        dom: &str,
        i: usize,
        group: usize,
        ids: [&str; 5],
        driver: &str,
    ) -> String {
        let rb = 2 * i;
        let host = format!("devices/pci{dom}:{rb:02x}");
        self.raw(&format!("{host}/uevent"), "");
        let port = format!("{host}/{dom}:{rb:02x}:01.0");
        self.pci_function(
            &port,
            ["0x1022", "0x1483", "0x1022", "0x1453", "0x060400"],
            i % 2,
            "pcieport",
            group,
        );
        let func = format!("{port}/{dom}:{:02x}:00.0", rb + 1);
        self.pci_function(&func, ids, i % 2, driver, group + 1);
        func
    }

    /// A PCI function at `func` (`devices/.../<bdf>`): identity attributes,
    /// driver, subsystem and IOMMU group (with the group's side), and its
    /// bus and driver views.
    fn pci_function(&self, func: &str, ids: [&str; 5], numa: usize, driver: &str, group: usize) {
        let bdf = func.rsplit('/').next().unwrap();
        let [vendor, device, sub_vendor, sub_device, class] = ids;
        for (attr, val) in [
            ("vendor", vendor),
            ("device", device),
            ("subsystem_vendor", sub_vendor),
            ("subsystem_device", sub_device),
            ("class", class),
            ("numa_node", &numa.to_string()),
            ("driver_override", "(null)"),
            ("enable", "1"),
            ("revision", "0x00"),
        ] {
            self.attr(&format!("{func}/{attr}"), val);
        }
        let hex = |s: &str| u32::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
        let id = |s: &str| u16::try_from(hex(s)).unwrap();
        self.bytes(
            &format!("{func}/config"),
            &pci_config(
                [id(vendor), id(device), id(sub_vendor), id(sub_device)],
                hex(class),
                0,
            ),
        );
        let up = |s: &str| s.trim_start_matches("0x").to_uppercase();
        self.raw(
            &format!("{func}/uevent"),
            &format!(
                "DRIVER={driver}\nPCI_CLASS={}\nPCI_ID={}:{}\nPCI_SUBSYS_ID={}:{}\nPCI_SLOT_NAME={bdf}\n",
                up(class).trim_start_matches('0'),
                up(vendor),
                up(device),
                up(sub_vendor),
                up(sub_device),
            ),
        );
        self.link(
            &format!("{func}/driver"),
            &format!("bus/pci/drivers/{driver}"),
        );
        self.link(&format!("{func}/subsystem"), "bus/pci");
        self.link(
            &format!("{func}/iommu_group"),
            &format!("kernel/iommu_groups/{group}"),
        );
        self.attr(&format!("kernel/iommu_groups/{group}/type"), "DMA-FQ");
        self.link(&format!("kernel/iommu_groups/{group}/devices/{bdf}"), func);
        self.link(&format!("bus/pci/devices/{bdf}"), func);
        self.link(&format!("bus/pci/drivers/{driver}/{bdf}"), func);
    }
}

/// The `bus/pci/devices` links of the machine's VFs (functions with a
/// `physfn`), in address order: what a test removes to hide one.
pub fn vf_links(root: &Path) -> Vec<PathBuf> {
    let mut vfs: Vec<PathBuf> = fs::read_dir(root.join("sys/bus/pci/devices"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("physfn").exists())
        .collect();
    vfs.sort();
    vfs
}

/// Writes a machine with `pfs` Mellanox ConnectX-6 Dx PFs (15b3:101d,
/// mlx5_core) in switchdev mode under `root`, each with `vfs_per_pf` VFs
/// (15b3:101e), and `vdpa` vDPA devices bound to vhost_vdpa, one on each of
/// the first `vdpa` VFs (PF 0's first, then PF 1's, ...).
///
/// Per PF `p` (bus `0x3b + 2p` of domain [`NIC_DOMAIN`] when its VFs fit
/// on one bus, below its own root port): `sriov_*` files, `virtfnN` links,
/// its uplink netdev `ens<p+1>f0np0` (`phys_port_name` `p0`) and one
/// representor `ens<p+1>f0npf0vf<N>` per VF (`pf0vf<N>`), and its RDMA
/// device `mlx5_<p>`. Per VF: `physfn`, its own IOMMU group, netdev
/// `ens<p+1>f0v<N>`, RDMA device (numbered after all PFs', see
/// `NicLayout::vf_rdma`) with uverbs, umad and issm devices whose numbers
/// follow the kernel's fixed-then-dynamic minor allocation. Shared:
/// `rdma_cm` (misc 10:125). Names longer than `IFNAMSIZ` allow fall back
/// to `eth<ifindex>`, as the kernel leaves them when udev cannot rename.
///
/// Call it at most once per root (the manifest would list nodes twice).
pub fn sriov_nics(root: &Path, pfs: usize, vfs_per_pf: usize, vdpa: usize) {
    assert!(
        vdpa <= pfs * vfs_per_pf,
        "{vdpa} vDPA devices need as many VFs, there are {}",
        pfs * vfs_per_pf
    );
    let layout = NicLayout::new(pfs, vfs_per_pf);
    let mut manifest = String::from("/dev/infiniband d\n");
    let mut s = Sys {
        sys: root.join("sys"),
        manifest: &mut manifest,
    };
    let dom = format!("{NIC_DOMAIN:04x}");
    for d in ["class/net", "class/infiniband", "bus/vdpa/devices"] {
        s.dir(d);
    }
    s.dir("bus/vdpa/drivers/virtio_vdpa");
    s.dir("bus/vdpa/drivers/vhost_vdpa");
    s.attr("class/infiniband_verbs/abi_version", "6");
    s.attr("class/infiniband_mad/abi_version", "5");
    // Shared nodes and noise.
    s.link("class/net/lo", "devices/virtual/net/lo");
    s.attr("devices/virtual/net/lo/ifindex", "1");
    s.attr("devices/virtual/net/lo/operstate", "unknown");
    let cm = "devices/virtual/misc/rdma_cm";
    s.char_dev(cm, (10, 125), "infiniband/rdma_cm", Some("0666"), "0666");
    s.link(&format!("{cm}/subsystem"), "class/misc");
    s.link("class/misc/rdma_cm", cm);

    let mut group = FIRST_IOMMU_GROUP;
    let mut ifindex = 2;
    for p in 0..pfs {
        let rb = layout.root_bus(p);
        let port = format!("devices/pci{dom}:{rb:02x}/{dom}:{rb:02x}:00.0");
        s.pci_function(
            &port,
            ["0x1022", "0x1483", "0x1022", "0x1453", "0x060400"],
            p % 2,
            "pcieport",
            group,
        );
        s.attr(
            &format!("{port}/secondary_bus_number"),
            &(rb + 1).to_string(),
        );
        s.attr(
            &format!("{port}/subordinate_bus_number"),
            &(rb + layout.buses_per_pf).to_string(),
        );
        group += 1;
        let pf_bdf = layout.pf(p);
        let pf = format!("{port}/{pf_bdf}");
        s.pci_function(
            &pf,
            ["0x15b3", "0x101d", "0x15b3", "0x0016", "0x020000"],
            p % 2,
            "mlx5_core",
            group,
        );
        group += 1;
        for (attr, val) in [
            ("sriov_totalvfs", vfs_per_pf.max(8).to_string()),
            ("sriov_numvfs", vfs_per_pf.to_string()),
            ("sriov_offset", "2".to_string()),
            ("sriov_stride", "1".to_string()),
            ("sriov_vf_device", "101e".to_string()),
            ("sriov_drivers_autoprobe", "1".to_string()),
        ] {
            s.attr(&format!("{pf}/{attr}"), &val);
        }
        let switch_id = format!("b8cef603{:08x}", 0x00a1_b2c3 + p);
        let uplink = ifname(format!("ens{}f0np0", p + 1), ifindex);
        s.netdev(
            &pf,
            &uplink,
            ifindex,
            &format!("b8:ce:f6:{p:02x}:00:00"),
            Some(("p0", &switch_id)),
        );
        ifindex += 1;
        s.rdma(
            &pf,
            layout.pf_rdma(p),
            &uplink,
            &format!("b8ce:f603:00{p:02x}:0000"),
        );
        for n in 0..vfs_per_pf {
            let rep = ifname(format!("ens{}f0npf0vf{n}", p + 1), ifindex);
            s.netdev(
                &pf,
                &rep,
                ifindex,
                &format!("4e:{p:02x}:{:02x}:{:02x}:00:01", n >> 8, n & 0xff),
                Some((&format!("pf0vf{n}"), &switch_id)),
            );
            ifindex += 1;
        }
        for n in 0..vfs_per_pf {
            let vf_bdf = layout.vf(p, n);
            let vf = format!("{port}/{vf_bdf}");
            s.pci_function(
                &vf,
                ["0x15b3", "0x101e", "0x15b3", "0x0016", "0x020000"],
                p % 2,
                "mlx5_core",
                group,
            );
            group += 1;
            s.link(&format!("{vf}/physfn"), &pf);
            s.link(&format!("{pf}/virtfn{n}"), &vf);
            let ndev = ifname(format!("ens{}f0v{n}", p + 1), ifindex);
            s.netdev(
                &vf,
                &ndev,
                ifindex,
                &format!("9a:{p:02x}:{:02x}:{:02x}:00:10", n >> 8, n & 0xff),
                None,
            );
            ifindex += 1;
            s.rdma(&vf, layout.vf_rdma(p, n), &ndev, "0000:0000:0000:0000");
            let k = layout.vf_number(p, n);
            if k < vdpa {
                let v = format!("{vf}/vdpa{k}");
                s.attr(&format!("{v}/driver_override"), "(null)");
                s.attr(&format!("{v}/uevent"), "DRIVER=vhost_vdpa");
                s.link(&format!("{v}/driver"), "bus/vdpa/drivers/vhost_vdpa");
                s.link(&format!("{v}/subsystem"), "bus/vdpa");
                s.link(&format!("bus/vdpa/devices/vdpa{k}"), &v);
                s.link(&format!("bus/vdpa/drivers/vhost_vdpa/vdpa{k}"), &v);
                // No bus, no class: empty uevent, no subsystem link.
                let c = format!("{v}/vhost-vdpa-{k}");
                s.attr(&format!("{c}/dev"), &format!("{VHOST_VDPA_MAJOR}:{k}"));
                s.raw(&format!("{c}/uevent"), "");
                s.link(&format!("dev/char/{VHOST_VDPA_MAJOR}:{k}"), &c);
                writeln!(
                    s.manifest,
                    "/dev/vhost-vdpa-{k} c {VHOST_VDPA_MAJOR}:{k} 0600 0 0"
                )
                .unwrap();
            }
        }
    }
    append_manifest(root, &manifest);
}

/// `/dev/kfd` (ROCm's compute node, one for all AMD GPUs) and its class
/// device `sys/devices/virtual/kfd/kfd`, which the `amd-gpu` generator
/// joins to every GPU on amdgpu. Call it once per root, with
/// [`amd_gpus`].
pub fn amd_kfd(root: &Path) {
    let mut manifest = String::new();
    let s = Sys {
        sys: root.join("sys"),
        manifest: &mut manifest,
    };
    let d = "devices/virtual/kfd/kfd";
    s.attr(&format!("{d}/dev"), &format!("{KFD_MAJOR}:0"));
    s.raw(
        &format!("{d}/uevent"),
        &format!("MAJOR={KFD_MAJOR}\nMINOR=0\nDEVNAME=kfd\n"),
    );
    s.link(&format!("{d}/subsystem"), "class/kfd");
    s.link("class/kfd/kfd", d);
    s.link(&format!("dev/char/{KFD_MAJOR}:0"), d);
    writeln!(manifest, "/dev/kfd c {KFD_MAJOR}:0 0660 0 109").unwrap();
    add_proc_devices(root, &[(226, "drm"), (KFD_MAJOR, "kfd")]);
    append_manifest(root, &manifest);
}

/// `kfd`'s chrdev major (dynamic; the reference machine's value).
const KFD_MAJOR: usize = 236;

/// The NVIDIA driver release of the driver tree [`nvidia_gpus`] copies
/// (`fixtures/dgx-8gpu/root/run/nvidia/driver`): procfs says the same, so
/// that the driver's files are found for it.
pub const NVIDIA_RELEASE: &str = "550.90.07";
/// PCI domain of the NVIDIA GPUs (one host bridge and root port each).
const NVIDIA_DOMAIN: u32 = 0x0200;
/// First IOMMU group of the NVIDIA machine (root ports and GPUs in turn).
const NVIDIA_FIRST_IOMMU_GROUP: usize = 2000;
/// Dynamic majors of `nvidia-uvm` and `nvidia-caps` (illustrative).
const NVIDIA_UVM_MAJOR: usize = 237;
const NVIDIA_CAPS_MAJOR: usize = 238;
/// GPU instance ID of the first of an A100's seven 1g.5gb instances: the
/// driver places them at IDs 7 to 13.
const FIRST_MIG_GI: usize = 7;
/// `DeviceFileMode` of MIG access files (292 = 0444).
const MIG_ACCESS_MODE: u32 = 292;

/// The static `nvidia-caps` minor of a MIG GPU instance or, with `ci`,
/// compute instance (`/proc/driver/nvidia-caps/mig-minors`).
fn mig_minor(gpu: usize, gi: usize, ci: Option<usize>) -> usize {
    3 + 135 * gpu + 9 * gi + ci.map_or(0, |c| 1 + c)
}

/// A capability file (`access`, `mig/config`) as the driver writes it.
fn nv_cap(minor: usize, mode: u32) -> String {
    format!("DeviceFileMinor: {minor}\nDeviceFileMode: {mode}\nDeviceFileModify: 1\n")
}

/// Writes a machine with `gpus` NVIDIA A100 SXM4 40GB (10de:20b0, class
/// 0x030200, bound to nvidia; Device Minor = index, at most 32 GPUs, the
/// size of the driver's MIG minor table) under `root`, each split into
/// `migs` (at most 7) MIG GPU instances (`gi7`, `gi8`, ...) of one
/// compute instance (`ci0`), driver [`NVIDIA_RELEASE`] loaded with
/// nvidia-uvm and nvidia-modeset and no nvidia-drm, as the fixtures lay
/// it out (`fixtures/README.md`, NVIDIA procfs): `proc/driver/nvidia/
/// {version,params,registry}`, `gpus/<bdf>/information`,
/// `capabilities/mig/{config,monitor}` and
/// `capabilities/gpu<N>/mig/gi<G>[/ci<C>]/access` with the static minors;
/// `nvidia`, `nvidiactl`, `nvidia-modeset`, `nvidia-uvm` and
/// `nvidia-caps` in `proc/devices`; `sys/module/nvidia*`; the `/dev`
/// nodes (`/dev/nvidiaN`, control nodes, one cap node per access file).
/// The driver's files are the `dgx-8gpu` fixture's driver tree, copied as
/// it is to `run/nvidia/driver` (where cdigen looks by default): ELF
/// libraries, soname links and a real `etc/ld.so.cache`.
///
/// Call it at most once per root.
pub fn nvidia_gpus(root: &Path, gpus: usize, migs: usize) {
    assert!(gpus <= 32, "the MIG minor table has 32 GPUs");
    assert!(migs <= 7, "an A100 has at most 7 MIG instances");
    let mut manifest = String::from("/dev/nvidia-caps d\n");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/dgx-8gpu/root");
    let proc = root.join("proc/driver/nvidia");
    let w = |rel: &str, text: &str| {
        let p = proc.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    };
    w(
        "version",
        &format!(
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {NVIDIA_RELEASE}  Release Build  \
             (dvs-builder@U16-I3-D08-1-2)  Fri May 31 09:33:37 UTC 2024\n\
             GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04) \n"
        ),
    );
    w(
        "params",
        &fs::read_to_string(fixture.join("proc/driver/nvidia/params")).unwrap(),
    );
    w("registry", "Binary: \"\"\n");
    w("capabilities/mig/config", &nv_cap(1, 256));
    w("capabilities/mig/monitor", &nv_cap(2, MIG_ACCESS_MODE));
    writeln!(
        manifest,
        "/dev/nvidia-caps/nvidia-cap1 c {NVIDIA_CAPS_MAJOR}:1 0400 0 0"
    )
    .unwrap();
    writeln!(
        manifest,
        "/dev/nvidia-caps/nvidia-cap2 c {NVIDIA_CAPS_MAJOR}:2 0444 0 0"
    )
    .unwrap();
    let caps = root.join("proc/driver/nvidia-caps");
    fs::create_dir_all(&caps).unwrap();
    fs::copy(
        fixture.join("proc/driver/nvidia-caps/mig-minors"),
        caps.join("mig-minors"),
    )
    .unwrap();
    fs::write(caps.join("nvlink-minors"), "fabric-mgmt 0\n").unwrap();

    let s = Sys {
        sys: root.join("sys"),
        manifest: &mut manifest,
    };
    let dom = format!("{NVIDIA_DOMAIN:04x}");
    let mut group = NVIDIA_FIRST_IOMMU_GROUP;
    for i in 0..gpus {
        let func = s.behind_root_port(
            &dom,
            i,
            group,
            ["0x10de", "0x20b0", "0x10de", "0x134f", "0x030200"],
            "nvidia",
        );
        let bdf = func.rsplit('/').next().unwrap().to_string();
        group += 2;
        w(
            &format!("gpus/{bdf}/information"),
            &format!(
                "Model: \t\t NVIDIA A100-SXM4-40GB\nIRQ:   \t\t {irq}\n\
                 GPU UUID: \t GPU-{i:08x}-a100-4e00-8000-0000{i:08x}\n\
                 Video BIOS: \t 92.00.25.00.08\nBus Type: \t PCIe\nDMA Size: \t 47 bits\n\
                 DMA Mask: \t 0x7fffffffffff\nBus Location: \t {bdf}\nDevice Minor: \t {i}\n\
                 GPU Firmware: \t {NVIDIA_RELEASE}\nGPU Excluded:\t No\n",
                irq = 100 + i
            ),
        );
        w(&format!("gpus/{bdf}/registry"), "Binary: \"\"\n");
        let mig = format!("capabilities/gpu{i}/mig");
        fs::create_dir_all(proc.join(&mig)).unwrap();
        for gi in FIRST_MIG_GI..FIRST_MIG_GI + migs {
            for (rel, minor) in [
                (format!("{mig}/gi{gi}/access"), mig_minor(i, gi, None)),
                (
                    format!("{mig}/gi{gi}/ci0/access"),
                    mig_minor(i, gi, Some(0)),
                ),
            ] {
                w(&rel, &nv_cap(minor, MIG_ACCESS_MODE));
                writeln!(
                    s.manifest,
                    "/dev/nvidia-caps/nvidia-cap{minor} c {NVIDIA_CAPS_MAJOR}:{minor} 0444 0 0"
                )
                .unwrap();
            }
        }
        writeln!(s.manifest, "/dev/nvidia{i} c 195:{i} 0666 0 0").unwrap();
    }
    for (name, major, minor) in [
        ("nvidiactl", 195, 255),
        ("nvidia-modeset", 195, 254),
        ("nvidia-uvm", NVIDIA_UVM_MAJOR, 0),
        ("nvidia-uvm-tools", NVIDIA_UVM_MAJOR, 1),
    ] {
        writeln!(s.manifest, "/dev/{name} c {major}:{minor} 0666 0 0").unwrap();
    }
    s.attr("module/nvidia/version", NVIDIA_RELEASE);
    for m in ["nvidia_uvm", "nvidia_modeset"] {
        s.attr(&format!("module/{m}/initstate"), "live");
        s.attr(&format!("module/{m}/version"), NVIDIA_RELEASE);
    }
    add_proc_devices(
        root,
        &[
            (195, "nvidia"),
            (195, "nvidia-modeset"),
            (195, "nvidiactl"),
            (NVIDIA_UVM_MAJOR, "nvidia-uvm"),
            (NVIDIA_CAPS_MAJOR, "nvidia-caps"),
        ],
    );
    copy_tree(
        &fixture.join("run/nvidia/driver"),
        &root.join("run/nvidia/driver"),
    );
    append_manifest(root, &manifest);
}

/// Copies the tree at `from` to `to`: directories, files (with their
/// modes) and symlinks (with their targets, unchanged).
fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().unwrap();
        if kind.is_symlink() {
            symlink(fs::read_link(&src).unwrap(), &dst).unwrap();
        } else if kind.is_dir() {
            copy_tree(&src, &dst);
        } else {
            fs::copy(&src, &dst).unwrap();
        }
    }
}

/// PCI domain of the VFIO functions.
const VFIO_DOMAIN: u32 = 0x0300;
/// First IOMMU group of the VFIO machine (root ports and functions in
/// turn).
const VFIO_FIRST_IOMMU_GROUP: usize = 3000;
/// Dynamic majors of `vfio` (legacy group nodes) and `vfio-dev` (iommufd
/// cdevs), as in the `vfio-gpu` fixture.
const VFIO_GROUP_MAJOR: usize = 242;
const VFIO_CDEV_MAJOR: usize = 241;

/// Writes `functions` Samsung PM9A3 NVMe drives (144d:a80a, class
/// 0x010802) bound to vfio-pci under `root`, each behind its own root
/// port and alone in its IOMMU group, offered both ways as the
/// `vfio-gpu` fixture is: the legacy group node (`sys/class/vfio/<group>`,
/// `/dev/vfio/<group>`, minor = the allocation index) with the container
/// `/dev/vfio/vfio` (misc 10:196), and the iommufd cdev
/// (`<function>/vfio-dev/vfio<N>`, `/dev/vfio/devices/vfio<N>`) with
/// `/dev/iommu` (misc 10:124).
///
/// Call it at most once per root.
pub fn vfio_functions(root: &Path, functions: usize) {
    let mut manifest = String::from("/dev/vfio d\n/dev/vfio/devices d\n");
    let mut s = Sys {
        sys: root.join("sys"),
        manifest: &mut manifest,
    };
    for (name, minor, devname, mode) in [
        ("vfio", 196, "vfio/vfio", "0666"),
        ("iommu", 124, "iommu", "0660"),
    ] {
        let d = format!("devices/virtual/misc/{name}");
        s.char_dev(&d, (10, minor), devname, None, mode);
        s.link(&format!("{d}/subsystem"), "class/misc");
        s.link(&format!("class/misc/{name}"), &d);
    }
    let dom = format!("{VFIO_DOMAIN:04x}");
    let mut group = VFIO_FIRST_IOMMU_GROUP;
    for i in 0..functions {
        let func = s.behind_root_port(
            &dom,
            i,
            group,
            ["0x144d", "0xa80a", "0x144d", "0xa812", "0x010802"],
            "vfio-pci",
        );
        let g = group + 1;
        group += 2;
        let d = format!("devices/virtual/vfio/{g}");
        s.char_dev(
            &d,
            (VFIO_GROUP_MAJOR, i),
            &format!("vfio/{g}"),
            None,
            "0600",
        );
        s.link(&format!("{d}/subsystem"), "class/vfio");
        s.link(&format!("class/vfio/{g}"), &d);
        let c = format!("{func}/vfio-dev/vfio{i}");
        s.char_dev(
            &c,
            (VFIO_CDEV_MAJOR, i),
            &format!("vfio/devices/vfio{i}"),
            None,
            "0600",
        );
        s.link(&format!("{c}/subsystem"), "class/vfio-dev");
        s.link(&format!("{c}/device"), &func);
        s.link(&format!("class/vfio-dev/vfio{i}"), &c);
    }
    add_proc_devices(
        root,
        &[
            (10, "misc"),
            (VFIO_CDEV_MAJOR, "vfio-dev"),
            (VFIO_GROUP_MAJOR, "vfio"),
        ],
    );
    append_manifest(root, &manifest);
}

/// The sizes of a machine with every kind of device [`mixed`] builds.
#[derive(Debug, Clone, Copy)]
pub struct Mix {
    /// Mellanox PFs ([`sriov_nics`]).
    pub pfs: usize,
    /// VFs per PF.
    pub vfs_per_pf: usize,
    /// vDPA devices, on the first VFs.
    pub vdpa: usize,
    /// AMD GPUs ([`amd_gpus`], with [`amd_kfd`]).
    pub amd: usize,
    /// NVIDIA A100s ([`nvidia_gpus`]).
    pub nvidia: usize,
    /// MIG instances per A100.
    pub migs: usize,
    /// NVMe drives on vfio-pci ([`vfio_functions`]).
    pub vfio: usize,
}

impl Mix {
    /// The machine of issue 14: 8 PFs x 128 VFs, 64 vDPA devices, 64 AMD
    /// GPUs with kfd, 16 A100s x 7 MIG instances with a driver root, and
    /// 64 VFIO functions.
    pub const ISSUE_14: Mix = Mix {
        pfs: 8,
        vfs_per_pf: 128,
        vdpa: 64,
        amd: 64,
        nvidia: 16,
        migs: 7,
        vfio: 64,
    };

    /// Half of each count (the PFs stay, with half their VFs).
    pub fn half(self) -> Mix {
        Mix {
            pfs: self.pfs,
            vfs_per_pf: self.vfs_per_pf / 2,
            vdpa: self.vdpa / 2,
            amd: self.amd / 2,
            nvidia: self.nvidia / 2,
            migs: self.migs,
            vfio: self.vfio / 2,
        }
    }

    /// Devices discovery finds per backend: (drm, sriov, vdpa, nvidia,
    /// vfio).
    pub fn expected(self) -> (usize, usize, usize, usize, usize) {
        (
            self.amd,
            self.pfs * self.vfs_per_pf,
            self.vdpa,
            self.nvidia * (1 + self.migs),
            self.vfio,
        )
    }
}

/// Writes the machine `mix` describes under `root`: every builder above
/// on one root.
pub fn mixed(root: &Path, mix: Mix) {
    amd_gpus(root, mix.amd);
    amd_kfd(root);
    sriov_nics(root, mix.pfs, mix.vfs_per_pf, mix.vdpa);
    nvidia_gpus(root, mix.nvidia, mix.migs);
    vfio_functions(root, mix.vfio);
}

//! RDMA backend: the RDMA devices that are not SR-IOV VFs': InfiniBand
//! HCAs (ConnectX in InfiniBand mode, qib, hfi1), RoCE and iWARP NICs
//! (ConnectX PFs, bnxt_re, irdma, ...), and the software devices rxe and
//! siw, each with the char devices user space needs.
//!
//! One device per entry of `/sys/class/infiniband` (layout:
//! [`super::infiniband`]). Its parent is the target of its `device` link:
//!
//! - a PCI function: the device is named by the function's PCI address and
//!   claims the function's sysfs path. A VF (a function with `physfn`) is
//!   the SR-IOV backend's, which claims the same path with a higher
//!   precedence; its RDMA device is skipped here without a word, so that
//!   nothing about it is read or said twice;
//! - another device (a platform device): named `infiniband:<name>`,
//!   claiming the parent's path;
//! - none (rxe and siw live in `/sys/devices/virtual/infiniband`): named
//!   `infiniband:<name>`, claiming its own path. They are offered like the
//!   others (their netdev is their port's); a generator that wants
//!   hardware only selects `buses: [pci]`.
//!
//! A device whose `device` link or directory is gone (removed while
//! cdigen reads it) is skipped with a warning naming the link.
//!
//! Nodes: the `uverbsN` whose `ibdev` names the device (required: without
//! one the device is skipped, with a warning: ib_uverbs is not loaded, or
//! its entry is unusable), the `umadN`/`issmN` of each port (none for
//! iWARP, or without ib_umad), and `/dev/infiniband/rdma_cm`, which every
//! device shares; when the host has no rdma_cm (rdma_ucm not loaded), the
//! devices are offered without it and one warning says so.
//!
//! Facts: [`RdmaInfo`] (name, `node_type`, `node_guid`, per port the link
//! layer, state and netdev), [`NetInfo`] (the ports' netdevs, the RDMA
//! device, the link type of the first port, for selection and device-info
//! files) and the PCI identity. A port's netdev is the one of its GID 0
//! (`ports/N/gid_attrs/ndevs/0`: RoCE, iWARP, rxe); an InfiniBand port
//! has none there (the read fails), so it is the PCI function's IPoIB
//! netdev (`type` 32) whose `dev_port` is the port's index.

use std::path::Path;

use super::infiniband::{self, Index, RdmaCm, is_netdev_name, is_rdma_name};
use super::pci::{link, read_function};
use super::pciids::PciIds;
use super::{Backend, Context, Error, Report};
use crate::model::{Device, NetInfo, RdmaInfo, RdmaPort};
use crate::root::{HostRoot, sys_path};
use crate::text::quoted;

/// The RDMA backend.
#[derive(Debug, Clone, Copy)]
pub struct Rdma;

/// Its name.
pub const NAME: &str = "rdma";

/// ARPHRD_ETHER and ARPHRD_INFINIBAND, a netdev's `type`.
const ARPHRD_ETHER: &str = "1";
const ARPHRD_INFINIBAND: &str = "32";

impl Backend for Rdma {
    fn name(&self) -> &'static str {
        NAME
    }

    fn precedence(&self) -> u8 {
        // Below SR-IOV (30), which takes the VFs' RDMA devices.
        20
    }

    fn uevent_subsystems(&self) -> Option<&'static [&'static str]> {
        // RDMA devices, their char devices (ib_uverbs and ib_umad load
        // after the drivers), rdma_cm (misc), the netdevs of their ports,
        // and the PCI functions they live on.
        Some(&[
            "infiniband",
            "infiniband_verbs",
            "infiniband_mad",
            "misc",
            "net",
            "pci",
        ])
    }

    fn physical_only_subsystems(&self) -> &'static [&'static str] {
        // Only netdevs of a PCI function (`<pci>/net/*`) and the names the
        // RDMA devices' GID tables give are read. Software RDMA devices
        // (rxe, siw) are parentless, so `infiniband` is not here.
        &["net"]
    }

    fn discover(&self, cx: &Context, report: &mut Report) -> Result<Vec<Device>, Error> {
        let root = cx.root;
        let class = sys_path(infiniband::CLASS);
        let names = root.list_dir_opt(&class).map_err(|source| Error::Root {
            backend: NAME,
            source,
        })?;
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let index = cx.infiniband();
        infiniband::replay(&index.unresolved, report);
        let ids = cx.pci_ids();
        let mut devices: Vec<Device> = names
            .iter()
            .filter_map(|name| read_device(root, &class.join(name), name, index, ids, report))
            .collect();
        if !devices.is_empty() {
            let cm = &index.rdma_cm;
            infiniband::replay(&cm.warnings, report);
            if cm.missing {
                report.warn(
                    RdmaCm::entry(),
                    "no such file: rdma_ucm is not loaded, so the RDMA devices are given without \
                     /dev/infiniband/rdma_cm, and RDMA CM (librdmacm: rping, perftest's -R, NCCL \
                     and UCX over RoCE) fails in their containers until it is (`modprobe \
                     rdma_ucm`, then regenerate)",
                );
            }
            if let Some(n) = &cm.node {
                for d in &mut devices {
                    d.nodes.push(n.clone());
                }
            }
        }
        Ok(devices)
    }
}

/// Reads the RDMA device at class `entry` (`/sys/class/infiniband/<name>`);
/// `None`, with a warning, when it cannot be used (or quietly, for a VF's).
fn read_device(
    root: &HostRoot,
    entry: &Path,
    name: &str,
    index: &Index,
    ids: Option<&PciIds>,
    report: &mut Report,
) -> Option<Device> {
    if !is_rdma_name(name) {
        report.warn(
            entry,
            format!(
                "{} is not an RDMA device name cdigen uses (1-63 of A-Z a-z 0-9 _ . -); skipping it",
                quoted(name, 80)
            ),
        );
        return None;
    }
    let real = match root.resolve(entry) {
        Ok(r) => r,
        Err(e) => {
            let why = if e.is_not_found() {
                format!(
                    "RDMA device {name} is listed but gone (removed with its device while \
                     cdigen read it?)"
                )
            } else {
                format!("RDMA device {name} cannot be read")
            };
            report.warn(entry, format!("{}: {why}; skipping it", e.reason()));
            return None;
        }
    };
    let device_link = real.join("device");
    let parent = match root.link_name(&device_link) {
        Ok(Some(_)) => match root.resolve(&device_link) {
            Ok(p) => Some(p),
            Err(e) => {
                let why = if e.is_not_found() {
                    format!(
                        "the device RDMA device {name} belongs to is gone (removed while cdigen \
                         read it?)"
                    )
                } else {
                    format!("the device RDMA device {name} belongs to cannot be read")
                };
                report.warn(&device_link, format!("{}: {why}; skipping it", e.reason()));
                return None;
            }
        },
        // No parent: a software device (rxe, siw).
        Ok(None) => None,
        Err(e) => {
            report.warn(
                &device_link,
                format!("{}; skipping RDMA device {name}", e.reason()),
            );
            return None;
        }
    };
    let mut dev = Device {
        backend: NAME.into(),
        id: format!("infiniband:{name}"),
        sysfs_path: real.display().to_string(),
        bus: "virtual".into(),
        ..Default::default()
    };
    if let Some(parent) = &parent {
        dev.sysfs_path = parent.display().to_string();
        let bus = link(root, &parent.join("subsystem"), report);
        if bus.as_deref() == Some("pci") {
            if matches!(root.link_name(&parent.join("physfn")), Ok(Some(_))) {
                tracing::debug!("{name} is a VF's RDMA device: the SR-IOV backend's");
                return None;
            }
            let f = read_function(root, parent, ids, report)?;
            dev.id = f.info.address.clone();
            dev.driver = f.driver;
            dev.numa_node = f.numa_node;
            dev.pci = Some(f.info);
        } else {
            dev.driver = link(root, &parent.join("driver"), report);
        }
        dev.bus = bus.unwrap_or_else(|| "virtual".into());
    }
    let ports = read_ports(root, &real, parent.as_deref(), name, report)?;
    // The char devices live beside `infiniband/`, under the same device.
    let glue_parent = real.parent().and_then(Path::parent)?;
    let (nodes, verbs) = char_nodes(index, glue_parent, name, report);
    if !verbs {
        report.warn(
            entry,
            format!(
                "no uverbs char device in /sys/class/infiniband_verbs names {name} (is ib_uverbs \
                 loaded? another warning may say what is wrong with its entry), so it cannot be \
                 used; skipping it"
            ),
        );
        return None;
    }
    dev.nodes = nodes;
    let mut netdevs: Vec<String> = Vec::new();
    for p in &ports {
        if let Some(n) = &p.netdev
            && !netdevs.contains(n)
        {
            netdevs.push(n.clone());
        }
    }
    dev.net = Some(NetInfo {
        netdevs,
        rdma_devices: vec![name.to_string()],
        link_type: ports
            .first()
            .and_then(|p| infiniband::link_type(&p.link_layer))
            .map(str::to_string),
        ..Default::default()
    });
    dev.rdma = Some(RdmaInfo {
        name: name.to_string(),
        node_type: numbered(root, &real.join("node_type"), report),
        node_guid: guid(root, &real.join("node_guid"), report),
        ports,
    });
    Some(dev)
}

/// The char device nodes of RDMA device `name` among those under
/// `glue_parent` (whose warnings are replayed), and whether there is a
/// uverbs one among them.
fn char_nodes(
    index: &Index,
    glue_parent: &Path,
    name: &str,
    report: &mut Report,
) -> (Vec<crate::model::Node>, bool) {
    let mut nodes = Vec::new();
    let mut verbs = false;
    for c in index.under(glue_parent) {
        match &c.ibdev {
            Ok(ib) if ib == name => {
                infiniband::replay(&c.warnings, report);
                if let Some(n) = &c.node {
                    verbs |= n.role == "rdma-verbs";
                    nodes.push(n.clone());
                }
            }
            // Another device's (a PCI function with two, or the
            // software devices, which share /sys/devices/virtual).
            Ok(_) => {}
            Err(w) => report.warn(w.path.clone(), w.message.clone()),
        }
    }
    (nodes, verbs)
}

/// The ports of the RDMA device at real path `dir`, in port order; `None`,
/// with a warning, when it has none.
fn read_ports(
    root: &HostRoot,
    dir: &Path,
    parent: Option<&Path>,
    name: &str,
    report: &mut Report,
) -> Option<Vec<RdmaPort>> {
    let ports_dir = dir.join("ports");
    let listed = match root.list_dir_opt(&ports_dir) {
        Ok(l) => l,
        Err(e) => {
            report.warn(
                &ports_dir,
                format!("{}; skipping RDMA device {name}", e.reason()),
            );
            return None;
        }
    };
    let mut numbers: Vec<u32> = listed
        .iter()
        .filter(|n| !n.is_empty() && n.len() <= 5 && n.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|n| n.parse().ok())
        .collect();
    numbers.sort_unstable();
    numbers.dedup();
    if numbers.is_empty() {
        report.warn(
            &ports_dir,
            format!("no ports, so RDMA device {name} cannot be used; skipping it"),
        );
        return None;
    }
    Some(
        numbers
            .into_iter()
            .map(|n| read_port(root, &ports_dir.join(n.to_string()), n, parent, report))
            .collect(),
    )
}

/// Reads port `number` at `dir` (`.../ports/1`).
fn read_port(
    root: &HostRoot,
    dir: &Path,
    number: u32,
    parent: Option<&Path>,
    report: &mut Report,
) -> RdmaPort {
    let path = dir.join("link_layer");
    let link_layer = match root.read_attr_opt(&path) {
        Ok(Some(v)) if matches!(v.as_str(), "InfiniBand" | "Ethernet" | "Unknown") => v,
        Ok(Some(v)) => {
            report.warn(
                &path,
                format!(
                    "{} is not a link layer (InfiniBand, Ethernet or Unknown); taking it as Unknown",
                    quoted(&v, 80)
                ),
            );
            "Unknown".into()
        }
        Ok(None) => {
            report.warn(&path, "no such file; taking the link layer as Unknown");
            "Unknown".into()
        }
        Err(e) => {
            report.warn(
                &path,
                format!("{}; taking the link layer as Unknown", e.reason()),
            );
            "Unknown".into()
        }
    };
    let netdev = gid_netdev(root, dir, report)
        .or_else(|| parent.and_then(|p| ipoib_netdev(root, p, number, &link_layer)));
    RdmaPort {
        port: number,
        state: numbered(root, &dir.join("state"), report),
        link_layer,
        netdev,
    }
}

/// The netdev of GID 0 of the port at `dir`. The read fails on ports whose
/// GIDs have no netdev (InfiniBand): that is no news, so it is quiet.
fn gid_netdev(root: &HostRoot, dir: &Path, report: &mut Report) -> Option<String> {
    let path = dir.join("gid_attrs/ndevs/0");
    match root.read_attr_opt(&path) {
        Ok(Some(v)) if is_netdev_name(&v) => Some(v),
        Ok(Some(v)) => {
            report.warn(
                &path,
                format!(
                    "{} is not a network interface name; ignoring it",
                    quoted(&v, 80)
                ),
            );
            None
        }
        Ok(None) | Err(_) => None,
    }
}

/// The netdev of PCI function `parent` for port `number`: the one whose
/// `dev_port` is the port's index (`number - 1`) and whose `type` fits
/// the link layer (IPoIB for InfiniBand), as rdma-core's `ibdev2netdev`
/// pairs them; the first in name order.
fn ipoib_netdev(root: &HostRoot, parent: &Path, number: u32, link_layer: &str) -> Option<String> {
    let want_type = match link_layer {
        "InfiniBand" => ARPHRD_INFINIBAND,
        "Ethernet" => ARPHRD_ETHER,
        _ => return None,
    };
    let index = number.checked_sub(1)?.to_string();
    let net = parent.join("net");
    root.list_dir_opt(&net)
        .unwrap_or_default()
        .into_iter()
        .filter(|n| is_netdev_name(n))
        .find(|n| {
            let attr = |a: &str| root.read_attr_opt(&net.join(n).join(a)).ok().flatten();
            attr("dev_port").as_deref() == Some(index.as_str())
                && attr("type").as_deref() == Some(want_type)
        })
}

/// The name of a numbered value (`1: CA` → `CA`) at `path`; `None` when the
/// file is missing, or (with a warning) unreadable or malformed.
fn numbered(root: &HostRoot, path: &Path, report: &mut Report) -> Option<String> {
    match root.read_attr_opt(path) {
        Ok(Some(v)) => match infiniband::parse_numbered(&v) {
            Some((_, name)) => Some(name.to_string()),
            None => {
                report.warn(
                    path,
                    format!(
                        "{} is not \"<number>: <name>\"; ignoring it",
                        quoted(&v, 80)
                    ),
                );
                None
            }
        },
        Ok(None) => None,
        Err(e) => {
            report.warn(path, format!("{}; ignoring it", e.reason()));
            None
        }
    }
}

/// The GUID at `path`; `None` when missing, or (with a warning) malformed.
fn guid(root: &HostRoot, path: &Path, report: &mut Report) -> Option<String> {
    match root.read_attr_opt(path) {
        Ok(Some(v)) => match infiniband::parse_guid(&v) {
            Some(g) => Some(g.to_string()),
            None => {
                report.warn(
                    path,
                    format!(
                        "{} is not a GUID (xxxx:xxxx:xxxx:xxxx); ignoring it",
                        quoted(&v, 80)
                    ),
                );
                None
            }
        },
        Ok(None) => None,
        Err(e) => {
            report.warn(path, format!("{}; ignoring it", e.reason()));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discover::Warning;
    use std::os::unix::fs::symlink;

    /// A tree under a temporary root: files and relative symlinks.
    struct Tree(tempfile::TempDir);

    impl Tree {
        fn new() -> Tree {
            Tree(tempfile::tempdir().unwrap())
        }
        fn file(&self, rel: &str, text: &str) -> &Tree {
            let p = self.0.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
            self
        }
        fn link(&self, rel: &str, target: &str) -> &Tree {
            let p = self.0.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            symlink(target, p).unwrap();
            self
        }
        /// A class device `<parent>/<class>/<name>` with `dev` and its
        /// class link (`parent` is below `sys/devices/`).
        fn char_dev(&self, parent: &str, class: &str, name: &str, dev: &str, ibdev: &str) {
            let dir = format!("sys/devices/{parent}/{class}/{name}");
            self.file(&format!("{dir}/dev"), &format!("{dev}\n"));
            self.file(&format!("{dir}/ibdev"), &format!("{ibdev}\n"));
            let up = "../".repeat(parent.split('/').count() + 2);
            self.link(
                &format!("sys/class/{class}/{name}"),
                &format!("../../devices/{parent}/{class}/{name}"),
            );
            self.link(&format!("{dir}/device"), &format!("{up}{parent}"));
        }
        fn root(&self) -> HostRoot {
            HostRoot::open(self.0.path()).unwrap()
        }
    }

    const PCI: &str = "pci0000:00/0000:00:02.0/0000:05:00.0";

    /// A ConnectX-3 (mlx4) VPI card: one PCI function, one RDMA device
    /// with two ports, port 1 on InfiniBand (IPoIB ib0), port 2 on
    /// Ethernet (eth1); uverbs0, and umad/issm 0 and 1, one per port.
    fn mlx4() -> Tree {
        let t = Tree::new();
        let f = format!("sys/devices/{PCI}");
        t.file(&format!("{f}/vendor"), "0x15b3\n")
            .file(&format!("{f}/device"), "0x1007\n")
            .file(&format!("{f}/class"), "0x028000\n")
            .file(&format!("{f}/numa_node"), "0\n")
            .link(&format!("{f}/subsystem"), "../../../../bus/pci")
            .link(
                &format!("{f}/driver"),
                "../../../../bus/pci/drivers/mlx4_core",
            )
            .file("sys/bus/pci/drivers/mlx4_core/bind", "")
            .link(
                "sys/bus/pci/devices/0000:05:00.0",
                &format!("../../../devices/{PCI}"),
            );
        for (n, ty, port) in [("ib0", "32", "0"), ("eth1", "1", "1")] {
            t.file(&format!("{f}/net/{n}/type"), &format!("{ty}\n"))
                .file(&format!("{f}/net/{n}/dev_port"), &format!("{port}\n"));
        }
        let ib = format!("{f}/infiniband/mlx4_0");
        t.file(&format!("{ib}/node_type"), "1: CA\n")
            .file(&format!("{ib}/node_guid"), "f452:1403:0010:2a40\n")
            .link(&format!("{ib}/device"), "../../../0000:05:00.0")
            .link(
                "sys/class/infiniband/mlx4_0",
                &format!("../../devices/{PCI}/infiniband/mlx4_0"),
            )
            .file(&format!("{ib}/ports/1/link_layer"), "InfiniBand\n")
            .file(&format!("{ib}/ports/1/state"), "4: ACTIVE\n")
            .file(&format!("{ib}/ports/2/link_layer"), "Ethernet\n")
            .file(&format!("{ib}/ports/2/state"), "1: DOWN\n")
            .file(&format!("{ib}/ports/2/gid_attrs/ndevs/0"), "eth1\n");
        t.char_dev(PCI, "infiniband_verbs", "uverbs0", "231:192", "mlx4_0");
        for (name, dev) in [
            ("umad0", "231:0"),
            ("issm0", "231:64"),
            ("umad1", "231:1"),
            ("issm1", "231:65"),
        ] {
            t.char_dev(PCI, "infiniband_mad", name, dev, "mlx4_0");
        }
        t.file("sys/devices/virtual/misc/rdma_cm/dev", "10:125\n")
            .file(
                "sys/devices/virtual/misc/rdma_cm/uevent",
                "MAJOR=10\nMINOR=125\nDEVNAME=infiniband/rdma_cm\nDEVMODE=0666\n",
            )
            .link(
                "sys/class/misc/rdma_cm",
                "../../devices/virtual/misc/rdma_cm",
            );
        t
    }

    fn run(t: &Tree) -> (Vec<Device>, Vec<String>) {
        let root = t.root();
        let cx = Context::new(&root);
        let mut report = Report::default();
        let devices = Rdma.discover(&cx, &mut report).unwrap();
        let warnings = report
            .warnings
            .iter()
            .map(|w: &Warning| format!("{}: {}", w.path.display(), w.message))
            .collect();
        (devices, warnings)
    }

    #[test]
    fn a_dual_port_vpi_card_has_each_ports_link_layer_netdev_and_mad_nodes() {
        let (devices, warnings) = run(&mlx4());
        assert_eq!(warnings, Vec::<String>::new());
        let [d] = devices.as_slice() else {
            panic!("{devices:?}")
        };
        assert_eq!(
            (d.id.as_str(), d.bus.as_str(), d.driver.as_deref()),
            ("0000:05:00.0", "pci", Some("mlx4_core"))
        );
        assert_eq!(d.sysfs_path, format!("/sys/devices/{PCI}"));
        let names: Vec<&str> = d.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(
            names,
            ["uverbs0", "issm0", "issm1", "umad0", "umad1", "rdma_cm"]
        );
        let rdma = d.rdma.as_ref().unwrap();
        assert_eq!(rdma.node_type.as_deref(), Some("CA"));
        assert_eq!(rdma.node_guid.as_deref(), Some("f452:1403:0010:2a40"));
        let ports: Vec<(u32, &str, Option<&str>, Option<&str>)> = rdma
            .ports
            .iter()
            .map(|p| {
                (
                    p.port,
                    p.link_layer.as_str(),
                    p.state.as_deref(),
                    p.netdev.as_deref(),
                )
            })
            .collect();
        // Port 1's IPoIB netdev by dev_port and type (its GIDs name none),
        // port 2's Ethernet netdev from its GID 0.
        assert_eq!(
            ports,
            [
                (1, "InfiniBand", Some("ACTIVE"), Some("ib0")),
                (2, "Ethernet", Some("DOWN"), Some("eth1")),
            ]
        );
        let net = d.net.as_ref().unwrap();
        assert_eq!(net.netdevs, ["ib0", "eth1"]);
        assert_eq!(net.rdma_devices, ["mlx4_0"]);
        assert_eq!(net.link_type.as_deref(), Some("infiniband"));
    }

    #[test]
    fn garbage_is_said_once_per_file_and_never_taken() {
        let t = mlx4();
        let ib = format!("sys/devices/{PCI}/infiniband/mlx4_0");
        t.file(&format!("{ib}/ports/2/gid_attrs/ndevs/0"), "eth1\n");
        std::fs::write(
            t.0.path().join(format!("{ib}/ports/2/gid_attrs/ndevs/0")),
            "a,b\n",
        )
        .unwrap();
        std::fs::write(t.0.path().join(format!("{ib}/node_type")), "CA\n").unwrap();
        std::fs::write(t.0.path().join(format!("{ib}/node_guid")), "zz\n").unwrap();
        std::fs::write(
            t.0.path().join(format!("{ib}/ports/1/link_layer")),
            "Token Ring\n",
        )
        .unwrap();
        let (devices, warnings) = run(&t);
        let p = format!("/sys/devices/{PCI}/infiniband/mlx4_0");
        assert_eq!(
            warnings,
            [
                format!(
                    "{p}/ports/1/link_layer: \"Token Ring\" is not a link layer (InfiniBand, \
                     Ethernet or Unknown); taking it as Unknown"
                ),
                format!(
                    "{p}/ports/2/gid_attrs/ndevs/0: \"a,b\" is not a network interface name; ignoring it"
                ),
                format!("{p}/node_type: \"CA\" is not \"<number>: <name>\"; ignoring it"),
                format!("{p}/node_guid: \"zz\" is not a GUID (xxxx:xxxx:xxxx:xxxx); ignoring it"),
            ]
        );
        let rdma = devices[0].rdma.as_ref().unwrap();
        assert_eq!(rdma.node_type, None);
        assert_eq!(rdma.node_guid, None);
        assert_eq!(rdma.ports[0].link_layer, "Unknown");
        // An Unknown port has no IPoIB netdev; port 2's GID netdev is
        // not a name, and eth1 has dev_port 1 and type 1: its own.
        assert_eq!(rdma.ports[0].netdev, None);
        assert_eq!(rdma.ports[1].netdev.as_deref(), Some("eth1"));
    }

    #[test]
    fn a_vfs_rdma_device_is_left_to_the_sriov_backend_quietly() {
        let t = mlx4();
        t.link(&format!("sys/devices/{PCI}/physfn"), "../0000:05:00.1");
        let (devices, warnings) = run(&t);
        assert!(devices.is_empty(), "{devices:?}");
        assert_eq!(warnings, Vec::<String>::new());
    }

    #[test]
    fn a_device_whose_parent_link_dangles_is_skipped_with_a_warning() {
        let t = mlx4();
        let link =
            t.0.path()
                .join(format!("sys/devices/{PCI}/infiniband/mlx4_0/device"));
        std::fs::remove_file(&link).unwrap();
        symlink("../../../0000:05:00.7", &link).unwrap();
        let (devices, warnings) = run(&t);
        assert!(devices.is_empty());
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with(&format!("/sys/devices/{PCI}/infiniband/mlx4_0/device: ")),
            "{warnings:?}"
        );
        assert!(
            warnings[0].ends_with(
                ": the device RDMA device mlx4_0 belongs to is gone (removed while cdigen read \
                 it?); skipping it"
            ),
            "{warnings:?}"
        );
    }

    #[test]
    fn a_device_without_ports_or_uverbs_is_skipped_with_a_warning() {
        let t = mlx4();
        std::fs::remove_dir_all(
            t.0.path()
                .join(format!("sys/devices/{PCI}/infiniband_verbs/uverbs0")),
        )
        .unwrap();
        let (devices, warnings) = run(&t);
        assert!(devices.is_empty());
        assert_eq!(
            warnings,
            ["/sys/class/infiniband/mlx4_0: no uverbs char device in \
                 /sys/class/infiniband_verbs names mlx4_0 (is ib_uverbs loaded? another warning \
                 may say what is wrong with its entry), so it cannot be used; skipping it"]
        );
        let t = mlx4();
        std::fs::remove_dir_all(
            t.0.path()
                .join(format!("sys/devices/{PCI}/infiniband/mlx4_0/ports")),
        )
        .unwrap();
        let (devices, warnings) = run(&t);
        assert!(devices.is_empty());
        assert_eq!(
            warnings,
            [format!(
                "/sys/devices/{PCI}/infiniband/mlx4_0/ports: no ports, so RDMA device mlx4_0 \
                 cannot be used; skipping it"
            )]
        );
    }
}

//! The device model: what discovery found, independent of CDI.
//!
//! Backends produce [`Device`]s; generators select among them and templates
//! turn them into spec content. Everything here is plain data with a
//! stable order, serialized as-is for `cdigen discover -o json` and for
//! template contexts.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

/// A device found on the host.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Device {
    /// The backend that found it (`drm`).
    pub backend: String,
    /// Stable identity: the PCI address (`0000:03:00.0`) or, for other
    /// buses, `<bus>:<name>` (`platform:fec00000.v3d`); for the generic
    /// backend, `<subsystem>:<kernel name>` (`tty:ttyUSB0`).
    pub id: String,
    /// Real sysfs path of the device (`/sys/devices/...`): the key under
    /// which backends claim devices.
    pub sysfs_path: String,
    /// Bus of the device (`pci`, `platform`, `usb`, ...).
    pub bus: String,
    /// PCI details, for PCI devices.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pci: Option<PciInfo>,
    /// The real sysfs path of the PCI function the device is part of,
    /// when that is neither `sysfs_path` nor one of its ancestors (an AMD
    /// compute partition, a platform device of its GPU); see
    /// [`Device::pci_function_path`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pci_function: Option<String>,
    /// Bound driver, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// NUMA node, when the device has an affinity.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub numa_node: Option<u32>,
    /// Device nodes that give access to it.
    pub nodes: Vec<Node>,
    /// `/dev` symlinks that name its nodes (`/dev/dri/by-path/...`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<Link>,
    /// Backend-specific facts (`compatible`, `devtype`, ...).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub attrs: BTreeMap<String, String>,
    /// Network facts (SR-IOV VFs, vDPA devices).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub net: Option<NetInfo>,
    /// VFIO facts (devices bound to a VFIO driver).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vfio: Option<VfioInfo>,
    /// The vDPA device (vDPA backend), or the one a VF carries (SR-IOV).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vdpa: Option<VdpaInfo>,
    /// The device's UUID as its vendor's runtime names it, for devices
    /// other than NVIDIA's (whose UUIDs are in [`NvidiaInfo`]): an AMD GPU
    /// or partition with a KFD `unique_id`, `GPU-` and 16 hex digits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// NVIDIA GPU or MIG device facts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvidia: Option<NvidiaInfo>,
    /// RDMA device facts (RDMA backend: an HCA that is not a VF).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rdma: Option<RdmaInfo>,
    /// Generic backend facts: the class device and the definitions that
    /// matched it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generic: Option<GenericInfo>,
    /// The user-space driver the device needs in the container (NVIDIA's
    /// libraries, utilities, firmware, sockets): found once per discovery
    /// and shared by every device of the driver.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver_files: Option<Arc<Driver>>,
}

impl Device {
    /// The device's UUID: an NVIDIA GPU's or MIG device's (`None` for a
    /// MIG device the driver gives none), else [`Device::uuid`].
    pub fn any_uuid(&self) -> Option<&str> {
        match &self.nvidia {
            Some(n) => match &n.mig {
                None => Some(n.gpu_uuid.as_str()),
                Some(m) => m.uuid.as_deref(),
            },
            None => self.uuid.as_deref(),
        }
    }

    /// The real sysfs path of the PCI function the device is or is part
    /// of: [`Device::pci_function`] when set, else `sysfs_path` up to its
    /// last component that is a PCI address below a host bridge (the
    /// device itself, the VF of a vDPA device, the USB controller of a
    /// serial adapter); `None` for a device outside PCI.
    pub fn pci_function_path(&self) -> Option<&str> {
        if let Some(p) = &self.pci_function {
            return Some(p);
        }
        nearest_pci_function(&self.sysfs_path)
    }
}

/// `sysfs_path` up to its last component that is a PCI address, when it
/// is below a host bridge (`/sys/devices/pci<domain>:<bus>/...`).
pub fn nearest_pci_function(sysfs_path: &str) -> Option<&str> {
    let rest = sysfs_path.strip_prefix("/sys/devices/pci")?;
    let mut end = None;
    let mut at = "/sys/devices/pci".len();
    for (i, c) in rest.split('/').enumerate() {
        let stop = at + c.len();
        if i > 0 && c.parse::<crate::sysfs::PciAddress>().is_ok() {
            end = Some(stop);
        }
        at = stop + 1;
    }
    sysfs_path.get(..end?)
}

/// A device the generic backend found for one or more definitions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GenericInfo {
    /// The class or bus it was found in (`tty`).
    pub subsystem: String,
    /// Its kernel name (`ttyUSB0`).
    pub name: String,
    /// Generator definitions whose `match` selects it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub matched_by: Vec<String>,
    /// The `join` entries that add its node to their generator's devices
    /// (`amd-gpu.join[0]`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub joined_by: Vec<String>,
    /// Where the node sits on USB, when it is below a USB device (a serial
    /// adapter's port): what the `usb` name strategy names it by.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usb: Option<UsbPort>,
    /// The parent's bus (`pci`, `sound`) when this device is the group of
    /// every matched node below one parent (a definition's `group:
    /// parent`); `name` is then the parent's kernel name (`0000:04:00.0`,
    /// `card0`) and the device has all their nodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

/// A node's place on USB, read from sysfs as udev's `usb_id` and `path_id`
/// builtins read it for the `/dev/serial/by-id` and `by-path` links.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UsbPort {
    /// The USB device's kernel name (`1-1.2`): unique on the host while
    /// it is plugged in, not across replugs (the bus number is the
    /// controller's probe order).
    pub device: String,
    /// Where it is plugged: the host controller and the port chain,
    /// `pci-0000:0e:00.3-usb-1.2` (stable while it stays in that port).
    pub path: String,
    /// The USB device's serial number string, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    /// The interface the node belongs to, as `bInterfaceNumber` reads
    /// (`00`, two hex digits).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
    /// The usb-serial port number within that interface (`port_number`
    /// of a ttyUSB port; none for ttyACM).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u32>,
}

/// A bind mount of a host file into the container.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MountSpec {
    /// Source on the host.
    pub host_path: String,
    /// Destination in the container.
    pub container_path: String,
    /// Mount options (`ro`, `nosuid`, `nodev`, `bind`).
    pub options: Vec<String>,
}

/// A driver's user-space files on the host (NVIDIA's), by capability.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Driver {
    /// The running driver version (`550.90.07`), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Where the files were looked for, said in errors (`/run/nvidia/driver`).
    pub root: String,
    /// The files found, in container-path order.
    pub files: Vec<DriverFile>,
    /// Why the driver's libraries are missing or unusable (no `libcuda`,
    /// a version that is not the running one): a generator that requires
    /// them fails with it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// Where container runtimes find cdigen on the host, for the hooks.
    pub hook_path: String,
}

/// What a container asks a driver for (NVIDIA's `NVIDIA_DRIVER_CAPABILITIES`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Capability {
    /// CUDA and OpenCL.
    Compute,
    /// `nvidia-smi` and NVML.
    Utility,
    /// Video encode and decode (NVENC, NVDEC, VDPAU).
    Video,
    /// OpenGL, EGL, GLX, Vulkan, OptiX, NGX, GBM.
    Graphics,
    /// X11 display (the Xorg driver modules).
    Display,
}

impl Capability {
    /// Every capability, in order.
    pub const ALL: [Capability; 5] = [
        Capability::Compute,
        Capability::Utility,
        Capability::Video,
        Capability::Graphics,
        Capability::Display,
    ];

    /// Its lower-case name (`compute`).
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::Compute => "compute",
            Capability::Utility => "utility",
            Capability::Video => "video",
            Capability::Graphics => "graphics",
            Capability::Display => "display",
        }
    }
}

/// What a driver file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FileKind {
    /// A shared library: its directory goes into the container's linker cache.
    Library,
    /// A program.
    Executable,
    /// A plug-in another program loads by path (Xorg modules, NGX's DLLs):
    /// not for the linker cache.
    Module,
    /// Firmware the container's tools read.
    Firmware,
    /// A configuration or data file (ICD and vendor JSON, `nvoptix.bin`).
    Config,
    /// An IPC socket or directory of the host's daemons.
    Ipc,
}

/// One file of a driver, and where the container gets it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DriverFile {
    /// The capability that needs it.
    pub capability: Capability,
    /// What it is.
    pub kind: FileKind,
    /// Its path on the host (the real file, links resolved).
    pub host_path: String,
    /// Where it goes in the container.
    pub container_path: String,
    /// Symbolic links the container needs to it (the soname link
    /// `libcuda.so.1`, the development link `libcuda.so`), each made by a
    /// hook, or bind-mounted without hooks.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<FileLink>,
}

/// A symbolic link in the container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileLink {
    /// The link's path in the container.
    pub path: String,
    /// What it points to, as written in the link (`libcuda.so.1`,
    /// `../libnvidia-allocator.so.1`).
    pub target: String,
}

/// An NVIDIA GPU, or a MIG device of one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NvidiaInfo {
    /// Product name (`NVIDIA A100 80GB PCIe`).
    pub model: String,
    /// The GPU's UUID (`GPU-...`); for a MIG device, its parent's.
    pub gpu_uuid: String,
    /// The GPU's device minor (N of `/dev/nvidiaN`).
    pub minor: u32,
    /// The driver version (`570.86.15`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver_version: Option<String>,
    /// Whether the GPU has MIG devices configured.
    pub mig_enabled: bool,
    /// For a MIG device: where it sits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mig: Option<MigInfo>,
}

/// A MIG device: a compute instance of a GPU instance.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MigInfo {
    /// The parent GPU's PCI address.
    pub parent: String,
    /// GPU instance ID (hardware placement, not 0..n).
    pub gi: u32,
    /// Compute instance ID.
    pub ci: u32,
    /// The MIG device's UUID (`MIG-...`), only known from NVML.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// The MIG profile (`3g.40gb`), only known from NVML.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
}

/// What a network device (a VF, the PCI function under a vDPA device, or
/// an RDMA device) is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NetInfo {
    /// Its network interfaces (`ens1f0v0`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub netdevs: Vec<String>,
    /// The PF's PCI address, for a VF.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pf: Option<String>,
    /// The PF's network interface (the uplink in switchdev mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pf_netdev: Option<String>,
    /// The VF index (`virtfnN` of the PF).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vf_index: Option<u32>,
    /// The VF's representor netdev (switchdev mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub representor: Option<String>,
    /// RDMA devices (`mlx5_2`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rdma_devices: Vec<String>,
    /// `ether` or `infiniband`, from the RDMA port or the PCI class.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link_type: Option<String>,
}

/// An RDMA device (`/sys/class/infiniband/<name>`): an InfiniBand HCA,
/// a RoCE or iWARP NIC, or a software device (rxe, siw).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RdmaInfo {
    /// Its name (`mlx5_0`, `ibp152s0`, `rxe0`), as `ibdev` of its char
    /// devices and the verbs API name it.
    pub name: String,
    /// What it is, from `node_type` (`1: CA` → `CA`; `RNIC` for iWARP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_type: Option<String>,
    /// Its node GUID (`b8ce:f603:00a1:b2c4`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_guid: Option<String>,
    /// Its ports, in port order.
    pub ports: Vec<RdmaPort>,
}

/// A port of an RDMA device (`ports/<N>/`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RdmaPort {
    /// The port number (from 1; switches have port 0).
    pub port: u32,
    /// `InfiniBand`, `Ethernet` (RoCE, iWARP) or `Unknown`, as the kernel
    /// writes `link_layer`.
    pub link_layer: String,
    /// Its state (`4: ACTIVE` → `ACTIVE`), when readable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Its network interface: the netdev of GID 0 (RoCE), or the PCI
    /// function's IPoIB netdev of the port (InfiniBand).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub netdev: Option<String>,
}

/// A device's VFIO attachment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct VfioInfo {
    /// IOMMU group number.
    pub group: String,
    /// No-IOMMU mode (group node `/dev/vfio/noiommu-<group>`).
    pub noiommu: bool,
    /// Every device of the group (PCI addresses, sorted), itself included.
    pub group_devices: Vec<String>,
    /// `legacy` (container + group nodes) or `iommufd` (cdev + `/dev/iommu`).
    pub mode: String,
}

/// A vDPA device.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct VdpaInfo {
    /// Its name on the vdpa bus (`vdpa0`, `vdpa:0000:3b:00.5`).
    pub name: String,
    /// `vhost` or `virtio` (device-info spelling); absent when unbound.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// `/dev/vhost-vdpa-N`, or the virtio device's sysfs path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// PCI address of the function it lives on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pci_address: Option<String>,
    /// The virtio netdev (`virtio_vdpa`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub netdev: Option<String>,
}

/// PCI identity of a device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PciInfo {
    /// `0000:03:00.0`.
    pub address: String,
    /// Vendor ID, `0x1002`.
    pub vendor_id: String,
    /// Device ID, `0x744c`.
    pub device_id: String,
    /// Subsystem vendor ID, when present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subsystem_vendor_id: Option<String>,
    /// Subsystem device ID, when present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subsystem_device_id: Option<String>,
    /// Class code, `0x030000`.
    pub class: String,
    /// Vendor name from the PCI ID database, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vendor_name: Option<String>,
    /// Device name from the PCI ID database, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    /// IOMMU group number, when the IOMMU is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iommu_group: Option<String>,
}

/// A device node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Node {
    /// What the node is for: `primary`, `render`, `accel`, `kfd`, ...
    pub role: String,
    /// Kernel name (`card1`).
    pub name: String,
    /// Host path (`/dev/dri/card1`).
    pub path: String,
    /// `c` (character) or `b` (block).
    #[serde(rename = "type")]
    pub node_type: String,
    /// Major number, from sysfs.
    pub major: u32,
    /// Minor number, from sysfs.
    pub minor: u32,
    /// The node as it is in the host's `/dev`, when it exists there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<HostNode>,
}

/// Roles of the NVIDIA control nodes (`nvidiactl`, `nvidia-modeset`,
/// `nvidia-uvm`, `nvidia-uvm-tools`): the nodes every NVIDIA device needs
/// besides its own, which the NVIDIA backend adds to each and templates
/// offer once per spec.
pub const NVIDIA_CONTROL_ROLES: [&str; 4] = [
    "nvidia-control",
    "nvidia-modeset",
    "nvidia-uvm",
    "nvidia-uvm-tools",
];

/// Mode and owner of a node in the host's `/dev`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HostNode {
    /// Permission bits.
    pub mode: u32,
    /// Owner uid.
    pub uid: u32,
    /// Group gid.
    pub gid: u32,
}

/// A `/dev` symlink naming one of a device's nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Link {
    /// The link (`/dev/dri/by-path/pci-0000:03:00.0-card`).
    pub path: String,
    /// Its target as written (`../card1`).
    pub target: String,
    /// The node it names (`/dev/dri/card1`).
    pub node: String,
}

/// A character-device node for unit tests: `role`, kernel `name`, `path`
/// and numbers, nothing known of the host.
#[cfg(test)]
pub(crate) fn test_node(role: &str, name: &str, path: &str, major: u32, minor: u32) -> Node {
    Node {
        role: role.into(),
        name: name.into(),
        path: path.into(),
        node_type: "c".into(),
        major,
        minor,
        host: None,
    }
}

/// PCI identity for unit tests: a Mellanox ConnectX VF (`0x15b3:0x101e`,
/// an Ethernet controller) at `address`, nothing else known.
#[cfg(test)]
pub(crate) fn test_pci(address: &str) -> PciInfo {
    PciInfo {
        address: address.into(),
        vendor_id: "0x15b3".into(),
        device_id: "0x101e".into(),
        subsystem_vendor_id: None,
        subsystem_device_id: None,
        class: "0x020000".into(),
        vendor_name: None,
        device_name: None,
        iommu_group: None,
    }
}

#[cfg(test)]
mod pci_function_tests {
    use super::*;

    #[test]
    fn the_nearest_pci_function_is_the_last_address_below_a_host_bridge() {
        let f = nearest_pci_function;
        assert_eq!(
            f("/sys/devices/pci0000:00/0000:00:08.1/0000:0e:00.3/usb3/3-2/3-2:1.0/ttyUSB0"),
            Some("/sys/devices/pci0000:00/0000:00:08.1/0000:0e:00.3")
        );
        assert_eq!(
            f("/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.5/vdpa0"),
            Some("/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.5")
        );
        assert_eq!(
            f("/sys/devices/pci0000:3a/0000:3a:00.0"),
            Some("/sys/devices/pci0000:3a/0000:3a:00.0")
        );
        assert_eq!(f("/sys/devices/pci0000:3a"), None, "a host bridge alone");
        assert_eq!(f("/sys/devices/platform/amdgpu_xcp_0"), None);
        assert_eq!(f("/sys/devices/virtual/0000:00:01.0"), None);
        assert_eq!(f(""), None);
        let partition = Device {
            sysfs_path: "/sys/devices/platform/amdgpu_xcp_0".into(),
            pci_function: Some("/sys/devices/pci0000:00/0000:00:01.1/0000:05:00.0".into()),
            ..Device::default()
        };
        assert_eq!(
            partition.pci_function_path(),
            Some("/sys/devices/pci0000:00/0000:00:01.1/0000:05:00.0")
        );
    }
}

//! Passthrough by rebinding (`cdigen::dra::passthrough`), over the example
//! fixture with a simulated kernel (`support/pcikernel.rs`): the mechanism
//! (bind to vfio-pci, give back, IOMMU group viability, what the kernel
//! refuses), and NodePrepareResources / NodeUnprepareResources through the
//! DRA plugin with a fake API server: a VF whose DeviceClass asks for
//! passthrough gets its VFIO nodes in the claim's CDI device and its
//! driver back at unprepare; a crash between unbinding and binding is
//! undone at the next start; a function in use is not given back.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[path = "support/claims.rs"]
mod claims;
#[path = "support/pcikernel.rs"]
mod pcikernel;
#[path = "support/machine.rs"]
mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cdigen::dra::ClaimApi;
use cdigen::dra::api::v1;
use cdigen::dra::checkpoint::{self, Step};
use cdigen::dra::names::DraDevice;
use cdigen::dra::passthrough::{self, PciWriter};
use cdigen::dra::plugin::{self, Config, Running};
use cdigen::root::HostRoot;
use claims::FakeApi;
use k8s_openapi::api::resource::v1::ResourceClaim;
use pcikernel::FakeKernel;
use serde_json::{Value, json};
use tokio::sync::{oneshot, watch};

const DRIVER: &str = "dra.cdigen.io";
const NODE: &str = "node1";
const VF: &str = "sriov-0000-3b-00-2";
const VF_ADDR: &str = "0000:3b:00.2";
const UID1: &str = "6f1d3c2a-8b4e-4a7f-9c21-0d5e7b3a9f10";
const UID2: &str = "0b9f2a44-1c3d-4e5f-8a7b-6c5d4e3f2a1b";

fn root(base: &Path) -> HostRoot {
    HostRoot::open(base).unwrap()
}

/// The example machine and its kernel.
fn machine() -> (tempfile::TempDir, PathBuf, Arc<FakeKernel>) {
    let (tmp, root) = support::machine("example");
    let kernel = Arc::new(FakeKernel::boot(&root));
    (tmp, root, kernel)
}

fn writes(k: &FakeKernel) -> Vec<(String, String)> {
    std::mem::take(&mut *k.writes.lock().unwrap())
}

fn w(attr: &str, value: &str) -> (String, String) {
    (attr.to_string(), value.to_string())
}

#[test]
fn a_function_is_bound_to_vfio_pci_and_given_back() {
    let (_tmp, base, k) = machine();
    let r = root(&base);
    assert_eq!(k.driver(VF_ADDR).as_deref(), Some("mlx5_core"));
    assert!(passthrough::check_group(&r, VF_ADDR).is_ok());
    passthrough::bind_vfio(&r, k.as_ref(), VF_ADDR).unwrap();
    assert_eq!(
        writes(&k),
        [
            w(
                "/sys/bus/pci/devices/0000:3b:00.2/driver_override",
                "vfio-pci"
            ),
            w("/sys/bus/pci/drivers/mlx5_core/unbind", VF_ADDR),
            w("/sys/bus/pci/drivers_probe", VF_ADDR),
        ]
    );
    assert_eq!(k.driver(VF_ADDR).as_deref(), Some("vfio-pci"));
    assert_eq!(k.override_of(VF_ADDR), "vfio-pci\n");
    // The group node the kernel made, and the container node.
    let nodes = passthrough::vfio_nodes(&r, VF_ADDR).unwrap();
    let paths: Vec<(&str, i64, i64)> = nodes
        .iter()
        .map(|n| (n.path.as_str(), n.major, n.minor))
        .collect();
    assert_eq!(
        paths,
        [("/dev/vfio/vfio", 10, 196), ("/dev/vfio/41", 242, 141)]
    );

    passthrough::restore(&r, k.as_ref(), VF_ADDR, Some("mlx5_core")).unwrap();
    assert_eq!(
        writes(&k),
        [
            w("/sys/bus/pci/devices/0000:3b:00.2/driver_override", "\n"),
            w("/sys/bus/pci/drivers/vfio-pci/unbind", VF_ADDR),
            w("/sys/bus/pci/drivers_probe", VF_ADDR),
        ]
    );
    assert_eq!(k.driver(VF_ADDR).as_deref(), Some("mlx5_core"));
    assert_eq!(k.override_of(VF_ADDR), "(null)\n");
    assert!(
        !base.join("sys/class/vfio/41").exists(),
        "the group node goes"
    );
}

/// The kernel's refusals reach the caller with its errno, naming the file;
/// nothing but the binding attributes under /sys/bus/pci is written.
#[test]
fn refusals_name_the_device_and_the_file() {
    let (_tmp, base, k) = machine();
    let r = root(&base);
    // bind to a driver that does not match: ENODEV; to a bound one: EBUSY.
    let e = k
        .write(&r, Path::new("/sys/bus/pci/drivers/vfio-pci/bind"), VF_ADDR)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("drivers/vfio-pci/bind: No such device"),
        "{e}"
    );
    let e = k
        .write(
            &r,
            Path::new("/sys/bus/pci/drivers/mlx5_core/bind"),
            VF_ADDR,
        )
        .unwrap_err();
    assert!(e.to_string().contains("Device or resource busy"), "{e}");
    // No vfio-pci driver (module not loaded): the probe binds nothing.
    fs::remove_dir_all(base.join("sys/bus/pci/drivers/vfio-pci")).unwrap();
    let e = passthrough::bind_vfio(&r, k.as_ref(), VF_ADDR).unwrap_err();
    assert_eq!(
        e,
        "PCI function 0000:3b:00.2: after drivers_probe it is bound to no driver, not vfio-pci: \
         is the vfio-pci module loaded (modprobe vfio-pci)?"
    );
    // Written only where the kernel binds drivers.
    for bad in [
        "/sys/class/net/eth0/address",
        "/sys/bus/pci/devices/0000:3b:00.2/remove",
        "/sys/bus/pci/devices/../../../etc/driver_override",
        "/sys/bus/usb/drivers/usb/bind",
        "/etc/passwd",
    ] {
        let e = r.write_pci_attr(Path::new(bad), "x").unwrap_err();
        assert!(
            e.to_string()
                .ends_with("cdigen writes only driver_override, bind, unbind and drivers_probe under /sys/bus/pci"),
            "{bad}: {e}"
        );
    }
    // A link where the attribute should be is not written through.
    let o = base.join("sys/bus/pci/devices/0000:3b:00.3/driver_override");
    fs::remove_file(&o).unwrap();
    std::os::unix::fs::symlink(format!("{}elsewhere", "../".repeat(16)), &o).unwrap();
    let e = r
        .write_pci_attr(
            Path::new("/sys/bus/pci/devices/0000:3b:00.3/driver_override"),
            "x",
        )
        .unwrap_err();
    assert!(e.to_string().contains("outside the root"), "{e}");
}

/// A group is viable when every other member is driverless, on a VFIO
/// driver or pci-stub, or a bridge (Documentation/driver-api/vfio.rst).
#[test]
fn a_group_member_on_a_host_driver_refuses_passthrough() {
    let (_tmp, base, k) = machine();
    let r = root(&base);
    // 0000:3b:00.3 (on mlx5_core) and the root port 0000:3a:00.0 (a
    // bridge on pcieport) join group 41.
    let devs = base.join("sys/kernel/iommu_groups/41/devices");
    for m in ["0000:3b:00.3", "0000:3a:00.0"] {
        std::os::unix::fs::symlink(format!("../../../../bus/pci/devices/{m}"), devs.join(m))
            .unwrap();
    }
    let e = passthrough::check_group(&r, VF_ADDR).unwrap_err();
    assert!(
        e.starts_with(
            "PCI function 0000:3b:00.2 cannot be passed through: 0000:3b:00.3, in its IOMMU group 41 \
             (/sys/bus/pci/devices/0000:3b:00.2/iommu_group/devices), is bound to the host driver \
             mlx5_core"
        ),
        "{e}"
    );
    assert!(e.ends_with("unbind 0000:3b:00.3 (echo 0000:3b:00.3 > /sys/bus/pci/drivers/mlx5_core/unbind) or allocate it too"), "{e}");
    k.unbind_now("0000:3b:00.3");
    let (group, others) = passthrough::check_group(&r, VF_ADDR).unwrap();
    assert_eq!(group, "41");
    assert_eq!(others, ["0000:3a:00.0", "0000:3b:00.3"]);
    k.bind_now("0000:3b:00.3", "vfio-pci");
    assert!(passthrough::check_group(&r, VF_ADDR).is_ok());
    // No IOMMU group at all.
    fs::remove_file(base.join("sys/bus/pci/devices/0000:3b:00.2/iommu_group")).unwrap();
    let e = passthrough::check_group(&r, VF_ADDR).unwrap_err();
    assert!(
        e.starts_with("PCI function 0000:3b:00.2 has no IOMMU group"),
        "{e}"
    );
}

/// A claim allocated `device` for request `vf`, with `config` entries and
/// the result's `adminAccess`.
fn claim(name: &str, uid: &str, device: &str, config: Value, admin: bool) -> ResourceClaim {
    let mut result = json!({"driver": DRIVER, "pool": NODE, "device": device, "request": "vf"});
    let mut request = json!({"name": "vf", "exactly": {"deviceClassName": "vf.cdigen.io"}});
    if admin {
        // As the allocator writes it: for a request that asks for it.
        result["adminAccess"] = json!(true);
        request["exactly"]["adminAccess"] = json!(true);
    }
    serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"namespace": "ns", "name": name, "uid": uid},
        "spec": {"devices": {"requests": [request]}},
        "status": {"allocation": {"devices": {"results": [result], "config": config}}},
    }))
    .unwrap()
}

/// The opt-in class's configuration (or a claim's, with `source`).
fn passthrough_config(source: &str) -> Value {
    json!([{
        "source": source,
        "opaque": {"driver": DRIVER, "parameters": {
            "apiVersion": "dra.cdigen.io/v1alpha1", "kind": "DeviceConfig",
            "passthrough": "vfio-pci"}},
    }])
}

struct Env {
    tmp: tempfile::TempDir,
    base: PathBuf,
    kernel: Arc<FakeKernel>,
    devices: Vec<DraDevice>,
    api: Arc<FakeApi>,
}

impl Env {
    fn new() -> Env {
        let (tmp, base, kernel) = machine();
        let devices = support::dra_devices(&base, &tmp.path().join("cdi"));
        assert!(devices.iter().any(|d| d.name == VF));
        Env {
            tmp,
            base,
            kernel,
            devices,
            api: Arc::new(FakeApi::default()),
        }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.tmp.path().join(p)
    }

    fn add(&self, c: ResourceClaim) {
        self.api.add(c);
    }

    /// The plugin, with the sriov generator allowing passthrough.
    async fn start(&self) -> (Running, oneshot::Sender<()>) {
        let mut c = Config::new(
            DRIVER,
            NODE,
            &self.path("plugins"),
            &self.path("registry"),
            Arc::new(root(&self.base)),
        );
        c.prepare.cdi_dir = self.path("cdi");
        c.prepare.metadata = false;
        c.prepare.passthrough.writer = Arc::clone(&self.kernel) as Arc<dyn PciWriter>;
        c.prepare.passthrough.generators.insert("sriov".into());
        let (_tx, rx) = watch::channel(Arc::new(self.devices.clone()));
        let (stop, stopped) = oneshot::channel::<()>();
        let running = plugin::start(
            c,
            Arc::clone(&self.api) as Arc<dyn ClaimApi>,
            rx,
            async move {
                let _ = stopped.await;
            },
        )
        .await
        .unwrap();
        (running, stop)
    }

    fn checkpoint(&self) -> checkpoint::Checkpoint {
        checkpoint::load(&self.path("plugins").join(DRIVER)).unwrap()
    }

    fn claim_spec(&self, uid: &str) -> PathBuf {
        self.path("cdi")
            .join(format!("k8s.{DRIVER}-claim_{uid}.json"))
    }
}

async fn client(sock: &Path) -> v1::dra_plugin_client::DraPluginClient<tonic::transport::Channel> {
    v1::dra_plugin_client::DraPluginClient::new(
        cdigen::deviceplugin::kubelet::connect(sock).await.unwrap(),
    )
}

fn v1_claim(name: &str, uid: &str) -> v1::Claim {
    v1::Claim {
        namespace: "ns".into(),
        uid: uid.into(),
        name: name.into(),
    }
}

/// One claim's answer: (error, CDI IDs of its devices).
async fn prepare(sock: &Path, name: &str, uid: &str) -> (String, Vec<String>) {
    let r = client(sock)
        .await
        .node_prepare_resources(v1::NodePrepareResourcesRequest {
            claims: vec![v1_claim(name, uid)],
        })
        .await
        .unwrap()
        .into_inner();
    let a = &r.claims[uid];
    let ids = a
        .devices
        .iter()
        .flat_map(|d| d.cdi_device_ids.clone())
        .collect();
    (a.error.clone(), ids)
}

async fn unprepare(sock: &Path, name: &str, uid: &str) -> String {
    let r = client(sock)
        .await
        .node_unprepare_resources(v1::NodeUnprepareResourcesRequest {
            claims: vec![v1_claim(name, uid)],
        })
        .await
        .unwrap()
        .into_inner();
    r.claims[uid].error.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vf_of_the_passthrough_class_is_prepared_on_vfio_pci_and_given_back() {
    let env = Env::new();
    env.add(claim(
        "vm",
        UID1,
        VF,
        passthrough_config("FromClass"),
        false,
    ));
    let (running, stop) = env.start().await;
    let sock = running.dra_socket.clone();

    let (err, ids) = prepare(&sock, "vm", UID1).await;
    assert_eq!(err, "");
    // The claim's device alone: not the generator's, which describes the
    // VF on its host driver.
    assert_eq!(ids, [format!("k8s.{DRIVER}/claim={UID1}-{VF}")]);
    assert_eq!(env.kernel.driver(VF_ADDR).as_deref(), Some("vfio-pci"));
    let spec = cdigen::cdi::load_file(&env.claim_spec(UID1)).unwrap();
    assert!(cdigen::cdi::validate::validate(&spec).is_empty());
    let nodes: Vec<&str> = spec.devices[0]
        .container_edits
        .device_nodes
        .iter()
        .map(|n| n.path.as_str())
        .collect();
    assert_eq!(nodes, ["/dev/vfio/vfio", "/dev/vfio/41"]);
    let cp = env.checkpoint();
    let r = &cp.rebinds[VF_ADDR];
    assert_eq!(
        (
            r.claim.as_str(),
            r.device.as_str(),
            r.original.as_deref(),
            r.step
        ),
        (UID1, VF, Some("mlx5_core"), Step::Bound)
    );
    // Prepared again: the checkpoint's answer, no write.
    writes(&env.kernel);
    assert_eq!(prepare(&sock, "vm", UID1).await, (String::new(), ids));
    assert!(writes(&env.kernel).is_empty());

    assert_eq!(unprepare(&sock, "vm", UID1).await, "");
    assert_eq!(env.kernel.driver(VF_ADDR).as_deref(), Some("mlx5_core"));
    assert_eq!(env.kernel.override_of(VF_ADDR), "(null)\n");
    assert!(env.checkpoint().rebinds.is_empty());
    assert!(!env.claim_spec(UID1).exists());
    stop.send(()).unwrap();
    running.wait().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passthrough_is_refused_where_it_is_not_allowed_and_skipped_for_admin_access() {
    let env = Env::new();
    // A claim cannot ask for it; only a class can.
    env.add(claim(
        "mine",
        UID1,
        VF,
        passthrough_config("FromClaim"),
        false,
    ));
    // A generator that does not allow it.
    let gpu = "amd-gpu-0000-03-00-0";
    env.add(claim(
        "gpu",
        UID2,
        gpu,
        passthrough_config("FromClass"),
        false,
    ));
    let (running, stop) = env.start().await;
    let sock = running.dra_socket.clone();
    let (err, _) = prepare(&sock, "mine", UID1).await;
    assert!(
        err.ends_with(
            "config[0] (FromClaim): passthrough is an administrator's choice: only a DeviceClass's \
             configuration may set it, not a claim's"
        ),
        "{err}"
    );
    let (err, _) = prepare(&sock, "gpu", UID2).await;
    assert!(
        err.ends_with(&format!(
            "device {gpu}: its class asks for passthrough, which generator amd-gpu does not allow \
             (set dra.vfio_passthrough: true in its definition)"
        )),
        "{err}"
    );
    // An admin access of the class is not rebound: the generator's device.
    env.add(claim(
        "look",
        UID1,
        VF,
        passthrough_config("FromClass"),
        true,
    ));
    let (err, ids) = prepare(&sock, "look", UID1).await;
    assert_eq!(err, "");
    assert_eq!(ids, ["cdigen.io/vf=0000:3b:00.2"]);
    assert!(writes(&env.kernel).is_empty());
    assert_eq!(env.kernel.driver(VF_ADDR).as_deref(), Some("mlx5_core"));
    // ... and while it is prepared, no other claim takes the VF from
    // under it.
    env.add(claim(
        "vm",
        UID2,
        VF,
        passthrough_config("FromClass"),
        false,
    ));
    let (err, _) = prepare(&sock, "vm", UID2).await;
    assert!(
        err.ends_with(&format!(
            "device {VF} (PCI function {VF_ADDR}) is prepared for claim {UID1} too: not taking it \
             from its driver"
        )),
        "{err}"
    );
    assert_eq!(env.kernel.driver(VF_ADDR).as_deref(), Some("mlx5_core"));
    stop.send(()).unwrap();
    running.wait().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_member_on_a_host_driver_fails_the_claim_and_nothing_is_written() {
    let env = Env::new();
    let devs = env.base.join("sys/kernel/iommu_groups/41/devices");
    std::os::unix::fs::symlink(
        "../../../../bus/pci/devices/0000:3b:00.3",
        devs.join("0000:3b:00.3"),
    )
    .unwrap();
    env.add(claim(
        "vm",
        UID1,
        VF,
        passthrough_config("FromClass"),
        false,
    ));
    let (running, stop) = env.start().await;
    let (err, _) = prepare(&running.dra_socket, "vm", UID1).await;
    assert!(
        err.contains("0000:3b:00.3, in its IOMMU group 41")
            && err.contains("host driver mlx5_core"),
        "{err}"
    );
    assert!(writes(&env.kernel).is_empty());
    assert_eq!(env.kernel.driver(VF_ADDR).as_deref(), Some("mlx5_core"));
    assert!(env.checkpoint().rebinds.is_empty());
    stop.send(()).unwrap();
    running.wait().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_function_whose_group_node_is_open_is_not_given_back() {
    let env = Env::new();
    env.add(claim(
        "vm",
        UID1,
        VF,
        passthrough_config("FromClass"),
        false,
    ));
    let (running, stop) = env.start().await;
    let sock = running.dra_socket.clone();
    assert_eq!(prepare(&sock, "vm", UID1).await.0, "");
    // A VM's process holds the group open.
    let fd = env.base.join("proc/4242/fd");
    fs::create_dir_all(&fd).unwrap();
    fs::write(env.base.join("proc/4242/comm"), "qemu-kvm\n").unwrap();
    // Another VM's process has only the container node open: not this VF's.
    fs::create_dir_all(env.base.join("proc/77/fd")).unwrap();
    std::os::unix::fs::symlink("/dev/vfio/vfio", env.base.join("proc/77/fd/3")).unwrap();
    std::os::unix::fs::symlink("/dev/vfio/41", fd.join("17")).unwrap();
    let err = unprepare(&sock, "vm", UID1).await;
    assert!(
        err.ends_with(
            "PCI function 0000:3b:00.2 is in use: pid 4242 (qemu-kvm) has /dev/vfio/41 open; not \
             unbinding it from vfio-pci (the kernel would wait for it); stop \
             that process, the kubelet retries"
        ),
        "{err}"
    );
    assert_eq!(env.kernel.driver(VF_ADDR).as_deref(), Some("vfio-pci"));
    assert!(env.checkpoint().claims.contains_key(UID1), "still prepared");
    fs::remove_file(fd.join("17")).unwrap();
    assert_eq!(unprepare(&sock, "vm", UID1).await, "");
    assert_eq!(env.kernel.driver(VF_ADDR).as_deref(), Some("mlx5_core"));
    stop.send(()).unwrap();
    running.wait().await;
}

/// The driver dies right after unbinding the VF from its driver: the
/// checkpoint has the intent, and the next start gives the VF back; so
/// does the next prepare of the claim, when the start could not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_unbind_and_bind_is_undone_at_the_next_start() {
    let env = Env::new();
    env.add(claim(
        "vm",
        UID1,
        VF,
        passthrough_config("FromClass"),
        false,
    ));
    *env.kernel.crash_after.lock().unwrap() = Some("/sys/bus/pci/drivers/mlx5_core/unbind".into());
    let (running, stop) = env.start().await;
    let (err, _) = prepare(&running.dra_socket, "vm", UID1).await;
    assert!(err.contains("panic"), "{err}");
    stop.send(()).unwrap();
    running.wait().await;
    // Left unbound, the intent recorded; the claim not prepared.
    assert_eq!(env.kernel.driver(VF_ADDR), None);
    assert_eq!(env.kernel.override_of(VF_ADDR), "vfio-pci\n");
    let cp = env.checkpoint();
    assert!(cp.claims.is_empty());
    let r = &cp.rebinds[VF_ADDR];
    assert_eq!(
        (r.original.as_deref(), r.step),
        (Some("mlx5_core"), Step::Binding)
    );

    *env.kernel.crash_after.lock().unwrap() = None;
    writes(&env.kernel);
    let (running, stop) = env.start().await;
    assert_eq!(env.kernel.driver(VF_ADDR).as_deref(), Some("mlx5_core"));
    assert_eq!(env.kernel.override_of(VF_ADDR), "(null)\n");
    assert!(env.checkpoint().rebinds.is_empty());
    assert_eq!(
        writes(&env.kernel),
        [
            w("/sys/bus/pci/devices/0000:3b:00.2/driver_override", "\n"),
            w("/sys/bus/pci/drivers_probe", VF_ADDR),
        ]
    );
    stop.send(()).unwrap();
    running.wait().await;

    // A crash after the probe (on vfio-pci, not checkpointed prepared),
    // and a start that cannot give it back (the driver's unbind fails):
    // the next prepare of the claim does, then prepares it.
    *env.kernel.crash_after.lock().unwrap() = Some("/sys/bus/pci/drivers_probe".into());
    let (running, stop) = env.start().await;
    assert!(
        prepare(&running.dra_socket, "vm", UID1)
            .await
            .0
            .contains("panic")
    );
    stop.send(()).unwrap();
    running.wait().await;
    assert_eq!(env.kernel.driver(VF_ADDR).as_deref(), Some("vfio-pci"));
    *env.kernel.crash_after.lock().unwrap() = None;
    let unbind = env.base.join("sys/bus/pci/drivers/vfio-pci/unbind");
    fs::remove_file(&unbind).unwrap();
    let (running, stop) = env.start().await;
    assert_eq!(env.checkpoint().rebinds[VF_ADDR].step, Step::Restoring);
    fs::write(&unbind, "").unwrap();
    let (err, ids) = prepare(&running.dra_socket, "vm", UID1).await;
    assert_eq!(err, "");
    assert_eq!(ids, [format!("k8s.{DRIVER}/claim={UID1}-{VF}")]);
    let r = &env.checkpoint().rebinds[VF_ADDR];
    assert_eq!(
        (r.original.as_deref(), r.step),
        (Some("mlx5_core"), Step::Bound)
    );
    assert_eq!(unprepare(&running.dra_socket, "vm", UID1).await, "");
    assert_eq!(env.kernel.driver(VF_ADDR).as_deref(), Some("mlx5_core"));
    stop.send(()).unwrap();
    running.wait().await;
}

/// The example opt-in class carries the configuration the tests use, and
/// the driver reads it.
#[test]
fn the_example_class_asks_for_vfio_pci() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy/kubernetes/examples/dra/deviceclasses.yaml");
    let text = fs::read_to_string(file).unwrap();
    let doc = text
        .split("\n---\n")
        .find(|d| d.contains("name: vf-passthrough.cdigen.io"))
        .unwrap();
    let class: k8s_openapi::api::resource::v1::DeviceClass = serde_saphyr::from_str(doc).unwrap();
    let opaque = class.spec.config.unwrap()[0].opaque.clone().unwrap();
    assert_eq!(opaque.driver, DRIVER);
    assert_eq!(
        opaque.parameters.0,
        passthrough_config("FromClass")[0]["opaque"]["parameters"]
    );
    let c = cdigen::dra::prepare::parse_config(&opaque.parameters.0).unwrap();
    assert_eq!(c.passthrough.as_deref(), Some("vfio-pci"));
}

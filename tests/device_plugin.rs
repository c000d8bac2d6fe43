//! `cdigen device-plugin` against a fake kubelet (tests/support/kubelet.rs)
//! on copies of fixture machines: registration and the kubelet's checks,
//! ListAndWatch, GetPreferredAllocation, Allocate and PreStartContainer,
//! kubelet restarts, hotplug and health changes under the running plugin,
//! the device-info files, user definitions that rename, turn off or break
//! a resource, and what the Rust CDI library makes of an Allocate
//! answer.
//!
//! Each test runs the real binary with `--source none`: the tree under it
//! is changed by hand and SIGHUP makes it look again (a full pass).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[path = "support/kubelet.rs"]
mod kubelet;
#[path = "support/machine.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use cdigen::deviceplugin::api::v1beta1::{Device, DevicePluginOptions, RegisterRequest};
use kubelet::FakeKubelet;
use serde_json::{Value, json};
use tonic::Code;

/// How long anything may take before a test gives up (generous: the
/// machines building this are shared).
const WAIT: Duration = Duration::from_secs(30);

/// How soon the plugin must register with a kubelet that (re)appeared.
const REGISTER_WITHIN: Duration = Duration::from_secs(5);

const VF: &str = "cdigen.io/vf";
const VFIO: &str = "cdigen.io/vfio";
const GPU: &str = "cdigen.io/nvidia";

/// The resources of the example machine registered: one per enabled
/// built-in generator that has devices there.
const EXAMPLE_RESOURCES: [&str; 6] = [
    "cdigen.io/amd-gpu",
    GPU,
    "cdigen.io/rdma",
    "cdigen.io/vdpa",
    VF,
    VFIO,
];

/// Those of enabled built-in generators that find no device there: not
/// registered.
const EXAMPLE_EMPTY: [&str; 5] = [
    "cdigen.io/drm",
    "cdigen.io/gaudi",
    "cdigen.io/intel-gpu",
    "cdigen.io/intel-npu",
    "cdigen.io/nvidia-imex",
];

/// The example machine's VFs.
const VFS: [&str; 4] = [
    "0000:3b:00.2",
    "0000:3b:00.3",
    "0000:3b:00.4",
    "0000:3b:00.5",
];

/// The example machine's A100 (MIG on).
const A100: &str = "GPU-6f1d3c2a-8b4e-4a7f-9c21-0d5e7b3a9f10";

/// The dgx-8gpu machine's GPUs by NUMA node (its README).
const DGX_NUMA0: [&str; 4] = [
    "GPU-bd55cda7-79ea-41fd-a0ae-840ebc3ea676",
    "GPU-4ff91c78-7bf9-4efd-ae71-9acc5b592350",
    "GPU-92db70b1-7aac-4fef-86ef-0ae807e1ecac",
    "GPU-28d6d6dc-8439-44c9-87b7-adf3a4e132a0",
];
const DGX_NUMA1: [&str; 4] = [
    "GPU-bdafccb3-3d7e-4795-ba25-947abde0a8c7",
    "GPU-50a60ef6-8938-4be8-bb06-a3048c2e656e",
    "GPU-16044fad-82e2-4a2c-9435-9141b3472e3f",
    "GPU-ce6345b9-b8fb-41c0-8208-8a82efa354d4",
];

/// The plugin over `tmp/root`, specs in `tmp/cdi`, device-info files in
/// `tmp/devinfo`, stderr to `tmp/log`.
struct Plugin {
    daemon: support::Daemon,
    plugin_dir: PathBuf,
}

impl std::ops::Deref for Plugin {
    type Target = support::Daemon;
    fn deref(&self) -> &support::Daemon {
        &self.daemon
    }
}

impl std::ops::DerefMut for Plugin {
    fn deref_mut(&mut self) -> &mut support::Daemon {
        &mut self.daemon
    }
}

impl Plugin {
    /// Starts the plugin with its sockets in `plugin_dir` and the pod
    /// resources socket at `pod_resources` (neither needs to exist yet).
    fn spawn_at(tmp: &Path, plugin_dir: &Path, pod_resources: &Path, extra: &[&str]) -> Plugin {
        Plugin::spawn_logged(tmp, plugin_dir, pod_resources, extra, tmp)
    }

    /// [`Plugin::spawn_at`] with its log in `log_dir` (two instances over
    /// one `tmp`).
    fn spawn_logged(
        tmp: &Path,
        plugin_dir: &Path,
        pod_resources: &Path,
        extra: &[&str],
        log_dir: &Path,
    ) -> Plugin {
        Plugin {
            daemon: support::Daemon::spawn(
                Plugin::command(tmp, plugin_dir, pod_resources, extra),
                log_dir,
            ),
            plugin_dir: plugin_dir.to_path_buf(),
        }
    }

    /// The command [`Plugin::spawn_at`] runs.
    fn command(tmp: &Path, plugin_dir: &Path, pod_resources: &Path, extra: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_cdigen"));
        cmd.current_dir(tmp)
            // Never the stub libnvidia-ml of a fixture's driver root.
            .env("CDIGEN_NO_NVML", "1")
            .args([
                "device-plugin",
                "--root",
                "root",
                "--output-dir",
                "cdi",
                "--devinfo-dir",
                "devinfo",
                "--source",
                "none",
                "--ready-file",
                "ready",
            ])
            .arg("--plugin-dir")
            .arg(plugin_dir)
            .arg("--pod-resources-socket")
            .arg(pod_resources)
            .args(extra)
            .env_remove("CDIGEN_ROOT")
            .env_remove("CDIGEN_DRIVER_ROOT")
            .env_remove("CDIGEN_TEMPLATES")
            .env_remove("CDIGEN_PLUGIN_DIR")
            .env_remove("CDIGEN_DEVINFO_DIR")
            .env_remove("JOURNAL_STREAM")
            .env_remove("NOTIFY_SOCKET")
            .env_remove("CDIGEN_POD_UID")
            .env_remove("GLIBC_TUNABLES")
            .env("RUST_LOG", "info")
            .env("CDIGEN_GENERATORS", "/nonexistent-cdigen-user-generators");
        cmd
    }

    /// Starts the plugin against `kubelet`.
    fn spawn(tmp: &Path, kubelet: &FakeKubelet, extra: &[&str]) -> Plugin {
        Plugin::spawn_at(tmp, &kubelet.dir, &kubelet.pod_resources, extra)
    }

    /// SIGHUP: a full pass (discovery, specs, inventory).
    fn hup(&self) {
        self.signal("HUP");
    }

    /// SIGTERM to the instance of pod `mine` while the instance of pod
    /// `other` serves: it must exit 0, its sockets gone, the other's all
    /// there (one per resource).
    fn stop_instance(mut self, mine: &str, other: &str) {
        self.signal("TERM");
        let code = self.wait_exit();
        assert_eq!(code, Some(0), "exit code after SIGTERM:\n{}", self.log());
        let left = our_sockets(&self.plugin_dir);
        assert!(!left.iter().any(|s| s.contains(mine)), "{left:?}");
        let others = left
            .iter()
            .filter(|s| s.ends_with(&format!("-{other}.sock")));
        assert_eq!(others.count(), EXAMPLE_RESOURCES.len(), "{left:?}");
    }

    /// SIGTERM: it must exit 0 and leave none of its sockets behind (the
    /// kubelet's stays).
    fn stop(mut self) {
        self.signal("TERM");
        let code = self.wait_exit();
        assert_eq!(code, Some(0), "exit code after SIGTERM:\n{}", self.log());
        assert_eq!(
            our_sockets(&self.plugin_dir),
            Vec::<String>::new(),
            "its sockets are removed on SIGTERM"
        );
        assert!(
            self.plugin_dir.join("kubelet.sock").exists(),
            "the kubelet's socket is not ours to remove"
        );
    }
}

/// The plugin sockets in `dir`.
fn our_sockets(dir: &Path) -> Vec<String> {
    support::visible_names(dir)
        .into_iter()
        .filter(|n| n.starts_with("cdigen-"))
        .collect()
}

/// (ID, health) of a list.
fn ids(devices: &[Device]) -> Vec<(String, String)> {
    devices
        .iter()
        .map(|d| (d.id.clone(), d.health.clone()))
        .collect()
}

/// `names`, each Healthy.
fn healthy(names: &[&str]) -> Vec<(String, String)> {
    names
        .iter()
        .map(|i| ((*i).to_string(), "Healthy".to_string()))
        .collect()
}

/// The NUMA nodes a list gives each ID.
fn numa(devices: &[Device]) -> BTreeMap<String, Vec<i64>> {
    devices
        .iter()
        .map(|d| {
            (
                d.id.clone(),
                d.topology
                    .as_ref()
                    .map(|t| t.nodes.iter().map(|n| n.id).collect())
                    .unwrap_or_default(),
            )
        })
        .collect()
}

/// The sorted visible files of `dir`.
fn files(dir: &Path) -> Vec<String> {
    support::visible_names(dir)
}

/// Waits until `ok` holds.
fn eventually(what: &str, ok: impl Fn() -> bool) {
    let end = Instant::now() + WAIT;
    while !ok() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until the plugin asked the pod resources API at least once more
/// than `before` times (a prune ran).
fn wait_prune(kubelet: &FakeKubelet, before: usize) {
    eventually("a pod resources List", || {
        kubelet.pod_resources_lists() > before
    });
}

/// The kubelet's socket path, as the plugin logs it.
fn kubelet_sock(dir: &Path) -> String {
    dir.join("kubelet.sock").display().to_string()
}

// --- Registration ---------------------------------------------------------

/// Started before the kubelet, the plugin says it waits; once the kubelet
/// is up, every resource registers within seconds, passing the kubelet's
/// checks, and the kubelet dials back and holds ListAndWatch. The fake
/// kubelet refuses what the real one refuses. Every device has its stable
/// ID and `all` is never advertised.
#[test]
fn registers_once_the_kubelet_appears_and_passes_its_checks() {
    let (tmp, _root) = support::machine("example");
    let dir = tmp.path().join("plugins");
    let pod_resources = tmp.path().join("pod-resources.sock");
    let plugin = Plugin::spawn_at(tmp.path(), &dir, &pod_resources, &[]);
    let sock = kubelet_sock(&dir);
    for r in EXAMPLE_RESOURCES {
        plugin.wait_log(&format!(
            " INFO {r}: waiting for the kubelet's socket {sock}\n"
        ));
    }
    // The specs are written before anything is advertised, and the
    // ready file (the specs are current) does not wait for the kubelet.
    assert!(tmp.path().join("cdi/cdigen.io-vf.yaml").is_file());
    eventually("the ready file", || tmp.path().join("ready").exists());

    let started = Instant::now();
    let kubelet = FakeKubelet::start(&dir);
    assert_eq!(kubelet.pod_resources, pod_resources);
    for r in EXAMPLE_RESOURCES {
        let p = kubelet.wait_for(r, REGISTER_WITHIN, |p| p.watching && !p.lists.is_empty());
        assert_eq!(p.registrations, 1, "{r}");
        assert_eq!(
            p.endpoint,
            format!("cdigen-{}.sock", r.replacen('/', "_", 1)),
            "{r}"
        );
        assert_eq!(
            p.options,
            Some(DevicePluginOptions {
                pre_start_required: true,
                get_preferred_allocation_available: true,
            }),
            "{r}"
        );
    }
    eprintln!(
        "all {} resources registered {:?} after the kubelet started",
        EXAMPLE_RESOURCES.len(),
        started.elapsed()
    );
    assert!(kubelet.refused().is_empty(), "{:?}", kubelet.refused());
    assert_eq!(
        our_sockets(&dir),
        [
            "cdigen-cdigen.io_amd-gpu.sock",
            "cdigen-cdigen.io_nvidia.sock",
            "cdigen-cdigen.io_rdma.sock",
            "cdigen-cdigen.io_vdpa.sock",
            "cdigen-cdigen.io_vf.sock",
            "cdigen-cdigen.io_vfio.sock",
        ]
    );

    // IDs: PCI addresses, MIG devices by parent UUID and placement (their
    // GPU is not offered whole beside them); never `all` (vfio's names are [pci, all], nvidia's
    // [index, uuid, all]).
    assert_eq!(ids(&kubelet.devices(VF)), healthy(&VFS));
    assert_eq!(ids(&kubelet.devices(VFIO)), healthy(&["0000:81:00.0"]));
    assert_eq!(
        ids(&kubelet.devices(GPU)),
        healthy(&[&format!("{A100}-mig-1-0"), &format!("{A100}-mig-2-0"),])
    );
    assert_eq!(
        ids(&kubelet.devices("cdigen.io/amd-gpu")),
        healthy(&["0000:03:00.0"])
    );
    assert_eq!(ids(&kubelet.devices("cdigen.io/vdpa")), healthy(&["vdpa0"]));
    // Generators without devices here are not registered (they would
    // show as 0 allocatable), and the log says why.
    for r in EXAMPLE_EMPTY {
        assert!(kubelet.plugin(r).is_none(), "{r} registered");
        plugin.wait_log(&format!(
            " INFO {r}: no device on this host: registered with the kubelet when one appears \
             (device_plugin.register_empty: true registers it now)\n"
        ));
    }
    for r in EXAMPLE_RESOURCES {
        assert!(
            kubelet.devices(r).iter().all(|d| d.id != "all"),
            "{r} advertises all"
        );
    }
    let err = kubelet.allocate(VFIO, &["all"]).unwrap_err();
    assert_eq!(
        err.message(),
        "resource cdigen.io/vfio: unknown device ID \"all\""
    );

    // The fake refuses what the kubelet refuses, and says why.
    let request = |version: &str, endpoint: &str, resource: &str| RegisterRequest {
        version: version.into(),
        endpoint: endpoint.into(),
        resource_name: resource.into(),
        options: Some(DevicePluginOptions::default()),
    };
    let stale = dir.join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    fs::write(dir.join("plain-file"), "").unwrap();
    let vf_sock = "cdigen-cdigen.io_vf.sock";
    let cases = [
        (
            request("v1", vf_sock, VF),
            "unsupported version \"v1\"".to_string(),
        ),
        (
            request("v1beta1", vf_sock, "vf"),
            "invalid resource name \"vf\"".to_string(),
        ),
        (
            request("v1beta1", vf_sock, "kubernetes.io/vf"),
            "invalid resource name \"kubernetes.io/vf\"".to_string(),
        ),
        (
            request("v1beta1", "../plugins/x.sock", VF),
            "endpoint \"../plugins/x.sock\" is not a file name".to_string(),
        ),
        (
            request("v1beta1", "plain-file", VF),
            format!("no socket at {}", dir.join("plain-file").display()),
        ),
    ];
    for (req, why) in cases {
        let err = kubelet.register(req).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert_eq!(err.message(), why);
    }
    let err = kubelet
        .register(request("v1beta1", "stale.sock", VF))
        .unwrap_err();
    assert!(
        err.message()
            .starts_with(&format!("cannot dial {}", stale.display())),
        "a socket nobody serves is refused: {}",
        err.message()
    );
    assert_eq!(kubelet.refused().len(), 6);
    // None of that touched the plugin's registration.
    assert_eq!(kubelet.plugin(VF).unwrap().registrations, 1);
    fs::remove_file(&stale).unwrap();
    fs::remove_file(dir.join("plain-file")).unwrap();

    plugin.stop();
}

// --- Allocate -------------------------------------------------------------

/// Allocate answers with the CDI names and the per-request variables
/// (parsed and checked), PreStartContainer and GetPreferredAllocation are
/// served as advertised, refusals name the ID, and device-info files are
/// written on allocation only and removed once the kubelet no longer lists
/// the allocation.
#[test]
fn allocate_answers_cdi_names_request_env_and_keeps_device_info_to_live_allocations() {
    let (tmp, _root) = support::machine("example");
    let kubelet = FakeKubelet::start(&tmp.path().join("plugins"));
    let plugin = Plugin::spawn(tmp.path(), &kubelet, &[]);
    let vf = kubelet.devices(VF);
    assert_eq!(ids(&vf), healthy(&VFS));
    // The VFs sit on NUMA node 0.
    assert!(numa(&vf).values().all(|n| n == &[0]), "{:?}", numa(&vf));
    let devinfo = tmp.path().join("devinfo");
    assert_eq!(
        files(&devinfo),
        Vec::<String>::new(),
        "nothing before Allocate"
    );

    // GetPreferredAllocation: advertised, so the kubelet asks.
    let pick = kubelet
        .preferred(VF, &VFS, &["0000:3b:00.5"], 2)
        .unwrap()
        .unwrap();
    assert_eq!(pick.len(), 2);
    assert_eq!(pick[0], "0000:3b:00.5", "must_include comes first");
    assert!(VFS.contains(&pick[1].as_str()) && pick[1] != pick[0]);

    // Two RDMA VFs.
    let r = kubelet
        .allocate(VF, &["0000:3b:00.2", "0000:3b:00.3"])
        .unwrap();
    let c = &r.container_responses[0];
    let names: Vec<&str> = c.cdi_devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(
        names,
        ["cdigen.io/vf=0000:3b:00.2", "cdigen.io/vf=0000:3b:00.3"]
    );
    assert!(
        c.devices.is_empty() && c.mounts.is_empty(),
        "no legacy edits unless asked"
    );
    let keys: BTreeSet<&str> = c.envs.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        BTreeSet::from(["PCIDEVICE_CDIGEN_IO_VF", "PCIDEVICE_CDIGEN_IO_VF_INFO"])
    );
    assert_eq!(
        c.envs["PCIDEVICE_CDIGEN_IO_VF"],
        "0000:3b:00.2,0000:3b:00.3"
    );
    let info: Value = serde_json::from_str(&c.envs["PCIDEVICE_CDIGEN_IO_VF_INFO"]).unwrap();
    for n in [2, 3] {
        let addr = format!("0000:3b:00.{n}");
        assert_eq!(
            info[&addr],
            json!({
                "generic": {"deviceID": addr},
                "rdma": {
                    "uverbs": format!("/dev/infiniband/uverbs{n}"),
                    "umad": format!("/dev/infiniband/umad{n}"),
                    "issm": format!("/dev/infiniband/issm{n}"),
                    "rdma_cm": "/dev/infiniband/rdma_cm",
                    "rdma_dev": format!("mlx5_{n}"),
                },
            }),
            "{addr}"
        );
    }
    assert_eq!(info.as_object().unwrap().len(), 2);
    assert!(matches!(
        kubelet.pre_start(VF, &["0000:3b:00.2", "0000:3b:00.3"]),
        Some(Ok(()))
    ));

    // The VF on vfio-pci: a network device (PCIDEVICE_*), with the VFIO
    // nodes its CDI device gives (legacy mode: the container and group).
    let r = kubelet.allocate(VF, &["0000:3b:00.4"]).unwrap();
    let c = &r.container_responses[0];
    assert_eq!(c.envs["PCIDEVICE_CDIGEN_IO_VF"], "0000:3b:00.4");
    let info: Value = serde_json::from_str(&c.envs["PCIDEVICE_CDIGEN_IO_VF_INFO"]).unwrap();
    assert_eq!(
        info,
        json!({"0000:3b:00.4": {
            "generic": {"deviceID": "0000:3b:00.4"},
            "vfio": {"mount": "/dev/vfio/vfio", "dev-mount": "/dev/vfio/43"},
        }})
    );
    assert!(!c.envs.contains_key("PCI_RESOURCE_CDIGEN_IO_VF"));

    // VFIO passthrough (the NVMe): PCI_RESOURCE_<RESOURCE> only.
    let r = kubelet.allocate(VFIO, &["0000:81:00.0"]).unwrap();
    let c = &r.container_responses[0];
    assert_eq!(c.cdi_devices[0].name, "cdigen.io/vfio=0000:81:00.0");
    assert_eq!(
        c.envs,
        [(
            "PCI_RESOURCE_CDIGEN_IO_VFIO".to_string(),
            "0000:81:00.0".to_string()
        )]
        .into()
    );

    // MIG devices by the only name they have; their GPU, split into
    // them, is not offered whole.
    let r = kubelet
        .allocate(
            GPU,
            &[&format!("{A100}-mig-1-0"), &format!("{A100}-mig-2-0")],
        )
        .unwrap();
    let names: Vec<&str> = r.container_responses[0]
        .cdi_devices
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(names, ["nvidia.com/gpu=0:0", "nvidia.com/gpu=0:1"]);
    assert!(r.container_responses[0].envs.is_empty());

    // Refusals name the ID, quoted and escaped when unknown.
    for (ids, message) in [
        (
            vec!["0000:3b:00.2", "0000:3b:00.9"],
            "resource cdigen.io/vf: unknown device ID \"0000:3b:00.9\"",
        ),
        (
            vec!["bad\nid"],
            "resource cdigen.io/vf: unknown device ID \"bad\\nid\"",
        ),
    ] {
        let err = kubelet.allocate(VF, &ids).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert_eq!(err.message(), message);
        let err = kubelet.pre_start(VF, &ids).unwrap().unwrap_err();
        assert_eq!(err.code(), Code::FailedPrecondition);
        assert_eq!(err.message(), message);
    }

    // Device-info files of what was allocated, as `generate` writes them.
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/example/expected/devinfo");
    let file = |id: &str| format!("cdigen.io-vf-{id}-device.json");
    assert_eq!(
        files(&devinfo),
        ["0000:3b:00.2", "0000:3b:00.3", "0000:3b:00.4"].map(file)
    );
    for id in ["0000:3b:00.2", "0000:3b:00.3", "0000:3b:00.4"] {
        let text = fs::read_to_string(devinfo.join(file(id))).unwrap();
        assert_eq!(text, fs::read_to_string(golden.join(file(id))).unwrap());
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["type"], "pci");
        assert_eq!(v["version"], "1.1.0");
        assert_eq!(v["pci"]["pci-address"], id);
    }

    // The kubelet lists all three: a prune keeps them.
    kubelet.set_live(&[
        (VF, "0000:3b:00.2"),
        (VF, "0000:3b:00.3"),
        (VF, "0000:3b:00.4"),
        (VFIO, "0000:81:00.0"),
    ]);
    let before = kubelet.pod_resources_lists();
    plugin.hup();
    wait_prune(&kubelet, before);
    // Then only one: the next prune removes the other two files.
    kubelet.set_live(&[(VF, "0000:3b:00.2")]);
    plugin.hup();
    eventually("the released VFs' device-info files removed", || {
        files(&devinfo) == [file("0000:3b:00.2")]
    });
    // And none.
    kubelet.set_live(&[]);
    plugin.hup();
    eventually("the last device-info file removed", || {
        files(&devinfo).is_empty()
    });
    plugin.stop();
}

/// A plugin killed (`kill -9`: a rollout, an OOM kill) restarts knowing
/// nothing in memory: while the pod resources API is absent, then failing,
/// every device-info file of a device handed out stays, and the log says
/// why; once the API answers, the files of devices no pod holds go, but
/// not that of a device handed out moments before the kill (the kubelet
/// may not list it yet).
#[test]
fn a_restart_keeps_device_info_files_until_the_kubelet_says_they_are_released() {
    let (tmp, _root) = support::machine("example");
    let kubelet = FakeKubelet::start(&tmp.path().join("plugins"));
    let plugin = Plugin::spawn(tmp.path(), &kubelet, &[]);
    assert_eq!(ids(&kubelet.devices(VF)), healthy(&VFS));
    kubelet
        .allocate(VF, &["0000:3b:00.2", "0000:3b:00.3"])
        .unwrap();
    kubelet.set_live(&[(VF, "0000:3b:00.2"), (VF, "0000:3b:00.3")]);
    let before = kubelet.pod_resources_lists();
    plugin.hup();
    wait_prune(&kubelet, before);
    // Handed out, not listed yet: then killed.
    kubelet.allocate(VF, &["0000:3b:00.4"]).unwrap();
    let devinfo = tmp.path().join("devinfo");
    let file = |id: &str| format!("cdigen.io-vf-{id}-device.json");
    let all = ["0000:3b:00.2", "0000:3b:00.3", "0000:3b:00.4"].map(file);
    assert_eq!(files(&devinfo), all);
    let kill = |mut plugin: Plugin| {
        plugin.signal("KILL");
        plugin.wait_exit();
    };
    kill(plugin);
    // The next process registered and serving (before a signal reaches it).
    let registered = |n: usize| {
        kubelet.wait_for(VF, Duration::from_secs(20), |p| {
            p.registrations > n && p.watching
        });
    };
    let regs = kubelet.plugin(VF).unwrap().registrations;

    // No pod resources socket at all.
    let absent = tmp.path().join("absent.sock");
    let plugin = Plugin::spawn_at(tmp.path(), &kubelet.dir, &absent, &[]);
    registered(regs);
    plugin.hup();
    thread::sleep(Duration::from_millis(500));
    assert_eq!(files(&devinfo), all, "{}", plugin.log());
    plugin.wait_log(&format!(
        "{}: no pod resources socket; not removing any device-info file until it answers",
        absent.display()
    ));
    let regs = kubelet.plugin(VF).unwrap().registrations;
    kill(plugin);

    // The kubelet's List failing, and listing nothing once it answers.
    kubelet.set_list_failing(true);
    kubelet.set_live(&[]);
    let plugin = Plugin::spawn(tmp.path(), &kubelet, &[]);
    registered(regs);
    plugin.wait_log(
        "List failed: the kubelet is not ready; not removing any device-info file until it answers",
    );
    let before = kubelet.pod_resources_lists();
    plugin.hup();
    wait_prune(&kubelet, before);
    assert_eq!(files(&devinfo), all, "{}", plugin.log());
    kubelet.set_list_failing(false);
    plugin.hup();
    eventually("the released VFs' device-info files removed", || {
        files(&devinfo) == [file("0000:3b:00.4")]
    });
    let log = plugin.wait_log("the pod resources API answers again");
    assert!(
        log.contains(
            "3 devices handed out before this start: held until the kubelet no longer lists them"
        ),
        "{log}"
    );
    plugin.stop();
}

// --- Rolling update -------------------------------------------------------

const POD_A: &str = "11111111-aaaa-4aaa-8aaa-aaaaaaaaaaaa";
const POD_B: &str = "22222222-bbbb-4bbb-8bbb-bbbbbbbbbbbb";

/// The instance of pod `uid` over `tmp`, its log in `tmp/<uid>/log`.
fn spawn_pod(tmp: &Path, kubelet: &FakeKubelet, uid: &str) -> Plugin {
    let log_dir = tmp.join(uid);
    fs::create_dir_all(&log_dir).unwrap();
    Plugin::spawn_logged(
        tmp,
        &kubelet.dir,
        &kubelet.pod_resources,
        &["--pod-uid", uid],
        &log_dir,
    )
}

/// The devices the record on disk (`.cdigen-allocated`) holds: (resource, ID).
fn recorded(devinfo: &Path) -> Vec<(String, String)> {
    cdigen::deviceplugin::held::load(devinfo)
        .unwrap()
        .unwrap_or_default()
        .into_keys()
        .collect()
}

/// A rolling update: the new pod B registers while the old pod A serves,
/// each on its own socket; the kubelet sends Allocate to B, and what A
/// handed out stays held (its device-info file and its record); Allocates
/// on both at once never lose an entry of the record. When A stops, its
/// sockets go, the kubelet drops B too (as the real one does) and B
/// registers again and serves on.
#[test]
fn a_rolling_update_hands_over_without_losing_allocations() {
    let (tmp, _root) = support::machine("example");
    let kubelet = FakeKubelet::start(&tmp.path().join("plugins"));
    let devinfo = tmp.path().join("devinfo");
    let file = |id: &str| format!("cdigen.io-vf-{id}-device.json");
    let socket = |uid: &str| format!("cdigen-cdigen.io_vf-{uid}.sock");
    let vf = |id: &str| (VF.to_string(), id.to_string());
    let a = spawn_pod(tmp.path(), &kubelet, POD_A);
    kubelet.wait_for(VF, WAIT, |p| p.watching && p.endpoint == socket(POD_A));
    kubelet.allocate(VF, &[VFS[0]]).unwrap();
    assert_eq!(files(&devinfo), [file(VFS[0])]);

    let b = spawn_pod(tmp.path(), &kubelet, POD_B);
    let registered = kubelet.wait_for(VF, WAIT, |p| p.watching && p.endpoint == socket(POD_B));
    assert!(kubelet.dir.join(socket(POD_A)).exists(), "{}", a.log());
    // Allocate goes to B; the kubelet lists neither yet (within grace).
    kubelet.allocate(VF, &[VFS[1]]).unwrap();
    // At once on A's socket and B's.
    thread::scope(|s| {
        let on_a = s.spawn(|| kubelet.allocate_at(&socket(POD_A), &[VFS[2]]));
        let on_b = s.spawn(|| kubelet.allocate_at(&socket(POD_B), &[VFS[3]]));
        on_a.join().unwrap().unwrap();
        on_b.join().unwrap().unwrap();
    });
    let before = kubelet.pod_resources_lists();
    b.hup();
    a.hup();
    wait_prune(&kubelet, before + 1);
    assert_eq!(files(&devinfo), VFS.map(file), "{}", b.log());
    assert_eq!(recorded(&devinfo), VFS.map(vf));

    // A stops: only its sockets go; B is dropped by the kubelet and
    // registers again.
    a.stop_instance(POD_A, POD_B);
    let p = kubelet.wait_for(VF, WAIT, |p| {
        p.registrations > registered.registrations && p.watching
    });
    assert_eq!(p.endpoint, socket(POD_B));
    assert_eq!(
        p.disconnects, 1,
        "the fake kubelet dropped B as the real one does"
    );
    b.wait_log("the kubelet closed our ListAndWatch stream: registering again");
    assert!(kubelet.allocate(VF, &[VFS[0]]).is_ok());
    kubelet.set_live(&[(VF, VFS[0]), (VF, VFS[1])]);
    let before = kubelet.pod_resources_lists();
    b.hup();
    wait_prune(&kubelet, before);
    // Within grace, the two never listed stay too.
    assert_eq!(files(&devinfo), VFS.map(file), "{}", b.log());
    assert_eq!(recorded(&devinfo), VFS.map(vf));
    b.stop();
}

/// A pod UID names files: anything else is refused before anything is
/// served or written, by both commands.
#[test]
fn a_pod_uid_that_is_not_a_uid_is_refused() {
    let (tmp, _root) = support::machine("example");
    let common = [
        "--root",
        "root",
        "--output-dir",
        "cdi",
        "--source",
        "none",
        "--plugin-dir",
        "pd",
        "--pod-uid",
        "../x",
    ];
    for command in [
        &["device-plugin"][..],
        &["dra-driver", "--node", "n", "--registry-dir", "rd"],
    ] {
        let args: Vec<&str> = command.iter().chain(&common).copied().collect();
        let (code, _, err) = support::cdigen(tmp.path(), &args);
        assert_eq!(code, 2, "{err}");
        assert_eq!(
            err.trim_end(),
            "cdigen: --pod-uid: pod UID \"../x\": not a UID (1 to 64 letters, digits and '-', as metadata.uid is)"
        );
        assert!(!tmp.path().join("pd").exists() && !tmp.path().join("cdi").exists());
    }
}

/// The plugin runs itself again, in place (the same process, arguments
/// and log), once, with one glibc allocator arena for its threads: the
/// environment's other tunables kept, a number of arenas the user gave
/// left as it is (cli::arena). glibc 2.36 cuts the variable at its first
/// `:` in the memory `/proc/PID/environ` shows (the program sees it
/// whole), so the value is checked there only when it is one tunable,
/// and from the debug line that announces the re-run.
#[cfg(target_env = "gnu")]
#[test]
fn the_plugin_runs_with_one_allocator_arena_unless_told_otherwise() {
    for (given, rerun) in [
        (None, Some("glibc.malloc.arena_max=1")),
        (
            Some("glibc.malloc.tcache_count=0"),
            Some("glibc.malloc.tcache_count=0:glibc.malloc.arena_max=1"),
        ),
        (Some("glibc.malloc.arena_max=2"), None),
    ] {
        let (tmp, _root) = support::machine("example");
        let dir = tmp.path().join("plugins");
        let sock = tmp.path().join("pod-resources.sock");
        let mut cmd = Plugin::command(tmp.path(), &dir, &sock, &[]);
        cmd.env("RUST_LOG", "info,cdigen::cli::arena=debug");
        if let Some(v) = given {
            cmd.env("GLIBC_TUNABLES", v);
        }
        let plugin = Plugin {
            daemon: support::Daemon::spawn(cmd, tmp.path()),
            plugin_dir: dir.clone(),
        };
        eventually("the ready file", || tmp.path().join("ready").exists());
        let first = rerun.or(given).and_then(|v| v.split(':').next()).unwrap();
        assert_eq!(
            plugin.environ("GLIBC_TUNABLES"),
            [first.as_bytes()],
            "given {given:?}"
        );
        let log = plugin.log();
        let reruns: Vec<&str> = log
            .lines()
            .filter_map(|l| l.split_once("running again with GLIBC_TUNABLES="))
            .map(|(_, v)| v)
            .collect();
        assert_eq!(
            reruns,
            rerun.into_iter().collect::<Vec<_>>(),
            "given {given:?}:\n{log}"
        );
        let cmdline = fs::read(format!("/proc/{}/cmdline", plugin.pid())).unwrap();
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        assert_eq!(
            args.get(1).copied(),
            Some(&b"device-plugin"[..]),
            "{args:?}"
        );
        // The servers' thread says so on its own time, after the ready
        // file or before it.
        eventually("the servers waiting for the kubelet", || {
            plugin.log().contains("waiting for the kubelet's socket")
        });
        let mut plugin = plugin;
        plugin.signal("TERM");
        assert_eq!(plugin.wait_exit(), Some(0), "{}", plugin.log());
    }
}

// --- Kubelet restarts -----------------------------------------------------

/// A kubelet restart (every socket deleted, kubelet.sock re-created): each
/// plugin serves a new socket and registers again within seconds, and its
/// new ListAndWatch starts with the full list. Twice.
/// Allocate over the gRPC interface, with a request as large as a client
/// may make it: bounded as a whole (the message, the container requests,
/// the IDs of all together), each refusal naming its bound and figure, the
/// plugin serving on; a device named twice is handed out once.
#[test]
fn allocate_is_bounded_as_a_whole_and_a_duplicate_device_counts_once() {
    use cdigen::deviceplugin::api::v1beta1::{AllocateRequest, ContainerAllocateRequest};
    use cdigen::deviceplugin::server::{MAX_CALL_IDS, MAX_CONTAINER_REQUESTS};

    let (tmp, _root) = support::machine("example");
    let kubelet = FakeKubelet::start(&tmp.path().join("plugins"));
    let plugin = Plugin::spawn(tmp.path(), &kubelet, &[]);
    assert_eq!(ids(&kubelet.devices(VF)), healthy(&VFS));
    let containers = |n: usize, per: &[&str]| AllocateRequest {
        container_requests: (0..n)
            .map(|_| ContainerAllocateRequest {
                devices_ids: per.iter().map(|s| (*s).to_string()).collect(),
            })
            .collect(),
    };

    // 250,000 container requests of one valid ID: 4 MiB, refused before
    // it is decoded.
    let huge = containers(250_000, &["0000:3b:00.2"]);
    let e = kubelet.allocate_raw(VF, huge).unwrap_err();
    assert_eq!(e.code(), Code::OutOfRange, "{e:?}");
    assert!(e.message().contains("message length too large"), "{e:?}");

    // Within the message size: too many container requests.
    let many = MAX_CONTAINER_REQUESTS + 1;
    let e = kubelet
        .allocate_raw(VF, containers(many, &["0000:3b:00.2"]))
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert_eq!(
        e.message(),
        format!("{many} container requests in one call; at most {MAX_CONTAINER_REQUESTS}")
    );

    // Each container request within its 4096, all together too many.
    let ids17: Vec<&str> = std::iter::repeat_n("0000:3b:00.2", 17).collect();
    let total = 17 * 250;
    assert!(total > MAX_CALL_IDS);
    let e = kubelet
        .allocate_raw(VF, containers(250, &ids17))
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert_eq!(
        e.message(),
        format!(
            "{total} device IDs in one call (all container requests together); at most {MAX_CALL_IDS}"
        )
    );
    let log = plugin.log();
    assert!(
        log.contains("Allocate refused: 4250 device IDs in one call"),
        "{log}"
    );
    assert_eq!(files(&tmp.path().join("devinfo")), Vec::<String>::new());

    // A device named twice in a container request and again in another:
    // each container gets it once, and it is held and written once.
    let r = kubelet
        .allocate_raw(
            VF,
            AllocateRequest {
                container_requests: vec![
                    ContainerAllocateRequest {
                        devices_ids: vec!["0000:3b:00.2".into(), "0000:3b:00.2".into()],
                    },
                    ContainerAllocateRequest {
                        devices_ids: vec!["0000:3b:00.2".into()],
                    },
                ],
            },
        )
        .unwrap();
    for c in &r.container_responses {
        let names: Vec<&str> = c.cdi_devices.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["cdigen.io/vf=0000:3b:00.2"]);
        assert_eq!(c.envs["PCIDEVICE_CDIGEN_IO_VF"], "0000:3b:00.2");
    }
    assert_eq!(r.container_responses.len(), 2);
    let log = plugin.log();
    assert!(
        log.contains("cdigen.io/vf: allocated 0000:3b:00.2\n"),
        "{log}"
    );
    // Still serving after the refusals.
    assert!(kubelet.allocate(VF, &["0000:3b:00.3"]).is_ok());
    plugin.stop();
}

/// A second device plugin on the same plugin directory refuses to start,
/// naming the lock file and the first one's PID, instead of fighting it
/// over the sockets (each re-registering as the other replaced its
/// socket); the first serves on, registered once.
#[test]
fn a_second_plugin_on_the_directory_refuses_to_start() {
    let (tmp, _root) = support::machine("example");
    let kubelet = FakeKubelet::start(&tmp.path().join("plugins"));
    let first = Plugin::spawn(tmp.path(), &kubelet, &[]);
    assert_eq!(ids(&kubelet.devices(VF)), healthy(&VFS));
    let registrations = kubelet.plugin(VF).unwrap().registrations;
    let socket = kubelet.dir.join("cdigen-cdigen.io_vf.sock");
    let identity = |p: &Path| {
        use std::os::unix::fs::MetadataExt as _;
        fs::symlink_metadata(p).map(|m| (m.dev(), m.ino())).ok()
    };
    let before = identity(&socket);
    assert!(before.is_some());

    let (tmp2, _root2) = support::machine("example");
    let mut second = Plugin::spawn(tmp2.path(), &kubelet, &[]);
    let code = second.wait_exit();
    let log = second.log();
    let lock = kubelet.dir.join(".cdigen-device-plugin.lock");
    assert_ne!(code, Some(0), "{log}");
    assert!(
        log.contains(&format!(
            "{} is held by PID {}: another instance serves this directory",
            lock.display(),
            first.pid()
        )),
        "{log}"
    );
    // The first: its socket untouched, not registered again, serving.
    thread::sleep(Duration::from_millis(1000));
    assert_eq!(identity(&socket), before);
    assert_eq!(kubelet.plugin(VF).unwrap().registrations, registrations);
    assert!(kubelet.allocate(VF, &["0000:3b:00.2"]).is_ok());
    assert!(
        !first.log().contains("registering again"),
        "{}",
        first.log()
    );
    first.stop();
}

/// The kubelet's restart removes the sockets of its directory, not other
/// files: the lock stays, so a second plugin started after it still
/// refuses.
#[test]
fn the_instance_lock_outlives_a_kubelet_restart() {
    let (tmp, _root) = support::machine("example");
    let mut kubelet = FakeKubelet::start(&tmp.path().join("plugins"));
    let first = Plugin::spawn(tmp.path(), &kubelet, &[]);
    assert_eq!(ids(&kubelet.devices(VF)), healthy(&VFS));
    let restarted = kubelet.restart();
    kubelet.wait_for(VF, REGISTER_WITHIN, |p| {
        p.registrations == 2 && p.lists.last().is_some_and(|(t, _)| *t >= restarted)
    });
    let lock = kubelet.dir.join(".cdigen-device-plugin.lock");
    assert!(lock.is_file(), "{}", first.log());
    let (tmp2, _root2) = support::machine("example");
    let mut second = Plugin::spawn(tmp2.path(), &kubelet, &[]);
    let code = second.wait_exit();
    let log = second.log();
    assert_ne!(code, Some(0), "{log}");
    assert!(
        log.contains(&format!(
            "{} is held by PID {}",
            lock.display(),
            first.pid()
        )),
        "{log}"
    );
    first.stop();
}

#[test]
fn a_kubelet_restart_is_followed_by_registration_and_the_full_list() {
    let (tmp, _root) = support::machine("example");
    let mut kubelet = FakeKubelet::start(&tmp.path().join("plugins"));
    let plugin = Plugin::spawn(tmp.path(), &kubelet, &[]);
    let mut full = BTreeMap::new();
    for r in EXAMPLE_RESOURCES {
        full.insert(r, ids(&kubelet.devices(r)));
    }
    for round in 1..=2 {
        // The restart deletes every file of the directory (checked by
        // the fake as it does so: a plugin quick to notice may have
        // created its sockets again by the time this line runs).
        let restarted = kubelet.restart();
        let mut slowest = Duration::ZERO;
        for r in EXAMPLE_RESOURCES {
            let p = kubelet.wait_for(r, REGISTER_WITHIN, |p| {
                p.registrations == round + 1
                    && p.watching
                    && p.lists.last().is_some_and(|(t, _)| *t >= restarted)
            });
            slowest = slowest.max(p.registered_at.unwrap() - restarted);
            let lists = kubelet.lists_since(r, restarted);
            assert_eq!(
                ids(&lists[0]),
                full[r],
                "{r}: the new stream starts with the full list"
            );
        }
        eprintln!("kubelet restart {round}: every resource registered again within {slowest:?}");
        assert_eq!(our_sockets(&kubelet.dir).len(), EXAMPLE_RESOURCES.len());
        // The new connection serves.
        let r = kubelet.allocate(VF, &["0000:3b:00.2"]).unwrap();
        assert_eq!(
            r.container_responses[0].cdi_devices[0].name,
            "cdigen.io/vf=0000:3b:00.2"
        );
    }
    assert!(kubelet.refused().is_empty(), "{:?}", kubelet.refused());
    plugin.wait_log("registering again");
    plugin.stop();
}

/// A kubelet restart seen only in its socket, re-created (on ext4 with
/// the inode number of the old one, which the restart freed): the plugin
/// registers again.
#[test]
fn a_restart_that_reuses_the_kubelet_sockets_inode_is_seen() {
    let (tmp, _root) = support::machine("example");
    let mut kubelet = FakeKubelet::start(&tmp.path().join("plugins"));
    let plugin = Plugin::spawn(tmp.path(), &kubelet, &[]);
    assert_eq!(ids(&kubelet.devices(VF)), healthy(&VFS));
    // The plugin polls every 200 ms: wait until it has seen the socket.
    thread::sleep(Duration::from_millis(400));
    let (restarted, reused) = kubelet.restart_socket_only();
    eprintln!("the new kubelet.sock reused the old one's inode: {reused}");
    let p = kubelet.wait_for(VF, REGISTER_WITHIN, |p| {
        p.registrations == 2 && p.watching && p.lists.last().is_some_and(|(t, _)| *t >= restarted)
    });
    assert_eq!(ids(&p.lists.last().unwrap().1), healthy(&VFS));
    plugin.wait_log("was re-created (kubelet restart): registering again");
    plugin.stop();
}

// --- Hotplug and health ---------------------------------------------------

/// Hides a VF from sysfs (its PCI bus entry and the PF's `virtfn` link),
/// as its removal does; returns a function that puts it back.
fn unplug_vf(root: &Path, addr: &str, virtfn: &str) -> impl FnOnce() {
    let aside = root.parent().unwrap().join(format!("aside-{addr}"));
    fs::create_dir(&aside).unwrap();
    let pf = root.join("sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0");
    let links = [
        (
            root.join("sys/bus/pci/devices").join(addr),
            aside.join("bus"),
        ),
        (pf.join(virtfn), aside.join("virtfn")),
    ];
    for (from, to) in &links {
        fs::rename(from, to).unwrap();
    }
    move || {
        for (from, to) in &links {
            fs::rename(to, from).unwrap();
        }
        fs::remove_dir(&aside).unwrap();
    }
}

/// The VFs' list through hotplug and health changes under the running
/// plugin: a VF removed from sysfs leaves the list and comes back; a node
/// renumbered in /dev makes its VF Unhealthy (Allocate and
/// PreStartContainer refuse it, naming it) until restored; a VF that
/// vanishes while allocated stays, Unhealthy, until the kubelet releases
/// it.
#[test]
fn hotplug_and_health_changes_reach_list_and_watch() {
    let (tmp, root) = support::machine("example");
    let kubelet = FakeKubelet::start(&tmp.path().join("plugins"));
    let plugin = Plugin::spawn(tmp.path(), &kubelet, &[]);
    assert_eq!(ids(&kubelet.devices(VF)), healthy(&VFS));
    let want = |l: Vec<(String, String)>| move |d: &[Device]| ids(d) == l;

    // A VF goes away, then comes back.
    let replug = unplug_vf(&root, "0000:3b:00.3", "virtfn1");
    plugin.hup();
    kubelet.wait_for_list(
        VF,
        WAIT,
        want(healthy(&["0000:3b:00.2", "0000:3b:00.4", "0000:3b:00.5"])),
    );
    assert!(
        !fs::read_to_string(tmp.path().join("cdi/cdigen.io-vf.yaml"))
            .unwrap()
            .contains("0000:3b:00.3"),
        "the spec follows"
    );
    replug();
    plugin.hup();
    kubelet.wait_for_list(VF, WAIT, want(healthy(&VFS)));

    // uverbs3's node has other numbers than the kernel's: Unhealthy.
    let manifest = support::edit_manifest(&root, |l| {
        Some(if l.starts_with("/dev/infiniband/uverbs3 ") {
            l.replace("231:195", "231:199")
        } else {
            l.to_string()
        })
    });
    plugin.hup();
    let mut sick = healthy(&VFS);
    sick[1].1 = "Unhealthy".into();
    kubelet.wait_for_list(VF, WAIT, want(sick));
    let why = "resource cdigen.io/vf: device 0000:3b:00.3 is unhealthy: \
               /dev/infiniband/uverbs3 is 231:199, the kernel says 231:195";
    let err = kubelet.allocate(VF, &["0000:3b:00.3"]).unwrap_err();
    assert_eq!((err.code(), err.message()), (Code::InvalidArgument, why));
    let err = kubelet
        .pre_start(VF, &["0000:3b:00.3"])
        .unwrap()
        .unwrap_err();
    assert_eq!((err.code(), err.message()), (Code::FailedPrecondition, why));
    fs::write(root.join("dev.manifest"), &manifest).unwrap();
    plugin.hup();
    kubelet.wait_for_list(VF, WAIT, want(healthy(&VFS)));
    kubelet.allocate(VF, &["0000:3b:00.3"]).unwrap();

    // A VF vanishes while allocated: listed Unhealthy, not dropped.
    kubelet.allocate(VF, &["0000:3b:00.2"]).unwrap();
    let replug = unplug_vf(&root, "0000:3b:00.2", "virtfn0");
    plugin.hup();
    let mut gone = healthy(&VFS);
    gone[0].1 = "Unhealthy".into();
    kubelet.wait_for_list(VF, WAIT, want(gone.clone()));
    let why = "resource cdigen.io/vf: device 0000:3b:00.2 is unhealthy: \
               gone from the host while allocated";
    let err = kubelet.allocate(VF, &["0000:3b:00.2"]).unwrap_err();
    assert_eq!((err.code(), err.message()), (Code::InvalidArgument, why));
    let err = kubelet
        .pre_start(VF, &["0000:3b:00.2"])
        .unwrap()
        .unwrap_err();
    assert_eq!((err.code(), err.message()), (Code::FailedPrecondition, why));
    let devinfo = tmp.path().join("devinfo");
    let file = "cdigen.io-vf-0000:3b:00.2-device.json";
    assert!(
        devinfo.join(file).is_file(),
        "its device-info file stays while held"
    );

    // The kubelet lists it (a prune sees that), then releases it: its
    // device-info file goes at the next prune, the device at the next pass.
    kubelet.set_live(&[(VF, "0000:3b:00.2"), (VF, "0000:3b:00.3")]);
    let before = kubelet.pod_resources_lists();
    plugin.hup();
    wait_prune(&kubelet, before);
    kubelet.set_live(&[(VF, "0000:3b:00.3")]);
    plugin.hup();
    eventually("the released VF's device-info file removed", || {
        !devinfo.join(file).exists()
    });
    plugin.hup();
    kubelet.wait_for_list(
        VF,
        WAIT,
        want(healthy(&["0000:3b:00.3", "0000:3b:00.4", "0000:3b:00.5"])),
    );
    // Back: Healthy again, allocatable.
    replug();
    plugin.hup();
    kubelet.wait_for_list(VF, WAIT, want(healthy(&VFS)));
    kubelet.allocate(VF, &["0000:3b:00.2"]).unwrap();
    // All of it over the one ListAndWatch stream, held throughout.
    let p = kubelet.plugin(VF).unwrap();
    assert_eq!(p.registrations, 1);
    assert!(p.watching);
    assert!(p.lists.len() >= 8, "{} lists", p.lists.len());
    plugin.stop();
}

// --- dgx-8gpu: UUIDs, NUMA, legacy edits ------------------------------------

/// On the 8-GPU machine the IDs are the GPU UUIDs with their NUMA nodes;
/// GetPreferredAllocation (through the kubelet) keeps a request on one
/// NUMA node; Allocate names the UUID CDI device and, with
/// `--legacy-edits`, adds the device nodes, mounts and variables of the
/// spec; a GPU whose node leaves /dev is Unhealthy until it is back; a
/// GPU whose PCIe AER fatal counter rises after the start is Unhealthy
/// (the errors it had before are no problem).
#[test]
fn dgx_gpus_by_uuid_packed_by_numa_with_legacy_edits() {
    let (tmp, root) = support::machine("dgx-8gpu");
    let aer = root.join("sys/devices/pci0000:17/0000:17:01.1/0000:18:00.0/aer_dev_fatal");
    fs::write(&aer, "Surprise Down Error 3\nTOTAL_ERR_FATAL 3\n").unwrap();
    let kubelet = FakeKubelet::start(&tmp.path().join("plugins"));
    let plugin = Plugin::spawn(
        tmp.path(),
        &kubelet,
        &["--driver-root", support::DRIVER_ROOT, "--legacy-edits"],
    );
    let gpus = kubelet.devices(GPU);
    let all: Vec<&str> = DGX_NUMA0.iter().chain(&DGX_NUMA1).copied().collect();
    let mut sorted = all.clone();
    sorted.sort_unstable();
    assert_eq!(ids(&gpus), healthy(&sorted));
    // NVIDIA's XID events need NVML: without it (--no-nvml here), one
    // informational line, and the GPUs are served all the same.
    let log = plugin.wait_log("NVIDIA XID events are not watched");
    assert_eq!(
        log.matches("NVIDIA XID events are not watched: NVML not asked (--no-nvml)")
            .count(),
        1,
        "{log}"
    );
    let nodes = numa(&gpus);
    for id in DGX_NUMA0 {
        assert_eq!(nodes[id], [0], "{id}");
    }
    for id in DGX_NUMA1 {
        assert_eq!(nodes[id], [1], "{id}");
    }
    // The BMC's display (ast, 0000:03:00.0) is offered by no default
    // definition.
    assert!(kubelet.plugin("cdigen.io/drm").is_none());

    let node_of = |id: &str| nodes[id][0];
    let one_node = |pick: &[String]| {
        pick.iter()
            .map(|i| node_of(i))
            .collect::<BTreeSet<_>>()
            .len()
            == 1
    };
    // Four of eight: one whole NUMA node.
    let pick = kubelet.preferred(GPU, &all, &[], 4).unwrap().unwrap();
    assert_eq!(pick.len(), 4);
    assert!(one_node(&pick), "{pick:?}");
    // Two, one of them on node 1 already: the other on node 1 too.
    let pick = kubelet
        .preferred(GPU, &all, &[DGX_NUMA1[2]], 2)
        .unwrap()
        .unwrap();
    assert_eq!(pick[0], DGX_NUMA1[2]);
    assert_eq!(node_of(&pick[1]), 1, "{pick:?}");
    // Three of 2 + 3 available: the node that holds three.
    let avail = [
        DGX_NUMA0[0],
        DGX_NUMA0[1],
        DGX_NUMA1[0],
        DGX_NUMA1[1],
        DGX_NUMA1[3],
    ];
    let pick = kubelet.preferred(GPU, &avail, &[], 3).unwrap().unwrap();
    let got: BTreeSet<&str> = pick.iter().map(String::as_str).collect();
    assert_eq!(
        got,
        BTreeSet::from([DGX_NUMA1[0], DGX_NUMA1[1], DGX_NUMA1[3]])
    );
    // Five: a whole node plus one.
    let pick = kubelet.preferred(GPU, &all, &[], 5).unwrap().unwrap();
    assert_eq!(pick.len(), 5);
    let on0 = pick.iter().filter(|i| node_of(i) == 0).count();
    assert!(on0 == 4 || on0 == 1, "{pick:?}");

    // GPU 0 is 0000:18:00.0 with /dev/nvidia2.
    let r = kubelet.allocate(GPU, &[DGX_NUMA0[0]]).unwrap();
    let c = &r.container_responses[0];
    assert_eq!(c.cdi_devices.len(), 1);
    assert_eq!(
        c.cdi_devices[0].name,
        format!("nvidia.com/gpu={}", DGX_NUMA0[0])
    );
    let devices: Vec<(&str, &str, &str)> = c
        .devices
        .iter()
        .map(|d| {
            (
                d.container_path.as_str(),
                d.host_path.as_str(),
                d.permissions.as_str(),
            )
        })
        .collect();
    assert_eq!(
        devices,
        [
            ("/dev/nvidiactl", "/dev/nvidiactl", "rw"),
            ("/dev/nvidia-modeset", "/dev/nvidia-modeset", "rw"),
            ("/dev/nvidia-uvm", "/dev/nvidia-uvm", "rw"),
            ("/dev/nvidia-uvm-tools", "/dev/nvidia-uvm-tools", "rw"),
            ("/dev/nvidia2", "/dev/nvidia2", "rw"),
        ]
    );
    let libcuda = c
        .mounts
        .iter()
        .find(|m| m.container_path == "/usr/lib/x86_64-linux-gnu/libcuda.so.550.90.07")
        .expect("libcuda is mounted");
    assert_eq!(
        libcuda.host_path,
        "/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libcuda.so.550.90.07"
    );
    assert!(libcuda.read_only);
    assert!(
        c.mounts
            .iter()
            .all(|m| m.host_path.starts_with("/run/nvidia/driver/"))
    );

    // /dev/nvidia3 (GPU 2, 0000:3a:00.0) leaves /dev: Unhealthy.
    let manifest = support::edit_manifest(&root, |l| {
        (!l.starts_with("/dev/nvidia3 ")).then(|| l.to_string())
    });
    plugin.hup();
    let sick = kubelet.wait_for_list(GPU, WAIT, |d| d.iter().any(|d| d.health == "Unhealthy"));
    let unhealthy: Vec<&str> = sick
        .iter()
        .filter(|d| d.health == "Unhealthy")
        .map(|d| d.id.as_str())
        .collect();
    assert_eq!(unhealthy, [DGX_NUMA0[2]]);
    assert_eq!(sick.len(), 8, "still listed");
    let err = kubelet.allocate(GPU, &[DGX_NUMA0[2]]).unwrap_err();
    assert_eq!(
        err.message(),
        format!(
            "resource cdigen.io/nvidia: device {} is unhealthy: /dev/nvidia3 is missing",
            DGX_NUMA0[2]
        )
    );
    fs::write(root.join("dev.manifest"), manifest).unwrap();
    plugin.hup();
    kubelet.wait_for_list(GPU, WAIT, |d| ids(d) == healthy(&sorted));

    // GPU 0 (0000:18:00.0) has a fourth surprise down: Unhealthy.
    fs::write(&aer, "Surprise Down Error 4\nTOTAL_ERR_FATAL 4\n").unwrap();
    plugin.hup();
    kubelet.wait_for_list(GPU, WAIT, |d| {
        d.iter()
            .any(|d| d.id == DGX_NUMA0[0] && d.health == "Unhealthy")
    });
    let err = kubelet.allocate(GPU, &[DGX_NUMA0[0]]).unwrap_err();
    assert_eq!(
        err.message(),
        format!(
            "resource cdigen.io/nvidia: device {} is unhealthy: 1 new fatal PCIe error(s) \
             (Surprise Down Error +1): /sys/devices/pci0000:17/0000:17:01.1/0000:18:00.0/\
             aer_dev_fatal TOTAL_ERR_FATAL is 4, 3 when cdigen first read it",
            DGX_NUMA0[0]
        )
    );
    plugin.stop();
}

// --- User definitions -----------------------------------------------------

/// A copy of the built-in definition `name` in `dir`, with `extra` added.
fn user_definition(dir: &Path, name: &str, extra: &str) -> PathBuf {
    fs::create_dir_all(dir).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("generators/{name}.yaml"));
    let path = dir.join(format!("{name}.yaml"));
    let mut text = fs::read_to_string(src).unwrap();
    // Settings under `device_plugin:` join the definition's own.
    match extra.strip_prefix("device_plugin:\n") {
        Some(inner) if text.contains("\ndevice_plugin:\n") => {
            text = text.replacen(
                "\ndevice_plugin:\n",
                &format!("\ndevice_plugin:\n{inner}"),
                1,
            );
        }
        _ => text.push_str(extra),
    }
    fs::write(&path, text).unwrap();
    path
}

/// A resource whose generator finds no device is not registered (it
/// would show as 0 allocatable on every node), unless its definition says
/// `device_plugin.register_empty: true`; it is registered when its first
/// device appears (hotplug, the next pass), and stays registered, with
/// an empty list, when the last goes (the kubelet knows it already; an
/// empty list makes it 0 allocatable, as the kubelet would keep it until
/// its own restart anyway).
#[test]
fn a_resource_is_registered_once_it_has_devices_or_asks_to_be() {
    let (tmp, root) = support::machine("example");
    let gens = tmp.path().join("generators");
    user_definition(&gens, "drm", "device_plugin:\n  register_empty: true\n");
    let virtfns: Vec<String> = (0..VFS.len()).map(|i| format!("virtfn{i}")).collect();
    let replug: Vec<_> = VFS
        .iter()
        .zip(&virtfns)
        .map(|(a, v)| unplug_vf(&root, a, v))
        .collect();
    let kubelet = FakeKubelet::start(&tmp.path().join("plugins"));
    let plugin = Plugin::spawn(
        tmp.path(),
        &kubelet,
        &["--generators", gens.to_str().unwrap()],
    );
    // Asked for: registered, with an empty list.
    let drm = kubelet.wait_for("cdigen.io/drm", WAIT, |p| p.watching && !p.lists.is_empty());
    assert_eq!(drm.registrations, 1);
    assert_eq!(ids(&kubelet.devices("cdigen.io/drm")), healthy(&[]));
    plugin.wait_log(
        " INFO cdigen.io/vf: no device on this host: registered with the kubelet when one appears",
    );
    for r in [VF, "cdigen.io/intel-gpu", "cdigen.io/intel-npu"] {
        assert!(
            kubelet.plugin(r).is_none(),
            "{r} registered without devices"
        );
    }
    assert!(!our_sockets(&kubelet.dir).contains(&"cdigen-cdigen.io_vf.sock".to_string()));

    // The VFs come: registered, listing them.
    for put_back in replug {
        put_back();
    }
    plugin.hup();
    let vf = kubelet.wait_for(VF, WAIT, |p| p.watching && !p.lists.is_empty());
    assert_eq!(vf.registrations, 1);
    kubelet.wait_for_list(VF, WAIT, |d| ids(d) == healthy(&VFS));

    // They all go: still registered, the list empty.
    let _gone: Vec<_> = VFS
        .iter()
        .zip(&virtfns)
        .map(|(a, v)| unplug_vf(&root, a, v))
        .collect();
    plugin.hup();
    kubelet.wait_for_list(VF, WAIT, <[Device]>::is_empty);
    assert_eq!(kubelet.plugin(VF).unwrap().registrations, 1);
    assert!(our_sockets(&kubelet.dir).contains(&"cdigen-cdigen.io_vf.sock".to_string()));
    assert!(kubelet.refused().is_empty(), "{:?}", kubelet.refused());
    plugin.stop();
}

/// A user definition renames a resource (its CDI kind stays) or turns it
/// off. With `--legacy-edits`, Allocate also carries the spec's device
/// nodes and variables.
#[test]
fn user_definitions_rename_or_turn_off_a_resource() {
    let (tmp, _root) = support::machine("example");
    let gens = tmp.path().join("generators");
    user_definition(
        &gens,
        "sriov",
        "device_plugin:\n  resource: example.com/vf\n",
    );
    user_definition(&gens, "vfio", "device_plugin:\n  enabled: false\n");
    let kubelet = FakeKubelet::start(&tmp.path().join("plugins"));
    let plugin = Plugin::spawn(
        tmp.path(),
        &kubelet,
        &["--generators", gens.to_str().unwrap(), "--legacy-edits"],
    );
    let served = [
        "cdigen.io/amd-gpu",
        "cdigen.io/rdma",
        "cdigen.io/vdpa",
        "example.com/vf",
        GPU,
    ];
    for r in served {
        kubelet.wait_for(r, WAIT, |p| p.watching && !p.lists.is_empty());
    }
    assert_eq!(ids(&kubelet.devices("example.com/vf")), healthy(&VFS));
    assert!(kubelet.plugin(VF).is_none(), "renamed");
    assert!(kubelet.plugin(VFIO).is_none(), "turned off");
    assert_eq!(
        our_sockets(&kubelet.dir),
        [
            "cdigen-cdigen.io_amd-gpu.sock",
            "cdigen-cdigen.io_nvidia.sock",
            "cdigen-cdigen.io_rdma.sock",
            "cdigen-cdigen.io_vdpa.sock",
            "cdigen-example.com_vf.sock",
        ]
    );
    // The specs are still written, under their kinds.
    assert!(tmp.path().join("cdi/cdigen.io-vfio.yaml").is_file());
    let r = kubelet
        .allocate("example.com/vf", &["0000:3b:00.2"])
        .unwrap();
    let c = &r.container_responses[0];
    assert_eq!(c.cdi_devices[0].name, "cdigen.io/vf=0000:3b:00.2");
    assert_eq!(c.envs["PCIDEVICE_EXAMPLE_COM_VF"], "0000:3b:00.2");
    assert!(c.envs.contains_key("PCIDEVICE_EXAMPLE_COM_VF_INFO"));
    // The legacy fields: the CDI device's nodes and its variable (named
    // after the CDI device, which the rename does not touch).
    let nodes: Vec<&str> = c.devices.iter().map(|d| d.host_path.as_str()).collect();
    assert_eq!(
        nodes,
        [
            "/dev/infiniband/uverbs2",
            "/dev/infiniband/issm2",
            "/dev/infiniband/umad2",
            "/dev/infiniband/rdma_cm",
        ]
    );
    assert!(
        c.devices
            .iter()
            .all(|d| d.container_path == d.host_path && d.permissions == "rw")
    );
    assert!(c.mounts.is_empty());
    assert_eq!(
        c.envs["PCIDEVICE_CDIGEN_IO_VF_0000_3B_00_2"],
        "0000:3b:00.2"
    );
    assert_eq!(c.envs.len(), 3, "{:?}", c.envs);
    assert_eq!(
        files(&tmp.path().join("devinfo")),
        ["example.com-vf-0000:3b:00.2-device.json"]
    );
    plugin.stop();
}

/// rdma-host's HCAs: `cdigen.io/rdma` offers each (not a VF: there are
/// none) to one container, by PCI address, with the SR-IOV device
/// plugin's variables and a device-info file; the `rdma-shared` pool,
/// enabled by a user definition with `replicas: 4`, is advertised as four
/// units that all give the one CDI device with every HCA's nodes, so two
/// units in one container, or units in two containers, get the same CDI
/// name, and no variable or device-info file (a pool is no one device).
#[test]
fn rdma_hcas_exclusive_and_as_a_shared_pool() {
    const RDMA: &str = "cdigen.io/rdma";
    const SHARED: &str = "cdigen.io/rdma-shared";
    let (tmp, _root) = support::machine("rdma-host");
    let gens = tmp.path().join("generators");
    fs::create_dir_all(&gens).unwrap();
    let shared = fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("generators/rdma-shared.yaml"),
    )
    .unwrap()
    .replace("enabled: false", "enabled: true")
    .replace("replicas: 1000", "replicas: 4");
    fs::write(gens.join("rdma-shared.yaml"), shared).unwrap();
    let kubelet = FakeKubelet::start(&tmp.path().join("plugins"));
    let plugin = Plugin::spawn(
        tmp.path(),
        &kubelet,
        &["--generators", gens.to_str().unwrap()],
    );

    let hcas = kubelet.devices(RDMA);
    assert_eq!(
        ids(&hcas),
        healthy(&[
            "0000:41:00.0",
            "0000:41:00.1",
            "0000:c1:00.0",
            "infiniband-rxe0"
        ])
    );
    let by_numa = numa(&hcas);
    assert_eq!(by_numa["0000:41:00.0"], [0]);
    assert_eq!(by_numa["0000:c1:00.0"], [1]);
    assert!(by_numa["infiniband-rxe0"].is_empty(), "{by_numa:?}");
    let r = kubelet.allocate(RDMA, &["0000:c1:00.0"]).unwrap();
    let c = &r.container_responses[0];
    let names: Vec<&str> = c.cdi_devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["cdigen.io/rdma=0000:c1:00.0"]);
    assert_eq!(c.envs["PCIDEVICE_CDIGEN_IO_RDMA"], "0000:c1:00.0");
    let info: Value = serde_json::from_str(&c.envs["PCIDEVICE_CDIGEN_IO_RDMA_INFO"]).unwrap();
    assert_eq!(
        info,
        json!({"0000:c1:00.0": {
            "generic": {"deviceID": "0000:c1:00.0"},
            "rdma": {
                "uverbs": "/dev/infiniband/uverbs2",
                "umad": "/dev/infiniband/umad2",
                "issm": "/dev/infiniband/issm2",
                "rdma_cm": "/dev/infiniband/rdma_cm",
                "rdma_dev": "mlx5_2",
            },
        }})
    );
    let devinfo = tmp.path().join("devinfo");
    assert_eq!(files(&devinfo), ["cdigen.io-rdma-0000:c1:00.0-device.json"]);
    assert_eq!(
        fs::read_to_string(devinfo.join("cdigen.io-rdma-0000:c1:00.0-device.json")).unwrap(),
        r#"{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:c1:00.0","rdma-device":"mlx5_2"}}"#
    );

    // The pool: four units of one CDI device.
    let units = kubelet.devices(SHARED);
    assert_eq!(ids(&units), healthy(&["all-0", "all-1", "all-2", "all-3"]));
    // Its HCAs sit on both NUMA nodes (and rxe0 on none): no affinity.
    assert!(
        numa(&units).values().all(Vec::is_empty),
        "{:?}",
        numa(&units)
    );
    let all = "cdigen.io/rdma-shared=all";
    let r = kubelet.allocate(SHARED, &["all-0", "all-1"]).unwrap();
    let c = &r.container_responses[0];
    let names: Vec<&str> = c.cdi_devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, [all], "two units, one CDI device");
    assert!(c.envs.is_empty(), "{:?}", c.envs);
    let r = kubelet.allocate(SHARED, &["all-2"]).unwrap();
    let names: Vec<&str> = r.container_responses[0]
        .cdi_devices
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(names, [all], "another container, the same CDI device");
    assert!(matches!(
        kubelet.pre_start(SHARED, &["all-3"]),
        Some(Ok(()))
    ));
    assert_eq!(
        files(&devinfo),
        ["cdigen.io-rdma-0000:c1:00.0-device.json"],
        "no device-info file for a pool"
    );
    // The spec's `all` has every HCA's nodes.
    let spec = fs::read_to_string(tmp.path().join("cdi/cdigen.io-rdma-shared.yaml")).unwrap();
    for n in 0..4 {
        for node in ["uverbs", "umad", "issm"] {
            assert!(
                spec.contains(&format!("'/dev/infiniband/{node}{n}'")),
                "{spec}"
            );
        }
    }
    plugin.stop();
}

/// Runs the plugin to its end on a copy of `machine` (changed by
/// `change`) with user definitions `defs` ((built-in name, added text)):
/// the exit code, the log, and the definitions' directory (in the
/// returned tempdir).
fn refused_at_start(
    machine: &str,
    defs: &[(&str, &str)],
    change: impl FnOnce(&Path),
) -> (Option<i32>, String, PathBuf, tempfile::TempDir) {
    let with_driver = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(machine)
        .join("root")
        .join(support::DRIVER_ROOT.trim_start_matches('/'))
        .is_dir();
    let (tmp, root) = support::machine(machine);
    change(&root);
    let gens = tmp.path().join("generators");
    fs::create_dir_all(&gens).unwrap();
    for (name, extra) in defs {
        user_definition(&gens, name, extra);
    }
    let kubelet = FakeKubelet::start(&tmp.path().join("plugins"));
    let mut extra = vec!["--generators", gens.to_str().unwrap()];
    if with_driver {
        extra.extend(["--driver-root", support::DRIVER_ROOT]);
    }
    let mut plugin = Plugin::spawn(tmp.path(), &kubelet, &extra);
    let code = plugin.wait_exit();
    let log = plugin.log();
    assert!(kubelet.refused().is_empty());
    assert!(
        kubelet.plugin(VF).is_none() && kubelet.plugin(GPU).is_none(),
        "nothing registered"
    );
    assert!(our_sockets(&kubelet.dir).is_empty());
    (code, log, gens, tmp)
}

/// Definitions the plugin cannot serve, and IDs that collide, stop it at
/// start: exit 2 (cdigen's code for a configuration it cannot use, as for
/// any invalid definition), one line naming the generator and its file.
#[test]
fn bad_resources_and_colliding_ids_are_refused_at_start() {
    let last_line = |log: &str| log.lines().last().unwrap_or_default().to_string();

    let (code, log, gens, _tmp) = refused_at_start(
        "example",
        &[(
            "sriov",
            "device_plugin:\n  resource: \"kubernetes.io/vf\"\n",
        )],
        |_| {},
    );
    assert_eq!(code, Some(2), "{log}");
    assert_eq!(
        last_line(&log),
        format!(
            "cdigen: generator sriov ({}): \"kubernetes.io/vf\" is not an extended resource \
             name: the kubernetes.io domain is Kubernetes' own (set device_plugin.resource to \
             a name like example.com/device, or device_plugin.enabled: false)",
            gens.join("sriov.yaml").display()
        )
    );

    let (code, log, gens, _tmp) = refused_at_start(
        "example",
        &[("vdpa", "device_plugin:\n  resource: cdigen.io/vf\n")],
        |_| {},
    );
    assert_eq!(code, Some(2), "{log}");
    assert_eq!(
        last_line(&log),
        format!(
            "cdigen: generators sriov (builtin:generators/sriov.yaml) and vdpa ({}) both offer \
             resource cdigen.io/vf: rename one (device_plugin.resource) or turn one off \
             (device_plugin.enabled: false)",
            gens.join("vdpa.yaml").display()
        )
    );

    // Two GPUs that report one UUID would both have that ID.
    let (code, log, _, _tmp) = refused_at_start("dgx-8gpu", &[], |root| {
        let info = root.join("proc/driver/nvidia/gpus/0000:2a:00.0/information");
        let text = fs::read_to_string(&info).unwrap();
        fs::write(&info, text.replace(DGX_NUMA0[1], DGX_NUMA0[0])).unwrap();
    });
    assert_eq!(code, Some(2), "{log}");
    assert_eq!(
        last_line(&log),
        format!(
            "cdigen: generator nvidia (builtin:generators/nvidia.yaml): devices 0000:18:00.0 \
             and 0000:2a:00.0 would both have device plugin ID \"{}\"",
            DGX_NUMA0[0]
        )
    );
}

// --- The Rust CDI library ---------------------------------------------------

/// What a runtime does with an Allocate answer: the kubelet puts the
/// plugin's variables into the container's environment and hands the CDI
/// names to the runtime, which injects them with the CDI library from the
/// spec directory the plugin keeps. The device nodes, the per-device
/// variables of the spec and the per-request variables all arrive.
#[test]
fn the_cdi_library_injects_what_allocate_answers() {
    let Some(tool) = support::cdi_rs("the_cdi_library_injects_what_allocate_answers") else {
        return;
    };
    let (tmp, _root) = support::machine("example");
    let kubelet = FakeKubelet::start(&tmp.path().join("plugins"));
    let plugin = Plugin::spawn(tmp.path(), &kubelet, &[]);
    kubelet.devices(VF);
    let r = kubelet
        .allocate(VF, &["0000:3b:00.2", "0000:3b:00.3"])
        .unwrap();
    let c = &r.container_responses[0];
    let mut env = vec!["PATH=/usr/bin:/bin".to_string()];
    let mut plugin_env: Vec<String> = c.envs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    plugin_env.sort();
    env.extend(plugin_env.iter().cloned());
    let config = tmp.path().join("config.json");
    let oci = json!({
        "ociVersion": "1.2.0",
        "process": {"args": ["sh"], "cwd": "/", "env": env, "user": {"uid": 0, "gid": 0}},
        "root": {"path": "rootfs"},
        "linux": {},
    });
    fs::write(&config, serde_json::to_vec_pretty(&oci).unwrap()).unwrap();
    let names: Vec<&str> = c.cdi_devices.iter().map(|d| d.name.as_str()).collect();
    let out = Command::new(&tool)
        .arg("inject-bundle")
        .arg(tmp.path().join("cdi"))
        .arg(&config)
        .args(&names)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cdi-rs: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let spec: Value = serde_json::from_slice(&fs::read(&config).unwrap()).unwrap();
    let env: BTreeSet<&str> = spec["process"]["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for want in [
        "PATH=/usr/bin:/bin",
        "PCIDEVICE_CDIGEN_IO_VF_0000_3B_00_2=0000:3b:00.2",
        "PCIDEVICE_CDIGEN_IO_VF_0000_3B_00_3=0000:3b:00.3",
        "PCIDEVICE_CDIGEN_IO_VF=0000:3b:00.2,0000:3b:00.3",
    ] {
        assert!(env.contains(want), "{want} missing from {env:?}");
    }
    for e in &plugin_env {
        assert!(env.contains(e.as_str()), "{e} lost in injection");
    }
    assert_eq!(env.len(), 1 + 2 + plugin_env.len(), "{env:?}");
    let devices: BTreeMap<&str, (i64, i64)> = spec["linux"]["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            assert_eq!(d["type"], "c");
            (
                d["path"].as_str().unwrap(),
                (d["major"].as_i64().unwrap(), d["minor"].as_i64().unwrap()),
            )
        })
        .collect();
    assert_eq!(
        devices,
        BTreeMap::from([
            ("/dev/infiniband/issm2", (231, 66)),
            ("/dev/infiniband/issm3", (231, 67)),
            ("/dev/infiniband/rdma_cm", (10, 125)),
            ("/dev/infiniband/umad2", (231, 2)),
            ("/dev/infiniband/umad3", (231, 3)),
            ("/dev/infiniband/uverbs2", (231, 194)),
            ("/dev/infiniband/uverbs3", (231, 195)),
        ])
    );
    // The cgroup lets the container open them.
    let allowed: BTreeSet<(i64, i64)> = spec["linux"]["resources"]["devices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["allow"] == true)
        .map(|r| (r["major"].as_i64().unwrap(), r["minor"].as_i64().unwrap()))
        .collect();
    assert_eq!(allowed, devices.values().copied().collect());
    plugin.stop();
}

/// By default no resource takes a vendor plugin's name; a vendor name
/// chosen explicitly (a user migrating from NVIDIA's plugin) is refused at
/// start while that plugin serves it on the node: exit 2, one line with
/// both ways out.
#[test]
fn a_vendor_name_another_plugin_serves_is_refused_at_start() {
    let (tmp, _root) = support::machine("example");
    let gens = tmp.path().join("generators");
    user_definition(
        &gens,
        "nvidia",
        "device_plugin:\n  resource: nvidia.com/gpu\n",
    );
    let kubelet = FakeKubelet::start(&tmp.path().join("plugins"));
    let vendor = kubelet.dir.join("nvidia-gpu.sock");
    let _nvidia = std::os::unix::net::UnixListener::bind(&vendor).unwrap();
    let mut plugin = Plugin::spawn(
        tmp.path(),
        &kubelet,
        &["--generators", gens.to_str().unwrap()],
    );
    let code = plugin.wait_exit();
    let log = plugin.log();
    assert_eq!(code, Some(2), "{log}");
    let file = gens.join("nvidia.yaml");
    assert_eq!(
        log.lines().last().unwrap_or_default(),
        format!(
            "cdigen: generator nvidia ({}): resource nvidia.com/gpu is already served by another \
             device plugin on this node (its socket {} accepts connections): two plugins of one \
             resource replace each other at the kubelet. Stop that plugin first (remove its \
             DaemonSet from this node), or leave the name to it: remove device_plugin.resource \
             from {} (cdigen then advertises cdigen.io/nvidia)",
            file.display(),
            vendor.display(),
            file.display()
        )
    );
    assert!(kubelet.plugin("nvidia.com/gpu").is_none() && kubelet.plugin(VF).is_none());
}

/// The warning that `resource`'s devices are withheld while the plugin at
/// `socket` serves them as `vendor`, for the generator in `file`.
fn withheld_warning(resource: &str, vendor: &str, socket: &Path, file: &str) -> String {
    format!(
        "{resource}: not offering the devices of generator nvidia while another device plugin \
         serves them on this node as {vendor} (its socket {} accepts connections): one device \
         would go to two pods. To serve them with cdigen, remove that plugin from this node and \
         set device_plugin.resource: {vendor} in a copy of {file}; to offer them as {resource} as \
         well, knowing one device can then go to two pods, set device_plugin.vendor_resources: \
         [] in a copy of {file}",
        socket.display()
    )
}

/// NVIDIA's device plugin on the node serves the GPUs as nvidia.com/gpu:
/// cdigen does not offer them as cdigen.io/nvidia too (one GPU would go to
/// two pods) and says so once; when that plugin goes, the GPUs are
/// offered; when it comes back, the
/// registered resource lists none.
#[test]
fn gpus_a_vendor_plugin_serves_are_not_offered_twice() {
    let (tmp, _root) = support::machine("dgx-8gpu");
    let kubelet = FakeKubelet::start(&tmp.path().join("plugins"));
    let vendor = kubelet.dir.join("nvidia-gpu.sock");
    let nvidia = std::os::unix::net::UnixListener::bind(&vendor).unwrap();
    let plugin = Plugin::spawn(
        tmp.path(),
        &kubelet,
        &["--driver-root", support::DRIVER_ROOT],
    );
    // The BMC's display is no resource of any default definition.
    assert!(kubelet.plugin("cdigen.io/drm").is_none());
    let warning = withheld_warning(
        GPU,
        "nvidia.com/gpu",
        &vendor,
        "builtin:generators/nvidia.yaml",
    );
    eventually("the warning", || plugin.log().contains(&warning));
    assert!(kubelet.plugin(GPU).is_none(), "{}", plugin.log());

    // NVIDIA's plugin is removed: its socket goes.
    drop(nvidia);
    fs::remove_file(&vendor).unwrap();
    let gpus = kubelet.wait_for_list(GPU, WAIT, |l| l.len() == 8);
    assert!(gpus.iter().all(|d| d.health == "Healthy"), "{gpus:?}");
    let log = plugin.log();
    assert_eq!(log.matches(&warning).count(), 1, "{log}");
    assert!(
        log.contains(&format!(
            "{GPU}: nvidia.com/gpu is no longer served on this node ({} accepts no connection): \
             offering the devices of generator nvidia again",
            vendor.display()
        )),
        "{log}"
    );

    // It comes back (as a MIG strategy's resource): the list is emptied.
    let mig = kubelet.dir.join("nvidia-mig-1g.10gb.sock");
    let _mig = std::os::unix::net::UnixListener::bind(&mig).unwrap();
    kubelet.wait_for_list(GPU, WAIT, <[Device]>::is_empty);
    let warning = withheld_warning(
        GPU,
        "nvidia.com/mig-1g.10gb",
        &mig,
        "builtin:generators/nvidia.yaml",
    );
    eventually("the warning", || plugin.log().contains(&warning));
    plugin.stop();
}

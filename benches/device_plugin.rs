//! Benchmark: `cdigen device-plugin` serving 1000 SR-IOV VFs (8 Mellanox
//! PFs x 125 VFs, tests/support/synth.rs) to the fake kubelet of
//! tests/support/kubelet.rs. Each figure is a median over repetitions,
//! printed with a baseline measured in the same run and their ratio:
//!
//! 1. Allocate for one container (1 VF, 8 VFs), and PreStartContainer (the
//!    inventory lookup alone, no files), against a no-op RPC
//!    (GetDevicePluginOptions) on the same connection.
//! 2. A device change (a VF hidden from, then restored to, the tree) to the
//!    kubelet receiving the new ListAndWatch list, against a one-shot
//!    `cdigen generate` of the machine into a fresh directory; also
//!    `cdigen watch` through the same changes (to the spec on disk). Each
//!    change comes after a quiet period, so it is regenerated at once (the
//!    leading edge): the debounce is in none of these figures
//!    (`cargo bench --bench watch` measures both edges). The trigger is a
//!    kernel-format uevent sent to
//!    the `NETLINK_KOBJECT_UEVENT` group (1) that the plugin listens to
//!    (`--source netlink`): where `unshare -n` works (root), the benchmark
//!    runs itself again in a private network namespace, so that what it
//!    sends reaches only the processes it starts (the kernel's own uevents
//!    still reach every namespace; they change nothing here). Elsewhere
//!    the trigger is SIGHUP (a reload and a full pass), as the output says.
//! 3. Re-registration after a kubelet restart, until the kubelet holds a
//!    fresh list, against the plugin's socket-poll interval (the floor).
//! 4. The plugin's memory (VmHWM, VmRSS from /proc/<pid>/status) against
//!    `cdigen watch` on the same machine (the same pipeline without the
//!    gRPC side) after its first pass and after the same changes, and per
//!    VF.
//!
//! Run with `cargo bench --bench device_plugin` (under a minute).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[path = "../tests/support/kubelet.rs"]
mod kubelet;
#[allow(dead_code)] // amd_gpus
#[path = "../tests/support/synth.rs"]
mod synth;

#[path = "support/procs.rs"]
mod procs;

#[path = "support/netns.rs"]
mod netns;

use procs::{Proc, WAIT, cdigen, median, memory, mib, row, spec_shows};

use std::fs;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::thread;
use std::time::{Duration, Instant};

use cdigen::deviceplugin::api::v1beta1::device_plugin_client::DevicePluginClient;
use cdigen::deviceplugin::api::v1beta1::{
    AllocateRequest, ContainerAllocateRequest, Empty, PreStartContainerRequest,
};
use cdigen::deviceplugin::run::{POLL, socket_name};
use cdigen::watch::netlink::KERNEL_GROUP;
use kubelet::FakeKubelet;
use rustix::net::{SendFlags, netlink, sendto};

const PFS: usize = 8;
const VFS_PER_PF: usize = 125;
const VFS: usize = PFS * VFS_PER_PF;
const RESOURCE: &str = "cdigen.io/vf";
/// The plugin's `--debounce` for the change measurement.
const DEBOUNCE: Duration = Duration::from_millis(50);
/// Rounds of the four RPCs (after a warm-up).
const RPC_RUNS: usize = 300;
/// Hide + restore cycles (two changes each).
const CHANGE_CYCLES: usize = 10;
/// One-shot `cdigen generate` runs.
const GENERATE_RUNS: usize = 5;
/// Kubelet restarts.
const RESTARTS: usize = 10;

/// Waits for `path` to exist (a ready file).
fn wait_file(path: &Path, child: &mut Proc, log: &Path) {
    let end = Instant::now() + WAIT;
    while !path.exists() {
        if let Some(s) = child.0.try_wait().unwrap() {
            panic!("exited with {s}: {}", fs::read_to_string(log).unwrap());
        }
        assert!(Instant::now() < end, "timed out waiting for {path:?}");
        thread::sleep(Duration::from_millis(10));
    }
}

/// How many files `pid` holds open.
fn open_files(pid: u32) -> usize {
    fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count)
}

/// How device changes reach the plugin.
enum Trigger {
    /// A netlink uevent socket in the plugin's (private) namespace.
    Netlink(OwnedFd),
    /// SIGHUP.
    Hup,
}

impl Trigger {
    /// The netlink socket when this process runs in its own network
    /// namespace and may send to the uevent group.
    fn open() -> (Trigger, String) {
        match netns::uevent_socket() {
            Ok(fd) => (
                Trigger::Netlink(fd),
                "kernel-format uevent on NETLINK_KOBJECT_UEVENT group 1 (private netns)".into(),
            ),
            Err(why) => (Trigger::Hup, format!("SIGHUP ({why}: no uevents sent)")),
        }
    }

    /// Tells the plugin that `devpath` (a PCI function) had `action`.
    fn fire(&self, plugin: &Proc, action: &str, devpath: &str, seq: u64) {
        match self {
            Trigger::Netlink(fd) => {
                let packet = format!(
                    "{action}@{devpath}\0ACTION={action}\0DEVPATH={devpath}\0SUBSYSTEM=pci\0SEQNUM={seq}\0"
                );
                let group = netlink::SocketAddrNetlink::new(0, KERNEL_GROUP);
                sendto(fd, packet.as_bytes(), SendFlags::empty(), &group).unwrap();
            }
            Trigger::Hup => plugin.signal("HUP"),
        }
    }
}

/// The VF the change measurement hides and restores: the last one (never
/// allocated here).
struct Vf {
    /// Its PCI address.
    address: String,
    /// Its `bus/pci/devices` link, removed to hide it.
    link: PathBuf,
    /// The link's target.
    target: PathBuf,
    /// Its uevent `DEVPATH`.
    devpath: String,
}

impl Vf {
    fn last(root: &Path) -> Vf {
        let mut vfs = synth::vf_links(root);
        assert_eq!(vfs.len(), VFS);
        let link = vfs.pop().unwrap();
        let target = fs::read_link(&link).unwrap();
        // ../../../devices/pci0100:48/... -> /devices/pci0100:48/...
        let t = target.to_str().unwrap();
        let devpath = format!("/{}", &t[t.find("devices/").unwrap()..]);
        Vf {
            address: link.file_name().unwrap().to_str().unwrap().to_string(),
            link,
            target,
            devpath,
        }
    }

    /// Hides and restores it [`CHANGE_CYCLES`] times, telling `to` each
    /// time; `seen(present, since)` waits until the change shows and says
    /// when it did. The times to hidden and to restored.
    fn cycle(
        &self,
        trigger: &Trigger,
        to: &Proc,
        seen: impl Fn(bool, Instant) -> Instant,
    ) -> (Vec<Duration>, Vec<Duration>) {
        let (mut gone, mut back) = (vec![], vec![]);
        for i in 0..CHANGE_CYCLES {
            for present in [false, true] {
                // A quiet period since the last pass: the change's event
                // is regenerated at once, not coalesced with the last.
                thread::sleep(DEBOUNCE + Duration::from_millis(20));
                if present {
                    std::os::unix::fs::symlink(&self.target, &self.link).unwrap();
                } else {
                    fs::remove_file(&self.link).unwrap();
                }
                let action = if present { "add" } else { "remove" };
                let t = Instant::now();
                trigger.fire(to, action, &self.devpath, 2 * i as u64 + u64::from(present));
                let d = seen(present, t) - t;
                if present { &mut back } else { &mut gone }.push(d);
            }
        }
        (gone, back)
    }
}

/// Spawns `cdigen <args>` over `dir/root` with `--source`, `--debounce`
/// and `--ready-file ready_file`, logging to `log`, and waits until ready.
fn spawn_ready(dir: &Path, args: &[&str], source: &str, ready_file: &str, log: &Path) -> Proc {
    let mut p = Proc(
        cdigen(dir)
            .args(args)
            .args([
                "--root",
                "root",
                "--source",
                source,
                "--ready-file",
                ready_file,
            ])
            .arg("--debounce")
            .arg(humantime::format_duration(DEBOUNCE).to_string())
            .env("RUST_LOG", "info")
            .stderr(fs::File::create(log).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_file(&dir.join(ready_file), &mut p, log);
    p
}

/// Allocate (1 and 8 VFs) and PreStartContainer (1 VF, no files written)
/// against GetDevicePluginOptions, interleaved on one connection to
/// `socket`, after a warm-up: each call's times.
fn rpcs(socket: &Path, ids: &[String]) -> [Vec<Duration>; 4] {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let request = |n: usize| AllocateRequest {
        container_requests: vec![ContainerAllocateRequest {
            devices_ids: ids[..n].to_vec(),
        }],
    };
    let mut times: [Vec<Duration>; 4] = Default::default();
    rt.block_on(async {
        let channel = cdigen::deviceplugin::kubelet::connect(socket)
            .await
            .unwrap();
        let mut client = DevicePluginClient::new(channel);
        for i in 0..RPC_RUNS + 20 {
            let mut call = [Duration::ZERO; 4];
            let t = Instant::now();
            client.get_device_plugin_options(Empty {}).await.unwrap();
            call[0] = t.elapsed();
            for (k, n) in [(1, 1), (2, 8)] {
                let t = Instant::now();
                let r = client.allocate(request(n)).await.unwrap().into_inner();
                call[k] = t.elapsed();
                assert_eq!(r.container_responses[0].cdi_devices.len(), n);
            }
            let t = Instant::now();
            let pre = PreStartContainerRequest {
                devices_ids: ids[..1].to_vec(),
            };
            client.pre_start_container(pre).await.unwrap();
            call[3] = t.elapsed();
            if i >= 20 {
                for (v, c) in times.iter_mut().zip(call) {
                    v.push(c);
                }
            }
        }
    });
    times
}

fn main() {
    if let Some(code) = netns::in_private_netns() {
        std::process::exit(code);
    }
    let (trigger, how) = Trigger::open();
    let netlink = matches!(trigger, Trigger::Netlink(_));
    let source = if netlink { "netlink" } else { "none" };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let root = dir.join("root");
    synth::sriov_nics(&root, PFS, VFS_PER_PF, 0);
    let vf = Vf::last(&root);
    let mut kubelet = FakeKubelet::start(&dir.join("plugins"));
    let t_start = Instant::now();
    let plugin = spawn_ready(
        dir,
        &[
            "device-plugin",
            "--output-dir",
            "cdi",
            "--devinfo-dir",
            "devinfo",
            "--plugin-dir",
            kubelet.dir.to_str().unwrap(),
            "--pod-resources-socket",
            kubelet.pod_resources.to_str().unwrap(),
        ],
        source,
        "ready",
        &dir.join("plugin.log"),
    );
    let first = kubelet.wait_for(RESOURCE, WAIT, |p| {
        p.lists.last().is_some_and(|(_, l)| l.len() == VFS)
    });
    let startup = first.lists.last().unwrap().0 - t_start;
    let mut mem = vec![("plugin, first list", memory(plugin.pid()))];

    // 1. Allocate against a no-op RPC on one connection.
    let ids: Vec<String> = first.lists.last().unwrap().1[..8]
        .iter()
        .map(|d| d.id.clone())
        .collect();
    let [noop, one, eight, pre] = rpcs(&kubelet.dir.join(socket_name(RESOURCE, None)), &ids);
    mem.push(("plugin, after the RPCs", memory(plugin.pid())));

    // 2. Device change -> ListAndWatch update.
    let (gone, back) = vf.cycle(&trigger, &plugin, |present, since| {
        let want = if present { VFS } else { VFS - 1 };
        let p = kubelet.wait_for(RESOURCE, WAIT, |p| {
            p.lists
                .last()
                .is_some_and(|(at, l)| *at >= since && l.len() == want)
        });
        p.lists.last().unwrap().0
    });
    mem.push(("plugin, after the changes", memory(plugin.pid())));

    // 3. Kubelet restart -> registered again with a fresh list.
    let (mut registered, mut listed) = (vec![], vec![]);
    let fds_before = open_files(plugin.pid());
    for _ in 0..RESTARTS {
        let before = kubelet.plugin(RESOURCE).unwrap().registrations;
        let t = kubelet.restart();
        let p = kubelet.wait_for(RESOURCE, WAIT, |p| {
            p.registrations > before
                && p.lists
                    .last()
                    .is_some_and(|(at, l)| Some(*at) >= p.registered_at && l.len() == VFS)
        });
        registered.push(p.registered_at.unwrap() - t);
        listed.push(p.lists.last().unwrap().0 - t);
    }
    mem.push(("plugin, after the restarts", memory(plugin.pid())));
    let fds_after = open_files(plugin.pid());
    plugin.signal("TERM");
    drop(plugin);

    // Baselines: one-shot generate; `cdigen watch` (no gRPC side) through
    // the same changes.
    let mut generate = vec![];
    for i in 0..GENERATE_RUNS {
        let out = dir.join(format!("generate-{i}"));
        let t = Instant::now();
        let s = cdigen(dir)
            .args(["generate", "--root", "root"])
            .arg("--output-dir")
            .arg(out.join("cdi"))
            .arg("--devinfo-dir")
            .arg(out.join("devinfo"))
            .stderr(Stdio::null())
            .status()
            .unwrap();
        generate.push(t.elapsed());
        assert!(s.success());
    }
    let watch = spawn_ready(
        dir,
        &[
            "watch",
            "--output-dir",
            "w-cdi",
            "--devinfo-dir",
            "w-devinfo",
        ],
        source,
        "w-ready",
        &dir.join("watch.log"),
    );
    let mut watch_mem = vec![memory(watch.pid())];
    let spec = dir.join("w-cdi/cdigen.io-vf.yaml");
    let (w_gone, w_back) = vf.cycle(&trigger, &watch, |present, _| {
        spec_shows(&spec, &vf.address, present)
    });
    watch_mem.push(memory(watch.pid()));
    watch.signal("TERM");
    drop(watch);

    println!(
        "cdigen device-plugin, {PFS} PFs x {VFS_PER_PF} VFs = {VFS} VFs advertised \
(first list {startup:.2?} after start)"
    );
    println!(
        "  {:<34} {:>11} {:>11} {:>9}",
        "median of", "time", "baseline", "ratio"
    );
    let noop = median(noop);
    println!("1. one container's request on one connection, {RPC_RUNS} calls each");
    let base = "GetDevicePluginOptions";
    row("Allocate 1 VF", median(one), noop, base);
    row("Allocate 8 VFs", median(eight), noop, base);
    row("PreStartContainer 1 VF", median(pre), noop, base);

    let generate = median(generate);
    let (gone, back) = (median(gone), median(back));
    println!(
        "2. device change -> new list at the kubelet, {CHANGE_CYCLES} changes each; trigger: {how}"
    );
    let base = "one-shot cdigen generate";
    row("VF hidden (999 listed)", gone, generate, base);
    row("VF restored (1000 listed)", back, generate, base);
    row(
        "watch: VF hidden, spec written",
        median(w_gone),
        generate,
        base,
    );
    row(
        "watch: VF restored, spec written",
        median(w_back),
        generate,
        base,
    );
    if netlink {
        println!(
            "  each change after a quiet period: regenerated at once, --debounce {DEBOUNCE:.2?} not waited"
        );
    } else {
        println!("  no debounce on SIGHUP (a reload of the definitions and a full pass instead)");
    }

    println!("3. kubelet restart -> plugin registered again, {RESTARTS} restarts");
    let floor = "socket poll interval";
    row("to Register", median(registered), POLL, floor);
    row("to Register + fresh list", median(listed), POLL, floor);

    println!("4. memory, {VFS} VFs; baseline: cdigen watch at the same point");
    println!(
        "  {:<34} {:>11} {:>11} {:>9} {:>11} {:>11} {:>9}",
        "", "VmHWM", "watch", "ratio", "VmRSS", "watch", "ratio"
    );
    for (i, (what, (hwm, rss))) in mem.iter().enumerate() {
        // The watch's first pass, or its changes (it serves no RPCs and
        // sees no restarts).
        let (w_hwm, w_rss) = watch_mem[usize::from(i >= 2)];
        println!(
            "  {what:<34} {:>11} {:>11} {:>8.2}x {:>11} {:>11} {:>8.2}x",
            mib(*hwm),
            mib(w_hwm),
            *hwm as f64 / w_hwm as f64,
            mib(*rss),
            mib(w_rss),
            *rss as f64 / w_rss as f64
        );
    }
    // Each registration's ListAndWatch streams end with it, so the old
    // kubelet's connections are not held: the count stays.
    println!(
        "  open files of the plugin: {fds_before} before the restarts, {fds_after} after{}",
        if fds_after > fds_before {
            " (connections of the old kubelet still open)"
        } else {
            ""
        }
    );
    let per_vf = |b: u64| b as f64 / VFS as f64 / 1024.0;
    let (first_rss, watch_rss) = (mem[0].1.1, watch_mem[0].1);
    println!(
        "  per VF at the first list: plugin VmRSS {:.1} KiB, watch {:.1} KiB, the gRPC side {:.1} KiB",
        per_vf(first_rss),
        per_vf(watch_rss),
        (first_rss as f64 - watch_rss as f64) / VFS as f64 / 1024.0
    );
}

//! The device plugin process: the watch loop on its own thread keeps the
//! specs and the inventory current; the gRPC side (one tokio thread) serves
//! one plugin per resource that has devices ([`to_register`]), registers
//! it with the kubelet, re-registers
//! after a kubelet restart, and keeps device-info files to live
//! allocations.
//!
//! With a pod UID (`--pod-uid`: a rolling update of the DaemonSet), each
//! instance has its own sockets (`cdigen-<resource>-<uid>.sock`) and
//! instance lock, so that the new pod registers while the old one still
//! serves: the kubelet's device manager then sends Allocate to the newest
//! registration. When the old pod stops, the kubelet drops the plugin it
//! registered last too (pkg/kubelet/cm/devicemanager/plugin/v1beta1,
//! `runClient` disconnects the client registered under the resource's
//! name, whichever it is): the new instance sees its ListAndWatch stream
//! closed and registers again. The devices handed out are shared on disk
//! ([`held`], under the device-info directory's lock, re-read by every
//! Allocate and prune), so neither instance removes a file the other's
//! allocation needs.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::{DirBuilderExt as _, FileTypeExt as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use tokio::net::UnixListener;
use tokio::sync::Notify;
use tokio::sync::watch as tw;
use tokio::task::JoinHandle;

use super::api::v1beta1::device_plugin_server::DevicePluginServer;
use super::inventory::Inventory;
use super::passes::{AfterPass, Passes, serve_beside};
use super::server::{Held, MAX_MESSAGE, Plugin, Shared, options};
use super::{devinfo, held, kubelet};
use crate::fsio::FileId;
use crate::watch::{self, Control, EventSource, Pipeline};

/// The kubelet's device plugin directory.
pub const PLUGIN_DIR: &str = "/var/lib/kubelet/device-plugins";

/// The kubelet's pod resources socket.
pub const POD_RESOURCES: &str = "/var/lib/kubelet/pod-resources/kubelet.sock";

/// The kubelet's socket, in the plugin directory.
pub const KUBELET_SOCKET: &str = "kubelet.sock";

/// The lock a running device plugin holds in the plugin directory, with
/// its PID ([`crate::write::lock_instance`]): a second one on the
/// directory fails at start instead of fighting over the sockets. The
/// kubelet removes only sockets from the directory.
pub const LOCK_FILE: &str = ".cdigen-device-plugin.lock";

/// How often the sockets are looked at for a kubelet restart.
pub const POLL: Duration = Duration::from_millis(200);

/// How often the plugin directory is looked at for another plugin that
/// serves devices a generator offers (`device_plugin.vendor_resources`),
/// besides after every pass.
pub const VENDOR_POLL: Duration = Duration::from_secs(2);

/// How often device-info files are matched with live allocations (besides
/// after every pass).
pub const PRUNE_EVERY: Duration = Duration::from_secs(30);

/// How long an allocation counts as live before the kubelet lists it
/// (once listed, it is live while listed).
pub const GRACE: Duration = Duration::from_secs(120);

/// How the device plugin runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// The kubelet's device-plugins directory: `kubelet.sock` and ours.
    pub plugin_dir: PathBuf,
    /// The kubelet's pod resources socket.
    pub pod_resources: PathBuf,
    /// Where CDI specs are written.
    pub output_dir: PathBuf,
    /// Where device-info files are written.
    pub devinfo_dir: PathBuf,
    /// Whether Allocate adds the legacy fields.
    pub legacy: bool,
    /// This pod's UID (`--pod-uid`), for a rolling update: this instance's
    /// own sockets and lock ([`socket_name`], [`lock_name`]).
    pub pod_uid: Option<String>,
    /// The health codes acted on (`--ignore-health`).
    pub health: super::signals::Checks,
}

/// The socket file name of `resource`: `cdigen-cdigen.io_vf.sock`, or
/// with a pod UID `cdigen-cdigen.io_vf-<uid>.sock`. The `/` becomes `_`,
/// which a resource's domain never has: two resources never share a
/// socket.
pub fn socket_name(resource: &str, pod_uid: Option<&str>) -> String {
    let r = resource.replacen('/', "_", 1);
    match pod_uid {
        None => format!("cdigen-{r}.sock"),
        Some(uid) => format!("cdigen-{r}-{uid}.sock"),
    }
}

/// The instance lock's name: [`LOCK_FILE`], or per pod UID
/// (`.cdigen-device-plugin-<uid>.lock`) in a rolling update.
pub fn lock_name(pod_uid: Option<&str>) -> String {
    match pod_uid {
        None => LOCK_FILE.to_string(),
        Some(uid) => format!(".cdigen-device-plugin-{uid}.lock"),
    }
}

/// In a rolling update: the sockets of another instance whose lock
/// (`.cdigen-device-plugin-<uid>.lock`) is free, its process gone, are
/// removed with the lock file (held meanwhile); those of a live instance
/// stay, and a socket without a lock is never touched (the kubelet
/// ignores sockets nobody registered, and removes them when it starts).
fn clear_stale(dir: &Path, me: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    for lock in &names {
        let Some(uid) = lock
            .strip_prefix(".cdigen-device-plugin-")
            .and_then(|n| n.strip_suffix(".lock"))
            .filter(|u| *u != me && crate::write::check_pod_uid(u).is_ok())
        else {
            continue;
        };
        let crate::write::Instance::Gone(held) = crate::write::instance(dir, lock) else {
            continue;
        };
        let suffix = format!("-{uid}.sock");
        for name in names
            .iter()
            .filter(|n| n.starts_with("cdigen-") && n.ends_with(&suffix))
        {
            let path = dir.join(name);
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_socket()) {
                tracing::info!("removing {}: its instance is gone", path.display());
                let _ = std::fs::remove_file(&path);
            }
        }
        let _ = std::fs::remove_file(dir.join(lock));
        drop(held);
    }
}

/// What the device plugin does after each pass: the new inventory to the
/// servers, and a wake-up for the pruner.
struct Publisher {
    tx: tw::Sender<Arc<Inventory>>,
    /// Wakes the pruner after every pass.
    passed: Arc<Notify>,
    allocated: Arc<Shared>,
}

impl AfterPass for Publisher {
    fn held(&mut self, _previous: &Inventory) -> BTreeSet<(String, String)> {
        self.allocated.allocated_set()
    }

    fn after(&mut self, inv: &Inventory, _first: bool, _since: Instant) {
        self.tx.send_if_modified(|cur| {
            if **cur == *inv {
                false
            } else {
                *cur = Arc::new(inv.clone());
                true
            }
        });
        // A pass (SIGHUP, an event, the interval) also looks at the live
        // allocations, whether or not the inventory changed.
        self.passed.notify_one();
    }
}

/// Creates the plugin directory when missing (mode 0750, as the kubelet
/// does) and takes its instance lock ([`lock_name`]; in a rolling update,
/// after removing what a dead instance left).
///
/// # Errors
/// Another device plugin (of this pod UID) holds it (its PID named), an
/// invalid pod UID, or the directory or the lock cannot be made.
pub fn lock_plugin_dir(dir: &Path, pod_uid: Option<&str>) -> anyhow::Result<crate::write::DirLock> {
    if let Some(uid) = pod_uid {
        crate::write::check_pod_uid(uid).map_err(anyhow::Error::msg)?;
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o750)
        .create(dir)
        .with_context(|| format!("cannot create {}", dir.display()))?;
    let lock = crate::write::lock_instance(dir, &lock_name(pod_uid))
        .map_err(anyhow::Error::from)
        .with_context(|| format!("cannot serve in {}", dir.display()))?;
    if let Some(uid) = pod_uid {
        clear_stale(dir, uid);
    }
    Ok(lock)
}

/// Runs the device plugin until SIGTERM (or `control.stop()`), with the
/// watch's events from the source `open_source` opens (on this
/// thread).
///
/// # Errors
/// Another device plugin on the plugin directory, invalid resources or
/// colliding IDs at start, or a watch that cannot run.
pub fn run(
    config: &watch::Config,
    open_source: impl FnOnce() -> anyhow::Result<Box<dyn EventSource>> + Send + 'static,
    pipeline: Pipeline,
    control: Arc<Control>,
    options: &Options,
) -> anyhow::Result<()> {
    // Held until the plugin has stopped and its sockets are gone.
    let _instance = lock_plugin_dir(&options.plugin_dir, options.pod_uid.as_deref())?;
    // A vendor's resource name, chosen explicitly, that the vendor's
    // plugin serves now: the two would replace each other.
    super::vendor::check(
        &options.plugin_dir,
        &super::inventory::resources(pipeline.generators())?,
    )?;
    // Each pass's inventory, then the same with the devices another
    // plugin serves withheld ([`withhold_loop`]): what the servers see.
    let (raw_tx, raw_rx) = tw::channel(Arc::new(Inventory::default()));
    let (tx, rx) = tw::channel(Arc::new(Inventory::default()));
    let shared = Arc::new(Shared {
        inventory: rx.clone(),
        allocated: Mutex::new(BTreeMap::new()),
        devinfo_dir: options.devinfo_dir.clone(),
        legacy: options.legacy,
    });
    let fatal = Arc::new(Mutex::new(None));
    let passed = Arc::new(Notify::new());
    let publisher = Passes::new(
        pipeline,
        options.output_dir.clone(),
        Arc::clone(&control),
        Arc::clone(&fatal),
        Publisher {
            tx: raw_tx,
            passed: Arc::clone(&passed),
            allocated: Arc::clone(&shared),
        },
    )?
    .with_checks(options.health.clone());
    // The watch ends on SIGTERM; dropping the passes then closes the inventory: the servers stop.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the gRPC runtime")?;
    let server = {
        let options = options.clone();
        move || {
            runtime.block_on(async {
                let withholding =
                    tokio::spawn(withhold_loop(raw_rx, tx, options.plugin_dir.clone()));
                serve(rx, passed, shared, options).await;
                let _ = withholding.await;
            });
        }
    };
    let watched = serve_beside("grpc", server, publisher, config, open_source, &control);
    if let Some(e) = fatal.lock().ok().and_then(|mut f| f.take()) {
        return Err(e);
    }
    watched?;
    Ok(())
}

/// Passes each pass's inventory from `raw` to `out` with the devices that
/// another plugin serves now withheld ([`withhold`]), and looks again
/// every [`VENDOR_POLL`]: that plugin may start, or go, at any time. Ends
/// when `raw` closes (dropping `out` closes the servers' inventory).
async fn withhold_loop(
    mut raw: tw::Receiver<Arc<Inventory>>,
    out: tw::Sender<Arc<Inventory>>,
    plugin_dir: PathBuf,
) {
    // Nothing before the first pass: the servers wait for it.
    if raw.changed().await.is_err() {
        return;
    }
    let mut withheld = BTreeMap::new();
    loop {
        let inventory = raw.borrow_and_update().clone();
        let next = withhold(&inventory, &plugin_dir, &mut withheld);
        out.send_if_modified(|cur| {
            if **cur == next {
                false
            } else {
                *cur = Arc::new(next);
                true
            }
        });
        tokio::select! {
            changed = raw.changed() => if changed.is_err() { break },
            () = tokio::time::sleep(VENDOR_POLL) => {}
        }
    }
}

/// `inventory` without the devices of each resource whose generator lists
/// another plugin's resource (`device_plugin.vendor_resources`) that is
/// served in `plugin_dir` now ([`super::vendor::serving`]): that resource
/// offers none (`withheld`), so that one device never goes to two pods.
/// `state`, the resources withheld before and by what, gives one warning
/// when a resource is withheld and one line when it is offered again.
pub fn withhold(
    inventory: &Inventory,
    plugin_dir: &Path,
    state: &mut BTreeMap<String, super::vendor::Serving>,
) -> Inventory {
    let mut out = inventory.clone();
    state.retain(|name, _| out.resources.contains_key(name));
    for (name, r) in &mut out.resources {
        if r.def.vendor_resources.is_empty() {
            state.remove(name);
            continue;
        }
        match super::vendor::serving(plugin_dir, &r.def.vendor_resources) {
            Some(other) => {
                if state.get(name) != Some(&other) {
                    let file = crate::text::path(&r.def.source);
                    tracing::warn!(
                        "{name}: not offering the devices of generator {} while another device \
                         plugin serves them on this node as {} (its socket {} accepts \
                         connections): one device would go to two pods. To serve them with \
                         cdigen, remove that plugin from this node and set \
                         device_plugin.resource: {} in a copy of {file}; to offer them as {name} \
                         as well, knowing one device can then go to two pods, set \
                         device_plugin.vendor_resources: [] in a copy of {file}",
                        r.def.generator,
                        other.resource,
                        crate::text::path(&other.socket),
                        other.resource,
                    );
                    state.insert(name.clone(), other.clone());
                }
                r.devices.clear();
                r.withheld = Some(other.resource);
            }
            None => {
                if let Some(was) = state.remove(name) {
                    tracing::info!(
                        "{name}: {} is no longer served on this node ({} accepts no \
                         connection): offering the devices of generator {} again",
                        was.resource,
                        crate::text::path(&was.socket),
                        r.def.generator
                    );
                }
            }
        }
    }
    out
}

/// Serves every resource of the inventory until the inventory closes.
async fn serve(
    mut rx: tw::Receiver<Arc<Inventory>>,
    passed: Arc<Notify>,
    shared: Arc<Shared>,
    options: Options,
) {
    // The first pass: specs on disk before anything is advertised.
    if rx.changed().await.is_err() {
        return;
    }
    let (stop_tx, stop_rx) = tw::channel(false);
    // Each resource's server, and the switch that stops it.
    let mut running: BTreeMap<String, (JoinHandle<()>, tw::Sender<bool>)> = BTreeMap::new();
    // The resources said to wait for their first device.
    let mut told_empty: BTreeSet<String> = BTreeSet::new();
    let pruner = tokio::spawn(prune_loop(
        rx.clone(),
        passed,
        Arc::clone(&shared),
        options.clone(),
        stop_rx,
    ));
    loop {
        let (configured, names, withheld) = {
            let inventory = rx.borrow_and_update();
            let configured: BTreeSet<String> = inventory.resources.keys().cloned().collect();
            let withheld: BTreeSet<String> = inventory
                .resources
                .iter()
                .filter(|(_, r)| r.withheld.is_some())
                .map(|(n, _)| n.clone())
                .collect();
            (configured, to_register(&inventory), withheld)
        };
        for name in configured.difference(&names) {
            if !running.contains_key(name)
                && !withheld.contains(name)
                && told_empty.insert(name.clone())
            {
                tracing::info!(
                    "{name}: no device on this host: registered with the kubelet when one \
                     appears (device_plugin.register_empty: true registers it now)"
                );
            }
        }
        for name in &names {
            if !running.contains_key(name) {
                let (one_tx, one_rx) = tw::channel(false);
                let task = tokio::spawn(serve_resource(
                    name.clone(),
                    Arc::clone(&shared),
                    options.plugin_dir.clone(),
                    options.pod_uid.clone(),
                    one_rx,
                ));
                running.insert(name.clone(), (task, one_tx));
            }
        }
        // A resource registered stays until it is no longer configured:
        // its last device gone, the kubelet is told of an empty list.
        let gone: Vec<String> = running
            .keys()
            .filter(|n| !configured.contains(*n))
            .cloned()
            .collect();
        for name in gone {
            if let Some((task, stop)) = running.remove(&name) {
                tracing::info!("{name}: no longer configured; stopping its plugin");
                let _ = stop.send(true);
                let _ = task.await;
            }
        }
        if rx.changed().await.is_err() {
            break;
        }
    }
    let _ = stop_tx.send(true);
    for (_, stop) in running.values() {
        let _ = stop.send(true);
    }
    for (_, (task, _)) in running {
        let _ = task.await;
    }
    let _ = pruner.await;
}

/// The resources to register with the kubelet now: those with a device
/// (one gone while allocated included), and those whose definition asks
/// to be registered empty (`device_plugin.register_empty`). Another
/// resource would show on every node as 0 allocatable; it is registered
/// when its first device appears. A resource withheld while another
/// plugin serves its devices ([`withhold`]) is not registered (one
/// registered already stays, with an empty list).
pub fn to_register(inventory: &Inventory) -> BTreeSet<String> {
    inventory
        .resources
        .iter()
        .filter(|(_, r)| r.withheld.is_none())
        .filter(|(_, r)| !r.devices.is_empty() || r.def.register_empty)
        .map(|(name, _)| name.clone())
        .collect()
}

/// The identity of the file at `path` ([`FileId`]), `None` when absent.
fn identity(path: &Path) -> Option<FileId> {
    FileId::at(path)
}

/// Removes our socket at `path`, only when it is a socket.
fn remove_socket(path: &Path) {
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
        let _ = std::fs::remove_file(path);
    }
}

/// Serves one resource: bind, serve, register; again whenever the kubelet
/// restarts (its socket re-created, or ours deleted); until `stop`.
async fn serve_resource(
    resource: String,
    shared: Arc<Shared>,
    plugin_dir: PathBuf,
    pod_uid: Option<String>,
    mut stop: tw::Receiver<bool>,
) {
    let kubelet_sock = plugin_dir.join(KUBELET_SOCKET);
    let name = socket_name(&resource, pod_uid.as_deref());
    let rolling = pod_uid.is_some();
    let path = plugin_dir.join(&name);
    let mut waiting_logged = false;
    let mut retry = Duration::from_secs(1);
    while !*stop.borrow() {
        let Some(kubelet_id) = identity(&kubelet_sock) else {
            if !waiting_logged {
                tracing::info!(
                    "{resource}: waiting for the kubelet's socket {}",
                    kubelet_sock.display()
                );
                waiting_logged = true;
            }
            if sleep_or_stop(POLL, &mut stop).await {
                break;
            }
            continue;
        };
        waiting_logged = false;
        if let Ok(m) = std::fs::symlink_metadata(&path) {
            if m.file_type().is_socket() {
                let _ = std::fs::remove_file(&path);
            } else {
                tracing::error!(
                    "{resource}: {} exists and is not a socket; not touching it",
                    path.display()
                );
                if sleep_or_stop(Duration::from_secs(5), &mut stop).await {
                    break;
                }
                continue;
            }
        }
        let listener = match UnixListener::bind(&path) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!("{resource}: cannot listen on {}: {e}", path.display());
                if sleep_or_stop(retry, &mut stop).await {
                    break;
                }
                retry = (retry * 2).min(Duration::from_secs(30));
                continue;
            }
        };
        let own_id = identity(&path);
        let (end_tx, mut end_rx) = tw::channel(false);
        let dropped = Arc::new(AtomicBool::new(false));
        let service = DevicePluginServer::new(Plugin {
            resource: resource.clone(),
            shared: Arc::clone(&shared),
            ended: end_rx.clone(),
            dropped: Arc::clone(&dropped),
        })
        .max_decoding_message_size(MAX_MESSAGE);
        let server = tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming_shutdown(
                    crate::front::incoming(listener, "a device plugin socket"),
                    async move {
                        let _ = end_rx.wait_for(|e| *e).await;
                    },
                ),
        );
        // Serving first, then registering (the kubelet dials back at once).
        let registered = kubelet::register(&kubelet_sock, &resource, &name, options()).await;
        let restart = match registered {
            Ok(()) => {
                tracing::info!("{resource}: registered with the kubelet as {name}");
                retry = Duration::from_secs(1);
                // Watch for a kubelet restart.
                loop {
                    if sleep_or_stop(POLL, &mut stop).await {
                        break false;
                    }
                    if identity(&path) != own_id {
                        tracing::info!(
                            "{resource}: {} was removed (kubelet restart): registering again",
                            path.display()
                        );
                        break true;
                    }
                    if identity(&kubelet_sock) != Some(kubelet_id) {
                        tracing::info!(
                            "{resource}: {} was re-created (kubelet restart): registering again",
                            kubelet_sock.display()
                        );
                        break true;
                    }
                    // The kubelet closed a ListAndWatch stream of ours
                    // while it runs: in a rolling update, the older
                    // instance stopped and the kubelet dropped this one
                    // with it. Registered again in place: ending our
                    // other streams would make it drop the new one.
                    if rolling && dropped.swap(false, Ordering::SeqCst) {
                        tracing::info!(
                            "{resource}: the kubelet closed our ListAndWatch stream: registering again"
                        );
                        if let Err(e) =
                            kubelet::register(&kubelet_sock, &resource, &name, options()).await
                        {
                            tracing::error!("{resource}: {e}; serving anew");
                            break true;
                        }
                    }
                }
            }
            Err(e) => {
                tracing::error!(
                    "{resource}: {e}; retrying in {}",
                    humantime::format_duration(retry)
                );
                if sleep_or_stop(retry, &mut stop).await {
                    false
                } else {
                    retry = (retry * 2).min(Duration::from_secs(30));
                    true
                }
            }
        };
        let _ = end_tx.send(true);
        // The streams of this registration end with `end_tx`; the accept
        // loop is stopped, and connections still open close when their
        // peer (the old kubelet) is gone.
        server.abort();
        if identity(&path) == own_id {
            remove_socket(&path);
        }
        if !restart {
            break;
        }
    }
    remove_socket(&path);
}

/// Sleeps `d`; true when `stop` was set meanwhile (or its sender went).
async fn sleep_or_stop(d: Duration, stop: &mut tw::Receiver<bool>) -> bool {
    let stopped = tokio::time::timeout(d, stop.wait_for(|s| *s)).await;
    // Set, or its sender gone: stop; the time passed: go on.
    stopped.is_ok()
}

/// Updates the devices held from the kubelet's `live` list: a device it
/// lists is held (and from now on only while listed); one it does not
/// list is released, unless it was handed out less than [`GRACE`] ago and
/// never listed (the kubelet records an allocation after Allocate
/// answers).
pub fn update_held(
    held: &mut BTreeMap<(String, String), Held>,
    live: &BTreeSet<(String, String)>,
    now: Instant,
) {
    held.retain(|k, h| {
        live.contains(k) || (!h.listed && now.saturating_duration_since(h.since) < GRACE)
    });
    for k in live {
        held.entry(k.clone())
            .or_insert(Held {
                since: now,
                listed: true,
            })
            .listed = true;
    }
}

/// Matches device-info files with live allocations: after every pass,
/// and every [`PRUNE_EVERY`]. Live allocations come from the kubelet's pod
/// resources API: a file is removed only after it answered, and never
/// while the devices handed out are unknown. Those of the last process
/// come from its record ([`held`]); a directory with files but no
/// readable record waits [`GRACE`] (by then every allocation is listed).
async fn prune_loop(
    rx: tw::Receiver<Arc<Inventory>>,
    passed: Arc<Notify>,
    shared: Arc<Shared>,
    options: Options,
    mut stop: tw::Receiver<bool>,
) {
    let mut unknown_until = recover(&shared, &options.devinfo_dir).await;
    let mut warned = false;
    loop {
        let inventory = rx.borrow().clone();
        let live = if options.pod_resources.exists() {
            kubelet::live_devices(&options.pod_resources).await
        } else {
            Err(format!(
                "{}: no pod resources socket",
                options.pod_resources.display()
            ))
        };
        match live {
            Ok(live) => {
                if std::mem::take(&mut warned) {
                    tracing::info!("the pod resources API answers again");
                }
                let now = Instant::now();
                let live: BTreeSet<(String, String)> = live.into_iter().collect();
                if let Ok(mut a) = shared.allocated.lock() {
                    update_held(&mut a, &live, now);
                }
                match unknown_until {
                    Some(t) if now < t => {}
                    _ => {
                        unknown_until = None;
                        prune_now(&shared, &options, &inventory, live, now).await;
                    }
                }
            }
            Err(e) => {
                if !std::mem::replace(&mut warned, true) {
                    tracing::warn!("{e}; not removing any device-info file until it answers");
                }
            }
        }
        tokio::select! {
            () = tokio::time::sleep(PRUNE_EVERY) => {}
            () = passed.notified() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// At start: the devices the last process handed out, from its record,
/// are held again. Returns until when no file may be removed: [`GRACE`]
/// from now when there are device-info files but no readable record.
async fn recover(shared: &Shared, dir: &Path) -> Option<Instant> {
    let d = dir.to_path_buf();
    let (recorded, has_files) =
        tokio::task::spawn_blocking(move || (held::load(&d), devinfo::has_files(&d)))
            .await
            .unwrap_or_else(|e| (Err(e.to_string()), true));
    let wait = humantime::format_duration(GRACE);
    match recorded {
        Ok(Some(recorded)) => {
            if !recorded.is_empty() {
                tracing::info!(
                    "{} devices handed out before this start: held until the kubelet no longer lists them",
                    recorded.len()
                );
            }
            if let Ok(mut a) = shared.allocated.lock() {
                for (k, e) in recorded {
                    a.entry(k).or_insert(Held {
                        since: e.since,
                        listed: e.listed,
                    });
                }
            }
            None
        }
        Ok(None) if !has_files => None,
        Ok(None) => {
            tracing::warn!(
                "{}: device-info files but no record of the devices handed out: none is removed for {wait}",
                held::path(dir).display()
            );
            Some(Instant::now() + GRACE)
        }
        Err(e) => {
            tracing::warn!(
                "{e}: the devices handed out are unknown: no device-info file is removed for {wait}"
            );
            Some(Instant::now() + GRACE)
        }
    }
}

/// Prunes with the kubelet's answer `live`: the record on disk brought up
/// to date as the allocations in memory are (a device Allocate recorded
/// and memory does not hold yet is kept), saved, then each file whose
/// device is held by neither is removed.
async fn prune_now(
    shared: &Shared,
    options: &Options,
    inventory: &Arc<Inventory>,
    live: BTreeSet<(String, String)>,
    now: Instant,
) {
    let memory: held::Held = shared
        .allocated
        .lock()
        .map(|a| {
            a.iter()
                .map(|(k, h)| {
                    let e = held::Entry {
                        since: h.since,
                        listed: h.listed,
                    };
                    (k.clone(), e)
                })
                .collect()
        })
        .unwrap_or_default();
    let dir = options.devinfo_dir.clone();
    let inv = Arc::clone(inventory);
    let done = tokio::task::spawn_blocking(move || {
        let mut merged = memory;
        let errors = devinfo::prune(&dir, &inv, |recorded| {
            let before = recorded.as_ref().map(owned_listed);
            if let Some(recorded) = recorded {
                let mut on_disk: BTreeMap<(String, String), Held> = recorded
                    .into_iter()
                    .map(|(k, e)| {
                        let h = Held {
                            since: e.since,
                            listed: e.listed,
                        };
                        (k, h)
                    })
                    .collect();
                update_held(&mut on_disk, &live, now);
                for (k, h) in on_disk {
                    merged.entry(k).or_insert(held::Entry {
                        since: h.since,
                        listed: h.listed,
                    });
                }
            }
            if before.as_ref() != Some(&owned_listed(&merged)) {
                held::save(&dir, &merged)?;
            }
            Ok(merged.keys().cloned().collect())
        });
        (errors, merged)
    })
    .await;
    let Ok((errors, merged)) = done else {
        return;
    };
    if let Ok(mut a) = shared.allocated.lock() {
        for (k, e) in merged {
            a.entry(k).or_insert(Held {
                since: e.since,
                listed: e.listed,
            });
        }
    }
    for e in errors {
        tracing::error!("{e}");
    }
}

/// Which devices are held, and whether listed.
fn owned_listed(h: &held::Held) -> BTreeMap<(String, String), bool> {
    held::listed(h)
        .into_iter()
        .map(|(k, l)| (k.clone(), l))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deviceplugin::inventory::{Entry, Resource, ResourceDef};

    /// An inventory of one GPU under `cdigen.io/nvidia`, whose generator
    /// lists NVIDIA's resources.
    fn gpus() -> Inventory {
        let entry = Entry {
            id: "GPU-1".into(),
            cdi_name: "nvidia.com/gpu=GPU-1".into(),
            unhealthy: None,
            placement: Default::default(),
            device: Arc::default(),
            present: true,
        };
        let r = Resource {
            def: ResourceDef {
                name: "cdigen.io/nvidia".into(),
                generator: "nvidia".into(),
                kind: "nvidia.com/gpu".into(),
                source: PathBuf::from("builtin:generators/nvidia.yaml"),
                replicas: 1,
                pool: false,
                register_empty: false,
                vendor_resources: vec!["nvidia.com/gpu*".into(), "nvidia.com/mig-*".into()],
            },
            spec_file: PathBuf::from("/var/run/cdi/nvidia.com-gpu.yaml"),
            devices: BTreeMap::from([(entry.id.clone(), entry)]),
            plan: None,
            withheld: None,
        };
        Inventory {
            resources: BTreeMap::from([(r.def.name.clone(), r)]),
            ..Inventory::default()
        }
    }

    #[test]
    fn devices_a_live_vendor_plugin_serves_are_withheld_until_it_goes() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let inv = gpus();
        let mut state = BTreeMap::new();
        // No vendor plugin: offered, and registered.
        assert_eq!(withhold(&inv, dir, &mut state), inv);
        assert_eq!(
            to_register(&inv),
            BTreeSet::from(["cdigen.io/nvidia".into()])
        );
        // NVIDIA's plugin serves nvidia.com/gpu.shared: none offered, not
        // registered, remembered (one warning).
        let l = std::os::unix::net::UnixListener::bind(dir.join("nvidia-gpu.shared.sock")).unwrap();
        let out = withhold(&inv, dir, &mut state);
        let r = &out.resources["cdigen.io/nvidia"];
        assert!(r.devices.is_empty());
        assert_eq!(r.withheld.as_deref(), Some("nvidia.com/gpu.shared"));
        assert!(to_register(&out).is_empty());
        assert_eq!(
            state["cdigen.io/nvidia"].socket,
            dir.join("nvidia-gpu.shared.sock")
        );
        // Even with register_empty, a withheld resource is not registered.
        let mut empty = out.clone();
        if let Some(r) = empty.resources.get_mut("cdigen.io/nvidia") {
            r.def.register_empty = true;
        }
        assert!(to_register(&empty).is_empty());
        // It stops listening: offered again, forgotten.
        drop(l);
        assert_eq!(withhold(&inv, dir, &mut state), inv);
        assert!(state.is_empty());
        // A definition that lists none is never withheld.
        let _l = std::os::unix::net::UnixListener::bind(dir.join("nvidia-gpu.sock")).unwrap();
        let mut both = inv.clone();
        if let Some(r) = both.resources.get_mut("cdigen.io/nvidia") {
            r.def.vendor_resources.clear();
        }
        assert_eq!(withhold(&both, dir, &mut state), both);
    }

    #[test]
    fn names_per_instance() {
        assert_eq!(
            socket_name("cdigen.io/vf", None),
            "cdigen-cdigen.io_vf.sock"
        );
        assert_eq!(
            socket_name("cdigen.io/vf", Some("u-1")),
            "cdigen-cdigen.io_vf-u-1.sock"
        );
        assert_eq!(lock_name(None), LOCK_FILE);
        assert_eq!(lock_name(Some("u-1")), ".cdigen-device-plugin-u-1.lock");
    }

    #[test]
    fn a_dead_instances_sockets_go_a_live_ones_stay() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let sock = |n: &str| std::os::unix::net::UnixListener::bind(dir.join(n)).unwrap();
        let _s = [
            sock("cdigen-a_b-dead.sock"),
            sock("cdigen-a_b-live.sock"),
            sock("cdigen-a_b-nolock.sock"),
            sock("cdigen-a_b-me.sock"),
        ];
        std::fs::write(dir.join(".cdigen-device-plugin-dead.lock"), "1\n").unwrap();
        let _live = lock_plugin_dir(dir, Some("live")).unwrap();
        let _me = lock_plugin_dir(dir, Some("me")).unwrap();
        let mut left: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                ".cdigen-device-plugin-live.lock",
                ".cdigen-device-plugin-me.lock",
                "cdigen-a_b-live.sock",
                "cdigen-a_b-me.sock",
                "cdigen-a_b-nolock.sock",
            ]
        );
        let e = lock_plugin_dir(dir, Some("../x")).unwrap_err().to_string();
        assert!(e.starts_with("pod UID \"../x\": not a UID"), "{e}");
    }

    fn key(id: &str) -> (String, String) {
        ("cdigen.io/vf".to_string(), id.to_string())
    }

    #[test]
    fn allocations_are_held_within_grace_then_exactly_while_listed() {
        let t0 = Instant::now();
        let mut held = BTreeMap::from([(
            key("a"),
            Held {
                since: t0,
                listed: false,
            },
        )]);
        // Not listed yet, handed out moments ago: held.
        update_held(&mut held, &BTreeSet::new(), t0 + Duration::from_secs(1));
        assert!(held.contains_key(&key("a")));
        // Listed: held, and listed from now on; what the kubelet lists
        // that was not handed out here (before a restart) is held too.
        let live = BTreeSet::from([key("a"), key("b")]);
        update_held(&mut held, &live, t0 + Duration::from_secs(2));
        assert!(held.values().all(|h| h.listed));
        assert_eq!(held.len(), 2);
        // No longer listed: released at once, within the grace time.
        update_held(
            &mut held,
            &BTreeSet::from([key("b")]),
            t0 + Duration::from_secs(3),
        );
        assert_eq!(held.keys().collect::<Vec<_>>(), [&key("b")]);
        // Never listed: released once the grace time is over.
        held.insert(
            key("c"),
            Held {
                since: t0,
                listed: false,
            },
        );
        update_held(
            &mut held,
            &BTreeSet::from([key("b")]),
            t0 + GRACE - Duration::from_secs(1),
        );
        assert!(held.contains_key(&key("c")));
        update_held(&mut held, &BTreeSet::from([key("b")]), t0 + GRACE);
        assert!(!held.contains_key(&key("c")));
    }
}

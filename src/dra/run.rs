//! The DRA driver process: the watch loop on the main thread keeps the
//! specs current and, after each pass, the inventory, the devices
//! ([`super::names`]) and the slices ([`super::slices`]); a tokio thread
//! publishes the slices ([`super::publish`]) and serves the kubelet plugin,
//! both fed through `tokio::sync::watch` channels. On SIGTERM the watch
//! ends, the channels close, the plugin stops and the slices are deleted.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context as _;
use tokio::sync::watch as tw;

use super::names::{self, DraDevice};
use super::publish::{Desired, Publisher};
use super::{ClaimApi, checkpoint, kubeapi, plugin, slices};
use crate::deviceplugin::inventory::Inventory;
use crate::deviceplugin::passes::{AfterPass, Passes, serve_beside};
use crate::root::HostRoot;
use crate::watch::{self, Control, EventSource, Pipeline};

/// How the driver runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// The driver name (a DNS subdomain).
    pub driver: String,
    /// The node: the slices' nodeName and pool.
    pub node: String,
    /// The kubelet's plugin directory (`<dir>/<driver>/dra.sock`).
    pub plugin_dir: PathBuf,
    /// The kubelet's plugin registration directory.
    pub registry_dir: PathBuf,
    /// Where CDI specs are written, the per-claim specs too.
    pub output_dir: PathBuf,
    /// The host (`--root`): prepared network devices' addresses are read
    /// from its `/sys/class/net`.
    pub root: Arc<HostRoot>,
    /// This pod's UID (`--pod-uid`), for a rolling update: the new pod
    /// serves beside the old one ([`plugin::Config::with_pod_uid`]) and
    /// the slices stay when an instance stops.
    pub pod_uid: Option<String>,
    /// The health codes acted on (`--ignore-health`).
    pub health: crate::deviceplugin::signals::Checks,
}

/// What the driver does after each pass: the devices and the slices of
/// the new inventory, to the kubelet plugin and the publisher.
struct Publish {
    /// The plugin's directory: its checkpoint says which devices are held.
    driver_dir: PathBuf,
    held: checkpoint::HeldDevices,
    driver: String,
    node: String,
    devices: tw::Sender<Arc<Vec<DraDevice>>>,
    slices: tw::Sender<Option<Arc<Desired>>>,
    /// How the slices sent hold the devices sent.
    layout: Option<slices::Layout>,
}

impl AfterPass for Publish {
    /// The (resource, ID) of each device a prepared claim holds, by the
    /// plugin's checkpoint and the devices last published: they stay
    /// published (tainted) while gone, as the device plugin keeps
    /// allocated ones. An unreadable checkpoint holds nothing (the plugin
    /// warns about it).
    fn held(&mut self, _previous: &Inventory) -> BTreeSet<(String, String)> {
        let names = self.held.names(&self.driver_dir);
        self.devices
            .borrow()
            .iter()
            .filter(|d| !d.shared && names.contains(d.name.as_str()))
            .map(|d| (d.resource.clone(), d.entry.id.clone()))
            .collect()
    }

    fn after(&mut self, inv: &Inventory, first: bool, since: Instant) {
        let built = Instant::now();
        let devices = names::devices(inv);
        // Only the slices whose devices changed are made again; held
        // compactly from here (the typed slices go at once).
        // Devices stay in their slices (slices::slices_since).
        let before = self.slices.borrow().clone();
        let before_devices = Arc::clone(&self.devices.borrow());
        let previous = before.as_deref().filter(|_| !first);
        let layout = self.layout.take().filter(|_| previous.is_some());
        let (made, layout) = slices::slices_since(
            &devices,
            layout.as_ref().map(|l| (l, before_devices.as_slice())),
            &self.driver,
            &self.node,
            0,
            |name| previous.is_some_and(|p| p.has(name)),
        );
        let wanted = match Desired::reusing(made, previous, since) {
            Some(w) => {
                self.layout = Some(layout);
                w
            }
            // Never: a slice left out is one `has` found.
            None => Desired::new(slices::slices(&devices, &self.driver, &self.node, 0), since),
        };
        tracing::debug!(
            "pass and its inventory {} ms, then {} devices and {} slices in {} ms",
            built.saturating_duration_since(since).as_millis(),
            devices.len(),
            wanted.len(),
            built.elapsed().as_millis()
        );
        self.slices.send_if_modified(|cur| {
            if !first && cur.as_ref().is_some_and(|d| d.same_slices(&wanted)) {
                false
            } else {
                *cur = Some(Arc::new(wanted));
                true
            }
        });
        self.devices.send_if_modified(|cur| {
            if !first && **cur == devices {
                false
            } else {
                *cur = Arc::new(devices);
                true
            }
        });
    }
}

/// Runs the driver until SIGTERM (or `control.stop()`), with the watch's
/// events from the source `open_source` opens (on this thread, the main one), and
/// the API server from the environment ([`kubeapi::client`]).
///
/// # Errors
/// No API server configuration, invalid resources or colliding IDs at
/// start, or a watch that cannot run.
pub fn run(
    config: &watch::Config,
    open_source: impl FnOnce() -> anyhow::Result<Box<dyn EventSource>> + Send + 'static,
    pipeline: Pipeline,
    control: Arc<Control>,
    options: &Options,
) -> anyhow::Result<()> {
    slices::check_driver_name(&options.driver).map_err(anyhow::Error::msg)?;
    slices::check_node_name(&options.node).map_err(anyhow::Error::msg)?;
    // Before anything is published: a second driver of this name on the
    // node must not take over the sockets, nor delete the slices of the
    // first on its way out. Held until the driver has stopped.
    // In a rolling update, the lock is this pod's: the instances share the
    // slices and the checkpoint.
    let _instance = plugin::lock_driver_dir(
        &options.plugin_dir.join(&options.driver),
        options.pod_uid.as_deref(),
    )?;
    let passthrough: BTreeSet<String> = pipeline
        .generators()
        .iter()
        .filter(|l| l.generator.dra.vfio_passthrough)
        .map(|l| l.generator.name.clone())
        .collect();
    let (devices_tx, devices_rx) = tw::channel(Arc::new(Vec::new()));
    let (slices_tx, slices_rx) = tw::channel(None);
    let fatal = Arc::new(Mutex::new(None));
    let publish = Passes::new(
        pipeline,
        options.output_dir.clone(),
        Arc::clone(&control),
        Arc::clone(&fatal),
        Publish {
            driver_dir: options.plugin_dir.join(&options.driver),
            held: checkpoint::HeldDevices::default(),
            driver: options.driver.clone(),
            node: options.node.clone(),
            devices: devices_tx,
            slices: slices_tx,
            layout: None,
        },
    )?
    .with_checks(options.health.clone());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    let client = runtime.block_on(kubeapi::client())?;
    // The watch ends on SIGTERM; dropping the passes then closes the channels: the driver stops.
    let server = {
        let (options, control, fatal) = (options.clone(), Arc::clone(&control), Arc::clone(&fatal));
        move || {
            runtime.block_on(serve(
                client,
                devices_rx,
                slices_rx,
                options,
                passthrough,
                &control,
                &fatal,
            ));
        }
    };
    let watched = serve_beside("server", server, publish, config, open_source, &control);
    if let Some(e) = fatal.lock().ok().and_then(|mut f| f.take()) {
        return Err(e);
    }
    watched?;
    Ok(())
}

/// Publishes the slices and serves the kubelet plugin until the watch
/// closes the channels; then the plugin stops and the slices go.
async fn serve(
    client: kube::Client,
    devices: tw::Receiver<Arc<Vec<DraDevice>>>,
    slices: tw::Receiver<Option<Arc<Desired>>>,
    options: Options,
    passthrough: BTreeSet<String>,
    control: &Control,
    fatal: &Mutex<Option<anyhow::Error>>,
) {
    let (stop_tx, stop_rx) = tw::channel(false);
    let claims: Arc<dyn ClaimApi> = Arc::new(kubeapi::KubeClaims::new(client.clone()));
    let mut publisher = Publisher::new(client, &options.driver, &options.node);
    if options.pod_uid.is_some() {
        publisher = publisher.keep_on_exit();
    }
    // The slices go on the way out whatever stops the driver: the
    // publisher ends when the watch closes its channel.
    let publishing = tokio::spawn(publisher.run(slices, stop_rx.clone()));
    let mut config = plugin::Config::new(
        &options.driver,
        &options.node,
        &options.plugin_dir,
        &options.registry_dir,
        Arc::clone(&options.root),
    );
    config.prepare.cdi_dir = options.output_dir.clone();
    config.prepare.passthrough.generators = passthrough;
    if let Some(uid) = &options.pod_uid {
        config = config.with_pod_uid(uid);
    }
    let mut plugin_stop = stop_rx;
    let plugin = plugin::start(config, claims, devices.clone(), async move {
        let _ = plugin_stop.wait_for(|stop| *stop).await;
    })
    .await;
    let plugin = match plugin {
        Ok(running) => {
            if let Some(w) = &running.checkpoint_warning {
                tracing::warn!("{w}");
            }
            Some(running)
        }
        Err(e) => {
            // Slices nobody can prepare would strand pods: stop, and say
            // why (the slices go on the way out).
            if let Ok(mut f) = fatal.lock() {
                *f = Some(e.context("the kubelet plugin cannot start"));
            }
            control.stop();
            None
        }
    };
    let mut closed = devices;
    while closed.changed().await.is_ok() {}
    let _ = stop_tx.send(true);
    if let Some(running) = plugin {
        running.wait().await;
    }
    let _ = publishing.await;
}

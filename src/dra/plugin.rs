//! The kubelet-facing side of the DRA driver: two gRPC servers on Unix
//! sockets.
//!
//! - The registration service (`pluginregistration.Registration`) on
//!   `<registry dir>/<driver>-reg.sock`, which the kubelet's plugin
//!   watcher finds: `GetInfo` says `DRAPlugin`, the driver's name, the DRA
//!   socket and both service versions; `NotifyRegistrationStatus` is
//!   logged and kept ([`Running::registration`]).
//! - The DRA service, `v1.DRAPlugin` and `v1beta1.DRAPlugin` (the kubelet
//!   picks the newest it has), on `<plugin dir>/<driver>/dra.sock`; both
//!   answer through one [`Preparer`]. The same socket serves the resource
//!   health stream, `v1alpha1.DRAResourceHealth` and `v1.DRAResourceHealth`
//!   ([`super::health`]).
//!
//! With a pod UID ([`Config::pod_uid`], `--pod-uid`: a rolling update
//! of the DaemonSet), each instance has its own sockets,
//! `<driver>-<uid>-reg.sock` and `<driver>/dra-<uid>.sock`, and its own
//! instance lock, so that the new pod serves beside the old one (the
//! kubelet uses the newest it registered) and every call of either goes
//! through the checkpoint on disk ([`Preparer`]'s serialization). Sockets
//! another instance left are removed only when its lock proves it gone
//! ([`crate::write::instance`]); otherwise they are left, with a warning
//! when nothing tells.
//!
//! Each time it starts, the driver removes the sockets a previous run left
//! (as the plugin watcher asks) and listens anew; it removes only sockets:
//! anything else at those paths (a file, a directory, a symbolic link) is
//! never followed nor deleted, and the start fails naming it. The DRA
//! socket serves before the registration socket appears, so the kubelet
//! never dials back into nothing. At shutdown both sockets are removed
//! (those still ours).

use std::future::Future;
use std::os::unix::fs::{DirBuilderExt as _, FileTypeExt as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use tokio::net::UnixListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tonic::{Request, Response, Status};

use super::ClaimApi;
use super::api::pluginregistration::registration_server::{Registration, RegistrationServer};
use super::api::pluginregistration::{
    InfoRequest, PluginInfo, RegistrationStatus, RegistrationStatusResponse,
};
use super::api::{self, v1, v1beta1};
use super::health;
use super::names::DraDevice;
use super::prepare::{self, AttributesFn, ClaimRef, Preparer};
use crate::fsio::FileId;
use crate::root::HostRoot;

/// The DRA socket's name in the driver's directory.
pub const DRA_SOCKET: &str = "dra.sock";

/// The lock a running driver holds in its directory
/// (`<plugin dir>/<driver>`), with its PID
/// ([`crate::write::lock_instance`]): a second driver of the same name
/// fails at start.
pub const LOCK_FILE: &str = ".cdigen-dra-driver.lock";

/// The instance lock's name: [`LOCK_FILE`], or per pod UID
/// (`.cdigen-dra-driver-<uid>.lock`) in a rolling update.
pub fn lock_name(pod_uid: Option<&str>) -> String {
    match pod_uid {
        None => LOCK_FILE.to_string(),
        Some(uid) => format!(".cdigen-dra-driver-{uid}.lock"),
    }
}

/// The DRA socket's name: [`DRA_SOCKET`], or `dra-<uid>.sock`.
pub fn dra_socket_name(pod_uid: Option<&str>) -> String {
    match pod_uid {
        None => DRA_SOCKET.to_string(),
        Some(uid) => format!("dra-{uid}.sock"),
    }
}

/// The registration socket's name: `<driver>-reg.sock`, or
/// `<driver>-<uid>-reg.sock`.
pub fn registration_socket_name(driver: &str, pod_uid: Option<&str>) -> String {
    match pod_uid {
        None => format!("{driver}-reg.sock"),
        Some(uid) => format!("{driver}-{uid}-reg.sock"),
    }
}

/// Creates the driver's directory when missing and takes its instance
/// lock ([`lock_name`]: one per pod UID in a rolling update).
///
/// # Errors
/// Another driver (of this pod UID) holds it (its PID named), an invalid
/// pod UID, or the directory or the lock cannot be made.
pub fn lock_driver_dir(dir: &Path, pod_uid: Option<&str>) -> anyhow::Result<crate::write::DirLock> {
    if let Some(uid) = pod_uid {
        crate::write::check_pod_uid(uid).map_err(anyhow::Error::msg)?;
    }
    make_dir(dir, 0o750)?;
    crate::write::lock_instance(dir, &lock_name(pod_uid))
        .map_err(anyhow::Error::from)
        .with_context(|| format!("cannot serve in {}", dir.display()))
}

/// How the plugin runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// The kubelet's plugin directory: the driver's directory
    /// (`<dir>/<driver>`: DRA socket, checkpoint, metadata) is in it.
    pub plugin_dir: PathBuf,
    /// The kubelet's plugin watcher directory (the registration socket).
    pub registry_dir: PathBuf,
    /// How claims are prepared (driver, node, CDI directory, ...).
    pub prepare: prepare::Options,
    /// This pod's UID, for a rolling update: the sockets are this
    /// instance's own and the checkpoint is shared
    /// ([`prepare::Options::serialize`]); `None`: the only instance.
    pub pod_uid: Option<String>,
    /// How often the health stream repeats its report
    /// ([`super::health::PERIOD`]).
    pub health_period: std::time::Duration,
}

impl Config {
    /// The plugin of `driver` on `node` with these directories, writing
    /// per-claim specs into [`crate::cdi::DYNAMIC_DIR`], reading the host
    /// through `root`, with device metadata on, carrying each device's
    /// attributes as its slice publishes them ([`super::slices::attributes`]).
    pub fn new(
        driver: &str,
        node: &str,
        plugin_dir: &Path,
        registry_dir: &Path,
        root: Arc<HostRoot>,
    ) -> Self {
        let attributes: AttributesFn = Arc::new(super::slices::attributes);
        Config {
            plugin_dir: plugin_dir.to_path_buf(),
            registry_dir: registry_dir.to_path_buf(),
            prepare: prepare::Options {
                driver: driver.to_string(),
                node: node.to_string(),
                driver_dir: plugin_dir.join(driver),
                cdi_dir: PathBuf::from(crate::cdi::DYNAMIC_DIR),
                root,
                metadata: true,
                attributes,
                serialize: false,
                passthrough: super::passthrough::Settings::default(),
            },
            pod_uid: None,
            health_period: super::health::PERIOD,
        }
    }

    /// In a rolling update as the pod `uid`: its own sockets, and every
    /// call through the shared checkpoint.
    #[must_use]
    pub fn with_pod_uid(mut self, uid: &str) -> Self {
        self.pod_uid = Some(uid.to_string());
        self.prepare.serialize = true;
        self
    }

    /// The DRA socket: `<plugin dir>/<driver>/dra.sock`
    /// ([`dra_socket_name`]).
    pub fn dra_socket(&self) -> PathBuf {
        self.prepare
            .driver_dir
            .join(dra_socket_name(self.pod_uid.as_deref()))
    }

    /// The registration socket: `<registry dir>/<driver>-reg.sock`
    /// ([`registration_socket_name`]).
    pub fn registration_socket(&self) -> PathBuf {
        self.registry_dir.join(registration_socket_name(
            &self.prepare.driver,
            self.pod_uid.as_deref(),
        ))
    }
}

/// What the kubelet said of the registration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegistrationState {
    /// Nothing yet.
    Pending,
    /// Registered.
    Registered,
    /// Refused, with the kubelet's reason.
    Failed(String),
}

/// The registration service.
#[derive(Debug)]
struct Registrar {
    info: PluginInfo,
    state: watch::Sender<RegistrationState>,
}

#[tonic::async_trait]
impl Registration for Registrar {
    async fn get_info(&self, _: Request<InfoRequest>) -> Result<Response<PluginInfo>, Status> {
        Ok(Response::new(self.info.clone()))
    }

    async fn notify_registration_status(
        &self,
        request: Request<RegistrationStatus>,
    ) -> Result<Response<RegistrationStatusResponse>, Status> {
        let s = request.into_inner();
        let state = if s.plugin_registered {
            tracing::info!(
                "registered with the kubelet as DRA driver {}",
                self.info.name
            );
            RegistrationState::Registered
        } else {
            let why = crate::text::escape(&s.error).to_string();
            tracing::warn!("the kubelet refused DRA driver {}: {why}", self.info.name);
            RegistrationState::Failed(why)
        };
        self.state.send_replace(state);
        Ok(Response::new(RegistrationStatusResponse {}))
    }
}

/// Answers of both DRA service versions, whose messages are field for
/// field the same.
macro_rules! dra_service {
    ($name:ident, $v:ident) => {
        /// The DRA service of one version.
        #[derive(Debug, Clone)]
        struct $name(Arc<Preparer>);

        #[tonic::async_trait]
        impl $v::dra_plugin_server::DraPlugin for $name {
            async fn node_prepare_resources(
                &self,
                request: Request<$v::NodePrepareResourcesRequest>,
            ) -> Result<Response<$v::NodePrepareResourcesResponse>, Status> {
                let claims = claims(
                    request
                        .into_inner()
                        .claims
                        .into_iter()
                        .map(|c| (c.namespace, c.uid, c.name)),
                )?;
                let mut out = $v::NodePrepareResourcesResponse::default();
                for (uid, answer) in self.0.prepare(&claims).await {
                    let one = match answer {
                        Ok(devices) => $v::NodePrepareResourceResponse {
                            devices: devices
                                .into_iter()
                                .map(|d| $v::Device {
                                    request_names: d.requests,
                                    pool_name: d.pool,
                                    device_name: d.device,
                                    cdi_device_ids: d.cdi_ids,
                                })
                                .collect(),
                            error: String::new(),
                        },
                        Err(error) => $v::NodePrepareResourceResponse {
                            devices: Vec::new(),
                            error,
                        },
                    };
                    out.claims.insert(uid, one);
                }
                Ok(Response::new(out))
            }

            async fn node_unprepare_resources(
                &self,
                request: Request<$v::NodeUnprepareResourcesRequest>,
            ) -> Result<Response<$v::NodeUnprepareResourcesResponse>, Status> {
                let claims = claims(
                    request
                        .into_inner()
                        .claims
                        .into_iter()
                        .map(|c| (c.namespace, c.uid, c.name)),
                )?;
                let mut out = $v::NodeUnprepareResourcesResponse::default();
                for (uid, answer) in self.0.unprepare(&claims).await {
                    let error = answer.err().unwrap_or_default();
                    out.claims
                        .insert(uid, $v::NodeUnprepareResourceResponse { error });
                }
                Ok(Response::new(out))
            }
        }
    };
}

dra_service!(DraV1, v1);
dra_service!(DraV1beta1, v1beta1);

/// The claims of a request, at most [`prepare::MAX_CLAIMS`].
fn claims(raw: impl Iterator<Item = (String, String, String)>) -> Result<Vec<ClaimRef>, Status> {
    let out: Vec<ClaimRef> = raw
        .map(|(namespace, uid, name)| ClaimRef {
            namespace,
            uid,
            name,
        })
        .collect();
    if out.len() > prepare::MAX_CLAIMS {
        return Err(Status::invalid_argument(format!(
            "{} claims in one request; at most {}",
            out.len(),
            prepare::MAX_CLAIMS
        )));
    }
    Ok(out)
}

/// How long calls in flight may take to finish once the plugin stops.
pub const DRAIN: std::time::Duration = std::time::Duration::from_secs(5);

/// The running plugin.
#[derive(Debug)]
pub struct Running {
    /// What the kubelet said of the registration.
    pub registration: watch::Receiver<RegistrationState>,
    /// What answers the DRA calls (its checkpoint: [`Preparer::prepared`]).
    pub preparer: Arc<Preparer>,
    /// Why the checkpoint was not read, when it was not.
    pub checkpoint_warning: Option<String>,
    /// The DRA socket.
    pub dra_socket: PathBuf,
    /// The registration socket.
    pub registration_socket: PathBuf,
    task: JoinHandle<()>,
}

impl Running {
    /// Waits until the servers have stopped (after the shutdown signal)
    /// and the sockets are removed.
    pub async fn wait(self) {
        let _ = self.task.await;
    }
}

/// The identity of the file at `path` ([`FileId`]), `None` when absent.
fn identity(path: &Path) -> Option<FileId> {
    FileId::at(path)
}

/// Removes an old socket at `path`; anything else there is an error.
fn clear_socket(path: &Path) -> anyhow::Result<()> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot examine {}", path.display())),
        Ok(m) if m.file_type().is_socket() => std::fs::remove_file(path)
            .with_context(|| format!("cannot remove the old socket {}", path.display())),
        Ok(m) => anyhow::bail!(
            "{} is {}, not a socket: not touching it (remove it, or choose another directory)",
            path.display(),
            crate::fsio::describe(m.file_type())
        ),
    }
}

/// Creates `dir` (mode `mode`) and its parents when missing.
fn make_dir(dir: &Path, mode: u32) -> anyhow::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(dir)
        .with_context(|| format!("cannot create {}", dir.display()))
}

/// In a rolling update: the sockets of the driver's other instances (by
/// their names, [`dra_socket_name`] and [`registration_socket_name`], the
/// pod UID in them) whose instance lock is free are removed: that
/// instance is gone, killed before it could remove them (the lock is held
/// meanwhile, and its file removed too). Those whose lock is held are
/// another live instance's; those without a lock file are left with a
/// warning (nothing tells whose they are).
fn clear_stale(config: &Config) {
    let Some(me) = config.pod_uid.as_deref() else {
        return;
    };
    let driver = &config.prepare.driver;
    let dir = &config.prepare.driver_dir;
    // Some(uid) per instance, None for a driver without a pod UID (the
    // version before the update); true when its DRA socket is there.
    let mut found: std::collections::BTreeMap<Option<String>, bool> = Default::default();
    let names = |d: &Path| -> Vec<String> {
        std::fs::read_dir(d)
            .map(|it| {
                it.filter_map(Result::ok)
                    .filter_map(|e| e.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    for name in names(dir) {
        if name == DRA_SOCKET {
            found.insert(None, true);
        } else if let Some(uid) = name
            .strip_prefix("dra-")
            .and_then(|n| n.strip_suffix(".sock"))
            .filter(|u| *u != me && crate::write::check_pod_uid(u).is_ok())
        {
            found.insert(Some(uid.to_string()), true);
        }
    }
    let prefix = format!("{driver}-");
    for name in names(&config.registry_dir) {
        if name == registration_socket_name(driver, None) {
            found.entry(None).or_insert(false);
        } else if let Some(uid) = name
            .strip_prefix(&prefix)
            .and_then(|n| n.strip_suffix("-reg.sock"))
            .filter(|u| *u != me && crate::write::check_pod_uid(u).is_ok())
        {
            found.entry(Some(uid.to_string())).or_insert(false);
        }
    }
    for (uid, has_dra_socket) in found {
        let uid = uid.as_deref();
        let sockets = [
            dir.join(dra_socket_name(uid)),
            config
                .registry_dir
                .join(registration_socket_name(driver, uid)),
        ];
        let lock = lock_name(uid);
        match crate::write::instance(dir, &lock) {
            crate::write::Instance::Held => {
                tracing::info!(
                    "another instance of {driver} serves ({} is held): leaving its sockets",
                    dir.join(&lock).display()
                );
            }
            crate::write::Instance::Gone(held) => {
                for s in &sockets {
                    if std::fs::symlink_metadata(s).is_ok_and(|m| m.file_type().is_socket()) {
                        tracing::info!("removing {}: its instance is gone", s.display());
                        let _ = std::fs::remove_file(s);
                    }
                }
                if uid.is_some() {
                    let _ = std::fs::remove_file(dir.join(&lock));
                }
                drop(held);
            }
            // A registration socket alone may be another driver's whose
            // name starts like ours: not worth a word.
            crate::write::Instance::Unknown if has_dra_socket => {
                tracing::warn!(
                    "{}: no instance lock {} tells whether its driver is alive: leaving it",
                    sockets[0].display(),
                    dir.join(&lock).display()
                );
            }
            crate::write::Instance::Unknown => {}
        }
    }
}

fn bind(path: &Path) -> anyhow::Result<UnixListener> {
    clear_socket(path)?;
    UnixListener::bind(path).with_context(|| format!("cannot listen on {}", path.display()))
}

/// Starts the plugin: removes old sockets, serves the DRA service (both
/// versions), then the registration service, until `shutdown` resolves;
/// then removes both sockets.
///
/// `devices` holds the devices this node offers now: the driver's watch
/// loop sends the new list after every pass (`names::devices` of the
/// inventory); a claim is prepared against the list current when it is
/// read. `api` reads claims and writes their status.
///
/// Must be called within a tokio runtime.
///
/// # Errors
/// A directory that cannot be created, a path that is there and is not a
/// socket, or a socket that cannot be listened on; each named.
pub async fn start(
    config: Config,
    api: Arc<dyn ClaimApi>,
    devices: watch::Receiver<Arc<Vec<DraDevice>>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<Running> {
    let dra_socket = config.dra_socket();
    let reg_socket = config.registration_socket();
    make_dir(&config.prepare.driver_dir, 0o750)?;
    super::checkpoint::tidy(&config.prepare.driver_dir).map_err(anyhow::Error::msg)?;
    make_dir(&config.registry_dir, 0o750)?;
    clear_stale(&config);
    let dra_listener = bind(&dra_socket)?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let health = health::Source {
        pool: config.prepare.node.clone(),
        devices: devices.clone(),
        stop: stop_rx.clone(),
        period: config.health_period,
    };
    let (preparer, checkpoint_warning) = Preparer::new(config.prepare.clone(), api, devices);
    let preparer = Arc::new(preparer);
    // What a crash left rebound goes back before the kubelet calls.
    for e in preparer.recover().await {
        tracing::warn!("passthrough recovery: {e}");
    }
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let dra = tonic::transport::Server::builder()
        .add_service(v1::dra_plugin_server::DraPluginServer::new(DraV1(
            Arc::clone(&preparer),
        )))
        .add_service(v1beta1::dra_plugin_server::DraPluginServer::new(
            DraV1beta1(Arc::clone(&preparer)),
        ))
        .add_service(health::HealthV1alpha1::server(health.clone()))
        .add_service(health::HealthV1::server(health))
        .serve_with_incoming_shutdown(
            crate::front::incoming(dra_listener, "the DRA socket"),
            stopped(stop_rx.clone()),
        );
    let dra = tokio::spawn(dra);
    let dra_id = identity(&dra_socket);
    let reg_listener = match bind(&reg_socket) {
        Ok(l) => l,
        Err(e) => {
            let _ = stop_tx.send(true);
            let _ = dra.await;
            remove_if(&dra_socket, dra_id);
            return Err(e);
        }
    };
    let reg_id = identity(&reg_socket);
    let (state_tx, state_rx) = watch::channel(RegistrationState::Pending);
    let registrar = Registrar {
        info: PluginInfo {
            r#type: api::PLUGIN_TYPE.into(),
            name: config.prepare.driver.clone(),
            endpoint: dra_socket.to_string_lossy().into_owned(),
            supported_versions: api::SUPPORTED_VERSIONS.map(String::from).to_vec(),
        },
        state: state_tx,
    };
    let reg = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(RegistrationServer::new(registrar))
            // The plugin watcher's authority is the socket's path, which
            // h2 refuses: the front replaces it (crate::front).
            .serve_with_incoming_shutdown(
                crate::front::incoming(reg_listener, "the registration socket"),
                stopped(stop_rx),
            ),
    );
    tracing::info!(
        "DRA driver {}: serving {} and {}",
        config.prepare.driver,
        dra_socket.display(),
        reg_socket.display()
    );
    let (d, r) = (dra_socket.clone(), reg_socket.clone());
    let task = tokio::spawn(async move {
        shutdown.await;
        // The registration socket first: the kubelet deregisters.
        remove_if(&r, reg_id);
        let _ = stop_tx.send(true);
        // A graceful stop waits for every connection to close, and the
        // kubelet keeps its own open: calls in flight get DRAIN, then the
        // connections are cut.
        for (what, mut server) in [("registration", reg), ("DRA", dra)] {
            match tokio::time::timeout(DRAIN, &mut server).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => tracing::error!("the {what} server: {e}"),
                Ok(Err(e)) => tracing::error!("the {what} server: {e}"),
                Err(_) => {
                    tracing::debug!(
                        "the {what} server: connections still open after {DRAIN:?}; closing them"
                    );
                    server.abort();
                    let _ = server.await;
                }
            }
        }
        remove_if(&d, dra_id);
    });
    Ok(Running {
        registration: state_rx,
        preparer,
        checkpoint_warning,
        dra_socket,
        registration_socket: reg_socket,
        task,
    })
}

/// Removes the socket at `path` when it is still the one created
/// (`id`), and a socket.
fn remove_if(path: &Path, id: Option<FileId>) {
    if id.is_some()
        && identity(path) == id
        && std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket())
    {
        let _ = std::fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn only_sockets_are_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("x.sock");
        clear_socket(&file).unwrap();
        std::fs::write(&file, "keep").unwrap();
        let e = clear_socket(&file).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "{} is a regular file, not a socket: not touching it (remove it, or choose another directory)",
                file.display()
            )
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep");
        let link = dir.path().join("l.sock");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let e = clear_socket(&link).unwrap_err().to_string();
        assert!(e.contains("is a symbolic link, not a socket"), "{e}");
        let sock = dir.path().join("s.sock");
        let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        clear_socket(&sock).unwrap();
        assert!(!sock.exists());
    }

    #[test]
    fn paths() {
        let root = Arc::new(HostRoot::open(Path::new("/")).unwrap());
        let c = Config::new("dra.cdigen.io", "n", Path::new("/p"), Path::new("/r"), root);
        assert_eq!(c.dra_socket(), Path::new("/p/dra.cdigen.io/dra.sock"));
        assert_eq!(
            c.registration_socket(),
            Path::new("/r/dra.cdigen.io-reg.sock")
        );
        assert!(!c.prepare.serialize);
        let c = c.with_pod_uid("u-1");
        assert_eq!(c.dra_socket(), Path::new("/p/dra.cdigen.io/dra-u-1.sock"));
        assert_eq!(
            c.registration_socket(),
            Path::new("/r/dra.cdigen.io-u-1-reg.sock")
        );
        assert!(c.prepare.serialize);
        assert_eq!(lock_name(Some("u-1")), ".cdigen-dra-driver-u-1.lock");
        assert_eq!(lock_name(None), LOCK_FILE);
    }
}

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
//!   answer through one [`Preparer`].
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

/// Creates the driver's directory when missing and takes its
/// [`LOCK_FILE`].
///
/// # Errors
/// Another driver holds it (its PID named), or the directory or the lock
/// cannot be made.
pub fn lock_driver_dir(dir: &Path) -> anyhow::Result<crate::write::DirLock> {
    make_dir(dir, 0o750)?;
    crate::write::lock_instance(dir, LOCK_FILE)
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
            },
        }
    }

    /// The DRA socket: `<plugin dir>/<driver>/dra.sock`.
    pub fn dra_socket(&self) -> PathBuf {
        self.prepare.driver_dir.join(DRA_SOCKET)
    }

    /// The registration socket: `<registry dir>/<driver>-reg.sock`.
    pub fn registration_socket(&self) -> PathBuf {
        self.registry_dir
            .join(format!("{}-reg.sock", self.prepare.driver))
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
    let dra_listener = bind(&dra_socket)?;
    let (preparer, checkpoint_warning) = Preparer::new(config.prepare.clone(), api, devices);
    let preparer = Arc::new(preparer);
    let (stop_tx, stop_rx) = watch::channel(false);
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
    }
}

//! A fake kubelet for the device plugin tests: the kubelet's side of the
//! device plugin API on Unix sockets in a temporary directory, enforcing
//! its contract as the kubelet's device manager does.
//!
//! - `Register` checks the version (`v1beta1`), the resource name (an
//!   extended resource name: `domain/name`, outside `kubernetes.io`, not
//!   starting with `requests.`), and that the endpoint is a file name of a
//!   socket in the directory; then, as the kubelet does before it answers,
//!   it dials the endpoint back and asks for the options (a plugin that
//!   registers before it serves is refused), and afterwards holds
//!   ListAndWatch open, recording every list.
//! - A second registration of a resource (another endpoint: a rolling
//!   update's new pod) replaces the first for every call, as the device
//!   manager's `connectClient` does; the first one's ListAndWatch stays
//!   open. When that first stream ends (its plugin stopped), the kubelet's
//!   `runClient` disconnects the client registered under the resource's
//!   name, which is the newer one: its connection is closed and the
//!   resource has no endpoint until a plugin registers again
//!   (pkg/kubelet/cm/devicemanager/plugin/v1beta1/handler.go, v1.36).
//! - GetPreferredAllocation and PreStartContainer are only called when the
//!   options ask for them.
//! - Starting and restarting delete every file in the directory and
//!   create `kubelet.sock`, as a starting kubelet does.
//! - The pod resources API answers with the allocations a test sets (or
//!   fails, when a test says so), and counts the calls.
//!
//! The kubelet runs on its own thread with its own tokio runtime; tests
//! call it synchronously.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::os::unix::fs::FileTypeExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cdigen::deviceplugin::api::podresources::pod_resources_lister_server::{
    PodResourcesLister, PodResourcesListerServer,
};
use cdigen::deviceplugin::api::podresources::{
    ContainerDevices, ContainerResources, ListPodResourcesRequest, ListPodResourcesResponse,
    PodResources,
};
use cdigen::deviceplugin::api::v1beta1::device_plugin_client::DevicePluginClient;
use cdigen::deviceplugin::api::v1beta1::registration_client::RegistrationClient;
use cdigen::deviceplugin::api::v1beta1::registration_server::{Registration, RegistrationServer};
use cdigen::deviceplugin::api::v1beta1::{
    AllocateRequest, AllocateResponse, ContainerAllocateRequest,
    ContainerPreferredAllocationRequest, Device, DevicePluginOptions, Empty,
    PreStartContainerRequest, PreferredAllocationRequest, RegisterRequest,
};
use tokio::net::UnixListener;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

/// What the kubelet knows of one registered plugin.
#[derive(Debug, Clone, Default)]
pub struct PluginState {
    /// The endpoint it registered.
    pub endpoint: String,
    /// Its options.
    pub options: Option<DevicePluginOptions>,
    /// Every list ListAndWatch sent, with when it arrived.
    pub lists: Vec<(Instant, Vec<Device>)>,
    /// When it registered (the last time).
    pub registered_at: Option<Instant>,
    /// How many times it registered.
    pub registrations: usize,
    /// Whether its ListAndWatch stream is open.
    pub watching: bool,
    /// How many times the kubelet disconnected it because an older
    /// registration's stream ended.
    pub disconnects: usize,
}

#[derive(Debug, Default)]
struct State {
    plugins: BTreeMap<String, PluginState>,
    refused: Vec<String>,
    live: Vec<(String, String)>,
    /// Calls of the pod resources API's List.
    pod_resources_lists: usize,
    /// Whether List fails (the kubelet not ready).
    list_fails: bool,
    /// The ListAndWatch streams held (ended when the kubelet restarts).
    streams: Vec<tokio::task::AbortHandle>,
    /// The stream of each resource's current registration.
    current: BTreeMap<String, tokio::task::AbortHandle>,
}

#[derive(Clone)]
struct Kubelet {
    dir: PathBuf,
    state: Arc<Mutex<State>>,
}

fn extended_resource_name(name: &str) -> bool {
    match name.split_once('/') {
        Some((domain, short)) => {
            !domain.is_empty()
                && !short.is_empty()
                && !short.contains('/')
                && !name.contains("kubernetes.io/")
                && !name.starts_with("requests.")
                && short.len() <= 63
        }
        None => false,
    }
}

/// The state of `resource`'s registration number `generation`, while no
/// later registration replaced it.
fn mine<'a>(st: &'a mut State, resource: &str, generation: usize) -> Option<&'a mut PluginState> {
    st.plugins
        .get_mut(resource)
        .filter(|p| p.registrations == generation)
}

/// Dials a plugin as the kubelet's device manager does: `:authority`
/// `localhost`, which `connect` sends and the kubelet sets with
/// `grpc.WithAuthority("localhost")`
/// (pkg/kubelet/cm/devicemanager/plugin/v1beta1/client.go).
async fn dial(path: &Path) -> Result<Channel, String> {
    cdigen::deviceplugin::kubelet::connect(path)
        .await
        .map_err(|e| format!("cannot dial {}: {e}", path.display()))
}

#[tonic::async_trait]
impl Registration for Kubelet {
    async fn register(&self, request: Request<RegisterRequest>) -> Result<Response<Empty>, Status> {
        let r = request.into_inner();
        let refuse = |why: String| {
            self.state.lock().unwrap().refused.push(why.clone());
            Err(Status::invalid_argument(why))
        };
        if r.version != "v1beta1" {
            return refuse(format!("unsupported version {:?}", r.version));
        }
        if !extended_resource_name(&r.resource_name) {
            return refuse(format!("invalid resource name {:?}", r.resource_name));
        }
        if r.endpoint.is_empty() || r.endpoint.contains('/') {
            return refuse(format!("endpoint {:?} is not a file name", r.endpoint));
        }
        let socket = self.dir.join(&r.endpoint);
        if !std::fs::symlink_metadata(&socket).is_ok_and(|m| m.file_type().is_socket()) {
            return refuse(format!("no socket at {}", socket.display()));
        }
        // As the kubelet, before it answers: dial back and ask for the
        // options (the plugin must serve before it registers).
        let mut client = match dial(&socket).await {
            Ok(c) => DevicePluginClient::new(c),
            Err(e) => return refuse(e),
        };
        let options = match client.get_device_plugin_options(Empty {}).await {
            Ok(o) => o.into_inner(),
            Err(e) => return refuse(format!("GetDevicePluginOptions: {}", e.message())),
        };
        let generation = {
            let mut st = self.state.lock().unwrap();
            let p = st.plugins.entry(r.resource_name.clone()).or_default();
            p.endpoint = r.endpoint.clone();
            p.options = Some(options);
            p.registered_at = Some(Instant::now());
            p.registrations += 1;
            p.registrations
        };
        // Then hold ListAndWatch open; a later registration of the
        // resource replaces this one.
        let me = self.clone();
        let resource_name = r.resource_name.clone();
        let resource = r.resource_name;
        let task = tokio::spawn(async move {
            let Ok(stream) = client.list_and_watch(Empty {}).await else {
                return;
            };
            {
                let mut st = me.state.lock().unwrap();
                if let Some(p) = mine(&mut st, &resource, generation) {
                    p.watching = true;
                }
            }
            let mut stream = stream.into_inner();
            while let Ok(Some(list)) = stream.message().await {
                let mut st = me.state.lock().unwrap();
                if let Some(p) = mine(&mut st, &resource, generation) {
                    p.lists.push((Instant::now(), list.devices));
                }
            }
            let mut st = me.state.lock().unwrap();
            if let Some(p) = mine(&mut st, &resource, generation) {
                p.watching = false;
            } else if let Some(p) = st.plugins.get_mut(&resource) {
                // An older registration's stream ended: runClient
                // disconnects whichever client the resource has now.
                p.watching = false;
                p.disconnects += 1;
                if let Some(current) = st.current.remove(&resource) {
                    current.abort();
                }
            }
        });
        let mut st = self.state.lock().unwrap();
        st.streams.push(task.abort_handle());
        if mine(&mut st, &resource_name, generation).is_some() {
            st.current.insert(resource_name, task.abort_handle());
        }
        Ok(Response::new(Empty {}))
    }
}

#[tonic::async_trait]
impl PodResourcesLister for Kubelet {
    async fn list(
        &self,
        _: Request<ListPodResourcesRequest>,
    ) -> Result<Response<ListPodResourcesResponse>, Status> {
        let live = {
            let mut st = self.state.lock().unwrap();
            st.pod_resources_lists += 1;
            if st.list_fails {
                return Err(Status::unavailable("the kubelet is not ready"));
            }
            st.live.clone()
        };
        let containers = live
            .into_iter()
            .map(|(resource_name, id)| ContainerResources {
                name: "c".into(),
                devices: vec![ContainerDevices {
                    resource_name,
                    device_ids: vec![id],
                }],
            })
            .collect();
        Ok(Response::new(ListPodResourcesResponse {
            pod_resources: vec![PodResources {
                name: "pod".into(),
                namespace: "default".into(),
                containers,
            }],
        }))
    }
}

/// The fake kubelet.
pub struct FakeKubelet {
    /// The device plugin directory (`kubelet.sock` and the plugins').
    pub dir: PathBuf,
    /// The pod resources socket.
    pub pod_resources: PathBuf,
    state: Arc<Mutex<State>>,
    runtime: tokio::runtime::Runtime,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl FakeKubelet {
    /// Starts a kubelet with its device plugin directory at `dir`
    /// (created, and emptied as a starting kubelet does) and its pod
    /// resources socket beside it.
    pub fn start(dir: &Path) -> FakeKubelet {
        std::fs::create_dir_all(dir).unwrap();
        clean(dir);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let pod_resources = dir.parent().unwrap().join("pod-resources.sock");
        let mut k = FakeKubelet {
            dir: dir.to_path_buf(),
            pod_resources,
            state: Arc::new(Mutex::new(State::default())),
            runtime,
            stop: None,
        };
        k.serve();
        k
    }

    fn serve(&mut self) {
        let kubelet = Kubelet {
            dir: self.dir.clone(),
            state: Arc::clone(&self.state),
        };
        let sock = self.dir.join("kubelet.sock");
        let _ = std::fs::remove_file(&sock);
        let _ = std::fs::remove_file(&self.pod_resources);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let pr = self.pod_resources.clone();
        let _guard = self.runtime.enter();
        let listener = UnixListener::bind(&sock).unwrap();
        let pr_listener = UnixListener::bind(&pr).unwrap();
        self.runtime.spawn(async move {
            let a = tonic::transport::Server::builder()
                .add_service(RegistrationServer::new(kubelet.clone()))
                .serve_with_incoming_shutdown(UnixListenerStream::new(listener), async {
                    let _ = rx.await;
                });
            let b = tonic::transport::Server::builder()
                .add_service(PodResourcesListerServer::new(kubelet))
                .serve_with_incoming(UnixListenerStream::new(pr_listener));
            tokio::select! {
                _ = a => {}
                _ = b => {}
            }
        });
        self.stop = Some(tx);
    }

    /// Restarts as a kubelet does: stops serving, deletes every file in
    /// the directory, serves a new `kubelet.sock`. Returns when it did.
    pub fn restart(&mut self) -> Instant {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        std::thread::sleep(Duration::from_millis(50));
        clean(&self.dir);
        {
            // The old kubelet's streams die with it.
            let mut st = self.state.lock().unwrap();
            for t in st.streams.drain(..) {
                t.abort();
            }
            for p in st.plugins.values_mut() {
                p.watching = false;
            }
        }
        self.serve();
        Instant::now()
    }

    /// Restarts re-creating only `kubelet.sock`, the plugins' sockets left
    /// in place (so that a plugin sees the restart only in the kubelet's
    /// socket). Returns when it did, and whether the new socket has the old
    /// one's inode number (ext4 hands a freed inode to the next file).
    pub fn restart_socket_only(&mut self) -> (Instant, bool) {
        use std::os::unix::fs::MetadataExt as _;
        let sock = self.dir.join("kubelet.sock");
        let old = std::fs::metadata(&sock).unwrap().ino();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        std::thread::sleep(Duration::from_millis(50));
        {
            let mut st = self.state.lock().unwrap();
            for t in st.streams.drain(..) {
                t.abort();
            }
            for p in st.plugins.values_mut() {
                p.watching = false;
            }
        }
        self.serve();
        let new = std::fs::metadata(&sock).unwrap().ino();
        (Instant::now(), old == new)
    }

    /// What the kubelet knows of `resource`'s plugin.
    pub fn plugin(&self, resource: &str) -> Option<PluginState> {
        self.state.lock().unwrap().plugins.get(resource).cloned()
    }

    /// Registrations refused, with why.
    pub fn refused(&self) -> Vec<String> {
        self.state.lock().unwrap().refused.clone()
    }

    /// How many times the pod resources API's List was called.
    pub fn pod_resources_lists(&self) -> usize {
        self.state.lock().unwrap().pod_resources_lists
    }

    /// Sends `request` to this kubelet's `Register` as a plugin would.
    pub fn register(&self, request: RegisterRequest) -> Result<(), Status> {
        let sock = self.dir.join("kubelet.sock");
        self.runtime.block_on(async {
            let channel = dial(&sock).await.map_err(Status::unavailable)?;
            RegistrationClient::new(channel)
                .register(request)
                .await
                .map(|_| ())
        })
    }

    /// The lists `resource`'s plugin sent after `since`.
    pub fn lists_since(&self, resource: &str, since: Instant) -> Vec<Vec<Device>> {
        self.plugin(resource)
            .map(|p| {
                p.lists
                    .into_iter()
                    .filter(|(t, _)| *t >= since)
                    .map(|(_, l)| l)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Waits until the last list of `resource` satisfies `ok`; returns it.
    pub fn wait_for_list(
        &self,
        resource: &str,
        timeout: Duration,
        ok: impl Fn(&[Device]) -> bool,
    ) -> Vec<Device> {
        self.wait_for(resource, timeout, |p| {
            p.lists.last().is_some_and(|(_, l)| ok(l))
        })
        .lists
        .pop()
        .unwrap()
        .1
    }

    /// Sets what the pod resources API lists as held: (resource, ID).
    pub fn set_live(&self, live: &[(&str, &str)]) {
        self.state.lock().unwrap().live = live
            .iter()
            .map(|(r, i)| ((*r).to_string(), (*i).to_string()))
            .collect();
    }

    /// Makes the pod resources API's List fail (`true`) or answer.
    pub fn set_list_failing(&self, fails: bool) {
        self.state.lock().unwrap().list_fails = fails;
    }

    /// Waits until `resource`'s plugin satisfies `ok`, up to `timeout`;
    /// panics with what it knows otherwise.
    pub fn wait_for(
        &self,
        resource: &str,
        timeout: Duration,
        ok: impl Fn(&PluginState) -> bool,
    ) -> PluginState {
        let end = Instant::now() + timeout;
        loop {
            if let Some(p) = self.plugin(resource)
                && ok(&p)
            {
                return p;
            }
            if Instant::now() > end {
                panic!(
                    "timed out waiting on {resource}: {:?}; refused: {:?}",
                    self.plugin(resource),
                    self.refused()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The last list `resource`'s plugin sent, once it sent one.
    pub fn devices(&self, resource: &str) -> Vec<Device> {
        self.wait_for(resource, Duration::from_secs(30), |p| !p.lists.is_empty())
            .lists
            .last()
            .unwrap()
            .1
            .clone()
    }

    fn client(&self, resource: &str) -> DevicePluginClient<Channel> {
        let p = self.wait_for(resource, Duration::from_secs(30), |p| p.watching);
        let socket = self.dir.join(p.endpoint);
        self.runtime
            .block_on(async { DevicePluginClient::new(dial(&socket).await.unwrap()) })
    }

    /// Allocate with `request` as it is, whatever its size.
    pub fn allocate_raw(
        &self,
        resource: &str,
        request: AllocateRequest,
    ) -> Result<AllocateResponse, Status> {
        let mut c = self.client(resource);
        self.runtime
            .block_on(async { c.allocate(request).await.map(Response::into_inner) })
    }

    /// Allocate for one container holding `ids`, sent to the plugin socket
    /// `endpoint` in the directory, whichever the kubelet uses now.
    pub fn allocate_at(&self, endpoint: &str, ids: &[&str]) -> Result<AllocateResponse, Status> {
        let socket = self.dir.join(endpoint);
        self.runtime.block_on(async {
            let mut c = DevicePluginClient::new(dial(&socket).await.map_err(Status::unavailable)?);
            c.allocate(AllocateRequest {
                container_requests: vec![ContainerAllocateRequest {
                    devices_ids: ids.iter().map(|s| (*s).to_string()).collect(),
                }],
            })
            .await
            .map(Response::into_inner)
        })
    }

    /// Allocate for one container holding `ids` of `resource`.
    pub fn allocate(&self, resource: &str, ids: &[&str]) -> Result<AllocateResponse, Status> {
        let mut c = self.client(resource);
        self.runtime.block_on(async {
            c.allocate(AllocateRequest {
                container_requests: vec![ContainerAllocateRequest {
                    devices_ids: ids.iter().map(|s| (*s).to_string()).collect(),
                }],
            })
            .await
            .map(Response::into_inner)
        })
    }

    /// PreStartContainer for `ids` of `resource` (only when the plugin
    /// asked for it, as the kubelet).
    pub fn pre_start(&self, resource: &str, ids: &[&str]) -> Option<Result<(), Status>> {
        let p = self.plugin(resource)?;
        if !p.options.is_some_and(|o| o.pre_start_required) {
            return None;
        }
        let mut c = self.client(resource);
        Some(self.runtime.block_on(async {
            c.pre_start_container(PreStartContainerRequest {
                devices_ids: ids.iter().map(|s| (*s).to_string()).collect(),
            })
            .await
            .map(|_| ())
        }))
    }

    /// GetPreferredAllocation, only when the plugin advertised it (as the
    /// kubelet): `None` otherwise.
    pub fn preferred(
        &self,
        resource: &str,
        available: &[&str],
        must_include: &[&str],
        size: i32,
    ) -> Option<Result<Vec<String>, Status>> {
        let p = self.plugin(resource)?;
        if !p
            .options
            .is_some_and(|o| o.get_preferred_allocation_available)
        {
            return None;
        }
        let mut c = self.client(resource);
        Some(self.runtime.block_on(async {
            c.get_preferred_allocation(PreferredAllocationRequest {
                container_requests: vec![ContainerPreferredAllocationRequest {
                    available_device_i_ds: available.iter().map(|s| (*s).to_string()).collect(),
                    must_include_device_i_ds: must_include
                        .iter()
                        .map(|s| (*s).to_string())
                        .collect(),
                    allocation_size: size,
                }],
            })
            .await
            .map(|r| {
                r.into_inner()
                    .container_responses
                    .into_iter()
                    .next()
                    .map(|c| c.device_i_ds)
                    .unwrap_or_default()
            })
        }))
    }
}

/// Removes every file in `dir`, as a starting kubelet does.
/// What the kubelet's device manager does to its directory at start
/// (`CleanupPluginDirectory`, pkg/kubelet/cm/devicemanager/manager.go, on
/// Linux): every entry whose `stat` (symlinks followed) is a socket is
/// removed, but its checkpoint file; directories and other files stay.
fn clean(dir: &Path) {
    use std::os::unix::fs::FileTypeExt as _;
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.file_name() == Some(std::ffi::OsStr::new("kubelet_internal_checkpoint")) {
            continue;
        }
        if std::fs::metadata(&path).is_ok_and(|m| m.file_type().is_socket()) {
            let _ = std::fs::remove_file(&path);
        }
    }
}

impl Drop for FakeKubelet {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

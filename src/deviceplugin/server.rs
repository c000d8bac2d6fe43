//! The `DevicePlugin` gRPC service of one resource, over the shared
//! inventory.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::{mpsc, watch};
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::allocate;
use super::api::v1beta1::device_plugin_server::DevicePlugin;
use super::api::v1beta1::{
    AllocateRequest, AllocateResponse, ContainerPreferredAllocationResponse, Device,
    DevicePluginOptions, Empty, ListAndWatchResponse, NumaNode, PreStartContainerRequest,
    PreStartContainerResponse, PreferredAllocationRequest, PreferredAllocationResponse,
    TopologyInfo,
};
use super::devinfo;
use super::inventory::{Inventory, Resource};
use super::preferred;

/// `Healthy`, as the kubelet spells it.
pub const HEALTHY: &str = "Healthy";
/// `Unhealthy`, as the kubelet spells it.
pub const UNHEALTHY: &str = "Unhealthy";

/// Most device IDs one container request may name (the kubelet asks for
/// what a container requests: far fewer).
pub const MAX_REQUEST_IDS: usize = 4096;

/// Most device IDs one call may name, all its container requests together
/// (Allocate, GetPreferredAllocation): what one call costs is bounded, not
/// only each container's part of it.
pub const MAX_CALL_IDS: usize = 4096;

/// Most container requests one call may carry (the kubelet sends one per
/// container, and allocates one container at a time).
pub const MAX_CONTAINER_REQUESTS: usize = 256;

/// Largest request message the plugin's gRPC server decodes (the first
/// bound, before anything is read: [`MAX_CALL_IDS`] IDs of 250 bytes fit).
pub const MAX_MESSAGE: usize = 1 << 20;

/// A device handed out and not known to be released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    /// When Allocate handed it out (or the kubelet first listed it).
    pub since: Instant,
    /// Whether the kubelet's pod resources API has listed it since: from
    /// then on it is held exactly while the kubelet lists it.
    pub listed: bool,
}

impl Held {
    /// Handed out now, not yet listed.
    pub fn now() -> Held {
        Held {
            since: Instant::now(),
            listed: false,
        }
    }
}

/// What every resource's service shares.
#[derive(Debug)]
pub struct Shared {
    /// The current inventory.
    pub inventory: watch::Receiver<Arc<Inventory>>,
    /// (resource, ID) of the devices handed out and not known to be
    /// released.
    pub allocated: Mutex<BTreeMap<(String, String), Held>>,
    /// Where device-info files go.
    pub devinfo_dir: PathBuf,
    /// Whether Allocate adds the legacy fields.
    pub legacy: bool,
}

impl Shared {
    /// (resource, ID) of the devices held.
    pub fn allocated_set(&self) -> BTreeSet<(String, String)> {
        self.allocated
            .lock()
            .map(|a| a.keys().cloned().collect())
            .unwrap_or_default()
    }
}

/// The options every cdigen plugin registers with.
pub fn options() -> DevicePluginOptions {
    DevicePluginOptions {
        pre_start_required: true,
        get_preferred_allocation_available: true,
    }
}

/// One resource's service.
#[derive(Debug, Clone)]
pub struct Plugin {
    /// The resource.
    pub resource: String,
    /// What it serves from.
    pub shared: Arc<Shared>,
    /// Set when this registration ends (the kubelet restarted, or
    /// shutdown): its ListAndWatch streams end too, which closes what the
    /// old kubelet's connections hold.
    pub ended: watch::Receiver<bool>,
    /// Set when the kubelet closes one of this registration's
    /// ListAndWatch streams (it dropped the plugin): the registration is
    /// renewed in a rolling update (`run`).
    pub dropped: Arc<AtomicBool>,
}

/// ListAndWatch's list for `resource` in `inventory` (empty when the
/// resource is not there).
pub fn device_list(inventory: &Inventory, resource: &str) -> Vec<Device> {
    inventory
        .resources
        .get(resource)
        .map(|r| {
            r.devices
                .values()
                .map(|e| Device {
                    id: e.id.clone(),
                    health: if e.healthy() { HEALTHY } else { UNHEALTHY }.into(),
                    topology: e.placement.numa.map(|n| TopologyInfo {
                        nodes: vec![NumaNode { id: i64::from(n) }],
                    }),
                })
                .collect()
        })
        .unwrap_or_default()
}

impl Plugin {
    /// The current inventory, shared: a request looks its devices up in
    /// it rather than copying the resource (every device of it) per call.
    fn inventory(&self) -> Arc<Inventory> {
        Arc::clone(&self.shared.inventory.borrow())
    }

    /// This plugin's resource in `inventory`.
    fn resource<'a>(&self, inventory: &'a Inventory) -> Result<&'a Resource, Status> {
        inventory.resources.get(&self.resource).ok_or_else(|| {
            Status::unavailable(format!("resource {} is not served now", self.resource))
        })
    }
}

fn check_size(ids: &[String]) -> Result<(), Status> {
    if ids.len() > MAX_REQUEST_IDS {
        return Err(Status::invalid_argument(format!(
            "{} device IDs in one request; at most {MAX_REQUEST_IDS}",
            ids.len()
        )));
    }
    Ok(())
}

/// Checks a whole call before any of it is served: at most
/// [`MAX_CONTAINER_REQUESTS`] container requests, each within
/// [`MAX_REQUEST_IDS`], and at most [`MAX_CALL_IDS`] IDs in all (`ids`:
/// each container request's lists of IDs).
///
/// # Errors
/// InvalidArgument naming the bound and the figure.
pub fn check_call<'a, I>(containers: usize, ids: I) -> Result<(), Status>
where
    I: IntoIterator<Item = &'a [String]>,
{
    if containers > MAX_CONTAINER_REQUESTS {
        return Err(Status::invalid_argument(format!(
            "{containers} container requests in one call; at most {MAX_CONTAINER_REQUESTS}"
        )));
    }
    let mut total = 0usize;
    for list in ids {
        check_size(list)?;
        total = total.saturating_add(list.len());
    }
    if total > MAX_CALL_IDS {
        return Err(Status::invalid_argument(format!(
            "{total} device IDs in one call (all container requests together); at most {MAX_CALL_IDS}"
        )));
    }
    Ok(())
}

type ListStream = Pin<Box<dyn Stream<Item = Result<ListAndWatchResponse, Status>> + Send>>;

#[tonic::async_trait]
impl DevicePlugin for Plugin {
    async fn get_device_plugin_options(
        &self,
        _: Request<Empty>,
    ) -> Result<Response<DevicePluginOptions>, Status> {
        Ok(Response::new(options()))
    }

    type ListAndWatchStream = ListStream;

    async fn list_and_watch(
        &self,
        _: Request<Empty>,
    ) -> Result<Response<Self::ListAndWatchStream>, Status> {
        let mut rx = self.shared.inventory.clone();
        let mut ended = self.ended.clone();
        let dropped = Arc::clone(&self.dropped);
        let resource = self.resource.clone();
        let (tx, out) = mpsc::channel(4);
        tokio::spawn(async move {
            let mut last: Option<Vec<Device>> = None;
            loop {
                let list = {
                    let inventory = rx.borrow_and_update();
                    if !inventory.resources.contains_key(&resource) {
                        return; // no longer served: the stream ends
                    }
                    device_list(&inventory, &resource)
                };
                if last.as_ref() != Some(&list) {
                    tracing::debug!("{resource}: sending {} devices", list.len());
                    let msg = ListAndWatchResponse {
                        devices: list.clone(),
                    };
                    if tx.send(Ok(msg)).await.is_err() {
                        dropped.store(true, Ordering::SeqCst);
                        return; // the kubelet went away
                    }
                    last = Some(list);
                }
                tokio::select! {
                    changed = rx.changed() => if changed.is_err() { return }, // shutting down
                    () = tx.closed() => {
                        dropped.store(true, Ordering::SeqCst);
                        return;
                    }
                    _ = ended.wait_for(|e| *e) => return,
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(out))))
    }

    async fn get_preferred_allocation(
        &self,
        request: Request<PreferredAllocationRequest>,
    ) -> Result<Response<PreferredAllocationResponse>, Status> {
        let inventory = self.inventory();
        let resource = self.resource(&inventory)?;
        let placements: BTreeMap<String, preferred::Placement> = resource
            .devices
            .iter()
            .map(|(id, e)| (id.clone(), e.placement.clone()))
            .collect();
        let request = request.into_inner();
        check_call(
            request.container_requests.len(),
            request.container_requests.iter().flat_map(|c| {
                [
                    c.available_device_i_ds.as_slice(),
                    c.must_include_device_i_ds.as_slice(),
                ]
            }),
        )?;
        let mut out = PreferredAllocationResponse::default();
        for c in request.container_requests {
            let size = usize::try_from(c.allocation_size).unwrap_or(0);
            out.container_responses
                .push(ContainerPreferredAllocationResponse {
                    device_i_ds: preferred::preferred(
                        &placements,
                        &c.available_device_i_ds,
                        &c.must_include_device_i_ds,
                        size,
                    ),
                });
        }
        Ok(Response::new(out))
    }

    async fn allocate(
        &self,
        request: Request<AllocateRequest>,
    ) -> Result<Response<AllocateResponse>, Status> {
        let inventory = self.inventory();
        let resource = self.resource(&inventory)?;
        let request = request.into_inner();
        check_call(
            request.container_requests.len(),
            request
                .container_requests
                .iter()
                .map(|c| c.devices_ids.as_slice()),
        )
        .inspect_err(|e| tracing::warn!("Allocate refused: {}", e.message()))?;
        let mut out = AllocateResponse::default();
        // Each device once, however many container requests name it.
        let mut held: Vec<String> = Vec::new();
        let mut files = Vec::new();
        let mut seen = BTreeSet::new();
        for c in request.container_requests {
            let entries = allocate::entries(resource, &c.devices_ids).map_err(|e| {
                tracing::warn!("Allocate refused: {e}");
                Status::invalid_argument(e.to_string())
            })?;
            if !entries.is_empty() && !resource.spec_file.is_file() {
                return Err(Status::unavailable(format!(
                    "resource {}: the spec file {} is missing; it is being regenerated",
                    resource.def.name,
                    resource.spec_file.display()
                )));
            }
            for e in &entries {
                if seen.insert(e.id.as_str()) {
                    held.push(e.id.clone());
                    files.push((*e).clone());
                }
            }
            out.container_responses.push(allocate::response(
                resource,
                &entries,
                self.shared.legacy,
            ));
        }
        let dir = self.shared.devinfo_dir.clone();
        let (inv, name) = (Arc::clone(&inventory), self.resource.clone());
        let written = tokio::task::spawn_blocking(move || {
            let refs: Vec<&super::inventory::Entry> = files.iter().collect();
            // Always there: the resource was found in this inventory above.
            inv.resources
                .get(&name)
                .map_or(Ok(()), |res| devinfo::write(&dir, res, &refs))
        })
        .await
        .map_err(|e| Status::internal(format!("device-info writer: {e}")))?;
        if let Err(e) = written {
            tracing::error!("{e}");
            return Err(Status::internal(format!(
                "resource {}: cannot write device-info files: {e}",
                resource.def.name
            )));
        }
        if let Ok(mut a) = self.shared.allocated.lock() {
            for id in &held {
                a.insert((resource.def.name.clone(), id.clone()), Held::now());
            }
        }
        tracing::info!(
            "{}: allocated {}",
            resource.def.name,
            crate::text::escape(&held.join(", "))
        );
        Ok(Response::new(out))
    }

    async fn pre_start_container(
        &self,
        request: Request<PreStartContainerRequest>,
    ) -> Result<Response<PreStartContainerResponse>, Status> {
        let inventory = self.inventory();
        let resource = self.resource(&inventory)?;
        let ids = request.into_inner().devices_ids;
        check_size(&ids)?;
        allocate::entries(resource, &ids).map_err(|e| {
            tracing::warn!("PreStartContainer refused: {e}");
            Status::failed_precondition(e.to_string())
        })?;
        Ok(Response::new(PreStartContainerResponse {}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("id{i}")).collect()
    }

    #[test]
    fn a_call_is_bounded_as_a_whole() {
        let one = ids(10);
        assert!(check_call(1, [one.as_slice()]).is_ok());
        let e = check_call(MAX_CONTAINER_REQUESTS + 1, [one.as_slice()]).unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert_eq!(
            e.message(),
            format!(
                "{} container requests in one call; at most {MAX_CONTAINER_REQUESTS}",
                MAX_CONTAINER_REQUESTS + 1
            )
        );
        let big = ids(MAX_REQUEST_IDS + 1);
        let e = check_call(1, [big.as_slice()]).unwrap_err();
        assert_eq!(
            e.message(),
            format!(
                "{} device IDs in one request; at most {MAX_REQUEST_IDS}",
                MAX_REQUEST_IDS + 1
            )
        );
        // Each list within its bound, all of them together over the call's.
        let half = ids(MAX_CALL_IDS / 2 + 1);
        let e = check_call(2, [half.as_slice(), half.as_slice()]).unwrap_err();
        assert_eq!(
            e.message(),
            format!(
                "{} device IDs in one call (all container requests together); at most {MAX_CALL_IDS}",
                2 * (MAX_CALL_IDS / 2 + 1)
            )
        );
    }
}

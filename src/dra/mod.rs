//! `cdigen dra-driver`: Dynamic Resource Allocation (`resource.k8s.io/v1`)
//! for every device cdigen knows, over the device plugin's inventory
//! ([`crate::deviceplugin::inventory`]: the same generators, resources,
//! device IDs, CDI names and health), so that a node offers a device one
//! way or the other, under one identity.
//!
//! - [`names`]: each device's name in the node's pool (a DNS label, stable
//!   across reboots, from the device plugin ID).
//! - [`slices`]: the ResourceSlices publishing them.
//! - [`api`]: the generated gRPC code of the kubelet's DRA service (v1 and
//!   v1beta1) and resource health service (v1alpha1 and v1).
//! - [`plugin`]: the kubelet-facing registration and DRA sockets.
//! - [`health`]: the devices' health streamed to the kubelet (KEP-4680).
//! - [`prepare`]: NodePrepareResources and NodeUnprepareResources.
//! - [`checkpoint`]: the prepared claims, kept across restarts.
//! - [`metadata`]: the device metadata file of a prepared claim.
//! - [`passthrough`]: PCI functions rebound to `vfio-pci` for a claim.
//! - [`kubeapi`]: the API server through `kube` ([`ClaimApi`] over it).
//! - [`publish`]: keeps the node's slices on the API server true.
//! - [`run`]: the process.
//!
//! The flow: the watch loop keeps the specs and the inventory current;
//! after each pass the slices are rebuilt and published; the kubelet
//! registers the driver through its registration socket and calls
//! NodePrepareResources, answered from the claim's allocation and the
//! inventory.

pub mod api;
pub mod checkpoint;
pub mod health;
pub mod kubeapi;
pub mod metadata;
pub mod names;
pub mod passthrough;
pub mod plugin;
pub mod prepare;
pub mod publish;
pub mod run;
pub mod slices;

use std::future::Future;
use std::pin::Pin;

use k8s_openapi::api::resource::v1::{AllocatedDeviceStatus, ResourceClaim};

/// The default driver name (a DNS subdomain under the cdigen domain).
pub const DRIVER_NAME: &str = "dra.cdigen.io";

/// The kubelet's directory of plugin sockets and state
/// (`<dir>/<driver>/dra.sock`).
pub const PLUGIN_DIR: &str = "/var/lib/kubelet/plugins";

/// The kubelet's plugin watcher directory (`<dir>/<driver>-reg.sock`).
pub const REGISTRY_DIR: &str = "/var/lib/kubelet/plugins_registry";

/// A future the [`ClaimApi`] returns.
pub type ApiFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, ApiError>> + Send + 'a>>;

/// Why a call to the API server failed, in words for the kubelet and the
/// log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ApiError(pub String);

/// The API server as preparing claims needs it: the kube client in the
/// driver, a fake in tests.
pub trait ClaimApi: Send + Sync {
    /// The ResourceClaim `namespace/name`.
    fn get_claim<'a>(&'a self, namespace: &'a str, name: &'a str) -> ApiFuture<'a, ResourceClaim>;
    /// Replaces this driver's entries of the claim's `status.devices` by
    /// `devices` (entries of other drivers stay).
    fn set_device_status<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        driver: &'a str,
        devices: Vec<AllocatedDeviceStatus>,
    ) -> ApiFuture<'a, ()>;
}

//! `cdigen dra-driver`: Dynamic Resource Allocation (`resource.k8s.io/v1`)
//! for every device cdigen knows, over the device plugin's inventory
//! ([`crate::deviceplugin::inventory`]: the same generators, resources,
//! device IDs, CDI names and health), so that a node offers a device one
//! way or the other, under one identity.
//!
//! - [`names`]: each device's name in the node's pool (a DNS label, stable
//!   across reboots, from the device plugin ID).
//! - [`api`]: the generated gRPC code of the kubelet's DRA service (v1 and
//!   v1beta1).
//!
//! The flow: the watch loop keeps the specs and the inventory current;
//! after each pass the slices are rebuilt and published; the kubelet
//! registers the driver through its registration socket and calls
//! NodePrepareResources, answered from the claim's allocation and the
//! inventory.

pub mod api;
pub mod names;

/// The default driver name (a DNS subdomain under the cdigen domain).
pub const DRIVER_NAME: &str = "dra.cdigen.io";

/// The kubelet's directory of plugin sockets and state
/// (`<dir>/<driver>/dra.sock`).
pub const PLUGIN_DIR: &str = "/var/lib/kubelet/plugins";

/// The kubelet's plugin watcher directory (`<dir>/<driver>-reg.sock`).
pub const REGISTRY_DIR: &str = "/var/lib/kubelet/plugins_registry";

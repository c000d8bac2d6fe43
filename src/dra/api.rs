//! The gRPC code generated from `proto/dra-*.proto` by `build.rs`: the
//! kubelet's DRA plugin service in both versions the kubelet may pick, and
//! the resource health service in both versions kubelets call (both
//! sides: the driver serves them, the tests' fake kubelet calls them).
//! The plugin watcher API is the device plugin's
//! ([`crate::deviceplugin::api::pluginregistration`]).

#![allow(missing_docs, clippy::all, clippy::pedantic)]

/// The DRA plugin service, package `k8s.io.kubelet.pkg.apis.dra.v1`
/// (Kubernetes 1.34 and later).
pub mod v1 {
    tonic::include_proto!("k8s.io.kubelet.pkg.apis.dra.v1");
}

/// The DRA plugin service, package `k8s.io.kubelet.pkg.apis.dra.v1beta1`
/// (Kubernetes 1.32 and 1.33; deprecated in 1.34).
pub mod v1beta1 {
    tonic::include_proto!("k8s.io.kubelet.pkg.apis.dra.v1beta1");
}

/// The DRA resource health service, package `v1alpha1`: what the 1.36
/// kubelet calls (feature `ResourceHealthStatus`).
pub mod health_v1alpha1 {
    include!(concat!(env!("OUT_DIR"), "/dra-health/v1alpha1.rs"));
}

/// The DRA resource health service, package `v1`: what later kubelets
/// call.
pub mod health_v1 {
    include!(concat!(env!("OUT_DIR"), "/dra-health/v1.rs"));
}

pub use crate::deviceplugin::api::pluginregistration;

/// What `GetInfo` names as the plugin type.
pub const PLUGIN_TYPE: &str = "DRAPlugin";

/// The services `GetInfo` offers, newest first.
pub const SUPPORTED_VERSIONS: [&str; 2] = ["v1.DRAPlugin", "v1beta1.DRAPlugin"];

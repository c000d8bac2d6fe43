//! The gRPC code generated from `proto/dra-*.proto` by `build.rs`: the
//! kubelet's DRA plugin service in both versions the kubelet may pick
//! (both sides: the driver serves it, the tests' fake kubelet calls it).
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

pub use crate::deviceplugin::api::pluginregistration;

/// What `GetInfo` names as the plugin type.
pub const PLUGIN_TYPE: &str = "DRAPlugin";

/// The services `GetInfo` offers, newest first.
pub const SUPPORTED_VERSIONS: [&str; 2] = ["v1.DRAPlugin", "v1beta1.DRAPlugin"];

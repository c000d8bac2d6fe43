//! The gRPC code generated from `proto/*.proto` by `build.rs`: both sides
//! of each service (the plugin serves `DevicePlugin` and
//! `pluginregistration.Registration`; the tests' fake kubelet serves the
//! kubelet's side).

#![allow(missing_docs, clippy::all, clippy::pedantic)]

/// The device plugin API, package `v1beta1`.
pub mod v1beta1 {
    tonic::include_proto!("v1beta1");
}

/// The plugin watcher API, package `pluginregistration`.
pub mod pluginregistration {
    tonic::include_proto!("pluginregistration");
}

/// The pod resources API, package `v1`: which devices containers hold.
pub mod podresources {
    tonic::include_proto!("v1");
}

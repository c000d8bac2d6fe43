//! `cdigen device-plugin`: the kubelet's device plugin API (v1beta1, with
//! CDI devices: KEP-4009) over the same device model as `generate` and
//! `watch`.
//!
//! One process serves one device plugin per resource. The watch loop keeps
//! the specs current; after each pass the [`inventory`] is rebuilt from the
//! pipeline's plans and the host's `/dev`, and every plugin's ListAndWatch
//! stream gets the new list.
//!
//! - [`api`]: the generated gRPC code of `proto/*.proto`.
//! - [`preferred`]: GetPreferredAllocation's choice (NUMA node, PCIe root,
//!   switch, MIG parent).

pub mod api;
pub mod preferred;

//! The ResourceSlices of a node: its devices ([`super::names`]) in one
//! pool named after the node, chunked to the API's limits.

use k8s_openapi::api::resource::v1::{Device, ResourcePool, ResourceSlice, ResourceSliceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::names::DraDevice;

/// The API's limit on devices per slice.
pub const MAX_DEVICES: usize = 128;

/// The slices publishing `devices` for `node`, pool generation
/// `generation`: at least one (an empty pool says the node has none).
pub fn slices(
    devices: &[DraDevice],
    driver: &str,
    node: &str,
    generation: i64,
) -> Vec<ResourceSlice> {
    let chunks: Vec<&[DraDevice]> = if devices.is_empty() {
        vec![&[]]
    } else {
        devices.chunks(MAX_DEVICES).collect()
    };
    let count = i64::try_from(chunks.len()).unwrap_or(i64::MAX);
    chunks
        .iter()
        .enumerate()
        .map(|(i, chunk)| ResourceSlice {
            metadata: ObjectMeta {
                name: Some(slice_name(node, driver, i)),
                ..ObjectMeta::default()
            },
            spec: ResourceSliceSpec {
                driver: driver.to_string(),
                node_name: Some(node.to_string()),
                pool: ResourcePool {
                    name: node.to_string(),
                    generation,
                    resource_slice_count: count,
                },
                devices: Some(
                    chunk
                        .iter()
                        .map(|d| Device {
                            name: d.name.clone(),
                            ..Device::default()
                        })
                        .collect(),
                ),
                ..ResourceSliceSpec::default()
            },
        })
        .collect()
}

/// The name of slice `i` of `node`'s pool: `<node>-<driver>-<i>`, the
/// driver's dots made dashes.
pub fn slice_name(node: &str, driver: &str, i: usize) -> String {
    format!("{node}-{}-{i}", driver.replace('.', "-"))
}

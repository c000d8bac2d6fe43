//! IMEX channels: `/dev/nvidia-caps-imex-channels/channel<N>`, which let
//! processes import memory exported by GPUs of other nodes of an NVLink
//! domain (GB200 NVL, multi-node NVLink), as the IMEX daemon grants it.
//!
//! The driver (open-gpu-kernel-modules, `kernel-open/nvidia/nv-caps-imex.c`)
//! registers the char device region `nvidia-caps-imex-channels` in
//! `/proc/devices` with `NVreg_ImexChannelCount` minors (the `params`
//! file's `ImexChannelCount`, 2048 by default), one per channel, and
//! creates no nodes: an administrator, `nvidia-modprobe` or NVIDIA's DRA
//! driver makes `channel<N>` with minor N (`NVreg_CreateImexChannel0=1`
//! has the driver make channel 0). They are not sysfs devices. So a
//! channel is offered where its node exists: a host that made none offers
//! none, as `nvidia-ctk cdi generate --mode=imex` does.

use std::collections::BTreeMap;

use super::{char_node, proc::parse_key_values};
use crate::discover::Report;
use crate::discover::devnode::{self, OnHost, on_host};
use crate::model::Device;
use crate::root::{HostRoot, dev_path, proc_path};
use crate::sysfs::node_number;

/// The node role of a channel.
pub const ROLE: &str = "nvidia-imex-channel";

/// The channels whose nodes exist in `/dev/nvidia-caps-imex-channels`,
/// numbered by the `nvidia-caps-imex-channels` major of
/// `/proc/devices`, in channel order. A node whose numbers are not the
/// channel's, a channel beyond `ImexChannelCount`, or something that is
/// not a character device is skipped with a warning.
pub fn channels(
    root: &HostRoot,
    majors: &BTreeMap<String, u32>,
    report: &mut Report,
) -> Vec<Device> {
    let Some(&major) = majors.get("nvidia-caps-imex-channels") else {
        return Vec::new();
    };
    let dir = dev_path("nvidia-caps-imex-channels");
    let names = match root.dev_list(&dir) {
        Ok(n) => n,
        Err(e) => {
            report.warn(&dir, format!("{}; offering no IMEX channel", e.reason()));
            return Vec::new();
        }
    };
    let params = proc_path("driver/nvidia/params");
    let count: Option<u32> = root
        .read_attr_opt(&params)
        .ok()
        .flatten()
        .and_then(|t| parse_key_values(&t).get("ImexChannelCount")?.parse().ok());
    let mut found: Vec<(u32, Device)> = Vec::new();
    for name in names {
        let Some(n) = node_number(&name, "channel") else {
            continue;
        };
        let path = dir.join(&name);
        if let Some(count) = count
            && n >= count
        {
            report.warn(
                &path,
                format!(
                    "channel {n} is beyond the driver's {count} IMEX channels (ImexChannelCount in {}); skipping it",
                    params.display()
                ),
            );
            continue;
        }
        let node = char_node(ROLE, path.clone(), major, n);
        // One lookup: the node's type and numbers, then its mode and owner.
        let node = match on_host(root, &node) {
            OnHost::Char(e) if (e.major, e.minor) != (major, n) => {
                report.warn(
                    &path,
                    format!(
                        "is {}:{}, not IMEX channel {n} ({major}:{n}); skipping it",
                        e.major, e.minor
                    ),
                );
                continue;
            }
            OnHost::Char(e) => devnode::with_host(node, &e),
            OnHost::Other(kind) => {
                report.warn(
                    &path,
                    format!("not a character device (a {kind}); skipping IMEX channel {n}"),
                );
                continue;
            }
            OnHost::Missing | OnHost::Unreadable(_) => node,
        };
        let mut attrs = BTreeMap::new();
        attrs.insert("channel".to_string(), n.to_string());
        found.push((
            n,
            Device {
                backend: "nvidia".into(),
                id: format!("imex:channel{n}"),
                sysfs_path: String::new(),
                bus: "virtual".into(),
                nodes: vec![node],
                attrs,
                ..Default::default()
            },
        ));
    }
    found.sort_by_key(|(n, _)| *n);
    found.into_iter().map(|(_, d)| d).collect()
}

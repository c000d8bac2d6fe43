//! What the host's `/dev` says about a node a backend found in sysfs or
//! procfs: shared by the backends, each of which decides what a missing or
//! wrong entry means for its devices.

use std::path::Path;

use super::Report;
use crate::model::{HostNode, Node};
use crate::root::{DevEntry, DevKind, Error, HostRoot};

/// A node's entry in the host's `/dev`.
pub(crate) enum OnHost {
    /// A character device.
    Char(DevEntry),
    /// Nothing there (or no `/dev` to look at).
    Missing,
    /// Something that is not a character device.
    Other(DevKind),
    /// The lookup failed.
    Unreadable(Error),
}

/// Looks `node` up in the host's `/dev`.
pub(crate) fn on_host(root: &HostRoot, node: &Node) -> OnHost {
    match root.dev_entry(Path::new(&node.path)) {
        Ok(Some(e)) if e.kind == DevKind::Char => OnHost::Char(e),
        Ok(Some(e)) => OnHost::Other(e.kind),
        Ok(None) => OnHost::Missing,
        Err(e) => OnHost::Unreadable(e),
    }
}

/// Records the host node's mode and owner on `node`.
pub(crate) fn with_host(mut node: Node, e: &DevEntry) -> Node {
    node.host = Some(HostNode {
        mode: e.mode,
        uid: e.uid,
        gid: e.gid,
    });
    node
}

/// [`with_host`], warning when the host node's numbers differ from the
/// ones the kernel reports (a stale node): the kernel's are kept.
pub(crate) fn with_host_checked(node: Node, e: &DevEntry, report: &mut Report) -> Node {
    if (e.major, e.minor) != (node.major, node.minor) {
        report.warn(
            &node.path,
            format!(
                "host node is {}:{} but sysfs says {}:{} (stale node?); trusting sysfs",
                e.major, e.minor, node.major, node.minor
            ),
        );
    }
    with_host(node, e)
}

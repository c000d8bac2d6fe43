//! Sending kernel-format uevents from a benchmark: the benchmark runs
//! itself again in a private network namespace (`unshare -n`, root), so
//! that what it sends to the `NETLINK_KOBJECT_UEVENT` group reaches only
//! the cdigen it starts. Shared by benches/watch.rs and
//! benches/device_plugin.rs.

use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};

use rustix::net::{AddressFamily, SocketFlags, SocketType, netlink, socket_with};

/// Set in the copy of the benchmark that runs in its own network namespace.
const IN_NETNS: &str = "CDIGEN_BENCH_IN_NETNS";

/// Runs the benchmark again under `unshare -n` when that works (root);
/// returns its exit code, or `None` to run here.
pub fn in_private_netns() -> Option<i32> {
    if std::env::var_os(IN_NETNS).is_some() {
        return None;
    }
    let works = Command::new("unshare")
        .args(["-n", "true"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !works {
        return None;
    }
    let status = Command::new("unshare")
        .args(["-n", "--"])
        .arg(std::env::current_exe().unwrap())
        .args(std::env::args_os().skip(1))
        .env(IN_NETNS, "1")
        .status()
        .unwrap();
    Some(status.code().unwrap_or(1))
}

/// A socket to send uevents on, when this process runs in its own
/// network namespace; else why not.
pub fn uevent_socket() -> Result<OwnedFd, String> {
    if std::env::var_os(IN_NETNS).is_none() {
        return Err("not root, or no private network namespace".into());
    }
    socket_with(
        AddressFamily::NETLINK,
        SocketType::DGRAM,
        SocketFlags::CLOEXEC,
        Some(netlink::KOBJECT_UEVENT),
    )
    .map_err(|e| format!("no netlink socket: {e}"))
}

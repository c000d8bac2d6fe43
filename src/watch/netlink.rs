//! The pure-Rust event source: the kernel's uevent broadcast, read from a
//! `NETLINK_KOBJECT_UEVENT` socket (rustix) and parsed by `kobject-uevent`.
//! No libudev, no udevd needed.
//!
//! It listens to the kernel's multicast group (1), not udevd's (2):
//! - kernel uevents reach every network namespace of the initial user
//!   namespace, so a Kubernetes pod without `hostNetwork` still gets them,
//!   while udevd's re-broadcast stays in the host's namespace;
//! - device nodes are made by devtmpfs before the kernel sends the event;
//!   what udev adds afterwards (by-path links, permissions) is given time
//!   by the debounce window, and the watch also waits while udevd reports
//!   a busy queue (`/run/udev/queue`, what `udevadm settle` checks).
//!
//! The sender is not checked: only privileged processes can send to this
//! protocol's groups, and events are only hints (see [`super::source`]).
//! A receive-buffer overflow (`ENOBUFS`) is reported as
//! [`Event::Lost`], which regenerates everything.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use rustix::net::{
    AddressFamily, RecvFlags, SocketFlags, SocketType, bind, netlink, recv, socket_with,
};

use super::source::{DeviceEvent, Event, EventSource, Ready, wait};

/// The kernel's uevent multicast group.
pub const KERNEL_GROUP: u32 = 1;
/// Receive buffer asked for: a burst of thousands of events (a few hundred
/// bytes each) fits.
const RECV_BUFFER: usize = 4 << 20;
/// Largest packet read: the kernel's are at most 2 KiB (`UEVENT_BUFFER_SIZE`).
const MAX_PACKET: usize = 8 << 10;

/// Kernel uevents from a netlink socket (or, for tests, any datagram
/// socket carrying packets in the kernel's format).
#[derive(Debug)]
pub struct Netlink {
    fd: OwnedFd,
    buf: Vec<u8>,
}

impl Netlink {
    /// Opens a netlink socket on the kernel's uevent group.
    ///
    /// # Errors
    /// When the socket cannot be created or bound (no netlink in this
    /// sandbox or container, for example).
    pub fn open() -> io::Result<Self> {
        let fd = socket_with(
            AddressFamily::NETLINK,
            SocketType::DGRAM,
            SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
            Some(netlink::KOBJECT_UEVENT),
        )?;
        enlarge_recv_buffer(&fd);
        bind(&fd, &netlink::SocketAddrNetlink::new(0, KERNEL_GROUP))?;
        Ok(Self::from_fd(fd))
    }

    /// Reads uevent packets from an already open datagram socket.
    pub fn from_fd(fd: OwnedFd) -> Self {
        Netlink {
            fd,
            buf: vec![0; MAX_PACKET],
        }
    }
}

impl EventSource for Netlink {
    fn name(&self) -> &'static str {
        "netlink"
    }

    fn next(&mut self, timeout: Duration, wake: BorrowedFd<'_>) -> io::Result<Option<Event>> {
        let deadline = Instant::now().checked_add(timeout);
        loop {
            let left = deadline.map_or(timeout, |d| d.saturating_duration_since(Instant::now()));
            match wait(Some(self.fd.as_fd()), wake, left)? {
                Ready::Source => {}
                Ready::Wake | Ready::Timeout => return Ok(None),
            }
            match recv(
                &self.fd,
                &mut self.buf[..],
                RecvFlags::DONTWAIT | RecvFlags::TRUNC,
            ) {
                Ok((got, len)) if len > got => {
                    tracing::debug!("netlink: skipping a truncated {len}-byte packet");
                }
                Ok((got, _)) => match parse(self.buf.get(..got).unwrap_or_default()) {
                    Ok(e) => return Ok(Some(Event::Device(e))),
                    Err(why) => tracing::debug!("netlink: skipping a packet: {why}"),
                },
                Err(rustix::io::Errno::NOBUFS) => return Ok(Some(Event::Lost)),
                Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// Asks for a 4 MiB receive buffer on a uevent socket. The forced size
/// needs CAP_NET_ADMIN; the plain one is capped by `net.core.rmem_max`.
/// Either is better than the default; an overflow is still possible and
/// reported as [`Event::Lost`].
pub(super) fn enlarge_recv_buffer(fd: impl AsFd) {
    if rustix::net::sockopt::set_socket_recv_buffer_size_force(&fd, RECV_BUFFER).is_err() {
        let _ = rustix::net::sockopt::set_socket_recv_buffer_size(&fd, RECV_BUFFER);
    }
}

/// Parses one kernel uevent packet
/// (`add@/devices/...\0ACTION=add\0DEVPATH=...\0SUBSYSTEM=...\0SEQNUM=...`).
///
/// # Errors
/// A message saying what is wrong with the packet (not UTF-8, a key
/// missing, an unknown action).
pub fn parse(packet: &[u8]) -> Result<DeviceEvent, String> {
    use kobject_uevent::{ActionType, UEvent};
    let e = UEvent::from_netlink_packet(packet).map_err(|e| e.to_string())?;
    let action = match e.action {
        ActionType::Add => "add",
        ActionType::Remove => "remove",
        ActionType::Change => "change",
        ActionType::Move => "move",
        ActionType::Online => "online",
        ActionType::Offline => "offline",
        ActionType::Bind => "bind",
        ActionType::Unbind => "unbind",
    };
    Ok(DeviceEvent {
        action: action.to_string(),
        subsystem: e.subsystem,
        devpath: e.devpath.to_string_lossy().into_owned(),
    })
}

#[cfg(test)]
mod tests;

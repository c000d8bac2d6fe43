//! The libudev event source (cargo feature `udev`): udevd's events, sent
//! after its rules ran (device links made, permissions set), filtered by
//! subsystem in the kernel (libudev's socket filter).
//!
//! libudev itself falls back to kernel events when udevd is not running.
//! udevd's events do not leave its network namespace: in a pod without
//! `hostNetwork`, use the netlink source.
//!
//! Lost events: the socket's receive buffer is raised to 4 MiB as the
//! netlink source's is (without CAP_NET_ADMIN, at most
//! `net.core.rmem_max`). When it overflows anyway, libudev's
//! `udev_monitor_receive_device` returns no device with `errno` set to
//! `ENOBUFS` (systemd's libudev, built on sd-device since v240, sets
//! `errno` whenever it returns none); that is reported as [`Event::Lost`],
//! which regenerates everything. With a libudev that does not say, a lost
//! event is caught by the periodic re-check.

use std::collections::BTreeSet;
use std::io;
use std::os::fd::{AsFd as _, BorrowedFd};
use std::time::{Duration, Instant};

use super::netlink::enlarge_recv_buffer;
use super::source::{DeviceEvent, Event, EventSource, Ready, wait};

/// Events from a libudev monitor.
pub struct Udev {
    socket: ::udev::MonitorSocket,
    subsystems: Option<BTreeSet<String>>,
}

impl std::fmt::Debug for Udev {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Udev")
            .field("subsystems", &self.subsystems)
            .finish_non_exhaustive()
    }
}

/// A monitor socket on udevd's events of `subsystems` (all when `None`).
fn listen(subsystems: Option<&BTreeSet<String>>) -> io::Result<::udev::MonitorSocket> {
    let mut builder = ::udev::MonitorBuilder::new()?;
    for s in subsystems.into_iter().flatten() {
        builder = builder.match_subsystem(s)?;
    }
    let socket = builder.listen()?;
    enlarge_recv_buffer(&socket);
    Ok(socket)
}

impl Udev {
    /// Listens to udevd's events on `subsystems` (all when `None`).
    ///
    /// # Errors
    /// When the monitor cannot be created or bound.
    pub fn open(subsystems: Option<&BTreeSet<String>>) -> io::Result<Self> {
        Ok(Udev {
            socket: listen(subsystems)?,
            subsystems: subsystems.cloned(),
        })
    }
}

impl EventSource for Udev {
    fn name(&self) -> &'static str {
        "udev"
    }

    fn after_udev(&self) -> bool {
        // udevd sends its events once its rules ran (when udevd does not
        // run, libudev reads kernel events, but then nothing follows).
        true
    }

    fn next(&mut self, timeout: Duration, wake: BorrowedFd<'_>) -> io::Result<Option<Event>> {
        let deadline = Instant::now().checked_add(timeout);
        loop {
            let left = deadline.map_or(timeout, |d| d.saturating_duration_since(Instant::now()));
            match wait(Some(self.socket.as_fd()), wake, left)? {
                Ready::Source => {}
                Ready::Wake | Ready::Timeout => return Ok(None),
            }
            let Some(e) = self.socket.iter().next() else {
                // No device: libudev set errno. ENOBUFS: the receive
                // buffer overflowed. Anything else (EAGAIN for a message
                // filtered out, EPERM for one not from udevd, EINVAL for a
                // malformed one): wait again.
                if io::Error::last_os_error().raw_os_error()
                    == Some(rustix::io::Errno::NOBUFS.raw_os_error())
                {
                    return Ok(Some(Event::Lost));
                }
                continue;
            };
            let text = |s: Option<&std::ffi::OsStr>| {
                s.map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default()
            };
            return Ok(Some(Event::Device(DeviceEvent {
                action: text(e.property_value("ACTION")),
                subsystem: text(e.subsystem()),
                devpath: e.devpath().to_string_lossy().into_owned(),
            })));
        }
    }

    fn filter_subsystems(&mut self, subsystems: Option<&BTreeSet<String>>) -> io::Result<()> {
        if self.subsystems.as_ref() == subsystems {
            return Ok(());
        }
        // The new socket listens before the old one is closed; what was
        // sent in between is covered by the full regeneration that follows
        // a reload.
        self.socket = listen(subsystems)?;
        self.subsystems = subsystems.cloned();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    use rustix::net::{AddressFamily, SendFlags, SocketFlags, SocketType, netlink, socket_with};

    /// udevd's multicast group.
    const UDEV_GROUP: u32 = 2;

    /// An overflowing receive buffer is reported as lost events: the
    /// monitor's buffer is shrunk, and more datagrams than it holds are
    /// multicast to udevd's group (needs root, or CAP_NET_ADMIN, to send;
    /// and libudev binds that group only when udevd runs or /dev is a
    /// devtmpfs). Other listeners of the group drop them: they lack
    /// libudev's header.
    #[test]
    #[ignore = "root only: multicasts garbage datagrams to udevd's netlink group"]
    fn an_overflowing_receive_buffer_is_reported_as_lost_events() {
        let mut source = Udev::open(None).unwrap();
        rustix::net::sockopt::set_socket_recv_buffer_size(&source.socket, 4096).unwrap();
        let tx = socket_with(
            AddressFamily::NETLINK,
            SocketType::DGRAM,
            SocketFlags::CLOEXEC,
            Some(netlink::KOBJECT_UEVENT),
        )
        .unwrap();
        let to = netlink::SocketAddrNetlink::new(0, 1 << (UDEV_GROUP - 1));
        let packet = vec![b'x'; 1024];
        for _ in 0..64 {
            rustix::net::sendto(&tx, &packet, SendFlags::empty(), &to).unwrap();
        }
        let (_wake_tx, wake_rx) = UnixStream::pair().unwrap();
        let got = source
            .next(Duration::from_secs(5), wake_rx.as_fd())
            .unwrap();
        assert_eq!(got, Some(Event::Lost));
        // Then the datagrams that fitted, which libudev refuses (no
        // header): nothing more to report.
        let got = source
            .next(Duration::from_millis(100), wake_rx.as_fd())
            .unwrap();
        assert_eq!(got, None);
    }
}

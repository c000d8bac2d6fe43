//! The libudev event source (cargo feature `udev`): udevd's events, sent
//! after its rules ran (device links made, permissions set), filtered by
//! subsystem in the kernel (libudev's socket filter).
//!
//! libudev itself falls back to kernel events when udevd is not running.
//! udevd's events do not leave its network namespace: in a pod without
//! `hostNetwork`, use the netlink source.

use std::collections::BTreeSet;
use std::io;
use std::os::fd::{AsFd as _, BorrowedFd};
use std::time::{Duration, Instant};

use super::source::{DeviceEvent, Event, EventSource, Ready, wait};

/// Events from a libudev monitor.
pub struct Udev {
    socket: ::udev::MonitorSocket,
}

impl std::fmt::Debug for Udev {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Udev").finish_non_exhaustive()
    }
}

impl Udev {
    /// Listens to udevd's events on `subsystems` (all when `None`).
    ///
    /// # Errors
    /// When the monitor cannot be created or bound.
    pub fn open(subsystems: Option<&BTreeSet<String>>) -> io::Result<Self> {
        let mut builder = ::udev::MonitorBuilder::new()?;
        for s in subsystems.into_iter().flatten() {
            builder = builder.match_subsystem(s)?;
        }
        Ok(Udev {
            socket: builder.listen()?,
        })
    }
}

impl EventSource for Udev {
    fn name(&self) -> &'static str {
        "udev"
    }

    fn next(&mut self, timeout: Duration, wake: BorrowedFd<'_>) -> io::Result<Option<Event>> {
        let deadline = Instant::now().checked_add(timeout);
        loop {
            let left = deadline.map_or(timeout, |d| d.saturating_duration_since(Instant::now()));
            match wait(Some(self.socket.as_fd()), wake, left)? {
                Ready::Source => {}
                Ready::Wake | Ready::Timeout => return Ok(None),
            }
            // None: a message libudev dropped (filtered, not from udevd,
            // malformed); wait again.
            if let Some(e) = self.socket.iter().next() {
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
    }
}

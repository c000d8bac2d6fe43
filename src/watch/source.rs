//! Where `cdigen watch` hears about device changes: the [`EventSource`]
//! trait, the events it yields, and the timer-only source ([`NoEvents`]).
//!
//! Events are hints, never data: whatever an event says, the watch only
//! uses its subsystem to decide which generators to regenerate, and
//! regeneration reads the host afresh. A forged or garbled event can at
//! worst cause one more (debounced) regeneration.

use std::collections::BTreeSet;
use std::io;
use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};

/// What a source reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A device event.
    Device(DeviceEvent),
    /// Events were lost (the socket's receive buffer overflowed): anything
    /// may have changed.
    Lost,
}

/// One uevent, as much of it as the watch uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceEvent {
    /// `add`, `remove`, `change`, `move`, `online`, `offline`, `bind`,
    /// `unbind`.
    pub action: String,
    /// `drm`, `pci`, `net`, ...
    pub subsystem: String,
    /// The device's path under `/sys` (`/devices/pci0000:00/...`).
    pub devpath: String,
}

/// A stream of device events.
pub trait EventSource {
    /// Short name for logs: `netlink`, `udev`, `none`.
    fn name(&self) -> &'static str;

    /// Waits up to `timeout` for the next event. `Ok(None)` when the
    /// timeout passed, or as soon as `wake` becomes readable (a signal
    /// arrived: the caller checks why).
    ///
    /// # Errors
    /// When the source cannot be read any more.
    fn next(&mut self, timeout: Duration, wake: BorrowedFd<'_>) -> io::Result<Option<Event>>;

    /// Whether events come after udevd's rules ran for them (its links
    /// made, permissions set), as udev's own do; kernel events come
    /// before. A pass made at once on a kernel event is made again once
    /// udev is idle (see [`super::debounce`]).
    fn after_udev(&self) -> bool {
        false
    }

    /// Narrows the events to `subsystems` (`None`: all), for a source that
    /// can filter before waking the watch (udev's filter runs in the
    /// kernel); the others ignore it, as the watch filters every event
    /// anyway. Called with the generators' subsystems after SIGHUP re-read
    /// their definitions.
    ///
    /// # Errors
    /// When the new filter cannot be installed; the previous one stays.
    fn filter_subsystems(&mut self, subsystems: Option<&BTreeSet<String>>) -> io::Result<()> {
        let _ = subsystems;
        Ok(())
    }
}

/// The source of the timer-only mode (`--source none`): never an event,
/// so the watch regenerates on its periodic re-check and on SIGHUP only.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoEvents;

impl EventSource for NoEvents {
    fn name(&self) -> &'static str {
        "none"
    }

    fn next(&mut self, timeout: Duration, wake: BorrowedFd<'_>) -> io::Result<Option<Event>> {
        wait(None, wake, timeout)?;
        Ok(None)
    }
}

/// What [`wait`] saw first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ready {
    /// The source's descriptor is readable.
    Source,
    /// The wake descriptor is readable, or a signal interrupted the wait.
    Wake,
    /// The timeout passed.
    Timeout,
}

/// Longest single wait; longer timeouts just wait again.
const MAX_WAIT: Duration = Duration::from_secs(3600);

/// Waits until `source` or `wake` is readable, or `timeout` passes.
/// `wake` wins when both are ready.
///
/// # Errors
/// When `poll` fails other than by a signal.
pub fn wait(
    source: Option<BorrowedFd<'_>>,
    wake: BorrowedFd<'_>,
    timeout: Duration,
) -> io::Result<Ready> {
    let deadline = Instant::now().checked_add(timeout);
    loop {
        let left = match deadline {
            Some(d) => d.saturating_duration_since(Instant::now()),
            None => MAX_WAIT,
        };
        let ts = Timespec::try_from(left.min(MAX_WAIT)).map_err(io::Error::other)?;
        let readable = PollFlags::IN;
        let mut fds = vec![PollFd::from_borrowed_fd(wake, readable)];
        if let Some(fd) = source {
            fds.push(PollFd::from_borrowed_fd(fd, readable));
        }
        match poll(&mut fds, Some(&ts)) {
            Ok(0) => {
                if left < MAX_WAIT {
                    return Ok(Ready::Timeout);
                }
            }
            Ok(_) => {
                let any = PollFlags::IN | PollFlags::ERR | PollFlags::HUP;
                if fds.first().is_some_and(|f| f.revents().intersects(any)) {
                    return Ok(Ready::Wake);
                }
                if fds.get(1).is_some_and(|f| f.revents().intersects(any)) {
                    return Ok(Ready::Source);
                }
            }
            Err(rustix::io::Errno::INTR) => return Ok(Ready::Wake),
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;
    use std::os::fd::AsFd as _;
    use std::os::unix::net::UnixStream;

    #[test]
    fn wait_times_out_then_sees_the_source_then_prefers_wake() {
        let (mut src_tx, src_rx) = UnixStream::pair().unwrap();
        let (mut wake_tx, wake_rx) = UnixStream::pair().unwrap();
        let t = Instant::now();
        let r = wait(
            Some(src_rx.as_fd()),
            wake_rx.as_fd(),
            Duration::from_millis(30),
        );
        assert_eq!(r.unwrap(), Ready::Timeout);
        assert!(t.elapsed() >= Duration::from_millis(30));

        src_tx.write_all(b"x").unwrap();
        let r = wait(
            Some(src_rx.as_fd()),
            wake_rx.as_fd(),
            Duration::from_secs(5),
        );
        assert_eq!(r.unwrap(), Ready::Source);

        wake_tx.write_all(b"x").unwrap();
        let r = wait(
            Some(src_rx.as_fd()),
            wake_rx.as_fd(),
            Duration::from_secs(5),
        );
        assert_eq!(r.unwrap(), Ready::Wake);
    }

    #[test]
    fn no_events_returns_at_once_when_woken() {
        let (mut wake_tx, wake_rx) = UnixStream::pair().unwrap();
        wake_tx.write_all(b"x").unwrap();
        let t = Instant::now();
        let got = NoEvents
            .next(Duration::from_secs(60), wake_rx.as_fd())
            .unwrap();
        assert_eq!(got, None);
        assert!(t.elapsed() < Duration::from_secs(5));
    }
}

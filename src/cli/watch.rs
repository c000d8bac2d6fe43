//! `cdigen watch`: picks the event source, installs the signal handlers
//! and runs [`crate::watch::run`] over the generate pipeline.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use super::{EXIT_OK, EventSourceKind, WatchArgs};
use crate::watch::{self, Config, Control, EventSource, NoEvents, Pipeline, Regenerate as _};

pub(crate) fn run(args: &WatchArgs) -> anyhow::Result<u8> {
    let mut pipeline = Pipeline::new(
        args.source.clone(),
        args.defs.clone(),
        args.output_dir.clone(),
        args.devinfo_dir.clone(),
        args.format.map(Into::into),
    )?;
    // udev filters in the kernel: on the subsystems of the generators
    // loaded (the watch installs a new filter when SIGHUP loads others).
    let subsystems = watch::all_subsystems(&pipeline.watched());
    let mut source = open_source(args.events, subsystems.as_ref())?;
    let mut control = Control::new()?;
    control.handle_signals()?;
    let config = Config {
        debounce: args.debounce,
        max_delay: args.max_delay,
        interval: args.interval,
        ready_file: args.ready_file.clone(),
        ..Config::default()
    };
    watch::run(
        &config,
        source.as_mut(),
        &mut pipeline,
        &control,
        &mut |_| {},
    )?;
    Ok(EXIT_OK)
}

/// Opens the event source `kind` asks for, on `subsystems` (all when
/// `None`) where it filters; `auto` falls back to the timer alone (with a
/// warning) when no source can be opened.
fn open_source(
    kind: EventSourceKind,
    subsystems: Option<&BTreeSet<String>>,
) -> anyhow::Result<Box<dyn EventSource>> {
    use anyhow::Context as _;
    match kind {
        EventSourceKind::None => Ok(Box::new(NoEvents)),
        EventSourceKind::Netlink => Ok(Box::new(
            watch::netlink::Netlink::open().context("cannot listen to kernel uevents (netlink)")?,
        )),
        EventSourceKind::Udev => open_udev(subsystems),
        EventSourceKind::Auto => {
            if cfg!(feature = "udev") && Path::new("/run/udev/control").exists() {
                match open_udev(subsystems) {
                    Ok(s) => return Ok(s),
                    Err(e) => tracing::warn!("{e:#}; trying kernel uevents"),
                }
            }
            match watch::netlink::Netlink::open() {
                Ok(s) => Ok(Box::new(s)),
                Err(e) => {
                    tracing::warn!(
                        "cannot listen to kernel uevents (netlink): {e}; regenerating on the periodic re-check and SIGHUP only"
                    );
                    Ok(Box::new(NoEvents))
                }
            }
        }
    }
}

#[cfg(feature = "udev")]
fn open_udev(subsystems: Option<&BTreeSet<String>>) -> anyhow::Result<Box<dyn EventSource>> {
    use anyhow::Context as _;
    Ok(Box::new(
        watch::udev::Udev::open(subsystems).context("cannot listen to udev events")?,
    ))
}

#[cfg(not(feature = "udev"))]
fn open_udev(_: Option<&BTreeSet<String>>) -> anyhow::Result<Box<dyn EventSource>> {
    anyhow::bail!(
        "this cdigen was built without udev support: rebuild with `cargo build --features udev` \
(needs libudev-dev and pkg-config), or use --source netlink (kernel uevents, no libudev)"
    )
}

/// Parses `--debounce`, `--max-delay`: `500ms`, `5s`, `1m`, at least
/// 10ms (a shorter wait would only make the watch poll a busy udev queue
/// in a tight loop).
pub(crate) fn duration(s: &str) -> Result<Duration, String> {
    let d = any_duration(s)?;
    if d < watch::MIN_DEBOUNCE {
        return Err(format!(
            "must be at least {}",
            humantime::format_duration(watch::MIN_DEBOUNCE)
        ));
    }
    Ok(d)
}

fn any_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{e} (examples: 500ms, 5s, 10m)"))
}

/// Parses `--interval`: a duration of at least one second.
pub(crate) fn interval(s: &str) -> Result<Duration, String> {
    let d = any_duration(s)?;
    if d < Duration::from_secs(1) {
        return Err("must be at least 1s".into());
    }
    Ok(d)
}

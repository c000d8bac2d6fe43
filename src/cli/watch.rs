//! `cdigen watch`: picks the event source, installs the signal handlers
//! and runs [`crate::watch::run`] over the generate pipeline.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use super::{EXIT_OK, EventSourceKind, WatchArgs};
use crate::watch::{self, Config, Control, EventSource, NoEvents, Pipeline, Regenerate as _};

pub(crate) fn run(args: &WatchArgs) -> anyhow::Result<u8> {
    let mut pipeline = pipeline(args)?;
    // udev filters in the kernel: on the subsystems of the generators
    // loaded (the watch installs a new filter when SIGHUP loads others).
    let subsystems = watch::all_subsystems(&pipeline.watched());
    let mut source = open_source(args.events, subsystems.as_ref())?;
    let control = control()?;
    watch::run(
        &config(args),
        source.as_mut(),
        &mut pipeline,
        &control,
        &mut |_| {},
    )?;
    Ok(EXIT_OK)
}

/// The pipeline `args` describe: what `watch`, `device-plugin` and
/// `dra-driver` regenerate.
pub(crate) fn pipeline(args: &WatchArgs) -> anyhow::Result<Pipeline> {
    Ok(Pipeline::new(
        args.source.host(),
        args.defs.definitions(),
        args.output_dir.clone(),
        args.devinfo_dir.clone(),
        args.format.map(Into::into),
    )?
    .with_spec_dirs(args.spec_dirs.clone()))
}

/// The watch's timing and readiness file from `args`.
pub(crate) fn config(args: &WatchArgs) -> Config {
    Config {
        debounce: args.debounce,
        max_delay: args.max_delay,
        interval: args.interval,
        ready_file: args.ready_file.clone(),
        ..Config::default()
    }
}

/// The watch's control, with SIGTERM, SIGINT and SIGHUP handled.
pub(crate) fn control() -> anyhow::Result<Control> {
    let mut control = Control::new()?;
    control.handle_signals()?;
    Ok(control)
}

/// Opens the event source `kind` asks for, on `subsystems` (all when
/// `None`) where it filters; `auto` falls back to the timer alone (with a
/// warning) when no source can be opened.
pub(crate) fn open_source(
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

/// Parses `--debounce`: `500ms`, `2s`, from 10ms (a shorter wait would
/// only make the watch poll a busy udev queue in a tight loop) to 1m
/// ([`watch::MAX_DEBOUNCE`]).
pub(crate) fn debounce(s: &str) -> Result<Duration, String> {
    bounded(s, MIN_DEBOUNCE, MAX_DEBOUNCE)
}

/// Parses `--max-delay`: from 10ms to 1h ([`watch::MAX_DELAY`]).
pub(crate) fn max_delay(s: &str) -> Result<Duration, String> {
    bounded(s, MIN_DEBOUNCE, MAX_DELAY)
}

/// Parses `--interval`: from 1s to 24h ([`watch::MAX_INTERVAL`]).
pub(crate) fn interval(s: &str) -> Result<Duration, String> {
    bounded(s, MIN_INTERVAL, MAX_INTERVAL)
}

/// A bound, and how `--help` spells it.
type Bound = (Duration, &'static str);

const MIN_DEBOUNCE: Bound = (watch::MIN_DEBOUNCE, "10ms");
const MAX_DEBOUNCE: Bound = (watch::MAX_DEBOUNCE, "1m");
const MAX_DELAY: Bound = (watch::MAX_DELAY, "1h");
const MIN_INTERVAL: Bound = (Duration::from_secs(1), "1s");
const MAX_INTERVAL: Bound = (watch::MAX_INTERVAL, "24h");

/// A duration (`500ms`, `5s`, `10m`) from `min` to `max`, both included.
fn bounded(s: &str, (min, min_text): Bound, (max, max_text): Bound) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| format!("{e} (examples: 500ms, 5s, 10m)"))?;
    if d < min {
        return Err(format!("must be at least {min_text}"));
    }
    if d > max {
        return Err(format!("must be at most {max_text}"));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_spelled_as_they_are() {
        for (d, text) in [
            MIN_DEBOUNCE,
            MAX_DEBOUNCE,
            MAX_DELAY,
            MIN_INTERVAL,
            MAX_INTERVAL,
        ] {
            assert_eq!(humantime::parse_duration(text), Ok(d), "{text}");
        }
    }

    #[test]
    fn durations_are_bounded_both_ways() {
        assert_eq!(interval("24h"), Ok(Duration::from_secs(86_400)));
        assert_eq!(interval("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(interval("86401s"), Err("must be at most 24h".into()));
        assert_eq!(
            interval("18446744073709551615s"),
            Err("must be at most 24h".into())
        );
        assert_eq!(interval("999ms"), Err("must be at least 1s".into()));
        assert_eq!(debounce("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(debounce("61s"), Err("must be at most 1m".into()));
        assert_eq!(debounce("9ms"), Err("must be at least 10ms".into()));
        assert_eq!(max_delay("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(max_delay("3601s"), Err("must be at most 1h".into()));
        assert!(
            interval("99999999999999999999s")
                .is_err_and(|e| e.ends_with("(examples: 500ms, 5s, 10m)")),
        );
    }
}

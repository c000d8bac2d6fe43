//! When to regenerate after device events: the first event of a quiet
//! period at once (leading edge), what follows coalesced (trailing edge).
//!
//! [`Debouncer`] is a pure state machine over the times it is given.
//! Events ([`Debouncer::event`]) and the end of each pass
//! ([`Debouncer::done`]) go in; [`Debouncer::step`] says what to do at a
//! given instant: regenerate a scope now, or nothing until an instant (or
//! until the next event). It never reads the clock, so its behaviour is
//! tested over virtual time.
//!
//! - **Leading edge.** An event after a quiet period (no event and no pass
//!   for `quiet`, the `--debounce`) is regenerated at once: a single
//!   hotplug costs one pass, not a quiet period and a pass.
//! - **Trailing edge.** Events that come within `quiet` of an event or of
//!   the end of a pass (including those that arrive during a pass) are
//!   collected, and regenerated together once none came for `quiet`, or
//!   `max_delay` after the first of them under a steady stream, whichever
//!   comes first. While udev is still busy, a trailing pass that is due
//!   waits, one quiet period at a time, never past `max_delay` after the
//!   first of its events.
//! - **Confirmation.** A pass made at once may have read the host before
//!   udev finished with the event (links, permissions): the caller then
//!   hands its scope back to [`Debouncer::done`], and it is regenerated
//!   again at the trailing edge, as if an event had come when the pass
//!   ended.
//!
//! So a burst of any size costs one leading pass, then one trailing pass
//! per `max_delay` while it lasts, and one once it stops. What is held is
//! a set of generator names, never a queue of events, so memory stays
//! bounded whatever the burst.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// Which generators a regeneration covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Every generator.
    All,
    /// These generators (by name).
    Only(BTreeSet<String>),
}

impl Scope {
    /// Adds `other` to this scope.
    pub fn merge(&mut self, other: Scope) {
        match (&mut *self, other) {
            (Scope::All, _) => {}
            (_, Scope::All) => *self = Scope::All,
            (Scope::Only(mine), Scope::Only(theirs)) => mine.extend(theirs),
        }
    }

    /// Whether `generator` is covered.
    pub fn contains(&self, generator: &str) -> bool {
        match self {
            Scope::All => true,
            Scope::Only(names) => names.contains(generator),
        }
    }
}

/// Which edge a pass is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edge {
    /// The first event of a quiet period, regenerated at once.
    Leading,
    /// Events coalesced after a quiet period or the maximum delay.
    Trailing,
}

/// What to do now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Regenerate this scope now, then call [`Debouncer::done`].
    Regenerate(Scope, Edge),
    /// Nothing before this instant, unless an event comes.
    WaitUntil(Instant),
    /// Nothing pending: wait for an event.
    Idle,
}

/// Collects affected generators and says when to regenerate them.
#[derive(Debug, Clone)]
pub struct Debouncer {
    quiet: Duration,
    max_delay: Duration,
    pending: Option<Pending>,
    /// The latest event, or end of a pass: a quiet period runs from it.
    last_activity: Option<Instant>,
    /// Whether a pass runs (between [`Step::Regenerate`] and
    /// [`Debouncer::done`]): events then are never a leading edge, as the
    /// pass may have read the host before or after them.
    running: bool,
}

#[derive(Debug, Clone)]
struct Pending {
    scope: Scope,
    /// The first event not covered by a pass yet.
    first: Instant,
    /// The latest one (or when udev was last seen busy).
    last: Instant,
    edge: Edge,
}

impl Debouncer {
    /// Regenerates at once after `quiet` without events, else waits for
    /// `quiet` without events, at most `max_delay` after the first one.
    pub fn new(quiet: Duration, max_delay: Duration) -> Self {
        Debouncer {
            quiet,
            max_delay: max_delay.max(quiet),
            pending: None,
            last_activity: None,
            running: false,
        }
    }

    /// Records that an event at `now` affects `scope`.
    pub fn event(&mut self, now: Instant, scope: Scope) {
        let quiet = !self.running
            && self.pending.is_none()
            && self
                .last_activity
                .is_none_or(|t| now.saturating_duration_since(t) >= self.quiet);
        self.last_activity = Some(self.last_activity.map_or(now, |t| t.max(now)));
        let edge = if quiet { Edge::Leading } else { Edge::Trailing };
        self.add(now, scope, edge);
    }

    fn add(&mut self, now: Instant, scope: Scope, edge: Edge) {
        match &mut self.pending {
            Some(p) => {
                p.scope.merge(scope);
                p.last = p.last.max(now);
            }
            None => {
                self.pending = Some(Pending {
                    scope,
                    first: now,
                    last: now,
                    edge,
                })
            }
        }
    }

    /// What to do at `now`. `udev_busy` is asked only when a trailing
    /// pass is due before its longest wait: true puts it off by one quiet
    /// period.
    pub fn step(&mut self, now: Instant, udev_busy: &mut dyn FnMut() -> bool) -> Step {
        let Some(p) = &mut self.pending else {
            return Step::Idle;
        };
        if p.edge == Edge::Trailing {
            let due = deadline(p, self.quiet, self.max_delay);
            if now < due {
                return Step::WaitUntil(due);
            }
            let overdue = now.saturating_duration_since(p.first) >= self.max_delay;
            if !overdue && udev_busy() {
                p.last = p.last.max(now);
                return Step::WaitUntil(deadline(p, self.quiet, self.max_delay));
            }
        }
        match self.pending.take() {
            Some(p) => {
                self.running = true;
                Step::Regenerate(p.scope, p.edge)
            }
            None => Step::Idle,
        }
    }

    /// The pass [`Debouncer::step`] asked for ended at `now`. `confirm`:
    /// a scope to regenerate again at the trailing edge (a pass made while
    /// udev may not have finished).
    pub fn done(&mut self, now: Instant, confirm: Option<Scope>) {
        self.running = false;
        self.last_activity = Some(self.last_activity.map_or(now, |t| t.max(now)));
        if let Some(scope) = confirm {
            self.add(now, scope, Edge::Trailing);
        }
    }

    /// Forgets what is pending (a full regeneration covers it); call
    /// [`Debouncer::done`] when that pass ends.
    pub fn clear(&mut self) {
        self.pending = None;
    }

    /// Whether something is pending.
    pub fn is_pending(&self) -> bool {
        self.pending.is_some()
    }
}

/// When the trailing pass of `p` is due: `quiet` after its latest event,
/// at most `max_delay` after its first.
fn deadline(p: &Pending, quiet: Duration, max_delay: Duration) -> Instant {
    let quiet = p.last.checked_add(quiet).unwrap_or(p.last);
    let cap = p.first.checked_add(max_delay).unwrap_or(p.first);
    quiet.min(cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn only(names: &[&str]) -> Scope {
        Scope::Only(names.iter().map(|n| n.to_string()).collect())
    }

    const MS: Duration = Duration::from_millis(1);

    /// One pass of a simulated run: when it began, what, which edge.
    type Run = (Duration, Scope, Edge);

    /// The watch loop over virtual time: `events` (sorted) arrive at their
    /// instants, also during a pass (which lasts `pass`); udev is busy
    /// while `busy(t)`; leading passes are confirmed when `confirm`.
    /// Stops once nothing is pending and no event is left.
    fn simulate(
        d: &mut Debouncer,
        events: &[(Duration, Scope)],
        pass: Duration,
        busy: &dyn Fn(Duration) -> bool,
        confirm: bool,
    ) -> Vec<Run> {
        let t0 = Instant::now();
        let mut now = Duration::ZERO;
        let mut next = events.iter().peekable();
        let mut runs = Vec::new();
        loop {
            while let Some((_, scope)) = next.next_if(|(t, _)| *t <= now) {
                d.event(t0 + now, scope.clone());
            }
            match d.step(t0 + now, &mut || busy(now)) {
                Step::Regenerate(scope, edge) => {
                    runs.push((now, scope.clone(), edge));
                    let end = now + pass;
                    // Events during the pass, noted when they come.
                    while let Some((t, scope)) = next.next_if(|(t, _)| *t < end) {
                        d.event(t0 + *t, scope.clone());
                    }
                    now = end;
                    let again = (confirm && edge == Edge::Leading).then_some(scope);
                    d.done(t0 + now, again);
                }
                Step::WaitUntil(t) => {
                    let t = t - t0;
                    assert!(t > now, "a wait into the past at {now:?}");
                    now = next.peek().map_or(t, |(e, _)| t.min(*e));
                }
                Step::Idle => match next.peek() {
                    Some((t, _)) => now = now.max(*t),
                    None => return runs,
                },
            }
        }
    }

    fn never(_: Duration) -> bool {
        false
    }

    fn at(runs: &[Run]) -> Vec<(u128, Edge)> {
        runs.iter().map(|(t, _, e)| (t.as_millis(), *e)).collect()
    }

    #[test]
    fn a_single_event_is_regenerated_at_once() {
        let mut d = Debouncer::new(500 * MS, 5000 * MS);
        assert_eq!(d.step(Instant::now(), &mut || false), Step::Idle);
        let events = [(1000 * MS, only(&["gpu"])), (1600 * MS, only(&["vf"]))];
        let runs = simulate(&mut d, &events, 50 * MS, &never, false);
        // The second comes 550 ms after the first pass ended: quiet again.
        assert_eq!(at(&runs), [(1000, Edge::Leading), (1600, Edge::Leading)]);
        assert_eq!(runs[0].1, only(&["gpu"]));
        assert_eq!(runs[1].1, only(&["vf"]));
        assert!(!d.is_pending());
    }

    #[test]
    fn a_burst_is_one_pass_at_once_and_one_after_the_quiet_period() {
        let mut d = Debouncer::new(500 * MS, 5000 * MS);
        // 100 events, one a millisecond, alternating generators.
        let events: Vec<(Duration, Scope)> = (0..100u32)
            .map(|i| (i * MS, only(&[if i % 2 == 0 { "gpu" } else { "vf" }])))
            .collect();
        let runs = simulate(&mut d, &events, 50 * MS, &never, false);
        assert_eq!(at(&runs), [(0, Edge::Leading), (99 + 500, Edge::Trailing)]);
        assert_eq!(runs[0].1, only(&["gpu"]));
        assert_eq!(runs[1].1, only(&["gpu", "vf"]));
    }

    #[test]
    fn a_storm_of_10k_events_is_at_most_five_passes() {
        let scope = |i: u32| only(&[["gpu", "vf", "vfio"][(i % 3) as usize]]);
        // 10k events in 100 ms, passes of 300 ms: the storm is over
        // before the first pass ends.
        let mut d = Debouncer::new(500 * MS, 5000 * MS);
        let events: Vec<(Duration, Scope)> = (0..10_000u32)
            .map(|i| (i * Duration::from_micros(10), scope(i)))
            .collect();
        let runs = simulate(&mut d, &events, 300 * MS, &never, false);
        assert_eq!(at(&runs), [(0, Edge::Leading), (599, Edge::Trailing)]);
        assert_eq!(runs[1].1, only(&["gpu", "vf", "vfio"]));
        // The same 10k spread over 12 s: a pass per max delay while it
        // lasts, and one when it stops.
        let mut d = Debouncer::new(500 * MS, 5000 * MS);
        let events: Vec<(Duration, Scope)> = (0..10_000u32)
            .map(|i| (i * Duration::from_micros(1200), scope(i)))
            .collect();
        let runs = simulate(&mut d, &events, 50 * MS, &never, false);
        assert_eq!(
            at(&runs),
            [
                (0, Edge::Leading),
                (5001, Edge::Trailing),
                (10_001, Edge::Trailing),
                (12_498, Edge::Trailing)
            ]
        );
        assert!(runs.len() <= 5);
    }

    #[test]
    fn events_during_a_pass_are_regenerated_after_it_never_lost() {
        // A pass longer than the quiet period: an event in its last
        // moments is no leading edge (the pass may have read the host
        // before it), and is regenerated a quiet period after it.
        let mut d = Debouncer::new(100 * MS, 5000 * MS);
        let events = [(Duration::ZERO, only(&["gpu"])), (250 * MS, only(&["vf"]))];
        let runs = simulate(&mut d, &events, 300 * MS, &never, false);
        assert_eq!(at(&runs), [(0, Edge::Leading), (350, Edge::Trailing)]);
        assert_eq!(runs[1].1, only(&["vf"]));
        // Read only once the pass ended (as the loop reads its source):
        // the end of the pass counts as activity, so the same.
        let t0 = Instant::now();
        let mut d = Debouncer::new(100 * MS, 5000 * MS);
        d.event(t0, only(&["gpu"]));
        assert_eq!(
            d.step(t0, &mut || false),
            Step::Regenerate(only(&["gpu"]), Edge::Leading)
        );
        d.done(t0 + 300 * MS, None);
        d.event(t0 + 300 * MS, only(&["vf"]));
        assert_eq!(
            d.step(t0 + 300 * MS, &mut || false),
            Step::WaitUntil(t0 + 400 * MS)
        );
        assert_eq!(
            d.step(t0 + 400 * MS, &mut || false),
            Step::Regenerate(only(&["vf"]), Edge::Trailing)
        );
    }

    #[test]
    fn a_steady_stream_is_regenerated_at_once_then_every_max_delay() {
        let mut d = Debouncer::new(500 * MS, 2000 * MS);
        // An event every 100 ms for 10 s: never quiet.
        let events: Vec<(Duration, Scope)> = (0..100u32)
            .map(|i| (100 * MS * i, only(&["drm"])))
            .collect();
        let runs = simulate(&mut d, &events, Duration::ZERO, &never, false);
        let times: Vec<u128> = runs.iter().map(|(t, _, _)| t.as_millis()).collect();
        assert_eq!(times, [0, 2100, 4200, 6300, 8400, 10_400]);
        assert!(runs.iter().skip(1).all(|(_, _, e)| *e == Edge::Trailing));
    }

    #[test]
    fn a_busy_udev_delays_trailing_passes_up_to_the_max_delay_never_the_leading_one() {
        let mut d = Debouncer::new(100 * MS, 1000 * MS);
        let events = [(Duration::ZERO, only(&["a"])), (10 * MS, only(&["b"]))];
        let busy = |t: Duration| t < 10_000 * MS;
        let runs = simulate(&mut d, &events, 5 * MS, &busy, false);
        // The trailing pass, due at 110 ms, waits for udev until 1010 ms.
        assert_eq!(at(&runs), [(0, Edge::Leading), (1010, Edge::Trailing)]);
        // Busy until 300 ms: it runs once udev is seen idle.
        let mut d = Debouncer::new(100 * MS, 1000 * MS);
        let busy = |t: Duration| t < 300 * MS;
        let runs = simulate(&mut d, &events, 5 * MS, &busy, false);
        assert_eq!(at(&runs), [(0, Edge::Leading), (310, Edge::Trailing)]);
    }

    #[test]
    fn a_confirmed_leading_pass_is_regenerated_again_after_the_quiet_period() {
        let mut d = Debouncer::new(100 * MS, 1000 * MS);
        let events = [(Duration::ZERO, only(&["gpu"]))];
        let busy = |t: Duration| t < 150 * MS;
        let runs = simulate(&mut d, &events, 20 * MS, &busy, true);
        // Due at 120 ms (the pass ended at 20), udev busy: again at 220.
        assert_eq!(at(&runs), [(0, Edge::Leading), (220, Edge::Trailing)]);
        assert_eq!(runs[1].1, only(&["gpu"]));
    }

    #[test]
    fn all_absorbs_every_other_scope() {
        let t0 = Instant::now();
        let mut d = Debouncer::new(MS, MS);
        d.event(t0, only(&["a"]));
        d.event(t0, Scope::All);
        d.event(t0, only(&["b"]));
        assert_eq!(
            d.step(t0, &mut || false),
            Step::Regenerate(Scope::All, Edge::Leading)
        );
        assert!(Scope::All.contains("x"));
        assert!(!only(&["a"]).contains("x"));
    }

    #[test]
    fn clear_drops_what_is_pending_and_a_full_pass_ends_the_quiet_period() {
        let t0 = Instant::now();
        let mut d = Debouncer::new(10 * MS, 100 * MS);
        d.event(t0, only(&["a"]));
        d.clear();
        assert_eq!(d.step(t0 + 10 * MS, &mut || false), Step::Idle);
        // A full pass ended at 20 ms: an event at 25 ms may have come
        // during it, so it waits for the trailing edge.
        d.done(t0 + 20 * MS, None);
        d.event(t0 + 25 * MS, only(&["a"]));
        assert_eq!(
            d.step(t0 + 25 * MS, &mut || false),
            Step::WaitUntil(t0 + 35 * MS)
        );
    }
}

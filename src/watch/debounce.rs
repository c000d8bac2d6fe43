//! Debouncing: many events, one regeneration.
//!
//! After the first relevant event the debouncer waits for a quiet period
//! (no event for `quiet`) or, under a steady stream, for `max_delay` since
//! that first event, whichever comes first; then the union of the affected
//! generators is regenerated once. What it holds is a set of generator
//! names, never a queue of events, so memory stays bounded whatever the
//! burst. Time is passed in, so the logic is tested without sleeping.

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

/// Collects affected generators and says when to regenerate them.
#[derive(Debug, Clone)]
pub struct Debouncer {
    quiet: Duration,
    max_delay: Duration,
    pending: Option<Pending>,
}

#[derive(Debug, Clone)]
struct Pending {
    scope: Scope,
    first: Instant,
    last: Instant,
}

impl Debouncer {
    /// Waits for `quiet` without events, at most `max_delay` after the
    /// first one.
    pub fn new(quiet: Duration, max_delay: Duration) -> Self {
        Debouncer {
            quiet,
            max_delay: max_delay.max(quiet),
            pending: None,
        }
    }

    /// Records that an event at `now` affects `scope`.
    pub fn note(&mut self, now: Instant, scope: Scope) {
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
                })
            }
        }
    }

    /// When the pending regeneration is due; `None` when nothing is
    /// pending.
    pub fn deadline(&self) -> Option<Instant> {
        self.pending.as_ref().map(|p| {
            let quiet = p.last.checked_add(self.quiet).unwrap_or(p.last);
            let cap = p.first.checked_add(self.max_delay).unwrap_or(p.first);
            quiet.min(cap)
        })
    }

    /// Whether the pending regeneration has waited its longest already:
    /// it must not be put off any more.
    pub fn overdue(&self, now: Instant) -> bool {
        self.pending
            .as_ref()
            .is_some_and(|p| now.saturating_duration_since(p.first) >= self.max_delay)
    }

    /// Puts the pending regeneration off by one quiet period from `now`
    /// (while udev is still busy), never past `max_delay` after the first
    /// event.
    pub fn postpone(&mut self, now: Instant) {
        if let Some(p) = &mut self.pending {
            p.last = p.last.max(now);
        }
    }

    /// The scope to regenerate now, when it is due at `now`.
    pub fn take_due(&mut self, now: Instant) -> Option<Scope> {
        if self.deadline().is_some_and(|d| d <= now) {
            self.pending.take().map(|p| p.scope)
        } else {
            None
        }
    }

    /// Forgets what is pending (a full regeneration covers it).
    pub fn clear(&mut self) {
        self.pending = None;
    }

    /// Whether something is pending.
    pub fn is_pending(&self) -> bool {
        self.pending.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn only(names: &[&str]) -> Scope {
        Scope::Only(names.iter().map(|n| n.to_string()).collect())
    }

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_burst_becomes_one_regeneration_after_the_quiet_period() {
        let t0 = Instant::now();
        let mut d = Debouncer::new(500 * MS, 5000 * MS);
        assert_eq!(d.deadline(), None);
        assert_eq!(d.take_due(t0), None);
        // 5000 events, one every 0.01 ms, alternating generators.
        for i in 0..5000u32 {
            let name = if i % 2 == 0 { "amd-gpu" } else { "vfio" };
            d.note(t0 + Duration::from_micros(u64::from(i) * 10), only(&[name]));
        }
        let last = t0 + Duration::from_micros(49_990);
        assert_eq!(d.deadline(), Some(last + 500 * MS));
        assert_eq!(d.take_due(last + 499 * MS), None);
        assert_eq!(
            d.take_due(last + 500 * MS),
            Some(only(&["amd-gpu", "vfio"]))
        );
        assert!(!d.is_pending());
        assert_eq!(d.take_due(last + 10_000 * MS), None, "only once");
    }

    #[test]
    fn a_steady_stream_is_regenerated_every_max_delay() {
        let t0 = Instant::now();
        let mut d = Debouncer::new(500 * MS, 2000 * MS);
        let mut runs = Vec::new();
        // An event every 100 ms for 10 s: never quiet.
        for i in 0..100u32 {
            let now = t0 + 100 * MS * i;
            if let Some(s) = d.take_due(now) {
                runs.push((now - t0, s));
            }
            d.note(now, only(&["drm"]));
        }
        let times: Vec<Duration> = runs.iter().map(|(t, _)| *t).collect();
        assert_eq!(
            times,
            [2000 * MS, 4000 * MS, 6000 * MS, 8000 * MS],
            "every max_delay"
        );
    }

    #[test]
    fn all_absorbs_every_other_scope() {
        let t0 = Instant::now();
        let mut d = Debouncer::new(MS, MS);
        d.note(t0, only(&["a"]));
        d.note(t0, Scope::All);
        d.note(t0, only(&["b"]));
        assert_eq!(d.take_due(t0 + MS), Some(Scope::All));
        assert!(Scope::All.contains("x"));
        assert!(!only(&["a"]).contains("x"));
    }

    #[test]
    fn postponing_stops_at_max_delay() {
        let t0 = Instant::now();
        let mut d = Debouncer::new(500 * MS, 1000 * MS);
        d.note(t0, only(&["a"]));
        let now = t0 + 500 * MS;
        assert!(!d.overdue(now));
        d.postpone(now);
        assert_eq!(d.deadline(), Some(t0 + 1000 * MS));
        assert!(d.overdue(t0 + 1000 * MS));
        assert_eq!(d.take_due(t0 + 1000 * MS), Some(only(&["a"])));
    }

    #[test]
    fn clear_drops_what_is_pending() {
        let t0 = Instant::now();
        let mut d = Debouncer::new(MS, MS);
        d.note(t0, only(&["a"]));
        d.clear();
        assert_eq!(d.take_due(t0 + 10 * MS), None);
    }
}

//! What systemd's `STATUS=` says about the watch: the errors of the
//! latest passes, on one line.
//!
//! Errors are messages naming their file, not always their generator, so
//! each is kept with the scope of the pass that reported it: a later pass
//! clears an error only when it covered every generator that may have
//! caused it (an event pass over one generator does not clear what a full
//! pass found wrong with another).

use super::Scope;

/// Most characters of a status line (systemd takes more; `systemctl
/// status` shows one line).
const MAX_CHARS: usize = 300;

/// The errors still standing.
#[derive(Debug, Default)]
pub(super) struct Errors {
    /// (the generators one of which reported it, the message).
    open: Vec<(Scope, String)>,
}

impl Errors {
    /// Records a pass over `scope` that reported `errors`.
    pub(super) fn update(&mut self, scope: &Scope, errors: &[String]) {
        let mut kept: Vec<(Scope, String)> = Vec::new();
        for (s, message) in self.open.drain(..) {
            if errors.contains(&message) {
                // Reported by one generator in both scopes.
                kept.push((intersect(&s, scope), message));
            } else if !covers(scope, &s) {
                kept.push((s, message));
            }
        }
        for e in errors {
            if !kept.iter().any(|(_, m)| m == e) {
                kept.push((scope.clone(), e.clone()));
            }
        }
        self.open = kept;
    }

    /// The status line: empty when no error stands (which clears systemd's).
    pub(super) fn status(&self) -> String {
        match self.open.as_slice() {
            [] => String::new(),
            [(_, only)] => one_line(&format!("1 error: {only}")),
            [(_, first), ..] => {
                one_line(&format!("{} errors, the first: {first}", self.open.len()))
            }
        }
    }
}

/// `text` on one line of at most [`MAX_CHARS`] characters, escaped as
/// logs are ([`crate::text::escape`]): `systemctl status` shows it.
pub(super) fn one_line(text: &str) -> String {
    let flat = crate::text::escape(text).into_owned();
    if flat.chars().count() <= MAX_CHARS {
        return flat;
    }
    let mut cut: String = flat.chars().take(MAX_CHARS - 3).collect();
    cut.push_str("...");
    cut
}

/// The generators in both scopes.
fn intersect(a: &Scope, b: &Scope) -> Scope {
    match (a, b) {
        (Scope::All, other) | (other, Scope::All) => other.clone(),
        (Scope::Only(x), Scope::Only(y)) => Scope::Only(x.intersection(y).cloned().collect()),
    }
}

/// Whether `outer` covers every generator of `inner`.
fn covers(outer: &Scope, inner: &Scope) -> bool {
    match (outer, inner) {
        (Scope::All, _) => true,
        (Scope::Only(_), Scope::All) => false,
        (Scope::Only(o), Scope::Only(i)) => i.is_subset(o),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn only(names: &[&str]) -> Scope {
        Scope::Only(names.iter().map(|n| n.to_string()).collect())
    }

    fn errs(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_pass_clears_only_the_errors_its_generators_may_have_caused() {
        let mut e = Errors::default();
        assert_eq!(e.status(), "");
        e.update(&Scope::All, &errs(&["a.yaml: bad", "b.yaml: bad"]));
        assert_eq!(e.status(), "2 errors, the first: a.yaml: bad");
        // An event pass over `gpu` that sees no error: either error may be
        // another generator's, so both stand.
        e.update(&only(&["gpu"]), &[]);
        assert_eq!(e.status(), "2 errors, the first: a.yaml: bad");
        // `vf` reports a.yaml again: a.yaml is `vf`'s, so a later clean
        // pass over `vf` clears it.
        e.update(&only(&["vf"]), &errs(&["a.yaml: bad"]));
        e.update(&only(&["vf", "gpu"]), &[]);
        assert_eq!(e.status(), "1 error: b.yaml: bad");
        e.update(&only(&["gpu"]), &errs(&["c.yaml: bad"]));
        assert_eq!(e.status(), "2 errors, the first: b.yaml: bad");
        e.update(&Scope::All, &[]);
        assert_eq!(e.status(), "");
    }

    #[test]
    fn the_line_is_one_line_and_bounded() {
        assert_eq!(
            one_line("a\nb\tc\x1b[2J\u{202e}"),
            "a\\nb\\tc\\x1b[2J\\u{202e}"
        );
        let long = "é".repeat(1000);
        let line = one_line(&long);
        assert_eq!(line.chars().count(), MAX_CHARS);
        assert!(line.ends_with("..."));
    }
}

//! The generator definition's side of generic scanning: the `match`
//! section ([`Match`], owned by discovery), the [`Join`]s (shared nodes,
//! like ROCm's `/dev/kfd`, added to every device a generator selects), and
//! the [`Scan`] a run's definitions ask of the generic backend ([`scan`]).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

pub use crate::discover::generic::scan::{Match, Parent};
use crate::discover::generic::scan::{Scan, Source, Usage};

use super::{Generator, NameStrategy};

/// A shared node joined to every device a generator selects.
///
/// ```yaml
/// join:
///   - match: {subsystem: kfd, name: [kfd]}
///     role: kfd
///     drivers: [amdgpu]
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Join {
    /// The devices whose nodes are joined (found by the generic backend).
    #[serde(rename = "match")]
    pub source: Match,
    /// The role the joined nodes get (`kfd`), one of the node roles; a
    /// shared role never makes a device selected on its own.
    pub role: String,
    /// Only join to devices bound to one of these drivers (empty: all).
    #[serde(default)]
    pub drivers: Vec<String>,
}

/// What the generic backend must scan for `generators`: their `match`es
/// and `join`s. Definitions are checked when parsed, so a match that does
/// not compile here is skipped with a log line.
pub fn scan<'a>(generators: impl IntoIterator<Item = &'a Generator>) -> Scan {
    let mut out = Vec::new();
    for g in generators {
        let mut named_attrs = BTreeSet::new();
        let mut named_links = BTreeSet::new();
        for n in &g.names {
            match n {
                NameStrategy::Attr(a) => {
                    named_attrs.insert(a.clone());
                }
                NameStrategy::Link(d) => {
                    named_links.insert(d.clone());
                }
                _ => {}
            }
        }
        let mut add = |m: &Match, usage: Usage, names: bool| match m.compile() {
            Ok(matcher) => {
                let mut expose: BTreeSet<String> = m.expose.iter().cloned().collect();
                expose.extend(m.attrs.keys().cloned());
                let mut link_dirs: BTreeSet<String> = m.links.iter().cloned().collect();
                if names {
                    expose.extend(named_attrs.iter().cloned());
                    link_dirs.extend(named_links.iter().cloned());
                }
                out.push(Source {
                    generator: g.name.clone(),
                    usage,
                    matcher,
                    expose,
                    link_dirs,
                    usb: names && g.names.contains(&NameStrategy::Usb),
                });
            }
            Err((field, message)) => {
                tracing::warn!("generator {}: {field}: {message}; not scanning it", g.name);
            }
        };
        if let Some(m) = &g.source {
            add(m, Usage::Match, true);
        }
        for (i, j) in g.join.iter().enumerate() {
            add(&j.source, Usage::Join(i), false);
        }
    }
    out.into_iter().collect()
}

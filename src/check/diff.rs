//! Why a file on disk differs from what `generate` would write now, in
//! words a person can act on: a device gone or new, a device node whose
//! major:minor changed or that no longer exists, or else the first
//! difference in the content.
//!
//! Pure functions over parsed values; whether a node exists on the host
//! is asked through a closure so that this needs no root.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;

use crate::cdi::codec::natural_cmp;
use crate::cdi::{Device, DeviceNode, Spec};

/// Longest value shown in a reason; longer ones are cut with `…`.
const SHOWN_MAX: usize = 80;

/// One reason a spec is stale: the device it is about (`vendor/class=name`),
/// when it is about one, and what changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reason {
    /// The qualified device name, for reasons about one device.
    pub device: Option<String>,
    /// What changed.
    pub text: String,
}

/// Every reason `old` (on disk) differs from `new` (what generate would
/// write), devices in natural order of their names. `gone(path)` tells
/// whether a host device node no longer exists. Empty when the two are
/// equal as values (the bytes may still differ: see [`text_difference`]).
pub fn spec_reasons(old: &Spec, new: &Spec, gone: &dyn Fn(&str) -> bool) -> Vec<Reason> {
    let mut out = Vec::new();
    if old.kind != new.kind {
        out.push(Reason {
            device: None,
            text: format!("kind is {:?} on disk but {:?} now", old.kind, new.kind),
        });
    }
    let olds: BTreeMap<&str, &Device> = old.devices.iter().map(|d| (d.name.as_str(), d)).collect();
    let news: BTreeMap<&str, &Device> = new.devices.iter().map(|d| (d.name.as_str(), d)).collect();
    let mut names: Vec<&str> = olds.keys().chain(news.keys()).copied().collect();
    names.sort_by(|a, b| natural_cmp(a, b));
    names.dedup();
    for name in names {
        let device = Some(format!("{}={name}", new.kind));
        let texts = match (olds.get(name), news.get(name)) {
            (Some(o), None) => vec![gone_text(o, gone)],
            (None, Some(_)) => vec!["new device (not in the file on disk)".to_string()],
            (Some(o), Some(n)) => device_texts(o, n, gone),
            (None, None) => Vec::new(),
        };
        out.extend(texts.into_iter().map(|text| Reason {
            device: device.clone(),
            text,
        }));
    }
    // What is outside the devices: cdiVersion, spec-wide edits, annotations.
    let strip = |s: &Spec| Spec {
        kind: new.kind.clone(),
        devices: Vec::new(),
        ..s.clone()
    };
    if let Some(d) = first_difference(&to_value(&strip(old)), &to_value(&strip(new))) {
        out.push(Reason {
            device: None,
            text: format!("content differs: {d}"),
        });
    }
    out
}

/// Why a device on disk is no longer wanted.
fn gone_text(old: &Device, gone: &dyn Fn(&str) -> bool) -> String {
    let missing: Vec<&str> = old
        .container_edits
        .device_nodes
        .iter()
        .map(host_path)
        .filter(|p| gone(p))
        .collect();
    match missing.as_slice() {
        [] => "device gone (no longer discovered)".to_string(),
        [one] => format!("device gone: {one} no longer exists on the host"),
        many => format!(
            "device gone: {} no longer exist on the host",
            many.join(", ")
        ),
    }
}

/// Why one device differs: its nodes, then anything else.
fn device_texts(old: &Device, new: &Device, gone: &dyn Fn(&str) -> bool) -> Vec<String> {
    let mut out = Vec::new();
    let new_nodes: BTreeMap<&str, &DeviceNode> = new
        .container_edits
        .device_nodes
        .iter()
        .map(|n| (host_path(n), n))
        .collect();
    let old_paths: BTreeSet<&str> = old
        .container_edits
        .device_nodes
        .iter()
        .map(host_path)
        .collect();
    for o in &old.container_edits.device_nodes {
        let p = host_path(o);
        match new_nodes.get(p) {
            Some(n) if (o.major, o.minor) != (n.major, n.minor) => out.push(format!(
                "{p} is {}:{} on disk but {}:{} now",
                o.major, o.minor, n.major, n.minor
            )),
            Some(_) => {}
            None if gone(p) => out.push(format!("{p} no longer exists on the host")),
            None => out.push(format!("{p} is no longer one of its nodes")),
        }
    }
    for n in &new.container_edits.device_nodes {
        if !old_paths.contains(host_path(n)) {
            out.push(format!("{} is a new node", host_path(n)));
        }
    }
    // The rest, with the node changes above taken as read: only the nodes
    // on both sides, with the new numbers.
    let mut o = old.clone();
    o.container_edits
        .device_nodes
        .retain(|x| new_nodes.contains_key(host_path(x)));
    for x in &mut o.container_edits.device_nodes {
        if let Some(n) = new_nodes.get(host_path(x)) {
            (x.major, x.minor) = (n.major, n.minor);
        }
    }
    let mut n = new.clone();
    n.container_edits
        .device_nodes
        .retain(|x| old_paths.contains(host_path(x)));
    if let Some(d) = first_difference(&to_value(&o), &to_value(&n)) {
        out.push(format!("content differs: {d}"));
    }
    out
}

/// The node's path on the host.
fn host_path(n: &DeviceNode) -> &str {
    if n.host_path.is_empty() {
        &n.path
    } else {
        &n.host_path
    }
}

fn to_value<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// The first place where two JSON values differ, as
/// `a.b[2].c is X on disk but Y now` (keys in sorted order), or `None`
/// when they are equal.
pub fn first_difference(old: &Value, new: &Value) -> Option<String> {
    walk(old, new, "")
}

fn walk(old: &Value, new: &Value, at: &str) -> Option<String> {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            keys.into_iter().find_map(|k| {
                let here = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => walk(x, y, &here),
                    (x, y) => Some(differ(&here, x, y)),
                }
            })
        }
        (Value::Array(a), Value::Array(b)) => (0..a.len().max(b.len())).find_map(|i| {
            let here = format!("{at}[{i}]");
            match (a.get(i), b.get(i)) {
                (Some(x), Some(y)) => walk(x, y, &here),
                (x, y) => Some(differ(&here, x, y)),
            }
        }),
        (a, b) if a == b => None,
        (a, b) => Some(differ(at, Some(a), Some(b))),
    }
}

fn differ(at: &str, old: Option<&Value>, new: Option<&Value>) -> String {
    let at = if at.is_empty() { "the value" } else { at };
    format!("{at} is {} on disk but {} now", shown(old), shown(new))
}

/// A value as compact JSON, cut to [`SHOWN_MAX`] characters.
fn shown(v: Option<&Value>) -> String {
    match v {
        None => "absent".to_string(),
        Some(v) => cut(&v.to_string()),
    }
}

fn cut(s: &str) -> String {
    if s.chars().count() <= SHOWN_MAX {
        return s.to_string();
    }
    let mut out: String = s.chars().take(SHOWN_MAX).collect();
    out.push('…');
    out
}

/// The first line where two texts differ, as `line N is "..." on disk but
/// "..." now`, or `None` when they are equal.
pub fn text_difference(old: &[u8], new: &[u8]) -> Option<String> {
    if old == new {
        return None;
    }
    let old = String::from_utf8_lossy(old);
    let new = String::from_utf8_lossy(new);
    let (mut a, mut b) = (old.split_inclusive('\n'), new.split_inclusive('\n'));
    let mut line = 1;
    loop {
        match (a.next(), b.next()) {
            (Some(x), Some(y)) if x == y => line += 1,
            (None, None) => {
                return Some("the bytes differ".to_string());
            }
            (x, y) => {
                let show = |l: Option<&str>| {
                    l.map_or_else(|| "absent".to_string(), |l| format!("{:?}", cut(l)))
                };
                return Some(format!(
                    "line {line} is {} on disk but {} now",
                    show(x),
                    show(y)
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests;

//! GetPreferredAllocation: which of the available devices to give a
//! container. Pure: the caller passes each device's [`Placement`].
//!
//! The devices form a tree: NUMA node, then the components of the sysfs
//! path below `/sys/devices` (PCIe root, bridges and switches, the device),
//! then the MIG parent GPU, then the ID. At each level the candidates are
//! split by their key there, and [`preferred`] takes the branches like
//! this, until it has enough:
//!
//! 1. Branches holding `must_include` devices come first (they keep the
//!    container where it already is); among those, and then among the
//!    rest, one that holds everything still needed is entered (most
//!    `must_include` devices first, then *best fit*: the fewest candidates,
//!    which keeps bigger branches whole for later requests), and the same
//!    rule applies inside it.
//! 2. When no branch holds what is still needed, the one with the most
//!    candidates is taken whole, and the rule starts again on the rest.
//! 3. Devices without a key at a level (NUMA node unknown, sysfs path
//!    ended, no MIG parent) come after all those with one; IDs without a
//!    placement come after all placed ones, in ID order.
//!
//! So a request that one NUMA node can hold (with all of `must_include`
//! on that node) stays on that node, one PCIe root holds it when one can,
//! and within that the devices behind one switch or one MIG parent. Ties
//! are broken by the keys' (then the IDs') plain string order, so the same
//! input gives the same answer, whatever the order of `available`.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

/// Where a device sits, for packing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    /// NUMA node (None when the kernel reports -1 / unknown).
    pub numa: Option<u32>,
    /// The device's sysfs path components below /sys/devices, e.g.
    /// `["pci0000:3a", "0000:3a:00.0", "0000:3b:00.2"]`; the first is the
    /// PCIe root (host bridge); shared longer prefixes mean a shared
    /// switch/bridge.
    pub pci_path: Vec<String>,
    /// For a MIG device: its parent GPU's identity (MIG devices of one GPU
    /// are kept together).
    pub parent: Option<String>,
}

/// How many sysfs path components are looked at (real ones have about a
/// dozen at most); bounds the work and the recursion on hostile input.
const MAX_PCI_DEPTH: usize = 32;

/// The preferred IDs: `size` of `available` including every ID of
/// `must_include`, packed onto one NUMA node, PCIe root, switch and MIG
/// parent as far as possible (see the [module docs](self)).
///
/// The answer has `min(size, |available ∪ must_include|)` distinct IDs
/// (duplicates in either list count once): the `must_include` IDs first, in
/// their order, then the chosen ones in ID order. `must_include` IDs are
/// the kubelet's (it guarantees them to be available) and are always
/// included, even one missing from `available`. When `size` is smaller than
/// the number of `must_include` IDs (the kubelet never asks that), the
/// answer is the first `size` of them. IDs without a placement are allowed
/// but taken last.
pub fn preferred(
    placements: &BTreeMap<String, Placement>,
    available: &[String],
    must_include: &[String],
    size: usize,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    for id in must_include {
        if out.len() >= size {
            return out;
        }
        if seen.insert(id) {
            out.push(id.clone());
        }
    }
    let need = size.saturating_sub(out.len());
    if need == 0 {
        return out;
    }
    let candidates: BTreeSet<&str> = available
        .iter()
        .map(String::as_str)
        .filter(|id| !seen.contains(id))
        .collect();
    if candidates.len() <= need {
        out.extend(candidates.into_iter().map(str::to_owned));
        return out;
    }
    let mut placed = Vec::new();
    let mut unplaced = Vec::new();
    for id in candidates {
        match placements.get(id) {
            Some(p) => placed.push(Dev { id, p }),
            None => unplaced.push(id),
        }
    }
    let musts: Vec<&Placement> = out.iter().filter_map(|id| placements.get(id)).collect();
    let mut chosen: Vec<&str> = Vec::new();
    let from_placed = need.min(placed.len());
    pick(placed, &musts, from_placed, Level::Numa, &mut chosen);
    let rest = need.saturating_sub(chosen.len());
    chosen.extend(unplaced.into_iter().take(rest));
    chosen.sort_unstable();
    out.extend(chosen.into_iter().map(str::to_owned));
    out
}

/// A candidate with its placement.
#[derive(Clone, Copy)]
struct Dev<'a> {
    id: &'a str,
    p: &'a Placement,
}

/// A level of the tree.
#[derive(Clone, Copy)]
enum Level {
    Numa,
    /// The sysfs path component at this index.
    Pci(usize),
    Parent,
    /// The leaves: IDs in order.
    Id,
}

/// A branch's key at a level.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Key<'a> {
    Num(u32),
    Str(&'a str),
}

impl Level {
    /// `p`'s key at this level; None: unknown or beyond the path's end.
    fn key(self, p: &Placement) -> Option<Key<'_>> {
        match self {
            Level::Numa => p.numa.map(Key::Num),
            Level::Pci(i) => p.pci_path.get(i).map(|c| Key::Str(c)),
            Level::Parent => p.parent.as_deref().map(Key::Str),
            Level::Id => None,
        }
    }

    /// The level below, inside the branch with the key `key`: a sysfs path
    /// that has ended here has nothing deeper.
    fn below(self, key: Option<Key<'_>>) -> Level {
        match self {
            Level::Numa => Level::Pci(0),
            Level::Pci(i) if key.is_some() && i + 1 < MAX_PCI_DEPTH => Level::Pci(i + 1),
            Level::Pci(_) => Level::Parent,
            Level::Parent | Level::Id => Level::Id,
        }
    }
}

/// A branch: its candidates and how many `must_include` devices share it.
struct Branch<'a> {
    devs: Vec<Dev<'a>>,
    musts: usize,
}

/// Appends `k` IDs of `group` to `out` (`k` ≤ its length), the
/// `must_include` devices of this subtree being `musts`.
fn pick<'a>(
    group: Vec<Dev<'a>>,
    musts: &[&'a Placement],
    k: usize,
    level: Level,
    out: &mut Vec<&'a str>,
) {
    if k == 0 {
        return;
    }
    if group.len() <= k || matches!(level, Level::Id) {
        let mut ids: Vec<&str> = group.iter().map(|d| d.id).collect();
        ids.sort_unstable();
        out.extend(ids.into_iter().take(k));
        return;
    }
    // Branches with a key first, then the one without.
    let mut keyed: BTreeMap<Key<'a>, Branch<'a>> = BTreeMap::new();
    let mut unkeyed = Branch {
        devs: Vec::new(),
        musts: 0,
    };
    for d in group {
        match level.key(d.p) {
            Some(key) => {
                keyed
                    .entry(key)
                    .or_insert_with(|| Branch {
                        devs: Vec::new(),
                        musts: 0,
                    })
                    .devs
                    .push(d);
            }
            None => unkeyed.devs.push(d),
        }
    }
    for m in musts {
        match level.key(m) {
            Some(key) => {
                if let Some(b) = keyed.get_mut(&key) {
                    b.musts += 1;
                }
            }
            None => unkeyed.musts += 1,
        }
    }
    let mut k = k;
    let keyed: BTreeMap<Option<Key<'a>>, Branch<'a>> =
        keyed.into_iter().map(|(key, b)| (Some(key), b)).collect();
    let unkeyed = BTreeMap::from([(None, unkeyed)]);
    for mut class in [keyed, unkeyed] {
        while k > 0 {
            let Some((key, enter)) = next_branch(&class, k) else {
                break;
            };
            let Some(branch) = class.remove(&key) else {
                break;
            };
            let taken = branch.devs.len().min(k);
            if enter {
                let inner: Vec<&Placement> = musts
                    .iter()
                    .copied()
                    .filter(|m| level.key(m) == key)
                    .collect();
                pick(branch.devs, &inner, taken, level.below(key), out);
            } else {
                out.extend(branch.devs.iter().map(|d| d.id));
            }
            k -= taken;
        }
    }
}

/// Which branch of `class` to take next for `k` more devices, and whether
/// to enter it (it holds all `k`) or take it whole (none does).
fn next_branch<'a>(
    class: &BTreeMap<Option<Key<'a>>, Branch<'a>>,
    k: usize,
) -> Option<(Option<Key<'a>>, bool)> {
    let any_musts = class.values().any(|b| b.musts > 0 && !b.devs.is_empty());
    let pool = || {
        class
            .iter()
            .filter(move |(_, b)| !b.devs.is_empty() && (!any_musts || b.musts > 0))
    };
    let fit = pool()
        .filter(|(_, b)| b.devs.len() >= k)
        .min_by_key(|(key, b)| (Reverse(b.musts), b.devs.len(), **key));
    if let Some((key, _)) = fit {
        return Some((*key, true));
    }
    pool()
        .min_by_key(|(key, b)| (Reverse(b.musts), Reverse(b.devs.len()), **key))
        .map(|(key, _)| (*key, false))
}

#[cfg(test)]
mod tests;

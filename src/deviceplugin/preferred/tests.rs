//! GetPreferredAllocation's choice on concrete machines, and its
//! invariants on random ones.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use super::*;

use proptest::prelude::*;

// ---------------------------------------------------------------- helpers

fn place(numa: Option<u32>, path: &[&str], parent: Option<&str>) -> Placement {
    Placement {
        numa,
        pci_path: path.iter().map(|c| (*c).to_owned()).collect(),
        parent: parent.map(str::to_owned),
    }
}

fn ids(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn keys(m: &BTreeMap<String, Placement>) -> Vec<String> {
    m.keys().cloned().collect()
}

/// Two NUMA nodes with four GPUs each. On each node two GPUs have a PCIe
/// root each, and two share a third root behind one switch; the IDs are
/// such that ID order alone would pick the lone ones first.
///
/// node 0: gpu0 (root 00), gpu1 (root 20), gpu2 + gpu3 (root 40, switch)
/// node 1: gpu4 (root 80), gpu5 (root a0), gpu6 + gpu7 (root c0, switch)
fn two_nodes() -> BTreeMap<String, Placement> {
    let mut m = BTreeMap::new();
    for (node, base) in [(0u32, 0u32), (1, 0x80)] {
        let n = node * 4;
        let root = |off: u32| format!("pci0000:{:02x}", base + off);
        let port = |off: u32| format!("0000:{:02x}:01.0", base + off);
        let dev = |off: u32| format!("0000:{:02x}:00.0", base + off);
        m.insert(
            format!("gpu{n}"),
            Placement {
                numa: Some(node),
                pci_path: vec![root(0), port(0), dev(1)],
                parent: None,
            },
        );
        m.insert(
            format!("gpu{}", n + 1),
            Placement {
                numa: Some(node),
                pci_path: vec![root(0x20), port(0x20), dev(0x21)],
                parent: None,
            },
        );
        for (i, down) in [(2, "00.0"), (3, "01.0")] {
            m.insert(
                format!("gpu{}", n + i),
                Placement {
                    numa: Some(node),
                    pci_path: vec![
                        root(0x40),
                        port(0x40),
                        dev(0x41),
                        format!("0000:{:02x}:{down}", base + 0x42),
                        dev(0x43 + i - 2),
                    ],
                    parent: None,
                },
            );
        }
    }
    m
}

fn on_nodes(m: &BTreeMap<String, Placement>, chosen: &[String]) -> BTreeSet<Option<u32>> {
    chosen
        .iter()
        .map(|id| m.get(id).and_then(|p| p.numa))
        .collect()
}

// ---------------------------------------------------------- NUMA nodes

#[test]
fn two_of_eight_stay_on_one_node_behind_one_switch() {
    let m = two_nodes();
    let got = preferred(&m, &keys(&m), &[], 2);
    // Both nodes have four free: the tie goes to node 0; there root 40
    // holds two.
    assert_eq!(got, ids(&["gpu2", "gpu3"]));
}

#[test]
fn must_include_on_node_1_draws_the_rest_from_node_1() {
    let m = two_nodes();
    let got = preferred(&m, &keys(&m), &ids(&["gpu5"]), 3);
    assert_eq!(got, ids(&["gpu5", "gpu6", "gpu7"]));
    let got = preferred(&m, &keys(&m), &ids(&["gpu5"]), 4);
    assert_eq!(got, ids(&["gpu5", "gpu4", "gpu6", "gpu7"]));
    // Near the must_include device: one on the same switch.
    let got = preferred(&m, &keys(&m), &ids(&["gpu7"]), 2);
    assert_eq!(got, ids(&["gpu7", "gpu6"]));
}

#[test]
fn more_than_a_node_spills_over_deterministically() {
    let m = two_nodes();
    // Node 0 whole (the tie goes to the lower node), then the best fit on
    // node 1: the switch pair.
    let got = preferred(&m, &keys(&m), &[], 6);
    assert_eq!(got, ids(&["gpu0", "gpu1", "gpu2", "gpu3", "gpu6", "gpu7"]));
    let mut reversed = keys(&m);
    reversed.reverse();
    assert_eq!(preferred(&m, &reversed, &[], 6), got);
    // With a must_include device on node 1, node 1 is filled first.
    let got = preferred(&m, &keys(&m), &ids(&["gpu4"]), 6);
    assert_eq!(got, ids(&["gpu4", "gpu2", "gpu3", "gpu5", "gpu6", "gpu7"]));
}

#[test]
fn best_fit_node_keeps_the_bigger_node_whole() {
    let m = two_nodes();
    // Node 1 has two free (gpu4, gpu5), node 0 four: two come from node 1.
    let avail = ids(&["gpu0", "gpu1", "gpu2", "gpu3", "gpu4", "gpu5"]);
    assert_eq!(preferred(&m, &avail, &[], 2), ids(&["gpu4", "gpu5"]));
    // Three fit node 0 only.
    let got = preferred(&m, &avail, &[], 3);
    assert_eq!(on_nodes(&m, &got), BTreeSet::from([Some(0)]));
    assert_eq!(got, ids(&["gpu0", "gpu2", "gpu3"]));
}

#[test]
fn must_include_on_two_nodes_still_packs_the_rest() {
    let m = two_nodes();
    let got = preferred(&m, &keys(&m), &ids(&["gpu0", "gpu4"]), 4);
    assert_eq!(got.len(), 4);
    // Node 0 and node 1 both have must_include devices and hold two more:
    // the tie goes to node 0, and its switch pair.
    assert_eq!(got, ids(&["gpu0", "gpu4", "gpu2", "gpu3"]));
}

#[test]
fn the_must_include_node_is_used_up_before_another() {
    let m = two_nodes();
    // Node 0 has gpu0 (given) and gpu1 free; node 1 would hold both
    // wanted, but the container is on node 0 anyway: gpu1 first, then the
    // best fit for one on node 1 (a lone root).
    let avail = ids(&["gpu0", "gpu1", "gpu4", "gpu5", "gpu6", "gpu7"]);
    assert_eq!(
        preferred(&m, &avail, &ids(&["gpu0"]), 3),
        ids(&["gpu0", "gpu1", "gpu4"])
    );
}

// ------------------------------------------------------ PCIe roots, switches

#[test]
fn one_root_and_one_switch_are_preferred_within_a_node() {
    let mut m = BTreeMap::new();
    // One node: a, b alone on roots 1 and 2; on root 3, c behind switch
    // s1 and d, e behind switch s2.
    m.insert("a".into(), place(Some(0), &["pci1", "p1", "a"], None));
    m.insert("b".into(), place(Some(0), &["pci2", "p2", "b"], None));
    m.insert("c".into(), place(Some(0), &["pci3", "p3", "s1", "c"], None));
    m.insert("d".into(), place(Some(0), &["pci3", "p3", "s2", "d"], None));
    m.insert("e".into(), place(Some(0), &["pci3", "p3", "s2", "e"], None));
    let all = keys(&m);
    assert_eq!(preferred(&m, &all, &[], 2), ids(&["d", "e"]));
    assert_eq!(preferred(&m, &all, &[], 3), ids(&["c", "d", "e"]));
    // Four: root 3 whole, then the first of the lone roots.
    assert_eq!(preferred(&m, &all, &[], 4), ids(&["a", "c", "d", "e"]));
    // With c already given, its root first.
    assert_eq!(preferred(&m, &all, &ids(&["c"]), 2), ids(&["c", "d"]));
    // With a given, the rest is packed: root 3's switch pair.
    assert_eq!(preferred(&m, &all, &ids(&["a"]), 3), ids(&["a", "d", "e"]));
}

#[test]
fn unknown_numa_still_packs_by_pcie() {
    // Kernels report -1 on many single-socket machines.
    let mut m = BTreeMap::new();
    m.insert("a".into(), place(None, &["pci1", "a"], None));
    m.insert("b".into(), place(None, &["pci2", "x", "b"], None));
    m.insert("c".into(), place(None, &["pci2", "x", "c"], None));
    assert_eq!(preferred(&m, &keys(&m), &[], 2), ids(&["b", "c"]));
}

#[test]
fn known_numa_comes_before_unknown_numa_and_known_paths_before_none() {
    let mut m = BTreeMap::new();
    m.insert("a".into(), place(None, &["pci1", "a"], None));
    m.insert("b".into(), place(None, &["pci1", "b"], None));
    m.insert("c".into(), place(Some(3), &["pci2", "c"], None));
    m.insert("d".into(), place(Some(3), &[], None));
    m.insert("e".into(), place(Some(3), &["pci3", "e"], None));
    let all = keys(&m);
    // The unknown-NUMA pair is the smaller group but ranks last.
    assert_eq!(preferred(&m, &all, &[], 2), ids(&["c", "e"]));
    // d has no path: after c and e, before the unknown-NUMA devices.
    assert_eq!(preferred(&m, &all, &[], 3), ids(&["c", "d", "e"]));
    assert_eq!(preferred(&m, &all, &[], 4), ids(&["a", "c", "d", "e"]));
}

// ------------------------------------------------------------------- MIG

/// MIG devices on one node: parent g0 with three free, g1 with two, g2
/// with seven; the MIG devices carry no sysfs path of their own.
fn mig() -> BTreeMap<String, Placement> {
    let mut m = BTreeMap::new();
    for (parent, n) in [("g0", 3), ("g1", 2), ("g2", 7)] {
        for i in 0..n {
            m.insert(
                format!("mig-{parent}-{i}"),
                place(Some(0), &[], Some(parent)),
            );
        }
    }
    m
}

#[test]
fn mig_devices_of_one_parent_stay_together() {
    let m = mig();
    let all = keys(&m);
    assert_eq!(preferred(&m, &all, &[], 2), ids(&["mig-g1-0", "mig-g1-1"]));
    assert_eq!(
        preferred(&m, &all, &[], 3),
        ids(&["mig-g0-0", "mig-g0-1", "mig-g0-2"])
    );
    let got = preferred(&m, &all, &[], 4);
    assert!(got.iter().all(|id| id.starts_with("mig-g2-")), "{got:?}");
    // Eight: g2 whole, then the best fit for one.
    let got = preferred(&m, &all, &[], 8);
    assert_eq!(got.iter().filter(|id| id.starts_with("mig-g2-")).count(), 7);
    assert_eq!(got.iter().filter(|id| id.starts_with("mig-g1-")).count(), 1);
    // A given MIG device draws its siblings.
    assert_eq!(
        preferred(&m, &all, &ids(&["mig-g2-5"]), 3),
        ids(&["mig-g2-5", "mig-g2-0", "mig-g2-1"])
    );
}

#[test]
fn mig_devices_with_their_parents_pci_path_stay_together() {
    let mut m = BTreeMap::new();
    for (parent, root, n) in [("g0", "pci1", 2), ("g1", "pci1", 3), ("g2", "pci2", 1)] {
        for i in 0..n {
            m.insert(
                format!("{parent}-mig{i}"),
                place(Some(0), &[root, parent], Some(parent)),
            );
        }
    }
    let all = keys(&m);
    assert_eq!(preferred(&m, &all, &[], 2), ids(&["g0-mig0", "g0-mig1"]));
    assert_eq!(
        preferred(&m, &all, &[], 3),
        ids(&["g1-mig0", "g1-mig1", "g1-mig2"])
    );
    // Four: root 1 holds them; g1 whole, then g0's first.
    assert_eq!(
        preferred(&m, &all, &[], 4),
        ids(&["g0-mig0", "g1-mig0", "g1-mig1", "g1-mig2"])
    );
}

// ----------------------------------------------------- odd requests

#[test]
fn unknown_ids_come_last() {
    let m = two_nodes();
    let mut avail = ids(&["aaa", "gpu0", "gpu1"]);
    assert_eq!(preferred(&m, &avail, &[], 2), ids(&["gpu0", "gpu1"]));
    assert_eq!(preferred(&m, &avail, &[], 3), ids(&["aaa", "gpu0", "gpu1"]));
    avail.push("zzz".into());
    assert_eq!(preferred(&m, &avail, &[], 3), ids(&["aaa", "gpu0", "gpu1"]));
    // An unknown must_include device is kept; the rest still packs.
    let got = preferred(&m, &keys(&m), &ids(&["mystery"]), 3);
    assert_eq!(got, ids(&["mystery", "gpu2", "gpu3"]));
    // No placements at all: ID order.
    let none = BTreeMap::new();
    assert_eq!(
        preferred(&none, &ids(&["c", "a", "b"]), &[], 2),
        ids(&["a", "b"])
    );
}

#[test]
fn size_beyond_the_available_gives_all() {
    let m = two_nodes();
    let avail = ids(&["gpu6", "gpu1", "gpu4"]);
    assert_eq!(
        preferred(&m, &avail, &ids(&["gpu4"]), 10),
        ids(&["gpu4", "gpu1", "gpu6"])
    );
}

#[test]
fn degenerate_requests() {
    let m = two_nodes();
    let all = keys(&m);
    assert!(preferred(&m, &all, &[], 0).is_empty());
    assert!(preferred(&m, &all, &ids(&["gpu1"]), 0).is_empty());
    assert!(preferred(&m, &[], &[], 3).is_empty());
    // Fewer than must_include: the first of them.
    assert_eq!(
        preferred(&m, &all, &ids(&["gpu5", "gpu1", "gpu0"]), 2),
        ids(&["gpu5", "gpu1"])
    );
    // Duplicates count once.
    assert_eq!(
        preferred(
            &m,
            &ids(&["gpu5", "gpu5", "gpu4", "gpu4"]),
            &ids(&["gpu5", "gpu5"]),
            3
        ),
        ids(&["gpu5", "gpu4"])
    );
    assert_eq!(
        preferred(&m, &all, &ids(&["gpu5", "gpu5", "gpu1"]), 2),
        ids(&["gpu5", "gpu1"])
    );
    // A must_include device the kubelet did not list as available.
    assert_eq!(
        preferred(&m, &ids(&["gpu6"]), &ids(&["gpu7"]), 2),
        ids(&["gpu7", "gpu6"])
    );
}

#[test]
fn hostile_sizes_stay_cheap() {
    // Thousands of devices spread over nodes, roots and parents.
    let mut m = BTreeMap::new();
    for i in 0..3000u32 {
        m.insert(
            format!("dev{i:05}"),
            place(
                Some(i % 3),
                &[&format!("r{}", i % 5), "bridge", &format!("d{i}")],
                Some(&format!("p{}", i % 7)),
            ),
        );
    }
    let all = keys(&m);
    let got = preferred(&m, &all, &all[..5], 1500);
    assert_eq!(got.len(), 1500);
    assert_eq!(got[..5], all[..5]);
    assert_eq!(preferred(&m, &all, &[], usize::MAX).len(), 3000);

    // Paths far deeper than any real one, shared but for the last
    // component: only the first components are looked at.
    let deep: Vec<String> = (0..5000).map(|i| format!("c{i}")).collect();
    let mut m = BTreeMap::new();
    for i in 0..100u32 {
        let mut pci_path = deep.clone();
        pci_path.push(format!("d{i}"));
        m.insert(
            format!("dev{i:03}"),
            Placement {
                numa: Some(0),
                pci_path,
                parent: Some(format!("p{}", i % 2)),
            },
        );
    }
    let got = preferred(&m, &keys(&m), &[], 10);
    // Beyond the depth looked at, the MIG parent groups them.
    assert_eq!(got.len(), 10);
    assert!(
        got.iter().all(|id| m[id].parent.as_deref() == Some("p0")),
        "{got:?}"
    );
}

// ----------------------------------------------------------- properties

/// A random machine: placements for some of `d0`..`dN` (drawn from few
/// values so that NUMA nodes, paths and parents are shared), and the
/// request's lists drawn from those IDs and some unknown ones.
fn machine() -> impl Strategy<Value = (BTreeMap<String, Placement>, Vec<String>, Vec<String>, usize)>
{
    let placement = (
        prop::option::weighted(0.85, 0u32..3),
        prop::collection::vec(
            prop::sample::select(vec!["r0", "r1", "s0", "s1", "x"]),
            0..5,
        ),
        prop::option::weighted(0.3, prop::sample::select(vec!["g0", "g1", "g2"])),
    )
        .prop_map(|(numa, path, parent)| Placement {
            numa,
            pci_path: path.into_iter().map(str::to_owned).collect(),
            parent: parent.map(str::to_owned),
        });
    prop::collection::vec(prop::option::weighted(0.9, placement), 0..24).prop_flat_map(|slots| {
        let n = slots.len();
        let placements: BTreeMap<String, Placement> = slots
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.clone().map(|p| (format!("d{i}"), p)))
            .collect();
        let id = (0..n + 3).prop_map(|i| format!("d{i}"));
        (
            Just(placements),
            prop::collection::vec(id.clone(), 0..30),
            prop::collection::vec(id, 0..5),
            0..n + 6,
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The answer is always valid: the right number of distinct IDs, all
    /// from available ∪ must_include, must_include first; it does not
    /// depend on the order of `available`; a request that one NUMA node
    /// can hold stays on it.
    #[test]
    fn answers_are_valid_and_packed((m, avail, must, size) in machine()) {
        let got = preferred(&m, &avail, &must, size);

        let pool: BTreeSet<&String> = avail.iter().chain(&must).collect();
        prop_assert_eq!(got.len(), size.min(pool.len()));
        let distinct: BTreeSet<&String> = got.iter().collect();
        prop_assert_eq!(distinct.len(), got.len());
        prop_assert!(got.iter().all(|id| pool.contains(id)));

        let mut must_distinct: Vec<&String> = Vec::new();
        for id in &must {
            if !must_distinct.contains(&id) {
                must_distinct.push(id);
            }
        }
        let head = size.min(must_distinct.len());
        let got_head: Vec<&String> = got.iter().take(head).collect();
        prop_assert_eq!(got_head, must_distinct[..head].to_vec());
        // The rest in ID order.
        prop_assert!(got[head..].windows(2).all(|w| w[0] < w[1]));

        // Deterministic, and independent of the order of available.
        prop_assert_eq!(&preferred(&m, &avail, &must, size), &got);
        let mut shuffled = avail.clone();
        shuffled.reverse();
        shuffled.rotate_left(avail.len() / 3);
        prop_assert_eq!(&preferred(&m, &shuffled, &must, size), &got);

        // IDs without a placement only when the placed ones ran out.
        let placed_left = pool
            .iter()
            .filter(|id| m.contains_key(**id) && !must.contains(id))
            .count();
        let need = size.saturating_sub(must_distinct.len());
        if need <= placed_left {
            prop_assert!(got[head..].iter().all(|id| m.contains_key(id)));
        }

        // One NUMA node: if all must_include devices are on node n, and
        // n has enough free, everything is on n.
        let must_nodes: BTreeSet<Option<u32>> = must_distinct
            .iter()
            .map(|id| m.get(*id).and_then(|p| p.numa))
            .collect();
        let candidates: BTreeSet<&String> =
            avail.iter().filter(|id| !must.contains(id)).collect();
        for node in 0..3u32 {
            let free = candidates
                .iter()
                .filter(|id| m.get(**id).and_then(|p| p.numa) == Some(node))
                .count();
            let musts_there = must_nodes.is_empty()
                || must_nodes == BTreeSet::from([Some(node)]);
            if musts_there && size >= must_distinct.len() && free >= need {
                let nodes = on_nodes(&m, &got);
                prop_assert!(
                    nodes.len() <= 1 && nodes.iter().all(Option::is_some),
                    "node {} holds {} but got {:?} on {:?}", node, need, got, nodes
                );
                break;
            }
        }
    }

    /// Nothing panics on odd strings, paths past the depth looked at and
    /// any size; IDs from a small alphabet, so that they collide.
    #[test]
    fn arbitrary_input_never_panics(
        entries in prop::collection::vec(
            (
                "[aé\\x00]{0,2}",
                prop::option::of(prop_oneof![0u32..2, Just(u32::MAX)]),
                prop::collection::vec(
                    prop::sample::select(vec!["", "a", "\u{0}", "é\n", "pci0000:00"]),
                    0..40,
                ),
                prop::option::of(prop::sample::select(vec!["", "g", "\u{0}"])),
            ),
            0..20,
        ),
        avail in prop::collection::vec("[aé\\x00]{0,2}", 0..20),
        must in prop::collection::vec("[aé\\x00]{0,2}", 0..4),
        size in prop_oneof![0usize..8, any::<usize>()],
    ) {
        let m: BTreeMap<String, Placement> = entries
            .into_iter()
            .map(|(id, numa, path, parent)| {
                let pci_path = path.into_iter().map(str::to_owned).collect();
                (id, Placement { numa, pci_path, parent: parent.map(str::to_owned) })
            })
            .collect();
        let got = preferred(&m, &avail, &must, size);
        let pool: BTreeSet<&String> = avail.iter().chain(&must).collect();
        prop_assert_eq!(got.len(), size.min(pool.len()));
    }
}

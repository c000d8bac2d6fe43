//! Choosing devices: what INFO counts and what ADD hands out, from the
//! pool (in its order) minus the devices already allocated. Pure
//! functions; the caller holds the state lock.

use std::collections::{BTreeMap, BTreeSet};

use super::request::{Item, Want};

/// A device of the pool, as the plugin hands it out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolDevice {
    /// The backend that found it.
    pub backend: String,
    /// Its stable identity.
    pub id: String,
    /// Its NUMA node, when it has one.
    pub numa_node: Option<u32>,
    /// The host device nodes handed out for it.
    pub nodes: Vec<String>,
}

/// Allocated devices, by (backend, id).
pub type Taken = BTreeSet<(String, String)>;

fn is_free(d: &PoolDevice, taken: &Taken) -> bool {
    !taken.contains(&(d.backend.clone(), d.id.clone()))
}

/// Free devices in all, and per NUMA node of the pool (a node whose
/// devices are all taken is listed with 0).
pub fn available(pool: &[PoolDevice], taken: &Taken) -> (usize, BTreeMap<u32, usize>) {
    let mut per_node = BTreeMap::new();
    let mut total = 0;
    for d in pool {
        let free = usize::from(is_free(d, taken));
        total += free;
        if let Some(n) = d.numa_node {
            *per_node.entry(n).or_insert(0) += free;
        }
    }
    (total, per_node)
}

/// Picks devices for every item, all or nothing, each device at most
/// once: items for a NUMA node first (from that node only), then items
/// for any device, which take devices on the `prefer`red nodes first (in
/// the order listed), then the others; within that, pool order. Returns
/// the devices of each item, in item order.
///
/// # Errors
/// What is short, as `<resource-spec>: N requested, M available`.
pub fn allocate<'a>(
    pool: &'a [PoolDevice],
    taken: &Taken,
    items: &[Item],
    prefer: &[u32],
) -> Result<Vec<Vec<&'a PoolDevice>>, String> {
    let mut used: BTreeSet<usize> = BTreeSet::new();
    let mut picked: Vec<Vec<&PoolDevice>> = vec![Vec::new(); items.len()];
    let rank = |d: &PoolDevice| {
        d.numa_node
            .and_then(|n| prefer.iter().position(|p| *p == n))
            .unwrap_or(usize::MAX)
    };
    let mut order: Vec<usize> = (0..items.len()).collect();
    // Numa(_) items before Any, keeping the request's order otherwise.
    order.sort_by_key(|i| items.get(*i).map(|it| it.want == Want::Any));
    for i in order {
        let (Some(item), Some(out)) = (items.get(i), picked.get_mut(i)) else {
            continue;
        };
        let mut candidates: Vec<(usize, &PoolDevice)> = pool
            .iter()
            .enumerate()
            .filter(|(j, d)| !used.contains(j) && is_free(d, taken))
            .filter(|(_, d)| match item.want {
                Want::Any => true,
                Want::Numa(n) => d.numa_node == Some(n),
            })
            .collect();
        if item.want == Want::Any {
            candidates.sort_by_key(|(j, d)| (rank(d), *j));
        }
        let amount = usize::try_from(item.amount).unwrap_or(usize::MAX);
        if candidates.len() < amount {
            return Err(format!(
                "{}: {} requested, {} available",
                item.spec,
                item.amount,
                candidates.len()
            ));
        }
        for (j, d) in candidates.into_iter().take(amount) {
            used.insert(j);
            out.push(d);
        }
    }
    Ok(picked)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::plugin::request::parse_request;

    /// Devices d0..d5 on NUMA nodes 0, 0, 1, 1, none, 1.
    fn pool() -> Vec<PoolDevice> {
        [Some(0), Some(0), Some(1), Some(1), None, Some(1)]
            .into_iter()
            .enumerate()
            .map(|(i, n)| PoolDevice {
                backend: "drm".into(),
                id: format!("d{i}"),
                numa_node: n,
                nodes: vec![format!("/dev/d{i}")],
            })
            .collect()
    }

    fn taken(ids: &[&str]) -> Taken {
        ids.iter()
            .map(|i| ("drm".to_string(), i.to_string()))
            .collect()
    }

    fn ids(request: &str, taken_ids: &[&str], prefer: &[u32]) -> Result<Vec<Vec<String>>, String> {
        let pool = pool();
        let items = parse_request(Some(request), "gpu").unwrap();
        allocate(&pool, &taken(taken_ids), &items, prefer).map(|v| {
            v.iter()
                .map(|ds| ds.iter().map(|d| d.id.clone()).collect())
                .collect()
        })
    }

    #[test]
    fn counts_free_devices_per_node() {
        let (total, per_node) = available(&pool(), &taken(&["d0", "d1", "d2"]));
        assert_eq!(total, 3);
        assert_eq!(per_node.into_iter().collect::<Vec<_>>(), [(0, 0), (1, 2)]);
    }

    #[test]
    fn pool_order_without_preference() {
        assert_eq!(ids("gpu:2", &[], &[]).unwrap(), [["d0", "d1"]]);
        assert_eq!(ids("gpu:2", &["d0"], &[]).unwrap(), [["d1", "d2"]]);
    }

    #[test]
    fn preferred_nodes_first_then_the_others() {
        assert_eq!(ids("gpu:2", &[], &[1]).unwrap(), [["d2", "d3"]]);
        assert_eq!(
            ids("gpu:5", &[], &[1, 0]).unwrap(),
            [["d2", "d3", "d5", "d0", "d1"]]
        );
        // Not strict: when the node is full, others are used.
        assert_eq!(ids("gpu:2", &["d2", "d3"], &[1]).unwrap(), [["d5", "d0"]]);
    }

    #[test]
    fn numa_subtypes_take_their_node_first_and_all_are_distinct() {
        assert_eq!(
            ids("gpu:2,gpu-numa0:2", &[], &[]).unwrap(),
            [vec!["d2", "d3"], vec!["d0", "d1"]]
        );
        assert_eq!(
            ids("gpu:6", &[], &[]).unwrap(),
            [["d0", "d1", "d2", "d3", "d4", "d5"]]
        );
    }

    #[test]
    fn all_or_nothing() {
        assert_eq!(
            ids("gpu-numa0:3", &[], &[]).unwrap_err(),
            "gpu-numa0: 3 requested, 2 available"
        );
        assert_eq!(
            ids("gpu:4,gpu-numa1:2", &["d0"], &[]).unwrap_err(),
            "gpu: 4 requested, 3 available"
        );
        assert_eq!(
            ids("gpu-numa7:1", &[], &[]).unwrap_err(),
            "gpu-numa7: 1 requested, 0 available"
        );
    }
}

//! Choosing devices: what INFO counts and what ADD hands out, from the
//! pool (in its order) minus what the allocations hold. Pure functions;
//! the caller holds the state lock.
//!
//! Conflicts are by device node, not by device: different backends and
//! generators can describe the same node (DRM's `accel0` and the generic
//! `accel` definition's; an SR-IOV VF's `/dev/vhost-vdpa-0` and its vDPA
//! device's; a GPU's `/dev/nvidia0` and its MIG devices'). Each device
//! holds its nodes either exclusively (its own: a card, a render node, a
//! MIG device's compute-instance capability) or shared (`/dev/nvidiactl`,
//! `/dev/vfio/vfio`, `/dev/kfd`, a MIG device's parent GPU node). A device
//! is taken when it is allocated itself (same backend and id), when one of
//! its exclusive nodes is held in any way, or when one of its nodes is
//! held exclusively: a GPU and its MIG devices exclude each other, two MIG
//! devices of one GPU do not.

use std::collections::{BTreeMap, BTreeSet};

use super::request::{Item, Want};
use crate::model::Device;

/// Host-wide node roles the plugin never counts as held exclusively, on
/// top of those selection treats as shared
/// ([`crate::generator::select::SHARED_ROLES`]: kfd, rdma-cm, vhost-net,
/// tun, the NVIDIA control nodes): the VFIO container, `/dev/iommu`, the
/// MIG management capabilities.
const HOST_WIDE_ROLES: [&str; 4] = [
    "vfio-container",
    "iommufd",
    "nvidia-mig-config",
    "nvidia-mig-monitor",
];

/// Whether a node of `role` is shared among devices.
fn shared_role(role: &str) -> bool {
    crate::generator::select::SHARED_ROLES.contains(&role) || HOST_WIDE_ROLES.contains(&role)
}

/// A device of the pool, as the plugin hands it out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolDevice {
    /// The backend that found it.
    pub backend: String,
    /// Its stable identity.
    pub id: String,
    /// Its sysfs path (`/sys/devices/...`), as discovery reports it.
    pub sysfs_path: String,
    /// Its NUMA node, when it has one.
    pub numa_node: Option<u32>,
    /// The host device nodes handed out for it.
    pub nodes: Vec<String>,
    /// Every node of the device it holds exclusively (handed out or not).
    pub exclusive: Vec<String>,
    /// Every node of the device it shares with others.
    pub shared: Vec<String>,
}

impl PoolDevice {
    /// The pool device for `selected` (a device as the generator and the
    /// configuration narrowed it) of discovery's `full` device: it hands
    /// out `selected`'s nodes and holds all of `full`'s and `selected`'s
    /// (joined nodes included). Nodes in `joined` (nodes generators join
    /// to other devices, such as `/dev/kfd`) are shared.
    pub fn new(selected: &Device, full: Option<&Device>, joined: &BTreeSet<String>) -> Self {
        let mut nodes: Vec<String> = Vec::new();
        for n in &selected.nodes {
            if !nodes.contains(&n.path) {
                nodes.push(n.path.clone());
            }
        }
        let mig = selected.nvidia.as_ref().is_some_and(|n| n.mig.is_some());
        let all = full.map_or(selected.nodes.as_slice(), |f| f.nodes.as_slice());
        // A MIG device's capabilities are its GPU instance's (shared with
        // the other compute instances of that instance), then its compute
        // instance's, its own.
        let last_cap = all.iter().rposition(|n| n.role == "nvidia-cap");
        let mut exclusive: Vec<String> = Vec::new();
        let mut shared: Vec<String> = Vec::new();
        let more = selected
            .nodes
            .iter()
            .filter(|n| !all.iter().any(|a| a.path == n.path));
        for (i, n) in all.iter().enumerate().chain(more.map(|n| (usize::MAX, n))) {
            // A MIG device's GPU node and GPU-instance capability are its
            // parent's, shared with its siblings.
            let parents =
                mig && (n.role == "nvidia-gpu" || (n.role == "nvidia-cap" && Some(i) != last_cap));
            let own = !shared_role(&n.role) && !joined.contains(&n.path) && !parents;
            if own {
                shared.retain(|p| p != &n.path);
                if !exclusive.contains(&n.path) {
                    exclusive.push(n.path.clone());
                }
            } else if !exclusive.contains(&n.path) && !shared.contains(&n.path) {
                shared.push(n.path.clone());
            }
        }
        PoolDevice {
            backend: selected.backend.clone(),
            id: selected.id.clone(),
            sysfs_path: selected.sysfs_path.clone(),
            numa_node: selected.numa_node,
            nodes,
            exclusive,
            shared,
        }
    }
}

/// What the allocations hold: devices, and nodes exclusively or at all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Held {
    devices: BTreeSet<(String, String)>,
    exclusive: BTreeSet<String>,
    any: BTreeSet<String>,
}

impl Held {
    /// Records that device (`backend`, `id`) holds `exclusive` nodes
    /// exclusively and `shared` ones shared.
    pub fn hold<'a>(
        &mut self,
        backend: &str,
        id: &str,
        exclusive: impl IntoIterator<Item = &'a String>,
        shared: impl IntoIterator<Item = &'a String>,
    ) {
        self.devices.insert((backend.to_string(), id.to_string()));
        for p in exclusive {
            self.exclusive.insert(p.clone());
            self.any.insert(p.clone());
        }
        for p in shared {
            self.any.insert(p.clone());
        }
    }

    fn hold_device(&mut self, d: &PoolDevice) {
        self.hold(&d.backend, &d.id, &d.exclusive, &d.shared);
    }

    /// Whether `d` can be handed out: not allocated itself, none of its
    /// exclusive nodes held at all, none of its nodes held exclusively.
    pub fn is_free(&self, d: &PoolDevice) -> bool {
        !self.devices.contains(&(d.backend.clone(), d.id.clone()))
            && !d.exclusive.iter().any(|p| self.any.contains(p))
            && !d.shared.iter().any(|p| self.exclusive.contains(p))
    }
}

/// Takes up to `amount` devices of `candidates` (in their order) that are
/// free under `held` and one another, adding them to `held`.
fn take<'a>(
    candidates: impl IntoIterator<Item = (usize, &'a PoolDevice)>,
    held: &mut Held,
    amount: usize,
) -> Vec<(usize, &'a PoolDevice)> {
    let mut out = Vec::new();
    for (j, d) in candidates {
        if out.len() >= amount {
            break;
        }
        if held.is_free(d) {
            held.hold_device(d);
            out.push((j, d));
        }
    }
    out
}

/// How many devices an ADD could take at once, in all and per NUMA node
/// of the pool (a node whose devices are all taken is listed with 0):
/// free devices in pool order, each free of the ones counted before it
/// (of a GPU and its MIG devices, the first in the pool counts).
pub fn available(pool: &[PoolDevice], held: &Held) -> (usize, BTreeMap<u32, usize>) {
    let total = take(pool.iter().enumerate(), &mut held.clone(), usize::MAX).len();
    let nodes: BTreeSet<u32> = pool.iter().filter_map(|d| d.numa_node).collect();
    let per_node = nodes
        .into_iter()
        .map(|n| {
            let on_node = pool
                .iter()
                .enumerate()
                .filter(|(_, d)| d.numa_node == Some(n));
            (n, take(on_node, &mut held.clone(), usize::MAX).len())
        })
        .collect();
    (total, per_node)
}

/// Picks devices for every item, all or nothing, each free under `held`
/// and of the devices picked before it: items for a NUMA node first (from
/// that node only), then items for any device, which take devices on the
/// `prefer`red nodes first (in the order listed), then the others; within
/// that, pool order. Returns the devices of each item, in item order.
///
/// # Errors
/// What is short, as `<resource-spec>: N requested, M available`.
pub fn allocate<'a>(
    pool: &'a [PoolDevice],
    held: &Held,
    items: &[Item],
    prefer: &[u32],
) -> Result<Vec<Vec<&'a PoolDevice>>, String> {
    let mut held = held.clone();
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
            .filter(|(_, d)| match item.want {
                Want::Any => true,
                Want::Numa(n) => d.numa_node == Some(n),
            })
            .collect();
        if item.want == Want::Any {
            candidates.sort_by_key(|(j, d)| (rank(d), *j));
        }
        let amount = usize::try_from(item.amount).unwrap_or(usize::MAX);
        let mut trial = held.clone();
        let got = take(candidates, &mut trial, amount);
        if got.len() < amount {
            return Err(format!(
                "{}: {} requested, {} available",
                item.spec,
                item.amount,
                got.len()
            ));
        }
        held = trial;
        out.extend(got.into_iter().map(|(_, d)| d));
    }
    Ok(picked)
}
#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;
    use crate::model::{MigInfo, Node, NvidiaInfo};
    use crate::plugin::request::parse_request;

    /// Devices d0..d5 on NUMA nodes 0, 0, 1, 1, none, 1, each with its own
    /// node and the shared `/dev/ctl`.
    fn pool() -> Vec<PoolDevice> {
        [Some(0), Some(0), Some(1), Some(1), None, Some(1)]
            .into_iter()
            .enumerate()
            .map(|(i, n)| PoolDevice {
                backend: "drm".into(),
                id: format!("d{i}"),
                sysfs_path: format!("/sys/devices/d{i}"),
                numa_node: n,
                nodes: vec![format!("/dev/d{i}"), "/dev/ctl".into()],
                exclusive: vec![format!("/dev/d{i}")],
                shared: vec!["/dev/ctl".into()],
            })
            .collect()
    }

    fn taken(ids: &[&str]) -> Held {
        let mut held = Held::default();
        for d in pool().iter().filter(|d| ids.contains(&d.id.as_str())) {
            held.hold_device(d);
        }
        held
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

    fn node(role: &str, path: &str) -> Node {
        Node {
            role: role.into(),
            name: path.rsplit('/').next().unwrap().into(),
            path: path.into(),
            node_type: "c".into(),
            major: 1,
            minor: 1,
            host: None,
        }
    }

    /// A GPU (`/dev/nvidia0`, its card, the control node) and three MIG
    /// devices: gi1/ci0 and gi1/ci1 (one GPU instance, capability 12),
    /// and gi2/ci0.
    fn gpu_and_migs() -> Vec<Device> {
        let nv = |mig: Option<(u32, u32)>| NvidiaInfo {
            mig: mig.map(|(gi, ci)| MigInfo {
                parent: "0000:41:00.0".into(),
                gi,
                ci,
                ..MigInfo::default()
            }),
            ..NvidiaInfo::default()
        };
        let ctl = node("nvidia-control", "/dev/nvidiactl");
        let mut out = vec![Device {
            backend: "nvidia".into(),
            id: "0000:41:00.0".into(),
            nodes: vec![
                node("nvidia-gpu", "/dev/nvidia0"),
                node("primary", "/dev/dri/card0"),
                ctl.clone(),
                node("nvidia-mig-config", "/dev/nvidia-caps/nvidia-cap1"),
            ],
            nvidia: Some(nv(None)),
            ..Device::default()
        }];
        for (gi, ci, gi_cap, ci_cap) in [(1, 0, 12, 13), (1, 1, 12, 14), (2, 0, 21, 22)] {
            out.push(Device {
                backend: "nvidia".into(),
                id: format!("0000:41:00.0/gi{gi}/ci{ci}"),
                nodes: vec![
                    node("nvidia-gpu", "/dev/nvidia0"),
                    node(
                        "nvidia-cap",
                        &format!("/dev/nvidia-caps/nvidia-cap{gi_cap}"),
                    ),
                    node(
                        "nvidia-cap",
                        &format!("/dev/nvidia-caps/nvidia-cap{ci_cap}"),
                    ),
                    ctl.clone(),
                ],
                nvidia: Some(nv(Some((gi, ci)))),
                ..Device::default()
            });
        }
        out
    }

    #[test]
    fn exclusive_and_shared_nodes() {
        let devices = gpu_and_migs();
        let pool: Vec<PoolDevice> = devices
            .iter()
            .map(|d| PoolDevice::new(d, Some(d), &BTreeSet::new()))
            .collect();
        assert_eq!(pool[0].exclusive, ["/dev/nvidia0", "/dev/dri/card0"]);
        assert_eq!(
            pool[0].shared,
            ["/dev/nvidiactl", "/dev/nvidia-caps/nvidia-cap1"]
        );
        assert_eq!(pool[1].exclusive, ["/dev/nvidia-caps/nvidia-cap13"]);
        assert_eq!(
            pool[1].shared,
            [
                "/dev/nvidia0",
                "/dev/nvidia-caps/nvidia-cap12",
                "/dev/nvidiactl"
            ]
        );
        // Narrowed to fewer nodes, the device still holds all of its own;
        // a joined node is shared whatever its role.
        let mut narrowed = devices[0].clone();
        narrowed.nodes.truncate(1);
        narrowed.nodes.push(node("render", "/dev/kfd"));
        let joined = BTreeSet::from(["/dev/kfd".to_string()]);
        let d = PoolDevice::new(&narrowed, Some(&devices[0]), &joined);
        assert_eq!(d.nodes, ["/dev/nvidia0", "/dev/kfd"]);
        assert_eq!(d.exclusive, ["/dev/nvidia0", "/dev/dri/card0"]);
        assert_eq!(
            d.shared,
            ["/dev/nvidiactl", "/dev/nvidia-caps/nvidia-cap1", "/dev/kfd"]
        );
    }

    #[test]
    fn a_gpu_and_its_mig_devices_exclude_each_other_mig_siblings_do_not() {
        let pool: Vec<PoolDevice> = gpu_and_migs()
            .iter()
            .map(|d| PoolDevice::new(d, Some(d), &BTreeSet::new()))
            .collect();
        let items = parse_request(Some("gpu:1"), "gpu").unwrap();
        let free = |held: &Held| -> Vec<&str> {
            pool.iter()
                .filter(|d| held.is_free(d))
                .map(|d| d.id.as_str())
                .collect()
        };
        // The whole GPU held: none of its MIG devices is free.
        let mut held = Held::default();
        held.hold_device(&pool[0]);
        assert!(free(&held).is_empty());
        assert_eq!(available(&pool, &held).0, 0);
        // One MIG device held: the GPU is not free, its siblings are
        // (gi1/ci1 shares the GPU instance's capability 12).
        let mut held = Held::default();
        held.hold_device(&pool[1]);
        assert_eq!(
            free(&held),
            ["0000:41:00.0/gi1/ci1", "0000:41:00.0/gi2/ci0"]
        );
        let got = allocate(&pool, &held, &items, &[]).unwrap();
        assert_eq!(got[0][0].id, "0000:41:00.0/gi1/ci1");
        // Nothing held: the GPU comes first in the pool, and once it is
        // taken its MIG devices are not (counted or) handed out with it.
        assert_eq!(available(&pool, &Held::default()).0, 1);
        let two = parse_request(Some("gpu:2"), "gpu").unwrap();
        assert_eq!(
            allocate(&pool, &Held::default(), &two, &[]).unwrap_err(),
            "gpu: 2 requested, 1 available"
        );
        // Without the GPU in the pool, the three MIG devices go together.
        assert_eq!(available(&pool[1..], &Held::default()).0, 3);
    }
}

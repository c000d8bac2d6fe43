//! ROCm's KFD topology (`/sys/class/kfd/kfd/topology/nodes/<N>/properties`):
//! which DRM render node each compute agent uses and which PCI device it
//! is part of.
//!
//! The DRM backend reads it once per run to tell the active compute
//! partitions of AMD Instinct GPUs (the `amdgpu_xcp_<N>` platform devices
//! the driver registers for every GPU, active or not) from idle ones: each
//! active partition is a KFD node whose `drm_render_minor` is the
//! partition's render node.
//!
//! `properties` is what `node_show()` in the kernel's
//! `drivers/gpu/drm/amd/amdkfd/kfd_topology.c` writes: one `"<name>
//! <value>\n"` line per property, the value in decimal (`%u` or `%llu`).
//! CPU nodes have `drm_render_minor 0` (they have no render node). For a
//! GPU, `domain` is the PCI domain and `location_id` is `pci_dev_id()` of
//! its PCI function (`bus << 8 | devfn`); on a GPU with several partitions
//! (`kfd->num_nodes > 1`) the kernel ORs the partition's node id into it
//! (`location_id |= node_id`), so a partition's low bits need not be the
//! GPU's function number.
//!
//! Older kernels write neither `domain` nor `unique_id` (5.3-era
//! `node_show()` ends its common lines with `num_sdma_xgmi_engines`). ROCm's
//! thunk (libhsakmt, `topology_sysfs_get_node_props()`) reads the lines into
//! zeroed properties, so for it a missing `domain` is PCI domain 0 and a
//! missing `unique_id` is 0, "no UUID"; cdigen reads them the same way.
//! `unique_id` is the GPU's 64-bit serial (amdgpu's `unique_id` attribute
//! of the PCI device, in hex there); ROCm's runtime names the agent after
//! it, `GPU-` and 16 lowercase hex digits ([`gpu_uuid`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::Report;
use crate::root::{HostRoot, sys_path};

/// The topology's nodes directory, below `/sys`.
pub const NODES: &str = "class/kfd/kfd/topology/nodes";

/// The most a `properties` file may hold. The kernel writes it through one
/// sysfs page (4 KiB on x86-64, at most 64 KiB elsewhere); anything larger
/// is not the kernel's.
pub const MAX_PROPERTIES: u64 = 64 * 1024;

/// Why a `properties` file is not in the kernel's format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PropertiesError {
    /// A line that is not `<name> <decimal value>`.
    #[error("line {line}: {text:?} is not a property (\"<name> <decimal value>\")")]
    BadLine {
        /// 1-based line number.
        line: usize,
        /// The line, shortened to 80 characters.
        text: String,
    },
    /// A property given twice.
    #[error("line {line}: {name} is given twice")]
    Repeated {
        /// 1-based line number of the second one.
        line: usize,
        /// The property.
        name: String,
    },
}

/// Parses a `properties` file into its values by name.
///
/// # Errors
/// [`PropertiesError`] for the first line that is not `<name> <value>`
/// (a name of lowercase letters, digits and `_`, one space, a decimal
/// number of at most 20 digits that fits in 64 bits) or a repeated name.
pub fn parse_properties(text: &str) -> Result<BTreeMap<String, u64>, PropertiesError> {
    let mut out = BTreeMap::new();
    for (i, l) in text.lines().enumerate() {
        let line = i + 1;
        let bad = || PropertiesError::BadLine {
            line,
            text: l.chars().take(80).collect(),
        };
        let (name, value) = l.split_once(' ').ok_or_else(bad)?;
        let name_ok = !name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        let value_ok =
            !value.is_empty() && value.len() <= 20 && value.bytes().all(|b| b.is_ascii_digit());
        if !name_ok || !value_ok {
            return Err(bad());
        }
        let value: u64 = value.parse().map_err(|_| bad())?;
        if out.insert(name.to_string(), value).is_some() {
            return Err(PropertiesError::Repeated {
                line,
                name: name.to_string(),
            });
        }
    }
    Ok(out)
}

/// A KFD node with a render node: a GPU, or a compute partition of one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuNode {
    /// The node's number (N of `nodes/<N>`).
    pub node: u32,
    /// Its `properties` file (host path), for warnings.
    pub path: PathBuf,
    /// `drm_render_minor`: the minor of its `renderD<minor>`.
    pub render_minor: u32,
    /// `domain`: the PCI domain of its GPU.
    pub domain: u32,
    /// `location_id`: its GPU's `bus << 8 | devfn`, with the partition's
    /// node id ORed in on a partitioned GPU.
    pub location_id: u32,
    /// `unique_id`, when the kernel writes one and it is not 0 (0 is "no
    /// UUID": a GPU without a serial, or a kernel that predates it).
    pub unique_id: Option<u64>,
}

/// The UUID ROCm's runtime gives a GPU agent with KFD `unique_id`
/// `id` (`HSA_AMD_AGENT_INFO_UUID`, what `rocminfo` prints and
/// `ROCR_VISIBLE_DEVICES` accepts): `GPU-` and 16 lowercase hex digits.
pub fn gpu_uuid(id: u64) -> String {
    format!("GPU-{id:016x}")
}

/// What the host's KFD topology says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Topology {
    /// There is none (KFD not loaded, or no `--root` procfs/sysfs for it).
    Missing,
    /// The nodes directory could not be listed: why.
    Unreadable(String),
    /// The GPU nodes, in node order (CPU nodes, and nodes whose
    /// `properties` could not be used, left out; the latter with a
    /// warning).
    Nodes(Vec<GpuNode>),
}

impl Topology {
    /// The GPU nodes (none when the topology is missing or unreadable).
    pub fn nodes(&self) -> &[GpuNode] {
        match self {
            Topology::Nodes(n) => n,
            _ => &[],
        }
    }

    /// The node whose render node has `minor`.
    pub fn by_render_minor(&self, minor: u32) -> Option<&GpuNode> {
        self.nodes().iter().find(|n| n.render_minor == minor)
    }
}

/// Reads the topology under the root. A node whose `properties` cannot be
/// read or parsed, or lacks `location_id`, is left out with a warning
/// naming the file; a missing `domain` is 0, as ROCm reads it (noted once,
/// at `-v`).
pub fn read(root: &HostRoot, report: &mut Report) -> Topology {
    let dir = sys_path(NODES);
    let names = match root.list_dir(&dir) {
        Ok(n) => n,
        Err(e) if e.is_not_found() => return Topology::Missing,
        Err(e) => {
            let reason = e.reason();
            report.warn(
                &dir,
                format!("{reason}; cannot tell which AMD compute partitions are active"),
            );
            return Topology::Unreadable(reason);
        }
    };
    let mut numbered: Vec<(u32, String)> = names
        .into_iter()
        .filter_map(|n| {
            let digits_only =
                !n.is_empty() && n.len() <= 9 && n.bytes().all(|b| b.is_ascii_digit());
            digits_only
                .then(|| n.parse().ok())
                .flatten()
                .map(|x| (x, n))
        })
        .collect();
    numbered.sort();
    let mut nodes = Vec::new();
    let mut domain_noted = false;
    for (node, name) in numbered {
        let path = dir.join(&name).join("properties");
        let text = match root.read_limited(&path, MAX_PROPERTIES) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(t) => t,
                Err(_) => {
                    report.warn(&path, format!("not UTF-8 text; ignoring KFD node {node}"));
                    continue;
                }
            },
            Err(e) => {
                report.warn(&path, format!("{}; ignoring KFD node {node}", e.reason()));
                continue;
            }
        };
        let props = match parse_properties(&text) {
            Ok(p) => p,
            Err(e) => {
                report.warn(&path, format!("{e}; ignoring KFD node {node}"));
                continue;
            }
        };
        // CPU nodes: no render node (0, or no such property on old kernels).
        let render_minor = match props.get("drm_render_minor") {
            None | Some(0) => continue,
            Some(&m) => m,
        };
        let value = |name: &str| props.get(name).copied();
        let domain = match value("domain") {
            Some(d) => Some(d),
            None => {
                if !domain_noted {
                    domain_noted = true;
                    tracing::info!(
                        "{}: no domain property (a kernel older than the PCI domain in KFD's \
                         topology); reading the nodes' GPUs as in PCI domain 0, as ROCm does",
                        path.display()
                    );
                }
                Some(0)
            }
        };
        let fields = (
            u32::try_from(render_minor).ok(),
            domain.and_then(|v| u32::try_from(v).ok()),
            value("location_id").and_then(|v| u32::try_from(v).ok()),
        );
        let (Some(render_minor), Some(domain), Some(location_id)) = fields else {
            let shown =
                |name: &str| value(name).map_or_else(|| "none".to_string(), |v| v.to_string());
            report.warn(
                &path,
                format!(
                    "a node with a render node needs drm_render_minor, domain and location_id \
                     of at most 32 bits (drm_render_minor {}, domain {}, location_id {}); \
                     ignoring KFD node {node}",
                    shown("drm_render_minor"),
                    shown("domain"),
                    shown("location_id"),
                ),
            );
            continue;
        };
        nodes.push(GpuNode {
            node,
            path,
            render_minor,
            domain,
            location_id,
            unique_id: value("unique_id").filter(|&u| u != 0),
        });
    }
    Topology::Nodes(nodes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A GPU node of a kernel 6.8 MI300X partition, as `node_show()` writes it.
    const MI300X_NODE: &str = "cpu_cores_count 0\nsimd_count 152\nmem_banks_count 1\n\
caches_count 164\nio_links_count 1\np2p_links_count 0\ncpu_core_id_base 0\n\
simd_id_base 2147487744\nmax_waves_per_simd 8\nlds_size_in_kb 64\ngds_size_in_kb 0\n\
num_gws 64\nwave_front_size 64\narray_count 4\nsimd_arrays_per_engine 1\n\
cu_per_simd_array 10\nsimd_per_cu 4\nmax_slots_scratch_cu 32\ngfx_target_version 90402\n\
vendor_id 4098\ndevice_id 29857\nlocation_id 1281\ndomain 0\ndrm_render_minor 129\n\
hive_id 0\nnum_sdma_engines 2\nnum_sdma_xgmi_engines 0\nnum_sdma_queues_per_engine 8\n\
num_cp_queues 24\nmax_engine_clk_fcompute 2100\nlocal_mem_size 0\nfw_version 151\n\
capability 746029696\ndebug_prop 1511\nsdma_fw_version 19\nunique_id 5009784352849227836\n\
num_xcc 1\nmax_engine_clk_ccompute 3700\n";

    #[test]
    fn kernel_format_parses() {
        let p = parse_properties(MI300X_NODE).unwrap();
        assert_eq!(p.get("drm_render_minor"), Some(&129));
        assert_eq!(p.get("location_id"), Some(&1281));
        assert_eq!(p.get("domain"), Some(&0));
        assert_eq!(p.get("unique_id"), Some(&5009784352849227836));
        assert_eq!(p.len(), 38);
        assert_eq!(parse_properties(""), Ok(BTreeMap::new()));
    }

    #[test]
    fn anything_else_is_refused_with_its_line() {
        for (text, line) in [
            ("domain 0\nlocation_id\n", 2),
            ("domain  0\n", 1),
            ("domain 0x10\n", 1),
            ("domain -1\n", 1),
            ("Domain 1\n", 1),
            ("domain 1 2\n", 1),
            (" domain 1\n", 1),
            ("domain 18446744073709551616\n", 1),
            ("a 1\n\nb 2\n", 2),
            ("drm_render_minor\t128\n", 1),
        ] {
            match parse_properties(text) {
                Err(PropertiesError::BadLine { line: l, .. }) => assert_eq!(l, line, "{text:?}"),
                other => panic!("{text:?}: {other:?}"),
            }
        }
        assert_eq!(
            parse_properties("domain 0\ndomain 1\n"),
            Err(PropertiesError::Repeated {
                line: 2,
                name: "domain".into()
            })
        );
        // A long line is quoted shortened.
        let long = format!("{}\n", "x".repeat(10_000));
        let e = parse_properties(&long).unwrap_err().to_string();
        assert!(e.len() < 200, "{e}");
    }

    /// A 5.3-era GPU node: no `domain`, no `unique_id`.
    const OLD_NODE: &str = "cpu_cores_count 0\nsimd_count 240\nlocation_id 768\n\
drm_render_minor 128\nhive_id 0\nnum_sdma_engines 2\nnum_sdma_xgmi_engines 0\n\
max_engine_clk_ccompute 2900\n";

    /// A topology of `nodes` (number, `properties`) under a temporary root.
    fn topology(nodes: &[(u32, &str)]) -> (Topology, Vec<String>) {
        let tmp = tempfile::tempdir().unwrap();
        for (n, text) in nodes {
            let dir = tmp.path().join(format!("sys/{NODES}/{n}"));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("properties"), text).unwrap();
        }
        let root = HostRoot::open(tmp.path()).unwrap();
        let mut report = Report::default();
        let t = read(&root, &mut report);
        let warnings = report.warnings.iter().map(|w| w.message.clone()).collect();
        (t, warnings)
    }

    #[test]
    fn a_node_without_domain_is_in_domain_0_without_a_warning() {
        let (t, warnings) = topology(&[(1, OLD_NODE), (2, &OLD_NODE.replace("128", "129"))]);
        assert_eq!(warnings, Vec::<String>::new());
        let n = t.by_render_minor(128).unwrap();
        assert_eq!((n.domain, n.location_id, n.unique_id), (0, 768, None));
        assert_eq!(t.nodes().len(), 2);
    }

    #[test]
    fn unique_id_is_the_gpus_uuid_and_0_is_none() {
        let (t, _) = topology(&[(1, MI300X_NODE), (2, &format!("{OLD_NODE}unique_id 0\n"))]);
        let n = t.by_render_minor(129).unwrap();
        assert_eq!(n.unique_id, Some(5_009_784_352_849_227_836));
        assert_eq!(gpu_uuid(5_009_784_352_849_227_836), "GPU-4586545370e3703c");
        assert_eq!(gpu_uuid(1), "GPU-0000000000000001");
        assert_eq!(t.by_render_minor(128).unwrap().unique_id, None);
    }

    #[test]
    fn a_node_without_location_id_is_left_out_with_a_plain_warning() {
        let (t, warnings) = topology(&[(3, "drm_render_minor 130\ndomain 0\n")]);
        assert!(t.nodes().is_empty());
        assert_eq!(
            warnings,
            [
                "a node with a render node needs drm_render_minor, domain and location_id of at \
              most 32 bits (drm_render_minor 130, domain 0, location_id none); ignoring KFD node 3"
            ]
        );
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,400}") {
            let _ = parse_properties(&s);
        }

        /// Whatever the kernel could write parses back to what it wrote.
        #[test]
        fn kernel_output_round_trips(
            props in proptest::collection::btree_map("[a-z_][a-z0-9_]{0,30}", any::<u64>(), 0..40)
        ) {
            let text: String = props.iter().map(|(k, v)| format!("{k} {v}\n")).collect();
            prop_assert_eq!(parse_properties(&text), Ok(props));
        }

        /// What parses is exactly what the lines say.
        #[test]
        fn parsed_values_are_the_lines(s in "([a-z_]{1,6} [0-9]{1,3}\n){0,8}") {
            if let Ok(p) = parse_properties(&s) {
                prop_assert_eq!(p.len(), s.lines().count());
                for l in s.lines() {
                    let (k, v) = l.split_once(' ').unwrap();
                    prop_assert_eq!(p.get(k), Some(&v.parse::<u64>().unwrap()));
                }
            }
        }
    }
}

//! GetPreferredAllocation: which of the available devices to give a
//! container (placeholder; see the module docs of [`super`]).

/// Where a device sits, for packing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    /// NUMA node.
    pub numa: Option<u32>,
    /// Path components below `/sys/devices`.
    pub pci_path: Vec<String>,
    /// A MIG device's parent GPU.
    pub parent: Option<String>,
}

/// Placeholder until the real choice lands.
pub fn preferred(
    placements: &std::collections::BTreeMap<String, Placement>,
    available: &[String],
    must_include: &[String],
    size: usize,
) -> Vec<String> {
    let _ = placements;
    let mut out: Vec<String> = must_include.to_vec();
    for a in available {
        if out.len() >= size {
            break;
        }
        if !out.contains(a) {
            out.push(a.clone());
        }
    }
    out
}

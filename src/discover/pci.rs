//! Reading a PCI function's identity from sysfs (shared by backends).
//!
//! Attributes of `/sys/devices/.../<BDF>/`: `vendor` (`0x1002`), `device`,
//! `subsystem_vendor`, `subsystem_device` (may be missing in odd VMs),
//! `class` (`0x030000`), `numa_node` (`0`, or `-1` for none), and the
//! `driver` and `iommu_group` links (absent when unbound / no IOMMU).

use std::path::Path;

use super::Report;
use super::pciids::PciIds;
use crate::model::PciInfo;
use crate::root::HostRoot;
use crate::sysfs::{PciAddress, parse_hex_id, parse_numa_node};

/// What a PCI function's sysfs directory says about it.
#[derive(Debug, Clone)]
pub struct PciFunction {
    /// Identity.
    pub info: PciInfo,
    /// Bound driver.
    pub driver: Option<String>,
    /// NUMA node, when the device has an affinity.
    pub numa_node: Option<u32>,
}

/// Reads the PCI function at real sysfs path `dir`. Returns `None` (with a
/// warning) when a required attribute is missing or malformed.
pub fn read_function(
    root: &HostRoot,
    dir: &Path,
    ids: Option<&PciIds>,
    report: &mut Report,
) -> Option<PciFunction> {
    let name = dir.file_name()?.to_str()?;
    let address: PciAddress = match name.parse() {
        Ok(a) => a,
        Err(e) => {
            report.warn(dir, format!("{e}; skipping"));
            return None;
        }
    };
    let hex = |attr: &str, digits: usize, report: &mut Report| -> Option<Option<u32>> {
        let path = dir.join(attr);
        match root.read_attr_opt(&path) {
            Ok(None) => Some(None),
            Ok(Some(v)) => match parse_hex_id(&v, digits) {
                Some(x) => Some(Some(x)),
                None => {
                    report.warn(
                        &path,
                        format!("{v:?} is not a 0x-prefixed hex ID of at most {digits} digits; skipping device"),
                    );
                    None
                }
            },
            Err(e) => {
                report.warn(&path, format!("{}; skipping device", e.reason()));
                None
            }
        }
    };
    let vendor = hex("vendor", 4, report)?;
    let device = hex("device", 4, report)?;
    let class = hex("class", 6, report)?;
    let (Some(vendor), Some(device), Some(class)) = (vendor, device, class) else {
        report.warn(
            dir,
            "missing vendor, device or class attribute; skipping device",
        );
        return None;
    };
    let sub_vendor = hex("subsystem_vendor", 4, report)?;
    let sub_device = hex("subsystem_device", 4, report)?;
    let numa_path = dir.join("numa_node");
    let numa_node = match root.read_attr_opt(&numa_path) {
        Ok(Some(v)) => match parse_numa_node(&v) {
            Some(n) => n,
            None => {
                report.warn(&numa_path, format!("{v:?} is not a NUMA node; ignoring it"));
                None
            }
        },
        Ok(None) => None,
        Err(e) => {
            report.warn(&numa_path, format!("{}; ignoring it", e.reason()));
            None
        }
    };
    let driver = link(root, &dir.join("driver"), report);
    let iommu_group = link(root, &dir.join("iommu_group"), report);
    let (vendor_name, device_name) = ids
        .map(|db| db.names(vendor, device))
        .unwrap_or((None, None));
    Some(PciFunction {
        info: PciInfo {
            address: address.to_string(),
            vendor_id: format!("0x{vendor:04x}"),
            device_id: format!("0x{device:04x}"),
            subsystem_vendor_id: sub_vendor.map(|v| format!("0x{v:04x}")),
            subsystem_device_id: sub_device.map(|v| format!("0x{v:04x}")),
            class: format!("0x{class:06x}"),
            vendor_name,
            device_name,
            iommu_group,
        },
        driver,
        numa_node,
    })
}

/// The basename of a link's target, with a warning when it cannot be read.
pub fn link(root: &HostRoot, path: &Path, report: &mut Report) -> Option<String> {
    match root.link_name(path) {
        Ok(v) => v,
        Err(e) => {
            report.warn(path, format!("{}; ignoring it", e.reason()));
            None
        }
    }
}

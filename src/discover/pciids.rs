//! Vendor and device names from the PCI ID database (`pci.ids`), read from
//! the distribution's copy under the root.
//!
//! We parse the distro file instead of using the `pci-ids` crate: that
//! crate downloads pci.ids from the network in its build script and embeds
//! a copy (3 MB) that goes stale, while the host's copy is current and is
//! what `lspci` shows. Only vendor and device lines are kept.

use std::collections::HashMap;
use std::path::PathBuf;

use crate::root::HostRoot;

/// Where distributions install pci.ids, in order of preference.
pub const PCI_IDS_PATHS: [&str; 3] = [
    "/usr/share/misc/pci.ids",
    "/usr/share/hwdata/pci.ids",
    "/usr/share/pci.ids",
];

/// Largest pci.ids accepted (the real file is about 1.4 MB).
const MAX_SIZE: u64 = 16 << 20;

/// The parsed database.
#[derive(Debug, Default)]
pub struct PciIds {
    vendors: HashMap<u16, String>,
    devices: HashMap<(u16, u16), String>,
}

impl PciIds {
    /// Loads the first database found under the root; `None` when there is
    /// none (names are then simply absent).
    pub fn load(root: &HostRoot) -> Option<PciIds> {
        for p in PCI_IDS_PATHS {
            match root.read_limited(&PathBuf::from(p), MAX_SIZE) {
                Ok(bytes) => return Some(PciIds::parse(&String::from_utf8_lossy(&bytes))),
                Err(e) if e.is_not_found() => continue,
                Err(e) => {
                    tracing::warn!("{e}; PCI names will be missing");
                    return None;
                }
            }
        }
        tracing::debug!("no pci.ids found; PCI names will be missing");
        None
    }

    /// Parses pci.ids text: `vvvv  Vendor` lines, then `\tdddd  Device`
    /// lines; subsystem lines (two tabs), comments and the class section
    /// (`C ...`) are skipped. Malformed lines are ignored.
    pub fn parse(text: &str) -> PciIds {
        let mut db = PciIds::default();
        let mut vendor: Option<u16> = None;
        for line in text.lines() {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            if line.starts_with("C ") {
                vendor = None; // the class section ends the vendor list
                continue;
            }
            if let Some(rest) = line.strip_prefix('\t') {
                if rest.starts_with('\t') {
                    continue;
                }
                if let (Some(v), Some((id, name))) = (vendor, split_entry(rest)) {
                    db.devices.insert((v, id), name.to_string());
                }
                continue;
            }
            vendor = split_entry(line).map(|(id, name)| {
                db.vendors.insert(id, name.to_string());
                id
            });
        }
        db
    }

    /// Vendor and device names, as far as known.
    pub fn names(&self, vendor: u32, device: u32) -> (Option<String>, Option<String>) {
        let (Ok(v), Ok(d)) = (u16::try_from(vendor), u16::try_from(device)) else {
            return (None, None);
        };
        (
            self.vendors.get(&v).cloned(),
            self.devices.get(&(v, d)).cloned(),
        )
    }
}

/// `"1002  Advanced Micro Devices"` → (0x1002, "Advanced Micro Devices").
fn split_entry(s: &str) -> Option<(u16, &str)> {
    let id = s.get(..4)?;
    let name = s.get(4..)?.trim();
    if !id.bytes().all(|b| b.is_ascii_hexdigit()) || name.is_empty() {
        return None;
    }
    Some((u16::from_str_radix(id, 16).ok()?, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_vendors_and_devices() {
        let text = "# comment\n1002  Advanced Micro Devices, Inc. [AMD/ATI]\n\t744c  Navi 31 [Radeon RX 7900 XT/7900 XTX]\n\t\t1da2 e471  Sapphire card\n10de  NVIDIA Corporation\n\t20b5  GA100 [A100 PCIe 80GB]\nbad line\n\tzzzz  nope\nC 03  Display controller\n\t00  VGA compatible controller\n";
        let db = PciIds::parse(text);
        assert_eq!(
            db.names(0x1002, 0x744c),
            (
                Some("Advanced Micro Devices, Inc. [AMD/ATI]".into()),
                Some("Navi 31 [Radeon RX 7900 XT/7900 XTX]".into())
            )
        );
        assert_eq!(
            db.names(0x10de, 0x20b5).1.as_deref(),
            Some("GA100 [A100 PCIe 80GB]")
        );
        assert_eq!(
            db.names(0x10de, 0x0003),
            (Some("NVIDIA Corporation".into()), None)
        );
        assert_eq!(db.names(0x1234, 0x5678), (None, None));
        assert_eq!(db.names(0x1_0000, 0), (None, None));
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics(s in "\\PC{0,200}") {
            let _ = PciIds::parse(&s);
        }
    }
}

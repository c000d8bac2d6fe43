//! Vendor and device names from the PCI ID database (`pci.ids`), read from
//! the distribution's copy under the root.
//!
//! We parse the distro file instead of using the `pci-ids` crate: that
//! crate downloads pci.ids from the network in its build script and embeds
//! a copy (3 MB) that goes stale, while the host's copy is current and is
//! what `lspci` shows. Only vendor and device lines are kept.

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

/// The parsed database: every name in one string, found through sorted
/// tables of IDs (about half the memory of a map of `String`s, which
/// matters at the peak of a discovery run).
#[derive(Debug, Default)]
pub struct PciIds {
    /// The names, one after another.
    names: String,
    /// Vendor ID and its name's range in `names`, sorted by ID.
    vendors: Vec<(u16, u32, u32)>,
    /// Vendor and device ID and the name's range, sorted by IDs.
    devices: Vec<((u16, u16), u32, u32)>,
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
    /// (`C ...`) are skipped. Malformed lines are ignored; of an ID listed
    /// twice, the last name counts.
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
                if let (Some(v), Some((id, name))) = (vendor, split_entry(rest))
                    && let Some((start, end)) = db.keep(name)
                {
                    db.devices.push(((v, id), start, end));
                }
                continue;
            }
            vendor = split_entry(line).and_then(|(id, name)| {
                let (start, end) = db.keep(name)?;
                db.vendors.push((id, start, end));
                Some(id)
            });
        }
        // Stable: of equal IDs, the last listed stays last.
        db.vendors.sort_by_key(|v| v.0);
        db.devices.sort_by_key(|d| d.0);
        db.names.shrink_to_fit();
        db
    }

    /// Appends a name; its range (None past 4 GiB, which `MAX_SIZE` rules
    /// out).
    fn keep(&mut self, name: &str) -> Option<(u32, u32)> {
        let start = u32::try_from(self.names.len()).ok()?;
        self.names.push_str(name);
        Some((start, u32::try_from(self.names.len()).ok()?))
    }

    /// The name at a range of `names`.
    fn name(&self, start: u32, end: u32) -> Option<String> {
        self.names
            .get(start as usize..end as usize)
            .map(str::to_string)
    }

    /// Vendor and device names, as far as known.
    pub fn names(&self, vendor: u32, device: u32) -> (Option<String>, Option<String>) {
        let (Ok(v), Ok(d)) = (u16::try_from(vendor), u16::try_from(device)) else {
            return (None, None);
        };
        // The last entry of an ID: just before the first greater one.
        let last = self.vendors.partition_point(|e| e.0 <= v);
        let vendor = last
            .checked_sub(1)
            .and_then(|i| self.vendors.get(i))
            .filter(|e| e.0 == v)
            .and_then(|e| self.name(e.1, e.2));
        let last = self.devices.partition_point(|e| e.0 <= (v, d));
        let device = last
            .checked_sub(1)
            .and_then(|i| self.devices.get(i))
            .filter(|e| e.0 == (v, d))
            .and_then(|e| self.name(e.1, e.2));
        (vendor, device)
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

    #[test]
    fn an_id_listed_twice_has_its_last_name() {
        let db = PciIds::parse("1002  First\n\t0001  a\n\t0001  b\n1002  Second\n\t0001  c\n");
        assert_eq!(
            db.names(0x1002, 0x0001),
            (Some("Second".into()), Some("c".into()))
        );
    }

    /// The names as a map of every line read in order would have them.
    fn reference(text: &str) -> std::collections::HashMap<(u16, Option<u16>), String> {
        let mut map = std::collections::HashMap::new();
        let mut vendor = None;
        for line in text.lines() {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            if line.starts_with("C ") {
                vendor = None;
            } else if let Some(rest) = line.strip_prefix('\t') {
                if let (false, Some(v), Some((id, name))) =
                    (rest.starts_with('\t'), vendor, split_entry(rest))
                {
                    map.insert((v, Some(id)), name.to_string());
                }
            } else {
                vendor = split_entry(line).map(|(id, name)| {
                    map.insert((id, None), name.to_string());
                    id
                });
            }
        }
        map
    }

    fn line() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let id = prop::sample::select(vec!["1002", "10de", "8086", "0001", "zz12"]);
        let name = prop::sample::select(vec!["A", "B c", " ", "D [E]"]);
        (
            prop::sample::select(vec!["", "\t", "\t\t", "C ", "# "]),
            id,
            name,
        )
            .prop_map(|(lead, id, name)| format!("{lead}{id}  {name}"))
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics(s in "\\PC{0,200}") {
            let _ = PciIds::parse(&s);
        }

        /// Every vendor and device has the name a map of the lines read in
        /// order gives it (the last of an ID listed twice).
        #[test]
        fn names_are_those_of_the_last_line_of_each_id(
            lines in proptest::collection::vec(line(), 0..30),
        ) {
            let text = lines.join("\n");
            let db = PciIds::parse(&text);
            let want = reference(&text);
            for v in [0x1002u32, 0x10de, 0x8086, 0x0001] {
                for d in [0x1002u32, 0x10de, 0x8086, 0x0001] {
                    let (vendor, device) = db.names(v, d);
                    let (v16, d16) = (v as u16, d as u16);
                    proptest::prop_assert_eq!(vendor, want.get(&(v16, None)).cloned());
                    proptest::prop_assert_eq!(device, want.get(&(v16, Some(d16))).cloned());
                }
            }
        }
    }
}

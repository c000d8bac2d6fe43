//! `pci.ids`: `cdigen::discover::pciids::PciIds::parse`.
//!
//! Asserts: every name the database returns, for every ID a line of the
//! input starts with, is non-empty, trimmed, on one line and taken from
//! the input; IDs beyond 16 bits have no name.
#![no_main]

use std::collections::BTreeSet;

use cdigen::discover::pciids::PciIds;
use libfuzzer_sys::fuzz_target;

fn id(s: &str) -> Option<u32> {
    let hex = s.get(..4)?;
    if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(hex, 16).ok()
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let db = PciIds::parse(&text);
    let vendors: Vec<u32> = text.lines().filter_map(id).collect();
    let devices: Vec<u32> = text
        .lines()
        .filter_map(|l| l.strip_prefix('\t'))
        .filter_map(id)
        .collect();
    let mut names = BTreeSet::new();
    for &v in vendors.iter().take(16) {
        for &d in devices.iter().take(16).chain([0, 0xffff].iter()) {
            let (vendor, device) = db.names(v, d);
            names.extend(vendor.into_iter().chain(device));
            assert_eq!(db.names(v | 0x1_0000, d), (None, None));
            assert_eq!(db.names(v, d | 0x1_0000), (None, None));
        }
    }
    for name in names {
        assert!(
            !name.is_empty() && name.trim() == name && !name.contains('\n'),
            "{name:?}"
        );
        assert!(text.contains(name.as_str()), "{name:?} is not in the input");
    }
});

//! One-value sysfs files: `dev` (`MAJOR:MINOR`, `cdigen::root::parse_majmin`),
//! and the value parsers of `cdigen::sysfs`: PCI addresses, `0x` IDs
//! (`vendor`, `device`), `numa_node`, DRM node names (`card1`).
//!
//! Asserts: whatever parses is in range and, written back as the kernel
//! writes it, parses to the same value.
#![no_main]

use cdigen::sysfs::{self, PciAddress};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Some((major, minor)) = cdigen::root::parse_majmin(s) {
        assert_eq!(
            cdigen::root::parse_majmin(&format!("{major}:{minor}\n")),
            Some((major, minor))
        );
    }
    if let Ok(addr) = s.parse::<PciAddress>() {
        assert!(addr.device <= 31 && addr.function <= 7, "{addr:?}");
        assert_eq!(addr.to_string().parse::<PciAddress>(), Ok(addr));
    }
    for max_digits in [4, 6, 8] {
        if let Some(id) = sysfs::parse_hex_id(s, max_digits) {
            assert!(u64::from(id) < 1u64 << (4 * max_digits), "{s:?} -> {id:#x}");
            assert_eq!(
                sysfs::parse_hex_id(&format!("{id:#06x}\n"), max_digits),
                Some(id)
            );
        }
    }
    match sysfs::parse_numa_node(s) {
        Some(Some(node)) => assert_eq!(
            sysfs::parse_numa_node(&format!("{node}\n")),
            Some(Some(node))
        ),
        Some(None) => assert_eq!(s.trim(), "-1"),
        None => {}
    }
    for prefix in ["card", "renderD", "accel"] {
        if let Some(n) = sysfs::node_number(s, prefix) {
            assert_eq!(sysfs::node_number(&format!("{prefix}{n}"), prefix), Some(n));
        }
    }
});

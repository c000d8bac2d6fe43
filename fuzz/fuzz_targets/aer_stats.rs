//! The PCI health signal files of `cdigen::deviceplugin::signals`: AER
//! counter files (`aer_dev_fatal`: lines `NAME COUNT`, a `TOTAL_ERR_*`
//! line) and the link attributes (`current_link_speed`,
//! `current_link_width`).
//!
//! Asserts: whatever parses is consistent (the total line is no error
//! name, a file without one is the sum of its counts, a speed or width
//! written back as the kernel writes it parses to the same value).
#![no_main]

use cdigen::deviceplugin::signals;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    for key in ["TOTAL_ERR_FATAL", "TOTAL_ERR_NONFATAL"] {
        if let Ok(c) = signals::parse_aer(s, key) {
            assert!(!c.by_name.contains_key(key), "{s:?}");
            if !s.lines().any(|l| l.trim().starts_with(key)) {
                let sum = c.by_name.values().fold(0u64, |a, b| a.saturating_add(*b));
                assert_eq!(c.total, sum, "{s:?}");
            }
        }
    }
    if let Ok(Some(mts)) = signals::parse_link_speed(s) {
        let text = format!("{}.{:03} GT/s PCIe\n", mts / 1000, mts % 1000);
        assert_eq!(signals::parse_link_speed(&text), Ok(Some(mts)), "{s:?}");
    }
    if let Ok(Some(w)) = signals::parse_link_width(s) {
        assert!(w > 0, "{s:?}");
        assert_eq!(signals::parse_link_width(&format!("{w}\n")), Ok(Some(w)));
    }
});

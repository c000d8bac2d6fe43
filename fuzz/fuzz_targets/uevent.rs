//! `uevent` files (`KEY=value` lines) as sysfs has them:
//! `cdigen::sysfs::parse_uevent`.
//!
//! Asserts: every pair comes from one line (no newline in it, no `=` in
//! the key); written back as `KEY=value` lines, the pairs parse to the same
//! pairs.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let pairs = cdigen::sysfs::parse_uevent(text);
    assert!(pairs.len() <= text.lines().count());
    for (k, v) in &pairs {
        assert!(!k.contains('\n') && !v.contains('\n'), "{k:?}={v:?}");
        assert!(!k.contains('='), "key {k:?}");
    }
    // `str::lines` drops a `\r` before `\n` (and keeps a bare one at the
    // end), so a value ending in `\r` cannot be written back as it was.
    if pairs.iter().any(|(_, v)| v.ends_with('\r')) {
        return;
    }
    let written: String = pairs.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    assert_eq!(cdigen::sysfs::parse_uevent(&written), pairs);
});

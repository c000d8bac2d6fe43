//! glibc's linker cache, `etc/ld.so.cache` (all three layouts):
//! `cdigen::ldcache::parse`.
//!
//! Asserts: bad input is an error with a bounded message, never a panic;
//! a parsed cache has no more entries than fit in the input, and each
//! entry's strings are NUL-free and come from the input; the flag
//! accessors work on any entry; parsing is deterministic.
#![no_main]

use cdigen::ldcache;
use libfuzzer_sys::fuzz_target;

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

fuzz_target!(|data: &[u8]| {
    let entries = match ldcache::parse(data) {
        Ok(entries) => entries,
        Err(e) => {
            let message = e.to_string();
            // Errors name offsets and a few escaped bytes, never the input.
            assert!(!message.is_empty() && message.len() < 512, "{message}");
            return;
        }
    };
    // The smallest entry is 12 bytes (old format).
    assert!(
        entries.len() <= data.len() / 12,
        "{} entries",
        entries.len()
    );
    for e in &entries {
        for s in [&e.key, &e.path] {
            assert!(!s.contains('\0'), "{e:?}");
            assert!(contains(data, s.as_bytes()), "{e:?}");
        }
        let _ = (
            e.arch(),
            e.is_x86_64(),
            e.is_aarch64(),
            e.is_libc6(),
            e.glibc_hwcaps_index(),
        );
    }
    assert_eq!(ldcache::parse(data).ok().as_ref(), Some(&entries));
});

//! A shared library's machine and soname (`DT_SONAME`), for driver roots
//! without a linker cache: `cdigen::elf::read`.
//!
//! Asserts: bad input is an error with a short message, never a panic; a
//! soname is non-empty, at most 255 bytes, has no slash or NUL and comes
//! from the input; reading is deterministic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

fuzz_target!(|data: &[u8]| {
    match cdigen::elf::read(data) {
        Err(e) => {
            let message = e.to_string();
            assert!(!message.is_empty() && message.len() < 256, "{message}");
        }
        Ok(lib) => {
            if let Some(s) = &lib.soname {
                assert!(!s.is_empty() && s.len() <= 255, "{s:?}");
                assert!(!s.contains('/') && !s.contains('\0'), "{s:?}");
                assert!(contains(data, s.as_bytes()), "{s:?}");
            }
            assert_eq!(cdigen::elf::read(data).ok(), Some(lib));
        }
    }
});

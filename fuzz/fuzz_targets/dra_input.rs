//! What the DRA driver reads that others write: its checkpoint file
//! (`cdigen::dra::checkpoint::parse`) and a claim's opaque configuration
//! parameters (`cdigen::dra::prepare::parse_config`), each from the same
//! bytes.
//!
//! Asserts: bad input is an error with a message, never a panic; a parsed
//! checkpoint's claim UIDs are safe as file names, and it survives a save
//! and parse round trip unchanged; a parsed configuration has only
//! variable names a container runtime takes.
#![no_main]

use cdigen::dra::checkpoint;
use cdigen::dra::prepare;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match checkpoint::parse(data) {
        Ok(c) => {
            assert!(c.claims.keys().all(|u| checkpoint::is_safe_uid(u)), "{c:?}");
            let again = checkpoint::parse(&checkpoint::to_bytes(&c).unwrap()).unwrap();
            assert_eq!(again, c);
        }
        Err(e) => assert!(!e.is_empty()),
    }
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) {
        match prepare::parse_config(&v) {
            Ok(c) => {
                for name in c.env.keys() {
                    assert!(
                        !name.is_empty()
                            && !name.starts_with(|c: char| c.is_ascii_digit())
                            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
                        "{name:?}"
                    );
                }
            }
            Err(e) => assert!(!e.is_empty()),
        }
    }
});

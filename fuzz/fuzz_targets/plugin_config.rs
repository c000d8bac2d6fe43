//! The plugin configuration read from stdin (`cdigen plugin`):
//! `cdigen::plugin::config::parse` and `peek_version`.
//!
//! Asserts: bad input is an error with a message, never a panic; a
//! parsed configuration has a valid `type`, and `peek_version` (used for
//! error replies before the full parse) reads the same `cdiVersion`.
#![no_main]

use cdigen::plugin::config;
use cdigen::plugin::request::is_resource_type;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let peeked = config::peek_version(data);
    match config::parse(data) {
        Ok((cfg, warnings)) => {
            assert!(is_resource_type(&cfg.resource_type), "{cfg:?}");
            assert_eq!(peeked.as_deref(), Some(cfg.cdi_version.as_str()));
            let _ = cfg.generator();
            for w in warnings {
                assert!(w.starts_with("configuration:"), "{w}");
            }
        }
        Err(f) => assert!(!f.to_string().is_empty()),
    }
});

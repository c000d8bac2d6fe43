//! CDI spec files, JSON and YAML: `cdigen::cdi::codec::parse`, the reader
//! of `validate`, `list`, `check` and `generate`'s conflict checks. Every
//! input is read as both formats.
//!
//! Asserts: bad input is an error, never a panic; a parsed spec written
//! by `to_bytes` (canonical, as `generate` writes) in either format parses
//! back to the same spec; validation runs on anything parsed.
#![no_main]

use cdigen::cdi::codec::{self, Format};
use cdigen::cdi::validate;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for format in [Format::Json, Format::Yaml] {
        let spec = match codec::parse(data, format) {
            Ok(spec) => spec,
            Err(e) => {
                assert!(!e.to_string().is_empty());
                continue;
            }
        };
        let _ = validate::validate(&spec);
        for out in [Format::Json, Format::Yaml] {
            let bytes = codec::to_bytes(&spec, out).expect("a parsed spec serializes");
            match codec::parse(&bytes, out) {
                Ok(again) => assert_eq!(again, spec, "{format:?} -> {out:?}"),
                Err(e) => panic!(
                    "{format:?} -> {out:?}: cdigen cannot read what it wrote: {e}\n{}",
                    String::from_utf8_lossy(&bytes)
                ),
            }
        }
    }
});

//! Generator definitions (`/etc/cdigen/generators.d/*.yaml`):
//! `cdigen::generator::parse`, strict YAML plus the checks of every field.
//!
//! Asserts: bad input is an error naming the file, never a panic; a
//! definition that passes, serialized again (as JSON, which YAML reads as
//! a flow mapping), parses and passes to the same definition; its output
//! file name has the format's extension.
#![no_main]

use std::path::Path;

use cdigen::generator;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("fuzz.yaml");
    let g = match generator::parse(path, text) {
        Ok(g) => g,
        Err(e) => {
            assert!(e.to_string().contains("fuzz.yaml"), "{e}");
            return;
        }
    };
    let yaml = serde_json::to_string_pretty(&g).expect("a definition serializes");
    match generator::parse(path, &yaml) {
        Ok(again) => assert_eq!(again, g, "re-serialized:\n{yaml}"),
        Err(e) => panic!("a valid definition, re-serialized, fails: {e}\n{yaml}"),
    }
    let file = g.file_name(g.output.format);
    assert!(
        file.ends_with(&format!(".{}", g.output.format.extension())),
        "{file}"
    );
});

//! KFD topology `properties` files (`"<name> <value>\n"` lines):
//! `cdigen::discover::kfd::parse_properties`.
//!
//! Asserts: what parses has one entry per line, each a plain name and a
//! value; written back as the kernel writes it, it parses to the same map.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(props) = cdigen::discover::kfd::parse_properties(text) else {
        return;
    };
    assert_eq!(props.len(), text.lines().count());
    for name in props.keys() {
        assert!(
            !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
            "{name:?}"
        );
    }
    let written: String = props.iter().map(|(k, v)| format!("{k} {v}\n")).collect();
    assert_eq!(
        cdigen::discover::kfd::parse_properties(&written).as_ref(),
        Ok(&props)
    );
});

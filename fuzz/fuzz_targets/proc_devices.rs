//! `/proc/devices`: `cdigen::discover::nvidia::proc::parse_char_majors`
//! (the character section; names by major).
//!
//! Asserts: every name is non-empty, trimmed and on one line; the map,
//! written back as a `/proc/devices` file, parses to the same map.
#![no_main]

use cdigen::discover::nvidia::proc;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let majors = proc::parse_char_majors(&text);
    let mut written = String::from("Character devices:\n");
    for (name, major) in &majors {
        assert!(
            !name.is_empty() && name.trim() == name && !name.contains('\n'),
            "{name:?}"
        );
        written.push_str(&format!("{major:3} {name}\n"));
    }
    written.push_str("\nBlock devices:\n  8 sd\n");
    assert_eq!(proc::parse_char_majors(&written), majors);
    let _ = proc::nvidia_major(&majors);
});

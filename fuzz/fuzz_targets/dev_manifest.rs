//! `dev.manifest` (the devfs of a fixture or snapshot):
//! `cdigen::root::parse_manifest_text`, the parser `--root` uses.
//!
//! Asserts: an error names a line of the input; a parsed manifest has only
//! normalized paths under `/dev` and modes within 0o7777, and
//! `format_manifest` writes it so that it parses back to the same entries.
#![no_main]

use cdigen::root::{self, DevKind};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let entries = match root::parse_manifest_text(text) {
        Ok(entries) => entries,
        Err(root::Error::Manifest { line, message, .. }) => {
            assert!(
                line >= 1 && line <= text.lines().count(),
                "line {line}: {message}"
            );
            return;
        }
        Err(e) => panic!("not a manifest error: {e}"),
    };
    for (path, e) in &entries {
        let p = path.to_str().expect("manifest paths are UTF-8");
        assert!(p.starts_with("/dev/"), "{p:?}");
        assert!(!p.split('/').any(|c| c == "." || c == ".."), "{p:?}");
        assert!(e.mode <= 0o7777, "{p:?}: {e:?}");
        assert_eq!(
            e.target.is_some(),
            e.kind == DevKind::Symlink,
            "{p:?}: {e:?}"
        );
    }
    let written = root::format_manifest(&entries);
    match root::parse_manifest_text(&written) {
        Ok(again) => assert_eq!(again, entries, "format_manifest wrote:\n{written}"),
        Err(e) => panic!("format_manifest wrote what it cannot read: {e}\n{written}"),
    }
});

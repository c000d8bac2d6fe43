//! The plugin protocol's request grammar (`cdigen plugin`):
//! `CDI_REQUEST`, `CDI_REQUEST_ID` and `CDI_REQUEST_NUMA_LOCALITY`
//! (`cdigen::plugin::request`). The input is split at newlines: the plugin
//! type, then the three variables' values (a missing line is unset).
//!
//! Asserts: what parses obeys the ABNF and, written back, parses to the
//! same value (items in order, no spec twice, amounts positive); an
//! error has a message.
#![no_main]

use cdigen::plugin::request::{self, ResourceSpec};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut lines = text.split('\n');
    let plugin_type = lines.next().unwrap_or("");
    let (req, id, numa) = (lines.next(), lines.next(), lines.next());

    match request::parse_request(req, plugin_type) {
        Ok(items) => {
            assert!(!items.is_empty());
            for (i, item) in items.iter().enumerate() {
                assert!(item.amount > 0, "{item:?}");
                assert_eq!(item.spec.want(plugin_type), Some(item.want));
                assert_eq!(
                    item.spec.to_string().parse::<ResourceSpec>().as_ref(),
                    Ok(&item.spec)
                );
                assert!(
                    !items.iter().skip(i + 1).any(|o| o.spec == item.spec),
                    "{items:?}"
                );
            }
            let written = items
                .iter()
                .map(|i| format!("{}:{}", i.spec, i.amount))
                .collect::<Vec<_>>()
                .join(",");
            assert_eq!(
                request::parse_request(Some(&written), plugin_type),
                Ok(items)
            );
        }
        Err(f) => assert!(!f.to_string().is_empty()),
    }

    match request::parse_request_id(id) {
        Ok(v) => {
            assert_eq!(Some(v.as_str()), id);
            assert!(request::is_request_id(&v) && !v.is_empty() && v.len() <= 64);
        }
        Err(f) => assert!(!f.to_string().is_empty()),
    }

    match request::parse_numa_locality(numa) {
        Ok(nodes) => {
            for (i, n) in nodes.iter().enumerate() {
                assert!(!nodes.iter().skip(i + 1).any(|o| o == n), "{nodes:?}");
            }
            let written = nodes
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",");
            assert_eq!(request::parse_numa_locality(Some(&written)), Ok(nodes));
        }
        Err(f) => assert!(!f.to_string().is_empty()),
    }
});

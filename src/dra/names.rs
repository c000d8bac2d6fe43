//! DRA device names: what a ResourceSlice calls each cdigen device.
//!
//! A name is a DNS label (at most 63 of `a-z 0-9 -`, starting and ending
//! with a letter or digit), unique in the node's pool, and stable across
//! reboots, because a prepared claim and the checkpoint hold it. It is
//! made from the generator's name and the device plugin ID
//! ([`crate::deviceplugin::ids`]: UUID, PCI address, by-id link, ...):
//! `nvidia-gpu-6f1d3c2a-8b4e-…`, `sriov-0000-3b-00-2`. The generator is in
//! it because two generators may offer one device (a GPU and its MEI
//! node). A name longer than 63, or one two devices would share after
//! mapping, ends in a hash of the whole identity instead.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use crate::deviceplugin::inventory::{Entry, Inventory};

/// The API's limit on a device name (a DNS label).
pub const MAX_LEN: usize = 63;

/// Hex digits of the hash that ends a shortened or disambiguated name.
const HASH_LEN: usize = 10;

/// One device the driver publishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DraDevice {
    /// Its name in the pool (a DNS label).
    pub name: String,
    /// The device plugin resource it is of (`cdigen.io/vf`).
    pub resource: String,
    /// The generator that offers it.
    pub generator: String,
    /// The CDI kind of that generator (`cdigen.io/vf`).
    pub kind: String,
    /// Whether several claims may hold it at once (a pool with
    /// `device_plugin.replicas` above 1).
    pub shared: bool,
    /// How many claims may hold it at once: the pool's
    /// `device_plugin.replicas` (1 for a device that is not shared).
    pub shares: u32,
    /// The device plugin's entry: CDI name, health, placement, device.
    pub entry: Entry,
}

/// The devices of `inv`, in resource then ID order, each once: a shared
/// resource's units (`<id>-0`, `<id>-1`, ...) are one DRA device that
/// allows several allocations.
pub fn devices(inv: &Inventory) -> Vec<DraDevice> {
    let mut out = Vec::new();
    for (resource, r) in &inv.resources {
        let shared = r.def.replicas > 1;
        for e in r.devices.values() {
            let mut entry = e.clone();
            if shared {
                // Unit 0 stands for the device; the others are the same.
                match e.id.rsplit_once('-') {
                    Some((id, "0")) => entry.id = id.to_string(),
                    _ => continue,
                }
            }
            out.push(DraDevice {
                name: String::new(),
                resource: resource.clone(),
                generator: r.def.generator.clone(),
                kind: r.def.kind.clone(),
                shared,
                shares: r.def.replicas.max(1),
                entry,
            });
        }
    }
    let raw: Vec<String> = out
        .iter()
        .map(|d| format!("{}-{}", d.generator, d.entry.id))
        .collect();
    let mapped: Vec<String> = raw.iter().map(|r| label(r)).collect();
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for m in &mapped {
        *count.entry(m.as_str()).or_default() += 1;
    }
    let names: Vec<String> = raw
        .iter()
        .zip(&mapped)
        .map(|(r, m)| {
            if count.get(m.as_str()).copied().unwrap_or(0) > 1 {
                hashed(m, r)
            } else {
                m.clone()
            }
        })
        .collect();
    for (d, n) in out.iter_mut().zip(names) {
        d.name = n;
    }
    out
}

/// `raw` as a DNS label: lower case, every other character `-`, runs of
/// `-` as one, none at either end; shortened with a hash of `raw` when
/// over [`MAX_LEN`]. An identity with nothing left becomes `device-<hash>`.
pub fn label(raw: &str) -> String {
    let mut s = String::with_capacity(raw.len());
    for c in raw.chars() {
        let c = c.to_ascii_lowercase();
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() {
            c
        } else {
            '-'
        };
        if c == '-' && (s.is_empty() || s.ends_with('-')) {
            continue;
        }
        s.push(c);
    }
    while s.ends_with('-') {
        s.pop();
    }
    if s.is_empty() {
        return hashed("device", raw);
    }
    if s.len() > MAX_LEN {
        return hashed(&s, raw);
    }
    s
}

/// `base` cut to leave room for `-<hash of raw>`, within [`MAX_LEN`].
fn hashed(base: &str, raw: &str) -> String {
    let digest = Sha256::digest(raw.as_bytes());
    let hex: String = digest
        .iter()
        .take(HASH_LEN / 2)
        .map(|b| format!("{b:02x}"))
        .collect();
    let keep = MAX_LEN - HASH_LEN - 1;
    // ASCII only here: byte and char positions agree.
    let head = base.get(..keep.min(base.len())).unwrap_or(base);
    format!("{}-{hex}", head.trim_end_matches('-'))
}

/// Whether `s` is a DNS label as the API checks device names.
pub fn is_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_LEN
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ids_become_labels() {
        assert_eq!(label("sriov-0000:3b:00.2"), "sriov-0000-3b-00-2");
        assert_eq!(
            label("nvidia-GPU-6f1d3c2a-8b4e-4a7f-9c21-0d5e7b3a9f10-mig-1-0"),
            "nvidia-gpu-6f1d3c2a-8b4e-4a7f-9c21-0d5e7b3a9f10-mig-1-0"
        );
        assert_eq!(
            label("usb-serial-usb-FTDI_FT232R__A10K"),
            "usb-serial-usb-ftdi-ft232r-a10k"
        );
        assert_eq!(label("--"), hashed("device", "--"));
        let long = label(&"x".repeat(100));
        assert_eq!(long.len(), MAX_LEN);
        assert!(is_label(&long), "{long}");
        assert_ne!(label(&"x".repeat(100)), label(&"x".repeat(101)));
    }

    proptest! {
        #[test]
        fn every_label_is_a_dns_label(raw in ".{0,200}") {
            let l = label(&raw);
            prop_assert!(is_label(&l), "{raw:?} -> {l:?}");
        }
    }
}

//! Device plugin IDs: what the kubelet calls a device, stable across
//! reboots and re-plugs.
//!
//! The kubelet checkpoints the IDs it gave each container and, after a node
//! reboot, re-admits pods with them: an ID that changed (a kernel name
//! handed out in probe order, an index that shifted) strands the pod. So an
//! ID comes from the most stable identity the device has:
//!
//! 1. an NVIDIA GPU's UUID; a MIG device's parent UUID with its GPU and
//!    compute instance (`GPU-…-mig-1-0`: MIG UUIDs change whenever the
//!    instances are re-created, placements do not);
//! 2. the PCI address; for a part of a PCI device that is no MIG device
//!    (an AMD compute partition, `0000:05:00.0/xcp1`), the address and
//!    the part (`0000:05:00.0-xcp1`: its partitions share the address);
//! 3. a `/dev/…/by-id/` link (USB serial numbers), then a serial attribute;
//! 4. the identity discovery gave it (`vdpa0`, `tty-ttyS0`), kernel names
//!    last.
//!
//! IDs are at most [`MAX_LEN`] characters of `A-Z a-z 0-9 . _ : -` (what
//! device-info file names and logs take without escaping); a longer one
//! keeps its start and ends in a hash of the whole, so it stays unique and
//! stable.

use sha2::{Digest as _, Sha256};

use crate::model::Device;

/// The kubelet's limit on a device ID.
pub const MAX_LEN: usize = 63;

/// Hex digits of the hash that ends a shortened ID.
const HASH_LEN: usize = 12;

/// The device's ID.
pub fn device_id(d: &Device) -> String {
    clean(&raw_id(d))
}

/// The identity an ID is made from, before cleaning and shortening.
fn raw_id(d: &Device) -> String {
    if let Some(n) = &d.nvidia {
        return match &n.mig {
            Some(m) => format!("{}-mig-{}-{}", n.gpu_uuid, m.gi, m.ci),
            None => n.gpu_uuid.clone(),
        };
    }
    if let Some(p) = &d.pci {
        if let Some(part) =
            d.id.strip_prefix(p.address.as_str())
                .and_then(|rest| rest.strip_prefix('/'))
        {
            return format!("{}-{}", p.address, part.replace('/', "-"));
        }
        return p.address.clone();
    }
    let by_id = d
        .links
        .iter()
        .filter(|l| l.path.contains("/by-id/"))
        .filter_map(|l| l.path.rsplit('/').next())
        .filter(|s| !s.is_empty())
        .min();
    if let Some(link) = by_id {
        return link.to_string();
    }
    if let Some(serial) = d.attrs.get("serial").filter(|s| !s.is_empty()) {
        return format!("serial-{serial}");
    }
    // `tty:ttyS0` → `tty-ttyS0`: the subsystem keeps two kinds apart.
    d.id.replace(['/', ':'], "-")
}

/// `s` with every character outside `A-Z a-z 0-9 . _ : -` made `_`, and
/// shortened to [`MAX_LEN`] with a hash of the original when longer. An
/// empty identity becomes `device`.
pub fn clean(s: &str) -> String {
    let mapped: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if mapped.is_empty() {
        return "device".into();
    }
    if mapped.len() <= MAX_LEN {
        // Replaced characters may make two identities read alike: the
        // inventory refuses such a collision.
        return mapped;
    }
    let digest = Sha256::digest(s.as_bytes());
    let hex: String = digest
        .iter()
        .take(HASH_LEN / 2)
        .map(|b| format!("{b:02x}"))
        .collect();
    // Everything is ASCII here, so byte and char positions agree.
    let keep = MAX_LEN - HASH_LEN - 1;
    format!("{}-{hex}", mapped.get(..keep).unwrap_or(&mapped))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;
    use crate::model::{Link, MigInfo, NvidiaInfo, test_pci};

    #[test]
    fn ids_come_from_the_most_stable_identity() {
        let vf = Device {
            id: "0000:3b:00.2".into(),
            pci: Some(test_pci("0000:3b:00.2")),
            ..Default::default()
        };
        assert_eq!(device_id(&vf), "0000:3b:00.2");
        let gpu_uuid = "GPU-4a6a7a6c-5b1f-6d5a-9c3b-0e1f2a3b4c5d";
        let gpu = Device {
            id: "0000:41:00.0".into(),
            pci: Some(test_pci("0000:41:00.0")),
            nvidia: Some(NvidiaInfo {
                gpu_uuid: gpu_uuid.into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(device_id(&gpu), gpu_uuid);
        let mig = Device {
            id: "0000:41:00.0/gi2/ci0".into(),
            nvidia: Some(NvidiaInfo {
                gpu_uuid: gpu_uuid.into(),
                mig: Some(MigInfo {
                    parent: "0000:41:00.0".into(),
                    gi: 2,
                    ci: 0,
                    uuid: Some("MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee".into()),
                    profile: None,
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        // The placement, not the MIG UUID (which changes when the
        // instances are re-created).
        assert_eq!(device_id(&mig), format!("{gpu_uuid}-mig-2-0"));
        assert!(device_id(&mig).len() <= MAX_LEN);
        // An AMD compute partition: its GPU's address and its own part.
        let partition = Device {
            id: "0000:05:00.0/xcp3".into(),
            pci: Some(test_pci("0000:05:00.0")),
            ..Default::default()
        };
        assert_eq!(device_id(&partition), "0000:05:00.0-xcp3");
        let serial = Device {
            id: "tty:ttyUSB0".into(),
            links: vec![
                Link {
                    path: "/dev/serial/by-path/pci-0000:00:14.0-usb-0:2:1.0-port0".into(),
                    target: "../../ttyUSB0".into(),
                    node: "/dev/ttyUSB0".into(),
                },
                Link {
                    path: "/dev/serial/by-id/usb-FTDI_FT232R_USB_UART_A10K5PQR-if00-port0".into(),
                    target: "../../ttyUSB0".into(),
                    node: "/dev/ttyUSB0".into(),
                },
            ],
            ..Default::default()
        };
        assert_eq!(
            device_id(&serial),
            "usb-FTDI_FT232R_USB_UART_A10K5PQR-if00-port0"
        );
        let tty = Device {
            id: "tty:ttyS0".into(),
            ..Default::default()
        };
        assert_eq!(device_id(&tty), "tty-ttyS0");
        let vdpa = Device {
            id: "vdpa0".into(),
            ..Default::default()
        };
        assert_eq!(device_id(&vdpa), "vdpa0");
    }

    #[test]
    fn long_or_odd_identities_are_cleaned_and_shortened_stably() {
        assert_eq!(clean("a b/c"), "a_b_c");
        assert_eq!(clean(""), "device");
        let long = "usb-Very_Long_Vendor_Name_Incorporated_Some_Product_With_A_Long_Name_0123456789-if00-port0";
        let id = clean(long);
        assert_eq!(id.len(), MAX_LEN);
        assert!(id.starts_with("usb-Very_Long_Vendor_Name_Incorporated_Some_Prod"));
        assert_eq!(id, clean(long), "stable");
        let other = long.replace("0123", "0124");
        assert_ne!(clean(&other), id, "the hash keeps long IDs apart");
    }

    proptest::proptest! {
        #[test]
        fn every_id_is_short_and_plain(s in "\\PC{0,200}") {
            let id = clean(&s);
            proptest::prop_assert!(!id.is_empty() && id.len() <= MAX_LEN);
            proptest::prop_assert!(id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')));
        }
    }
}

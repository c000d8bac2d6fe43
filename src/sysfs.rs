//! Pure parsers for sysfs and procfs value formats. No I/O here: the
//! [`crate::root`] reads, these functions interpret.

use std::fmt;
use std::str::FromStr;

/// Parses a `0x`-prefixed hex ID as sysfs writes it (`"0x1002"`), at most
/// `max_digits` hex digits.
pub fn parse_hex_id(s: &str, max_digits: usize) -> Option<u32> {
    let digits = s.trim().strip_prefix("0x")?;
    if digits.is_empty()
        || digits.len() > max_digits
        || !digits.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return None;
    }
    u32::from_str_radix(digits, 16).ok()
}

/// Parses a `numa_node` value: a node number, or `None` for `-1` (no affinity).
pub fn parse_numa_node(s: &str) -> Option<Option<u32>> {
    let t = s.trim();
    if t == "-1" {
        return Some(None);
    }
    if t.is_empty() || t.len() > 5 || !t.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse().ok().map(Some)
}

/// A PCI address, `domain:bus:device.function` (`0000:03:00.0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PciAddress {
    /// PCI domain (segment).
    pub domain: u32,
    /// Bus number.
    pub bus: u8,
    /// Device (slot) number, 0..=31.
    pub device: u8,
    /// Function number, 0..=7.
    pub function: u8,
}

/// A string that is not a PCI address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a PCI address (expected DDDD:BB:DD.F)")]
pub struct BadPciAddress(pub String);

impl FromStr for PciAddress {
    type Err = BadPciAddress;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadPciAddress(s.to_string());
        let (domain, rest) = s.split_once(':').ok_or_else(bad)?;
        let (bus, rest) = rest.split_once(':').ok_or_else(bad)?;
        let (device, function) = rest.split_once('.').ok_or_else(bad)?;
        let hex = |x: &str, len: usize| -> Result<u32, BadPciAddress> {
            if x.len() != len || !x.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(bad());
            }
            u32::from_str_radix(x, 16).map_err(|_| bad())
        };
        // The kernel prints the domain with %04x: VMD domains have 5 digits.
        if !(4..=8).contains(&domain.len()) {
            return Err(bad());
        }
        let domain = hex(domain, domain.len())?;
        let bus = u8::try_from(hex(bus, 2)?).map_err(|_| bad())?;
        let device = u8::try_from(hex(device, 2)?).map_err(|_| bad())?;
        let function = u8::try_from(hex(function, 1)?).map_err(|_| bad())?;
        if device > 31 || function > 7 {
            return Err(bad());
        }
        Ok(PciAddress {
            domain,
            bus,
            device,
            function,
        })
    }
}

impl fmt::Display for PciAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

/// Parses `KEY=value` lines of a `uevent` file; lines without `=` are ignored.
pub fn parse_uevent(s: &str) -> Vec<(&str, &str)> {
    s.lines().filter_map(|l| l.split_once('=')).collect()
}

/// The number at the end of a DRM/accel node name: `card1` → 1,
/// `renderD128` → 128. `None` unless the name is exactly prefix + digits.
pub fn node_number(name: &str, prefix: &str) -> Option<u32> {
    let digits = name.strip_prefix(prefix)?;
    if digits.is_empty() || digits.len() > 7 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn hex_ids() {
        assert_eq!(parse_hex_id("0x1002", 4), Some(0x1002));
        assert_eq!(parse_hex_id("0x030000", 6), Some(0x030000));
        assert_eq!(parse_hex_id("0x744C", 4), Some(0x744c));
        assert_eq!(parse_hex_id("1002", 4), None);
        assert_eq!(parse_hex_id("0x", 4), None);
        assert_eq!(parse_hex_id("0x10020", 4), None);
        assert_eq!(parse_hex_id("0xzz", 4), None);
        assert_eq!(parse_hex_id("0x+1", 4), None);
    }

    #[test]
    fn numa_nodes() {
        assert_eq!(parse_numa_node("0"), Some(Some(0)));
        assert_eq!(parse_numa_node("1\n"), Some(Some(1)));
        assert_eq!(parse_numa_node("-1"), Some(None));
        assert_eq!(parse_numa_node("-2"), None);
        assert_eq!(parse_numa_node(""), None);
        assert_eq!(parse_numa_node("x"), None);
    }

    #[test]
    fn pci_addresses() {
        let a: PciAddress = "0000:03:00.0".parse().expect("valid");
        assert_eq!(a.to_string(), "0000:03:00.0");
        assert_eq!(a.bus, 3);
        let vmd: PciAddress = "10000:e1:1f.7".parse().expect("VMD domain");
        assert_eq!(vmd.to_string(), "10000:e1:1f.7");
        for bad in [
            "",
            "0000:03:00",
            "0000:03:20.0",
            "0000:03:00.8",
            "0000:3:00.0",
            "x000:03:00.0",
            "0000:03:00.0\n",
            "000:03:00.0",
            "000000000:03:00.0",
        ] {
            assert_eq!(
                bad.parse::<PciAddress>().map_err(|e| e.to_string()),
                Err(format!(
                    "{bad:?} is not a PCI address (expected DDDD:BB:DD.F)"
                ))
            );
        }
        assert!("0000:03:1f.7".parse::<PciAddress>().is_ok());
    }

    #[test]
    fn node_numbers() {
        assert_eq!(node_number("card1", "card"), Some(1));
        assert_eq!(node_number("renderD128", "renderD"), Some(128));
        assert_eq!(node_number("card300", "card"), Some(300));
        assert_eq!(node_number("card1-DP-1", "card"), None);
        assert_eq!(node_number("card", "card"), None);
        assert_eq!(node_number("controlD64", "card"), None);
        assert_eq!(node_number("card+1", "card"), None);
    }

    #[test]
    fn uevent_lines() {
        let u = "MAJOR=226\nMINOR=1\nDEVNAME=dri/card1\nDEVTYPE=drm_minor\nnoise\n";
        assert_eq!(
            parse_uevent(u),
            [
                ("MAJOR", "226"),
                ("MINOR", "1"),
                ("DEVNAME", "dri/card1"),
                ("DEVTYPE", "drm_minor")
            ]
        );
    }

    proptest! {
        #[test]
        fn parsers_never_panic(s in "\\PC{0,40}") {
            let _ = parse_hex_id(&s, 4);
            let _ = parse_numa_node(&s);
            let _ = s.parse::<PciAddress>();
            let _ = parse_uevent(&s);
            let _ = node_number(&s, "card");
            let _ = crate::root::parse_majmin(&s);
        }

        #[test]
        fn pci_address_round_trips(d in 0u32..=0xffff, b: u8, dev in 0u8..32, f in 0u8..8) {
            let a = PciAddress { domain: d, bus: b, device: dev, function: f };
            prop_assert_eq!(a.to_string().parse::<PciAddress>(), Ok(a));
        }

        #[test]
        fn majmin_round_trips(a: u32, b: u32) {
            prop_assert_eq!(crate::root::parse_majmin(&format!("{a}:{b}\n")), Some((a, b)));
        }
    }
}

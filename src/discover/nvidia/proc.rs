//! Pure parsers for the NVIDIA driver's procfs files (no I/O).
//!
//! - `/proc/driver/nvidia/gpus/<BDF>/information`: `Key: \t value` lines;
//!   keys contain spaces, so each line splits at its first `:`.
//! - `/proc/driver/nvidia/version`: `NVRM version: <free text>`; the
//!   version is the first dotted number in it (`580.159.04`).
//! - `/proc/devices`: the `Character devices:` section only (the same
//!   name may also be a block device); one major may carry several names
//!   (`195 nvidia`, `195 nvidiactl`).
//! - capability files (`.../capabilities/**/access`, `mig/config`):
//!   `DeviceFileMinor: 12` lines; `DeviceFileMode` is decimal (292 = 0444).

use std::collections::BTreeMap;

/// What a GPU's `information` file says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Information {
    /// `Model`, e.g. `NVIDIA H100 80GB HBM3`.
    pub model: String,
    /// `GPU UUID`, e.g. `GPU-af3e0279-...`.
    pub uuid: String,
    /// `Bus Location`, `0000:00:06.0`.
    pub bus_location: String,
    /// `Device Minor`: N of `/dev/nvidiaN` and of `capabilities/gpuN`.
    pub minor: u32,
    /// `GPU Excluded: Yes` (excluded by `NVreg_ExcludedGpus`).
    pub excluded: bool,
    /// `GPU Firmware`, present with GSP firmware.
    pub firmware: Option<String>,
}

/// Why an `information` file cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InformationError {
    /// A required key is missing.
    #[error("no {0:?} line")]
    Missing(&'static str),
    /// A value is malformed.
    #[error("{key:?} is {value:?}, expected {expected}")]
    Bad {
        /// The key.
        key: &'static str,
        /// The value found.
        value: String,
        /// What was expected.
        expected: &'static str,
    },
}

/// Parses `Key: value` lines into a map (first `:` splits; both sides
/// trimmed; later duplicates ignored).
pub fn parse_key_values(text: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for line in text.lines() {
        if let Some((k, v)) = line.split_once(':') {
            map.entry(k.trim().to_string())
                .or_insert_with(|| v.trim().to_string());
        }
    }
    map
}

/// Parses a GPU's `information` file.
///
/// # Errors
/// [`InformationError`] for a missing UUID, bus location or minor, or a
/// malformed one.
pub fn parse_information(text: &str) -> Result<Information, InformationError> {
    let map = parse_key_values(text);
    let get = |k: &'static str| map.get(k).cloned().ok_or(InformationError::Missing(k));
    let uuid = get("GPU UUID")?;
    if !uuid.starts_with("GPU-")
        || uuid.len() > 64
        || !uuid.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    {
        return Err(InformationError::Bad {
            key: "GPU UUID",
            value: uuid,
            expected: "GPU-<hex and dashes>",
        });
    }
    let bus_location = get("Bus Location")?;
    if bus_location
        .parse::<crate::sysfs::PciAddress>()
        .map(|a| a.to_string())
        .as_deref()
        != Ok(bus_location.as_str())
    {
        return Err(InformationError::Bad {
            key: "Bus Location",
            value: bus_location,
            expected: "a PCI address like 0000:41:00.0",
        });
    }
    let minor_text = get("Device Minor")?;
    let minor =
        minor_text
            .parse::<u32>()
            .ok()
            .filter(|m| *m < 255)
            .ok_or(InformationError::Bad {
                key: "Device Minor",
                value: minor_text,
                expected: "a number from 0 to 254",
            })?;
    Ok(Information {
        model: map.get("Model").cloned().unwrap_or_default(),
        uuid,
        bus_location,
        minor,
        excluded: map.get("GPU Excluded").is_some_and(|v| v == "Yes"),
        firmware: map.get("GPU Firmware").cloned().filter(|f| !f.is_empty()),
    })
}

/// The driver version in `/proc/driver/nvidia/version`: the first
/// whitespace-separated token of the `NVRM version:` line that is a dotted
/// number (`570.86.15`).
pub fn parse_driver_version(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.starts_with("NVRM version:"))?;
    line.split_whitespace()
        .find(|t| {
            let parts: Vec<&str> = t.split('.').collect();
            parts.len() >= 2
                && parts
                    .iter()
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(str::to_string)
}

/// Character-device majors by name, from `/proc/devices`.
pub fn parse_char_majors(text: &str) -> BTreeMap<String, u32> {
    let mut out = BTreeMap::new();
    let mut in_char = false;
    for line in text.lines() {
        let t = line.trim();
        if t.ends_with("devices:") {
            in_char = t == "Character devices:";
            continue;
        }
        if !in_char {
            continue;
        }
        let Some((num, name)) = t.split_once(char::is_whitespace) else {
            continue;
        };
        if let Ok(major) = num.parse::<u32>() {
            out.entry(name.trim().to_string()).or_insert(major);
        }
    }
    out
}

/// The major of `/dev/nvidiaN`: registered as `nvidia` since driver 550.40
/// and as `nvidia-frontend` before.
pub fn nvidia_major(majors: &BTreeMap<String, u32>) -> Option<u32> {
    majors
        .get("nvidia")
        .or_else(|| majors.get("nvidia-frontend"))
        .copied()
}

/// A capability file: its device minor and mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capability {
    /// `DeviceFileMinor`: N of `/dev/nvidia-caps/nvidia-capN`.
    pub minor: u32,
    /// `DeviceFileMode`, as permission bits.
    pub mode: Option<u32>,
}

/// Parses a capability file; `None` without a numeric `DeviceFileMinor`.
pub fn parse_capability(text: &str) -> Option<Capability> {
    let map = parse_key_values(text);
    let minor = map.get("DeviceFileMinor")?.parse().ok()?;
    let mode = map
        .get("DeviceFileMode")
        .and_then(|m| m.parse::<u32>().ok())
        .filter(|m| *m <= 0o7777);
    Some(Capability { minor, mode })
}

/// The static `nvidia-caps` minor of a MIG GPU instance (`gi`) or, with
/// `ci`, compute instance: `3 + 135*gpu + 9*gi (+ 1 + ci)`. Used to
/// cross-check the `access` files.
pub fn mig_minor(gpu: u32, gi: u32, ci: Option<u32>) -> u32 {
    3 + 135 * gpu + 9 * gi + ci.map_or(0, |c| 1 + c)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Read off a real H100 host (driver 580.159.04, open kernel module).
    const H100_INFORMATION: &str = "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 41\nGPU UUID: \t GPU-af3e0279-1df1-2cad-1e37-2509bedadba2\nVideo BIOS: \t 96.00.da.00.0c\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\nBus Location: \t 0000:00:06.0\nDevice Minor: \t 0\nGPU Firmware: \t 580.159.04\nGPU Excluded:\t No\n";

    #[test]
    fn information_of_a_real_h100() {
        assert_eq!(
            parse_information(H100_INFORMATION),
            Ok(Information {
                model: "NVIDIA H100 80GB HBM3".into(),
                uuid: "GPU-af3e0279-1df1-2cad-1e37-2509bedadba2".into(),
                bus_location: "0000:00:06.0".into(),
                minor: 0,
                excluded: false,
                firmware: Some("580.159.04".into()),
            })
        );
    }

    #[test]
    fn information_errors() {
        let without = |key: &str| {
            H100_INFORMATION
                .lines()
                .filter(|l| !l.starts_with(key))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let err = |t: &str| parse_information(t).map_err(|e| e.to_string());
        assert_eq!(
            err(&without("GPU UUID")),
            Err("no \"GPU UUID\" line".into())
        );
        assert_eq!(
            err(&without("Bus Location")),
            Err("no \"Bus Location\" line".into())
        );
        assert_eq!(
            err(&without("Device Minor")),
            Err("no \"Device Minor\" line".into())
        );
        assert_eq!(
            err(&H100_INFORMATION.replace("0000:00:06.0", "00000000:00:06.0")),
            Err("\"Bus Location\" is \"00000000:00:06.0\", expected a PCI address like 0000:41:00.0".into())
        );
        assert_eq!(
            err(&H100_INFORMATION.replace("Device Minor: \t 0", "Device Minor: \t 255")),
            Err("\"Device Minor\" is \"255\", expected a number from 0 to 254".into())
        );
        assert_eq!(
            err(&H100_INFORMATION.replace("GPU-af3e", "GPU-\"a,f3e")),
            Err("\"GPU UUID\" is \"GPU-\\\"a,f3e0279-1df1-2cad-1e37-2509bedadba2\", expected GPU-<hex and dashes>".into())
        );
        assert!(
            parse_information(&H100_INFORMATION.replace("Excluded:\t No", "Excluded:\t Yes"))
                .is_ok_and(|i| i.excluded)
        );
    }

    #[test]
    fn driver_versions() {
        let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)  \nGCC version:  gcc version 15.3.0 (GCC) \n";
        assert_eq!(parse_driver_version(open).as_deref(), Some("580.159.04"));
        let proprietary = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024\n";
        assert_eq!(
            parse_driver_version(proprietary).as_deref(),
            Some("535.183.01")
        );
        assert_eq!(parse_driver_version("GCC version: 12.3.0\n"), None);
        assert_eq!(parse_driver_version(""), None);
    }

    #[test]
    fn proc_devices_by_section() {
        // Read off the same H100 host: 195 carries two names there.
        let text = "Character devices:\n  1 mem\n 10 misc\n195 nvidia\n195 nvidiactl\n238 nvidia-uvm\n239 nvidia-nvswitch\n241 nvidia-caps\n242 nvidia-caps-imex-channels\n\nBlock devices:\n  7 loop\n259 nvidia-uvm\n";
        let m = parse_char_majors(text);
        assert_eq!(m.get("nvidia"), Some(&195));
        assert_eq!(m.get("nvidiactl"), Some(&195));
        assert_eq!(m.get("nvidia-uvm"), Some(&238), "block section ignored");
        assert_eq!(m.get("nvidia-caps"), Some(&241));
        assert_eq!(m.get("loop"), None);
        assert_eq!(nvidia_major(&m), Some(195));
        let old = parse_char_majors("Character devices:\n195 nvidia-frontend\n511 nvidia-uvm\n");
        assert_eq!(nvidia_major(&old), Some(195));
        assert_eq!(
            nvidia_major(&parse_char_majors("Character devices:\n  1 mem\n")),
            None
        );
    }

    #[test]
    fn capabilities_and_mig_minors() {
        assert_eq!(
            parse_capability("DeviceFileMinor: 12\nDeviceFileMode: 292\nDeviceFileModify: 1\n"),
            Some(Capability {
                minor: 12,
                mode: Some(0o444)
            })
        );
        assert_eq!(
            parse_capability("DeviceFileMinor: 4323\nDeviceFileMode: 99999\n"),
            Some(Capability {
                minor: 4323,
                mode: None
            })
        );
        assert_eq!(parse_capability("DeviceFileMode: 292\n"), None);
        assert_eq!(parse_capability("DeviceFileMinor: x\n"), None);
        assert_eq!(mig_minor(0, 1, None), 12);
        assert_eq!(mig_minor(0, 1, Some(0)), 13);
        assert_eq!(mig_minor(0, 2, None), 21);
        assert_eq!(mig_minor(0, 2, Some(0)), 22);
        assert_eq!(mig_minor(31, 14, Some(7)), 4322);
    }

    proptest::proptest! {
        #[test]
        fn parsers_never_panic(s in "\\PC{0,300}") {
            let _ = parse_information(&s);
            let _ = parse_driver_version(&s);
            let _ = parse_char_majors(&s);
            let _ = parse_capability(&s);
        }
    }
}

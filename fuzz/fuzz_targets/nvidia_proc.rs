//! The NVIDIA driver's procfs files (`cdigen::discover::nvidia::proc`):
//! a GPU's `information`, the MIG capability files (`access`,
//! `mig/config`) and `version`. Every input goes to all three parsers.
//!
//! Asserts: a parsed `information` has the shape the parser promises (a
//! `GPU-` UUID, a canonical PCI address, minor below 255) and, written back
//! as the driver writes it, parses to the same value; likewise a
//! capability (mode within 0o7777); a driver version is a dotted number
//! found again in a `version` line.
#![no_main]

use std::fmt::Write as _;

use cdigen::discover::nvidia::proc;
use cdigen::sysfs::PciAddress;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);

    match proc::parse_information(&text) {
        Ok(info) => {
            assert!(
                info.uuid.starts_with("GPU-") && info.uuid.len() <= 64,
                "{info:?}"
            );
            assert!(info.minor < 255, "{info:?}");
            let addr: PciAddress = info.bus_location.parse().expect("bus location parses");
            assert_eq!(addr.to_string(), info.bus_location);
            let mut written = format!(
                "Model: \t\t {}\nGPU UUID: \t {}\nBus Location: \t {}\nDevice Minor: \t {}\nGPU Excluded:\t {}\n",
                info.model,
                info.uuid,
                info.bus_location,
                info.minor,
                if info.excluded { "Yes" } else { "No" }
            );
            if let Some(f) = &info.firmware {
                let _ = writeln!(written, "GPU Firmware: \t {f}");
            }
            assert_eq!(proc::parse_information(&written), Ok(info));
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }

    if let Some(cap) = proc::parse_capability(&text) {
        let mut written = format!("DeviceFileMinor: {}\n", cap.minor);
        if let Some(mode) = cap.mode {
            assert!(mode <= 0o7777, "{cap:?}");
            let _ = writeln!(written, "DeviceFileMode: {mode}");
        }
        assert_eq!(proc::parse_capability(&written), Some(cap));
    }

    if let Some(version) = proc::parse_driver_version(&text) {
        assert!(
            version.split('.').count() >= 2
                && version
                    .split('.')
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())),
            "{version:?}"
        );
        let line = format!(
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {version}  Release Build\n"
        );
        assert_eq!(proc::parse_driver_version(&line), Some(version));
    }
});

//! A simulated kernel for PCI driver binding over a fixture root: what the
//! kernel does when `driver_override`, `bind`, `unbind` and
//! `drivers_probe` are written (Documentation/ABI/testing/sysfs-bus-pci;
//! `drivers/base/bus.c`, `drivers/pci/pci-sysfs.c`), reproduced on the
//! fixture's files after cdigen's real write through `HostRoot`:
//!
//! - `devices/<a>/driver_override`: a value (its newline stripped) is the
//!   only driver that may bind the function; an empty one clears it (reads
//!   `(null)`).
//! - `drivers/<d>/unbind`: the function bound to `<d>` loses its `driver`
//!   link; one that is not bound to `<d>`: `ENODEV`.
//! - `drivers/<d>/bind`: `ENODEV` when the function does not exist or `<d>`
//!   does not match it (its override names another driver, or `<d>` is not
//!   the driver whose ID table has it); `EBUSY` when it is bound.
//! - `drivers_probe`: `ENODEV` for no such function; a bound one is left
//!   as it is; otherwise the override, or without one the function's own
//!   driver, binds it when that driver is there.
//! - A function bound to `vfio-pci` gets its group's node: the
//!   `class/vfio/<group>/dev` entry and `/dev/vfio/<group>` in the devfs
//!   manifest; both go when the last function of the group leaves it.
//!
//! Booting adds the write-only attributes a real sysfs has (`bind`,
//! `unbind` in every driver, `drivers_probe`) and learns each function's
//! own driver from the `driver` links of the fixture.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use cdigen::dra::passthrough::PciWriter;
use cdigen::root::{self, HostRoot};

/// The major of the VFIO group nodes (as the example fixture has it).
const VFIO_MAJOR: u32 = 242;

/// The kernel of one fixture root.
#[derive(Debug)]
pub struct FakeKernel {
    base: PathBuf,
    /// Each function's own driver (the one whose ID table matches it).
    native: BTreeMap<String, String>,
    /// Every write, `(attribute, value)`, in order.
    pub writes: Mutex<Vec<(String, String)>>,
    /// When set, the write to this attribute is the last thing cdigen
    /// does: the kernel reacts, then the writing thread panics, so that
    /// nothing after it (no undo) runs, as if the process had died there.
    pub crash_after: Mutex<Option<String>>,
}

fn errno(e: rustix::io::Errno) -> io::Error {
    io::Error::from_raw_os_error(e.raw_os_error())
}

impl FakeKernel {
    /// Boots over the fixture root `base`.
    pub fn boot(base: &Path) -> FakeKernel {
        let bus = base.join("sys/bus/pci");
        fs::write(bus.join("drivers_probe"), "").unwrap();
        for d in fs::read_dir(bus.join("drivers")).unwrap() {
            let d = d.unwrap().path();
            fs::write(d.join("bind"), "").unwrap();
            fs::write(d.join("unbind"), "").unwrap();
        }
        let mut native = BTreeMap::new();
        for f in fs::read_dir(bus.join("devices")).unwrap() {
            let f = f.unwrap();
            let name = f.file_name().to_string_lossy().into_owned();
            let dir = f.path();
            if let Ok(t) = fs::read_link(dir.join("driver")) {
                native.insert(name, t.file_name().unwrap().to_string_lossy().into_owned());
            }
            let o = dir.join("driver_override");
            if !o.exists() {
                fs::write(&o, "(null)\n").unwrap();
            }
        }
        FakeKernel {
            base: base.to_path_buf(),
            native,
            writes: Mutex::new(Vec::new()),
            crash_after: Mutex::new(None),
        }
    }

    fn dev(&self, a: &str) -> PathBuf {
        self.base.join("sys/bus/pci/devices").join(a)
    }

    /// The driver `a` is bound to.
    pub fn driver(&self, a: &str) -> Option<String> {
        fs::read_link(self.dev(a).join("driver"))
            .ok()
            .map(|t| t.file_name().unwrap().to_string_lossy().into_owned())
    }

    /// What `a`'s `driver_override` reads.
    pub fn override_of(&self, a: &str) -> String {
        fs::read_to_string(self.dev(a).join("driver_override")).unwrap()
    }

    /// Binds `a` to `d` as the kernel would (for a test's setup).
    pub fn bind_now(&self, a: &str, d: &str) {
        self.attach(a, d).unwrap();
    }

    /// Unbinds `a` (for a test's setup).
    pub fn unbind_now(&self, a: &str) {
        self.detach(a).unwrap();
    }

    fn set_override(&self, a: &str) -> Option<String> {
        let t = fs::read_to_string(self.dev(a).join("driver_override")).ok()?;
        let t = t.trim_end_matches('\n');
        (t != "(null)" && !t.is_empty()).then(|| t.to_string())
    }

    fn matches(&self, a: &str, d: &str) -> bool {
        match self.set_override(a) {
            Some(o) => o == d,
            None => self.native.get(a).is_some_and(|n| n == d),
        }
    }

    fn group(&self, a: &str) -> Option<String> {
        fs::read_link(self.dev(a).join("iommu_group"))
            .ok()
            .map(|t| t.file_name().unwrap().to_string_lossy().into_owned())
    }

    fn attach(&self, a: &str, d: &str) -> io::Result<()> {
        let real = fs::canonicalize(self.dev(a))?;
        let depth = real
            .strip_prefix(self.base.join("sys"))
            .unwrap()
            .components()
            .count();
        let target = format!("{}bus/pci/drivers/{d}", "../".repeat(depth));
        std::os::unix::fs::symlink(target, real.join("driver"))?;
        if d == "vfio-pci"
            && let Some(g) = self.group(a)
        {
            let class = self.base.join("sys/class/vfio").join(&g);
            if !class.exists() {
                let minor = 100 + g.parse::<u32>().unwrap_or(0);
                fs::create_dir_all(&class)?;
                fs::write(class.join("dev"), format!("{VFIO_MAJOR}:{minor}\n"))?;
                let mut m = fs::read_to_string(self.base.join(root::DEV_MANIFEST))?;
                m.push_str(&format!("/dev/vfio/{g} c {VFIO_MAJOR}:{minor} 0600 0 0\n"));
                fs::write(self.base.join(root::DEV_MANIFEST), m)?;
            }
        }
        Ok(())
    }

    fn detach(&self, a: &str) -> io::Result<()> {
        let was = self.driver(a);
        fs::remove_file(self.dev(a).join("driver"))?;
        if was.as_deref() == Some("vfio-pci")
            && let Some(g) = self.group(a)
        {
            let members = fs::read_dir(
                self.base
                    .join("sys/kernel/iommu_groups")
                    .join(&g)
                    .join("devices"),
            )?;
            let still = members.filter_map(Result::ok).any(|m| {
                self.driver(&m.file_name().to_string_lossy()).as_deref() == Some("vfio-pci")
            });
            if !still {
                let _ = fs::remove_dir_all(self.base.join("sys/class/vfio").join(&g));
                let m = fs::read_to_string(self.base.join(root::DEV_MANIFEST))?;
                let node = format!("/dev/vfio/{g} ");
                let kept: String = m
                    .lines()
                    .filter(|l| !l.starts_with(&node))
                    .map(|l| format!("{l}\n"))
                    .collect();
                fs::write(self.base.join(root::DEV_MANIFEST), kept)?;
            }
        }
        Ok(())
    }

    /// The kernel's reaction to `value` written to `attr`.
    fn react(&self, attr: &Path, value: &str) -> io::Result<()> {
        use rustix::io::Errno;
        let rel = attr.strip_prefix("/sys/bus/pci").unwrap();
        let parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let a = value.trim_end_matches('\n');
        let disk = self.base.join(attr.strip_prefix("/").unwrap());
        match parts
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice()
        {
            ["devices", dev, "driver_override"] => {
                let shown = if a.is_empty() {
                    "(null)".to_string()
                } else {
                    a.to_string()
                };
                fs::write(self.dev(dev).join("driver_override"), format!("{shown}\n"))
            }
            ["drivers", d, "unbind"] => {
                fs::write(&disk, "")?;
                if !self.dev(a).exists() || self.driver(a).as_deref() != Some(*d) {
                    return Err(errno(Errno::NODEV));
                }
                self.detach(a)
            }
            ["drivers", d, "bind"] => {
                fs::write(&disk, "")?;
                if !self.dev(a).exists() || !self.matches(a, d) {
                    return Err(errno(Errno::NODEV));
                }
                if self.driver(a).is_some() {
                    return Err(errno(Errno::BUSY));
                }
                self.attach(a, d)
            }
            ["drivers_probe"] => {
                fs::write(&disk, "")?;
                if !self.dev(a).exists() {
                    return Err(errno(Errno::NODEV));
                }
                if self.driver(a).is_some() {
                    return Ok(());
                }
                let want = self.set_override(a).or_else(|| self.native.get(a).cloned());
                match want {
                    Some(d) if self.base.join("sys/bus/pci/drivers").join(&d).is_dir() => {
                        self.attach(a, &d)
                    }
                    _ => Ok(()),
                }
            }
            other => panic!("the fake kernel has no attribute {other:?}"),
        }
    }
}

impl PciWriter for FakeKernel {
    fn write(&self, root: &HostRoot, attr: &Path, value: &str) -> Result<(), root::Error> {
        root.write_pci_attr(attr, value)?;
        self.writes
            .lock()
            .unwrap()
            .push((attr.display().to_string(), value.to_string()));
        let io_err = |cause| root::Error::Io {
            path: attr.to_path_buf(),
            disk: self.base.join(attr.strip_prefix("/").unwrap()),
            cause,
        };
        let crash = self.crash_after.lock().unwrap().clone();
        self.react(attr, value).map_err(io_err)?;
        if crash.as_deref() == Some(&attr.display().to_string()) {
            panic!("simulated crash after writing {}", attr.display());
        }
        Ok(())
    }
}

//! The NVIDIA driver's user-space files a container needs, by capability
//! (compute, utility, video, graphics, display): libraries of the running
//! driver version, utilities, GSP firmware, ICD and vendor JSON files,
//! OptiX and NGX data, Xorg modules and IPC sockets, found under the
//! driver root ([`HostRoot::driver_root`]).
//!
//! Libraries are looked up the way the host's loader would find them:
//! first in the driver root's linker cache (`etc/ld.so.cache`, read with
//! [`crate::ldcache`]), then, for those the cache does not have (or when
//! there is no cache: NixOS, driver containers), by file name in the usual
//! library directories and `--library-search-path`, their sonames read
//! from the files ([`crate::elf`]). A library of the driver's own release
//! must be the running version (`libcuda.so.550.90.07`); others (EGL
//! platform libraries) carry their own numbers.
//!
//! Each file is mounted at its path under the driver root; the links a
//! container needs to it (soname `libcuda.so.1`, development link
//! `libcuda.so`, `libGLX_indirect.so.0`, the GBM backend) are recorded
//! with it, for hooks to create or for bind mounts in the no-hook mode
//! (see `render::driver`).
//!
//! Never silent: with no `libcuda` of the running version the result
//! carries a [`Driver::problem`] saying where it looked (or which other
//! version it found), and a generator that requires the driver fails.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::discover::Report;
use crate::model::{Capability, Driver, DriverFile, FileKind, FileLink};
use crate::root::HostRoot;

/// A library of the driver.
struct Lib {
    /// File name up to `.so` (`libcuda`).
    base: &'static str,
    capability: Capability,
    /// Whether its file carries the driver's version (`libcuda.so.550.90.07`);
    /// otherwise its own (`libnvidia-egl-gbm.so.1.1.1`).
    versioned: bool,
    /// Whether programs open it by its development name (`libcuda.so`:
    /// Triton, `torch.compile`), so the container gets that link too.
    dev_link: bool,
    /// Subdirectory of the library directory (`vdpau`).
    subdir: &'static str,
}

const fn lib(base: &'static str, capability: Capability) -> Lib {
    Lib {
        base,
        capability,
        versioned: true,
        dev_link: false,
        subdir: "",
    }
}

use Capability::{Compute, Display, Graphics, Utility, Video};

/// The driver's libraries by capability (libnvidia-container's lists, and
/// nvidia-ctk's for graphics).
const LIBS: &[Lib] = &[
    // compute
    Lib {
        dev_link: true,
        ..lib("libcuda", Compute)
    },
    lib("libcudadebugger", Compute),
    lib("libnvidia-opencl", Compute),
    lib("libnvidia-gpucomp", Compute),
    lib("libnvidia-ptxjitcompiler", Compute),
    lib("libnvidia-nvvm", Compute),
    // NVVM of the CUDA 12 era beside CUDA 13's (drivers 580 and later):
    // `libnvidia-nvvm70.so.<driver version>`, soname `libnvidia-nvvm70.so.4`.
    lib("libnvidia-nvvm70", Compute),
    // Tile IR's JIT compiler (drivers 590 and later, not in the open
    // driver's packages everywhere): `libnvidia-tileiras.so.<driver version>`.
    lib("libnvidia-tileiras", Compute),
    lib("libnvidia-allocator", Compute),
    lib("libnvidia-pkcs11", Compute),
    lib("libnvidia-pkcs11-openssl3", Compute),
    lib("libnvidia-fatbinaryloader", Compute),
    lib("libnvidia-compiler", Compute),
    // utility
    lib("libnvidia-ml", Utility),
    lib("libnvidia-cfg", Utility),
    // video
    lib("libnvcuvid", Video),
    lib("libnvidia-encode", Video),
    Lib {
        dev_link: true,
        ..lib("libnvidia-opticalflow", Video)
    },
    Lib {
        subdir: "vdpau",
        ..lib("libvdpau_nvidia", Video)
    },
    // graphics: GLVND vendor libraries, their cores, Vulkan, OptiX, NGX, GBM
    lib("libGLX_nvidia", Graphics),
    lib("libEGL_nvidia", Graphics),
    lib("libGLESv2_nvidia", Graphics),
    lib("libGLESv1_CM_nvidia", Graphics),
    lib("libnvidia-glcore", Graphics),
    lib("libnvidia-eglcore", Graphics),
    lib("libnvidia-glsi", Graphics),
    lib("libnvidia-tls", Graphics),
    lib("libnvidia-fbc", Graphics),
    lib("libnvidia-ifr", Graphics),
    lib("libnvidia-rtcore", Graphics),
    lib("libnvoptix", Graphics),
    lib("libnvidia-glvkspirv", Graphics),
    lib("libnvidia-cbl", Graphics),
    lib("libnvidia-ngx", Graphics),
    lib("libnvidia-vksc-core", Graphics),
    lib("libnvidia-allocator", Graphics),
    Lib {
        versioned: false,
        ..lib("libnvidia-egl-gbm", Graphics)
    },
    Lib {
        versioned: false,
        ..lib("libnvidia-egl-wayland", Graphics)
    },
    Lib {
        versioned: false,
        ..lib("libnvidia-egl-xcb", Graphics)
    },
    Lib {
        versioned: false,
        ..lib("libnvidia-egl-xlib", Graphics)
    },
];

/// Programs, looked for in the driver root's `usr/bin` and `bin`.
const PROGRAMS: &[(&str, Capability)] = &[
    ("nvidia-smi", Utility),
    ("nvidia-debugdump", Utility),
    ("nvidia-persistenced", Utility),
    ("nvidia-cuda-mps-control", Compute),
    ("nvidia-cuda-mps-server", Compute),
];

/// Configuration and data files (paths under the driver root, mounted at
/// the same path): Vulkan ICD and layers, the GLVND EGL vendor file, EGL
/// external platforms, OptiX's `nvoptix.bin`, the OpenCL ICD.
const CONFIGS: &[(&str, Capability)] = &[
    ("etc/OpenCL/vendors/nvidia.icd", Compute),
    ("usr/share/vulkan/icd.d/nvidia_icd.json", Graphics),
    ("etc/vulkan/icd.d/nvidia_icd.json", Graphics),
    (
        "usr/share/vulkan/implicit_layer.d/nvidia_layers.json",
        Graphics,
    ),
    ("etc/vulkan/implicit_layer.d/nvidia_layers.json", Graphics),
    ("usr/share/glvnd/egl_vendor.d/10_nvidia.json", Graphics),
    (
        "usr/share/egl/egl_external_platform.d/10_nvidia_wayland.json",
        Graphics,
    ),
    (
        "usr/share/egl/egl_external_platform.d/15_nvidia_gbm.json",
        Graphics,
    ),
    (
        "usr/share/egl/egl_external_platform.d/20_nvidia_xcb.json",
        Graphics,
    ),
    (
        "usr/share/egl/egl_external_platform.d/20_nvidia_xlib.json",
        Graphics,
    ),
    ("usr/share/nvidia/nvoptix.bin", Graphics),
];

/// NGX's Windows DLLs (for Proton/Wine), in `nvidia/wine` of a library
/// directory.
const NGX_DLLS: &[&str] = &["nvngx.dll", "_nvngx.dll"];

/// Where the Xorg driver modules are (display).
const XORG_DIRS: &[&str] = &[
    "usr/lib/xorg/modules",
    "usr/lib64/xorg/modules",
    "usr/lib/x86_64-linux-gnu/nvidia/xorg",
];

/// IPC sockets and directories of the host's daemons (host paths, not
/// under the driver root), mounted when they exist.
pub const IPC: &[(&str, Capability)] = &[
    ("/run/nvidia-persistenced/socket", Utility),
    ("/run/nvidia-fabricmanager/socket", Compute),
    ("/tmp/nvidia-mps", Compute),
];

/// Where distributions put the driver's libraries (under the driver
/// root), in the order they are searched when the cache does not have a
/// library. 32-bit libraries in `usr/lib` (RHEL) are skipped by machine.
pub const LIBRARY_DIRS: &[&str] = &[
    "usr/lib/x86_64-linux-gnu",
    "usr/lib/aarch64-linux-gnu",
    "usr/lib64",
    "lib/x86_64-linux-gnu",
    "lib/aarch64-linux-gnu",
    "lib64",
    "usr/lib",
    "lib",
];

/// Largest linker cache read.
const MAX_CACHE: u64 = 16 << 20;

/// The library that must be there for a container to run CUDA.
const ANCHOR: &str = "libcuda";

/// A library found: the real file and the name the loader knows it by.
struct Found {
    /// Host path of the file.
    real: PathBuf,
    /// Its soname, when known.
    soname: Option<String>,
}

/// Finds libraries under the driver root.
struct Locator<'a> {
    root: &'a HostRoot,
    driver_root: &'a Path,
    /// Cache entries of this machine's ABI: (soname, host path).
    cache: Option<Vec<(String, PathBuf)>>,
    /// Directories searched by name (host paths).
    dirs: Vec<PathBuf>,
    /// Other versions of versioned libraries seen (`535.183.01` → where).
    others: Vec<(String, PathBuf)>,
    /// Directory listings, each read once per search.
    listings: std::collections::HashMap<PathBuf, Vec<String>>,
}

impl<'a> Locator<'a> {
    fn new(root: &'a HostRoot, report: &mut Report) -> Self {
        let driver_root = root.driver_root();
        let cache_path = driver_root.join("etc/ld.so.cache");
        let cache = match root.read_limited(&cache_path, MAX_CACHE) {
            Err(e) if e.is_not_found() => {
                tracing::info!(
                    "{}: no linker cache in the driver root; looking for the driver's libraries by name",
                    cache_path.display()
                );
                None
            }
            Err(e) => {
                report.warn(
                    &cache_path,
                    format!(
                        "{}; looking for the driver's libraries by name instead",
                        e.reason()
                    ),
                );
                None
            }
            Ok(bytes) => match crate::ldcache::parse(&bytes) {
                Err(e) => {
                    report.warn(
                        &cache_path,
                        format!("{e}; looking for the driver's libraries by name instead"),
                    );
                    None
                }
                Ok(entries) => {
                    let native = crate::ldcache::Arch::native();
                    Some(
                        entries
                            .into_iter()
                            .filter(|e| {
                                Some(e.arch()) == native
                                    && e.is_libc6()
                                    && e.glibc_hwcaps_index().is_none()
                            })
                            .map(|e| {
                                let path = driver_root.join(e.path.trim_start_matches('/'));
                                (e.key, path)
                            })
                            .collect(),
                    )
                }
            },
        };
        let mut dirs: Vec<PathBuf> = LIBRARY_DIRS.iter().map(|d| driver_root.join(d)).collect();
        for d in root.library_search_path() {
            let d = driver_root.join(d.strip_prefix("/").unwrap_or(d));
            if !dirs.contains(&d) {
                dirs.push(d);
            }
        }
        Locator {
            root,
            driver_root,
            cache,
            dirs,
            others: Vec::new(),
            listings: std::collections::HashMap::new(),
        }
    }

    /// Whether `name` is the file of `lib` the running `version` needs.
    fn wanted(lib: &Lib, name: &str, version: &str) -> bool {
        if lib.versioned {
            name.strip_prefix(lib.base)
                .and_then(|r| r.strip_prefix(".so."))
                == Some(version)
        } else {
            name.strip_prefix(lib.base)
                .and_then(|r| r.strip_prefix(".so."))
                .is_some_and(|v| v.contains('.'))
        }
    }

    /// Notes another version of a versioned library (`libcuda.so.535.1.2`).
    fn note_other(&mut self, lib: &Lib, name: &str, at: &Path) {
        if let Some(v) = name
            .strip_prefix(lib.base)
            .and_then(|r| r.strip_prefix(".so."))
            && lib.versioned
            && v.split('.').count() >= 2
            && v.split('.')
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            && !self.others.iter().any(|(o, _)| o == v)
        {
            self.others.push((v.to_string(), at.to_path_buf()));
        }
    }

    fn find(&mut self, lib: &Lib, version: &str, report: &mut Report) -> Option<Found> {
        self.in_cache(lib, version, report)
            .or_else(|| self.by_name(lib, version, report))
    }

    fn in_cache(&mut self, lib: &Lib, version: &str, report: &mut Report) -> Option<Found> {
        let prefix = format!("{}.so.", lib.base);
        let candidates: Vec<(String, PathBuf)> = self
            .cache
            .as_ref()?
            .iter()
            .filter(|(key, _)| key.starts_with(&prefix))
            .cloned()
            .collect();
        for (key, path) in candidates {
            let real = match self.root.resolve(&path) {
                Ok(r) => r,
                Err(e) if e.is_not_found() => continue,
                Err(e) => {
                    report.warn(&path, format!("{}; leaving {key} out", e.reason()));
                    continue;
                }
            };
            let name = file_name(&real);
            if Self::wanted(lib, &name, version) {
                return Some(Found {
                    real,
                    soname: Some(key),
                });
            }
            self.note_other(lib, &name, &real);
        }
        None
    }

    fn by_name(&mut self, lib: &Lib, version: &str, report: &mut Report) -> Option<Found> {
        for dir in self.dirs.clone() {
            let dir = if lib.subdir.is_empty() {
                dir
            } else {
                dir.join(lib.subdir)
            };
            let names = self
                .listings
                .entry(dir.clone())
                .or_insert_with(|| {
                    let mut n = self.root.list_dir_opt(&dir).unwrap_or_default();
                    n.sort();
                    n
                })
                .clone();
            for name in names {
                if !name.starts_with(&format!("{}.so.", lib.base)) {
                    continue;
                }
                if !Self::wanted(lib, &name, version) {
                    self.note_other(lib, &name, &dir.join(&name));
                    continue;
                }
                let path = dir.join(&name);
                let (real, file) = match self.root.open_file(&path) {
                    Ok(x) => x,
                    Err(e) => {
                        report.warn(&path, format!("{}; leaving it out", e.reason()));
                        continue;
                    }
                };
                match crate::elf::read(&file) {
                    Ok(l) if l.is_native() => {
                        return Some(Found {
                            real,
                            soname: l.soname,
                        });
                    }
                    // Another machine's (32-bit) build: keep looking.
                    Ok(_) => {}
                    Err(e) => report.warn(&path, format!("{e}; leaving it out")),
                }
            }
        }
        None
    }

    /// The container path of a host file under the driver root.
    fn in_container(&self, host: &Path) -> PathBuf {
        match host.strip_prefix(self.driver_root) {
            Ok(rel) => Path::new("/").join(rel),
            Err(_) => host.to_path_buf(),
        }
    }

    /// Where this locator looked, for messages.
    fn looked(&self) -> String {
        let cache = self.driver_root.join("etc/ld.so.cache");
        let dirs: Vec<String> = self.dirs.iter().map(|d| d.display().to_string()).collect();
        format!(
            "{} ({}) and {}",
            cache.display(),
            if self.cache.is_some() {
                "read"
            } else {
                "not usable"
            },
            dirs.join(", ")
        )
    }
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string()
}

fn file(
    capability: Capability,
    kind: FileKind,
    host: &Path,
    container: &Path,
    links: Vec<FileLink>,
) -> DriverFile {
    DriverFile {
        capability,
        kind,
        host_path: host.display().to_string(),
        container_path: container.display().to_string(),
        links,
    }
}

/// The driver files under the root's driver root for `version` (the
/// running one, from procfs; `None` when procfs does not say).
pub fn find(root: &HostRoot, version: Option<&str>, report: &mut Report) -> Driver {
    let driver_root = root.driver_root();
    let mut driver = Driver {
        version: version.map(str::to_string),
        root: driver_root.display().to_string(),
        files: Vec::new(),
        problem: None,
        hook_path: root.hook_path_for_spec().display().to_string(),
    };
    let Some(version) = version else {
        driver.problem = Some(format!(
            "the running driver's version is unknown ({} is missing or unreadable), so its \
             libraries cannot be chosen",
            crate::root::proc_path("driver/nvidia/version").display()
        ));
        return driver;
    };
    let under = |p: &str| driver_root.join(p);
    let mut loc = Locator::new(root, report);
    let mut out: Vec<DriverFile> = Vec::new();
    let mut anchor_found = false;
    for lib in LIBS {
        let Some(found) = loc.find(lib, version, report) else {
            continue;
        };
        anchor_found |= lib.base == ANCHOR;
        let real_name = file_name(&found.real);
        let container = loc.in_container(&found.real);
        let dir = container.parent().unwrap_or(Path::new("/")).to_path_buf();
        let mut links = Vec::new();
        if let Some(soname) = &found.soname
            && *soname != real_name
        {
            links.push(FileLink {
                path: dir.join(soname).display().to_string(),
                target: real_name.clone(),
            });
        }
        let soname = found.soname.clone().unwrap_or_else(|| real_name.clone());
        if lib.dev_link {
            links.push(FileLink {
                path: dir.join(format!("{}.so", lib.base)).display().to_string(),
                target: soname.clone(),
            });
        }
        match lib.base {
            // GLVND's indirect-rendering GLX library is the vendor's.
            "libGLX_nvidia" => links.push(FileLink {
                path: dir.join("libGLX_indirect.so.0").display().to_string(),
                target: real_name.clone(),
            }),
            // Mesa's GBM loads backends from gbm/<driver>_gbm.so.
            "libnvidia-allocator" if lib.capability == Graphics => links.push(FileLink {
                path: dir.join("gbm/nvidia-drm_gbm.so").display().to_string(),
                target: format!("../{soname}"),
            }),
            _ => {}
        }
        out.push(file(
            lib.capability,
            FileKind::Library,
            &found.real,
            &container,
            links,
        ));
    }
    if !anchor_found {
        driver.problem = Some(match loc.others.first() {
            Some((other, at)) => format!(
                "the running driver is {version} (/proc/driver/nvidia/version) but the libraries \
                 under {} are {other} ({}): the user-space driver does not match the kernel \
                 module (reboot after a driver upgrade, or point --driver-root at the running \
                 driver's files)",
                driver_root.display(),
                at.display()
            ),
            None => format!(
                "no {ANCHOR}.so.{version} under the driver root {}: looked in {}; point \
                 --driver-root or --library-search-path at the driver's files",
                driver_root.display(),
                loc.looked()
            ),
        });
    }

    // NGX's DLLs, beside the libraries.
    for dir in &loc.dirs {
        for dll in NGX_DLLS {
            let p = dir.join("nvidia/wine").join(dll);
            if let Ok(real) = root.resolve(&p) {
                out.push(file(
                    Graphics,
                    FileKind::Module,
                    &real,
                    &loc.in_container(&p),
                    Vec::new(),
                ));
            }
        }
    }

    for (name, capability) in PROGRAMS {
        if let Some(p) = ["usr/bin", "bin"]
            .iter()
            .map(|d| under(&format!("{d}/{name}")))
            .find(|p| root.exists(p))
        {
            out.push(file(
                *capability,
                FileKind::Executable,
                &p,
                &Path::new("/usr/bin").join(name),
                Vec::new(),
            ));
        }
    }

    let fw_dir = under(&format!("lib/firmware/nvidia/{version}"));
    for f in root.list_dir_opt(&fw_dir).unwrap_or_default() {
        if f.starts_with("gsp") && f.ends_with(".bin") {
            let p = fw_dir.join(&f);
            let container = PathBuf::from(format!("/lib/firmware/nvidia/{version}/{f}"));
            out.push(file(
                Compute,
                FileKind::Firmware,
                &p,
                &container,
                Vec::new(),
            ));
        }
    }

    for (rel, capability) in CONFIGS {
        let p = under(rel);
        if root.exists(&p) {
            out.push(file(
                *capability,
                FileKind::Config,
                &p,
                &Path::new("/").join(rel),
                Vec::new(),
            ));
        }
    }

    // Display: the Xorg driver and GLX server extension.
    let mut xorg_seen = BTreeSet::new();
    for dir in XORG_DIRS {
        for (sub, name, link) in [
            ("drivers", "nvidia_drv.so".to_string(), None),
            (
                "extensions",
                format!("libglxserver_nvidia.so.{version}"),
                Some("libglxserver_nvidia.so"),
            ),
        ] {
            let flat = dir.ends_with("nvidia/xorg");
            let p = if flat {
                under(dir).join(&name)
            } else {
                under(dir).join(sub).join(&name)
            };
            if xorg_seen.contains(&name) || !root.exists(&p) {
                continue;
            }
            xorg_seen.insert(name.clone());
            let container = loc.in_container(&p);
            let links = link
                .map(|l| {
                    vec![FileLink {
                        path: container
                            .parent()
                            .unwrap_or(Path::new("/"))
                            .join(l)
                            .display()
                            .to_string(),
                        target: name.clone(),
                    }]
                })
                .unwrap_or_default();
            out.push(file(Display, FileKind::Module, &p, &container, links));
        }
    }

    for (s, capability) in IPC {
        let p = Path::new(s);
        if root.exists(p) {
            out.push(file(*capability, FileKind::Ipc, p, p, Vec::new()));
        }
    }
    out.sort_by(|a, b| {
        (a.container_path.as_str(), a.capability).cmp(&(b.container_path.as_str(), b.capability))
    });
    out.dedup_by(|a, b| a.container_path == b.container_path && a.capability == b.capability);
    driver.files = out;
    driver
}

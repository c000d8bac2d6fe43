//! The NVIDIA driver's user-space files a container needs: libraries of
//! the running driver version, utilities, GSP firmware and IPC sockets,
//! found under the driver root and mounted read-only.
//!
//! Libraries come from the driver root's linker cache (`etc/ld.so.cache`,
//! read with [`crate::ldcache`]): the entries for the known NVIDIA library
//! names on this machine's ABI whose file is the running version
//! (`libcuda.so.570.86.15`). Each is mounted at its versioned path and at
//! its soname path (`libcuda.so.1`), both from the same host file, so that
//! no hook has to create symlinks in the container.
//!
//! Host paths are under the driver root; container paths are not.

use std::path::{Path, PathBuf};

use crate::discover::Report;
use crate::model::MountSpec;
use crate::root::HostRoot;

/// Libraries nvidia-ctk gives compute, utility and video containers.
pub const LIBRARIES: &[&str] = &[
    "libcuda.so",
    "libcudadebugger.so",
    "libnvidia-allocator.so",
    "libnvidia-cfg.so",
    "libnvidia-encode.so",
    "libnvidia-fbc.so",
    "libnvidia-gpucomp.so",
    "libnvidia-ml.so",
    "libnvidia-nvvm.so",
    "libnvidia-opencl.so",
    "libnvidia-opticalflow.so",
    "libnvidia-pkcs11-openssl3.so",
    "libnvidia-pkcs11.so",
    "libnvidia-ptxjitcompiler.so",
    "libnvcuvid.so",
];

/// Utilities, looked for in the driver root's `usr/bin` and `bin`.
pub const UTILITIES: &[&str] = &[
    "nvidia-smi",
    "nvidia-debugdump",
    "nvidia-persistenced",
    "nvidia-cuda-mps-control",
    "nvidia-cuda-mps-server",
];

/// IPC sockets and directories, mounted when they exist.
pub const IPC: &[&str] = &[
    "/run/nvidia-persistenced/socket",
    "/run/nvidia-fabricmanager/socket",
    "/tmp/nvidia-mps",
];

/// Mount options of every driver file.
pub const OPTIONS: [&str; 4] = ["ro", "nosuid", "nodev", "bind"];

/// Largest linker cache read.
const MAX_CACHE: u64 = 16 << 20;

fn mount(host: &Path, container: &Path) -> MountSpec {
    MountSpec {
        host_path: host.display().to_string(),
        container_path: container.display().to_string(),
        options: OPTIONS.iter().map(|s| s.to_string()).collect(),
    }
}

/// Where distributions put the driver's libraries, for a driver root
/// without a linker cache.
pub const LIBRARY_DIRS: &[&str] = &[
    "usr/lib/x86_64-linux-gnu",
    "usr/lib/aarch64-linux-gnu",
    "usr/lib64",
    "usr/lib",
    "lib64",
    "lib",
];

/// Libraries of `version` found by name in [`LIBRARY_DIRS`] (no cache to
/// give their sonames: only the versioned paths are mounted).
fn from_library_dirs(root: &HostRoot, driver_root: &Path, version: &str) -> Vec<MountSpec> {
    let mut out = Vec::new();
    for dir in LIBRARY_DIRS {
        let host_dir = driver_root.join(dir);
        for name in root.list_dir_opt(&host_dir).unwrap_or_default() {
            let known = LIBRARIES.iter().any(|l| name == format!("{l}.{version}"));
            if known
                && !out
                    .iter()
                    .any(|m: &MountSpec| m.container_path.ends_with(&format!("/{name}")))
            {
                let host = host_dir.join(&name);
                out.push(mount(&host, &Path::new("/").join(dir).join(&name)));
            }
        }
    }
    out
}

/// The driver files under `driver_root` (a host path) for `version`.
pub fn files(
    root: &HostRoot,
    driver_root: &Path,
    version: &str,
    report: &mut Report,
) -> Vec<MountSpec> {
    let under = |p: &str| driver_root.join(p.trim_start_matches('/'));
    let mut out = Vec::new();

    // Libraries, from the linker cache.
    let cache_path = under("etc/ld.so.cache");
    match root.read_limited(&cache_path, MAX_CACHE) {
        // Every host has one; without it, look in the usual directories.
        Err(e) if e.is_not_found() => {
            tracing::info!(
                "{}: no linker cache in the driver root; looking in the usual library directories",
                cache_path.display()
            );
            out.extend(from_library_dirs(root, driver_root, version));
        }
        Err(e) => report.warn(
            &cache_path,
            format!("{}; driver libraries are left out", e.reason()),
        ),
        Ok(bytes) => match crate::ldcache::parse(&bytes) {
            Err(e) => report.warn(&cache_path, format!("{e}; driver libraries are left out")),
            Ok(entries) => {
                let native = crate::ldcache::Arch::native();
                let mut seen: Vec<String> = Vec::new();
                for e in entries {
                    if Some(e.arch()) != native || !e.is_libc6() || e.glibc_hwcaps_index().is_some()
                    {
                        continue;
                    }
                    let Some(base) = LIBRARIES
                        .iter()
                        .find(|l| e.key.starts_with(&format!("{l}.")))
                    else {
                        continue;
                    };
                    if seen.contains(&e.key) {
                        continue; // the first entry wins, as for the loader
                    }
                    let soname_path = under(&e.path);
                    let real = match root.resolve(&soname_path) {
                        Ok(r) => r,
                        Err(err) => {
                            report.warn(&soname_path, format!("{err}; leaving {} out", e.key));
                            continue;
                        }
                    };
                    let real_name = real
                        .file_name()
                        .and_then(|n| n.to_str())
                        .unwrap_or_default();
                    if real_name != format!("{base}.{version}") {
                        // Another driver version's library.
                        continue;
                    }
                    seen.push(e.key.clone());
                    let dir = Path::new(&e.path).parent().unwrap_or(Path::new("/"));
                    out.push(mount(&real, &dir.join(real_name)));
                    out.push(mount(&real, Path::new(&e.path)));
                }
            }
        },
    }

    // Utilities.
    for u in UTILITIES {
        if let Some(p) = ["usr/bin", "bin"]
            .iter()
            .map(|d| under(&format!("{d}/{u}")))
            .find(|p| root.exists(p))
        {
            out.push(mount(&p, &Path::new("/usr/bin").join(u)));
        }
    }

    // GSP firmware of this version.
    let fw_dir = under(&format!("lib/firmware/nvidia/{version}"));
    for f in root.list_dir_opt(&fw_dir).unwrap_or_default() {
        if f.starts_with("gsp") && f.ends_with(".bin") {
            let p = fw_dir.join(&f);
            let container = PathBuf::from(format!("/lib/firmware/nvidia/{version}/{f}"));
            out.push(mount(&p, &container));
        }
    }

    // IPC sockets (host paths: they are not part of the driver root).
    for s in IPC {
        let p = Path::new(s);
        if root.exists(p) {
            out.push(mount(p, p));
        }
    }
    out.sort_by(|a, b| a.container_path.cmp(&b.container_path));
    out.dedup_by(|a, b| a.container_path == b.container_path);
    out
}

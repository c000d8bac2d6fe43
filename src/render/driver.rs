//! What a spec's edits give of a driver's files: the generator's
//! capabilities select the files ([`DriverSettings`]); each is bind-mounted
//! read-only; the links containers need to them and the container's linker
//! cache come from `cdigen hook` steps the runtime runs at
//! `createContainer`, or, in the no-hook mode, the links are bind mounts
//! of the same files and the cache is left alone.
//!
//! Hooks, in the order they run:
//! 1. `create-symlinks`: soname links (`libcuda.so.1`), development links
//!    (`libcuda.so`), `libGLX_indirect.so.0`, the GBM backend;
//! 2. `enable-cuda-compat`: with compute, the image's CUDA forward
//!    compatibility libraries when they are newer than the host driver;
//! 3. `update-ldcache`: the directories of the mounted libraries, so that
//!    any image's loader finds them (a Debian image on a host with the
//!    driver in `/usr/lib64`) and `ldconfig -p` lists them;
//! 4. `update-application-profile`: with graphics, the driver's
//!    application profile that shows EGL and Vulkan only the container's
//!    GPUs (else they list every GPU of the host and fail on the others).

use std::collections::BTreeSet;
use std::path::Path;

use crate::cdi::Hook;
use crate::generator::{DriverFiles, DriverSettings};
use crate::model::{Capability, Driver, DriverFile, FileKind, MountSpec};

/// Mount options of every driver file.
pub const OPTIONS: [&str; 4] = ["ro", "nosuid", "nodev", "bind"];

/// The spec-level edits of a driver: mounts and hooks.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Edits {
    /// Bind mounts, in container-path order.
    pub mounts: Vec<MountSpec>,
    /// `createContainer` hooks, in the order they run.
    pub hooks: Vec<Hook>,
}

fn mount(host: &str, container: &str) -> MountSpec {
    MountSpec {
        host_path: host.to_string(),
        container_path: container.to_string(),
        options: OPTIONS.iter().map(|s| s.to_string()).collect(),
    }
}

/// The environment of every hook cdigen writes. Without an `env`, runc
/// runs a hook with the container's own environment (the image's `ENV`,
/// the pod's `env`): an image's `LD_PRELOAD` or `LD_AUDIT` would then load
/// the image's code into the hook, as root on the host. It is not empty on
/// purpose: the CDI library drops an empty list (`omitempty`) when it
/// writes the OCI spec, which is the same as none.
pub const HOOK_ENV: [&str; 1] = ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"];

fn hook(path: &str, step: &str, args: Vec<String>) -> Hook {
    let mut argv = vec!["cdigen".to_string(), "hook".to_string(), step.to_string()];
    argv.extend(args);
    Hook {
        hook_name: "createContainer".into(),
        path: path.to_string(),
        args: argv,
        env: HOOK_ENV.iter().map(|s| s.to_string()).collect(),
        timeout: None,
    }
}

/// The files of `driver` that `settings` select. A file two capabilities
/// need is there twice, with each one's links (the allocator: compute's
/// soname link, graphics' GBM backend link).
pub fn selected<'a>(settings: &DriverSettings, driver: &'a Driver) -> Vec<&'a DriverFile> {
    if settings.files == DriverFiles::None {
        return Vec::new();
    }
    let wanted: BTreeSet<Capability> = settings.capabilities.iter().copied().collect();
    driver
        .files
        .iter()
        .filter(|f| wanted.contains(&f.capability))
        .collect()
}

/// The edits `settings` give of `driver`.
pub fn edits(settings: &DriverSettings, driver: &Driver) -> Edits {
    let files = selected(settings, driver);
    let mut out = Edits::default();
    let mut links: Vec<(String, String)> = Vec::new();
    for f in &files {
        out.mounts.push(mount(&f.host_path, &f.container_path));
        for l in &f.links {
            if settings.hooks {
                links.push((l.path.clone(), l.target.clone()));
            } else {
                out.mounts.push(mount(&f.host_path, &l.path));
            }
        }
    }
    out.mounts
        .sort_by(|a, b| a.container_path.cmp(&b.container_path));
    out.mounts
        .dedup_by(|a, b| a.container_path == b.container_path);
    if !settings.hooks || files.is_empty() {
        return out;
    }
    links.sort();
    links.dedup_by(|a, b| a.0 == b.0);
    if !links.is_empty() {
        let args = links
            .iter()
            .flat_map(|(path, target)| ["--link".to_string(), format!("{target}::{path}")])
            .collect();
        out.hooks
            .push(hook(&driver.hook_path, "create-symlinks", args));
    }
    if let Some(v) = &driver.version
        && settings.capabilities.contains(&Capability::Compute)
    {
        out.hooks.push(hook(
            &driver.hook_path,
            "enable-cuda-compat",
            vec!["--host-driver-version".into(), v.clone()],
        ));
    }
    let folders: BTreeSet<&Path> = files
        .iter()
        .filter(|f| f.kind == FileKind::Library)
        .filter_map(|f| Path::new(&f.container_path).parent())
        .collect();
    if !folders.is_empty() {
        let args = folders
            .iter()
            .flat_map(|d| ["--folder".to_string(), d.display().to_string()])
            .collect();
        out.hooks
            .push(hook(&driver.hook_path, "update-ldcache", args));
    }
    if settings.capabilities.contains(&Capability::Graphics) {
        out.hooks.push(hook(
            &driver.hook_path,
            "update-application-profile",
            Vec::new(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;
    use crate::model::FileLink;

    fn f(cap: Capability, kind: FileKind, path: &str, links: &[(&str, &str)]) -> DriverFile {
        DriverFile {
            capability: cap,
            kind,
            host_path: format!("/drv{path}"),
            container_path: path.into(),
            links: links
                .iter()
                .map(|(p, t)| FileLink {
                    path: (*p).into(),
                    target: (*t).into(),
                })
                .collect(),
        }
    }

    fn driver() -> Driver {
        use Capability::*;
        Driver {
            version: Some("550.90.07".into()),
            root: "/drv".into(),
            files: vec![
                f(
                    Compute,
                    FileKind::Library,
                    "/usr/lib64/libcuda.so.550.90.07",
                    &[
                        ("/usr/lib64/libcuda.so.1", "libcuda.so.550.90.07"),
                        ("/usr/lib64/libcuda.so", "libcuda.so.1"),
                    ],
                ),
                f(
                    Utility,
                    FileKind::Library,
                    "/usr/lib64/libnvidia-ml.so.550.90.07",
                    &[("/usr/lib64/libnvidia-ml.so.1", "libnvidia-ml.so.550.90.07")],
                ),
                f(Utility, FileKind::Executable, "/usr/bin/nvidia-smi", &[]),
                f(
                    Video,
                    FileKind::Library,
                    "/usr/lib64/vdpau/libvdpau_nvidia.so.550.90.07",
                    &[],
                ),
                f(
                    Display,
                    FileKind::Module,
                    "/usr/lib64/xorg/modules/drivers/nvidia_drv.so",
                    &[],
                ),
            ],
            problem: None,
            hook_path: "/usr/bin/cdigen".into(),
        }
    }

    fn settings(caps: &[Capability], hooks: bool) -> DriverSettings {
        DriverSettings {
            capabilities: caps.to_vec(),
            files: DriverFiles::Required,
            hooks,
        }
    }

    #[test]
    fn hooks_make_links_and_the_cache_for_the_selected_files() {
        use Capability::*;
        let e = edits(
            &settings(&[Compute, Utility, Video, Graphics], true),
            &driver(),
        );
        let dests: Vec<&str> = e.mounts.iter().map(|m| m.container_path.as_str()).collect();
        assert_eq!(
            dests,
            [
                "/usr/bin/nvidia-smi",
                "/usr/lib64/libcuda.so.550.90.07",
                "/usr/lib64/libnvidia-ml.so.550.90.07",
                "/usr/lib64/vdpau/libvdpau_nvidia.so.550.90.07",
            ]
        );
        let args: Vec<Vec<&str>> = e
            .hooks
            .iter()
            .map(|h| h.args.iter().map(String::as_str).collect())
            .collect();
        assert_eq!(
            args,
            [
                vec![
                    "cdigen",
                    "hook",
                    "create-symlinks",
                    "--link",
                    "libcuda.so.1::/usr/lib64/libcuda.so",
                    "--link",
                    "libcuda.so.550.90.07::/usr/lib64/libcuda.so.1",
                    "--link",
                    "libnvidia-ml.so.550.90.07::/usr/lib64/libnvidia-ml.so.1",
                ],
                vec![
                    "cdigen",
                    "hook",
                    "enable-cuda-compat",
                    "--host-driver-version",
                    "550.90.07"
                ],
                vec![
                    "cdigen",
                    "hook",
                    "update-ldcache",
                    "--folder",
                    "/usr/lib64",
                    "--folder",
                    "/usr/lib64/vdpau"
                ],
                vec!["cdigen", "hook", "update-application-profile"],
            ]
        );
        // The application profile is for EGL and Vulkan: graphics only.
        let e = edits(&settings(&[Compute, Utility, Video], true), &driver());
        assert!(
            e.hooks
                .iter()
                .all(|h| h.args[2] != "update-application-profile"),
            "{:?}",
            e.hooks
        );
        assert!(
            e.hooks
                .iter()
                .all(|h| h.path == "/usr/bin/cdigen" && h.hook_name == "createContainer")
        );
        // Never the container's environment (an image's LD_PRELOAD), and
        // never empty (the CDI library drops an empty list).
        assert!(
            e.hooks
                .iter()
                .all(|h| h.env == ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"])
        );
    }

    #[test]
    fn without_hooks_links_are_bind_mounts_of_the_file() {
        use Capability::*;
        let e = edits(&settings(&[Compute], false), &driver());
        assert!(e.hooks.is_empty());
        let pairs: Vec<(&str, &str)> = e
            .mounts
            .iter()
            .map(|m| (m.container_path.as_str(), m.host_path.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                (
                    "/usr/lib64/libcuda.so",
                    "/drv/usr/lib64/libcuda.so.550.90.07"
                ),
                (
                    "/usr/lib64/libcuda.so.1",
                    "/drv/usr/lib64/libcuda.so.550.90.07"
                ),
                (
                    "/usr/lib64/libcuda.so.550.90.07",
                    "/drv/usr/lib64/libcuda.so.550.90.07"
                ),
            ]
        );
    }

    #[test]
    fn a_file_of_two_capabilities_is_mounted_once_with_both_links() {
        use Capability::*;
        let mut d = driver();
        let lib = "/usr/lib64/libnvidia-allocator.so.550.90.07";
        d.files.push(f(
            Compute,
            FileKind::Library,
            lib,
            &[(
                "/usr/lib64/libnvidia-allocator.so.1",
                "libnvidia-allocator.so.550.90.07",
            )],
        ));
        d.files.push(f(
            Graphics,
            FileKind::Library,
            lib,
            &[
                (
                    "/usr/lib64/libnvidia-allocator.so.1",
                    "libnvidia-allocator.so.550.90.07",
                ),
                (
                    "/usr/lib64/gbm/nvidia-drm_gbm.so",
                    "../libnvidia-allocator.so.1",
                ),
            ],
        ));
        let e = edits(&settings(&[Compute, Graphics], true), &d);
        assert_eq!(
            e.mounts.iter().filter(|m| m.container_path == lib).count(),
            1
        );
        let links = &e.hooks[0].args;
        assert!(links.contains(
            &"../libnvidia-allocator.so.1::/usr/lib64/gbm/nvidia-drm_gbm.so".to_string()
        ));
        assert_eq!(
            links
                .iter()
                .filter(|a| a.ends_with("::/usr/lib64/libnvidia-allocator.so.1"))
                .count(),
            1
        );
    }

    #[test]
    fn capabilities_select_and_none_gives_nothing() {
        use Capability::*;
        let e = edits(&settings(&[Display], true), &driver());
        assert_eq!(e.mounts.len(), 1);
        // A module is no library: no cache, no compat without compute.
        assert!(e.hooks.is_empty());
        let none = DriverSettings {
            files: DriverFiles::None,
            ..settings(&[Compute], true)
        };
        assert_eq!(edits(&none, &driver()), Edits::default());
    }
}

//! Other producers of the CDI names a generator writes: the spec files in
//! the directories runtimes read that cdigen did not write, which other
//! tools keep rewriting, and how to turn each known tool off.
//!
//! Runtimes drop every device defined twice in one spec directory, and a
//! later directory overrides an earlier one; so a name two tools write is
//! either lost or decided by directory order, and each tool rewrites its
//! file on its own triggers (NVIDIA's `nvidia-cdi-refresh` on every load of
//! the driver). [`crate::generate::Defined`] finds such files in the
//! output directory and in the other spec directories ([`runtime_dirs`]);
//! `generate` (and `--dry-run`) refuses to write the spec, and `check`
//! reports a `competing` finding, each naming the file and, for a tool it
//! recognizes ([`Producer`]), how to stop that tool.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use crate::root::HostRoot;

/// A tool known to write spec files of its own, recognized by the file's
/// name, directory and kind as that tool writes them by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Producer {
    /// NVIDIA Container Toolkit (1.18 and later): `nvidia-cdi-refresh.path`
    /// and `.service` run `nvidia-ctk cdi generate` into
    /// `/var/run/cdi/nvidia.yaml` (kind `nvidia.com/gpu`) at boot, when the
    /// kernel modules or nvidia-ctk change, and, through the toolkit's
    /// udev rule, whenever an `nvidia*` device node appears or a GPU binds
    /// the driver.
    NvidiaCdiRefresh,
    /// `nvidia-ctk cdi generate --output=...` run by hand, by a script or
    /// an installer: NVIDIA documents `/etc/cdi/nvidia.yaml` for it. The
    /// same file name outside a `run/cdi` directory, which the refresh
    /// units never write; it is written only when the command is run.
    NvidiaCtkGenerate,
    /// Intel's `intel-cdi-specs-generator` (intel-resource-drivers-for-
    /// kubernetes): `intel.com-gpu.yaml`, `intel.com-gaudi.yaml`,
    /// `intel.com-npu.yaml` in `/etc/cdi`, written when it is run.
    IntelCdiSpecsGenerator,
    /// AMD's `amd-ctk cdi generate` (ROCm container toolkit):
    /// `/etc/cdi/amd.json` (kind `amd.com/gpu`), written when it is run.
    AmdCtk,
}

impl Producer {
    /// The tool whose default output the spec file at `path` of kind
    /// `kind` is. NVIDIA's file is the refresh units' in a `run/cdi`
    /// directory (`/var/run/cdi`, `/run/cdi`, under any root) and a
    /// hand-run `nvidia-ctk cdi generate`'s anywhere else (`/etc/cdi`).
    pub fn recognize(path: &Path, kind: &str) -> Option<Producer> {
        let name = path.file_name()?.to_str()?;
        match (name, kind) {
            ("nvidia.yaml" | "nvidia.json", "nvidia.com/gpu") => {
                if path.parent().is_some_and(|d| d.ends_with("run/cdi")) {
                    Some(Producer::NvidiaCdiRefresh)
                } else {
                    Some(Producer::NvidiaCtkGenerate)
                }
            }
            ("amd.json", "amd.com/gpu") => Some(Producer::AmdCtk),
            (
                "intel.com-gpu.yaml"
                | "intel.com-gpu.json"
                | "intel.com-gaudi.yaml"
                | "intel.com-gaudi.json"
                | "intel.com-npu.yaml"
                | "intel.com-npu.json",
                "intel.com/gpu" | "intel.com/gaudi" | "intel.com/npu",
            ) => Some(Producer::IntelCdiSpecsGenerator),
            _ => None,
        }
    }

    /// Who wrote the file and how to stop it, then remove `file`.
    pub fn how_to_stop(self, file: &Path) -> String {
        let file = file.display();
        match self {
            Producer::NvidiaCdiRefresh => format!(
                "it is written by nvidia-ctk's nvidia-cdi-refresh units: stop them with \
                 `systemctl disable --now nvidia-cdi-refresh.path nvidia-cdi-refresh.service` \
                 and `systemctl mask nvidia-cdi-refresh.service` (the toolkit's udev rule starts \
                 the service whenever the driver's devices appear, enabled or not), then remove {file}"
            ),
            Producer::NvidiaCtkGenerate => format!(
                "it is not from nvidia-ctk's nvidia-cdi-refresh units (they write \
                 /var/run/cdi/nvidia.yaml) but looks like the output of `nvidia-ctk cdi generate \
                 --output={file}`, which writes it only when run (by hand, a script or an \
                 installer): remove {file} (or move it out of the spec directories) and stop \
                 whatever runs that command"
            ),
            Producer::IntelCdiSpecsGenerator => format!(
                "it looks like the output of intel-cdi-specs-generator (Intel's resource drivers \
                 for Kubernetes), which writes it each time it is run: stop running it for these \
                 devices (a script, cron job or DaemonSet may), then remove {file}"
            ),
            Producer::AmdCtk => format!(
                "it looks like the output of `amd-ctk cdi generate` (ROCm's container toolkit), \
                 which writes it each time it is run: stop running it (a script or cron job may), \
                 then remove {file}"
            ),
        }
    }
}

/// What to do about a foreign file that defines names of cdigen's
/// `generator`: stop the tool that writes it (when it is a known one), or
/// remove the file; or keep it and turn that generator off.
pub fn fix(producer: Option<Producer>, file: &Path, generator: &str) -> String {
    let stop = match producer {
        Some(p) => p.how_to_stop(file),
        None => format!(
            "remove {} (or move it out of the spec directories) if cdigen is to provide these devices",
            file.display()
        ),
    };
    format!(
        "{stop}; or, to keep that file, turn cdigen's generator {generator:?} off (`enabled: false` \
         in a copy of its definition in /etc/cdigen/generators.d)"
    )
}

/// The spec directories runtimes read, lowest priority first: `explicit`
/// (`--spec-dir`) when given, else `/etc/cdi` and `/var/run/cdi` of the
/// host under `root` (a DaemonSet with the host at `/host` reads the
/// host's `/etc/cdi` there; symlinks such as `/var/run` are followed inside
/// the root). Directories that do not exist are kept: readers skip them.
pub fn runtime_dirs(root: &HostRoot, explicit: &[PathBuf]) -> Vec<PathBuf> {
    if !explicit.is_empty() {
        return explicit.to_vec();
    }
    crate::cdi::DEFAULT_SPEC_DIRS
        .iter()
        .map(|d| root.resolved_disk_path(Path::new(d)))
        .collect()
}

/// Whether two paths name the same directory: equal, or the same
/// directory on disk (`/var/run/cdi` and `/run/cdi`, a bind mount).
pub fn same_dir(a: &Path, b: &Path) -> bool {
    if a == b {
        return true;
    }
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.is_dir() && x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

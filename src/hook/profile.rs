//! `cdigen hook update-application-profile`: shows EGL and Vulkan only the
//! GPUs the container was given.
//!
//! The driver's EGL (and its Vulkan, which enumerates through it) lists
//! every GPU the driver knows about, not only those whose `/dev/nvidiaN`
//! the container has, and fails on the others. The driver reads
//! application profiles from `/etc/nvidia/nvidia-application-profiles-rc.d/`
//! (the driver README, "Application Profiles"); its setting
//! `EGLVisibleDGPUDevices` is a mask of the GPUs, bit N for the GPU whose
//! device minor is N, that EGL may use. nvidia-ctk's hook of the same name
//! (nvidia-container-toolkit 1.20) writes such a profile, applying to every
//! program; this step does the same from the GPU nodes the runtime creates
//! in the container: the `/dev/nvidiaN` character devices of
//! `config.json`'s `linux.devices`, by their minor numbers (0 to 63: the
//! mask has 64 bits; others are left out, said on stderr).
//!
//! With no GPU node, nothing is written, and a [`PROFILE`] an earlier start
//! of the same container left is removed. The file is written through
//! [`InRoot`], so no link in the image leads it out of the root, and
//! anything but a regular file at [`PROFILE`] is an error, never opened.

use std::path::Path;

use super::inroot::InRoot;
use super::{ConfigDevice, Error};

/// The profile this step writes.
pub const PROFILE: &str = "/etc/nvidia/nvidia-application-profiles-rc.d/10-cdigen-container.conf";

/// The highest GPU minor the mask holds.
pub const MAX_MINOR: i64 = 63;

/// The GPU nodes of `devices`: character devices at `/dev/nvidia<digits>`
/// (not `nvidiactl`, `nvidia-uvm`, `nvidia-caps/...`), as (path, minor).
pub fn gpu_minors(devices: &[ConfigDevice]) -> Vec<(&Path, i64)> {
    devices
        .iter()
        .filter(|d| d.kind == "c")
        .filter(|d| {
            d.path
                .to_str()
                .and_then(|p| p.strip_prefix("/dev/nvidia"))
                .is_some_and(|n| {
                    (1..=3).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_digit())
                })
        })
        .filter_map(|d| Some((d.path.as_path(), d.minor?)))
        .collect()
}

/// The profile's text for `mask`: one profile with `EGLVisibleDGPUDevices`,
/// and a rule with an empty pattern, which matches every program.
pub fn profile_text(mask: u64) -> String {
    // The settings as a flat key/value list and the mask in hexadecimal,
    // as the driver's profile parser takes them (and nvidia-ctk writes).
    format!(
        "{{\"profiles\":[{{\"name\":\"cdigen-container\",\"settings\":[\"EGLVisibleDGPUDevices\",0x{mask:x}]}}],\
\"rules\":[{{\"pattern\":[],\"profile\":\"cdigen-container\"}}]}}\n"
    )
}

/// What [`update_application_profile`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// What happened to [`PROFILE`].
    pub action: Action,
    /// GPU nodes left out of the mask: (path, minor) with a minor over
    /// [`MAX_MINOR`] or below 0.
    pub skipped: Vec<(String, i64)>,
}

/// What happened to [`PROFILE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Written with this mask.
    Written(u64),
    /// No GPU node: nothing written; whether a stale profile was removed.
    NoGpus {
        /// A profile from an earlier start was removed.
        removed_stale: bool,
    },
    /// The root is read-only: nothing written (the mask it would have had).
    ReadOnly(u64),
}

/// Writes [`PROFILE`] in `root` for the GPU nodes among `devices` (see the
/// module docs).
///
/// # Errors
/// [`Error::InRoot`]: [`PROFILE`] cannot be written or removed (something
/// other than a regular file there included).
pub fn update_application_profile(
    root: &InRoot,
    devices: &[ConfigDevice],
) -> Result<Outcome, Error> {
    let mut mask = 0u64;
    let mut skipped = Vec::new();
    for (path, minor) in gpu_minors(devices) {
        match u32::try_from(minor) {
            Ok(m) if i64::from(m) <= MAX_MINOR => mask |= 1 << m,
            _ => skipped.push((path.display().to_string(), minor)),
        }
    }
    let action = if mask == 0 {
        let removed_stale = match root.remove_file(Path::new(PROFILE)) {
            Ok(removed) => removed,
            Err(e) if e.is_read_only() => false,
            Err(e) => return Err(e.into()),
        };
        Action::NoGpus { removed_stale }
    } else {
        match root.write_file(Path::new(PROFILE), profile_text(mask).as_bytes()) {
            Ok(()) => Action::Written(mask),
            Err(e) if e.is_read_only() => Action::ReadOnly(mask),
            Err(e) => return Err(e.into()),
        }
    };
    Ok(Outcome { action, skipped })
}

#[cfg(test)]
mod tests;

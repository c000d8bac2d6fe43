//! `cdigen hook <step>`: the OCI `createContainer` hooks of cdigen's specs
//! ([`crate::hook`]). Each step reads the container's state from stdin and
//! changes the container's root filesystem; nothing goes to stdout. A
//! failure is one line on stderr, `cdigen hook <step>: <what>`, and exit
//! status 1 (the runtime then fails the container's start and shows the
//! line); something of the image's left alone, or a read-only root, is
//! one line too, with exit status 0.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::hook::{self, compat, ldconfig, profile, symlinks};
use crate::text::{Escaped, path as shown};

/// Arguments of `cdigen hook`.
#[derive(Debug, Args)]
pub struct HookArgs {
    /// The step to run.
    #[command(subcommand)]
    pub step: HookStep,
}

/// The steps of `cdigen hook`.
#[derive(Debug, Subcommand)]
pub enum HookStep {
    /// Create symbolic links in the container (TARGET is written as given; LINK is an absolute
    /// path in the container).
    ///
    /// Missing parent directories of LINK are created (mode 0755). A link already there with the
    /// same target is left as it is; anything else at LINK is the image's own and left alone, with
    /// one line on stderr saying what is there (exit status 0).
    CreateSymlinks(CreateSymlinksArgs),
    /// Enable CUDA forward compatibility when the image's compat driver is newer than the host's.
    ///
    /// When the image has /usr/local/cuda/compat/libcuda.so.X.Y.Z (the highest version among
    /// those files) and X is greater than the host driver's major version, writes
    /// /etc/ld.so.conf.d/00-cdigen-cuda-compat.conf listing /usr/local/cuda/compat, so that the
    /// linker cache (update-ldcache, run after this step) finds that libcuda before the host's.
    /// Otherwise writes nothing, and removes that file if an earlier start left it.
    EnableCudaCompat(EnableCudaCompatArgs),
    /// Update the container's linker cache (/etc/ld.so.cache) for the driver's library folders.
    ///
    /// The host's ldconfig must be a static program. Writes
    /// /etc/ld.so.conf.d/00-cdigen-driver.conf with the folders, then runs ldconfig inside the
    /// container root, isolated from the host: in new mount, PID, network, IPC and UTS
    /// namespaces, after pivot_root into the root, with every proc, sysfs and other host view
    /// under it detached, every mount nodev, a reduced capability bounding set, and the folders
    /// also on its command line (after /usr/local/cuda/compat when enable-cuda-compat enabled it).
    /// It needs root with CAP_SYS_ADMIN; ldconfig is killed after 30 s. On a read-only root
    /// nothing is written or run: one line on stderr, exit status 0.
    UpdateLdcache(UpdateLdcacheArgs),
    /// Show EGL and Vulkan only the container's GPUs, through the driver's application profiles.
    ///
    /// Writes /etc/nvidia/nvidia-application-profiles-rc.d/10-cdigen-container.conf, a profile
    /// for every program setting EGLVisibleDGPUDevices to the mask of the GPUs (bit N for device
    /// minor N, 0 to 63) whose /dev/nvidiaN the runtime creates in the container (linux.devices
    /// of the bundle's config.json). With no GPU node it writes nothing and removes that file if
    /// an earlier start left it. On a read-only root nothing is written: one line on stderr, exit
    /// status 0.
    UpdateApplicationProfile,
}

impl HookStep {
    /// The step's name on the command line.
    pub fn name(&self) -> &'static str {
        match self {
            HookStep::CreateSymlinks(_) => "create-symlinks",
            HookStep::EnableCudaCompat(_) => "enable-cuda-compat",
            HookStep::UpdateLdcache(_) => "update-ldcache",
            HookStep::UpdateApplicationProfile => "update-application-profile",
        }
    }
}

/// Arguments of `cdigen hook create-symlinks`.
#[derive(Debug, Args)]
pub struct CreateSymlinksArgs {
    /// A link to create: TARGET::LINK, such as libcuda.so.1::/usr/lib64/libcuda.so (repeatable,
    /// at most 1024).
    #[arg(long = "link", value_name = "TARGET::LINK")]
    pub links: Vec<OsString>,
}

/// Arguments of `cdigen hook enable-cuda-compat`.
#[derive(Debug, Args)]
pub struct EnableCudaCompatArgs {
    /// The host's driver version, such as 550.90.07.
    #[arg(long, value_name = "VERSION")]
    pub host_driver_version: String,
}

/// Arguments of `cdigen hook update-ldcache`.
#[derive(Debug, Args)]
pub struct UpdateLdcacheArgs {
    /// A folder of driver libraries in the container, absolute and normalized (repeatable, at
    /// most 64).
    #[arg(long = "folder", value_name = "DIR", required = true)]
    pub folders: Vec<String>,
    /// The host's ldconfig [default: the first of /sbin/ldconfig.real, /sbin/ldconfig,
    /// /usr/sbin/ldconfig that exists].
    #[arg(long, value_name = "PATH")]
    pub ldconfig: Option<PathBuf>,
}

/// The `cdigen-hook` program: `cdigen hook` on its own.
#[derive(Debug, clap::Parser)]
#[command(
    name = "cdigen-hook",
    version,
    long_version = super::LONG_VERSION,
    about = "The OCI createContainer hooks of cdigen's NVIDIA specs (cdigen hook), as a static \
program: the container runtime runs them, not you."
)]
struct HookProgram {
    #[command(subcommand)]
    step: HookStep,
}

/// `cdigen-hook [hook] STEP ARGS...`: parses `args` (`argv`, `argv[0]`
/// included; the word `hook` after it is skipped, as specs write `cdigen
/// hook STEP`), runs the step with stdin and stderr, and returns the exit
/// code (2 for a usage error, printed by clap).
pub fn hook_program(args: impl IntoIterator<Item = OsString>) -> u8 {
    let mut args: Vec<OsString> = args.into_iter().collect();
    // `update-ldcache` runs ldconfig through this same program under
    // another name (hook::ldconfig::isolate), whichever binary it is.
    if let Some(code) = crate::hook::ldconfig::isolate::main(&args) {
        return code;
    }
    if args.get(1).is_some_and(|a| a == "hook") {
        args.remove(1);
    }
    let parsed = match <HookProgram as clap::Parser>::try_parse_from(args) {
        Ok(p) => p,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                super::EXIT_ERROR
            } else {
                super::EXIT_OK
            };
        }
    };
    let args = HookArgs { step: parsed.step };
    run(&args, &mut std::io::stdin().lock(), &mut std::io::stderr())
}

/// Runs a step with the state from `input`, reporting on `err`; returns
/// the exit code.
pub(crate) fn run(args: &HookArgs, input: &mut dyn Read, err: &mut dyn Write) -> u8 {
    let step = args.step.name();
    let mut notes = Vec::new();
    let code = match run_step(&args.step, input, &mut notes) {
        Ok(()) => super::EXIT_OK,
        Err(e) => {
            notes.push(e.to_string());
            super::EXIT_FINDINGS
        }
    };
    for note in notes {
        let _ = writeln!(err, "cdigen hook {step}: {}", Escaped(&note));
    }
    code
}

/// The step itself: what to tell the user goes to `notes` (one line
/// each).
fn run_step(
    step: &HookStep,
    input: &mut dyn Read,
    notes: &mut Vec<String>,
) -> Result<(), hook::Error> {
    match step {
        HookStep::CreateSymlinks(a) => {
            let links = symlinks::parse_links(&a.links)?;
            let root = hook::open_root(&hook::read_state(input)?)?;
            for (link, outcome) in symlinks::create_symlinks(&root, &links)? {
                if let symlinks::Outcome::Occupied(what) = outcome {
                    notes.push(format!(
                        "{}: {what}: leaving it (the image's own file wins)",
                        shown(&link.link)
                    ));
                }
            }
        }
        HookStep::EnableCudaCompat(a) => {
            let host = compat::parse_host_version(&a.host_driver_version)?;
            let root = hook::open_root(&hook::read_state(input)?)?;
            match compat::enable_cuda_compat(&root, &host)? {
                compat::Outcome::Enabled { compat } => tracing::info!(
                    "CUDA forward compatibility enabled: driver {compat} in {} (the host's is {host})",
                    compat::COMPAT_DIR
                ),
                compat::Outcome::ReadOnly { compat } => notes.push(format!(
                    "the container's root filesystem is read-only: not enabling the CUDA forward-compatible driver {compat} in {}",
                    compat::COMPAT_DIR
                )),
                other => tracing::debug!("CUDA forward compatibility not enabled: {other:?}"),
            }
        }
        HookStep::UpdateApplicationProfile => {
            let state = hook::read_state(input)?;
            let devices = hook::container_devices(&state.bundle)?;
            let root = hook::open_root(&state)?;
            let got = profile::update_application_profile(&root, &devices)?;
            for (path, minor) in &got.skipped {
                notes.push(format!(
                    "{path}: minor {minor} is not a GPU the application profile can name (0 to {}): leaving it out",
                    profile::MAX_MINOR
                ));
            }
            match got.action {
                profile::Action::ReadOnly(_) => notes.push(format!(
                    "the container's root filesystem is read-only: not writing {} (EGL and Vulkan may list GPUs the container does not have)",
                    profile::PROFILE
                )),
                other => tracing::debug!("application profile: {other:?}"),
            }
        }
        HookStep::UpdateLdcache(a) => {
            let folders = ldconfig::parse_folders(&a.folders)?;
            let program = ldconfig::find_ldconfig(a.ldconfig.as_deref())?;
            let root = hook::open_root(&hook::read_state(input)?)?;
            match ldconfig::update_ldcache(&root, &folders, &program, ldconfig::TIMEOUT)? {
                ldconfig::Outcome::Updated => {}
                ldconfig::Outcome::ReadOnly => notes.push(
                    "the container's root filesystem is read-only: not updating its linker cache \
(the driver libraries load only from the directories the loader searches by default)"
                        .into(),
                ),
            }
        }
    }
    Ok(())
}

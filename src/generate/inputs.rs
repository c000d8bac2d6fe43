//! What a `generate` run starts from, as plain settings the commands fill
//! from their flags: the host and backends ([`Host`]), the definitions and
//! templates ([`Definitions`]); and loading them: the definitions and
//! templates chosen ([`definitions`]), the backends their devices come
//! from ([`backends`]).

use std::path::{Path, PathBuf};

use crate::generator::{self, Loaded};
use crate::render::Templates;
use crate::root::HostRoot;
use crate::text;

/// Where user templates live when no directory is given.
pub const USER_TEMPLATES: &str = "/etc/cdigen/templates";

/// Where devices are discovered from (`--root`, `--backend`,
/// `--driver-root`, `--library-search-path`, `--hook-path`, `--no-nvml`).
#[derive(Debug, Clone)]
pub struct Host {
    /// The directory sysfs, procfs and /dev are read under (`/`).
    pub root: PathBuf,
    /// Only these backends (empty: all).
    pub backends: Vec<String>,
    /// Where the NVIDIA driver's user-space files are (a host path); `None`:
    /// detected.
    pub driver_root: Option<PathBuf>,
    /// More directories to look for the driver's libraries in.
    pub library_search_path: Vec<PathBuf>,
    /// Where container runtimes find the hook program on the host; `None`:
    /// [`default_hook_path`].
    pub hook_path: Option<PathBuf>,
    /// Never load NVML.
    pub no_nvml: bool,
}

impl Host {
    /// Opens the root with the driver's locations and the hook path; it
    /// must look like a Linux host ([`HostRoot::check_host`]): discovering
    /// under anything else finds no device, and every file written for
    /// the host's devices would be removed.
    ///
    /// # Errors
    /// When the root cannot be used or is not a host.
    pub fn open(&self) -> anyhow::Result<HostRoot> {
        let (hook_path, warning) = match &self.hook_path {
            Some(p) => (p.clone(), None),
            None => {
                let exe = std::env::current_exe().ok();
                let chosen = default_hook_path(exe.clone());
                let warning =
                    (!chosen.installed).then(|| hook_path_warning(exe.as_deref(), &chosen.path));
                (chosen.path, warning)
            }
        };
        let root = match HostRoot::open_host(&self.root) {
            Ok(r) => r,
            // Names the root already.
            Err(e @ crate::root::Error::NotAHost { .. }) => return Err(e.into()),
            Err(e) => {
                return Err(anyhow::Error::new(e)
                    .context(format!("cannot use {} as the root", text::path(&self.root))));
            }
        };
        let root = root
            .with_driver_root_or_detect(self.driver_root.as_deref())
            .with_library_search_path(&self.library_search_path)
            .with_hook_path(&hook_path)
            .with_nvml(!self.no_nvml);
        Ok(match warning {
            Some(w) => root.with_hook_path_warning(w),
            None => root,
        })
    }
}

/// The directories a package or an installer puts cdigen in: a cdigen
/// run from one of them (and trusted there, [`crate::trust::program`])
/// stays where it is, so the hooks of specs may name it. The DaemonSets
/// install theirs in `/opt/cdigen/bin` (and set `CDIGEN_HOOK_PATH`).
pub const INSTALLED_DIRS: &[&str] = &[
    "/usr/bin",
    "/usr/sbin",
    "/usr/local/bin",
    "/usr/local/sbin",
    "/bin",
    "/sbin",
    "/opt/cdigen/bin",
];

/// Where the hooks of the specs point when `--hook-path` is not given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultHook {
    /// The program.
    pub path: PathBuf,
    /// Whether it was chosen beside an installed cdigen; `false`: the
    /// package's [`crate::root::DEFAULT_HOOK_PATH`], because this cdigen
    /// runs from elsewhere (a build directory, a download), whose files
    /// move or go and which someone other than root may change.
    pub installed: bool,
}

/// Where the hooks of the specs point when `--hook-path` is not given:
/// when this cdigen (`exe`) is installed, in one of [`INSTALLED_DIRS`] and
/// trusted there, the `cdigen-hook` beside it (the static one the package
/// installs, which no `LD_PRELOAD` of a container reaches) when that is
/// trusted too, else this cdigen itself (`cdigen hook`). Otherwise, the
/// package's [`crate::root::DEFAULT_HOOK_PATH`]: a spec never names a
/// program in a build or a user's directory.
pub fn default_hook_path(exe: Option<PathBuf>) -> DefaultHook {
    let installed = exe.filter(|exe| {
        exe.parent()
            .is_some_and(|d| INSTALLED_DIRS.iter().any(|i| d == Path::new(i)))
            && crate::trust::program(exe).is_ok()
    });
    match installed {
        Some(exe) => {
            let hook = exe.with_file_name("cdigen-hook");
            let path = if crate::trust::program(&hook).is_ok() {
                hook
            } else {
                exe
            };
            DefaultHook {
                path,
                installed: true,
            }
        }
        None => DefaultHook {
            path: PathBuf::from(crate::root::DEFAULT_HOOK_PATH),
            installed: false,
        },
    }
}

/// What a run of this cdigen (`exe`), not installed, says when the
/// hooks of a spec name `hook` (the package's) instead of it.
fn hook_path_warning(exe: Option<&Path>, hook: &Path) -> String {
    let exe = exe.map_or_else(
        || "an unknown path".to_string(),
        |e| text::path(e).to_string(),
    );
    format!(
        "cdigen runs from {exe}, not from an installed location ({}): the hooks of NVIDIA \
         specs name {} instead; give --hook-path (or CDIGEN_HOOK_PATH) to name another \
         installed, root-owned program",
        INSTALLED_DIRS.join(", "),
        text::path(hook)
    )
}

/// Which generator definitions and templates to use (`--generators`,
/// `--templates`, `--generator`).
#[derive(Debug, Clone, Default)]
pub struct Definitions {
    /// Directory of user definitions; `None`: [`generator::USER_DIR`].
    pub generators: Option<PathBuf>,
    /// Directory of user templates; `None`: [`USER_TEMPLATES`].
    pub templates: Option<PathBuf>,
    /// Only these generators (empty: every enabled one).
    pub only: Vec<String>,
}

/// The backends whose devices (and warnings) `generators` need:
/// `backends` when given, else the backends of the generators (empty when
/// there are none: all), plus the generic backend when a generator `join`s
/// generic devices. Every backend still runs, for precedence; the others
/// are not reported.
pub fn backends(backends: &[String], generators: &[Loaded]) -> Vec<String> {
    let mut backends = backends.to_vec();
    if backends.is_empty() {
        for l in generators {
            if !backends.contains(&l.generator.backend) {
                backends.push(l.generator.backend.clone());
            }
        }
    }
    let generic = crate::discover::generic::NAME.to_string();
    if !backends.is_empty()
        && !backends.contains(&generic)
        && generators.iter().any(|l| !l.generator.join.is_empty())
    {
        backends.push(generic);
    }
    backends
}

/// A user directory (given, else the default) as it is to be read: `None`
/// when it does not exist, whether given or the default, which is then
/// skipped with a debug line (a DaemonSet or a unit names the directory
/// where the host may keep them). A path that exists but cannot be read as
/// a directory (a file, no permission) is kept, and reading it fails
/// naming it.
fn user_dir(dir: Option<&Path>, default: &str, what: &str) -> Option<PathBuf> {
    let dir = dir.map_or_else(|| PathBuf::from(default), Path::to_path_buf);
    match dir.try_exists() {
        Ok(false) => {
            tracing::debug!("{}: no such directory: no user {what}", text::path(&dir));
            None
        }
        Ok(true) | Err(_) => Some(dir),
    }
}

/// Loads the definitions (built-in, then `dir`, default
/// `/etc/cdigen/generators.d`, skipped when missing) and picks the ones to
/// run: the `only` names (enabled or not), or every enabled one. A broken
/// user definition ([`generator::Broken`]) takes its generators out of the
/// run and is returned for the command to report as that generator's
/// failure (with `only`, when it would define one of those names); the
/// others run. This is the one place every command that runs generators
/// loads them.
///
/// # Errors
/// A failure of the whole set of definitions ([`generator::load_each`]),
/// or an unknown name in `only`.
pub fn generators(
    dir: Option<&Path>,
    only: &[String],
) -> anyhow::Result<(Vec<Loaded>, Vec<generator::Broken>)> {
    let user = user_dir(dir, generator::USER_DIR, "generator definitions");
    let all = generator::load_each(user.as_slice())?;
    let broken: Vec<generator::Broken> = all
        .broken
        .into_iter()
        .filter(|b| only.is_empty() || b.names.iter().any(|n| only.contains(n)))
        .collect();
    let all = all.loaded;
    for name in only {
        let is_broken = broken.iter().any(|b| b.names.contains(name));
        if !is_broken && !all.iter().any(|l| &l.generator.name == name) {
            let known: Vec<&str> = all.iter().map(|l| l.generator.name.as_str()).collect();
            anyhow::bail!("unknown generator {name:?} (known: {})", known.join(", "));
        }
    }
    let chosen = all
        .into_iter()
        .filter(|l| {
            if only.is_empty() {
                l.generator.enabled
            } else {
                only.contains(&l.generator.name)
            }
        })
        .collect();
    Ok((chosen, broken))
}

/// Loads generators (built-in, then the user directory) and templates
/// (built-in, then the user directory), and picks the ones to run: the
/// `only` names, or every enabled one (of `backends`, when not empty).
/// A user directory that does not exist is skipped, given or not. The
/// broken definitions are returned apart, as [`generators`] does.
///
/// # Errors
/// Invalid templates, a failure of the whole set of definitions, an
/// unknown generator, or a generator whose template does not exist.
pub fn definitions(
    defs: &Definitions,
    backends: &[String],
) -> anyhow::Result<(Vec<Loaded>, Templates, Vec<generator::Broken>)> {
    let templates_dir = user_dir(defs.templates.as_deref(), USER_TEMPLATES, "templates");
    let templates = Templates::load(templates_dir.as_deref())?;
    let (chosen, broken) = generators(defs.generators.as_deref(), &defs.only)?;
    let chosen: Vec<Loaded> = chosen
        .into_iter()
        .filter(|l| backends.is_empty() || backends.contains(&l.generator.backend))
        .collect();
    for l in &chosen {
        if !templates.names().contains(&l.generator.template.as_str()) {
            anyhow::bail!(
                "{}: template {:?} does not exist (known: {})",
                text::path(&l.source),
                l.generator.template,
                templates.names().join(", ")
            );
        }
    }
    Ok((chosen, templates, broken))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::unwrap_used)]
    fn the_hooks_default_to_the_packages_hook_unless_cdigen_is_installed() {
        use std::os::unix::fs::PermissionsExt as _;
        // A build directory, a download: never named by a spec.
        let t = tempfile::tempdir().unwrap();
        let exe = t.path().join("cdigen");
        std::fs::write(&exe, "").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(t.path().join("cdigen-hook"), "").unwrap();
        let package = DefaultHook {
            path: PathBuf::from("/usr/bin/cdigen-hook"),
            installed: false,
        };
        assert_eq!(default_hook_path(Some(exe)), package);
        assert_eq!(default_hook_path(None), package);
        // Installed: beside it (this machine's /bin/sh stands for an
        // installed cdigen; /bin has no cdigen-hook).
        assert_eq!(
            default_hook_path(Some(PathBuf::from("/bin/sh"))),
            DefaultHook {
                path: PathBuf::from("/bin/sh"),
                installed: true,
            }
        );
        // In an installed directory but missing: not installed.
        assert_eq!(
            default_hook_path(Some(PathBuf::from("/usr/bin/no-such-cdigen"))),
            package
        );
    }

    #[test]
    fn backends_asked_for_by_flag_or_by_generator() {
        let all = generator::load(&[]).unwrap();
        let named = |names: &[&str]| -> Vec<Loaded> {
            all.iter()
                .filter(|l| names.contains(&l.generator.name.as_str()))
                .cloned()
                .collect()
        };
        let given = |b: &[&str]| -> Vec<String> { b.iter().map(|b| b.to_string()).collect() };
        assert_eq!(backends(&given(&[]), &named(&["usb-serial"])), ["generic"]);
        assert_eq!(
            backends(&given(&[]), &named(&["nvidia", "vfio"])),
            ["nvidia", "vfio"]
        );
        // amd-gpu joins /dev/kfd from the generic backend.
        assert_eq!(
            backends(&given(&["drm"]), &named(&["amd-gpu"])),
            ["drm", "generic"]
        );
        assert_eq!(
            backends(&given(&[]), &named(&["amd-gpu"])),
            ["drm", "generic"]
        );
        // No generator: nothing narrows the run.
        assert!(backends(&given(&[]), &[]).is_empty());
    }
}

//! Shared by the end-to-end tests: copies of fixture machines to change,
//! and running the real binary without touching the host's configuration
//! or device-info directory.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;

use assert_cmd::Command;
use tempfile::TempDir;

/// A copy of a fixture machine's root in a tempdir: (tempdir, root path).
pub fn machine(name: &str) -> (TempDir, PathBuf) {
    let tmp = TempDir::new().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
        .join("root");
    let dst = tmp.path().join("root");
    let ok = StdCommand::new("cp")
        .arg("-a")
        .arg(&src)
        .arg(&dst)
        .status()
        .unwrap()
        .success();
    assert!(ok, "cp -a {}", src.display());
    (tmp, dst)
}

/// Runs `cdigen` in `cwd`: (exit code, stdout, stderr). User generator
/// definitions are off and device-info files go to `cwd/devinfo` unless
/// the arguments say otherwise.
pub fn cdigen(cwd: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::cargo_bin("cdigen")
        .unwrap()
        .current_dir(cwd)
        .args(args)
        .env_remove("CDIGEN_ROOT")
        .env_remove("CDIGEN_TEMPLATES")
        .env("CDIGEN_GENERATORS", "/nonexistent-cdigen-user-generators")
        // Never the stub libnvidia-ml of a fixture's driver root.
        .env("CDIGEN_NO_NVML", "1")
        // Never the host's device-info directory.
        .env("CDIGEN_DEVINFO_DIR", "devinfo")
        .env("CDIGEN_HOOK_PATH", "/usr/bin/cdigen")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// Names in a directory that do not start with `.`, sorted.
pub fn visible_names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .map(|e| {
            e.map(|e| e.unwrap().file_name().into_string().unwrap())
                .filter(|n| !n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Where a machine's driver tree is in its root (`fixtures/<m>/root/run/
/// nvidia/driver`), as the GPU operator puts it on a host, and where
/// cdigen looks by default.
pub const DRIVER_ROOT: &str = "/run/nvidia/driver";

/// The Rust CDI library (the cncf-tags port, crate 1.1.1) as a command,
/// `../shared/tools/cdi-rs/cdi-rs` beside the crate (its README lists
/// where it differs from the Go library); None (a skip, printed) when it
/// is not there, a failure instead when `CDIGEN_REQUIRE_SHARED` is set (CI
/// sets it).
pub fn cdi_rs(test: &str) -> Option<PathBuf> {
    const REQUIRE_SHARED_VAR: &str = "CDIGEN_REQUIRE_SHARED";
    let tool = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/tools/cdi-rs/cdi-rs");
    if tool.is_file() {
        return Some(tool);
    }
    let required = std::env::var_os(REQUIRE_SHARED_VAR).is_some_and(|v| !v.is_empty() && v != "0");
    assert!(
        !required,
        "{test}: {} is missing, and {REQUIRE_SHARED_VAR} requires it",
        tool.display()
    );
    eprintln!(
        "skipped {test}: no ../shared/tools/cdi-rs/cdi-rs beside the crate (CI has it; \
         {REQUIRE_SHARED_VAR}=1 makes this a failure)"
    );
    None
}

/// The watch's pipeline over the machine at `root` with the built-in
/// generators only (no NVML, hooks naming `/usr/bin/cdigen`), writing
/// specs into `cdi`, without device-info files.
pub fn pipeline(root: &Path, cdi: &Path) -> cdigen::watch::Pipeline {
    cdigen::watch::Pipeline::new(
        cdigen::generate::Host {
            root: root.to_path_buf(),
            backends: Vec::new(),
            driver_root: None,
            library_search_path: Vec::new(),
            hook_path: Some("/usr/bin/cdigen".into()),
            no_nvml: true,
        },
        cdigen::generate::Definitions {
            generators: Some("/nonexistent-cdigen-user-generators".into()),
            templates: None,
            only: Vec::new(),
        },
        cdi.to_path_buf(),
        cdi.with_extension("devinfo"),
        None,
    )
    .unwrap()
    .with_device_info(false)
}

/// The DRA devices of the machine at `root` after one full pass of
/// [`pipeline`] into `cdi`: what `cdigen dra-driver` publishes there.
pub fn dra_devices(root: &Path, cdi: &Path) -> Vec<cdigen::dra::names::DraDevice> {
    use cdigen::deviceplugin::inventory;
    use cdigen::watch::Regenerate as _;
    let mut p = pipeline(root, cdi);
    p.regenerate(&cdigen::watch::Scope::All, &|| false).unwrap();
    let defs = inventory::resources(p.generators()).unwrap();
    let (inv, collisions) = inventory::build(
        &defs,
        p.plans(),
        &p.host_root().unwrap(),
        cdi,
        &inventory::Inventory::default(),
        &std::collections::BTreeSet::new(),
    );
    assert!(collisions.is_empty(), "{collisions:?}");
    cdigen::dra::names::devices(&inv)
}

/// The inventory of the machine at `root` after one full pass of
/// [`pipeline`] into `cdi`, its health measured against `previous` (the
/// AER counts first seen) and judged by `checks`: the driver's next pass.
pub fn inventory_after(
    root: &Path,
    cdi: &Path,
    previous: &cdigen::deviceplugin::inventory::Inventory,
    checks: &cdigen::deviceplugin::signals::Checks,
) -> cdigen::deviceplugin::inventory::Inventory {
    use cdigen::deviceplugin::inventory;
    use cdigen::watch::Regenerate as _;
    let mut p = pipeline(root, cdi);
    p.regenerate(&cdigen::watch::Scope::All, &|| false).unwrap();
    let defs = inventory::resources(p.generators()).unwrap();
    let (inv, collisions) = inventory::build_with(
        &defs,
        p.plans(),
        &p.host_root().unwrap(),
        cdi,
        previous,
        &std::collections::BTreeSet::new(),
        checks,
        inventory::Read::All,
    );
    assert!(collisions.is_empty(), "{collisions:?}");
    inv
}

/// How long a [`Daemon`] is waited for.
const DAEMON_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// A cdigen daemon a test started (`device-plugin`, `dra-driver`), its
/// stderr in `<dir>/log`; killed on drop.
pub struct Daemon {
    child: std::process::Child,
    dir: PathBuf,
}

impl Daemon {
    /// Starts `cmd` with no stdin or stdout and its stderr into
    /// `<dir>/log`.
    pub fn spawn(mut cmd: StdCommand, dir: &Path) -> Daemon {
        use std::process::Stdio;
        let log = fs::File::create(dir.join("log")).unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        Daemon {
            child,
            dir: dir.to_path_buf(),
        }
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }

    /// Waits until the log holds `needle`; returns the log.
    pub fn wait_log(&self, needle: &str) -> String {
        let end = std::time::Instant::now() + DAEMON_WAIT;
        loop {
            let log = self.log();
            if log.contains(needle) {
                return log;
            }
            assert!(
                std::time::Instant::now() < end,
                "timed out waiting for {needle:?} in the log:\n{log}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Its process ID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The values of `name` in the environment `/proc/PID/environ` shows
    /// (what it was started, or last ran itself, with).
    pub fn environ(&self, name: &str) -> Vec<Vec<u8>> {
        let environ = fs::read(format!("/proc/{}/environ", self.pid())).unwrap();
        let prefix = format!("{name}=");
        environ
            .split(|b| *b == 0)
            .filter_map(|v| v.strip_prefix(prefix.as_bytes()))
            .map(<[u8]>::to_vec)
            .collect()
    }

    /// Sends it `SIG<sig>`.
    pub fn signal(&self, sig: &str) {
        let ok = StdCommand::new("kill")
            .args([&format!("-{sig}"), &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{sig}");
    }

    /// Waits for it to exit; its exit status.
    pub fn wait_exit(&mut self) -> Option<i32> {
        let t = std::time::Instant::now();
        while t.elapsed() < DAEMON_WAIT {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s.code();
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("still running after {DAEMON_WAIT:?}:\n{}", self.log());
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Rewrites `root/dev.manifest`: `edit` gets each line and returns its
/// replacement (`None`: dropped). Fails when nothing changed. Returns the
/// original text.
pub fn edit_manifest(root: &Path, edit: impl Fn(&str) -> Option<String>) -> String {
    let path = root.join("dev.manifest");
    let text = fs::read_to_string(&path).unwrap();
    let new: String = text
        .lines()
        .filter_map(|l| edit(l).map(|l| l + "\n"))
        .collect();
    assert_ne!(new, text, "the edit changed nothing");
    fs::write(&path, new).unwrap();
    text
}

//! Shared by the golden tests over `fixtures/` (`tests/fixtures.rs`,
//! `tests/dra_slices.rs`): the machines, the bless switch, and cdigen run
//! with none of the host's configuration.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;

/// `fixtures/` of the crate.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// Every machine: a directory of `fixtures/` with a `root/`.
pub fn machines() -> Vec<String> {
    let mut out: Vec<String> = fs::read_dir(fixtures_dir())
        .unwrap()
        .filter_map(|e| {
            let e = e.unwrap();
            e.path()
                .join("root")
                .is_dir()
                .then(|| e.file_name().into_string().unwrap())
        })
        .collect();
    out.sort();
    out
}

/// Whether the goldens are to be rewritten (`CDIGEN_BLESS=1`).
pub fn bless() -> bool {
    std::env::var_os("CDIGEN_BLESS").is_some()
}

/// Runs cdigen with none of the host's configuration: no user
/// definitions or templates, no NVML (never the stub libnvidia-ml of a
/// fixture's driver root), no device-info directory, root, driver root,
/// node or DRA driver from the environment; hooks name cdigen-hook where
/// the package installs it. (exit status, stdout, stderr).
pub fn cdigen(args: &[&str]) -> (i32, String, String) {
    let out = Command::cargo_bin("cdigen")
        .unwrap()
        .args(args)
        .env_remove("CDIGEN_ROOT")
        .env_remove("CDIGEN_TEMPLATES")
        .env("CDIGEN_GENERATORS", "/nonexistent-cdigen-user-generators")
        .env("CDIGEN_NO_NVML", "1")
        .env(
            "CDIGEN_DEVINFO_DIR",
            "/nonexistent-cdigen-devinfo-dir-set-per-test",
        )
        .env("CDIGEN_HOOK_PATH", "/usr/bin/cdigen-hook")
        .env_remove("CDIGEN_DRIVER_ROOT")
        .env_remove("CDIGEN_LIBRARY_SEARCH_PATH")
        .env_remove("NODE_NAME")
        .env_remove("CDIGEN_DRA_DRIVER")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

//! `cdigen hook` through the binary, as a runtime runs it: the OCI state on
//! stdin, a bundle with `config.json` and a root filesystem in a temporary
//! directory; exit codes, stdout (always empty) and stderr text.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::os::unix::fs::{PermissionsExt as _, symlink};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use tempfile::TempDir;

/// A bundle: `config.json` with `root.path` `rootfs`, and `rootfs/`.
struct Bundle {
    dir: TempDir,
}

impl Bundle {
    fn new() -> Bundle {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("rootfs")).unwrap();
        std::fs::write(
            dir.path().join("config.json"),
            r#"{"ociVersion":"1.2.0","root":{"path":"rootfs"},"process":{"args":["sh"]}}"#,
        )
        .unwrap();
        Bundle { dir }
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("rootfs")
    }

    fn state(&self) -> String {
        serde_json::json!({
            "ociVersion": "1.2.0",
            "id": "c1",
            "status": "creating",
            "pid": 4242,
            "bundle": self.dir.path(),
            "annotations": {"io.example": "x"},
        })
        .to_string()
    }

    /// Runs `cdigen hook ARGS` with this bundle's state on stdin.
    fn hook(&self, args: &[&str]) -> (i32, String, String) {
        run(args, &self.state())
    }
}

/// Runs `cdigen hook ARGS` with `stdin`; returns (exit code, stdout,
/// stderr).
fn run(args: &[&str], stdin: &str) -> (i32, String, String) {
    let out = Command::cargo_bin("cdigen")
        .unwrap()
        .env_remove("RUST_LOG")
        .arg("hook")
        .args(args)
        .write_stdin(stdin)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    (
        out.status.code().expect("exited, not killed"),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn create_symlinks_creates_and_leaves_the_images_files() {
    let b = Bundle::new();
    std::fs::create_dir_all(b.root().join("usr/lib64")).unwrap();
    symlink("usr/lib64", b.root().join("lib64")).unwrap();
    std::fs::write(b.root().join("usr/lib64/libcuda.so"), "the image's").unwrap();
    let args = [
        "create-symlinks",
        "--link",
        "libcuda.so.1::/lib64/libcuda.so",
        "--link",
        "libcuda.so.550.90.07::/lib64/libcuda.so.1",
        "--link",
        "../card1::/dev/dri/by-path/pci-0000:41:00.0-card",
    ];
    let (code, out, err) = b.hook(&args);
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (
            0,
            "",
            "cdigen hook create-symlinks: /lib64/libcuda.so: a regular file is there: leaving it (the image's own file wins)\n"
        )
    );
    assert_eq!(
        std::fs::read_link(b.root().join("usr/lib64/libcuda.so.1")).unwrap(),
        Path::new("libcuda.so.550.90.07")
    );
    assert_eq!(
        std::fs::read_link(b.root().join("dev/dri/by-path/pci-0000:41:00.0-card")).unwrap(),
        Path::new("../card1")
    );
    // Again: the same line for the image's file, nothing for ours.
    let (code, _, err2) = b.hook(&args);
    assert_eq!((code, err2), (0, err));
}

#[test]
fn bad_input_fails_with_one_line_naming_it() {
    let b = Bundle::new();
    let config = b.dir.path().join("config.json").display().to_string();
    for (args, stdin, want) in [
        (
            vec!["create-symlinks", "--link", "x::/l"],
            "{".to_string(),
            "cdigen hook create-symlinks: the container state on stdin is not valid: EOF while parsing an object at line 1 column 1".to_string(),
        ),
        (
            vec!["create-symlinks", "--link", "x::/l"],
            r#"{"id":"c1"}"#.to_string(),
            "cdigen hook create-symlinks: the container state on stdin is not valid: missing field `bundle` at line 1 column 11".to_string(),
        ),
        (
            vec!["create-symlinks", "--link", "x::l"],
            b.state(),
            "cdigen hook create-symlinks: --link x::l: the link must be an absolute path in the container".to_string(),
        ),
        (
            vec!["enable-cuda-compat", "--host-driver-version", "five"],
            b.state(),
            "cdigen hook enable-cuda-compat: --host-driver-version five: not a driver version (expected numbers separated by dots, such as 550.90.07)".to_string(),
        ),
        (
            vec!["update-ldcache", "--folder", "/usr/lib64", "--ldconfig", "/nonexistent/ldconfig"],
            b.state(),
            "cdigen hook update-ldcache: --ldconfig /nonexistent/ldconfig: /nonexistent: No such file or directory (os error 2)".to_string(),
        ),
        // The hook's working directory is the container's root: a
        // relative program would be the image's, run as root.
        (
            vec!["update-ldcache", "--folder", "/usr/lib64", "--ldconfig", "sbin/ldconfig"],
            b.state(),
            "cdigen hook update-ldcache: --ldconfig sbin/ldconfig: not an absolute path (it would be looked up from the hook's working directory, the container's root filesystem)".to_string(),
        ),
        (
            vec!["update-ldcache", "--folder", "/usr/../lib"],
            b.state(),
            "cdigen hook update-ldcache: --folder /usr/../lib: must not contain ..".to_string(),
        ),
    ] {
        let (code, out, err) = run(&args, &stdin);
        assert_eq!((code, out.as_str(), err.as_str()), (1, "", format!("{want}\n").as_str()), "{args:?}");
    }
    // A bundle without config.json, and one without root.path.
    std::fs::remove_file(b.dir.path().join("config.json")).unwrap();
    let (code, _, err) = b.hook(&["update-ldcache", "--folder", "/usr/lib64"]);
    assert_eq!(
        (code, err),
        (
            1,
            format!(
                "cdigen hook update-ldcache: {config}: No such file or directory (os error 2)\n"
            )
        )
    );
    std::fs::write(b.dir.path().join("config.json"), r#"{"root":{}}"#).unwrap();
    let (code, _, err) = b.hook(&["update-ldcache", "--folder", "/usr/lib64"]);
    assert_eq!(
        (code, err),
        (
            1,
            format!("cdigen hook update-ldcache: {config}: no root.path\n")
        )
    );
}

#[test]
fn a_state_over_the_limit_is_refused() {
    let b = Bundle::new();
    let mut state = b.state();
    state.push_str(&" ".repeat(1 << 20));
    let (code, out, err) = run(&["create-symlinks", "--link", "x::/l"], &state);
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (
            1,
            "",
            "cdigen hook create-symlinks: the container state on stdin is larger than 1048576 bytes\n"
        )
    );
}

#[test]
fn enable_cuda_compat_writes_the_conf_only_for_a_newer_driver() {
    let b = Bundle::new();
    let compat = b.root().join("usr/local/cuda/compat");
    std::fs::create_dir_all(&compat).unwrap();
    std::fs::write(compat.join("libcuda.so.555.42.06"), "").unwrap();
    let conf = b.root().join("etc/ld.so.conf.d/00-cdigen-cuda-compat.conf");
    let (code, out, err) = b.hook(&["enable-cuda-compat", "--host-driver-version=550.90.07"]);
    assert_eq!((code, out.as_str(), err.as_str()), (0, "", ""));
    assert!(
        std::fs::read_to_string(&conf)
            .unwrap()
            .ends_with("\n/usr/local/cuda/compat\n")
    );
    let (code, _, err) = b.hook(&["enable-cuda-compat", "--host-driver-version", "560.28.03"]);
    assert_eq!((code, err.as_str()), (0, ""));
    assert!(!conf.exists());
}

#[test]
fn update_ldcache_runs_the_given_ldconfig() {
    let b = Bundle::new();
    let tools = tempfile::tempdir().unwrap();
    let fake = tools.path().join("ldconfig");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho \"ldconfig: no such directory $7\" >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (code, out, err) = b.hook(&[
        "update-ldcache",
        "--folder",
        "/usr/lib64",
        "--ldconfig",
        fake.to_str().unwrap(),
    ]);
    assert_eq!(
        (code, out.as_str(), err),
        (
            1,
            "",
            format!(
                "cdigen hook update-ldcache: {} -r {} failed (exit status 1): ldconfig: no such directory /usr/lib64\n",
                fake.display(),
                b.root().display()
            )
        )
    );
    assert!(
        b.root()
            .join("etc/ld.so.conf.d/00-cdigen-driver.conf")
            .is_file()
    );
}

#[test]
fn update_ldcache_refuses_an_ldconfig_others_could_write() {
    let b = Bundle::new();
    let tools = tempfile::tempdir().unwrap();
    let fake = tools.path().join("ldconfig");
    std::fs::write(&fake, "#!/bin/sh\ntouch \"$0.ran\"\n").unwrap();
    for (mode, who) in [(0o775, "its group"), (0o757, "others")] {
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(mode)).unwrap();
        let (code, out, err) = b.hook(&[
            "update-ldcache",
            "--folder",
            "/usr/lib64",
            "--ldconfig",
            fake.to_str().unwrap(),
        ]);
        assert_eq!(
            (code, out.as_str(), err),
            (
                1,
                "",
                format!(
                    "cdigen hook update-ldcache: --ldconfig {}: is writable by {who}\n",
                    fake.display()
                )
            )
        );
    }
    assert!(!tools.path().join("ldconfig.ran").exists());
    if rustix::process::geteuid().is_root() {
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::chown(&fake, Some(1000), None).unwrap();
        let (code, _, err) = b.hook(&[
            "update-ldcache",
            "--folder",
            "/usr/lib64",
            "--ldconfig",
            fake.to_str().unwrap(),
        ]);
        assert_eq!(
            (code, err),
            (
                1,
                format!(
                    "cdigen hook update-ldcache: --ldconfig {}: is owned by uid 1000, not root\n",
                    fake.display()
                )
            )
        );
        assert!(!tools.path().join("ldconfig.ran").exists());
    }
}

#[test]
fn usage_errors_exit_2() {
    let (code, out, err) = run(&["update-ldcache"], "");
    assert_eq!((code, out.as_str()), (2, ""));
    assert!(err.contains("--folder <DIR>"), "{err}");
    let (code, _, _) = run(&["no-such-step"], "");
    assert_eq!(code, 2);
}

/// `cdigen-hook` runs the same steps, from the command line specs write
/// (`cdigen hook STEP`, argv[0] whatever it is) or without the word `hook`.
#[test]
fn the_hook_program_takes_the_specs_command_line() {
    for with_hook in [true, false] {
        let b = Bundle::new();
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_cdigen-hook"));
        if with_hook {
            cmd.arg0("cdigen").arg("hook");
        }
        let out = assert_cmd::Command::from_std(cmd)
            .env_remove("RUST_LOG")
            .args([
                "create-symlinks",
                "--link",
                "libcuda.so.1::/usr/lib64/libcuda.so",
            ])
            .write_stdin(b.state())
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .unwrap();
        assert_eq!(
            (out.status.code(), out.stderr.as_slice()),
            (Some(0), b"".as_slice()),
            "{with_hook}"
        );
        assert_eq!(
            std::fs::read_link(b.root().join("usr/lib64/libcuda.so")).unwrap(),
            Path::new("libcuda.so.1")
        );
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cdigen-hook"))
        .args(["hook", "no-such-step"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cdigen-hook"))
        .args([
            "update-ldcache",
            "--folder",
            "/usr/lib64",
            "--ldconfig",
            "ldconfig",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).as_ref()
        ),
        (
            Some(1),
            "cdigen hook update-ldcache: --ldconfig ldconfig: not an absolute path (it would be looked up from the hook's working directory, the container's root filesystem)\n"
        )
    );
}

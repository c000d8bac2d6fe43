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

/// The GPUs of the runtime's `linux.devices` (minors 1 and 3) make the
/// profile's mask; a container without GPUs gets none, and a link of the
/// image pointing out of its root leads the file into the root, never out.
#[test]
fn update_application_profile_names_the_containers_gpus() {
    let b = Bundle::new();
    let config = |devices: serde_json::Value| {
        std::fs::write(
            b.dir.path().join("config.json"),
            serde_json::json!({
                "ociVersion": "1.2.0",
                "root": {"path": "rootfs"},
                "linux": {"devices": devices},
            })
            .to_string(),
        )
        .unwrap();
    };
    config(serde_json::json!([
        {"path": "/dev/nvidia3", "type": "c", "major": 195, "minor": 3},
        {"path": "/dev/nvidiactl", "type": "c", "major": 195, "minor": 255},
        {"path": "/dev/nvidia1", "type": "c", "major": 195, "minor": 1},
        {"path": "/dev/nvidia70", "type": "c", "major": 195, "minor": 70},
    ]));
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(b.root().join("etc")).unwrap();
    symlink(outside.path(), b.root().join("etc/nvidia")).unwrap();
    let (code, out, err) = b.hook(&["update-application-profile"]);
    assert_eq!((code, out.as_str()), (0, ""));
    assert_eq!(
        err,
        "cdigen hook update-application-profile: /dev/nvidia70: minor 70 is not a GPU the \
         application profile can name (0 to 63): leaving it out\n"
    );
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    // The absolute link resolves inside the root: /etc/nvidia is <outside> there.
    let profile = b.root().join(format!(
        "{}/nvidia-application-profiles-rc.d/10-cdigen-container.conf",
        outside.path().display().to_string().trim_start_matches('/')
    ));
    let text = std::fs::read_to_string(&profile).unwrap();
    assert!(text.contains("[\"EGLVisibleDGPUDevices\",0xa]"), "{text}");
    config(serde_json::json!([]));
    let (code, _, err) = b.hook(&["update-application-profile"]);
    assert_eq!((code, err.as_str()), (0, ""));
    assert!(!profile.exists());
    // A config.json that is not one is named.
    std::fs::write(b.dir.path().join("config.json"), "{").unwrap();
    let (code, _, err) = b.hook(&["update-application-profile"]);
    assert_eq!(code, 1);
    assert!(
        err.starts_with("cdigen hook update-application-profile: ")
            && err.contains("config.json: not a valid OCI runtime configuration"),
        "{err}"
    );
}

#[test]
fn update_ldcache_refuses_an_ldconfig_that_is_not_a_static_program() {
    let b = Bundle::new();
    let tools = tempfile::tempdir().unwrap();
    let fake = tools.path().join("ldconfig");
    std::fs::write(&fake, "#!/bin/sh\nexec /sbin/ldconfig.real \"$@\"\n").unwrap();
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
                "cdigen hook update-ldcache: {}: not an ELF executable for this machine (no ELF \
magic number): ldconfig runs inside the container root, where an interpreter or libraries it \
loads would be the image's; name a statically linked ldconfig with --ldconfig (on Ubuntu \
/sbin/ldconfig is a shell script, /sbin/ldconfig.real the program)\n",
                fake.display(),
            )
        )
    );
    // Refused before anything was written.
    assert!(!b.root().join("etc").exists());
}

/// The host's ldconfig when the real-ldconfig tests can run here (root, a
/// static ldconfig, cc), else why not.
fn real_ldconfig() -> Result<PathBuf, String> {
    if !rustix::process::geteuid().is_root() {
        return Err("not root (namespaces and mounts)".into());
    }
    let program = cdigen::hook::ldconfig::find_ldconfig(None).map_err(|e| e.to_string())?;
    cdigen::hook::ldconfig::isolate::load_program(&program).map_err(|e| e.to_string())?;
    if !std::process::Command::new("cc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return Err("no cc to build a shared object".into());
    }
    Ok(program)
}

/// Builds a shared object with `soname` at `path`.
fn shared_object(soname: &str, path: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("lib.c");
    std::fs::write(&src, "int cdigen_test(void) { return 1; }\n").unwrap();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let out = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", &format!("-Wl,-soname,{soname}"), "-o"])
        .arg(path)
        .arg(&src)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The linker cache of `root`, as (soname, path) in cache order.
fn cache_of(root: &Path) -> Vec<(String, String)> {
    let bytes = std::fs::read(root.join("etc/ld.so.cache")).unwrap();
    cdigen::ldcache::parse(&bytes)
        .unwrap()
        .into_iter()
        .map(|e| (e.key, e.path))
        .collect()
}

#[test]
fn update_ldcache_caches_the_folders_with_the_real_ldconfig() {
    if let Err(why) = real_ldconfig() {
        println!("skipped: {why}");
        return;
    }
    for with_include in [true, false] {
        let b = Bundle::new();
        let r = b.root();
        std::fs::create_dir_all(r.join("etc")).unwrap();
        if with_include {
            std::fs::write(
                r.join("etc/ld.so.conf"),
                "include /etc/ld.so.conf.d/*.conf\n",
            )
            .unwrap();
        }
        // Merged /usr, as most images now have it.
        std::fs::create_dir_all(r.join("usr/lib64")).unwrap();
        symlink("usr/lib64", r.join("lib64")).unwrap();
        shared_object("libfoo.so.1", &r.join("usr/lib64/libfoo.so.1.2.3"));
        let (code, out, err) = b.hook(&["update-ldcache", "--folder", "/usr/lib64"]);
        assert_eq!((code, out.as_str(), err.as_str()), (0, "", ""));
        let cache = cache_of(&r);
        assert!(
            cache.contains(&("libfoo.so.1".into(), "/usr/lib64/libfoo.so.1".into())),
            "include: {with_include}: {cache:?}"
        );
        // ldconfig made the soname link, inside the root.
        assert_eq!(
            std::fs::read_link(r.join("usr/lib64/libfoo.so.1")).unwrap(),
            Path::new("libfoo.so.1.2.3")
        );
    }
}

#[test]
fn update_ldcache_puts_an_enabled_compat_libcuda_first() {
    if let Err(why) = real_ldconfig() {
        println!("skipped: {why}");
        return;
    }
    let b = Bundle::new();
    let r = b.root();
    std::fs::create_dir_all(r.join("etc")).unwrap();
    std::fs::write(
        r.join("etc/ld.so.conf"),
        "include /etc/ld.so.conf.d/*.conf\n",
    )
    .unwrap();
    shared_object("libcuda.so.1", &r.join("usr/lib64/libcuda.so.550.90.07"));
    shared_object(
        "libcuda.so.1",
        &r.join("usr/local/cuda/compat/libcuda.so.555.42.06"),
    );
    let (code, _, err) = b.hook(&["enable-cuda-compat", "--host-driver-version=550.90.07"]);
    assert_eq!((code, err.as_str()), (0, ""));
    let (code, _, err) = b.hook(&["update-ldcache", "--folder", "/usr/lib64"]);
    assert_eq!((code, err.as_str()), (0, ""));
    let first = cache_of(&r).into_iter().find(|(k, _)| k == "libcuda.so.1");
    assert_eq!(
        first,
        Some((
            "libcuda.so.1".into(),
            "/usr/local/cuda/compat/libcuda.so.1".into()
        ))
    );
}

/// Without `CAP_SYS_ADMIN` (root, but `setpriv` dropped it from the
/// bounding set) ldconfig cannot be isolated: the step fails saying why
/// and runs nothing, rather than running ldconfig over the root unsafely.
#[test]
fn update_ldcache_without_cap_sys_admin_fails_and_runs_nothing() {
    if let Err(why) = real_ldconfig() {
        println!("skipped: {why}");
        return;
    }
    if std::process::Command::new("setpriv")
        .arg("--version")
        .output()
        .is_err()
    {
        println!("skipped: no setpriv");
        return;
    }
    let b = Bundle::new();
    let r = b.root();
    std::fs::create_dir_all(r.join("etc")).unwrap();
    shared_object("libfoo.so.1", &r.join("usr/lib64/libfoo.so.1.2.3"));
    let out = std::process::Command::new("setpriv")
        .args([
            "--bounding-set=-sys_admin",
            "--inh-caps=-sys_admin",
            env!("CARGO_BIN_EXE_cdigen"),
            "hook",
            "update-ldcache",
            "--folder",
            "/usr/lib64",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write as _;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(b.state().as_bytes())?;
            child.wait_with_output()
        })
        .unwrap();
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned()
        ),
        (
            Some(1),
            "cdigen hook update-ldcache: cannot isolate ldconfig from the host, so it was not run: \
cannot make new namespaces (unshare): Operation not permitted (os error 1) (it needs root with \
CAP_SYS_ADMIN)\n"
                .to_string()
        )
    );
    assert!(!r.join("etc/ld.so.cache").exists());
    assert!(!r.join("usr/lib64/libfoo.so.1").exists());
}

/// A procfs mounted in a root, as the runtime mounts the container's
/// before the hooks run; unmounted when dropped.
struct ProcMount(PathBuf);

impl ProcMount {
    fn new(root: &Path) -> ProcMount {
        let at = root.join("proc");
        std::fs::create_dir_all(&at).unwrap();
        rustix::mount::mount(
            "proc",
            &at,
            "proc",
            rustix::mount::MountFlags::empty(),
            None,
        )
        .unwrap();
        ProcMount(at)
    }
}

impl Drop for ProcMount {
    fn drop(&mut self) {
        let _ = rustix::mount::unmount(&self.0, rustix::mount::UnmountFlags::DETACH);
    }
}

/// Every path under `dir`, relative, symlinks not followed.
fn listing(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            out.push(path.strip_prefix(dir).unwrap().display().to_string());
            if std::fs::symlink_metadata(&path).unwrap().is_dir() {
                todo.push(path);
            }
        }
    }
    out.sort();
    out
}

/// An image that points ldconfig at the host through its `/proc` (this
/// test's process: its root is the host's `/`): the aux cache directory,
/// a library directory and an included configuration file on the host,
/// and its cache file symlinked out. Nothing of the host is written or
/// shown, and the image's own library is cached.
#[test]
fn update_ldcache_keeps_a_hostile_image_inside_its_root() {
    if let Err(why) = real_ldconfig() {
        println!("skipped: {why}");
        return;
    }
    let host = tempfile::tempdir().unwrap();
    let (aux, libs, etc) = (
        host.path().join("aux"),
        host.path().join("libs"),
        host.path().join("etc"),
    );
    for d in [&aux, &libs, &etc] {
        std::fs::create_dir(d).unwrap();
    }
    // A host library without its soname link: ldconfig would make one.
    shared_object("libhost.so.1", &libs.join("libhost.so.1.0"));
    std::fs::write(
        host.path().join("secret.conf"),
        "API_KEY=value-secret\nPASSWORD=hunter2\n",
    )
    .unwrap();
    let before = listing(host.path());
    let out = |p: &Path| format!("/proc/{}/root{}", std::process::id(), p.display());
    for failing in [false, true] {
        let b = Bundle::new();
        let r = b.root();
        let _proc = ProcMount::new(&r);
        std::fs::create_dir_all(r.join("var/cache")).unwrap();
        std::fs::create_dir_all(r.join("etc")).unwrap();
        symlink(out(&aux), r.join("var/cache/ldconfig")).unwrap();
        std::fs::write(
            r.join("etc/ld.so.conf"),
            format!(
                "/opt/image/lib\n{}\ninclude {}\ninclude /etc/ld.so.conf.d/*.conf\n",
                out(&libs),
                out(&host.path().join("secret.conf"))
            ),
        )
        .unwrap();
        if failing {
            // The cache cannot be written: ldconfig fails and the error
            // shows what it said.
            std::fs::create_dir(r.join("etc/ld.so.cache")).unwrap();
        } else {
            symlink(out(&etc.join("ld.so.cache")), r.join("etc/ld.so.cache")).unwrap();
        }
        shared_object("libimage.so.2", &r.join("opt/image/lib/libimage.so.2.0"));
        shared_object("libdrv.so.1", &r.join("usr/lib64/libdrv.so.1.0"));
        let (code, out_text, err) = b.hook(&["update-ldcache", "--folder", "/usr/lib64"]);
        assert_eq!(out_text, "");
        assert!(!err.contains("secret") && !err.contains("hunter2"), "{err}");
        assert_eq!(listing(host.path()), before, "failing: {failing}: {err}");
        if failing {
            assert_eq!(code, 1, "{err}");
            assert!(err.contains(" failed (exit status 1): "), "{err}");
            continue;
        }
        assert_eq!((code, err.as_str()), (0, ""));
        let cache = cache_of(&r);
        for (key, path) in [
            ("libimage.so.2", "/opt/image/lib/libimage.so.2"),
            ("libdrv.so.1", "/usr/lib64/libdrv.so.1"),
        ] {
            assert!(cache.contains(&(key.into(), path.into())), "{cache:?}");
        }
        assert!(!cache.iter().any(|(k, _)| k == "libhost.so.1"), "{cache:?}");
        // The cache replaced the image's symlink, inside the root.
        assert!(
            std::fs::symlink_metadata(r.join("etc/ld.so.cache"))
                .unwrap()
                .is_file()
        );
    }
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

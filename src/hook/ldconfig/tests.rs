#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::os::unix::fs::{PermissionsExt as _, symlink};
use std::path::PathBuf;
use std::time::Instant;

use super::*;
use crate::hook::compat::{DriverVersion, enable_cuda_compat};
use crate::hook::inroot::Resolver;
use crate::hook::test_support::{ReadOnlyMount, mkfifo, with_timeout};

fn folders(args: &[&str]) -> Vec<Folder> {
    parse_folders(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
}

#[test]
fn folders_must_be_absolute_normalized_paths() {
    for ok in [
        "/usr/lib64",
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/x86_64-linux-gnu/vdpau",
        "/",
    ] {
        assert_eq!(Folder::parse(ok).unwrap().as_str(), ok);
    }
    for (bad, why) in [
        ("usr/lib64", "not an absolute path"),
        ("", "not an absolute path"),
        ("/usr/../etc", "must not contain .."),
        ("/usr/lib64/..", "must not contain .."),
        (
            "/usr//lib64",
            "not a normalized path (no empty or . component, no trailing /)",
        ),
        (
            "/usr/lib64/",
            "not a normalized path (no empty or . component, no trailing /)",
        ),
        (
            "/usr/./lib64",
            "not a normalized path (no empty or . component, no trailing /)",
        ),
        (
            "/usr/lib 64",
            "contains whitespace, a control character, # or =, which ld.so.conf would misread",
        ),
        (
            "/usr/lib64\ninclude /x",
            "contains whitespace, a control character, # or =, which ld.so.conf would misread",
        ),
        (
            "/usr/lib64#x",
            "contains whitespace, a control character, # or =, which ld.so.conf would misread",
        ),
        (
            "/usr/lib64=libc6",
            "contains whitespace, a control character, # or =, which ld.so.conf would misread",
        ),
    ] {
        assert_eq!(
            Folder::parse(bad).unwrap_err().to_string(),
            format!("--folder {}: {why}", crate::text::escape(bad)),
            "{bad:?}"
        );
    }
    let long = format!("/{}", "x".repeat(4096));
    assert!(
        Folder::parse(&long)
            .unwrap_err()
            .to_string()
            .ends_with(": longer than 4096 bytes")
    );
}

#[test]
fn folders_are_bounded_and_deduplicated() {
    assert_eq!(
        folders(&["/b", "/a", "/b"]),
        [Folder("/b".into()), Folder("/a".into())]
    );
    let many: Vec<String> = (0..=MAX_FOLDERS).map(|i| format!("/d{i}")).collect();
    assert_eq!(
        parse_folders(&many).unwrap_err().to_string(),
        "more than 64 --folder arguments"
    );
    assert_eq!(
        parse_folders(&many[..MAX_FOLDERS]).unwrap().len(),
        MAX_FOLDERS
    );
}

#[test]
fn a_missing_ldconfig_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("ldconfig");
    assert_eq!(
        find_ldconfig(Some(&missing)).unwrap_err().to_string(),
        format!(
            "--ldconfig {}: No such file or directory (os error 2)",
            missing.display()
        )
    );
    assert_eq!(
        find_ldconfig(Some(tmp.path())).unwrap_err().to_string(),
        format!(
            "--ldconfig {}: a directory, not a program",
            tmp.path().display()
        )
    );
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    assert_eq!(
        find_ldconfig_in(&[&a, &b]).unwrap_err().to_string(),
        format!(
            "no ldconfig found (looked for {}, {}); name one with --ldconfig",
            a.display(),
            b.display()
        )
    );
    std::fs::write(&b, "").unwrap();
    std::fs::create_dir(&a).unwrap();
    assert_eq!(find_ldconfig_in(&[&a, &b]).unwrap(), b);
    std::fs::remove_dir(&a).unwrap();
    std::fs::write(&a, "").unwrap();
    assert_eq!(find_ldconfig_in(&[&a, &b]).unwrap(), a);
}

/// A shell script standing in for ldconfig.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A temp dir with an empty `root/`, opened.
fn fixture() -> (tempfile::TempDir, InRoot) {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("root")).unwrap();
    let root = InRoot::open(&tmp.path().join("root")).unwrap();
    (tmp, root)
}

#[test]
fn writes_the_conf_then_runs_ldconfig_on_the_root_with_the_folders() {
    let (tmp, root) = fixture();
    let args_file = tmp.path().join("args");
    let env_file = tmp.path().join("env");
    let fake = script(
        tmp.path(),
        "ldconfig",
        &format!(
            "printf '%s\\n' \"$@\" > {}; env > {}",
            args_file.display(),
            env_file.display()
        ),
    );
    let got = update_ldcache(
        &root,
        &folders(&[
            "/usr/lib/x86_64-linux-gnu",
            "/usr/lib/x86_64-linux-gnu/vdpau",
        ]),
        &fake,
        TIMEOUT,
    )
    .unwrap();
    assert_eq!(got, Outcome::Updated);
    assert_eq!(
        std::fs::read_to_string(
            tmp.path()
                .join("root/etc/ld.so.conf.d/00-cdigen-driver.conf")
        )
        .unwrap(),
        "# Written by cdigen hook update-ldcache: the driver libraries mounted into this container.\n\
/usr/lib/x86_64-linux-gnu\n/usr/lib/x86_64-linux-gnu/vdpau\n"
    );
    let root_path = tmp.path().join("root").display().to_string();
    assert_eq!(
        std::fs::read_to_string(&args_file).unwrap(),
        format!(
            "-r\n{root_path}\n-C\n/etc/ld.so.cache\n-f\n/etc/ld.so.conf\n\
/usr/lib/x86_64-linux-gnu\n/usr/lib/x86_64-linux-gnu/vdpau\n"
        )
    );
    // Nothing of the hook's environment but PATH and LC_ALL.
    let env = std::fs::read_to_string(&env_file).unwrap();
    assert!(env.lines().any(|l| l == "LC_ALL=C"), "{env}");
    assert!(
        env.lines()
            .any(|l| l == "PATH=/usr/sbin:/usr/bin:/sbin:/bin"),
        "{env}"
    );
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy().to_string();
        if !["PATH", "LC_ALL", "PWD", "SHLVL", "_"].contains(&key.as_str()) {
            assert!(
                !env.lines().any(|l| l.starts_with(&format!("{key}="))),
                "{key} leaked"
            );
        }
    }
}

#[test]
fn the_compat_directory_goes_first_when_enabled() {
    let (tmp, root) = fixture();
    let args_file = tmp.path().join("args");
    let fake = script(
        tmp.path(),
        "ldconfig",
        &format!("printf '%s\\n' \"$@\" > {}", args_file.display()),
    );
    let compat = tmp.path().join("root/usr/local/cuda/compat");
    std::fs::create_dir_all(&compat).unwrap();
    std::fs::write(compat.join("libcuda.so.555.42.06"), "").unwrap();
    let host = DriverVersion::parse("550.90.07").unwrap();
    enable_cuda_compat(&root, &host).unwrap();
    update_ldcache(&root, &folders(&["/usr/lib64"]), &fake, TIMEOUT).unwrap();
    let args = std::fs::read_to_string(&args_file).unwrap();
    assert!(
        args.ends_with("/etc/ld.so.conf\n/usr/local/cuda/compat\n/usr/lib64\n"),
        "{args}"
    );
}

#[test]
fn a_failing_ldconfig_shows_what_it_said() {
    let (tmp, root) = fixture();
    let fake = script(
        tmp.path(),
        "ldconfig",
        "echo 'ldconfig: /etc/ld.so.conf: bad line' >&2; echo >&2; echo '  second  ' >&2; exit 3",
    );
    let e = update_ldcache(&root, &folders(&["/usr/lib64"]), &fake, TIMEOUT).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{} -r {} failed (exit status 3): ldconfig: /etc/ld.so.conf: bad line; second",
            fake.display(),
            root.path().display()
        )
    );
    // Killed by a signal.
    let fake = script(tmp.path(), "killed", "kill -9 $$");
    let e = update_ldcache(&root, &folders(&["/usr/lib64"]), &fake, TIMEOUT).unwrap_err();
    assert!(
        e.to_string().ends_with(" failed (killed by signal 9)"),
        "{e}"
    );
}

#[test]
fn ldconfig_stderr_is_bounded() {
    let (tmp, root) = fixture();
    let fake = script(
        tmp.path(),
        "ldconfig",
        "head -c 4000000 /dev/zero | tr '\\0' x >&2; exit 1",
    );
    let r = InRoot::open(root.path()).unwrap();
    let e = with_timeout(move || {
        update_ldcache(&r, &folders(&["/usr/lib64"]), &fake, TIMEOUT).unwrap_err()
    });
    let text = e.to_string();
    assert!(text.len() < MAX_STDERR + 500, "{}", text.len());
    assert!(text.ends_with(&"x".repeat(MAX_STDERR)), "{}", &text[..200]);
}

#[test]
fn a_hanging_ldconfig_is_killed_with_what_it_started() {
    let (tmp, root) = fixture();
    let pid_file = tmp.path().join("pid");
    let fake = script(
        tmp.path(),
        "ldconfig",
        &format!("sleep 60 & echo $! > {}; wait", pid_file.display()),
    );
    let start = Instant::now();
    let e = update_ldcache(
        &root,
        &folders(&["/usr/lib64"]),
        &fake,
        Duration::from_millis(500),
    )
    .unwrap_err();
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(
        e.to_string(),
        format!(
            "{} -r {} did not finish within 500ms: killed it",
            fake.display(),
            root.path().display()
        )
    );
    // The sleep it started is gone too (or a zombie waiting for init).
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let stat = Path::new("/proc").join(pid.trim()).join("stat");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match std::fs::read_to_string(&stat) {
            Err(_) => break,
            Ok(s) if s.contains(") Z ") => break,
            Ok(_) if Instant::now() > deadline => panic!("sleep {pid} still runs"),
            Ok(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

#[test]
fn a_fifo_where_the_conf_goes_is_an_error_and_ldconfig_does_not_run() {
    let (tmp, root) = fixture();
    let ran = tmp.path().join("ran");
    let fake = script(tmp.path(), "ldconfig", &format!("touch {}", ran.display()));
    std::fs::create_dir_all(tmp.path().join("root/etc/ld.so.conf.d")).unwrap();
    mkfifo(
        &tmp.path()
            .join("root/etc/ld.so.conf.d/00-cdigen-driver.conf"),
    );
    let e = with_timeout(move || {
        update_ldcache(&root, &folders(&["/usr/lib64"]), &fake, TIMEOUT).unwrap_err()
    });
    assert_eq!(
        e.to_string(),
        "/etc/ld.so.conf.d/00-cdigen-driver.conf: a FIFO is there, not a regular file: not replacing it"
    );
    assert!(!ran.exists());
}

#[test]
fn a_read_only_root_runs_nothing() {
    let Some(ro) = ReadOnlyMount::new(|p| std::fs::create_dir(p.join("etc")).unwrap()) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let ran = tmp.path().join("ran");
    let fake = script(tmp.path(), "ldconfig", &format!("touch {}", ran.display()));
    let root = InRoot::open(ro.path()).unwrap();
    assert_eq!(
        update_ldcache(&root, &folders(&["/usr/lib64"]), &fake, TIMEOUT).unwrap(),
        Outcome::ReadOnly
    );
    assert!(!ran.exists());
}

/// Why the real-ldconfig tests cannot run here, if they cannot.
fn real_ldconfig_missing() -> Option<String> {
    if !rustix::process::geteuid().is_root() {
        return Some("not root (ldconfig -r chroots)".into());
    }
    if find_ldconfig(None).is_err() {
        return Some("no ldconfig on this host".into());
    }
    if !std::process::Command::new("cc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return Some("no cc to build a shared object".into());
    }
    None
}

/// Builds a shared object with `soname` at `path`.
fn shared_object(dir: &Path, soname: &str, path: &Path) {
    let src = dir.join("lib.c");
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
    crate::ldcache::parse(&bytes)
        .unwrap()
        .into_iter()
        .map(|e| (e.key, e.path))
        .collect()
}

#[test]
fn the_real_ldconfig_caches_the_folders() {
    if let Some(why) = real_ldconfig_missing() {
        println!("skipped: {why}");
        return;
    }
    for with_include in [true, false] {
        let tmp = tempfile::tempdir().unwrap();
        let r = tmp.path().join("root");
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
        shared_object(
            tmp.path(),
            "libfoo.so.1",
            &r.join("usr/lib64/libfoo.so.1.2.3"),
        );
        let root = InRoot::open(&r).unwrap();
        let program = find_ldconfig(None).unwrap();
        let got = update_ldcache(&root, &folders(&["/usr/lib64"]), &program, TIMEOUT).unwrap();
        assert_eq!(got, Outcome::Updated);
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
fn the_real_ldconfig_puts_an_enabled_compat_libcuda_first() {
    if let Some(why) = real_ldconfig_missing() {
        println!("skipped: {why}");
        return;
    }
    for resolver in [Resolver::Openat2, Resolver::Walk] {
        let tmp = tempfile::tempdir().unwrap();
        let r = tmp.path().join("root");
        std::fs::create_dir_all(r.join("etc")).unwrap();
        std::fs::write(
            r.join("etc/ld.so.conf"),
            "include /etc/ld.so.conf.d/*.conf\n",
        )
        .unwrap();
        shared_object(
            tmp.path(),
            "libcuda.so.1",
            &r.join("usr/lib64/libcuda.so.550.90.07"),
        );
        shared_object(
            tmp.path(),
            "libcuda.so.1",
            &r.join("usr/local/cuda/compat/libcuda.so.555.42.06"),
        );
        let root = InRoot::with_resolver(&r, resolver).unwrap();
        let host = DriverVersion::parse("550.90.07").unwrap();
        enable_cuda_compat(&root, &host).unwrap();
        let program = find_ldconfig(None).unwrap();
        update_ldcache(&root, &folders(&["/usr/lib64"]), &program, TIMEOUT).unwrap();
        let first = cache_of(&r).into_iter().find(|(k, _)| k == "libcuda.so.1");
        assert_eq!(
            first,
            Some((
                "libcuda.so.1".into(),
                "/usr/local/cuda/compat/libcuda.so.1".into()
            )),
            "{resolver:?}"
        );
    }
}

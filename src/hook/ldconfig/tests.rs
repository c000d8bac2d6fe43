#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;
use std::time::Instant;

use super::*;
use crate::hook::compat::{DriverVersion, enable_cuda_compat};
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

/// A minimal static ELF executable for this machine (the ldconfig the
/// stand-in runner is given; it never runs).
fn static_program(dir: &Path) -> PathBuf {
    let mut b = vec![0u8; 64];
    b[..4].copy_from_slice(b"\x7fELF");
    b[4] = 2;
    b[5] = 1;
    b[6] = 1;
    b[16..18].copy_from_slice(&2u16.to_le_bytes()); // ET_EXEC
    b[18..20].copy_from_slice(&crate::elf::native_machine().unwrap().to_le_bytes());
    b[32..40].copy_from_slice(&64u64.to_le_bytes()); // phoff
    b[54..56].copy_from_slice(&56u16.to_le_bytes());
    b[56..58].copy_from_slice(&1u16.to_le_bytes());
    let mut ph = vec![0u8; 56];
    ph[..4].copy_from_slice(&1u32.to_le_bytes()); // PT_LOAD
    b.extend(ph);
    let path = dir.join("static-ldconfig");
    std::fs::write(&path, b).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A shell script standing in for `cdigen` (the isolated step), or for a
/// dynamic ldconfig.
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
fn writes_the_conf_then_runs_the_isolated_step_with_the_folders() {
    let (tmp, root) = fixture();
    let prog = static_program(tmp.path());
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
    let got = update_ldcache_with(
        &root,
        &folders(&[
            "/usr/lib/x86_64-linux-gnu",
            "/usr/lib/x86_64-linux-gnu/vdpau",
        ]),
        &prog,
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
            "--root\n{root_path}\n--ldconfig\n{}\n--\n\
-i\n-C\n/etc/ld.so.cache\n-f\n/etc/ld.so.conf\n\
/usr/lib/x86_64-linux-gnu\n/usr/lib/x86_64-linux-gnu/vdpau\n",
            prog.display()
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
    let prog = static_program(tmp.path());
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
    update_ldcache_with(&root, &folders(&["/usr/lib64"]), &prog, &fake, TIMEOUT).unwrap();
    let args = std::fs::read_to_string(&args_file).unwrap();
    assert!(
        args.ends_with("/etc/ld.so.conf\n/usr/local/cuda/compat\n/usr/lib64\n"),
        "{args}"
    );
}

#[test]
fn a_failing_ldconfig_shows_what_it_said() {
    let (tmp, root) = fixture();
    let prog = static_program(tmp.path());
    let fake = script(
        tmp.path(),
        "ldconfig",
        "echo 'ldconfig: /etc/ld.so.conf: bad line' >&2; echo >&2; echo '  second  ' >&2; exit 3",
    );
    let e =
        update_ldcache_with(&root, &folders(&["/usr/lib64"]), &prog, &fake, TIMEOUT).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{} in {} failed (exit status 3): ldconfig: /etc/ld.so.conf: bad line; second",
            prog.display(),
            root.path().display()
        )
    );
    // The isolated step's own failure is its one line.
    let fake = script(
        tmp.path(),
        "isolation",
        "echo 'cannot isolate ldconfig from the host, so it was not run: pivot_root: Invalid argument' >&2; exit 125",
    );
    let e =
        update_ldcache_with(&root, &folders(&["/usr/lib64"]), &prog, &fake, TIMEOUT).unwrap_err();
    assert_eq!(
        e.to_string(),
        "cannot isolate ldconfig from the host, so it was not run: pivot_root: Invalid argument"
    );
    // Killed by a signal.
    let fake = script(tmp.path(), "killed", "kill -9 $$");
    let e =
        update_ldcache_with(&root, &folders(&["/usr/lib64"]), &prog, &fake, TIMEOUT).unwrap_err();
    assert!(
        e.to_string().ends_with(" failed (killed by signal 9)"),
        "{e}"
    );
}

#[test]
fn ldconfig_stderr_is_bounded() {
    let (tmp, root) = fixture();
    let prog = static_program(tmp.path());
    let fake = script(
        tmp.path(),
        "ldconfig",
        "head -c 4000000 /dev/zero | tr '\\0' x >&2; exit 1",
    );
    let r = InRoot::open(root.path()).unwrap();
    let e = with_timeout(move || {
        update_ldcache_with(&r, &folders(&["/usr/lib64"]), &prog, &fake, TIMEOUT).unwrap_err()
    });
    let text = e.to_string();
    assert!(text.len() < MAX_STDERR + 500, "{}", text.len());
    assert!(text.ends_with(&"x".repeat(MAX_STDERR)), "{}", &text[..200]);
}

#[test]
fn a_hanging_ldconfig_is_killed_with_what_it_started() {
    let (tmp, root) = fixture();
    let prog = static_program(tmp.path());
    let pid_file = tmp.path().join("pid");
    let fake = script(
        tmp.path(),
        "ldconfig",
        &format!("sleep 60 & echo $! > {}; wait", pid_file.display()),
    );
    let start = Instant::now();
    let e = update_ldcache_with(
        &root,
        &folders(&["/usr/lib64"]),
        &prog,
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
            "{} in {} did not finish within 500ms: killed it",
            prog.display(),
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
    let prog = static_program(tmp.path());
    let ran = tmp.path().join("ran");
    let fake = script(tmp.path(), "ldconfig", &format!("touch {}", ran.display()));
    std::fs::create_dir_all(tmp.path().join("root/etc/ld.so.conf.d")).unwrap();
    mkfifo(
        &tmp.path()
            .join("root/etc/ld.so.conf.d/00-cdigen-driver.conf"),
    );
    let e = with_timeout(move || {
        update_ldcache_with(&root, &folders(&["/usr/lib64"]), &prog, &fake, TIMEOUT).unwrap_err()
    });
    assert_eq!(
        e.to_string(),
        "/etc/ld.so.conf.d/00-cdigen-driver.conf: a FIFO is there, not a regular file: not replacing it"
    );
    assert!(!ran.exists());
}

#[test]
fn a_dynamic_or_script_ldconfig_is_refused_before_anything_is_written() {
    let (tmp, root) = fixture();
    let ran = tmp.path().join("ran");
    let fake = script(tmp.path(), "cdigen", &format!("touch {}", ran.display()));
    let wrapper = script(tmp.path(), "ldconfig", "exec /sbin/ldconfig.real \"$@\"");
    let mut dynamic = std::fs::read(static_program(tmp.path())).unwrap();
    dynamic[64..68].copy_from_slice(&3u32.to_le_bytes()); // PT_INTERP
    let dynamic_path = tmp.path().join("dynamic");
    std::fs::write(&dynamic_path, dynamic).unwrap();
    for (program, why) in [
        (
            &wrapper,
            "not an ELF executable for this machine (no ELF magic number)",
        ),
        (
            &dynamic_path,
            "dynamically linked (it names a program interpreter)",
        ),
        (&tmp.path().to_path_buf(), "a directory, not a program"),
    ] {
        let e = update_ldcache_with(&root, &folders(&["/usr/lib64"]), program, &fake, TIMEOUT)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}: {why}: ldconfig runs inside the container root, where an interpreter or \
libraries it loads would be the image's; name a statically linked ldconfig with --ldconfig (on \
Ubuntu /sbin/ldconfig is a shell script, /sbin/ldconfig.real the program)",
                program.display()
            )
        );
    }
    assert!(!ran.exists());
    assert!(!tmp.path().join("root/etc").exists());
}

#[test]
fn a_read_only_root_runs_nothing() {
    let Some(ro) = ReadOnlyMount::new(|p| std::fs::create_dir(p.join("etc")).unwrap()) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let prog = static_program(tmp.path());
    let ran = tmp.path().join("ran");
    let fake = script(tmp.path(), "cdigen", &format!("touch {}", ran.display()));
    let root = InRoot::open(ro.path()).unwrap();
    assert_eq!(
        update_ldcache_with(&root, &folders(&["/usr/lib64"]), &prog, &fake, TIMEOUT).unwrap(),
        Outcome::ReadOnly
    );
    assert!(!ran.exists());
}

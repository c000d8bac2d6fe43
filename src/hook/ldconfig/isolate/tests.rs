#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::os::unix::fs::PermissionsExt as _;

use super::*;

/// A container's mounts at createContainer time, as runc leaves them (the
/// hook's view: the host's mounts, then the container's under its root).
const MOUNTINFO: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:2 - proc proc rw
24 22 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:3 - sysfs sysfs rw
80 22 0:50 / /run/ctr/b\\040x/rootfs rw,relatime - overlay overlay rw,lowerdir=/l
81 80 0:50 / /run/ctr/b\\040x/rootfs rw,relatime - overlay overlay rw,lowerdir=/l
82 81 0:51 / /run/ctr/b\\040x/rootfs/proc rw,nosuid,nodev,noexec,relatime - proc proc rw
83 81 0:52 / /run/ctr/b\\040x/rootfs/dev rw,nosuid - tmpfs tmpfs rw,mode=755
84 83 0:53 / /run/ctr/b\\040x/rootfs/dev/pts rw,nosuid,noexec,relatime - devpts devpts rw
85 81 0:54 / /run/ctr/b\\040x/rootfs/sys ro,nosuid,nodev,noexec,relatime - sysfs sysfs ro
86 85 0:55 / /run/ctr/b\\040x/rootfs/sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup rw
87 81 8:1 /usr/lib/libcuda.so.550.90.07 /run/ctr/b\\040x/rootfs/usr/lib64/libcuda.so.550.90.07 ro,nosuid,nodev,relatime - ext4 /dev/sda1 rw
88 82 0:52 /null /run/ctr/b\\040x/rootfs/proc/kcore rw,nosuid - tmpfs tmpfs rw,mode=755
89 81 0:56 / /run/ctr/b\\040x/rootfs2/proc rw - proc proc rw
90 81 0:51 / /run/ctr/b\\040x/rootfs/host/proc rw,nosuid - proc proc rw
bad line
";

#[test]
fn the_isolated_entry_is_taken_by_its_name_only_with_exact_arguments() {
    let argv = |a: &[&str]| a.iter().map(OsString::from).collect::<Vec<_>>();
    assert_eq!(main(&argv(&["cdigen", "--root", "/r"])), None);
    assert_eq!(main(&argv(&["/opt/cdi/bin/drm"])), None);
    assert_eq!(main(&[]), None);
    for bad in [
        &["/usr/bin/cdigen-ldconfig-isolated"][..],
        &[
            "cdigen-ldconfig-isolated",
            "--root",
            "/r",
            "--ldconfig",
            "/l",
        ],
        &[
            "cdigen-ldconfig-isolated",
            "--ldconfig",
            "/l",
            "--root",
            "/r",
            "--",
        ],
    ] {
        assert_eq!(main(&argv(bad)), Some(EXIT_ISOLATION), "{bad:?}");
    }
}

#[test]
fn mountinfo_lines_are_read_with_their_escapes() {
    let mounts = parse_mountinfo(MOUNTINFO);
    assert_eq!(mounts.len(), 14);
    assert_eq!(
        mounts[3],
        MountEntry {
            point: PathBuf::from("/run/ctr/b x/rootfs"),
            options: "rw,relatime".into(),
            fstype: "overlay".into(),
        }
    );
    assert_eq!(mounts[10].fstype, "ext4");
    assert_eq!(unescape("a\\011b\\134c\\012"), Path::new("a\tb\\c\n"));
    // Not an escape: left as it is.
    assert_eq!(unescape("a\\9b\\"), Path::new("a\\9b\\"));
}

#[test]
fn the_plan_detaches_every_host_view_and_keeps_the_rest() {
    let plan = plan(
        &parse_mountinfo(MOUNTINFO),
        Path::new("/run/ctr/b x/rootfs"),
    );
    let p = PathBuf::from;
    assert_eq!(
        plan.detach,
        [
            p("/proc"),
            p("/dev/pts"),
            p("/sys"),
            p("/sys/fs/cgroup"),
            p("/host/proc")
        ]
    );
    assert_eq!(
        plan.keep,
        [
            // The root's own flags: the last of the two mounts there.
            (p("/"), MountFlags::RELATIME),
            (p("/dev"), MountFlags::NOSUID),
            (
                p("/usr/lib64/libcuda.so.550.90.07"),
                MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NODEV | MountFlags::RELATIME
            ),
            // Under /proc: gone with it (apply skips it).
            (p("/proc/kcore"), MountFlags::NOSUID),
        ]
    );
    // A root that is no mount point: `/` has the flags of the one above.
    let plan = super::plan(&parse_mountinfo(MOUNTINFO), Path::new("/srv/root"));
    assert_eq!(plan.keep, [(p("/"), MountFlags::RELATIME)]);
    assert!(plan.detach.is_empty());
}

#[test]
fn only_the_host_views_are_pseudo_filesystems() {
    for fs in ["proc", "sysfs", "cgroup2", "devtmpfs", "nsfs", "devpts"] {
        assert!(is_pseudo(fs), "{fs}");
    }
    for fs in ["ext4", "overlay", "tmpfs", "xfs", "fuse.sshfs"] {
        assert!(!is_pseudo(fs), "{fs}");
    }
}

#[test]
fn the_program_must_be_a_static_executable_of_this_machine() {
    let tmp = tempfile::tempdir().unwrap();
    let script = tmp.path().join("ldconfig");
    std::fs::write(&script, "#!/bin/sh\nexec /sbin/ldconfig.real \"$@\"\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(
        load_program(&script).unwrap_err().to_string(),
        format!(
            "{}: not an ELF executable for this machine (no ELF magic number): ldconfig runs \
inside the container root, where an interpreter or libraries it loads would be the image's; name \
a statically linked ldconfig with --ldconfig (on Ubuntu /sbin/ldconfig is a shell script, \
/sbin/ldconfig.real the program)",
            script.display()
        )
    );
    let missing = tmp.path().join("missing");
    assert_eq!(
        load_program(&missing).unwrap_err().to_string(),
        format!(
            "cannot run {}: No such file or directory (os error 2)",
            missing.display()
        )
    );
    // A dynamically linked program (dash, bash).
    let sh = std::fs::canonicalize("/bin/sh").unwrap();
    assert!(
        load_program(&sh)
            .unwrap_err()
            .to_string()
            .contains(": dynamically linked (it names a program interpreter): "),
    );
}

/// Mounts `fstype` (or binds `source`) at `target`.
fn mount(source: &Path, target: &Path, fstype: Option<&str>) {
    match fstype {
        Some(fs) => rustix::mount::mount(fs, target, fs, MountFlags::empty(), None).unwrap(),
        None => rustix::mount::mount_bind(source, target).unwrap(),
    }
}

/// Unmounts what the test mounted on the host, when it ends.
struct Unmount(Vec<PathBuf>);

impl Drop for Unmount {
    fn drop(&mut self) {
        for p in self.0.iter().rev() {
            let _ = rustix::mount::unmount(p, UnmountFlags::DETACH);
        }
    }
}

/// What the thread that entered the root saw.
#[derive(Debug)]
struct Seen {
    own_file: Option<String>,
    host_file: Option<String>,
    through_proc: Option<String>,
    proc_is_proc: bool,
    sys_kernel: bool,
    device: Result<(), io::ErrorKind>,
    driver: Option<String>,
}

#[test]
fn enter_leaves_the_root_without_a_way_to_the_host() {
    if !rustix::process::geteuid().is_root() {
        println!("skipped: not root (namespaces and mounts)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let secret = tmp.path().join("host-secret");
    std::fs::write(&secret, "KEY=host\n").unwrap();
    let lib = tmp.path().join("libdriver.so.1");
    std::fs::write(&lib, "driver").unwrap();
    let r = tmp.path().join("root");
    for d in ["proc", "sys", "dev", "usr/lib64"] {
        std::fs::create_dir_all(r.join(d)).unwrap();
    }
    std::fs::write(r.join("marker"), "inside").unwrap();
    std::fs::write(r.join("usr/lib64/libdriver.so.1"), "").unwrap();
    // The image's own device node: the host's /dev/zero.
    rustix::fs::mknodat(
        rustix::fs::CWD,
        r.join("zero"),
        rustix::fs::FileType::CharacterDevice,
        Mode::from_raw_mode(0o666),
        rustix::fs::makedev(1, 5),
    )
    .unwrap();
    let mut mounted = Unmount(Vec::new());
    for (src, target, fs) in [
        (None, r.join("proc"), Some("proc")),
        (None, r.join("sys"), Some("sysfs")),
        (None, r.join("dev"), Some("tmpfs")),
        (Some(&lib), r.join("usr/lib64/libdriver.so.1"), None),
    ] {
        mount(src.map_or(Path::new(""), |p| p.as_path()), &target, fs);
        mounted.0.push(target);
    }
    // The way out an image has without isolation: its /proc names the
    // host's processes, whose root is the host's /.
    let escape = format!("/proc/{}/root{}", std::process::id(), secret.display());
    assert_eq!(
        std::fs::read_to_string(r.join(escape.trim_start_matches('/'))).unwrap(),
        "KEY=host\n"
    );
    let (root, secret2, escape2) = (r.clone(), secret.clone(), escape.clone());
    let seen = std::thread::spawn(move || {
        enter(&root).unwrap();
        Seen {
            own_file: std::fs::read_to_string("/marker").ok(),
            host_file: std::fs::read_to_string(&secret2).ok(),
            through_proc: std::fs::read_to_string(&escape2).ok(),
            proc_is_proc: rustix::fs::statfs("/proc")
                .is_ok_and(|s| PSEUDO_MAGIC.contains(&(s.f_type as u64))),
            sys_kernel: Path::new("/sys/kernel").exists(),
            device: File::open("/zero").map(|_| ()).map_err(|e| e.kind()),
            driver: std::fs::read_to_string("/usr/lib64/libdriver.so.1").ok(),
        }
    })
    .join()
    .unwrap();
    assert_eq!(seen.own_file.as_deref(), Some("inside"), "{seen:?}");
    assert_eq!(seen.host_file, None, "{seen:?}");
    assert_eq!(seen.through_proc, None, "{seen:?}");
    assert!(!seen.proc_is_proc, "{seen:?}");
    assert!(!seen.sys_kernel, "{seen:?}");
    assert_eq!(
        seen.device,
        Err(io::ErrorKind::PermissionDenied),
        "{seen:?}"
    );
    // The runtime's bind mount stays: the cache must list it.
    assert_eq!(seen.driver.as_deref(), Some("driver"), "{seen:?}");
    // The host's own mounts are as they were.
    assert!(r.join("proc/self").exists());
    assert!(File::open(r.join("zero")).is_ok());
}

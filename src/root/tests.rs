//! Tests of the host root: path mapping, physical symlink resolution,
//! attribute reads, directory listings, the devfs manifest and recording.

use super::*;

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{PermissionsExt, symlink};

use proptest::prelude::*;
use tempfile::TempDir;

// ---------------------------------------------------------------- helpers

/// Writes `content` at `root/rel`, creating parents.
fn put(root: &Path, rel: &str, content: &[u8]) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(&p, content).unwrap();
}

/// Creates a symlink `root/rel -> target`, creating parents.
fn link(root: &Path, rel: &str, target: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    symlink(target, &p).unwrap();
}

/// Creates the directory `root/rel` (and parents).
fn mkdir(root: &Path, rel: &str) {
    fs::create_dir_all(root.join(rel)).unwrap();
}

fn p(s: &str) -> PathBuf {
    PathBuf::from(s)
}

/// A temp dir with the root at `tmp/root`, so `tmp/` is "outside".
fn new_root() -> (TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("root");
    fs::create_dir(&base).unwrap();
    (tmp, base)
}

fn open(base: &Path) -> HostRoot {
    HostRoot::open(base).unwrap()
}

const DEV_A: &str = "sys/devices/pci0000:00/0000:00:01.1/0000:03:00.0";
const DEV_B: &str = "sys/devices/pci0000:00/0000:00:01.2/0000:04:00.0/0000:05:00.0/0000:06:00.0";

/// A sysfs tree laid out as the kernel does (sysfs-layouts.md §0):
///
/// * GPU A, 4 levels below `/sys`, `card1`;
/// * GPU B, 6 levels below `/sys`, `card2`, whose `driver` link has six
///   `..`, which escapes the root when joined lexically to
///   `/sys/bus/pci/devices/0000:06:00.0` (5 levels).
fn gpu_tree(base: &Path) {
    put(base, &format!("{DEV_A}/vendor"), b"0x1002\n");
    put(base, &format!("{DEV_A}/device"), b"0x73bf\n");
    link(
        base,
        &format!("{DEV_A}/driver"),
        "../../../../bus/pci/drivers/amdgpu",
    );
    put(base, &format!("{DEV_A}/drm/card1/dev"), b"226:1\n");
    link(
        base,
        &format!("{DEV_A}/drm/card1/device"),
        "../../../0000:03:00.0",
    );
    put(base, &format!("{DEV_A}/drm/renderD128/dev"), b"226:128\n");
    link(
        base,
        &format!("{DEV_A}/drm/renderD128/device"),
        "../../../0000:03:00.0",
    );

    put(base, &format!("{DEV_B}/vendor"), b"0x1002\n");
    link(
        base,
        &format!("{DEV_B}/driver"),
        "../../../../../../bus/pci/drivers/amdgpu",
    );
    put(base, &format!("{DEV_B}/drm/card2/dev"), b"226:2\n");
    link(
        base,
        &format!("{DEV_B}/drm/card2/device"),
        "../../../0000:06:00.0",
    );

    link(
        base,
        "sys/class/drm/card1",
        "../../devices/pci0000:00/0000:00:01.1/0000:03:00.0/drm/card1",
    );
    link(
        base,
        "sys/class/drm/renderD128",
        "../../devices/pci0000:00/0000:00:01.1/0000:03:00.0/drm/renderD128",
    );
    link(
        base,
        "sys/class/drm/card2",
        "../../devices/pci0000:00/0000:00:01.2/0000:04:00.0/0000:05:00.0/0000:06:00.0/drm/card2",
    );
    put(base, "sys/class/drm/version", b"drm 1.1.0 20060810\n");

    link(
        base,
        "sys/bus/pci/devices/0000:03:00.0",
        "../../../devices/pci0000:00/0000:00:01.1/0000:03:00.0",
    );
    link(
        base,
        "sys/bus/pci/devices/0000:06:00.0",
        "../../../devices/pci0000:00/0000:00:01.2/0000:04:00.0/0000:05:00.0/0000:06:00.0",
    );
    put(base, "sys/bus/pci/drivers/amdgpu/bind", b"");
    link(
        base,
        "sys/bus/pci/drivers/amdgpu/0000:03:00.0",
        "../../../../devices/pci0000:00/0000:00:01.1/0000:03:00.0",
    );
    link(
        base,
        "sys/bus/pci/drivers/amdgpu/0000:06:00.0",
        "../../../../devices/pci0000:00/0000:00:01.2/0000:04:00.0/0000:05:00.0/0000:06:00.0",
    );
}

fn enoent(disk: &Path) -> String {
    format!("{}: No such file or directory (os error 2)", disk.display())
}

// ------------------------------------------------------------- host paths

#[test]
fn host_path_builders() {
    assert_eq!(sys_path("class/drm"), p("/sys/class/drm"));
    assert_eq!(sys_path("/class/drm"), p("/sys/class/drm"));
    assert_eq!(sys_path("//class/drm"), p("/sys/class/drm"));
    assert_eq!(
        proc_path("driver/nvidia/gpus"),
        p("/proc/driver/nvidia/gpus")
    );
    assert_eq!(proc_path("/devices"), p("/proc/devices"));
    assert_eq!(dev_path("dri/card1"), p("/dev/dri/card1"));
    assert_eq!(dev_path("/vfio/vfio"), p("/dev/vfio/vfio"));
}

#[test]
fn disk_path_maps_under_base() {
    let (_tmp, base) = new_root();
    let root = open(&base);
    assert_eq!(root.base(), base.as_path());
    assert_eq!(
        root.disk_path(&p("/sys/class/drm")),
        base.join("sys/class/drm")
    );
    assert_eq!(root.disk_path(&p("/")), base);
    // Never leaves the base lexically, whatever the host path holds.
    assert_eq!(root.disk_path(&p("/../../etc")), base.join("etc"));
}

// -------------------------------------------------------------------- open

#[test]
fn open_missing_root_names_it() {
    let (tmp, _base) = new_root();
    let missing = tmp.path().join("nope");
    let err = HostRoot::open(&missing).unwrap_err();
    assert!(err.is_not_found());
    assert_eq!(err.to_string(), enoent(&missing));
}

#[test]
fn open_root_that_is_a_file() {
    let (tmp, _base) = new_root();
    let file = tmp.path().join("file");
    fs::write(&file, b"x").unwrap();
    let err = HostRoot::open(&file).unwrap_err();
    assert!(!err.is_not_found());
    assert_eq!(
        err.to_string(),
        format!("{}: the root is not a directory", file.display())
    );
}

#[test]
fn a_root_is_a_host_only_with_sys_devices_bus_and_class() {
    let (tmp, base) = new_root();
    let not_a_host = |base: &Path| match HostRoot::open_host(base) {
        Err(e @ Error::NotAHost { .. }) => {
            assert_eq!(e.reason(), e.to_string());
            e.to_string()
        }
        other => panic!("{other:?}"),
    };
    let b = base.display();
    assert_eq!(
        not_a_host(&base),
        format!(
            "{b} does not look like a Linux host: sys/devices, sys/bus and sys/class are missing"
        )
    );
    // sysfs not mounted: an empty sys/.
    mkdir(&base, "sys");
    assert_eq!(
        not_a_host(&base),
        format!(
            "{b} does not look like a Linux host: sys/devices, sys/bus and sys/class are missing \
             ({b}/sys is empty: is sysfs mounted?)"
        )
    );
    mkdir(&base, "sys/devices");
    mkdir(&base, "sys/class");
    assert_eq!(
        not_a_host(&base),
        format!("{b} does not look like a Linux host: sys/bus is missing")
    );
    // A file is not the directory.
    put(&base, "sys/bus", b"");
    assert!(not_a_host(&base).ends_with(": sys/bus is missing"));
    fs::remove_file(base.join("sys/bus")).unwrap();
    // A symlink is followed inside the root (an absolute target is the
    // root's own).
    mkdir(&base, "elsewhere/bus");
    link(&base, "sys/bus", "/elsewhere/bus");
    HostRoot::open_host(&base).unwrap();
    // A link that leaves the root is not followed out of it.
    fs::remove_file(base.join("sys/bus")).unwrap();
    mkdir(tmp.path(), "outside/bus");
    link(&base, "sys/bus", "../../outside/bus");
    assert!(not_a_host(&base).ends_with(": sys/bus is missing"));
    // The directory above a host: the hint names the host.
    let t = tmp.path().display();
    fs::remove_file(base.join("sys/bus")).unwrap();
    mkdir(&base, "sys/bus");
    assert_eq!(
        not_a_host(tmp.path()),
        format!(
            "{t} does not look like a Linux host: sys/devices, sys/bus and sys/class are missing \
             (did you mean {t}/root?)"
        )
    );
    // Checked afresh at every call: sysfs going away after the open is
    // seen.
    let root = HostRoot::open_host(&base).unwrap();
    fs::rename(base.join("sys"), tmp.path().join("sys.away")).unwrap();
    assert!(matches!(root.check_host(), Err(Error::NotAHost { .. })));
    fs::rename(tmp.path().join("sys.away"), base.join("sys")).unwrap();
    root.check_host().unwrap();
    // Opening without the check (a container's tree, a spec's root).
    HostRoot::open(tmp.path()).unwrap();
}

#[test]
fn the_real_root_is_a_host() {
    HostRoot::open_host(Path::new("/")).unwrap();
}

#[test]
fn open_rejects_a_bad_manifest_with_its_location() {
    let (_tmp, base) = new_root();
    put(
        &base,
        DEV_MANIFEST,
        b"# header\n/dev/null c 1:3 0666 0 0\n/dev/zero x\n",
    );
    let err = HostRoot::open(&base).unwrap_err();
    assert!(matches!(err, Error::Manifest { line: 3, .. }));
    assert_eq!(
        err.to_string(),
        format!(
            "{}:3: expected `PATH c|b MAJ:MIN MODE UID GID`, `PATH l TARGET` or `PATH d`, got \"/dev/zero x\"",
            base.join(DEV_MANIFEST).display()
        )
    );
}

#[test]
fn open_manifest_that_is_not_utf8() {
    let (_tmp, base) = new_root();
    put(&base, DEV_MANIFEST, b"/dev/\xff d\n");
    let err = HostRoot::open(&base).unwrap_err();
    assert!(matches!(err, Error::NotUtf8 { .. }));
    assert!(
        err.to_string()
            .starts_with(&format!("{}: ", base.join(DEV_MANIFEST).display())),
        "{err}"
    );
}

// ---------------------------------------------------- sysfs link patterns

#[test]
fn reads_attribute_through_class_and_device_links() {
    let (_tmp, base) = new_root();
    gpu_tree(&base);
    let root = open(&base);
    assert_eq!(
        root.read_attr(&sys_path("class/drm/card1/device/vendor"))
            .unwrap(),
        "0x1002"
    );
    assert_eq!(
        root.read_attr(&sys_path("class/drm/card1/dev")).unwrap(),
        "226:1"
    );
    assert_eq!(
        root.read(&sys_path("class/drm/card1/device/device"))
            .unwrap(),
        b"0x73bf\n"
    );
    assert_eq!(
        root.read_attr(&sys_path("class/drm/card2/device/vendor"))
            .unwrap(),
        "0x1002"
    );
}

#[test]
fn resolve_gives_the_real_path() {
    let (_tmp, base) = new_root();
    gpu_tree(&base);
    let root = open(&base);
    let real_a = p("/").join(DEV_A);
    assert_eq!(
        root.resolve(&sys_path("class/drm/card1")).unwrap(),
        real_a.join("drm/card1")
    );
    assert_eq!(
        root.resolve(&sys_path("class/drm/card1/device")).unwrap(),
        real_a
    );
    assert_eq!(
        root.resolve(&sys_path("class/drm/card1/device/vendor"))
            .unwrap(),
        real_a.join("vendor")
    );
    // Through the driver link and back through the bus link.
    assert_eq!(
        root.resolve(&sys_path("class/drm/card1/device/driver"))
            .unwrap(),
        p("/sys/bus/pci/drivers/amdgpu")
    );
    assert_eq!(
        root.resolve(&sys_path(
            "class/drm/card1/device/driver/0000:03:00.0/drm/card1"
        ))
        .unwrap(),
        real_a.join("drm/card1")
    );
    // Plain directories resolve to themselves, `.` is dropped, `..` is
    // taken physically (after the link, not lexically before it).
    assert_eq!(
        root.resolve(&sys_path("class/drm")).unwrap(),
        p("/sys/class/drm")
    );
    assert_eq!(root.resolve(&p("/sys/./class")).unwrap(), p("/sys/class"));
    assert_eq!(
        root.resolve(&sys_path("class/drm/card1/..")).unwrap(),
        real_a.join("drm")
    );
    assert_eq!(root.resolve(&p("/")).unwrap(), p("/"));
    assert!(root.exists(&sys_path("class/drm/card1/device/vendor")));
    assert!(!root.exists(&sys_path("class/drm/card1/device/nope")));
}

#[test]
fn rule8_driver_link_read_through_a_bus_link() {
    let (_tmp, base) = new_root();
    gpu_tree(&base);
    let root = open(&base);

    // Lexically, `/sys/bus/pci/devices/0000:06:00.0` + six `..` climbs
    // above `/`: a lexical resolver would escape the root here.
    let lexical_dir = p("/sys/bus/pci/devices/0000:06:00.0");
    let target = fs::read_link(base.join(DEV_B).join("driver")).unwrap();
    let ups = target
        .components()
        .filter(|c| matches!(c, Component::ParentDir))
        .count();
    let depth = lexical_dir.components().count() - 1;
    assert!(ups > depth, "the fixture must exercise the escaping case");

    let driver = sys_path("bus/pci/devices/0000:06:00.0/driver");
    assert_eq!(root.link_name(&driver).unwrap().as_deref(), Some("amdgpu"));
    assert_eq!(
        root.resolve(&driver).unwrap(),
        p("/sys/bus/pci/drivers/amdgpu")
    );
    assert_eq!(
        root.list_dir(&driver).unwrap(),
        ["0000:03:00.0", "0000:06:00.0", "bind"]
    );

    // The shallower device: lexical joining would land on the wrong path
    // (`/bus/pci/drivers/amdgpu`); physical resolution does not.
    let driver_a = sys_path("bus/pci/devices/0000:03:00.0/driver");
    assert_eq!(
        root.link_name(&driver_a).unwrap().as_deref(),
        Some("amdgpu")
    );
    assert_eq!(
        root.resolve(&driver_a).unwrap(),
        p("/sys/bus/pci/drivers/amdgpu")
    );

    // And through two levels of links (class → device → driver).
    assert_eq!(
        root.link_name(&sys_path("class/drm/card2/device/driver"))
            .unwrap()
            .as_deref(),
        Some("amdgpu")
    );
}

#[test]
fn link_name_edge_cases() {
    let (_tmp, base) = new_root();
    gpu_tree(&base);
    link(&base, "sys/up", "../..");
    let root = open(&base);
    // Missing link, missing parent: None.
    assert_eq!(
        root.link_name(&sys_path("class/drm/card1/device/iommu_group"))
            .unwrap(),
        None
    );
    assert_eq!(
        root.link_name(&sys_path("class/nope/x/driver")).unwrap(),
        None
    );
    assert_eq!(root.link_name(&p("/")).unwrap(), None);
    // The link itself is not followed: its target need not exist.
    link(
        &base,
        &format!("{DEV_A}/iommu_group"),
        "../../../kernel/iommu_groups/7",
    );
    assert_eq!(
        root.link_name(&sys_path("class/drm/card1/device/iommu_group"))
            .unwrap()
            .as_deref(),
        Some("7")
    );
    // Not a symlink: an error naming the file.
    let err = root
        .link_name(&sys_path("class/drm/card1/device/vendor"))
        .unwrap_err();
    assert!(!err.is_not_found());
    assert_eq!(
        err.to_string(),
        format!(
            "{}: Invalid argument (os error 22)",
            base.join("sys/class/drm/card1/device/vendor").display()
        )
    );
    // A target with no final name.
    assert_eq!(root.link_name(&p("/sys/up")).unwrap(), None);
}

// ------------------------------------------------ escapes, loops, missing

#[test]
fn relative_link_escaping_the_root_is_an_error() {
    let (tmp, base) = new_root();
    put(tmp.path(), "etc/passwd", b"outside\n");
    link(&base, "sys/x", "../../../etc");
    link(&base, "sys/y", "../../etc");
    let root = open(&base);

    let err = root.resolve(&p("/sys/x")).unwrap_err();
    assert!(matches!(&err, Error::Escape { path, link, root: r }
        if path == Path::new("/sys/x") && link == Path::new("/sys/x") && r == &base));
    assert_eq!(
        err.to_string(),
        format!(
            "/sys/x: symlink /sys/x points outside the root {}",
            base.display()
        )
    );

    let err = root.read_attr(&p("/sys/y/passwd")).unwrap_err();
    assert!(!err.is_not_found());
    assert_eq!(
        err.to_string(),
        format!(
            "/sys/y/passwd: symlink /sys/y points outside the root {}",
            base.display()
        )
    );
    // Escapes are not "not found": the _opt readers propagate them.
    assert!(root.read_attr_opt(&p("/sys/y/passwd")).is_err());
    assert!(root.list_dir_opt(&p("/sys/y")).is_err());
    assert!(!root.exists(&p("/sys/y/passwd")));
}

#[test]
fn relative_link_to_the_top_of_the_root_is_fine() {
    let (tmp, base) = new_root();
    put(tmp.path(), "etc/passwd", b"outside\n");
    put(&base, "etc/passwd", b"inside\n");
    link(&base, "sys/z", "../etc");
    link(&base, "sys/top", "..");
    let root = open(&base);
    assert_eq!(root.read_attr(&p("/sys/z/passwd")).unwrap(), "inside");
    assert_eq!(root.resolve(&p("/sys/top")).unwrap(), p("/"));
    assert_eq!(root.read_attr(&p("/sys/top/etc/passwd")).unwrap(), "inside");
}

#[test]
fn host_path_climbing_above_the_root_is_an_error() {
    let (_tmp, base) = new_root();
    mkdir(&base, "sys");
    let root = open(&base);
    let err = root.resolve(&p("/sys/../..")).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "/sys/../..: symlink /sys/../.. points outside the root {}",
            base.display()
        )
    );
}

#[test]
fn absolute_link_target_is_rooted_at_the_root() {
    let (_tmp, base) = new_root();
    put(&base, "sys/devices/foo/attr", b"inside\n");
    put(&base, "etc/hostname", b"fixture-host\n");
    link(&base, "sys/class/x/foo", "/sys/devices/foo");
    link(&base, "sys/etc", "/etc");
    let root = open(&base);
    assert_eq!(
        root.resolve(&p("/sys/class/x/foo")).unwrap(),
        p("/sys/devices/foo")
    );
    assert_eq!(
        root.read_attr(&p("/sys/class/x/foo/attr")).unwrap(),
        "inside"
    );
    assert_eq!(
        root.read_attr(&p("/sys/etc/hostname")).unwrap(),
        "fixture-host"
    );
    // A target missing under the root is not found there, even if the host
    // has it.
    link(&base, "sys/hostproc", "/proc/self");
    let err = root.read(&p("/sys/hostproc/status")).unwrap_err();
    assert!(err.is_not_found());
    assert_eq!(err.to_string(), enoent(&base.join("proc")));
}

#[test]
fn absolute_link_target_above_the_root_names_the_link() {
    let (_tmp, base) = new_root();
    mkdir(&base, "etc");
    link(&base, "sys/abs", "/../../etc");
    let root = open(&base);
    let err = root.read(&p("/sys/abs/passwd")).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "/sys/abs/passwd: symlink /sys/abs points outside the root {}",
            base.display()
        )
    );
}

#[test]
fn escape_through_a_nested_link_names_the_outer_link() {
    // `sys/a -> b/../..` looks fine lexically, but `b` is a link to `/`,
    // so the `..` after it climbs above the root.
    let (_tmp, base) = new_root();
    link(&base, "sys/b", "/");
    link(&base, "sys/a", "b/../..");
    let root = open(&base);
    let err = root.resolve(&p("/sys/a/x")).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "/sys/a/x: symlink /sys/a points outside the root {}",
            base.display()
        )
    );
}

#[test]
fn link_loops_are_errors() {
    let (_tmp, base) = new_root();
    link(&base, "sys/loop1", "loop2");
    link(&base, "sys/loop2", "loop1");
    link(&base, "sys/self", "self");
    link(&base, "sys/abs", "/sys/abs");
    link(&base, "sys/deep", "deep/x");
    let root = open(&base);
    for host in [
        "/sys/loop1",
        "/sys/self",
        "/sys/abs",
        "/sys/deep",
        "/sys/loop2/attr",
    ] {
        let err = root.resolve(&p(host)).unwrap_err();
        assert!(matches!(&err, Error::Loop { path } if path == Path::new(host)));
        assert_eq!(
            err.to_string(),
            format!("{host}: too many levels of symbolic links")
        );
        assert!(root.read_attr_opt(&p(host)).is_err());
    }
}

#[test]
fn forty_links_are_followed_forty_one_are_a_loop() {
    let (_tmp, base) = new_root();
    for (prefix, n) in [("a", 40), ("b", 41)] {
        for i in 0..n {
            link(
                &base,
                &format!("sys/{prefix}{i}"),
                &format!("{prefix}{}", i + 1),
            );
        }
        put(&base, &format!("sys/{prefix}{n}"), b"end\n");
    }
    let root = open(&base);
    assert_eq!(root.resolve(&p("/sys/a0")).unwrap(), p("/sys/a40"));
    assert_eq!(root.read_attr(&p("/sys/a0")).unwrap(), "end");
    assert_eq!(
        root.resolve(&p("/sys/b0")).unwrap_err().to_string(),
        "/sys/b0: too many levels of symbolic links"
    );
}

#[test]
fn missing_file_is_not_found_and_names_the_disk_path() {
    let (_tmp, base) = new_root();
    gpu_tree(&base);
    let root = open(&base);
    let err = root
        .read_attr(&sys_path("class/drm/card1/device/nope"))
        .unwrap_err();
    assert!(err.is_not_found());
    // The disk path is where the lookup failed: the real directory.
    assert_eq!(err.to_string(), enoent(&base.join(DEV_A).join("nope")));

    let err = root.read(&sys_path("class/nothing/here")).unwrap_err();
    assert!(err.is_not_found());
    assert_eq!(err.to_string(), enoent(&base.join("sys/class/nothing")));

    // A dangling link is "not found" at its target.
    link(&base, "sys/class/drm/card9", "../../devices/gone/card9");
    let err = root.read(&sys_path("class/drm/card9/dev")).unwrap_err();
    assert!(err.is_not_found());
    assert_eq!(err.to_string(), enoent(&base.join("sys/devices/gone")));
    assert!(!root.exists(&sys_path("class/drm/card9")));
}

#[test]
fn path_through_a_regular_file_is_not_a_directory() {
    let (_tmp, base) = new_root();
    put(&base, "sys/file", b"x\n");
    let root = open(&base);
    let err = root.read_attr_opt(&p("/sys/file/x")).unwrap_err();
    assert!(!err.is_not_found());
    assert_eq!(
        err.to_string(),
        format!(
            "{}: Not a directory (os error 20)",
            base.join("sys/file/x").display()
        )
    );
}

#[test]
fn a_directory_swapped_for_a_link_after_it_was_resolved_is_not_followed() {
    let (tmp, base) = new_root();
    put(&base, "sys/devices/a/b/attr", b"inside\n");
    put(tmp.path(), "outside/attr", b"outside\n");
    let root = open(&base);
    assert_eq!(
        root.read_attr(&p("/sys/devices/a/b/attr")).unwrap(),
        "inside"
    );
    // `b` is known to be a directory; it becomes a link out of the root
    // (an attacker's swap between two reads of one discovery run).
    fs::rename(base.join("sys/devices/a/b"), base.join("sys/devices/a/old")).unwrap();
    symlink(tmp.path().join("outside"), base.join("sys/devices/a/b")).unwrap();
    // Its descriptor held open reads the directory it was (now `old`).
    assert_eq!(
        root.read_attr(&p("/sys/devices/a/b/attr")).unwrap(),
        "inside"
    );
    // Opened again (as when it was closed to keep few open, and another
    // directory was read since), it is refused: each component is opened
    // without following a link.
    if let Ok(mut open) = root.open_dirs.lock() {
        *open = OpenDirs::default();
    }
    if let Ok(mut last) = root.last_dir.lock() {
        *last = None;
    }
    let err = root.read_attr(&p("/sys/devices/a/b/attr")).unwrap_err();
    assert!(
        err.to_string()
            .contains("Too many levels of symbolic links")
            || err.to_string().contains("Not a directory"),
        "{err}"
    );
    // A root made afresh resolves the link, inside the root.
    let err = root
        .fresh()
        .read_attr(&p("/sys/devices/a/b/attr"))
        .unwrap_err();
    assert!(
        matches!(err, Error::Escape { .. }) || err.is_not_found(),
        "{err}"
    );
}

#[test]
fn a_root_holds_few_directories_open_and_reads_through_any() {
    let (_tmp, base) = new_root();
    let cap = 40;
    let n = cap * 3;
    for i in 0..n {
        put(
            &base,
            &format!("sys/devices/d{i}/e/attr"),
            format!("{i}\n").as_bytes(),
        );
    }
    let root = open(&base);
    assert!((32..=4096).contains(&root.open_dirs.lock().unwrap().cap));
    root.open_dirs.lock().unwrap().cap = cap;
    for round in 0..2 {
        for i in 0..n {
            let path = p(&format!("/sys/devices/d{i}/e/attr"));
            assert_eq!(root.read_attr(&path).unwrap(), i.to_string(), "{round}");
            let open = root.open_dirs.lock().unwrap().by_path.len();
            assert!(open <= cap, "{open} directories open");
        }
        // The most recently used are kept: the last directory read again
        // opens nothing.
        let before = root.open_dirs.lock().unwrap().by_path.len();
        *root.last_dir.lock().unwrap() = None;
        let last = n - 1;
        let path = p(&format!("/sys/devices/d{last}/e/attr"));
        assert_eq!(root.read_attr(&path).unwrap(), last.to_string());
        assert_eq!(root.open_dirs.lock().unwrap().by_path.len(), before);
    }
    // Listing goes through them too.
    assert_eq!(root.list_dir(&p("/sys/devices")).unwrap().len(), n);
    assert_eq!(root.list_dir(&p("/sys/devices/d7/e")).unwrap(), ["attr"]);
}

// ------------------------------------------------------------------ reads

#[test]
fn read_attr_strips_exactly_one_newline() {
    let (_tmp, base) = new_root();
    for (name, content) in [
        ("one", &b"0x1002\n"[..]),
        ("two", b"a\n\n"),
        ("none", b"no-newline"),
        ("empty", b""),
        ("just", b"\n"),
        ("crlf", b"x\r\n"),
        ("inner", b"a\nb\n"),
        ("spaces", b"  a  \n"),
    ] {
        put(&base, &format!("sys/{name}"), content);
    }
    let root = open(&base);
    let attr = |n: &str| root.read_attr(&sys_path(n)).unwrap();
    assert_eq!(attr("one"), "0x1002");
    assert_eq!(attr("two"), "a\n");
    assert_eq!(attr("none"), "no-newline");
    assert_eq!(attr("empty"), "");
    assert_eq!(attr("just"), "");
    assert_eq!(attr("crlf"), "x\r");
    assert_eq!(attr("inner"), "a\nb");
    assert_eq!(attr("spaces"), "  a  ");
    // `read` keeps the bytes as they are.
    assert_eq!(root.read(&sys_path("two")).unwrap(), b"a\n\n");
}

#[test]
fn read_attr_not_utf8() {
    let (_tmp, base) = new_root();
    put(&base, "sys/bin", b"\xff\xfe\n");
    let root = open(&base);
    let err = root.read_attr(&sys_path("bin")).unwrap_err();
    assert!(matches!(&err, Error::NotUtf8 { disk } if disk == &base.join("sys/bin")));
    assert_eq!(
        err.to_string(),
        format!("{}: not UTF-8 text", base.join("sys/bin").display())
    );
    // Not "not found": propagated by read_attr_opt.
    assert_eq!(
        root.read_attr_opt(&sys_path("bin"))
            .unwrap_err()
            .to_string(),
        err.to_string()
    );
    // The bytes are still readable.
    assert_eq!(root.read(&sys_path("bin")).unwrap(), b"\xff\xfe\n");
}

#[test]
fn read_size_limits() {
    let (_tmp, base) = new_root();
    let max = usize::try_from(MAX_READ).unwrap();
    put(&base, "sys/exact", &vec![b'a'; max]);
    put(&base, "sys/big", &vec![b'a'; max + 1]);
    put(&base, "sys/abcd", b"abcd");
    link(&base, "sys/class/big", "../big");
    let root = open(&base);

    assert_eq!(root.read(&sys_path("exact")).unwrap().len(), max);

    let err = root.read(&sys_path("big")).unwrap_err();
    assert!(matches!(&err, Error::TooLarge { limit, .. } if *limit == MAX_READ));
    assert_eq!(
        err.to_string(),
        format!(
            "{}: larger than 1048576 bytes",
            base.join("sys/big").display()
        )
    );
    let err = root.read_attr(&sys_path("big")).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: larger than 1048576 bytes",
            base.join("sys/big").display()
        )
    );
    assert!(root.read_attr_opt(&sys_path("big")).is_err());
    // Through a link, the message names the real file.
    assert_eq!(
        root.read(&sys_path("class/big")).unwrap_err().to_string(),
        format!(
            "{}: larger than 1048576 bytes",
            base.join("sys/big").display()
        )
    );

    // A larger limit reads it.
    assert_eq!(
        root.read_limited(&sys_path("big"), 2 * MAX_READ)
            .unwrap()
            .len(),
        max + 1
    );
    assert_eq!(
        root.read_limited(&sys_path("big"), u64::MAX).unwrap().len(),
        max + 1
    );
    // A smaller one: the limit itself is allowed, one more byte is not.
    assert_eq!(root.read_limited(&sys_path("abcd"), 4).unwrap(), b"abcd");
    assert_eq!(
        root.read_limited(&sys_path("abcd"), 3)
            .unwrap_err()
            .to_string(),
        format!("{}: larger than 3 bytes", base.join("sys/abcd").display())
    );
    assert_eq!(
        root.read_limited(&sys_path("abcd"), 0)
            .unwrap_err()
            .to_string(),
        format!("{}: larger than 0 bytes", base.join("sys/abcd").display())
    );
}

#[test]
fn read_of_a_directory_is_an_error() {
    let (_tmp, base) = new_root();
    mkdir(&base, "sys/dir");
    let root = open(&base);
    let err = root.read(&sys_path("dir")).unwrap_err();
    assert!(!err.is_not_found());
    assert_eq!(
        err.to_string(),
        format!(
            "{}: a directory, not a regular file: not reading it",
            base.join("sys/dir").display()
        )
    );
}

#[test]
fn opt_readers_turn_only_not_found_into_none() {
    let (_tmp, base) = new_root();
    gpu_tree(&base);
    put(&base, "sys/file", b"x\n");
    let root = open(&base);

    assert_eq!(
        root.read_attr_opt(&sys_path("class/drm/card1/device/vendor"))
            .unwrap(),
        Some("0x1002".to_string())
    );
    assert_eq!(
        root.read_attr_opt(&sys_path("class/drm/card1/device/nope"))
            .unwrap(),
        None
    );
    assert_eq!(
        root.read_attr_opt(&sys_path("no/such/dir/attr")).unwrap(),
        None
    );

    assert_eq!(
        root.list_dir_opt(&sys_path("class/drm")).unwrap(),
        ["card1", "card2", "renderD128", "version"]
    );
    assert!(
        root.list_dir_opt(&sys_path("class/nope"))
            .unwrap()
            .is_empty()
    );
    assert!(
        root.list_dir_opt(&sys_path("no/such/dir"))
            .unwrap()
            .is_empty()
    );

    // Listing a regular file: ENOTDIR, propagated.
    let err = root.list_dir_opt(&sys_path("file")).unwrap_err();
    assert!(!err.is_not_found());
    assert_eq!(
        err.to_string(),
        format!(
            "{}: Not a directory (os error 20)",
            base.join("sys/file").display()
        )
    );
}

// ---------------------------------------------------------------- listing

#[test]
fn list_dir_sorted_with_links_and_without_non_utf8_names() {
    let (_tmp, base) = new_root();
    for n in ["b", "a", "C", "10", "9", "_x"] {
        put(&base, &format!("sys/d/{n}"), b"");
    }
    mkdir(&base, "sys/d/subdir");
    link(&base, "sys/d/link", "a");
    link(&base, "sys/d/dangling", "nowhere");
    let bad = base.join("sys/d").join(OsStr::from_bytes(b"bad\xff"));
    fs::write(&bad, b"").unwrap();
    link(&base, "sys/alias", "d");
    let root = open(&base);

    let want = ["10", "9", "C", "_x", "a", "b", "dangling", "link", "subdir"];
    assert_eq!(root.list_dir(&sys_path("d")).unwrap(), want);
    // Through a link to the directory.
    assert_eq!(root.list_dir(&sys_path("alias")).unwrap(), want);
    // Symlink entries really are DT_LNK on disk (rule 7): listing keeps
    // them although they are not directories.
    let ft = fs::symlink_metadata(base.join("sys/d/link"))
        .unwrap()
        .file_type();
    assert!(ft.is_symlink());

    assert!(root.list_dir(&sys_path("d/subdir")).unwrap().is_empty());
    let err = root.list_dir(&sys_path("nope")).unwrap_err();
    assert!(err.is_not_found());
    assert_eq!(err.to_string(), enoent(&base.join("sys/nope")));
}

#[test]
fn list_class_dir_of_symlinks() {
    let (_tmp, base) = new_root();
    gpu_tree(&base);
    let root = open(&base);
    let names = root.list_dir(&sys_path("class/drm")).unwrap();
    assert_eq!(names, ["card1", "card2", "renderD128", "version"]);
    for n in ["card1", "card2", "renderD128"] {
        let disk = base.join("sys/class/drm").join(n);
        assert!(
            fs::symlink_metadata(&disk)
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }
    assert_eq!(
        root.list_dir(&sys_path("class/drm/card1/device/drm"))
            .unwrap(),
        ["card1", "renderD128"]
    );
}

// --------------------------------------------------------------- manifest

fn char_dev(major: u32, minor: u32, mode: u32, uid: u32, gid: u32) -> DevEntry {
    DevEntry {
        kind: DevKind::Char,
        major,
        minor,
        mode,
        uid,
        gid,
        target: None,
    }
}

fn sym(target: &str) -> DevEntry {
    DevEntry {
        kind: DevKind::Symlink,
        major: 0,
        minor: 0,
        mode: 0o777,
        uid: 0,
        gid: 0,
        target: Some(target.to_string()),
    }
}

fn dir() -> DevEntry {
    DevEntry {
        kind: DevKind::Dir,
        major: 0,
        minor: 0,
        mode: 0o755,
        uid: 0,
        gid: 0,
        target: None,
    }
}

const MANIFEST: &str = "\
# A devfs manifest.

/dev/null c 1:3 0666 0 0
/dev/dri d   # trailing comment
/dev/dri/card1 c 226:1 0660 0 44
/dev/dri/renderD128\tc\t226:128\t660\t0\t109
   /dev/nvme0n1 b 259:0 0660 0 6
/dev/dri/by-path/pci-0000:03:00.0-card l ../card1
/dev/dri/by-path d
/dev/vfio/vfio c 10:196 0666 0 0
/dev/sticky c 4294967295:0 7777 4294967295 1
   # indented comment
";

fn manifest_entries() -> BTreeMap<PathBuf, DevEntry> {
    BTreeMap::from([
        (p("/dev/null"), char_dev(1, 3, 0o666, 0, 0)),
        (p("/dev/dri"), dir()),
        (p("/dev/dri/card1"), char_dev(226, 1, 0o660, 0, 44)),
        (p("/dev/dri/renderD128"), char_dev(226, 128, 0o660, 0, 109)),
        (
            p("/dev/nvme0n1"),
            DevEntry {
                kind: DevKind::Block,
                ..char_dev(259, 0, 0o660, 0, 6)
            },
        ),
        (p("/dev/dri/by-path/pci-0000:03:00.0-card"), sym("../card1")),
        (p("/dev/dri/by-path"), dir()),
        (p("/dev/vfio/vfio"), char_dev(10, 196, 0o666, 0, 0)),
        (p("/dev/sticky"), char_dev(u32::MAX, 0, 0o7777, u32::MAX, 1)),
    ])
}

#[test]
fn manifest_valid_lines_of_every_kind() {
    let map = parse_manifest(&p("/r/dev.manifest"), MANIFEST).unwrap();
    assert_eq!(map, manifest_entries());
    assert!(parse_manifest(&p("m"), "").unwrap().is_empty());
    assert!(
        parse_manifest(&p("m"), "# only\n\n   \n#\n")
            .unwrap()
            .is_empty()
    );
    // No final newline, CRLF line ends.
    assert_eq!(
        parse_manifest(&p("m"), "/dev/a d\r\n/dev/b d").unwrap(),
        BTreeMap::from([(p("/dev/a"), dir()), (p("/dev/b"), dir())])
    );
}

fn manifest_err(text: &str) -> String {
    parse_manifest(&p("/fx/dev.manifest"), text)
        .unwrap_err()
        .to_string()
}

#[test]
fn manifest_errors_name_file_and_line() {
    let generic = |line: &str| {
        format!(
            "expected `PATH c|b MAJ:MIN MODE UID GID`, `PATH l TARGET` or `PATH d`, got {line:?}"
        )
    };
    let cases: Vec<(&str, String)> = vec![
        // bad type
        (
            "/dev/x q 1:2 0660 0 0",
            format!("/fx/dev.manifest:1: {}", generic("/dev/x q 1:2 0660 0 0")),
        ),
        (
            "/dev/x C 1:2 0660 0 0",
            format!("/fx/dev.manifest:1: {}", generic("/dev/x C 1:2 0660 0 0")),
        ),
        // bad MAJ:MIN
        (
            "/dev/x c 1-2 0660 0 0",
            "/fx/dev.manifest:1: \"1-2\" is not MAJOR:MINOR".to_string(),
        ),
        (
            "/dev/x b 1: 0660 0 0",
            "/fx/dev.manifest:1: \"1:\" is not MAJOR:MINOR".to_string(),
        ),
        (
            "/dev/x c 4294967296:0 0660 0 0",
            "/fx/dev.manifest:1: \"4294967296:0\" is not MAJOR:MINOR".to_string(),
        ),
        (
            "/dev/x c -1:0 0660 0 0",
            "/fx/dev.manifest:1: \"-1:0\" is not MAJOR:MINOR".to_string(),
        ),
        // non-octal mode
        (
            "/dev/x c 1:2 0689 0 0",
            "/fx/dev.manifest:1: \"0689\" is not an octal mode like 0660".to_string(),
        ),
        (
            "/dev/x c 1:2 rw 0 0",
            "/fx/dev.manifest:1: \"rw\" is not an octal mode like 0660".to_string(),
        ),
        // mode above 0o7777
        (
            "/dev/x c 1:2 10000 0 0",
            "/fx/dev.manifest:1: \"10000\" is not an octal mode like 0660".to_string(),
        ),
        // non-numeric uid / gid
        (
            "/dev/x c 1:2 0660 root 0",
            "/fx/dev.manifest:1: \"root\" is not a numeric uid".to_string(),
        ),
        (
            "/dev/x c 1:2 0660 0 -1",
            "/fx/dev.manifest:1: \"-1\" is not a numeric gid".to_string(),
        ),
        (
            "/dev/x c 1:2 0660 4294967296 0",
            "/fx/dev.manifest:1: \"4294967296\" is not a numeric uid".to_string(),
        ),
        // wrong column counts
        (
            "/dev/x",
            "/fx/dev.manifest:1: expected PATH TYPE ..., got \"/dev/x\"".to_string(),
        ),
        (
            "/dev/x c 1:2 0660 0",
            format!("/fx/dev.manifest:1: {}", generic("/dev/x c 1:2 0660 0")),
        ),
        (
            "/dev/x c 1:2 0660 0 0 0",
            format!("/fx/dev.manifest:1: {}", generic("/dev/x c 1:2 0660 0 0 0")),
        ),
        (
            "/dev/x l",
            format!("/fx/dev.manifest:1: {}", generic("/dev/x l")),
        ),
        (
            "/dev/x l a b",
            format!("/fx/dev.manifest:1: {}", generic("/dev/x l a b")),
        ),
        (
            "/dev/x d 0755",
            format!("/fx/dev.manifest:1: {}", generic("/dev/x d 0755")),
        ),
        // not under /dev, or not normalized
        (
            "/sys/x d",
            "/fx/dev.manifest:1: \"/sys/x\" is not a normalized path under /dev".to_string(),
        ),
        (
            "dev/x d",
            "/fx/dev.manifest:1: \"dev/x\" is not a normalized path under /dev".to_string(),
        ),
        (
            "/dev d",
            "/fx/dev.manifest:1: \"/dev\" is not a normalized path under /dev".to_string(),
        ),
        (
            "/devices/x d",
            "/fx/dev.manifest:1: \"/devices/x\" is not a normalized path under /dev".to_string(),
        ),
        (
            "/dev/../etc/passwd c 1:3 0666 0 0",
            "/fx/dev.manifest:1: \"/dev/../etc/passwd\" is not a normalized path under /dev"
                .to_string(),
        ),
        (
            "/dev/a/.. d",
            "/fx/dev.manifest:1: \"/dev/a/..\" is not a normalized path under /dev".to_string(),
        ),
        (
            "/dev/./x d",
            "/fx/dev.manifest:1: \"/dev/./x\" is not a normalized path under /dev".to_string(),
        ),
    ];
    for (line, want) in &cases {
        assert_eq!(&manifest_err(line), want, "line {line:?}");
    }
}

#[test]
fn manifest_error_line_numbers_count_comments_and_blanks() {
    let text = "# c\n\n/dev/null c 1:3 0666 0 0\n   \n/dev/zero c 1:5 0666 x 0\n";
    assert_eq!(
        manifest_err(text),
        "/fx/dev.manifest:5: \"x\" is not a numeric uid"
    );
}

#[test]
fn manifest_duplicate_path() {
    let text = "/dev/null c 1:3 0666 0 0\n/dev/zero c 1:5 0666 0 0\n/dev/null d\n";
    let err = parse_manifest(&p("/fx/dev.manifest"), text).unwrap_err();
    assert!(matches!(&err, Error::Manifest { line: 3, .. }));
    assert_eq!(
        err.to_string(),
        "/fx/dev.manifest:3: /dev/null listed twice"
    );
}

#[test]
fn dev_entry_from_the_manifest_ignores_the_disk() {
    let (_tmp, base) = new_root();
    put(&base, DEV_MANIFEST, MANIFEST.as_bytes());
    // A real file that the manifest does not list, and one it does.
    put(&base, "dev/x", b"");
    put(&base, "dev/null", b"");
    let root = open(&base);
    assert_eq!(root.dev_entry(&p("/dev/x")).unwrap(), None);
    assert_eq!(
        root.dev_entry(&p("/dev/null")).unwrap(),
        Some(char_dev(1, 3, 0o666, 0, 0))
    );
    assert_eq!(root.dev_entry(&dev_path("dri")).unwrap(), Some(dir()));
    assert_eq!(
        root.dev_entry(&dev_path("dri/by-path/pci-0000:03:00.0-card"))
            .unwrap(),
        Some(sym("../card1"))
    );
    assert_eq!(root.dev_entry(&dev_path("dri/card7")).unwrap(), None);
    // Looked up by the path, not its spelling (the map is by bytes).
    for spelling in ["/dev//null", "/dev/./null", "/dev/null/", "//dev/null/."] {
        assert_eq!(
            root.dev_entry(&p(spelling)).unwrap(),
            Some(char_dev(1, 3, 0o666, 0, 0)),
            "{spelling}"
        );
    }
    assert_eq!(root.dev_list(&p("/dev//dri/")).unwrap().len(), 3);
    // The manifest is not followed through links.
    assert_eq!(
        root.dev_entry(&dev_path("dri/by-path/pci-0000:03:00.0-card/x"))
            .unwrap(),
        None
    );

    assert_eq!(
        root.dev_list(&dev_path("dri")).unwrap(),
        ["by-path", "card1", "renderD128"]
    );
    assert_eq!(
        root.dev_list(&dev_path("dri/by-path")).unwrap(),
        ["pci-0000:03:00.0-card"]
    );
    assert_eq!(
        root.dev_list(&p("/dev")).unwrap(),
        ["dri", "null", "nvme0n1", "sticky"]
    );
    // `vfio` is not itself listed, but its child is.
    assert_eq!(root.dev_list(&dev_path("vfio")).unwrap(), ["vfio"]);
    assert!(root.dev_list(&dev_path("nope")).unwrap().is_empty());
}

// ---------------------------------------------------------- real devfs

fn lstat(path: &Path) -> fs::Metadata {
    fs::symlink_metadata(path).unwrap()
}

#[test]
fn dev_entry_without_a_manifest() {
    let (_tmp, base) = new_root();
    put(&base, "dev/regular", b"");
    fs::set_permissions(base.join("dev/regular"), fs::Permissions::from_mode(0o640)).unwrap();
    mkdir(&base, "dev/dri/by-path");
    fs::set_permissions(base.join("dev/dri"), fs::Permissions::from_mode(0o750)).unwrap();
    link(&base, "dev/dri/by-path/pci-card", "../card1");
    link(&base, "dev/dri2", "dri");
    let root = open(&base);

    let m = lstat(&base.join("dev/regular"));
    assert_eq!(
        root.dev_entry(&dev_path("regular")).unwrap(),
        Some(DevEntry {
            kind: DevKind::Other,
            major: 0,
            minor: 0,
            mode: 0o640,
            uid: m.uid(),
            gid: m.gid(),
            target: None,
        })
    );
    let m = lstat(&base.join("dev/dri/by-path/pci-card"));
    assert_eq!(
        root.dev_entry(&dev_path("dri/by-path/pci-card")).unwrap(),
        Some(DevEntry {
            kind: DevKind::Symlink,
            major: 0,
            minor: 0,
            mode: 0o777,
            uid: m.uid(),
            gid: m.gid(),
            target: Some("../card1".to_string()),
        })
    );
    let m = lstat(&base.join("dev/dri"));
    assert_eq!(
        root.dev_entry(&dev_path("dri")).unwrap(),
        Some(DevEntry {
            kind: DevKind::Dir,
            major: 0,
            minor: 0,
            mode: 0o750,
            uid: m.uid(),
            gid: m.gid(),
            target: None,
        })
    );
    // The last component is not followed; the parent is.
    assert_eq!(
        root.dev_entry(&dev_path("dri2")).unwrap().map(|e| e.kind),
        Some(DevKind::Symlink)
    );
    assert_eq!(
        root.dev_entry(&dev_path("dri2/by-path/pci-card"))
            .unwrap()
            .and_then(|e| e.target),
        Some("../card1".to_string())
    );
    // Missing: the entry, or its parent.
    assert_eq!(root.dev_entry(&dev_path("missing")).unwrap(), None);
    assert_eq!(root.dev_entry(&dev_path("no/such/node")).unwrap(), None);
    assert_eq!(root.dev_entry(&p("/")).unwrap(), None);

    assert_eq!(
        root.dev_list(&p("/dev")).unwrap(),
        ["dri", "dri2", "regular"]
    );
    assert_eq!(
        root.dev_list(&dev_path("dri/by-path")).unwrap(),
        ["pci-card"]
    );
    assert!(root.dev_list(&dev_path("nope")).unwrap().is_empty());
}

#[test]
fn dev_entry_without_a_manifest_no_dev_dir() {
    let (_tmp, base) = new_root();
    let root = open(&base);
    assert_eq!(root.dev_entry(&dev_path("null")).unwrap(), None);
    assert!(root.dev_list(&p("/dev")).unwrap().is_empty());
}

#[test]
fn dev_entry_of_real_device_nodes_when_permitted() {
    use rustix::fs::{CWD, FileType, Mode, makedev, mknodat};
    let (_tmp, base) = new_root();
    mkdir(&base, "dev/dri");
    let card = base.join("dev/dri/card1");
    let disk = base.join("dev/nvme0n1");
    let made = mknodat(
        CWD,
        &card,
        FileType::CharacterDevice,
        Mode::from_raw_mode(0o600),
        makedev(226, 1),
    )
    .and_then(|()| {
        mknodat(
            CWD,
            &disk,
            FileType::BlockDevice,
            Mode::from_raw_mode(0o600),
            makedev(259, 70000),
        )
    });
    if let Err(e) = made {
        eprintln!("skipping device-node test: mknodat: {e}");
        return;
    }
    // Exact modes whatever the umask; owners when permitted.
    fs::set_permissions(&card, fs::Permissions::from_mode(0o2660)).unwrap();
    fs::set_permissions(&disk, fs::Permissions::from_mode(0o640)).unwrap();
    let _ = std::os::unix::fs::chown(&card, Some(1234), Some(5678));
    let root = open(&base);
    let m = lstat(&card);
    assert_eq!(
        root.dev_entry(&dev_path("dri/card1")).unwrap(),
        Some(DevEntry {
            kind: DevKind::Char,
            major: 226,
            minor: 1,
            mode: 0o2660,
            uid: m.uid(),
            gid: m.gid(),
            target: None,
        })
    );
    let m = lstat(&disk);
    assert_eq!(
        root.dev_entry(&dev_path("nvme0n1")).unwrap(),
        Some(DevEntry {
            kind: DevKind::Block,
            major: 259,
            minor: 70000,
            mode: 0o640,
            uid: m.uid(),
            gid: m.gid(),
            target: None,
        })
    );
}

// -------------------------------------------------------- format_manifest

#[test]
fn format_manifest_round_trips() {
    let entries = manifest_entries();
    let text = format_manifest(&entries);
    assert_eq!(
        parse_manifest(&p("/snap/dev.manifest"), &text).unwrap(),
        entries
    );
}

#[test]
fn format_manifest_exact_text() {
    let mut entries = BTreeMap::from([
        (p("/dev/null"), char_dev(1, 3, 0o666, 0, 0)),
        (p("/dev/dri"), dir()),
        (
            p("/dev/nvme0n1"),
            DevEntry {
                kind: DevKind::Block,
                ..char_dev(259, 0, 0o60, 0, 6)
            },
        ),
        (p("/dev/dri/by-path/x"), sym("../card1")),
    ]);
    // Other entries (regular files, FIFOs...) are not written.
    entries.insert(
        p("/dev/shm-file"),
        DevEntry {
            kind: DevKind::Other,
            ..char_dev(0, 0, 0o644, 0, 0)
        },
    );
    assert_eq!(
        format_manifest(&entries),
        "# cdigen devfs manifest: the /dev entries discovery looked at.\n\
         # PATH c|b MAJ:MIN MODE UID GID | PATH l TARGET | PATH d\n\
         /dev/dri d\n\
         /dev/dri/by-path/x l ../card1\n\
         /dev/null c 1:3 0666 0 0\n\
         /dev/nvme0n1 b 259:0 0060 0 6\n"
    );
    assert!(
        format_manifest(&BTreeMap::new())
            .lines()
            .all(|l| l.starts_with('#'))
    );
}

#[test]
fn format_manifest_escapes_names_and_targets() {
    // A udev by-id name with a space, a target with a newline that would
    // add a line, `#` that would start a comment, a backslash, a control
    // character and a name that is not UTF-8.
    let entries = BTreeMap::from([
        (
            p("/dev/serial/by-id/usb-FTDI My Cable"),
            sym("../../ttyUSB0"),
        ),
        (
            p("/dev/evil"),
            sym("../x\n/dev/null c 1:3 0666 0 0\n/dev/zero"),
        ),
        (p("/dev/a#b"), sym("c\\x20d")),
        (p("/dev/bell\u{7}"), dir()),
        (
            PathBuf::from(OsStr::from_bytes(b"/dev/caf\xe9")),
            char_dev(1, 2, 0o600, 0, 0),
        ),
        (p("/dev/\u{e9}t\u{e9}"), sym("\u{a0}")),
    ]);
    let text = format_manifest(&entries);
    let body: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(
        body,
        [
            "/dev/a\\x23b l c\\\\x20d",
            "/dev/bell\\x07 d",
            "/dev/caf\\xe9 c 1:2 0600 0 0",
            "/dev/evil l ../x\\x0a/dev/null\\x20c\\x201:3\\x200666\\x200\\x200\\x0a/dev/zero",
            "/dev/serial/by-id/usb-FTDI\\x20My\\x20Cable l ../../ttyUSB0",
            "/dev/\\xc3\\xa9t\\xc3\\xa9 l \\xc2\\xa0",
        ]
    );
    assert!(text.is_ascii());
    assert_eq!(parse_manifest(&p("m"), &text).unwrap(), entries);
}

#[test]
fn manifest_escapes_in_hand_written_lines() {
    // Either case of hex; UTF-8 as is; `\\` is one backslash.
    let map = parse_manifest(&p("m"), "/dev/a\\x20B\\x2f d\n/dev/\u{e9} l x\\\\y\\x0A\n").unwrap();
    assert_eq!(
        map,
        BTreeMap::from([(p("/dev/a B/"), dir()), (p("/dev/\u{e9}"), sym("x\\y\n")),])
    );
    for (line, want) in [
        (
            "/dev/a\\q d",
            "m:1: path \"/dev/a\\\\q\": a backslash must start `\\\\` or `\\xHH` (two hex digits)",
        ),
        (
            "/dev/a\\x2 d",
            "m:1: path \"/dev/a\\\\x2\": a backslash must start `\\\\` or `\\xHH` (two hex digits)",
        ),
        (
            "/dev/a\\xzz d",
            "m:1: path \"/dev/a\\\\xzz\": `\\x` must be followed by two hex digits",
        ),
        (
            "/dev/a d\\",
            "m:1: expected `PATH c|b MAJ:MIN MODE UID GID`, `PATH l TARGET` or `PATH d`, got \"/dev/a d\\\\\"",
        ),
        (
            "/dev/a l \\xff",
            "m:1: link target \"\\\\xff\": a bad escape or not UTF-8 once unescaped",
        ),
        (
            "/dev/\\x2e\\x2e/x d",
            "m:1: \"/dev/\\\\x2e\\\\x2e/x\" is not a normalized path under /dev",
        ),
        (
            "/dev/a\\x20b d\n/dev/a\\x20b d",
            "m:2: /dev/a\\x20b listed twice",
        ),
    ] {
        assert_eq!(
            parse_manifest(&p("m"), line).unwrap_err().to_string(),
            want,
            "{line:?}"
        );
    }
}

#[test]
fn format_manifest_of_a_real_devfs_reopens() {
    // What `cdigen snapshot` does: look entries up, write them, read back.
    let (tmp, base) = new_root();
    mkdir(&base, "dev/dri/by-path");
    fs::set_permissions(base.join("dev/dri"), fs::Permissions::from_mode(0o755)).unwrap();
    link(&base, "dev/dri/by-path/pci-card", "../card1");
    let root = open(&base).recording();
    root.dev_entry(&dev_path("dri")).unwrap();
    root.dev_entry(&dev_path("dri/by-path/pci-card")).unwrap();
    root.dev_entry(&dev_path("dri/card1")).unwrap();
    let present: BTreeMap<PathBuf, DevEntry> = root
        .take_record()
        .dev
        .into_iter()
        .filter_map(|(p, e)| e.map(|e| (p, e)))
        .collect();
    let out = tmp.path().join("snap");
    fs::create_dir(&out).unwrap();
    fs::write(out.join(DEV_MANIFEST), format_manifest(&present)).unwrap();
    let replay = open(&out);
    assert_eq!(
        replay.dev_entry(&dev_path("dri/by-path/pci-card")).unwrap(),
        Some(sym("../card1"))
    );
    assert_eq!(
        replay.dev_entry(&dev_path("dri")).unwrap().map(|e| e.kind),
        Some(DevKind::Dir)
    );
    assert_eq!(replay.dev_entry(&dev_path("dri/card1")).unwrap(), None);
}

// --------------------------------------------------------------- recording

#[test]
fn recording_captures_files_links_dirs_and_dev_lookups() {
    let (_tmp, base) = new_root();
    gpu_tree(&base);
    put(&base, DEV_MANIFEST, MANIFEST.as_bytes());
    let root = open(&base).recording();

    assert_eq!(
        root.read_attr(&sys_path("class/drm/card1/device/vendor"))
            .unwrap(),
        "0x1002"
    );
    assert_eq!(
        root.list_dir(&sys_path("class/drm/card1/device/drm"))
            .unwrap(),
        ["card1", "renderD128"]
    );
    assert_eq!(root.list_dir(&sys_path("class/drm")).unwrap().len(), 4);
    assert_eq!(
        root.link_name(&sys_path("bus/pci/devices/0000:06:00.0/driver"))
            .unwrap()
            .as_deref(),
        Some("amdgpu")
    );
    assert_eq!(
        root.dev_entry(&dev_path("dri/card1")).unwrap(),
        Some(char_dev(226, 1, 0o660, 0, 44))
    );
    assert_eq!(root.dev_entry(&dev_path("dri/card9")).unwrap(), None);
    root.dev_list(&dev_path("dri/by-path")).unwrap();
    // Failed reads record nothing of the file.
    assert!(root.read(&sys_path("class/drm/card1/device/nope")).is_err());

    let rec = root.take_record();
    let real_a = p("/").join(DEV_A);
    let real_b = p("/").join(DEV_B);
    assert_eq!(
        rec.files,
        BTreeMap::from([(real_a.join("vendor"), b"0x1002\n".to_vec())])
    );
    assert_eq!(
        rec.links,
        BTreeMap::from([
            (
                p("/sys/class/drm/card1"),
                p("../../devices/pci0000:00/0000:00:01.1/0000:03:00.0/drm/card1")
            ),
            (real_a.join("drm/card1/device"), p("../../../0000:03:00.0")),
            (
                p("/sys/bus/pci/devices/0000:06:00.0"),
                p(
                    "../../../devices/pci0000:00/0000:00:01.2/0000:04:00.0/0000:05:00.0/0000:06:00.0"
                )
            ),
            (
                real_b.join("driver"),
                p("../../../../../../bus/pci/drivers/amdgpu")
            ),
            // Listing a directory records its links too, for a replay.
            (
                p("/sys/class/drm/card2"),
                p(
                    "../../devices/pci0000:00/0000:00:01.2/0000:04:00.0/0000:05:00.0/0000:06:00.0/drm/card2"
                )
            ),
            (
                p("/sys/class/drm/renderD128"),
                p("../../devices/pci0000:00/0000:00:01.1/0000:03:00.0/drm/renderD128")
            ),
        ])
    );
    assert_eq!(
        rec.dirs,
        BTreeSet::from([
            p("/sys/class/drm"),
            real_a.join("drm"),
            // Directories seen while listing `drm/`.
            real_a.join("drm/card1"),
            // A directory resolved (through `bus/pci/devices/...`).
            real_b.clone(),
            real_a.join("drm/renderD128"),
        ])
    );
    assert_eq!(
        rec.dev,
        BTreeMap::from([
            (p("/dev/dri/card1"), Some(char_dev(226, 1, 0o660, 0, 44))),
            (p("/dev/dri/card9"), None),
            (
                p("/dev/dri/by-path/pci-0000:03:00.0-card"),
                Some(sym("../card1"))
            ),
        ])
    );

    // Taking empties it.
    let again = root.take_record();
    assert!(again.files.is_empty() && again.links.is_empty());
    assert!(again.dirs.is_empty() && again.dev.is_empty());
}

#[test]
fn recording_real_devfs_lookups() {
    let (_tmp, base) = new_root();
    put(&base, "dev/dri/card1", b"");
    link(&base, "dev/dri/by-path/pci-card", "../card1");
    let root = open(&base).recording();
    assert_eq!(
        root.dev_list(&dev_path("dri")).unwrap(),
        ["by-path", "card1"]
    );
    assert_eq!(root.dev_entry(&dev_path("nope")).unwrap(), None);
    let rec = root.take_record();
    assert_eq!(
        rec.dev.keys().cloned().collect::<Vec<_>>(),
        [p("/dev/dri/by-path"), p("/dev/dri/card1"), p("/dev/nope")]
    );
    assert_eq!(rec.dev.get(&p("/dev/nope")), Some(&None));
    assert_eq!(
        rec.dev
            .get(&p("/dev/dri/card1"))
            .cloned()
            .flatten()
            .map(|e| e.kind),
        Some(DevKind::Other)
    );
    // The listed directory, the directory seen in it, and `/dev`, resolved
    // on the way.
    assert_eq!(
        rec.dirs,
        BTreeSet::from([p("/dev"), p("/dev/dri"), p("/dev/dri/by-path")])
    );
    assert!(rec.files.is_empty());
}

#[test]
fn not_recording_records_nothing() {
    let (_tmp, base) = new_root();
    gpu_tree(&base);
    let root = open(&base);
    root.read_attr(&sys_path("class/drm/card1/device/vendor"))
        .unwrap();
    root.list_dir(&sys_path("class/drm")).unwrap();
    let rec = root.take_record();
    assert!(rec.files.is_empty() && rec.links.is_empty());
    assert!(rec.dirs.is_empty() && rec.dev.is_empty());
}

// ----------------------------------------------------------- parse_majmin

#[test]
fn parse_majmin_values() {
    assert_eq!(parse_majmin("226:128"), Some((226, 128)));
    assert_eq!(parse_majmin(" 226:128\n"), Some((226, 128)));
    assert_eq!(parse_majmin("0:0"), Some((0, 0)));
    assert_eq!(
        parse_majmin("4294967295:4294967295"),
        Some((u32::MAX, u32::MAX))
    );
    for bad in [
        "",
        ":",
        "226:",
        ":1",
        "a:b",
        "1:2:3",
        "+1:2",
        "1: 2",
        "4294967296:0",
        "00000000001:0",
        "1 2",
    ] {
        assert_eq!(parse_majmin(bad), None, "{bad:?}");
    }
}

// --------------------------------------------------------------- proptests

fn manifest_token() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "/dev/x",
            "/dev/a/b",
            "/dev/",
            "/dev",
            "/sys/x",
            "/dev/../x",
            "c",
            "b",
            "l",
            "d",
            "1:2",
            "226:128",
            "4294967296:1",
            ":",
            "0660",
            "7777",
            "17777",
            "x",
            "0",
            "-1",
            "#",
            "\n",
            "\r\n",
            " ",
            "\t",
            "..",
            ".",
            "",
        ])
        .prop_map(str::to_string),
        any::<String>(),
    ]
}

fn rel_target() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec![
            "..", "..", "..", ".", "", "a", "b", "sys", "root", "outside", "l", "m", "secret",
        ]),
        1..9,
    )
    .prop_map(|v| {
        let t = v.join("/");
        if t.is_empty() { ".".to_string() } else { t }
    })
}

/// A byte of a hostile name: anything, often one the manifest must escape.
fn name_byte() -> impl Strategy<Value = u8> {
    prop_oneof![
        any::<u8>(),
        prop::sample::select(vec![
            b' ', b'\n', b'\r', b'\t', b'\\', b'#', b'x', 0x0b, 0x7f, 0xff, 0xc3
        ]),
        prop::sample::select(b"abc019_:.-".to_vec()),
    ]
}

/// Any normalized path below `/dev`: components of any bytes but `/`,
/// never `.` or `..`.
fn dev_name() -> impl Strategy<Value = PathBuf> {
    prop::collection::vec(
        prop::collection::vec(name_byte(), 1..8)
            .prop_map(|mut c| {
                c.retain(|b| *b != b'/');
                c
            })
            .prop_filter("a normal component", |c| {
                !c.is_empty() && c.as_slice() != b"." && c.as_slice() != b".."
            }),
        1..4,
    )
    .prop_map(|cs| {
        let mut path = p("/dev");
        for c in cs {
            path.push(OsStr::from_bytes(&c));
        }
        path
    })
}

/// Any link target Linux can have: non-empty text (lstat_dev reads it
/// lossily as UTF-8).
fn link_target() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[ \\n\\r\\t\\\\#x0-9a-f./\u{85}\u{a0}\u{2028}-]{1,30}",
    ]
    .prop_filter("not empty", |t| !t.is_empty())
}

fn dev_entry_strategy() -> impl Strategy<Value = DevEntry> {
    prop_oneof![
        (
            any::<bool>(),
            any::<u32>(),
            any::<u32>(),
            0u32..=0o7777,
            any::<u32>(),
            any::<u32>()
        )
            .prop_map(|(block, major, minor, mode, uid, gid)| DevEntry {
                kind: if block { DevKind::Block } else { DevKind::Char },
                major,
                minor,
                mode,
                uid,
                gid,
                target: None,
            }),
        link_target().prop_map(|t| sym(&t)),
        Just(dir()),
    ]
}

/// Checks that a resolved host path stays inside the root on disk.
fn assert_inside(root: &HostRoot, canon_base: &Path, host: &Path) -> Result<(), TestCaseError> {
    match root.resolve(host) {
        Ok(real) => {
            prop_assert!(real.is_absolute(), "{real:?}");
            prop_assert!(
                real.components()
                    .all(|c| matches!(c, Component::RootDir | Component::Normal(_))),
                "{real:?} is not normalized"
            );
            let disk = root.disk_path(&real);
            prop_assert!(disk.starts_with(root.base()), "{disk:?}");
            if let Ok(canon) = fs::canonicalize(&disk) {
                prop_assert!(
                    canon.starts_with(canon_base),
                    "{host:?} resolved to {real:?}, on disk {canon:?}, outside {canon_base:?}"
                );
            }
            if let Ok(bytes) = root.read(host) {
                prop_assert_ne!(bytes, b"outside\n".to_vec());
            }
        }
        Err(e) => {
            prop_assert!(
                matches!(
                    e,
                    Error::Escape { .. } | Error::Loop { .. } | Error::Io { .. }
                ),
                "{e:?}"
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The walk's components are `Path::components`' (`/` and `.`
    /// skipped, `..` kept) for any path of `/`, `.`, `..` and names.
    #[test]
    fn next_component_splits_as_path_components(
        parts in prop::collection::vec(
            prop::sample::select(vec!["/", "//", ".", "..", "a", "b.", ".c", "...", "\u{e9}"]),
            0..12,
        ),
    ) {
        let text = parts.concat();
        let mut ours = Vec::new();
        let mut at = 0;
        while let Some((start, end)) = next_component(text.as_bytes(), at) {
            ours.push(&text[start..end]);
            at = end;
        }
        let theirs: Vec<&str> = Path::new(&text)
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => n.to_str(),
                Component::ParentDir => Some(".."),
                _ => None,
            })
            .collect();
        prop_assert_eq!(ours, theirs, "{}", text);
    }

    #[test]
    fn parse_manifest_never_panics_on_arbitrary_text(text in any::<String>()) {
        let _ = parse_manifest(Path::new("m"), &text);
    }

    #[test]
    fn parse_manifest_never_panics_on_token_soup(
        tokens in prop::collection::vec(manifest_token(), 0..40),
    ) {
        let text = tokens.join(" ");
        if let Err(e) = parse_manifest(Path::new("m"), &text) {
            let msg = e.to_string();
            prop_assert!(msg.starts_with("m:"), "{msg}");
        }
    }

    /// Any entry map (names and targets with spaces, newlines, `#`,
    /// backslashes, control characters, non-UTF-8 bytes) reads back as it
    /// was written: a snapshot replays exactly.
    #[test]
    fn format_then_parse_is_identity(
        entries in prop::collection::btree_map(dev_name(), dev_entry_strategy(), 0..12),
    ) {
        let text = format_manifest(&entries);
        let back = parse_manifest(Path::new("m"), &text);
        prop_assert!(back.is_ok(), "{text}");
        prop_assert_eq!(back.ok(), Some(entries));
    }

    #[test]
    fn resolve_never_leaves_the_root(
        at in prop::sample::select(vec!["sys/l", "sys/a/l", "sys/a/b/l", "l"]),
        t1 in rel_target(),
        t2 in rel_target(),
        suffix in prop::sample::select(vec!["", "/secret", "/..", "/../..", "/b", "/sys/a", "/m/secret"]),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("root");
        put(tmp.path(), "secret", b"outside\n");
        put(tmp.path(), "outside/secret", b"outside\n");
        mkdir(tmp.path(), "a/b");
        put(&base, "secret", b"inside\n");
        put(&base, "sys/a/b/secret", b"inside\n");
        mkdir(&base, "a/b");
        mkdir(&base, "sys/b");
        link(&base, at, &t1);
        link(&base, "sys/a/m", &t2);
        let root = open(&base);
        let canon_base = fs::canonicalize(&base).unwrap();
        for host in [
            format!("/{at}{suffix}"),
            format!("/sys/a/m{suffix}"),
            format!("/{at}/m{suffix}"),
            format!("/sys/a/b/l{suffix}"),
        ] {
            assert_inside(&root, &canon_base, Path::new(&host))?;
            let _ = root.link_name(Path::new(&host));
            let _ = root.list_dir_opt(Path::new(&host));
        }
    }
}

use crate::fsio::test_support::{mkfifo, quick};

#[test]
fn a_fifo_anywhere_under_the_root_is_refused_not_opened() {
    let (_tmp, base) = new_root();
    mkdir(&base, "sys/class/drm/card0");
    mkdir(&base, "proc");
    mkfifo(&base.join("sys/class/drm/card0/dev"));
    mkfifo(&base.join("proc/devices"));
    let root = open(&base);
    for (host, disk) in [
        ("/sys/class/drm/card0/dev", "sys/class/drm/card0/dev"),
        ("/proc/devices", "proc/devices"),
    ] {
        let err = quick(|| root.read_attr(Path::new(host))).unwrap_err();
        assert!(matches!(err, Error::NotRegular { what: "a FIFO", .. }));
        assert_eq!(
            err.to_string(),
            format!(
                "{}: a FIFO, not a regular file: not reading it",
                base.join(disk).display()
            )
        );
    }
    // Through a link inside the root too.
    symlink("../proc/devices", base.join("sys/devices")).unwrap();
    let err = quick(|| root.read(&sys_path("devices"))).unwrap_err();
    assert!(
        matches!(err, Error::NotRegular { what: "a FIFO", .. }),
        "{err}"
    );
}

#[test]
fn a_device_node_under_the_root_is_never_opened() {
    let (_tmp, base) = new_root();
    mkdir(&base, "sys");
    // A link to the host's /dev/zero is taken inside the root (chroot
    // semantics) and a link to a real device node inside the root is
    // refused before any open: nothing reads endless zeroes.
    symlink("/dev/zero", base.join("sys/zero")).unwrap();
    let root = open(&base);
    let err = quick(|| root.read(&sys_path("zero"))).unwrap_err();
    assert!(err.is_not_found(), "{err}");
    let err = quick(|| root.read(Path::new("/sys/../../../../dev/zero"))).unwrap_err();
    assert!(matches!(err, Error::Escape { .. }), "{err}");
    // A real character device (1:5, zero) in the root, where mknod is
    // allowed (root): refused by its type.
    let node = base.join("sys/zero-node");
    let made = rustix::fs::mknodat(
        rustix::fs::CWD,
        &node,
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::Mode::from_raw_mode(0o666),
        rustix::fs::makedev(1, 5),
    );
    if made.is_ok() {
        let err = quick(|| root.read(&sys_path("zero-node"))).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{}: a character device, not a regular file: not reading it",
                node.display()
            )
        );
    }
}

#[test]
fn an_unreadable_root_is_named_as_the_problem() {
    use std::os::unix::fs::MetadataExt as _;
    if fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0) {
        // Root reads any directory: nothing to show.
        return;
    }
    let (_tmp, base) = new_root();
    fs::set_permissions(&base, fs::Permissions::from_mode(0o000)).unwrap();
    let err = HostRoot::open(&base).unwrap_err();
    fs::set_permissions(&base, fs::Permissions::from_mode(0o755)).unwrap();
    let text = err.to_string();
    assert!(
        text.starts_with(&format!(
            "{}: cannot read the root directory: ",
            base.display()
        )),
        "{text}"
    );
    assert!(!text.contains(DEV_MANIFEST), "{text}");
}

#[test]
fn the_manifest_is_read_inside_the_root() {
    let (tmp, base) = new_root();
    // A manifest link to a file outside the root is not followed out.
    let outside = tmp.path().join("outside.manifest");
    fs::write(&outside, "/dev/null c 1:3 0666 0 0\n").unwrap();
    symlink(&outside, base.join(DEV_MANIFEST)).unwrap();
    let root = HostRoot::open(&base).unwrap();
    assert!(!root.has_devfs());
    // A relative link that climbs out is an error naming it.
    fs::remove_file(base.join(DEV_MANIFEST)).unwrap();
    symlink("../outside.manifest", base.join(DEV_MANIFEST)).unwrap();
    let err = HostRoot::open(&base).unwrap_err();
    assert!(matches!(err, Error::Escape { .. }), "{err}");
    // A FIFO manifest does not hang the open.
    fs::remove_file(base.join(DEV_MANIFEST)).unwrap();
    mkfifo(&base.join(DEV_MANIFEST));
    let err = quick(|| HostRoot::open(&base)).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: a FIFO, not a regular file: not reading it",
            base.join(DEV_MANIFEST).display()
        )
    );
}

// ---------------------------------------------------------------- trusted files

#[test]
fn trusted_entries_are_roots_and_writable_by_root_alone() {
    use EntryKind::{Dir, File, Other, Symlink};
    assert_eq!(untrusted(Dir, 0, 0o40755, false), Ok(()));
    assert_eq!(untrusted(File, 0, 0o100644, true), Ok(()));
    assert_eq!(untrusted(File, 0, 0o100755, true), Ok(()));
    // Sticky /tmp is still writable by others.
    assert_eq!(
        untrusted(Dir, 0, 0o41777, false),
        Err("is writable by others".into())
    );
    assert_eq!(
        untrusted(Dir, 0, 0o40775, false),
        Err("is writable by its group".into())
    );
    assert_eq!(
        untrusted(File, 0, 0o100664, true),
        Err("is writable by its group".into())
    );
    assert_eq!(
        untrusted(File, 1000, 0o100644, true),
        Err("is owned by uid 1000, not root".into())
    );
    assert_eq!(
        untrusted(Symlink, 0, 0o120777, true),
        Err("is a symlink".into())
    );
    assert_eq!(
        untrusted(Dir, 0, 0o40755, true),
        Err("is not a regular file".into())
    );
    assert_eq!(
        untrusted(Other, 0, 0o10644, true),
        Err("is not a regular file".into())
    );
    assert_eq!(
        untrusted(File, 0, 0o100644, false),
        Err("is not a directory".into())
    );
}

#[test]
fn a_system_file_is_trusted_at_its_real_path() {
    let root = HostRoot::open(Path::new("/")).unwrap();
    assert_eq!(
        root.trusted_file(Path::new("/etc/passwd")),
        Ok(PathBuf::from("/etc/passwd"))
    );
    assert_eq!(
        root.trusted_file(Path::new("/etc/no-such-file-here")),
        Err("No such file or directory (os error 2)".into())
    );
}

#[test]
fn a_file_in_a_temp_dir_is_not_trusted_and_symlinks_are_followed_inside_the_root() {
    let tmp = TempDir::new().unwrap();
    put(tmp.path(), "b/lib.so", b"\x7fELF");
    fs::create_dir(tmp.path().join("a")).unwrap();
    // Absolute, as in a driver root: resolved inside the root.
    symlink("/b/lib.so", tmp.path().join("a/lib.so")).unwrap();
    fs::set_permissions(tmp.path().join("b"), fs::Permissions::from_mode(0o777)).unwrap();
    let root = HostRoot::open(tmp.path()).unwrap();
    let err = root.trusted_file(Path::new("/a/lib.so")).unwrap_err();
    // Some directory on the way (the temp directory's parents are not
    // root's alone on every machine; `b` is writable by all) is named.
    let file = fs::canonicalize(tmp.path().join("b/lib.so")).unwrap();
    let (at, why) = err.split_once(' ').unwrap();
    assert!(file.starts_with(at) && Path::new(at) != file, "{err}");
    assert!(
        [
            "is writable by others",
            "is writable by its group",
            "is a symlink"
        ]
        .contains(&why)
            || why.starts_with("is owned by uid "),
        "{err}"
    );
}

#[test]
fn a_fresh_root_sees_the_host_now_and_keeps_its_settings() {
    let tmp = TempDir::new().unwrap();
    let base = tmp.path();
    put(base, "sys/x/address", b"1\n");
    put(base, "sys/y/address", b"2\n");
    link(base, "sys/class/net/eth0", "../../x");
    let root = HostRoot::open(base)
        .unwrap()
        .with_driver_root(Path::new("/run/d"));
    let p = Path::new("/sys/class/net/eth0/address");
    assert_eq!(root.read_attr(p).unwrap(), "1");
    fs::remove_file(base.join("sys/class/net/eth0")).unwrap();
    symlink("../../y", base.join("sys/class/net/eth0")).unwrap();
    let fresh = root.fresh();
    assert_eq!(fresh.read_attr(p).unwrap(), "2");
    assert_eq!(fresh.driver_root(), Path::new("/run/d"));
    // An absolute link is taken from the root, in a fresh root too.
    fs::remove_file(base.join("sys/class/net/eth0")).unwrap();
    symlink("/sys/x", base.join("sys/class/net/eth0")).unwrap();
    assert_eq!(root.fresh().read_attr(p).unwrap(), "1");
    assert!(!root.is_host());
}

#[test]
fn likely_links_are_the_kernels_link_names_and_class_entries() {
    for p in [
        "/sys/devices/pci0000:00/0000:00:01.0/driver",
        "/sys/devices/pci0000:00/0000:00:01.0/virtfn12",
        "/sys/class/net/eth0",
        "/sys/bus/pci/devices/0000:00:01.0",
        "/sys/dev/char/226:0",
    ] {
        assert!(likely_link(Path::new(p)), "{p}");
    }
    for p in [
        "/sys/devices/pci0000:00/0000:00:01.0",
        "/sys/class/net",
        "/sys/class/net/eth0/queues",
        "/sys/bus/pci/devices",
        "/sys/bus/pci/drivers/mlx5_core",
        "/run/class/net/eth0",
    ] {
        assert!(!likely_link(Path::new(p)), "{p}");
    }
}

/// The order in which a walk asks what an entry is (read as a link, or
/// opened as a directory) changes no answer: a name the kernel makes a
/// link that is a directory here, and a directory where a link is
/// expected, resolve as what they are.
#[test]
fn entries_resolve_as_what_they_are_whatever_their_names_suggest() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path();
    put(base, "sys/devices/a/device/vendor", b"0x10de\n");
    put(base, "sys/devices/b/vendor", b"0x8086\n");
    put(base, "sys/class/net/eth0/address", b"1\n");
    link(base, "sys/devices/a/plain", "../b");
    link(base, "sys/devices/a/driver", "../b");
    link(base, "sys/class/net/eth1", "../../devices/b");
    let root = HostRoot::open(base).unwrap();
    for (path, want) in [
        ("/sys/devices/a/device/vendor", "0x10de"),
        ("/sys/devices/a/plain/vendor", "0x8086"),
        ("/sys/devices/a/driver/vendor", "0x8086"),
        ("/sys/class/net/eth0/address", "1"),
        ("/sys/class/net/eth1/vendor", "0x8086"),
    ] {
        assert_eq!(root.read_attr(Path::new(path)).unwrap(), want, "{path}");
    }
    assert_eq!(
        root.resolve(Path::new("/sys/devices/a/device")).unwrap(),
        Path::new("/sys/devices/a/device")
    );
    assert_eq!(
        root.resolve(Path::new("/sys/class/net/eth1")).unwrap(),
        Path::new("/sys/devices/b")
    );
    assert_eq!(
        root.raw_link(Path::new("/sys/devices/a/plain")).unwrap(),
        Some(PathBuf::from("../b"))
    );
    assert_eq!(
        root.raw_link(Path::new("/sys/class/net/eth0")).unwrap(),
        None
    );
}

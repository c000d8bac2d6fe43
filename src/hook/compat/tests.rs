#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::os::unix::fs::{FileTypeExt as _, symlink};
use std::path::PathBuf;

use proptest::prelude::*;

use super::*;
use crate::hook::inroot::Resolver;
use crate::hook::test_support::{ReadOnlyMount, listing, mkfifo, with_timeout};

fn v(s: &str) -> DriverVersion {
    DriverVersion::parse(s).unwrap()
}

#[test]
fn versions_parse_and_compare_by_number() {
    assert_eq!(v("550.90.07").parts(), [550, 90, 7]);
    assert_eq!(v("550.90.07").to_string(), "550.90.07");
    assert_eq!(v("550.90.07").major(), 550);
    assert_eq!(v("390.87").parts(), [390, 87]);
    assert_eq!(v("560").parts(), [560]);
    assert!(v("550.100.1") > v("550.90.7"));
    assert!(v("1000.1") > v("999.99.99"));
    assert_eq!(v("550.90.07"), v("550.90.7"));
    for bad in [
        "",
        ".",
        "550.",
        ".550",
        "550..90",
        "550.90.07.1.2",
        "v550",
        "550.9a",
        "-1",
        "550 90",
        "1234567890",
        "550.90.07\n",
        "٥٥٠",
    ] {
        assert_eq!(DriverVersion::parse(bad), None, "{bad:?}");
    }
}

#[test]
fn a_bad_host_version_says_what_is_expected() {
    assert_eq!(
        parse_host_version("55a.1").unwrap_err().to_string(),
        "--host-driver-version 55a.1: not a driver version (expected numbers separated by dots, such as 550.90.07)"
    );
}

proptest! {
    #[test]
    fn parse_never_panics(s in "\\PC{0,30}") {
        let _ = DriverVersion::parse(&s);
    }

    #[test]
    fn versions_round_trip(parts in proptest::collection::vec(0u32..1_000_000, 1..=4)) {
        let text = parts.iter().map(u32::to_string).collect::<Vec<_>>().join(".");
        let parsed = DriverVersion::parse(&text).unwrap();
        prop_assert_eq!(parsed.parts(), parts.as_slice());
        prop_assert_eq!(parsed.to_string(), text);
    }
}

/// A root in a temp dir, with `compat` files (name → regular file, or
/// `name -> target` for a link) in /usr/local/cuda-12.4/compat, reached
/// through /usr/local/cuda -> cuda-12.4.
fn root_with(compat: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let dir = root.join("usr/local/cuda-12.4/compat");
    std::fs::create_dir_all(&dir).unwrap();
    symlink("cuda-12.4", root.join("usr/local/cuda")).unwrap();
    for entry in compat {
        match entry.split_once(" -> ") {
            Some((name, target)) => symlink(target, dir.join(name)).unwrap(),
            None => std::fs::write(dir.join(entry), "").unwrap(),
        }
    }
    (tmp, root)
}

fn open(root: &Path, resolver: Resolver) -> InRoot {
    InRoot::with_resolver(root, resolver).unwrap()
}

const CONF_TEXT: &str = "/usr/local/cuda/compat\n";

#[test]
fn the_highest_regular_libcuda_is_the_compat_version() {
    let (_tmp, root) = root_with(&[
        "libcuda.so.1 -> libcuda.so.555.42.06",
        "libcuda.so -> libcuda.so.1",
        "libcuda.so.555.42.06",
        "libcuda.so.550.54.15",
        "libcuda.so.999.1 -> /elsewhere",
        "libcuda.so.junk",
        "libnvidia-ptxjitcompiler.so.600.1.1",
    ]);
    std::fs::create_dir(root.join("usr/local/cuda-12.4/compat/libcuda.so.700.1.1")).unwrap();
    for resolver in [Resolver::Openat2, Resolver::Walk] {
        assert_eq!(
            compat_version(&open(&root, resolver)).unwrap(),
            Some(v("555.42.06"))
        );
    }
    // libcuda.so.1 alone (as a file) is a soname, not a version.
    let (_tmp, root) = root_with(&["libcuda.so.1"]);
    assert_eq!(
        compat_version(&open(&root, Resolver::Openat2)).unwrap(),
        None
    );
}

#[test]
fn a_newer_compat_driver_is_enabled() {
    for resolver in [Resolver::Openat2, Resolver::Walk] {
        let (_tmp, root) = root_with(&["libcuda.so.555.42.06"]);
        let got = enable_cuda_compat(&open(&root, resolver), &v("550.90.07")).unwrap();
        assert_eq!(
            got,
            Outcome::Enabled {
                compat: v("555.42.06")
            }
        );
        let text =
            std::fs::read_to_string(root.join("etc/ld.so.conf.d/00-cdigen-cuda-compat.conf"))
                .unwrap();
        assert_eq!(
            text,
            format!(
                "# Written by cdigen hook enable-cuda-compat: the CUDA forward-compatible driver 555.42.06 (the host's is 550.90.07).\n{CONF_TEXT}"
            )
        );
        // Again: the same file.
        enable_cuda_compat(&open(&root, resolver), &v("550.90.07")).unwrap();
        assert_eq!(listing(&root.join("etc")).len(), 2, "{resolver:?}");
    }
}

#[test]
fn a_compat_driver_of_the_same_major_or_older_is_not_enabled() {
    for host in ["555.1.1", "555.42.06", "560.28.03"] {
        let (_tmp, root) = root_with(&["libcuda.so.555.42.06"]);
        // Left by an earlier start on an older host driver.
        std::fs::create_dir_all(root.join("etc/ld.so.conf.d")).unwrap();
        std::fs::write(
            root.join("etc/ld.so.conf.d/00-cdigen-cuda-compat.conf"),
            CONF_TEXT,
        )
        .unwrap();
        std::fs::write(root.join("etc/ld.so.conf.d/other.conf"), "/x\n").unwrap();
        let got = enable_cuda_compat(&open(&root, Resolver::Openat2), &v(host)).unwrap();
        assert_eq!(
            got,
            Outcome::NotNewer {
                compat: v("555.42.06"),
                removed_stale: true
            },
            "{host}"
        );
        assert_eq!(
            listing(&root.join("etc")),
            ["ld.so.conf.d", "ld.so.conf.d/other.conf"]
                .map(String::from)
                .into()
        );
    }
}

#[test]
fn no_compat_directory_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let got = enable_cuda_compat(&open(tmp.path(), Resolver::Openat2), &v("550.90.07")).unwrap();
    assert_eq!(
        got,
        Outcome::NoCompat {
            removed_stale: false
        }
    );
    assert!(listing(tmp.path()).is_empty());
    // /usr/local/cuda a file: no compat either.
    std::fs::create_dir_all(tmp.path().join("usr/local")).unwrap();
    std::fs::write(tmp.path().join("usr/local/cuda"), "").unwrap();
    let got = enable_cuda_compat(&open(tmp.path(), Resolver::Walk), &v("550.90.07")).unwrap();
    assert_eq!(
        got,
        Outcome::NoCompat {
            removed_stale: false
        }
    );
}

#[test]
fn hostile_conf_directories_stay_inside_the_root() {
    for resolver in [Resolver::Openat2, Resolver::Walk] {
        let (tmp, root) = root_with(&["libcuda.so.555.42.06"]);
        std::fs::create_dir(root.join("etc")).unwrap();
        symlink("../../..", root.join("etc/ld.so.conf.d")).unwrap();
        let outside = |t: &tempfile::TempDir| -> Vec<String> {
            listing(t.path())
                .into_iter()
                .filter(|p| !p.starts_with("root"))
                .collect()
        };
        let before = outside(&tmp);
        let got = enable_cuda_compat(&open(&root, resolver), &v("550.90.07")).unwrap();
        assert_eq!(
            got,
            Outcome::Enabled {
                compat: v("555.42.06")
            }
        );
        // ../../.. from /etc is the root.
        assert!(
            std::fs::read_to_string(root.join("00-cdigen-cuda-compat.conf"))
                .unwrap()
                .ends_with(CONF_TEXT)
        );
        assert_eq!(outside(&tmp), before, "{resolver:?}");
    }
}

#[test]
fn a_fifo_where_the_conf_goes_is_an_error_and_never_opened() {
    let (_tmp, root) = root_with(&["libcuda.so.555.42.06"]);
    std::fs::create_dir_all(root.join("etc/ld.so.conf.d")).unwrap();
    let fifo = root.join("etc/ld.so.conf.d/00-cdigen-cuda-compat.conf");
    mkfifo(&fifo);
    let r = open(&root, Resolver::Openat2);
    let e = with_timeout(move || enable_cuda_compat(&r, &v("550.90.07")).unwrap_err());
    assert_eq!(
        e.to_string(),
        "/etc/ld.so.conf.d/00-cdigen-cuda-compat.conf: a FIFO is there, not a regular file: not replacing it"
    );
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );
    // Not needed: the FIFO is not removed either.
    let r = open(&root, Resolver::Openat2);
    let e = with_timeout(move || enable_cuda_compat(&r, &v("560.1")).unwrap_err());
    assert_eq!(
        e.to_string(),
        "/etc/ld.so.conf.d/00-cdigen-cuda-compat.conf: a FIFO is there, not a regular file: not removing it"
    );
}

#[test]
fn too_many_compat_entries_is_an_error() {
    let (_tmp, root) = root_with(&[]);
    let dir = root.join("usr/local/cuda-12.4/compat");
    for i in 0..=MAX_COMPAT_ENTRIES {
        std::fs::write(dir.join(format!("f{i}")), "").unwrap();
    }
    let e = enable_cuda_compat(&open(&root, Resolver::Openat2), &v("550.90.07")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "/usr/local/cuda/compat: more than 4096 entries: not reading it"
    );
}

#[test]
fn a_read_only_root_is_reported() {
    let Some(ro) = ReadOnlyMount::new(|p| {
        let dir = p.join("usr/local/cuda/compat");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("libcuda.so.555.42.06"), "").unwrap();
    }) else {
        return;
    };
    let got = enable_cuda_compat(&open(ro.path(), Resolver::Openat2), &v("550.90.07")).unwrap();
    assert_eq!(
        got,
        Outcome::ReadOnly {
            compat: v("555.42.06")
        }
    );
    let got = enable_cuda_compat(&open(ro.path(), Resolver::Openat2), &v("560.1")).unwrap();
    assert_eq!(
        got,
        Outcome::NotNewer {
            compat: v("555.42.06"),
            removed_stale: false
        }
    );
}

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::BTreeSet;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

use super::*;
use crate::hook::test_support::{listing, mkfifo, with_timeout};

const RESOLVERS: [Resolver; 2] = [Resolver::Openat2, Resolver::Walk];

/// A temp dir holding `root/` and `outside/` (with one file), and the
/// root opened with `resolver`.
struct Fixture {
    tmp: tempfile::TempDir,
    root: InRoot,
}

impl Fixture {
    fn new(resolver: Resolver) -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("root")).unwrap();
        std::fs::create_dir(tmp.path().join("outside")).unwrap();
        std::fs::write(tmp.path().join("outside/keep"), "keep").unwrap();
        let root = InRoot::with_resolver(&tmp.path().join("root"), resolver).unwrap();
        Fixture { tmp, root }
    }

    fn root(&self) -> &Path {
        self.root.path()
    }

    fn outside(&self) -> std::path::PathBuf {
        self.tmp.path().join("outside")
    }

    /// Everything in the temp dir outside `root/`.
    fn outside_listing(&self) -> BTreeSet<String> {
        listing(self.tmp.path())
            .into_iter()
            .filter(|p| !p.starts_with("root/") && p != "root")
            .collect()
    }
}

#[test]
fn open_probes_openat2() {
    let tmp = tempfile::tempdir().unwrap();
    // This kernel (CI's and ours) has openat2; the walk is the fallback.
    assert_eq!(
        InRoot::open(tmp.path()).unwrap().resolver(),
        Resolver::Openat2
    );
    let e = InRoot::open(&tmp.path().join("missing")).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}/missing: cannot open the container root: No such file or directory (os error 2)",
            tmp.path().display()
        )
    );
}

#[test]
fn dir_all_creates_directories_0755() {
    for resolver in RESOLVERS {
        let f = Fixture::new(resolver);
        f.root
            .dir_all(Path::new("/usr/lib/x86_64-linux-gnu/gbm"))
            .unwrap();
        for d in ["usr", "usr/lib", "usr/lib/x86_64-linux-gnu/gbm"] {
            let meta = std::fs::symlink_metadata(f.root().join(d)).unwrap();
            assert!(meta.is_dir(), "{resolver:?} {d}");
            assert_eq!(
                meta.permissions().mode() & 0o7777,
                0o755,
                "{resolver:?} {d}"
            );
        }
        // Again: nothing to do, no error.
        f.root
            .dir_all(Path::new("usr/lib/x86_64-linux-gnu/gbm"))
            .unwrap();
    }
}

#[test]
fn an_absolute_symlink_out_of_the_root_resolves_inside_it() {
    for resolver in RESOLVERS {
        let f = Fixture::new(resolver);
        let before = f.outside_listing();
        // usr -> /…/outside: a host directory that exists.
        symlink(f.outside(), f.root().join("usr")).unwrap();
        f.root.dir_all(Path::new("/usr/lib64")).unwrap();
        f.root
            .write_file(Path::new("/usr/lib64/x.conf"), b"x\n")
            .unwrap();
        assert_eq!(
            f.root
                .symlink(OsStr::new("x.conf"), Path::new("/usr/lib64/y"))
                .unwrap(),
            Symlink::Created
        );
        // Made inside the root, at the link's target taken from the root.
        let inside = f.root().join(f.outside().strip_prefix("/").unwrap());
        assert_eq!(std::fs::read(inside.join("lib64/x.conf")).unwrap(), b"x\n");
        assert_eq!(
            std::fs::read_link(inside.join("lib64/y")).unwrap(),
            Path::new("x.conf")
        );
        assert_eq!(f.outside_listing(), before, "{resolver:?}");
    }
}

#[test]
fn dot_dot_never_climbs_above_the_root() {
    for resolver in RESOLVERS {
        let f = Fixture::new(resolver);
        let before = f.outside_listing();
        std::fs::create_dir(f.root().join("etc")).unwrap();
        // etc/ld.so.conf.d -> ../../.. : the root itself.
        symlink("../../..", f.root().join("etc/ld.so.conf.d")).unwrap();
        f.root
            .write_file(Path::new("/etc/ld.so.conf.d/00-x.conf"), b"/usr/lib64\n")
            .unwrap();
        assert_eq!(
            std::fs::read(f.root().join("00-x.conf")).unwrap(),
            b"/usr/lib64\n"
        );
        // `..` in the path itself.
        f.root.dir_all(Path::new("/../../../outside/new")).unwrap();
        assert!(f.root().join("outside/new").is_dir());
        assert_eq!(
            f.root
                .symlink(OsStr::new("t"), Path::new("/usr/../../../../outside/l"))
                .unwrap(),
            Symlink::Created
        );
        assert!(f.root().join("outside/l").is_symlink());
        assert_eq!(f.outside_listing(), before, "{resolver:?}");
    }
}

#[test]
fn merged_usr_links_are_followed_inside_the_root() {
    for resolver in RESOLVERS {
        let f = Fixture::new(resolver);
        std::fs::create_dir_all(f.root().join("usr/lib64")).unwrap();
        std::fs::create_dir_all(f.root().join("usr/lib")).unwrap();
        symlink("usr/lib64", f.root().join("lib64")).unwrap();
        symlink("/usr/lib", f.root().join("lib")).unwrap();
        f.root
            .symlink(OsStr::new("libcuda.so.1"), Path::new("/lib64/libcuda.so"))
            .unwrap();
        f.root
            .symlink(
                OsStr::new("libcuda.so.1"),
                Path::new("/lib/x86_64-linux-gnu/libcuda.so"),
            )
            .unwrap();
        assert_eq!(
            std::fs::read_link(f.root().join("usr/lib64/libcuda.so")).unwrap(),
            Path::new("libcuda.so.1")
        );
        assert_eq!(
            std::fs::read_link(f.root().join("usr/lib/x86_64-linux-gnu/libcuda.so")).unwrap(),
            Path::new("libcuda.so.1")
        );
        // The links themselves are untouched.
        assert_eq!(
            std::fs::read_link(f.root().join("lib64")).unwrap(),
            Path::new("usr/lib64")
        );
    }
}

#[test]
fn symlink_reports_what_is_there() {
    for resolver in RESOLVERS {
        let f = Fixture::new(resolver);
        std::fs::create_dir(f.root().join("lib")).unwrap();
        std::fs::write(f.root().join("lib/file"), "image").unwrap();
        symlink("other", f.root().join("lib/link")).unwrap();
        mkfifo(&f.root().join("lib/fifo"));
        let t = OsStr::new("libcuda.so.1");
        assert_eq!(
            f.root.symlink(t, Path::new("/lib/new")).unwrap(),
            Symlink::Created
        );
        assert_eq!(
            f.root.symlink(t, Path::new("/lib/new")).unwrap(),
            Symlink::Present
        );
        assert_eq!(
            f.root.symlink(t, Path::new("/lib/file")).unwrap(),
            Symlink::Occupied(Occupant::Other(Kind::File))
        );
        assert_eq!(
            f.root.symlink(t, Path::new("/lib/link")).unwrap(),
            Symlink::Occupied(Occupant::Link("other".into()))
        );
        let got = with_timeout(move || f.root.symlink(OsStr::new("x"), Path::new("/lib/fifo")));
        assert_eq!(got.unwrap(), Symlink::Occupied(Occupant::Other(Kind::Fifo)));
    }
}

#[test]
fn a_file_where_a_directory_should_be_is_not_a_directory() {
    for resolver in RESOLVERS {
        let f = Fixture::new(resolver);
        std::fs::write(f.root().join("usr"), "a file").unwrap();
        let e = f
            .root
            .symlink(OsStr::new("t"), Path::new("/usr/lib/x"))
            .unwrap_err();
        assert!(e.is_not_dir(), "{resolver:?}: {e}");
        assert_eq!(e.to_string(), "/usr/lib/x: Not a directory (os error 20)");
        assert_eq!(std::fs::read(f.root().join("usr")).unwrap(), b"a file");
    }
}

#[test]
fn symlink_loops_are_refused() {
    for resolver in RESOLVERS {
        let f = Fixture::new(resolver);
        symlink("b", f.root().join("a")).unwrap();
        symlink("a", f.root().join("b")).unwrap();
        let e = f.root.dir_all(Path::new("/a/x")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "/a/x: Too many levels of symbolic links (os error 40)",
            "{resolver:?}"
        );
        // A chain of dangling links longer than the limit, each to the
        // next missing one.
        for i in 0..=MAX_LINKS {
            symlink(format!("/d{}", i + 1), f.root().join(format!("d{i}"))).unwrap();
        }
        let e = f.root.dir_all(Path::new("/d0")).unwrap_err();
        assert_eq!(e.errno(), Some(Errno::LOOP), "{resolver:?}");
        assert!(!f.root().join(format!("d{}", MAX_LINKS + 1)).exists());
    }
}

#[test]
fn dangling_links_are_followed_when_creating() {
    for resolver in RESOLVERS {
        let f = Fixture::new(resolver);
        // /lib64 -> usr/lib64, neither there yet: an image with merged
        // /usr links but no /usr/lib64.
        symlink("usr/lib64", f.root().join("lib64")).unwrap();
        f.root.dir_all(Path::new("/lib64")).unwrap();
        assert!(f.root().join("usr/lib64").is_dir(), "{resolver:?}");
        assert!(f.root().join("lib64").is_symlink());
    }
}

#[test]
fn write_file_replaces_only_a_regular_file() {
    for resolver in RESOLVERS {
        let f = Fixture::new(resolver);
        std::fs::create_dir_all(f.root().join("etc/d")).unwrap();
        std::fs::write(f.root().join("etc/d/old"), "old").unwrap();
        f.root
            .write_file(Path::new("/etc/d/old"), b"new\n")
            .unwrap();
        assert_eq!(std::fs::read(f.root().join("etc/d/old")).unwrap(), b"new\n");
        let meta = std::fs::metadata(f.root().join("etc/d/old")).unwrap();
        assert_eq!(meta.permissions().mode() & 0o7777, 0o644);

        mkfifo(&f.root().join("etc/d/fifo"));
        std::fs::create_dir(f.root().join("etc/d/dir")).unwrap();
        symlink(f.outside().join("keep"), f.root().join("etc/d/link")).unwrap();
        let root = f.root.path().to_path_buf();
        let f = with_timeout(move || {
            let e = f
                .root
                .write_file(Path::new("/etc/d/fifo"), b"x")
                .unwrap_err();
            assert_eq!(
                e.to_string(),
                "/etc/d/fifo: a FIFO is there, not a regular file: not replacing it"
            );
            f
        });
        let e = f
            .root
            .write_file(Path::new("/etc/d/dir"), b"x")
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "/etc/d/dir: a directory is there, not a regular file: not replacing it"
        );
        let e = f
            .root
            .write_file(Path::new("/etc/d/link"), b"x")
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "/etc/d/link: a symbolic link is there, not a regular file: not replacing it"
        );
        assert_eq!(std::fs::read(f.outside().join("keep")).unwrap(), b"keep");
        // No temporary file left behind.
        let names: Vec<String> = listing(&root.join("etc/d")).into_iter().collect();
        assert_eq!(names, ["dir", "fifo", "link", "old"], "{resolver:?}");
    }
}

#[test]
fn remove_file_removes_only_a_regular_file() {
    for resolver in RESOLVERS {
        let f = Fixture::new(resolver);
        std::fs::create_dir(f.root().join("etc")).unwrap();
        std::fs::write(f.root().join("etc/a"), "a").unwrap();
        mkfifo(&f.root().join("etc/fifo"));
        assert!(f.root.remove_file(Path::new("/etc/a")).unwrap());
        assert!(!f.root().join("etc/a").exists());
        assert!(!f.root.remove_file(Path::new("/etc/a")).unwrap());
        assert!(!f.root.remove_file(Path::new("/missing/a")).unwrap());
        let e = f.root.remove_file(Path::new("/etc/fifo")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "/etc/fifo: a FIFO is there, not a regular file: not removing it"
        );
    }
}

#[test]
fn list_dir_is_bounded_and_says_what_each_entry_is() {
    for resolver in RESOLVERS {
        let f = Fixture::new(resolver);
        std::fs::create_dir_all(f.root().join("usr/local/cuda-12.4/compat")).unwrap();
        symlink("cuda-12.4", f.root().join("usr/local/cuda")).unwrap();
        let dir = f.root().join("usr/local/cuda-12.4/compat");
        std::fs::write(dir.join("libcuda.so.555.42.06"), "").unwrap();
        symlink("libcuda.so.555.42.06", dir.join("libcuda.so.1")).unwrap();
        mkfifo(&dir.join("fifo"));
        let mut got = f
            .root
            .list_dir(Path::new("/usr/local/cuda/compat"), 3)
            .unwrap();
        got.sort_by(|x, y| x.0.cmp(&y.0));
        assert_eq!(
            got,
            [
                (OsString::from("fifo"), Kind::Fifo),
                (OsString::from("libcuda.so.1"), Kind::Symlink),
                (OsString::from("libcuda.so.555.42.06"), Kind::File),
            ]
        );
        let e = f
            .root
            .list_dir(Path::new("/usr/local/cuda/compat"), 2)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "/usr/local/cuda/compat: more than 2 entries: not reading it"
        );
        let e = f.root.list_dir(Path::new("/nope"), 2).unwrap_err();
        assert!(e.is_not_found(), "{resolver:?}: {e}");
    }
}

#[test]
fn kind_does_not_follow_the_last_link() {
    for resolver in RESOLVERS {
        let f = Fixture::new(resolver);
        std::fs::create_dir(f.root().join("etc")).unwrap();
        symlink(f.outside().join("keep"), f.root().join("etc/l")).unwrap();
        assert_eq!(
            f.root.kind(Path::new("/etc/l")).unwrap(),
            Some(Kind::Symlink)
        );
        assert_eq!(f.root.kind(Path::new("/etc")).unwrap(), Some(Kind::Dir));
        assert_eq!(f.root.kind(Path::new("/etc/none")).unwrap(), None);
        assert_eq!(f.root.kind(Path::new("/none/none")).unwrap(), None);
    }
}

#[test]
fn paths_that_name_no_entry_or_are_too_long_are_refused() {
    let f = Fixture::new(Resolver::Openat2);
    for p in ["/", "/..", "/usr/.."] {
        let e = f.root.symlink(OsStr::new("t"), Path::new(p)).unwrap_err();
        assert_eq!(e.to_string(), format!("{p}: does not end in a file name"));
    }
    let long = format!("/{}", "a/".repeat(MAX_PATH / 2));
    let e = f.root.dir_all(Path::new(&long)).unwrap_err();
    assert!(e.to_string().ends_with(": longer than 4096 bytes"), "{e}");
}

#[test]
fn both_resolvers_agree_on_hostile_trees() {
    // One tree with every kind of link; every path resolves to the same
    // directory (or the same error) with either resolver.
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    std::fs::create_dir_all(root.join("usr/lib64/a")).unwrap();
    std::fs::write(root.join("file"), "").unwrap();
    symlink("usr/lib64", root.join("lib64")).unwrap();
    symlink("/usr/lib64/a", root.join("abs")).unwrap();
    symlink("../../../../..", root.join("usr/up")).unwrap();
    symlink("/", root.join("usr/lib64/top")).unwrap();
    symlink("file", root.join("tofile")).unwrap();
    symlink("missing", root.join("dangling")).unwrap();
    let open = |r| InRoot::with_resolver(&root, r).unwrap();
    let (a, b) = (open(Resolver::Openat2), open(Resolver::Walk));
    let id = |fd: &OwnedFd| {
        let st = rustix::fs::fstat(fd).unwrap();
        (st.st_dev, st.st_ino)
    };
    for p in [
        "/",
        "lib64",
        "lib64/a",
        "abs",
        "abs/..",
        "usr/up",
        "usr/up/usr/lib64",
        "lib64/top/lib64",
        "tofile",
        "dangling",
        "../..",
        "lib64/../..",
        "abs/../../../..",
    ] {
        let ra = a
            .dir(Path::new(p))
            .map(|fd| id(&fd))
            .map_err(|e| e.to_string());
        let rb = b
            .dir(Path::new(p))
            .map(|fd| id(&fd))
            .map_err(|e| e.to_string());
        assert_eq!(ra, rb, "{p}");
    }
}

#[test]
fn dot_dot_after_created_directories_and_long_link_paths_are_bounded() {
    for resolver in RESOLVERS {
        let f = Fixture::new(resolver);
        // A dangling link whose target creates, climbs back, 800 times.
        let target = format!("{}x", "m/../".repeat(800));
        symlink(&target, f.root().join("d")).unwrap();
        let start = std::time::Instant::now();
        f.root.dir_all(Path::new("/d/y")).unwrap();
        assert!(
            start.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
        assert!(f.root().join("x/y").is_dir(), "{resolver:?}");
        assert!(f.root().join("m").is_dir());
        // Two links, each under the kernel's limit, spliced into one path
        // of over 4096 bytes.
        symlink(format!("/l2/{}", "m/".repeat(1500)), f.root().join("long")).unwrap();
        symlink(format!("/{}", "n/".repeat(1500)), f.root().join("l2")).unwrap();
        let e = f.root.dir_all(Path::new("/long/y")).unwrap_err();
        assert_eq!(e.to_string(), "/long/y: File name too long (os error 36)");
    }
}

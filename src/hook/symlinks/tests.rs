#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::os::unix::fs::symlink;

use proptest::prelude::*;

use super::*;
use crate::hook::inroot::Resolver;
use crate::hook::test_support::{listing, mkfifo, with_timeout};

fn link(arg: &str) -> Result<Link, String> {
    Link::parse(OsStr::new(arg)).map_err(|e| e.to_string())
}

#[test]
fn parses_target_and_link() {
    for (arg, target, at) in [
        (
            "libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so",
            "libcuda.so.1",
            "/usr/lib/x86_64-linux-gnu/libcuda.so",
        ),
        (
            "../libnvidia-allocator.so.1::/usr/lib/x86_64-linux-gnu/gbm/nvidia-drm_gbm.so",
            "../libnvidia-allocator.so.1",
            "/usr/lib/x86_64-linux-gnu/gbm/nvidia-drm_gbm.so",
        ),
        (
            "../card1::/dev/dri/by-path/pci-0000:41:00.0-card",
            "../card1",
            "/dev/dri/by-path/pci-0000:41:00.0-card",
        ),
        ("/abs/target::/l", "/abs/target", "/l"),
    ] {
        assert_eq!(
            link(arg).unwrap(),
            Link {
                target: target.into(),
                link: at.into()
            },
            "{arg}"
        );
    }
}

#[test]
fn bad_links_say_why() {
    for (arg, why) in [
        ("libcuda.so.1", "expected TARGET::LINK, with one ::"),
        ("a::b::/c", "expected TARGET::LINK, with one ::"),
        ("::/usr/lib/x", "the target is empty"),
        (
            "a::usr/lib/x",
            "the link must be an absolute path in the container",
        ),
        ("a::", "the link must be an absolute path in the container"),
        (
            "a::/usr/../../etc/passwd",
            "the link path must not contain ..",
        ),
        ("a::/usr/lib/..", "the link path must not contain .."),
        ("a::/", "the link path names no file"),
    ] {
        assert_eq!(
            link(arg).unwrap_err(),
            format!("--link {arg}: {why}"),
            "{arg}"
        );
    }
    let long = format!("a::/{}", "x".repeat(4096));
    assert!(
        link(&long)
            .unwrap_err()
            .ends_with(": longer than 4096 bytes")
    );
    let many: Vec<OsString> = (0..=MAX_LINKS)
        .map(|i| format!("t::/l{i}").into())
        .collect();
    assert_eq!(
        parse_links(&many).unwrap_err().to_string(),
        "more than 1024 --link arguments"
    );
    assert_eq!(parse_links(&many[..MAX_LINKS]).unwrap().len(), MAX_LINKS);
}

proptest! {
    /// Whatever the argument, parsing returns (no panic), and what parses
    /// gives the argument back.
    #[test]
    fn parse_never_panics_and_round_trips(arg in "[a-z./:]{0,40}") {
        if let Ok(l) = Link::parse(OsStr::new(&arg)) {
            let mut back = l.target.clone();
            back.push("::");
            back.push(l.link.as_os_str());
            prop_assert_eq!(back, OsString::from(&arg));
        }
    }

    #[test]
    fn valid_links_parse(
        target in "[a-z0-9._-]{1,20}(/[a-z0-9._-]{1,10}){0,2}",
        dirs in proptest::collection::vec("[a-z0-9_-][a-z0-9._-]{0,10}", 1..5),
    ) {
        let at = format!("/{}", dirs.join("/"));
        let l = Link::parse(OsStr::new(&format!("{target}::{at}"))).unwrap();
        prop_assert_eq!(l.target, OsString::from(target));
        prop_assert_eq!(l.link, PathBuf::from(at));
    }
}

fn root(tmp: &tempfile::TempDir, resolver: Resolver) -> InRoot {
    InRoot::with_resolver(&tmp.path().join("root"), resolver).unwrap()
}

fn links(args: &[&str]) -> Vec<Link> {
    args.iter().map(|a| link(a).unwrap()).collect()
}

#[test]
fn creates_links_and_leaves_the_images_files_alone() {
    for resolver in [Resolver::Openat2, Resolver::Walk] {
        let tmp = tempfile::tempdir().unwrap();
        let r = tmp.path().join("root");
        std::fs::create_dir_all(r.join("usr/lib64")).unwrap();
        symlink("usr/lib64", r.join("lib64")).unwrap();
        std::fs::write(r.join("usr/lib64/libcuda.so"), "the image's").unwrap();
        symlink("libcuda.so.2", r.join("usr/lib64/libcuda.so.1")).unwrap();
        mkfifo(&r.join("usr/lib64/libnvidia-ml.so"));
        std::fs::write(r.join("usr/lib64/gbm"), "a file, not a directory").unwrap();
        let want = links(&[
            "libcuda.so.1::/lib64/libcuda.so",
            "libcuda.so.550.90.07::/lib64/libcuda.so.1",
            "libnvidia-ml.so.1::/usr/lib64/libnvidia-ml.so",
            "../libnvidia-allocator.so.1::/lib64/gbm/nvidia-drm_gbm.so",
            "libnvidia-ml.so.550.90.07::/usr/lib64/libnvidia-ml.so.1",
            "../card1::/dev/dri/by-path/pci-0000:41:00.0-card",
        ]);
        let opened = root(&tmp, resolver);
        let got = with_timeout(move || create_symlinks(&opened, &want).unwrap());
        let outcomes: Vec<(String, Outcome)> = got
            .into_iter()
            .map(|(l, o)| (l.link.display().to_string(), o))
            .collect();
        assert_eq!(
            outcomes,
            [
                (
                    "/lib64/libcuda.so".into(),
                    Outcome::Occupied("a regular file is there".into())
                ),
                (
                    "/lib64/libcuda.so.1".into(),
                    Outcome::Occupied("a symbolic link to libcuda.so.2 is there".into())
                ),
                (
                    "/usr/lib64/libnvidia-ml.so".into(),
                    Outcome::Occupied("a FIFO is there".into())
                ),
                (
                    "/lib64/gbm/nvidia-drm_gbm.so".into(),
                    Outcome::Occupied(
                        "a file of the image is where a parent directory would be".into()
                    )
                ),
                ("/usr/lib64/libnvidia-ml.so.1".into(), Outcome::Created),
                (
                    "/dev/dri/by-path/pci-0000:41:00.0-card".into(),
                    Outcome::Created
                ),
            ],
            "{resolver:?}"
        );
        assert_eq!(
            std::fs::read(r.join("usr/lib64/libcuda.so")).unwrap(),
            b"the image's"
        );
        assert_eq!(
            std::fs::read_link(r.join("usr/lib64/libnvidia-ml.so.1")).unwrap(),
            Path::new("libnvidia-ml.so.550.90.07")
        );
        assert_eq!(
            std::fs::read_link(r.join("dev/dri/by-path/pci-0000:41:00.0-card")).unwrap(),
            Path::new("../card1")
        );
        // Again: everything is there.
        let again = create_symlinks(
            &root(&tmp, resolver),
            &links(&["libnvidia-ml.so.550.90.07::/usr/lib64/libnvidia-ml.so.1"]),
        )
        .unwrap();
        assert_eq!(again[0].1, Outcome::Present);
    }
}

#[test]
fn a_usr_link_out_of_the_root_creates_inside_it() {
    for resolver in [Resolver::Openat2, Resolver::Walk] {
        let tmp = tempfile::tempdir().unwrap();
        let r = tmp.path().join("root");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(outside.join("lib64")).unwrap();
        std::fs::create_dir(&r).unwrap();
        symlink(&outside, r.join("usr")).unwrap();
        let before = listing(&outside);
        let got = create_symlinks(
            &root(&tmp, resolver),
            &links(&["libcuda.so.1::/usr/lib64/libcuda.so"]),
        )
        .unwrap();
        assert_eq!(got[0].1, Outcome::Created);
        assert_eq!(listing(&outside), before, "{resolver:?}");
        let inside = r.join(outside.strip_prefix("/").unwrap());
        assert_eq!(
            std::fs::read_link(inside.join("lib64/libcuda.so")).unwrap(),
            Path::new("libcuda.so.1")
        );
    }
}

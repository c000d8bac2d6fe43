#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::ffi::OsStr;
use std::os::fd::AsFd as _;
use std::os::unix::fs::symlink;

use super::*;
use crate::fsio::test_support::{mkfifo as fifo, quick};

#[test]
fn reads_a_regular_file_within_the_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("a");
    std::fs::write(&p, b"hello").unwrap();
    assert_eq!(read(&p, 5, Links::Refuse).unwrap(), b"hello");
    assert_eq!(read_to_string(&p, 5, Links::Follow).unwrap(), "hello");
    let e = read(&p, 4, Links::Refuse).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("{}: larger than 4 bytes: not reading it", p.display())
    );
}

#[test]
fn a_fifo_is_never_opened() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("fifo");
    fifo(&p);
    for links in [Links::Refuse, Links::Follow] {
        let e = quick(|| read(&p, 10, links)).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}: a FIFO, not a regular file: not opening it",
                p.display()
            )
        );
    }
    let e = quick(|| open_owned(&p, true)).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: a FIFO, not a regular file: not opening it",
            p.display()
        )
    );
}

#[test]
fn symlinks_are_refused_or_followed_only_to_regular_files() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("target");
    std::fs::write(&target, b"x").unwrap();
    let link = tmp.path().join("link");
    symlink(&target, &link).unwrap();
    let e = read(&link, 10, Links::Refuse).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: a symbolic link, not a regular file: not opening it",
            link.display()
        )
    );
    assert_eq!(read(&link, 10, Links::Follow).unwrap(), b"x");

    // A link to a device node: never opened, whichever mode.
    let zero = tmp.path().join("zero");
    symlink("/dev/zero", &zero).unwrap();
    let e = quick(|| read(&zero, 1 << 30, Links::Follow)).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: a symbolic link to a character device, not a regular file: not opening it",
            zero.display()
        )
    );
    assert!(matches!(
        read(&zero, 10, Links::Refuse),
        Err(Error::NotRegular {
            what: "a symbolic link",
            ..
        })
    ));
    // Dangling: not found when followed.
    let dangling = tmp.path().join("dangling");
    symlink(tmp.path().join("nowhere"), &dangling).unwrap();
    assert!(
        read(&dangling, 10, Links::Follow)
            .unwrap_err()
            .is_not_found()
    );
    assert_eq!(read_opt(&dangling, 10, Links::Follow).unwrap(), None);
}

#[test]
fn directories_and_devices_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let e = read(tmp.path(), 10, Links::Refuse).unwrap_err();
    assert!(
        matches!(
            e,
            Error::NotRegular {
                what: "a directory",
                ..
            }
        ),
        "{e}"
    );
    let e = quick(|| read(Path::new("/dev/null"), 10, Links::Refuse)).unwrap_err();
    assert!(
        matches!(
            e,
            Error::NotRegular {
                what: "a character device",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn own_files_are_created_but_never_through_a_symlink() {
    let tmp = tempfile::tempdir().unwrap();
    let lock = tmp.path().join(".lock");
    open_owned(&lock, true).unwrap();
    assert!(std::fs::symlink_metadata(&lock).unwrap().is_file());
    // Opening it again is fine.
    open_owned(&lock, true).unwrap();
    // Missing and not created.
    assert!(
        open_owned(&tmp.path().join("none"), false)
            .unwrap_err()
            .is_not_found()
    );

    // A symlink planted at the path: the target is not created.
    let elsewhere = tmp.path().join("elsewhere");
    let planted = tmp.path().join(".planted");
    symlink(&elsewhere, &planted).unwrap();
    let e = open_owned(&planted, true).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: a symbolic link, not a regular file: not opening it",
            planted.display()
        )
    );
    assert!(!elsewhere.exists());
    // Through a symlink to an existing file: refused, the file untouched.
    std::fs::write(&elsewhere, b"keep").unwrap();
    assert!(open_owned(&planted, true).is_err());
    assert_eq!(std::fs::read(&elsewhere).unwrap(), b"keep");
}

/// The `lstat` of `path`, as [`read_in`] takes it.
fn lstat(path: &Path) -> Stat {
    rustix::fs::lstat(path).unwrap()
}

#[test]
fn a_file_examined_by_the_caller_is_read_only_if_it_is_still_that_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = std::fs::File::open(tmp.path()).unwrap();
    let read = |before: Option<&Stat>| {
        quick(|| {
            read_in(
                dir.as_fd(),
                OsStr::new("attr"),
                Path::new("/x/attr"),
                before,
                10,
            )
        })
    };
    let p = tmp.path().join("attr");
    std::fs::write(&p, b"1\n").unwrap();
    let examined = lstat(&p);
    assert_eq!(read(Some(&examined)).unwrap(), b"1\n");
    assert_eq!(read(None).unwrap(), b"1\n");
    // Replaced between the look and the open: refused, not read.
    std::fs::write(tmp.path().join("other"), b"2\n").unwrap();
    std::fs::rename(tmp.path().join("other"), &p).unwrap();
    let e = read(Some(&examined)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "/x/attr: the file was replaced while it was being opened"
    );
    // Replaced by a FIFO: never opened (the open would not block, and the
    // type check after it refuses it).
    std::fs::remove_file(&p).unwrap();
    fifo(&p);
    let e = read(Some(&examined)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "/x/attr: a FIFO, not a regular file: not opening it"
    );
    // Examined as a FIFO, by the caller or here: refused without an open.
    let fifo_meta = lstat(&p);
    let e = read(Some(&fifo_meta)).unwrap_err();
    assert!(matches!(e, Error::NotRegular { what: "a FIFO", .. }), "{e}");
    let e = read(None).unwrap_err();
    assert!(matches!(e, Error::NotRegular { what: "a FIFO", .. }), "{e}");
    // Replaced by a symlink to the same file: refused.
    std::fs::remove_file(&p).unwrap();
    std::fs::write(tmp.path().join("real"), b"3\n").unwrap();
    let real = lstat(&tmp.path().join("real"));
    symlink(tmp.path().join("real"), &p).unwrap();
    let e = read(Some(&real)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "/x/attr: a symbolic link, not a regular file: not opening it"
    );
    let e = read(None).unwrap_err();
    assert_eq!(
        e.to_string(),
        "/x/attr: a symbolic link, not a regular file: not opening it"
    );
    // Missing: not found; larger than the limit: refused.
    std::fs::remove_file(&p).unwrap();
    assert!(read(None).unwrap_err().is_not_found());
    std::fs::write(&p, b"0123456789A").unwrap();
    assert_eq!(
        read(None).unwrap_err().to_string(),
        "/x/attr: larger than 10 bytes: not reading it"
    );
    std::fs::write(&p, b"0123456789").unwrap();
    assert_eq!(read(None).unwrap(), b"0123456789");
}

#[test]
fn files_longer_than_the_first_read_are_read_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = std::fs::File::open(tmp.path()).unwrap();
    for len in [0, 1, 1023, 1024, 1025, 5000] {
        let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        std::fs::write(tmp.path().join("f"), &bytes).unwrap();
        let name = OsStr::new("f");
        let at = Path::new("/f");
        assert_eq!(
            read_in(dir.as_fd(), name, at, None, 5000).unwrap(),
            bytes,
            "{len}"
        );
        assert_eq!(
            read(&tmp.path().join("f"), 5000, Links::Refuse).unwrap(),
            bytes
        );
        let short = u64::try_from(len).unwrap().saturating_sub(1);
        if len > 0 {
            assert!(matches!(
                read_in(dir.as_fd(), name, at, None, short),
                Err(Error::TooLarge { .. })
            ));
        }
    }
}

#[test]
fn a_file_recreated_at_a_path_is_another_even_with_the_same_inode() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("s.sock");
    let first = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let id = FileId::at(&path).unwrap();
    assert_eq!(FileId::at(&path), Some(id), "stable while it is there");
    let ino = std::fs::metadata(&path).unwrap().ino();
    drop(first);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(FileId::at(&path), None);
    // Re-created until it gets the old inode number (ext4 hands out the
    // one just freed; tmpfs never does), each time later than a clock
    // tick, as a restart is: never the same file.
    let mut reused = false;
    for _ in 0..20 {
        std::thread::sleep(std::time::Duration::from_millis(20));
        let _again = std::os::unix::net::UnixListener::bind(&path).unwrap();
        assert_ne!(FileId::at(&path).unwrap(), id);
        reused = std::fs::metadata(&path).unwrap().ino() == ino;
        std::fs::remove_file(&path).unwrap();
        if reused {
            break;
        }
    }
    eprintln!("the inode number was reused: {reused}");
}

#[test]
fn a_short_first_read_ends_the_file_only_when_it_reached_the_size() {
    use std::io::Write as _;
    // A pipe whose second part comes later: a first read returns the
    // first part only.
    let read_with = |size: Option<i64>| {
        let (reader, mut writer) = std::io::pipe().unwrap();
        writer.write_all(b"abc").unwrap();
        let later = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            // Refused (EPIPE) when the read is over without it.
            let _ = writer.write_all(b"def");
        });
        let file = std::fs::File::from(std::os::fd::OwnedFd::from(reader));
        let got = read_open(Path::new("/x"), file, 100, size).unwrap();
        later.join().unwrap();
        got
    };
    // Its size read: the rest is not waited for.
    assert_eq!(read_with(Some(3)), b"abc");
    assert_eq!(read_with(Some(2)), b"abc");
    // Sizes that do not tell (none, procfs's 0, sysfs's 4096, more than
    // was read): read to the end.
    for size in [None, Some(0), Some(4096), Some(4)] {
        assert_eq!(read_with(size), b"abcdef", "{size:?}");
    }
}

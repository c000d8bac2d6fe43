#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use super::*;

use std::os::unix::fs::MetadataExt;
use std::sync::mpsc;
use std::time::Duration;

use proptest::prelude::*;

// ---------------------------------------------------------------- helpers

/// SHA-256 of "abc" (FIPS 180-2 test vector), to check the hashing
/// independently of `sha256_hex`.
const SHA256_ABC: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
/// SHA-256 of the empty string.
const SHA256_EMPTY: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
}

/// Names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn assert_no_tmp(dir: &Path) {
    let tmp: Vec<String> = names(dir)
        .into_iter()
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(
        tmp.is_empty(),
        "temp files left in {}: {tmp:?}",
        dir.display()
    );
}

/// The state file as JSON.
fn state_json(dir: &Path) -> serde_json::Value {
    let bytes = fs::read(dir.join(STATE_FILE)).unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// The hashes recorded for `name`, or `None` when not recorded.
fn recorded(dir: &Path, name: &str) -> Option<(String, Vec<String>)> {
    let v = state_json(dir);
    let rec = v["files"].get(name)?;
    let owner = rec["owner"].as_str().unwrap().to_string();
    let hashes = rec["sha256"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h.as_str().unwrap().to_string())
        .collect();
    Some((owner, hashes))
}

fn keep(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| (*s).to_string()).collect()
}

fn strings(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| (*s).to_string()).collect()
}

/// `names`, sorted like [`names`] sorts a directory listing.
fn sorted(names: &[&str]) -> Vec<String> {
    let mut v = strings(names);
    v.sort();
    v
}

fn not_owned_msg(path: &Path, action: &str) -> String {
    format!(
        "refusing to {action} {}: not written by cdigen, or changed since (remove it or move it away first)",
        path.display()
    )
}

fn bad_state_prefix(dir: &Path) -> String {
    format!(
        "{}: corrupt state file (remove it to start over; cdigen then owns no file in this directory): ",
        dir.join(STATE_FILE).display()
    )
}

// ---------------------------------------------------------------- hashing

#[test]
fn sha256_hex_matches_known_vectors() {
    assert_eq!(sha256_hex(b"abc"), SHA256_ABC);
    assert_eq!(sha256_hex(b""), SHA256_EMPTY);
}

// ---------------------------------------------------------------- create

#[test]
fn create_writes_exact_bytes_mode_0644_and_records_hash() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut m = ManagedDir::open(dir).unwrap();
    assert_eq!(m.path(), dir);

    assert_eq!(m.write("x.json", b"abc", "gen").unwrap(), Outcome::Created);
    let target = dir.join("x.json");
    assert_eq!(fs::read(&target).unwrap(), b"abc");
    assert_eq!(mode(&target), 0o644);
    assert!(fs::symlink_metadata(&target).unwrap().file_type().is_file());

    // The state file records owner and the SHA-256 of the content.
    assert_eq!(
        recorded(dir, "x.json"),
        Some(("gen".to_string(), strings(&[SHA256_ABC])))
    );
    let v = state_json(dir);
    assert_eq!(v["version"], 1);
    assert_eq!(v["files"].as_object().unwrap().len(), 1);
    // The state file itself is written like any other file: 0644, whole,
    // ending in a newline.
    assert_eq!(mode(&dir.join(STATE_FILE)), 0o644);
    assert!(fs::read(dir.join(STATE_FILE)).unwrap().ends_with(b"}\n"));

    assert!(m.owns("x.json"));
    assert_eq!(m.owned_by("gen"), strings(&["x.json"]));
    assert!(m.owned_by("other").is_empty());

    // Nothing else in the directory: target, state file, lock file.
    assert_eq!(names(dir), sorted(&[LOCK_FILE, STATE_FILE, "x.json"]));
    assert_no_tmp(dir);
}

#[test]
fn create_empty_file() {
    let tmp = tempfile::tempdir().unwrap();
    let mut m = ManagedDir::open(tmp.path()).unwrap();
    assert_eq!(m.write("empty.yaml", b"", "gen").unwrap(), Outcome::Created);
    assert_eq!(fs::read(tmp.path().join("empty.yaml")).unwrap(), b"");
    assert_eq!(
        recorded(tmp.path(), "empty.yaml"),
        Some(("gen".to_string(), strings(&[SHA256_EMPTY])))
    );
    assert_eq!(
        m.write("empty.yaml", b"", "gen").unwrap(),
        Outcome::Unchanged
    );
    assert!(m.owns("empty.yaml"));
}

#[test]
fn open_creates_missing_nested_directories_with_mode_0755() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("etc").join("cdi").join("sub");
    let mut m = ManagedDir::open(&dir).unwrap();
    assert!(dir.is_dir());
    assert_eq!(mode(&tmp.path().join("etc")), 0o755);
    assert_eq!(mode(&tmp.path().join("etc").join("cdi")), 0o755);
    assert_eq!(mode(&dir), 0o755);
    assert_eq!(m.write("x.json", b"{}", "gen").unwrap(), Outcome::Created);
    assert_eq!(fs::read(dir.join("x.json")).unwrap(), b"{}");
}

#[test]
fn open_leaves_mode_of_an_existing_directory_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    fs::create_dir(&dir).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o750)).unwrap();
    let _m = ManagedDir::open(&dir).unwrap();
    assert_eq!(mode(&dir), 0o750);
}

#[test]
fn update_of_a_0600_file_yields_0644() {
    // The temp file starts 0600 (tempfile's default): the mode must be set
    // explicitly, and a target someone chmod-ed must come back as 0644.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut m = ManagedDir::open(dir).unwrap();
    m.write("x.json", b"one", "gen").unwrap();
    let target = dir.join("x.json");
    fs::set_permissions(&target, fs::Permissions::from_mode(0o600)).unwrap();
    assert!(m.owns("x.json"), "a chmod does not change the content");
    assert_eq!(m.write("x.json", b"two", "gen").unwrap(), Outcome::Updated);
    assert_eq!(mode(&target), 0o644);
    assert_eq!(fs::read(&target).unwrap(), b"two");
}

/// Environment variable that makes [`umask_child`] do its work.
const UMASK_CHILD_ENV: &str = "CDIGEN_WRITE_TEST_UMASK_CHILD_DIR";

/// Run by [`modes_do_not_depend_on_umask`] in a child process started
/// under `umask 077`; a no-op in a normal test run. (The umask is
/// process-wide, so it is not changed in the test process itself.)
#[test]
fn umask_child() {
    let Some(dir) = std::env::var_os(UMASK_CHILD_ENV) else {
        return;
    };
    let dir = PathBuf::from(dir).join("a").join("b");
    let mut m = ManagedDir::open(&dir).unwrap();
    assert_eq!(m.write("x.json", b"{}", "gen").unwrap(), Outcome::Created);
    println!("umask child wrote {}", dir.display());
}

#[test]
fn modes_do_not_depend_on_umask() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg("umask 077 && exec \"$0\" \"$@\"")
        .arg(&exe)
        .args([
            "--exact",
            "write::tests::umask_child",
            "--test-threads=1",
            "--nocapture",
        ])
        .env(UMASK_CHILD_ENV, tmp.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "child failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stdout.contains("umask child wrote") && stdout.contains("1 passed"),
        "child did not run the test\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let a = tmp.path().join("a");
    let b = a.join("b");
    assert_eq!(mode(&b.join("x.json")), FILE_MODE);
    assert_eq!(mode(&b.join(STATE_FILE)), FILE_MODE);
    assert_eq!(mode(&a), DIR_MODE, "intermediate directory");
    assert_eq!(mode(&b), DIR_MODE, "spec directory");
}

// ---------------------------------------------------------------- unchanged / updated

#[test]
fn same_bytes_again_is_unchanged_and_touches_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut m = ManagedDir::open(dir).unwrap();
    let target = dir.join("x.json");
    m.write("x.json", b"{\"a\":1}", "gen").unwrap();
    let before = fs::metadata(&target).unwrap();
    let state_before = fs::metadata(dir.join(STATE_FILE)).unwrap();
    std::thread::sleep(Duration::from_millis(20));

    assert_eq!(
        m.write("x.json", b"{\"a\":1}", "gen").unwrap(),
        Outcome::Unchanged
    );
    let after = fs::metadata(&target).unwrap();
    assert_eq!(after.modified().unwrap(), before.modified().unwrap());
    assert_eq!(after.ino(), before.ino());
    assert_eq!(after.ctime_nsec(), before.ctime_nsec());
    // The state file did not need rewriting either.
    let state_after = fs::metadata(dir.join(STATE_FILE)).unwrap();
    assert_eq!(state_after.ino(), state_before.ino());
    assert_eq!(fs::read(&target).unwrap(), b"{\"a\":1}");
    assert!(m.owns("x.json"));
    assert_no_tmp(dir);

    // Also after re-opening (state read back from disk).
    drop(m);
    let mut m = ManagedDir::open(dir).unwrap();
    assert!(m.owns("x.json"));
    assert_eq!(
        m.write("x.json", b"{\"a\":1}", "gen").unwrap(),
        Outcome::Unchanged
    );
    assert_eq!(fs::metadata(&target).unwrap().ino(), before.ino());
}

#[test]
fn changed_bytes_are_updated_by_rename() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut m = ManagedDir::open(dir).unwrap();
    let target = dir.join("x.json");
    assert_eq!(m.write("x.json", b"one", "gen").unwrap(), Outcome::Created);
    assert_no_tmp(dir);
    let ino1 = fs::metadata(&target).unwrap().ino();

    assert_eq!(m.write("x.json", b"two", "gen").unwrap(), Outcome::Updated);
    assert_no_tmp(dir);
    assert_eq!(fs::read(&target).unwrap(), b"two");
    let ino2 = fs::metadata(&target).unwrap().ino();
    assert_ne!(
        ino1, ino2,
        "the file must be replaced, not rewritten in place"
    );
    assert_eq!(mode(&target), 0o644);
    // Only the new hash is recorded once the write completed.
    assert_eq!(
        recorded(dir, "x.json"),
        Some(("gen".to_string(), vec![sha256_hex(b"two")]))
    );
    assert!(m.owns("x.json"));

    // A longer then shorter content: no trailing garbage.
    m.write("x.json", b"a much longer content", "gen").unwrap();
    assert_eq!(m.write("x.json", b"s", "gen").unwrap(), Outcome::Updated);
    assert_eq!(fs::read(&target).unwrap(), b"s");
    assert_eq!(names(dir), sorted(&[LOCK_FILE, STATE_FILE, "x.json"]));
}

#[test]
fn a_hard_link_to_the_old_file_keeps_the_old_content() {
    // Rename replaces the directory entry: another name for the old inode
    // is not written through.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let other = tempfile::tempdir().unwrap();
    let mut m = ManagedDir::open(dir).unwrap();
    m.write("x.json", b"old", "gen").unwrap();
    let link = other.path().join("link");
    fs::hard_link(dir.join("x.json"), &link).unwrap();
    assert_eq!(m.write("x.json", b"new", "gen").unwrap(), Outcome::Updated);
    assert_eq!(fs::read(&link).unwrap(), b"old");
    assert_eq!(fs::read(dir.join("x.json")).unwrap(), b"new");
}

#[test]
fn state_survives_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    {
        let mut m = ManagedDir::open(dir).unwrap();
        m.write("a.json", b"A", "g1").unwrap();
        m.write("b.yaml", b"B", "g2").unwrap();
    }
    let mut m = ManagedDir::open(dir).unwrap();
    assert!(m.owns("a.json"));
    assert!(m.owns("b.yaml"));
    assert_eq!(m.owned_by("g1"), strings(&["a.json"]));
    assert_eq!(m.owned_by("g2"), strings(&["b.yaml"]));
    assert_eq!(m.write("a.json", b"A2", "g1").unwrap(), Outcome::Updated);
}

#[test]
fn a_file_deleted_behind_our_back_is_created_again() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut m = ManagedDir::open(dir).unwrap();
    m.write("x.json", b"one", "gen").unwrap();
    fs::remove_file(dir.join("x.json")).unwrap();
    assert!(!m.owns("x.json"));
    assert_eq!(m.write("x.json", b"one", "gen").unwrap(), Outcome::Created);
    assert!(m.owns("x.json"));
}

// ---------------------------------------------------------------- ownership

#[test]
fn foreign_file_with_other_content_is_not_overwritten() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let target = dir.join("vendor.json");
    fs::write(&target, b"theirs").unwrap();
    fs::set_permissions(&target, fs::Permissions::from_mode(0o640)).unwrap();
    let ino = fs::metadata(&target).unwrap().ino();

    let mut m = ManagedDir::open(dir).unwrap();
    let err = m.write("vendor.json", b"ours", "gen").unwrap_err();
    assert!(matches!(
        err,
        Error::NotOwned {
            action: "overwrite",
            ..
        }
    ));
    assert_eq!(err.to_string(), not_owned_msg(&target, "overwrite"));

    assert_eq!(fs::read(&target).unwrap(), b"theirs");
    assert_eq!(fs::metadata(&target).unwrap().ino(), ino);
    assert_eq!(mode(&target), 0o640);
    assert!(!m.owns("vendor.json"));
    assert!(m.owned_by("gen").is_empty());
    assert_no_tmp(dir);
    // Nothing was recorded for it either.
    assert!(
        !dir.join(STATE_FILE).exists() || recorded(dir, "vendor.json").is_none(),
        "a refused write must not record anything"
    );
}

#[test]
fn file_edited_by_an_admin_is_not_overwritten() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let target = dir.join("x.json");
    let mut m = ManagedDir::open(dir).unwrap();
    m.write("x.json", b"generated", "gen").unwrap();
    fs::write(&target, b"edited").unwrap();
    assert!(!m.owns("x.json"));

    let err = m.write("x.json", b"regenerated", "gen").unwrap_err();
    assert!(matches!(err, Error::NotOwned { .. }));
    assert_eq!(err.to_string(), not_owned_msg(&target, "overwrite"));
    assert_eq!(fs::read(&target).unwrap(), b"edited");
    // Writing the original content back is refused too: the file on disk
    // is the admin's.
    let err = m.write("x.json", b"generated", "gen").unwrap_err();
    assert!(matches!(err, Error::NotOwned { .. }));
    assert_eq!(fs::read(&target).unwrap(), b"edited");
    assert_no_tmp(dir);

    // Also from a fresh run.
    drop(m);
    let mut m = ManagedDir::open(dir).unwrap();
    let err = m.write("x.json", b"regenerated", "gen").unwrap_err();
    assert_eq!(err.to_string(), not_owned_msg(&target, "overwrite"));
    assert_eq!(fs::read(&target).unwrap(), b"edited");
}

#[test]
fn foreign_file_with_identical_bytes_is_unchanged_but_not_adopted() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let target = dir.join("x.json");
    fs::write(&target, b"same").unwrap();
    let ino = fs::metadata(&target).unwrap().ino();

    let mut m = ManagedDir::open(dir).unwrap();
    assert_eq!(
        m.write("x.json", b"same", "gen").unwrap(),
        Outcome::Unchanged
    );
    assert_eq!(fs::metadata(&target).unwrap().ino(), ino);
    assert!(!m.owns("x.json"));
    assert!(m.owned_by("gen").is_empty());

    let pruned = m.remove_stale("gen", &BTreeSet::new()).unwrap();
    assert_eq!(pruned, Pruned::default());
    assert_eq!(fs::read(&target).unwrap(), b"same");

    // And since it is not ours, other content is refused.
    let err = m.write("x.json", b"different", "gen").unwrap_err();
    assert_eq!(err.to_string(), not_owned_msg(&target, "overwrite"));
    assert_eq!(fs::read(&target).unwrap(), b"same");
}

#[test]
fn admin_edit_matching_new_output_is_not_adopted() {
    // cdigen wrote A; an admin replaced it with B; cdigen now generates B.
    // The file is the admin's: leaving it untouched is right, but it must
    // not become cdigen's (and so removable) again.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let target = dir.join("x.json");
    let mut m = ManagedDir::open(dir).unwrap();
    m.write("x.json", b"A", "gen").unwrap();
    fs::write(&target, b"B").unwrap();

    assert_eq!(m.write("x.json", b"B", "gen").unwrap(), Outcome::Unchanged);
    assert!(!m.owns("x.json"));
    let pruned = m.remove_stale("gen", &BTreeSet::new()).unwrap();
    assert_eq!(
        pruned,
        Pruned {
            removed: vec![],
            left_alone: strings(&["x.json"]),
        }
    );
    assert_eq!(fs::read(&target).unwrap(), b"B");
}

#[test]
fn another_owner_writing_identical_bytes_takes_the_record_over() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut m = ManagedDir::open(dir).unwrap();
    m.write("x.json", b"X", "g1").unwrap();
    assert_eq!(m.write("x.json", b"X", "g2").unwrap(), Outcome::Unchanged);
    assert!(m.owned_by("g1").is_empty());
    assert_eq!(m.owned_by("g2"), strings(&["x.json"]));
    assert_eq!(
        recorded(dir, "x.json"),
        Some(("g2".to_string(), vec![sha256_hex(b"X")]))
    );
}

// ---------------------------------------------------------------- non-regular targets

#[test]
fn symlink_at_target_is_refused_and_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let outside = tempfile::tempdir().unwrap();
    let real = outside.path().join("real.json");
    fs::write(&real, b"real").unwrap();
    let link = dir.join("x.json");
    std::os::unix::fs::symlink(&real, &link).unwrap();

    let mut m = ManagedDir::open(dir).unwrap();
    for bytes in [&b"new"[..], &b"real"[..]] {
        let err = m.write("x.json", bytes, "gen").unwrap_err();
        assert!(matches!(err, Error::NotRegular { .. }));
        assert_eq!(
            err.to_string(),
            format!(
                "refusing to replace {}: a symbolic link, not a regular file",
                link.display()
            )
        );
    }
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(fs::read_link(&link).unwrap(), real);
    assert_eq!(fs::read(&real).unwrap(), b"real");
    assert!(m.owned_by("gen").is_empty());
    assert_no_tmp(dir);
}

#[test]
fn dangling_symlink_at_target_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let link = dir.join("x.json");
    std::os::unix::fs::symlink(dir.join("nowhere"), &link).unwrap();
    let mut m = ManagedDir::open(dir).unwrap();
    let err = m.write("x.json", b"new", "gen").unwrap_err();
    assert!(matches!(err, Error::NotRegular { .. }));
    assert!(!dir.join("nowhere").exists());
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn directory_at_target_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let sub = dir.join("x.json");
    fs::create_dir(&sub).unwrap();
    fs::write(sub.join("inner"), b"inner").unwrap();
    let mut m = ManagedDir::open(dir).unwrap();
    let err = m.write("x.json", b"new", "gen").unwrap_err();
    assert!(matches!(err, Error::NotRegular { .. }));
    assert_eq!(
        err.to_string(),
        format!(
            "refusing to replace {}: a directory, not a regular file",
            sub.display()
        )
    );
    assert!(sub.is_dir());
    assert_eq!(fs::read(sub.join("inner")).unwrap(), b"inner");
    assert_no_tmp(dir);
}

#[test]
fn socket_at_target_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let sock = dir.join("x.json");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let mut m = ManagedDir::open(dir).unwrap();
    let err = m.write("x.json", b"new", "gen").unwrap_err();
    assert!(matches!(err, Error::NotRegular { .. }));
    assert!(!fs::symlink_metadata(&sock).unwrap().file_type().is_file());
}

// ---------------------------------------------------------------- names

#[test]
fn bad_names_are_refused_with_a_message() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let parent_file = tmp.path().parent().unwrap().join("x.json");
    let parent_existed = parent_file.exists();
    let mut m = ManagedDir::open(dir).unwrap();
    for name in [
        "../x.json",
        "a/b.json",
        "/etc/x.json",
        ".hidden.json",
        ".",
        "..",
        "",
        "x y.json",
        "x\ny.json",
        "é.json",
        STATE_FILE,
        LOCK_FILE,
        ".cdigen-abc.tmp",
    ] {
        let err = m.write(name, b"x", "gen").unwrap_err();
        assert!(matches!(err, Error::BadName { .. }), "{name:?}: {err:?}");
        assert_eq!(
            err.to_string(),
            format!(
                "invalid file name {name:?}: expected a plain name of A-Z a-z 0-9 . _ - : not starting with '.'"
            )
        );
    }
    assert_eq!(names(dir), sorted(&[LOCK_FILE]), "nothing was written");
    assert_eq!(parent_file.exists(), parent_existed);
}

#[test]
fn good_names_are_accepted() {
    let tmp = tempfile::tempdir().unwrap();
    let mut m = ManagedDir::open(tmp.path()).unwrap();
    for name in ["x.json", "vendor.com-gpu.yaml", "A_b-9.c.d", "x..json", "x"] {
        assert_eq!(
            m.write(name, b"x", "gen").unwrap(),
            Outcome::Created,
            "{name}"
        );
    }
}

// ---------------------------------------------------------------- remove_stale

#[test]
fn remove_stale_removes_only_what_it_should() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut m = ManagedDir::open(dir).unwrap();
    m.write("old.json", b"old", "gen").unwrap();
    m.write("kept.json", b"kept", "gen").unwrap();
    m.write("edited.json", b"edited", "gen").unwrap();
    m.write("gone.json", b"gone", "gen").unwrap();
    m.write("other.json", b"other", "other-gen").unwrap();
    fs::write(dir.join("unrelated.json"), b"unrelated").unwrap();
    fs::write(dir.join(".keep"), b"").unwrap();
    // An admin edits one; someone deletes another.
    fs::write(dir.join("edited.json"), b"changed by admin").unwrap();
    fs::remove_file(dir.join("gone.json")).unwrap();

    let pruned = m.remove_stale("gen", &keep(&["kept.json"])).unwrap();
    assert_eq!(
        pruned,
        Pruned {
            removed: strings(&["old.json"]),
            left_alone: strings(&["edited.json"]),
        }
    );
    assert_eq!(
        names(dir),
        sorted(&[
            ".cdigen-state",
            ".cdigen.lock",
            ".keep",
            "edited.json",
            "kept.json",
            "other.json",
            "unrelated.json",
        ])
    );
    assert_eq!(
        fs::read(dir.join("edited.json")).unwrap(),
        b"changed by admin"
    );
    assert_eq!(fs::read(dir.join("kept.json")).unwrap(), b"kept");
    assert_eq!(fs::read(dir.join("other.json")).unwrap(), b"other");
    assert_eq!(fs::read(dir.join("unrelated.json")).unwrap(), b"unrelated");
    assert_no_tmp(dir);

    // The removed, the edited and the deleted files are forgotten; the kept
    // and the other owner's files are still recorded.
    assert_eq!(m.owned_by("gen"), strings(&["kept.json"]));
    assert_eq!(m.owned_by("other-gen"), strings(&["other.json"]));
    for name in ["old.json", "edited.json", "gone.json", "unrelated.json"] {
        assert_eq!(recorded(dir, name), None, "{name}");
    }
    assert!(recorded(dir, "kept.json").is_some());
    assert!(recorded(dir, "other.json").is_some());

    // A forgotten, edited file is never touched again.
    let err = m.write("edited.json", b"edited", "gen").unwrap_err();
    assert_eq!(
        err.to_string(),
        not_owned_msg(&dir.join("edited.json"), "overwrite")
    );
    let pruned = m.remove_stale("gen", &BTreeSet::new()).unwrap();
    assert_eq!(
        pruned,
        Pruned {
            removed: strings(&["kept.json"]),
            left_alone: vec![],
        }
    );
    assert_eq!(
        fs::read(dir.join("edited.json")).unwrap(),
        b"changed by admin"
    );

    // The state on disk agrees after re-opening.
    drop(m);
    let m = ManagedDir::open(dir).unwrap();
    assert!(m.owned_by("gen").is_empty());
    assert_eq!(m.owned_by("other-gen"), strings(&["other.json"]));
}

#[test]
fn remove_stale_with_nothing_recorded_is_a_no_op() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    fs::write(dir.join("x.json"), b"x").unwrap();
    let mut m = ManagedDir::open(dir).unwrap();
    assert_eq!(
        m.remove_stale("gen", &BTreeSet::new()).unwrap(),
        Pruned::default()
    );
    assert_eq!(fs::read(dir.join("x.json")).unwrap(), b"x");
}

#[test]
fn remove_stale_leaves_a_symlink_or_directory_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let outside = tempfile::tempdir().unwrap();
    let mut m = ManagedDir::open(dir).unwrap();
    m.write("link.json", b"L", "gen").unwrap();
    m.write("dir.json", b"D", "gen").unwrap();
    // Replaced by a symlink to a file with the very content cdigen wrote,
    // and by a directory.
    let real = outside.path().join("real");
    fs::write(&real, b"L").unwrap();
    fs::remove_file(dir.join("link.json")).unwrap();
    std::os::unix::fs::symlink(&real, dir.join("link.json")).unwrap();
    fs::remove_file(dir.join("dir.json")).unwrap();
    fs::create_dir(dir.join("dir.json")).unwrap();

    let pruned = m.remove_stale("gen", &BTreeSet::new()).unwrap();
    assert_eq!(
        pruned,
        Pruned {
            removed: vec![],
            left_alone: strings(&["dir.json", "link.json"]),
        }
    );
    assert!(
        fs::symlink_metadata(dir.join("link.json"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(fs::read(&real).unwrap(), b"L");
    assert!(dir.join("dir.json").is_dir());
}

// ---------------------------------------------------------------- temp files and crashes

#[test]
fn open_removes_leftover_temp_files_only() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    for name in [
        ".cdigen-abc.tmp",
        ".cdigen-.tmp",
        ".keep",
        ".cdigen-abc.tmp.bak",
        "cdigen-abc.tmp",
        "x.tmp",
        ".other-abc.tmp",
    ] {
        fs::write(dir.join(name), b"leftover").unwrap();
    }
    let _m = ManagedDir::open(dir).unwrap();
    assert_eq!(
        names(dir),
        sorted(&[
            ".cdigen-abc.tmp.bak",
            ".cdigen.lock",
            ".keep",
            ".other-abc.tmp",
            "cdigen-abc.tmp",
            "x.tmp",
        ])
    );
}

#[test]
fn lock_and_tidy_removes_only_our_leftover_temp_files_under_the_lock() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    // Creates the directory.
    drop(lock_and_tidy(&dir).unwrap());
    for name in [
        ".cdigen-abc.tmp",
        "checkpoint.json",
        ".cdigen-abc.tmp~",
        "a.tmp",
    ] {
        fs::write(dir.join(name), b"x").unwrap();
    }
    // Another tool's directory and link of that pattern are not files
    // cdigen left: they stay.
    fs::create_dir(dir.join(".cdigen-dir.tmp")).unwrap();
    std::os::unix::fs::symlink("checkpoint.json", dir.join(".cdigen-link.tmp")).unwrap();
    let lock = lock_and_tidy(&dir).unwrap();
    assert_eq!(
        names(&dir),
        sorted(&[
            ".cdigen-abc.tmp~",
            ".cdigen-dir.tmp",
            ".cdigen-link.tmp",
            ".cdigen.lock",
            "a.tmp",
            "checkpoint.json",
        ])
    );
    // The lock is held: another process's writer would wait.
    let f = fs::File::open(dir.join(LOCK_FILE)).unwrap();
    assert!(matches!(f.try_lock(), Err(fs::TryLockError::WouldBlock)));
    drop(lock);
    f.try_lock().unwrap();
    assert!(is_temp_name(".cdigen-x1y2.tmp"));
    assert!(!is_temp_name(".cdigen-state") && !is_temp_name(".cdigen.lock"));
}

#[test]
fn temp_files_are_named_for_removal_and_never_loaded() {
    // What `replace` creates must match what `open` removes, and never look
    // like a spec to a runtime.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let m = ManagedDir::open(dir).unwrap();
    let t = tempfile::Builder::new()
        .prefix(TMP_PREFIX)
        .suffix(TMP_SUFFIX)
        .tempfile_in(dir)
        .unwrap();
    let (_file, path) = t.keep().unwrap();
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with(".cdigen-") && name.ends_with(".tmp"),
        "{name}"
    );
    drop(m);
    let _m = ManagedDir::open(dir).unwrap();
    assert!(!path.exists(), "{name} should have been removed");
}

fn write_state(dir: &Path, json: &str) {
    fs::write(dir.join(STATE_FILE), json).unwrap();
}

#[test]
fn crash_between_intent_and_rename_old_content_is_still_owned() {
    // The run crashed after recording [old, new] and creating the temp file,
    // before the rename: the old content is on disk.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    fs::write(dir.join("x.json"), b"old").unwrap();
    fs::write(dir.join(".cdigen-crash1.tmp"), b"ne").unwrap();
    write_state(
        dir,
        &format!(
            r#"{{"version":1,"files":{{"x.json":{{"owner":"gen","sha256":["{}","{}"]}}}}}}"#,
            sha256_hex(b"old"),
            sha256_hex(b"new")
        ),
    );
    let mut m = ManagedDir::open(dir).unwrap();
    assert!(!dir.join(".cdigen-crash1.tmp").exists());
    assert!(m.owns("x.json"));
    assert_eq!(m.write("x.json", b"new", "gen").unwrap(), Outcome::Updated);
    assert_eq!(fs::read(dir.join("x.json")).unwrap(), b"new");
    assert_eq!(
        recorded(dir, "x.json"),
        Some(("gen".to_string(), vec![sha256_hex(b"new")]))
    );
    assert_no_tmp(dir);
}

#[test]
fn crash_between_rename_and_state_update_new_content_is_owned() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    fs::write(dir.join("x.json"), b"new").unwrap();
    write_state(
        dir,
        &format!(
            r#"{{"version":1,"files":{{"x.json":{{"owner":"gen","sha256":["{}","{}"]}}}}}}"#,
            sha256_hex(b"old"),
            sha256_hex(b"new")
        ),
    );
    let mut m = ManagedDir::open(dir).unwrap();
    assert!(m.owns("x.json"));
    // Same bytes: untouched, and the record is normalised to one hash.
    let ino = fs::metadata(dir.join("x.json")).unwrap().ino();
    assert_eq!(
        m.write("x.json", b"new", "gen").unwrap(),
        Outcome::Unchanged
    );
    assert_eq!(fs::metadata(dir.join("x.json")).unwrap().ino(), ino);
    assert_eq!(
        recorded(dir, "x.json"),
        Some(("gen".to_string(), vec![sha256_hex(b"new")]))
    );
    // The old content no longer counts once normalised.
    fs::write(dir.join("x.json"), b"old").unwrap();
    assert!(!m.owns("x.json"));
}

#[test]
fn crash_record_either_hash_allows_removal_but_not_a_third() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let json = format!(
        r#"{{"version":1,"files":{{"a.json":{{"owner":"gen","sha256":["{o}","{n}"]}},"b.json":{{"owner":"gen","sha256":["{o}","{n}"]}},"c.json":{{"owner":"gen","sha256":["{o}","{n}"]}}}}}}"#,
        o = sha256_hex(b"old"),
        n = sha256_hex(b"new")
    );
    write_state(dir, &json);
    fs::write(dir.join("a.json"), b"old").unwrap();
    fs::write(dir.join("b.json"), b"new").unwrap();
    fs::write(dir.join("c.json"), b"third").unwrap();
    let mut m = ManagedDir::open(dir).unwrap();
    assert!(m.owns("a.json"));
    assert!(m.owns("b.json"));
    assert!(!m.owns("c.json"));
    let err = m.write("c.json", b"new", "gen").unwrap_err();
    assert_eq!(
        err.to_string(),
        not_owned_msg(&dir.join("c.json"), "overwrite")
    );
    let pruned = m.remove_stale("gen", &BTreeSet::new()).unwrap();
    assert_eq!(
        pruned,
        Pruned {
            removed: strings(&["a.json", "b.json"]),
            left_alone: strings(&["c.json"]),
        }
    );
    assert_eq!(fs::read(dir.join("c.json")).unwrap(), b"third");
}

// ---------------------------------------------------------------- state file

#[test]
fn corrupt_state_file_is_an_error_naming_the_path() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    for bad in [
        "not json",
        "",
        "{}",
        r#"{"version":1,"files":{},"extra":true}"#,
        r#"{"version":1,"files":{"x.json":{"owner":"g","sha256":"abc"}}}"#,
        r#"{"version":1,"files":{"x.json":{"owner":"g","sha256":[],"more":1}}}"#,
    ] {
        write_state(dir, bad);
        let err = ManagedDir::open(dir).unwrap_err();
        assert!(matches!(err, Error::BadState { .. }), "{bad:?}: {err:?}");
        let msg = err.to_string();
        assert!(msg.starts_with(&bad_state_prefix(dir)), "{bad:?}: {msg}");
        // A reason follows.
        assert!(msg.len() > bad_state_prefix(dir).len(), "{bad:?}: {msg}");
    }
    // The corrupt file itself is left for the admin to look at.
    assert_eq!(
        fs::read(dir.join(STATE_FILE)).unwrap(),
        br#"{"version":1,"files":{"x.json":{"owner":"g","sha256":[],"more":1}}}"#
    );
}

#[test]
fn unknown_state_version_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_state(dir, r#"{"version":2,"files":{}}"#);
    let err = ManagedDir::open(dir).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("{}unknown version 2", bad_state_prefix(dir))
    );
}

#[test]
fn state_and_lock_file_names_are_never_loaded_by_runtimes() {
    for name in [STATE_FILE, LOCK_FILE] {
        assert!(name.starts_with('.'), "{name}");
        for ext in [".json", ".yaml", ".yml"] {
            assert!(!name.ends_with(ext), "{name}");
        }
    }
    assert!(TMP_SUFFIX.ends_with(".tmp"));
    // Neither is mistaken for a leftover temp file.
    for name in [STATE_FILE, LOCK_FILE] {
        assert!(!(name.starts_with(TMP_PREFIX) && name.ends_with(TMP_SUFFIX)));
    }
}

// ---------------------------------------------------------------- locking

#[test]
fn second_open_waits_for_the_first_to_be_dropped() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let mut first = ManagedDir::open(&dir).unwrap();
    first.write("x.json", b"first", "gen").unwrap();

    let (tx, rx) = mpsc::channel();
    let dir2 = dir.clone();
    let waiter = std::thread::spawn(move || {
        let mut second = ManagedDir::open(&dir2).unwrap();
        // It sees what the first one wrote.
        let owned = second.owns("x.json");
        let outcome = second.write("x.json", b"second", "gen").unwrap();
        tx.send((owned, outcome)).unwrap();
    });

    // The second run cannot get past the lock while the first holds it.
    assert_eq!(
        rx.recv_timeout(Duration::from_millis(300)),
        Err(mpsc::RecvTimeoutError::Timeout)
    );
    // The first may still work meanwhile.
    assert_eq!(
        first.write("x.json", b"first again", "gen").unwrap(),
        Outcome::Updated
    );
    drop(first);
    let (owned, outcome) = rx.recv_timeout(Duration::from_secs(1)).unwrap();
    assert!(owned);
    assert_eq!(outcome, Outcome::Updated);
    waiter.join().unwrap();
    assert_eq!(fs::read(dir.join("x.json")).unwrap(), b"second");
}

#[test]
fn lock_is_released_on_drop() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    drop(ManagedDir::open(dir).unwrap());
    let lock = File::open(dir.join(LOCK_FILE)).unwrap();
    lock.try_lock().unwrap();
    drop(lock);
    let _m = ManagedDir::open(dir).unwrap();
    let lock = File::open(dir.join(LOCK_FILE)).unwrap();
    assert!(matches!(lock.try_lock(), Err(fs::TryLockError::WouldBlock)));
}

#[test]
fn an_instance_lock_is_taken_at_once_or_refused_naming_its_holder() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let held = lock_instance(dir, ".x.lock").unwrap();
    let path = dir.join(".x.lock");
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        format!("{}\n", std::process::id())
    );
    // A second holder (another open file: flock locks conflict within a
    // process too) is refused at once, naming the file and the PID.
    let e = lock_instance(dir, ".x.lock").unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{} is held by PID {}: another instance serves this directory (stop it, or give each instance its own directory)",
            path.display(),
            std::process::id()
        )
    );
    // The PID unknown (a file of garbage): said so.
    fs::write(&path, "garbage").unwrap();
    let e = lock_instance(dir, ".x.lock").unwrap_err().to_string();
    assert!(e.contains("is held by another process: "), "{e}");
    // Released with the holder; the next one writes its PID over the old.
    drop(held);
    let _again = lock_instance(dir, ".x.lock").unwrap();
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        format!("{}\n", std::process::id())
    );
    // Never through a symlink.
    std::os::unix::fs::symlink(&path, dir.join(".y.lock")).unwrap();
    assert!(lock_instance(dir, ".y.lock").is_err());
}

#[test]
fn another_instance_is_told_gone_only_by_its_free_lock() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    assert!(matches!(instance(dir, ".a.lock"), Instance::Unknown));
    let held = lock_instance(dir, ".a.lock").unwrap();
    assert!(matches!(instance(dir, ".a.lock"), Instance::Held));
    drop(held);
    // Free: gone, and held by the caller meanwhile.
    let Instance::Gone(mine) = instance(dir, ".a.lock") else {
        panic!("a free lock tells its instance gone");
    };
    assert!(lock_instance(dir, ".a.lock").is_err());
    drop(mine);
    // Nothing but a regular file tells anything; a link is not followed.
    std::os::unix::fs::symlink(dir.join(".a.lock"), dir.join(".b.lock")).unwrap();
    assert!(matches!(instance(dir, ".b.lock"), Instance::Unknown));
    fs::create_dir(dir.join(".c.lock")).unwrap();
    assert!(matches!(instance(dir, ".c.lock"), Instance::Unknown));
    assert!(!dir.join(".d.lock").exists());
    assert!(matches!(instance(dir, ".d.lock"), Instance::Unknown));
    assert!(!dir.join(".d.lock").exists(), "never created");
}

#[test]
fn a_named_lock_serializes_and_gives_up_when_told() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let first = lock_file_until(dir, ".s.lock", &|| false).unwrap();
    // The directory's own lock is another file: taken inside it.
    let _dir = lock_dir(dir).unwrap();
    let e = lock_file_until(dir, ".s.lock", &|| true).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("stopped waiting to lock {}", dir.join(".s.lock").display())
    );
    drop(first);
    let _second = lock_file_until(dir, ".s.lock", &|| true).unwrap();
}

#[test]
fn pod_uids_name_files_safely() {
    check_pod_uid("0b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9").unwrap();
    for bad in ["", "../x", "-x", "a/b", "a b", ".x", &"a".repeat(65)] {
        let e = check_pod_uid(bad).unwrap_err();
        assert!(e.contains("not a UID"), "{bad}: {e}");
    }
    assert_eq!(
        check_pod_uid("../x").unwrap_err(),
        "pod UID \"../x\": not a UID (1 to 64 letters, digits and '-', as metadata.uid is)"
    );
}

// ---------------------------------------------------------------- properties

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn write_then_read_back_and_rewrite_is_unchanged(
        bytes in proptest::collection::vec(any::<u8>(), 0..4096),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let mut m = ManagedDir::open(dir).unwrap();
        prop_assert_eq!(m.write("x.json", &bytes, "gen").unwrap(), Outcome::Created);
        prop_assert_eq!(fs::read(dir.join("x.json")).unwrap(), bytes.clone());
        prop_assert_eq!(m.write("x.json", &bytes, "gen").unwrap(), Outcome::Unchanged);
        prop_assert!(m.owns("x.json"));
        prop_assert_eq!(names(dir), sorted(&[LOCK_FILE, STATE_FILE, "x.json"]));
    }

    #[test]
    fn second_write_is_updated_exactly_when_bytes_differ(
        a in proptest::collection::vec(any::<u8>(), 0..512),
        b in proptest::collection::vec(any::<u8>(), 0..512),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let mut m = ManagedDir::open(dir).unwrap();
        m.write("x.json", &a, "gen").unwrap();
        let expected = if a == b { Outcome::Unchanged } else { Outcome::Updated };
        prop_assert_eq!(m.write("x.json", &b, "gen").unwrap(), expected);
        prop_assert_eq!(fs::read(dir.join("x.json")).unwrap(), b);
        prop_assert!(m.owns("x.json"));
    }
}

#[test]
fn batch_writes_what_it_may_and_refuses_the_rest() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    fs::write(dir.join("b.json"), b"foreign").unwrap();
    let mut m = ManagedDir::open(dir).unwrap();
    m.write("c.json", b"old", "gen").unwrap();
    let items = vec![
        ("a.json".to_string(), b"A".to_vec()),
        ("b.json".to_string(), b"B".to_vec()),
        ("c.json".to_string(), b"C".to_vec()),
        ("d.json".to_string(), b"D".to_vec()),
    ];
    let results: Vec<(String, String)> = m
        .write_batch(&items, "gen")
        .into_iter()
        .map(|(n, r)| (n, r.map_or_else(|e| e.to_string(), |o| format!("{o:?}"))))
        .collect();
    assert_eq!(
        results,
        [
            ("a.json".to_string(), "Created".to_string()),
            (
                "b.json".into(),
                not_owned_msg(&dir.join("b.json"), "overwrite")
            ),
            ("c.json".into(), "Updated".into()),
            ("d.json".into(), "Created".into()),
        ]
    );
    assert_eq!(fs::read(dir.join("b.json")).unwrap(), b"foreign");
    for (n, c) in [("a.json", "A"), ("c.json", "C"), ("d.json", "D")] {
        assert_eq!(fs::read(dir.join(n)).unwrap(), c.as_bytes());
        // Each record has exactly the final hash.
        assert_eq!(
            recorded(dir, n),
            Some(("gen".to_string(), vec![sha256_hex(c.as_bytes())]))
        );
    }
    assert_eq!(recorded(dir, "b.json"), None);
    assert_no_tmp(dir);
    // The same batch again changes nothing.
    let again: Vec<bool> = m
        .write_batch(&items, "gen")
        .into_iter()
        .map(|(_, r)| matches!(r, Ok(Outcome::Unchanged)))
        .collect();
    assert_eq!(again, [true, false, true, true]);
}

// ---------------------------------------------------------------- read-only view

/// Names and mtimes of everything in `dir`, dot files included.
fn snapshot(dir: &Path) -> Vec<(String, std::time::SystemTime)> {
    names(dir)
        .into_iter()
        .map(|n| {
            let m = fs::symlink_metadata(dir.join(&n))
                .unwrap()
                .modified()
                .unwrap();
            (n, m)
        })
        .collect()
}

#[test]
fn ownership_reads_what_the_writer_recorded() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    {
        let mut m = ManagedDir::open(dir).unwrap();
        m.write("a.json", b"A", "gen").unwrap();
        m.write("b.json", b"B", "other").unwrap();
        m.write("c.json", b"C", "gen").unwrap();
    }
    fs::write(dir.join("c.json"), b"edited").unwrap();
    let before = snapshot(dir);
    let o = Ownership::read(dir).unwrap();
    assert_eq!(o.owned_by("gen"), strings(&["a.json", "c.json"]));
    assert_eq!(o.owned_by("other"), strings(&["b.json"]));
    assert_eq!(o.owner("c.json"), Some("gen"));
    assert_eq!(o.owner("d.json"), None);
    assert!(o.owns("a.json", b"A"));
    assert!(!o.owns("a.json", b"B"), "content decides, not the name");
    assert!(!o.owns("c.json", b"edited"));
    assert!(!o.owns("d.json", b""));
    // Nothing was touched (no lock taken, no temp files swept).
    assert_eq!(snapshot(dir), before);
}

#[test]
fn ownership_of_a_missing_directory_is_empty_and_creates_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("absent/deeper");
    let o = Ownership::read(&dir).unwrap();
    assert!(o.owned_by("gen").is_empty());
    assert!(!tmp.path().join("absent").exists());
    // An existing empty directory stays empty: no lock or state file.
    let o = Ownership::read(tmp.path()).unwrap();
    assert_eq!(o.owner("x.json"), None);
    assert!(names(tmp.path()).is_empty());
}

#[test]
fn ownership_reports_a_corrupt_state_file_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_state(dir, "{\"version\":2,\"files\":{}}");
    let err = Ownership::read(dir).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("{}unknown version 2", bad_state_prefix(dir))
    );
    // A state file that is a directory is not opened: an error naming it.
    fs::remove_file(dir.join(STATE_FILE)).unwrap();
    fs::create_dir(dir.join(STATE_FILE)).unwrap();
    let err = Ownership::read(dir).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: a directory, not a regular file: not opening it",
            dir.join(STATE_FILE).display()
        )
    );
}

#[test]
fn a_lock_file_names_its_holder_by_a_strictly_read_pid() {
    assert_eq!(parse_holder(b"1234\n"), Holder(Some(1234)));
    assert_eq!(parse_holder(b"1"), Holder(Some(1)));
    assert_eq!(parse_holder(b"4294967295\n"), Holder(Some(u32::MAX)));
    // Anything else is no PID: the file is anyone's input.
    for bad in [
        &b""[..],
        b"\n",
        b"0\n",
        b"-1\n",
        b" 12\n",
        b"12 \n",
        b"12\n\n",
        b"4294967296\n",
        b"99999999999\n",
        b"12\x1b[2J",
        b"\xff\xfe",
        b"1e3",
    ] {
        assert_eq!(parse_holder(bad), Holder(None), "{bad:?}");
    }
    assert_eq!(Holder(Some(7)).to_string(), "PID 7");
    assert_eq!(Holder(None).to_string(), "PID unknown");
}

#[test]
fn a_lock_taken_records_the_pid_and_a_wait_times_out_naming_the_holder() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let held = lock_dir(dir).unwrap();
    let path = dir.join(LOCK_FILE);
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        format!("{}\n", std::process::id())
    );
    let (file, lock_path) = open_lock_file(dir).unwrap();
    let started = std::time::Instant::now();
    let e = wait_for_lock(
        dir,
        file,
        lock_path,
        &|| false,
        Some(Duration::from_millis(300)),
    )
    .unwrap_err();
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(300), "{waited:?}");
    assert!(waited < Duration::from_secs(3), "{waited:?}");
    let Error::LockTimeout { holder, .. } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(*holder, Holder(Some(std::process::id())));
    let text = e.to_string();
    assert!(
        text.starts_with("timed out after 300ms waiting for the lock "),
        "{text}"
    );
    assert!(
        text.ends_with(&format!(
            "{}, held by PID {} (another cdigen run writing {}; --lock-timeout)",
            path.display(),
            std::process::id(),
            dir.display()
        )),
        "{text}"
    );
    // A hostile PID in the file: unknown, nothing worse.
    fs::write(&path, "1; rm -rf /\n").unwrap();
    let (file, lock_path) = open_lock_file(dir).unwrap();
    let e = wait_for_lock(dir, file, lock_path, &|| false, Some(Duration::ZERO)).unwrap_err();
    assert!(e.to_string().contains(", held by PID unknown ("), "{e}");
    drop(held);
    let (file, lock_path) = open_lock_file(dir).unwrap();
    wait_for_lock(dir, file, lock_path, &|| false, Some(Duration::ZERO)).unwrap();
}

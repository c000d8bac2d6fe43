#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::path::Path;

use super::test_support::{mkfifo, with_timeout};
use super::*;

fn state_of(json: &str) -> Result<State, Error> {
    read_state(&mut json.as_bytes())
}

fn err(r: Result<impl std::fmt::Debug, Error>) -> String {
    format!("{:#}", anyhow::Error::from(r.unwrap_err()))
}

#[test]
fn reads_the_bundle_from_the_state() {
    let s = state_of(
        r#"{"ociVersion":"1.2.0","id":"c1","status":"creating","pid":123,"bundle":"/run/b","annotations":{"a":"b"},"extra":1}"#,
    )
    .unwrap();
    assert_eq!(s.bundle, Path::new("/run/b"));
    assert_eq!(s.id.as_deref(), Some("c1"));
}

#[test]
fn bad_states_are_errors_that_say_what_is_wrong() {
    assert_eq!(
        err(state_of("not json")),
        "the container state on stdin is not valid: expected ident at line 1 column 2"
    );
    assert_eq!(
        err(state_of(r#"{"id":"x"}"#)),
        "the container state on stdin is not valid: missing field `bundle` at line 1 column 10"
    );
    assert_eq!(
        err(state_of(r#"{"bundle":7}"#)),
        "the container state on stdin is not valid: invalid type: integer `7`, expected path string at line 1 column 11"
    );
    assert_eq!(
        err(state_of(r#"{"bundle":""}"#)),
        "the container state on stdin has an empty bundle"
    );
    assert_eq!(
        err(state_of("")),
        "the container state on stdin is not valid: EOF while parsing a value at line 1 column 0"
    );
}

#[test]
fn a_state_over_the_limit_is_refused_without_reading_it_all() {
    // An endless stdin: only the limit and one byte are read.
    let mut endless = std::io::repeat(b' ');
    assert_eq!(
        err(read_state(&mut endless)),
        "the container state on stdin is larger than 1048576 bytes"
    );
    let mut just = br#"{"bundle":"/b"}"#.to_vec();
    just.resize(MAX_STATE as usize, b' ');
    assert_eq!(
        read_state(&mut just.as_slice()).unwrap().bundle,
        Path::new("/b")
    );
}

/// A bundle with `config.json` (when given) and `rootfs/`.
fn bundle(config: Option<&str>) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("rootfs")).unwrap();
    if let Some(c) = config {
        std::fs::write(tmp.path().join("config.json"), c).unwrap();
    }
    tmp
}

#[test]
fn the_root_is_root_path_relative_to_the_bundle_or_absolute() {
    let b = bundle(Some(
        r#"{"ociVersion":"1.2.0","root":{"path":"rootfs","readonly":true},"process":{}}"#,
    ));
    assert_eq!(container_root(b.path()).unwrap(), b.path().join("rootfs"));
    let abs = b.path().join("rootfs");
    std::fs::write(
        b.path().join("config.json"),
        serde_json::json!({"root": {"path": abs}}).to_string(),
    )
    .unwrap();
    assert_eq!(container_root(b.path()).unwrap(), abs);
    let state = State {
        id: None,
        bundle: b.path().to_path_buf(),
    };
    assert_eq!(open_root(&state).unwrap().path(), abs);
}

#[test]
fn config_problems_name_the_file() {
    let cfg = |b: &tempfile::TempDir| b.path().join("config.json").display().to_string();
    let b = bundle(None);
    assert_eq!(
        err(container_root(b.path())),
        format!("{}: No such file or directory (os error 2)", cfg(&b))
    );
    for (text, why) in [
        (r#"{"root":{}}"#, "no root.path"),
        (r#"{"process":{}}"#, "no root.path"),
        (r#"{"root":{"path":""}}"#, "no root.path"),
        (
            r#"{"root":{"path":1}}"#,
            "not a valid OCI runtime configuration: invalid type: integer `1`, expected path string at line 1 column 17",
        ),
        (
            "[",
            "not a valid OCI runtime configuration: EOF while parsing a list at line 1 column 1",
        ),
    ] {
        let b = bundle(Some(text));
        assert_eq!(
            err(container_root(b.path())),
            format!("{}: {why}", cfg(&b)),
            "{text}"
        );
    }
    // A FIFO instead of config.json is never opened.
    let b = bundle(None);
    mkfifo(&b.path().join("config.json"));
    let path = b.path().to_path_buf();
    let got = with_timeout(move || err(container_root(&path)));
    assert_eq!(
        got,
        format!("{}: a FIFO, not a regular file: not opening it", cfg(&b))
    );
    // Too large.
    let b = bundle(None);
    let f = std::fs::File::create(b.path().join("config.json")).unwrap();
    f.set_len(MAX_CONFIG + 1).unwrap();
    assert_eq!(
        err(container_root(b.path())),
        format!("{}: larger than 4194304 bytes: not reading it", cfg(&b))
    );
}

#[test]
fn a_missing_root_and_the_host_root_are_refused() {
    let b = bundle(Some(r#"{"root":{"path":"nope"}}"#));
    let state = State {
        id: None,
        bundle: b.path().to_path_buf(),
    };
    assert_eq!(
        err(open_root(&state)),
        format!(
            "{}/nope: cannot open the container root: No such file or directory (os error 2)",
            b.path().display()
        )
    );
    std::fs::write(b.path().join("config.json"), r#"{"root":{"path":"/"}}"#).unwrap();
    assert_eq!(
        err(open_root(&state)),
        "/: the container root is the host's root directory: refusing to change it"
    );
}

//! What cdigen prints, end to end through the binary, when the host is
//! hostile or the arguments extreme:
//!
//! - machine output (`-o json|yaml`) is one whole document or nothing:
//!   paths that are not UTF-8 are written lossily, a fatal error leaves
//!   stdout empty and names the path (escaped) on stderr;
//! - host-derived text (device and `pci.ids` names, file names, log
//!   messages) reaches stdout and stderr escaped: no control character but
//!   line ends, and no forged line;
//! - every duration flag has an upper bound, refused at parsing.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[path = "support/machine.rs"]
mod support;

use std::ffi::{OsStr, OsString};
use std::fs;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;
use support::machine;

/// A valid spec: kind `example.com/dev`, device `x`.
const SPEC: &str = r#"{"cdiVersion": "0.3.0", "kind": "example.com/dev",
 "devices": [{"name": "x", "containerEdits": {"env": ["A=1"]}}]}
"#;

/// Runs the binary in `cwd` with arguments that need not be UTF-8:
/// (exit code, stdout, stderr). stdout and stderr must be UTF-8 whatever
/// the arguments, and must not report a panic.
fn run(cwd: &Path, args: &[&OsStr]) -> (i32, String, String) {
    let out = Command::cargo_bin("cdigen")
        .unwrap()
        .current_dir(cwd)
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("CDIGEN_ROOT")
        .env_remove("CDIGEN_TEMPLATES")
        .env("CDIGEN_GENERATORS", "/nonexistent-cdigen-user-generators")
        .env("CDIGEN_DEVINFO_DIR", "devinfo")
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).expect("stdout is UTF-8");
    let stderr = String::from_utf8(out.stderr).expect("stderr is UTF-8");
    assert!(!stderr.contains("panicked"), "{stderr}");
    (out.status.code().expect("exited"), stdout, stderr)
}

/// [`run`] with UTF-8 arguments.
fn run_str(cwd: &Path, args: &[&str]) -> (i32, String, String) {
    let args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    run(cwd, &args)
}

/// A name whose bytes are not UTF-8: `d`, 0xff, 0xfe, `x`.
fn bad_utf8() -> OsString {
    OsStr::from_bytes(b"d\xff\xfex").to_os_string()
}

/// No control character but line ends, in what a terminal would show.
fn assert_no_controls(what: &str, text: &str) {
    let bad: Vec<char> = text
        .chars()
        .filter(|&c| {
            c != '\n'
                && (c.is_control()
                    || matches!(
                        c,
                        '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}'
                    )
                    || matches!(c, '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}'))
        })
        .collect();
    assert!(bad.is_empty(), "{what} has raw {bad:?}:\n{text}");
}

// ---- Machine output ---------------------------------------------------------

/// `validate -o json` on a directory whose name is not UTF-8 (it panicked):
/// one JSON document, the path written lossily; the text output shows the
/// bytes.
#[test]
fn validate_json_writes_non_utf8_paths_lossily() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(bad_utf8());
    fs::create_dir(&dir).unwrap();
    fs::write(dir.join("a.json"), SPEC).unwrap();
    let (code, out, err) = run(
        tmp.path(),
        &[
            OsStr::new("validate"),
            OsStr::new("-o"),
            OsStr::new("json"),
            &bad_utf8(),
        ],
    );
    assert_eq!((code, err.as_str()), (0, ""));
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        doc,
        serde_json::json!({
            "valid": true,
            "inputErrors": [],
            "files": [{"path": "d\u{fffd}\u{fffd}x/a.json", "kind": "example.com/dev", "devices": ["x"], "findings": []}],
        })
    );
    let (code, out, _) = run(tmp.path(), &[OsStr::new("validate"), &bad_utf8()]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "d\\xff\\xfex/a.json: ok (1 device)\n1 file checked: 0 errors, 0 warnings\n"
    );
    // A path that does not exist is named with its bytes shown.
    let missing = OsStr::from_bytes(b"no\xff\x1b");
    let (code, out, _) = run(tmp.path(), &[OsStr::new("validate"), missing]);
    assert_eq!(code, 2);
    assert_eq!(
        out,
        "error: cannot read no\\xff\\x1b: No such file or directory (os error 2)\n\
0 files checked: 1 error, 0 warnings\n"
    );
    let (code, out, _) = run(
        tmp.path(),
        &[
            OsStr::new("validate"),
            OsStr::new("-o"),
            OsStr::new("json"),
            missing,
        ],
    );
    assert_eq!(code, 2);
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap(),
        serde_json::json!({
            "valid": false,
            "inputErrors": ["cannot read no\\xff\\x1b: No such file or directory (os error 2)"],
            "files": [],
        })
    );
}

/// `list -o json|yaml` on such a directory: whole documents, lossy paths.
#[test]
fn list_documents_write_non_utf8_paths_lossily() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(bad_utf8());
    fs::create_dir(&dir).unwrap();
    fs::write(dir.join("a.json"), SPEC).unwrap();
    let args = |format: &'static str| {
        [
            OsStr::new("list"),
            OsStr::new("-o"),
            OsStr::new(format),
            OsStr::new("--spec-dir"),
        ]
    };
    let mut json = args("json").to_vec();
    let name = bad_utf8();
    json.push(&name);
    let (code, out, err) = run(tmp.path(), &json);
    assert_eq!((code, err.as_str()), (0, ""));
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap(),
        serde_json::json!([{"name": "example.com/dev=x", "path": "d\u{fffd}\u{fffd}x/a.json"}])
    );
    let mut yaml = args("yaml").to_vec();
    yaml.push(&name);
    let (code, out, err) = run(tmp.path(), &yaml);
    assert_eq!((code, err.as_str()), (0, ""));
    assert_eq!(
        out,
        "- name: 'example.com/dev=x'\n  path: 'd\u{fffd}\u{fffd}x/a.json'\n"
    );
}

/// `check -o json` with an output directory whose name is not UTF-8 (it
/// printed half a document, then an error naming no path): one whole
/// document; the text output shows the bytes.
#[test]
fn check_json_writes_non_utf8_paths_lossily() {
    let (tmp, _root) = machine("intel-laptop");
    let dir = bad_utf8();
    let args = |format: &'static str| -> Vec<&OsStr> {
        vec![
            OsStr::new("check"),
            OsStr::new("--root"),
            OsStr::new("root"),
            OsStr::new("--output-dir"),
            &dir,
            OsStr::new("--spec-dir"),
            &dir,
            OsStr::new("-o"),
            OsStr::new(format),
        ]
    };
    let (code, out, err) = run(tmp.path(), &args("json"));
    assert_eq!((code, err.as_str()), (1, ""));
    let doc: Value = serde_json::from_str(&out).unwrap();
    let files: Vec<&str> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["file"].as_str().unwrap())
        .collect();
    assert_eq!(
        files,
        [
            "d\u{fffd}\u{fffd}x/intel.com-gpu.yaml",
            "d\u{fffd}\u{fffd}x/intel.com-npu.yaml"
        ]
    );
    let (code, out, _) = run(tmp.path(), &args("text"));
    assert_eq!(code, 1);
    assert_eq!(
        out,
        "missing: d\\xff\\xfex/intel.com-gpu.yaml: not on disk: generate would write it (2 devices)\n\
missing: d\\xff\\xfex/intel.com-npu.yaml: not on disk: generate would write it (2 devices)\n\
not current: 2 spec files and 0 device-info files checked, 2 problems, 0 warnings\n"
    );
}

/// A fatal error under `-o json|yaml`: nothing on stdout, one line on
/// stderr naming the path, its bytes shown and its controls escaped.
#[test]
fn a_fatal_error_leaves_stdout_empty_and_names_the_path() {
    let tmp = tempfile::tempdir().unwrap();
    let root = OsStr::from_bytes(b"no\xffroot\n\x1b[2J");
    for command in ["discover", "check", "list"] {
        for format in ["json", "yaml"] {
            let mut args = vec![OsStr::new(command)];
            if command == "list" {
                args.push(OsStr::new("--discovered"));
            }
            args.extend([
                OsStr::new("--root"),
                root,
                OsStr::new("-o"),
                OsStr::new(format),
            ]);
            let (code, out, err) = run(tmp.path(), &args);
            assert_eq!(code, 2, "{command} -o {format}");
            assert_eq!(out, "", "{command} -o {format}");
            assert!(
                err.starts_with("cdigen: cannot use no\\xffroot\\n\\x1b[2J as the root: "),
                "{command} -o {format}: {err}"
            );
            assert_eq!(err.lines().count(), 1, "{err}");
            assert_no_controls("stderr", &err);
        }
    }
}

/// `generate --output` with a file name that is not UTF-8: refused, naming
/// it with its bytes shown (it was refused as "needs a file name").
#[test]
fn generate_output_names_a_non_utf8_file() {
    let (tmp, _root) = machine("intel-laptop");
    let (code, out, err) = run(
        tmp.path(),
        &[
            OsStr::new("generate"),
            OsStr::new("--root"),
            OsStr::new("root"),
            OsStr::new("--generator"),
            OsStr::new("intel-gpu"),
            OsStr::new("--output"),
            OsStr::from_bytes(b"gpu\xff\x1b.yaml"),
        ],
    );
    assert_eq!((code, out.as_str()), (2, ""));
    assert_eq!(
        err,
        "cdigen: --output gpu\\xff\\x1b.yaml: cdigen writes only file names that are UTF-8\n"
    );
}

// ---- Terminal and log safety --------------------------------------------------

/// pci.ids names with escape sequences, a carriage return and a bidi
/// override reach `discover`'s table escaped.
#[test]
fn discover_escapes_pci_ids_names() {
    let (tmp, root) = machine("intel-laptop");
    let ids = root.join("usr/share/misc/pci.ids");
    let text = fs::read_to_string(&ids).unwrap();
    let text = text
        .replace(
            "8086  Intel Corporation",
            "8086  Intel\x1b]0;owned\x07 Corporation",
        )
        .replace(
            "\t7d55  Meteor Lake-P [Intel Arc Graphics]",
            "\t7d55  Meteor\rLake\u{202e}P\u{9b}2J",
        );
    fs::write(&ids, text).unwrap();
    let (code, out, err) = run_str(tmp.path(), &["discover", "--root", "root"]);
    assert_eq!((code, err.as_str()), (0, ""));
    assert_eq!(
        out,
        "BACKEND  DEVICE        DRIVER     NUMA  NODES             NAME\n\
drm      0000:00:02.0  i915       -     card1,renderD128  Intel\\x1b]0;owned\\x07 Corporation Meteor\\rLake\\u{202e}P\\u{9b}2J [8086:7d55]\n\
drm      0000:00:0b.0  intel_vpu  -     accel0            Intel\\x1b]0;owned\\x07 Corporation Meteor Lake NPU [8086:7d1d]\n"
    );
    // The documents keep the names as they are, quoted and escaped by
    // their format: the same strings to a reader, safe on a terminal.
    let (code, out, _) = run_str(tmp.path(), &["discover", "--root", "root", "-o", "json"]);
    assert_eq!(code, 0);
    assert!(
        out.contains(r#""vendor_name": "Intel\u001b]0;owned\u0007 Corporation""#),
        "{out}"
    );
    assert!(
        out.contains(r#""device_name": "Meteor\rLake\u202eP\u009b2J""#),
        "{out}"
    );
    assert_no_controls("stdout", &out);
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        doc["devices"][0]["pci"]["device_name"],
        "Meteor\rLake\u{202e}P\u{9b}2J"
    );
}

/// A spec file whose name holds an escape sequence and a newline: validate,
/// list and check print it escaped, one line per finding.
#[test]
fn spec_file_names_are_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    let name = "a\x1b[31m\nerror: forged.json";
    fs::create_dir(tmp.path().join("cdi")).unwrap();
    fs::write(
        tmp.path().join("cdi").join(name),
        r#"{"cdiVersion": "0.3.0", "kind": "example.com/d",
            "devices": [{"name": "x", "containerEdits": {"env": ["A=1"]}}]}"#,
    )
    .unwrap();
    let shown = "cdi/a\\x1b[31m\\nerror: forged.json";
    let (code, out, err) = run_str(tmp.path(), &["validate", "cdi"]);
    assert_eq!((code, err.as_str()), (1, ""));
    assert_eq!(
        out,
        format!(
            "{shown}: error: kind: invalid class \"d\": must be at least 2 characters (released CDI \
libraries crash on 1)\n1 file checked: 1 error, 0 warnings\n"
        )
    );
    let (code, out, err) = run_str(tmp.path(), &["list", "--spec-dir", "cdi"]);
    assert_eq!((code, out.as_str()), (0, ""));
    assert_eq!(
        err,
        format!(
            "cdigen: {shown}: kind: invalid class \"d\": must be at least 2 characters (released \
CDI libraries crash on 1)\n"
        )
    );
}

/// A log record is one line, whatever a message holds: a uevent's
/// `MAJOR=` with an escape sequence and a carriage return, a directory
/// name with a newline.
#[test]
fn log_records_are_escaped_and_one_line() {
    let (tmp, root) = machine("intel-laptop");
    let uevent = root.join("sys/devices/pci0000:00/0000:00:02.0/drm/card1/uevent");
    let text = fs::read_to_string(&uevent).unwrap();
    fs::write(
        &uevent,
        text.replace("MAJOR=226", "MAJOR=226\x1b[2K\rWARN forged"),
    )
    .unwrap();
    let (code, _, err) = run_str(
        tmp.path(),
        &[
            "-vv",
            "list",
            "--discovered",
            "--root",
            "root",
            "--templates",
            "no\nERROR forged",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_no_controls("stderr", &err);
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines.contains(
            &" WARN /sys/class/drm/card1/uevent: MAJOR=226\\x1b[2K\\rWARN forged MINOR=1 disagrees \
with dev 226:1; trusting dev"
        ),
        "{err}"
    );
    assert!(
        lines.contains(&"DEBUG no\\nERROR forged: no such directory: no user templates"),
        "{err}"
    );
    assert!(
        !lines.iter().any(|l| l.starts_with("ERROR forged")),
        "{err}"
    );
}

/// `generate` and `snapshot` print the paths they were given escaped.
#[test]
fn generate_and_snapshot_escape_paths() {
    let (tmp, _root) = machine("intel-laptop");
    let dir = "cdi\x1b[31m\nx";
    let (code, out, err) = run_str(
        tmp.path(),
        &["generate", "--root", "root", "--output-dir", dir],
    );
    assert_eq!((code, err.as_str()), (0, ""));
    assert_eq!(
        out,
        "created: cdi\\x1b[31m\\nx/intel.com-gpu.yaml (2 devices)\n\
created: cdi\\x1b[31m\\nx/intel.com-npu.yaml (2 devices)\n"
    );
    let (code, out, err) = run_str(
        tmp.path(),
        &["snapshot", "--root", "root", "--output", "snap\r\x1b[1A"],
    );
    assert_eq!((code, err.as_str()), (0, ""), "{err}");
    assert!(out.starts_with("wrote snap\\r\\x1b[1A: "), "{out}");
    assert_no_controls("stdout", &out);
}

// ---- Durations --------------------------------------------------------------

/// Every duration flag of `watch` has an upper bound, refused at parsing
/// (`--interval 18446744073709551615s` panicked).
#[test]
fn watch_durations_are_bounded() {
    let tmp = tempfile::tempdir().unwrap();
    for (flag, value, why) in [
        ("--interval", "18446744073709551615s", "must be at most 24h"),
        ("--interval", "86401s", "must be at most 24h"),
        ("--interval", "500ms", "must be at least 1s"),
        ("--debounce", "61s", "must be at most 1m"),
        ("--debounce", "18446744073709551615s", "must be at most 1m"),
        ("--debounce", "9ms", "must be at least 10ms"),
        ("--max-delay", "3601s", "must be at most 1h"),
        ("--max-delay", "18446744073709551615s", "must be at most 1h"),
    ] {
        let (code, out, err) = run_str(tmp.path(), &["watch", flag, value, "--source", "none"]);
        assert_eq!((code, out.as_str()), (2, ""), "{flag} {value}");
        assert_eq!(
            err,
            format!(
                "error: invalid value '{value}' for '{flag} <DURATION>': {why}\n\n\
For more information, try '--help'.\n"
            )
        );
    }
}

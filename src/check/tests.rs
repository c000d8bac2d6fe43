#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use super::*;

use std::fs;
use std::os::unix::fs::symlink;

use crate::write::ManagedDir;

/// A temp dir holding `root/` (with an empty dev manifest), `cdi/` and
/// `devinfo/` paths (not created).
struct Env {
    tmp: tempfile::TempDir,
    root: HostRoot,
}

impl Env {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir(tmp.path().join("root")).unwrap();
        fs::write(
            tmp.path().join("root/dev.manifest"),
            "/dev/null c 1:3 0666 0 0\n",
        )
        .unwrap();
        let root = HostRoot::open(&tmp.path().join("root")).unwrap();
        Env { tmp, root }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    fn dirs(&self) -> Dirs {
        Dirs {
            output_dir: self.path("cdi"),
            devinfo_dir: self.path("devinfo"),
            spec_dirs: vec![self.path("cdi")],
        }
    }

    fn run(&self, plans: Vec<Planned>) -> Report {
        run(
            &self.root,
            &Plans {
                planned: plans,
                failed: Vec::new(),
            },
            &self.dirs(),
        )
    }
}

const SPEC: &str = "{\"cdiVersion\":\"0.3.0\",\"kind\":\"example.com/gpu\",\"devices\":[{\"name\":\"0\",\"containerEdits\":{\"env\":[\"A=1\"]}}]}";

/// A plan of generator `g` writing `example.com-gpu.json` with [`SPEC`]
/// and the given device-info files.
fn plan(g: &str, devinfo: &[(&str, &str)]) -> Planned {
    let spec = cdi::codec::parse(SPEC.as_bytes(), Format::Json).unwrap();
    Planned {
        generator: g.into(),
        file: "example.com-gpu.json".into(),
        bytes: SPEC.as_bytes().to_vec(),
        spec: Some(spec),
        devinfo: devinfo
            .iter()
            .map(|(n, b)| (n.to_string(), b.as_bytes().to_vec()))
            .collect(),
        device_info: true,
        devices: Vec::new(),
        named: Vec::new(),
    }
}

fn kinds_and_reasons(r: &Report) -> Vec<(Kind, String)> {
    r.findings
        .iter()
        .map(|f| (f.kind, f.reason.clone()))
        .collect()
}

#[test]
fn current_files_are_current() {
    let env = Env::new();
    let p = plan("g", &[("a-device.json", "{\"x\":1}")]);
    ManagedDir::open(&env.path("cdi"))
        .unwrap()
        .write(&p.file, &p.bytes, "g")
        .unwrap();
    ManagedDir::open(&env.path("devinfo"))
        .unwrap()
        .write("a-device.json", b"{\"x\":1}", "g")
        .unwrap();
    let r = env.run(vec![p]);
    assert_eq!(kinds_and_reasons(&r), []);
    assert!(r.current);
    assert_eq!(
        r.checked,
        Checked {
            specs: 1,
            device_info: 1
        }
    );
}

#[test]
fn device_info_cdigen_wrote_that_changed_gives_the_first_difference() {
    let env = Env::new();
    let p = plan(
        "g",
        &[(
            "a-device.json",
            "{\"pci\":{\"pci-address\":\"0000:01:00.1\"}}",
        )],
    );
    ManagedDir::open(&env.path("cdi"))
        .unwrap()
        .write(&p.file, &p.bytes, "g")
        .unwrap();
    let mut m = ManagedDir::open(&env.path("devinfo")).unwrap();
    m.write(
        "a-device.json",
        b"{\"pci\":{\"pci-address\":\"0000:01:00.0\"}}",
        "g",
    )
    .unwrap();
    m.write("b-device.json", b"not json", "g").unwrap();
    drop(m);
    let r = env.run(vec![p]);
    assert_eq!(
        kinds_and_reasons(&r),
        [
            (
                Kind::Stale,
                "content differs: pci.pci-address is \"0000:01:00.0\" on disk but \"0000:01:00.1\" now"
                    .into()
            ),
            (
                Kind::Orphan,
                "its device is gone (generator \"g\" no longer selects it): generate would remove it"
                    .into()
            ),
        ]
    );
    assert_eq!(r.findings[0].file, env.path("devinfo/a-device.json"));
    assert_eq!(r.findings[1].file, env.path("devinfo/b-device.json"));
    assert!(!r.current);
    // Another generator's files are not this one's orphans.
    let r = env.run(vec![plan("other", &[])]);
    assert_eq!(kinds_and_reasons(&r), []);
}

#[test]
fn an_orphan_that_is_a_symlink_is_left_alone_and_said_so() {
    let env = Env::new();
    let mut m = ManagedDir::open(&env.path("cdi")).unwrap();
    m.write("old.json", SPEC.as_bytes(), "g").unwrap();
    drop(m);
    fs::remove_file(env.path("cdi/old.json")).unwrap();
    symlink("/etc/hostname", env.path("cdi/old.json")).unwrap();
    let mut p = plan("g", &[]);
    p.spec = None;
    p.bytes.clear();
    let r = env.run(vec![p]);
    assert_eq!(
        kinds_and_reasons(&r),
        [(
            Kind::Orphan,
            "generator \"g\" selects no device now, but it is a symbolic link, not a regular file: \
             generate will leave it alone and forget it; remove it by hand"
                .into()
        )]
    );
    // Once gone, there is nothing to say: generate only forgets it.
    fs::remove_file(env.path("cdi/old.json")).unwrap();
    let mut p = plan("g", &[]);
    p.spec = None;
    assert_eq!(kinds_and_reasons(&env.run(vec![p])), []);
}

#[test]
fn a_directory_at_our_file_name_is_foreign_and_an_unreadable_spec_dir_a_finding() {
    let env = Env::new();
    fs::create_dir_all(env.path("cdi/example.com-gpu.json")).unwrap();
    fs::create_dir_all(env.path("devinfo/a-device.json")).unwrap();
    let mut dirs = env.dirs();
    // A spec directory that cannot be listed (a symlink loop).
    fs::create_dir(env.path("late")).unwrap();
    symlink("loop", env.path("late/loop")).unwrap();
    dirs.spec_dirs.push(env.path("late/loop"));
    let plans = Plans {
        planned: vec![plan("g", &[("a-device.json", "{}")])],
        failed: Vec::new(),
    };
    let r = run(&env.root, &plans, &dirs);
    let got: Vec<(Kind, PathBuf)> = r
        .findings
        .iter()
        .map(|f| (f.kind, f.file.clone()))
        .collect();
    assert_eq!(
        got,
        [
            (Kind::Unreadable, env.path("late/loop")),
            (Kind::Foreign, env.path("cdi/example.com-gpu.json")),
            (Kind::Foreign, env.path("devinfo/a-device.json")),
        ]
    );
    assert!(
        r.findings[0].reason.starts_with(&format!(
            "cannot read {}: ",
            env.path("late/loop").display()
        )),
        "{:?}",
        r.findings[0]
    );
}

#[test]
fn an_unreadable_state_file_stops_the_checks_of_that_directory_only() {
    let env = Env::new();
    fs::create_dir_all(env.path("cdi")).unwrap();
    fs::create_dir_all(env.path("cdi").join(write::STATE_FILE)).unwrap();
    let r = env.run(vec![plan("g", &[("a-device.json", "{}")])]);
    let got: Vec<(Kind, PathBuf, String)> = r
        .findings
        .iter()
        .map(|f| (f.kind, f.file.clone(), f.reason.clone()))
        .collect();
    assert_eq!(
        got,
        [
            (
                Kind::Unreadable,
                env.path("cdi/.cdigen-state"),
                "cannot read: a directory, not a regular file: not opening it".into()
            ),
            (
                Kind::Missing,
                env.path("devinfo/a-device.json"),
                "not on disk: generate would write it".into()
            ),
        ]
    );
}

#[test]
fn same_dir_sees_through_links() {
    let env = Env::new();
    fs::create_dir(env.path("run")).unwrap();
    symlink("run", env.path("var-run")).unwrap();
    assert!(same_dir(&env.path("run"), &env.path("var-run")));
    assert!(same_dir(&env.path("absent"), &env.path("absent")));
    assert!(!same_dir(&env.path("run"), &env.path("absent")));
}

#[test]
fn node_paths_outside_dev_are_never_looked_up() {
    let env = Env::new();
    let c = Checker {
        root: &env.root,
        findings: Vec::new(),
        checked: Checked::default(),
    };
    assert!(c.node_gone("/dev/dri/card9"));
    assert!(!c.node_gone("/dev/null"));
    for p in [
        "/etc/passwd",
        "/dev/../etc/passwd",
        "dev/null",
        "",
        "/devices/x",
    ] {
        assert!(!c.node_gone(p), "{p}");
    }
}

#[test]
fn kinds_and_severities() {
    let warnings = [Kind::Shadows, Kind::Unowned, Kind::NotLoaded];
    for k in [
        Kind::Missing,
        Kind::Stale,
        Kind::Orphan,
        Kind::Foreign,
        Kind::Conflict,
        Kind::Competing,
        Kind::Shadowed,
        Kind::Shadows,
        Kind::Unowned,
        Kind::NotLoaded,
        Kind::Unreadable,
        Kind::Failed,
    ] {
        // The word printed is the one in JSON.
        assert_eq!(
            serde_json::to_value(k).unwrap(),
            serde_json::Value::String(k.as_str().into())
        );
        let want = if warnings.contains(&k) {
            Severity::Warning
        } else {
            Severity::Error
        };
        assert_eq!(k.severity(), want, "{k:?}");
    }
}

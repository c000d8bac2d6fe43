#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use super::*;

use crate::cdi::spec::{Hook, IntelRdt, NetDevice};

/// A host of listed entries; everything else is missing.
#[derive(Default)]
struct FakeHost {
    entries: BTreeMap<String, HostEntry>,
    files: Vec<String>,
}

impl FakeHost {
    fn node(mut self, path: &str, node_type: &'static str, major: i64, minor: i64) -> Self {
        self.entries.insert(
            path.to_string(),
            HostEntry::Node {
                node_type,
                major,
                minor,
                mode: 0o660,
            },
        );
        self
    }
}

impl Host for FakeHost {
    fn lstat(&self, path: &str) -> Result<Option<HostEntry>, String> {
        if path == "/dev/unreadable" {
            return Err("permission denied".into());
        }
        Ok(self.entries.get(path).copied())
    }

    fn exists(&self, path: &str) -> bool {
        self.entries.contains_key(path) || self.files.iter().any(|f| f == path)
    }
}

fn device(name: &str) -> Origin {
    Origin {
        device: name.into(),
        spec_level: false,
    }
}

fn env(vars: &[&str]) -> ContainerEdits {
    ContainerEdits {
        env: vars.iter().map(|v| v.to_string()).collect(),
        ..ContainerEdits::default()
    }
}

fn node(path: &str, node_type: &str, major: i64, minor: i64) -> DeviceNode {
    DeviceNode {
        path: path.into(),
        node_type: node_type.into(),
        major,
        minor,
        ..DeviceNode::default()
    }
}

fn nodes(list: Vec<DeviceNode>) -> ContainerEdits {
    ContainerEdits {
        device_nodes: list,
        ..ContainerEdits::default()
    }
}

fn mount(host: &str, container: &str) -> Mount {
    Mount {
        host_path: host.into(),
        container_path: container.into(),
        ..Mount::default()
    }
}

fn mounts(list: Vec<Mount>) -> ContainerEdits {
    ContainerEdits {
        mounts: list,
        ..ContainerEdits::default()
    }
}

/// Applies `(origin, edits)` pairs in order.
fn run(list: &[(Origin, ContainerEdits)], host: &FakeHost) -> Applied {
    let edits: Vec<Edits<'_>> = list
        .iter()
        .map(|(origin, edits)| Edits { origin, edits })
        .collect();
    apply(&edits, host)
}

fn messages(a: &Applied, kind: FindingKind) -> Vec<String> {
    a.findings
        .iter()
        .filter(|f| f.kind == kind)
        .map(|f| format!("{}: {}", f.subject, f.message))
        .collect()
}

#[test]
fn env_replaces_in_place_by_name_and_appends_new_names() {
    let a = run(
        &[
            (device("x.com/y=a"), env(&["A=1", "B=1"])),
            (device("x.com/y=b"), env(&["C=1", "A=2"])),
        ],
        &FakeHost::default(),
    );
    assert_eq!(a.oci.as_ref().unwrap().env, ["A=2", "B=1", "C=1"]);
    assert_eq!(
        messages(&a, FindingKind::EnvCollision),
        [
            r#"A: set to "1" by x.com/y=a, to "2" by x.com/y=b: the container sees "2" (from x.com/y=b, the later wins)"#
        ]
    );
    let f = &a.findings[0];
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(
        f.sources
            .iter()
            .map(|s| (s.origin.device.as_str(), s.value.as_deref()))
            .collect::<Vec<_>>(),
        [("x.com/y=a", Some("1")), ("x.com/y=b", Some("2"))]
    );
}

#[test]
fn env_set_twice_to_one_value_is_no_finding() {
    let spec = Origin {
        device: "x.com/y=a".into(),
        spec_level: true,
    };
    let a = run(
        &[(spec, env(&["A=1"])), (device("x.com/y=a"), env(&["A=1"]))],
        &FakeHost::default(),
    );
    assert_eq!(a.oci.unwrap().env, ["A=1"]);
    assert!(a.findings.is_empty(), "{:?}", a.findings);
}

#[test]
fn env_collision_names_spec_level_edits() {
    let spec = Origin {
        device: "x.com/y=a".into(),
        spec_level: true,
    };
    let a = run(
        &[
            (spec, env(&["V=void"])),
            (device("x.com/y=a"), env(&["V=0"])),
        ],
        &FakeHost::default(),
    );
    assert_eq!(
        messages(&a, FindingKind::EnvCollision),
        [
            r#"V: set to "void" by the spec of x.com/y=a, to "0" by x.com/y=a: the container sees "0" (from x.com/y=a, the later wins)"#
        ]
    );
}

#[test]
fn a_node_replaces_the_earlier_one_with_its_path_and_every_cgroup_rule_stays() {
    let mut first = node("/dev/x", "c", 5, 1);
    first.permissions = "r".into();
    let a = run(
        &[
            (
                device("x.com/y=a"),
                nodes(vec![first, node("/dev/y", "c", 6, 0)]),
            ),
            (device("x.com/y=b"), nodes(vec![node("/dev/x", "c", 5, 2)])),
        ],
        &FakeHost::default(),
    );
    let oci = a.oci.clone().unwrap();
    let paths: Vec<(&str, i64)> = oci
        .devices
        .iter()
        .map(|d| (d.path.as_str(), d.minor))
        .collect();
    // Removed from its place, appended at the end.
    assert_eq!(paths, [("/dev/y", 0), ("/dev/x", 2)]);
    let rules: Vec<String> = oci
        .cgroup_devices
        .iter()
        .map(|r| {
            format!(
                "{} {} {}:{} {}",
                r.allow, r.node_type, r.major, r.minor, r.access
            )
        })
        .collect();
    assert_eq!(rules, ["true c 5:1 r", "true c 6:0 rwm", "true c 5:2 rwm"]);
    assert_eq!(
        messages(&a, FindingKind::ShadowedNode),
        [
            "/dev/x: c 5:1 from x.com/y=a is replaced by c 5:2 from x.com/y=b (the later wins; the earlier's cgroup rule stays)"
        ]
    );
}

#[test]
fn the_same_node_from_two_devices_is_one_node_and_no_finding() {
    let a = run(
        &[
            (
                device("x.com/y=a"),
                nodes(vec![node("/dev/vfio/vfio", "c", 10, 196)]),
            ),
            (
                device("x.com/y=b"),
                nodes(vec![node("/dev/vfio/vfio", "c", 10, 196)]),
            ),
        ],
        &FakeHost::default(),
    );
    let oci = a.oci.clone().unwrap();
    assert_eq!(oci.devices.len(), 1);
    assert_eq!(oci.cgroup_devices.len(), 2);
    assert!(messages(&a, FindingKind::ShadowedNode).is_empty());
}

#[test]
fn only_block_and_char_nodes_get_cgroup_rules() {
    let a = run(
        &[(
            device("x.com/y=a"),
            nodes(vec![
                node("/dev/u", "u", 5, 1),
                node("/dev/p", "p", 0, 0),
                node("/dev/b", "b", 8, 0),
            ]),
        )],
        &FakeHost::default(),
    );
    let oci = a.oci.unwrap();
    assert_eq!(oci.devices.len(), 3);
    let rules: Vec<&str> = oci
        .cgroup_devices
        .iter()
        .map(|r| r.node_type.as_str())
        .collect();
    assert_eq!(rules, ["b"]);
}

#[test]
fn missing_type_numbers_and_mode_come_from_the_host_node() {
    let host = FakeHost::default().node("/dev/null", "c", 1, 3);
    let mut typed = node("/dev/null", "c", 0, 0);
    typed.permissions = "rw".into();
    let mut other_path = node("/dev/in-container", "", 0, 0);
    other_path.host_path = "/dev/null".into();
    let a = run(
        &[(
            device("x.com/y=a"),
            nodes(vec![node("/dev/null", "", 0, 0), typed, other_path]),
        )],
        &host,
    );
    let oci = a.oci.clone().unwrap();
    let got: Vec<String> = oci
        .devices
        .iter()
        .map(|d| {
            format!(
                "{} {} {}:{} {:?}",
                d.path, d.node_type, d.major, d.minor, d.file_mode
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            "/dev/null c 1:3 Some(432)",
            "/dev/in-container c 1:3 Some(432)"
        ]
    );
    assert_eq!(oci.cgroup_devices[1].access, "rw");
    assert!(a.findings.is_empty(), "{:?}", a.findings);
}

#[test]
fn a_fully_specified_node_keeps_its_numbers_and_takes_only_the_mode() {
    let host = FakeHost::default().node("/dev/nvidia0", "c", 195, 1);
    let mut with_mode = node("/dev/nvidia0", "c", 195, 0);
    with_mode.file_mode = Some(0o666);
    let a = run(
        &[
            (
                device("x.com/y=a"),
                nodes(vec![node("/dev/nvidia0", "c", 195, 0)]),
            ),
            (device("x.com/y=b"), nodes(vec![with_mode])),
        ],
        &host,
    );
    let oci = a.oci.clone().unwrap();
    assert_eq!(oci.devices.len(), 1);
    assert_eq!(
        (oci.devices[0].minor, oci.devices[0].file_mode),
        (0, Some(0o666))
    );
    assert_eq!(
        messages(&a, FindingKind::HostNodeMismatch),
        [
            "/dev/nvidia0: device node of x.com/y=a: the spec says c 195:0, the host's node is c 195:1: the container gets the spec's",
            "/dev/nvidia0: device node of x.com/y=b: the spec says c 195:0, the host's node is c 195:1: the container gets the spec's",
        ]
    );
    // Only the mode differs: the replacement is a finding too.
    assert_eq!(
        messages(&a, FindingKind::ShadowedNode),
        [
            "/dev/nvidia0: c 195:0 mode 0660 from x.com/y=a is replaced by c 195:0 mode 0666 from x.com/y=b (the later wins; the earlier's cgroup rule stays)"
        ]
    );
}

#[test]
fn a_node_without_numbers_that_is_not_on_the_host_fails_the_injection() {
    let a = run(
        &[(
            device("x.com/y=a"),
            nodes(vec![node("/dev/gone", "c", 0, 0)]),
        )],
        &FakeHost::default(),
    );
    assert!(a.oci.is_none());
    assert_eq!(
        a.error.as_deref(),
        Some(
            r#"failed to inject devices: failed to stat CDI host device "/dev/gone": no such file or directory"#
        )
    );
    assert_eq!(
        a.findings.last().unwrap().kind,
        FindingKind::InjectionFailed
    );
    assert_eq!(a.findings.last().unwrap().severity, Severity::Error);

    let unreadable = run(
        &[(
            device("x.com/y=a"),
            nodes(vec![node("/dev/unreadable", "", 0, 0)]),
        )],
        &FakeHost::default(),
    );
    assert_eq!(
        unreadable.error.as_deref(),
        Some(
            r#"failed to inject devices: failed to stat CDI host device "/dev/unreadable": permission denied"#
        )
    );
}

#[test]
fn a_host_node_of_another_type_fails_a_node_without_numbers() {
    let host = FakeHost::default().node("/dev/sda", "b", 8, 0);
    let a = run(
        &[(
            device("x.com/y=a"),
            nodes(vec![node("/dev/sda", "c", 0, 0)]),
        )],
        &host,
    );
    assert_eq!(
        a.error.as_deref(),
        Some(
            r#"failed to inject devices: CDI device ("/dev/sda", "/dev/sda"), host type mismatch (c, b)"#
        )
    );
    let mut link = FakeHost::default();
    link.entries
        .insert("/dev/link".into(), HostEntry::Other("a symbolic link"));
    let a = run(
        &[(
            device("x.com/y=a"),
            nodes(vec![node("/dev/link", "", 0, 0)]),
        )],
        &link,
    );
    assert_eq!(
        a.error.as_deref(),
        Some(
            r#"failed to inject devices: failed to stat CDI host device "/dev/link": not a device node"#
        )
    );
}

#[test]
fn a_node_with_numbers_needs_no_host_node_and_says_so() {
    let mut link = FakeHost::default();
    link.entries
        .insert("/dev/link".into(), HostEntry::Other("a symbolic link"));
    let a = run(
        &[(
            device("x.com/y=a"),
            nodes(vec![
                node("/dev/nvidia-uvm", "c", 510, 0),
                node("/dev/link", "c", 1, 1),
            ]),
        )],
        &link,
    );
    assert_eq!(a.oci.as_ref().unwrap().devices.len(), 2);
    assert_eq!(
        messages(&a, FindingKind::MissingHostPath),
        [
            "/dev/nvidia-uvm: device node of x.com/y=a is not on the host: the runtime creates /dev/nvidia-uvm from the spec's numbers (c 510:0)"
        ]
    );
    assert_eq!(
        messages(&a, FindingKind::HostNodeMismatch),
        [
            "/dev/link: device node of x.com/y=a is a symbolic link on the host, not a device node: the runtime creates /dev/link from the spec's numbers (c 1:1)"
        ]
    );
}

#[test]
fn mount_depth_is_gos_clean_path_slash_count() {
    for (path, want) in [
        ("/", 1),
        ("", 0),
        ("a", 0),
        ("/a", 1),
        ("/a/", 1),
        ("//a//b", 2),
        ("/a/./b/", 2),
        ("/a/../b/c", 2),
        ("/..", 1),
        ("/../../a", 1),
        ("a/..", 0),
        ("../a", 1),
        ("../../a/b", 3),
        ("a/b/../../..", 0),
    ] {
        assert_eq!(depth(path), want, "{path:?}");
    }
}

#[test]
fn a_mount_replaces_the_earlier_one_at_its_destination_then_all_sort_by_depth() {
    let host = FakeHost {
        files: vec!["/x".into(), "/x2".into(), "/y".into(), "/a/b/c".into()],
        ..FakeHost::default()
    };
    let a = run(
        &[
            (
                device("x.com/y=a"),
                mounts(vec![
                    mount("/a/b/c", "/m/a/b"),
                    mount("/x", "/m"),
                    mount("/y", "/m/a/b/c/d"),
                    mount("tmpfs", "rel"),
                    mount("/q", "/q"),
                ]),
            ),
            (device("x.com/y=b"), mounts(vec![mount("/x2", "/m")])),
        ],
        &host,
    );
    let got: Vec<String> = a
        .oci
        .clone()
        .unwrap()
        .mounts
        .iter()
        .map(|m| format!("{}<-{}", m.destination, m.source))
        .collect();
    assert_eq!(
        got,
        [
            "rel<-tmpfs",
            "/q<-/q",
            "/m<-/x2",
            "/m/a/b<-/a/b/c",
            "/m/a/b/c/d<-/y"
        ]
    );
    assert_eq!(
        messages(&a, FindingKind::ShadowedMount),
        [
            "/m: the mount of /x from x.com/y=a is replaced by that of /x2 from x.com/y=b (the later wins)"
        ]
    );
    // `tmpfs` is not a path: only /q is missing.
    assert_eq!(
        messages(&a, FindingKind::MissingHostPath),
        [
            "/q: the source of the mount at /q from x.com/y=a is not on the host: the runtime fails to start the container"
        ]
    );
}

#[test]
fn hooks_are_appended_per_name_in_order() {
    let hook = |name: &str, path: &str| Hook {
        hook_name: name.into(),
        path: path.into(),
        ..Hook::default()
    };
    let with = |hooks| ContainerEdits {
        hooks,
        ..ContainerEdits::default()
    };
    let a = run(
        &[
            (
                device("x.com/y=a"),
                with(vec![
                    hook("createContainer", "/h1"),
                    hook("prestart", "/h0"),
                ]),
            ),
            (
                device("x.com/y=b"),
                with(vec![
                    hook("createContainer", "/h2"),
                    hook("poststop", "/h3"),
                ]),
            ),
            (
                device("x.com/y=b"),
                with(vec![hook("createContainer", "/h1")]),
            ),
        ],
        &FakeHost::default(),
    );
    let oci = a.oci.unwrap();
    let got: Vec<String> = oci
        .hooks
        .iter()
        .map(|(name, h)| format!("{name} {}", h.path))
        .collect();
    assert_eq!(
        got,
        [
            "prestart /h0",
            "createContainer /h1",
            "createContainer /h2",
            "createContainer /h1",
            "poststop /h3"
        ]
    );

    let bad = run(
        &[(device("x.com/y=a"), with(vec![hook("preStart", "/h")]))],
        &FakeHost::default(),
    );
    assert_eq!(
        bad.error.as_deref(),
        Some(r#"failed to inject devices: unknown hook name "preStart""#)
    );
}

#[test]
fn additional_gids_are_added_once_each_and_zero_is_skipped() {
    let gids = |g: Vec<u32>| ContainerEdits {
        additional_gids: g,
        ..ContainerEdits::default()
    };
    let a = run(
        &[
            (device("x.com/y=a"), gids(vec![44, 0, 44])),
            (device("x.com/y=b"), gids(vec![109, 44])),
        ],
        &FakeHost::default(),
    );
    assert_eq!(a.oci.unwrap().additional_gids, [44, 109]);
}

#[test]
fn the_last_intel_rdt_wins_and_net_devices_are_keyed_by_host_interface() {
    let rdt = |clos: &str| ContainerEdits {
        intel_rdt: Some(IntelRdt {
            clos_id: clos.into(),
            ..IntelRdt::default()
        }),
        net_devices: vec![NetDevice {
            host_interface_name: "eth1".into(),
            name: format!("net-{clos}"),
        }],
        ..ContainerEdits::default()
    };
    let a = run(
        &[
            (device("x.com/y=a"), rdt("a")),
            (device("x.com/y=b"), ContainerEdits::default()),
            (device("x.com/y=c"), rdt("c")),
        ],
        &FakeHost::default(),
    );
    let oci = a.oci.clone().unwrap();
    assert_eq!(oci.intel_rdt.unwrap().clos_id, "c");
    assert_eq!(oci.net_devices["eth1"].name, "net-c");
    assert_eq!(
        messages(&a, FindingKind::ShadowedIntelRdt),
        ["intelRdt: set by x.com/y=a and by x.com/y=c: the later replaces it whole"]
    );
    assert_eq!(
        messages(&a, FindingKind::ShadowedNetDevice),
        [
            r#"eth1: moved into the container as "net-a" by x.com/y=a and as "net-c" by x.com/y=c: the later wins"#
        ]
    );
}

#[test]
fn the_fragment_serializes_as_oci_writes_it() {
    let mut n = node("/dev/x", "c", 5, 0);
    n.uid = Some(0);
    let a = run(
        &[(
            device("x.com/y=a"),
            ContainerEdits {
                env: vec!["A=1".into()],
                device_nodes: vec![n],
                mounts: vec![Mount {
                    host_path: "/s".into(),
                    container_path: "/d".into(),
                    options: vec!["bind".into()],
                    mount_type: String::new(),
                }],
                hooks: vec![Hook {
                    hook_name: "createRuntime".into(),
                    path: "/h".into(),
                    timeout: Some(5),
                    ..Hook::default()
                }],
                ..ContainerEdits::default()
            },
        )],
        &FakeHost {
            files: vec!["/s".into()],
            ..FakeHost::default()
        },
    );
    let json = serde_json::to_value(a.oci.unwrap()).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "env": ["A=1"],
            "devices": [{"path": "/dev/x", "type": "c", "major": 5, "minor": 0, "uid": 0}],
            "cgroupDevices": [{"allow": true, "type": "c", "major": 5, "minor": 0, "access": "rwm"}],
            "mounts": [{"destination": "/d", "source": "/s", "options": ["bind"]}],
            "hooks": {"createRuntime": [{"path": "/h", "timeout": 5}]},
            "additionalGids": [],
            "intelRdt": null
        })
    );
}

/// Spec files in a temp dir per input, scanned as runtimes scan them.
struct Dirs {
    _tmp: tempfile::TempDir,
    inputs: Vec<Input>,
}

impl Dirs {
    /// `dirs[i]` lists (file name, content) of input `i`.
    fn new(dirs: &[&[(&str, &str)]]) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let mut inputs = Vec::new();
        for (i, files) in dirs.iter().enumerate() {
            let d = tmp.path().join(format!("d{i}"));
            std::fs::create_dir(&d).unwrap();
            for (name, content) in *files {
                std::fs::write(d.join(name), content).unwrap();
            }
            inputs.push(Input {
                path: d,
                explicit: true,
            });
        }
        Dirs { _tmp: tmp, inputs }
    }

    fn inject(&self, devices: &[&str]) -> Injection {
        let scan = super::super::dirs::scan(&self.inputs);
        let devices: Vec<String> = devices.iter().map(|d| d.to_string()).collect();
        inject(&scan, &self.inputs, &devices, &FakeHost::default())
    }

    /// A path with the temp dir replaced by `T`.
    fn show(&self, s: &str) -> String {
        s.replace(&self._tmp.path().display().to_string(), "T")
    }
}

const GPU: &str = r#"{"cdiVersion": "0.5.0", "kind": "x.com/gpu",
  "containerEdits": {"env": ["SPEC=gpu"], "hooks": [{"hookName": "createContainer", "path": "/bin/sh", "env": ["PATH=/bin"]}]},
  "devices": [
    {"name": "0", "containerEdits": {"env": ["DEV=0"]}},
    {"name": "1", "containerEdits": {"env": ["DEV=1"]}}
  ]}"#;

const NIC: &str = r#"{"cdiVersion": "0.5.0", "kind": "x.com/nic",
  "containerEdits": {"env": ["SPEC=nic"]},
  "devices": [{"name": "a", "containerEdits": {"env": ["NIC=a"]}}]}"#;

#[test]
fn a_specs_edits_are_applied_once_before_its_first_device() {
    let dirs = Dirs::new(&[&[("gpu.json", GPU), ("nic.json", NIC)]]);
    let r = dirs.inject(&["x.com/gpu=1", "x.com/nic=a", "x.com/gpu=0"]);
    assert!(r.injected);
    let oci = r.oci.unwrap();
    // SPEC: gpu's, then nic's replaces it in place.
    assert_eq!(oci.env, ["SPEC=nic", "DEV=0", "NIC=a"]);
    assert_eq!(oci.hooks.create_container.len(), 1);
    let kinds: Vec<(&str, &str)> = r
        .findings
        .iter()
        .map(|f| (f.kind.name(), f.subject.as_str()))
        .collect();
    assert_eq!(kinds, [("env-collision", "SPEC"), ("env-collision", "DEV")]);
    assert_eq!(
        r.findings[0].message,
        r#"set to "gpu" by the spec of x.com/gpu=1, to "nic" by the spec of x.com/nic=a: the container sees "nic" (from the spec of x.com/nic=a, the later wins)"#
    );
}

#[test]
fn unresolved_devices_say_why_and_nothing_is_injected() {
    let bad = GPU
        .replace("0.5.0", "9.9.9")
        .replace("x.com/gpu", "x.com/bad");
    let dirs = Dirs::new(&[
        &[("a.json", GPU), ("b.json", GPU), ("nic.json", NIC)],
        &[("bad.json", &bad)],
    ]);
    let r = dirs.inject(&[
        "x.com/gpu=0",
        "x.com/nic=b",
        "nic",
        "x.com/bad=1",
        "x.com/nic=a",
    ]);
    assert!(!r.injected);
    assert!(r.oci.is_none());
    assert_eq!(
        r.error.as_deref(),
        Some("unresolvable CDI devices x.com/gpu=0, x.com/nic=b, nic, x.com/bad=1")
    );
    let got: Vec<String> = r
        .findings
        .iter()
        .map(|f| dirs.show(&format!("{}: {}: {}", f.kind.name(), f.subject, f.message)))
        .collect();
    let bad_version = r.findings[3]
        .message
        .rsplit_once(": ")
        .unwrap()
        .1
        .to_string();
    assert_eq!(
        got,
        [
            "unresolved: x.com/gpu=0: defined in 2 files of T/d0 (T/d0/a.json, T/d0/b.json): runtimes drop every definition of a conflicting device".to_string(),
            "unresolved: x.com/nic=b: no such device in T/d0, T/d1".to_string(),
            r#"unresolved: nic: not a CDI device name (vendor/class=name): invalid qualified device name "nic": must be vendor/class=name"#.to_string(),
            format!("unresolved: x.com/bad=1: defined only in T/d1/bad.json, which runtimes do not load: cdiVersion: {bad_version}"),
        ]
    );
    assert!(r.findings.iter().all(|f| f.severity == Severity::Error));
    assert_eq!(r.findings[0].files.len(), 2);
}

#[test]
fn a_device_conflicting_in_an_earlier_directory_is_dropped_even_when_a_later_one_defines_it() {
    let dirs = Dirs::new(&[&[("a.json", GPU), ("b.json", GPU)], &[("c.json", GPU)]]);
    let r = dirs.inject(&["x.com/gpu=0"]);
    assert!(!r.injected);
    assert_eq!(
        dirs.show(&r.findings[0].message),
        "defined in 2 files of T/d0 (T/d0/a.json, T/d0/b.json): runtimes drop every definition \
         of a conflicting device (the definition in another directory included)"
    );
}

#[test]
fn unsafe_hooks_the_container_gets_are_warnings_once_each() {
    // The spec's hook has no env; device 1's program is missing; device
    // 0's is fine.
    let spec = r#"{"cdiVersion": "0.5.0", "kind": "x.com/gpu",
      "containerEdits": {"hooks": [{"hookName": "createContainer", "path": "/bin/sh"}]},
      "devices": [
        {"name": "0", "containerEdits": {"hooks": [{"hookName": "startContainer", "path": "/bin/sh", "env": ["A=1"]}]}},
        {"name": "1", "containerEdits": {"hooks": [{"hookName": "createRuntime", "path": "/nonexistent/hook", "env": ["A=1"]}]}}
      ]}"#;
    let dirs = Dirs::new(&[&[("gpu.json", spec)]]);
    let r = dirs.inject(&["x.com/gpu=0", "x.com/gpu=1"]);
    assert!(r.injected, "runtimes inject them anyway");
    let got: Vec<(&str, Severity, String, String)> = r
        .findings
        .iter()
        .map(|f| {
            (
                f.kind.name(),
                f.severity,
                f.sources
                    .iter()
                    .map(|s| s.origin.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
                dirs.show(&f.message),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                "unsafe-hook",
                Severity::Warning,
                Source::of(&Origin { device: "x.com/gpu=0".into(), spec_level: true }).origin.to_string(),
                "T/d0/gpu.json: containerEdits.hooks[0]: \"createContainer\" hook \"/bin/sh\": no env: runtimes run it with the container's environment, so an image's LD_PRELOAD or LD_AUDIT loads the image's code into it, as root on the host (give it an env, such as [\"PATH=/usr/sbin:/usr/bin:/sbin:/bin\"])".to_string()
            ),
            (
                "missing-host-path",
                Severity::Warning,
                "x.com/gpu=1".to_string(),
                "T/d0/gpu.json: device \"1\": containerEdits.hooks[0]: \"createRuntime\" hook \"/nonexistent/hook\": /nonexistent: No such file or directory (os error 2): runtimes fail to start a container given it".to_string()
            ),
        ]
    );
}

#[test]
fn a_later_directory_shadows_an_earlier_definition() {
    let later = GPU.replace("DEV=0", "DEV=zero");
    let dirs = Dirs::new(&[&[("gpu.json", GPU)], &[("gpu.json", &later)]]);
    let r = dirs.inject(&["x.com/gpu=0"]);
    assert!(r.injected);
    assert_eq!(r.oci.unwrap().env, ["SPEC=gpu", "DEV=zero"]);
    assert_eq!(
        dirs.show(&format!(
            "{}: {}",
            r.findings[0].kind.name(),
            r.findings[0].message
        )),
        "shadowed-definition: defined in T/d0/gpu.json, shadowed by T/d1/gpu.json (a later spec \
         directory wins): that definition is used"
    );
    assert_eq!(r.findings.len(), 1);
}

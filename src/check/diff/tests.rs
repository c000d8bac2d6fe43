#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use super::*;

use proptest::prelude::*;
use serde_json::json;

use crate::cdi::{ContainerEdits, Mount};

fn node(path: &str, major: i64, minor: i64) -> DeviceNode {
    DeviceNode {
        path: path.into(),
        node_type: "c".into(),
        major,
        minor,
        ..DeviceNode::default()
    }
}

fn device(name: &str, nodes: Vec<DeviceNode>) -> Device {
    Device {
        name: name.into(),
        container_edits: ContainerEdits {
            device_nodes: nodes,
            ..ContainerEdits::default()
        },
        ..Device::default()
    }
}

fn spec(devices: Vec<Device>) -> Spec {
    Spec {
        cdi_version: "0.5.0".into(),
        kind: "example.com/gpu".into(),
        devices,
        ..Spec::default()
    }
}

/// Reasons as (device, text) pairs, nothing gone from the host.
fn reasons(old: &Spec, new: &Spec) -> Vec<(Option<String>, String)> {
    reasons_gone(old, new, &[])
}

fn reasons_gone(old: &Spec, new: &Spec, gone: &[&str]) -> Vec<(Option<String>, String)> {
    let gone = |p: &str| gone.contains(&p);
    spec_reasons(old, new, &gone)
        .into_iter()
        .map(|r| (r.device, r.text))
        .collect()
}

fn dev(name: &str) -> Option<String> {
    Some(format!("example.com/gpu={name}"))
}

#[test]
fn equal_specs_have_no_reason() {
    let s = spec(vec![device("0", vec![node("/dev/dri/card1", 226, 1)])]);
    assert_eq!(reasons(&s, &s), []);
}

#[test]
fn changed_major_minor_names_the_node_and_both_numbers() {
    let old = spec(vec![
        device("0", vec![node("/dev/dri/card1", 226, 1)]),
        device("all", vec![node("/dev/dri/card1", 226, 1)]),
    ]);
    let new = spec(vec![
        device("0", vec![node("/dev/dri/card1", 226, 2)]),
        device("all", vec![node("/dev/dri/card1", 226, 2)]),
    ]);
    assert_eq!(
        reasons(&old, &new),
        [
            (
                dev("0"),
                "/dev/dri/card1 is 226:1 on disk but 226:2 now".into()
            ),
            (
                dev("all"),
                "/dev/dri/card1 is 226:1 on disk but 226:2 now".into()
            ),
        ]
    );
}

#[test]
fn the_host_path_is_the_key_of_a_node() {
    let mut o = node("/dev/nvidia0", 195, 0);
    o.host_path = "/dev/nvidia3".into();
    let mut n = o.clone();
    n.minor = 3;
    let old = spec(vec![device("0", vec![o])]);
    let new = spec(vec![device("0", vec![n])]);
    assert_eq!(
        reasons(&old, &new),
        [(
            dev("0"),
            "/dev/nvidia3 is 195:0 on disk but 195:3 now".into()
        )]
    );
}

#[test]
fn devices_gone_and_new_in_natural_order() {
    let old = spec(vec![
        device("2", vec![node("/dev/dri/card2", 226, 2)]),
        device("10", vec![node("/dev/dri/card10", 226, 10)]),
    ]);
    let new = spec(vec![
        device("10", vec![node("/dev/dri/card10", 226, 10)]),
        device("3", vec![node("/dev/dri/card3", 226, 3)]),
    ]);
    assert_eq!(
        reasons(&old, &new),
        [
            (dev("2"), "device gone (no longer discovered)".into()),
            (dev("3"), "new device (not in the file on disk)".into()),
        ]
    );
    // With its node gone from the host, the reason says so.
    assert_eq!(
        reasons_gone(&old, &new, &["/dev/dri/card2"])[0].1,
        "device gone: /dev/dri/card2 no longer exists on the host"
    );
    let two = spec(vec![device(
        "2",
        vec![
            node("/dev/dri/card2", 226, 2),
            node("/dev/dri/renderD129", 226, 129),
        ],
    )]);
    assert_eq!(
        reasons_gone(
            &two,
            &spec(vec![]),
            &["/dev/dri/card2", "/dev/dri/renderD129"]
        ),
        [(
            dev("2"),
            "device gone: /dev/dri/card2, /dev/dri/renderD129 no longer exist on the host".into()
        )]
    );
}

#[test]
fn nodes_dropped_added_and_missing_on_the_host() {
    let old = spec(vec![device(
        "0",
        vec![
            node("/dev/dri/card1", 226, 1),
            node("/dev/dri/renderD128", 226, 128),
            node("/dev/kfd", 235, 0),
        ],
    )]);
    let new = spec(vec![device(
        "0",
        vec![
            node("/dev/dri/card1", 226, 1),
            node("/dev/accel/accel0", 261, 0),
        ],
    )]);
    assert_eq!(
        reasons_gone(&old, &new, &["/dev/kfd"]),
        [
            (
                dev("0"),
                "/dev/dri/renderD128 is no longer one of its nodes".into()
            ),
            (dev("0"), "/dev/kfd no longer exists on the host".into()),
            (dev("0"), "/dev/accel/accel0 is a new node".into()),
        ]
    );
}

#[test]
fn other_edits_give_the_first_difference() {
    let old = spec(vec![device("0", vec![node("/dev/dri/card1", 226, 1)])]);
    let mut new = old.clone();
    new.devices[0].container_edits.device_nodes[0].permissions = "rw".into();
    new.devices[0].container_edits.mounts.push(Mount {
        host_path: "/a".into(),
        container_path: "/a".into(),
        ..Mount::default()
    });
    assert_eq!(
        reasons(&old, &new),
        [(
            dev("0"),
            "content differs: containerEdits.deviceNodes[0].permissions is absent on disk but \"rw\" now"
                .into()
        )]
    );
    // A node renumbered and another edit: both are said.
    new.devices[0].container_edits.device_nodes[0].minor = 2;
    let r = reasons(&old, &new);
    assert_eq!(r.len(), 2, "{r:?}");
    assert_eq!(r[0].1, "/dev/dri/card1 is 226:1 on disk but 226:2 now");
    assert!(
        r[1].1
            .starts_with("content differs: containerEdits.deviceNodes[0].permissions")
    );
}

#[test]
fn spec_wide_changes_have_no_device() {
    let old = spec(vec![device("0", vec![node("/dev/dri/card1", 226, 1)])]);
    let mut new = old.clone();
    new.cdi_version = "0.6.0".into();
    assert_eq!(
        reasons(&old, &new),
        [(
            None,
            "content differs: cdiVersion is \"0.5.0\" on disk but \"0.6.0\" now".into()
        )]
    );
    let mut other = old.clone();
    other.kind = "example.com/npu".into();
    assert_eq!(
        reasons(&other, &old)[0],
        (
            None,
            "kind is \"example.com/npu\" on disk but \"example.com/gpu\" now".into()
        )
    );
}

#[test]
fn first_difference_paths_and_values() {
    let cases = [
        (json!({"a": 1}), json!({"a": 1}), None),
        (
            json!({"a": {"b": [1, 2]}}),
            json!({"a": {"b": [1, 3]}}),
            Some("a.b[1] is 2 on disk but 3 now"),
        ),
        (
            json!({"a": [1]}),
            json!({"a": [1, {"x": "y"}]}),
            Some("a[1] is absent on disk but {\"x\":\"y\"} now"),
        ),
        (
            json!({"a": 1, "b": 2}),
            json!({"b": 2}),
            Some("a is 1 on disk but absent now"),
        ),
        (
            json!(1),
            json!("1"),
            Some("the value is 1 on disk but \"1\" now"),
        ),
    ];
    for (a, b, want) in cases {
        assert_eq!(first_difference(&a, &b).as_deref(), want, "{a} vs {b}");
    }
    // Long values are cut.
    let long = "x".repeat(200);
    let d = first_difference(&json!({"a": long}), &json!({"a": "y"})).unwrap();
    assert!(d.starts_with("a is \"xxxx"), "{d}");
    assert!(d.contains("…"), "{d}");
    assert!(d.len() < 120, "{d}");
}

#[test]
fn text_difference_names_the_first_line() {
    assert_eq!(text_difference(b"a\nb\n", b"a\nb\n"), None);
    assert_eq!(
        text_difference(b"a\nb\nc\n", b"a\nB\nc\n").as_deref(),
        Some("line 2 is \"b\\n\" on disk but \"B\\n\" now")
    );
    assert_eq!(
        text_difference(b"a\n", b"a\nb\n").as_deref(),
        Some("line 2 is absent on disk but \"b\\n\" now")
    );
    assert_eq!(
        text_difference(b"a", b"a\n").as_deref(),
        Some("line 1 is \"a\" on disk but \"a\\n\" now")
    );
    // Invalid UTF-8 that reads the same once replaced.
    assert_eq!(
        text_difference(b"\xff", b"\xfe").as_deref(),
        Some("the bytes differ")
    );
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        ".{0,100}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(".{0,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    /// Equal values never differ, different ones always do, and nothing
    /// panics whatever the input.
    #[test]
    fn first_difference_finds_a_difference_exactly_when_there_is_one(
        a in json_value(),
        b in json_value(),
    ) {
        prop_assert_eq!(first_difference(&a, &a), None);
        prop_assert_eq!(first_difference(&a, &b).is_some(), a != b);
    }

    #[test]
    fn text_difference_is_none_only_for_equal_bytes(
        a in prop::collection::vec(any::<u8>(), 0..200),
        b in prop::collection::vec(any::<u8>(), 0..200),
    ) {
        prop_assert_eq!(text_difference(&a, &b).is_none(), a == b);
    }
}

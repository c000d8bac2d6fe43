#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use super::*;

use std::fs;

use crate::cdi::{ContainerEdits, Mount};
use crate::discover::Discovery;
use crate::generate::{self, plan_one};
use crate::generator::{Loaded, NodeSettings};
use crate::model::{HostNode, PciInfo};

// ---------------------------------------------------------------- helpers

/// A hostile string: JSON and handlebars syntax, a newline, a backslash,
/// a field injection attempt, and non-ASCII text.
const HOSTILE: &str = "a\"b\\c\nd{{e}}f}}g\", \"extra\": \"x é ✓ \u{2028} \u{1F600}";

/// A generator of kind `example.com/gpu` using `template`.
fn generator(template: &str) -> Generator {
    crate::generator::parse(
        Path::new("test.yaml"),
        &format!("name: test\nbackend: drm\nkind: example.com/gpu\ntemplate: {template}\n"),
    )
    .unwrap()
}

fn with_names(template: &str, names: &[NameStrategy]) -> Generator {
    Generator {
        names: names.to_vec(),
        ..generator(template)
    }
}

use crate::model::test_node as node;

fn link(path: &str, target: &str, node: &str) -> Link {
    Link {
        path: path.into(),
        target: target.into(),
        node: node.into(),
    }
}

/// A PCI GPU with card and render nodes and their by-path links.
fn gpu(addr: &str, card: u32) -> Device {
    let r = 128 + card;
    Device {
        backend: "drm".into(),
        id: addr.into(),
        sysfs_path: format!("/sys/devices/pci0000:00/{addr}"),
        bus: "pci".into(),
        pci: Some(PciInfo {
            address: addr.into(),
            vendor_id: "0x1002".into(),
            device_id: "0x744c".into(),
            subsystem_vendor_id: None,
            subsystem_device_id: None,
            class: "0x030000".into(),
            vendor_name: None,
            device_name: None,
            iommu_group: None,
        }),
        driver: Some("amdgpu".into()),
        numa_node: None,
        nodes: vec![
            node(
                "primary",
                &format!("card{card}"),
                &format!("/dev/dri/card{card}"),
                226,
                card,
            ),
            node(
                "render",
                &format!("renderD{r}"),
                &format!("/dev/dri/renderD{r}"),
                226,
                r,
            ),
        ],
        links: vec![
            link(
                &format!("/dev/dri/by-path/pci-{addr}-card"),
                &format!("../card{card}"),
                &format!("/dev/dri/card{card}"),
            ),
            link(
                &format!("/dev/dri/by-path/pci-{addr}-render"),
                &format!("../renderD{r}"),
                &format!("/dev/dri/renderD{r}"),
            ),
        ],
        attrs: BTreeMap::new(),
        ..Default::default()
    }
}

/// An AMD GPU that also has the shared `/dev/kfd`.
fn amd(addr: &str, card: u32) -> Device {
    let mut d = gpu(addr, card);
    d.nodes.push(node("kfd", "kfd", "/dev/kfd", 235, 0));
    d
}

/// A platform device with one card node and no links.
fn platform(name: &str, card: u32) -> Device {
    Device {
        backend: "drm".into(),
        id: format!("platform:{name}"),
        sysfs_path: format!("/sys/devices/platform/{name}"),
        bus: "platform".into(),
        pci: None,
        driver: Some("v3d".into()),
        numa_node: None,
        nodes: vec![node(
            "primary",
            &format!("card{card}"),
            &format!("/dev/dri/card{card}"),
            226,
            card,
        )],
        links: Vec::new(),
        attrs: BTreeMap::new(),
        ..Default::default()
    }
}

/// A device whose id, node name and path and link path are all `bad`.
fn hostile(bad: &str) -> Device {
    Device {
        backend: "drm".into(),
        id: bad.into(),
        sysfs_path: "/sys/devices/platform/x".into(),
        bus: "platform".into(),
        pci: None,
        driver: None,
        numa_node: None,
        nodes: vec![node("primary", bad, &format!("/dev/dri/{bad}"), 226, 3)],
        links: vec![link(
            &format!("/dev/dri/by-path/{bad}"),
            bad,
            &format!("/dev/dri/{bad}"),
        )],
        attrs: BTreeMap::new(),
        ..Default::default()
    }
}

/// A CDI device node with type and numbers.
fn dn(path: &str, major: i64, minor: i64) -> DeviceNode {
    DeviceNode {
        path: path.into(),
        node_type: "c".into(),
        major,
        minor,
        ..Default::default()
    }
}

fn card(n: i64) -> DeviceNode {
    dn(&format!("/dev/dri/card{n}"), 226, n)
}

fn render_node(n: i64) -> DeviceNode {
    dn(&format!("/dev/dri/renderD{n}"), 226, n)
}

fn kfd_node() -> DeviceNode {
    dn("/dev/kfd", 235, 0)
}

/// A bind mount of `path` at the same path, as the drm template writes it.
fn bind(path: &str) -> Mount {
    Mount {
        host_path: path.into(),
        container_path: path.into(),
        options: vec!["bind".into(), "rw".into()],
        ..Default::default()
    }
}

fn cdi_device(name: &str, nodes: Vec<DeviceNode>, mounts: Vec<Mount>) -> cdi::Device {
    cdi::Device {
        name: name.into(),
        container_edits: ContainerEdits {
            device_nodes: nodes,
            mounts,
            ..Default::default()
        },
        ..Default::default()
    }
}

fn spec(version: &str, devices: Vec<cdi::Device>) -> Spec {
    Spec {
        cdi_version: version.into(),
        kind: "example.com/gpu".into(),
        devices,
        ..Default::default()
    }
}

/// (name, member ids, nodes, links) of each context entry.
type Entry = (String, Vec<String>, Vec<DeviceNode>, Vec<Link>);

fn entries(ctx: &TemplateContext) -> Vec<Entry> {
    ctx.devices
        .iter()
        .map(|d| {
            (
                d.name.clone(),
                d.members.iter().map(|m| m.id.clone()).collect(),
                d.nodes.clone(),
                d.links.clone(),
            )
        })
        .collect()
}

/// Names of the context entries.
fn names_of(g: &Generator, devices: &[Device]) -> Vec<String> {
    context(g, devices)
        .devices
        .iter()
        .map(|d| d.name.clone())
        .collect()
}

/// Names and member ids of the context entries.
fn members_of(g: &Generator, devices: &[Device]) -> Vec<(String, Vec<String>)> {
    context(g, devices)
        .devices
        .iter()
        .map(|d| {
            (
                d.name.clone(),
                d.members.iter().map(|m| m.id.clone()).collect(),
            )
        })
        .collect()
}

fn ids(v: &[&str]) -> Vec<String> {
    v.iter().map(ToString::to_string).collect()
}

fn builtin() -> Templates {
    Templates::load(None).unwrap()
}

/// Writes `files` into a fresh directory and loads templates from it.
fn user_templates(files: &[(&str, &str)]) -> (tempfile::TempDir, Result<Templates, Error>) {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        fs::write(dir.path().join(name), text).unwrap();
    }
    let t = Templates::load(Some(dir.path()));
    (dir, t)
}

fn loaded(g: Generator) -> Loaded {
    Loaded {
        generator: g,
        source: PathBuf::from("/etc/cdigen/generators.d/test.yaml"),
    }
}

fn discovery(devices: Vec<Device>) -> Discovery {
    Discovery {
        devices,
        warnings: Vec::new(),
    }
}

// ---------------------------------------------------------------- escaping

#[test]
fn json_escape_is_the_inside_of_a_json_string() {
    assert_eq!(json_escape(""), "");
    assert_eq!(json_escape("plain"), "plain");
    assert_eq!(
        json_escape("a\"b\\c\nd\te\u{1}{{x}}"),
        "a\\\"b\\\\c\\nd\\te\\u0001{{x}}"
    );
    // Non-ASCII text stays as it is (valid inside a JSON string).
    assert_eq!(json_escape("é ✓ \u{2028}"), "é ✓ \u{2028}");
    // Whatever the input, quoting the escaped text gives back the input.
    let quoted = format!("\"{}\"", json_escape(HOSTILE));
    assert_eq!(serde_json::from_str::<String>(&quoted).unwrap(), HOSTILE);
}

// ---------------------------------------------------------------- context

#[test]
fn index_names_follow_identity_order() {
    let g = with_names("drm", &[NameStrategy::Index]);
    let devices = [gpu("0000:41:00.0", 2), gpu("0000:03:00.0", 1)];
    assert_eq!(
        members_of(&g, &devices),
        [
            ("0".to_string(), ids(&["0000:03:00.0"])),
            ("1".into(), ids(&["0000:41:00.0"])),
        ]
    );
    // Platform ids in natural order, after PCI devices.
    let devices = [
        platform("gpu10", 3),
        platform("gpu2", 2),
        gpu("0000:03:00.0", 1),
    ];
    assert_eq!(
        members_of(&g, &devices),
        [
            ("0".to_string(), ids(&["0000:03:00.0"])),
            ("1".into(), ids(&["platform:gpu2"])),
            ("2".into(), ids(&["platform:gpu10"])),
        ]
    );
}

#[test]
fn index_names_follow_pci_address_value() {
    // PCI addresses are hex: natural (decimal) order of their digit runs
    // would put 2a before 18 and 0a before 09.
    let g = with_names("drm", &[NameStrategy::Index]);
    let devices = [
        gpu("0000:2a:00.0", 2),
        gpu("0000:0a:00.0", 1),
        gpu("0000:18:00.0", 3),
        gpu("0000:09:00.0", 4),
        gpu("10000:01:00.0", 5),
        gpu("0000:18:00.1", 6),
    ];
    assert_eq!(
        members_of(&g, &devices),
        [
            ("0".to_string(), ids(&["0000:09:00.0"])),
            ("1".into(), ids(&["0000:0a:00.0"])),
            ("2".into(), ids(&["0000:18:00.0"])),
            ("3".into(), ids(&["0000:18:00.1"])),
            ("4".into(), ids(&["0000:2a:00.0"])),
            ("5".into(), ids(&["10000:01:00.0"])),
        ]
    );
}

#[test]
fn index_names_put_partitions_after_their_gpu() {
    // AMD compute partitions `<address>/xcp<k>`: GPU order, then the
    // partition's (natural: xcp2 before xcp10), before non-PCI ids.
    let g = with_names("drm", &[NameStrategy::Index]);
    let devices = [
        gpu("0000:85:00.0", 1),
        gpu("0000:05:00.0/xcp10", 2),
        platform("gpu0", 3),
        gpu("0000:05:00.0/xcp2", 4),
        gpu("0000:85:00.0/xcp1", 5),
        gpu("0000:05:00.0", 6),
        gpu("0000:2a:00.0", 7),
    ];
    assert_eq!(
        members_of(&g, &devices),
        [
            ("0".to_string(), ids(&["0000:05:00.0"])),
            ("1".into(), ids(&["0000:05:00.0/xcp2"])),
            ("2".into(), ids(&["0000:05:00.0/xcp10"])),
            ("3".into(), ids(&["0000:2a:00.0"])),
            ("4".into(), ids(&["0000:85:00.0"])),
            ("5".into(), ids(&["0000:85:00.0/xcp1"])),
            ("6".into(), ids(&["platform:gpu0"])),
        ]
    );
}

#[test]
fn pci_node_and_all_strategies() {
    let devices = [amd("0000:41:00.0", 2), amd("0000:03:00.0", 1)];
    assert_eq!(
        names_of(&with_names("drm", &[NameStrategy::Pci]), &devices),
        ["0000:03:00.0", "0000:41:00.0"]
    );
    assert_eq!(
        names_of(&with_names("drm", &[NameStrategy::Node]), &devices),
        ["card1", "card2"]
    );
    assert_eq!(
        names_of(&with_names("drm", &[NameStrategy::All]), &devices),
        ["all"]
    );
    // Every strategy in the order listed; `all` always comes last.
    assert_eq!(
        names_of(
            &with_names(
                "drm",
                &[
                    NameStrategy::All,
                    NameStrategy::Node,
                    NameStrategy::Index,
                    NameStrategy::Pci
                ]
            ),
            &devices
        ),
        [
            "card1",
            "card2",
            "0",
            "1",
            "0000:03:00.0",
            "0000:41:00.0",
            "all"
        ]
    );
    // Node names skip the shared kfd node; a device with no other node
    // falls back to its id.
    let mut kfd_first = amd("0000:03:00.0", 1);
    kfd_first.nodes.rotate_right(1);
    assert_eq!(kfd_first.nodes[0].role, "kfd");
    let mut only_kfd = amd("0000:05:00.0", 7);
    only_kfd.nodes.retain(|n| n.role == "kfd");
    assert_eq!(
        names_of(
            &with_names("drm", &[NameStrategy::Node]),
            &[kfd_first, only_kfd]
        ),
        ["card1", "0000:05:00.0"]
    );
    // No devices: no entries, not even `all`.
    assert!(context(&generator("drm"), &[]).devices.is_empty());
}

#[test]
fn context_fields() {
    let g = generator("drm");
    let devices = [gpu("0000:03:00.0", 1)];
    let ctx = context(&g, &devices);
    assert_eq!(ctx.kind, "example.com/gpu");
    assert_eq!(ctx.generator, "test");
    assert_eq!(ctx.devices[0].members, [&devices[0]]);
    // What a template sees, as JSON.
    let json = serde_json::to_value(&ctx).unwrap();
    assert_eq!(
        json["devices"][0]["nodes"][1],
        serde_json::json!({"path": "/dev/dri/renderD129", "type": "c", "major": 226, "minor": 129})
    );
    assert_eq!(
        json["devices"][0]["members"][0]["pci"]["vendor_id"],
        serde_json::json!("0x1002")
    );
    assert_eq!(
        json["devices"][0]["links"][0],
        serde_json::json!({
            "path": "/dev/dri/by-path/pci-0000:03:00.0-card",
            "target": "../card1",
            "node": "/dev/dri/card1"
        })
    );
}

#[test]
fn name_env_is_the_cdi_name_as_a_variable_suffix() {
    let g = with_names(
        "drm",
        &[NameStrategy::Pci, NameStrategy::Node, NameStrategy::All],
    );
    let devices = [gpu("0000:3b:00.2", 1)];
    let ctx = context(&g, &devices);
    assert_eq!(ctx.resource_env, "EXAMPLE_COM_GPU");
    assert_eq!(
        ctx.devices
            .iter()
            .map(|d| (d.name.as_str(), d.name_env.as_str()))
            .collect::<Vec<_>>(),
        [
            ("0000:3b:00.2", "0000_3B_00_2"),
            ("card1", "CARD1"),
            ("all", "ALL")
        ]
    );
    assert_eq!(
        serde_json::to_value(&ctx).unwrap()["devices"][0]["name_env"],
        "0000_3B_00_2"
    );
    assert_eq!(env_suffix("vdpa:0000:3b:00.2"), "VDPA_0000_3B_00_2");
}

#[test]
fn all_merges_nodes_and_links_without_duplicates() {
    let g = generator("drm");
    let devices = [amd("0000:41:00.0", 2), amd("0000:03:00.0", 1)];
    let by_path = |addr: &str, what: &str, target: &str, node: &str| {
        link(&format!("/dev/dri/by-path/pci-{addr}-{what}"), target, node)
    };
    let links1 = vec![
        by_path("0000:03:00.0", "card", "../card1", "/dev/dri/card1"),
        by_path(
            "0000:03:00.0",
            "render",
            "../renderD129",
            "/dev/dri/renderD129",
        ),
    ];
    let links2 = vec![
        by_path("0000:41:00.0", "card", "../card2", "/dev/dri/card2"),
        by_path(
            "0000:41:00.0",
            "render",
            "../renderD130",
            "/dev/dri/renderD130",
        ),
    ];
    assert_eq!(
        entries(&context(&g, &devices)),
        [
            (
                "0".to_string(),
                ids(&["0000:03:00.0"]),
                vec![card(1), render_node(129), kfd_node()],
                links1.clone(),
            ),
            (
                "1".into(),
                ids(&["0000:41:00.0"]),
                vec![card(2), render_node(130), kfd_node()],
                links2.clone(),
            ),
            (
                "all".into(),
                ids(&["0000:03:00.0", "0000:41:00.0"]),
                vec![
                    card(1),
                    render_node(129),
                    kfd_node(),
                    card(2),
                    render_node(130)
                ],
                [links1, links2].concat(),
            ),
        ]
    );
    // The same link on two devices appears once in `all`.
    let mut a = platform("a", 1);
    let mut b = platform("b", 2);
    let shared = link("/dev/dri/by-path/shared", "../card1", "/dev/dri/card1");
    a.links.push(shared.clone());
    b.links.push(shared.clone());
    let g = with_names("drm", &[NameStrategy::All]);
    let devices = [a, b];
    assert_eq!(context(&g, &devices).devices[0].links, [shared]);
}

#[test]
fn node_settings() {
    let mut d = gpu("0000:03:00.0", 1);
    d.nodes[0].host = Some(HostNode {
        mode: 0o660,
        uid: 0,
        gid: 44,
    });
    let devices = [d];
    let mut g = with_names("drm", &[NameStrategy::Index]);

    // Default: numbers, no owner.
    assert_eq!(
        context(&g, &devices).devices[0].nodes,
        [card(1), render_node(129)]
    );

    // Owner: only where the host node is known.
    g.device_nodes = NodeSettings {
        numbers: true,
        owner: true,
    };
    assert_eq!(
        context(&g, &devices).devices[0].nodes,
        [
            DeviceNode {
                file_mode: Some(0o660),
                uid: Some(0),
                gid: Some(44),
                ..card(1)
            },
            render_node(129),
        ]
    );

    // No numbers: path only (the runtime stats the host node).
    g.device_nodes = NodeSettings {
        numbers: false,
        owner: false,
    };
    let path_only = |p: &str| DeviceNode {
        path: p.into(),
        ..Default::default()
    };
    assert_eq!(
        context(&g, &devices).devices[0].nodes,
        [
            path_only("/dev/dri/card1"),
            path_only("/dev/dri/renderD129")
        ]
    );

    g.device_nodes = NodeSettings {
        numbers: false,
        owner: true,
    };
    assert_eq!(
        context(&g, &devices).devices[0].nodes,
        [
            DeviceNode {
                file_mode: Some(0o660),
                uid: Some(0),
                gid: Some(44),
                ..path_only("/dev/dri/card1")
            },
            path_only("/dev/dri/renderD129"),
        ]
    );
}

#[test]
fn links_none_drops_links() {
    let mut g = generator("drm");
    g.links = LinkMode::None;
    let devices = [gpu("0000:03:00.0", 1), gpu("0000:41:00.0", 2)];
    let ctx = context(&g, &devices);
    assert_eq!(ctx.devices.len(), 3);
    for d in &ctx.devices {
        assert_eq!(d.links, [], "{}", d.name);
    }
}

// ---------------------------------------------------------------- built-in drm template

#[test]
fn drm_template_one_device() {
    let t = builtin();
    let g = generator("drm");
    assert_eq!(
        t.render(&g, &[gpu("0000:03:00.0", 1)]).unwrap(),
        spec(
            "0.3.0",
            vec![
                cdi_device(
                    "0",
                    vec![card(1), render_node(129)],
                    vec![
                        bind("/dev/dri/by-path/pci-0000:03:00.0-card"),
                        bind("/dev/dri/by-path/pci-0000:03:00.0-render"),
                    ]
                ),
                cdi_device(
                    "all",
                    vec![card(1), render_node(129)],
                    vec![
                        bind("/dev/dri/by-path/pci-0000:03:00.0-card"),
                        bind("/dev/dri/by-path/pci-0000:03:00.0-render"),
                    ]
                ),
            ]
        )
    );
}

#[test]
fn drm_template_several_devices() {
    let t = builtin();
    let g = with_names("drm", &[NameStrategy::Node, NameStrategy::All]);
    let devices = [
        amd("0000:41:00.0", 2),
        amd("0000:03:00.0", 1),
        platform("gpu", 0),
    ];
    let m = |addr: &str, what: &str| bind(&format!("/dev/dri/by-path/pci-{addr}-{what}"));
    assert_eq!(
        t.render(&g, &devices).unwrap(),
        spec(
            "0.3.0",
            vec![
                cdi_device(
                    "card1",
                    vec![card(1), render_node(129), kfd_node()],
                    vec![m("0000:03:00.0", "card"), m("0000:03:00.0", "render")]
                ),
                cdi_device(
                    "card2",
                    vec![card(2), render_node(130), kfd_node()],
                    vec![m("0000:41:00.0", "card"), m("0000:41:00.0", "render")]
                ),
                // No links: no mounts key at all.
                cdi_device("card0", vec![dn("/dev/dri/card0", 226, 0)], vec![]),
                cdi_device(
                    "all",
                    vec![
                        card(1),
                        render_node(129),
                        kfd_node(),
                        card(2),
                        render_node(130),
                        dn("/dev/dri/card0", 226, 0),
                    ],
                    vec![
                        m("0000:03:00.0", "card"),
                        m("0000:03:00.0", "render"),
                        m("0000:41:00.0", "card"),
                        m("0000:41:00.0", "render"),
                    ]
                ),
            ]
        )
    );
}

#[test]
fn drm_template_with_links_none_and_owner() {
    let t = builtin();
    let mut g = with_names("drm", &[NameStrategy::Index]);
    g.links = LinkMode::None;
    g.device_nodes.owner = true;
    let mut d = gpu("0000:03:00.0", 1);
    d.nodes[1].host = Some(HostNode {
        mode: 0o666,
        uid: 0,
        gid: 105,
    });
    assert_eq!(
        t.render(&g, &[d]).unwrap(),
        spec(
            "0.3.0",
            vec![cdi_device(
                "0",
                vec![
                    card(1),
                    DeviceNode {
                        file_mode: Some(0o666),
                        uid: Some(0),
                        gid: Some(105),
                        ..render_node(129)
                    }
                ],
                vec![]
            )]
        )
    );
}

// ---------------------------------------------------------------- hostile values

#[test]
fn hostile_values_are_data_in_the_drm_template() {
    let t = builtin();
    let g = with_names("drm", &[NameStrategy::Pci, NameStrategy::All]);
    let node_path = format!("/dev/dri/{HOSTILE}");
    let link_path = format!("/dev/dri/by-path/{HOSTILE}");
    let edits = || (vec![dn(&node_path, 226, 3)], vec![bind(&link_path)]);
    let (n, m) = edits();
    let (n2, m2) = edits();
    // Rendered and parsed back with exactly the expected structure: the
    // value is data everywhere. As a device name it is refused before it
    // reaches the template: the device gets no name from `pci`, with a
    // warning, and is still in `all`.
    assert_eq!(
        t.render(&g, &[hostile(HOSTILE)]).unwrap(),
        spec("0.3.0", vec![cdi_device("all", n, m)])
    );
    assert_eq!(
        context(&g, &[hostile(HOSTILE)]).warnings,
        [format!(
            "{HOSTILE}: invalid device name {HOSTILE:?}: must end with an ASCII letter or \
             digit, so no name from `\"pci\"`"
        )]
    );
    let planned = plan_one(&loaded(g), &t, &discovery(vec![hostile(HOSTILE)]), None).unwrap();
    assert_eq!(
        planned.spec.unwrap().devices,
        spec("0.5.0", vec![cdi_device("all", n2, m2)]).devices
    );
}

/// The built-in drm template as it was written to contract 1.
const DRM_CONTRACT_1: &str = include_str!("../../tests/data/templates-contract-1/drm.json.hbs");

#[test]
fn hostile_values_one_at_a_time() {
    // The built-in drm template (contract 2), and the same template
    // written to contract 1 (the whole spec at once).
    let t = builtin();
    assert_eq!(t.contract("drm"), Some(2));
    let (_dir, whole) = user_templates(&[("drm.json.hbs", DRM_CONTRACT_1)]);
    let whole = whole.unwrap();
    assert_eq!(whole.contract("drm"), Some(1));
    let g = with_names("drm", &[NameStrategy::Index]);
    for bad in [
        "\"",
        "\\",
        "\n",
        "{{",
        "}}",
        "{{kind}}",
        "\", \"extra\": \"x",
        "\"}], \"extra\": [{\"",
        "é✓\u{0}\u{7f}\u{2028}",
    ] {
        let text = whole
            .registry
            .render("drm", &context(&g, &[hostile(bad)]))
            .unwrap();
        // Valid JSON whatever the value, with no field but the template's.
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v.as_object().unwrap().keys().collect::<Vec<_>>(),
            ["cdiVersion", "devices", "kind"],
            "{bad:?}"
        );
        // Contract 2: the same of each text as it is written, the
        // spec-level part's and the device's.
        let devices = [hostile(bad)];
        let ctx = context(&g, &devices);
        let mut written = Vec::new();
        t.texts("drm", Path::new("drm"), &ctx, |_, text| {
            let v: serde_json::Value = serde_json::from_str(text).unwrap();
            written.push(v);
            Ok(())
        })
        .unwrap();
        let keys =
            |v: &serde_json::Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(
            written.iter().map(keys).collect::<Vec<_>>(),
            [vec!["cdiVersion", "kind"], vec!["containerEdits", "name"]],
            "{bad:?}"
        );
        assert_eq!(
            keys(&written[1]["containerEdits"]),
            ["deviceNodes", "mounts"],
            "{bad:?}"
        );
        for t in [&t, &whole] {
            assert_eq!(
                t.render(&g, &[hostile(bad)]).unwrap(),
                spec(
                    "0.3.0",
                    vec![cdi_device(
                        "0",
                        vec![dn(&format!("/dev/dri/{bad}"), 226, 3)],
                        vec![bind(&format!("/dev/dri/by-path/{bad}"))]
                    )]
                ),
                "{bad:?}"
            );
        }
    }
}

#[test]
fn hostile_values_in_a_plain_mustache_template() {
    // `"{{name}}"` inside quotes: the escape fn keeps it one JSON string.
    let (_dir, t) = user_templates(&[(
        "plain.json.hbs",
        r#"{"cdiVersion": "0.3.0", "kind": "{{kind}}", "devices": [
{{#each devices}}{{#unless @first}},{{/unless}}{"name": "{{name}}",
 "containerEdits": {"env": [{{#each members}}"ID={{id}}"{{/each}}],
  "deviceNodes": [{{#each nodes}}{"path": "{{path}}"}{{/each}}]}}{{/each}}]}"#,
    )]);
    let t = t.unwrap();
    let g = with_names("plain", &[NameStrategy::Index]);
    assert_eq!(
        t.render(&g, &[hostile(HOSTILE)]).unwrap(),
        Spec {
            cdi_version: "0.3.0".into(),
            kind: "example.com/gpu".into(),
            devices: vec![cdi::Device {
                name: "0".into(),
                container_edits: ContainerEdits {
                    env: vec![format!("ID={HOSTILE}")],
                    device_nodes: vec![DeviceNode {
                        path: format!("/dev/dri/{HOSTILE}"),
                        ..Default::default()
                    }],
                    ..Default::default()
                },
                ..Default::default()
            }],
            ..Default::default()
        }
    );
}

/// Every spelling of unescaped output the handlebars grammar allows, at
/// every depth, with where handlebars places it (line, column).
const UNESCAPED_SPELLINGS: &[(&str, usize, usize)] = &[
    // triple-stash, with every whitespace-control and space variant
    ("{{{name}}}", 1, 1),
    ("{{{~name}}}", 1, 1),
    ("{{{name~}}}", 1, 1),
    ("{{{~name~}}}", 1, 1),
    ("{{{ name }}}", 1, 1),
    ("{{{\nname\n}}}", 1, 1),
    ("{{~{name}~}}", 1, 1),
    ("{{~{name}}}", 1, 1),
    ("{{{name}~}}", 1, 1),
    ("{{ {name} }}", 1, 1),
    ("{{~ { name } ~}}", 1, 1),
    ("{{{json name}}}", 1, 1),
    ("{{ { json name } }}", 1, 1),
    ("{{{lookup this \"name\"}}}", 1, 1),
    ("{{{name}}}}", 1, 1),
    // an escaped backslash before it: the expression is live
    ("\\\\{{{name}}}", 1, 3),
    // `&`
    ("{{&name}}", 1, 1),
    ("{{& name}}", 1, 1),
    ("{{~&name}}", 1, 1),
    ("{{&name~}}", 1, 1),
    ("{{~& name ~}}", 1, 1),
    // inside blocks, their `else` branches and else chains
    ("{{#each devices}}{{{name}}}{{/each}}", 1, 18),
    ("{{#each devices as |d|}}\n  {{&d.name}}{{/each}}", 2, 3),
    ("{{#if kind}}x{{else}}{{{kind}}}{{/if}}", 1, 22),
    ("{{#if kind}}x{{^}}{{{kind}}}{{/if}}", 1, 19),
    ("{{#if kind}}x{{else if generator}}{{~&kind}}{{/if}}", 1, 35),
    ("{{#unless kind}}{{else}}{{{kind}}}{{/unless}}", 1, 25),
    (
        "{{#with devices}}{{#each this}}{{{name}}}{{/each}}{{/with}}",
        1,
        32,
    ),
    // inline partials and partial blocks
    ("{{#*inline \"p\"}}{{{kind}}}{{/inline}}{{> p}}", 1, 17),
    (
        "{{#*inline \"p\"}}{{#if kind}}{{else}}{{~& kind}}{{/if}}{{/inline}}",
        1,
        37,
    ),
    ("{{#> drm}}{{{kind}}}{{/drm}}", 1, 11),
    // after a raw block, outside it
    ("{{{{raw}}}}{{x}}{{{{/raw}}}}{{{kind}}}", 1, 29),
];

#[test]
fn every_unescaped_spelling_is_refused_at_load() {
    // Unescaped output would let a sysfs value write JSON structure. The
    // parsed template is checked, so no spelling gets past.
    for (raw, line, col) in UNESCAPED_SPELLINGS {
        let (dir, t) = user_templates(&[("raw.json.hbs", raw)]);
        assert_eq!(
            t.map(|_| ()).unwrap_err().to_string(),
            format!(
                "{}: line {line}, col {col}: unescaped output ({{{{{{value}}}}}} or \
                 {{{{&value}}}}, in any spelling) is not allowed: use {{{{json value}}}} or \
                 \"{{{{value}}}}\", which escape values as JSON",
                dir.path().join("raw.json.hbs").display()
            ),
            "{raw:?}"
        );
        // The first one is named.
        let (_dir, t) = user_templates(&[("raw.json.hbs", &format!("{raw}\n{{{{{{kind}}}}}}"))]);
        assert!(
            t.map(|_| ())
                .unwrap_err()
                .to_string()
                .contains(&format!(": line {line}, col {col}: ")),
            "{raw:?}"
        );
    }
}

#[test]
fn unescaped_outputs_finds_every_one_in_order() {
    let t = handlebars::Template::compile(
        "{{{a}}}{{#each b}}{{&c}}{{else}}{{{d}}}{{/each}}\n{{#*inline \"p\"}}{{{e}}}{{/inline}}",
    )
    .unwrap();
    let at = |line, column| Position { line, column };
    assert_eq!(
        unescaped_outputs(&t),
        [at(1, 1), at(1, 19), at(1, 33), at(2, 17)]
    );
}

#[test]
fn literal_braces_and_escaped_output_load() {
    // Raw blocks, an escaped `\{{{`, comments and subexpressions write no
    // unescaped value: raw blocks and `\{{{` are literal template text.
    for ok in [
        "{{{{raw}}}}{{{kind}}}{{{{/raw}}}}",
        "{{{{raw}}}}{{&kind}}{{{{/raw}}}}",
        "{{{{each devices}}}}{{{name}}}{{{{/each}}}}",
        "\\{{{kind}}}",
        "\\{{&kind}}",
        "{{!-- {{{kind}}} {{&kind}} --}}",
        "{{! {{&kind}} }}",
        "{{json (lookup this \"kind\")}}",
        "{{kind}} {{~kind~}} {{ kind }} {{json kind}}",
        "{{#if kind}}{{else}}{{kind}}{{/if}}",
    ] {
        let (_dir, t) = user_templates(&[("ok.json.hbs", ok)]);
        assert!(t.is_ok(), "{ok:?}: {:?}", t.err());
    }
    // What a raw block and an escaped triple-stash compile to: text.
    let (_dir, t) = user_templates(&[(
        "lit.json.hbs",
        "{\"cdiVersion\": \"0.3.0\", \"kind\": {{json kind}}, \"devices\": [{\"name\": \"a\", \
         \"containerEdits\": {\"env\": [\"A={{{{raw}}}}{{{kind}}}{{&kind}}{{{{/raw}}}}\", \
         \"B=\\{{{kind}}}\"]}}]}",
    )]);
    let spec = t
        .unwrap()
        .render(
            &with_names("lit", &[NameStrategy::Pci]),
            &[gpu("0000:03:00.0", 1)],
        )
        .unwrap();
    assert_eq!(
        spec.devices[0].container_edits.env,
        ["A={{{kind}}}{{&kind}}", "B={{{kind}}}"]
    );
}

#[test]
fn rendered_kind_must_be_the_generators() {
    let (dir, t) = user_templates(&[(
        "other.json.hbs",
        "{\"cdiVersion\": \"0.3.0\", \"kind\": \"other.com/gpu\", \"devices\": [{\"name\": \"a\", \
         \"containerEdits\": {\"env\": [\"A=b\"]}}]}",
    )]);
    let t = t.unwrap();
    let g = with_names("other", &[NameStrategy::Pci]);
    assert_eq!(
        t.render(&g, &[hostile("x")]).unwrap_err().to_string(),
        format!(
            "{}: rendered output is not a valid spec document: kind is \"other.com/gpu\", but \
             generator {:?} has kind {:?} (use {{{{json kind}}}})",
            dir.path().join("other.json.hbs").display(),
            g.name,
            g.kind
        )
    );
}

// ---------------------------------------------------------------- strict mode and user templates

#[test]
fn missing_variable_names_the_template_file() {
    let (dir, t) = user_templates(&[
        ("helper.json.hbs", "{\"kind\": {{json nope}}}"),
        ("plain.json.hbs", "{\"kind\": \"{{nope}}\"}"),
        (
            "nested.json.hbs",
            "{{#each devices}}{{members.0.nope}}{{/each}}",
        ),
    ]);
    let t = t.unwrap();
    let devices = [gpu("0000:03:00.0", 1)];
    let err = |name: &str| {
        t.render(&generator(name), &devices)
            .unwrap_err()
            .to_string()
    };
    let file = |name: &str| dir.path().join(format!("{name}.json.hbs"));
    assert_eq!(
        err("helper"),
        format!(
            "{}: Error rendering \"helper\" line 1, col 10: Failed to access variable in strict \
             mode Some(\"nope\")",
            file("helper").display()
        )
    );
    assert_eq!(
        err("plain"),
        format!(
            "{}: Error rendering \"plain\" line 1, col 11: Failed to access variable in strict \
             mode Some(\"nope\")",
            file("plain").display()
        )
    );
    assert_eq!(
        err("nested"),
        format!(
            "{}: Error rendering \"nested\" line 1, col 18: Failed to access variable in strict \
             mode Some(\"members.0.nope\")",
            file("nested").display()
        )
    );
}

#[test]
fn syntax_error_fails_at_load_naming_the_file() {
    let (dir, t) = user_templates(&[
        ("a-fine.json.hbs", "{}"),
        ("broken.json.hbs", "{\"kind\": {{json kind }"),
    ]);
    assert_eq!(
        t.unwrap_err().to_string(),
        format!(
            "{}: Template error: invalid handlebars syntax: expected identifier, \
             helper_parameter, or trailing_tilde_to_omit_whitespace\n    --> Template error in \
             \"broken\":1:22\n     |\n   0 | {{\"kind\": {{{{json kind }}\n     \
             |----------------------\n     |\n     = reason: invalid handlebars syntax: expected \
             identifier, helper_parameter, or trailing_tilde_to_omit_whitespace\n",
            dir.path().join("broken.json.hbs").display()
        )
    );
    // An unclosed block.
    let (dir, t) = user_templates(&[("open.json.hbs", "{{#each devices}}")]);
    let msg = t.unwrap_err().to_string();
    let prefix = format!(
        "{}: Template error: ",
        dir.path().join("open.json.hbs").display()
    );
    assert!(msg.starts_with(&prefix), "{msg}");
}

#[test]
fn unknown_field_fails_in_parse_naming_the_file() {
    let (dir, t) = user_templates(&[(
        "bogus.json.hbs",
        "{\"cdiVersion\": \"0.3.0\", \"kind\": {{json kind}}, \"bogus\": 1, \"devices\": []}",
    )]);
    assert_eq!(
        t.unwrap()
            .render(&generator("bogus"), &[gpu("0000:03:00.0", 1)])
            .unwrap_err()
            .to_string(),
        format!(
            "{}: rendered output is not a valid spec document: invalid JSON: unknown field \
             \"bogus\", expected one of cdiVersion, kind, annotations, devices, containerEdits",
            dir.path().join("bogus.json.hbs").display()
        )
    );
    // Output that is not JSON at all.
    let (dir, t) = user_templates(&[("yaml.json.hbs", "kind: {{kind}}\n")]);
    assert_eq!(
        t.unwrap()
            .render(&generator("yaml"), &[gpu("0000:03:00.0", 1)])
            .unwrap_err()
            .to_string(),
        format!(
            "{}: rendered output is not a valid spec document: invalid JSON: expected value at \
             line 1 column 1",
            dir.path().join("yaml.json.hbs").display()
        )
    );
}

#[test]
fn user_template_replaces_builtin() {
    let (dir, t) = user_templates(&[
        (
            "drm.json.hbs",
            "{\"cdiVersion\": \"0.3.0\", \"kind\": {{json kind}}, \"devices\": [{\"name\": \
             \"mine\", \"containerEdits\": {\"env\": [\"MINE=1\"]}}]}",
        ),
        ("notes.txt", "not a template {{"),
        ("other.hbs", "not a template {{"),
    ]);
    let t = t.unwrap();
    assert_eq!(
        t.names(),
        ["drm", "generic", "nvidia", "rdma", "sriov", "vdpa", "vfio"]
    );
    assert_eq!(
        format!("{t:?}"),
        format!(
            "Templates {{ sources: {{\"drm\": {:?}, \"generic\": \"builtin:templates/generic.json.hbs\", \"nvidia\": \"builtin:templates/nvidia.json.hbs\", \"rdma\": \"builtin:templates/rdma.json.hbs\", \
             \"sriov\": \"builtin:templates/sriov.json.hbs\", \"vdpa\": \"builtin:templates/vdpa.json.hbs\", \"vfio\": \"builtin:templates/vfio.json.hbs\"}} }}",
            dir.path().join("drm.json.hbs")
        )
    );
    assert_eq!(
        t.render(&generator("drm"), &[gpu("0000:03:00.0", 1)])
            .unwrap(),
        Spec {
            cdi_version: "0.3.0".into(),
            kind: "example.com/gpu".into(),
            devices: vec![cdi::Device {
                name: "mine".into(),
                container_edits: ContainerEdits {
                    env: vec!["MINE=1".into()],
                    ..Default::default()
                },
                ..Default::default()
            }],
            ..Default::default()
        }
    );
    // The built-in set alone.
    assert_eq!(
        builtin().names(),
        ["drm", "generic", "nvidia", "rdma", "sriov", "vdpa", "vfio"]
    );
    assert_eq!(
        format!("{:?}", builtin()),
        "Templates { sources: {\"drm\": \"builtin:templates/drm.json.hbs\", \"generic\": \
         \"builtin:templates/generic.json.hbs\", \"nvidia\": \
         \"builtin:templates/nvidia.json.hbs\", \"rdma\": \
         \"builtin:templates/rdma.json.hbs\", \"sriov\": \
         \"builtin:templates/sriov.json.hbs\", \"vdpa\": \"builtin:templates/vdpa.json.hbs\", \
         \"vfio\": \"builtin:templates/vfio.json.hbs\"} }"
    );
}

#[test]
fn missing_template() {
    let g = generator("nothere");
    assert_eq!(
        builtin()
            .render(&g, &[gpu("0000:03:00.0", 1)])
            .unwrap_err()
            .to_string(),
        "generator \"test\": no template named \"nothere\" (known: drm, generic, nvidia, rdma, sriov, vdpa, vfio)"
    );
    let (_dir, t) = user_templates(&[("zz.json.hbs", "{}"), ("aa.json.hbs", "{}")]);
    assert_eq!(
        t.unwrap()
            .render(&g, &[gpu("0000:03:00.0", 1)])
            .unwrap_err()
            .to_string(),
        "generator \"test\": no template named \"nothere\" (known: aa, drm, generic, nvidia, rdma, sriov, vdpa, vfio, zz)"
    );
}

#[test]
fn missing_template_dir_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    assert_eq!(
        Templates::load(Some(&missing)).unwrap_err().to_string(),
        format!("cannot read {}", missing.display())
    );
}

// ---------------------------------------------------------------- plan_one

#[test]
fn plan_sets_the_minimum_version() {
    let t = builtin();
    let found = discovery(vec![gpu("0000:03:00.0", 1)]);
    // Digit names need 0.5.0.
    let p = plan_one(&loaded(generator("drm")), &t, &found, None).unwrap();
    let devices = || {
        let mounts = vec![
            bind("/dev/dri/by-path/pci-0000:03:00.0-card"),
            bind("/dev/dri/by-path/pci-0000:03:00.0-render"),
        ];
        vec![
            cdi_device("0", vec![card(1), render_node(129)], mounts.clone()),
            cdi_device("all", vec![card(1), render_node(129)], mounts),
        ]
    };
    let want = spec("0.5.0", devices());
    assert_eq!(p.generator, "test");
    assert_eq!(p.file, "example.com-gpu.yaml");
    assert_eq!(p.spec.as_ref(), Some(&want));
    assert_eq!(
        p.bytes,
        cdi::codec::to_bytes(&want, cdi::Format::Yaml).unwrap()
    );
    assert_eq!(p.names(), ["example.com/gpu=0", "example.com/gpu=all"]);

    // Letter names: the baseline.
    let g = with_names("drm", &[NameStrategy::Node]);
    let p = plan_one(&loaded(g), &t, &found, None).unwrap();
    assert_eq!(p.spec.unwrap().cdi_version, "0.3.0");

    // A format override changes the file and the bytes.
    let p = plan_one(
        &loaded(generator("drm")),
        &t,
        &found,
        Some(cdi::Format::Json),
    )
    .unwrap();
    assert_eq!(p.file, "example.com-gpu.json");
    assert_eq!(
        p.bytes,
        cdi::codec::to_bytes(&want, cdi::Format::Json).unwrap()
    );
}

#[test]
fn plan_uses_a_pinned_version() {
    let t = builtin();
    let found = discovery(vec![gpu("0000:03:00.0", 1)]);
    for (pin, want) in [("0.6.0", "0.6.0"), ("v1.1.0", "1.1.0"), ("0.5.0", "0.5.0")] {
        let mut g = generator("drm");
        g.cdi_version = Some(pin.into());
        let p = plan_one(&loaded(g), &t, &found, None).unwrap();
        assert_eq!(p.spec.unwrap().cdi_version, want);
    }
    // Pinned below what the content needs: refused.
    let mut g = generator("drm");
    g.cdi_version = Some("0.3.0".into());
    assert_eq!(
        plan_one(&loaded(g), &t, &found, None)
            .unwrap_err()
            .to_string(),
        "generator \"test\": the spec for example.com-gpu.yaml is invalid, not writing it: \
         cdiVersion: is 0.3.0, but the content needs at least 0.5.0 (device name \"0\" starts \
         with a digit)"
    );
}

#[test]
fn plan_without_selected_devices() {
    let t = builtin();
    let mut g = generator("drm");
    g.select.vendor_ids = vec!["0x8086".into()];
    // Other backends' devices and unselected ones do not count.
    let mut other_backend = gpu("0000:05:00.0", 3);
    other_backend.backend = "nvidia".into();
    for found in [
        discovery(vec![]),
        discovery(vec![gpu("0000:03:00.0", 1), other_backend]),
    ] {
        let p = plan_one(&loaded(g.clone()), &t, &found, None).unwrap();
        assert_eq!(p.generator, "test");
        assert_eq!(p.file, "example.com-gpu.yaml");
        assert_eq!(p.spec, None);
        assert_eq!(p.bytes, b"");
        assert_eq!(p.names(), Vec::<String>::new());
    }
}

#[test]
fn plan_applies_selection_before_rendering() {
    let t = builtin();
    let mut g = generator("drm");
    g.select.node_roles = vec!["render".into()];
    g.names = vec![NameStrategy::Index];
    let found = discovery(vec![amd("0000:03:00.0", 1)]);
    let p = plan_one(&loaded(g), &t, &found, None).unwrap();
    assert_eq!(
        p.spec.unwrap(),
        spec(
            "0.5.0",
            vec![cdi_device(
                "0",
                vec![render_node(129)],
                vec![bind("/dev/dri/by-path/pci-0000:03:00.0-render")]
            )]
        )
    );
}

#[test]
fn plan_refuses_an_invalid_result() {
    let (_dir, t) = user_templates(&[
        (
            "empty.json.hbs",
            "{\"cdiVersion\": \"0.3.0\", \"kind\": {{json kind}}, \"devices\": [{\"name\": \"\", \
             \"containerEdits\": {\"env\": [\"A=b\"]}}]}",
        ),
        (
            "bad.json.hbs",
            "{\"cdiVersion\": \"0.3.0\", \"kind\": {{json kind}}, \"devices\": [{\"name\": \"a\"}, \
             {\"name\": \"a\", \"containerEdits\": {\"env\": [\"noequals\"]}}]}",
        ),
    ]);
    let t = t.unwrap();
    let found = discovery(vec![gpu("0000:03:00.0", 1)]);
    let err = plan_one(&loaded(generator("empty")), &t, &found, None).unwrap_err();
    assert!(
        matches!(&err, generate::Error::Invalid { problems, .. } if problems.len() == 1),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "generator \"test\": the spec for example.com-gpu.yaml is invalid, not writing it: \
         devices[0]: name: invalid device name: empty name"
    );
    // Every problem is listed.
    let err = plan_one(&loaded(generator("bad")), &t, &found, None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "generator \"test\": the spec for example.com-gpu.yaml is invalid, not writing it: \
         device \"a\": containerEdits: must not be empty (a device needs at least \
         one edit); device \"a\": containerEdits.env[0]: \"noequals\" is not NAME=value; device \
         \"a\": defined 2 times in this spec (device names must be unique)"
    );
}

#[test]
fn plan_render_error_names_the_definition() {
    let (dir, t) = user_templates(&[("miss.json.hbs", "{{nope}}")]);
    let t = t.unwrap();
    let found = discovery(vec![gpu("0000:03:00.0", 1)]);
    let err = plan_one(&loaded(generator("miss")), &t, &found, None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "generator \"test\" (/etc/cdigen/generators.d/test.yaml)"
    );
    let generate::Error::Render { source, .. } = err else {
        panic!("{err:?}")
    };
    assert_eq!(
        source.to_string(),
        format!(
            "{}: Error rendering \"miss\" line 1, col 1: Failed to access variable in strict \
             mode Some(\"nope\")",
            dir.path().join("miss.json.hbs").display()
        )
    );
}

/// A template whose devices each set `SAME=1` and the variable `var` (a
/// template itself) to their PCI addresses.
fn env_template(var: &str) -> String {
    format!(
        "{{\"cdiVersion\": \"0.3.0\", \"kind\": {{{{json kind}}}}, \"devices\": [\
         {{{{#each devices}}}}{{{{#unless @first}}}},{{{{/unless}}}}{{\"name\": {{{{json name}}}}, \
         \"containerEdits\": {{\"env\": [\"SAME=1\", \"{var}={{{{pci_addresses}}}}\"]}}}}\
         {{{{/each}}}}]}}"
    )
}

#[test]
fn plan_refuses_devices_that_set_one_variable_to_different_values() {
    let (_dir, t) = user_templates(&[
        ("shared.json.hbs", &env_template("X")),
        ("per-device.json.hbs", &env_template("X_{{name_env}}")),
    ]);
    let t = t.unwrap();
    let found = discovery(vec![
        gpu("0000:04:00.0", 2),
        gpu("0000:03:00.0", 1),
        gpu("0000:05:00.0", 3),
    ]);
    let names = [NameStrategy::Pci, NameStrategy::All];
    let err = plan_one(&loaded(with_names("shared", &names)), &t, &found, None).unwrap_err();
    assert!(
        matches!(&err, generate::Error::EnvCollision { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "generator \"test\": devices \"0000:03:00.0\" and \"0000:04:00.0\" of \
         example.com-gpu.yaml both set \"X\" (to \"0000:03:00.0\" and \"0000:04:00.0\"): CDI \
         runtimes merge the env of all injected devices by variable name, so a container given \
         both would see only one of the values; name the variable per device (append \
         {{name_env}} to it in the template)"
    );
    // Named per device, nothing collides; `SAME` has one value everywhere,
    // and `all` gets its own name too.
    let planned = plan_one(&loaded(with_names("per-device", &names)), &t, &found, None).unwrap();
    assert_eq!(
        planned
            .spec
            .unwrap()
            .devices
            .iter()
            .map(|d| (d.name.as_str(), d.container_edits.env.clone()))
            .collect::<Vec<_>>(),
        [
            (
                "0000:03:00.0",
                strings(&["SAME=1", "X_0000_03_00_0=0000:03:00.0"])
            ),
            (
                "0000:04:00.0",
                strings(&["SAME=1", "X_0000_04_00_0=0000:04:00.0"])
            ),
            (
                "0000:05:00.0",
                strings(&["SAME=1", "X_0000_05_00_0=0000:05:00.0"])
            ),
            (
                "all",
                strings(&["SAME=1", "X_ALL=0000:03:00.0,0000:04:00.0,0000:05:00.0"])
            ),
        ]
    );
    // One device and `all`: `all` is not compared with the others.
    let one = discovery(vec![gpu("0000:03:00.0", 1)]);
    let mut only = with_names("shared", &names);
    assert!(plan_one(&loaded(only.clone()), &t, &one, None).is_ok());
    // Two names for one device that set one value: no collision either.
    only.names = vec![NameStrategy::Pci, NameStrategy::Node];
    assert!(plan_one(&loaded(only), &t, &one, None).is_ok());
}

#[test]
fn env_collision_compares_each_devices_effective_env() {
    let with_env = |name: &str, env: &[&str]| cdi::Device {
        name: name.into(),
        container_edits: ContainerEdits {
            env: strings(env),
            ..Default::default()
        },
        ..Default::default()
    };
    let found = |devices| {
        let s = spec("0.3.0", devices);
        crate::cdi::validate::env_collision(&s).map(|c| {
            format!(
                "{}: {}={} / {}={}",
                c.variable, c.first, c.first_value, c.second, c.second_value
            )
        })
    };
    // The first collision in spec order, not a pair that agrees.
    assert_eq!(
        found(vec![
            with_env("a", &["X=1", "Y=2"]),
            with_env("b", &["X=1", "Z=3"]),
            with_env("c", &["Z=3", "Y=4"]),
        ]),
        Some("Y: a=2 / c=4".into())
    );
    // An empty value is a value; `X=` and `X=1` differ.
    assert_eq!(
        found(vec![with_env("a", &["X="]), with_env("b", &["X=1"])]),
        Some("X: a= / b=1".into())
    );
    // Within a device the last entry wins, as at injection.
    assert_eq!(
        found(vec![
            with_env("a", &["X=1", "X=2"]),
            with_env("b", &["X=2"])
        ]),
        None
    );
    // `all` stands for every device: not compared.
    assert_eq!(
        found(vec![with_env("a", &["X=1"]), with_env("all", &["X=1,2"])]),
        None
    );
    // `VFIO_GROUP_<n>_DEVICES`: one name, one value.
    assert_eq!(
        found(vec![
            with_env("a", &["VFIO_GROUP_3_DEVICES=a,b"]),
            with_env("b", &["VFIO_GROUP_3_DEVICES=a,b"]),
        ]),
        None
    );
}

// ---------------------------------------------------------------- generic names

/// A generic tty device `name` with attributes and `/dev/serial` links.
fn serial(name: &str, minor: u32, attrs: &[(&str, &str)], links: &[&str]) -> Device {
    let path = format!("/dev/{name}");
    Device {
        backend: "generic".into(),
        id: format!("tty:{name}"),
        sysfs_path: format!("/sys/devices/virtual/x/{name}"),
        bus: "usb-serial".into(),
        nodes: vec![node("generic", name, &path, 188, minor)],
        links: links
            .iter()
            .map(|l| link(&format!("/dev/serial/{l}"), &format!("../../{name}"), &path))
            .collect(),
        attrs: attrs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        generic: Some(crate::model::GenericInfo {
            subsystem: "tty".into(),
            name: name.into(),
            matched_by: vec!["test".into()],
            joined_by: vec![],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A usb-serial port `name` of USB device `device` (`1-2`, plugged in
/// port 2 of the root hub of 0000:00:14.0), on interface `interface`.
fn usb_port(
    name: &str,
    minor: u32,
    device: &str,
    serial: Option<&str>,
    interface: Option<&str>,
    port: Option<u32>,
) -> Device {
    let mut d = serial_dev_plain(name, minor);
    if let Some(g) = d.generic.as_mut() {
        g.usb = Some(crate::model::UsbPort {
            device: device.into(),
            path: format!("pci-0000:00:14.0-usb-{}", device.split_once('-').unwrap().1),
            serial: serial.map(Into::into),
            interface: interface.map(Into::into),
            port,
        });
    }
    d
}

fn serial_dev_plain(name: &str, minor: u32) -> Device {
    serial(name, minor, &[], &[])
}

#[test]
fn usb_names_a_port_by_serial_and_a_multi_port_device_by_interface() {
    let g = generic_names("[usb]");
    let devices = [
        // An FT232R: one port, its serial number alone (as before).
        usb_port("ttyUSB0", 0, "1-2", Some("A10K5PQR"), Some("00"), Some(0)),
        // An FT4232H: four interfaces, one port each.
        usb_port("ttyUSB1", 1, "1-1.1", Some("FT4Q"), Some("00"), Some(0)),
        usb_port("ttyUSB2", 2, "1-1.1", Some("FT4Q"), Some("01"), Some(0)),
        usb_port("ttyUSB3", 3, "1-1.1", Some("FT4Q"), Some("02"), Some(0)),
        // A MosChip-like adapter: two ports on one interface.
        usb_port("ttyUSB4", 4, "1-3", Some("MC"), Some("00"), Some(0)),
        usb_port("ttyUSB5", 5, "1-3", Some("MC"), Some("00"), Some(1)),
        // A PL2303 without a serial number: where it is plugged.
        usb_port("ttyUSB6", 6, "1-1.4", None, Some("00"), Some(0)),
        // A modem without a serial number: port path and interface.
        usb_port("ttyUSB7", 7, "1-4", None, Some("02"), Some(0)),
        usb_port("ttyUSB8", 8, "1-4", None, Some("03"), Some(0)),
    ];
    assert_eq!(
        names_and_warnings(&g, &devices),
        (
            strings(&[
                "A10K5PQR",
                "FT4Q-if00",
                "FT4Q-if01",
                "FT4Q-if02",
                "MC-if00-port0",
                "MC-if00-port1",
                "pci-0000:00:14.0-usb-1.4",
                "pci-0000:00:14.0-usb-4-if02",
                "pci-0000:00:14.0-usb-4-if03",
            ]),
            vec![]
        )
    );
}

#[test]
fn usb_names_what_it_can_and_says_why_not_the_rest() {
    let g = generic_names("[usb]");
    let devices = [
        // Two single-port adapters that report one serial number: neither,
        // and the warning says which adapters and where they are plugged.
        usb_port("ttyUSB0", 0, "1-2", Some("0001"), Some("00"), Some(0)),
        usb_port("ttyUSB1", 1, "1-5", Some("0001"), Some("00"), Some(0)),
        // Not below a USB device.
        serial_dev_plain("ttyS0", 64),
        // Two ports of one device, one without an interface number.
        usb_port("ttyUSB2", 2, "1-6", Some("X"), None, None),
        usb_port("ttyUSB3", 3, "1-6", Some("X"), Some("01"), None),
        // Two ports of one interface, one without a port number.
        usb_port("ttyUSB4", 4, "1-7", Some("Y"), Some("00"), None),
        usb_port("ttyUSB5", 5, "1-7", Some("Y"), Some("00"), Some(1)),
    ];
    assert_eq!(
        names_and_warnings(&g, &devices),
        (
            strings(&["X-if01", "Y-if00-port1"]),
            strings(&[
                "tty:ttyS0: not below a USB device, so no name from `\"usb\"`",
                "tty:ttyUSB2: USB device 1-6 has 2 ports and this one has no interface number, \
                 so no name from `\"usb\"`",
                "tty:ttyUSB4: interface 00 of USB device 1-7 has several ports and this one has \
                 no port number, so no name from `\"usb\"`",
                "\"0001\" would name tty:ttyUSB0 (USB device 1-2 at pci-0000:00:14.0-usb-2) and \
                 tty:ttyUSB1 (USB device 1-5 at pci-0000:00:14.0-usb-5); naming none of them so",
            ])
        )
    );
}

fn generic_names(names: &str) -> Generator {
    crate::generator::parse(
        Path::new("test.yaml"),
        &format!(
            "name: test\nbackend: generic\nkind: example.com/serial\ntemplate: generic\n\
             match: {{subsystem: tty}}\nnames: {names}\n"
        ),
    )
    .unwrap()
}

fn names_and_warnings(g: &Generator, devices: &[Device]) -> (Vec<String>, Vec<String>) {
    let ctx = context(g, devices);
    (
        ctx.devices.iter().map(|d| d.name.clone()).collect(),
        ctx.warnings.clone(),
    )
}

#[test]
fn attr_names_skip_devices_without_a_valid_value() {
    let devices = [
        serial("ttyUSB0", 0, &[("serial", "A10K5PQR")], &[]),
        serial("ttyUSB1", 1, &[], &[]),
        serial("ttyUSB2", 2, &[("serial", "../x y")], &[]),
        serial("ttyACM0", 3, &[("serial", "85734323231351E0E1A1")], &[]),
    ];
    let g = generic_names("[{attr: serial}, all]");
    assert_eq!(
        names_and_warnings(&g, &devices),
        (
            strings(&["85734323231351E0E1A1", "A10K5PQR", "all"]),
            strings(&[
                "tty:ttyUSB1: no attribute serial, so no name from `attr: \"serial\"`",
                "tty:ttyUSB2: invalid device name \"../x y\": must start with an ASCII letter or \
                 digit, so no name from `attr: \"serial\"`",
            ])
        )
    );
    // `all` still has every selected device, named or not.
    let ctx = context(&g, &devices);
    assert_eq!(ctx.devices.last().unwrap().members.len(), 4);
}

#[test]
fn link_names_take_the_first_link_of_the_directory() {
    let devices = [
        serial(
            "ttyUSB0",
            0,
            &[],
            &[
                "by-path/pci-0000:00:14.0-usbv2-0:2:1.0-port0",
                "by-id/usb-FTDI_FT232R_USB_UART_A10K5PQR-if00-port0",
                "by-path/pci-0000:00:14.0-usb-0:2:1.0-port0",
            ],
        ),
        serial("ttyUSB1", 1, &[], &["by-id/usb-1a86_USB_Serial-if00-port0"]),
    ];
    let g = generic_names("[{link: serial/by-path}]");
    assert_eq!(
        names_and_warnings(&g, &devices),
        (
            strings(&["pci-0000:00:14.0-usb-0:2:1.0-port0"]),
            strings(&[
                "tty:ttyUSB1: no link in /dev/serial/by-path, so no name from `link: \"serial/by-path\"`"
            ])
        )
    );
}

#[test]
fn template_names_render_strictly_and_must_be_valid() {
    let devices = [
        serial("ttyUSB0", 0, &[("idVendor", "0403"), ("serial", "A1")], &[]),
        serial("ttyUSB1", 1, &[("idVendor", "1a86")], &[]),
        serial("ttyUSB2", 2, &[("idVendor", "04/3"), ("serial", "B2")], &[]),
    ];
    let g = generic_names("[{template: \"{{attrs.idVendor}}-{{attrs.serial}}-{{generic.name}}\"}]");
    let (names, warnings) = names_and_warnings(&g, &devices);
    assert_eq!(names, ["0403-A1-ttyUSB0"]);
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[0].starts_with(
            "tty:ttyUSB1: template \"{{attrs.idVendor}}-{{attrs.serial}}-{{generic.name}}\": "
        ) && warnings[0].contains("attrs.serial"),
        "{}",
        warnings[0]
    );
    assert_eq!(
        warnings[1],
        "tty:ttyUSB2: invalid device name \"04/3-B2-ttyUSB2\": invalid character '/' (allowed: \
         A-Z a-z 0-9 _ . : -), so no name from `template: \"{{attrs.idVendor}}-{{attrs.serial}}-{{generic.name}}\"`"
    );
    // A hostile value stays data: no HTML escaping, no template syntax.
    let tricky = [serial("ttyUSB0", 0, &[("serial", "{{x}}&amp")], &[])];
    let g = generic_names("[{template: \"s-{{attrs.serial}}\"}]");
    let (names, warnings) = names_and_warnings(&g, &tricky);
    assert_eq!(names, Vec::<String>::new());
    assert!(warnings[0].contains("\"s-{{x}}&amp\""), "{warnings:?}");
}

#[test]
fn a_name_two_devices_would_share_is_given_to_neither() {
    let devices = [
        serial("ttyUSB0", 0, &[("serial", "0001")], &[]),
        serial("ttyUSB1", 1, &[("serial", "0001")], &[]),
        serial("ttyUSB2", 2, &[("serial", "X2")], &[]),
    ];
    let g = generic_names("[index, {attr: serial}]");
    assert_eq!(
        names_and_warnings(&g, &devices),
        (
            strings(&["0", "1", "2", "X2"]),
            strings(&["\"0001\" would name tty:ttyUSB0 and tty:ttyUSB1; naming none of them so"])
        )
    );
    // Across strategies too: a serial that is another device's index.
    let devices = [
        serial("ttyUSB0", 0, &[("serial", "1")], &[]),
        serial("ttyUSB1", 1, &[("serial", "Z")], &[]),
    ];
    assert_eq!(
        names_and_warnings(&g, &devices),
        (
            strings(&["0", "Z"]),
            strings(&["\"1\" would name tty:ttyUSB1 and tty:ttyUSB0; naming none of them so"])
        )
    );
}

#[test]
fn a_device_named_all_leaves_the_name_to_the_all_device() {
    let devices = [
        serial("ttyUSB0", 0, &[("serial", "all")], &[]),
        serial("ttyUSB1", 1, &[("serial", "B")], &[]),
    ];
    let g = generic_names("[{attr: serial}, all]");
    assert_eq!(
        names_and_warnings(&g, &devices),
        (
            strings(&["B", "all"]),
            strings(&["\"all\" would name tty:ttyUSB0 and the `all` device; naming only `all` so"])
        )
    );
    // Without an `all` device, "all" is a name like any other.
    let g = generic_names("[{attr: serial}]");
    assert_eq!(names_of(&g, &devices), ["all", "B"]);
}

#[test]
fn generic_template_renders_nodes_and_links() {
    let devices = [serial(
        "ttyUSB0",
        0,
        &[("serial", "A1")],
        &["by-id/usb-FTDI-if00-port0"],
    )];
    let g = generic_names("[{attr: serial}]");
    let spec = builtin().render(&g, &devices).unwrap();
    assert_eq!(spec.kind, "example.com/serial");
    assert_eq!(
        spec.devices,
        [cdi_device(
            "A1",
            vec![dn("/dev/ttyUSB0", 188, 0)],
            vec![bind("/dev/serial/by-id/usb-FTDI-if00-port0")]
        )]
    );
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_string()).collect()
}

#[test]
fn one_entry_for_several_devices_is_no_name_clash() {
    // A VFIO group: one CDI device stands for both functions.
    let vfio = |addr: &str| Device {
        vfio: Some(crate::model::VfioInfo {
            group: "32".into(),
            noiommu: false,
            group_devices: vec!["0000:65:00.0".into(), "0000:65:00.1".into()],
            mode: "legacy".into(),
        }),
        ..gpu(addr, 1)
    };
    let devices = [vfio("0000:65:00.0"), vfio("0000:65:00.1")];
    let g = with_names("drm", &[NameStrategy::Group]);
    let ctx = context(&g, &devices);
    assert_eq!(ctx.warnings, Vec::<String>::new());
    assert_eq!(
        ctx.devices
            .iter()
            .map(|d| (d.name.as_str(), d.members.len()))
            .collect::<Vec<_>>(),
        [("32", 2)]
    );
}

#[test]
fn name_templates_may_use_triple_stash_their_result_is_checked_as_a_name() {
    // Names are rendered unescaped in every spelling, then must be valid
    // CDI device names: a hostile value only leaves the device unnamed.
    assert_eq!(
        crate::generator::check_name_template("{{{attrs.serial}}}"),
        Ok(())
    );
    let mut d = hostile("x");
    d.attrs.insert("serial".into(), "a\", \"b".into());
    assert_eq!(
        render_name("{{{attrs.serial}}}", &d),
        render_name("{{attrs.serial}}", &d)
    );
    assert!(render_name("{{~&attrs.serial~}}", &d).is_err());
    d.attrs.insert("serial".into(), "ok-1".into());
    assert_eq!(render_name("{{ {attrs.serial} }}", &d), Ok("ok-1".into()));
}

#[test]
fn plan_leaves_out_a_device_whose_cdi_device_alone_is_invalid() {
    // A value that makes a device's own edits invalid (an env entry that
    // is not NAME=value) leaves out that device, with the others written;
    // `all` is rendered again without it.
    let (_dir, t) = user_templates(&[(
        "envs.json.hbs",
        "{\"cdiVersion\": \"0.3.0\", \"kind\": {{json kind}}, \"devices\": [\
         {{#each devices}}{{#unless @first}},{{/unless}}{\"name\": {{json name}}, \
         \"containerEdits\": {\"env\": [{{#each members}}{{#unless @first}},{{/unless}}\
         {{json attrs.var}}{{/each}}]}}{{/each}}]}",
    )]);
    let t = t.unwrap();
    let g = with_names("envs", &[NameStrategy::Pci, NameStrategy::All]);
    let with_var = |addr: &str, var: &str| {
        let mut d = gpu(addr, 1);
        d.attrs.insert("var".into(), var.into());
        d
    };
    let devices = vec![
        with_var("0000:03:00.0", "A=1"),
        with_var("0000:04:00.0", "not an assignment"),
        with_var("0000:05:00.0", "C=3"),
    ];
    let planned = plan_one(&loaded(g.clone()), &t, &discovery(devices.clone()), None).unwrap();
    let spec = planned.spec.unwrap();
    assert_eq!(
        spec.devices
            .iter()
            .map(|d| (d.name.as_str(), d.container_edits.env.clone()))
            .collect::<Vec<_>>(),
        [
            ("0000:03:00.0", vec!["A=1".to_string()]),
            ("0000:05:00.0", vec!["C=3".to_string()]),
            ("all", vec!["A=1".to_string(), "C=3".to_string()]),
        ]
    );
    // Every device bad: the template is the likelier culprit, and that is
    // the generator's error, as before.
    let all_bad = vec![with_var("0000:03:00.0", "x"), with_var("0000:04:00.0", "y")];
    assert_eq!(
        plan_one(&loaded(g), &t, &discovery(all_bad), None)
            .unwrap_err()
            .to_string(),
        "generator \"test\": the spec for example.com-gpu.yaml is invalid, not writing it: \
         device \"0000:03:00.0\": containerEdits.env[0]: \"x\" is not NAME=value; device \
         \"0000:04:00.0\": containerEdits.env[0]: \"y\" is not NAME=value; device \"all\": \
         containerEdits.env[0]: \"x\" is not NAME=value; device \"all\": containerEdits.env[1]: \
         \"y\" is not NAME=value"
    );
}

#[test]
fn members_are_given_to_templates_without_the_driver_files_they_share() {
    let driver = std::sync::Arc::new(crate::model::Driver {
        version: Some("560.35.03".into()),
        root: "/".into(),
        hook_path: "/usr/bin/cdigen".into(),
        ..Default::default()
    });
    let devices: Vec<Device> = (0..2)
        .map(|i| Device {
            driver_files: Some(driver.clone()),
            ..gpu(&format!("0000:0{i}:00.0"), i)
        })
        .collect();
    let g = generator("drm");
    let ctx = context(&g, &devices);
    let json = serde_json::to_value(&ctx).unwrap();
    let members: Vec<&serde_json::Value> = json["devices"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|d| d["members"].as_array().unwrap())
        .collect();
    assert!(members.len() >= 2, "{json}");
    for m in members {
        assert!(m.get("id").is_some(), "{m}");
        assert!(m.get("driver_files").is_none(), "{m}");
    }
    // The devices themselves (what `discover` prints) keep them.
    let own = serde_json::to_value(&devices[0]).unwrap();
    assert_eq!(own["driver_files"]["version"], "560.35.03");
}

#[test]
fn pci_uid_names_are_intels_and_skip_devices_off_pci() {
    let devices = [
        gpu("0000:03:00.0", 1),
        gpu("0000:4d:00.0", 2),
        platform("fec00000.v3d", 0),
    ];
    let g = with_names("drm", &[NameStrategy::PciUid, NameStrategy::All]);
    assert_eq!(
        names_and_warnings(&g, &devices),
        (
            strings(&["0000-03-00-0-0x744c", "0000-4d-00-0-0x744c", "all"]),
            strings(&["platform:fec00000.v3d: not a PCI device, so no name from `\"pci-uid\"`"])
        )
    );
}

// ------------------------------------------------- names a device cannot get

/// `pci` names a generic device by the address of the nearest PCI
/// function above it (a Coral Edge TPU's `apex_0`, a USB adapter's xHCI
/// controller); one outside PCI keeps its identity. Two devices below one
/// function would share the name, so neither gets it, with the warning.
#[test]
fn pci_names_a_generic_device_by_its_nearest_pci_function() {
    let mut tpu = serial("apex_0", 0, &[], &[]);
    tpu.id = "apex:apex_0".into();
    tpu.sysfs_path = "/sys/devices/pci0000:00/0000:00:03.2/0000:05:00.0/apex/apex_0".into();
    let mut con = serial("ttyS0", 64, &[], &[]);
    con.sysfs_path = "/sys/devices/platform/serial8250/tty/ttyS0".into();
    let g = generic_names("[pci]");
    assert_eq!(
        names_and_warnings(&g, &[tpu.clone(), con]),
        (strings(&["0000:05:00.0", "tty:ttyS0"]), vec![])
    );
    let mut second = tpu.clone();
    second.id = "apex:apex_1".into();
    second.sysfs_path = tpu.sysfs_path.replace("apex_0", "apex_1");
    let (names, warnings) = names_and_warnings(&g, &[tpu, second]);
    assert!(names.is_empty(), "{names:?}");
    assert_eq!(
        warnings,
        strings(&[
            "\"0000:05:00.0\" would name apex:apex_0 and apex:apex_1; naming none of them so"
        ])
    );
}

/// `uuid` and `group` say which device they give no name, and why, once
/// per device; they never skip one silently.
#[test]
fn uuid_and_group_warn_for_each_device_they_cannot_name() {
    let mut amd = gpu("0000:03:00.0", 1);
    amd.uuid = Some("GPU-4586545370e3703c".into());
    let old = gpu("0000:43:00.0", 2);
    let g = with_names("drm", &[NameStrategy::Uuid, NameStrategy::Group]);
    let (names, warnings) = names_and_warnings(&g, &[amd, old]);
    assert_eq!(names, strings(&["GPU-4586545370e3703c"]));
    assert_eq!(
        warnings,
        strings(&[
            "0000:43:00.0: no UUID known (NVIDIA GPUs and MIG devices have one, and AMD GPUs \
             whose KFD topology gives a unique_id), so no name from `\"uuid\"`",
            "0000:03:00.0: not bound to a VFIO driver (no IOMMU group), so no name from \
             `\"group\"`",
            "0000:43:00.0: not bound to a VFIO driver (no IOMMU group), so no name from \
             `\"group\"`",
        ])
    );
}

// ---------------------------------------------------------------- template contracts

/// A contract-2 template of kind `{{json kind}}` whose device part is
/// `device` and whose spec-level part ends with `spec_tail`.
fn contract_2(device: &str, spec_tail: &str) -> String {
    format!(
        "{{{{!-- cdigen-template: 2 --}}}}\n{{{{#*inline \"device\"}}}}\n{device}\n{{{{/inline}}}}\n\
         {{\"cdiVersion\": \"0.3.0\", \"kind\": {{{{json kind}}}}{spec_tail}}}\n"
    )
}

#[test]
fn builtin_templates_are_contract_2() {
    let t = builtin();
    for (name, _) in BUILTIN {
        assert_eq!(t.contract(name), Some(2), "{name}");
        assert!(t.registry.get_template(&format!("{name}/device")).is_some());
    }
    assert_eq!(t.contract("nope"), None);
}

#[test]
fn contract_declarations() {
    let device = "{\"name\": {{json name}}, \"containerEdits\": {\"env\": [\"A=1\"]}}";
    let v1 = "{\"cdiVersion\": \"0.3.0\", \"kind\": {{json kind}}, \"devices\": [{{#each \
              devices}}{{#unless @first}},{{/unless}}{\"name\": {{json name}}, \
              \"containerEdits\": {\"env\": [\"A=1\"]}}{{/each}}]}";
    let compact =
        contract_2(device, "").replace("{{!-- cdigen-template: 2 --}}", "{{! cdigen-template:2 }}");
    let (_dir, t) = user_templates(&[
        ("none.json.hbs", v1),
        (
            "one.json.hbs",
            &format!("{{{{!-- cdigen-template: 1 --}}}}\n{v1}"),
        ),
        ("two.json.hbs", &contract_2(device, "")),
        ("compact.json.hbs", &compact),
        // Prose that starts with the word is no declaration.
        (
            "prose.json.hbs",
            &format!("{{{{!-- cdigen-templates: see the docs --}}}}\n{v1}"),
        ),
    ]);
    let t = t.unwrap();
    let g = |name: &str| with_names(name, &[NameStrategy::Pci, NameStrategy::All]);
    let devices = [gpu("0000:03:00.0", 1), gpu("0000:04:00.0", 2)];
    let want = t.render(&g("none"), &devices).unwrap();
    assert_eq!(
        want.devices
            .iter()
            .map(|d| d.name.as_str())
            .collect::<Vec<_>>(),
        ["0000:03:00.0", "0000:04:00.0", "all"]
    );
    for (name, contract) in [
        ("none", 1),
        ("one", 1),
        ("two", 2),
        ("compact", 2),
        ("prose", 1),
    ] {
        assert_eq!(t.contract(name), Some(contract), "{name}");
        assert_eq!(t.render(&g(name), &devices).unwrap(), want, "{name}");
    }
    // Refused at load, naming the file, where it is, and the contracts known.
    for (text, message) in [
        (
            "{{!-- cdigen-template: 3 --}}{}",
            "line 1, col 1: template contract 3 is not known to this cdigen (it knows 1, 2): \
             write the template to one of those",
        ),
        (
            "{}\n{{! cdigen-template: 0 }}",
            "line 2, col 1: template contract 0 is not known to this cdigen (it knows 1, 2): \
             write the template to one of those",
        ),
        (
            "{{!-- cdigen-template: two --}}{}",
            "line 1, col 1: a contract declaration reads {{!-- cdigen-template: N --}} (N one \
             of 1, 2)",
        ),
        (
            "{{!-- cdigen-template 2 --}}{}",
            "line 1, col 1: a contract declaration reads {{!-- cdigen-template: N --}} (N one \
             of 1, 2)",
        ),
        (
            "{{!-- cdigen-template: 99999999999 --}}{}",
            "line 1, col 1: template contract 99999999999 is not known to this cdigen (it \
             knows 1, 2): write the template to one of those",
        ),
        (
            "{{!-- cdigen-template: 1 --}}\n{{!-- cdigen-template: 1 --}}{}",
            "line 2, col 1: a second contract declaration",
        ),
    ] {
        let (dir, t) = user_templates(&[("bad.json.hbs", text)]);
        assert_eq!(
            t.map(|_| ()).unwrap_err().to_string(),
            format!("{}: {message}", dir.path().join("bad.json.hbs").display()),
            "{text:?}"
        );
    }
}

#[test]
fn contract_2_needs_one_device_part() {
    let device = "{{#*inline \"device\"}}{\"name\": \"a\"}{{/inline}}";
    for (text, has) in [
        (
            "{{!-- cdigen-template: 2 --}}{\"kind\": {{json kind}}}".to_string(),
            "none",
        ),
        (
            format!("{{{{!-- cdigen-template: 2 --}}}}{{{{#if kind}}}}{device}{{{{/if}}}}{{}}"),
            "none",
        ),
        (
            "{{!-- cdigen-template: 2 --}}{{#*inline \"devices\"}}x{{/inline}}{}".to_string(),
            "none",
        ),
        (
            format!("{{{{!-- cdigen-template: 2 --}}}}{device}\n{device}{{}}"),
            "2",
        ),
    ] {
        let (dir, t) = user_templates(&[("parts.json.hbs", &text)]);
        assert_eq!(
            t.map(|_| ()).unwrap_err().to_string(),
            format!(
                "{}: contract 2 needs one device part, a top-level {{{{#*inline \
                 \"device\"}}}}...{{{{/inline}}}}; it has {has}",
                dir.path().join("parts.json.hbs").display()
            ),
            "{text:?}"
        );
    }
    // Unescaped output in a device part is refused as anywhere else.
    let (dir, t) = user_templates(&[(
        "raw.json.hbs",
        &contract_2("{\"name\": \"{{{name}}}\"}", ""),
    )]);
    assert_eq!(
        t.map(|_| ()).unwrap_err().to_string(),
        format!(
            "{}: line 3, col 11: {UNESCAPED}",
            dir.path().join("raw.json.hbs").display()
        )
    );
}

#[test]
fn contract_2_device_part_errors_name_the_file_and_the_device() {
    let one = "{\"name\": {{json name}}, \"containerEdits\": {\"env\": [\"A=1\"]}}";
    let (dir, t) = user_templates(&[
        (
            "two-objects.json.hbs",
            &contract_2(&format!("{one}\n{one}"), ""),
        ),
        (
            "two-listed.json.hbs",
            &contract_2(&format!("{one},{one}"), ""),
        ),
        ("not-json.json.hbs", &contract_2("device: {{name}}", "")),
        ("empty.json.hbs", &contract_2("{{#if nope}}x{{/if}}", "")),
        (
            "bogus.json.hbs",
            &contract_2(
                "{\"name\": {{json name}}, \"bogus\": 1, \"containerEdits\": {}}",
                "",
            ),
        ),
        (
            "a-spec.json.hbs",
            &contract_2(
                &format!("{{\"kind\": {{{{json kind}}}}, \"devices\": [{one}]}}"),
                "",
            ),
        ),
        (
            "missing.json.hbs",
            &contract_2("{\"name\": {{json name}}, \"x\": {{json nope}}}", ""),
        ),
        (
            "spec-devices.json.hbs",
            &contract_2(
                one,
                ", \"devices\": [{\"name\": \"x\", \"containerEdits\": {\"env\": [\"A=1\"]}}]",
            ),
        ),
        (
            "no-devices-there.json.hbs",
            &contract_2(one, ", \"x\": {{json devices}}"),
        ),
        (
            "other-kind.json.hbs",
            &contract_2(one, "").replace("{{json kind}}", "\"other.com/gpu\""),
        ),
    ]);
    let t = t.unwrap();
    let devices = [gpu("0000:03:00.0", 1)];
    let err = |name: &str| {
        t.render(&with_names(name, &[NameStrategy::Index]), &devices)
            .unwrap_err()
            .to_string()
    };
    let file = |name: &str| {
        dir.path()
            .join(format!("{name}.json.hbs"))
            .display()
            .to_string()
    };
    let device = |name: &str, message: &str| {
        format!(
            "{}: device part, CDI device \"0\": rendered output is not one valid CDI device: \
             {message}",
            file(name)
        )
    };
    assert_eq!(
        err("two-objects"),
        device(
            "two-objects",
            "invalid JSON: trailing characters at line 2 column 1"
        )
    );
    assert_eq!(
        err("two-listed"),
        device(
            "two-listed",
            "invalid JSON: trailing characters at line 1 column 50"
        )
    );
    assert_eq!(
        err("not-json"),
        device(
            "not-json",
            "invalid JSON: expected value at line 1 column 1"
        )
    );
    assert_eq!(err("empty"), device("empty", "it is empty"));
    assert_eq!(
        err("bogus"),
        device(
            "bogus",
            "invalid JSON: unknown field \"bogus\", expected one of name, annotations, \
             containerEdits"
        )
    );
    assert_eq!(
        err("a-spec"),
        device(
            "a-spec",
            "invalid JSON: unknown field \"kind\", expected one of name, annotations, \
             containerEdits"
        )
    );
    assert_eq!(
        err("missing"),
        format!(
            "{}: device part, CDI device \"0\": Error rendering \"missing/device\" line 3, col \
             30: Failed to access variable in strict mode Some(\"nope\")",
            file("missing")
        )
    );
    assert_eq!(
        err("spec-devices"),
        format!(
            "{}: rendered output is not a valid spec document: its spec-level part writes \
             devices: with contract 2 they come from its device part ({{{{#*inline \
             \"device\"}}}}) alone",
            file("spec-devices")
        )
    );
    // The spec-level part has no devices to write.
    assert_eq!(
        err("no-devices-there"),
        format!(
            "{}: Error rendering \"no-devices-there\" line 5, col 53: Failed to access \
             variable in strict mode Some(\"devices\")",
            file("no-devices-there")
        )
    );
    assert_eq!(
        err("other-kind"),
        format!(
            "{}: rendered output is not a valid spec document: kind is \"other.com/gpu\", but \
             generator \"test\" has kind \"example.com/gpu\" (use {{{{json kind}}}})",
            file("other-kind")
        )
    );
}

#[test]
fn contract_2_device_part_sees_its_device_and_the_spec_wide_values() {
    // The device part sees its device (`ids`, `members`), `kind`,
    // `generator`, `resource_env`, and the template's other inline
    // partials; not the other devices, nor the spec-wide edits.
    let device = "{\"name\": {{json name}}, \"containerEdits\": {\"env\": [\
                  {{> kind-env}}, \"G={{generator}}\", \"R={{resource_env}}_{{name_env}}\", \
                  \"I={{ids}}\", \"M={{#each members}}{{id}};{{/each}}\"]}}";
    let text = format!(
        "{{{{#*inline \"kind-env\"}}}}\"K={{{{kind}}}}\"{{{{/inline}}}}\n{}",
        contract_2(device, "")
    );
    let (_dir, t) = user_templates(&[
        ("sees.json.hbs", &text),
        ("common.json.hbs", &contract_2("{{json common_mounts}}", "")),
        ("devices.json.hbs", &contract_2("{{json devices}}", "")),
    ]);
    let t = t.unwrap();
    let g = with_names("sees", &[NameStrategy::Pci, NameStrategy::All]);
    let spec = t
        .render(&g, &[gpu("0000:04:00.0", 2), gpu("0000:03:00.0", 1)])
        .unwrap();
    let env: Vec<Vec<String>> = spec
        .devices
        .iter()
        .map(|d| d.container_edits.env.clone())
        .collect();
    assert_eq!(
        env,
        [
            [
                "K=example.com/gpu",
                "G=test",
                "R=EXAMPLE_COM_GPU_0000_03_00_0",
                "I=0000:03:00.0",
                "M=0000:03:00.0;"
            ],
            [
                "K=example.com/gpu",
                "G=test",
                "R=EXAMPLE_COM_GPU_0000_04_00_0",
                "I=0000:04:00.0",
                "M=0000:04:00.0;"
            ],
            [
                "K=example.com/gpu",
                "G=test",
                "R=EXAMPLE_COM_GPU_ALL",
                "I=0000:03:00.0,0000:04:00.0",
                "M=0000:03:00.0;0000:04:00.0;"
            ],
        ]
    );
    for name in ["common", "devices"] {
        let err = t
            .render(
                &with_names(name, &[NameStrategy::Pci]),
                &[gpu("0000:03:00.0", 1)],
            )
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!(
                "Failed to access variable in strict mode Some(\"{}\")",
                if name == "common" {
                    "common_mounts"
                } else {
                    "devices"
                }
            )),
            "{err}"
        );
    }
}

#[test]
fn a_template_replacing_another_replaces_its_contract() {
    // A user's contract-1 drm replaces the built-in contract-2 one, device
    // part included; a user's contract-2 template replaces it as well.
    let (_dir, t) = user_templates(&[("drm.json.hbs", DRM_CONTRACT_1)]);
    let t = t.unwrap();
    assert_eq!(t.contract("drm"), Some(1));
    assert!(t.registry.get_template("drm/device").is_none());
    let devices = [gpu("0000:03:00.0", 1), gpu("0000:04:00.0", 2)];
    let g = generator("drm");
    assert_eq!(
        t.render(&g, &devices).unwrap(),
        builtin().render(&g, &devices).unwrap()
    );
    let mine = contract_2(
        "{\"name\": {{json name}}, \"containerEdits\": {\"env\": [\"MINE=1\"]}}",
        "",
    );
    let (_dir, t) = user_templates(&[("drm.json.hbs", &mine)]);
    let t = t.unwrap();
    assert_eq!(t.contract("drm"), Some(2));
    assert_eq!(
        t.render(&g, &devices)
            .unwrap()
            .devices
            .iter()
            .map(|d| (d.name.as_str(), d.container_edits.env.clone()))
            .collect::<Vec<_>>(),
        [
            ("0", vec!["MINE=1".to_string()]),
            ("1", vec!["MINE=1".to_string()]),
            ("all", vec!["MINE=1".to_string()])
        ]
    );
}

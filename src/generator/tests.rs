#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use super::*;

use std::collections::BTreeSet;
use std::fs;

use select::Select;

use crate::model::{Device, Link, Node, PciInfo};

// ---------------------------------------------------------------- helpers

/// The smallest valid definition; tests append keys to it.
const BASE: &str = "name: test\nbackend: drm\nkind: example.com/gpu\ntemplate: drm\n";

const FILE: &str = "/etc/cdigen/generators.d/test.yaml";

/// The error message for `yaml`, parsed as [`FILE`].
fn err(yaml: &str) -> String {
    match parse(Path::new(FILE), yaml) {
        Ok(g) => panic!("expected an error for {yaml:?}, got {g:?}"),
        Err(e) => e.to_string(),
    }
}

/// The error message for [`BASE`] plus `extra`.
fn err_with(extra: &str) -> String {
    err(&format!("{BASE}{extra}"))
}

fn base() -> Generator {
    parse(Path::new(FILE), BASE).unwrap()
}

use crate::model::test_node as node;

/// A PCI GPU with a card and a render node and their by-path links.
fn pci_gpu(addr: &str, vendor: &str, driver: &str, card: u32) -> Device {
    let render = 128 + card;
    Device {
        backend: "drm".into(),
        id: addr.into(),
        sysfs_path: format!("/sys/devices/pci0000:00/{addr}"),
        bus: "pci".into(),
        pci: Some(PciInfo {
            address: addr.into(),
            vendor_id: vendor.into(),
            device_id: "0x1234".into(),
            subsystem_vendor_id: None,
            subsystem_device_id: None,
            class: "0x030000".into(),
            vendor_name: None,
            device_name: None,
            iommu_group: None,
        }),
        driver: Some(driver.into()),
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
                &format!("renderD{render}"),
                &format!("/dev/dri/renderD{render}"),
                226,
                render,
            ),
        ],
        links: vec![
            Link {
                path: format!("/dev/dri/by-path/pci-{addr}-card"),
                target: format!("../card{card}"),
                node: format!("/dev/dri/card{card}"),
            },
            Link {
                path: format!("/dev/dri/by-path/pci-{addr}-render"),
                target: format!("../renderD{render}"),
                node: format!("/dev/dri/renderD{render}"),
            },
        ],
        attrs: BTreeMap::new(),
        ..Default::default()
    }
}

fn kfd() -> Node {
    node("kfd", "kfd", "/dev/kfd", 235, 0)
}

/// An AMD GPU with /dev/kfd.
fn amd(addr: &str, card: u32) -> Device {
    let mut d = pci_gpu(addr, "0x1002", "amdgpu", card);
    d.nodes.push(kfd());
    d
}

/// A platform GPU (no PCI identity) with a card node only.
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
        links: vec![Link {
            path: format!("/dev/dri/by-path/platform-{name}-card"),
            target: format!("../card{card}"),
            node: format!("/dev/dri/card{card}"),
        }],
        attrs: BTreeMap::new(),
        ..Default::default()
    }
}

fn select(f: impl FnOnce(&mut Select)) -> Select {
    let mut s = Select::default();
    f(&mut s);
    s
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(ToString::to_string).collect()
}

// ---------------------------------------------------------------- built-ins

#[test]
fn builtins_parse_and_check() {
    let templates: Vec<&str> = crate::render::BUILTIN.iter().map(|(n, _)| *n).collect();
    let mut names = BTreeSet::new();
    for (file, text) in BUILTIN {
        let path = PathBuf::from(format!("builtin:generators/{file}"));
        let g = parse(&path, text).unwrap_or_else(|e| panic!("{e}"));
        check(&path, &g).unwrap();
        assert!(
            names.insert(g.name.clone()),
            "{file}: name {} twice",
            g.name
        );
        assert!(
            templates.contains(&g.template.as_str()),
            "{file}: template {:?} is not built in ({templates:?})",
            g.template
        );
        // Only safe definitions run by default: the generic ones for
        // consoles and serial lines, the vendor-neutral accel one (the
        // DRM backend already offers accel devices), Intel GPUs' MEI nodes
        // (firmware interfaces), the shared RDMA pool (the rdma generator
        // already offers every HCA), DMA heaps (contiguous memory the
        // whole board shares) and BMC displays (on every server, wanted by
        // nobody), the generic FPGA and sound card examples, and NVIDIA's
        // management (every GPU and the fabric) and GPUDirect devices are
        // opt-in.
        let opt_in = [
            "nvidia-management",
            "nvidia-gdrcopy",
            "nvidia-gds",
            "bmc-display",
            "generic-tty",
            "usb-serial",
            "accel",
            "dma-heap",
            "intel-gpu-mei",
            "rdma-shared",
            "xdma",
            "alsa",
        ]
        .contains(&g.name.as_str());
        assert_eq!(g.enabled, !opt_in, "{file}");
        assert!(crate::discover::backend(&g.backend).is_ok(), "{file}");
        // The file is named after the generator.
        assert_eq!(format!("{}.yaml", g.name), *file);
    }
    assert_eq!(
        names,
        BTreeSet::from(
            [
                "accel",
                "alsa",
                "amd-gpu",
                "bmc-display",
                "dma-heap",
                "drm",
                "gaudi",
                "generic-tty",
                "intel-gpu",
                "intel-gpu-mei",
                "intel-npu",
                "nvidia",
                "nvidia-gdrcopy",
                "nvidia-gds",
                "nvidia-imex",
                "nvidia-management",
                "rdma",
                "rdma-shared",
                "sriov",
                "usb-serial",
                "vdpa",
                "vfio",
                "xdma"
            ]
            .map(String::from)
        )
    );
}

#[test]
fn builtin_amd_gpu_is_exactly_as_written() {
    let (file, text) = BUILTIN.iter().find(|(f, _)| *f == "amd-gpu.yaml").unwrap();
    let g = parse(Path::new(file), text).unwrap();
    assert_eq!(
        g,
        Generator {
            name: "amd-gpu".into(),
            description: "AMD GPUs with their DRM nodes and the ROCm compute node".into(),
            enabled: true,
            backend: "drm".into(),
            kind: "amd.com/gpu".into(),
            source: None,
            join: vec![source::Join {
                source: source::Match {
                    subsystem: "kfd".into(),
                    name: strings(&["kfd"]),
                    attrs: BTreeMap::new(),
                    properties: BTreeMap::new(),
                    parent: None,
                    expose: vec![],
                    links: vec![],
                    group: None,
                },
                role: "kfd".into(),
                drivers: strings(&["amdgpu"]),
            }],
            select: Select {
                vendor_ids: strings(&["0x1002"]),
                node_roles: strings(&["primary", "render", "kfd"]),
                ..Default::default()
            },
            reserve: 0,
            names: vec![NameStrategy::Index, NameStrategy::All],
            template: "drm".into(),
            output: Output {
                file: None,
                format: Format::Yaml,
            },
            device_nodes: NodeSettings {
                numbers: true,
                owner: false,
            },
            links: LinkMode::Mount,
            cdi_version: None,
            vfio_mode: VfioMode::Auto,
            device_info: false,
            static_devices: vec![],
            device_plugin: DevicePlugin {
                vendor_resources: vec!["amd.com/gpu".into()],
                ..Default::default()
            },
            driver: None,
            dra: Default::default(),
        }
    );
    assert_eq!(g.file_name(g.output.format), "amd.com-gpu.yaml");
}

#[test]
fn defaults_of_a_minimal_definition() {
    assert_eq!(
        base(),
        Generator {
            name: "test".into(),
            description: String::new(),
            enabled: true,
            backend: "drm".into(),
            kind: "example.com/gpu".into(),
            source: None,
            join: vec![],
            select: Select::default(),
            reserve: 0,
            names: vec![NameStrategy::Index, NameStrategy::All],
            template: "drm".into(),
            output: Output::default(),
            device_nodes: NodeSettings::default(),
            links: LinkMode::Mount,
            cdi_version: None,
            vfio_mode: VfioMode::Auto,
            device_info: false,
            static_devices: vec![],
            device_plugin: Default::default(),
            driver: None,
            dra: Default::default(),
        }
    );
}

#[test]
fn full_definition() {
    let g = parse(
        Path::new(FILE),
        "name: my_gpus-2\n\
         description: mine\n\
         enabled: false\n\
         backend: drm\n\
         kind: example.com/gpu\n\
         select:\n  vendor_ids: [\"0x10DE\"]\n  exclude_vendor_ids: [\"0x1002\"]\n  \
         drivers: [nouveau]\n  exclude_drivers: [nvidia]\n  buses: [pci]\n  node_roles: [render, accel]\n\
         names: [pci, node, all]\n\
         template: custom\n\
         output:\n  file: my.gpus\n  format: json\n\
         device_nodes:\n  numbers: false\n  owner: true\n\
         links: none\n\
         cdi_version: v0.6.0\n",
    )
    .unwrap();
    assert_eq!(
        g,
        Generator {
            name: "my_gpus-2".into(),
            description: "mine".into(),
            enabled: false,
            backend: "drm".into(),
            kind: "example.com/gpu".into(),
            source: None,
            join: vec![],
            select: Select {
                vendor_ids: strings(&["0x10DE"]),
                exclude_vendor_ids: strings(&["0x1002"]),
                drivers: strings(&["nouveau"]),
                exclude_drivers: strings(&["nvidia"]),
                buses: strings(&["pci"]),
                node_roles: strings(&["render", "accel"]),
                ..Default::default()
            },
            reserve: 0,
            names: vec![NameStrategy::Pci, NameStrategy::Node, NameStrategy::All],
            template: "custom".into(),
            output: Output {
                file: Some("my.gpus".into()),
                format: Format::Json,
            },
            device_nodes: NodeSettings {
                numbers: false,
                owner: true,
            },
            links: LinkMode::None,
            cdi_version: Some("v0.6.0".into()),
            vfio_mode: VfioMode::Auto,
            device_info: false,
            static_devices: vec![],
            device_plugin: Default::default(),
            driver: None,
            dra: Default::default(),
        }
    );
}

// ---------------------------------------------------------------- parse errors

#[test]
fn unknown_key_names_file_line_and_expected_keys() {
    assert_eq!(
        err_with("vendorids: [\"0x1002\"]\n"),
        "/etc/cdigen/generators.d/test.yaml: unknown field `vendorids`, expected one of name, \
         description, enabled, backend, kind, match, join, select, reserve, names, template, \
         output, device_nodes, links, cdi_version, vfio_mode, device_info, static_devices, device_plugin, driver, \
         dra at line 5, column 1"
    );
    assert_eq!(
        err_with("select:\n  vendorids: [\"0x1002\"]\n"),
        "/etc/cdigen/generators.d/test.yaml: unknown field `vendorids`, expected one of \
         vendor_ids, exclude_vendor_ids, drivers, exclude_drivers, buses, node_roles, device_ids, \
         pci_addresses, pf_names, pf_addresses, link_types, if_names at line 6, column 3"
    );
    assert_eq!(
        err_with("device_nodes:\n  mode: 0666\n"),
        "/etc/cdigen/generators.d/test.yaml: unknown field `mode`, expected one of numbers, \
         owner at line 6, column 3"
    );
}

#[test]
fn wrong_types() {
    assert_eq!(
        err_with("enabled: maybe\n"),
        "/etc/cdigen/generators.d/test.yaml: invalid boolean at line 5, column 10"
    );
    assert_eq!(
        err_with("names: index\n"),
        "/etc/cdigen/generators.d/test.yaml: expected sequence start at line 5, column 8"
    );
    assert_eq!(
        err_with("description: [a]\n"),
        "/etc/cdigen/generators.d/test.yaml: expected string scalar at line 5, column 14"
    );
    assert_eq!(
        err("- a\n"),
        "/etc/cdigen/generators.d/test.yaml: expected mapping start at line 1, column 1"
    );
    assert_eq!(
        err(""),
        "/etc/cdigen/generators.d/test.yaml: unexpected end of file at line 1, column 1"
    );
    assert_eq!(
        err("name: test\n"),
        "/etc/cdigen/generators.d/test.yaml: missing field `backend` at line 1, column 1"
    );
}

#[test]
fn duplicate_keys() {
    assert_eq!(
        err("name: a\nname: b\nbackend: drm\nkind: example.com/gpu\ntemplate: drm\n"),
        "/etc/cdigen/generators.d/test.yaml: duplicate mapping key `name` is not allowed here \
         at line 2, column 1"
    );
    assert_eq!(
        err_with("select:\n  vendor_ids: [\"0x1002\"]\n  vendor_ids: []\n"),
        "/etc/cdigen/generators.d/test.yaml: duplicate mapping key `vendor_ids` is not allowed \
         here at line 7, column 3"
    );
}

#[test]
fn bad_enum_values() {
    assert_eq!(
        err_with("names: [first]\n"),
        "/etc/cdigen/generators.d/test.yaml: unknown variant `first`, expected one of index, \
         pci, pci-uid, node, all, group, uuid, attr, link, usb, template at line 5, column 9"
    );
    assert_eq!(
        err_with("output:\n  format: toml\n"),
        "/etc/cdigen/generators.d/test.yaml: unknown variant `toml`, expected one of json, yaml \
         at line 6, column 11"
    );
    assert_eq!(
        err_with("links: symlink\n"),
        "/etc/cdigen/generators.d/test.yaml: unknown variant `symlink`, expected one of mount, \
         none at line 5, column 8"
    );
}

// ---------------------------------------------------------------- value checks

/// The error for [`BASE`] with the line starting with `key:` replaced.
fn err_replacing(key: &str, line: &str) -> String {
    let yaml: String = BASE
        .lines()
        .map(|l| {
            if l.starts_with(&format!("{key}:")) {
                format!("{line}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    assert_ne!(yaml, BASE, "{key} is not in BASE");
    err(&yaml)
}

#[test]
fn bad_name() {
    for name in ["Test", "-x", "a.b", "\"\"", "a/b", &"a".repeat(65)] {
        let shown = serde_saphyr::from_str::<String>(name).unwrap();
        assert_eq!(
            err_replacing("name", &format!("name: {name}")),
            format!(
                "/etc/cdigen/generators.d/test.yaml: name: {shown:?} must be 1-64 characters of \
                 a-z 0-9 - _ starting with a letter or digit"
            ),
            "{name}"
        );
    }
    // 64 characters, a leading digit, `_` and `-` are fine.
    for name in ["a".repeat(64), "0gpu".into(), "my_gpu-1".into()] {
        let yaml = BASE.replace("name: test", &format!("name: {name}"));
        assert_eq!(parse(Path::new(FILE), &yaml).unwrap().name, name);
    }
}

#[test]
fn unknown_backend() {
    assert_eq!(
        err_replacing("backend", "backend: gpu"),
        "/etc/cdigen/generators.d/test.yaml: backend: unknown backend \"gpu\" (known: drm, vfio, sriov, vdpa, rdma, nvidia, generic, static)"
    );
}

#[test]
fn invalid_kind() {
    assert_eq!(
        err_replacing("kind", "kind: a/gpu"),
        "/etc/cdigen/generators.d/test.yaml: kind: invalid vendor \"a\": must be at least 2 \
         characters (released CDI libraries crash on 1)"
    );
    assert_eq!(
        err_replacing("kind", "kind: gpu"),
        "/etc/cdigen/generators.d/test.yaml: kind: invalid kind \"gpu\": must be vendor/class, \
         e.g. example.com/gpu"
    );
    assert_eq!(
        err_replacing("kind", "kind: example.com/gpu/x"),
        "/etc/cdigen/generators.d/test.yaml: kind: invalid class \"gpu/x\": invalid character \
         '/' (allowed: A-Z a-z 0-9 _ . -)"
    );
}

#[test]
fn template_must_be_a_plain_name() {
    for t in ["../drm", "sub/drm", "drm.json.hbs", "Drm"] {
        assert_eq!(
            err_replacing("template", &format!("template: {t}")),
            format!(
                "/etc/cdigen/generators.d/test.yaml: template: {t:?} must be a template name \
                 like \"drm\" (templates/<name>.json.hbs)"
            )
        );
    }
}

#[test]
fn names_empty_or_repeated() {
    assert_eq!(
        err_with("names: []\n"),
        "/etc/cdigen/generators.d/test.yaml: names: must list at least one name strategy (index, \
         pci, pci-uid, node, group, uuid, usb, attr, link, template, all)"
    );
    assert_eq!(
        err_with("names: [index, all, index]\n"),
        "/etc/cdigen/generators.d/test.yaml: names[2]: \"index\" listed twice"
    );
    assert_eq!(
        err_with("names: [all, all]\n"),
        "/etc/cdigen/generators.d/test.yaml: names[1]: \"all\" listed twice"
    );
    // Only `all` is allowed.
    let yaml = format!("{BASE}names: [all]\n");
    assert_eq!(
        parse(Path::new(FILE), &yaml).unwrap().names,
        [NameStrategy::All]
    );
}

#[test]
fn bad_vendor_ids() {
    assert_eq!(
        err_with("select:\n  vendor_ids: [\"0x10020\"]\n"),
        "/etc/cdigen/generators.d/test.yaml: select.vendor_ids[0]: \"0x10020\" is not a PCI \
         vendor ID like \"0x1002\""
    );
    assert_eq!(
        err_with("select:\n  exclude_vendor_ids: [\"0x1002\", \"1002\"]\n"),
        "/etc/cdigen/generators.d/test.yaml: select.exclude_vendor_ids[1]: \"1002\" is not a \
         PCI vendor ID like \"0x1002\""
    );
    // An unquoted 0x1002 is still a string here.
    let yaml = format!("{BASE}select:\n  vendor_ids: [0x1002]\n");
    assert_eq!(
        parse(Path::new(FILE), &yaml).unwrap().select.vendor_ids,
        ["0x1002"]
    );
}

#[test]
fn bad_node_role() {
    assert_eq!(
        err_with("select:\n  node_roles: [render, card]\n"),
        "/etc/cdigen/generators.d/test.yaml: select.node_roles[1]: \"card\" is not a node role \
         (expected one of primary, render, accel, accel-control, mei, kfd, vfio-container, vfio-group, vfio-cdev, iommufd, rdma-verbs, rdma-mad, rdma-cm, vhost-net, tun, vhost-vdpa, nvidia-gpu, nvidia-cap, nvidia-control, nvidia-modeset, nvidia-uvm, nvidia-uvm-tools, nvidia-mig-config, nvidia-mig-monitor, nvidia-imex-channel, nvidia-management, nvidia-gdrdrv, nvidia-fs, generic)"
    );
}

#[test]
fn bad_output_file() {
    for file in [
        "a/b",
        "../x",
        "x.json",
        "x.yaml",
        ".hidden",
        "a b",
        "\"\"",
        &"a".repeat(201),
    ] {
        let shown = serde_saphyr::from_str::<String>(file).unwrap();
        assert_eq!(
            err_with(&format!("output:\n  file: {file}\n")),
            format!(
                "/etc/cdigen/generators.d/test.yaml: output.file: {shown:?} must be a plain file \
                 name without extension (A-Z a-z 0-9 . _ -, not starting with '.'); the \
                 extension comes from output.format"
            ),
            "{file}"
        );
    }
    let yaml = format!("{BASE}output:\n  file: My_gpus-1.v2\n");
    assert_eq!(
        parse(Path::new(FILE), &yaml)
            .unwrap()
            .output
            .file
            .as_deref(),
        Some("My_gpus-1.v2")
    );
}

#[test]
fn bad_cdi_version() {
    for v in ["0.2.0", "0.1.0", "2.0.0", "latest"] {
        assert_eq!(
            err_with(&format!("cdi_version: {v}\n")),
            format!(
                "/etc/cdigen/generators.d/test.yaml: cdi_version: {v:?} is not a CDI version \
                 from 0.3.0 to 1.1.0"
            )
        );
    }
    for v in ["0.3.0", "1.1.0", "v0.5.0"] {
        let yaml = format!("{BASE}cdi_version: {v}\n");
        assert_eq!(
            parse(Path::new(FILE), &yaml)
                .unwrap()
                .cdi_version
                .as_deref(),
            Some(v)
        );
    }
}

// ---------------------------------------------------------------- load

fn write(dir: &Path, file: &str, text: &str) -> PathBuf {
    let p = dir.join(file);
    fs::write(&p, text).unwrap();
    p
}

/// (name, source) of each loaded definition.
fn summary(loaded: &[Loaded]) -> Vec<(String, String)> {
    loaded
        .iter()
        .map(|l| {
            (
                l.generator.name.clone(),
                l.source.to_string_lossy().into_owned(),
            )
        })
        .collect()
}

fn builtin_summary() -> Vec<(String, String)> {
    [
        "accel",
        "alsa",
        "amd-gpu",
        "bmc-display",
        "dma-heap",
        "drm",
        "gaudi",
        "generic-tty",
        "intel-gpu",
        "intel-gpu-mei",
        "intel-npu",
        "nvidia",
        "nvidia-gdrcopy",
        "nvidia-gds",
        "nvidia-imex",
        "nvidia-management",
        "rdma",
        "rdma-shared",
        "sriov",
        "usb-serial",
        "vdpa",
        "vfio",
        "xdma",
    ]
    .iter()
    .map(|n| (n.to_string(), format!("builtin:generators/{n}.yaml")))
    .collect()
}

#[test]
fn load_builtins_only() {
    assert_eq!(summary(&load(&[]).unwrap()), builtin_summary());
}

#[test]
fn load_missing_dir_is_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let loaded = load(&[tmp.path().join("nope")]).unwrap();
    assert_eq!(summary(&loaded), builtin_summary());
}

#[test]
fn load_dir_that_is_a_file_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let f = write(tmp.path(), "file", "");
    assert_eq!(
        load(std::slice::from_ref(&f)).unwrap_err().to_string(),
        format!("cannot read {}", f.display())
    );
}

#[test]
fn load_user_replaces_adds_and_keeps_disabled() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let amd = write(
        dir,
        "10-amd.yaml",
        "name: amd-gpu\nbackend: drm\nkind: example.com/amd\ntemplate: drm\n",
    );
    let extra = write(
        dir,
        "extra.yaml",
        "name: extra\nbackend: drm\nkind: example.com/extra\ntemplate: drm\n",
    );
    let off = write(
        dir,
        "off.yaml",
        "name: intel-npu\nenabled: false\nbackend: drm\nkind: intel.com/npu\ntemplate: drm\n",
    );
    // Not a definition file: ignored, even though it would not parse.
    write(dir, "notes.txt", "not yaml: [");
    write(dir, "old.yaml.bak", "not yaml: [");
    let loaded = load(&[dir.to_path_buf()]).unwrap();
    let show = |p: &Path| p.to_string_lossy().into_owned();
    assert_eq!(
        summary(&loaded),
        [
            ("accel".to_string(), "builtin:generators/accel.yaml".into()),
            ("alsa".into(), "builtin:generators/alsa.yaml".into()),
            ("amd-gpu".into(), show(&amd)),
            (
                "bmc-display".into(),
                "builtin:generators/bmc-display.yaml".into()
            ),
            ("dma-heap".into(), "builtin:generators/dma-heap.yaml".into()),
            ("drm".into(), "builtin:generators/drm.yaml".into()),
            ("extra".into(), show(&extra)),
            ("gaudi".into(), "builtin:generators/gaudi.yaml".into()),
            (
                "generic-tty".into(),
                "builtin:generators/generic-tty.yaml".into()
            ),
            (
                "intel-gpu".into(),
                "builtin:generators/intel-gpu.yaml".into()
            ),
            (
                "intel-gpu-mei".into(),
                "builtin:generators/intel-gpu-mei.yaml".into()
            ),
            ("intel-npu".into(), show(&off)),
            ("nvidia".into(), "builtin:generators/nvidia.yaml".into()),
            (
                "nvidia-gdrcopy".into(),
                "builtin:generators/nvidia-gdrcopy.yaml".into()
            ),
            (
                "nvidia-gds".into(),
                "builtin:generators/nvidia-gds.yaml".into()
            ),
            (
                "nvidia-imex".into(),
                "builtin:generators/nvidia-imex.yaml".into()
            ),
            (
                "nvidia-management".into(),
                "builtin:generators/nvidia-management.yaml".into()
            ),
            ("rdma".into(), "builtin:generators/rdma.yaml".into()),
            (
                "rdma-shared".into(),
                "builtin:generators/rdma-shared.yaml".into()
            ),
            ("sriov".into(), "builtin:generators/sriov.yaml".into()),
            (
                "usb-serial".into(),
                "builtin:generators/usb-serial.yaml".into()
            ),
            ("vdpa".into(), "builtin:generators/vdpa.yaml".into()),
            ("vfio".into(), "builtin:generators/vfio.yaml".into()),
            ("xdma".into(), "builtin:generators/xdma.yaml".into()),
        ]
    );
    let by = |n: &str| {
        &loaded
            .iter()
            .find(|l| l.generator.name == n)
            .unwrap()
            .generator
    };
    // Replaced wholesale: nothing of the built-in's select is kept.
    assert_eq!(by("amd-gpu").kind, "example.com/amd");
    assert_eq!(by("amd-gpu").select, Select::default());
    assert!(!by("intel-npu").enabled);
    assert!(by("extra").enabled);
}

/// The shipped `sriov.yaml`.
fn builtin_text(file: &str) -> &'static str {
    BUILTIN.iter().find(|(f, _)| *f == file).unwrap().1
}

/// The error loading `files` (name, text) as one user directory, or "ok".
fn load_err(files: &[(&str, &str)]) -> (tempfile::TempDir, String) {
    let tmp = tempfile::tempdir().unwrap();
    for (name, text) in files {
        write(tmp.path(), name, text);
    }
    let msg = match load(&[tmp.path().to_path_buf()]) {
        Ok(_) => "ok".to_string(),
        Err(e) => e.to_string(),
    };
    let msg = msg.replace(&tmp.path().display().to_string(), "DIR");
    (tmp, msg)
}

#[test]
fn load_refuses_a_copy_of_a_builtin_that_keeps_its_kind() {
    // The README's "copy sriov.yaml" recipe done halfway: a new name, the
    // same kind, so the same spec file (and device-info files).
    let pool = builtin_text("sriov.yaml").replace("name: sriov", "name: my-pool");
    assert_eq!(
        load_err(&[("pool.yaml", &pool)]).1,
        "generators \"sriov\" (builtin:generators/sriov.yaml) and \"my-pool\" (DIR/pool.yaml) \
         both write cdigen.io-vf.yaml: give one a different kind or output.file"
    );
    // Disabled, it is refused all the same: `--generator my-pool` would
    // still run it, and the two would take the file from each other.
    let off = pool.replace("name: my-pool", "name: my-pool\nenabled: false");
    assert_eq!(
        load_err(&[("pool.yaml", &off)]).1,
        "generators \"sriov\" (builtin:generators/sriov.yaml) and \"my-pool\" (DIR/pool.yaml) \
         both write cdigen.io-vf.yaml: give one a different kind or output.file"
    );
    // Another output.file, the same kind: the device-info files are still
    // shared.
    let other_file = pool.replace("  format: yaml", "  format: yaml\n  file: my-pool");
    assert_eq!(
        load_err(&[("pool.yaml", &other_file)]).1,
        "generators \"sriov\" (builtin:generators/sriov.yaml) and \"my-pool\" (DIR/pool.yaml) \
         both write the device-info files cdigen.io-vf-*-device.json: give one a different kind"
    );
    // Done in full: a kind of its own.
    let done = pool.replace("kind: cdigen.io/vf", "kind: example.com/pool");
    assert_eq!(load_err(&[("pool.yaml", &done)]).1, "ok");
    // Replacing the built-in (the same name) is no second writer.
    let replaced =
        builtin_text("sriov.yaml").replace("select:\n", "select:\n  drivers: [mlx5_core]\n");
    assert_eq!(load_err(&[("sriov.yaml", &replaced)]).1, "ok");
    // Nor is a built-in the user replaced with another kind.
    let moved = builtin_text("sriov.yaml").replace("kind: cdigen.io/vf", "kind: example.com/vf");
    assert_eq!(
        load_err(&[("sriov.yaml", &moved), ("pool.yaml", &pool)]).1,
        "ok"
    );
}

#[test]
fn load_refuses_two_user_generators_writing_one_file() {
    let def = |name: &str, kind: &str, extra: &str| {
        format!("name: {name}\nbackend: drm\nkind: {kind}\ntemplate: drm\n{extra}")
    };
    // The same output.file, different kinds.
    let a = def("a", "example.com/aa", "output:\n  file: shared\n");
    let b = def("b", "example.com/bb", "output:\n  file: shared\n");
    assert_eq!(
        load_err(&[("a.yaml", &a), ("b.yaml", &b)]).1,
        "generators \"a\" (DIR/a.yaml) and \"b\" (DIR/b.yaml) both write shared.yaml: give \
         one a different kind or output.file"
    );
    // Formats differ: --format makes it one file.
    let b_json = def(
        "b",
        "example.com/bb",
        "output:\n  file: shared\n  format: json\n",
    );
    assert_eq!(
        load_err(&[("a.yaml", &a), ("b.yaml", &b_json)]).1,
        "generators \"a\" (DIR/a.yaml) and \"b\" (DIR/b.yaml) both write shared.yaml and \
         shared.json (one file with --format): give one a different kind or output.file"
    );
    // A kind whose file name is another's output.file.
    let c = def("c", "example.com/cc", "output:\n  file: amd.com-gpu\n");
    assert_eq!(
        load_err(&[("c.yaml", &c)]).1,
        "generators \"amd-gpu\" (builtin:generators/amd-gpu.yaml) and \"c\" (DIR/c.yaml) both \
         write amd.com-gpu.yaml: give one a different kind or output.file"
    );
    // Two kinds with one file name (`/` becomes `-`).
    let d = def("d", "example.com/aa-bb", "");
    let e = def("e", "example.com-aa/bb", "");
    assert_eq!(
        load_err(&[("d.yaml", &d), ("e.yaml", &e)]).1,
        "generators \"d\" (DIR/d.yaml) and \"e\" (DIR/e.yaml) both write example.com-aa-bb.yaml: \
         give one a different kind or output.file"
    );
    // The same kind in different files, without device-info files: two
    // spec files, which a conflicting device name stops at write time.
    let f = def("f", "example.com/gpu", "output:\n  file: f\n");
    let g = def("g", "example.com/gpu", "output:\n  file: g\n");
    assert_eq!(load_err(&[("f.yaml", &f), ("g.yaml", &g)]).1, "ok");
    // Device-info files from one of them only: fine too.
    let g_info = format!("{g}device_info: true\n");
    assert_eq!(load_err(&[("f.yaml", &f), ("g.yaml", &g_info)]).1, "ok");
    let f_info = format!("{f}device_info: true\n");
    assert_eq!(
        load_err(&[("f.yaml", &f_info), ("g.yaml", &g_info)]).1,
        "generators \"f\" (DIR/f.yaml) and \"g\" (DIR/g.yaml) both write the device-info files \
         example.com-gpu-*-device.json: give one a different kind"
    );
}

#[test]
fn builtins_write_files_of_their_own() {
    let all = load(&[]).unwrap();
    assert!(check_shared_outputs(&all).is_ok());
    let files: BTreeSet<String> = all.iter().map(|l| l.generator.file_stem()).collect();
    assert_eq!(files.len(), all.len());
}

#[test]
fn load_later_dir_replaces_earlier() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    let b = tmp.path().join("b");
    fs::create_dir(&a).unwrap();
    fs::create_dir(&b).unwrap();
    write(
        &a,
        "x.yaml",
        "name: x\nbackend: drm\nkind: example.com/aa\ntemplate: drm\n",
    );
    let bx = write(
        &b,
        "y.yaml",
        "name: x\nbackend: drm\nkind: example.com/bb\ntemplate: drm\n",
    );
    let loaded = load(&[a, b]).unwrap();
    let x = loaded.iter().find(|l| l.generator.name == "x").unwrap();
    assert_eq!(x.generator.kind, "example.com/bb");
    assert_eq!(x.source, bx);
}

#[test]
fn load_duplicate_in_one_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let text = "name: dup\nbackend: drm\nkind: example.com/gpu\ntemplate: drm\n";
    let a = write(dir, "a.yaml", text);
    let b = write(dir, "b.yaml", text);
    assert_eq!(
        load(&[dir.to_path_buf()]).unwrap_err().to_string(),
        format!(
            "{}: generator \"dup\" is also defined in {}",
            b.display(),
            a.display()
        )
    );
}

#[test]
fn load_broken_file_is_its_error() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write(
        dir,
        "a.yaml",
        "name: fine\nbackend: drm\nkind: example.com/gpu\ntemplate: drm\n",
    );
    let bad = write(
        dir,
        "b.yaml",
        "name: broken\nbackend: drm\nkind: example.com/gpu\ntemplate: drm\nvendorids: []\n",
    );
    assert_eq!(
        load(&[dir.to_path_buf()]).unwrap_err().to_string(),
        format!(
            "{}: unknown field `vendorids`, expected one of name, description, enabled, backend, \
             kind, match, join, select, reserve, names, template, output, device_nodes, links, \
             cdi_version, vfio_mode, device_info, static_devices, device_plugin, driver, dra at line 5, column 1",
            bad.display()
        )
    );
    fs::write(
        &bad,
        "name: broken\nbackend: drm\nkind: x/gpu\ntemplate: drm\n",
    )
    .unwrap();
    assert_eq!(
        load(&[dir.to_path_buf()]).unwrap_err().to_string(),
        format!(
            "{}: kind: invalid vendor \"x\": must be at least 2 characters (released CDI \
             libraries crash on 1)",
            bad.display()
        )
    );
}

// ---------------------------------------------------------------- file_name

#[test]
fn file_names() {
    let mut g = base();
    assert_eq!(g.file_name(Format::Yaml), "example.com-gpu.yaml");
    assert_eq!(g.file_name(Format::Json), "example.com-gpu.json");
    g.output.file = Some("my-gpus".into());
    assert_eq!(g.file_name(Format::Yaml), "my-gpus.yaml");
    assert_eq!(g.file_name(Format::Json), "my-gpus.json");
}

// ---------------------------------------------------------------- select

#[test]
fn select_default_takes_everything_as_is() {
    let s = Select::default();
    for d in [
        pci_gpu("0000:03:00.0", "0x1002", "amdgpu", 1),
        amd("0000:03:00.0", 1),
        platform("fec00000.v3d", 0),
    ] {
        assert_eq!(s.apply(&d), Some(d.clone()));
    }
}

#[test]
fn select_vendor_allowlist() {
    let amd = pci_gpu("0000:03:00.0", "0x1002", "amdgpu", 1);
    let intel = pci_gpu("0000:00:02.0", "0x8086", "i915", 0);
    let s = select(|s| s.vendor_ids = strings(&["0x1002"]));
    assert_eq!(s.apply(&amd), Some(amd.clone()));
    assert_eq!(s.apply(&intel), None);
    let s = select(|s| s.vendor_ids = strings(&["0x8086", "0x1002"]));
    assert_eq!(s.apply(&amd), Some(amd.clone()));
    assert_eq!(s.apply(&intel), Some(intel.clone()));

    // Compared as numbers: hex case does not matter.
    let nv = pci_gpu("0000:01:00.0", "0x10de", "nouveau", 0);
    let s = select(|s| s.vendor_ids = strings(&["0x10DE"]));
    assert_eq!(s.apply(&nv), Some(nv.clone()));
    let upper = pci_gpu("0000:01:00.0", "0x10DE", "nouveau", 0);
    let s = select(|s| s.vendor_ids = strings(&["0x10de"]));
    assert_eq!(s.apply(&upper), Some(upper.clone()));

    // A malformed vendor ID on a device never matches.
    let odd = pci_gpu("0000:01:00.0", "10de", "nouveau", 0);
    assert_eq!(s.apply(&odd), None);
}

#[test]
fn select_vendor_exclusion() {
    let amd = pci_gpu("0000:03:00.0", "0x1002", "amdgpu", 1);
    let aspeed = pci_gpu("0000:05:00.0", "0x1a03", "ast", 0);
    let s = select(|s| s.exclude_vendor_ids = strings(&["0x1002", "0x8086", "0x10de"]));
    assert_eq!(s.apply(&amd), None);
    assert_eq!(s.apply(&aspeed), Some(aspeed.clone()));
    let s = select(|s| s.exclude_vendor_ids = strings(&["0x1A03"]));
    assert_eq!(s.apply(&aspeed), None);
    // Exclusion wins over the allowlist.
    let s = select(|s| {
        s.vendor_ids = strings(&["0x1002"]);
        s.exclude_vendor_ids = strings(&["0x1002"]);
    });
    assert_eq!(s.apply(&amd), None);
}

#[test]
fn select_non_pci_devices() {
    let p = platform("fec00000.v3d", 0);
    let s = select(|s| s.vendor_ids = strings(&["0x1002"]));
    assert_eq!(s.apply(&p), None);
    let s = select(|s| s.exclude_vendor_ids = strings(&["0x1002", "0x8086", "0x10de"]));
    assert_eq!(s.apply(&p), Some(p.clone()));
}

#[test]
fn select_drivers_and_buses() {
    let intel = pci_gpu("0000:00:02.0", "0x8086", "xe", 0);
    let p = platform("fec00000.v3d", 0);
    let s = select(|s| s.drivers = strings(&["i915", "xe"]));
    assert_eq!(s.apply(&intel), Some(intel.clone()));
    assert_eq!(s.apply(&p), None);
    // No driver bound: no match for a driver list.
    let unbound = Device {
        driver: None,
        ..intel.clone()
    };
    assert_eq!(s.apply(&unbound), None);
    assert_eq!(Select::default().apply(&unbound), Some(unbound.clone()));

    // Excluded drivers: a device bound to none of them, or to none at all,
    // is kept; exclusion wins over the allowlist.
    let s = select(|s| s.exclude_drivers = strings(&["nvidia"]));
    let nvidia = pci_gpu("0000:41:00.0", "0x10de", "nvidia", 1);
    let nouveau = pci_gpu("0000:01:00.0", "0x10de", "nouveau", 0);
    assert_eq!(s.apply(&nvidia), None);
    assert_eq!(s.apply(&nouveau), Some(nouveau.clone()));
    assert_eq!(s.apply(&unbound), Some(unbound.clone()));
    assert_eq!(s.apply(&p), Some(p.clone()));
    let s = select(|s| {
        s.drivers = strings(&["nvidia", "nouveau"]);
        s.exclude_drivers = strings(&["nvidia"]);
    });
    assert_eq!(s.apply(&nvidia), None);
    assert_eq!(s.apply(&nouveau), Some(nouveau.clone()));

    let s = select(|s| s.buses = strings(&["platform"]));
    assert_eq!(s.apply(&p), Some(p.clone()));
    assert_eq!(s.apply(&intel), None);
    let s = select(|s| s.buses = strings(&["pci", "platform"]));
    assert_eq!(s.apply(&intel), Some(intel.clone()));
}

#[test]
fn select_node_roles_filters_nodes_and_links() {
    let d = amd("0000:03:00.0", 1);
    let s = select(|s| s.node_roles = strings(&["render"]));
    let mut want = d.clone();
    want.nodes = vec![node(
        "render",
        "renderD129",
        "/dev/dri/renderD129",
        226,
        129,
    )];
    want.links = vec![Link {
        path: "/dev/dri/by-path/pci-0000:03:00.0-render".into(),
        target: "../renderD129".into(),
        node: "/dev/dri/renderD129".into(),
    }];
    assert_eq!(s.apply(&d), Some(want));

    // Node order is the device's, not the list's.
    let s = select(|s| s.node_roles = strings(&["kfd", "primary"]));
    let mut want = d.clone();
    want.nodes = vec![node("primary", "card1", "/dev/dri/card1", 226, 1), kfd()];
    want.links = vec![Link {
        path: "/dev/dri/by-path/pci-0000:03:00.0-card".into(),
        target: "../card1".into(),
        node: "/dev/dri/card1".into(),
    }];
    assert_eq!(s.apply(&d), Some(want));

    // No wanted node: not selected.
    let s = select(|s| s.node_roles = strings(&["accel"]));
    assert_eq!(s.apply(&d), None);
}

#[test]
fn select_kfd_alone_is_not_a_match() {
    let d = amd("0000:03:00.0", 1);
    let s = select(|s| s.node_roles = strings(&["kfd"]));
    assert_eq!(s.apply(&d), None);
    // Neither is a device whose only node is kfd, with no role filter.
    let only_kfd = Device {
        nodes: vec![kfd()],
        links: Vec::new(),
        ..d.clone()
    };
    assert_eq!(Select::default().apply(&only_kfd), None);
    // Nor a device with no nodes at all.
    let none = Device {
        nodes: Vec::new(),
        links: Vec::new(),
        ..d
    };
    assert_eq!(Select::default().apply(&none), None);
}

/// The `select` of the loaded definition `name`.
fn builtin_select(loaded: &[Loaded], name: &str) -> Select {
    loaded
        .iter()
        .find(|l| l.generator.name == name)
        .unwrap()
        .generator
        .select
        .clone()
}

#[test]
fn select_builtin_definitions() {
    let loaded = load(&[]).unwrap();
    let sel = |n: &str| builtin_select(&loaded, n);
    let a = amd("0000:03:00.0", 1);
    let intel = pci_gpu("0000:00:02.0", "0x8086", "i915", 0);
    let npu = Device {
        nodes: vec![node("accel", "accel0", "/dev/accel/accel0", 261, 0)],
        links: Vec::new(),
        driver: Some("intel_vpu".into()),
        ..pci_gpu("0000:00:0b.0", "0x8086", "intel_vpu", 0)
    };
    let nouveau = pci_gpu("0000:01:00.0", "0x10de", "nouveau", 0);
    let nvidia = pci_gpu("0000:41:00.0", "0x10de", "nvidia", 2);
    let p = platform("fec00000.v3d", 0);

    assert_eq!(sel("amd-gpu").apply(&a), Some(a.clone()));
    assert_eq!(sel("amd-gpu").apply(&intel), None);
    assert_eq!(sel("intel-gpu").apply(&intel), Some(intel.clone()));
    assert_eq!(sel("intel-gpu").apply(&npu), None);
    assert_eq!(sel("intel-npu").apply(&npu), Some(npu.clone()));
    assert_eq!(sel("intel-npu").apply(&intel), None);
    for d in [&a, &intel, &npu, &nvidia] {
        assert_eq!(sel("drm").apply(d), None, "{}", d.id);
    }
    // An NVIDIA GPU on nouveau is no NVIDIA backend's: the generic DRM
    // generator offers it, as any other vendor's GPU.
    assert_eq!(sel("drm").apply(&nouveau), Some(nouveau.clone()));
    assert_eq!(sel("drm").apply(&p), Some(p.clone()));
}

/// Every DRM device is offered by exactly one enabled built-in generator
/// of the DRM backend, but a GPU bound to `nvidia`: that one is the NVIDIA
/// backend's, which claims it or reports why it cannot. A vendor filter
/// that assumed another backend takes every device of the vendor once
/// dropped NVIDIA GPUs on nouveau silently.
#[test]
fn builtin_drm_generators_offer_each_drm_device_once() {
    let loaded = load(&[]).unwrap();
    let drm: Vec<&Generator> = loaded
        .iter()
        .map(|l| &l.generator)
        .filter(|g| g.enabled && g.backend == "drm")
        .collect();
    let accel = |addr: &str, vendor: &str, driver: &str| Device {
        nodes: vec![node("accel", "accel0", "/dev/accel/accel0", 261, 0)],
        links: Vec::new(),
        ..pci_gpu(addr, vendor, driver, 0)
    };
    let card_only = |addr: &str, vendor: &str, driver: &str| Device {
        nodes: vec![node("primary", "card1", "/dev/dri/card1", 226, 1)],
        links: Vec::new(),
        ..pci_gpu(addr, vendor, driver, 1)
    };
    let takers = |d: &Device| -> Vec<&str> {
        drm.iter()
            .filter(|g| g.select.apply(d).is_some())
            .map(|g| g.name.as_str())
            .collect()
    };
    for (d, want) in [
        (amd("0000:03:00.0", 1), "amd-gpu"),
        (pci_gpu("0000:03:00.0", "0x1002", "radeon", 1), "amd-gpu"),
        (pci_gpu("0000:00:02.0", "0x8086", "i915", 0), "intel-gpu"),
        (pci_gpu("0000:00:02.0", "0x8086", "xe", 0), "intel-gpu"),
        (accel("0000:00:0b.0", "0x8086", "intel_vpu"), "intel-npu"),
        (pci_gpu("0000:01:00.0", "0x10de", "nouveau", 0), "drm"),
        (pci_gpu("0000:01:00.0", "0x10DE", "nova", 0), "drm"),
        (accel("0000:33:00.0", "0x1da3", "habanalabs"), "gaudi"),
        (accel("0000:c4:00.1", "0x1022", "amdxdna"), "drm"),
        (platform("fec00000.v3d", 0), "drm"),
    ] {
        assert_eq!(takers(&d), [want], "{} on {:?}", d.id, d.driver);
    }
    let nvidia = pci_gpu("0000:41:00.0", "0x10de", "nvidia", 0);
    assert_eq!(takers(&nvidia), Vec::<&str>::new());
    // Server display controllers, told by their driver, are offered by
    // no enabled definition; the opt-in bmc-display takes each of them,
    // and nothing else.
    let bmc = loaded
        .iter()
        .find(|l| l.generator.name == "bmc-display")
        .map(|l| &l.generator)
        .unwrap();
    for (vendor, driver) in [
        ("0x1a03", "ast"),
        ("0x102b", "mgag200"),
        ("0x19e5", "hibmc-drm"),
        ("0x1013", "cirrus"),
        ("0x1013", "cirrus-qemu"),
    ] {
        let d = card_only("0000:04:00.0", vendor, driver);
        assert_eq!(takers(&d), Vec::<&str>::new(), "{driver}");
        assert_eq!(bmc.select.apply(&d), Some(d.clone()), "{driver}");
    }
    for d in [
        pci_gpu("0000:01:00.0", "0x10de", "nouveau", 0),
        amd("0000:03:00.0", 1),
        platform("fec00000.v3d", 0),
    ] {
        assert_eq!(bmc.select.apply(&d), None, "{}", d.id);
    }
}

/// Gaudi's control node goes with its accel node; an Intel GPU's MEI node
/// is offered only by the opt-in intel-gpu-mei, never with the GPU's DRM
/// nodes.
#[test]
fn gaudi_control_node_and_intel_gpu_mei() {
    let loaded = load(&[]).unwrap();
    let sel = |n: &str| builtin_select(&loaded, n);
    let gaudi = Device {
        nodes: vec![
            node("accel", "accel0", "/dev/accel/accel0", 261, 0),
            node(
                "accel-control",
                "accel_controlD0",
                "/dev/accel/accel_controlD0",
                239,
                0,
            ),
        ],
        links: Vec::new(),
        ..pci_gpu("0000:33:00.0", "0x1da3", "habanalabs", 0)
    };
    assert_eq!(sel("gaudi").apply(&gaudi), Some(gaudi.clone()));
    assert_eq!(sel("drm").apply(&gaudi), None);
    assert_eq!(sel("intel-npu").apply(&gaudi), None);

    let mut arc = pci_gpu("0000:03:00.0", "0x8086", "i915", 0);
    let mei = node("mei", "mei1", "/dev/mei1", 511, 1);
    let mut gpu_only = arc.clone();
    arc.nodes.push(mei.clone());
    assert_eq!(sel("intel-gpu").apply(&arc), Some(gpu_only.clone()));
    gpu_only.nodes = vec![mei];
    gpu_only.links = Vec::new();
    assert_eq!(sel("intel-gpu-mei").apply(&arc), Some(gpu_only));
    assert!(
        !loaded
            .iter()
            .any(|l| l.generator.name == "intel-gpu-mei" && l.generator.enabled)
    );
}

/// `if_names` takes a network device by one of its own netdevs (the RDMA
/// shared device plugin's `ifNames`); a device without one never matches.
#[test]
fn select_if_names() {
    let d = |netdevs: &[&str]| Device {
        net: Some(crate::model::NetInfo {
            netdevs: strings(netdevs),
            ..Default::default()
        }),
        ..pci_gpu("0000:41:00.0", "0x15b3", "mlx5_core", 0)
    };
    let s = select(|s| s.if_names = strings(&["ens1f0", "ibp193s0"]));
    assert!(s.apply(&d(&["ens1f0"])).is_some());
    assert!(s.apply(&d(&["ib0", "ibp193s0"])).is_some());
    assert!(s.apply(&d(&["ens1f1"])).is_none());
    assert!(s.apply(&d(&[])).is_none());
    assert!(
        s.apply(&pci_gpu("0000:03:00.0", "0x1002", "amdgpu", 1))
            .is_none()
    );
    for bad in ["\"\"", "\"a/b\"", "\"eth0:1\"", "\"0123456789abcdef\""] {
        assert!(
            err_with(&format!("select:\n  if_names: [{bad}]\n")).contains("select.if_names[0]: "),
            "{bad}"
        );
    }
    assert_eq!(
        err_with("select:\n  if_names: [\"a,b\"]\n"),
        "/etc/cdigen/generators.d/test.yaml: select.if_names[0]: \"a,b\" is not a network \
         interface name (1-15 printable characters, no / : or ,)"
    );
}

/// `device_plugin.replicas` is from 1 (the default: each device to one
/// container) to MAX_REPLICAS.
#[test]
fn device_plugin_replicas() {
    assert_eq!(base().device_plugin.replicas, 1);
    let g = parse(
        Path::new(FILE),
        &format!("{BASE}device_plugin:\n  replicas: 1000\n"),
    )
    .unwrap();
    assert_eq!(g.device_plugin.replicas, 1000);
    for n in [0, MAX_REPLICAS + 1] {
        assert_eq!(
            err_with(&format!("device_plugin:\n  replicas: {n}\n")),
            format!(
                "/etc/cdigen/generators.d/test.yaml: device_plugin.replicas: {n} is not from 1 \
                 to {MAX_REPLICAS} (how many containers may hold each device at once)"
            )
        );
    }
    // The built-in pool: disabled, `all` only, 1000 units like the RDMA
    // shared device plugin's rdmaHcaMax example.
    let loaded = load(&[]).unwrap();
    let shared = &loaded
        .iter()
        .find(|l| l.generator.name == "rdma-shared")
        .unwrap()
        .generator;
    assert!(!shared.enabled);
    assert_eq!(shared.names, [NameStrategy::All]);
    assert_eq!(shared.device_plugin.replicas, 1000);
}

/// `device_plugin.register_empty` is off unless a definition turns it on,
/// and is not printed while off; anything but a boolean is refused, naming
/// the file and the place.
#[test]
fn device_plugin_register_empty() {
    assert!(!base().device_plugin.register_empty);
    let g = parse(
        Path::new(FILE),
        &format!("{BASE}device_plugin:\n  register_empty: true\n"),
    )
    .unwrap();
    assert!(g.device_plugin.register_empty);
    let off = serde_json::to_value(&base().device_plugin).unwrap();
    assert!(off.get("register_empty").is_none(), "{off}");
    assert_eq!(
        err_with("device_plugin:\n  register_empty: maybe\n"),
        "/etc/cdigen/generators.d/test.yaml: invalid boolean at line 6, column 19"
    );
}

// ---------------------------------------------------------------- generic

/// A generic definition: [`FILE`] with backend generic and `extra`.
fn generic_err(extra: &str) -> String {
    err(&format!(
        "name: test\nbackend: generic\nkind: example.com/dev\ntemplate: generic\n{extra}"
    ))
}

#[test]
fn generic_definitions_parse_in_full() {
    let g = parse(
        Path::new(FILE),
        "name: serial\nbackend: generic\nkind: example.com/serial\ntemplate: generic\n\
         match:\n  subsystem: tty\n  name: [\"ttyUSB*\", \"ttyACM[0-9]\"]\n  \
         attrs: {idVendor: \"0403\"}\n  properties: {DEVNAME: \"tty*\"}\n  \
         parent: {subsystem: usb, devtype: usb_device}\n  expose: [product]\n  \
         links: [serial/by-id]\n\
         reserve: 2\n\
         names: [{attr: serial}, {link: serial/by-path}, {template: \"{{generic.name}}-x\"}, node, all]\n",
    )
    .unwrap();
    assert_eq!(
        g.source,
        Some(source::Match {
            subsystem: "tty".into(),
            name: strings(&["ttyUSB*", "ttyACM[0-9]"]),
            attrs: BTreeMap::from([("idVendor".into(), "0403".into())]),
            properties: BTreeMap::from([("DEVNAME".into(), "tty*".into())]),
            parent: Some(source::Parent {
                subsystem: "usb".into(),
                devtype: Some("usb_device".into()),
            }),
            expose: strings(&["product"]),
            links: strings(&["serial/by-id"]),
            group: None,
        })
    );
    assert_eq!(g.reserve, 2);
    assert_eq!(
        g.names,
        [
            NameStrategy::Attr("serial".into()),
            NameStrategy::Link("serial/by-path".into()),
            NameStrategy::Template("{{generic.name}}-x".into()),
            NameStrategy::Node,
            NameStrategy::All,
        ]
    );
}

#[test]
fn generic_needs_a_match_and_only_generic_has_one() {
    assert_eq!(
        generic_err(""),
        "/etc/cdigen/generators.d/test.yaml: match: required with backend generic: which class \
         or bus to scan, like `match: {subsystem: tty, name: [\"ttyUSB*\"]}`"
    );
    assert_eq!(
        err_with("match: {subsystem: tty}\n"),
        "/etc/cdigen/generators.d/test.yaml: match: only for backend generic (backend drm has \
         `select`)"
    );
}

#[test]
fn generic_match_errors_name_the_field() {
    for (m, want) in [
        (
            "{subsystem: Tty}",
            "match.subsystem: \"Tty\" is not a class or bus name like \"tty\" or \"usb-serial\"",
        ),
        (
            "{subsystem: block}",
            "match.subsystem: block devices are not supported (the generic backend hands out \
             character devices)",
        ),
        (
            "{subsystem: tty, name: [\"ttyS*\", \"tty[\"]}",
            "match.name[1]: \"tty[\" is not a valid glob: unclosed character class; missing ']'",
        ),
        (
            "{subsystem: tty, name: [\"\"]}",
            "match.name[0]: empty pattern (use \"*\" for any value)",
        ),
        (
            "{subsystem: tty, attrs: {\"../serial\": \"x\"}}",
            "match.attrs.../serial: \"../serial\" is not a sysfs attribute name like \"idVendor\"",
        ),
        (
            "{subsystem: tty, attrs: {idVendor: \"04{03\"}}",
            "match.attrs.idVendor: \"04{03\" is not a valid glob: unclosed alternate group; \
             missing '}' (maybe escape '{' with '[{]'?)",
        ),
        (
            "{subsystem: tty, properties: {devname: x}}",
            "match.properties.devname: \"devname\" is not a uevent key like \"DEVTYPE\" (A-Z 0-9 _)",
        ),
        (
            "{subsystem: tty, parent: {subsystem: \"usb/x\"}}",
            "match.parent.subsystem: \"usb/x\" is not a bus name like \"usb\"",
        ),
        (
            "{subsystem: tty, parent: {subsystem: usb, devtype: \"USB device\"}}",
            "match.parent.devtype: \"USB device\" is not a device type like \"usb_device\"",
        ),
        (
            "{subsystem: tty, expose: [serial, \"\"]}",
            "match.expose[1]: \"\" is not a sysfs attribute name like \"serial\"",
        ),
        (
            "{subsystem: xdma, group: parent}",
            "match.group: `group: parent` needs `parent`: the bus of the device whose nodes \
             make one device, like `parent: {subsystem: pci}`",
        ),
        (
            "{subsystem: tty, links: [\"../etc\"]}",
            "match.links[0]: \"../etc\" is not a directory below /dev like \"serial/by-id\" \
             (relative, no ..)",
        ),
        (
            "{subsystem: tty, links: [/dev/serial/by-id]}",
            "match.links[0]: \"/dev/serial/by-id\" is not a directory below /dev like \
             \"serial/by-id\" (relative, no ..)",
        ),
    ] {
        assert_eq!(
            generic_err(&format!("match: {m}\n")),
            format!("/etc/cdigen/generators.d/test.yaml: {want}"),
            "{m}"
        );
    }
    // Unknown keys are refused with the ones expected.
    assert_eq!(
        generic_err("match: {subsystem: tty, kernel: [tty1]}\n"),
        "/etc/cdigen/generators.d/test.yaml: unknown field `kernel`, expected one of subsystem, \
         name, attrs, properties, parent, expose, links, group at line 5, column 25"
    );
}

#[test]
fn join_errors_name_the_entry() {
    assert_eq!(
        err_with("join:\n  - match: {subsystem: kfd}\n    role: compute\n"),
        format!(
            "/etc/cdigen/generators.d/test.yaml: join[0].role: \"compute\" is not a node role \
             (expected one of {})",
            select::NODE_ROLES.join(", ")
        )
    );
    assert_eq!(
        err_with(
            "join:\n  - match: {subsystem: kfd}\n    role: kfd\n  - match: {subsystem: kfd, name: [\"[\"]}\n    role: kfd\n"
        ),
        "/etc/cdigen/generators.d/test.yaml: join[1].match.name[0]: \"[\" is not a valid glob: \
         unclosed character class; missing ']'"
    );
    assert_eq!(
        err_with("join:\n  - match: {subsystem: kfd}\n"),
        "/etc/cdigen/generators.d/test.yaml: missing field `role` at line 6, column 5"
    );
    assert_eq!(
        err_with(
            "join:\n  - match: {subsystem: kfd, parent: {subsystem: pci}, group: parent}\n    role: kfd\n"
        ),
        "/etc/cdigen/generators.d/test.yaml: join[0].match.group: only in a generator's own \
         `match`: joined nodes are added to its devices one by one"
    );
}

#[test]
fn group_is_parent_or_nothing() {
    let g = parse(
        Path::new("x.yaml"),
        "name: x\nbackend: generic\nkind: a.com/bb\ntemplate: generic\n\
         match: {subsystem: xdma, parent: {subsystem: pci}, group: parent}\n",
    )
    .unwrap();
    assert_eq!(
        g.source.unwrap().group,
        Some(crate::discover::generic::scan::Group::Parent)
    );
    let e = generic_err("match: {subsystem: xdma, parent: {subsystem: pci}, group: card}\n");
    assert_eq!(
        e,
        "/etc/cdigen/generators.d/test.yaml: unknown variant `card`, expected one of parent \
         at line 5, column 59"
    );
}

#[test]
fn reserve_is_a_count() {
    assert_eq!(
        parse(Path::new(FILE), &format!("{BASE}reserve: 12\n"))
            .unwrap()
            .reserve,
        12
    );
    assert_eq!(
        err_with("reserve: -1\n"),
        "/etc/cdigen/generators.d/test.yaml: invalid u32 at line 5, column 10"
    );
    assert_eq!(
        err_with("reserve: twelve\n"),
        "/etc/cdigen/generators.d/test.yaml: invalid u32 at line 5, column 10"
    );
}

#[test]
fn value_name_strategies_are_checked() {
    for (names, want) in [
        (
            "[{attr: \"a/b\"}]",
            "names[0].attr: \"a/b\" is not an attribute name like \"serial\"",
        ),
        (
            "[index, {link: /dev/serial/by-path}]",
            "names[1].link: \"/dev/serial/by-path\" is not a directory below /dev like \
             \"serial/by-id\" (relative, no ..)",
        ),
        (
            "[{template: \"{{#if x}}\"}]",
            "names[0].template: \"{{#if x}}\" is not a valid template: ",
        ),
        ("[{template: \" \"}]", "names[0].template: empty template"),
        (
            "[{attr: serial}, {attr: serial}]",
            "names[1]: attr: \"serial\" listed twice",
        ),
    ] {
        let got = err_with(&format!("names: {names}\n"));
        let want = format!("/etc/cdigen/generators.d/test.yaml: {want}");
        assert!(
            got.starts_with(&want),
            "{names}:\n got: {got}\nwant: {want}"
        );
    }
    assert_eq!(
        err_with("names: [{serial: x}]\n"),
        "/etc/cdigen/generators.d/test.yaml: unknown variant `serial`, expected one of index, \
         pci, pci-uid, node, all, group, uuid, attr, link, usb, template at line 5, column 10"
    );
    // Two different attributes are fine (collisions are found per device).
    assert_eq!(
        parse(
            Path::new(FILE),
            &format!("{BASE}names: [{{attr: serial}}, {{attr: product}}]\n")
        )
        .unwrap()
        .names
        .len(),
        2
    );
}

proptest::proptest! {
    /// Any pattern, attribute name or link directory is accepted or
    /// refused with a message; nothing panics, and an accepted name glob
    /// matches a name equal to a pattern without glob syntax.
    #[test]
    fn match_checks_never_panic(
        name in "\\PC{0,40}",
        key in "\\PC{0,12}",
        value in "\\PC{0,40}",
        dir in "[a-z./-]{0,20}",
    ) {
        let m = source::Match {
            subsystem: "tty".into(),
            name: vec![name.clone()],
            attrs: BTreeMap::from([(key, value)]),
            properties: BTreeMap::new(),
            parent: None,
            expose: vec![],
            links: vec![dir],
            group: None,
        };
        if let Ok(c) = m.compile()
            && !name.contains(['*', '?', '[', ']', '{', '}', '\\', '/'])
        {
            proptest::prop_assert!(c.name_matches(&name));
        }
    }
}

/// A broken user file blocks the generators it would define (its stem,
/// and a `name:` the text still gives), built-ins included; the others
/// load, and `strict` gives its error.
#[test]
fn load_each_keeps_a_broken_file_to_its_own_generators() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write(
        dir,
        "a.yaml",
        "name: vfio\nbackend: vfio\nkind: cdigen.io/vfio\ntemplate: vfio\nbogus: 1\n",
    );
    write(dir, "b.yaml", "name: drm\nbackend: [\n");
    write(
        dir,
        "c.yaml",
        "name: fine\nbackend: drm\nkind: example.com/gpu\ntemplate: drm\n",
    );
    let d = load_each(&[dir.to_path_buf()]).unwrap();
    let names: Vec<&str> = d.loaded.iter().map(|l| l.generator.name.as_str()).collect();
    assert!(
        names.contains(&"fine") && names.contains(&"nvidia"),
        "{names:?}"
    );
    assert!(
        !names.contains(&"vfio") && !names.contains(&"drm"),
        "{names:?}"
    );
    let blocked: Vec<Vec<String>> = d.broken.iter().map(|b| b.names.clone()).collect();
    assert_eq!(
        blocked,
        [
            vec!["a".to_string(), "vfio".into()],
            vec!["b".into(), "drm".into()]
        ]
    );
    assert!(
        d.broken[0].to_string().starts_with(&format!(
            "generators \"a\", \"vfio\" not run (their files are left as they are): {}/a.yaml: unknown field `bogus`",
            dir.display()
        )),
        "{}",
        d.broken[0]
    );
    assert!(load(&[dir.to_path_buf()]).is_err());
    // A later directory's good definition of a blocked name replaces it.
    let later = tempfile::tempdir().unwrap();
    write(later.path(), "vfio.yaml", builtin_text("vfio.yaml"));
    let d = load_each(&[dir.to_path_buf(), later.path().to_path_buf()]).unwrap();
    assert!(d.loaded.iter().any(|l| l.generator.name == "vfio"));
}

/// `device_plugin.vendor_resources`: empty unless a definition lists some
/// (and then not printed while empty); the built-in definitions of devices
/// a vendor's device plugin serves list that plugin's resources.
#[test]
fn device_plugin_vendor_resources() {
    assert!(base().device_plugin.vendor_resources.is_empty());
    let off = serde_json::to_value(&base().device_plugin).unwrap();
    assert!(off.get("vendor_resources").is_none(), "{off}");
    let g = parse(
        Path::new(FILE),
        &format!(
            "{BASE}device_plugin:\n  vendor_resources: [example.com/gpu, example.com/mig-*]\n"
        ),
    )
    .unwrap();
    assert_eq!(
        g.device_plugin.vendor_resources,
        ["example.com/gpu", "example.com/mig-*"]
    );
    for (name, listed) in [
        ("nvidia", "nvidia.com/gpu*"),
        ("amd-gpu", "amd.com/gpu"),
        ("intel-gpu", "gpu.intel.com/*"),
        ("intel-npu", "npu.intel.com/accel"),
        ("gaudi", "habana.ai/gaudi*"),
    ] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("generators/{name}.yaml"));
        let g = parse(&path, &std::fs::read_to_string(&path).unwrap()).unwrap();
        assert!(
            g.device_plugin.vendor_resources.iter().any(|v| v == listed),
            "{name}: {:?}",
            g.device_plugin.vendor_resources
        );
    }
}

/// `dra.vfio_passthrough` is off unless set, strict, and not written
/// out while off.
#[test]
fn dra_vfio_passthrough_is_opt_in() {
    let text = "name: vf\nbackend: sriov\nkind: example.com/vf\ntemplate: sriov\n";
    let file = Path::new("vf.yaml");
    let g = parse(file, text).unwrap();
    assert!(!g.dra.vfio_passthrough);
    assert!(!serde_json::to_string(&g).unwrap().contains("dra"));
    let on = parse(file, &format!("{text}dra:\n  vfio_passthrough: true\n")).unwrap();
    assert!(on.dra.vfio_passthrough);
    let e = parse(file, &format!("{text}dra:\n  rebind: true\n")).unwrap_err();
    assert!(e.to_string().contains("rebind"), "{e}");
}

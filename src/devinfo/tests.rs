#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use super::*;

use proptest::prelude::*;

// ---------------------------------------------------------------- helpers

fn pci(address: &str) -> DeviceInfo {
    DeviceInfo {
        device_type: DeviceType::Pci,
        version: VERSION.into(),
        pci: Some(Pci {
            pci_address: Some(address.into()),
            ..Default::default()
        }),
        vdpa: None,
        vhost_user: None,
        memif: None,
    }
}

fn vdpa() -> DeviceInfo {
    DeviceInfo {
        device_type: DeviceType::Vdpa,
        version: VERSION.into(),
        pci: None,
        vdpa: Some(Vdpa {
            parent_device: Some("vdpa0".into()),
            driver: Some(VdpaDriver::Vhost),
            path: Some("/dev/vhost-vdpa-0".into()),
            pci_address: Some("0000:3b:00.5".into()),
            pf_pci_address: Some("0000:3b:00.0".into()),
            representor_device: Some("ens1f0npf0vf3".into()),
        }),
        vhost_user: None,
        memif: None,
    }
}

fn vhost_user() -> DeviceInfo {
    DeviceInfo {
        device_type: DeviceType::VhostUser,
        version: VERSION.into(),
        pci: None,
        vdpa: None,
        vhost_user: Some(VhostUser {
            mode: Some(VhostUserMode::Server),
            path: Some("/var/run/vhost.sock".into()),
        }),
        memif: None,
    }
}

fn memif() -> DeviceInfo {
    DeviceInfo {
        device_type: DeviceType::Memif,
        version: VERSION.into(),
        pci: None,
        vdpa: None,
        vhost_user: None,
        memif: Some(Memif {
            role: Some(MemifRole::Master),
            path: Some("/run/memif/memif1.sock".into()),
            mode: Some(MemifMode::InjectPunt),
        }),
    }
}

/// `location: message` for each problem.
fn problems(info: &DeviceInfo) -> Vec<String> {
    validate(info).iter().map(ToString::to_string).collect()
}

fn text(info: &DeviceInfo) -> String {
    String::from_utf8(to_bytes(info)).unwrap()
}

fn parse_err(bytes: &[u8]) -> String {
    match parse(bytes) {
        Ok(info) => panic!("parsed {info:?}"),
        Err(e) => e.to_string(),
    }
}

/// Applies textual fixes, each of which must match exactly once.
fn fix(original: &str, fixes: &[(&str, &str)]) -> String {
    let mut s = original.to_string();
    for (from, to) in fixes {
        assert_eq!(s.matches(from).count(), 1, "fix {from:?} must match once");
        s = s.replacen(from, to, 1);
    }
    s
}

// ---------------------------------------------------------------- round trips

#[test]
fn pci_round_trip() {
    let mut info = pci("0000:3b:00.2");
    let p = info.pci.as_mut().unwrap();
    p.vhost_net = Some("/dev/vhost-net".into());
    p.rdma_device = Some("mlx5_2".into());
    p.pf_pci_address = Some("0000:3b:00.0".into());
    p.representor_device = Some("ens1f0npf0vf0".into());
    let want = r#"{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:3b:00.2","vhost-net":"/dev/vhost-net","rdma-device":"mlx5_2","pf-pci-address":"0000:3b:00.0","representor-device":"ens1f0npf0vf0"}}"#;
    assert_eq!(text(&info), want);
    assert_eq!(parse(want.as_bytes()).unwrap(), info);
    assert_eq!(problems(&info), Vec::<String>::new());
}

#[test]
fn vdpa_round_trip() {
    let info = vdpa();
    let want = r#"{"type":"vdpa","version":"1.1.0","vdpa":{"parent-device":"vdpa0","driver":"vhost","path":"/dev/vhost-vdpa-0","pci-address":"0000:3b:00.5","pf-pci-address":"0000:3b:00.0","representor-device":"ens1f0npf0vf3"}}"#;
    assert_eq!(text(&info), want);
    assert_eq!(parse(want.as_bytes()).unwrap(), info);
    assert_eq!(problems(&info), Vec::<String>::new());
}

#[test]
fn vhost_user_round_trip() {
    let info = vhost_user();
    let want = r#"{"type":"vhost-user","version":"1.1.0","vhost-user":{"mode":"server","path":"/var/run/vhost.sock"}}"#;
    assert_eq!(text(&info), want);
    assert_eq!(parse(want.as_bytes()).unwrap(), info);
    assert_eq!(problems(&info), Vec::<String>::new());
}

#[test]
fn memif_round_trip() {
    let info = memif();
    let want = r#"{"type":"memif","version":"1.1.0","memif":{"role":"master","path":"/run/memif/memif1.sock","mode":"inject-punt"}}"#;
    assert_eq!(text(&info), want);
    assert_eq!(parse(want.as_bytes()).unwrap(), info);
    assert_eq!(problems(&info), Vec::<String>::new());
}

#[test]
fn enum_spellings() {
    for t in DeviceType::ALL {
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            format!("\"{}\"", t.as_str())
        );
        assert_eq!(t.to_string(), t.as_str());
    }
    let mut m = memif();
    for (role, mode, want) in [
        (MemifRole::Slave, MemifMode::Ethernet, r#""role":"slave","#),
        (MemifRole::Master, MemifMode::Ip, r#""mode":"ip""#),
    ] {
        let s = m.memif.as_mut().unwrap();
        s.role = Some(role);
        s.mode = Some(mode);
        let t = text(&m);
        assert!(t.contains(want), "{t}");
        assert_eq!(parse(t.as_bytes()).unwrap(), m);
    }
    let mut v = vhost_user();
    v.vhost_user.as_mut().unwrap().mode = Some(VhostUserMode::Client);
    assert!(text(&v).contains(r#""mode":"client""#));
    let mut d = vdpa();
    d.vdpa.as_mut().unwrap().driver = Some(VdpaDriver::Virtio);
    assert!(text(&d).contains(r#""driver":"virtio""#));
}

/// Go's `omitempty`: empty strings are left out, an empty section is `{}`.
#[test]
fn empty_strings_are_left_out() {
    let mut info = pci("0000:3b:00.2");
    info.pci.as_mut().unwrap().rdma_device = Some(String::new());
    assert_eq!(
        text(&info),
        r#"{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:3b:00.2"}}"#
    );
    info.version = String::new();
    info.pci = Some(Pci::default());
    assert_eq!(text(&info), r#"{"type":"pci","pci":{}}"#);
    // The serde model agrees with the hand-written encoder.
    assert_eq!(serde_json::to_string(&info).unwrap(), text(&info));
}

/// `json.Marshal` escapes HTML characters and the JavaScript line
/// separators; control characters use the short escapes where JSON has them.
#[test]
fn strings_are_escaped_as_go_does() {
    let mut info = pci("0000:3b:00.2");
    info.pci.as_mut().unwrap().vhost_net =
        Some("/a<b>&c\u{2028}\u{2029}\"\\\u{8}\u{c}\n\r\t\u{1}\u{1f}\u{7f}é".into());
    assert_eq!(
        text(&info),
        r#"{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:3b:00.2","vhost-net":"/a\u003cb\u003e\u0026c\u2028\u2029\"\\\b\f\n\r\t\u0001\u001f"#
            .to_string()
            + "\u{7f}é\"}}"
    );
    assert_eq!(parse(&to_bytes(&info)).unwrap(), info);
}

// ---------------------------------------------------------------- reference files

/// sysfs-layouts §7.3: the files the SR-IOV device plugin writes for the
/// example machine.
#[test]
fn reference_files_are_byte_identical() {
    let files = [
        (
            "nvidia.com/mlx_rdma",
            "0000:3b:00.2",
            "nvidia.com-mlx_rdma-0000:3b:00.2-device.json",
            r#"{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:3b:00.2","rdma-device":"mlx5_2"}}"#,
        ),
        (
            "nvidia.com/mlx_rdma",
            "0000:3b:00.3",
            "nvidia.com-mlx_rdma-0000:3b:00.3-device.json",
            r#"{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:3b:00.3","rdma-device":"mlx5_3"}}"#,
        ),
        (
            "nvidia.com/mlx_dpdk",
            "0000:3b:00.4",
            "nvidia.com-mlx_dpdk-0000:3b:00.4-device.json",
            r#"{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:3b:00.4"}}"#,
        ),
        (
            "nvidia.com/mlx_vdpa",
            "0000:3b:00.5",
            "nvidia.com-mlx_vdpa-0000:3b:00.5-device.json",
            r#"{"type":"vdpa","version":"1.1.0","vdpa":{"parent-device":"vdpa0","driver":"vhost","path":"/dev/vhost-vdpa-0","pci-address":"0000:3b:00.5"}}"#,
        ),
    ];
    for (resource, id, name, content) in files {
        let info = parse(content.as_bytes()).unwrap();
        assert_eq!(problems(&info), Vec::<String>::new(), "{name}");
        assert_eq!(text(&info), content);
        assert_eq!(serde_json::to_string(&info).unwrap(), content);
        assert_eq!(file_name(resource, id), name);
        assert_eq!(checked_file_name(resource, id).unwrap(), name);
        assert_eq!(
            dp_path(resource, id).unwrap(),
            PathBuf::from(format!("/var/run/k8s.cni.cncf.io/devinfo/dp/{name}"))
        );
    }
    let vdpa = parse(files[3].3.as_bytes()).unwrap();
    assert_eq!(
        vdpa.vdpa,
        Some(Vdpa {
            parent_device: Some("vdpa0".into()),
            driver: Some(VdpaDriver::Vhost),
            path: Some("/dev/vhost-vdpa-0".into()),
            pci_address: Some("0000:3b:00.5".into()),
            pf_pci_address: None,
            representor_device: None,
        })
    );
}

// ---------------------------------------------------------------- the spec's examples

/// Section 4.3, first example, exactly as the specification prints it.
const SPEC_PCI: &str = r#"{
    "type": "pci",
    "version": "1.1.0",
    "pci": {
        "pci-address": "0000:01:02.2",
        “pf-pci-address”: "0000:01:02.0"
    }
}"#;

/// Section 4.3, second example, exactly as printed.
const SPEC_VDPA: &str = r#"{
    "type": "vdpa",
    "version": "1.1.0",
    "vdpa": {
        “parent-device”: “vdpa3”,
        "driver": "vhost",
        "path: "/dev/vdpa-vhost0"
    }
}"#;

/// Section 4.3, third example, exactly as printed (it has no typo).
const SPEC_VHOST_USER: &str = r#"{
    "type": "vhost-user",
    "version": "1.1.0",
    "vhost-user": {
        "mode": "server",
        "path": "/var/run/vhost.sock"
    }
}"#;

/// Section 6.1.2: the value of the `k8s.v1.cni.cncf.io/network-status`
/// annotation, exactly as printed (the YAML block's indentation kept;
/// trailing spaces, insignificant in JSON, kept too).
const SPEC_NETWORK_STATUS: &str = r#"      [
        {
          "name": "cluster-wide-default",
          "interface": "eth0",
          "ips": [ "192.0.2.2/24", "2001:db8::2230/32" ],
          "mac": "02:11:22:33:44:54",
          "default-route": ["192.0.2.1”]
        },
        {
          "name": "sriov-network_a",
          "interface": "net1",
          "device-info": 
             {
               "type": "pci",
               "version": "1.1.0",
               "pci":
                 { 
                   "pci-address": "0000:18:02.5"
                   "pf-pci-address": "0000:18:00.0"
                 }
             }
        },
        {
          "name": "sriov-network_b",
          "interface": "net2",
          "device-info":
              {
                "type": "pci",
                "version": "1.1.0",
                "pci":
                  { 
                    "pci-address": "0000:18:0a.2"
                    "vhost-net": "/dev/vhost-net",  
                    "pf-pci-address": "0000:18:00.1"
                  }
              }
        },
        {
          "name": "userspace_net1",
          "interface": "net3",
          "mac": " 64:1f:74:32:2e:6d",
          "device-info":
              {
                "type": "vhost-user",
                "version": "1.1.0",
                "vhost-user":
                  { 
                    "mode": "client",
                    "path": "/var/run/net3/vhost.sock”
                  }
              }
        },
        {
          "name": "vdpa_net1",
          "interface": "virtio0",
          "mac": " 64:1f:74:32:2e:6e",
          "device-info":
              {
                "type": "vdpa”,
                "version": "1.1.0",
                "vdpa":
                  { 
                    "parent-device": "vdpa2",
                    "driver": "vhost",
                    "path": "/dev/vhost-vdpa0”,
                    "pci-address": "0000:02:01:6",
                    "pf-pci-address": "0000:02:01:0"
                  }
              }
         }
      ]
"#;

// The fixes, every one syntactic (each must match exactly once, and each
// is shown below to be necessary):
//
// Section 4.3, pci example:
//   1. “pf-pci-address” → "pf-pci-address" (curly quotes around a key).
// Section 4.3, vdpa example:
//   2. “parent-device” → "parent-device" (curly quotes around a key).
//   3. “vdpa3” → "vdpa3" (curly quotes around a value).
//   4. "path: → "path": (the key's closing quote is missing).
//   Kept: "/dev/vdpa-vhost0" is not how vhost_vdpa names its nodes
//   (/dev/vhost-vdpa-N) but is a valid absolute path.
// Section 6.1.2, network-status annotation:
//   5. "192.0.2.1”] → "192.0.2.1"] (curly closing quote, default-route).
//   6. "0000:18:02.5" → "0000:18:02.5", (missing comma, sriov-network_a).
//   7. "0000:18:0a.2" → "0000:18:0a.2", (missing comma, sriov-network_b).
//   8. vhost.sock” → vhost.sock" (curly closing quote, userspace_net1).
//   9. "vdpa”, → "vdpa", (curly closing quote, vdpa_net1 type).
//  10. vhost-vdpa0”, → vhost-vdpa0", (curly closing quote, vdpa_net1 path).
//   Kept: the " 64:1f:…" MACs with a leading space (not device-info), and
//   the vdpa_net1 addresses "0000:02:01:6" / "0000:02:01:0" (':' for '.'),
//   which parse but fail validation, as asserted below.

const PCI_FIXES: &[(&str, &str)] = &[("“pf-pci-address”", "\"pf-pci-address\"")];

const VDPA_FIXES: &[(&str, &str)] = &[
    ("“parent-device”", "\"parent-device\""),
    ("“vdpa3”", "\"vdpa3\""),
    ("\"path: ", "\"path\": "),
];

const NETWORK_STATUS_FIXES: &[(&str, &str)] = &[
    ("\"192.0.2.1”]", "\"192.0.2.1\"]"),
    ("\"0000:18:02.5\"\n", "\"0000:18:02.5\",\n"),
    ("\"0000:18:0a.2\"\n", "\"0000:18:0a.2\",\n"),
    ("vhost.sock”", "vhost.sock\""),
    ("\"vdpa”,", "\"vdpa\","),
    ("vhost-vdpa0”,", "vhost-vdpa0\","),
];

#[test]
fn spec_examples_fail_as_printed() {
    assert_eq!(
        parse_err(SPEC_PCI.as_bytes()),
        "invalid device information JSON: key must be a string at line 6 column 9"
    );
    assert_eq!(
        parse_err(SPEC_VDPA.as_bytes()),
        "invalid device information JSON: key must be a string at line 5 column 9"
    );
    let err = serde_json::from_str::<serde_json::Value>(SPEC_NETWORK_STATUS)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "control character (\\u0000-\\u001F) found while parsing a string at line 8 column 0"
    );
}

#[test]
fn every_fix_is_needed() {
    for (original, fixes) in [(SPEC_PCI, PCI_FIXES), (SPEC_VDPA, VDPA_FIXES)] {
        for skip in 0..fixes.len() {
            let mut some = fixes.to_vec();
            some.remove(skip);
            let text = fix(original, &some);
            assert!(
                parse(text.as_bytes()).is_err(),
                "without fix {skip}: {text}"
            );
        }
    }
    for skip in 0..NETWORK_STATUS_FIXES.len() {
        let mut some = NETWORK_STATUS_FIXES.to_vec();
        some.remove(skip);
        let text = fix(SPEC_NETWORK_STATUS, &some);
        assert!(
            serde_json::from_str::<serde_json::Value>(&text).is_err(),
            "without fix {skip}: {text}"
        );
    }
}

#[test]
fn spec_section_4_3_examples_parse_once_fixed() {
    let p = parse(fix(SPEC_PCI, PCI_FIXES).as_bytes()).unwrap();
    let mut want = pci("0000:01:02.2");
    want.pci.as_mut().unwrap().pf_pci_address = Some("0000:01:02.0".into());
    assert_eq!(p, want);
    assert_eq!(problems(&p), Vec::<String>::new());
    assert_eq!(
        text(&p),
        r#"{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:01:02.2","pf-pci-address":"0000:01:02.0"}}"#
    );

    let v = parse(fix(SPEC_VDPA, VDPA_FIXES).as_bytes()).unwrap();
    assert_eq!(
        v.vdpa,
        Some(Vdpa {
            parent_device: Some("vdpa3".into()),
            driver: Some(VdpaDriver::Vhost),
            path: Some("/dev/vdpa-vhost0".into()),
            ..Default::default()
        })
    );
    assert_eq!(problems(&v), Vec::<String>::new());
    assert_eq!(
        text(&v),
        r#"{"type":"vdpa","version":"1.1.0","vdpa":{"parent-device":"vdpa3","driver":"vhost","path":"/dev/vdpa-vhost0"}}"#
    );

    let u = parse(SPEC_VHOST_USER.as_bytes()).unwrap();
    assert_eq!(u, vhost_user());
    assert_eq!(problems(&u), Vec::<String>::new());
}

#[test]
fn spec_network_status_example_parses_once_fixed() {
    let fixed = fix(SPEC_NETWORK_STATUS, NETWORK_STATUS_FIXES);
    let entries: Vec<serde_json::Value> = serde_json::from_str(&fixed).unwrap();
    let infos: Vec<(String, DeviceInfo)> = entries
        .iter()
        .filter_map(|e| {
            let di = e.get("device-info")?;
            let name = e["name"].as_str().unwrap().to_string();
            let bytes = serde_json::to_vec(di).unwrap();
            Some((name, parse(&bytes).unwrap()))
        })
        .collect();
    let got: Vec<(&str, String, Vec<String>)> = infos
        .iter()
        .map(|(n, i)| (n.as_str(), text(i), problems(i)))
        .collect();
    assert_eq!(
        got,
        [
            (
                "sriov-network_a",
                r#"{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:18:02.5","pf-pci-address":"0000:18:00.0"}}"#.to_string(),
                vec![],
            ),
            (
                "sriov-network_b",
                r#"{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:18:0a.2","vhost-net":"/dev/vhost-net","pf-pci-address":"0000:18:00.1"}}"#.to_string(),
                vec![],
            ),
            (
                "userspace_net1",
                r#"{"type":"vhost-user","version":"1.1.0","vhost-user":{"mode":"client","path":"/var/run/net3/vhost.sock"}}"#.to_string(),
                vec![],
            ),
            (
                "vdpa_net1",
                r#"{"type":"vdpa","version":"1.1.0","vdpa":{"parent-device":"vdpa2","driver":"vhost","path":"/dev/vhost-vdpa0","pci-address":"0000:02:01:6","pf-pci-address":"0000:02:01:0"}}"#.to_string(),
                vec![
                    "vdpa.pci-address: \"0000:02:01:6\" is not a PCI address (expected dddd:bb:dd.f, such as \"0000:3b:00.2\")".to_string(),
                    "vdpa.pf-pci-address: \"0000:02:01:0\" is not a PCI address (expected dddd:bb:dd.f, such as \"0000:3b:00.2\")".to_string(),
                ],
            ),
        ]
    );
}

// ---------------------------------------------------------------- strict parsing

#[test]
fn strict_parsing() {
    assert_eq!(
        parse_err(b""),
        "file is empty (expected NPWG device information)"
    );
    assert_eq!(
        parse_err(b" \n\t"),
        "file is empty (expected NPWG device information)"
    );
    assert_eq!(parse_err(&[0xff, b'{']), "not UTF-8 text");
    assert_eq!(
        parse_err(
            br#"{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:3b:00.2"},"extra":1}"#
        ),
        "invalid device information JSON: unknown field `extra`, expected one of `type`, \
         `version`, `pci`, `vdpa`, `vhost-user`, `memif` at line 1 column 76"
    );
    assert_eq!(
        parse_err(br#"{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:3b:00.2","pciAddress":"x"}}"#),
        "invalid device information JSON: unknown field `pciAddress`, expected one of \
         `pci-address`, `vhost-net`, `rdma-device`, `pf-pci-address`, `representor-device` \
         at line 1 column 80"
    );
    assert_eq!(
        parse_err(br#"{"type":"memif","version":"1.1.0","memif":{"role":"master","mode":"punt"}}"#),
        "invalid device information JSON: unknown variant `punt`, expected one of \
         `ethernet`, `ip`, `inject-punt` at line 1 column 72"
    );
    assert_eq!(
        parse_err(br#"{"type":"PCI","version":"1.1.0"}"#),
        "invalid device information JSON: unknown variant `PCI`, expected one of `pci`, \
         `vdpa`, `vhost-user`, `memif` at line 1 column 13"
    );
    assert_eq!(
        parse_err(br#"{"type":"vdpa","version":"1.1.0","vdpa":{"driver":"vhost_vdpa"}}"#),
        "invalid device information JSON: unknown variant `vhost_vdpa`, expected `vhost` or \
         `virtio` at line 1 column 62"
    );
    assert_eq!(
        parse_err(br#"{"type":"vhost-user","version":"1.1.0","vhost-user":{"mode":"Client"}}"#),
        "invalid device information JSON: unknown variant `Client`, expected `client` or \
         `server` at line 1 column 68"
    );
    assert_eq!(
        parse_err(br#"{"type":"pci","type":"pci","version":"1.1.0"}"#),
        "invalid device information JSON: duplicate field `type` at line 1 column 20"
    );
    assert_eq!(
        parse_err(br#"{"version":"1.1.0"}"#),
        "invalid device information JSON: missing field `type` at line 1 column 19"
    );
    assert_eq!(
        parse_err(br#"{"type":"pci"}"#),
        "invalid device information JSON: missing field `version` at line 1 column 14"
    );
    assert_eq!(
        parse_err(br#"{"type":"pci","version":"1.1.0"} {}"#),
        "invalid device information JSON: trailing characters at line 1 column 34"
    );
    assert_eq!(
        parse_err(br#"{"type":"pci","version":1}"#),
        "invalid device information JSON: invalid type: integer `1`, expected a string at \
         line 1 column 25"
    );
}

// ---------------------------------------------------------------- validation

#[test]
fn version_must_be_major_minor_patch() {
    let mut info = pci("0000:3b:00.2");
    for ok in ["1.1.0", "1.0.0", "0.0.0", "10.20.30"] {
        info.version = ok.into();
        assert_eq!(problems(&info), Vec::<String>::new(), "{ok}");
    }
    info.version = String::new();
    assert_eq!(
        problems(&info),
        ["version: missing or empty (expected a MAJOR.MINOR.PATCH version such as \"1.1.0\")"]
    );
    for bad in [
        "1.1", "1.1.0.0", "v1.1.0", "1.01.0", "1..0", "1.1.0 ", "1.1.x", "1.1.-0",
    ] {
        info.version = bad.into();
        assert_eq!(
            problems(&info),
            [format!(
                "version: {bad:?} is not a MAJOR.MINOR.PATCH version (expected three \
                 dot-separated numbers without leading zeros, such as \"1.1.0\")"
            )]
        );
    }
}

#[test]
fn the_section_must_match_the_type() {
    let mut info = pci("0000:3b:00.2");
    info.device_type = DeviceType::Vdpa;
    assert_eq!(
        problems(&info),
        [
            "pci: not allowed when \"type\" is \"vdpa\" (only the \"vdpa\" section may be present)",
            "vdpa: missing (required when \"type\" is \"vdpa\")",
        ]
    );
    let mut info = vhost_user();
    info.memif = memif().memif;
    assert_eq!(
        problems(&info),
        [
            "memif: not allowed when \"type\" is \"vhost-user\" (only the \"vhost-user\" section may be present)"
        ]
    );
    let mut info = memif();
    info.memif = None;
    assert_eq!(
        problems(&info),
        ["memif: missing (required when \"type\" is \"memif\")"]
    );
    // A stray section is still checked.
    let mut info = vhost_user();
    info.pci = Some(Pci::default());
    assert_eq!(
        problems(&info),
        [
            "pci: not allowed when \"type\" is \"vhost-user\" (only the \"vhost-user\" section may be present)",
            "pci.pci-address: missing (required; expected a PCI address such as \"0000:3b:00.2\")",
        ]
    );
}

#[test]
fn required_keys() {
    let mut info = pci("0000:3b:00.2");
    info.pci = Some(Pci::default());
    assert_eq!(
        problems(&info),
        ["pci.pci-address: missing (required; expected a PCI address such as \"0000:3b:00.2\")"]
    );
    info.pci.as_mut().unwrap().pci_address = Some(String::new());
    assert_eq!(
        problems(&info),
        ["pci.pci-address: empty (required; expected a PCI address such as \"0000:3b:00.2\")"]
    );

    let mut info = vdpa();
    info.vdpa = Some(Vdpa::default());
    assert_eq!(
        problems(&info),
        [
            "vdpa.parent-device: missing (required; expected a vDPA device name such as \"vdpa0\")",
            "vdpa.driver: missing (required; expected \"vhost\" or \"virtio\")",
            "vdpa.path: missing (required; expected an absolute device path such as \"/dev/vhost-vdpa-0\")",
        ]
    );

    let mut info = vhost_user();
    info.vhost_user = Some(VhostUser::default());
    assert_eq!(
        problems(&info),
        [
            "vhost-user.mode: missing (required; expected \"client\" or \"server\")",
            "vhost-user.path: missing (required; expected an absolute socket path such as \"/var/run/vhost.sock\")",
        ]
    );

    let mut info = memif();
    info.memif = Some(Memif::default());
    assert_eq!(
        problems(&info),
        [
            "memif.role: missing (required; expected \"master\" or \"slave\")",
            "memif.path: missing (required; expected an absolute socket path such as \"/run/memif/memif1.sock\")",
            "memif.mode: missing (required; expected \"ethernet\", \"ip\" or \"inject-punt\")",
        ]
    );
}

#[test]
fn optional_keys_must_not_be_empty() {
    let mut info = vdpa();
    let v = info.vdpa.as_mut().unwrap();
    v.pci_address = Some(String::new());
    v.pf_pci_address = Some(String::new());
    v.representor_device = Some(String::new());
    assert_eq!(
        problems(&info),
        [
            "vdpa.pci-address: empty (leave the key out instead)",
            "vdpa.pf-pci-address: empty (leave the key out instead)",
            "vdpa.representor-device: empty (leave the key out instead)",
        ]
    );
    let mut info = pci("0000:3b:00.2");
    let p = info.pci.as_mut().unwrap();
    p.vhost_net = Some(String::new());
    p.rdma_device = Some(String::new());
    assert_eq!(
        problems(&info),
        [
            "pci.vhost-net: empty (leave the key out instead)",
            "pci.rdma-device: empty (leave the key out instead)",
        ]
    );
}

#[test]
fn pci_addresses_must_be_canonical() {
    for ok in ["0000:3b:00.2", "0000:ff:1f.7", "10000:e1:1f.7"] {
        assert_eq!(problems(&pci(ok)), Vec::<String>::new(), "{ok}");
    }
    let not_an_address = |a: &str| {
        format!(
            "pci.pci-address: {a:?} is not a PCI address (expected dddd:bb:dd.f, such as \
             \"0000:3b:00.2\")"
        )
    };
    for bad in [
        "0000:02:01:6",
        "3b:00.2",
        "0000:3b:00",
        "0000:3b:20.0",
        "0000:3b:00.8",
        "0000:3b:0.2",
        " 0000:3b:00.2",
        "0000:3b:00.2\n",
        "pci-0000:3b:00.2",
    ] {
        assert_eq!(problems(&pci(bad)), [not_an_address(bad)]);
    }
    assert_eq!(
        problems(&pci("0000:3B:00.2")),
        [
            "pci.pci-address: \"0000:3B:00.2\" is not in canonical form (expected \
          \"0000:3b:00.2\": lowercase dddd:bb:dd.f)"
        ]
    );
    assert_eq!(
        problems(&pci("00000000:3b:00.2")),
        [
            "pci.pci-address: \"00000000:3b:00.2\" is not in canonical form (expected \
          \"0000:3b:00.2\": lowercase dddd:bb:dd.f)"
        ]
    );

    let mut info = pci("0000:3b:00.2");
    info.pci.as_mut().unwrap().pf_pci_address = Some("0000:3B:00.0".into());
    assert_eq!(
        problems(&info),
        [
            "pci.pf-pci-address: \"0000:3B:00.0\" is not in canonical form (expected \
          \"0000:3b:00.0\": lowercase dddd:bb:dd.f)"
        ]
    );
    let mut info = vdpa();
    info.vdpa.as_mut().unwrap().pci_address = Some("3b:00.5".into());
    info.vdpa.as_mut().unwrap().pf_pci_address = Some("0000:3b:00.0 ".into());
    assert_eq!(
        problems(&info),
        [
            "vdpa.pci-address: \"3b:00.5\" is not a PCI address (expected dddd:bb:dd.f, such as \
             \"0000:3b:00.2\")",
            "vdpa.pf-pci-address: \"0000:3b:00.0 \" is not a PCI address (expected \
             dddd:bb:dd.f, such as \"0000:3b:00.2\")",
        ]
    );
}

#[test]
fn paths_must_be_absolute_without_nul_or_newline() {
    let mut info = pci("0000:3b:00.2");
    info.pci.as_mut().unwrap().vhost_net = Some("dev/vhost-net".into());
    assert_eq!(
        problems(&info),
        [
            "pci.vhost-net: \"dev/vhost-net\" is not an absolute path (expected a path starting \
          with \"/\")"
        ]
    );
    info.pci.as_mut().unwrap().vhost_net = Some("/dev/vhost\0net".into());
    assert_eq!(
        problems(&info),
        [
            "pci.vhost-net: \"/dev/vhost\\0net\" contains '\\0' (a path must not contain a NUL \
          byte or a newline)"
        ]
    );

    let mut info = vdpa();
    info.vdpa.as_mut().unwrap().path = Some("/dev/vhost-vdpa-0\n".into());
    assert_eq!(
        problems(&info),
        [
            "vdpa.path: \"/dev/vhost-vdpa-0\\n\" contains '\\n' (a path must not contain a NUL \
          byte or a newline)"
        ]
    );
    info.vdpa.as_mut().unwrap().path = Some("vhost-vdpa-0".into());
    assert_eq!(
        problems(&info),
        [
            "vdpa.path: \"vhost-vdpa-0\" is not an absolute path (expected a path starting with \
          \"/\")"
        ]
    );

    let mut info = vhost_user();
    info.vhost_user.as_mut().unwrap().path = Some("vhost.sock".into());
    assert_eq!(
        problems(&info),
        [
            "vhost-user.path: \"vhost.sock\" is not an absolute path (expected a path starting \
          with \"/\")"
        ]
    );
    let mut info = memif();
    info.memif.as_mut().unwrap().path = Some("/run/memif\n.sock".into());
    assert_eq!(
        problems(&info),
        [
            "memif.path: \"/run/memif\\n.sock\" contains '\\n' (a path must not contain a NUL \
          byte or a newline)"
        ]
    );
    info.memif.as_mut().unwrap().path = Some(String::new());
    assert_eq!(
        problems(&info),
        [
            "memif.path: empty (required; expected an absolute socket path such as \
          \"/run/memif/memif1.sock\")"
        ]
    );
}

#[test]
fn rdma_device_is_a_comma_separated_list() {
    let mut info = pci("0000:3b:00.2");
    for ok in ["mlx5_2", "mlx5_2,mlx5_3", "rocep59s0f0v0"] {
        info.pci.as_mut().unwrap().rdma_device = Some(ok.into());
        assert_eq!(problems(&info), Vec::<String>::new(), "{ok}");
    }
    let cases = [
        (
            "mlx5_2,,mlx5_3",
            "\"mlx5_2,,mlx5_3\" has an empty name at position 2",
        ),
        ("mlx5_2,", "\"mlx5_2,\" has an empty name at position 2"),
        (",mlx5_2", "\",mlx5_2\" has an empty name at position 1"),
    ];
    for (bad, start) in cases {
        info.pci.as_mut().unwrap().rdma_device = Some(bad.into());
        assert_eq!(
            problems(&info),
            [format!(
                "pci.rdma-device: {start} (expected comma-separated RDMA device names such as \
                 \"mlx5_2\" or \"mlx5_2,mlx5_3\")"
            )]
        );
    }
    for (bad, name, ch) in [
        ("mlx5_2, mlx5_3", "\" mlx5_3\"", "' '"),
        ("mlx5 2", "\"mlx5 2\"", "' '"),
        ("mlx5_2\n", "\"mlx5_2\\n\"", "'\\n'"),
        ("infiniband/mlx5_2", "\"infiniband/mlx5_2\"", "'/'"),
    ] {
        info.pci.as_mut().unwrap().rdma_device = Some(bad.into());
        assert_eq!(
            problems(&info),
            [format!(
                "pci.rdma-device: {bad:?} has {name}, which contains {ch} (expected \
                 comma-separated RDMA device names without whitespace or '/', such as \
                 \"mlx5_2,mlx5_3\")"
            )]
        );
    }
}

#[test]
fn representor_device_is_an_interface_name() {
    let mut info = vdpa();
    for ok in ["eth3", "ens1f0npf0vf0", "a", "abcdefghijklmno", "en-p.1_x"] {
        info.vdpa.as_mut().unwrap().representor_device = Some(ok.into());
        assert_eq!(problems(&info), Vec::<String>::new(), "{ok}");
    }
    let cases = [
        (
            "abcdefghijklmnop",
            "\"abcdefghijklmnop\" is longer than 15 bytes (expected an interface name; the \
             kernel's IFNAMSIZ limit)",
        ),
        (".", "\".\" is not an interface name"),
        ("..", "\"..\" is not an interface name"),
        (
            "eth0/1",
            "\"eth0/1\" contains '/', not allowed in an interface name",
        ),
        (
            "eth0:1",
            "\"eth0:1\" contains ':', not allowed in an interface name",
        ),
        (
            "eth 0",
            "\"eth 0\" contains ' ', not allowed in an interface name",
        ),
        (
            "eth\u{a0}0",
            "\"eth\\u{a0}0\" contains '\\u{a0}', not allowed in an interface name",
        ),
    ];
    for (bad, message) in cases {
        info.vdpa.as_mut().unwrap().representor_device = Some(bad.into());
        assert_eq!(
            problems(&info),
            [format!("vdpa.representor-device: {message}")]
        );
    }
    let mut info = pci("0000:3b:00.2");
    info.pci.as_mut().unwrap().representor_device = Some("eth\t0".into());
    assert_eq!(
        problems(&info),
        ["pci.representor-device: \"eth\\t0\" contains '\\t', not allowed in an interface name"]
    );
}

#[test]
fn parent_device_is_a_vdpa_device_name() {
    let mut info = vdpa();
    for ok in ["vdpa0", "vdpa-3b:00.5", "mlx5_vdpa.0"] {
        info.vdpa.as_mut().unwrap().parent_device = Some(ok.into());
        assert_eq!(problems(&info), Vec::<String>::new(), "{ok}");
    }
    let cases = [
        ("pci/0000:3b:00.5", "contains '/'"),
        ("vdpa 0", "contains ' '"),
        ("vdpa0\n", "contains '\\n'"),
    ];
    for (bad, what) in cases {
        info.vdpa.as_mut().unwrap().parent_device = Some(bad.into());
        assert_eq!(
            problems(&info),
            [format!(
                "vdpa.parent-device: {bad:?} {what} (expected a name under \
                 /sys/bus/vdpa/devices, such as \"vdpa0\")"
            )]
        );
    }
    info.vdpa.as_mut().unwrap().parent_device = Some("..".into());
    assert_eq!(
        problems(&info),
        [
            "vdpa.parent-device: \"..\" is not a device name (expected a name under \
          /sys/bus/vdpa/devices, such as \"vdpa0\")"
        ]
    );
}

#[test]
fn problems_accumulate() {
    let info = DeviceInfo {
        device_type: DeviceType::Pci,
        version: "1.1".into(),
        pci: Some(Pci {
            pci_address: Some("0000:3B:00.2".into()),
            vhost_net: Some("vhost-net".into()),
            ..Default::default()
        }),
        vdpa: None,
        vhost_user: Some(VhostUser::default()),
        memif: None,
    };
    assert_eq!(
        problems(&info),
        [
            "version: \"1.1\" is not a MAJOR.MINOR.PATCH version (expected three dot-separated \
             numbers without leading zeros, such as \"1.1.0\")",
            "vhost-user: not allowed when \"type\" is \"pci\" (only the \"pci\" section may be \
             present)",
            "pci.pci-address: \"0000:3B:00.2\" is not in canonical form (expected \
             \"0000:3b:00.2\": lowercase dddd:bb:dd.f)",
            "pci.vhost-net: \"vhost-net\" is not an absolute path (expected a path starting with \
             \"/\")",
            "vhost-user.mode: missing (required; expected \"client\" or \"server\")",
            "vhost-user.path: missing (required; expected an absolute socket path such as \
             \"/var/run/vhost.sock\")",
        ]
    );
    let first = &validate(&info)[0];
    assert_eq!(first.location, "version");
}

// ---------------------------------------------------------------- file names

#[test]
fn file_names() {
    assert_eq!(
        file_name("nvidia.com/mlx_rdma", "0000:3b:00.2"),
        "nvidia.com-mlx_rdma-0000:3b:00.2-device.json"
    );
    assert_eq!(
        checked_file_name("example.com/a/b", "pci/0000:3b:00.2").unwrap(),
        "example.com-a-b-pci-0000:3b:00.2-device.json"
    );
    assert_eq!(
        checked_file_name("intel.com/intel_sriov_netdevice", "a1-B2_c3.d4").unwrap(),
        "intel.com-intel_sriov_netdevice-a1-B2_c3.d4-device.json"
    );
    // Unchecked, the mapping is the reference library's, whatever the input.
    assert_eq!(file_name("", "../x"), "-..-x-device.json");
    assert_eq!(DP_DIR, "/var/run/k8s.cni.cncf.io/devinfo/dp");
    assert_eq!(CNI_DIR, "/var/run/k8s.cni.cncf.io/devinfo/cni");
}

#[test]
fn file_names_rejected() {
    let err = |r: &str, d: &str| checked_file_name(r, d).unwrap_err().to_string();
    let id = "0000:3b:00.2";
    let res = "nvidia.com/mlx_rdma";
    assert_eq!(err("", id), "resource name \"\": must not be empty");
    assert_eq!(err(res, ""), "device ID \"\": must not be empty");
    let segment = "has an empty \"/\"-separated segment (a leading, trailing or doubled \"/\")";
    assert_eq!(
        err("nvidia.com//mlx", id),
        format!("resource name \"nvidia.com//mlx\": {segment}")
    );
    assert_eq!(
        err("/mlx", id),
        format!("resource name \"/mlx\": {segment}")
    );
    assert_eq!(err(res, "pci/"), format!("device ID \"pci/\": {segment}"));
    let dots = "(\".\" and \"..\" are not allowed, alone or between \"/\")";
    assert_eq!(
        err(res, ".."),
        format!("device ID \"..\": has a \"..\" segment {dots}")
    );
    assert_eq!(
        err(res, "."),
        format!("device ID \".\": has a \".\" segment {dots}")
    );
    assert_eq!(
        err("nvidia.com/../etc", id),
        format!("resource name \"nvidia.com/../etc\": has a \"..\" segment {dots}")
    );
    let chars = "(expected only A-Z a-z 0-9 . _ : - and /, which becomes -)";
    for (r, d, part, value, ch) in [
        (
            res,
            "0000:3b:00.2\0",
            "device ID",
            "\"0000:3b:00.2\\0\"",
            "'\\0'",
        ),
        (
            res,
            "0000:3b:00.2\n",
            "device ID",
            "\"0000:3b:00.2\\n\"",
            "'\\n'",
        ),
        (res, "a b", "device ID", "\"a b\"", "' '"),
        (
            "nvidia.com/mlx rdma",
            id,
            "resource name",
            "\"nvidia.com/mlx rdma\"",
            "' '",
        ),
        (
            "nvidia.com\\mlx",
            id,
            "resource name",
            "\"nvidia.com\\\\mlx\"",
            "'\\\\'",
        ),
        (
            "nvidiä.com/mlx",
            id,
            "resource name",
            "\"nvidiä.com/mlx\"",
            "'ä'",
        ),
    ] {
        assert_eq!(
            err(r, d),
            format!("{part} {value}: contains {ch} {chars}"),
            "{r:?} {d:?}"
        );
    }
    let long = "a".repeat(240);
    let name = file_name(res, &long);
    assert_eq!(
        err(res, &long),
        format!("file name {name:?} is 272 bytes (at most 255)")
    );
    assert_eq!(
        dp_path("", id).unwrap_err(),
        FileNameError::Part {
            part: NamePart::Resource,
            value: String::new(),
            reason: "must not be empty".into(),
        }
    );
}

// ---------------------------------------------------------------- properties

fn valid_pci() -> impl Strategy<Value = DeviceInfo> {
    let address = (0u32..=0xffff, any::<u8>(), 0u8..32, 0u8..8).prop_map(|(d, b, dev, f)| {
        PciAddress {
            domain: d,
            bus: b,
            device: dev,
            function: f,
        }
        .to_string()
    });
    (
        address.clone(),
        proptest::option::of("/[a-zA-Z0-9<>&_./\u{2028}-]{0,20}"),
        proptest::option::of("[a-z0-9_]{1,8}(,[a-z0-9_]{1,8}){0,2}"),
        proptest::option::of(address),
        proptest::option::of("[a-zA-Z0-9_.-]{3,15}"),
    )
        .prop_map(|(pci_address, vhost_net, rdma, pf, rep)| DeviceInfo {
            device_type: DeviceType::Pci,
            version: VERSION.into(),
            pci: Some(Pci {
                pci_address: Some(pci_address),
                vhost_net,
                rdma_device: rdma,
                pf_pci_address: pf,
                representor_device: rep,
            }),
            vdpa: None,
            vhost_user: None,
            memif: None,
        })
}

proptest! {
    #[test]
    fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        if let Ok(info) = parse(&bytes) {
            let _ = validate(&info);
            let _ = to_bytes(&info);
        }
    }

    #[test]
    fn parse_never_panics_on_near_json(s in r#"[{}\[\]":, a-z0-9.\\-]{0,120}"#) {
        let wrapped = format!(r#"{{"type":"pci","version":"1.1.0","pci":{{{s}}}}}"#);
        if let Ok(info) = parse(wrapped.as_bytes()) {
            let _ = validate(&info);
            let _ = to_bytes(&info);
        }
        let _ = parse(s.as_bytes());
    }

    #[test]
    fn valid_pci_infos_round_trip(info in valid_pci()) {
        prop_assert_eq!(validate(&info), Vec::new());
        let bytes = to_bytes(&info);
        prop_assert!(!bytes.ends_with(b"\n"));
        let back = parse(&bytes).unwrap();
        prop_assert_eq!(&back, &info);
        prop_assert_eq!(to_bytes(&back), bytes.clone());
        // Apart from Go's HTML escapes, serde's encoding is the same.
        let serde = serde_json::to_string(&info).unwrap()
            .replace('<', "\\u003c")
            .replace('>', "\\u003e")
            .replace('&', "\\u0026")
            .replace('\u{2028}', "\\u2028");
        prop_assert_eq!(serde.into_bytes(), bytes);
    }

    #[test]
    fn file_name_check_accepts_only_plain_names(r in "[a-z./_:-]{0,12}", d in "[a-z0-9./:\n -]{0,12}") {
        if let Ok(name) = checked_file_name(&r, &d) {
            prop_assert!(!name.contains('/'));
            prop_assert!(name.bytes().all(|b| b.is_ascii_alphanumeric() || b".-_:".contains(&b)));
            prop_assert_eq!(name, file_name(&r, &d));
        }
    }
}

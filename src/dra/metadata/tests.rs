#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt as _;

use serde::Deserialize;

use super::*;

const UID: &str = "6f1d3c2a-8b4e-4a7f-9c21-0d5e7b3a9f10";

fn claim(pod_claim_name: Option<&str>) -> ClaimMeta {
    ClaimMeta {
        namespace: "default".into(),
        name: "my-claim".into(),
        uid: UID.into(),
        pod_claim_name: pod_claim_name.map(String::from),
    }
}

fn attr(f: impl FnOnce(&mut DeviceAttribute)) -> DeviceAttribute {
    let mut a = DeviceAttribute::default();
    f(&mut a);
    a
}

fn nic_devices() -> Vec<DeviceMeta> {
    vec![
        DeviceMeta {
            pool: "node1".into(),
            device: "sriov-0000-3b-00-2".into(),
            attributes: BTreeMap::from([
                (
                    "resource.kubernetes.io/pciBusID".to_string(),
                    attr(|a| a.string = Some("0000:3b:00.2".into())),
                ),
                ("dra.cdigen.io/numaNode".into(), attr(|a| a.int = Some(0))),
                ("dra.cdigen.io/sriov".into(), attr(|a| a.bool = Some(true))),
                (
                    "dra.cdigen.io/driverVersion".into(),
                    attr(|a| a.version = Some("1.2.3".into())),
                ),
                (
                    "dra.cdigen.io/model".into(),
                    attr(|a| a.string = Some("X710 <10G> & more".into())),
                ),
            ]),
            network_data: Some(NetworkDeviceData {
                interface_name: Some("ens1f0v0".into()),
                ips: Some(vec!["10.0.0.2/24".into(), "fd00::2/64".into()]),
                hardware_address: Some("aa:bb:cc:dd:ee:01".into()),
            }),
        },
        DeviceMeta {
            pool: "node1".into(),
            device: "sriov-0000-3b-00-3".into(),
            attributes: BTreeMap::new(),
            network_data: Some(NetworkDeviceData {
                interface_name: Some("ens1f0v1".into()),
                ..NetworkDeviceData::default()
            }),
        },
    ]
}

fn gpu_devices() -> Vec<DeviceMeta> {
    vec![DeviceMeta {
        pool: "node1".into(),
        device: "gpu-0".into(),
        attributes: BTreeMap::from([
            (
                "model".to_string(),
                attr(|a| a.string = Some("A\u{2028}B\t\"q\"\\\u{1}\u{7f}\u{8}\u{c}é".into())),
            ),
            ("count".into(), attr(|a| a.int = Some(i64::MIN))),
        ]),
        network_data: Some(NetworkDeviceData::default()),
    }]
}

/// The bytes are the upstream encoder's: the goldens are what Go's
/// `json.MarshalIndent(v, "", "  ")` plus a newline (the upstream
/// `encodeMetadataStream` of one version) made of the same values in
/// structs with the JSON tags of `metadata/v1alpha1` and
/// `resource/v1` (`TypeMeta` and `ObjectMeta`'s too): field order, the
/// `omitempty`s, a zero int kept (a pointer), an empty `networkData`
/// kept as `{}`, map keys sorted, HTML characters and U+2028 escaped,
/// `\b` and `\f` short, DEL raw.
#[test]
fn bytes_are_the_upstream_encoders() {
    let nic = File::new("dra.cdigen.io", &claim(None), "nic", &nic_devices());
    assert_eq!(
        String::from_utf8(nic.to_bytes().unwrap()).unwrap(),
        include_str!("golden-nic.json")
    );
    let gpu = File::new(
        "dra.cdigen.io",
        &claim(Some("gpus")),
        "gpu/small",
        &gpu_devices(),
    );
    assert_eq!(
        String::from_utf8(gpu.to_bytes().unwrap()).unwrap(),
        include_str!("golden-gpu.json")
    );
}

/// `metadata.resource.k8s.io/v1alpha1` as upstream's types define it:
/// every field they have and no other (unknown fields refused), the
/// fields without `omitempty` required.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(dead_code)]
struct UpstreamMetadata {
    kind: String,
    api_version: String,
    #[serde(default)]
    metadata: UpstreamObjectMeta,
    pod_claim_name: Option<String>,
    #[serde(default)]
    requests: Vec<UpstreamRequest>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct UpstreamObjectMeta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    generation: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct UpstreamRequest {
    name: String,
    #[serde(default)]
    devices: Vec<UpstreamDevice>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(dead_code)]
struct UpstreamDevice {
    driver: String,
    pool: String,
    name: String,
    #[serde(default)]
    attributes: BTreeMap<String, UpstreamAttribute>,
    network_data: Option<UpstreamNetworkData>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct UpstreamAttribute {
    int: Option<i64>,
    bool: Option<bool>,
    string: Option<String>,
    version: Option<String>,
    ints: Option<Vec<i64>>,
    bools: Option<Vec<bool>>,
    strings: Option<Vec<String>>,
    versions: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(dead_code)]
struct UpstreamNetworkData {
    interface_name: Option<String>,
    ips: Option<Vec<String>>,
    hardware_address: Option<String>,
}

/// `devicemetadata.DecodeMetadataFromStream`'s rules: a stream of JSON
/// objects; each must name its `apiVersion` and `kind` (the universal
/// deserializer finds the type by them); one of an unregistered version
/// is skipped; the first of the registered version is decoded (here
/// strictly, against the whole field set of the upstream types).
fn upstream_decode(bytes: &[u8]) -> Result<UpstreamMetadata, String> {
    let mut unknown = Vec::new();
    for v in serde_json::Deserializer::from_slice(bytes).into_iter::<serde_json::Value>() {
        let v = v.map_err(|e| format!("read metadata object from stream: {e}"))?;
        let (Some(version), Some(kind)) = (v["apiVersion"].as_str(), v["kind"].as_str()) else {
            return Err("Object 'Kind' or 'apiVersion' is missing".into());
        };
        if version != API_VERSION || kind != KIND {
            unknown.push(version.to_string());
            continue;
        }
        return serde_json::from_value(v).map_err(|e| e.to_string());
    }
    Err(format!("no compatible metadata version found: {unknown:?}"))
}

#[test]
fn the_upstream_decoder_reads_it() {
    let nic = File::new("dra.cdigen.io", &claim(None), "nic", &nic_devices());
    let m = upstream_decode(&nic.to_bytes().unwrap()).unwrap();
    assert_eq!(m.metadata.name.as_deref(), Some("my-claim"));
    assert_eq!(m.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(m.metadata.uid.as_deref(), Some(UID));
    assert_eq!(m.metadata.generation, Some(1));
    assert_eq!(m.pod_claim_name, None);
    let [r] = &m.requests[..] else { panic!() };
    assert_eq!(r.name, "nic");
    assert_eq!(r.devices.len(), 2);
    assert_eq!(r.devices[0].driver, "dra.cdigen.io");
    assert_eq!(r.devices[0].attributes.len(), 5);
    let net = r.devices[0].network_data.as_ref().unwrap();
    assert_eq!(net.interface_name.as_deref(), Some("ens1f0v0"));
    assert_eq!(net.ips.as_ref().unwrap().len(), 2);
    let gpu = File::new(
        "dra.cdigen.io",
        &claim(Some("gpus")),
        "gpu/small",
        &gpu_devices(),
    );
    let m = upstream_decode(&gpu.to_bytes().unwrap()).unwrap();
    assert_eq!(m.pod_claim_name.as_deref(), Some("gpus"));
    assert_eq!(m.requests[0].name, "gpu/small");

    // The mirror is strict: what cdigen wrote before is refused by it, as
    // a file of an unknown version is skipped by the upstream decoder.
    let old = br#"{"apiVersion": "metadata.dra.cdigen.io/v1alpha1", "kind": "DeviceMetadata", "driver": "x"}"#;
    let e = upstream_decode(old).unwrap_err();
    assert_eq!(
        e,
        "no compatible metadata version found: [\"metadata.dra.cdigen.io/v1alpha1\"]"
    );
    let extra = br#"{"apiVersion": "metadata.resource.k8s.io/v1alpha1", "kind": "DeviceMetadata",
        "requests": [{"name": "a", "devices": [{"driver": "d", "pool": "p", "name": "n", "adminAccess": true}]}]}"#;
    let e = upstream_decode(extra).unwrap_err();
    assert!(e.starts_with("unknown field `adminAccess`"), "{e}");
}

#[test]
fn paths_follow_the_upstream_layout() {
    assert_eq!(
        container_path("dra.cdigen.io", &claim(None), "nic"),
        "/var/run/kubernetes.io/dra-device-attributes/resourceclaims/my-claim/nic/dra.cdigen.io-metadata.json"
    );
    assert_eq!(
        container_path("dra.cdigen.io", &claim(Some("gpus")), "gpu"),
        "/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/gpus/gpu/dra.cdigen.io-metadata.json"
    );
    assert_eq!(
        host_path(Path::new("/p/d"), UID, "gpu"),
        Path::new("/p/d/dra-device-metadata")
            .join(UID)
            .join("gpu/metadata.json")
    );
}

#[test]
fn hostile_names_are_refused() {
    assert_eq!(base_request("gpu").unwrap(), "gpu");
    assert_eq!(base_request("gpu/small").unwrap(), "gpu");
    for bad in [
        "", "..", ".", "../x", "a/..", "a/b/c", "a/", "/a", "A", "a b", "a\0",
    ] {
        let e = base_request(bad).unwrap_err();
        assert!(
            e.ends_with("is not a DNS label, or two joined by /"),
            "{bad}: {e}"
        );
    }
    let ann = |v: &str| BTreeMap::from([(POD_CLAIM_ANNOTATION.to_string(), v.to_string())]);
    assert_eq!(pod_claim_name(None).unwrap(), None);
    assert_eq!(pod_claim_name(Some(&BTreeMap::new())).unwrap(), None);
    assert_eq!(
        pod_claim_name(Some(&ann("gpus"))).unwrap().as_deref(),
        Some("gpus")
    );
    for bad in ["..", "a/b", "", "x.y"] {
        let e = pod_claim_name(Some(&ann(bad))).unwrap_err();
        assert!(
            e.starts_with("annotation resource.kubernetes.io/pod-claim-name")
                && e.ends_with("is not a DNS label"),
            "{e}"
        );
    }
}

#[test]
fn written_with_upstream_modes_and_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let file = write(d, UID, "nic", b"{}\n").unwrap();
    write(d, UID, "gpu", b"{}\n").unwrap();
    assert_eq!(file, host_path(d, UID, "nic"));
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&file), 0o644);
    assert_eq!(mode(&claim_dir(d, UID)), 0o755);
    assert_eq!(mode(file.parent().unwrap()), 0o755);
    // A file of the earlier format goes too.
    std::fs::create_dir(d.join(LEGACY_DIR)).unwrap();
    std::fs::write(d.join(LEGACY_DIR).join(format!("{UID}.json")), "{}").unwrap();
    remove(d, UID).unwrap();
    assert!(!claim_dir(d, UID).exists());
    assert!(!d.join(LEGACY_DIR).join(format!("{UID}.json")).exists());
    assert!(dir(d).is_dir());
    remove(d, UID).unwrap();

    // What is not cdigen's is left alone, and said.
    write(d, UID, "nic", b"{}\n").unwrap();
    let foreign = claim_dir(d, UID).join("nic/other");
    std::fs::write(&foreign, "x").unwrap();
    let e = remove(d, UID).unwrap_err();
    assert!(
        e.ends_with("other is a regular file, not a metadata file; leaving it alone"),
        "{e}"
    );
    assert!(foreign.exists());
    std::fs::remove_file(&foreign).unwrap();
    remove(d, UID).unwrap();

    // A link in the claim's place is neither followed nor removed.
    let elsewhere = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), claim_dir(d, UID)).unwrap();
    let e = write(d, UID, "nic", b"{}\n").unwrap_err();
    assert!(
        e.contains("is a symbolic link, not a directory; leaving it alone"),
        "{e}"
    );
    assert!(
        std::fs::read_dir(elsewhere.path())
            .unwrap()
            .next()
            .is_none()
    );
    let e = remove(d, UID).unwrap_err();
    assert!(
        e.ends_with("not a metadata directory; leaving it alone"),
        "{e}"
    );
}

#[test]
fn tidy_removes_temp_files_in_request_directories() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let file = write(d, UID, "nic", b"{}\n").unwrap();
    let temp = file.parent().unwrap().join(".cdigen-x.tmp");
    std::fs::write(&temp, "partial").unwrap();
    tidy(d).unwrap();
    assert!(!temp.exists());
    assert!(file.exists());
}

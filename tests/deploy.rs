//! Least privilege of the Kubernetes DaemonSets: every DaemonSet under
//! `deploy/kubernetes` (each mode's overlay), and, through
//! `.ci/check-kubernetes.sh`, every one that kustomize and Helm render,
//! mounts only the host paths its mode reads or writes (never the host's
//! `/`), read-only unless the mode writes there, and runs every container
//! unprivileged: no capability, read-only root filesystem, no privilege
//! escalation, RuntimeDefault seccomp, no host namespaces.
//! docs/kubernetes-deploy.md says why each path is there.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// Host paths every mode reads (discovery: sysfs, procfs, devfs, the
/// driver's files and the linker cache, the GPU operator's driver root and
/// the NVIDIA daemons' sockets, udevd's queue; the static spec directory).
const READ_ALWAYS: &[&str] = &[
    "/sys",
    "/proc",
    "/dev",
    "/usr",
    "/lib",
    "/lib64",
    "/bin",
    "/etc",
    "/run/nvidia",
    "/run/nvidia-persistenced",
    "/run/nvidia-fabricmanager",
    "/run/udev",
    "/etc/cdi",
];

/// Host paths every mode writes: the CDI specs, and the hook program the
/// init container installs.
const WRITE_ALWAYS: &[&str] = &["/var/run/cdi", "/opt/cdigen"];

/// The mode of a DaemonSet (its container's subcommand) and the host paths
/// it may mount on top of the above: (path, writable).
fn mode_paths(subcommand: &str) -> &'static [(&'static str, bool)] {
    match subcommand {
        "watch" => &[("/var/run/k8s.cni.cncf.io/devinfo/dp", true)],
        "device-plugin" => &[
            ("/var/run/k8s.cni.cncf.io/devinfo/dp", true),
            ("/var/lib/kubelet/device-plugins", true),
            ("/var/lib/kubelet/pod-resources", false),
        ],
        "dra-driver" => &[
            ("/var/lib/kubelet/plugins/dra.cdigen.io", true),
            ("/var/lib/kubelet/plugins_registry", true),
        ],
        other => panic!("{other}: not a mode cdigen is deployed in"),
    }
}

/// Whether `path` may be mounted by the mode of `subcommand`: Some(writable).
fn allowed(subcommand: &str, path: &str) -> Option<bool> {
    if READ_ALWAYS.contains(&path) {
        return Some(false);
    }
    if WRITE_ALWAYS.contains(&path) {
        return Some(true);
    }
    mode_paths(subcommand)
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, w)| *w)
}

/// What is wrong with the DaemonSet `ds` (named `what` in the messages):
/// empty when it is least privilege.
fn violations(what: &str, ds: &Value) -> Vec<String> {
    let mut bad = Vec::new();
    let pod = &ds["spec"]["template"]["spec"];
    for ns in ["hostNetwork", "hostPID", "hostIPC"] {
        if pod[ns] == true {
            bad.push(format!("{what}: {ns}"));
        }
    }
    let containers = pod["containers"].as_array().cloned().unwrap_or_default();
    let Some(main) = containers.first() else {
        return vec![format!("{what}: no container")];
    };
    let subcommand = main["args"][0].as_str().unwrap_or_default().to_string();
    let volumes = pod["volumes"].as_array().cloned().unwrap_or_default();
    // Other tools' specs are read where the runtimes read them: the
    // host's spec directories, mounted at their paths (the host's /var/run
    // is not under /host).
    for dir in cdigen::cdi::DEFAULT_SPEC_DIRS {
        let flag = format!("--spec-dir={dir}");
        if !main["args"]
            .as_array()
            .is_some_and(|a| a.iter().any(|x| *x == flag.as_str()))
        {
            bad.push(format!("{what}: no {flag}"));
        }
    }
    for v in &volumes {
        let Some(path) = v["hostPath"]["path"].as_str() else {
            continue;
        };
        if allowed(&subcommand, path).is_none() {
            bad.push(format!(
                "{what}: hostPath {path} (volume {}) is not one `cdigen {subcommand}` needs",
                v["name"]
            ));
        }
    }
    let pod_seccomp = &pod["securityContext"]["seccompProfile"]["type"];
    let init = pod["initContainers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for c in containers.iter().chain(&init) {
        let name = format!("{what}: container {}", c["name"]);
        let sc = &c["securityContext"];
        if sc["privileged"] == true {
            bad.push(format!("{name}: privileged"));
        }
        if sc["allowPrivilegeEscalation"] != false {
            bad.push(format!("{name}: allowPrivilegeEscalation is not false"));
        }
        if sc["readOnlyRootFilesystem"] != true {
            bad.push(format!("{name}: readOnlyRootFilesystem is not true"));
        }
        if sc["capabilities"]["drop"] != serde_json::json!(["ALL"]) {
            bad.push(format!("{name}: capabilities do not drop ALL"));
        }
        if sc["capabilities"]["add"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
        {
            bad.push(format!("{name}: capabilities added"));
        }
        let seccomp = match &sc["seccompProfile"]["type"] {
            Value::Null => pod_seccomp,
            t => t,
        };
        if seccomp != "RuntimeDefault" {
            bad.push(format!(
                "{name}: seccomp profile {seccomp}, not RuntimeDefault"
            ));
        }
        for m in c["volumeMounts"].as_array().cloned().unwrap_or_default() {
            let v = volumes.iter().find(|v| v["name"] == m["name"]);
            let Some(path) = v.and_then(|v| v["hostPath"]["path"].as_str()) else {
                continue;
            };
            if allowed(&subcommand, path) == Some(false) && m["readOnly"] != true {
                bad.push(format!(
                    "{name}: hostPath {path} mounted writable at {}",
                    m["mountPath"]
                ));
            }
        }
    }
    bad
}

/// The DaemonSets of every YAML file under `dir` (recursively), with the
/// file each is in.
fn daemonsets(dir: &Path) -> Vec<(PathBuf, Value)> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|x| x == "yaml") {
                let text = fs::read_to_string(&path).unwrap();
                let docs: Vec<Value> = serde_saphyr::from_str_multiple(&text)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                for doc in docs {
                    if doc["kind"] == "DaemonSet" {
                        found.push((path.clone(), doc));
                    }
                }
            }
        }
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

/// Checks every DaemonSet under `dir`; each mode must be there at least
/// `per_mode` times.
fn check(dir: &Path, per_mode: usize) {
    let found = daemonsets(dir);
    let mut bad = Vec::new();
    for (path, ds) in &found {
        let what = format!("{} ({})", path.display(), ds["metadata"]["name"]);
        bad.extend(violations(&what, ds));
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    for mode in ["watch", "device-plugin", "dra-driver"] {
        let n = found
            .iter()
            .filter(|(_, ds)| ds["spec"]["template"]["spec"]["containers"][0]["args"][0] == mode)
            .count();
        assert!(n >= per_mode, "{}: {n} DaemonSets of {mode}", dir.display());
    }
}

#[test]
fn every_overlays_daemonset_mounts_only_what_its_mode_needs_unprivileged() {
    check(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes"),
        1,
    );
}

/// What kustomize and Helm render, in the directory
/// `CDIGEN_DEPLOY_RENDERED` (`.ci/check-kubernetes.sh` writes each overlay
/// and each mode of the chart there, then runs this).
#[test]
#[ignore = "run by .ci/check-kubernetes.sh on what kubectl and helm render"]
fn every_rendered_daemonset_mounts_only_what_its_mode_needs_unprivileged() {
    let dir = std::env::var_os("CDIGEN_DEPLOY_RENDERED")
        .expect("CDIGEN_DEPLOY_RENDERED: the directory of the rendered manifests");
    // kustomize's overlay and the chart, for each mode.
    check(Path::new(&dir), 2);
    // And both give a mode's container the same arguments and the same
    // host paths at the same places, equally writable.
    let mut by_mode: std::collections::BTreeMap<String, Vec<(PathBuf, Value)>> =
        std::collections::BTreeMap::new();
    for (path, ds) in daemonsets(Path::new(&dir)) {
        let pod = &ds["spec"]["template"]["spec"];
        let c = &pod["containers"][0];
        let volumes = pod["volumes"].as_array().unwrap();
        let mut mounts: Vec<Value> = c["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                let v = volumes.iter().find(|v| v["name"] == m["name"]).unwrap();
                serde_json::json!([m["mountPath"], v["hostPath"]["path"], m["readOnly"] == true])
            })
            .collect();
        mounts.sort_by_key(|m| m.to_string());
        // The chart passes the periodic pass's interval and the driver's
        // name, at their defaults; the overlays leave them out.
        let dra_driver = format!("--driver-name={}", cdigen::dra::DRIVER_NAME);
        let defaults = ["--interval=10m", dra_driver.as_str()];
        let args: Vec<&Value> = c["args"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| !a.as_str().is_some_and(|a| defaults.contains(&a)))
            .collect();
        let mode = c["args"][0].as_str().unwrap().to_string();
        by_mode
            .entry(mode)
            .or_default()
            .push((path, serde_json::json!({"args": args, "mounts": mounts})));
    }
    for (mode, all) in by_mode {
        for (path, sig) in &all[1..] {
            assert_eq!(
                sig,
                &all[0].1,
                "{mode}: {} and {}",
                all[0].0.display(),
                path.display()
            );
        }
    }
}

#[test]
fn the_check_finds_the_hosts_root_a_writable_read_path_and_missing_hardening() {
    let ds: Value = serde_saphyr::from_str(
        "
kind: DaemonSet
spec:
  template:
    spec:
      hostPID: true
      containers:
        - name: cdigen
          args: [watch, --spec-dir=/etc/cdi]
          securityContext:
            readOnlyRootFilesystem: true
            allowPrivilegeEscalation: false
            capabilities: {drop: [ALL], add: [SYS_ADMIN]}
          volumeMounts:
            - {name: host, mountPath: /host}
            - {name: sys, mountPath: /host/sys}
      initContainers:
        - name: install-hook
          securityContext: {privileged: true}
      volumes:
        - {name: host, hostPath: {path: /}}
        - {name: sys, hostPath: {path: /sys}}
        - {name: kubelet, hostPath: {path: /var/lib/kubelet/device-plugins}}
",
    )
    .unwrap();
    let bad = violations("ds", &ds);
    let expected = [
        "ds: hostPID",
        "ds: no --spec-dir=/var/run/cdi",
        "ds: hostPath / (volume \"host\") is not one `cdigen watch` needs",
        // The device plugin's, not the watcher's.
        "ds: hostPath /var/lib/kubelet/device-plugins (volume \"kubelet\") is not one `cdigen watch` needs",
        "ds: container \"cdigen\": capabilities added",
        "ds: container \"cdigen\": seccomp profile null, not RuntimeDefault",
        "ds: container \"cdigen\": hostPath /sys mounted writable at \"/host/sys\"",
        "ds: container \"install-hook\": privileged",
        "ds: container \"install-hook\": allowPrivilegeEscalation is not false",
        "ds: container \"install-hook\": readOnlyRootFilesystem is not true",
        "ds: container \"install-hook\": capabilities do not drop ALL",
        "ds: container \"install-hook\": seccomp profile null, not RuntimeDefault",
    ];
    assert_eq!(bad, expected);
}

/// The host paths `manifest`'s container sees under `/host`.
fn host_mounts(manifest: &str) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(manifest);
    let ds: Value = serde_saphyr::from_str(&fs::read_to_string(path).unwrap()).unwrap();
    ds["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["mountPath"].as_str()?.strip_prefix("/host/"))
        .map(str::to_string)
        .collect()
}

/// The files under `dir` with their contents, by path relative to it.
fn tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                let text = fs::read(&p).unwrap();
                out.push((p.strip_prefix(dir).unwrap().to_path_buf(), text));
            }
        }
    }
    out.sort();
    out
}

/// Every fixture machine generates the same specs and device-info files
/// from what the DaemonSets mount of it as from all of it: the mounts
/// cover what discovery reads (sysfs, procfs, devfs, the driver's files
/// and the GPU operator's driver root).
#[test]
fn the_mounted_host_paths_are_all_that_generation_reads_on_every_fixture() {
    let mounted = host_mounts("deploy/kubernetes/overlays/generate/daemonset.yaml");
    for other in [
        "deploy/kubernetes/overlays/device-plugin/daemonset.yaml",
        "deploy/kubernetes/overlays/dra/daemonset.yaml",
    ] {
        assert_eq!(host_mounts(other), mounted, "{other}");
    }
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut roots: Vec<PathBuf> = fs::read_dir(&fixtures)
        .unwrap()
        .map(|e| e.unwrap().path().join("root"))
        .filter(|r| r.is_dir())
        .collect();
    roots.sort();
    assert!(roots.len() >= 10, "{roots:?}");
    let tmp = tempfile::tempdir().unwrap();
    let mut generated = 0;
    for (i, root) in roots.iter().enumerate() {
        // The pod's /host: the mounted paths of the fixture, its devfs
        // manifest standing for /dev.
        let host = tmp.path().join(format!("host-{i}"));
        fs::create_dir(&host).unwrap();
        for rel in &mounted {
            if rel == "dev" {
                fs::copy(root.join("dev.manifest"), host.join("dev.manifest")).unwrap();
            }
            let from = root.join(rel);
            if !from.exists() {
                continue;
            }
            let to = host.join(rel);
            fs::create_dir_all(to.parent().unwrap()).unwrap();
            let status = std::process::Command::new("cp")
                .arg("-a")
                .arg(&from)
                .arg(&to)
                .status()
                .unwrap();
            assert!(status.success());
        }
        let generate = |root: &Path, out: &str| {
            let out = tmp.path().join(format!("{out}-{i}"));
            let status = std::process::Command::new(env!("CARGO_BIN_EXE_cdigen"))
                .arg("generate")
                .arg("--root")
                .arg(root)
                .arg("--output-dir")
                .arg(out.join("cdi"))
                .arg("--devinfo-dir")
                .arg(out.join("devinfo"))
                .env_remove("CDIGEN_GENERATORS")
                .env_remove("CDIGEN_TEMPLATES")
                .env_remove("CDIGEN_DRIVER_ROOT")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .unwrap();
            (status.code(), tree(&out))
        };
        let (all, mounted_only) = (generate(root, "all"), generate(&host, "mounted"));
        if all
            .1
            .iter()
            .any(|(name, _)| name.extension().is_some_and(|x| x == "yaml"))
        {
            generated += 1;
        }
        assert_eq!(all.0, mounted_only.0, "{}: exit status", root.display());
        let names = |t: &[(PathBuf, Vec<u8>)]| t.iter().map(|f| f.0.clone()).collect::<Vec<_>>();
        assert_eq!(names(&all.1), names(&mounted_only.1), "{}", root.display());
        for ((name, a), (_, b)) in all.1.iter().zip(&mounted_only.1) {
            // The output directory's lock names the PID of the run that
            // held it last, which differs between the two runs.
            if name.file_name().is_some_and(|n| n == ".cdigen.lock") {
                continue;
            }
            assert!(
                a == b,
                "{}: {} differs:\n{}\n---\n{}",
                root.display(),
                name.display(),
                String::from_utf8_lossy(a),
                String::from_utf8_lossy(b)
            );
        }
    }
    // Not a comparison of nothing with nothing.
    assert!(generated >= 10, "{generated} fixtures generated specs");
}

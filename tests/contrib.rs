//! The files for running cdigen the ways users do (`contrib/`, `deploy/`):
//! the driver-install hook and the DaemonSet's container (its exact
//! arguments and environment, its volumes mapped to a fixture machine and
//! temp dirs), run for real, and the agreement of the systemd units, the
//! udev rule and the Kubernetes DaemonSet with the binary's defaults (where
//! it writes), with the package and with each other. The units, the rule
//! and the manifests are also checked by their own tools in CI
//! (`.ci/check-*.sh`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[path = "support/kubelet.rs"]
mod kubelet;
#[path = "support/machine.rs"]
mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use support::visible_names;
use tempfile::TempDir;

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn read(rel: &str) -> String {
    fs::read_to_string(repo(rel)).unwrap()
}

/// Runs the hook with the fixture machine `example` as the host, a fake
/// `logger` that records its arguments, and output in a temp dir:
/// (temp dir, exit code, stderr, what was logged).
fn hook(args: &[&str]) -> (TempDir, i32, String, String) {
    let tmp = TempDir::new().unwrap();
    let bin = tmp.path().join("bin");
    fs::create_dir(&bin).unwrap();
    let log = tmp.path().join("logger.log");
    let logger = bin.join("logger");
    fs::write(
        &logger,
        format!("#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\n", log.display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    fs::set_permissions(&logger, fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let out = Command::new("sh")
        .arg(repo("contrib/hooks/cdigen-driver-hook"))
        .args(args)
        .env("PATH", path)
        .env("CDIGEN", env!("CARGO_BIN_EXE_cdigen"))
        .env("CDIGEN_ROOT", repo("fixtures/example/root"))
        .env("CDIGEN_HOOK_OUTPUT_DIR", tmp.path().join("cdi"))
        .env("CDIGEN_DEVINFO_DIR", tmp.path().join("devinfo"))
        .env("CDIGEN_GENERATORS", "/nonexistent-cdigen-user-generators")
        .env("CDIGEN_HOOK_PATH", "/usr/bin/cdigen-hook")
        .env_remove("CDIGEN_TEMPLATES")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let logged = fs::read_to_string(&log).unwrap_or_default();
    (
        tmp,
        out.status.code().unwrap(),
        String::from_utf8(out.stderr).unwrap(),
        logged,
    )
}

#[test]
fn hook_writes_the_named_generators_specs_and_logs() {
    let (tmp, code, stderr, logged) = hook(&["nvidia", "vfio"]);
    assert_eq!(code, 0, "{stderr}");
    let cdi = tmp.path().join("cdi");
    assert_eq!(
        visible_names(&cdi),
        ["cdigen.io-vfio.yaml", "nvidia.com-gpu.yaml"]
    );
    // The same specs generate writes for the whole machine.
    for name in visible_names(&cdi) {
        assert_eq!(
            fs::read_to_string(cdi.join(&name)).unwrap(),
            read(&format!("fixtures/example/expected/cdi/{name}")),
            "{name}"
        );
    }
    let msg = format!("CDI specs in {} are current", cdi.display());
    assert!(stderr.contains(&format!("cdigen-hook: {msg}")), "{stderr}");
    assert_eq!(logged, format!("-t cdigen-hook -p user.info -- {msg}\n"));
}

#[test]
fn hook_passes_on_cdigens_failure_and_logs_it() {
    let (tmp, code, stderr, logged) = hook(&["no-such-generator"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("cdigen: unknown generator \"no-such-generator\""),
        "{stderr}"
    );
    assert_eq!(
        logged,
        "-t cdigen-hook -p user.err -- cdigen generate failed (exit 2)\n"
    );
    assert!(visible_names(&tmp.path().join("cdi")).is_empty());
}

/// `Key=value` lines of a unit file, in order.
fn unit_values(unit: &str, key: &str) -> Vec<String> {
    read(&format!("contrib/systemd/{unit}"))
        .lines()
        .filter_map(|l| l.strip_prefix(&format!("{key}=")))
        .map(String::from)
        .collect()
}

/// A default output directory as the units name it (`/var/run` is a
/// symlink to `/run`; systemd wants the real path).
fn run_path(dir: &str) -> String {
    dir.replacen("/var/run/", "/run/", 1)
}

#[test]
fn units_can_write_where_cdigen_writes_by_default() {
    let dirs = [
        run_path(cdigen::cdi::DYNAMIC_DIR),
        run_path(cdigen::devinfo::DP_DIR),
    ];
    for unit in ["cdigen-generate.service", "cdigen-watch.service"] {
        let rw = unit_values(unit, "ReadWritePaths");
        assert_eq!(rw, [dirs.join(" ")], "{unit}");
        // Created before the sandbox is set up (a missing ReadWritePaths=
        // entry fails the unit).
        assert_eq!(
            unit_values(unit, "ExecStartPre"),
            [format!("+mkdir -p {}", dirs.join(" "))],
            "{unit}"
        );
        // The packaged binary, with the defaults (no --output-dir).
        let start = unit_values(unit, "ExecStart");
        assert_eq!(start.len(), 1, "{unit}");
        assert!(
            start[0].starts_with("/usr/bin/cdigen "),
            "{unit}: {start:?}"
        );
        assert!(!start[0].contains("--output-dir"), "{unit}: {start:?}");
        assert_eq!(unit_values(unit, "CapabilityBoundingSet"), [""], "{unit}");
    }
}

/// What every trigger runs: a restart, queued. A start would be merged
/// into a run in progress, which may have read the host before the change.
const RESTART: &str = "/usr/bin/systemctl --no-block restart cdigen-generate.service";

#[test]
fn the_path_unit_restarts_the_generate_unit_through_a_unit_it_waits_for() {
    assert_eq!(
        unit_values("cdigen-generate.path", "Unit"),
        ["cdigen-generate-restart.service"]
    );
    let trigger = "cdigen-generate-restart.service";
    assert_eq!(unit_values(trigger, "ExecStart"), [RESTART]);
    assert_eq!(unit_values(trigger, "Type"), ["oneshot"]);
    // The restarted run starts once the path unit watches again.
    assert_eq!(unit_values(trigger, "Before"), ["cdigen-generate.service"]);
    // Static: only the path unit starts it.
    assert!(unit_values(trigger, "WantedBy").is_empty());
    // No trigger refused by the start rate limit.
    for unit in [trigger, "cdigen-generate.service"] {
        assert_eq!(unit_values(unit, "StartLimitIntervalSec"), ["0"], "{unit}");
    }
}

#[test]
fn the_udev_rule_restarts_the_generate_unit_on_every_match() {
    let rule = read("contrib/udev/99-cdigen.rules");
    let rules: Vec<&str> = rule
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .collect();
    let runs: Vec<&str> = rules
        .iter()
        .filter_map(|l| l.strip_prefix("RUN+=\""))
        .map(|rest| rest.strip_suffix('"').unwrap())
        .collect();
    assert_eq!(runs, [RESTART]);
    assert!(
        !rule.contains("SYSTEMD_WANTS}+="),
        "systemd ignores it for known devices"
    );
    // Every match leads to it (no other label).
    for l in &rules {
        if let Some(rest) = l.split("GOTO=\"").nth(1) {
            let label = rest.strip_suffix('"').unwrap();
            assert!(["cdigen_restart", "cdigen_end"].contains(&label), "{l}");
        }
    }
    assert!(repo("contrib/systemd/cdigen-generate.service").is_file());
}

/// Every unit in contrib/systemd is one the Debian package's maintainer
/// scripts (contrib/debian, written by hand) handle: enabled or recorded on
/// install, stopped before removal, masked on removal and forgotten on purge.
/// A unit added to contrib/systemd but not to the scripts would be left
/// running, or enabled after a purge.
#[test]
fn the_package_scripts_handle_every_unit() {
    let postinst = read("contrib/debian/postinst");
    let prerm = read("contrib/debian/prerm");
    let postrm = read("contrib/debian/postrm");
    // The words of the lines of deb-systemd-helper and -invoke calls
    // (a call continued on the next line with a backslash included).
    let named = |text: &str, verb: &str| -> Vec<String> {
        let joined = text.replace("\\\n", " ");
        joined
            .lines()
            .filter(|l| l.contains(verb))
            .flat_map(|l| l.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
            .collect()
    };
    let listed: Vec<String> = postinst
        .lines()
        .filter(|l| l.starts_with("enabled=\"") || l.starts_with("disabled=\""))
        .flat_map(|l| l.split(['"', ' ']).map(str::to_owned).collect::<Vec<_>>())
        .collect();
    let units = visible_names(&repo("contrib/systemd"));
    assert!(units.len() >= 4, "{units:?}");
    for f in &units {
        assert!(
            listed.contains(f),
            "{f}: neither in postinst's enabled= nor disabled= list ({listed:?})"
        );
        assert!(
            named(&prerm, "deb-systemd-invoke stop").contains(f),
            "{f}: not stopped by prerm"
        );
        for verb in [
            "deb-systemd-helper mask",
            "deb-systemd-helper purge",
            "deb-systemd-helper unmask",
        ] {
            assert!(
                named(&postrm, verb).contains(f),
                "{f}: not in postrm's `{verb}`"
            );
        }
    }
}

#[test]
fn the_daemonset_writes_where_cdigen_writes_by_default() {
    let ds = read("deploy/kubernetes/overlays/generate/daemonset.yaml");
    for dir in [cdigen::cdi::DYNAMIC_DIR, cdigen::devinfo::DP_DIR] {
        // Mounted from the same host path at the same container path, and
        // the only writable host paths (the others are readOnly).
        assert!(ds.contains(&format!("mountPath: {dir}\n")), "{dir}");
        assert!(ds.contains(&format!("path: {dir}\n")), "{dir}");
    }
    assert!(ds.contains(&format!("--output-dir={}\n", cdigen::cdi::DYNAMIC_DIR)));
    assert!(ds.contains(&format!("--devinfo-dir={}\n", cdigen::devinfo::DP_DIR)));
    // The readiness probe looks for the file watch is told to create.
    assert!(ds.contains("- --ready-file=/run/cdigen/ready\n"));
    assert!(ds.contains(r#"command: ["test", "-e", "/run/cdigen/ready"]"#));
    assert!(ds.contains("mountPath: /run/cdigen\n"));
    // The host's paths are read-only, recursively where possible.
    assert!(ds.contains("mountPath: /host/sys\n              readOnly: true\n"));
    assert!(ds.contains("capabilities:\n              drop: [\"ALL\"]"));
}

// --- The DaemonSet's container, run as the kubelet would ---------------------

/// The `cdigen watch` DaemonSet.
const WATCH_DS: &str = "deploy/kubernetes/overlays/generate/daemonset.yaml";

/// The `cdigen device-plugin` DaemonSet.
const DEVICE_PLUGIN_DS: &str = "deploy/kubernetes/overlays/device-plugin/daemonset.yaml";

/// The `cdigen dra-driver` DaemonSet.
const DRA_DS: &str = "deploy/kubernetes/overlays/dra/daemonset.yaml";

/// The pod UID the downward API gives the container in these tests.
const POD_UID: &str = "0b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9";

/// The DaemonSet's only container and its pod's volumes, parsed.
fn daemonset_pod(manifest: &str) -> (serde_json::Value, Vec<serde_json::Value>) {
    let ds: serde_json::Value = serde_saphyr::from_str(&read(manifest)).unwrap();
    let pod = &ds["spec"]["template"]["spec"];
    let containers = pod["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1);
    (
        containers[0].clone(),
        pod["volumes"].as_array().unwrap().clone(),
    )
}

/// Where each of the container's mount paths is in the test: the host's
/// paths mounted under `/host` are copied from the fixture machine
/// `example` into `tmp/host` (its `dev.manifest` with `/dev`), so that
/// cdigen, run with `--root /host`, sees only what the pod mounts; the
/// ConfigMap is `config` (absent: an empty directory, as the kubelet
/// mounts an optional one), the others are empty directories in `tmp`.
/// Longest mount path first.
fn mounts(
    container: &serde_json::Value,
    volumes: &[serde_json::Value],
    tmp: &Path,
) -> Vec<(String, PathBuf)> {
    let fixture = repo("fixtures/example/root");
    let host = tmp.join("host");
    let mut mounts: Vec<(String, PathBuf)> = vec![("/host".to_string(), host.clone())];
    for m in container["volumeMounts"].as_array().unwrap() {
        let name = m["name"].as_str().unwrap();
        let path = m["mountPath"].as_str().unwrap().to_string();
        let volume = volumes.iter().find(|v| v["name"] == name).unwrap();
        let host_path = volume["hostPath"]["path"].as_str();
        assert_ne!(host_path, Some("/"), "{name}: the host's whole /");
        if let Some(rel) = path.strip_prefix("/host/") {
            // A host path seen under /host is that same path of the host.
            assert_eq!(host_path, Some(&path["/host".len()..]), "{name}");
            let (from, to) = (fixture.join(rel), host.join(rel));
            fs::create_dir_all(to.parent().unwrap()).unwrap();
            if from.exists() {
                copy_tree(&from, &to);
            } else {
                fs::create_dir(&to).unwrap();
            }
            if rel == "dev" {
                fs::copy(fixture.join("dev.manifest"), host.join("dev.manifest")).unwrap();
            }
            continue;
        }
        let dir = tmp.join(name);
        fs::create_dir_all(&dir).unwrap();
        mounts.push((path, dir));
    }
    mounts.sort_by_key(|(path, _)| std::cmp::Reverse(path.len()));
    mounts
}

/// Copies the tree `from` to `to` (a new path), symlinks as they are.
fn copy_tree(from: &Path, to: &Path) {
    let status = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(status.success(), "cp -a {from:?} {to:?}");
}

/// `value` with its leading container path (an argument's after `=`)
/// replaced by where that mount is in the test. Every absolute path the
/// container is given must be under a mount: the image holds nothing but
/// the binary.
fn in_test(value: &str, mounts: &[(String, PathBuf)]) -> String {
    let (prefix, path) = match value.split_once('=') {
        Some((flag, path)) if flag.starts_with("--") => (format!("{flag}="), path),
        _ => (String::new(), value),
    };
    if !path.starts_with('/') {
        return value.to_string();
    }
    let (mount, dir) = mounts
        .iter()
        .find(|(m, _)| path == m || path.starts_with(&format!("{m}/")))
        .unwrap_or_else(|| panic!("{value}: not under any volume mount of the container"));
    format!("{prefix}{}{}", dir.display(), &path[mount.len()..])
}

/// A container's mount: its path in the container, and where it is in the
/// test.
type Mount = (String, PathBuf);

/// Runs the `watch` DaemonSet's container: see [`run_container`].
fn run_daemonset(
    config: &[(&str, &str)],
    env_override: &[(&str, &str)],
) -> (TempDir, PathBuf, String) {
    run_container(WATCH_DS, config, env_override, &|_| ())
}

/// Runs the container command of the DaemonSet in `manifest` (its args
/// and env, paths mapped by [`mounts`]; the event source `none` instead of
/// the kernel's) until it is ready and `ready_too` returned, then stops it
/// with SIGTERM as the kubelet does: the spec files written, or the log
/// when it did not get ready. `ready_too` gets the mounts, to start what
/// the node has (a kubelet) and wait for what else the container must do.
fn run_container(
    manifest: &str,
    config: &[(&str, &str)],
    env_override: &[(&str, &str)],
    ready_too: &dyn Fn(&[Mount]),
) -> (TempDir, PathBuf, String) {
    let tmp = TempDir::new().unwrap();
    let (container, volumes) = daemonset_pod(manifest);
    let mounts = mounts(&container, &volumes, tmp.path());
    // A ConfigMap volume as the kubelet writes it: the keys are symlinks
    // into a timestamped directory, through the `..data` symlink.
    let config_dir = tmp.path().join("config");
    if !config.is_empty() {
        let data = config_dir.join("..2025_01_01_00_00_00.000000001");
        fs::create_dir(&data).unwrap();
        std::os::unix::fs::symlink(data.file_name().unwrap(), config_dir.join("..data")).unwrap();
        for (key, text) in config {
            fs::write(data.join(key), text).unwrap();
            std::os::unix::fs::symlink(format!("..data/{key}"), config_dir.join(key)).unwrap();
        }
    }
    let args: Vec<String> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .map(|a| {
            if a == "--source=netlink" {
                "--source=none"
            } else {
                a
            }
        })
        .map(|a| in_test(a, &mounts))
        .collect();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cdigen"));
    cmd.args(&args);
    // Nothing of the test's own environment that cdigen reads.
    for (key, _) in std::env::vars_os() {
        let k = key.to_string_lossy();
        if k.starts_with("CDIGEN_") || k == "RUST_LOG" || k == "NOTIFY_SOCKET" {
            cmd.env_remove(&key);
        }
    }
    for e in container["env"].as_array().unwrap() {
        let key = e["name"].as_str().unwrap();
        // The downward API's fields, as the kubelet fills them in.
        let value = match (
            e["value"].as_str(),
            e["valueFrom"]["fieldRef"]["fieldPath"].as_str(),
        ) {
            (Some(v), _) => v,
            (None, Some("metadata.uid")) => POD_UID,
            (None, Some("spec.nodeName")) => "node-1",
            _ => panic!("{key}: neither a value nor a field of the downward API: {e}"),
        };
        let value = env_override
            .iter()
            .find(|(k, _)| *k == key)
            .map_or(value, |(_, v)| *v);
        // The hook path is the host's (where the init container installs
        // cdigen), not a path in the container.
        if key == "CDIGEN_HOOK_PATH" {
            cmd.env(key, value);
        } else {
            cmd.env(key, in_test(value, &mounts));
        }
    }
    let log = tmp.path().join("log");
    let mut child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    // The readiness probe's file, where the test has it.
    let probe = container["readinessProbe"]["exec"]["command"]
        .as_array()
        .unwrap();
    let ready = PathBuf::from(in_test(probe.last().unwrap().as_str().unwrap(), &mounts));
    let start = std::time::Instant::now();
    while !ready.exists() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "the container exited ({status}) before it was ready:\n{}",
                fs::read_to_string(&log).unwrap()
            );
        }
        if start.elapsed() > std::time::Duration::from_secs(30) {
            let _ = child.kill();
            panic!(
                "not ready after 30 s:\n{}",
                fs::read_to_string(&log).unwrap()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    ready_too(&mounts);
    let term = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let status = child.wait().unwrap();
    let log = fs::read_to_string(&log).unwrap();
    assert_eq!(status.code(), Some(0), "{log}");
    let cdi = PathBuf::from(in_test(cdigen::cdi::DYNAMIC_DIR, &mounts));
    (tmp, cdi, log)
}

#[test]
fn the_daemonsets_container_runs_and_writes_the_hosts_specs_without_a_configmap() {
    let (_tmp, cdi, log) = run_daemonset(&[], &[]);
    let expected = repo("fixtures/example/expected/cdi");
    assert_eq!(visible_names(&cdi), visible_names(&expected), "{log}");
    for name in visible_names(&cdi) {
        // The goldens' hooks run /usr/bin/cdigen-hook; the DaemonSet's, the
        // copy its init container puts on the host.
        assert_eq!(
            fs::read_to_string(cdi.join(&name))
                .unwrap()
                .replace("'/opt/cdigen/bin/cdigen-hook'", "'/usr/bin/cdigen-hook'"),
            fs::read_to_string(expected.join(&name)).unwrap(),
            "{name}"
        );
    }
    assert!(!log.contains("WARN") && !log.contains("ERROR"), "{log}");
}

#[test]
fn the_daemonsets_container_reads_generators_and_templates_from_the_configmap() {
    let generator = read("generators/amd-gpu.yaml")
        .replace("kind: amd.com/gpu", "kind: example.com/gpu")
        .replace("template: drm", "template: my-drm");
    // The link mounts read-only: proof that this template was used.
    let template = read("templates/drm.json.hbs").replace(r#"["bind", "rw"]"#, r#"["bind", "ro"]"#);
    let (_tmp, cdi, log) = run_daemonset(
        &[("amd-gpu.yaml", &generator), ("my-drm.json.hbs", &template)],
        &[],
    );
    let names = visible_names(&cdi);
    assert!(
        names.contains(&"example.com-gpu.yaml".to_string()),
        "{names:?}\n{log}"
    );
    assert!(
        !names.contains(&"amd.com-gpu.yaml".to_string()),
        "{names:?}"
    );
    assert_eq!(
        fs::read_to_string(cdi.join("example.com-gpu.yaml")).unwrap(),
        read("fixtures/example/expected/cdi/amd.com-gpu.yaml")
            .replace("kind: 'amd.com/gpu'", "kind: 'example.com/gpu'")
            .replace("- 'rw'", "- 'ro'")
    );
}

/// The alternative the DaemonSet's comment offers: the node's own
/// /etc/cdigen, which the fixture host does not have.
#[test]
fn the_daemonsets_container_runs_with_the_hosts_missing_etc_cdigen() {
    let (_tmp, cdi, log) = run_daemonset(
        &[],
        &[
            ("CDIGEN_GENERATORS", "/host/etc/cdigen/generators.d"),
            ("CDIGEN_TEMPLATES", "/host/etc/cdigen/templates"),
        ],
    );
    assert_eq!(
        visible_names(&cdi),
        visible_names(&repo("fixtures/example/expected/cdi")),
        "{log}"
    );
    let ds = read("deploy/kubernetes/overlays/generate/daemonset.yaml");
    assert!(ds.contains("/host/etc/cdigen/generators.d and /host/etc/cdigen/templates"));
}

#[test]
fn the_daemonset_listens_to_the_kernels_events_and_mounts_the_configmap_optionally() {
    let (container, volumes) = daemonset_pod(WATCH_DS);
    let args = container["args"].as_array().unwrap();
    assert!(args.iter().any(|a| a == "--source=netlink"), "{args:?}");
    assert_eq!(args[0], "watch");
    let config = volumes.iter().find(|v| v["name"] == "config").unwrap();
    assert_eq!(config["configMap"]["name"], "cdigen-config");
    assert_eq!(config["configMap"]["optional"], true);
}

#[test]
fn the_device_plugin_daemonsets_container_registers_with_the_kubelet_and_writes_the_specs() {
    // The kubelet of the node, in the directory the container mounts.
    let kubelet: std::sync::Mutex<Option<kubelet::FakeKubelet>> = std::sync::Mutex::new(None);
    let (_tmp, cdi, log) = run_container(DEVICE_PLUGIN_DS, &[], &[], &|mounts| {
        let dir = PathBuf::from(in_test("/var/lib/kubelet/device-plugins", mounts));
        let k = kubelet::FakeKubelet::start(&dir);
        let vfs = k.devices("cdigen.io/vf");
        assert_eq!(vfs.len(), 4, "{vfs:?}");
        // A rolling update's instance: its socket named by the pod's UID.
        assert_eq!(
            k.plugin("cdigen.io/vf").unwrap().endpoint,
            format!("cdigen-cdigen.io_vf-{POD_UID}.sock")
        );
        *kubelet.lock().unwrap() = Some(k);
    });
    assert_eq!(
        visible_names(&cdi),
        visible_names(&repo("fixtures/example/expected/cdi")),
        "{log}"
    );
    assert!(
        log.contains("waiting for the kubelet's socket") && log.contains("registered"),
        "{log}"
    );
    let (container, _) = daemonset_pod(DEVICE_PLUGIN_DS);
    assert_eq!(container["args"][0], "device-plugin");
}

#[test]
fn the_serving_daemonsets_update_with_a_surge_each_pod_by_its_uid() {
    for manifest in [DRA_DS, DEVICE_PLUGIN_DS, WATCH_DS] {
        let ds: serde_json::Value = serde_saphyr::from_str(&read(manifest)).unwrap();
        let strategy = &ds["spec"]["updateStrategy"];
        assert_eq!(strategy["type"], "RollingUpdate", "{manifest}");
        // The API refuses a surge unless maxUnavailable is 0.
        assert_eq!(strategy["rollingUpdate"]["maxSurge"], 1, "{manifest}");
        assert_eq!(strategy["rollingUpdate"]["maxUnavailable"], 0, "{manifest}");
        let grace = ds["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
            .as_u64()
            .unwrap();
        // Calls in flight get 5 s, then the sockets go.
        assert!(grace >= 10, "{manifest}: {grace}");
    }
    for manifest in [DRA_DS, DEVICE_PLUGIN_DS] {
        let (container, volumes) = daemonset_pod(manifest);
        let env = container["env"].as_array().unwrap();
        let uid = env.iter().find(|e| e["name"] == "CDIGEN_POD_UID");
        assert_eq!(
            uid.unwrap()["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.uid",
            "{manifest}"
        );
        // Both instances see the same sockets' and state's directories:
        // host paths, never per pod.
        for m in container["volumeMounts"].as_array().unwrap() {
            let v = volumes.iter().find(|v| v["name"] == m["name"]).unwrap();
            if m["mountPath"]
                .as_str()
                .unwrap()
                .starts_with("/var/lib/kubelet")
            {
                assert_eq!(v["hostPath"]["path"], m["mountPath"], "{manifest}");
            }
        }
    }
}

// --- cron ------------------------------------------------------------------

/// Runs the command of the cron file's job with `sh`, as cron does, on the
/// fixture machine `example`; `cdigen` on its PATH writes to `tmp/cdi`
/// (never the host's /var/run/cdi): (stdout, stderr), what cron mails.
fn cron_job(tmp: &Path) -> (String, String) {
    let file = read("contrib/cron/cdigen");
    let job = file
        .lines()
        .find(|l| l.starts_with("*/"))
        .unwrap()
        .split_whitespace()
        .skip(6) // minute hour day month weekday user
        .collect::<Vec<_>>()
        .join(" ");
    let bin = tmp.join("bin");
    fs::create_dir_all(&bin).unwrap();
    let wrapper = bin.join("cdigen");
    fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec '{}' \"$@\" --output-dir '{}'\n",
            env!("CARGO_BIN_EXE_cdigen"),
            tmp.join("cdi").display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    fs::set_permissions(&wrapper, fs::Permissions::from_mode(0o755)).unwrap();
    let out = Command::new("sh")
        .args(["-c", &job])
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .env("CDIGEN_ROOT", repo("fixtures/example/root"))
        .env("CDIGEN_DEVINFO_DIR", tmp.join("devinfo"))
        .env("CDIGEN_GENERATORS", "/nonexistent-cdigen-user-generators")
        .env_remove("CDIGEN_TEMPLATES")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn the_cron_job_prints_nothing_unless_something_fails() {
    let tmp = TempDir::new().unwrap();
    let cdi = tmp.path().join("cdi");
    // Nothing on disk: check fails, generate writes the specs, quietly.
    assert_eq!(cron_job(tmp.path()), (String::new(), String::new()));
    assert_eq!(
        visible_names(&cdi),
        visible_names(&repo("fixtures/example/expected/cdi"))
    );
    // Current: check passes, quietly.
    assert_eq!(cron_job(tmp.path()), (String::new(), String::new()));
    // A spec edited by hand: generate refuses to overwrite it, and says so.
    fs::write(cdi.join("amd.com-gpu.yaml"), "edited\n").unwrap();
    let (out, err) = cron_job(tmp.path());
    assert_eq!(out, "");
    assert_eq!(
        err,
        format!(
            "cdigen: refusing to overwrite {}: not written by cdigen, or changed since \
             (remove it or move it away first)\n",
            cdi.join("amd.com-gpu.yaml").display()
        )
    );
}

//! End-to-end tests of the CDI plugin protocol (the 2017 draft, seed 001):
//! the binary run through a link named after the plugin (`drm`), with the
//! `CDI_*` environment and the configuration on stdin; replies compared
//! as JSON values. The draft's examples run with exactly the environment
//! the draft gives them (its INFO examples without `CDI_VERSION`); their
//! hosts differ, so the amounts and nodes differ too. Machines are
//! synthetic DRM hosts (`support/gpus.rs`) or fixtures (`rpi`,
//! `serial-host`, `example`).
//!
//! The draft's error examples write `code`/`msg`; cdigen emits the field
//! list's `error`/`message` (see `src/plugin/mod.rs`), so the expected
//! values below are the examples with those two names changed.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[path = "support/gpus.rs"]
mod gpus;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gpus::Gpu;
use serde_json::{Value, json};
use tempfile::TempDir;

/// The draft's `/etc/cdi/gpu.d/drm.conf`, verbatim.
const DRM_CONF: &str = r#"{
  "cdiVersion": "0.0.1",
  "name": "DRM GPUs from vendor International Amazing Graphics Inc.",
  "type": "gpu",
  "plugin": "drm",
  "args": {
    "want_device_nodes" : [
      "primary",
      "render"
    ],
    "vendorid_whitelist": [
      "0x1234",
      "0x2345"
    ]
  }
}
"#;

/// A host for the plugin: a root, a state directory, a generators
/// directory and a `bin/` of links to the binary, all in a tempdir.
struct Host {
    tmp: TempDir,
    root: PathBuf,
}

/// What one run gave: exit status, stdout as JSON (`None` when empty),
/// stderr.
#[derive(Debug)]
struct Reply {
    code: i32,
    json: Option<Value>,
    stderr: String,
}

impl Host {
    /// A synthetic machine with these GPUs.
    fn with_gpus(list: &[Gpu]) -> Host {
        let tmp = TempDir::new().unwrap();
        let root = tmp.path().join("root");
        gpus::pci_gpus(&root, list);
        Host::new(tmp, root)
    }

    /// The draft's GPU host: one GPU of each whitelisted vendor (card0 +
    /// renderD128, card1 + renderD129) and one of another vendor.
    fn seed() -> Host {
        Host::with_gpus(&[
            Gpu {
                vendor: "0x1234",
                numa: None,
            },
            Gpu {
                vendor: "0x2345",
                numa: None,
            },
            Gpu {
                vendor: "0x5555",
                numa: None,
            },
        ])
    }

    fn new(tmp: TempDir, root: PathBuf) -> Host {
        let bin = tmp.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(tmp.path().join("generators")).unwrap();
        Host { tmp, root }
    }

    fn state_dir(&self) -> PathBuf {
        self.tmp.path().join("state")
    }

    fn state_file(&self) -> PathBuf {
        self.state_dir().join("allocations.json")
    }

    fn generators(&self) -> PathBuf {
        self.tmp.path().join("generators")
    }

    /// The allocations file, parsed.
    fn state(&self) -> Value {
        serde_json::from_slice(&std::fs::read(self.state_file()).unwrap()).unwrap()
    }

    /// `/opt/cdi/bin/<name>`: a link to the binary.
    fn plugin(&self, name: &str) -> PathBuf {
        let link = self.tmp.path().join("bin").join(name);
        if !link.exists() {
            std::os::unix::fs::symlink(assert_cmd::cargo::cargo_bin("cdigen"), &link).unwrap();
        }
        link
    }

    /// The command for `program` with a clean environment plus `env`.
    fn command(&self, program: &Path, env: &[(&str, &str)]) -> Command {
        let mut cmd = Command::new(program);
        for var in [
            "CDI_COMMAND",
            "CDI_VERSION",
            "CDI_REQUEST",
            "CDI_REQUEST_ID",
            "CDI_REQUEST_NUMA_LOCALITY",
            "RUST_LOG",
            "CDIGEN_TEMPLATES",
            "CDIGEN_DRIVER_ROOT",
            "CDIGEN_TEST_HOLD_LOCK_MS",
        ] {
            cmd.env_remove(var);
        }
        cmd.env("CDIGEN_ROOT", &self.root)
            .env("CDIGEN_STATE_DIR", self.state_dir())
            .env("CDIGEN_GENERATORS", self.generators())
            .envs(env.iter().copied());
        cmd
    }

    /// Runs plugin `name` with `env` and `stdin` (`None`: no stdin at all).
    fn run_as(&self, name: &str, env: &[(&str, &str)], stdin: Option<&str>) -> Reply {
        let mut cmd = self.command(&self.plugin(name), env);
        finish(&mut cmd, stdin)
    }

    /// Runs the `drm` plugin with the draft's configuration.
    fn drm(&self, env: &[(&str, &str)]) -> Reply {
        self.run_as("drm", env, Some(DRM_CONF))
    }

    fn add(&self, conf: &str, request: &str, id: &str) -> Reply {
        self.run_as(
            "drm",
            &[
                ("CDI_VERSION", "0.0.1"),
                ("CDI_COMMAND", "ADD"),
                ("CDI_REQUEST", request),
                ("CDI_REQUEST_ID", id),
            ],
            Some(conf),
        )
    }

    fn info(&self, conf: &str) -> Value {
        let r = self.run_as(
            "drm",
            &[("CDI_VERSION", "0.0.1"), ("CDI_COMMAND", "INFO")],
            Some(conf),
        );
        assert_eq!(r.code, 0, "{r:?}");
        r.json.unwrap()
    }
}

/// Writes `text` to the child's stdin and closes it. A child that does
/// not read stdin (VERSION) may be gone already: a broken pipe is fine.
fn feed(child: &mut Child, text: &str) {
    let mut stdin = child.stdin.take().unwrap();
    match stdin.write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => panic!("{e}"),
        _ => {}
    }
}

/// A fixture machine, its root used in place (the plugin only reads it).
fn fixture(name: &str) -> Host {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
        .join("root");
    Host::new(TempDir::new().unwrap(), root)
}

/// A copy of a fixture machine's root, to change.
fn fixture_copy(name: &str) -> Host {
    let tmp = TempDir::new().unwrap();
    let root = tmp.path().join("root");
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
        .join("root");
    let status = Command::new("cp")
        .arg("-a")
        .arg(&from)
        .arg(&root)
        .status()
        .unwrap();
    assert!(status.success());
    Host::new(tmp, root)
}

fn finish(cmd: &mut Command, stdin: Option<&str>) -> Reply {
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    if let Some(text) = stdin {
        feed(&mut child, text);
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    Reply {
        code: out.status.code().expect("exited, not killed"),
        json: (!stdout.is_empty())
            .then(|| serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

/// A configuration like the draft's, of type `gpu`, with other `args`.
fn conf(args: Value) -> String {
    json!({
        "cdiVersion": "0.0.1",
        "name": "test",
        "type": "gpu",
        "plugin": "drm",
        "args": args,
    })
    .to_string()
}

fn add_env<'a>(request: &'a str, id: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("CDI_VERSION", "0.0.1"),
        ("CDI_COMMAND", "ADD"),
        ("CDI_REQUEST", request),
        ("CDI_REQUEST_ID", id),
    ]
}

fn error(code: u32, message: &str, details: &str) -> Value {
    json!({"cdiVersion": "0.0.1", "error": code, "message": message, "details": details})
}

// ---- The draft's examples -------------------------------------------------

/// VERSION example 1; and it never fails: no stdin, garbage stdin, no or a
/// bad CDI_VERSION, any case.
#[test]
fn version_lists_the_supported_versions_and_never_fails() {
    let host = Host::seed();
    let want = json!({"cdiVersion": "0.0.2", "supportedVersions": ["0.0.1", "0.0.2"]});
    for (env, stdin) in [
        (vec![("CDI_COMMAND", "VERSION")], Some(DRM_CONF)),
        (vec![("CDI_COMMAND", "VERSION")], None),
        (vec![("CDI_COMMAND", "version")], Some("not json {")),
        (
            vec![("CDI_COMMAND", "Version"), ("CDI_VERSION", "0.999")],
            Some(""),
        ),
    ] {
        let r = host.run_as("drm", &env, stdin);
        assert_eq!((r.code, r.json), (0, Some(want.clone())), "{env:?}");
    }
    // VERSION touches no state.
    assert!(!host.state_dir().exists());
}

/// Errors example 1: an unknown CDI_VERSION (and no CDI_COMMAND at all);
/// a missing one for any command but VERSION and INFO.
#[test]
fn unknown_cdi_version_is_error_1() {
    let host = Host::seed();
    let r = host.drm(&[("CDI_VERSION", "0.999")]);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.json.unwrap(),
        error(1, "Incompatible CDI version", "Unsupported version: 0.999")
    );
    let r = host.drm(&[("CDI_VERSION", "0.999"), ("CDI_COMMAND", "INFO")]);
    assert_eq!(r.json.unwrap()["error"], 1);
    for command in ["ADD", "del", "MYCMD"] {
        let r = host.drm(&[
            ("CDI_COMMAND", command),
            ("CDI_REQUEST", "gpu:1"),
            ("CDI_REQUEST_ID", "1"),
        ]);
        assert_eq!(r.code, if command == "del" { 0 } else { 1 }, "{command}");
        assert_eq!(
            r.json.unwrap(),
            error(1, "Incompatible CDI version", "CDI_VERSION is not set"),
            "{command}"
        );
    }
    assert!(!host.state_dir().exists(), "nothing allocated");
}

/// Errors example 2: an unknown CDI_COMMAND; also a missing one.
#[test]
fn unknown_command_is_error_3() {
    let host = Host::seed();
    let r = host.drm(&[("CDI_VERSION", "0.0.1"), ("CDI_COMMAND", "MYCMD")]);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.json.unwrap(),
        error(3, "Command unsupported", "Unsupported command: MYCMD")
    );
    let r = host.drm(&[("CDI_VERSION", "0.0.1")]);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.json.unwrap(),
        error(
            3,
            "Command unsupported",
            "CDI_COMMAND is not set (expected VERSION, INFO, ADD or DEL)"
        )
    );
}

/// INFO example 1, verbatim (`env CDI_COMMAND=INFO /opt/cdi/bin/drm <
/// drm.conf`: no CDI_VERSION, so the configuration's `cdiVersion` is
/// used), on a host with two whitelisted GPUs (no NUMA node, so no
/// subtype); the same with CDI_VERSION, in any case.
#[test]
fn info_counts_the_free_devices() {
    let host = Host::seed();
    let want = json!({"cdiVersion": "0.0.1", "gpu": 2});
    let r = host.drm(&[("CDI_COMMAND", "INFO")]);
    assert_eq!((r.code, r.json), (0, Some(want.clone())), "{}", r.stderr);
    let r = host.drm(&[("CDI_VERSION", "0.0.1"), ("CDI_COMMAND", "info")]);
    assert_eq!((r.code, r.json), (0, Some(want)), "{}", r.stderr);
    // Without CDI_VERSION the configuration's version is still checked.
    let old = DRM_CONF.replace("\"0.0.1\"", "\"0.0.0\"");
    let r = host.run_as("drm", &[("CDI_COMMAND", "INFO")], Some(&old));
    assert_eq!(r.code, 1);
    assert_eq!(
        r.json.unwrap(),
        json!({"cdiVersion": "0.0.2", "error": 2, "message": "Incompatible CDI version",
               "details": "Unsupported config version: 0.0.0"})
    );
}

/// ADD example 1: one GPU for request 1234 gives the first GPU's card and
/// render nodes; the allocation is recorded whole.
#[test]
fn add_one_gpu() {
    let host = Host::seed();
    let r = host.drm(&add_env("gpu:1", "1234"));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.json.unwrap(),
        json!({"cdiVersion": "0.0.1", "devices": ["/dev/dri/card0", "/dev/dri/renderD128"]})
    );
    let state = host.state();
    let a = &state["allocations"][0];
    assert_eq!(state["allocations"].as_array().unwrap().len(), 1);
    assert_eq!(a["request_id"], "1234");
    assert_eq!(a["resource"], "gpu");
    assert_eq!(a["generator"], "drm");
    assert!(a["allocated_at"].as_u64().unwrap() > 1_700_000_000);
    assert_eq!(
        a["devices"],
        json!([{"backend": "drm", "id": "0000:01:00.0",
                "sysfs_path": "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0",
                "nodes": ["/dev/dri/card0", "/dev/dri/renderD128"],
                "exclusive": ["/dev/dri/card0", "/dev/dri/renderD128"],
                "shared": []}])
    );
    assert_eq!(
        host.info(DRM_CONF),
        json!({"cdiVersion": "0.0.1", "gpu": 1})
    );
    // The next request gets the other whitelisted GPU.
    let r = host.drm(&add_env("gpu:1", "5678"));
    assert_eq!(
        r.json.unwrap()["devices"],
        json!(["/dev/dri/card1", "/dev/dri/renderD129"])
    );
}

/// ADD example 3: an unknown subtype is error 4, and nothing is allocated
/// (the plain `gpu:1` before it included).
#[test]
fn unknown_subtype_is_error_4() {
    let host = Host::seed();
    let r = host.drm(&add_env("gpu:1,gpu-memory:2048Mi", "3456"));
    assert_eq!(r.code, 1);
    assert_eq!(
        r.json.unwrap(),
        error(
            4,
            "resource-spec unsupported",
            "Unsupported resource-spec: gpu-memory"
        )
    );
    assert_eq!(host.info(DRM_CONF)["gpu"], 2);
    // Another type is not served either.
    let r = host.drm(&add_env("tty:3", "3456"));
    assert_eq!(
        r.json.unwrap(),
        error(
            4,
            "resource-spec unsupported",
            "Unsupported resource-spec: tty"
        )
    );
}

/// DEL examples 1 and 2: releasing prints nothing; an unknown request ID
/// is error 5 with exit status 0.
#[test]
fn del_releases_and_unknown_ids_are_error_5_with_exit_0() {
    let host = Host::seed();
    assert_eq!(host.drm(&add_env("gpu:1", "1234")).code, 0);
    let del = |id: &str| {
        host.drm(&[
            ("CDI_VERSION", "0.0.1"),
            ("CDI_COMMAND", "DEL"),
            ("CDI_REQUEST_ID", id),
        ])
    };
    let r = del("1234");
    assert_eq!((r.code, r.json), (0, None));
    assert_eq!(host.state(), json!({"version": 2, "allocations": []}));
    assert_eq!(host.info(DRM_CONF)["gpu"], 2);
    let r = del("3456");
    assert_eq!(r.code, 0);
    assert_eq!(
        r.json.unwrap(),
        json!({"cdiVersion": "0.0.1", "error": 5, "message": "Unknown request ID"})
    );
    // Released once: a second DEL of 1234 knows nothing either.
    assert_eq!(del("1234").json.unwrap()["error"], 5);
}

// ---- The other well-known codes and cdigen's own -------------------------

#[test]
fn config_version_unsupported_or_not_cdi_version_is_error_2() {
    let host = Host::seed();
    let r = host.drm(&[("CDI_VERSION", "0.0.2"), ("CDI_COMMAND", "INFO")]);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.json.unwrap(),
        json!({"cdiVersion": "0.0.2", "error": 2, "message": "Incompatible CDI version",
               "details": "The config's cdiVersion 0.0.1 is not CDI_VERSION 0.0.2"})
    );
    let old = DRM_CONF.replace("\"0.0.1\"", "\"0.0.0\"");
    let r = host.run_as(
        "drm",
        &[("CDI_VERSION", "0.0.1"), ("CDI_COMMAND", "INFO")],
        Some(&old),
    );
    assert_eq!(r.code, 1);
    assert_eq!(
        r.json.unwrap(),
        error(
            2,
            "Incompatible CDI version",
            "Unsupported config version: 0.0.0"
        )
    );
}

#[test]
fn bad_configuration_is_error_100_naming_the_field() {
    let host = Host::seed();
    let info = |stdin: &str| {
        let r = host.run_as(
            "drm",
            &[("CDI_VERSION", "0.0.1"), ("CDI_COMMAND", "INFO")],
            Some(stdin),
        );
        assert_eq!(r.code, 1, "{r:?}");
        let v = r.json.unwrap();
        assert_eq!(v["error"], 100, "{v}");
        assert_eq!(v["message"], "Invalid configuration");
        v["details"].as_str().unwrap().to_string()
    };
    assert_eq!(info(""), "no configuration on stdin");
    assert!(info("{\"cdiVersion\": ").starts_with("the configuration on stdin is not JSON"));
    assert_eq!(
        info(r#"{"cdiVersion": "0.0.1", "name": "x", "plugin": "drm"}"#),
        "missing field type"
    );
    assert_eq!(
        info(&conf(json!({"vendorid_whitelist": ["0x12345"]}))),
        "args.vendorid_whitelist[0]: \"0x12345\" is not a PCI vendor ID like \"0x1002\""
    );
    assert!(
        info(&conf(json!({"want_device_nodes": ["control"]})))
            .starts_with("args.want_device_nodes[0]: \"control\" is not a node role (expected one of primary, render,")
    );
    assert_eq!(
        info(&conf(json!({"generator": "nope"}))),
        format!(
            "args.generator: no generator named \"nope\" (known: {})",
            "accel, alsa, amd-gpu, bmc-display, dma-heap, drm, gaudi, generic-tty, intel-gpu, intel-gpu-mei, intel-npu, nvidia, nvidia-gdrcopy, nvidia-gds, nvidia-imex, nvidia-management, rdma, rdma-shared, sriov, usb-serial, vdpa, vfio, xdma"
        )
    );
    // Unknown args are ignored with a warning on stderr (stdout stays JSON).
    let r = host.run_as(
        "drm",
        &[("CDI_VERSION", "0.0.1"), ("CDI_COMMAND", "INFO")],
        Some(&conf(json!({"colour": "red"}))),
    );
    assert_eq!(r.code, 0);
    assert!(
        r.stderr
            .contains("configuration: ignoring unknown args.colour"),
        "{}",
        r.stderr
    );
}

#[test]
fn bad_parameters_are_error_101() {
    let host = Host::seed();
    let details = |env: &[(&str, &str)]| {
        let r = host.drm(env);
        assert_eq!(r.code, 1, "{r:?}");
        let v = r.json.unwrap();
        assert_eq!(v["error"], 101, "{v}");
        assert_eq!(v["message"], "Invalid parameter");
        v["details"].as_str().unwrap().to_string()
    };
    assert_eq!(
        details(&[
            ("CDI_VERSION", "0.0.1"),
            ("CDI_COMMAND", "ADD"),
            ("CDI_REQUEST_ID", "1")
        ]),
        "CDI_REQUEST is not set"
    );
    assert_eq!(
        details(&[
            ("CDI_VERSION", "0.0.1"),
            ("CDI_COMMAND", "ADD"),
            ("CDI_REQUEST", "gpu:1")
        ]),
        "CDI_REQUEST_ID is not set"
    );
    assert_eq!(
        details(&add_env("gpu:1", "-pod")),
        "CDI_REQUEST_ID \"-pod\" is not a request-id: a letter or digit, then at most 63 letters, digits or hyphens"
    );
    assert_eq!(
        details(&add_env("gpu:0", "1")),
        "CDI_REQUEST: the amount of gpu, \"0\", is not a positive integer"
    );
    assert_eq!(
        details(&add_env("gpu=1", "1")),
        "CDI_REQUEST: \"gpu=1\" is not <resource-spec>:<amount>"
    );
    let mut env = add_env("gpu:1", "1");
    env.push(("CDI_REQUEST_NUMA_LOCALITY", "0,x"));
    assert_eq!(
        details(&env),
        "CDI_REQUEST_NUMA_LOCALITY: \"x\" is not a NUMA node number (expected a comma-separated list of integers)"
    );
    assert!(!host.state_file().exists(), "nothing allocated");
}

/// All or nothing: 3 GPUs asked of 2 is error 102 and allocates none.
#[test]
fn not_enough_devices_is_error_102_and_allocates_nothing() {
    let host = Host::seed();
    let r = host.drm(&add_env("gpu:3", "1"));
    assert_eq!(r.code, 1);
    assert_eq!(
        r.json.unwrap(),
        error(102, "Not enough devices", "gpu: 3 requested, 2 available")
    );
    assert_eq!(host.info(DRM_CONF)["gpu"], 2);
    assert_eq!(host.drm(&add_env("gpu:2", "1")).code, 0);
    assert_eq!(
        host.drm(&add_env("gpu:1", "2")).json.unwrap()["details"],
        "gpu: 1 requested, 0 available"
    );
}

#[test]
fn the_same_request_id_and_resource_twice_is_error_103() {
    let host = Host::seed();
    assert_eq!(host.drm(&add_env("gpu:1", "1234")).code, 0);
    let r = host.drm(&add_env("gpu:1", "1234"));
    assert_eq!(r.code, 1);
    assert_eq!(
        r.json.unwrap(),
        error(
            103,
            "Resource already allocated to this request ID",
            "request 1234 already holds gpu from generator drm (DEL it first)"
        )
    );
    assert_eq!(host.info(DRM_CONF)["gpu"], 1);
}

#[test]
fn a_corrupt_state_file_is_error_104_naming_it_and_is_kept() {
    let host = Host::seed();
    std::fs::create_dir_all(host.state_dir()).unwrap();
    std::fs::write(host.state_file(), "{\"version\": 1, \"allocations\": [").unwrap();
    let r = host.drm(&add_env("gpu:1", "1"));
    assert_eq!(r.code, 1);
    assert_eq!(
        r.json.unwrap(),
        error(
            104,
            "Cannot read the host or the allocations",
            &format!(
                "{}: corrupt allocations file (fix or remove it; removing it forgets every allocation): EOF while parsing a list at line 1 column 31",
                host.state_file().display()
            )
        )
    );
    assert_eq!(
        std::fs::read_to_string(host.state_file()).unwrap(),
        "{\"version\": 1, \"allocations\": ["
    );
    // DEL reports it too, and still exits 0.
    let r = host.drm(&[
        ("CDI_VERSION", "0.0.1"),
        ("CDI_COMMAND", "DEL"),
        ("CDI_REQUEST_ID", "1"),
    ]);
    assert_eq!((r.code, &r.json.unwrap()["error"]), (0, &json!(104)));
}

/// DEL never fails: whatever goes wrong, the exit status is 0.
#[test]
fn del_exits_0_on_every_error() {
    let host = Host::seed();
    for env in [
        vec![
            ("CDI_VERSION", "9"),
            ("CDI_COMMAND", "del"),
            ("CDI_REQUEST_ID", "1"),
        ],
        vec![("CDI_VERSION", "0.0.1"), ("CDI_COMMAND", "DEL")],
    ] {
        let r = host.drm(&env);
        assert_eq!(r.code, 0, "{env:?}");
        assert!(r.json.unwrap()["error"].as_u64().unwrap() > 0);
    }
}

// ---- Pools: NUMA, args, generators, the subcommand, a real fixture -------

/// Four GPUs on NUMA nodes 0, 0, 1, 1.
fn numa_host() -> Host {
    Host::with_gpus(&[
        Gpu {
            vendor: "0x1234",
            numa: Some(0),
        },
        Gpu {
            vendor: "0x1234",
            numa: Some(0),
        },
        Gpu {
            vendor: "0x1234",
            numa: Some(1),
        },
        Gpu {
            vendor: "0x1234",
            numa: Some(1),
        },
    ])
}

#[test]
fn numa_subtypes_and_locality() {
    let host = numa_host();
    assert_eq!(
        host.info(DRM_CONF),
        json!({"cdiVersion": "0.0.1", "gpu": 4, "gpu-numa0": 2, "gpu-numa1": 2})
    );
    let mut env = add_env("gpu:1", "near1");
    env.push(("CDI_REQUEST_NUMA_LOCALITY", "1"));
    let r = host.drm(&env);
    assert_eq!(
        r.json.unwrap(),
        json!({"cdiVersion": "0.0.1", "devices": ["/dev/dri/card2", "/dev/dri/renderD130"],
               "numa_locality": [1]})
    );
    let r = host.drm(&add_env("gpu-numa0:2", "on0"));
    assert_eq!(
        r.json.unwrap(),
        json!({"cdiVersion": "0.0.1",
               "devices": ["/dev/dri/card0", "/dev/dri/renderD128",
                           "/dev/dri/card1", "/dev/dri/renderD129"],
               "numa_locality": [0]})
    );
    assert_eq!(
        host.info(DRM_CONF),
        json!({"cdiVersion": "0.0.1", "gpu": 1, "gpu-numa0": 0, "gpu-numa1": 1})
    );
    // Preference, not a constraint: node 0 is full, node 1 serves.
    let mut env = add_env("gpu:1", "near0");
    env.push(("CDI_REQUEST_NUMA_LOCALITY", "0"));
    let r = host.drm(&env);
    assert_eq!(r.json.unwrap()["numa_locality"], json!([1]));
    let r = host.drm(&add_env("gpu-numa1:1", "late"));
    assert_eq!(
        r.json.unwrap()["details"],
        "gpu-numa1: 1 requested, 0 available"
    );
}

/// `num_system_reserved` skips the first devices, `want_device_nodes`
/// picks the nodes, a user generator (CDIGEN_GENERATORS) defines the pool.
#[test]
fn args_and_user_generators_shape_the_pool() {
    let host = numa_host();
    let reserved = conf(json!({"num_system_reserved": 1, "want_device_nodes": ["render"]}));
    assert_eq!(host.info(&reserved)["gpu"], 3);
    let r = host.add(&reserved, "gpu:1", "a");
    assert_eq!(
        r.json.unwrap(),
        json!({"cdiVersion": "0.0.1", "devices": ["/dev/dri/renderD129"], "numa_locality": [0]})
    );
    std::fs::write(
        host.generators().join("second-half.yaml"),
        "name: second-half\nbackend: drm\nkind: example.com/gpu\ntemplate: drm\n\
         select:\n  pci_addresses: [\"0000:03:00.0\", \"0000:04:00.0\"]\n",
    )
    .unwrap();
    let mine = json!({"cdiVersion": "0.0.1", "name": "x", "type": "gpu",
                      "plugin": "second-half", "args": {"want_device_types": ["primary"]}})
    .to_string();
    assert_eq!(
        host.info(&mine),
        json!({"cdiVersion": "0.0.1", "gpu": 2, "gpu-numa1": 2})
    );
    let r = host.add(&mine, "gpu:2", "b");
    assert_eq!(
        r.json.unwrap()["devices"],
        json!(["/dev/dri/card2", "/dev/dri/card3"])
    );
    // The pools share one state: the drm pool has lost those two as well.
    assert_eq!(host.info(DRM_CONF)["gpu"], 1);
}

/// `cdigen plugin` with flags is the same protocol.
#[test]
fn the_subcommand_with_a_state_dir_flag() {
    let host = Host::seed();
    let elsewhere = host.tmp.path().join("elsewhere");
    let mut cmd = host.command(
        &assert_cmd::cargo::cargo_bin("cdigen"),
        &add_env("gpu:1", "1234"),
    );
    cmd.arg("plugin")
        .arg("--state-dir")
        .arg(&elsewhere)
        .env_remove("CDIGEN_STATE_DIR");
    let r = finish(&mut cmd, Some(DRM_CONF));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.json.unwrap()["devices"],
        json!(["/dev/dri/card0", "/dev/dri/renderD128"])
    );
    assert!(elsewhere.join("allocations.json").exists());
    assert!(!host.state_dir().exists());
}

/// The real `rpi` fixture with the built-in `drm` generator: platform
/// GPUs (no PCI vendor, so no whitelist), v3d first.
#[test]
fn rpi_fixture_platform_gpus() {
    let host = fixture("rpi");
    let plain = conf(json!({}));
    assert_eq!(host.info(&plain), json!({"cdiVersion": "0.0.1", "gpu": 2}));
    let r = host.add(&plain, "gpu:2", "pi");
    assert_eq!(
        r.json.unwrap(),
        json!({"cdiVersion": "0.0.1",
               "devices": ["/dev/dri/card0", "/dev/dri/renderD128", "/dev/dri/card1"]})
    );
    // The draft's whitelist takes PCI vendors only: nothing here.
    assert_eq!(host.info(DRM_CONF)["gpu"], 0);
}

/// The draft's `/etc/cdi/tty.d/generic.conf`, verbatim.
const TTY_CONF: &str = r#"{
  "cdiVersion": "0.0.1",
  "name": "TTYs",
  "type": "tty",
  "plugin": "generic-tty",
  "args": {
    "num_system_reserved": 12
  }
}
"#;

/// INFO example 2 and ADD example 2, with the draft's environment (INFO
/// without CDI_VERSION): the binary linked as `generic-tty`, on the
/// `serial-host` fixture (VTs tty0 to tty63; tty0 is the current-console
/// alias and never handed out, tty1 to tty12 are reserved), through the
/// shipped `generic-tty` definition, which is disabled for `generate` but
/// serves the plugin when named.
#[test]
fn seed_tty_examples() {
    let host = fixture("serial-host");
    let info = [("CDI_COMMAND", "INFO")];
    let r = host.run_as("generic-tty", &info, Some(TTY_CONF));
    assert_eq!(r.code, 0, "{r:?}");
    // The draft's host had 32 free; this one has tty13..tty63.
    assert_eq!(r.json.unwrap(), json!({"cdiVersion": "0.0.1", "tty": 51}));

    let r = host.run_as("generic-tty", &add_env("tty:3", "7890"), Some(TTY_CONF));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.json.unwrap(),
        json!({"cdiVersion": "0.0.1", "devices": ["/dev/tty13", "/dev/tty14", "/dev/tty15"]})
    );
    let r = host.run_as("generic-tty", &info, Some(TTY_CONF));
    assert_eq!(r.json.unwrap()["tty"], 48);

    // Reserving fewer than the definition does hands out tty3 next: the
    // configuration's number replaces the definition's `reserve`.
    let two = TTY_CONF.replace("\"num_system_reserved\": 12", "\"num_system_reserved\": 2");
    let r = host.run_as("generic-tty", &add_env("tty:1", "other"), Some(&two));
    assert_eq!(r.json.unwrap()["devices"], json!(["/dev/tty3"]));

    // DEL gives the three back.
    let del = [
        ("CDI_VERSION", "0.0.1"),
        ("CDI_COMMAND", "DEL"),
        ("CDI_REQUEST_ID", "7890"),
    ];
    let r = host.run_as("generic-tty", &del, Some(TTY_CONF));
    assert_eq!((r.code, r.json), (0, None));
    let r = host.run_as("generic-tty", &info, Some(TTY_CONF));
    assert_eq!(r.json.unwrap()["tty"], 51);
}

/// A device that vanished from the host is released with a warning.
#[test]
fn vanished_devices_are_released_with_a_warning() {
    let host = numa_host();
    assert_eq!(host.drm(&add_env("gpu:2", "pod")).code, 0);
    assert_eq!(host.drm(&add_env("gpu:1", "other")).code, 0);
    gpus::remove_gpu(&host.root, 0);
    let r = host.run_as(
        "drm",
        &[("CDI_VERSION", "0.0.1"), ("CDI_COMMAND", "INFO")],
        Some(DRM_CONF),
    );
    assert_eq!(r.json.unwrap()["gpu"], 1, "3 GPUs left, 2 of them taken");
    let file = host.state_file().display().to_string();
    assert!(
        r.stderr.contains(&format!(
            "{file}: releasing 0000:01:00.0 (drm) of request pod (gpu, generator drm): the device is gone from the host (/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0 no longer exists)"
        )),
        "{}",
        r.stderr
    );
    let state = host.state();
    assert_eq!(
        state["allocations"][0]["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["id"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["0000:02:00.0"]
    );
    // The last device of "other" goes too: its allocation is dropped.
    gpus::remove_gpu(&host.root, 2);
    let r = host.drm(&[
        ("CDI_VERSION", "0.0.1"),
        ("CDI_COMMAND", "DEL"),
        ("CDI_REQUEST_ID", "other"),
    ]);
    assert!(
        r.stderr.contains(
            "request other holds no gpu device of generator drm any more; dropping its allocation"
        ),
        "{}",
        r.stderr
    );
    assert_eq!(r.json.unwrap()["error"], 5);
    assert_eq!(host.state()["allocations"].as_array().unwrap().len(), 1);
}

// ---- Concurrency and crashes ------------------------------------------------

/// Eight whitelisted GPUs.
fn eight_gpus() -> Host {
    Host::with_gpus(
        &[Gpu {
            vendor: "0x1234",
            numa: None,
        }; 8],
    )
}

/// Checks the allocations file: valid, each allocation whole (one device
/// per `gpu:1`), no device twice. Returns request ID → device id.
fn check_state(host: &Host) -> Vec<(String, String)> {
    // Every ADD may have been killed before it saved (a loaded machine):
    // then no file was ever written, which is a consistent state too.
    if !host.state_file().exists() {
        return Vec::new();
    }
    let state = host.state();
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for a in state["allocations"].as_array().unwrap() {
        let devices = a["devices"].as_array().unwrap();
        assert_eq!(devices.len(), 1, "{a}");
        let id = devices[0]["id"].as_str().unwrap().to_string();
        assert!(seen.insert(id.clone()), "{id} allocated twice");
        assert_eq!(devices[0]["nodes"].as_array().unwrap().len(), 2, "{a}");
        out.push((a["request_id"].as_str().unwrap().to_string(), id));
    }
    out
}

fn spawn_add(host: &Host, id: &str, extra: &[(&str, &str)]) -> Child {
    let mut env = add_env("gpu:1", id);
    env.extend_from_slice(extra);
    let mut child = host
        .command(&host.plugin("drm"), &env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    feed(&mut child, DRM_CONF);
    child
}

/// 32 ADDs at once over 8 GPUs: exactly 8 succeed, each with its own GPU;
/// the others get 102.
#[test]
fn parallel_adds_never_share_a_device() {
    let host = eight_gpus();
    let children: Vec<(String, Child)> = (0..32)
        .map(|i| {
            let id = format!("pod{i}");
            let c = spawn_add(&host, &id, &[]);
            (id, c)
        })
        .collect();
    let mut granted = Vec::new();
    for (id, c) in children {
        let out = c.wait_with_output().unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        match out.status.code() {
            Some(0) => granted.push((id, v["devices"][0].as_str().unwrap().to_string())),
            Some(1) => assert_eq!(v["error"], 102, "{v}"),
            other => panic!("{id}: exit {other:?}: {v}"),
        }
    }
    assert_eq!(granted.len(), 8, "{granted:?}");
    let cards: BTreeSet<&String> = granted.iter().map(|(_, c)| c).collect();
    assert_eq!(cards.len(), 8, "no card twice: {granted:?}");
    let recorded = check_state(&host);
    assert_eq!(recorded.len(), 8);
    let ids: BTreeSet<&String> = recorded.iter().map(|(r, _)| r).collect();
    assert_eq!(ids, granted.iter().map(|(r, _)| r).collect());
    assert_eq!(host.info(DRM_CONF)["gpu"], 0);
}

/// Reads `child`'s stderr until a line contains `marker`.
fn wait_for_line(child: &mut Child, marker: &str) {
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        match lines.next() {
            Some(Ok(l)) if l.contains(marker) => return,
            Some(_) => {}
            None => break,
        }
    }
    panic!("no {marker:?} on stderr");
}

/// An ADD killed with SIGKILL while it holds the lock, its allocation
/// decided but not saved: the state is as before, the lock is free (a
/// waiting ADD goes on), no temp file stays.
#[test]
fn kill_9_while_holding_the_lock_leaves_a_consistent_state() {
    let host = eight_gpus();
    assert_eq!(host.drm(&add_env("gpu:1", "before")).code, 0);
    let mut held = spawn_add(&host, "killed", &[("CDIGEN_TEST_HOLD_LOCK_MS", "10000")]);
    wait_for_line(&mut held, "test hook: holding the lock");
    let waiting = spawn_add(&host, "after", &[]);
    std::thread::sleep(Duration::from_millis(200));
    held.kill().unwrap(); // SIGKILL
    held.wait().unwrap();
    let start = Instant::now();
    let out = waiting.wait_with_output().unwrap();
    assert!(start.elapsed() < Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let recorded = check_state(&host);
    assert_eq!(
        recorded.iter().map(|(r, _)| r.as_str()).collect::<Vec<_>>(),
        ["before", "after"]
    );
    let names: Vec<String> = std::fs::read_dir(host.state_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
    assert_eq!(host.info(DRM_CONF)["gpu"], 6);
}

/// ADDs killed at arbitrary moments (waiting, discovering, writing): the
/// file stays valid, every allocation whole, every ADD that said yes is
/// recorded, and the lock is free afterwards.
#[test]
fn random_kills_during_adds_leave_a_consistent_state() {
    let host = eight_gpus();
    // A fixed xorshift sequence: the same schedule on every run.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut children: Vec<(String, Child, Duration)> = (0..16)
        .map(|i| {
            let id = format!("pod{i}");
            let delay = Duration::from_millis(next() % 250);
            // Each ADD that gets a GPU holds the lock 25 ms before saving:
            // the 8 take at least 200 ms in all, so kills land in every
            // phase (waiting, discovering, holding, writing).
            let hold = [("CDIGEN_TEST_HOLD_LOCK_MS", "25")];
            (id.clone(), spawn_add(&host, &id, &hold), delay)
        })
        .collect();
    let start = Instant::now();
    children.sort_by_key(|(_, _, d)| *d);
    let mut said_yes = Vec::new();
    let mut killed = 0;
    for (id, mut c, delay) in children {
        if let Some(wait) = delay.checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
        if c.try_wait().unwrap().is_none() {
            c.kill().unwrap();
            killed += 1;
        }
        let out = c.wait_with_output().unwrap();
        if out.status.code() == Some(0) {
            said_yes.push(id);
        }
    }
    eprintln!("killed {killed} of 16; {} said yes", said_yes.len());
    assert!(killed > 0);
    let recorded = check_state(&host);
    for id in &said_yes {
        assert!(
            recorded.iter().any(|(r, _)| r == id),
            "{id} said yes but is not recorded"
        );
    }
    // The lock is free and the count adds up.
    assert_eq!(host.info(DRM_CONF)["gpu"], 8 - recorded.len());
    let names: Vec<String> = std::fs::read_dir(host.state_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
}

// ---- Conflicts by node, scopes by generator, devices gone or not ----------

/// The configuration of plugin `generator` serving `type`, with `args`.
fn plugin_conf(resource_type: &str, generator: &str, args: Value) -> String {
    json!({
        "cdiVersion": "0.0.1",
        "name": "test",
        "type": resource_type,
        "plugin": generator,
        "args": args,
    })
    .to_string()
}

impl Host {
    /// ADD through `conf` (its plugin's link); the reply's devices, or
    /// the error reply.
    fn add_as(&self, conf: &str, request: &str, id: &str) -> Result<Value, Value> {
        let r = self.run_as("plugin", &add_env(request, id), Some(conf));
        match r.code {
            0 => Ok(r.json.unwrap()["devices"].clone()),
            _ => Err(r.json.unwrap()),
        }
    }

    /// INFO through `conf`.
    fn info_as(&self, conf: &str) -> Value {
        let r = self.run_as("plugin", &[("CDI_COMMAND", "INFO")], Some(conf));
        assert_eq!(r.code, 0, "{r:?}");
        r.json.unwrap()
    }

    /// DEL through `conf`: the reply (`None` when it released something).
    fn del_as(&self, conf: &str, id: &str) -> Option<Value> {
        let r = self.run_as(
            "plugin",
            &[
                ("CDI_VERSION", "0.0.1"),
                ("CDI_COMMAND", "DEL"),
                ("CDI_REQUEST_ID", id),
            ],
            Some(conf),
        );
        assert_eq!(r.code, 0, "{r:?}");
        r.json
    }
}

fn not_enough(details: &str) -> Value {
    error(102, "Not enough devices", details)
}

/// `serial-host`'s Gaudi accelerator: the DRM backend reports its
/// `/dev/accel/accel0` with its control node (the `gaudi` generator), and
/// the generic backend the accel node alone (the `accel` definition). The node goes to one request only,
/// whichever configuration asks first.
#[test]
fn an_accel_node_goes_to_one_request_whatever_the_generator() {
    let host = fixture("serial-host");
    let drm = plugin_conf("gpu", "gaudi", json!({}));
    let accel = plugin_conf("accel", "accel", json!({}));
    assert_eq!(host.info_as(&accel)["accel"], 1);
    assert_eq!(
        host.add_as(&drm, "gpu:1", "a"),
        Ok(json!(["/dev/accel/accel0", "/dev/accel/accel_controlD0"]))
    );
    assert_eq!(host.info_as(&accel)["accel"], 0);
    assert_eq!(
        host.add_as(&accel, "accel:1", "b"),
        Err(not_enough("accel: 1 requested, 0 available"))
    );
    assert_eq!(host.del_as(&drm, "a"), None);
    // And the other way round.
    assert_eq!(
        host.add_as(&accel, "accel:1", "b"),
        Ok(json!(["/dev/accel/accel0"]))
    );
    assert_eq!(host.info_as(&drm)["gpu"], 0);
    assert_eq!(
        host.add_as(&drm, "gpu:1", "a"),
        Err(not_enough("gpu: 1 requested, 0 available"))
    );
}

/// `example`'s VF 0000:3b:00.5 carries vDPA device vdpa0: the `sriov`
/// generator (narrowed to its vhost-vdpa node) and the `vdpa` generator
/// both offer `/dev/vhost-vdpa-0`.
#[test]
fn a_vhost_vdpa_node_goes_to_one_request_via_sriov_or_vdpa() {
    let host = fixture("example");
    let vf = plugin_conf("vf", "sriov", json!({"want_device_nodes": ["vhost-vdpa"]}));
    let vdpa = plugin_conf("vdpa", "vdpa", json!({}));
    assert_eq!(
        host.add_as(&vf, "vf:1", "a"),
        Ok(json!(["/dev/vhost-vdpa-0"]))
    );
    assert_eq!(host.info_as(&vdpa)["vdpa"], 0);
    assert_eq!(
        host.add_as(&vdpa, "vdpa:1", "b"),
        Err(not_enough("vdpa: 1 requested, 0 available"))
    );
    assert_eq!(host.del_as(&vf, "a"), None);
    assert_eq!(
        host.add_as(&vdpa, "vdpa:1", "b"),
        Ok(json!(["/dev/vhost-vdpa-0"]))
    );
    assert_eq!(
        host.add_as(&vf, "vf:1", "a"),
        Err(not_enough("vf: 1 requested, 0 available"))
    );
}

/// `example`'s A100 (`/dev/nvidia0`) has MIG devices gi1/ci0 and gi2/ci0,
/// which hold `/dev/nvidia0` too (shared) and their own capabilities: the
/// GPU and a MIG device of it never go to two requests, two MIG devices
/// do.
#[test]
fn a_gpu_and_its_mig_devices_exclude_each_other_mig_siblings_do_not() {
    let host = fixture("example");
    let nvidia = plugin_conf("gpu", "nvidia", json!({}));
    // Only the MIG devices: the whole GPU has no capability node.
    let mig = plugin_conf(
        "gpu",
        "nvidia",
        json!({"want_device_nodes": ["nvidia-cap"]}),
    );
    let control = [
        "/dev/nvidiactl",
        "/dev/nvidia-modeset",
        "/dev/nvidia-uvm",
        "/dev/nvidia-uvm-tools",
    ];
    // The GPU comes first in the pool: its MIG devices are not counted
    // with it.
    assert_eq!(
        host.info_as(&nvidia),
        json!({"cdiVersion": "0.0.1", "gpu": 1, "gpu-numa1": 1})
    );
    assert_eq!(host.info_as(&mig)["gpu"], 2);
    // A MIG device first: the GPU is taken, the other MIG device is not.
    assert_eq!(
        host.add_as(&mig, "gpu:1", "m1"),
        Ok(json!([
            "/dev/nvidia-caps/nvidia-cap12",
            "/dev/nvidia-caps/nvidia-cap13"
        ]))
    );
    let state = host.state();
    let d = &state["allocations"][0]["devices"][0];
    assert_eq!(d["id"], "0000:41:00.0/gi1/ci0");
    assert_eq!(d["exclusive"], json!(["/dev/nvidia-caps/nvidia-cap13"]));
    let mut shared = vec!["/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap12"];
    shared.extend(control);
    assert_eq!(d["shared"], json!(shared));
    assert_eq!(host.info_as(&nvidia)["gpu"], 1);
    let mut sibling = vec![
        "/dev/nvidia0",
        "/dev/nvidia-caps/nvidia-cap21",
        "/dev/nvidia-caps/nvidia-cap22",
    ];
    sibling.extend(control);
    assert_eq!(host.add_as(&nvidia, "gpu:1", "m2"), Ok(json!(sibling)));
    assert_eq!(host.info_as(&nvidia)["gpu"], 0);
    assert_eq!(
        host.add_as(&nvidia, "gpu:1", "g"),
        Err(not_enough("gpu: 1 requested, 0 available"))
    );
    // The whole GPU first: neither MIG device is free.
    assert_eq!(host.del_as(&nvidia, "m1"), None);
    assert_eq!(host.del_as(&nvidia, "m2"), None);
    let mut whole = vec!["/dev/nvidia0", "/dev/dri/card0", "/dev/dri/renderD129"];
    whole.extend(control);
    assert_eq!(host.add_as(&nvidia, "gpu:1", "g"), Ok(json!(whole)));
    assert_eq!(host.info_as(&mig)["gpu"], 0);
    assert_eq!(
        host.add_as(&mig, "gpu:1", "m1"),
        Err(not_enough("gpu: 1 requested, 0 available"))
    );
}

/// `serial-host` has two plugins of type `gpu`: `gaudi` (the Gaudi) and
/// `amd-gpu` (the Radeon). One request ID may hold a GPU of each; the
/// 103 check and DEL keep to the configuration's generator.
#[test]
fn two_plugins_of_one_type_keep_their_allocations_apart() {
    let host = fixture("serial-host");
    let drm = plugin_conf("gpu", "gaudi", json!({}));
    let amd = plugin_conf("gpu", "amd-gpu", json!({}));
    assert_eq!(
        host.add_as(&drm, "gpu:1", "pod"),
        Ok(json!(["/dev/accel/accel0", "/dev/accel/accel_controlD0"]))
    );
    assert_eq!(
        host.add_as(&amd, "gpu:1", "pod"),
        Ok(json!(["/dev/dri/card0", "/dev/dri/renderD128", "/dev/kfd"]))
    );
    assert_eq!(
        host.add_as(&amd, "gpu:1", "pod"),
        Err(error(
            103,
            "Resource already allocated to this request ID",
            "request pod already holds gpu from generator amd-gpu (DEL it first)"
        ))
    );
    // A DEL whose configuration names an unknown generator releases
    // nothing of the others' (it holds nothing: error 5, exit 0).
    let nope = plugin_conf("gpu", "nope", json!({}));
    let r = host.run_as(
        "plugin",
        &[
            ("CDI_VERSION", "0.0.1"),
            ("CDI_COMMAND", "DEL"),
            ("CDI_REQUEST_ID", "pod"),
        ],
        Some(&nope),
    );
    assert_eq!(r.code, 0);
    assert_eq!(r.json.unwrap()["error"], 5);
    assert_eq!(host.state()["allocations"].as_array().unwrap().len(), 2);
    // DEL through amd-gpu releases the Radeon only.
    assert_eq!(host.del_as(&amd, "pod"), None);
    let state = host.state();
    let left = state["allocations"].as_array().unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["generator"], "gaudi");
    assert_eq!(
        host.del_as(&amd, "pod"),
        Some(json!({"cdiVersion": "0.0.1", "error": 5, "message": "Unknown request ID"}))
    );
    assert_eq!(host.info_as(&drm)["gpu"], 0);
    assert_eq!(host.del_as(&drm, "pod"), None);
    assert_eq!(host.info_as(&drm)["gpu"], 1);
}

/// A GPU unbound from its driver is no longer found, but its PCI device
/// is still there: its allocation is kept. Unplugged, it is released.
#[test]
fn an_unbound_device_stays_allocated_an_unplugged_one_is_released() {
    let host = Host::seed();
    assert_eq!(host.drm(&add_env("gpu:1", "pod")).code, 0);
    gpus::unbind_gpu(&host.root, 0);
    let r = host.run_as(
        "drm",
        &[("CDI_COMMAND", "INFO"), ("RUST_LOG", "info")],
        Some(DRM_CONF),
    );
    assert_eq!(r.json.unwrap()["gpu"], 1, "{}", r.stderr);
    assert!(
        r.stderr.contains(
            "0000:01:00.0 (drm) is not found by discovery now but \
             /sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0 exists; keeping its allocation"
        ),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("releasing"), "{}", r.stderr);
    assert_eq!(host.state()["allocations"][0]["request_id"], "pod");
    gpus::remove_gpu(&host.root, 0);
    let r = host.run_as("drm", &[("CDI_COMMAND", "INFO")], Some(DRM_CONF));
    assert_eq!(r.json.unwrap()["gpu"], 1);
    assert!(
        r.stderr
            .contains("releasing 0000:01:00.0 (drm) of request pod"),
        "{}",
        r.stderr
    );
    assert_eq!(host.state()["allocations"], json!([]));
}

/// A device a user definition selects stays allocated when the definition
/// is removed (the generic backend no longer looks for it), and is
/// released with a warning once its sysfs directory is gone.
#[test]
fn a_device_is_released_only_when_its_sysfs_directory_is_gone() {
    let host = fixture_copy("serial-host");
    let definition = host.generators().join("keys.yaml");
    std::fs::write(
        &definition,
        "name: keys\nbackend: generic\nkind: example.com/key\n\
         match:\n  subsystem: hidraw\n  name: [\"hidraw*\"]\n\
         names: [node]\ntemplate: generic\n",
    )
    .unwrap();
    let keys = plugin_conf("key", "keys", json!({}));
    assert_eq!(
        host.add_as(&keys, "key:1", "pod"),
        Ok(json!(["/dev/hidraw0"]))
    );
    let sysfs = "/sys/devices/pci0000:00/0000:00:08.1/0000:0e:00.3/usb1/1-4/1-4:1.0/0003:1050:0407.0001/hidraw/hidraw0";
    assert_eq!(
        host.state()["allocations"][0]["devices"][0]["sysfs_path"],
        sysfs
    );
    // Another plugin's command, the definition gone: kept.
    std::fs::remove_file(&definition).unwrap();
    let r = host.run_as("generic-tty", &[("CDI_COMMAND", "INFO")], Some(TTY_CONF));
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!r.stderr.contains("releasing"), "{}", r.stderr);
    assert_eq!(host.state()["allocations"].as_array().unwrap().len(), 1);
    // The device unplugged: released, with a warning.
    std::fs::remove_dir_all(host.root.join(sysfs.trim_start_matches('/'))).unwrap();
    std::fs::remove_file(host.root.join("sys/class/hidraw/hidraw0")).unwrap();
    let r = host.run_as("generic-tty", &[("CDI_COMMAND", "INFO")], Some(TTY_CONF));
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains(&format!(
            "{}: releasing hidraw:hidraw0 (generic) of request pod (key, generator keys): \
             the device is gone from the host ({sysfs} no longer exists)",
            host.state_file().display()
        )),
        "{}",
        r.stderr
    );
    assert_eq!(host.state()["allocations"], json!([]));
}

/// `num_system_reserved` skips devices of the narrowed pool; without it,
/// the generator's own `reserve` applies before the narrowing.
#[test]
fn num_system_reserved_counts_after_the_narrowing() {
    let host = Host::with_gpus(&[
        Gpu {
            vendor: "0x5555",
            numa: None,
        },
        Gpu {
            vendor: "0x1234",
            numa: None,
        },
        Gpu {
            vendor: "0x1234",
            numa: None,
        },
    ]);
    let reserved = conf(json!({"vendorid_whitelist": ["0x1234"], "num_system_reserved": 1}));
    assert_eq!(host.info(&reserved)["gpu"], 1);
    assert_eq!(
        host.add(&reserved, "gpu:1", "a").json.unwrap()["devices"],
        json!(["/dev/dri/card2", "/dev/dri/renderD130"])
    );
    std::fs::write(
        host.generators().join("reserving.yaml"),
        "name: reserving\nbackend: drm\nkind: example.com/gpu\ntemplate: drm\nreserve: 1\n",
    )
    .unwrap();
    let own = plugin_conf(
        "gpu",
        "reserving",
        json!({"vendorid_whitelist": ["0x1234"]}),
    );
    // The definition reserves the first GPU of all (0x5555): card1 is
    // free, card2 is taken.
    assert_eq!(host.info_as(&own)["gpu"], 1);
    assert_eq!(
        host.add_as(&own, "gpu:1", "b"),
        Ok(json!(["/dev/dri/card1", "/dev/dri/renderD129"]))
    );
}

// ---- The whole configuration first; replies that cannot be written -------

/// The configuration (its generator and args included) is checked before
/// the command, for every command but VERSION and DEL (which releases by
/// the generator's name: see the next test).
#[test]
fn the_whole_configuration_is_checked_before_the_command() {
    let host = Host::seed();
    let nope = conf(json!({"generator": "nope"}));
    let bad_args = conf(json!({"vendorid_whitelist": ["x"]}));
    for (stdin, details) in [
        (
            &nope,
            "args.generator: no generator named \"nope\" (known: accel, alsa, amd-gpu, bmc-display, dma-heap, drm, gaudi, generic-tty, intel-gpu, intel-gpu-mei, intel-npu, nvidia, nvidia-gdrcopy, nvidia-gds, nvidia-imex, nvidia-management, rdma, rdma-shared, sriov, usb-serial, vdpa, vfio, xdma)",
        ),
        (
            &bad_args,
            "args.vendorid_whitelist[0]: \"x\" is not a PCI vendor ID like \"0x1002\"",
        ),
    ] {
        for command in ["MYCMD", "ADD"] {
            let r = host.run_as(
                "drm",
                &[("CDI_VERSION", "0.0.1"), ("CDI_COMMAND", command)],
                Some(stdin),
            );
            assert_eq!(r.code, 1, "{command}");
            assert_eq!(
                r.json.unwrap(),
                error(100, "Invalid configuration", details),
                "{command}"
            );
        }
    }
    let r = host.run_as("drm", &[("CDI_COMMAND", "VERSION")], Some(&nope));
    assert_eq!(r.code, 0);
}

/// DEL frees what a request holds from a generator whose definition has
/// since been removed: it needs only the generator's name, so an
/// allocation never outlives its definition (the caller does not retry a
/// DEL).
#[test]
fn del_releases_by_name_when_the_definition_is_gone() {
    let host = Host::seed();
    let def = "name: mine\nbackend: drm\nkind: example.com/gpu\ntemplate: drm\n";
    std::fs::write(host.generators().join("mine.yaml"), def).unwrap();
    let mine = conf(json!({"generator": "mine"}));
    let r = host.add(&mine, "gpu:1", "pod");
    assert_eq!(r.code, 0, "{r:?}");
    std::fs::remove_file(host.generators().join("mine.yaml")).unwrap();
    // Not even a definitions directory that loads is needed.
    std::fs::write(host.generators().join("broken.yaml"), "name: [").unwrap();
    let del = [
        ("CDI_VERSION", "0.0.1"),
        ("CDI_COMMAND", "DEL"),
        ("CDI_REQUEST_ID", "pod"),
    ];
    let r = host.run_as("drm", &del, Some(&mine));
    assert_eq!((r.code, r.json), (0, None), "{}", r.stderr);
    assert!(
        r.stderr.contains("not checking for vanished devices"),
        "{}",
        r.stderr
    );
    assert_eq!(host.state()["allocations"], json!([]));
    // And a DEL of what is no longer held is error 5, exit 0.
    let r = host.run_as("drm", &del, Some(&mine));
    assert_eq!(r.code, 0);
    assert_eq!(r.json.unwrap()["error"], 5);
}

/// Runs `drm` with `env`, the draft's configuration on stdin, and a
/// stdout whose reader is gone.
fn with_closed_stdout(host: &Host, env: &[(&str, &str)]) -> (i32, String) {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut child = host
        .command(&host.plugin("drm"), env)
        .stdin(Stdio::piped())
        .stdout(writer)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    feed(&mut child, DRM_CONF);
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().expect("exited, not killed"),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// A reply that cannot be written is an error (exit 1), except for DEL;
/// an ADD whose reply cannot be written is taken back.
#[test]
fn a_reply_that_cannot_be_written_is_an_error_and_an_add_is_taken_back() {
    let host = Host::seed();
    let (code, stderr) = with_closed_stdout(&host, &add_env("gpu:1", "lost"));
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("request lost: cannot write the reply to stdout")
            && stderr.contains("the allocation is taken back"),
        "{stderr}"
    );
    assert_eq!(host.state()["allocations"], json!([]));
    // An ADD that fails, INFO and VERSION: exit 1 as well.
    for env in [
        add_env("gpu:3", "lost"),
        vec![("CDI_COMMAND", "INFO")],
        vec![("CDI_COMMAND", "VERSION")],
    ] {
        let (code, stderr) = with_closed_stdout(&host, &env);
        assert_eq!(code, 1, "{env:?}: {stderr}");
        assert!(
            stderr.contains("cannot write the reply to stdout"),
            "{stderr}"
        );
    }
    // DEL never fails: releasing prints nothing, an unknown ID's error
    // reply cannot be written.
    assert_eq!(host.drm(&add_env("gpu:1", "kept")).code, 0);
    for id in ["kept", "kept"] {
        let del = [
            ("CDI_VERSION", "0.0.1"),
            ("CDI_COMMAND", "DEL"),
            ("CDI_REQUEST_ID", id),
        ];
        let (code, stderr) = with_closed_stdout(&host, &del);
        assert_eq!(code, 0, "{stderr}");
    }
    assert_eq!(host.state()["allocations"], json!([]));
}

/// The test hook waits at most 10 s: more, or a value that is not a
/// number of milliseconds, is refused before anything runs, naming the
/// variable.
#[test]
fn the_test_hook_is_bounded() {
    let host = Host::seed();
    let mut held = spawn_add(&host, "held", &[("CDIGEN_TEST_HOLD_LOCK_MS", "10000")]);
    wait_for_line(
        &mut held,
        "test hook: holding the lock for 10000 ms before saving",
    );
    held.kill().unwrap();
    held.wait().unwrap();
    for bad in ["10001", "86400000", "18446744073709551616", "-1", "1s", ""] {
        let mut env = add_env("gpu:1", "refused");
        env.push(("CDIGEN_TEST_HOLD_LOCK_MS", bad));
        let got = host.drm(&env);
        assert_eq!(got.code, 2, "{bad}");
        assert_eq!(got.json, None, "{bad}");
        assert_eq!(
            got.stderr,
            format!(
                "cdigen: CDIGEN_TEST_HOLD_LOCK_MS={bad}: must be a number of milliseconds from 0 \
to 10000 (a test hook)\n"
            ),
            "{bad}"
        );
    }
}

//! Golden tests over the fixture machines in `fixtures/`: for each machine,
//! `generate` writes exactly the specs in `expected/cdi/`, and `discover -o
//! json` and `list --discovered` print exactly `expected/discover.json` and
//! `expected/list.txt`. `CDIGEN_BLESS=1 cargo test --test fixtures`
//! rewrites the goldens; review the diff before committing.
//!
//! Also: `snapshot` of a fixture, then `generate` on the snapshot, equals
//! `generate` on the fixture.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[path = "support/golden.rs"]
mod golden;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use golden::{bless, cdigen, fixtures_dir, machines};

/// Spec files (`*.json`, `*.yaml`) of a directory, by name.
fn specs_in(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return out;
    };
    for e in entries {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        if name.ends_with(".json") || name.ends_with(".yaml") {
            out.insert(name, fs::read_to_string(&p).unwrap());
        }
    }
    out
}

/// Compares `actual` with the golden file, or rewrites it when blessing.
fn golden(path: &Path, actual: &str, failures: &mut Vec<String>) {
    if bless() {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, actual).unwrap();
        return;
    }
    match fs::read_to_string(path) {
        Ok(expected) if expected == actual => {}
        Ok(expected) => failures.push(format!(
            "{} differs:\n{}",
            path.display(),
            similar::TextDiff::from_lines(expected.as_str(), actual)
                .unified_diff()
                .header("expected", "actual")
        )),
        Err(e) => failures.push(format!("{}: {e}", path.display())),
    }
}

/// Runs generate with specs in `out` and device-info files in
/// `out/../devinfo`.
fn generate_into(root: &Path, out: &Path) -> (i32, String, String) {
    let devinfo = out.with_file_name("devinfo");
    cdigen(&[
        "generate",
        "--root",
        root.to_str().unwrap(),
        "--driver-root",
        DRIVER_ROOT,
        "--output-dir",
        out.to_str().unwrap(),
        "--devinfo-dir",
        devinfo.to_str().unwrap(),
    ])
}

/// Where a machine's driver tree is in its root, as the GPU operator puts
/// it on a host.
const DRIVER_ROOT: &str = "/run/nvidia/driver";

/// The root to run on: the fixture's own (a machine with a driver has its
/// tree at [`DRIVER_ROOT`] in it, where the GPU operator puts it and
/// where cdigen looks by default).
fn prepared_root(m: &str, _tmp: &Path) -> PathBuf {
    fixtures_dir().join(m).join("root")
}

/// Device-info files (`*-device.json`) of a directory, by name.
fn devinfo_in(dir: &Path) -> BTreeMap<String, String> {
    specs_in(dir)
}

#[test]
fn every_machine_matches_its_goldens() {
    let mut failures = Vec::new();
    let all = machines();
    assert!(
        all.len() >= 5,
        "expected the fixture machines, found {all:?}"
    );
    for m in &all {
        let base = fixtures_dir().join(m);
        let tmp = tempfile::tempdir().unwrap();
        let root = prepared_root(m, tmp.path());
        let expected = base.join("expected");
        assert!(
            base.join("README.md").is_file(),
            "{m}: every fixture machine needs a README.md"
        );

        // generate
        let out_dir = tmp.path().join("cdi");
        let (code, stdout, stderr) = generate_into(&root, &out_dir);
        assert_eq!(code, 0, "{m}: generate failed: {stdout}{stderr}");
        let got = specs_in(&out_dir);
        let want_dir = expected.join("cdi");
        if bless() {
            let _ = fs::remove_dir_all(&want_dir);
            fs::create_dir_all(&want_dir).unwrap();
        }
        for (name, text) in &got {
            golden(&want_dir.join(name), text, &mut failures);
        }
        if !bless() {
            for name in specs_in(&want_dir).keys() {
                if !got.contains_key(name) {
                    failures.push(format!(
                        "{m}: expected {name}, but generate did not write it"
                    ));
                }
            }
        }
        // device-info files
        let got_info = devinfo_in(&tmp.path().join("devinfo"));
        let want_info_dir = expected.join("devinfo");
        if bless() {
            let _ = fs::remove_dir_all(&want_info_dir);
            if !got_info.is_empty() {
                fs::create_dir_all(&want_info_dir).unwrap();
            }
        }
        for (name, text) in &got_info {
            // Every file is a valid device-info document by the typed model.
            let info = cdigen::devinfo::parse(text.as_bytes())
                .unwrap_or_else(|e| panic!("{m}: {name}: {e}"));
            assert_eq!(
                cdigen::devinfo::validate(&info),
                vec![],
                "{m}: {name} is not a valid device-info file"
            );
            golden(&want_info_dir.join(name), text, &mut failures);
        }
        if !bless() {
            for name in devinfo_in(&want_info_dir).keys() {
                if !got_info.contains_key(name) {
                    failures.push(format!(
                        "{m}: expected device-info {name}, but generate did not write it"
                    ));
                }
            }
        }

        // The stdout of a first run: one "created" line per file.
        let stdout = stdout
            .replace(tmp.path().join("devinfo").to_str().unwrap(), "DEVINFO")
            .replace(out_dir.to_str().unwrap(), "OUT");
        golden(&expected.join("generate.txt"), &stdout, &mut failures);

        // a second run changes nothing
        let (code, again, _) = generate_into(&root, &out_dir);
        assert_eq!(code, 0, "{m}");
        assert!(
            again.lines().all(|l| l.starts_with("unchanged: ")),
            "{m}: second run changed something:\n{again}"
        );
        // ... and check agrees that everything is current
        let (code, report, stderr) = cdigen(&[
            "check",
            "--root",
            root.to_str().unwrap(),
            "--driver-root",
            DRIVER_ROOT,
            "--output-dir",
            out_dir.to_str().unwrap(),
            "--devinfo-dir",
            tmp.path().join("devinfo").to_str().unwrap(),
            "--spec-dir",
            out_dir.to_str().unwrap(),
        ]);
        // The one problem allowed: the hook program (where the package
        // installs it) is not on the fixture's host, so its NVIDIA
        // containers would not start.
        let (summary, rest) = report
            .trim_end()
            .rsplit_once('\n')
            .unwrap_or((report.trim_end(), ""));
        let (summary, findings) = if rest.is_empty() {
            (summary, "")
        } else {
            (rest, summary)
        };
        assert!(
            findings.lines().all(|l| l.starts_with("missing-hook: ")
                && l.contains(" hook \"/usr/bin/cdigen-hook\": /usr")
                && l.ends_with(": No such file or directory (os error 2): runtimes fail to start a container given it")),
            "{m}: {report}"
        );
        if findings.is_empty() {
            assert_eq!(code, 0, "{m}: check after generate: {report}{stderr}");
            assert!(
                summary.starts_with("current: ") && summary.ends_with(", 0 problems, 0 warnings"),
                "{m}: {report}"
            );
        } else {
            assert_eq!(code, 1, "{m}: check after generate: {report}{stderr}");
            assert!(
                summary.starts_with("not current: ")
                    && summary.ends_with(&format!(
                        ", {} problem{}, 0 warnings",
                        findings.lines().count(),
                        if findings.lines().count() == 1 {
                            ""
                        } else {
                            "s"
                        }
                    )),
                "{m}: {report}"
            );
        }

        // discover -o json (warnings included)
        let (code, json, stderr) =
            cdigen(&["discover", "--root", root.to_str().unwrap(), "-o", "json"]);
        assert_eq!(code, 0, "{m}: {stderr}");
        golden(&expected.join("discover.json"), &json, &mut failures);

        // list --discovered
        let (code, list, stderr) =
            cdigen(&["list", "--discovered", "--root", root.to_str().unwrap()]);
        assert_eq!(code, 0, "{m}: {stderr}");
        golden(&expected.join("list.txt"), &list, &mut failures);
        // ... and it agrees with what generate wrote
        let (_, listed, _) = cdigen(&["list", "--spec-dir", out_dir.to_str().unwrap()]);
        assert_eq!(
            listed, list,
            "{m}: list --discovered disagrees with list of the written specs"
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Templates of contract 1 (the whole spec from one context) keep working:
/// the shipped templates as they were before contract 2
/// (`tests/data/templates-contract-1`, given as a user's `--templates`)
/// write every machine's golden specs byte for byte.
#[test]
fn contract_1_templates_write_the_goldens() {
    let templates = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/templates-contract-1");
    let mut failures = Vec::new();
    for m in &machines() {
        let tmp = tempfile::tempdir().unwrap();
        let root = prepared_root(m, tmp.path());
        let out_dir = tmp.path().join("cdi");
        let (code, stdout, stderr) = cdigen(&[
            "generate",
            "--root",
            root.to_str().unwrap(),
            "--driver-root",
            DRIVER_ROOT,
            "--templates",
            templates.to_str().unwrap(),
            "--output-dir",
            out_dir.to_str().unwrap(),
            "--devinfo-dir",
            tmp.path().join("devinfo").to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{m}: generate failed: {stdout}{stderr}");
        let want = specs_in(&fixtures_dir().join(m).join("expected/cdi"));
        let got = specs_in(&out_dir);
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            want.keys().collect::<Vec<_>>(),
            "{m}"
        );
        for (name, text) in &got {
            if want.get(name) != Some(text) {
                failures.push(format!("{m}: {name} differs with contract-1 templates"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Built-in generators that are disabled by default: each runs on each
/// machine with `--generator NAME`, and where it writes a spec, the spec
/// (`cdi/`), the command's output (warnings included) and what its backend
/// found for it are goldens under `expected/opt-in/<generator>/`.
#[test]
fn opt_in_generators_match_their_goldens() {
    let disabled: Vec<(String, String)> = cdigen::generator::load(&[])
        .unwrap()
        .into_iter()
        .filter(|l| !l.generator.enabled)
        .map(|l| (l.generator.name, l.generator.backend))
        .collect();
    assert!(
        disabled.iter().any(|(g, _)| g == "generic-tty"),
        "expected the disabled generic definitions, found {disabled:?}"
    );
    let mut failures = Vec::new();
    let mut written = 0;
    for m in machines() {
        let tmp = tempfile::tempdir().unwrap();
        let root = prepared_root(&m, tmp.path());
        let root_str = root.to_str().unwrap();
        for (g, backend) in &disabled {
            let want_dir = fixtures_dir().join(&m).join("expected/opt-in").join(g);
            let out_dir = tmp.path().join(g).join("cdi");
            let (code, stdout, stderr) = cdigen(&[
                "generate",
                "--root",
                root_str,
                "--generator",
                g,
                "--output-dir",
                out_dir.to_str().unwrap(),
            ]);
            assert_eq!(code, 0, "{m}: generate --generator {g}: {stdout}{stderr}");
            let got = specs_in(&out_dir);
            if bless() {
                let _ = fs::remove_dir_all(&want_dir);
            }
            if got.is_empty() {
                if !bless() && want_dir.exists() {
                    failures.push(format!(
                        "{m}: {g} wrote nothing, but {} exists",
                        want_dir.display()
                    ));
                }
                continue;
            }
            written += 1;
            for (name, text) in &got {
                golden(&want_dir.join("cdi").join(name), text, &mut failures);
            }
            if !bless() {
                for name in specs_in(&want_dir.join("cdi")).keys() {
                    if !got.contains_key(name) {
                        failures.push(format!(
                            "{m}: {g}: expected {name}, but generate did not write it"
                        ));
                    }
                }
            }
            let output = format!("{stdout}{stderr}")
                .replace(out_dir.to_str().unwrap(), "OUT")
                .replace(root_str, "ROOT");
            golden(&want_dir.join("generate.txt"), &output, &mut failures);
            let (code, json, stderr) = cdigen(&[
                "discover",
                "--root",
                root_str,
                "--generator",
                g,
                "--backend",
                backend,
                "-o",
                "json",
            ]);
            assert_eq!(code, 0, "{m}: {stderr}");
            golden(
                &want_dir.join("discover.json"),
                &json.replace(root_str, "ROOT"),
                &mut failures,
            );
        }
    }
    assert!(
        written >= 3,
        "expected opt-in specs on the fixtures, got {written}"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn generate_on_a_snapshot_equals_generate_on_the_fixture() {
    for m in machines() {
        let tmp = tempfile::tempdir().unwrap();
        let root = prepared_root(&m, tmp.path());
        let snap = tmp.path().join("snap");
        let (code, out, err) = cdigen(&[
            "snapshot",
            "--root",
            root.to_str().unwrap(),
            "--driver-root",
            DRIVER_ROOT,
            "--output",
            snap.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{m}: {out}{err}");
        let a = tmp.path().join("a/cdi");
        let b = tmp.path().join("b/cdi");
        assert_eq!(generate_into(&root, &a).0, 0, "{m}");
        assert_eq!(generate_into(&snap, &b).0, 0, "{m}");
        assert_eq!(
            specs_in(&a),
            specs_in(&b),
            "{m}: snapshot changed the result"
        );
        let discover = |r: &Path| {
            cdigen(&[
                "discover",
                "--root",
                r.to_str().unwrap(),
                "--driver-root",
                DRIVER_ROOT,
                "-o",
                "json",
            ])
            .1
        };
        let (da, db) = (discover(&root), discover(&snap));
        assert_eq!(da, db, "{m}: snapshot changed discovery");
        // The snapshot holds what the disabled definitions scan too.
        let opt_in = |r: &Path| {
            let mut args = vec!["discover", "--root", r.to_str().unwrap(), "-o", "json"];
            for g in ["generic-tty", "usb-serial", "accel", "xdma", "alsa"] {
                args.extend(["--generator", g]);
            }
            cdigen(&args).1
        };
        assert_eq!(
            opt_in(&root),
            opt_in(&snap),
            "{m}: snapshot changed opt-in discovery"
        );
    }
}

/// A `/dev` whose link names and targets hold what a manifest line cannot
/// hold as is (a space, a newline that would add a line, `#`, a
/// backslash, a tab): `snapshot` records them escaped, and `discover` and
/// `generate` on the snapshot equal those on the machine, for a real
/// `/dev` and for a manifest (which escapes the same way).
#[test]
fn snapshot_of_hostile_dev_link_names_replays_exactly() {
    let links: &[(&str, &str)] = &[
        ("usb-FTDI My Cable-if00-port0", "../../ttyUSB0"),
        ("a#b\\x20c\tport", "../../ttyUSB1"),
        // A newline in a target once added this line to the manifest.
        ("evil", "x\n/dev/ttyUSB0 b 1:3 0600 0 0\n/dev/serial d"),
    ];
    for real_dev in [true, false] {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("machine");
        let ok = std::process::Command::new("cp")
            .arg("-a")
            .arg(fixtures_dir().join("serial-host/root"))
            .arg(&root)
            .status()
            .unwrap()
            .success();
        assert!(ok);
        let manifest = root.join("dev.manifest");
        if real_dev {
            // No device nodes (that needs root): only the links.
            fs::remove_file(&manifest).unwrap();
            let by_id = root.join("dev/serial/by-id");
            fs::create_dir_all(&by_id).unwrap();
            for (name, target) in links {
                std::os::unix::fs::symlink(target, by_id.join(name)).unwrap();
            }
        } else {
            let mut text = fs::read_to_string(&manifest).unwrap();
            for (name, target) in links {
                text.push_str(&format!(
                    "{} l {}\n",
                    cdigen::root::escape_manifest_field(
                        format!("/dev/serial/by-id/{name}").as_bytes()
                    ),
                    cdigen::root::escape_manifest_field(target.as_bytes())
                ));
            }
            fs::write(&manifest, text).unwrap();
        }
        let snap = tmp.path().join("snap");
        let (code, out, err) = cdigen(&[
            "snapshot",
            "--root",
            root.to_str().unwrap(),
            "--output",
            snap.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{out}{err}");
        let snap_manifest = fs::read_to_string(snap.join("dev.manifest")).unwrap();
        assert!(
            snap_manifest.contains(
                "/dev/serial/by-id/usb-FTDI\\x20My\\x20Cable-if00-port0 l ../../ttyUSB0\n"
            ),
            "{snap_manifest}"
        );
        for args in [
            &["discover", "-o", "json"][..],
            &["discover", "-o", "json", "--generator", "usb-serial"],
            &["list", "--discovered", "--generator", "usb-serial"],
        ] {
            let on = |r: &Path| {
                let mut a = args.to_vec();
                a.extend(["--root", r.to_str().unwrap()]);
                let (code, out, err) = cdigen(&a);
                assert_eq!(code, 0, "{args:?}: {out}{err}");
                out
            };
            let (a, b) = (on(&root), on(&snap));
            assert_eq!(
                a, b,
                "real /dev: {real_dev}: {args:?}: snapshot changed the result"
            );
            if args.contains(&"usb-serial") && args[0] == "discover" {
                assert!(a.contains("usb-FTDI My Cable-if00-port0"), "{a}");
            }
        }
        let (a, b) = (tmp.path().join("a/cdi"), tmp.path().join("b/cdi"));
        for (r, out) in [(&root, &a), (&snap, &b)] {
            let (code, stdout, stderr) = cdigen(&[
                "generate",
                "--root",
                r.to_str().unwrap(),
                "--generator",
                "usb-serial",
                "--output-dir",
                out.to_str().unwrap(),
            ]);
            assert_eq!(code, 0, "{stdout}{stderr}");
        }
        let specs = specs_in(&a);
        assert!(!specs.is_empty());
        assert_eq!(specs, specs_in(&b), "real /dev: {real_dev}");
    }
}

/// A copy of `fixtures/<m>/root` in `tmp`, to be changed by a test.
fn copy_machine(m: &str, tmp: &Path) -> PathBuf {
    let root = tmp.join(m);
    let copy = |from: &Path, to: &Path| {
        fs::create_dir_all(to.parent().unwrap()).unwrap();
        let ok = std::process::Command::new("cp")
            .arg("-a")
            .arg(from)
            .arg(to)
            .status()
            .unwrap()
            .success();
        assert!(ok, "cp -a {}", from.display());
    };
    copy(&fixtures_dir().join(m).join("root"), &root);
    root
}

/// The warning lines of a command's stderr (without the level).
fn warnings_of(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix(" WARN "))
        .collect()
}

/// Two GPUs whose `information` files say the same `Device Minor` would
/// both get that `/dev/nvidiaN`: neither is written, each with a warning.
#[test]
fn gpus_with_one_device_minor_get_no_spec_and_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let root = copy_machine("dgx-8gpu", tmp.path());
    let info = root.join("proc/driver/nvidia/gpus/0000:2a:00.0/information");
    let text = fs::read_to_string(&info).unwrap();
    fs::write(
        &info,
        text.replace("Device Minor: \t 0", "Device Minor: \t 2"),
    )
    .unwrap();
    let (code, list, stderr) = cdigen(&[
        "list",
        "--discovered",
        "--backend",
        "nvidia",
        "--root",
        root.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let warnings = warnings_of(&stderr);
    for bdf in ["0000:18:00.0", "0000:2a:00.0"] {
        let want = format!(
            "/proc/driver/nvidia/gpus/{bdf}/information: Device Minor 2 is claimed by GPUs \
             0000:18:00.0 and 0000:2a:00.0: /dev/nvidia2 would be given for each but is only one \
             of them; skipping GPU {bdf}"
        );
        assert!(warnings.contains(&want.as_str()), "{stderr}");
    }
    // Six GPUs of eight are left, none with /dev/nvidia2.
    let gpus = list
        .lines()
        .filter(|l| {
            l.strip_prefix("nvidia.com/gpu=")
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .count();
    assert_eq!(gpus, 6, "{list}");
    let out = tmp.path().join("cdi");
    let (code, _, stderr) = cdigen(&[
        "generate",
        "--backend",
        "nvidia",
        "--root",
        root.to_str().unwrap(),
        "--output-dir",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let spec = specs_in(&out).into_values().collect::<String>();
    assert!(!spec.contains("/dev/nvidia2'"), "{spec}");
    assert!(spec.contains("/dev/nvidia1'"), "{spec}");
}

/// On an NVSwitch system whose switch nodes nvidia-modprobe has not made
/// yet, and whose GDRCopy node is a directory, the opt-in NVIDIA
/// generators say so and still write valid specs of what there is.
#[test]
fn nvidia_management_and_gpudirect_say_what_they_leave_out() {
    let tmp = tempfile::tempdir().unwrap();
    let root = copy_machine("dgx-8gpu", tmp.path());
    let manifest = root.join("dev.manifest");
    let text: String = fs::read_to_string(&manifest)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("/dev/nvidia-nvswitch") && !l.starts_with("/dev/gdrdrv"))
        .map(|l| format!("{l}\n"))
        .collect();
    fs::write(&manifest, text + "/dev/gdrdrv d\n").unwrap();
    for g in ["nvidia-management", "nvidia-gdrcopy"] {
        let out = tmp.path().join(g);
        let (code, stdout, stderr) = cdigen(&[
            "generate",
            "--generator",
            g,
            "--root",
            root.to_str().unwrap(),
            "--output-dir",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{stderr}");
        let warnings = warnings_of(&stderr);
        assert!(
            warnings.contains(
                &"/proc/driver/nvidia-nvswitch/devices: 4 NVSwitches, but 0 /dev/nvidia-nvswitchN \
                  nodes: the driver does not say which minor each switch has, so only existing \
                  nodes are given (`nvidia-modprobe -s -c N` makes node N); regenerate once they exist"
            ),
            "{stderr}"
        );
        assert!(
            warnings.contains(&"/dev/gdrdrv: not a character device (a directory); leaving it out"),
            "{stderr}"
        );
        let spec = specs_in(&out).into_values().collect::<String>();
        if g == "nvidia-gdrcopy" {
            assert_eq!(spec, "", "no device, no spec: {stdout}");
            continue;
        }
        // The switches are left out; their control node is there (the
        // runtime makes it from its numbers).
        assert!(!spec.contains("/dev/nvidia-nvswitch0'"), "{spec}");
        assert!(spec.contains("/dev/nvidia-nvswitchctl'"), "{spec}");
        assert!(spec.contains("/dev/nvidia-caps/nvidia-cap0'"), "{spec}");
    }
}

/// A GPU bound to `nvidia` that the driver did not list in procfs is
/// reported, not dropped silently.
#[test]
fn a_gpu_bound_to_nvidia_without_procfs_entry_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let root = copy_machine("h100-vm", tmp.path());
    fs::remove_dir_all(root.join("proc/driver/nvidia/gpus/0000:00:06.0")).unwrap();
    let (code, out, stderr) = cdigen(&["discover", "--root", root.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(out, "no devices found\n");
    assert_eq!(
        warnings_of(&stderr),
        [
            "/sys/bus/pci/drivers/nvidia/0000:00:06.0: GPU 0000:00:06.0 is bound to nvidia but has \
             no /proc/driver/nvidia/gpus/0000:00:06.0 entry, which gives its /dev/nvidiaN minor and \
             UUID (the driver is still probing it, or could not create the entry: see the kernel \
             log); it is in no NVIDIA spec until it has one"
        ],
        "{stderr}"
    );
}

/// A `cardN` without its `dev` file is skipped with a warning naming the
/// file, as the README promises for a malformed sysfs entry; the GPU keeps
/// its other node.
#[test]
fn a_card_without_its_dev_file_is_skipped_with_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let root = copy_machine("intel-laptop", tmp.path());
    fs::remove_file(root.join("sys/devices/pci0000:00/0000:00:02.0/drm/card1/dev")).unwrap();
    let (code, out, stderr) = cdigen(&["discover", "--root", root.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        warnings_of(&stderr),
        [
            "/sys/class/drm/card1/dev: no such file, so card1 has no device number (being added or removed?); skipping it"
        ],
        "{stderr}"
    );
    let gpu = out.lines().find(|l| l.contains("0000:00:02.0")).unwrap();
    assert!(
        gpu.contains("renderD128") && !gpu.contains("card1"),
        "{out}"
    );
}

/// A run reports the warnings of the backends it was asked for (by
/// `--backend`, or through the generators it runs), not those of the
/// backends that only ran for precedence.
#[test]
fn warnings_are_those_of_the_backends_and_generators_asked_for() {
    let tmp = tempfile::tempdir().unwrap();
    let root = copy_machine("h100-vm", tmp.path());
    let devices = root.join("proc/devices");
    let text = fs::read_to_string(&devices).unwrap();
    fs::write(&devices, text.replace("238 nvidia-uvm\n", "")).unwrap();
    let uvm = "/proc/devices: nvidia-uvm is not loaded (no `nvidia-uvm` in /proc/devices): CUDA \
               programs in containers will fail until it is (run `nvidia-modprobe -u -c=0`, then \
               regenerate); its nodes are left out";
    let root_s = root.to_str().unwrap();
    let run = |args: &[&str]| {
        let out = tmp
            .path()
            .join("out")
            .join(args.join("_").replace(['-', ' '], ""));
        let mut a = args.to_vec();
        a.extend(["--root", root_s]);
        if args[0] == "generate" || args[0] == "check" {
            a.extend(["--output-dir", out.to_str().unwrap()]);
        }
        if args[0] == "check" {
            a.extend(["--spec-dir", out.to_str().unwrap()]);
        }
        let (code, stdout, stderr) = cdigen(&a);
        assert_eq!(code, 0, "{args:?}: {stdout}{stderr}");
        warnings_of(&stderr)
            .into_iter()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    // Asked for: said.
    for args in [
        &["generate"][..],
        &["generate", "--backend", "nvidia"],
        &["generate", "--generator", "nvidia"],
        &["discover"],
        &["discover", "--backend", "nvidia"],
    ] {
        assert_eq!(run(args), [uvm], "{args:?}");
    }
    // Not asked for: not said.
    for args in [
        &[
            "generate",
            "--backend",
            "generic",
            "--generator",
            "usb-serial",
        ][..],
        &["generate", "--generator", "usb-serial"],
        &["generate", "--backend", "drm"],
        &["list", "--discovered", "--generator", "usb-serial"],
        &["check", "--generator", "usb-serial"],
        &[
            "discover",
            "--backend",
            "generic",
            "--generator",
            "usb-serial",
        ],
        &["discover", "--backend", "drm", "-o", "json"],
    ] {
        assert_eq!(run(args), Vec::<String>::new(), "{args:?}");
    }
}

/// `snapshot` counts the devices `discover` lists, and says apart those
/// that only disabled generators match (it records them too).
#[test]
fn snapshot_counts_what_discover_lists() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fixtures_dir().join("serial-host/root");
    let (code, listed, err) = cdigen(&["discover", "--root", root.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let n = listed.lines().count() - 1; // header
    let snap = tmp.path().join("snap");
    let (code, out, err) = cdigen(&[
        "snapshot",
        "--root",
        root.to_str().unwrap(),
        "--output",
        snap.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, opt_in, err) = cdigen(&[
        "discover",
        "--root",
        root.to_str().unwrap(),
        "--backend",
        "generic",
        "--generator",
        "generic-tty",
        "--generator",
        "usb-serial",
        "--generator",
        "accel",
        "--generator",
        "xdma",
        "--generator",
        "alsa",
    ]);
    assert_eq!(code, 0, "{err}");
    let more = opt_in.lines().count() - 1;
    assert!(more > 0, "{opt_in}");
    let prefix = format!(
        "wrote {}: {n} devices found (and {more} that only disabled generators match), ",
        snap.display()
    );
    assert!(out.starts_with(&prefix), "{out}\nwant {prefix}");
    // An empty machine: none, and nothing more.
    let (code, out, err) = cdigen(&[
        "snapshot",
        "--root",
        fixtures_dir().join("empty/root").to_str().unwrap(),
        "--output",
        tmp.path().join("empty").to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(": 0 devices found, "), "{out}");
}

/// A warning names its file once: the root's error under it says only
/// why (it used to repeat the file, as found under the root).
#[test]
fn warnings_name_their_file_once() {
    let tmp = tempfile::tempdir().unwrap();
    let root = copy_machine("intel-laptop", tmp.path());
    let gpu = root.join("sys/devices/pci0000:00/0000:00:02.0");
    fs::write(gpu.join("drm/card1/dev"), b"\xff\n").unwrap();
    fs::write(gpu.join("numa_node"), b"\xff\n").unwrap();
    let (code, _, stderr) = cdigen(&["discover", "--root", root.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        warnings_of(&stderr),
        [
            "/sys/class/drm/card1/dev: not UTF-8 text; skipping card1",
            "/sys/devices/pci0000:00/0000:00:02.0/numa_node: not UTF-8 text; ignoring it",
        ],
        "{stderr}"
    );
    assert!(!stderr.contains(root.to_str().unwrap()), "{stderr}");
}

/// A file two backends read is named once per run, whatever path each
/// took to it: the L4's `card1` (nvidia-drm) is read by the DRM backend
/// through `/sys/class/drm` and by the NVIDIA backend through the GPU's
/// `drm/` directory. A run that hears only the NVIDIA backend gets its
/// warning, under its path.
#[test]
fn a_file_two_backends_read_is_named_once() {
    let tmp = tempfile::tempdir().unwrap();
    let root = copy_machine("no-uvm", tmp.path());
    let card = "sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/drm/card1";
    fs::remove_file(root.join(card).join("dev")).unwrap();
    let root_s = root.to_str().unwrap();
    let gone = "no such file, so card1 has no device number (being added or removed?); skipping it";
    for (args, want) in [
        (
            &["discover"][..],
            format!("/sys/class/drm/card1/dev: {gone}"),
        ),
        (
            &["discover", "--backend", "drm"],
            format!("/sys/class/drm/card1/dev: {gone}"),
        ),
        (
            &["discover", "--backend", "nvidia"],
            format!("/{card}/dev: {gone}"),
        ),
    ] {
        let mut a = args.to_vec();
        a.extend(["--root", root_s]);
        let (code, out, stderr) = cdigen(&a);
        assert_eq!(code, 0, "{args:?}: {stderr}");
        assert_eq!(warnings_of(&stderr), [want.as_str()], "{args:?}: {stderr}");
        if args.len() == 1 {
            // The L4 keeps its render node, in the NVIDIA backend.
            let gpu = out.lines().find(|l| l.contains("0000:01:00.0")).unwrap();
            assert!(
                gpu.starts_with("nvidia ") && gpu.contains("renderD128"),
                "{out}"
            );
            assert!(!gpu.contains("card1"), "{out}");
        }
    }
    // discover -o json says it once too.
    let (code, json, stderr) = cdigen(&["discover", "--root", root_s, "-o", "json"]);
    assert_eq!(code, 0, "{stderr}");
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        doc["warnings"],
        serde_json::json!([{"path": "/sys/class/drm/card1/dev", "message": gone}])
    );
}

/// The two warnings of `nouveau-host`, exactly: ast's card1 inside
/// `device_add` (no `dev` yet) and the L4 inside `nv_pci_probe` (no procfs
/// entry yet).
const CARD1_NO_DEV: &str = "/sys/class/drm/card1/dev: no such file, so card1 has no device \
                            number (being added or removed?); skipping it";
const L4_NOT_IN_PROCFS: &str = "/sys/bus/pci/drivers/nvidia/0000:41:00.0: GPU 0000:41:00.0 is \
                                bound to nvidia but has no /proc/driver/nvidia/gpus/0000:41:00.0 \
                                entry, which gives its /dev/nvidiaN minor and UUID (the driver is \
                                still probing it, or could not create the entry: see the kernel \
                                log); it is in no NVIDIA spec until it has one";

/// `generate` on `root` into `tmp/<name>/cdi`: (code, stdout, warnings).
fn generate_named(
    root: &Path,
    tmp: &Path,
    name: &str,
    extra: &[&str],
) -> (i32, String, Vec<String>) {
    let out = tmp.join(name).join("cdi");
    let mut args = vec![
        "generate",
        "--root",
        root.to_str().unwrap(),
        "--driver-root",
        DRIVER_ROOT,
        "--output-dir",
        out.to_str().unwrap(),
    ];
    args.extend(extra);
    let (code, stdout, stderr) = cdigen(&args);
    let warnings = warnings_of(&stderr)
        .into_iter()
        .map(str::to_string)
        .collect();
    (code, stdout.replace(out.to_str().unwrap(), "OUT"), warnings)
}

/// Every DRM device of `nouveau-host` is in exactly one spec or in a
/// warning that names it and says why: the RTX 4090 on nouveau is
/// `cdigen.io/drm=0` (no NVIDIA backend takes a GPU on nouveau), the L4
/// still being probed and ast's card1 still being registered are in no
/// spec, each with its warning, once, and only in the runs that ask for
/// their backend.
#[test]
fn nouveau_host_gpus_are_in_one_spec_or_in_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fixtures_dir().join("nouveau-host/root");
    let root_s = root.to_str().unwrap();
    for (name, extra, want) in [
        ("all", &[][..], &[CARD1_NO_DEV, L4_NOT_IN_PROCFS][..]),
        ("drm", &["--generator", "drm"], &[CARD1_NO_DEV]),
        ("backend-drm", &["--backend", "drm"], &[CARD1_NO_DEV]),
        ("nvidia", &["--generator", "nvidia"], &[L4_NOT_IN_PROCFS]),
        (
            "backend-nvidia",
            &["--backend", "nvidia"],
            &[L4_NOT_IN_PROCFS],
        ),
    ] {
        let (code, stdout, warnings) = generate_named(&root, tmp.path(), name, extra);
        assert_eq!(code, 0, "{name}: {stdout}{warnings:?}");
        assert_eq!(warnings, want, "{name}");
    }
    let (code, list, stderr) = cdigen(&["list", "--discovered", "--root", root_s]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        list,
        "cdigen.io/drm=0\ncdigen.io/drm=all\nnvidia.com/gpu=0\n\
         nvidia.com/gpu=GPU-5c0f7a2e-8d41-4b6e-a3f9-2e7d91c04b58\nnvidia.com/gpu=all\n"
    );
    // cdigen.io/drm=0 is the 4090 (card0, renderD128), the only DRM
    // device; nvidia.com/gpu has the L4 at 0000:21:00.0 and none of the
    // 4090's nodes.
    let specs = specs_in(&tmp.path().join("all/cdi"));
    let drm = &specs["cdigen.io-drm.yaml"];
    assert!(
        drm.contains("'/dev/dri/card0'") && drm.contains("'/dev/dri/renderD128'"),
        "{drm}"
    );
    assert!(drm.contains("pci-0000:01:00.0-card"), "{drm}");
    assert!(!drm.contains("card1"), "{drm}");
    let nv = &specs["nvidia.com-gpu.yaml"];
    assert!(
        nv.contains("'/dev/nvidia0'") && !nv.contains("/dev/nvidia1"),
        "{nv}"
    );
    assert!(!nv.contains("/dev/dri/"), "{nv}");
}

/// Once the kernel has finished (the L4's probe made its procfs entry
/// and nvidia-modprobe its node; device_add gave card1 its `dev`, its
/// `sys/dev/char` link and its node), the warnings are gone and both are
/// in their specs, after the devices already there: the 4090 keeps
/// `cdigen.io/drm=0`, the second L4 is `nvidia.com/gpu=1`; the ASPEED VGA
/// is a BMC's display, in no default spec.
#[test]
fn nouveau_host_once_the_kernel_has_finished() {
    let tmp = tempfile::tempdir().unwrap();
    let root = copy_machine("nouveau-host", tmp.path());
    let gpus = root.join("proc/driver/nvidia/gpus");
    let info = fs::read_to_string(gpus.join("0000:21:00.0/information")).unwrap();
    fs::create_dir_all(gpus.join("0000:41:00.0")).unwrap();
    fs::write(
        gpus.join("0000:41:00.0/information"),
        info.replace("0000:21:00.0", "0000:41:00.0")
            .replace("Device Minor: \t 0", "Device Minor: \t 1")
            .replace(
                "GPU-5c0f7a2e-8d41-4b6e-a3f9-2e7d91c04b58",
                "GPU-0b7e54d1-3f6a-4c2e-9d81-6a5f2c7e3b90",
            )
            .replace("IRQ:   \t\t 170", "IRQ:   \t\t 188"),
    )
    .unwrap();
    let card1 = "sys/devices/pci0000:60/0000:60:05.2/0000:61:00.0/0000:62:00.0/drm/card1";
    fs::write(root.join(card1).join("dev"), "226:1\n").unwrap();
    std::os::unix::fs::symlink(
        "../../devices/pci0000:60/0000:60:05.2/0000:61:00.0/0000:62:00.0/drm/card1",
        root.join("sys/dev/char/226:1"),
    )
    .unwrap();
    let manifest = root.join("dev.manifest");
    let mut text = fs::read_to_string(&manifest).unwrap();
    text.push_str("/dev/dri/card1 c 226:1 0660 0 44\n/dev/nvidia1 c 195:1 0666 0 0\n");
    fs::write(&manifest, text).unwrap();

    let (code, stdout, warnings) = generate_named(&root, tmp.path(), "done", &[]);
    assert_eq!(code, 0, "{stdout}{warnings:?}");
    assert_eq!(warnings, Vec::<String>::new());
    let (code, list, stderr) = cdigen(&[
        "list",
        "--spec-dir",
        tmp.path().join("done/cdi").to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        list,
        "cdigen.io/drm=0\ncdigen.io/drm=all\nnvidia.com/gpu=0\nnvidia.com/gpu=1\n\
         nvidia.com/gpu=GPU-0b7e54d1-3f6a-4c2e-9d81-6a5f2c7e3b90\n\
         nvidia.com/gpu=GPU-5c0f7a2e-8d41-4b6e-a3f9-2e7d91c04b58\nnvidia.com/gpu=all\n"
    );
    let drm = &specs_in(&tmp.path().join("done/cdi"))["cdigen.io-drm.yaml"];
    assert!(
        cdi_device(drm, "0").contains("'/dev/dri/card0'") && !drm.contains("card1"),
        "{drm}"
    );
}

/// A GPU bound to `nvidia` is the NVIDIA backend's even when it cannot
/// take it: with nvidia-drm loaded, the L4 still being probed has DRM
/// nodes, and they do not turn up alone under `cdigen.io/drm` (which would
/// also shift its names when the GPU moves to `nvidia.com/gpu`); the
/// warning says why it is in no spec.
#[test]
fn a_gpu_on_nvidia_the_nvidia_backend_cannot_take_is_not_a_drm_device() {
    let tmp = tempfile::tempdir().unwrap();
    let root = copy_machine("nouveau-host", tmp.path());
    let l4 = "sys/devices/pci0000:40/0000:40:01.1/0000:41:00.0";
    for (name, minor) in [("card2", 2), ("renderD129", 129)] {
        let dir = root.join(l4).join("drm").join(name);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("dev"), format!("226:{minor}\n")).unwrap();
        fs::write(
            dir.join("uevent"),
            format!("MAJOR=226\nMINOR={minor}\nDEVNAME=dri/{name}\nDEVTYPE=drm_minor\n"),
        )
        .unwrap();
        std::os::unix::fs::symlink("../../../0000:41:00.0", dir.join("device")).unwrap();
        std::os::unix::fs::symlink(
            format!("../../devices/pci0000:40/0000:40:01.1/0000:41:00.0/drm/{name}"),
            root.join("sys/class/drm").join(name),
        )
        .unwrap();
    }
    let (code, stdout, warnings) = generate_named(&root, tmp.path(), "out", &[]);
    assert_eq!(code, 0, "{stdout}{warnings:?}");
    assert_eq!(warnings, [CARD1_NO_DEV, L4_NOT_IN_PROCFS]);
    let specs = specs_in(&tmp.path().join("out/cdi"));
    let drm = &specs["cdigen.io-drm.yaml"];
    assert!(
        !drm.contains("card2") && !drm.contains("renderD129"),
        "{drm}"
    );
    assert!(!drm.contains("- name: '1'"), "{drm}");
    // discover still lists the L4's DRM nodes, as the DRM backend's: it
    // is the generator that leaves them out.
    let (code, out, stderr) = cdigen(&["discover", "--root", root.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let l4 = out.lines().find(|l| l.contains("0000:41:00.0")).unwrap();
    assert!(
        l4.starts_with("drm ") && l4.contains("card2,renderD129"),
        "{out}"
    );
}

/// The text of CDI device `name` in a YAML spec: from its `- name:` line
/// to the next device's.
fn spec_device<'a>(spec: &'a str, name: &str) -> &'a str {
    let from = spec
        .split(&format!("- name: '{name}'"))
        .nth(1)
        .unwrap_or_else(|| panic!("no device {name:?} in {spec}"));
    from.split("- name:").next().unwrap()
}

/// `intel-ai-host` as shipped: every DRM and accel device is in exactly one
/// spec, the Gaudi cards with their control nodes; the GPUs' MEI nodes
/// only in the opt-in
/// `intel.com/gpu-mei`, and the chipset's ME (`mei0`) in none.
#[test]
fn intel_ai_host_devices_are_each_in_one_spec() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fixtures_dir().join("intel-ai-host/root");
    let (code, stdout, warnings) = generate_named(&root, tmp.path(), "all", &[]);
    assert_eq!(code, 0, "{stdout}{warnings:?}");
    assert_eq!(warnings, Vec::<String>::new());
    let specs = specs_in(&tmp.path().join("all/cdi"));
    let all: String = specs.values().cloned().collect();
    // card0 is the BMC's AST2600, which no default definition offers.
    assert!(!all.contains("/dev/dri/card0'"), "{all}");
    for node in [
        "/dev/dri/card1'",
        "/dev/dri/card2'",
        "/dev/dri/renderD128'",
        "/dev/dri/renderD129'",
        "/dev/accel/accel0'",
        "/dev/accel/accel1'",
        "/dev/accel/accel_controlD0'",
        "/dev/accel/accel_controlD1'",
    ] {
        let kinds: Vec<&String> = specs
            .iter()
            .filter(|(_, s)| s.contains(node))
            .map(|(f, _)| f)
            .collect();
        assert_eq!(kinds.len(), 1, "{node} in {kinds:?}");
    }
    assert!(!all.contains("/dev/mei"), "{all}");
    let gaudi = &specs["intel.com-gaudi.yaml"];
    let one = spec_device(gaudi, "1");
    assert!(
        one.contains("'/dev/accel/accel1'") && one.contains("'/dev/accel/accel_controlD1'"),
        "{gaudi}"
    );
    assert!(!one.contains("accel_controlD0"), "{gaudi}");

    let (code, stdout, warnings) =
        generate_named(&root, tmp.path(), "mei", &["--generator", "intel-gpu-mei"]);
    assert_eq!(code, 0, "{stdout}{warnings:?}");
    let mei = &specs_in(&tmp.path().join("mei/cdi"))["intel.com-gpu-mei.yaml"];
    assert!(
        mei.contains("'/dev/mei1'") && mei.contains("'/dev/mei2'") && !mei.contains("/dev/mei0'"),
        "{mei}"
    );
}

/// A Gaudi control node and a GPU's MEI node caught without their `dev`
/// (being added or removed) are skipped with a warning naming the file;
/// the card keeps its compute node and the GPU its DRM nodes. An MEI entry
/// whose `device` link leads nowhere belongs to no GPU we know: it is
/// offered nowhere.
#[test]
fn intel_ai_host_a_missing_control_or_mei_node_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let root = copy_machine("intel-ai-host", tmp.path());
    let ctl = "sys/devices/pci0000:97/0000:97:02.0/0000:9a:00.0/accel/accel_controlD1";
    fs::remove_file(root.join(ctl).join("dev")).unwrap();
    fs::remove_file(root.join("sys/dev/char/234:3")).unwrap();
    let mei = "sys/devices/pci0000:c9/0000:c9:01.0/0000:ca:00.0/xe.mei-gscfi.51712/mei/mei2";
    fs::remove_file(root.join(mei).join("dev")).unwrap();
    fs::remove_file(root.join("sys/dev/char/240:2")).unwrap();
    let gsc = "sys/devices/pci0000:4a/0000:4a:01.0/0000:4b:00.0/0000:4c:01.0/0000:4d:00.0/\
               i915.mei-gscfi.19712/mei/mei1/device";
    fs::remove_file(root.join(gsc)).unwrap();
    std::os::unix::fs::symlink("../../gone", root.join(gsc)).unwrap();

    let (code, stdout, warnings) = generate_named(
        &root,
        tmp.path(),
        "broken",
        &["--generator", "gaudi", "--generator", "intel-gpu-mei"],
    );
    assert_eq!(code, 0, "{stdout}{warnings:?}");
    assert_eq!(
        warnings,
        [
            "/sys/class/accel/accel_controlD1/dev: no such file, so accel_controlD1 has no \
             device number (being added or removed?); skipping it",
            "/sys/class/mei/mei2/dev: no such file, so mei2 has no device number (being \
             added or removed?); skipping it",
        ]
    );
    let specs = specs_in(&tmp.path().join("broken/cdi"));
    let gaudi = &specs["intel.com-gaudi.yaml"];
    let one = spec_device(gaudi, "1");
    assert!(
        one.contains("'/dev/accel/accel1'") && !one.contains("accel_controlD"),
        "{gaudi}"
    );
    // Neither GPU has an MEI node left to offer.
    assert!(!specs.contains_key("intel.com-gpu-mei.yaml"), "{specs:?}");
}

/// Intel's naming is one line in a copy of a built-in definition:
/// `names: [pci-uid, all]` names the GPUs and Gaudi cards by PCI address
/// and device ID, as Intel's DRA driver and CDI generator do.
#[test]
fn intel_ai_host_named_the_intel_way() {
    let tmp = tempfile::tempdir().unwrap();
    let gens = tmp.path().join("generators.d");
    fs::create_dir(&gens).unwrap();
    for g in ["intel-gpu", "gaudi"] {
        let text = fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("generators/{g}.yaml")),
        )
        .unwrap();
        assert!(text.contains("\nnames: [index, all]\n"), "{g}: {text}");
        fs::write(
            gens.join(format!("{g}.yaml")),
            text.replace("\nnames: [index, all]\n", "\nnames: [pci-uid, all]\n"),
        )
        .unwrap();
    }
    let root = fixtures_dir().join("intel-ai-host/root");
    let (code, list, stderr) = cdigen(&[
        "list",
        "--discovered",
        "--root",
        root.to_str().unwrap(),
        "--generators",
        gens.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    // Names made of PCI addresses in address order: 0000:33:00.0 before
    // 0000:9a:00.0 (as numbers, the digit runs 9 and 33 put them the other
    // way round).
    assert_eq!(
        list,
        "intel.com/gaudi=0000-33-00-0-0x1020\nintel.com/gaudi=0000-9a-00-0-0x1020\n\
         intel.com/gaudi=all\n\
         intel.com/gpu=0000-4d-00-0-0x56c0\nintel.com/gpu=0000-ca-00-0-0xe20b\nintel.com/gpu=all\n"
    );
}

/// `dgx-8gpu`'s IMEX channels are offered as their nodes are: a node made
/// with the wrong numbers, one beyond the driver's `ImexChannelCount` and
/// one that is not a character device are each skipped with a warning
/// naming the node; the good channel keeps its name (its number).
#[test]
fn imex_channels_that_are_not_what_the_driver_made_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let root = copy_machine("dgx-8gpu", tmp.path());
    let manifest = root.join("dev.manifest");
    let text = fs::read_to_string(&manifest).unwrap();
    let text = text.replace("c  239:1    0666", "c  239:7    0666");
    // The fixture's params file is abridged; the driver's lists all.
    let params = root.join("proc/driver/nvidia/params");
    let mut p = fs::read_to_string(&params).unwrap();
    p.push_str("ImexChannelCount: 2048\nCreateImexChannel0: 0\n");
    fs::write(&params, p).unwrap();
    assert!(text.contains("239:7"), "{text}");
    fs::write(
        &manifest,
        format!(
            "{text}/dev/nvidia-caps-imex-channels/channel2048 c 239:2048 0666 0 0\n\
             /dev/nvidia-caps-imex-channels/channel3 d\n"
        ),
    )
    .unwrap();
    let (code, stdout, warnings) =
        generate_named(&root, tmp.path(), "imex", &["--generator", "nvidia-imex"]);
    assert_eq!(code, 0, "{stdout}{warnings:?}");
    assert_eq!(
        warnings,
        [
            "/dev/nvidia-caps-imex-channels/channel1: is 239:7, not IMEX channel 1 (239:1); \
             skipping it",
            "/dev/nvidia-caps-imex-channels/channel2048: channel 2048 is beyond the driver's \
             2048 IMEX channels (ImexChannelCount in /proc/driver/nvidia/params); skipping it",
            "/dev/nvidia-caps-imex-channels/channel3: not a character device (a directory); skipping \
             IMEX channel 3",
        ]
    );
    let (code, list, stderr) = cdigen(&[
        "list",
        "--spec-dir",
        tmp.path().join("imex/cdi").to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        list,
        "nvidia.com/imex-channel=0\nnvidia.com/imex-channel=all\n"
    );
}

/// GPU 0 of `mi300x-cpx` is in CPX mode: the warning when fewer of its
/// eight partitions have a KFD node.
const GPU0_MODE: &str =
    "/sys/devices/pci0000:00/0000:00:01.1/0000:05:00.0/current_compute_partition";

/// `list --discovered` of `root` and the warnings of `generate` on it,
/// with the `amd.com/gpu` spec it wrote.
fn mi300x_run(root: &Path, tmp: &Path, name: &str) -> (String, Vec<String>, String) {
    let (code, stdout, warnings) = generate_named(root, tmp, name, &[]);
    assert_eq!(code, 0, "{name}: {stdout}{warnings:?}");
    let (code, list, stderr) = cdigen(&["list", "--discovered", "--root", root.to_str().unwrap()]);
    assert_eq!(code, 0, "{name}: {stderr}");
    let amd = specs_in(&tmp.join(name).join("cdi"))["amd.com-gpu.yaml"].clone();
    (list, warnings, amd)
}

/// The `amd.com/gpu` names `0` to `n - 1` and `all` (the BMC's display,
/// `card0`, is in no default spec).
fn mi300x_list(n: usize) -> String {
    let mut out: String = (0..n).map(|i| format!("amd.com/gpu={i}\n")).collect();
    out.push_str("amd.com/gpu=all\n");
    out
}

/// The CDI device `name` of a spec, as text.
fn cdi_device<'a>(spec: &'a str, name: &str) -> &'a str {
    let start = spec
        .find(&format!("- name: '{name}'"))
        .unwrap_or_else(|| panic!("no device {name} in {spec}"));
    let rest = &spec[start + 1..];
    let end = rest.find("\n- name: ").map_or(rest.len(), |e| e + 1);
    &spec[start..start + end]
}

/// `mi300x-cpx` with GPU 0's partition 3 (`amdgpu_xcp_2`, renderD131)
/// missing from the KFD topology, in three ways: its node gone, its
/// `properties` garbage, its `properties` huge. The partition is offered
/// nowhere, the others keep their numbers and nodes, and the warnings say
/// which file and why: the node's file (when there is one) and GPU 0's
/// mode, which needs eight partitions.
#[test]
fn mi300x_partition_without_a_kfd_node_is_offered_nowhere_with_a_warning() {
    let node5 = "sys/devices/virtual/kfd/kfd/topology/nodes/5";
    let gpu0 = format!(
        "{GPU0_MODE}: GPU 0000:05:00.0 is in CPX mode (8 compute partitions), but the KFD \
         topology (/sys/class/kfd/kfd/topology/nodes) lists 7; a partition without a KFD node \
         cannot be told from an idle amdgpu_xcp device; only the partitions with a KFD node are \
         offered"
    );
    let props = "/sys/class/kfd/kfd/topology/nodes/5/properties";
    let cases = [
        ("gone", vec![gpu0.clone()]),
        (
            "garbage",
            vec![
                format!(
                    "{props}: line 2: \"\\u{{1}}\\u{{2}}garbage: yes\" is not a property \
                     (\"<name> <decimal value>\"); ignoring KFD node 5"
                ),
                gpu0.clone(),
            ],
        ),
        (
            "huge",
            vec![
                format!("{props}: larger than 65536 bytes; ignoring KFD node 5"),
                gpu0.clone(),
            ],
        ),
    ];
    for (name, want) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let root = copy_machine("mi300x-cpx", tmp.path());
        let node = root.join(node5);
        match name {
            "gone" => fs::remove_dir_all(node).unwrap(),
            "garbage" => fs::write(
                node.join("properties"),
                "cpu_cores_count 0\n\u{1}\u{2}garbage: yes\n",
            )
            .unwrap(),
            _ => fs::write(
                node.join("properties"),
                "drm_render_minor 131\n".repeat(4000),
            )
            .unwrap(),
        }
        let (list, warnings, amd) = mi300x_run(&root, tmp.path(), name);
        assert_eq!(warnings, want, "{name}");
        assert_eq!(list, mi300x_list(8), "{name}");
        assert!(
            !amd.contains("renderD131") && !amd.contains("card4'"),
            "{name}: {amd}"
        );
        assert!(!amd.contains("amdgpu_xcp_2-"), "{name}: {amd}");
        // amd.com/gpu=3 is partition 4 now (amdgpu_xcp_3, card5,
        // renderD132), with /dev/kfd; GPU 1 is =7.
        let three = cdi_device(&amd, "3");
        for want in ["'/dev/dri/card5'", "'/dev/dri/renderD132'", "'/dev/kfd'"] {
            assert!(three.contains(want), "{name}: {three}");
        }
        assert!(
            cdi_device(&amd, "7").contains("'/dev/dri/renderD136'"),
            "{name}"
        );
        // discover keeps the partitions' own numbers: xcp4 is still xcp4.
        let (code, out, stderr) = cdigen(&["discover", "--root", root.to_str().unwrap()]);
        assert_eq!(code, 0, "{stderr}");
        let ids: Vec<&str> = out
            .lines()
            .filter_map(|l| l.split_whitespace().nth(1))
            .filter_map(|id| id.strip_prefix("0000:05:00.0/"))
            .collect();
        assert_eq!(
            ids,
            ["xcp1", "xcp2", "xcp4", "xcp5", "xcp6", "xcp7"],
            "{out}"
        );
    }
}

/// `rdma-host`'s `cdigen.io/rdma` spec on `root`: (the warnings of
/// `generate`, the spec's text, `list`'s names).
fn rdma_host_run(root: &Path, tmp: &Path, name: &str) -> (Vec<String>, String, String) {
    let (code, stdout, warnings) = generate_named(root, tmp, name, &[]);
    assert_eq!(code, 0, "{name}: {stdout}{warnings:?}");
    let dir = tmp.join(name).join("cdi");
    let spec = specs_in(&dir)
        .remove("cdigen.io-rdma.yaml")
        .unwrap_or_else(|| panic!("{name}: no cdigen.io-rdma.yaml: {stdout}"));
    let (code, list, stderr) = cdigen(&["list", "--spec-dir", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    (warnings, spec, list)
}

/// An HCA with every node but rdma_cm (rdma_ucm not loaded, or its node
/// not made): the specs are still written, without rdma_cm, and one
/// warning names the missing file.
#[test]
fn rdma_host_without_rdma_cm_is_written_with_a_warning_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    // rdma_ucm not loaded: no misc device at all.
    let root = copy_machine("rdma-host", &tmp.path().join("no-module"));
    fs::remove_dir_all(root.join("sys/devices/virtual/misc/rdma_cm")).unwrap();
    fs::remove_file(root.join("sys/class/misc/rdma_cm")).unwrap();
    fs::remove_file(root.join("sys/dev/char/10:125")).unwrap();
    let (warnings, spec, list) = rdma_host_run(&root, tmp.path(), "no-module");
    assert_eq!(
        warnings,
        [
            "/sys/class/misc/rdma_cm: no such file: rdma_ucm is not loaded, so the RDMA devices \
             are given without /dev/infiniband/rdma_cm, and RDMA CM (librdmacm: rping, \
             perftest's -R, NCCL and UCX over RoCE) fails in their containers until it is \
             (`modprobe rdma_ucm`, then regenerate)"
        ]
    );
    assert!(!spec.contains("rdma_cm"), "{spec}");
    assert!(spec.contains("'/dev/infiniband/uverbs2'"), "{spec}");
    assert_eq!(list.lines().count(), 9, "{list}");
    // In sysfs but not in /dev (the node not made yet): that file is named.
    let root = copy_machine("rdma-host", &tmp.path().join("no-node"));
    let manifest = root.join("dev.manifest");
    let text = fs::read_to_string(&manifest).unwrap();
    let without: String = text
        .lines()
        .filter(|l| !l.starts_with("/dev/infiniband/rdma_cm "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(without, text);
    fs::write(&manifest, without).unwrap();
    let (warnings, spec, _) = rdma_host_run(&root, tmp.path(), "no-node");
    assert_eq!(
        warnings,
        ["/dev/infiniband/rdma_cm: listed in sysfs (10:125) but missing from /dev; not using it"]
    );
    assert!(!spec.contains("rdma_cm"), "{spec}");
}

/// A uverbs entry whose `ibdev` is unreadable or garbage is named, with
/// what is wrong, and so is the HCA it leaves without verbs, which is in
/// no spec; the others are written as before.
#[test]
fn rdma_host_uverbs_with_a_garbage_ibdev_is_named_and_its_hca_left_out() {
    let tmp = tempfile::tempdir().unwrap();
    let ibdev = "sys/devices/pci0000:c0/0000:c0:01.1/0000:c1:00.0/infiniband_verbs/uverbs2/ibdev";
    let no_verbs = "/sys/class/infiniband/mlx5_2: no uverbs char device in \
                    /sys/class/infiniband_verbs names mlx5_2 (is ib_uverbs loaded? another \
                    warning may say what is wrong with its entry), so it cannot be used; \
                    skipping it";
    for (name, bytes, why) in [
        (
            "not-utf8",
            &b"\xff\xfe\n"[..],
            "not UTF-8 text, so which RDMA device uverbs2 is for is unknown; skipping it",
        ),
        (
            "not-a-name",
            b"mlx5_2\"; rm -rf /\n",
            "\"mlx5_2\\\"; rm -rf /\" is not an RDMA device name, so which device uverbs2 is \
             for is unknown; skipping it",
        ),
        (
            "empty",
            b"",
            "\"\" is not an RDMA device name, so which device uverbs2 is for is unknown; \
             skipping it",
        ),
    ] {
        let root = copy_machine("rdma-host", &tmp.path().join(name));
        fs::write(root.join(ibdev), bytes).unwrap();
        let (warnings, spec, list) = rdma_host_run(&root, tmp.path(), name);
        assert_eq!(
            warnings,
            [
                format!("/sys/class/infiniband_verbs/uverbs2/ibdev: {why}"),
                no_verbs.to_string()
            ],
            "{name}"
        );
        assert!(
            !spec.contains("uverbs2") && !spec.contains("mlx5_2"),
            "{spec}"
        );
        assert_eq!(
            list,
            "cdigen.io/rdma=0000:41:00.0\ncdigen.io/rdma=0000:41:00.1\ncdigen.io/rdma=all\n\
             cdigen.io/rdma=infiniband:rxe0\ncdigen.io/rdma=mlx5_0\ncdigen.io/rdma=mlx5_1\n\
             cdigen.io/rdma=rxe0\n",
            "{name}"
        );
    }
}

/// Without the KFD topology (KFD not loaded) the `amdgpu_xcp` devices
/// cannot be told from idle ones: only each GPU's own nodes are offered,
/// and GPU 0, whose CPX mode needs its partitions, is reported once.
#[test]
fn mi300x_without_kfd_topology_offers_the_gpus_and_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    let root = copy_machine("mi300x-cpx", tmp.path());
    fs::remove_dir_all(root.join("sys/devices/virtual/kfd/kfd/topology")).unwrap();
    let (list, warnings, amd) = mi300x_run(&root, tmp.path(), "no-topology");
    assert_eq!(
        warnings,
        [format!(
            "{GPU0_MODE}: GPU 0000:05:00.0 is in CPX mode (8 compute partitions), but there is \
             no KFD topology (/sys/class/kfd/kfd/topology/nodes: is amdgpu's KFD loaded?) to say \
             which amdgpu_xcp devices are its partitions; only the partitions with a KFD node are \
             offered"
        )]
    );
    assert_eq!(list, mi300x_list(2));
    assert!(
        cdi_device(&amd, "0").contains("'/dev/dri/renderD128'"),
        "{amd}"
    );
    assert!(
        cdi_device(&amd, "1").contains("'/dev/dri/renderD136'"),
        "{amd}"
    );
    assert!(!amd.contains("amdgpu_xcp"), "{amd}");
}

/// A KFD node that names no AMD GPU (a `location_id` of another bus) is
/// reported on its file, and its partition device offered nowhere.
#[test]
fn mi300x_kfd_node_of_no_gpu_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let root = copy_machine("mi300x-cpx", tmp.path());
    let props = root.join("sys/devices/virtual/kfd/kfd/topology/nodes/9/properties");
    let text = fs::read_to_string(&props).unwrap();
    fs::write(
        &props,
        text.replace("location_id 1287\n", "location_id 1543\n"),
    )
    .unwrap();
    let (list, warnings, _) = mi300x_run(&root, tmp.path(), "orphan");
    assert_eq!(
        warnings,
        [
            "/sys/class/kfd/kfd/topology/nodes/9/properties: KFD node 9 (renderD135): domain 0 \
             location_id 1543 (PCI 0000:06:00.x) is no AMD GPU with DRM nodes here; amdgpu_xcp_6 \
             is offered nowhere"
                .to_string(),
            format!(
                "{GPU0_MODE}: GPU 0000:05:00.0 is in CPX mode (8 compute partitions), but the KFD \
                 topology (/sys/class/kfd/kfd/topology/nodes) lists 7; a partition without a KFD \
                 node cannot be told from an idle amdgpu_xcp device; only the partitions with a \
                 KFD node are offered"
            ),
        ]
    );
    assert_eq!(list, mi300x_list(8));
}

/// An HCA whose PCI function vanished while cdigen read the host (hot
/// unplug: its directory is gone, the class links not yet): named once,
/// by its class link, and in no spec; its char devices' dangling links
/// say nothing more; the other HCAs keep their names.
#[test]
fn rdma_host_hca_whose_pci_function_vanished_is_named_and_left_out() {
    let tmp = tempfile::tempdir().unwrap();
    let root = copy_machine("rdma-host", tmp.path());
    fs::remove_dir_all(root.join("sys/devices/pci0000:40/0000:40:01.1/0000:41:00.1")).unwrap();
    assert!(
        fs::symlink_metadata(root.join("sys/class/infiniband_verbs/uverbs1")).is_ok(),
        "the class links stay"
    );
    let (warnings, spec, list) = rdma_host_run(&root, tmp.path(), "out");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with("/sys/class/infiniband/mlx5_1: ")
            && warnings[0].ends_with(
                ": RDMA device mlx5_1 is listed but gone (removed with its device while cdigen \
                 read it?); skipping it"
            ),
        "{warnings:?}"
    );
    assert!(
        !spec.contains("mlx5_1") && !spec.contains("uverbs1"),
        "{spec}"
    );
    assert_eq!(
        list,
        "cdigen.io/rdma=0000:41:00.0\ncdigen.io/rdma=0000:c1:00.0\ncdigen.io/rdma=all\n\
         cdigen.io/rdma=infiniband:rxe0\ncdigen.io/rdma=mlx5_0\ncdigen.io/rdma=mlx5_2\n\
         cdigen.io/rdma=rxe0\n"
    );
}

/// The PF's RDMA device of `example` (mlx5_0 on the switchdev PF) is the
/// RDMA backend's, its VFs' (mlx5_2, mlx5_3) the SR-IOV backend's: no node
/// is in both specs but the shared rdma_cm.
#[test]
fn a_vfs_rdma_nodes_are_in_the_vf_spec_only() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fixtures_dir().join("example/root");
    let (code, stdout, warnings) = generate_named(&root, tmp.path(), "out", &[]);
    assert_eq!(code, 0, "{stdout}{warnings:?}");
    let specs = specs_in(&tmp.path().join("out/cdi"));
    let nodes = |file: &str| -> std::collections::BTreeSet<String> {
        specs[file]
            .lines()
            .filter_map(|l| l.trim().strip_prefix("- path: '/dev/infiniband/"))
            .map(|p| p.trim_end_matches('\'').to_string())
            .collect()
    };
    let (rdma, vf) = (nodes("cdigen.io-rdma.yaml"), nodes("cdigen.io-vf.yaml"));
    assert_eq!(
        rdma.iter().map(String::as_str).collect::<Vec<_>>(),
        ["issm0", "rdma_cm", "umad0", "uverbs0"]
    );
    assert_eq!(
        rdma.intersection(&vf)
            .map(String::as_str)
            .collect::<Vec<_>>(),
        ["rdma_cm"]
    );
    assert!(vf.contains("uverbs2") && vf.contains("uverbs3"), "{vf:?}");
}

/// `edge-server`'s Coral Edge TPU by the definition its user wrote
/// (`generators.d/coral-tpu.yaml`, backend generic): `names: [pci]` names
/// it by its card's PCI address (the nearest PCI function above
/// `apex_0`), beside `0` and `all`; the spec and its listing are goldens
/// under `expected/user/`.
#[test]
fn edge_server_coral_tpu_by_a_users_definition() {
    let tmp = tempfile::tempdir().unwrap();
    let base = fixtures_dir().join("edge-server");
    let root = base.join("root");
    let defs = base.join("generators.d");
    let (code, stdout, warnings) = generate_named(
        &root,
        tmp.path(),
        "tpu",
        &[
            "--generators",
            defs.to_str().unwrap(),
            "--generator",
            "coral-tpu",
        ],
    );
    assert_eq!(code, 0, "{stdout}{warnings:?}");
    assert_eq!(warnings, Vec::<String>::new());
    let mut failures = Vec::new();
    let specs = specs_in(&tmp.path().join("tpu/cdi"));
    assert_eq!(specs.keys().collect::<Vec<_>>(), ["coral.ai-tpu.yaml"]);
    for (name, text) in &specs {
        golden(
            &base.join("expected/user/cdi").join(name),
            text,
            &mut failures,
        );
    }
    let (code, list, stderr) = cdigen(&[
        "list",
        "--spec-dir",
        tmp.path().join("tpu/cdi").to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        list,
        "coral.ai/tpu=0\ncoral.ai/tpu=0000:05:00.0\ncoral.ai/tpu=all\n"
    );
    golden(&base.join("expected/user/list.txt"), &list, &mut failures);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A copy of `amd-gpu` naming by `uuid`, on `root`: (list, warnings).
fn amd_by_uuid(root: &Path, tmp: &Path) -> (String, Vec<String>) {
    let defs = tmp.join("generators.d");
    fs::create_dir_all(&defs).unwrap();
    let text =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("generators/amd-gpu.yaml"))
            .unwrap();
    assert!(text.contains("\nnames: [index, all]\n"), "{text}");
    fs::write(
        defs.join("amd-gpu.yaml"),
        text.replace("\nnames: [index, all]\n", "\nnames: [uuid, all]\n"),
    )
    .unwrap();
    let (code, stdout, warnings) = generate_named(
        root,
        tmp,
        "uuid",
        &[
            "--generators",
            defs.to_str().unwrap(),
            "--generator",
            "amd-gpu",
        ],
    );
    assert_eq!(code, 0, "{stdout}{warnings:?}");
    let (code, list, stderr) =
        cdigen(&["list", "--spec-dir", tmp.join("uuid/cdi").to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    (list, warnings)
}

/// `names: [uuid]` names AMD GPUs by their KFD `unique_id` as ROCm's
/// runtime does (`GPU-` and 16 hex digits): `mi300x-cpx`'s SPX GPU 1 gets
/// its UUID; GPU 0's eight CPX partitions share their GPU's, so none of
/// them is named by it, with the warning that says so. On `edge-server`,
/// whose old kernel gives no `unique_id`, the GPU gets no name from it,
/// with a warning naming the device and the strategy.
#[test]
fn amd_gpus_named_by_their_kfd_unique_id() {
    let tmp = tempfile::tempdir().unwrap();
    let (list, warnings) = amd_by_uuid(&fixtures_dir().join("mi300x-cpx/root"), tmp.path());
    assert_eq!(list, "amd.com/gpu=GPU-124c1a7f1700b4dc\namd.com/gpu=all\n");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with(
            "generator amd-gpu: \"GPU-4586545370e3703c\" would name 0000:05:00.0 and \
             0000:05:00.0/xcp1 and "
        ),
        "{warnings:?}"
    );

    let tmp = tempfile::tempdir().unwrap();
    let (list, warnings) = amd_by_uuid(&fixtures_dir().join("edge-server/root"), tmp.path());
    assert_eq!(list, "amd.com/gpu=all\n");
    assert_eq!(
        warnings,
        [
            "generator amd-gpu: 0000:03:00.0: no UUID known (NVIDIA GPUs and MIG devices have \
             one, and AMD GPUs whose KFD topology gives a unique_id), so no name from \
             `\"uuid\"`"
        ]
    );
}

/// The old kernel of `edge-server` writes no `domain` in its KFD topology:
/// it is read as domain 0 with one note at `-v`, never a warning, and
/// nothing is printed with Rust's debug formatting.
#[test]
fn edge_server_kfd_without_domain_is_domain_0_noted_once() {
    let root = fixtures_dir().join("edge-server/root");
    let (code, _, stderr) = cdigen(&["discover", "--root", root.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(warnings_of(&stderr), Vec::<&str>::new(), "{stderr}");
    let (code, _, stderr) = cdigen(&["-v", "discover", "--root", root.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let notes: Vec<&str> = stderr.lines().filter(|l| l.contains("domain")).collect();
    assert_eq!(
        notes,
        [
            " INFO /sys/class/kfd/kfd/topology/nodes/1/properties: no domain property (a kernel \
          older than the PCI domain in KFD's topology); reading the nodes' GPUs as in PCI \
          domain 0, as ROCm does"
        ]
    );
    assert!(
        !stderr.contains("Some(") && !stderr.contains("None"),
        "{stderr}"
    );
}

/// The BMC's display (`edge-server`'s AST2500, `ast`) is in no default
/// spec; the opt-in `bmc-display` definition offers it.
#[test]
fn a_bmc_display_is_offered_only_by_the_opt_in_definition() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fixtures_dir().join("edge-server/root");
    let (code, stdout, warnings) = generate_named(&root, tmp.path(), "default", &[]);
    assert_eq!(code, 0, "{stdout}{warnings:?}");
    let specs = specs_in(&tmp.path().join("default/cdi"));
    assert_eq!(specs.keys().collect::<Vec<_>>(), ["amd.com-gpu.yaml"]);
    assert!(!specs["amd.com-gpu.yaml"].contains("card0"));
    let (code, stdout, warnings) =
        generate_named(&root, tmp.path(), "bmc", &["--generator", "bmc-display"]);
    assert_eq!(code, 0, "{stdout}{warnings:?}");
    let specs = specs_in(&tmp.path().join("bmc/cdi"));
    let bmc = &specs["cdigen.io-bmc-display.yaml"];
    assert!(cdi_device(bmc, "0").contains("'/dev/dri/card0'"), "{bmc}");
    assert!(!bmc.contains("card1"), "{bmc}");
}

/// What `generate` skips parsing is what parsing would give: on every
/// fixture machine, each planned spec's bytes (YAML and JSON) parse to
/// its kind and device names and are valid, so a file holding them
/// defines what the plan says (`Defined::read_planned`).
#[test]
fn planned_bytes_parse_to_the_planned_spec() {
    let generators = cdigen::generator::load(&[]).unwrap();
    let enabled: Vec<_> = generators
        .iter()
        .filter(|l| l.generator.enabled)
        .cloned()
        .collect();
    let templates = cdigen::render::Templates::load(None).unwrap();
    let mut specs = 0;
    for m in machines() {
        let root = cdigen::root::HostRoot::open(&fixtures_dir().join(&m).join("root"))
            .unwrap()
            .with_driver_root_or_detect(None)
            .with_nvml(false);
        let scan = cdigen::generator::scan(enabled.iter().map(|l| &l.generator));
        let Ok(found) = cdigen::discover::discover_for(&root, &[], &scan) else {
            continue;
        };
        for format in [
            cdigen::cdi::codec::Format::Yaml,
            cdigen::cdi::codec::Format::Json,
        ] {
            let plans = cdigen::generate::plan_all(&enabled, &templates, &found, Some(format));
            for p in &plans.planned {
                let Some(spec) = &p.spec else { continue };
                let parsed = cdigen::cdi::parse_file(Path::new(&p.file), &p.bytes)
                    .unwrap_or_else(|e| panic!("{m}: {}: {e}", p.file));
                assert_eq!(parsed.kind, spec.kind, "{m}: {}", p.file);
                let names = |s: &cdigen::cdi::spec::Spec| -> Vec<String> {
                    s.devices.iter().map(|d| d.name.clone()).collect()
                };
                assert_eq!(names(&parsed), names(spec), "{m}: {}", p.file);
                assert_eq!(cdigen::cdi::validate(&parsed), vec![], "{m}: {}", p.file);
                specs += 1;
            }
        }
    }
    assert!(specs > 40, "only {specs} specs planned across the fixtures");
}

//! Hostile images against `cdigen hook update-ldcache`, in real containers
//! runc starts (`../shared/tools/cdi-check/run-in-container.sh`) with
//! cdigen's NVIDIA spec for a fixture machine (dgx-8gpu) injected, its
//! hooks running this build's `cdigen` and the host's ldconfig.
//!
//! At `createContainer` time the container's `/proc` is mounted and its
//! `/proc/1/root` is the host's `/`. Each image points ldconfig at marker
//! files and directories this test makes on the host through it: its aux
//! cache directory (`/var/cache/ldconfig`), a library directory and an
//! `include` in `/etc/ld.so.conf`, `/etc/ld.so.conf` itself, `/etc` and
//! `/etc/ld.so.cache` as links out. The image is made hostile by a
//! `createContainer` hook put before cdigen's in the spec (the files are
//! in the root before cdigen's hooks run, as an image's are). Checked:
//! nothing on the host changes, nothing of the host's files is shown in
//! the start error, and the image's own library and the driver's are in
//! the container's cache and load.
//!
//! Needs root, runc and cc (the script installs runc and gcc): ignored by
//! default, run by `.ci/run` with `--ignored`. Without `../shared` it says
//! so and passes, unless `CDIGEN_REQUIRE_SHARED=1`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use cdigen::cdi::{self, Format, Hook};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The fixture machine: NVIDIA GPUs, a Debian driver tree.
const MACHINE: &str = "fixtures/dgx-8gpu";
/// Where its driver tree goes (as in tests/fixtures.rs).
const DRIVER_ROOT: &str = "run/nvidia/driver";

/// The hook that makes the image hostile: `sh -c PLANT sh TRICK HOST`,
/// with the OCI state on stdin. `HOST` is the host's marker directory,
/// `/proc/1/root$HOST` the way to it from the container's `/proc`.
const PLANT: &str = r#"set -eu
bundle=$(jq -r .bundle)
root=$(jq -r .root.path "$bundle/config.json")
case $root in /*) ;; *) root=$bundle/$root ;; esac
host=$2 out=/proc/1/root$2
# The way out works through the container's /proc, before cdigen's hooks:
# each run proves it.
test -f "$root$out/secret.conf" || { echo "no way out at $root$out" >&2; exit 1; }
case $1 in
hostile)
  rm -rf "$root/var/cache/ldconfig" && mkdir -p "$root/var/cache"
  ln -s "$out/aux" "$root/var/cache/ldconfig"
  mkdir -p "$root/opt/image/lib" && cp "$host/libimage.so.2.0" "$root/opt/image/lib/"
  printf '/opt/image/lib\n%s\n' "$out/libs" >>"$root/etc/ld.so.conf"
  rm -f "$root/etc/ld.so.cache" && ln -s "$out/cache/ld.so.cache" "$root/etc/ld.so.cache" ;;
conf-link)
  rm -f "$root/etc/ld.so.conf" && ln -s "$out/etc/ld.so.conf" "$root/etc/ld.so.conf" ;;
include)
  printf 'include %s\n' "$out/secret.conf" >>"$root/etc/ld.so.conf"
  rm -f "$root/etc/ld.so.cache" && mkdir "$root/etc/ld.so.cache" ;;
etc-link)
  # (the runtime's mounts are in it: moved aside, not removed)
  mv "$root/etc" "$root/etc.image" && ln -s "$out/etc" "$root/etc" ;;
conf-d-link)
  rm -rf "$root/etc/ld.so.conf.d" && ln -s "$out/etc" "$root/etc/ld.so.conf.d" ;;
esac
"#;

/// Builds a shared object with `soname` at `path`.
fn shared_object(soname: &str, path: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("lib.c");
    fs::write(&src, "int cdigen_test(void) { return 1; }\n").unwrap();
    let out = Command::new("cc")
        .args(["-shared", "-fPIC", &format!("-Wl,-soname,{soname}"), "-o"])
        .arg(path)
        .arg(&src)
        .output()
        .expect("cc (run-in-container.sh installs gcc)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every path under `dir`, relative, with a regular file's content,
/// symlinks not followed.
fn listing(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let meta = fs::symlink_metadata(&path).unwrap();
            let name = path.strip_prefix(dir).unwrap().display().to_string();
            if meta.is_dir() {
                todo.push(path);
                out.push(format!("{name}/"));
            } else if meta.is_file() {
                out.push(format!("{name} {} bytes", meta.len()));
            } else {
                out.push(format!("{name} {:?}", meta.file_type()));
            }
        }
    }
    out.sort();
    out
}

/// The host's markers: the aux cache's and the cache's target
/// directories, a library directory with a library whose soname link is
/// missing (ldconfig would make it), an ld.so.conf naming that directory
/// through `/proc/1/root`,
/// and a file of secrets in `KEY=value` lines (ldconfig's configuration
/// syntax echoes the values in its warnings).
fn host_markers(host: &Path) {
    for d in ["aux", "libs", "cache", "etc"] {
        fs::create_dir(host.join(d)).unwrap();
    }
    shared_object("libhost.so.1", &host.join("libs/libhost.so.1.0"));
    shared_object("libimage.so.2", &host.join("libimage.so.2.0"));
    // Read from inside the container root, it names the library
    // directory the way an image would.
    fs::write(
        host.join("etc/ld.so.conf"),
        format!("/proc/1/root{}\n", host.join("libs").display()),
    )
    .unwrap();
    fs::write(
        host.join("secret.conf"),
        "API_KEY=value-secret-1\nPASSWORD=hunter2-secret\n",
    )
    .unwrap();
}

/// The dgx-8gpu specs in `out`, hooks running this build's cdigen, with
/// the `PLANT` hook (`trick`, markers in `host`) first among the hooks of
/// the edits that run update-ldcache.
fn hostile_specs(work: &Path, out: &Path, trick: &str, host: &Path) {
    let bin = env!("CARGO_BIN_EXE_cdigen");
    let run = Command::new(bin)
        .args(["generate", "--root"])
        .arg(repo().join(MACHINE).join("root"))
        .args(["--hook-path", bin])
        .arg("--output-dir")
        .arg(out)
        .arg("--devinfo-dir")
        .arg(work.join("devinfo"))
        .env("CDIGEN_GENERATORS", "/nonexistent-cdigen-user-generators")
        .env_remove("CDIGEN_TEMPLATES")
        .env_remove("CDIGEN_LIBRARY_SEARCH_PATH")
        .env_remove("CDIGEN_DRIVER_ROOT")
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let path = out.join("nvidia.com-gpu.yaml");
    let mut spec = cdi::codec::parse(&fs::read(&path).unwrap(), Format::Yaml).unwrap();
    let plant = Hook {
        hook_name: "createContainer".into(),
        path: "/bin/sh".into(),
        args: vec![
            "sh".into(),
            "-c".into(),
            PLANT.into(),
            "sh".into(),
            trick.into(),
            host.display().to_string(),
        ],
        env: vec!["PATH=/usr/sbin:/usr/bin:/sbin:/bin".into()],
        timeout: None,
    };
    let mut planted = false;
    for edits in std::iter::once(&mut spec.container_edits)
        .chain(spec.devices.iter_mut().map(|d| &mut d.container_edits))
    {
        if edits
            .hooks
            .iter()
            .any(|h| h.args.iter().any(|a| a == "update-ldcache"))
        {
            edits.hooks.insert(0, plant.clone());
            planted = true;
        }
    }
    assert!(planted, "no update-ldcache hook in {}", path.display());
    fs::write(&path, cdi::codec::to_bytes(&spec, Format::Yaml).unwrap()).unwrap();
}

/// The fake host: the machine's `dev.manifest` and driver tree.
fn host_overlay(into: &Path) {
    let machine = repo().join(MACHINE).join("root");
    fs::create_dir_all(into).unwrap();
    fs::copy(machine.join("dev.manifest"), into.join("dev.manifest")).unwrap();
    fs::create_dir_all(into.join(DRIVER_ROOT).parent().unwrap()).unwrap();
    let ok = Command::new("cp")
        .arg("-a")
        .arg(machine.join(DRIVER_ROOT))
        .arg(into.join(DRIVER_ROOT))
        .status()
        .unwrap()
        .success();
    assert!(ok, "cp -a the driver tree");
}

/// What a container of `trick` printed, how the script ended, and the
/// trick's host markers before and after.
struct Run {
    status_ok: bool,
    text: String,
    before: Vec<String>,
    after: Vec<String>,
}

/// Starts a container of `trick`, with fresh markers in `hosts/<trick>`,
/// running `cmd`.
fn run(script: &Path, tmp: &Path, trick: &str, hosts: &Path, cmd: &str) -> Run {
    let host = hosts.join(trick);
    fs::create_dir(&host).unwrap();
    host_markers(&host);
    let before = listing(&host);
    let work = tmp.join(trick);
    let specs = work.join("cdi");
    hostile_specs(&work, &specs, trick, &host);
    let out = Command::new("bash")
        .arg(script)
        .args(["--layout", "debian", "--host-overlay"])
        .arg(tmp.join("overlay"))
        .arg(&specs)
        .arg("nvidia.com/gpu=0")
        .args(["--", "sh", "-c", cmd])
        .output()
        .unwrap();
    Run {
        before,
        after: listing(&host),
        status_ok: out.status.success(),
        text: format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

#[test]
#[ignore = "needs root, runc and cc: .ci/run runs it"]
fn hostile_images_cannot_reach_the_host_through_ldconfig() {
    let script = repo().join("../shared/tools/cdi-check/run-in-container.sh");
    if !script.is_file() {
        assert!(
            std::env::var_os("CDIGEN_REQUIRE_SHARED").is_none(),
            "no {} (CDIGEN_REQUIRE_SHARED is set)",
            script.display()
        );
        eprintln!("skipped: no ../shared/tools/cdi-check/run-in-container.sh beside the crate");
        return;
    }
    let tmp = tempfile::TempDir::new().unwrap();
    let host = tempfile::TempDir::new().unwrap();
    host_overlay(&tmp.path().join("overlay"));
    let mut failures = Vec::new();
    let mut check = |trick: &str, run: &Run, wants: &[&str], unwanted: &[&str]| {
        if run.after != run.before {
            failures.push(format!(
                "{trick}: the host's markers changed: {:?} became {:?}\n{}",
                run.before, run.after, run.text
            ));
        }
        for bad in ["value-secret-1", "hunter2-secret"].iter().chain(unwanted) {
            if run.text.contains(bad) {
                failures.push(format!("{trick}: {bad:?} in\n{}", run.text));
            }
        }
        for want in wants {
            if !run.text.contains(want) {
                failures.push(format!("{trick}: no {want:?} in\n{}", run.text));
            }
        }
    };

    // The aux cache directory, a library directory and the cache file
    // pointing at the host; the container starts, its cache lists the
    // image's library and the driver's, and both load.
    let probe = "ldconfig -p | grep -q '^[[:space:]]libimage.so.2 ' && echo 'cached libimage'; \
ldconfig -p | grep -q '^[[:space:]]libcuda.so.1 ' && echo 'cached libcuda'; \
ldconfig -p | grep -q libhost && echo 'cached libhost'; \
dlprobe libimage.so.2 libcuda.so.1 libnvidia-ml.so.1";
    let r = run(&script, tmp.path(), "hostile", host.path(), probe);
    check(
        "hostile",
        &r,
        &[
            "cached libimage",
            "cached libcuda",
            "dlopen libimage.so.2 OK",
            "dlopen libcuda.so.1 OK",
            "dlopen libnvidia-ml.so.1 OK",
            "run-in-container: exit 0",
        ],
        &["cached libhost"],
    );
    assert!(r.status_ok, "{}", r.text);

    // /etc/ld.so.conf a link to the host's, which names a host library
    // directory: the driver's folders are cached all the same.
    let r = run(
        &script,
        tmp.path(),
        "conf-link",
        host.path(),
        "ldconfig -p | grep -q libhost && echo 'cached libhost'; dlprobe libcuda.so.1",
    );
    check(
        "conf-link",
        &r,
        &["dlopen libcuda.so.1 OK", "run-in-container: exit 0"],
        &["cached libhost"],
    );

    // An include of a host file of secrets, and a cache ldconfig cannot
    // write: the container does not start, and the error shows ldconfig's
    // complaint but nothing of the file.
    let r = run(&script, tmp.path(), "include", host.path(), "true");
    check(
        "include",
        &r,
        &[
            "cdigen hook update-ldcache: ",
            " failed (exit status 1): ",
            "run-in-container: runc could not start the container",
        ],
        &[],
    );

    // /etc a link to a host directory: the hooks refuse to write through
    // it (the link is resolved inside the root, where /proc/1/root is a
    // magic link they do not follow), and nothing is written there.
    let r = run(&script, tmp.path(), "etc-link", host.path(), "true");
    check(
        "etc-link",
        &r,
        &[
            // enable-cuda-compat, the first to write there, refuses
            "cdigen hook enable-cuda-compat: ",
            "run-in-container: runc could not start the container",
        ],
        &[],
    );

    // /etc/ld.so.conf.d, where the hook writes, a link to a host
    // directory: the same.
    let r = run(&script, tmp.path(), "conf-d-link", host.path(), "true");
    check(
        "conf-d-link",
        &r,
        &[
            // enable-cuda-compat, the first to write there, refuses
            "cdigen hook enable-cuda-compat: ",
            "run-in-container: runc could not start the container",
        ],
        &[],
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

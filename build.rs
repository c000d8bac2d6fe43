//! Generates the gRPC code of the kubelet APIs cdigen speaks
//! (`proto/*.proto`): protox parses them in pure Rust (no `protoc`), and
//! tonic-prost-build writes the messages and both sides of each service
//! (the tests' fake kubelet uses the other side).
//!
//! The DRA health protos go to `$OUT_DIR/dra-health`: their package `v1`
//! is also the pod resources API's, and prost writes one file a package.
//!
//! It also tells `--version` what was built ([`build_info`]): the source
//! revision and the enabled cargo features.

use std::path::Path;
use std::process::Command;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    build_info();
    let protos = [
        "proto/deviceplugin-v1beta1.proto",
        "proto/pluginregistration-v1.proto",
        "proto/podresources-v1.proto",
        "proto/dra-v1.proto",
        "proto/dra-v1beta1.proto",
    ];
    let health = [
        "proto/dra-health-v1alpha1.proto",
        "proto/dra-health-v1.proto",
    ];
    for p in protos.iter().chain(&health) {
        println!("cargo:rerun-if-changed={p}");
    }
    let files = protox::compile(protos, ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(files)?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?).join("dra-health");
    std::fs::create_dir_all(&out)?;
    let files = protox::compile(health, ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .out_dir(out)
        .compile_fds(files)?;
    Ok(())
}

/// Sets `CDIGEN_BUILD_REVISION` (the git commit, abbreviated, with
/// `-dirty` when tracked files differ from it; `unknown` outside a git
/// checkout of this package, as from a source tarball; a packager's
/// `CDIGEN_BUILD_REVISION` in the build's environment wins) and
/// `CDIGEN_BUILD_FEATURES` (the enabled cargo features, comma-separated,
/// or `none`) for the crate. The script runs again when the checked-out
/// commit, the index or the sources change, not on every build.
fn build_info() {
    println!("cargo:rerun-if-env-changed=CDIGEN_BUILD_REVISION");
    let revision = match std::env::var("CDIGEN_BUILD_REVISION") {
        Ok(r) if !r.trim().is_empty() => r.trim().to_string(),
        _ => git_revision().unwrap_or_else(|| "unknown".into()),
    };
    println!("cargo:rustc-env=CDIGEN_BUILD_REVISION={revision}");
    let mut features: Vec<String> = std::env::vars()
        .filter_map(|(k, _)| k.strip_prefix("CARGO_FEATURE_").map(str::to_string))
        .filter(|f| f != "DEFAULT")
        .map(|f| f.to_lowercase().replace('_', "-"))
        .collect();
    features.sort();
    let features = if features.is_empty() {
        "none".to_string()
    } else {
        features.join(",")
    };
    println!("cargo:rustc-env=CDIGEN_BUILD_FEATURES={features}");
}

/// `git` in this package's directory, its output trimmed; `None` when it
/// fails or cannot run.
fn git(args: &[&str]) -> Option<String> {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")?;
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        // `git status` would otherwise refresh the index, which would
        // run this script again on the next build.
        .env("GIT_OPTIONAL_LOCKS", "0")
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8(out.stdout).ok()?.trim().to_string())
}

/// The checkout's commit, `-dirty` when tracked files changed; `None`
/// when this package is not the top of a git checkout (a tarball
/// unpacked inside someone's repository is not that repository's commit).
fn git_revision() -> Option<String> {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")?;
    let top = git(&["rev-parse", "--show-toplevel"])?;
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if !same(Path::new(&top), Path::new(&manifest)) {
        return None;
    }
    // Run again when HEAD moves (checkout), its branch moves (commit),
    // or the index changes (add, commit), and when the sources change
    // (the -dirty mark).
    for what in ["HEAD", "index", "packed-refs"] {
        if let Some(p) = git(&["rev-parse", "--git-path", what]) {
            println!(
                "cargo:rerun-if-changed={}",
                Path::new(&top).join(p).display()
            );
        }
    }
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"])
        && let Some(p) = git(&["rev-parse", "--git-path", &branch])
    {
        println!(
            "cargo:rerun-if-changed={}",
            Path::new(&top).join(p).display()
        );
    }
    for p in ["src", "build.rs", "Cargo.toml"] {
        println!("cargo:rerun-if-changed={p}");
    }
    let commit = git(&["rev-parse", "--short=12", "HEAD"])?;
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(if dirty {
        format!("{commit}-dirty")
    } else {
        commit
    })
}

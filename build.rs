//! Generates the gRPC code of the kubelet APIs cdigen speaks
//! (`proto/*.proto`): protox parses them in pure Rust (no `protoc`), and
//! tonic-prost-build writes the messages and both sides of each service
//! (the tests' fake kubelet uses the other side).
//!
//! The DRA health protos go to `$OUT_DIR/dra-health`: their package `v1`
//! is also the pod resources API's, and prost writes one file a package.

fn main() -> Result<(), Box<dyn std::error::Error>> {
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

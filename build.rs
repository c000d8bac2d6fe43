//! Generates the gRPC code of the kubelet APIs cdigen speaks
//! (`proto/*.proto`): protox parses them in pure Rust (no `protoc`), and
//! tonic-prost-build writes the messages and both sides of each service
//! (the tests' fake kubelet uses the other side).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = [
        "proto/deviceplugin-v1beta1.proto",
        "proto/pluginregistration-v1.proto",
        "proto/podresources-v1.proto",
        "proto/dra-v1.proto",
        "proto/dra-v1beta1.proto",
    ];
    for p in protos {
        println!("cargo:rerun-if-changed={p}");
    }
    let files = protox::compile(protos, ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(files)?;
    Ok(())
}

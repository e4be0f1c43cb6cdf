//! `/openapi.json` as a client sees it: the document a real `serve` answers
//! validates with `openapi-spec-validator`, and a Python client generated
//! from it by `openapi-python-client` runs a check and a settle against
//! that `serve` (and a block, once the block routes are in this build).
//! Both tools live in `target/openapi-venv`, made by scripts/test.sh.

mod common;

use common::child::serve;
use std::path::{Path, PathBuf};
use std::process::Command;

fn venv_tool(name: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let tool = root.join("target/openapi-venv/bin").join(name);
    assert!(
        tool.exists(),
        "{} is missing: run scripts/test.sh --install-only (it installs openapi-spec-validator \
         and openapi-python-client into target/openapi-venv)",
        tool.display()
    );
    tool
}

fn run(command: &mut Command) -> String {
    let out = command.output().expect("run a tool of target/openapi-venv");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{command:?}: {text}");
    text
}

/// Fetches the served document, validates it, generates the client and
/// runs `client_calls.py` with `extra` arguments against the same serve.
fn generated_client_runs(extra: &[&str]) -> String {
    let service = serve(&["--admin-token", "tok-admin"]);
    let (status, document) = common::raw_http::get(&service.addr, "/openapi.json");
    assert_eq!(status, 200, "{document}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("openapi.json");
    std::fs::write(&file, &document).unwrap();
    run(Command::new(venv_tool("openapi-spec-validator")).arg(&file));
    let client = dir.path().join("slidelog_client");
    run(Command::new(venv_tool("openapi-python-client"))
        .args(["generate", "--meta", "none", "--path"])
        .arg(&file)
        .arg("--output-path")
        .arg(&client));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/openapi/client_calls.py");
    run(Command::new(venv_tool("python"))
        .arg(script)
        .arg(service.url(""))
        .arg("tok-admin")
        .args(extra)
        // `--meta none` writes the package itself, slidelog_client, there.
        .env("PYTHONPATH", dir.path()))
}

#[test]
fn the_served_document_validates_and_a_generated_client_checks_and_settles() {
    let out = generated_client_runs(&[]);
    assert!(out.contains("check and settle ok"), "{out}");
}

#[test]
fn a_generated_client_blocks_a_key() {
    let out = generated_client_runs(&["block"]);
    assert!(out.contains("block ok"), "{out}");
}

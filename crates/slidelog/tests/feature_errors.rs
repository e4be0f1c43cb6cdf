//! A layer on an axum app built without slidelog's `axum` feature must fail
//! to compile with a message that names the feature (not a bare `E0277:
//! Body: RejectionBody is not satisfied`). A small crate outside the
//! workspace is checked with `cargo check --offline` against this crate with
//! only `tower`, then with `axum`; the compiler's own words are asserted.

use std::path::{Path, PathBuf};
use std::process::Command;

const APP: &str = r#"
use axum::{Router, routing::get};
use slidelog::middleware::PeerIp;
use slidelog::{Limiter, RateLimitLayer};

fn main() {
    let layer = RateLimitLayer::new(Limiter::memory(), PeerIp::new(), "1/s".parse().unwrap());
    let _app: Router = Router::new().route("/", get(|| async { "hi" })).layer(layer);
}
"#;

/// A crate using slidelog with `features`, in its own workspace under the
/// target directory (its build shares one target dir across runs).
fn user_crate(name: &str, features: &str) -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = manifest_dir.join("../../target/feature-errors");
    let dir = root.join(name);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    let slidelog = manifest_dir.canonicalize().unwrap();
    let manifest = format!(
        r#"[package]
name = "{name}"
version = "0.0.0"
edition = "2024"
publish = false

[workspace]

[dependencies]
slidelog = {{ path = "{}", default-features = false, features = [{features}] }}
axum = {{ version = "0.8", default-features = false }}
"#,
        slidelog.display()
    );
    std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    std::fs::write(dir.join("src/main.rs"), APP).unwrap();
    // The workspace's versions, so that --offline finds them all.
    std::fs::copy(
        manifest_dir.join("../../Cargo.lock"),
        dir.join("Cargo.lock"),
    )
    .unwrap();
    dir
}

fn cargo_check(dir: &Path) -> (bool, String) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["check", "--offline", "--quiet", "--color", "never"])
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", dir.join("../target"))
        .output()
        .expect("run cargo check");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_missing_axum_feature_is_named_in_the_compile_error_and_enabling_it_compiles() {
    let (ok, stderr) = cargo_check(&user_crate("tower-only", r#""tower""#));
    assert!(!ok, "must not compile without the axum feature");
    assert!(
        stderr.contains("enable slidelog's `axum` feature"),
        "the error must name the feature:\n{stderr}"
    );
    let (ok, stderr) = cargo_check(&user_crate("with-axum", r#""axum""#));
    assert!(ok, "compiles with the axum feature:\n{stderr}");
}

#[test]
fn docs_rs_builds_with_every_feature() {
    let manifest = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"));
    assert!(
        manifest
            .unwrap()
            .contains("[package.metadata.docs.rs]\nall-features = true"),
        "docs.rs must document the middleware (features tower, axum, tonic)"
    );
}

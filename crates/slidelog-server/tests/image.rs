//! The container image of deploy/container, as built by
//! scripts/build-image.sh: containers cannot be started on the test
//! machines (hybrid cgroups), so the test saves the image with podman,
//! unpacks its layers into a folder and runs its entrypoint from that root
//! with chroot (the tests run as root), as the image's user 65532:
//! `slidelog --version`, the image's settings (listening on 0.0.0.0), a
//! `serve` on a loopback port that answers `POST /v1/check`, and a store
//! host name resolved from the `/etc/hosts` a runtime mounts, with no NSS
//! module in the image (glibc's files and dns lookups are linked in).
//!
//! The static binary is built in the dev profile in its own target folder
//! (`target/image-test`): its `+crt-static` artifacts stay apart from the
//! ordinary build's, and the folder (about 1.1 GB) can be removed alone.
//! Measured on the shared 2-core machine with one build job: this test
//! takes 233 s from nothing (the release profile's build alone: 6m06s),
//! 3-5 s when the binary is built.

mod common;

use common::{child, raw_http};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

const TAG: &str = "localhost/slidelog:image-test";
const ENTRYPOINT: [&str; 4] = [
    "/usr/local/bin/slidelog",
    "serve",
    "--settings",
    "/etc/slidelog/settings.toml",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(command: &mut Command) -> Output {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(
        out.status.success(),
        "{command:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `chroot --userspec=65532:65532 ROOTFS ARGS`: the image's user, its files.
fn in_image(rootfs: &Path, args: &[&str]) -> Command {
    let mut command = Command::new("chroot");
    command
        .arg("--userspec=65532:65532")
        .arg(rootfs)
        .args(args)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
    command
}

/// Builds the image, saves it and unpacks its layers into `rootfs`;
/// returns the image's config.
fn build_and_unpack(dir: &Path, rootfs: &Path) -> Value {
    let started = Instant::now();
    run(Command::new(root().join("scripts/build-image.sh"))
        .arg(TAG)
        .env("SLIDELOG_IMAGE_PROFILE", "dev")
        .env("CARGO_TARGET_DIR", root().join("target/image-test")));
    eprintln!(
        "scripts/build-image.sh (dev profile) took {:.0?}",
        started.elapsed()
    );
    let archive = dir.join("image.tar");
    run(Command::new("podman")
        .args(["save", "--quiet", "--format", "docker-archive", "-o"])
        .arg(&archive)
        .arg(TAG));
    let saved = dir.join("saved");
    std::fs::create_dir(&saved).unwrap();
    run(Command::new("tar")
        .arg("-xf")
        .arg(&archive)
        .arg("-C")
        .arg(&saved));
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(saved.join("manifest.json")).unwrap()).unwrap();
    std::fs::create_dir(rootfs).unwrap();
    for layer in manifest[0]["Layers"].as_array().unwrap() {
        let layer = saved.join(layer.as_str().unwrap());
        run(Command::new("tar")
            .arg("-xf")
            .arg(&layer)
            .arg("-C")
            .arg(rootfs));
    }
    let config = saved.join(manifest[0]["Config"].as_str().unwrap());
    serde_json::from_slice(&std::fs::read(config).unwrap()).unwrap()
}

/// Every file under `dir`, relative.
fn files(dir: &Path, under: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, under, out);
        } else {
            out.push(path.strip_prefix(under).unwrap().display().to_string());
        }
    }
}

#[test]
fn the_image_runs_its_entrypoint_from_its_own_root() {
    let uid = run(Command::new("id").arg("-u"));
    assert_eq!(
        String::from_utf8_lossy(&uid.stdout).trim(),
        "0",
        "chroot needs root"
    );
    let dir = tempfile::tempdir().unwrap();
    let rootfs = dir.path().join("rootfs");
    let config = build_and_unpack(dir.path(), &rootfs);
    assert_eq!(config["config"]["User"], "65532:65532");
    assert_eq!(
        config["config"]["Entrypoint"],
        serde_json::json!(ENTRYPOINT)
    );
    // Only the binary and its settings: no shell, no libc, no NSS module.
    let mut all = Vec::new();
    files(&rootfs, &rootfs, &mut all);
    all.sort();
    assert_eq!(
        all,
        ["etc/slidelog/settings.toml", "usr/local/bin/slidelog"]
    );

    let out = run(&mut in_image(
        &rootfs,
        &["/usr/local/bin/slidelog", "--version"],
    ));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("slidelog "));
    // The image listens on every address by default (127.0.0.1 inside a
    // container is unreachable from outside).
    let out = run(&mut in_image(
        &rootfs,
        &[ENTRYPOINT.as_slice(), &["--print-settings"]].concat(),
    ));
    let printed = String::from_utf8_lossy(&out.stdout);
    common::shows(
        &printed,
        &[
            "http = \"0.0.0.0:8080\"  # settings file",
            "grpc = \"0.0.0.0:8081\"  # settings file",
        ],
    );

    // The entrypoint serves (here on loopback ports: flags override the file).
    let args = [
        ENTRYPOINT.as_slice(),
        &[
            "--http",
            "127.0.0.1:0",
            "--grpc",
            "127.0.0.1:0",
            "--log-format",
            "text",
        ],
    ]
    .concat();
    let service = child::spawn(in_image(&rootfs, &args));
    let (status, body) = raw_http::check(
        &service.addr,
        r#"{"key":"image","max":1,"window_ms":60000}"#,
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = raw_http::check(
        &service.addr,
        r#"{"key":"image","max":1,"window_ms":60000}"#,
    );
    assert_eq!(status, 429, "{body}");
    drop(service);

    // A store named by host: resolved from the /etc/hosts a container
    // runtime mounts, by the glibc linked into the binary (no module to
    // load): the connection is refused, the name is not unknown.
    std::fs::write(rootfs.join("etc/hosts"), "127.0.0.1 store.image-test\n").unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let store = format!("redis://store.image-test:{closed}");
    let check = [
        "/usr/local/bin/slidelog",
        "check",
        "--store",
        &store,
        "k",
        "--max",
        "1",
        "--window",
        "1s",
    ];
    let out = in_image(&rootfs, &check).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("Connection refused"), "{stderr}");
    let _ = Command::new("podman")
        .args(["rmi", "--force", TAG])
        .output();
}

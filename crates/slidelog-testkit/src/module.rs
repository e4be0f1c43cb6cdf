//! Servers with slidelog's native module loaded (`--loadmodule`,
//! docs/design.md §4.3), and the module's `.so` itself.
//!
//! The `.so` is built here, once per test process, by running
//! `cargo build -p slidelog-module` (with `--release` when the tests are a
//! release build) with the cargo that built the tests, so a test never runs
//! against a stale module and works in a fresh clone. `SLIDELOG_MODULE_PATH`
//! names a prebuilt `.so` instead.

use crate::{RedisServer, ServerKind};
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// The file name cargo gives the module on Linux.
const FILE: &str = "libslidelog_module.so";

/// The path of the module's `.so`, built up to date on first use. Panics
/// with cargo's output when the build fails (it needs `clang` and
/// `libclang-dev`, which `scripts/test.sh` installs).
pub fn module_path() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(build).clone()
}

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn build() -> PathBuf {
    if let Some(path) = std::env::var_os("SLIDELOG_MODULE_PATH") {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "SLIDELOG_MODULE_PATH={} is not a file",
            path.display()
        );
        return path;
    }
    let release = !cfg!(debug_assertions);
    let mut cargo = Command::new(option_env!("CARGO").unwrap_or("cargo"));
    cargo
        .current_dir(workspace())
        .args(["build", "-p", "slidelog-module"]);
    if release {
        cargo.arg("--release");
    }
    let output = cargo.output().expect("run cargo to build slidelog-module");
    assert!(
        output.status.success(),
        "cargo build -p slidelog-module failed (bindgen needs clang and libclang-dev: \
         apt-get install -y clang libclang-dev, as scripts/test.sh does):\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target"));
    let path = target
        .join(if release { "release" } else { "debug" })
        .join(FILE);
    assert!(
        path.is_file(),
        "cargo built slidelog-module but {} is missing",
        path.display()
    );
    path
}

impl RedisServer {
    /// Starts a server of `kind` with the module loaded, plus `args`.
    pub fn start_with_module(kind: ServerKind, args: &[&str]) -> Self {
        let path = module_path();
        let mut all = vec!["--loadmodule", path.to_str().expect("a UTF-8 module path")];
        all.extend_from_slice(args);
        Self::start_kind_with_args(kind, &all)
    }
}

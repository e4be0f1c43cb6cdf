//! External programs that tests run (`promtool`, `prometheus`, `curl`):
//! found on `PATH`, or a panic that says what to install (the README's test
//! command installs them), never a silent skip.

use std::path::PathBuf;

/// The program `name` on `PATH`; panics naming the Debian package
/// `package` that provides it when it is missing.
pub fn require(name: &str, package: &str) -> PathBuf {
    find(name).unwrap_or_else(|| {
        panic!(
            "{name} is not installed: install it with `apt-get install -y {package}` \
             (./scripts/test.sh does this)"
        )
    })
}

/// The program `name` on `PATH`, if any.
pub fn find(name: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

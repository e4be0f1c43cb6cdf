//! From redis-rs errors to [`StoreError`]: transient failures (I/O, refused
//! or dropped connections, LOADING, TRYAGAIN, CLUSTERDOWN, MASTERDOWN,
//! READONLY, BUSY, timeouts) become [`StoreError::Unavailable`], so fail-open,
//! retries and readiness treat them as passing; a configuration the server
//! refuses (wrong password, unknown ACL user, NOPERM, a database index it
//! does not have, a failed TLS handshake) is [`StoreError::Misconfigured`],
//! never transient, whatever redis-rs wraps it in; everything else (a wrong
//! key type, a script error) is [`StoreError::Backend`].

use redis::{ErrorKind, RedisError, ServerErrorKind};
use slidelog_core::StoreError;

/// Server error codes that mean "not now" rather than "never".
const TRANSIENT_CODES: &[&str] = &[
    "LOADING",
    "TRYAGAIN",
    "CLUSTERDOWN",
    "MASTERDOWN",
    "READONLY",
    "BUSY",
];

/// What is misconfigured, when `err` says the server refuses this client as
/// configured; `None` for every other error.
pub fn misconfiguration(err: &RedisError) -> Option<&'static str> {
    if err.kind() == ErrorKind::AuthenticationFailed {
        return Some("authentication failed: wrong password or unknown ACL user");
    }
    match err.code() {
        Some("WRONGPASS") => {
            return Some("authentication failed: wrong password or unknown ACL user");
        }
        Some("NOAUTH") => return Some("the server requires a password and none was given"),
        Some("NOPERM") => {
            return Some("the ACL user lacks a permission slidelog needs (NOPERM)");
        }
        _ => {}
    }
    if err.kind() == ErrorKind::Server(ServerErrorKind::NoPerm) {
        return Some("the ACL user lacks a permission slidelog needs (NOPERM)");
    }
    let text = err.to_string();
    if text.contains("NOAUTH") || text.contains("Authentication required") {
        return Some("the server requires a password and none was given");
    }
    if text.contains("refused to switch database") || text.contains("DB index is out of range") {
        return Some("the database index in the URL does not exist on the server");
    }
    if is_tls_failure(err) {
        return Some("TLS handshake failed");
    }
    None
}

/// `err`'s message, preceded by what is misconfigured when it is a
/// misconfiguration, so that a refusal to start names its cause.
pub fn describe(err: &RedisError) -> String {
    match misconfiguration(err) {
        Some(cause) => format!("{cause} ({err})"),
        None => err.to_string(),
    }
}

/// True when `err` is a rustls handshake failure (a certificate the client
/// does not trust, a server that does not speak TLS, a protocol mismatch).
/// redis-rs wraps the I/O error in a way that hides rustls's type from a
/// downcast, so the message is what tells: these are rustls's own texts.
fn is_tls_failure(err: &RedisError) -> bool {
    if !err.is_io_error() && err.kind() != ErrorKind::Io {
        return false;
    }
    let text = err.to_string();
    [
        "invalid peer certificate",
        "received corrupt message",
        "peer is incompatible",
        "peer misbehaved",
        "received fatal alert",
        "cannot decrypt peer's message",
        "peer sent no certificates",
        "invalid dnsname",
    ]
    .iter()
    .any(|needle| text.contains(needle))
}

/// True when retrying later can succeed.
pub fn is_transient(err: &RedisError) -> bool {
    if misconfiguration(err).is_some() {
        return false;
    }
    if err.is_io_error() || err.is_timeout() || err.is_connection_dropped() {
        return true;
    }
    match err.kind() {
        ErrorKind::Io
        | ErrorKind::ClusterConnectionNotFound
        | ErrorKind::MasterNameNotFoundBySentinel
        | ErrorKind::NoValidReplicasFoundBySentinel => true,
        ErrorKind::Server(
            ServerErrorKind::BusyLoading
            | ServerErrorKind::TryAgain
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::MasterDown
            | ServerErrorKind::ReadOnly,
        ) => true,
        _ => err
            .code()
            .is_some_and(|code| TRANSIENT_CODES.contains(&code)),
    }
}

/// Maps a redis-rs error to the store's typed error. The message is
/// redis-rs's, which never contains the password.
pub fn to_store_error(err: RedisError) -> StoreError {
    if misconfiguration(&err).is_some() {
        return StoreError::Misconfigured(describe(&err));
    }
    if is_transient(&err) {
        StoreError::Unavailable(err.to_string())
    } else {
        StoreError::Backend(err.to_string())
    }
}

/// Runs `call` within `timeout` and maps its error: every store call goes
/// through here, so none can hang its caller.
pub(crate) async fn bounded<T>(
    timeout: std::time::Duration,
    call: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> Result<T, StoreError> {
    match tokio::time::timeout(timeout, call).await {
        Ok(result) => result.map_err(to_store_error),
        Err(_) => Err(StoreError::Timeout(timeout)),
    }
}

/// True when `value` says the server is a replica (a master demoted by a
/// failover): it refused a write, so nothing was recorded.
pub(crate) fn is_readonly(value: &redis::RedisResult<redis::Value>) -> bool {
    match value {
        Ok(redis::Value::ServerError(e)) => {
            e.kind() == Some(ServerErrorKind::ReadOnly) || e.code() == "READONLY"
        }
        Err(e) => e.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly),
        Ok(_) => false,
    }
}

/// `PING` over `conn` within `timeout`: the readiness check of every store.
pub(crate) async fn ping<C: redis::aio::ConnectionLike>(
    conn: &mut C,
    timeout: std::time::Duration,
) -> Result<(), StoreError> {
    let cmd = redis::cmd("PING");
    bounded(timeout, cmd.query_async::<String>(conn))
        .await
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_are_transient_and_type_errors_are_not() {
        let refused: RedisError =
            std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused").into();
        assert!(to_store_error(refused).is_transient());
        let wrong: RedisError = (ErrorKind::UnexpectedReturnType, "bad reply").into();
        assert!(!to_store_error(wrong).is_transient());
    }

    #[test]
    fn refused_configurations_are_misconfigurations() {
        let auth: RedisError = (
            ErrorKind::AuthenticationFailed,
            "Password authentication failed",
        )
            .into();
        let e = to_store_error(auth);
        assert!(e.is_misconfiguration() && !e.is_transient(), "{e}");
        assert!(e.to_string().contains("authentication failed"), "{e}");
        let db: RedisError = (
            ErrorKind::Server(ServerErrorKind::ResponseError),
            "Redis server refused to switch database",
            "ERR DB index is out of range".to_owned(),
        )
            .into();
        assert!(to_store_error(db).is_misconfiguration());
        let tls: RedisError =
            std::io::Error::new(std::io::ErrorKind::InvalidData, rustls::Error::DecryptError)
                .into();
        assert!(misconfiguration(&tls).is_some());
        assert!(!is_transient(&tls));
    }
}

//! From redis-rs errors to [`StoreError`]: transient failures (I/O, refused
//! or dropped connections, LOADING, TRYAGAIN, CLUSTERDOWN, MASTERDOWN,
//! READONLY, BUSY, timeouts) become [`StoreError::Unavailable`], so fail-open,
//! retries and readiness treat them as passing; everything else (a wrong key
//! type, a script error, bad credentials) is [`StoreError::Backend`].

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

/// True when retrying later can succeed.
pub fn is_transient(err: &RedisError) -> bool {
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
}

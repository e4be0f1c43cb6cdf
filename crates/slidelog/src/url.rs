//! Opening a store from its URL, the same in every subcommand and in the
//! library: `memory://` (default), `redis://…`, `rediss://…`, and (later)
//! `redis+cluster://…`, `redis+sentinel://…`.

use slidelog_core::Store;
use slidelog_memory::MemoryStore;
use std::sync::Arc;
use std::time::Duration;

/// Options shared by every store opened from a URL.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Upper bound on one store call (Redis stores). Default 100 ms.
    pub timeout: Duration,
    /// Key cap of the memory store. Default 1,000,000.
    pub memory_key_cap: usize,
    /// Prefix of Redis keys. Default `rate:sliding:`.
    pub key_prefix: String,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_millis(100),
            memory_key_cap: slidelog_memory::DEFAULT_KEY_CAP,
            key_prefix: "rate:sliding:".to_owned(),
        }
    }
}

/// A store URL that cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The scheme is not one slidelog knows.
    #[error(
        "unknown store URL scheme in {0:?}: use memory://, redis://, rediss://, redis+cluster:// or redis+sentinel://"
    )]
    UnknownScheme(String),
    /// The store could not be reached or configured.
    #[error("cannot open store {url}: {reason}")]
    Open {
        /// The URL with any password masked.
        url: String,
        /// What went wrong.
        reason: String,
    },
}

/// Opens the store that `url` names.
pub async fn open_store(url: &str, options: &StoreOptions) -> Result<Arc<dyn Store>, OpenError> {
    let scheme = url.split_once("://").map(|(s, _)| s).unwrap_or("");
    match scheme {
        "memory" => Ok(Arc::new(
            MemoryStore::new().with_key_cap(options.memory_key_cap),
        )),
        _ => Err(OpenError::UnknownScheme(mask_password(url))),
    }
}

/// `url` with the password (if any) replaced by `***`, for logs and errors.
pub fn mask_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            if userinfo.contains(':') {
                format!("{scheme}://{user}:***@{host}{path}")
            } else {
                format!("{scheme}://***@{host}{path}")
            }
        }
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_masked() {
        assert_eq!(
            mask_password("redis://user:secret@127.0.0.1:6379/0"),
            "redis://user:***@127.0.0.1:6379/0"
        );
        assert_eq!(mask_password("rediss://secret@h:1"), "rediss://***@h:1");
        assert_eq!(mask_password("redis://h:1"), "redis://h:1");
    }
}

//! The Redis keys of one log: the sorted set `<prefix><key>` and its weights
//! hash, which must live in the same Cluster slot so that one script can
//! touch both (docs/design.md §4).
//!
//! Redis Cluster hashes a key's *hash tag* when it has one (the bytes between
//! the first `{` and the first `}` after it, if not empty), else the whole
//! key. The weights key is built so that its tag hashes like the log's key:
//! - the log's key has a tag `T`: `{T}#w:<log key>`;
//! - it has none and holds no `}`: `{<log key>}#w` (its tag is the whole key);
//! - it has none but holds a `}` (so it cannot be a tag itself): `{S}#w:<log
//!   key>`, where `S` is a short string found to hash to the same slot.

use std::sync::LazyLock;

/// The key holding the receipt secret that instances sharing a Redis create
/// once and then all use (docs/design.md §4.6, "Signed receipts"). Outside
/// the default log prefix; it has no TTL (the one key slidelog writes
/// without one): instances that outlived a new secret would refuse the
/// receipts of those that made it.
pub const RECEIPT_SECRET_KEY: &str = "slidelog:receipt-secret";

use slidelog_core::slot::SLOTS;
pub use slidelog_core::slot::slot;

/// For every slot, a short decimal string that hashes to it.
static SLOT_TAGS: LazyLock<Vec<String>> = LazyLock::new(|| {
    let mut tags = vec![String::new(); SLOTS];
    let mut missing = SLOTS;
    let mut candidate = 0u64;
    while missing > 0 {
        let text = candidate.to_string();
        let s = slot(text.as_bytes()) as usize;
        if tags[s].is_empty() {
            tags[s] = text;
            missing -= 1;
        }
        candidate += 1;
    }
    tags
});

/// The key of the weights hash of the log at `log_key` (same slot): the
/// naming of [`slidelog_core::slot::weights_key`], with every slot's tag
/// found once.
pub fn weights_key(log_key: &[u8]) -> Vec<u8> {
    slidelog_core::slot::weights_key(log_key, |s| SLOT_TAGS[s as usize].as_bytes())
}

/// The key of the pending reservations of the log at `log_key` (same slot,
/// docs/design.md §4.7): the weights key's name with `#p` for `#w`
/// (`{<log key>}#p`, `{T}#p:<log key>`, `{S}#p:<log key>`).
pub fn pending_key(log_key: &[u8]) -> Vec<u8> {
    let mut key = weights_key(log_key);
    // The weights key is `{` tag `}#w…`, and a tag holds no `}`.
    if let Some(close) = key.iter().position(|&b| b == b'}') {
        key[close + 2] = b'p';
    }
    key
}

/// The weights key's name with `letter` for `w` (`{<log key>}#<letter>`,
/// `{T}#<letter>:<log key>`, `{S}#<letter>:<log key>`): a key in the log's slot.
fn sibling_key(log_key: &[u8], letter: u8) -> Vec<u8> {
    let mut key = weights_key(log_key);
    // The weights key is `{` tag `}#w…`, and a tag holds no `}`.
    if let Some(close) = key.iter().position(|&b| b == b'}') {
        key[close + 2] = letter;
    }
    key
}

/// The block key of the log at `log_key` (docs/design.md §5.4): a string
/// holding the block's reason, with the block's TTL, in the log's slot
/// (`{<log key>}#b`); the scripts derive it from the weights key the same way.
pub fn block_key(log_key: &[u8]) -> Vec<u8> {
    sibling_key(log_key, b'b')
}

/// The override key of the log at `log_key` (docs/design.md §5.4): a
/// string holding the encoded override, with its TTL, in the log's slot
/// (`{<log key>}#v`).
pub fn override_key(log_key: &[u8]) -> Vec<u8> {
    sibling_key(log_key, b'v')
}

/// The once key of the record `once_id` charged into the log at `log_key`
/// (same slot): [`slidelog_core::slot::once_key`].
pub fn once_key(log_key: &[u8], once_id: &str) -> Vec<u8> {
    slidelog_core::slot::once_key(log_key, once_id, |s| SLOT_TAGS[s as usize].as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_weights_key_shares_the_log_key_slot() {
        for key in [
            &b"rate:sliding:user123"[..],
            b"rate:sliding:{tenant}:user",
            b"rate:sliding:a}b",
            b"rate:sliding:{}x}",
            b"rate:sliding:{",
            b"}",
        ] {
            let w = weights_key(key);
            assert_eq!(slot(&w), slot(key), "{}", String::from_utf8_lossy(key));
            assert_ne!(w, key);
        }
        assert_eq!(
            weights_key(b"rate:sliding:u"),
            b"{rate:sliding:u}#w".to_vec()
        );
        assert_eq!(
            pending_key(b"rate:sliding:u"),
            b"{rate:sliding:u}#p".to_vec()
        );
        for key in [&b"rate:sliding:{t}:u"[..], b"rate:sliding:a}b", b"}"] {
            let p = pending_key(key);
            assert_eq!(slot(&p), slot(key));
            assert_ne!(p, weights_key(key));
        }
    }
}

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

/// Number of Cluster slots.
const SLOTS: usize = 16384;

/// The bytes Redis Cluster hashes for `key`.
fn hash_tag(key: &[u8]) -> Option<&[u8]> {
    let open = key.iter().position(|&b| b == b'{')?;
    let close = key[open + 1..].iter().position(|&b| b == b'}')?;
    (close > 0).then(|| &key[open + 1..open + 1 + close])
}

/// The Cluster slot of `key` (CRC16/XMODEM of its tag or of the whole key).
pub fn slot(key: &[u8]) -> u16 {
    let hashed = hash_tag(key).unwrap_or(key);
    crc16::State::<crc16::XMODEM>::calculate(hashed) % SLOTS as u16
}

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

/// The key of the weights hash of the log at `log_key` (same slot).
pub fn weights_key(log_key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(log_key.len() + 8);
    if let Some(tag) = hash_tag(log_key) {
        out.push(b'{');
        out.extend_from_slice(tag);
        out.extend_from_slice(b"}#w:");
        out.extend_from_slice(log_key);
    } else if !log_key.contains(&b'}') {
        out.push(b'{');
        out.extend_from_slice(log_key);
        out.extend_from_slice(b"}#w");
    } else {
        out.push(b'{');
        out.extend_from_slice(SLOT_TAGS[slot(log_key) as usize].as_bytes());
        out.extend_from_slice(b"}#w:");
        out.extend_from_slice(log_key);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis_cluster() {
        // Values from the Redis Cluster specification and CLUSTER KEYSLOT.
        assert_eq!(slot(b"123456789"), 0x31C3);
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
        assert_eq!(slot(b"foo{}{bar}"), slot(b"foo{}{bar}"));
        assert_eq!(slot(b"foo{{bar}}zap"), slot(b"{bar"));
    }

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
    }
}

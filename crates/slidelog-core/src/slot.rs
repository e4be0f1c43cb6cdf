//! Redis Cluster slots and the name of a log's weights key, shared by the
//! Redis store (which writes the key) and the native module (which deletes
//! it when it adopts a log): one definition, so the two never disagree
//! (docs/design.md §4).
//!
//! Redis Cluster hashes a key's *hash tag* when it has one (the bytes between
//! the first `{` and the first `}` after it, if not empty), else the whole
//! key. The weights key is built so that its tag hashes like the log's key:
//! - the log's key has a tag `T`: `{T}#w:<log key>`;
//! - it has none and holds no `}`: `{<log key>}#w` (its tag is the whole key);
//! - it has none but holds a `}` (so it cannot be a tag itself): `{S}#w:<log
//!   key>`, where `S` is a short string that hashes to the same slot.

/// Number of Cluster slots.
pub const SLOTS: usize = 16384;

/// The bytes Redis Cluster hashes for `key`: its tag, if it has one.
pub fn hash_tag(key: &[u8]) -> Option<&[u8]> {
    let open = key.iter().position(|&b| b == b'{')?;
    let close = key[open + 1..].iter().position(|&b| b == b'}')?;
    (close > 0).then(|| &key[open + 1..open + 1 + close])
}

/// The Cluster slot of `key` (CRC16/XMODEM of its tag or of the whole key).
pub fn slot(key: &[u8]) -> u16 {
    let hashed = hash_tag(key).unwrap_or(key);
    crc16::State::<crc16::XMODEM>::calculate(hashed) % SLOTS as u16
}

/// The key of the weights hash of the log at `log_key` (same slot).
/// `slot_tag` gives, for a slot, a short string that hashes to it; it is
/// asked only for a key without a tag that holds a `}`.
pub fn weights_key<S: AsRef<[u8]>>(log_key: &[u8], slot_tag: impl FnOnce(u16) -> S) -> Vec<u8> {
    let mut out = Vec::with_capacity(log_key.len() + 8);
    out.push(b'{');
    if let Some(tag) = hash_tag(log_key) {
        out.extend_from_slice(tag);
        out.extend_from_slice(b"}#w:");
        out.extend_from_slice(log_key);
    } else if !log_key.contains(&b'}') {
        out.extend_from_slice(log_key);
        out.extend_from_slice(b"}#w");
    } else {
        out.extend_from_slice(slot_tag(slot(log_key)).as_ref());
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
    fn weights_keys_by_layout() {
        let tag = |_| "7";
        assert_eq!(weights_key(b"a:u", tag), b"{a:u}#w");
        assert_eq!(weights_key(b"a:{t}:u", tag), b"{t}#w:a:{t}:u");
        assert_eq!(weights_key(b"a}b", tag), b"{7}#w:a}b");
    }
}

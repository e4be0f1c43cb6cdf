//! Redis Cluster slots and the names of a log's weights key and once keys,
//! shared by the
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
    companion_key(log_key, b"#w", slot_tag)
}

/// The key that marks the record `once_id` as charged once into the log at
/// `log_key` (same slot; docs/design.md §6, "Local answers"), named as the
/// weights key is with `#o:<once_id>` for `#w`: `{T}#o:<id>:<log key>`,
/// `{<log key>}#o:<id>` or `{S}#o:<id>:<log key>`.
pub fn once_key<S: AsRef<[u8]>>(
    log_key: &[u8],
    once_id: &str,
    slot_tag: impl FnOnce(u16) -> S,
) -> Vec<u8> {
    let mut suffix = b"#o:".to_vec();
    suffix.extend_from_slice(once_id.as_bytes());
    companion_key(log_key, &suffix, slot_tag)
}

/// A key in `log_key`'s slot ending its tag with `suffix`, as the module
/// doc describes.
fn companion_key<S: AsRef<[u8]>>(
    log_key: &[u8],
    suffix: &[u8],
    slot_tag: impl FnOnce(u16) -> S,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(log_key.len() + suffix.len() + 8);
    out.push(b'{');
    if let Some(tag) = hash_tag(log_key) {
        out.extend_from_slice(tag);
        out.push(b'}');
        out.extend_from_slice(suffix);
        out.push(b':');
        out.extend_from_slice(log_key);
    } else if !log_key.contains(&b'}') {
        out.extend_from_slice(log_key);
        out.push(b'}');
        out.extend_from_slice(suffix);
    } else {
        out.extend_from_slice(slot_tag(slot(log_key)).as_ref());
        out.push(b'}');
        out.extend_from_slice(suffix);
        out.push(b':');
        out.extend_from_slice(log_key);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn once_keys_share_the_log_key_slot_and_differ_from_the_weights_key() {
        let tag = |_| "x";
        for key in [&b"p:user"[..], b"p:{t}:u", b"p:a}b"] {
            let once = once_key(key, "ab12:7", |s| {
                // The one case asking for a tag: find a string of that slot.
                (0u32..)
                    .map(|n| n.to_string())
                    .find(|t| slot(t.as_bytes()) == s)
                    .unwrap()
            });
            assert_eq!(slot(&once), slot(key), "{}", String::from_utf8_lossy(key));
            assert_ne!(once, weights_key(key, tag));
        }
        assert_eq!(once_key(b"p:u", "i:1", tag), b"{p:u}#o:i:1".to_vec());
        assert_eq!(weights_key(b"p:u", tag), b"{p:u}#w".to_vec());
        assert_eq!(weights_key(b"p:{t}", tag), b"{t}#w:p:{t}".to_vec());
    }

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

//! The store key of a descriptor: stable, documented, one key per descriptor.
//!
//! ```text
//! envoy:<domain>:<key1>=<value1>:<key2>=<value2>…
//! ```
//!
//! Each part is percent-encoded so that `:`, `=` and `%` inside a domain, key
//! or value cannot make two descriptors share a key (`a:b=c` and `a=b:c` stay
//! apart); every other byte, UTF-8 included, is kept as is. The store adds its
//! own prefix (`rate:sliding:` for Redis), so the Redis key of
//! `domain: api`, `[(user, alice)]` is `rate:sliding:envoy:api:user=alice`.
//!
//! Because one descriptor is one key, a Redis Cluster never sees CROSSSLOT.
//!
//! A key longer than 512 bytes (the store's bound) is replaced, always the
//! same way, by `envoy:<domain>:#<32 hex digits>` — the XXH3-128 hash of the
//! full key — with the domain itself hashed too when even that is too long
//! (`envoy:#<hex>`). The hash is a fixed, published algorithm, so every
//! instance and every version of slidelog computes the same key.

use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use slidelog_core::MAX_KEY_BYTES;

/// Bytes escaped in every part of a key.
const ESCAPED: &AsciiSet = &CONTROLS.add(b'%').add(b':').add(b'=').add(b'#');

/// The key of one descriptor in `domain` (entries in request order).
pub fn descriptor_key<K: AsRef<str>, V: AsRef<str>>(domain: &str, entries: &[(K, V)]) -> String {
    let domain = escape(domain);
    let mut key = format!("envoy:{domain}");
    for (k, v) in entries {
        key.push(':');
        key.push_str(&escape(k.as_ref()));
        key.push('=');
        key.push_str(&escape(v.as_ref()));
    }
    if key.len() <= MAX_KEY_BYTES {
        return key;
    }
    let hash = xxhash_rust::xxh3::xxh3_128(key.as_bytes());
    let short = format!("envoy:{domain}:#{hash:032x}");
    if short.len() <= MAX_KEY_BYTES {
        short
    } else {
        format!("envoy:#{hash:032x}")
    }
}

fn escape(part: &str) -> String {
    utf8_percent_encode(part, ESCAPED).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_descriptors_read_naturally() {
        assert_eq!(
            descriptor_key("api", &[("user", "alice"), ("path", "/login")]),
            "envoy:api:user=alice:path=/login"
        );
        assert_eq!(descriptor_key("api", &[("k", "")]), "envoy:api:k=");
    }

    #[test]
    fn separators_are_escaped_so_keys_never_collide() {
        let a = descriptor_key("d", &[("a:b", "c")]);
        let b = descriptor_key("d", &[("a", "b:c")]);
        let c = descriptor_key("d", &[("a", "b"), ("c", "")]);
        assert_eq!(a, "envoy:d:a%3Ab=c");
        assert_eq!(b, "envoy:d:a=b%3Ac");
        assert_ne!(b, c);
        assert_eq!(descriptor_key("d:x", &[("k", "v")]), "envoy:d%3Ax:k=v");
        assert_eq!(descriptor_key("d", &[("k", "100%")]), "envoy:d:k=100%25");
        assert_eq!(descriptor_key("d", &[("k", "é")]), "envoy:d:k=é");
    }

    #[test]
    fn long_keys_are_hashed_deterministically() {
        let long = "v".repeat(600);
        let k1 = descriptor_key("api", &[("user", long.as_str())]);
        let k2 = descriptor_key("api", &[("user", long.as_str())]);
        let other = descriptor_key("api", &[("user", &long[1..])]);
        assert_eq!(k1, k2);
        assert_ne!(k1, other);
        assert!(k1.starts_with("envoy:api:#") && k1.len() == "envoy:api:#".len() + 32);
        let exact = descriptor_key("api", &[("u", "x".repeat(512 - "envoy:api:u=".len()))]);
        assert_eq!(exact.len(), 512);
        assert!(!exact.contains('#'));
        let huge_domain = "d".repeat(600);
        let k = descriptor_key(&huge_domain, &[("k", "v")]);
        assert!(k.starts_with("envoy:#") && k.len() == 7 + 32, "{k}");
    }
}

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
//! [`parse_descriptor_key`] reads a key back (for `slidelog inspect`, which
//! compares each key with its own rule).
//!
//! `share_threshold: true` on a wildcard makes every value it matches share
//! one log: that entry writes the configured pattern, stars included, in
//! place of the request's value ([`crate::config::Rule::store_key`]). With
//! `key: files, value: files/*`, both `files/a.pdf` and `files/b.csv` are
//! decided on `envoy:api:files=files/*`. A request whose value is literally
//! `files/*` matches that same rule, so it rightly shares the log too.
//!
//! A key longer than 512 bytes (the store's bound) is replaced, always the
//! same way, by `envoy:<domain>:#<32 hex digits>` — the XXH3-128 hash of the
//! full key — with the domain itself hashed too when even that is too long
//! (`envoy:#<hex>`). The hash is a fixed, published algorithm, so every
//! instance and every version of slidelog computes the same key.

use slidelog_core::MAX_KEY_BYTES;
use std::fmt::Write;

/// Returns the key of one descriptor in `domain` (entries in request order).
pub fn descriptor_key<K: AsRef<str>, V: AsRef<str>>(domain: &str, entries: &[(K, V)]) -> String {
    write_descriptor_key(
        domain,
        entries.iter().map(|(k, v)| (k.as_ref(), v.as_ref())),
    )
}

/// [`descriptor_key`] of `(key, value)` parts: one allocation, of the
/// key's length when nothing needs escaping (the common case), and no
/// intermediate strings.
pub(crate) fn write_descriptor_key<'a>(
    domain: &str,
    entries: impl Iterator<Item = (&'a str, &'a str)> + Clone,
) -> String {
    let len = entries
        .clone()
        .fold("envoy:".len() + domain.len(), |n, (k, v)| {
            n + k.len() + v.len() + 2
        });
    let mut key = String::with_capacity(len);
    write_descriptor_key_into(&mut key, domain, entries);
    key
}

/// [`write_descriptor_key`] into `key`, which is cleared first: a caller
/// that only borrows the key (the service copies it into the request's
/// inline storage) reuses one buffer and allocates nothing (measured: BENCHMARKS.md).
pub(crate) fn write_descriptor_key_into<'a>(
    key: &mut String,
    domain: &str,
    entries: impl Iterator<Item = (&'a str, &'a str)>,
) {
    key.clear();
    key.push_str("envoy:");
    escape_into(key, domain);
    for (k, v) in entries {
        key.push(':');
        escape_into(key, k);
        key.push('=');
        escape_into(key, v);
    }
    if key.len() <= MAX_KEY_BYTES {
        return;
    }
    let hash = xxhash_rust::xxh3::xxh3_128(key.as_bytes());
    key.clear();
    key.push_str("envoy:");
    escape_into(key, domain);
    let _ = write!(key, ":#{hash:032x}");
    if key.len() > MAX_KEY_BYTES {
        key.clear();
        let _ = write!(key, "envoy:#{hash:032x}");
    }
}

/// Returns the domain and `(key, value)` entries of a key that [`descriptor_key`]
/// wrote (without the store's prefix); `None` for a hashed key (`#…`, a
/// descriptor too long to spell out) or a key it did not write.
pub fn parse_descriptor_key(key: &str) -> Option<(String, Vec<(String, String)>)> {
    let mut parts = key.strip_prefix("envoy:")?.split(':');
    let domain = unescape(parts.next()?)?;
    let mut entries = Vec::new();
    for part in parts {
        let (k, v) = part.split_once('=')?;
        entries.push((unescape(k)?, unescape(v)?));
    }
    Some((domain, entries))
}

/// Undoes [`escape_into`]; `None` for a hashed part or a bad escape.
fn unescape(part: &str) -> Option<String> {
    if part.starts_with('#') {
        return None;
    }
    let bytes = part.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The bytes [`escape_into`] percent-encodes: `%`, `:`, `=`, `#` and the ASCII
/// controls (`0x00..=0x1F`, `0x7F`); one load per byte in the scan of a
/// part, not five comparisons (measured: BENCHMARKS.md).
const ESCAPED: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = matches!(c, b'%' | b':' | b'=' | b'#') || c.is_ascii_control();
        b += 1;
    }
    table
};

/// Appends `part` to `out` with `%`, `:`, `=`, `#` and the ASCII control
/// bytes percent-encoded, the rest kept: a part with nothing to escape is
/// copied whole.
fn escape_into(out: &mut String, part: &str) {
    // Every escaped character is ASCII, and no byte of a multi-byte UTF-8
    // character is: a byte scan finds the same ones as a char scan,
    // without decoding (measured: BENCHMARKS.md).
    if !part.bytes().any(|b| ESCAPED[usize::from(b)]) {
        out.push_str(part);
        return;
    }
    for c in part.chars() {
        if c.is_ascii() && ESCAPED[c as usize] {
            let _ = write!(out, "%{:02X}", c as u32);
        } else {
            out.push(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn escape(part: &str) -> String {
        let mut out = String::new();
        escape_into(&mut out, part);
        out
    }

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

    /// The byte scan that skips escaping finds exactly what a char scan
    /// finds (multi-byte characters, C1 controls and DEL included).
    #[test]
    fn parts_needing_no_escape_are_found_by_bytes_as_by_chars() {
        let by_chars = |part: &str| {
            part.chars()
                .map(|c| match c {
                    '%' | ':' | '=' | '#' => format!("%{:02X}", c as u32),
                    c if c.is_ascii_control() => format!("%{:02X}", c as u32),
                    c => c.to_string(),
                })
                .collect::<String>()
        };
        for part in [
            "plain", "é", "日本", "a:b", "x\u{7f}", "\u{1}", "日本=", "100%", "#", "\u{85}",
            "\u{9f}ab", "",
        ] {
            assert_eq!(escape(part), by_chars(part), "{part:?}");
        }
    }

    /// The table holds exactly the characters the escape is documented for.
    #[test]
    fn the_escape_table_is_the_documented_set() {
        for b in 0..=255u8 {
            let documented = matches!(b, b'%' | b':' | b'=' | b'#') || b.is_ascii_control();
            assert_eq!(ESCAPED[usize::from(b)], documented, "{b:#04x}");
        }
    }

    #[test]
    fn keys_read_back_as_written() {
        let entries = [("a:b", "c=d"), ("user", "100%"), ("k", "é#")];
        let key = descriptor_key("do:main", &entries);
        let (domain, back) = parse_descriptor_key(&key).unwrap();
        assert_eq!(domain, "do:main");
        let back: Vec<(&str, &str)> = back.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(back, entries);
        assert_eq!(parse_descriptor_key("envoy:api:#0123"), None);
        assert_eq!(parse_descriptor_key("envoy:#0123"), None);
        assert_eq!(parse_descriptor_key("user123"), None);
        assert_eq!(parse_descriptor_key("envoy:api:k=bad%4"), None);
        assert_eq!(unescape("a%3Ab%25c%3D").as_deref(), Some("a:b%c="));
    }

    /// Written into a reused buffer, a key is the one written fresh,
    /// whatever the buffer held before (a longer key, a hashed one).
    #[test]
    fn keys_written_into_a_reused_buffer_are_the_same() {
        let long = "v".repeat(600);
        let huge_domain = "d".repeat(600);
        let cases: [(&str, Vec<(&str, &str)>); 5] = [
            ("api", vec![("user", long.as_str())]),
            ("api", vec![("user", "alice"), ("path", "/login")]),
            (huge_domain.as_str(), vec![("k", "v")]),
            ("d:x", vec![("a:b", "c=d"), ("k", "é#")]),
            ("api", vec![("k", "")]),
        ];
        let mut buffer = String::new();
        for (domain, entries) in &cases {
            write_descriptor_key_into(&mut buffer, domain, entries.iter().copied());
            assert_eq!(buffer, descriptor_key(domain, entries));
        }
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

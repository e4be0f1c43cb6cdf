//! Signed receipts: a [`ReceiptKey`] seals a [`Receipt`] so that no caller
//! can forge one, and opens only what it (or an instance sharing its secret)
//! sealed (docs/design.md §4.6, "Signed receipts").
//!
//! A sealed receipt is the unsigned binary of `receipt.rs` with version 2,
//! followed by
//!
//! | bytes | what                                                           |
//! |-------|----------------------------------------------------------------|
//! | 8     | until: the receipt settles nothing after this Unix ms (LE)     |
//! | 8     | nonce: unique per receipt an instance issues (little endian)   |
//! | 16    | tag: SipHash-2-4-128 over every byte before it and the key     |
//!
//! The nonce and `until` make a receipt single-use: a store that settles it
//! keeps the nonce until `until` (plus a margin for clocks) and refuses it
//! again ([`crate::receipt::Spend`]); `until` bounds how long a store keeps
//! it, whatever the key's window.
//!
//! The tag covers the whole key (not only its 8-byte fingerprint), so a
//! receipt cannot be moved to another key whose fingerprint collides. The
//! nonce makes every receipt text distinct, even two of one millisecond and
//! one cost on one key (they share one merged record).

use crate::receipt::{Binary, Reader, Spend, TEXT_BYTES, binary_of};
use crate::{Receipt, ReceiptError, Request};
use siphasher::sip128::{Hasher128, SipHasher24};
use std::hash::Hasher;
use std::sync::atomic::{AtomicU64, Ordering};

/// The version byte of a sealed receipt.
pub const SEALED_VERSION: u8 = 2;
/// The fewest bytes a receipt secret may have.
pub const MIN_SECRET_BYTES: usize = 32;
/// How long a receipt settles after it was issued, by default: a response
/// (an LLM's stream) is over well within it.
pub const DEFAULT_RECEIPT_TTL_MS: u64 = 3_600_000;
/// The longest validity a key may give its receipts (a store keeps a settled
/// receipt's nonce that long).
pub const MAX_RECEIPT_TTL_MS: u64 = 86_400_000;
/// Bytes of the tag (128 bits: a forger's guess is right once in 2^128).
const TAG_BYTES: usize = 16;

/// A secret that seals and opens receipts. Instances that settle each other's
/// receipts must share it (a file, or a secret created once in a shared
/// store).
pub struct ReceiptKey {
    /// SipHash's 128-bit key: the first half of SHA-256 of the secret.
    key: [u8; 16],
    /// The next nonce: starts at a random value, so two instances (or two
    /// runs) do not issue the same sequence.
    next_nonce: AtomicU64,
    /// How long a receipt settles after it is sealed.
    ttl_ms: u64,
    /// The issue time of every receipt, for tests that compare texts.
    fixed_now_ms: Option<u64>,
}

impl std::fmt::Debug for ReceiptKey {
    /// Never prints the secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReceiptKey(<secret>)")
    }
}

/// A receipt secret that is too short.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("receipt secret must be at least {MIN_SECRET_BYTES} bytes, got {got}")]
pub struct SecretTooShort {
    /// Its length in bytes.
    pub got: usize,
}

/// SipHash's key from a secret of any length: SHA-256, first 16 bytes.
fn derive_key(secret: &[u8]) -> [u8; 16] {
    let digest = ring::digest::digest(&ring::digest::SHA256, secret);
    let mut key = [0u8; 16];
    key.copy_from_slice(&digest.as_ref()[..16]);
    key
}

fn random_u64() -> u64 {
    let mut bytes = [0u8; 8];
    // The system's random source does not fail on Linux once booted; if it
    // did, the nonces would only start at 0 (they stay unique per process,
    // and the tag does not depend on their being secret).
    let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes);
    u64::from_le_bytes(bytes)
}

impl ReceiptKey {
    /// A key from a shared secret of at least [`MIN_SECRET_BYTES`] bytes.
    pub fn from_secret(secret: &[u8]) -> Result<Self, SecretTooShort> {
        if secret.len() < MIN_SECRET_BYTES {
            return Err(SecretTooShort { got: secret.len() });
        }
        Ok(Self {
            key: derive_key(secret),
            next_nonce: AtomicU64::new(random_u64()),
            ttl_ms: DEFAULT_RECEIPT_TTL_MS,
            fixed_now_ms: None,
        })
    }

    /// A key whose nonces start at `first_nonce`: for tests that compare
    /// the texts of two keys byte for byte (nonces are otherwise random).
    #[doc(hidden)]
    pub fn with_first_nonce(secret: &[u8], first_nonce: u64) -> Result<Self, SecretTooShort> {
        let mut key = Self::from_secret(secret)?;
        key.next_nonce.store(first_nonce, Ordering::Relaxed);
        key.fixed_now_ms = Some(1_767_225_600_000);
        Ok(key)
    }

    /// The same key, its receipts settling for `ttl_ms` after their issue
    /// (1 ms ..= [`MAX_RECEIPT_TTL_MS`]; [`DEFAULT_RECEIPT_TTL_MS`] by
    /// default). `None` outside that range.
    pub fn with_ttl_ms(mut self, ttl_ms: u64) -> Option<Self> {
        (1..=MAX_RECEIPT_TTL_MS).contains(&ttl_ms).then(|| {
            self.ttl_ms = ttl_ms;
            self
        })
    }

    /// How long its receipts settle after their issue.
    pub fn ttl_ms(&self) -> u64 {
        self.ttl_ms
    }

    fn now_ms(&self) -> u64 {
        self.fixed_now_ms.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64)
        })
    }

    /// A key from a fresh random secret: receipts it seals open only with
    /// this key (one process, until it exits).
    pub fn random() -> Self {
        Self::from_secret(&Self::random_secret()).unwrap_or_else(|_| unreachable!())
    }

    /// A fresh random secret of 32 bytes (to store where instances share it).
    pub fn random_secret() -> [u8; MIN_SECRET_BYTES] {
        let mut secret = [0u8; MIN_SECRET_BYTES];
        for chunk in secret.chunks_mut(8) {
            chunk.copy_from_slice(&random_u64().to_le_bytes());
        }
        secret
    }

    /// The tag of `body` (every byte before the tag, which parses one way
    /// only) followed by the key's bytes.
    fn tag(&self, body: &[u8], key: &str) -> [u8; TAG_BYTES] {
        let mut hasher = SipHasher24::new_with_key(&self.key);
        hasher.write(body);
        hasher.write(key.as_bytes());
        hasher.finish128().as_bytes()
    }

    /// Passes the sealed text of `receipt`, issued for `key`, to `write`
    /// without allocating (an answer copies it straight into its buffer).
    pub fn seal_with<R>(&self, receipt: &Receipt, key: &str, write: impl FnOnce(&str) -> R) -> R {
        let mut binary = Binary::new();
        receipt.write_versioned(SEALED_VERSION, &mut binary);
        binary.put((self.now_ms() + self.ttl_ms).to_le_bytes());
        binary.put(
            self.next_nonce
                .fetch_add(1, Ordering::Relaxed)
                .to_le_bytes(),
        );
        let tag = self.tag(binary.as_slice(), key);
        binary.put(tag);
        binary.text_with(write)
    }

    /// The sealed text of `receipt`, issued for `key`.
    pub fn seal(&self, receipt: &Receipt, key: &str) -> String {
        self.seal_with(receipt, key, str::to_owned)
    }

    /// The sealed text of `request`'s record, when `record` names one.
    pub fn issue(&self, request: &Request, record: Option<crate::RecordRef>) -> Option<String> {
        record.map(|r| self.seal(&Receipt::new(request, r), request.key()))
    }

    /// Opens `text` for `request`: its tag must match (a sealed receipt
    /// this key issued for `request`'s key), then its fingerprints
    /// ([`Receipt::verify`]), then its validity ([`ReceiptError::Expired`]).
    /// An unsigned receipt is [`ReceiptError::Unsigned`]. The receipt
    /// returned carries its [`Spend`] for the store.
    pub fn open(&self, text: &str, request: &Request) -> Result<Receipt, ReceiptError> {
        let mut buf = [0u8; TEXT_BYTES];
        let bytes = binary_of(text, &mut buf)?;
        match bytes.first() {
            Some(&crate::receipt::RECEIPT_VERSION) => return Err(ReceiptError::Unsigned),
            Some(&SEALED_VERSION) => {}
            Some(&got) => return Err(ReceiptError::Version { got }),
            None => return Err(ReceiptError::Malformed("truncated")),
        }
        let signed = bytes
            .len()
            .checked_sub(TAG_BYTES)
            .filter(|&n| n > 1 + 16)
            .ok_or(ReceiptError::Malformed("truncated"))?;
        let expected = self.tag(&bytes[..signed], request.key());
        // Constant time: a caller must not learn the tag byte by byte.
        if !bool::from(subtle::ConstantTimeEq::ct_eq(
            &expected[..],
            &bytes[signed..],
        )) {
            return Err(ReceiptError::Forged);
        }
        let mut r = Reader(&bytes[1..signed - 16]);
        let receipt = Receipt::read_body(&mut r)?;
        if !r.0.is_empty() {
            return Err(ReceiptError::Malformed("trailing bytes"));
        }
        receipt.verify(request)?;
        let mut tail = Reader(&bytes[signed - 16..signed]);
        let until_ms = u64::from_le_bytes(tail.array()?);
        let nonce = u64::from_le_bytes(tail.array()?);
        if until_ms < self.now_ms() {
            return Err(ReceiptError::Expired);
        }
        Ok(receipt.with_spend(Some(Spend { nonce, until_ms })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Limit, RecordRef};
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;

    fn request(key: &str, costs: &[u64]) -> Request {
        let limits = vec![
            Limit::new(10, 60_000).unwrap(),
            Limit::new(100, 60_000).unwrap(),
        ];
        Request::usage(key, limits, costs.to_vec()).unwrap()
    }

    fn sealed(key: &ReceiptKey, r: &Request) -> String {
        key.issue(
            r,
            Some(RecordRef {
                ts: 1_700_000_000_000,
                id: None,
            }),
        )
        .unwrap()
    }

    #[test]
    fn a_sealed_receipt_opens_for_its_key_only() {
        let key = ReceiptKey::random();
        let alice = request("alice", &[1, 40]);
        let text = sealed(&key, &alice);
        let opened = key.open(&text, &alice).unwrap();
        assert_eq!(
            (opened.ts(), opened.costs()),
            (1_700_000_000_000, &[1, 40][..])
        );
        assert_eq!(
            key.open(&text, &request("bob", &[1, 40])),
            Err(ReceiptError::Forged)
        );
        let other = ReceiptKey::random();
        assert_eq!(other.open(&text, &alice), Err(ReceiptError::Forged));
    }

    #[test]
    fn a_shared_secret_opens_another_instances_receipts() {
        let secret = ReceiptKey::random_secret();
        let (a, b) = (
            ReceiptKey::from_secret(&secret).unwrap(),
            ReceiptKey::from_secret(&secret).unwrap(),
        );
        let r = request("k", &[2]);
        assert!(b.open(&sealed(&a, &r), &r).is_ok());
        assert_eq!(
            ReceiptKey::from_secret(&secret[..31]).unwrap_err(),
            SecretTooShort { got: 31 }
        );
    }

    #[test]
    fn every_receipt_text_is_distinct_and_any_changed_byte_is_forged() {
        let key = ReceiptKey::random();
        let r = request("k", &[1]);
        let (one, two) = (sealed(&key, &r), sealed(&key, &r));
        assert_ne!(
            one, two,
            "the nonce makes two receipts of one record distinct"
        );
        let bytes = URL_SAFE_NO_PAD.decode(&one).unwrap();
        for at in 1..bytes.len() {
            let mut changed = bytes.clone();
            changed[at] ^= 0x01;
            let got = key.open(&URL_SAFE_NO_PAD.encode(&changed), &r);
            assert!(got.is_err(), "byte {at} changed and still opened");
        }
    }

    #[test]
    fn an_unsigned_receipt_is_refused_by_name() {
        let key = ReceiptKey::random();
        let r = request("k", &[1]);
        let unsigned = Receipt::new(&r, RecordRef { ts: 5, id: None }).encode();
        assert_eq!(key.open(&unsigned, &r), Err(ReceiptError::Unsigned));
        assert!(matches!(
            key.open("", &r),
            Err(ReceiptError::Length { got: 0 })
        ));
        assert!(matches!(
            key.open("AgA", &r),
            Err(ReceiptError::Malformed(_))
        ));
    }

    #[test]
    fn a_receipt_settles_within_its_validity_only() {
        let r = request("k", &[1]);
        let key = ReceiptKey::random().with_ttl_ms(1).unwrap();
        let text = sealed(&key, &r);
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert_eq!(key.open(&text, &r), Err(ReceiptError::Expired));
        let key = ReceiptKey::random();
        let spend = key.open(&sealed(&key, &r), &r).unwrap().spend().unwrap();
        assert!(spend.until_ms > 1_767_225_600_000);
        assert!(ReceiptKey::random().with_ttl_ms(0).is_none());
        assert!(
            ReceiptKey::random()
                .with_ttl_ms(MAX_RECEIPT_TTL_MS + 1)
                .is_none()
        );
    }

    #[test]
    fn the_debug_form_hides_the_secret() {
        assert_eq!(
            format!("{:?}", ReceiptKey::random()),
            "ReceiptKey(<secret>)"
        );
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_text_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let key = ReceiptKey::random();
            let text = URL_SAFE_NO_PAD.encode(&bytes);
            let _ = key.open(&text, &request("k", &[1]));
        }
    }
}

//! Receipts: the opaque string an admitted check answers, naming its record
//! so that a later settle can change that record's costs (docs/design.md §4.6).
//!
//! A receipt is base64url (no padding) of a small binary:
//!
//! | bytes   | what                                                          |
//! |---------|---------------------------------------------------------------|
//! | 1       | version (1)                                                   |
//! | 1       | flags: bit 0 a record id follows; bits 1-4 the cost count - 1 |
//! | varint  | the record's timestamp (Unix ms, at most [`MAX_NOW_MS`])      |
//! | varint… | the record's costs (one for every limit, or one per limit)    |
//! | 8       | fingerprint of the key (FNV-1a 64, little endian)             |
//! | 4       | fingerprint of the limits' count and windows                  |
//! | 16      | the store's record id (the Redis member's ULID), when flagged |
//!
//! The fingerprints are not a secret: they catch a receipt used with another
//! key, or with limits other than those the record was counted under (whose
//! costs are matched by position), before any store is asked. Two records of
//! one key with the same timestamp and costs are interchangeable, so a store
//! without record ids settles either. Decoding never panics: every length
//! is bounded, every malformed input is a [`ReceiptError`].

use crate::{Limit, MAX_COST, MAX_LIMITS, MAX_NOW_MS, Request};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use smallvec::SmallVec;

/// The receipt format this build writes and reads.
pub const RECEIPT_VERSION: u8 = 1;
/// The most settled receipts one key keeps (16 bytes each): past it, a
/// settle of that key is refused until the oldest have expired.
pub const MAX_SPENT: usize = 100_000;

/// The longest receipt text accepted (a receipt of 16 costs of 10,000,000
/// and a record id is about 110 characters).
pub const MAX_RECEIPT_CHARS: usize = 272;

/// Where a store keeps a record it just appended: the name a receipt needs
/// beside the request (which gives the key, the limits and the costs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RecordRef {
    /// The record's timestamp (Unix ms): the `now` the decision used.
    pub ts: u64,
    /// A store-specific id of the record: the ULID of a Redis member; `None`
    /// in a store that finds a record by its timestamp and costs.
    pub id: Option<u128>,
}

/// A decoded receipt: which record of which key, with which costs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    ts: u64,
    costs: SmallVec<[u64; 2]>,
    key_fingerprint: u64,
    limits_fingerprint: u32,
    id: Option<u128>,
    /// A sealed receipt's single use: its nonce and the time (Unix ms) until
    /// which it may settle (crate::seal). `None` for the unsigned form.
    spend: Option<Spend>,
}

/// What makes a sealed receipt single-use: a store that settles it keeps
/// the nonce until `until_ms` and refuses it again (docs/design.md §4.6,
/// "Single use").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Spend {
    /// Unique per receipt an instance issues.
    pub nonce: u64,
    /// The receipt settles nothing after this time (Unix ms).
    pub until_ms: u64,
}

/// Why a receipt text cannot settle a request. The HTTP field is `receipt`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReceiptError {
    /// Longer than [`MAX_RECEIPT_CHARS`], or empty.
    #[error("receipt must be 1 to {MAX_RECEIPT_CHARS} characters, got {got}")]
    Length {
        /// Its length in bytes.
        got: usize,
    },
    /// Not a receipt this service wrote: not base64url, truncated, trailing
    /// bytes, or a value out of bounds.
    #[error("receipt is malformed ({0}); pass the receipt a check answered, unchanged")]
    Malformed(&'static str),
    /// A version this build does not read.
    #[error("receipt has version {got}; this build reads version {RECEIPT_VERSION}")]
    Version {
        /// The version byte.
        got: u8,
    },
    /// An unsigned receipt (version 1, issued before receipts were signed)
    /// where a signed one is required.
    #[error(
        "receipt is unsigned (version 1, issued before receipts were signed); settle with a receipt this service issued since"
    )]
    Unsigned,
    /// The signature does not match: not issued by an instance sharing this
    /// receipt secret, or issued for another key, or altered.
    #[error(
        "receipt's signature does not match: it was not issued by this service (or one sharing its receipt secret) for this key, or was altered"
    )]
    Forged,
    /// The receipt names a record of another key.
    #[error("receipt was issued for another key; settle it with the key its check used")]
    OtherKey,
    /// The receipt was settled already: a receipt settles once (the
    /// settle's answer carries the next one).
    #[error("receipt was already settled; settle with the receipt the last settle answered")]
    Spent,
    /// The receipt is past its validity.
    #[error(
        "receipt has expired (a receipt settles within its validity after its check); the record keeps its costs"
    )]
    Expired,
    /// The key holds as many settled receipts as it may keep.
    #[error(
        "too many settles on this key within the receipts' validity ({MAX_SPENT} at most); retry later"
    )]
    TooManySettles,
    /// The request's limits are not those the record was counted under
    /// (their number or windows differ).
    #[error(
        "receipt was issued under other limits (their number or windows differ); settle with the check's limits"
    )]
    OtherLimits,
}

/// FNV-1a, 64 bits: stable across builds and platforms (the receipt is read
/// by other processes), and enough to tell keys apart by accident.
fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The fingerprint of a key.
pub fn key_fingerprint(key: &str) -> u64 {
    fnv1a(key.bytes())
}

/// The fingerprint of limits as a record depends on them: their number and
/// windows, by position (not their `max` or names, which an operator may
/// change without changing what a record means).
pub fn limits_fingerprint(limits: &[Limit]) -> u32 {
    let bytes = limits.iter().flat_map(|l| l.window_ms().to_le_bytes());
    let h = fnv1a(std::iter::once(limits.len() as u8).chain(bytes));
    (h ^ (h >> 32)) as u32
}

impl Receipt {
    /// The receipt of the record `record` appended for `request`.
    pub fn new(request: &Request, record: RecordRef) -> Self {
        Self {
            ts: record.ts,
            costs: SmallVec::from_slice(request.costs()),
            key_fingerprint: key_fingerprint(request.key()),
            limits_fingerprint: limits_fingerprint(request.limits()),
            id: record.id,
            spend: None,
        }
    }

    /// The receipt text of `request`'s record, when `record` names one.
    pub fn issue(request: &Request, record: Option<RecordRef>) -> Option<String> {
        record.map(|r| Self::new(request, r).encode())
    }

    /// The record's timestamp (Unix ms).
    pub fn ts(&self) -> u64 {
        self.ts
    }

    /// The record's costs as it lists them: one for every limit, or one per limit.
    pub fn costs(&self) -> &[u64] {
        &self.costs
    }

    /// The record's cost against the limit at `position`.
    pub fn cost_for(&self, position: usize) -> u64 {
        self.costs[position.min(self.costs.len() - 1)]
    }

    /// The single use of a sealed receipt: its nonce and validity.
    pub fn spend(&self) -> Option<Spend> {
        self.spend
    }

    /// The same receipt with `spend` (a sealed receipt as opened, or one a
    /// store command received with its nonce).
    pub fn with_spend(mut self, spend: Option<Spend>) -> Self {
        self.spend = spend;
        self
    }

    /// The store's record id, when the store gave one.
    pub fn id(&self) -> Option<u128> {
        self.id
    }

    /// Checks that this receipt may settle `request`: same key, same limits
    /// (number and windows).
    pub fn verify(&self, request: &Request) -> Result<(), ReceiptError> {
        if self.key_fingerprint != key_fingerprint(request.key()) {
            return Err(ReceiptError::OtherKey);
        }
        let per_limit = self.costs.len() > 1 && self.costs.len() != request.limits().len();
        if per_limit || self.limits_fingerprint != limits_fingerprint(request.limits()) {
            return Err(ReceiptError::OtherLimits);
        }
        Ok(())
    }

    /// Decodes `text` and [`verify`](Self::verify)s it against `request`.
    pub fn for_request(text: &str, request: &Request) -> Result<Self, ReceiptError> {
        let receipt = Self::decode(text)?;
        receipt.verify(request)?;
        Ok(receipt)
    }

    /// The receipt's text: base64url, no padding.
    pub fn encode(&self) -> String {
        self.encode_with(str::to_owned)
    }

    /// Passes the receipt's text ([`encode`](Self::encode)'s, byte for
    /// byte) to `write` without allocating: the binary and its base64url
    /// are built on the stack, so an answer can copy the text straight into
    /// its own buffer.
    pub fn encode_with<R>(&self, write: impl FnOnce(&str) -> R) -> R {
        let mut binary = Binary::new();
        self.write_binary(&mut binary);
        binary.text_with(write)
    }

    /// Writes the receipt's binary (the table atop this module) into `out`.
    fn write_binary(&self, out: &mut Binary) {
        self.write_versioned(RECEIPT_VERSION, out);
    }

    /// The binary with `version` as its first byte: the unsigned body, which
    /// a sealed receipt (crate::seal) extends with its nonce and tag.
    pub(crate) fn write_versioned(&self, version: u8, out: &mut Binary) {
        let count = (self.costs.len() - 1) as u8;
        out.put([version, u8::from(self.id.is_some()) | (count << 1)]);
        out.varint(self.ts);
        for &cost in &self.costs {
            out.varint(cost);
        }
        out.put(self.key_fingerprint.to_le_bytes());
        out.put(self.limits_fingerprint.to_le_bytes());
        if let Some(id) = self.id {
            out.put(id.to_le_bytes());
        }
    }

    /// Decodes a receipt text; never panics.
    pub fn decode(text: &str) -> Result<Self, ReceiptError> {
        let mut buf = [0u8; TEXT_BYTES];
        let mut r = Reader(binary_of(text, &mut buf)?);
        let version = r.byte()?;
        if version != RECEIPT_VERSION {
            return Err(ReceiptError::Version { got: version });
        }
        let receipt = Self::read_body(&mut r)?;
        if !r.0.is_empty() {
            return Err(ReceiptError::Malformed("trailing bytes"));
        }
        Ok(receipt)
    }

    /// Reads the body that follows the version byte (flags to record id);
    /// never panics.
    pub(crate) fn read_body(r: &mut Reader<'_>) -> Result<Self, ReceiptError> {
        let flags = r.byte()?;
        if flags >> 5 != 0 {
            return Err(ReceiptError::Malformed("unknown flags"));
        }
        let count = usize::from((flags >> 1) & 0x0f) + 1;
        let ts = r.varint()?;
        if ts > MAX_NOW_MS {
            return Err(ReceiptError::Malformed("timestamp out of range"));
        }
        let mut costs = SmallVec::with_capacity(count.min(MAX_LIMITS));
        for _ in 0..count {
            let cost = r.varint()?;
            if cost > MAX_COST {
                return Err(ReceiptError::Malformed("cost out of range"));
            }
            costs.push(cost);
        }
        if costs.iter().all(|&c| c == 0) {
            return Err(ReceiptError::Malformed("a record of no cost"));
        }
        let key_fingerprint = u64::from_le_bytes(r.array()?);
        let limits_fingerprint = u32::from_le_bytes(r.array()?);
        let id = (flags & 1 == 1)
            .then(|| r.array().map(u128::from_le_bytes))
            .transpose()?;
        Ok(Self {
            ts,
            costs,
            key_fingerprint,
            limits_fingerprint,
            id,
            spend: None,
        })
    }
}

/// The most bytes a receipt's binary can take, whatever its values: the
/// version and flags, a timestamp and up to [`MAX_LIMITS`] costs of at most
/// 10 LEB128 bytes each (any `u64`), the fingerprints and a record id.
/// A sealed receipt adds its validity, nonce and tag (crate::seal).
pub(crate) const MAX_BINARY: usize = 2 + 10 + MAX_LIMITS * 10 + 8 + 4 + 16 + 8 + 8 + 16;

/// A receipt's binary being written, on the stack: a plain array and its
/// length (a `SmallVec` checked at every byte whether it had spilled, and
/// was copied out whole, at a cost measured in callgrind). A receipt holds at most [`MAX_LIMITS`]
/// costs (a request's, or a decoded count of 4 bits), so it never fills.
pub(crate) struct Binary {
    bytes: [u8; MAX_BINARY],
    len: usize,
}

impl Binary {
    pub(crate) fn new() -> Self {
        Self {
            bytes: [0; MAX_BINARY],
            len: 0,
        }
    }

    /// Appends a fixed number of bytes (one store each for the fingerprints).
    pub(crate) fn put<const N: usize>(&mut self, more: [u8; N]) {
        let end = self.len + N;
        self.bytes[self.len..end].copy_from_slice(&more);
        self.len = end;
    }

    fn push(&mut self, byte: u8) {
        self.bytes[self.len] = byte;
        self.len += 1;
    }

    /// LEB128: 7 bits a byte, low first.
    fn varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.push((value as u8) | 0x80);
            value >>= 7;
        }
        self.push(value as u8);
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// Passes the binary's text (base64url, no padding) to `write`, built
    /// on the stack. Every receipt of bounded values fits (a sealed one at
    /// most 198 bytes, 264 characters); a larger one takes the heap rather
    /// than fail.
    pub(crate) fn text_with<R>(&self, write: impl FnOnce(&str) -> R) -> R {
        let binary = self.as_slice();
        let mut text = [0u8; MAX_RECEIPT_CHARS];
        match URL_SAFE_NO_PAD.encode_slice(binary, &mut text) {
            Ok(len) => match std::str::from_utf8(&text[..len]) {
                Ok(text) => write(text),
                Err(_) => write(&URL_SAFE_NO_PAD.encode(binary)),
            },
            Err(_) => write(&URL_SAFE_NO_PAD.encode(binary)),
        }
    }
}

/// Bytes that hold the binary of any receipt text accepted.
pub(crate) const TEXT_BYTES: usize = MAX_RECEIPT_CHARS * 3 / 4;

/// The binary of a receipt text (unsigned or sealed), decoded into `buf`:
/// a length out of bounds or bad base64 is an error, never a panic.
pub(crate) fn binary_of<'a>(
    text: &str,
    buf: &'a mut [u8; TEXT_BYTES],
) -> Result<&'a [u8], ReceiptError> {
    if text.is_empty() || text.len() > MAX_RECEIPT_CHARS {
        return Err(ReceiptError::Length { got: text.len() });
    }
    let len = URL_SAFE_NO_PAD
        .decode_slice(text, buf)
        .map_err(|_| ReceiptError::Malformed("not base64url"))?;
    Ok(&buf[..len])
}

/// A cursor over a receipt's bytes.
pub(crate) struct Reader<'a>(pub(crate) &'a [u8]);

impl Reader<'_> {
    pub(crate) fn byte(&mut self) -> Result<u8, ReceiptError> {
        let (&first, rest) = self
            .0
            .split_first()
            .ok_or(ReceiptError::Malformed("truncated"))?;
        self.0 = rest;
        Ok(first)
    }

    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], ReceiptError> {
        if self.0.len() < N {
            return Err(ReceiptError::Malformed("truncated"));
        }
        let (head, rest) = self.0.split_at(N);
        self.0 = rest;
        Ok(head.try_into().unwrap_or([0; N]))
    }

    /// A LEB128 value of at most 8 bytes (56 bits: every bounded value fits).
    fn varint(&mut self) -> Result<u64, ReceiptError> {
        let mut value = 0u64;
        for shift in (0..56).step_by(7) {
            let b = self.byte()?;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(ReceiptError::Malformed("number too long"))
    }
}

#[cfg(test)]
impl Receipt {
    /// The binary as a `Vec`, for the tests.
    fn binary(&self) -> Vec<u8> {
        let mut out = Binary::new();
        self.write_binary(&mut out);
        out.as_slice().to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(key: &str, costs: &[u64]) -> Request {
        let limits = vec![
            Limit::new(10, 60_000).unwrap(),
            Limit::new(1_000, 60_000).unwrap(),
        ];
        Request::with_costs(key, limits, costs.to_vec()).unwrap()
    }

    #[test]
    fn a_receipt_round_trips_and_verifies_only_for_its_key_and_limits() {
        let r = request("user-1", &[1, 400]);
        for id in [None, Some(u128::MAX - 7)] {
            let text = Receipt::issue(
                &r,
                Some(RecordRef {
                    ts: 1_700_000_000_123,
                    id,
                }),
            )
            .unwrap();
            assert!(text.len() < 64, "{text}");
            let back = Receipt::for_request(&text, &r).unwrap();
            assert_eq!(
                (back.ts(), back.costs(), back.id()),
                (1_700_000_000_123, &[1, 400][..], id)
            );
            assert_eq!(
                Receipt::for_request(&text, &request("user-2", &[1, 1])),
                Err(ReceiptError::OtherKey)
            );
            let other = Request::new("user-1", vec![Limit::new(10, 1_000).unwrap()], 1).unwrap();
            assert_eq!(
                Receipt::for_request(&text, &other),
                Err(ReceiptError::OtherLimits)
            );
        }
    }

    #[test]
    fn the_text_is_the_format_s_byte_for_byte() {
        // Independently computed (base64url of the table atop the module).
        let r = request("user-1", &[1, 400]);
        let ts = 1_700_000_000_123;
        let text = |id| Receipt::new(&r, RecordRef { ts, id }).encode();
        assert_eq!(text(None), "AQL70JX_vDEBkAPUS0p1qqJL-HkMcaE");
        assert_eq!(
            text(Some(u128::MAX - 7)),
            "AQP70JX_vDEBkAPUS0p1qqJL-HkMcaH4____________________"
        );
        // The largest receipt (16 costs of MAX_COST, the latest timestamp,
        // a record id) and small ones: the stack text is the heap text.
        let limits = vec![Limit::new(MAX_COST, 60_000).unwrap(); MAX_LIMITS];
        let shapes = [
            Request::new("k", vec![Limit::new(1, 1).unwrap()], 1).unwrap(),
            r.clone(),
            Request::with_costs("k".repeat(300), limits, vec![MAX_COST; MAX_LIMITS]).unwrap(),
        ];
        for request in &shapes {
            for id in [None, Some(0), Some(u128::MAX)] {
                for ts in [0, 1, MAX_NOW_MS] {
                    let receipt = Receipt::new(request, RecordRef { ts, id });
                    let heap = URL_SAFE_NO_PAD.encode(receipt.binary());
                    assert_eq!(receipt.encode(), heap);
                    assert_eq!(receipt.encode_with(|t| t.len()), heap.len());
                    assert!(heap.len() <= MAX_RECEIPT_CHARS);
                    assert_eq!(Receipt::decode(&heap), Ok(receipt));
                }
            }
        }
        // A timestamp beyond any store's (10 LEB128 bytes) still encodes,
        // on the heap, without a panic.
        let far = Receipt::new(
            &shapes[2],
            RecordRef {
                ts: u64::MAX,
                id: Some(u128::MAX),
            },
        );
        assert_eq!(far.encode(), URL_SAFE_NO_PAD.encode(far.binary()));
    }

    #[test]
    fn garbage_is_a_typed_error_never_a_panic() {
        assert_eq!(Receipt::decode(""), Err(ReceiptError::Length { got: 0 }));
        assert!(matches!(
            Receipt::decode(&"A".repeat(300)),
            Err(ReceiptError::Length { .. })
        ));
        assert!(matches!(
            Receipt::decode("!!!"),
            Err(ReceiptError::Malformed(_))
        ));
        assert_eq!(Receipt::decode("Ag"), Err(ReceiptError::Version { got: 2 }));
        let text = Receipt::new(&request("k", &[1, 2]), RecordRef { ts: 5, id: None }).encode();
        let bytes = URL_SAFE_NO_PAD.decode(&text).unwrap();
        for cut in 0..bytes.len() {
            assert!(Receipt::decode(&URL_SAFE_NO_PAD.encode(&bytes[..cut])).is_err());
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(
            Receipt::decode(&URL_SAFE_NO_PAD.encode(&longer)),
            Err(ReceiptError::Malformed("trailing bytes"))
        );
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..120)) {
            let _ = Receipt::decode(&URL_SAFE_NO_PAD.encode(&bytes));
        }
    }
}

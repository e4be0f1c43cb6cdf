//! The answer of a check or a peek, written without building it first: the
//! JSON of [`Answer`](super::answer::Answer) and the RateLimit header
//! fields of `slidelog::headers`, byte for byte the same (the tests compare
//! them), written straight from the decision into a per-thread buffer.
//!
//! Each piece (the body, each header value) is split off that buffer as a
//! `Bytes` that shares it, so an answer allocates nothing of its own: the
//! buffer is allocated again only when it is full, every [`CHUNK`] bytes
//! of answers, or when a piece of it is still in flight. A chunk is small,
//! so an answer held by a slow client keeps little else alive.

use axum::body::{Body, Bytes};
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use bytes::{BufMut, BytesMut};
use slidelog::headers::{self, FieldSink, RATELIMIT, RATELIMIT_POLICY, ceil_secs};
use slidelog::{Detailed, LimitState, Receipt, ReceiptKey, Request};
use std::cell::RefCell;

/// Bytes allocated at a time for answers (some 15-25 of them).
pub const CHUNK: usize = 4 * 1024;

thread_local! {
    static BUFFER: RefCell<BytesMut> = RefCell::new(BytesMut::new());
}

/// Writes with `write` into this thread's buffer and splits the written
/// bytes off, shared.
fn piece(write: impl FnOnce(&mut BytesMut)) -> Bytes {
    BUFFER.with(|buffer| {
        let mut buffer = buffer.borrow_mut();
        // Room for the largest answer of one limit; a larger one grows the
        // buffer as it is written.
        if buffer.capacity() < 512 {
            buffer.reserve(CHUNK);
        }
        write(&mut buffer);
        buffer.split().freeze()
    })
}

/// The HTTP answer of a decision: 200 admitted, 429 rejected, the decision
/// JSON (with the receipt of `request`'s record when one was appended) and
/// the RateLimit header fields.
pub fn decision(each: &Detailed, request: &Request, receipts: &ReceiptKey) -> Response {
    decision_because(each, request, receipts, None)
}

/// [`decision`] with the reason of the key's block in the body (`"reason"`,
/// after `"blocked":true`; docs/design.md §5.4).
pub fn decision_because(
    each: &Detailed,
    request: &Request,
    receipts: &ReceiptKey,
    reason: Option<&str>,
) -> Response {
    let body = piece(|out| write_json(out, each, request, receipts, reason));
    let body_len = body.len();
    let mut response = Response::new(Body::from(body));
    if !each.decision.allowed {
        *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
    }
    let headers = response.headers_mut();
    headers.reserve(5);
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    // Every value is ASCII digits, letters, quotes and `;=,-._` (a limit's
    // name is checked to be such): always valid, so a failure cannot
    // happen and is skipped rather than unwrapped.
    let mut put = |name, value: Bytes| {
        if let Ok(value) = HeaderValue::from_maybe_shared(value) {
            headers.insert(name, value);
        }
    };
    put(
        RATELIMIT_POLICY,
        piece(|out| write_policy(out, &each.limits)),
    );
    if !each.decision.degraded {
        put(RATELIMIT, piece(|out| write_ratelimit(out, each)));
    }
    if !each.decision.allowed {
        put(
            RETRY_AFTER,
            piece(|out| put_u64(out, ceil_secs(each.decision.retry_after_ms))),
        );
    }
    // Last, where axum would add it (it adds none when there is one): from
    // this buffer rather than a new allocation of axum's.
    put(CONTENT_LENGTH, piece(|out| put_u64(out, body_len as u64)));
    response
}

/// The two digits of each number below 100, for [`put_u64`].
const PAIRS: [u8; 200] = {
    let mut pairs = [0u8; 200];
    let mut i = 0;
    while i < 100 {
        pairs[2 * i] = b'0' + (i / 10) as u8;
        pairs[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    pairs
};

/// `n` in decimal, two digits per division (an answer writes ~11 numbers
/// of up to 8 digits: one digit per division was ~2.7% of serve's
/// instructions per check).
fn put_u64(out: &mut BytesMut, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    while n >= 100 {
        let pair = (n % 100) as usize * 2;
        n /= 100;
        at -= 2;
        digits[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if n >= 10 {
        let pair = n as usize * 2;
        at -= 2;
        digits[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    } else {
        at -= 1;
        digits[at] = b'0' + n as u8;
    }
    out.put_slice(&digits[at..]);
}

fn put_opt(out: &mut BytesMut, n: Option<u64>) {
    match n {
        Some(n) => put_u64(out, n),
        None => out.put_slice(b"null"),
    }
}

/// A JSON string (names and receipts never need escapes; any would be
/// escaped as serde_json does).
fn put_str(out: &mut BytesMut, s: &str) {
    let mut writer = out.writer();
    // Writing into memory cannot fail.
    let _ = serde_json::to_writer(&mut writer, s);
}

/// The JSON of `Answer::new(each).with_receipt(request, receipts)` (see `answer.rs`).
fn write_json(
    out: &mut BytesMut,
    each: &Detailed,
    request: &Request,
    receipts: &ReceiptKey,
    reason: Option<&str>,
) {
    let d = &each.decision;
    out.put_slice(if d.allowed {
        b"{\"allowed\":true,\"limit\":"
    } else {
        b"{\"allowed\":false,\"limit\":"
    });
    put_u64(out, d.limit);
    out.put_slice(b",\"window_ms\":");
    put_u64(out, d.window_ms);
    out.put_slice(b",\"count\":");
    put_u64(out, d.count);
    out.put_slice(b",\"remaining\":");
    put_u64(out, d.remaining);
    out.put_slice(b",\"retry_after_ms\":");
    put_u64(out, d.retry_after_ms);
    out.put_slice(b",\"reset_after_ms\":");
    put_u64(out, d.reset_after_ms);
    if d.degraded {
        out.put_slice(b",\"degraded\":true");
    }
    if d.blocked {
        out.put_slice(b",\"blocked\":true");
        if let Some(reason) = reason {
            out.put_slice(b",\"reason\":");
            put_str(out, reason);
        }
    }
    write_limits(out, &each.limits);
    if let Some(record) = d.record {
        // base64url needs no JSON escapes: the text is copied as it is
        // encoded (on the stack), not made a `String` first.
        out.put_slice(b",\"receipt\":\"");
        let receipt = Receipt::new(request, record);
        receipts.seal_with(&receipt, request.key(), |text| {
            out.put_slice(text.as_bytes())
        });
        out.put_u8(b'"');
    }
    out.put_u8(b'}');
}

/// The answer's `limits`, when it has them: several limits, or one named
/// or granular (listed, even alone, to say its name or granularity).
fn write_limits(out: &mut BytesMut, limits: &[LimitState]) {
    let alone = limits.len() == 1;
    let listed = !alone
        || limits
            .iter()
            .any(|s| s.limit.name().is_some() || s.limit.granularity_ms() != 1);
    if listed {
        out.put_slice(b",\"limits\":[");
        for (i, state) in limits.iter().enumerate() {
            if i > 0 {
                out.put_u8(b',');
            }
            write_limit(out, state, alone);
        }
        out.put_u8(b']');
    }
}

/// One entry of the answer's `limits`.
fn write_limit(out: &mut BytesMut, state: &LimitState, alone: bool) {
    out.put_slice(b"{\"name\":");
    match state.limit.name() {
        Some(name) => put_str(out, name),
        None => {
            out.put_u8(b'"');
            headers::write_name(&mut Fields(out), alone, &state.limit);
            out.put_u8(b'"');
        }
    }
    out.put_slice(b",\"limit\":");
    put_u64(out, state.limit.max());
    out.put_slice(b",\"window_ms\":");
    put_u64(out, state.limit.window_ms());
    if state.limit.granularity_ms() != 1 {
        out.put_slice(b",\"granularity_ms\":");
        put_u64(out, state.limit.granularity_ms());
    }
    let counts = state.counts;
    out.put_slice(b",\"count\":");
    put_opt(out, counts.map(|c| c.count));
    out.put_slice(b",\"remaining\":");
    put_opt(out, counts.map(|c| c.remaining));
    out.put_slice(b",\"retry_after_ms\":");
    put_opt(out, counts.map(|c| c.retry_after_ms));
    out.put_slice(b",\"reset_after_ms\":");
    put_opt(out, counts.map(|c| c.reset_after_ms));
    out.put_u8(b'}');
}

/// The answer buffer as the library's one writer of the RateLimit fields
/// writes into it, numbers by [`put_u64`].
struct Fields<'a>(&'a mut BytesMut);

impl FieldSink for Fields<'_> {
    fn put_str(&mut self, s: &str) {
        self.0.put_slice(s.as_bytes());
    }
    fn put_u64(&mut self, n: u64) {
        put_u64(self.0, n);
    }
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// `RateLimit-Policy` (`slidelog::headers::write_policy`).
fn write_policy(out: &mut BytesMut, limits: &[LimitState]) {
    headers::write_policy(&mut Fields(out), None, limits.iter().map(|s| &s.limit));
}

/// `RateLimit` (`slidelog::headers::write_ratelimit_each`): every limit
/// with counts, the deciding one first.
fn write_ratelimit(out: &mut BytesMut, each: &Detailed) {
    headers::write_ratelimit_each(&mut Fields(out), None, each);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::answer::Answer;
    use slidelog::{Decision, Mode};

    /// Checks the written answer against `Answer`'s serde JSON and
    /// `slidelog::headers`' fields.
    fn same_as_before(each: &Detailed, request: &Request) {
        // Three keys that seal alike (one secret, one first nonce): each
        // writer below gets its own, so every text is the first it issues.
        let key = || ReceiptKey::with_first_nonce(&[7; 32], 1).unwrap();
        let response = decision(each, request, &key());
        let expected_status = if each.decision.allowed { 200 } else { 429 };
        assert_eq!(response.status().as_u16(), expected_status);
        let fields = slidelog::headers::ratelimit_fields_each(each);
        let headers = response.headers();
        assert_eq!(headers[CONTENT_TYPE], "application/json");
        assert_eq!(headers[RATELIMIT_POLICY], fields.policy.as_str());
        assert_eq!(
            headers
                .get(RATELIMIT)
                .map(|v| v.to_str().unwrap().to_owned()),
            fields.ratelimit,
            "{each:?}"
        );
        assert_eq!(
            headers
                .get(RETRY_AFTER)
                .map(|v| v.to_str().unwrap().to_owned()),
            fields.retry_after
        );
        let expected =
            serde_json::to_vec(&Answer::new(each).with_receipt(request, &key())).unwrap();
        assert_eq!(headers[CONTENT_LENGTH], expected.len().to_string().as_str());
        let names: Vec<&str> = headers.keys().map(|name| name.as_str()).collect();
        assert_eq!(names.last(), Some(&"content-length"), "{names:?}");
        let json = piece(|out| write_json(out, each, request, &key(), None));
        assert_eq!(
            std::str::from_utf8(&json).unwrap(),
            std::str::from_utf8(&expected).unwrap()
        );
    }

    #[test]
    fn numbers_are_written_as_display_writes_them() {
        let mut samples = vec![0, u64::MAX, u64::MAX - 1, 10_000_000, 9_999_999];
        for digits in 1..=20u32 {
            let power = 10u64.checked_pow(digits - 1).unwrap_or(0);
            samples.extend([
                power,
                power.saturating_sub(1),
                power.saturating_add(1),
                power.saturating_mul(9).saturating_add(7),
            ]);
        }
        samples.extend(0..1_000);
        for n in samples {
            let mut out = BytesMut::new();
            put_u64(&mut out, n);
            assert_eq!(std::str::from_utf8(&out).unwrap(), n.to_string());
        }
    }

    #[tokio::test]
    async fn answers_are_byte_for_byte_those_of_answer_and_slidelog_headers() {
        let limiter = slidelog::Limiter::memory();
        let shapes = [
            "5/minute",
            "requests=2/minute",
            "2/1500ms, 100/minute",
            "requests=2/minute, tokens=100/hour",
            "3/second, a-b.c_d=2/minute, 10/day",
        ];
        for (n, shape) in shapes.iter().enumerate() {
            let limits = slidelog::limit::parse_list(shape).unwrap();
            let key = format!("k{n}");
            let request = Request::new(key.as_str(), limits.clone(), 1).unwrap();
            // Admitted, then rejected (every shape admits 2 at most in its
            // smallest limit... or more: decide until one is rejected).
            for mode in [
                Mode::Peek,
                Mode::Record,
                Mode::Record,
                Mode::Record,
                Mode::Record,
            ] {
                let each = limiter.decide_each(&request, mode).await.unwrap();
                same_as_before(&each, &request);
                // As a store that reports only the deciding limit answers.
                let only = Detailed::deciding_only(&request, each.decision);
                same_as_before(&only, &request);
            }
            // A degraded answer: no counts, no RateLimit field.
            let degraded = Decision {
                degraded: true,
                record: None,
                ..limiter.decide(&request, Mode::Peek).await.unwrap()
            };
            same_as_before(&Detailed::deciding_only(&request, degraded), &request);
        }
    }
}

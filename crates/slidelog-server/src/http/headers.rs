//! Response header fields of a decision: `Retry-After` on 429, and the IETF
//! RateLimit header fields of draft-ietf-httpapi-ratelimit-headers-11 (the
//! current draft; -09 and -10 have the same syntax):
//!
//! ```text
//! RateLimit-Policy: "default";q=100;w=60
//! RateLimit: "default";r=42;t=30
//! ```
//!
//! - `RateLimit-Policy` lists every limit of the request. With one limit its
//!   name is `"default"`; with several, each is named `"<max>per<window_ms>ms"`.
//!   `q` is `max`; `w` is the window in whole seconds, rounded up (the draft has
//!   no sub-second windows; at least 1).
//! - `RateLimit` reports the deciding limit of docs/design.md §2: `r` is `remaining`;
//!   `t` is the draft's effective window in whole seconds, rounded up: when
//!   rejected, the wait until the same request is admitted (`retry_after_ms`,
//!   equal to `Retry-After`, which the draft wants no earlier than `t`); when
//!   admitted, the time until the deciding limit's log is empty
//!   (`reset_after_ms`), an upper bound that a sliding log may improve on as
//!   older records expire (the draft allows this for sliding windows).
//! - A degraded (fail-open) answer carries the policy but no `RateLimit`
//!   field: the store did not say what is left.

//!
//! The values are formatted by `slidelog::headers`, the same code the tower
//! layer uses, so the service and the middleware answer alike.

use axum::http::{HeaderMap, HeaderValue};
use slidelog::headers::ratelimit_fields;
use slidelog::{Decision, Limit};

/// `RateLimit-Policy`.
pub const RATELIMIT_POLICY: &str = "ratelimit-policy";
/// `RateLimit`.
pub const RATELIMIT: &str = "ratelimit";

/// Adds `Retry-After` (on rejections) and the RateLimit fields.
pub fn insert(headers: &mut HeaderMap, limits: &[Limit], decision: &Decision) {
    let fields = ratelimit_fields(limits, decision);
    // Every value is ASCII digits, letters and punctuation: always valid.
    let mut put = |name: &'static str, value: &str| {
        if let Ok(v) = HeaderValue::from_str(value) {
            headers.insert(name, v);
        }
    };
    put(RATELIMIT_POLICY, &fields.policy);
    if let Some(ratelimit) = &fields.ratelimit {
        put(RATELIMIT, ratelimit);
    }
    if let Some(retry_after) = &fields.retry_after {
        put("retry-after", retry_after);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(allowed: bool, degraded: bool) -> Decision {
        Decision {
            allowed,
            limit: 10,
            window_ms: 1_500,
            count: 10,
            remaining: 0,
            retry_after_ms: 1_001,
            reset_after_ms: 1_400,
            degraded,
            blocked: false,
            record: None,
        }
    }

    #[test]
    fn a_rejection_carries_retry_after_and_both_fields() {
        let two = [
            Limit::new(10, 1_500).unwrap(),
            Limit::new(1000, 3_600_000).unwrap(),
        ];
        let mut headers = HeaderMap::new();
        insert(&mut headers, &two, &decision(false, false));
        assert_eq!(headers["retry-after"], "2");
        assert_eq!(headers[RATELIMIT], r#""10per1500ms";r=0;t=2"#);
        assert_eq!(
            headers[RATELIMIT_POLICY],
            r#""10per1500ms";q=10;w=2, "1000per3600000ms";q=1000;w=3600"#
        );
    }

    #[test]
    fn a_degraded_answer_carries_the_policy_only() {
        let one = [Limit::new(10, 1_500).unwrap()];
        let mut headers = HeaderMap::new();
        insert(&mut headers, &one, &decision(true, true));
        assert_eq!(headers[RATELIMIT_POLICY], r#""default";q=10;w=2"#);
        assert!(headers.get(RATELIMIT).is_none() && headers.get("retry-after").is_none());
    }
}

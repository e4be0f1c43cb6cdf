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
//! - `RateLimit` reports the deciding limit of SPEC §2: `r` is `remaining`;
//!   `t` is the draft's effective window in whole seconds, rounded up: when
//!   rejected, the wait until the same request is admitted (`retry_after_ms`,
//!   equal to `Retry-After`, which the draft wants no earlier than `t`); when
//!   admitted, the time until the deciding limit's log is empty
//!   (`reset_after_ms`), an upper bound that a sliding log may improve on as
//!   older records expire (the draft allows this for sliding windows).
//! - A degraded (fail-open) answer carries the policy but no `RateLimit`
//!   field: the store did not say what is left.

use axum::http::{HeaderMap, HeaderValue};
use slidelog::{Decision, Limit};

/// `RateLimit-Policy`.
pub const RATELIMIT_POLICY: &str = "ratelimit-policy";
/// `RateLimit`.
pub const RATELIMIT: &str = "ratelimit";

/// Whole seconds, rounded up.
pub fn ceil_secs(ms: u64) -> u64 {
    ms.div_ceil(1000)
}

fn policy_name(limits: &[Limit], limit: &Limit) -> String {
    if limits.len() == 1 {
        "default".to_owned()
    } else {
        format!("{}per{}ms", limit.max(), limit.window_ms())
    }
}

/// The `RateLimit-Policy` value for a request's limits.
pub fn policy_value(limits: &[Limit]) -> String {
    limits
        .iter()
        .map(|l| {
            format!(
                "\"{}\";q={};w={}",
                policy_name(limits, l),
                l.max(),
                ceil_secs(l.window_ms()).max(1)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `RateLimit` value for a decision on a request with `limits`.
pub fn ratelimit_value(limits: &[Limit], decision: &Decision) -> String {
    // The deciding limit is one of the request's; find it for its name.
    let deciding = limits
        .iter()
        .find(|l| l.max() == decision.limit && l.window_ms() == decision.window_ms)
        .unwrap_or(&limits[0]);
    let t_ms = if decision.allowed {
        decision.reset_after_ms
    } else {
        decision.retry_after_ms
    };
    format!(
        "\"{}\";r={};t={}",
        policy_name(limits, deciding),
        decision.remaining,
        ceil_secs(t_ms)
    )
}

/// Adds `Retry-After` (on rejections) and the RateLimit fields.
pub fn insert(headers: &mut HeaderMap, limits: &[Limit], decision: &Decision) {
    // Every value below is ASCII digits, letters and punctuation: valid.
    if let Ok(v) = HeaderValue::from_str(&policy_value(limits)) {
        headers.insert(RATELIMIT_POLICY, v);
    }
    if decision.degraded {
        return;
    }
    if let Ok(v) = HeaderValue::from_str(&ratelimit_value(limits, decision)) {
        headers.insert(RATELIMIT, v);
    }
    if !decision.allowed {
        headers.insert(
            axum::http::header::RETRY_AFTER,
            HeaderValue::from(ceil_secs(decision.retry_after_ms)),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_follow_the_draft_syntax() {
        let one = [Limit::new(100, 60_000).unwrap()];
        assert_eq!(policy_value(&one), r#""default";q=100;w=60"#);
        let two = [
            Limit::new(10, 1_500).unwrap(),
            Limit::new(1000, 3_600_000).unwrap(),
        ];
        assert_eq!(
            policy_value(&two),
            r#""10per1500ms";q=10;w=2, "1000per3600000ms";q=1000;w=3600"#
        );
        let d = Decision {
            allowed: false,
            limit: 10,
            window_ms: 1_500,
            count: 10,
            remaining: 0,
            retry_after_ms: 1_001,
            reset_after_ms: 1_400,
            degraded: false,
        };
        assert_eq!(ratelimit_value(&two, &d), r#""10per1500ms";r=0;t=2"#);
        let mut headers = HeaderMap::new();
        insert(&mut headers, &two, &d);
        assert_eq!(headers["retry-after"], "2");
    }

    #[test]
    fn sub_second_windows_round_up_to_one_second() {
        assert_eq!(
            policy_value(&[Limit::new(5, 1).unwrap()]),
            r#""default";q=5;w=1"#
        );
        assert_eq!(ceil_secs(0), 0);
        assert_eq!(ceil_secs(1), 1);
        assert_eq!(ceil_secs(1000), 1);
        assert_eq!(ceil_secs(1001), 2);
    }
}

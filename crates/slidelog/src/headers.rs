//! The IETF RateLimit header fields (draft-ietf-httpapi-ratelimit-headers;
//! -09 to -11 share this syntax) and `Retry-After`, formatted in one place,
//! the same as the `slidelog serve` HTTP API:
//!
//! ```text
//! RateLimit-Policy: "default";q=100;w=60
//! RateLimit: "default";r=42;t=30
//! ```
//!
//! - `RateLimit-Policy` lists every limit of the request. With one limit its
//!   name is `"default"`; with several, each is named `"<max>per<window_ms>ms"`.
//!   `q` is `max`; `w` is the window in whole seconds, rounded up (the draft
//!   has no sub-second windows; at least 1).
//! - `RateLimit` reports the deciding limit of docs/design.md §2: `r` is `remaining`;
//!   `t` is in whole seconds, rounded up: when rejected, the wait until the
//!   same request is admitted (`retry_after_ms`, equal to `Retry-After`); when
//!   admitted, the time until the deciding limit's log is empty
//!   (`reset_after_ms`), an upper bound that a sliding log may improve on as
//!   older records expire.
//! - A degraded (fail-open) answer carries the policy but no `RateLimit`
//!   field: the store did not say what is left.

use slidelog_core::{Decision, Limit};

/// The header values for one decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimitFields {
    /// Value of `RateLimit-Policy`.
    pub policy: String,
    /// Value of `RateLimit`; `None` for a degraded decision.
    pub ratelimit: Option<String>,
    /// Value of `Retry-After` (whole seconds, rounded up); `None` when allowed.
    pub retry_after: Option<String>,
}

/// Milliseconds as whole seconds, rounded up.
pub fn ceil_secs(ms: u64) -> u64 {
    ms.div_ceil(1000)
}

/// The policy name of `limit` among the request's `limits`.
fn policy_name(limits: &[Limit], max: u64, window_ms: u64) -> String {
    if limits.len() == 1 {
        "default".to_owned()
    } else {
        format!("{max}per{window_ms}ms")
    }
}

/// The `RateLimit-Policy` value for a request's limits.
///
/// ```
/// # use slidelog::{Limit, headers::policy_value};
/// assert_eq!(policy_value(&[Limit::new(100, 60_000)?]), r#""default";q=100;w=60"#);
/// let two = [Limit::new(10, 1_500)?, Limit::new(1_000, 3_600_000)?];
/// assert_eq!(policy_value(&two), r#""10per1500ms";q=10;w=2, "1000per3600000ms";q=1000;w=3600"#);
/// # Ok::<(), slidelog::InputError>(())
/// ```
pub fn policy_value(limits: &[Limit]) -> String {
    limits
        .iter()
        .map(|l| {
            format!(
                "\"{}\";q={};w={}",
                policy_name(limits, l.max(), l.window_ms()),
                l.max(),
                ceil_secs(l.window_ms()).max(1)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `RateLimit` value for `decision`, made under `limits`.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use slidelog::{Limit, Limiter, headers::ratelimit_value};
/// let limits = [Limit::new(5, 60_000)?];
/// let decision = Limiter::memory().check("k", &limits, 2).await?;
/// assert_eq!(ratelimit_value(&limits, &decision), r#""default";r=3;t=60"#);
/// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
/// ```
pub fn ratelimit_value(limits: &[Limit], decision: &Decision) -> String {
    let t_ms = if decision.allowed {
        decision.reset_after_ms
    } else {
        decision.retry_after_ms
    };
    format!(
        "\"{}\";r={};t={}",
        policy_name(limits, decision.limit, decision.window_ms),
        decision.remaining,
        ceil_secs(t_ms)
    )
}

/// Every header value for `decision`, made under `limits`.
///
/// ```
/// use slidelog::{Limit, Limiter, headers::ratelimit_fields};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let limits = [Limit::new(1, 60_000)?];
/// let limiter = Limiter::memory();
/// limiter.check("k", &limits, 1).await?;
/// let rejected = limiter.check("k", &limits, 1).await?;
/// let fields = ratelimit_fields(&rejected, &limits);
/// assert_eq!(fields.policy, r#""default";q=1;w=60"#);
/// assert!(fields.ratelimit.unwrap().starts_with(r#""default";r=0;t="#));
/// assert!(fields.retry_after.is_some());
/// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
/// ```
pub fn ratelimit_fields(decision: &Decision, limits: &[Limit]) -> RateLimitFields {
    RateLimitFields {
        policy: policy_value(limits),
        ratelimit: (!decision.degraded).then(|| ratelimit_value(limits, decision)),
        retry_after: (!decision.allowed).then(|| ceil_secs(decision.retry_after_ms).to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(allowed: bool, remaining: u64, retry: u64, reset: u64) -> Decision {
        Decision {
            allowed,
            limit: 10,
            window_ms: 1_000,
            count: 10 - remaining,
            remaining,
            retry_after_ms: retry,
            reset_after_ms: reset,
            degraded: false,
        }
    }

    #[test]
    fn policy_lists_every_limit_and_ratelimit_the_deciding_one() {
        let limits = [
            Limit::new(10, 1_000).unwrap(),
            Limit::new(1_000, 3_600_000).unwrap(),
        ];
        let f = ratelimit_fields(&decision(true, 3, 0, 901), &limits);
        assert_eq!(
            f.policy,
            "\"10per1000ms\";q=10;w=1, \"1000per3600000ms\";q=1000;w=3600"
        );
        assert_eq!(f.ratelimit.as_deref(), Some("\"10per1000ms\";r=3;t=1"));
        assert_eq!(f.retry_after, None);
    }

    #[test]
    fn rejection_rounds_the_wait_up_to_whole_seconds() {
        let limits = [Limit::new(10, 1_000).unwrap()];
        let f = ratelimit_fields(&decision(false, 0, 1_001, 1_500), &limits);
        assert_eq!(f.ratelimit.as_deref(), Some("\"default\";r=0;t=2"));
        assert_eq!(f.retry_after.as_deref(), Some("2"));
        let f = ratelimit_fields(&decision(false, 0, 1, 1), &limits);
        assert_eq!(f.retry_after.as_deref(), Some("1"));
    }

    #[test]
    fn sub_second_windows_advertise_one_second() {
        let limits = [Limit::new(3, 250).unwrap()];
        assert_eq!(policy_value(&limits), "\"default\";q=3;w=1");
    }

    #[test]
    fn degraded_decisions_carry_the_policy_only() {
        let limits = [Limit::new(10, 1_000).unwrap()];
        let mut d = decision(true, 10, 0, 0);
        d.degraded = true;
        let f = ratelimit_fields(&d, &limits);
        assert_eq!(f.policy, "\"default\";q=10;w=1");
        assert_eq!((f.ratelimit, f.retry_after), (None, None));
    }
}

//! The IETF RateLimit header fields (draft-ietf-httpapi-ratelimit-headers,
//! revisions 08–11) and `Retry-After`, formatted in one place so that every
//! HTTP interface answers alike.
//!
//! Both fields are Structured Field Lists whose members are a quoted policy
//! name with parameters:
//!
//! - `RateLimit-Policy: "10-per-1s";q=10;w=1, "1000-per-3600s";q=1000;w=3600`
//!   — every limit that applies: quota `q`, window `w` in seconds;
//! - `RateLimit: "10-per-1s";r=3;t=1` — the deciding limit of the decision
//!   (SPEC §2): remaining units `r`, and `t`, the seconds until it is worth
//!   trying again: the retry wait when rejected, the time until the log is
//!   empty when admitted.
//!
//! Seconds are rounded up (a client that waits the advertised time never
//! comes back early) and windows under a second advertise `w=1`. The policy
//! name keeps the exact window, in ms when it is not whole seconds.

use slidelog_core::{Decision, Limit};

/// The header values for one decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimitFields {
    /// Value of `RateLimit-Policy`.
    pub policy: String,
    /// Value of `RateLimit`.
    pub ratelimit: String,
    /// Value of `Retry-After` (whole seconds, rounded up); `None` when allowed.
    pub retry_after: Option<String>,
}

/// The name of a limit's policy: `"{max}-per-{window}"`, the window in
/// seconds (`60s`) when whole, else in milliseconds (`1500ms`).
///
/// ```
/// # use slidelog::{Limit, headers::policy_name};
/// assert_eq!(policy_name(Limit::new(100, 60_000)?.max(), 60_000), "100-per-60s");
/// assert_eq!(policy_name(5, 1_500), "5-per-1500ms");
/// # Ok::<(), slidelog::InputError>(())
/// ```
pub fn policy_name(max: u64, window_ms: u64) -> String {
    if window_ms % 1000 == 0 {
        format!("{max}-per-{}s", window_ms / 1000)
    } else {
        format!("{max}-per-{window_ms}ms")
    }
}

/// Milliseconds as whole seconds, rounded up.
pub fn ceil_secs(ms: u64) -> u64 {
    ms.div_ceil(1000)
}

/// The RateLimit fields and `Retry-After` for `decision`, made under `limits`.
///
/// ```
/// use slidelog::{Limit, Limiter, headers::ratelimit_fields};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let limits = [Limit::new(1, 60_000)?];
/// let limiter = Limiter::memory();
/// limiter.check("k", &limits, 1).await?;
/// let rejected = limiter.check("k", &limits, 1).await?;
/// let fields = ratelimit_fields(&rejected, &limits);
/// assert_eq!(fields.policy, r#""1-per-60s";q=1;w=60"#);
/// assert!(fields.ratelimit.starts_with(r#""1-per-60s";r=0;t="#));
/// assert!(fields.retry_after.is_some());
/// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
/// ```
pub fn ratelimit_fields(decision: &Decision, limits: &[Limit]) -> RateLimitFields {
    let policy = limits
        .iter()
        .map(|l| {
            format!(
                "\"{}\";q={};w={}",
                policy_name(l.max(), l.window_ms()),
                l.max(),
                ceil_secs(l.window_ms()).max(1)
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    let t_ms = if decision.allowed {
        decision.reset_after_ms
    } else {
        decision.retry_after_ms
    };
    let ratelimit = format!(
        "\"{}\";r={};t={}",
        policy_name(decision.limit, decision.window_ms),
        decision.remaining,
        ceil_secs(t_ms)
    );
    let retry_after =
        (!decision.allowed).then(|| ceil_secs(decision.retry_after_ms).max(1).to_string());
    RateLimitFields {
        policy,
        ratelimit,
        retry_after,
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
            "\"10-per-1s\";q=10;w=1, \"1000-per-3600s\";q=1000;w=3600"
        );
        assert_eq!(f.ratelimit, "\"10-per-1s\";r=3;t=1");
        assert_eq!(f.retry_after, None);
    }

    #[test]
    fn rejection_rounds_the_wait_up_to_whole_seconds() {
        let limits = [Limit::new(10, 1_000).unwrap()];
        let f = ratelimit_fields(&decision(false, 0, 1_001, 1_500), &limits);
        assert_eq!(f.ratelimit, "\"10-per-1s\";r=0;t=2");
        assert_eq!(f.retry_after.as_deref(), Some("2"));
        let f = ratelimit_fields(&decision(false, 0, 1, 1), &limits);
        assert_eq!(f.retry_after.as_deref(), Some("1"));
    }

    #[test]
    fn sub_second_windows_advertise_one_second_and_keep_ms_in_the_name() {
        let limits = [Limit::new(3, 250).unwrap()];
        let mut d = decision(true, 2, 0, 250);
        d.limit = 3;
        d.window_ms = 250;
        let f = ratelimit_fields(&d, &limits);
        assert_eq!(f.policy, "\"3-per-250ms\";q=3;w=1");
        assert_eq!(f.ratelimit, "\"3-per-250ms\";r=2;t=1");
    }
}

//! The IETF RateLimit header fields (draft-ietf-httpapi-ratelimit-headers;
//! -09 to -11 share this syntax) and `Retry-After`, formatted in one place,
//! the same as the `slidelog serve` HTTP API:
//!
//! ```text
//! RateLimit-Policy: "default";q=100;w=60
//! RateLimit: "default";r=42;t=30
//! ```
//!
//! - `RateLimit-Policy` lists every limit of the request. A named limit
//!   (`Limit::named`, `"tokens=20000/minute"`) is listed by its name; an
//!   unnamed one, alone, as `"default"`; unnamed among several, as
//!   `"<max>per<window_ms>ms"`.
//!   `q` is `max`; `w` is the window in whole seconds, rounded up (the draft
//!   has no sub-second windows; at least 1).
//! - `RateLimit` reports the deciding limit of docs/design.md §2: `r` is `remaining`;
//!   `t` is in whole seconds, rounded up: when rejected, the wait until the
//!   same request is admitted (`retry_after_ms`, equal to `Retry-After`); when
//!   admitted, the time until the deciding limit's log is empty
//!   (`reset_after_ms`), an upper bound that a sliding log may improve on as
//!   older records expire.
//! - A degraded (fail-open) answer carries the policy but no `RateLimit`
//!   field: the store did not say what is left, and a count made up here
//!   would be a guess. It carries `X-RateLimit-Degraded: store-unavailable`
//!   instead ([`DEGRADED`]), so a client (or a proxy's log) can tell an
//!   answer nothing limited from one that was counted (docs/design.md §6).
//! - With every limit's state ([`insert_each`], from `Limiter::decide_each`),
//!   `RateLimit` lists every limit the store reported, the deciding one
//!   first (a client that reads one item reads what it read before); each
//!   item's `t` is that limit's wait when it refuses the request, else the
//!   time until its log is empty. The tower layer writes these: its
//!   answers list every limit of the route.
//! - With several keys decided together ([`ratelimit_fields_joint`], from
//!   `Limiter::decide_all`), every limit is listed under its key's name:
//!   `"ip"` for a key's one unnamed limit, `"api-key.requests"` for a named
//!   one, `"ip.20per1000ms"` for an unnamed one among several; the deciding
//!   key's items first. `Retry-After` is the longest wait of the refusing
//!   keys: the request passes only when every key admits it.
//!
//! Every function takes the request's limits first, then the decision.
//! [`insert`] writes all the fields into an `http::HeaderMap`, for a
//! hand-written handler or middleware:
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use slidelog::{Limit, Limiter, headers};
//! let limits = ["100/minute".parse::<Limit>()?];
//! let decision = Limiter::memory().check("k", &limits, 1).await?;
//! let mut map = http::HeaderMap::new();
//! headers::insert(&mut map, &limits, &decision);
//! assert_eq!(map[headers::RATELIMIT], r#""default";r=99;t=60"#);
//! assert_eq!(map[headers::RATELIMIT_POLICY], r#""default";q=100;w=60"#);
//! # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
//! ```

use http::header::RETRY_AFTER;
use http::{HeaderMap, HeaderName, HeaderValue};
use slidelog_core::{Decision, Detailed, JointDecision, Limit};
use std::fmt::Write as _;

/// `RateLimit-Policy` (lower case: HTTP/2 field names).
pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// `RateLimit`.
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

/// `X-RateLimit-Degraded`: on an answer admitted while the store failed
/// (fail-open), which counted nothing (docs/design.md §6).
pub const DEGRADED: HeaderName = HeaderName::from_static("x-ratelimit-degraded");

/// The value of [`DEGRADED`]: the store failed or is known to be down.
pub const STORE_UNAVAILABLE: &str = "store-unavailable";

/// Writes [`DEGRADED`] when `degraded`: what every `insert` function and the
/// tower layer add to a degraded answer.
pub fn mark_degraded(headers: &mut HeaderMap, degraded: bool) {
    if degraded {
        headers.insert(DEGRADED, HeaderValue::from_static(STORE_UNAVAILABLE));
    }
}

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

/// Where the RateLimit fields are written: a `String` here, the service's
/// answer buffer in `slidelog serve` (which writes its numbers two digits
/// at a time). One writer of the fields for both (the functions below that
/// take a sink), so the layer's and the service's headers cannot differ.
pub trait FieldSink {
    /// Appends `s`.
    fn put_str(&mut self, s: &str);
    /// Appends `n` in decimal.
    fn put_u64(&mut self, n: u64);
    /// True when nothing was written yet (no `, ` before the first item).
    fn is_empty(&self) -> bool;
}

impl FieldSink for String {
    fn put_str(&mut self, s: &str) {
        self.push_str(s);
    }
    fn put_u64(&mut self, n: u64) {
        let _ = write!(self, "{n}");
    }
    fn is_empty(&self) -> bool {
        str::is_empty(self)
    }
}

/// Returns the policy name of `limit` among the request's `limits`: its
/// own name, else `default` when alone, else `<max>per<window_ms>ms`.
pub fn policy_name(limits: &[Limit], limit: &Limit) -> String {
    let mut out = String::new();
    push_name(&mut out, None, limits.len() == 1, limit);
    out
}

/// Appends the policy name of `limit` (one of `alone`: a request's only
/// limit) to `out`: under `key` when the limits are listed by key
/// (`key`, `key.name`, `key.<max>per<window_ms>ms`), else as
/// [`policy_name`] gives it. The one place a name is spelled.
fn push_name(out: &mut impl FieldSink, key: Option<&str>, alone: bool, limit: &Limit) {
    match (key, limit.name()) {
        (Some(key), None) if alone => out.put_str(key),
        (None, None) if alone => out.put_str("default"),
        (key, name) => {
            if let Some(key) = key {
                out.put_str(key);
                out.put_str(".");
            }
            match name {
                Some(name) => out.put_str(name),
                None => {
                    out.put_u64(limit.max());
                    out.put_str("per");
                    out.put_u64(limit.window_ms());
                    out.put_str("ms");
                }
            }
        }
    }
}

/// Writes the policy name of `limit` (one of `alone`: a request's only
/// limit) to `out`, as [`policy_name`] spells it.
pub fn write_name(out: &mut impl FieldSink, alone: bool, limit: &Limit) {
    push_name(out, None, alone, limit);
}

/// Returns the policy name of the deciding limit (`max`, `window_ms`).
fn deciding_name(limits: &[Limit], max: u64, window_ms: u64) -> String {
    let deciding = limits
        .iter()
        .find(|l| l.max() == max && l.window_ms() == window_ms)
        .copied()
        .or_else(|| Limit::new(max, window_ms).ok());
    deciding.map_or_else(|| "default".to_owned(), |l| policy_name(limits, &l))
}

/// Returns the `RateLimit-Policy` value for a request's limits.
///
/// ```
/// # use slidelog::{Limit, headers::policy_value};
/// assert_eq!(policy_value(&[Limit::new(100, 60_000)?]), r#""default";q=100;w=60"#);
/// let two = [Limit::new(10, 1_500)?, Limit::new(1_000, 3_600_000)?];
/// assert_eq!(policy_value(&two), r#""10per1500ms";q=10;w=2, "1000per3600000ms";q=1000;w=3600"#);
/// # Ok::<(), slidelog::InputError>(())
/// ```
pub fn policy_value(limits: &[Limit]) -> String {
    let mut out = String::new();
    push_policy(&mut out, None, limits);
    out
}

/// Appends the `RateLimit-Policy` items of `limits` to `out` (after a
/// `, ` when it is not empty), named under `key` when given.
fn push_policy(out: &mut impl FieldSink, key: Option<&str>, limits: &[Limit]) {
    write_policy(out, key, limits.iter());
}

/// Writes the `RateLimit-Policy` items of `limits` (a request's limits, in
/// order) to `out`, after a `, ` when it is not empty, named under `key`
/// when given: the one writer of that field.
pub fn write_policy<'a>(
    out: &mut impl FieldSink,
    key: Option<&str>,
    limits: impl ExactSizeIterator<Item = &'a Limit>,
) {
    let alone = limits.len() == 1;
    for limit in limits {
        if !out.is_empty() {
            out.put_str(", ");
        }
        out.put_str("\"");
        push_name(out, key, alone, limit);
        out.put_str("\";q=");
        out.put_u64(limit.max());
        out.put_str(";w=");
        out.put_u64(ceil_secs(limit.window_ms()).max(1));
    }
}

/// Returns the `RateLimit` value for `decision`, made under `limits`.
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
        deciding_name(limits, decision.limit, decision.window_ms),
        decision.remaining,
        ceil_secs(t_ms)
    )
}

/// Returns every header value for `decision`, made under `limits`.
///
/// ```
/// use slidelog::{Limit, Limiter, headers::ratelimit_fields};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let limits = [Limit::new(1, 60_000)?];
/// let limiter = Limiter::memory();
/// limiter.check("k", &limits, 1).await?;
/// let rejected = limiter.check("k", &limits, 1).await?;
/// let fields = ratelimit_fields(&limits, &rejected);
/// assert_eq!(fields.policy, r#""default";q=1;w=60"#);
/// assert!(fields.ratelimit.unwrap().starts_with(r#""default";r=0;t="#));
/// assert!(fields.retry_after.is_some());
/// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
/// ```
pub fn ratelimit_fields(limits: &[Limit], decision: &Decision) -> RateLimitFields {
    RateLimitFields {
        policy: policy_value(limits),
        ratelimit: (!decision.degraded).then(|| ratelimit_value(limits, decision)),
        retry_after: (!decision.allowed).then(|| ceil_secs(decision.retry_after_ms).to_string()),
    }
}

/// Writes `RateLimit-Policy`, `RateLimit` (not for a degraded decision: then
/// [`DEGRADED`]) and, when rejected, `Retry-After` into `headers`, replacing
/// any earlier values.
/// The same fields as the tower layer and `slidelog serve` write.
pub fn insert(headers: &mut HeaderMap, limits: &[Limit], decision: &Decision) {
    insert_fields(headers, &ratelimit_fields(limits, decision));
    mark_degraded(headers, decision.degraded);
}

/// Returns the `RateLimit` value listing every limit `each` has counts
/// for, the deciding one first.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use slidelog::{Limiter, Mode, Request, headers::ratelimit_value_each, limit::parse_list};
/// let limits = parse_list("requests=60/minute, tokens=20000/minute")?;
/// let request = Request::with_costs("k", limits, vec![1, 5_000])?;
/// let each = Limiter::memory().decide_each(&request, Mode::Record).await?;
/// assert_eq!(ratelimit_value_each(&each), r#""requests";r=59;t=60, "tokens";r=15000;t=60"#);
/// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
/// ```
pub fn ratelimit_value_each(each: &Detailed) -> String {
    // One string, no intermediate vectors: the tower layer formats this for
    // every admitted request.
    let mut out = String::with_capacity(24 * each.limits.len());
    push_each(&mut out, None, each);
    out
}

/// Appends the `RateLimit` items of every limit `each` has counts for to
/// `out` (the deciding one first), named under `key` when given.
fn push_each(out: &mut impl FieldSink, key: Option<&str>, each: &Detailed) {
    write_ratelimit_each(out, key, each);
}

/// Writes the `RateLimit` items of every limit `each` has counts for to
/// `out` (the deciding one first), after a `, ` when it is not empty, named
/// under `key` when given: the one writer of that field.
pub fn write_ratelimit_each(out: &mut impl FieldSink, key: Option<&str>, each: &Detailed) {
    let alone = each.limits.len() == 1;
    let deciding = each.deciding().map(|s| s.limit);
    let first = each.limits.iter().filter(|s| Some(s.limit) == deciding);
    let rest = each.limits.iter().filter(|s| Some(s.limit) != deciding);
    for state in first.chain(rest) {
        let Some(counts) = state.counts else {
            continue;
        };
        let t_ms = match counts.retry_after_ms {
            0 => counts.reset_after_ms,
            wait => wait,
        };
        if !out.is_empty() {
            out.put_str(", ");
        }
        out.put_str("\"");
        push_name(out, key, alone, &state.limit);
        out.put_str("\";r=");
        out.put_u64(counts.remaining);
        out.put_str(";t=");
        out.put_u64(ceil_secs(t_ms));
    }
}

/// Returns the `RateLimit` header value of [`ratelimit_value_each`], or
/// `None` for a degraded decision (nothing was counted) or when the store
/// reported no limit's counts.
#[cfg(feature = "tower")]
pub(crate) fn ratelimit_header_each(each: &Detailed) -> Option<HeaderValue> {
    if each.decision.degraded {
        return None;
    }
    let value = ratelimit_value_each(each);
    // From the String itself: no copy.
    (!value.is_empty())
        .then(|| HeaderValue::try_from(value).ok())
        .flatten()
}

/// Returns every header value for `each`: the policy of every limit, and
/// `RateLimit` listing every limit the store reported.
pub fn ratelimit_fields_each(each: &Detailed) -> RateLimitFields {
    let limits: Vec<Limit> = each.limits.iter().map(|s| s.limit).collect();
    let decision = &each.decision;
    RateLimitFields {
        policy: policy_value(&limits),
        ratelimit: (!decision.degraded).then(|| ratelimit_value_each(each)),
        retry_after: (!decision.allowed).then(|| ceil_secs(decision.retry_after_ms).to_string()),
    }
}

/// Writes the fields of [`ratelimit_fields_each`] into `headers`, as
/// [`insert`] does.
pub fn insert_each(headers: &mut HeaderMap, each: &Detailed) {
    insert_fields(headers, &ratelimit_fields_each(each));
    mark_degraded(headers, each.decision.degraded);
}

/// Returns every header value for a joint decision (`Limiter::decide_all`),
/// check `i`'s limits listed under the key name `keys[i]` (a check with no
/// name in `keys` is listed as [`ratelimit_fields_each`] lists it): the
/// policy of every limit of every key; `RateLimit` with the deciding key's
/// items first (`None` when any answer is degraded: nothing was counted
/// there); when refused, `Retry-After`: the longest wait of the refusing
/// keys, since the request passes only once every key admits it.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use slidelog::{Checks, Limit, Limiter, Request, headers::ratelimit_fields_joint};
/// let key = Request::single("api:k1", "100/minute".parse::<Limit>()?)?;
/// let ip = Request::single("ip:10.0.0.1", "20/second".parse::<Limit>()?)?;
/// let joint = Limiter::memory().check_all(&Checks::new([key, ip])?).await?;
/// let fields = ratelimit_fields_joint(&joint, &["api-key", "ip"]);
/// assert_eq!(fields.policy, r#""api-key";q=100;w=60, "ip";q=20;w=1"#);
/// // The deciding key first: the one with the least left, relatively.
/// assert_eq!(fields.ratelimit.as_deref(), Some(r#""ip";r=19;t=1, "api-key";r=99;t=60"#));
/// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
/// ```
pub fn ratelimit_fields_joint(joint: &JointDecision, keys: &[&str]) -> RateLimitFields {
    let key = |i: usize| keys.get(i).copied();
    let mut policy = String::new();
    for (i, each) in joint.checks.iter().enumerate() {
        let limits: Vec<Limit> = each.limits.iter().map(|s| s.limit).collect();
        push_policy(&mut policy, key(i), &limits);
    }
    let deciding = joint.deciding();
    let ratelimit = (!joint.degraded()).then(|| {
        let mut out = String::with_capacity(32 * joint.checks.len());
        let at = joint.checks.iter().position(|c| std::ptr::eq(c, deciding));
        let first = at.map(|at| (at, deciding));
        let rest = joint
            .checks
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != at);
        for (i, each) in first.into_iter().chain(rest) {
            push_each(&mut out, key(i), each);
        }
        out
    });
    let wait = joint.checks.iter().map(|c| c.decision.retry_after_ms).max();
    RateLimitFields {
        policy,
        ratelimit,
        retry_after: (!joint.allowed).then(|| ceil_secs(wait.unwrap_or(0)).to_string()),
    }
}

/// Writes the fields of [`ratelimit_fields_joint`] into `headers`, as
/// [`insert`] does.
pub fn insert_joint(headers: &mut HeaderMap, joint: &JointDecision, keys: &[&str]) {
    insert_fields(headers, &ratelimit_fields_joint(joint, keys));
    mark_degraded(headers, joint.degraded());
}

/// Returns the `RateLimit-Policy` value of several keys' limits, each
/// listed under its key's name (as [`ratelimit_fields_joint`] lists them).
#[cfg(feature = "tower")]
pub(crate) fn policy_value_keyed<'a>(
    keyed: impl IntoIterator<Item = (&'a str, &'a [Limit])>,
) -> String {
    let mut out = String::new();
    for (key, limits) in keyed {
        push_policy(&mut out, Some(key), limits);
    }
    out
}

/// Adds `fields` to the RateLimit fields already in `headers` (those of an
/// inner rate limit layer on the same request): their items are appended
/// after the ones there, and an existing `Retry-After` (the refusing
/// layer's) is kept.
#[cfg(feature = "tower")]
pub(crate) fn append_fields(headers: &mut HeaderMap, fields: &RateLimitFields) {
    let joined = |headers: &HeaderMap, name: &HeaderName, mine: &str| {
        let there = headers.get(name).and_then(|v| v.to_str().ok());
        match there {
            Some(there) if !there.is_empty() && !mine.is_empty() => format!("{there}, {mine}"),
            Some(there) if mine.is_empty() => there.to_owned(),
            _ => mine.to_owned(),
        }
    };
    let policy = joined(headers, &RATELIMIT_POLICY, &fields.policy);
    let ratelimit = fields
        .ratelimit
        .as_deref()
        .map(|mine| joined(headers, &RATELIMIT, mine));
    let retry_after = match headers.get(RETRY_AFTER) {
        Some(_) => None,
        None => fields.retry_after.clone(),
    };
    let merged = RateLimitFields {
        policy,
        ratelimit,
        retry_after,
    };
    insert_fields(headers, &merged);
}

/// Writes already formatted fields (see [`insert`]).
pub fn insert_fields(headers: &mut HeaderMap, fields: &RateLimitFields) {
    // The values are ASCII digits, letters, quotes and `;=,-`: always valid,
    // so a failed conversion cannot happen and is skipped rather than unwrapped.
    if let Ok(v) = HeaderValue::from_str(&fields.policy) {
        headers.insert(RATELIMIT_POLICY, v);
    }
    if let Some(Ok(v)) = fields.ratelimit.as_deref().map(HeaderValue::from_str) {
        headers.insert(RATELIMIT, v);
    }
    if let Some(Ok(v)) = fields.retry_after.as_deref().map(HeaderValue::from_str) {
        headers.insert(RETRY_AFTER, v);
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
            blocked: false,
            record: None,
        }
    }

    #[test]
    fn policy_lists_every_limit_and_ratelimit_the_deciding_one() {
        let limits = [
            Limit::new(10, 1_000).unwrap(),
            Limit::new(1_000, 3_600_000).unwrap(),
        ];
        let f = ratelimit_fields(&limits, &decision(true, 3, 0, 901));
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
        let f = ratelimit_fields(&limits, &decision(false, 0, 1_001, 1_500));
        assert_eq!(f.ratelimit.as_deref(), Some("\"default\";r=0;t=2"));
        assert_eq!(f.retry_after.as_deref(), Some("2"));
        let f = ratelimit_fields(&limits, &decision(false, 0, 1, 1));
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
        let f = ratelimit_fields(&limits, &d);
        assert_eq!(f.policy, "\"default\";q=10;w=1");
        assert_eq!((f.ratelimit, f.retry_after), (None, None));
    }

    #[test]
    fn named_limits_are_listed_by_name_and_every_reported_limit_in_ratelimit() {
        let limits = slidelog_core::limit::parse_list("requests=2/s, 100/minute").unwrap();
        assert_eq!(
            policy_value(&limits),
            "\"requests\";q=2;w=1, \"100per60000ms\";q=100;w=60"
        );
        let request = slidelog_core::Request::with_costs("k", limits, vec![1, 50]).unwrap();
        let mut log = slidelog_core::Log::new();
        let each = slidelog_core::engine::decide_and_record_each(&mut log, 0, &request);
        let f = ratelimit_fields_each(&each);
        // Remaining 1 request vs 50 units: requests decides and comes first.
        assert_eq!(
            f.ratelimit.as_deref(),
            Some("\"requests\";r=1;t=1, \"100per60000ms\";r=50;t=60")
        );
        // Rejected by the unnamed limit: it comes first, with its wait.
        let more = slidelog_core::Request::with_costs("k", request.limits().to_vec(), vec![1, 60]);
        let each = slidelog_core::engine::evaluate_each(&log, 500, &more.unwrap());
        let f = ratelimit_fields_each(&each);
        assert_eq!(
            f.ratelimit.as_deref(),
            Some("\"100per60000ms\";r=50;t=60, \"requests\";r=1;t=1")
        );
        assert_eq!(f.retry_after.as_deref(), Some("60"));
        // A store that reports the deciding limit only lists that one.
        let only = Detailed::deciding_only(&request, each.decision);
        assert_eq!(ratelimit_value_each(&only), "\"100per60000ms\";r=50;t=60");
    }

    #[test]
    fn insert_writes_every_field_and_replaces_old_values() {
        let limits = [Limit::new(10, 1_000).unwrap()];
        let mut headers = HeaderMap::new();
        headers.insert(RATELIMIT, HeaderValue::from_static("stale"));
        insert(&mut headers, &limits, &decision(false, 0, 1_001, 1_500));
        assert_eq!(headers[RATELIMIT], "\"default\";r=0;t=2");
        assert_eq!(headers[RATELIMIT_POLICY], "\"default\";q=10;w=1");
        assert_eq!(headers[RETRY_AFTER], "2");
        assert_eq!(headers.len(), 3);
    }

    fn joint_of(requests: &[(&str, &str, u64)]) -> JointDecision {
        let checks = requests
            .iter()
            .map(|(key, limits, cost)| {
                let limits = slidelog_core::limit::parse_list(limits).unwrap();
                slidelog_core::Request::new(*key, limits, *cost).unwrap()
            })
            .collect::<Vec<_>>();
        let mut logs = vec![slidelog_core::Log::new(); checks.len()];
        let each = checks
            .iter()
            .zip(&mut logs)
            .map(|(r, log)| slidelog_core::engine::evaluate_each(log, 0, r))
            .collect();
        JointDecision::of(each)
    }

    #[test]
    fn joint_fields_list_every_key_by_name_and_wait_for_the_slowest_refusal() {
        let admitted = joint_of(&[("a", "requests=10/minute, 5/s", 1), ("b", "20/s", 1)]);
        let f = ratelimit_fields_joint(&admitted, &["api-key", "ip"]);
        assert_eq!(
            f.policy,
            r#""api-key.requests";q=10;w=60, "api-key.5per1000ms";q=5;w=1, "ip";q=20;w=1"#
        );
        // Admitted: the key with the least left (4 of 5) first.
        assert_eq!(
            f.ratelimit.as_deref(),
            Some(r#""api-key.5per1000ms";r=4;t=1, "api-key.requests";r=9;t=60, "ip";r=19;t=1"#)
        );
        assert_eq!(f.retry_after, None);
        // A check without a name is listed as a lone request's.
        let f = ratelimit_fields_joint(&admitted, &["api-key"]);
        assert!(
            f.policy.ends_with(r#", "default";q=20;w=1"#),
            "{}",
            f.policy
        );
        // Refused by both: the longest wait is the one to honour.
        let mut refused = admitted.clone();
        for (each, wait) in refused.checks.iter_mut().zip([2_000, 61_000]) {
            each.decision.allowed = false;
            each.decision.retry_after_ms = wait;
        }
        let refused = JointDecision::of(refused.checks);
        let f = ratelimit_fields_joint(&refused, &["api-key", "ip"]);
        assert_eq!(f.retry_after.as_deref(), Some("61"));
        // Degraded anywhere: nothing counted there, no RateLimit field.
        let mut degraded = admitted;
        degraded.checks[1].decision.degraded = true;
        assert_eq!(
            ratelimit_fields_joint(&degraded, &["a", "b"]).ratelimit,
            None
        );
    }

    #[cfg(feature = "tower")]
    #[test]
    fn appended_fields_follow_an_inner_layers_and_keep_its_retry_after() {
        let mut headers = HeaderMap::new();
        headers.insert(
            RATELIMIT_POLICY,
            HeaderValue::from_static(r#""ip";q=1;w=1"#),
        );
        headers.insert(RATELIMIT, HeaderValue::from_static(r#""ip";r=0;t=1"#));
        headers.insert(RETRY_AFTER, HeaderValue::from_static("1"));
        let mine = RateLimitFields {
            policy: r#""key";q=9;w=60"#.into(),
            ratelimit: Some(r#""key";r=9;t=0"#.into()),
            retry_after: Some("60".into()),
        };
        append_fields(&mut headers, &mine);
        assert_eq!(headers[RATELIMIT_POLICY], r#""ip";q=1;w=1, "key";q=9;w=60"#);
        assert_eq!(headers[RATELIMIT], r#""ip";r=0;t=1, "key";r=9;t=0"#);
        assert_eq!(headers[RETRY_AFTER], "1");
    }
}

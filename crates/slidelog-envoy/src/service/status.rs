//! A decision in Envoy's words: the `DescriptorStatus` of a decided or a
//! blocked descriptor, and the optional `x-ratelimit-*` response headers.

use crate::config::{Rule, Unit};
use crate::proto::HeaderValue;
use crate::proto::rate_limit_response::{self, Code, DescriptorStatus, rate_limit::Unit as PbUnit};
use slidelog_core::Decision;

/// Reports one decided descriptor: `OK` when admitted or in shadow mode,
/// with the time until the log is empty when admitted and the wait until
/// the same request would be when rejected.
pub(super) fn status_for(rule: &Rule, d: &Decision) -> DescriptorStatus {
    let code = if d.allowed || rule.shadow_mode() {
        Code::Ok
    } else {
        Code::OverLimit
    };
    DescriptorStatus {
        code: code as i32,
        current_limit: Some(current_limit(rule, rule.requests_per_unit())),
        // A degraded (fail-open) decision counted nothing: it claims no
        // remaining count (0 is left out of the answer).
        limit_remaining: if d.degraded {
            0
        } else {
            u32::try_from(d.remaining).unwrap_or(u32::MAX)
        },
        duration_until_reset: Some(duration(wait_ms(d))),
        quota: None,
    }
}

/// Reports a descriptor over the limit without asking the store (OK in
/// shadow mode): a rule with `requests_per_unit: 0` (reported as 0), or a
/// cost above the rule's limit (reported with its `requests_per_unit`);
/// nothing remaining, and a whole window until anything could change.
pub(super) fn blocked_status(rule: &Rule, requests_per_unit: u64) -> DescriptorStatus {
    let code = if rule.shadow_mode() {
        Code::Ok
    } else {
        Code::OverLimit
    };
    DescriptorStatus {
        code: code as i32,
        current_limit: Some(current_limit(rule, requests_per_unit)),
        limit_remaining: 0,
        duration_until_reset: Some(duration(rule.window_ms())),
        quota: None,
    }
}

/// Builds `x-ratelimit-*` as the reference service sends them: the limit
/// with its window in seconds, the remaining count, and seconds until reset.
pub(super) fn rate_limit_headers(d: &Decision) -> Vec<HeaderValue> {
    let window_s = d.window_ms.div_ceil(1000);
    let header = |key: &str, value: String| HeaderValue {
        key: key.to_owned(),
        value,
        raw_value: Vec::new(),
    };
    let mut headers = vec![header(
        "x-ratelimit-limit",
        format!("{}, {};w={}", d.limit, d.limit, window_s),
    )];
    // A degraded (fail-open) decision counted nothing: no remaining count.
    if !d.degraded {
        headers.push(header("x-ratelimit-remaining", d.remaining.to_string()));
    }
    headers.push(header(
        "x-ratelimit-reset",
        wait_ms(d).div_ceil(1000).to_string(),
    ));
    headers
}

/// Returns the time until reset when admitted, the wait when rejected.
fn wait_ms(d: &Decision) -> u64 {
    if d.allowed {
        d.reset_after_ms
    } else {
        d.retry_after_ms
    }
}

/// Describes the rule's limit as Envoy reports it.
fn current_limit(rule: &Rule, requests_per_unit: u64) -> rate_limit_response::RateLimit {
    rate_limit_response::RateLimit {
        name: rule.name().unwrap_or_default().to_owned(),
        requests_per_unit: u32::try_from(requests_per_unit).unwrap_or(u32::MAX),
        unit: pb_unit(rule.unit()) as i32,
    }
}

/// Converts milliseconds to a protobuf duration.
fn duration(ms: u64) -> prost_types::Duration {
    prost_types::Duration {
        seconds: (ms / 1000) as i64,
        nanos: ((ms % 1000) * 1_000_000) as i32,
    }
}

/// Converts a config unit to the protocol's.
fn pb_unit(unit: Unit) -> PbUnit {
    match unit {
        Unit::Second => PbUnit::Second,
        Unit::Minute => PbUnit::Minute,
        Unit::Hour => PbUnit::Hour,
        Unit::Day => PbUnit::Day,
        Unit::Week => PbUnit::Week,
        Unit::Month => PbUnit::Month,
        Unit::Year => PbUnit::Year,
    }
}

/// Reports a descriptor no rule applies to: `OK`, nothing else.
pub(super) fn not_limited() -> DescriptorStatus {
    DescriptorStatus {
        code: Code::Ok as i32,
        ..Default::default()
    }
}

/// Reports an `unlimited` rule: `OK`, all remaining.
pub(super) fn unlimited() -> DescriptorStatus {
    DescriptorStatus {
        code: Code::Ok as i32,
        limit_remaining: u32::MAX,
        ..Default::default()
    }
}

//! The Envoy API's counters: every answer of a limited descriptor by
//! domain, rule and result (`requests_per_unit: 0` rules included, answered
//! without the store), and the descriptors no rule matched, by domain.
//!
//! A domain is a client's string: an unmatched descriptor of a domain the
//! config does not have is counted under `domain="(unconfigured)"` so that a
//! client sending random domains cannot grow the label set; the debug log
//! line names the domain and the entries.

use super::RateLimiter;
use crate::config::Rule;
use crate::proto::RateLimitDescriptor;
use slidelog_core::Decision;

/// Counter of answers to limited descriptors.
pub const DECISIONS: &str = "slidelog_envoy_decisions_total";
/// Counter of descriptors that matched no rule.
pub const UNMATCHED: &str = "slidelog_envoy_unmatched_total";
/// The `domain` label of an unmatched descriptor whose domain is not in the config.
pub const UNCONFIGURED: &str = "(unconfigured)";

impl RateLimiter {
    /// Runs `count` against this service's recorder (or the global one).
    fn in_recorder(&self, count: impl FnOnce()) {
        match &self.recorder {
            Some(recorder) => metrics::with_local_recorder(recorder.as_ref(), count),
            None => count(),
        }
    }

    /// Gives the counters their `# HELP` lines.
    pub(super) fn describe_counters(&self) {
        self.in_recorder(|| {
            metrics::describe_counter!(
                DECISIONS,
                "Envoy API answers to limited descriptors, by domain, rule and result (ok, over_limit, shadow_over_limit, degraded); requests_per_unit: 0 rules included."
            );
            metrics::describe_counter!(
                UNMATCHED,
                "Envoy API descriptors that matched no rule (answered OK, not limited), by domain; domains not in the config count as \"(unconfigured)\"."
            );
        });
    }

    /// Counts one descriptor's decision by domain, rule and result.
    pub(super) fn count_decision(&self, domain: &str, rule: &Rule, d: &Decision) {
        let result = match (d.allowed, d.degraded, rule.shadow_mode()) {
            (true, true, _) => "degraded",
            (true, false, _) => "ok",
            (false, _, true) => "shadow_over_limit",
            (false, _, false) => "over_limit",
        };
        self.count(domain, rule, result);
    }

    /// Counts the answer of a `requests_per_unit: 0` rule: always over the
    /// limit (reported OK in shadow mode).
    pub(super) fn count_blocked(&self, domain: &str, rule: &Rule) {
        let result = if rule.shadow_mode() {
            "shadow_over_limit"
        } else {
            "over_limit"
        };
        self.count(domain, rule, result);
    }

    fn count(&self, domain: &str, rule: &Rule, result: &'static str) {
        self.in_recorder(|| {
            metrics::counter!(
                DECISIONS,
                "domain" => domain.to_owned(),
                "rule" => rule.path().to_owned(),
                "result" => result,
            )
            .increment(1);
        });
    }

    /// Counts and logs (at debug) a descriptor that matched no rule.
    pub(super) fn count_unmatched(&self, domain: &str, configured: bool, d: &RateLimitDescriptor) {
        let entries: Vec<String> = d
            .entries
            .iter()
            .map(|e| format!("{}={}", e.key, e.value))
            .collect();
        tracing::debug!(
            domain,
            configured,
            entries = %entries.join(", "),
            "descriptor matched no rule: answered OK, not limited"
        );
        let label = if configured { domain } else { UNCONFIGURED };
        self.in_recorder(|| {
            metrics::counter!(UNMATCHED, "domain" => label.to_owned()).increment(1);
        });
    }
}

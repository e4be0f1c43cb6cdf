//! The Envoy API's counters: every answer of a limited descriptor by
//! domain, rule and result (`requests_per_unit: 0` rules included, answered
//! without the store), and the descriptors no rule matched, by domain.
//!
//! A domain is a client's string: an unmatched descriptor of a domain the
//! config does not have is counted under `domain="(unconfigured)"` so that a
//! client sending random domains cannot grow the label set; the debug log
//! line names the domain and the entries.
//!
//! With a service's own recorder ([`RateLimiter::with_recorder`], as `serve`
//! counts), the handles are registered once and kept beside the config
//! (`crate::handles`): a rule's four results, a domain's unmatched count,
//! and the `(unconfigured)` one in the service; a request increments them
//! without a registry lookup.
//!
//! A client's limit override is counted under the name the reference gives
//! it (`<domain>.<key>_<value>...`, from the client's entries) for the first
//! 1,000 names of a domain, then under `<domain>.(override)`
//! (`config::rule::OVERRIDE_OVERFLOW`): the `rule` label stays bounded.

use super::RateLimiter;
use crate::config::{Domain, Rule};
use crate::handles::Outcome;
use crate::proto::RateLimitDescriptor;
use crate::proto::rate_limit_descriptor::Entry;
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
            (true, true, _) => Outcome::Degraded,
            (true, false, _) => Outcome::Ok,
            (false, _, true) => Outcome::ShadowOverLimit,
            (false, _, false) => Outcome::OverLimit,
        };
        self.count(domain, rule, result);
    }

    /// Counts the answer of a descriptor over the limit without the store
    /// (`requests_per_unit: 0`, or a cost above the limit): over the limit
    /// (reported OK in shadow mode).
    pub(super) fn count_blocked(&self, domain: &str, rule: &Rule) {
        let result = if rule.shadow_mode() {
            Outcome::ShadowOverLimit
        } else {
            Outcome::OverLimit
        };
        self.count(domain, rule, result);
    }

    /// Increments the rule's counter of `result`: through the handles the
    /// rule keeps (registered once, under the request's domain, which is the
    /// rule's own; a client's override, made per request, shares those of
    /// its bounded metric name, kept by the domain), or by name for a
    /// service on the global recorder.
    fn count(&self, domain: &str, rule: &Rule, result: Outcome) {
        let by_name = || {
            metrics::counter!(
                DECISIONS,
                "domain" => domain.to_owned(),
                "rule" => rule.path().to_owned(),
                "result" => result.label(),
            )
        };
        let Some(recorder) = &self.recorder else {
            return by_name().increment(1);
        };
        let local = || metrics::with_local_recorder(recorder.as_ref(), by_name);
        match rule.counter_slot().get_or_make(recorder, Default::default) {
            Some(handles) => handles[result as usize].get_or_init(local).increment(1),
            None => local().increment(1),
        }
    }

    /// Counts and logs (at debug) a descriptor that matched no rule, in
    /// `domain` (`None`: not configured) named `name`.
    pub(super) fn count_unmatched(
        &self,
        domain: Option<&Domain>,
        name: &str,
        d: &RateLimitDescriptor,
    ) {
        let configured = domain.is_some();
        tracing::debug!(
            domain = name,
            configured,
            entries = %Entries(&d.entries),
            "descriptor matched no rule: answered OK, not limited"
        );
        let label = if configured { name } else { UNCONFIGURED };
        let by_name = || metrics::counter!(UNMATCHED, "domain" => label.to_owned());
        let Some(recorder) = &self.recorder else {
            return by_name().increment(1);
        };
        let slot = match domain {
            Some(domain) => domain.unmatched_slot(),
            None => &self.unconfigured,
        };
        let local = || metrics::with_local_recorder(recorder.as_ref(), by_name);
        match slot.get_or_make(recorder, local) {
            Some(counter) => counter.increment(1),
            None => local().increment(1),
        }
    }
}

/// A descriptor's entries as the debug log shows them, `k=v, k=v`: written
/// only when the line is.
struct Entries<'a>(&'a [Entry]);

impl std::fmt::Display for Entries<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{}={}", e.key, e.value)?;
        }
        Ok(())
    }
}

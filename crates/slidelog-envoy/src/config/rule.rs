//! [`Rule`]: a configured rate limit, what a matched descriptor is decided
//! against, and the store key it is decided on.

use super::{DescriptorEntry, Unit};
use crate::handles::{RuleCounters, Slot};
use crate::key::{write_descriptor_key, write_descriptor_key_into};
use parking_lot::Mutex;
use slidelog_core::Limit;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// How many distinct metric names (`detailed_metric`, `value_to_metric`) one
/// rule may give out. Past it, further values are counted under the rule's
/// configured path, so that a client sending endless values cannot grow the
/// metrics without bound.
pub const MAX_METRIC_KEYS_PER_RULE: usize = 1000;

/// The last part of the metric name (`rule` label) a domain's limit
/// overrides are counted under once the domain has given out
/// [`MAX_METRIC_KEYS_PER_RULE`] override names: `<domain>.(override)`.
/// Parenthesised like the `(unconfigured)` domain, so that it names no
/// descriptor.
pub const OVERRIDE_OVERFLOW: &str = "(override)";

/// What a rule does with a matched descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Kind {
    /// Decided on the store against this limit.
    Limited(Limit),
    /// `unlimited: true`: always OK, the store is not asked.
    Unlimited,
    /// `requests_per_unit: 0`: always over limit, the store is not asked
    /// (`Limit` cannot hold a max of 0, and nothing need be recorded).
    Blocked,
}

/// A configured rate limit: what a matched descriptor is decided against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub(super) kind: Kind,
    pub(super) unit: Unit,
    pub(super) requests_per_unit: u64,
    pub(super) window_ms: u64,
    pub(super) name: Option<String>,
    pub(super) replaces: Vec<String>,
    pub(super) shadow_mode: bool,
    pub(super) quota_mode: bool,
    pub(super) detailed_metric: bool,
    /// `charge: true` (slidelog's): a hit is recorded even when it takes
    /// the log over the limit, as the reference service counts every hit.
    pub(super) charge: bool,
    /// Shared: a rule renamed per request for metrics clones it.
    pub(super) metadata: Option<Arc<serde_json::Value>>,
    /// The metric name: the configured path, or for a rule returned by
    /// [`super::RateLimitConfig::lookup`] the name the reference gives it.
    pub(super) path: String,
    pub(super) config_path: String,
    /// Per descriptor level, the wildcard pattern that replaces the value in
    /// the store key (`share_threshold: true`), else `None`.
    pub(super) share: Vec<Option<String>>,
    pub(super) budget: Arc<MetricBudget>,
    /// The service's decision counters of this rule (under its `path`).
    pub(crate) counters: Slot<RuleCounters>,
    /// A client's override: the counters of its metric name, kept by the
    /// domain ([`OverrideNames`]) and shared by every request counted under
    /// that name (the rule itself is made per request).
    pub(crate) shared_counters: Option<Arc<Slot<RuleCounters>>>,
}

impl Rule {
    /// Builds a rule from a limit that the client sent in the descriptor,
    /// counted under `path` in `counters` (both from [`OverrideNames`]).
    pub(crate) fn from_override(
        limit: Limit,
        unit: Unit,
        path: String,
        counters: Arc<Slot<RuleCounters>>,
    ) -> Self {
        Self {
            kind: Kind::Limited(limit),
            unit,
            requests_per_unit: limit.max(),
            window_ms: limit.window_ms(),
            name: None,
            replaces: Vec::new(),
            shadow_mode: false,
            quota_mode: false,
            detailed_metric: false,
            charge: false,
            metadata: None,
            config_path: path.clone(),
            path,
            share: Vec::new(),
            budget: Arc::default(),
            counters: Slot::default(),
            shared_counters: Some(counters),
        }
    }

    /// The slot of the service's decision counters this rule counts in: the
    /// rule's own, or for a client's override those of its metric name.
    pub(crate) fn counter_slot(&self) -> &Slot<RuleCounters> {
        self.shared_counters.as_deref().unwrap_or(&self.counters)
    }

    /// Returns the limit; `None` for `unlimited: true` and for `requests_per_unit: 0`
    /// (see [`Rule::is_unlimited`] and [`Rule::blocks_all`]).
    pub fn limit(&self) -> Option<Limit> {
        match self.kind {
            Kind::Limited(l) => Some(l),
            Kind::Unlimited | Kind::Blocked => None,
        }
    }

    /// Tells whether the rule is `unlimited: true`: every request is OK and nothing is recorded.
    pub fn is_unlimited(&self) -> bool {
        self.kind == Kind::Unlimited
    }

    /// Tells whether the rule has `requests_per_unit: 0`: every request is over the limit (OK in
    /// shadow mode) and the store is not asked.
    pub fn blocks_all(&self) -> bool {
        self.kind == Kind::Blocked
    }

    /// Returns the unit reported to Envoy.
    pub fn unit(&self) -> Unit {
        self.unit
    }

    /// Returns the window in ms (the unit times `unit_multiplier`, or `window`).
    pub fn window_ms(&self) -> u64 {
        self.window_ms
    }

    /// Returns `requests_per_unit` as configured (0 for unlimited and for a rule
    /// that blocks all).
    pub fn requests_per_unit(&self) -> u64 {
        self.requests_per_unit
    }

    /// Returns the rule's `name`, if any.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// Names of the rules this rule replaces when both apply to one request.
    pub fn replaces(&self) -> &[String] {
        &self.replaces
    }

    /// Decisions are made and recorded but the answer is always OK.
    pub fn shadow_mode(&self) -> bool {
        self.shadow_mode
    }

    /// Tells whether `charge: true` (slidelog's) was configured: a hit of a
    /// positive cost is recorded without checking (a charge, as the usage
    /// Envoy reports at stream end with `apply_on_stream_done`), even when it
    /// takes the log over the limit; the answer is `OVER_LIMIT` when the log
    /// is then over. A hit of cost 0 only looks, as on any rule.
    pub fn charge(&self) -> bool {
        self.charge
    }

    /// Tells whether `quota_mode: true` was configured. slidelog reads it but enforces the
    /// rule as an ordinary limit (see docs/guide/envoy.md).
    pub fn quota_mode(&self) -> bool {
        self.quota_mode
    }

    /// Returns the descriptor's `metadata`, as configured.
    pub fn metadata(&self) -> Option<&serde_json::Value> {
        self.metadata.as_deref()
    }

    /// Returns the metric name, e.g. `api.user.path_/login`. For a rule found by
    /// [`super::RateLimitConfig::lookup`] it is the name the reference
    /// service gives the request (`detailed_metric`, `value_to_metric`).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Returns where the rule sits in the config, e.g. `api.user.path_/api/*`.
    pub fn config_path(&self) -> &str {
        &self.config_path
    }

    /// Returns the store key of a descriptor this rule matched: the descriptor's own
    /// key ([`crate::key`]), except that an entry matched by a
    /// `share_threshold` wildcard writes the pattern in place of its value,
    /// so every value matching it shares one log.
    pub fn store_key<E: DescriptorEntry>(&self, domain: &str, entries: &[E]) -> String {
        write_descriptor_key(domain, self.key_parts(entries))
    }

    /// [`store_key`](Self::store_key) written into `key` (cleared first),
    /// for a caller that reuses one buffer.
    pub(crate) fn write_store_key<E: DescriptorEntry>(
        &self,
        key: &mut String,
        domain: &str,
        entries: &[E],
    ) {
        write_descriptor_key_into(key, domain, self.key_parts(entries));
    }

    /// The `(key, value)` parts of a matched descriptor's store key: an
    /// entry matched by a `share_threshold` wildcard gives its pattern.
    fn key_parts<'a, E: DescriptorEntry>(
        &'a self,
        entries: &'a [E],
    ) -> impl Iterator<Item = (&'a str, &'a str)> + Clone + 'a {
        entries.iter().enumerate().map(|(i, e)| {
            let shared = self.share.get(i).and_then(Option::as_deref);
            (e.key(), shared.unwrap_or(e.value()))
        })
    }

    /// This rule under another metric name, when the budget allows it: the
    /// same `Arc` for the same name every time (with its counters), so a
    /// renamed rule is made once, not per request.
    pub(super) fn named(self: &Arc<Self>, metric: String) -> Arc<Self> {
        if metric == self.path {
            return Arc::clone(self);
        }
        let mut budget = self.budget.names.lock();
        if let Some(rule) = budget.named.get(&metric) {
            return Arc::clone(rule);
        }
        if budget.named.len() >= MAX_METRIC_KEYS_PER_RULE {
            if !budget.warned {
                tracing::warn!(
                    rule = self.config_path.as_str(),
                    bound = MAX_METRIC_KEYS_PER_RULE,
                    "too many distinct metric names for one rule; further values are counted under the rule"
                );
                budget.warned = true;
            }
            return Arc::clone(self);
        }
        let mut rule = (**self).clone();
        rule.path = metric.clone();
        // A renamed rule is never renamed again: its own budget stays empty,
        // and holds no reference back to this rule (no cycle).
        rule.budget = Arc::default();
        let rule = Arc::new(rule);
        budget.named.insert(metric, Arc::clone(&rule));
        rule
    }
}

impl Rule {
    /// Takes over the metric names `old` (this rule's predecessor, at the
    /// same config path, in the config this one replaces on reload) gave
    /// out, each renamed from this rule (so with this rule's limit and
    /// options), and whether the bound was said: a reload does not let a
    /// client's values add another [`MAX_METRIC_KEYS_PER_RULE`] names. The
    /// renamed rules count under the same labels, hence in the same series.
    /// (A name that a request still deciding on the old config gives out
    /// while the reload runs is not seen: at most a few.)
    pub(super) fn keep_names_of(self: &Arc<Self>, old: &Rule) {
        let before = old.budget.names.lock();
        let mut names = self.budget.names.lock();
        for metric in before.named.keys() {
            if *metric == self.path || names.named.contains_key(metric) {
                continue;
            }
            let mut rule = (**self).clone();
            rule.path = metric.clone();
            rule.budget = Arc::default();
            names.named.insert(metric.clone(), Arc::new(rule));
        }
        names.warned |= before.warned;
    }
}

/// The metric names one rule has given out, each with its renamed rule,
/// bounded by [`MAX_METRIC_KEYS_PER_RULE`]; a reload hands the names on to
/// the rule at the same config path ([`Rule::keep_names_of`]). Bookkeeping
/// only: two rules are equal whatever their budgets hold.
#[derive(Debug, Default)]
pub(super) struct MetricBudget {
    names: Mutex<Names>,
}

/// What a [`MetricBudget`] holds.
#[derive(Debug, Default)]
struct Names {
    /// Metric name → the rule renamed to it.
    named: HashMap<String, Arc<Rule>>,
    /// The bound was reached and said so (once).
    warned: bool,
}

impl PartialEq for MetricBudget {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for MetricBudget {}

/// The metric names a domain's limit overrides (a client's `limit` in a
/// descriptor) are counted under, each with its counters' slot: the name
/// the reference gives an override (`<domain>.<key>_<value>...`, built from
/// the client's entries) for the first [`MAX_METRIC_KEYS_PER_RULE`]
/// distinct names, then `<domain>.`[`OVERRIDE_OVERFLOW`] for every other,
/// so that a client sending endless values cannot grow the label set.
/// Kept with the domain, and handed on to the same domain of the config
/// that replaces it on reload (`RateLimitConfig::keep_metric_names`): the
/// bound holds per domain for as long as the domain stays configured, not
/// per config.
#[derive(Debug, Default)]
pub(super) struct OverrideNames {
    named: Mutex<HashMap<String, Arc<Slot<RuleCounters>>>>,
    /// Set once the bound was reached and said so.
    warned: AtomicBool,
    /// The counters of the overflow name.
    overflow: Arc<Slot<RuleCounters>>,
}

impl OverrideNames {
    /// Returns the metric name an override named `name` in `domain` is
    /// counted under, and that name's counters' slot (the same one for
    /// every request of that name).
    pub(super) fn get(&self, domain: &str, name: String) -> (String, Arc<Slot<RuleCounters>>) {
        let mut named = self.named.lock();
        if let Some(slot) = named.get(&name) {
            return (name, Arc::clone(slot));
        }
        if named.len() < MAX_METRIC_KEYS_PER_RULE {
            let slot = Arc::<Slot<RuleCounters>>::default();
            named.insert(name.clone(), Arc::clone(&slot));
            return (name, slot);
        }
        drop(named);
        if !self.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                domain,
                bound = MAX_METRIC_KEYS_PER_RULE,
                label = OVERRIDE_OVERFLOW,
                "too many distinct limit override names in one domain; further ones are counted under the overflow name"
            );
        }
        (
            format!("{domain}.{OVERRIDE_OVERFLOW}"),
            Arc::clone(&self.overflow),
        )
    }
}

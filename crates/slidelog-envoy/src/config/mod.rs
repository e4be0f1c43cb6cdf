//! The reference rate limit service's YAML config, read unchanged, and the
//! matching of a request's descriptor to a configured rule.
//!
//! One file holds one `domain` and a tree of `descriptors`. Each descriptor
//! has a `key`, an optional `value` (absent: every distinct value of the key
//! gets its own log; holding `*`: a wildcard, see [`pattern`]), an optional
//! `rate_limit` (`unit` second/minute/hour/day/week/month/year and
//! `requests_per_unit`, or `unlimited: true`; optional `name`, `replaces`
//! and `unit_multiplier`), optional `shadow_mode`, `share_threshold`,
//! `detailed_metric`, `value_to_metric`, `quota_mode` and `metadata`, and
//! nested `descriptors`. slidelog adds `rate_limit.window` (e.g. `90s`) for
//! a window that is not one unit; `unit` is then optional and only reported
//! back to Envoy.
//!
//! - `requests_per_unit: 0` (or left out) blocks: always over the limit.
//! - `share_threshold: true` on a wildcard: every value it matches shares
//!   one log ([`Rule::store_key`]).
//! - `detailed_metric` / `value_to_metric` name the metric as the reference
//!   does ([`RateLimitConfig::lookup`]), at most
//!   [`rule::MAX_METRIC_KEYS_PER_RULE`] names per rule; a client's `limit`
//!   override is named as the reference names it, at most as many names
//!   per domain, then `<domain>.(override)` ([`rule::OVERRIDE_OVERFLOW`]).
//! - `quota_mode` and `metadata` are read and kept on the rule; a quota-mode
//!   descriptor is enforced as an ordinary limit (docs/guide/envoy.md says why).
//!
//! Matching (the `tree` module): the exact value wins, then the first wildcard that
//! matches in config order, then the value-less key. An unknown domain or a
//! descriptor that matches nothing is not limited. Several files may
//! configure one domain when merging is on ([`LoadOptions`]).
//!
//! Month and year are sliding windows of 30 and 365 days (a sliding log has
//! no calendar).

mod build;
mod error;
mod files;
mod limit_error;
pub mod pattern;
pub mod rule;
mod tree;
mod unit;
mod yaml;

pub use error::ConfigError;
pub use files::config_files;
pub use limit_error::RuleLimitError;
pub use rule::Rule;
pub use unit::Unit;

use crate::handles::Slot;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How a set of files is loaded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// Files that configure the same domain add to it instead of being
    /// refused (the reference's `MERGE_DOMAIN_CONFIG=true`). A descriptor
    /// configured twice (same composite key at one level) is still refused.
    pub merge_domains: bool,
}

impl LoadOptions {
    /// Returns the options the reference service reads from its environment:
    /// `MERGE_DOMAIN_CONFIG` (`true`, `1`, `t`, … as Go's `ParseBool`).
    pub fn from_env() -> Self {
        let merge = std::env::var("MERGE_DOMAIN_CONFIG").ok();
        Self {
            merge_domains: merge.as_deref().is_some_and(parse_go_bool),
        }
    }
}

/// Tells whether `value` is one of the spellings Go's `strconv.ParseBool` reads as true.
fn parse_go_bool(s: &str) -> bool {
    matches!(s.trim(), "1" | "t" | "T" | "true" | "TRUE" | "True")
}

/// The maps a config builds and requests only look up (domains, the
/// descriptor trees): keyed by the operator's strings, so a client's value
/// can only probe, never fill, them; foldhash instead of SipHash, which
/// was ~7% of the Envoy path's own instructions (measured: BENCHMARKS.md). The maps a
/// client's values fill (metric names of renamed rules and overrides) keep
/// std's SipHash.
pub(super) type LookupMap<V> = HashMap<String, V, foldhash::fast::RandomState>;

/// One domain's descriptor tree and the file that configured it first.
#[derive(Debug)]
pub(crate) struct Domain {
    root: tree::Node,
    file: PathBuf,
    /// The handle of this domain's unmatched-descriptor counter.
    unmatched: Slot<metrics::Counter>,
    /// The metric names given out to clients' limit overrides. Shared with
    /// the same domain of the config this one replaced on reload
    /// ([`RateLimitConfig::keep_metric_names`]), so the budget is the
    /// domain's, not one config's.
    overrides: Arc<rule::OverrideNames>,
}

/// One `(key, value)` entry of a request's descriptor, as matching and store
/// keys read it: a pair of strings, or the protocol's own entry (so that a
/// request is matched and keyed without copying its entries).
pub trait DescriptorEntry {
    /// The entry's key.
    fn key(&self) -> &str;
    /// The entry's value.
    fn value(&self) -> &str;
}

impl<K: AsRef<str>, V: AsRef<str>> DescriptorEntry for (K, V) {
    fn key(&self) -> &str {
        self.0.as_ref()
    }
    fn value(&self) -> &str {
        self.1.as_ref()
    }
}

impl DescriptorEntry for crate::proto::rate_limit_descriptor::Entry {
    fn key(&self) -> &str {
        &self.key
    }
    fn value(&self) -> &str {
        &self.value
    }
}

/// Every configured domain: an immutable snapshot, swapped whole on reload.
#[derive(Debug, Default)]
pub struct RateLimitConfig {
    domains: LookupMap<Domain>,
    files: Vec<PathBuf>,
}

impl RateLimitConfig {
    /// Returns an empty config: every request is not limited.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Loads a YAML file, or every `.yaml`/`.yml` file under a folder
    /// (recursively, sorted, hidden files skipped), with the options of the
    /// environment ([`LoadOptions::from_env`]).
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        Self::load_with(path, &LoadOptions::from_env())
    }

    /// Does what [`RateLimitConfig::load`] does, with explicit options.
    pub fn load_with(path: &Path, options: &LoadOptions) -> Result<Self, ConfigError> {
        let mut config = Self::default();
        for file in config_files(path)? {
            let text = std::fs::read_to_string(&file).map_err(|e| ConfigError::Read {
                path: file.clone(),
                reason: e.to_string(),
            })?;
            config.add_yaml(&file, &text, options)?;
        }
        Ok(config)
    }

    /// Parses one YAML document; `name` stands for its file in errors.
    pub fn from_yaml_str(name: impl AsRef<Path>, text: &str) -> Result<Self, ConfigError> {
        Self::from_yaml_docs(&[(name.as_ref(), text)], &LoadOptions::default())
    }

    /// Parses several documents in order, as files of one folder.
    pub fn from_yaml_docs(
        docs: &[(&Path, &str)],
        options: &LoadOptions,
    ) -> Result<Self, ConfigError> {
        let mut config = Self::default();
        for (name, text) in docs {
            config.add_yaml(name, text, options)?;
        }
        Ok(config)
    }

    /// Returns the files this config was read from.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// Returns the configured domains, sorted.
    pub fn domains(&self) -> Vec<&str> {
        let mut d: Vec<&str> = self.domains.keys().map(String::as_str).collect();
        d.sort_unstable();
        d
    }

    /// Returns every configured rule of every domain, in no particular order (e.g.
    /// for the largest limit `slidelog inspect` compares key sizes with).
    pub fn rules(&self) -> Vec<&Arc<Rule>> {
        let mut out = Vec::new();
        for domain in self.domains.values() {
            domain.root.rules(&mut out);
        }
        out
    }

    /// Tells whether the domain is configured.
    pub fn has_domain(&self, domain: &str) -> bool {
        self.domains.contains_key(domain)
    }

    /// Returns the configured rule for one descriptor (its `(key, value)` entries in
    /// order), or `None` when the domain is unknown or nothing matches at
    /// that depth. Its [`Rule::path`] is the configured path; use
    /// [`RateLimitConfig::lookup`] to decide a request.
    pub fn find<E: DescriptorEntry>(&self, domain: &str, entries: &[E]) -> Option<&Arc<Rule>> {
        self.domains
            .get(domain)?
            .root
            .walk(entries)
            .map(|(rule, _)| rule)
    }

    /// Returns the rule that decides one descriptor of a request: [`find`]'s rule,
    /// renamed for metrics as the reference names it when the descriptor
    /// sets `detailed_metric` or `value_to_metric`.
    ///
    /// [`find`]: RateLimitConfig::find
    pub fn lookup<E: DescriptorEntry>(&self, domain: &str, entries: &[E]) -> Option<Arc<Rule>> {
        self.domains.get(domain)?.lookup(domain, entries)
    }

    /// Returns a configured domain: a request looks its domain up once.
    pub(crate) fn domain(&self, domain: &str) -> Option<&Domain> {
        self.domains.get(domain)
    }

    /// Takes over the override-name budgets of `old`'s domains (the config
    /// this one replaces on reload): a domain configured in both keeps the
    /// names it gave out, their counters and its overflow state, so a
    /// client's override names cannot grow the metric series by another
    /// [`rule::MAX_METRIC_KEYS_PER_RULE`] with every reload. Shared, not
    /// copied: a request still deciding on `old` counts in the same budget.
    ///
    /// Likewise each rule's metric names (`detailed_metric`,
    /// `value_to_metric`) go to the rule at the same config path, renamed
    /// from the new rule (its limit and options apply to them).
    pub(crate) fn keep_metric_names(&mut self, old: &RateLimitConfig) {
        for (name, domain) in &mut self.domains {
            if let Some(before) = old.domains.get(name) {
                domain.overrides = Arc::clone(&before.overrides);
            }
        }
        let before: HashMap<&str, &Arc<Rule>> = old
            .rules()
            .into_iter()
            .map(|r| (r.config_path(), r))
            .collect();
        for rule in self.rules() {
            if let Some(old) = before.get(rule.config_path()) {
                rule.keep_names_of(old);
            }
        }
    }

    fn add_yaml(
        &mut self,
        file: &Path,
        text: &str,
        options: &LoadOptions,
    ) -> Result<(), ConfigError> {
        let parsed = yaml::parse_file(file, text)?;
        build::add_file(self, file, parsed, options)
    }
}

impl Domain {
    /// [`RateLimitConfig::lookup`] in this domain, named `name`.
    pub(crate) fn lookup<E: DescriptorEntry>(
        &self,
        name: &str,
        entries: &[E],
    ) -> Option<Arc<Rule>> {
        let (rule, steps) = self.root.walk(entries)?;
        match tree::metric_name(name, entries, &steps, rule) {
            Some(metric) => Some(rule.named(metric)),
            None => Some(Arc::clone(rule)),
        }
    }

    /// Returns the handle slot of this domain's unmatched counter.
    pub(crate) fn unmatched_slot(&self) -> &Slot<metrics::Counter> {
        &self.unmatched
    }

    /// Returns the metric name a client's limit override named `metric`
    /// (the reference's `<domain>.<key>_<value>...`) is counted under in
    /// this domain, named `name`, and that name's counters' slot: `metric`
    /// itself within the domain's budget of
    /// [`rule::MAX_METRIC_KEYS_PER_RULE`] names, then
    /// `<domain>.`[`rule::OVERRIDE_OVERFLOW`].
    pub(crate) fn override_metric(
        &self,
        name: &str,
        metric: String,
    ) -> (String, Arc<Slot<crate::handles::RuleCounters>>) {
        self.overrides.get(name, metric)
    }
}

#[cfg(test)]
mod tests {
    use super::parse_go_bool;

    #[test]
    fn merge_setting_reads_like_go() {
        for t in ["true", "1", "t", "TRUE", "True"] {
            assert!(parse_go_bool(t), "{t}");
        }
        for f in ["false", "0", "", "yes", "no"] {
            assert!(!parse_go_bool(f), "{f}");
        }
    }
}

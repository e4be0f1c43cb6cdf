//! The reference rate limit service's YAML config, read unchanged, and the
//! matching of a request's descriptor to a configured rule.
//!
//! One file holds one `domain` and a tree of `descriptors`. Each descriptor
//! has a `key`, an optional `value` (absent: every distinct value of the key
//! gets its own log; ending in `*`: a prefix match), an optional `rate_limit`
//! (`unit` second/minute/hour/day/week/month/year and `requests_per_unit`, or
//! `unlimited: true`, optional `name` and `replaces`), optional `shadow_mode`,
//! and nested `descriptors`. slidelog adds `rate_limit.window` (e.g. `90s`)
//! for a window that is not one unit; `unit` is then optional and only
//! reported back to Envoy.
//!
//! Matching follows the reference service: at each level the exact
//! `key_value` wins, then a wildcard value (`prefix*`), then the value-less
//! `key`; a rule applies only when the request's descriptor ends at a level
//! that has a `rate_limit`. An unknown domain or a descriptor that matches
//! nothing is not limited.
//!
//! Month and year are sliding windows of 30 and 365 days (a sliding log has
//! no calendar).

use serde::Deserialize;
use serde_saphyr::Spanned;
use slidelog_core::Limit;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A config that cannot be used. Every variant names the file; parse and
/// validation errors also name the line and column.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file or folder could not be read.
    #[error("{path}: cannot read: {reason}")]
    Read {
        /// The file or folder.
        path: PathBuf,
        /// The I/O error.
        reason: String,
    },
    /// A file is not valid YAML, or a value breaks a rule of the format.
    #[error("{path}:{line}:{column}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line (0 when unknown).
        line: u64,
        /// 1-based column (0 when unknown).
        column: u64,
        /// What is wrong.
        message: String,
    },
    /// Two files configure the same domain.
    #[error("{path}:{line}: domain {domain:?} is already configured in {first}")]
    DuplicateDomain {
        /// The second file.
        path: PathBuf,
        /// Line of `domain` in the second file.
        line: u64,
        /// The domain.
        domain: String,
        /// The file that configured it first.
        first: String,
    },
    /// A folder holds no `.yaml` / `.yml` file.
    #[error("{path}: no .yaml or .yml file in the folder")]
    NoFiles {
        /// The folder.
        path: PathBuf,
    },
}

/// The unit of a configured limit, as Envoy reports it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// One second.
    Second,
    /// One minute.
    Minute,
    /// One hour.
    Hour,
    /// One day.
    Day,
    /// Seven days.
    Week,
    /// Thirty days (a sliding window has no calendar month).
    Month,
    /// 365 days.
    Year,
}

impl Unit {
    const ALL: [Unit; 7] = [
        Unit::Second,
        Unit::Minute,
        Unit::Hour,
        Unit::Day,
        Unit::Week,
        Unit::Month,
        Unit::Year,
    ];

    /// Parses a unit name, case-insensitive, as the reference service does.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|u| u.name().eq_ignore_ascii_case(name))
    }

    /// The lower-case name used in the YAML.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Second => "second",
            Unit::Minute => "minute",
            Unit::Hour => "hour",
            Unit::Day => "day",
            Unit::Week => "week",
            Unit::Month => "month",
            Unit::Year => "year",
        }
    }

    /// The unit's length in ms.
    pub fn millis(self) -> u64 {
        const S: u64 = 1000;
        match self {
            Unit::Second => S,
            Unit::Minute => 60 * S,
            Unit::Hour => 3600 * S,
            Unit::Day => 86_400 * S,
            Unit::Week => 7 * 86_400 * S,
            Unit::Month => 30 * 86_400 * S,
            Unit::Year => 365 * 86_400 * S,
        }
    }

    /// The largest unit not longer than `window_ms` (at least a second):
    /// what is reported for a `window` given without a `unit`.
    pub fn for_window(window_ms: u64) -> Self {
        Self::ALL
            .into_iter()
            .rev()
            .find(|u| u.millis() <= window_ms)
            .unwrap_or(Unit::Second)
    }
}

/// A configured rate limit: what a matched descriptor is decided against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    limit: Option<Limit>,
    unit: Unit,
    requests_per_unit: u64,
    name: Option<String>,
    replaces: Vec<String>,
    shadow_mode: bool,
    path: String,
}

impl Rule {
    /// A rule from a limit that the client sent in the descriptor.
    pub(crate) fn from_override(limit: Limit, unit: Unit, path: String) -> Self {
        Self {
            limit: Some(limit),
            unit,
            requests_per_unit: limit.max(),
            name: None,
            replaces: Vec::new(),
            shadow_mode: false,
            path,
        }
    }

    /// The limit; `None` for `unlimited: true`.
    pub fn limit(&self) -> Option<Limit> {
        self.limit
    }

    /// The unit reported to Envoy.
    pub fn unit(&self) -> Unit {
        self.unit
    }

    /// `requests_per_unit` as configured (0 for unlimited).
    pub fn requests_per_unit(&self) -> u64 {
        self.requests_per_unit
    }

    /// The rule's `name`, if any.
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

    /// Where the rule sits, e.g. `api.user.path_/login` (for logs and metrics).
    pub fn path(&self) -> &str {
        &self.path
    }
}

#[derive(Debug, Default)]
struct Node {
    rule: Option<Arc<Rule>>,
    /// `key_value` → child.
    exact: HashMap<(String, String), Node>,
    /// `(key, value prefix)` of `value: prefix*`, in file order.
    wildcard: Vec<(String, String, Node)>,
    /// `key` (no value) → child.
    any: HashMap<String, Node>,
}

impl Node {
    fn has_children(&self) -> bool {
        !(self.exact.is_empty() && self.wildcard.is_empty() && self.any.is_empty())
    }

    fn child(&self, key: &str, value: &str) -> Option<&Node> {
        if let Some(n) = self.exact.get(&(key.to_owned(), value.to_owned())) {
            return Some(n);
        }
        if let Some((_, _, n)) = self
            .wildcard
            .iter()
            .find(|(k, prefix, _)| k == key && value.starts_with(prefix.as_str()))
        {
            return Some(n);
        }
        self.any.get(key)
    }
}

/// Every configured domain: an immutable snapshot, swapped whole on reload.
#[derive(Debug, Default)]
pub struct RateLimitConfig {
    domains: HashMap<String, Node>,
    files: Vec<PathBuf>,
}

impl RateLimitConfig {
    /// An empty config: every request is not limited.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Loads a YAML file, or every `.yaml`/`.yml` file under a folder
    /// (recursively, sorted, hidden files skipped).
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let mut config = Self::default();
        let mut seen: HashMap<String, PathBuf> = HashMap::new();
        for file in config_files(path)? {
            let text = std::fs::read_to_string(&file).map_err(|e| ConfigError::Read {
                path: file.clone(),
                reason: e.to_string(),
            })?;
            config.add_yaml(&file, &text, &mut seen)?;
        }
        Ok(config)
    }

    /// Parses one YAML document; `name` stands for its file in errors.
    pub fn from_yaml_str(name: impl AsRef<Path>, text: &str) -> Result<Self, ConfigError> {
        let mut config = Self::default();
        config.add_yaml(name.as_ref(), text, &mut HashMap::new())?;
        Ok(config)
    }

    /// The files this config was read from.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// The configured domains, sorted.
    pub fn domains(&self) -> Vec<&str> {
        let mut d: Vec<&str> = self.domains.keys().map(String::as_str).collect();
        d.sort_unstable();
        d
    }

    /// The rule for one descriptor (its `(key, value)` entries in order), or
    /// `None` when the domain is unknown or nothing matches at that depth.
    pub fn find<K: AsRef<str>, V: AsRef<str>>(
        &self,
        domain: &str,
        entries: &[(K, V)],
    ) -> Option<&Arc<Rule>> {
        let mut node = self.domains.get(domain)?;
        let last = entries.len().checked_sub(1)?;
        for (i, (key, value)) in entries.iter().enumerate() {
            let next = node.child(key.as_ref(), value.as_ref())?;
            if i == last {
                return next.rule.as_ref();
            }
            if !next.has_children() {
                return None;
            }
            node = next;
        }
        None
    }

    /// Whether the domain is configured.
    pub fn has_domain(&self, domain: &str) -> bool {
        self.domains.contains_key(domain)
    }

    fn add_yaml(
        &mut self,
        file: &Path,
        text: &str,
        seen: &mut HashMap<String, PathBuf>,
    ) -> Result<(), ConfigError> {
        let invalid = |line: u64, column: u64, message: String| ConfigError::Invalid {
            path: file.to_owned(),
            line,
            column,
            message,
        };
        let parsed: FileYaml = serde_saphyr::from_str(text).map_err(|e| {
            let (line, column) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
            // The crate's message may carry a source snippet: keep its first line.
            let message = e.to_string();
            let message = message.lines().next().unwrap_or("invalid YAML").to_owned();
            invalid(line, column, message)
        })?;
        let domain = parsed.domain.value.clone();
        let line = parsed.domain.referenced.line();
        if domain.is_empty() {
            return Err(invalid(
                line,
                parsed.domain.referenced.column(),
                "domain must not be empty".into(),
            ));
        }
        if let Some(first) = seen.get(&domain) {
            return Err(ConfigError::DuplicateDomain {
                path: file.to_owned(),
                line,
                domain,
                first: first.display().to_string(),
            });
        }
        let mut root = Node::default();
        build_level(&mut root, &parsed.descriptors, &domain, &invalid)?;
        seen.insert(domain.clone(), file.to_owned());
        self.domains.insert(domain, root);
        self.files.push(file.to_owned());
        Ok(())
    }
}

fn build_level(
    node: &mut Node,
    descriptors: &[DescriptorYaml],
    parent_path: &str,
    invalid: &impl Fn(u64, u64, String) -> ConfigError,
) -> Result<(), ConfigError> {
    for d in descriptors {
        let (line, column) = (d.key.referenced.line(), d.key.referenced.column());
        let key = d.key.value.clone();
        if key.is_empty() {
            return Err(invalid(
                line,
                column,
                "descriptor key must not be empty".into(),
            ));
        }
        if d.share_threshold.unwrap_or(false) {
            return Err(invalid(
                line,
                column,
                "share_threshold is not supported by slidelog: a wildcard value gives each value its own log".into(),
            ));
        }
        let value = d.value.as_ref().map(|v| v.value.clone());
        let path = match &value {
            Some(v) => format!("{parent_path}.{key}_{v}"),
            None => format!("{parent_path}.{key}"),
        };
        let mut child = Node::default();
        if let Some(rl) = &d.rate_limit {
            child.rule = Some(Arc::new(build_rule(rl, d.shadow_mode, &path, invalid)?));
        }
        build_level(&mut child, &d.descriptors, &path, invalid)?;
        let duplicate = || {
            invalid(
                line,
                column,
                format!("duplicate descriptor {path:?} (same key and value at one level)"),
            )
        };
        match value {
            Some(v) if v.ends_with('*') => {
                let prefix = v.trim_end_matches('*').to_owned();
                if node
                    .wildcard
                    .iter()
                    .any(|(k, p, _)| *k == key && *p == prefix)
                {
                    return Err(duplicate());
                }
                node.wildcard.push((key, prefix, child));
            }
            Some(v) => {
                if node.exact.insert((key, v), child).is_some() {
                    return Err(duplicate());
                }
            }
            None => {
                if node.any.insert(key, child).is_some() {
                    return Err(duplicate());
                }
            }
        }
    }
    Ok(())
}

fn build_rule(
    rl: &Spanned<RateLimitYaml>,
    shadow_mode: bool,
    path: &str,
    invalid: &impl Fn(u64, u64, String) -> ConfigError,
) -> Result<Rule, ConfigError> {
    let at = |s: &serde_saphyr::Location| (s.line(), s.column());
    let (line, column) = at(&rl.referenced);
    let r = &rl.value;
    let unit = match &r.unit {
        Some(u) => Some(Unit::parse(&u.value).ok_or_else(|| {
            let (l, c) = at(&u.referenced);
            invalid(
                l,
                c,
                format!(
                    "unknown rate_limit unit {:?}: use second, minute, hour, day, week, month or year",
                    u.value
                ),
            )
        })?),
        None => None,
    };
    let name = r.name.as_ref().map(|n| n.value.clone());
    let replaces = r.replaces.iter().map(|x| x.name.clone()).collect();
    if r.unlimited {
        if unit.is_some() || r.requests_per_unit.is_some() || r.window.is_some() {
            return Err(invalid(
                line,
                column,
                "an unlimited rate_limit must not also set unit, requests_per_unit or window"
                    .into(),
            ));
        }
        return Ok(Rule {
            limit: None,
            unit: Unit::Second,
            requests_per_unit: 0,
            name,
            replaces,
            shadow_mode,
            path: path.to_owned(),
        });
    }
    let Some(rpu) = &r.requests_per_unit else {
        return Err(invalid(
            line,
            column,
            "rate_limit needs requests_per_unit (1 to 10000000) or unlimited: true".into(),
        ));
    };
    let window_ms = match (&r.window, unit) {
        (Some(w), _) => {
            let (l, c) = at(&w.referenced);
            let d = humantime::parse_duration(&w.value).map_err(|e| {
                invalid(
                    l,
                    c,
                    format!(
                        "rate_limit window {:?} is not a duration like 90s: {e}",
                        w.value
                    ),
                )
            })?;
            Limit::per(1, d)
                .map_err(|e| invalid(l, c, format!("rate_limit {e}")))?
                .window_ms()
        }
        (None, Some(u)) => u.millis(),
        (None, None) => {
            return Err(invalid(
                line,
                column,
                "rate_limit needs a unit (second, minute, hour, day, week, month, year) or a window"
                    .into(),
            ));
        }
    };
    let limit = Limit::new(rpu.value, window_ms).map_err(|e| {
        let (l, c) = at(&rpu.referenced);
        let msg = e.to_string().replacen("max", "requests_per_unit", 1);
        invalid(l, c, msg)
    })?;
    Ok(Rule {
        limit: Some(limit),
        unit: unit.unwrap_or_else(|| Unit::for_window(window_ms)),
        requests_per_unit: rpu.value,
        name,
        replaces,
        shadow_mode,
        path: path.to_owned(),
    })
}

/// The YAML files a path names: the file itself, or every `.yaml`/`.yml`
/// under a folder, sorted, hidden entries skipped.
pub fn config_files(path: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    let read_err = |p: &Path, e: std::io::Error| ConfigError::Read {
        path: p.to_owned(),
        reason: e.to_string(),
    };
    let meta = std::fs::metadata(path).map_err(|e| read_err(path, e))?;
    if !meta.is_dir() {
        return Ok(vec![path.to_owned()]);
    }
    let mut files = Vec::new();
    let mut stack = vec![path.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).map_err(|e| read_err(&dir, e))? {
            let entry = entry.map_err(|e| read_err(&dir, e))?;
            let p = entry.path();
            let hidden = entry.file_name().to_string_lossy().starts_with('.');
            if hidden {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else if matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")) {
                files.push(p);
            }
        }
    }
    files.sort();
    if files.is_empty() {
        return Err(ConfigError::NoFiles {
            path: path.to_owned(),
        });
    }
    Ok(files)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileYaml {
    domain: Spanned<String>,
    #[serde(default)]
    descriptors: Vec<DescriptorYaml>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DescriptorYaml {
    key: Spanned<String>,
    #[serde(default)]
    value: Option<Spanned<String>>,
    #[serde(default)]
    rate_limit: Option<Spanned<RateLimitYaml>>,
    #[serde(default)]
    descriptors: Vec<DescriptorYaml>,
    #[serde(default)]
    shadow_mode: bool,
    // Accepted for compatibility; they only shape the reference service's
    // own metrics.
    #[serde(default)]
    #[allow(dead_code)]
    detailed_metric: Option<bool>,
    #[serde(default)]
    #[allow(dead_code)]
    value_to_metric: Option<bool>,
    #[serde(default)]
    share_threshold: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RateLimitYaml {
    #[serde(default)]
    unit: Option<Spanned<String>>,
    #[serde(default)]
    requests_per_unit: Option<Spanned<u64>>,
    #[serde(default)]
    unlimited: bool,
    #[serde(default)]
    name: Option<Spanned<String>>,
    #[serde(default)]
    replaces: Vec<ReplacesYaml>,
    /// slidelog's extension: a window that is not one unit.
    #[serde(default)]
    window: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplacesYaml {
    name: String,
}

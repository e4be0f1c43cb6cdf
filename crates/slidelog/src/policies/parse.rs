//! One policy: its types ([`Policy`], [`PolicyLimit`]) and its line of the
//! policy file, parsed with every error at its file, line and column
//! (1-based; the column counts characters).

use crate::FailurePolicy;
use slidelog_core::Limit;

/// One limit of a policy: the [`Limit`] (which carries its `block` and
/// `granularity`) and the settings as the file wrote them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyLimit {
    /// The limit (`max` per `window`, its name).
    pub limit: Limit,
    /// `block=DURATION`: how long a key this limit refused stays refused.
    pub block_ms: Option<u64>,
    /// `granularity=DURATION`: records counted at this granule.
    pub granularity_ms: Option<u64>,
}

impl From<&PolicyLimit> for Limit {
    fn from(p: &PolicyLimit) -> Self {
        p.limit
    }
}

/// A named set of limits.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    name: String,
    limits: Vec<PolicyLimit>,
    on_store_error: Option<FailurePolicy>,
}

impl Policy {
    /// The policy's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its limits with their settings.
    pub fn policy_limits(&self) -> &[PolicyLimit] {
        &self.limits
    }

    /// Its limits, as a request, the layer's routes or the CLI take them.
    pub fn limits(&self) -> Vec<Limit> {
        self.limits.iter().map(Limit::from).collect()
    }

    /// Its `on-store-error`, when it sets one (the service's otherwise).
    pub fn on_store_error(&self) -> Option<FailurePolicy> {
        self.on_store_error
    }
}

/// Why a policy file did not load.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// The file could not be read.
    #[error("policies: cannot read {file}: {error}")]
    Read {
        /// The file.
        file: String,
        /// What the system said.
        error: String,
    },
    /// No policy has this name.
    #[error("no policy {name:?} (policies: {known})")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The names there are.
        known: String,
    },
    /// A line is not a policy.
    #[error("{file}:{line}:{col}: {message}")]
    Syntax {
        /// The file.
        file: String,
        /// The line (1-based).
        line: usize,
        /// The column (1-based, in characters).
        col: usize,
        /// What is wrong, naming the expected form or bound.
        message: String,
    },
}

/// Where a piece of text sits: its line and its column.
#[derive(Clone, Copy)]
struct At<'a> {
    file: &'a str,
    line: usize,
}

impl At<'_> {
    /// An error at `col` (0-based characters into the line).
    fn error(&self, col: usize, message: impl Into<String>) -> PolicyError {
        PolicyError::Syntax {
            file: self.file.to_owned(),
            line: self.line,
            col: col + 1,
            message: message.into(),
        }
    }
}

/// Parses line `line` (1-based) of `file`: `None` for a blank or comment
/// line.
pub(super) fn parse_line(
    file: &str,
    line: usize,
    raw: &str,
) -> Result<Option<Policy>, PolicyError> {
    let at = At { file, line };
    let content = raw.split('#').next().unwrap_or("");
    if content.trim().is_empty() {
        return Ok(None);
    }
    policy_of(at, raw, content).map(Some)
}

/// The error of line `line` (1-based) at its first non-blank character.
pub(super) fn line_error(file: &str, line: usize, raw: &str, message: String) -> PolicyError {
    At { file, line }.error(column(raw, raw.trim_start()), message)
}

/// The column (0-based characters) of `part`, a slice of `line`.
fn column(line: &str, part: &str) -> usize {
    let offset = part.as_ptr() as usize - line.as_ptr() as usize;
    line[..offset].chars().count()
}

/// One `NAME: ITEM, ITEM, …` line.
fn policy_of(at: At<'_>, raw: &str, content: &str) -> Result<Policy, PolicyError> {
    let Some((name, items)) = content.split_once(':') else {
        let col = column(raw, content.trim_start());
        return Err(at.error(
            col,
            "expected `NAME: LIMIT, LIMIT, …` (no `:` on this line)",
        ));
    };
    let name = name.trim();
    let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if name.is_empty() || name.len() > 64 || !name.chars().all(valid) {
        let col = column(raw, content.trim_start());
        return Err(at.error(
            col,
            format!("policy name {name:?} must be 1 to 64 of A-Z a-z 0-9 - _ ."),
        ));
    }
    let mut policy = Policy {
        name: name.to_owned(),
        limits: Vec::new(),
        on_store_error: None,
    };
    for item in items.split(',') {
        let text = item.trim();
        let col = if text.is_empty() {
            column(raw, item)
        } else {
            column(raw, text)
        };
        if text.is_empty() {
            return Err(at.error(
                col,
                "empty item: expected a limit such as requests=100/minute",
            ));
        }
        parse_item(&mut policy, text).map_err(|message| at.error(col, message))?;
    }
    if policy.limits.is_empty() {
        return Err(at.error(
            column(raw, content.trim_start()),
            "a policy needs at least one limit",
        ));
    }
    if policy.limits.len() > slidelog_core::limit::MAX_LIMITS {
        let max = slidelog_core::limit::MAX_LIMITS;
        return Err(at.error(0, format!("a policy has at most {max} limits")));
    }
    let limits = policy.limits();
    slidelog_core::limit::check_names(&limits).map_err(|e| at.error(0, e.to_string()))?;
    Ok(policy)
}

/// One item: a limit with its settings, or an option.
fn parse_item(policy: &mut Policy, text: &str) -> Result<(), String> {
    let mut words = text.split_whitespace();
    let first = words.next().unwrap_or_default();
    if !first.contains('/') {
        if words.next().is_some() {
            return Err(format!(
                "{text:?}: expected a limit (MAX/WINDOW) or `on-store-error=…`"
            ));
        }
        return parse_option(policy, first);
    }
    let limit: Limit = first.parse().map_err(|e| format!("{first:?}: {e}"))?;
    let mut item = PolicyLimit {
        limit,
        block_ms: None,
        granularity_ms: None,
    };
    for word in words {
        match word.split_once('=') {
            Some(("block", d)) => {
                let ms = duration_ms("block", d)?;
                item.limit = item
                    .limit
                    .with_block_ms(ms)
                    .map_err(|e| format!("block={d}: {e}"))?;
                item.block_ms = Some(ms);
            }
            Some(("granularity", d)) => {
                let g = duration_ms("granularity", d)?;
                if !item.limit.window_ms().is_multiple_of(g) {
                    return Err(format!(
                        "granularity={d} must divide the window ({} ms)",
                        item.limit.window_ms()
                    ));
                }
                item.limit = item
                    .limit
                    .with_granularity(g)
                    .map_err(|e| format!("granularity={d}: {e}"))?;
                item.granularity_ms = Some(g);
            }
            _ => {
                return Err(format!(
                    "{word:?}: a limit takes `block=DURATION` or `granularity=DURATION`"
                ));
            }
        }
    }
    policy.limits.push(item);
    Ok(())
}

/// `on-store-error=fail-open|fail-closed`.
fn parse_option(policy: &mut Policy, text: &str) -> Result<(), String> {
    match text.split_once('=') {
        Some(("on-store-error", "fail-open")) => {
            policy.on_store_error = Some(FailurePolicy::FailOpen)
        }
        Some(("on-store-error", "fail-closed")) => {
            policy.on_store_error = Some(FailurePolicy::FailClosed);
        }
        Some(("on-store-error", other)) => {
            return Err(format!(
                "on-store-error={other}: expected fail-open or fail-closed"
            ));
        }
        _ => {
            return Err(format!(
                "{text:?}: expected a limit (MAX/WINDOW) or `on-store-error=…`"
            ));
        }
    }
    Ok(())
}

/// A duration: digits and a unit (`ms`, `s`, `m`, `h`, `d`), 1 ms to 366 days.
fn duration_ms(field: &str, text: &str) -> Result<u64, String> {
    let digits = text.len() - text.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let (count, unit) = text.split_at(digits);
    let unit_ms = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => {
            return Err(format!(
                "{field}={text}: expected a duration such as 500ms, 30s, 10m, 1h, 1d"
            ));
        }
    };
    let max = slidelog_core::limit::MAX_WINDOW_MS;
    match count
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit_ms))
    {
        Some(ms) if (1..=max).contains(&ms) => Ok(ms),
        _ => Err(format!(
            "{field}={text}: must be from 1ms to {max}ms (366 days)"
        )),
    }
}

//! [`InspectOptions`]: what `inspect` scans, what it checks, and their
//! bounds; and [`prefix_pattern`], the SCAN pattern of a key prefix.

use crate::InspectError;
use crate::analysis::KeyLimits;
use crate::report::Thresholds;
use std::time::Duration;

/// How to inspect.
#[derive(Debug, Clone)]
pub struct InspectOptions {
    /// SCAN MATCH pattern. Default `rate:sliding:*`.
    pub pattern: String,
    /// SCAN COUNT hint, 1 ..= 100,000. Default 1,000.
    pub count: u32,
    /// Keys per top list, 0 ..= 10,000. Default 10.
    pub top: usize,
    /// Keys listed per problem, 0 ..= 100,000. Default 20.
    pub list: usize,
    /// The configured `max` (1 ..= 10,000,000) for the oversize check; None skips it.
    pub max: Option<u64>,
    /// Where `max` came from, for the report (`--max`, `config:<path>`).
    pub max_source: Option<String>,
    /// The `max` of individual keys (from a limits config); keys it does not
    /// know are compared with `max`.
    pub key_limits: Option<KeyLimits>,
    /// Members read from each set for the uniqueness check, 1 ..= 100. Default 3.
    pub sample: usize,
    /// Thresholds of the checks.
    pub thresholds: Thresholds,
    /// Bound on connecting and on each reply. Default 10 s.
    pub timeout: Duration,
}

impl Default for InspectOptions {
    fn default() -> Self {
        Self {
            pattern: prefix_pattern(slidelog_core::DEFAULT_KEY_PREFIX),
            count: 1_000,
            top: 10,
            list: 20,
            max: None,
            max_source: None,
            key_limits: None,
            sample: 3,
            thresholds: Thresholds::default(),
            timeout: Duration::from_secs(10),
        }
    }
}

impl InspectOptions {
    /// Checks every option against its bound.
    pub fn validate(&self) -> Result<(), InspectError> {
        self.validate_scan()?;
        self.validate_checks()
    }

    /// Checks what and how much is scanned and listed.
    fn validate_scan(&self) -> Result<(), InspectError> {
        check(
            !self.pattern.is_empty(),
            "--pattern",
            "\"\"",
            "a non-empty glob",
        )?;
        check(
            (1..=100_000).contains(&self.count),
            "--count",
            self.count,
            "1 ..= 100000",
        )?;
        check(self.top <= 10_000, "--top", self.top, "0 ..= 10000")?;
        check(self.list <= 100_000, "--list", self.list, "0 ..= 100000")
    }

    /// Checks the limit, the sample, the thresholds and the timeout.
    fn validate_checks(&self) -> Result<(), InspectError> {
        if let Some(max) = self.max {
            check(
                (1..=slidelog_core::MAX_MAX).contains(&max),
                "--max",
                max,
                "1 ..= 10000000",
            )?;
        }
        check(
            (1..=100).contains(&self.sample),
            "sample",
            self.sample,
            "1 ..= 100",
        )?;
        check(
            self.thresholds.huge_zcard >= 1,
            "--huge",
            self.thresholds.huge_zcard,
            ">= 1",
        )?;
        check(
            self.thresholds.oversize_factor >= 1,
            "oversize_factor",
            self.thresholds.oversize_factor,
            ">= 1",
        )?;
        check(
            !self.timeout.is_zero(),
            "--timeout",
            format!("{:?}", self.timeout),
            "above 0",
        )
    }
}

/// Passes when `ok`; otherwise names the option, its value and its bound.
fn check(
    ok: bool,
    field: &'static str,
    value: impl ToString,
    bound: &'static str,
) -> Result<(), InspectError> {
    if ok {
        Ok(())
    } else {
        Err(InspectError::InvalidOption {
            field,
            value: value.to_string(),
            bound,
        })
    }
}

/// Builds the SCAN pattern matching every key that starts with `prefix`: the
/// prefix with Redis glob characters (`*?[]\\`) escaped, then `*`.
pub fn prefix_pattern(prefix: &str) -> String {
    let mut pattern = String::with_capacity(prefix.len() + 1);
    for c in prefix.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('*');
    pattern
}

#[cfg(test)]
mod tests {
    #[test]
    fn prefix_patterns_escape_glob_characters() {
        assert_eq!(super::prefix_pattern("rate:sliding:"), "rate:sliding:*");
        assert_eq!(super::prefix_pattern("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\*");
    }
}

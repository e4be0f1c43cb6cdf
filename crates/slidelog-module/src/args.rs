//! The arguments of the module's commands, parsed and bounded before any key
//! is touched (docs/design.md §4.3): every number is ASCII digits that fit its
//! field, and an error names the field and its bound.

use crate::error::CommandError;
use slidelog_core::{Limit, MAX_KEY_BYTES, MAX_LIMITS, MAX_NOW_MS, Mode, Request};

/// A parsed `SLIDELOG.CHECK`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// Record (a check) or peek.
    pub mode: Mode,
    /// The caller's time, or `None` for the server's clock (`*`).
    pub now_ms: Option<u64>,
    /// The caller's deadline on the server's clock, `None` for `0`.
    pub deadline_ms: Option<u64>,
    /// The validated request (its key is a stand-in: keys are binary).
    pub request: Request,
}

fn bad(field: impl Into<String>, problem: impl Into<String>) -> CommandError {
    CommandError::Argument {
        field: field.into(),
        problem: problem.into(),
    }
}

/// An unsigned decimal integer in `lo..=hi` (no sign, no spaces).
pub fn number(bytes: &[u8], field: &str, lo: u64, hi: u64) -> Result<u64, CommandError> {
    let range = || format!("must be an integer from {lo} to {hi}");
    if bytes.is_empty() || bytes.len() > 20 || !bytes.iter().all(u8::is_ascii_digit) {
        return Err(bad(field, range()));
    }
    let value = bytes
        .iter()
        .try_fold(0u64, |v, &d| {
            v.checked_mul(10)?.checked_add(u64::from(d - b'0'))
        })
        .ok_or_else(|| bad(field, range()))?;
    if !(lo..=hi).contains(&value) {
        return Err(bad(field, range()));
    }
    Ok(value)
}

/// A key of 1 ..= 512 bytes.
pub fn key(bytes: &[u8]) -> Result<(), CommandError> {
    if bytes.is_empty() || bytes.len() > MAX_KEY_BYTES {
        return Err(bad(
            "key",
            format!("must be 1 to {MAX_KEY_BYTES} bytes, got {}", bytes.len()),
        ));
    }
    Ok(())
}

/// `<key> <RECORD|PEEK> <now_ms|*> <deadline_ms|0> <n> (<max> <window_ms> <cost>){n}`
/// (`args` without the command name).
pub fn check(args: &[&[u8]]) -> Result<Check, CommandError> {
    let arity = |expected: String| CommandError::Arity {
        command: "slidelog.check",
        expected,
    };
    if args.len() < 5 {
        return Err(arity(
            "SLIDELOG.CHECK <key> <RECORD|PEEK> <now_ms|*> <deadline_ms|0> <n> <max_1> <window_ms_1> <cost_1> ...".into(),
        ));
    }
    key(args[0])?;
    let mode = match args[1].to_ascii_uppercase().as_slice() {
        b"RECORD" => Mode::Record,
        b"PEEK" => Mode::Peek,
        _ => return Err(bad("mode", "must be RECORD or PEEK")),
    };
    let now_ms = match args[2] {
        b"*" => None,
        given => Some(number(given, "now_ms", 0, MAX_NOW_MS)?),
    };
    let deadline_ms = Some(number(args[3], "deadline_ms", 0, MAX_NOW_MS)?).filter(|&d| d > 0);
    let n = number(args[4], "n", 1, MAX_LIMITS as u64)? as usize;
    if args.len() != 5 + 3 * n {
        return Err(arity(format!(
            "n = {n} limits take {} arguments after the key's four, got {}",
            3 * n,
            args.len() - 5
        )));
    }
    let mut limits = Vec::with_capacity(n);
    let mut costs = Vec::with_capacity(n);
    for (i, triple) in args[5..].chunks_exact(3).enumerate() {
        let position = i + 1;
        let max = number(
            triple[0],
            &format!("max_{position}"),
            1,
            slidelog_core::MAX_MAX,
        )?;
        let window = number(
            triple[1],
            &format!("window_ms_{position}"),
            1,
            slidelog_core::MAX_WINDOW_MS,
        )?;
        let cost = number(triple[2], &format!("cost_{position}"), 1, max)?;
        limits.push(Limit::new(max, window)?);
        costs.push(cost);
    }
    let request = Request::with_costs("k", limits, costs)?;
    Ok(Check {
        mode,
        now_ms,
        deadline_ms,
        request,
    })
}

/// A parsed `SLIDELOG.APPLY` (the change a decision made, as replicated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Apply {
    /// The time the decision used.
    pub now_ms: u64,
    /// Drop records expired for this window at `now_ms` (0: drop nothing).
    pub expire_window_ms: u64,
    /// Set the key's absolute expiry, Unix ms (0: leave it).
    pub expire_at_ms: u64,
    /// Append one record at `now_ms` with these costs (empty: append nothing).
    pub costs: Vec<u64>,
}

/// `<key> <now_ms> <expire_window_ms|0> <expire_at_ms|0> [<cost> ...]`.
pub fn apply(args: &[&[u8]]) -> Result<Apply, CommandError> {
    if args.len() < 4 || args.len() > 4 + MAX_LIMITS {
        return Err(CommandError::Arity {
            command: "slidelog.apply",
            expected: format!(
                "SLIDELOG.APPLY <key> <now_ms> <expire_window_ms|0> <expire_at_ms|0> [<cost> ...] (at most {MAX_LIMITS} costs)"
            ),
        });
    }
    key(args[0])?;
    let costs = args[4..]
        .iter()
        .enumerate()
        .map(|(i, c)| number(c, &format!("cost_{}", i + 1), 1, slidelog_core::MAX_COST))
        .collect::<Result<_, _>>()?;
    Ok(Apply {
        now_ms: number(args[1], "now_ms", 0, MAX_NOW_MS)?,
        expire_window_ms: number(args[2], "expire_window_ms", 0, slidelog_core::MAX_WINDOW_MS)?,
        expire_at_ms: number(args[3], "expire_at_ms", 0, i64::MAX as u64)?,
        costs,
    })
}

/// The one argument of `SLIDELOG.RESET` / `SLIDELOG.INFO`: a key.
pub fn single_key(command: &'static str, args: &[&[u8]]) -> Result<(), CommandError> {
    if args.len() != 1 {
        return Err(CommandError::Arity {
            command,
            expected: "takes exactly one key".into(),
        });
    }
    key(args[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(words: &str) -> Result<Check, CommandError> {
        let parts: Vec<&[u8]> = words.split(' ').map(str::as_bytes).collect();
        check(&parts)
    }

    #[test]
    fn a_check_parses_its_limits_and_costs() {
        let c = parse("k RECORD * 0 2 10 1000 1 500 60000 40").unwrap();
        assert_eq!(
            (c.mode, c.now_ms, c.deadline_ms),
            (Mode::Record, None, None)
        );
        assert_eq!(c.request.costs(), &[1, 40]);
        let c = parse("k peek 17 99 1 3 10 3").unwrap();
        assert_eq!(
            (c.mode, c.now_ms, c.deadline_ms),
            (Mode::Peek, Some(17), Some(99))
        );
    }

    #[test]
    fn bad_arguments_name_field_and_bound() {
        let err = |w: &str| parse(w).unwrap_err().to_string();
        assert!(err("k RECORD * 0 1 0 1000 1").contains("max_1"));
        assert!(
            err("k RECORD * 0 1 10 0 1")
                .contains("window_ms_1 must be an integer from 1 to 31622400000")
        );
        assert!(err("k RECORD * 0 1 10 10 11").contains("cost_1 must be an integer from 1 to 10"));
        assert!(err("k RECORD * 0 17").contains("n must be an integer from 1 to 16"));
        assert!(err("k RECORD -5 0 1 1 1 1").contains("now_ms"));
        assert!(err("k RECORD 18446744073709551616 0 1 1 1 1").contains("now_ms"));
        assert!(err("k RECORD * 0 2 1 1 1").contains("wrong number of arguments"));
        assert!(err("k MAYBE * 0 1 1 1 1").contains("mode"));
        assert!(err(" RECORD * 0 1 1 1 1").contains("key"));
    }
}

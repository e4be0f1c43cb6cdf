//! The arguments of `SLIDELOG.CHECKALL` (docs/design.md §4.3, §4.7):
//! `<RECORD|PEEK> <now_ms|*> <deadline_ms|0>` then, per check, `<key>
//! <n>,<max_1>,<window_ms_1>,<cost_1>,…`. Each check's limits are one
//! argument so that the keys are every other argument (a key spec of
//! first 4, last -2, step 2: Cluster routing and `COMMAND GETKEYS`).

use super::{Name, bad, clock_args, key, mode, number};
use crate::error::CommandError;
use slidelog_core::{Checks, MAX_CHECKS, MAX_COST, MAX_LIMITS, Mode, Request};

/// A parsed `SLIDELOG.CHECKALL`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckAll {
    /// Record (a check) or peek.
    pub mode: Mode,
    /// The caller's time, or `None` for the server's clock (`*`).
    pub now_ms: Option<u64>,
    /// The caller's deadline on the server's clock, `None` for `0`.
    pub deadline_ms: Option<u64>,
    /// One check per key, in order (their keys are stand-ins: keys are
    /// binary; check `c`'s key is argument `3 + 2c`).
    pub checks: Checks,
}

const USAGE: &str = "SLIDELOG.CHECKALL <RECORD|PEEK> <now_ms|*> <deadline_ms|0> <key_1> <n>,<max_1>,<window_ms_1>,<cost_1>,... [<key_2> <limits_2> ...]";

/// `args` without the command name. Refused, naming the field and its
/// bound: a wrong arity, more than `MAX_CHECKS` keys, a key given twice
/// (two checks on one log would let the first record before the second
/// decides: the client merges them), and every limit's bounds.
pub fn check_all(args: &[&[u8]]) -> Result<CheckAll, CommandError> {
    if args.len() < 5 || !(args.len() - 3).is_multiple_of(2) {
        return Err(CommandError::Arity {
            command: "slidelog.checkall",
            expected: USAGE.into(),
        });
    }
    let m = (args.len() - 3) / 2;
    if m > MAX_CHECKS {
        return Err(bad(
            "checks",
            format!("must hold between 1 and {MAX_CHECKS} keys, got {m}"),
        ));
    }
    let mode = mode(args[0])?;
    let (now_ms, deadline_ms) = clock_args(args[1], args[2])?;
    let pairs: Vec<(&[u8], &[u8])> = args[3..].chunks_exact(2).map(|p| (p[0], p[1])).collect();
    let mut requests = Vec::with_capacity(m);
    for (c, (name, limits)) in pairs.iter().enumerate() {
        key(name).map_err(|e| in_check(e, c))?;
        if let Some(first) = pairs[..c].iter().position(|(other, _)| other == name) {
            return Err(bad(
                format!("key_{}", c + 1),
                format!("repeats key_{}: one check per key", first + 1),
            ));
        }
        requests.push(check_limits(limits, c).map_err(|e| in_check(e, c))?);
    }
    Ok(CheckAll {
        mode,
        now_ms,
        deadline_ms,
        checks: Checks::new(requests)?,
    })
}

/// An argument error of check `c` (0-based), named as that check's.
fn in_check(error: CommandError, c: usize) -> CommandError {
    match error {
        CommandError::Argument { field, problem } => CommandError::Argument {
            field: format!("check {} {field}", c + 1),
            problem,
        },
        other => other,
    }
}

/// One check's `<n>,<max_1>,<window_ms_1>,<cost_1>,…`: its limits and
/// costs. A cost is 0 ..= `MAX_COST`, not bounded by its `max`: the client
/// merges one key given twice into one check whose costs add up, which
/// may pass a `max` (such a check is refused, never an input error).
fn check_limits(list: &[u8], c: usize) -> Result<Request, CommandError> {
    let parts: smallvec::SmallVec<[&[u8]; 49]> = list.split(|&b| b == b',').collect();
    let n = number(parts[0], Name("n", 0), 1, MAX_LIMITS as u64)? as usize;
    if parts.len() != 1 + 3 * n {
        return Err(bad(
            "limits",
            format!(
                "must be n then n triples max,window_ms,cost: n = {n} needs {} numbers, got {}",
                1 + 3 * n,
                parts.len()
            ),
        ));
    }
    let mut limits = Vec::with_capacity(n);
    let mut costs = Vec::with_capacity(n);
    for (i, triple) in parts[1..].chunks_exact(3).enumerate() {
        let position = i + 1;
        limits.push(super::limit_of(triple[0], triple[1], position)?);
        costs.push(number(triple[2], Name("cost", position), 0, MAX_COST)?);
    }
    // Stand-in keys, distinct, so that no two checks are merged again.
    Ok(Request::usage(format!("k{c}"), limits, costs)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<CheckAll, CommandError> {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        check_all(&args)
    }

    #[test]
    fn keys_and_limits_come_in_pairs() {
        let call = parse(&[
            "RECORD",
            "*",
            "0",
            "a",
            "1,10,60000,1",
            "b",
            "2,3,1000,2,5,9000,1",
        ])
        .unwrap();
        assert_eq!(call.checks.len(), 2);
        assert_eq!(call.checks.as_slice()[1].costs(), [2, 1]);
        assert!(matches!(
            parse(&["RECORD", "*", "0", "a"]),
            Err(CommandError::Arity { .. })
        ));
        assert!(matches!(
            parse(&["RECORD", "*", "0", "a", "1,10,60000,1", "b"]),
            Err(CommandError::Arity { .. })
        ));
    }

    #[test]
    fn bad_limits_and_repeated_keys_are_named() {
        let err = parse(&["PEEK", "5", "0", "a", "1,10,60000"]).unwrap_err();
        assert!(err.to_string().contains("check 1 limits"), "{err}");
        let err = parse(&["PEEK", "5", "0", "a", "1,10,0,1"]).unwrap_err();
        assert!(err.to_string().contains("check 1 window_ms_1"), "{err}");
        let err = parse(&["PEEK", "5", "0", "a", "1,1,1,1", "a", "1,1,1,1"]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "ERR key_2 repeats key_1: one check per key"
        );
        let err = parse(&["MAYBE", "5", "0", "a", "1,1,1,1"]).unwrap_err();
        assert!(err.to_string().contains("mode"), "{err}");
        // A merged cost above max is a request (refused when decided).
        let call = parse(&["RECORD", "5", "0", "a", "1,1,1000,2"]).unwrap();
        assert_eq!(call.checks.as_slice()[0].costs(), [2]);
    }
}

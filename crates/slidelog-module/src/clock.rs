//! How far a command's times may run ahead of the server's clock
//! (docs/design.md §4.3).
//!
//! A record stamped in the future stays live until the clock passes it by
//! a window, and the key's expiry follows its newest record: one
//! `SLIDELOG.CHECK` at `now_ms = 2^53 - 1`, or one forged `SLIDELOG.APPLY`,
//! blocked a key for good. So a caller's explicit `now_ms` may be at most
//! [`MAX_AHEAD_MS`] ahead of the server's clock (past times stay allowed:
//! replays, tests, a clock that stepped back). What a primary propagates
//! is held to the same bounds plus [`REPLICA_SKEW_MS`], the difference a
//! replica's clock may have from its primary's: a change the primary made
//! must never be refused by its replica (they would diverge). Every key's
//! expiry is at most [`MAX_TTL_MS`] ahead. A settled receipt's `until_ms`
//! (how long its nonce is kept, docs/design.md §4.6) is at most
//! [`UNTIL_AHEAD_MS`] ahead: a nonce kept for good would hold one of the
//! key's `MAX_SPENT` places for good.

use crate::args::{Action, Apply};
use crate::error::CommandError;
use slidelog_core::{MAX_RECEIPT_TTL_MS, MAX_WINDOW_MS};

/// How far ahead of the server's clock a caller's `now_ms` may be (1 hour):
/// far more than any clock skew between a caller and its server.
pub const MAX_AHEAD_MS: u64 = 60 * 60 * 1000;

/// How far a replica's clock may be behind its primary's (1 hour), for what
/// `SLIDELOG.APPLY` accepts.
pub const REPLICA_SKEW_MS: u64 = 60 * 60 * 1000;

/// How far ahead of the server's clock an APPLY's `now_ms` may be: a
/// caller's bound on the primary, plus the replica's skew.
pub const APPLY_AHEAD_MS: u64 = MAX_AHEAD_MS + REPLICA_SKEW_MS;

/// The longest expiry a command sets, from the server's clock: the longest
/// window after the newest record, which an APPLY may have placed
/// [`APPLY_AHEAD_MS`] ahead. A longer one (a record in the future left by
/// an older version, a caller whose time runs far behind the log's) is cut
/// to this: by then the newest record has left every window on the
/// server's clock.
pub const MAX_TTL_MS: u64 = MAX_WINDOW_MS + APPLY_AHEAD_MS;

/// The latest expiry an APPLY may set, from the server's clock: the
/// primary's longest, plus the replica's skew.
pub const APPLY_TTL_MS: u64 = MAX_TTL_MS + REPLICA_SKEW_MS;

/// How far ahead of the server's clock a receipt a settle names may be
/// valid: the longest validity a key gives its receipts, from an
/// instance's clock that may be [`MAX_AHEAD_MS`] ahead of the server's.
pub const UNTIL_AHEAD_MS: u64 = MAX_RECEIPT_TTL_MS + MAX_AHEAD_MS;

/// The same for what `SLIDELOG.APPLY` accepts: plus the replica's skew.
pub const APPLY_UNTIL_AHEAD_MS: u64 = UNTIL_AHEAD_MS + REPLICA_SKEW_MS;

/// `<field> must <be> at most the server's clock plus <ahead> ms (...)`.
fn too_far(field: &str, be: &str, got: u64, server_ms: u64, ahead: u64) -> CommandError {
    CommandError::Argument {
        field: field.into(),
        problem: format!(
            "must {be} at most the server's clock plus {ahead} ms ({}): got {got}, the server's clock is {server_ms}",
            server_ms.saturating_add(ahead)
        ),
    }
}

/// A caller's explicit `now_ms` (CHECK, SETTLE, CHARGE): at most
/// [`MAX_AHEAD_MS`] after the server's clock.
pub fn caller_now(now_ms: u64, server_ms: u64) -> Result<(), CommandError> {
    if now_ms > server_ms.saturating_add(MAX_AHEAD_MS) {
        return Err(too_far("now_ms", "be", now_ms, server_ms, MAX_AHEAD_MS));
    }
    Ok(())
}

/// A settled receipt's `until_ms` (SETTLE's `SPEND`): at most
/// [`UNTIL_AHEAD_MS`] after the server's clock; any time before it (a
/// receipt past its validity is the instance's to refuse, docs/design.md
/// §4.6).
pub fn caller_until(until_ms: u64, server_ms: u64) -> Result<(), CommandError> {
    if until_ms > server_ms.saturating_add(UNTIL_AHEAD_MS) {
        return Err(too_far(
            "until_ms",
            "be",
            until_ms,
            server_ms,
            UNTIL_AHEAD_MS,
        ));
    }
    Ok(())
}

/// The `until_ms` of every receipt an APPLY keeps as settled: at most
/// [`APPLY_UNTIL_AHEAD_MS`] after the server's clock.
fn apply_untils(action: &Action, server_ms: u64) -> Result<(), CommandError> {
    let latest = match action {
        Action::Settle(target) => target.spend.map(|s| s.until_ms),
        Action::Spent(entries) => entries.iter().map(|s| s.until_ms).max(),
        Action::Append | Action::Merge | Action::Sweep | Action::Round { .. } => None,
    };
    match latest.filter(|&u| u > server_ms.saturating_add(APPLY_UNTIL_AHEAD_MS)) {
        Some(u) => Err(too_far(
            "until_ms",
            "be",
            u,
            server_ms,
            APPLY_UNTIL_AHEAD_MS,
        )),
        None => Ok(()),
    }
}

/// An APPLY's times: its `now_ms` at most [`APPLY_AHEAD_MS`] after the
/// server's clock, the expiry it sets at most [`APPLY_TTL_MS`] after it
/// (in the past is fine: an AOF replayed later), and the validity of the
/// receipts it keeps as settled at most [`APPLY_UNTIL_AHEAD_MS`] after it.
pub fn apply_times(apply: &Apply, server_ms: u64) -> Result<(), CommandError> {
    apply_untils(&apply.action, server_ms)?;
    if apply.now_ms > server_ms.saturating_add(APPLY_AHEAD_MS) {
        return Err(too_far(
            "now_ms",
            "be",
            apply.now_ms,
            server_ms,
            APPLY_AHEAD_MS,
        ));
    }
    match apply.expire_at_ms {
        Some(at) if at > server_ms.saturating_add(APPLY_TTL_MS) => Err(too_far(
            "expire_in_ms",
            "leave the key's expiry (now_ms + expire_in_ms)",
            at,
            server_ms,
            APPLY_TTL_MS,
        )),
        _ => Ok(()),
    }
}

/// The key's expiry, Unix ms on the server's clock: `ttl_ms` (how long its
/// newest record stays in the longest window, on the call's time) after
/// the server's clock, at most [`MAX_TTL_MS`].
pub fn expiry(ttl_ms: u64, server_ms: u64) -> u64 {
    ttl_ms.min(MAX_TTL_MS).saturating_add(server_ms).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(now_ms: u64, expire_at_ms: Option<u64>) -> Apply {
        Apply {
            now_ms,
            expire_window_ms: 0,
            expire_at_ms,
            costs: Vec::new(),
            action: Action::Append,
        }
    }

    #[test]
    fn a_caller_may_be_an_hour_ahead_and_any_time_behind() {
        let server = 1_800_000_000_000;
        assert!(caller_now(0, server).is_ok());
        assert!(caller_now(server + MAX_AHEAD_MS, server).is_ok());
        let e = caller_now(server + MAX_AHEAD_MS + 1, server).unwrap_err();
        assert_eq!(
            e.to_string(),
            "ERR now_ms must be at most the server's clock plus 3600000 ms (1800003600000): got 1800003600001, the server's clock is 1800000000000"
        );
        assert!(caller_now(9_007_199_254_740_991, server).is_err());
    }

    #[test]
    fn apply_allows_the_replica_skew_and_bounds_the_expiry() {
        let server = 1_800_000_000_000;
        assert!(apply_times(&apply(server + APPLY_AHEAD_MS, None), server).is_ok());
        let e = apply_times(&apply(server + APPLY_AHEAD_MS + 1, None), server);
        assert!(
            e.unwrap_err()
                .to_string()
                .contains("now_ms must be at most")
        );
        // An old change replayed from an AOF: every time in the past.
        assert!(apply_times(&apply(1_000, Some(2_000)), server).is_ok());
        let at = server + APPLY_TTL_MS;
        assert!(apply_times(&apply(server, Some(at)), server).is_ok());
        let e = apply_times(&apply(server, Some(at + 1)), server).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("ERR expire_in_ms must leave the key's expiry (now_ms + expire_in_ms) at most the server's clock plus 31633200000 ms"),
            "{e}"
        );
    }

    #[test]
    fn a_receipt_s_validity_is_bounded_by_the_longest_one() {
        let server = 1_800_000_000_000;
        assert!(caller_until(0, server).is_ok());
        assert!(caller_until(server + UNTIL_AHEAD_MS, server).is_ok());
        let e = caller_until(server + UNTIL_AHEAD_MS + 1, server).unwrap_err();
        assert_eq!(
            e.to_string(),
            "ERR until_ms must be at most the server's clock plus 90000000 ms (1800090000000): got 1800090000001, the server's clock is 1800000000000"
        );
        let spend = |until_ms| slidelog_core::Spend { nonce: 1, until_ms };
        let mut a = apply(server, None);
        a.action = Action::Spent(vec![spend(1), spend(server + APPLY_UNTIL_AHEAD_MS)]);
        assert!(apply_times(&a, server).is_ok());
        a.action = Action::Spent(vec![spend(1), spend(server + APPLY_UNTIL_AHEAD_MS + 1)]);
        let e = apply_times(&a, server).unwrap_err().to_string();
        assert!(
            e.starts_with("ERR until_ms must be at most the server's clock plus 93600000 ms"),
            "{e}"
        );
    }

    #[test]
    fn an_expiry_is_cut_to_the_longest_ttl() {
        assert_eq!(expiry(0, 0), 1);
        assert_eq!(expiry(60_000, 5), 60_005);
        assert_eq!(expiry(u64::MAX, 5), MAX_TTL_MS + 5);
    }
}

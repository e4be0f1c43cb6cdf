//! The joint decision over several logs (docs/design.md §1, "One request,
//! several keys"): the reference every store's joint decision must agree
//! with, and the one the memory store and the module run.

use super::{decide_and_record_each, evaluate_each};
use crate::{Checks, JointDecision, Log, Mode};

/// Decides `checks` over their logs (`logs[i]` is the log of
/// `checks.as_slice()[i]`'s key) at `now`, all or nothing: each check is
/// evaluated first, and only when every one admits (and `mode` records)
/// are they recorded, each as a check of its own would be. The caller holds
/// every log for the whole call (the locks of their shards, a script's
/// atomicity), so the evaluation and the recording see the same logs.
///
/// # Panics
/// When `logs` and `checks` differ in length (a caller's bug).
pub fn decide_all(logs: &mut [&mut Log], now: u64, checks: &Checks, mode: Mode) -> JointDecision {
    assert_eq!(logs.len(), checks.len(), "one log per check");
    let evaluated: Vec<_> = logs
        .iter()
        .zip(checks)
        .map(|(log, request)| evaluate_each(log, now, request))
        .collect();
    let joint = JointDecision::of(evaluated);
    if !joint.allowed || mode == Mode::Peek {
        return joint;
    }
    // Every check admits: recording each now admits it again (the same logs,
    // the same instant), and names its record.
    let recorded = logs
        .iter_mut()
        .zip(checks)
        .map(|(log, request)| decide_and_record_each(log, now, request))
        .collect();
    JointDecision::of(recorded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Limit, Request};

    fn req(key: &str, max: u64) -> Request {
        Request::single(key, Limit::new(max, 60_000).unwrap()).unwrap()
    }

    #[test]
    fn a_refused_request_records_in_no_key() {
        let (mut user, mut route) = (Log::new(), Log::new());
        let checks = Checks::new([req("user", 10), req("route", 3)]).unwrap();
        let mut allowed = 0;
        for t in 0..6 {
            let joint = decide_all(
                &mut [&mut user, &mut route],
                1_000 + t,
                &checks,
                Mode::Record,
            );
            allowed += u64::from(joint.allowed);
            if !joint.allowed {
                let by = joint.refused_by.unwrap();
                assert_eq!((by.check, by.limit), (1, 0));
                assert!(
                    joint.checks[0].decision.allowed,
                    "the user alone would admit"
                );
            }
        }
        assert_eq!(allowed, 3);
        let alone = Checks::single(req("user", 10));
        let more = (0..10)
            .filter(|t| decide_all(&mut [&mut user], 2_000 + t, &alone, Mode::Record).allowed)
            .count();
        assert_eq!(more, 7, "the user's log holds only the 3 admitted requests");
    }

    #[test]
    fn a_peek_records_nothing_even_when_every_key_admits() {
        let (mut a, mut b) = (Log::new(), Log::new());
        let checks = Checks::new([req("a", 1), req("b", 1)]).unwrap();
        assert!(decide_all(&mut [&mut a, &mut b], 5, &checks, Mode::Peek).allowed);
        assert!(decide_all(&mut [&mut a, &mut b], 6, &checks, Mode::Record).allowed);
        assert!(!decide_all(&mut [&mut a, &mut b], 7, &checks, Mode::Record).allowed);
    }
}

//! What an AOF rewrite (`aof_rewrite`, with `aof-use-rdb-preamble no`)
//! writes for one log (docs/design.md §4.3, "Persistence"): one
//! `SLIDELOG.APPLY` per record at the record's time, the first one
//! carrying the log's horizon as its window (so a log read back keeps its
//! horizon, and its expiry after the next change), then its settled
//! receipts, [`crate::args::SPENT_PER_APPLY`] per `spent/...` APPLY (so a
//! receipt settled before the rewrite stays refused after a restart).

use crate::args::{self, Change, SPENT_PER_APPLY};
use slidelog_core::log::SPENT_MARGIN_MS;
use slidelog_core::{Log, Spend};

/// Calls `emit` with the change argument of each `SLIDELOG.APPLY` that
/// rebuilds `log`, in order.
pub fn changes(log: &Log, mut emit: impl FnMut(&[u8])) {
    let mut change = Change::new();
    // An APPLY that appends raises the horizon to its window; expiring for
    // it drops nothing from a key being rebuilt.
    let mut window = log.horizon();
    let mut newest = None;
    for (ts, costs) in log.records() {
        change.clear();
        args::change(ts, window, None, &costs, &mut change);
        emit(&change);
        window = 0;
        newest = Some(ts);
    }
    // Nothing is kept on an empty log (no receipt can settle on it); the
    // newest record's time is one the replay accepts, as it accepted the
    // record's.
    let Some(now) = newest else { return };
    for chunk in log.spent().chunks(SPENT_PER_APPLY) {
        let entries: Vec<Spend> = chunk
            .iter()
            .map(|&(nonce, forget)| Spend {
                nonce,
                until_ms: forget.saturating_sub(SPENT_MARGIN_MS),
            })
            .collect();
        change.clear();
        args::change(now, 0, None, &[], &mut change);
        args::put_spent(&entries, &mut change);
        emit(&change);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slidelog_core::{Limit, Receipt, RecordRef, Request, codec, engine};

    /// Replays what [`changes`] wrote into an empty log, as APPLY would.
    fn rebuilt(log: &Log) -> (Log, usize) {
        let mut out = Log::new();
        let mut applies = 0;
        changes(log, |change| {
            let call = args::apply(&[b"k", change]).unwrap();
            crate::commands::replay(&mut out, &call).unwrap();
            applies += 1;
        });
        (out, applies)
    }

    fn encoded(log: &Log) -> Vec<u8> {
        let mut bytes = Vec::new();
        codec::encode(log, &mut bytes);
        bytes
    }

    #[test]
    fn a_rewrite_keeps_the_horizon_and_the_settled_receipts() {
        let hour = Limit::new(5_000, 3_600_000).unwrap();
        let check = Request::new("k", vec![hour], 1).unwrap();
        let mut log = Log::new();
        for t in 0..3_000u64 {
            engine::decide_and_record(&mut log, 1_000 + t, &check);
        }
        // A 1 ms check: the horizon stays the hour's.
        let ms = Request::new("k", vec![Limit::new(1, 1).unwrap()], 1).unwrap();
        engine::decide_and_record(&mut log, 5_000, &ms);
        let refund = Request::usage("k", vec![hour], vec![0]).unwrap();
        for (i, t) in (1_000..3_500u64).enumerate() {
            let receipt =
                Receipt::new(&check, RecordRef { ts: t, id: None }).with_spend(Some(Spend {
                    nonce: u64::MAX - i as u64,
                    until_ms: 7_200_000 + i as u64,
                }));
            assert!(engine::settle(&mut log, 6_000, &refund, &receipt).settled);
        }
        assert_eq!((log.horizon(), log.spent().len()), (3_600_000, 2_500));
        let (back, applies) = rebuilt(&log);
        // 501 records left, then 3 APPLYs of settled receipts.
        assert_eq!(applies, log.records().count() + 3);
        assert_eq!(back.horizon(), 3_600_000);
        assert_eq!(back.spent(), log.spent());
        assert_eq!(encoded(&back), encoded(&log));
        assert!(back.is_spent(u64::MAX) && !back.is_spent(7));
    }

    #[test]
    fn a_plain_log_is_rewritten_as_before_but_with_its_horizon() {
        let mut log = Log::new();
        let r = Request::new("k", vec![Limit::new(10, 60_000).unwrap()], 1).unwrap();
        engine::decide_and_record(&mut log, 10, &r);
        engine::decide_and_record(&mut log, 20, &r);
        let mut written = Vec::new();
        changes(&log, |c| {
            written.push(String::from_utf8(c.to_vec()).unwrap())
        });
        assert_eq!(written, ["10:60000:_:1", "20:0:_:1"]);
        assert_eq!(encoded(&rebuilt(&log).0), encoded(&log));
        changes(&Log::new(), |_| panic!("an empty log writes nothing"));
    }
}

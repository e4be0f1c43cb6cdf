//! The differential run of granular limits (docs/design.md §1.1): random
//! operations on a subject (the engine on a log, a store) and on the plain
//! model of `model.rs`, every answer compared field by field.

use super::model::{Model, Record};
use proptest::prelude::*;
use slidelog_core::{Counts, Decision, Limit, LimitState, Receipt, Request};

/// The windows drawn from, with the granularities that divide them.
const WINDOWS: [u64; 6] = [10, 60, 100, 120, 300, 600];

/// A limit of a small max, a window of `WINDOWS` and a granularity dividing it.
pub fn limit() -> impl Strategy<Value = Limit> {
    (
        1u64..8,
        proptest::sample::select(WINDOWS.to_vec()),
        any::<proptest::sample::Index>(),
    )
        .prop_map(|(max, w, pick)| {
            let divisors: Vec<u64> = (1..=w).filter(|g| w % g == 0).collect();
            let g = divisors[pick.index(divisors.len())];
            Limit::new(max, w).unwrap().with_granularity(g).unwrap()
        })
}

/// One step of a run.
#[derive(Debug, Clone)]
pub enum Op {
    /// Moves the clock by this many ms (negative: a step back).
    Step(i64),
    /// A check of these costs (each at most its limit's max).
    Check([u64; 3]),
    /// A peek of these costs.
    Peek([u64; 3]),
    /// Settles the n-th receipt issued (old ones included) to these costs.
    Settle(usize, [u64; 3]),
    /// A charge of these costs.
    Charge([u64; 3]),
}

/// A run of operations.
pub fn ops() -> impl Strategy<Value = Vec<Op>> {
    let costs = proptest::array::uniform3(1u64..4);
    let usage = proptest::array::uniform3(0u64..5);
    let op = prop_oneof![
        4 => prop_oneof![9 => 0i64..200, 1 => -300i64..0].prop_map(Op::Step),
        6 => costs.clone().prop_map(Op::Check),
        1 => costs.prop_map(Op::Peek),
        2 => (0usize..8, usage.clone()).prop_map(|(n, c)| Op::Settle(n, c)),
        1 => usage.prop_map(Op::Charge),
    ];
    proptest::collection::vec(op, 1..120)
}

/// `costs` for `n` limits as a request lists them (1 when all are equal)
/// and as the model keeps them (every position past `n` its last).
pub fn costs_of(costs: [u64; 3], n: usize) -> (Vec<u64>, [u64; 3]) {
    let list = costs[..n].to_vec();
    let last = list[n - 1];
    let full = [0, 1, 2].map(|p| if p < n { costs[p] } else { last });
    (list, full)
}

/// A check's costs, each at most its limit's max.
fn check_costs(limits: &[Limit], costs: [u64; 3]) -> [u64; 3] {
    [0, 1, 2].map(|p| costs[p].min(limits[p.min(limits.len() - 1)].max()))
}

/// Every limit's counts of an answer.
#[allow(dead_code)] // not every subject's answers carry `LimitState`s
pub fn counts(limits: &[LimitState]) -> Vec<Counts> {
    limits.iter().map(|s| s.counts.unwrap()).collect()
}

/// True when some records of `limits` move to a coarse tier: the limits
/// of the longest windows share a granule coarser than all share.
pub fn tiered(limits: &[Limit]) -> bool {
    let gcd = |a: u64, b: u64| -> u64 {
        let (mut a, mut b) = (a, b);
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let mut order: Vec<(u64, u64)> = limits
        .iter()
        .map(|l| (l.window_ms(), l.granularity_ms()))
        .collect();
    order.sort_unstable();
    let all = order.iter().fold(0, |a, l| gcd(a, l.1));
    (1..order.len()).any(|k| order[k..].iter().fold(0, |a, l| gcd(a, l.1)) > all)
}

/// What a run drives: a store or the engine on a log of one key.
pub trait Subject {
    /// A check (`record`) or a peek.
    fn check(&mut self, request: &Request, now: u64, record: bool) -> Decision;
    /// A settle: whether it found the record, and the standing after.
    fn settle(
        &mut self,
        request: &Request,
        receipt: &Receipt,
        now: u64,
    ) -> (bool, Decision, Vec<Counts>);
    /// A charge: the standing after.
    fn charge(&mut self, request: &Request, now: u64) -> (Decision, Vec<Counts>);
    /// False when a charge's answer names the record at the request's
    /// stored time even where it merged into a later one (the module's
    /// reply carries no time): the run then takes the model's name.
    fn names_merged_charges(&self) -> bool {
        true
    }
}

/// Runs `ops` under `limits` on `subject` and on the model, comparing
/// every answer field by field.
pub fn run(
    subject: &mut impl Subject,
    limits: Vec<Limit>,
    ops: Vec<Op>,
) -> Result<(), TestCaseError> {
    let n = limits.len();
    // A record moved to a coarse tier may count again in a finer limit
    // once the clock steps back (later than it would have: never early,
    // docs/design.md §1.1), and the engine moves records lazily: the
    // model moves them at once. So tiered runs step forward only.
    let back = !tiered(&limits);
    let mut model = Model::new(limits.clone());
    let mut receipts: Vec<(Receipt, Record)> = Vec::new();
    let mut now = 100_000u64;
    for op in ops {
        match op {
            Op::Step(dt) => now = now.saturating_add_signed(if back { dt } else { dt.max(0) }),
            Op::Check(c) | Op::Peek(c) => {
                let (list, full) = costs_of(check_costs(&limits, c), n);
                let r = Request::with_costs("k", limits.clone(), list).unwrap();
                let record = matches!(op, Op::Check(_));
                let got = subject.check(&r, now, record);
                let want = model.check(now, full, record);
                prop_assert_eq!(got, want, "{:?} at {}", op, now);
                if let Some(at) = got.record {
                    receipts.push((Receipt::new(&r, at), (at.ts, full)));
                }
            }
            Op::Settle(i, c) => {
                // Receipts are single-use in every store (spent nonces, the
                // module's SPEND, renamed members: docs/design.md §4.6), so
                // each is settled once here: a replayed share could name a
                // coarse granule another, later request shares.
                if receipts.is_empty() {
                    continue;
                }
                let (receipt, share) = receipts.remove(i % receipts.len());
                let (list, full) = costs_of(c, n);
                let r = Request::usage("k", limits.clone(), list).unwrap();
                let live = model.counts_anywhere(now, share);
                let (got_settled, got, got_each) = subject.settle(&r, &receipt, now);
                let (settled, mut want, each) = model.settle(now, share, full);
                prop_assert_eq!(got_each, each, "{:?} at {}", op, now);
                if live {
                    prop_assert_eq!(got_settled, settled, "{:?} at {}", op, now);
                } else {
                    // A record no limit counts: settling it or not changes
                    // no answer (the engine may still hold it in a tier).
                    want.record = got.record;
                }
                prop_assert_eq!(got, want, "{:?} at {}", op, now);
                if let (Some(at), true) = (got.record, settled) {
                    receipts.push((Receipt::new(&r, at), (share.0, full)));
                }
            }
            Op::Charge(c) => {
                let (list, full) = costs_of(c, n);
                let r = Request::usage("k", limits.clone(), list).unwrap();
                let (mut got, got_each) = subject.charge(&r, now);
                let (want, each) = model.charge(now, full);
                if !subject.names_merged_charges() {
                    got.record = want.record;
                }
                prop_assert_eq!(got_each, each, "{:?} at {}", op, now);
                prop_assert_eq!(got, want, "{:?} at {}", op, now);
                if let Some(at) = got.record {
                    receipts.push((Receipt::new(&r, at), (at.ts, full)));
                }
            }
        }
    }
    Ok(())
}

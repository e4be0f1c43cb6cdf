//! Granularity per limit on the scripts engine (docs/design.md §1.1): the
//! differential run of slidelog-core's granularity test (checks, peeks,
//! settles, charges, the clock stepping back; 1 to 3 limits with
//! granularities from 1 ms to the window) against the same plain model,
//! field by field, through `RedisStore` on Redis and on Valkey; one
//! granule's one record (the bytes a hot key holds are measured beside
//! the other stores by slidelog-module's `bytes_per_key`).
//!
//! The run's windows are milliseconds long and Redis TTLs run on real
//! time, so after each call the run takes the TTLs off (`PERSIST`): the
//! records then leave only as the scripts drop them, at the run's times.

mod common;
#[path = "../../slidelog-core/tests/granular/mod.rs"]
mod granular;

use granular::run::{Op, Subject, counts, limit, ops, run, tiered};
use proptest::prelude::*;
use slidelog_core::{Counts, Decision, Limit, Mode, Now, Receipt, Request, Store};
use slidelog_redis::RedisStore;
use slidelog_testkit::{RedisServer, ServerKind};
use std::collections::HashMap;
use tokio::runtime::Runtime;

/// The store, one key a case.
struct Scripts<'a> {
    store: &'a RedisStore,
    rt: &'a Runtime,
    conn: redis::Connection,
    key: String,
    /// The receipts the store issued, by the time and costs the run knows
    /// them by (the model names records without ids; receipts of one time
    /// and costs are alike to it).
    receipts: HashMap<(u64, Vec<u64>), Vec<Receipt>>,
}

/// `request` on the case's key.
fn on(request: &Request, key: &str, usage: bool) -> Request {
    let limits = request.limits().to_vec();
    let costs: Vec<u64> = (0..limits.len()).map(|i| request.cost_for(i)).collect();
    if usage {
        Request::usage(key, limits, costs).unwrap()
    } else {
        Request::with_costs(key, limits, costs).unwrap()
    }
}

impl Scripts<'_> {
    /// Keeps the receipt of `d`'s record, issued for `request`, under the
    /// name the run will give it; takes the key's TTLs off; answers `d`
    /// with its record named as the model names it (by time only).
    fn keep(&mut self, request: &Request, mut d: Decision) -> Decision {
        if let Some(record) = d.record.as_mut() {
            let name = (record.ts, request.costs().to_vec());
            let receipt = Receipt::new(request, *record);
            self.receipts.entry(name).or_default().push(receipt);
            record.id = None;
        }
        let log = format!("{}{}", self.store.prefix(), self.key);
        let weights = slidelog_redis::keys::weights_key(log.as_bytes());
        let () = redis::pipe()
            .cmd("PERSIST")
            .arg(&log)
            .ignore()
            .cmd("PERSIST")
            .arg(weights)
            .ignore()
            .query(&mut self.conn)
            .unwrap();
        d
    }
}

impl Subject for Scripts<'_> {
    fn check(&mut self, request: &Request, now: u64, record: bool) -> Decision {
        let r = on(request, &self.key, false);
        let mode = if record { Mode::Record } else { Mode::Peek };
        let d = self
            .rt
            .block_on(self.store.decide(&r, mode, Now::At(now)))
            .unwrap();
        self.keep(&r, d)
    }

    fn settle(
        &mut self,
        request: &Request,
        receipt: &Receipt,
        now: u64,
    ) -> (bool, Decision, Vec<Counts>) {
        let r = on(request, &self.key, true);
        let name = (receipt.ts(), receipt.costs().to_vec());
        let issued = self.receipts.get_mut(&name).and_then(Vec::pop).unwrap();
        let s = self
            .rt
            .block_on(self.store.settle(&r, &issued, Now::At(now)))
            .unwrap();
        (s.settled, self.keep(&r, s.decision), counts(&s.limits))
    }

    fn charge(&mut self, request: &Request, now: u64) -> (Decision, Vec<Counts>) {
        let r = on(request, &self.key, true);
        let d = self
            .rt
            .block_on(self.store.charge(&r, Now::At(now)))
            .unwrap();
        (self.keep(&r, d.decision), counts(&d.limits))
    }
}

fn differential(kind: ServerKind) {
    let server = RedisServer::start_kind(kind);
    let rt = Runtime::new().unwrap();
    let store = rt.block_on(common::store(&server, "granularity"));
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(256));
    let strategy = (proptest::collection::vec(limit(), 1..=3), ops());
    let cases = std::sync::atomic::AtomicU64::new(0);
    runner
        .run(&strategy, |(limits, ops)| {
            let case = cases.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let mut subject = Scripts {
                store: &store,
                rt: &rt,
                conn: server.client(),
                key: format!("gran:{case}"),
                receipts: HashMap::new(),
            };
            // The scripts keep no coarse tiers (docs/design.md §1.1): where
            // the model moves records to one (`tiered`), a later charge may
            // merge into another record, and a settle find another at a
            // receipt's coarse home, so those runs keep their checks, peeks
            // and clock steps only (no decision changes with the tiers). On
            // exact limits the scripts keep the original layout, one member
            // per request, and a charge merged into the newest record
            // renames it, so the receipt of the record it merged into
            // settles nothing (`charge_merge.rs` allows for that): those
            // runs drop their charges. A granular record is found by its
            // stored time as well.
            let exact = limits.iter().all(|l| l.granularity_ms() == 1);
            let ops = ops
                .into_iter()
                .filter(|op| match op {
                    Op::Charge(_) => !tiered(&limits) && !exact,
                    Op::Settle(..) => !tiered(&limits),
                    _ => true,
                })
                .collect();
            run(&mut subject, limits, ops)
        })
        .unwrap();
}

#[test]
fn granular_limits_match_the_model_on_redis() {
    differential(ServerKind::Redis);
}

#[test]
fn granular_limits_match_the_model_on_valkey() {
    differential(ServerKind::Valkey);
}

/// Same stored time, one record (docs/design.md §1.1): three checks in
/// one granule of 100 ms are one marked member of cost 3 at the granule's
/// end, named by every receipt; a settle of the first (whose id the merge
/// renamed) finds it by its time and takes out only its own share.
#[test]
fn one_granule_holds_one_record_and_a_settle_changes_its_share() {
    let server = RedisServer::start_kind(ServerKind::Redis);
    let rt = Runtime::new().unwrap();
    let store = rt.block_on(common::store(&server, "granule"));
    let limit = Limit::new(10, 1_000)
        .unwrap()
        .with_granularity(100)
        .unwrap();
    let check = Request::new("g", vec![limit], 1).unwrap();
    let mut receipts = Vec::new();
    for now in [1_000_001, 1_000_050, 1_000_100] {
        let d = rt
            .block_on(store.decide(&check, Mode::Record, Now::At(now)))
            .unwrap();
        assert!(d.allowed);
        assert_eq!(
            d.record.unwrap().ts,
            1_000_100,
            "stored at the granule's end"
        );
        receipts.push(Receipt::new(&check, d.record.unwrap()));
    }
    let mut conn = server.client();
    let key = format!("{}g", store.prefix());
    let members: Vec<(String, u64)> = common::records(&mut conn, &key);
    assert_eq!(members.len(), 1, "{members:?}");
    assert!(members[0].0.ends_with("#3"), "{members:?}");
    assert_eq!(members[0].1, 1_000_100);
    let usage = Request::usage("g", vec![limit], vec![0]).unwrap();
    let s = rt
        .block_on(store.settle(&usage, &receipts[0], Now::At(1_000_120)))
        .unwrap();
    assert!(s.settled);
    assert_eq!(s.decision.count, 2, "the other two requests' units stay");
    let members: Vec<(String, u64)> = common::records(&mut conn, &key);
    assert_eq!(members.len(), 1);
    assert!(members[0].0.ends_with("#2"), "{members:?}");
}

/// A reservation (phase 1 of a joint decision across slots, docs/design.md
/// §4.7) is never merged into: a granular check in its granule writes its
/// own member beside it, so a cancel takes out the reservation's units
/// alone and the check's stay.
#[test]
fn a_granular_check_never_merges_into_a_pending_reservation() {
    let server = RedisServer::start_kind(ServerKind::Redis);
    let mut conn = server.client();
    let (log, pending) = ("res:g", slidelog_redis::keys::pending_key(b"res:g"));
    let weights = slidelog_redis::keys::weights_key(b"res:g");
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let (now, deadline) = (1_000_001u64, wall + 60_000);
    let limit = ["1", "10", "1000@100", "1"];
    let reserved: Vec<i64> = slidelog_redis::joint::JOINT
        .key(log)
        .key(&weights)
        .key(&pending)
        .arg(2)
        .arg(now)
        .arg(deadline)
        .arg(1)
        .arg(&limit[..])
        .arg("r1")
        .invoke(&mut conn)
        .unwrap();
    assert_eq!(reserved[0], 1, "{reserved:?}");
    let checked: Vec<i64> = slidelog_redis::script::SCRIPT
        .key(log)
        .key(&weights)
        .key(&pending)
        .arg(1)
        .arg(now + 50)
        .arg(&limit[..])
        .arg("c1")
        .arg(-1)
        .invoke(&mut conn)
        .unwrap();
    assert_eq!(checked[..4], [1, 10, 1000, 2], "{checked:?}");
    let members: Vec<(String, u64)> = common::records(&mut conn, log);
    assert_eq!(members.len(), 2, "{members:?}");
    let cancelled: i64 = slidelog_redis::joint::RESERVATION
        .key(log)
        .key(&weights)
        .key(&pending)
        .arg("cancel")
        .arg("r1#1")
        .invoke(&mut conn)
        .unwrap();
    assert_eq!(cancelled, 1);
    let members: Vec<(String, u64)> = common::records(&mut conn, log);
    assert_eq!(members, vec![("c1#1".to_owned(), 1_000_100)]);
}

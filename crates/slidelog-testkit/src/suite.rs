//! The behavioural suite of docs/design.md §1–§2, run over every store by
//! [`store_suite!`](crate::store_suite): boundaries (a record exactly one
//! window old has expired; a rejected request is admitted at
//! `now + retry_after_ms` and not 1 ms before), cost, several limits and the
//! deciding limit, peek, reset, a clock that steps back, explicit and store
//! time, key independence.
//!
//! Each case takes the store under test and decides on keys of its own
//! ([`crate::unique_prefix`]), mostly at explicit times
//! (`Now::At`) so every answer is exact. Windows are at least 10 s: a Redis
//! store's TTL runs on real time, so a window shorter than the test's real
//! duration could expire a key the explicit clock still considers live.

use crate::unique_prefix;
use slidelog_core::{Checks, Decision, JointDecision, Limit, Mode, Now, Request, Store};

/// A base time for explicit-time cases (2026-01-01, in ms).
pub const T0: u64 = 1_767_225_600_000;

/// A request on `key` under `limits` (`(max, window_ms)` pairs) for `cost`.
pub fn request(key: &str, limits: &[(u64, u64)], cost: u64) -> Request {
    let limits: Vec<Limit> = limits
        .iter()
        .map(|&(max, window)| Limit::new(max, window).expect("valid limit"))
        .collect();
    Request::new(key, limits, cost).expect("valid request")
}

/// A key unique to this run of `case`.
pub fn key(case: &str) -> String {
    format!("{}k", unique_prefix(case))
}

/// A check at `T0 + at`.
pub async fn check_at(store: &dyn Store, r: &Request, at: u64) -> Decision {
    store
        .decide(r, Mode::Record, Now::At(T0 + at))
        .await
        .expect("store decides")
}

/// A peek at `T0 + at`.
pub async fn peek_at(store: &dyn Store, r: &Request, at: u64) -> Decision {
    store
        .decide(r, Mode::Peek, Now::At(T0 + at))
        .await
        .expect("store decides")
}

/// docs/design.md §1: live iff `ts > now - window`; a record exactly one window old has expired.
pub async fn a_record_exactly_window_old_has_expired(store: &dyn Store) {
    let r = request(&key("expire"), &[(1, 10_000)], 1);
    assert!(check_at(store, &r, 0).await.allowed);
    let d = check_at(store, &r, 9_999).await;
    assert!(!d.allowed);
    assert_eq!(d.retry_after_ms, 1);
    assert!(check_at(store, &r, 10_000).await.allowed);
}

/// docs/design.md §2: a rejected request is admitted at `now + retry_after_ms`, and still
/// rejected 1 ms before; `count`, `remaining`, `reset_after_ms` as specified.
pub async fn rejected_is_admitted_at_retry_after_and_not_before(store: &dyn Store) {
    let r = request(&key("retry"), &[(3, 10_000)], 1);
    for t in [0, 4_000, 7_000] {
        assert!(check_at(store, &r, t).await.allowed);
    }
    let d = check_at(store, &r, 8_000).await;
    assert!(!d.allowed);
    assert_eq!(d.retry_after_ms, 2_000); // 0 + 10_000 - 8_000
    assert_eq!(d.reset_after_ms, 9_000); // 7_000 + 10_000 - 8_000
    assert_eq!(
        (d.limit, d.window_ms, d.count, d.remaining),
        (3, 10_000, 3, 0)
    );
    assert!(
        !peek_at(store, &r, 8_000 + d.retry_after_ms - 1)
            .await
            .allowed
    );
    assert!(
        !check_at(store, &r, 8_000 + d.retry_after_ms - 1)
            .await
            .allowed
    );
    let d = check_at(store, &r, 8_000 + d.retry_after_ms).await;
    assert!(d.allowed);
    assert_eq!((d.count, d.remaining, d.reset_after_ms), (3, 0, 10_000));
}

/// docs/design.md §2: the first decision on a key counts one record and reports the full window.
pub async fn first_decision_reports_the_full_window(store: &dyn Store) {
    let r = request(&key("first"), &[(10, 60_000)], 1);
    let d = check_at(store, &r, 0).await;
    let expected = Decision {
        allowed: true,
        limit: 10,
        window_ms: 60_000,
        count: 1,
        remaining: 9,
        retry_after_ms: 0,
        reset_after_ms: 60_000,
        degraded: false,
        blocked: false,
        record: None,
    };
    assert_eq!(d, expected);
}

/// docs/design.md §1–§2: a cost of `c` appends one record of `c` units and waits for
/// the k-th oldest unit, `k = live + cost - max`.
pub async fn cost_waits_for_the_kth_oldest_record(store: &dyn Store) {
    let k = key("cost");
    let one = request(&k, &[(5, 10_000)], 1);
    let three = request(&k, &[(5, 10_000)], 3);
    for t in [10, 20, 30, 40] {
        assert!(check_at(store, &one, t).await.allowed);
    }
    let d = check_at(store, &three, 500).await;
    assert!(!d.allowed);
    assert_eq!(d.retry_after_ms, 20 + 10_000 - 500);
    assert_eq!((d.count, d.remaining), (4, 1));
    // The rejection appended nothing.
    assert_eq!(peek_at(store, &one, 500).await.count, 5);
    assert!(!check_at(store, &three, 10_019).await.allowed);
    let d = check_at(store, &three, 10_020).await;
    assert!(d.allowed);
    assert_eq!((d.count, d.remaining), (5, 0));
    // All three units were recorded: one more is rejected until 30 expires.
    let d = check_at(store, &one, 10_020).await;
    assert_eq!((d.allowed, d.retry_after_ms), (false, 30 + 10_000 - 10_020));
}

/// A large cost is one weighted record: the next request waits for its
/// units to expire, and a smaller cost fits in what is left.
pub async fn a_large_cost_is_one_weighted_record(store: &dyn Store) {
    let k = key("bigcost");
    let big = request(&k, &[(5_000, 60_000)], 4_999);
    let d = check_at(store, &big, 0).await;
    assert!(d.allowed);
    assert_eq!((d.count, d.remaining), (4_999, 1));
    let two = request(&k, &[(5_000, 60_000)], 2);
    let d = check_at(store, &two, 1).await;
    assert!(!d.allowed);
    assert_eq!(d.retry_after_ms, 60_000 - 1);
    assert!(
        check_at(store, &request(&k, &[(5_000, 60_000)], 1), 2)
            .await
            .allowed
    );
    // The largest cost on the largest max: one record, decided at once.
    let k = key("maxcost");
    let huge = request(&k, &[(10_000_000, 60_000)], 10_000_000);
    assert!(check_at(store, &huge, 0).await.allowed);
    let d = check_at(store, &huge, 10).await;
    assert_eq!(
        (d.allowed, d.count, d.retry_after_ms),
        (false, 10_000_000, 59_990)
    );
}

/// Weighted records: live units are the sum of the live records' costs, and
/// a rejection waits until enough units have expired for its own cost.
pub async fn weighted_records_wait_for_enough_units(store: &dyn Store) {
    let k = key("weighted");
    // Units 4, 3, 5 at 0, 10, 20 (12 of 12 per 1 s).
    for (t, c) in [(0, 4), (10, 3), (20, 5)] {
        assert!(
            check_at(store, &request(&k, &[(12, 1_000)], c), t)
                .await
                .allowed
        );
    }
    // A cost of 5 needs 5 units expired: the record at 0 (4) and one unit of 10.
    let d = check_at(store, &request(&k, &[(12, 1_000)], 5), 500).await;
    assert_eq!((d.allowed, d.count, d.retry_after_ms), (false, 12, 510));
    // A cost of 4 needs only the record at 0.
    let d = check_at(store, &request(&k, &[(12, 1_000)], 4), 500).await;
    assert_eq!((d.allowed, d.retry_after_ms), (false, 500));
    let d = check_at(store, &request(&k, &[(12, 1_000)], 4), 1_000).await;
    assert_eq!((d.allowed, d.count, d.remaining), (true, 12, 0));
    // At 1010 the 3 units of 10 expire: 9 live, a cost of 1 fits.
    let d = check_at(store, &request(&k, &[(12, 1_000)], 1), 1_010).await;
    assert_eq!((d.allowed, d.count), (true, 10));
    let d = peek_at(store, &request(&k, &[(12, 1_000)], 3), 1_010).await;
    assert_eq!((d.allowed, d.count, d.reset_after_ms), (false, 10, 1_000));
}

/// A request may carry a cost per limit (1 request and N tokens): each limit
/// is charged its own cost, and a rejection by one records nothing in any.
pub async fn each_limit_is_charged_its_own_cost(store: &dyn Store) {
    let k = key("perlimit");
    let limits = vec![
        Limit::new(2, 10_000).unwrap(),
        Limit::new(100, 10_000).unwrap(),
    ];
    let call = |tokens| Request::with_costs(k.clone(), limits.clone(), vec![1, tokens]).unwrap();
    let d = check_at(store, &call(60), 0).await;
    assert_eq!((d.allowed, d.limit, d.remaining), (true, 2, 1));
    // 60 + 50 tokens > 100: rejected by the token limit, nothing recorded.
    let d = check_at(store, &call(50), 10).await;
    assert_eq!(
        (d.allowed, d.limit, d.count, d.retry_after_ms),
        (false, 100, 60, 9_990)
    );
    let d = check_at(store, &call(40), 20).await;
    assert_eq!((d.allowed, d.limit, d.count, d.remaining), (true, 2, 2, 0));
    // Now the request limit is full, whatever the tokens.
    let d = check_at(store, &call(1), 30).await;
    assert_eq!((d.allowed, d.limit, d.retry_after_ms), (false, 2, 9_970));
    // One cost for both limits still works on the same key.
    let d = peek_at(
        store,
        &request(&k, &[(2, 10_000), (100, 10_000)], 1),
        10_000,
    )
    .await;
    assert_eq!((d.allowed, d.limit, d.count), (true, 2, 2));
}

/// docs/design.md §1–§2: several limits share one log; all must admit; the deciding
/// limit is the violated one with the largest wait, or the one with the
/// smallest remaining (ties: the shorter window).
pub async fn several_limits_report_the_deciding_limit(store: &dyn Store) {
    // 2 per 10 s and 3 per 100 s.
    let r = request(&key("multi"), &[(2, 10_000), (3, 100_000)], 1);
    let d = check_at(store, &r, 0).await;
    assert_eq!((d.limit, d.window_ms, d.remaining), (2, 10_000, 1));
    let d = check_at(store, &r, 1).await;
    assert_eq!((d.limit, d.remaining, d.reset_after_ms), (2, 0, 10_000));
    let d = check_at(store, &r, 2).await;
    assert!(!d.allowed);
    assert_eq!((d.limit, d.retry_after_ms), (2, 9_998));
    let d = check_at(store, &r, 15_000).await;
    assert!(d.allowed);
    assert_eq!((d.limit, d.window_ms, d.remaining), (3, 100_000, 0));
    let d = check_at(store, &r, 20_000).await;
    assert!(!d.allowed);
    assert_eq!(
        (d.limit, d.window_ms, d.retry_after_ms),
        (3, 100_000, 80_000)
    );
    assert_eq!((d.count, d.reset_after_ms), (3, 15_000 + 100_000 - 20_000));
    // Both violated: the larger wait decides.
    let r2 = request(&key("multi2"), &[(1, 10_000), (2, 100_000)], 1);
    assert!(check_at(store, &r2, 0).await.allowed);
    assert!(check_at(store, &r2, 50_000).await.allowed);
    let d = check_at(store, &r2, 50_001).await;
    assert!(!d.allowed);
    // per 10 s waits 9_999; per 100 s waits 49_999.
    assert_eq!((d.window_ms, d.retry_after_ms), (100_000, 49_999));
}

/// docs/design.md §2: among admitting limits with equal remaining, the shorter window decides.
pub async fn ties_go_to_the_shorter_window(store: &dyn Store) {
    let r = request(&key("tie"), &[(5, 20_000), (5, 10_000)], 1);
    let d = check_at(store, &r, 0).await;
    assert_eq!((d.limit, d.window_ms, d.remaining), (5, 10_000, 4));
}

/// docs/design.md §2: a peek computes the same decision and appends nothing.
pub async fn peek_appends_nothing(store: &dyn Store) {
    let r = request(&key("peek"), &[(2, 10_000)], 1);
    let peeked = peek_at(store, &r, 0).await;
    let checked = check_at(store, &r, 0).await;
    assert_eq!(peeked, checked);
    for t in 1..20 {
        let d = peek_at(store, &r, t).await;
        assert_eq!((d.allowed, d.count, d.remaining), (true, 2, 0));
    }
    assert!(check_at(store, &r, 20).await.allowed);
    let d = peek_at(store, &r, 21).await;
    assert_eq!((d.allowed, d.count, d.retry_after_ms), (false, 2, 9_979));
    // A peek of a key with no log admits and creates nothing.
    let empty = request(&key("peek-empty"), &[(1, 10_000)], 1);
    assert!(peek_at(store, &empty, 0).await.allowed);
    assert!(!store.reset(empty.key()).await.expect("reset"));
}

/// docs/design.md §1: a rejected request appends nothing, so a flood of rejections does
/// not keep the key blocked past the window of the admitted records.
pub async fn rejected_requests_append_nothing(store: &dyn Store) {
    let r = request(&key("flood"), &[(2, 10_000)], 1);
    assert!(check_at(store, &r, 0).await.allowed);
    assert!(check_at(store, &r, 1).await.allowed);
    for t in 2..200 {
        assert!(!check_at(store, &r, t * 40).await.allowed);
    }
    assert!(!check_at(store, &r, 9_999).await.allowed);
    let d = check_at(store, &r, 10_001).await;
    assert!(d.allowed);
    assert_eq!(d.count, 1);
}

/// docs/design.md §2: a reset deletes the key's log.
pub async fn reset_deletes_the_log(store: &dyn Store) {
    let r = request(&key("reset"), &[(1, 60_000)], 1);
    assert!(check_at(store, &r, 0).await.allowed);
    assert!(!check_at(store, &r, 1).await.allowed);
    assert!(store.reset(r.key()).await.expect("reset"));
    assert!(!store.reset(r.key()).await.expect("reset"));
    assert!(check_at(store, &r, 2).await.allowed);
}

/// docs/design.md §3: time that steps backwards never frees capacity: a record in the
/// future is still live; an admission at an earlier time keeps the log sorted.
pub async fn a_clock_that_steps_back_never_frees_capacity(store: &dyn Store) {
    let r = request(&key("back"), &[(2, 10_000)], 1);
    assert!(check_at(store, &r, 100_000).await.allowed);
    assert!(check_at(store, &r, 100_500).await.allowed);
    let d = check_at(store, &r, 50_000).await;
    assert!(!d.allowed);
    assert_eq!(d.retry_after_ms, 100_000 + 10_000 - 50_000);
    assert_eq!(d.reset_after_ms, 100_500 + 10_000 - 50_000);
    let r = request(&key("back2"), &[(2, 10_000)], 1);
    assert!(check_at(store, &r, 100_000).await.allowed);
    let d = check_at(store, &r, 90_000).await;
    assert!(d.allowed);
    // The newest record (100_000) is in the future: reset counts from it.
    assert_eq!(d.reset_after_ms, 100_000 + 10_000 - 90_000);
    assert!(!check_at(store, &r, 90_001).await.allowed);
    // At 100_000 the record at 90_000 has expired; the one at 100_000 has not.
    let d = check_at(store, &r, 100_000).await;
    assert_eq!((d.allowed, d.count), (true, 2));
}

/// docs/design.md §3 with two limits: after a step back more than `max` records can be
/// live for the short window; the store reports 0 remaining, never a negative
/// or wrapped count.
pub async fn more_live_than_max_after_a_step_back(store: &dyn Store) {
    let r = request(&key("overfull"), &[(2, 100), (10, 1_000)], 1);
    for t in [1_000, 1_000, 1_100, 1_100] {
        assert!(check_at(store, &r, t).await.allowed);
    }
    let d = check_at(store, &r, 1_050).await;
    assert!(!d.allowed);
    assert_eq!((d.limit, d.count, d.remaining), (2, 4, 0));
    assert_eq!(d.retry_after_ms, 1_100 + 100 - 1_050);
}

/// docs/design.md §3: the store's own clock (`Now::Server`) decides without a given time.
pub async fn store_time_decides_without_a_given_time(store: &dyn Store) {
    let r = request(&key("server"), &[(1, 60_000)], 1);
    assert!(store.check(&r).await.expect("check").allowed);
    let d = store.check(&r).await.expect("check");
    assert!(!d.allowed);
    assert!(
        d.retry_after_ms > 30_000 && d.retry_after_ms <= 60_000,
        "{d:?}"
    );
    let d = store.peek(&r).await.expect("peek");
    assert_eq!((d.allowed, d.count), (false, 1));
}

/// A log holding more than `max` (the key's max was lowered) rejects with
/// `remaining` 0 and waits for enough records to expire; it never fails.
pub async fn a_lowered_max_rejects_until_enough_expire(store: &dyn Store) {
    let k = key("lowered");
    let ten = request(&k, &[(10, 10_000)], 1);
    for t in 0..6 {
        assert!(check_at(store, &ten, t).await.allowed);
    }
    let three = request(&k, &[(3, 10_000)], 1);
    let d = check_at(store, &three, 100).await;
    assert!(!d.allowed);
    assert_eq!((d.count, d.remaining, d.limit), (6, 0, 3));
    // k = 6 + 1 - 3 = 4: the 4th oldest record (t = 3) must expire.
    assert_eq!(d.retry_after_ms, 3 + 10_000 - 100);
    assert!(check_at(store, &three, 10_003).await.allowed);
}

/// Keys are independent logs.
pub async fn keys_are_independent(store: &dyn Store) {
    let a = request(&key("ind-a"), &[(1, 60_000)], 1);
    let b = request(&key("ind-b"), &[(1, 60_000)], 1);
    assert!(check_at(store, &a, 0).await.allowed);
    assert!(!check_at(store, &a, 1).await.allowed);
    assert!(check_at(store, &b, 1).await.allowed);
}

/// A joint decision at `T0 + at`.
pub async fn all_at(store: &dyn Store, checks: &Checks, mode: Mode, at: u64) -> JointDecision {
    store
        .decide_all(checks, mode, Now::At(T0 + at))
        .await
        .expect("store decides jointly")
}

/// docs/design.md §1 "One request, several keys": a request refused by one
/// key records in none: `user` 10 and `route` 3 per minute, six requests on
/// both admit 3; the user alone is then admitted exactly 7 more times.
pub async fn a_refused_joint_request_records_in_no_key(store: &dyn Store) {
    let user = request(&key("joint-user"), &[(10, 60_000)], 1);
    let route = request(&key("joint-route"), &[(3, 60_000)], 1);
    let both = Checks::new([user.clone(), route]).expect("two keys");
    let mut admitted = 0;
    for t in 0..6 {
        let joint = all_at(store, &both, Mode::Record, t).await;
        admitted += u64::from(joint.allowed);
        if !joint.allowed {
            let by = joint.refused_by.expect("a refusal names its check");
            assert_eq!((by.check, by.limit), (1, 0));
            assert!(joint.checks[0].decision.allowed, "the user alone admits");
            assert!(!joint.checks[1].decision.allowed);
        }
    }
    assert_eq!(admitted, 3);
    let mut more = 0;
    for t in 10..20 {
        more += u64::from(check_at(store, &user, t).await.allowed);
    }
    assert_eq!(
        more, 7,
        "only the 3 admitted requests are in the user's log"
    );
}

/// docs/design.md §1: each check of an admitted joint request reports what
/// a check of that key alone reports, and a joint peek records nothing.
pub async fn a_joint_answer_is_each_keys_own_answer(store: &dyn Store) {
    let a = request(&key("joint-a"), &[(5, 10_000), (50, 60_000)], 2);
    let b = request(&key("joint-b"), &[(4, 10_000)], 1);
    let (a_twin, b_twin) = (
        request(&key("joint-a2"), &[(5, 10_000), (50, 60_000)], 2),
        request(&key("joint-b2"), &[(4, 10_000)], 1),
    );
    let both = Checks::new([a, b]).expect("two keys");
    let peeked = all_at(store, &both, Mode::Peek, 0).await;
    assert!(peeked.allowed && peeked.refused_by.is_none());
    for at in [0, 1_000] {
        let joint = all_at(store, &both, Mode::Record, at).await;
        assert!(joint.allowed);
        assert_eq!(joint.checks[0].decision, check_at(store, &a_twin, at).await);
        assert_eq!(joint.checks[1].decision, check_at(store, &b_twin, at).await);
    }
    let refused = all_at(store, &both, Mode::Record, 2_000).await;
    assert!(!refused.allowed, "a: 6 of 5 after two admissions of cost 2");
    assert_eq!(refused.refused_by.map(|r| (r.check, r.limit)), Some((0, 0)));
    assert_eq!(
        refused.checks[0].decision,
        peek_at(store, &a_twin, 2_000).await
    );
    assert_eq!(
        refused.checks[1].decision,
        peek_at(store, &b_twin, 2_000).await
    );
    assert_eq!(refused.checks[0].decision.retry_after_ms, 8_000);
}

/// docs/design.md §1: the same key twice is one check with its costs added.
pub async fn the_same_key_twice_is_one_check(store: &dyn Store) {
    let k = key("joint-twice");
    let once = request(&k, &[(3, 60_000)], 1);
    let twice = Checks::new([once.clone(), once.clone()]).expect("merged");
    assert_eq!(twice.len(), 1);
    assert_eq!(
        all_at(store, &twice, Mode::Record, 0).await.checks[0]
            .decision
            .count,
        2
    );
    assert!(
        !all_at(store, &twice, Mode::Record, 1).await.allowed,
        "2 more do not fit in 3"
    );
    assert!(
        check_at(store, &once, 2).await.allowed,
        "the refusal recorded nothing"
    );
}

/// Runs every case of the suite against the store that `make` builds, one
/// `#[tokio::test]` per case (the calling crate needs `tokio` with the
/// `macros` and `rt` features). `make` is a closure returning a future of
/// `(Arc<dyn Store>, guard)`; the guard (a `RedisServer`, `()`) lives until the
/// case ends.
///
/// ```ignore
/// slidelog_testkit::store_suite!(|| async {
///     (std::sync::Arc::new(MemoryStore::new()) as std::sync::Arc<dyn Store>, ())
/// });
/// ```
#[macro_export]
macro_rules! store_suite {
    ($make:expr) => {
        $crate::store_suite!(@cases $make;
            a_record_exactly_window_old_has_expired,
            rejected_is_admitted_at_retry_after_and_not_before,
            first_decision_reports_the_full_window,
            cost_waits_for_the_kth_oldest_record,
            a_large_cost_is_one_weighted_record,
            weighted_records_wait_for_enough_units,
            each_limit_is_charged_its_own_cost,
            several_limits_report_the_deciding_limit,
            ties_go_to_the_shorter_window,
            peek_appends_nothing,
            rejected_requests_append_nothing,
            reset_deletes_the_log,
            a_clock_that_steps_back_never_frees_capacity,
            more_live_than_max_after_a_step_back,
            store_time_decides_without_a_given_time,
            a_lowered_max_rejects_until_enough_expire,
            keys_are_independent,
            a_refused_joint_request_records_in_no_key,
            a_joint_answer_is_each_keys_own_answer,
            the_same_key_twice_is_one_check
        );
    };
    (@cases $make:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $case() {
                let (store, _guard) = ($make)().await;
                $crate::suite::$case(&*store).await;
            }
        )*
    };
}

//! Single-use receipts on the module engine (docs/design.md §4.3, §4.6
//! "Single use"), through `Limiter` on a `redis://…?engine=module` store,
//! on Redis and on Valkey:
//!
//! - a receipt settles once: its replay is
//!   `InputError::Receipt(ReceiptError::Spent)` and changes nothing, while
//!   the receipt the settle answered settles (once) in its turn;
//! - two requests in one millisecond are one record of the module's log
//!   (`SLIDELOG.INFO`: 1 record, 2 units); each receipt settles its own
//!   share once, and a replay of one never takes the other's share;
//! - the spent set survives the module's RDB round trip (`DEBUG RELOAD`):
//!   the `DUMP` is unchanged and every receipt settled before is still
//!   refused after it.

use slidelog::url::StoreOptions;
use slidelog::{InputError, Limit, Limiter, LimiterError, Mode, Now, ReceiptError, Request};
use slidelog_testkit::{RedisServer, ServerKind};
use std::collections::HashMap;
use std::time::Duration;

fn limits() -> Vec<Limit> {
    vec![
        Limit::new(10, 60_000).unwrap(),
        Limit::new(1_000, 60_000).unwrap(),
    ]
}

/// A module server with `DEBUG` enabled, and a limiter on it.
async fn setup(kind: ServerKind, test: &str) -> (RedisServer, Limiter, String) {
    let server = RedisServer::start_with_module(kind, &["--enable-debug-command", "yes"]);
    let prefix = slidelog_testkit::unique_prefix(test);
    let limiter = Limiter::builder()
        .timeout(Duration::from_secs(10))
        .no_rejection_cache()
        .open(
            &format!("{}?engine=module", server.url()),
            StoreOptions::default().prefix(prefix.clone()),
        )
        .await
        .unwrap();
    (server, limiter, prefix)
}

/// A reservation of `tokens` at `now`, and its receipt.
async fn reserve(limiter: &Limiter, key: &str, tokens: u64, now: Now) -> String {
    let request = Request::with_costs(key, limits(), vec![1, tokens]).unwrap();
    let d = limiter
        .decide_at(&request, Mode::Record, now)
        .await
        .unwrap();
    assert!(d.allowed, "{d:?}");
    limiter.receipt(&request, d.record).unwrap()
}

/// The key's live `(requests, tokens)`: a peek of cost 1 counts as if
/// admitted (docs/design.md §2), so one less in each.
async fn counts(limiter: &Limiter, key: &str) -> (u64, u64) {
    let request = Request::with_costs(key, limits(), vec![1, 1]).unwrap();
    let each = limiter.decide_each(&request, Mode::Peek).await.unwrap();
    let count = |i: usize| each.limits[i].counts.unwrap().count - 1;
    (count(0), count(1))
}

fn is_spent(result: Result<slidelog::Settled, LimiterError>) -> bool {
    matches!(
        result,
        Err(LimiterError::Input(InputError::Receipt(
            ReceiptError::Spent
        )))
    )
}

/// The server's clock, Unix ms.
fn server_ms(server: &RedisServer) -> u64 {
    let t: Vec<u64> = redis::cmd("TIME").query(&mut server.client()).unwrap();
    t[0] * 1_000 + t[1] / 1_000
}

fn info(server: &RedisServer, key: &str) -> HashMap<String, i64> {
    redis::cmd("SLIDELOG.INFO")
        .arg(key)
        .query(&mut server.client())
        .unwrap()
}

fn dump(server: &RedisServer, key: &str) -> Vec<u8> {
    redis::cmd("DUMP")
        .arg(key)
        .query(&mut server.client())
        .unwrap()
}

async fn settles_once(kind: ServerKind) {
    let (server, limiter, prefix) = setup(kind, "module_single_use").await;
    let ls = limits();
    // One receipt: settled once, its replay refused and changing nothing.
    let receipt = reserve(&limiter, "one", 400, Now::Server).await;
    let s = limiter
        .settle("one", &ls, &receipt, [1, 100])
        .await
        .unwrap();
    assert!(s.settled && s.refused.is_none());
    assert_eq!(counts(&limiter, "one").await, (1, 100));
    assert!(is_spent(limiter.settle("one", &ls, &receipt, [0, 0]).await));
    assert_eq!(
        counts(&limiter, "one").await,
        (1, 100),
        "the replay changed nothing"
    );
    // The receipt the settle answered names the share as it now is: it
    // settles once in its turn. (Not to 0: a log emptied by a refund is
    // deleted with what it spent, and no receipt names a record there.)
    let settled_to = Request::with_costs("one", ls.clone(), vec![1, 100]).unwrap();
    let next = limiter.receipt(&settled_to, s.decision.record).unwrap();
    assert!(
        limiter
            .settle("one", &ls, &next, [1, 50])
            .await
            .unwrap()
            .settled
    );
    assert!(is_spent(limiter.settle("one", &ls, &next, [0, 0]).await));
    assert_eq!(counts(&limiter, "one").await, (1, 50));

    // Two requests in one millisecond: one record of both.
    let at = Now::At(server_ms(&server));
    let a = reserve(&limiter, "shared", 300, at).await;
    let b = reserve(&limiter, "shared", 500, at).await;
    let key = format!("{prefix}shared");
    let i = info(&server, &key);
    assert_eq!((i["records"], i["units"]), (1, 2), "{i:?}");
    assert_eq!(counts(&limiter, "shared").await, (2, 800));
    assert!(
        limiter
            .settle("shared", &ls, &a, [1, 20])
            .await
            .unwrap()
            .settled
    );
    // a's replay would take b's share: refused, b's 500 still count.
    assert!(is_spent(limiter.settle("shared", &ls, &a, [0, 0]).await));
    assert_eq!(counts(&limiter, "shared").await, (2, 520));
    assert!(
        limiter
            .settle("shared", &ls, &b, [0, 0])
            .await
            .unwrap()
            .settled
    );
    assert!(is_spent(limiter.settle("shared", &ls, &b, [0, 0]).await));
    assert_eq!(counts(&limiter, "shared").await, (1, 20));

    // The RDB round trip keeps what was spent.
    let before = dump(&server, &key);
    let _: String = redis::cmd("DEBUG")
        .arg("RELOAD")
        .query(&mut server.client())
        .unwrap();
    assert_eq!(dump(&server, &key), before, "DEBUG RELOAD kept the log");
    assert!(is_spent(limiter.settle("shared", &ls, &a, [0, 0]).await));
    assert!(is_spent(limiter.settle("shared", &ls, &b, [0, 0]).await));
    assert_eq!(counts(&limiter, "shared").await, (1, 20));
    // A new receipt still settles.
    let c = reserve(&limiter, "shared", 10, Now::Server).await;
    assert!(
        limiter
            .settle("shared", &ls, &c, [0, 0])
            .await
            .unwrap()
            .settled
    );
    assert!(is_spent(limiter.settle("shared", &ls, &c, [0, 0]).await));
}

#[tokio::test]
async fn a_receipt_settles_once_on_the_module_on_redis() {
    settles_once(ServerKind::Redis).await;
}

#[tokio::test]
async fn a_receipt_settles_once_on_the_module_on_valkey() {
    settles_once(ServerKind::Valkey).await;
}

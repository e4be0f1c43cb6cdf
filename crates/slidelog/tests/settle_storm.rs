//! Settle storms against a hot key on a real Redis (docs/design.md §4.5): the
//! rejection cache stays exact across settles and charges, each settle or
//! charge is one Redis call and a cached rejection none, and forged
//! receipts never change the log.
//!
//! - Exactness (one task, so every step is checkable): a seeded sequence of
//!   checks, settles (down, to 0 tokens, refunds, up) and charges on a key
//!   limited `requests=100/minute, tokens=5000/minute`. Before each check a
//!   limiter without a cache peeks the store: every decision equals the
//!   peek and a plain model of the log (nothing expires inside the minute),
//!   a rejection the cache answered is one the store gives too, and the
//!   check right after a settle that frees units is decided by the store.
//!   A refund sent around the limiter shows the comparison does catch a
//!   cached rejection a settle left stale.
//! - Storm (64 checking tasks, settlers, chargers): Redis calls counted
//!   exactly, from `INFO commandstats` and from `MONITOR` (the commands the
//!   clients sent, not those the scripts ran): checks the store answered +
//!   settles + charges, nothing else; the final totals equal the model.
//! - 10,000 forged or edited receipts on the hot key: each refused (a
//!   receipt error, no call; or `settled: false`, one call), the log's
//!   `DUMP` and totals unchanged, the real receipt still settles.
//!
//! - A settle racing a check (a gated in-process store seen as remote): a
//!   rejection decided before a refund whose reply arrives after it is not
//!   cached, whether it was sent before the settle or during it (and a
//!   control with only the forget before the store call does cache it).
//!
//! The Redis parts run on the scripts engine and on the module engine.

use slidelog::rejection_cache::RejectionCache;
use slidelog::store::{ManualClock, MemoryStore, Store};
use slidelog::url::StoreOptions;
use slidelog::{
    Cost, Decision, Detailed, InputError, Limit, Limiter, LimiterError, Mode, Now, Receipt,
    RecordRef, Request, Settled, StoreError,
};
use slidelog_testkit::{RedisServer, ServerKind};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WINDOW_MS: u64 = 60_000;
const MAX_REQUESTS: u64 = 100;
const MAX_TOKENS: u64 = 5_000;
const KEY: &str = "hot";

fn limits() -> Vec<Limit> {
    vec![
        Limit::new(MAX_REQUESTS, WINDOW_MS).unwrap(),
        Limit::new(MAX_TOKENS, WINDOW_MS).unwrap(),
    ]
}

/// Which engine the store runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Engine {
    Scripts,
    Module,
}

impl Engine {
    fn start(self) -> RedisServer {
        match self {
            Self::Scripts => RedisServer::start_kind(ServerKind::Redis),
            Self::Module => RedisServer::start_with_module(ServerKind::Redis, &[]),
        }
    }

    fn url(self, server: &RedisServer) -> String {
        match self {
            Self::Scripts => server.url(),
            Self::Module => format!("{}?engine=module", server.url()),
        }
    }

    /// The commands that carry a decision, a settle or a charge.
    fn is_store_call(self, command: &str) -> bool {
        match self {
            Self::Scripts => matches!(command, "evalsha" | "eval" | "evalsha_ro" | "eval_ro"),
            Self::Module => command.starts_with("slidelog."),
        }
    }
}

/// The test's Redis, with the prefix of its keys.
struct Setup {
    engine: Engine,
    server: RedisServer,
    prefix: String,
}

impl Setup {
    fn new(engine: Engine, test: &str) -> Self {
        Self {
            engine,
            server: engine.start(),
            prefix: slidelog_testkit::unique_prefix(test),
        }
    }

    /// A limiter on the store's clock: with the default rejection cache, or
    /// without one (the truth the checks are compared with).
    async fn limiter(&self, cache: bool) -> Limiter {
        // A key's override is read once per `override_cache` on a remote
        // store (docs/design.md §5.4): held for the whole test, so the
        // storms count the decisions' and settles' own calls, the read of
        // KEY's override made once before they start.
        let b = Limiter::builder()
            .timeout(Duration::from_secs(10))
            .override_cache(Duration::from_secs(3600));
        let b = if cache { b } else { b.no_rejection_cache() };
        let options = StoreOptions::default().prefix(self.prefix.clone());
        let limiter = b
            .open(&self.engine.url(&self.server), options)
            .await
            .unwrap();
        assert_eq!(limiter.rejection_cache().is_some(), cache);
        limiter
    }

    /// Calls per command (`INFO commandstats`, lower case names).
    fn commandstats(&self) -> HashMap<String, u64> {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut self.server.client())
            .unwrap();
        info.lines()
            .filter_map(|l| {
                let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
                let calls = rest.strip_prefix("calls=")?.split(',').next()?;
                Some((name.to_lowercase(), calls.parse().ok()?))
            })
            .collect()
    }

    /// The store calls (decisions, settles, charges) since `before`.
    fn store_calls_since(&self, before: &HashMap<String, u64>) -> u64 {
        self.commandstats()
            .iter()
            .filter(|(name, _)| self.engine.is_store_call(name))
            .map(|(name, calls)| calls - before.get(name).copied().unwrap_or(0))
            .sum()
    }

    /// `DUMP` of every key of the test but the scripts' weights hash (whose
    /// frontiers a read moves, as a check's does), by key.
    fn dump_logs(&self) -> Vec<(String, Vec<u8>)> {
        let mut c = self.server.client();
        let mut keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{}*", self.prefix))
            .query(&mut c)
            .unwrap();
        keys.sort();
        let mut dumps = Vec::new();
        for k in keys {
            let kind: String = redis::cmd("TYPE").arg(&k).query(&mut c).unwrap();
            if kind != "hash" {
                let dump: Vec<u8> = redis::cmd("DUMP").arg(&k).query(&mut c).unwrap();
                dumps.push((k, dump));
            }
        }
        dumps
    }
}

/// Every limit's live units on `KEY`, as the store counts them: a charge
/// of nothing (it appends nothing and answers every limit after it; a peek
/// would count its own cost when it fits).
async fn totals(truth: &Limiter) -> [u64; 2] {
    let each = truth.charge(KEY, &limits(), [0, 0]).await.unwrap();
    let count = |i: usize| {
        each.limits[i]
            .counts
            .as_ref()
            .map(|c| c.count)
            .expect("a store answer has every limit's counts")
    };
    [count(0), count(1)]
}

/// The commands clients send to a server (`MONITOR`), by lower case name,
/// without those scripts and modules run inside it.
struct Monitor {
    marker: String,
    reader: std::thread::JoinHandle<HashMap<String, u64>>,
}

impl Monitor {
    fn start(server: &RedisServer) -> Self {
        let marker = format!("monitor-end-{}", std::process::id());
        let mut stream = std::net::TcpStream::connect(server.addr()).unwrap();
        stream.write_all(b"MONITOR\r\n").unwrap();
        let mut reader = BufReader::new(stream);
        let mut ok = String::new();
        reader.read_line(&mut ok).unwrap();
        assert_eq!(ok.trim_end(), "+OK");
        let end = marker.clone();
        let reader = std::thread::spawn(move || {
            let mut seen: HashMap<String, u64> = HashMap::new();
            let mut line = String::new();
            loop {
                line.clear();
                if reader.read_line(&mut line).unwrap() == 0 {
                    panic!("MONITOR connection closed");
                }
                if line.contains(&end) {
                    return seen;
                }
                // +<time> [<db> <client>] "<command>" "<arg>" ...
                let Some((source, command)) = line.split_once("] \"") else {
                    continue;
                };
                if source.ends_with(" lua") || source.ends_with(" module") {
                    continue;
                }
                let name = command.split('"').next().unwrap_or("").to_lowercase();
                *seen.entry(name).or_default() += 1;
            }
        });
        Self { marker, reader }
    }

    /// Stops reading (an `ECHO` of the marker) and returns the counts.
    fn stop(self, server: &RedisServer) -> HashMap<String, u64> {
        let _: String = redis::cmd("ECHO")
            .arg(&self.marker)
            .query(&mut server.client())
            .unwrap();
        self.reader.join().unwrap()
    }
}

/// The commands `monitor` saw other than the store calls and the test's own
/// `INFO`/`KEYS`/`TYPE`/`DUMP`/`ECHO`.
fn others(engine: Engine, monitor: &HashMap<String, u64>) -> HashMap<String, u64> {
    monitor
        .iter()
        .filter(|(name, _)| {
            !engine.is_store_call(name)
                && !matches!(name.as_str(), "info" | "keys" | "type" | "dump" | "echo")
        })
        .map(|(n, c)| (n.clone(), *c))
        .collect()
}

fn store_calls_seen(engine: Engine, monitor: &HashMap<String, u64>) -> u64 {
    monitor
        .iter()
        .filter(|(name, _)| engine.is_store_call(name))
        .map(|(_, c)| c)
        .sum()
}

/// A reservation held: its receipt text and its costs.
type Held = (String, [u64; 2]);

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A forger's receipt text of `costs` on the record `record`: well formed,
/// signed, but with a key of the forger's own (not the service's secret).
fn forged_receipt_of(costs: &[u64], record: RecordRef) -> String {
    let request = Cost::PerLimit(costs.to_vec()).usage(KEY, limits()).unwrap();
    slidelog::ReceiptKey::random().seal(&Receipt::new(&request, record), KEY)
}

/// Warms the limiter's scripts (or module commands) on another key, so the
/// counted part sees no `NOSCRIPT` reload.
async fn warm(limiter: &Limiter) {
    let request = Request::with_costs("warm", limits(), vec![1, 1]).unwrap();
    let d = limiter.decide(&request, Mode::Record).await.unwrap();
    let receipt = limiter.receipt(&request, d.record).unwrap();
    assert!(
        limiter
            .settle("warm", &limits(), &receipt, [0, 0])
            .await
            .unwrap()
            .settled
    );
    limiter.charge("warm", &limits(), [1, 1]).await.unwrap();
}

// ---------------------------------------------------------------- exactness

async fn exact_sequence(engine: Engine) {
    let setup = Setup::new(engine, "settle_storm_exact");
    let limiter = setup.limiter(true).await;
    let truth = setup.limiter(false).await;
    let cache = limiter.rejection_cache().unwrap().clone();
    warm(&limiter).await;
    let started = Instant::now();
    let mut rng = Rng(0x5eed_0024);
    // The model: live units per limit, and the reservations still held.
    let mut model = [0u64; 2];
    let mut held: Vec<Held> = Vec::new();
    let (mut local, mut checks, mut freed_then_admitted, mut freeing) = (0u64, 0u64, 0u64, 0u64);
    let mut after_freeing = false;
    // A charge merged into a full log's newest record (both engines,
    // docs/design.md §4.5, §4.6).
    let mut merged = false;
    for step in 0..2_500u32 {
        let roll = rng.below(100);
        if after_freeing || roll < 70 || (held.is_empty() && roll < 97) {
            // A check: the smallest cost right after a freeing settle (the
            // one a cached rejection would cover), else one of a few.
            let tokens = if after_freeing {
                1
            } else {
                [1, 1, 10, 30][rng.below(4) as usize]
            };
            let request = Request::with_costs(KEY, limits(), vec![1, tokens]).unwrap();
            let fits = model[0] < MAX_REQUESTS && model[1] + tokens <= MAX_TOKENS;
            let seen = truth.decide(&request, Mode::Peek).await.unwrap();
            assert_eq!(
                seen.allowed, fits,
                "step {step}: store {seen:?}, model {model:?}"
            );
            let before = cache.stats().local_answers;
            let got = limiter.decide(&request, Mode::Record).await.unwrap();
            let was_local = cache.stats().local_answers > before;
            checks += 1;
            assert_eq!(got.allowed, fits, "step {step}: {got:?}, model {model:?}");
            assert_eq!(
                (got.limit, got.count, got.remaining),
                (seen.limit, seen.count, seen.remaining),
                "step {step} (local: {was_local}): {got:?} vs the store's {seen:?}"
            );
            if was_local {
                local += 1;
                assert!(
                    !after_freeing,
                    "step {step}: a cached rejection after a settle freed units"
                );
                assert!(!seen.allowed && got.retry_after_ms <= seen.retry_after_ms);
            }
            if after_freeing && got.allowed {
                freed_then_admitted += 1;
            }
            after_freeing = false;
            if got.allowed {
                model[0] += 1;
                model[1] += tokens;
                held.push((limiter.receipt(&request, got.record).unwrap(), [1, tokens]));
            }
        } else if roll < 97 && !held.is_empty() {
            // A settle: down, to 0 tokens, a refund, or up.
            let (receipt, old) = held.swap_remove(rng.below(held.len() as u64) as usize);
            let new = match rng.below(4) {
                0 => [1, old[1] / 2],
                1 => [1, 0],
                2 => [0, 0],
                _ => [old[0], old[1] + 1 + rng.below(60)],
            };
            let settled = limiter.settle(KEY, &limits(), &receipt, new).await.unwrap();
            if !settled.settled {
                // A charge merged into a full log's newest record and
                // moved it to the charge's time (docs/design.md §4.6; the
                // scripts rename it too, §4.5): its receipts no longer
                // settle, its shares stay counted.
                assert!(merged, "step {step}: {settled:?}");
                continue;
            }
            model[0] = model[0] + new[0] - old[0];
            model[1] = model[1] + new[1] - old[1];
            for (i, state) in settled.limits.iter().enumerate() {
                let counts = state.counts.as_ref().expect("a settle answers every limit");
                assert_eq!(
                    counts.count, model[i],
                    "step {step}: limit {i} after the settle"
                );
            }
            if new[0] < old[0] || new[1] < old[1] {
                freeing += 1;
                after_freeing = true;
            }
            if new != [0, 0] {
                let record = settled.decision.record.expect("the settled record");
                let settled_to = Cost::PerLimit(new.to_vec()).usage(KEY, limits()).unwrap();
                held.push((limiter.receipt(&settled_to, Some(record)).unwrap(), new));
            }
        } else {
            // A charge: tokens only, or one request and tokens; sometimes
            // exactly what fills the token limit.
            let gap = MAX_TOKENS.saturating_sub(model[1]);
            let tokens = if (1..=300).contains(&gap) && rng.below(2) == 0 {
                gap
            } else {
                1 + rng.below(20)
            };
            let cost = [u64::from(rng.below(4) == 0), tokens];
            let full = (cost[0] > 0 && model[0] >= MAX_REQUESTS) || model[1] >= MAX_TOKENS;
            merged |= full;
            let after = limiter.charge(KEY, &limits(), cost).await.unwrap();
            model[0] += cost[0];
            model[1] += cost[1];
            for (i, state) in after.limits.iter().enumerate() {
                let counts = state.counts.as_ref().expect("a charge answers every limit");
                assert_eq!(
                    counts.count, model[i],
                    "step {step}: limit {i} after the charge"
                );
            }
            // Keep the log from staying over its max for the rest of the run.
            while model[0] >= MAX_REQUESTS + 5 || model[1] >= MAX_TOKENS + 300 {
                let Some((receipt, old)) = held.pop() else {
                    break;
                };
                let s = limiter
                    .settle(KEY, &limits(), &receipt, [0, 0])
                    .await
                    .unwrap();
                if !s.settled {
                    assert!(merged, "step {step}: {s:?}");
                    continue;
                }
                model[0] -= old[0];
                model[1] -= old[1];
                freeing += 1;
                after_freeing = true;
            }
        }
    }
    assert!(
        started.elapsed() < Duration::from_millis(WINDOW_MS - 10_000),
        "the model assumes nothing expired"
    );
    assert_eq!(totals(&truth).await, model, "the final log's totals");
    eprintln!(
        "{engine:?} exactness: {checks} checks, {local} from the cache, {freeing} freeing \
         settles, {freed_then_admitted} admitted right after one; totals {model:?}"
    );
    assert!(
        local >= 100,
        "only {local} local answers: the cache was barely used"
    );
    assert!(freed_then_admitted >= 20, "{freed_then_admitted}");
}

#[tokio::test]
async fn settles_and_charges_keep_the_rejection_cache_exact_scripts() {
    exact_sequence(Engine::Scripts).await;
}

#[tokio::test]
async fn settles_and_charges_keep_the_rejection_cache_exact_module() {
    exact_sequence(Engine::Module).await;
}

/// The comparison above can see a stale cached rejection: a refund sent
/// straight to the store (so the limiter's cache is not told) leaves the
/// cache rejecting what the store admits; the same refund through
/// `Limiter::settle` does not.
#[tokio::test]
async fn the_comparison_sees_a_rejection_a_settle_left_stale() {
    let setup = Setup::new(Engine::Scripts, "settle_storm_stale");
    let limiter = setup.limiter(true).await;
    let truth = setup.limiter(false).await;
    let cache = limiter.rejection_cache().unwrap().clone();
    let request = Request::with_costs(KEY, limits(), vec![1, 1]).unwrap();
    let mut receipts = Vec::new();
    for _ in 0..MAX_REQUESTS {
        let d = limiter.decide(&request, Mode::Record).await.unwrap();
        receipts.push(limiter.receipt(&request, d.record).unwrap());
    }
    let refund = Cost::PerLimit(vec![0, 0]).usage(KEY, limits()).unwrap();
    for (through_limiter, receipt) in [(false, &receipts[0]), (true, &receipts[1])] {
        // Rejected by the store, then by the cache.
        assert!(
            !limiter
                .decide(&request, Mode::Record)
                .await
                .unwrap()
                .allowed
        );
        let before = cache.stats().local_answers;
        assert!(
            !limiter
                .decide(&request, Mode::Record)
                .await
                .unwrap()
                .allowed
        );
        assert_eq!(cache.stats().local_answers, before + 1);
        if through_limiter {
            let s = limiter
                .settle(KEY, &limits(), receipt, [0, 0])
                .await
                .unwrap();
            assert!(s.settled);
        } else {
            let parsed = limiter.receipt_key().open(receipt, &refund).unwrap();
            let s = limiter
                .store()
                .settle(&refund, &parsed, Now::Server)
                .await
                .unwrap();
            assert!(s.settled);
        }
        let seen = truth.decide(&request, Mode::Peek).await.unwrap();
        assert!(seen.allowed, "the store has room again");
        let got = limiter.decide(&request, Mode::Record).await.unwrap();
        // Bypassed: the cache still rejects (what the storm tests would
        // flag); through the limiter: the store decides and admits.
        assert_eq!(got.allowed, through_limiter, "{got:?}");
        if !through_limiter {
            // Take the freed slot so the next round starts full again.
            assert!(truth.decide(&request, Mode::Record).await.unwrap().allowed);
        }
    }
}

// -------------------------------------------------------------------- storm

const CHECKERS: usize = 64;
const CHECKS_EACH: u64 = 150;
const SETTLERS: usize = 4;
const CHARGERS: usize = 2;
const CHARGES_EACH: u64 = 40;

#[derive(Default)]
struct Counters {
    checks: AtomicU64,
    admitted: AtomicU64,
    settles: AtomicU64,
    charges: AtomicU64,
    /// The live units the operations left, per limit (signed moves).
    requests: AtomicU64,
    tokens: AtomicU64,
}

async fn storm(engine: Engine) {
    let setup = Setup::new(engine, "settle_storm_calls");
    let limiter = setup.limiter(true).await;
    let truth = setup.limiter(false).await;
    warm(&limiter).await;
    // KEY's override (none) read now, before the calls are counted.
    limiter.peek(KEY, &limits(), 1).await.unwrap();
    let cache = limiter.rejection_cache().unwrap().clone();
    let local_before = cache.stats().local_answers;
    let stats_before = setup.commandstats();
    let monitor = Monitor::start(&setup.server);
    let started = Instant::now();

    let counters = Arc::new(Counters::default());
    let held: Arc<Mutex<Vec<Held>>> = Arc::default();
    let running = Arc::new(AtomicU64::new(CHECKERS as u64));
    let mut tasks = Vec::new();
    for t in 0..CHECKERS {
        let (limiter, counters, held, running) = (
            limiter.clone(),
            counters.clone(),
            held.clone(),
            running.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut rng = Rng(0x1234_5678 + t as u64);
            for _ in 0..CHECKS_EACH {
                let tokens = [1, 1, 40, 120][rng.below(4) as usize];
                let request = Request::with_costs(KEY, limits(), vec![1, tokens]).unwrap();
                let d = limiter.decide(&request, Mode::Record).await.unwrap();
                assert!(!d.degraded);
                counters.checks.fetch_add(1, Ordering::Relaxed);
                if d.allowed {
                    counters.admitted.fetch_add(1, Ordering::Relaxed);
                    counters.requests.fetch_add(1, Ordering::Relaxed);
                    counters.tokens.fetch_add(tokens, Ordering::Relaxed);
                    let receipt = limiter.receipt(&request, d.record).unwrap();
                    held.lock().unwrap().push((receipt, [1, tokens]));
                }
                tokio::task::yield_now().await;
            }
            running.fetch_sub(1, Ordering::Release);
        }));
    }
    for t in 0..SETTLERS {
        let (limiter, counters, held, running) = (
            limiter.clone(),
            counters.clone(),
            held.clone(),
            running.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut rng = Rng(0xabcd + t as u64);
            loop {
                let next = held.lock().unwrap().pop();
                let Some((receipt, old)) = next else {
                    if running.load(Ordering::Acquire) == 0 {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    continue;
                };
                let new = match rng.below(3) {
                    0 => [1, old[1] / 3],
                    1 => [1, 0],
                    _ => [0, 0],
                };
                let s = limiter.settle(KEY, &limits(), &receipt, new).await.unwrap();
                assert!(s.settled, "{s:?}");
                counters.settles.fetch_add(1, Ordering::Relaxed);
                counters
                    .requests
                    .fetch_sub(old[0] - new[0], Ordering::Relaxed);
                counters
                    .tokens
                    .fetch_sub(old[1] - new[1], Ordering::Relaxed);
            }
        }));
    }
    for _ in 0..CHARGERS {
        let (limiter, counters) = (limiter.clone(), counters.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..CHARGES_EACH {
                limiter.charge(KEY, &limits(), [0, 3]).await.unwrap();
                counters.charges.fetch_add(1, Ordering::Relaxed);
                counters.tokens.fetch_add(3, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let elapsed = started.elapsed();
    let sent = monitor.stop(&setup.server);
    let calls = setup.store_calls_since(&stats_before);
    let local = cache.stats().local_answers - local_before;
    let c = &counters;
    let (checks, settles, charges) = (
        c.checks.load(Ordering::Relaxed),
        c.settles.load(Ordering::Relaxed),
        c.charges.load(Ordering::Relaxed),
    );
    eprintln!(
        "{engine:?} storm in {elapsed:?}: {checks} checks ({} admitted, {local} from the cache), \
         {settles} settles, {charges} charges; {calls} store calls; sent {sent:?}",
        c.admitted.load(Ordering::Relaxed)
    );
    assert_eq!(checks, CHECKERS as u64 * CHECKS_EACH);
    assert_eq!(charges, CHARGERS as u64 * CHARGES_EACH);
    assert_eq!(
        settles,
        c.admitted.load(Ordering::Relaxed),
        "every reservation settled"
    );
    // One call per check the store answered, per settle, per charge: no
    // retries, no reads beside them, none for a cached rejection.
    assert_eq!(calls, checks - local + settles + charges);
    assert_eq!(store_calls_seen(engine, &sent), calls, "MONITOR agrees");
    assert!(
        others(engine, &sent).is_empty(),
        "other commands sent: {sent:?}"
    );
    assert!(
        local >= checks / 4,
        "only {local} of {checks} answered by the cache"
    );
    assert!(elapsed < Duration::from_millis(WINDOW_MS - 10_000));
    let model = [
        c.requests.load(Ordering::Relaxed),
        c.tokens.load(Ordering::Relaxed),
    ];
    assert_eq!(totals(&truth).await, model, "the final log's totals");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settle_storm_costs_one_call_per_settle_and_none_per_cached_rejection_scripts() {
    storm(Engine::Scripts).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settle_storm_costs_one_call_per_settle_and_none_per_cached_rejection_module() {
    storm(Engine::Module).await;
}

// ----------------------------------------------------------------- forgeries

const FORGED: u64 = 10_000;

async fn forged_receipts(engine: Engine) {
    let setup = Setup::new(engine, "settle_storm_forged");
    let limiter = setup.limiter(true).await;
    let truth = setup.limiter(false).await;
    warm(&limiter).await;
    // A full hot key: 100 reservations of 40 tokens; the first one's receipt
    // is the real one the forgeries start from.
    let request = Request::with_costs(KEY, limits(), vec![1, 40]).unwrap();
    let mut live = Vec::new();
    for _ in 0..MAX_REQUESTS {
        let d = limiter.decide(&request, Mode::Record).await.unwrap();
        assert!(d.allowed);
        live.push(d.record.unwrap());
    }
    let real = live[0];
    // A receipt of [1, 40] naming a live record is a real one, not a
    // forgery: by id and time on the scripts. The module keeps one record
    // per millisecond and settles a receipt's share of it (docs/design.md
    // §4.6): a receipt at a live record's time within its costs (n
    // reservations of that ms: [n, 40 n]) names a share of it.
    let names_a_live_record = |r: &Receipt| match engine {
        Engine::Scripts => {
            r.costs() == [1, 40] && live.iter().any(|l| l.ts == r.ts() && l.id == r.id())
        }
        Engine::Module => {
            let n = live.iter().filter(|l| l.ts == r.ts()).count() as u64;
            n > 0 && r.cost_for(0) <= n && r.cost_for(1) <= 40 * n
        }
    };
    let real_text = limiter.receipt(&request, Some(real)).unwrap();
    let usage = Cost::PerLimit(vec![1, 1]).usage(KEY, limits()).unwrap();
    let dump_before = setup.dump_logs();
    assert!(!dump_before.is_empty());
    let totals_before = totals(&truth).await;
    assert_eq!(totals_before, [MAX_REQUESTS, MAX_REQUESTS * 40]);
    let stats_before = setup.commandstats();
    let monitor = Monitor::start(&setup.server);

    let mut rng = Rng(0xf0f0_2424);
    let (mut refused_locally, mut not_found, mut same_as_real) = (0u64, 0u64, 0u64);
    for i in 0..FORGED {
        let forged = match i % 6 {
            // Bytes that are not a receipt.
            0 => {
                let bytes: Vec<u8> = (0..rng.below(80)).map(|_| rng.next() as u8).collect();
                String::from_utf8_lossy(&bytes).into_owned()
            }
            // base64url of random bytes.
            1 => (0..1 + rng.below(120))
                .map(|_| {
                    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
                        [rng.below(64) as usize] as char
                })
                .collect(),
            // The real receipt with one character changed.
            2 => {
                let mut r = real_text.clone().into_bytes();
                let at = rng.below(r.len() as u64) as usize;
                r[at] = b"AZaz09-_Qq"[rng.below(10) as usize];
                String::from_utf8(r).unwrap()
            }
            // Well formed, right key and limits, a made-up record id (on
            // the module, which finds records by time, before any record).
            3 => forged_receipt_of(
                &[1, 40],
                RecordRef {
                    ts: match engine {
                        Engine::Scripts => real.ts,
                        Engine::Module => real.ts - 1 - rng.below(3),
                    },
                    id: Some(u128::from(rng.next()) << 64 | u128::from(rng.next())),
                },
            ),
            // The real id and time under other costs.
            4 => forged_receipt_of(&[1 + rng.below(3), 41 + rng.below(100)], real),
            // The real id and costs at another time.
            _ => forged_receipt_of(
                &[1, 40],
                RecordRef {
                    ts: real.ts - 1 - rng.below(5_000),
                    id: real.id,
                },
            ),
        };
        let opened = limiter.receipt_key().open(&forged, &usage);
        if opened.is_ok_and(|r| names_a_live_record(&r)) {
            same_as_real += 1; // e.g. an edit of the spare bits: not sent
            continue;
        }
        match limiter.settle(KEY, &limits(), &forged, [1, 1]).await {
            Err(LimiterError::Input(InputError::Receipt(_))) => refused_locally += 1,
            Ok(s) => {
                assert!(!s.settled, "forgery {i} {forged:?} settled: {s:?}");
                let counts: Vec<u64> = s.limits.iter().map(|l| l.counts.unwrap().count).collect();
                assert_eq!(counts, totals_before, "forgery {i}");
                not_found += 1;
            }
            Err(e) => panic!("forgery {i} {forged:?}: {e:?}"),
        }
    }
    let sent = monitor.stop(&setup.server);
    let calls = setup.store_calls_since(&stats_before);
    eprintln!(
        "{engine:?} forgeries: {FORGED}: {refused_locally} refused without a call, {not_found} \
         not found by the store, {same_as_real} decoded to the real one (not sent); {calls} \
         store calls; sent {sent:?}"
    );
    assert_eq!(refused_locally + not_found + same_as_real, FORGED);
    // Signed receipts: every forgery (a forger's own key, an edited
    // character, random bytes) is refused before the store is asked.
    assert_eq!((not_found, calls), (0, 0), "forgeries reached the store");
    assert_eq!(store_calls_seen(engine, &sent), calls, "MONITOR agrees");
    assert!(
        others(engine, &sent).is_empty(),
        "other commands sent: {sent:?}"
    );
    // Only an edited character (one case in six) can leave the real text.
    assert!(same_as_real <= FORGED / 6, "{same_as_real}");
    assert_eq!(setup.dump_logs(), dump_before, "a forgery changed the log");
    assert_eq!(totals(&truth).await, totals_before);
    // The real receipt still names its record.
    let s = limiter
        .settle(KEY, &limits(), &real_text, [0, 0])
        .await
        .unwrap();
    assert!(s.settled);
    assert_eq!(
        totals(&truth).await,
        [MAX_REQUESTS - 1, MAX_REQUESTS * 40 - 40]
    );
}

#[tokio::test]
async fn forged_receipts_on_a_hot_key_never_change_the_log_scripts() {
    forged_receipts(Engine::Scripts).await;
}

#[tokio::test]
async fn forged_receipts_on_a_hot_key_never_change_the_log_module() {
    forged_receipts(Engine::Module).await;
}

// ------------------------------------------------- a settle racing a check

/// Holds a call at a point until released (armed once).
#[derive(Debug, Default)]
struct Gate {
    armed: AtomicBool,
    reached: tokio::sync::Notify,
    release: tokio::sync::Notify,
}

impl Gate {
    async fn pass(&self) {
        if self.armed.swap(false, Ordering::SeqCst) {
            self.reached.notify_one();
            self.release.notified().await;
        }
    }
}

/// A memory store seen as a network store (so the limiter caches its
/// rejections) on a manual clock, whose decisions can be held after the
/// store decided (a reply still on the wire) and whose settles can be held
/// before they run.
#[derive(Debug)]
struct Gated {
    inner: MemoryStore,
    clock: ManualClock,
    decided: Gate,
    settling: Gate,
}

impl Gated {
    fn at(&self, now: Now) -> Now {
        match now {
            Now::Server => Now::At(slidelog::store::Clock::now_ms(&self.clock)),
            at => at,
        }
    }
}

#[async_trait::async_trait]
impl Store for Gated {
    async fn decide(&self, r: &Request, mode: Mode, now: Now) -> Result<Decision, StoreError> {
        let decision = self.inner.decide(r, mode, self.at(now)).await;
        self.decided.pass().await;
        decision
    }
    async fn settle(&self, r: &Request, rc: &Receipt, now: Now) -> Result<Settled, StoreError> {
        self.settling.pass().await;
        self.inner.settle(r, rc, self.at(now)).await
    }
    async fn charge(&self, r: &Request, now: Now) -> Result<Detailed, StoreError> {
        self.inner.charge(r, self.at(now)).await
    }
    async fn reset(&self, key: &str) -> Result<bool, StoreError> {
        self.inner.reset(key).await
    }
    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }
    fn kind(&self) -> &'static str {
        "gated-memory"
    }
}

/// A rejection the store decided before a settle freed units but whose
/// reply arrives after the settle is not kept by the cache: (1) decided
/// before the settle started (the settle's first forget voids it), and
/// (2) sent after the settle's first forget but decided before its store
/// call (only the forget after the call voids it). Either way the next
/// check is the store's, and admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejection_in_flight_across_a_settle_is_not_cached() {
    let clock = ManualClock::new(1_767_225_600_000);
    let store = Arc::new(Gated {
        inner: MemoryStore::new(),
        clock: clock.clone(),
        decided: Gate::default(),
        settling: Gate::default(),
    });
    let limiter = Limiter::builder()
        .rejection_cache(RejectionCache::with_clock(1_000, Arc::new(clock)))
        .build(store.clone());
    let cache = limiter.rejection_cache().unwrap().clone();
    let limits = [Limit::new(3, WINDOW_MS).unwrap()];
    let request = Request::new(KEY, limits.to_vec(), 1).unwrap();
    let mut receipts = Vec::new();
    for _ in 0..3 {
        let d = limiter.decide(&request, Mode::Record).await.unwrap();
        receipts.push(limiter.receipt(&request, d.record).unwrap());
    }
    let check = || {
        let limiter = limiter.clone();
        let limits = limits.to_vec();
        tokio::spawn(async move { limiter.check(KEY, &limits, 1).await.unwrap() })
    };
    for (case, receipt) in receipts.iter().take(2).enumerate() {
        let settle = if case == 0 {
            // (1) The check is decided (rejected) and its reply held; then
            // the whole settle runs.
            store.decided.armed.store(true, Ordering::SeqCst);
            let a = check();
            store.decided.reached.notified().await;
            let s = limiter.settle(KEY, &limits, receipt, 0).await.unwrap();
            store.decided.release.notify_one();
            assert!(!a.await.unwrap().allowed, "decided before the refund");
            s
        } else {
            // (2) The settle forgets and waits before its store call; the
            // check is sent, decided (rejected) and its reply held; the
            // settle runs and returns; then the check's reply arrives.
            store.settling.armed.store(true, Ordering::SeqCst);
            let s = {
                let limiter = limiter.clone();
                let (limits, receipt) = (limits.to_vec(), receipt.clone());
                tokio::spawn(async move { limiter.settle(KEY, &limits, &receipt, 0).await })
            };
            store.settling.reached.notified().await;
            store.decided.armed.store(true, Ordering::SeqCst);
            let a = check();
            store.decided.reached.notified().await;
            store.settling.release.notify_one();
            let s = s.await.unwrap().unwrap();
            store.decided.release.notify_one();
            assert!(!a.await.unwrap().allowed, "decided before the refund");
            s
        };
        assert!(settled_to_room(&settle), "case {case}: {settle:?}");
        let before = cache.stats().local_answers;
        let next = limiter.check(KEY, &limits, 1).await.unwrap();
        assert_eq!(
            cache.stats().local_answers,
            before,
            "case {case}: a stale local answer"
        );
        assert!(next.allowed, "case {case}: {next:?}");
    }
    // The control: case (2) with only the forget before the store call (the
    // forget by hand, the refund straight to the store) leaves the held
    // rejection cached: the next check is answered locally, and wrongly.
    cache.forget(KEY);
    store.decided.armed.store(true, Ordering::SeqCst);
    let a = check();
    store.decided.reached.notified().await;
    let refund = Cost::All(0).usage(KEY, limits.to_vec()).unwrap();
    let receipt = limiter.receipt_key().open(&receipts[2], &refund).unwrap();
    let s = store.settle(&refund, &receipt, Now::Server).await.unwrap();
    assert!(settled_to_room(&s), "{s:?}");
    store.decided.release.notify_one();
    assert!(!a.await.unwrap().allowed);
    let before = cache.stats().local_answers;
    let next = limiter.check(KEY, &limits, 1).await.unwrap();
    assert_eq!(cache.stats().local_answers, before + 1, "the control");
    assert!(!next.allowed, "the control: {next:?}");
}

/// True when the settle found its record and left room for one more.
fn settled_to_room(s: &Settled) -> bool {
    s.settled && s.decision.remaining >= 1
}

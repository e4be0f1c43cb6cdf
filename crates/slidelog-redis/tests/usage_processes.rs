//! Reservations settled across OS processes (docs/design.md
//! §4.5): 3 processes (this test binary run again as children) x 16
//! concurrent clients on one key with two named limits, `requests` (cost 1)
//! and `tokens` (an estimate of 20 to 80). Each client checks its estimate
//! (`decide_each`) and, when admitted, settles the record its receipt names
//! (`Receipt::issue` / `Receipt::for_request`) to the actual usage: down,
//! to 0 tokens, refunded (0 everywhere: removed), or up past the estimate.
//!
//! The window (10 min) is long enough that nothing expires during a run, so
//! the log is the whole history and the checks are exact:
//!
//! - every admission's reported count, in each limit, is <= its max;
//! - it agrees with the history: at an admission at `t`, each record
//!   admitted before `t` counts its estimate if settled after `t`, its
//!   settled cost if settled before `t` (up or down), either when settled at
//!   `t`; records admitted at `t` itself may or may not come first. The
//!   reported count lies between the least and the most this allows, and
//!   the least (the live settled costs before the admission plus its
//!   estimate) is <= max;
//! - every settle found its record, and the final log holds exactly the
//!   settled costs (a charge of 0 reads every limit's live units; on the
//!   scripts every member's time and costs, on the module its record count);
//! - in the server's own order: `MONITOR` on the key's server sees every
//!   check and settle as it ran; replayed on a model of the log (a multiset
//!   of costs: admit when every limit's live units plus the cost fit), it
//!   admits exactly the admissions the children report, each with the
//!   counts it reported, and ends at the log's live units. This pins every
//!   count exactly, where the children's millisecond times leave ties.
//!
//! Runs on the scripts (Redis and Valkey), the module engine (Redis and
//! Valkey), and a 3-master cluster with the module on every node. A
//! `harness = false` target: `main` is the child when `SLIDELOG_CHILD_URL`
//! is set and otherwise runs the cases (slidelog_testkit::runner), so the
//! child is never a test that passes by returning early.

mod common;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::aio::ConnectionLike;
use slidelog_core::{Limit, Mode, Now, Receipt, Request, Store};
use slidelog_redis::usage::Usage;
use slidelog_redis::{ClusterStore, Engine, RedisOptions, RedisStore, ScriptStore};
use slidelog_testkit::runner::{self, Case};
use slidelog_testkit::{RedisCluster, RedisServer, ServerKind, module_path, unique_prefix};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

const PROCESSES: usize = 3;
const CLIENTS: usize = 16;
const KEY: &str = "hot";
/// `requests` and `tokens` per 10 minutes: nothing expires during a run.
const MAXES: [u64; 2] = [200, 6_000];
const WINDOW_MS: u64 = 600_000;
/// A client stops after this many rejections, or after `RUN_MS`.
const REJECTIONS: u32 = 30;
const RUN_MS: u64 = 8_000;

fn limits() -> Vec<Limit> {
    vec![
        Limit::new(MAXES[0], WINDOW_MS)
            .unwrap()
            .named("requests")
            .unwrap(),
        Limit::new(MAXES[1], WINDOW_MS)
            .unwrap()
            .named("tokens")
            .unwrap(),
    ]
}

fn main() -> ExitCode {
    if let Ok(url) = std::env::var("SLIDELOG_CHILD_URL") {
        child_process(url);
        return ExitCode::SUCCESS;
    }
    let mut cases = Vec::new();
    for kind in ServerKind::ALL {
        cases.push(Case::new(
            format!("reservations_settled_across_processes_never_exceed_the_limit_scripts_{kind}"),
            move || on_one_server(kind, "script"),
        ));
        cases.push(Case::new(
            format!("reservations_settled_across_processes_never_exceed_the_limit_module_{kind}"),
            move || on_one_server(kind, "module"),
        ));
    }
    // The testkit's cluster with node arguments is of the environment's kind.
    let kind = ServerKind::from_env();
    cases.push(Case::new(
        format!(
            "reservations_settled_across_processes_never_exceed_the_limit_module_cluster_{kind}"
        ),
        on_a_module_cluster,
    ));
    runner::run(cases)
}

/// One admission and its settle, as a child reports it.
#[derive(Debug, Clone, Copy)]
struct Reservation {
    /// The record's time (the time the check decided at).
    ts: u64,
    /// The costs checked: `[1, estimate]`.
    estimate: [u64; 2],
    /// Every limit's count the admission reported.
    counts: [u64; 2],
    /// The costs settled to.
    actual: [u64; 2],
    /// The time the settle decided at.
    settled_at: u64,
    /// Whether the settle found the record.
    settled: bool,
}

impl Reservation {
    fn parse(line: &str) -> Self {
        let n: Vec<u64> = line.split(' ').map(|v| v.parse().unwrap()).collect();
        assert_eq!(n.len(), 9, "{line}");
        Self {
            ts: n[0],
            estimate: [n[1], n[2]],
            counts: [n[3], n[4]],
            actual: [n[5], n[6]],
            settled_at: n[7],
            settled: n[8] == 1,
        }
    }

    fn line(&self) -> String {
        format!(
            "RESERVED {} {} {} {} {} {} {} {} {}",
            self.ts,
            self.estimate[0],
            self.estimate[1],
            self.counts[0],
            self.counts[1],
            self.actual[0],
            self.actual[1],
            self.settled_at,
            u8::from(self.settled)
        )
    }
}

/// What the children did: every reservation (by time) and the rejections.
struct Run {
    reservations: Vec<Reservation>,
    rejected: u64,
}

/// Starts the children (coordinated through `coordinator`; they decide on
/// `store_url`), releases them together and collects their reports.
fn run_children(coordinator: &RedisServer, prefix: &str, store_url: &str, cluster: bool) -> Run {
    let env = [
        ("SLIDELOG_CHILD_STORE_URL", store_url.to_owned()),
        ("SLIDELOG_CHILD_CLUSTER", u8::from(cluster).to_string()),
    ];
    let mut run = Run {
        reservations: Vec::new(),
        rejected: 0,
    };
    for stdout in common::children::run_children(coordinator, prefix, PROCESSES, &env) {
        for line in stdout.lines() {
            if let Some(r) = line.strip_prefix("RESERVED ") {
                run.reservations.push(Reservation::parse(r));
            } else if let Some(n) = line.strip_prefix("REJECTED ") {
                run.rejected += n.trim().parse::<u64>().unwrap();
            }
        }
    }
    run.reservations.sort_by_key(|r| (r.ts, r.settled_at));
    run
}

/// A record's cost in limit `p` as an admission at `t` may have seen it:
/// `(least, most)`. `None`: it certainly came after.
fn seen_at(r: &Reservation, p: usize, t: u64) -> Option<(u64, u64)> {
    let (est, act) = (r.estimate[p], r.actual[p]);
    let cost = if r.settled_at < t {
        (act, act)
    } else if r.settled_at > t {
        (est, est)
    } else {
        (est.min(act), est.max(act))
    };
    match r.ts.cmp(&t) {
        std::cmp::Ordering::Less => Some(cost),
        // Admitted in the same ms: before or after, both are possible.
        std::cmp::Ordering::Equal => Some((0, cost.1)),
        std::cmp::Ordering::Greater => None,
    }
}

/// What the history says of the admissions: the violations (described),
/// how many admissions saw a reservation still open (admitted before,
/// settled after), and how many counts the history pins down exactly.
struct Verdict {
    violations: Vec<String>,
    saw_open: usize,
    exact: usize,
}

/// Every admission checked against the history and the maxes.
fn verdict(reservations: &[Reservation]) -> Verdict {
    let mut v = Verdict {
        violations: Vec::new(),
        saw_open: 0,
        exact: 0,
    };
    for (i, a) in reservations.iter().enumerate() {
        let open = reservations
            .iter()
            .any(|r| r.ts < a.ts && r.settled_at > a.ts);
        v.saw_open += usize::from(open);
        for (p, name) in ["requests", "tokens"].into_iter().enumerate() {
            let (mut least, mut most) = (a.estimate[p], a.estimate[p]);
            for (j, r) in reservations.iter().enumerate() {
                if j == i {
                    continue;
                }
                if let Some((l, m)) = seen_at(r, p, a.ts) {
                    least += l;
                    most += m;
                }
            }
            let count = a.counts[p];
            v.exact += usize::from(least == most);
            if count > MAXES[p] || least > MAXES[p] || count < least || count > most {
                v.violations.push(format!(
                    "admission at {} (estimate {:?}): {name} reported {count}, the history \
                     allows {least}..={most}, max {}",
                    a.ts, a.estimate, MAXES[p]
                ));
            }
        }
    }
    v
}

fn on_one_server(kind: ServerKind, engine: &str) {
    let server = if engine == "module" {
        RedisServer::start_with_module(kind, &[])
    } else {
        RedisServer::start_kind(kind)
    };
    let prefix = unique_prefix("usage-procs");
    let url = format!("{}?engine={engine}", server.url());
    let redis_key = format!("{prefix}{KEY}");
    // Both scripts cached before the monitor starts, so no check or settle
    // it sees failed with NOSCRIPT.
    block_on(async {
        let store = RedisStore::connect(&url, options(&format!("{prefix}warm:")))
            .await
            .unwrap();
        live_units(&store).await;
        let check = Request::with_costs(KEY, limits(), vec![1, 1]).unwrap();
        store
            .decide_each(&check, Mode::Peek, Now::Server)
            .await
            .unwrap();
    });
    let monitor = Monitor::start(server.client(), &redis_key);
    let run = run_children(&server, &prefix, &url, false);
    let replay = monitor.stop(&mut server.client());
    let mut c = server.client();
    let live = block_on(async {
        let store = RedisStore::connect(&url, options(&prefix)).await.unwrap();
        live_units(&store).await
    });
    check(&format!("{engine} on {kind}"), &run, &replay, live);
    let kept = kept(&run);
    if engine == "module" {
        assert_eq!(module_records(&mut c, &redis_key), milliseconds(&kept));
    } else {
        // Every member: its time and costs, the settled ones exactly.
        let mut log: Vec<(u64, [u64; 2])> = common::records::<u64>(&mut c, &redis_key)
            .into_iter()
            .map(|(m, ts)| {
                let costs = slidelog_redis::members::costs_of(&m);
                (ts, [costs[0], *costs.last().unwrap()])
            })
            .collect();
        log.sort_unstable();
        assert_eq!(log, kept, "the scripts' log holds the settled costs");
    }
}

fn on_a_module_cluster() {
    let path = module_path();
    let cluster = RedisCluster::start_with_node_args(3, 0, &|| {
        vec!["--loadmodule".into(), path.display().to_string()]
    });
    // The children meet on a server of their own; they decide on the cluster.
    let coordinator = RedisServer::start_kind(cluster.kind());
    let prefix = unique_prefix("usage-procs-cluster");
    let url = format!("{}?engine=module", cluster.url());
    let redis_key = format!("{prefix}{KEY}");
    let port = cluster.master_of_slot(cluster.key_slot(&redis_key));
    let monitor = Monitor::start(cluster.node(port).client(), &redis_key);
    let run = run_children(&coordinator, &prefix, &url, true);
    let replay = monitor.stop(&mut cluster.node(port).client());
    let live = block_on(async {
        let store = ClusterStore::connect_cluster(&url, options(&prefix))
            .await
            .unwrap();
        assert_eq!(store.engine_in_use(), Some(Engine::Module));
        live_units(&store).await
    });
    check(
        &format!("module cluster ({})", cluster.kind()),
        &run,
        &replay,
        live,
    );
    let mut c = cluster.node(port).client();
    assert_eq!(
        module_records(&mut c, &redis_key),
        milliseconds(&kept(&run))
    );
}

/// The assertions every case shares; prints what the run did.
fn check(case: &str, run: &Run, replay: &Replay, live: [u64; 2]) {
    let rs = &run.reservations;
    let ups = rs.iter().filter(|r| r.actual[1] > r.estimate[1]).count();
    let refunds = rs.iter().filter(|r| r.actual == [0, 0]).count();
    let downs = rs.len() - ups - refunds;
    let v = verdict(rs);
    eprintln!(
        "{case}: {} admissions, {} rejections, settles: {downs} down or equal, {ups} up, \
         {refunds} refunds; {} admissions saw a reservation open; {} of {} counts pinned \
         exactly by the history; live {live:?} of {MAXES:?}; {} violations",
        rs.len(),
        run.rejected,
        v.saw_open,
        v.exact,
        2 * rs.len(),
        v.violations.len()
    );
    assert!(
        rs.len() > 100 && run.rejected > 0,
        "the limits were reached: {} admissions, {} rejections",
        rs.len(),
        run.rejected
    );
    assert!(ups > 0 && refunds > 0 && downs > 0, "every kind of settle");
    let lost: Vec<_> = rs.iter().filter(|r| !r.settled).collect();
    assert!(lost.is_empty(), "settles that found nothing: {lost:?}");
    assert!(v.saw_open > 0, "reservations overlapped");
    assert!(
        v.violations.is_empty(),
        "{case}: {} violations of {} admissions:\n{}",
        v.violations.len(),
        rs.len(),
        v.violations.join("\n")
    );
    let want = [0, 1].map(|p| rs.iter().map(|r| r.actual[p]).sum::<u64>());
    assert_eq!(live, want, "the live units are the settled costs");
    // The server's own order: the replay decides every check as the
    // children saw it decided, with the same counts.
    eprintln!(
        "{case}: replayed in the server's order: {} checks ({} admitted), {} settles ({} found)",
        replay.checks,
        replay.admitted.len(),
        replay.settles,
        replay.found
    );
    assert_eq!(replay.checks as u64, rs.len() as u64 + run.rejected);
    assert_eq!(replay.settles, rs.len());
    assert_eq!(replay.found, rs.len(), "every settle found its record");
    let mut seen: Vec<(u64, [u64; 2])> = rs.iter().map(|r| (r.estimate[1], r.counts)).collect();
    seen.sort_unstable();
    let mut replayed = replay.admitted.clone();
    replayed.sort_unstable();
    assert_eq!(
        replayed, seen,
        "the admissions (estimate, counts) replayed in the server's order are those reported"
    );
    assert_eq!(replay.live, live, "the replay ends where the log does");
}

/// The checks and settles on one key in the order the server ran them, read
/// with `MONITOR` (a thread reading until it sees the end marker).
struct Monitor {
    thread: std::thread::JoinHandle<Vec<Vec<String>>>,
    end: String,
}

impl Monitor {
    fn start(mut c: redis::Connection, redis_key: &str) -> Self {
        let end = format!("{redis_key}:monitor-end");
        c.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
        let _: () = redis::cmd("MONITOR").query(&mut c).unwrap();
        let (key, marker) = (redis_key.to_owned(), end.clone());
        let thread = std::thread::spawn(move || {
            let mut commands = Vec::new();
            loop {
                let line: String = redis::from_redis_value(c.recv_response().unwrap()).unwrap();
                // `<time> [<db> <client>] "arg" "arg" ...`; commands run by
                // a script say `lua` as their client.
                let Some((client, args)) = line.split_once("] ") else {
                    continue;
                };
                if client.ends_with("lua") {
                    continue;
                }
                let args: Vec<String> = args
                    .split('"')
                    .skip(1)
                    .step_by(2)
                    .map(str::to_owned)
                    .collect();
                if args.contains(&marker) {
                    return commands;
                }
                if args.get(1) == Some(&key) || args.get(3) == Some(&key) {
                    commands.push(args);
                }
            }
        });
        Self { thread, end }
    }

    /// Ends the monitor (through `c`, on the monitored server) and replays
    /// what it saw.
    fn stop(self, c: &mut redis::Connection) -> Replay {
        let _: String = redis::cmd("ECHO").arg(&self.end).query(c).unwrap();
        let commands = self.thread.join().unwrap();
        replay(&commands)
    }
}

/// What replaying the monitored commands in order gives.
#[derive(Debug, Default)]
struct Replay {
    checks: usize,
    /// Every admission: its estimate and the counts after it.
    admitted: Vec<(u64, [u64; 2])>,
    settles: usize,
    found: usize,
    /// The live units at the end.
    live: [u64; 2],
}

/// `n max window cost ...` starting at `args[at]`: the costs.
fn costs_at(args: &[String], at: usize) -> [u64; 2] {
    assert_eq!(args[at], "2", "{args:?}");
    [0, 1].map(|p| args[at + 3 + 3 * p].parse().unwrap())
}

/// The `numkeys` of a monitored `EVALSHA`.
fn keys(args: &[String]) -> usize {
    args[2].parse().expect("numkeys")
}

fn cost_list(text: &str) -> [u64; 2] {
    let costs: Vec<u64> = text.split(',').map(|c| c.parse().unwrap()).collect();
    match costs[..] {
        [one] => [one, one],
        [a, b] => [a, b],
        _ => panic!("costs {text}"),
    }
}

/// The log as a multiset of costs (nothing expires): a check admits when
/// every limit's live units plus its cost fit, a settle replaces one record
/// of the receipt's costs (records of equal costs are interchangeable when
/// nothing expires).
fn replay(commands: &[Vec<String>]) -> Replay {
    let mut r = Replay::default();
    let mut log: std::collections::HashMap<[u64; 2], usize> = Default::default();
    for args in commands {
        // (check costs) or (receipt costs, settled costs).
        let (check, settle) = match args[0].to_ascii_uppercase().as_str() {
            "SLIDELOG.CHECK" => (Some(costs_at(args, 5)), None),
            "SLIDELOG.SETTLE" => (None, Some((cost_list(&args[5]), costs_at(args, 6)))),
            // The script's arguments start after its keys (`numkeys` of
            // them: the log, its weights, and for a check its pending set).
            "EVALSHA" | "EVAL" if args[3 + keys(args)] == "settle" => {
                let at = 3 + keys(args);
                (
                    None,
                    Some((cost_list(&args[at + 12]), costs_at(args, at + 3))),
                )
            }
            "EVALSHA" | "EVAL" => (Some(costs_at(args, 5 + keys(args))), None),
            _ => continue,
        };
        if let Some(cost) = check {
            r.checks += 1;
            let after = [0, 1].map(|p| r.live[p] + cost[p]);
            if after.iter().zip(MAXES).all(|(a, m)| *a <= m) {
                r.live = after;
                *log.entry(cost).or_default() += 1;
                r.admitted.push((cost[1], after));
            }
        }
        if let Some((from, to)) = settle {
            r.settles += 1;
            let held = log.entry(from).or_default();
            if *held > 0 {
                *held -= 1;
                r.found += 1;
                r.live = [0, 1].map(|p| r.live[p] - from[p] + to[p]);
                if to != [0, 0] {
                    *log.entry(to).or_default() += 1;
                }
            }
        }
    }
    r
}

/// The records the log should hold: `(ts, settled costs)`, refunds removed.
fn kept(run: &Run) -> Vec<(u64, [u64; 2])> {
    let mut kept: Vec<_> = run
        .reservations
        .iter()
        .filter(|r| r.actual != [0, 0])
        .map(|r| (r.ts, r.actual))
        .collect();
    kept.sort_unstable();
    kept
}

/// The records the module holds for `kept`: one per millisecond
/// (docs/design.md §4.1: requests of one ms are one record).
fn milliseconds(kept: &[(u64, [u64; 2])]) -> u64 {
    let mut ts: Vec<u64> = kept.iter().map(|k| k.0).collect();
    ts.dedup();
    ts.len() as u64
}

/// `records` of `SLIDELOG.INFO` on the module's log `redis_key`.
fn module_records(c: &mut redis::Connection, redis_key: &str) -> u64 {
    let info: Vec<redis::Value> = redis::cmd("SLIDELOG.INFO").arg(redis_key).query(c).unwrap();
    info.chunks(2)
        .find(|kv| {
            redis::from_redis_value::<String>(kv[0].clone())
                .ok()
                .as_deref()
                == Some("records")
        })
        .map(|kv| redis::from_redis_value::<u64>(kv[1].clone()).unwrap())
        .expect("SLIDELOG.INFO answers records")
}

/// Every limit's live units: a charge of 0 everywhere appends nothing and
/// answers the limits as they stand.
async fn live_units<C>(store: &ScriptStore<C>) -> [u64; 2]
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    let zero = Request::usage(KEY, limits(), vec![0]).unwrap();
    let d = store.charge(&zero, Now::Server).await.unwrap();
    assert!(d.decision.record.is_none(), "a charge of 0 appends nothing");
    [0, 1].map(|p| d.limits[p].counts.expect("every limit's counts").count)
}

fn options(prefix: &str) -> RedisOptions {
    RedisOptions::default()
        .with_prefix(prefix)
        .with_timeout(common::PATIENT)
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

/// The child: connects its store (`SLIDELOG_CHILD_STORE_URL`, a cluster
/// when `SLIDELOG_CHILD_CLUSTER` is 1) and the coordinator, waits for the
/// release, runs its 16 clients and prints every reservation.
fn child_process(url: String) {
    let store_url = std::env::var("SLIDELOG_CHILD_STORE_URL").unwrap();
    let cluster = std::env::var("SLIDELOG_CHILD_CLUSTER").unwrap() == "1";
    common::children::block_on(|prefix, options| async move {
        let coordinator = RedisStore::connect(&url, options.clone()).await.unwrap();
        let seed = std::process::id() as u64;
        let out = if cluster {
            let store = ClusterStore::connect_cluster(&store_url, options)
                .await
                .unwrap();
            assert_eq!(store.engine_in_use(), Some(Engine::Module));
            let mut conn = coordinator.connection();
            common::children::ready_then_wait(&mut conn, &prefix).await;
            clients(Arc::new(store), seed).await
        } else {
            let store = RedisStore::connect(&store_url, options).await.unwrap();
            let mut conn = coordinator.connection();
            common::children::ready_then_wait(&mut conn, &prefix).await;
            clients(Arc::new(store), seed).await
        };
        print!("{out}");
        println!("CHILD DONE");
    });
}

/// Runs the 16 clients on `store`; answers their report.
async fn clients<C>(store: Arc<ScriptStore<C>>, seed: u64) -> String
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    let started = Instant::now();
    let tasks: Vec<_> = (0..CLIENTS as u64)
        .map(|t| {
            let store = store.clone();
            tokio::spawn(async move { client(&store, seed * 100 + t, started).await })
        })
        .collect();
    let (mut out, mut rejected) = (String::new(), 0);
    for task in tasks {
        let (reservations, r) = task.await.unwrap();
        rejected += r;
        for res in reservations {
            out.push_str(&res.line());
            out.push('\n');
        }
    }
    out.push_str(&format!("REJECTED {rejected}\n"));
    out
}

/// One client: checks an estimate and settles every admission to a random
/// actual usage, until `REJECTIONS` rejections or `RUN_MS`.
async fn client<C>(store: &ScriptStore<C>, seed: u64, started: Instant) -> (Vec<Reservation>, u32)
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut done, mut rejected) = (Vec::new(), 0);
    while rejected < REJECTIONS && started.elapsed() < Duration::from_millis(RUN_MS) {
        let estimate = [1, rng.random_range(20..=80)];
        let check = Request::with_costs(KEY, limits(), estimate.to_vec()).unwrap();
        let d = store
            .decide_each(&check, Mode::Record, Now::Server)
            .await
            .unwrap();
        if !d.decision.allowed {
            rejected += 1;
            tokio::time::sleep(Duration::from_millis(rng.random_range(0..3))).await;
            continue;
        }
        let counts = [0, 1].map(|p| d.limits[p].counts.expect("every limit's counts").count);
        let record = d.decision.record.expect("an admission names its record");
        let text = Receipt::issue(&check, Some(record)).expect("a receipt");
        // Let other clients check while this reservation is open.
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..4))).await;
        let actual = match rng.random_range(0..10) {
            0 | 1 => [0, 0],
            2 => [1, 0],
            3 => [1, estimate[1] + rng.random_range(1..=30)],
            4 => [1, estimate[1]],
            _ => [1, rng.random_range(1..estimate[1])],
        };
        let usage = Request::usage(KEY, limits(), actual.to_vec()).unwrap();
        let receipt = Receipt::for_request(&text, &usage).expect("the receipt verifies");
        let s = store
            .usage_timed(&usage, Usage::Settle(receipt), Now::Server)
            .await
            .unwrap();
        done.push(Reservation {
            ts: record.ts,
            estimate,
            counts,
            actual,
            settled_at: s.outcome.now_ms,
            settled: s.done,
        });
    }
    (done, rejected)
}

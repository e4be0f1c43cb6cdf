//! Bytes per key of one hot key, side by side (docs/design.md §1.1,
//! BENCHMARKS.md "Bytes per hot key"): the memory store, the module, the
//! scripts (slidelog's general script as `RedisStore` sends it), a
//! redis-cell key (GCRA: one timestamp whatever the traffic) and the
//! original design's script (a sorted set, one member per request), under
//! the same traffic: 10 checks per ms for 60 s on a 60 s window (exact, at
//! 10, 100 and 1,000 ms), and a check a second for 24 h on a 24 h window at
//! 1 minute, and a check a minute of 200 tokens for 30 days on a 30-day
//! window at 1 hour.
//!
//! ```sh
//! CELL=/path/to/libredis_cell.so cargo test --release -p slidelog-module \
//!   --test bytes_per_key -- --ignored --nocapture
//! ```
//!
//! redis-cell is not part of this repository: build it outside it
//! (`git clone https://github.com/brandur/redis-cell && cargo build
//! --release`) and name its `.so` in `CELL`. The module and the original
//! script take explicit times (an hour behind the server's clock); redis-cell
//! reads the server's clock, so its key is written by a thousand checks now
//! (its value is one timestamp, the same size after one check or a million).
//! The original script has no granularity: its rows at 10, 100 and 1,000 ms
//! are the exact row's sorted set, measured once.

use redis::Connection;
use slidelog_core::{Limit, Mode, Request};
use slidelog_memory::MemoryStore;
use slidelog_testkit::{RedisServer, ServerKind};
use std::time::{SystemTime, UNIX_EPOCH};

const MAX: u64 = 10_000_000;
const MINUTE: u64 = 60_000;
const DAY: u64 = 86_400_000;
const MONTH: u64 = 30 * DAY;

/// One row of traffic: the window and granularity, how long, and how often.
struct Traffic {
    window_ms: u64,
    granularity_ms: u64,
    seconds: u64,
    every_ms: u64,
    per_ms: u64,
    /// Each check's cost (tokens; the original script has none).
    cost: u64,
}

impl Traffic {
    /// The times of every check, oldest first, from `start`.
    fn times(&self, start: u64) -> impl Iterator<Item = u64> + '_ {
        (0..self.seconds * 1_000)
            .step_by(self.every_ms as usize)
            .flat_map(move |ms| std::iter::repeat_n(start + ms, self.per_ms as usize))
    }

    fn label(&self) -> String {
        match (self.window_ms, self.granularity_ms) {
            (DAY, g) => format!("24 h at {} min, a check a second", g / MINUTE),
            (MONTH, _) => "30 d at 1 h, a check a minute of 200 tokens".into(),
            (_, 1) => "60 s exact, 10 checks per ms".into(),
            (_, g) => format!("60 s at {g} ms, 10 checks per ms"),
        }
    }
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The memory store's bytes for the key (its log, key and table slot).
fn memory_store(t: &Traffic, start: u64) -> usize {
    let store = MemoryStore::new();
    let limit = Limit::new(MAX, t.window_ms).unwrap();
    let r = Request::new(
        "hot",
        vec![limit.with_granularity(t.granularity_ms).unwrap()],
        t.cost,
    )
    .unwrap();
    for now in t.times(start) {
        assert!(store.decide_at(&r, Mode::Record, now).unwrap().allowed);
    }
    store.bytes_held()
}

/// Sends `commands` pipelined, 2,000 at a time, every reply ignored.
fn pipelined(conn: &mut Connection, commands: impl Iterator<Item = redis::Cmd>) {
    let mut pipe = redis::pipe();
    let mut queued = 0;
    for cmd in commands {
        pipe.add_command(cmd).ignore();
        queued += 1;
        if queued == 2_000 {
            let () = pipe.query(conn).unwrap();
            pipe = redis::pipe();
            queued = 0;
        }
    }
    if queued > 0 {
        let () = pipe.query(conn).unwrap();
    }
}

/// `MEMORY USAGE … SAMPLES 0` of `key`, 0 when it does not exist.
fn memory_usage(conn: &mut Connection, key: impl redis::ToRedisArgs) -> i64 {
    redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(key)
        .arg("SAMPLES")
        .arg(0)
        .query::<Option<i64>>(conn)
        .unwrap()
        .unwrap_or(0)
}

/// The module's `MEMORY USAGE` of the key, and its records.
fn module(conn: &mut Connection, key: &str, t: &Traffic, start: u64) -> (i64, i64) {
    let limit = format!("{}@{}", t.window_ms, t.granularity_ms);
    pipelined(
        conn,
        t.times(start).map(|now| {
            let mut c = redis::cmd("SLIDELOG.CHECK");
            c.arg(key).arg("RECORD").arg(now).arg(0).arg(1).arg(MAX);
            c.arg(&limit).arg(t.cost);
            c
        }),
    );
    let info: std::collections::HashMap<String, i64> =
        redis::cmd("SLIDELOG.INFO").arg(key).query(conn).unwrap();
    assert_eq!(
        info["units"],
        (t.times(start).count() as u64 * t.cost) as i64,
        "all admitted"
    );
    (memory_usage(conn, key), info["records"])
}

/// The scripts' log and weights hash (the general script at explicit
/// times, a 26-character member per check, as the store sends them): their
/// `MEMORY USAGE` together and the log's members.
fn scripts(conn: &mut Connection, key: &str, t: &Traffic, start: u64) -> (i64, i64) {
    let limit = Limit::new(MAX, t.window_ms).unwrap();
    let limit = limit.with_granularity(t.granularity_ms).unwrap();
    let request = Request::new(key, vec![limit], t.cost).unwrap();
    let args = slidelog_redis::script::limit_args(&request);
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(slidelog_redis::script::SOURCE)
        .query(conn)
        .unwrap();
    let weights = slidelog_redis::keys::weights_key(key.as_bytes());
    pipelined(
        conn,
        t.times(start).enumerate().map(|(i, now)| {
            let mut c = redis::cmd("EVALSHA");
            c.arg(&sha).arg(2).arg(key).arg(&weights).arg(1).arg(now);
            c.arg(&args).arg(format!("{i:026}")).arg(-1);
            c
        }),
    );
    let bytes = memory_usage(conn, key) + memory_usage(conn, &weights);
    let members: i64 = redis::cmd("ZCARD").arg(key).query(conn).unwrap();
    (bytes, members)
}

/// The original script's sorted set (a 26-character member per request,
/// as slidelog's ULIDs): its `MEMORY USAGE` and members.
fn original(conn: &mut Connection, key: &str, t: &Traffic, start: u64) -> (i64, i64) {
    let script = include_str!("../../slidelog-redis/tests/original_sliding_window.lua");
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(script)
        .query(conn)
        .unwrap();
    let window_s = t.window_ms / 1_000;
    pipelined(
        conn,
        t.times(start).enumerate().map(|(i, now)| {
            let mut c = redis::cmd("EVALSHA");
            c.arg(&sha).arg(1).arg(key).arg(now).arg(window_s).arg(MAX);
            c.arg(format!("01J{i:023}"));
            c
        }),
    );
    let members: i64 = redis::cmd("ZCARD").arg(key).query(conn).unwrap();
    assert_eq!(members, t.times(start).count() as i64, "all admitted");
    (memory_usage(conn, key), members)
}

/// A redis-cell key limiting to `MAX` per window: its `MEMORY USAGE` after
/// a thousand checks on the server's clock.
fn cell(conn: &mut Connection, key: &str, window_ms: u64) -> i64 {
    pipelined(
        conn,
        (0..1_000).map(|_| {
            let mut c = redis::cmd("CL.THROTTLE");
            c.arg(key)
                .arg(MAX - 1)
                .arg(MAX)
                .arg(window_ms / 1_000)
                .arg(1);
            c
        }),
    );
    memory_usage(conn, key)
}

fn ratio(a: i64, b: i64) -> String {
    format!("{:.2}", a as f64 / b as f64)
}

#[test]
#[ignore = "a measurement: CELL=<libredis_cell.so> cargo test --release -p slidelog-module --test bytes_per_key -- --ignored --nocapture"]
fn bytes_per_hot_key_beside_redis_cell_and_the_original_script() {
    let cell_so = std::env::var("CELL").expect(
        "CELL must name redis-cell's libredis_cell.so (git clone \
         https://github.com/brandur/redis-cell; cargo build --release)",
    );
    let server = RedisServer::start_with_module(ServerKind::Redis, &["--loadmodule", &cell_so]);
    let mut conn = server.client();
    let rows: Vec<Traffic> = [1, 10, 100, 1_000]
        .map(|g| Traffic {
            window_ms: MINUTE,
            granularity_ms: g,
            seconds: 60,
            every_ms: 1,
            per_ms: 10,
            cost: 1,
        })
        .into_iter()
        .chain([Traffic {
            window_ms: DAY,
            granularity_ms: MINUTE,
            seconds: 86_400,
            every_ms: 1_000,
            per_ms: 1,
            cost: 1,
        }])
        .chain([Traffic {
            window_ms: MONTH,
            granularity_ms: 3_600_000,
            seconds: 30 * 86_400,
            every_ms: MINUTE,
            per_ms: 1,
            cost: 200,
        }])
        .collect();
    println!(
        "| traffic, one hot key | memory store | module (records) | scripts (members) | redis-cell | original script (members) | module / redis-cell | original / module |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut exact_original = None;
    for (i, t) in rows.iter().enumerate() {
        // A minute boundary an hour (plus the window) behind the clock.
        let start = wall_ms() / MINUTE * MINUTE - 3_600_000 - t.window_ms;
        let store = memory_store(t, start);
        let (module_b, records) = module(&mut conn, &format!("module:{i}"), t, start);
        let (script_b, script_m) = scripts(&mut conn, &format!("scripts:{i}"), t, start);
        let cell_b = cell(&mut conn, &format!("cell:{i}"), t.window_ms);
        // The original keeps one member per request whatever the
        // granularity: the exact row's set stands for the minute's rows.
        let (orig_b, members) = match (t.window_ms, exact_original) {
            (MINUTE, Some(m)) => m,
            _ => original(&mut conn, &format!("original:{i}"), t, start),
        };
        if t.window_ms == MINUTE {
            exact_original = Some((orig_b, members));
        }
        println!(
            "| {} | {store} B | {module_b} B ({records}) | {script_b} B ({script_m}) | {cell_b} B | {orig_b} B ({members}) | {} | {} |",
            t.label(),
            ratio(module_b, cell_b),
            ratio(orig_b, module_b),
        );
    }
}

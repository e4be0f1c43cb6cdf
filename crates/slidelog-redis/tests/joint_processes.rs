//! Joint decisions across OS processes (docs/design.md §4.7): 3 processes
//! (this test binary run again as children) x 16 concurrent tasks send
//! joint checks of one route key (max 30 per minute) and one of 5 user keys
//! (max 20 per minute each), through the scripts and through the module, on
//! Redis and on Valkey. The route admits exactly its max; each user's log
//! holds exactly the requests admitted for that user: no over-admission,
//! and no refused request recorded in any key. A `harness = false` target
//! (see processes.rs).

mod common;

use slidelog_core::{Checks, Limit, Mode, Now, Request, Store};
use slidelog_redis::RedisStore;
use slidelog_testkit::{RedisServer, ServerKind, unique_prefix};
use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Arc;

const PROCESSES: usize = 3;
const TASKS: usize = 16;
/// Attempts per task: 3 x 16 x 12 = 576 joint checks for 30 admissions.
const ATTEMPTS: usize = 12;
const USERS: usize = 5;
const ROUTE_MAX: u64 = 30;
const USER_MAX: u64 = 20;

fn main() -> ExitCode {
    common::children::main(
        child_process,
        &[
            ("route_and_users_exact_through_the_scripts", scripts),
            ("route_and_users_exact_through_the_module", module),
        ],
    )
}

fn scripts(kind: ServerKind) {
    exact(RedisServer::start_kind(kind), "script");
}

fn module(kind: ServerKind) {
    exact(RedisServer::start_with_module(kind, &[]), "module");
}

fn exact(server: RedisServer, engine: &str) {
    let prefix = unique_prefix("joint-procs");
    let env = [("SLIDELOG_CHILD_ENGINE", engine.to_owned())];
    let mut admitted: HashMap<String, u64> = HashMap::new();
    for stdout in common::children::run_children(&server, &prefix, PROCESSES, &env) {
        for user in stdout.lines().filter_map(|l| l.strip_prefix("ADMIT ")) {
            *admitted.entry(user.trim().to_owned()).or_default() += 1;
        }
    }
    let total: u64 = admitted.values().sum();
    assert_eq!(total, ROUTE_MAX, "admitted across processes: {admitted:?}");
    let mut c = server.client();
    assert_eq!(units(&mut c, engine, &format!("{prefix}route")), ROUTE_MAX);
    for u in 0..USERS {
        let user = format!("user{u}");
        let mine = admitted.get(&user).copied().unwrap_or(0);
        assert!(mine <= USER_MAX, "{user}: {mine}");
        let held = units(&mut c, engine, &format!("{prefix}{user}"));
        assert_eq!(held, mine, "{user}'s log holds exactly its admissions");
    }
}

/// The units a log holds: its members on the scripts (cost 1 each), the
/// module's `units` (records of one ms are one record there).
fn units(c: &mut redis::Connection, engine: &str, key: &str) -> u64 {
    if engine == "script" {
        return redis::cmd("ZCARD").arg(key).query(c).unwrap();
    }
    let info: Vec<redis::Value> = redis::cmd("SLIDELOG.INFO").arg(key).query(c).unwrap();
    let pairs: HashMap<String, i64> = info
        .chunks_exact(2)
        .map(|p| {
            let name: String = redis::from_redis_value(p[0].clone()).unwrap();
            (name, redis::from_redis_value(p[1].clone()).unwrap())
        })
        .collect();
    pairs["units"] as u64
}

/// The child: TASKS tasks, each ATTEMPTS joint checks over the users in
/// turn; prints the user of each admission.
fn child_process(url: String) {
    let engine = std::env::var("SLIDELOG_CHILD_ENGINE").unwrap();
    common::children::block_on(|prefix, options| async move {
        let url = format!("{url}?engine={engine}");
        let store = Arc::new(RedisStore::connect(&url, options).await.unwrap());
        let mut conn = store.connection();
        common::children::ready_then_wait(&mut conn, &prefix).await;
        let tasks: Vec<_> = (0..TASKS)
            .map(|t| {
                let store = store.clone();
                tokio::spawn(async move {
                    let mut admitted = Vec::new();
                    for i in 0..ATTEMPTS {
                        let user = format!("user{}", (t + i) % USERS);
                        let checks = Checks::new([
                            Request::single(&user, Limit::new(USER_MAX, 60_000).unwrap()).unwrap(),
                            Request::single("route", Limit::new(ROUTE_MAX, 60_000).unwrap())
                                .unwrap(),
                        ])
                        .unwrap();
                        let joint = store.decide_all(&checks, Mode::Record, Now::Server).await;
                        if joint.unwrap().allowed {
                            admitted.push(user);
                        }
                    }
                    admitted
                })
            })
            .collect();
        for task in tasks {
            for user in task.await.unwrap() {
                println!("ADMIT {user}");
            }
        }
    });
    println!("CHILD DONE");
}

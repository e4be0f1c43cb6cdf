//! Both sides of the multi-process tests (the test binary run again as
//! children, `harness = false`): the parent starts the children and releases
//! them together once every one is connected; a child says it is ready and
//! waits for the release.

use slidelog_redis::RedisOptions;
use slidelog_testkit::runner::{self, Case};
use slidelog_testkit::{RedisServer, ServerKind};
use std::future::Future;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// A case's name (without the server kind) and its body.
pub type NamedCase = (&'static str, fn(ServerKind));

/// The `main` of a multi-process test binary: the child when
/// `SLIDELOG_CHILD_URL` is set, else every case on Redis and on Valkey
/// (named `<name>_<kind>`), so a child is never a test that passes by
/// returning early.
pub fn main(child: fn(String), cases: &[NamedCase]) -> ExitCode {
    if let Ok(url) = std::env::var("SLIDELOG_CHILD_URL") {
        child(url);
        return ExitCode::SUCCESS;
    }
    let mut all = Vec::new();
    for kind in ServerKind::ALL {
        for &(name, case) in cases {
            all.push(Case::new(format!("{name}_{kind}"), move || case(kind)));
        }
    }
    runner::run(all)
}

/// Starts `processes` children of this test binary with
/// `SLIDELOG_CHILD_URL` (the server's URL), `SLIDELOG_CHILD_PREFIX` and
/// `env`, waits until every one is ready, releases them at once, and returns
/// each one's stdout (each exited successfully and printed `CHILD DONE`).
pub fn run_children(
    server: &RedisServer,
    prefix: &str,
    processes: usize,
    env: &[(&str, String)],
) -> Vec<String> {
    let mut c = server.client();
    let (ready, go) = (format!("{prefix}ready"), format!("{prefix}go"));
    let children: Vec<_> = (0..processes)
        .map(|_| {
            Command::new(std::env::current_exe().unwrap())
                .env("SLIDELOG_CHILD_URL", server.url())
                .env("SLIDELOG_CHILD_PREFIX", prefix)
                .envs(env.iter().map(|(k, v)| (k, v)))
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("spawn child")
        })
        .collect();
    // Wait until every child is connected, then release them at once.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let n: Option<usize> = redis::cmd("GET").arg(&ready).query(&mut c).unwrap();
        if n == Some(processes) {
            break;
        }
        assert!(Instant::now() < deadline, "children not ready: {n:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let _: () = redis::cmd("RPUSH")
        .arg(&go)
        .arg(vec!["go"; processes])
        .query(&mut c)
        .unwrap();
    children
        .into_iter()
        .map(|child| {
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "child failed: {out:?}");
            let stdout = String::from_utf8(out.stdout).unwrap();
            assert!(stdout.contains("CHILD DONE"), "{stdout}");
            stdout
        })
        .collect()
}

/// The child's side: counts itself ready, then waits (up to 30 s) for the
/// parent's release.
pub async fn ready_then_wait(conn: &mut impl redis::aio::ConnectionLike, prefix: &str) {
    let _: i64 = redis::cmd("INCR")
        .arg(format!("{prefix}ready"))
        .query_async(conn)
        .await
        .unwrap();
    let _: Option<(String, String)> = redis::cmd("BLPOP")
        .arg(format!("{prefix}go"))
        .arg(30)
        .query_async(conn)
        .await
        .unwrap();
}

/// The child's runtime (2 worker threads) running `body(prefix, options)`:
/// the parent's `SLIDELOG_CHILD_PREFIX`, and store options with that prefix
/// and the [`super::PATIENT`] timeout.
pub fn block_on<F: Future<Output = ()>>(body: impl FnOnce(String, RedisOptions) -> F) {
    let prefix = std::env::var("SLIDELOG_CHILD_PREFIX").unwrap();
    let options = RedisOptions::default()
        .with_prefix(prefix.clone())
        .with_timeout(super::PATIENT);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(body(prefix, options));
}

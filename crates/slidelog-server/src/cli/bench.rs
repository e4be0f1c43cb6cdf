//! `slidelog bench`: load against any store URL. `--concurrency` tasks send
//! `--requests` checks in all over `--keys` keys, under one limit (`--max` per
//! `--window`), with a progress bar; then it reports throughput, latency
//! percentiles and how many admissions went beyond the limit (per key and
//! window, from the send and answer times: 0 for an exact store).
//! `--unsafe-pipelined` runs the original's non-atomic variant on a Redis
//! URL instead, to show its overshoot.

mod overshoot;

use super::{StoreArgs, parse_duration};
use indicatif::{ProgressBar, ProgressStyle};
use overshoot::{Admission, key_overshoot};
use slidelog::redact::mask_password;
use slidelog::store::Store;
use slidelog::url::{StoreUrl, open_store};
use slidelog::{Limit, Request};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Arguments of `slidelog bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Number of distinct keys the requests go to (round robin).
    #[arg(long, default_value_t = 1_000)]
    pub keys: u64,
    /// Requests in flight at once (tasks).
    #[arg(long, default_value_t = 64)]
    pub concurrency: usize,
    /// Requests in all.
    #[arg(long, default_value_t = 100_000)]
    pub requests: u64,
    /// Units admitted per window and key (1 to 10000000).
    #[arg(long, default_value_t = 100)]
    pub max: u64,
    /// Window length, e.g. 60s, 500ms.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub window: Duration,
    /// Units each request consumes.
    #[arg(long, default_value_t = 1)]
    pub cost: u64,
    /// Run the UNSAFE non-atomic pipelined variant (Redis URLs only), to show
    /// that it admits more than max under concurrency.
    #[arg(long)]
    pub unsafe_pipelined: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// What a run measured.
#[derive(Debug, serde::Serialize)]
pub struct Report {
    /// The store URL, password masked.
    pub store: String,
    /// The store's kind ("memory", "redis", "redis-unsafe-pipelined", …).
    pub kind: String,
    /// Requests sent.
    pub requests: u64,
    /// Keys used.
    pub keys: u64,
    /// Tasks.
    pub concurrency: usize,
    /// The limit's max.
    pub max: u64,
    /// The limit's window in ms.
    pub window_ms: u64,
    /// Units per request.
    pub cost: u64,
    /// Wall time of the run in seconds.
    pub elapsed_s: f64,
    /// Decisions per second.
    pub throughput_per_s: f64,
    /// Latency percentiles in µs.
    pub latency_us: Latency,
    /// Requests admitted.
    pub admitted: u64,
    /// Requests rejected.
    pub rejected: u64,
    /// Requests that failed (store errors or timeouts).
    pub errors: u64,
    /// Units admitted beyond max within one window, summed over keys (0 for
    /// an exact store).
    pub over_limit: u64,
}

/// Latency percentiles in µs.
#[derive(Debug, Default, serde::Serialize)]
pub struct Latency {
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Slowest.
    pub max: u64,
}

/// What one task saw.
#[derive(Default)]
struct TaskLog {
    latencies_us: Vec<u64>,
    admissions: Vec<(u64, Admission)>,
    rejected: u64,
    errors: u64,
    first_error: Option<String>,
}

/// Runs the load and prints the report.
pub async fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(args.keys >= 1, "--keys must be at least 1, got 0");
    anyhow::ensure!(
        args.concurrency >= 1,
        "--concurrency must be at least 1, got 0"
    );
    anyhow::ensure!(args.requests >= 1, "--requests must be at least 1, got 0");
    let limit = Limit::per(args.max, args.window)?;
    // Validates cost against max once, before any load.
    Request::new("bench", vec![limit], args.cost)?;
    let store = open(&args).await?;
    let report = load(&args, store, limit).await?;
    if args.json {
        super::out::line(&serde_json::to_string_pretty(&report)?)?;
    } else {
        print_report(&report)?;
    }
    Ok(ExitCode::SUCCESS)
}

async fn open(args: &BenchArgs) -> anyhow::Result<Arc<dyn Store>> {
    let options = args.store.options();
    if !args.unsafe_pipelined {
        return Ok(open_store(&args.store.store, &options, args.store.store_timeout).await?);
    }
    let url = &args.store.store;
    anyhow::ensure!(
        matches!(StoreUrl::parse(url), Ok(StoreUrl::Redis { .. })),
        "--unsafe-pipelined needs a redis:// or rediss:// store, got {}",
        mask_password(url)
    );
    let redis_options = slidelog::redis::redis_options(&options, args.store.store_timeout);
    let script = slidelog::redis::RedisStore::connect(url, redis_options.clone()).await?;
    Ok(Arc::new(
        slidelog::redis::UnsafePipelinedStore::with_connection(script.connection(), &redis_options),
    ))
}

/// Runs the load: `concurrency` tasks share one counter of requests and
/// each logs what it saw; the logs are then summed up into the report.
async fn load(args: &BenchArgs, store: Arc<dyn Store>, limit: Limit) -> anyhow::Result<Report> {
    let requests = Arc::new(bench_requests(args, limit)?);
    let progress = ProgressBar::new(args.requests);
    progress.set_style(ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} ({per_sec}, eta {eta})",
    )?);
    let next = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = (0..args.concurrency)
        .map(|_| {
            let worker = Worker {
                store: store.clone(),
                requests: requests.clone(),
                next: next.clone(),
                progress: progress.clone(),
                total: args.requests,
                start,
                time: args.store.time_mode(),
            };
            tokio::spawn(worker.run())
        })
        .collect();
    let mut logs = Vec::with_capacity(tasks.len());
    for task in tasks {
        logs.push(task.await?);
    }
    let elapsed = start.elapsed();
    progress.finish_and_clear();
    Ok(summarize(args, store.kind(), limit, &logs, elapsed))
}

/// One request per key, on keys unique to this run (runs never share logs).
fn bench_requests(args: &BenchArgs, limit: Limit) -> anyhow::Result<Vec<Request>> {
    let run_id = format!("{:x}", std::process::id() as u64 ^ now_ms());
    Ok((0..args.keys)
        .map(|k| Request::new(format!("bench:{run_id}:{k}"), vec![limit], args.cost))
        .collect::<Result<_, _>>()?)
}

/// One load task: takes the next request number until `total`, decides it
/// on the store (directly: the bench measures the store, not a policy) and
/// logs its latency and outcome.
struct Worker {
    store: Arc<dyn Store>,
    requests: Arc<Vec<Request>>,
    next: Arc<AtomicU64>,
    progress: ProgressBar,
    total: u64,
    start: Instant,
    /// `--client-time`: the time each check is sent at.
    time: slidelog::TimeMode,
}

impl Worker {
    async fn run(self) -> TaskLog {
        let mut log = TaskLog::default();
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.total {
                return log;
            }
            let key = i % self.requests.len() as u64;
            let request = &self.requests[key as usize];
            let sent = self.start.elapsed();
            let now = self.time.now();
            let result = self
                .store
                .decide(request, slidelog::Mode::Record, now)
                .await;
            let answered = self.start.elapsed();
            log.latencies_us.push((answered - sent).as_micros() as u64);
            match result {
                Ok(d) if d.allowed => log.admissions.push((
                    key,
                    Admission {
                        sent_us: sent.as_micros() as u64,
                        answered_us: answered.as_micros() as u64,
                        cost: request.cost(),
                    },
                )),
                Ok(_) => log.rejected += 1,
                Err(e) => {
                    log.errors += 1;
                    log.first_error.get_or_insert_with(|| e.to_string());
                }
            }
            if i.is_multiple_of(64) {
                self.progress.inc(64.min(self.total - i));
            }
        }
    }
}

/// The report from every task's log: latency percentiles, counts, and the
/// admissions beyond the limit per key.
fn summarize(
    args: &BenchArgs,
    kind: &str,
    limit: Limit,
    logs: &[TaskLog],
    elapsed: std::time::Duration,
) -> Report {
    let mut latencies: Vec<u64> = logs
        .iter()
        .flat_map(|l| l.latencies_us.iter().copied())
        .collect();
    latencies.sort_unstable();
    let mut per_key: Vec<Vec<Admission>> = vec![Vec::new(); args.keys as usize];
    for (key, a) in logs.iter().flat_map(|l| l.admissions.iter()) {
        per_key[*key as usize].push(*a);
    }
    let over_limit = per_key
        .iter_mut()
        .map(|a| key_overshoot(a, limit.max(), limit.window_ms()))
        .sum();
    if let Some(e) = logs.iter().find_map(|l| l.first_error.as_ref()) {
        eprintln!("warning: some requests failed; the first error: {e}");
    }
    Report {
        store: mask_password(&args.store.store),
        kind: kind.to_owned(),
        requests: args.requests,
        keys: args.keys,
        concurrency: args.concurrency,
        max: limit.max(),
        window_ms: limit.window_ms(),
        cost: args.cost,
        elapsed_s: elapsed.as_secs_f64(),
        throughput_per_s: args.requests as f64 / elapsed.as_secs_f64(),
        latency_us: Latency {
            p50: percentile(&latencies, 0.50),
            p90: percentile(&latencies, 0.90),
            p99: percentile(&latencies, 0.99),
            max: latencies.last().copied().unwrap_or(0),
        },
        admitted: logs.iter().map(|l| l.admissions.len() as u64).sum(),
        rejected: logs.iter().map(|l| l.rejected).sum(),
        errors: logs.iter().map(|l| l.errors).sum(),
        over_limit,
    }
}

fn percentile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn print_report(r: &Report) -> std::io::Result<()> {
    let ms = |us: u64| us as f64 / 1000.0;
    let mut text = String::new();
    use std::fmt::Write as _;
    let _ = writeln!(
        text,
        "store {} ({}): {} requests over {} keys, {} concurrent, limit {} per {} ms, cost {}",
        r.store, r.kind, r.requests, r.keys, r.concurrency, r.max, r.window_ms, r.cost
    );
    let _ = writeln!(
        text,
        "throughput: {:.0} decisions/s ({:.3} s)",
        r.throughput_per_s, r.elapsed_s
    );
    let _ = writeln!(
        text,
        "latency: p50 {:.3} ms, p90 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        ms(r.latency_us.p50),
        ms(r.latency_us.p90),
        ms(r.latency_us.p99),
        ms(r.latency_us.max)
    );
    let _ = writeln!(
        text,
        "admitted {}, rejected {}, errors {}",
        r.admitted, r.rejected, r.errors
    );
    let _ = writeln!(
        text,
        "over the limit: {} (units beyond max certainly within one window, summed over keys; 0 for an exact store)",
        r.over_limit
    );
    super::out::print(&text)
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 0.5), 50);
        assert_eq!(percentile(&v, 0.99), 99);
        assert_eq!(percentile(&[7], 0.9), 7);
        assert_eq!(percentile(&[], 0.9), 0);
    }
}

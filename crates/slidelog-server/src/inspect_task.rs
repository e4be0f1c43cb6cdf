//! `slidelog serve --inspect-every 60s`: scan the Redis key space on a
//! schedule and export the `slidelog_inspect_*` gauges on the service's own
//! `/metrics` (the figures docs/design.md §7 asks for: key count, ZCARD distribution,
//! max ZCARD, memory per key, problems by kind). Scans run one after another,
//! never overlapping; a failed scan is counted and logged, the previous
//! gauges stay, and the next tick tries again.

use crate::app::App;
use crate::shutdown::Shutdown;
use slidelog_inspect::{InspectError, InspectOptions, Report};
use std::time::Duration;
use tokio::task::JoinHandle;

/// The shortest interval accepted: a scan is not free for Redis.
pub const MIN_EVERY: Duration = Duration::from_secs(1);

/// What to scan and how often.
#[derive(Debug, Clone)]
pub struct InspectSchedule {
    /// The store URL (`redis://`, `rediss://`, `redis+cluster://`).
    pub store_url: String,
    /// The scan options (pattern, max, thresholds).
    pub options: InspectOptions,
    /// Time between the end of one scan and the start of the next.
    pub every: Duration,
}

impl InspectSchedule {
    /// Checks the interval, the URL and the options before the service starts.
    pub fn validate(&self) -> Result<(), String> {
        if self.every < MIN_EVERY {
            return Err(format!(
                "--inspect-every must be at least 1s, got {:?}",
                self.every
            ));
        }
        slidelog_inspect::target::parse_target(&self.store_url)
            .map_err(|e| format!("--inspect-every needs a Redis store: {e}"))?;
        self.options.validate().map_err(|e| e.to_string())
    }
}

/// Scans once and records the gauges (or the failure) in `app`'s metrics.
pub async fn run_once(app: &App, schedule: &InspectSchedule) -> Result<Report, InspectError> {
    let result = slidelog_inspect::inspect(&schedule.store_url, &schedule.options, None).await;
    app.metrics().with_recorder(|| match &result {
        Ok(report) => slidelog_inspect::export::record(report),
        Err(_) => slidelog_inspect::export::record_failure(),
    });
    result
}

/// Starts the schedule: a first scan at once, then one `every` after each.
pub fn spawn(app: App, schedule: InspectSchedule, shutdown: Shutdown) -> JoinHandle<()> {
    app.metrics()
        .with_recorder(slidelog_inspect::export::describe);
    tokio::spawn(async move {
        let stop = shutdown.wait();
        tokio::pin!(stop);
        loop {
            tokio::select! {
                _ = &mut stop => return,
                result = run_once(&app, &schedule) => match result {
                    Ok(r) => {
                        let problems: Vec<String> = r
                            .problems
                            .iter()
                            .filter(|p| p.count > 0)
                            .map(|p| format!("{}={}", p.kind.as_str(), p.count))
                            .collect();
                        tracing::info!(
                            keys = r.summary.keys,
                            records = r.summary.records,
                            memory_bytes = r.summary.memory_bytes,
                            max_zcard = r.summary.max_zcard,
                            problems = %problems.join(","),
                            duration_ms = r.duration_ms,
                            "key space inspected"
                        );
                    }
                    Err(e) => tracing::warn!(error = %e, "key space inspection failed"),
                },
            }
            tokio::select! {
                _ = &mut stop => return,
                _ = tokio::time::sleep(schedule.every) => {}
            }
        }
    })
}

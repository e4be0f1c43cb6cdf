//! `slidelog inspect --store URL [--pattern GLOB] [--max N | --config PATH]
//! [--top N] [--json]`: scan the Redis key space of the sliding window logs,
//! print the report (or its JSON, schema in `crates/slidelog-inspect/SCHEMA.md`)
//! and exit 0 when clean, 1 when a problem was found, 2 on error.

use super::parse_duration;
use indicatif::{ProgressBar, ProgressStyle};
use slidelog_inspect::render::{bytes, group};
use slidelog_inspect::{InspectOptions, Report, ScanProgress, Thresholds};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Arguments of `slidelog inspect` (`Debug` masks the store's password).
#[derive(clap::Args)]
pub struct InspectArgs {
    /// The Redis store: redis://[user:pass@]host:port[/db], rediss://…, or
    /// redis+cluster://h:p,h:p / rediss+cluster://… (every master is scanned).
    #[arg(long, env = "SLIDELOG_STORE", hide_env_values = true)]
    pub store: String,
    /// Prefix of the limiter's keys; the default pattern is PREFIX*.
    #[arg(long, default_value = slidelog::store::DEFAULT_KEY_PREFIX)]
    pub key_prefix: String,
    /// SCAN MATCH pattern (default: the key prefix followed by *).
    #[arg(long)]
    pub pattern: Option<String>,
    /// The configured limit: keys above 2 x max are flagged (1 to 10000000).
    #[arg(long, conflicts_with = "config")]
    pub max: Option<u64>,
    /// The service's Envoy-style limits config (file or folder): keys of the
    /// Envoy API are compared with their descriptor's rule, others with the
    /// largest requests_per_unit.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Keys per top list (0 to 10000).
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Keys listed per problem (0 to 100000).
    #[arg(long, default_value_t = 20)]
    pub list: usize,
    /// SCAN COUNT hint: keys Redis looks at per SCAN call (1 to 100000).
    #[arg(long, default_value_t = 1000)]
    pub count: u32,
    /// A set is flagged as too large for fast decisions above this ZCARD.
    #[arg(long, default_value_t = 100_000)]
    pub huge: u64,
    /// Scores more than this ahead of the Redis clock are flagged (clock skew).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub future_tolerance: Duration,
    /// Bound on connecting and on each Redis reply.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Print the report as JSON (stable schema, schema_version 1).
    #[arg(long)]
    pub json: bool,
}

impl std::fmt::Debug for InspectArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InspectArgs")
            .field("store", &slidelog::redact::mask_password(&self.store))
            .field("key_prefix", &self.key_prefix)
            .field("pattern", &self.pattern)
            .finish_non_exhaustive()
    }
}

/// Runs the scan: exit 0 clean, 1 problems found, 2 error.
pub async fn run(args: InspectArgs) -> anyhow::Result<ExitCode> {
    let options = options(&args)?;
    let report = scan_showing_progress(&args, &options).await?;
    if args.json {
        super::out::line(&serde_json::to_string_pretty(&report)?)?;
    } else {
        super::out::print(&slidelog_inspect::render::human(&report))?;
    }
    Ok(ExitCode::from(if report.has_problems() { 1 } else { 0 }))
}

/// Gathers the scan options of the flags, checked.
fn options(args: &InspectArgs) -> anyhow::Result<InspectOptions> {
    let (max, max_source, key_limits) = match (&args.max, &args.config) {
        (Some(max), _) => (Some(*max), Some("--max".to_owned()), None),
        (None, Some(path)) => {
            let limits = crate::inspect_limits::from_config(path, &args.key_prefix)?;
            (
                Some(limits.max),
                Some(format!("config:{}", path.display())),
                Some(limits.key_limits),
            )
        }
        (None, None) => (None, None, None),
    };
    let options = InspectOptions {
        pattern: args
            .pattern
            .clone()
            .unwrap_or_else(|| slidelog_inspect::prefix_pattern(&args.key_prefix)),
        count: args.count,
        top: args.top,
        list: args.list,
        max,
        max_source,
        key_limits,
        thresholds: Thresholds {
            huge_zcard: args.huge,
            future_tolerance_ms: args.future_tolerance.as_millis() as u64,
            ..Thresholds::default()
        },
        timeout: args.timeout,
        ..InspectOptions::default()
    };
    options.validate()?;
    Ok(options)
}

/// Scans the store, drawing the progress bar meanwhile.
async fn scan_showing_progress(
    args: &InspectArgs,
    options: &InspectOptions,
) -> Result<Report, slidelog_inspect::InspectError> {
    let progress = Arc::new(ScanProgress::new());
    let bar = progress_bar(args.json);
    let ticker = {
        let (bar, progress) = (bar.clone(), progress.clone());
        tokio::spawn(async move {
            loop {
                bar.set_position((progress.fraction() * 1000.0) as u64);
                bar.set_message(format!(
                    "{} keys, {} records, {}",
                    group(progress.keys()),
                    group(progress.records()),
                    bytes(progress.memory_bytes() as f64)
                ));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let result = slidelog_inspect::inspect(&args.store, options, Some(&progress)).await;
    ticker.abort();
    bar.finish_and_clear();
    result
}

/// Draws a bar on stderr, per mille of the key space visited; hidden for
/// --json and when stderr is not a terminal (pipes, CI logs).
fn progress_bar(json: bool) -> ProgressBar {
    if json || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let style = ProgressStyle::with_template("{spinner} [{bar:20}] {percent:>3}% {elapsed} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    ProgressBar::new(1000).with_style(style)
}

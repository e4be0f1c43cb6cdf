//! `slidelog check KEY --max N --window 60s [--cost N] [--store URL] [--json]`:
//! one decision, for scripts and for a look by hand.

use super::{StoreArgs, parse_duration};
use slidelog::{Limit, Request, open_store};
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `slidelog check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The identity to decide on (1 to 512 bytes).
    pub key: String,
    /// Units admitted per window (1 to 10000000).
    #[arg(long)]
    pub max: u64,
    /// Window length, e.g. 60s, 1m, 500ms (1 ms to 366 days).
    #[arg(long, value_parser = parse_duration)]
    pub window: Duration,
    /// Units this request consumes (1 to max).
    #[arg(long, default_value_t = 1)]
    pub cost: u64,
    /// Decide without recording (a peek).
    #[arg(long)]
    pub peek: bool,
    /// Print the decision as JSON (docs/design.md §2 fields).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// Runs one decision: exit 0 admitted, 1 rejected, 2 error.
pub async fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let limit = Limit::per(args.max, args.window)?;
    let request = Request::new(args.key, vec![limit], args.cost)?;
    let store = open_store(&args.store.store, &args.store.options()).await?;
    let decision = if args.peek {
        store.peek(&request).await?
    } else {
        store.check(&request).await?
    };
    if args.json {
        println!("{}", serde_json::to_string(&decision)?);
    } else if decision.allowed {
        println!(
            "allowed: {}/{} used in {} window, {} remaining, empty in {}",
            decision.count,
            decision.limit,
            human_ms(decision.window_ms),
            decision.remaining,
            human_ms(decision.reset_after_ms),
        );
    } else {
        println!(
            "rejected: {}/{} used in {} window, retry after {}",
            decision.count,
            decision.limit,
            human_ms(decision.window_ms),
            human_ms(decision.retry_after_ms),
        );
    }
    Ok(ExitCode::from(if decision.allowed { 0 } else { 1 }))
}

fn human_ms(ms: u64) -> humantime::FormattedDuration {
    humantime::format_duration(Duration::from_millis(ms))
}

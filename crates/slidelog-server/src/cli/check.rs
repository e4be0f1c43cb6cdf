//! `slidelog check KEY --max N --window 60s [--cost N] [--store URL] [--json]`:
//! one decision, for scripts and for a look by hand.

use super::{StoreArgs, parse_duration};
use slidelog::{Limit, Request, open_store};
use std::process::ExitCode;
use std::time::Duration;

/// `slidelog check --help`: why it wants a store.
pub const LONG_ABOUT: &str = "\
Make one decision and exit 0 admitted, 1 rejected, 2 error.

A decision counts what the store remembers, so `check` needs a store that \
outlives the command: give --store redis://... (or SLIDELOG_STORE). Without \
one it refuses (exit 2) rather than use the in-memory store, which lives only \
as long as this process: every run would start empty, so `check KEY --max 1` \
would admit every time. `--store memory://` runs anyway (to try the flags and \
see a decision), and says on stderr that its log starts empty.";

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

/// Runs one decision: exit 0 admitted, 1 rejected, 2 error. `store_given`:
/// --store or SLIDELOG_STORE was set (the default in-memory store is refused).
pub async fn run(args: CheckArgs, store_given: bool) -> anyhow::Result<ExitCode> {
    let limit = Limit::per(args.max, args.window)?;
    let request = Request::new(args.key, vec![limit], args.cost)?;
    if args.store.store.starts_with("memory://") {
        if !store_given {
            anyhow::bail!(
                "check needs a shared store: give --store redis://HOST:PORT (or SLIDELOG_STORE). \
                 The in-memory store would start empty on every run and admit every time; \
                 `--store memory://` runs on it anyway"
            );
        }
        eprintln!(
            "note: memory:// lives only as long as this command: its log starts empty on every run, \
             so this decision counts this request alone"
        );
    }
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

//! `slidelog check KEY --max N --window 60s [--cost N] [--store URL] [--json]`
//! (or `--limit 3000/minute --limit 1000000/minute --cost 1 --cost 4000`):
//! one decision, for scripts and for a look by hand.

use super::{StoreArgs, parse_duration};
use slidelog::{Limit, Limiter, Mode, Request};
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
    /// Units admitted per window (1 to 10000000); with --window.
    // Negative numbers are read as values, so `--max -1` is refused as a
    // bad max, not as an unknown flag.
    #[arg(long, requires = "window", allow_negative_numbers = true)]
    pub max: Option<u64>,
    /// Window length, e.g. 60s, 1m, 500ms (1 ms to 366 days); with --max.
    #[arg(long, value_parser = parse_duration, requires = "max")]
    pub window: Option<Duration>,
    /// A limit as <max>/<window> (100/minute, 10/1s, 1000000/60s); repeat it
    /// for several limits on the key, all of which must admit (after --max
    /// and --window when both are given).
    #[arg(long = "limit", value_name = "MAX/WINDOW")]
    pub limits: Vec<Limit>,
    /// Units this request consumes (1 to max). Once: against every limit;
    /// once per limit, in order: each limit counts its own unit (1 request
    /// and 4000 tokens: --cost 1 --cost 4000).
    #[arg(long = "cost", default_values_t = [1u64])]
    pub costs: Vec<u64>,
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
    let mut limits = Vec::with_capacity(args.limits.len() + 1);
    if let (Some(max), Some(window)) = (args.max, args.window) {
        limits.push(Limit::per(max, window)?);
    }
    limits.extend(args.limits.iter().copied());
    if limits.is_empty() {
        anyhow::bail!("give a limit: --max N --window D, or --limit MAX/WINDOW (e.g. 100/minute)");
    }
    let request = match args.costs.as_slice() {
        [cost] => Request::new(args.key, limits, *cost)?,
        costs => Request::with_costs(args.key, limits, costs.to_vec())?,
    };
    // A URL that does not parse is reported when the store is opened.
    if slidelog::url::StoreUrl::parse(&args.store.store).is_ok_and(|u| u.is_memory()) {
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
    // Through the library's Limiter, as every transport; fail-closed: a
    // store failure is an error (exit 2), never a silent admission.
    let limiter = Limiter::builder()
        .timeout(args.store.store_timeout)
        .time_mode(args.store.time_mode())
        .fail_closed()
        .open(&args.store.store, args.store.options())
        .await?;
    let mode = if args.peek { Mode::Peek } else { Mode::Record };
    let decision = limiter.decide(&request, mode).await?;
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

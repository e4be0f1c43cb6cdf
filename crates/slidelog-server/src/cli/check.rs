//! `slidelog check KEY --max N --window 60s [--cost N] [--store URL] [--json]`
//! (or `--limit 3000/minute --limit 1000000/minute --cost 1 --cost 4000`):
//! one decision, for scripts and for a look by hand. `--and KEY2 --limit …`
//! adds keys decided together, all or nothing (`joint`); `--wait 10s`
//! waits for room (`Limiter::until_ready`) instead of exiting 1 at once.

mod joint;

pub use joint::Groups;

use super::{StoreArgs, out, parse_duration};
use slidelog::{Detailed, Limit, Limiter, Mode, Request};
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
see a decision), and says on stderr that its log starts empty.

Several keys in one decision, all or nothing: `--and KEY2` starts the next \
key, and every --limit and --cost belongs to the nearest --and before it (or \
to the first KEY when none is before it); --max/--window belong to the first \
key only. Admitted only if every key admits, and then recorded in each; \
refused, and recorded in none. A key given twice is one check, its costs \
added, printed at its first place:

  slidelog check user:alice --limit 10/minute --and path:/login --limit 3/minute --store redis://…

--wait DURATION waits for room instead: the store is asked again at its \
retry time until the request is admitted (exit 0), its retry time is past \
DURATION (exit 1, at once) or, with the store down, DURATION has passed \
(exit 2). With --and, it waits until every key admits.";

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
    /// With --max/--window: a key this limit refuses stays refused for
    /// DURATION from that refusal (e.g. 10m; at most 366 days), on every
    /// instance sharing the store (docs/design.md §5.4).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "max")]
    pub block: Option<Duration>,
    /// A limit as [NAME=]<max>/<window>[@<granularity>] (100/minute, 10/1s,
    /// tokens=1000000/60s, 100000/day@1m: records count at their time
    /// rounded up to the granularity); repeat it for several limits on the
    /// key, all of which must admit (after --max and --window when both
    /// are given). Every limit is printed, by its name when it has one.
    #[arg(long = "limit", value_name = "[NAME=]MAX/WINDOW[@GRANULARITY]")]
    pub limits: Vec<Limit>,
    /// Units this request consumes (1 to max). Once: against every limit;
    /// once per limit, in order: each limit counts its own unit (1 request
    /// and 4000 tokens: --cost 1 --cost 4000).
    #[arg(long = "cost", default_values_t = [1u64])]
    pub costs: Vec<u64>,
    /// Show the decision a check would make, recording nothing: the counts
    /// printed are what they would be if this request were admitted.
    #[arg(long, conflicts_with = "wait")]
    pub peek: bool,
    /// Wait up to DURATION for room instead of exiting 1 at once (e.g. 10s):
    /// asked again at the store's retry time, then exit 0 once admitted.
    /// Exits 1 at once when the retry time is past DURATION; with the store
    /// down, exits 2 once DURATION has passed.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub wait: Option<Duration>,
    /// Print the decision as JSON: the fields of docs/design.md §2, and with
    /// several limits or a named one a `limits` array (as the HTTP API).
    #[arg(long)]
    pub json: bool,
    /// Another key decided together with KEY, all or nothing: the --limit
    /// and --cost after it (up to the next --and) are its own. Repeat for
    /// more keys (at most 64).
    #[arg(long = "and", value_name = "KEY")]
    pub and: Vec<String>,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// Runs one decision: exit 0 admitted, 1 rejected, 2 error. `store_given`:
/// --store or SLIDELOG_STORE was set (the default in-memory store is refused).
pub async fn run(args: CheckArgs, store_given: bool, groups: Groups) -> anyhow::Result<ExitCode> {
    if !args.and.is_empty() {
        let checks = joint::checks(&args, &groups)?;
        let limiter = open(&args, store_given).await?;
        return run_joint(&args, &limiter, &checks).await;
    }
    let mut limits = Vec::with_capacity(args.limits.len() + 1);
    if let (Some(max), Some(window)) = (args.max, args.window) {
        let block_ms = args.block.map_or(0, |d| d.as_millis());
        let block_ms = u64::try_from(block_ms).unwrap_or(u64::MAX);
        limits.push(Limit::per(max, window)?.with_block_ms(block_ms)?);
    }
    limits.extend(args.limits.iter().copied());
    if limits.is_empty() {
        anyhow::bail!("give a limit: --max N --window D, or --limit MAX/WINDOW (e.g. 100/minute)");
    }
    let request = match args.costs.as_slice() {
        [cost] => Request::new(args.key.as_str(), limits, *cost)?,
        costs => Request::with_costs(args.key.as_str(), limits, costs.to_vec())?,
    };
    let limiter = open(&args, store_given).await?;
    let each = match args.wait {
        Some(wait) => waited(&limiter, &request, wait).await?,
        None => {
            let mode = if args.peek { Mode::Peek } else { Mode::Record };
            limiter.decide_each(&request, mode).await?
        }
    };
    let allowed = each.decision.allowed;
    let text = if args.json {
        serde_json::to_string(
            &crate::http::answer::Answer::new(&each).with_receipt(&request, limiter.receipt_key()),
        )?
    } else {
        describe(&each, args.peek)
    };
    out::line(&text)?;
    Ok(ExitCode::from(if allowed { 0 } else { 1 }))
}

/// Decides `checks` together and prints the joint answer: every key's
/// state and which refused (JSON: the HTTP API's joint answer).
async fn run_joint(
    args: &CheckArgs,
    limiter: &Limiter,
    checks: &slidelog::Checks,
) -> anyhow::Result<ExitCode> {
    let mode = if args.peek { Mode::Peek } else { Mode::Record };
    let joint = match args.wait {
        Some(wait) => match limiter
            .until_ready_all(checks, slidelog::Wait::up_to(wait))
            .await
        {
            Ok(joint) => joint,
            // Every key's state is not kept with a refusal past the wait.
            Err(e @ slidelog::WaitError::TooLate { .. }) => {
                out::line(&format!("rejected: {e}"))?;
                return Ok(ExitCode::from(1));
            }
            Err(e) => return Err(e.into()),
        },
        None => limiter.decide_all(checks, mode).await?,
    };
    let text = if args.json {
        serde_json::to_string(&crate::http::joint::JointAnswer::new(
            &joint,
            checks,
            limiter.receipt_key(),
        ))?
    } else {
        joint::describe(&joint, checks, args.peek)
    };
    out::line(&text)?;
    Ok(ExitCode::from(if joint.allowed { 0 } else { 1 }))
}

/// Opens the limiter of `args`' store (refusing the default memory store).
async fn open(args: &CheckArgs, store_given: bool) -> anyhow::Result<Limiter> {
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
    let mut options = args.store.options();
    if args.wait.is_some() {
        // A store down at start is an outage to wait through, as later.
        options = options.lazy_connect();
    }
    // Through the library's Limiter, as every transport; fail-closed: a
    // store failure is an error (exit 2), never a silent admission.
    Ok(Limiter::builder()
        .timeout(args.store.store_timeout)
        .time_mode(args.store.time_mode())
        .fail_closed()
        .open(&args.store.store, options)
        .await?)
}

/// Waits up to `wait` for `request` to be admitted (a refusal whose retry
/// time is past `wait` is answered at once, as a refusal).
async fn waited(limiter: &Limiter, request: &Request, wait: Duration) -> anyhow::Result<Detailed> {
    let checks = slidelog::Checks::new([request.clone()])?;
    match limiter
        .until_ready_all(&checks, slidelog::Wait::up_to(wait))
        .await
    {
        Ok(mut joint) => Ok(joint.checks.swap_remove(0)),
        Err(slidelog::WaitError::TooLate { decision, .. }) => {
            Ok(Detailed::deciding_only(request, *decision))
        }
        Err(e) => Err(e.into()),
    }
}

/// The decision in words. One limit: one line, as `allowed: 1/5 used in 1m
/// window, …`. Several: that line for the deciding limit, then one line per
/// limit, named. A peek says the counts are what a check would leave.
fn describe(each: &Detailed, peek: bool) -> String {
    let verdict = match (peek, each.decision.allowed) {
        (false, true) => "allowed",
        (false, false) => "rejected",
        (true, true) => "would be allowed (peek, nothing recorded)",
        (true, false) => "would be rejected (peek, nothing recorded)",
    };
    describe_with(each, verdict)
}

/// [`describe`] under the words `verdict`.
fn describe_with(each: &Detailed, verdict: &str) -> String {
    let d = &each.decision;
    let mut text = format!(
        "{verdict}: {}",
        state(
            d.count,
            d.limit,
            d.window_ms,
            d.remaining,
            d.retry_after_ms,
            d.reset_after_ms
        )
    );
    let limits: Vec<_> = each.limits.iter().map(|s| s.limit).collect();
    let listed = limits.len() > 1 || limits.iter().any(|l| l.name().is_some());
    for s in each.limits.iter().filter(|_| listed) {
        let name = slidelog::headers::policy_name(&limits, &s.limit);
        let line = match s.counts {
            Some(c) => state(
                c.count,
                s.limit.max(),
                s.limit.window_ms(),
                c.remaining,
                c.retry_after_ms,
                c.reset_after_ms,
            ),
            None => format!(
                "{} per {} window (the store reported the deciding limit only)",
                s.limit.max(),
                human_ms(s.limit.window_ms())
            ),
        };
        text.push_str(&format!("\n  {name}: {line}"));
    }
    text
}

/// One limit's counts: used, remaining and when it empties, or its wait.
fn state(count: u64, max: u64, window_ms: u64, remaining: u64, retry: u64, reset: u64) -> String {
    let used = format!("{count}/{max} used in {} window", human_ms(window_ms));
    if retry > 0 {
        format!("{used}, retry after {}", human_ms(retry))
    } else {
        format!(
            "{used}, {remaining} remaining, empty in {}",
            human_ms(reset)
        )
    }
}

fn human_ms(ms: u64) -> humantime::FormattedDuration {
    humantime::format_duration(Duration::from_millis(ms))
}

//! `slidelog serve`: the service. A thin layer over the library: the flags
//! ([`ServeArgs`]), checked (`validate`), make the app (`open`: the store
//! and its limiter), whose servers (`listen`) then run until SIGTERM or
//! SIGINT, with the background chores (`upkeep`, `schedule` for
//! `--inspect-every`) beside them.

mod listen;
mod logs;
mod open;
mod schedule;
mod secure;
mod upkeep;
mod validate;

pub use logs::{LogFormat, init as init_logs};

use super::{StoreArgs, parse_duration};
use crate::http::{self, DEFAULT_MAX_BODY_BYTES};
use crate::policy::{FailurePolicy, PolicyName};
use crate::server::{self, Stopped};
use std::process::ExitCode;
use std::time::Duration;

impl ServeArgs {
    /// The failure policy of `--on-store-error` and `--local-share`.
    pub fn failure_policy(&self) -> anyhow::Result<FailurePolicy> {
        self.on_store_error.policy(self.local_share)
    }
}

/// Arguments of `slidelog serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address of the HTTP JSON API (loopback by default: exposing it is a choice).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub http: String,
    /// Address of the Envoy rate limit gRPC API.
    #[arg(long, default_value = "127.0.0.1:8081")]
    pub grpc: String,
    /// Do not serve the Envoy rate limit gRPC API (nothing is bound on
    /// --grpc; POST /json stays on --http).
    #[arg(long, conflicts_with = "grpc")]
    pub no_grpc: bool,
    /// Envoy rate limit config: a YAML file or a folder of them, in the
    /// reference service's format (reloaded on SIGHUP and when a file changes).
    #[arg(long)]
    pub config: Option<std::path::PathBuf>,
    /// Files of --config that configure the same domain add to it instead of
    /// being refused (the reference service's MERGE_DOMAIN_CONFIG); a
    /// descriptor configured twice is still refused.
    #[arg(
        long,
        env = "MERGE_DOMAIN_CONFIG",
        value_parser = clap::builder::BoolishValueParser::new(),
        default_value_t = false,
        num_args = 0..=1,
        default_missing_value = "true"
    )]
    pub merge_domain_config: bool,
    /// The operator's policies: named limit sets, one a line
    /// (`api-key: requests=100/minute, tokens=20000/minute`), which a
    /// request names with "policy" in place of its own limits. Read again
    /// when the file changes (checked every --config-poll-interval); a
    /// change that does not parse keeps the last good policies.
    #[arg(long)]
    pub policies: Option<std::path::PathBuf>,
    /// Refuse client-chosen limits: every check, peek, settle and charge
    /// must name a policy of --policies (400 otherwise).
    #[arg(long, requires = "policies")]
    pub require_policy: bool,
    /// How often the --config files are checked for changes.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub config_poll_interval: Duration,
    /// Send every decision to the store. By default a rejection is answered
    /// again locally until its retry_after_ms has passed (exact on a Redis
    /// store; a reset through another instance is then seen by this one only
    /// when the cached wait ends).
    #[arg(long)]
    pub no_rejection_cache: bool,
    /// Add x-ratelimit-limit/-remaining/-reset to Envoy responses
    /// (response_headers_to_add), as the reference service's option.
    #[arg(long)]
    pub envoy_response_headers: bool,
    /// Decide each descriptor of an Envoy request on its own, as before
    /// joint decisions: a descriptor that admits records even when another
    /// refuses the request. Off by default: the limited descriptors of one
    /// request are decided together, and a refused request records nothing
    /// (docs/design.md §5.1). For migration only.
    #[arg(long)]
    pub envoy_independent_descriptors: bool,
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub snapshot: crate::snapshot::SnapshotArgs,
    #[command(flatten)]
    pub tls: crate::tls::TlsArgs,
    #[command(flatten)]
    pub auth: crate::auth::AuthArgs,
    /// What to answer when the store fails or times out: fail-open admits with
    /// "degraded": true; fail-closed answers 503; local decides each limit at
    /// ceil(max × --local-share) in this instance's memory ("degraded": true)
    /// and charges what it admitted back to the store when it returns.
    #[arg(long, value_parser = crate::policy::parser(), default_value = "fail-open")]
    pub on_store_error: PolicyName,
    /// With --on-store-error local: the share F of each limit one instance
    /// admits while the store is down (0 < F <= 1; about 1/N for N
    /// instances: N instances admit at most N × ceil(max × F)).
    #[arg(long)]
    pub local_share: Option<f64>,
    /// With --on-store-error local: the most records admitted locally that
    /// await charge-back to the store; past it local admissions get 503.
    #[arg(long, default_value_t = slidelog::DEFAULT_JOURNAL_CAP)]
    pub local_journal_cap: usize,
    /// Token that DELETE /v1/keys/{key} requires as `Authorization: Bearer <token>`.
    #[arg(long, env = "SLIDELOG_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<slidelog::redact::Secret>,
    /// Read the admin token from this file (trailing newline ignored), so it
    /// appears neither in the process list nor in the environment.
    #[arg(long, conflicts_with = "admin_token")]
    pub admin_token_file: Option<std::path::PathBuf>,
    /// Read the receipt secret (at least 32 bytes; trailing newline
    /// ignored) from this file: instances that settle each other's receipts
    /// must share it. Without it a Redis store's shared secret is used (the
    /// first instance creates it in the store), and the memory store makes a
    /// random one (receipts then settle until this process exits).
    #[arg(long)]
    pub receipt_secret_file: Option<std::path::PathBuf>,
    /// How long a receipt settles after its check (e.g. 10m; at most 1d). A
    /// store keeps a settled receipt's nonce that long, so that it settles
    /// once.
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    pub receipt_ttl: Duration,
    /// Start even when the store refuses the configuration (wrong password,
    /// unknown ACL user, NOPERM, a missing database, a failed TLS
    /// handshake): /readyz then answers 503 naming the cause until it is
    /// fixed. Without it, serve exits 2.
    #[arg(long)]
    pub allow_store_misconfig: bool,
    /// Accept `now_ms` in requests (a client that picks its time can empty its own log).
    #[arg(long)]
    pub trust_client_time: bool,
    /// Largest request body (bytes, or 64KiB, 1MiB, ...); larger bodies get 413.
    #[arg(long, default_value_t = DEFAULT_MAX_BODY_BYTES, value_parser = crate::units::parse_size)]
    pub max_body_bytes: usize,
    /// Time in-flight requests get to finish after SIGTERM/SIGINT (e.g. 10s).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,
    /// Most keys the in-memory store holds (memory:// only).
    #[arg(long, default_value_t = slidelog_memory::DEFAULT_KEY_CAP)]
    pub memory_key_cap: usize,
    /// Most blocks and overrides the store holds (1 to 10000000); past it
    /// a new one is refused (409 naming this flag), docs/design.md §5.4.
    #[arg(long, default_value_t = slidelog::store::DEFAULT_MAX_CONTROLS)]
    pub max_blocks: usize,
    /// Redis stores: how long an override read from the store (or its
    /// absence) is reused: how late another instance's override may apply
    /// here (0s: read on every decision, one more round trip).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub override_cache: Duration,
    /// Budget of the in-memory store (bytes, or 512MiB, 1GiB, 2GB, ...):
    /// records, keys and their table slots (memory:// only). At the budget
    /// or the key cap new keys get 503 with Retry-After; existing keys are
    /// still decided exactly.
    #[arg(long, env = "SLIDELOG_MEMORY_LIMIT", default_value_t = slidelog_memory::DEFAULT_MEMORY_LIMIT, value_parser = crate::units::parse_size)]
    pub memory_limit: usize,
    /// Largest `max` a client may send (HTTP `max`, Envoy `limit` overrides;
    /// --config limits are the operator's own). A key then holds at most this
    /// many records. 1 to 10000000.
    #[arg(long, env = "SLIDELOG_MAX_LIMIT", default_value_t = slidelog::Bounds::SERVICE.max_limit)]
    pub max_limit: u64,
    /// Largest cost of one request (HTTP `cost`, Envoy `hits_addend`). 1 to 10000000.
    #[arg(long, env = "SLIDELOG_MAX_COST", default_value_t = slidelog::Bounds::SERVICE.max_cost)]
    pub max_cost: u64,
    /// Most limits in one HTTP request. 1 to 16.
    #[arg(long, env = "SLIDELOG_MAX_LIMITS", default_value_t = slidelog::Bounds::SERVICE.max_limits)]
    pub max_limits: usize,
    /// Most descriptors in one Envoy rate limit request (gRPC or POST /json),
    /// and most checks in one joint HTTP request (`checks`). 1 to 1000; a
    /// joint decision takes at most 64 distinct keys.
    #[arg(long, env = "SLIDELOG_MAX_DESCRIPTORS", default_value_t = slidelog::Bounds::SERVICE.max_descriptors)]
    pub max_descriptors: usize,
    /// Raise every request's granularity_ms to at least this fraction of
    /// its limit's window (1/600, 0.001; in (0, 1]): to the smallest
    /// divisor of the window at or above it, reported in the answer's
    /// limits. A key then holds about 1/fraction records per limit
    /// whatever the rate. Default: none (callers choose, exact by default).
    #[arg(long, env = "SLIDELOG_MIN_GRANULARITY", value_parser = parse_min_granularity)]
    pub min_granularity: Option<slidelog::GranularityFloor>,
    /// Scan the Redis key space this often and export the slidelog_inspect_*
    /// gauges on /metrics (e.g. 60s; at least 1s; Redis stores only).
    #[arg(long, value_parser = parse_duration)]
    pub inspect_every: Option<Duration>,
    /// SCAN pattern of --inspect-every (default: the key prefix followed by *).
    #[arg(long, requires = "inspect_every")]
    pub inspect_pattern: Option<String>,
    /// The limit's max that --inspect-every compares set sizes with (keys above
    /// 2 x max are flagged; 1 to 10000000). Default: the largest
    /// requests_per_unit of --config, if any.
    #[arg(long, requires = "inspect_every")]
    pub inspect_max: Option<u64>,
    /// Most open connections, HTTP and gRPC together (default: the open-file
    /// limit less an eighth of it, at least 64 kept free). At the cap the
    /// connection quiet the longest makes room for a new one.
    #[arg(long)]
    pub max_connections: Option<usize>,
    /// Time an HTTP client gets to send a request's headers; also the
    /// longest a kept-alive connection waits for its next request.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub http_header_timeout: Duration,
    /// An HTTP connection that sends nothing for this long is closed.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub http_idle_timeout: Duration,
    /// A gRPC connection that sends nothing (keep-alive answers count) for
    /// this long is closed.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub grpc_idle_timeout: Duration,
    /// Most concurrent HTTP/2 streams (requests) on one gRPC connection.
    #[arg(long, default_value_t = crate::server::DEFAULT_GRPC_MAX_STREAMS)]
    pub grpc_max_streams: u32,
    /// Interval of the gRPC server's HTTP/2 keep-alive pings.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub grpc_keepalive_interval: Duration,
    /// A keep-alive ping unanswered for this long closes the connection.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub grpc_keepalive_timeout: Duration,
    /// Log format on stderr (filter with RUST_LOG, default info).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// Runs the service until SIGTERM or SIGINT: the flags, checked, make the
/// app (store, limiter, Envoy rules), whose servers then run until shutdown.
pub async fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    logs::init(args.log_format);
    validate::flags(&args)?;
    let envoy_options = slidelog_envoy::LoadOptions {
        merge_domains: args.merge_domain_config,
    };
    let envoy_config = crate::envoy::load_config(
        args.config.as_ref(),
        args.config_poll_interval,
        envoy_options,
    )?;
    let inspect_schedule = schedule::from_flags(&args)?;
    let app = open::build_app(&args).await?;
    // Loaded before any listener is bound: no decision sees an empty store.
    let snapshots = crate::snapshot::start(&args.snapshot, &app)?;
    let service_options = crate::envoy::options(
        args.envoy_response_headers,
        args.envoy_independent_descriptors,
        args.max_descriptors,
    );
    let limiter = crate::envoy::limiter(&app, envoy_config, service_options);
    let secured = secure::Secured::from_flags(&args, &app)?;
    let bound = listen::bind(&args, limiter.clone(), &secured).await?;
    listen::announce(&args, &bound);
    secured.warn_if_clear(bound.http_addr);
    let listen::Bound {
        http,
        grpc_task,
        hygiene,
        trigger,
        shutdown,
        signal,
        ..
    } = bound;
    signal.spawn_watch(trigger, args.shutdown_grace);
    secured.spawn_reload(&shutdown);
    upkeep::spawn(app.clone(), shutdown.clone(), args.config_poll_interval);
    if let Some(schedule) = inspect_schedule {
        schedule::spawn(app.clone(), schedule, shutdown.clone());
    }
    let router = http::service(
        app,
        args.max_body_bytes,
        slidelog_envoy::json::router(limiter),
    )
    .with_auth(secured.auth);
    // Both servers drain at once, each within the grace period; the final
    // snapshot below then holds every decision either of them answered.
    let grpc = drain_grpc(grpc_task, shutdown.clone(), args.shutdown_grace);
    let http = server::serve_http_with(http, router, shutdown, args.shutdown_grace, &hygiene);
    let (http, grpc) = tokio::join!(http, grpc);
    match (http?, grpc) {
        (Stopped::Drained, Stopped::Drained) => tracing::info!("stopped"),
        _ => tracing::warn!("stopped with requests cut off"),
    }
    if let Some(snapshots) = snapshots {
        snapshots.finish().await;
    }
    Ok(ExitCode::SUCCESS)
}

/// Waits for the gRPC server (none with `--no-grpc`) to answer the calls in
/// flight once `shutdown` fires, for at most `grace`; then drops the rest.
async fn drain_grpc(
    task: Option<tokio::task::JoinHandle<()>>,
    shutdown: crate::shutdown::Shutdown,
    grace: Duration,
) -> Stopped {
    let Some(mut task) = task else {
        return Stopped::Drained;
    };
    tokio::select! {
        // Ended before shutdown: it said why ("gRPC server stopped").
        _ = &mut task => return Stopped::Drained,
        () = shutdown.wait() => {}
    }
    match tokio::time::timeout(grace, &mut task).await {
        Ok(_) => Stopped::Drained,
        Err(_) => {
            tracing::warn!(grace = ?grace, "grace period over: dropping gRPC calls still in flight");
            task.abort();
            Stopped::GraceExpired
        }
    }
}

/// `--min-granularity`: a fraction in (0, 1], the error naming the flag.
fn parse_min_granularity(text: &str) -> Result<slidelog::GranularityFloor, String> {
    text.parse()
        .map_err(|e: slidelog::FloorError| format!("--min-granularity: {e}"))
}

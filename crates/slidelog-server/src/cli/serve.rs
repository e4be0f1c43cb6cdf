//! `slidelog serve`: the service. A thin layer over the library: read the
//! flags, open the store, bind the listener, log where it listens, and serve
//! until SIGTERM or SIGINT.

use super::{StoreArgs, parse_duration};
use crate::app::{App, AppConfig};
use crate::http::{self, DEFAULT_MAX_BODY_BYTES};
use crate::inspect_task::{self, InspectSchedule};
use crate::policy::FailurePolicy;
use crate::preflight::Preflight;
use crate::server::{self, Stopped};
use crate::shutdown::{self, Shutdown};
use anyhow::Context;
use slidelog::redact::mask_password;
use slidelog::store::MemoryStore;
use slidelog::url::{StoreUrl, open_store};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

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
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub snapshot: crate::snapshot::SnapshotArgs,
    /// What to answer when the store fails or times out: fail-open admits with
    /// "degraded": true; fail-closed answers 503.
    #[arg(long, value_parser = crate::policy::parser(), default_value = "fail-open")]
    pub on_store_error: FailurePolicy,
    /// Token that DELETE /v1/keys/{key} requires as `Authorization: Bearer <token>`.
    #[arg(long, env = "SLIDELOG_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<slidelog::redact::Secret>,
    /// Read the admin token from this file (trailing newline ignored), so it
    /// appears neither in the process list nor in the environment.
    #[arg(long, conflicts_with = "admin_token")]
    pub admin_token_file: Option<std::path::PathBuf>,
    /// Start even when the store refuses the configuration (wrong password,
    /// unknown ACL user, NOPERM, a missing database, a failed TLS
    /// handshake): /readyz then answers 503 naming the cause until it is
    /// fixed. Without it, serve exits 2.
    #[arg(long)]
    pub allow_store_misconfig: bool,
    /// Accept `now_ms` in requests (a client that picks its time can empty its own log).
    #[arg(long)]
    pub trust_client_time: bool,
    /// Largest request body in bytes; larger bodies get 413.
    #[arg(long, default_value_t = DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: usize,
    /// Time in-flight requests get to finish after SIGTERM/SIGINT (e.g. 10s).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,
    /// Most keys the in-memory store holds (memory:// only).
    #[arg(long, default_value_t = slidelog_memory::DEFAULT_KEY_CAP)]
    pub memory_key_cap: usize,
    /// Budget in bytes of the in-memory store: records, keys and their
    /// table slots (memory:// only). At the budget or the key cap new keys
    /// get 503 with Retry-After; existing keys are still decided exactly.
    #[arg(long, env = "SLIDELOG_MEMORY_LIMIT", default_value_t = slidelog_memory::DEFAULT_MEMORY_LIMIT)]
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
    /// Most descriptors in one Envoy rate limit request (gRPC or POST /json).
    /// 1 to 1000.
    #[arg(long, env = "SLIDELOG_MAX_DESCRIPTORS", default_value_t = slidelog::Bounds::SERVICE.max_descriptors)]
    pub max_descriptors: usize,
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

/// How logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines with key=value fields.
    Text,
    /// One JSON object per line.
    Json,
}

/// Runs the service until SIGTERM or SIGINT.
pub async fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    init_logs(args.log_format);
    validate(&args)?;
    let envoy_options = slidelog_envoy::LoadOptions {
        merge_domains: args.merge_domain_config,
    };
    let envoy_config = crate::envoy::load_config(
        args.config.as_ref(),
        args.config_poll_interval,
        envoy_options,
    )?;
    let inspect_schedule = inspect_schedule(&args)?;
    let app = build_app(&args).await?;
    // Loaded before any listener is bound: no decision sees an empty store.
    let snapshots = crate::snapshot::start(&args.snapshot, &app)?;
    let limiter = crate::envoy::limiter(&app, envoy_config, args.envoy_response_headers);
    let listener = TcpListener::bind(&args.http)
        .await
        .with_context(|| format!("cannot listen on --http {}", args.http))
        .map_err(|e| bind_error(e, "--http", &args.http, None))?;
    let addr = listener.local_addr()?;
    if !addr.ip().is_loopback() && args.admin_token.is_none() && args.admin_token_file.is_none() {
        tracing::warn!(
            http_addr = %addr,
            "listening beyond loopback without --admin-token: anyone who reaches it can reset keys"
        );
    }
    let (trigger, shutdown) = shutdown::channel();
    let hygiene = hygiene(&args);
    tracing::debug!(
        max_connections = hygiene.conns.max(),
        "connection cap (HTTP and gRPC together)"
    );
    // Install the SIGTERM/SIGINT handlers before saying that we listen: a
    // signal sent as soon as the log line shows must stop us gracefully,
    // not by its default action. One poll registers them.
    let mut signal = Box::pin(shutdown::os_signal());
    let early = tokio::select! {
        biased;
        s = &mut signal => Some(s),
        () = std::future::ready(()) => None,
    };
    let grpc_addr = if args.no_grpc {
        None
    } else {
        let bound = crate::envoy::spawn_grpc(
            &args.grpc,
            limiter.clone(),
            shutdown.clone(),
            hygiene.clone(),
        )
        .await
        .map_err(|e| bind_error(e, "--grpc", &args.grpc, Some("--no-grpc")))?;
        Some(bound)
    };
    let grpc_shown = grpc_addr.map_or_else(|| "off".to_owned(), |a| a.to_string());
    if args.config.is_none() {
        // Without rules the Envoy APIs limit nothing: say so where an
        // operator looks first, rather than let it pass for a limiter.
        let apis = if grpc_addr.is_some() {
            "gRPC ShouldRateLimit and POST /json answer"
        } else {
            "POST /json answers"
        };
        tracing::info!(
            grpc_addr = %grpc_shown,
            "no --config: {apis} every descriptor OK, unlimited (give --config to set limits)"
        );
    }
    tracing::info!(
        http_addr = %addr,
        grpc_addr = %grpc_shown,
        store = %mask_password(&args.store.store),
        policy = %args.on_store_error,
        trust_client_time = args.trust_client_time,
        "slidelog listening"
    );

    let grace = args.shutdown_grace;
    tokio::spawn(async move {
        let signal = match early {
            Some(s) => s,
            None => signal.await,
        };
        tracing::info!(
            signal,
            grace = ?grace,
            "shutting down: no new connections, finishing requests in flight"
        );
        trigger.trigger();
    });
    spawn_upkeep(app.clone(), shutdown.clone());
    if let Some(schedule) = inspect_schedule {
        tracing::info!(every = ?schedule.every, pattern = %schedule.options.pattern, "key space inspection scheduled");
        inspect_task::spawn(app.clone(), schedule, shutdown.clone());
    }

    let router = http::router_with(
        app,
        args.max_body_bytes,
        slidelog_envoy::json::router(limiter),
    );
    match server::serve_http_with(listener, router, shutdown, grace, &hygiene).await? {
        Stopped::Drained => tracing::info!("stopped"),
        Stopped::GraceExpired => tracing::warn!("stopped with requests cut off"),
    }
    if let Some(snapshots) = snapshots {
        snapshots.finish().await;
    }
    Ok(ExitCode::SUCCESS)
}

/// A failed bind, said once, and when the address is taken, with the flag
/// that moves it (and the one that turns the API off, if any).
fn bind_error(e: anyhow::Error, flag: &str, addr: &str, off: Option<&str>) -> anyhow::Error {
    let in_use = e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::AddrInUse)
    });
    if !in_use {
        return e;
    }
    let off = off.map_or(String::new(), |off| format!(", or turn it off with {off}"));
    anyhow::anyhow!(
        "cannot listen on {flag} {addr}: the address is in use by another program; \
         choose another with {flag} HOST:PORT (port 0 picks a free one){off}"
    )
}

/// The `--inspect-every` schedule, checked, when one is asked for.
fn inspect_schedule(args: &ServeArgs) -> anyhow::Result<Option<InspectSchedule>> {
    let Some(every) = args.inspect_every else {
        return Ok(None);
    };
    if let Some(max) = args
        .inspect_max
        .filter(|m| !(1..=slidelog_core::MAX_MAX).contains(m))
    {
        anyhow::bail!("--inspect-max must be 1 ..= 10000000, got {max}");
    }
    // Without --inspect-max, the largest limit of --config (read once at
    // start): a key above twice the largest limit is above twice its own.
    let (max, max_source, key_limits) = match (args.inspect_max, &args.config) {
        (Some(max), _) => (Some(max), Some("--inspect-max".to_owned()), None),
        (None, Some(path)) => {
            match crate::inspect_limits::from_config(path, &args.store.key_prefix) {
                Ok(limits) => (
                    Some(limits.max),
                    Some(format!("config:{}", path.display())),
                    Some(limits.key_limits),
                ),
                Err(e) => {
                    tracing::warn!(error = %e, "--inspect-every: no limits from --config; sizes are not checked");
                    (None, None, None)
                }
            }
        }
        (None, None) => (None, None, None),
    };
    let schedule = InspectSchedule {
        store_url: args.store.store.clone(),
        options: slidelog_inspect::InspectOptions {
            pattern: args
                .inspect_pattern
                .clone()
                .unwrap_or_else(|| slidelog_inspect::prefix_pattern(&args.store.key_prefix)),
            max,
            max_source,
            key_limits,
            ..slidelog_inspect::InspectOptions::default()
        },
        every,
    };
    schedule.validate().map_err(anyhow::Error::msg)?;
    Ok(Some(schedule))
}

/// The connection limits of both ports, from the flags (checked by
/// `validate`).
fn hygiene(args: &ServeArgs) -> crate::server::Hygiene {
    crate::server::Hygiene {
        conns: crate::conns::Conns::new(
            args.max_connections
                .unwrap_or_else(crate::conns::default_max_connections),
        ),
        header_timeout: args.http_header_timeout,
        http_idle_timeout: args.http_idle_timeout,
        grpc_idle_timeout: args.grpc_idle_timeout,
        grpc_max_streams: args.grpc_max_streams,
        grpc_keepalive_interval: args.grpc_keepalive_interval,
        grpc_keepalive_timeout: args.grpc_keepalive_timeout,
    }
}

/// The admin token: --admin-token (or SLIDELOG_ADMIN_TOKEN), or the
/// contents of --admin-token-file without its trailing newline. The error
/// names the file, never its contents.
fn admin_token(args: &ServeArgs) -> anyhow::Result<Option<slidelog::redact::Secret>> {
    let Some(path) = &args.admin_token_file else {
        return Ok(args.admin_token.clone());
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read --admin-token-file {}", path.display()))?;
    let token = text.trim_end_matches(['\r', '\n']);
    if token.is_empty() {
        anyhow::bail!("--admin-token-file {} is empty", path.display());
    }
    Ok(Some(token.into()))
}

fn validate(args: &ServeArgs) -> anyhow::Result<()> {
    if args
        .admin_token
        .as_ref()
        .is_some_and(|t| t.expose().is_empty())
    {
        anyhow::bail!("--admin-token must not be empty (leave it unset for no token)");
    }
    if args.max_body_bytes < 64 {
        anyhow::bail!(
            "--max-body-bytes must be at least 64, got {}",
            args.max_body_bytes
        );
    }
    if args.memory_key_cap == 0 {
        anyhow::bail!("--memory-key-cap must be at least 1, got 0");
    }
    if args.memory_limit < 1 << 20 {
        anyhow::bail!(
            "--memory-limit must be at least 1048576 (1 MiB), got {}",
            args.memory_limit
        );
    }
    let absolute = slidelog::Bounds::ABSOLUTE;
    for (flag, value, top) in [
        ("--max-limit", args.max_limit, absolute.max_limit),
        ("--max-cost", args.max_cost, absolute.max_cost),
        (
            "--max-limits",
            args.max_limits as u64,
            absolute.max_limits as u64,
        ),
        (
            "--max-descriptors",
            args.max_descriptors as u64,
            absolute.max_descriptors as u64,
        ),
    ] {
        if !(1..=top).contains(&value) {
            anyhow::bail!("{flag} must be between 1 and {top}, got {value}");
        }
    }
    if args.config_poll_interval.is_zero() {
        anyhow::bail!("--config-poll-interval must be at least 1ms, got 0");
    }
    if args.max_connections == Some(0) {
        anyhow::bail!("--max-connections must be at least 1, got 0");
    }
    for (flag, value) in [
        ("--http-header-timeout", args.http_header_timeout),
        ("--http-idle-timeout", args.http_idle_timeout),
        ("--grpc-idle-timeout", args.grpc_idle_timeout),
        ("--grpc-keepalive-interval", args.grpc_keepalive_interval),
        ("--grpc-keepalive-timeout", args.grpc_keepalive_timeout),
    ] {
        if value < Duration::from_millis(100) {
            anyhow::bail!("{flag} must be at least 100ms, got {value:?}");
        }
    }
    if args.grpc_max_streams == 0 {
        anyhow::bail!("--grpc-max-streams must be at least 1, got 0");
    }
    if args.store.store_timeout.is_zero() {
        anyhow::bail!("--store-timeout must be at least 1ms, got 0");
    }
    Ok(())
}

/// Opens the store named by the flags and wraps it in the service state.
pub async fn build_app(args: &ServeArgs) -> anyhow::Result<App> {
    let config = AppConfig {
        policy: args.on_store_error,
        store_timeout: args.store.store_timeout,
        admin_token: admin_token(args)?,
        trust_client_time: args.trust_client_time,
        bounds: slidelog::Bounds {
            max_limit: args.max_limit,
            max_cost: args.max_cost,
            max_limits: args.max_limits,
            max_descriptors: args.max_descriptors,
        },
    };
    if StoreUrl::parse(&args.store.store)?.is_memory() {
        // Built here rather than by URL so that its key count is exported
        // and its expired logs are swept on a timer.
        let store = Arc::new(
            MemoryStore::new()
                .with_key_cap(args.memory_key_cap)
                .with_memory_limit(args.memory_limit),
        );
        return Ok(App::with_memory_store(store, config));
    }
    let mut options = args.store.options();
    options.memory_key_cap = args.memory_key_cap;
    options.memory_limit = args.memory_limit;
    // A misconfiguration will not pass by itself: refuse to start on one.
    let preflight = crate::preflight::check(&args.store.store, &options).await;
    if let Preflight::Misconfigured(cause) = &preflight
        && !args.allow_store_misconfig
    {
        anyhow::bail!(
            "{cause}; the store refuses slidelog's configuration: fix --store (SLIDELOG_STORE) \
             or the server, or start anyway with --allow-store-misconfig"
        );
    }
    // Start even while Redis is down: /readyz says unready and the failure
    // policy answers until it comes up, as it would during any later outage.
    options.lazy_connect = true;
    let store = open_store(&args.store.store, &options).await?;
    let app = if args.no_rejection_cache {
        App::with_builder(store, config, |b| b.no_rejection_cache())
    } else {
        App::new(store, config)
    };
    match preflight {
        Preflight::Ready => {}
        Preflight::Unreachable(reason) => tracing::warn!(
            store = %mask_password(&args.store.store),
            error = %reason,
            "store not reachable at start; serving with the {} policy until it is",
            args.on_store_error
        ),
        // Logged at error level; /readyz answers 503 with the cause.
        Preflight::Misconfigured(cause) => app.limiter().note_misconfiguration(&cause),
    }
    Ok(app)
}

/// Background chores until shutdown: fold histogram samples (bounded memory
/// without scrapes) and sweep the memory store's expired logs.
fn spawn_upkeep(app: App, shutdown: Shutdown) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(5));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let stop = shutdown.wait();
        tokio::pin!(stop);
        loop {
            tokio::select! {
                _ = &mut stop => return,
                _ = tick.tick() => {
                    app.metrics().run_upkeep();
                    if let Some(memory) = app.memory_store() {
                        let swept = tokio::task::spawn_blocking(move || memory.sweep())
                            .await
                            .unwrap_or(0);
                        if swept > 0 {
                            tracing::debug!(swept, "expired logs dropped");
                        }
                    }
                }
            }
        }
    });
}

fn init_logs(format: LogFormat) {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    // A second init (tests running several servers) keeps the first.
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

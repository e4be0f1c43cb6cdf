//! The command line: one subcommand per module. Exit codes follow docs/design.md §5:
//! `check` exits 0 when admitted, 1 when rejected, 2 on any error (clap's own
//! usage errors exit 2 too).

mod bench;
mod check;
mod inspect;
mod out;
mod serve;
pub mod settings;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::process::ExitCode;
use std::time::Duration;

/// Exact, distributed rate limiting by the sliding window log.
#[derive(Debug, Parser)]
#[command(name = "slidelog", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
#[allow(
    clippy::large_enum_variant,
    reason = "parsed once at startup: boxing would only add noise"
)]
pub enum Command {
    /// Run the service: HTTP JSON API and the Envoy rate limit gRPC API.
    Serve(serve::ServeArgs),
    /// Make one decision; exit 0 admitted, 1 rejected, 2 error. Needs --store.
    #[command(
        long_about = check::LONG_ABOUT,
        // The default (memory://) is one check refuses without an explicit
        // --store: its help must not advertise it.
        mut_arg("store", |a| a.hide_default_value(true).help(
            "The shared store (required): redis://[user:pass@]host:port[/db], rediss://…, \
             redis+cluster://h:p,h:p, redis+sentinel://h:p,h:p/master; memory:// only to try \
             the flags (its log starts empty on every run)."
        ))
    )]
    Check(check::CheckArgs),
    /// Look inside the Redis key space and flag the known problems.
    Inspect(inspect::InspectArgs),
    /// Put load on a store (writing rate:sliding:bench:* keys, which expire with their window)
    /// and count admissions beyond the limit.
    Bench(bench::BenchArgs),
}

/// Options that name and bound the store, shared by every subcommand.
/// `Debug` masks the store URL's passwords.
#[derive(Clone, clap::Args)]
pub struct StoreArgs {
    /// The store URL: `memory://`, `redis://…`, `rediss://…`,
    /// `redis+cluster://…` or `redis+sentinel://…` (the `--help` text below
    /// spells out each form).
    #[arg(
        long,
        help = "The store: memory://, redis://[user:pass@]host:port[/db], rediss://…, \
                redis+cluster://h:p,h:p, redis+sentinel://h:p,h:p/master.",
        env = "SLIDELOG_STORE",
        default_value = "memory://",
        hide_env_values = true
    )]
    pub store: String,
    /// Upper bound on one store call (e.g. 100ms).
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    pub store_timeout: Duration,
    /// Prefix of the Redis keys.
    #[arg(long, default_value = slidelog::store::DEFAULT_KEY_PREFIX)]
    pub key_prefix: String,
    /// Redis stores: decide on this machine's clock instead of Redis TIME.
    #[arg(long)]
    pub client_time: bool,
    /// Redis stores: upper bound on connecting (e.g. 2s).
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub connect_timeout: Duration,
}

impl std::fmt::Debug for StoreArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreArgs")
            .field("store", &slidelog::redact::mask_password(&self.store))
            .field("store_timeout", &self.store_timeout)
            .field("key_prefix", &self.key_prefix)
            .field("client_time", &self.client_time)
            .field("connect_timeout", &self.connect_timeout)
            .finish_non_exhaustive()
    }
}

impl StoreArgs {
    /// The options to open the store with.
    pub fn options(&self) -> slidelog::url::StoreOptions {
        slidelog::url::StoreOptions {
            key_prefix: self.key_prefix.clone(),
            connect_timeout: self.connect_timeout,
            ..slidelog::url::StoreOptions::default()
        }
    }

    /// Returns the clock that decides: this machine's with `--client-time`,
    /// the store's otherwise (docs/design.md §3).
    pub fn time_mode(&self) -> slidelog::TimeMode {
        if self.client_time {
            slidelog::TimeMode::Client(std::sync::Arc::new(slidelog::store::SystemClock))
        } else {
            slidelog::TimeMode::Store
        }
    }
}

pub use crate::duration::parse_duration;
pub use serve::{LogFormat, init_logs};

/// Parses the command line and runs it. Exit code 2 on every error.
pub fn main() -> ExitCode {
    // `serve --settings FILE` makes the file's keys the flags' defaults.
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let (command, applied) = match settings::attach(Cli::command(), &argv) {
        Ok(attached) => attached,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let matches = command.clone().get_matches_from(&applied.argv);
    if settings::wants_print(&matches) {
        print!("{}", settings::print(&command, &matches, &applied));
        return ExitCode::SUCCESS;
    }
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // Which key each --limit and --cost of `check` belongs to (`--and`).
    let check_groups = matches
        .subcommand_matches("check")
        .map(check::Groups::of)
        .unwrap_or_default();
    // Whether --store (or SLIDELOG_STORE) was given, not defaulted: `check`
    // refuses the default in-memory store (see check::LONG_ABOUT).
    let store_given = matches.subcommand().is_some_and(|(_, sub)| {
        sub.try_get_raw("store").is_ok_and(|v| v.is_some())
            && sub.value_source("store") != Some(clap::parser::ValueSource::DefaultValue)
    });
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    runtime.block_on(async move {
        let result = match cli.command {
            Command::Serve(args) => serve::run(args).await,
            Command::Check(args) => check::run(args, store_given, check_groups).await,
            Command::Inspect(args) => inspect::run(args).await,
            Command::Bench(args) => bench::run(args).await,
        };
        result.unwrap_or_else(|e| {
            // The error and its causes ({:#}); each error type says what
            // failed and leaves the why to its source, so each is said once.
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        })
    })
}

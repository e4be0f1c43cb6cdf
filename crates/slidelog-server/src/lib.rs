//! The `slidelog` binary as a library: the command line, the service (HTTP and
//! Envoy gRPC), and the `check`, `inspect` and `bench` subcommands. Each
//! subcommand lives in its own module under [`cli`]; the service is a library
//! function that tests start on port 0:
//!
//! - [`app::App`]: the shared state: the one `slidelog::Limiter` every
//!   transport decides through (timeout, failure policy, metrics hook), the
//!   metrics and the settings;
//! - [`http::router`]: the HTTP JSON API of docs/design.md §5;
//! - [`envoy`]: Envoy's rate limit API (gRPC and `POST /json`) over the
//!   app's limiter;
//! - [`server::serve_http`]: serve a router on a bound listener until a
//!   [`shutdown::Shutdown`] fires, with a grace period.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod app;
pub mod auth;
pub mod browse;
pub mod cli;
pub mod conns;
pub mod duration;
pub mod envoy;
pub mod flag_file;
pub mod grpc_deadline;
mod h2_timer;
pub mod http;
pub mod inspect_limits;
pub mod inspect_task;
pub mod metrics;
pub mod policies;
pub mod policy;
pub mod preflight;
pub mod server;
pub mod shutdown;
pub mod snapshot;
pub mod tls;
pub mod units;

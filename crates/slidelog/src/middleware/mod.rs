//! A tower `Layer`/`Service` that rate limits HTTP and gRPC services
//! (feature `tower`; `axum` and `tonic` add their integrations).
//!
//! Three parts: a [`KeyExtractor`] says who a request counts against
//! ([`PeerIp`], [`Header`], [`Route`], [`Constant`], any closure, or a pair),
//! [`RouteLimits`] says which limits apply (`"100/minute".parse()?` for one
//! limit on every request), and [`RateLimitLayer`] decides on a
//! [`Limiter`](crate::Limiter) and answers 429 with `Retry-After` and the
//! IETF RateLimit fields when the limit is reached.
//!
//! Each layer counts in its own key namespace ([`RateLimitLayer::name`], or
//! one derived from its extractor), so layers on one limiter never share a
//! log by accident. One layer may limit several keys at once
//! ([`RateLimitLayer::key`]: per API key *and* per IP), decided together:
//! a request one key refuses is recorded in none. Stacked layers refund a
//! request a layer inside them refused ([`RateLimitLayer`] says how). A request costs 1 unless [`RateLimitLayer::cost`] (the
//! head) or [`RateLimitLayer::body_cost`] (a bounded body: tokens, bytes)
//! says otherwise, for every limit or per limit
//! ([`RateLimitLayer::cost_by_name`] names the limits,
//! [`RateLimitLayer::cost_by_position`] lists them in order; both checked
//! when the layer is built); a cost no limit admits is answered 413 with the
//! reason.
//! Limits per key's tier (free 100 a minute, paid 10,000):
//! [`RateLimitLayer::tiers`] with [`Tiers`].
//! Usage known only after the response (tokens an LLM used) settles the
//! reservation: [`RateLimitLayer::settle_from_header`],
//! [`settle_from_extension`](RateLimitLayer::settle_from_extension),
//! [`settle_with`](RateLimitLayer::settle_with) (the body), and
//! [`refund_on`](RateLimitLayer::refund_on) chosen statuses (the
//! `llm_gateway` example). [`RateLimitLayer::on_rejection`]
//! makes the refusals' bodies (JSON), [`RateLimitLayer::on_degraded`] is told
//! of fail-open admissions.
//!
//! Feature `axum` (or `tonic`) is needed for the layer to answer with that
//! framework's body type; without it the compiler says which to enable.
//!
//! With axum (per API key, 10 requests per second, login 5 per minute):
//!
//! ```
//! use axum::{Router, routing::{get, post}};
//! use slidelog::middleware::{Header, MissingKey, RateLimitLayer, RouteLimits};
//! use slidelog::{Limit, Limiter};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let limiter = Limiter::from_url("memory://").await?;
//! let routes = RouteLimits::new([Limit::new(10, 1_000)?])?
//!     .route("/login", [Limit::new(5, 60_000)?])?
//!     .unlimited("/healthz");
//! let layer = RateLimitLayer::new(limiter, Header::named("x-api-key")?, routes)
//!     .on_missing_key(MissingKey::Reject);
//! let app: Router = Router::new()
//!     .route("/", get(|| async { "hello" }))
//!     .route("/login", post(|| async { "welcome" }))
//!     .route("/healthz", get(|| async { "ok" }))
//!     .layer(layer);
//! # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
//! ```
//!
//! With tonic, per client address: `Server::builder().layer(RateLimitLayer::new(
//! limiter, PeerIp::new(), routes))` (see the `tonic_per_client` example).

mod after;
mod answer;
mod ask;
mod config;
mod cost;
mod extract;
mod keyed;
mod keys;
mod layer;
mod namespace;
mod response;
mod routes;
mod service;
mod settle;
mod stack;
mod tiers;

pub use crate::headers::{DEGRADED, RATELIMIT, RATELIMIT_POLICY};
pub use config::MissingKey;
pub use cost::{
    BodyCost, BufferedBody, Charge, Cost, CostError, CostListError, HeadCost, UnitCost,
};
pub use extract::{Constant, Header, KeyExtractor, PeerIp, Route};
pub use keyed::KeyError;
pub use layer::{NameError, RateLimitLayer};
pub use namespace::MAX_NAME_BYTES;
pub(crate) use namespace::Names;
pub use response::{Rejection, RejectionBody, RejectionKind};
pub use routes::RouteLimits;
pub use service::{RateLimitService, ResponseFuture};
pub use settle::{BodyUsage, NoBodyUsage, ReadUsage, SettleOutcome, Usage};
pub use tiers::{TierError, TierFuture, TierLookup, Tiers};

//! Envoy's rate limit service, served by slidelog with exact sliding windows.
//!
//! - [`proto`]: the `envoy.service.ratelimit.v3` messages and the tonic server
//!   and client, compiled at build time from `proto/` (no system `protoc`).
//! - [`config`]: the reference service's YAML (`domain`, `descriptors`, `key`,
//!   `value` with `*` wildcards, `rate_limit`, `unlimited`, `shadow_mode`,
//!   `share_threshold`, …, plus slidelog's `window`), from a file or a
//!   folder (domains merged on request), and descriptor matching.
//! - [`key`]: the stable store key of a descriptor.
//! - [`codec`]: protobuf for gRPC; an undecodable request is `INVALID_ARGUMENT`.
//! - [`service`]: [`RateLimiter`], which turns a `RateLimitRequest` into
//!   decisions through a `slidelog::Limiter` (the one place where a decision
//!   is bounded in time and the failure policy applied), and the gRPC
//!   service around it.
//! - [`json`]: `POST /json`, the same request and response as JSON.
//! - [`reload`]: the live config, reloaded on SIGHUP and when a file changes.
//!
//! ```
//! use slidelog_envoy::config::RateLimitConfig;
//!
//! let config = RateLimitConfig::from_yaml_str(
//!     "inline.yaml",
//!     "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 10}\n",
//! )?;
//! let rule = config.find("api", &[("user", "alice")]).unwrap();
//! assert_eq!(rule.limit().unwrap().max(), 10);
//! assert!(config.find("api", &[("path", "/")]).is_none());
//! # Ok::<(), slidelog_envoy::config::ConfigError>(())
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod codec;
pub mod config;
mod handles;
pub mod json;
pub mod key;
pub mod proto;
pub mod reload;
pub mod service;

pub use config::{ConfigError, LoadOptions, RateLimitConfig, Rule};
pub use reload::ConfigHandle;
pub use service::{GrpcService, RateLimiter, ServiceError, ServiceOptions};

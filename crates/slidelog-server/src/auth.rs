//! Client tokens (docs/design.md §5.2).
//!
//! With `--api-token-file`, every decision, settle and charge call needs a
//! token of the file: HTTP `Authorization: Bearer <token>` on `/v1/check`,
//! `/v1/peek`, `/v1/settle`, `/v1/charge` and `/json` (401 with a JSON
//! error and `WWW-Authenticate: Bearer` without one), gRPC `authorization`
//! metadata `Bearer <token>` (`UNAUTHENTICATED`). `--settle-tokens` limits
//! settle and charge to the callers it names (403 for the others).
//! `--metrics-token-file` puts `/metrics` behind its own tokens.
//! `/healthz`, `/readyz` and the admin operations (their own guard,
//! [`AdminGuard`], `--admin-token`) are not affected. Each authenticated call is counted by caller name (from the
//! operator's file, so the label's values are bounded) and route.
//!
//! Tokens are never logged: errors name the file and line only.

pub mod admin;
mod grpc;
pub mod tokens;

pub use admin::{AdminGuard, Peer};
pub use grpc::GrpcAuth;
pub use tokens::{TokenFile, TokenFileError};

use crate::http::error::ApiError;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse as _, Response};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How often the token files are read again to see a change.
pub const RELOAD_POLL: Duration = Duration::from_secs(2);
/// The counter of authenticated calls, by `caller` and `route`.
pub const CALLER_REQUESTS: &str = "slidelog_caller_requests_total";

/// The client token flags of `serve`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct AuthArgs {
    /// Require a client token on every decision, settle and charge call
    /// (HTTP `Authorization: Bearer <token>`, gRPC `authorization`
    /// metadata): one token a line, optionally `name:token` (the name is
    /// the `caller` label of slidelog_caller_requests_total; `default`
    /// without one); blank lines and `#` comments ignored. Read again
    /// every 2 s. A call without a valid token gets 401 (gRPC
    /// UNAUTHENTICATED); /healthz and /readyz never need one.
    #[arg(long)]
    pub api_token_file: Option<PathBuf>,
    /// Only these callers (names of --api-token-file) may settle and
    /// charge; the others get 403.
    #[arg(long, value_delimiter = ',', requires = "api_token_file")]
    pub settle_tokens: Option<Vec<String>>,
    /// Require a token of this file (same format) on GET /metrics.
    #[arg(long)]
    pub metrics_token_file: Option<PathBuf>,
}

/// Why the token flags could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// A token file did not load.
    #[error(transparent)]
    File(#[from] TokenFileError),
    /// `--settle-tokens` names a caller the token file does not.
    #[error("--settle-tokens: {name:?} is no caller name of --api-token-file (names: {known})")]
    UnknownName {
        /// The name.
        name: String,
        /// The file's names.
        known: String,
    },
}

/// The routes that need a token, and which of [`tokens::ROUTES`] each is.
fn route_of(path: &str) -> Option<usize> {
    Some(match path {
        "/v1/check" => 0,
        "/v1/peek" => 1,
        "/v1/settle" => 2,
        "/v1/charge" => 3,
        "/json" => 4,
        _ => return None,
    })
}

/// The index of gRPC in [`tokens::ROUTES`].
const GRPC_ROUTE: usize = 5;

/// The loaded token files. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Auth {
    api: Option<TokenFile>,
    /// The callers that may settle and charge (all, when `None`).
    settle: Option<Arc<[String]>>,
    metrics: Option<TokenFile>,
}

impl Auth {
    /// Loads the flags' files; `None` when no token flag is given.
    pub fn from_flags(
        args: &AuthArgs,
        recorder: Arc<dyn metrics::Recorder + Send + Sync>,
    ) -> Result<Option<Self>, AuthError> {
        if args.api_token_file.is_none() && args.metrics_token_file.is_none() {
            return Ok(None);
        }
        metrics::with_local_recorder(&*recorder, || {
            metrics::describe_counter!(
                CALLER_REQUESTS,
                "Calls that presented a valid client token, by caller (a name of --api-token-file) and route"
            );
        });
        let load = |flag, path: &Option<PathBuf>| {
            (path.clone())
                .map(|p| TokenFile::load(flag, p, recorder.clone()))
                .transpose()
        };
        let api = load("--api-token-file", &args.api_token_file)?;
        let metrics = load("--metrics-token-file", &args.metrics_token_file)?;
        if let (Some(api), Some(settle)) = (&api, &args.settle_tokens) {
            let known = api.names();
            if let Some(name) = settle.iter().find(|n| !known.iter().any(|k| &**k == *n)) {
                let known: Vec<&str> = known.iter().map(|k| &**k).collect();
                return Err(AuthError::UnknownName {
                    name: name.clone(),
                    known: known.join(","),
                });
            }
        }
        Ok(Some(Self {
            api,
            settle: args.settle_tokens.clone().map(Into::into),
            metrics,
        }))
    }

    /// Reads the token files again every [`RELOAD_POLL`] until `shutdown`.
    pub fn spawn_reload(&self, shutdown: crate::shutdown::Shutdown) {
        let files: Vec<TokenFile> = self.api.iter().chain(&self.metrics).cloned().collect();
        crate::flag_file::spawn_poll(shutdown, RELOAD_POLL, move || {
            files.iter().for_each(TokenFile::reload);
        });
    }

    /// The HTTP answer refusing a request to `path` with `headers`, if it
    /// needs a token it lacks; `None` lets it through (counted).
    pub fn refuse_http(&self, path: &str, headers: &HeaderMap) -> Option<Response> {
        if path == "/metrics" {
            let file = self.metrics.as_ref()?;
            return match bearer(headers).and_then(|t| file.find(t.as_bytes())) {
                Some(_) => None,
                None => Some(unauthorized(
                    "/metrics needs a token of --metrics-token-file: send `Authorization: Bearer <token>`",
                )),
            };
        }
        let route = route_of(path)?;
        let api = self.api.as_ref()?;
        let Some(caller) = bearer(headers).and_then(|t| api.find(t.as_bytes())) else {
            return Some(unauthorized(
                "this endpoint needs a client token: send `Authorization: Bearer <token>`",
            ));
        };
        if (route == 2 || route == 3) && !self.may_settle(&caller.name) {
            let message = "this caller's token may not settle or charge (see --settle-tokens)";
            return Some(ApiError::new(StatusCode::FORBIDDEN, message).into_response());
        }
        caller.count(route);
        None
    }

    /// The gRPC refusal of a call with `headers`, if it lacks a token.
    fn refuse_grpc(&self, headers: &HeaderMap) -> Option<tonic::Status> {
        let api = self.api.as_ref()?;
        match bearer(headers).and_then(|t| api.find(t.as_bytes())) {
            Some(caller) => {
                caller.count(GRPC_ROUTE);
                None
            }
            None => Some(tonic::Status::unauthenticated(
                "this service needs a client token: send `authorization: Bearer <token>` metadata",
            )),
        }
    }

    fn may_settle(&self, name: &str) -> bool {
        (self.settle.as_deref()).is_none_or(|names| names.iter().any(|n| n == name))
    }

    /// Whether calls need an API token.
    pub fn guards_api(&self) -> bool {
        self.api.is_some()
    }
}

/// The token of `Authorization: Bearer <token>` (the scheme in any case).
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, rest) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
}

fn unauthorized(message: &str) -> Response {
    ApiError::new(StatusCode::UNAUTHORIZED, message.to_owned()).into_response()
}

//! The HTTP JSON API of docs/design.md §5 as an axum [`Router`].
//!
//! | route | what |
//! |---|---|
//! | `POST /v1/check` | decide and record: 200 admitted, 429 rejected, decision JSON |
//! | `POST /v1/peek` | the same decision, recording nothing |
//! | `POST /v1/settle` | change a checked record's costs to the actual ones (docs/design.md §4.6) |
//! | `POST /v1/charge` | record usage without deciding |
//! | `DELETE /v1/keys/{key}` | delete a key's log (admin token when set) |
//! | `GET /healthz` | the process answers |
//! | `GET /readyz` | the store answers (503 while it does not) |
//! | `GET /metrics` | Prometheus text format |

pub mod answer;
pub mod api;
pub mod body;
pub mod error;
pub mod headers;
pub mod respond;
pub mod usage;

use crate::app::App;
use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::routing::{delete, get, post};
use body::BodyCap;

/// Default cap on a request body: a body with a 512-byte key and 16 limits
/// is well under 2 KiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 16 * 1024;

/// The API's routes over `app`, with bodies capped at `max_body_bytes`
/// (413 beyond), JSON answers for unknown routes and methods, and a panic
/// in a handler turned into a 500 rather than a dropped connection.
///
pub fn router(app: App, max_body_bytes: usize) -> Router {
    router_with(app, max_body_bytes, Router::new())
}

/// [`router`] plus `extra` routes of other transports (e.g. Envoy's
/// `POST /json`), which share the app state, the body cap and the JSON errors.
pub fn router_with(app: App, max_body_bytes: usize, extra: Router<App>) -> Router {
    // The API's own routes read their bodies within the cap themselves
    // (`body::JsonBytes::read`); the extra routes read theirs with axum's
    // extractors, capped by the `DefaultBodyLimit` layer, on their routes
    // only: the layer puts the limit into every request's extensions.
    let cap = BodyCap(max_body_bytes);
    Router::new()
        .merge(extra.layer(DefaultBodyLimit::max(max_body_bytes)))
        .route(
            "/v1/check",
            post(move |State(app): State<App>, req: Request| api::check(app, req, cap)),
        )
        .route(
            "/v1/peek",
            post(move |State(app): State<App>, req: Request| api::peek(app, req, cap)),
        )
        .route(
            "/v1/settle",
            post(move |State(app): State<App>, req: Request| usage::settle(app, req, cap)),
        )
        .route(
            "/v1/charge",
            post(move |State(app): State<App>, req: Request| usage::charge(app, req, cap)),
        )
        .route("/v1/keys/{key}", delete(api::reset))
        .route("/healthz", get(api::healthz))
        .route("/readyz", get(api::readyz))
        .route("/metrics", get(api::metrics))
        .fallback(error::not_found)
        .method_not_allowed_fallback(error::method_not_allowed)
        // A panic in any route is caught (outside the extra routes' body cap).
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(
            panic_response,
        ))
        .with_state(app)
}

fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> axum::response::Response {
    use axum::response::IntoResponse;
    tracing::error!("a request handler panicked; answered 500");
    error::ApiError::new(
        axum::http::StatusCode::INTERNAL_SERVER_ERROR,
        "internal error",
    )
    .into_response()
}

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
use axum::response::Response;
use axum::routing::future::RouteFuture;
use axum::routing::{delete, get, post};
use body::BodyCap;
use futures::FutureExt as _;
use futures::future::{CatchUnwind, Either, Map, Ready, ready};
use std::convert::Infallible;
use std::panic::AssertUnwindSafe;
use std::task::{Context, Poll};

/// Default cap on a request body: a body with a 512-byte key and 16 limits
/// is well under 2 KiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 16 * 1024;

/// The API's routes over `app`, with bodies capped at `max_body_bytes`
/// (413 beyond) and JSON answers for unknown routes and methods. A panic in
/// a handler is answered 500 by [`CatchPanics`], which
/// [`serve_http`](crate::server::serve_http) wraps every router in.
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
        .with_state(app)
}

/// A router whose panics (in any route, fallback or extractor, when called
/// or when polled) are answered 500 `{"error":"internal error"}` rather
/// than dropping the connection.
///
/// Around the whole router, once, rather than as `Router::layer(CatchPanicLayer)`:
/// that layer wrapped every route in one more boxed service, cloned (an
/// allocation) for every request, and boxed every answer's body twice more
/// (tower-http's `UnsyncBoxBody`, then axum's `Body` around it).
#[derive(Clone, Debug)]
pub struct CatchPanics(pub Router);

/// What [`CatchPanics`] answers with: the router's future, or the answer to
/// a panic in the router's `call`.
pub type CatchPanicsFuture = Either<
    Map<CatchUnwind<AssertUnwindSafe<RouteFuture<Infallible>>>, fn(Caught) -> Answered>,
    Ready<Answered>,
>;

type Answered = Result<Response, Infallible>;
type Caught = std::thread::Result<Answered>;

impl<B> tower::Service<axum::http::Request<B>> for CatchPanics
where
    B: axum::body::HttpBody<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = CatchPanicsFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: axum::http::Request<B>) -> Self::Future {
        match std::panic::catch_unwind(AssertUnwindSafe(|| self.0.call(req))) {
            Ok(future) => Either::Left(
                AssertUnwindSafe(future)
                    .catch_unwind()
                    .map(answer_panic as fn(Caught) -> Answered),
            ),
            Err(panic) => Either::Right(ready(Ok(panic_response(panic)))),
        }
    }
}

fn answer_panic(polled: Caught) -> Answered {
    polled.unwrap_or_else(|panic| Ok(panic_response(panic)))
}

fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    use axum::response::IntoResponse;
    tracing::error!("a request handler panicked; answered 500");
    error::ApiError::new(
        axum::http::StatusCode::INTERNAL_SERVER_ERROR,
        "internal error",
    )
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::{Method, StatusCode};
    use std::sync::Arc;
    use tower::ServiceExt as _;

    /// The API's router with extra routes whose handler panics, when its
    /// future is polled or before it has one (in an extractor).
    fn panicking() -> CatchPanics {
        struct Boom;
        impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Boom {
            type Rejection = Infallible;
            async fn from_request_parts(
                _: &mut axum::http::request::Parts,
                _: &S,
            ) -> Result<Self, Infallible> {
                panic!("in an extractor")
            }
        }
        let extra = Router::new()
            .route(
                "/boom",
                get(|| async {
                    let boom = true;
                    if boom {
                        panic!("in a handler");
                    }
                    "unreachable"
                }),
            )
            .route("/boom-extractor", post(|_: Boom| async { "unreachable" }));
        let app = App::with_memory_store(
            Arc::new(slidelog_memory::MemoryStore::new()),
            crate::app::AppConfig::default(),
        );
        CatchPanics(router_with(app, DEFAULT_MAX_BODY_BYTES, extra))
    }

    async fn call(service: &CatchPanics, method: Method, path: &str, body: &str) -> Response {
        let request = axum::http::Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            .body(Body::from(body.to_owned()))
            .unwrap();
        service.clone().oneshot(request).await.unwrap()
    }

    async fn text(response: Response) -> String {
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX);
        String::from_utf8(bytes.await.unwrap().to_vec()).unwrap()
    }

    /// A panic anywhere is the 500 the route layer answered; the other
    /// answers (a check, 404, 405, 413) are the router's own.
    #[tokio::test]
    async fn panics_are_answered_500_and_everything_else_as_the_router_answers() {
        let service = panicking();
        for (method, path) in [(Method::GET, "/boom"), (Method::POST, "/boom-extractor")] {
            let response = call(&service, method, path, "").await;
            assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
            assert_eq!(response.headers()["content-type"], "application/json");
            assert_eq!(text(response).await, r#"{"error":"internal error"}"#);
        }
        let check = r#"{"key":"k","max":5,"window_ms":60000}"#;
        let response = call(&service, Method::POST, "/v1/check", check).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            response.headers()["ratelimit-policy"],
            "\"default\";q=5;w=60"
        );
        assert!(text(response).await.starts_with(r#"{"allowed":true,"#));
        let response = call(&service, Method::GET, "/nowhere", "").await;
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        let response = call(&service, Method::GET, "/v1/check", "").await;
        assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
        let big = format!(r#"{{"key":"{}"}}"#, "k".repeat(DEFAULT_MAX_BODY_BYTES));
        let response = call(&service, Method::POST, "/v1/check", &big).await;
        assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    }
}

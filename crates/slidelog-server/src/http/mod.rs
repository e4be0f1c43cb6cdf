//! The HTTP JSON API of docs/design.md §5 as an axum [`Router`].
//!
//! | route | what |
//! |---|---|
//! | `POST /v1/check` | decide and record: 200 admitted, 429 rejected, decision JSON; `{"checks": […]}` decides several keys all or nothing (`joint`) |
//! | `POST /v1/peek` | the same decision, recording nothing |
//! | `POST /v1/settle` | change a checked record's costs to the actual ones (docs/design.md §4.6) |
//! | `POST /v1/charge` | record usage without deciding |
//! | `GET /v1/keys` | admin: one bounded page of keys (`keys`) |
//! | `GET /v1/keys/{key}` | admin: one key's log, and its state under a policy (`keys`) |
//! | `DELETE /v1/keys/{key}` | admin: delete a key's log |
//! | `PUT`/`DELETE /v1/keys/{key}/block` | admin: block a key for a time, or lift it (docs/design.md §5.4) |
//! | `PUT`/`DELETE /v1/keys/{key}/override` | admin: other limits, allow or deny for a key, or remove them |
//! | `GET /healthz` | the process answers |
//! | `GET /readyz` | the store answers (503 while it does not) |
//! | `GET /metrics` | Prometheus text format |
//! | `GET /openapi.json` | the OpenAPI 3.1 document of every route (`openapi`) |
//!
//! Every route is an entry of one table, [`routes::ROUTES`]; admin
//! operations take [`crate::auth::AdminGuard`].

pub mod answer;
pub mod api;
pub mod body;
mod call;
pub mod control;
pub mod error;
pub mod headers;
pub mod joint;
pub mod keys;
pub mod openapi;
pub mod policy;
pub mod respond;
pub mod routes;
pub mod usage;

use crate::app::App;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::Method;
use axum::response::Response;
use axum::routing::future::RouteFuture;
use body::BodyCap;
use futures::FutureExt as _;
use futures::future::{BoxFuture, CatchUnwind, Either, Map, Ready, ready};
use std::convert::Infallible;
use std::panic::AssertUnwindSafe;
use std::task::{Context, Poll};

/// The check route's path (see [`Api`]).
const CHECK: &str = "/v1/check";

/// Default cap on a request body: a body with a 512-byte key and 16 limits
/// is well under 2 KiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 16 * 1024;

/// The API's routes over `app`, with bodies capped at `max_body_bytes`
/// (413 beyond) and JSON answers for unknown routes and methods. A panic in
/// a handler is answered 500 by [`Api`], which
/// [`serve_http`](crate::server::serve_http) serves every router as.
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
    let mut router = Router::new().merge(extra.layer(DefaultBodyLimit::max(max_body_bytes)));
    for route in routes::ROUTES {
        if let Some(handler) = routes::handler(route, cap) {
            router = router.route(route.path, handler);
        }
    }
    router
        .fallback(error::not_found)
        .method_not_allowed_fallback(error::method_not_allowed)
        .with_state(app)
}

/// The HTTP API as `serve` serves it: [`router_with`]'s routes, with
/// `POST /v1/check` called straight ([`Api`]) and panics caught.
pub fn service(app: App, max_body_bytes: usize, extra: Router<App>) -> Api {
    Api {
        check: Some((app.clone(), BodyCap(max_body_bytes))),
        router: router_with(app, max_body_bytes, extra),
        auth: None,
        peer: None,
    }
}

/// The service hyper calls for each request: a router whose panics (in
/// any route, fallback or extractor, when called or when polled) are
/// answered 500 `{"error":"internal error"}` rather than dropping the
/// connection, and, when built by [`service`], `POST /v1/check` answered
/// without the router.
///
/// Panics are caught around the whole router, once, rather than by
/// `Router::layer(CatchPanicLayer)`: that layer wrapped every route in one
/// more boxed service, cloned (an allocation) for every request, and boxed
/// every answer's body twice more (tower-http's `UnsyncBoxBody`, then
/// axum's `Body` around it).
///
/// `POST /v1/check`, nearly every request, goes straight to the handler
/// the router would call (the same `api::check` with the same app and
/// cap): the router would match its path, put the original URI, the
/// matched path and the (no) path parameters into the request's extensions
/// (a map and three boxes, read by nothing on this route), and clone the
/// route's boxed service. Any other method or path, `/v1/check/` or
/// `/v1/%63heck` included, goes to the router, which answers it as before.
#[derive(Clone, Debug)]
pub struct Api {
    router: Router,
    /// The app and body cap of the check route, when it is the API's.
    check: Option<(App, BodyCap)>,
    /// Client tokens (`--api-token-file`, `--metrics-token-file`), checked
    /// before any route. One pointer: hyper-util clones the service for
    /// every request, and a `None` here is then one null check.
    auth: Option<std::sync::Arc<crate::auth::Auth>>,
    /// The address of the connection this copy serves (set per
    /// connection by the server), handed to the router's requests as
    /// [`crate::auth::Peer`] for the admin guard.
    peer: Option<std::net::SocketAddr>,
}

impl Api {
    /// This API serving a connection from `peer`.
    #[must_use]
    pub fn for_peer(&self, peer: Option<std::net::SocketAddr>) -> Self {
        Self {
            peer,
            ..self.clone()
        }
    }

    /// The same API with its routes behind `auth`'s tokens ([`crate::auth`]).
    #[must_use]
    pub fn with_auth(mut self, auth: Option<crate::auth::Auth>) -> Self {
        self.auth = auth.map(std::sync::Arc::new);
        self
    }
}

/// A router alone, every request through it (with panics caught).
impl From<Router> for Api {
    fn from(router: Router) -> Self {
        Self {
            router,
            check: None,
            auth: None,
            peer: None,
        }
    }
}

/// What [`Api`] answers with: the router's future, the check handler's, or
/// the answer to a panic in `call`.
pub type ApiFuture = Either<
    Map<CatchUnwind<AssertUnwindSafe<RouteFuture<Infallible>>>, fn(Caught) -> Answered>,
    Either<
        Map<
            CatchUnwind<AssertUnwindSafe<BoxFuture<'static, Response>>>,
            fn(std::thread::Result<Response>) -> Answered,
        >,
        Ready<Answered>,
    >,
>;

type Answered = Result<Response, Infallible>;
type Caught = std::thread::Result<Answered>;

impl<B> tower::Service<axum::http::Request<B>> for Api
where
    B: axum::body::HttpBody<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = ApiFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: axum::http::Request<B>) -> Self::Future {
        if let Some(auth) = &self.auth
            && let Some(refused) = auth.refuse_http(req.uri().path(), req.headers())
        {
            return Either::Right(Either::Right(ready(Ok(refused))));
        }
        match std::panic::catch_unwind(AssertUnwindSafe(|| self.route(req))) {
            Ok(Either::Left(routed)) => Either::Left(
                AssertUnwindSafe(routed)
                    .catch_unwind()
                    .map(answer_panic as fn(Caught) -> Answered),
            ),
            Ok(Either::Right(check)) => Either::Right(Either::Left(
                AssertUnwindSafe(check)
                    .catch_unwind()
                    .map(answer_check as fn(std::thread::Result<Response>) -> Answered),
            )),
            Err(panic) => Either::Right(Either::Right(ready(Ok(panic_response(panic))))),
        }
    }
}

impl Api {
    fn route<B>(
        &mut self,
        mut req: axum::http::Request<B>,
    ) -> Either<RouteFuture<Infallible>, BoxFuture<'static, Response>>
    where
        B: axum::body::HttpBody<Data = axum::body::Bytes> + Send + 'static,
        B::Error: Into<axum::BoxError>,
    {
        // The router matches the path's bytes as they came (no decoding),
        // and the query is not part of the path.
        if let Some((app, cap)) = &self.check
            && req.method() == Method::POST
            && req.uri().path() == CHECK
        {
            // hyper's body as it is, not boxed into an axum `Body`.
            return Either::Right(Box::pin(api::check(app.clone(), req, *cap)));
        }
        // Only the router's requests carry the peer: the check above is
        // no admin operation, and the router allocates extensions anyway.
        if let Some(peer) = self.peer {
            req.extensions_mut().insert(crate::auth::Peer(peer));
        }
        Either::Left(tower::Service::call(&mut self.router, req))
    }
}

fn answer_panic(polled: Caught) -> Answered {
    polled.unwrap_or_else(|panic| Ok(panic_response(panic)))
}

fn answer_check(polled: std::thread::Result<Response>) -> Answered {
    Ok(polled.unwrap_or_else(panic_response))
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
    use axum::routing::{get, post};
    use std::sync::Arc;
    use tower::ServiceExt as _;

    /// The API's router with extra routes whose handler panics, when its
    /// future is polled or before it has one (in an extractor).
    fn panicking() -> Api {
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
        service(app, DEFAULT_MAX_BODY_BYTES, extra)
    }

    async fn call(service: &Api, method: Method, path: &str, body: &str) -> Response {
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
            assert_eq!(response.headers()["content-length"], "26");
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

    /// `POST /v1/check` called straight answers as through the router:
    /// the same status, header fields and body, admitted, rejected or
    /// refused; paths the router alone serves still reach it.
    #[tokio::test]
    async fn a_check_answers_straight_as_through_the_router() {
        // Both apps seal alike (one secret, one first nonce): their
        // receipts are the same bytes.
        let app = || {
            let key = slidelog::ReceiptKey::with_first_nonce(&[3; 32], 1).unwrap();
            App::with_memory_store(
                Arc::new(slidelog_memory::MemoryStore::new()),
                crate::app::AppConfig {
                    trust_client_time: true,
                    receipts: Some(Arc::new(key)),
                    ..Default::default()
                },
            )
        };
        let straight = service(app(), 64, Router::new());
        let routed = Api::from(router(app(), 64));
        assert!(routed.check.is_none() && straight.check.is_some());
        let check = r#"{"key":"k","max":1,"window_ms":60000,"now_ms":1000}"#;
        let requests = [
            (Method::POST, "/v1/check", check),
            (Method::POST, "/v1/check?x=1", check),
            (
                Method::POST,
                "/v1/check",
                r#"{"key":"k","max":0,"window_ms":1}"#,
            ),
            (Method::POST, "/v1/check", r#"{"key":"k","#),
            (Method::POST, "/v1/check", &"x".repeat(65)),
            (Method::POST, "/v1/check/", check),
            (Method::POST, "/v1/%63heck", check),
            (Method::PUT, "/v1/check", check),
            (Method::POST, "/v1/peek", check),
        ];
        for (method, path, body) in requests {
            let a = call(&straight, method.clone(), path, body).await;
            let b = call(&routed, method.clone(), path, body).await;
            assert_eq!(a.status(), b.status(), "{method} {path} {body}");
            assert_eq!(a.headers(), b.headers(), "{method} {path} {body}");
            assert_eq!(text(a).await, text(b).await, "{method} {path} {body}");
        }
        let wrong_type = |service: &Api| {
            let request = axum::http::Request::post("/v1/check")
                .header("content-type", "text/plain")
                .body(Body::from(check))
                .unwrap();
            service.clone().oneshot(request)
        };
        let (a, b) = (wrong_type(&straight).await, wrong_type(&routed).await);
        assert_eq!(a.unwrap().status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
        assert_eq!(b.unwrap().status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    }
}

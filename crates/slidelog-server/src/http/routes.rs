//! The one table of the HTTP API's routes: (method, path, operationId).
//! The router is built from it ([`super::router_with`] routes each entry
//! to [`handler`]'s handler for its operationId) and `/openapi.json`
//! documents exactly its entries (a test compares both ways), so a route
//! cannot be served undocumented or documented unserved.

use super::body::BodyCap;
use super::{api, keys, usage};
use crate::app::App;
use axum::extract::{Request, State};
use axum::routing::{MethodFilter, MethodRouter, on};

/// One route of the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// The HTTP method, upper case.
    pub method: &'static str,
    /// The path, with `{key}` for the key.
    pub path: &'static str,
    /// The operationId in `/openapi.json`.
    pub operation: &'static str,
}

const fn route(method: &'static str, path: &'static str, operation: &'static str) -> Route {
    Route {
        method,
        path,
        operation,
    }
}

/// Every route of the HTTP port, in the order `/openapi.json` lists them.
pub const ROUTES: &[Route] = &[
    route("POST", "/v1/check", "check"),
    route("POST", "/v1/peek", "peek"),
    route("POST", "/v1/settle", "settle"),
    route("POST", "/v1/charge", "charge"),
    route("GET", "/v1/keys", "listKeys"),
    route("GET", "/v1/keys/{key}", "getKey"),
    route("DELETE", "/v1/keys/{key}", "reset"),
    route("PUT", "/v1/keys/{key}/block", "putBlock"),
    route("DELETE", "/v1/keys/{key}/block", "deleteBlock"),
    route("PUT", "/v1/keys/{key}/override", "putOverride"),
    route("DELETE", "/v1/keys/{key}/override", "deleteOverride"),
    route("POST", "/json", "envoyJson"),
    route("GET", "/healthz", "healthz"),
    route("GET", "/readyz", "readyz"),
    route("GET", "/metrics", "metrics"),
    route("GET", "/openapi.json", "openapi"),
];

/// Routes of the table that another module serves: `/json` comes with the
/// Envoy crate's router (`router_with`'s `extra`).
pub const ROUTED_ELSEWHERE: &[&str] = &["envoyJson"];

/// Operations documented whose handlers are not in this build yet.
pub const AWAITING_HANDLERS: &[&str] =
    &["putBlock", "deleteBlock", "putOverride", "deleteOverride"];

/// The handler of `route`, or `None` for an operation served elsewhere
/// ([`ROUTED_ELSEWHERE`]) or awaiting its handler ([`AWAITING_HANDLERS`]).
pub fn handler(route: &Route, cap: BodyCap) -> Option<MethodRouter<App>> {
    let filter = match route.method {
        "GET" => MethodFilter::GET,
        "POST" => MethodFilter::POST,
        "PUT" => MethodFilter::PUT,
        "DELETE" => MethodFilter::DELETE,
        _ => return None,
    };
    let routed = match route.operation {
        "check" => on(filter, move |State(app): State<App>, req: Request| {
            api::check(app, req, cap)
        }),
        "peek" => on(filter, move |State(app): State<App>, req: Request| {
            api::peek(app, req, cap)
        }),
        "settle" => on(filter, move |State(app): State<App>, req: Request| {
            usage::settle(app, req, cap)
        }),
        "charge" => on(filter, move |State(app): State<App>, req: Request| {
            usage::charge(app, req, cap)
        }),
        "listKeys" => on(filter, keys::list),
        "getKey" => on(filter, keys::get),
        "reset" => on(filter, api::reset),
        "healthz" => on(filter, api::healthz),
        "readyz" => on(filter, api::readyz),
        "metrics" => on(filter, api::metrics),
        "openapi" => on(filter, super::openapi::document),
        _ => return None,
    };
    Some(routed)
}

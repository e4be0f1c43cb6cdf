//! The one table of the HTTP API's routes: (method, path, operationId).
//! The router is built from it ([`super::router_with`] routes each entry
//! to [`handler`]'s handler for its operationId) and `/openapi.json`
//! documents exactly its entries (a test compares both ways), so a route
//! cannot be served undocumented or documented unserved.

use super::body::BodyCap;
use super::{api, control, keys, usage};
use crate::app::App;
use crate::auth::AdminGuard;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, Request, State};
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

/// A key in the path, or why the path gives none.
type KeyPath = Result<Path<String>, PathRejection>;

/// Routes of the table that another module serves: `/json` comes with the
/// Envoy crate's router (`router_with`'s `extra`).
pub const ROUTED_ELSEWHERE: &[&str] = &["envoyJson"];

/// The handler of `route`, or `None` for an operation served elsewhere
/// ([`ROUTED_ELSEWHERE`]).
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
        "putBlock" => on(
            filter,
            move |g: AdminGuard, s: State<App>, k: KeyPath, req: Request| {
                control::put_block((g, s, k), req, cap)
            },
        ),
        "deleteBlock" => on(filter, control::delete_block),
        "putOverride" => on(
            filter,
            move |g: AdminGuard, s: State<App>, k: KeyPath, req: Request| {
                control::put_override((g, s, k), req, cap)
            },
        ),
        "deleteOverride" => on(filter, control::delete_override),
        "healthz" => on(filter, api::healthz),
        "readyz" => on(filter, api::readyz),
        "metrics" => on(filter, api::metrics),
        "openapi" => on(filter, super::openapi::document),
        _ => return None,
    };
    Some(routed)
}

#[cfg(test)]
mod tests {
    use super::super::openapi::DOCUMENT;
    use super::*;
    use std::collections::BTreeSet;

    /// (method, path, operationId) of every operation in the document.
    fn documented() -> BTreeSet<(String, String, String)> {
        let doc: serde_json::Value = serde_json::from_str(DOCUMENT).unwrap();
        assert_eq!(doc["openapi"], "3.1.0");
        let mut found = BTreeSet::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                if method == "parameters" {
                    continue;
                }
                let id = op["operationId"]
                    .as_str()
                    .expect("every operation has an operationId");
                found.insert((method.to_uppercase(), path.clone(), id.to_owned()));
            }
        }
        found
    }

    #[test]
    fn the_document_lists_exactly_the_route_table() {
        let table: BTreeSet<(String, String, String)> = ROUTES
            .iter()
            .map(|r| {
                (
                    r.method.to_owned(),
                    r.path.to_owned(),
                    r.operation.to_owned(),
                )
            })
            .collect();
        assert_eq!(table.len(), ROUTES.len(), "a route is in the table twice");
        let doc = documented();
        let missing: Vec<_> = table.difference(&doc).collect();
        let extra: Vec<_> = doc.difference(&table).collect();
        assert!(
            missing.is_empty(),
            "routes missing from /openapi.json: {missing:?}"
        );
        assert!(
            extra.is_empty(),
            "documented but not in the route table: {extra:?}"
        );
    }

    #[test]
    fn the_operations_of_the_api_have_their_names() {
        let ids: BTreeSet<String> = documented().into_iter().map(|(_, _, id)| id).collect();
        for id in [
            "check",
            "peek",
            "settle",
            "charge",
            "reset",
            "listKeys",
            "getKey",
            "putBlock",
            "deleteBlock",
            "putOverride",
            "deleteOverride",
        ] {
            assert!(ids.contains(id), "{id}");
        }
        assert_eq!(ids.len(), ROUTES.len(), "operationIds are unique");
    }

    /// Every `$ref` names a schema the document defines.
    #[test]
    fn every_reference_resolves() {
        let doc: serde_json::Value = serde_json::from_str(DOCUMENT).unwrap();
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        let text = DOCUMENT;
        for (at, _) in text.match_indices("#/components/schemas/") {
            let name: String = text[at + 21..].chars().take_while(|c| *c != '"').collect();
            assert!(schemas.contains_key(&name), "{name}");
        }
    }

    #[test]
    fn only_the_operations_served_elsewhere_have_no_handler_here() {
        let cap = BodyCap(1024);
        let without: Vec<&str> = ROUTES
            .iter()
            .filter(|r| handler(r, cap).is_none())
            .map(|r| r.operation)
            .collect();
        let expected: Vec<&str> = ROUTES
            .iter()
            .map(|r| r.operation)
            .filter(|op| ROUTED_ELSEWHERE.contains(op))
            .collect();
        assert_eq!(without, expected);
    }
}

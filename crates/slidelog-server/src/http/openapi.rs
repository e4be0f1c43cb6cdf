//! `GET /openapi.json`: the OpenAPI 3.1 document of every route of the HTTP
//! port (`openapi.json` beside this file, compiled in), with request and
//! response schemas and the error format. It documents exactly the entries
//! of [`super::routes::ROUTES`], which the router is built from (the
//! tests below compare both ways).

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

/// The document, as served.
pub const DOCUMENT: &str = include_str!("openapi.json");

/// `GET /openapi.json`.
pub async fn document() -> Response {
    let mut response = DOCUMENT.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::super::routes::{AWAITING_HANDLERS, ROUTED_ELSEWHERE, ROUTES};
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
    fn only_the_operations_served_elsewhere_or_awaited_have_no_handler_here() {
        let cap = super::super::body::BodyCap(1024);
        let without: Vec<&str> = ROUTES
            .iter()
            .filter(|r| super::super::routes::handler(r, cap).is_none())
            .map(|r| r.operation)
            .collect();
        let expected: Vec<&str> = ROUTES
            .iter()
            .map(|r| r.operation)
            .filter(|op| ROUTED_ELSEWHERE.contains(op) || AWAITING_HANDLERS.contains(op))
            .collect();
        assert_eq!(without, expected);
    }
}

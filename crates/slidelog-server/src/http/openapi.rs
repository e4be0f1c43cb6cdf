//! `GET /openapi.json`: the OpenAPI 3.1 document of every route of the HTTP
//! port (`openapi.json` beside this file, compiled in), with request and
//! response schemas and the error format. It documents exactly the entries
//! of the route table (`routes.rs`), which the router is built from (that
//! file's tests compare both ways).

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

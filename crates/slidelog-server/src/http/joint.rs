//! Joint requests of `POST /v1/check` and `POST /v1/peek`: several keys,
//! each with its own limits, decided all or nothing (docs/design.md §1,
//! "One request, several keys"; §5).
//!
//! ```text
//! {"checks": [{"key": "user:alice", "max": 10, "window_ms": 60000},
//!             {"key": "path:/login", "limits": [{"name": "login", "max": 3, "window_ms": 60000}]}]}
//! → 429 {"allowed": false,
//!        "checks": [{"allowed": true, …}, {"allowed": false, …, "limits": […]}],
//!        "refused_by": {"check": 1, "limit": 0}}
//! ```
//!
//! Each entry of `checks` is exactly the body of a single request (without
//! `now_ms`, which the whole request gives once, beside `checks`). The
//! answer has one decision per distinct key, in the order the keys first
//! come: a key given twice is one check whose costs are added (its limits
//! the union of both entries' limits), answered at its first position;
//! `refused_by` indexes that list (absent when admitted). Status, `Retry-After`
//! and the RateLimit header fields are those of the deciding check
//! ([`JointDecision::deciding`]); each admitted check carries its own
//! receipt, settled and charged as a single check's.

use super::answer::Answer;
use super::body::{DecisionBody, Text, parse};
use super::error::ApiError;
use crate::app::App;
use axum::body::Body;
use axum::http::header::{CONTENT_TYPE, HeaderValue};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use slidelog::{BoundError, Checks, JointDecision, Mode, RefusedBy, Request};

/// A body of `/v1/check` or `/v1/peek`: one request, or several keys.
pub enum Parsed<'a> {
    /// Today's body: one key.
    Single(DecisionBody<Text<'a>>),
    /// `{"checks": […]}`.
    Joint(JointBody<Text<'a>>),
}

/// The body of a joint request.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JointBody<S = String> {
    /// One entry per key, each the body of a single request.
    pub checks: Vec<DecisionBody<S>>,
    /// The caller's time in Unix ms, for every check; only with
    /// `--trust-client-time`.
    #[serde(default)]
    pub now_ms: Option<u64>,
}

/// Whether a body has a top-level `checks` (every other field ignored).
#[derive(serde::Deserialize)]
struct Shape {
    #[serde(default)]
    checks: Option<serde::de::IgnoredAny>,
}

/// Parses a decision's body: a single request (tried first: nearly every
/// request, at today's cost), else a joint one when it has `checks`.
pub fn parse_body(bytes: &[u8]) -> Result<Parsed<'_>, ApiError> {
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
        && let Ok(single) = serde_json::from_slice(bytes)
    {
        return Ok(Parsed::Single(single));
    }
    let joint = serde_json::from_slice::<Shape>(bytes).is_ok_and(|s| s.checks.is_some());
    if joint {
        parse(bytes).map(Parsed::Joint)
    } else {
        parse(bytes).map(Parsed::Single)
    }
}

impl<S: AsRef<str>> JointBody<S> {
    /// Validates every entry, naming the entry at fault (`checks[2].…`),
    /// and the number of entries against `--max-descriptors`.
    pub fn to_checks(&self, bounds: &slidelog::Bounds) -> Result<Checks, ApiError> {
        let got = self.checks.len();
        if got > bounds.max_descriptors {
            let e = BoundError::Checks {
                got,
                bound: bounds.max_descriptors,
            };
            return Err(ApiError::bad_request(e.field(), e.to_string()));
        }
        let mut requests = Vec::with_capacity(got);
        for (i, entry) in self.checks.iter().enumerate() {
            if entry.now_ms.is_some() {
                return Err(ApiError::bad_request(
                    "now_ms",
                    format!("checks[{i}].now_ms: give now_ms once, beside checks, for every check"),
                ));
            }
            let request = entry.to_request().map_err(|e| in_entry(i, e))?;
            // The operator's bounds here, so that the answer names the entry.
            bounds
                .check(&request)
                .map_err(|e| in_entry(i, ApiError::bad_request(e.field(), e.to_string())))?;
            requests.push(request);
        }
        Checks::new(requests).map_err(|e| ApiError::bad_request(e.field(), e.to_string()))
    }
}

/// `error` of entry `i`, its message naming the entry: `checks[2].max …`
/// where the message starts with the field, `checks[2]: …` otherwise.
fn in_entry(i: usize, mut error: ApiError) -> ApiError {
    const FIELDS: [&str; 8] = [
        "key",
        "max",
        "window_ms",
        "granularity_ms",
        "cost",
        "limits",
        "now_ms",
        "receipt",
    ];
    let head = error
        .message
        .split(['[', '.', ' ', ':'])
        .next()
        .unwrap_or("");
    error.message = if FIELDS.contains(&head) {
        format!("checks[{i}].{}", error.message)
    } else {
        format!("checks[{i}]: {}", error.message)
    };
    error
}

/// Decides a joint body and answers it.
pub async fn decide(
    app: &App,
    body: JointBody<Text<'_>>,
    mode: Mode,
) -> Result<Response, ApiError> {
    let now = super::call::client_now(app, body.now_ms)?;
    if app.config().require_policy {
        // Each check brings its own limits: not under --require-policy.
        return Err(super::policy::refused("limits"));
    }
    let checks = body.to_checks(app.limiter().bounds())?;
    drop(body);
    let joint = app
        .limiter()
        .decide_all_at(&checks, mode, now)
        .await
        .map_err(|e| super::call::decision_error(app, e))?;
    Ok(respond(&joint, &checks, app.limiter().receipt_key()))
}

/// The body of a joint answer.
#[derive(Debug, serde::Serialize)]
pub struct JointAnswer {
    /// True only when every check admits.
    pub allowed: bool,
    /// Present and true when the failure policy answered (docs/design.md §6).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub degraded: bool,
    /// One answer per distinct key, in order, each as a single check's.
    pub checks: Vec<Answer>,
    /// The refusing check and its deciding limit; absent when admitted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused_by: Option<RefusedBy>,
}

impl JointAnswer {
    /// The answer of `joint`, each admitted check with the receipt of its
    /// record.
    pub fn new(joint: &JointDecision, checks: &Checks, receipts: &slidelog::ReceiptKey) -> Self {
        let answers = joint
            .checks
            .iter()
            .zip(checks.as_slice())
            .map(|(each, request): (_, &Request)| Answer::new(each).with_receipt(request, receipts))
            .collect();
        Self {
            allowed: joint.allowed,
            degraded: joint.degraded(),
            checks: answers,
            refused_by: joint.refused_by,
        }
    }
}

/// 200 admitted / 429 refused, the [`JointAnswer`], and the header fields
/// of the deciding check.
fn respond(joint: &JointDecision, checks: &Checks, receipts: &slidelog::ReceiptKey) -> Response {
    let answer = JointAnswer::new(joint, checks, receipts);
    // Serializing plain structs of numbers and strings cannot fail.
    let body = serde_json::to_vec(&answer).unwrap_or_default();
    let mut response = Response::new(Body::from(body));
    if !joint.allowed {
        *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
    }
    let headers: &mut HeaderMap = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    slidelog::headers::insert_each(headers, joint.deciding());
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn joint(json: &str) -> Result<Checks, ApiError> {
        match parse_body(json.as_bytes())? {
            Parsed::Joint(body) => body.to_checks(&slidelog::Bounds::SERVICE),
            Parsed::Single(_) => panic!("{json} read as a single request"),
        }
    }

    #[test]
    fn a_single_body_is_read_as_today() {
        let body = r#"{"key":"k","max":1,"window_ms":1000}"#;
        assert!(matches!(parse_body(body.as_bytes()), Ok(Parsed::Single(_))));
        let e = parse_body(br#"{"key":"k","max":1,"window_ms":1000,"cots":1}"#)
            .err()
            .unwrap();
        assert!(e.message.contains("unknown field `cots`"), "{e:?}");
    }

    #[test]
    fn entries_are_named_by_position() {
        let cases = [
            (
                r#"{"checks":[{"key":"a","max":1,"window_ms":1},{"key":"b","max":1,"window_ms":1},{"key":"c","limits":[{"max":0,"window_ms":1}]}]}"#,
                "max",
                "checks[2].limits[0].max must be between 1 and 10000000, got 0",
            ),
            (
                r#"{"checks":[{"key":"a","max":"x","window_ms":1}]}"#,
                "max",
                "checks[0].max: invalid type",
            ),
            (
                r#"{"checks":[{"key":"a","max":1,"window_ms":1,"cots":1}]}"#,
                "body",
                "checks[0].cots: unknown field `cots`",
            ),
            (
                r#"{"checks":[{"key":"a","max":1}]}"#,
                "window_ms",
                "checks[0]: missing field `window_ms`",
            ),
            (r#"{"checks":[]}"#, "checks", "checks must hold between 1"),
            (
                r#"{"checks":[{"key":"a","max":1,"window_ms":1,"now_ms":5}]}"#,
                "now_ms",
                "checks[0].now_ms: give now_ms once",
            ),
        ];
        for (json, field, says) in cases {
            let e = joint(json).unwrap_err();
            assert_eq!(e.field, Some(field), "{json}: {e:?}");
            assert!(e.message.starts_with(says), "{json}: {e:?}");
        }
    }

    #[test]
    fn too_many_entries_name_checks_and_the_flag() {
        let one = r#"{"key":"k","max":1,"window_ms":1000}"#;
        let json = format!(r#"{{"checks":[{}]}}"#, vec![one; 65].join(","));
        let e = joint(&json).unwrap_err();
        assert_eq!(e.field, Some("checks"));
        assert!(e.message.contains("--max-descriptors"), "{e:?}");
    }

    /// Fail-open: every check degraded, marked so at the top too, and no
    /// `RateLimit` field (the store said nothing about what is left).
    #[test]
    fn a_degraded_answer_is_marked_and_claims_no_counts() {
        let checks = joint(
            r#"{"checks":[{"key":"a","max":5,"window_ms":1000},{"key":"b","max":5,"window_ms":1000}]}"#,
        )
        .unwrap();
        let error = slidelog::StoreError::Timeout(std::time::Duration::from_millis(100));
        let joint = slidelog::FailurePolicy::FailOpen
            .answer_all(&checks, error)
            .unwrap();
        let key = slidelog::ReceiptKey::with_first_nonce(&[7; 32], 1).unwrap();
        let response = respond(&joint, &checks, &key);
        assert_eq!(response.status(), StatusCode::OK);
        assert!(response.headers().get("ratelimit").is_none());
        assert!(response.headers().get("ratelimit-policy").is_some());
        let body = serde_json::to_value(JointAnswer::new(&joint, &checks, &key)).unwrap();
        assert_eq!(body["degraded"], true);
        assert_eq!(body["checks"][1]["degraded"], true);
        assert!(body["checks"][0].get("receipt").is_none(), "{body}");
    }

    #[test]
    fn a_key_given_twice_is_one_check_with_its_costs_added() {
        let checks = joint(
            r#"{"checks":[{"key":"a","max":5,"window_ms":1000,"cost":2},{"key":"b","max":5,"window_ms":1000},{"key":"a","max":5,"window_ms":1000,"cost":3}]}"#,
        )
        .unwrap();
        assert_eq!(checks.len(), 2);
        assert_eq!(checks.as_slice()[0].costs(), [5]);
    }
}

//! `POST /json`: the `RateLimitRequest` as JSON, answered with the
//! `RateLimitResponse` as JSON, as the reference service offers.
//!
//! The JSON is protobuf's canonical JSON mapping: field names in lowerCamelCase
//! (snake_case accepted on input), enums by name, 64-bit integers as numbers
//! or strings, durations as `"1.500s"`, default values omitted from the
//! answer. A field the message does not have is refused, naming it, as
//! `/v1/check` refuses one. The status is 200 for `OK`, 429 for `OVER_LIMIT`,
//! 400 for a bad request and 503 when the store failed under fail-closed; errors are
//! `{"error": "…"}`.
//!
//! ```text
//! POST /json
//! {"domain": "api", "descriptors": [{"entries": [{"key": "user", "value": "alice"}]}]}
//!
//! 200 {"overallCode": "OK", "statuses": [{"code": "OK",
//!      "currentLimit": {"requestsPerUnit": 10, "unit": "MINUTE"},
//!      "limitRemaining": 9, "durationUntilReset": "60s"}]}
//! ```

use crate::proto::{
    RateLimitDescriptor, RateLimitRequest, RateLimitResponse, RateLimitUnit,
    rate_limit_descriptor::{Entry, RateLimitOverride},
    rate_limit_response::{Code, rate_limit::Unit as PbUnit},
};
use crate::service::{RateLimiter, ServiceError};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Json, Router, routing::post};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// Builds a router with `POST /json`, to merge into the HTTP server (of any state
/// type: the limiter is captured, not taken from the state).
pub fn router<S: Clone + Send + Sync + 'static>(limiter: Arc<RateLimiter>) -> Router<S> {
    Router::new().route(
        "/json",
        post(move |body: Result<Bytes, BytesRejection>| handle(limiter, body)),
    )
}

async fn handle(limiter: Arc<RateLimiter>, body: Result<Bytes, BytesRejection>) -> Response {
    // A body that cannot be read (above the router's body limit: 413) is
    // answered as every error is, `{"error": "…"}`, not axum's plain text.
    let body = match body {
        Ok(body) => body,
        Err(rejection) => return error(rejection.status(), rejection.body_text()),
    };
    let request = match parse_request(&body) {
        Ok(r) => r,
        Err(message) => return error(StatusCode::BAD_REQUEST, message),
    };
    match limiter.should_rate_limit(&request).await {
        Ok(response) => {
            let status = if response.overall_code == Code::OverLimit as i32 {
                StatusCode::TOO_MANY_REQUESTS
            } else {
                StatusCode::OK
            };
            (status, Json(response_to_json(&response))).into_response()
        }
        Err(e @ ServiceError::InvalidArgument(_)) => error(StatusCode::BAD_REQUEST, e.to_string()),
        Err(e @ ServiceError::Unavailable(_)) => {
            error(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
        }
    }
}

fn error(status: StatusCode, message: String) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}

/// Parses the JSON form of a `RateLimitRequest`.
pub fn parse_request(body: &[u8]) -> Result<RateLimitRequest, String> {
    let req: JsonRequest =
        serde_json::from_slice(body).map_err(|e| format!("invalid JSON request: {e}"))?;
    let hits_addend = match req.hits_addend {
        None => 0,
        Some(n) => {
            let n = n.get("hits_addend")?;
            u32::try_from(n).map_err(|_| format!("hits_addend must be at most {}", u32::MAX))?
        }
    };
    let descriptors = req
        .descriptors
        .into_iter()
        .map(|d| {
            Ok(RateLimitDescriptor {
                entries: d
                    .entries
                    .into_iter()
                    .map(|e| Entry {
                        key: e.key,
                        value: e.value,
                    })
                    .collect(),
                limit: d
                    .limit
                    .map(|l| -> Result<_, String> {
                        Ok(RateLimitOverride {
                            requests_per_unit: u32::try_from(
                                l.requests_per_unit
                                    .map(|n| n.get("requests_per_unit"))
                                    .transpose()?
                                    .unwrap_or(0),
                            )
                            .map_err(|_| "requests_per_unit is too large".to_owned())?,
                            unit: l.unit.map(parse_unit).transpose()?.unwrap_or(0),
                        })
                    })
                    .transpose()?,
                hits_addend: d.hits_addend.map(|n| n.get("hits_addend")).transpose()?,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(RateLimitRequest {
        domain: req.domain,
        descriptors,
        hits_addend,
    })
}

fn parse_unit(v: Value) -> Result<i32, String> {
    match &v {
        Value::String(s) => RateLimitUnit::from_str_name(&s.to_ascii_uppercase())
            .map(|u| u as i32)
            .ok_or_else(|| {
                format!("unknown unit {s:?}: use SECOND, MINUTE, HOUR, DAY, MONTH or YEAR")
            }),
        Value::Number(n) => n
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .ok_or_else(|| format!("unknown unit {n}")),
        _ => Err(format!("unit must be a name or a number, got {v}")),
    }
}

/// Returns the JSON form of a `RateLimitResponse` (protobuf's JSON mapping).
pub fn response_to_json(r: &RateLimitResponse) -> Value {
    let code_name = |c: i32| Code::try_from(c).unwrap_or(Code::Unknown).as_str_name();
    let mut out = Map::new();
    out.insert("overallCode".into(), code_name(r.overall_code).into());
    let statuses: Vec<Value> = r
        .statuses
        .iter()
        .map(|s| {
            let mut m = Map::new();
            m.insert("code".into(), code_name(s.code).into());
            if let Some(l) = &s.current_limit {
                let mut lm = Map::new();
                if !l.name.is_empty() {
                    lm.insert("name".into(), l.name.clone().into());
                }
                if l.requests_per_unit != 0 {
                    lm.insert("requestsPerUnit".into(), l.requests_per_unit.into());
                }
                let unit = PbUnit::try_from(l.unit).unwrap_or(PbUnit::Unknown);
                lm.insert("unit".into(), unit.as_str_name().into());
                m.insert("currentLimit".into(), Value::Object(lm));
            }
            if s.limit_remaining != 0 {
                m.insert("limitRemaining".into(), s.limit_remaining.into());
            }
            if let Some(d) = &s.duration_until_reset {
                m.insert("durationUntilReset".into(), duration_json(d).into());
            }
            Value::Object(m)
        })
        .collect();
    if !statuses.is_empty() {
        out.insert("statuses".into(), Value::Array(statuses));
    }
    if !r.response_headers_to_add.is_empty() {
        let headers: Vec<Value> = r
            .response_headers_to_add
            .iter()
            .map(|h| json!({ "key": h.key, "value": h.value }))
            .collect();
        out.insert("responseHeadersToAdd".into(), Value::Array(headers));
    }
    Value::Object(out)
}

/// Formats a duration as protobuf's JSON does: `"12s"`, `"1.500s"`.
fn duration_json(d: &prost_types::Duration) -> String {
    if d.nanos == 0 {
        format!("{}s", d.seconds)
    } else if d.nanos % 1_000_000 == 0 {
        format!("{}.{:03}s", d.seconds, d.nanos / 1_000_000)
    } else {
        format!("{}.{:09}s", d.seconds, d.nanos)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonRequest {
    #[serde(default)]
    domain: String,
    #[serde(default)]
    descriptors: Vec<JsonDescriptor>,
    #[serde(default, alias = "hitsAddend")]
    hits_addend: Option<JsonU64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonDescriptor {
    #[serde(default)]
    entries: Vec<JsonEntry>,
    #[serde(default)]
    limit: Option<JsonOverride>,
    #[serde(default, alias = "hitsAddend")]
    hits_addend: Option<JsonU64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonEntry {
    #[serde(default)]
    key: String,
    #[serde(default)]
    value: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonOverride {
    #[serde(default, alias = "requestsPerUnit")]
    requests_per_unit: Option<JsonU64>,
    #[serde(default)]
    unit: Option<Value>,
}

/// An integer as protobuf's JSON mapping writes it: a number or a string.
#[derive(Deserialize)]
#[serde(untagged)]
enum JsonU64 {
    Number(u64),
    Text(String),
}

impl JsonU64 {
    fn get(self, field: &str) -> Result<u64, String> {
        match self {
            JsonU64::Number(n) => Ok(n),
            JsonU64::Text(s) => s
                .parse()
                .map_err(|_| format!("{field} must be a non-negative integer, got {s:?}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_accept_camel_and_snake_case_and_string_integers() {
        let r = parse_request(
            br#"{"domain":"d","hitsAddend":3,"descriptors":[{"entries":[{"key":"k","value":"v"}],
                "hits_addend":"5","limit":{"requestsPerUnit":7,"unit":"minute"}}]}"#,
        )
        .unwrap();
        assert_eq!(r.hits_addend, 3);
        assert_eq!(r.descriptors[0].hits_addend, Some(5));
        let l = r.descriptors[0].limit.unwrap();
        assert_eq!(
            (l.requests_per_unit, l.unit),
            (7, RateLimitUnit::Minute as i32)
        );
        assert!(parse_request(b"{").unwrap_err().contains("invalid JSON"));
        assert!(
            parse_request(br#"{"hits_addend":"x"}"#)
                .unwrap_err()
                .contains("hits_addend")
        );
        let err = parse_request(
            br#"{"domain":"d","descriptors":[{"entries":[{"key":"k","valeu":"v"}]}]}"#,
        )
        .unwrap_err();
        assert!(err.contains("unknown field `valeu`"), "{err}");
        let err = parse_request(br#"{"domian":"d"}"#).unwrap_err();
        assert!(err.contains("unknown field `domian`"), "{err}");
    }

    #[test]
    fn durations_use_protobuf_json_form() {
        let d = |seconds, nanos| prost_types::Duration { seconds, nanos };
        assert_eq!(duration_json(&d(60, 0)), "60s");
        assert_eq!(duration_json(&d(1, 500_000_000)), "1.500s");
        assert_eq!(duration_json(&d(0, 1)), "0.000000001s");
    }
}

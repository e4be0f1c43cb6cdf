//! The JSON body of `POST /v1/check` and `POST /v1/peek`, and the extractor
//! that reads it: every failure becomes a 4xx `{"error": "…"}` naming the
//! field and its bound, and nothing reaches the store before the whole body
//! has been validated.
//!
//! Unknown fields are refused (`deny_unknown_fields`): a misspelt field such as
//! `"cots": 5` or `"window": 60000` would otherwise be dropped silently and
//! the request decided under a cost or limit the caller did not mean, which
//! is exactly the kind of silent mistake a rate limiter must not make.
//!
//! A check or a peek reads its body as [`DecisionBody<Text>`]: the key and
//! the limits' names borrowed from the request's bytes (copied only when
//! they hold JSON escapes), and the body parsed without serde's path
//! tracking, which copies every field name; only a body that fails is
//! parsed again with it, so that the answer names the field at fault.

use super::error::ApiError;
use axum::body::{Bytes, HttpBody};
use axum::extract::Request as HttpRequest;
use axum::http::{StatusCode, header};
use bytes::BytesMut;
use slidelog::{InputError, Limit, Request};
use smallvec::{SmallVec, smallvec};
use std::borrow::Cow;

/// Largest `now_ms` accepted: 2^53 - 1, the largest integer that a double
/// (a Redis sorted-set score) holds exactly; the one bound of every store.
pub use slidelog::store::MAX_NOW_MS;

/// The request body of a check or a peek (and, with `receipt`, of a
/// settle or a charge). `S` is how its strings are held: owned
/// (`String`, the default), or borrowed from the body's bytes ([`Text`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionBody<S = String> {
    /// The identity decided on, 1 to 512 bytes.
    pub key: S,
    /// Units per window (1 to 10,000,000); with `window_ms`, in place of `limits`.
    #[serde(default)]
    pub max: Option<u64>,
    /// Window in ms (1 to 366 days); with `max`.
    #[serde(default)]
    pub window_ms: Option<u64>,
    /// With `max` and `window_ms`: records count at their time rounded up
    /// to a multiple of this (1 to `window_ms`, dividing it; default 1,
    /// exact), docs/design.md §1.1.
    #[serde(default)]
    pub granularity_ms: Option<u64>,
    /// Units this request consumes, 1 to the smallest `max`; default 1. With
    /// `limits`, the cost of every entry that gives none of its own.
    #[serde(default)]
    pub cost: Option<u64>,
    /// 1 to 16 limits that all apply, in place of `max`/`window_ms`.
    #[serde(default = "none")]
    pub limits: Option<Vec<LimitBody<S>>>,
    /// The caller's time in Unix ms; only with `--trust-client-time`.
    #[serde(default)]
    pub now_ms: Option<u64>,
    /// `POST /v1/settle` only: the receipt a check answered (docs/design.md §4.6).
    #[serde(default = "none")]
    pub receipt: Option<S>,
    /// The name of an operator's policy (`serve --policies`) whose limits
    /// apply, in place of `max`/`window_ms`/`limits`.
    #[serde(default = "none")]
    pub policy: Option<S>,
    /// With `policy`: a cost per limit, by the policy's limit names
    /// (`{"tokens": 4000}`); a limit it does not name costs `cost`.
    #[serde(default)]
    pub costs: Option<std::collections::BTreeMap<String, u64>>,
    /// With `max`/`window_ms`: the key stays refused this long after the
    /// limit refuses it (docs/design.md §5.4); 0 to 366 days, default 0.
    #[serde(default)]
    pub block_ms: Option<u64>,
}

/// The default of an optional field (`#[serde(default)]` would ask `S:
/// Default`).
fn none<T>() -> Option<T> {
    None
}

/// One entry of `limits`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitBody<S = String> {
    /// The limit's name (`requests`, `tokens`): 1 to 32 bytes of ASCII
    /// letters, digits, `_`, `-`, `.`, starting with a letter, unique within
    /// the request. The answer's `limits` and the RateLimit header fields
    /// report the limit by it.
    #[serde(default = "none")]
    pub name: Option<S>,
    /// Units per window.
    pub max: u64,
    /// Window in ms.
    pub window_ms: u64,
    /// Records count at their time rounded up to a multiple of this (1 to
    /// `window_ms`, dividing it; default 1, exact), docs/design.md §1.1.
    #[serde(default)]
    pub granularity_ms: Option<u64>,
    /// This limit's own cost (1 to its `max`): each limit may count its own
    /// unit, as 1 request and 4,000 tokens. Default: the request's `cost`.
    #[serde(default)]
    pub cost: Option<u64>,
    /// The key stays refused this long after this limit refuses it
    /// (docs/design.md §5.4); 0 to 366 days, default 0.
    #[serde(default)]
    pub block_ms: Option<u64>,
}

/// A string of a body, borrowed from its bytes unless it holds escapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Text<'a>(pub Cow<'a, str>);

impl AsRef<str> for Text<'_> {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> serde::Deserialize<'de> for Text<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Text<'de>;
            // As `String` says it, so that an answer reads the same.
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: serde::de::Error>(
                self,
                v: &'de str,
            ) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_string(Visitor)
    }
}

impl<S: AsRef<str>> DecisionBody<S> {
    /// Validates the body into a request (every bound of docs/design.md §1),
    /// naming the field at fault.
    pub fn to_request(&self) -> Result<Request, ApiError> {
        self.to_request_under(None)
    }

    /// [`to_request`](Self::to_request) with the limits of the policy the
    /// body named (`policy`, resolved by the caller: `http::policy`).
    pub fn to_request_under(&self, policy: Option<&[Limit]>) -> Result<Request, ApiError> {
        if self.receipt.is_some() {
            return Err(ApiError::bad_request(
                "receipt",
                "receipt is for POST /v1/settle; a check or a peek takes none",
            ));
        }
        let limits = self.limits_under(policy)?;
        if let Some(costs) = self.named_costs(&limits)? {
            return Request::with_costs_from_slices(self.key.as_ref(), &limits, &costs)
                .map_err(|e| ApiError::bad_request("costs", format!("costs: {e}")));
        }
        let cost = self.cost.unwrap_or(1);
        let own_costs = self
            .limits
            .as_ref()
            .filter(|entries| entries.iter().any(|l| l.cost.is_some()));
        match own_costs {
            // One cost per limit: an entry without its own takes `cost`.
            Some(entries) => {
                let costs: BodyList<u64> = entries.iter().map(|l| l.cost.unwrap_or(cost)).collect();
                Request::with_costs_from_slices(self.key.as_ref(), &limits, &costs)
                    .map_err(|e| self.cost_error(e))
            }
            // Copied straight from the body into the request: no owned key
            // or limit list in between (measured: BENCHMARKS.md).
            None => Request::from_slices(self.key.as_ref(), &limits, cost).map_err(input_error),
        }
    }

    /// Validates the body of a settle or a charge into a usage request
    /// ([`Request::usage`]): costs 0 allowed, above a limit's max allowed.
    /// A settle must say its actual cost: `cost`, or one per entry.
    pub fn to_usage_request(&self, settle: bool) -> Result<Request, ApiError> {
        self.to_usage_request_under(settle, None)
    }

    /// [`to_usage_request`](Self::to_usage_request) under the limits of the
    /// policy the body named.
    pub fn to_usage_request_under(
        &self,
        settle: bool,
        policy: Option<&[Limit]>,
    ) -> Result<Request, ApiError> {
        let limits = self.limits_under(policy)?;
        let entries = self.limits.as_deref().unwrap_or_default();
        let own = entries.iter().any(|l| l.cost.is_some());
        let every_own = !entries.is_empty() && entries.iter().all(|l| l.cost.is_some());
        let named = self.named_costs(&limits)?;
        if settle && self.cost.is_none() && !every_own && named.is_none() {
            return Err(ApiError::bad_request(
                "cost",
                "a settle needs the actual cost: `cost`, or a `cost` in every entry of `limits`",
            ));
        }
        if !settle && self.receipt.is_some() {
            return Err(ApiError::bad_request(
                "receipt",
                "receipt is for POST /v1/settle; a charge takes none",
            ));
        }
        let cost = self.cost.unwrap_or(1);
        let costs: Vec<u64> = if let Some(named) = named {
            named.into_vec()
        } else if own {
            entries.iter().map(|l| l.cost.unwrap_or(cost)).collect()
        } else {
            vec![cost]
        };
        Request::usage(self.key.as_ref(), limits.into_vec(), costs).map_err(|e| self.cost_error(e))
    }

    /// The costs of `costs` (by name) for each of `limits`, the others at
    /// `cost`; `None` without `costs`. Only a request naming a policy takes
    /// them (a body's own limits carry their costs), and every name must be
    /// one of the policy's limits.
    fn named_costs(&self, limits: &[Limit]) -> Result<Option<BodyList<u64>>, ApiError> {
        let Some(costs) = &self.costs else {
            return Ok(None);
        };
        if self.policy.is_none() {
            return Err(ApiError::bad_request(
                "costs",
                "costs (a cost per limit name) is for a request naming a policy; \
                 with limits, give each entry its own cost",
            ));
        }
        if let Some(unknown) = costs
            .keys()
            .find(|n| !limits.iter().any(|l| l.name() == Some(n.as_str())))
        {
            let names: Vec<&str> = limits.iter().filter_map(Limit::name).collect();
            return Err(ApiError::bad_request(
                "costs",
                format!(
                    "costs names {unknown:?}, no limit of the policy (its limits: {})",
                    names.join(", ")
                ),
            ));
        }
        let cost = self.cost.unwrap_or(1);
        Ok(Some(
            limits
                .iter()
                .map(|l| l.name().and_then(|n| costs.get(n)).copied().unwrap_or(cost))
                .collect(),
        ))
    }

    /// Answers `error`, naming the top-level `cost` where the cost at fault
    /// is that one (an entry of `limits` that gives none of its own takes
    /// it; without `limits`, the one cost is it), rather than the entry.
    fn cost_error(&self, error: InputError) -> ApiError {
        let entries = self.limits.as_deref().unwrap_or_default();
        let top_level = |index: usize| entries.get(index).is_none_or(|l| l.cost.is_none());
        match error {
            InputError::UsageCost { index, got } if top_level(index) => ApiError::bad_request(
                "cost",
                format!("cost must be between 0 and 10000000 for a settle or a charge, got {got}"),
            ),
            InputError::LimitCost { index, got, max } if top_level(index) => ApiError::bad_request(
                "cost",
                format!(
                    "cost must be between 1 and {max} (the max of limits[{index}], which \
                         gives no cost of its own), got {got}"
                ),
            ),
            error => input_error(error),
        }
    }

    /// The limits of the policy the body names (`policy`: the service's
    /// lookup of it), `None` when it names none; refused beside limits of
    /// its own, and in a joint decision's checks (no policy looked up).
    fn policy_limits(&self, policy: Option<&[Limit]>) -> Result<Option<BodyList<Limit>>, ApiError> {
        match (policy, &self.policy) {
            (Some(_), _)
                if self.limits.is_some() || self.max.is_some() || self.window_ms.is_some() =>
            {
                Err(ApiError::bad_request(
                    "limits",
                    "give either policy, or limits (max and window_ms), not both",
                ))
            }
            (Some(limits), _) => Ok(Some(limits.iter().cloned().collect())),
            (None, Some(_)) => Err(ApiError::bad_request(
                "policy",
                "policy is not taken in the checks of a joint decision: give each check its limits",
            )),
            (None, None) => Ok(None),
        }
    }

    /// Validates the limits: `max` and `window_ms`, or `limits`, never both.
    fn limits_under(&self, policy: Option<&[Limit]>) -> Result<BodyList<Limit>, ApiError> {
        if let Some(limits) = self.policy_limits(policy)? {
            return Ok(limits);
        }
        if self.limits.is_some() && self.granularity_ms.is_some() {
            return Err(ApiError::bad_request(
                "granularity_ms",
                "with limits, give each limit its own granularity_ms",
            ));
        }
        match (&self.limits, self.max, self.window_ms) {
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => Err(ApiError::bad_request(
                "limits",
                "give either max and window_ms, or limits, not both",
            )),
            (Some(_), None, None) if self.block_ms.is_some() => Err(ApiError::bad_request(
                "block_ms",
                "with `limits`, give block_ms inside each limit (limits[].block_ms)",
            )),
            (Some(limits), None, None) => limits
                .iter()
                .enumerate()
                .map(|(i, l)| {
                    let limit = Limit::new(l.max, l.window_ms)
                        .and_then(|limit| limit.with_block_ms(l.block_ms.unwrap_or(0)))
                        .and_then(|limit| granular(limit, l.granularity_ms));
                    match &l.name {
                        Some(name) => limit.and_then(|limit| limit.named(name.as_ref())),
                        None => limit,
                    }
                    .map_err(|e| ApiError::bad_request(e.field(), format!("limits[{i}].{e}")))
                })
                .collect(),
            (None, Some(max), Some(window_ms)) => {
                let limit = Limit::new(max, window_ms)
                    .and_then(|limit| limit.with_block_ms(self.block_ms.unwrap_or(0)))
                    .and_then(|limit| granular(limit, self.granularity_ms));
                Ok(smallvec![limit.map_err(input_error)?])
            }
            (None, Some(_), None) => Err(ApiError::bad_request(
                "window_ms",
                "missing field `window_ms` (1 to 31622400000 ms) to go with `max`",
            )),
            (None, None, Some(_)) => Err(ApiError::bad_request(
                "max",
                "missing field `max` (1 to 10000000) to go with `window_ms`",
            )),
            (None, None, None) => Err(ApiError::bad_request("max", MISSING_LIMIT)),
        }
    }
}

/// `limit` with the body's `granularity_ms`, when it gives one.
fn granular(limit: Limit, granularity_ms: Option<u64>) -> Result<Limit, InputError> {
    match granularity_ms {
        Some(g) => limit.with_granularity(g),
        None => Ok(limit),
    }
}

/// A body's limits or costs on the stack up to four (a longer list, which
/// the body cap bounds and the request's own checks refuse beyond 16,
/// moves to the heap).
type BodyList<T> = SmallVec<[T; 4]>;

/// The answer to a body with no limit at all.
const MISSING_LIMIT: &str = "missing limit: give `max` (1 to 10000000) and `window_ms` \
     (1 to 31622400000), or `limits` (1 to 16 of {max, window_ms})";

/// Answers a request that breaks a bound of docs/design.md §1.
fn input_error(error: InputError) -> ApiError {
    ApiError::bad_request(error.field(), error.to_string())
}

/// The most bytes a request body may have (`--max-body-bytes`); a longer
/// one is answered 413.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyCap(pub usize);

/// A JSON body read within the body cap, with every rejection turned into
/// an [`ApiError`] that says what to fix.
#[derive(Debug, Clone)]
pub struct JsonBody<T>(pub T);

impl<T: serde::de::DeserializeOwned> JsonBody<T> {
    /// Reads and parses `req`'s body (see [`JsonBytes::read`]); a bad
    /// `cost` is answered with the bound of `costs`.
    pub async fn read(req: HttpRequest, cap: BodyCap, costs: Costs) -> Result<Self, ApiError> {
        let JsonBytes(bytes) = JsonBytes::read(req, cap).await?;
        parse_for(&bytes, costs).map(JsonBody)
    }
}

/// Which costs a body may carry, for the answer to a bad one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Costs {
    /// A check's or a peek's: 1 to the smallest `max`.
    Check,
    /// A settle's or a charge's: 0 (a refund) to 10,000,000, above a max too.
    Usage,
}

/// A body's bytes, read within the body cap from a request whose
/// `Content-Type` is JSON (or absent), to be parsed by the handler with
/// [`parse`], borrowing from them.
#[derive(Debug, Clone)]
pub struct JsonBytes(pub Bytes);

impl JsonBytes {
    /// Reads `req`'s body, at most `cap` bytes.
    ///
    /// The API's routes read their bodies here rather than through axum's
    /// `Bytes` extractor under a `DefaultBodyLimit` layer: that layer puts
    /// the limit into every request's extensions (one more boxed value, and
    /// the map grown past its first table), and the extractor wraps the
    /// body in a boxed `Limited` and buffers it through `Collect` (~10% of
    /// serve's instructions per check together). Same answers: 413 once
    /// more than `cap` bytes have arrived, 400 with axum's text when the
    /// body cannot be read.
    ///
    /// Any body type: `POST /v1/check` reads hyper's own body straight
    /// (see `http::Api`), not boxed into an axum `Body` first; a body's
    /// error reads as it does through `Body` (wrapped in an `axum::Error`).
    pub async fn read<B>(req: axum::http::Request<B>, cap: BodyCap) -> Result<Self, ApiError>
    where
        B: HttpBody<Data = Bytes>,
        B::Error: Into<axum::BoxError>,
    {
        require_json(&req)?;
        read_capped(req.into_body(), cap.0).await.map(JsonBytes)
    }
}

/// The whole of `body`, refused once more than `cap` bytes have arrived
/// (as `http_body_util::Limited` refuses). A body in one chunk (the common
/// case) is returned as it came, without a copy.
async fn read_capped<B>(body: B, cap: usize) -> Result<Bytes, ApiError>
where
    B: HttpBody<Data = Bytes>,
    B::Error: Into<axum::BoxError>,
{
    let mut body = std::pin::pin!(body);
    let mut first: Option<Bytes> = None;
    let mut joined: Option<BytesMut> = None;
    let mut len = 0usize;
    while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
        let frame = frame.map_err(|e| unreadable(axum::Error::new(e)))?;
        // Data only: trailers are skipped, as `Body::into_data_stream` did.
        let Ok(chunk) = frame.into_data() else {
            continue;
        };
        len = len.saturating_add(chunk.len());
        if len > cap {
            return Err(too_large());
        }
        if let Some(joined) = &mut joined {
            joined.extend_from_slice(&chunk);
        } else if let Some(head) = first.take() {
            let mut both = BytesMut::with_capacity(len);
            both.extend_from_slice(&head);
            both.extend_from_slice(&chunk);
            joined = Some(both);
        } else {
            first = Some(chunk);
        }
    }
    Ok(match joined {
        Some(joined) => joined.freeze(),
        None => first.unwrap_or_default(),
    })
}

/// Refuses a body whose `Content-Type` says it is not JSON (none is fine).
fn require_json<B>(req: &axum::http::Request<B>) -> Result<(), ApiError> {
    let Some(content_type) = req.headers().get(header::CONTENT_TYPE) else {
        return Ok(());
    };
    // What nearly every client sends, matched first: equal to it without
    // case, the value is ASCII letters and `/`, which the test below
    // accepts (~250 instructions per request less).
    if content_type
        .as_bytes()
        .eq_ignore_ascii_case(b"application/json")
    {
        return Ok(());
    }
    let is_json = content_type.to_str().is_ok_and(|ct| {
        // Compared without case, in place (no lower-cased copy), on bytes:
        // `to_str` let through only visible ASCII, spaces and tabs, so
        // ASCII trimming is `str::trim` here, without its Unicode tables
        // and `split`'s char searcher (~250 instructions per request).
        let ct = ct.as_bytes();
        let end = ct.iter().position(|&b| b == b';').unwrap_or(ct.len());
        let essence = ct[..end].trim_ascii();
        essence.eq_ignore_ascii_case(b"application/json")
            || essence.len() >= 5 && essence[essence.len() - 5..].eq_ignore_ascii_case(b"+json")
    });
    if is_json {
        return Ok(());
    }
    Err(ApiError {
        status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
        message: "the body must be JSON: send `Content-Type: application/json` \
                  (or no Content-Type)"
            .into(),
        field: Some("body"),
        retry_after_s: None,
    })
}

/// The answer to a body longer than the cap.
fn too_large() -> ApiError {
    ApiError {
        status: StatusCode::PAYLOAD_TOO_LARGE,
        message: "request body is too large: see --max-body-bytes for the limit".to_owned(),
        field: Some("body"),
        retry_after_s: None,
    }
}

/// The answer to a body that could not be read (cut off): 400 with the
/// text axum's `Bytes` extractor gave (`FailedToBufferBody::UnknownBodyError`).
fn unreadable(error: axum::Error) -> ApiError {
    ApiError {
        status: StatusCode::BAD_REQUEST,
        message: format!(
            "cannot read the request body: Failed to buffer the request body: {error}"
        ),
        field: Some("body"),
        retry_after_s: None,
    }
}

/// Parses a check's or a peek's JSON, naming the field at fault (its path)
/// and its bound.
pub fn parse<'de, T: serde::Deserialize<'de>>(bytes: &'de [u8]) -> Result<T, ApiError> {
    parse_for(bytes, Costs::Check)
}

/// [`parse`], with the bound of `costs` for a bad cost.
pub fn parse_for<'de, T: serde::Deserialize<'de>>(
    bytes: &'de [u8],
    costs: Costs,
) -> Result<T, ApiError> {
    require_object(bytes)?;
    // A body that parses needs no path: parse it without tracking one (the
    // tracker copies every field name); parse a failed one again with it.
    if let Ok(value) = serde_json::from_slice(bytes) {
        return Ok(value);
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| path_error(e, costs))?;
    // Trailing bytes after the value are an error too.
    de.end().map_err(not_json)?;
    Ok(value)
}

/// An example of the body, for the answer to one that is no JSON object.
const OBJECT_EXAMPLE: &str = "request body must be a JSON object such as \
     {\"key\": \"user123\", \"max\": 100, \"window_ms\": 60000}";

/// Refuses a body that is not a JSON object: serde would read a struct from
/// an array too (`[…]` by position), and the API takes objects only, saying
/// so rather than "expected a string".
fn require_object(bytes: &[u8]) -> Result<(), ApiError> {
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(first) if *first != b'{' => Err(ApiError::bad_request("body", OBJECT_EXAMPLE)),
        _ => Ok(()),
    }
}

/// Says what is wrong with a body serde could not read: its syntax, or the
/// field at its path, with that field's bound.
fn path_error(e: serde_path_to_error::Error<serde_json::Error>, costs: Costs) -> ApiError {
    use serde_json::error::Category;
    let path = e.path().to_string();
    let inner = e.into_inner();
    if !matches!(inner.classify(), Category::Data) {
        return not_json(inner);
    }
    let field = field_at_fault(&path, &inner.to_string());
    let mut message = if path == "." {
        inner.to_string()
    } else {
        format!("{path}: {inner}")
    };
    if let Some(hint) = bound_hint(field, costs) {
        message.push_str(&format!(" ({field} must be {hint})"));
    }
    ApiError::bad_request(field, message)
}

/// Answers a body that is not valid JSON.
fn not_json(e: serde_json::Error) -> ApiError {
    ApiError::bad_request("body", format!("request body is not valid JSON: {e}"))
}

/// Names the known field a serde path or message points at ("body"
/// otherwise): a fixed string, so it can label a metric. At the root serde
/// names a missing or unknown field only in its message (`missing field
/// `key``): it has no typed accessor for it, so the name is read from there,
/// and only ever picks this label.
fn field_at_fault(path: &str, message: &str) -> &'static str {
    // A joint body: `checks[2].limits[0].max` is the entry's own path,
    // `checks[2]` an entry's shape (a missing or unknown field, named in
    // the message as at the root), `checks` the list itself.
    if let Some(rest) = path.strip_prefix("checks") {
        return match rest.split_once("].") {
            Some((_, inner)) => field_at_fault(inner, message),
            None if rest.starts_with('[') => field_at_fault(".", message),
            None => "checks",
        };
    }
    if path.starts_with("limits") {
        // "limits[0].max" is about a bound of one entry; "limits" or
        // "limits[0]" is about the list or an entry's shape.
        return match path.rsplit('.').next() {
            Some("max") => "max",
            Some("window_ms") => "window_ms",
            Some("granularity_ms") => "granularity_ms",
            Some("cost") => "cost",
            _ => "limits",
        };
    }
    // At the root, "missing field `key`" names the field in backticks.
    let named = if path == "." {
        message.split('`').nth(1).unwrap_or("")
    } else {
        path
    };
    match named {
        "key" => "key",
        "max" => "max",
        "window_ms" => "window_ms",
        "granularity_ms" => "granularity_ms",
        "cost" => "cost",
        "limits" => "limits",
        "now_ms" => "now_ms",
        "receipt" => "receipt",
        "checks" => "checks",
        _ => "body",
    }
}

/// Describes the bound of a known field, for the answer.
fn bound_hint(field: &str, costs: Costs) -> Option<&'static str> {
    Some(match field {
        "key" => "a string of 1 to 512 bytes",
        "max" => "an integer from 1 to 10000000",
        "window_ms" => "an integer from 1 to 31622400000",
        "granularity_ms" => "an integer from 1 to window_ms that divides window_ms",
        "cost" if costs == Costs::Usage => "an integer from 0 to 10000000 for a settle or a charge",
        "cost" => "an integer from 1 to the smallest max",
        "limits" => {
            "an array of 1 to 16 objects {\"max\": …, \"window_ms\": …, \"cost\": … (optional)}"
        }
        "now_ms" => "an integer from 0 to 9007199254740991 (Unix ms)",
        "checks" => "an array of 1 to 64 objects, each the body of a single check",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;

    /// A request whose body arrives in `chunks`, then fails if `fail`.
    fn chunked(chunks: &[&'static str], fail: bool) -> HttpRequest {
        let mut items: Vec<Result<Bytes, std::io::Error>> = chunks
            .iter()
            .map(|c| Ok(Bytes::from_static(c.as_bytes())))
            .collect();
        if fail {
            items.push(Err(std::io::Error::other("connection reset")));
        }
        HttpRequest::new(Body::from_stream(futures::stream::iter(items)))
    }

    /// The byte-wise Content-Type test accepts and refuses what the
    /// `str` one it replaced did.
    #[test]
    fn content_types_are_judged_as_before() {
        fn before(value: &axum::http::HeaderValue) -> bool {
            value.to_str().is_ok_and(|ct| {
                let essence = ct.split(';').next().unwrap_or("").trim().as_bytes();
                essence.eq_ignore_ascii_case(b"application/json")
                    || essence.len() >= 5
                        && essence[essence.len() - 5..].eq_ignore_ascii_case(b"+json")
            })
        }
        let values: [&[u8]; 16] = [
            b"application/json",
            b"Application/JSON; charset=utf-8",
            b"  application/json\t ;x",
            b"application/problem+json",
            b"application/vnd.x+JSON;v=1",
            b"+json",
            b"json",
            b"",
            b";application/json",
            b"text/plain",
            b"application/jsonx",
            b"application/json; x=\xc3\xa9",
            b"application/\xc3\xa9+json",
            b"\tapplication/json\t",
            b"application/json;",
            b"application/x-json ; +json",
        ];
        for value in values {
            let value = axum::http::HeaderValue::from_bytes(value).unwrap();
            let req = HttpRequest::builder()
                .header(header::CONTENT_TYPE, value.clone())
                .body(Body::empty())
                .unwrap();
            assert_eq!(require_json(&req).is_ok(), before(&value), "{value:?}");
        }
    }

    /// The cap is that of `http_body_util::Limited` (more than `cap` bytes
    /// refused, `cap` read), chunks are joined, and a body that cannot be
    /// read is answered with the text axum's `Bytes` extractor gave.
    #[tokio::test]
    async fn bodies_are_read_within_the_cap_as_axum_read_them() {
        for chunks in [&["{\"key\":\"a\"}"][..], &["{\"ke", "y\":", "\"a\"}"], &[]] {
            let JsonBytes(bytes) = JsonBytes::read(chunked(chunks, false), BodyCap(11))
                .await
                .unwrap();
            assert_eq!(bytes, chunks.concat().as_bytes());
        }
        for chunks in [&["{\"key\":\"ab\"}"][..], &["{\"key\":", "\"ab\"}"]] {
            let error = JsonBytes::read(chunked(chunks, false), BodyCap(11))
                .await
                .unwrap_err();
            assert_eq!(error.status, StatusCode::PAYLOAD_TOO_LARGE);
            assert_eq!(
                error.message,
                "request body is too large: see --max-body-bytes for the limit"
            );
            assert_eq!(error.field, Some("body"));
        }
        let error = JsonBytes::read(chunked(&["{"], true), BodyCap(100))
            .await
            .unwrap_err();
        let rejection =
            <Bytes as axum::extract::FromRequest<()>>::from_request(chunked(&["{"], true), &())
                .await
                .unwrap_err();
        assert_eq!(error.status, rejection.status());
        assert_eq!(
            error.message,
            format!("cannot read the request body: {}", rejection.body_text())
        );
    }

    fn err(json: &str) -> ApiError {
        parse::<DecisionBody>(json.as_bytes())
            .and_then(|b| b.to_request().map(|_| b))
            .unwrap_err()
    }

    #[test]
    fn field_errors_name_field_and_bound() {
        // (body, the field at fault, what the message says)
        let cases: [(&str, &str, &[&str]); 7] = [
            (
                r#"{"key":"k","max":"ten","window_ms":1000}"#,
                "max",
                &["max", "10000000"],
            ),
            (
                r#"{"key":"k","max":10,"window_ms":1000,"cots":2}"#,
                "body",
                &["unknown field `cots`"],
            ),
            (
                r#"{"max":10,"window_ms":1000}"#,
                "key",
                &["missing field `key`", "512"],
            ),
            (
                r#"{"key":"k","limits":[{"max":1,"window_ms":-5}]}"#,
                "window_ms",
                &["limits[0].window_ms"],
            ),
            (
                r#"{"key":"k","limits":[{"max":0,"window_ms":5}]}"#,
                "max",
                &["limits[0].max must be between 1 and 10000000"],
            ),
            (r#"{"key":"k","max":10}"#, "window_ms", &[]),
            (
                r#"{"key":"k","max":1,"window_ms":1} x"#,
                "body",
                &["not valid JSON"],
            ),
        ];
        for (body, field, says) in cases {
            let e = err(body);
            assert_eq!(e.field, Some(field), "{body}");
            for part in says {
                assert!(e.message.contains(part), "{body}: {e:?}");
            }
        }
    }

    #[test]
    fn a_borrowed_body_reads_and_fails_as_an_owned_one() {
        let body: DecisionBody<Text<'_>> =
            parse(br#"{"key":"user-7","limits":[{"name":"tokens","max":10,"window_ms":1000}]}"#)
                .unwrap();
        assert!(matches!(body.key.0, Cow::Borrowed("user-7")));
        let name = &body.limits.as_ref().unwrap()[0].name;
        assert!(matches!(name, Some(Text(Cow::Borrowed("tokens")))));
        // Escapes are decoded into an owned copy.
        let escaped: DecisionBody<Text<'_>> =
            parse(br#"{"key":"a\"b\u00e9","max":1,"window_ms":1}"#).unwrap();
        assert_eq!(escaped.key.as_ref(), "a\"b\u{e9}");
        assert_eq!(escaped.to_request().unwrap().key(), "a\"b\u{e9}");
        // Every failure answers exactly as the owned body's does.
        for json in [
            r#"{"key":5,"max":1,"window_ms":1}"#,
            r#"{"key":"k","max":1,"window_ms":1,"cots":2}"#,
            r#"{"key":"k","limits":[{"name":7,"max":1,"window_ms":1}]}"#,
            r#"{"key":"k","limits":[{"max":1,"window_ms":1,"x":1}]}"#,
            r#"{"key":"k","receipt":false,"max":1,"window_ms":1}"#,
            r#"{"max":1,"window_ms":1}"#,
            r#"{"key":"k","max":1,"window_ms":1} x"#,
            r#"{"key":"k","max":1,"window_ms":1"#,
            r#"["k",1,1]"#,
        ] {
            let owned = parse::<DecisionBody>(json.as_bytes()).unwrap_err();
            let borrowed = parse::<DecisionBody<Text<'_>>>(json.as_bytes()).unwrap_err();
            assert_eq!(owned, borrowed, "{json}");
        }
    }

    #[test]
    fn a_valid_body_becomes_a_request() {
        let body: DecisionBody =
            parse(br#"{"key":"k","limits":[{"max":10,"window_ms":1000},{"max":100,"window_ms":60000}],"cost":3}"#)
                .unwrap();
        let request = body.to_request().unwrap();
        assert_eq!(request.limits().len(), 2);
        assert_eq!(request.cost(), 3);
    }
}

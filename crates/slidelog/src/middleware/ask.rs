//! The request side of the layer: which limits apply (the route), whose
//! log it is (the key, in the layer's namespace), what the request costs,
//! and whether that makes a valid request. Nothing here answers the
//! client; [`super::answer`] does.

use super::config::{Config, MissingKey};
use super::cost::Charge;
use super::extract::KeyExtractor;
use super::response::Rejection;
use super::routes::Rule;
use slidelog_core::{Limit, Request};
use std::sync::Arc;

/// What the request side found.
pub(crate) enum Asked<'a, B> {
    /// No limit applies (an unlimited route, or no key under
    /// [`MissingKey::PassThrough`]): the inner service answers.
    Pass(B),
    /// The request cannot be decided (no key, a bad cost): the layer answers.
    Refuse(Rejection),
    /// A request to decide on.
    Decide(Ask<'a, B>),
}

/// A request to decide on, with the route rule it matched.
pub(crate) struct Ask<'a, B> {
    /// The validated request: namespaced key, the route's limits, the cost.
    pub(crate) request: Request,
    /// The route's limits (for refusals).
    pub(crate) limits: &'a Arc<[Limit]>,
    /// The route's rule: its `RateLimit-Policy` value and, with costs by
    /// name, where they go (for the settle too).
    pub(crate) rule: &'a Rule,
    /// The body, handed on whole (read only by a body cost).
    pub(crate) body: B,
}

/// Returns what a layer configured by `config` makes of the request `parts` + `body`.
pub(crate) async fn ask<'a, K, C, U, B>(
    config: &'a Config<K, C, U>,
    parts: &http::request::Parts,
    body: B,
) -> Asked<'a, B>
where
    K: KeyExtractor,
    C: Charge<B>,
{
    let rule = config.routes.rule_for(parts);
    let Some(limits) = rule.limits.as_ref() else {
        return Asked::Pass(body);
    };
    let Some(key) = config.extractor.extract(parts) else {
        return match config.missing {
            MissingKey::PassThrough => Asked::Pass(body),
            MissingKey::Reject => Asked::Refuse(Rejection::bad_key("no key in the request")),
        };
    };
    let (cost, body) = match config.charge.charge(parts, body).await {
        Ok(charged) => charged,
        Err(e) => return Asked::Refuse(Rejection::cost(&e)),
    };
    // Costs given by name go where the layer resolved them when it was built.
    let cost = match &rule.named {
        Some(positions) => super::cost::spread(cost, positions, limits.len()),
        None => cost,
    };
    // A key that breaks the bounds (over 512 bytes with its namespace and
    // scope) is always refused, whatever `MissingKey` says: passing it
    // through would let a client escape its limit by sending a long key.
    let key = format!("{}:{}:{key}", config.namespace.as_str(), rule.scope);
    // A cost of 0 charges nothing in its limit; 0 in every limit, nothing.
    let Some(request) = super::cost::charged(cost, key, limits) else {
        return Asked::Pass(body);
    };
    match request {
        Ok(request) => Asked::Decide(Ask {
            request,
            limits,
            rule,
            body,
        }),
        Err(e) => Asked::Refuse(Rejection::input(&e, limits.clone())),
    }
}

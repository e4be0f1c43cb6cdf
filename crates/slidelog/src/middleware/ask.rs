//! The request side of the layer: which limits apply (the route, for each
//! key), whose logs they are (the keys, in the layer's namespace), what the
//! request costs, and whether that makes valid checks. Nothing here
//! answers the client; [`super::answer`] does.

use super::config::{Config, MissingKey};
use super::cost::Charge;
use super::extract::KeyExtractor;
use super::response::Rejection;
use super::routes::Rule;
use super::tiers::{Tier, Tiers};
use slidelog_core::{Checks, Limit};
use std::sync::Arc;

/// What the request side found.
pub(crate) enum Asked<'a, B> {
    /// No limit applies (an unlimited route, or no key under
    /// [`MissingKey::PassThrough`]): the inner service answers.
    Pass(B),
    /// The request cannot be decided (no key, a bad cost): the layer answers.
    Refuse(Rejection),
    /// Checks to decide on.
    Decide(Ask<'a, B>),
}

/// Checks to decide on together, one per key the request is limited by.
pub(crate) struct Ask<'a, B> {
    /// The validated checks: namespaced keys, their routes' limits, costs.
    pub(crate) checks: Checks,
    /// For each check, in order: which key and route rule it came from.
    pub(crate) keys: Vec<Keyed<'a>>,
    /// The body, handed on whole (read only by a body cost).
    pub(crate) body: B,
    /// The first key's tier, on a layer with tiers (`"default"` for a key
    /// in none).
    pub(crate) tier: Option<&'a str>,
}

/// Where one check came from.
#[derive(Clone, Copy)]
pub(crate) struct Keyed<'a> {
    /// The layer's key: 0 for the first, `i` for the `i`-th added.
    pub(crate) index: usize,
    /// The route's rule for that key: its `RateLimit-Policy` value and,
    /// with costs by name, where they go (for the settle too).
    pub(crate) rule: &'a Rule,
}

impl Keyed<'_> {
    /// The rule's limits (only limited rules make checks).
    pub(crate) fn limits(&self) -> Arc<[Limit]> {
        self.rule.limits.clone().unwrap_or_else(|| Arc::new([]))
    }
}

/// A key found for a limited rule.
struct Found<'a> {
    index: usize,
    rule: &'a Rule,
    limits: &'a Arc<[Limit]>,
    key: String,
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
    let tier = match &config.tiers {
        Some(tiers) => Some(tier_of(config, tiers, parts).await),
        None => None,
    };
    let found = match find_keys(config, parts, tier.flatten()) {
        Ok(found) => found,
        Err(missing) => return Asked::Refuse(Rejection::bad_key(missing)),
    };
    // Only the first key is priced by the layer's cost (keys added with
    // `.key` count 1 a request): the body is read only when it applies.
    let (first_cost, body) = match found.first() {
        Some(first) if first.index == 0 => match config.charge.charge(parts, body).await {
            Ok((cost, body)) => (Some(cost), body),
            Err(e) => return Asked::Refuse(Rejection::cost(&e)),
        },
        _ => (None, body),
    };
    let (checks, keys) = match checks_of(found, first_cost) {
        Ok(made) => made,
        Err(rejection) => return Asked::Refuse(*rejection),
    };
    if checks.is_empty() {
        return Asked::Pass(body);
    }
    // Distinct keys by construction (each key has its own namespace), at
    // most MAX_CHECKS (the builder's bound): `Checks::new` keeps them in order.
    match Checks::new(checks) {
        Ok(checks) => {
            let tier = tier.map(|t| t.map_or("default", |t| &*t.name));
            Asked::Decide(Ask {
                checks,
                keys,
                body,
                tier,
            })
        }
        Err(e) => Asked::Refuse(Rejection::input(&e, keys[0].limits())),
    }
}

/// The request of each found key at its cost (the layer's for the first
/// key, 1 for the others), and where each came from; a key costing 0 in
/// every limit makes none. A cost its limits refuse: the 413.
fn checks_of<'a>(
    found: Vec<Found<'a>>,
    mut first_cost: Option<crate::Cost>,
) -> Result<(Vec<slidelog_core::Request>, Vec<Keyed<'a>>), Box<Rejection>> {
    let mut checks = Vec::with_capacity(found.len());
    let mut keys = Vec::with_capacity(found.len());
    for f in found {
        let cost = match first_cost.take().filter(|_| f.index == 0) {
            // Costs given by name go where the layer resolved them when it was built.
            Some(cost) => match &f.rule.named {
                Some(positions) => super::cost::spread(cost, positions, f.limits.len()),
                None => cost,
            },
            None => crate::Cost::ONE,
        };
        // A cost of 0 charges nothing in its limit; 0 in every limit, nothing.
        match super::cost::charged(cost, f.key, f.limits) {
            None => continue,
            Some(Ok(request)) => checks.push(request),
            Some(Err(e)) => return Err(Box::new(Rejection::input(&e, f.limits.clone()))),
        }
        keys.push(Keyed {
            index: f.index,
            rule: f.rule,
        });
    }
    Ok((checks, keys))
}

/// Returns the keys of every limited rule that applies to `parts`, the
/// first key's first, each in its log's name; or, for a key missing under
/// [`MissingKey::Reject`], the reason to refuse the request.
fn find_keys<'a, K, C, U>(
    config: &'a Config<K, C, U>,
    parts: &http::request::Parts,
    tier: Option<&'a Tier>,
) -> Result<Vec<Found<'a>>, String>
where
    K: KeyExtractor,
{
    let namespace = config.namespace.as_str();
    let rule = tier.map_or(&*config.routes, |t| &t.routes).rule_for(parts);
    // An unlimited route does not need the key.
    let first = (
        0,
        rule,
        rule.limits
            .as_ref()
            .and_then(|_| config.extractor.extract(parts)),
    );
    let added = config.keys.iter().enumerate().map(|(i, k)| {
        let rule = k.routes.rule_for(parts);
        let key = rule
            .limits
            .as_ref()
            .and_then(|_| k.extractor.extract(parts));
        (i + 1, rule, key)
    });
    let mut found = Vec::with_capacity(1 + config.keys.len());
    for (index, rule, key) in std::iter::once(first).chain(added) {
        let Some(limits) = rule.limits.as_ref() else {
            continue;
        };
        let Some(key) = key else {
            match config.missing {
                MissingKey::PassThrough => continue,
                MissingKey::Reject => return Err(missing(config, index, parts)),
            }
        };
        // A key that breaks the bounds (over 512 bytes with its namespace and
        // scope) is refused when its check is built, whatever `MissingKey`
        // says: passing it through would let a client escape its limit by
        // sending a long key.
        let key = match (index, tier) {
            // Each tier in its own logs: a key has one set of limits.
            (0, Some(tier)) => format!("{namespace}:tier-{}:{}:{key}", tier.name, rule.scope),
            (0, None) => format!("{namespace}:{}:{key}", rule.scope),
            (_, _) => format!("{namespace}+{}:{}:{key}", config.name_of(index), rule.scope),
        };
        found.push(Found {
            index,
            rule,
            limits,
            key,
        });
    }
    Ok(found)
}

/// The tier of the request's first key (`None`: no key, or in no tier:
/// the layer's own limits).
async fn tier_of<'a, K: KeyExtractor, C, U>(
    config: &'a Config<K, C, U>,
    tiers: &'a Tiers,
    parts: &http::request::Parts,
) -> Option<&'a Tier> {
    let key = config.extractor.extract(parts)?;
    tiers.of(&key).await
}

/// The reason a request without key `index` is refused: the extractor's
/// own when it knows one (the fix for a missing peer address).
fn missing<K: KeyExtractor, C, U>(
    config: &Config<K, C, U>,
    index: usize,
    parts: &http::request::Parts,
) -> String {
    let why = match index {
        0 => config.extractor.why_missing(parts),
        i => config.keys[i - 1].extractor.why_missing(parts),
    };
    match (why, config.keys.is_empty()) {
        (Some(why), true) => why,
        (Some(why), false) => format!("{} key: {why}", config.name_of(index)),
        (None, true) => "no key in the request".to_owned(),
        (None, false) => format!("no {} key in the request", config.name_of(index)),
    }
}

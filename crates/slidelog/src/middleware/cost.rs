//! What a request costs in the layer: 1 by default, a closure over the
//! request head ([`RateLimitLayer::cost`](super::RateLimitLayer::cost)), or a
//! closure over the head and a bounded, buffered body
//! ([`RateLimitLayer::body_cost`](super::RateLimitLayer::body_cost)), for
//! limits on tokens or bytes rather than requests. One cost per limit is
//! given by name or by position (an array `[u64; N]`), and the list is
//! checked against every route's limits when the layer is built
//! ([`CostListError`]): a request never meets a cost list of the wrong
//! length.
//!
//! The way a layer charges is part of its type ([`Charge`]), so a body is
//! only ever buffered by a layer that asked for it, and only body types the
//! layer can rebuild ([`BufferedBody`]) compile.

use bytes::Bytes;
use http::request::Parts;
use http_body_util::BodyExt;
use slidelog_core::{InputError, Limit, Request};
use std::future::Future;

pub use crate::cost::Cost;

/// Why a request's cost could not be found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CostError {
    /// The body is longer than the layer reads to count its cost (413).
    #[error(
        "request body over {max_bytes} bytes, the most the rate limiter reads to count its cost"
    )]
    BodyTooLarge {
        /// The bound given to [`RateLimitLayer::body_cost`](super::RateLimitLayer::body_cost).
        max_bytes: usize,
    },
    /// The body could not be read (400).
    #[error("cannot read the request body to count its cost: {0}")]
    Body(String),
}

/// A cost list that does not fit the layer's limits, given by limit name
/// ([`RateLimitLayer::cost_by_name`](super::RateLimitLayer::cost_by_name),
/// [`body_cost_by_name`](super::RateLimitLayer::body_cost_by_name)) or by
/// position ([`cost_by_position`](super::RateLimitLayer::cost_by_position),
/// [`body_cost_by_position`](super::RateLimitLayer::body_cost_by_position)):
/// refused when the layer is built, never per request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CostListError {
    /// No names (no costs), or more than a request has limits.
    #[error("cost list: must give 1 to 16 costs or limit names, got {got}")]
    Count {
        /// How many names were given.
        got: usize,
    },
    /// A name given twice.
    #[error("cost names[{index}]: {name:?} is given twice")]
    DuplicateName {
        /// Its position in the list.
        index: usize,
        /// The name.
        name: String,
    },
    /// A name that no limit of a limited route carries.
    #[error(
        "cost names[{index}]: {name:?} names no limit of route {route:?} (its limits: {limits}); name limits with Limit::named or \"name=60/minute\""
    )]
    UnknownName {
        /// Its position in the list.
        index: usize,
        /// The name.
        name: String,
        /// The route whose limits lack it (`default` for the default).
        route: String,
        /// That route's limits, as `RateLimit-Policy` lists them.
        limits: String,
    },
    /// A list matched by position whose length is not the number of a
    /// limited route's limits (or is 0, or over 16).
    #[error(
        "cost list: {got} costs by position, but route {route:?} has {want} limits ({limits}); return one cost per limit, in their order, or give costs by name"
    )]
    Length {
        /// How many costs the closure returns (its array's length).
        got: usize,
        /// How many limits the route has.
        want: usize,
        /// The route (`default` for the default).
        route: String,
        /// That route's limits, as `RateLimit-Policy` lists them.
        limits: String,
    },
}

/// Checks that a cost list of `got` costs matched by position fits every
/// limited route of `routes` (1 to 16 costs, one per limit), when the layer
/// is built.
pub(crate) fn check_positional(
    routes: &super::RouteLimits,
    got: usize,
) -> Result<(), CostListError> {
    if got == 0 || got > slidelog_core::MAX_LIMITS {
        return Err(CostListError::Count { got });
    }
    for (route, limits) in routes.limited_rules() {
        if limits.len() != got {
            return Err(CostListError::Length {
                got,
                want: limits.len(),
                route: route.to_owned(),
                limits: crate::headers::policy_value(limits),
            });
        }
    }
    Ok(())
}

/// How a layer finds a request's cost. Implemented by [`UnitCost`] (the
/// default), [`HeadCost`] and [`BodyCost`]; the layer calls it, users pick
/// one through the layer's builder methods.
#[diagnostic::on_unimplemented(
    message = "this rate limit layer cannot count the cost of a request with body `{B}`",
    label = "the layer's `body_cost` must read and rebuild this body",
    note = "for `axum::body::Body` enable slidelog's `axum` feature, for `tonic::body::Body` its `tonic` feature; for another body type implement `slidelog::middleware::BufferedBody`"
)]
pub trait Charge<B>: Send + Sync + 'static {
    /// Returns the cost of the request whose head is `parts`, and its body back
    /// (rebuilt when it was read).
    fn charge(
        &self,
        parts: &Parts,
        body: B,
    ) -> impl Future<Output = Result<(Cost, B), CostError>> + Send;
}

/// Every request costs 1 (the default).
#[derive(Debug, Clone, Copy, Default)]
pub struct UnitCost;

impl<B: Send + 'static> Charge<B> for UnitCost {
    async fn charge(&self, _: &Parts, body: B) -> Result<(Cost, B), CostError> {
        Ok((Cost::ONE, body))
    }
}

/// The cost is a function of the request head (a header, the path, the
/// method). See [`RateLimitLayer::cost`](super::RateLimitLayer::cost).
#[derive(Debug, Clone, Copy)]
pub struct HeadCost<F>(pub(crate) F);

impl<F, R, B> Charge<B> for HeadCost<F>
where
    F: Fn(&Parts) -> R + Send + Sync + 'static,
    R: Into<Cost>,
    B: Send + 'static,
{
    async fn charge(&self, parts: &Parts, body: B) -> Result<(Cost, B), CostError> {
        Ok(((self.0)(parts).into(), body))
    }
}

/// The cost is a function of the head and the whole body, read up to a
/// bound. See [`RateLimitLayer::body_cost`](super::RateLimitLayer::body_cost).
#[derive(Debug, Clone, Copy)]
pub struct BodyCost<F> {
    pub(crate) max_bytes: usize,
    pub(crate) f: F,
}

/// A request body the layer can read whole and give back to the inner
/// service (needed by [`RateLimitLayer::body_cost`](super::RateLimitLayer::body_cost)).
/// Implemented for `axum::body::Body` (feature `axum`), `tonic::body::Body`
/// (feature `tonic`) and `http_body_util::Full<Bytes>`.
#[diagnostic::on_unimplemented(
    message = "the rate limit layer cannot read and rebuild a request body of type `{Self}`",
    note = "for `axum::body::Body` enable slidelog's `axum` feature, for `tonic::body::Body` its `tonic` feature; for another body type implement `slidelog::middleware::BufferedBody`"
)]
pub trait BufferedBody: http_body::Body<Data = Bytes> + Sized + Send + 'static {
    /// Returns a body holding `bytes`.
    fn from_bytes(bytes: Bytes) -> Self;
}

impl BufferedBody for http_body_util::Full<Bytes> {
    fn from_bytes(bytes: Bytes) -> Self {
        Self::new(bytes)
    }
}

#[cfg(feature = "axum")]
impl BufferedBody for axum::body::Body {
    fn from_bytes(bytes: Bytes) -> Self {
        Self::from(bytes)
    }
}

#[cfg(feature = "tonic")]
impl BufferedBody for tonic::body::Body {
    fn from_bytes(bytes: Bytes) -> Self {
        Self::new(http_body_util::Full::new(bytes))
    }
}

impl<F, R, B> Charge<B> for BodyCost<F>
where
    F: Fn(&Parts, &[u8]) -> R + Send + Sync + 'static,
    R: Into<Cost>,
    B: BufferedBody,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    async fn charge(&self, parts: &Parts, body: B) -> Result<(Cost, B), CostError> {
        let too_large = CostError::BodyTooLarge {
            max_bytes: self.max_bytes,
        };
        // A declared length over the bound is refused before reading a byte.
        let declared = parts
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|n| n > self.max_bytes as u64) {
            return Err(too_large);
        }
        let bytes = match http_body_util::Limited::new(body, self.max_bytes)
            .collect()
            .await
        {
            Ok(collected) => collected.to_bytes(),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => return Err(too_large),
            Err(e) => return Err(CostError::Body(e.to_string())),
        };
        let cost = (self.f)(parts, &bytes).into();
        Ok((cost, B::from_bytes(bytes)))
    }
}

/// Returns the costs of `limits.len()` limits from costs given by name:
/// `named[i]` goes to the limit at `positions[i]` (resolved when the layer
/// was built), every other limit costs 1. Reuses `named`'s allocation.
pub(crate) fn spread(cost: Cost, positions: &[usize], len: usize) -> Cost {
    let Cost::PerLimit(mut named) = cost else {
        return cost;
    };
    let mut all = [1u64; slidelog_core::MAX_LIMITS];
    for (&position, &c) in positions.iter().zip(&named) {
        if let Some(slot) = all.get_mut(position) {
            *slot = c;
        }
    }
    named.clear();
    named.extend_from_slice(&all[..len.min(all.len())]);
    Cost::PerLimit(named)
}

/// Returns the request that `cost` makes of `key` under `limits`, or `None`
/// when it charges nothing: a cost of 0 charges nothing in its limit (as a
/// settle of 0 does), so 0 in every limit is no request at all, and 0 in
/// some limits is a request whose record counts nowhere in them (a weighted
/// record with a cost of 0 there: the key keeps one set of limits,
/// docs/design.md §1). Every other cost is validated as a check's.
pub(crate) fn charged(
    cost: Cost,
    key: String,
    limits: &[Limit],
) -> Option<Result<Request, InputError>> {
    match cost {
        Cost::All(0) => None,
        Cost::PerLimit(costs) if costs.len() == limits.len() && costs.contains(&0) => {
            if costs.iter().all(|&c| c == 0) {
                return None;
            }
            // Validated as a check with 1 in place of each 0, then built
            // with the zeros (which only a usage request may hold).
            let checked: Vec<u64> = costs.iter().map(|&c| c.max(1)).collect();
            let valid = Request::with_costs_from_slices(&key, limits, &checked);
            Some(valid.and_then(|_| Request::usage(key, limits.to_vec(), costs)))
        }
        other => Some(other.request_of(&key, limits)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::Full;

    #[test]
    fn a_zero_cost_charges_nothing_in_its_limit() {
        let limits = [
            Limit::new(60, 60_000).unwrap(),
            Limit::new(20_000, 60_000).unwrap(),
        ];
        let charge = |cost: Cost| charged(cost, "k".into(), &limits);
        assert_eq!(charge(Cost::All(0)), None);
        assert_eq!(charge(Cost::PerLimit(vec![0, 0])), None);
        let tokens_free = charge(Cost::PerLimit(vec![1, 0])).unwrap().unwrap();
        assert_eq!((tokens_free.cost_for(0), tokens_free.cost_for(1)), (1, 0));
        assert_eq!(charge(Cost::All(3)).unwrap().unwrap().costs(), &[3]);
        // Zeros do not let a cost above its limit's max through.
        assert!(charge(Cost::PerLimit(vec![61, 0])).unwrap().is_err());
        // The wrong number of costs is refused by the request.
        assert!(charge(Cost::PerLimit(vec![0])).unwrap().is_err());
    }

    #[test]
    fn costs_by_name_go_to_their_limits_and_the_others_cost_one() {
        let spread_of = |named: Vec<u64>, positions: &[usize], len| {
            spread(Cost::PerLimit(named), positions, len)
        };
        assert_eq!(spread_of(vec![400], &[1], 2), Cost::PerLimit(vec![1, 400]));
        assert_eq!(
            spread_of(vec![400, 2], &[2, 0], 3),
            Cost::PerLimit(vec![2, 1, 400])
        );
        assert_eq!(spread(Cost::All(3), &[1], 2), Cost::All(3));
    }

    fn parts(len: Option<usize>) -> Parts {
        let mut b = http::Request::post("/");
        if let Some(n) = len {
            b = b.header("content-length", n);
        }
        b.body(()).unwrap().into_parts().0
    }

    #[tokio::test]
    async fn a_body_cost_reads_the_body_and_gives_it_back() {
        let c = BodyCost {
            max_bytes: 10,
            f: |_: &Parts, b: &[u8]| b.len() as u64,
        };
        let body = Full::new(Bytes::from_static(b"hello"));
        let (cost, body) = c.charge(&parts(None), body).await.unwrap();
        assert_eq!(cost, Cost::All(5));
        let back = body.collect().await.unwrap().to_bytes();
        assert_eq!(&back[..], b"hello");
    }

    #[tokio::test]
    async fn a_body_over_the_bound_is_refused_declared_or_not() {
        let c = BodyCost {
            max_bytes: 4,
            f: |_: &Parts, _: &[u8]| 1u64,
        };
        let body = || Full::new(Bytes::from_static(b"hello"));
        let want = CostError::BodyTooLarge { max_bytes: 4 };
        assert_eq!(c.charge(&parts(None), body()).await.unwrap_err(), want);
        assert_eq!(c.charge(&parts(Some(5)), body()).await.unwrap_err(), want);
    }
}

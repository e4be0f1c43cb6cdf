//! Rate limit layers stacked on one request (an API-key layer around an IP
//! layer): how they keep from charging each other.
//!
//! A tower layer cannot see the layers inside it before it calls them, and
//! must decide before it does (its inner service may be the handler). So
//! stacked layers decide one after the other, outermost first, and each
//! layer that recorded a request refunds it (a settle to 0, docs/design.md
//! §4.6) when a layer inside it refused that request: what a key's log
//! holds is then the requests that were served, in either order. Two
//! private extensions carry this: [`Outer`] on the request a deciding layer
//! hands on, [`Answered`] on every response a layer decided.
//!
//! This is not one atomic decision: between the outer decision and the
//! refund (two store calls) the outer key holds the unit, so a concurrent
//! request on that key may be refused that an atomic decision would have
//! admitted; never one admitted too many. One layer with several keys
//! ([`RateLimitLayer::key`](super::RateLimitLayer::key)) is one decision;
//! a layer that meets another logs a warning saying so, once.
//!
//! Stacked layers list their limits by key (`"ip"`, `"header-x-api-key"`),
//! the inner layer's items first, so two layers' limits never share a name
//! (two `"default"`s) in the RateLimit fields.

use super::config::Config;
use std::sync::atomic::Ordering;

/// On the request a layer hands to its inner service after deciding it:
/// a layer that finds it is inside another.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Outer;

/// On every response a layer decided (its own refusal, or its inner
/// service's answer to a request it admitted): the layer outside it appends
/// its RateLimit fields instead of replacing them, and refunds its record
/// when `refused`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Answered {
    /// A layer refused the request: the inner service never ran.
    pub(crate) refused: bool,
}

/// Notes that `config`'s layer met another rate limit layer on one
/// request; warns the first time.
pub(crate) fn met<K, C, U>(config: &Config<K, C, U>) {
    if !config.stacked.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            namespace = config.namespace.as_str(),
            "two rate limit layers on one request: they decide one after the other, and a request the inner one refuses is refunded in the outer one's logs; for one atomic decision over both keys, give one layer both with .key(name, extractor, limits)"
        );
    }
}

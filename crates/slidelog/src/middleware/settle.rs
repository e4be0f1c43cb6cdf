//! Settling a reservation from the response (docs/design.md §4.6): an
//! admitted request reserved its estimated cost; once the inner service has
//! answered, the layer reads the real cost (a response header, a [`Usage`]
//! in the response's extensions, a closure over the head, or a closure over
//! the bounded, buffered body) and settles the request's record to it with
//! [`Limiter::settle`](crate::Limiter::settle), or refunds it (settles it to
//! 0) when the status is one the layer was told to refund.
//!
//! A settle changes the one record the admission appended, in one atomic
//! step: it sets that record's costs, it never adds a record, so a settle
//! that is retried, or that was applied although its caller timed out,
//! cannot count twice. A settle that fails leaves the estimate in place;
//! the response is handed on all the same (the failure is logged and told
//! to the [`on_settle`](super::RateLimitLayer::on_settle) hook; the
//! limiter's metrics hook sees the store error).

use super::cost::BufferedBody;
use crate::{Cost, LimiterError};
use bytes::Bytes;
use http::{HeaderName, StatusCode, response};
use http_body_util::BodyExt;
use std::future::Future;
use std::sync::Arc;

/// The real cost of an admitted request, as its handler knows it: put it in
/// the response's extensions and a layer built with
/// [`settle_from_extension`](super::RateLimitLayer::settle_from_extension)
/// settles the reservation to it.
///
/// ```
/// use slidelog::middleware::Usage;
/// let mut response = http::Response::new(String::from("done"));
/// response.extensions_mut().insert(Usage(1_250));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Usage(pub u64);

/// What the layer did with a reservation after the response, as the
/// [`on_settle`](super::RateLimitLayer::on_settle) hook is told.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum SettleOutcome {
    /// The record now carries the real cost, `actual`, in the settled limits.
    Settled {
        /// The real cost the response reported.
        actual: u64,
    },
    /// The status was one to refund: the record was removed.
    Refunded,
    /// The record was gone (it expired, or the key was reset): nothing changed.
    Gone,
    /// No source reported a cost (no header, no extension, a body that was
    /// not read or had no usage): the estimate stays.
    NoUsage,
    /// The settle failed (store down, timeout, a cost out of bounds): the
    /// estimate stays, the response is handed on.
    Failed(LimiterError),
}

impl SettleOutcome {
    /// Returns a short label for metrics: `settled`, `refunded`, `gone`,
    /// `no_usage`, `failed`.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Settled { .. } => "settled",
            Self::Refunded => "refunded",
            Self::Gone => "gone",
            Self::NoUsage => "no_usage",
            Self::Failed(_) => "failed",
        }
    }
}

/// Reads a real cost from a response head.
pub(crate) type HeadReader = Arc<dyn Fn(&response::Parts) -> Option<u64> + Send + Sync>;

/// Where the layer looks for a response's real cost in its head, in the
/// order the builder added them; the first that reports one wins.
#[derive(Clone)]
pub(crate) enum HeadSource {
    /// A header holding a decimal number.
    Header(HeaderName),
    /// A [`Usage`] in the response's extensions.
    Extension,
    /// A closure over the head.
    Head(HeadReader),
}

impl HeadSource {
    fn read(&self, parts: &response::Parts) -> Option<u64> {
        match self {
            Self::Header(name) => parts.headers.get(name)?.to_str().ok()?.trim().parse().ok(),
            Self::Extension => parts.extensions.get::<Usage>().map(|u| u.0),
            Self::Head(f) => f(parts),
        }
    }
}

/// Which statuses are refunded.
pub(crate) type RefundRule = Arc<dyn Fn(StatusCode) -> bool + Send + Sync>;
/// Told what happened to each reservation.
pub(crate) type SettleHook = Arc<dyn Fn(&SettleOutcome) + Send + Sync>;

/// How a layer settles: the head sources, the refund rule and the hook
/// (the body source is part of the layer's type: [`ReadUsage`]).
#[derive(Clone, Default)]
pub(crate) struct Settling {
    pub(crate) sources: Vec<HeadSource>,
    pub(crate) refund: Option<RefundRule>,
    pub(crate) hook: Option<SettleHook>,
}

impl Settling {
    /// Returns the real cost the first head source that has one reports.
    pub(crate) fn read_head(&self, parts: &response::Parts) -> Option<u64> {
        self.sources.iter().find_map(|s| s.read(parts))
    }

    /// Tells whether `status` is refunded.
    pub(crate) fn refunds(&self, status: StatusCode) -> bool {
        self.refund.as_ref().is_some_and(|f| f(status))
    }

    /// Logs `outcome` and tells the hook.
    pub(crate) fn report(&self, key: &str, outcome: &SettleOutcome) {
        match outcome {
            SettleOutcome::Failed(e) => tracing::warn!(
                key,
                error = %e,
                "rate limit layer: cannot settle the reservation; its estimate stays"
            ),
            SettleOutcome::NoUsage => tracing::debug!(
                key,
                "rate limit layer: the response reported no usage; the estimate stays"
            ),
            _ => {}
        }
        if let Some(hook) = &self.hook {
            hook(outcome);
        }
    }
}

/// How a layer reads a real cost from a response body. Implemented by
/// [`NoBodyUsage`] (the default: the body is never read) and [`BodyUsage`]
/// ([`settle_with`](super::RateLimitLayer::settle_with)).
pub trait ReadUsage<B>: Send + Sync + 'static {
    /// Returns the real cost the body of the response `parts` reports, and
    /// the body back (rebuilt when it was read).
    fn read(
        &self,
        parts: &response::Parts,
        body: B,
    ) -> impl Future<Output = (Option<u64>, B)> + Send;

    /// Tells whether this reader ever reads a body.
    fn reads(&self) -> bool;
}

/// The body is never read for a cost (the default).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoBodyUsage;

impl<B: Send + 'static> ReadUsage<B> for NoBodyUsage {
    async fn read(&self, _: &response::Parts, body: B) -> (Option<u64>, B) {
        (None, body)
    }

    fn reads(&self) -> bool {
        false
    }
}

/// The real cost is a function of the response head and its whole body,
/// read when its length is known and at most a bound. See
/// [`settle_with`](super::RateLimitLayer::settle_with).
#[derive(Debug, Clone, Copy)]
pub struct BodyUsage<F> {
    pub(crate) max_bytes: usize,
    pub(crate) f: F,
}

impl<F, B> ReadUsage<B> for BodyUsage<F>
where
    F: Fn(&response::Parts, &[u8]) -> Option<u64> + Send + Sync + 'static,
    B: BufferedBody,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    async fn read(&self, parts: &response::Parts, body: B) -> (Option<u64>, B) {
        // Only a body whose length is known to fit is read: a longer or
        // streamed one is handed on untouched (its estimate stays).
        let fits = body
            .size_hint()
            .upper()
            .is_some_and(|n| n <= self.max_bytes as u64);
        if !fits {
            tracing::debug!(
                max_bytes = self.max_bytes,
                "rate limit layer: response body of unknown length or over max_bytes: not read for its usage"
            );
            return (None, body);
        }
        match http_body_util::Limited::new(body, self.max_bytes)
            .collect()
            .await
        {
            Ok(collected) => {
                let bytes = collected.to_bytes();
                ((self.f)(parts, &bytes), B::from_bytes(bytes))
            }
            Err(e) => {
                // The body failed while it was read: what was read is lost,
                // as it would be for the client.
                tracing::warn!(error = %e, "rate limit layer: cannot read the response body for its usage");
                (None, B::from_bytes(Bytes::new()))
            }
        }
    }

    fn reads(&self) -> bool {
        true
    }
}

/// Returns the costs a settle to `actual` gives `reserved` (the admitted
/// request's costs, one for every limit or one per limit) over `len`
/// limits: `actual` in the settled positions (every limit when `targets`
/// is `None`), the reserved cost elsewhere.
pub(crate) fn settled_cost(
    reserved: &slidelog_core::Request,
    targets: Option<&[usize]>,
    actual: u64,
) -> Cost {
    match targets {
        None => Cost::All(actual),
        Some(targets) => Cost::PerLimit(
            (0..reserved.limits().len())
                .map(|i| {
                    if targets.contains(&i) {
                        actual
                    } else {
                        reserved.cost_for(i)
                    }
                })
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slidelog_core::{Limit, Request};

    fn head(headers: &[(&str, &str)]) -> response::Parts {
        let mut b = http::Response::builder();
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap().into_parts().0
    }

    #[test]
    fn head_sources_are_tried_in_order_and_bad_values_are_no_usage() {
        let settling = Settling {
            sources: vec![
                HeadSource::Extension,
                HeadSource::Header(HeaderName::from_static("x-usage")),
            ],
            ..Settling::default()
        };
        assert_eq!(settling.read_head(&head(&[("x-usage", " 42 ")])), Some(42));
        for bad in ["-1", "1e3", "", "18446744073709551616"] {
            assert_eq!(
                settling.read_head(&head(&[("x-usage", bad)])),
                None,
                "{bad:?}"
            );
        }
        let mut parts = head(&[("x-usage", "42")]);
        parts.extensions.insert(Usage(7));
        assert_eq!(settling.read_head(&parts), Some(7));
    }

    #[test]
    fn a_settle_replaces_the_targets_and_keeps_the_other_reserved_costs() {
        let limits = vec![
            Limit::new(60, 60_000).unwrap(),
            Limit::new(20_000, 60_000).unwrap(),
        ];
        let reserved = Request::with_costs("k", limits, vec![1, 4_000]).unwrap();
        assert_eq!(
            settled_cost(&reserved, Some(&[1]), 1_250),
            Cost::PerLimit(vec![1, 1_250])
        );
        assert_eq!(settled_cost(&reserved, None, 9), Cost::All(9));
    }

    #[tokio::test]
    async fn a_body_is_read_only_when_its_length_is_known_to_fit() {
        use http_body_util::Full;
        let reader = BodyUsage {
            max_bytes: 8,
            f: |_: &response::Parts, b: &[u8]| Some(b.len() as u64),
        };
        let parts = head(&[]);
        let body = Full::new(Bytes::from_static(b"hello"));
        let (usage, body) = reader.read(&parts, body).await;
        assert_eq!(usage, Some(5));
        assert_eq!(&body.collect().await.unwrap().to_bytes()[..], b"hello");
        let long = Full::new(Bytes::from_static(b"too long to read"));
        let (usage, body) = reader.read(&parts, long).await;
        assert_eq!(usage, None);
        assert_eq!(body.collect().await.unwrap().to_bytes().len(), 16);
    }
}

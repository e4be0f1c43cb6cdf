//! What a decision on a log returns: the [`Decision`] alone (the common
//! path) or with every limit's state ([`Detailed`], `Store::decide_each`).
//! The store's code is generic over it, so the common path does no more
//! work than before.

use slidelog_core::{Decision, Detailed, Log, Request, engine};

/// The answer of one decision on a log.
pub(crate) trait Outcome: Sized {
    /// A check: expire, decide, append when admitted.
    fn record(log: &mut Log, now: u64, request: &Request) -> Self;
    /// A peek: decide, append nothing.
    fn evaluate(log: &Log, now: u64, request: &Request) -> Self;
    /// Whether the request was admitted.
    fn allowed(&self) -> bool;
    /// The refusal of a blocked key, `remaining_ms` left; `None` for an
    /// answer a block does not refuse (a charge records usage already had).
    fn blocked(request: &Request, remaining_ms: u64) -> Option<Self>;
}

impl Outcome for Decision {
    fn record(log: &mut Log, now: u64, request: &Request) -> Self {
        engine::decide_and_record(log, now, request)
    }

    fn evaluate(log: &Log, now: u64, request: &Request) -> Self {
        engine::evaluate(log, now, request)
    }

    fn allowed(&self) -> bool {
        self.allowed
    }

    fn blocked(request: &Request, remaining_ms: u64) -> Option<Self> {
        Some(Decision::blocked(&request.limits()[0], remaining_ms))
    }
}

impl Outcome for Detailed {
    fn record(log: &mut Log, now: u64, request: &Request) -> Self {
        engine::decide_and_record_each(log, now, request)
    }

    fn evaluate(log: &Log, now: u64, request: &Request) -> Self {
        engine::evaluate_each(log, now, request)
    }

    fn allowed(&self) -> bool {
        self.decision.allowed
    }

    fn blocked(request: &Request, remaining_ms: u64) -> Option<Self> {
        Some(Detailed::blocked(request, remaining_ms))
    }
}

#[cfg(test)]
mod tests {
    use crate::MemoryStore;
    use slidelog_core::{Limit, Mode, Request};

    #[test]
    fn the_store_reports_every_limit_with_the_same_decision() {
        let store = MemoryStore::new();
        let limits = vec![
            Limit::new(3, 1_000).unwrap().named("requests").unwrap(),
            Limit::new(100, 60_000).unwrap().named("tokens").unwrap(),
        ];
        let call = |t| Request::with_costs("k", limits.clone(), vec![1, t]).unwrap();
        store.decide_at(&call(40), Mode::Record, 1_000).unwrap();
        let peeked = store.decide_each_at(&call(70), Mode::Peek, 1_010).unwrap();
        assert_eq!(
            peeked.decision,
            store.decide_at(&call(70), Mode::Peek, 1_010).unwrap()
        );
        assert!(!peeked.decision.allowed);
        let requests = peeked.limits[0].counts.unwrap();
        let tokens = peeked.limits[1].counts.unwrap();
        assert_eq!((requests.count, requests.remaining), (1, 2));
        assert_eq!((tokens.count, tokens.remaining), (40, 60));
        assert_eq!(tokens.retry_after_ms, 60_000 - 10);
        let checked = store
            .decide_each_at(&call(10), Mode::Record, 1_020)
            .unwrap();
        assert_eq!(checked.limits[1].counts.unwrap().count, 50);
        assert_eq!(checked.limits[1].limit.name(), Some("tokens"));
    }
}

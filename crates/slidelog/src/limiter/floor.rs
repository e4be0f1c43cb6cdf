//! The operator's granularity floor on a limiter's requests
//! (docs/design.md §1.1, [`super::LimiterBuilder::min_granularity`]): each
//! limit's granularity is raised to the floor's fraction of its window
//! before the store sees it, and the answer's limits report the one used.

use super::Limiter;
use slidelog_core::{Checks, Request};

impl Limiter {
    /// `request` raised to the floor; `None` when there is none or nothing
    /// needed raising.
    pub(super) fn floored(&self, request: &Request) -> Option<Request> {
        self.floor.and_then(|f| f.request(request))
    }

    /// Every check of `checks` raised to the floor; `None` when nothing
    /// needed raising.
    pub(super) fn floored_all(&self, checks: &Checks) -> Option<Checks> {
        let floor = self.floor?;
        let raised: Vec<Option<Request>> =
            checks.as_slice().iter().map(|r| floor.request(r)).collect();
        if raised.iter().all(Option::is_none) {
            return None;
        }
        let all = raised
            .into_iter()
            .zip(checks.as_slice())
            .map(|(r, old)| r.unwrap_or_else(|| old.clone()));
        // The same keys and limits' shapes: valid again.
        Checks::new(all).ok()
    }

    /// The granularity floor requests are raised to, if any.
    pub fn min_granularity(&self) -> Option<slidelog_core::GranularityFloor> {
        self.floor
    }
}

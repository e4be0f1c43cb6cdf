//! The JSON answer of `POST /v1/check` and `POST /v1/peek`: the decision of
//! docs/design.md §2 (the deciding limit's fields, unchanged), and, when the
//! request has several limits or a named one, a `limits` array with every
//! limit's state in the request's order:
//!
//! ```text
//! {"allowed":true,"limit":60,"window_ms":60000,"count":1,"remaining":59,
//!  "retry_after_ms":0,"reset_after_ms":60000,
//!  "limits":[{"name":"requests","limit":60,"window_ms":60000,"count":1,"remaining":59,
//!             "retry_after_ms":0,"reset_after_ms":60000}, …]}
//! ```
//!
//! An admitted check adds `"receipt"`, naming its record for a later settle
//! (docs/design.md §4.6).
//!
//! An unnamed limit's `name` is the one the RateLimit header fields give it
//! (`default`, or `<max>per<window_ms>ms` among several). Where only the
//! deciding limit is known (a rejection answered by the rejection cache) the
//! others have `null` counts, as in a degraded decision, which counted
//! nothing. `/v1/settle` and `/v1/charge` answer this body too.

use slidelog::{Decision, Detailed, Limit};

/// The body of a decision's answer.
#[derive(Debug, serde::Serialize)]
pub struct Answer {
    /// The decision's fields, at the top level as before.
    #[serde(flatten)]
    pub decision: Decision,
    /// Every limit's state; absent for one unnamed limit (the top level
    /// says it all).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<Vec<LimitAnswer>>,
    /// The receipt of the record an admitted check appended (docs/design.md
    /// §4.4), for a later `POST /v1/settle`; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt: Option<String>,
}

/// One limit's state in [`Answer::limits`].
#[derive(Debug, serde::Serialize)]
pub struct LimitAnswer {
    /// The limit's name, or the name the headers give an unnamed one.
    pub name: String,
    /// Its `max`.
    pub limit: u64,
    /// Its window in ms.
    pub window_ms: u64,
    /// The granularity it was decided at (docs/design.md §1.1), after an
    /// operator's floor; absent when 1 (exact).
    #[serde(skip_serializing_if = "is_exact")]
    pub granularity_ms: u64,
    /// Live units after the decision; `null` when the store did not say.
    pub count: Option<u64>,
    /// `limit - count`; `null` when the store did not say.
    pub remaining: Option<u64>,
    /// This limit's wait (0 when it admits); `null` when the store did not say.
    pub retry_after_ms: Option<u64>,
    /// Time until this limit's log is empty; `null` when the store did not say.
    pub reset_after_ms: Option<u64>,
}

/// Serde: a granularity of 1 ms (exact) is not written.
fn is_exact(granularity_ms: &u64) -> bool {
    *granularity_ms == 1
}

impl Answer {
    /// The same answer with the receipt of `request`'s record, when the
    /// decision appended one (an admitted check).
    pub fn with_receipt(
        mut self,
        request: &slidelog::Request,
        receipts: &slidelog::ReceiptKey,
    ) -> Self {
        self.receipt = receipts.issue(request, self.decision.record);
        self
    }

    /// The answer for `each`.
    pub fn new(each: &Detailed) -> Self {
        let limits: Vec<Limit> = each.limits.iter().map(|s| s.limit).collect();
        // A granular limit is listed, even alone, to say its granularity.
        let listed = limits.len() > 1
            || limits
                .iter()
                .any(|l| l.name().is_some() || l.granularity_ms() != 1);
        Self {
            decision: each.decision,
            limits: listed.then(|| {
                each.limits
                    .iter()
                    .map(|s| LimitAnswer {
                        name: slidelog::headers::policy_name(&limits, &s.limit),
                        limit: s.limit.max(),
                        window_ms: s.limit.window_ms(),
                        granularity_ms: s.limit.granularity_ms(),
                        count: s.counts.map(|c| c.count),
                        remaining: s.counts.map(|c| c.remaining),
                        retry_after_ms: s.counts.map(|c| c.retry_after_ms),
                        reset_after_ms: s.counts.map(|c| c.reset_after_ms),
                    })
                    .collect()
            }),
            receipt: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slidelog::{Mode, Request};

    #[tokio::test]
    async fn every_limit_is_listed_beside_the_unchanged_top_level() {
        let limiter = slidelog::Limiter::memory();
        let limits = slidelog::limit::parse_list("requests=2/minute, 100/minute").unwrap();
        let request = Request::with_costs("k", limits, vec![1, 30]).unwrap();
        let each = limiter.decide_each(&request, Mode::Record).await.unwrap();
        let json = serde_json::to_string(&Answer::new(&each)).unwrap();
        assert_eq!(
            json,
            r#"{"allowed":true,"limit":2,"window_ms":60000,"count":1,"remaining":1,"retry_after_ms":0,"reset_after_ms":60000,"limits":[{"name":"requests","limit":2,"window_ms":60000,"count":1,"remaining":1,"retry_after_ms":0,"reset_after_ms":60000},{"name":"100per60000ms","limit":100,"window_ms":60000,"count":30,"remaining":70,"retry_after_ms":0,"reset_after_ms":60000}]}"#
        );
        // One unnamed limit: today's body, no array.
        let one = Request::single("k1", "5/minute".parse().unwrap()).unwrap();
        let each = limiter.decide_each(&one, Mode::Record).await.unwrap();
        let json = serde_json::to_value(Answer::new(&each)).unwrap();
        assert!(json.get("limits").is_none());
        // The deciding limit only (a cached rejection): the others say null.
        let only = Detailed::deciding_only(&request, each_decision(&limiter, &request).await);
        let json = serde_json::to_value(Answer::new(&only)).unwrap();
        assert_eq!(json["limits"][0]["remaining"], 0);
        assert!(json["limits"][1]["remaining"].is_null());
    }

    async fn each_decision(limiter: &slidelog::Limiter, request: &Request) -> Decision {
        limiter.decide(request, Mode::Record).await.unwrap()
    }
}

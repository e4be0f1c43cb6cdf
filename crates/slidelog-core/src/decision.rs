//! What a decision reports (docs/design.md §2).

/// The outcome of one check or peek, as every interface reports it.
///
/// Two decisions are equal when they report the same fields; the
/// [`record`](Self::record) an admitted check appended is not compared (two
/// stores deciding alike name their records differently).
#[derive(Debug, Clone, Copy)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Decision {
    /// Admitted or not.
    pub allowed: bool,
    /// `max` of the deciding limit.
    pub limit: u64,
    /// Window of the deciding limit, in ms.
    pub window_ms: u64,
    /// Live records of the deciding limit after the decision.
    pub count: u64,
    /// `limit - count`.
    pub remaining: u64,
    /// 0 when allowed; otherwise the least wait (ms) after which the same
    /// request would be admitted if nothing else arrived.
    pub retry_after_ms: u64,
    /// Time (ms) until the deciding limit's log is empty; 0 when empty.
    pub reset_after_ms: u64,
    /// True only when the store failed and the fail-open policy answered.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "std::ops::Not::not")
    )]
    pub degraded: bool,
    /// True when the key is blocked (docs/design.md §5.4): refused whatever
    /// its counts, `retry_after_ms` is the block's remaining time; the
    /// reason is the store's ([`crate::Store::get_block`]).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "std::ops::Not::not")
    )]
    pub blocked: bool,
    /// The record an admitted check appended, which a receipt names
    /// ([`crate::Receipt::issue`]); `None` for a peek, a rejection, a
    /// degraded answer, or a store that does not name its records. Not
    /// serialized: interfaces answer the receipt text instead.
    #[cfg_attr(feature = "serde", serde(skip))]
    pub record: Option<crate::RecordRef>,
}

impl PartialEq for Decision {
    fn eq(&self, other: &Self) -> bool {
        (
            self.allowed,
            self.limit,
            self.window_ms,
            self.count,
            self.remaining,
            self.retry_after_ms,
            self.reset_after_ms,
            self.degraded,
            self.blocked,
        ) == (
            other.allowed,
            other.limit,
            other.window_ms,
            other.count,
            other.remaining,
            other.retry_after_ms,
            other.reset_after_ms,
            other.degraded,
            other.blocked,
        )
    }
}

impl Eq for Decision {}

impl Decision {
    /// [`retry_after_ms`](Self::retry_after_ms) as a `Duration`: zero when
    /// allowed, else the least wait before the same request is admitted.
    ///
    /// ```
    /// # use slidelog_core::{Decision, Limit};
    /// let d = Decision { allowed: false, retry_after_ms: 1_500, ..Decision::degraded_allow(&Limit::new(1, 60_000)?) };
    /// assert_eq!(d.retry_after(), std::time::Duration::from_millis(1_500));
    /// # Ok::<(), slidelog_core::InputError>(())
    /// ```
    pub fn retry_after(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.retry_after_ms)
    }

    /// [`reset_after_ms`](Self::reset_after_ms) as a `Duration`: the time
    /// until the deciding limit's log is empty.
    pub fn reset_after(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.reset_after_ms)
    }

    /// The answer of the fail-open policy when the store failed: admitted,
    /// marked degraded, reporting the first limit with nothing counted.
    pub fn degraded_allow(limit: &crate::Limit) -> Self {
        Self {
            allowed: true,
            limit: limit.max(),
            window_ms: limit.window_ms(),
            count: 0,
            remaining: limit.max(),
            retry_after_ms: 0,
            reset_after_ms: 0,
            degraded: true,
            blocked: false,
            record: None,
        }
    }

    /// The refusal of a blocked key (docs/design.md §5.4): every limit
    /// refused, nothing counted, `retry_after_ms` the block's remaining
    /// time; reported as the first limit.
    pub fn blocked(limit: &crate::Limit, remaining_ms: u64) -> Self {
        Self {
            allowed: false,
            limit: limit.max(),
            window_ms: limit.window_ms(),
            count: 0,
            remaining: 0,
            retry_after_ms: remaining_ms.max(1),
            reset_after_ms: 0,
            degraded: false,
            blocked: true,
            record: None,
        }
    }
}

/// What one limit of a request says after a decision: the same fields as
/// [`Decision`] reports for the deciding limit, for every limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitState {
    /// The limit (its name, `max` and window).
    pub limit: crate::Limit,
    /// Its counts, when the store reported them (see [`Detailed`]).
    pub counts: Option<Counts>,
}

/// One limit's counts after a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Live units of this limit after the decision (as if admitted, for a
    /// peek); a rejection appends nothing, so then the live units before it.
    pub count: u64,
    /// `max - count`, never below 0.
    pub remaining: u64,
    /// 0 when this limit admits the request; otherwise the least wait (ms)
    /// after which it would.
    pub retry_after_ms: u64,
    /// Time (ms) until this limit's log is empty; 0 when empty.
    pub reset_after_ms: u64,
}

/// A decision with every limit's state, in the request's order.
///
/// The memory store and the Redis scripts report every limit (the scripts'
/// reply then carries four numbers per limit, see [`Detailed::with_counts`]).
/// A store that reports only the deciding limit (an engine whose reply
/// carries one limit) leaves the others' [`LimitState::counts`] empty, as
/// does a degraded decision, which counted nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detailed {
    /// The decision, as [`Decision`] reports it.
    pub decision: Decision,
    /// Every limit of the request, in order.
    pub limits: Vec<LimitState>,
}

impl Detailed {
    /// The detail a store that reports only the deciding limit can give:
    /// the first of `request`'s limits with the deciding `max` and window
    /// gets the decision's counts; the others (and every limit of a
    /// degraded decision) none.
    pub fn deciding_only(request: &crate::Request, decision: Decision) -> Self {
        let mut found = decision.degraded;
        let limits = request
            .limits()
            .iter()
            .map(|&limit| {
                let deciding = !found
                    && limit.max() == decision.limit
                    && limit.window_ms() == decision.window_ms;
                found |= deciding;
                LimitState {
                    limit,
                    counts: deciding.then_some(Counts {
                        count: decision.count,
                        remaining: decision.remaining,
                        retry_after_ms: decision.retry_after_ms,
                        reset_after_ms: decision.reset_after_ms,
                    }),
                }
            })
            .collect();
        Self { decision, limits }
    }

    /// The detail of a store whose reply carries every limit's [`Counts`]
    /// in `request`'s order (the Redis replies' `count_i, remaining_i,
    /// retry_after_ms_i, reset_after_ms_i` after the decision's fields,
    /// docs/design.md §2). `counts` of another length than the request's
    /// limits (a reply of the deciding limit only) gives
    /// [`deciding_only`](Self::deciding_only).
    pub fn with_counts(request: &crate::Request, decision: Decision, counts: &[Counts]) -> Self {
        if counts.len() != request.limits().len() || decision.degraded {
            return Self::deciding_only(request, decision);
        }
        let limits = request
            .limits()
            .iter()
            .zip(counts)
            .map(|(&limit, &c)| LimitState {
                limit,
                counts: Some(c),
            })
            .collect();
        Self { decision, limits }
    }

    /// The answer for a check that a joint decision did not evaluate (it
    /// was refused first by another key's rejection still in force, without
    /// asking the store): nothing refused this check, so `allowed`, with
    /// nothing counted and no limit's counts (docs/design.md §1, "One
    /// request, several keys").
    pub fn unevaluated(request: &crate::Request) -> Self {
        let first = request.limits()[0];
        let decision = Decision {
            degraded: false,
            ..Decision::degraded_allow(&first)
        };
        Self {
            decision,
            limits: states(request, None),
        }
    }

    /// The refusal of a blocked key ([`Decision::blocked`]) with every
    /// limit refused for the block's remaining time, nothing counted.
    pub fn blocked(request: &crate::Request, remaining_ms: u64) -> Self {
        let decision = Decision::blocked(&request.limits()[0], remaining_ms);
        let counts = Counts {
            count: 0,
            remaining: 0,
            retry_after_ms: decision.retry_after_ms,
            reset_after_ms: 0,
        };
        Self {
            decision,
            limits: states(request, Some(counts)),
        }
    }

    /// Returns the state of the deciding limit's position, when one matches.
    pub fn deciding(&self) -> Option<&LimitState> {
        self.limits.iter().find(|s| {
            s.limit.max() == self.decision.limit && s.limit.window_ms() == self.decision.window_ms
        })
    }
}

/// Every limit of `request` with the same `counts` (none: not evaluated).
fn states(request: &crate::Request, counts: Option<Counts>) -> Vec<LimitState> {
    request
        .limits()
        .iter()
        .map(|&limit| LimitState { limit, counts })
        .collect()
}

//! What a decision reports (docs/design.md §2).

/// The outcome of one check or peek, as every interface reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
}

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
        }
    }
}

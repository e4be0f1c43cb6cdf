//! Waiting for room: [`Limiter::until_ready`] and
//! [`Limiter::until_ready_all`], as governor's `until_ready` and Upstash's
//! `blockUntilReady`, on the exact sliding log (docs/design.md §1, §6).
//!
//! A waiter takes its key's turn ([`super::queue`]: FIFO per key, one
//! waiter at a time asks the store), checks, and while refused sleeps until
//! the store's `retry_after_ms` (plus jitter, so processes that share a key
//! do not all ask at the same millisecond) and checks again. What can never
//! succeed fails at once: a cost above a limit's `max` (an input error), or
//! a retry time past the deadline. A store failure follows the limiter's
//! policy: fail-open answers at once, admitted and `degraded` (so a waiting
//! loop sees that nothing was counted); fail-closed keeps trying (the
//! limiter's health answers at once while the store is known down) until
//! the deadline, and then fails with the store's error.
//!
//! Cancel-safe: a waiter dropped while queued or asleep has recorded
//! nothing and releases its turn; one dropped during its store call is a
//! check dropped in flight (docs/design.md §6, late records).

use super::{Limiter, LimiterError};
use crate::Cost;
use slidelog_core::{Checks, Decision, InputError, JointDecision, Limit, Mode, StoreError};
use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, Instant};

/// How long [`Limiter::until_ready`] may wait, and how much jitter it adds
/// to each retry time.
///
/// ```
/// use std::time::Duration;
/// let wait = slidelog::Wait::up_to(Duration::from_secs(10)).jitter(Duration::from_millis(20));
/// assert!(wait.deadline() > std::time::Instant::now());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    deadline: Instant,
    jitter: Duration,
}

impl Wait {
    /// Waits at most `max` from now.
    pub fn up_to(max: Duration) -> Self {
        Self::until(Instant::now() + max)
    }

    /// Waits until `deadline` at the latest.
    pub fn until(deadline: Instant) -> Self {
        Self {
            deadline,
            jitter: Duration::ZERO,
        }
    }

    /// Adds a random delay of up to `up_to` to each retry time (never past
    /// the deadline): processes that share a key then spread their retries
    /// rather than all asking at the instant a unit frees. Waiters of one
    /// process need none (they take turns).
    pub fn jitter(mut self, up_to: Duration) -> Self {
        self.jitter = up_to;
        self
    }

    /// Returns the deadline.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// The time left before the deadline (zero once past it).
    fn left(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// A random delay below the jitter bound.
    fn random_jitter(&self) -> Duration {
        let nanos = self.jitter.as_nanos() as u64;
        if nanos == 0 {
            return Duration::ZERO;
        }
        // A fresh SipHash key per call is random enough to spread retries;
        // no dependency on a random number generator.
        let hasher = std::collections::hash_map::RandomState::new().build_hasher();
        Duration::from_nanos(hasher.finish() % nanos)
    }
}

/// Why [`Limiter::until_ready`] gave up. The cause of
/// [`InsufficientCapacity`](Self::InsufficientCapacity) and
/// [`Store`](Self::Store) is their `source()` (anyhow's `{:#}` prints it).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum WaitError {
    /// The cost is above a limit's `max` (or the limiter's bounds): no wait
    /// can ever admit it (governor's `InsufficientCapacity`). Failed at once.
    #[error("no wait can admit this request")]
    InsufficientCapacity(#[source] InputError),
    /// The request is not one the limiter takes (a bad key or limit).
    #[error(transparent)]
    Input(InputError),
    /// The store's retry time is past the deadline: failed at once, with
    /// the refusal (its `retry_after_ms` says when it would fit).
    #[error("the request fits again in {retry_after:?}, after the wait's deadline (in {left:?})")]
    TooLate {
        /// The refusal (the deciding key's, for a joint wait); boxed, to
        /// keep the error small.
        decision: Box<Decision>,
        /// When the request would fit.
        retry_after: Duration,
        /// What was left of the wait when it was refused.
        left: Duration,
    },
    /// The deadline passed while the waiter was queued behind waiters on
    /// the same key.
    #[error("the wait's deadline passed while queued behind other waiters on the key")]
    Queued,
    /// The store failed: at the deadline after an outage under fail-closed
    /// (it was asked until then), or at once when waiting cannot help (a
    /// full store, a misconfiguration).
    #[error("the store failed while waiting")]
    Store(#[source] StoreError),
}

impl From<LimiterError> for WaitError {
    fn from(e: LimiterError) -> Self {
        match e {
            LimiterError::Input(e @ (InputError::Cost { .. } | InputError::LimitCost { .. })) => {
                Self::InsufficientCapacity(e)
            }
            LimiterError::Input(e) => Self::Input(e),
            LimiterError::Store(e) => Self::Store(e),
        }
    }
}

/// Why a wait stopped, with the refusal it stopped on (a retry time past
/// the deadline), if any.
pub(crate) struct Stopped<T> {
    pub(crate) error: WaitError,
    /// Read by the layer's delay (feature `tower`), which answers it.
    #[cfg_attr(not(feature = "tower"), allow(dead_code))]
    pub(crate) refusal: Option<T>,
}

impl<T, E: Into<WaitError>> From<E> for Stopped<T> {
    fn from(e: E) -> Self {
        Self {
            error: e.into(),
            refusal: None,
        }
    }
}

/// An answer the wait loop can read: admitted, or when to ask again.
trait Answer {
    /// The wait before the same request fits; `None` when admitted.
    fn refused_for(&self) -> Option<Duration>;
    /// The decision to report when refused.
    fn refusal(&self) -> Decision;
}

impl Answer for Decision {
    fn refused_for(&self) -> Option<Duration> {
        (!self.allowed).then(|| self.retry_after())
    }
    fn refusal(&self) -> Decision {
        *self
    }
}

impl Answer for JointDecision {
    fn refused_for(&self) -> Option<Duration> {
        // Every refusing key must have room: the longest of their waits.
        let longest = self.checks.iter().filter(|c| !c.decision.allowed);
        (!self.allowed).then(|| {
            longest
                .map(|c| c.decision.retry_after())
                .max()
                .unwrap_or_default()
        })
    }
    fn refusal(&self) -> Decision {
        self.deciding().decision
    }
}

/// The pause between two asks while the store fails under fail-closed:
/// 50 ms doubling to 500 ms, as the limiter's health probe (docs/design.md
/// §6); the health answers at once while it knows the store down.
fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(50u64 << attempt.min(4)).min(Duration::from_millis(500))
}

impl Limiter {
    /// Waits until `cost` for `key` fits under every limit in `limits`, then
    /// records it and returns the admission: [`check`](Self::check), asked
    /// again at the store's retry time until admitted or `wait`'s deadline.
    ///
    /// Waiters of one limiter on one key are served in arrival order, one
    /// at a time asks the store. A wait that cannot succeed fails at once
    /// ([`WaitError::InsufficientCapacity`], [`WaitError::TooLate`]).
    /// Store down: fail-open answers at once, admitted and
    /// [`degraded`](Decision::degraded) (nothing was counted: a loop of
    /// waits should slow down by itself); fail-closed asks until the
    /// deadline and fails there ([`WaitError::Store`]). Dropping the future
    /// while it waits records nothing.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use slidelog::{Limit, Limiter, Wait};
    /// use std::time::{Duration, Instant};
    /// let limiter = Limiter::memory();
    /// let limits = [Limit::new(2, 200)?]; // 2 per 200 ms
    /// let started = Instant::now();
    /// for _ in 0..3 {
    ///     limiter.until_ready("job", &limits, 1, Wait::up_to(Duration::from_secs(1))).await?;
    /// }
    /// assert!(started.elapsed() >= Duration::from_millis(200)); // the third waited
    /// // 3 units never fit under a max of 2: an error at once.
    /// let never = limiter.until_ready("job", &limits, 3, Wait::up_to(Duration::from_secs(1))).await;
    /// assert!(matches!(never, Err(slidelog::WaitError::InsufficientCapacity(_))));
    /// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
    /// ```
    pub async fn until_ready(
        &self,
        key: impl Into<String>,
        limits: &[Limit],
        cost: impl Into<Cost>,
        wait: Wait,
    ) -> Result<Decision, WaitError> {
        let key: String = key.into();
        let request = cost
            .into()
            .request_of(&key, limits)
            .map_err(LimiterError::from)?;
        self.bounds
            .check(&request)
            .map_err(|e| LimiterError::from(InputError::from(e)))?;
        let turn = tokio::time::timeout_at(wait.deadline.into(), self.inner.queue.take([&*key]));
        let _turn = turn.await.map_err(|_| WaitError::Queued)?;
        let request = &request;
        self.wait_loop(wait, move || self.decide(request, Mode::Record))
            .await
            .map_err(|s| s.error)
    }

    /// [`until_ready`](Self::until_ready) for a request over several keys
    /// ([`decide_all`](Self::decide_all): admitted in every key or recorded
    /// in none). The waiter takes the turn of every key it touches; a
    /// refusal waits for the longest wait of the refusing keys.
    pub async fn until_ready_all(
        &self,
        checks: &Checks,
        wait: Wait,
    ) -> Result<JointDecision, WaitError> {
        self.wait_all(checks, wait).await.map_err(|s| s.error)
    }

    /// [`until_ready_all`](Self::until_ready_all), keeping the last refusal
    /// when it stops on one (the layer answers it as a 429).
    pub(crate) async fn wait_all(
        &self,
        checks: &Checks,
        wait: Wait,
    ) -> Result<JointDecision, Stopped<JointDecision>> {
        self.bounds
            .check_all(checks)
            .map_err(|e| Stopped::from(LimiterError::from(InputError::from(e))))?;
        let keys = checks.as_slice().iter().map(|r| r.key());
        let turn = tokio::time::timeout_at(wait.deadline.into(), self.inner.queue.take(keys));
        let _turn = turn.await.map_err(|_| Stopped::from(WaitError::Queued))?;
        self.wait_loop(wait, move || self.decide_all(checks, Mode::Record))
            .await
    }

    /// Asks with `ask` until admitted, a refusal past the deadline, an
    /// error waiting cannot cure, or the deadline in an outage.
    async fn wait_loop<T: Answer, F>(
        &self,
        wait: Wait,
        mut ask: impl FnMut() -> F,
    ) -> Result<T, Stopped<T>>
    where
        F: Future<Output = Result<T, LimiterError>>,
    {
        let mut failures = 0;
        loop {
            let (pause, failing) = match ask().await {
                Ok(answer) => match answer.refused_for() {
                    None => return Ok(answer),
                    Some(retry_after) if retry_after > wait.left() => {
                        let error = WaitError::TooLate {
                            decision: Box::new(answer.refusal()),
                            retry_after,
                            left: wait.left(),
                        };
                        return Err(Stopped {
                            error,
                            refusal: Some(answer),
                        });
                    }
                    Some(retry_after) => (retry_after + wait.random_jitter(), None),
                },
                Err(LimiterError::Store(e)) if e.is_transient() => {
                    failures += 1;
                    (backoff(failures - 1), Some(e))
                }
                Err(e) => return Err(Stopped::from(e)),
            };
            // Never past the deadline: at it, the last failure is the answer.
            tokio::time::sleep(pause.min(wait.left())).await;
            if wait.left().is_zero()
                && let Some(e) = failing
            {
                return Err(Stopped::from(WaitError::Store(e)));
            }
        }
    }
}

//! The one trait every store implements. Its operation decides *and* records
//! in one atomic step: there is no separate "check" followed by an "update",
//! so no interleaving of callers can admit more than `max`.

use crate::{Checks, Decision, Detailed, JointDecision, LimitState, Receipt, Request, StoreError};

/// The prefix of every store key unless configured otherwise: the original
/// design's layout, `rate:sliding:<key>` (docs/design.md §4).
pub const DEFAULT_KEY_PREFIX: &str = "rate:sliding:";

/// The largest explicit time ([`Now::At`]) in Unix ms: 2^53 - 1, the largest
/// integer below which every integer is exact in a double (Redis scores, JSON
/// numbers); about the year 287,000 (docs/design.md §3).
pub const MAX_NOW_MS: u64 = (1 << 53) - 1;

/// Whether a decision appends records when it admits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Decide and, when admitted, append one record weighted by the
    /// request's cost (a check).
    Record,
    /// Decide and append nothing (a peek).
    Peek,
}

/// Which clock a decision uses (docs/design.md §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Now {
    /// The store's own clock: Redis `TIME` inside the script, the process
    /// clock for the memory store. Every instance shares it.
    #[default]
    Server,
    /// An explicit time in Unix ms: the caller's clock, or a replayed trace.
    At(u64),
}

impl Now {
    /// The time in Unix ms: the given one, or `clock`'s reading for
    /// [`Now::Server`] (stores whose own clock is a process clock).
    pub fn or_clock(self, clock: &dyn crate::Clock) -> u64 {
        match self {
            Self::At(ms) => ms,
            Self::Server => clock.now_ms(),
        }
    }
}

/// The answer of a settle ([`Store::settle`], docs/design.md §4.6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    /// True when the record was found and now carries the settled costs
    /// (or, settled to 0 everywhere, was removed); false when it was gone
    /// (expired, or the key was reset), so nothing changed.
    pub settled: bool,
    /// The limits after the settle, as [`Store::settle`] describes them;
    /// its [`record`](Decision::record) names the settled record (for a
    /// receipt of its new costs), `None` when it was removed or not found.
    pub decision: Decision,
    /// Every limit's state after the settle, in the request's order: the
    /// fields [`decision`](Self::decision) gives the deciding limit, for
    /// each limit (`retry_after_ms` 0 where one more unit fits). A store
    /// whose reply carries the deciding limit only leaves the others'
    /// [`LimitState::counts`] empty, as [`Detailed::deciding_only`] does.
    pub limits: Vec<LimitState>,
    /// Why the store refused the receipt itself, changing nothing:
    /// [`ReceiptError::Spent`](crate::ReceiptError::Spent) (it settled
    /// once already) or [`ReceiptError::TooManySettles`](crate::ReceiptError::TooManySettles).
    /// `None` when the store settled it, or found no record for it.
    pub refused: Option<crate::ReceiptError>,
}

impl Settled {
    /// The decision and every limit's state, as a [`Detailed`] (what a
    /// charge answers).
    pub fn detailed(&self) -> Detailed {
        Detailed {
            decision: self.decision,
            limits: self.limits.clone(),
        }
    }
}

/// The id under which [`Store::charge_once`] charges at most once, and how
/// long the store remembers it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OnceMark {
    /// Unique per charged record: an instance's id and a sequence number
    /// (`<instance hex>:<seq>`), at most [`OnceMark::MAX_ID_BYTES`] bytes
    /// of `[0-9a-zA-Z:_-]`.
    pub id: String,
    /// How long the store remembers the id, in ms (at least 1).
    pub ttl_ms: u64,
}

impl OnceMark {
    /// The longest id, in bytes.
    pub const MAX_ID_BYTES: usize = 64;

    /// Returns the mark, or why it is not one: an empty or too long id, a
    /// byte outside `[0-9a-zA-Z:_-]`, or a TTL of 0.
    pub fn new(id: impl Into<String>, ttl_ms: u64) -> Result<Self, BadOnceMark> {
        let id = id.into();
        let fits = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b':' | b'_' | b'-');
        if id.is_empty() || id.len() > Self::MAX_ID_BYTES || !id.bytes().all(fits) {
            return Err(BadOnceMark(format!(
                "once id must be 1 to {} bytes of [0-9a-zA-Z:_-], got {id:?}",
                Self::MAX_ID_BYTES
            )));
        }
        if ttl_ms == 0 {
            return Err(BadOnceMark("once ttl_ms must be at least 1, got 0".into()));
        }
        Ok(Self { id, ttl_ms })
    }
}

/// Why an id and TTL are no [`OnceMark`], naming the field and the bound.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadOnceMark(String);

/// What a store counted about its own calls since it was made, for the
/// metrics export ([`Store::stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoreStats {
    /// Checks recorded although their caller had timed out (the reply came
    /// late, and it admitted).
    pub late_records: u64,
    /// Checks whose caller timed out and whose reply never came: they may or
    /// may not have been recorded.
    pub unknown_outcomes: u64,
    /// The nodes the store spreads its keys over, when it has several (a
    /// Redis Cluster's masters in the store's slot map); 0 for a store of
    /// one node, or before the map is read.
    pub nodes: u32,
    /// Of [`nodes`](Self::nodes), how many are known down now: calls for
    /// their keys are answered at once by policy while one probe per node
    /// retries it; the other nodes decide as usual.
    pub nodes_down: u32,
    /// How long the node down longest has been known down, in ms; 0 when
    /// none is.
    pub longest_node_down_ms: u64,
}

/// What a store of this process's memory offers its owner beyond deciding:
/// sweeping expired logs, reporting what it holds, and deciding without a
/// future ([`Store::in_process`]).
pub trait InProcess: Send + Sync {
    /// Drops every log that has expired; returns how many keys were dropped.
    fn sweep(&self) -> usize;

    /// [`Store::decide`], answered synchronously: a store in this process's
    /// memory never waits, so its owner (the `slidelog` Limiter) decides
    /// without the trait's boxed future per call (measured: BENCHMARKS.md).
    fn decide_now(&self, request: &Request, mode: Mode, now: Now) -> Result<Decision, StoreError>;

    /// [`Store::decide_each`], answered synchronously (see
    /// [`decide_now`](Self::decide_now)).
    fn decide_each_now(
        &self,
        request: &Request,
        mode: Mode,
        now: Now,
    ) -> Result<Detailed, StoreError>;

    /// [`Store::decide_all`], answered synchronously (see
    /// [`decide_now`](Self::decide_now)).
    fn decide_all_now(
        &self,
        checks: &Checks,
        mode: Mode,
        now: Now,
    ) -> Result<JointDecision, StoreError>;

    /// Returns what the store holds against its bounds.
    fn usage(&self) -> Usage;

    /// [`Store::get_override`], answered synchronously (no boxed future
    /// on every decision). The default: none.
    fn override_now(&self, key: &str) -> Option<crate::Override> {
        let _ = key;
        None
    }
}

/// What an in-process store holds against its bounds ([`InProcess::usage`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// Keys held (live or not yet swept).
    pub keys: usize,
    /// The cap on the number of keys.
    pub key_cap: usize,
    /// Bytes held by logs, keys and their table slots.
    pub bytes: usize,
    /// The budget of bytes held.
    pub byte_limit: usize,
}

/// A place where logs live, shared by every caller that decides on them.
#[async_trait::async_trait]
pub trait Store: Send + Sync + std::fmt::Debug {
    /// Decides on `request` at `now` and, in [`Mode::Record`], appends one
    /// record weighted by the request's cost when admitted, atomically with
    /// the decision (docs/design.md §1).
    async fn decide(&self, request: &Request, mode: Mode, now: Now)
    -> Result<Decision, StoreError>;

    /// [`decide`](Self::decide) with every limit's state, in one call.
    /// The default reports the deciding limit only
    /// ([`Detailed::deciding_only`]): a store whose reply carries one limit
    /// leaves the others' counts empty rather than ask again.
    async fn decide_each(
        &self,
        request: &Request,
        mode: Mode,
        now: Now,
    ) -> Result<Detailed, StoreError> {
        let decision = self.decide(request, mode, now).await?;
        Ok(Detailed::deciding_only(request, decision))
    }

    /// Decides `checks` (several keys, each with its own limits and costs)
    /// as one request, all or nothing, atomically (docs/design.md §1, "One
    /// request, several keys"): admitted only if every check admits, and in
    /// [`Mode::Record`] then recorded in every key; refused, and recorded in
    /// none. The answer gives every key's state ([`JointDecision`], whose
    /// rule [`crate::engine::decide_all`] states).
    ///
    /// The default decides one check with [`decide_each`](Self::decide_each)
    /// and refuses several with [`StoreError::Unsupported`]: a store must
    /// not decide them one by one.
    async fn decide_all(
        &self,
        checks: &Checks,
        mode: Mode,
        now: Now,
    ) -> Result<JointDecision, StoreError> {
        match checks.as_slice() {
            [one] => Ok(JointDecision::of(vec![
                self.decide_each(one, mode, now).await?,
            ])),
            _ => Err(StoreError::Unsupported {
                store: self.kind(),
                operation: "decide_all",
            }),
        }
    }

    /// Changes the costs of the record `receipt` names to `request`'s costs
    /// (up or down; 0 in a limit counts it nowhere in that limit; 0 in every
    /// limit removes it), atomically, and answers the limits after the
    /// change ([`Settled`]). `request` comes from [`Request::usage`] and
    /// `receipt` has been verified against it (opened by a
    /// [`crate::ReceiptKey`], or [`Receipt::for_request`]):
    /// same key, same limits. Records with the receipt's timestamp and costs
    /// are interchangeable: a store settles any one of them (the one with
    /// the receipt's id, when the store names records). The record's
    /// timestamp never changes. Not found (expired, reset): `settled` false
    /// and nothing changes.
    ///
    /// The answer's limit fields describe the log as it stands after the
    /// change: for each limit `count` = its live units, `remaining` =
    /// `max - count` (0 when over), `retry_after_ms` = the least wait before
    /// one more unit fits (0 when one does), `reset_after_ms` = the time
    /// until no live record costs anything in it; `allowed` = one more unit
    /// fits in every limit; the deciding limit is chosen as a check of cost
    /// 1 chooses it (docs/design.md §2). [`Settled::limits`] gives every
    /// limit these fields.
    ///
    /// The default refuses with [`StoreError::Unsupported`].
    async fn settle(
        &self,
        request: &Request,
        receipt: &Receipt,
        now: Now,
    ) -> Result<Settled, StoreError> {
        let _ = (request, receipt, now);
        Err(StoreError::Unsupported {
            store: self.kind(),
            operation: "settle",
        })
    }

    /// Appends one record of `request`'s costs at `now` without deciding
    /// (usage known after the fact, when nothing was reserved): the record
    /// counts even when it takes a limit over its max. Costs of 0 in every
    /// limit append nothing. `request` comes from [`Request::usage`].
    /// Answers the limits after recording, as [`settle`](Self::settle) does
    /// (the decision's `record` names the appended record), with every
    /// limit's state ([`Detailed::limits`]).
    ///
    /// The default refuses with [`StoreError::Unsupported`].
    async fn charge(&self, request: &Request, now: Now) -> Result<Detailed, StoreError> {
        let _ = (request, now);
        Err(StoreError::Unsupported {
            store: self.kind(),
            operation: "charge",
        })
    }

    /// [`charge`](Self::charge) at most once per `once.id` (docs/design.md
    /// §6, "Local answers"): the store checks the id and charges
    /// atomically, and remembers it for `once.ttl_ms`, so a charge sent
    /// again (its reply was lost, the store failed mid-way) is a no-op.
    /// Answers `true` when this call charged, `false` when the id had
    /// charged already (nothing changed).
    ///
    /// The default refuses with [`StoreError::Unsupported`].
    async fn charge_once(
        &self,
        request: &Request,
        now: Now,
        once: &OnceMark,
    ) -> Result<bool, StoreError> {
        let _ = (request, now, once);
        Err(StoreError::Unsupported {
            store: self.kind(),
            operation: "charge_once",
        })
    }

    /// The receipt secret that every instance sharing this store uses
    /// (docs/design.md §4.6, "Signed receipts"): the one stored, or `fresh`
    /// stored now when there was none (set once, atomically, so concurrent
    /// first instances agree). `None` (the default): the store keeps no
    /// shared secret (an in-process store: its receipts are its own).
    async fn receipt_secret(&self, fresh: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let _ = fresh;
        Ok(None)
    }

    /// Blocks `key` for `block.remaining_ms` with its reason
    /// (docs/design.md §5.4): every decision on it is refused
    /// ([`Decision::blocked`]) until the block expires, on every instance
    /// sharing the store. `only_new`: keep a block already there (a limit's
    /// `block_ms`: refusals during a block never extend it). Past the
    /// store's cap on blocks and overrides, [`StoreError::Full`] with
    /// [`crate::FullLimit::Controls`]. Answers whether this call set it.
    ///
    /// The default refuses with [`StoreError::Unsupported`].
    async fn put_block(
        &self,
        key: &str,
        block: &crate::Block,
        only_new: bool,
    ) -> Result<bool, StoreError> {
        let _ = (key, block, only_new);
        Err(self.unsupported("put_block"))
    }

    /// Deletes `key`'s block; answers whether one was in force.
    async fn delete_block(&self, key: &str) -> Result<bool, StoreError> {
        let _ = key;
        Err(self.unsupported("delete_block"))
    }

    /// `key`'s block in force, with its remaining time.
    async fn get_block(&self, key: &str) -> Result<Option<crate::Block>, StoreError> {
        let _ = key;
        Err(self.unsupported("get_block"))
    }

    /// Puts `key`'s override for `rule.remaining_ms` (replacing one there),
    /// bounded by the same cap as blocks.
    async fn put_override(&self, key: &str, rule: &crate::Override) -> Result<(), StoreError> {
        let _ = (key, rule);
        Err(self.unsupported("put_override"))
    }

    /// Deletes `key`'s override; answers whether one was in force.
    async fn delete_override(&self, key: &str) -> Result<bool, StoreError> {
        let _ = key;
        Err(self.unsupported("delete_override"))
    }

    /// `key`'s override in force, with its remaining time. The default:
    /// none (a store that keeps no overrides never has one).
    async fn get_override(&self, key: &str) -> Result<Option<crate::Override>, StoreError> {
        let _ = key;
        Ok(None)
    }

    /// How many blocks and how many overrides the store holds, when it
    /// counts them (entries expired but not yet dropped may count).
    async fn control_count(&self) -> Result<Option<(usize, usize)>, StoreError> {
        Ok(None)
    }

    /// [`StoreError::Unsupported`] for `operation` on this store.
    fn unsupported(&self, operation: &'static str) -> StoreError {
        StoreError::Unsupported {
            store: self.kind(),
            operation,
        }
    }

    /// Deletes the key's log. Returns whether a log existed.
    async fn reset(&self, key: &str) -> Result<bool, StoreError>;

    /// Answers when the store is reachable (readiness).
    async fn ping(&self) -> Result<(), StoreError>;

    /// Returns a short name for logs and metrics: "memory", "redis", …
    fn kind(&self) -> &'static str;

    /// Returns the store's in-process side when it lives in this process's
    /// memory (its sweeps and usage). Such a store answers without I/O, so
    /// a limiter neither bounds its calls by a timer nor caches its
    /// rejections. `None` (the default) for a store reached over a network.
    fn in_process(&self) -> Option<&dyn InProcess> {
        None
    }

    /// Returns this store's own counters (each store counts its own; none
    /// is process-wide). A store with nothing to report keeps the default.
    fn stats(&self) -> StoreStats {
        StoreStats::default()
    }

    /// Decide and record, on the store's clock.
    async fn check(&self, request: &Request) -> Result<Decision, StoreError> {
        self.decide(request, Mode::Record, Now::Server).await
    }

    /// Decide without recording, on the store's clock.
    async fn peek(&self, request: &Request) -> Result<Decision, StoreError> {
        self.decide(request, Mode::Peek, Now::Server).await
    }
}

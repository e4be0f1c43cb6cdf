//! The local policy ([`FailurePolicy::Local`], docs/design.md §6, "Local
//! answers"): while the store is known down, or a call fails transiently,
//! a limiter decides every limit at `ceil(max × share)` in its own memory
//! store (the same engine, exact), marks the answers `degraded`, and
//! journals every record it admits. When the store returns, one background
//! task per limiter ([`charge_back`]) charges each record back to the store
//! at its own timestamp, once ([`Store::charge_once`](slidelog_core::Store::charge_once)
//! with an id of this instance and a sequence number). A key with records
//! still to charge back is answered locally until they are charged, so the
//! store's window is exact from its first decision on. The journal is
//! bounded ([`DEFAULT_JOURNAL_CAP`]): past it a local admission is refused
//! with an error rather than the journal grown.

mod answer;
mod charge_back;
mod journal;

use super::{FailurePolicy, Inner};
use crate::metrics::MetricsHook;
use journal::{Entry, Journal};
use parking_lot::Mutex;
use slidelog_core::{
    Checks, Detailed, InputError, JointDecision, Limit, Mode, Now, OnceMark, Request, StoreError,
    SystemClock,
};
use slidelog_memory::MemoryStore;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The most records a limiter's journal holds by default: at about 200
/// bytes each, 20 MB. Past it, local admissions are refused (an error, HTTP
/// 503) until the charge-back has room.
pub const DEFAULT_JOURNAL_CAP: usize = 100_000;

/// How long past a record's longest window the store remembers its once
/// id: a charge-back repeated later than that would find the record
/// expired anyway, and is not sent.
const ONCE_MARGIN_MS: u64 = 60_000;

/// One limiter's local answers: its memory store, journal and charge-back.
#[derive(Debug)]
pub(crate) struct Local {
    policy: FailurePolicy,
    store: MemoryStore,
    journal: Mutex<Journal>,
    /// The journal's length, read without its lock on every decision.
    pending: AtomicUsize,
    cap: usize,
    /// This limiter's part of every once id (random, so two instances, or
    /// one restarted, never share an id).
    instance: String,
    seq: AtomicU64,
    metrics: Option<Arc<dyn MetricsHook>>,
}

impl Local {
    /// The local part of a limiter under `policy`; `None` unless it is
    /// [`FailurePolicy::Local`].
    pub(crate) fn new(
        policy: FailurePolicy,
        cap: usize,
        metrics: Option<Arc<dyn MetricsHook>>,
    ) -> Option<Arc<Self>> {
        policy.local_max(1)?;
        let random = slidelog_core::ReceiptKey::random_secret();
        let instance: String = random[..8].iter().map(|b| format!("{b:02x}")).collect();
        Some(Arc::new(Self {
            policy,
            store: MemoryStore::new(),
            journal: Mutex::new(Journal::default()),
            pending: AtomicUsize::new(0),
            cap,
            instance,
            seq: AtomicU64::new(0),
            metrics,
        }))
    }

    /// Whether any of `keys` has records awaiting charge-back.
    pub(crate) fn holds<'a>(&self, mut keys: impl Iterator<Item = &'a str>) -> bool {
        if self.pending.load(Ordering::Acquire) == 0 {
            return false;
        }
        let journal = self.journal.lock();
        keys.any(|k| journal.holds(k))
    }

    /// How many records await charge-back.
    pub(crate) fn pending(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }

    /// Decides `request` locally, every limit at its share.
    pub(crate) fn decide_each(
        self: &Arc<Self>,
        inner: &Inner,
        request: &Request,
        mode: Mode,
        now: Now,
    ) -> Result<Detailed, StoreError> {
        let requests = std::slice::from_ref(request);
        self.journaled(inner, requests, mode, now, |store, ts| {
            let each = self.each_at(store, request, mode, ts);
            let allowed = each.decision.allowed;
            Ok((each, allowed))
        })
    }

    /// Decides `checks` locally as one request, all or nothing.
    pub(crate) fn decide_all(
        self: &Arc<Self>,
        inner: &Inner,
        checks: &Checks,
        mode: Mode,
        now: Now,
    ) -> Result<JointDecision, StoreError> {
        self.journaled(inner, checks.as_slice(), mode, now, |store, ts| {
            let scaled: Result<Vec<Request>, InputError> =
                checks.as_slice().iter().map(|r| self.scaled(r)).collect();
            let joint = match scaled.and_then(Checks::new) {
                Ok(scaled) => store.decide_all_at(&scaled, mode, ts).map(|mut j| {
                    j.checks.iter_mut().for_each(mark);
                    j
                }),
                // Some cost is above its local share: never admitted here.
                Err(_) => Ok(JointDecision::of(
                    checks
                        .as_slice()
                        .iter()
                        .map(|r| self.each_at(store, r, Mode::Peek, ts))
                        .collect(),
                )),
            }?;
            let allowed = joint.allowed;
            Ok((joint, allowed))
        })
    }

    /// Charges `request` (a [`Request::usage`]) locally, unchecked as the
    /// store would, and journals it (costs 0 everywhere: nothing).
    pub(crate) fn charge(
        self: &Arc<Self>,
        inner: &Inner,
        request: &Request,
        now: Now,
    ) -> Result<Detailed, StoreError> {
        let requests = std::slice::from_ref(request);
        self.journaled(inner, requests, Mode::Record, now, |store, ts| {
            let mut each = store.charge_at(request, ts)?;
            mark(&mut each);
            let recorded = request.costs().iter().any(|&c| c > 0);
            Ok((each, recorded))
        })
    }

    /// Runs `decide` under the journal's lock, refusing past the cap, and
    /// journals `requests` when it admitted in [`Mode::Record`].
    fn journaled<T>(
        self: &Arc<Self>,
        inner: &Inner,
        requests: &[Request],
        mode: Mode,
        now: Now,
        decide: impl FnOnce(&MemoryStore, u64) -> Result<(T, bool), StoreError>,
    ) -> Result<T, StoreError> {
        let ts = now.or_clock(&SystemClock);
        let mut journal = self.journal.lock();
        let adding = if mode == Mode::Record {
            requests.len()
        } else {
            0
        };
        if journal.len() + adding > self.cap {
            if let Some(m) = &self.metrics {
                m.local_journal_full();
            }
            return Err(StoreError::Unavailable(format!(
                "local journal full: {} records admitted during the store outage await charge-back (the cap); refused until the store returns and takes them",
                journal.len()
            )));
        }
        let (answer, allowed) = decide(&self.store, ts)?;
        if allowed && mode == Mode::Record {
            for request in requests {
                journal.push(self.entry(request, ts)?);
            }
            self.pending.store(journal.len(), Ordering::Release);
            if let Some(m) = &self.metrics {
                m.local_pending(journal.len());
            }
            if !journal.draining {
                journal.draining = charge_back::start(self, inner);
            }
        }
        Ok(answer)
    }

    /// The local answer to `request` at `ts`: decided at its share, or,
    /// when its cost is above a limit's share, refused (never admitted
    /// here) with the counts a cost of 1 would see.
    fn each_at(&self, store: &MemoryStore, request: &Request, mode: Mode, ts: u64) -> Detailed {
        let answered = match self.scaled(request) {
            Ok(scaled) => store.decide_each_at(&scaled, mode, ts),
            Err(_) => self.too_costly(store, request, ts),
        };
        let mut each = answered.unwrap_or_else(|_| {
            // The memory store refuses only a new key past its bounds:
            // refused, nothing counted.
            let mut d = Detailed::unevaluated(request);
            d.decision.allowed = false;
            d
        });
        mark(&mut each);
        each
    }

    /// A refusal of a cost that no local share admits.
    fn too_costly(
        &self,
        store: &MemoryStore,
        request: &Request,
        ts: u64,
    ) -> Result<Detailed, StoreError> {
        let ones = request.with_cost(1).map_err(input_error)?;
        let scaled = self.scaled(&ones).map_err(input_error)?;
        let mut each = store.decide_each_at(&scaled, Mode::Peek, ts)?;
        let d = &mut each.decision;
        (d.allowed, d.remaining, d.retry_after_ms) = (false, 0, d.window_ms);
        Ok(each)
    }

    /// `request` with every limit at its local share (names kept).
    fn scaled(&self, request: &Request) -> Result<Request, InputError> {
        let limits = request
            .limits()
            .iter()
            .map(|l| {
                let max = self.policy.local_max(l.max()).unwrap_or(l.max());
                let scaled = Limit::new(max, l.window_ms())?;
                match l.name() {
                    Some(name) => scaled.named(name),
                    None => Ok(scaled),
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        if request.has_one_cost() {
            Request::new(request.key(), limits, request.cost())
        } else {
            Request::with_costs(request.key(), limits, request.costs().to_vec())
        }
    }

    /// The journal entry of `request` admitted locally at `ts`.
    fn entry(&self, request: &Request, ts: u64) -> Result<Entry, StoreError> {
        let costs = request.costs().to_vec();
        let charge =
            Request::usage(request.key(), request.limits().to_vec(), costs).map_err(input_error)?;
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let ttl = request.longest_window_ms().saturating_add(ONCE_MARGIN_MS);
        let once = OnceMark::new(format!("{}:{seq}", self.instance), ttl)
            .map_err(|e| StoreError::Backend(e.to_string()))?;
        Ok(Entry { charge, ts, once })
    }
}

/// A local answer: degraded, and naming no record (no receipt settles on
/// the store a record it does not hold yet).
fn mark(each: &mut Detailed) {
    each.decision.degraded = true;
    each.decision.record = None;
}

/// A request that a validated one derives could not be made (never
/// expected): an error of the store's kind, not a panic.
fn input_error(e: InputError) -> StoreError {
    StoreError::Backend(format!("local answer: {e}"))
}

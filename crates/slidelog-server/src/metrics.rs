//! The service's Prometheus metrics (docs/design.md §7), owned by one [`Metrics`] value
//! per server rather than a process-global recorder: several servers can run
//! in one process (tests do) and each renders only its own numbers.
//!
//! Every label value comes from a small fixed set, never from the request's
//! key. The `rule` label (`max/window`) is chosen by clients of the HTTP API,
//! so at most [`MAX_RULE_LABELS`] distinct rules get their own series; the
//! rest share `rule="other"`.
//!
//! The series a decision touches are resolved once, not looked up by name
//! and labels for every request (a registry lookup hashes the key and
//! clones it): the check and peek series when the metrics are made, a
//! rule's pair of series the first time that rule decides, a failure's
//! series the first time that failure happens. A series still appears in
//! the exposition only once it has been touched, as before.
//!
//! What every decision does is kept to plain loads where the value does
//! not change: its rule's series are found without a lock (`Rules`), and
//! `slidelog_store_up` is written only when it changes (`StoreUp`). Its
//! two counters are counted per thread (`Tallies`) and set into the
//! exporter's counters when rendered, so `/metrics` shows the same numbers.

mod control;

use metrics::{Counter, Gauge, Histogram, Key, Label, Recorder, SharedString, counter, gauge};
use metrics_exporter_prometheus::{
    Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder,
};
use parking_lot::RwLock;
use slidelog::metrics::{MetricsHook, Op};
use slidelog::store::MemoryStore;
use slidelog::{Decision, StoreError};
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Distinct `rule` label values kept before new rules count as `other`.
pub const MAX_RULE_LABELS: usize = 64;

/// Decision latency histogram buckets, in seconds (50 µs to 1 s): the memory
/// store answers in microseconds, Redis in a fraction of a millisecond, and
/// the store timeout caps the rest.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0,
];

// The names are defined once, in slidelog_inspect::names, which the
// dashboard and alert tests check against what is really exported.
use slidelog_inspect::names::{
    BAD_REQUESTS_TOTAL as BAD_REQUESTS, DECISION_DURATION_SECONDS as LATENCY,
    DECISIONS_TOTAL as DECISIONS, DEGRADED_DECISIONS_TOTAL as DEGRADED, MEMORY_BYTES, MEMORY_FULL,
    MEMORY_FULL_REFUSALS_TOTAL as MEMORY_FULL_REFUSALS, MEMORY_KEY_CAP, MEMORY_KEYS,
    MEMORY_LIMIT_BYTES, REJECTION_CACHE_ENTRIES as CACHE_ENTRIES,
    REJECTION_CACHE_LOCAL_ANSWERS_TOTAL as CACHE_LOCAL, RULE_DECISIONS_TOTAL as RULE_DECISIONS,
    STORE_DOWN_SECONDS as STORE_DOWN, STORE_ERRORS_TOTAL as STORE_ERRORS,
    STORE_LATE_RECORDS_TOTAL as LATE_RECORDS, STORE_NODES, STORE_NODES_DOWN,
    STORE_NODES_DOWN_SECONDS, STORE_UNKNOWN_OUTCOMES_TOTAL as UNKNOWN_OUTCOMES, STORE_UP,
};
use slidelog_inspect::names::{
    LOCAL_CHARGE_BACK_TOTAL, LOCAL_DECISIONS_TOTAL, LOCAL_JOURNAL_FULL_TOTAL, LOCAL_JOURNAL_RECORDS,
};

/// One server's metrics: its own recorder, and the handle that renders it.
pub struct Metrics {
    recorder: Arc<PrometheusRecorder>,
    handle: PrometheusHandle,
    /// The series of check and peek decisions, resolved at start.
    deciding: [Deciding; 2],
    /// `slidelog_store_up`, registered when first set (it is absent until
    /// the store was first heard from), set only when it changes.
    store_up: StoreUp,
    /// Each rule's `slidelog_rule_decisions_total` series (allowed, rejected).
    rules: Rules,
    /// The series of `rule="other"`, once a rule beyond the cap decides.
    other_rule: OnceLock<RuleSeries>,
    /// The counts of the decision and rule counters, not yet rendered.
    tallies: Tallies,
    /// `slidelog_store_errors_total` by op, kind and transient, resolved
    /// the first time each happens.
    store_errors: [[[OnceLock<Counter>; 2]; KINDS.len()]; OPS.len()],
    /// `slidelog_bad_requests_total` by field, resolved the first time.
    bad_requests: RwLock<HashMap<&'static str, Counter>>,
    memory: Option<Arc<MemoryStore>>,
    /// The limiter's rejection cache, when on: its counters are exported.
    rejections: std::sync::OnceLock<Arc<slidelog::rejection_cache::RejectionCache>>,
    /// The limiter's store: its own counters (`Store::stats`) are exported.
    store: std::sync::OnceLock<Arc<dyn slidelog_core::Store>>,
    /// Since when the store is known down (the limiter's outage mode).
    down_since: parking_lot::Mutex<Option<std::time::Instant>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// The ops of [`Op`], in the order of [`Metrics::store_errors`].
const OPS: [Op; 6] = [
    Op::Check,
    Op::Peek,
    Op::Reset,
    Op::Ping,
    Op::Settle,
    Op::Charge,
];

/// The `kind` label values of `slidelog_store_errors_total`.
const KINDS: [&str; 6] = [
    "timeout",
    "unavailable",
    "full",
    "backend",
    "misconfigured",
    "unsupported",
];

/// The series of one deciding op (check or peek).
struct Deciding {
    /// `slidelog_decisions_total{op, result="allowed"}`.
    allowed: Counter,
    /// `slidelog_decisions_total{op, result="rejected"}`.
    rejected: Counter,
    /// `slidelog_degraded_decisions_total{op}`.
    degraded: Counter,
    /// `slidelog_decision_duration_seconds{op}`, registered when first
    /// recorded into (an empty histogram would show as a series of zeros).
    latency: OnceLock<Histogram>,
}

/// One rule's `slidelog_rule_decisions_total` series, each registered the
/// first time the rule decides with that result.
struct RuleSeries {
    /// `(max, window_ms)`.
    key: (u64, u64),
    /// Which rule it is, in the order first seen ([`MAX_RULE_LABELS`] for
    /// `other`): where its counts are in [`Tallies`].
    index: usize,
    label: SharedString,
    allowed: OnceLock<Counter>,
    rejected: OnceLock<Counter>,
}

/// Where `op` is in [`Metrics::deciding`]; `None` for an op that decides nothing.
fn deciding_index(op: Op) -> Option<usize> {
    match op {
        Op::Check => Some(0),
        Op::Peek => Some(1),
        _ => None,
    }
}

/// The recorder's metadata of every series (the Prometheus recorder ignores it).
static METADATA: metrics::Metadata<'static> =
    metrics::Metadata::new(module_path!(), metrics::Level::INFO, Some(module_path!()));

impl Metrics {
    /// A fresh set of metrics. `memory` is the in-memory store, when that is
    /// the store, so that its key count is reported.
    pub fn new(memory: Option<Arc<MemoryStore>>) -> Self {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full(LATENCY.to_owned()), LATENCY_BUCKETS)
            .expect("the bucket list is a non-empty constant")
            .build_recorder();
        let handle = recorder.handle();
        let deciding = [Op::Check, Op::Peek].map(|op| Deciding {
            allowed: counter_of(
                &recorder,
                DECISIONS,
                &[("op", op.as_str()), ("result", "allowed")],
            ),
            rejected: counter_of(
                &recorder,
                DECISIONS,
                &[("op", op.as_str()), ("result", "rejected")],
            ),
            degraded: counter_of(&recorder, DEGRADED, &[("op", op.as_str())]),
            latency: OnceLock::new(),
        });
        let metrics = Self {
            recorder: Arc::new(recorder),
            handle,
            deciding,
            store_up: StoreUp::default(),
            rules: Rules::default(),
            other_rule: OnceLock::new(),
            tallies: Tallies::new(),
            store_errors: Default::default(),
            bad_requests: RwLock::new(HashMap::new()),
            memory,
            rejections: std::sync::OnceLock::new(),
            store: std::sync::OnceLock::new(),
            down_since: parking_lot::Mutex::new(None),
        };
        metrics.describe();
        metrics
    }

    fn describe(&self) {
        metrics::with_local_recorder(self.recorder.as_ref(), || {
            describe_decisions();
            describe_local();
            describe_store_calls();
            describe_memory();
            describe_store_health();
            control::describe();
            zero_watched_series();
        });
    }

    /// Counts one decision the store made.
    pub fn decision(&self, op: Op, decision: &Decision, elapsed: Duration) {
        if decision.blocked {
            self.blocked_refusal(op);
            self.set_store_up(1.0);
            return;
        }
        let rule = self.rule_series(decision.limit, decision.window_ms);
        let (series, result) = if decision.allowed {
            (&rule.allowed, "allowed")
        } else {
            (&rule.rejected, "rejected")
        };
        // Registered by the first decision that touches it; counted in the tallies.
        series.get_or_init(|| {
            let labels = [
                Label::new("rule", rule.label.clone()),
                Label::from_static_parts("result", result),
            ];
            let key = Key::from_parts(RULE_DECISIONS, labels.to_vec());
            self.recorder.register_counter(&key, &METADATA)
        });
        let rejected = usize::from(!decision.allowed);
        let shard = self.tallies.shard();
        shard.add(rule_tally(rule.index, rejected));
        match deciding_index(op) {
            Some(i) => {
                shard.add(deciding_tally(i, rejected));
                self.latency(i).record(elapsed.as_secs_f64());
            }
            // Only checks and peeks decide; counted by name should another op ever report.
            None => metrics::with_local_recorder(self.recorder.as_ref(), || {
                counter!(DECISIONS, "op" => op.as_str(), "result" => result).increment(1);
                metrics::histogram!(LATENCY, "op" => op.as_str()).record(elapsed.as_secs_f64());
            }),
        }
        self.set_store_up(1.0);
    }

    /// The latency histogram of the deciding op at `index`.
    fn latency(&self, index: usize) -> &Histogram {
        self.deciding[index].latency.get_or_init(|| {
            let op = [Op::Check, Op::Peek][index].as_str();
            let key = Key::from_parts(LATENCY, vec![Label::from_static_parts("op", op)]);
            self.recorder.register_histogram(&key, &METADATA)
        })
    }

    /// Registers the local policy's series at 0 (`--on-store-error local`
    /// on a remote store), so they are there before the first outage.
    pub fn local_policy(&self) {
        use slidelog::metrics::ChargeBack;
        metrics::with_local_recorder(self.recorder.as_ref(), || {
            for op in [Op::Check, Op::Peek] {
                for result in ["allowed", "rejected"] {
                    counter!(LOCAL_DECISIONS_TOTAL, "op" => op.as_str(), "result" => result)
                        .absolute(0);
                }
            }
            let outcomes = [
                ChargeBack::Charged,
                ChargeBack::Duplicate,
                ChargeBack::Expired,
                ChargeBack::Failed,
            ];
            for outcome in outcomes {
                counter!(LOCAL_CHARGE_BACK_TOTAL, "outcome" => outcome.as_str()).absolute(0);
            }
            gauge!(LOCAL_JOURNAL_RECORDS).set(0.0);
            counter!(LOCAL_JOURNAL_FULL_TOTAL).absolute(0);
        });
    }

    /// Counts a failed store call, and whether fail-open answered for it.
    pub fn store_error(&self, op: Op, error: &StoreError, degraded: bool, elapsed: Duration) {
        let kind = match error {
            StoreError::Timeout(_) => "timeout",
            StoreError::Unavailable(_) => "unavailable",
            StoreError::Full { .. } => "full",
            StoreError::Backend(_) => "backend",
            StoreError::Misconfigured(_) => "misconfigured",
            StoreError::Unsupported { .. } => "unsupported",
        };
        let transient = error.is_transient();
        let op_index = OPS.iter().position(|o| *o == op).unwrap_or(0);
        let kind_index = KINDS.iter().position(|k| *k == kind).unwrap_or(0);
        self.store_errors[op_index][kind_index][usize::from(transient)]
            .get_or_init(|| {
                let labels = vec![
                    Label::from_static_parts("op", op.as_str()),
                    Label::from_static_parts("kind", kind),
                    Label::from_static_parts("transient", if transient { "true" } else { "false" }),
                ];
                self.recorder
                    .register_counter(&Key::from_parts(STORE_ERRORS, labels), &METADATA)
            })
            .increment(1);
        match deciding_index(op) {
            Some(i) => {
                if degraded {
                    self.deciding[i].degraded.increment(1);
                }
                self.latency(i).record(elapsed.as_secs_f64());
            }
            None if degraded => metrics::with_local_recorder(self.recorder.as_ref(), || {
                counter!(DEGRADED, "op" => op.as_str()).increment(1);
            }),
            None => {}
        }
        self.set_store_up(0.0);
    }

    /// Records the outcome of a readiness probe.
    pub fn store_up(&self, up: bool) {
        self.set_store_up(if up { 1.0 } else { 0.0 });
    }

    #[inline]
    fn set_store_up(&self, value: f64) {
        if !self.store_up.holds(value) {
            self.change_store_up(value);
        }
    }

    #[cold]
    fn change_store_up(&self, value: f64) {
        self.store_up.set(value, || {
            self.recorder
                .register_gauge(&Key::from_static_name(STORE_UP), &METADATA)
        });
    }

    /// Counts a request refused as bad input; `field` is a fixed name.
    pub fn bad_request(&self, field: &'static str) {
        if let Some(counter) = self.bad_requests.read().get(field) {
            counter.increment(1);
            return;
        }
        let key = Key::from_parts(BAD_REQUESTS, vec![Label::from_static_parts("field", field)]);
        let counter = self.recorder.register_counter(&key, &METADATA);
        counter.increment(1);
        self.bad_requests.write().insert(field, counter);
    }

    /// Runs `f` with this server's recorder current, for figures recorded
    /// by other crates (the `slidelog inspect` gauges of `--inspect-every`).
    pub fn with_recorder<T>(&self, f: impl FnOnce() -> T) -> T {
        metrics::with_local_recorder(self.recorder.as_ref(), f)
    }

    /// This server's recorder, for crates that record from async code (the
    /// Envoy API's `slidelog_envoy_*` counters).
    pub fn recorder(&self) -> Arc<dyn metrics::Recorder + Send + Sync> {
        self.recorder.clone()
    }

    /// Exports the store's own counters (late records, unknown outcomes).
    pub fn watch_store(&self, store: Arc<dyn slidelog_core::Store>) {
        let _ = self.store.set(store);
    }

    /// Exports the counters of the limiter's rejection cache.
    pub fn watch_rejection_cache(&self, cache: Arc<slidelog::rejection_cache::RejectionCache>) {
        let _ = self.rejections.set(cache);
        metrics::with_local_recorder(self.recorder.as_ref(), || {
            use metrics::{describe_counter, describe_gauge};
            describe_counter!(
                CACHE_LOCAL,
                "Decisions answered by the local rejection cache, without the store."
            );
            describe_gauge!(
                CACHE_ENTRIES,
                "Rejections held by the local rejection cache."
            );
        });
    }

    /// Sets the exporter's decision and rule counters to their tallies
    /// (the counters only grow: a render racing another sets each to the
    /// larger count).
    fn fold_tallies(&self) {
        for (i, deciding) in self.deciding.iter().enumerate() {
            deciding
                .allowed
                .absolute(self.tallies.sum(deciding_tally(i, 0)));
            deciding
                .rejected
                .absolute(self.tallies.sum(deciding_tally(i, 1)));
        }
        let rules = self.rules.slots.iter().filter_map(OnceLock::get);
        for rule in rules.chain(self.other_rule.get()) {
            for (rejected, series) in [&rule.allowed, &rule.rejected].into_iter().enumerate() {
                if let Some(counter) = series.get() {
                    counter.absolute(self.tallies.sum(rule_tally(rule.index, rejected)));
                }
            }
        }
    }

    /// The Prometheus text exposition of everything recorded so far.
    pub fn render(&self) -> String {
        self.fold_tallies();
        if let Some(cache) = self.rejections.get() {
            let stats = cache.stats();
            metrics::with_local_recorder(self.recorder.as_ref(), || {
                counter!(CACHE_LOCAL).absolute(stats.local_answers);
                gauge!(CACHE_ENTRIES).set(stats.entries as f64);
            });
        }
        if let Some(memory) = &self.memory {
            let (keys, cap) = (memory.key_count(), memory.key_cap());
            let (bytes, budget) = (memory.bytes_held(), memory.memory_limit());
            let (full, refusals) = (memory.is_full(), memory.full_refusals());
            metrics::with_local_recorder(self.recorder.as_ref(), || {
                gauge!(MEMORY_KEYS).set(keys as f64);
                gauge!(MEMORY_KEY_CAP).set(cap as f64);
                gauge!(MEMORY_BYTES).set(bytes as f64);
                gauge!(MEMORY_LIMIT_BYTES).set(budget as f64);
                gauge!(MEMORY_FULL).set(f64::from(u8::from(full)));
                counter!(MEMORY_FULL_REFUSALS).absolute(refusals);
            });
        }
        // Checks of the store recorded after their caller timed out, and
        // those whose outcome never came back (the store's own counters).
        let stats = self.store.get().map(|s| s.stats()).unwrap_or_default();
        let down = (*self.down_since.lock()).map_or(0.0, |since| since.elapsed().as_secs_f64());
        metrics::with_local_recorder(self.recorder.as_ref(), || {
            gauge!(STORE_DOWN).set(down);
            counter!(LATE_RECORDS).absolute(stats.late_records);
            counter!(UNKNOWN_OUTCOMES).absolute(stats.unknown_outcomes);
            // A store of several nodes (a cluster) reports each one's health.
            if stats.nodes > 0 {
                gauge!(STORE_NODES).set(f64::from(stats.nodes));
                gauge!(STORE_NODES_DOWN).set(f64::from(stats.nodes_down));
                gauge!(STORE_NODES_DOWN_SECONDS).set(stats.longest_node_down_ms as f64 / 1e3);
            }
        });
        self.handle.render()
    }

    /// Folds histogram samples into their buckets; call it now and then so
    /// that memory stays bounded when nobody scrapes `/metrics`.
    pub fn run_upkeep(&self) {
        self.handle.run_upkeep();
    }

    /// The series of the rule `max`/`window_ms`: its own among the first
    /// [`MAX_RULE_LABELS`] rules, else those of `rule="other"`.
    fn rule_series(&self, max: u64, window_ms: u64) -> &RuleSeries {
        let key = (max, window_ms);
        let start = self.rules.hasher.hash_one(key) as usize;
        if let Some(series) = self.rules.find(key, start) {
            return series;
        }
        // A rule not seen yet: inserted once, under the lock, then only read.
        let mut held = self.rules.inserting.lock();
        if let Some(series) = self.rules.find(key, start) {
            return series;
        }
        if *held >= MAX_RULE_LABELS {
            return self.other_rule.get_or_init(|| {
                RuleSeries::new(key, MAX_RULE_LABELS, SharedString::const_str("other"))
            });
        }
        let label = SharedString::from(format!("{max}/{window_ms}ms"));
        let series = RuleSeries::new(key, *held, label);
        for i in 0..RULE_SLOTS {
            let slot = &self.rules.slots[(start + i) % RULE_SLOTS];
            if slot.get().is_none() {
                *held += 1;
                // Only the lock's holder fills slots: this one is still empty.
                return slot.get_or_init(|| series);
            }
        }
        unreachable!("the table has twice as many slots as rules")
    }
}

/// Slots of [`Rules`]: twice the rules it holds, so that a probe meets an
/// empty slot (the end of a miss) after a few steps.
const RULE_SLOTS: usize = 2 * MAX_RULE_LABELS;

/// The series of each rule seen, by `(max, window_ms)`, looked up for every
/// decision: an open-addressing table whose slots are only ever filled,
/// never emptied or moved, so that a lookup reads them without a lock (a
/// read lock and a shared pointer's count were four atomic writes per
/// decision, on lines every worker thread writes). Hashed with foldhash: a
/// client picks the keys, but the table never holds more than
/// [`MAX_RULE_LABELS`] of them, and the hasher is seeded at random, so
/// colliding keys cannot make a lookup slow.
struct Rules {
    slots: [OnceLock<RuleSeries>; RULE_SLOTS],
    hasher: foldhash::fast::RandomState,
    /// Taken to insert a rule; counts the rules held.
    inserting: parking_lot::Mutex<usize>,
}

impl Default for Rules {
    fn default() -> Self {
        Self {
            slots: std::array::from_fn(|_| OnceLock::new()),
            hasher: foldhash::fast::RandomState::default(),
            inserting: parking_lot::Mutex::new(0),
        }
    }
}

impl Rules {
    /// The series of `key`, probing from the slot `start` (its hash) to the
    /// first empty slot.
    fn find(&self, key: (u64, u64), start: usize) -> Option<&RuleSeries> {
        for i in 0..RULE_SLOTS {
            let series = self.slots[(start + i) % RULE_SLOTS].get()?;
            if series.key == key {
                return Some(series);
            }
        }
        None
    }
}

impl RuleSeries {
    fn new(key: (u64, u64), index: usize, label: SharedString) -> Self {
        // Shared, so that each series' key clones it without copying.
        let label = SharedString::from_shared(Arc::from(label.as_ref()));
        Self {
            key,
            index,
            label,
            allowed: OnceLock::new(),
            rejected: OnceLock::new(),
        }
    }
}

/// Counts of the counters every decision increments: the deciding op's
/// (`slidelog_decisions_total`) and its rule's
/// (`slidelog_rule_decisions_total`), by result. Each thread counts in its
/// own shard (a line no other thread writes, but for more threads than
/// shards), where the exporter's counter is two atomic additions on lines
/// every worker thread writes (its value and the recorder's generation).
/// [`Metrics::render`] sets each counter to the sum of the shards before
/// rendering, so `/metrics` shows the same counts; a series still appears
/// when first touched (registered by the decision that touches it).
struct Tallies {
    shards: Box<[Shard]>,
}

/// One thread's (or a few threads') counts, alone on its cache lines.
#[repr(align(128))]
struct Shard([AtomicU64; TALLIES]);

/// Counts per shard: allowed and rejected of check and peek, then of each
/// rule and of `other`.
const TALLIES: usize = 4 + 2 * (MAX_RULE_LABELS + 1);

/// Where the count of deciding op `index` (see [`deciding_index`]) with
/// result `rejected` (0 allowed, 1 rejected) is in a [`Shard`].
fn deciding_tally(index: usize, rejected: usize) -> usize {
    2 * index + rejected
}

/// Where the count of rule `index` ([`RuleSeries::index`]) with result
/// `rejected` is in a [`Shard`].
fn rule_tally(index: usize, rejected: usize) -> usize {
    4 + 2 * index + rejected
}

impl Tallies {
    fn new() -> Self {
        // A shard per core (a power of two, so that a thread's is a mask away).
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let shards = cores.next_power_of_two().min(64);
        Self {
            shards: (0..shards)
                .map(|_| Shard(std::array::from_fn(|_| AtomicU64::new(0))))
                .collect(),
        }
    }

    /// The calling thread's shard, by a hash of its id computed once per
    /// thread (no counter shared by the process: two threads may share a
    /// shard, which only costs contention on its lines).
    fn shard(&self) -> &Shard {
        thread_local! {
            static SHARD: usize = {
                use std::hash::{Hash, Hasher};
                let mut hasher = std::hash::DefaultHasher::new();
                std::thread::current().id().hash(&mut hasher);
                hasher.finish() as usize
            };
        }
        let index = SHARD.with(|shard| *shard) & (self.shards.len() - 1);
        &self.shards[index]
    }

    /// The count at `tally`, over every shard.
    fn sum(&self, tally: usize) -> u64 {
        self.shards
            .iter()
            .map(|shard| shard.0[tally].load(Ordering::Relaxed))
            .sum()
    }
}

impl Shard {
    fn add(&self, tally: usize) {
        self.0[tally].fetch_add(1, Ordering::Relaxed);
    }
}

/// `slidelog_store_up`, written only when it changes: every decision says
/// the store is up, and a gauge's write is an atomic write (two, with the
/// recorder's generation) to a line every worker thread would otherwise
/// write. The last value set is kept beside it, read with a plain load;
/// changes are made under a lock, state and gauge together, so that once
/// calls stop the gauge holds the last value any call set: a success after
/// a failure always finds the state at 0 and sets 1.
struct StoreUp {
    gauge: OnceLock<Gauge>,
    /// [`STORE_UP_UNSET`] until first set, then 0 or 1.
    state: AtomicU8,
    changing: parking_lot::Mutex<()>,
}

/// [`StoreUp::state`] before the gauge was first set.
const STORE_UP_UNSET: u8 = 0xff;

impl StoreUp {
    /// Tells whether the gauge was last set to `value` (0 or 1).
    #[inline]
    fn holds(&self, value: f64) -> bool {
        self.state.load(Ordering::Acquire) == u8::from(value != 0.0)
    }

    /// Sets the gauge to `value` (0 or 1) unless it already holds it;
    /// `register` makes the gauge the first time.
    fn set(&self, value: f64, register: impl FnOnce() -> Gauge) {
        if self.holds(value) {
            return;
        }
        let state = u8::from(value != 0.0);
        let _changing = self.changing.lock();
        self.state.store(state, Ordering::Release);
        self.gauge.get_or_init(register).set(value);
    }
}

impl Default for StoreUp {
    fn default() -> Self {
        Self {
            gauge: OnceLock::new(),
            state: AtomicU8::new(STORE_UP_UNSET),
            changing: parking_lot::Mutex::new(()),
        }
    }
}

/// Registers the counter `name{labels}` with `recorder`.
fn counter_of(
    recorder: &PrometheusRecorder,
    name: &'static str,
    labels: &[(&'static str, &'static str)],
) -> Counter {
    let labels: Vec<Label> = labels
        .iter()
        .map(|&(k, v)| Label::from_static_parts(k, v))
        .collect();
    recorder.register_counter(&Key::from_parts(name, labels), &METADATA)
}

/// The limiter reports here: every transport's decisions are counted by
/// the one hook.
impl MetricsHook for Metrics {
    fn decided(&self, op: Op, decision: &Decision, elapsed: Duration) {
        self.decision(op, decision, elapsed);
    }

    fn store_failed(&self, op: Op, error: &StoreError, degraded: bool, elapsed: Duration) {
        self.store_error(op, error, degraded, elapsed);
    }

    fn store_up(&self) {
        Metrics::store_up(self, true);
    }

    fn control(&self, what: &'static str, op: &'static str) {
        Metrics::control(self, what, op);
    }

    fn store_down(&self, _cause: &StoreError) {
        self.down_since
            .lock()
            .get_or_insert_with(std::time::Instant::now);
        Metrics::store_up(self, false);
    }

    fn store_recovered(&self, _down_for: Duration) {
        *self.down_since.lock() = None;
        Metrics::store_up(self, true);
    }

    fn local_decided(&self, op: Op, decision: &Decision) {
        let result = if decision.allowed {
            "allowed"
        } else {
            "rejected"
        };
        metrics::with_local_recorder(self.recorder.as_ref(), || {
            counter!(LOCAL_DECISIONS_TOTAL, "op" => op.as_str(), "result" => result).increment(1);
        });
    }

    fn local_charged_back(&self, outcome: slidelog::metrics::ChargeBack) {
        metrics::with_local_recorder(self.recorder.as_ref(), || {
            counter!(LOCAL_CHARGE_BACK_TOTAL, "outcome" => outcome.as_str()).increment(1);
        });
    }

    fn local_pending(&self, records: usize) {
        metrics::with_local_recorder(self.recorder.as_ref(), || {
            gauge!(LOCAL_JOURNAL_RECORDS).set(records as f64);
        });
    }

    fn local_journal_full(&self) {
        metrics::with_local_recorder(self.recorder.as_ref(), || {
            counter!(LOCAL_JOURNAL_FULL_TOTAL).increment(1);
        });
    }
}

/// Decisions by operation, by rule, and the fail-open ones.
fn describe_decisions() {
    use metrics::describe_counter;
    describe_counter!(
        DECISIONS,
        "Decisions by operation (check/peek) and result (allowed/rejected)."
    );
    describe_counter!(
        RULE_DECISIONS,
        "Decisions by deciding rule (max/window; at most 64 rules, then \"other\") and result."
    );
    describe_counter!(
        DEGRADED,
        "Decisions answered by the fail-open policy because the store failed."
    );
}

/// The local failure policy's answers, charge-back and journal.
fn describe_local() {
    use metrics::{describe_counter, describe_gauge};
    describe_counter!(
        LOCAL_DECISIONS_TOTAL,
        "Decisions answered by the local policy in this instance's memory, at its share of each limit (degraded)."
    );
    describe_counter!(
        LOCAL_CHARGE_BACK_TOTAL,
        "Local records the charge-back answered: charged, duplicate (the store had it), expired, failed."
    );
    describe_gauge!(
        LOCAL_JOURNAL_RECORDS,
        "Local records awaiting charge-back to the store."
    );
    describe_counter!(
        LOCAL_JOURNAL_FULL_TOTAL,
        "Local admissions refused because the journal of records awaiting charge-back was at its cap."
    );
}

/// Store calls: errors, latency, bad input, late records and unknown outcomes.
fn describe_store_calls() {
    use metrics::{Unit, describe_counter, describe_histogram};
    describe_counter!(
        STORE_ERRORS,
        "Store calls that failed, by kind and whether the failure is transient."
    );
    describe_histogram!(
        LATENCY,
        Unit::Seconds,
        "Time to decide, store call included."
    );
    describe_counter!(
        BAD_REQUESTS,
        "Requests refused as bad input, by the field at fault."
    );
    describe_counter!(
        LATE_RECORDS,
        "Redis checks recorded after their caller had timed out (a clock skew beyond the margin, or a reply that came too late)."
    );
    describe_counter!(
        UNKNOWN_OUTCOMES,
        "Redis checks whose caller timed out and whose reply never came: recorded or not, unknown."
    );
}

/// The in-memory store's keys, bytes and full episodes.
fn describe_memory() {
    use metrics::{Unit, describe_counter, describe_gauge};
    describe_gauge!(MEMORY_KEYS, "Keys held by the in-memory store.");
    describe_gauge!(MEMORY_KEY_CAP, "Key cap of the in-memory store.");
    describe_gauge!(
        MEMORY_BYTES,
        Unit::Bytes,
        "Bytes the in-memory store holds (records, keys, table slots), counted against --memory-limit."
    );
    describe_gauge!(
        MEMORY_LIMIT_BYTES,
        Unit::Bytes,
        "Memory budget of the in-memory store (--memory-limit)."
    );
    describe_gauge!(
        MEMORY_FULL,
        "1 while the in-memory store refuses new keys at its key cap or memory budget."
    );
    describe_counter!(
        MEMORY_FULL_REFUSALS,
        "New keys the in-memory store refused at its key cap or memory budget (503)."
    );
}

/// The store's health, and a Cluster's masters.
fn describe_store_health() {
    use metrics::{Unit, describe_gauge};
    describe_gauge!(
        STORE_UP,
        "1 when the last store call or readiness probe succeeded, else 0."
    );
    describe_gauge!(
        STORE_DOWN,
        Unit::Seconds,
        "Seconds the store has been known down (decisions answer by policy without it), 0 while it answers."
    );
    gauge!(STORE_DOWN).set(0.0);
    describe_gauge!(STORE_NODES, "Masters of the Redis Cluster store.");
    describe_gauge!(
        STORE_NODES_DOWN,
        "Cluster masters known down: their keys are answered by policy, the others decide."
    );
    describe_gauge!(
        STORE_NODES_DOWN_SECONDS,
        Unit::Seconds,
        "Seconds the cluster master down longest has been known down, 0 when none is."
    );
}

/// Series that alerts watch exist from the start, at 0, so that a rate()
/// over them works before the first incident.
fn zero_watched_series() {
    for op in [Op::Check, Op::Peek] {
        for result in ["allowed", "rejected"] {
            counter!(DECISIONS, "op" => op.as_str(), "result" => result).increment(0);
        }
        counter!(DEGRADED, "op" => op.as_str()).increment(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(limit: u64, window_ms: u64) -> Decision {
        Decision {
            allowed: true,
            limit,
            window_ms,
            count: 1,
            remaining: limit - 1,
            retry_after_ms: 0,
            reset_after_ms: window_ms,
            degraded: false,
            blocked: false,
            record: None,
        }
    }

    #[test]
    fn two_instances_keep_their_own_numbers() {
        let a = Metrics::new(None);
        let b = Metrics::new(None);
        a.decision(Op::Check, &allowed(5, 1000), Duration::from_micros(80));
        let text = a.render();
        assert!(
            text.contains(r#"slidelog_decisions_total{op="check",result="allowed"} 1"#),
            "{text}"
        );
        assert!(text.contains(r#"rule="5/1000ms""#), "{text}");
        assert!(
            text.contains("slidelog_decision_duration_seconds_bucket"),
            "{text}"
        );
        let rendered = b.render();
        assert!(
            rendered.contains(r#"slidelog_decisions_total{op="check",result="allowed"} 0"#),
            "{rendered}"
        );
    }

    #[test]
    fn a_series_shows_once_touched_as_when_looked_up_by_name() {
        let m = Metrics::new(None);
        let text = m.render();
        // At start: the decision and degraded series at 0, nothing else.
        assert!(text.contains(r#"slidelog_decisions_total{op="peek",result="rejected"} 0"#));
        assert!(text.contains(r#"slidelog_degraded_decisions_total{op="check"} 0"#));
        for absent in [
            "slidelog_store_up ",
            "rule=",
            "duration_seconds_bucket",
            "field=",
        ] {
            assert!(!text.contains(absent), "{absent}: {text}");
        }
        let mut rejected = allowed(5, 1000);
        rejected.allowed = false;
        m.decision(Op::Check, &allowed(5, 1000), Duration::from_micros(80));
        m.decision(Op::Peek, &rejected, Duration::from_micros(80));
        m.decision(Op::Check, &allowed(5, 1000), Duration::from_micros(80));
        m.bad_request("key");
        m.bad_request("key");
        m.store_error(
            Op::Check,
            &StoreError::Timeout(Duration::from_millis(5)),
            true,
            Duration::ZERO,
        );
        let text = m.render();
        for line in [
            r#"slidelog_decisions_total{op="check",result="allowed"} 2"#,
            r#"slidelog_decisions_total{op="peek",result="rejected"} 1"#,
            r#"slidelog_rule_decisions_total{rule="5/1000ms",result="allowed"} 2"#,
            r#"slidelog_rule_decisions_total{rule="5/1000ms",result="rejected"} 1"#,
            r#"slidelog_bad_requests_total{field="key"} 2"#,
            r#"slidelog_store_errors_total{op="check",kind="timeout",transient="true"} 1"#,
            r#"slidelog_degraded_decisions_total{op="check"} 1"#,
            r#"slidelog_decision_duration_seconds_count{op="check"} 3"#,
            r#"slidelog_decision_duration_seconds_count{op="peek"} 1"#,
            "slidelog_store_up 0",
        ] {
            assert!(text.contains(line), "{line}: {text}");
        }
    }

    /// The value of the gauge `name` in `text`, if shown.
    fn gauge_in(text: &str, name: &str) -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
    }

    #[test]
    fn store_up_is_set_when_it_changes_and_a_success_after_a_failure_sets_it() {
        let m = Metrics::new(None);
        m.decision(Op::Check, &allowed(5, 1000), Duration::ZERO);
        assert_eq!(gauge_in(&m.render(), STORE_UP), Some(1.0));
        m.store_error(
            Op::Check,
            &StoreError::Timeout(Duration::from_millis(5)),
            false,
            Duration::ZERO,
        );
        assert_eq!(gauge_in(&m.render(), STORE_UP), Some(0.0));
        m.decision(Op::Check, &allowed(5, 1000), Duration::ZERO);
        assert_eq!(gauge_in(&m.render(), STORE_UP), Some(1.0));
        m.store_up(false);
        m.store_up(false);
        assert_eq!(gauge_in(&m.render(), STORE_UP), Some(0.0));
        m.store_up(true);
        assert_eq!(gauge_in(&m.render(), STORE_UP), Some(1.0));

        // Threads racing successes and failures: once they are done the
        // gauge holds what the state says, and the next call sets it.
        let m = Arc::new(Metrics::new(None));
        for round in 0..20 {
            let threads: Vec<_> = (0..4)
                .map(|t| {
                    let m = m.clone();
                    std::thread::spawn(move || {
                        for i in 0..500 {
                            m.store_up((i + t + round) % 7 != 0);
                        }
                    })
                })
                .collect();
            threads.into_iter().for_each(|t| t.join().unwrap());
            let state = m.store_up.state.load(Ordering::Acquire);
            assert_eq!(
                gauge_in(&m.render(), STORE_UP),
                Some(f64::from(state)),
                "round {round}"
            );
            m.store_up(false);
            assert_eq!(gauge_in(&m.render(), STORE_UP), Some(0.0));
            m.decision(Op::Check, &allowed(5, 1000), Duration::ZERO);
            assert_eq!(gauge_in(&m.render(), STORE_UP), Some(1.0));
        }
    }

    #[test]
    fn each_rule_finds_its_own_series_from_any_thread() {
        let m = Arc::new(Metrics::new(None));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for max in 1..=40u64 {
                        for window in [1000, 2000] {
                            m.decision(Op::Check, &allowed(max, window), Duration::ZERO);
                        }
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        let text = m.render();
        // 80 rules: the first 64 seen have their own series, the rest
        // share "other"; 320 decisions in all, each counted once.
        let mut total = 0.0;
        let mut series = 0;
        for line in text
            .lines()
            .filter(|l| l.starts_with("slidelog_rule_decisions_total{"))
        {
            series += 1;
            total += line.rsplit(' ').next().unwrap().parse::<f64>().unwrap();
        }
        assert_eq!(series, MAX_RULE_LABELS + 1, "{text}");
        assert_eq!(total, 320.0, "{text}");
        // Counted in per-thread tallies (here more threads than shards on a
        // small machine), summed when rendered: a second render is the same.
        assert!(
            text.contains(r#"slidelog_decisions_total{op="check",result="allowed"} 320"#),
            "{text}"
        );
        // (The exporter orders series as its maps do: compare them sorted.)
        let sorted = |text: &str| {
            let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
            lines.sort();
            lines
        };
        assert_eq!(sorted(&m.render()), sorted(&text));
        for max in 1..=40u64 {
            for window in [1000, 2000] {
                let label = format!("rule=\"{max}/{window}ms\"");
                if let Some(line) = text.lines().find(|l| l.contains(&label)) {
                    assert!(line.ends_with(" 4"), "{line}");
                }
            }
        }
        assert!(m.rule_series(7, 1000).key == (7, 1000));
        assert!(std::ptr::eq(m.rule_series(7, 1000), m.rule_series(7, 1000)));
    }

    #[test]
    fn rule_labels_are_capped() {
        let m = Metrics::new(None);
        for max in 1..=(MAX_RULE_LABELS as u64 + 10) {
            m.decision(Op::Check, &allowed(max, 1000), Duration::ZERO);
        }
        let text = m.render();
        let series = text
            .lines()
            .filter(|l| l.starts_with("slidelog_rule_decisions_total{"))
            .count();
        assert_eq!(series, MAX_RULE_LABELS + 1, "{text}");
        assert!(text.contains(r#"rule="other""#));
    }
}

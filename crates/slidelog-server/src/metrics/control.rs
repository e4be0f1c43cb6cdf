//! The metrics of blocks and overrides (docs/design.md §5.4):
//! `slidelog_blocks_total{op}` and `slidelog_overrides_total{op}` (put,
//! delete, and for blocks `penalty`: a limit's `block_ms`),
//! `slidelog_blocked_refusals_total{op}` and the decisions' own
//! `result="blocked"`, and the gauges `slidelog_blocks_active` and
//! `slidelog_overrides_active` (what the store holds, read after each
//! change made through this instance).

use super::{DECISIONS, Metrics};
use metrics::{counter, gauge};
use slidelog::metrics::Op;

const BLOCKS: &str = "slidelog_blocks_total";
const OVERRIDES: &str = "slidelog_overrides_total";
const BLOCKED_REFUSALS: &str = "slidelog_blocked_refusals_total";
const BLOCKS_ACTIVE: &str = "slidelog_blocks_active";
const OVERRIDES_ACTIVE: &str = "slidelog_overrides_active";

/// Describes the series and registers them at 0 (the dashboard's panels
/// and a rate() over them work before the first block).
pub(super) fn describe() {
    use metrics::{describe_counter, describe_gauge};
    describe_counter!(
        BLOCKS,
        "Blocks put, deleted, or set by a limit's block_ms (penalty), by op."
    );
    describe_counter!(OVERRIDES, "Overrides put or deleted, by op.");
    describe_counter!(
        BLOCKED_REFUSALS,
        "Decisions refused because the key is blocked, by op."
    );
    describe_gauge!(
        BLOCKS_ACTIVE,
        "Blocks the store holds (read after each change through this instance)."
    );
    describe_gauge!(
        OVERRIDES_ACTIVE,
        "Overrides the store holds (read after each change through this instance)."
    );
    for op in ["put", "delete", "penalty"] {
        counter!(BLOCKS, "op" => op).increment(0);
    }
    for op in ["put", "delete"] {
        counter!(OVERRIDES, "op" => op).increment(0);
    }
    for op in [Op::Check, Op::Peek] {
        counter!(BLOCKED_REFUSALS, "op" => op.as_str()).increment(0);
    }
    gauge!(BLOCKS_ACTIVE).set(0.0);
    gauge!(OVERRIDES_ACTIVE).set(0.0);
}

impl Metrics {
    /// Counts a change of a block or an override.
    pub fn control(&self, what: &'static str, op: &'static str) {
        let name = if what == "block" { BLOCKS } else { OVERRIDES };
        metrics::with_local_recorder(self.recorder.as_ref(), || {
            counter!(name, "op" => op).increment(1);
        });
    }

    /// Counts a refusal by a block: its own series, and `result="blocked"`
    /// among the decisions (not among a rule's, which did not refuse).
    pub(super) fn blocked_refusal(&self, op: Op) {
        metrics::with_local_recorder(self.recorder.as_ref(), || {
            counter!(BLOCKED_REFUSALS, "op" => op.as_str()).increment(1);
            counter!(DECISIONS, "op" => op.as_str(), "result" => "blocked").increment(1);
        });
    }

    /// Sets what the store holds.
    pub fn controls_held(&self, blocks: usize, overrides: usize) {
        metrics::with_local_recorder(self.recorder.as_ref(), || {
            gauge!(BLOCKS_ACTIVE).set(blocks as f64);
            gauge!(OVERRIDES_ACTIVE).set(overrides as f64);
        });
    }
}

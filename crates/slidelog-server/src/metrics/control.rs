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

//! What `SLIDELOG.INFO` says about a log's granules (docs/design.md §1.1):
//! the finest granule its records sit on, the span they cover, and its
//! tiers, read from the records' times alone (the log does not keep the
//! limits that wrote it).
//!
//! A granular limit stores its records at multiples of its granularity, and
//! a key's coarse tiers move old records to coarser granules, oldest
//! coarsest. So walking the records oldest first with the running gcd of
//! their times gives a non-increasing granule per record: a tier is a run
//! of records of one running gcd. But an exact log's first few times may
//! share a factor by chance (the first four are all even one time in 16):
//! a run of `n` records on granule `g` before a run on `f` is kept only
//! when chance would put it there at most once in [`CHANCE`] (when
//! `(g / f)^n` reaches it); else it is folded into the next, finer, run
//! (its records sit on that granule too). A coarse tier's single steps of 2x or 3x
//! (design §1.1: "a few records per coarser step") fold the same way.

use slidelog_core::limit::gcd;

/// A run is a tier when its granule is at most this unlikely by chance.
pub const CHANCE: f64 = 1_000.0;

/// A log's granules as `SLIDELOG.INFO` reports them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Granules {
    /// The gcd of every record's time: the finest granule the records sit
    /// on (1 for an exact log; 0 with fewer than two records, where it is
    /// not known).
    pub granule_ms: u64,
    /// The newest record's time less the oldest's.
    pub span_ms: u64,
    /// `(granule_ms, records)` per tier, oldest (coarsest) first; the
    /// records add up to the log's. Empty with fewer than two records.
    pub tiers: Vec<(u64, u64)>,
}

/// The granules of records at `times` (oldest first).
pub fn of_times(times: impl IntoIterator<Item = u64>) -> Granules {
    let times: Vec<u64> = times.into_iter().collect();
    let (Some(&first), Some(&last)) = (times.first(), times.last()) else {
        return Granules::default();
    };
    let span_ms = last.saturating_sub(first);
    if times.len() < 2 {
        return Granules {
            span_ms,
            ..Granules::default()
        };
    }
    // The oldest record alone would be its own time: it takes the gcd of
    // the first two.
    let mut running = gcd(times[0], times[1]);
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for &t in &times {
        running = gcd(running, t);
        match runs.last_mut() {
            Some((g, n)) if *g == running => *n += 1,
            _ => runs.push((running, 1)),
        }
    }
    Granules {
        granule_ms: running,
        span_ms,
        tiers: fold_short(runs),
    }
}

/// Folds every run that chance could explain into the run after it (the
/// last run is kept: it is the finest granule).
fn fold_short(runs: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    let mut out = Vec::with_capacity(runs.len());
    let mut carried = 0;
    for (i, &(g, n)) in runs.iter().enumerate() {
        let n = n + carried;
        let by_chance = runs.get(i + 1).is_some_and(|&(finer, _)| {
            // The ratio is at least 2 (each run's gcd divides the one
            // before); the power saturates to infinity, never wraps.
            (g as f64 / finer as f64).powf(n as f64) < CHANCE
        });
        if by_chance {
            carried = n;
        } else {
            out.push((g, n));
            carried = 0;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY0: u64 = 1_767_225_600_000;

    #[test]
    fn empty_and_single_records_have_no_granule() {
        assert_eq!(of_times([]), Granules::default());
        let one = of_times([DAY0 + 7]);
        assert_eq!((one.granule_ms, one.span_ms, one.tiers), (0, 0, vec![]));
    }

    #[test]
    fn an_exact_log_is_one_tier_of_1_ms() {
        // The first four are even: folded into the 1 ms tier.
        let g = of_times([DAY0, DAY0 + 2, DAY0 + 4, DAY0 + 6, DAY0 + 7, DAY0 + 9]);
        assert_eq!((g.granule_ms, g.span_ms), (1, 9));
        assert_eq!(g.tiers, [(1, 6)]);
    }

    #[test]
    fn a_granular_log_is_one_tier_at_its_granule() {
        let g = of_times((1..=601).map(|i| DAY0 + i * 100));
        assert_eq!(
            (g.granule_ms, g.span_ms, g.tiers),
            (100, 60_000, vec![(100, 601)])
        );
    }

    #[test]
    fn coarse_tiers_are_reported_oldest_first() {
        // A day's minutes, a step of 30 s (folded), two of 5 s (kept with
        // it: 500^3 is no chance), then a second of 10 ms granules.
        let minutes = (1..=1_380).map(|i| DAY0 + i * 60_000);
        let end = DAY0 + 1_380 * 60_000;
        let steps = [end + 30_000, end + 35_000, end + 40_000];
        let fine = (1..=100).map(|i| end + 40_000 + i * 10);
        let g = of_times(minutes.chain(steps).chain(fine));
        assert_eq!(g.granule_ms, 10);
        assert_eq!(g.tiers, [(60_000, 1_380), (5_000, 3), (10, 100)]);
        assert_eq!(g.tiers.iter().map(|t| t.1).sum::<u64>(), 1_483);
    }

    #[test]
    fn a_run_chance_explains_is_folded() {
        // Three records on 4 ms (4^3 = 64 < 1,000), then 1 ms.
        let g = of_times([DAY0, DAY0 + 4, DAY0 + 8, DAY0 + 9, DAY0 + 10]);
        assert_eq!(g.tiers, [(1, 5)]);
        // Five on 10 ms (10^5) are a tier.
        let g = of_times((0..5).map(|i| DAY0 + i * 10).chain([DAY0 + 41, DAY0 + 42]));
        assert_eq!(g.tiers, [(10, 5), (1, 2)]);
    }

    #[test]
    fn a_coarse_step_of_enough_records_is_its_own_tier() {
        let a = (1..=10).map(|i| DAY0 + i * 60_000);
        let b = (1..=10).map(|i| DAY0 + 600_000 + i * 1_000);
        let c = (1..=10).map(|i| DAY0 + 610_000 + i * 10);
        let g = of_times(a.chain(b).chain(c));
        assert_eq!(g.tiers, [(60_000, 10), (1_000, 10), (10, 10)]);
        assert_eq!(g.span_ms, 610_100 - 60_000);
    }
}

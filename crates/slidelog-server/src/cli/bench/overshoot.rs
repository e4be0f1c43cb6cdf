//! Counting admissions beyond the limit from what a client can observe.
//!
//! A client does not see the time a store decided at, only that it lies
//! between sending the request and receiving the answer. A set of admissions
//! certainly fell within one window when the latest answer came less than
//! `window - 1 ms` after the earliest request was sent (the 1 ms covers the
//! store's truncation of time to whole ms). The overshoot of a key is the
//! largest number of units beyond `max` in such a set; latency can hide an
//! overshoot but never invent one, so an exact store always scores 0.

/// One admission as the client saw it: when it was sent and answered (µs
/// since the run started) and how many units it admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    /// Sent, µs since start.
    pub sent_us: u64,
    /// Answered, µs since start.
    pub answered_us: u64,
    /// Units admitted.
    pub cost: u64,
}

/// The largest number of units beyond `max` that certainly fell within one
/// window of `window_ms`, among the admissions of one key.
pub fn key_overshoot(admissions: &mut [Admission], max: u64, window_ms: u64) -> u64 {
    let Some(span_us) = (window_ms * 1000).checked_sub(1000) else {
        return 0;
    };
    if admissions.is_empty() {
        return 0;
    }
    admissions.sort_unstable_by_key(|a| a.sent_us);
    // Answer times, ranked, for a Fenwick tree of units by answer time.
    let mut answers: Vec<u64> = admissions.iter().map(|a| a.answered_us).collect();
    answers.sort_unstable();
    answers.dedup();
    let mut tree = vec![0u64; answers.len() + 1];
    let mut worst = 0;
    // From the latest sent to the earliest: when admission i is the earliest
    // sent of a set, the set is every later-sent admission answered by
    // sent_i + span.
    for a in admissions.iter().rev() {
        let rank = answers.partition_point(|&t| t < a.answered_us) + 1;
        let mut i = rank;
        while i < tree.len() {
            tree[i] += a.cost;
            i += i & i.wrapping_neg();
        }
        let mut i = answers.partition_point(|&t| t <= a.sent_us + span_us);
        let mut units = 0;
        while i > 0 {
            units += tree[i];
            i -= i & i.wrapping_neg();
        }
        worst = worst.max(units.saturating_sub(max));
    }
    worst
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adm(sent_ms: u64, answered_ms: u64) -> Admission {
        Admission {
            sent_us: sent_ms * 1000,
            answered_us: answered_ms * 1000,
            cost: 1,
        }
    }

    #[test]
    fn an_exact_sliding_log_scores_zero_even_with_latency() {
        // max 2 per 1000 ms, admitted at 0, 1, 1000, 1001, ... each answered 5 ms later.
        let mut a: Vec<Admission> = (0..10)
            .flat_map(|w| [adm(w * 1000, w * 1000 + 5), adm(w * 1000 + 1, w * 1000 + 6)])
            .collect();
        assert_eq!(key_overshoot(&mut a, 2, 1000), 0);
    }

    #[test]
    fn a_burst_beyond_max_is_counted_once_per_key() {
        // Five admissions within 10 ms, max 2: three beyond.
        let mut a: Vec<Admission> = (0..5).map(|i| adm(i, i + 3)).collect();
        assert_eq!(key_overshoot(&mut a, 2, 1000), 3);
        // Spread over more than a window, with max 2 per window: nothing certain.
        let mut a = vec![adm(0, 1), adm(1, 2), adm(1000, 1001)];
        assert_eq!(key_overshoot(&mut a, 2, 1000), 0);
        // Units count, not requests.
        let mut a = vec![
            Admission {
                cost: 3,
                ..adm(0, 1)
            },
            adm(2, 3),
        ];
        assert_eq!(key_overshoot(&mut a, 3, 1000), 1);
    }
}

//! Charges made at most once per id ([`slidelog_core::Store::charge_once`],
//! docs/design.md §6, "Local answers") on the memory store: the ids charged,
//! each kept until its TTL has passed, checked and charged under one lock.

use crate::MemoryStore;
use parking_lot::Mutex;
use slidelog_core::{OnceMark, Request, StoreError};
use std::collections::HashMap;

/// Fewest ids held before expired ones are dropped (a sweep per insert of
/// a small map would cost more than it frees).
const FIRST_SWEEP: usize = 1024;

/// The ids charged, by `(log key, id)`, with the time each expires (ms).
#[derive(Debug)]
pub(crate) struct Onces {
    held: Mutex<Held>,
}

#[derive(Debug)]
struct Held {
    expires: HashMap<(String, String), u64>,
    /// Sweep the expired ids when this many are held (doubles with the live
    /// ones, so sweeps cost O(1) per insert, amortized).
    sweep_at: usize,
}

impl Default for Onces {
    fn default() -> Self {
        Self {
            held: Mutex::new(Held {
                expires: HashMap::new(),
                sweep_at: FIRST_SWEEP,
            }),
        }
    }
}

impl MemoryStore {
    /// Charges `request` at `now_ms` unless `once.id` charged already into
    /// this key and has not expired: `true` when this call charged. The id
    /// is checked and the charge made under one lock, so two concurrent
    /// calls with one id charge once. The id expires `once.ttl_ms` after
    /// the charge on the store's clock (as Redis's `PX` does), whatever
    /// time the charge records at (a charge-back's is in the past).
    pub fn charge_once_at(
        &self,
        request: &Request,
        now_ms: u64,
        once: &OnceMark,
    ) -> Result<bool, StoreError> {
        let mut held = self.onces.held.lock();
        let wall = self.clock.now_ms();
        let id = (request.key().to_owned(), once.id.clone());
        if held.expires.get(&id).is_some_and(|&until| until > wall) {
            return Ok(false);
        }
        self.charge_at(request, now_ms)?;
        held.expires.insert(id, wall.saturating_add(once.ttl_ms));
        if held.expires.len() >= held.sweep_at {
            held.expires.retain(|_, &mut until| until > wall);
            held.sweep_at = (held.expires.len() * 2).max(FIRST_SWEEP);
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slidelog_core::{Limit, ManualClock, Mode};
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn an_id_charges_once_until_it_expires_and_per_key() {
        let clock = ManualClock::new(5_000);
        let store = MemoryStore::new().with_clock(Arc::new(clock.clone()));
        let limits = vec![Limit::new(10, 60_000).unwrap()];
        let request = Request::usage("k", limits.clone(), vec![1]).unwrap();
        let once = OnceMark::new("i:1", 1_000).unwrap();
        assert!(store.charge_once_at(&request, 5_000, &once).unwrap());
        clock.advance(Duration::from_millis(500));
        assert!(!store.charge_once_at(&request, 5_000, &once).unwrap());
        let other = Request::usage("k2", limits.clone(), vec![1]).unwrap();
        assert!(store.charge_once_at(&other, 5_500, &once).unwrap());
        let peek = Request::new("k", limits, 1).unwrap();
        let d = store.decide_at(&peek, Mode::Peek, 5_900).unwrap();
        // A peek counts as if admitted: one charged, plus the peek's own.
        assert_eq!(d.count, 2, "charged once");
        // Past its TTL the id is forgotten (the record it marked expired
        // with its window long before a charge-back would repeat it).
        clock.advance(Duration::from_millis(501));
        assert!(store.charge_once_at(&request, 5_000, &once).unwrap());
    }

    #[test]
    fn bad_marks_are_refused_naming_the_bound() {
        assert!(
            OnceMark::new("", 1)
                .unwrap_err()
                .to_string()
                .contains("1 to 64 bytes")
        );
        assert!(OnceMark::new("a b", 1).is_err());
        assert!(OnceMark::new("x".repeat(65), 1).is_err());
        assert!(
            OnceMark::new("ok", 0)
                .unwrap_err()
                .to_string()
                .contains("ttl_ms")
        );
    }
}

//! Live progress of a scan, shared with whoever draws it (the CLI's progress
//! bar polls it). Counters are atomics so the scan never waits for the drawer.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Counters a scan updates as it goes.
#[derive(Debug, Default)]
pub struct ScanProgress {
    keys: AtomicU64,
    records: AtomicU64,
    memory_bytes: AtomicU64,
    // Per node: estimated fraction of its key space already visited.
    fractions: Mutex<Vec<f64>>,
}

impl ScanProgress {
    /// Creates a fresh, zeroed progress.
    pub fn new() -> Self {
        Self::default()
    }

    /// Returns the keys read so far.
    pub fn keys(&self) -> u64 {
        self.keys.load(Ordering::Relaxed)
    }

    /// Returns the records (ZCARD) summed so far.
    pub fn records(&self) -> u64 {
        self.records.load(Ordering::Relaxed)
    }

    /// Returns the MEMORY USAGE summed so far.
    pub fn memory_bytes(&self) -> u64 {
        self.memory_bytes.load(Ordering::Relaxed)
    }

    /// Returns the estimated share of the key space visited, 0.0 ..= 1.0, averaged over nodes.
    pub fn fraction(&self) -> f64 {
        let f = self.fractions.lock();
        if f.is_empty() {
            0.0
        } else {
            f.iter().sum::<f64>() / f.len() as f64
        }
    }

    /// Returns how many nodes are registered so far.
    pub fn nodes(&self) -> usize {
        self.fractions.lock().len()
    }

    pub(crate) fn set_nodes(&self, n: usize) {
        *self.fractions.lock() = vec![0.0; n];
    }

    pub(crate) fn add(&self, keys: u64, records: u64, memory_bytes: u64) {
        self.keys.fetch_add(keys, Ordering::Relaxed);
        self.records.fetch_add(records, Ordering::Relaxed);
        self.memory_bytes.fetch_add(memory_bytes, Ordering::Relaxed);
    }

    pub(crate) fn set_fraction(&self, node: usize, fraction: f64) {
        if let Some(f) = self.fractions.lock().get_mut(node) {
            *f = fraction.clamp(0.0, 1.0);
        }
    }
}

/// Estimates how far a SCAN cursor has gone through the key space. Redis increments the
/// cursor in reverse-bit order over the hash table, so the cursor's bits
/// reversed grow from 0 towards 2^64 whatever the table size: an estimate
/// (rehashing can jitter it), good enough for a progress bar.
pub fn cursor_fraction(cursor: u64) -> f64 {
    if cursor == 0 {
        return 1.0;
    }
    cursor.reverse_bits() as f64 / 18_446_744_073_709_551_616.0
}

#[cfg(test)]
mod tests {
    use super::cursor_fraction;

    #[test]
    fn cursor_fraction_follows_reverse_binary_order() {
        // A table of 8 buckets visits 0,4,2,6,1,5,3,7 then returns 0.
        let order = [4u64, 2, 6, 1, 5, 3, 7];
        let fractions: Vec<f64> = order.iter().map(|c| cursor_fraction(*c)).collect();
        assert!(fractions.windows(2).all(|w| w[0] < w[1]), "{fractions:?}");
        assert_eq!(cursor_fraction(4), 0.125);
        assert_eq!(cursor_fraction(0), 1.0);
    }
}

//! The ZCARD distribution in decimal log buckets: 1, 2-10, 11-100, …, and an
//! open last bucket above 10,000,000 (the largest `max` a limit may have).

use crate::report::Bucket;

/// Number of buckets: `[1]`, `[2,10]`, `[11,100]`, …, `[1e6+1,1e7]`, `[1e7+1, ∞)`.
pub const BUCKETS: usize = 9;

/// Returns the bucket index of a ZCARD (sorted sets are never empty; 0 goes to the first bucket).
pub fn bucket_of(zcard: u64) -> usize {
    let mut index = 0;
    let mut upper = 1u64;
    while zcard > upper && index < BUCKETS - 1 {
        upper *= 10;
        index += 1;
    }
    index
}

/// Returns the `(min, max)` bounds of bucket `index` (`max` None for the last).
pub fn bounds(index: usize) -> (u64, Option<u64>) {
    if index == 0 {
        return (1, Some(1));
    }
    let min = 10u64.pow(index as u32 - 1) + 1;
    let max = (index < BUCKETS - 1).then(|| 10u64.pow(index as u32));
    (min, max)
}

/// Counts keys and records per bucket.
#[derive(Debug, Clone, Default)]
pub struct Histogram {
    keys: [u64; BUCKETS],
    records: [u64; BUCKETS],
}

impl Histogram {
    /// Adds one key of `zcard` records.
    pub fn add(&mut self, zcard: u64) {
        let i = bucket_of(zcard);
        self.keys[i] += 1;
        self.records[i] += zcard;
    }

    /// Returns the buckets for the report, all of them, ascending.
    pub fn buckets(&self) -> Vec<Bucket> {
        (0..BUCKETS)
            .map(|i| {
                let (min, max) = bounds(i);
                Bucket {
                    min,
                    max,
                    keys: self.keys[i],
                    records: self.records[i],
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_decimal_log_ranges() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(1), 0);
        assert_eq!(bucket_of(2), 1);
        assert_eq!(bucket_of(10), 1);
        assert_eq!(bucket_of(11), 2);
        assert_eq!(bucket_of(100), 2);
        assert_eq!(bucket_of(101), 3);
        assert_eq!(bucket_of(10_000_000), 7);
        assert_eq!(bucket_of(10_000_001), 8);
        assert_eq!(bucket_of(u64::MAX), 8);
        assert_eq!(bounds(0), (1, Some(1)));
        assert_eq!(bounds(1), (2, Some(10)));
        assert_eq!(bounds(2), (11, Some(100)));
        assert_eq!(bounds(8), (10_000_001, None));
        for z in [
            1, 2, 9, 10, 11, 99, 100, 101, 12_345, 10_000_000, 10_000_001,
        ] {
            let (min, max) = bounds(bucket_of(z));
            assert!(z >= min && max.is_none_or(|m| z <= m), "{z}");
        }
    }
}

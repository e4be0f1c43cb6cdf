//! The journal of the local policy: every record this instance admitted in
//! its own memory store, by key, until it is charged back to the store
//! (docs/design.md §6, "Local answers"). Bounded: past its cap a local
//! admission is refused rather than the journal grown.

use slidelog_core::{OnceMark, Request};
use std::collections::{HashMap, VecDeque};

/// One record admitted locally, to charge back once.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// The charge: the key, its limits as the store knows them (not the
    /// local share) and the costs admitted ([`Request::usage`]).
    pub(crate) charge: Request,
    /// When it was admitted (Unix ms): the charge's [`Now::At`](slidelog_core::Now::At).
    pub(crate) ts: u64,
    /// The id the store checks, so it counts the record once.
    pub(crate) once: OnceMark,
}

/// The records awaiting charge-back, by key, in the order admitted.
#[derive(Debug, Default)]
pub(crate) struct Journal {
    by_key: HashMap<String, VecDeque<Entry>>,
    len: usize,
    /// True while a charge-back task runs (one per limiter).
    pub(crate) draining: bool,
}

impl Journal {
    /// How many records await charge-back.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether `key` has records awaiting charge-back: its decisions are
    /// then answered locally, so that the store's window is exact from its
    /// first decision on.
    pub(crate) fn holds(&self, key: &str) -> bool {
        self.by_key.contains_key(key)
    }

    /// Adds a record admitted locally.
    pub(crate) fn push(&mut self, entry: Entry) {
        let key = entry.charge.key().to_owned();
        self.by_key.entry(key).or_default().push_back(entry);
        self.len += 1;
    }

    /// Up to `most` records to charge back: the oldest of each key first,
    /// taking every key's turn before a second record of any.
    pub(crate) fn batch(&self, most: usize) -> Vec<Entry> {
        let mut out = Vec::new();
        let mut depth = 0;
        while out.len() < most {
            let before = out.len();
            for queue in self.by_key.values() {
                if let Some(e) = queue.get(depth) {
                    out.push(e.clone());
                    if out.len() == most {
                        break;
                    }
                }
            }
            if out.len() == before {
                break;
            }
            depth += 1;
        }
        out
    }

    /// Removes the record charged back (found by its once id); a key left
    /// with none goes back to the store's decisions.
    pub(crate) fn remove(&mut self, key: &str, once_id: &str) {
        let Some(queue) = self.by_key.get_mut(key) else {
            return;
        };
        if let Some(at) = queue.iter().position(|e| e.once.id == once_id) {
            queue.remove(at);
            self.len -= 1;
        }
        if queue.is_empty() {
            self.by_key.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slidelog_core::Limit;

    fn entry(key: &str, seq: u64) -> Entry {
        let limits = vec![Limit::new(10, 1_000).unwrap()];
        Entry {
            charge: Request::usage(key, limits, vec![1]).unwrap(),
            ts: seq,
            once: OnceMark::new(format!("i:{seq}"), 1).unwrap(),
        }
    }

    #[test]
    fn batches_take_every_key_in_turn_and_removal_frees_a_key() {
        let mut j = Journal::default();
        for (k, s) in [("a", 1), ("a", 2), ("a", 3), ("b", 4)] {
            j.push(entry(k, s));
        }
        assert_eq!(j.len(), 4);
        let first: Vec<u64> = j.batch(2).iter().map(|e| e.ts).collect();
        assert!(first.contains(&4) && (first.contains(&1)), "{first:?}");
        assert_eq!(j.batch(100).len(), 4);
        j.remove("b", "i:4");
        assert!(!j.holds("b") && j.holds("a"));
        j.remove("a", "i:9");
        assert_eq!(j.len(), 3);
    }
}

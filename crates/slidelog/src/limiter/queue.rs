//! The waiters' queue of [`Limiter::until_ready`](super::Limiter::until_ready):
//! per key, one waiter at a time asks the store, in arrival order (FIFO).
//!
//! Without it, every waiter rejected with the same `retry_after_ms` wakes at
//! the same instant and asks the store at once (a thundering herd), and the
//! first to arrive need not be the first served. Here a waiter first takes
//! its key's *turn* (a fair `tokio::sync::Mutex`: queued waiters are served
//! in the order they asked); the holder checks, sleeps until the store's
//! retry time, checks again, and passes the turn on only once it has been
//! answered. A joint wait takes the turns of all its keys, in one global
//! order (sorted by key), so two joint waits never hold each other's turns
//! in a circle. The queue belongs to one limiter (shared by its clones),
//! never to the process; a key's entry is removed when its last waiter
//! leaves.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::{Mutex as Turn, OwnedMutexGuard};

/// The turns of the keys that have waiters, on one limiter.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    keys: Mutex<HashMap<String, Arc<Turn<()>>>>,
}

/// The turns one waiter holds: released (and the queue's entries removed
/// when no one else waits) on drop, so a waiter dropped mid-wait never
/// blocks the ones behind it.
pub(crate) struct Held<'a> {
    queue: &'a Queue,
    turns: Vec<Taken>,
}

/// One key's turn, held or (while queued) asked for.
struct Taken {
    key: String,
    turn: Arc<Turn<()>>,
    guard: Option<OwnedMutexGuard<()>>,
}

impl Queue {
    /// The turn of `key`, created when no one waits on it.
    fn turn(&self, key: &str) -> Arc<Turn<()>> {
        let mut keys = self.keys.lock();
        keys.entry(key.to_owned()).or_default().clone()
    }

    /// Waits for the turns of every key in `keys` (in sorted order), in the
    /// order waiters asked. Cancel-safe: dropped while queued, it leaves the
    /// queue as if it had never asked.
    pub(crate) async fn take<'k>(&self, keys: impl IntoIterator<Item = &'k str>) -> Held<'_> {
        let mut keys: Vec<&str> = keys.into_iter().collect();
        keys.sort_unstable();
        keys.dedup();
        let mut held = Held {
            queue: self,
            turns: Vec::with_capacity(keys.len()),
        };
        for key in keys {
            let turn = self.turn(key);
            // Registered before the await: a drop while queued releases it.
            held.turns.push(Taken {
                key: key.to_owned(),
                turn: turn.clone(),
                guard: None,
            });
            let guard = turn.lock_owned().await;
            if let Some(last) = held.turns.last_mut() {
                last.guard = Some(guard);
            }
        }
        held
    }

    /// How many keys have waiters (tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.keys.lock().len()
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        for Taken { key, turn, guard } in self.turns.drain(..) {
            drop(guard);
            let mut keys = self.queue.keys.lock();
            // Two references: the map's and this one; no one else queued
            // (a waiter clones the turn under this lock before queueing).
            if Arc::strong_count(&turn) == 2 {
                keys.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn waiters_are_served_in_order_and_a_dropped_one_blocks_no_one() {
        let queue = Arc::new(Queue::default());
        let first = queue.take(["k"]).await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..5 {
            let (queue, order) = (queue.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let _turn = queue.take(["k"]).await;
                order.lock().push(i);
            }));
            // Each asks before the next.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // A waiter dropped while queued.
        let dropped = tokio::time::timeout(Duration::from_millis(5), queue.take(["k"])).await;
        assert!(dropped.is_err());
        drop(first);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock(), [0, 1, 2, 3, 4]);
        assert_eq!(
            queue.len(),
            0,
            "the key's entry is gone with its last waiter"
        );
    }

    #[tokio::test]
    async fn joint_turns_are_taken_in_one_order() {
        let queue = Arc::new(Queue::default());
        let (a, b) = (queue.clone(), queue.clone());
        let one = tokio::spawn(async move {
            for _ in 0..200 {
                drop(a.take(["x", "y"]).await);
            }
        });
        let two = tokio::spawn(async move {
            for _ in 0..200 {
                drop(b.take(["y", "x", "y"]).await);
            }
        });
        tokio::time::timeout(Duration::from_secs(10), async {
            one.await.unwrap();
            two.await.unwrap();
        })
        .await
        .expect("no deadlock");
        assert_eq!(queue.len(), 0);
    }
}

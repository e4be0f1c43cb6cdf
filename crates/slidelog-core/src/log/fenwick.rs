//! A Fenwick (binary indexed) tree of `u64` sums over blocks of records
//! (docs/design.md §4.1): prefix sums, point updates, appending a block and
//! finding the block that holds the k-th unit, each in O(log blocks).
//!
//! Node `i` (1-based; slot 0 is unused) holds the sum of blocks
//! `(i - lowbit(i), i]`. Updates add a delta with wrapping arithmetic: a
//! decrease is the two's complement of the amount, and every sum read is a
//! true (non-negative) total, so the wrap never shows.

/// The lowest set bit of `i`.
#[inline]
fn lowbit(i: usize) -> usize {
    i & i.wrapping_neg()
}

/// A tree of `blocks` sums (`nodes.len() == blocks + 1`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Fenwick {
    nodes: Vec<u64>,
}

impl Fenwick {
    /// A tree over the given block sums, built in O(blocks).
    pub(super) fn from_sums(sums: &[u64]) -> Self {
        let mut nodes = Vec::with_capacity(sums.len() + 1);
        nodes.push(0);
        nodes.extend_from_slice(sums);
        let n = sums.len();
        for i in 1..=n {
            let parent = i + lowbit(i);
            if parent <= n {
                nodes[parent] = nodes[parent].wrapping_add(nodes[i]);
            }
        }
        Self { nodes }
    }

    /// Blocks in the tree.
    #[inline]
    pub(super) fn blocks(&self) -> usize {
        self.nodes.len() - 1
    }

    /// Appends a block of sum 0: its node covers earlier blocks too, whose
    /// sum it takes from two prefixes.
    pub(super) fn push_block(&mut self) {
        let i = self.nodes.len();
        let covered = self.prefix(i - 1).wrapping_sub(self.prefix(i - lowbit(i)));
        super::room::reserve_one(&mut self.nodes);
        self.nodes.push(covered);
    }

    /// Adds `delta` (wrapping: a decrease is its two's complement) to block `b`.
    #[inline]
    pub(super) fn add(&mut self, b: usize, delta: u64) {
        let mut i = b + 1;
        while i < self.nodes.len() {
            self.nodes[i] = self.nodes[i].wrapping_add(delta);
            i += lowbit(i);
        }
    }

    /// The sum of blocks `0..b`.
    #[inline]
    pub(super) fn prefix(&self, b: usize) -> u64 {
        let mut i = b;
        let mut sum = 0u64;
        while i > 0 {
            sum = sum.wrapping_add(self.nodes[i]);
            i -= lowbit(i);
        }
        sum
    }

    /// The block holding the `target`-th unit (1-based, counted from block
    /// 0) and the units before it: the least `b` with `prefix(b + 1) >=
    /// target`. `target` must be at most the sum of every block.
    pub(super) fn search(&self, target: u64) -> (usize, u64) {
        let n = self.blocks();
        let mut at = 0usize;
        let mut before = 0u64;
        let mut step = if n == 0 { 0 } else { 1 << n.ilog2() };
        while step > 0 {
            let next = at + step;
            if next <= n && before.wrapping_add(self.nodes[next]) < target {
                at = next;
                before = before.wrapping_add(self.nodes[next]);
            }
            step >>= 1;
        }
        (at, before)
    }

    /// The block sums the tree holds, O(blocks): its construction undone.
    pub(super) fn sums(&self) -> Vec<u64> {
        let mut sums = self.nodes.clone();
        let n = self.blocks();
        for i in (1..=n).rev() {
            let parent = i + lowbit(i);
            if parent <= n {
                sums[parent] = sums[parent].wrapping_sub(sums[i]);
            }
        }
        sums.remove(0);
        sums
    }

    /// Heap bytes held.
    pub(super) fn heap_bytes(&self) -> usize {
        self.nodes.capacity() * 8
    }

    /// Releases spare room.
    pub(super) fn shrink(&mut self) {
        self.nodes.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_searches_and_appends_agree_with_a_plain_list() {
        let sums: Vec<u64> = (0..37).map(|i| (i * 7 % 5) as u64).collect();
        let mut tree = Fenwick::from_sums(&sums[..20]);
        let mut plain = sums[..20].to_vec();
        for &s in &sums[20..] {
            tree.push_block();
            tree.add(plain.len(), s);
            plain.push(s);
        }
        tree.add(3, 10);
        plain[3] += 10;
        tree.add(3, 2u64.wrapping_neg());
        plain[3] -= 2;
        for b in 0..=plain.len() {
            assert_eq!(tree.prefix(b), plain[..b].iter().sum::<u64>(), "prefix {b}");
        }
        assert_eq!(tree.sums(), plain);
        let total: u64 = plain.iter().sum();
        for target in 1..=total {
            let (b, before) = tree.search(target);
            assert_eq!(before, plain[..b].iter().sum::<u64>());
            assert!(
                before < target && before + plain[b] >= target,
                "target {target}"
            );
        }
    }
}

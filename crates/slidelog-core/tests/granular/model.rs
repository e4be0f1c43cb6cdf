//! A plain model of granular limits (docs/design.md §1.1), sharing no code
//! with the engine: a list of records (stored time, costs per limit), each
//! stored at the request's time rounded up to the gcd of its limits'
//! granularities, each counting in a limit at its time rounded up to that
//! limit's granularity. Every field follows from those rounded times by the
//! rule of §1-§2. Old records move to their coarse tier at every recording
//! (the engine does it lazily: no decision can tell).

use slidelog_core::{Counts, Decision, Limit, RecordRef};

/// A record: its stored time and its cost per limit (3 positions).
pub type Record = (u64, [u64; 3]);

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

fn up(t: u64, g: u64) -> u64 {
    t.div_ceil(g) * g
}

/// The granules records that limits `..k` (by window) no longer count
/// may move to, coarsest first: the longer limits' gcd, then divided by
/// its smallest prime factor over the next tier's granule, step by step.
fn tier_granules(order: &[(u64, u64)], k: usize) -> Vec<u64> {
    let top = order[k..].iter().fold(0, |a, l| gcd(a, l.1));
    let bottom = order[k - 1..].iter().fold(0, |a, l| gcd(a, l.1));
    let mut out = Vec::new();
    let mut d = top;
    while d > bottom {
        out.push(d);
        let rest = d / bottom;
        match (2..=1_000u64.min(rest)).find(|p| rest % p == 0) {
            Some(p) => d /= p,
            None => break,
        }
    }
    out
}

/// One key's log under one set of limits.
pub struct Model {
    pub limits: Vec<Limit>,
    pub log: Vec<Record>,
    /// How long records are kept: the request's keep counted from its
    /// stored time (at most a granule past its `now`), until the log empties.
    pub horizon: u64,
}

impl Model {
    pub fn new(limits: Vec<Limit>) -> Self {
        Self {
            limits,
            log: Vec::new(),
            horizon: 0,
        }
    }

    fn granule(&self) -> u64 {
        self.limits.iter().map(Limit::granularity_ms).fold(0, gcd)
    }

    fn keep(&self) -> u64 {
        self.limits
            .iter()
            .map(|l| l.window_ms() + l.granularity_ms() - 1)
            .max()
            .unwrap()
    }

    /// Limit `i`'s live units at `now`, by the time they count at, oldest first.
    fn units(&self, now: u64, i: usize) -> Vec<u64> {
        let l = &self.limits[i];
        let mut units: Vec<u64> = self
            .log
            .iter()
            .map(|(s, c)| (up(*s, l.granularity_ms()), c[i]))
            .filter(|(r, _)| r + l.window_ms() > now)
            .flat_map(|(r, c)| std::iter::repeat_n(r, c as usize))
            .collect();
        units.sort_unstable();
        units
    }

    fn wait(&self, now: u64, i: usize, cost: u64) -> Option<u64> {
        let (max, w) = (self.limits[i].max(), self.limits[i].window_ms());
        let units = self.units(now, i);
        let live = units.len() as u64;
        (live + cost > max).then(|| {
            let k = live + cost - max;
            if k > live {
                w
            } else {
                units[k as usize - 1] + w - now
            }
        })
    }

    fn deciding(&self, now: u64, costs: [u64; 3]) -> usize {
        let key = |i: usize| {
            let l = &self.limits[i];
            let live = self.units(now, i).len() as u64;
            match self.wait(now, i, costs[i]) {
                Some(w) => (0, u64::MAX - w, l.window_ms()),
                None => (1, l.max() - live - costs[i], l.window_ms()),
            }
        };
        (0..self.limits.len()).min_by_key(|&i| (key(i), i)).unwrap()
    }

    /// The newest record costing something in limit `i`, at the time it
    /// counts at (live ones only when `live_only`).
    fn newest(&self, now: u64, i: usize, live_only: bool) -> Option<u64> {
        let l = &self.limits[i];
        self.log
            .iter()
            .filter(|(_, c)| c[i] > 0)
            .map(|(s, _)| up(*s, l.granularity_ms()))
            .filter(|r| !live_only || r + l.window_ms() > now)
            .max()
    }

    fn expire(&mut self, now: u64) {
        let keep = self.keep().max(self.horizon);
        self.log.retain(|(s, _)| s + keep > now);
        self.forget_if_empty();
    }

    fn forget_if_empty(&mut self) {
        if self.log.is_empty() {
            self.horizon = 0;
        }
    }

    /// A record stored at `ts` at `now` keeps the log that long.
    fn raise(&mut self, now: u64, ts: u64) {
        self.horizon = self.horizon.max(self.keep() + ts - now);
    }

    fn add(&mut self, ts: u64, costs: [u64; 3]) {
        let at = self.log.partition_point(|(t, _)| *t < ts);
        match self.log.get_mut(at) {
            Some((t, c)) if *t == ts => (0..3).for_each(|p| c[p] += costs[p]),
            _ => self.log.insert(at, (ts, costs)),
        }
    }

    /// The limits' (window, granularity), by window.
    fn order(&self) -> Vec<(u64, u64)> {
        let mut order: Vec<(u64, u64)> = self
            .limits
            .iter()
            .map(|l| (l.window_ms(), l.granularity_ms()))
            .collect();
        order.sort_unstable();
        order
    }

    /// Where a record stored at `s` is at `now`: moved to the coarsest
    /// granule (coarsest tier first) at which no finer limit can count it,
    /// or where it is.
    fn place(&self, s: u64, now: u64) -> u64 {
        let order = self.order();
        for k in (1..order.len()).rev() {
            for granule in tier_granules(&order, k) {
                let moved = up(s, granule);
                if order[..k].iter().all(|&(w, g)| up(moved, g) + w <= now) {
                    return moved;
                }
            }
        }
        s
    }

    /// Moves every record that no finer limit can count any more to the
    /// granule of the limits that still can (coarsest first), merging.
    fn rebucket(&mut self, now: u64) {
        for (s, c) in std::mem::take(&mut self.log) {
            self.add(self.place(s, now), c);
        }
    }

    /// A check (`record`) or a peek of `costs`.
    pub fn check(&mut self, now: u64, costs: [u64; 3], record: bool) -> Decision {
        if record {
            self.expire(now);
            self.rebucket(now);
        }
        let n = self.limits.len();
        let i = self.deciding(now, costs);
        let l = self.limits[i];
        let (max, w, g) = (l.max(), l.window_ms(), l.granularity_ms());
        let live = self.units(now, i).len() as u64;
        let allowed = (0..n).all(|j| self.wait(now, j, costs[j]).is_none());
        let newest = self.newest(now, i, false);
        let mut d = Decision {
            allowed,
            limit: max,
            window_ms: w,
            count: live,
            remaining: max.saturating_sub(live),
            retry_after_ms: self.wait(now, i, costs[i]).unwrap_or(0),
            reset_after_ms: newest.map_or(0, |r| (r + w).saturating_sub(now)),
            degraded: false,
            blocked: false,
            record: None,
        };
        if allowed {
            d.count = live + costs[i];
            d.remaining = max - d.count;
            d.reset_after_ms = newest.map_or(up(now, g), |r| r.max(up(now, g))) + w - now;
            if record {
                let ts = up(now, self.granule());
                self.add(ts, costs);
                self.raise(now, ts);
                d.record = Some(RecordRef { ts, id: None });
            }
        }
        d
    }

    /// Every limit's standing (cost 1), and the deciding one's decision.
    pub fn standing(&self, now: u64) -> (Decision, Vec<Counts>) {
        let of = |i: usize| {
            let l = &self.limits[i];
            let live = self.units(now, i).len() as u64;
            let retry = self.wait(now, i, 1);
            let reset = self
                .newest(now, i, true)
                .map_or(0, |r| r + l.window_ms() - now);
            (retry.is_none(), l.max(), l.window_ms(), live, retry, reset)
        };
        let decision = |i: usize| {
            let (allowed, max, w, live, retry, reset) = of(i);
            Decision {
                allowed,
                limit: max,
                window_ms: w,
                count: live,
                remaining: max.saturating_sub(live),
                retry_after_ms: retry.unwrap_or(0),
                reset_after_ms: reset,
                degraded: false,
                blocked: false,
                record: None,
            }
        };
        let n = self.limits.len();
        let mut d = decision(self.deciding(now, [1, 1, 1]));
        d.allowed = (0..n).all(|i| of(i).0);
        let each = (0..n)
            .map(|i| {
                let s = decision(i);
                Counts {
                    count: s.count,
                    remaining: s.remaining,
                    retry_after_ms: s.retry_after_ms,
                    reset_after_ms: s.reset_after_ms,
                }
            })
            .collect();
        (d, each)
    }

    /// Settles the share `r` (a receipt's time and costs) to `costs`:
    /// whether the record was found, and the standing after.
    pub fn settle(
        &mut self,
        now: u64,
        r: Record,
        costs: [u64; 3],
    ) -> (bool, Decision, Vec<Counts>) {
        self.expire(now);
        self.rebucket(now);
        let (ts, share) = r;
        // The log was just re-bucketed at `now`: the record is where
        // `place` puts it, merged with whatever shares that granule.
        let home = self.place(ts, now);
        let found = self
            .log
            .iter()
            .position(|(t, c)| *t == home && (0..3).all(|p| c[p] >= share[p]));
        let mut record = None;
        if let Some(j) = found {
            let c = &mut self.log[j].1;
            *c = [0, 1, 2].map(|p| c[p] - share[p] + costs[p]);
            if *c == [0; 3] {
                self.log.remove(j);
                self.forget_if_empty();
            }
            if costs != [0; 3] {
                record = Some(RecordRef { ts, id: None });
            }
        }
        let (mut d, each) = self.standing(now);
        d.record = record;
        (found.is_some(), d, each)
    }

    /// Whether the record a receipt of `r` names counts anywhere at `now`.
    pub fn counts_anywhere(&self, now: u64, r: Record) -> bool {
        self.limits
            .iter()
            .enumerate()
            .any(|(i, l)| r.1[i] > 0 && up(r.0, l.granularity_ms()) + l.window_ms() > now)
    }

    /// A charge of `costs`: into the newest record, moved to now, when a
    /// limit it costs something in is full.
    pub fn charge(&mut self, now: u64, costs: [u64; 3]) -> (Decision, Vec<Counts>) {
        self.expire(now);
        self.rebucket(now);
        let n = self.limits.len();
        let mut record = None;
        if costs[..n] != [0, 0, 0][..n] {
            let full = (0..n)
                .any(|i| costs[i] > 0 && self.units(now, i).len() as u64 >= self.limits[i].max());
            let at = up(now, self.granule());
            let ts = match self.log.pop() {
                Some((t, c)) if full => {
                    let ts = t.max(at);
                    self.log.push((ts, [0, 1, 2].map(|p| c[p] + costs[p])));
                    ts
                }
                newest => {
                    self.log.extend(newest);
                    self.add(at, costs);
                    at
                }
            };
            self.raise(now, at);
            record = Some(RecordRef { ts, id: None });
        }
        let (mut d, each) = self.standing(now);
        d.record = record;
        (d, each)
    }
}

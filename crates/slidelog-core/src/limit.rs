//! Validated inputs: a [`Limit`] (`max` units per `window`, optionally named)
//! and a [`Request`] (key, the limits that apply to it, and the cost). Every
//! bound of docs/design.md §1 is checked here, once, so stores and transports
//! never see an invalid value.

use crate::error::InputError;
use compact_str::CompactString;
use smallvec::SmallVec;
use std::time::Duration;

/// Largest `max` of a limit.
pub const MAX_MAX: u64 = 10_000_000;
/// Longest window: 366 days in milliseconds.
pub const MAX_WINDOW_MS: u64 = 366 * 24 * 60 * 60 * 1000;
/// Longest key, in bytes.
pub const MAX_KEY_BYTES: usize = 512;
/// Most limits that may apply to one request.
pub const MAX_LIMITS: usize = 16;
/// Largest cost of one request (a cost is also bounded by the smallest `max`).
pub const MAX_COST: u64 = MAX_MAX;
/// Longest block, override TTL and limit `block_ms` (docs/design.md §5.4):
/// 366 days, the longest window (a "forever" block is a deletion an
/// operator forgot).
pub const MAX_BLOCK_MS: u64 = MAX_WINDOW_MS;

pub use crate::name::{LimitName, MAX_NAME_BYTES};

/// `max` units per `window_ms` milliseconds, with an optional name
/// (`requests`, `tokens`) that answers and headers report it by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Limit {
    // `max` fits 32 bits (at most 10,000,000): so the granularity takes no
    // room the limit did not already have (a `Limit` stays 56 bytes).
    max: u32,
    window_ms: u64,
    /// Records count in this limit at their time rounded up to a multiple
    /// of this (1: exact milliseconds), docs/design.md §1.1.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "is_exact"))]
    granularity_ms: u64,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    name: Option<LimitName>,
    /// How long a key this limit refuses stays refused (0: not at all),
    /// docs/design.md §5.4.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "is_zero"))]
    block_ms: u64,
}

/// Whether a `block_ms` is the default (serialized only when set).
#[cfg(feature = "serde")]
fn is_zero(ms: &u64) -> bool {
    *ms == 0
}

/// Serde: a granularity of 1 ms is the default and is not written.
#[cfg(feature = "serde")]
fn is_exact(granularity_ms: &u64) -> bool {
    *granularity_ms == 1
}

impl Limit {
    /// A limit of `max` units per `window_ms` milliseconds.
    ///
    /// Errors name the field and its bound: `max` must be 1 ..= 10,000,000 and
    /// `window_ms` 1 ..= 366 days.
    pub fn new(max: u64, window_ms: u64) -> Result<Self, InputError> {
        if !(1..=MAX_MAX).contains(&max) {
            return Err(InputError::Max { got: max });
        }
        if !(1..=MAX_WINDOW_MS).contains(&window_ms) {
            return Err(InputError::Window { got_ms: window_ms });
        }
        Ok(Self {
            max: max as u32,
            window_ms,
            granularity_ms: 1,
            name: None,
            block_ms: 0,
        })
    }

    /// The same limit blocking a key it refuses for `block_ms` from that
    /// refusal (0: no block), even after its window slid; refusals during
    /// the block do not extend it (docs/design.md §5.4). At most
    /// [`MAX_BLOCK_MS`].
    ///
    /// ```
    /// # use slidelog_core::Limit;
    /// let limit = Limit::new(5, 1_000)?.with_block_ms(3_000)?;
    /// assert_eq!(limit.block_ms(), 3_000);
    /// assert!(Limit::new(5, 1_000)?.with_block_ms(u64::MAX).is_err());
    /// # Ok::<(), slidelog_core::InputError>(())
    /// ```
    pub fn with_block_ms(self, block_ms: u64) -> Result<Self, InputError> {
        if block_ms > MAX_BLOCK_MS {
            return Err(InputError::BlockMs { got: block_ms });
        }
        Ok(Self { block_ms, ..self })
    }

    /// How long a key this limit refuses stays refused, in ms (0: not at all).
    pub fn block_ms(&self) -> u64 {
        self.block_ms
    }

    /// The same limit counting records at their time rounded up to a
    /// multiple of `granularity_ms` (docs/design.md §1.1): never early, at
    /// most `granularity_ms` late, and the log holds at most one record per
    /// granule of the window whatever the rate.
    ///
    /// `granularity_ms` must be 1 ..= `window_ms` and divide `window_ms`.
    ///
    /// ```
    /// # use slidelog_core::Limit;
    /// let day = Limit::new(100_000, 86_400_000)?.with_granularity(60_000)?;
    /// assert_eq!(day.granularity_ms(), 60_000);
    /// assert!(Limit::new(10, 1_000)?.with_granularity(300).is_err());
    /// # Ok::<(), slidelog_core::InputError>(())
    /// ```
    pub fn with_granularity(self, granularity_ms: u64) -> Result<Self, InputError> {
        let fits = (1..=self.window_ms).contains(&granularity_ms);
        if !fits || !self.window_ms.is_multiple_of(granularity_ms) {
            return Err(InputError::Granularity {
                got: granularity_ms,
                window_ms: self.window_ms,
            });
        }
        Ok(Self {
            granularity_ms,
            ..self
        })
    }

    /// The granularity of this limit in milliseconds (1: exact).
    pub fn granularity_ms(&self) -> u64 {
        self.granularity_ms
    }

    /// The same limit with its granularity raised to `floor_ms` (an
    /// operator's floor, [`crate::GranularityFloor`]): when it is below, to
    /// the smallest divisor of `window_ms` at or above `floor_ms`. A
    /// granularity at or above the floor is kept.
    pub fn with_floor_ms(self, floor_ms: u64) -> Self {
        if self.granularity_ms >= floor_ms {
            return self;
        }
        let granularity_ms = smallest_divisor_from(self.window_ms, floor_ms);
        Self {
            granularity_ms,
            ..self
        }
    }

    /// The same limit carrying `name` (validated: see [`LimitName::new`]).
    ///
    /// ```
    /// # use slidelog_core::Limit;
    /// let tokens = Limit::new(20_000, 60_000)?.named("tokens")?;
    /// assert_eq!(tokens.name(), Some("tokens"));
    /// assert!(Limit::new(1, 1)?.named("two words").is_err());
    /// # Ok::<(), slidelog_core::InputError>(())
    /// ```
    pub fn named(self, name: &str) -> Result<Self, InputError> {
        Ok(Self {
            name: Some(LimitName::new(name)?),
            ..self
        })
    }

    /// The limit's name, if it was given one.
    pub fn name(&self) -> Option<&str> {
        self.name.as_ref().map(LimitName::as_str)
    }

    /// A limit of `max` units per `window` (millisecond resolution; a window
    /// with a sub-millisecond remainder is an error, never rounded).
    pub fn per(max: u64, window: Duration) -> Result<Self, InputError> {
        let ms = window.as_millis();
        if !window.subsec_nanos().is_multiple_of(1_000_000) || ms > u128::from(u64::MAX) {
            return Err(InputError::WindowResolution { got: window });
        }
        Self::new(max, ms as u64)
    }

    /// Units admitted per window.
    pub fn max(&self) -> u64 {
        u64::from(self.max)
    }

    /// Window length in milliseconds.
    pub fn window_ms(&self) -> u64 {
        self.window_ms
    }
}

/// Greatest common divisor (Euclid).
pub fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// `t` rounded up to a multiple of `g` (`g >= 1`; saturating at the top,
/// where no real time is).
#[inline]
pub fn round_up(t: u64, g: u64) -> u64 {
    if g == 1 {
        return t;
    }
    t.div_ceil(g).saturating_mul(g)
}

/// The smallest divisor of `n` that is at least `from` (`n` itself when
/// `from > n`). Round windows (60,000, 86,400,000) end the search within a
/// few steps; a prime window takes at most sqrt(n) steps (177,000 for the
/// longest window, well under a millisecond).
fn smallest_divisor_from(n: u64, from: u64) -> u64 {
    let from = from.max(1);
    if from >= n {
        return n;
    }
    if from.saturating_mul(from) <= n {
        // The answer is at most sqrt(n) or its pair: scan upwards.
        let mut d = from;
        while d.saturating_mul(d) <= n {
            if n.is_multiple_of(d) {
                return d;
            }
            d += 1;
        }
    }
    // Divisors above sqrt(n) are n / e for e below it: the smallest one at
    // or above `from` is n / (the largest such e with n / e >= from).
    let mut e = (n / from).min(n);
    while e > 1 {
        if n.is_multiple_of(e) && n / e >= from {
            return n / e;
        }
        e -= 1;
    }
    n
}

/// `"<max>/<window>"`: `100/minute`, `10/1s`, `1000000/60s`, `5/500ms`,
/// `3/hour`, optionally named: `requests=60/minute`, optionally with a
/// granularity after `@`: `100000/day@1m` ([`Limit::with_granularity`]). The window is a unit
/// (`second`, `minute`, `hour`, `day`, `week`, their plurals and `s`, `m`,
/// `h`, `d`, `w`) or a number followed by one (`ms` too). Bounds are those of
/// [`Limit::new`] and [`LimitName::new`].
impl std::str::FromStr for Limit {
    type Err = LimitParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || LimitParseError::Syntax(text.to_owned());
        let (name, text) = match text.split_once('=') {
            Some((name, rest)) => (Some(name.trim()), rest),
            None => (None, text),
        };
        let (text, granularity) = match text.split_once('@') {
            Some((rate, granularity)) => (rate, Some(granularity)),
            None => (text, None),
        };
        let (max, window) = split_rate(text).ok_or_else(bad)?;
        let max: u64 = max.trim().parse().map_err(|_| bad())?;
        let window_ms = span_ms(window).ok_or_else(bad)?;
        let mut limit = Self::new(max, window_ms)?;
        if let Some(granularity) = granularity {
            limit = limit.with_granularity(span_ms(granularity).ok_or_else(bad)?)?;
        }
        Ok(match name {
            Some(name) => limit.named(name)?,
            None => limit,
        })
    }
}

/// A span as `[count]unit` (`1s`, `500ms`, `minute`) in ms; `None` when
/// it is not one. A product past `u64` is `u64::MAX`, which every bound
/// then refuses by name.
fn span_ms(text: &str) -> Option<u64> {
    let text = text.trim();
    let digits = text.len() - text.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let (count, unit) = text.split_at(digits);
    let count: u64 = if count.is_empty() {
        1
    } else {
        count.parse().ok()?
    };
    let unit_ms = unit_ms(&unit.trim().to_ascii_lowercase())?;
    Some(count.saturating_mul(unit_ms))
}

/// `"<max>/<window>"` or `"<max> per <window>"` (the Python `limits`
/// library's form, any case) split into its two sides.
fn split_rate(text: &str) -> Option<(&str, &str)> {
    if let Some(sides) = text.split_once('/') {
        return Some(sides);
    }
    let lower = text.to_ascii_lowercase();
    let at = lower.find(" per ")?;
    Some((&text[..at], &text[at + " per ".len()..]))
}

/// The milliseconds of a window unit (lower case), singular or plural; a
/// month is 30 days and a year 365, as the Python `limits` library counts
/// them.
fn unit_ms(unit: &str) -> Option<u64> {
    Some(match unit {
        "ms" | "millisecond" | "milliseconds" => 1,
        "s" | "sec" | "second" | "seconds" => 1_000,
        "m" | "min" | "minute" | "minutes" => 60_000,
        "h" | "hour" | "hours" => 3_600_000,
        "d" | "day" | "days" => 86_400_000,
        "w" | "week" | "weeks" => 604_800_000,
        "month" | "months" => 30 * 86_400_000,
        "y" | "year" | "years" => 365 * 86_400_000,
        _ => return None,
    })
}

/// Parses a list of limits separated by `,`, `;` or `|` (the separators of
/// the Python `limits` library's `parse_many`), each as [`Limit`]'s
/// `FromStr` reads it: `"requests=60/minute, tokens=20000/minute"`,
/// `"10/second;100/minute"`, `"100 per minute"`, any case. Names must be
/// unique within the list.
///
/// ```
/// let limits = slidelog_core::limit::parse_list("requests=60/minute, tokens=20000/minute")?;
/// assert_eq!(limits[1].name(), Some("tokens"));
/// assert!(slidelog_core::limit::parse_list("a=1/s, a=2/s").is_err());
/// let limits = slidelog_core::limit::parse_list("10/second;100 per MINUTE|1000 per 2 hours")?;
/// let windows: Vec<u64> = limits.iter().map(|l| l.window_ms()).collect();
/// assert_eq!(windows, [1_000, 60_000, 7_200_000]);
/// # Ok::<(), slidelog_core::LimitParseError>(())
/// ```
pub fn parse_list(text: &str) -> Result<Vec<Limit>, LimitParseError> {
    let limits = text
        .split([',', ';', '|'])
        .map(str::parse)
        .collect::<Result<Vec<Limit>, _>>()?;
    check_names(&limits)?;
    Ok(limits)
}

/// Checks that no two of `limits` carry the same name (unnamed limits
/// never clash).
pub fn check_names(limits: &[Limit]) -> Result<(), InputError> {
    for (index, limit) in limits.iter().enumerate() {
        if let Some(name) = limit.name()
            && limits[..index].iter().any(|l| l.name() == Some(name))
        {
            return Err(InputError::DuplicateName {
                name: name.to_owned(),
            });
        }
    }
    Ok(())
}

/// Why a `"<max>/<window>"` text is not a [`Limit`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitParseError {
    /// Not of the form `[name=]<max>/<window>[@<granularity>]`.
    #[error(
        "limit {0:?} is not [name=]<max>/<window>[@<granularity>] or <max> per <window>, e.g. 100/minute, 100 per minute, 10/1s, 1000000/60s, 5/500ms, tokens=20000/minute, 100000/day@1m"
    )]
    Syntax(String),
    /// A bound of [`Limit::new`].
    #[error(transparent)]
    Input(#[from] InputError),
}

/// One decision to make: which key, under which limits, for how many units.
///
/// Built only through [`Request::new`], so it always satisfies docs/design.md §1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    // Inline storage: keys up to 24 bytes and up to two limits need no
    // allocation, and a decision touches one cache line less.
    key: CompactString,
    limits: SmallVec<[Limit; 2]>,
    /// One cost for every limit, or one per limit (matched by position).
    costs: SmallVec<[u64; 2]>,
    longest_window_ms: u64,
    /// The gcd of the limits' granularities: where the request's record is
    /// stored (docs/design.md §1.1).
    granule_ms: u64,
}

impl Request {
    /// Validates the key (1 ..= 512 bytes), the limits (1 ..= 16, each valid)
    /// and the cost (1 ..= the smallest `max`).
    pub fn new(
        key: impl Into<String>,
        limits: impl Into<Vec<Limit>>,
        cost: u64,
    ) -> Result<Self, InputError> {
        Self::validated(
            CompactString::from(key.into()),
            SmallVec::from_vec(limits.into()),
            cost,
        )
    }

    /// [`new`](Self::new) from a borrowed key and limits, copied straight
    /// into the request: a key of up to 24 bytes and up to two limits need
    /// no allocation at all, where `new` takes an owned `String` and `Vec`
    /// (for a transport that parsed them out of a body, two allocations
    /// freed at once). The same checks, in the same order, as `new`.
    ///
    /// ```
    /// # use slidelog_core::{Limit, Request};
    /// let limits = [Limit::new(5, 1_000)?];
    /// let request = Request::from_slices("user-1", &limits, 2)?;
    /// assert_eq!(request, Request::new("user-1", limits.to_vec(), 2)?);
    /// assert!(Request::from_slices("", &limits, 1).is_err());
    /// # Ok::<(), slidelog_core::InputError>(())
    /// ```
    pub fn from_slices(key: &str, limits: &[Limit], cost: u64) -> Result<Self, InputError> {
        Self::validated(CompactString::new(key), SmallVec::from_slice(limits), cost)
    }

    /// The checks of [`new`](Self::new) on a key and limits already in the
    /// request's own storage.
    fn validated(
        key: CompactString,
        limits: SmallVec<[Limit; 2]>,
        cost: u64,
    ) -> Result<Self, InputError> {
        validate_key(&key)?;
        if limits.is_empty() || limits.len() > MAX_LIMITS {
            return Err(InputError::LimitCount { got: limits.len() });
        }
        check_names(&limits)?;
        let smallest_max = limits.iter().map(Limit::max).min().unwrap_or(1);
        if cost == 0 || cost > smallest_max {
            return Err(InputError::Cost {
                got: cost,
                max: smallest_max,
            });
        }
        // A record counts up to `granularity - 1` ms past its window
        // (docs/design.md §1.1): it is kept, and its key lives, that long.
        let longest_window_ms = limits
            .iter()
            .map(|l| l.window_ms() + (l.granularity_ms() - 1))
            .max()
            .unwrap_or(1);
        let granule_ms = limits
            .iter()
            .map(Limit::granularity_ms)
            .reduce(gcd)
            .unwrap_or(1);
        Ok(Self {
            key,
            limits,
            costs: SmallVec::from_elem(cost, 1),
            longest_window_ms,
            granule_ms,
        })
    }

    /// A request that carries its own cost for each limit, matched by
    /// position: `costs[i]` units against `limits[i]` (for example 1 against
    /// 3,000 requests per minute and 4,000 against 1,000,000 tokens per
    /// minute). Each cost must be 1 ..= its own limit's `max`. It is admitted
    /// only if every limit admits its own cost; a rejection records nothing.
    pub fn with_costs(
        key: impl Into<String>,
        limits: impl Into<Vec<Limit>>,
        costs: impl Into<Vec<u64>>,
    ) -> Result<Self, InputError> {
        let limits: Vec<Limit> = limits.into();
        let costs: Vec<u64> = costs.into();
        Self::check_own_costs(&limits, &costs)?;
        let mut request = Self::new(key, limits, 1)?;
        request.costs = one_or_each(costs);
        Ok(request)
    }

    /// [`with_costs`](Self::with_costs) from a borrowed key, limits and
    /// costs (see [`from_slices`](Self::from_slices)): the same checks, in
    /// the same order.
    ///
    /// ```
    /// # use slidelog_core::{Limit, Request};
    /// let limits = [Limit::new(3_000, 60_000)?, Limit::new(1_000_000, 60_000)?];
    /// let request = Request::with_costs_from_slices("user-7", &limits, &[1, 4_000])?;
    /// assert_eq!(request.costs(), [1, 4_000]);
    /// assert_eq!(request, Request::with_costs("user-7", limits.to_vec(), vec![1, 4_000])?);
    /// # Ok::<(), slidelog_core::InputError>(())
    /// ```
    pub fn with_costs_from_slices(
        key: &str,
        limits: &[Limit],
        costs: &[u64],
    ) -> Result<Self, InputError> {
        Self::check_own_costs(limits, costs)?;
        let mut request = Self::from_slices(key, limits, 1)?;
        request.costs = match costs {
            [first, rest @ ..] if rest.iter().all(|c| c == first) => SmallVec::from_elem(*first, 1),
            each => SmallVec::from_slice(each),
        };
        Ok(request)
    }

    /// The checks of a cost per limit that come before the key's
    /// ([`with_costs`](Self::with_costs)).
    fn check_own_costs(limits: &[Limit], costs: &[u64]) -> Result<(), InputError> {
        if limits.is_empty() || limits.len() > MAX_LIMITS {
            return Err(InputError::LimitCount { got: limits.len() });
        }
        if costs.len() != limits.len() {
            return Err(InputError::CostCount {
                got: costs.len(),
                limits: limits.len(),
            });
        }
        for (index, (limit, &cost)) in limits.iter().zip(costs).enumerate() {
            if cost == 0 || cost > limit.max() {
                return Err(InputError::LimitCost {
                    index,
                    got: cost,
                    max: limit.max(),
                });
            }
        }
        Ok(())
    }

    /// The request of a settle or a charge (docs/design.md §4.6): the actual
    /// costs of a record, one for every limit or one per limit (matched by
    /// position). Unlike a check's, a cost may be 0 (the record counts
    /// nowhere in that limit; all 0 is a refund) and may exceed the limit's
    /// `max` (usage known after the fact is recorded as it was: the limit is
    /// then over until enough slides out). Each cost is bounded by the
    /// absolute [`MAX_COST`]; an operator's `--max-cost` is checked by
    /// [`crate::Bounds::check`] as for a check. Such a request is meant for
    /// settle and charge: a check on it admits nothing above a limit's max.
    pub fn usage(
        key: impl Into<String>,
        limits: impl Into<Vec<Limit>>,
        costs: impl Into<Vec<u64>>,
    ) -> Result<Self, InputError> {
        let limits: Vec<Limit> = limits.into();
        let costs: Vec<u64> = costs.into();
        if costs.len() != 1 && costs.len() != limits.len() {
            return Err(InputError::CostCount {
                got: costs.len(),
                limits: limits.len(),
            });
        }
        if let Some((index, &got)) = costs.iter().enumerate().find(|(_, c)| **c > MAX_COST) {
            return Err(InputError::UsageCost { index, got });
        }
        let mut request = Self::new(key, limits, 1)?;
        request.costs = one_or_each(costs);
        Ok(request)
    }

    /// A request of cost 1 under one limit.
    pub fn single(key: impl Into<String>, limit: Limit) -> Result<Self, InputError> {
        Self::new(key, vec![limit], 1)
    }

    /// The identity whose log is decided on.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Every limit that applies; the request is admitted only if all admit it.
    pub fn limits(&self) -> &[Limit] {
        &self.limits
    }

    /// Units this request consumes when admitted: its one cost, or, when it
    /// carries a cost per limit, the first limit's.
    pub fn cost(&self) -> u64 {
        self.costs[0]
    }

    /// The cost against the limit at `index`.
    pub fn cost_for(&self, index: usize) -> u64 {
        self.costs[index.min(self.costs.len() - 1)]
    }

    /// The gcd of the limits' granularities (1 when any is exact): the
    /// request's record is stored at its time rounded up to a multiple of
    /// it, so that every limit rounds it as it would the request's own time.
    pub fn granule_ms(&self) -> u64 {
        self.granule_ms
    }

    /// The time `now` rounded up to the request's granule: where its
    /// record is stored (docs/design.md §1.1).
    pub fn stored_at(&self, now: u64) -> u64 {
        round_up(now, self.granule_ms)
    }

    /// The costs as a record lists them: one for every limit, or one per limit.
    pub fn costs(&self) -> &[u64] {
        &self.costs
    }

    /// True when one cost applies to every limit.
    pub fn has_one_cost(&self) -> bool {
        self.costs.len() == 1
    }

    /// The longest window among the limits, each lengthened by its
    /// granularity less 1 ms (a record counts that much past its window,
    /// docs/design.md §1.1): how long records are kept. The longest window
    /// itself for exact limits.
    pub fn longest_window_ms(&self) -> u64 {
        self.longest_window_ms
    }

    /// The same request under `limits` (the same windows and maxes, other
    /// granularities: an operator's floor), its costs kept.
    pub(crate) fn with_limits(&self, limits: Vec<Limit>) -> Self {
        debug_assert_eq!(limits.len(), self.limits.len());
        let mut request = Self::validated(self.key.clone(), SmallVec::from_vec(limits), 1)
            .expect("the same windows and maxes validate again");
        request.costs = self.costs.clone();
        request
    }

    /// The same request with another cost for every limit (validated again).
    pub fn with_cost(&self, cost: u64) -> Result<Self, InputError> {
        Self::validated(self.key.clone(), self.limits.clone(), cost)
    }
}

/// Checks a key on its own (for reset and inspection): 1 ..= 512 bytes.
pub fn validate_key(key: &str) -> Result<(), InputError> {
    if key.is_empty() {
        return Err(InputError::EmptyKey);
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(InputError::KeyTooLong { got: key.len() });
    }
    Ok(())
}

/// The costs a request keeps: equal costs are one cost for all (the common,
/// plain layout), different ones one per limit. `costs` is not empty.
fn one_or_each(costs: Vec<u64>) -> SmallVec<[u64; 2]> {
    if costs.iter().all(|&c| c == costs[0]) {
        SmallVec::from_elem(costs[0], 1)
    } else {
        SmallVec::from_vec(costs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_inclusive() {
        assert!(Limit::new(1, 1).is_ok());
        assert!(Limit::new(MAX_MAX, MAX_WINDOW_MS).is_ok());
        assert_eq!(Limit::new(0, 1), Err(InputError::Max { got: 0 }));
        assert_eq!(
            Limit::new(MAX_MAX + 1, 1),
            Err(InputError::Max { got: MAX_MAX + 1 })
        );
        assert_eq!(Limit::new(1, 0), Err(InputError::Window { got_ms: 0 }));
        assert_eq!(
            Limit::new(1, MAX_WINDOW_MS + 1),
            Err(InputError::Window {
                got_ms: MAX_WINDOW_MS + 1
            })
        );
    }

    #[test]
    fn the_python_limits_syntax_parses_in_any_case() {
        let per = |t: &str| t.parse::<Limit>().map(|l| (l.max(), l.window_ms()));
        assert_eq!(per("100 per minute"), Ok((100, 60_000)));
        assert_eq!(per("100/MINUTE"), Ok((100, 60_000)));
        assert_eq!(per("5 PER 2 Hours"), Ok((5, 7_200_000)));
        assert_eq!(per("1/month"), Ok((1, 2_592_000_000)));
        assert_eq!(per("1/year"), Ok((1, 31_536_000_000)));
        for bad in [
            "100 minute",
            "per minute",
            "10/fortnight",
            "10 per",
            "ten/second",
        ] {
            let err = per(bad).unwrap_err();
            assert!(matches!(err, LimitParseError::Syntax(_)), "{bad}: {err}");
        }
        let list = parse_list("10/second;100/minute").unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(parse_list("1/s | 2/s").unwrap().len(), 2);
    }

    #[test]
    fn limits_parse_from_text() {
        let p = |t: &str| t.parse::<Limit>();
        assert_eq!(p("100/minute"), Ok(Limit::new(100, 60_000).unwrap()));
        assert_eq!(p("10/1s"), Ok(Limit::new(10, 1_000).unwrap()));
        assert_eq!(p("1000000/60s"), Ok(Limit::new(1_000_000, 60_000).unwrap()));
        assert_eq!(p("5/500ms"), Ok(Limit::new(5, 500).unwrap()));
        assert_eq!(p("3/hours"), Ok(Limit::new(3, 3_600_000).unwrap()));
        assert_eq!(p(" 7 / 2d "), Ok(Limit::new(7, 172_800_000).unwrap()));
        assert!(matches!(p("100"), Err(LimitParseError::Syntax(_))));
        assert!(matches!(
            p("100/fortnight"),
            Err(LimitParseError::Syntax(_))
        ));
        assert!(matches!(p("x/1s"), Err(LimitParseError::Syntax(_))));
        assert_eq!(
            p("0/1s"),
            Err(LimitParseError::Input(InputError::Max { got: 0 }))
        );
        assert!(matches!(p("1/400d"), Err(LimitParseError::Input(_))));
    }

    #[test]
    fn named_limits_parse_and_names_are_unique_per_request() {
        let limits = parse_list("requests=60/minute, tokens=20000/minute").unwrap();
        assert_eq!(limits[0].name(), Some("requests"));
        assert_eq!((limits[1].max(), limits[1].window_ms()), (20_000, 60_000));
        // Unnamed limits keep parsing as before and equal an unnamed Limit.
        assert_eq!(
            parse_list("60/minute").unwrap(),
            vec![Limit::new(60, 60_000).unwrap()]
        );
        assert!(matches!(
            "bad name=1/s".parse::<Limit>(),
            Err(LimitParseError::Input(InputError::Name { .. }))
        ));
        assert_eq!(
            parse_list("a=1/s, b=1/m, a=2/h"),
            Err(LimitParseError::Input(InputError::DuplicateName {
                name: "a".into()
            }))
        );
        let a = Limit::new(5, 1_000).unwrap().named("a").unwrap();
        assert_eq!(
            Request::new("k", vec![a, a], 1),
            Err(InputError::DuplicateName { name: "a".into() })
        );
        // Unnamed limits never clash.
        let plain = Limit::new(5, 1_000).unwrap();
        assert!(Request::new("k", vec![plain, plain], 1).is_ok());
    }

    #[test]
    fn sub_millisecond_windows_are_errors_not_rounded() {
        assert!(Limit::per(1, Duration::from_micros(1500)).is_err());
        assert_eq!(
            Limit::per(3, Duration::from_secs(60)).unwrap().window_ms(),
            60_000
        );
    }

    #[test]
    fn request_checks_key_cost_and_limit_count() {
        let l = Limit::new(5, 1000).unwrap();
        assert_eq!(Request::new("", vec![l], 1), Err(InputError::EmptyKey));
        assert_eq!(
            Request::new("k".repeat(513), vec![l], 1),
            Err(InputError::KeyTooLong { got: 513 })
        );
        assert!(Request::new("k".repeat(512), vec![l], 1).is_ok());
        assert_eq!(
            Request::new("k", vec![l], 0),
            Err(InputError::Cost { got: 0, max: 5 })
        );
        assert_eq!(
            Request::new("k", vec![l, Limit::new(3, 10).unwrap()], 4),
            Err(InputError::Cost { got: 4, max: 3 })
        );
        assert_eq!(
            Request::new("k", Vec::new(), 1),
            Err(InputError::LimitCount { got: 0 })
        );
        assert_eq!(
            Request::new("k", vec![l; 17], 1),
            Err(InputError::LimitCount { got: 17 })
        );
    }

    #[test]
    fn per_limit_costs_are_checked_against_their_own_limit() {
        let requests = Limit::new(3_000, 60_000).unwrap();
        let tokens = Limit::new(1_000_000, 60_000).unwrap();
        let r = Request::with_costs("k", vec![requests, tokens], vec![1, 4_000]).unwrap();
        assert_eq!((r.cost_for(0), r.cost_for(1)), (1, 4_000));
        assert!(!r.has_one_cost());
        assert_eq!(
            Request::with_costs("k", vec![requests, tokens], vec![3_001, 1]),
            Err(InputError::LimitCost {
                index: 0,
                got: 3_001,
                max: 3_000
            })
        );
        assert_eq!(
            Request::with_costs("k", vec![requests, tokens], vec![1, 0]),
            Err(InputError::LimitCost {
                index: 1,
                got: 0,
                max: 1_000_000
            })
        );
        assert_eq!(
            Request::with_costs("k", vec![requests, tokens], vec![1]),
            Err(InputError::CostCount { got: 1, limits: 2 })
        );
        // Equal costs are one cost.
        let same = Request::with_costs("k", vec![requests, tokens], vec![7, 7]).unwrap();
        assert!(same.has_one_cost());
        assert_eq!(same, Request::new("k", vec![requests, tokens], 7).unwrap());
    }

    #[test]
    fn error_messages_name_field_and_bound() {
        let msg = Limit::new(0, 1).unwrap_err().to_string();
        assert!(msg.contains("max") && msg.contains("10000000"), "{msg}");
        let msg = Limit::new(1, 0).unwrap_err().to_string();
        assert!(
            msg.contains("window") && msg.contains("31622400000"),
            "{msg}"
        );
        let msg = Request::new("k", vec![Limit::new(2, 1).unwrap()], 3)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("cost") && msg.contains('2'), "{msg}");
    }

    #[test]
    fn borrowed_constructors_answer_as_the_owned_ones() {
        let a = Limit::new(5, 1_000).unwrap();
        let b = Limit::new(100, 60_000).unwrap().named("tokens").unwrap();
        let dup = Limit::new(7, 1_000).unwrap().named("tokens").unwrap();
        let long = "k".repeat(MAX_KEY_BYTES + 1);
        let wide = "w".repeat(40); // beyond CompactString's inline bytes
        let many = vec![a; MAX_LIMITS + 1];
        let keys = ["k", "", wide.as_str(), long.as_str()];
        let sets: [&[Limit]; 5] = [&[a], &[a, b], &[a, b, a], &[b, dup], &many];
        for key in keys {
            for limits in sets {
                for cost in [0, 1, 5, 6] {
                    assert_eq!(
                        Request::from_slices(key, limits, cost),
                        Request::new(key, limits.to_vec(), cost),
                        "{key:?} {limits:?} {cost}"
                    );
                }
                let costs: [&[u64]; 5] = [&[1], &[1, 1], &[1, 90], &[0, 1], &[6, 1]];
                for costs in costs {
                    let costs = &costs[..costs.len().min(limits.len().max(1))];
                    assert_eq!(
                        Request::with_costs_from_slices(key, limits, costs),
                        Request::with_costs(key, limits.to_vec(), costs.to_vec()),
                        "{key:?} {limits:?} {costs:?}"
                    );
                }
            }
        }
        let r = Request::with_costs_from_slices("k", &[a, b, a], &[1, 2, 3]).unwrap();
        assert_eq!(r.costs(), [1, 2, 3]);
        assert_eq!(
            r.with_cost(2).unwrap(),
            Request::new("k", vec![a, b, a], 2).unwrap()
        );
    }
}

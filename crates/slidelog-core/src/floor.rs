//! An operator's granularity floor (docs/design.md §1.1): a fraction of
//! each limit's window below which a request's granularity is raised, to
//! the smallest divisor of the window at or above it. So callers who pick
//! their own limits cannot make a key hold more than `1 / fraction`
//! records per limit, whatever the rate.

use crate::{Limit, Request};

/// The floor as a fraction `num / den` of the window, in (0, 1].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GranularityFloor {
    num: u64,
    den: u64,
}

/// A floor text that is not a fraction in (0, 1].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("min granularity {0:?} must be a fraction of the window in (0, 1], as 1/600 or 0.001")]
pub struct FloorError(pub String);

impl GranularityFloor {
    /// The floor `num / den`; `None` outside (0, 1].
    pub fn new(num: u64, den: u64) -> Option<Self> {
        (num > 0 && den > 0 && num <= den).then_some(Self { num, den })
    }

    /// The smallest granularity this floor allows for `window_ms`:
    /// `ceil(window_ms * num / den)`.
    pub fn floor_ms(&self, window_ms: u64) -> u64 {
        let f = (u128::from(window_ms) * u128::from(self.num)).div_ceil(u128::from(self.den));
        f as u64
    }

    /// `limit` raised to this floor ([`Limit::with_floor_ms`]).
    pub fn limit(&self, limit: Limit) -> Limit {
        limit.with_floor_ms(self.floor_ms(limit.window_ms()))
    }

    /// `request` with every limit raised to this floor; `None` when none
    /// needed it (the request stands as it is).
    pub fn request(&self, request: &Request) -> Option<Request> {
        let raised: Vec<Limit> = request.limits().iter().map(|&l| self.limit(l)).collect();
        (raised != request.limits()).then(|| request.with_limits(raised))
    }
}

/// `1/600`, `0.001`, `1`: a fraction in (0, 1].
impl std::str::FromStr for GranularityFloor {
    type Err = FloorError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || FloorError(text.to_owned());
        let t = text.trim();
        let (num, den) = match t.split_once('/') {
            Some((n, d)) => (
                n.trim().parse().map_err(|_| bad())?,
                d.trim().parse().map_err(|_| bad())?,
            ),
            None => {
                let (whole, frac) = t.split_once('.').unwrap_or((t, ""));
                if frac.len() > 12 || !frac.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(bad());
                }
                let den = 10u64.pow(frac.len() as u32);
                let whole: u64 = if whole.is_empty() {
                    0
                } else {
                    whole.parse().map_err(|_| bad())?
                };
                let frac: u64 = if frac.is_empty() {
                    0
                } else {
                    frac.parse().map_err(|_| bad())?
                };
                (
                    whole
                        .checked_mul(den)
                        .and_then(|w| w.checked_add(frac))
                        .ok_or_else(bad)?,
                    den,
                )
            }
        };
        Self::new(num, den).ok_or_else(bad)
    }
}

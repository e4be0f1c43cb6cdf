//! What a request costs: one cost for every limit, or one per limit matched
//! by position (docs/design.md §1). [`Limiter::check`](crate::Limiter::check)
//! and [`peek`](crate::Limiter::peek) take either, as does the tower layer.

use slidelog_core::{InputError, Limit, Request};

/// The units a request consumes: one cost for every limit, or one cost per
/// limit, matched by position (e.g. 1 request and 4,000 tokens).
///
/// ```
/// use slidelog::Cost;
/// assert_eq!(Cost::from(5u64), Cost::All(5));
/// assert_eq!(Cost::from([1, 4_000]), Cost::PerLimit(vec![1, 4_000]));
/// assert_eq!(Cost::from(&[1, 4_000][..]), Cost::PerLimit(vec![1, 4_000]));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cost {
    /// The same cost against every limit (`Request::new`).
    All(u64),
    /// `costs[i]` against `limits[i]` (`Request::with_costs`).
    PerLimit(Vec<u64>),
}

impl Cost {
    /// The cost of a plain request: 1.
    pub const ONE: Self = Self::All(1);

    /// Returns the costs of `limits` given by limit name (`Limit::named`):
    /// `("tokens", 4_000)` against the limit named `tokens`, whatever its
    /// position; a limit the list does not name costs 1. A name no limit
    /// carries, or one given twice, is an error ([`InputError::UnknownName`],
    /// [`InputError::DuplicateName`]), never a cost against the wrong limit.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use slidelog::{Cost, Limiter, limit::parse_list};
    /// let limits = parse_list("requests=60/minute, tokens=20000/minute")?;
    /// let cost = Cost::by_name(&limits, [("tokens", 5_000)])?;
    /// assert_eq!(cost, Cost::PerLimit(vec![1, 5_000]));
    /// let d = Limiter::memory().check("k", &limits, cost).await?;
    /// assert_eq!((d.limit, d.remaining), (60, 59));
    /// assert!(Cost::by_name(&limits, [("tokenz", 1)]).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
    /// ```
    pub fn by_name<'a>(
        limits: &[Limit],
        costs: impl IntoIterator<Item = (&'a str, u64)>,
    ) -> Result<Self, InputError> {
        let named: Vec<(&str, u64)> = costs.into_iter().collect();
        let mut per_limit = vec![1; limits.len()];
        for (index, &(name, cost)) in named.iter().enumerate() {
            if named[..index].iter().any(|&(n, _)| n == name) {
                return Err(InputError::DuplicateName {
                    name: name.to_owned(),
                });
            }
            let position = limits
                .iter()
                .position(|l| l.name() == Some(name))
                .ok_or_else(|| InputError::UnknownName {
                    name: name.to_owned(),
                })?;
            per_limit[position] = cost;
        }
        Ok(Self::PerLimit(per_limit))
    }

    /// Returns the validated request of `key` under `limits` at this cost
    /// (docs/design.md §1: a zero cost, or one above a limit's max, is an
    /// error).
    pub fn request(
        self,
        key: impl Into<String>,
        limits: Vec<Limit>,
    ) -> Result<Request, InputError> {
        match self {
            Self::All(cost) => Request::new(key, limits, cost),
            Self::PerLimit(costs) => Request::with_costs(key, limits, costs),
        }
    }

    /// [`request`](Self::request) from borrowed limits: copied straight into
    /// the request, without the `Vec` that `request` takes (measured: BENCHMARKS.md).
    pub(crate) fn request_of(&self, key: &str, limits: &[Limit]) -> Result<Request, InputError> {
        match self {
            Self::All(cost) => Request::from_slices(key, limits, *cost),
            Self::PerLimit(costs) => Request::with_costs_from_slices(key, limits, costs),
        }
    }
}

impl From<u64> for Cost {
    fn from(cost: u64) -> Self {
        Self::All(cost)
    }
}

impl From<Vec<u64>> for Cost {
    fn from(costs: Vec<u64>) -> Self {
        Self::PerLimit(costs)
    }
}

impl From<&[u64]> for Cost {
    fn from(costs: &[u64]) -> Self {
        Self::PerLimit(costs.to_vec())
    }
}

impl<const N: usize> From<[u64; N]> for Cost {
    fn from(costs: [u64; N]) -> Self {
        Self::PerLimit(costs.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cost_makes_the_request_it_describes() {
        let limits = vec![
            Limit::new(3, 1_000).unwrap(),
            Limit::new(10, 60_000).unwrap(),
        ];
        let one = Cost::from(2).request("k", limits.clone()).unwrap();
        assert_eq!(one.costs(), &[2]);
        let per = Cost::from([1, 9]).request("k", limits.clone()).unwrap();
        assert_eq!((per.cost_for(0), per.cost_for(1)), (1, 9));
        assert!(
            Cost::from(4).request("k", limits.clone()).is_err(),
            "above the smallest max"
        );
        assert!(
            Cost::from([1]).request("k", limits).is_err(),
            "one cost per limit"
        );
    }

    #[test]
    fn costs_by_name_find_their_limit_whatever_the_order() {
        let limits =
            slidelog_core::limit::parse_list("tokens=20000/minute, requests=60/minute").unwrap();
        let r = Cost::by_name(&limits, [("tokens", 4_000)])
            .unwrap()
            .request("k", limits.clone())
            .unwrap();
        assert_eq!((r.cost_for(0), r.cost_for(1)), (4_000, 1));
        assert_eq!(
            Cost::by_name(&limits, [("token", 1)]),
            Err(InputError::UnknownName {
                name: "token".into()
            })
        );
        assert_eq!(
            Cost::by_name(&limits, [("tokens", 1), ("tokens", 2)]),
            Err(InputError::DuplicateName {
                name: "tokens".into()
            })
        );
    }
}

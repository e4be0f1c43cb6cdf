//! [`Unit`]: the time unit of a configured limit, as the YAML names it and
//! as Envoy reports it back.

/// The unit of a configured limit, as Envoy reports it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// One second.
    Second,
    /// One minute.
    Minute,
    /// One hour.
    Hour,
    /// One day.
    Day,
    /// Seven days.
    Week,
    /// Thirty days (a sliding window has no calendar month).
    Month,
    /// 365 days.
    Year,
}

impl Unit {
    const ALL: [Unit; 7] = [
        Unit::Second,
        Unit::Minute,
        Unit::Hour,
        Unit::Day,
        Unit::Week,
        Unit::Month,
        Unit::Year,
    ];

    /// Parses a unit name, case-insensitive, as the reference service does.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|u| u.name().eq_ignore_ascii_case(name))
    }

    /// Returns the lower-case name used in the YAML.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Second => "second",
            Unit::Minute => "minute",
            Unit::Hour => "hour",
            Unit::Day => "day",
            Unit::Week => "week",
            Unit::Month => "month",
            Unit::Year => "year",
        }
    }

    /// Returns the unit's length in ms.
    pub fn millis(self) -> u64 {
        const S: u64 = 1000;
        match self {
            Unit::Second => S,
            Unit::Minute => 60 * S,
            Unit::Hour => 3600 * S,
            Unit::Day => 86_400 * S,
            Unit::Week => 7 * 86_400 * S,
            Unit::Month => 30 * 86_400 * S,
            Unit::Year => 365 * 86_400 * S,
        }
    }

    /// Returns the largest unit not longer than `window_ms` (at least a second):
    /// what is reported for a `window` given without a `unit`.
    pub fn for_window(window_ms: u64) -> Self {
        Self::ALL
            .into_iter()
            .rev()
            .find(|u| u.millis() <= window_ms)
            .unwrap_or(Unit::Second)
    }
}

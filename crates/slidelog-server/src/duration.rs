//! Durations on the command line (`250ms`, `30s`, `5m`, `1h`, `1day`), read
//! the same way by every flag that takes one: the one parser is
//! [`crate::units::parse_duration`] (sizes: [`crate::units::parse_size`]).

pub use crate::units::parse_duration;

//! Durations on the command line (`500ms`, `60s`, `1m`, `1day`), read the same
//! way by every flag that takes one, with the examples in the error.

use std::time::Duration;

/// Parses `60s`, `1m`, `1500ms`, `1h 30m` (humantime).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|e| format!("{e} (examples: 500ms, 60s, 1m, 1h, 1day)"))
}

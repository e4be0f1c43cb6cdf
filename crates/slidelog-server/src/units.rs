//! Sizes and durations with units, read the same way by every flag, every
//! environment variable and every key of the settings file that takes one
//! (clap puts the flag's name in front of the error these return).
//!
//! - A size is plain bytes (`1048576`) or a number with a unit: `B`, the
//!   binary `KiB`, `MiB`, `GiB`, `TiB` (powers of 1024) or the decimal `KB`,
//!   `MB`, `GB`, `TB` (powers of 1000), as `512MiB` or `512 MiB`.
//! - A duration is one or more number-unit parts (`250ms`, `30s`, `5m`,
//!   `1h`, `1d`, `1h30m`, `1h 30m`) with the units `ns`, `us`, `ms`, `s`,
//!   `m` (minutes), `h`, `d` and their long forms (`sec`, `min`, `hour`,
//!   `day`, ...). A bare number is refused (seconds or milliseconds? the
//!   reader cannot tell), and so is `M`: humantime, which read these flags
//!   before, took it for months.

use std::time::Duration;

/// The example line every duration error ends with.
const DURATION_EXAMPLES: &str = "examples: 250ms, 30s, 5m, 1h, 1h30m";
/// The example line every size error ends with.
const SIZE_EXAMPLES: &str = "examples: 65536, 64KiB, 512MiB, 1GB";

/// Parses a size (see the module doc) to bytes. Errors say what is wrong
/// and give examples; no value is clamped.
pub fn parse_size(text: &str) -> Result<usize, String> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (digits, unit) = trimmed.split_at(split);
    if digits.is_empty() {
        return Err(format!(
            "'{text}' is no size: it must start with a whole number ({SIZE_EXAMPLES})"
        ));
    }
    let multiplier: u64 = match unit.trim_start() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        other => {
            return Err(format!(
                "unknown size unit '{other}' in '{text}' (units: B, KiB, MiB, GiB, TiB, KB, MB, GB, TB; {SIZE_EXAMPLES})"
            ));
        }
    };
    let too_large = || format!("'{text}' is too large: at most {} bytes", usize::MAX);
    let number: u64 = digits.parse().map_err(|_| too_large())?;
    let bytes = number.checked_mul(multiplier).ok_or_else(too_large)?;
    usize::try_from(bytes).map_err(|_| too_large())
}

/// Parses a duration (see the module doc).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(format!("empty duration ({DURATION_EXAMPLES})"));
    }
    let mut rest = trimmed;
    let mut total = Duration::ZERO;
    while !rest.is_empty() {
        let digits_end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits_end == 0 {
            return Err(format!(
                "'{text}' is no duration: each part is a whole number and a unit ({DURATION_EXAMPLES})"
            ));
        }
        let (digits, after) = rest.split_at(digits_end);
        let after = after.trim_start();
        let unit_end = after
            .find(|c: char| !c.is_alphabetic())
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_end);
        let part = part_duration(text, digits, unit)?;
        total = total
            .checked_add(part)
            .ok_or_else(|| format!("'{text}' is too long a duration"))?;
        rest = after.trim_start();
    }
    Ok(total)
}

/// One `NUMBER UNIT` part of a duration.
fn part_duration(text: &str, digits: &str, unit: &str) -> Result<Duration, String> {
    let too_long = || format!("'{text}' is too long a duration");
    let n: u64 = digits.parse().map_err(|_| too_long())?;
    let secs = |per: u64| {
        n.checked_mul(per)
            .map(Duration::from_secs)
            .ok_or_else(too_long)
    };
    match unit {
        "ns" | "nsec" => Ok(Duration::from_nanos(n)),
        "us" | "µs" | "usec" => Ok(Duration::from_micros(n)),
        "ms" | "msec" | "millis" => Ok(Duration::from_millis(n)),
        "s" | "sec" | "secs" | "second" | "seconds" => secs(1),
        "m" | "min" | "mins" | "minute" | "minutes" => secs(60),
        "h" | "hr" | "hrs" | "hour" | "hours" => secs(3_600),
        "d" | "day" | "days" => secs(86_400),
        "" => Err(format!(
            "'{text}' needs a unit after {digits} (ms, s, m, h, d; {DURATION_EXAMPLES})"
        )),
        "M" => Err(format!(
            "unit 'M' in '{text}' is ambiguous: write m or min for minutes ({DURATION_EXAMPLES})"
        )),
        other => Err(format!(
            "unknown duration unit '{other}' in '{text}' (units: ns, us, ms, s, m, h, d; {DURATION_EXAMPLES})"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_with_and_without_units() {
        assert_eq!(parse_size("1048576"), Ok(1_048_576));
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("512 MiB"), Ok(512 << 20));
        assert_eq!(parse_size("64KiB"), Ok(65_536));
        assert_eq!(parse_size("1GB"), Ok(1_000_000_000));
        assert_eq!(parse_size("2kB"), Ok(2_000));
        assert_eq!(parse_size("10B"), Ok(10));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
    }

    #[test]
    fn bad_sizes_say_why() {
        let e = parse_size("12XB").unwrap_err();
        assert!(
            e.contains("unknown size unit 'XB'") && e.contains("512MiB"),
            "{e}"
        );
        assert!(parse_size("").unwrap_err().contains("whole number"));
        assert!(parse_size("-1").unwrap_err().contains("whole number"));
        assert!(
            parse_size("1.5GiB")
                .unwrap_err()
                .contains("unknown size unit '.5GiB'")
        );
        let e = parse_size("99999999999TiB").unwrap_err();
        assert!(e.contains("too large"), "{e}");
        assert!(
            parse_size("99999999999999999999999")
                .unwrap_err()
                .contains("too large")
        );
    }

    #[test]
    fn durations_with_units() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3_600)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5_400)));
        assert_eq!(parse_duration("1h 30m"), Ok(Duration::from_secs(5_400)));
        assert_eq!(parse_duration("1day"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("1500us"), Ok(Duration::from_micros(1_500)));
    }

    #[test]
    fn bad_durations_say_why() {
        assert!(parse_duration("30").unwrap_err().contains("needs a unit"));
        assert!(parse_duration("1M").unwrap_err().contains("ambiguous"));
        assert!(
            parse_duration("5x")
                .unwrap_err()
                .contains("unknown duration unit 'x'")
        );
        assert!(parse_duration("").unwrap_err().contains("empty"));
        assert!(parse_duration("ms").unwrap_err().contains("no duration"));
        assert!(parse_duration("1.5s").unwrap_err().contains("needs a unit"));
        assert_eq!(parse_duration("100 ms"), Ok(Duration::from_millis(100)));
        let e = parse_duration("99999999999999999999d").unwrap_err();
        assert!(e.contains("too long"), "{e}");
        assert!(
            parse_duration("999999999999999999d")
                .unwrap_err()
                .contains("too long")
        );
    }
}

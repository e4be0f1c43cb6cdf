//! A charge made once in the module's arguments (docs/design.md §6, "Local
//! answers"): `SLIDELOG.CHARGE`'s trailing `ONCE <once_key> <ttl_ms>`. The
//! once key lives in the log key's Cluster slot (it is declared to the
//! server as a key of the command, so Cluster checks it too); if it exists
//! the charge changes nothing, else the charge is made and the key set for
//! `ttl_ms`, in the one command.

use super::{Name, bad, number};
use crate::error::CommandError;

/// The word before the once key and its TTL.
pub const ONCE: &[u8] = b"ONCE";

/// The longest once TTL: the longest window (366 days) and a day.
pub const MAX_ONCE_TTL_MS: u64 = slidelog_core::MAX_WINDOW_MS + 86_400_000;

/// The longest once key, in bytes: a log key (a prefix and a key of up to
/// 512 bytes) with its tag's braces and `#o:<id>` (an id of up to 64).
const MAX_ONCE_KEY_BYTES: usize = 4_096;

/// The once key of a charge and how long it is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Once {
    /// The key marking the charge made (the log key's slot).
    pub key: Vec<u8>,
    /// How long the mark is kept, ms (1 ..= `MAX_ONCE_TTL_MS`: 367 days).
    pub ttl_ms: u64,
}

/// A charge's arguments without a trailing `ONCE <once_key> <ttl_ms>`, and
/// that once (`None` without one). Limits are numbers, so an `ONCE` three
/// from the end is never one of their fields. `log_key` is the charge's
/// key: the once key must hash to its slot and differ from it.
pub fn split_once<'a, 'b>(
    args: &'a [&'b [u8]],
    log_key: &[u8],
) -> Result<(&'a [&'b [u8]], Option<Once>), CommandError> {
    let [rest @ .., word, key, ttl] = args else {
        return Ok((args, None));
    };
    if !word.eq_ignore_ascii_case(ONCE) {
        return Ok((args, None));
    }
    if key.is_empty() || key.len() > MAX_ONCE_KEY_BYTES || *key == log_key {
        return Err(bad(
            "once_key",
            format!("must be 1 to {MAX_ONCE_KEY_BYTES} bytes and not the log key"),
        ));
    }
    let slot = slidelog_core::slot::slot;
    if slot(key) != slot(log_key) {
        return Err(bad("once_key", "must hash to the log key's Cluster slot"));
    }
    let ttl_ms = number(ttl, Name("once_ttl_ms", 0), 1, MAX_ONCE_TTL_MS)?;
    let once = Once {
        key: key.to_vec(),
        ttl_ms,
    };
    Ok((rest, Some(once)))
}

/// Where the once key is among a charge's arguments with the command name
/// (`argv`): its index, for the server's key-position request (Cluster
/// routing and checks), when the call ends in `ONCE <key> <ttl>`.
pub fn once_key_position(argv: &[&[u8]]) -> Option<usize> {
    let at = argv.len().checked_sub(3)?;
    (at >= 2 && argv[at].eq_ignore_ascii_case(ONCE)).then_some(at + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<&[u8]> {
        s.split(' ').map(str::as_bytes).collect()
    }

    #[test]
    fn a_trailing_once_is_split_off_and_checked() {
        let args = words("{k} * 0 1 10 1000 1 ONCE {k}#o:i:1 61000");
        let (rest, once) = split_once(&args, b"{k}").unwrap();
        assert_eq!(rest.len(), 7);
        assert_eq!(once.unwrap().ttl_ms, 61_000);
        let plain = words("{k} * 0 1 10 1000 1");
        assert_eq!(split_once(&plain, b"{k}").unwrap().1, None);
        let err = |s: &str| split_once(&words(s), b"{k}").unwrap_err().to_string();
        assert!(err("{k} * 0 1 10 1000 1 ONCE other 5").contains("slot"));
        assert!(err("{k} * 0 1 10 1000 1 ONCE {k} 5").contains("not the log key"));
        assert!(err("{k} * 0 1 10 1000 1 ONCE {k}#o 0").contains("once_ttl_ms"));
        let huge = format!(
            "{k} * 0 1 10 1000 1 ONCE {{k}}#o {}",
            MAX_ONCE_TTL_MS + 1,
            k = "{k}"
        );
        assert!(err(&huge).contains("once_ttl_ms must be an integer from 1"));
    }

    #[test]
    fn the_once_key_position_counts_the_command_name() {
        let argv = words("SLIDELOG.CHARGE {k} * 0 1 10 1000 1 ONCE {k}#o 5");
        assert_eq!(once_key_position(&argv), Some(9));
        assert_eq!(
            once_key_position(&words("SLIDELOG.CHARGE {k} * 0 1 10 1000 1")),
            None
        );
    }
}

//! A receipt's single use in the module's arguments (docs/design.md §4.3,
//! §4.6 "Single use"): `SLIDELOG.SETTLE`'s trailing `SPEND <nonce>
//! <until_ms>`, the nonce and validity a settle's `SLIDELOG.APPLY` carries
//! after its target (so a replica and an AOF replay mark the same nonce
//! spent), and the `spent/...` APPLY form with which an AOF rewrite
//! restores a log's settled receipts.

use super::{Change, Name, bad, digits, number};
use crate::error::CommandError;
use slidelog_core::{MAX_NOW_MS, MAX_SPENT, Spend};

/// The word before a settle's nonce and validity.
const SPEND: &[u8] = b"SPEND";

/// The fifth part's prefix of an APPLY that restores settled receipts.
const SPENT: &[u8] = b"spent/";

/// The most settled receipts one `spent/...` APPLY restores. An AOF rewrite
/// writes a key's in chunks of this many: one argument of at most ~30 KB
/// (each entry is about 30 bytes), where a key's whole set (up to
/// `MAX_SPENT`) would be 3 MB in one argument.
pub const SPENT_PER_APPLY: usize = 1_000;

/// `<nonce> <until_ms>`: the nonce any 64-bit number, `until_ms` a time
/// (0 ..= 2^53 - 1; against the server's clock `crate::clock` bounds it).
fn spend(nonce: &[u8], until: &[u8]) -> Result<Spend, CommandError> {
    Ok(Spend {
        nonce: number(nonce, Name("nonce", 0), 0, u64::MAX)?,
        until_ms: number(until, Name("until_ms", 0), 0, MAX_NOW_MS)?,
    })
}

/// A settle's arguments without a trailing `SPEND <nonce> <until_ms>`,
/// and that spend (`None` without one: a client from before single use).
/// Limits are numbers, so a `SPEND` three from the end is never one of
/// their fields.
pub fn split_spend<'a, 'b>(
    args: &'a [&'b [u8]],
) -> Result<(&'a [&'b [u8]], Option<Spend>), CommandError> {
    match args {
        [rest @ .., word, nonce, until] if word.eq_ignore_ascii_case(SPEND) => {
            Ok((rest, Some(spend(nonce, until)?)))
        }
        _ => Ok((args, None)),
    }
}

/// The optional `/<nonce>/<until_ms>` after a settle target's costs.
pub fn target_spend(rest: &[&[u8]]) -> Result<Option<Spend>, CommandError> {
    match rest {
        [] => Ok(None),
        [nonce, until] => Ok(Some(spend(nonce, until)?)),
        _ => Err(bad(
            "record",
            "must be <record_ts>/<n>/<record_cost_1,...>[/<nonce>/<until_ms>]",
        )),
    }
}

/// `/<nonce>/<until_ms>` into `out` (after a settle target), when given.
pub fn put_target_spend(spend: Option<Spend>, out: &mut Change) {
    if let Some(s) = spend {
        out.push(b'/');
        digits(s.nonce, out);
        out.push(b'/');
        digits(s.until_ms, out);
    }
}

/// The settled receipts of an APPLY's fifth part `spent/<nonce>/<until_ms>[/...]`
/// (1 ..= [`SPENT_PER_APPLY`] of them), or `None` when the part is not of
/// that form.
pub fn spent_part(part: &[u8]) -> Option<Result<Vec<Spend>, CommandError>> {
    let list = part.strip_prefix(SPENT)?;
    let words: Vec<&[u8]> = list.split(|&b| b == b'/').collect();
    if !words.len().is_multiple_of(2) || words.len() / 2 > SPENT_PER_APPLY {
        return Some(Err(bad(
            "spent",
            format!(
                "must list 1 to {SPENT_PER_APPLY} <nonce>/<until_ms> pairs (a key keeps at most {MAX_SPENT})"
            ),
        )));
    }
    Some(words.chunks_exact(2).map(|p| spend(p[0], p[1])).collect())
}

/// The fifth part `:spent/<nonce>/<until_ms>/...` of `entries` into `out`
/// (after a change made by `super::change`).
pub fn put_spent(entries: &[Spend], out: &mut Change) {
    out.push(b':');
    out.extend_from_slice(SPENT);
    for (i, s) in entries.iter().enumerate() {
        if i > 0 {
            out.push(b'/');
        }
        digits(s.nonce, out);
        out.push(b'/');
        digits(s.until_ms, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &str) -> Vec<&[u8]> {
        w.split(' ').map(str::as_bytes).collect()
    }

    #[test]
    fn a_trailing_spend_is_split_off_and_bounded() {
        let args = words("k * 0 5 1 1 3 1000 1 spend 18446744073709551615 9007199254740991");
        let (rest, spend) = split_spend(&args).unwrap();
        assert_eq!(rest.len(), 9);
        assert_eq!(
            spend,
            Some(Spend {
                nonce: u64::MAX,
                until_ms: 9_007_199_254_740_991
            })
        );
        let plain = words("k * 0 5 1 1 3 1000 1");
        assert_eq!(split_spend(&plain).unwrap(), (&plain[..], None));
        let err = |w: &str| split_spend(&words(w)).unwrap_err().to_string();
        assert_eq!(
            err("k 1 SPEND 18446744073709551616 5"),
            "ERR nonce must be an integer from 0 to 18446744073709551615"
        );
        assert_eq!(
            err("k 1 SPEND 7 9007199254740992"),
            "ERR until_ms must be an integer from 0 to 9007199254740991"
        );
        assert!(err("k 1 SPEND 7 -1").contains("until_ms"));
    }

    #[test]
    fn the_spent_form_round_trips_and_is_bounded() {
        let entries: Vec<Spend> = (0..3)
            .map(|i| Spend {
                nonce: u64::MAX - i,
                until_ms: 1_000 + i,
            })
            .collect();
        let mut out = Change::new();
        put_spent(&entries, &mut out);
        assert_eq!(out[0], b':');
        assert_eq!(spent_part(&out[1..]).unwrap().unwrap(), entries);
        assert!(spent_part(b"merge").is_none());
        assert!(spent_part(b"spent/1").unwrap().is_err());
        assert!(spent_part(b"spent/1/x").unwrap().is_err());
        let too_many: Vec<String> = (0..=SPENT_PER_APPLY).map(|i| format!("{i}/5")).collect();
        let text = format!("spent/{}", too_many.join("/"));
        let e = spent_part(text.as_bytes()).unwrap().unwrap_err();
        assert!(
            e.to_string().contains("1 to 1000 <nonce>/<until_ms> pairs"),
            "{e}"
        );
    }
}

//! The arguments of the module's commands, parsed and bounded before any key
//! is touched (docs/design.md §4.3): every number is ASCII digits that fit its
//! field, and an error names the field and its bound.

use crate::error::CommandError;
use slidelog_core::{
    Limit, MAX_COST, MAX_KEY_BYTES, MAX_LIMITS, MAX_NOW_MS, Mode, Receipt, RecordRef, Request,
    Spend,
};

mod all;
mod once;
mod spend;

pub use all::{CheckAll, check_all};
pub use once::{Once, once_key_position};
pub use spend::{SPENT_PER_APPLY, put_spent};

/// A parsed `SLIDELOG.CHECK`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// Record (a check) or peek.
    pub mode: Mode,
    /// The caller's time, or `None` for the server's clock (`*`).
    pub now_ms: Option<u64>,
    /// The caller's deadline on the server's clock, `None` for `0`.
    pub deadline_ms: Option<u64>,
    /// The validated request (its key is a stand-in: keys are binary).
    pub request: Request,
    /// Answer every limit's state too (a trailing `EACH`).
    pub each: bool,
}

fn bad(field: impl Into<String>, problem: impl Into<String>) -> CommandError {
    CommandError::Argument {
        field: field.into(),
        problem: problem.into(),
    }
}

/// An argument's name: a field, and the limit's position (1-based) for the
/// per-limit fields (`max_2`). Formatted only for an error: a check that
/// parses allocates no names.
#[derive(Debug, Clone, Copy)]
pub struct Name(pub &'static str, pub usize);

impl std::fmt::Display for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.1 {
            0 => f.write_str(self.0),
            i => write!(f, "{}_{i}", self.0),
        }
    }
}

/// An unsigned decimal integer in `lo..=hi` (no sign, no spaces).
pub fn number(bytes: &[u8], name: Name, lo: u64, hi: u64) -> Result<u64, CommandError> {
    let out_of_range = || {
        bad(
            name.to_string(),
            format!("must be an integer from {lo} to {hi}"),
        )
    };
    if bytes.is_empty() || bytes.len() > 20 || !bytes.iter().all(u8::is_ascii_digit) {
        return Err(out_of_range());
    }
    let value = bytes
        .iter()
        .try_fold(0u64, |v, &d| {
            v.checked_mul(10)?.checked_add(u64::from(d - b'0'))
        })
        .ok_or_else(out_of_range)?;
    if !(lo..=hi).contains(&value) {
        return Err(out_of_range());
    }
    Ok(value)
}

/// A key of 1 ..= 512 bytes.
pub fn key(bytes: &[u8]) -> Result<(), CommandError> {
    if bytes.is_empty() || bytes.len() > MAX_KEY_BYTES {
        return Err(bad(
            "key",
            format!("must be 1 to {MAX_KEY_BYTES} bytes, got {}", bytes.len()),
        ));
    }
    Ok(())
}

/// `<key> <RECORD|PEEK> <now_ms|*> <deadline_ms|0> <n> (<max> <window_ms> <cost>){n} [EACH]`
/// (`args` without the command name).
pub fn check(args: &[&[u8]]) -> Result<Check, CommandError> {
    let arity = |expected: String| CommandError::Arity {
        command: "slidelog.check",
        expected,
    };
    if args.len() < 5 {
        return Err(arity(
            "SLIDELOG.CHECK <key> <RECORD|PEEK> <now_ms|*> <deadline_ms|0> <n> <max_1> <window_ms_1> <cost_1> ... [EACH]".into(),
        ));
    }
    key(args[0])?;
    let mode = mode(args[1])?;
    let (now_ms, deadline_ms) = clock_args(args[2], args[3])?;
    let n = number(args[4], Name("n", 0), 1, MAX_LIMITS as u64)? as usize;
    let each = args.len() == 6 + 3 * n;
    if each && !args[5 + 3 * n].eq_ignore_ascii_case(b"EACH") {
        return Err(bad("option", "after the limits must be EACH or nothing"));
    }
    if args.len() != 5 + 3 * n && !each {
        return Err(arity(format!(
            "n = {n} limits take {} arguments after the key's four (then EACH or nothing), got {}",
            3 * n,
            args.len() - 5
        )));
    }
    Ok(Check {
        mode,
        now_ms,
        deadline_ms,
        request: request(&args[5..5 + 3 * n], n)?,
        each,
    })
}

/// `RECORD` or `PEEK`, in any case.
fn mode(arg: &[u8]) -> Result<Mode, CommandError> {
    // Compared in place: an uppercased copy would be an allocation per call.
    if arg.eq_ignore_ascii_case(b"RECORD") {
        Ok(Mode::Record)
    } else if arg.eq_ignore_ascii_case(b"PEEK") {
        Ok(Mode::Peek)
    } else {
        Err(bad("mode", "must be RECORD or PEEK"))
    }
}

/// The limit of a `<max>` and a `<window_ms>[@<granularity_ms>]`
/// argument at `position` (1-based): the granularity, when given, must
/// divide the window (docs/design.md §1.1).
pub fn limit_of(max: &[u8], window: &[u8], position: usize) -> Result<Limit, CommandError> {
    let max = number(max, Name("max", position), 1, slidelog_core::MAX_MAX)?;
    let (window, granularity) = match window.iter().position(|&b| b == b'@') {
        Some(at) => (&window[..at], Some(&window[at + 1..])),
        None => (window, None),
    };
    let window = number(
        window,
        Name("window_ms", position),
        1,
        slidelog_core::MAX_WINDOW_MS,
    )?;
    let limit = Limit::new(max, window)?;
    match granularity {
        None => Ok(limit),
        Some(g) => {
            let g = number(g, Name("granularity_ms", position), 1, window)?;
            Ok(limit.with_granularity(g)?)
        }
    }
}

/// The request of `n` `<max> <window_ms>[@<granularity_ms>] <cost>` triples.
fn request(triples: &[&[u8]], n: usize) -> Result<Request, CommandError> {
    // On the stack, copied into the request (which holds two inline): a
    // check of one or two limits allocates nothing.
    let mut limits: smallvec::SmallVec<[Limit; 4]> = smallvec::SmallVec::with_capacity(n);
    // On the stack: only a request with a cost per limit needs them as a Vec.
    let mut costs: smallvec::SmallVec<[u64; MAX_LIMITS]> = smallvec::SmallVec::new();
    for (i, triple) in triples.chunks_exact(3).enumerate() {
        let position = i + 1;
        let limit = limit_of(triple[0], triple[1], position)?;
        let cost = number(triple[2], Name("cost", position), 1, limit.max())?;
        limits.push(limit);
        costs.push(cost);
    }
    // One cost for every limit (the common case) is a plain request: one
    // allocation fewer than `with_costs`, in the server's allocator.
    Ok(if costs.iter().all(|&c| c == costs[0]) {
        Request::from_slices("k", &limits, costs[0])?
    } else {
        Request::with_costs("k", limits.to_vec(), costs.to_vec())?
    })
}

/// A parsed `SLIDELOG.SETTLE` or `SLIDELOG.CHARGE` (docs/design.md §4.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Usage {
    /// The caller's time, or `None` for the server's clock (`*`).
    pub now_ms: Option<u64>,
    /// The caller's deadline on the server's clock, `None` for `0`.
    pub deadline_ms: Option<u64>,
    /// Settle: the record the receipt names (its timestamp and costs);
    /// `None` for a charge.
    pub receipt: Option<Receipt>,
    /// The costs to settle to or to charge ([`Request::usage`]: 0 allowed,
    /// above a limit's max allowed, each at most [`MAX_COST`]).
    pub request: Request,
    /// A charge made once: its once key and TTL (`ONCE <key> <ttl_ms>`).
    pub once: Option<Once>,
}

/// The `<now_ms|*> <deadline_ms|0>` pair of a settle or charge.
fn clock_args(now: &[u8], deadline: &[u8]) -> Result<(Option<u64>, Option<u64>), CommandError> {
    let now_ms = match now {
        b"*" => None,
        given => Some(number(given, Name("now_ms", 0), 0, MAX_NOW_MS)?),
    };
    let deadline_ms =
        Some(number(deadline, Name("deadline_ms", 0), 0, MAX_NOW_MS)?).filter(|&d| d > 0);
    Ok((now_ms, deadline_ms))
}

/// `n` and its `<max> <window_ms> <cost>` triples at the end of `args`
/// (from `at`), for `command` whose usage is `expected`.
fn usage_limits(
    args: &[&[u8]],
    at: usize,
    command: &'static str,
    expected: &str,
) -> Result<Request, CommandError> {
    let n = number(args[at], Name("n", 0), 1, MAX_LIMITS as u64)? as usize;
    let after = args.len() - at - 1;
    if after != 3 * n {
        return Err(CommandError::Arity {
            command,
            expected: format!(
                "{expected}; n = {n} limits take {} arguments after n, got {after}",
                3 * n
            ),
        });
    }
    let mut limits = Vec::with_capacity(n);
    let mut costs: smallvec::SmallVec<[u64; MAX_LIMITS]> = smallvec::SmallVec::new();
    for (i, triple) in args[at + 1..].chunks_exact(3).enumerate() {
        let position = i + 1;
        let limit = limit_of(triple[0], triple[1], position)?;
        // Usage known after the fact: 0 (counts nowhere in this limit) up
        // to the absolute bound, above the limit's max included.
        costs.push(number(triple[2], Name("cost", position), 0, MAX_COST)?);
        limits.push(limit);
    }
    Ok(Request::usage("k", limits, costs.to_vec())?)
}

/// The costs a receipt names its record by: `c1,c2,...`, 1 or `n` of them,
/// each 0 ..= [`MAX_COST`], not all 0 (a receipt never names a record of no
/// cost).
fn record_costs(list: &[u8], n: usize) -> Result<Vec<u64>, CommandError> {
    let parts: smallvec::SmallVec<[&[u8]; MAX_LIMITS]> = list.split(|&b| b == b',').collect();
    if parts.len() != 1 && parts.len() != n {
        return Err(bad(
            "record_costs",
            format!(
                "must list 1 cost or n = {n} costs (the receipt's), got {}",
                parts.len()
            ),
        ));
    }
    let costs = parts
        .iter()
        .enumerate()
        .map(|(i, c)| number(c, Name("record_cost", i + 1), 0, MAX_COST))
        .collect::<Result<Vec<u64>, _>>()?;
    if costs.iter().all(|&c| c == 0) {
        return Err(bad(
            "record_costs",
            "must not all be 0 (a receipt names a record of some cost)",
        ));
    }
    Ok(costs)
}

const SETTLE_USAGE: &str = "SLIDELOG.SETTLE <key> <now_ms|*> <deadline_ms|0> <record_ts> <record_cost_1,...> <n> <max_1> <window_ms_1> <cost_1> ... [SPEND <nonce> <until_ms>]";
const CHARGE_USAGE: &str = "SLIDELOG.CHARGE <key> <now_ms|*> <deadline_ms|0> <n> <max_1> <window_ms_1> <cost_1> ... [ONCE <once_key> <ttl_ms>]";

/// `<key> <now_ms|*> <deadline_ms|0> <record_ts> <record_costs> <n> (<max> <window_ms> <cost>){n} [SPEND <nonce> <until_ms>]`
/// (`args` without the command name): the record a receipt names (its
/// timestamp and its costs as the receipt lists them), the costs to
/// settle it to, and the receipt's single use (its nonce and validity:
/// docs/design.md §4.6; without it, as before single use, nothing is kept).
pub fn settle(args: &[&[u8]]) -> Result<Usage, CommandError> {
    let (args, spend) = spend::split_spend(args)?;
    if args.len() < 6 {
        return Err(CommandError::Arity {
            command: "slidelog.settle",
            expected: SETTLE_USAGE.into(),
        });
    }
    key(args[0])?;
    let (now_ms, deadline_ms) = clock_args(args[1], args[2])?;
    let ts = number(args[3], Name("record_ts", 0), 0, MAX_NOW_MS)?;
    let request = usage_limits(args, 5, "slidelog.settle", SETTLE_USAGE)?;
    let old = record_costs(args[4], request.limits().len())?;
    let named = Request::usage("k", request.limits().to_vec(), old)?;
    Ok(Usage {
        now_ms,
        deadline_ms,
        receipt: Some(Receipt::new(&named, RecordRef { ts, id: None }).with_spend(spend)),
        request,
        once: None,
    })
}

/// `<key> <now_ms|*> <deadline_ms|0> <n> (<max> <window_ms> <cost>){n} [ONCE <once_key> <ttl_ms>]`
/// (`args` without the command name).
pub fn charge(args: &[&[u8]]) -> Result<Usage, CommandError> {
    let (args, once) = match args.first() {
        Some(log_key) => once::split_once(args, log_key)?,
        None => (args, None),
    };
    if args.len() < 4 {
        return Err(CommandError::Arity {
            command: "slidelog.charge",
            expected: CHARGE_USAGE.into(),
        });
    }
    key(args[0])?;
    let (now_ms, deadline_ms) = clock_args(args[1], args[2])?;
    Ok(Usage {
        now_ms,
        deadline_ms,
        receipt: None,
        request: usage_limits(args, 3, "slidelog.charge", CHARGE_USAGE)?,
        once,
    })
}

/// A parsed `SLIDELOG.APPLY` (the change a decision made, as replicated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Apply {
    /// The time the decision used.
    pub now_ms: u64,
    /// Drop records expired for this window at `now_ms` (0: drop nothing).
    pub expire_window_ms: u64,
    /// Set the key's absolute expiry, Unix ms (`None`: leave it).
    pub expire_at_ms: Option<u64>,
    /// Append one record at `now_ms` with these costs (empty: append
    /// nothing); with [`Action::Settle`], the record's new costs (empty:
    /// remove it).
    pub costs: Vec<u64>,
    /// What the change does after the expiry (its fifth part).
    pub action: Action,
}

/// What an APPLY does after dropping expired records: its fifth part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// No fifth part: append the costs at `now_ms` (none: nothing).
    Append,
    /// `<record_ts>/<n>/<costs>[/<nonce>/<until_ms>]`: a settle's record;
    /// its share changes instead of a record being appended, and the
    /// receipt's nonce is kept as settled.
    Settle(Target),
    /// `merge`: a charge into a full log; the costs merge into the newest
    /// record, which moves to `now_ms` (docs/design.md §4.6).
    Merge,
    /// `spent/<nonce>/<until_ms>/...`: settled receipts restored as they
    /// were kept (an AOF rewrite); the costs are `0`.
    Spent(Vec<Spend>),
    /// `sweep`: a settle that settled nothing but forgot the expired
    /// nonces of a full set (`Log::can_spend`); the costs are `0`.
    Sweep,
    /// Every record at or before `through_ms` rounded up to a multiple of
    /// `granule_ms`, records that meet merged: a coarse tier's rebuild
    /// (docs/design.md §1.1), `round/<through_ms>/<granule_ms>`.
    Round {
        /// The last record rounded (its time after rounding).
        through_ms: u64,
        /// The tier's granule.
        granule_ms: u64,
    },
}

/// The record a settle changed, as APPLY finds it again: the first record
/// at `ts` whose cost at each position `0..positions` is the listed one (a
/// later position taking the last), exactly as `engine::settle` found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The record's timestamp.
    pub ts: u64,
    /// The number of limits the settle compared.
    pub positions: usize,
    /// Its costs before the settle (1 or `positions` of them).
    pub costs: Vec<u64>,
    /// The settled receipt's nonce and validity, kept as spent (`None`: a
    /// receipt without single use, or a change from before it).
    pub spend: Option<Spend>,
}

impl Target {
    /// The record's cost before the settle at `position`.
    pub fn cost_at(&self, position: usize) -> u64 {
        self.costs[position.min(self.costs.len() - 1)]
    }
}

/// `<key> <now_ms>:<expire_window_ms|0>:<expire_in_ms|_>:<costs|0>[:<fifth part>]`:
/// the key expires at `now_ms + expire_in_ms` (signed: the primary's clock
/// may be behind a caller's time; `_` leaves the TTL), the costs as
/// `c1,c2,...` (0 allowed in a position) or `0` for no record. The fifth
/// part is an [`Action`]: a settle's `<ts>/<n>/<share>[/<nonce>/<until_ms>]`
/// replaces the share the receipt names of the record at `ts` (its first
/// `n` costs) by the costs (`0`: refunded) instead of a record being
/// appended, and keeps the nonce; `merge` merges the costs into the newest
/// record, moved to `now_ms`; `spent/...` restores settled receipts and
/// `sweep` forgets expired ones of a full set. The change is one argument:
/// each argument the primary propagates is an object the server allocates,
/// copies into its replication buffers and frees (callgrind, BENCHMARKS.md).
/// Parsing bounds each field by itself; the times against the server's
/// clock are `crate::clock::apply_times`'s.
pub fn apply(args: &[&[u8]]) -> Result<Apply, CommandError> {
    let arity = || {
        CommandError::Arity {
        command: "slidelog.apply",
        expected: "SLIDELOG.APPLY <key> <now_ms>:<expire_window_ms|0>:<expire_in_ms|_>:<cost_1,cost_2,...|0>[:<record_ts>/<n>/<record_cost_1,...>[/<nonce>/<until_ms>]|:merge|:spent/<nonce>/<until_ms>/...|:sweep|:round/<through_ms>/<granule_ms>]".into(),
    }
    };
    if args.len() != 2 {
        return Err(arity());
    }
    key(args[0])?;
    let mut parts = args[1].split(|&b| b == b':');
    let (Some(now), Some(window), Some(at), Some(list), target, None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return Err(arity());
    };
    let costs = apply_costs(list)?;
    let action = apply_action(target, &costs)?;
    let now_ms = number(now, Name("now_ms", 0), 0, MAX_NOW_MS)?;
    let expire_at_ms = apply_expire_at(at, now_ms)?;
    Ok(Apply {
        now_ms,
        expire_window_ms: number(
            window,
            Name("expire_window_ms", 0),
            0,
            slidelog_core::MAX_WINDOW_MS,
        )?,
        expire_at_ms,
        costs,
        action,
    })
}

/// APPLY's fifth part for a charge merged into the newest record.
const MERGE: &[u8] = b"merge";
const ROUND: &[u8] = b"round/";

/// `<through_ms>/<granule_ms>` of a `round/` action.
fn apply_round(text: &[u8]) -> Result<Action, CommandError> {
    let mut parts = text.split(|&b| b == b'/');
    let (Some(through), Some(granule), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad("round", "must be round/<through_ms>/<granule_ms>"));
    };
    Ok(Action::Round {
        through_ms: number(through, Name("through_ms", 0), 0, MAX_NOW_MS)?,
        granule_ms: number(
            granule,
            Name("granule_ms", 0),
            1,
            slidelog_core::MAX_WINDOW_MS,
        )?,
    })
}

/// The change of a coarse tier's rebuild (docs/design.md §1.1): records
/// at or before `through_ms` rounded up to `granule_ms`, at `now_ms`.
pub fn round_change(now_ms: u64, through_ms: u64, granule_ms: u64, out: &mut Change) {
    change(now_ms, 0, None, &[], out);
    out.extend_from_slice(b":round/");
    digits(through_ms, out);
    out.push(b'/');
    digits(granule_ms, out);
}
/// APPLY's fifth part for a settle that only swept expired nonces.
const SWEEP: &[u8] = b"sweep";

/// APPLY's fifth part (`None`: there is none). `spent/...` and `sweep`
/// append nothing, so their costs must be `0`.
fn apply_action(part: Option<&[u8]>, costs: &[u64]) -> Result<Action, CommandError> {
    let Some(part) = part else {
        return Ok(Action::Append);
    };
    if part == MERGE {
        return Ok(Action::Merge);
    }
    if let Some(rest) = part.strip_prefix(ROUND) {
        if !costs.is_empty() {
            return Err(bad("costs", "must be 0 with round/..."));
        }
        return apply_round(rest);
    }
    let action = match spend::spent_part(part) {
        Some(entries) => Action::Spent(entries?),
        None if part == SWEEP => Action::Sweep,
        None => return Ok(Action::Settle(apply_target(part)?)),
    };
    if !costs.is_empty() {
        return Err(bad("costs", "must be 0 with spent/... or sweep"));
    }
    Ok(action)
}

/// APPLY's costs: `c1,c2,...` (0 allowed in a position), or `0` for no
/// record; costs of 0 everywhere are no record too (empty).
fn apply_costs(list: &[u8]) -> Result<Vec<u64>, CommandError> {
    if list == b"0" {
        return Ok(Vec::new());
    }
    let parts: Vec<&[u8]> = list.split(|&b| b == b',').collect();
    if parts.len() > MAX_LIMITS {
        return Err(bad("costs", format!("must list 1 to {MAX_LIMITS} costs")));
    }
    let costs = parts
        .iter()
        .enumerate()
        .map(|(i, c)| number(c, Name("cost", i + 1), 0, MAX_COST))
        .collect::<Result<Vec<u64>, _>>()?;
    Ok(if costs.iter().all(|&c| c == 0) {
        Vec::new()
    } else {
        costs
    })
}

/// APPLY's settle target: `<record_ts>/<n>/<c1,c2,...>[/<nonce>/<until_ms>]`.
fn apply_target(text: &[u8]) -> Result<Target, CommandError> {
    let parts: smallvec::SmallVec<[&[u8]; 5]> = text.split(|&b| b == b'/').collect();
    let [ts, n, list, rest @ ..] = &parts[..] else {
        return Err(bad(
            "record",
            "must be <record_ts>/<n>/<record_cost_1,...>[/<nonce>/<until_ms>]",
        ));
    };
    let ts = number(ts, Name("record_ts", 0), 0, MAX_NOW_MS)?;
    let positions = number(n, Name("n", 0), 1, MAX_LIMITS as u64)? as usize;
    Ok(Target {
        ts,
        positions,
        costs: record_costs(list, positions)?,
        spend: spend::target_spend(rest)?,
    })
}

/// APPLY's absolute expiry: `now_ms` plus the signed `expire_in_ms`, or
/// `None` for `_` (leave the TTL).
fn apply_expire_at(at: &[u8], now_ms: u64) -> Result<Option<u64>, CommandError> {
    if at == b"_" {
        return Ok(None);
    }
    let (negative, magnitude) = match at.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, at),
    };
    // Two times of the model differ by at most 2^53 - 1; the expiry this
    // leads to is bounded against the server's clock by `clock::apply_times`.
    let d = number(magnitude, Name("expire_in_ms", 0), 0, MAX_NOW_MS)?;
    let at = if negative {
        now_ms.checked_sub(d)
    } else {
        Some(now_ms + d)
    };
    at.filter(|&t| t > 0)
        .map(Some)
        .ok_or_else(|| bad("expire_in_ms", "must leave an expiry after the epoch"))
}

/// The bytes of an APPLY change: on the stack for up to a few costs.
pub type Change = smallvec::SmallVec<[u8; 96]>;

/// `00`, `01`, … `99`: two digits per division (every change carries a
/// 13-digit time, on every admitted check).
const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

fn digits(mut v: u64, out: &mut Change) {
    let mut buf = [0u8; 20];
    let mut at = buf.len();
    while v >= 100 {
        let pair = (v % 100) as usize * 2;
        v /= 100;
        at -= 2;
        buf[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if v >= 10 {
        let pair = v as usize * 2;
        at -= 2;
        buf[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    } else {
        at -= 1;
        buf[at] = b'0' + v as u8;
    }
    out.extend_from_slice(&buf[at..]);
}

/// The change argument of `SLIDELOG.APPLY`, into `out`: `costs` empty for
/// no record.
pub fn change(
    now_ms: u64,
    expire_window_ms: u64,
    expire_at_ms: Option<u64>,
    costs: &[u64],
    out: &mut Change,
) {
    for v in [now_ms, expire_window_ms] {
        digits(v, out);
        out.push(b':');
    }
    match expire_at_ms {
        None => out.push(b'_'),
        Some(at) if at >= now_ms => digits(at - now_ms, out),
        Some(at) => {
            out.push(b'-');
            digits(now_ms - at, out);
        }
    }
    out.push(b':');
    if costs.is_empty() {
        out.push(b'0');
    }
    cost_list(costs, out);
}

/// `c1,c2,...` into `out`.
fn cost_list(costs: &[u64], out: &mut Change) {
    for (i, c) in costs.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        digits(*c, out);
    }
}

/// Appends a settle's target to an APPLY change made by [`change`]:
/// `:<ts>/<n>/<c1,c2,...>`, then `/<nonce>/<until_ms>` when the receipt
/// is single-use.
pub fn settle_target(
    ts: u64,
    positions: usize,
    costs: &[u64],
    spend: Option<Spend>,
    out: &mut Change,
) {
    out.push(b':');
    digits(ts, out);
    out.push(b'/');
    digits(positions as u64, out);
    out.push(b'/');
    cost_list(costs, out);
    spend::put_target_spend(spend, out);
}

/// Marks an APPLY change made by [`change`] as a charge merged into the
/// newest record: `:merge`.
pub fn merge_marker(out: &mut Change) {
    out.push(b':');
    out.extend_from_slice(MERGE);
}

/// Marks an APPLY change made by [`change`] as a settle that swept the
/// expired nonces of a full set and settled nothing: `:sweep`.
pub fn sweep_marker(out: &mut Change) {
    out.push(b':');
    out.extend_from_slice(SWEEP);
}

/// The one argument of `SLIDELOG.RESET` / `SLIDELOG.INFO`: a key.
pub fn single_key(command: &'static str, args: &[&[u8]]) -> Result<(), CommandError> {
    if args.len() != 1 {
        return Err(CommandError::Arity {
            command,
            expected: "takes exactly one key".into(),
        });
    }
    key(args[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(words: &str) -> Result<Check, CommandError> {
        let parts: Vec<&[u8]> = words.split(' ').map(str::as_bytes).collect();
        check(&parts)
    }

    #[test]
    fn digits_are_the_decimal_of_every_width() {
        let mut values = vec![0, 9, 10, 99, 100, 101, 999, 1_000, u64::MAX];
        values.extend((0..20).map(|p| 10u64.pow(p) - 1));
        values.extend((0..20).map(|p| 10u64.pow(p)));
        values.extend((0..2_000).map(|i| i * 7_919 + 1_767_225_600_000));
        for v in values {
            let mut out = Change::new();
            digits(v, &mut out);
            assert_eq!(out.as_slice(), v.to_string().as_bytes());
        }
    }

    #[test]
    fn a_check_parses_its_limits_and_costs() {
        let c = parse("k RECORD * 0 2 10 1000 1 500 60000 40").unwrap();
        assert_eq!(
            (c.mode, c.now_ms, c.deadline_ms),
            (Mode::Record, None, None)
        );
        assert_eq!(c.request.costs(), &[1, 40]);
        let c = parse("k peek 17 99 1 3 10 3").unwrap();
        assert_eq!(
            (c.mode, c.now_ms, c.deadline_ms, c.each),
            (Mode::Peek, Some(17), Some(99), false)
        );
        assert!(parse("k RECORD * 0 1 3 10 1 each").unwrap().each);
        assert!(
            parse("k RECORD * 0 1 3 10 1 ALL")
                .unwrap_err()
                .to_string()
                .contains("option after the limits must be EACH")
        );
        assert!(parse("k RECORD * 0 1 3 10 1 EACH x").is_err());
    }

    #[test]
    fn bad_arguments_name_field_and_bound() {
        let err = |w: &str| parse(w).unwrap_err().to_string();
        assert!(err("k RECORD * 0 1 0 1000 1").contains("max_1"));
        assert!(
            err("k RECORD * 0 1 10 0 1")
                .contains("window_ms_1 must be an integer from 1 to 31622400000")
        );
        assert!(err("k RECORD * 0 1 10 10 11").contains("cost_1 must be an integer from 1 to 10"));
        assert!(err("k RECORD * 0 17").contains("n must be an integer from 1 to 16"));
        assert!(err("k RECORD -5 0 1 1 1 1").contains("now_ms"));
        assert!(err("k RECORD 18446744073709551616 0 1 1 1 1").contains("now_ms"));
        assert!(err("k RECORD * 0 2 1 1 1").contains("wrong number of arguments"));
        assert!(err("k MAYBE * 0 1 1 1 1").contains("mode"));
        assert!(err(" RECORD * 0 1 1 1 1").contains("key"));
    }

    fn words(w: &str) -> Vec<&[u8]> {
        w.split(' ').map(str::as_bytes).collect()
    }

    #[test]
    fn settle_and_charge_parse_their_receipt_and_usage_costs() {
        let s = settle(&words("k * 0 1700 1,40 2 3 1000 1 100 1000 0")).unwrap();
        let receipt = s.receipt.unwrap();
        assert_eq!((receipt.ts(), receipt.costs()), (1700, &[1, 40][..]));
        assert_eq!((s.now_ms, s.deadline_ms), (None, None));
        assert_eq!(s.request.costs(), &[1, 0]);
        // Above a limit's max: usage known after the fact.
        let c = charge(&words("k 5 9 1 10 1000 10000000")).unwrap();
        assert_eq!(
            (c.now_ms, c.deadline_ms, c.receipt),
            (Some(5), Some(9), None)
        );
        assert_eq!(c.request.costs(), &[10_000_000]);
        let err = |r: Result<Usage, CommandError>| r.unwrap_err().to_string();
        assert!(
            err(charge(&words("k * 0 1 10 1000 10000001")))
                .contains("cost_1 must be an integer from 0 to 10000000")
        );
        assert!(
            err(settle(&words("k * 0 5 0,0 2 3 1000 1 100 1000 0")))
                .contains("record_costs must not all be 0")
        );
        assert!(
            err(settle(&words("k * 0 5 1,2,3 2 3 1000 1 100 1000 0")))
                .contains("record_costs must list 1 cost or n = 2")
        );
        assert!(err(settle(&words("k * 0 5 1,x 2 3 1000 1 100 1000 0"))).contains("record_cost_2"));
        assert!(err(settle(&words("k * 0 9007199254740992 1 1 3 1000 1"))).contains("record_ts"));
        assert!(err(settle(&words("k * 0 5 1 2 3 1000 1"))).contains("wrong number of arguments"));
        assert!(err(charge(&words("k * 0 17"))).contains("n must be an integer from 1 to 16"));
        assert!(err(charge(&words("k *"))).contains("wrong number of arguments"));
    }

    #[test]
    fn apply_takes_its_change_as_one_argument() {
        let a = apply(&words("k 10:1000:5000:1,40")).unwrap();
        assert_eq!(
            (a.now_ms, a.expire_window_ms, a.expire_at_ms),
            (10, 1000, Some(5010))
        );
        assert_eq!(apply(&words("k 10:0:-4:0")).unwrap().expire_at_ms, Some(6));
        assert_eq!(apply(&words("k 10:0:_:0")).unwrap().expire_at_ms, None);
        assert!(apply(&words("k 10:0:-10:0")).is_err());
        assert_eq!(a.costs, vec![1, 40]);
        assert!(apply(&words("k 10:0:0:0")).unwrap().costs.is_empty());
        assert!(apply(&words("k 10:0:0:1,,2")).is_err());
        assert!(apply(&words("k 10:0:0")).is_err());
        assert!(apply(&words("k 10:0:0:1:2")).is_err());
        assert!(apply(&words("k 10:0:0:1 2")).is_err());
        let mut out = Change::new();
        change(7, 0, Some(99), &[1, 4_000, 10_000_000], &mut out);
        assert_eq!(&out[..], b"7:0:92:1,4000,10000000");
        out.clear();
        change(7, 1, Some(2), &[], &mut out);
        assert_eq!(&out[..], b"7:1:-5:0");
        out.clear();
        change(7, 1, None, &[], &mut out);
        assert_eq!(&out[..], b"7:1:_:0");
    }

    #[test]
    fn apply_carries_a_settle_target_and_costs_of_0() {
        let mut out = Change::new();
        change(7, 1_000, Some(1_007), &[1, 0], &mut out);
        settle_target(5, 2, &[1, 40], None, &mut out);
        assert_eq!(&out[..], b"7:1000:1000:1,0:5/2/1,40");
        let text = std::str::from_utf8(&out).unwrap();
        let a = apply(&[b"k", text.as_bytes()]).unwrap();
        assert_eq!(a.costs, vec![1, 0]);
        let Action::Settle(t) = a.action else {
            panic!("a settle: {:?}", a.action)
        };
        assert_eq!(
            (t.ts, t.positions, t.cost_at(0), t.cost_at(5), t.spend),
            (5, 2, 1, 40, None)
        );
        // 0 everywhere: no record (a settle's removal).
        assert!(apply(&words("k 7:0:_:0,0:5/1/3")).unwrap().costs.is_empty());
        for bad in [
            "k 7:0:_:1:5/1",
            "k 7:0:_:1:5/0/1",
            "k 7:0:_:1:5/1/0",
            "k 7:0:_:1:5/2/1,2,3",
            "k 7:0:_:1:5/1/1:x",
            "k 7:0:_:1:5/1/1/9",
            "k 7:0:_:1:5/1/1/9/10/11",
        ] {
            assert!(apply(&words(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_settle_carries_its_receipt_s_nonce_and_validity() {
        let spend = Spend {
            nonce: u64::MAX,
            until_ms: 3_600_007,
        };
        let mut out = Change::new();
        change(7, 1_000, None, &[0], &mut out);
        settle_target(5, 1, &[3], Some(spend), &mut out);
        assert_eq!(&out[..], b"7:1000:_:0:5/1/3/18446744073709551615/3600007");
        let a = apply(&[b"k", &out[..]]).unwrap();
        let Action::Settle(t) = a.action else {
            panic!("a settle: {:?}", a.action)
        };
        assert_eq!((t.ts, t.spend), (5, Some(spend)));
        // The other forms: a sweep, and settled receipts restored.
        assert_eq!(
            apply(&words("k 7:0:_:0:sweep")).unwrap().action,
            Action::Sweep
        );
        let mut out = Change::new();
        change(7, 0, None, &[], &mut out);
        put_spent(&[spend, spend], &mut out);
        let a = apply(&[b"k", &out[..]]).unwrap();
        assert_eq!(a.action, Action::Spent(vec![spend, spend]));
        assert_eq!(
            apply(&words("k 7:0:_:0:merge")).unwrap().action,
            Action::Merge
        );
        let e = apply(&words("k 7:0:_:1:sweep")).unwrap_err().to_string();
        assert!(e.contains("costs must be 0 with spent/... or sweep"), "{e}");
        assert!(apply(&words("k 7:0:_:2:spent/1/2")).is_err());
        let e = apply(&words("k 7:0:_:0:5/1/3/1/9007199254740992")).unwrap_err();
        assert!(
            e.to_string().contains("until_ms must be an integer from 0"),
            "{e}"
        );
    }

    #[test]
    fn a_settle_takes_an_optional_trailing_spend() {
        let s = settle(&words("k * 0 1700 1,40 2 3 1000 1 100 1000 0 SPEND 42 99")).unwrap();
        let receipt = s.receipt.unwrap();
        assert_eq!(
            (receipt.ts(), receipt.spend()),
            (
                1700,
                Some(Spend {
                    nonce: 42,
                    until_ms: 99
                })
            )
        );
        assert_eq!(s.request.costs(), &[1, 0]);
        let s = settle(&words("k * 0 1700 1 1 3 1000 1")).unwrap();
        assert_eq!(s.receipt.unwrap().spend(), None);
        let err = |w: &str| settle(&words(w)).unwrap_err().to_string();
        assert!(err("k * 0 1700 1 1 3 1000 1 SPEND 42").contains("wrong number of arguments"));
        assert!(err("k * 0 1700 1 1 3 1000 1 SPEND x 99").contains("nonce must be"));
        assert!(err("k * 0 1700 1 1 3 1000 1 SPENT 1 99").contains("wrong number of arguments"));
        assert!(
            err("k * 0 1700 1 SPEND 1 99").contains("[SPEND <nonce> <until_ms>]"),
            "the usage names the option"
        );
    }
}

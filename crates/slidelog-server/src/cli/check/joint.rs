//! `slidelog check KEY --limit … --and KEY2 --limit …`: several keys, each
//! with its own limits and costs, decided all or nothing (docs/design.md
//! §1, "One request, several keys").
//!
//! Each `--and KEY` starts the next key's group: every `--limit` and
//! `--cost` belongs to the nearest `--and` before it on the command line,
//! or to the first key (the positional `KEY`) when none is before it.
//! `--max`/`--window` are the first key's only and must come before the
//! first `--and`. The grouping is read from the positions clap recorded
//! ([`clap::ArgMatches::indices_of`]), so `--limit` lists stay as typed.

use super::CheckArgs;
use anyhow::Context as _;
use slidelog::{Checks, Detailed, JointDecision, Limit, Request};

/// Where each `--and`, `--limit` and `--cost` came on the command line.
#[derive(Debug, Clone, Default)]
pub struct Groups {
    /// The position of each `--and` value.
    and: Vec<usize>,
    /// The position of each `--limit` value.
    limits: Vec<usize>,
    /// The position of each `--cost` value given (none when defaulted).
    costs: Vec<usize>,
    /// The positions of `--max` and `--window`, when given.
    max_window: Vec<usize>,
}

impl Groups {
    /// Reads the positions from `check`'s matches.
    pub fn of(matches: &clap::ArgMatches) -> Self {
        let given = |id: &str| -> Vec<usize> {
            let defaulted =
                matches.value_source(id) == Some(clap::parser::ValueSource::DefaultValue);
            match matches.indices_of(id) {
                Some(at) if !defaulted => at.collect(),
                _ => Vec::new(),
            }
        };
        let mut max_window = given("max");
        max_window.extend(given("window"));
        Self {
            and: given("and"),
            limits: given("limits"),
            costs: given("costs"),
            max_window,
        }
    }

    /// The group of the value at position `at`: 0 for the first key, `i`
    /// for the `i`-th `--and`.
    fn group(&self, at: usize) -> usize {
        self.and.iter().filter(|&&and| and < at).count()
    }
}

/// One key's limits and costs, before they are validated.
struct Group {
    key: String,
    limits: Vec<Limit>,
    costs: Vec<u64>,
}

/// The checks of `args`: the first key with `--max`/`--window` and the
/// limits and costs before the first `--and`, then one per `--and`.
pub fn checks(args: &CheckArgs, groups: &Groups) -> anyhow::Result<Checks> {
    if groups.max_window.iter().any(|&at| groups.group(at) > 0) {
        anyhow::bail!(
            "--max and --window belong to the first key: give them before --and, \
             or give the later keys --limit MAX/WINDOW"
        );
    }
    let keys = std::iter::once(&args.key).chain(&args.and);
    let mut all: Vec<Group> = keys
        .map(|key| Group {
            key: key.clone(),
            limits: Vec::new(),
            costs: Vec::new(),
        })
        .collect();
    if let (Some(max), Some(window)) = (args.max, args.window) {
        all[0].limits.push(Limit::per(max, window)?);
    }
    for (limit, &at) in args.limits.iter().zip(&groups.limits) {
        all[groups.group(at)].limits.push(*limit);
    }
    for (cost, &at) in args.costs.iter().zip(&groups.costs) {
        all[groups.group(at)].costs.push(*cost);
    }
    let requests = all
        .into_iter()
        .map(|g| {
            if g.limits.is_empty() {
                anyhow::bail!(
                    "key {:?} has no limit: give --limit MAX/WINDOW after it (e.g. 100/minute)",
                    g.key
                );
            }
            let named = format!("key {:?}", g.key);
            let request = match g.costs.as_slice() {
                [] => Request::new(g.key, g.limits, 1),
                [cost] => Request::new(g.key, g.limits, *cost),
                costs => Request::with_costs(g.key, g.limits, costs.to_vec()),
            };
            request.context(named)
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(Checks::new(requests)?)
}

/// The joint decision in words: the verdict, then each key's state (its
/// deciding limit, and every limit when it has several or a named one).
pub fn describe(joint: &JointDecision, checks: &Checks, peek: bool) -> String {
    let keys = checks.as_slice();
    let verdict = match (peek, joint.allowed) {
        (false, true) => "allowed: every key admits; recorded in each".to_owned(),
        (true, true) => "would be allowed (peek, nothing recorded): every key admits".to_owned(),
        (p, false) => {
            let by = joint.refused_by.map_or("?", |r| keys[r.check].key());
            let head = if p {
                "would be rejected (peek, nothing recorded)"
            } else {
                "rejected, nothing recorded in any key"
            };
            format!("{head}: refused by {by}")
        }
    };
    let mut text = verdict;
    for (each, request) in joint.checks.iter().zip(keys) {
        let state = key_state(each, joint.allowed, peek);
        let body = super::describe_with(each, &state);
        text.push_str(&format!(
            "\n{}: {}",
            request.key(),
            body.replace('\n', "\n  ")
        ));
    }
    text
}

/// A key's own verdict within the joint one.
fn key_state(each: &Detailed, joint_allowed: bool, peek: bool) -> String {
    match (each.decision.allowed, joint_allowed, peek) {
        (true, true, false) => "allowed",
        (true, true, true) => "would be allowed",
        (true, false, _) => "admits alone",
        (false, _, _) => "refuses",
    }
    .to_owned()
}

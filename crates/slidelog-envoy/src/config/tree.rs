//! Matching: the descriptor tree of one domain, and the walk of a request's
//! descriptor down it.
//!
//! At each level the entry's key picks the configured descriptors of that
//! key; among them the exact value wins, then the first wildcard value that
//! matches, in config order (merged files in load order), then the
//! value-less key. A rule applies only when the request's descriptor ends at
//! a level that has a `rate_limit`; the walk never backtracks to try a
//! weaker match when a stronger one leads nowhere, as in the reference.

use super::pattern::Pattern;
use super::rule::Rule;
use super::{DescriptorEntry, LookupMap};
use smallvec::SmallVec;
use std::sync::Arc;

/// One configured descriptor (or a domain's root).
#[derive(Debug, Default)]
pub(super) struct Node {
    pub rule: Option<Arc<Rule>>,
    pub value_to_metric: bool,
    /// `share_threshold: true` on this (wildcard) descriptor.
    pub share: bool,
    pub(super) children: LookupMap<Children>,
}

/// The configured descriptors of one key at one level.
#[derive(Debug, Default)]
pub(super) struct Children {
    exact: LookupMap<Node>,
    wildcard: Vec<(Pattern, Node)>,
    /// A pattern's text → its index in `wildcard`, for a request value that
    /// is that text exactly (the reference finds it by exact lookup).
    literal: LookupMap<usize>,
    any: Option<Box<Node>>,
}

/// How one entry of a request matched.
#[derive(Debug, Clone, Copy)]
pub(super) enum How<'a> {
    /// By its exact value (or the literal text of a wildcard value).
    Exact,
    /// By this wildcard pattern.
    Wild(&'a str),
    /// By the value-less key.
    Default,
}

/// The steps of one walk, on the stack for descriptors of up to 4 entries.
pub(super) type Steps<'a> = SmallVec<[Step<'a>; 4]>;

/// The node one entry matched, and how.
pub(super) struct Step<'a> {
    pub how: How<'a>,
    pub node: &'a Node,
}

/// A configured descriptor's value: exact, a wildcard, or none.
pub(super) enum ValueKind {
    Exact(String),
    Wild(Pattern),
    None,
}

impl Node {
    /// Adds `child` under `key` and `value`; `false` when that key and value
    /// are already configured at this level (a duplicate composite key).
    pub fn insert(&mut self, key: String, value: ValueKind, child: Node) -> bool {
        let slot = self.children.entry(key).or_default();
        match value {
            ValueKind::Exact(v) => {
                let clash = slot.exact.contains_key(&v) || slot.literal.contains_key(&v);
                !clash && slot.exact.insert(v, child).is_none()
            }
            ValueKind::Wild(p) => {
                let clash =
                    slot.literal.contains_key(p.as_str()) || slot.exact.contains_key(p.as_str());
                if !clash {
                    slot.literal
                        .insert(p.as_str().to_owned(), slot.wildcard.len());
                    slot.wildcard.push((p, child));
                }
                !clash
            }
            ValueKind::None => {
                let clash = slot.any.is_some();
                if !clash {
                    slot.any = Some(Box::new(child));
                }
                !clash
            }
        }
    }

    /// Returns every rule at or below this node, in no particular order.
    pub fn rules<'a>(&'a self, out: &mut Vec<&'a Arc<Rule>>) {
        out.extend(self.rule.iter());
        for slot in self.children.values() {
            for node in slot.exact.values() {
                node.rules(out);
            }
            for (_, node) in &slot.wildcard {
                node.rules(out);
            }
            if let Some(node) = &slot.any {
                node.rules(out);
            }
        }
    }

    /// Returns the child an entry matches, and how.
    fn child(&self, key: &str, value: &str) -> Option<Step<'_>> {
        let slot = self.children.get(key)?;
        let step = |how, node| Some(Step { how, node });
        if let Some(n) = slot.exact.get(value) {
            return step(How::Exact, n);
        }
        if let Some(&i) = slot.literal.get(value) {
            return step(How::Exact, &slot.wildcard[i].1);
        }
        if let Some((p, n)) = slot.wildcard.iter().find(|(p, _)| p.matches(value)) {
            return step(How::Wild(p.as_str()), n);
        }
        slot.any.as_deref().and_then(|n| step(How::Default, n))
    }

    /// Returns the rule for a descriptor and the node each entry matched.
    pub fn walk<'a, E: DescriptorEntry>(
        &'a self,
        entries: &[E],
    ) -> Option<(&'a Arc<Rule>, Steps<'a>)> {
        let last = entries.len().checked_sub(1)?;
        let mut node = self;
        let mut steps = Steps::new();
        for (i, entry) in entries.iter().enumerate() {
            let step = node.child(entry.key(), entry.value())?;
            let next = step.node;
            steps.push(step);
            if i == last {
                return next.rule.as_ref().map(|r| (r, steps));
            }
            if next.children.is_empty() {
                return None;
            }
            node = next;
        }
        None
    }
}

/// Returns the metric name the reference service gives a matched descriptor: with
/// `detailed_metric`, every entry's own value (a `share_threshold` entry's
/// pattern); otherwise the configured path, except that a level with
/// `value_to_metric` writes the request's value in place of the configured
/// one (a `share_threshold` wildcard keeps its pattern).
pub(super) fn metric_name<E: DescriptorEntry>(
    domain: &str,
    entries: &[E],
    steps: &[Step<'_>],
    rule: &Rule,
) -> Option<String> {
    let flagged = rule.detailed_metric || steps.iter().any(|s| s.node.value_to_metric);
    if !flagged {
        return None;
    }
    let mut name = domain.to_owned();
    let mut push = |key: &str, value: Option<&str>| {
        name.push('.');
        name.push_str(key);
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            name.push('_');
            name.push_str(v);
        }
    };
    let shared = rule.share.iter().any(Option::is_some);
    for (i, (entry, step)) in entries.iter().zip(steps).enumerate() {
        let (key, value) = (entry.key(), entry.value());
        let pattern = rule.share.get(i).and_then(Option::as_deref);
        if rule.detailed_metric {
            match pattern {
                Some(p) => push(key, Some(p)),
                // The reference writes `key_` even for an empty value here.
                None if !shared && value.is_empty() => push(&format!("{key}_"), None),
                None => push(key, Some(value)),
            }
            continue;
        }
        match step.how {
            How::Wild(p) if step.node.share || !step.node.value_to_metric => push(key, Some(p)),
            How::Default if !step.node.value_to_metric => push(key, None),
            How::Wild(_) | How::Default | How::Exact => push(key, Some(value)),
        }
    }
    Some(name)
}

//! The key namespace of a layer: every log a layer writes is
//! `{namespace}:{route scope}:{key}`, so two layers on one limiter never
//! count in each other's logs, whatever keys their extractors produce.
//!
//! A namespace is a name the user gives (`.name("search")`, used as is:
//! two layers given the same name share their logs on purpose) or one
//! derived from the extractor (`auto-ip`, `auto-header-x-api-key`). Derived
//! names are told apart per limiter ([`Names`], held by the limiter and
//! shared by its clones, never by the process): while a layer holds
//! `auto-ip` on a limiter, the next layer on it that would derive it gets
//! `auto-ip-2`, and so on, in the order the layers are built on that
//! limiter. The same program builds its layers in the same order in every
//! process, so every instance derives the same names; name layers
//! explicitly when that order may differ between versions that run side by
//! side (a rolling deploy that adds a layer), or when two limiters share
//! one store.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

/// Longest name given with `.name(…)`, in bytes (the key bound is 512 bytes
/// for namespace, route and key together).
pub const MAX_NAME_BYTES: usize = 64;

/// The derived names held on one limiter: base name -> ordinals held.
#[derive(Debug, Default)]
pub(crate) struct Names(Mutex<HashMap<String, Vec<u32>>>);

impl Names {
    /// Holds the first free ordinal of `base` and returns it.
    fn hold(&self, base: &str) -> u32 {
        let mut held = self.0.lock();
        let ordinals = held.entry(base.to_owned()).or_default();
        let ordinal = (1..).find(|n| !ordinals.contains(n)).unwrap_or(1);
        ordinals.push(ordinal);
        ordinal
    }

    /// Frees `ordinal` of `base`.
    fn release(&self, base: &str, ordinal: u32) {
        let mut held = self.0.lock();
        if let Some(ordinals) = held.get_mut(base) {
            ordinals.retain(|n| *n != ordinal);
            if ordinals.is_empty() {
                held.remove(base);
            }
        }
    }
}

/// A layer's namespace; a derived one is held until every clone of the
/// layer (and of the services it made) is dropped.
#[derive(Debug)]
pub(crate) struct Namespace {
    name: String,
    /// `Some` for a derived name: released on drop.
    held: Option<(Arc<Names>, String, u32)>,
}

impl Namespace {
    /// Returns a name of the user's own.
    pub(crate) fn named(name: String) -> Arc<Self> {
        Arc::new(Self { name, held: None })
    }

    /// Returns the first free derived name for `base` among `names` (the
    /// limiter's).
    pub(crate) fn derived(names: &Arc<Names>, base: &str) -> Arc<Self> {
        let base = format!("auto-{}", sanitize(base));
        let ordinal = names.hold(&base);
        let name = if ordinal == 1 {
            base.clone()
        } else {
            format!("{base}-{ordinal}")
        };
        Arc::new(Self {
            name,
            held: Some((names.clone(), base, ordinal)),
        })
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.name
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        if let Some((names, base, ordinal)) = self.held.take() {
            names.release(&base, ordinal);
        }
    }
}

/// A derived name keeps to letters, digits and `-`, at most 48 bytes, so it
/// reads well in a Redis key and leaves room for the route and the key.
fn sanitize(base: &str) -> String {
    let mut out: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    out.truncate(48);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_names_differ_while_held_and_are_reused_once_released() {
        let limiter = Arc::new(Names::default());
        let a = Namespace::derived(&limiter, "ip");
        let b = Namespace::derived(&limiter, "ip");
        assert_eq!((a.as_str(), b.as_str()), ("auto-ip", "auto-ip-2"));
        drop(a);
        let c = Namespace::derived(&limiter, "ip");
        assert_eq!(c.as_str(), "auto-ip");
        // Another limiter: names are per limiter.
        let second = Arc::new(Names::default());
        let other = Namespace::derived(&second, "ip");
        assert_eq!(other.as_str(), "auto-ip");
        assert_eq!(
            Namespace::derived(&limiter, "header:X-Api-Key").as_str(),
            "auto-header-x-api-key"
        );
    }
}

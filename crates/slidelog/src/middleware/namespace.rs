//! The key namespace of a layer: every log a layer writes is
//! `{namespace}:{route scope}:{key}`, so two layers on one limiter never
//! count in each other's logs, whatever keys their extractors produce.
//!
//! A namespace is a name the user gives (`.name("search")`, used as is:
//! two layers given the same name share their logs on purpose) or one
//! derived from the extractor and the route table: `auto-ip-1a2b3c4d`,
//! `auto-header-x-api-key-…`, where the 8 hex digits are a fingerprint of
//! every route's path, method and limits ([`RouteLimits`](super::RouteLimits)).
//! So two layers (in one process, two limiters or two processes on one
//! store) with other limits never share logs by accident: `/a` at 10 a
//! second and `/b` at 5 a minute, both keyed by IP, count apart (measured: BENCHMARKS.md).
//! Derived names are also told apart per limiter ([`Names`], held by the
//! limiter and shared by its clones, never by the process): while a layer
//! holds a name on a limiter, the next layer on it that would derive it gets
//! the name with `-2`, and so on, in the order the layers are built on that
//! limiter. The same program builds its layers in the same order with the
//! same limits in every process, so its instances derive the same names and
//! share their counts, as they should. Two *different* services with the
//! same extractor and the same limits on one store would still share: a
//! layer on a store shared over the network without a name logs a warning
//! when it is first wrapped around a service; name layers explicitly there, and when the build order
//! may differ between versions that run side by side (a rolling deploy that
//! adds a layer).

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
    /// Set when a derived name was first used on a service (its warning
    /// is logged once per layer, not once per route it wraps).
    used: std::sync::atomic::AtomicBool,
}

impl Namespace {
    /// Returns a name of the user's own.
    pub(crate) fn named(name: String) -> Arc<Self> {
        Arc::new(Self {
            name,
            held: None,
            used: Default::default(),
        })
    }

    /// Returns the first free derived name for the extractor `base` and the
    /// route table's `fingerprint` among `names` (the limiter's).
    pub(crate) fn derived(names: &Arc<Names>, base: &str, fingerprint: &str) -> Arc<Self> {
        let base = format!("auto-{}-{fingerprint}", sanitize(base));
        let ordinal = names.hold(&base);
        let name = if ordinal == 1 {
            base.clone()
        } else {
            format!("{base}-{ordinal}")
        };
        Arc::new(Self {
            name,
            held: Some((names.clone(), base, ordinal)),
            used: Default::default(),
        })
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.name
    }

    /// True the first time a derived name is used on a service, false after
    /// that and always for a name of the user's own.
    pub(crate) fn first_unnamed_use(&self) -> bool {
        self.held.is_some() && !self.used.swap(true, std::sync::atomic::Ordering::Relaxed)
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
        let a = Namespace::derived(&limiter, "ip", "0a");
        let b = Namespace::derived(&limiter, "ip", "0a");
        assert_eq!((a.as_str(), b.as_str()), ("auto-ip-0a", "auto-ip-0a-2"));
        drop(a);
        let c = Namespace::derived(&limiter, "ip", "0a");
        assert_eq!(c.as_str(), "auto-ip-0a");
        // Other limits: another name, whatever the order.
        assert_eq!(
            Namespace::derived(&limiter, "ip", "0b").as_str(),
            "auto-ip-0b"
        );
        // Another limiter: names are per limiter.
        let second = Arc::new(Names::default());
        let other = Namespace::derived(&second, "ip", "0a");
        assert_eq!(other.as_str(), "auto-ip-0a");
        assert_eq!(
            Namespace::derived(&limiter, "header:X-Api-Key", "0a").as_str(),
            "auto-header-x-api-key-0a"
        );
    }
}

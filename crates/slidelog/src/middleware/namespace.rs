//! The key namespace of a layer: every log a layer writes is
//! `{namespace}:{route scope}:{key}`, so two layers on one limiter never
//! count in each other's logs, whatever keys their extractors produce.
//!
//! A namespace is a name the user gives (`.name("search")`, used as is:
//! two layers given the same name share their logs on purpose) or one
//! derived from the extractor (`auto-ip`, `auto-header-x-api-key`). Derived
//! names are told apart per store: while a layer holds `auto-ip` on a store,
//! the next layer that would derive it gets `auto-ip-2`, and so on, in the
//! order the layers are built. The same program builds its layers in the
//! same order in every process, so every instance derives the same names;
//! name layers explicitly when that order may differ between versions that
//! run side by side (a rolling deploy that adds a layer).

use crate::Limiter;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Longest name given with `.name(…)`, in bytes (the key bound is 512 bytes
/// for namespace, route and key together).
pub const MAX_NAME_BYTES: usize = 64;

/// The derived names in use: (store address, base name) -> ordinals held.
/// A store outlives every layer on it (each holds the limiter), so its
/// address cannot be reused while an entry for it exists.
type Registry = Mutex<HashMap<(usize, String), Vec<u32>>>;

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Registry::default)
}

/// A layer's namespace; a derived one is held until every clone of the
/// layer (and of the services it made) is dropped.
#[derive(Debug)]
pub(crate) struct Namespace {
    name: String,
    /// `Some` for a derived name: released on drop.
    held: Option<(usize, String, u32)>,
}

impl Namespace {
    /// A name of the user's own.
    pub(crate) fn named(name: String) -> Arc<Self> {
        Arc::new(Self { name, held: None })
    }

    /// The first free derived name for `base` on the limiter's store.
    pub(crate) fn derived(limiter: &Limiter, base: &str) -> Arc<Self> {
        let store = Arc::as_ptr(limiter.store()) as *const () as usize;
        let base = format!("auto-{}", sanitize(base));
        let mut held = registry().lock().unwrap_or_else(|e| e.into_inner());
        let ordinals = held.entry((store, base.clone())).or_default();
        let ordinal = (1..).find(|n| !ordinals.contains(n)).unwrap_or(1);
        ordinals.push(ordinal);
        let name = if ordinal == 1 {
            base.clone()
        } else {
            format!("{base}-{ordinal}")
        };
        Arc::new(Self {
            name,
            held: Some((store, base, ordinal)),
        })
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.name
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        if let Some((store, base, ordinal)) = self.held.take() {
            let mut held = registry().lock().unwrap_or_else(|e| e.into_inner());
            let key = (store, base);
            if let Some(ordinals) = held.get_mut(&key) {
                ordinals.retain(|n| *n != ordinal);
                if ordinals.is_empty() {
                    held.remove(&key);
                }
            }
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
        let limiter = Limiter::memory();
        let a = Namespace::derived(&limiter, "ip");
        let b = Namespace::derived(&limiter, "ip");
        assert_eq!((a.as_str(), b.as_str()), ("auto-ip", "auto-ip-2"));
        drop(a);
        let c = Namespace::derived(&limiter, "ip");
        assert_eq!(c.as_str(), "auto-ip");
        // Another store: names are per store.
        let second = Limiter::memory();
        let other = Namespace::derived(&second, "ip");
        assert_eq!(other.as_str(), "auto-ip");
        assert_eq!(
            Namespace::derived(&limiter, "header:X-Api-Key").as_str(),
            "auto-header-x-api-key"
        );
    }
}

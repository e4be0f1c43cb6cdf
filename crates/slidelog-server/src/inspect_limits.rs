//! The `max` of each key for `inspect` and `serve --inspect-every`, from the
//! Envoy-style limits config (`--config`): a key the Envoy API wrote,
//! `<prefix>envoy:<domain>:<key>=<value>…` (see `slidelog_envoy::key`), is
//! compared with the rule its descriptor matches; any other key falls back to
//! the largest `requests_per_unit` of the config.

use slidelog_envoy::RateLimitConfig;
use slidelog_envoy::key::parse_descriptor_key;
use slidelog_inspect::analysis::KeyLimits;
use std::path::Path;
use std::sync::Arc;

/// What a config says about key sizes: the fallback max and the per-key rule.
pub struct ConfigLimits {
    /// The largest `requests_per_unit` (the fallback max).
    pub max: u64,
    /// The max of keys that name a configured descriptor.
    pub key_limits: KeyLimits,
}

/// Reads `path` (a YAML file or a folder) for the keys under `key_prefix`.
pub fn from_config(path: &Path, key_prefix: &str) -> anyhow::Result<ConfigLimits> {
    let max = slidelog_inspect::config::max_from_config(path)?;
    let config = RateLimitConfig::load(path)
        .map_err(|e| anyhow::anyhow!("limits config {}: {e}", path.display()))?;
    let prefix = key_prefix.to_owned();
    let key_limits = KeyLimits(Arc::new(move |key: &[u8]| {
        let key = std::str::from_utf8(key)
            .ok()?
            .strip_prefix(prefix.as_str())?;
        rule_max(&config, key)
    }));
    Ok(ConfigLimits { max, key_limits })
}

/// The max of the rule that `envoy:<domain>:<k>=<v>…` matches. Hashed keys
/// (`#…`, descriptors too long for a key) name no rule.
fn rule_max(config: &RateLimitConfig, key: &str) -> Option<u64> {
    let (domain, entries) = parse_descriptor_key(key)?;
    let rule = config.find(&domain, &entries)?;
    rule.limit().map(|limit| limit.max())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envoy_keys_get_their_rule_and_others_the_largest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("limits.yaml");
        std::fs::write(
            &path,
            "domain: api\ndescriptors:\n  - key: user\n    value: alice\n    rate_limit: {unit: minute, requests_per_unit: 5}\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 100}\n",
        )
        .unwrap();
        let limits = from_config(&path, slidelog_core::DEFAULT_KEY_PREFIX).unwrap();
        assert_eq!(limits.max, 100);
        let of = |key: &str| (limits.key_limits.0)(key.as_bytes());
        assert_eq!(of("rate:sliding:envoy:api:user=alice"), Some(5));
        assert_eq!(of("rate:sliding:envoy:api:user=bob"), Some(100));
        assert_eq!(of("rate:sliding:envoy:other:user=alice"), None);
        assert_eq!(of("rate:sliding:user123"), None);
        assert_eq!(of("other:envoy:api:user=alice"), None);
        assert_eq!(of("rate:sliding:envoy:api:#0123"), None);
    }
}

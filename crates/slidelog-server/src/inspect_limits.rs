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
    // The one reader of the Envoy config, the one `serve --config` uses.
    let config = RateLimitConfig::load(path)
        .map_err(|e| anyhow::anyhow!("limits config {}: {e}", path.display()))?;
    let max = config
        .rules()
        .iter()
        .filter_map(|rule| rule.limit())
        .map(|limit| limit.max())
        .max()
        .ok_or_else(|| {
            anyhow::anyhow!(
                "limits config {}: no rate_limit.requests_per_unit in any descriptor",
                path.display()
            )
        })?;
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

    #[test]
    fn the_fallback_is_the_largest_limit_of_nested_descriptors_and_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("a.yaml"),
            "domain: mongo_cps\ndescriptors:\n  - key: database\n    value: users\n    rate_limit:\n      unit: second\n      requests_per_unit: 500\n  - key: database\n    descriptors:\n      - key: user\n        rate_limit: {unit: minute, requests_per_unit: 900}\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("b.yml"),
            "domain: other\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 20}\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("ignored.txt"), "not yaml: [").unwrap();
        let prefix = slidelog_core::DEFAULT_KEY_PREFIX;
        assert_eq!(from_config(dir.path(), prefix).unwrap().max, 900);
        assert_eq!(
            from_config(&dir.path().join("b.yml"), prefix).unwrap().max,
            20
        );
        let empty = dir.path().join("empty.yaml");
        std::fs::write(&empty, "domain: x\ndescriptors:\n  - key: k\n").unwrap();
        let e = from_config(&empty, prefix).err().unwrap().to_string();
        assert!(e.contains("requests_per_unit"), "{e}");
        assert!(from_config(&dir.path().join("missing.yaml"), prefix).is_err());
    }
}

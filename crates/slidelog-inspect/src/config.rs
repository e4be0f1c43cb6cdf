//! The `max` of the oversize check, read from the service's Envoy-style limits
//! config (a YAML file or a folder of them). Only `rate_limit.requests_per_unit`
//! matters here; everything else in the file is ignored. Keys do not say
//! which descriptor they belong to, so the check uses the largest configured
//! limit: a key above twice the largest limit is above twice its own.

use crate::error::InspectError;
use serde::Deserialize;
use std::path::Path;

#[derive(Debug, Deserialize, Default)]
#[serde(default)]
struct ConfigFile {
    descriptors: Vec<Descriptor>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(default)]
struct Descriptor {
    rate_limit: Option<RateLimit>,
    descriptors: Vec<Descriptor>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(default)]
struct RateLimit {
    requests_per_unit: Option<u64>,
}

/// The largest `requests_per_unit` in the config at `path` (a file, or every
/// `*.yaml`/`*.yml` in a folder). Errors when there is none.
pub fn max_from_config(path: &Path) -> Result<u64, InspectError> {
    let err = |reason: String| InspectError::Config {
        path: path.display().to_string(),
        reason,
    };
    let files = if path.is_dir() {
        let mut files: Vec<_> = std::fs::read_dir(path)
            .map_err(|e| err(e.to_string()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect();
        files.sort();
        files
    } else {
        vec![path.to_path_buf()]
    };
    let mut largest: Option<u64> = None;
    for file in &files {
        let text =
            std::fs::read_to_string(file).map_err(|e| err(format!("{}: {e}", file.display())))?;
        let config: ConfigFile =
            serde_saphyr::from_str(&text).map_err(|e| err(format!("{}: {e}", file.display())))?;
        let mut stack: Vec<&Descriptor> = config.descriptors.iter().collect();
        while let Some(d) = stack.pop() {
            if let Some(n) = d.rate_limit.as_ref().and_then(|r| r.requests_per_unit) {
                largest = Some(largest.map_or(n, |m| m.max(n)));
            }
            stack.extend(d.descriptors.iter());
        }
    }
    largest.ok_or_else(|| err("no rate_limit.requests_per_unit in any descriptor".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn largest_requests_per_unit_of_nested_descriptors() {
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
        assert_eq!(max_from_config(dir.path()).unwrap(), 900);
        assert_eq!(max_from_config(&dir.path().join("b.yml")).unwrap(), 20);
        let empty = dir.path().join("empty.yaml");
        std::fs::write(&empty, "domain: x\n").unwrap();
        let e = max_from_config(&empty).unwrap_err().to_string();
        assert!(e.contains("requests_per_unit"), "{e}");
        assert!(max_from_config(&dir.path().join("missing.yaml")).is_err());
    }
}

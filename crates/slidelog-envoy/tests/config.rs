//! The reference service's YAML config: parsing, the matching rules (exact
//! value, wildcard value, value-less key, nesting, depth), slidelog's
//! `window`, and errors that name the file, the line and the problem.

use slidelog_envoy::config::{ConfigError, RateLimitConfig, Unit};
use std::path::Path;

const EXAMPLE: &str = r#"
domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit:
      unit: second
      requests_per_unit: 500

  - key: database
    value: default
    rate_limit:
      unit: second
      requests_per_unit: 50

  - key: remote_address
    rate_limit:
      unit: minute
      requests_per_unit: 10
    descriptors:
      - key: path
        value: /login
        rate_limit:
          unit: hour
          requests_per_unit: 3

  - key: path
    value: /api/*
    rate_limit:
      name: api_paths
      unit: day
      requests_per_unit: 1000

  - key: client
    value: internal
    rate_limit:
      unlimited: true

  - key: plan
    value: burst
    shadow_mode: true
    rate_limit:
      requests_per_unit: 30
      window: 90s

  - key: parent
    descriptors:
      - key: child
        rate_limit:
          unit: Second
          requests_per_unit: 5
"#;

fn config() -> RateLimitConfig {
    RateLimitConfig::from_yaml_str("example.yaml", EXAMPLE).expect("valid config")
}

fn limit_of(c: &RateLimitConfig, entries: &[(&str, &str)]) -> Option<(u64, u64)> {
    c.find("mongo_cps", entries)
        .map(|r| r.limit().map_or((0, 0), |l| (l.max(), l.window_ms())))
}

#[test]
fn exact_values_match_and_other_values_do_not() {
    let c = config();
    assert_eq!(limit_of(&c, &[("database", "users")]), Some((500, 1000)));
    assert_eq!(limit_of(&c, &[("database", "default")]), Some((50, 1000)));
    assert_eq!(limit_of(&c, &[("database", "other")]), None);
    assert_eq!(limit_of(&c, &[("unknown", "x")]), None);
    assert!(c.find("other_domain", &[("database", "users")]).is_none());
    assert!(c.find("mongo_cps", &[] as &[(&str, &str)]).is_none());
}

#[test]
fn a_key_without_value_matches_every_value() {
    let c = config();
    assert_eq!(
        limit_of(&c, &[("remote_address", "10.0.0.1")]),
        Some((10, 60_000))
    );
    assert_eq!(
        limit_of(&c, &[("remote_address", "10.0.0.2")]),
        Some((10, 60_000))
    );
    // Nested: the deeper rule applies to the two-entry descriptor.
    assert_eq!(
        limit_of(&c, &[("remote_address", "10.0.0.1"), ("path", "/login")]),
        Some((3, 3_600_000))
    );
    // A descriptor deeper than the config, or ending where no rule is, is not limited.
    assert_eq!(
        limit_of(&c, &[("remote_address", "10.0.0.1"), ("path", "/other")]),
        None
    );
    assert_eq!(limit_of(&c, &[("database", "users"), ("x", "y")]), None);
    assert_eq!(limit_of(&c, &[("parent", "p")]), None);
    assert_eq!(
        limit_of(&c, &[("parent", "p"), ("child", "c")]),
        Some((5, 1000))
    );
}

#[test]
fn wildcard_values_match_by_prefix() {
    let c = config();
    let rule = c.find("mongo_cps", &[("path", "/api/v1/users")]).unwrap();
    assert_eq!(rule.name(), Some("api_paths"));
    assert_eq!(rule.unit(), Unit::Day);
    assert!(c.find("mongo_cps", &[("path", "/apix")]).is_none());
}

#[test]
fn unlimited_shadow_mode_and_window() {
    let c = config();
    let unlimited = c.find("mongo_cps", &[("client", "internal")]).unwrap();
    assert!(unlimited.limit().is_none());
    let burst = c.find("mongo_cps", &[("plan", "burst")]).unwrap();
    assert!(burst.shadow_mode());
    assert_eq!(burst.limit().unwrap().window_ms(), 90_000);
    assert_eq!(burst.limit().unwrap().max(), 30);
    // A window without a unit reports the largest unit that fits in it.
    assert_eq!(burst.unit(), Unit::Minute);
}

fn invalid(yaml: &str) -> (u64, String) {
    match RateLimitConfig::from_yaml_str("bad.yaml", yaml) {
        Err(e @ ConfigError::Invalid { line, .. }) => {
            let msg = e.to_string();
            assert!(msg.starts_with("bad.yaml:"), "{msg}");
            (line, msg)
        }
        other => panic!("expected an invalid config error, got {other:?}"),
    }
}

#[test]
fn errors_name_file_line_and_problem() {
    let (line, msg) = invalid(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 5\n",
    );
    assert_eq!(line, 5, "{msg}");
    assert!(
        msg.contains("fortnight") && msg.contains("second, minute"),
        "{msg}"
    );

    let (line, msg) = invalid(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 0\n",
    );
    assert_eq!(line, 6, "{msg}");
    assert!(
        msg.contains("requests_per_unit") && msg.contains("10000000"),
        "{msg}"
    );

    let (line, msg) =
        invalid("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n");
    assert_eq!(line, 5, "{msg}");
    assert!(msg.contains("requests_per_unit"), "{msg}");

    let (line, msg) = invalid("domain: d\ndescriptors:\n  - key: k\n    colour: blue\n");
    assert_eq!(line, 4, "{msg}");
    assert!(msg.contains("colour"), "{msg}");

    let (line, msg) =
        invalid("domain: d\ndescriptors:\n  - key: k\n    value: a\n  - key: k\n    value: a\n");
    assert_eq!(line, 5, "{msg}");
    assert!(msg.contains("duplicate"), "{msg}");

    let (line, msg) = invalid(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      requests_per_unit: 3\n      window: 1.5ms\n",
    );
    assert_eq!(line, 6, "{msg}");
    assert!(msg.contains("window"), "{msg}");

    let (line, msg) = invalid(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: second}\n",
    );
    assert_eq!(line, 4, "{msg}");
    assert!(msg.contains("unlimited"), "{msg}");

    let (line, msg) = invalid("domain: d\ndescriptors:\n  - key: [unclosed\n");
    assert!(line >= 3, "{msg}");

    let (line, msg) = invalid("domain: \"\"\n");
    assert_eq!(line, 1, "{msg}");
    assert!(msg.contains("domain"), "{msg}");
}

#[test]
fn a_folder_loads_every_yaml_file_and_rejects_a_domain_twice() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
    write(
        "a.yaml",
        "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
    );
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    write(
        "sub/b.yml",
        "domain: b\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 2}\n",
    );
    write("notes.txt", "not yaml");
    write(".hidden.yaml", "garbage: [");
    let c = RateLimitConfig::load(dir.path()).unwrap();
    assert_eq!(c.domains(), vec!["a", "b"]);
    assert_eq!(c.files().len(), 2);

    write("c.yaml", "# again\ndomain: a\n");
    let err = RateLimitConfig::load(dir.path()).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, ConfigError::DuplicateDomain { line: 2, .. }),
        "{msg}"
    );
    assert!(msg.contains("c.yaml:2") && msg.contains("a.yaml"), "{msg}");

    let empty = tempfile::tempdir().unwrap();
    assert!(matches!(
        RateLimitConfig::load(empty.path()),
        Err(ConfigError::NoFiles { .. })
    ));
    let missing = RateLimitConfig::load(Path::new("/nonexistent/slidelog.yaml")).unwrap_err();
    assert!(missing.to_string().contains("/nonexistent/slidelog.yaml"));
}

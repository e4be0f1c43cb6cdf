//! The reference service's YAML config: parsing, the matching rules (exact
//! value, wildcard value, value-less key, nesting, depth), slidelog's
//! `window`, and errors that name the file, the line and the problem; then
//! one test per feature of the reference service (wildcards anywhere and
//! their precedence, `share_threshold`, `metadata` and `quota_mode`, metric
//! names and their bound, `requests_per_unit: 0`, `unlimited` without a
//! unit, null lists, scalar text, `unit_multiplier`, domain merging) and one
//! for its refusals, each with file, line and column.

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
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 10000001\n",
    );
    assert_eq!(line, 6, "{msg}");
    assert!(
        msg.contains("requests_per_unit") && msg.contains("10000000"),
        "{msg}"
    );

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
    assert!(msg.contains("cannot have empty domain"), "{msg}");
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
    assert!(
        msg.contains("c.yaml:2:9: duplicate domain \"a\"") && msg.contains("a.yaml"),
        "{msg}"
    );

    let empty = tempfile::tempdir().unwrap();
    assert!(matches!(
        RateLimitConfig::load(empty.path()),
        Err(ConfigError::NoFiles { .. })
    ));
    let missing = RateLimitConfig::load(Path::new("/nonexistent/slidelog.yaml")).unwrap_err();
    assert!(missing.to_string().contains("/nonexistent/slidelog.yaml"));
}

// ---- The reference service's config features, one test per row ----------

fn load(yaml: &str) -> RateLimitConfig {
    RateLimitConfig::from_yaml_str("ref.yaml", yaml).expect("the reference loads this")
}

/// `(requests_per_unit, window_ms)` of the rule that decides `entries`.
fn rule_of(c: &RateLimitConfig, domain: &str, entries: &[(&str, &str)]) -> Option<(u64, u64)> {
    c.find(domain, entries)
        .map(|r| (r.requests_per_unit(), r.window_ms()))
}

const WILDCARDS: &str = r#"
domain: wild
descriptors:
  - {key: trailing, value: foo*, rate_limit: {unit: minute, requests_per_unit: 1}}
  - {key: plain, value: foo, rate_limit: {unit: minute, requests_per_unit: 2}}
  - {key: middle, value: bar*b, rate_limit: {unit: minute, requests_per_unit: 3}}
  - {key: several, value: foo*bar*baz, rate_limit: {unit: minute, requests_per_unit: 4}}
  - {key: both, value: foo*bar*, rate_limit: {unit: minute, requests_per_unit: 5}}
  - {key: host, value: "*.example.com", rate_limit: {unit: minute, requests_per_unit: 6}}
"#;

#[test]
fn wildcards_match_at_any_position_any_number_of_times() {
    let c = load(WILDCARDS);
    let max = |k: &str, v: &str| rule_of(&c, "wild", &[(k, v)]).map(|(n, _)| n);
    assert_eq!(max("trailing", "foo"), Some(1));
    assert_eq!(max("trailing", "foobar"), Some(1));
    assert_eq!(max("trailing", "fo"), None);
    // A value without a star is exact, never a prefix.
    assert_eq!(max("plain", "foo"), Some(2));
    assert_eq!(max("plain", "foobar"), None);
    assert_eq!(max("middle", "barb"), Some(3));
    assert_eq!(max("middle", "bar/any/b"), Some(3));
    assert_eq!(max("middle", "bar/any/bx"), None);
    assert_eq!(max("several", "foobarbaz"), Some(4));
    assert_eq!(max("several", "foo-1-bar-2-baz"), Some(4));
    assert_eq!(max("several", "foo-baz-bar"), None);
    assert_eq!(max("both", "foobar"), Some(5));
    assert_eq!(max("both", "foo/x/bar/y"), Some(5));
    assert_eq!(max("both", "foo/x/ba"), None);
    assert_eq!(max("host", "api.example.com"), Some(6));
    assert_eq!(max("host", "example.com"), None);
    // The wildcard belongs to its key: another key's value never matches it.
    assert_eq!(max("other", "foobar"), None);
}

#[test]
fn precedence_is_exact_value_then_first_wildcard_then_value_less_key() {
    let c = load(
        r#"
domain: p
descriptors:
  - {key: k, rate_limit: {unit: second, requests_per_unit: 4}}
  - {key: k, value: a*, rate_limit: {unit: second, requests_per_unit: 2}}
  - {key: k, value: "*b", rate_limit: {unit: second, requests_per_unit: 3}}
  - {key: k, value: ab, rate_limit: {unit: second, requests_per_unit: 1}}
  - key: deep
    value: x
    descriptors:
      - key: leaf
        value: only
        rate_limit: {unit: second, requests_per_unit: 7}
  - key: deep
    descriptors:
      - key: leaf
        rate_limit: {unit: second, requests_per_unit: 8}
"#,
    );
    let max = |entries: &[(&str, &str)]| rule_of(&c, "p", entries).map(|(n, _)| n);
    assert_eq!(
        max(&[("k", "ab")]),
        Some(1),
        "exact wins over both wildcards"
    );
    assert_eq!(
        max(&[("k", "a-b")]),
        Some(2),
        "both match: the first in file order"
    );
    assert_eq!(max(&[("k", "zb")]), Some(3));
    assert_eq!(
        max(&[("k", "zz")]),
        Some(4),
        "no value matches: the value-less key"
    );
    assert_eq!(max(&[("k", "")]), Some(4));
    // A literal value equal to a pattern's text is that descriptor, exactly.
    assert_eq!(max(&[("k", "*b")]), Some(3));
    // The walk does not backtrack: `deep=x` matches exactly and its child
    // does not match `leaf=other`, so the value-less `deep` is not tried.
    assert_eq!(max(&[("deep", "x"), ("leaf", "only")]), Some(7));
    assert_eq!(max(&[("deep", "x"), ("leaf", "other")]), None);
    assert_eq!(max(&[("deep", "y"), ("leaf", "other")]), Some(8));
}

const SHARED: &str = r#"
domain: s
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: own
    value: own/*
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: path
    value: path/*
    share_threshold: true
    descriptors:
      - key: file
        value: file/*
        share_threshold: false
        descriptors:
          - key: type
            rate_limit: {unit: minute, requests_per_unit: 120}
  - key: mid
    value: /api*v1
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: file
    value: test1
    rate_limit: {unit: minute, requests_per_unit: 50}
  - key: file
    value: test*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 60}
"#;

#[test]
fn share_threshold_gives_every_matching_value_one_log() {
    let c = load(SHARED);
    let key = |entries: &[(&str, &str)]| c.find("s", entries).unwrap().store_key("s", entries);
    assert_eq!(key(&[("files", "files/a.pdf")]), "envoy:s:files=files/*");
    assert_eq!(key(&[("files", "files/b.csv")]), "envoy:s:files=files/*");
    // Without share_threshold, each value keeps its own log.
    assert_eq!(key(&[("own", "own/a")]), "envoy:s:own=own/a");
    // Only the levels that share write their pattern; a level under a
    // sharing parent without a limit of its own still shares.
    let nested = [("path", "path/x"), ("file", "file/1"), ("type", "pdf")];
    assert_eq!(key(&nested), "envoy:s:path=path/*:file=file/1:type=pdf");
    assert_eq!(
        key(&[("path", "path/y"), ("file", "file/1"), ("type", "pdf")]),
        "envoy:s:path=path/*:file=file/1:type=pdf"
    );
    assert_eq!(key(&[("mid", "/api/x/v1")]), "envoy:s:mid=/api*v1");
    // An exact value beside a sharing wildcard keeps its own rule and log.
    assert_eq!(rule_of(&c, "s", &[("file", "test1")]), Some((50, 60_000)));
    assert_eq!(key(&[("file", "test1")]), "envoy:s:file=test1");
    assert_eq!(key(&[("file", "test2")]), "envoy:s:file=test*");
}

#[test]
fn metadata_and_quota_mode_load_and_are_kept() {
    let c = load(
        r#"
domain: m
descriptors:
  - key: key1
    value: value1
    descriptors:
      - key: subkey1
        rate_limit: {unit: second, requests_per_unit: 5}
        metadata:
          name: service_1
  - key: key2
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 20}
    metadata:
      service_with_quota: {name: service_2, weight: 3}
"#,
    );
    let r = c
        .find("m", &[("key1", "value1"), ("subkey1", "x")])
        .unwrap();
    assert_eq!(
        r.metadata(),
        Some(&serde_json::json!({"name": "service_1"}))
    );
    assert!(!r.quota_mode());
    let r = c.find("m", &[("key2", "y")]).unwrap();
    assert!(r.quota_mode());
    assert_eq!(r.limit().unwrap().max(), 20);
    assert_eq!(
        r.metadata().unwrap()["service_with_quota"]["weight"],
        serde_json::json!(3)
    );
}

const METRICS: &str = r#"
domain: d
descriptors:
  - key: client
    detailed_metric: true
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: route
    value: api/*
    value_to_metric: true
    descriptors:
      - key: method
        rate_limit: {unit: minute, requests_per_unit: 60}
  - key: svc
    value: svc/*
    share_threshold: true
    descriptors:
      - key: endpoint
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 80}
  - key: tenant
    value_to_metric: true
    descriptors:
      - key: plan
        value: gold*
        rate_limit: {unit: minute, requests_per_unit: 9}
  - key: plain
    value: p*
    rate_limit: {unit: minute, requests_per_unit: 1}
"#;

#[test]
fn detailed_metric_and_value_to_metric_name_metrics_like_the_reference() {
    let c = load(METRICS);
    let name = |entries: &[(&str, &str)]| c.lookup("d", entries).unwrap().path().to_owned();
    // detailed_metric: the request's own values.
    assert_eq!(name(&[("client", "alice")]), "d.client_alice");
    // value_to_metric: that level's value in place of the configured one.
    assert_eq!(
        name(&[("route", "api/v1"), ("method", "GET")]),
        "d.route_api/v1.method"
    );
    // A sharing wildcard keeps its pattern, even with detailed_metric below.
    assert_eq!(
        name(&[("svc", "svc/a"), ("endpoint", "e1")]),
        "d.svc_svc/*.endpoint_e1"
    );
    assert_eq!(
        name(&[("tenant", "t9"), ("plan", "gold-x")]),
        "d.tenant_t9.plan_gold*"
    );
    // Without either flag: the configured path, as `find` reports it.
    assert_eq!(name(&[("plain", "p1")]), "d.plain_p*");
    let found = c.find("d", &[("client", "alice")]).unwrap();
    assert_eq!(found.path(), "d.client");
    assert_eq!(found.config_path(), "d.client");
}

#[test]
fn metric_names_are_bounded_per_rule() {
    use slidelog_envoy::config::rule::MAX_METRIC_KEYS_PER_RULE;
    let c = load(METRICS);
    for i in 0..MAX_METRIC_KEYS_PER_RULE {
        let v = format!("u{i}");
        assert_eq!(
            c.lookup("d", &[("client", v.as_str())]).unwrap().path(),
            format!("d.client_{v}")
        );
    }
    // The next new value is counted under the rule; known ones keep theirs.
    let over = c.lookup("d", &[("client", "one-too-many")]).unwrap();
    assert_eq!(over.path(), "d.client");
    assert_eq!(
        c.lookup("d", &[("client", "u7")]).unwrap().path(),
        "d.client_u7"
    );
    // The bound is per rule: another rule still names its values.
    assert_eq!(
        c.lookup("d", &[("route", "api/z"), ("method", "PUT")])
            .unwrap()
            .path(),
        "d.route_api/z.method"
    );
}

#[test]
fn requests_per_unit_zero_blocks_every_request() {
    let c = load(
        r#"
domain: b
descriptors:
  - key: blocked
    rate_limit: {unit: hour, requests_per_unit: 0}
  - key: unset
    rate_limit: {unit: second}
"#,
    );
    let r = c.find("b", &[("blocked", "x")]).unwrap();
    assert!(r.blocks_all() && !r.is_unlimited());
    assert!(r.limit().is_none());
    assert_eq!(
        (r.requests_per_unit(), r.unit(), r.window_ms()),
        (0, Unit::Hour, 3_600_000)
    );
    // The reference reads a missing requests_per_unit as 0.
    assert!(c.find("b", &[("unset", "y")]).unwrap().blocks_all());
}

#[test]
fn unlimited_beside_requests_per_unit_without_unit_loads() {
    let c = load(
        "domain: u\ndescriptors:\n  - key: k\n    rate_limit:\n      unlimited: true\n      requests_per_unit: 5\n",
    );
    let r = c.find("u", &[("k", "v")]).unwrap();
    assert!(r.is_unlimited() && r.limit().is_none() && !r.blocks_all());
    // With a valid unit it is refused, as in the reference.
    let (line, msg) = invalid(
        "domain: u\ndescriptors:\n  - key: k\n    rate_limit:\n      unlimited: true\n      unit: minute\n",
    );
    assert_eq!(line, 6, "{msg}");
    assert!(
        msg.contains("should not specify rate limit unit when unlimited"),
        "{msg}"
    );
}

#[test]
fn null_descriptors_and_null_lists_load() {
    let c = load("domain: empty\ndescriptors:\n");
    assert_eq!(c.domains(), vec!["empty"]);
    assert!(c.find("empty", &[("k", "v")]).is_none());
    let c = load(
        "domain: n\ndescriptors:\n  - key: k\n    descriptors:\n    rate_limit:\n      unit: second\n      requests_per_unit: 2\n      replaces:\n",
    );
    assert_eq!(rule_of(&c, "n", &[("k", "v")]), Some((2, 1000)));
    assert!(load("domain: only\n").has_domain("only"));
}

#[test]
fn scalar_keys_and_values_read_as_text() {
    let c = load(
        "domain: 42\ndescriptors:\n  - key: code\n    value: 404\n    rate_limit: {unit: second, requests_per_unit: 1}\n  - key: flag\n    value: true\n    rate_limit: {unit: second, requests_per_unit: 2}\n",
    );
    assert_eq!(rule_of(&c, "42", &[("code", "404")]), Some((1, 1000)));
    assert_eq!(rule_of(&c, "42", &[("flag", "true")]), Some((2, 1000)));
}

#[test]
fn unit_multiplier_multiplies_the_window() {
    let c = load(
        "domain: m\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 20, unit_multiplier: 5}\n",
    );
    let r = c.find("m", &[("k", "v")]).unwrap();
    assert_eq!((r.unit(), r.window_ms()), (Unit::Minute, 300_000));
    let (line, msg) = invalid(
        "domain: m\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: minute\n      requests_per_unit: 1\n      unit_multiplier: 0\n",
    );
    assert_eq!(line, 7, "{msg}");
    assert!(msg.contains("unit_multiplier must be at least 1"), "{msg}");
}

const MERGE_A: &str = "domain: shared\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n  - key: w\n    value: x*\n    rate_limit: {unit: second, requests_per_unit: 10}\n";
const MERGE_B: &str = "domain: shared\ndescriptors:\n  - key: b\n    rate_limit: {unit: minute, requests_per_unit: 2}\n  - key: w\n    value: \"*\"\n    rate_limit: {unit: second, requests_per_unit: 20}\n";

#[test]
fn domains_merge_when_asked_and_duplicate_keys_are_still_refused() {
    use slidelog_envoy::config::LoadOptions;
    let merge = LoadOptions {
        merge_domains: true,
    };
    let (a, b) = (Path::new("a.yaml"), Path::new("b.yaml"));
    let c = RateLimitConfig::from_yaml_docs(&[(a, MERGE_A), (b, MERGE_B)], &merge).unwrap();
    assert_eq!(c.domains(), vec!["shared"]);
    assert_eq!(rule_of(&c, "shared", &[("a", "1")]), Some((1, 1000)));
    assert_eq!(rule_of(&c, "shared", &[("b", "1")]), Some((2, 60_000)));
    // Wildcards keep load order across the merged files.
    assert_eq!(rule_of(&c, "shared", &[("w", "xy")]), Some((10, 1000)));
    assert_eq!(rule_of(&c, "shared", &[("w", "zz")]), Some((20, 1000)));

    let off =
        RateLimitConfig::from_yaml_docs(&[(a, MERGE_A), (b, MERGE_B)], &LoadOptions::default())
            .unwrap_err();
    assert!(
        matches!(off, ConfigError::DuplicateDomain { line: 1, .. }),
        "{off}"
    );
    assert!(off.to_string().contains("MERGE_DOMAIN_CONFIG"), "{off}");

    let again = "domain: shared\ndescriptors:\n  - key: a\n    rate_limit: {unit: hour, requests_per_unit: 3}\n";
    let err =
        RateLimitConfig::from_yaml_docs(&[(a, MERGE_A), (Path::new("c.yaml"), again)], &merge)
            .unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with("c.yaml:3:"), "{msg}");
    assert!(
        msg.contains("duplicate descriptor composite key 'shared.a'"),
        "{msg}"
    );

    // A folder loads the same way.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.yaml"), MERGE_A).unwrap();
    std::fs::write(dir.path().join("b.yaml"), MERGE_B).unwrap();
    let c = RateLimitConfig::load_with(dir.path(), &merge).unwrap();
    assert_eq!(c.files().len(), 2);
    assert!(RateLimitConfig::load_with(dir.path(), &LoadOptions::default()).is_err());
}

#[test]
fn refusals_match_the_reference_and_name_file_line_column() {
    let cases: &[(&str, u64, &str)] = &[
        ("descriptors:\n  - key: k\n", 1, "cannot have empty domain"),
        ("domain:\ndescriptors:\n", 1, "cannot have empty domain"),
        ("", 1, "cannot have empty domain"),
        (
            "domain: d\ndescriptors:\n  - key: k\n    value: v\n  - key: k\n    value: v\n",
            5,
            "duplicate descriptor composite key 'd.k_v'",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    value: a*\n  - key: k\n    value: a*\n",
            5,
            "duplicate descriptor composite key 'd.k_a*'",
        ),
        (
            "domain: d\ndescriptors:\n  - value: v\n",
            3,
            "descriptor has empty key",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: foo\n      requests_per_unit: 1\n",
            5,
            "invalid rate limit unit 'foo'",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      name: me\n      unit: second\n      requests_per_unit: 1\n      replaces:\n        - name: me\n",
            9,
            "replaces should not contain name of same descriptor",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      replaces:\n        - name: \"\"\n",
            8,
            "should not have an empty replaces entry",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      replaces:\n        - {}\n",
            8,
            "should not have an empty replaces entry",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    ratelimit:\n      unit: second\n",
            4,
            "ratelimit",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requestsperunit: 5\n",
            6,
            "requestsperunit",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    value: plain\n    share_threshold: true\n",
            5,
            "share_threshold can only be used with wildcard values",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    share_threshold: true\n",
            4,
            "share_threshold can only be used with wildcard values",
        ),
        ("domain: d\ndescriptors:\n  - a\n", 3, ""),
        ("domain: d\n0.25: x\n", 2, "0.25"),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: -1\n",
            6,
            "expected a whole number, 0 or more, got -1",
        ),
    ];
    for (yaml, line, needle) in cases {
        let (got, msg) = invalid(yaml);
        assert_eq!(got, *line, "{yaml:?}: {msg}");
        assert!(msg.contains(needle), "{yaml:?}: {msg}");
        let column = msg.split(':').nth(2).unwrap();
        assert!(column.parse::<u64>().unwrap() >= 1, "{msg}");
        // The place is said once, in front.
        assert!(!msg.contains(" column "), "{msg}");
    }
}

#[test]
fn charge_is_read_on_limits_and_refused_beside_unlimited() {
    let c = load(
        "domain: d\ndescriptors:\n  - key: model\n    rate_limit: {unit: minute, requests_per_unit: 1000, charge: true}\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 5}\n",
    );
    assert!(c.find("d", &[("model", "m")]).unwrap().charge());
    assert!(!c.find("d", &[("user", "u")]).unwrap().charge());
    let (line, msg) = invalid(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unlimited: true\n      charge: true\n",
    );
    assert_eq!(line, 6, "{msg}");
    assert!(msg.contains("charge needs a limit"), "{msg}");
}

#[test]
fn granularity_is_read_on_limits_and_must_divide_the_window() {
    let c = load(
        "domain: d\ndescriptors:\n  - key: user\n    rate_limit: {unit: day, requests_per_unit: 100000, granularity: 1m}\n  - key: ip\n    rate_limit: {unit: second, requests_per_unit: 10}\n",
    );
    let day = c.find("d", &[("user", "u")]).unwrap().limit().unwrap();
    assert_eq!(day.granularity_ms(), 60_000);
    let second = c.find("d", &[("ip", "i")]).unwrap().limit().unwrap();
    assert_eq!(second.granularity_ms(), 1);
    let (line, msg) = invalid(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 3\n      granularity: 300ms\n",
    );
    assert_eq!(line, 7, "{msg}");
    assert!(msg.contains("granularity_ms"), "{msg}");
    assert!(msg.contains("1000"), "{msg}");
}

//! The shipped Grafana dashboard (`deploy/grafana/slidelog.json`) and
//! Prometheus alert rules (`deploy/prometheus/alerts.yml`) parse, are well
//! formed, and name only metrics that slidelog exports ([`names::all`]).

use serde::Deserialize;
use serde_json::Value;
use slidelog_inspect::names;
use std::collections::{BTreeMap, HashSet};

fn deploy(path: &str) -> String {
    let file = format!("{}/../../deploy/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// Asserts every `slidelog_…` name in `exprs` is exported; returns the names.
fn check_names<'a>(exprs: impl IntoIterator<Item = &'a str>) -> HashSet<String> {
    let known: HashSet<&str> = names::all().into_iter().collect();
    let mut used = HashSet::new();
    for expr in exprs {
        for name in names::mentioned(expr) {
            let base = names::base_name(&name).to_owned();
            assert!(
                known.contains(base.as_str()),
                "{name} in {expr:?} is not exported"
            );
            used.insert(base);
        }
    }
    used
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    groups: Vec<Group>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Group {
    name: String,
    rules: Vec<Rule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Rule {
    alert: String,
    expr: String,
    #[serde(rename = "for")]
    for_: Option<String>,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
}

#[test]
fn alert_rules_parse_and_use_exported_metrics() {
    let file: RuleFile = serde_saphyr::from_str(&deploy("prometheus/alerts.yml")).unwrap();
    assert_eq!(file.groups.len(), 1);
    assert_eq!(file.groups[0].name, "slidelog");
    let rules = &file.groups[0].rules;
    let mut alerts = HashSet::new();
    for r in rules {
        assert!(
            alerts.insert(r.alert.as_str()),
            "duplicate alert {}",
            r.alert
        );
        assert!(!r.expr.trim().is_empty(), "{}", r.alert);
        assert!(
            ["critical", "warning", "info"].contains(&r.labels["severity"].as_str()),
            "{}",
            r.alert
        );
        assert!(r.annotations.contains_key("summary"), "{}", r.alert);
        if let Some(f) = &r.for_ {
            humantime_like(f);
        }
    }
    let used = check_names(rules.iter().map(|r| r.expr.as_str()));
    // The four alerts the issue asks for.
    for name in [
        names::INSPECT_MAX_ZCARD,
        names::INSPECT_LIMIT_MAX,
        names::INSPECT_PROBLEM_KEYS,
        names::STORE_ERRORS_TOTAL,
        names::DEGRADED_DECISIONS_TOTAL,
    ] {
        assert!(used.contains(name), "no alert uses {name}");
    }
    let max_rule = rules
        .iter()
        .find(|r| r.alert == "SlidelogSortedSetAboveTwiceMax")
        .unwrap();
    assert_eq!(
        max_rule.expr,
        "slidelog_inspect_max_zcard > 2 * slidelog_inspect_limit_max"
    );
    assert!(rules.iter().any(|r| r.expr.contains(r#"kind="no_ttl""#)));
}

/// Prometheus durations: digits followed by a unit (`5m`, `1h`, `30s`).
fn humantime_like(text: &str) {
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &text[digits.len()..];
    assert!(
        !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
            && ["ms", "s", "m", "h", "d", "w", "y"].contains(&unit),
        "bad duration {text:?}"
    );
}

#[test]
fn dashboard_parses_and_uses_exported_metrics() {
    let dash: Value = serde_json::from_str(&deploy("grafana/slidelog.json")).unwrap();
    assert_eq!(dash["title"], "slidelog");
    assert!(dash["uid"].as_str().is_some_and(|u| !u.is_empty()));
    let panels = dash["panels"].as_array().unwrap();
    let mut ids = HashSet::new();
    let mut exprs = Vec::new();
    for p in panels {
        assert!(ids.insert(p["id"].as_u64().unwrap()), "duplicate panel id");
        assert!(p["title"].as_str().is_some_and(|t| !t.is_empty()));
        let pos = &p["gridPos"];
        assert!(pos["x"].as_u64().unwrap() + pos["w"].as_u64().unwrap() <= 24);
        if p["type"] == "row" {
            continue;
        }
        let targets = p["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "panel {} has no query", p["title"]);
        for t in targets {
            exprs.push(t["expr"].as_str().unwrap().to_owned());
        }
    }
    let templating = dash["templating"]["list"].as_array().unwrap();
    for v in templating {
        if let Some(q) = v["definition"].as_str() {
            exprs.push(q.to_owned());
        }
    }
    let used = check_names(exprs.iter().map(String::as_str));
    // The figures docs/design.md §7 asks for are on the dashboard.
    for name in [
        names::INSPECT_KEYS,
        names::INSPECT_ZCARD_KEYS,
        names::INSPECT_MAX_ZCARD,
        names::INSPECT_MEMORY_PER_KEY_BYTES,
        names::DECISIONS_TOTAL,
        names::STORE_ERRORS_TOTAL,
        names::DEGRADED_DECISIONS_TOTAL,
        names::DECISION_DURATION_SECONDS,
    ] {
        assert!(used.contains(name), "the dashboard does not show {name}");
    }
}

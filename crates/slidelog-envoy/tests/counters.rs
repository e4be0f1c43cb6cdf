//! The Envoy API's counters: every answer is counted in
//! `slidelog_envoy_decisions_total` (a `requests_per_unit: 0` rule's too,
//! which the store never sees), a descriptor that matches no rule in
//! `slidelog_envoy_unmatched_total` by domain, and both have a `# HELP`.

mod common;

use common::{descriptor, request};
use metrics_exporter_prometheus::PrometheusBuilder;
use slidelog_envoy::{ConfigHandle, RateLimitConfig, RateLimiter, ServiceOptions};
use std::sync::Arc;

const CONFIG: &str = r#"
domain: api
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: banned
    rate_limit: {unit: minute, requests_per_unit: 0}
"#;

#[tokio::test]
async fn every_answer_and_every_unmatched_descriptor_is_counted() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let config = RateLimitConfig::from_yaml_str("test.yaml", CONFIG).unwrap();
    let service = RateLimiter::new(
        slidelog::Limiter::memory(),
        ConfigHandle::fixed(config),
        ServiceOptions::default(),
    )
    .with_recorder(Arc::new(recorder));
    let ask = |domain: &'static str, entries: &'static [(&'static str, &'static str)]| {
        let service = &service;
        async move {
            service
                .should_rate_limit(&request(domain, vec![descriptor(entries)]))
                .await
                .unwrap()
        }
    };
    ask("api", &[("user", "a")]).await;
    for _ in 0..2 {
        ask("api", &[("banned", "x")]).await;
    }
    // A typo in the key, and one in the domain: OK, not limited, counted.
    ask("api", &[("usr", "a")]).await;
    ask("apj", &[("user", "a")]).await;
    let text = handle.render();
    let line = |needle: &str| {
        text.lines()
            .find(|l| !l.starts_with('#') && l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle} in\n{text}"))
            .to_owned()
    };
    assert!(line(r#"result="ok""#).ends_with(" 1"), "{text}");
    let banned = line(r#"result="over_limit""#);
    assert!(
        banned.contains("banned") && banned.ends_with(" 2"),
        "{text}"
    );
    assert!(
        line(r#"slidelog_envoy_unmatched_total{domain="api"}"#).ends_with(" 1"),
        "{text}"
    );
    assert!(
        line(r#"slidelog_envoy_unmatched_total{domain="(unconfigured)"}"#).ends_with(" 1"),
        "{text}"
    );
    for name in [
        "slidelog_envoy_decisions_total",
        "slidelog_envoy_unmatched_total",
    ] {
        assert!(text.contains(&format!("# HELP {name} ")), "{name}: {text}");
    }
}

/// The handles a rule keeps are its first recorder's: a second service over
/// the same config, with its own recorder, still counts in its own; and a
/// rule renamed per value (`detailed_metric`) counts every request of a
/// value under that value's name.
#[tokio::test]
async fn handles_kept_by_rules_count_in_each_service_own_recorder() {
    let config = ConfigHandle::fixed(
        RateLimitConfig::from_yaml_str(
            "test.yaml",
            "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 3}\n  - key: client\n    detailed_metric: true\n    rate_limit: {unit: minute, requests_per_unit: 5}\n",
        )
        .unwrap(),
    );
    let service = |recorder: metrics_exporter_prometheus::PrometheusRecorder| {
        RateLimiter::new(
            slidelog::Limiter::memory(),
            Arc::clone(&config),
            ServiceOptions::default(),
        )
        .with_recorder(Arc::new(recorder))
    };
    let (first, second) = (
        PrometheusBuilder::new().build_recorder(),
        PrometheusBuilder::new().build_recorder(),
    );
    let (first_text, second_text) = (first.handle(), second.handle());
    let (a, b) = (service(first), service(second));
    for (service, times) in [(&a, 2), (&b, 3)] {
        for _ in 0..times {
            for entries in [
                &[("user", "u")][..],
                &[("client", "c1")],
                &[("nobody", "x")],
            ] {
                service
                    .should_rate_limit(&request("api", vec![descriptor(entries)]))
                    .await
                    .unwrap();
            }
        }
    }
    for (text, times) in [(first_text.render(), 2), (second_text.render(), 3)] {
        for needle in [
            r#"rule="api.user",result="ok"} "#,
            r#"rule="api.client_c1",result="ok"} "#,
            r#"slidelog_envoy_unmatched_total{domain="api"} "#,
        ] {
            let line = text
                .lines()
                .find(|l| l.contains(needle))
                .unwrap_or_else(|| panic!("no {needle} in\n{text}"));
            assert!(line.ends_with(&format!(" {times}")), "{line}\n{text}");
        }
    }
}

/// A client's limit override names its metric from the client's own
/// entries (as the reference does): the first 1,000 names of a domain are
/// kept, every further one is counted under `<domain>.(override)`, so 5,000
/// distinct values export 1,001 series, and every answer is counted once.
#[tokio::test]
async fn override_names_are_bounded_per_domain_and_every_answer_is_counted() {
    use slidelog_envoy::config::rule::{MAX_METRIC_KEYS_PER_RULE, OVERRIDE_OVERFLOW};
    use slidelog_envoy::proto::{RateLimitUnit, rate_limit_descriptor::RateLimitOverride};
    const DISTINCT: usize = 5_000;
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let config = RateLimitConfig::from_yaml_str("test.yaml", CONFIG).unwrap();
    let service = RateLimiter::new(
        slidelog::Limiter::memory(),
        ConfigHandle::fixed(config),
        ServiceOptions::default(),
    )
    .with_recorder(Arc::new(recorder));
    let ask = |value: String| {
        let mut d = descriptor(&[("tenant", &value)]);
        d.limit = Some(RateLimitOverride {
            requests_per_unit: 2,
            unit: RateLimitUnit::Minute as i32,
        });
        let req = request("api", vec![d]);
        let service = &service;
        async move { service.should_rate_limit(&req).await.unwrap().overall_code }
    };
    for i in 0..DISTINCT {
        ask(format!("t{i}")).await;
    }
    // Again, a name kept (t0) and one past the budget (t4999): 3 answers
    // each, the last two over the override's limit of 2.
    for value in ["t0", "t4999"] {
        for _ in 0..3 {
            ask(value.to_owned()).await;
        }
    }
    let text = handle.render();
    let series: Vec<(&str, u64)> = text
        .lines()
        .filter(|l| l.starts_with("slidelog_envoy_decisions_total{"))
        .map(|l| {
            let (labels, n) = l.rsplit_once(' ').unwrap();
            (labels, n.parse().unwrap())
        })
        .collect();
    let overflow = format!(r#"rule="api.{OVERRIDE_OVERFLOW}""#);
    let named = series.iter().filter(|(l, _)| !l.contains(&overflow));
    let rules: std::collections::HashSet<&str> = named
        .map(|(l, _)| {
            let rule = l.split(r#"rule=""#).nth(1).unwrap();
            rule.split('"').next().unwrap()
        })
        .collect();
    assert_eq!(rules.len(), MAX_METRIC_KEYS_PER_RULE, "{text}");
    assert!(
        series.len() <= 2 * (MAX_METRIC_KEYS_PER_RULE + 1),
        "{}",
        series.len()
    );
    let total: u64 = series.iter().map(|(_, n)| n).sum();
    assert_eq!(total, DISTINCT as u64 + 6, "every answer counted once");
    let count = |needle: &str| {
        series
            .iter()
            .find(|(l, _)| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle} in\n{text}"))
            .1
    };
    assert_eq!(count(r#"rule="api.tenant_t0",result="ok""#), 2);
    assert_eq!(count(r#"rule="api.tenant_t0",result="over_limit""#), 2);
    let overflow_ok = format!(r#"rule="api.{OVERRIDE_OVERFLOW}",result="ok""#);
    assert_eq!(
        count(&overflow_ok),
        (DISTINCT - MAX_METRIC_KEYS_PER_RULE) as u64 + 1
    );
    let overflow_over = format!(r#"rule="api.{OVERRIDE_OVERFLOW}",result="over_limit""#);
    assert_eq!(count(&overflow_over), 2);
}

/// The override-name budget is the domain's, not one config's: a reload
/// (here by hand, as SIGHUP and the file watcher do it) hands the names
/// given out, and the overflow, on to the new config, so reloading does not
/// let a client add another 1,000 series. A name kept before the reload is
/// still counted under its own name after it.
#[tokio::test]
async fn override_names_budget_survives_reloads() {
    use slidelog_envoy::config::rule::{MAX_METRIC_KEYS_PER_RULE, OVERRIDE_OVERFLOW};
    use slidelog_envoy::proto::{RateLimitUnit, rate_limit_descriptor::RateLimitOverride};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("limits.yaml");
    std::fs::write(&path, CONFIG).unwrap();
    let config = ConfigHandle::load(&path).unwrap();
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let service = RateLimiter::new(
        slidelog::Limiter::memory(),
        Arc::clone(&config),
        ServiceOptions::default(),
    )
    .with_recorder(Arc::new(recorder));
    let ask = |value: String| {
        let mut d = descriptor(&[("tenant", &value)]);
        d.limit = Some(RateLimitOverride {
            requests_per_unit: 100,
            unit: RateLimitUnit::Minute as i32,
        });
        let req = request("api", vec![d]);
        let service = &service;
        async move { service.should_rate_limit(&req).await.unwrap().overall_code }
    };
    // The whole budget, in the first config.
    for i in 0..MAX_METRIC_KEYS_PER_RULE {
        ask(format!("t{i}")).await;
    }
    // Three reloads, each followed by as many new names again and one
    // kept name: every new one is counted under the overflow name.
    for reload in 1..=3 {
        // A real change (the user limit), so the reload builds a new config.
        let edited = CONFIG.replace(
            "requests_per_unit: 3}",
            &format!("requests_per_unit: {}}}", 3 + reload),
        );
        std::fs::write(&path, edited).unwrap();
        config.reload().unwrap();
        assert_eq!(config.reload_count(), reload);
        for i in 0..MAX_METRIC_KEYS_PER_RULE {
            ask(format!("r{reload}-{i}")).await;
        }
        ask("t0".to_owned()).await;
    }
    let text = handle.render();
    let rules: std::collections::HashSet<&str> = text
        .lines()
        .filter(|l| l.starts_with("slidelog_envoy_decisions_total{"))
        .map(|l| {
            let rule = l.split(r#"rule=""#).nth(1).unwrap();
            rule.split('"').next().unwrap()
        })
        .collect();
    let overflow = format!("api.{OVERRIDE_OVERFLOW}");
    assert_eq!(rules.len(), MAX_METRIC_KEYS_PER_RULE + 1, "names exported");
    assert!(rules.contains(overflow.as_str()));
    assert!(
        !rules.iter().any(|r| r.starts_with("api.tenant_r")),
        "no name given out after a reload"
    );
    let count = |needle: &str| {
        let line = text
            .lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle} in\n{text}"));
        line.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap()
    };
    assert_eq!(count(r#"rule="api.tenant_t0",result="ok""#), 4);
    assert_eq!(
        count(&format!(r#"rule="{overflow}",result="ok""#)),
        3 * MAX_METRIC_KEYS_PER_RULE as u64
    );
}

//! [`export::record`] turns a real report into Prometheus gauges: every
//! inspect metric appears with the report's values, the ZCARD buckets are
//! cumulative, and every problem kind has a series.

use metrics_exporter_prometheus::PrometheusBuilder;
use slidelog_inspect::{InspectOptions, ProblemKind, export, inspect, names};
use slidelog_testkit::{RedisServer, unique_prefix};

fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("{series} not in\n{text}"))
}

#[tokio::test]
async fn a_report_becomes_gauges() {
    let server = RedisServer::start();
    let mut conn = server.client();
    let p = unique_prefix("export");
    for (key, n) in [("a", 1u64), ("b", 5), ("c", 50)] {
        let mut cmd = redis::cmd("ZADD");
        cmd.arg(format!("{p}{key}"));
        for i in 0..n {
            cmd.arg(1_764_400_000_000u64 + i)
                .arg(format!("01JDQ3W7ZK{i:04}ABCDEFGHJKMN"));
        }
        cmd.exec(&mut conn).unwrap();
    }
    let options = InspectOptions {
        pattern: format!("{p}*"),
        max: Some(20),
        ..InspectOptions::default()
    };
    let report = inspect(&server.url(), &options, None).await.unwrap();

    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    metrics::with_local_recorder(&recorder, || {
        export::describe();
        export::record(&report);
        export::record_failure();
    });
    let text = handle.render();
    for name in names::INSPECT {
        assert!(
            text.lines().any(|l| l.starts_with(name)),
            "{name} missing from\n{text}"
        );
    }
    assert_eq!(value(&text, names::INSPECT_KEYS), 3.0);
    assert_eq!(value(&text, names::INSPECT_RECORDS), 56.0);
    assert_eq!(value(&text, names::INSPECT_MAX_ZCARD), 50.0);
    assert_eq!(value(&text, names::INSPECT_LIMIT_MAX), 20.0);
    assert_eq!(value(&text, names::INSPECT_NODES), 1.0);
    let bucket = |le: &str| {
        value(
            &text,
            &format!("{}{{le=\"{le}\"}}", names::INSPECT_ZCARD_KEYS),
        )
    };
    assert_eq!(bucket("1"), 1.0);
    assert_eq!(bucket("10"), 2.0);
    assert_eq!(bucket("100"), 3.0);
    assert_eq!(bucket("+Inf"), 3.0);
    let problem = |kind: ProblemKind| {
        value(
            &text,
            &format!(
                "{}{{kind=\"{}\"}}",
                names::INSPECT_PROBLEM_KEYS,
                kind.as_str()
            ),
        )
    };
    assert_eq!(problem(ProblemKind::NoTtl), 3.0);
    assert_eq!(problem(ProblemKind::Oversized), 1.0);
    assert_eq!(problem(ProblemKind::WrongType), 0.0);
    assert_eq!(value(&text, names::INSPECT_SCAN_ERRORS_TOTAL), 1.0);
}

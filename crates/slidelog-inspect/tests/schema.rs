//! The `--json` report keeps its documented schema: every field a real report
//! serializes is listed in `SCHEMA.md`, every problem kind is documented, and
//! a report survives a JSON round trip unchanged.

use serde_json::Value;
use slidelog_inspect::{InspectOptions, ProblemKind, Report, SCHEMA_VERSION, inspect};
use slidelog_testkit::{RedisServer, unique_prefix};

/// Every field path in `v`: `a.b`, `list[].c`.
fn paths(v: &Value, prefix: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                out.push(path.clone());
                paths(child, &path, out);
            }
        }
        Value::Array(items) => {
            for item in items {
                paths(item, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

#[tokio::test]
async fn every_json_field_is_documented_and_round_trips() {
    let server = RedisServer::start();
    let mut conn = server.client();
    let p = unique_prefix("schema");
    // One key with a problem so that every list has an element.
    redis::cmd("ZADD")
        .arg(format!("{p}k"))
        .arg(1_700_000_000_000u64)
        .arg("1700000000000")
        .exec(&mut conn)
        .unwrap();
    let options = InspectOptions {
        pattern: format!("{p}*"),
        max: Some(1),
        max_source: Some("--max".into()),
        ..InspectOptions::default()
    };
    let report = inspect(&server.url(), &options, None).await.unwrap();
    assert_eq!(report.schema_version, SCHEMA_VERSION);
    assert_eq!(SCHEMA_VERSION, 1);

    let json = serde_json::to_value(&report).unwrap();
    let mut found = Vec::new();
    paths(&json, "", &mut found);
    found.sort();
    found.dedup();
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/SCHEMA.md")).unwrap();
    let missing: Vec<_> = found
        .iter()
        .filter(|path| !doc.contains(&format!("`{path}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "fields missing from SCHEMA.md: {missing:?}"
    );
    for kind in ProblemKind::ALL {
        assert!(
            doc.contains(&format!("| `{}` |", kind.as_str())),
            "{kind:?}"
        );
    }
    let kinds: Vec<_> = json["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["kind"].as_str().unwrap().to_owned())
        .collect();
    let all: Vec<_> = ProblemKind::ALL
        .iter()
        .map(|k| k.as_str().to_owned())
        .collect();
    assert_eq!(kinds, all);

    let back: Report = serde_json::from_value(json).unwrap();
    assert_eq!(back, report);
}

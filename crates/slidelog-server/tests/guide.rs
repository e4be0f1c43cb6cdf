//! The guide's pages (docs/guide/*.md) run as written: every shell example
//! of each page through the page runner of `common::pages` (a real
//! `slidelog serve`, a real `redis-server` the runner starts, the JSON a
//! page shows compared field by field). Envoy's page runs through
//! `POST /json` (there is no Envoy binary here). The operations page's
//! metrics table names exactly the metrics the code registers, and every
//! family a server exports after the Envoy page's examples.

mod common;

use common::pages;
use std::process::Command;

#[test]
fn the_http_page_runs_as_written() {
    let ran = pages::run(
        "docs/guide/http.md",
        &[(
            "redis://:pw@10.0.0.5:6379/0",
            "a Redis on another machine (the flags are tested in http_binary.rs)",
        )],
    );
    assert!(ran.server.is_some(), "the page starts a server");
    assert!(ran.ran >= 10, "only {} commands ran", ran.ran);
    assert!(ran.compared >= 3, "only {} outputs compared", ran.compared);
}

#[test]
fn the_stores_page_runs_as_written() {
    let ran = pages::run(
        "docs/guide/stores.md",
        &[
            (
                "rediss://host:6380",
                "a TLS Redis on another host (TLS is tested in slidelog-redis/tests/auth_tls.rs)",
            ),
            (
                "redis+cluster://10.0.0.1:7000",
                "a Redis Cluster on other machines (tested on a local cluster in slidelog-redis)",
            ),
            (
                "redis+sentinel://10.0.0.1:26379",
                "a Sentinel group on other machines (tested on a local group in slidelog-redis)",
            ),
            (
                "redis://127.0.0.1:6379?engine=module",
                "needs a Redis started with --loadmodule (tested in slidelog-redis/tests/module_engine.rs and engine_module.rs)",
            ),
        ],
    );
    assert!(ran.ran >= 6, "only {} commands ran", ran.ran);
}

#[test]
fn the_operations_page_runs_as_written() {
    let ran = pages::run(
        "docs/guide/operations.md",
        &[(
            "redis+cluster://10.0.0.1:7000",
            "a Redis Cluster on other machines (inspect on a local cluster: inspect_cli.rs)",
        )],
    );
    assert!(ran.ran >= 1, "only {} commands ran", ran.ran);
}

#[test]
fn the_envoy_page_runs_and_the_metrics_table_is_exact() {
    let ran = pages::run(
        "docs/guide/envoy.md",
        &[(
            "--config /etc/ratelimit/config/",
            "an Envoy config folder on a production host and a Redis elsewhere",
        )],
    );
    assert!(ran.compared >= 1, "only {} outputs compared", ran.compared);
    let server = ran.server.expect("the Envoy page starts a server");
    let metrics = Command::new("curl")
        .args(["-s", &format!("{}/metrics", server.addr)])
        .output()
        .unwrap();
    let metrics = String::from_utf8_lossy(&metrics.stdout);
    let exported: std::collections::BTreeSet<String> = metrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .map(str::to_owned)
        .collect();
    assert!(
        exported.contains("slidelog_envoy_decisions_total"),
        "the examples ask the Envoy API: {metrics}"
    );
    let documented = documented_metrics(&pages::text("docs/guide/operations.md"));
    let undocumented: Vec<_> = exported.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "exported but not in the operations page's metrics table: {undocumented:?}"
    );
    let registered = registered_metrics();
    let stale: Vec<_> = documented.difference(&registered).collect();
    assert!(
        stale.is_empty(),
        "in the metrics table but not in the code: {stale:?}"
    );
    let unlisted: Vec<_> = registered.difference(&documented).collect();
    assert!(
        unlisted.is_empty(),
        "registered in the code but not in the metrics table: {unlisted:?}"
    );
}

#[test]
fn every_guide_page_is_run_by_a_test_and_linked_from_the_readme() {
    let readme = pages::text("README.md");
    let this = pages::text("crates/slidelog-server/tests/guide.rs");
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/guide");
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let page = format!("docs/guide/{name}");
        assert!(
            readme.contains(&format!("]({page})")),
            "README links {page}"
        );
        let has_shell = pages::text(&page).contains("```sh");
        assert!(
            !has_shell || this.contains(&format!("\"{page}\"")),
            "{page} has shell examples: run it in guide.rs"
        );
    }
}

/// Every `slidelog_*` name in the page's metrics table.
fn documented_metrics(readme: &str) -> std::collections::BTreeSet<String> {
    let section = readme
        .split("## Metrics (`GET /metrics`)")
        .nth(1)
        .expect("the operations page has a metrics section");
    let section = section.split("\n#").next().unwrap_or(section);
    section
        .lines()
        .filter(|l| l.starts_with("| `slidelog_"))
        .flat_map(|l| {
            let first_cell = l.split(" | ").next().unwrap_or("");
            first_cell
                .split('`')
                .filter(|w| w.starts_with("slidelog_"))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Every `"slidelog_*"` string the crates' sources register.
fn registered_metrics() -> std::collections::BTreeSet<String> {
    fn walk(dir: &std::path::Path, out: &mut std::collections::BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                for piece in text.split("\"slidelog_").skip(1) {
                    let name: String = piece
                        .chars()
                        .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                        .collect();
                    if !name.is_empty()
                        && piece[name.len()..].starts_with('"')
                        && !name.ends_with("_bucket")
                    {
                        out.insert(format!("slidelog_{name}"));
                    }
                }
            }
        }
    }
    let crates = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let mut out = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(crates).unwrap().flatten() {
        let src = entry.path().join("src");
        if src.is_dir() {
            walk(&src, &mut out);
        }
    }
    out
}

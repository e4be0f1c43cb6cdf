//! The README's shell examples run as written. Every command line of every
//! ```sh block runs, in order, through `sh` with the built `slidelog` first
//! on `PATH`, in a temp dir that holds the README's `yaml` config as
//! `limits.yaml`:
//!
//! - `slidelog serve …` starts in the background (replacing the previous
//!   one) and is ready once it logs its address; the `curl`s that follow
//!   talk to it. So that the test can run beside other programs, it binds
//!   port 0 instead of 8080/8081 (`--http 127.0.0.1:0 --grpc 127.0.0.1:0`
//!   are added unless the line gives them) and `localhost:8080` in a later
//!   line becomes its address.
//! - `127.0.0.1:6379` becomes a `redis-server` this test started (with the
//!   README's `user:pass` ACL user), never a Redis already on the machine.
//! - `slidelog check` and `inspect` must exit 0 or 1 (2 is an error), every
//!   other command 0; a `# {…}` or `# 200 {…}` comment after a command is
//!   its expected JSON output, compared exactly: the same fields with the
//!   same values in the same order (whitespace aside).
//! - The metrics table names exactly the metrics the code exports: every
//!   family that the last server's `/metrics` shows after the examples is in
//!   the table, and every name in the table is one the code registers.
//!
//! Only the lines of [`NOT_RUN`] are skipped, each for its stated reason;
//! an entry that matches no line fails the test, so the list cannot go
//! stale.

mod common;

use common::child;

use slidelog_testkit::{RedisServer, tools};
use std::process::Command;

/// Lines that are not run: (a substring that identifies the line, why).
const NOT_RUN: &[(&str, &str)] = &[
    (
        "cargo run --release -p slidelog-server -- serve",
        "builds the release binary; the test runs the same `slidelog serve` (debug build) below",
    ),
    (
        "./scripts/test.sh",
        "the test command, which runs this test",
    ),
    (
        "cargo install --path crates/slidelog-server --locked",
        "installs into ~/.cargo/bin; the test puts the built binary first on PATH instead",
    ),
    (
        "redis://:pw@10.0.0.5:6379/0",
        "a Redis on another machine (the flags are tested in http_binary.rs)",
    ),
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
    (
        "--config /etc/ratelimit/config/",
        "an Envoy config folder on a production host and a Redis elsewhere",
    ),
];

/// The README's ```sh command lines (continuations joined) with the
/// comment lines that follow each, and its first ```yaml block.
struct Readme {
    commands: Vec<(String, Vec<String>)>,
    yaml: String,
}

fn readme() -> Readme {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
    let text = std::fs::read_to_string(path).unwrap();
    let mut commands: Vec<(String, Vec<String>)> = Vec::new();
    let mut yaml = None;
    let mut fence: Option<String> = None;
    let mut pending = String::new();
    let mut yaml_text = String::new();
    for line in text.lines() {
        match &fence {
            None => {
                if let Some(lang) = line.strip_prefix("```") {
                    fence = Some(lang.trim().to_owned());
                }
            }
            Some(lang) if line.starts_with("```") => {
                if lang == "yaml" && yaml.is_none() {
                    yaml = Some(std::mem::take(&mut yaml_text));
                }
                fence = None;
            }
            Some(lang) if lang == "yaml" => {
                yaml_text.push_str(line);
                yaml_text.push('\n');
            }
            Some(lang) if lang == "sh" => {
                let trimmed = line.trim();
                if !pending.is_empty() {
                    pending.push(' ');
                    pending.push_str(trimmed.trim_end_matches('\\').trim());
                    if !trimmed.ends_with('\\') {
                        commands.push((std::mem::take(&mut pending), Vec::new()));
                    }
                } else if trimmed.starts_with('#') {
                    if let Some((_, comments)) = commands.last_mut() {
                        comments.push(trimmed.to_owned());
                    }
                } else if trimmed.ends_with('\\') {
                    pending = trimmed.trim_end_matches('\\').trim().to_owned();
                } else if !trimmed.is_empty() {
                    commands.push((trimmed.to_owned(), Vec::new()));
                }
            }
            Some(_) => {}
        }
    }
    Readme {
        commands,
        yaml: yaml.expect("the README has a yaml config block"),
    }
}

/// The JSON a comment says the command prints: `# {…}` or `# 200 {…}`
/// on the next line, or a trailing `# {…}` on the command line itself.
fn expected_json(command: &str, comments: &[String]) -> Option<serde_json::Value> {
    let from_comment = |c: &str| -> Option<serde_json::Value> {
        let rest = c.strip_prefix('#')?.trim();
        let rest = rest.strip_prefix("200 ").unwrap_or(rest);
        rest.starts_with('{')
            .then(|| serde_json::from_str(rest).unwrap_or_else(|e| panic!("{c}: {e}")))
    };
    if let Some(i) = command.find("# {") {
        return from_comment(&command[i..]);
    }
    comments.first().and_then(|c| from_comment(c))
}

/// JSON text without the whitespace outside its strings: two texts are
/// equal field by field, in order, when these are equal.
/// An admitted check's `"receipt"` names its record, so it differs on every
/// run (docs/design.md §4.6): the README shows each (one per check of a
/// joint answer) as `"…"`.
fn mask_receipt(text: &str) -> String {
    const FIELD: &str = "\"receipt\":\"";
    let (mut out, mut rest) = (String::new(), text);
    while let Some(start) = rest.find(FIELD).map(|at| at + FIELD.len()) {
        let Some(len) = rest[start..].find('"') else {
            break;
        };
        out.push_str(&rest[..start]);
        out.push('…');
        rest = &rest[start + len..];
    }
    out.push_str(rest);
    out
}

fn compact(json: &str) -> String {
    let (mut out, mut in_string, mut escaped) = (String::new(), false, false);
    for c in json.chars() {
        if in_string {
            in_string = escaped || c != '"';
            escaped = !escaped && c == '\\';
        } else if c == '"' {
            in_string = true;
        } else if c.is_whitespace() {
            continue;
        }
        out.push(c);
    }
    out
}

/// The shown JSON of a command: the text of its `# {…}` comment.
fn shown_json_text(command: &str, comments: &[String]) -> Option<String> {
    let text = |c: &str| -> Option<String> {
        let rest = c.strip_prefix('#')?.trim();
        let rest = rest.strip_prefix("200 ").unwrap_or(rest);
        rest.starts_with('{').then(|| rest.to_owned())
    };
    match command.find("# {") {
        Some(i) => text(&command[i..]),
        None => comments.first().and_then(|c| text(c)),
    }
}

/// Every `slidelog_*` name in the README's metrics table.
fn documented_metrics(readme: &str) -> std::collections::BTreeSet<String> {
    let section = readme
        .split("### Metrics (`GET /metrics`)")
        .nth(1)
        .expect("the README has a metrics section");
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

fn with_port_zero(command: &str) -> String {
    let mut out = command.to_owned();
    // Before a trailing comment, if any.
    let (cmd, comment) = match out.find(" #") {
        Some(i) => (out[..i].to_owned(), out[i..].to_owned()),
        None => (out.clone(), String::new()),
    };
    out = cmd.trim_end().to_owned();
    if !out.contains("--http") {
        out.push_str(" --http 127.0.0.1:0");
    }
    if !out.contains("--grpc") && !out.contains("--no-grpc") {
        out.push_str(" --grpc 127.0.0.1:0");
    }
    out.push_str(&comment);
    out
}

#[test]
fn every_shell_example_of_the_readme_runs_as_written() {
    tools::require("curl", "curl");
    let readme = readme();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("limits.yaml"), &readme.yaml).unwrap();
    let bin_dir = std::path::Path::new(env!("CARGO_BIN_EXE_slidelog"))
        .parent()
        .unwrap()
        .to_owned();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let redis =
        RedisServer::start_with_args(&["--user", "user", "on", ">pass", "~*", "&*", "+@all"]);
    let redis_addr = redis.addr();

    let mut unused: Vec<&str> = NOT_RUN.iter().map(|(needle, _)| *needle).collect();
    let mut server: Option<child::Serve> = None;
    let mut ran = 0;
    let mut compared = 0;
    for (command, comments) in &readme.commands {
        if let Some((needle, _)) = NOT_RUN.iter().find(|(n, _)| command.contains(n)) {
            unused.retain(|u| u != needle);
            continue;
        }
        let mut line = command.replace("127.0.0.1:6379", &redis_addr);
        if let Some(s) = &server {
            line = line.replace("localhost:8080", &s.addr);
        }
        let sh = |line: &str| {
            let mut c = Command::new("sh");
            c.args(["-c", line])
                .current_dir(dir.path())
                .env("PATH", &path)
                .env("TOKEN", "readme-token")
                .env_remove("SLIDELOG_STORE")
                .env_remove("SLIDELOG_ADMIN_TOKEN");
            c
        };
        ran += 1;
        eprintln!("README: {line}");
        if line.starts_with("slidelog serve") {
            drop(server.take());
            // exec: the child is slidelog itself, killed on drop.
            server = Some(child::spawn(sh(&format!("exec {}", with_port_zero(&line)))));
            continue;
        }
        let out = sh(&line).output().expect("run sh");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let code = out.status.code();
        let decides = line.starts_with("slidelog check") || line.starts_with("slidelog inspect");
        let ok = if decides {
            matches!(code, Some(0 | 1))
        } else {
            code == Some(0)
        };
        assert!(
            ok,
            "README command failed ({code:?}): {command}\nran: {line}\nstdout: {stdout}\nstderr: {stderr}"
        );
        if line.starts_with("curl") {
            assert!(!stdout.is_empty(), "{command}: no output");
        }
        if let Some(want) = expected_json(command, comments) {
            let stdout = mask_receipt(stdout.trim());
            let got: serde_json::Value = serde_json::from_str(stdout.trim())
                .unwrap_or_else(|e| panic!("{command}: output is not JSON ({e}): {stdout}"));
            assert_eq!(got, want, "{command}: the output the README shows");
            let shown = shown_json_text(command, comments).expect("shown JSON");
            assert_eq!(
                compact(stdout.trim()),
                compact(&shown),
                "{command}: the README shows these fields in another order"
            );
            compared += 1;
        }
    }
    let server = server.expect("the README starts a server");
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
    let documented = documented_metrics(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap(),
    );
    let undocumented: Vec<_> = exported.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "exported but not in the README's metrics table: {undocumented:?}"
    );
    let registered = registered_metrics();
    let stale: Vec<_> = documented.difference(&registered).collect();
    assert!(
        stale.is_empty(),
        "in the README's metrics table but not in the code: {stale:?}"
    );
    let unlisted: Vec<_> = registered.difference(&documented).collect();
    assert!(
        unlisted.is_empty(),
        "registered in the code but not in the README's metrics table: {unlisted:?}"
    );
    assert!(
        unused.is_empty(),
        "NOT_RUN entries that match no README line (remove them): {unused:?}"
    );
    assert!(ran >= 15, "only {ran} README commands ran");
    // /v1/check, DELETE and /json show their output.
    assert!(compared >= 3, "only {compared} outputs compared");
}

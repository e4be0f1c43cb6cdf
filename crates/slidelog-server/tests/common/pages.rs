//! Runs the shell examples of a Markdown page as written (the README, the
//! guide's pages). Every command line of every ```sh block runs, in order,
//! through `sh` with the built `slidelog` first on `PATH`, in a temp dir
//! that holds the page's first `yaml` block as `limits.yaml`:
//!
//! - `slidelog serve …` starts in the background (replacing the previous
//!   one) and is ready once it logs its address; the `curl`s that follow
//!   talk to it. So that the test can run beside other programs, it binds
//!   port 0 instead of 8080/8081 (`--http 127.0.0.1:0 --grpc 127.0.0.1:0`
//!   are added unless the line gives them) and `localhost:8080` in a later
//!   line becomes its address.
//! - `127.0.0.1:6379` becomes a `redis-server` the runner started (with the
//!   pages' `user:pass` ACL user), never a Redis already on the machine.
//! - `slidelog check` and `inspect` must exit 0 or 1 (2 is an error), every
//!   other command 0; a `# {…}` or `# 200 {…}` comment after a command is
//!   its expected JSON output, compared exactly: the same fields with the
//!   same values in the same order (whitespace aside).
//!
//! Only the lines of the caller's `not_run` list are skipped, each for its
//! stated reason; an entry that matches no line of the page fails, so the
//! list cannot go stale.

use super::child;
use slidelog_testkit::{RedisServer, tools};
use std::process::Command;

/// What running a page did.
pub struct Ran {
    /// The last `slidelog serve` it started, still running.
    pub server: Option<child::Serve>,
    /// Commands run.
    pub ran: usize,
    /// Outputs compared with the JSON the page shows.
    pub compared: usize,
    /// The page's Redis, stopped after the server (fields drop in order).
    _redis: RedisServer,
}

/// A page's ```sh command lines (continuations joined) with the comment
/// lines that follow each, and its first ```yaml block, if any.
pub struct Page {
    pub commands: Vec<(String, Vec<String>)>,
    pub yaml: Option<String>,
}

/// The text of `page`, a path from the repository's root.
pub fn text(page: &str) -> String {
    let path = format!("{}/../../{page}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn parse(page: &str) -> Page {
    let text = text(page);
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
    Page { commands, yaml }
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

/// Runs every shell example of `page` but the lines matching an entry of
/// `not_run` (a substring of the line, why it is not run).
pub fn run(page: &str, not_run: &[(&str, &str)]) -> Ran {
    tools::require("curl", "curl");
    let parsed = parse(page);
    let dir = tempfile::tempdir().unwrap();
    if let Some(yaml) = &parsed.yaml {
        std::fs::write(dir.path().join("limits.yaml"), yaml).unwrap();
    }
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
    let mut unused: Vec<&str> = not_run.iter().map(|(needle, _)| *needle).collect();
    let mut done = Ran {
        server: None,
        ran: 0,
        compared: 0,
        _redis: redis,
    };
    for (command, comments) in &parsed.commands {
        if let Some((needle, _)) = not_run.iter().find(|(n, _)| command.contains(n)) {
            unused.retain(|u| u != needle);
            continue;
        }
        let mut line = command.replace("127.0.0.1:6379", &redis_addr);
        if let Some(s) = &done.server {
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
        done.ran += 1;
        eprintln!("{page}: {line}");
        if line.starts_with("slidelog serve") {
            drop(done.server.take());
            // exec: the child is slidelog itself, killed on drop.
            done.server = Some(child::spawn(sh(&format!("exec {}", with_port_zero(&line)))));
            continue;
        }
        let out = sh(&line).output().expect("run sh");
        if check_output(page, command, comments, &line, &out) {
            done.compared += 1;
        }
    }
    assert!(
        unused.is_empty(),
        "not-run entries that match no line of {page} (remove them): {unused:?}"
    );
    done
}

/// Checks a command's exit status and, when the page shows its JSON, its
/// output: true when an output was compared.
fn check_output(
    page: &str,
    command: &str,
    comments: &[String],
    line: &str,
    out: &std::process::Output,
) -> bool {
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
        "{page}: command failed ({code:?}): {command}\nran: {line}\nstdout: {stdout}\nstderr: {stderr}"
    );
    if line.starts_with("curl") {
        assert!(!stdout.is_empty(), "{page}: {command}: no output");
    }
    let Some(want) = expected_json(command, comments) else {
        return false;
    };
    let stdout = mask_receipt(stdout.trim());
    let got: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{page}: {command}: output is not JSON ({e}): {stdout}"));
    assert_eq!(got, want, "{page}: {command}: the output the page shows");
    let shown = shown_json_text(command, comments).expect("shown JSON");
    assert_eq!(
        compact(stdout.trim()),
        compact(&shown),
        "{page}: {command}: the page shows these fields in another order"
    );
    true
}

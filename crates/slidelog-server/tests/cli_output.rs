//! What the subcommands print: a closed stdout (`| head`) ends a command
//! quietly with its own exit code; `check --peek` says its counts are the
//! would-be state; a check of several (named) limits prints every limit;
//! `check --help` does not advertise the store it refuses to run on.

use std::process::{Command, Output, Stdio};

fn slidelog(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_slidelog"));
    c.args(args).env_remove("SLIDELOG_STORE");
    c
}

fn run(args: &[&str]) -> Output {
    slidelog(args).output().expect("run slidelog")
}

#[test]
fn a_closed_stdout_ends_quietly_with_the_commands_own_exit_code() {
    for (args, code) in [
        (
            &[
                "check",
                "k",
                "--max",
                "1",
                "--window",
                "1m",
                "--store",
                "memory://",
                "--json",
            ][..],
            0,
        ),
        (
            &[
                "check",
                "k",
                "--limit",
                "a=1/m",
                "--limit",
                "b=5/m",
                "--store",
                "memory://",
            ][..],
            0,
        ),
        (&["bench", "--requests", "10", "--keys", "2"][..], 0),
        (
            &["bench", "--requests", "10", "--keys", "2", "--json"][..],
            0,
        ),
    ] {
        // A pipe whose reader is gone before the command writes a byte.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = slidelog(args)
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(
            !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn a_peek_says_its_counts_are_what_a_check_would_leave() {
    let out = run(&[
        "check",
        "k",
        "--max",
        "5",
        "--window",
        "1m",
        "--peek",
        "--store",
        "memory://",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text.starts_with("would be allowed (peek, nothing recorded): 1/5 used in 1m window"),
        "{text}"
    );
}

/// A weighted check of two named limits on the memory store: 1 request
/// and 5,000 tokens.
const TWO_NAMED_LIMITS: &[&str] = &[
    "check",
    "k",
    "--limit",
    "requests=60/minute",
    "--limit",
    "tokens=20000/minute",
    "--cost",
    "1",
    "--cost",
    "5000",
    "--store",
    "memory://",
];

#[test]
fn a_check_of_several_limits_prints_every_limit_by_name() {
    let out = run(TWO_NAMED_LIMITS);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].starts_with("allowed: 1/60 used"), "{text}");
    assert_eq!(
        lines[1],
        "  requests: 1/60 used in 1m window, 59 remaining, empty in 1m"
    );
    assert_eq!(
        lines[2],
        "  tokens: 5000/20000 used in 1m window, 15000 remaining, empty in 1m"
    );
    // --json: the same limits array as the HTTP API.
    let out = run(&[TWO_NAMED_LIMITS, &["--json"]].concat());
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["limits"][1]["name"], "tokens");
    assert_eq!(d["limits"][1]["remaining"], 15_000);
}

#[test]
fn check_help_does_not_advertise_the_store_it_refuses() {
    let out = run(&["check", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(!help.contains("[default: memory://]"), "{help}");
    assert!(help.contains("(required)"), "{help}");
    assert!(
        help.contains("would be"),
        "--peek says what it prints: {help}"
    );
    let out = run(&["bench", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("rate:sliding:bench:"), "{help}");
}

//! `slidelog check` on the memory store: without --store it refuses (each
//! run would start empty), with `--store memory://` it decides and says the
//! log starts empty; exit 0 admitted, the JSON decision of docs/design.md
//! §2, and exit 2 with a message naming the field and its bound for every
//! bad input (never a clamp, never a panic).

use std::process::{Command, Output};

fn slidelog(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_slidelog"))
        .args(args)
        // The machine's own setting must not pick the store for the test.
        .env_remove("SLIDELOG_STORE")
        .output()
        .expect("run slidelog")
}

/// `slidelog check user123 ARGS --store memory://`.
fn check_user123_in_memory(args: &[&str]) -> Output {
    slidelog(&[&["check", "user123"], args, &["--store", "memory://"]].concat())
}

#[test]
fn without_a_store_check_refuses_instead_of_admitting_every_run() {
    for _ in 0..3 {
        let out = slidelog(&["check", "user123", "--max", "1", "--window", "60s"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("--store"), "{stderr}");
        assert!(stderr.contains("empty on every run"), "{stderr}");
        assert!(out.stdout.is_empty(), "no decision is printed");
    }
    // SLIDELOG_STORE counts as giving one.
    let out = Command::new(env!("CARGO_BIN_EXE_slidelog"))
        .args(["check", "user123", "--max", "1", "--window", "60s"])
        .env("SLIDELOG_STORE", "memory://")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    // --help explains the choice.
    let out = slidelog(&["check", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("every run would start empty"), "{help}");
}

#[test]
fn an_explicit_memory_store_decides_and_says_each_run_starts_empty() {
    for _ in 0..3 {
        let out = check_user123_in_memory(&["--max", "1", "--window", "60s"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        assert!(stderr.contains("starts empty on every run"), "{stderr}");
        assert!(String::from_utf8_lossy(&out.stdout).starts_with("allowed: 1/1"));
    }
}

#[test]
fn an_admitted_check_exits_0_and_reports_the_decision() {
    let out = check_user123_in_memory(&["--max", "5", "--window", "60s", "--cost", "2", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["allowed"], true);
    assert_eq!(d["limit"], 5);
    assert_eq!(d["window_ms"], 60_000);
    assert_eq!(d["count"], 2);
    assert_eq!(d["remaining"], 3);
    assert_eq!(d["retry_after_ms"], 0);
    assert_eq!(d["reset_after_ms"], 60_000);
    assert!(d.get("degraded").is_none(), "degraded only when it is true");

    let out = check_user123_in_memory(&["--max", "5", "--window", "1m"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("allowed: 1/5"), "{text}");
}

#[test]
fn bad_input_exits_2_naming_the_field_and_the_bound() {
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["k", "--max", "0", "--window", "60s"],
            &["max", "10000000"],
        ),
        (
            &["k", "--max", "10000001", "--window", "60s"],
            &["max", "10000000"],
        ),
        (
            &["k", "--max", "5", "--window", "0s"],
            &["window", "366 days"],
        ),
        (
            &["k", "--max", "5", "--window", "367days"],
            &["window", "366 days"],
        ),
        (
            &["k", "--max", "5", "--window", "1500us"],
            &["window", "whole number of milliseconds"],
        ),
        (&["k", "--max", "5", "--window", "soon"], &["window"]),
        (
            &["k", "--max", "5", "--window", "60s", "--cost", "6"],
            &["cost", "5"],
        ),
        (
            &["k", "--max", "5", "--window", "60s", "--cost", "0"],
            &["cost"],
        ),
        (&["", "--max", "5", "--window", "60s"], &["key", "512"]),
        (
            &[&"k".repeat(513), "--max", "5", "--window", "60s"],
            &["key", "512"],
        ),
        (&["k", "--max", "-1", "--window", "60s"], &["max"]),
        (
            &["k", "--max", "5", "--window", "60s", "--store", "ftp://x"],
            &["store URL"],
        ),
    ];
    for (args, needles) in cases {
        let mut all = vec!["check"];
        all.extend_from_slice(args);
        let out = slidelog(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        for needle in *needles {
            assert!(
                stderr.contains(needle),
                "{args:?}: {needle:?} not in {stderr}"
            );
        }
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn every_subcommand_has_help() {
    for sub in ["serve", "check", "inspect", "bench"] {
        let out = slidelog(&[sub, "--help"]);
        assert_eq!(out.status.code(), Some(0), "{sub}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("Usage"));
    }
}

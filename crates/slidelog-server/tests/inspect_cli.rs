//! The `slidelog inspect` binary against a real redis-server: exit 0 on a
//! clean key space, 1 when problems are found, 2 on bad input; `--json`
//! prints the documented schema; the human report has its sections; `--config`
//! reads the max from an Envoy-style limits file.

use slidelog_testkit::{RedisServer, unique_prefix};
use std::process::{Command, Output};

fn slidelog(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_slidelog"))
        .arg("inspect")
        .args(args)
        .env_remove("SLIDELOG_STORE")
        .output()
        .expect("run slidelog")
}

fn zadd(conn: &mut redis::Connection, key: &str, n: u64, ttl: bool) {
    let mut cmd = redis::cmd("ZADD");
    cmd.arg(key);
    for i in 0..n {
        cmd.arg(1_764_400_000_000u64 + i)
            .arg(format!("01JDQ3W7ZK{i:04}ABCDEFGHJKMN"));
    }
    cmd.exec(conn).unwrap();
    if ttl {
        redis::cmd("PEXPIRE")
            .arg(key)
            .arg(600_000)
            .exec(conn)
            .unwrap();
    }
}

#[test]
fn exit_codes_json_and_human_report() {
    let server = RedisServer::start();
    let mut conn = server.client();
    let p = unique_prefix("cli");
    zadd(&mut conn, &format!("{p}clean:a"), 3, true);
    zadd(&mut conn, &format!("{p}clean:b"), 4, true);
    zadd(&mut conn, &format!("{p}bad:big"), 30, false);
    let url = server.url();

    // Clean: exit 0, and the report says so.
    let clean = format!("{p}clean:*");
    let out = slidelog(&["--store", &url, "--pattern", &clean, "--max", "10"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("No problems found."), "{text}");
    assert!(text.contains("ZCARD distribution"), "{text}");
    assert!(text.contains("Top keys by records"), "{text}");
    assert!(text.contains(&format!("{p}clean:b")), "{text}");

    // Problems: exit 1; JSON with every kind, two found.
    let all = format!("{p}*");
    let out = slidelog(&["--store", &url, "--pattern", &all, "--max", "10", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["schema_version"], 1);
    assert_eq!(json["summary"]["keys"], 3);
    assert_eq!(json["summary"]["records"], 37);
    let found: Vec<&str> = json["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["count"].as_u64() > Some(0))
        .map(|p| p["kind"].as_str().unwrap())
        .collect();
    assert_eq!(found, ["no_ttl", "oversized"]);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Human report of the same: one section per problem with its fix.
    let out = slidelog(&["--store", &url, "--pattern", &all, "--max", "10"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("[no_ttl]") && text.contains("[oversized]"),
        "{text}"
    );
    assert!(text.contains("fix: "), "{text}");
    assert!(!text.contains("[seconds_scores]"), "{text}");

    // --config: the largest requests_per_unit is the max (20 → 30 > 40 is false).
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("limits.yaml");
    std::fs::write(
        &config,
        "domain: api\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: minute\n      requests_per_unit: 20\n",
    )
    .unwrap();
    let big = format!("{p}bad:*");
    let out = slidelog(&[
        "--store",
        &url,
        "--pattern",
        &big,
        "--config",
        config.to_str().unwrap(),
        "--json",
    ]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["limit"]["max"], 20);
    assert_eq!(json["problems"][3]["kind"], "oversized");
    assert_eq!(json["problems"][3]["count"], 0);
}

#[test]
fn bad_input_exits_2_with_a_clear_message() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--store", "redis://127.0.0.1:1", "--count", "0"],
            "--count",
        ),
        (&["--store", "redis://127.0.0.1:1", "--max", "0"], "--max"),
        (&["--store", "memory://"], "no key space"),
        (
            &[
                "--store",
                "redis://127.0.0.1:1",
                "--max",
                "5",
                "--config",
                "x.yaml",
            ],
            "cannot be used with",
        ),
        (
            &[
                "--store",
                "redis://127.0.0.1:1",
                "--config",
                "/nonexistent/limits.yaml",
            ],
            "limits config",
        ),
    ];
    for (args, message) in cases {
        let out = slidelog(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // An unreachable store: exit 2 naming the address, within the timeout.
    let port = slidelog_testkit::free_port();
    let url = format!("redis://:pw@127.0.0.1:{port}");
    let out = slidelog(&["--store", &url, "--timeout", "2s"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&format!("127.0.0.1:{port}")), "{stderr}");
    assert!(!stderr.contains("pw"), "{stderr}");
    // Said once: the Redis error quotes the I/O error it also gives as its
    // source, and the message used to repeat it three times.
    assert_eq!(
        stderr.matches("Connection refused").count(),
        1,
        "the cause is said once: {stderr}"
    );
}

#[test]
fn config_limits_apply_per_envoy_descriptor_key() {
    let server = RedisServer::start();
    let mut conn = server.client();
    let p = unique_prefix("cli_envoy");
    // alice's rule allows 5, everyone else's 100: 11 records is over 2 x 5 only.
    zadd(&mut conn, &format!("{p}envoy:api:user=alice"), 11, true);
    zadd(&mut conn, &format!("{p}envoy:api:user=bob"), 11, true);
    zadd(&mut conn, &format!("{p}plain"), 11, true);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("limits.yaml");
    std::fs::write(
        &config,
        "domain: api\ndescriptors:\n  - key: user\n    value: alice\n    rate_limit: {unit: minute, requests_per_unit: 5}\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 100}\n",
    )
    .unwrap();
    let out = slidelog(&[
        "--store",
        &server.url(),
        "--key-prefix",
        &p,
        "--config",
        config.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["limit"]["max"], 100);
    assert_eq!(json["limit"]["per_key"], true);
    let oversized = &json["problems"][3];
    assert_eq!(oversized["kind"], "oversized");
    assert_eq!(oversized["count"], 1);
    assert_eq!(
        oversized["keys"][0]["key"],
        format!("{p}envoy:api:user=alice")
    );
}

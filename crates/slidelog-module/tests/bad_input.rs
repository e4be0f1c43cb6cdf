//! Malformed calls of every module command: each is an error reply (never a
//! crash, never a decision) and the server answers PING after every one.
//! Settle and charge: bounds named in their errors, too many items, huge
//! numbers, a passed deadline, and 10,000 forged receipts that settle
//! nothing and change nothing.

mod common;

use common::{ServerKind, server};
use redis::Value;

/// Sends `words` as one command and returns the reply.
fn send(conn: &mut redis::Connection, words: &[Vec<u8>]) -> redis::RedisResult<Value> {
    let mut cmd = redis::cmd(std::str::from_utf8(&words[0]).unwrap());
    for w in &words[1..] {
        cmd.arg(w.as_slice());
    }
    cmd.query(conn)
}

fn w(text: &str) -> Vec<Vec<u8>> {
    text.split(' ').map(|s| s.as_bytes().to_vec()).collect()
}

/// At least 50 malformed calls of `command`, built from its valid form.
fn malformed(command: &str, valid: &str) -> Vec<Vec<Vec<u8>>> {
    let base = w(valid);
    let mut calls: Vec<Vec<Vec<u8>>> = vec![w(command)];
    // Wrong arity: every prefix of the valid call, and one word too many.
    for n in 1..base.len() {
        calls.push(base[..n].to_vec());
    }
    let mut extra = base.clone();
    extra.push(b"1".to_vec());
    calls.push(extra);
    // Each argument (after the key) replaced by bad values.
    let bad: [&[u8]; 9] = [
        b"x",
        b"-1",
        b"18446744073709551616",
        b"",
        b"1.5",
        b" 1",
        b"0x10",
        b"99999999999999999999999999",
        b"\xff\x00\xfe",
    ];
    for i in 2..base.len() {
        for b in bad {
            let mut call = base.clone();
            call[i] = b.to_vec();
            calls.push(call);
        }
    }
    // Extra words of every bad kind, one to five of them.
    for b in bad {
        for n in 1..=5 {
            let mut call = base.clone();
            call.extend(std::iter::repeat_n(b.to_vec(), n));
            calls.push(call);
        }
    }
    // Bad keys: empty and too long; binary garbage; 10,000 arguments.
    for key in [
        Vec::new(),
        vec![b'k'; 513],
        vec![0xff; 1_000],
        vec![b'{'; 100_000],
    ] {
        let mut call = base.clone();
        call[1] = key;
        calls.push(call);
    }
    let mut garbage = vec![command.as_bytes().to_vec()];
    garbage.extend((0..7).map(|i| vec![0xff - i as u8, 0, b'\r', b'\n', i as u8]));
    calls.push(garbage);
    let mut many = vec![command.as_bytes().to_vec()];
    many.extend((0..10_000).map(|i| i.to_string().into_bytes()));
    calls.push(many);
    // A key of another type.
    let mut other = base.clone();
    other[1] = b"a-string".to_vec();
    calls.push(other);
    calls
}

fn each_is_an_error(kind: ServerKind) {
    let server = server(kind);
    let mut conn = server.client();
    let _: () = redis::cmd("SET")
        .arg("a-string")
        .arg("x")
        .query(&mut conn)
        .unwrap();
    let cases = [
        (
            "SLIDELOG.CHECK",
            "SLIDELOG.CHECK k RECORD 1000 0 2 10 1000 1 100 60000 1",
        ),
        ("SLIDELOG.CHECK", "SLIDELOG.CHECK k PEEK * 5 1 10 1000 3"),
        (
            "SLIDELOG.SETTLE",
            "SLIDELOG.SETTLE k 1000 0 1000 1,2 2 10 1000 1 100 60000 2",
        ),
        (
            "SLIDELOG.CHARGE",
            "SLIDELOG.CHARGE k * 0 2 10 1000 1 100 60000 40",
        ),
        ("SLIDELOG.APPLY", "SLIDELOG.APPLY k 1000:1000:5000:1,2"),
        (
            "SLIDELOG.APPLY",
            "SLIDELOG.APPLY k 1000:1000:5000:1,0:900/2/1,2",
        ),
        ("SLIDELOG.RESET", "SLIDELOG.RESET k"),
        ("SLIDELOG.INFO", "SLIDELOG.INFO k"),
    ];
    for (command, valid) in cases {
        let calls = malformed(command, valid);
        let mut errors = 0;
        for call in &calls {
            // Calls that are valid by construction: RESET / INFO take any
            // key of 1 to 512 bytes.
            let valid = match command {
                "SLIDELOG.RESET" | "SLIDELOG.INFO" => {
                    call.len() == 2
                        && !call[1].is_empty()
                        && call[1].len() <= 512
                        && call[1] != b"a-string"
                }
                _ => false,
            };
            match send(&mut conn, call) {
                Err(e) => {
                    errors += 1;
                    assert!(e.code().is_some(), "{command}: {e}");
                }
                Ok(v) => assert!(
                    valid,
                    "{command} {:?} answered {v:?}",
                    call.iter().take(8).collect::<Vec<_>>()
                ),
            }
            let pong: String = redis::cmd("PING")
                .query(&mut conn)
                .expect("PING after a malformed call");
            assert_eq!(pong, "PONG");
        }
        assert!(
            errors >= 50,
            "{command}: only {errors} malformed calls of {}",
            calls.len()
        );
    }
    // Nothing above wrote a log.
    let exists: i64 = redis::cmd("EXISTS").arg("k").query(&mut conn).unwrap();
    assert_eq!(exists, 0);
}

#[test]
fn malformed_calls_are_errors_on_redis() {
    each_is_an_error(ServerKind::Redis);
}

#[test]
fn malformed_calls_are_errors_on_valkey() {
    each_is_an_error(ServerKind::Valkey);
}

#[test]
fn error_messages_name_the_field_and_bound() {
    let server = server(ServerKind::Redis);
    let mut conn = server.client();
    let _: () = redis::cmd("SET")
        .arg("s")
        .arg("x")
        .query(&mut conn)
        .unwrap();
    let mut err = |words: &str| {
        let e = send(&mut conn, &w(words)).unwrap_err();
        format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or(""))
    };
    assert!(
        err("SLIDELOG.CHECK k RECORD * 0 1 10000001 1000 1")
            .contains("max_1 must be an integer from 1 to 10000000")
    );
    assert!(err("SLIDELOG.CHECK k RECORD * 0 1 10 31622400001 1").contains("window_ms_1"));
    assert!(
        err("SLIDELOG.CHECK k RECORD * 0 2 10 1000 1 5 1000 6")
            .contains("cost_2 must be an integer from 1 to 5")
    );
    assert!(err("SLIDELOG.CHECK k RECORD * 0 17").contains("n must be an integer from 1 to 16"));
    assert!(err("SLIDELOG.CHECK s RECORD * 0 1 10 1000 1").starts_with("WRONGTYPE"));
    assert!(err("SLIDELOG.RESET s").starts_with("WRONGTYPE"));
    assert!(err("SLIDELOG.INFO s").starts_with("WRONGTYPE"));
}

#[test]
fn settle_and_charge_errors_name_the_field_and_bound() {
    let server = server(ServerKind::Redis);
    let mut conn = server.client();
    let _: () = redis::cmd("SET")
        .arg("s")
        .arg("x")
        .query(&mut conn)
        .unwrap();
    let mut err = |words: &str| {
        let e = send(&mut conn, &w(words)).unwrap_err();
        format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or(""))
    };
    let cases = [
        (
            "SLIDELOG.CHARGE k * 0 2 10 1000 1 100 60000 10000001",
            "cost_2 must be an integer from 0 to 10000000",
        ),
        (
            "SLIDELOG.SETTLE k * 0 5 1 1 10 1000 99999999999999999999",
            "cost_1 must be an integer from 0 to 10000000",
        ),
        (
            "SLIDELOG.CHARGE k * 0 17",
            "n must be an integer from 1 to 16",
        ),
        (
            "SLIDELOG.CHARGE k * 0 1 10 1000 1 10 1000 1",
            "wrong number of arguments for 'slidelog.charge'",
        ),
        (
            "SLIDELOG.SETTLE k * 0 5 1",
            "wrong number of arguments for 'slidelog.settle'",
        ),
        (
            "SLIDELOG.SETTLE k * 0 5 1,2,3 2 10 1000 1 100 60000 2",
            "record_costs must list 1 cost or n = 2 costs",
        ),
        (
            "SLIDELOG.SETTLE k * 0 5 0,0 2 10 1000 1 100 60000 2",
            "record_costs must not all be 0",
        ),
        (
            "SLIDELOG.SETTLE k * 0 5 1,-2 2 10 1000 1 100 60000 2",
            "record_cost_2 must be an integer from 0 to 10000000",
        ),
        (
            "SLIDELOG.SETTLE k * 0 9007199254740992 1 1 10 1000 1",
            "record_ts must be an integer from 0 to 9007199254740991",
        ),
        (
            "SLIDELOG.SETTLE k 9007199254740992 0 5 1 1 10 1000 1",
            "now_ms must be an integer from 0 to 9007199254740991",
        ),
        (
            "SLIDELOG.CHARGE k * 0 1 10000001 1000 1",
            "max_1 must be an integer from 1 to 10000000",
        ),
        ("SLIDELOG.CHARGE s * 0 1 10 1000 1", "WRONGTYPE"),
        ("SLIDELOG.SETTLE s * 0 5 1 1 10 1000 1", "WRONGTYPE"),
        // A deadline in the past (1 ms after the epoch): refused before
        // anything changes, with the scripts' code.
        ("SLIDELOG.CHARGE k * 1 1 10 1000 1", "DEADLINE"),
        ("SLIDELOG.SETTLE k * 1 5 1 1 10 1000 1", "DEADLINE"),
    ];
    for (words, want) in cases {
        let got = err(words);
        assert!(got.contains(want), "{words}: {got}");
    }
    // 17 limits, 10,000 record costs: refused by their bounds.
    let many: Vec<String> = (0..10_000).map(|i| (i % 7).to_string()).collect();
    let got = err(&format!(
        "SLIDELOG.SETTLE k * 0 5 {} 1 10 1000 1",
        many.join(",")
    ));
    assert!(
        got.contains("record_costs must list 1 cost or n = 1"),
        "{got}"
    );
    let mut limits = "SLIDELOG.CHARGE k * 0 17".to_string();
    for _ in 0..17 {
        limits.push_str(" 10 1000 1");
    }
    assert!(err(&limits).contains("n must be an integer from 1 to 16"));
    let exists: i64 = redis::cmd("EXISTS").arg("k").query(&mut conn).unwrap();
    assert_eq!(exists, 0, "no error wrote a log");
}

/// 10,000 forged receipts (random times and costs, the real times with
/// other costs, the real costs at other times) settle nothing and change
/// nothing: the log's DUMP is the same after them.
#[test]
fn forged_receipts_settle_nothing() {
    use rand::{Rng, SeedableRng};
    let server = server(ServerKind::Redis);
    let mut conn = server.client();
    let limits = "2 100 60000 1 3000 60000 40";
    let mut times = Vec::new();
    for t in 0..50u64 {
        let now = 1_000_000 + t * 100;
        let reply: Vec<i64> = send(
            &mut conn,
            &w(&format!("SLIDELOG.CHECK k RECORD {now} 0 {limits}")),
        )
        .unwrap()
        .into_sequence()
        .unwrap()
        .into_iter()
        .map(|v| redis::from_redis_value(v).unwrap())
        .collect();
        assert_eq!(reply[0], 1);
        times.push(now);
    }
    let before: Vec<u8> = redis::cmd("DUMP").arg("k").query(&mut conn).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(24);
    let mut pipe = redis::pipe();
    for i in 0..10_000 {
        let (ts, costs) = match i % 3 {
            // A real time with costs the record does not have.
            0 => (
                times[rng.random_range(0..times.len())],
                format!(
                    "{},{}",
                    rng.random_range(0..5),
                    rng.random_range(41..10_000_000)
                ),
            ),
            // The real costs at a time no record has.
            1 => (
                1_000_000 + rng.random_range(0..5_000u64) * 100 + rng.random_range(1..100),
                "1,40".into(),
            ),
            // Anything.
            _ => (
                rng.random_range(0..9_007_199_254_740_991u64),
                format!("{}", rng.random_range(1..=10_000_000u64)),
            ),
        };
        pipe.cmd("SLIDELOG.SETTLE")
            .arg("k")
            .arg(1_006_000)
            .arg(0)
            .arg(ts)
            .arg(costs)
            .arg(2)
            .arg(100)
            .arg(60_000)
            .arg(0)
            .arg(3_000)
            .arg(60_000)
            .arg(0);
    }
    let replies: Vec<Vec<i64>> = pipe.query(&mut conn).unwrap();
    assert_eq!(replies.len(), 10_000);
    for r in &replies {
        assert_eq!(
            (r[0], r[9], r[13]),
            (0, 50, 2_000),
            "settled nothing: {r:?}"
        );
    }
    let after: Vec<u8> = redis::cmd("DUMP").arg("k").query(&mut conn).unwrap();
    assert_eq!(before, after, "the log is unchanged");
    let pong: String = redis::cmd("PING").query(&mut conn).unwrap();
    assert_eq!(pong, "PONG");
}

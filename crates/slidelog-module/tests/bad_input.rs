//! Malformed calls of every module command: each is an error reply (never a
//! crash, never a decision) and the server answers PING after every one.

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
        ("SLIDELOG.APPLY", "SLIDELOG.APPLY k 1000:1000:5000:1,2"),
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

//! Hostile `RESTORE` payloads of a `slide-log` key (docs/design.md §4.3):
//! bad module opcodes, a string longer than the bytes that follow, huge
//! record counts, garbage codec bytes and truncations at every byte, each
//! with the payload's CRC-64 recomputed so that the server reaches the
//! module's loader. Every one answers an error, the server answers PING
//! after it and the key does not exist, with `sanitize-dump-payload` yes and
//! no, on Redis and Valkey. Seeded random codec bytes restore exactly when
//! `slidelog_core::codec` reads them. An RDB file holding such a key stops
//! the server with exit status 1 and a log line naming the key, never a
//! panic.

mod common;

use common::dump::{Dump, crc64, payload, rdb_len, real_dump, value_of, varint};
use common::{ServerKind, server};
use rand::{Rng, SeedableRng};
use redis::Connection;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Payloads whose value must not load: bad opcodes, strings longer than
/// their bytes, huge counts, codec garbage, truncations.
fn hostile(d: &Dump) -> Vec<(String, Vec<u8>)> {
    let mut cases: Vec<(String, Vec<u8>)> = hostile_values(d)
        .into_iter()
        .map(|(name, body)| (name, payload(d, &body)))
        .collect();
    let whole = [&d.head[..], &value_of(&d.log)].concat();
    for n in 0..whole.len() {
        // Cut anywhere, the type byte and module id included.
        let mut cut = [&whole[..n], &d.version].concat();
        let crc = crc64(&cut);
        cut.extend_from_slice(&crc.to_le_bytes());
        if !still_a_value(&cut) {
            cases.push((format!("truncated to {n} bytes"), cut));
        }
    }
    cases
}

/// Whether a cut payload still holds a value: RESTORE reads the footer
/// (version, CRC) as data too, so a string cut short may go on into it and
/// an EOF marker be found there (the version's second byte is 0); such a
/// payload is valid when the codec reads the string whole.
fn still_a_value(p: &[u8]) -> bool {
    let (Some(&5), Some(&len)) = (p.get(10), p.get(11)) else {
        return false;
    };
    let len = usize::from(len);
    if len >= 64 {
        return false;
    }
    let (Some(string), Some(&eof)) = (p.get(12..12 + len), p.get(12 + len)) else {
        return false;
    };
    eof == 0
        && matches!(slidelog_core::codec::decode(string), Ok((_, used)) if used == string.len())
}

/// Module values (after the module id) that must not load.
fn hostile_values(d: &Dump) -> Vec<(String, Vec<u8>)> {
    let log = &d.log;
    let mut cases = Vec::new();
    for op in [0u8, 1, 2, 3, 4, 6, 0x3f] {
        let body = [&[op][..], &rdb_len(log.len() as u64), log, &[0]].concat();
        cases.push((format!("opcode {op}"), body));
    }
    for extra in [1u64, 2, 100, 70_000, 10_000_000] {
        let len = rdb_len(log.len() as u64 + extra);
        cases.push((
            format!("string {extra} bytes short"),
            [&[5][..], &len, log, &[0]].concat(),
        ));
    }
    // The real log is `1, flags, count (1 byte), base, offsets`.
    for count in [3, 1 << 32, 1 << 62, u64::MAX] {
        for flags in [0u8, 1, 2, 3] {
            let bytes = [&[1, flags][..], &varint(count), &log[3..]].concat();
            cases.push((format!("count {count} flags {flags}"), value_of(&bytes)));
        }
    }
    for (name, bytes) in garbage(log) {
        cases.push((name.to_string(), value_of(&bytes)));
    }
    cases
}

/// Codec bytes no encoder writes, each one refused by `codec::decode`.
fn garbage(log: &[u8]) -> Vec<(&'static str, Vec<u8>)> {
    let base = varint(1_000);
    vec![
        ("empty string", Vec::new()),
        ("version only", vec![1]),
        ("version 255", [&[0xff][..], &log[1..]].concat()),
        ("unknown flags", [&[1, 0x84][..], &log[2..]].concat()),
        ("empty weighted", vec![1, 2, 0]),
        ("trailing bytes", [log, &[0, 0xff]].concat()),
        (
            "descending",
            [
                &[1, 0, 2][..],
                &base,
                &9u32.to_le_bytes(),
                &3u32.to_le_bytes(),
            ]
            .concat(),
        ),
        (
            "width 0",
            [&[1, 2, 1][..], &base, &0u32.to_le_bytes(), &[0, 1]].concat(),
        ),
        (
            "width 17",
            [&[1, 2, 1][..], &base, &0u32.to_le_bytes(), &[17, 1]].concat(),
        ),
        (
            "cost above MAX_COST",
            [
                &[1, 2, 1][..],
                &base,
                &0u32.to_le_bytes(),
                &[1],
                &varint(10_000_001),
            ]
            .concat(),
        ),
        (
            "base above 2^53",
            [&[1, 0, 1][..], &varint(1 << 60), &[0; 4]].concat(),
        ),
        (
            "varint of 11 bytes",
            [&[1, 0][..], &[0xff; 10], &[1]].concat(),
        ),
    ]
}

/// `RESTORE victim 0 <payload>`: the error text, or `None` when it restored.
fn restore(conn: &mut Connection, payload: &[u8]) -> Option<String> {
    redis::cmd("RESTORE")
        .arg("victim")
        .arg(0)
        .arg(payload)
        .query::<()>(conn)
        .err()
        .map(|e| e.to_string())
}

fn alive_and_absent(conn: &mut Connection, case: &str) {
    let pong: String = redis::cmd("PING")
        .query(conn)
        .unwrap_or_else(|e| panic!("{case}: no PING after it: {e}"));
    assert_eq!(pong, "PONG");
    let exists: i64 = redis::cmd("EXISTS").arg("victim").query(conn).unwrap();
    assert_eq!(exists, 0, "{case}: the key exists");
}

fn hostile_payloads_are_errors(kind: ServerKind) {
    let server = server(kind);
    let mut conn = server.client();
    let d = real_dump(&mut conn);
    let cases = hostile(&d);
    assert!(cases.len() > 50, "{} cases", cases.len());
    for sanitize in ["yes", "no"] {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("sanitize-dump-payload")
            .arg(sanitize)
            .query(&mut conn)
            .unwrap();
        for (case, payload) in &cases {
            let case = format!("{kind} sanitize {sanitize}, {case}");
            let err = restore(&mut conn, payload);
            let err = err.unwrap_or_else(|| panic!("{case}: RESTORE succeeded"));
            // The CRC and version passed: the value itself was refused.
            assert!(err.contains("Bad data format"), "{case}: {err}");
            alive_and_absent(&mut conn, &case);
        }
        // The real payload still restores, to the same bytes.
        assert_eq!(restore(&mut conn, &payload(&d, &value_of(&d.log))), None);
        let again: Vec<u8> = redis::cmd("DUMP").arg("victim").query(&mut conn).unwrap();
        assert_eq!(again, payload(&d, &value_of(&d.log)));
        let _: i64 = redis::cmd("DEL").arg("victim").query(&mut conn).unwrap();
    }
    // The module's log lines name the key and what was wrong.
    let log = std::fs::read_to_string(server.log_path()).unwrap();
    assert!(
        log.contains("slidelog: could not read the log of key 'victim'"),
        "{kind}: the server log names the key:\n{log}"
    );
}

#[test]
fn hostile_restore_payloads_are_errors_on_redis() {
    hostile_payloads_are_errors(ServerKind::Redis);
}

#[test]
fn hostile_restore_payloads_are_errors_on_valkey() {
    hostile_payloads_are_errors(ServerKind::Valkey);
}

/// A random log's encoding with 0 to 3 random bytes changed, sometimes cut
/// or extended: both readable and unreadable bytes, near the real ones.
fn mutated_log(rng: &mut rand::rngs::StdRng) -> Vec<u8> {
    let mut log = slidelog_core::Log::new();
    let mut ts = rng.random_range(0..1u64 << 45);
    let width = rng.random_range(1..=3);
    for _ in 0..rng.random_range(0..8) {
        let bits = rng.random_range(0..40);
        ts += rng.random_range(0..1u64 << bits);
        let costs: Vec<u64> = (0..width).map(|_| rng.random_range(1..300)).collect();
        log.append(ts, &costs);
    }
    let mut bytes = Vec::new();
    slidelog_core::codec::encode(&log, &mut bytes);
    for _ in 0..rng.random_range(0..4) {
        let at = rng.random_range(0..bytes.len());
        bytes[at] = rng.random();
    }
    match rng.random_range(0..6) {
        0 => bytes.truncate(rng.random_range(0..bytes.len())),
        1 => bytes.push(rng.random()),
        _ => {}
    }
    bytes
}

/// Seeded mutations of real encodings: RESTORE loads exactly those that
/// `codec::decode` reads whole, and refuses the rest.
fn random_logs_restore_as_the_codec_reads_them(kind: ServerKind) {
    let server = server(kind);
    let mut conn = server.client();
    let d = real_dump(&mut conn);
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let (mut loaded, mut refused) = (0, 0);
    for i in 0..2_000 {
        let bytes = mutated_log(&mut rng);
        let readable = matches!(
            slidelog_core::codec::decode(&bytes),
            Ok((_, used)) if used == bytes.len()
        );
        let err = restore(&mut conn, &payload(&d, &value_of(&bytes)));
        let case = format!("{kind} random {i}: {bytes:?}");
        assert_eq!(err.is_none(), readable, "{case}: {err:?}");
        if readable {
            loaded += 1;
            let _: i64 = redis::cmd("DEL").arg("victim").query(&mut conn).unwrap();
        } else {
            refused += 1;
        }
        alive_and_absent(&mut conn, &case);
    }
    assert!(
        loaded > 300 && refused > 300,
        "{loaded} loaded, {refused} refused"
    );
}

#[test]
fn random_logs_restore_as_the_codec_reads_them_on_redis() {
    random_logs_restore_as_the_codec_reads_them(ServerKind::Redis);
}

#[test]
fn random_logs_restore_as_the_codec_reads_them_on_valkey() {
    random_logs_restore_as_the_codec_reads_them(ServerKind::Valkey);
}

/// An RDB file (version 9, which both servers read) holding one key whose
/// module value is `body`.
fn rdb_file(d: &Dump, body: &[u8]) -> Vec<u8> {
    let mut out = b"REDIS0009".to_vec();
    out.extend_from_slice(&[0xfe, 0]);
    out.push(d.head[0]);
    out.extend_from_slice(&rdb_len(6));
    out.extend_from_slice(b"victim");
    out.extend_from_slice(&d.head[1..]);
    out.extend_from_slice(body);
    out.push(0xff);
    let crc = crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Starts `kind` with the module on `dir` (holding `dump.rdb`) and waits for
/// it to exit: its status and its log.
fn load_rdb(kind: ServerKind, dir: &std::path::Path) -> (std::process::ExitStatus, String) {
    let log = dir.join("server.log");
    let mut child = Command::new(kind.binary())
        .args(["--port", &slidelog_testkit::free_port().to_string()])
        .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .arg("--loadmodule")
        .arg(slidelog_testkit::module_path())
        .arg("--dir")
        .arg(dir)
        .arg("--logfile")
        .arg(&log)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the server");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{kind} loaded a hostile RDB file and kept running");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status, std::fs::read_to_string(log).unwrap_or_default())
}

fn a_hostile_rdb_file_stops_the_server_cleanly(kind: ServerKind) {
    let d = {
        let server = server(kind);
        real_dump(&mut server.client())
    };
    let log = &d.log;
    let cases = [
        (
            "opcode 2",
            [&[2][..], &rdb_len(log.len() as u64), log, &[0]].concat(),
        ),
        (
            "string 100 bytes short",
            [&[5][..], &rdb_len(log.len() as u64 + 100), log, &[0]].concat(),
        ),
    ];
    for (case, body) in cases {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("dump.rdb"), rdb_file(&d, &body)).unwrap();
        let (status, text) = load_rdb(kind, dir.path());
        assert_eq!(status.code(), Some(1), "{kind} {case}: {status}\n{text}");
        assert!(
            !text.contains("BUG REPORT"),
            "{kind} {case}: a panic\n{text}"
        );
        assert!(
            text.contains("slidelog: could not read the log of key 'victim'"),
            "{kind} {case}: the log names the key\n{text}"
        );
    }
}

#[test]
fn a_hostile_rdb_file_stops_redis_cleanly() {
    a_hostile_rdb_file_stops_the_server_cleanly(ServerKind::Redis);
}

#[test]
fn a_hostile_rdb_file_stops_valkey_cleanly() {
    a_hostile_rdb_file_stops_the_server_cleanly(ServerKind::Valkey);
}

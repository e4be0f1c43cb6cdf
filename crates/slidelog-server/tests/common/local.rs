//! Helpers of the local policy's tests (docs/design.md §6, "Local
//! answers"): `slidelog serve --on-store-error local --local-share 0.34`
//! as a child, one check, the units a key's log holds on Redis, a series
//! of `/metrics`.
#![allow(dead_code)]

use super::{child, raw_http};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// One kept-alive HTTP/1.1 connection to a service: what a client that
/// pools its connections sees, so a check's time is the service's answer,
/// not a TCP handshake and teardown per request.
pub struct KeepAlive {
    reader: BufReader<TcpStream>,
    addr: String,
}

impl KeepAlive {
    /// Connects to `service`.
    pub fn to(service: &child::Serve) -> Self {
        let tcp = TcpStream::connect(&service.addr).expect("connect");
        tcp.set_read_timeout(Some(raw_http::TIMEOUT)).unwrap();
        tcp.set_nodelay(true).unwrap();
        Self {
            reader: BufReader::new(tcp),
            addr: service.addr.clone(),
        }
    }

    /// One check of `key` on this connection: (admitted, degraded, time).
    pub fn check(&mut self, key: &str) -> (bool, bool, Duration) {
        let body = body(key);
        let started = Instant::now();
        write!(
            self.reader.get_mut(),
            "POST /v1/check HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            self.addr,
            body.len()
        )
        .expect("send");
        let (status, answer) = self.answer();
        let took = started.elapsed();
        assert!(status == 200 || status == 429, "{status} {answer}");
        (status == 200, answer.contains(r#""degraded":true"#), took)
    }

    /// Reads one answer: its status and its body (by Content-Length).
    fn answer(&mut self) -> (u16, String) {
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("status line");
        let status = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .expect("status");
        let mut length = 0;
        loop {
            line.clear();
            self.reader.read_line(&mut line).expect("header");
            if line == "\r\n" {
                break;
            }
            let lower = line.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                length = v.trim().parse().expect("content-length");
            }
        }
        let mut body = vec![0; length];
        self.reader.read_exact(&mut body).expect("body");
        (status, String::from_utf8_lossy(&body).into_owned())
    }
}

/// The limit of every check here.
pub const MAX: u64 = 30;
/// ceil(30 × 0.34).
pub const SHARE_MAX: u64 = 11;

pub fn body(key: &str) -> String {
    format!(r#"{{"key":"{key}","max":{MAX},"window_ms":60000}}"#)
}

pub fn serve(url: &str, extra: &[&str]) -> child::Serve {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_slidelog"));
    command
        .args(["serve", "--http", "127.0.0.1:0", "--no-grpc"])
        .args(["--store", url, "--store-timeout", "100ms"])
        .args(["--on-store-error", "local", "--local-share", "0.34"])
        .args(extra)
        .env_remove("SLIDELOG_STORE")
        .env("RUST_LOG", "info");
    child::spawn(command)
}

/// One check: (admitted, degraded, how long it took).
pub fn check(service: &child::Serve, key: &str) -> (bool, bool, Duration) {
    let started = Instant::now();
    let (status, answer) = raw_http::check(&service.addr, &body(key));
    let took = started.elapsed();
    assert!(status == 200 || status == 429, "{status} {answer}");
    let degraded = answer.contains(r#""degraded":true"#);
    (status == 200, degraded, took)
}

/// The units `key`'s log holds on Redis: the sum of its members' costs
/// (a plain member costs 1, `<id>#c` costs c: a charge into a full log
/// merges into the newest record).
pub fn stored(conn: &mut redis::Connection, key: &str) -> u64 {
    let members: Vec<String> = redis::cmd("ZRANGE")
        .arg(format!("rate:sliding:{key}"))
        .arg(0)
        .arg(-1)
        .query(conn)
        .unwrap_or_default();
    members
        .iter()
        .map(|m| match m.split_once('#') {
            None => 1,
            Some((_, costs)) => costs
                .split(',')
                .next()
                .and_then(|c| c.parse().ok())
                .unwrap_or(1),
        })
        .sum()
}

/// A series of `/metrics`, 0 when absent.
pub fn metric(service: &child::Serve, series: &str) -> f64 {
    let text = raw_http::get(&service.addr, "/metrics").1;
    text.lines()
        .find_map(|l| {
            l.strip_prefix(series)?
                .strip_prefix(' ')?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0.0)
}

/// The p99 of `samples`.
pub fn p99(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[(samples.len() * 99).div_ceil(100) - 1]
}

/// Waits until the Redis at `redis_url` holds `want` units for `key` and no instance has a
/// record left to charge back; returns how long that took.
pub fn until_charged_back(
    redis_url: &str,
    services: &[&child::Serve],
    key: &str,
    want: u64,
) -> Duration {
    let started = Instant::now();
    let mut conn = loop {
        if let Ok(c) = redis::Client::open(redis_url).and_then(|c| c.get_connection()) {
            break c;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "no connection");
        std::thread::sleep(Duration::from_millis(10));
    };
    loop {
        let have = stored(&mut conn, key);
        let pending: f64 = services
            .iter()
            .map(|s| metric(s, "slidelog_local_journal_records"))
            .sum();
        if have == want && pending == 0.0 {
            return started.elapsed();
        }
        assert!(
            have <= want,
            "Redis holds {have} units of {key}, more than {want}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "after 10 s Redis holds {have} of {want}; {pending} records pending"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

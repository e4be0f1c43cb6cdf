//! Idle and hostile clients cannot lock anyone out
//! (docs/design.md §6). Before the fix, with 1,024 file descriptors, 1,050 connections that
//! sent nothing stopped both ports from accepting ("Too many open files"
//! every second) until they were released, and 500 slowloris connections
//! were never closed.
//!
//! The service runs as a child under `prlimit --nofile=1024:1024`; this test
//! process raises its own soft limit (with `prlimit --pid`) when it is too
//! low to open 1,050 connections.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_slidelog");

mod common;

use common::child;
use common::raw_http;

/// `slidelog serve` on the memory store with 1,024 descriptors, ready once
/// it listens.
fn serve(extra: &[&str]) -> child::Serve {
    let prlimit = Command::new("prlimit").arg("--version").output();
    assert!(
        prlimit.is_ok_and(|out| out.status.success()),
        "run prlimit (util-linux; apt-get install -y util-linux)"
    );
    let mut command = Command::new("prlimit");
    command
        .arg("--nofile=1024:1024")
        .arg(BIN)
        .args(["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"])
        .args(extra)
        .env_remove("SLIDELOG_STORE");
    child::spawn(command)
}

/// Makes sure this process may open `n` more descriptors.
fn ensure_nofile(n: usize) {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let mut fields = line["Max open files".len()..].split_whitespace();
    let soft: usize = fields.next().unwrap().parse().unwrap_or(usize::MAX);
    let hard: usize = fields.next().unwrap().parse().unwrap_or(usize::MAX);
    if soft >= n {
        return;
    }
    assert!(
        hard >= n,
        "this test needs {n} descriptors; the hard limit is {hard}: raise it (ulimit -Hn)"
    );
    let status = Command::new("prlimit")
        .arg(format!("--pid={}", std::process::id()))
        .arg(format!("--nofile={hard}:{hard}"))
        .status()
        .expect("prlimit");
    assert!(
        status.success(),
        "prlimit could not raise this test's limit"
    );
}

/// GETs `path`, waiting 5 s at most; returns the status or what failed.
fn http_get(addr: &str, path: &str) -> Result<u16, String> {
    raw_http::try_request(addr, "GET", path, "", "", Duration::from_secs(5))
        .map(|(status, _)| status)
}

/// An HTTP/2 client's first bytes: the connection preface and an empty
/// SETTINGS frame.
fn client_preface() -> Vec<u8> {
    let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    hello.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    hello
}

/// An HTTP/2 client preface; true when the server answers with SETTINGS.
fn grpc_port_answers(addr: &str) -> bool {
    let Ok(mut tcp) = TcpStream::connect(addr) else {
        return false;
    };
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    if tcp.write_all(&client_preface()).is_err() {
        return false;
    }
    let mut frame = [0u8; 9];
    tcp.read_exact(&mut frame).is_ok() && frame[3] == 4
}

#[test]
fn idle_connections_do_not_lock_new_clients_out() {
    ensure_nofile(2_500);
    let service = serve(&[]);
    assert_eq!(http_get(&service.addr, "/healthz"), Ok(200));
    // 1,050 connections to each port that send nothing: more than the
    // service's 1,024 descriptors in all.
    let mut idle = Vec::new();
    let grpc = service.grpc_addr();
    for addr in [&service.addr, &grpc] {
        for _ in 0..1_050 {
            match TcpStream::connect(addr) {
                Ok(tcp) => idle.push(tcp),
                Err(e) => panic!("connect {addr}: {e}"),
            }
        }
    }
    std::thread::sleep(Duration::from_millis(800));
    // A new client of each port is served, at once and repeatedly.
    for round in 0..5 {
        let started = Instant::now();
        assert_eq!(
            http_get(&service.addr, "/healthz"),
            Ok(200),
            "round {round}"
        );
        assert!(grpc_port_answers(&grpc), "round {round}: gRPC port");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        std::thread::sleep(Duration::from_millis(600));
    }
    drop(idle);
}

#[test]
fn slowloris_connections_are_closed_after_the_header_timeout() {
    ensure_nofile(1_000);
    let service = serve(&["--http-header-timeout", "1s"]);
    let mut slow: Vec<TcpStream> = (0..500)
        .map(|_| {
            let mut tcp = TcpStream::connect(&service.addr).unwrap();
            tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
                .unwrap();
            tcp.set_nonblocking(true).unwrap();
            tcp
        })
        .collect();
    let started = Instant::now();
    let mut open = slow.len();
    // Drip one header line at a time (activity, but never a full request).
    while open > 0 && started.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(200));
        open = 0;
        for tcp in &mut slow {
            let _ = tcp.write_all(b"X-Drip: 1\r\n");
            let mut buf = [0u8; 256];
            match tcp.read(&mut buf) {
                Ok(0) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::TimedOut => {
                    open += 1
                }
                // A 408 answer or a reset: closed as well.
                _ => {}
            }
        }
    }
    let took = started.elapsed();
    println!("500 slowloris connections closed after {took:?} (header timeout 1s)");
    assert_eq!(
        open, 0,
        "{open} slowloris connections still open after {took:?}"
    );
    assert!(took < Duration::from_secs(4), "{took:?}");
    assert_eq!(http_get(&service.addr, "/healthz"), Ok(200));
}

/// Reads HTTP/2 frames (type, payload) until `until` holds or 5 s pass.
fn read_frames(tcp: &mut TcpStream, mut until: impl FnMut(u8, &[u8]) -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    while Instant::now() < deadline {
        let mut head = [0u8; 9];
        if tcp.read_exact(&mut head).is_err() {
            return false;
        }
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let mut payload = vec![0u8; len];
        if tcp.read_exact(&mut payload).is_err() {
            return false;
        }
        if until(head[3], &payload) {
            return true;
        }
    }
    false
}

#[test]
fn grpc_caps_streams_and_sends_keepalive_pings() {
    let service = serve(&["--grpc-max-streams", "7", "--grpc-keepalive-interval", "1s"]);
    let mut tcp = TcpStream::connect(service.grpc_addr()).unwrap();
    tcp.write_all(&client_preface()).unwrap();
    // SETTINGS_MAX_CONCURRENT_STREAMS (id 3) = 7 in the server's SETTINGS.
    let capped = read_frames(&mut tcp, |kind, payload| {
        kind == 4
            && payload.chunks(6).any(|s| {
                s.len() == 6
                    && u16::from_be_bytes([s[0], s[1]]) == 3
                    && u32::from_be_bytes([s[2], s[3], s[4], s[5]]) == 7
            })
    });
    assert!(capped, "no SETTINGS_MAX_CONCURRENT_STREAMS = 7");
    // An idle connection gets a PING (type 6) within the interval.
    let started = Instant::now();
    assert!(
        read_frames(&mut tcp, |kind, _| kind == 6),
        "no keep-alive PING"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

/// A peer that stops answering keep-alive PINGs is closed once the timeout
/// after the PING passes (hyper's keep-alive on serve's own timer,
/// `h2_timer.rs`), and one that answers them stays open.
#[test]
fn grpc_closes_a_peer_that_does_not_answer_keepalive_pings() {
    let service = serve(&[
        "--grpc-keepalive-interval",
        "500ms",
        "--grpc-keepalive-timeout",
        "500ms",
    ]);

    // Answers every PING (an ACK: flags 1, the same 8 bytes): still open
    // after several intervals.
    let mut live = TcpStream::connect(service.grpc_addr()).unwrap();
    live.write_all(&client_preface()).unwrap();
    let mut answer = live.try_clone().unwrap();
    let mut pings = 0;
    let answered = read_frames(&mut live, |kind, payload| {
        // Only the server's PINGs, not its ACKs of ours (flags byte unseen
        // here: the ACK of a PING carries the same payload back, and we
        // send none).
        if kind == 6 {
            let mut ack = vec![0, 0, 8, 6, 1, 0, 0, 0, 0];
            ack.extend_from_slice(payload);
            answer.write_all(&ack).unwrap();
            pings += 1;
        }
        pings == 4
    });
    assert!(
        answered,
        "answered {pings} PINGs, then the connection ended"
    );

    // Never answers: closed (EOF, after a GOAWAY) within interval + timeout.
    let mut silent = TcpStream::connect(service.grpc_addr()).unwrap();
    silent.write_all(&client_preface()).unwrap();
    assert!(read_frames(&mut silent, |kind, _| kind == 6), "no PING");
    let pinged = Instant::now();
    silent
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut rest = Vec::new();
    let closed = silent.read_to_end(&mut rest);
    let took = pinged.elapsed();
    assert!(closed.is_ok(), "not closed within 10 s: {closed:?}");
    assert!(
        took < Duration::from_secs(3),
        "closed {took:?} after the PING"
    );
}

/// A client that makes the server reset stream after stream (malformed
/// requests: a HEADERS frame without `:path`) gets a GOAWAY with
/// ENHANCE_YOUR_CALM once it has caused 1,024 of them (h2's bound, which
/// `tonic::transport::Server` turns off unless told otherwise).
#[test]
fn grpc_cuts_off_a_client_that_makes_it_reset_stream_after_stream() {
    let service = serve(&[]);
    flood_of_resets_gets_goaway(&service.grpc_addr());
    // The port still serves others.
    assert!(grpc_port_answers(&service.grpc_addr()));
}

/// The same bound on the Envoy crate's own `serve_grpc`, the tonic server
/// that embedders and its tests run.
#[test]
fn the_envoy_crates_serve_grpc_cuts_off_the_same_client() {
    use slidelog_envoy::{ConfigHandle, RateLimitConfig, RateLimiter, ServiceOptions};
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let addr = runtime.block_on(async {
        let config = RateLimitConfig::from_yaml_str(
            "hygiene.yaml",
            "domain: bench\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 10}\n",
        )
        .unwrap();
        let limiter = std::sync::Arc::new(RateLimiter::new(
            slidelog::Limiter::from_store(std::sync::Arc::new(slidelog_memory::MemoryStore::new())),
            ConfigHandle::fixed(config),
            ServiceOptions::default(),
        ));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(slidelog_envoy::service::serve_grpc(
            listener,
            limiter,
            std::future::pending(),
        ));
        addr
    });
    flood_of_resets_gets_goaway(&addr);
    assert!(grpc_port_answers(&addr));
}

/// Sends 1,100 malformed requests on one connection to `addr` and asserts
/// the GOAWAY with ENHANCE_YOUR_CALM (error code 11) that ends it.
fn flood_of_resets_gets_goaway(addr: &str) {
    let mut tcp = TcpStream::connect(addr).unwrap();
    let mut bytes = client_preface();
    // 1,100 requests of one header, `:method: POST` (HPACK static index
    // 3), END_STREAM | END_HEADERS, on streams 1, 3, 5, …
    for i in 0..1_100u32 {
        let stream = 2 * i + 1;
        bytes.extend_from_slice(&[0, 0, 1, 1, 0x05]);
        bytes.extend_from_slice(&stream.to_be_bytes());
        bytes.push(0x83);
    }
    let mut writer = tcp.try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        // The server may close before reading everything.
        let _ = writer.write_all(&bytes);
    });
    // GOAWAY (type 7): last stream id, then the error code, 11.
    let mut code = None;
    read_frames(&mut tcp, |kind, payload| {
        if kind == 7 && payload.len() >= 8 {
            code = Some(u32::from_be_bytes([
                payload[4], payload[5], payload[6], payload[7],
            ]));
            return true;
        }
        false
    });
    let _ = sender.join();
    assert_eq!(
        code,
        Some(11),
        "no GOAWAY with ENHANCE_YOUR_CALM from {addr}"
    );
}

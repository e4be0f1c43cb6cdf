//! A full memory store over a real `serve`: new keys get 503 with a
//! `Retry-After` of the time until the first held log expires, at most 60 s
//! (never the 366 days a long window could give); held keys are decided
//! exactly; `/metrics` says what the store holds against its budget, that
//! it is full and how many keys it refused; the log says so once per
//! episode, naming the bound and the time until the first log expires.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

mod common;

use common::child;
use common::raw_http::{get, metric};

/// `POST /v1/check` with `body`; returns the status, the `Retry-After`
/// header (when there is one) and the body.
fn check(addr: &str, body: &str) -> (u16, Option<u64>, String) {
    let mut tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        tcp,
        "POST /v1/check HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let retry_after = head.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.eq_ignore_ascii_case("retry-after")
            .then(|| value.trim().parse().unwrap())
    });
    (status, retry_after, body.to_owned())
}

fn body(key: &str, window_ms: u64) -> String {
    format!(r#"{{"key":"{key}","max":2,"window_ms":{window_ms}}}"#)
}

/// The log lines `service` wrote within `wait`.
fn log_lines(service: &child::Serve, wait: Duration) -> Vec<String> {
    let deadline = Instant::now() + wait;
    let mut lines = Vec::new();
    while let Ok(line) = service
        .log
        .recv_timeout(deadline.saturating_duration_since(Instant::now()))
    {
        lines.push(line);
    }
    lines
}

#[test]
fn a_full_store_refuses_new_keys_with_a_bounded_retry_after_and_says_so_once() {
    // Keys of a 366-day window: the first held log expires in a year.
    let year = 31_622_400_000;
    let service = child::serve(&["--memory-key-cap", "3"]);
    for k in 0..3 {
        assert_eq!(
            check(&service.addr, &body(&format!("held-{k}"), year)).0,
            200
        );
    }
    for k in 0..20 {
        let (status, retry_after, answer) = check(&service.addr, &body(&format!("new-{k}"), year));
        assert_eq!(status, 503, "{answer}");
        assert_eq!(retry_after, Some(60), "bounded, not a year: {answer}");
        let error: serde_json::Value = serde_json::from_str(&answer).unwrap();
        let error = error["error"].as_str().unwrap();
        assert!(
            error.contains("store full") && error.contains("--memory-key-cap"),
            "{error}"
        );
        // Held keys are decided exactly meanwhile: the second check fits, the third not.
        if k < 2 {
            let held = check(&service.addr, &body("held-0", year)).0;
            assert_eq!(held, if k == 0 { 200 } else { 429 });
        }
    }
    let (_, text) = get(&service.addr, "/metrics");
    assert_eq!(metric(&text, "slidelog_memory_full"), 1.0, "{text}");
    assert_eq!(
        metric(&text, "slidelog_memory_full_refusals_total"),
        20.0,
        "{text}"
    );
    assert_eq!(metric(&text, "slidelog_memory_keys"), 3.0);
    let bytes = metric(&text, "slidelog_memory_bytes");
    assert!(bytes > 3.0 * 80.0 && bytes < 4_096.0, "{bytes}");
    assert_eq!(
        metric(&text, "slidelog_memory_limit_bytes"),
        1_073_741_824.0
    );
    // Over a second later, after held keys were decided (which ended the
    // limiter's outage episodes after a quiet second): the same episode.
    std::thread::sleep(Duration::from_millis(1_200));
    assert_eq!(check(&service.addr, &body("held-1", year)).0, 200);
    assert_eq!(check(&service.addr, &body("new-late", year)).0, 503);
    let warnings: Vec<String> = log_lines(&service, Duration::from_millis(500))
        .into_iter()
        .filter(|l| l.contains("WARN"))
        .collect();
    assert_eq!(warnings.len(), 1, "one line per episode: {warnings:#?}");
    let line = &warnings[0];
    for says in [
        "memory store full",
        "--memory-key-cap",
        "first_log_expires_in",
    ] {
        assert!(line.contains(says), "no {says:?} in {line}");
    }
}

#[test]
fn the_retry_after_of_a_full_store_is_the_time_until_its_first_log_expires() {
    let service = child::serve(&["--memory-key-cap", "1"]);
    assert_eq!(check(&service.addr, &body("held", 20_000)).0, 200);
    let (status, retry_after, answer) = check(&service.addr, &body("new", 20_000));
    assert_eq!(status, 503, "{answer}");
    let retry_after = retry_after.expect("a Retry-After");
    assert!((19..=20).contains(&retry_after), "{retry_after}");
}

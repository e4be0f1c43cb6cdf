//! A raw HTTP/1.1 client: one TCP connection per request, `Connection:
//! close`, the answer read to its end. The tests that run the built binary
//! speak to it with nothing in between (no client library that retries,
//! pools connections or adds headers).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// How long a request waits for its answer.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Sends `method path` with a JSON `body` (empty for none) and `extra`
/// header lines (each ending in `\r\n`) to `addr`; returns the status and
/// the body. Panics when no HTTP answer comes within [`TIMEOUT`].
pub fn request(addr: &str, method: &str, path: &str, body: &str, extra: &str) -> (u16, String) {
    try_request(addr, method, path, body, extra, TIMEOUT)
        .unwrap_or_else(|e| panic!("{method} {path} on {addr}: {e}"))
}

/// Sends `GET path`; returns the status and the body.
pub fn get(addr: &str, path: &str) -> (u16, String) {
    request(addr, "GET", path, "", "")
}

/// The value of the unlabelled series `name` in a Prometheus text page (the
/// body of `GET /metrics`); panics, showing the page, when it is not there.
pub fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

/// Sends `POST /v1/check` with `body`; returns the status and the body.
pub fn check(addr: &str, body: &str) -> (u16, String) {
    request(addr, "POST", "/v1/check", body, "")
}

/// Does what [`request`] does, waiting `timeout` for the answer, and says
/// what went wrong instead of panicking.
pub fn try_request(
    addr: &str,
    method: &str,
    path: &str,
    body: &str,
    extra: &str,
    timeout: Duration,
) -> Result<(u16, String), String> {
    let mut tcp = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
    tcp.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    write!(
        tcp,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n{extra}\r\n{body}",
        body.len()
    )
    .map_err(|e| format!("send: {e}"))?;
    let mut answer = String::new();
    tcp.read_to_string(&mut answer)
        .map_err(|e| format!("read: {e}"))?;
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no HTTP answer: {answer:?}"))?;
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
    Ok((status, body))
}

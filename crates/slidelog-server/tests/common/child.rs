//! The built `slidelog serve` as a child process, ready once it has logged
//! the address it listens on (`http_addr=…` in the "slidelog listening"
//! line): the readiness signal, never a sleep. Killed on drop.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A running `slidelog serve`.
pub struct Serve {
    /// The child process.
    pub child: Child,
    /// `127.0.0.1:PORT` of its HTTP API.
    pub addr: String,
    /// Log lines up to and including the "listening" one.
    pub early_log: Vec<String>,
    /// Later log lines.
    pub log: mpsc::Receiver<String>,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Serve {
    /// `http://ADDR` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// `127.0.0.1:PORT` of its gRPC API, from the listening line (panics
    /// when it was started with --no-grpc).
    pub fn grpc_addr(&self) -> String {
        self.early_log
            .iter()
            .find_map(|l| l.split("grpc_addr=").nth(1))
            .and_then(|rest| rest.split_whitespace().next())
            .filter(|addr| *addr != "off")
            .expect("grpc_addr in the listening line")
            .to_owned()
    }
}

/// `slidelog serve --http 127.0.0.1:0 --no-grpc ARGS`.
pub fn serve(args: &[&str]) -> Serve {
    let mut command = Command::new(env!("CARGO_BIN_EXE_slidelog"));
    command
        .arg("serve")
        .args(["--http", "127.0.0.1:0", "--no-grpc"])
        .args(args);
    spawn(command)
}

/// Starts `command` (a `slidelog serve`, possibly through `sh -c 'exec …'`)
/// and waits until it logs its HTTP address. Panics with its log when it
/// exits or says nothing within 30 s.
pub fn spawn(mut command: Command) -> Serve {
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start slidelog serve");
    let stderr = child.stderr.take().expect("piped stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut early_log = Vec::new();
    let addr = loop {
        let Ok(line) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) else {
            let _ = child.kill();
            let status = child.wait();
            panic!(
                "{command:?} logged no listening address within 30 s ({status:?}):\n{}",
                early_log.join("\n")
            );
        };
        let addr = line
            .split("http_addr=")
            .nth(1)
            .map(|rest| rest.split_whitespace().next().unwrap_or("").to_owned());
        early_log.push(line);
        if let Some(addr) = addr {
            break addr;
        }
    };
    Serve {
        child,
        addr,
        early_log,
        log: rx,
    }
}

/// Sends `which` (`-TERM`, `-KILL`, …) to `child` with `kill`.
pub fn signal(child: &Child, which: &str) {
    let status = Command::new("kill")
        .args([which, &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
}

/// Waits for `child` to exit, at most `within` (polling every 20 ms), and
/// returns its status; panics naming `what` it waited for when it does not.
pub fn exit_status(child: &mut Child, within: Duration, what: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "serve did not exit within {within:?} of {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

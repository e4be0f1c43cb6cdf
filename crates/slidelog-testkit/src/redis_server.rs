//! One `redis-server` (or `valkey-server`, see [`ServerKind`]) child process
//! on a free 127.0.0.1 port, with its own working directory; stop, kill and
//! restart (on the same port) for failure tests.

use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use crate::server_kind::ServerKind;

/// The server binary of the default kind ([`ServerKind::from_env`]):
/// `redis-server` unless `SLIDELOG_TEST_SERVER=valkey`. Panics with the
/// install command when there is none.
pub fn redis_server_binary() -> PathBuf {
    ServerKind::from_env().binary()
}

/// A free TCP port on 127.0.0.1 (the OS picks it; it is free when returned).
pub fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind 127.0.0.1:0")
}

/// True when `info` (`INFO server`) is process `pid`'s.
pub(crate) fn is_process(info: &str, pid: u32) -> bool {
    crate::admin::info_field(info, "process_id") == Some(pid.to_string())
}

/// A running `redis-server` that this test started. Killed on drop.
#[derive(Debug)]
pub struct RedisServer {
    kind: ServerKind,
    port: u16,
    extra_args: Vec<String>,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts a standalone server of the default kind
    /// ([`ServerKind::from_env`]) on a free port (nothing persisted).
    pub fn start() -> Self {
        Self::start_with_args(&[])
    }

    /// Starts a standalone server of `kind` on a free port.
    pub fn start_kind(kind: ServerKind) -> Self {
        Self::start_kind_with_args(kind, &[])
    }

    /// Starts a server with extra arguments, e.g. `["--requirepass", "pw"]`.
    pub fn start_with_args(args: &[&str]) -> Self {
        Self::start_kind_with_args(ServerKind::from_env(), args)
    }

    /// Starts a server of `kind` with extra arguments.
    pub fn start_kind_with_args(kind: ServerKind, args: &[&str]) -> Self {
        Self::try_start_kind_with_args(kind, args, 10)
            .unwrap_or_else(|e| panic!("could not start {kind}-server: {e}"))
    }

    /// Like [`start_with_args`](Self::start_with_args), `attempts` times on
    /// fresh ports, returning the last error instead of panicking (for
    /// callers that must change other arguments between attempts, such as a
    /// cluster node's bus port).
    pub fn try_start_with_args(args: &[&str], attempts: usize) -> Result<Self, String> {
        Self::try_start_kind_with_args(ServerKind::from_env(), args, attempts)
    }

    /// Like [`try_start_with_args`](Self::try_start_with_args) for a server of `kind`.
    pub fn try_start_kind_with_args(
        kind: ServerKind,
        args: &[&str],
        attempts: usize,
    ) -> Result<Self, String> {
        // A missing binary is not worth retrying: say what to install.
        if kind.find_binary().is_none() {
            return Err(kind.install_hint().to_owned());
        }
        let extra_args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        // A port that was free a moment ago can be taken by a parallel test:
        // try a few.
        let mut last_error = String::new();
        for _ in 0..attempts {
            let mut server = Self {
                kind,
                port: free_port(),
                extra_args: extra_args.clone(),
                // Its own directory, kept as long as the server (a restart
                // starts in it again).
                dir: tempfile::tempdir().expect("temp dir for redis-server"),
                child: None,
            };
            match server.spawn() {
                Ok(()) => return Ok(server),
                Err(e) => last_error = e,
            }
        }
        Err(last_error)
    }

    /// Which server this is.
    pub fn kind(&self) -> ServerKind {
        self.kind
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT` (no credentials).
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// `host:port`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The server's working directory (nodes.conf, logs).
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// A synchronous client connection (for seeding and reading in tests).
    /// Uses the `requirepass` given at start, if any.
    pub fn client(&self) -> redis::Connection {
        let client = redis::Client::open(self.authenticated_url()).expect("redis url");
        client
            .get_connection_with_timeout(Duration::from_secs(5))
            .expect("connect to test redis")
    }

    fn authenticated_url(&self) -> String {
        match self.arg_value("--requirepass") {
            Some(pw) => format!("redis://:{pw}@127.0.0.1:{}", self.port),
            None => self.url(),
        }
    }

    fn arg_value(&self, name: &str) -> Option<&str> {
        let i = self.extra_args.iter().position(|a| a == name)?;
        self.extra_args.get(i + 1).map(String::as_str)
    }

    /// Kills the server (SIGKILL) and waits for it to exit.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port after [`kill`](Self::kill)
    /// (its data is gone: nothing is persisted).
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match self.spawn() {
                Ok(()) => return,
                // The port may linger briefly after a kill.
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => panic!("could not restart redis-server on {}: {e}", self.port),
            }
        }
    }

    /// The process id of the running server.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Freezes the server (SIGSTOP): connections stay open and nothing
    /// answers, like a hung or partitioned Redis. [`resume`](Self::resume)
    /// undoes it; dropping the server kills it either way.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Lets a [`pause`](Self::pause)d server run again (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, which: &str) {
        let pid = self.pid().expect("redis-server is running");
        let status = Command::new("kill")
            .args([which, &pid.to_string()])
            .status()
            .expect("the kill command");
        assert!(status.success(), "kill {which} {pid} failed");
    }

    /// True while the child process runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    fn spawn(&mut self) -> Result<(), String> {
        let mut child = Command::new(self.kind.binary())
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(["--daemonize", "no", "--protected-mode", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .args(&self.extra_args)
            // Redis logs (and says why it stops) on stdout: into a file of
            // ours, so a failed start can tell why without a pipe that a
            // long-running server could fill.
            .arg("--logfile")
            .arg(self.log_path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("{} ({e})", self.kind.install_hint()))?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(5).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                return Err(format!(
                    "{}-server on port {} exited with {status}: {}",
                    self.kind,
                    self.port,
                    tail.join(" | ")
                ));
            }
            if self.answers_as(child.id()) {
                self.child = Some(child);
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        Err(format!(
            "{}-server did not answer PING within 10 s",
            self.kind
        ))
    }

    /// The server's log file (in its own directory).
    pub fn log_path(&self) -> std::path::PathBuf {
        self.dir.path().join("redis.log")
    }

    /// True once the server on the port answers PING, as process `pid`: a
    /// PING alone could be answered by another test's server that took the port
    /// between `free_port` and this server's bind (this one then exits).
    fn answers_as(&self, pid: u32) -> bool {
        let Ok(client) = redis::Client::open(self.authenticated_url()) else {
            return false;
        };
        let Ok(mut conn) = client.get_connection_with_timeout(Duration::from_millis(200)) else {
            return false;
        };
        // PING first: a server loading its data answers INFO but not PING.
        if redis::cmd("PING").query::<String>(&mut conn).is_err() {
            return false;
        }
        let info = redis::cmd("INFO").arg("server").query::<String>(&mut conn);
        info.is_ok_and(|info| is_process(&info, pid))
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

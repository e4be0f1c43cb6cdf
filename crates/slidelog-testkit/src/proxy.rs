//! A loopback TCP proxy that can black-hole connections: [`FreezingProxy`]
//! forwards every new connection to a target, and [`FreezingProxy::freeze`]
//! makes the connections open at that moment keep their sockets open while
//! dropping every byte in both directions — what a dead NAT or conntrack
//! entry, a frozen VM or a proxy that lost its upstream look like to a
//! client. Connections opened after a freeze are forwarded normally, so a
//! client that replaces its connection recovers. Blocking threads, so the
//! harness needs no async runtime.

use parking_lot::Mutex;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

/// One forwarded connection: both sockets and whether its bytes are dropped.
#[derive(Debug)]
struct Link {
    client: TcpStream,
    upstream: TcpStream,
    frozen: AtomicBool,
    closed: AtomicBool,
}

#[derive(Debug, Default)]
struct State {
    links: Mutex<Vec<Arc<Link>>>,
    accepted: AtomicU64,
    stop: AtomicBool,
}

/// A forwarding proxy on a free 127.0.0.1 port (see the module docs).
/// Stops and closes every connection on drop.
#[derive(Debug)]
pub struct FreezingProxy {
    port: u16,
    state: Arc<State>,
    accept: Option<thread::JoinHandle<()>>,
}

impl FreezingProxy {
    /// Starts forwarding `127.0.0.1:<port>` to `target` (`host:port`).
    pub fn start(target: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().expect("proxy address").port();
        listener
            .set_nonblocking(true)
            .expect("non-blocking proxy listener");
        let state = Arc::new(State::default());
        let target = target.to_owned();
        let accept = {
            let state = state.clone();
            thread::spawn(move || accept_loop(listener, &target, &state))
        };
        Self {
            port,
            state,
            accept: Some(accept),
        }
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr())
    }

    /// How many connections the proxy has accepted so far.
    pub fn accepted(&self) -> u64 {
        self.state.accepted.load(Ordering::SeqCst)
    }

    /// How many connections are open (not yet closed by either side).
    pub fn open_connections(&self) -> usize {
        self.links()
            .iter()
            .filter(|l| !l.closed.load(Ordering::SeqCst))
            .count()
    }

    /// Black-holes every connection open now: they stay open and their
    /// bytes are dropped. Returns how many were frozen.
    pub fn freeze(&self) -> usize {
        let links = self.links();
        let open: Vec<_> = links
            .iter()
            .filter(|l| !l.closed.load(Ordering::SeqCst))
            .collect();
        for l in &open {
            l.frozen.store(true, Ordering::SeqCst);
        }
        open.len()
    }

    /// Forwards the frozen connections' bytes again (those dropped meanwhile
    /// stay lost, as on a real network).
    pub fn unfreeze(&self) {
        for l in self.links() {
            l.frozen.store(false, Ordering::SeqCst);
        }
    }

    fn links(&self) -> Vec<Arc<Link>> {
        self.state.links.lock().clone()
    }
}

impl Drop for FreezingProxy {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        for l in self.links() {
            let _ = l.client.shutdown(Shutdown::Both);
            let _ = l.upstream.shutdown(Shutdown::Both);
        }
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

fn accept_loop(listener: TcpListener, target: &str, state: &Arc<State>) {
    while !state.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((client, _)) => {
                state.accepted.fetch_add(1, Ordering::SeqCst);
                let _ = client.set_nonblocking(false);
                let Ok(upstream) = TcpStream::connect(target) else {
                    // The target is down: the client sees its connection close.
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = upstream.set_nodelay(true);
                let link = Arc::new(Link {
                    client,
                    upstream,
                    frozen: AtomicBool::new(false),
                    closed: AtomicBool::new(false),
                });
                state.links.lock().push(link.clone());
                spawn_pump(link.clone(), true);
                spawn_pump(link, false);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                thread::sleep(Duration::from_millis(5));
            }
            Err(_) => thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// Copies one direction (client → upstream when `outbound`) until either
/// side closes, dropping the bytes while the link is frozen.
fn spawn_pump(link: Arc<Link>, outbound: bool) {
    thread::spawn(move || {
        let (Ok(mut from), Ok(mut to)) = (
            if outbound {
                link.client.try_clone()
            } else {
                link.upstream.try_clone()
            },
            if outbound {
                link.upstream.try_clone()
            } else {
                link.client.try_clone()
            },
        ) else {
            return;
        };
        let mut buf = [0u8; 16 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if link.frozen.load(Ordering::SeqCst) {
                        continue;
                    }
                    if to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        link.closed.store(true, Ordering::SeqCst);
        let _ = link.client.shutdown(Shutdown::Both);
        let _ = link.upstream.shutdown(Shutdown::Both);
    });
}

//! The servers of a group a test kills and restarts by port, and which of
//! them are alive: what a Cluster's nodes and a Sentinel group's data
//! servers share ([`crate::cluster`], [`crate::sentinel`]).

use crate::RedisServer;

/// Servers known by port, each alive or killed.
#[derive(Debug)]
pub(crate) struct Fleet {
    servers: Vec<RedisServer>,
    alive: Vec<bool>,
    /// What a server is called in a panic ("cluster node", "server").
    what: &'static str,
}

impl Fleet {
    /// Every server alive.
    pub(crate) fn new(servers: Vec<RedisServer>, what: &'static str) -> Self {
        let alive = vec![true; servers.len()];
        Self {
            servers,
            alive,
            what,
        }
    }

    /// Every server, dead ones too, in the order given.
    pub(crate) fn all(&self) -> &[RedisServer] {
        &self.servers
    }

    /// The server on `port`.
    pub(crate) fn server(&self, port: u16) -> &RedisServer {
        &self.servers[self.index(port)]
    }

    /// Whether the server on `port` is alive (not killed, or restarted).
    pub(crate) fn is_alive(&self, port: u16) -> bool {
        self.alive[self.index(port)]
    }

    /// The servers alive, in order.
    pub(crate) fn live(&self) -> impl Iterator<Item = &RedisServer> {
        self.servers
            .iter()
            .zip(&self.alive)
            .filter(|(_, alive)| **alive)
            .map(|(s, _)| s)
    }

    /// Kills (SIGKILL) the server on `port` and waits for it to exit.
    pub(crate) fn kill(&mut self, port: u16) {
        let i = self.index(port);
        self.servers[i].kill();
        self.alive[i] = false;
    }

    /// Restarts the killed server on `port` on the same port and dir.
    pub(crate) fn restart(&mut self, port: u16) {
        let i = self.index(port);
        self.servers[i].restart();
        self.alive[i] = true;
    }

    fn index(&self, port: u16) -> usize {
        self.servers
            .iter()
            .position(|s| s.port() == port)
            .unwrap_or_else(|| panic!("no {} on port {port}", self.what))
    }
}

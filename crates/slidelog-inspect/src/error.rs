//! Why an inspection could not run.

/// An inspection that failed (bad input, unreachable node, Redis error).
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    /// An option is out of its range.
    #[error("invalid {field}: {value} (must be {bound})")]
    InvalidOption {
        /// The option's name, e.g. `--count`.
        field: &'static str,
        /// The value given.
        value: String,
        /// The allowed range.
        bound: &'static str,
    },
    /// The store URL cannot be inspected.
    #[error("cannot inspect store {url}: {reason}")]
    BadUrl {
        /// The URL, password masked.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A node could not be reached or answered with an error.
    ///
    /// The message says the client's error; it is not also the
    /// [`source`](std::error::Error::source) (a chain printer would say it
    /// twice, and redis-rs's error repeats its own I/O source once more).
    #[error("redis node {node}: {what}: {error}")]
    Redis {
        /// The node's address.
        node: String,
        /// What was being done.
        what: &'static str,
        /// The error from the client.
        error: redis::RedisError,
    },
    /// The cluster's topology could not be read from any seed.
    #[error("cannot read the cluster topology from any of {seeds}: {reason}")]
    Topology {
        /// The seed addresses tried.
        seeds: String,
        /// The last error.
        reason: String,
    },
    /// A node answered something the scan did not expect.
    #[error("redis node {node}: unexpected reply to {what}: {reply}")]
    UnexpectedReply {
        /// The node's address.
        node: String,
        /// The command.
        what: &'static str,
        /// The reply, abbreviated.
        reply: String,
    },
}

//! What a command answers when it does not decide: every case is an error
//! reply (a typed variant here, its text the reply), never a panic.

use slidelog_core::InputError;

/// An error reply of a module command.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// The key holds another type (a string, a hash, another module's type).
    #[error("WRONGTYPE Operation against a key holding the wrong kind of value")]
    WrongType,
    /// The number of arguments does not fit the command.
    #[error("ERR wrong number of arguments for '{command}': {expected}")]
    Arity {
        /// The command.
        command: &'static str,
        /// What it takes.
        expected: String,
    },
    /// An argument that is not what its field takes, naming field and bound.
    #[error("ERR {field} {problem}")]
    Argument {
        /// The argument's name (`max_2`, `now_ms`, ...).
        field: String,
        /// What is wrong and what the bound is.
        problem: String,
    },
    /// A bound of docs/design.md §1 (the message names the field and bound).
    #[error("ERR {0}")]
    Input(#[from] InputError),
    /// The check would have recorded, but the caller's deadline had passed
    /// on the server's clock: nothing recorded. The same code and text as
    /// the Lua scripts' refusal (crates/slidelog-redis/src/script.rs).
    #[error("DEADLINE the caller gave up on this check before it ran; nothing recorded")]
    Deadline,
    /// A settle or charge whose caller's deadline had passed on the
    /// server's clock before it ran: nothing changed. The same code and
    /// text as `usage.lua`'s refusal (crates/slidelog-redis/src/usage.lua).
    #[error("DEADLINE the caller gave up on this operation before it ran; nothing changed")]
    UsageDeadline,
    /// `SLIDELOG.APPLY` from an ordinary client: it replays a primary's
    /// changes only, so it runs only from the replication link or an AOF
    /// being loaded (a client could otherwise wipe or block any log).
    #[error(
        "ERR slidelog.apply replays a primary's changes only: it runs from the replication link or an AOF being loaded, never from a client"
    )]
    NotReplicated,
    /// A stored log that could not be read (never expected).
    #[error("ERR slidelog: {0}")]
    Internal(String),
}

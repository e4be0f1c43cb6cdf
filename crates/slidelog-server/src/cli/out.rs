//! Standard output of the subcommands. A reader that stops reading
//! (`slidelog inspect --json | head`) closes the pipe: the rest of the
//! output has nowhere to go, so it is dropped quietly and the command ends
//! with its own exit code (`check`: 0 admitted, 1 rejected; the others 0),
//! never a panic (exit 101) or an error (exit 2).
//!
//! Rust ignores SIGPIPE, so a write to a closed pipe returns
//! `ErrorKind::BrokenPipe`, which `println!` turns into a panic; every
//! subcommand prints through [`print`] instead.

use std::io::{ErrorKind, Write};

/// Writes `text` to standard output and flushes it. A closed pipe is not
/// an error (see the module doc); any other failure is.
pub fn print(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Writes `text` and a newline (see [`print`]).
pub fn line(text: &str) -> std::io::Result<()> {
    print(&format!("{text}\n"))
}

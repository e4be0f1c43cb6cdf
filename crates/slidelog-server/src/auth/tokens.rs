//! A token file (`--api-token-file`, `--metrics-token-file`): one token a
//! line, optionally `name:token`; blank lines and `#` comments ignored.
//! The file is read again every [`RELOAD_POLL`](super::RELOAD_POLL); a
//! changed file that does not parse is logged once (by line number, never
//! its text) and the tokens loaded before are kept.
//!
//! A presented token is looked up by a keyed tag (SipHash-1-3 with random
//! keys, std's `RandomState`: a guess's tag cannot be predicted, so a
//! lookup's time tells nothing about how much of the guess was right), then
//! compared with the tokens of that tag in constant time ([`subtle`]).
//! About 150 instructions for a 32-byte token whatever the file's size (a
//! SHA-256 digest compared with every token's cost ~2,500 and grew with
//! the file).

use crate::flag_file::{self, FlagFileError, MAX_FLAG_FILE_BYTES};
use arc_swap::ArcSwap;
use metrics::Counter;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::hash::{BuildHasher as _, RandomState};
use std::path::PathBuf;
use std::sync::Arc;
use subtle::ConstantTimeEq as _;

/// Longest token, in bytes.
pub const MAX_TOKEN_BYTES: usize = 4096;
/// Most distinct caller names in one file: each is a metric label value.
pub const MAX_NAMES: usize = 256;
/// Longest caller name.
pub const MAX_NAME_BYTES: usize = 64;
/// The name of a token given without one.
pub const DEFAULT_NAME: &str = "default";

/// The calls a token is counted on (`route` label of
/// `slidelog_caller_requests_total`).
pub const ROUTES: [&str; 6] = ["check", "peek", "settle", "charge", "json", "grpc"];

/// Why a token file does not load.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    /// The file could not be read.
    #[error(transparent)]
    File(#[from] FlagFileError),
    /// A line is not a token (its text is never shown: it may be one).
    #[error("{flag} {}: line {line}: {what}", path.display())]
    Line {
        /// The flag that names the file.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// Its 1-based line number.
        line: usize,
        /// What is wrong with it.
        what: String,
    },
    /// No token at all, or too many names.
    #[error("{flag} {}: {what}", path.display())]
    Contents {
        /// The flag that names the file.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        what: String,
    },
}

/// One caller: its name, and its calls' counters (one per [`ROUTES`]).
#[derive(Debug)]
pub struct Caller {
    /// The name of the file's `name:token` line, or [`DEFAULT_NAME`].
    pub name: Arc<str>,
    counters: [Counter; ROUTES.len()],
}

impl Caller {
    /// Counts one call of `ROUTES[route]`.
    pub fn count(&self, route: usize) {
        self.counters[route].increment(1);
    }
}

/// The tokens that share a tag, each with the index of its caller.
type Tagged = Vec<(Box<[u8]>, usize)>;

/// The tokens of one load of the file.
struct TokenSet {
    /// The keys of the tags (random, this process's own).
    keys: RandomState,
    /// Each tag's tokens (more than one only when tags collide), each with
    /// the index of its caller.
    by_tag: HashMap<u64, Tagged>,
    callers: Vec<Arc<Caller>>,
    tokens: usize,
}

impl TokenSet {
    /// The caller of `token`: the tokens of its tag compared in constant
    /// time, without an early exit.
    fn find(&self, token: &[u8]) -> Option<Arc<Caller>> {
        let candidates = self.by_tag.get(&self.keys.hash_one(token))?;
        let mut found = None;
        for (known, caller) in candidates {
            if bool::from(known[..].ct_eq(token)) {
                found = Some(*caller);
            }
        }
        found.map(|i| self.callers[i].clone())
    }
}

/// A token file, loaded and reloaded. Cheap to clone.
#[derive(Clone)]
pub struct TokenFile(Arc<Inner>);

struct Inner {
    flag: &'static str,
    path: PathBuf,
    recorder: Arc<dyn metrics::Recorder + Send + Sync>,
    set: ArcSwap<TokenSet>,
    loaded: Mutex<Vec<u8>>,
    reload_error: Mutex<Option<String>>,
}

impl std::fmt::Debug for TokenFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (flag, path) = (self.0.flag, &self.0.path);
        write!(f, "TokenFile({flag} {})", path.display())
    }
}

impl TokenFile {
    /// Loads `path` (named by `flag`); counters go to `recorder`.
    pub fn load(
        flag: &'static str,
        path: PathBuf,
        recorder: Arc<dyn metrics::Recorder + Send + Sync>,
    ) -> Result<Self, TokenFileError> {
        let bytes = flag_file::read(&path, flag, MAX_FLAG_FILE_BYTES)?;
        let set = parse(flag, &path, &bytes, &*recorder)?;
        Ok(Self(Arc::new(Inner {
            flag,
            path,
            recorder,
            set: ArcSwap::from_pointee(set),
            loaded: Mutex::new(bytes),
            reload_error: Mutex::new(None),
        })))
    }

    /// The caller whose token `token` is, if any.
    pub fn find(&self, token: &[u8]) -> Option<Arc<Caller>> {
        self.0.set.load().find(token)
    }

    /// The caller names of the file as loaded now.
    pub fn names(&self) -> Vec<Arc<str>> {
        self.0
            .set
            .load()
            .callers
            .iter()
            .map(|c| c.name.clone())
            .collect()
    }

    /// Reads the file again; a changed content that parses replaces the
    /// tokens, one that does not is logged once and the old ones kept.
    pub fn reload(&self) {
        let inner = &self.0;
        let outcome = flag_file::read(&inner.path, inner.flag, MAX_FLAG_FILE_BYTES)
            .map_err(TokenFileError::from)
            .and_then(|bytes| {
                if *inner.loaded.lock() == bytes {
                    return Ok(false);
                }
                let set = parse(inner.flag, &inner.path, &bytes, &*inner.recorder)?;
                inner.set.store(Arc::new(set));
                *inner.loaded.lock() = bytes;
                Ok(true)
            });
        let mut last = inner.reload_error.lock();
        match outcome {
            Ok(changed) => {
                if changed {
                    let tokens = inner.set.load().tokens;
                    tracing::info!(flag = inner.flag, tokens, "token file reloaded");
                }
                *last = None;
            }
            Err(e) => {
                let text = e.to_string();
                if last.as_deref() != Some(&text) {
                    tracing::warn!(error = %text, "token file changed but does not load: the tokens loaded before still count");
                    *last = Some(text);
                }
            }
        }
    }
}

/// Parses a token file's content.
fn parse(
    flag: &'static str,
    path: &std::path::Path,
    bytes: &[u8],
    recorder: &(dyn metrics::Recorder + Send + Sync),
) -> Result<TokenSet, TokenFileError> {
    let whole = |what: String| TokenFileError::Contents {
        flag,
        path: path.to_owned(),
        what,
    };
    let text = std::str::from_utf8(bytes).map_err(|e| whole(format!("not UTF-8: {e}")))?;
    let mut names: Vec<String> = Vec::new();
    let keys = RandomState::new();
    let mut by_tag: HashMap<u64, Tagged> = HashMap::new();
    let mut tokens = 0;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, token) = split_line(line).map_err(|what| TokenFileError::Line {
            flag,
            path: path.to_owned(),
            line: i + 1,
            what,
        })?;
        let index = match names.iter().position(|n| n == name) {
            Some(index) => index,
            None if names.len() == MAX_NAMES => {
                return Err(whole(format!("more than {MAX_NAMES} caller names")));
            }
            None => {
                names.push(name.to_owned());
                names.len() - 1
            }
        };
        let tag = keys.hash_one(token.as_bytes());
        by_tag
            .entry(tag)
            .or_default()
            .push((token.as_bytes().into(), index));
        tokens += 1;
    }
    if tokens == 0 {
        return Err(whole("no token (every call would be refused)".to_owned()));
    }
    let callers = metrics::with_local_recorder(recorder, || {
        (names.into_iter())
            .map(|name| Arc::new(caller(name)))
            .collect()
    });
    Ok(TokenSet {
        keys,
        by_tag,
        callers,
        tokens,
    })
}

/// A caller and its counters, registered with the current recorder.
fn caller(name: String) -> Caller {
    let counters = ROUTES.map(|route| {
        metrics::counter!(super::CALLER_REQUESTS, "caller" => name.clone(), "route" => route)
    });
    Caller {
        name: name.into(),
        counters,
    }
}

/// `name:token` or `token`, checked.
fn split_line(line: &str) -> Result<(&str, &str), String> {
    let (name, token) = match line.split_once(':') {
        Some((name, token)) => (name.trim(), token.trim()),
        None => (DEFAULT_NAME, line),
    };
    let name_ok = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.';
    if name.is_empty() || name.len() > MAX_NAME_BYTES || !name.chars().all(name_ok) {
        return Err(format!(
            "the name before ':' must be 1 to {MAX_NAME_BYTES} letters, digits, '-', '_' or '.'"
        ));
    }
    if token.is_empty() || token.len() > MAX_TOKEN_BYTES {
        return Err(format!("a token is 1 to {MAX_TOKEN_BYTES} bytes"));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("a token is visible ASCII without spaces (it is sent in a header)".to_owned());
    }
    Ok((name, token))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<TokenSet, TokenFileError> {
        let recorder = metrics::NoopRecorder;
        parse(
            "--api-token-file",
            "/t".as_ref(),
            text.as_bytes(),
            &recorder,
        )
    }

    #[test]
    fn names_tokens_comments_and_errors_that_never_show_a_token() {
        let set = parsed("# callers\n\nsecret-a\nbilling: tok-b\nbilling:tok-c\n").unwrap();
        assert_eq!(&*set.find(b"secret-a").unwrap().name, "default");
        assert_eq!(&*set.find(b"tok-b").unwrap().name, "billing");
        assert_eq!(&*set.find(b"tok-c").unwrap().name, "billing");
        assert!(set.find(b"tok-").is_none() && set.find(b"").is_none());
        assert_eq!(set.callers.len(), 2);

        let e = parsed("ok\nbad name:hunter2\n").err().unwrap().to_string();
        assert!(
            e.starts_with("--api-token-file /t: line 2: the name"),
            "{e}"
        );
        assert!(!e.contains("hunter2"), "{e}");
        let e = parsed("a:hunter 2\n").err().unwrap().to_string();
        assert!(e.contains("line 1") && !e.contains("hunter"), "{e}");
        let e = parsed("# only a comment\n").err().unwrap().to_string();
        assert!(e.contains("no token"), "{e}");
        let many: String = (0..=MAX_NAMES).map(|i| format!("n{i}:t{i}\n")).collect();
        let e = parsed(&many).err().unwrap().to_string();
        assert!(e.contains("more than 256 caller names"), "{e}");
    }
}

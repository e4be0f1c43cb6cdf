//! The key browser on Redis and Redis Cluster: `inspect`'s SCAN, one bounded
//! step at a time, over every master (in address order) of the store.
//!
//! A page makes at most [`MAX_STEPS`] `SCAN … COUNT` calls and reads at most
//! `limit` keys (ZCARD, PTTL and the newest record each, pipelined), so its
//! work is bounded whatever the key space holds. SCAN may return more keys
//! than a page has room for: a step's keys are taken in byte order, and the
//! cursor then names the same SCAN cursor and the last key listed (hex),
//! so the next page asks for the same step again and takes the keys after
//! it. The order does not depend on where Redis keeps the keys, so a
//! rehash between the pages loses none (a step asked again after its
//! table grew returns a subset of what it returned before); a key may be
//! listed twice, as SCAN may return it twice.

use super::page::{BrowseError, KeyPage, KeySummary};
use redis::aio::MultiplexedConnection;
use slidelog_inspect::facts::{KeyFacts, KeyKind};
use slidelog_inspect::scan;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

/// SCAN calls one page makes at most.
pub const MAX_STEPS: usize = 16;
/// The least COUNT hint of one SCAN call (a page asks for `limit`, at least this).
pub const MIN_COUNT: usize = 100;

/// A Redis store's key space as the browser reads it: its URL, its key
/// prefix, and connections to its masters, made at first use and again
/// after an error.
#[derive(Clone)]
pub struct KeySpace {
    url: String,
    prefix: String,
    timeout: Duration,
    nodes: Arc<Mutex<Option<Nodes>>>,
}

/// The masters' addresses and connections, in address order.
type Nodes = Arc<Vec<(String, MultiplexedConnection)>>;

impl std::fmt::Debug for KeySpace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeySpace")
            .field("url", &slidelog::redact::mask_password(&self.url))
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl KeySpace {
    /// The key space of the store at `url` (`redis://`, `rediss://`,
    /// `redis+cluster://`) whose keys start with `prefix`; `None` for a
    /// store `inspect` cannot scan (memory, Sentinel).
    pub fn new(url: &str, prefix: &str, timeout: Duration) -> Option<Self> {
        slidelog_inspect::target::parse_target(url).ok()?;
        Some(Self {
            url: url.to_owned(),
            prefix: prefix.to_owned(),
            timeout,
            nodes: Arc::default(),
        })
    }

    /// The masters, connected (at first use, or again after an error).
    async fn nodes(&self) -> Result<Nodes, BrowseError> {
        let mut held = self.nodes.lock().await;
        if let Some(nodes) = &*held {
            return Ok(nodes.clone());
        }
        let target = slidelog_inspect::target::parse_target(&self.url)?;
        let mut found = slidelog_inspect::target::discover(&target, self.timeout).await?;
        found.sort_by(|a, b| a.addr.cmp(&b.addr));
        let mut nodes = Vec::with_capacity(found.len());
        for node in found {
            let conn = scan::connect(&node.url, &node.addr, self.timeout).await?;
            nodes.push((node.addr, conn));
        }
        let nodes = Arc::new(nodes);
        *held = Some(nodes.clone());
        Ok(nodes)
    }

    /// Forgets the connections after an error: the next call connects again.
    async fn forget<T>(&self, result: Result<T, BrowseError>) -> Result<T, BrowseError> {
        if result.is_err() {
            *self.nodes.lock().await = None;
        }
        result
    }

    /// One page of keys starting with `prefix`.
    pub async fn list(
        &self,
        prefix: &str,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<KeyPage, BrowseError> {
        let at = match cursor {
            None => At::default(),
            Some(text) => At::parse(text).ok_or_else(|| BrowseError::BadCursor(text.to_owned()))?,
        };
        let result = self.page(prefix, at, limit).await;
        self.forget(result).await
    }

    async fn page(&self, prefix: &str, mut at: At, limit: usize) -> Result<KeyPage, BrowseError> {
        let nodes = self.nodes().await?;
        let pattern = slidelog_inspect::prefix_pattern(&format!("{}{prefix}", self.prefix));
        let count = limit.max(MIN_COUNT) as u32;
        let mut keys = Vec::new();
        for _ in 0..MAX_STEPS {
            let Some((addr, conn)) = nodes.get(at.node) else {
                return Ok(KeyPage { keys, cursor: None });
            };
            if keys.len() >= limit {
                break;
            }
            let (next, mut found) = scan::scan_keys(conn, addr, &pattern, count, at.scan).await?;
            found.sort_unstable();
            found.dedup();
            let start = match &at.after {
                Some(after) => found.partition_point(|k| k <= after),
                None => 0,
            };
            let chosen: Vec<Vec<u8>> = found[start..]
                .iter()
                .take(limit - keys.len())
                .cloned()
                .collect();
            let consumed = start + chosen.len();
            let facts = scan::read_keys(conn, addr, &chosen).await?;
            keys.extend(facts.into_iter().filter_map(|f| self.summary(f)));
            at = if consumed < found.len() {
                At {
                    after: chosen.last().cloned(),
                    ..at
                }
            } else if next == 0 {
                At {
                    node: at.node + 1,
                    ..At::default()
                }
            } else {
                At {
                    scan: next,
                    after: None,
                    ..at
                }
            };
        }
        let done = at.node >= nodes.len();
        Ok(KeyPage {
            keys,
            cursor: (!done).then(|| at.to_string()),
        })
    }

    /// One key's summary: asked of every master at once (the one that holds
    /// the key's slot answers; the others answer MOVED). A master that
    /// fails otherwise makes the answer its error (503), never a 404.
    pub async fn one(&self, key: &str) -> Result<Option<KeySummary>, BrowseError> {
        let result = self.find(key).await;
        self.forget(result).await
    }

    async fn find(&self, key: &str) -> Result<Option<KeySummary>, BrowseError> {
        let nodes = self.nodes().await?;
        let full = vec![format!("{}{key}", self.prefix).into_bytes()];
        let reads = nodes
            .iter()
            .map(|(addr, conn)| scan::read_keys(conn, addr, &full));
        let answers = futures::future::join_all(reads).await;
        // A master that does not hold the key's slot answers MOVED; any
        // other error may hide the key: then the answer is the error, not
        // "no log".
        let mut failed = None;
        for answer in answers {
            match answer {
                Ok(facts) => {
                    if let Some(found) = facts.into_iter().find_map(|f| self.summary(f)) {
                        return Ok(Some(found));
                    }
                }
                Err(e) if e.to_string().contains("MOVED") => {}
                Err(e) => failed = failed.or(Some(e)),
            }
        }
        match failed {
            Some(e) => Err(e.into()),
            None => Ok(None),
        }
    }

    /// A key's summary, for a log (another type, or a key gone since SCAN,
    /// is no log).
    fn summary(&self, facts: KeyFacts) -> Option<KeySummary> {
        let KeyKind::ZSet(z) = facts.kind else {
            return None;
        };
        let key = facts.key.strip_prefix(self.prefix.as_bytes())?;
        // A plain log's newest member carries no `#` (docs/design.md §4.1):
        // every record then costs 1.
        let plain = z.newest.as_ref().is_some_and(|(m, _)| !m.contains(&b'#'));
        let units = z.units.or(plain.then_some(z.zcard));
        Some(KeySummary {
            key: String::from_utf8_lossy(key).into_owned(),
            records: z.zcard,
            units,
            newest_ms: z.newest_score().map(|s| s as u64),
            ttl_ms: u64::try_from(z.pttl_ms).ok(),
        })
    }
}

/// Where a Redis listing continues: a master, its SCAN cursor, and the
/// last key of that SCAN step already listed (in byte order).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct At {
    node: usize,
    scan: u64,
    after: Option<Vec<u8>>,
}

impl At {
    fn parse(text: &str) -> Option<Self> {
        let mut parts = text.strip_prefix("r.")?.split('.');
        let node = parts.next()?.parse().ok()?;
        let scan = parts.next()?.parse().ok()?;
        let after = match parts.next()? {
            "" => None,
            hex => Some(unhex(hex)?),
        };
        parts.next().is_none().then_some(Self { node, scan, after })
    }
}

impl std::fmt::Display for At {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "r.{}.{}.", self.node, self.scan)?;
        self.after
            .iter()
            .flatten()
            .try_for_each(|b| write!(f, "{b:02x}"))
    }
}

/// The bytes of lower-case hex (a cursor's last key); `None` if it is not.
fn unhex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) || hex.len() > 4 * slidelog_core::limit::MAX_KEY_BYTES {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_read_back_as_written() {
        for at in [
            At::default(),
            At {
                node: 2,
                scan: 1 << 40,
                after: Some(b"rate:sliding:k\xff".to_vec()),
            },
        ] {
            assert_eq!(At::parse(&at.to_string()), Some(at));
        }
        for bad in [
            "r.1",
            "r.1.2.x",
            "r.1.2.abc",
            "m.1.2.3",
            "r.1.2..",
            "r.a.2.",
        ] {
            assert_eq!(At::parse(bad), None, "{bad}");
        }
    }
}

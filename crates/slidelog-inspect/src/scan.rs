//! Scanning one node: SCAN MATCH COUNT (never KEYS), and for each batch one
//! pipeline of cheap reads per key (ZCARD, MEMORY USAGE, PTTL, the first
//! records and the newest record; TYPE only for keys that are not sorted sets,
//! and for those of the module's type, [`MODULE_TYPE`], `SLIDELOG.INFO`,
//! MEMORY USAGE and PTTL). Every command is O(1) or
//! O(log N + small), so Redis never blocks on a large set; MEMORY USAGE keeps
//! its default sampling for the same reason.

use crate::error::InspectError;
use crate::facts::{KeyFacts, KeyKind, MODULE_TYPE};
use crate::progress::{ScanProgress, cursor_fraction};
use redis::Value;
use redis::aio::MultiplexedConnection;
use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};
use std::time::Duration;

mod reply;

/// Commands sent per key in a batch pipeline.
const COMMANDS_PER_KEY: usize = 5;

/// Opens a connection to one node, bounded by `timeout` for connecting and
/// for every reply.
pub async fn connect(
    url: &str,
    node: &str,
    timeout: Duration,
) -> Result<MultiplexedConnection, InspectError> {
    if url.starts_with("rediss://") {
        // TLS needs a process-wide crypto provider; one may already be set.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    let err = |what, source| InspectError::Redis {
        node: node.to_owned(),
        what,
        error: source,
    };
    let client = redis::Client::open(url).map_err(|e| err("open", e))?;
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout));
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .map_err(|e| err("connect", e))
}

/// Returns the node's clock (Redis TIME) in Unix ms.
pub async fn server_time_ms(
    conn: &mut MultiplexedConnection,
    node: &str,
) -> Result<u64, InspectError> {
    let (secs, micros): (u64, u64) =
        redis::cmd("TIME")
            .query_async(conn)
            .await
            .map_err(|source| InspectError::Redis {
                node: node.to_owned(),
                what: "TIME",
                error: source,
            })?;
    Ok(secs * 1000 + micros / 1000)
}

/// What to scan and how.
#[derive(Debug, Clone)]
pub struct ScanSpec<'a> {
    /// SCAN MATCH pattern.
    pub pattern: &'a str,
    /// SCAN COUNT hint.
    pub count: u32,
    /// Members read from the low end of each set for the uniqueness check.
    pub sample: usize,
}

/// Scans one node, handing every batch of keys to `sink`. SCAN may return a
/// key more than once (while Redis rehashes); each key is handed over once,
/// tracked by a 64-bit hash of its name (8 bytes per key). The next SCAN page
/// is asked for while the current batch is read, on the same multiplexed
/// connection.
pub async fn scan_node(
    conn: &mut MultiplexedConnection,
    node: &str,
    node_index: usize,
    spec: &ScanSpec<'_>,
    progress: Option<&ScanProgress>,
    mut sink: impl FnMut(Vec<KeyFacts>),
) -> Result<(), InspectError> {
    let hasher = RandomState::new();
    let mut seen: HashSet<u64> = HashSet::new();
    let mut page = scan_page(conn.clone(), node, spec, 0).await?;
    loop {
        let (next, keys) = page;
        let fresh: Vec<Vec<u8>> = keys
            .into_iter()
            .filter(|k| seen.insert(hasher.hash_one(k)))
            .collect();
        let read = async {
            if fresh.is_empty() {
                Ok(Vec::new())
            } else {
                read_batch(conn.clone(), node, &fresh, spec.sample).await
            }
        };
        let facts = if next == 0 {
            page = (0, Vec::new());
            read.await?
        } else {
            let (next_page, facts) = tokio::join!(scan_page(conn.clone(), node, spec, next), read);
            page = next_page?;
            facts?
        };
        if let Some(p) = progress {
            let (mut records, mut memory) = (0, 0);
            for f in &facts {
                if let KeyKind::ZSet(z) = &f.kind {
                    records += z.zcard;
                    memory += z.memory_bytes.unwrap_or(0);
                }
            }
            p.add(facts.len() as u64, records, memory);
            p.set_fraction(node_index, cursor_fraction(next));
        }
        if !facts.is_empty() {
            sink(facts);
        }
        if next == 0 {
            return Ok(());
        }
    }
}

/// One SCAN call from `cursor` (the key browser's step, docs/design.md
/// §5): the next cursor (0 when the scan is done) and the keys it gave, in
/// SCAN's order. Read them with [`read_keys`].
pub async fn scan_keys(
    conn: &MultiplexedConnection,
    node: &str,
    pattern: &str,
    count: u32,
    cursor: u64,
) -> Result<(u64, Vec<Vec<u8>>), InspectError> {
    let spec = ScanSpec {
        pattern,
        count,
        sample: 1,
    };
    scan_page(conn.clone(), node, &spec, cursor).await
}

/// The facts of `keys` (a sorted set, a module log, another type or
/// vanished), in one pipeline (and one more for keys of another type).
pub async fn read_keys(
    conn: &MultiplexedConnection,
    node: &str,
    keys: &[Vec<u8>],
) -> Result<Vec<KeyFacts>, InspectError> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    read_batch(conn.clone(), node, keys, 1).await
}

/// Runs one SCAN call: returns the next cursor and the keys of this page.
async fn scan_page(
    mut conn: MultiplexedConnection,
    node: &str,
    spec: &ScanSpec<'_>,
    cursor: u64,
) -> Result<(u64, Vec<Vec<u8>>), InspectError> {
    redis::cmd("SCAN")
        .arg(cursor)
        .arg("MATCH")
        .arg(spec.pattern)
        .arg("COUNT")
        .arg(spec.count)
        .query_async(&mut conn)
        .await
        .map_err(|source| InspectError::Redis {
            node: node.to_owned(),
            what: "SCAN",
            error: source,
        })
}

/// Reads the figures of a batch of keys in one pipeline: ZCARD, MEMORY USAGE,
/// PTTL and the two ZRANGEs per key. Keys of another type answer WRONGTYPE;
/// only those get a TYPE, in a second, small pipeline.
async fn read_batch(
    mut conn: MultiplexedConnection,
    node: &str,
    keys: &[Vec<u8>],
    sample: usize,
) -> Result<Vec<KeyFacts>, InspectError> {
    let pipe = zset_reads(keys, sample);
    let replies = query(&mut conn, node, &pipe, keys.len() * COMMANDS_PER_KEY).await?;
    let mut facts: Vec<KeyFacts> = keys
        .iter()
        .zip(replies.chunks(COMMANDS_PER_KEY))
        .map(|(key, r)| KeyFacts {
            key: key.clone(),
            kind: reply::parse_zset(r),
        })
        .collect();
    // Not sorted sets: ask their type.
    let others: Vec<usize> = (0..facts.len())
        .filter(|i| matches!(replies[i * COMMANDS_PER_KEY], Value::ServerError(_)))
        .collect();
    if !others.is_empty() {
        let kinds = read_types(&mut conn, node, keys, &others).await?;
        for (i, kind) in others.into_iter().zip(kinds) {
            facts[i].kind = kind;
        }
    }
    // Logs of the module: read through it.
    let logs: Vec<usize> = (0..facts.len())
        .filter(|&i| matches!(&facts[i].kind, KeyKind::Other(t) if t == MODULE_TYPE))
        .collect();
    if !logs.is_empty() {
        let kinds = read_module_logs(&mut conn, node, keys, &logs).await?;
        for (i, kind) in logs.into_iter().zip(kinds) {
            facts[i].kind = kind;
        }
    }
    Ok(facts)
}

/// Reads the module logs at `logs` in one pipeline: `SLIDELOG.INFO`,
/// MEMORY USAGE and PTTL each.
async fn read_module_logs(
    conn: &mut MultiplexedConnection,
    node: &str,
    keys: &[Vec<u8>],
    logs: &[usize],
) -> Result<Vec<KeyKind>, InspectError> {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for &i in logs {
        pipe.cmd("SLIDELOG.INFO").arg(&keys[i]);
        pipe.cmd("MEMORY").arg("USAGE").arg(&keys[i]);
        pipe.cmd("PTTL").arg(&keys[i]);
    }
    let replies = query(conn, node, &pipe, logs.len() * 3).await?;
    Ok(replies.chunks(3).map(reply::parse_module_log).collect())
}

/// Builds the pipeline of the [`COMMANDS_PER_KEY`] reads of every key,
/// keeping per-command errors (WRONGTYPE) instead of failing the batch.
fn zset_reads(keys: &[Vec<u8>], sample: usize) -> redis::Pipeline {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for key in keys {
        pipe.cmd("ZCARD").arg(key);
        pipe.cmd("MEMORY").arg("USAGE").arg(key);
        pipe.cmd("PTTL").arg(key);
        pipe.cmd("ZRANGE")
            .arg(key)
            .arg(0)
            .arg(sample.saturating_sub(1))
            .arg("WITHSCORES");
        pipe.cmd("ZRANGE")
            .arg(key)
            .arg(-1)
            .arg(-1)
            .arg("WITHSCORES");
    }
    pipe
}

/// Reads the TYPE of the keys at `others` (those that are not sorted sets)
/// in one pipeline.
async fn read_types(
    conn: &mut MultiplexedConnection,
    node: &str,
    keys: &[Vec<u8>],
    others: &[usize],
) -> Result<Vec<KeyKind>, InspectError> {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for &i in others {
        pipe.cmd("TYPE").arg(&keys[i]);
    }
    let types = query(conn, node, &pipe, others.len()).await?;
    types.iter().map(|t| reply::kind_of_type(node, t)).collect()
}

/// Sends `pipe` and checks that it got `expected` replies.
async fn query(
    conn: &mut MultiplexedConnection,
    node: &str,
    pipe: &redis::Pipeline,
    expected: usize,
) -> Result<Vec<Value>, InspectError> {
    let replies: Vec<Value> =
        pipe.query_async(conn)
            .await
            .map_err(|source| InspectError::Redis {
                node: node.to_owned(),
                what: "pipelined reads",
                error: source,
            })?;
    if replies.len() != expected {
        return Err(InspectError::UnexpectedReply {
            node: node.to_owned(),
            what: "pipelined reads",
            reply: format!("{} replies for {expected} commands", replies.len()),
        });
    }
    Ok(replies)
}

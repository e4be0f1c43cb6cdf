//! [`ScriptStore`]'s blocks and overrides (docs/design.md §5.4). A block is
//! the log's block key (`{<log key>}#b`, the reason, with the block's TTL),
//! an override the log's override key (`{<log key>}#v`, the encoded rule,
//! with its TTL): both in the log's slot, so the scripts read the block in
//! the decision's own step. The number held is bounded by an index sorted
//! set (`control_put.lua`) that every instance sharing the prefix shares.

use super::ScriptStore;
use crate::keys::{block_key, override_key};
use redis::aio::ConnectionLike;
use redis::{ErrorKind, RedisError, Script};
use slidelog_core::{Block, FullLimit, Limit, Override, Rule, StoreError};
use std::sync::LazyLock;

/// Admits one entry into the index, within the cap.
static PUT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../control_put.lua")));

/// Reads a string key and its remaining TTL in one step.
static READ: LazyLock<Script> = LazyLock::new(|| {
    Script::new("return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}")
});

impl<C> ScriptStore<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// The index of this prefix's blocks (`b`) or overrides (`o`): two
    /// sorted sets in one slot (one hash tag), so one script bounds their sum.
    fn index_key(&self, kind: char) -> String {
        format!("{{slidelog:controls:{}}}:{kind}", self.prefix)
    }

    /// Admits `key` into the `kind` index for `ttl_ms`, or refuses past the cap.
    async fn admit(&self, kind: char, key: &str, ttl_ms: u64) -> Result<(), StoreError> {
        let other = if kind == 'b' { 'o' } else { 'b' };
        let mut invocation = PUT.key(self.index_key(kind));
        invocation
            .key(self.index_key(other))
            .arg(key)
            .arg(ttl_ms)
            .arg(self.max_controls);
        let mut conn = self.conn.clone();
        let admitted: Result<i64, StoreError> =
            self.bounded(invocation.invoke_async(&mut conn)).await;
        match admitted {
            Err(StoreError::Backend(text)) if text.contains("FULL") => Err(StoreError::Full {
                limit: FullLimit::Controls(self.max_controls),
                retry_after_ms: None,
            }),
            other => other.map(|_| ()),
        }
    }

    /// Removes `key` from the `kind` index.
    async fn release(&self, kind: char, key: &str) -> Result<(), StoreError> {
        let cmd = redis::cmd("ZREM")
            .arg(self.index_key(kind))
            .arg(key)
            .clone();
        let mut conn = self.conn.clone();
        let _: i64 = self.bounded(cmd.query_async(&mut conn)).await?;
        Ok(())
    }

    /// The value and remaining ms of a string key, if it lives.
    async fn read_timed(&self, key: Vec<u8>) -> Result<Option<(String, u64)>, StoreError> {
        let mut conn = self.conn.clone();
        let invocation = READ.key(key);
        let (value, left): (Option<String>, i64) =
            self.bounded(invocation.invoke_async(&mut conn)).await?;
        Ok(value.filter(|_| left > 0).map(|v| (v, left as u64)))
    }

    /// [`slidelog_core::Store::put_block`].
    pub(crate) async fn put_block_now(
        &self,
        key: &str,
        block: &Block,
        only_new: bool,
    ) -> Result<bool, StoreError> {
        // The module's command reads no block key: a block it would not
        // enforce is refused rather than stored (docs/design.md §5.4).
        if self.engine.in_use() == Some(crate::engine::Engine::Module) {
            return Err(self.unsupported("put_block on the module engine"));
        }
        self.admit('b', key, block.remaining_ms).await?;
        let mut cmd = redis::cmd("SET");
        cmd.arg(block_key(&self.redis_key(key)))
            .arg(&block.reason)
            .arg("PX")
            .arg(block.remaining_ms);
        if only_new {
            cmd.arg("NX");
        }
        let mut conn = self.conn.clone();
        let set: Option<String> = self.bounded(cmd.query_async(&mut conn)).await?;
        Ok(set.is_some())
    }

    /// [`slidelog_core::Store::delete_block`].
    pub(crate) async fn delete_block_now(&self, key: &str) -> Result<bool, StoreError> {
        let cmd = redis::cmd("DEL")
            .arg(block_key(&self.redis_key(key)))
            .clone();
        let mut conn = self.conn.clone();
        let deleted: i64 = self.bounded(cmd.query_async(&mut conn)).await?;
        self.release('b', key).await?;
        Ok(deleted > 0)
    }

    /// [`slidelog_core::Store::get_block`].
    pub(crate) async fn get_block_now(&self, key: &str) -> Result<Option<Block>, StoreError> {
        let read = self.read_timed(block_key(&self.redis_key(key))).await?;
        Ok(read.map(|(reason, remaining_ms)| Block {
            remaining_ms,
            reason,
        }))
    }

    /// [`slidelog_core::Store::put_override`].
    pub(crate) async fn put_override_now(
        &self,
        key: &str,
        entry: &Override,
    ) -> Result<(), StoreError> {
        self.admit('o', key, entry.remaining_ms).await?;
        let cmd = redis::cmd("SET")
            .arg(override_key(&self.redis_key(key)))
            .arg(encode(&entry.rule))
            .arg("PX")
            .arg(entry.remaining_ms)
            .clone();
        let mut conn = self.conn.clone();
        let _: Option<String> = self.bounded(cmd.query_async(&mut conn)).await?;
        Ok(())
    }

    /// [`slidelog_core::Store::delete_override`].
    pub(crate) async fn delete_override_now(&self, key: &str) -> Result<bool, StoreError> {
        let cmd = redis::cmd("DEL")
            .arg(override_key(&self.redis_key(key)))
            .clone();
        let mut conn = self.conn.clone();
        let deleted: i64 = self.bounded(cmd.query_async(&mut conn)).await?;
        self.release('o', key).await?;
        Ok(deleted > 0)
    }

    /// [`slidelog_core::Store::get_override`].
    pub(crate) async fn get_override_now(&self, key: &str) -> Result<Option<Override>, StoreError> {
        let Some((text, remaining_ms)) =
            self.read_timed(override_key(&self.redis_key(key))).await?
        else {
            return Ok(None);
        };
        let rule = decode(&text).map_err(|e| {
            StoreError::Backend(format!(
                "the override of {key:?} is not one slidelog wrote: {e}"
            ))
        })?;
        Ok(Some(Override { rule, remaining_ms }))
    }

    /// [`slidelog_core::Store::control_count`]: the indexes' entries (those
    /// expired since the last put count until the next one drops them).
    pub(crate) async fn control_count_now(&self) -> Result<(usize, usize), StoreError> {
        let mut conn = self.conn.clone();
        let mut held = [0usize; 2];
        for (slot, kind) in held.iter_mut().zip(['b', 'o']) {
            let cmd = redis::cmd("ZCARD").arg(self.index_key(kind)).clone();
            let n: i64 = self.bounded(cmd.query_async(&mut conn)).await?;
            *slot = n.max(0) as usize;
        }
        Ok((held[0], held[1]))
    }
}

/// An override's rule as its key holds it: `allow`, `deny`, or `limits`
/// then per limit ` <name or -> <max> <window_ms> <block_ms>`.
pub fn encode(rule: &Rule) -> String {
    match rule {
        Rule::Allow => "allow".into(),
        Rule::Deny => "deny".into(),
        Rule::Limits(limits) => {
            let mut out = String::from("limits");
            for l in limits {
                let name = l.name().unwrap_or("-");
                out.push_str(&format!(
                    " {name} {} {} {}",
                    l.max(),
                    l.window_ms(),
                    l.block_ms()
                ));
            }
            out
        }
    }
}

/// The rule [`encode`] wrote, every limit checked again (a key another
/// program wrote is an error, never trusted).
pub fn decode(text: &str) -> Result<Rule, RedisError> {
    let bad = || {
        RedisError::from((
            ErrorKind::UnexpectedReturnType,
            "malformed override",
            text.to_owned(),
        ))
    };
    let mut words = text.split(' ');
    match words.next() {
        Some("allow") => return Ok(Rule::Allow),
        Some("deny") => return Ok(Rule::Deny),
        Some("limits") => {}
        _ => return Err(bad()),
    }
    let words: Vec<&str> = words.collect();
    if words.is_empty() || !words.len().is_multiple_of(4) {
        return Err(bad());
    }
    let mut limits = Vec::with_capacity(words.len() / 4);
    for w in words.chunks_exact(4) {
        let num = |s: &str| s.parse::<u64>().map_err(|_| bad());
        let mut limit = Limit::new(num(w[1])?, num(w[2])?)
            .and_then(|l| l.with_block_ms(num(w[3]).unwrap_or(u64::MAX)))
            .map_err(|_| bad())?;
        if w[0] != "-" {
            limit = limit.named(w[0]).map_err(|_| bad())?;
        }
        limits.push(limit);
    }
    Ok(Rule::Limits(limits))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_reads_back_as_written_and_junk_is_an_error() {
        let limits = vec![
            Limit::new(2, 60_000).unwrap().named("requests").unwrap(),
            Limit::new(9, 1_000).unwrap().with_block_ms(3_000).unwrap(),
        ];
        for rule in [Rule::Allow, Rule::Deny, Rule::Limits(limits)] {
            assert_eq!(decode(&encode(&rule)).unwrap(), rule);
        }
        for junk in ["", "limits", "limits a 0 1 0", "limits - 1 1", "allowx"] {
            assert!(decode(junk).is_err(), "{junk}");
        }
    }
}

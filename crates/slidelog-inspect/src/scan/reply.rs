//! The replies of a key's reads, as facts: the five replies of a sorted
//! set's reads, a TYPE reply, and `ZRANGE … WITHSCORES` in RESP2 or RESP3.

use crate::error::InspectError;
use crate::facts::{Granules, KeyKind, ZSetFacts};
use redis::Value;

/// Turns the reply to TYPE of a key that is not a sorted set into its kind.
pub(super) fn kind_of_type(node: &str, t: &Value) -> Result<KeyKind, InspectError> {
    Ok(match t {
        Value::SimpleString(s) if s == "none" => KeyKind::Vanished,
        // Became a sorted set in between: counted as vanished
        // rather than read half.
        Value::SimpleString(s) if s == "zset" => KeyKind::Vanished,
        Value::SimpleString(s) => KeyKind::Other(s.clone()),
        Value::BulkString(b) => KeyKind::Other(String::from_utf8_lossy(b).into_owned()),
        other => {
            return Err(InspectError::UnexpectedReply {
                node: node.to_owned(),
                what: "TYPE",
                reply: format!("{other:?}"),
            });
        }
    })
}

/// Turns the five replies of one key into its facts. A missing key answers
/// ZCARD 0 and PTTL -2: it expired or was deleted after SCAN saw it.
pub(super) fn parse_zset(r: &[Value]) -> KeyKind {
    match (&r[0], &r[2]) {
        (Value::Int(0), _) | (_, Value::Int(-2)) => KeyKind::Vanished,
        (Value::Int(zcard), Value::Int(pttl)) => KeyKind::ZSet(ZSetFacts {
            zcard: *zcard as u64,
            memory_bytes: match &r[1] {
                Value::Int(m) => Some(*m as u64),
                _ => None,
            },
            pttl_ms: *pttl,
            first: pairs(&r[3]),
            newest: pairs(&r[4]).into_iter().next(),
            module_log: false,
            units: None,
            granules: None,
        }),
        // WRONGTYPE: resolved by the TYPE follow-up.
        _ => KeyKind::Vanished,
    }
}

/// Turns the three replies of a module log's reads (`SLIDELOG.INFO`,
/// `MEMORY USAGE`, `PTTL`) into its facts; a key gone (or no longer a log)
/// in between is vanished.
pub(super) fn parse_module_log(r: &[Value]) -> KeyKind {
    let Value::Int(pttl) = r[2] else {
        return KeyKind::Vanished;
    };
    let info = info_pairs(&r[0]);
    let field = |name: &str| info.iter().find(|(k, _)| k == name).map(|(_, v)| *v);
    let (Some(records), Some(oldest), Some(newest)) =
        (field("records"), field("oldest_ms"), field("newest_ms"))
    else {
        return KeyKind::Vanished;
    };
    if records <= 0 || pttl == -2 {
        return KeyKind::Vanished;
    }
    KeyKind::ZSet(ZSetFacts {
        zcard: records as u64,
        memory_bytes: match &r[1] {
            Value::Int(m) => Some(*m as u64),
            _ => None,
        },
        pttl_ms: pttl,
        first: vec![(Vec::new(), oldest as f64)],
        newest: Some((Vec::new(), newest as f64)),
        module_log: true,
        units: field("units").map(|u| u.max(0) as u64),
        granules: granules_of(&field),
    })
}

/// A module log's granules from its `SLIDELOG.INFO` fields: `granule_ms`,
/// `tiers`, then `tier_<i>_granule_ms` / `tier_<i>_records` each; `None`
/// from a module that reports none (older than the fields).
fn granules_of(field: &dyn Fn(&str) -> Option<i64>) -> Option<Granules> {
    let granule_ms = field("granule_ms")?.max(0) as u64;
    let tiers = (1..=field("tiers").unwrap_or(0).max(0))
        .map_while(|i| {
            let g = field(&format!("tier_{i}_granule_ms"))?;
            let n = field(&format!("tier_{i}_records"))?;
            Some((g.max(0) as u64, n.max(0) as u64))
        })
        .collect();
    Some(Granules { granule_ms, tiers })
}

/// Returns the name / integer pairs of `SLIDELOG.INFO` (a flat array, or a map).
fn info_pairs(v: &Value) -> Vec<(String, i64)> {
    let flat: Vec<&Value> = match v {
        Value::Array(items) => items.iter().collect(),
        Value::Map(kv) => kv.iter().flat_map(|(k, v)| [k, v]).collect(),
        _ => return Vec::new(),
    };
    flat.chunks(2)
        .filter_map(|c| match c {
            [Value::Int(_), _] | [_] => None,
            [k, Value::Int(v)] => Some((String::from_utf8(bytes(k)?).ok()?, *v)),
            _ => None,
        })
        .collect()
}

/// Reads the `(member, score)` pairs of a ZRANGE WITHSCORES reply: a flat array in RESP2,
/// an array of pairs in RESP3.
fn pairs(v: &Value) -> Vec<(Vec<u8>, f64)> {
    let Value::Array(items) = v else {
        return Vec::new();
    };
    let nested = items
        .iter()
        .all(|i| matches!(i, Value::Array(a) if a.len() == 2));
    let flat: Vec<&Value> = if nested && !items.is_empty() {
        items
            .iter()
            .flat_map(|i| match i {
                Value::Array(a) => a.iter().collect::<Vec<_>>(),
                _ => Vec::new(),
            })
            .collect()
    } else {
        items.iter().collect()
    };
    flat.chunks(2)
        .filter_map(|c| match c {
            [m, s] => Some((bytes(m)?, score(s)?)),
            _ => None,
        })
        .collect()
}

/// Reads a member's bytes.
fn bytes(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::BulkString(b) => Some(b.clone()),
        Value::SimpleString(s) => Some(s.as_bytes().to_vec()),
        _ => None,
    }
}

/// Reads a score, whatever way the protocol sent it.
fn score(v: &Value) -> Option<f64> {
    match v {
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        Value::SimpleString(s) => s.parse().ok(),
        Value::Double(d) => Some(*d),
        Value::Int(i) => Some(*i as f64),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn withscores_replies_in_resp2_and_resp3() {
        let b = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let resp2 = Value::Array(vec![b("m1"), b("1.5"), b("m2"), b("inf")]);
        assert_eq!(
            pairs(&resp2),
            [(b"m1".to_vec(), 1.5), (b"m2".to_vec(), f64::INFINITY)]
        );
        let resp3 = Value::Array(vec![Value::Array(vec![b("m1"), Value::Double(2.0)])]);
        assert_eq!(pairs(&resp3), [(b"m1".to_vec(), 2.0)]);
        assert!(pairs(&Value::Array(vec![])).is_empty());
    }

    #[test]
    fn a_module_log_s_granules_are_read_from_its_info() {
        let b = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let mut info = vec![];
        for (k, v) in [
            ("records", 1_390),
            ("oldest_ms", 60_000),
            ("newest_ms", 90_000),
            ("granule_ms", 10),
            ("tiers", 2),
            ("tier_1_granule_ms", 60_000),
            ("tier_1_records", 1_380),
            ("tier_2_granule_ms", 10),
            ("tier_2_records", 10),
        ] {
            info.extend([b(k), Value::Int(v)]);
        }
        let KeyKind::ZSet(z) = parse_module_log(&[Value::Array(info), Value::Nil, Value::Int(5)])
        else {
            panic!("not a log");
        };
        let g = z.granules.expect("granules");
        assert_eq!(g.granule_ms, 10);
        assert_eq!(g.tiers, [(60_000, 1_380), (10, 10)]);
    }

    #[test]
    fn a_module_log_is_read_from_its_info() {
        let b = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let info = Value::Array(vec![
            b("records"),
            Value::Int(3),
            b("units"),
            Value::Int(5),
            b("oldest_ms"),
            Value::Int(1_000),
            b("newest_ms"),
            Value::Int(2_000),
        ]);
        let KeyKind::ZSet(z) = parse_module_log(&[info.clone(), Value::Int(90), Value::Int(500)])
        else {
            panic!("not a log");
        };
        assert!(z.module_log);
        assert_eq!((z.zcard, z.units), (3, Some(5)));
        assert_eq!(z.granules, None, "a module without the granule fields");
        assert_eq!((z.zcard, z.memory_bytes, z.pttl_ms), (3, Some(90), 500));
        assert_eq!(
            (z.oldest_score(), z.newest_score()),
            (Some(1_000.0), Some(2_000.0))
        );
        let gone = [info, Value::Nil, Value::Int(-2)];
        assert_eq!(parse_module_log(&gone), KeyKind::Vanished);
        assert_eq!(
            parse_module_log(&[Value::Nil, Value::Nil, Value::Int(10)]),
            KeyKind::Vanished
        );
    }
}

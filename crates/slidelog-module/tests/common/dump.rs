//! DUMP payloads of the module's type, taken apart and rebuilt: the RDB
//! framing of a module value, Redis's CRC-64 and a real DUMP to start from,
//! for tests that hand the server crafted `RESTORE` payloads.

use super::check;
use redis::Connection;

/// CRC-64/Jones as Redis computes it over DUMP payloads and RDB files:
/// reflected, polynomial 0xad93d23594c935a9 (0x95ac9329ac4bc9b5 reflected),
/// initial value 0, no final xor.
pub fn crc64(bytes: &[u8]) -> u64 {
    const POLY: u64 = 0x95ac_9329_ac4b_c9b5;
    let mut crc = 0u64;
    for &b in bytes {
        crc ^= u64::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
        }
    }
    crc
}

/// A real DUMP of a small log, cut into the parts the cases rewrite.
pub struct Dump {
    /// `RDB_TYPE_MODULE_2` and the 64-bit module id (`0x81` + 8 bytes).
    pub head: Vec<u8>,
    /// The log in `slidelog_core::codec` (the module's one string).
    pub log: Vec<u8>,
    /// The RDB version the server writes (2 bytes, little-endian).
    pub version: [u8; 2],
}

/// An RDB length (`rdbSaveLen`): 6, 14, 32 or 64 bits.
pub fn rdb_len(n: u64) -> Vec<u8> {
    match n {
        0..64 => vec![n as u8],
        64..16_384 => vec![0x40 | (n >> 8) as u8, n as u8],
        16_384..=0xffff_ffff => [&[0x80][..], &(n as u32).to_be_bytes()].concat(),
        _ => [&[0x81][..], &n.to_be_bytes()].concat(),
    }
}

/// The module value as `rdb_save` writes it: the string opcode, the string,
/// the EOF opcode.
pub fn value_of(log: &[u8]) -> Vec<u8> {
    [&[5][..], &rdb_len(log.len() as u64), log, &[0]].concat()
}

/// Cuts a real DUMP of a small log into its parts (and checks that
/// [`crc64`] and [`payload`] rebuild it byte for byte).
pub fn parse_dump(d: &[u8]) -> Dump {
    assert_eq!((d[0], d[1], d[10]), (7, 0x81, 5), "a module value: {d:?}");
    let len = usize::from(d[11]);
    assert!(len < 64, "a short, uncompressed string: {d:?}");
    let dump = Dump {
        head: d[..10].to_vec(),
        log: d[12..12 + len].to_vec(),
        version: [d[13 + len], d[14 + len]],
    };
    assert_eq!(d.len(), 15 + len + 8);
    // The CRC function is Redis's, and `payload` rebuilds the real DUMP.
    let crc = u64::from_le_bytes(d[d.len() - 8..].try_into().unwrap());
    assert_eq!(crc64(&d[..d.len() - 8]), crc);
    assert_eq!(payload(&dump, &value_of(&dump.log)), d);
    dump
}

/// A DUMP payload: `body` after the real type and module id, then the RDB
/// version and a CRC-64 that matches, so only the module can refuse it.
pub fn payload(d: &Dump, body: &[u8]) -> Vec<u8> {
    let mut out = [&d.head[..], body, &d.version].concat();
    let crc = crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// An unsigned LEB128 varint, as `slidelog_core::codec` writes them.
pub fn varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
    out
}

/// The real DUMP of a two-record log on `conn`.
pub fn real_dump(conn: &mut Connection) -> Dump {
    for now in [1_000, 1_250] {
        check(conn, "real", true, Some(now), 0, &[(5, 60_000, 1)]).unwrap();
    }
    let d: Vec<u8> = redis::cmd("DUMP").arg("real").query(conn).unwrap();
    parse_dump(&d)
}

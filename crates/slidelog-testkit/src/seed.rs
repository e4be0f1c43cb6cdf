//! Seeding a Redis server with many sliding logs at once, for scans of a large
//! key space (tests and the scan benchmark): done by a Lua loop inside our own
//! test server, far less work than sending every record from a debug build.

/// Records of key `i` in a [`seed_logs`] key space: 1 ..= 12, so several
/// histogram buckets fill.
pub fn records_of(i: u64) -> u64 {
    (i * 7919) % 12 + 1
}

const SEED: &str = r"
local prefix, from, to, now, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
for i = from, to do
    local key = prefix .. 'user' .. i
    local n = (i * 7919) % 12 + 1
    local args = {}
    for r = 0, n - 1 do
        args[#args + 1] = now - r
        args[#args + 1] = string.format('01JDQ3W7ZK%08d%08d', i, r)
    end
    redis.call('ZADD', key, unpack(args))
    redis.call('PEXPIRE', key, ttl)
end
return 0
";

/// Writes `keys` sorted sets `{prefix}user{i}` (i = 0 .. keys), key `i` with
/// [`records_of`]`(i)` ULID-like members scored `now_ms`, `now_ms - 1`, …,
/// each with a TTL of `ttl_ms`. Panics when Redis refuses.
pub fn seed_logs(conn: &mut redis::Connection, prefix: &str, keys: u64, now_ms: u64, ttl_ms: u64) {
    let script = redis::Script::new(SEED);
    for from in (0..keys).step_by(20_000) {
        let to = (from + 19_999).min(keys.saturating_sub(1));
        let _: i64 = script
            .arg(prefix)
            .arg(from)
            .arg(to)
            .arg(now_ms)
            .arg(ttl_ms)
            .invoke(conn)
            .expect("seed the key space");
    }
}

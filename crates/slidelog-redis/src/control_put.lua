-- slidelog: admit one block or override into the indexes that bound how
-- many a deployment holds (docs/design.md §5.4), atomically. The block or
-- override itself is a key in its log's slot, written by the caller next;
-- the indexes share one hash tag (one slot on a Cluster, apart from the
-- logs), so the two are separate calls: a crash between them leaves an
-- index entry that expires with its score, never a block without one.
--
-- KEYS[1]  the index of this kind (sorted set; member = the key, score =
--          the entry's expiry in ms on Redis TIME)
-- KEYS[2]  the index of the other kind (blocks / overrides), same slot
-- ARGV[1]  the key
-- ARGV[2]  its TTL in ms
-- ARGV[3]  the cap on the entries of both indexes together
-- Returns the entries held after, or an error reply `FULL <cap>`.

-- Step 1: the time, on Redis's clock (every instance shares it).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- Step 2: forget entries that expired (their keys expired with them).
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)

-- Step 3: a new entry past the cap is refused; an entry already held is
-- replaced (its expiry moves), so blocking a key again never hits the cap.
local held = redis.call('ZCARD', KEYS[1]) + redis.call('ZCARD', KEYS[2])
if redis.call('ZSCORE', KEYS[1], ARGV[1]) == false and held >= tonumber(ARGV[3]) then
  return redis.error_reply('FULL ' .. ARGV[3])
end

-- Step 4: the entry until its expiry (the later of the old and the new: a
-- block set only if none is in force may leave the old one), and the index
-- kept as long as its latest entry (never a key without a TTL).
local until_ms = now + tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], 'GT', until_ms, ARGV[1])
redis.call('ZADD', KEYS[1], 'NX', until_ms, ARGV[1])
local latest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], tonumber(latest[2]) + 1)
return held + 1

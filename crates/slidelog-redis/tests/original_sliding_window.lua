-- The original design's script (original-design.md, "Lua 脚本执行"), as its
-- sequence diagram and its F6 line give it: now in ms, window in SECONDS.
-- Only the reply is adapted, to {allowed, count}, because the original's
-- bare count (count when rejected, count + 1 when admitted) is ambiguous.
-- KEYS[1] key; ARGV[1] now (ms); ARGV[2] window (s); ARGV[3] maxLen; ARGV[4] member
local key = KEYS[1]
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local maxLen = tonumber(ARGV[3])
-- Step 1: drop expired records (score <= now - window*1000, inclusive)
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window * 1000)
-- Step 2: count the records left
local count = redis.call('ZCARD', key)
if count >= maxLen then
  -- Step 3a: over the limit
  return {0, count}
end
-- Step 3b: admit: add the record and expire the key after the window
redis.call('ZADD', key, now, ARGV[4])
redis.call('EXPIRE', key, window)
return {1, count + 1}

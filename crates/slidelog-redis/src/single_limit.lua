-- slidelog: one CHECK of ONE limit at cost 1 (docs/design.md §4.2), the
-- common case, atomically. Same layout and same answers as sliding_log.lua,
-- which takes every other request (several limits, a cost above 1, peeks) and
-- every log this script finds weighted. It exists because Redis CPU per
-- decision is the limit of a Redis-backed deployment, and on Redis 7.0 most
-- of a script's time is not the sorted set: it is the call itself, Redis
-- TIME, and turning numbers into strings and back (a Lua number passed to
-- redis.call is formatted with %.17g; a score read WITHSCORES is formatted
-- by Redis and parsed again by tonumber). So this script takes four
-- arguments, passes strings it already has to redis.call, formats a number
-- only where Redis needs one it does not have, and reads nothing a path does
-- not use. BENCHMARKS.md measures it against the original design's script.
--
-- KEYS[1]  the log (sorted set; score = ms timestamp, member = a unique id)
-- KEYS[2]  its block key (string, same slot; optional): see step 1b
-- ARGV[1]  max
-- ARGV[2]  window_ms
-- ARGV[3]  the member to add when admitted
-- ARGV[4]  the caller's deadline in Unix ms, or '-1': an admission that
--          starts later is refused, nothing recorded (a rejection records
--          nothing anyway, so it is answered whatever the time)
-- ARGV[5]  now in ms (optional; absent = Redis TIME)
-- Returns {allowed 0|1, count, retry_after_ms, reset_after_ms, now_ms}
-- (the caller knows max and window), or {-1} when the log is weighted: the
-- caller then sends the request to sliding_log.lua. Numbers may come back as
-- strings of digits (an argument returned as it came).

local log = KEYS[1]


-- Step 1: the time, as the string ZADD stores (a number only once a live
-- key needs arithmetic; a new key never does): Redis TIME by default, so every instance shares one clock, or the caller's ms.
-- TIME in ms as a decimal string is sec * 1000 + usec / 1000, truncated:
-- the seconds, then the first three of the six zero-padded usec digits.
-- (Written out twice, here and in step 5: a local function would be a new
-- closure on every run, which costs more than the line it saves.)
local now_s = ARGV[5]
if not now_s then
  local t = redis.call('TIME')
  now_s = t[1] .. string.sub('00000' .. t[2], -6, -4)
end

-- Step 1b: a block (docs/design.md §5.4): KEYS[2], the log's block key (same
-- slot), refuses while it lives, for its remaining time, nothing written.
-- The reply is the general script's blocked reply ({-2, ...}: see
-- sliding_log.lua step 1c) with this script's numbers.
if KEYS[2] then
  local left = redis.call('PTTL', KEYS[2])
  if left > 0 then return {-2, 0, left, 0, now_s} end
end

-- Step 2: the newest record. Its member is the marker of a weighted log
-- (every record of a weighted log carries a '#', and the newest one always
-- does: sliding_log.lua, "The marker"); its score gives reset_after_ms and
-- tells a record left in the future by a clock that stepped back.
-- A key the module converted (docs/design.md §4.4) answers WRONGTYPE here:
-- the module decides it, at this time and deadline, so switching engines
-- never over-admits. (pcall costs what call does: no extra command.)
local top = redis.pcall('ZRANGE', log, '-1', '-1', 'WITHSCORES')
if top.err then
  if string.sub(top.err, 1, 9) ~= 'WRONGTYPE' then return top end
  local deadline = ARGV[4]
  if deadline == '-1' then deadline = '0' end
  local r = redis.call('SLIDELOG.CHECK', log, 'RECORD', now_s, deadline, '1', ARGV[1], ARGV[2], '1')
  return {r[1], r[4], r[6], r[7], r[8]}
end
local newest_member, newest, count, now = top[1], nil, 0, nil
if newest_member ~= nil then
  if string.find(newest_member, '#', 1, true) then return {-1} end
  newest, now = tonumber(top[2]), tonumber(now_s)
  local window = tonumber(ARGV[2])

  -- Step 3: drop the expired records (ts <= now - window, inclusive: the
  -- original script's boundary); what is left is live, so ZCARD counts it
  -- in O(1) where a ZCOUNT would walk a small (listpack) set.
  redis.call('ZREMRANGEBYSCORE', log, '-inf', string.format('%d', now - window))
  count = redis.call('ZCARD', log)

  -- Step 4: rejected when the log is full. The request fits once the k-th
  -- oldest live record expires, k = count + 1 - max: the live records are
  -- the newest ones, so that is the max-th newest, rank -max. Nothing is
  -- written: the TTL set by the last admission still ends with the newest
  -- record.
  if count >= tonumber(ARGV[1]) then
    local rank = '-' .. ARGV[1]
    local kth = tonumber(redis.call('ZRANGE', log, rank, rank, 'WITHSCORES')[2])
    local reset = newest + window - now
    if reset < 0 then reset = 0 end
    return {0, count, kth + window - now, reset, now}
  end
end

-- Step 5: admitted, unless the caller has given up (it timed out, so a
-- record written now would be one it never counts). The deadline is on the
-- caller's wall clock and is compared with Redis TIME, even when the caller
-- gave the time. Both are decimal integers without leading zeros: the
-- longer is the larger, and at equal lengths the string order is the
-- numeric order (no tonumber needed).
local deadline = ARGV[4]
if deadline ~= '-1' then
  local clock = now_s
  if ARGV[5] then
    local t = redis.call('TIME')
    clock = t[1] .. string.sub('00000' .. t[2], -6, -4)
  end
  if #clock > #deadline or (#clock == #deadline and clock > deadline) then
    return redis.error_reply('DEADLINE the caller gave up on this check before it ran; nothing recorded')
  end
end

-- Step 6: append ONE record at now and set the TTL: the window (PEXPIRE, so
-- PTTL is never -1), or longer while the newest record is in the future, so
-- the key lives exactly as long as any of its records can be live.
redis.call('ZADD', log, now_s, ARGV[3])
if newest ~= nil and newest > now then
  local reset = newest + tonumber(ARGV[2]) - now
  redis.call('PEXPIRE', log, string.format('%d', reset))
  return {1, count + 1, 0, reset, now}
end
redis.call('PEXPIRE', log, ARGV[2])
return {1, count + 1, 0, ARGV[2], now_s}

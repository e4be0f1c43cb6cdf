-- slidelog: one decision of the sliding window log (docs/design.md §1-§2), atomically.
-- It keeps the original design's layout: a sorted set, score = ms timestamp,
-- member = a unique id; a record with ts <= now - window has expired.
--
-- KEYS[1]   the log (sorted set)
-- ARGV[1]   mode: '1' = record (a check), '0' = peek (reads only, changes nothing)
-- ARGV[2]   now in ms, or '-1' to read Redis TIME
-- ARGV[3]   cost (1 ..= the smallest max)
-- ARGV[4]   n, the number of limits (1 ..= 16)
-- ARGV[5 .. 4+2n]   max_1, window_ms_1, ..., max_n, window_ms_n
-- ARGV[5+2n ..]     members: `cost` unique ids, or one unique base id that
--                   this script suffixes with ':1' .. ':cost' (large costs)
-- Returns {allowed 0|1, max, window_ms, count, remaining, retry_after_ms,
--          reset_after_ms, now_ms} for the deciding limit.
--
-- Every redis.call costs ~0.6 us of overhead, so the common paths use few:
-- an admitted check on one limit makes 6 (TIME, ZREMRANGEBYSCORE, ZCARD,
-- ZRANGE newest, ZADD, PEXPIRE).

local key = KEYS[1]
local record = ARGV[1] == '1'
local cost = tonumber(ARGV[3])
local n = tonumber(ARGV[4])

-- Step 1: the time. Redis TIME by default, so every instance shares one
-- clock (ms = sec * 1000 + usec / 1000, truncated); or the caller's ms.
local now = tonumber(ARGV[2])
if now < 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Step 2: the limits, and the longest window (how long records are kept).
local maxes, windows = {}, {}
local longest = 0
for i = 1, n do
  maxes[i] = tonumber(ARGV[3 + 2 * i])
  windows[i] = tonumber(ARGV[4 + 2 * i])
  if windows[i] > longest then longest = windows[i] end
end

-- Step 3: drop the expired records, ts <= now - longest (ZREMRANGEBYSCORE is
-- inclusive: exactly the original script's boundary). A peek changes
-- nothing, so it skips this and counts around the expired records instead.
-- Numbers are formatted with %d: Lua's tostring keeps only 14 digits.
if record then
  redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now - longest))
end

-- Step 4: count the live records (ts > now - window) of every limit. After
-- step 3 the set holds exactly the live records of the longest window, so
-- ZCARD counts that limit; shorter windows need a ZCOUNT each.
local total = redis.call('ZCARD', key)
local lives = {}
for i = 1, n do
  if total == 0 then
    lives[i] = 0
  elseif record and windows[i] == longest then
    lives[i] = total
  else
    lives[i] = redis.call('ZCOUNT', key, string.format('(%d', now - windows[i]), '+inf')
  end
end

-- Step 5: admit iff live + cost <= max for every limit, and find the
-- deciding limit exactly as slidelog_core::engine::evaluate does: rejected,
-- the violated limit with the largest wait (ties: the shorter window);
-- allowed, the limit with the smallest remaining (ties: the shorter window).
-- Live records of a limit are the newest `live` ones (a suffix by rank), so
-- the k-th oldest live record, k = live + cost - max, has 0-based rank
-- total - live + k - 1; it must expire before the request fits.
local allowed = true
local worst, worst_wait = nil, 0
local tight, tight_rem = nil, 0
for i = 1, n do
  local live = lives[i]
  if live + cost > maxes[i] then
    allowed = false
    local rank = total - live + (live + cost - maxes[i]) - 1
    local kth = tonumber(redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')[2])
    local wait = kth + windows[i] - now
    if worst == nil or wait > worst_wait or (wait == worst_wait and windows[i] < windows[worst]) then
      worst, worst_wait = i, wait
    end
  else
    local rem = maxes[i] - live - cost
    if tight == nil or rem < tight_rem or (rem == tight_rem and windows[i] < windows[tight]) then
      tight, tight_rem = i, rem
    end
  end
end

-- Step 6: the newest record, for reset_after_ms (and the TTL below).
local newest = nil
if total > 0 then
  newest = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
end

if not allowed then
  -- Step 7a: rejected. Nothing is appended; a check still refreshes the TTL
  -- (step 9) so that a key it decided on never lacks one.
  local d = worst
  local reset = newest + windows[d] - now
  if reset < 0 then reset = 0 end
  if record then
    redis.call('PEXPIRE', key, math.max(longest, newest + longest - now))
  end
  -- More than max records can be live after a clock step back or a lowered
  -- max: remaining is then 0 (as the engine's saturating subtraction).
  return {0, maxes[d], windows[d], lives[d], math.max(0, maxes[d] - lives[d]), worst_wait, reset, now}
end

-- Step 7b: allowed. After appending, the newest record is the later of the
-- old newest (a clock that stepped back leaves records in the future) and now.
local d = tight
local newest_after = now
if newest ~= nil and newest > now then newest_after = newest end

if record then
  -- Step 8: append `cost` records at `now`, each with its own member, in as
  -- few ZADDs as Lua's stack allows (one for any cost up to 2,000).
  local given = #ARGV - (4 + 2 * n)
  local first = 5 + 2 * n
  local chunk = 2000
  local args = {}
  local filled = 0
  for i = 1, cost do
    local member
    if given == cost then
      member = ARGV[first + i - 1]
    else
      member = ARGV[first] .. ':' .. i
    end
    args[2 * filled + 1] = now
    args[2 * filled + 2] = member
    filled = filled + 1
    if filled == chunk or i == cost then
      redis.call('ZADD', key, unpack(args, 1, 2 * filled))
      filled = 0
    end
  end
  -- Step 9: the TTL is the longest window (in ms, PEXPIRE), or longer when
  -- the newest record is in the future, so PTTL is never -1 and the key
  -- lives exactly as long as any of its records can be live.
  redis.call('PEXPIRE', key, newest_after + longest - now)
end

return {1, maxes[d], windows[d], lives[d] + cost, tight_rem, 0, newest_after + windows[d] - now, now}

-- slidelog: the steps every script on the log shares (docs/design.md §4,
-- §4.1), written once. Joined before sliding_log.lua and usage.lua at
-- build time (crates/slidelog-redis/src/script.rs, usage.rs, joint.rs), so
-- each script's SHA covers this text too. Local functions only: nothing
-- here runs or touches Redis until a script calls it.

-- Redis TIME in ms (sec * 1000 + usec / 1000, truncated): every instance
-- shares the server's one clock.
local function redis_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The time of a run: the caller's ms, or Redis TIME when it sends '-1'
-- (`given` says which: a deadline is always compared with Redis TIME).
local function clock(arg)
  local now = tonumber(arg)
  local given = now >= 0
  if not given then now = redis_ms() end
  return now, given
end

-- True when the caller's deadline (Unix ms on its clock less the skew it
-- assumes; -1: none) has passed by Redis TIME: the run is then refused
-- before it changes anything, so nothing the caller gave up on is written.
local function gave_up(deadline, now, given)
  return deadline >= 0 and (given and redis_ms() or now) > deadline
end

-- The limits from `A[at + 3i - 2 ..]` (max, window_ms, cost for each of
-- `n`), and the longest window: how long records are kept.
local function read_limits(A, at, n)
  local maxes, windows, costs = {}, {}, {}
  local longest = 0
  for i = 1, n do
    local j = at + 3 * i
    maxes[i], windows[i], costs[i] = tonumber(A[j - 2]), tonumber(A[j - 1]), tonumber(A[j])
    if windows[i] > longest then longest = windows[i] end
  end
  return maxes, windows, costs, longest
end

-- The cost of a record at a position: 1 for a plain id, else its listed
-- cost (a later position takes the last listed one).
local function cost_of(m, position)
  local at = string.find(m, '#', 1, true)
  if not at then return 1 end
  local index, last = 1, 1
  for c in string.gmatch(string.sub(m, at + 1), '%d+') do
    last = tonumber(c)
    if index == position then return last end
    index = index + 1
  end
  return last
end

-- The weights hash as read by HGETALL (`stored`) into fields:
-- name `<position>/<window_ms>` -> {extra, frontier, changed, position,
-- new frontier}. A field that does not parse is left out.
local function parse_fields(stored)
  local fields = {}
  for j = 1, #stored, 2 do
    local e, f = string.match(stored[j + 1], '^(%-?%d+) (%-?%d+)$')
    local position = tonumber(string.match(stored[j], '^(%d+)/'))
    if e and position then fields[stored[j]] = {tonumber(e), tonumber(f), false, position, nil} end
  end
  return fields
end

-- The live records of every limit: the records with ts > now - window.
-- Once the expired records are dropped (`expired`), the set holds exactly
-- the live records of the longest window, so ZCARD counts that one in
-- O(1); a shorter window takes a ZCOUNT. Returns ZCARD and the counts.
local function live_records(log, n, windows, longest, now, expired)
  local total = redis.call('ZCARD', log)
  local records = {}
  for i = 1, n do
    if total == 0 then
      records[i] = 0
    elseif expired and windows[i] == longest then
      records[i] = total
    else
      records[i] = redis.call('ZCOUNT', log, string.format('(%d', now - windows[i]), '+inf')
    end
  end
  return total, records
end

-- The timestamp of the k-th oldest live unit at a position, `first` the
-- rank of the oldest live record: a rank on a plain log (every record
-- costs 1), else a walk from the oldest live record, in batches, until k
-- units are summed. (A weighted log whose extra units sum to 0 may still
-- mix costs: a record settled to 0 in a limit is -1 there, docs/design.md
-- §4.5, so only the marker allows the rank.)
local function kth_unit(log, weighted, first, position, k, now)
  if not weighted then
    local rank = first + k - 1
    return tonumber(redis.call('ZRANGE', log, rank, rank, 'WITHSCORES')[2])
  end
  local sum, from, batch = 0, first, 64
  while true do
    local got = redis.call('ZRANGE', log, from, from + batch - 1, 'WITHSCORES')
    -- Never past the end (the sums say k units are live; a guard, not a path).
    if #got == 0 then return now end
    for j = 1, #got, 2 do
      sum = sum + cost_of(got[j], position)
      if sum >= k then return tonumber(got[j + 1]) end
    end
    from = from + batch
    if batch < 4096 then batch = batch * 4 end
  end
end

-- The newest live record that counts at a position (for reset_after_ms):
-- the newest record (`newest` its score, `member` its member), unless a
-- settle left it at cost 0 there (docs/design.md §4.5); then the newest
-- record after `frontier` of cost > 0, or nil.
local function newest_counting(log, weighted, newest, member, position, frontier)
  if newest == nil or not weighted or cost_of(member, position) > 0 then return newest end
  local got = redis.call('ZRANGEBYSCORE', log, string.format('(%d', frontier), '+inf', 'WITHSCORES')
  for j = #got - 1, 1, -2 do
    if cost_of(got[j], position) > 0 then return tonumber(got[j + 1]) end
  end
  return nil
end

-- The deciding limit, as slidelog_core::engine::deciding chooses it:
-- limit `i` with `value` replaces `best` (its value `best_value`) when
-- none is chosen yet, when its value is larger (`larger`: waits) or
-- smaller (remaining), or equal with a shorter window.
local function outranks(i, value, best, best_value, windows, larger)
  if best == nil then return true end
  if value == best_value then return windows[i] < windows[best] end
  return (value > best_value) == larger
end

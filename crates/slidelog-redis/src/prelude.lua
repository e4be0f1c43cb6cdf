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
-- `n`; a granular limit's window as `<window_ms>@<granularity_ms>`,
-- docs/design.md §1.1). Returns maxes, windows, costs, the keep (the
-- longest `window + granularity - 1`: how long a record can count, so how
-- long records are kept; the longest window when every limit is exact),
-- each limit's granularity (1: exact ms), `G`, the gcd of the
-- granularities (a record is stored at `now` rounded up to it), whether
-- any limit is granular, and each limit's frontier at `now`: a record
-- stored at `s` counts in it iff `s > floor(now / g) * g - window` (its
-- rounded time is after `now - window`): the exact rule at the last
-- granule boundary.
local function read_limits(A, at, n, now)
  local maxes, windows, costs, grans, fr = {}, {}, {}, {}, {}
  local keep, granule, granular = 0, 0, false
  for i = 1, n do
    local j = at + 3 * i
    maxes[i], windows[i], costs[i], grans[i] = tonumber(A[j - 2]), tonumber(A[j - 1]), tonumber(A[j]), 1
    if windows[i] == nil then
      local w, g = string.match(A[j - 1], '^(%d+)@(%d+)$')
      windows[i], grans[i], granular = tonumber(w), tonumber(g), true
    end
    if windows[i] + grans[i] - 1 > keep then keep = windows[i] + grans[i] - 1 end
    -- Euclid: the gcd of the granularities so far.
    local a, b = granule, grans[i]
    while b > 0 do a, b = b, a % b end
    granule = a
    fr[i] = now - now % grans[i] - windows[i]
  end
  return maxes, windows, costs, keep, grans, granule, granular, fr
end

-- `t` rounded up to a multiple of `g`: where a record stored at `t`
-- counts in a limit of granularity `g` (docs/design.md §1.1).
local function round_up(t, g)
  local r = t % g
  if r == 0 then return t end
  return t - r + g
end

-- The weights field of limit `i` (`<position>/<window_ms>`, and
-- `@<granularity_ms>` for a granular limit, whose frontier is its own).
local function field_name(i, window, g)
  if g == 1 then return string.format('%d/%d', i, window) end
  return string.format('%d/%d@%d', i, window, g)
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

-- A record's cost saturates here (slidelog_core's u32 costs,
-- docs/design.md §4.1) and stays saturated.
local SATURATED = 4294967295

-- The steps that write a record's costs, made by a call only where a run
-- writes them (usage.lua, a granular check): every function of a script is
-- a new closure on every run, used or not (about 900 instructions each,
-- BENCHMARKS.md "The Lua prelude"). Returns them in a table.
local function record_steps()
  local R = {}

  -- `a + b` as a record's cost: saturated, and a saturated cost stays so.
  function R.add(a, b)
    if a >= SATURATED or b >= SATURATED then return SATURATED end
    return math.min(SATURATED, a + b)
  end

  -- The text after '#' of a record costing `row` (positions 1..n): '' when 1
  -- everywhere, one cost when all are equal, else one per position.
  function R.list_of(row, n)
    local same = true
    for p = 2, n do if row[p] ~= row[1] then same = false end end
    if same and row[1] == 1 then return '' end
    if same then return string.format('%d', row[1]) end
    local parts = {}
    for p = 1, n do parts[p] = string.format('%d', row[p]) end
    return table.concat(parts, ',')
  end

  -- The member of id `id` listing `list`: a cost-1 record is the bare id on
  -- a plain log and `<id>#1` on a weighted one (the marker).
  function R.member_of(id, list, weighted)
    if list ~= '' then return id .. '#' .. list end
    if weighted then return id .. '#1' end
    return id
  end

  -- Same stored time, one record (docs/design.md §1.1): the marked record
  -- at `ts` a granular request's costs merge into, or nil. Plain records
  -- (the original script's, one unit each) are never merged into, nor a
  -- reservation still listed in `pending` (when given: a cancel removes
  -- its member whole, docs/design.md §4.7).
  function R.marked_at(log, ts, pending)
    local s = string.format('%d', ts)
    for _, m in ipairs(redis.call('ZRANGEBYSCORE', log, s, s)) do
      if string.find(m, '#', 1, true) and (pending == nil or not redis.call('ZSCORE', pending, m)) then return m end
    end
    return nil
  end

  -- The id of a member (its ULID, before any '#').
  function R.id_of(m)
    local at = string.find(m, '#', 1, true)
    if at then return string.sub(m, 1, at - 1) end
    return m
  end

  -- The member named by `member`'s id costing the record `old` plus `costs`
  -- (one per limit, `n` of them; a later position takes the last), position
  -- by position, saturated; as wide as the wider of the two.
  function R.merged(member, old, costs, n)
    local width = 0
    for _ in string.gmatch(string.sub(old, string.find(old, '#', 1, true) + 1), '%d+') do width = width + 1 end
    if n > width then width = n end
    local row = {}
    for p = 1, width do row[p] = R.add(cost_of(old, p), costs[math.min(p, n)]) end
    return R.member_of(R.id_of(member), R.list_of(row, width), true)
  end

  -- The horizon of a granular key after a request that records at `stored`
  -- (at `now`, keeping records `keep` ms): a record counts up to its rounding
  -- past its window, so the key keeps its records `keep + stored - now` ms
  -- after a decision's time, the longest any request asked, as slidelog's
  -- own logs keep their horizon (docs/design.md §1, §1.1): a clock that
  -- steps back then still finds every record a limit counts there. Kept in
  -- the weights hash (a granular log is always weighted), gone with it; a
  -- log that empties starts it again.
  function R.horizon_after(horizon, keep, stored, now)
    return math.max(horizon, keep + stored - now)
  end

  return R
end

-- The weights hash as read by HGETALL (`stored`) into fields:
-- name `<position>/<window_ms>` -> {extra, frontier, changed, position,
-- new frontier}. A field that does not parse is left out. Also the key's
-- horizon (field `horizon`, 0 when absent): see record_steps().horizon_after.
local function parse_fields(stored)
  local fields, horizon = {}, 0
  for j = 1, #stored, 2 do
    local e, f = string.match(stored[j + 1], '^(%-?%d+) (%-?%d+)$')
    local position = tonumber(string.match(stored[j], '^(%d+)/'))
    if e and position then fields[stored[j]] = {tonumber(e), tonumber(f), false, position, nil} end
    if stored[j] == 'horizon' then horizon = tonumber(stored[j + 1]) or 0 end
  end
  return fields, horizon
end


-- The live records of every limit: the records after its frontier. Once
-- the records at or before `cutoff` are dropped (`expired`), the set holds
-- exactly the records after it, so ZCARD counts a limit whose frontier is
-- the cutoff (the longest exact window) in O(1); any other takes a ZCOUNT.
-- Returns ZCARD and the counts.
local function live_records(log, n, fr, cutoff, expired)
  local total = redis.call('ZCARD', log)
  local records = {}
  for i = 1, n do
    if total == 0 then
      records[i] = 0
    elseif expired and fr[i] == cutoff then
      records[i] = total
    else
      records[i] = redis.call('ZCOUNT', log, string.format('(%d', fr[i]), '+inf')
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

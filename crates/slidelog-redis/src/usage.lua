-- slidelog: a SETTLE or a CHARGE (usage-based limits, docs/design.md §4.5),
-- atomically, on the layout of sliding_log.lua (plain and weighted records,
-- the weights hash, the marker). One script for both: they share the
-- marker upkeep, the weights upkeep and the answer (the limits as they stand
-- after the change, as slidelog_core::engine::standing gives them).
--
-- KEYS[1]   the log (sorted set)
-- KEYS[2]   its weights (hash, same Cluster slot)
-- KEYS[3]   charge only, optional: the once key (same Cluster slot,
--           slidelog_core::slot::once_key): if it exists the charge is a
--           no-op answered done = 4 ("already"); else the charge is made
--           and the key set for ARGV[6+3n] ms, in this one run, so a
--           charge sent again after a lost reply counts once
-- ARGV[1]   'settle' or 'charge'
-- ARGV[2]   now in ms, or '-1' to read Redis TIME
-- ARGV[3]   the caller's deadline in Unix ms, or '-1': an operation that
--           starts later is refused, nothing changed (as a check is)
-- ARGV[4]   n, the number of limits (1 ..= 16)
-- ARGV[5 .. 4+3n]  max_i, window_ms_i, cost_i: the costs to settle to, or
--                  to charge (0 in a limit: the record counts nowhere in it)
-- charge:  ARGV[5+3n] the member to append (client-made, as a check's); a
--          charge merged into the newest record renames it to this id;
--          ARGV[6+3n] the once key's TTL in ms, when KEYS[3] is given
-- settle:  ARGV[5+3n] the record's id (its ULID), ARGV[6+3n] its timestamp,
--          ARGV[7+3n] the costs the receipt names ('' for cost 1): its
--          share of the record, ARGV[8+3n] the costs to settle that share
--          to ('' for cost 1), ARGV[9+3n] the id the settled record takes
--          (a fresh ULID: so a receipt settles once; absent, it keeps its
--          id, the layout before single use)
-- Returns {done 0|1, allowed 0|1, max, window_ms, count, remaining,
--          retry_after_ms, reset_after_ms, now_ms}, then count_i,
-- remaining_i, retry_after_ms_i, reset_after_ms_i of every limit i in order,
-- then the timestamp of the record settled or charged (0: none)
-- (1 + 8 + 4n + 1 numbers): done = the record was found and settled
-- (settle) or the costs were recorded, appended or merged (charge); 4 =
-- the once key existed, so this charge changed nothing.
--
-- Numbers: Lua's are doubles, exact to 2^53. A record's cost saturates at
-- 2^32 - 1 and stays there (slidelog_core's u32 costs, docs/design.md
-- §4.1); a change that would take a weights sum past 2^52 (room left for
-- the checks' own additions) is refused with TOOLARGE, the log unchanged.

local log, weights = KEYS[1], KEYS[2]
local op = ARGV[1]
local n = tonumber(ARGV[4])
local SUM_BOUND = 4503599627370496

-- Step 1: the time, as sliding_log.lua reads it (prelude.lua's clock()).
local now, given_now = clock(ARGV[2])

-- Step 2: an operation whose caller gave up is refused before it changes
-- anything (the check's step 1b: same error code, same clock).
if gave_up(tonumber(ARGV[3]), now, given_now) then
  return redis.error_reply('DEADLINE the caller gave up on this operation before it ran; nothing changed')
end

-- Step 3: the newest record (the marker of a weighted log). A key the module
-- holds answers WRONGTYPE: refused with a code of its own (the module's
-- SLIDELOG.SETTLE / SLIDELOG.CHARGE decide it).
local top = redis.pcall('ZRANGE', log, -1, -1, 'WITHSCORES')
if top.err then
  if string.sub(top.err, 1, 9) ~= 'WRONGTYPE' then return top end
  return redis.error_reply('MODULEKEY the key is held by the slidelog module; settle and charge it through the module engine')
end
local marked = top[1] ~= nil and string.find(top[1], '#', 1, true) ~= nil

-- Step 4: the limits and the costs, and the keep (the longest window, or
-- longest `window + granularity - 1`: prelude.lua's read_limits; cost_of
-- there too); each limit's frontier (a granular limit's at its last
-- granule boundary, docs/design.md §1.1) and the time a charge is stored
-- at (now rounded up to the gcd of the granularities).
local maxes, windows, costs, longest, grans, granule, granular, fr = read_limits(ARGV, 4, n, now)
local stored_at = round_up(now, granule)
-- The steps that write a record's costs (prelude.lua's record_steps()).
local R = record_steps()
local add, list_of, member_of, id_of = R.add, R.list_of, R.member_of, R.id_of

-- id_of, list_of, member_of and add (saturated costs) are prelude.lua's
-- record_steps().

-- Step 5: the weights, read once when the log is weighted (marked):
-- W[field] = {extra, frontier, _, position} (prelude.lua's parse_fields);
-- a field changed is written back once, at the end. A plain log's hash is
-- stale: it is dropped when the log changes (the next count of a weighted
-- log rebuilds what it needs).
local W, dirty, stale, horizon, horizon_out = {}, {}, false, 0, nil
if marked then W, horizon = parse_fields(redis.call('HGETALL', weights)) end

-- Step 6: drop the expired records (ts <= now - keep), as a check
-- does (so a later check at an earlier time, after a clock step back, sees
-- what it would after a check). Every field whose frontier is older than
-- the cutoff first moves to it, leaving the extra units of the records
-- removed (sliding_log.lua step 3). A granular key keeps its horizon
-- (prelude.lua's record_steps().horizon_after).
local cutoff = now - math.max(longest, horizon)
local expired = redis.call('ZRANGEBYSCORE', log, '-inf', string.format('%d', cutoff), 'WITHSCORES')
if #expired > 0 then
  for name, fl in pairs(W) do
    if fl[2] < cutoff then
      local sum = 0
      for x = 1, #expired, 2 do
        if tonumber(expired[x + 1]) > fl[2] then sum = sum + cost_of(expired[x], fl[4]) - 1 end
      end
      fl[1], fl[2], dirty[name] = fl[1] - sum, cutoff, true
    end
  end
  redis.call('ZREMRANGEBYSCORE', log, '-inf', string.format('%d', cutoff))
  -- A log the expiry emptied starts its horizon again.
  if redis.call('EXISTS', log) == 0 then horizon = 0 end
end

-- The extra units at a position of the records with lo < ts <= hi.
local function extra_between(lo, hi, pos)
  local sum = 0
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', log, string.format('(%d', lo), hi)) do
    sum = sum + cost_of(m, pos) - 1
  end
  return sum
end

-- The live units of every limit, as the check counts them (sliding_log.lua
-- steps 3 and 5): the records after its frontier (prelude.lua's
-- live_records); a weighted log adds its field's extra units, the field's
-- frontier moved to the limit's (reading only the records that crossed it;
-- a field missing is counted from the log once).
local function count(weighted)
  local total, records = live_records(log, n, fr, cutoff, true)
  local lives = {}
  for i = 1, n do
    local target = fr[i]
    local extra = 0
    if weighted and total > 0 then
      local name = field_name(i, windows[i], grans[i])
      local fl = W[name]
      if fl == nil then
        fl = {extra_between(target, '+inf', i), target, true, i}
        W[name], dirty[name] = fl, true
      elseif fl[2] < target then
        fl[1] = fl[1] - extra_between(fl[2], string.format('%d', target), i)
      elseif fl[2] > target then
        fl[1] = fl[1] + extra_between(target, string.format('%d', fl[2]), i)
      end
      if fl[2] ~= target then fl[2], dirty[name] = target, true end
      extra = fl[1]
    end
    lives[i] = records[i] + extra
  end
  return total, records, lives
end

-- A change of records: `gone` and `added` are lists of {ts, member}. Every
-- field whose frontier is older than a record's ts holds its extra units
-- (cost - 1), so the change is applied there; on a plain log the hash is
-- stale and dropped. A sum past SUM_BOUND refuses the change (nothing is
-- written but the expiry and the frontiers moved, as a check writes them).
local function flush()
  if stale then redis.call('DEL', weights) end
  local changed = {}
  for name in pairs(dirty) do
    changed[#changed + 1] = name
    changed[#changed + 1] = string.format('%d %d', W[name][1], W[name][2])
  end
  -- The horizon: when a granular charge raised it, or the hash was dropped.
  if horizon_out ~= nil and (horizon_out ~= horizon or stale) then
    changed[#changed + 1] = 'horizon'
    changed[#changed + 1] = string.format('%d', horizon_out)
  end
  if #changed > 0 then redis.call('HSET', weights, unpack(changed)) end
  dirty, horizon_out = {}, nil
end
local function change(gone, added)
  if not marked then
    stale = true
  else
    local deltas = {}
    for name, fl in pairs(W) do
      local d = 0
      for _, r in ipairs(gone) do
        if r[1] > fl[2] then d = d - (cost_of(r[2], fl[4]) - 1) end
      end
      for _, r in ipairs(added) do
        if r[1] > fl[2] then d = d + cost_of(r[2], fl[4]) - 1 end
      end
      if math.abs(fl[1] + d) > SUM_BOUND then return false end
      deltas[name] = d
    end
    for name, d in pairs(deltas) do
      if d ~= 0 then W[name][1], dirty[name] = W[name][1] + d, true end
    end
  end
  for _, r in ipairs(gone) do redis.call('ZREM', log, r[2]) end
  for _, r in ipairs(added) do redis.call('ZADD', log, string.format('%d', r[1]), r[2]) end
  return true
end
local TOOLARGE = 'TOOLARGE the costs would take a sum of this key past 2^52 (Lua numbers are exact to 2^53); nothing changed'

-- Step 7: the marker. Every record of a weighted log from the newest back
-- carries a '#' (sliding_log.lua, "The marker"): after a change, a plain
-- newest record (the marked one was removed, or a plain log turned
-- weighted) and its same-ms ties are renamed `<id>#1`.
local function keep_marker()
  local t = redis.call('ZRANGE', log, -1, -1, 'WITHSCORES')
  if t[1] == nil or string.find(t[1], '#', 1, true) then return end
  local ties = redis.call('ZRANGEBYSCORE', log, t[2], t[2])
  for _, m in ipairs(ties) do
    if not string.find(m, '#', 1, true) then
      redis.call('ZREM', log, m)
      redis.call('ZADD', log, t[2], m .. '#1')
    end
  end
end

-- a < b byte by byte, as Redis orders the members of one score (Lua's `<`
-- follows the locale's collation).
local function before(a, b)
  for j = 1, math.min(#a, #b) do
    local x, y = string.byte(a, j), string.byte(b, j)
    if x ~= y then return x < y end
  end
  return #a < #b
end

-- The member `<id>#...` at score `ts`, whatever costs it lists (a record a
-- charge merged into lists more than the receipt's share): members of one
-- score are ordered by their bytes, so a binary search by rank among them
-- finds the first not before `<id>#`. O(log n) per probe.
local function find_by_id(id, ts)
  local s = string.format('%d', ts)
  local first = redis.call('ZCOUNT', log, '-inf', '(' .. s)
  local m = redis.call('ZCOUNT', log, s, s)
  if m == 0 then return nil end
  local prefix = id .. '#'
  local lo, hi = first, first + m - 1
  if m > 16 then
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      if before(redis.call('ZRANGE', log, mid, mid)[1], prefix) then lo = mid + 1 else hi = mid end
    end
    hi = lo
  end
  for _, x in ipairs(redis.call('ZRANGE', log, lo, hi)) do
    if string.sub(x, 1, #prefix) == prefix then return x end
  end
  return nil
end

-- A granular request's records are one per stored time (docs/design.md
-- §1.1): a later request merged into the record renames it, so a receipt
-- not found by its id is found by its time: the first marked record there
-- whose cost holds the receipt's share in every limit (a saturated cost
-- holds any). Its share alone is settled, as for any record.
local function share_at(ts, share)
  local s = string.format('%d', ts)
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', log, s, s)) do
    local holds = string.find(m, '#', 1, true) ~= nil
    for p = 1, n do
      if cost_of(m, p) < math.min(cost_of(share, p), SATURATED) then holds = false end
    end
    if holds then return m end
  end
  return nil
end

-- The log is weighted after the change: it was, or a weighted member came.
local weighted_after = marked

-- Step 8 (settle): find the record the receipt names: its id at the
-- receipt's timestamp, kept (ts > the cutoff of step 6). Its member is usually the
-- id and the receipt's costs (a cost-1 record the bare id, or `<id>#1` on
-- a weighted log), one ZSCORE; a record a charge merged into lists more,
-- and is found by its id. The receipt's costs are its share of the record
-- (the whole record unless a charge merged into it): the share is
-- replaced by the settled costs (cost - share + new, a saturated cost
-- stays saturated), at the same score, under the fresh id, so the receipt
-- used names nothing any more. All 0 removes the record (a refund). A
-- record that lists less than the share in some limit is not it.
local function settle()
  local id, ts = ARGV[5 + 3 * n], tonumber(ARGV[6 + 3 * n])
  local old_list, new_list = ARGV[7 + 3 * n], ARGV[8 + 3 * n]
  local fresh = ARGV[9 + 3 * n] or id
  if not (ts > cutoff) then return 0 end
  local candidates = {id .. '#' .. old_list}
  if old_list == '' then candidates = {id, id .. '#1'} end
  local found = nil
  for _, m in ipairs(candidates) do
    local score = redis.call('ZSCORE', log, m)
    if score and tonumber(score) == ts then found = m end
  end
  if found == nil then found = find_by_id(id, ts) end
  local share = 'x#' .. old_list
  if old_list == '' then share = 'x' end
  if found == nil and granular then found = share_at(ts, share) end
  if found == nil then return 0 end
  local row, exact, removed = {}, true, true
  for p = 1, n do
    local had, part = cost_of(found, p), cost_of(share, p)
    if had < part then return 0 end
    row[p] = SATURATED
    if had < SATURATED then row[p] = add(had - part, costs[p]) end
    if row[p] ~= costs[p] then exact = false end
    if row[p] ~= 0 then removed = false end
  end
  local added = {}
  if not removed then
    -- The settled share alone: the client's list, so the next receipt's
    -- ZSCORE finds it.
    local list = list_of(row, n)
    if exact then list = new_list end
    added[1] = {ts, member_of(fresh, list, marked)}
    if list ~= '' then weighted_after = true end
  end
  if not change({{ts, found}}, added) then return nil end
  return 1, ts
end

-- Step 8 (charge): record the costs at now (its stored time, rounded up
-- for granular limits), unchecked; 0 everywhere records nothing. Into a log already at or over its max in a limit the charge
-- costs something in (slidelog_core::engine::charge_merges), the costs
-- merge into the newest record, which moves to now (or stays, when it is
-- later: a clock that stepped back) under the charge's id: a moved record
-- takes every member of its millisecond with it (the engine's one record
-- per ms), so a key's members stay bounded by its limits whatever is
-- charged. Else ONE member is appended (on a weighted log a cost-1 member
-- takes the marker; a weighted member turns a plain log weighted); a
-- granular charge is marked and merges into the marked record already at
-- its stored time, if any (one record per stored time, docs/design.md §1.1).
local function charge()
  -- Step 8a: a charge made once (KEYS[3]) that was made already changes
  -- nothing; the answer is the limits as they stand.
  local once = KEYS[3]
  if once ~= nil and redis.call('EXISTS', once) == 1 then return 4 end
  local any = false
  for i = 1, n do if costs[i] ~= 0 then any = true end end
  if not any then return 0 end
  local member = ARGV[5 + 3 * n]
  local _, _, lives = count(marked)
  local merges = false
  for i = 1, n do
    if costs[i] > 0 and lives[i] >= maxes[i] then merges = true end
  end
  local newest = redis.call('ZRANGE', log, -1, -1, 'WITHSCORES')
  if not merges or newest[1] == nil then
    local weighted_member = string.find(member, '#', 1, true) ~= nil
    if (marked or granular) and not weighted_member then member = member .. '#1' end
    if weighted_member or granular then weighted_after = true end
    local into = granular and R.marked_at(log, stored_at)
    local gone, added = {}, {{stored_at, member}}
    if into then gone, added = {{stored_at, into}}, {{stored_at, R.merged(member, into, costs, n)}} end
    if not change(gone, added) then return nil end
    return 1, stored_at
  end
  local from = tonumber(newest[2])
  local ts = math.max(from, stored_at)
  local gone = {{from, newest[1]}}
  if ts > from then
    gone = {}
    for _, m in ipairs(redis.call('ZRANGEBYSCORE', log, newest[2], newest[2])) do
      gone[#gone + 1] = {from, m}
    end
  end
  local row = {}
  for p = 1, n do
    row[p] = costs[p]
    for _, r in ipairs(gone) do row[p] = add(row[p], cost_of(r[2], p)) end
  end
  local list = list_of(row, n)
  if list ~= '' or granular then weighted_after = true end
  local into = member_of(id_of(member), list, marked or weighted_after)
  if not change(gone, {{ts, into}}) then return nil end
  return 1, ts
end

local done, record_ts
if op == 'settle' then done, record_ts = settle() else done, record_ts = charge() end
-- A granular charge raises the key's horizon, as a check does.
if op == 'charge' and done == 1 and granular then horizon_out = R.horizon_after(horizon, longest, stored_at, now) end
-- Step 8b: a charge made once marks its id charged (the same run, so the
-- mark and the charge replicate together); a charge of nothing (done 0)
-- marks it too, so its sender stops asking.
if op == 'charge' and KEYS[3] ~= nil and (done == 1 or done == 0) then
  redis.call('SET', KEYS[3], '1', 'PX', ARGV[6 + 3 * n])
end
if done == nil then
  flush()
  return redis.error_reply(TOOLARGE)
end
record_ts = record_ts or 0
if done == 1 and weighted_after then keep_marker() end

-- Step 9: the live units of every limit after the change (the fields'
-- frontiers moved and saved, as a check saves them).
local top_after = redis.call('ZRANGE', log, -1, -1, 'WITHSCORES')
local total, records, lives = count(weighted_after)
flush()

-- Step 10: the TTL, as every decision sets it: the longest window after the
-- newest record (PEXPIRE), so PTTL is never -1 and the weights hash lives
-- exactly as long as the log.
local newest = tonumber(top_after[2])
if newest then
  local ttl = math.max(1, math.max(newest, now) + longest - now)
  redis.call('PEXPIRE', log, string.format('%d', ttl))
  if weighted_after then redis.call('PEXPIRE', weights, string.format('%d', ttl)) end
end

-- Step 11: the limits as they stand (slidelog_core::engine::standing):
-- one more unit fits in every limit, or the deciding limit is the one with
-- the longest wait (ties: the shorter window); else the one with the least
-- room (ties: the shorter window), as a check of cost 1 chooses it.
local allowed, worst, worst_wait, tight, tight_rem = true, nil, 0, nil, 0
local waits = {}
for i = 1, n do
  if lives[i] + 1 > maxes[i] then
    allowed = false
    -- prelude.lua's kth_unit, as sliding_log.lua finds a wait.
    -- Its time rounded up to the limit's granularity (docs/design.md §1.1).
    local kth = kth_unit(log, weighted_after, total - records[i], i, lives[i] + 1 - maxes[i], now)
    local wait = round_up(kth, grans[i]) + windows[i] - now
    waits[i] = wait
    if outranks(i, wait, worst, worst_wait, windows, true) then
      worst, worst_wait = i, wait
    end
  else
    local rem = maxes[i] - lives[i] - 1
    if outranks(i, rem, tight, tight_rem, windows, false) then
      tight, tight_rem = i, rem
    end
  end
end
local d = tight
if not allowed then d = worst end
-- Step 12: every limit's fields as the deciding one's (standing_each),
-- after the deciding limit's.
local resets = {}
for i = 1, n do
  -- The newest live record that counts there (prelude.lua's newest_counting).
  local counted = newest_counting(log, weighted_after, newest, top_after[1], i, fr[i])
  resets[i] = 0
  if counted ~= nil then resets[i] = math.max(0, round_up(counted, grans[i]) + windows[i] - now) end
end
local reply = {done, allowed and 1 or 0, maxes[d], windows[d], lives[d],
  math.max(0, maxes[d] - lives[d]), allowed and 0 or worst_wait, resets[d], now}
for i = 1, n do
  local at = 6 + 4 * i
  reply[at], reply[at + 1], reply[at + 2], reply[at + 3] =
    lives[i], math.max(0, maxes[i] - lives[i]), waits[i] or 0, resets[i]
end
reply[#reply + 1] = record_ts
return reply

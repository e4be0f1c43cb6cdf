-- slidelog: a SETTLE or a CHARGE (usage-based limits, docs/design.md §4.5),
-- atomically, on the layout of sliding_log.lua (plain and weighted records,
-- the weights hash, the marker). One script for both: they share the
-- marker upkeep, the weights upkeep and the answer (the limits as they stand
-- after the change, as slidelog_core::engine::standing gives them).
--
-- KEYS[1]   the log (sorted set)
-- KEYS[2]   its weights (hash, same Cluster slot)
-- ARGV[1]   'settle' or 'charge'
-- ARGV[2]   now in ms, or '-1' to read Redis TIME
-- ARGV[3]   the caller's deadline in Unix ms, or '-1': an operation that
--           starts later is refused, nothing changed (as a check is)
-- ARGV[4]   n, the number of limits (1 ..= 16)
-- ARGV[5 .. 4+3n]  max_i, window_ms_i, cost_i: the costs to settle to, or
--                  to charge (0 in a limit: the record counts nowhere in it)
-- charge:  ARGV[5+3n] the member to append (client-made, as a check's)
-- settle:  ARGV[5+3n] the record's id (its ULID), ARGV[6+3n] its timestamp,
--          ARGV[7+3n] the cost list its member carries ('' for cost 1),
--          ARGV[8+3n] the cost list to settle to ('' for cost 1)
-- Returns {done 0|1, allowed 0|1, max, window_ms, count, remaining,
--          retry_after_ms, reset_after_ms, now_ms}, then count_i,
-- remaining_i, retry_after_ms_i, reset_after_ms_i of every limit i in order
-- (1 + 8 + 4n numbers): done = the record was found and settled (settle)
-- or a record was appended (charge).

local log, weights = KEYS[1], KEYS[2]
local op = ARGV[1]
local n = tonumber(ARGV[4])

-- Step 1: the time, as sliding_log.lua reads it.
local now = tonumber(ARGV[2])
local function redis_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local given_now = now >= 0
if not given_now then now = redis_ms() end

-- Step 2: an operation whose caller gave up is refused before it changes
-- anything (the check's step 1b: same error code, same clock).
local deadline = tonumber(ARGV[3])
if deadline >= 0 and (given_now and redis_ms() or now) > deadline then
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

-- Step 4: the limits and the costs, and the longest window.
local maxes, windows, costs = {}, {}, {}
local longest = 0
for i = 1, n do
  maxes[i] = tonumber(ARGV[2 + 3 * i])
  windows[i] = tonumber(ARGV[3 + 3 * i])
  costs[i] = tonumber(ARGV[4 + 3 * i])
  if windows[i] > longest then longest = windows[i] end
end

-- The cost of a record at a position: 1 for a plain id, else its listed
-- cost (a later position takes the last listed one). Same as sliding_log.lua.
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

-- Step 5: the weights. A record's extra units (cost - 1) are in every field
-- whose frontier is older than the record; `delta(pos)` is what a change of
-- the record at `ts` adds there. Only a weighted (marked) log has a hash
-- that counts; a plain log's hash is stale and is dropped when the log turns
-- weighted (the next check counts a missing field from the log).
local function adjust_weights(ts, delta)
  if not marked then
    redis.call('DEL', weights)
    return
  end
  local stored = redis.call('HGETALL', weights)
  local changed = {}
  for j = 1, #stored, 2 do
    local e, f = string.match(stored[j + 1], '^(%-?%d+) (%-?%d+)$')
    local pos = tonumber(string.match(stored[j], '^(%d+)/'))
    local d = delta(pos)
    if e and pos and ts > tonumber(f) and d ~= 0 then
      changed[#changed + 1] = stored[j]
      changed[#changed + 1] = string.format('%d %s', tonumber(e) + d, f)
    end
  end
  if #changed > 0 then redis.call('HSET', weights, unpack(changed)) end
end

-- Step 6: the marker. Every record of a weighted log from the newest back
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

-- Step 6b: drop the expired records (ts <= now - longest), as a check
-- does (so a later check at an earlier time, after a clock step back, sees
-- what it would after a check). On a weighted log every field whose
-- frontier is older than the cutoff first moves to it, leaving the extra
-- units of the records removed (sliding_log.lua step 3).
local cutoff = string.format('%d', now - longest)
local expired = redis.call('ZRANGEBYSCORE', log, '-inf', cutoff, 'WITHSCORES')
if #expired > 0 then
  if marked then
    local stored = redis.call('HGETALL', weights)
    local changed = {}
    for j = 1, #stored, 2 do
      local e, f = string.match(stored[j + 1], '^(%-?%d+) (%-?%d+)$')
      local pos = tonumber(string.match(stored[j], '^(%d+)/'))
      if e and pos and tonumber(f) < now - longest then
        local sum = 0
        for x = 1, #expired, 2 do
          if tonumber(expired[x + 1]) > tonumber(f) then sum = sum + cost_of(expired[x], pos) - 1 end
        end
        changed[#changed + 1] = stored[j]
        changed[#changed + 1] = string.format('%d %s', tonumber(e) - sum, cutoff)
      end
    end
    if #changed > 0 then redis.call('HSET', weights, unpack(changed)) end
  end
  redis.call('ZREMRANGEBYSCORE', log, '-inf', cutoff)
end

local done = 0
local weighted_after = marked
if op == 'settle' then
  -- Step 7 (settle): find the record: its member is its id and the cost list
  -- the receipt names (a cost-1 record is the bare id, or `<id>#1` on a
  -- weighted log), its score the receipt's timestamp, and it is live
  -- (ts > now - longest). Not found: nothing changes.
  local id, ts = ARGV[5 + 3 * n], tonumber(ARGV[6 + 3 * n])
  local old_list, new_list = ARGV[7 + 3 * n], ARGV[8 + 3 * n]
  local candidates = {id .. '#' .. old_list}
  if old_list == '' then candidates = {id, id .. '#1'} end
  local found = nil
  for _, m in ipairs(candidates) do
    local score = redis.call('ZSCORE', log, m)
    if score and tonumber(score) == ts and ts > now - longest then found = m end
  end
  if found then
    -- Step 8 (settle): replace its costs, keeping its timestamp. All 0
    -- removes it (a refund). The new member lists the settled costs.
    local removed = true
    for i = 1, n do if costs[i] ~= 0 then removed = false end end
    local member = nil
    if not removed then
      member = id .. '#' .. new_list
      if new_list == '' then member = (marked and id .. '#1') or id end
      if new_list ~= '' then weighted_after = true end
    end
    adjust_weights(ts, function(pos)
      local old = cost_of(found, pos) - 1
      if removed then return -old end
      return cost_of(member, pos) - 1 - old
    end)
    redis.call('ZREM', log, found)
    if not removed then redis.call('ZADD', log, ts, member) end
    done = 1
  end
else
  -- Step 7 (charge): append ONE record at now, unchecked; costs of 0
  -- everywhere append nothing. On a weighted log a cost-1 member takes the
  -- marker; a weighted member on a plain log turns it weighted.
  local any = false
  for i = 1, n do if costs[i] ~= 0 then any = true end end
  if any then
    local member = ARGV[5 + 3 * n]
    local weighted_member = string.find(member, '#', 1, true) ~= nil
    if marked and not weighted_member then member = member .. '#1' end
    if weighted_member then weighted_after = true end
    adjust_weights(now, function(pos) return cost_of(member, pos) - 1 end)
    redis.call('ZADD', log, now, member)
    done = 1
  end
end
if done == 1 and weighted_after then keep_marker() end

-- Step 9: the live units of every limit, as the check counts them
-- (sliding_log.lua steps 3 and 5): after the expiry the set holds the live
-- records of the longest window (ZCARD), a shorter window takes a ZCOUNT;
-- a weighted log adds the extra units of its weights field, moving the
-- field's frontier to now - window (reading only the records that crossed
-- it; a field missing, as after turning weighted, is counted from the log
-- once). The moved fields are saved, as a check saves them.
local top_after = redis.call('ZRANGE', log, -1, -1, 'WITHSCORES')
local total = redis.call('ZCARD', log)
local function extra_between(lo, hi, pos)
  local sum = 0
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', log, string.format('(%d', lo), hi)) do
    sum = sum + cost_of(m, pos) - 1
  end
  return sum
end
local fields = {}
if weighted_after then
  local stored = redis.call('HGETALL', weights)
  for j = 1, #stored, 2 do
    local e, f = string.match(stored[j + 1], '^(%-?%d+) (%-?%d+)$')
    if e then fields[stored[j]] = {tonumber(e), tonumber(f)} end
  end
end
local records, lives, save = {}, {}, {}
for i = 1, n do
  local target = now - windows[i]
  if total == 0 then
    records[i] = 0
  elseif windows[i] == longest then
    records[i] = total
  else
    records[i] = redis.call('ZCOUNT', log, string.format('(%d', target), '+inf')
  end
  local extra = 0
  if weighted_after and total > 0 then
    local name = string.format('%d/%d', i, windows[i])
    local field = fields[name]
    if field == nil then
      extra = extra_between(target, '+inf', i)
    elseif field[2] < target then
      extra = field[1] - extra_between(field[2], string.format('%d', target), i)
    elseif field[2] > target then
      extra = field[1] + extra_between(target, string.format('%d', field[2]), i)
    else
      extra = field[1]
    end
    if field == nil or field[2] ~= target then
      save[#save + 1] = name
      save[#save + 1] = string.format('%d %d', extra, target)
    end
  end
  lives[i] = records[i] + extra
end
if #save > 0 then redis.call('HSET', weights, unpack(save)) end

-- Step 10: the TTL, as every decision sets it: the longest window after the
-- newest record (PEXPIRE), so PTTL is never -1 and the weights hash lives
-- exactly as long as the log.
local newest = tonumber(top_after[2])
if newest then
  local ttl = math.max(1, math.max(newest, now) + longest - now)
  redis.call('PEXPIRE', log, string.format('%d', ttl))
  if weighted_after then redis.call('PEXPIRE', weights, string.format('%d', ttl)) end
end

-- The k-th oldest live unit at a position: a rank on a plain log, else a
-- walk from the oldest live record in batches (a record of cost 0 there
-- adds nothing), as sliding_log.lua's kth_unit.
local function kth_unit(i, k)
  local first = total - records[i]
  if not weighted_after then
    local rank = first + k - 1
    return tonumber(redis.call('ZRANGE', log, rank, rank, 'WITHSCORES')[2])
  end
  local sum, from, batch = 0, first, 64
  while true do
    local got = redis.call('ZRANGE', log, from, from + batch - 1, 'WITHSCORES')
    if #got == 0 then return now end
    for j = 1, #got, 2 do
      sum = sum + cost_of(got[j], i)
      if sum >= k then return tonumber(got[j + 1]) end
    end
    from = from + batch
    if batch < 4096 then batch = batch * 4 end
  end
end

-- The newest live record that counts at a position (reset_after_ms): the
-- newest record unless it costs 0 there, then a walk back.
local function newest_unit(i)
  if newest == nil or not weighted_after or cost_of(top_after[1], i) > 0 then return newest end
  local got = redis.call('ZRANGEBYSCORE', log, string.format('(%d', now - windows[i]), '+inf', 'WITHSCORES')
  for j = #got - 1, 1, -2 do
    if cost_of(got[j], i) > 0 then return tonumber(got[j + 1]) end
  end
  return nil
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
    local wait = kth_unit(i, lives[i] + 1 - maxes[i]) + windows[i] - now
    waits[i] = wait
    if worst == nil or wait > worst_wait or (wait == worst_wait and windows[i] < windows[worst]) then
      worst, worst_wait = i, wait
    end
  else
    local rem = maxes[i] - lives[i] - 1
    if tight == nil or rem < tight_rem or (rem == tight_rem and windows[i] < windows[tight]) then
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
  local counted = newest_unit(i)
  resets[i] = 0
  if counted ~= nil then resets[i] = math.max(0, counted + windows[i] - now) end
end
local reply = {done, allowed and 1 or 0, maxes[d], windows[d], lives[d],
  math.max(0, maxes[d] - lives[d]), allowed and 0 or worst_wait, resets[d], now}
for i = 1, n do
  local at = 6 + 4 * i
  reply[at], reply[at + 1], reply[at + 2], reply[at + 3] =
    lives[i], math.max(0, maxes[i] - lives[i]), waits[i] or 0, resets[i]
end
return reply

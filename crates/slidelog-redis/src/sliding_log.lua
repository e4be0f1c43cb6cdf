-- slidelog: one decision of the sliding window log (docs/design.md §1-§2,
-- layout in §4), atomically. It keeps the original design's layout: a sorted
-- set, score = ms timestamp, member = a unique id; a record with
-- ts <= now - window has expired. A request is ONE record whatever its cost:
-- a cost-1 record is a plain unique id (as the original script writes), a
-- weighted one is `<id>#<cost>` or `<id>#<cost_1>,<cost_2>,...` (one cost
-- per limit, by position; a later position takes the last listed cost).
--
-- KEYS[1]   the log (sorted set)
-- KEYS[2]   its weights (hash, same Cluster slot): read only when the log's
--           newest record carries a '#' (see "The marker" below). Field `<position>/<window_ms>` holds
--           "<extra> <frontier>": the extra units (cost - 1, summed) of the
--           weighted records with ts > frontier. Each decision moves the
--           frontier of its limits to now - window, reading only the records
--           that crossed it, so live units cost O(log n) plus the records
--           that expired, whatever the costs are.
-- KEYS[3]   its pending reservations (sorted set, same slot; "Reservations"
--           below): read only on a weighted log; optional
-- ARGV[1]   mode: '1' = record (a check), '0' = peek (changes nothing);
--           '3' / '2': the same, answering every limit's state too
--           (Store::decide_each; "Every limit" below)
-- ARGV[2]   now in ms, or '-1' to read Redis TIME
-- ARGV[3]   n, the number of limits (1 ..= 16)
-- ARGV[4 .. 3+3n]  max_i, window_ms_i, cost_i for each limit
-- ARGV[4+3n]       the member to add when admitted (checks only)
-- ARGV[5+3n]       the caller's deadline in Unix ms, or '-1' (checks only):
--                  a check that starts later is refused, nothing recorded
-- ARGV[6+3n .. 5+4n]  modes '5' / '7' only (a check, '1' / '3', whose
--                  limits carry block_ms): each limit's block_ms, taken
--                  apart by sliding_log_main.lua (decide()'s `penalty`)
-- Returns {allowed 0|1, max, window_ms, count, remaining, retry_after_ms,
--          reset_after_ms, now_ms} for the deciding limit; in modes '2'/'3'
--          followed by count_i, remaining_i, retry_after_ms_i,
--          reset_after_ms_i of every limit i in order (8 + 4n numbers).

-- The marker: while a log is weighted, every record appended to it carries
-- a '#' (a cost-1 request on a weighted log writes `<id>#1`), so the newest
-- record (ZRANGE -1 -1, read anyway for reset_after_ms) tells a plain log
-- from a weighted one without touching the weights key. A plain newest
-- record means every record is plain and any weights hash left is stale.
-- When a log turns weighted, its plain records at or after `now` (same-ms
-- ties, or records in the future after a clock step back) are renamed to
-- `<id>#1`, so the newest record carries the mark from then on.
--
-- Cost: a check of one limit at cost 1 (the common case) goes to
-- single_limit.lua instead (docs/design.md §4.2), which answers exactly as
-- this script would and hands a weighted log back to it. This script takes
-- several limits, costs above 1, peeks, and weighted logs.

-- cost_of, parse_fields, the clock and the counting steps are prelude.lua's
-- (joined before this file at build time).

-- Reservations (docs/design.md §4.7): the records a joint decision over
-- several Cluster slots wrote in phase 1, each listed in the log's pending
-- sorted set (score: the deadline, on the server's clock, after which it
-- must not count) until the caller confirms it (it stays, a normal
-- record) or cancels it. unreserve() removes `members` from the log and
-- from the pending set, taking each one's extra units out of every weights
-- field whose frontier is older than its timestamp, and writes those
-- fields at once (so a peek that drops them leaves the hash consistent).
local function unreserve(log, weights, pending, members, fields)
  local changed = {}
  for _, m in ipairs(members) do
    local ts = tonumber(redis.call('ZSCORE', log, m))
    if ts ~= nil then
      redis.call('ZREM', log, m)
      for name, field in pairs(fields) do
        if ts > field[2] then
          field[1] = field[1] - (cost_of(m, field[4]) - 1)
          field[3] = true
          changed[name] = field
        end
      end
    end
  end
  redis.call('ZREM', pending, unpack(members))
  local out = {}
  for name, field in pairs(changed) do
    out[#out + 1] = name
    out[#out + 1] = string.format('%d %d', field[1], field[2])
  end
  if #out > 0 then redis.call('HSET', weights, unpack(out)) end
end

-- decide(log, weights, pending, A): the whole decision of one key, as a
-- function so that every script deciding keys shares it (concatenated
-- before the script's own part at build time:
-- crates/slidelog-redis/src/script.rs). `log` and `weights` are KEYS[1]
-- and KEYS[2] above, `pending` KEYS[3] (the log's pending reservations, a
-- sorted set in the same slot: read only on a weighted log, as every
-- reservation is marked; may be nil where none are ever made), `A` the
-- ARGV above, and A[6+3n], when given, makes an admitted check a
-- reservation until that time (check_all.lua's phase 1). It returns the
-- reply above (or an error reply).
local function decide(log, weights, pending, A, penalty)
  local mode = A[1]
  local record = mode == '1' or mode == '3'
  local each = mode == '2' or mode == '3'
  local n = tonumber(A[3])

  -- Step 1: the time. Redis TIME by default, so every instance shares one
  -- clock; or the caller's ms (prelude.lua's clock()).
  local now, given_now = clock(A[2])

  -- Step 1b: a check whose caller has already given up (timed out) is refused
  -- before it changes anything, so a check that timed out is never recorded
  -- later (a stalled Redis running its backlog, a reply stuck in a frozen
  -- link). The deadline is on the caller's clock, less the clock-skew margin
  -- it assumes; it is compared with Redis TIME.
  local deadline = tonumber(A[5 + 3 * n] or '-1')
  if record and gave_up(deadline, now, given_now) then
    return redis.error_reply('DEADLINE the caller gave up on this check before it ran; nothing recorded')
  end

  -- Step 1c: a block (docs/design.md §5.4). The key's block key lives in
  -- the log's slot: the weights key's name with '#b' for '#w' (the tag ends
  -- at the first '}', and '#w' follows it). While it lives, every limit is
  -- refused for its remaining time (PTTL) and nothing is read or written:
  -- the reply's `allowed` is -2, count and remaining 0, each limit waiting
  -- that long.
  local close = string.find(weights, '}', 1, true)
  local block = string.sub(weights, 1, close) .. '#b' .. string.sub(weights, close + 3)
  local left = redis.call('PTTL', block)
  if left > 0 then
    local out = {-2, tonumber(A[4]), tonumber(A[5]), 0, 0, left, 0, now}
    if each then
      for i = 1, n do
        out[5 + 4 * i], out[6 + 4 * i], out[7 + 4 * i], out[8 + 4 * i] = 0, 0, left, 0
      end
    end
    return out
  end

  -- Step 1d: the newest record: its member is the marker (above), its score
  -- the reset_after_ms. Read before anything is removed, so that a weighted
  -- log's frontiers (step 3) still see every record.
  -- A key the module converted (docs/design.md §4.4) answers WRONGTYPE here:
  -- the module decides it, with the same limits, time and deadline, and its
  -- reply is this script's, so switching engines never over-admits.
  local top = redis.pcall('ZRANGE', log, -1, -1, 'WITHSCORES')
  if top.err then
    if string.sub(top.err, 1, 9) ~= 'WRONGTYPE' then return top end
    -- The module keeps no reservations: a record there could not be
    -- cancelled, so a reservation is refused, nothing changed.
    if A[6 + 3 * n] ~= nil then
      return redis.error_reply('MODULEKEY a reservation on a key the module holds; nothing recorded')
    end
    local until_ms = '0'
    if record and deadline >= 0 then until_ms = A[5 + 3 * n] end
    local limits = {unpack(A, 3, 3 + 3 * n)}
    -- Every limit too (modes '2'/'3'): the module's trailing EACH, same reply.
    if each then limits[#limits + 1] = 'EACH' end
    return redis.call('SLIDELOG.CHECK', log, record and 'RECORD' or 'PEEK',
      string.format('%d', now), until_ms, unpack(limits))
  end
  local newest_member, newest = top[1], tonumber(top[2])
  local marked = newest_member ~= nil and string.find(newest_member, '#', 1, true) ~= nil

  -- Step 2: the limits, each with its own cost, and the keep (how long
  -- records are kept: the longest window, or the longest `window +
  -- granularity - 1`); each limit's frontier (a granular limit's at its
  -- last granule boundary) and the time an admitted record is stored at
  -- (now rounded up to the gcd of the granularities; docs/design.md §1.1).
  -- A granular request writes the weighted layout (marked records, one per
  -- stored time). Numbers are formatted with %d below: Lua's tostring
  -- keeps only 14 digits.
  local maxes, windows, costs, longest, grans, granule, granular, fr = read_limits(A, 3, n, now)
  -- (Exact limits call no rounding: a call costs what a few lines do.)
  local stored_at = now
  if granular then stored_at = round_up(now, granule) end
  local weighted_request = granular
  for i = 1, n do
    if costs[i] ~= 1 then weighted_request = true end
  end
  local member = A[4 + 3 * n]
  -- A reservation is marked ('#') like a weighted record, so the log reads
  -- as weighted while it may hold one, and its pending set is looked at.
  local reserve_until = A[6 + 3 * n]
  if reserve_until ~= nil then weighted_request = true end
  local cutoff = now - longest

  -- The extra units (cost - 1) at a position of the records with ts > lo.
  local function extra_after(position, lo)
    local sum = 0
    local ms = redis.call('ZRANGEBYSCORE', log, string.format('(%d', lo), '+inf')
    for _, m in ipairs(ms) do sum = sum + cost_of(m, position) - 1 end
    return sum
  end

  -- Step 3: the weights, when the log holds weighted records. Every field's
  -- frontier moves before any record is removed: to now - window for this
  -- request's limits, and at least to the cutoff for the others (the records
  -- the cutoff removes leave their sums). The records that crossed any
  -- frontier are read in one ZRANGEBYSCORE. A field this request needs but
  -- the hash lacks (a new set of limits) is counted once from the log.
  local fields, horizon = {}, 0
  -- The hash is read only when the marker says the log is weighted; a plain
  -- log's hash (if any) is left over from an earlier weighted life.
  local weighted = marked
  local stored = {}
  if weighted then stored = redis.call('HGETALL', weights) end
  -- Fields of limits no request sends any more are dropped past this many
  -- (a client that varies its windows cannot grow the hash without bound).
  local field_cap = 64
  local extras = {}
  if weighted then
    fields, horizon = parse_fields(stored)
    -- Expiry keeps the key's horizon (prelude.lua's record_steps().horizon_after).
    if horizon > longest then cutoff = now - horizon end
    -- Step 3a: reservations past their deadline leave the log before
    -- anything is counted (a peek drops them too: no decision ever counts
    -- one), so one that was never confirmed (its caller crashed, a master
    -- died, a reply was lost) vanishes by itself, and nobody waits on it.
    if pending ~= nil then
      local server_now = now
      if given_now then server_now = redis_ms() end
      local expired = redis.call('ZRANGEBYSCORE', pending, '-inf', string.format('%d', server_now))
      if #expired > 0 then
        unreserve(log, weights, pending, expired, fields)
        -- The newest record may have been one of them.
        top = redis.call('ZRANGE', log, -1, -1, 'WITHSCORES')
        newest_member, newest = top[1], tonumber(top[2])
      end
    end
    local names = {}
    for i = 1, n do
      local name = field_name(i, windows[i], grans[i])
      names[i] = name
      local target = fr[i]
      if fields[name] == nil then
        fields[name] = {extra_after(i, target), target, true, i, nil}
      else
        fields[name][5] = target
      end
    end
    if record then
      for _, field in pairs(fields) do
        local to = field[5] or field[2]
        if to < cutoff then field[5] = cutoff end
      end
    end
    -- One read of every record between the lowest and highest frontier moved.
    local lo, hi = nil, nil
    for _, field in pairs(fields) do
      local to = field[5]
      if to ~= nil and to ~= field[2] then
        local a, b = math.min(to, field[2]), math.max(to, field[2])
        if lo == nil or a < lo then lo = a end
        if hi == nil or b > hi then hi = b end
      end
    end
    local crossed = {}
    if lo ~= nil then
      crossed = redis.call('ZRANGEBYSCORE', log, string.format('(%d', lo), string.format('%d', hi), 'WITHSCORES')
    end
    for _, field in pairs(fields) do
      local to = field[5]
      if to ~= nil and to ~= field[2] then
        local a, b = math.min(to, field[2]), math.max(to, field[2])
        local sum = 0
        for j = 1, #crossed, 2 do
          local ts = tonumber(crossed[j + 1])
          if ts > a and ts <= b then sum = sum + cost_of(crossed[j], field[4]) - 1 end
        end
        -- Forward, records leave the window; back (a clock that stepped
        -- back), they re-enter it.
        if to > field[2] then field[1] = field[1] - sum else field[1] = field[1] + sum end
        field[2], field[3] = to, true
      end
    end
    for i = 1, n do extras[i] = fields[names[i]][1] end
  end

  -- Step 4: drop the expired records, ts <= now - longest (ZREMRANGEBYSCORE is
  -- inclusive: exactly the original script's boundary). A peek changes
  -- nothing, so it skips this and counts around the expired records instead.
  if record then
    redis.call('ZREMRANGEBYSCORE', log, '-inf', string.format('%d', cutoff))
  end

  -- Step 5: the live units of every limit: the live records (ts after its
  -- frontier; after step 4 the set holds exactly the records after the
  -- cutoff, so ZCARD counts the longest exact window, any other takes a
  -- ZCOUNT: prelude.lua's live_records) plus the extra units of the
  -- weighted ones.
  local total, records = live_records(log, n, fr, cutoff, record)
  local lives = {}
  for i = 1, n do lives[i] = records[i] + (extras[i] or 0) end

  -- Step 6: admit iff live + cost <= max for every limit, and find the
  -- deciding limit exactly as slidelog_core::engine::evaluate does: rejected,
  -- the violated limit with the largest wait (ties: the shorter window);
  -- allowed, the limit with the smallest remaining (ties: the shorter window).
  -- The k-th oldest live unit, k = live + cost - max, must expire before the
  -- request fits.
  local allowed = true
  local penalty_ms = 0
  local worst, worst_wait = nil, 0
  local tight, tight_rem = nil, 0
  local waits = nil
  for i = 1, n do
    local live = lives[i]
    if live + costs[i] > maxes[i] then
      allowed = false
      -- The k-th oldest live unit, k = live + cost - max, must expire first.
      -- A cost above max (a joint decision's checks of one key merged,
      -- docs/design.md §1) never fits: one window, as the engine answers.
      local k = live + costs[i] - maxes[i]
      if penalty ~= nil and penalty[i] > penalty_ms then penalty_ms = penalty[i] end
      local wait = windows[i]
      -- (prelude.lua's kth_unit: a rank on a plain log, else a walk; its
      -- time rounded up to the limit's granularity.)
      if k <= live then
        local kth = kth_unit(log, weighted, total - records[i], i, k, now)
        if granular then kth = round_up(kth, grans[i]) end
        wait = kth + windows[i] - now
      end
      if each then
        if waits == nil then waits = {} end
        waits[i] = wait
      end
      if outranks(i, wait, worst, worst_wait, windows, true) then
        worst, worst_wait = i, wait
      end
    else
      local rem = maxes[i] - live - costs[i]
      if outranks(i, rem, tight, tight_rem, windows, false) then
        tight, tight_rem = i, rem
      end
    end
  end

  -- Step 7: the newest record (step 1c), for reset_after_ms and the TTL
  -- below; step 4 removes it only when it removes every record.
  if total == 0 then newest = nil end

  -- The deciding limit, and the newest live record that counts in it (for
  -- reset_after_ms): the newest record, unless a settle left it at cost 0
  -- there (docs/design.md §4.5); then the newest live one of cost > 0, or
  -- nil (prelude.lua's newest_counting); at its time rounded up to the
  -- limit's granularity.
  local d = worst
  if allowed then d = tight end
  local counted = newest_counting(log, weighted, newest, newest_member, d, fr[d])
  if counted ~= nil and granular then counted = round_up(counted, grans[d]) end

  -- Every limit (modes '2' and '3'): each limit's count, remaining, wait and
  -- reset, as the deciding limit's are found (slidelog_core::engine::
  -- evaluate_each), after the reply's first 8 numbers (set on return). Only
  -- when asked, so a plain check builds nothing more.
  local reply = nil
  if each then
    reply = {0, 0, 0, 0, 0, 0, 0, 0}
    for i = 1, n do
      local c = newest_counting(log, weighted, newest, newest_member, i, fr[i])
      if c ~= nil and granular then c = round_up(c, grans[i]) end
      local count, reset, wait = lives[i], 0, 0
      if allowed then
        -- The request itself counts at now rounded up to the granularity.
        local at = now
        if granular then at = round_up(now, grans[i]) end
        count = count + costs[i]
        if c == nil or c < at then c = at end
        reset = c + windows[i] - now
      else
        if c ~= nil and c + windows[i] > now then reset = c + windows[i] - now end
        if waits[i] then wait = waits[i] end
      end
      local rem = maxes[i] - count
      if rem < 0 then rem = 0 end
      reply[5 + 4 * i], reply[6 + 4 * i], reply[7 + 4 * i], reply[8 + 4 * i] = count, rem, wait, reset
    end
  end

  -- Step 8: write back the weights whose frontier moved, and (with the TTL
  -- of step 10) keep the hash exactly as long as the log.
  local horizon_out = nil
  local function save_weights(ttl)
    if not (weighted or (allowed and weighted_request)) then return end
    local changed = {}
    local keep_all = #stored / 2 <= field_cap
    -- A log turning weighted starts a new hash (a left-over one is stale).
    if not keep_all or not weighted then redis.call('DEL', weights) end
    for name, field in pairs(fields) do
      -- field[4] is the field's position, parsed from its name once on read.
      local w, g = string.match(name, '/(%d+)@?(%d*)$')
      local at = math.min(n, field[4])
      local mine = tonumber(w) == windows[at] and (tonumber(g) or 1) == grans[at]
      if (keep_all and field[3]) or (not keep_all and mine) then
        changed[#changed + 1] = name
        changed[#changed + 1] = string.format('%d %d', field[1], field[2])
      end
    end
    -- The horizon: when a granular record raised it, or through a rewrite.
    if (horizon_out ~= nil and horizon_out ~= horizon) or (horizon > 0 and (not keep_all or not weighted)) then
      changed[#changed + 1] = 'horizon'
      changed[#changed + 1] = string.format('%d', horizon_out or horizon)
    end
    if #changed > 0 then redis.call('HSET', weights, unpack(changed)) end
    redis.call('PEXPIRE', weights, ttl)
  end

  if not allowed then
    -- Step 9a: rejected. Nothing is appended; a check still refreshes the TTL
    -- (step 10) so that a key it decided on never lacks one.
    local reset = 0
    if counted ~= nil then reset = math.max(0, counted + windows[d] - now) end
    if record then
      local ttl = math.max(longest, newest + longest - now)
      redis.call('PEXPIRE', log, ttl)
      save_weights(ttl)
    end
    -- More than max units can be live after a clock step back or a lowered
    -- max: remaining is then 0 (as the engine's saturating subtraction).
    local remaining = math.max(0, maxes[d] - lives[d])
    -- Step 9a': a limit's block_ms (docs/design.md §5.4, `penalty`: one
    -- per limit, from sliding_log_main.lua): a check refused by limits that
    -- carry one blocks the key for the longest of them, in this same step,
    -- only if no block is in force (NX: refusals during a block never
    -- extend it); the answer is then the blocked one (-2).
    local refused = 0
    if record and penalty_ms > 0 and redis.call('SET', block, 'block_ms', 'PX', penalty_ms, 'NX') then
      refused = -2
      if penalty_ms > worst_wait then worst_wait = penalty_ms end
    end
    if reply == nil then return {refused, maxes[d], windows[d], lives[d], remaining, worst_wait, reset, now} end
    reply[1], reply[2], reply[3], reply[4], reply[5], reply[6], reply[7], reply[8] =
      refused, maxes[d], windows[d], lives[d], remaining, worst_wait, reset, now
    return reply
  end

  -- Step 9b: allowed. After appending, the newest record is the later of the
  -- old newest (a clock that stepped back leaves records in the future) and
  -- the stored time (now, for exact limits).
  local newest_after = stored_at
  if newest ~= nil and newest > stored_at then newest_after = newest end

  if record then
    -- Step 10: append ONE record at `now` carrying the request's costs, add
    -- its extra units to every window it is live in (a new hash starts from
    -- this record: every older one costs 1), and set the TTL: the longest
    -- window (in ms, PEXPIRE), or longer when the newest record is in the
    -- future, so PTTL is never -1 and the key lives exactly as long as any of
    -- its records can be live.
    if weighted and not string.find(member, '#', 1, true) then
      -- The marker: every record of a weighted log carries a '#'.
      member = member .. '#1'
    elseif weighted_request and not weighted and newest ~= nil and newest >= now then
      -- Turning weighted: the plain records at or after now would otherwise
      -- stay the newest (ZRANGE -1 -1) and hide the marker.
      local ties = redis.call('ZRANGEBYSCORE', log, string.format('%d', now), '+inf', 'WITHSCORES')
      for j = 1, #ties, 2 do
        if not string.find(ties[j], '#', 1, true) then
          redis.call('ZREM', log, ties[j])
          redis.call('ZADD', log, ties[j + 1], ties[j] .. '#1')
        end
      end
    end
    if (reserve_until ~= nil or granular) and not string.find(member, '#', 1, true) then member = member .. '#1' end
    -- A granular record merges into the marked record at its stored time
    -- (one record per stored time, docs/design.md §1.1; prelude.lua's
    -- marked_at and merged), renamed to this request's id; a reservation
    -- never does (a cancel removes its own record whole).
    local into = nil
    local R = nil
    if granular then R = record_steps() end
    if granular and reserve_until == nil then into = R.marked_at(log, stored_at, pending) end
    local written = member
    if into then
      written = R.merged(member, into, costs, n)
      redis.call('ZREM', log, into)
    end
    redis.call('ZADD', log, stored_at, written)
    if reserve_until ~= nil then
      -- Listed as pending until its deadline; the set outlives the latest
      -- deadline it holds by a second (a deadline is at most the call's
      -- timeout away).
      redis.call('ZADD', pending, reserve_until, member)
      local server_now = now
      if given_now then server_now = redis_ms() end
      local keep = math.max(1, tonumber(reserve_until) - server_now) + 1000
      if redis.call('PTTL', pending) < keep then redis.call('PEXPIRE', pending, keep) end
    end
    if weighted_request then
      for i = 1, n do
        local name = field_name(i, windows[i], grans[i])
        if fields[name] == nil then fields[name] = {0, fr[i], true, i, nil} end
      end
      for _, field in pairs(fields) do
        if stored_at > field[2] then
          -- A merge adds its costs to a record already counted; an append
          -- adds a record (counted by ZCOUNT) and its extra units.
          if into then
            field[1] = field[1] + cost_of(written, field[4]) - cost_of(into, field[4])
          else
            field[1] = field[1] + costs[math.min(field[4], n)] - 1
          end
          field[3] = true
        end
      end
    end
    -- (A log the expiry emptied starts its horizon again.)
    if total == 0 then horizon = 0 end
    if granular then horizon_out = R.horizon_after(horizon, longest, stored_at, now) end
    local ttl = newest_after + longest - now
    redis.call('PEXPIRE', log, ttl)
    save_weights(ttl)
  end

  -- The reset of the deciding limit: its newest counting record, or now
  -- (rounded up to its granularity: where this request counts there).
  local at = now
  if granular then at = round_up(now, grans[d]) end
  if counted == nil or counted < at then counted = at end
  if reply == nil then return {1, maxes[d], windows[d], lives[d] + costs[d], tight_rem, 0, counted + windows[d] - now, now} end
  reply[1], reply[2], reply[3], reply[4], reply[5], reply[6], reply[7], reply[8] =
    1, maxes[d], windows[d], lives[d] + costs[d], tight_rem, 0, counted + windows[d] - now, now
  return reply
end

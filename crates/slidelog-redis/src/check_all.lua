
-- slidelog: one joint decision over several keys, all or nothing
-- (docs/design.md §1 "One request, several keys", §4.7), atomically: the
-- request is admitted only if every key admits, and then recorded in every
-- key; refused, it is recorded in none. Concatenated after prelude.lua and
-- sliding_log.lua at build time: every key is decided by that script's
-- decide(), exactly as a decision of that key alone (the same expiry,
-- frontiers, counts, weights and marker rules).
--
-- KEYS[3c-2], KEYS[3c-1], KEYS[3c]  check c's log, its weights key and
--           its pending reservations (every key is declared: one Cluster
--           slot for all of them)
-- ARGV[1]   mode: '1' = record (a check), '0' = peek (changes nothing),
--           '2' = reserve: phase 1 of a joint decision over several Cluster
--           slots (docs/design.md §4.7), recorded as a check is, each record
--           also listed as pending until the deadline (reservation.lua
--           confirms or cancels it; past the deadline it vanishes)
-- ARGV[2]   now in ms, or '-1' to read Redis TIME
-- ARGV[3]   the caller's deadline in Unix ms, or '-1' (checks only; a
--           reservation's deadline, required)
-- ARGV[4]   m, the number of checks (1 ..= 64)
-- then per check: n, max_i, window_ms_i, cost_i for each of its n
--           limits, and the member to add when admitted ('' for a peek)
-- Returns every check's reply in order, each as sliding_log.lua answers
-- in modes '2'/'3': its 8 numbers then 4 per limit (8 + 4n).

local record = ARGV[1] == '1' or ARGV[1] == '2'
local reserve = ARGV[1] == '2'
local m = tonumber(ARGV[4])

-- Step 1: one time for every key (Redis TIME unless the caller gave one:
-- prelude.lua's clock()), so every check is decided at the same instant.
local now, given_now = clock(ARGV[2])
local now_text = string.format('%d', now)

-- Step 2: a check whose caller gave up is refused before any key changes
-- (as decide() refuses one key's; below, decide() gets no deadline).
if record and gave_up(tonumber(ARGV[3]), now, given_now) then
  return redis.error_reply('DEADLINE the caller gave up on this check before it ran; nothing recorded')
end

-- Step 3: every check's arguments in sliding_log.lua's ARGV layout, mode
-- '2' (a peek answering every limit) for now.
local args = {}
local at = 5
for c = 1, m do
  local n = tonumber(ARGV[at])
  local a = {'2', now_text}
  for j = 0, 3 * n do a[#a + 1] = ARGV[at + j] end
  a[#a + 1] = ARGV[at + 3 * n + 1]
  a[#a + 1] = '-1'
  if reserve then a[#a + 1] = ARGV[3] end
  args[c] = a
  at = at + 3 * n + 2
end

-- Step 4: evaluate every check as a peek of its key alone: nothing changes
-- (a peek neither expires nor writes), so a refusal leaves every key as it was.
local replies = {}
local allowed = true
for c = 1, m do
  local reply = decide(KEYS[3 * c - 2], KEYS[3 * c - 1], KEYS[3 * c], args[c])
  if reply.err then return reply end
  replies[c] = reply
  if reply[1] ~= 1 then allowed = false end
end

-- Step 5: every check admits and this is a check: record each exactly as a
-- check of that key alone (mode '3'), a reservation also listed as pending. Nothing ran in between, so each
-- admits again with the same answer and now also expires, appends, keeps
-- its weights and sets its TTL.
if allowed and record then
  for c = 1, m do
    args[c][1] = '3'
    local reply = decide(KEYS[3 * c - 2], KEYS[3 * c - 1], KEYS[3 * c], args[c])
    if reply.err then return reply end
    replies[c] = reply
  end
end

-- Step 6: the replies, one after the other.
local out = {}
for c = 1, m do
  for _, v in ipairs(replies[c]) do out[#out + 1] = v end
end
return out

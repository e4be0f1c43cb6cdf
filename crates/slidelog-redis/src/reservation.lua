
-- slidelog: phase 2 of a joint decision over several Cluster slots
-- (docs/design.md §4.7), on one slot's keys, atomically. Concatenated after
-- prelude.lua and sliding_log.lua at build time (their redis_ms(),
-- parse_fields() and unreserve()).
--
-- KEYS[3c-2], KEYS[3c-1], KEYS[3c]  check c's log, weights and pending
--           reservations, as check_all.lua takes them
-- ARGV[1]   'confirm' or 'cancel'
-- ARGV[1+c] check c's member, as phase 1 recorded it
-- Returns 1 when done; a confirm answers 0, changing nothing, when any of
-- its reservations is no longer pending or its deadline has passed on
-- this server's clock (it vanished, or is about to: the caller cancels the
-- other slots and answers a timeout).

local op = ARGV[1]
local m = #KEYS / 3

if op == 'confirm' then
  -- Step 1: every reservation still pending and before its deadline.
  local server_now = redis_ms()
  for c = 1, m do
    local deadline = tonumber(redis.call('ZSCORE', KEYS[3 * c], ARGV[1 + c]))
    if deadline == nil or deadline <= server_now then return 0 end
  end
  -- Step 2: each becomes a normal record, at its own timestamp: it only
  -- leaves the pending set.
  for c = 1, m do redis.call('ZREM', KEYS[3 * c], ARGV[1 + c]) end
  return 1
end

if op == 'cancel' then
  -- Each record leaves its log, pending or already confirmed (a confirm
  -- that failed in another slot takes back the ones that succeeded), with
  -- its extra units out of the weights.
  for c = 1, m do
    local weights = KEYS[3 * c - 1]
    local fields = parse_fields(redis.call('HGETALL', weights))
    unreserve(KEYS[3 * c - 2], weights, KEYS[3 * c], {ARGV[1 + c]}, fields)
  end
  return 1
end

return redis.error_reply('ERR reservation.lua takes confirm or cancel')

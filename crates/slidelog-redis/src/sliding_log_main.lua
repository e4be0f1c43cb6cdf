
-- The general decision script (docs/design.md §4.2): sliding_log.lua's
-- decide() on its one key, concatenated after it at build time.
--
-- Modes '5' / '7' are checks ('1' / '3') whose limits carry block_ms
-- (docs/design.md §5.4): one per limit follows the deadline
-- (ARGV[6+3n .. 5+4n]); they are handed to decide() as its `penalty`, and
-- the arguments as a plain check's.
local mode = ARGV[1]
if mode == '5' or mode == '7' then
  local n = tonumber(ARGV[3])
  local A, penalty = {}, {}
  for i = 1, 5 + 3 * n do A[i] = ARGV[i] end
  if mode == '5' then A[1] = '1' else A[1] = '3' end
  for i = 1, n do penalty[i] = tonumber(ARGV[5 + 3 * n + i]) end
  return decide(KEYS[1], KEYS[2], KEYS[3], A, penalty)
end
return decide(KEYS[1], KEYS[2], KEYS[3], ARGV)

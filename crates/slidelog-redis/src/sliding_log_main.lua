
-- The general decision script (docs/design.md §4.2): sliding_log.lua's
-- decide() on its one key, concatenated after it at build time.
return decide(KEYS[1], KEYS[2], KEYS[3], ARGV)

#!/usr/bin/env bash
# MEMORY USAGE per record of one log: the native module's log
# (crates/slidelog-module) against the sorted set the Lua scripts write, at
# 100 and 10,000 records per key; cost 1, one cost per record (weighted) and a
# cost per limit. Every record is written by the real command (SLIDELOG.CHECK,
# or EVALSHA of single_limit.lua / the general script with 26-character ULID-like
# members), 1 ms apart (the spread layout: 8-11 ms), all admitted. BENCHMARKS.md, "Memory per record".
#
#   scripts/bench/module_memory.sh
#   SERVER=/path/to/valkey-server scripts/bench/module_memory.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
SERVER=${SERVER:-redis-server}
source scripts/bench/lib.sh
cargo build --release -q -p slidelog-module
port=$(free_port)
"$SERVER" --port "$port" --save '' --appendonly no \
  --loadmodule "$PWD/target/release/libslidelog_module.so" >/dev/null 2>&1 &
PIDS+=($!)
cli() { redis-cli -p "$port" "$@"; }
for _ in $(seq 100); do cli ping >/dev/null 2>&1 && break; sleep 0.1; done
single=$(cli SCRIPT LOAD "$(cat crates/slidelog-redis/src/single_limit.lua)")
# The general script as script.rs builds it: prelude.lua, decide(), the call.
general=$(cli SCRIPT LOAD "$(cd crates/slidelog-redis/src && cat prelude.lua sliding_log.lua sliding_log_main.lua)")
T=1767225600000 W=3600000 M=10000000

# commands LAYOUT N KEY: the N writes of one key, one per line.
commands() {
  local layout=$1 n=$2 key=$3 i t c id
  for ((i = 0; i < n; i++)); do
    t=$((T + i)) c=$((2 + i % 7)) id=$(printf '01J%023d' "$i")
    case $layout in
      module) echo "SLIDELOG.CHECK $key RECORD $t 0 1 $M $W 1" ;;
      module-weighted) echo "SLIDELOG.CHECK $key RECORD $t 0 1 $M $W $c" ;;
      # Records 8-11 ms apart on no common grid: the layout with timestamps.
      module-weighted-spread) echo "SLIDELOG.CHECK $key RECORD $((T + 10 * i + i % 3)) 0 1 $M $W $c" ;;
      module-per-limit) echo "SLIDELOG.CHECK $key RECORD $t 0 2 $M $W 1 $M $W $c" ;;
      zset) echo "EVALSHA $single 1 $key $M $W $id -1 $t" ;;
      zset-weighted) echo "EVALSHA $general 2 $key {$key}#w 1 $t 1 $M $W $c $id#$c -1" ;;
      zset-per-limit) echo "EVALSHA $general 2 $key {$key}#w 1 $t 2 $M $W 1 $M $W $c $id#1,$c -1" ;;
    esac
  done
}

echo '| layout | records | MEMORY USAGE (B) | per record (B) |'
echo '|---|---|---|---|'
for layout in module module-weighted module-weighted-spread module-per-limit zset zset-weighted zset-per-limit; do
  for n in 100 10000; do
    key="mem:$layout:$n"
    commands "$layout" "$n" "$key" | cli >/dev/null
    bytes=$(cli MEMORY USAGE "$key" SAMPLES 0)
    weights=$(cli MEMORY USAGE "{$key}#w" SAMPLES 0)
    [ -n "$weights" ] && bytes=$((bytes + weights))
    records=$(cli SLIDELOG.INFO "$key" | sed -n 2p)
    python3 -c "print(f'| $layout | $records | {$bytes:,} | {$bytes / $records:.1f} |')"
  done
done

#!/usr/bin/env bash
# Instructions per EVALSHA of the decision scripts against the original
# design's script, counted by callgrind inside redis-server
# (--toggle-collect=evalShaCommand): deterministic to about 1% whatever else
# the machine runs, unlike usec_per_call. BENCHMARKS.md, "Redis CPU per
# decision". Needs valgrind and redis-server/redis-benchmark.
#
#   scripts/bench/redis_cpu_callgrind.sh               # original, single-limit, general
#   BEFORE=07111d9 scripts/bench/redis_cpu_callgrind.sh # and sliding_log.lua at that commit
#   SERVER=/path/to/valkey-server scripts/bench/redis_cpu_callgrind.sh
#
# The `module` column is SLIDELOG.CHECK of the native module
# (crates/slidelog-module, built here with cargo build --release) on the
# server's clock (`*`), counted inside the server's module command dispatcher.
#
# Workloads (redis-benchmark -P 16, 2,000 calls each): adm = 100k random keys,
# max 100 (nearly all new keys); live = 100 keys, max 100,000 (~20 records
# each); rej = one full key, max 1; rej100 = one full key, max 100.
set -euo pipefail
cd "$(dirname "$0")/../.."
SERVER=${SERVER:-redis-server}
N=${N:-2000}
source scripts/bench/lib.sh
require_tools "valgrind redis-server" valgrind callgrind_annotate "$SERVER" redis-benchmark redis-cli

cp crates/slidelog-redis/tests/original_sliding_window.lua "$WORK/original.lua"
cp crates/slidelog-redis/src/single_limit.lua "$WORK/single.lua"
# The general script as script.rs builds it: prelude.lua, sliding_log.lua's decide(), the call.
(cd crates/slidelog-redis/src && cat prelude.lua sliding_log.lua sliding_log_main.lua) >"$WORK/general.lua"
SCRIPTS=(original single general module)
cargo build --release -q -p slidelog-module
MODULE=$PWD/target/release/libslidelog_module.so
if [ -n "${BEFORE:-}" ]; then
  for f in prelude.lua sliding_log.lua sliding_log_main.lua; do
    git show "$BEFORE:crates/slidelog-redis/src/$f" 2>/dev/null || true
  done >"$WORK/before.lua"
  SCRIPTS+=(before)
fi

# instructions SCRIPT WORKLOAD: instructions per EVALSHA call.
instructions() {
  local name=$1 workload=$2 keys max key port pid out sha calls ir
  case $workload in
    adm) keys=100000; max=100 ;; live) keys=100; max=100000 ;;
    rej) keys=1; max=1 ;; rej100) keys=1; max=100 ;;
  esac
  if [ $keys = 1 ]; then key=cpu:hot; else key='cpu:__rand_int__'; fi
  local args
  case $name in
    original) args=(1 "$key" 1767225600000 60 $max "m:__rand_int__") ;;
    single) args=(1 "$key" $max 60000 "m:__rand_int__" 9999999999999) ;;
    *) args=(2 "$key" "{$key}#w" 1 -1 1 $max 60000 1 "m:__rand_int__") ;;
  esac
  port=$(free_port); out="$WORK/cg.out"
  local toggles=(--toggle-collect=evalShaCommand) load=() call stat=evalsha
  if [ "$name" = module ]; then
    toggles=(--toggle-collect=RedisModuleCommandDispatcher --toggle-collect=ValkeyModuleCommandDispatcher)
    load=(--loadmodule "$MODULE"); stat=slidelog.check
  fi
  valgrind --tool=callgrind --callgrind-out-file="$out" "${toggles[@]}" \
    "$SERVER" --port "$port" --save '' --appendonly no "${load[@]}" >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
  if [ "$name" = module ]; then
    call=(SLIDELOG.CHECK "$key" RECORD '*' 0 1 $max 60000 1)
  else
    sha=$(redis-cli -p "$port" SCRIPT LOAD "$(cat "$WORK/$name.lua")")
    call=(EVALSHA "$sha" "${args[@]}")
  fi
  # A full key first (its calls are counted too: at most 100 of 2,100).
  [ $keys = 1 ] && redis-benchmark -p "$port" -c 1 -n $max -r 1000000 -q "${call[@]}" >/dev/null 2>&1
  redis-benchmark -p "$port" -c 10 -n "$N" -r $keys -P 16 -q "${call[@]}" >/dev/null 2>&1
  instructions_per_call "$port" "$pid" "$out" $stat
}

printf '| workload |'; for s in "${SCRIPTS[@]}"; do printf ' %s |' "$s"; done; echo ' single / original | module / original |'
printf '|---|'; for _ in "${SCRIPTS[@]}"; do printf -- '---|'; done; echo '---|---|'
for w in adm live rej rej100; do
  printf '| %s |' $w
  declare -A got=()
  for s in "${SCRIPTS[@]}"; do got[$s]=$(instructions "$s" $w); printf ' %s |' "${got[$s]}"; done
  python3 -c "print(f' {${got[single]} / ${got[original]}:.2f} | {${got[module]} / ${got[original]}:.2f} |')"
  unset got
done

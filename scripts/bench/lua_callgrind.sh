#!/usr/bin/env bash
# Instructions per EVALSHA of the general decision script and usage.lua, as
# built (prelude.lua joined before them, as script.rs and usage.rs join
# them), at this tree and at another commit: what a change to the Lua
# costs inside redis-server (callgrind, --toggle-collect=evalShaCommand;
# deterministic to about 1%). BENCHMARKS.md, "The Lua prelude".
#
#   BEFORE=d1a6d37 scripts/bench/lua_callgrind.sh
#   BEFORE=d1a6d37 SERVER=/path/to/valkey-server scripts/bench/lua_callgrind.sh
#
# Workloads (redis-benchmark -P 16, N calls each, 100 live keys unless said):
# plain = a check of two limits at cost 1; weighted = one limit at cost 5;
# rejected = one full weighted key, cost 5 (walks its units for the wait);
# granular = two limits at 100 ms and 1 s (from the commit that adds them);
# charge = usage.lua charging 2 units.
set -euo pipefail
cd "$(dirname "$0")/../.."
SERVER=${SERVER:-redis-server}
N=${N:-2000}
source scripts/bench/lib.sh
require_tools "valgrind redis-server" valgrind callgrind_annotate "$SERVER" redis-benchmark redis-cli

# join REV NAME FILE...: the files at REV ('' = this tree), joined, in $WORK/NAME.lua.
join() {
  local rev=$1 name=$2 f
  shift 2
  : >"$WORK/$name.lua"
  for f in "$@"; do
    if [ -z "$rev" ]; then
      [ -f "crates/slidelog-redis/src/$f" ] && cat "crates/slidelog-redis/src/$f" >>"$WORK/$name.lua"
    else
      git show "$rev:crates/slidelog-redis/src/$f" >>"$WORK/$name.lua" 2>/dev/null || true
    fi
  done
}
SIDES=(after)
join '' after-general prelude.lua sliding_log.lua sliding_log_main.lua
join '' after-usage prelude.lua usage.lua
if [ -n "${BEFORE:-}" ]; then
  SIDES=(before after)
  join "$BEFORE" before-general prelude.lua sliding_log.lua sliding_log_main.lua
  join "$BEFORE" before-usage prelude.lua usage.lua
fi

# instructions SIDE WORKLOAD: instructions per EVALSHA call.
instructions() {
  local side=$1 workload=$2 script=general keys=100 key port pid out sha calls ir args
  case $workload in
    plain) args=(1 -1 2 100000 60000 1 100000 1000 1) ;;
    weighted) args=(1 -1 1 100000 60000 5) ;;
    rejected) keys=1; args=(1 -1 1 100 60000 5) ;;
    granular) args=(1 -1 2 100000 60000@1000 1 100000 1000@100 1) ;;
    charge) script=usage; args=(charge -1 -1 1 100000 60000 2) ;;
  esac
  if [ $keys = 1 ]; then key=cpu:hot; else key='cpu:__rand_int__'; fi
  port=$(free_port); out="$WORK/cg.out"
  valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect=evalShaCommand \
    "$SERVER" --port "$port" --save '' --appendonly no >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
  sha=$(redis-cli -p "$port" SCRIPT LOAD "$(cat "$WORK/$side-$script.lua")")
  local call=(EVALSHA "$sha" 2 "$key" "{$key}#w" "${args[@]}" "m:__rand_int__")
  # A full key first (its calls are counted too: at most 25 of 2,025).
  [ $keys = 1 ] && redis-benchmark -p "$port" -c 1 -n 25 -r 1000000 -q "${call[@]}" >/dev/null 2>&1
  redis-benchmark -p "$port" -c 10 -n "$N" -r $keys -P 16 -q "${call[@]}" >/dev/null 2>&1
  instructions_per_call "$port" "$pid" "$out" evalsha
}

WORKLOADS=${WORKLOADS:-plain weighted rejected charge}
printf '| workload |'; for s in "${SIDES[@]}"; do printf ' %s |' "$s"; done; echo
printf '|---|'; for _ in "${SIDES[@]}"; do printf -- '---|'; done; echo
for w in $WORKLOADS; do
  printf '| %s |' "$w"
  for s in "${SIDES[@]}"; do printf ' %s |' "$(instructions "$s" "$w")"; done
  echo
done

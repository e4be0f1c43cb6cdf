#!/usr/bin/env bash
# Settle and charge on Redis, the module beside the scripts, each beside a
# check on the same token-limited key (BENCHMARKS.md, "Settle and charge").
# Two numbers per cell:
#   - instructions per call inside the server (callgrind, counting only the
#     measured calls: instrumentation is switched on after the key is
#     filled; --toggle-collect on EVALSHA or on the module command
#     dispatcher), deterministic to about 1 %;
#   - usec_per_call of INFO commandstats on a server without valgrind
#     (noisy on a shared machine).
#
#   crates/slidelog-module/bench/usage_cost.sh
#   SERVER=/path/to/valkey-server crates/slidelog-module/bench/usage_cost.sh
#   LIVE=1000 N=5000 crates/slidelog-module/bench/usage_cost.sh
#
# The key: two limits, 100,000 requests and 10,000,000 tokens per hour, LIVE
# records (checks of 1 request + 500 tokens) at a fixed time, one of them
# the record settled. Every call uses the caller's time (the same for all):
#   check  = a check of 1 + 500 (admitted: the log grows by N records)
#   settle = the record checked at T settled to 1 + 321 and back (two
#            commands alternating, so each finds it with the costs the
#            other left)
#   charge = a charge of 1 + 77 (appended: the log grows by N records)
set -euo pipefail
cd "$(dirname "$0")/../../.."
SERVER=${SERVER:-redis-server}
for tool in valgrind callgrind_control callgrind_annotate "$SERVER" redis-benchmark redis-cli python3; do
  command -v "$tool" >/dev/null || { echo "$tool is missing: apt-get install -y valgrind redis-server" >&2; exit 2; }
done
N=${N:-2000}
LIVE=${LIVE:-100}
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

cargo build --release -q -p slidelog-module
MODULE=$PWD/target/release/libslidelog_module.so
cp crates/slidelog-redis/src/sliding_log.lua "$WORK/general.lua"
cp crates/slidelog-redis/src/usage.lua "$WORK/usage.lua"

# A time in the past (2026-01-01): the module refuses a caller's time more
# than an hour ahead of its clock (docs/design.md §4.3).
T=1767225600000
NOW=$((T + 1000))
LIMITS=(2 100000 3600000 1 10000000 3600000)
KEY=u:bench
ID=01JBENCH00000000000000000S

# cmd ENGINE OP [SHA...]: the command of one call, one word a line.
cmd() {
  local engine=$1 op=$2
  case $engine/$op in
    module/check) echo SLIDELOG.CHECK $KEY RECORD $NOW 0 "${LIMITS[@]}" 500 ;;
    module/settle) echo SLIDELOG.SETTLE $KEY $NOW 0 $T 1,500 "${LIMITS[@]}" 321 ;;
    module/unsettle) echo SLIDELOG.SETTLE $KEY $NOW 0 $T 1,321 "${LIMITS[@]}" 500 ;;
    module/charge) echo SLIDELOG.CHARGE $KEY $NOW 0 "${LIMITS[@]}" 77 ;;
    script/check) echo EVALSHA "$GENERAL" 2 $KEY "{$KEY}#w" 1 $NOW "${LIMITS[@]}" 500 'm:__rand_int__#1,500' -1 ;;
    script/settle) echo EVALSHA "$USAGE" 2 $KEY "{$KEY}#w" settle $NOW -1 "${LIMITS[@]}" 321 $ID $T 1,500 1,321 ;;
    script/unsettle) echo EVALSHA "$USAGE" 2 $KEY "{$KEY}#w" settle $NOW -1 "${LIMITS[@]}" 500 $ID $T 1,321 1,500 ;;
    script/charge) echo EVALSHA "$USAGE" 2 $KEY "{$KEY}#w" charge $NOW -1 "${LIMITS[@]}" 77 'c:__rand_int__#1,77' ;;
  esac
}

# fill ENGINE PORT: LIVE - 1 records at T - 1, then the settled one at T.
fill() {
  local engine=$1 port=$2
  if [ "$engine" = module ]; then
    redis-cli -p "$port" SLIDELOG.CHECK $KEY RECORD $((T - 1)) 0 "${LIMITS[@]}" 500 >/dev/null
    for _ in $(seq 2 $((LIVE - 1))); do echo "SLIDELOG.CHECK $KEY RECORD $((T - 1)) 0 ${LIMITS[*]} 500"; done | redis-cli -p "$port" >/dev/null
    redis-cli -p "$port" SLIDELOG.CHECK $KEY RECORD $T 0 "${LIMITS[@]}" 500 >/dev/null
  else
    for i in $(seq 2 "$LIVE"); do echo "EVALSHA $GENERAL 2 $KEY {$KEY}#w 1 $((T - 1)) ${LIMITS[*]} 500 f:$i#1,500 -1"; done | redis-cli -p "$port" >/dev/null
    redis-cli -p "$port" EVALSHA "$GENERAL" 2 $KEY "{$KEY}#w" 1 $T "${LIMITS[@]}" 500 "$ID#1,500" -1 >/dev/null
  fi
}

# start ENGINE [valgrind args...]: a server on a free port; sets PORT, PID,
# GENERAL, USAGE.
start() {
  local engine=$1; shift
  PORT=$(free_port)
  "$@" "$SERVER" --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --loadmodule "$MODULE" >/dev/null 2>&1 &
  PID=$!
  PIDS+=("$PID")
  for _ in $(seq 300); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.2; done
  GENERAL=$(redis-cli -p "$PORT" SCRIPT LOAD "$(cat "$WORK/general.lua")")
  USAGE=$(redis-cli -p "$PORT" SCRIPT LOAD "$(cat "$WORK/usage.lua")")
}

stop() {
  redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true
  wait "$PID" 2>/dev/null || true
}

# run ENGINE OP: N calls (settle: N/2 settles and N/2 settles back).
run() {
  local engine=$1 op=$2
  if [ "$op" = settle ]; then
    local a b
    read -ra a <<<"$(cmd "$engine" settle)"
    read -ra b <<<"$(cmd "$engine" unsettle)"
    # Both find the record (the reply's first number is 1).
    [ "$(redis-cli -p "$PORT" "${a[@]}" | head -1)" = 1 ] && [ "$(redis-cli -p "$PORT" "${b[@]}" | head -1)" = 1 ] ||
      { echo "$engine settle found no record" >&2; exit 1; }
    for _ in $(seq $((N / 2))); do echo "${a[*]}"; echo "${b[*]}"; done | redis-cli -p "$PORT" >/dev/null
  else
    local c
    read -ra c <<<"$(cmd "$engine" "$op")"
    redis-benchmark -p "$PORT" -c 1 -n "$N" -r 1000000000 -P 16 -q "${c[@]}" >/dev/null 2>&1
  fi
}

stat_of() {
  case $1 in
    module/check) echo slidelog.check ;; module/settle) echo slidelog.settle ;;
    module/charge) echo slidelog.charge ;; *) echo evalsha ;;
  esac
}

calls_and_usec() {
  redis-cli -p "$PORT" INFO commandstats | tr -d '\r' |
    sed -n "s/^cmdstat_$1:calls=\([0-9]*\),usec=[0-9]*,usec_per_call=\([0-9.]*\),.*/\1 \2/p"
}

# instructions ENGINE OP
instructions() {
  local engine=$1 op=$2 out="$WORK/cg.out" toggles ir calls
  if [ "$engine" = module ]; then
    toggles=(--toggle-collect=RedisModuleCommandDispatcher --toggle-collect=ValkeyModuleCommandDispatcher)
  else
    toggles=(--toggle-collect=evalShaCommand)
  fi
  start "$engine" valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out" "${toggles[@]}"
  fill "$engine" "$PORT"
  redis-cli -p "$PORT" CONFIG RESETSTAT >/dev/null
  callgrind_control -i on "$PID" >/dev/null 2>&1
  run "$engine" "$op"
  read -r calls _ <<<"$(calls_and_usec "$(stat_of "$engine/$op")")"
  stop
  ir=$(callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}')
  rm -f "$out"*
  echo $((ir / calls))
}

# usec ENGINE OP: usec_per_call, the median of 5 runs.
usec() {
  local engine=$1 op=$2 runs=()
  for _ in 1 2 3 4 5; do
    start "$engine" env
    fill "$engine" "$PORT"
    redis-cli -p "$PORT" CONFIG RESETSTAT >/dev/null
    run "$engine" "$op"
    read -r _ u <<<"$(calls_and_usec "$(stat_of "$engine/$op")")"
    runs+=("$u")
    stop
  done
  printf '%s\n' "${runs[@]}" | sort -g | sed -n 3p
}

echo "$("$SERVER" --version | head -1); LIVE=$LIVE, N=$N"
echo '| engine | op | instructions / call | usec_per_call (median of 5) |'
echo '|---|---|---|---|'
for engine in module script; do
  for op in check settle charge; do
    echo "| $engine | $op | $(instructions $engine $op) | $(usec $engine $op) |"
  done
done

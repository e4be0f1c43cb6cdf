#!/usr/bin/env bash
# Redis CPU per decision of the module's SLIDELOG.CHECK beside its peers and
# floor, all on one redis-server in one run: a plain `SET key 1 PX 60000`
# (the cheapest keyed write with a TTL: the floor for any Redis limiter),
# redis-cell's `CL.THROTTLE` (GCRA) and the original design's script
# (EVALSHA of crates/slidelog-redis/tests/original_sliding_window.lua).
# BENCHMARKS.md, "Redis CPU per decision: the module beside SET PX and
# redis-cell".
#
#   CELL=/path/to/libredis_cell.so scripts/bench/redis_peers.sh
#   ROUNDS=3 N=500000 CELL=… scripts/bench/redis_peers.sh   # the defaults
#   CALLGRIND=1 N=20000 CELL=… scripts/bench/redis_peers.sh # instructions per call
#
# Every command runs on 100,000 random keys (redis-benchmark -P 16 -c 10,
# `-r 100000`, `__rand_int__`), one limit of 100 per 60 s. The commands
# alternate within each round; `CONFIG RESETSTAT` before each cell.
# Reported per cell: `usec_per_call` (INFO commandstats) and the server's
# CPU (used_cpu_user + used_cpu_sys) per call, which also counts reading
# and answering the requests. With CALLGRIND=1 the server runs under
# callgrind, counting only the commands' own procedures (setCommand,
# evalShaCommand, the module command dispatcher): deterministic to ~1%.
#
# redis-cell is not part of this repository: build it outside it
# (git clone https://github.com/brandur/redis-cell; cargo build --release)
# and name its .so in CELL.
set -euo pipefail
# The module's `*` (the server's clock) is an argument, never a glob.
set -f
cd "$(dirname "$0")/../.."
SERVER=${SERVER:-redis-server}
N=${N:-500000}
ROUNDS=${ROUNDS:-3}
KEYS=${KEYS:-100000}
source scripts/bench/lib.sh
require_tools "redis-server redis-tools" "$SERVER" redis-benchmark redis-cli
[ -f "${CELL:-}" ] || { echo "CELL must name redis-cell's libredis_cell.so" >&2; exit 2; }
cargo build --release -q -p slidelog-module
MODULE=$PWD/target/release/libslidelog_module.so

port=$(free_port)
wrap=()
if [ -n "${CALLGRIND:-}" ]; then
  require_tools valgrind valgrind callgrind_control
  CG="$WORK/cg.out"
  # Instrumentation starts after the keys are written (far faster).
  wrap=(valgrind --tool=callgrind --callgrind-out-file="$CG" --instr-atstart=no
    --toggle-collect=setCommand
    --toggle-collect=evalShaCommand --toggle-collect=RedisModuleCommandDispatcher
    --toggle-collect=ValkeyModuleCommandDispatcher)
fi
"${wrap[@]}" "$SERVER" --port "$port" --save '' --appendonly no \
  --loadmodule "$MODULE" --loadmodule "$CELL" >/dev/null 2>&1 &
PIDS+=($!)
pid=$!
cli() { redis-cli -p "$port" "$@"; }
for _ in $(seq 300); do cli ping >/dev/null 2>&1 && break; sleep 0.2; done
sha=$(cli SCRIPT LOAD "$(cat crates/slidelog-redis/tests/original_sliding_window.lua)")

# The four rows: name, the commandstats entry, the command.
NAMES=(set-px module cell original)
declare -A STAT=([set-px]=set [module]=slidelog.check [cell]=cl.throttle [original]=evalsha)
call() {
  case $1 in
    set-px) echo "SET set:__rand_int__ 1 PX 60000" ;;
    module) echo "SLIDELOG.CHECK sl:__rand_int__ RECORD * 0 1 100 60000 1" ;;
    # 100 per 60 s with a burst of 100 (max_burst + 1 requests at once).
    cell) echo "CL.THROTTLE cell:__rand_int__ 99 100 60 1" ;;
    # The original takes the client's time (fixed here) and a member.
    original) echo "EVALSHA $sha 1 orig:__rand_int__ 1767225600000 60 100 m:__rand_int__" ;;
  esac
}

cpu() { cli INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(user|sys):/ {s += $2} END {printf "%.6f", s}'; }
stat() {
  cli INFO commandstats | tr -d '\r' |
    sed -n "s/^cmdstat_$1:calls=\([0-9]*\),usec=[0-9]*,usec_per_call=\([0-9.]*\).*/\1 \2/p"
}

# cell NAME: one cell of the table: "calls usec_per_call cpu_us_per_call"
# (or "calls instructions_per_call" under callgrind).
cell() {
  local name=$1 c0 c1 calls upc dump ir
  # shellcheck disable=SC2046
  set -- $(call "$name")
  cli CONFIG RESETSTAT >/dev/null
  [ -n "${CALLGRIND:-}" ] && callgrind_control -z "$pid" >/dev/null 2>&1
  c0=$(cpu)
  redis-benchmark -p "$port" -c 10 -P 16 -n "$N" -r $KEYS -q "$@" >/dev/null 2>&1
  c1=$(cpu)
  read -r calls upc < <(stat "${STAT[$name]}")
  if [ -n "${CALLGRIND:-}" ]; then
    callgrind_control -d "$pid" >/dev/null 2>&1
    sleep 1
    set +f
    dump=$(ls -t "$CG".* | head -1)
    set -f
    ir=$(grep -h '^summary:' "$dump" | awk '{print $2}')
    python3 -c "print($calls, round($ir / $calls))"
    rm -f "$dump"
  else
    python3 -c "print($calls, $upc, round(($c1 - $c0) * 1e6 / $calls, 2))"
  fi
}

# Every key of every row exists before the first measured cell.
for name in "${NAMES[@]}"; do
  # shellcheck disable=SC2046
  redis-benchmark -p "$port" -c 10 -P 16 -n $((KEYS * 3)) -r $KEYS -q $(call "$name") >/dev/null 2>&1
done

[ -n "${CALLGRIND:-}" ] && callgrind_control -i on "$pid" >/dev/null
declare -A out=()
for r in $(seq "$ROUNDS"); do
  for name in "${NAMES[@]}"; do
    out[$name]+="$(cell "$name");"
  done
done
cli INFO keyspace | tr -d '\r' | grep '^db0' >&2 || true

python3 - "$ROUNDS" "${NAMES[@]}" <<PY
import sys
rounds = int(sys.argv[1]); names = sys.argv[2:]
raw = {$(for n in "${NAMES[@]}"; do printf '"%s": "%s", ' "$n" "${out[$n]}"; done)}
cells = {n: [list(map(float, c.split())) for c in raw[n].strip(';').split(';')] for n in names}
callgrind = len(cells[names[0]][0]) == 2
span = lambda xs: f"{min(xs):,.2f}-{max(xs):,.2f}" if not callgrind else f"{min(xs):,.0f}-{max(xs):,.0f}"
if callgrind:
    print("| command | calls | instructions per call | / SET PX |")
    print("|---|---|---|---|")
    base = [c[1] for c in cells["set-px"]]
    for n in names:
        ir = [c[1] for c in cells[n]]
        ratio = [a / b for a, b in zip(ir, base)]
        print(f"| {n} | {int(cells[n][0][0]):,} | {span(ir)} | {min(ratio):.2f}-{max(ratio):.2f} |")
else:
    print(f"| command | usec_per_call ({rounds} rounds) | / SET PX | / CL.THROTTLE | server CPU µs per call | / SET PX | / CL.THROTTLE |")
    print("|---|---|---|---|---|---|---|")
    for n in names:
        upc = [c[1] for c in cells[n]]; cpu = [c[2] for c in cells[n]]
        def ratios(col, peer):
            r = [a[col] / b[col] for a, b in zip(cells[n], cells[peer])]
            return f"{min(r):.2f}-{max(r):.2f}"
        print(f"| {n} | {span(upc)} | {ratios(1, 'set-px')} | {ratios(1, 'cell')} | {span(cpu)} | {ratios(2, 'set-px')} | {ratios(2, 'cell')} |")
PY

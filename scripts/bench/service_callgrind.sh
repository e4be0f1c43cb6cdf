#!/usr/bin/env bash
# User-space instructions per HTTP `POST /v1/check`, serve beside
# examples/transport_baseline.rs, under valgrind's callgrind. Instruction
# counts do not move with the machine's other load (wall-clock runs on the
# shared 2-core VM move by ~15% from one set to the next), so a change of a
# few percent on the HTTP path shows here when scripts/bench/service_cost.sh
# cannot resolve it. The kernel's part (syscalls, wake-ups) is not counted.
#
# Each server runs under callgrind; its counters are zeroed once it answers,
# then h2load sends N requests over C kept-alive HTTP/1.1 connections (one
# fixed body: key bench:1, max 10,000,000 per 60 s, every check admits and
# records), and the counters are dumped: instructions / N is the cost of one
# request, connection set-up spread over N/C requests each.
#
#   scripts/bench/service_callgrind.sh                  # N=20000 C=8, serve then baseline
#   N=50000 C=16 WHO="serve" BIN=… scripts/bench/service_callgrind.sh
#   OUT=/tmp/cg scripts/bench/service_callgrind.sh      # keep the callgrind.out files
#   callgrind_annotate --inclusive=yes OUT/callgrind.serve.out | head -60
# Needs valgrind and h2load (apt-get install -y valgrind nghttp2-client).
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${N:-20000}
C=${C:-8}
WHO=${WHO:-serve baseline}
BIN=${BIN:-target/release/slidelog}
BASELINE=${BASELINE:-target/release/examples/transport_baseline}
OUT=${OUT:-}
source scripts/bench/lib.sh
require_tools "valgrind nghttp2-client" valgrind callgrind_control h2load
[ -n "$OUT" ] && mkdir -p "$OUT"

printf '{"key":"bench:1","max":10000000,"window_ms":60000}' >"$WORK/body.json"

# measure WHO -> "instructions_per_request requests"
measure() {
  local who=$1 port cg pid
  port=$(free_port)
  cg="$WORK/callgrind.$who.out"
  if [ "$who" = serve ]; then
    valgrind --tool=callgrind --callgrind-out-file="$cg" "$BIN" serve --store memory:// \
      --http "127.0.0.1:$port" --no-grpc --max-limit 10000000 2>"$WORK/$who.log" &
  else
    valgrind --tool=callgrind --callgrind-out-file="$cg" "$BASELINE" \
      "127.0.0.1:$port" "127.0.0.1:$(free_port)" 2>"$WORK/$who.log" &
  fi
  pid=$!
  PIDS+=("$pid")
  for _ in $(seq 600); do
    curl -fs -o /dev/null -X POST -H 'content-type: application/json' --data-binary @"$WORK/body.json" \
      "http://127.0.0.1:$port/v1/check" && break
    sleep 0.1
  done
  callgrind_per_request "$who" "$pid" "$cg" "$N" h2load --h1 -n "$N" -c "$C" -m 1 -d "$WORK/body.json" \
    -H 'content-type: application/json' "http://127.0.0.1:$port/v1/check"
}

echo "| server | requests | connections | instructions / request |"
echo "|---|---|---|---|"
for who in $WHO; do
  read -r ipr n < <(measure "$who")
  echo "| $who | $n | $C | $ipr |"
done

#!/usr/bin/env bash
# User-space instructions per Envoy `ShouldRateLimit` (gRPC), serve
# beside examples/transport_baseline.rs, under valgrind's callgrind: the gRPC
# twin of scripts/bench/service_callgrind.sh (HTTP), same method. Instruction
# counts do not move with the machine's other load, so a change of a few
# percent shows here when scripts/bench/service_cost.sh cannot resolve it.
# The kernel's part (syscalls, wake-ups) is not counted.
#
# Each server runs under callgrind; its counters are zeroed once it answers,
# then h2load sends N requests over C HTTP/2 connections, M streams at a
# time on each (one fixed gRPC-framed body: domain bench, descriptor
# user=hot, 10,000,000 per minute; every call admits and records: the same
# request as service_cost.sh's gRPC runs), and the counters are dumped:
# instructions / N is the cost of one request, connection set-up spread
# over N/C requests each.
#
#   scripts/bench/grpc_callgrind.sh                  # N=20000 C=8 M=8, serve then baseline
#   N=50000 WHO="serve" BIN=… scripts/bench/grpc_callgrind.sh
#   OUT=/tmp/cg scripts/bench/grpc_callgrind.sh      # keep the callgrind.out files
#   callgrind_annotate --inclusive=yes OUT/callgrind.serve.out | head -60
# Needs valgrind and h2load (apt-get install -y valgrind nghttp2-client).
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${N:-20000}
C=${C:-8}
M=${M:-8}
WHO=${WHO:-serve baseline}
BIN=${BIN:-target/release/slidelog}
BASELINE=${BASELINE:-target/release/examples/transport_baseline}
OUT=${OUT:-}
source scripts/bench/lib.sh
require_tools "valgrind nghttp2-client" valgrind callgrind_control h2load
[ -n "$OUT" ] && mkdir -p "$OUT"

printf 'domain: bench\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 10000000}\n' >"$WORK/envoy.yaml"
grpc_request "$WORK/grpc.bin"

# h2load PORT N C M -> its output
calls() {
  h2load -n "$2" -c "$3" -m "$4" -d "$WORK/grpc.bin" -H 'content-type: application/grpc' -H 'te: trailers' \
    "http://127.0.0.1:$1/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit" 2>&1
}

# measure WHO -> "instructions_per_request requests"
measure() {
  local who=$1 port cg pid
  port=$(free_port)
  cg="$WORK/callgrind.$who.out"
  if [ "$who" = serve ]; then
    valgrind --tool=callgrind --callgrind-out-file="$cg" "$BIN" serve --store memory:// \
      --http "127.0.0.1:$(free_port)" --grpc "127.0.0.1:$port" --max-limit 10000000 \
      --config "$WORK/envoy.yaml" 2>"$WORK/$who.log" &
  else
    valgrind --tool=callgrind --callgrind-out-file="$cg" "$BASELINE" \
      "127.0.0.1:$(free_port)" "127.0.0.1:$port" 2>"$WORK/$who.log" &
  fi
  pid=$!
  PIDS+=("$pid")
  for _ in $(seq 600); do
    calls "$port" 1 1 1 | grep -q '^status codes: 1 2xx' && break
    sleep 0.1
  done
  callgrind_per_request "$who" "$pid" "$cg" "$N" calls "$port" "$N" "$C" "$M"
}

echo "| server | requests | connections | streams each | instructions / request |"
echo "|---|---|---|---|---|"
for who in $WHO; do
  read -r ipr n < <(measure "$who")
  echo "| $who | $n | $C | $M | $ipr |"
done

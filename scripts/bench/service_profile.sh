#!/usr/bin/env bash
# Where `slidelog serve`'s CPU goes under load, by function.
# Starts serve on the memory store, drives it with the same load as
# scripts/bench/service_cost.sh (HTTP: wrk -t2 -c64 over 10,000 keys, every
# check admitted; gRPC: h2load -t2 -c8 -m8) and records the server process
# with `perf record` (software clock event, DWARF call graphs: the release
# build has no frame pointers), then prints the functions by self time and
# by inclusive time (children).
#
#   scripts/bench/service_profile.sh            # HTTP, 8 s of samples
#   API=grpc scripts/bench/service_profile.sh
#   STORE=redis scripts/bench/service_profile.sh   # a redis-server of its own, on a free port
#   OUT=/tmp/prof TOP=40 SECONDS_=8 BIN=… scripts/bench/service_profile.sh
# Needs perf (linux-perf), wrk, h2load. Hardware counters need not exist:
# cpu-clock is a software event (`perf stat -e instructions true` may say
# "not supported" on a VM; cpu-clock sampling works there).
set -euo pipefail
cd "$(dirname "$0")/../.."
API=${API:-http}
SECS=${SECONDS_:-8}
TOP=${TOP:-40}
BIN=${BIN:-target/release/slidelog}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
source scripts/bench/lib.sh

printf 'domain: bench\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 10000000}\n' >"$WORK/envoy.yaml"
grpc_request "$WORK/grpc.bin"
STORE_URL=memory://
if [ "${STORE:-memory}" = redis ]; then
  RPORT=$(free_port)
  redis-server --port "$RPORT" --bind 127.0.0.1 --save "" --appendonly no --daemonize no >"$WORK/redis.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 50); do redis-cli -p "$RPORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
  STORE_URL="redis://127.0.0.1:$RPORT"
fi
HPORT=$(free_port); GPORT=$(free_port)
"$BIN" serve --store "$STORE_URL" --http "127.0.0.1:$HPORT" --grpc "127.0.0.1:$GPORT" \
  --max-limit 10000000 --config "$WORK/envoy.yaml" 2>"$WORK/serve.log" &
SPID=$!
PIDS+=("$SPID")
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$HPORT/readyz" >/dev/null 2>&1 && break; sleep 0.1; done

if [ "$API" = http ]; then
  KEYS=10000 MAX=1000000 WINDOW_MS=60000 wrk -t2 -c64 -d"$((SECS + 3))s" \
    -s scripts/bench/http_check.lua "http://127.0.0.1:$HPORT/v1/check" >"$OUT/load.txt" &
else
  h2load -t2 -c8 -m8 -D "$((SECS + 3))" -d "$WORK/grpc.bin" -H 'content-type: application/grpc' \
    -H 'te: trailers' "http://127.0.0.1:$GPORT/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit" \
    >"$OUT/load.txt" 2>&1 &
fi
LOAD=$!
sleep 1.5
perf record -q -e cpu-clock -F 997 --call-graph dwarf,16384 -p "$SPID" -o "$OUT/perf.data" -- sleep "$SECS" 2>/dev/null
wait "$LOAD"
report() { perf report -i "$OUT/perf.data" --sort symbol --stdio -g none "$@" 2>/dev/null \
  | grep -v '^#' | sed -E 's/ +- +- *$//; s/ +/ /g; s/^ //' | grep -v '^$' | sort -t% -k1 -rn | head -"$TOP" || true; }
report --no-children --percent-limit 0.3 >"$OUT/self.txt"
report --children --percent-limit 1 >"$OUT/children.txt"
echo "load: $(grep -E 'Requests/sec|finished in' "$OUT/load.txt" || true)"
echo "== self time, by function (top $TOP) =="; cat "$OUT/self.txt"
echo "== inclusive time (children), by function =="; cat "$OUT/children.txt"
echo "perf data: $OUT/perf.data"

#!/usr/bin/env bash
# The hot-key workload on a Redis store: one key, 100 per
# second, hammered over HTTP (wrk, POST /v1/check) and over the Envoy gRPC
# API (h2load, ShouldRateLimit), with the local rejection cache (the
# default) and without it (--no-rejection-cache). For each run: decisions/s,
# the answers, p50/p99/max latency, Redis calls per request (EVALSHA calls
# in INFO commandstats / requests), and CPU per request of the server
# process (/proc/PID/stat) and of redis-server (INFO cpu). Starts its own redis-server on a
# free port (never 6379). Needs wrk and h2load (apt-get install -y wrk
# nghttp2-client).
#
#   scripts/bench/hot_key.sh                    # 10 s per run
#   BIN=/path/to/slidelog DURATION=5 scripts/bench/hot_key.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
DURATION=${DURATION:-10}
BIN=${BIN:-target/release/slidelog}
[ -x "$BIN" ] || cargo build --release -q -p slidelog-server
source scripts/bench/lib.sh
require_tools "wrk nghttp2-client redis-server" wrk h2load redis-server

RPORT=$(free_port)
redis-server --port "$RPORT" --save '' --appendonly no >"$WORK/redis.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do redis-cli -p "$RPORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
R="redis-cli -p $RPORT"

printf 'domain: bench\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 100}\n' >"$WORK/envoy.yaml"
grpc_request "$WORK/grpc.bin"

start_serve() {
  HPORT=$(free_port); GPORT=$(free_port)
  "$BIN" serve --store "redis://127.0.0.1:$RPORT" --http "127.0.0.1:$HPORT" --grpc "127.0.0.1:$GPORT" \
    --config "$WORK/envoy.yaml" "$@" 2>"$WORK/serve.log" &
  SERVE_PID=$!; PIDS+=("$SERVE_PID")
  for _ in $(seq 100); do curl -fs "http://127.0.0.1:$HPORT/readyz" >/dev/null 2>&1 && return 0; sleep 0.1; done
  cat "$WORK/serve.log" >&2; exit 1
}
# CPU seconds used so far: the server process (utime + stime, in clock
# ticks), redis-server (used_cpu_user + used_cpu_sys).
serve_cpu() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$SERVE_PID/stat"; }
redis_cpu() { $R info cpu | tr -d '\r' | awk -F: '/^used_cpu_(user|sys):/ {s += $2} END {print s}'; }
per_req_us() { python3 -c "print(f'{($2 - $1) * 1e6 / max($3, 1):.1f}')"; }
evalsha_calls() { $R info commandstats | tr -d '\r' | sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\),.*/\1/p' | grep . || echo 0; }

echo "| API | rejection cache | decisions/s | answers | p50 | p99 | max | Redis calls per request | server CPU µs/request | Redis CPU µs/request |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for cache in on off; do
  if [ $cache = on ]; then start_serve; else start_serve --no-rejection-cache; fi
  # HTTP: 2 threads, 64 connections.
  $R flushall >/dev/null; $R config resetstat >/dev/null
  s0=$(serve_cpu); r0=$(redis_cpu)
  out=$(KEYS=1 MAX=100 WINDOW_MS=1000 wrk -t2 -c64 -d"${DURATION}s" -s scripts/bench/http_check.lua "http://127.0.0.1:$HPORT/v1/check")
  calls=$(evalsha_calls); s1=$(serve_cpu); r1=$(redis_cpu)
  reqs=$(echo "$out" | awk '/requests in/ {print $1}')
  rate=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  answers=$(echo "$out" | grep answers: | cut -d' ' -f2-)
  lat=$(echo "$out" | grep p50= )
  p50=$(echo "$lat" | sed 's/.*p50=\([^ ]*\).*/\1/'); p99=$(echo "$lat" | sed 's/.*p99=\([^ ]*\).*/\1/'); mx=$(echo "$lat" | sed 's/.*max=\([^ ]*\).*/\1/')
  echo "| HTTP (wrk -c64) | $cache | $rate | $answers | $p50 | $p99 | $mx | $(python3 -c "print(f'{$calls/$reqs:.4f}')") | $(per_req_us "$s0" "$s1" "$reqs") | $(per_req_us "$r0" "$r1" "$reqs") |"
  # gRPC: 8 connections x 8 streams.
  $R flushall >/dev/null; $R config resetstat >/dev/null
  rm -f "$WORK/h2load.log"
  s0=$(serve_cpu); r0=$(redis_cpu)
  out=$(h2load -D "$DURATION" -c 8 -m 8 -t 1 -d "$WORK/grpc.bin" -H 'content-type: application/grpc' -H 'te: trailers' \
    --log-file="$WORK/h2load.log" \
    "http://127.0.0.1:$GPORT/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit" 2>&1)
  calls=$(evalsha_calls); s1=$(serve_cpu); r1=$(redis_cpu)
  reqs=$(echo "$out" | awk '/^requests:/ {print $8}')
  rate=$(echo "$out" | awk '/^finished in/ {print $4}')
  # Per-request durations (µs, third column of --log-file): p50, p99, max.
  lat=$(python3 -c "
import sys
d = sorted(int(l.split()[2]) for l in open('$WORK/h2load.log') if l.strip())
q = lambda p: d[min(len(d) - 1, int(p * len(d)))] / 1000
print(f'{q(0.5):.3f}ms | {q(0.99):.3f}ms | {d[-1] / 1000:.3f}ms')")
  echo "| gRPC (h2load -c8 -m8) | $cache | $rate | $reqs succeeded | $lat | $(python3 -c "print(f'{$calls/max($reqs,1):.4f}')") | $(per_req_us "$s0" "$s1" "$reqs") | $(per_req_us "$r0" "$r1" "$reqs") |"
  kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null || true
done

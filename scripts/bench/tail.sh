#!/usr/bin/env bash
# Latency tails of `slidelog serve` on the memory store, HTTP and Envoy gRPC
# measured by the same client (h2load, per-request log): HTTP/1.1 POST
# /v1/check over 64 connections, and gRPC ShouldRateLimit over 8 connections
# x 8 streams. One key, 10,000,000 per minute (every request admitted and
# recorded). Beside it, in the same rounds, the peer-like baseline
# (examples/transport_baseline.rs: the same two protocols on axum and tonic,
# answered at once, no limiter). Prints decisions/s and p50/p99/max for each.
# Needs h2load (apt-get install -y nghttp2-client).
#
#   scripts/bench/tail.sh            # 10 s per run
#   CHRT=1 scripts/bench/tail.sh     # servers at real-time priority (root)
set -euo pipefail
cd "$(dirname "$0")/../.."
DURATION=${DURATION:-10}
BIN=${BIN:-target/release/slidelog}
[ -x "$BIN" ] || cargo build --release -q -p slidelog-server
BASELINE=target/release/examples/transport_baseline
[ -x "$BASELINE" ] || cargo build --release -q -p slidelog-server --example transport_baseline
source scripts/bench/lib.sh
require_tools "nghttp2-client" h2load

printf 'domain: bench\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 10000000}\n' >"$WORK/envoy.yaml"
grpc_request "$WORK/grpc.bin"
printf '{"key":"hot","max":10000000,"window_ms":60000}' >"$WORK/http.json"

HPORT=$(free_port); GPORT=$(free_port)
"$BIN" serve --store memory:// --http "127.0.0.1:$HPORT" --grpc "127.0.0.1:$GPORT" \
  --max-limit 10000000 --config "$WORK/envoy.yaml" 2>"$WORK/serve.log" &
PIDS+=($!)
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$HPORT/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
BHPORT=$(free_port); BGPORT=$(free_port)
"$BASELINE" "127.0.0.1:$BHPORT" "127.0.0.1:$BGPORT" 2>"$WORK/baseline.log" &
PIDS+=($!)
for _ in $(seq 100); do grep -q listening "$WORK/baseline.log" && break; sleep 0.1; done
# CHRT=1: the servers run at real-time priority 10, so that other work on a
# shared machine does not stall them (root only). The client stays normal:
# with it real-time too, server and client together use both cores and the
# kernel's real-time throttling (sched_rt_runtime_us, 950 ms of every 1 s)
# stops them all for ~50 ms, which shows up as a 50 ms maximum.
if [ "${CHRT:-0}" = 1 ]; then
  for p in "${PIDS[@]}"; do chrt -f -a -p 10 "$p" >/dev/null; done
fi

stats() { # rate from h2load's output; percentiles from its per-request log
  # (start µs, status, duration µs). "steady" leaves out the requests sent in
  # the first 200 ms: those wait for their connection's TCP and HTTP/2
  # handshakes and the server's first tasks, and make the overall maximum.
  local out=$1 log=$2
  local rate; rate=$(echo "$out" | awk '/^finished in/ {print $4}')
  python3 -c "
rows = [tuple(int(v) for v in l.split()[:3]) for l in open('$log') if l.strip()]
t0 = min(r[0] for r in rows)
d = sorted(r[2] for r in rows)
s = sorted(r[2] for r in rows if r[0] - t0 >= 200_000)
q = lambda v, p: v[min(len(v) - 1, int(p * len(v)))] / 1000
print(f'$rate | {q(d, 0.5):.3f} ms | {q(d, 0.99):.3f} ms | {d[-1] / 1000:.3f} ms | {s[-1] / 1000:.3f} ms | {s[-1] / 1000 / q(s, 0.99):.1f} | {len(d)}')"
}
echo "| server | API | client | decisions/s | p50 | p99 | max | max after 200 ms | that / its p99 | requests |"
echo "|---|---|---|---|---|---|---|---|---|---|"
run_pair() { # $1 label, $2 http port, $3 grpc port
  rm -f "$WORK/h1.log" "$WORK/h2.log"
  out=$(h2load --h1 -D "$DURATION" -c 64 -t 1 -d "$WORK/http.json" -H 'content-type: application/json' \
    --log-file="$WORK/h1.log" "http://127.0.0.1:$2/v1/check" 2>&1)
  echo "| $1 | HTTP/1.1 POST /v1/check | h2load --h1 -c64 | $(stats "$out" "$WORK/h1.log") |"
  out=$(h2load -D "$DURATION" -c 8 -m 8 -t 1 -d "$WORK/grpc.bin" -H 'content-type: application/grpc' -H 'te: trailers' \
    --log-file="$WORK/h2.log" "http://127.0.0.1:$3/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit" 2>&1)
  echo "| $1 | gRPC ShouldRateLimit | h2load -c8 -m8 | $(stats "$out" "$WORK/h2.log") |"
}
for round in 1 2; do
  run_pair "slidelog serve" "$HPORT" "$GPORT"
  run_pair "baseline" "$BHPORT" "$BGPORT"
done

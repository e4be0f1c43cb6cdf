#!/usr/bin/env bash
# The service's own cost. `slidelog serve` against the peer-like
# baseline (examples/transport_baseline.rs: the same two protocols on axum
# and tonic answering a fixed body), alternating, ROUNDS rounds; prints one
# row per run and the medians, with the server's CPU per request (utime +
# stime of the server process from /proc, whole run) and, on Redis, Redis's
# CPU per request (INFO cpu) beside. Each run's row also gives the server's
# user-space share of its CPU, how often its threads were preempted per
# request (involuntary context switches: a server that takes more CPU per
# request is preempted more often by the woken client, which costs kernel
# time on both sides) and the load client's own CPU per request (the client
# shares the machine's cores, so its cost is part of every requests/s).
#
#   HTTP/1.1 POST /v1/check: wrk -t2 -c64, 10,000 keys, max 1,000,000 per
#     60 s (scripts/bench/check_keys.lua; WRK_SCRIPT=http_check.lua adds its
#     per-answer response() hook): every check admits and records.
#   Envoy ShouldRateLimit: h2load -t2 -c8 -m8, one gRPC-framed request body
#     (domain bench, descriptor user=hot, 10,000,000 per minute): every call
#     admits and records. h2load sends one fixed body, hence one key.
#
#   scripts/bench/service_cost.sh                 # memory store, 3 rounds of 10 s
#   STORE=redis scripts/bench/service_cost.sh     # a redis-server of its own, on a free port
#   ONLY=http|grpc  DURATION=10  ROUNDS=3  BIN=…  BASELINE=…
#   NICE=-10: servers and clients at that nice level, so that other work on
#   a shared machine takes less of the 2 cores during the runs (root only).
# Needs wrk and h2load (apt-get install -y wrk nghttp2-client), and
# redis-server for STORE=redis.
set -euo pipefail
cd "$(dirname "$0")/../.."
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
STORE=${STORE:-memory}
ONLY=${ONLY:-}
BIN=${BIN:-target/release/slidelog}
BASELINE=${BASELINE:-target/release/examples/transport_baseline}
WRK_SCRIPT=${WRK_SCRIPT:-check_keys.lua}
NICE_CMD=()
[ -n "${NICE:-}" ] && NICE_CMD=(nice -n "$NICE")
source scripts/bench/lib.sh
require_tools "wrk nghttp2-client" wrk h2load
[ -x "$BIN" ] || cargo build --release -q -p slidelog-server --bin slidelog
[ -x "$BASELINE" ] || cargo build --release -q -p slidelog-server --example transport_baseline

printf 'domain: bench\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 10000000}\n' >"$WORK/envoy.yaml"
grpc_request "$WORK/grpc.bin"

STORE_URL=memory://
RPID=
if [ "$STORE" = redis ]; then
  RPORT=$(free_port)
  "${NICE_CMD[@]}" redis-server --port "$RPORT" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
    >"$WORK/redis.log" 2>&1 &
  RPID=$!
  PIDS+=("$RPID")
  for _ in $(seq 50); do redis-cli -p "$RPORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
  STORE_URL="redis://127.0.0.1:$RPORT"
fi

HPORT=$(free_port); GPORT=$(free_port)
"${NICE_CMD[@]}" "$BIN" serve --store "$STORE_URL" --http "127.0.0.1:$HPORT" --grpc "127.0.0.1:$GPORT" \
  --max-limit 10000000 --config "$WORK/envoy.yaml" 2>"$WORK/serve.log" &
SPID=$!
PIDS+=("$SPID")
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$HPORT/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
BHPORT=$(free_port); BGPORT=$(free_port)
"${NICE_CMD[@]}" "$BASELINE" "127.0.0.1:$BHPORT" "127.0.0.1:$BGPORT" 2>"$WORK/baseline.log" &
BPID=$!
PIDS+=("$BPID")
for _ in $(seq 100); do grep -q listening "$WORK/baseline.log" && break; sleep 0.1; done

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
uticks() { awk '{print $14}' "/proc/$1/stat"; }
# Times the server's threads were preempted (involuntary context switches), all threads.
preempted() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/^nonvoluntary_ctxt_switches/ {s += $2} END {print s + 0}'; }
# client CMD...: runs the load client (its stderr merged into stdout), then
# prints its CPU time as "CLIENT_CPU user sys" (seconds).
client() { local TIMEFORMAT='CLIENT_CPU %3U %3S'; { time "$@"; } 2>&1; }
redis_cpu() { # seconds of Redis CPU (user + sys) so far
  [ -n "$RPID" ] || { echo 0; return; }
  redis-cli -p "$RPORT" info cpu | awk -F: '/^used_cpu_(user|sys):/ {s += $2} END {printf "%.6f", s}'
}
HZ=$(getconf CLK_TCK)

# run API SERVER_PID PORT -> "rate requests server_us_per_req redis_us_per_req
#   server_user_us_per_req preemptions_per_req client_us_per_req"
run() {
  local api=$1 pid=$2 port=$3 out rate n t0 t1 r0 r1 u0 u1 p0 p1
  t0=$(ticks "$pid"); r0=$(redis_cpu); u0=$(uticks "$pid"); p0=$(preempted "$pid")
  if [ "$api" = http ]; then
    out=$(KEYS=10000 MAX=1000000 WINDOW_MS=60000 client "${NICE_CMD[@]}" wrk -t2 -c64 -d"${DURATION}s" \
      -s "scripts/bench/$WRK_SCRIPT" "http://127.0.0.1:$port/v1/check")
    rate=$(echo "$out" | awk '/^Requests\/sec/ {print $2}')
    n=$(echo "$out" | awk '/requests in/ {print $1}')
    if echo "$out" | grep -q 'Non-2xx' || { echo "$out" | grep -q 'answers:' && ! echo "$out" | grep -q 'other=0'; }; then
      echo "answers other than 200: $out" >&2
    fi
  else
    out=$(client "${NICE_CMD[@]}" h2load -t2 -c8 -m8 -D "$DURATION" -d "$WORK/grpc.bin" -H 'content-type: application/grpc' \
      -H 'te: trailers' "http://127.0.0.1:$port/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit" 2>&1)
    rate=$(echo "$out" | awk '/^finished in/ {print $4}')
    n=$(echo "$out" | awk '/^requests:/ {print $8}')
  fi
  t1=$(ticks "$pid"); r1=$(redis_cpu); u1=$(uticks "$pid"); p1=$(preempted "$pid")
  local ccpu
  ccpu=$(echo "$out" | awk '/^CLIENT_CPU/ {print $2 + $3}')
  python3 -c "
n = $n; print(f'$rate {n} {($t1 - $t0) / $HZ * 1e6 / n:.2f} {($r1 - $r0) * 1e6 / n:.2f}'
              f' {($u1 - $u0) / $HZ * 1e6 / n:.2f} {($p1 - $p0) / n:.3f} {$ccpu * 1e6 / n:.2f}')"
}

declare -A RATES CPU RCPU CCPU
echo "| round | API | server | requests/s | requests | server CPU µs/request | of it user | server preempted / request | client CPU µs/request | Redis CPU µs/request |"
echo "|---|---|---|---|---|---|---|---|---|---|"
apis="http grpc"
[ -n "$ONLY" ] && apis=$ONLY
for round in $(seq "$ROUNDS"); do
  for api in $apis; do
    # Alternate which server goes first.
    if [ $((round % 2)) = 1 ]; then order="serve baseline"; else order="baseline serve"; fi
    for who in $order; do
      if [ "$who" = serve ]; then pid=$SPID; [ "$api" = http ] && port=$HPORT || port=$GPORT
      else pid=$BPID; [ "$api" = http ] && port=$BHPORT || port=$BGPORT; fi
      read -r rate n us rus uus pre cus < <(run "$api" "$pid" "$port")
      RATES[$api.$who]+="$rate "; CPU[$api.$who]+="$us "; RCPU[$api.$who]+="$rus "; CCPU[$api.$who]+="$cus "
      [ "$who" = serve ] || rus=-
      echo "| $round | $api | $who | $rate | $n | $us | $uus | $pre | $cus | $rus |"
    done
  done
done
median() { python3 -c "import statistics,sys; print(f'{statistics.median(float(v) for v in sys.argv[1:]):.2f}')" $1; }
echo
echo "| API | store | serve requests/s (median) | baseline requests/s (median) | serve / baseline | serve CPU µs/request | baseline CPU µs/request | client CPU µs/request, serve / baseline | Redis CPU µs/request |"
echo "|---|---|---|---|---|---|---|---|---|"
for api in $apis; do
  s=$(median "${RATES[$api.serve]}"); b=$(median "${RATES[$api.baseline]}")
  echo "| $api | $STORE | $s | $b | $(python3 -c "print(f'{$s / $b:.2f}')") | $(median "${CPU[$api.serve]}") | $(median "${CPU[$api.baseline]}") | $(median "${CCPU[$api.serve]}") / $(median "${CCPU[$api.baseline]}") | $( [ -n "$RPID" ] && median "${RCPU[$api.serve]}" || echo -) |"
done
rejected=$(curl -fs "http://127.0.0.1:$HPORT/metrics" | awk '/^slidelog_decisions_total\{op="check",result="rejected"\}/ {print $2}')
echo
echo "serve: rejected checks over the whole run: ${rejected:-?} (every check should admit)"

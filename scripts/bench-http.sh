#!/usr/bin/env bash
# HTTP decisions per second and latency of `slidelog serve`, on the memory
# store and on a Redis that this script starts on a free loopback port (it
# never touches a Redis on 6379). Needs wrk (apt-get install -y wrk).
#
#   scripts/bench-http.sh            # 10 s per run, 2 wrk threads, 64 connections
#   DURATION=30s CONNECTIONS=128 scripts/bench-http.sh
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
THREADS=${THREADS:-2}
CONNECTIONS=${CONNECTIONS:-64}
command -v wrk >/dev/null || { echo "wrk is missing: apt-get install -y wrk" >&2; exit 2; }
command -v redis-server >/dev/null || { echo "redis-server is missing: apt-get install -y redis-server" >&2; exit 2; }

cargo build --release -q -p slidelog-server
BIN=target/release/slidelog
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Starts `slidelog serve` with extra args; sets ADDR and SERVE_PID.
start_serve() {
  "$BIN" serve --http 127.0.0.1:0 "$@" 2>"$WORK/serve.log" &
  SERVE_PID=$!; PIDS+=("$SERVE_PID")
  for _ in $(seq 100); do
    ADDR=$(grep -o 'http_addr=[0-9.:]*' "$WORK/serve.log" | head -1 | cut -d= -f2 || true)
    [ -n "$ADDR" ] && return 0
    sleep 0.1
  done
  cat "$WORK/serve.log" >&2; exit 1
}

run() {
  local label=$1
  echo "== $label: wrk -t$THREADS -c$CONNECTIONS -d$DURATION, POST /v1/check over ${KEYS:-10000} keys, max ${MAX:-1000}/60s"
  wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency -s scripts/bench/http_check.lua "http://$ADDR/v1/check" \
    | grep -E 'Requests/sec|answers:|p50=|Socket errors|Non-2xx'
}

start_serve
run "memory store"
kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null || true

REDIS_PORT=$(free_port)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
  --dir "$WORK" >"$WORK/redis.log" 2>&1 &
PIDS+=("$!")
for _ in $(seq 100); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
start_serve --store "redis://127.0.0.1:$REDIS_PORT" --key-prefix "bench:http:"
run "redis store (redis-server 127.0.0.1:$REDIS_PORT, server time)"

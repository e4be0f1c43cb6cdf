# Shared by the benchmark scripts (sourced, not run): a work dir removed on
# exit with every process recorded in PIDS, a free loopback port, and the
# gRPC-framed ShouldRateLimit request the Envoy runs send.
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
# require_tools "PACKAGES" TOOL...: exits 2, saying what to install, unless
# every TOOL is on the PATH.
require_tools() {
  local packages=$1 tool
  shift
  for tool in "$@"; do
    command -v "$tool" >/dev/null || { echo "$tool is missing: apt-get install -y $packages" >&2; exit 2; }
  done
}
# instructions_per_call PORT PID OUT STAT: stops the callgrind'd server PID
# on PORT and prints the instructions OUT counted per call of its command
# STAT (`INFO commandstats`' cmdstat_STAT calls).
instructions_per_call() {
  local port=$1 pid=$2 out=$3 stat=$4 calls ir
  calls=$(redis-cli -p "$port" INFO commandstats | tr -d '\r' | sed -n "s/^cmdstat_$stat:calls=\([0-9]*\),.*/\1/p")
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  wait "$pid" 2>/dev/null || true
  ir=$(callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}')
  rm -f "$out"*
  echo $((ir / calls))
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# grpc_request FILE: ShouldRateLimit{domain: "bench", descriptors: [{entries:
# [{key: "user", value: "hot"}]}]}, gRPC-framed (h2load's -d body).
grpc_request() {
  python3 - "$1" <<'PY'
import sys
entry = b"\x0a\x04user\x12\x03hot"
desc = b"\x0a" + bytes([len(entry)]) + entry
msg = b"\x0a\x05bench\x12" + bytes([len(desc)]) + desc
open(sys.argv[1], "wb").write(b"\x00" + len(msg).to_bytes(4, "big") + msg)
PY
}

# callgrind_per_request WHO PID CG N CMD...: with server PID running under
# callgrind (writing CG), zeroes its counters, runs the load CMD (h2load, N
# requests), checks that all N were answered, dumps the counters and stops
# the server; prints "instructions_per_request N" (the dump copied to
# $OUT/callgrind.WHO.out when OUT is set).
callgrind_per_request() {
  local who=$1 pid=$2 cg=$3 n=$4 out done total dump
  shift 4
  callgrind_control -z "$pid" >/dev/null 2>&1
  out=$("$@" 2>&1)
  done=$(echo "$out" | awk '/^status codes:/ {print $3}')
  [ "$done" = "$n" ] || { echo "$who: $out" >&2; exit 1; }
  callgrind_control -d "$pid" >/dev/null 2>&1
  sleep 1
  kill "$pid"; wait "$pid" 2>/dev/null || true
  # The dump after -z is the file with the highest part number.
  dump=$(ls "$cg".* 2>/dev/null | sort -t. -k4 -n | tail -1)
  total=$(grep -h '^summary:' "$dump" | awk '{print $2}')
  [ -n "${OUT:-}" ] && cp "$dump" "$OUT/callgrind.$who.out"
  python3 -c "print(f'{$total / $n:.0f} $n')"
}

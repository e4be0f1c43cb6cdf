# Shared by the benchmark scripts (sourced, not run): a work dir removed on
# exit with every process recorded in PIDS, a free loopback port, and the
# gRPC-framed ShouldRateLimit request the Envoy runs send.
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
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

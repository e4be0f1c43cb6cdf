#!/usr/bin/env bash
# Runs every test of slidelog on a fresh Debian machine with a Rust toolchain.
# It installs what the tests need (redis-server) when it is missing, then runs
# the whole workspace's tests. Tests start their own redis-server processes on
# free loopback ports; nothing here starts or touches a Redis on 6379.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need_apt+=(redis-tools)
# The Redis store's TLS test makes its test CA with the openssl command.
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "installing ${need_apt[*]} (needed by the Redis tests)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

cargo test --workspace --all-targets
cargo test --workspace --doc

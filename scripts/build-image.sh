#!/usr/bin/env bash
# Builds the slidelog container image of deploy/container/Dockerfile with
# podman: a static binary (glibc linked in, +crt-static: the image is FROM
# scratch, with no libc, no NSS modules and no base image to pull), the
# image's settings file (listen on 0.0.0.0), USER 65532.
#
#   scripts/build-image.sh [TAG]        # default localhost/slidelog:latest
#
# SLIDELOG_IMAGE_PROFILE picks the cargo profile (default release; the
# image test uses dev, which builds faster); CARGO_TARGET_DIR is honoured.
# Prints the image ID on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."

tag="${1:-localhost/slidelog:latest}"
profile="${SLIDELOG_IMAGE_PROFILE:-release}"
target=x86_64-unknown-linux-gnu
command -v podman >/dev/null || { echo "build-image.sh: podman is missing (apt-get install podman)" >&2; exit 1; }

# --target keeps these static artifacts apart from the ordinary build's.
RUSTFLAGS="-C target-feature=+crt-static" \
  cargo build --quiet --profile "$profile" --target "$target" -p slidelog-server --bin slidelog
case "$profile" in dev) dir=debug ;; *) dir="$profile" ;; esac
bin="${CARGO_TARGET_DIR:-target}/$target/$dir/slidelog"

# Static means no program interpreter and no shared library to load.
if readelf -l "$bin" | grep -q 'INTERP' || readelf -d "$bin" | grep -q 'NEEDED'; then
  echo "build-image.sh: $bin is not static:" >&2
  readelf -d "$bin" | grep NEEDED >&2 || true
  exit 1
fi

context="$(mktemp -d)"
trap 'rm -rf "$context"' EXIT
cp "$bin" "$context/slidelog"
cp deploy/container/settings.toml "$context/settings.toml"
# No RUN step, so nothing is executed and no network is needed.
podman build --quiet --network=none -f deploy/container/Dockerfile -t "$tag" "$context"

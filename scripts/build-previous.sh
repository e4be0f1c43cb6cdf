#!/usr/bin/env bash
# Builds the previous release of slidelog — its `slidelog` binary and its
# Redis module — into target/previous/bin, for the upgrade tests
# (crates/slidelog-server/tests/upgrade.rs): RDB, AOF and memory snapshots
# the previous release wrote, its receipts, and a rolling deploy that mixes
# its instances with this build's on one Redis (docs/guide/upgrade.md).
#
# The previous release is the commit in scripts/previous-release (the last
# one whose module writes log encoding 1 and whose receipts are unsigned).
# Its sources come from this clone's history (`git archive`): a shallow clone
# must be deepened first (`git fetch --unshallow`). Built once: a second run
# with the same commit does nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
rev="$(tr -d '[:space:]' < scripts/previous-release)"
out="$PWD/target/previous"
if [ -x "$out/bin/slidelog" ] && [ -f "$out/bin/libslidelog_module.so" ] && [ "$(cat "$out/rev" 2>/dev/null)" = "$rev" ]; then
  exit 0
fi
if ! git cat-file -e "$rev^{commit}" 2>/dev/null; then
  echo "the upgrade tests build the previous release, commit $rev, from this clone's history, which lacks it (a shallow clone?): run 'git fetch --unshallow' and retry" >&2
  exit 1
fi
echo "building the previous release ($rev) into target/previous (needed by the upgrade tests)"
rm -rf "$out/src" "$out/bin" "$out/rev"
mkdir -p "$out/src" "$out/bin"
git archive "$rev" | tar -x -C "$out/src"
# Two builds: a target filter (`--bin`) would apply to both packages.
(cd "$out/src" && CARGO_TARGET_DIR="$out/target" cargo build --quiet --locked -p slidelog-server --bin slidelog)
(cd "$out/src" && CARGO_TARGET_DIR="$out/target" cargo build --quiet --locked -p slidelog-module)
cp "$out/target/debug/slidelog" "$out/target/debug/libslidelog_module.so" "$out/bin/"
# The sources and the intermediate files are not needed once built.
rm -rf "$out/src" "$out/target/debug/incremental"
echo "$rev" > "$out/rev"

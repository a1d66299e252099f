#!/usr/bin/env bash
# Benchmark the database-handler plugins (not a test): cold and warm start of
# all standard handlers, classification throughput through the WebAssembly
# boundary, and the end-to-end `kpack plugins list` process time.
# Release build. Usage: bench/plugins.sh [PATHS]   (default 1000000)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
n=${1:-1000000}
target=${CARGO_TARGET_DIR:-$PWD/target}

scripts/build-plugins.sh -q
cargo build -q --locked --release -p kpack-cli -p kpack-plugin-host --example bench
plugins="$target/wasm32-wasip2/plugin"

echo "== library ($(nproc) cores)"
"$target/release/examples/bench" "$plugins" "$n"

echo "== process: kpack plugins list (loads all standard handlers)"
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
t0=$(date +%s%N)
XDG_CACHE_HOME=$cache KPACK_PLUGIN_DIR=$plugins "$target/release/kpack" plugins list >/dev/null
t1=$(date +%s%N)
echo "cold (empty cache): $(( (t1 - t0) / 1000000 )) ms"
best=999999
for _ in 1 2 3 4 5 6 7 8 9 10; do
  t0=$(date +%s%N)
  XDG_CACHE_HOME=$cache KPACK_PLUGIN_DIR=$plugins "$target/release/kpack" plugins list >/dev/null
  t1=$(date +%s%N)
  ms=$(( (t1 - t0) / 1000000 )); [ $ms -lt $best ] && best=$ms
done
echo "warm (best of 10, whole process): $best ms"

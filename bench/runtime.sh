#!/usr/bin/env bash
# Runtime library benchmark (not a test): warm kpack_load_code_object for a
# 100 KB kernel (1 and 2 threads, NoOp and zstd), and cold open + first load
# on a synthesized >= 1 GB archive with its pages evicted from the cache.
# Usage: bench/runtime.sh [BIG_MB]   (default 1100; needs ~1.2 GB free disk)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
work="${BENCH_DIR:-$PWD/bench/out/runtime}"
rm -rf "$work"; mkdir -p "$work"
cargo run -q --release -p kpack-capi --example bench_load -- "$work" "${1:-1100}"
rm -rf "$work"

#!/usr/bin/env bash
# Benchmark kpack inspect / extract --all / offload on Debian's real
# librocsparse.so.0.1 (1.31 GB, 111 bundles x 7 GPU targets), against `cp` of
# the same file. Prints wall time and peak RSS for each.
#
#   usage: bench/fatbin.sh [LIB]    (default: see bench/rocsparse.sh)
#
# Not a test: numbers go into docs/src/reference/performance.md by hand.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${BENCH_OUT:-bench/out/fatbin}
mkdir -p "$OUT"
# shellcheck source=bench/rocsparse.sh
. bench/rocsparse.sh
LIB=${1:-$(rocsparse_path "$OUT")}
cargo build --release -q -p kpack-cli
K=${CARGO_TARGET_DIR:-target}/release/kpack
command -v /usr/bin/time >/dev/null || { echo "needs GNU time (apt-get install time)" >&2; exit 2; }

measure() {  # measure LABEL CMD...
  local label=$1; shift
  /usr/bin/time -f "%e %M" -o "$OUT/time" "$@" > /dev/null
  read -r secs kb < "$OUT/time"
  printf '%-34s %8.2f s %8d MB\n' "$label" "$secs" "$((kb / 1024))"
}

echo "input: $LIB ($(stat -c %s "$LIB") bytes)"
cat "$LIB" > /dev/null   # warm the page cache: every run reads it hot
rm -rf "$OUT/x" && mkdir -p "$OUT/x"
measure "cp" cp "$LIB" "$OUT/x/copy.so"
rm -f "$OUT/x/copy.so"
measure "kpack inspect" "$K" inspect "$LIB"
measure "kpack inspect --json" "$K" inspect --json "$LIB"
measure "kpack extract --all" "$K" extract --all "$LIB" -o "$OUT/x/extract"
bytes=$(du -sb "$OUT/x/extract" | cut -f1)
rm -rf "$OUT/x/extract"
measure "kpack offload (zstd, default)" "$K" offload "$LIB" -o "$OUT/x/z/lib.so" --archives "$OUT/x/z/.kpack"
measure "kpack offload --compression none" "$K" offload "$LIB" -o "$OUT/x/n/lib.so" --archives "$OUT/x/n/.kpack" --compression none
echo "extracted bytes: $bytes"
echo "host binary: $(stat -c %s "$OUT/x/z/lib.so") bytes; archives (zstd): $(du -sb "$OUT/x/z/.kpack" | cut -f1) bytes; (none): $(du -sb "$OUT/x/n/.kpack" | cut -f1) bytes"
"$K" verify-elf "$OUT/x/z/lib.so"
rm -rf "$OUT/x"

#!/usr/bin/env bash
# Size and time of each `--compression-mode` (benchmark, not a test):
# `kpack offload LIB --compression-mode M` for speed, balance and size,
# one row per library and mode: archives written, their total bytes, the
# ratio to speed's, wall time and peak RSS (GNU time).
# Usage: bench/compression-modes.sh [LIB...]   (default: the fixture
#        tests/fixtures/corpus/libaxpy_wide.so)
# Env: KPACK_BIN (a release kpack; default: build it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
target="${CARGO_TARGET_DIR:-$PWD/target}"
kpack="${KPACK_BIN:-$target/release/kpack}"
[ -n "${KPACK_BIN:-}" ] || cargo build -q --release -p kpack-cli --bin kpack
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
[ $# -gt 0 ] || set -- tests/fixtures/corpus/libaxpy_wide.so
echo "| library | mode | archives | total bytes | / speed | wall | peak RSS |"
echo "|---|---|---|---|---|---|---|"
for lib in "$@"; do
  base=
  for m in speed balance size; do
    out="$work/$m"; rm -rf "$out"
    /usr/bin/time -f "%e %M" -o "$work/t" "$kpack" offload "$lib" -o "$out/lib.so" \
      --archives "$out/.kpack" --compression-mode "$m" -q
    n=$(ls "$out/.kpack" | wc -l); b=$(cat "$out"/.kpack/*.kpack | wc -c)
    [ -n "$base" ] || base=$b
    read -r wall rss < "$work/t"
    printf '| %s | %s | %s | %s | %.3f | %s s | %s MB |\n' "$(basename "$lib")" "$m" "$n" "$b" \
      "$(echo "$b / $base" | bc -l)" "$wall" "$((rss / 1024))"
  done
done

#!/usr/bin/env bash
# `kpack prune` benchmark (not a test): Debian's librocsparse.so.0.1
# (1.31 GB, 111 bundles x 7 GPU targets) pruned to `--keep gfx90a`, against
# `cp` of the same file into the same directory. Reports wall time and peak
# RSS (/usr/bin/time -f) of both and the output size; targets: prune wall
# <= 1.5x cp, RSS <= 150 MB. The pruned file is checked with
# `kpack verify-elf --pruned`.
# Usage: bench/prune.sh        (needs ~2.7 GB free disk for the copy and the
#      pruned output, both removed on exit; reports stay in bench/out/prune)
# Env: ROCSPARSE=path (see bench/rocsparse.sh); KPACK_BIN (a prebuilt
#      release kpack; default: build it); KEEP (default gfx90a);
#      EXAMPLE=1 times `cargo run --release -p kpack-elf --example
#      prune_bench` instead (the same library calls without the CLI, whose
#      release build compiles wasmtime) and verifies with KPACK_BIN or the
#      debug kpack.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
work="${BENCH_DIR:-$PWD/bench/out/prune}"
target="${CARGO_TARGET_DIR:-$PWD/target}"
rm -rf "$work"; mkdir -p "$work"
trap 'rm -rf "$work/copy.so" "$work/pruned.so" "$work/deb"' EXIT

. bench/rocsparse.sh
src=$(rocsparse_path "$work")
keep="${KEEP:-gfx90a}"
if [ "${EXAMPLE:-0}" = 1 ]; then
  cargo build -q --release -p kpack-elf --example prune_bench
  kpack="${KPACK_BIN:-$target/debug/kpack}"
  prune=("$target/release/examples/prune_bench" "$src" "$work/pruned.so" "$keep")
else
  kpack="${KPACK_BIN:-$target/release/kpack}"
  [ -n "${KPACK_BIN:-}" ] || cargo build -q --release -p kpack-cli --bin kpack
  prune=("$kpack" prune "$src" -o "$work/pruned.so" --keep "$keep" --json)
fi

# Warm the page cache once, so neither run pays for the first read.
cat "$src" > /dev/null
fmt='%e %M'
/usr/bin/time -f "$fmt" -o "$work/time-cp.txt" cp "$src" "$work/copy.so"
rm -f "$work/copy.so"
/usr/bin/time -f "$fmt" -o "$work/time-prune.txt" "${prune[@]}" > "$work/prune.json"
read -r cp_wall cp_rss < "$work/time-cp.txt"
read -r pr_wall pr_rss < "$work/time-prune.txt"
in_size=$(stat -c %s "$src")
out_size=$(stat -c %s "$work/pruned.so")
ratio=$(awk -v a="$pr_wall" -v b="$cp_wall" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
echo "input:  $src, $in_size bytes"
echo "cp:     wall ${cp_wall}s, peak RSS $((cp_rss / 1024)) MB"
echo "prune --keep $keep: wall ${pr_wall}s (${ratio}x cp), peak RSS $((pr_rss / 1024)) MB, output $out_size bytes ($((out_size / 1048576)) MB)"
"$kpack" verify-elf --pruned "$work/pruned.so" > "$work/verify.txt" \
  || { echo "verify-elf --pruned failed:"; tail -5 "$work/verify.txt"; exit 1; }
echo "verify-elf --pruned: ok"

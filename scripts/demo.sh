#!/usr/bin/env bash
# The main job on a bundled example: take a real HIP fat library (two
# translation units, gfx1030 + gfx90a, built by hipcc), show what is inside,
# move its device code into per-arch .kpack archives, check the host-only
# result, and list the archives.  Output goes to ./demo-out (or $1).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${1:-demo-out}
cargo build --release -q -p kpack-cli
K=${CARGO_TARGET_DIR:-target}/release/kpack
LIB=tests/fixtures/corpus/lib2tu_2arch.so
rm -rf "$OUT" && mkdir -p "$OUT/lib"
set -x
"$K" inspect "$LIB"
"$K" offload "$LIB" -o "$OUT/lib/lib2tu_2arch.so" --archives "$OUT/lib/.kpack"
"$K" verify-elf "$OUT/lib/lib2tu_2arch.so"
"$K" inspect "$OUT/lib/lib2tu_2arch.so"
"$K" archive list "$OUT/lib/.kpack/lib2tu_2arch_gfx90a.kpack"

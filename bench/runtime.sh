#!/usr/bin/env bash
# Runtime library benchmark (not a test).
#  1. Synthetic: warm kpack_load_code_object for a 100 KB kernel (1 and 2
#     threads, NoOp and zstd), and cold open + first load on a synthesized
#     >= 1 GB archive with its pages evicted from the cache.
#  2. Real: `kpack offload` of Debian's librocsparse.so.0.1 (1.31 GB, 111
#     wrappers x 7 GPU targets, 777 code objects), zstd and none, then a new cache's open + first
#     load of the largest kernel for one device through the C ABI, page
#     cache warm and with the archive's pages evicted.
# Usage: bench/runtime.sh [BIG_MB]   (default 1100)
# Disk: the synthetic part needs ~1.2 GB (the BIG_MB archive, removed after);
#      the librocsparse part ~1.4 GB at a time (the `none` archives), plus
#      1.4 GB if the library has to be fetched: ~3 GB free covers both.
# Env: ROCSPARSE=path to librocsparse.so.0.1 (default /work/corpus/debian/...,
#      then the system copy, else `apt-get download librocsparse0`);
#      BENCH_ARCH (device arch, default gfx90a:sramecc+:xnack- as an MI200 reports);
#      KPACK_BIN (a prebuilt release kpack; default: build it);
#      SKIP_SYNTHETIC=1 / SKIP_ROCSPARSE=1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
work="${BENCH_DIR:-$PWD/bench/out/runtime}"
target="${CARGO_TARGET_DIR:-$PWD/target}"
rm -rf "$work"; mkdir -p "$work"

if [ -z "${SKIP_SYNTHETIC:-}" ]; then
  cargo run -q --release -p kpack-capi --example bench_load -- "$work" "${1:-1100}"
fi

if [ -z "${SKIP_ROCSPARSE:-}" ]; then
  . bench/rocsparse.sh
  src=$(rocsparse_path "$work")
  kpack="${KPACK_BIN:-$target/release/kpack}"
  [ -n "${KPACK_BIN:-}" ] || cargo build -q --release -p kpack-cli --bin kpack
  cargo build -q --release -p kpack-capi --example bench_offloaded
  arch="${BENCH_ARCH:-gfx90a:sramecc+:xnack-}"
  for compression in zstd none; do
    out="$work/rocsparse-$compression/lib/librocsparse.so.0.1"
    mkdir -p "$(dirname "$out")"
    echo "== kpack offload --compression $compression $src ($(du -h "$src" | cut -f1))"
    /usr/bin/time -f "offload: %e s wall, %M KB max RSS" \
      "$kpack" offload "$src" -o "$out" --archives "$(dirname "$out")/.kpack" --compression "$compression" >/dev/null
    du -ch "$(dirname "$out")"/.kpack/* | tail -1
    "$target/release/examples/bench_offloaded" "$out" "$arch" 7
    rm -rf "$work/rocsparse-$compression"
  done
fi
rm -rf "$work"

#!/usr/bin/env bash
# Our runtime against AMD's, side by side (benchmark, not a test).
# Offloads Debian's librocsparse.so.0.1 for gfx90a only (`none`,
# `zstd-per-kernel` at levels 3 and 19, and our `zstd-delta` at level 19,
# which only our runtime reads), then runs bench/amd-runtime/cold.c, the same C driver
# linked against each librocm_kpack: per round a new cache + first
# kpack_load_code_object (page cache warm), then warm loads on that cache.
# AMD's runtime is built from its public sources with g++ and Debian's
# libzstd-dev / libmsgpack-cxx-dev into the bench work dir, never into the
# project; without the sources only ours is measured.
# Env: AMD_KPACK_SRC (a rocm-kpack checkout; default /work/amd-kpack if it
#      exists), ROCSPARSE (see bench/rocsparse.sh), BENCH_ARCH (default
#      gfx90a:sramecc+:xnack-), CO (code object index, default 104: the
#      median-size kernel, 457 KB), ROUNDS (default 301), WARM (default 20),
#      KPACK_BIN (a prebuilt release kpack).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
work="${BENCH_DIR:-$PWD/bench/out/amd-runtime}"
target="${CARGO_TARGET_DIR:-$PWD/target}"
mkdir -p "$work"
arch="${BENCH_ARCH:-gfx90a:sramecc+:xnack-}"
co="${CO:-104}" rounds="${ROUNDS:-301}" warm="${WARM:-20}"
src="${AMD_KPACK_SRC:-}"
[ -n "$src" ] || { [ -d /work/amd-kpack/runtime ] && src=/work/amd-kpack; } || true

. bench/rocsparse.sh
lib=$(rocsparse_path "$work")
kpack="${KPACK_BIN:-$target/release/kpack}"
[ -n "${KPACK_BIN:-}" ] || cargo build -q --release -p kpack-cli --bin kpack
cargo build -q --release -p kpack-capi
# Its soname is librocm_kpack.so.0: give the driver a directory holding it.
mkdir -p "$work/ours"
cp "$target/release/librocm_kpack.so" "$work/ours/librocm_kpack.so.0"
ours="$work/ours/librocm_kpack.so.0"

drivers=("ours:$ours")
if [ -n "$src" ]; then
  # Debian packages for AMD's build, only when they are missing.
  if ! [ -f /usr/include/msgpack.hpp ] || ! [ -f /usr/include/zstd.h ]; then
    apt-get install -y -q libmsgpack-cxx-dev libzstd-dev libboost-dev >&2
  fi
  amd="$work/amd/librocm_kpack.so"
  if ! [ -f "$amd" ]; then
    mkdir -p "$work/amd"
    # AMD's CMake wants msgpack-cxx and zstd config packages; the library
    # itself is seven C++17 files, so build it directly with their flags.
    g++ -std=c++17 -O2 -fPIC -shared -fvisibility=hidden -DROCM_KPACK_EXPORTS \
      -DMSGPACK_NO_BOOST -I "$src/runtime/include" -I "$src/runtime/src" \
      "$src"/runtime/src/*.cpp -lzstd -o "$amd"
  fi
  drivers+=("amd:$amd")
fi

for setting in none:3 zstd:3 zstd:19 zstd-delta:19; do
  compression=${setting%%:*} level=${setting#*:}
  out="$work/rocsparse-$compression-$level/lib/librocsparse.so.0.1"
  if ! [ -f "$out" ]; then
    mkdir -p "$(dirname "$out")"
    "$kpack" offload "$lib" -o "$out" --archives "$(dirname "$out")/.kpack" \
      --compression "$compression" --compression-level "$level" --gpu-targets gfx90a >/dev/null
  fi
  objcopy -O binary --only-section=.rocm_kpack_ref "$out" "$work/marker.bin"
  echo "== $compression level $level archive $(du -ch "$(dirname "$out")"/.kpack/*.kpack | tail -1 | cut -f1), device $arch"
  for d in "${drivers[@]}"; do
    name=${d%%:*} so=${d#*:}
    # AMD's runtime reads KPAK v1 only.
    [ "$compression" = zstd-delta ] && [ "$name" = amd ] && continue
    cc -O2 -o "$work/cold-$name" bench/amd-runtime/cold.c "$so" -Wl,-rpath,"$(dirname "$so")"
    printf '%-5s ' "$name"
    "$work/cold-$name" "$work/marker.bin" "$out" "$arch" "$co" "$rounds" "$warm"
  done
done

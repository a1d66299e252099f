#!/usr/bin/env bash
# `kpack split` benchmark (not a test): one TheRock-style shard holding
# Debian's librocsparse.so.0.1 (1.31 GB, 111 wrappers x 7 GPU targets,
# 777 code objects) plus a
# synthetic rocBLAS/hipBLASLt database tree of ~10 000 files, split with the
# rocblas and hipblaslt handlers. Reports wall time and peak RSS
# (/usr/bin/time -v) for zstd and uncompressed archives; AMD's Python tool
# takes 264 s and 3.9 GB for librocsparse alone on this machine.
# Usage: bench/split.sh            (needs ~3 GB free disk: the 1.3 GB shard,
#      one split output at a time, and 1.4 GB more if librocsparse is fetched;
#      the shard, outputs and any fetched package are removed on exit, the
#      small time/json/verify reports stay in bench/out/split)
# Env: ROCSPARSE=path (default /work/corpus/debian/librocsparse.so.0.1, then
#      the system copy, else `apt-get download librocsparse0` + dpkg-deb -x);
#      KPACK_BIN (a prebuilt release kpack; default: build it);
#      KPACK_PLUGIN_DIR (built handlers; default: scripts/build-plugins.sh);
#      DB_FILES (default 10000); JOBS (default: all cores).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
work="${BENCH_DIR:-$PWD/bench/out/split}"
target="${CARGO_TARGET_DIR:-$PWD/target}"
rm -rf "$work"; mkdir -p "$work"
# The shard copies the 1.3 GB library: never leave it behind, also on failure.
trap 'rm -rf "$work/shard" "$work/out-zstd" "$work/out-none" "$work/deb"' EXIT

. bench/rocsparse.sh
src=$(rocsparse_path "$work")
kpack="${KPACK_BIN:-$target/release/kpack}"
[ -n "${KPACK_BIN:-}" ] || cargo build -q --release -p kpack-cli --bin kpack
if [ -z "${KPACK_PLUGIN_DIR:-}" ]; then
  scripts/build-plugins.sh -q
  export KPACK_PLUGIN_DIR="$target/wasm32-wasip2/plugin"
fi

# The shard: sparse_lib_gfx90X/math-libs/rocSPARSE/stage + a database tree.
shard="$work/shard"; art="$shard/sparse_lib_gfx90X"; pre="math-libs/rocSPARSE/stage"
mkdir -p "$art/$pre/lib"
echo "$pre" > "$art/artifact_manifest.txt"
cp "$src" "$art/$pre/lib/librocsparse.so.0.1"
ln -s librocsparse.so.0.1 "$art/$pre/lib/librocsparse.so.0"
n="${DB_FILES:-10000}"
python3 - "$art/$pre" "$n" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
arches = ["gfx908", "gfx90a", "gfx942", "gfx1030", "gfx1100"]
for i in range(n):
    a = arches[i % len(arches)]
    lib = "rocblas" if i % 2 == 0 else "hipblaslt"
    kind = ["co", "dat", "hsaco", "json"][i % 4]
    name = f"Kernels_{i:05d}_{a}.{kind}" if kind != "json" else f"Meta_{i:05d}.json"
    d = os.path.join(root, "lib", lib, "library")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write((f"{name}\n" * (1 + i % 64)).encode())
PY
echo "shard: $(du -sh "$shard" | cut -f1), $(find "$shard" -type f | wc -l) files" >&2

for comp in zstd none; do
  out="$work/out-$comp"
  /usr/bin/time -v -o "$work/time-$comp.txt" "$kpack" split --batch "$shard" -o "$out" \
    --split-databases rocblas,hipblaslt --compression "$comp" ${JOBS:+-j "$JOBS"} --json > "$work/split-$comp.json"
  wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$work/time-$comp.txt")
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/time-$comp.txt")
  user=$(sed -n 's/.*User time (seconds): //p' "$work/time-$comp.txt")
  size=$(du -sb "$out" | cut -f1)
  echo "split ($comp): wall $wall, user ${user}s, peak RSS $((rss / 1024)) MB, output $((size / 1048576)) MB"
  "$kpack" verify "$out" > "$work/verify-$comp.txt" || { echo "verify failed:"; tail -5 "$work/verify-$comp.txt"; exit 1; }
  echo "  verify: $(tail -1 "$work/verify-$comp.txt")"
  rm -rf "$out"
done

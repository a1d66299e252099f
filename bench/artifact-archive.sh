#!/usr/bin/env bash
# `kpack split` of a TheRock artifact archive (benchmark, not a test): a
# TheRock-shaped artifact `sparse_lib_gfx90X.tar.zst` (manifest first) of
# two prefixes, each holding Debian's librocsparse.so.0.1 (1.31 GB, 111
# bundles; the second a copy under another prefix), the corpus fixtures
# and a synthetic rocBLAS/hipBLASLt kernel database (DB_FILES, default
# 10 000 files), split from the archive to archive outputs, against, in
# the same run:
#   - the directory pipeline it replaces: `tar -I zstd -xf`, `kpack split`
#     of the directory, `tar -I 'zstd -3 -T0' -cf` of each output;
#   - `zstd -dc ART | zstd -3 -T0 > /dev/null`: the decompression and
#     recompression no splitter can avoid.
# Prints one row per command (median wall, peak RSS, ratio) and PASS/FAIL for the
# targets (≤ 0.6× the directory pipeline, ≤ 1.5× the zstd pass, ≤ 512 MB),
# then checks that the outputs are byte-identical at -j1 and -jN and hold
# the files of the directory pipeline (equivalence manifests compared).
# Usage: bench/artifact-archive.sh   (needs ~9 GB free disk, removed on exit)
# Env: ROCSPARSE=path (else bench/rocsparse.sh finds or fetches it);
#      KPACK_BIN (a release kpack; default: build it); DB_FILES; JOBS;
#      REPEAT (rounds, default 3: medians reported); SKIP_J1=1 skips the
#      -j1 run (the slowest).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
work="${BENCH_DIR:-$PWD/bench/out/artifact-archive}"
target="${CARGO_TARGET_DIR:-$PWD/target}"
rm -rf "$work"; mkdir -p "$work"
trap 'rm -rf "$work/art" "$work/x" "$work/dir-out" "$work/ar-out" "$work/ar-out-j1" "$work/ART.tar.zst" "$work/deb"' EXIT

. bench/rocsparse.sh
src=$(rocsparse_path "$work")
kpack="${KPACK_BIN:-$target/release/kpack}"
[ -n "${KPACK_BIN:-}" ] || cargo build -q --release -p kpack-cli --bin kpack

# The artifact directory, then its archive as TheRock writes it.
art="$work/art"
p1="math-libs/rocSPARSE/stage"; p2="math-libs/rocSPARSE-ilp64/stage"; p3="math-libs/BLAS/rocBLAS/stage"
mkdir -p "$art/$p1/lib" "$art/$p2/lib" "$art/$p3/lib"
printf '%s\n' "$p1" "$p2" "$p3" > "$art/artifact_manifest.txt"
cp "$src" "$art/$p1/lib/librocsparse.so.0.1"
cp "$src" "$art/$p2/lib/librocsparse.so.0.1"
ln -s librocsparse.so.0.1 "$art/$p1/lib/librocsparse.so.0"
ln -s librocsparse.so.0.1 "$art/$p2/lib/librocsparse.so.0"
for f in tests/fixtures/corpus/*.so tests/fixtures/clang19/*.so; do
  cp "$f" "$art/$p3/lib/"
done
python3 - "$art/$p3" "${DB_FILES:-10000}" <<'PY'
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
ART="$work/ART.tar.zst"
(cd "$art" && tar --sort=name -cf - artifact_manifest.txt math-libs) | zstd -q -3 -T0 -o "$ART"
rm -rf "$art"
echo "archive: $(stat -c %s "$ART") bytes compressed, $(zstd -dc "$ART" | wc -c) bytes of tar" >&2

row() {  # row TIMEFILE -> sets W (wall s) and R (peak RSS MB)
  local w r
  w=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$1" | awk -F: '{ if (NF == 3) print $1*3600+$2*60+$3; else print $1*60+$2 }')
  r=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$1")
  W=$w; R=$((r / 1024))
}
T() { /usr/bin/time -v -o "$1" "${@:2}"; }
median() { tr ' ' '\n' | grep . | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

# Each command runs REPEAT times (default 3), in rounds, each round in the
# same order; the median is reported (a shared machine's noise). Each
# command starts after `sync`, with no writeback of the last one pending.
rounds=${REPEAT:-3}
zws=""; dws=""; xws=""; sws=""; pws=""; aws=""; ar=0; sr=0
for round in $(seq "$rounds"); do
  rm -rf "$work/dir-out" "$work/ar-out"
  # 1. The unavoidable pass.
  sync
  T "$work/t-zstd" bash -c "zstd -dc '$ART' | zstd -q -3 -T0 > /dev/null"
  row "$work/t-zstd"; zws="$zws $W"; zr=$R
  # 2. The directory pipeline.
  sync
  T "$work/t-x" bash -c "mkdir -p '$work/x' && tar -I zstd -xf '$ART' -C '$work/x'"
  row "$work/t-x"; xw=$W
  T "$work/t-split" "$kpack" split "$work/x" --component sparse_lib -o "$work/dir-out" -q ${JOBS:+-j "$JOBS"} > /dev/null
  row "$work/t-split"; sw=$W; [ "$R" -gt "$sr" ] && sr=$R
  T "$work/t-pack" bash -c "cd '$work/dir-out' && for o in *; do tar -I 'zstd -3 -T0' -cf \"\$o.tar.zst\" -C \"\$o\" .; done"
  row "$work/t-pack"; pw=$W
  xws="$xws $xw"; sws="$sws $sw"; pws="$pws $pw"; dws="$dws $(echo "$xw + $sw + $pw" | bc -l)"
  rm -rf "$work/x"
  # 3. Archive to archives.
  sync
  T "$work/t-ar" "$kpack" split "$ART" --component sparse_lib -o "$work/ar-out" --output-format tar.zst -q ${JOBS:+-j "$JOBS"} > /dev/null
  row "$work/t-ar"; aws="$aws $W"; [ "$R" -gt "$ar" ] && ar=$R
  echo "round $round: zstd pass $(echo "$zws" | awk '{print $NF}') s, directory pipeline $(echo "$dws" | awk '{print $NF}') s, archive split $(echo "$aws" | awk '{print $NF}') s" >&2
done
zw=$(echo "$zws" | median); dw=$(echo "$dws" | median); aw=$(echo "$aws" | median)
echo "| \`zstd -dc ART | zstd -3 -T0 > /dev/null\` | ${zw} s | ${zr} MB | - |"
echo "| directory pipeline: \`tar -I zstd -xf\` + \`kpack split DIR\` + \`tar -I 'zstd -3 -T0' -cf\` each | ${dw} s (medians $(echo "$xws" | median) + $(echo "$sws" | median) + $(echo "$pws" | median)) | ${sr} MB (split) | - |"
r1=$(echo "$aw / $dw" | bc -l); r2=$(echo "$aw / $zw" | bc -l)
ok() { if [ "$(echo "$1 <= $2" | bc -l)" = 1 ]; then echo PASS; else echo FAIL; fi; }
printf '| `kpack split ART.tar.zst --output-format tar.zst` | %s s | %s MB | %.2f× the directory pipeline (%s, ≤ 0.6), %.2f× the zstd pass (%s, ≤ 1.5); RSS %s (≤ 512 MB) |\n' \
  "$aw" "$ar" "$r1" "$(ok "$r1" 0.6)" "$r2" "$(ok "$r2" 1.5)" "$(ok "$ar" 512)"
echo "(medians of $rounds rounds: zstd pass$zws; directory pipeline$dws; archive split$aws)"

# 4. Same files as the directory pipeline; identical at -j1.
python3 - "$work/dir-out" "$work/ar-out" <<'PY'
import hashlib, json, os, sys
dout, aout = sys.argv[1], sys.argv[2]
bad = 0
for o in sorted(n for n in os.listdir(dout) if os.path.isdir(os.path.join(dout, n))):
    files = []
    root = os.path.join(dout, o)
    for dp, dn, fn in os.walk(root):
        for f in fn:
            p = os.path.join(dp, f)
            if os.path.islink(p):
                continue
            h = hashlib.sha256(open(p, "rb").read()).hexdigest()
            files.append({"path": os.path.relpath(p, root), "sha256": h, "size_bytes": os.path.getsize(p)})
    files.sort(key=lambda f: f["path"].split("/"))
    got = json.load(open(os.path.join(aout, o + ".artifact_equivalence.json")))
    same = got["files"] == files
    bad += not same
    print(f"{o}: {len(files)} files, {'same as' if same else 'DIFFERENT FROM'} the directory pipeline")
sys.exit(1 if bad else 0)
PY
rm -rf "$work/dir-out"
if [ -z "${SKIP_J1:-}" ]; then
  T "$work/t-j1" "$kpack" split "$ART" --component sparse_lib -o "$work/ar-out-j1" --output-format tar.zst -q -j 1 > /dev/null
  row "$work/t-j1"
  if diff -r -q "$work/ar-out" "$work/ar-out-j1" > /dev/null; then
    echo "outputs byte-identical at -j1 (${W} s) and -j${JOBS:-$(nproc)}"
  else
    echo "outputs DIFFER between -j1 and -j${JOBS:-$(nproc)}"; exit 1
  fi
fi

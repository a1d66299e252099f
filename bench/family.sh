#!/usr/bin/env bash
# Family archives (issue 15's targets) on JAX's ROCm plugin library
# (`xla_rocm_plugin.so` from PyPI's jax-rocm7-pjrt 0.12.0: 459 MB, 45 CCOB
# bundles, 27 targets), in one run on this machine:
#
#   - bytes per family (gfx9, gfx10, gfx11, gfx12) and in total: per-target
#     `zstd-per-kernel` level-3 archives (what `kpack offload` writes by
#     default), family `zstd-delta` level-3 archives, and per-target
#     `zstd-per-kernel` at `--level 19` for comparison;
#   - with KPACK_FULL (a kpack whose `archive convert` still measured every
#     pair, e.g. main before the sketch-based base choice): the family
#     archives that exhaustive choice writes, to price the faster one;
#   - offload wall time, zstd vs zstd-delta;
#   - warm `kpack_load_code_object` p50 of a delta entry vs the same kernel
#     from its per-target archive, and a cold `kpack_open` of the largest
#     delta archive (bytes the open brings into the page cache).
#
#   usage: bench/family.sh [KPACK]    (default: target/release/kpack, built)
#   env:   JAX_SO=path/to/xla_rocm_plugin.so, else JAX_WHEEL=path/to/the
#          wheel, else pip download (133 MB)
#          KPACK_FULL=path/to/kpack (optional, see above)
#          SKIP_L19=1 skips the level-19 offload (minutes on 2 cores)
#          BENCH_ARCH=device for the load figures (default gfx1101)
#          BENCH_OUT=dir (default bench/out/family; needs ~2 GB free)
# Not a test: its output goes into bench/family-results.md and the README.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${BENCH_OUT:-bench/out/family}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-target}
if [ $# -ge 1 ]; then
  K=$(realpath "$1")
else
  cargo build --release -q -p kpack-cli
  K=$(realpath "$TARGET_DIR/release/kpack")
fi
cargo build --release -q -p kpack-capi --example bench_family
LOADS=$(realpath "$TARGET_DIR/release/examples/bench_family")
command -v /usr/bin/time > /dev/null || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 2; }

# --- input -------------------------------------------------------------------
JAX=${JAX_SO:-$OUT/xla_rocm_plugin.so}
if [ ! -f "$JAX" ]; then
  WHEEL=${JAX_WHEEL:-}
  if [ -z "$WHEEL" ]; then
    echo "fetching jax-rocm7-pjrt 0.12.0 (pip download, 133 MB)" >&2
    python3 -m pip download -q --no-deps jax-rocm7-pjrt==0.12.0 -d "$OUT" >&2
    WHEEL=$(ls "$OUT"/jax_rocm7_pjrt-0.12.0-*.whl | head -1)
  fi
  python3 - "$WHEEL" "$JAX" << 'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    name = next(n for n in z.namelist() if n.endswith("/xla_rocm_plugin.so"))
    with z.open(name) as src, open(sys.argv[2] + ".part", "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
  mv "$JAX.part" "$JAX"
fi

# --- offloads ----------------------------------------------------------------
secs=0
offload() {  # offload NAME FLAGS...: $OUT/NAME/xla_rocm_plugin.so + .kpack/; sets $secs
  local dir=$OUT/$1
  shift
  rm -rf "$dir"
  mkdir -p "$dir"
  /usr/bin/time -f "%e" -o "$OUT/time" "$K" offload "$JAX" -o "$dir/xla_rocm_plugin.so" \
    --archives "$dir/.kpack" "$@" > /dev/null 2> "$OUT/stderr" || {
    cat "$OUT/stderr" >&2
    exit 1
  }
  secs=$(cat "$OUT/time")
}
offload zstd --compression zstd
t_zstd=$secs
offload delta --archive-group family --compression zstd-delta
t_delta=$secs
t_l19=-
if [ -z "${SKIP_L19:-}" ]; then
  offload l19 --compression zstd --level 19
  t_l19=$secs
fi
t_full=-
if [ -n "${KPACK_FULL:-}" ]; then
  rm -rf "$OUT/full"
  mkdir -p "$OUT/full"
  start=$(date +%s.%N)
  for fam in gfx9 gfx10 gfx11 gfx12; do
    files=()
    for f in "$OUT"/zstd/.kpack/xla_rocm_plugin_gfx*.kpack; do
      a=${f##*_}
      a=${a%.kpack}
      case $fam in
        gfx9) [[ $a =~ ^gfx9[0-9a-f]{2}$ ]] ;;
        *) [[ $a =~ ^${fam}[0-9a-f]{2}$ ]] ;;
      esac && files+=("$f")
    done
    [ ${#files[@]} -gt 0 ] || continue
    "$KPACK_FULL" archive convert "${files[@]}" -o "$OUT/full/$fam" --compression zstd-delta > /dev/null
  done
  t_full=$(echo "$(date +%s.%N) - $start" | bc)
fi

# --- table -------------------------------------------------------------------
echo "## Family archives on xla_rocm_plugin.so ($(du -m "$JAX" | cut -f1) MB, $(nproc) cores)"
echo
python3 - "$OUT" << 'PY'
import glob, os, re, sys
out = sys.argv[1]
def family(arch):
    m = re.match(r"gfx(9|1[0-2])", arch)
    return "gfx" + m.group(1) if m else "other"
fams = ["gfx9", "gfx10", "gfx11", "gfx12"]
def per_target(d):
    sizes, arches = {}, {}
    for f in glob.glob(f"{out}/{d}/.kpack/*.kpack"):
        a = f.rsplit("_", 1)[1][:-6]
        sizes[family(a)] = sizes.get(family(a), 0) + os.path.getsize(f)
        arches.setdefault(family(a), []).append(a)
    return sizes, arches
z3, arches = per_target("zstd")
l19, _ = per_target("l19")
delta = {}
for f in glob.glob(f"{out}/delta/.kpack/*.kpack"):
    g = f.rsplit("_", 1)[1][:-6]
    delta[family(g)] = delta.get(family(g), 0) + os.path.getsize(f)
full = {}
for f in glob.glob(f"{out}/full/*/*.kpack"):
    fam = os.path.basename(os.path.dirname(f))
    full[fam] = full.get(fam, 0) + os.path.getsize(f)
mb = lambda b: f"{b / 1e6:.1f}"
print("| family | targets | zstd L3 per target (MB) | zstd L19 per target (MB) | zstd-delta family (MB) | delta / L3 | L19 / L3 | exhaustive choice (MB) |")
print("|---|---|---|---|---|---|---|---|")
rows = [f for f in fams + ["other"] if f in z3]
for f in rows + ["total"]:
    pick = (lambda d: d.get(f, 0)) if f != "total" else (lambda d: sum(d.values()))
    n = len(arches.get(f, [])) if f != "total" else sum(len(v) for v in arches.values())
    a, d, l, x = pick(z3), pick(delta), pick(l19), pick(full)
    print(f"| {f} | {n} | {mb(a)} | {mb(l) if l else '-'} | {mb(d)} | {d / a:.3f} | "
          f"{f'{l / a:.3f}' if l else '-'} | {f'{mb(x)} ({x / a:.3f})' if x else '-'} |")
PY
echo
echo "offload wall time: zstd L3 ${t_zstd} s, zstd-delta (family) ${t_delta} s ($(echo "scale=2; $t_delta / $t_zstd" | bc)x), zstd L19 ${t_l19} s; exhaustive-choice convert of the L3 archives ${t_full} s"
echo
DELTA_ARCHIVE=$(ls -S "$OUT"/delta/.kpack/*.kpack | head -1)
echo '```'
"$LOADS" "$OUT/zstd/xla_rocm_plugin.so" "$OUT/delta/xla_rocm_plugin.so" "${BENCH_ARCH:-gfx1101}" 51
echo '```'
echo "(largest delta archive: $(basename "$DELTA_ARCHIVE"), $(du -m "$DELTA_ARCHIVE" | cut -f1) MB; the cold open above is on the device's family archive)"

#!/usr/bin/env bash
# kpack deb split on a real package nobody built for it: Debian 12's
# librocsparse0 (librocsparse.so.0.1, a 1.3 GB fat library in a ~94 MB
# .deb). Both modes: the default (binaries offloaded, one device package
# per GPU) and --databases-only (rocSPARSE has no kernel database: nothing
# to move, nothing written). Per GPU, the download (host + that GPU's
# device package) against the fat .deb; wall time and peak RSS
# (/usr/bin/time -f '%e %M') against `dpkg-deb -x` + `dpkg-deb -b` of
# the same package (the repack any split must at least do), best of
# $RUNS. `dpkg-deb --info` must read every output.
#
# The input goes to $INPUTS (default /work/bench-inputs; never committed),
# fetched with `apt-get download`. KPACK defaults to
# target/release/kpack, else target/debug/kpack.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
INPUTS=${INPUTS:-/work/bench-inputs}
RUNS=${RUNS:-3}
KPACK=${KPACK:-}
if [[ -z $KPACK ]]; then
  for k in "$here/target/release/kpack" "$here/target/debug/kpack"; do
    [[ -x $k ]] && { KPACK=$k; break; }
  done
fi
[[ -x ${KPACK:-} ]] || { echo "build kpack first (cargo build -p kpack-cli)" >&2; exit 2; }

mkdir -p "$INPUTS"
deb=$(ls "$INPUTS"/librocsparse0_*_amd64.deb 2>/dev/null | head -1 || true)
if [[ -z $deb ]]; then
  (cd "$INPUTS" && apt-get download librocsparse0)
  deb=$(ls "$INPUTS"/librocsparse0_*_amd64.deb | head -1)
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/kpack-native-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "== input: $(basename "$deb") ($(stat -c %s "$deb") bytes); kpack: $KPACK; runs: $RUNS"

# best_of NAME CMD...: run CMD $RUNS times under /usr/bin/time, print
# the best wall time and the peak RSS of that run.
best_of() {
  local name=$1 best="" rss="" t m
  shift
  for _ in $(seq "$RUNS"); do
    /usr/bin/time -f '%e %M' -o "$work/time" bash -c '"$@"' _ "$@" > "$work/$name.out" 2> "$work/$name.err" ||
      { cat "$work/$name.err" >&2; exit 1; }
    read -r t m < <(tail -1 "$work/time")
    if [[ -z $best ]] || awk -v a="$t" -v b="$best" 'BEGIN{exit !(a<b)}'; then
      best=$t rss=$m
    fi
  done
  printf '%-28s %8.2f s  %6d MB peak RSS\n' "$name" "$best" "$((rss / 1024))"
  echo "$best $rss" > "$work/$name.best"
}

repack() {
  rm -rf "$work/x" "$work/re.deb"
  dpkg-deb -R "$1" "$work/x"
  dpkg-deb --root-owner-group -Zxz -z6 -b "$work/x" "$work/re.deb" > /dev/null
}

split_default() {
  rm -rf "$work/split"
  SOURCE_DATE_EPOCH=1700000000 "$KPACK" deb split "$deb" -o "$work/split" --json
}

split_dbonly() {
  rm -rf "$work/dbonly"
  SOURCE_DATE_EPOCH=1700000000 "$KPACK" deb split "$deb" -o "$work/dbonly" \
    --split-databases rocblas,hipblaslt,miopen,aotriton --databases-only --json
}

export work KPACK deb
export -f repack split_default split_dbonly
echo "== wall time and peak RSS (best of $RUNS; the machine is shared)"
best_of "dpkg-deb -R + -b (xz -6)" repack "$deb"
best_of "kpack deb split" split_default
best_of "kpack deb split --db-only" split_dbonly

echo "== outputs (dpkg-deb --info reads each)"
for f in "$work"/split/*.deb; do
  dpkg-deb --info "$f" > /dev/null
  printf '  %-60s %10d bytes\n' "$(basename "$f")" "$(stat -c %s "$f")"
done
echo "== download per GPU (host + its device package) against the fat .deb"
jq -r '.packages[0].per_gpu[] |
  "  \(.gpu): \(.bytes) of \(.fat_bytes) (\(100 * .bytes / .fat_bytes | floor)%)"' \
  "$work/kpack deb split.out"
echo "== --databases-only"
jq -r '.packages[0] | "  split: \(.split); databases: \(.databases)"' \
  "$work/kpack deb split --db-only.out"
[[ ! -e $work/dbonly ]] && echo "  nothing to move for rocSPARSE (no per-GPU database files): nothing written"

read -r rt _ < "$work/dpkg-deb -R + -b (xz -6).best"
read -r kt km < "$work/kpack deb split.best"
awk -v k="$kt" -v r="$rt" -v m="$km" \
  'BEGIN{printf "== kpack deb split: %.2fx the repack'"'"'s time, %d MB peak RSS (goal: <= 1.5x, <= 512 MB)\n", k / r, m / 1024}'

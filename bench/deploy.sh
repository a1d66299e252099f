#!/usr/bin/env bash
# kpack deploy on a real input nobody built for it: Debian 12's
# librocsparse0 (librocsparse.so.0.1, a 1.3 GB fat library) and its HIP
# runtime packages, with a small C program linking it. Deployed for
# gfx1030 with --prune: the report's sizes, `kpack verify --gpu gfx1030`
# on the result, and a deploy for gfx1100 (no code for it in the
# library) refused before anything is written.
#
# Inputs go to $INPUTS (default /work/bench-inputs; never committed),
# fetched with `apt-get download` and unpacked with `dpkg-deb -x`.
# KPACK defaults to target/release/kpack, else target/debug/kpack.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
INPUTS=${INPUTS:-/work/bench-inputs}
KPACK=${KPACK:-}
if [[ -z $KPACK ]]; then
  for k in "$here/target/release/kpack" "$here/target/debug/kpack"; do
    [[ -x $k ]] && { KPACK=$k; break; }
  done
fi
[[ -x ${KPACK:-} ]] || { echo "build kpack first (cargo build -p kpack-cli)" >&2; exit 2; }

mkdir -p "$INPUTS"
root=$INPUTS/root
lib=$root/usr/lib/x86_64-linux-gnu
if [[ ! -f $lib/librocsparse.so.0.1 || ! -e $lib/libamdhip64.so.5 ]]; then
  (cd "$INPUTS" &&
    apt-get download librocsparse0 libamdhip64-5 libhsa-runtime64-1 libhsakmt1 libamd-comgr2 &&
    for d in ./*.deb; do dpkg-deb -x "$d" root; done)
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/kpack-deploy-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
cat > "$work/main.c" <<'C'
/* Links librocsparse and names one of its functions; calls it only when
   asked, since this machine has no GPU. */
#include <stdio.h>
typedef struct _rocsparse_handle *rocsparse_handle;
int rocsparse_create_handle(rocsparse_handle *handle);
int main(int argc, char **argv) {
    (void)argv;
    if (argc > 1) {
        rocsparse_handle h;
        printf("rocsparse_create_handle: %d\n", rocsparse_create_handle(&h));
    }
    return 0;
}
C
cc "$work/main.c" -o "$work/sparse-app" -L"$lib" -l:librocsparse.so.0 \
  -Wl,-rpath-link,"$lib" -Wl,-rpath,"$lib"

echo "== input"
ls -l "$lib/librocsparse.so.0.1"
echo "kpack: $KPACK"

echo "== deploy --gpu gfx1030 --prune"
start=$(date +%s.%N)
"$KPACK" deploy "$work/sparse-app" --gpu gfx1030 --prune --library-path "$lib" \
  -o "$work/dist" --json > "$work/report.json"
end=$(date +%s.%N)
python3 - "$work/report.json" "$start" "$end" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
d = r.get("data", r)
m = d["deploy"]
mib = lambda b: f"{b / 2**20:.1f} MiB"
for f in m["files"]:
    if f["kind"] != "symlink":
        pruned = f" pruned to {','.join(f['pruned_to'])}" if f.get("pruned_to") else ""
        print(f"  {f['path']}: {mib(f['size'])}{pruned}")
for s in m["sizes"]:
    print(f"{s['gpu']}: {mib(s['deployed_bytes'])} deployed, against {mib(s['fat_closure_bytes'])} "
          f"for the fat closure ({100 * s['deployed_bytes'] / s['fat_closure_bytes']:.1f}%)")
print(f"missing: {d['missing']}, layout problems: {len(d['layout_problems'])}")
print(f"wall time: {float(sys.argv[3]) - float(sys.argv[2]):.1f} s")
PY
du -sh "$work/dist"

echo "== kpack verify --gpu gfx1030"
"$KPACK" verify --gpu gfx1030 "$work/dist" | tail -3

echo "== deploy --check"
"$KPACK" deploy --check "$work/dist"

echo "== deploy --gpu gfx1100 (no code for it): refused, nothing written"
if "$KPACK" deploy "$work/sparse-app" --gpu gfx1100 --prune --library-path "$lib" \
  -o "$work/dist-gfx1100" 2> "$work/refused.txt"; then
  echo "FAIL: deploy for gfx1100 was not refused" >&2
  exit 1
fi
cat "$work/refused.txt"
if [[ -e $work/dist-gfx1100 ]]; then
  echo "FAIL: $work/dist-gfx1100 written despite the refusal" >&2
  exit 1
fi
echo "refused; $work/dist-gfx1100 not written"

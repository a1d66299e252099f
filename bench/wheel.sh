#!/usr/bin/env bash
# Benchmark `kpack wheel split` on a real ROCm wheel from PyPI:
# cupy-rocm-5-0 13.3.0 (cp311, 58 MB; three fat extension modules with 9
# GPU targets each, thrust's is 137 MB unpacked). Prints wall time and peak
# RSS of the split, the size of the input, host and each device wheel,
# checks that a second split (one thread) is byte-identical and that pip
# installs the host wheel with one device wheel.
#
#   usage: bench/wheel.sh [WHEEL]   (default: pip download cupy-rocm-5-0==13.3.0)
#
# Not a test: numbers go into docs/src/reference/performance.md by hand.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${BENCH_OUT:-bench/out/wheel}
mkdir -p "$OUT"
command -v /usr/bin/time >/dev/null || { echo "needs GNU time (apt-get install time)" >&2; exit 2; }

[ -x "$OUT/venv/bin/pip" ] || python3 -m venv "$OUT/venv"
PIP="$OUT/venv/bin/pip"
WHEEL=${1:-}
if [ -z "$WHEEL" ]; then
  WHEEL=$(ls "$OUT"/dl/cupy_rocm_5_0-13.3.0-cp311-*.whl 2>/dev/null | head -1 || true)
  if [ -z "$WHEEL" ]; then
    echo "downloading cupy-rocm-5-0 13.3.0 (58 MB)" >&2
    "$PIP" download -q --no-deps --only-binary=:all: --python-version 3.11 --platform manylinux2014_x86_64 \
      cupy-rocm-5-0==13.3.0 -d "$OUT/dl"
    WHEEL=$(ls "$OUT"/dl/cupy_rocm_5_0-13.3.0-cp311-*.whl | head -1)
  fi
fi

cargo build --release -q -p kpack-cli
K=${CARGO_TARGET_DIR:-target}/release/kpack

echo "input: $WHEEL ($(stat -c %s "$WHEEL") bytes)"
cat "$WHEEL" > /dev/null   # warm the page cache
rm -rf "$OUT/a" "$OUT/b"
/usr/bin/time -f "%e %M" -o "$OUT/time" "$K" wheel split "$WHEEL" -o "$OUT/a" --json > "$OUT/report.json"
read -r secs kb < "$OUT/time"
printf 'kpack wheel split: %.2f s, peak RSS %d MB (%d cores)\n' "$secs" "$((kb / 1024))" "$(nproc)"
"$K" wheel split "$WHEEL" -o "$OUT/b" -j 1 > /dev/null 2>&1
python3 - "$OUT/report.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{'wheel':<8}{'bytes':>12}  file")
print(f"{'input':<8}{r['input']['bytes']:>12}  {r['input']['file']}")
print(f"{'host':<8}{r['host']['bytes']:>12}  {r['host']['file']}")
for d in r["devices"]:
    print(f"{d['arch']:<8}{d['bytes']:>12}  {d['file']}")
dev = sum(d["bytes"] for d in r["devices"])
print(f"binaries offloaded: {len(r['binaries'])}, code objects: {sum(b['code_objects'] for b in r['binaries'])}")
print(f"host + all device wheels: {r['host']['bytes'] + dev} bytes; host + one device wheel: "
      f"{r['host']['bytes'] + max(d['bytes'] for d in r['devices'])} bytes")
EOF
if diff -r "$OUT/a" "$OUT/b" > /dev/null; then echo "second split (-j 1): byte-identical"; else echo "second split DIFFERS" >&2; exit 1; fi

# Install the host wheel and the last device wheel into a fresh venv.
rm -rf "$OUT/install"
python3 -m venv "$OUT/install"
dev=$(ls "$OUT"/a/*_device_*.whl | tail -1)
"$OUT/install/bin/pip" install -q --no-index --no-deps "$OUT/a/$(basename "$WHEEL")" "$dev"
echo "pip install host + $(basename "$dev"): ok"
rm -rf "$OUT/a" "$OUT/b" "$OUT/install"

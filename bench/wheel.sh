#!/usr/bin/env bash
# Benchmark `kpack wheel split` on a real ROCm wheel from PyPI:
# cupy-rocm-5-0 13.3.0 (cp311, 58 MB; three fat extension modules with 9
# GPU targets each, thrust's is 137 MB unpacked). Prints wall time and peak
# RSS of the split, the size of the input, host and each device wheel,
# checks that a second split (one thread) is byte-identical and that pip
# installs the host wheel with one device wheel. The split is timed best of
# three (RUNS) beside `gzip -6` of the largest offloaded host library
# alone, also best of three: the split's target is at most 0.6 times that.
#
#   usage: bench/wheel.sh [WHEEL]   (default: pip download cupy-rocm-5-0==13.3.0)
#   e.g.   bench/wheel.sh /work/dl/jax_rocm7_pjrt-0.12.0-py3-none-manylinux_2_27_x86_64.whl
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
RUNS=${RUNS:-3}
best=; peak=0
for _ in $(seq "$RUNS"); do
  rm -rf "$OUT/a"
  /usr/bin/time -f "%e %M" -o "$OUT/time" "$K" wheel split "$WHEEL" -o "$OUT/a" --json > "$OUT/report.json"
  read -r secs kb < "$OUT/time"
  best=$(python3 -c "print(min(float('$secs'), float('${best:-inf}')))")
  [ "$kb" -gt "$peak" ] && peak=$kb
done
printf 'kpack wheel split: best of %d %.2f s, peak RSS %d MB (%d cores)\n' "$RUNS" "$best" "$((peak / 1024))" "$(nproc)"
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
# The largest offloaded host library, alone, through gzip -6.
python3 - "$OUT/report.json" "$OUT/hostlib" <<'EOF'
import json, sys, zipfile
r = json.load(open(sys.argv[1]))
z = zipfile.ZipFile(r["host"]["path"])
name = max((b["path"] for b in r["binaries"]), key=lambda p: z.getinfo(p).file_size)
with z.open(name) as src, open(sys.argv[2], "wb") as dst:
    while chunk := src.read(1 << 20):
        dst.write(chunk)
print(f"largest offloaded host library: {name}")
EOF
gz=
for _ in $(seq "$RUNS"); do
  /usr/bin/time -f "%e" -o "$OUT/time" gzip -6 -c "$OUT/hostlib" > /dev/null
  gz=$(python3 -c "print(min(float('$(cat "$OUT/time")'), float('${gz:-inf}')))")
done
python3 - "$best" "$gz" "$(stat -c %s "$OUT/hostlib")" "$peak" <<'EOF'
import sys
split, gz, size, kb = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
ratio = split / gz
print(f"gzip -6 of it alone ({size / 2**20:.0f} MiB): best {gz:.2f} s; split / gzip = {ratio:.2f} "
      f"(target <= 0.60: {'met' if ratio <= 0.6 else 'NOT met'}); peak RSS {kb // 1024} MB "
      f"(target <= 300: {'met' if kb // 1024 <= 300 else 'NOT met'})")
EOF
rm -f "$OUT/hostlib"
if diff -r "$OUT/a" "$OUT/b" > /dev/null; then echo "second split (-j 1): byte-identical"; else echo "second split DIFFERS" >&2; exit 1; fi

# Install the host wheel and the last device wheel into a fresh venv.
rm -rf "$OUT/install"
python3 -m venv "$OUT/install"
dev=$(ls "$OUT"/a/*_device_*.whl | tail -1)
"$OUT/install/bin/pip" install -q --no-index --no-deps "$OUT/a/$(basename "$WHEEL")" "$dev"
echo "pip install host + $(basename "$dev"): ok"
rm -rf "$OUT/a" "$OUT/b" "$OUT/install"

#!/usr/bin/env bash
# Run offload, split and wheel split of a kpack binary on the committed
# fixtures and print one "sha256  path" line per output file, sorted.
# Refactors must not change this listing: run it with the binary from before
# and after a change and diff the two (the structure work was checked so).
#
#   scripts/output-digest.sh [KPACK_BIN] > digest.txt
#
# KPACK_BIN defaults to target/debug/kpack; split runs the rocblas handler
# (embedded in the binary; KPACK_PLUGIN_DIR, if set, is passed on).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
kpack=$(realpath "${1:-${CARGO_TARGET_DIR:-target}/debug/kpack}")
fix=$root/tests/fixtures/corpus
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export SOURCE_DATE_EPOCH=1700000000

# 1. offload of every fixture with device code, both schemes.
for f in "$fix"/lib*.so "$fix"/exe_*; do
  [ -f "$f" ] || continue
  b=$(basename "$f")
  for scheme in zstd none; do
    mkdir -p "$work/offload-$scheme"
    "$kpack" offload "$f" -o "$work/offload-$scheme/$b" \
      --archives "$work/offload-$scheme/$b.archives" --compression "$scheme" >/dev/null
  done
done

# 2. split of a small TheRock-style artifact (two binaries, a header, a link).
art=$work/in/blas_lib_gfx90a
mkdir -p "$art/stage/lib" "$art/stage/include" "$art/stage/lib/rocblas/library"
printf 'stage\n' >"$art/artifact_manifest.txt"
cp "$fix/libaxpy_2arch.so" "$art/stage/lib/librocblas.so.4.0"
ln -s librocblas.so.4.0 "$art/stage/lib/librocblas.so.4"
cp "$fix/exe_2tu_wide" "$art/stage/lib/rocblas-bench"
printf '// header\n' >"$art/stage/include/rocblas.h"
printf 'tensile gfx90a' >"$art/stage/lib/rocblas/library/TensileLibrary_gfx90a.co"
printf 'generic index' >"$art/stage/lib/rocblas/library/TensileLibrary.dat"
"$kpack" split "$art" -o "$work/split" --split-databases rocblas >/dev/null

# 3. wheel split of a fat wheel holding two fixture libraries.
python3 - "$work/wheel-in" "$fix" <<'PY'
import base64, hashlib, os, sys, zipfile
out, fix = sys.argv[1], sys.argv[2]
os.makedirs(out)
files = {
    "fatpkg/__init__.py": b"",
    "fatpkg/lib/libaxpy.so": open(os.path.join(fix, "libaxpy_2arch.so"), "rb").read(),
    "fatpkg/lib/lib2tu.so": open(os.path.join(fix, "lib2tu_2arch.so"), "rb").read(),
    "fatpkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: fatpkg\nVersion: 1.0\n",
    "fatpkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: digest\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n",
}
record = []
for name, data in files.items():
    h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record.append(f"{name},sha256={h},{len(data)}")
record.append("fatpkg-1.0.dist-info/RECORD,,")
files["fatpkg-1.0.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
with zipfile.ZipFile(os.path.join(out, "fatpkg-1.0-py3-none-linux_x86_64.whl"), "w", zipfile.ZIP_DEFLATED) as z:
    for name, data in files.items():
        info = zipfile.ZipInfo(name, (2024, 1, 1, 0, 0, 0))
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        z.writestr(info, data)
PY
"$kpack" wheel split "$work/wheel-in/fatpkg-1.0-py3-none-linux_x86_64.whl" -o "$work/wheels" >/dev/null

cd "$work"
find offload-zstd offload-none split wheels -type f -print0 | sort -z | xargs -0 sha256sum
find split -type l -printf '%p -> %l\n' | sort

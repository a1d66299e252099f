#!/usr/bin/env bash
# Make the directory the guide's examples run in, from committed fixtures
# only (no compiler, no network, no Python):
#
#   DIR/tests/fixtures/                      a copy of the repository's fixtures
#   DIR/artifacts/blas_lib_gfx110X-dgpu/     a TheRock-style build artifact:
#       artifact_manifest.txt                  lists `stage`
#       stage/lib/librocblas.so.4              tests/fixtures/clang19/libaxpy_plain.so
#                                              (gfx942, gfx1100, gfx1201)
#       stage/lib/rocblas/library/TensileLibrary_<gfx>.dat
#                                              a rocBLAS database file per target
#   DIR/fatpkg-1.0-py3-none-linux_x86_64.whl a fat wheel (fatpkg/lib/libaxpy.so is
#                                              the same library, plus the same
#                                              database files), committed as
#                                              tests/fixtures/examples/
#   DIR/llama/bin/llama-cli                  a llama.cpp-style application (deploy
#                                              guide): corpus/exe_hostonly needing
#                                              libggml-hip.so (patchelf --add-needed)
#   DIR/rocm-fat/lib/libggml-hip.so          clang19/libaxpy_plain.so, fat
#   DIR/rocm/lib/libamdhip64.so.5            stand-ins for the HIP and kpack
#   DIR/rocm/lib/librocm_kpack.so              runtimes: corpus/libhostonly.so
#                                              under those names
#   DIR/librocblas0_4.3.0-1_amd64.deb        a Debian-style package of the same
#                                              library and database files
#                                              (native packages guide), built
#                                              with dpkg-deb
#
# Usage: scripts/make-examples.sh [DIR]     (default: ./kpack-examples)
# Then `cd DIR` and run the guide's commands as they are shown.
# The documentation test (cargo test -p kpack-cli --test docs) runs every
# example of the guide in a directory this script made.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${1:-kpack-examples}"
[ $# -le 1 ] || { echo "usage: $0 [DIR]" >&2; exit 2; }
fixtures="$repo/tests/fixtures"
lib="$fixtures/clang19/libaxpy_plain.so"
wheel="$fixtures/examples/fatpkg-1.0-py3-none-linux_x86_64.whl"
for f in "$lib" "$wheel"; do
  [ -f "$f" ] || { echo "$0: $f is missing (is this a complete kpack checkout?)" >&2; exit 2; }
done
if [ -e "$dir" ] && [ -n "$(ls -A "$dir" 2>/dev/null)" ]; then
  echo "$0: $dir exists and is not empty; remove it or name another directory" >&2
  exit 2
fi

mkdir -p "$dir/tests"
cp -R "$fixtures" "$dir/tests/fixtures"

art="$dir/artifacts/blas_lib_gfx110X-dgpu"
mkdir -p "$art/stage/lib/rocblas/library"
printf 'stage\n' >"$art/artifact_manifest.txt"
cat "$lib" >"$art/stage/lib/librocblas.so.4"
for t in gfx942 gfx1100 gfx1201; do
  printf '%s solutions' "$t" >"$art/stage/lib/rocblas/library/TensileLibrary_$t.dat"
done

cat "$wheel" >"$dir/fatpkg-1.0-py3-none-linux_x86_64.whl"

mkdir -p "$dir/llama/bin" "$dir/rocm-fat/lib" "$dir/rocm/lib"
cat "$fixtures/corpus/exe_hostonly" >"$dir/llama/bin/llama-cli"
chmod +x "$dir/llama/bin/llama-cli"
patchelf --add-needed libggml-hip.so "$dir/llama/bin/llama-cli"
cat "$lib" >"$dir/rocm-fat/lib/libggml-hip.so"
patchelf --set-soname libggml-hip.so "$dir/rocm-fat/lib/libggml-hip.so"
for n in libamdhip64.so.5 librocm_kpack.so; do
  cat "$fixtures/corpus/libhostonly.so" >"$dir/rocm/lib/$n"
  patchelf --set-soname "$n" "$dir/rocm/lib/$n"
done
# A Debian package as Debian lays rocBLAS out, built reproducibly.
pkg="$dir/.deb-root"
libdir="$pkg/usr/lib/x86_64-linux-gnu"
mkdir -p "$pkg/DEBIAN" "$libdir/rocblas/4.3.0/library" "$pkg/usr/share/doc/librocblas0"
cat "$lib" >"$libdir/librocblas.so.4.3.0"
ln -s librocblas.so.4.3.0 "$libdir/librocblas.so.4"
for t in gfx942 gfx1100 gfx1201; do
  printf '%s solutions' "$t" >"$libdir/rocblas/4.3.0/library/TensileLibrary_$t.dat"
done
printf 'Copyright: the kpack examples\nLicense: MIT\n' >"$pkg/usr/share/doc/librocblas0/copyright"
cat >"$pkg/DEBIAN/control" <<'CONTROL'
Package: librocblas0
Version: 4.3.0-1
Architecture: amd64
Maintainer: kpack examples <examples@kpack.invalid>
Section: libs
Priority: optional
Depends: libc6
Description: rocBLAS, an example of a fat ROCm library package
 The guide's example: one library with code for gfx942, gfx1100 and
 gfx1201, and a Tensile database file per GPU.
CONTROL
find "$pkg" -exec touch -h -d @1767225600 {} +
SOURCE_DATE_EPOCH=1767225600 dpkg-deb --root-owner-group -Zxz -z6 --build "$pkg" \
  "$dir/librocblas0_4.3.0-1_amd64.deb" >/dev/null
rm -rf "$pkg"

echo "made the guide's examples in $dir: cd $dir, then run the commands as the guide shows them" >&2

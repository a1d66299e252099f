#!/usr/bin/env bash
# The release wheels, built with the test command's faster profile
# (`scripts/build-wheels.sh --profile ci`, which checks them with
# auditwheel, the DLL imports and twine), then run where they would be
# installed:
#   - x86_64: the wheel's `kpack` offloads and verifies an x86_64 fixture;
#   - aarch64, under qemu-aarch64 (Debian's qemu-user, with the
#     libc6-arm64-cross loader): offloads and verifies the aarch64
#     fixtures (the same bytes as the x86_64 binary writes); the embedded
#     handlers classify and split a rocBLAS tree;
#   - Windows, under wine64: `kpack.exe` offloads an ELF and a PE fixture
#     (the same bytes as on Linux) and splits a TheRock artifact with
#     `--split-databases rocblas`.
# The C libraries' install trees are checked for their files.
#
# usage: scripts/test-wheels.sh [OUTDIR]   (default $CARGO_TARGET_DIR/wheels-ci)
#   KPACK_WHEEL_TARGETS: the triples to build and run (default all three;
#   x86_64-unknown-linux-gnu is always among them, the others' reference).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
target_dir=${CARGO_TARGET_DIR:-$root/target}
case "$target_dir" in /*) ;; *) target_dir="$root/$target_dir" ;; esac
out=${1:-$target_dir/wheels-ci}
case "$out" in /*) ;; *) out="$root/$out" ;; esac
fixtures=$root/tests/fixtures

export KPACK_WHEEL_TARGETS=${KPACK_WHEEL_TARGETS:-x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu x86_64-pc-windows-gnu}
has() { case " $KPACK_WHEEL_TARGETS " in *" $1 "*) return 0 ;; esac; return 1; }
has x86_64-unknown-linux-gnu || { echo "$0: KPACK_WHEEL_TARGETS must include x86_64-unknown-linux-gnu" >&2; exit 2; }
# The aarch64 wheel runs under qemu-user with Debian's aarch64 loader and
# libc; without them its run is skipped, and said so.
if has aarch64-unknown-linux-gnu && command -v apt-get >/dev/null 2>&1 &&
  { ! command -v qemu-aarch64 >/dev/null 2>&1 || [ ! -e /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1 ]; }; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
      --no-install-recommends qemu-user libc6-arm64-cross libgcc-s1-arm64-cross >/dev/null; } ||
    echo "cannot install qemu-user and libc6-arm64-cross: the aarch64 wheel will not be run" >&2
fi

scripts/build-wheels.sh --profile ci "$out"
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# extract WHEEL MEMBER-SUFFIX DEST: the wheel's binary.
extract() {
  python3 - "$@" <<'EOF'
import os, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
(name,) = [n for n in z.namelist() if n.endswith(sys.argv[2])]
with open(sys.argv[3], "wb") as f:
    f.write(z.read(name))
os.chmod(sys.argv[3], 0o755)
EOF
}

# A TheRock artifact with a fat rocBLAS library and its gfx90a database
# (as python/tests/test_api.py builds it).
rocblas=math-libs/BLAS/rocBLAS/stage
artifact() {
  local a=$1/blas_lib_gfx90a lib
  lib=$a/$rocblas/lib
  mkdir -p "$lib/rocblas/library"
  echo "$rocblas" >"$a/artifact_manifest.txt"
  cp "$fixtures/corpus/libaxpy_2arch.so" "$lib/librocblas.so.4"
  printf 'tensile code gfx90a' >"$lib/rocblas/library/TensileLibrary_gfx90a.co"
  printf 'tensile data' >"$lib/rocblas/library/TensileLibrary_Type_gfx90a.dat"
  printf 'generic tensile index' >"$lib/rocblas/library/TensileLibrary.dat"
}

# expect FILE TEXT: FILE (a command's output) contains TEXT.
expect() {
  grep -qF -- "$2" "$1" || { echo "$0: expected '$2' in:" >&2; cat "$1" >&2; exit 1; }
}

# split_rocblas RUN...: the artifact split with the embedded rocBLAS handler.
split_rocblas() {
  rm -rf in split
  artifact in
  "$@" split -o split --split-databases=rocblas --json in/blas_lib_gfx90a >split.json
  expect split.json '"rocblas"'
  test -f split/blas_lib_gfx90a/$rocblas/lib/rocblas/library/TensileLibrary_gfx90a.co ||
    { echo "$0: the rocBLAS database was not split" >&2; exit 1; }
}

# --- x86_64 ---
cd "$work"
mkdir -p x86 a64 nat-a64 win nat-win
extract "$out/kpack_cli-$version-py3-none-manylinux_2_28_x86_64.whl" /scripts/kpack kpack-x86_64
./kpack-x86_64 offload "$fixtures/corpus/libaxpy_2arch.so" -o x86/lib.so --archives x86/kpack -q
./kpack-x86_64 verify-elf x86/lib.so >/dev/null
echo "x86_64 wheel: offload, verify-elf: ok" >&2

# --- aarch64 under qemu ---
qemu=$(command -v qemu-aarch64-static || command -v qemu-aarch64 || true)
if ! has aarch64-unknown-linux-gnu; then
  echo "not built: the aarch64 wheel (KPACK_WHEEL_TARGETS)" >&2
elif [ -z "$qemu" ] || [ ! -e /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1 ]; then
  echo "SKIPPED: the aarch64 wheel's run (needs Debian's qemu-user and libc6-arm64-cross)" >&2
else
  extract "$out/kpack_cli-$version-py3-none-manylinux_2_28_aarch64.whl" /scripts/kpack kpack-aarch64
  a64() { QEMU_LD_PREFIX=/usr/aarch64-linux-gnu "$qemu" ./kpack-aarch64 "$@"; }
  # The same outputs as the x86_64 binary writes from the same inputs.
  for f in exe_axpy_aarch64 libaxpy_aarch64_ccob.so; do
    a64 offload "$fixtures/clang19/$f" -o "a64/$f" --archives a64/kpack -q
    a64 verify-elf "a64/$f" >/dev/null
    ./kpack-x86_64 offload "$fixtures/clang19/$f" -o "nat-a64/$f" --archives nat-a64/kpack -q
  done
  ls a64/kpack/*.kpack >/dev/null
  diff -r nat-a64 a64 >/dev/null || { echo "$0: aarch64 kpack's outputs differ from x86_64's" >&2; exit 1; }
  a64 plugins list >plugins.txt
  expect plugins.txt rocblas
  artifact classify
  a64 plugins classify --split-databases rocblas classify >classify.txt
  expect classify.txt TensileLibrary_gfx90a.co
  split_rocblas a64
  echo "aarch64 wheel under $(basename "$qemu"): offload, verify-elf, plugins, split: ok" >&2
fi

# --- Windows under wine ---
wine=/usr/lib/wine/wine64
[ -x "$wine" ] || wine=$(command -v wine64 || true)
if ! has x86_64-pc-windows-gnu; then
  echo "not built: the Windows wheel (KPACK_WHEEL_TARGETS)" >&2
elif [ -z "$wine" ]; then
  echo "SKIPPED: the Windows wheel's run (needs Debian's wine64)" >&2
else
  extract "$out/kpack_cli-$version-py3-none-win_amd64.whl" /scripts/kpack.exe kpack.exe
  # Rust's std imports ProcessPrng from bcryptprimitives.dll, which wine
  # 8.0 lacks: the C ABI test's stand-in goes beside the program.
  x86_64-w64-mingw32-gcc -std=c11 -shared "$root/host/capi/tests/c/wine_bcryptprimitives.c" \
    -o bcryptprimitives.dll -ladvapi32
  cp "$fixtures/corpus/libaxpy_2arch.so" lib.so
  cp "$fixtures/pe/dll_1tu.dll" one.dll
  # Wine itself (not kpack.exe: a Windows crash is an exception code, not
  # a signal) has been seen to die of SIGSEGV once in many runs of the
  # same command; such a death is retried once, and said so.
  win() {
    local rc=0
    wine_run "$@" || rc=$?
    if [ "$rc" -ge 128 ]; then
      echo "$0: wine died of signal $((rc - 128)) running kpack.exe $*; running it once more" >&2
      rc=0
      wine_run "$@" || rc=$?
    fi
    return "$rc"
  }
  wine_run() {
    WINEPREFIX="$target_dir/wineprefix" WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml=" DISPLAY= \
      "$wine" ./kpack.exe "$@"
  }
  # The same outputs as the Linux binary writes from the same inputs.
  for f in lib.so one.dll; do
    # --force: a run retried after wine died may find its own outputs.
    win offload "$f" -o "win/$f" --archives win/kpack -q --force
    ./kpack-x86_64 offload "$f" -o "nat-win/$f" --archives nat-win/kpack -q
  done
  ls win/kpack/*.kpack >/dev/null
  diff -r nat-win win >/dev/null || { echo "$0: kpack.exe's outputs differ from Linux kpack's" >&2; exit 1; }
  ./kpack-x86_64 verify-elf win/lib.so >/dev/null
  split_rocblas win
  echo "Windows wheel under wine64: offload (ELF, PE), split: ok" >&2
fi

# --- the C libraries ---
for t in x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu; do
  has "$t" || continue
  d=$out/rocm-kpack-$version-$t
  for f in include/rocm_kpack/kpack.h lib/librocm_kpack.so.0 lib/librocm_kpack.a \
    lib/pkgconfig/rocm-kpack.pc lib/cmake/rocm-kpack/rocm-kpackConfig.cmake; do
    test -e "$d/$f" || { echo "$0: $d/$f missing" >&2; exit 1; }
  done
done
if has aarch64-unknown-linux-gnu; then
  file -L "$out/rocm-kpack-$version-aarch64-unknown-linux-gnu/lib/librocm_kpack.so.0" | grep -q aarch64
fi
if has x86_64-pc-windows-gnu; then
  d=$out/rocm-kpack-$version-x86_64-pc-windows-gnu
  for f in include/rocm_kpack/kpack.h bin/rocm_kpack.dll lib/rocm_kpack.lib lib/librocm_kpack.dll.a \
    lib/cmake/rocm-kpack/rocm-kpackConfig.cmake; do
    test -e "$d/$f" || { echo "$0: $d/$f missing" >&2; exit 1; }
  done
  llvm-readobj-19 --coff-exports "$d/bin/rocm_kpack.dll" | grep -q 'Name: kpack_open$'
fi
echo "C libraries ($KPACK_WHEEL_TARGETS): ok" >&2

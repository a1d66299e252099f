#!/usr/bin/env bash
# Build kpack's release artifacts for every machine TheRock packages on,
# checked, into OUTDIR:
#
#   kpack_cli-V-py3-none-manylinux_2_28_x86_64.whl   Linux x86_64, glibc >= 2.28
#   kpack_cli-V-py3-none-manylinux_2_28_aarch64.whl  Linux aarch64, glibc >= 2.28
#   kpack_cli-V-py3-none-win_amd64.whl               Windows x86_64
#   rocm-kpack-V-<triple>/                            librocm_kpack, installed as
#                                                     scripts/install-runtime.sh does
#
# Each wheel holds the `kpack` binary (handlers embedded) and the `kpack`
# Python package (pyproject.toml, maturin). Linux builds link with zig
# (`ziglang` from PyPI) against glibc 2.28's symbols: Debian 12's own
# toolchain would tie the binary to glibc 2.34+. Windows builds use
# Debian's mingw-w64, linked statically (no MinGW DLL). Each target is
# built once, the wheel's binary and the C library from one cargo build.
#
# Checks on what was built: `auditwheel show` (Linux: nothing outside the
# manylinux_2_28 policy), the DLLs the Windows binaries import (system
# DLLs only), `twine check --strict`. Running the binaries is
# scripts/test-wheels.sh's job.
#
# usage: scripts/build-wheels.sh [--profile release|ci] OUTDIR
#   --profile ci: the test command's faster build (Cargo.toml [profile.ci]);
#   the default is the release build. Everything is built under
#   $CARGO_TARGET_DIR (default target/) and moved into OUTDIR only when all
#   of it built and passed: OUTDIR never holds half-written files.
#   KPACK_WHEEL_TARGETS: a space-separated subset of the three triples.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

usage() { echo "usage: $0 [--profile release|ci] OUTDIR" >&2; exit 2; }
profile=release
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) [ $# -ge 2 ] || usage; profile="$2"; shift 2 ;;
    -h|--help) usage ;;
    -*) echo "$0: unknown option $1" >&2; usage ;;
    *) break ;;
  esac
done
[ $# -eq 1 ] || usage
case "$profile" in release|ci) ;; *) echo "$0: --profile must be release or ci" >&2; exit 2 ;; esac
outdir=$1
case "$outdir" in /*) ;; *) outdir="$PWD/$outdir" ;; esac
target_dir=${CARGO_TARGET_DIR:-$root/target}
case "$target_dir" in /*) ;; *) target_dir="$root/$target_dir" ;; esac
export CARGO_TARGET_DIR=$target_dir
targets=${KPACK_WHEEL_TARGETS:-x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu x86_64-pc-windows-gnu}
maturin_version=1.9.6
ziglang_version=0.13.0
twine_version=6.2.0

# What is missing, each with the Debian package or command that adds it.
missing=()
need() { command -v "$1" >/dev/null 2>&1 || missing+=("$1 (Debian: apt-get install $2)"); }
need python3 python3
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=("python3 venv (Debian: apt-get install python3-venv)")
need cargo "rustup: https://rustup.rs"
for t in $targets; do
  case "$t" in
    *-linux-gnu) [ "$t" = "$(rustc -vV | sed -n 's/^host: //p')" ] || { need ld.lld-19 lld-19; need llvm-objcopy-19 llvm-19; need llvm-ar-19 llvm-19; } ;;
    *-windows-gnu)
      need x86_64-w64-mingw32-gcc gcc-mingw-w64-x86-64
      need x86_64-w64-mingw32-objdump binutils-mingw-w64-x86-64
      need llvm-dlltool-19 llvm-19 ;;
    *) echo "$0: unsupported target $t" >&2; exit 2 ;;
  esac
  sysroot=$(rustc --print sysroot)
  [ -d "$sysroot/lib/rustlib/$t" ] || missing+=("Rust's standard library for $t (run: rustup target add $t)")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "$0: cannot build the wheels; missing:" >&2
  printf '  %s\n' "${missing[@]}" >&2
  exit 2
fi

# maturin, zig and twine from PyPI, in a venv under the target directory
# (made again when its tools do not run: a venv moved with its target
# directory keeps stale interpreter paths).
venv=$target_dir/python/build-wheels-venv
if ! "$venv/bin/maturin" --version >/dev/null 2>&1 || ! "$venv/bin/twine" --version >/dev/null 2>&1 \
  || ! "$venv/bin/python" -c 'import ziglang' 2>/dev/null; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check \
    "maturin==$maturin_version" "ziglang==$ziglang_version" "twine==$twine_version"
fi
auditwheel_bin=$(scripts/auditwheel-venv.sh)
export PATH="$venv/bin:$PATH"   # `maturin zig cc` finds zig through the venv's python

# Linker and C compiler for a Linux target: `maturin zig cc` (zig, with
# the arguments rustc passes that zig does not take filtered out) for
# glibc 2.28. Written once under the target directory, so the C library's
# build below and any later run see the same environment as the wheel's
# and reuse its artifacts.
zig_env() {
  local t=$1 zt dir var
  zt="${t%%-*}-linux-gnu.2.28"
  dir=$target_dir/zig-wrappers
  mkdir -p "$dir"
  for tool in cc ar; do
    local w="$dir/$zt-$tool" body
    if [ "$tool" = cc ]; then
      body="exec \"$venv/bin/maturin\" zig cc -- -target $zt \"\$@\""
    else
      body="exec \"$venv/bin/maturin\" zig ar -- \"\$@\""
    fi
    printf '#!/bin/sh\n%s\n' "$body" >"$w.tmp"
    chmod +x "$w.tmp"
    mv -f "$w.tmp" "$w"
  done
  var=$(echo "$t" | tr '[:lower:]-' '[:upper:]_')
  export "CARGO_TARGET_${var}_LINKER=$dir/$zt-cc"
  export "CC_${t//-/_}=$dir/$zt-cc" "AR_${t//-/_}=$dir/$zt-ar"
}

stage=$(mktemp -d "$target_dir/build-wheels.XXXXXX")
trap 'rm -rf "$stage"' EXIT
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)

for t in $targets; do
  echo "== $t ($profile)" >&2
  (
    maturin_args=(build --profile "$profile" --locked --strip --target "$t" --out "$stage/wheels")
    case "$t" in
      *-linux-gnu) zig_env "$t"; maturin_args+=(--compatibility manylinux_2_28 --auditwheel check) ;;
      # Rust links MinGW's libgcc and winpthreads statically with crt-static.
      *-windows-gnu) export "CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUSTFLAGS=-C target-feature=+crt-static" ;;
    esac
    maturin "${maturin_args[@]}" >&2
    # -p kpack-cli too: its features, so the library reuses what maturin
    # built (see scripts/install-runtime.sh); --lib builds the library only.
    cargo build --profile "$profile" --locked --target "$t" -p kpack-cli -p kpack-capi --lib >&2
    scripts/install-runtime.sh --target "$t" --from "$target_dir/$t/$profile" \
      "$stage/rocm-kpack-$version-$t" 2>/dev/null
  )
done

# System DLLs only: what every Windows has (the API sets included).
system_dll='^(api-ms-win-[a-z0-9-]+|kernel32|kernelbase|ntdll|msvcrt|ucrtbase|advapi32|bcrypt|bcryptprimitives|crypt32|ncrypt|secur32|ws2_32|userenv|shell32|ole32|oleaut32|user32|gdi32|iphlpapi|psapi|dbghelp|synchronization|rpcrt4|shlwapi|version)\.dll$'
check_dlls() {
  local bad
  bad=$(x86_64-w64-mingw32-objdump -p "$1" | sed -n 's/^[[:space:]]*DLL Name: //p' |
    tr '[:upper:]' '[:lower:]' | grep -Ev "$system_dll" || true)
  [ -z "$bad" ] || { echo "$0: $2 imports non-system DLLs: $bad" >&2; exit 1; }
}

for w in "$stage"/wheels/*.whl; do
  name=$(basename "$w")
  case "$name" in
    *-manylinux_2_28_*.whl)
      # auditwheel: the binary needs nothing beyond manylinux_2_28.
      report=$("$auditwheel_bin/auditwheel" show "$w" 2>&1) ||
        { echo "$report" >&2; echo "$0: auditwheel show $name failed" >&2; exit 1; }
      glibc=$(printf '%s\n' "$report" | grep -o 'manylinux_2_[0-9]*' | head -n1 | sed 's/manylinux_2_//')
      [ -n "$glibc" ] && [ "$glibc" -le 28 ] ||
        { echo "$report" >&2; echo "$0: $name is not manylinux_2_28 compliant" >&2; exit 1; } ;;
    *-win_amd64.whl)
      python3 - "$w" "$stage/kpack.exe" <<'EOF'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
(exe,) = [n for n in z.namelist() if n.endswith("/scripts/kpack.exe")]
open(sys.argv[2], "wb").write(z.read(exe))
EOF
      check_dlls "$stage/kpack.exe" "$name's kpack.exe"
      rm "$stage/kpack.exe" ;;
    *) echo "$0: unexpected wheel $name" >&2; exit 1 ;;
  esac
  echo "checked $name" >&2
done
for d in "$stage"/rocm-kpack-*-windows-gnu; do
  [ -e "$d" ] || continue
  check_dlls "$d/bin/rocm_kpack.dll" "$(basename "$d")/bin/rocm_kpack.dll"
done
twine check --strict "$stage"/wheels/*.whl >&2

# Into OUTDIR: each wheel and library tree renamed into place.
mkdir -p "$outdir"
for f in "$stage"/wheels/*.whl "$stage"/rocm-kpack-*; do
  dest="$outdir/$(basename "$f")"
  tmp=$(mktemp -d "$outdir/.build-wheels.XXXXXX")
  mv "$f" "$tmp/"
  rm -rf "$dest"
  mv -T "$tmp/$(basename "$f")" "$dest"
  rmdir "$tmp"
  echo "$dest"
done

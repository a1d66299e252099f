#!/usr/bin/env bash
# Install librocm_kpack the way distributions and CMake users expect it:
#
#   PREFIX/include/rocm_kpack/kpack.h
#   PREFIX/lib/librocm_kpack.so.X.Y.Z, .so.0 -> it (the SONAME), .so -> .so.0
#                                       stripped, with a .gnu_debuglink to
#   PREFIX/lib/.debug/librocm_kpack.so.X.Y.Z.debug  its debug info (gdb and
#                                       perf find it there by themselves)
#   PREFIX/lib/librocm_kpack.a          only kpack_* global (see below), no
#                                       debug info
#   PREFIX/lib/pkgconfig/rocm-kpack.pc
#   PREFIX/lib/cmake/rocm-kpack/rocm-kpackConfig.cmake (+ ConfigVersion)
#   PREFIX/share/doc/rocm-kpack/THIRD-PARTY-NOTICES.md, LICENSE
#
# Stripping as distributions do (debhelper's dh_strip, rpm's
# find-debuginfo): `objcopy --only-keep-debug` copies the debug sections
# out, `--strip-unneeded --add-gnu-debuglink` strips the library and
# records the debug file's name and CRC. The static library keeps its
# symbol table (the linker needs it) but not its debug info.
#
# Usage: scripts/install-runtime.sh [--from DIR] [--target TRIPLE] PREFIX
#   Without --from, builds the library (a no-op when it is up to date, also
#   right after `cargo build --release -p kpack-cli`, see below) and
#   installs from $CARGO_TARGET_DIR/release (default target/release). --from DIR installs what is already in DIR
#   (the tests pass their own target/debug so CI builds the library once).
#   --target names a cross build's target (--from is then required, e.g.
#   target/aarch64-unknown-linux-gnu/release): another Linux is installed
#   as above with LLVM's tools (lld-19, llvm-19); x86_64-pc-windows-gnu as
#   AMD ships it on Windows:
#
#   PREFIX/include/rocm_kpack/kpack.h
#   PREFIX/bin/rocm_kpack.dll
#   PREFIX/lib/rocm_kpack.lib           import library (MSVC link, lld-link)
#   PREFIX/lib/librocm_kpack.dll.a      import library (MinGW)
#   PREFIX/lib/cmake/rocm-kpack/...     rocm::rocm_kpack (shared only)
#   PREFIX/share/doc/rocm-kpack/...
#
# The static library: cargo's librocm_kpack.a holds every object of every
# crate it depends on, so Rust's std and the bundled zstd (ZSTD_*) are
# global symbols there and clash with a program that also links libzstd or
# another Rust static library. Cargo has no post-link step, so this script
# partially links the archive into one object (`ld -r`) and makes every
# defined symbol but kpack_* local (`objcopy --keep-global-symbol`); the
# code is unchanged, only the symbol table's bindings differ.
set -euo pipefail

usage() { echo "usage: $0 [--from DIR] [--target TRIPLE] PREFIX" >&2; exit 2; }
from=""
target=""
while [ $# -gt 0 ]; do
  case "$1" in
    --from) [ $# -ge 2 ] || usage; from="$2"; shift 2 ;;
    --target) [ $# -ge 2 ] || usage; target="$2"; shift 2 ;;
    -h|--help) usage ;;
    -*) echo "$0: unknown option $1" >&2; usage ;;
    *) break ;;
  esac
done
[ $# -eq 1 ] || usage
prefix="$1"
case "$prefix" in /*) ;; *) prefix="$PWD/$prefix" ;; esac

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
native="$(rustc -vV 2>/dev/null | sed -n 's/^host: //p')"
[ -z "$target" ] || [ "$target" = "$native" ] || [ -n "$from" ] ||
  { echo "$0: --target $target needs --from DIR (the cross build's output directory)" >&2; exit 2; }
if [ -z "$from" ]; then
  # Cargo picks the features of shared dependencies (serde, rustix, syn,
  # rayon, ...) from the packages a command selects: `-p kpack-capi` alone
  # resolves them differently from `-p kpack-cli` and so recompiles every
  # dependency the CLI's release build already built. Selecting kpack-cli
  # too resolves them exactly as that build did (the library adds no
  # feature the CLI lacks: host/cli/tests/docs.rs checks it), and `--lib`
  # builds only the library's targets, not the CLI.
  (cd "$repo" && cargo build --release --locked -p kpack-cli -p kpack-capi --lib)
  from="${CARGO_TARGET_DIR:-$repo/target}/release"
  case "$from" in /*) ;; *) from="$repo/$from" ;; esac
fi
# need TOOL PACKAGE: fail naming the Debian package that has TOOL.
need() {
  command -v "$1" >/dev/null || { echo "$0: $1 not found (Debian: apt-get install $2)" >&2; exit 2; }
}
case "$target" in
  *-windows-gnu) files="rocm_kpack.dll librocm_kpack.dll.a"
    need x86_64-w64-mingw32-objdump binutils-mingw-w64-x86-64
    need llvm-dlltool-19 llvm-19 ;;
  *) files="librocm_kpack.so librocm_kpack.a" ;;
esac
for f in $files; do
  [ -f "$from/$f" ] || { echo "$0: $from/$f not found (build with: cargo build --release -p kpack-capi${target:+ --target $target})" >&2; exit 2; }
done
# The static library's partial link: the system's binutils for a native
# build, LLVM's (which read every architecture) for another Linux.
LD=ld OBJCOPY=objcopy AR=ar
case "$target" in
  ""|"$native"|*-windows-gnu) need ld binutils; need objcopy binutils; need ar binutils ;;
  *) LD=ld.lld-19 OBJCOPY=llvm-objcopy-19 AR=llvm-ar-19
    need "$LD" lld-19; need "$OBJCOPY" llvm-19; need "$AR" llvm-19 ;;
esac

# Version from the crate; the SONAME major is AMD's SOVERSION 0 (host/capi/build.rs).
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$repo/Cargo.toml" | head -n1)"
[ -n "$version" ] || { echo "$0: no version in $repo/Cargo.toml" >&2; exit 2; }
soname="librocm_kpack.so.0"
# What `cargo rustc -p kpack-capi --lib --crate-type staticlib -- --print
# native-static-libs` reports (minus -lc, which every C link has), for
# static users of the .pc file and the CMake package.
static_libs="-lgcc_s -lutil -lrt -lpthread -lm -ldl"

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/include/rocm_kpack" "$stage/lib/cmake/rocm-kpack" "$stage/share/doc/rocm-kpack"
cp "$repo/host/capi/include/rocm_kpack/kpack.h" "$stage/include/rocm_kpack/kpack.h"

case "$target" in
*-windows-gnu)
# The DLL, MinGW's import library as cargo wrote it, and one for MSVC's
# linker made by llvm-dlltool from the DLL's export table.
mkdir -p "$stage/bin"
cp "$from/rocm_kpack.dll" "$stage/bin/rocm_kpack.dll"
cp "$from/librocm_kpack.dll.a" "$stage/lib/librocm_kpack.dll.a"
{
  echo "LIBRARY rocm_kpack.dll"
  echo "EXPORTS"
  x86_64-w64-mingw32-objdump -p "$from/rocm_kpack.dll" |
    sed -n '/^\[Ordinal\/Name Pointer\] Table/,/^$/s/^[[:space:]]*\[[[:space:]]*[0-9]*\] //p'
} >"$stage/rocm_kpack.def"
grep -q '^kpack_open$' "$stage/rocm_kpack.def" ||
  { echo "$0: $from/rocm_kpack.dll exports no kpack_open" >&2; exit 2; }
llvm-dlltool-19 -m i386:x86-64 -d "$stage/rocm_kpack.def" -l "$stage/lib/rocm_kpack.lib"
rm "$stage/rocm_kpack.def"
cat >"$stage/lib/cmake/rocm-kpack/rocm-kpackConfig.cmake" <<EOF
# rocm-kpack CMake package: find_package(rocm-kpack REQUIRED), then
# target_link_libraries(app PRIVATE rocm::rocm_kpack).
get_filename_component(_rocm_kpack_prefix "\${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
set(rocm-kpack_VERSION "$version")
set(rocm-kpack_INCLUDE_DIRS "\${_rocm_kpack_prefix}/include")
if(NOT TARGET rocm::rocm_kpack_shared)
  add_library(rocm::rocm_kpack_shared SHARED IMPORTED)
  if(MSVC)
    set(_rocm_kpack_implib "\${_rocm_kpack_prefix}/lib/rocm_kpack.lib")
  else()
    set(_rocm_kpack_implib "\${_rocm_kpack_prefix}/lib/librocm_kpack.dll.a")
  endif()
  set_target_properties(rocm::rocm_kpack_shared PROPERTIES
    IMPORTED_LOCATION "\${_rocm_kpack_prefix}/bin/rocm_kpack.dll"
    IMPORTED_IMPLIB "\${_rocm_kpack_implib}"
    INTERFACE_INCLUDE_DIRECTORIES "\${_rocm_kpack_prefix}/include")
  unset(_rocm_kpack_implib)
endif()
if(NOT TARGET rocm::rocm_kpack)
  add_library(rocm::rocm_kpack INTERFACE IMPORTED)
  set_target_properties(rocm::rocm_kpack PROPERTIES INTERFACE_LINK_LIBRARIES rocm::rocm_kpack_shared)
endif()
unset(_rocm_kpack_prefix)
EOF
;;
*)
mkdir -p "$stage/lib/pkgconfig" "$stage/lib/.debug"
real="librocm_kpack.so.$version"
cp "$from/librocm_kpack.so" "$stage/lib/$real"
# Debug info into lib/.debug/, the library stripped and linked to it (the
# link holds the file name and a CRC, so run where the name resolves).
"$OBJCOPY" --only-keep-debug "$stage/lib/$real" "$stage/lib/.debug/$real.debug"
(cd "$stage/lib/.debug" && "$OBJCOPY" --strip-unneeded --add-gnu-debuglink="$real.debug" "../$real")
chmod 644 "$stage/lib/.debug/$real.debug"
ln -s "$real" "$stage/lib/$soname"
ln -s "$soname" "$stage/lib/librocm_kpack.so"

# Static library with only kpack_* global (see the top of this file).
"$LD" -r --whole-archive "$from/librocm_kpack.a" -o "$stage/rocm_kpack.o"
# -R: the embedded LLVM bitcode of each std object, concatenated by ld -r,
# is no longer valid bitcode and crashes binutils' LLVM plugin in ar and nm.
"$OBJCOPY" --wildcard --keep-global-symbol='kpack_*' -R .llvmbc -R .llvmcmd --strip-debug "$stage/rocm_kpack.o"
"$AR" rcD "$stage/lib/librocm_kpack.a" "$stage/rocm_kpack.o"
rm "$stage/rocm_kpack.o"

# pkg-config: relative to the .pc file, so the prefix can move.
cat >"$stage/lib/pkgconfig/rocm-kpack.pc" <<EOF
prefix=\${pcfiledir}/../..
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: rocm-kpack
Description: Load GPU code objects from .kpack archives (AMD rocm-kpack C ABI)
Version: $version
Libs: -L\${libdir} -lrocm_kpack
Libs.private: $static_libs
Cflags: -I\${includedir}
EOF

# CMake package: rocm::rocm_kpack as AMD's (shared by default); static with
# -DROCM_KPACK_STATIC=ON, then with its link dependencies attached and, as
# AMD's static target does, ROCM_KPACK_STATIC defined for consumers.
cmake_static_libs="$(printf '%s' "$static_libs" | sed 's/-l//g; s/ /;/g')"
cat >"$stage/lib/cmake/rocm-kpack/rocm-kpackConfig.cmake" <<EOF
# rocm-kpack CMake package: find_package(rocm-kpack REQUIRED), then
# target_link_libraries(app PRIVATE rocm::rocm_kpack).
# rocm::rocm_kpack is the shared library unless ROCM_KPACK_STATIC is ON;
# rocm::rocm_kpack_shared and rocm::rocm_kpack_static name one each.
get_filename_component(_rocm_kpack_prefix "\${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
set(rocm-kpack_VERSION "$version")
set(rocm-kpack_INCLUDE_DIRS "\${_rocm_kpack_prefix}/include")

if(NOT TARGET rocm::rocm_kpack_shared)
  add_library(rocm::rocm_kpack_shared SHARED IMPORTED)
  set_target_properties(rocm::rocm_kpack_shared PROPERTIES
    IMPORTED_LOCATION "\${_rocm_kpack_prefix}/lib/librocm_kpack.so.$version"
    IMPORTED_SONAME "$soname"
    INTERFACE_INCLUDE_DIRECTORIES "\${_rocm_kpack_prefix}/include")
endif()

if(NOT TARGET rocm::rocm_kpack_static)
  add_library(rocm::rocm_kpack_static STATIC IMPORTED)
  set_target_properties(rocm::rocm_kpack_static PROPERTIES
    IMPORTED_LOCATION "\${_rocm_kpack_prefix}/lib/librocm_kpack.a"
    IMPORTED_LINK_INTERFACE_LANGUAGES "C"
    INTERFACE_INCLUDE_DIRECTORIES "\${_rocm_kpack_prefix}/include"
    INTERFACE_COMPILE_DEFINITIONS "ROCM_KPACK_STATIC"
    INTERFACE_LINK_LIBRARIES "$cmake_static_libs")
endif()

if(NOT TARGET rocm::rocm_kpack)
  add_library(rocm::rocm_kpack INTERFACE IMPORTED)
  if(ROCM_KPACK_STATIC)
    set_target_properties(rocm::rocm_kpack PROPERTIES INTERFACE_LINK_LIBRARIES rocm::rocm_kpack_static)
  else()
    set_target_properties(rocm::rocm_kpack PROPERTIES INTERFACE_LINK_LIBRARIES rocm::rocm_kpack_shared)
  endif()
endif()
unset(_rocm_kpack_prefix)
EOF
;;
esac

# Same major version is compatible (0.x follows AMD's SOVERSION 0).
cat >"$stage/lib/cmake/rocm-kpack/rocm-kpackConfigVersion.cmake" <<EOF
set(PACKAGE_VERSION "$version")
if(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  string(REGEX MATCH "^[0-9]+" _have_major "\${PACKAGE_VERSION}")
  if(PACKAGE_FIND_VERSION_MAJOR STREQUAL _have_major)
    set(PACKAGE_VERSION_COMPATIBLE TRUE)
    if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
      set(PACKAGE_VERSION_EXACT TRUE)
    endif()
  else()
    set(PACKAGE_VERSION_COMPATIBLE FALSE)
  endif()
  unset(_have_major)
endif()
if(NOT CMAKE_SIZEOF_VOID_P STREQUAL "8")
  set(PACKAGE_VERSION "\${PACKAGE_VERSION} (64bit)")
  set(PACKAGE_VERSION_UNSUITABLE TRUE)
endif()
EOF

cp "$repo/host/capi/THIRD-PARTY-NOTICES.md" "$stage/share/doc/rocm-kpack/THIRD-PARTY-NOTICES.md"
cp "$repo/LICENSE" "$stage/share/doc/rocm-kpack/LICENSE"

# Into PREFIX file by file: each lands under a temporary name and is renamed
# into place, so a failed install never leaves a half-written file.
(cd "$stage" && find . -mindepth 1 \( -type f -o -type l \) | sort) | while read -r rel; do
  rel="${rel#./}"
  dest="$prefix/$rel"
  mkdir -p "$(dirname "$dest")"
  tmp="$(dirname "$dest")/.$(basename "$dest").tmp.$$"
  rm -f "$tmp"
  cp -P "$stage/$rel" "$tmp"
  mv -fT "$tmp" "$dest"
done
echo "installed librocm_kpack $version into $prefix" >&2

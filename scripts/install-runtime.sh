#!/usr/bin/env bash
# Install librocm_kpack the way distributions and CMake users expect it:
#
#   PREFIX/include/rocm_kpack/kpack.h
#   PREFIX/lib/librocm_kpack.so.X.Y.Z, .so.0 -> it (the SONAME), .so -> .so.0
#   PREFIX/lib/librocm_kpack.a          only kpack_* global (see below)
#   PREFIX/lib/pkgconfig/rocm-kpack.pc
#   PREFIX/lib/cmake/rocm-kpack/rocm-kpackConfig.cmake (+ ConfigVersion)
#   PREFIX/share/doc/rocm-kpack/THIRD-PARTY-NOTICES.md, LICENSE
#
# Usage: scripts/install-runtime.sh [--from DIR] PREFIX
#   Without --from, runs `cargo build --release -p kpack-capi` (a no-op when
#   it is up to date) and installs from $CARGO_TARGET_DIR/release
#   (default target/release). --from DIR installs what is already in DIR
#   (the tests pass their own target/debug so CI builds the library once).
#
# The static library: cargo's librocm_kpack.a holds every object of every
# crate it depends on, so Rust's std and the bundled zstd (ZSTD_*) are
# global symbols there and clash with a program that also links libzstd or
# another Rust static library. Cargo has no post-link step, so this script
# partially links the archive into one object (`ld -r`) and makes every
# defined symbol but kpack_* local (`objcopy --keep-global-symbol`); the
# code is unchanged, only the symbol table's bindings differ.
set -euo pipefail

usage() { echo "usage: $0 [--from DIR] PREFIX" >&2; exit 2; }
from=""
while [ $# -gt 0 ]; do
  case "$1" in
    --from) [ $# -ge 2 ] || usage; from="$2"; shift 2 ;;
    -h|--help) usage ;;
    -*) echo "$0: unknown option $1" >&2; usage ;;
    *) break ;;
  esac
done
[ $# -eq 1 ] || usage
prefix="$1"
case "$prefix" in /*) ;; *) prefix="$PWD/$prefix" ;; esac

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -z "$from" ]; then
  (cd "$repo" && cargo build --release --locked -p kpack-capi --lib)
  from="${CARGO_TARGET_DIR:-$repo/target}/release"
  case "$from" in /*) ;; *) from="$repo/$from" ;; esac
fi
for f in librocm_kpack.so librocm_kpack.a; do
  [ -f "$from/$f" ] || { echo "$0: $from/$f not found (build with: cargo build --release -p kpack-capi)" >&2; exit 2; }
done
for tool in ld objcopy ar; do
  command -v "$tool" >/dev/null || { echo "$0: $tool not found (Debian: apt-get install binutils)" >&2; exit 2; }
done

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
mkdir -p "$stage/include/rocm_kpack" "$stage/lib/pkgconfig" "$stage/lib/cmake/rocm-kpack" \
  "$stage/share/doc/rocm-kpack"

cp "$repo/host/capi/include/rocm_kpack/kpack.h" "$stage/include/rocm_kpack/kpack.h"
cp "$from/librocm_kpack.so" "$stage/lib/librocm_kpack.so.$version"
ln -s "librocm_kpack.so.$version" "$stage/lib/$soname"
ln -s "$soname" "$stage/lib/librocm_kpack.so"

# Static library with only kpack_* global (see the top of this file).
ld -r --whole-archive "$from/librocm_kpack.a" -o "$stage/rocm_kpack.o"
# -R: the embedded LLVM bitcode of each std object, concatenated by ld -r,
# is no longer valid bitcode and crashes binutils' LLVM plugin in ar and nm.
objcopy --wildcard --keep-global-symbol='kpack_*' -R .llvmbc -R .llvmcmd "$stage/rocm_kpack.o"
ar rcD "$stage/lib/librocm_kpack.a" "$stage/rocm_kpack.o"
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
[ ! -f "$repo/LICENSE" ] || cp "$repo/LICENSE" "$stage/share/doc/rocm-kpack/LICENSE"

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

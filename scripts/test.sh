#!/usr/bin/env bash
# Run every kpack test on a fresh machine: installs what the tests need
# (the wasm32-wasip2 target; Debian's binutils, patchelf, cc, llvm-19), checks
# formatting and clippy, then runs the whole suite. The WebAssembly handlers and test guests are built from source
# by kpack-guests' build script (host/guests/build.rs), into
# <target>/wasm-guests.
#
# Needs Debian 12 or Ubuntu (apt-get) and root or sudo for the packages
# below, a Rust toolchain from rustup, and the network (Debian, crates.io,
# PyPI). On a machine without apt-get, it lists every tool that is missing
# before running anything, and stops.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Tools the tests call: cc (stub HIP runtime, C ABI test), strip/objcopy/readelf
# (packaging steps applied to offloaded binaries), patchelf, llvm-readobj-19
# and llvm-objdump-19 (second opinion on rewritten PE images; llvm-strip-19 and
# llvm-objcopy-19 package the aarch64 fixtures), eu-strip/dwz/debugedit (the
# tools distributions' packaging runs after us).
need=()
for tool in cc strip objcopy readelf patchelf python3 llvm-readobj-19 eu-strip dwz debugedit; do
  command -v "$tool" >/dev/null 2>&1 || need+=("$tool")
done
# The wheel test pip-installs into a fresh venv: Debian splits venv/ensurepip out.
if command -v python3 >/dev/null 2>&1 && ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
  need+=(python3-venv)
fi
# The C library's install test: C++ consumers built with CMake and pkg-config,
# and a program linking librocm_kpack.a beside Debian's libzstd.a.
for tool in c++ cmake pkg-config; do
  command -v "$tool" >/dev/null 2>&1 || need+=("$tool")
done
# kpack prune's link-input tests link pruned clang-19 objects (new offload
# driver device link: clang-19, lld-19) and read them with llvm-19's tools.
for tool in clang-19 ld.lld-19 llvm-ar-19 llvm-objdump-19 clang-offload-bundler-19; do
  command -v "$tool" >/dev/null 2>&1 || need+=("$tool")
done
# The clang-22 fixtures' tests read SPIR-V and code-object-v6 entries and
# check rebuilt notes with llvm-readobj-22; tests/fixtures/clang22/build.sh
# rebuilds those fixtures with clang-22, lld-22 and clang-offload-bundler-22.
for tool in clang-22 ld.lld-22 llvm-readobj-22 clang-offload-bundler-22; do
  command -v "$tool" >/dev/null 2>&1 || need+=("$tool")
done
# The kill sweep (tests/it/outputs.rs) kills kpack at each rename, mkdir
# and sampled write with strace's fault injection.
command -v strace >/dev/null 2>&1 || need+=(strace)
# GNU time measures peak memory of the decompression-bomb tests
# (tests/it/hostile_artifacts.rs).
[ -x /usr/bin/time ] || need+=(time)
# kpack deb/rpm split's tests build, read, install and lint packages with
# the distributions' own tools (host/cli/tests/it/native_packages.rs).
for tool in dpkg-deb dpkg-scanpackages lintian rpm rpmbuild; do
  command -v "$tool" >/dev/null 2>&1 || need+=("$tool")
done
# Links the Windows build of librocm_kpack (below).
command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 || need+=(gcc-mingw-w64-x86-64)
# Runs the C ABI test program cross-built for Windows (kpack-capi's wine test).
[ -x /usr/lib/wine/wine64 ] || command -v wine64 >/dev/null 2>&1 || need+=(wine64)
if ! command -v cc >/dev/null 2>&1 || [ ! -f "$(cc -print-file-name=libzstd.a)" ]; then
  need+=(libzstd-dev)
fi
# The release wheels' checks (scripts/test-wheels.sh): `file`, and
# mingw-w64's objdump for the DLL-import check.
command -v file >/dev/null 2>&1 || need+=(file)
command -v x86_64-w64-mingw32-objdump >/dev/null 2>&1 || need+=(binutils-mingw-w64-x86-64)
# rustup: the toolchain rust-toolchain.toml pins, and the targets below.
command -v rustup >/dev/null 2>&1 || need+=(rustup)
# Without apt-get (another distribution, macOS), name everything missing now
# rather than fail in the middle of the suite.
if ! command -v apt-get >/dev/null 2>&1; then
  if [ ${#need[@]} -gt 0 ]; then
    echo "scripts/test.sh installs its tools with Debian's apt-get, which this machine lacks." >&2
    echo "Install these (Debian package names in brackets) and run it again:" >&2
    for t in "${need[@]}"; do
      case "$t" in
        eu-strip) p=elfutils ;; llvm-readobj-19|llvm-objdump-19|llvm-ar-19) p=llvm-19 ;;
        clang-offload-bundler-19) p=clang-tools-19 ;; ld.lld-19) p=lld-19 ;;
        llvm-readobj-22) p=llvm-22 ;; clang-offload-bundler-22) p=clang-tools-22 ;; ld.lld-22) p=lld-22 ;;
        dpkg-scanpackages) p=dpkg-dev ;; rpmbuild) p=rpm ;;
        cc) p=gcc ;; c++) p=g++ ;; strip|objcopy|readelf) p=binutils ;;
        rustup) p="not Debian's: https://rustup.rs" ;;
        *) p="" ;;
      esac
      echo "  $t${p:+ [$p]}" >&2
    done
    exit 2
  fi
fi
if [[ " ${need[*]} " == *" rustup "* ]]; then
  echo "scripts/test.sh needs rustup (https://rustup.rs): install it and run this again" >&2
  exit 2
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "installing Debian packages for: ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends gcc binutils patchelf python3 python3-venv llvm-19 clang-19 clang-tools-19 lld-19 \
    llvm-22 clang-22 clang-tools-22 lld-22 \
    elfutils dwz debugedit g++ cmake pkg-config libzstd-dev gcc-mingw-w64-x86-64 \
    binutils-mingw-w64-x86-64 wine64 file strace time dpkg-dev lintian rpm >/dev/null
fi

# RUSTUP_AUTO_INSTALL=0 on these machines: add the wasm target explicitly
# (kpack-guests' build script needs it and says so when it is missing).
rustup target add wasm32-wasip2 >/dev/null 2>&1 || rustup target add wasm32-wasip2
rustup component add rustfmt clippy >/dev/null 2>&1 || rustup component add rustfmt clippy
# kpack-capi's wine test builds librocm_kpack for Windows.
rustup target add x86_64-pc-windows-gnu >/dev/null 2>&1 || rustup target add x86_64-pc-windows-gnu
# The aarch64 release wheel and C library (scripts/test-wheels.sh).
rustup target add aarch64-unknown-linux-gnu >/dev/null 2>&1 || rustup target add aarch64-unknown-linux-gnu

# A fresh clone (CI) builds everything once: incremental caches would only
# cost disk (about 5 GB) and time.
if [ -n "${CI:-}" ]; then export CARGO_INCREMENTAL=0; fi

# Formatting and lints are part of the suite.
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# scripts/demo.sh's build: kpack without the database handlers.
cargo clippy --locked -p kpack-cli --no-default-features -- -D warnings
# Functions stay short enough to read: none over 150 lines, at most 1
# over 80 (non-test code; scripts/fnlen.py --show 80 lists them). The limit
# follows the count down: lower it when a long function is split.
python3 scripts/fnlen.py --show 150 --max-long 0
# Modules of a crate depend on each other one way (no cycle), so each can
# be read, tested and moved on its own; the script lists any cycle.
# A `pub use a::X` in lib.rs named as `crate::X` from module b counts as
# b -> a; the self-test checks that rule on made-up sources.
python3 scripts/modcycles.py --self-test
python3 scripts/modcycles.py

# auditwheel (PyPI) for the auditwheel-repair wheel test.
scripts/auditwheel-venv.sh >/dev/null
# variantlib (PyPI) and kpack's variant provider for the wheel-variant test.
scripts/variant-venv.sh >/dev/null

cargo test --workspace --locked "$@"

# A newcomer's `cargo build --workspace` links every member for the host,
# the wasm-only handlers and test guests included (their component exports
# exist only for WebAssembly).
cargo build --workspace --lib --locked

# librocm_kpack and the runtime build for Windows (GetModuleHandleExW path
# discovery, `;`-separated ROCM_KPACK_PATH); kpack-capi's wine test runs it.
cargo build --locked --target x86_64-pc-windows-gnu -p kpack-capi

# The user guide (docs/, an mdBook) builds. mdBook is not packaged by Debian
# 12: installed once with cargo (about 4 minutes on 2 cores), then reused.
MDBOOK_VERSION=0.5.4
if ! mdbook --version 2>/dev/null | grep -q "v$MDBOOK_VERSION"; then
  cargo install mdbook --locked --version "$MDBOOK_VERSION" --quiet
fi
mdbook build docs    # into docs/book (git-ignored)

# Every published crate packages, and kpack-guests' package (handlers
# prebuilt) builds outside the repository.
scripts/package-crates.sh

# Nothing below reads the debug build: on CI's machine, whose disk is not
# large, its several GB go before the release builds start.
if [ -n "${CI:-}" ]; then rm -rf "${CARGO_TARGET_DIR:-target}/debug" "${CARGO_TARGET_DIR:-target}/package"/*/; fi

# The release wheels for Linux x86_64 and Windows and their C libraries,
# built with --profile ci, the Windows one run under wine64. The aarch64
# wheel (a third full cross build) is built and run under qemu-aarch64 by
# `scripts/test-wheels.sh` alone, before a release.
wheels="${CARGO_TARGET_DIR:-target}/wheels-ci"
KPACK_WHEEL_TARGETS="x86_64-unknown-linux-gnu x86_64-pc-windows-gnu" scripts/test-wheels.sh "$wheels"

# `pip install kpack-cli`: the x86_64 wheel just built, installed into a
# fresh venv, its Python API run on a fixture.
scripts/test-python.sh "$(ls "$wheels"/kpack_cli-*-manylinux_2_28_x86_64.whl)"

#!/usr/bin/env bash
# The main job on a bundled example: take a real HIP fat library (two
# translation units, gfx1030 + gfx90a, built by hipcc), show what is inside,
# move its device code into per-arch .kpack archives, check the host-only
# result, and list the archives.  Output goes to ./demo-out (or $1).
#
# Needs only a Rust toolchain from rustup (rust-toolchain.toml names the
# version and the wasm32-wasip2 target; rustup installs both on first use).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${1:-demo-out}
command -v cargo >/dev/null 2>&1 || {
  echo "demo.sh: cargo not found; install a Rust toolchain from https://rustup.rs and run this again" >&2
  exit 2
}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
case "$TARGET_DIR" in /*) ;; *) TARGET_DIR="$PWD/$TARGET_DIR" ;; esac
K=$TARGET_DIR/release/kpack

# The demo builds kpack without the database handlers (cargo feature
# `handlers`): about 140 crates, without the WebAssembly runtime, which
# alone is half of a full build. Everything the demo runs is in it; cargo
# shows its progress as it goes, and later runs reuse it and take seconds.
if [ ! -x "$K" ]; then
  echo "demo.sh: building kpack in release mode (first time only): about 5 minutes on 2 idle cores," >&2
  echo "         longer on a busy machine; cargo shows its progress below." >&2
fi
# A full kpack already there is kept (and brought up to date), not
# replaced by the smaller build.
features=--no-default-features
if [ -x "$K" ] && "$K" plugins --help >/dev/null 2>&1; then features=; fi
cargo build --release --locked -p kpack-cli $features

LIB=tests/fixtures/corpus/lib2tu_2arch.so
rm -rf "$OUT" && mkdir -p "$OUT/lib"
(
  set -x
  "$K" inspect "$LIB"
  "$K" offload "$LIB" -o "$OUT/lib/lib2tu_2arch.so" --archives "$OUT/lib/.kpack"
  "$K" verify-elf "$OUT/lib/lib2tu_2arch.so"
  "$K" inspect "$OUT/lib/lib2tu_2arch.so"
  "$K" archive list "$OUT/lib/.kpack/lib2tu_2arch_gfx90a.kpack"
)

if [ -n "$features" ]; then
  built="The kpack binary is $K, built without the database handlers (the
WebAssembly plugins that split kernel databases) to keep this first build
short. The full kpack, handlers built in, is one more command (about 9 more
minutes on 2 idle cores) and lands at the same path:

  cargo build --release -p kpack-cli"
else
  built="The kpack binary is $K (self-contained: the database handlers are
built into it)."
fi
cat <<EOF

Done: the host-only library is $OUT/lib/lib2tu_2arch.so, its device code
in $OUT/lib/.kpack/.

$built

To run it as \`kpack\` from anywhere:

  export PATH="$TARGET_DIR/release:\$PATH"     # this shell only
  install -D -m 755 "$K" ~/.local/bin/kpack    # for good, if ~/.local/bin is on PATH

Next: the tour in README.md, then the guide (docs/src/SUMMARY.md); scripts/make-examples.sh
makes the inputs its examples use.
EOF

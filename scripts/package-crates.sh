#!/usr/bin/env bash
# Package every published crate (`publish = true`: the libraries, the SDK,
# the CLI) the way `cargo publish` would, into $CARGO_TARGET_DIR/package.
#
# kpack-guests builds the standard handlers from the repository's plugins/*
# for wasm32-wasip2; a packaged crate has no repository beside it, so its
# package carries the handlers prebuilt (host/guests/prebuilt/*.wasm, put
# there from this checkout's own build and removed again afterwards), and
# its build script uses them when plugins/ is not there. That package is
# built as a user would build it, handlers embedded (`cargo package`
# verifies it in a scratch directory outside the repository); the others
# are packaged without a build (`--no-verify`: their path dependencies are
# not on crates.io yet).
#
# usage: scripts/package-crates.sh [--list]   (--list: print each package's files)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
target_dir=${CARGO_TARGET_DIR:-$PWD/target}
list=${1:-}

# The handlers, built by kpack-guests' build script into <target>/wasm-guests.
cargo build -q --locked -p kpack-guests
built=$target_dir/wasm-guests/wasm32-wasip2/plugin
prebuilt=host/guests/prebuilt
trap 'rm -rf "$prebuilt"' EXIT
rm -rf "$prebuilt"
mkdir -p "$prebuilt"
cp "$built"/kpack_handler_*.wasm "$prebuilt/"

# Untracked files are packaged only with --allow-dirty.
cargo package -q --locked --allow-dirty -p kpack-guests --features embed
crate=$target_dir/package/kpack-guests-$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1).crate
n=$(tar -tzf "$crate" | grep -c '/prebuilt/kpack_handler_.*\.wasm$')
[ "$n" -eq "$(ls "$prebuilt" | wc -l)" ] || { echo "$0: $crate holds $n handlers" >&2; exit 1; }

published=$(cargo metadata --no-deps --format-version 1 | python3 -c '
import json, sys
for p in json.load(sys.stdin)["packages"]:
    if p["publish"] is None:
        print(p["name"])')
args=()
for p in $published; do args+=(-p "$p"); done
cargo package -q --locked --allow-dirty --no-verify "${args[@]}"
if [ "$list" = --list ]; then
  for p in $published; do cargo package -q --allow-dirty --list -p "$p" | sed "s|^|$p: |"; done
fi
echo "packaged: $(echo $published | wc -w) crates into $target_dir/package" >&2

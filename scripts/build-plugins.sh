#!/usr/bin/env bash
# Build every database-handler plugin (plugins/*) and every test guest
# (tests/guests/*) as a WebAssembly component, into
# ${CARGO_TARGET_DIR:-target}/wasm32-wasip2/plugin/. Packages are listed with
# -p, read from the manifests, so new crates are picked up automatically;
# the host crates are never built for wasm (that would try to build wasmtime).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2

pkgs=()
for manifest in plugins/*/Cargo.toml tests/guests/*/Cargo.toml; do
  [ -f "$manifest" ] || continue
  name=$(sed -n 's/^name *= *"\(.*\)"/\1/p' "$manifest" | head -n 1)
  pkgs+=(-p "$name")
done
[ ${#pkgs[@]} -gt 0 ] || { echo "no plugin crates found" >&2; exit 1; }
exec cargo build --locked --target wasm32-wasip2 --profile plugin "${pkgs[@]}" "$@"

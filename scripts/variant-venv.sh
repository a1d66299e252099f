#!/usr/bin/env bash
# The pinned installers and wheel-variant tools the provider and installer
# tests run (host/cli/tests/it/variant_provider.rs, installers.rs), in venvs
# under the target directory; prints the main venv's python.
#
#   $target/python/variant-venv   variantlib, rocm-bootstrap (AMD's provider),
#                                 uv and pip 26.3, and kpack's provider
#                                 (python/variant-provider) beside them
#   $target/python/pip23-venv     pip 23.2.1 (python 3.11's ensurepip pip)
#
# Each is installed once (made again when its python no longer runs or a pin
# changed); kpack's provider is reinstalled every time, so the tests see the
# working tree's. pip's cache is used, so a second machine setup is quick.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
target=${CARGO_TARGET_DIR:-$PWD/target}
python=${PYTHON:-python3}
pins="variantlib==0.2.2 rocm-bootstrap==0.3.0 uv==0.13.9 pip==26.3"
pip23=pip==23.2.1

# venv DIR PINS...: a venv at DIR with PINS installed, unless it already is.
venv() {
  local dir=$1
  shift
  if [ "$(cat "$dir/.pins" 2>/dev/null)" = "$*" ] && "$dir/bin/python" -c '' > /dev/null 2>&1; then
    return
  fi
  rm -rf "$dir"
  "$python" -m venv "$dir" >&2
  "$dir/bin/python" -m pip install -q --disable-pip-version-check "$@" >&2
  echo "$*" > "$dir/.pins"
}

venv "$target/python/variant-venv" $pins
venv "$target/python/pip23-venv" $pip23
"$target/python/variant-venv/bin/python" -m pip install -q --disable-pip-version-check \
  --no-deps --force-reinstall ./python/variant-provider >&2
echo "$target/python/variant-venv/bin/python"

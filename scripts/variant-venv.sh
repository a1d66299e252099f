#!/usr/bin/env bash
# A venv with variantlib (PyPI, the wheel-variant reference implementation)
# and kpack's provider (python/variant-provider) installed beside it, for
# the provider test (host/cli/tests/it/variant_provider.rs), under the
# target directory; prints the venv's python. variantlib is installed once
# (a venv whose python no longer runs is made again); the provider is
# reinstalled every time, so the test sees the working tree's.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
target=${CARGO_TARGET_DIR:-$PWD/target}
venv=$target/python/variant-venv
variantlib_version=0.2.2
if ! "$venv/bin/python" -c 'import variantlib' > /dev/null 2>&1; then
  rm -rf "$venv"
  "${PYTHON:-python3}" -m venv "$venv" >&2
  "$venv/bin/pip" install -q --disable-pip-version-check "variantlib==$variantlib_version" >&2
fi
"$venv/bin/pip" install -q --disable-pip-version-check --no-deps --force-reinstall \
  ./python/variant-provider >&2
echo "$venv/bin/python"

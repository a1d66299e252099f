#!/usr/bin/env python3
"""An independent KPAK reader, written from the format descriptions
(spec/rocm-kpack.md section 2 for v1, docs/kpak-v2-zstd-delta.md for v2 and
the v1 frame index), not from kpack's Rust reader: the tests run
it over the archives kpack writes as a second opinion on the format.

Usage: kpak_read.py FILE...  prints, per entry, a tab-separated line
  FILE  KEY  ARCH  SIZE  SHA256
sorted by (key, arch); exits non-zero on anything malformed.
"""
import hashlib
import struct
import sys

import msgpack
import zstandard


def read(path):
    data = open(path, "rb").read()
    magic, version, toc_offset = struct.unpack_from("<4sIQ", data, 0)
    assert magic == b"KPAK", "bad magic"
    assert version in (1, 2), f"header version {version}"
    assert 64 <= toc_offset < len(data), "toc_offset out of range"
    assert data[16:64] == bytes(48), "header padding is not zero"
    # Exactly one msgpack object after the blob area, nothing after it.
    toc = msgpack.unpackb(data[toc_offset:], raw=False, strict_map_key=False)
    for field in ("group_name", "gfx_arch_family", "gfx_arches", "toc"):
        assert field in toc, f"TOC has no {field}"
    scheme = toc.get("compression_scheme", "none")
    if scheme == "none":
        blobs = [(b["offset"], b["size"]) for b in toc["blobs"]]
    elif scheme == "zstd-per-kernel":
        at, end = toc["zstd_offset"], toc["zstd_offset"] + toc["zstd_size"]
        assert 64 <= at and end <= toc_offset, "zstd blob outside the blob area"
        (count,) = struct.unpack_from("<I", data, at)
        at += 4
        blobs = []
        for _ in range(count):
            (size,) = struct.unpack_from("<I", data, at)
            blobs.append((at + 4, size))
            at += 4 + size
        assert at == end, "zstd_size does not match the frames"
        # kpack's frame-offset index (docs/kpak-v2-zstd-delta.md §8), which
        # AMD's parser ignores, must name exactly the frames the walk found.
        if "zstd_frame_offsets" in toc:
            assert toc["zstd_frame_offsets"] == [o for o, _ in blobs], "frame index"
    elif scheme == "zstd-delta":
        # KPAK v2 (docs/kpak-v2-zstd-delta.md): frames placed per entry.
        assert version == 2 and toc["format_version"] == 2, "zstd-delta needs v2"
        by_ordinal = {}
        for arches in toc["toc"].values():
            for entry in arches.values():
                by_ordinal[entry["ordinal"]] = entry
        blobs = None
    else:
        raise ValueError(f"unknown compression_scheme {scheme!r}")
    out = []
    for key, arches in toc["toc"].items():
        for arch, entry in arches.items():
            assert arch in toc["gfx_arches"], f"{arch} not in gfx_arches"
            if blobs is None:
                offset, size = entry["offset"], entry["size"]
            else:
                offset, size = blobs[entry["ordinal"]]
            assert 64 <= offset and offset + size <= toc_offset, "blob outside the blob area"
            stored = data[offset : offset + size]
            if scheme == "none":
                code = stored
            elif scheme == "zstd-delta" and "base" in entry:
                base = by_ordinal[entry["base"]]
                assert "base" not in base, "a base is a delta"
                frame = data[base["offset"] : base["offset"] + base["size"]]
                prefix = zstandard.ZstdDecompressor().decompress(
                    frame, max_output_size=base["original_size"]
                )
                # A ref prefix is a raw-content dictionary used once.
                d = zstandard.ZstdCompressionDict(
                    prefix, dict_type=zstandard.DICT_TYPE_RAWCONTENT
                )
                code = zstandard.ZstdDecompressor(dict_data=d).decompress(
                    stored, max_output_size=entry["original_size"]
                )
            else:
                code = zstandard.ZstdDecompressor().decompress(
                    stored, max_output_size=entry["original_size"]
                )
            assert len(code) == entry["original_size"], f"{key} {arch}: size"
            digest = hashlib.sha256(code).hexdigest()
            # kpack's per-entry digest (a key AMD's parser skips), when present.
            if "sha256" in entry:
                assert entry["sha256"] == digest, f"{key} {arch}: sha256"
            out.append((key, arch, len(code), digest))
    return sorted(out)


if __name__ == "__main__":
    for path in sys.argv[1:]:
        for key, arch, size, digest in read(path):
            print(f"{path}\t{key}\t{arch}\t{size}\t{digest}")

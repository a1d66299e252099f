"""kpack-variant-provider as variantlib (the reference implementation of
wheel variants) loads it: platform analysis through the `variant_plugins`
entry point, and variant ordering over kpack-written variant.json files.

Usage: test_variantlib.py TARGET_LEVEL_VARIANT_JSON FAMILY_LEVEL_VARIANT_JSON
(the variant.json of `kpack wheel split --group target --variant-wheel` and
of `--group family --variant-wheel` on one fat wheel with gfx942, gfx1100
and gfx1201 code). Fake KFD topologies come through KPACK_SYSFS_ROOT.
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from variantlib.api import get_variants_by_priority

NODES = "class/kfd/kfd/topology/nodes"


def topology(root: Path, versions):
    cpu = root / NODES / "0"
    cpu.mkdir(parents=True)
    (cpu / "properties").write_text("cpu_cores_count 16\nsimd_count 0\ngfx_target_version 0\n")
    for i, v in enumerate(versions, 1):
        d = root / NODES / str(i)
        d.mkdir(parents=True)
        (d / "properties").write_text(f"simd_count 192\nsimd_per_cu 2\ngfx_target_version {v}\n")


def machine(versions, **extra):
    """Point the environment at a fresh fake topology; returns its root."""
    root = Path(tempfile.mkdtemp())
    topology(root, versions)
    for k in ("ROCM_BOOTSTRAP_FORCE_GFX_ARCH", "ROCM_BOOTSTRAP_DISABLE_DETECTION"):
        os.environ.pop(k, None)
    os.environ["KPACK_SYSFS_ROOT"] = str(root)
    os.environ.update(extra)
    # variantlib caches plugin answers per process: clear between machines.
    from variantlib.plugins import loader

    loader.VARIANT_PROVIDER_CACHE_TABLE.clear()
    return root


def analyze():
    out = subprocess.run(
        [str(Path(sys.executable).parent / "variantlib"), "analyze-platform"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out


def pick(doc):
    labels = [v.label for v in get_variants_by_priority(variants_json=doc)]
    return [l for l in labels if l != "null"]


def merged(*docs):
    out = json.loads(json.dumps(docs[0]))
    for d in docs[1:]:
        assert d["providers"] == out["providers"], "one provider for every variant"
        out["variants"].update(d["variants"])
    return out


def main():
    target_doc = json.loads(Path(sys.argv[1]).read_text())
    family_doc = json.loads(Path(sys.argv[2]).read_text())
    assert target_doc["providers"]["amd"] == {
        "plugin-api": "kpack_variant_provider.plugin:AmdVariantPlugin",
        "requires": ["kpack-variant-provider >= 0.1"],
    }, target_doc["providers"]
    assert {"gfx1100", "gfx942", "gfx1201"} <= set(target_doc["variants"]), target_doc["variants"]
    assert {"gfx9", "gfx11", "gfx12"} <= set(family_doc["variants"]), family_doc["variants"]
    whole = merged(target_doc, family_doc)

    machine([110000])
    text = analyze()
    assert "gfx_arch :: ['gfx1100', 'gfx110x', 'gfx11']" in text, text
    # The exact variant first, then the family one.
    assert pick(whole) == ["gfx1100", "gfx11"], pick(whole)
    # No exact variant in the set: the family's.
    assert pick(family_doc) == ["gfx11"], pick(family_doc)
    machine([110001])
    assert pick(whole) == ["gfx11"], pick(whole)
    # A GPU no variant serves gets none (every family of the whole set has
    # code here, generic code included, so the target-level set is asked).
    machine([100300])
    assert pick(target_doc) == [], pick(target_doc)
    machine([90010])
    assert pick(target_doc) == [], pick(target_doc)
    # rocm-bootstrap's overrides.
    machine([100300], ROCM_BOOTSTRAP_FORCE_GFX_ARCH="gfx942,gfx1201")
    assert "gfx_arch :: ['gfx942', 'gfx1201', 'gfx9_4', 'gfx12_0', 'gfx9', 'gfx12']" in analyze()
    assert pick(whole) == ["gfx942", "gfx1201", "gfx9", "gfx12"], pick(whole)
    machine([110000], ROCM_BOOTSTRAP_DISABLE_DETECTION="1")
    assert pick(whole) == [], pick(whole)
    print("ok")


if __name__ == "__main__":
    main()

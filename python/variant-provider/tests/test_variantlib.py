"""Which variant variantlib (the reference implementation of wheel
variants) selects with each provider: kpack's (`kpack-variant-provider`)
and AMD's (rocm-bootstrap 0.3.0's `AMDVariantPlugin`), both installed in
this venv and loaded through the `plugin-api` of the document.

Usage: test_variantlib.py VARIANTS_JSON...   (kpack's `*-variants.json`
files, one per grouping). For each file prints one line:

    <folder name> kpack=<labels> rocm-bootstrap=<labels>

labels most preferred first, comma-joined (`-` for none). Both providers
read the machine's KFD topology at /sys; kpack's follows
KPACK_SYSFS_ROOT, rocm-bootstrap's ROCM_BOOTSTRAP_FORCE_GFX_ARCH, so the
caller either mounts a fake topology at /sys/class/kfd (a private mount
namespace) or sets both variables.
"""

import json
import sys
from pathlib import Path

from variantlib.api import get_variants_by_priority

PROVIDERS = {
    "kpack": {
        "plugin-api": "kpack_variant_provider.plugin:AmdVariantPlugin",
        "requires": ["kpack-variant-provider >= 0.2"],
    },
    "rocm-bootstrap": {
        "plugin-api": "rocm_bootstrap.variant_provider:AMDVariantPlugin",
        "requires": ["rocm-bootstrap >= 0.3.0"],
    },
}


def pick(doc, provider):
    doc = json.loads(json.dumps(doc))
    doc["providers"]["amd"] = PROVIDERS[provider]
    labels = [v.label for v in get_variants_by_priority(variants_json=doc)]
    return ",".join(l for l in labels if l != "null") or "-"


def main():
    for path in sys.argv[1:]:
        doc = json.loads(Path(path).read_text())
        picks = " ".join(f"{p}={pick(doc, p)}" for p in PROVIDERS)
        print(f"{Path(path).parent.name} {picks}")


if __name__ == "__main__":
    main()

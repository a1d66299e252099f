#!/usr/bin/env python3
"""Write rocm-bootstrap's GFX packaging hierarchy as TSV on stdout.

Usage: extract-rocm-bootstrap.py ROCM_BOOTSTRAP.whl > host/amdgpu/tests/data/rocm-bootstrap-<version>.tsv

The wheel comes from `pip download --no-deps rocm-bootstrap==0.3.0`. It is
pure Python, so it is imported straight from the zip: nothing is installed.
kpack-amdgpu's `family` tests compare its own table with this extract, so a
new rocm-bootstrap release is checked by regenerating the file.
"""

import hashlib
import sys
import zipfile


def main() -> None:
    wheel = sys.argv[1]
    sys.path.insert(0, wheel)
    from rocm_bootstrap import naming, targets  # noqa: E402

    version = None
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.endswith(".dist-info/METADATA"):
                for line in z.read(name).decode().splitlines():
                    if line.startswith("Version:"):
                        version = line.split(":", 1)[1].strip()
    with open(wheel, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    print(f"# rocm-bootstrap {version} sha256 {digest}")
    print("level\tkey\tdist_name\tparent\tllvm_generic\tmembers")
    for b in targets.all_bundles():
        parent = ""
        if b.level == targets.PackagingLevel.SUB_FAMILY:
            parent = targets.bundle_for_target(
                b.members[0], targets.PackagingLevel.FAMILY
            ).key
        elif b.level == targets.PackagingLevel.TARGET:
            parent = targets.bundle_for_target(
                b.members[0], targets.PackagingLevel.SUB_FAMILY
            ).key
        names = naming.bundle_names(b)
        print(
            "\t".join(
                [
                    b.level.value,
                    b.key,
                    names.dist_name,
                    parent,
                    b.llvm_generic or "",
                    ",".join(t.name for t in b.members),
                ]
            )
        )


if __name__ == "__main__":
    main()

"""Make a folder of kpack's variant wheels select as on a machine with
the given GPUs, for installers that cannot run kpack's provider (uv 0.13
runs only the providers it vendors): the `amd` provider of the
`*-variants.json` and of every variant wheel's `variant.json` becomes a
static one (`static-properties`) listing those GPUs' targets. RECORD rows
are rewritten with the new hashes.

Usage: static_stand_in.py DIR TARGET[,TARGET...]
"""

import base64
import hashlib
import json
import sys
import zipfile
from pathlib import Path


def static(doc, targets):
    doc["providers"]["amd"] = {"static-properties": {"gfx_arch": targets}}
    return json.dumps(doc, indent=2) + "\n"


def rewrite(wheel: Path, targets):
    with zipfile.ZipFile(wheel) as z:
        items = [(i, z.read(i)) for i in z.infolist()]
    vj = next(i.filename for i, _ in items if i.filename.endswith(".dist-info/variant.json"))
    record = vj.rsplit("/", 1)[0] + "/RECORD"
    data = dict((i.filename, b) for i, b in items)
    data[vj] = static(json.loads(data[vj]), targets).encode()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data[vj]).digest()).rstrip(b"=").decode()
    rows = [
        f"{vj},sha256={digest},{len(data[vj])}" if row.split(",", 1)[0] == vj else row
        for row in data[record].decode().splitlines()
    ]
    data[record] = ("\n".join(rows) + "\n").encode()
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        for i, _ in items:
            z.writestr(i, data[i.filename])


def main():
    folder, targets = Path(sys.argv[1]), sys.argv[2].split(",")
    for index in folder.glob("*-variants.json"):
        index.write_text(static(json.loads(index.read_text()), targets))
    for wheel in folder.glob("*.whl"):
        with zipfile.ZipFile(wheel) as z:
            has = any(n.endswith(".dist-info/variant.json") for n in z.namelist())
        if has:
            rewrite(wheel, targets)


if __name__ == "__main__":
    main()

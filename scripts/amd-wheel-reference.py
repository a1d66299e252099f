#!/usr/bin/env python3
"""Record what AMD's wheel splitter makes of kpack's fixture wheels.

Run by scripts/amd-wheel-reference.sh (which sets up PYTHONPATH, PATH and
the Python packages); see tests/fixtures/amd-wheel/README.md.

For every case in tests/fixtures/amd-wheel/cases.json: build the fat wheel
its .tsv describes, run `python -m rocm_kpack.tools.split_python_wheels`
with the case's arguments, and write reference/<case>.json: every output
wheel's file name, members (path, mode, sha256), METADATA and WHEEL lines,
the dist-info text files, each .kpack archive as AMD's own reader
(`PackedKernelArchive.read` / `get_kernel`) lists it, and each host
binary's `.rocm_kpack_ref` marker.
"""

import base64
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import msgpack
from elftools.elf.elffile import ELFFile
from rocm_kpack.kpack import PackedKernelArchive

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
HERE = FIXTURES / "amd-wheel"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def wheel_members(tsv: Path) -> tuple[str, list[tuple[str, int, bytes]]]:
    """The wheel's file name and its members (path, mode, bytes)."""
    name = None
    members = []
    for line in tsv.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        fields = line.split("\t")
        if fields[0] == "wheel":
            name = fields[1]
            continue
        path, mode, source = fields
        kind, _, value = source.partition(":")
        if kind == "fixture":
            data = (FIXTURES / value).read_bytes()
        else:
            data = value.replace("\\n", "\n").encode("utf-8")
        members.append((path, int(mode, 8), data))
    return name, members


def build_wheel(tsv: Path, out_dir: Path) -> Path:
    """Write the fat wheel: members sorted, RECORD last."""
    name, members = wheel_members(tsv)
    members.sort()
    dist_info = next(p.split("/")[0] for p, _, _ in members if "dist-info/" in p)
    record = ""
    path = out_dir / name
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for member, mode, data in members:
            info = zipfile.ZipInfo(member, date_time=(2026, 8, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
            digest = hashlib.sha256(data).digest()
            b64 = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
            record += f"{member},sha256={b64},{len(data)}\n"
        record += f"{dist_info}/RECORD,,\n"
        info = zipfile.ZipInfo(f"{dist_info}/RECORD", date_time=(2026, 8, 1, 0, 0, 0))
        info.external_attr = 0o100644 << 16
        zf.writestr(info, record)
    return path


def archive_listing(data: bytes, tmp: Path) -> dict:
    """A .kpack archive as AMD's reader sees it."""
    path = tmp / "listing.kpack"
    path.write_bytes(data)
    archive = PackedKernelArchive.read(path)
    kernels = []
    for key in sorted(archive.toc):
        for arch in sorted(archive.toc[key]):
            blob = archive.get_kernel(key, arch)
            kernels.append(
                {"key": key, "arch": arch, "size": len(blob), "sha256": sha256(blob)}
            )
    with path.open("rb") as f:
        f.seek(int.from_bytes(data[8:16], "little"))
        scheme = msgpack.unpack(f, raw=False)["compression_scheme"]
    return {
        "compression_scheme": scheme,
        "group_name": archive.group_name,
        "gfx_arch_family": archive.gfx_arch_family,
        "gfx_arches": archive.gfx_arches,
        "kernels": kernels,
    }


def marker(data: bytes, tmp: Path) -> dict | None:
    """The decoded `.rocm_kpack_ref` section of an ELF member, if any."""
    if not data.startswith(b"\x7fELF"):
        return None
    path = tmp / "marker.elf"
    path.write_bytes(data)
    with path.open("rb") as f:
        section = ELFFile(f).get_section_by_name(".rocm_kpack_ref")
        if section is None:
            return None
        return msgpack.unpackb(section.data(), raw=False)


def describe_wheel(path: Path, tmp: Path) -> dict:
    out = {"members": [], "dist_info": {}, "archives": {}, "markers": {}}
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            if info.is_dir():
                continue
            data = zf.read(info)
            mode = (info.external_attr >> 16) & 0o777
            out["members"].append(
                {"path": info.filename, "mode": f"{mode:o}", "sha256": sha256(data)}
            )
            parent = info.filename.split("/")[0]
            if parent.endswith(".dist-info") and not info.filename.endswith("/RECORD"):
                out["dist_info"][info.filename.split("/", 1)[1]] = data.decode(
                    "utf-8"
                ).splitlines()
            if info.filename.endswith(".kpack"):
                out["archives"][info.filename] = archive_listing(data, tmp)
            found = marker(data, tmp)
            if found is not None:
                out["markers"][info.filename] = found
    out["members"].sort(key=lambda m: m["path"])
    return out


def run_case(name: str, case: dict, commit: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="amd-wheel-") as tmp_s:
        tmp = Path(tmp_s)
        (tmp / "in").mkdir()
        (tmp / "out").mkdir()
        fat = build_wheel(HERE / case["wheel"], tmp / "in")
        args = [
            a.replace("{input}", str(fat)).replace("{output}", str(tmp / "out"))
            for a in case["args"]
        ]
        cmd = [sys.executable, "-m", "rocm_kpack.tools.split_python_wheels", *args]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"{name}: AMD's splitter failed:\n{done.stdout}\n{done.stderr}")
        outputs = {}
        leftovers = []
        for entry in sorted((tmp / "out").iterdir()):
            if entry.name.endswith(".whl") and entry.is_file():
                outputs[entry.name] = describe_wheel(entry, tmp)
            else:
                leftovers.append(entry.name)
        return {
            "leftovers": leftovers,
            "amd_source": commit,
            "wheel": case["wheel"],
            "args": case["args"],
            "outputs": outputs,
        }


def main() -> None:
    commit = os.environ["AMD_KPACK_COMMIT"]
    cases = json.loads((HERE / "cases.json").read_text(encoding="utf-8"))
    (HERE / "reference").mkdir(exist_ok=True)
    for name, case in cases.items():
        ref = run_case(name, case, commit)
        dest = HERE / "reference" / f"{name}.json"
        dest.write_text(json.dumps(ref, indent=1, sort_keys=True) + "\n", "utf-8")
        print(f"{name}: {len(ref['outputs'])} wheels -> {dest.relative_to(REPO)}")


if __name__ == "__main__":
    main()

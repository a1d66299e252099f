"""The `kpack` Python API hands paths to the binary so that none can be
taken for a flag: positional paths after `--`, option values as
`--flag=value`. Runs without a built kpack: `KPACK_BIN` is a stub that
prints its arguments as the JSON document.

Usage: python test_args.py
"""

import json
import os
import stat
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import kpack  # noqa: E402

STUB = """#!/usr/bin/env python3
import json, sys
print(json.dumps({"argv": sys.argv[1:]}))
"""


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        stub = Path(tmp) / "kpack"
        stub.write_text(STUB)
        stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
        os.environ["KPACK_BIN"] = str(stub)

        argv = kpack.verify(["-rf", "--json"])["argv"]
        assert argv == ["verify", "--json", "--", "-rf", "--json"], argv

        argv = kpack.offload("-in.so", "-o", "--archives", name="-n")["argv"]
        assert argv == [
            "offload",
            "-o=-o",
            "--archives=--archives",
            "--name=-n",
            "--json",
            "--",
            "-in.so",
        ], argv

        argv = kpack.split_artifacts(["-a"], "-out", plugins=["-p.wasm"])["argv"]
        assert argv[-2:] == ["--", "-a"] and "-o=-out" in argv, argv
        assert "--plugin=-p.wasm" in argv, argv

        argv = kpack.wheel_split("-w.whl", "-d", dry_run=True)["argv"]
        assert argv[-2:] == ["--", "-w.whl"] and "-o=-d" in argv, argv

        argv = kpack.wheel_split(
            "w.whl",
            "out",
            device_prefix="torch-device",
            overlay_root="torch/",
            device_requires_dist=["sdk-@GFXARCH@ == 7.1", "-x"],
            gpu_targets=["gfx90a", "gfx1100"],
            generate_variant_wheel=True,
            variant_label="rocm",
            level=19,
        )["argv"]
        for arg in [
            "--device-prefix=torch-device",
            "--overlay-root=torch/",
            "--device-requires-dist=sdk-@GFXARCH@ == 7.1",
            "--device-requires-dist=-x",
            "--gpu-targets=gfx90a,gfx1100",
            "--generate-variant-wheel",
            "--variant-label=rocm",
            "--level=19",
        ]:
            assert arg in argv, (arg, argv)
        assert "--group" not in " ".join(argv) and "--force" not in argv, argv

        argv = kpack.recombine_artifacts("-s", "-c.json", "-o")["argv"]
        assert argv == ["recombine", "--config=-c.json", "-o=-o", "--json", "--", "-s"], argv
    print(json.dumps({"ok": True}))


if __name__ == "__main__":
    main()

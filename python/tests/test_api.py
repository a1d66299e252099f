"""The `kpack` Python API, run from a venv with the kpack wheel installed
and nothing else (scripts/test-python.sh): the wheel's own binary, with
its embedded handlers, splits a TheRock artifact with rocBLAS databases.

Usage: python test_api.py FIXTURES_DIR
"""

import base64
import hashlib
import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

import kpack

ROCBLAS = "math-libs/BLAS/rocBLAS/stage"


def write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def rocblas_artifact(root: Path, fixtures: Path) -> Path:
    """A TheRock artifact: a fat rocBLAS library and its gfx90a database."""
    a = root / "blas_lib_gfx90a"
    write(a / "artifact_manifest.txt", f"{ROCBLAS}\n".encode())
    rb = a / ROCBLAS
    (rb / "lib").mkdir(parents=True)
    shutil.copy(fixtures / "corpus/libaxpy_2arch.so", rb / "lib/librocblas.so.4")
    lib = rb / "lib/rocblas/library"
    write(lib / "TensileLibrary_gfx90a.co", b"tensile code gfx90a")
    write(lib / "TensileLibrary_Type_gfx90a.dat", b"tensile data")
    write(lib / "TensileLibrary.dat", b"generic tensile index")
    return a


def fat_wheel(dir: Path, fixtures: Path) -> Path:
    """A wheel with one fat extension library and a correct RECORD."""
    di = "fatpkg-1.0.dist-info"
    files = {
        "fatpkg/__init__.py": b"",
        "fatpkg/libaxpy.so": (fixtures / "corpus/libaxpy_2arch.so").read_bytes(),
        f"{di}/METADATA": b"Metadata-Version: 2.1\nName: fatpkg\nVersion: 1.0\n",
        f"{di}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n"
        b"Tag: py3-none-linux_x86_64\n",
    }
    path = dir / "fatpkg-1.0-py3-none-linux_x86_64.whl"
    record = ""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest())
            record += f"{name},sha256={digest.rstrip(b'=').decode()},{len(data)}\n"
        record += f"{di}/RECORD,,\n"
        z.writestr(f"{di}/RECORD", record)
    return path


def main() -> None:
    fixtures = Path(sys.argv[1])
    bin_path = kpack.find_kpack_bin()
    # The binary must be the wheel's, in this venv's scripts directory.
    assert Path(bin_path).parent == Path(sys.executable).parent, bin_path
    assert "KPACK_PLUGIN_DIR" not in os.environ

    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        artifact = rocblas_artifact(t / "in", fixtures)

        result = kpack.split_artifacts(
            [artifact], t / "shards/gfx90a_build/", split_databases=["rocblas"]
        )
        (blas,) = result["artifacts"]
        assert blas["component"] == "blas_lib", blas
        assert blas["databases"]["rocblas"] == {"gfx90a": 2, "generic": 1}, blas
        shard = t / "shards/gfx90a_build"
        arch = shard / "blas_lib_gfx90a" / ROCBLAS / "lib/rocblas/library"
        assert (arch / "TensileLibrary_gfx90a.co").is_file()
        generic = shard / "blas_lib_generic" / ROCBLAS / "lib/rocblas/library"
        assert (generic / "TensileLibrary.dat").is_file()

        config = t / "config.json"
        config.write_text(
            '{"primary_shard": "gfx90a_build", "architecture_groups": '
            '{"gfx90X": {"display_name": "CDNA", "architectures": ["gfx90a"]}}}'
        )
        recombined = kpack.recombine_artifacts(t / "shards", config, t / "packages")
        assert recombined["schema_version"], recombined
        verified = kpack.verify([t / "packages"])
        assert verified["schema_version"], verified

        # A fat binary left in the generic package: verify finds a problem,
        # exit 1, and the findings come with the exception.
        broken = t / "broken"
        shutil.copytree(t / "packages", broken, symlinks=True)
        shutil.copy(
            fixtures / "corpus/libaxpy_2arch.so",
            broken / "blas_lib_generic" / ROCBLAS / "lib/libstray.so",
        )
        try:
            kpack.verify([broken])
        except kpack.KpackError as e:
            assert e.exit_code == 1, e
            assert e.result is not None, e
        else:
            raise AssertionError("verify passed a fat binary in a generic package")

        wheels = kpack.wheel_split(fat_wheel(t, fixtures), t / "wheels")
        assert wheels["schema_version"], wheels
        assert any(p.name.startswith("fatpkg_device_gfx90a") for p in (t / "wheels").iterdir())

        # AMD's layout: per-target device wheels named as rocm-kpack names
        # them, the extra Requires-Dist lines, and the variant wheel.
        amd = kpack.wheel_split(
            fat_wheel(t, fixtures),
            t / "amd",
            device_prefix="fatpkg-device",
            overlay_root="fatpkg/",
            device_requires_dist=["sdk-device-@GFXARCH@ == 7.1"],
            generate_variant_wheel=True,
            variant_label="rocm",
        )
        names = sorted(d["distribution"] for d in amd["devices"])
        assert names == ["fatpkg-device-gfx1030", "fatpkg-device-gfx90a"], names
        (variant,) = amd["variants"]
        assert variant["file"].endswith("-rocm.whl"), amd["variants"]
        (gfx90a,) = [d for d in amd["devices"] if d["arch"] == "gfx90a"]
        assert gfx90a["archives"] == ["fatpkg/.kpack/fatpkg_gfx90a.kpack"], gfx90a
        with zipfile.ZipFile(gfx90a["path"]) as z:
            (metadata,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
            requires = [
                line
                for line in z.read(metadata).decode().splitlines()
                if line.startswith("Requires-Dist:")
            ]
        assert requires == [
            "Requires-Dist: fatpkg == 1.0",
            "Requires-Dist: sdk-device-gfx90a == 7.1",
        ], requires

        offloaded = kpack.offload(
            fixtures / "corpus/libaxpy_2arch.so",
            t / "host/libaxpy.so",
            t / "host/archives",
        )
        assert offloaded["schema_version"], offloaded

        # Failures raise KpackError with kpack's message and exit code.
        try:
            kpack.split_artifacts([t / "missing"], t / "out2")
        except kpack.KpackError as e:
            assert e.exit_code == 2, e
            assert "error:" in e.message and "missing" in e.message, e.message
        else:
            raise AssertionError("split of a missing artifact succeeded")
    print("python API: ok")


if __name__ == "__main__":
    main()

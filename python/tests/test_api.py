"""The `kpack` Python API, run from a venv with the kpack wheel installed
and nothing else (scripts/test-python.sh): the wheel's own binary, with
its embedded handlers, splits a TheRock artifact with rocBLAS databases.

Usage: python test_api.py FIXTURES_DIR
"""

import os
import shutil
import sys
import tempfile
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
            [artifact], t / "out", split_databases=["rocblas"]
        )
        (blas,) = result["artifacts"]
        assert blas["component"] == "blas_lib", blas
        assert blas["databases"]["rocblas"] == {"gfx90a": 2, "generic": 1}, blas
        arch = t / "out/blas_lib_gfx90a" / ROCBLAS / "lib/rocblas/library"
        assert (arch / "TensileLibrary_gfx90a.co").is_file()
        generic = t / "out/blas_lib_generic" / ROCBLAS / "lib/rocblas/library"
        assert (generic / "TensileLibrary.dat").is_file()

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

"""Python API over the ``kpack`` binary installed with this package.

``pip install kpack-cli`` puts the ``kpack`` executable on PATH (the wheel
carries it, with the standard database handlers embedded). These functions
run that binary with ``--json`` and return the parsed result, so build
scripts (TheRock's) need neither a subprocess wrapper nor a parser of their
own::

    import kpack

    result = kpack.split_artifacts(
        ["build/artifacts/blas_lib_gfx942"],
        "build/split",
        split_databases=["rocblas", "hipblaslt"],
    )
    for artifact in result["artifacts"]:
        print(artifact["component"], artifact["outputs"])

Every function raises :class:`KpackError` when ``kpack`` exits non-zero:
its message is ``kpack``'s own (``error: …`` and ``caused by: …`` lines),
``exit_code`` is 1 when ``kpack`` checked and found problems (``verify``)
and 2 on errors, and ``result`` holds the JSON ``kpack`` printed, if any.
The JSON schemas are ``kpack``'s (each document has ``schema_version``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

__all__ = [
    "KpackError",
    "find_kpack_bin",
    "run_json",
    "split_artifacts",
    "recombine_artifacts",
    "verify",
    "offload",
    "wheel_split",
]

#: A path argument: a string or any ``os.PathLike``.
StrPath = Union[str, "os.PathLike[str]"]

#: A parsed ``--json`` document.
JsonDict = Dict[str, Any]


class KpackError(Exception):
    """``kpack`` exited with a non-zero status.

    Attributes:
        message: what ``kpack`` printed on stderr (its ``error:`` line and
            the ``caused by:`` lines after it).
        exit_code: 1 for "checked and found problems", 2 for an error
            (another value if the process was killed).
        result: the ``--json`` document ``kpack`` printed on stdout before
            failing (``verify`` reports its findings this way; an error is
            ``{"schema_version": 1, "error": {"message", "causes",
            "exit_code"}}``), else ``None``.
    """

    def __init__(
        self, message: str, exit_code: int, result: Optional[JsonDict] = None
    ) -> None:
        super().__init__(message, exit_code)
        self.message = message
        self.exit_code = exit_code
        self.result = result

    def __str__(self) -> str:
        return f"kpack exited with {self.exit_code}: {self.message}"


def find_kpack_bin() -> str:
    """The ``kpack`` executable this package runs.

    ``$KPACK_BIN`` when set; else the one installed beside this package (the
    scripts directory of this interpreter's environment, or of the user
    scheme for ``pip install --user``); else ``kpack`` on PATH.

    Raises:
        FileNotFoundError: no ``kpack`` executable was found.
    """
    override = os.environ.get("KPACK_BIN")
    if override:
        return override
    exe = "kpack" + (sysconfig.get_config_var("EXE") or "")
    candidates = [sysconfig.get_path("scripts")]
    # `pip install --user` puts scripts in the user scheme's directory.
    user_scheme = {"nt": "nt_user", "posix": "posix_user"}.get(os.name)
    if user_scheme and user_scheme in sysconfig.get_scheme_names():
        candidates.append(sysconfig.get_path("scripts", scheme=user_scheme))
    for directory in candidates:
        if directory:
            path = os.path.join(directory, exe)
            if os.path.isfile(path) and os.access(path, os.X_OK):
                return path
    found = shutil.which(exe)
    if found:
        return found
    raise FileNotFoundError(
        f"no kpack executable beside {sys.executable} or on PATH; "
        "reinstall the kpack-cli wheel or set KPACK_BIN"
    )


def run_json(args: Sequence[StrPath], paths: Sequence[StrPath] = ()) -> JsonDict:
    """Run ``kpack ARGS... --json -- PATHS...`` and return the parsed JSON
    document. ``paths`` (the positional operands) come after ``--``, so a
    path that starts with ``-`` is never taken for a flag; give option
    values in ``args`` as ``--flag=value`` for the same reason.

    Raises:
        KpackError: ``kpack`` exited non-zero, or printed no JSON.
    """
    cmd = [
        find_kpack_bin(),
        *(os.fspath(a) for a in args),
        "--json",
        "--",
        *(os.fspath(p) for p in paths),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    result: Optional[JsonDict]
    try:
        result = json.loads(proc.stdout) if proc.stdout.strip() else None
    except json.JSONDecodeError:
        result = None
    if proc.returncode != 0:
        message = proc.stderr.strip() or f"{' '.join(cmd)} failed"
        raise KpackError(message, proc.returncode, result)
    if not isinstance(result, dict):
        raise KpackError(
            f"{' '.join(cmd)} printed no JSON object: {proc.stdout[:200]!r}",
            2,
        )
    return result


def _opt(flag: str, value: StrPath) -> str:
    """``--flag=value``: one argument, so a value starting with ``-`` stays a value."""
    return f"{flag}={os.fspath(value)}"


def _repeat(flag: str, values: Iterable[StrPath]) -> List[StrPath]:
    return [_opt(flag, v) for v in values]


def _archive_args(
    compression: Optional[str], level: Optional[int], jobs: Optional[int]
) -> List[StrPath]:
    out: List[StrPath] = []
    if compression is not None:
        out.append(_opt("--compression", compression))
    if level is not None:
        out.append(_opt("--level", str(level)))
    if jobs is not None:
        out.append(_opt("--jobs", str(jobs)))
    return out


def split_artifacts(
    inputs: Sequence[StrPath],
    output: StrPath,
    *,
    split_databases: Sequence[str] = (),
    plugins: Sequence[StrPath] = (),
    plugin_dirs: Sequence[StrPath] = (),
    registry: Optional[str] = None,
    batch: bool = False,
    component: Optional[str] = None,
    exclude_arch: Sequence[str] = (),
    archive_dir: Optional[str] = None,
    compression: Optional[str] = None,
    level: Optional[int] = None,
    jobs: Optional[int] = None,
) -> JsonDict:
    """``kpack split``: split TheRock build artifacts into a
    ``<component>_generic`` artifact plus one ``<component>_<arch>`` per
    GPU architecture, under ``output``.

    Args:
        inputs: artifact directories (with ``batch``, directories of them).
        output: the output directory.
        split_databases: database handlers to use, in probe order
            (``"rocblas"``, ``"hipblaslt@^0.1"``); the standard ones are
            embedded in ``kpack``.
        plugins: third-party handler components (``.wasm``).
        plugin_dirs: extra directories to look for handlers in.
        registry: resolve handler names from this registry.
        batch: treat each input as a directory of artifacts.
        component: override the component name.
        exclude_arch: GPU architectures to leave out.
        archive_dir: where archives go inside an artifact
            (default ``lib/.kpack``).
        compression: ``"zstd"`` (default) or ``"none"``.
        level: zstd level.
        jobs: worker threads (output is identical for any value).

    Returns:
        The ``kpack split --json`` document (``artifacts``: per artifact its
        ``component``, ``arches``, ``outputs``, ``databases`` counts, ...).
    """
    args: List[StrPath] = ["split", _opt("-o", output)]
    if batch:
        args.append("--batch")
    if component is not None:
        args.append(_opt("--component", component))
    if exclude_arch:
        args.append(_opt("--exclude-arch", ",".join(exclude_arch)))
    if archive_dir is not None:
        args.append(_opt("--archive-dir", archive_dir))
    if split_databases:
        args.append(_opt("--split-databases", ",".join(split_databases)))
    args += _repeat("--plugin", plugins)
    args += _repeat("--plugin-dir", plugin_dirs)
    if registry is not None:
        args.append(_opt("--registry", registry))
    args += _archive_args(compression, level, jobs)
    return run_json(args, inputs)


def recombine_artifacts(shards: StrPath, config: StrPath, output: StrPath) -> JsonDict:
    """``kpack recombine``: gather split shards (a directory of
    ``<component>_<arch>`` artifacts) into the package groups that
    ``config`` (JSON) describes, under ``output``, with every validation
    enforced.

    Returns:
        The ``kpack recombine --json`` document.
    """
    return run_json(["recombine", _opt("--config", config), _opt("-o", output)], [shards])


def verify(dirs: Sequence[StrPath]) -> JsonDict:
    """``kpack verify``: prove every ``.rocm_kpack_ref`` marker in ``dirs``
    (recombined packages, an install prefix, or site-packages) resolves to
    archives holding every target.

    Returns:
        The ``kpack verify --json`` document when nothing was found.

    Raises:
        KpackError: with ``exit_code`` 1 and the findings in ``result`` when
            a marker does not resolve; 2 on errors.
    """
    return run_json(["verify"], dirs)


def offload(
    input: StrPath,
    output: StrPath,
    archives: StrPath,
    *,
    name: Optional[str] = None,
    key: Optional[str] = None,
    search_paths: Sequence[str] = (),
    compression: Optional[str] = None,
    level: Optional[int] = None,
    jobs: Optional[int] = None,
) -> JsonDict:
    """``kpack offload``: move one binary's device code into
    ``archives/<name>_<processor>.kpack`` and write the host-only binary
    to ``output`` (``input`` is only read).

    Args:
        name: archive name (default: the output's file name).
        key: kernel name recorded in the marker.
        search_paths: archive search paths recorded in the marker.
        compression, level, jobs: as for :func:`split_artifacts`.

    Returns:
        The ``kpack offload --json`` document.
    """
    args: List[StrPath] = ["offload", _opt("-o", output), _opt("--archives", archives)]
    if name is not None:
        args.append(_opt("--name", name))
    if key is not None:
        args.append(_opt("--key", key))
    args += _repeat("--search-path", search_paths)
    args += _archive_args(compression, level, jobs)
    return run_json(args, [input])


def wheel_split(
    wheel: StrPath,
    output: StrPath,
    *,
    device_prefix: Optional[str] = None,
    archive_dir: Optional[str] = None,
    split_databases: Sequence[str] = (),
    plugins: Sequence[StrPath] = (),
    plugin_dirs: Sequence[StrPath] = (),
    registry: Optional[str] = None,
    gpu_targets: Sequence[str] = (),
    exclude_arch: Sequence[str] = (),
    group: Optional[str] = None,
    archive_group: Optional[str] = None,
    overlay_root: Optional[str] = None,
    device_requires_dist: Sequence[str] = (),
    output_format: Optional[str] = None,
    wheel_type: Optional[str] = None,
    generate_variant_wheel: bool = False,
    variant_label: Optional[str] = None,
    force: bool = False,
    dry_run: bool = False,
    compression: Optional[str] = None,
    level: Optional[int] = None,
    jobs: Optional[int] = None,
) -> JsonDict:
    """``kpack wheel split``: split a fat wheel into a host wheel plus one
    device wheel per GPU processor (or per group), in ``output``.

    Args:
        wheel: the fat wheel, or an unpacked wheel directory.
        device_prefix: device wheels are named ``<prefix>-<arch>``.
        archive_dir: archive directory relative to site-packages.
        split_databases, plugins, plugin_dirs, registry: database
            handlers, as for :func:`split_artifacts`.
        gpu_targets: keep only these GPU targets (``"gfx90a"``,
            ``"gfx90a:xnack+"``, ``"auto"`` for this machine's GPUs).
        exclude_arch: GPU targets to leave out.
        group: one device wheel per ``"target"``, ``"sub-family"`` or
            ``"family"`` of ROCm's packaging hierarchy, with
            ``device-<group>`` extras on the host wheel.
        archive_group: one archive per ``"target"``, ``"sub-family"`` or
            ``"family"``.
        overlay_root: AMD's layout, names and metadata (rocm-kpack's
            ``split_python_wheels``): the wheel directory whose fat binaries
            and databases are split (``"torch/"``); needs ``device_prefix``.
        device_requires_dist: with ``overlay_root``, more ``Requires-Dist``
            lines of every target device wheel, ``@GFXARCH@`` replaced by
            its target (``"rocm-sdk-device-@GFXARCH@ == 7.1"``).
        output_format: with ``overlay_root``, ``"wheel"`` (default) or
            ``"directory"`` (unpacked wheel directories).
        wheel_type: AMD's database preset, ``"torch-fat"``;
            ``split_databases`` replaces it.
        generate_variant_wheel: with ``overlay_root``, also write AMD's
            PEP 817 variant wheel (experimental), labelled ``variant_label``.
        force: replace wheels that already exist in ``output``.
        dry_run: report, write no wheel.
        compression, level, jobs: as for :func:`split_artifacts`.

    Returns:
        The ``kpack wheel split --json`` document: ``host``, ``devices``
        (each with its ``distribution``, ``file``, ``targets`` and
        ``archives``), ``variants`` (the variant wheels written, one per
        label in kpack's layout, AMD's one otherwise) and ``variants_json``
        (kpack's layout), ``binaries``, ``databases`` and ``warnings``.
    """
    args: List[StrPath] = ["wheel", "split", _opt("-o", output)]
    named = {
        "--device-prefix": device_prefix,
        "--archive-dir": archive_dir,
        "--registry": registry,
        "--group": group,
        "--archive-group": archive_group,
        "--overlay-root": overlay_root,
        "--output-format": output_format,
        "--wheel-type": wheel_type,
        "--variant-label": variant_label,
    }
    args += [_opt(flag, value) for flag, value in named.items() if value is not None]
    lists = {
        "--split-databases": split_databases,
        "--gpu-targets": gpu_targets,
        "--exclude-arch": exclude_arch,
    }
    args += [_opt(flag, ",".join(values)) for flag, values in lists.items() if values]
    args += _repeat("--device-requires-dist", device_requires_dist)
    args += _repeat("--plugin", plugins)
    args += _repeat("--plugin-dir", plugin_dirs)
    switches = {
        "--generate-variant-wheel": generate_variant_wheel,
        "--force": force,
        "--dry-run": dry_run,
    }
    args += [flag for flag, on in switches.items() if on]
    args += _archive_args(compression, level, jobs)
    return run_json(args, [wheel])

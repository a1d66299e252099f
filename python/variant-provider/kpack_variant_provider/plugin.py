"""The plugin: PEP 850's provider API (``get_supported_configs``,
``get_all_configs``), answering what AMD's provider (rocm-bootstrap 0.3.0,
``rocm_bootstrap.variant_provider:AMDVariantPlugin``) answers for the same
machine: the **target-level** package owners of the GPUs present
(``gfx1100``; ``gfx1250-strict`` is packaged with ``gfx1250``, xnack and
sramecc features are dropped), in detection order, ``multi_value=True``.

A variant built for a sub-family or family lists every processor its code
serves (``gfx110x`` -> ``gfx1100``, ``gfx1101``, ...), so one answer
selects variants of any grouping.

Detection reads the KFD topology as ``kpack detect`` does: only regular
files, at most :data:`MAX_PROPERTIES` bytes, UTF-8 (a node that breaks a
rule is skipped with a warning); forced targets are checked as ``kpack
detect`` checks them. The tables are kpack's (``kpack_amdgpu``); a test in
kpack holds them together.
"""

from __future__ import annotations

import logging
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Mapping, Optional, Tuple

NAMESPACE = "amd"
FEATURE = "gfx_arch"
DISABLE_ENV = "ROCM_BOOTSTRAP_DISABLE_DETECTION"
FORCE_ENV = "ROCM_BOOTSTRAP_FORCE_GFX_ARCH"
SYSFS_ENV = "KPACK_SYSFS_ROOT"
TOPOLOGY = "class/kfd/kfd/topology/nodes"
# The most bytes read of a KFD `properties` file (real ones are under 1 KiB).
MAX_PROPERTIES = 16 << 10

log = logging.getLogger("kpack_variant_provider")

# (sub-family key, family key, member processors): rocm-bootstrap 0.3.0's
# packaging hierarchy.
CHAINS: Tuple[Tuple[str, str, Tuple[str, ...]], ...] = (
    ("gfx9_0", "gfx9", ("gfx900", "gfx902", "gfx904", "gfx906", "gfx908", "gfx909", "gfx90a", "gfx90c")),
    ("gfx9_4", "gfx9", ("gfx942",)),
    ("gfx9_5", "gfx9", ("gfx950",)),
    ("gfx10_1", "gfx10", ("gfx1010", "gfx1011", "gfx1012", "gfx1013")),
    ("gfx10_3", "gfx10", ("gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036")),
    ("gfx110x", "gfx11", ("gfx1100", "gfx1101", "gfx1102", "gfx1103")),
    ("gfx115x", "gfx11", ("gfx1150", "gfx1151", "gfx1152", "gfx1153")),
    ("gfx12_0", "gfx12", ("gfx1200", "gfx1201")),
    ("gfx12_5", "gfx12", ("gfx1250", "gfx1250-strict", "gfx1251")),
)

# Targets packaged with another processor.
OWNERS = {"gfx1250-strict": "gfx1250"}

# Every processor LLVM gives an EF_AMDGPU_MACH value (generic targets left
# out: they name code, not a GPU); kpack_amdgpu's MACH_TABLE.
PROCESSORS = frozenset(
    (
        "gfx600 gfx601 gfx602 gfx700 gfx701 gfx702 gfx703 gfx704 gfx705 gfx801 gfx802 gfx803 gfx805 "
        "gfx810 gfx900 gfx902 gfx904 gfx906 gfx908 gfx909 gfx90a gfx90c gfx940 gfx941 gfx942 gfx950 "
        "gfx1010 gfx1011 gfx1012 gfx1013 gfx1030 gfx1031 gfx1032 gfx1033 gfx1034 gfx1035 gfx1036 "
        "gfx1100 gfx1101 gfx1102 gfx1103 gfx1150 gfx1151 gfx1152 gfx1153 gfx1154 gfx1170 gfx1171 "
        "gfx1172 gfx1200 gfx1201 gfx1250 gfx1251 gfx1310"
    ).split()
)

_PREFIX = "amdgcn-amd-amdhsa--"
_PROCESSOR = re.compile(r"[A-Za-z0-9_-]+")
_FEATURE = re.compile(r"([A-Za-z0-9]+)[+-]")


class ForcedTargetError(ValueError):
    """A name in ``ROCM_BOOTSTRAP_FORCE_GFX_ARCH`` that is not a GPU target."""


@dataclass(frozen=True)
class VariantFeatureConfig:
    """One feature and its values, most preferred first."""

    name: str
    values: List[str] = field(default_factory=list)
    multi_value: bool = True


def _processor(target: str) -> str:
    t = target.strip()
    if t.startswith(_PREFIX):
        t = t[len(_PREFIX):]
    return t.split(":", 1)[0]


def owner(target: str) -> str:
    """The target-level package of a target id (``gfx90a:xnack+`` ->
    ``gfx90a``, ``gfx1250-strict`` -> ``gfx1250``)."""
    p = _processor(target)
    return OWNERS.get(p, p)


def chain(target: str) -> Tuple[str, Optional[str], Optional[str]]:
    """(target, sub-family, family) keys; the last two are None for a
    processor rocm-bootstrap does not package."""
    p = _processor(target)
    for sub, fam, members in CHAINS:
        if p in members:
            return owner(p), sub, fam
    return owner(p), None, None


def properties_for(targets: List[str]) -> List[str]:
    """The ``gfx_arch`` values for GPUs of these targets: their package
    owners in the given order, duplicates dropped."""
    out: List[str] = []
    for t in targets:
        v = owner(t)
        if v and v not in out:
            out.append(v)
    return out


def all_values() -> List[str]:
    """Every value rocm-bootstrap packages (target level)."""
    return properties_for([p for _, _, members in CHAINS for p in members])


def check_forced(name: str) -> str:
    """A forced name as ``kpack detect`` takes it: a target id (optional
    ``amdgcn-amd-amdhsa--`` prefix, ``:xnack+`` style features) of a
    processor LLVM knows; returns the processor with its ``-strict``."""

    def bad(why: str) -> ForcedTargetError:
        return ForcedTargetError(f"{FORCE_ENV}: {name!r} is not a GPU target ({why})")

    t = name[len(_PREFIX):] if name.startswith(_PREFIX) else name
    processor, *features = t.split(":")
    if not _PROCESSOR.fullmatch(processor):
        raise bad("bad processor name")
    seen = set()
    for f in features:
        m = _FEATURE.fullmatch(f)
        if not m:
            raise bad("a feature must end in + or -")
        if m.group(1) in seen:
            raise bad("feature given twice")
        seen.add(m.group(1))
    base = processor[: -len("-strict")] if processor.endswith("-strict") else processor
    if base not in PROCESSORS:
        raise bad("unknown processor")
    return processor


def read_properties(path: Path) -> Optional[str]:
    """The text of a KFD ``properties`` file; None when there is none.
    Raises OSError or ValueError saying why a file is not read: not a
    regular file (a FIFO would block, a device never end), longer than
    :data:`MAX_PROPERTIES`, not UTF-8."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise ValueError("not a regular file")
        data = f.read(MAX_PROPERTIES + 1)
    if len(data) > MAX_PROPERTIES:
        raise ValueError(f"longer than {MAX_PROPERTIES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"not UTF-8 at byte {e.start:#x}") from None


def _props(text: str) -> dict:
    props = {}
    for line in text.splitlines():
        words = line.split()
        # A u64, as kpack detect reads it: a longer number is no value.
        v = words[1] if len(words) == 2 else ""
        if v.isascii() and v.isdigit() and len(v) <= 20 and int(v) < 1 << 64:
            props[words[0]] = int(v)
    return props


def decode_gfx_target_version(v: int) -> Optional[str]:
    """``90010`` -> ``gfx90a``; None when a part does not fit one hex digit."""
    major, minor, step = v // 10000, (v % 10000) // 100, v % 100
    if major == 0 or minor > 0xF or step > 0xF:
        return None
    return f"gfx{major}{minor:x}{step:x}"


def kfd_targets(nodes: Path, notes: List[str]) -> List[str]:
    """The GPU targets of the topology at ``nodes`` (node directories sorted
    by name as strings, as rocm-bootstrap sorts them); skipped nodes are
    said in ``notes``."""
    try:
        names = sorted(n.name for n in nodes.iterdir() if n.name.isascii() and n.name.isdigit() and n.is_dir())
    except OSError:
        return []
    out = []
    for name in names:
        path = nodes / name / "properties"
        try:
            text = read_properties(path)
        except (OSError, ValueError) as e:
            notes.append(f"{path}: {e}; node skipped")
            continue
        if text is None:
            continue
        props = _props(text)
        simds, v = props.get("simd_count"), props.get("gfx_target_version")
        if not simds or not v:
            continue
        target = decode_gfx_target_version(v)
        if target is None:
            notes.append(f"{path}: gfx_target_version {v} names no GPU target; node skipped")
            continue
        out.append(target)
    return out


def detect(env: Optional[Mapping[str, str]] = None) -> Tuple[List[str], List[str]]:
    """(targets, notes): the targets of this machine's GPUs, one per GPU:
    none when disabled, the forced ones (checked; ForcedTargetError), or
    the KFD topology's under ``KPACK_SYSFS_ROOT`` (default ``/sys``)."""
    env = os.environ if env is None else env
    notes: List[str] = []
    if env.get(DISABLE_ENV) == "1":
        return [], notes
    force = env.get(FORCE_ENV) or ""
    if force:
        names = [n.strip() for n in force.split(",")]
        return [check_forced(n) for n in names if n], notes
    root = Path(env.get(SYSFS_ENV) or "/sys")
    return kfd_targets(root / TOPOLOGY, notes), notes


def detect_targets(env: Optional[Mapping[str, str]] = None) -> List[str]:
    """The distinct targets of this machine's GPUs, first occurrence first;
    notes go to the log."""
    targets, notes = detect(env)
    for n in notes:
        log.warning("%s", n)
    out: List[str] = []
    for t in targets:
        if t not in out:
            out.append(t)
    return out


class AmdVariantPlugin:
    """The provider for namespace ``amd``."""

    namespace = NAMESPACE
    is_aot_plugin = False

    @classmethod
    def get_all_configs(cls) -> List[VariantFeatureConfig]:
        return [VariantFeatureConfig(name=FEATURE, values=all_values(), multi_value=True)]

    @classmethod
    def get_supported_configs(cls) -> List[VariantFeatureConfig]:
        values = properties_for(detect_targets())
        if not values:
            return []
        return [VariantFeatureConfig(name=FEATURE, values=values, multi_value=True)]

"""The plugin: PEP 826's provider API (``get_supported_configs``,
``get_all_configs``) over rocm-bootstrap's detection and packaging chain.

The chain table is rocm-bootstrap 0.3.0's (kpack's ``kpack_amdgpu`` family
table); a test in kpack holds the two together.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Mapping, Optional, Tuple

NAMESPACE = "amd"
FEATURE = "gfx_arch"

# (sub-family key, family key, member processors)
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

@dataclass(frozen=True)
class VariantFeatureConfig:
    """One feature and its values, most preferred first."""

    name: str
    values: List[str] = field(default_factory=list)
    multi_value: bool = False

def _processor(target: str) -> str:
    t = target.strip()
    if t.startswith("amdgcn-amd-amdhsa--"):
        t = t[len("amdgcn-amd-amdhsa--"):]
    return t.split(":", 1)[0]

def chain(target: str) -> Tuple[str, Optional[str], Optional[str]]:
    """(target, sub-family, family) keys; the last two are None for a
    processor rocm-bootstrap does not package."""
    p = _processor(target)
    owner = OWNERS.get(p, p)
    for sub, fam, members in CHAINS:
        if p in members:
            return owner, sub, fam
    return owner, None, None

def properties_for(targets: List[str]) -> List[str]:
    """All targets, then all sub-families, then all families, each level in
    the given order, duplicates dropped."""
    chains = [chain(t) for t in targets]
    out: List[str] = []
    for level in range(3):
        for c in chains:
            v = c[level]
            if v and v not in out:
                out.append(v)
    return out

def all_values() -> List[str]:
    """Every value rocm-bootstrap packages."""
    return properties_for([p for _, _, members in CHAINS for p in members])

def _kfd_targets(nodes: Path) -> List[str]:
    try:
        names = sorted(n.name for n in nodes.iterdir() if n.name.isdigit() and n.name.isascii())
    except OSError:
        return []
    out = []
    for name in names:
        try:
            text = (nodes / name / "properties").read_text()
        except OSError:
            continue
        props = {}
        for line in text.splitlines():
            words = line.split()
            if len(words) == 2 and words[1].isdigit() and words[1].isascii():
                props[words[0]] = int(words[1])
        simds, v = props.get("simd_count"), props.get("gfx_target_version")
        if not simds or not v:
            continue
        major, minor, step = v // 10000, (v % 10000) // 100, v % 100
        if major == 0 or minor > 0xF or step > 0xF:
            continue
        out.append(f"gfx{major}{minor:x}{step:x}")
    return out

def detect_targets(env: Optional[Mapping[str, str]] = None) -> List[str]:
    """The distinct targets of this machine's GPUs: disabled, forced, or the
    KFD topology (nodes sorted by name as strings)."""
    env = os.environ if env is None else env
    if env.get("ROCM_BOOTSTRAP_DISABLE_DETECTION") == "1":
        return []
    force = env.get("ROCM_BOOTSTRAP_FORCE_GFX_ARCH", "")
    if force.strip():
        found = [_processor(t) for t in force.split(",")]
    else:
        root = Path(env.get("KPACK_SYSFS_ROOT") or "/sys")
        found = _kfd_targets(root / "class/kfd/kfd/topology/nodes")
    out: List[str] = []
    for t in found:
        if t and t not in out:
            out.append(t)
    return out

class AmdVariantPlugin:
    """The provider for namespace ``amd``."""

    namespace = NAMESPACE
    # The supported values depend on the machine.
    all_properties_compatible = False

    @classmethod
    def get_all_configs(cls) -> List[VariantFeatureConfig]:
        return [VariantFeatureConfig(name=FEATURE, values=all_values(), multi_value=False)]

    @classmethod
    def get_supported_configs(cls) -> List[VariantFeatureConfig]:
        values = properties_for(detect_targets())
        if not values:
            return []
        return [VariantFeatureConfig(name=FEATURE, values=values, multi_value=False)]

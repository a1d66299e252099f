"""AMD wheel-variant provider: the ``amd :: gfx_arch`` properties of this machine."""

from kpack_variant_provider.plugin import (
    FEATURE,
    NAMESPACE,
    AmdVariantPlugin,
    ForcedTargetError,
    all_values,
    chain,
    detect,
    detect_targets,
    properties_for,
)

__version__ = "0.2.0"

__all__ = [
    "FEATURE",
    "NAMESPACE",
    "AmdVariantPlugin",
    "ForcedTargetError",
    "all_values",
    "chain",
    "detect",
    "detect_targets",
    "properties_for",
]

"""AMD wheel-variant provider: the ``amd :: gfx_arch`` properties of this machine."""

from kpack_variant_provider.plugin import (
    FEATURE,
    NAMESPACE,
    AmdVariantPlugin,
    all_values,
    chain,
    detect_targets,
    properties_for,
)

__version__ = "0.1.0"

__all__ = [
    "FEATURE",
    "NAMESPACE",
    "AmdVariantPlugin",
    "all_values",
    "chain",
    "detect_targets",
    "properties_for",
]

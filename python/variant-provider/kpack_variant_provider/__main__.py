"""``python -m kpack_variant_provider``: print this machine's properties."""

from kpack_variant_provider.plugin import FEATURE, NAMESPACE, detect_targets, properties_for

for value in properties_for(detect_targets()):
    print(f"{NAMESPACE} :: {FEATURE} :: {value}")

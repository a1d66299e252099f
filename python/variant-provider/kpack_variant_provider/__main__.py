"""``python -m kpack_variant_provider``: print this machine's properties,
one ``amd :: gfx_arch :: <value>`` line each; warnings on stderr; a forced
name that is not a GPU target is an error (exit 2)."""

import sys

from kpack_variant_provider.plugin import FEATURE, NAMESPACE, ForcedTargetError, detect, properties_for


def main() -> int:
    try:
        targets, notes = detect()
    except ForcedTargetError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for n in notes:
        print(f"warning: {n}", file=sys.stderr)
    for value in properties_for(targets):
        print(f"{NAMESPACE} :: {FEATURE} :: {value}")
    return 0


sys.exit(main())

"""``python -m kpack ARGS...``: run the bundled ``kpack`` binary."""

import os
import subprocess
import sys

from kpack import find_kpack_bin


def main() -> int:
    """Run ``kpack`` with this process's arguments; return its exit status."""
    kpack = find_kpack_bin()
    if sys.platform == "win32":
        return subprocess.run([kpack, *sys.argv[1:]], check=False).returncode
    # Replace this process, as the console script would be.
    os.execvp(kpack, [kpack, *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())

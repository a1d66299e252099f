#!/usr/bin/env python3
"""Keep kpack's functions short enough to read: count the lines of every
non-test Rust function and fail when too many are long.

Usage:
    scripts/fnlen.py [ROOT...] [--show N] [--max-lines 150] [--long 80] [--max-long 15]

ROOT defaults to the repository (this script's parent directory). Test code
is not counted: `tests/`, `examples/`, `benches/`, `bench/`, `fuzz/`,
`target/` directories, `build.rs`, and any item (module or function) marked
`#[cfg(test)]`. A function's length runs from its `fn` line to its closing
brace; braces inside comments, strings and character literals do not count.

Prints each function longer than `--show` lines (default: `--long`),
longest first, as `LINES path:line name`, then one summary line
`N_over_long N_over_max longest functions`.

Exit status: 0 when no function is over `--max-lines` and at most
`--max-long` are over `--long`; 1 when either limit is broken; 2 on a
usage error or an unreadable root.

Examples:
    scripts/fnlen.py                       # the whole repository, the house limits
    scripts/fnlen.py host/split --show 60  # one crate, a closer look
"""
import argparse
import os
import re
import sys

SKIPPED_DIRS = {"tests", "examples", "benches", "bench", "fuzz", "target", ".git"}

# A function item at the start of a line, with any qualifiers before `fn`.
FN_ITEM = re.compile(
    r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?"
    r'(?:extern\s+"[^"]*"\s+)?fn\s+([A-Za-z_][A-Za-z0-9_]*)'
)
RAW_STRING_START = re.compile(r'r(#*)"')
CHAR_LITERAL = re.compile(r"'(?:\\[xu][^']*|\\.|[^\\'])'")


def _spaces(text):
    """`text` with everything but line breaks turned into spaces."""
    return re.sub(r"[^\n]", " ", text)


def strip_literals(src):
    """Blank out comments, string and char literals, keeping line breaks, so
    that only the braces of code are left to count."""
    out = []
    i, n = 0, len(src)
    while i < n:
        if src.startswith("//", i):
            end = src.find("\n", i)
            end = n if end < 0 else end
        elif src.startswith("/*", i):
            end = src.find("*/", i + 2)
            end = n if end < 0 else end + 2
        elif src[i] == "r" and RAW_STRING_START.match(src, i) and (
            i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")
        ):
            hashes = RAW_STRING_START.match(src, i).group(1)
            close = src.find('"' + hashes, i + 2 + len(hashes))
            end = n if close < 0 else close + 1 + len(hashes)
        elif src[i] == '"':
            end = i + 1
            while end < n and src[end] != '"':
                end += 2 if src[end] == "\\" else 1
            end += 1
        elif src[i] == "'" and CHAR_LITERAL.match(src, i):
            end = CHAR_LITERAL.match(src, i).end()
        else:
            out.append(src[i])
            i += 1
            continue
        out.append(_spaces(src[i:end]))
        i = end
    return "".join(out)


def _item_end(lines, start):
    """Index of the line closing the braced item that begins at `start`,
    or None when it ends with `;` before any brace (no body)."""
    depth, opened = 0, False
    for k in range(start, len(lines)):
        line = lines[k]
        if not opened and ";" in line and "{" not in line:
            return None
        depth += line.count("{") - line.count("}")
        opened = opened or "{" in line
        if opened and depth <= 0:
            return k
    return None


def functions(path):
    """(name, first line, length in lines) of each non-test function in `path`."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = strip_literals(f.read()).split("\n")
    test_lines = set()
    for k, line in enumerate(lines):
        if line.strip().startswith("#[cfg(test)]"):
            depth, opened = 0, False
            for m in range(k, len(lines)):
                depth += lines[m].count("{") - lines[m].count("}")
                opened = opened or "{" in lines[m]
                test_lines.add(m)
                if opened and depth <= 0:
                    break
    for k, line in enumerate(lines):
        if k in test_lines:
            continue
        m = FN_ITEM.match(line)
        if not m:
            continue
        end = _item_end(lines, k)
        if end is not None:
            yield m.group(1), k + 1, end - k + 1


def measure(root):
    """Every counted function under `root`: (lines, path, line, name)."""
    found = []
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in SKIPPED_DIRS)
        for f in sorted(files):
            if f.endswith(".rs") and f != "build.rs":
                p = os.path.join(d, f)
                for name, line, n in functions(p):
                    found.append((n, os.path.relpath(p), line, name))
    return found


def main(argv):
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(
        description="Lengths of non-test Rust functions, checked against limits."
    )
    ap.add_argument("roots", nargs="*", default=[here], metavar="ROOT")
    ap.add_argument("--max-lines", type=int, default=150, help="no function longer (150)")
    ap.add_argument("--long", type=int, default=80, help="what counts as long (80)")
    ap.add_argument("--max-long", type=int, default=15, help="how many may be long (15)")
    ap.add_argument("--show", type=int, help="print functions longer than this [--long]")
    args = ap.parse_args(argv)
    for r in args.roots:
        if not os.path.isdir(r):
            print(f"fnlen: {r}: not a directory", file=sys.stderr)
            return 2
    found = sorted((x for r in args.roots for x in measure(r)), reverse=True)
    show = args.long if args.show is None else args.show
    for n, p, line, name in found:
        if n > show:
            print(f"{n:5d} {p}:{line} {name}")
    long_ones = sum(1 for f in found if f[0] > args.long)
    too_long = sum(1 for f in found if f[0] > args.max_lines)
    longest = found[0][0] if found else 0
    print(f"{long_ones} {too_long} {longest} {len(found)}")
    ok = True
    if too_long:
        print(f"fnlen: {too_long} function(s) over {args.max_lines} lines", file=sys.stderr)
        ok = False
    if long_ones > args.max_long:
        print(
            f"fnlen: {long_ones} functions over {args.long} lines (at most {args.max_long})",
            file=sys.stderr,
        )
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

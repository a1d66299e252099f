#!/usr/bin/env python3
"""Module cycles inside each crate of the workspace, read from `crate::` / `super::` paths.

usage: scripts/modcycles.py [REPO]   -> one line per cycle ("crate: a <-> b <-> c"), last
line "N cycles"; exit 1 when there is one (the test command runs it: modules of a crate
depend on each other one way, so each can be read, tested and moved on its own).
A node is a top-level module of a crate (a file or folder directly under src/); an edge a -> b means
a file of module a names `crate::b` (or `super::b` from a direct child). Test modules are skipped.
"""
import os, re, sys

def crates(repo):
    for root, dirs, files in os.walk(repo):
        dirs[:] = [d for d in dirs if d not in ("target", ".git", "fuzz", "node_modules")]
        if "Cargo.toml" in files and os.path.isdir(os.path.join(root, "src")):
            yield os.path.relpath(root, repo), os.path.join(root, "src")

def strip_tests(text):
    # drop `#[cfg(test)] mod x { ... }` blocks (brace matching) and test files
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0); j += 1
        i = j
    out.append(text[i:])
    return "".join(out)

def graph(src):
    top = {}
    for root, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            p = os.path.join(root, f); rel = os.path.relpath(p, src).split(os.sep)
            if rel[0] in ("lib.rs", "main.rs") or "tests" in rel or f == "tests.rs":
                continue
            mod = rel[0][:-3] if len(rel) == 1 else rel[0]
            top.setdefault(mod, []).append(p)
    edges = {m: set() for m in top}
    for m, paths in top.items():
        for p in paths:
            t = strip_tests(open(p, encoding="utf-8", errors="replace").read())
            for n in re.findall(r"\bcrate::(\w+)", t):
                if n in top and n != m:
                    edges[m].add(n)
            # `use crate::{a, b::c}` groups
            for grp in re.findall(r"\bcrate::\{([^}]*)\}", t):
                for n in re.findall(r"(?:^|,)\s*(\w+)", grp):
                    if n in top and n != m:
                        edges[m].add(n)
            if len(os.path.relpath(p, src).split(os.sep)) == 1:
                for n in re.findall(r"\bsuper::(\w+)", t):
                    if n in top and n != m:
                        edges[m].add(n)
    return edges

def sccs(edges):
    index, low, stack, on, out, c = {}, {}, [], set(), [], [0]
    def visit(v):
        index[v] = low[v] = c[0]; c[0] += 1; stack.append(v); on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1: out.append(sorted(comp))
    sys.setrecursionlimit(10000)
    for v in edges:
        if v not in index: visit(v)
    return out

n = 0
for name, src in sorted(crates(sys.argv[1] if len(sys.argv) > 1 else ".")):
    for comp in sccs(graph(src)):
        n += 1; print(f"{name}: {' <-> '.join(comp)}")
print(f"{n} cycles")
sys.exit(1 if n else 0)

#!/usr/bin/env python3
"""Modules of a crate that import each other in a circle.

    python3 scripts/module-cycles.py            # both crates; exit 1 when a cycle exists

A module is a file under src/ (`a/mod.rs` is `a`). An edge a -> b is any path in a's code
(comments and `#[cfg(test)]` modules left out) that names b: `crate::b::...`, or `super::b` / `self::b` resolved from a.
Cycles are the strongly connected components with more than one module (Tarjan)."""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CRATES = ["operator", "kube-sim"]
PATH = re.compile(r"\b(crate|super|self)((?:::[a-z_][a-z0-9_]*)+)")


def modules(src: Path) -> dict[str, Path]:
    out = {}
    for f in src.rglob("*.rs"):
        rel = f.relative_to(src).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] in ("mod", "lib", "main"):
            parts = parts[:-1]
        out["/".join(parts)] = f
    return out


def code(f: Path) -> str:
    """The file without comments and without its `#[cfg(test)] mod` bodies (a test may use
    what its module is built from)."""
    text = re.sub(r"//[^\n]*", "", f.read_text())
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    test_mod = r"#\[cfg\(test\)\]\s*(?:pub(?:\([a-z]+\))?\s+)?mod \w+\s*\{"
    while m := re.search(test_mod, text):
        depth, i = 1, m.end()
        while depth and i < len(text):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        text = text[: m.start()] + text[i:]
    return text


def target(mods: dict[str, Path], here: str, root: str, segs: list[str]) -> str | None:
    base = [] if root == "crate" else here.split("/") if here else []
    if root == "super":
        base = base[:-1]
    while segs and segs[0] == "super":
        base, segs = base[:-1], segs[1:]
    best = None
    for i in range(1, len(segs) + 1):
        name = "/".join(base + segs[:i])
        if name in mods:
            best = name
    return best


def edges(mods: dict[str, Path]) -> dict[str, set[str]]:
    out = {m: set() for m in mods}
    for m, f in mods.items():
        for root, rest in PATH.findall(code(f)):
            t = target(mods, m, root, rest.strip(":").split("::"))
            if t and t != m and not m.startswith(t + "/") and not t.startswith(m + "/"):
                out[m].add(t)
    return out


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(g):
        if v not in index:
            visit(v)
    return found


def main() -> int:
    bad = 0
    for crate in CRATES:
        mods = modules(ROOT / crate / "src")
        for c in cycles(edges(mods)):
            print(f"{crate}: {' <-> '.join(c)}")
            bad += 1
        print(f"{crate}: {len(mods)} modules checked")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

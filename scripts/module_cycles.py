#!/usr/bin/env python3
"""No module of a crate uses, directly or through others, a module that uses it.

Reads every crate's `src/` (each file a module; `mod.rs`/`lib.rs` as usual), takes
the `crate::...` and `super::...` paths each file names (in `use` lines and in
code, `use crate::{a, b::c}` groups included), resolves each to the deepest module
file it reaches, and fails listing every pair of modules that reach each other.
The crate root (lib.rs/main.rs) is left out: it declares every module. A textual
reading, not the compiler's: a path built by a macro is not seen.

Usage: scripts/module_cycles.py [crate dir...] (default: crates/*, services/*, tests-e2e)
"""
import glob
import os
import re
import sys


def modules(src):
    files = {}
    for dp, _, fn in os.walk(src):
        for f in fn:
            if f.endswith(".rs"):
                rel = os.path.relpath(os.path.join(dp, f), src)[:-3].split("/")
                if rel[-1] == "mod":
                    rel = rel[:-1]
                if rel in (["lib"], ["main"]):
                    rel = []
                with open(os.path.join(dp, f), encoding="utf-8") as fh:
                    files[tuple(rel)] = re.sub(r"//.*", "", fh.read())
    return files


def edges_of(files):
    def resolve(path):
        for i in range(len(path), -1, -1):
            if tuple(path[:i]) in files:
                return tuple(path[:i])
        return ()

    ident = re.compile(r"^[a-z_][a-z0-9_]*$")
    edges = {k: set() for k in files}
    for mod, src in files.items():
        targets = []
        for m in re.finditer(r"crate::((?:[a-z_][a-z0-9_]*::)*)\{([^}]*)\}", src):
            pre = [x for x in m.group(1).split("::") if x]
            for item in m.group(2).split(","):
                item = item.strip().split(" as ")[0]
                targets.append(pre + [x for x in item.split("::") if ident.match(x)])
        for m in re.finditer(r"crate::((?:[a-z_][a-z0-9_]*::?)+)", src):
            targets.append([x for x in m.group(1).split("::") if ident.match(x)])
        for m in re.finditer(r"(?<![a-z_:])super::((?:[a-z_][a-z0-9_]*::?)*)", src):
            targets.append(list(mod[:-1]) + [x for x in m.group(1).split("::") if ident.match(x)])
        for t in targets:
            r = resolve(t)
            if r not in (mod, ()):
                edges[mod].add(r)
    return edges


def cycles(edges):
    def reach(a):
        seen, stack = set(), [a]
        while stack:
            for y in edges.get(stack.pop(), ()):
                if y not in seen:
                    seen.add(y)
                    stack.append(y)
        return seen

    found = set()
    for a in edges:
        for b in edges[a]:
            if a in reach(b):
                found.add(tuple(sorted(("::".join(a), "::".join(b)))))
    return sorted(found)


def main():
    crates = sys.argv[1:] or sorted(glob.glob("crates/*") + glob.glob("services/*") + ["tests-e2e"])
    bad = 0
    for c in crates:
        src = os.path.join(c, "src")
        if not os.path.isdir(src):
            continue
        for a, b in cycles(edges_of(modules(src))):
            print(f"module cycle in {c}: {a} <-> {b}", file=sys.stderr)
            bad += 1
    if bad:
        sys.exit(1)
    print(f"module cycles: none in {len(crates)} crates")


if __name__ == "__main__":
    main()

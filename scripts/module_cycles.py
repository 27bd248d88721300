#!/usr/bin/env python3
"""No module of a crate uses, directly or through others, a module that uses it.

Reads every crate's `src/` (each file a module; `mod.rs`/`lib.rs` as usual), takes
the `crate::...` and `super::...` paths each file names and the bare or `self::`
paths by which a module reaches its own child modules (in `use` lines and in
code, `use crate::{a, b::c}` groups included), resolves each to the deepest module
file it reaches, and fails listing every pair of modules that reach each other.
The crate root (lib.rs/main.rs) is left out: it declares every module. A textual
reading, not the compiler's: a path built by a macro is not seen.

Usage: scripts/module_cycles.py [crate dir...] (default: crates/*, services/*, tests-e2e)
       scripts/module_cycles.py --self-test
"""
import glob
import os
import re
import sys
import tempfile


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


def inline_modules(src, path):
    """The file's text split into (text, module path) parts: the body of an
    inline `mod name { .. }` (a `tests` module, say) is module `path + (name,)`,
    so its `super::` is the file's own module, not the file's parent."""
    parts, rest, i = [], [], 0
    for m in re.finditer(r"\bmod\s+([a-z_][a-z0-9_]*)\s*\{", src):
        if m.start() < i:
            continue
        depth, j = 1, m.end()
        while j < len(src) and depth:
            depth += {"{": 1, "}": -1}.get(src[j], 0)
            j += 1
        rest.append(src[i : m.start()])
        parts += inline_modules(src[m.end() : j - 1], path + (m.group(1),))
        i = j
    rest.append(src[i:])
    return [("".join(rest), path)] + parts


IDENT = re.compile(r"^[a-z_][a-z0-9_]*$")


def group_items(body):
    """The paths of a group's body (`a, b::C, d::{e, f::g}`), nested groups
    expanded, as lists of lowercase segments."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(body + ","):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            items.append(body[start:i].strip())
            start = i + 1
    found = []
    for item in filter(None, items):
        head, brace, tail = item.partition("{")
        pre = [x for x in head.split("::") if IDENT.match(x)]
        if brace:
            found += [pre + p for p in group_items(tail[: tail.rfind("}")])]
        else:
            found.append([x for x in item.split(" as ")[0].split("::") if IDENT.match(x)])
    return found


def paths_after(prefix, src):
    """Each path that follows `prefix` (a regex ending in `::`), groups
    (`a::{b, c::{d, e}}`) expanded, as (prefix's group, lowercase segments)."""
    found = []
    for m in re.finditer(prefix + r"((?:[a-z_][a-z0-9_]*::)*)\{", src):
        depth, j = 1, m.end()
        while j < len(src) and depth:
            depth += {"{": 1, "}": -1}.get(src[j], 0)
            j += 1
        pre = [x for x in m.group(2).split("::") if x]
        found += [(m.group(1), pre + p) for p in group_items(src[m.end() : j - 1])]
    for m in re.finditer(prefix + r"((?:[a-z_][a-z0-9_]*::?)*)", src):
        if src[m.end() : m.end() + 1] == "{":
            continue  # a group: its items are above, not the path before it
        found.append((m.group(1), [x for x in m.group(2).split("::") if IDENT.match(x)]))
    return found


def edges_of(files):
    def resolve(path):
        for i in range(len(path), -1, -1):
            if tuple(path[:i]) in files:
                return tuple(path[:i])
        return ()

    edges = {k: set() for k in files}
    for mod, whole in files.items():
        targets = []
        for src, at in inline_modules(whole, mod):
            for _, p in paths_after(r"()(?<![A-Za-z0-9_:])crate::", src):
                targets.append(p)
            for _, p in paths_after(r"()(?<![A-Za-z0-9_:])super::", src):
                targets.append(list(at[:-1]) + p)
            # A module reaching its own child by a bare path (`pub use
            # wallet::Wallet`, `store::insert(..)`, `self::store::..`).
            children = {k[-1] for k in files if len(k) == len(at) + 1 and k[: len(at)] == at}
            for child, p in paths_after(r"(?<![A-Za-z0-9_:])(?:self::)?([a-z_][a-z0-9_]*)::", src):
                if child in children:
                    targets.append(list(at) + [child] + p)
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


def self_test():
    """A parent reaching its child by a bare path and the child using the
    parent is a cycle; a child's inline `mod tests { use super::*; }` and a
    nested group naming only siblings are not."""
    files = {
        "lib.rs": "mod a;\nmod p;\nmod q;\n",
        "a/mod.rs": "mod b;\npub use b::Thing;\npub fn shared() {}\n",
        "a/b.rs": "use super::shared;\npub struct Thing;\n",
        "p/mod.rs": "mod c;\npub fn g() { c::f() }\n",
        "p/c.rs": "pub fn f() {}\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
        "q/mod.rs": "mod r;\nmod s;\npub use s::S;\n",
        "q/r.rs": "pub struct R;\n",
        "q/s.rs": "use super::{r::{self, R}};\npub struct S(R);\n",
    }
    with tempfile.TemporaryDirectory() as d:
        for name, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(d, name)), exist_ok=True)
            with open(os.path.join(d, name), "w", encoding="utf-8") as fh:
                fh.write(text)
        got = cycles(edges_of(modules(d)))
    if got != [("a", "a::b")]:
        sys.exit(f"module_cycles self-test: expected [('a', 'a::b')], got {got}")
    print("module cycles self-test: ok")


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
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

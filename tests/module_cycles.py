"""No module of a crate imports, through others, a module that imports it: fails on the first import circle.

Reads every crate of the workspace (`src/` of each member in the root Cargo.toml), takes each file's module paths
(`crate::a::b`, `super::c`, `self::d`, in `use` declarations and in code, comments left out) and resolves each to the
deepest module file that exists. A module's own `mod.rs` or `lib.rs` naming its child modules (declaring or
re-exporting them) is its face, not an import. Then every strongly connected component of more than one file is
a circle, printed with the imports that tie it.

Run by `make test` (`make cycles`); needs only Python.
"""
import os
import re
import sys
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)*)(::\{)?")


def members():
    with open(os.path.join(ROOT, "Cargo.toml"), "rb") as f:
        return tomllib.load(f)["workspace"]["members"]


def module_of(src, path):
    """The module path of the file at `path` under `src`: lib.rs and main.rs are the crate root."""
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] in ("lib", "main", "mod"):
        rel = rel[:-1]
    return tuple(rel)


def code(text):
    """`text` without comments and string literals (crude, but Apiary's sources keep to plain literals)."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)


def groups(text, start):
    """The names inside the brace group opening at `start`, each a path relative to the group's prefix."""
    depth, i, out, word = 1, start, [], ""
    while i < len(text) and depth:
        c = text[i]
        if c == "{":
            depth += 1
            word += "::"
        elif c == "}":
            depth -= 1
        elif c == "," and depth == 1:
            out.append(word)
            word = ""
        elif not c.isspace():
            word += c
        i += 1
    out.append(word)
    return [w.split("::{")[0] for w in out if w and w not in ("self", "*")]


def crate_graph(src):
    files = {}
    for folder, _, names in os.walk(src):
        for name in names:
            if name.endswith(".rs"):
                path = os.path.join(folder, name)
                files[module_of(src, path)] = path
    edges = {}
    for module, path in files.items():
        text = code(open(path, encoding="utf-8").read())
        is_face = os.path.basename(path) in ("lib.rs", "main.rs", "mod.rs")
        found = edges.setdefault(module, {})
        for m in PATH.finditer(text):
            base = {"crate": (), "super": module[:-1], "self": module}[m.group(1)]
            prefix = tuple(p for p in m.group(2).split("::") if p)
            tails = groups(text, m.end()) if m.group(3) else [""]
            for tail in tails:
                full = base + prefix + tuple(p for p in tail.split("::") if p)
                target = deepest(files, full)
                if target is None or target == module:
                    continue
                # A module naming its own children (declaring, re-exporting) is its face.
                if is_face and target[: len(module)] == module:
                    continue
                found.setdefault(target, set()).add("::".join(full) or "crate")
    return files, edges


def deepest(files, path):
    for n in range(len(path), -1, -1):
        if path[:n] in files:
            return path[:n]
    return None


def circles(edges):
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in list(edges):
        if v not in index:
            visit(v)
    return out


def main():
    failures = []
    for member in members():
        src = os.path.join(ROOT, member, "src")
        if not os.path.isdir(src):
            continue
        files, edges = crate_graph(src)
        for component in circles(edges):
            lines = [f"{member}: an import circle of {len(component)} modules:"]
            for a in component:
                for b in component:
                    if b in edges.get(a, {}):
                        names = ", ".join(sorted(edges[a][b]))
                        lines.append(f"  {os.path.relpath(files[a], ROOT)} -> {os.path.relpath(files[b], ROOT)}: {names}")
            failures.append("\n".join(lines))
    if failures:
        print("\n".join(failures))
        print("A module that imports one that imports it back: move what both need into a module below both.")
        sys.exit(1)
    print(f"no import circles in {len(members())} crates")


if __name__ == "__main__":
    main()

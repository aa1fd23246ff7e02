"""Rooms a newcomer can hold in their head: the house's size limits, checked on every `make test`.

- No source file under a crate's `src/` is over 800 lines.
- No function outside tests is over 100 lines, from its `fn` to its closing brace (a `#[cfg(test)]` module, a
  `#[test]` function and anything under `tests/` or `benches/` are tests).
- No paragraph, list item or table cell of the README or docs/ is over 800 characters as a reader reads it: HTML
  comments and link targets are not counted, code blocks are not prose.

Each failure names the file, the line, what is too long and by how much. Run by `make docs-check`; needs only
Python. `tests/house_test.py` shows each catch.
"""
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FILE_LINES = 800
FUNCTION_LINES = 100
PROSE_CHARS = 800


def source_files(root):
    """Every `.rs` file under a `src/` directory of the workspace, outside build output and vendored code."""
    found = []
    for path in glob.glob(f"{root}/**/src/**/*.rs", recursive=True):
        rel = os.path.relpath(path, root)
        parts = rel.split(os.sep)
        if any(p in ("target", "node_modules", ".git") or p.startswith(".") for p in parts):
            continue
        if "tests" in parts or "benches" in parts:
            continue
        found.append(rel)
    return sorted(found)


def blank_literals(text):
    """`text` with every comment, string and char literal's inside replaced by spaces, newlines kept, so braces and
    `fn` are found only in code and every line keeps its number."""
    out = []
    i, n = 0, len(text)

    def blank(s):
        return "".join("\n" if c == "\n" else " " for c in s)

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(blank(text[i:j]))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(blank(text[i:j]))
            i = j
        elif (m := re.compile(r'b?r(#*)"').match(text, i)) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = '"' + m.group(1)
            j = text.find(end, m.end())
            j = n if j < 0 else j + len(end)
            out.append('"' + blank(text[i + 1 : j - 1]) + '"' if j - i >= 2 else blank(text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append('"' + blank(text[i + 1 : j - 1]) + '"')
            i = j
        elif c == "'":
            # A char literal ('x', '\n', '\u{1F600}', '{'), or a lifetime ('a), which is left as it is.
            m = re.compile(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'").match(text, i)
            if m:
                out.append(" " * len(m.group(0)))
                i = m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


FN = re.compile(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)")
TEST_ATTR = re.compile(r"#\[(cfg\(test\)|test|tokio::test[^\]]*)\]")


def matching_brace(code, open_at):
    depth = 0
    for j in range(open_at, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code) - 1


def test_spans(code):
    """The character ranges of `#[cfg(test)]` items and `#[test]` functions."""
    spans = []
    for m in TEST_ATTR.finditer(code):
        brace, semi = code.find("{", m.end()), code.find(";", m.end())
        if brace < 0 or (0 <= semi < brace):
            continue
        spans.append((m.start(), matching_brace(code, brace)))
    return spans


def long_functions(text, limit=FUNCTION_LINES):
    """(name, first line, lines) of every function outside tests longer than `limit` lines."""
    code = blank_literals(text)
    tests = test_spans(code)
    found = []
    for m in FN.finditer(code):
        if any(a <= m.start() <= b for a, b in tests):
            continue
        brace, semi = code.find("{", m.end()), code.find(";", m.end())
        if brace < 0 or (0 <= semi < brace):
            continue  # a declaration without a body (a trait's method)
        end = matching_brace(code, brace)
        first = code.count("\n", 0, m.start()) + 1
        last = code.count("\n", 0, end) + 1
        if last - first + 1 > limit:
            found.append((m.group(1), first, last - first + 1))
    return found


def readable(text):
    """What a reader reads of a markdown block: no HTML comments, a link's text without its target."""
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    text = re.sub(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"\s+", " ", text).strip()


LIST_ITEM = re.compile(r"^(\s*)([-*+]|\d+[.)])\s+")


def prose_blocks(markdown):
    """(first line, kind, text) of every paragraph, list item (without its nested items) and table cell."""
    blocks = []
    lines = markdown.split("\n")
    fence = None
    current = None  # [first line, kind, indent, [texts]]

    def close():
        nonlocal current
        if current:
            blocks.append((current[0], current[1], " ".join(current[3])))
        current = None

    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if fence:
            if stripped.startswith(fence):
                fence = None
            continue
        if stripped.startswith("```") or stripped.startswith("~~~"):
            close()
            fence = stripped[:3]
            continue
        if not stripped or stripped.startswith("#") or stripped.startswith("<!--") and stripped.endswith("-->"):
            close()
            continue
        if stripped.startswith("|"):
            close()
            for cell in stripped.strip("|").split("|"):
                blocks.append((number, "table cell", cell))
            continue
        item = LIST_ITEM.match(line)
        if item:
            close()
            current = [number, "list item", len(item.group(1)), [line[item.end() :]]]
            continue
        if current and current[1] == "list item":
            indent = len(line) - len(line.lstrip())
            if indent > current[2]:
                current[3].append(stripped)
                continue
            close()
        if current is None:
            current = [number, "paragraph", 0, []]
        current[3].append(stripped.lstrip("> "))
    close()
    return [(n, kind, readable(t)) for n, kind, t in blocks]


def long_prose(markdown, limit=PROSE_CHARS):
    return [(n, kind, len(t)) for n, kind, t in prose_blocks(markdown) if len(t) > limit]


def pages(root):
    return ["README.md", *sorted(os.path.relpath(p, root) for p in glob.glob(f"{root}/docs/**/*.md", recursive=True))]


def check(root):
    problems = []
    for rel in source_files(root):
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            text = f.read()
        lines = text.count("\n")
        if lines > FILE_LINES:
            problems.append(f"{rel}: {lines} lines, over {FILE_LINES}: split it by concern")
        for name, line, length in long_functions(text):
            problems.append(f"{rel}:{line}: fn {name} is {length} lines, over {FUNCTION_LINES}: name its steps")
    for rel in pages(root):
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            text = f.read()
        for line, kind, length in long_prose(text):
            problems.append(f"{rel}:{line}: a {kind} of {length} characters, over {PROSE_CHARS}: break it up")
    return problems


def main():
    problems = check(ROOT)
    for p in problems:
        print(f"house: {p}", file=sys.stderr)
    if problems:
        print(f"house: {len(problems)} room(s) too big (tests/house.py says why the limits)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

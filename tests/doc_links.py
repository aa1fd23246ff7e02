"""Every link in the README, BENCHMARKS.md and docs/ leads somewhere: a relative link names a file of the
repository, and a link to a heading (`#anchor`, `page.md#anchor`) names a heading that page has, as GitHub makes
its anchors. Links to the web are not followed (CI has no internet). A name in code followed by a link to a source
file ("`a_free_name_is_taken_never_a_held_one` in [rules.rs](…)") names something that file holds, so a renamed
test or function shows here. The layout docs/development.md draws names paths that exist and every crate of the
workspace.

Run by `make test` (`make docs-check`); needs only Python.
"""
import fnmatch
import glob
import os
import re
import sys
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def pages():
    return ["README.md", "BENCHMARKS.md", *sorted(os.path.relpath(p, ROOT) for p in glob.glob(f"{ROOT}/docs/*.md"))]


def prose(text):
    """`text` without fenced code blocks and inline code, where brackets are not links."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "``", text)


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    heading = re.sub(r"`", "", heading.strip().lower())
    heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    kept = "".join(c for c in heading if c in " -_" or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(path):
    seen, out = {}, set()
    text = re.sub(r"^```.*?^```", "", open(path, encoding="utf-8").read(), flags=re.S | re.M)
    for line in text.split("\n"):
        m = re.match(r"^#{1,6}\s+(.*)$", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken():
    """(page, link, why) for every link that leads nowhere."""
    out = []
    for page in pages():
        path = os.path.join(ROOT, page)
        for m in LINK.finditer(prose(open(path, encoding="utf-8").read())):
            target = m.group(1)
            if re.match(r"^[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
            if not os.path.exists(dest):
                out.append((page, target, f"no file {os.path.relpath(dest, ROOT)}"))
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                out.append((page, target, f"no heading #{anchor} in {os.path.relpath(dest, ROOT)}"))
    return out


NAMED = re.compile(r"`([A-Za-z_][A-Za-z0-9_:]*)` in \[[^\]]*\]\(([^)\s#]+)\)")


def misnamed():
    """(page, name, file) for every name said to be in a source file that does not hold it."""
    out = []
    for page in pages():
        path = os.path.join(ROOT, page)
        for m in NAMED.finditer(open(path, encoding="utf-8").read()):
            name, file = m.groups()
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file))
            if os.path.isfile(dest) and not re.search(rf"\b{re.escape(name)}\b", open(dest, encoding="utf-8").read()):
                out.append((page, name, os.path.relpath(dest, ROOT)))
    return out


LAYOUT_PAGE = "docs/development.md"


def misplaced():
    """What the layout of docs/development.md ("## Layout") gets wrong: each path a line starts with (at the margin,
    from the root; indented two spaces, under the path above) must exist, and every workspace member must be
    there."""
    text = open(os.path.join(ROOT, LAYOUT_PAGE), encoding="utf-8").read()
    block = re.search(r"^## Layout\n.*?^```\n(.*?)^```", text, flags=re.S | re.M)
    if not block:
        return ["no ## Layout block"]
    out, listed, base = [], set(), ""
    for line in block.group(1).splitlines():
        m = re.match(r"^( {0,2})(\S+)", line)
        if not m or m.group(2) == "Cargo.toml" and m.group(1):
            continue
        indent, path = m.groups()
        if indent:
            path = f"{base.rstrip('/')}/{path}"
        else:
            base = path
            listed.add(path.rstrip("/"))
        if not glob.glob(os.path.join(ROOT, path)):
            out.append(f"{path} is not there")
    cargo = open(os.path.join(ROOT, "Cargo.toml"), encoding="utf-8").read()
    members = re.search(r"members = \[(.*?)\]", cargo, flags=re.S)
    for member in re.findall(r'"([^"]+)"', members.group(1) if members else ""):
        if not any(fnmatch.fnmatch(member, p) or p.startswith(f"{member}/") for p in listed):
            out.append(f"the workspace member {member} is not listed")
    return out


def main():
    found = broken()
    for page, target, why in found:
        print(f"{page}: ({target}): {why}")
    names = misnamed()
    for page, name, file in names:
        print(f"{page}: {file} holds no {name}")
    layout = misplaced()
    for why in layout:
        print(f"{LAYOUT_PAGE}, Layout: {why}")
    if found or names or layout:
        sys.exit(1)
    print(f"every link of {len(pages())} pages leads somewhere, every name said to be in a file is there, and the "
          "layout names what the repository holds")


if __name__ == "__main__":
    main()

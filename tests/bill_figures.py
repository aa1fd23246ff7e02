"""Every figure README.md, docs/ and BENCHMARKS.md quote from Apiary's own bill is the one docs/bill.md says.

docs/bill.md is written by `make bill`. A quoted figure carries a marker right after it, invisible once rendered:
`$2.08<!-- bill diurnal 1 -->` names the row and the column:
- the bill of pools like each trace: rows `steady` … `quiet`, `diurnal-keep-fresh`; columns `claims`, `1`, `10`,
  `100`, `provisioned`, `fuller`, `hive`;
- the stack alone: row `stack`, column `fixed`;
- the pools themselves: the same rows, columns `at-once` (a share, %) and `pool-cost` (two weeks);
- what each setting changes: rows `<trace>-<setting>` (`diurnal-log-info`), columns `1`, `10`, `100` and `each`
  (each pool past the tenth). A saving is quoted as its size: the page says "less".
Rows joined by commas quote a range, their least and greatest: `$81–98<!-- bill steady,diurnal,bursty 100 -->`.
A figure is compared at the precision it is quoted with: `$98` stands for 98.36, `$98.4` would not.

Run by `make docs-check`; needs only Python.
"""
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BILL = os.path.join(ROOT, "docs", "bill.md")

# Each table's columns after the row's name, in the order `apiary-sim bill` prints them, by how many it has.
COLUMNS = ["claims", "1", "10", "100", "provisioned", "fuller", "hive"]
POOLS = ["at-once", "pool-cost"]
CHANGES = ["what", "1", "10", "100", "each"]
# The pages that quote the bill: each must quote at least one figure through a marker.
QUOTING = ["README.md", "docs/operations.md", "BENCHMARKS.md"]

NUMBER = r"[0-9](?:[0-9.,]| (?=[0-9]{3}\b))*"
QUOTE = re.compile(
    r"\$?(?P<low>" + NUMBER + r")(?:\s*[–-]\s*\$?(?P<high>" + NUMBER + r"))?"
    r"<!-- bill (?P<rows>[a-z0-9,-]+) (?P<column>[a-z0-9]+) -->"
)


def number(text):
    """`text` ("$2.08", "8 700", "1,200") as a number, or None ("–")."""
    digits = text.replace("$", "").replace(" ", "").replace(",", "").replace("%", "").strip("*")
    try:
        return float(digits)
    except ValueError:
        return None


def slug(name):
    return "-".join(w for w in re.split(r"[^a-z0-9]+", name.lower()) if w)


def figures():
    """The bill's figures, by (row, column)."""
    with open(BILL, encoding="utf-8") as f:
        text = f.read()
    out = {}
    for line in text.splitlines():
        if not line.startswith("|") or line.startswith("|---"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0].startswith(("pools like", "the stack alone", "the pools")):
            continue
        columns = {len(COLUMNS): COLUMNS, len(POOLS): POOLS, len(CHANGES): CHANGES}.get(len(cells) - 1)
        if len(cells) == 2:
            out[("stack", slug(cells[0]))] = number(cells[1])
        elif columns:
            for column, cell in zip(columns, cells[1:]):
                out[(slug(cells[0]), column)] = number(cell)
    return out


def decimals(quoted):
    return len(quoted.split(".")[1]) if "." in quoted else 0


def agrees(quoted, value):
    """Whether the figure quoted as `quoted` is `value` at the quote's precision."""
    return value is not None and abs(round(abs(value), decimals(quoted)) - number(quoted)) < 1e-9


def check(path, bill):
    """The faults of the markers in `path`, and how many figures it quotes."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    faults, quoted = [], 0
    for m in QUOTE.finditer(text):
        quoted += 1
        line = text.count("\n", 0, m.start()) + 1
        where = f"{os.path.relpath(path, ROOT)}:{line}"
        rows, column = m["rows"].split(","), m["column"]
        values = []
        for row in rows:
            if (row, column) not in bill:
                faults.append(f"{where}: docs/bill.md has no figure {row} {column}")
            else:
                values.append(bill[(row, column)])
        if len(values) != len(rows):
            continue
        if None in values:
            faults.append(f"{where}: docs/bill.md gives no figure for {m['rows']} {column}")
            continue
        low, high = min(abs(v) for v in values), max(abs(v) for v in values)
        if m["high"] is None and len(rows) > 1:
            faults.append(f"{where}: {len(rows)} rows quoted as one figure, {m['low']}; quote a range")
        elif m["high"] is None and not agrees(m["low"], low):
            faults.append(f"{where}: quotes {m['low']} for {m['rows']} {column}; docs/bill.md says {low:g}")
        elif m["high"] is not None and not (agrees(m["low"], low) and agrees(m["high"], high)):
            faults.append(
                f"{where}: quotes {m['low']}–{m['high']} for {m['rows']} {column}; docs/bill.md says {low:g}–{high:g}"
            )
    return faults, quoted


def main():
    if not os.path.exists(BILL):
        print("docs/bill.md is missing: `make bill` writes it", file=sys.stderr)
        return 1
    bill = figures()
    if not bill:
        print("docs/bill.md holds no figures: write it again with `make bill`", file=sys.stderr)
        return 1
    pages = [os.path.join(ROOT, p) for p in QUOTING]
    pages += [p for p in sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))) if p not in pages and p != BILL]
    faults, total = [], 0
    for page in pages:
        found, quoted = check(page, bill)
        faults += found
        total += quoted
        if quoted == 0 and os.path.relpath(page, ROOT) in QUOTING:
            faults.append(f"{os.path.relpath(page, ROOT)}: quotes no figure of docs/bill.md through a marker")
    for fault in faults:
        print(fault, file=sys.stderr)
    if faults:
        print("a figure quoted from the bill differs from docs/bill.md (`make bill` writes it)", file=sys.stderr)
        return 1
    print(f"{total} figures quoted from the bill, each as docs/bill.md says")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The scan for leaked secrets: every secret the tests and `make run` make is a canary
(`shared/fakeclouds/src/canary.rs`: `apiary-canary-<kind>-<hex>`, signing keys whose bytes are one, private keys in
PEM), and what the tests captured in the canary directory is read for any of them:

    logs/           every line the functions and the installer logged, at debug
    errors/         every error body an API or the installer answered
    notifications/  every notification a receiver was posted
    trail/          every event of every pool's trail
    jobs/           every reference-installer job's output

A secret is found as text, inside any base64 run (a `whsec_` key, a kubeconfig's `client-key-data`, a pull
secret's `auth`), and a PEM private key by its armour. One hit fails the scan, naming the file, the line and the
kind of secret (never the secret itself). `--require` names captures that must not be empty and `--minted` kinds of
secret that must have been made, so a scan that read nothing, or looked for secrets nobody made, fails too.

    python tests/canary_scan.py DIR [--require logs,errors,...] [--minted signing-key,...]
"""

import argparse
import base64
import binascii
import os
import re
import sys

CAPTURES = ("logs", "errors", "notifications", "trail", "jobs")
MARK = "apiary-canary"
CANARY = re.compile(r"apiary-canary-([a-z0-9-]+?)-[0-9a-z]{16}")
PEM = re.compile(r"-----BEGIN ([A-Z ]*PRIVATE KEY)-----")
BASE64 = re.compile(r"[A-Za-z0-9+/]{24,}={0,2}")


def decoded(run):
    """`run` decoded as base64 (padded as needed), as text; None when it is not base64."""
    try:
        raw = base64.b64decode(run + "=" * (-len(run) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw.decode("utf-8", "replace")


def secrets_in(line):
    """The kinds of secret `line` holds: canaries by their kind, private keys by their armour."""
    found = []
    for text, how in [(line, "")] + [(decoded(m.group(0)), " in base64") for m in BASE64.finditer(line)]:
        if not text:
            continue
        found += [f"{m.group(1)}{how}" for m in CANARY.finditer(text)]
        if MARK in text and not CANARY.search(text):
            found.append(f"canary cut short{how}")
        found += [f"{m.group(1).lower()}{how}" for m in PEM.finditer(text)]
    return found


def scan_file(path):
    """(line number, kind) for each secret in the file at `path`."""
    hits = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            hits += [(number, kind) for kind in secrets_in(line)]
    return hits


def files(folder):
    for root, _, names in os.walk(folder):
        for name in sorted(names):
            yield os.path.join(root, name)


def scan(directory, require=(), minted=()):
    """The scan's findings, as lines to print, and whether it passed."""
    problems, counts = [], {}
    for capture in CAPTURES:
        found = list(files(os.path.join(directory, capture)))
        counts[capture] = len(found)
        for path in found:
            problems += [f"{os.path.relpath(path, directory)}:{n}: a {kind} leaked" for n, kind in scan_file(path)]
    for capture in require:
        if not counts.get(capture):
            problems.append(f"nothing was captured as {capture} in {directory}: the scan would have read nothing")
    made = {}
    try:
        with open(os.path.join(directory, "minted"), encoding="utf-8") as f:
            for kind in f.read().split():
                made[kind] = made.get(kind, 0) + 1
    except FileNotFoundError:
        pass
    for kind in minted:
        if not made.get(kind):
            problems.append(f"no {kind} canary was made: the scan looked for a secret nobody made")
    if problems:
        return problems, False
    read = ", ".join(f"{n} {c}" for c, n in counts.items())
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(made.items()))
    return [f"canary scan: no secret leaked into what was captured ({read}; canaries made: {kinds or 'none'})"], True


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory")
    parser.add_argument("--require", default="", help="captures that must not be empty, comma-separated")
    parser.add_argument("--minted", default="", help="kinds of canary that must have been made, comma-separated")
    args = parser.parse_args()
    split = lambda text: [item for item in text.split(",") if item]  # noqa: E731
    lines, ok = scan(args.directory, split(args.require), split(args.minted))
    for line in lines:
        print(line, file=sys.stdout if ok else sys.stderr)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

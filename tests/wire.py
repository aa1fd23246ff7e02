"""What Apiary's cloud adapters sent and were answered in a whole lifecycle against each fake
(shared/clouds/tests/wire.rs), for tests/conformance_<cloud>.py to hold against the vendor's description."""

import json
import os
import subprocess
import sys
import tempfile

from fake_process import ROOT


def recorded(cloud):
    """The exchanges of `cloud`'s adapter (`gcp`, `azure`, ...): method, path, query, request, status, response,
    headers."""
    with tempfile.TemporaryDirectory() as out:
        env = {**os.environ, "APIARY_WIRE_OUT": out}
        cargo = os.environ.get("CARGO", "cargo")
        run = subprocess.run([cargo, "test", "--quiet", "-p", "apiary-clouds", "--test", "wire", cloud],
                             cwd=ROOT, env=env)
        if run.returncode:
            raise SystemExit(f"conformance: the recorded {cloud} lifecycle failed (above)")
        with open(os.path.join(out, f"{cloud}.json"), encoding="utf-8") as f:
            return json.load(f)


def report(heading, table, errors):
    """Prints what was checked of each operation (`table`: operation → what was checked) under `heading`, and every
    mismatch found; exits 1 when there is one."""
    print(heading)
    for op, checked in sorted(table.items()):
        print(f"  {op}: {', '.join(sorted(checked)) or 'not checked'}")
    for e in dict.fromkeys(errors):
        print(f"conformance: {e}", file=sys.stderr)
    if errors:
        sys.exit(1)


def must_catch(errors, wanted):
    """A self-test's end: each of `wanted` is in some error the checks found in the bad exchanges."""
    for w in wanted:
        if not any(w in e for e in errors):
            raise SystemExit(f"conformance: the checks no longer catch {w!r}: {errors}")

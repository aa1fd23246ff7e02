"""What Apiary's cloud adapters sent and were answered in a whole lifecycle against each fake
(shared/clouds/tests/wire.rs), for tests/conformance_<cloud>.py to hold against the vendor's description."""

import json
import os
import subprocess
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

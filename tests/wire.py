"""What Apiary's cloud adapters sent and were answered in a whole lifecycle against each fake
(shared/clouds/tests/wire.rs), for tests/conformance_<cloud>.py to hold against the vendor's description."""

import base64
import json
import os
import subprocess
import sys
import tempfile

from fake_process import ROOT


def recorded(cloud, package="apiary-clouds", test="wire"):
    """The exchanges of `cloud`'s adapter (`gcp`, `azure`, ...): method, path, query, request, status, response,
    headers; as `package`'s test `test` writes them (the tests named by `cloud`)."""
    with tempfile.TemporaryDirectory() as out:
        env = {**os.environ, "APIARY_WIRE_OUT": out}
        cargo = os.environ.get("CARGO", "cargo")
        run = subprocess.run([cargo, "test", "--quiet", "-p", package, "--test", test, cloud],
                             cwd=ROOT, env=env)
        if run.returncode:
            raise SystemExit(f"conformance: the recorded {cloud} lifecycle failed (above)")
        with open(os.path.join(out, f"{cloud}.json"), encoding="utf-8") as f:
            return json.load(f)


def client_grant(fake, call):
    """The form of the token request a vendor's client sends while `call` runs, as the fake (`fake`, a
    FakeProcess) recorded it."""
    with tempfile.TemporaryDirectory() as out:
        fake.tell("record")
        call()
        path = os.path.join(out, "wire.json")
        fake.tell(f"dump {path}")
        with open(path, encoding="utf-8") as f:
            forms = [e["request"] for e in json.load(f) if e["method"] == "POST" and "token" in e["path"]]
    if not forms:
        raise SystemExit("conformance: the vendor's client sent no token request")
    return forms[0]


def jwt_claims(token):
    """The claims of a JWT (its payload, not verified)."""
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def compare_grant(ours, theirs, where, extras=()):
    """What differs between Apiary's token request (`ours`, its form) and the vendor client's (`theirs`): the grant
    type, and any field Apiary sends that the client does not, or the client sends that Apiary leaves out (but the
    client library's own `extras`)."""
    errors = []
    if ours.get("grant_type") != theirs.get("grant_type"):
        errors.append(f"{where}: grant_type {ours.get('grant_type')!r}, the client's is {theirs.get('grant_type')!r}")
    for name in sorted(set(ours) - set(theirs)):
        errors.append(f"{where}: Apiary sends {name!r}, which the vendor's client does not")
    for name in sorted(set(theirs) - set(ours) - set(extras)):
        errors.append(f"{where}: the vendor's client sends {name!r}, which Apiary does not")
    return errors


def grant_self_test():
    """The grant comparison refuses what it is for: another grant type, a field the client does not send, one it
    sends that is left out."""
    errors = compare_grant({"grant_type": "a", "extra": ""}, {"grant_type": "b", "needed": ""}, "grant")
    must_catch(errors, ["grant_type 'a'", "Apiary sends 'extra'", "sends 'needed'"])


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

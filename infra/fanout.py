#!/usr/bin/env python3
"""`make fanout N=…`: a CI fan-out through `make run`'s HTTP API, from a plain Python client.

With `make run` up (its API's address in .run/api.address):

1. A pool `fanout` of N clusters on the `fake` platform, all kept Running, and a pool `fanout-timed` of two,
   whose claims hibernate their clusters after 20 s and are released after 60 s, are filled.
2. Both claims of `fanout-timed` are made, then, at once, N claims on `fanout`, each from its own thread and
   connection (as N CI jobs would), each waiting up to 29 s for its answer (as API Gateway would).
3. The script reads, from `fanout-timed`'s trail, when its clusters began to hibernate and its claims were
   released, against when they were due: the burst's work must not push them past their due by more than the sweep's period.
4. Every claim is released and both pools deleted.

Exits non-zero if a claim of the burst is not answered 201, a cluster is given twice, or a timed transition is
late by more than the sweep's period (`--sweep-period`, `make run`'s 10 s) and a second for the reconcile and the
look that begin it. Standard library only.
"""
import argparse
import datetime
import http.client
import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ADMIN = "arn:aws:iam::123456789012:user/admin"
PRINCIPAL_HEADER = "x-apiary-principal"
POOL, TIMED = "fanout", "fanout-timed"
HIBERNATE_AFTER, LIFETIME = 20, 60
# What a timed transition may take beyond the sweep's period: the reconcile that finds it due, and the power
# function's look (or the release's write) that begins it, each well under a second on an idle stack.
HANDLING = 1.0


def call(address, method, path, body=None, timeout=29.0):
    """(status, JSON body) of one request on its own connection; (None, error) when none came in `timeout`."""
    host, port = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    headers = {PRINCIPAL_HEADER: ADMIN}
    data = None
    if body is not None:
        data = json.dumps(body)
        headers["content-type"] = "application/json"
    try:
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        text = response.read()
        return response.status, (json.loads(text) if text else None)
    except (OSError, http.client.HTTPException) as e:
        return None, str(e)
    finally:
        conn.close()


def must(address, method, path, body=None, want=(200, 201, 202)):
    status, answer = call(address, method, path, body)
    if status not in want:
        sys.exit(f"{method} {path}: {status} {answer}")
    return answer


def spares(address, pool):
    answer = must(address, "GET", f"/pools/{pool}/clusters")
    return [c for c in answer["clusters"]
            if c.get("claim") is None and c.get("powerState") == "Running" and not c.get("deleting")]


def until(what, timeout, probe, every=1.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(every)
    sys.exit(f"gave up waiting for {what} after {timeout:.0f} s")


def stamp(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def percentile(sorted_values, p):
    return sorted_values[round((len(sorted_values) - 1) * p)]


def events(address, pool):
    answer = must(address, "GET", f"/pools/{pool}/events?limit=200")
    return answer["events"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", type=int, default=200, help="claims at once, and the pool's Running spares")
    parser.add_argument("--address-file", default=os.path.join(ROOT, ".run", "api.address"))
    parser.add_argument("--sweep-period", type=float, default=10.0, help="make run's sweep period, in seconds")
    parser.add_argument("--settle", type=float, default=30.0, help="seconds the filled pools stand before")
    args = parser.parse_args()
    n = args.claims
    try:
        with open(args.address_file) as f:
            address = f.read().strip()
    except OSError:
        sys.exit(f"no {args.address_file}: start `make run` first (in another terminal)")

    for pool in (POOL, TIMED):
        call(address, "DELETE", f"/pools/{pool}")
    until("the pools of an earlier run to be gone", 600,
          lambda: all(call(address, "GET", f"/pools/{p}")[0] == 404 for p in (POOL, TIMED)), every=2.0)
    must(address, "PUT", f"/pools/{POOL}", {"size": n, "runningCount": n, "platform": {"fake": {}}})
    must(address, "PUT", f"/pools/{TIMED}", {
        "size": 2, "runningCount": 2, "hibernateAfter": f"{HIBERNATE_AFTER}s",
        "claimLifetime": {"default": f"{LIFETIME}s", "maximum": "1h"}, "platform": {"fake": {}}})
    filling = time.monotonic()
    until(f"{n} Running spares", 3600, lambda: len(spares(address, POOL)) >= n and len(spares(address, TIMED)) >= 2,
          every=2.0)
    print(f"pools of {n} and 2 Running spares filled in {time.monotonic() - filling:.0f} s; standing {args.settle:.0f} s")
    time.sleep(args.settle)

    timed = {}
    for claim in ("timed-a", "timed-b"):
        answer = must(address, "PUT", f"/pools/{TIMED}/claims/{claim}", want=(201,))
        timed[claim] = answer
    # The burst: every thread waits at the barrier, then sends its claim.
    barrier = threading.Barrier(n)
    results = [None] * n

    def claim(i):
        barrier.wait()
        sent = time.monotonic()
        status, answer = call(address, "PUT", f"/pools/{POOL}/claims/job-{i:04d}")
        results[i] = (status, time.monotonic() - sent, answer)

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=n) as threads:
        list(threads.map(claim, range(n)))
    wall = time.monotonic() - started

    latencies = sorted(r[1] for r in results if r[0] is not None)
    statuses = {}
    for status, _, _ in results:
        statuses[status] = statuses.get(status, 0) + 1
    given = [r[2]["cluster"]["id"] for r in results if r[0] == 201]
    answered = ", ".join(f"{count}× {status}" for status, count in sorted(statuses.items(), key=lambda s: str(s[0])))
    print("| N | spares | client | wall | p50 | p95 | max | answers |")
    print("|---:|---|---|---:|---:|---:|---:|---|")
    print(f"| {n} | {n} Running | Python, a thread and a connection each | {wall:.2f} s | "
          f"{percentile(latencies, 0.5):.2f} s | {percentile(latencies, 0.95):.2f} s | {latencies[-1]:.2f} s | "
          f"{answered} |")
    failures = []
    if statuses.get(201, 0) != n:
        failures.append(f"{n - statuses.get(201, 0)} of {n} claims were not answered 201")
    if len(set(given)) != len(given):
        failures.append("a cluster was given twice")

    # The other pool's timed transitions, from its trail: asked for when, against when due.
    # A pool of the same name from an earlier run left its trail: only what followed these claims counts.
    since = min(stamp(answer["assignedAt"]) for answer in timed.values())

    def asked():
        trail = [e for e in events(address, TIMED) if stamp(e["time"]) >= since]
        hibernations = {e["cluster"]: stamp(e["time"]) for e in trail
                        if e["type"] == "PowerTransitionStarted" and e.get("message") == "to Hibernating"}
        releases = {e["claim"]: stamp(e["time"]) for e in trail if e["type"] == "ClaimReleased"}
        ids = [timed[c]["cluster"]["id"] for c in timed]
        if all(i in hibernations for i in ids) and all(c in releases for c in timed):
            return hibernations, releases
        return None

    hibernations, releases = until("the other pool's hibernations and releases", 900, asked, every=2.0)
    for name, answer in timed.items():
        assigned = stamp(answer["assignedAt"])
        for what, due, at in (
            ("hibernateAfter", assigned + datetime.timedelta(seconds=HIBERNATE_AFTER),
             hibernations[answer["cluster"]["id"]]),
            ("claim lifetime", stamp(answer["expiresAt"]), releases[name]),
        ):
            late = (at - due).total_seconds()
            print(f"{TIMED}/{name}: {what} due {due:%H:%M:%S}, done {late:+.1f} s after")
            # The sweep finds it due within its period; the reconcile and the look that follow take a moment.
            if late > args.sweep_period + HANDLING:
                failures.append(f"{TIMED}/{name}'s {what} was {late:.1f} s late (sweep period {args.sweep_period} s)")

    with ThreadPoolExecutor(max_workers=16) as threads:
        list(threads.map(lambda i: call(address, "DELETE", f"/pools/{POOL}/claims/job-{i:04d}"), range(n)))
    for pool in (POOL, TIMED):
        call(address, "DELETE", f"/pools/{pool}")
    if failures:
        sys.exit("; ".join(failures))


if __name__ == "__main__":
    main()

"""`make upgrade-test`: the previous release updated in place to this build, under load, with nothing lost.

The previous release is named in fixtures/releases/previous (`VERSION COMMIT`); the Makefile builds its
`apiary-local` from that commit and this build's `apiary-local` and `apiary-demo-clouds`, and passes the paths:

    upgrade_test.py --previous-src DIR --previous-bin PATH --current-bin PATH --clouds-bin PATH

On one emulator, with the fake clouds in a process of their own (they outlive both releases' functions):

1. The previous release's `deploy_local.py` creates the stack, the previous `apiary-local` runs the four functions,
   and the previous release's own demo pools are created on AWS, GCP, Azure, vSphere and behind the installer
   webhook (one with `maxSize`, so that a claim waits for capacity).
2. Claims are put in every phase: Ready (a Running spare), Assigned (its cluster hibernated by its claimant, and
   one resuming), Pending (the pool at its maximum), Releasing (released just before the update); clusters are
   then Running, Hibernating, installing and in transitions.
3. While a load of claims, reads and releases keeps coming through both releases' APIs, this build's
   `deploy_local.py` updates the stack in place (its change set shown, nothing stateful replaced); this build's
   `apiary-local` starts beside the previous one (the window in which CloudFormation has updated some functions
   and not others: both read the same queues, schedules and items); then the previous one stops. In that window
   a pool is labelled and claims by labels are made through this build's API; after it, each asked for again must
   be the same claim, held in one pool only, however a reconcile of the previous release rewrote it.
4. Capacity is given back (a held claim released, the hibernated one resumed) and the stack settles.

It then holds: every claim it made and did not release is readable, with the cluster it had before the update;
no cluster that existed before the update is gone, except those whose claims were released; every waiting claim
was served; no request was answered 5xx; the dead-letter queues are empty; and once the functions stop, every
machine on the four clouds belongs to a cluster in the table and every installed cluster has all its machines.
The phases' durations are printed (BENCHMARKS.md, "Upgrades").
"""
import argparse
import collections
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import boto3

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import local_emulator  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ADMIN = "arn:aws:iam::123456789012:user/admin"
STACK = "apiary-upgrade"
# The previous release's demo pools, by the name the test gives them (`maxSize` added to one: see the docstring).
POOLS = {
    "up-aws": "demo-pool.json",
    "up-gcp": "demo-pool-gcp.json",
    "up-azure": "demo-pool-azure.json",
    "up-vsphere": "demo-pool-vsphere.json",
    "up-installer": "demo-pool-installer.json",
}
CAPPED = "up-gcp"
WINDOW_SECONDS = 20
# Claims by labels made in the window, and what they ask.
LABELLED = 3
LABELS_CLAIM = {"selector": {"matchLabels": {"upgrade": "window"}}, "lifetime": "4h"}
AFTER_SECONDS = 10
SETTLE_SECONDS = 240


class Failed(Exception):
    pass


def api(base, method, path, body=None):
    """(status, answer) of one request as the stack's admin; (0, reason) when nothing answered."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"x-apiary-principal": ADMIN, "content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        text = e.read().decode(errors="replace")
        try:
            return e.code, json.loads(text)
        except ValueError:
            return e.code, text
    except OSError as e:
        return 0, str(e)


def ok(base, method, path, body=None):
    status, answer = api(base, method, path, body)
    if status // 100 != 2:
        raise Failed(f"{method} {path} on {base}: {status} {answer}")
    return answer


class Local:
    """One release's `apiary-local` (the four functions), its API on a port the system picks."""

    def __init__(self, name, binary, env, work):
        self.name = name
        self.log_path = os.path.join(work, f"{name}.log")
        address = os.path.join(work, f"{name}.address")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [binary, "--listen", "127.0.0.1:0", "--address-file", address, "--sweep-every", "5s"],
            env=env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while not os.path.exists(address):
            if self.proc.poll() is not None or time.time() > deadline:
                raise Failed(f"{name}'s apiary-local did not start; see {self.log_path}")
            time.sleep(0.2)
        with open(address) as f:
            self.base = f"http://{f.read().strip()}"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


class Load(threading.Thread):
    """Claims, reads and releases through whichever APIs are up, one every ~1.5 s: each claim is read back, and
    every other one released a little later (some while still waiting)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.bases = []
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.made = {}  # claim name -> pool
        self.released = set()
        self.answers = collections.Counter()
        self.errors = []

    def call(self, method, path, body=None):
        with self.lock:
            bases = list(self.bases)
        base = bases[sum(self.answers.values()) % len(bases)]
        status, answer = api(base, method, path, body)
        self.answers[status // 100] += 1
        if status // 100 != 2:
            self.errors.append(f"{method} {path} on {base}: {status} {answer}")
        return status

    def run(self):
        pools = sorted(set(POOLS) - {CAPPED})
        n = 0
        while not self.stopping.is_set():
            pool, name = pools[n % len(pools)], f"load-{n}"
            if self.call("PUT", f"/pools/{pool}/claims/{name}", {"lifetime": "2h"}) // 100 == 2:
                self.made[name] = pool
            self.call("GET", f"/pools/{pool}/claims/{name}")
            if n % 2 == 1 and f"load-{n - 1}" in self.made:
                earlier = f"load-{n - 1}"
                self.call("DELETE", f"/pools/{self.made[earlier]}/claims/{earlier}")
                self.released.add(earlier)
            n += 1
            self.stopping.wait(1.5)

    def use(self, bases):
        with self.lock:
            self.bases = bases


def fill(value, values):
    if isinstance(value, str):
        return values.get(value, value)
    if isinstance(value, list):
        return [fill(v, values) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, values) for k, v in value.items()}
    return value


def wait_for(what, check, limit):
    deadline = time.time() + limit
    while True:
        found = check()
        if found is True:
            return
        if time.time() > deadline:
            raise Failed(f"{what} not reached in {limit} s: {found}")
        time.sleep(1)


def pools_settled(base):
    """True when every pool has its size of unclaimed clusters (or its `maxSize` of clusters), none installing or
    being deleted, and no claim waiting."""
    for pool in POOLS:
        p = ok(base, "GET", f"/pools/{pool}")
        s, most = p["status"], p["spec"].get("maxSize")
        full = s["ready"] + s["standby"] >= s["size"] or (most and s["ready"] + s["standby"] + s["claimed"] >= most)
        if s["installing"] or s["pendingClaims"] or s["deleting"] or not full:
            return f"{pool}: {s}"
    return True


def versions(base):
    """Each pool's `poolVersion` and how many of its clusters are stale: an update that changed how the version is
    computed would make every cluster stale and replace them all."""
    return {p: (s["poolVersion"], s["stale"]) for p in POOLS for s in [ok(base, "GET", f"/pools/{p}")["status"]]}


def clusters(base):
    """Every cluster of the test's pools, by id."""
    return {c["id"]: {**c, "pool": p} for p in POOLS for c in ok(base, "GET", f"/pools/{p}/clusters")["clusters"]}


def claims(base):
    return {(p, c["name"]): c for p in POOLS for c in ok(base, "GET", f"/pools/{p}/claims")["claims"]}


def census(base):
    """Clusters by power state (installing ones apart) and claims by phase: what the update runs into."""
    power = collections.Counter("installing" if not c.get("installedAt") else c.get("powerState") or "unset"
                                for c in clusters(base).values())
    phases = collections.Counter(c["phase"] for c in claims(base).values())
    return dict(power), dict(phases)


def machines(clouds, work, endpoint):
    """Infra id -> machine count on the four clouds, machines being `<infraId>-<n>` (GCP, Azure, vSphere) or
    tagged `kubernetes.io/cluster/<infraId>` (EC2)."""
    path = os.path.join(work, "machines.json")
    clouds.stdin.write(f"machines {path}\n")
    clouds.stdin.flush()
    if clouds.stdout.readline().strip() != "ok":
        raise Failed("the fake clouds did not list their machines")
    with open(path) as f:
        listed = json.load(f)
    found = collections.Counter()
    for cloud in ("gcp", "azure", "vsphere"):
        # A machine listed exists, stopped or not (a stopped GCP instance is TERMINATED); a deleted one is gone.
        for _, name, _ in listed[cloud]:
            found[name.rsplit("-", 1)[0]] += 1
    ec2 = boto3.client("ec2", endpoint_url=endpoint, region_name="us-east-1")
    for r in ec2.describe_instances()["Reservations"]:
        for i in r["Instances"]:
            if i["State"]["Name"] in ("terminated", "shutting-down"):
                continue
            for t in i.get("Tags", []):
                if t["Key"].startswith("kubernetes.io/cluster/"):
                    found[t["Key"].split("/", 2)[2]] += 1
    return found


def machine_count(spec):
    """How many machines a pool's cluster has: its platform's `machineCount`; three where the pool's template
    (Azure) or installer (the webhook's, on GCP) decides, as the demo's do."""
    return int(next(iter(spec["platform"].values())).get("machineCount", 3))


#: What serde says of a document it cannot read: a release failing on what the other one wrote.
UNREADABLE = ("unknown field", "unknown variant", "missing field", "invalid type", "invalid value")


def log_problems(local):
    """The lines of a release's log that say it failed on what it read: any error (a message dropped as
    unreadable, a store error answered 500), a panic, and a warning whose error is a document it could not read (a
    reconcile or a power step that failed on an item or a message of the other release). Other warnings (a step
    retried) are counted, not failed on: this run injects no fault, so they are few, and shown."""
    problems, warnings = [], collections.Counter()
    with open(local.log_path, errors="replace") as f:
        for line in f:
            if "panicked" in line or '"level":"ERROR"' in line:
                problems.append(f"{local.name}: {line.strip()[:600]}")
            elif '"level":"WARN"' in line:
                if any(word in line for word in UNREADABLE):
                    problems.append(f"{local.name}: {line.strip()[:600]}")
                else:
                    warnings[json.loads(line).get("message", line[:80])] += 1
    return problems, warnings


def dead_letters(endpoint):
    sqs = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1")
    held = {}
    for url in sqs.list_queues(QueueNamePrefix=STACK).get("QueueUrls", []):
        if "dlq" in url:
            a = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
            held[url.rsplit("/", 1)[1]] = int(a["ApproximateNumberOfMessages"]) + int(
                a["ApproximateNumberOfMessagesNotVisible"])
    return held


def deploy(script, env_file, env):
    args = [sys.executable, script, STACK, env_file, "--admins", ADMIN, "--max-recheck-seconds", "5",
            "--full-sweep-seconds", "100"]
    done = subprocess.run(args, env=env, capture_output=True, text=True)
    if done.returncode:
        raise Failed(f"{script}: exit {done.returncode}\n{done.stdout}{done.stderr}")
    return done.stdout + done.stderr


def read_env(path):
    with open(path) as f:
        return dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)


def main():
    p = argparse.ArgumentParser()
    for name in ("--previous-src", "--previous-bin", "--current-bin", "--clouds-bin"):
        p.add_argument(name, required=True)
    args = p.parse_args()
    version, commit = open(os.path.join(ROOT, "fixtures", "releases", "previous")).read().split()
    work = tempfile.mkdtemp(prefix="apiary-upgrade-")
    started = time.time()
    timings = {}
    # This build's functions run as their roles, held to them by the emulator: none of their calls may be refused.
    role_calls = os.path.join(work, "role-calls.jsonl")
    emulator, endpoint, emulator_log = local_emulator.start("upgrade", "--calls", role_calls)
    env = {**os.environ, "AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
           "AWS_REGION": "us-east-1", "RUST_LOG": os.environ.get("RUST_LOG", "info")}
    os.environ.update({k: env[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")})
    env_file = os.path.join(work, "stack.env")
    running, clouds, load = [], None, Load()
    try:
        print(f"upgrade: from {version} ({commit[:7]}) to this build; logs in {work}", flush=True)
        deploy(os.path.join(args.previous_src, "infra", "deploy_local.py"), env_file, env)
        clouds = subprocess.Popen([args.clouds_bin, "--prefix", STACK, "--pools", ",".join(POOLS)], env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=open(os.path.join(work, "clouds.log"), "w"), text=True)
        hello = json.loads(clouds.stdout.readline() or "null") or {}
        if "fill" not in hello:
            raise Failed(f"the fake clouds did not start; see {work}/clouds.log")
        local_env = {**env, **read_env(env_file), **{k: v for k, v in hello["env"].items() if v}}
        previous = Local("previous", args.previous_bin, local_env, work)
        running.append(previous)
        for pool, file in POOLS.items():
            with open(os.path.join(args.previous_src, "infra", file)) as f:
                spec = fill(json.load(f), hello["fill"])
            spec.pop("access", None)
            if pool == CAPPED:
                spec["maxSize"] = spec["size"]
            ok(previous.base, "PUT", f"/pools/{pool}", spec)
        wait_for("every pool filled", lambda: pools_settled(previous.base), SETTLE_SECONDS)
        timings["pools filled by the previous release"] = time.time() - started

        # Claims in every phase, clusters in every power state and in transitions.
        for pool in POOLS:
            ok(previous.base, "PUT", f"/pools/{pool}/claims/held", {"lifetime": "4h"})
        ok(previous.base, "PUT", "/pools/up-aws/claims/resumes", {})
        ok(previous.base, "PUT", f"/pools/{CAPPED}/claims/second", {})
        ok(previous.base, "PUT", "/pools/up-vsphere/claims/goes", {})
        wait_for("the held claims ready", lambda: all(
            ok(previous.base, "GET", f"/pools/{p}/claims/held")["phase"] == "Ready" for p in POOLS) or "not yet",
            SETTLE_SECONDS)
        ok(previous.base, "PUT", f"/pools/{CAPPED}/claims/waits", {})
        ok(previous.base, "POST", "/pools/up-azure/claims/held/hibernate")
        ok(previous.base, "POST", "/pools/up-installer/claims/held/hibernate")
        wait_for("a claimant's cluster hibernated", lambda: ok(
            previous.base, "GET", "/pools/up-azure/claims/held")["cluster"]["powerState"] == "Hibernating"
            or "not yet", SETTLE_SECONDS)
        ok(previous.base, "POST", "/pools/up-azure/claims/held/resume")
        released = {ok(previous.base, "GET", f"/pools/{p}/claims/{c}")["cluster"]["id"]
                    for p, c in [(CAPPED, "second"), ("up-vsphere", "goes")]}
        ok(previous.base, "DELETE", "/pools/up-vsphere/claims/goes")
        before_versions = versions(previous.base)
        before_clusters = clusters(previous.base)
        before_claims = claims(previous.base)
        power, phases = census(previous.base)
        print(f"upgrade: at the update, clusters {power}, claims {phases}", flush=True)
        for phase in ("Pending", "Assigned", "Ready"):
            if not phases.get(phase):
                raise Failed(f"no claim {phase} at the update: {phases}")

        # The update, under load.
        load.use([previous.base])
        load.start()
        t = time.time()
        said = deploy(os.path.join(ROOT, "infra", "deploy_local.py"), env_file, env)
        timings["stack updated in place"] = time.time() - t
        print("upgrade: " + said.strip().replace("\n", "\nupgrade: "), flush=True)
        current = Local("current", args.current_bin, {**local_env, **read_env(env_file)}, work)
        running.append(current)
        load.use([previous.base, current.base])
        # Claims by labels made in the window, where a reconcile of the previous release may rewrite one without
        # its selector (CHANGELOG.md): each must keep its name.
        t = time.time()
        aws_spec = ok(current.base, "GET", "/pools/up-aws")["spec"]
        ok(current.base, "PUT", "/pools/up-aws", {**aws_spec, "labels": {"upgrade": "window"}})
        by_labels = {}
        for i in range(LABELLED):
            name = f"by-labels-{i}"

            def made(name=name):
                status, answer = api(current.base, "PUT", f"/claims/{name}", LABELS_CLAIM)
                if status in (201, 202):
                    by_labels[name] = answer
                    return True
                return f"{status} {answer}"

            wait_for(f"claim {name} by labels", made, WINDOW_SECONDS)
        time.sleep(max(0.0, WINDOW_SECONDS - (time.time() - t)))
        load.use([current.base])
        previous.stop()
        running.remove(previous)
        time.sleep(AFTER_SECONDS)
        load.stopping.set()
        load.join()

        # Each claim by labels kept its name across the window: asked for again (a retry), it is the same claim, in
        # the same pool, and no other pool holds one of its name. Then it is released.
        label_problems, rewritten = [], 0
        for name, first in sorted(by_labels.items()):
            status, again = api(current.base, "PUT", f"/claims/{name}", LABELS_CLAIM)
            rewritten += isinstance(again, dict) and not again.get("selector")
            if status not in (201, 202) or (again.get("pool"), again.get("createdAt")) != (first["pool"], first["createdAt"]):
                label_problems.append(f"claim {name} by labels was {first['pool']} {first['createdAt']}, asked again: "
                                      f"{status} {again}")
            holders = [p for p in POOLS if api(current.base, "GET", f"/pools/{p}/claims/{name}")[0] == 200]
            if holders != [first["pool"]]:
                label_problems.append(f"claim {name} by labels is held in {holders}, not only {first['pool']}")
            ok(current.base, "DELETE", f"/claims/{name}")
        print(f"upgrade: {len(by_labels)} claims by labels made in the window, {rewritten} of them rewritten without "
              f"their selector by the previous release; {len(label_problems)} problem(s)", flush=True)

        # Capacity given back: the capped pool's waiting claim is served once a held one goes.
        t = time.time()
        ok(current.base, "DELETE", f"/pools/{CAPPED}/claims/second")
        ok(current.base, "POST", "/pools/up-installer/claims/held/resume")
        for name in sorted(set(load.made) - load.released):
            ok(current.base, "DELETE", f"/pools/{load.made[name]}/claims/{name}")
            load.released.add(name)
        wait_for("the waiting claim served", lambda: ok(current.base, "GET", f"/pools/{CAPPED}/claims/waits")[
            "phase"] == "Ready" or "not yet", SETTLE_SECONDS)
        kept = {("up-aws", "resumes"), (CAPPED, "waits")} | {(p, "held") for p in POOLS}
        # The claims kept Ready again (the installer's hibernated one resumes through its readiness check, the
        # slowest), and the pools back at their size.
        wait_for("the kept claims Ready", lambda: all(
            ok(current.base, "GET", f"/pools/{p}/claims/{c}")["phase"] == "Ready" for p, c in kept) or "not yet",
            SETTLE_SECONDS)
        wait_for("every pool settled", lambda: pools_settled(current.base), SETTLE_SECONDS)
        timings["settled after the update"] = time.time() - t

        problems = list(load.errors) + label_problems
        after_clusters = clusters(current.base)
        after_claims = claims(current.base)
        for key in sorted(kept):
            claim = after_claims.get(key)
            before = (before_claims.get(key) or {}).get("cluster") or {}
            if claim is None:
                problems.append(f"claim {key} is gone")
            elif claim["phase"] != "Ready":
                problems.append(f"claim {key} is {claim['phase']}, not Ready")
            elif before and claim["cluster"]["id"] != before["id"]:
                problems.append(f"claim {key} had cluster {before['id']}, now {claim['cluster']['id']}")
        after_versions = versions(current.base)
        if after_versions != {p: (v, 0) for p, (v, _) in before_versions.items()}:
            problems.append(f"pool versions (version, stale) were {before_versions}, now {after_versions}")
        for id, c in before_clusters.items():
            # An unclaimed spare may since have gone to a load claim, released since; a claimed one stays with its
            # claim (the versions above hold that no spare was replaced as stale).
            if c.get("claim") and id not in after_clusters and id not in released:
                problems.append(f"cluster {id} ({c['pool']}, claimed by {c['claim']}) is gone")
        for id, c in after_clusters.items():
            was = before_clusters.get(id)
            if was and (was["infraId"], was["createdAt"]) != (c["infraId"], c["createdAt"]):
                problems.append(f"cluster {id} was re-created")
        letters = dead_letters(endpoint)
        if any(letters.values()):
            problems.append(f"messages in the dead letters: {letters}")
        warnings = collections.Counter()
        for local in (previous, current):
            failed, warned = log_problems(local)
            problems += failed
            warnings += warned
        # The pools settled (nothing installing or being deleted): with the functions stopped, what the table
        # holds and what the clouds run can be compared.
        counts = {p: machine_count(ok(current.base, "GET", f"/pools/{p}")["spec"]) for p in POOLS}
        table = {c["infraId"]: {**c, "machines": counts[c["pool"]]} for c in clusters(current.base).values()}
        current.stop()
        running.remove(current)
        on_clouds = machines(clouds, work, endpoint)
        for infra, count in sorted(on_clouds.items()):
            if infra not in table:
                problems.append(f"{count} machine(s) of {infra} belong to no cluster in the table")
        for infra, c in sorted(table.items()):
            if c.get("installedAt") and on_clouds.get(infra, 0) != c["machines"]:
                problems.append(f"cluster {c['id']} ({infra}) has {on_clouds.get(infra, 0)} of its "
                                f"{c['machines']} machines")
        timings["the whole test"] = time.time() - started
        print(f"upgrade: load answered {dict(load.answers)} (by hundreds); {len(load.made)} load claims, all "
              f"released; {len(table)} clusters and {sum(on_clouds.values())} machines at the end", flush=True)
        if warnings:
            print(f"upgrade: warnings logged (a step retried): {dict(warnings)}", flush=True)
        for what, seconds in timings.items():
            print(f"upgrade: {what}: {seconds:.0f} s", flush=True)
        sys.path.insert(0, os.path.join(ROOT, "infra"))
        import role_check
        problems += role_check.check([role_calls], [])
        if problems:
            raise Failed("\n".join(problems))
        print(f"upgrade: from {version} to this build lost nothing", flush=True)
    except Failed as e:
        sys.exit(f"upgrade test failed ({work}):\n{e}")
    finally:
        load.stopping.set()
        for local in running:
            local.stop()
        if clouds:
            clouds.stdin.close()
            clouds.wait(timeout=10)
        emulator.terminate()
        emulator.wait(timeout=10)
        emulator_log.close()



if __name__ == "__main__":
    main()

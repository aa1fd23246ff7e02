"""Every example in the README and docs/ runs, or is checked where it cannot run here (`make docs-examples`, part
of `make test`), so the pages cannot drift from the product.

- `sh` blocks run against the stack `make run` starts (infra/run-local.sh, on free ports), each page's blocks in
  order in one shell, as a reader types them into one terminal, from a scratch directory holding the files they
  name (tests/doc_examples/, and `infra/`). Before each block the runner waits until no claim is being released,
  as a reader does who reads on before typing the next one. In them:
  - `apiary` is the command line `make test` built, and `http://127.0.0.1:8080` is the stack's address;
  - `make TARGET [NAME=value …]` is checked, not run (make run, make test and make deploy are this harness): the
    target exists, the Makefile reads each variable given, and `make -n` accepts the line;
  - `aws SERVICE OPERATION --option …` is checked against botocore's model of the service (no AWS account here):
    the operation exists and takes every option given;
  - `curl` requests to the API are checked against its OpenAPI document (method and path); those signed for a
    deployed stack (`--aws-sigv4`) are only checked, the rest also run;
  - `apiary pool watch` redraws until Ctrl-C: it runs for a few seconds and must have drawn its pool.
- `python` blocks run: the webhook receiver's `verify` must accept Standard Webhooks' own example and refuse it
  altered.
- `json` blocks are pool specs: functions/claim-api/tests/docs.rs puts each through the API's handler, and holds
  the error answer docs/api.md shows (a `text` block) to the API's.
- `mermaid`, `text` and blocks without a language are pictures, listings and answers.
- An inline `make …` or `aws …` in the prose of these pages and BENCHMARKS.md is checked as such a line is, and an
  inline `apiary …` names a command the command line has (its words up to the first option, with `--help`).

Needs the project virtualenv (the emulator, botocore) and the debug binaries `cargo test --workspace` builds.
"""
import glob
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
FIXTURES = os.path.join(ROOT, "tests", "doc_examples")
ADMIN = "arn:aws:iam::123456789012:user/admin"
LOCAL_API = "http://127.0.0.1:8080"
LANGUAGES = {"sh", "json", "python", "mermaid", "text", ""}
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def pages():
    return ["README.md", *sorted(os.path.relpath(p, ROOT) for p in glob.glob(f"{ROOT}/docs/*.md"))]


def blocks(page):
    """(line, language, text) of every fenced block of `page`."""
    text = open(os.path.join(ROOT, page), encoding="utf-8").read()
    return [(text[: m.start()].count("\n") + 1, m.group(1), m.group(2)) for m in BLOCK.finditer(text)]


def split_words(words):
    """`words` cut at `&&`, `||`, `;` and `|` into commands, each without leading NAME=value assignments."""
    parts, cur = [], []
    for w in [*words, "&&"]:
        if w in {"&&", "||", ";", "|"}:
            while cur and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", cur[0]):
                cur = cur[1:]
            if cur:
                parts.append(cur)
            cur = []
        else:
            cur.append(w)
    return parts


# --- checks of commands that do not run here ---------------------------------------------------------------------


def makefile_variables():
    text = open(os.path.join(ROOT, "Makefile"), encoding="utf-8").read()
    return set(re.findall(r"\$\(([A-Z_][A-Z0-9_]*)\)", text)) | set(re.findall(r"\$\{([A-Z_][A-Z0-9_]*)", text))


def check_make(args):
    """`None` if `make ARGS` names a target and variables of the Makefile, else what is wrong."""
    known = makefile_variables()
    for a in args:
        if "=" in a and a.split("=", 1)[0] not in known:
            return f"make: the Makefile reads no variable {a.split('=', 1)[0]}"
    targets = [a for a in args if "=" not in a and not a.startswith("-")]
    if not targets:
        return "make: no target named"
    out = subprocess.run(["make", "-C", ROOT, "-n", *args], capture_output=True, text=True)
    if out.returncode != 0:
        return f"make -n {' '.join(args)}: {out.stderr.strip()}"
    return None


def check_aws(args):
    """`None` if `aws SERVICE OPERATION --option …` is an operation of botocore's model taking those options."""
    import botocore
    import botocore.session
    from botocore.exceptions import UnknownServiceError

    globals_ = {"--query", "--output", "--region", "--profile", "--endpoint-url", "--no-cli-pager"}
    if len(args) < 2:
        return f"aws {' '.join(args)}: no service and operation"
    service, operation = args[0], args[1]
    # The CLI's names for services whose botocore model is named otherwise (`aws s3api` is S3's API itself; `aws
    # s3` is the CLI's own file commands, not an API, and stays refused).
    service = {"s3api": "s3"}.get(service, service)
    try:
        model = botocore.session.get_session().get_service_model(service)
    except UnknownServiceError:
        return f"aws: no service {service}"
    # The CLI's own spelling of botocore's names (`SSEKMSKeyId` is `--ssekms-key-id`).
    names = {botocore.xform_name(op, "-"): op for op in model.operation_names}
    if operation not in names:
        return f"aws {service}: no operation {operation}"
    shape = model.operation_model(names[operation]).input_shape
    members = {botocore.xform_name(m, "-") for m in (shape.members if shape else {})}
    for a in args[2:]:
        if a.startswith("--") and a not in globals_ and a[2:] not in members:
            return f"aws {service} {operation}: no option {a} (it takes {', '.join(sorted(members))})"
        if a.startswith("file://") and not os.path.exists(a[len("file://"):]):
            return f"aws {service} {operation}: no file {a}"
    return None


def openapi_routes():
    doc = json.load(open(os.path.join(ROOT, "functions", "claim-api", "openapi.json"), encoding="utf-8"))
    routes = []
    for path, item in doc["paths"].items():
        pattern = "^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(path)) + "$"
        routes.append((re.compile(pattern), {m.upper() for m in item if m != "parameters"}, path))
    return routes


def check_curl(args):
    """`None` if the request `curl ARGS` makes is one the API's OpenAPI document describes, else what is wrong."""
    method, url, body = "GET", None, None
    it = iter(range(len(args)))
    for i in it:
        a = args[i]
        if a in {"-X", "--request"}:
            method = args[i + 1]
            next(it, None)
        elif a in {"-d", "--data", "--data-raw"}:
            body = args[i + 1]
            method = method if method != "GET" else "POST"
            next(it, None)
        elif a in {"-H", "--header", "--user", "-u", "--aws-sigv4", "-o", "--output"}:
            next(it, None)
        elif not a.startswith("-"):
            url = a
    if url is None:
        return "curl: no address"
    path = re.sub(r"^[a-z]+://[^/]+", "", url).split("?")[0]
    for pattern, methods, name in openapi_routes():
        if pattern.match(path):
            if method not in methods:
                return f"curl: {name} has no {method} (it has {', '.join(sorted(methods))})"
            if body is not None:
                try:
                    json.loads(body)
                except ValueError as e:
                    return f"curl {method} {path}: the body is not JSON: {e}"
            return None
    return f"curl: no path of the API's OpenAPI document matches {path}"


CHECKS = {"make": check_make, "aws": check_aws, "curl": check_curl}


def check_command():
    """`doc_examples.py check WHAT ARGS…`, as the shell's `make`, `aws` and `curl` run it."""
    what, args = sys.argv[2], sys.argv[3:]
    wrong = CHECKS[what](args)
    if wrong:
        print(f"doc example: {wrong}", file=sys.stderr)
        sys.exit(1)


# --- python blocks -----------------------------------------------------------------------------------------------


def run_python(page, line, text):
    """The webhook receiver's `verify`, against Standard Webhooks' example (the signer's own test uses it too)."""
    scope = {}
    exec(compile(text, f"{page}:{line}", "exec"), scope)
    verify = scope.get("verify")
    if verify is None:
        return f"{page}:{line}: a python block that defines no verify(); teach tests/doc_examples.py what it does"
    key, ts = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", 1614265330
    body = b'{"test": 2432232314}'
    headers = {"webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp": str(ts),
               "webhook-signature": "v0,bm90IGEgc2lnbmF0dXJl v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}

    class Clock:
        def __init__(self, now):
            self.now = now

        def time(self):
            return self.now

    cases = [(ts + 10, body, headers, True, "the example, signed"), (ts + 10, body + b" ", headers, False,
             "the body altered"), (ts + 301, body, headers, False, "five minutes late"),
             (ts + 10, body, {**headers, "webhook-id": "msg_other"}, False, "another id")]
    for now, b, h, want, what in cases:
        scope["time"] = Clock(now)
        if verify(key, h, b) is not want:
            return f"{page}:{line}: verify() answers {not want} for {what}"
    names = scope.get("names_request")
    if names is None:
        return None
    # The installer's binding of an id to its request, as Apiary's client writes ids (shared/clouds/src/webhook.rs).
    put = json.dumps({"pool": "ocp", "clusterId": "ci-1", "attempt": 2}).encode()
    at = {"webhook-timestamp": "1614265330"}
    bound = [("PUT", "/apiary/clusters/ci-1", {}, "ci-1.PutCluster.2", put, True, "an install"),
             ("GET", "/apiary/clusters/ci-1", {}, "ci-1.GetCluster.2", b"", True, "a look"),
             ("DELETE", "/apiary/clusters/ci-1", {}, "ci-1.DeleteCluster.1", b"", True, "a removal"),
             ("GET", "/apiary/clusters", {"pool": "ocp"}, "ocp.list.1614265330", b"", True, "a list"),
             ("DELETE", "/apiary/clusters/ci-1", {}, "ci-1.GetCluster.1", b"", False, "a look's id as a removal"),
             ("GET", "/apiary/clusters/ci-2", {}, "ci-1.GetCluster.1", b"", False, "a look's id at another cluster"),
             ("PUT", "/apiary/clusters/ci-1", {}, "ci-1.PutCluster.1", put, False, "another attempt's id"),
             ("GET", "/apiary/clusters", {"pool": "other"}, "ocp.list.1614265330", b"", False, "another pool's list"),
             ("POST", "/apiary/clusters/ci-1", {}, "ci-1.PostCluster.1", b"", False, "no operation")]
    for method, path, query, msg_id, b, want, what in bound:
        if names(method, path, query, {**at, "webhook-id": msg_id}, b) is not want:
            return f"{page}:{line}: names_request() answers {not want} for {what}"
    return None


# --- the stack ---------------------------------------------------------------------------------------------------


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(base, path):
    req = urllib.request.Request(base + path, headers={"x-apiary-principal": ADMIN})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)


def settle(base, limit=180):
    """Waits until no claim of any pool is being released."""
    deadline = time.time() + limit
    while time.time() < deadline:
        pools = [p["name"] for p in get(base, "/pools")["pools"]]
        if not any(c["phase"] == "Releasing" for p in pools for c in get(base, f"/pools/{p}/claims")["claims"]):
            return
        time.sleep(1)
    raise SystemExit(f"doc example: claims still releasing after {limit} s")


def tail(path, lines=12):
    """The first and last lines of a log, for a failure's message (a backtrace's middle says little)."""
    try:
        with open(path, errors="replace") as f:
            text = f.read().splitlines()
    except OSError:
        return f"({path}: none)"
    if len(text) > 2 * lines:
        text = text[:lines] + ["..."] + text[-lines:]
    return "\n".join(f"  {path}: {line}" for line in text)


class Stack:
    """`make run`'s stack (infra/run-local.sh) on free ports, its logs in `run_dir`."""

    def __init__(self, run_dir, captures=("logs", "trail", "notifications", "jobs")):
        """`captures`: what the scan for leaked secrets must have read at stop (a run that notifies no claim has no
        notifications)."""
        self.run_dir = run_dir
        self.captures = list(captures)
        self.base = None
        # The API's port is the system's pick (port 0), read back from the file apiary-local writes: a port found
        # free here and bound later could be taken in between (once by one of the fake clouds' own listeners).
        # The scan for leaked secrets (tests/canary_scan.py) reads what the stack captured: its log at debug, the
        # most a stack's LogLevel allows, the notifications its receiver was posted (kept in `canaries`), and, kept
        # at stop, every pool's trail and the reference installer's job output (its directory under `tmp`).
        self.canaries, tmp = os.path.join(run_dir, "canaries"), os.path.join(run_dir, "tmp")
        os.makedirs(tmp, exist_ok=True)
        env = {**os.environ, "APIARY_EMULATOR_PORT": str(free_port()), "APIARY_LISTEN": "127.0.0.1:0",
               "APIARY_RUN_DIR": run_dir, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
               "AWS_REGION": "us-east-1", "APIARY_CANARY_DIR": self.canaries, "APIARY_LOG_LEVEL": "debug",
               "TMPDIR": tmp,
               # The debug build `make test` made (`make run` itself builds and runs the optimized one).
               "APIARY_LOCAL_BIN": os.path.join(TARGET, "debug", "apiary-local")}
        env.pop("RUST_LOG", None)
        address = os.path.join(run_dir, "api.address")
        self.out = open(os.path.join(run_dir, "status.log"), "w")
        self.proc = subprocess.Popen(["bash", "infra/run-local.sh"], cwd=ROOT, env=env, stdout=self.out,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + 180
        while True:
            if self.proc.poll() is not None:
                self.out.flush()
                logs = [tail(os.path.join(run_dir, name)) for name in ("status.log", "apiary.log")]
                raise SystemExit(f"make run's stack stopped (exit {self.proc.returncode}); see {run_dir}\n"
                                 + "\n".join(logs))
            try:
                if self.base is None and os.path.exists(address):
                    with open(address) as f:
                        self.base = f"http://{f.read().strip()}"
                if self.base and len(get(self.base, "/pools")["pools"]) >= 5:
                    return
            except OSError:
                pass
            if time.time() > deadline:
                raise SystemExit(f"make run's stack did not serve its five pools in 180 s; see {run_dir}")
            time.sleep(1)

    def keep_trails(self):
        """Every event of every pool's trail, kept for the scan for leaked secrets."""
        os.makedirs(os.path.join(self.canaries, "trail"), exist_ok=True)
        with open(os.path.join(self.canaries, "trail", "make-run"), "a") as out:
            for pool in [p["name"] for p in get(self.base, "/pools")["pools"]]:
                page = ""
                for _ in range(50):
                    events = get(self.base, f"/pools/{pool}/events?limit=200{page}")
                    out.write(json.dumps(events["events"]) + "\n")
                    if not events.get("nextPage"):
                        break
                    page = f"&page={urllib.parse.quote(events['nextPage'])}"

    def scan(self):
        """The scan for leaked secrets over what the stack captured: its log, trails, notifications, job output."""
        import canary_scan
        for name, folder in [("apiary.log", "logs"), ("status.log", "logs")]:
            os.makedirs(os.path.join(self.canaries, folder), exist_ok=True)
            shutil.copy(os.path.join(self.run_dir, name), os.path.join(self.canaries, folder, "make-run-" + name))
        jobs = os.path.join(self.canaries, "jobs")
        os.makedirs(jobs, exist_ok=True)
        for out in glob.glob(os.path.join(self.run_dir, "tmp", "*-openshift-*", "jobs", "*")):
            shutil.copy(out, jobs)
        lines, ok = canary_scan.scan(self.canaries, self.captures,
                                     ["signing-key", "gcp-key-id", "azure-client-secret", "vsphere-password",
                                      "cluster-api-token", "pull-secret", "kubeadmin-password"])
        if not ok:
            raise SystemExit("make run's stack leaked secrets:\n" + "\n".join(lines))
        print(lines[0].replace("canary scan:", "canary scan of make run:"))

    def stop(self):
        if self.base:
            self.keep_trails()
        os.killpg(self.proc.pid, signal.SIGINT)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.out.close()
        # Every call the functions made was one their roles allow (the emulator's enforcement, infra/role_check.py).
        sys.path.insert(0, os.path.join(ROOT, "infra"))
        import role_check
        refused = role_check.check([os.path.join(self.run_dir, "role-calls.jsonl")], [])
        if refused:
            raise SystemExit("make run's functions made calls their roles do not allow:\n" + "\n".join(refused))
        self.scan()


PRELUDE = r"""
set -eo pipefail
trap 'echo "doc example: $__page:$__line failed (exit $?): $BASH_COMMAND" >&2' ERR
make() { "$__python" "$__runner" check make "$@"; }
aws() { "$__python" "$__runner" check aws "$@"; }
curl() {
  "$__python" "$__runner" check curl "$@"
  case " $* " in *" --aws-sigv4 "*) return 0;; esac
  command curl --fail-with-body "$@"
}
apiary() {
  if [ "$1 $2" = "pool watch" ]; then
    local out; out=$(timeout 5 "$__apiary" "$@") || [ $? = 124 ] || return 1
    case "$out" in *"pool $3 "*) return 0;; *) echo "apiary pool watch drew no frame of $3: $out" >&2; return 1;; esac
  fi
  "$__apiary" "$@"
}
"""


def shell_script(page, found, stack_base):
    """One page's `sh` blocks as one script, each preceded by a wait for releases to finish."""
    parts = [PRELUDE]
    for line, lang, text in found:
        if lang != "sh":
            continue
        text = text.replace(LOCAL_API, stack_base)
        parts.append(f'__page={shlex.quote(page)} __line={line}\necho "--- {page}:{line}" >&2\n'
                     f'"$__python" "$__runner" settle\n{text}')
    return "\n".join(parts) if len(parts) > 1 else None


def scratch_dir():
    """The files the examples name, where a reader would have them."""
    d = tempfile.mkdtemp(prefix="apiary-doc-examples-")
    shutil.copytree(FIXTURES, d, dirs_exist_ok=True)
    os.symlink(os.path.join(ROOT, "infra"), os.path.join(d, "infra"))
    return d


def inline(text, programs):
    """The inline code spans of `text`'s prose that start with one of `programs`."""
    prose = BLOCK.sub("", text)
    return [s for s in re.findall(r"`([^`\n]+)`", prose) if s.split(" ")[0] in programs and " " in s]


def check_apiary_spans(apiary):
    """Every inline `apiary …` names a command: its words up to the first option, with `--help`, exit 0."""
    failures = []
    for page in [*pages(), "BENCHMARKS.md"]:
        for span in inline(open(os.path.join(ROOT, page), encoding="utf-8").read(), ("apiary",)):
            words = []
            for w in split_words(shlex.split(span))[0][1:]:
                if w.startswith("-") or w in {">", ">>"}:
                    break
                words.append(w.split("|")[0])  # `bash|zsh|fish`: one of them
            out = subprocess.run([apiary, *words, "--help"], capture_output=True, text=True)
            if out.returncode:
                failures.append(f"{page}: `{span}`: {out.stderr.strip()}")
    return failures


def static_checks():
    """What needs no stack: the blocks' languages and shell syntax, `make` in prose, the python blocks."""
    failures, counts = [], {}
    for page in [*pages(), "BENCHMARKS.md"]:
        text = open(os.path.join(ROOT, page), encoding="utf-8").read()
        for span in inline(text, ("make", "aws")):
            for cmd in split_words(shlex.split(span)):
                if cmd[0] in ("make", "aws") and (wrong := CHECKS[cmd[0]](cmd[1:])):
                    failures.append(f"{page}: `{span}`: {wrong}")
            counts["make and aws in prose"] = counts.get("make and aws in prose", 0) + 1
    for page in pages():
        for line, lang, text in blocks(page):
            counts[lang or "text"] = counts.get(lang or "text", 0) + 1
            if lang not in LANGUAGES:
                failures.append(f"{page}:{line}: a ```{lang} block: tests/doc_examples.py knows no way to check it")
            elif lang == "sh":
                syntax = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
                if syntax.returncode:
                    failures.append(f"{page}:{line}: {syntax.stderr.strip()}")
            elif lang == "python" and (wrong := run_python(page, line, text)):
                failures.append(wrong)
    return failures, counts


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "check":
        return check_command()
    if len(sys.argv) > 1 and sys.argv[1] == "settle":
        return settle(os.environ["__base"])
    failures, counts = static_checks()
    apiary = os.path.join(TARGET, "debug", "apiary")
    if not os.path.exists(apiary):
        raise SystemExit(f"no {apiary}: build it with `cargo test --workspace --no-run` (make docs-examples does)")
    failures += check_apiary_spans(apiary)
    run_dir = tempfile.mkdtemp(prefix="apiary-doc-stack-")
    stack = Stack(run_dir)
    scratch = scratch_dir()
    ran = 0
    try:
        for page in pages():
            script = shell_script(page, blocks(page), stack.base)
            if script is None:
                continue
            env = {**os.environ, "__python": sys.executable, "__runner": os.path.abspath(__file__),
                   "__apiary": apiary, "__base": stack.base, "APIARY_API": stack.base, "APIARY_PRINCIPAL": ADMIN}
            for var in ("APIARY_STACK", "APIARY_AUTH", "API_URL"):
                env.pop(var, None)
            started = time.time()
            out = subprocess.run(["bash", "-c", script], cwd=scratch, env=env, capture_output=True, text=True,
                                 timeout=900)
            ran += sum(1 for _, lang, _ in blocks(page) if lang == "sh")
            print(f"{page}: its sh blocks ran in {time.time() - started:.0f} s", flush=True)
            if out.returncode:
                failures.append(f"{page}: exit {out.returncode}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    finally:
        stack.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    for f in failures:
        print(f, file=sys.stderr)
    if failures:
        print(f"the stack's logs: {run_dir}", file=sys.stderr)
        sys.exit(1)
    shutil.rmtree(run_dir, ignore_errors=True)
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    print(f"every example ran or was checked ({summary}; {ran} sh blocks ran against make run's stack)")


if __name__ == "__main__":
    main()

"""`make cold-start`: each packaged bootstrap's time from exec to its first request to the Lambda runtime API.

Usage: cold_start.py [--runs N] [--runner CMD] [--lambda-dir DIR] FUNCTION...

Serves a minimal runtime API on 127.0.0.1 and starts target/lambda/<function>/bootstrap (unzipped) with the
environment Lambda gives a function, N times. The clock runs from just before exec to the moment the first
`GET /2018-06-01/runtime/invocation/next` arrives: the whole init phase (logging, configuration, the AWS
clients). The process is then killed; no invocation is made.

The zips `make package` builds are arm64. On an x86_64 machine they run under qemu-aarch64 user emulation (found
on PATH, or --runner), many times slower than a Graviton core: an upper bound, not an estimate. A bootstrap built
for the machine's own architecture (same code, same release profile:
`cargo lambda build --release --x86-64 --lambda-dir target/lambda-x86_64 ...`) runs natively.
"""
import argparse
import http.server
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zipfile

p = argparse.ArgumentParser()
p.add_argument("functions", nargs="+")
p.add_argument("--runs", type=int, default=20)
p.add_argument("--runner", default=None, help="command that runs an arm64 binary (default: qemu-aarch64-static)")
p.add_argument("--lambda-dir", default="target/lambda")
args = p.parse_args()

arrived = threading.Event()


class RuntimeApi(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path.endswith("/runtime/invocation/next"):
            arrived.set()
        # Hold the connection: the bootstrap is killed once the request is seen.
        time.sleep(2)

    def log_message(self, *a):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RuntimeApi)
threading.Thread(target=server.serve_forever, daemon=True).start()
api = f"127.0.0.1:{server.server_address[1]}"

ELF_MACHINES = {0x3E: "x86_64", 0xB7: "aarch64"}


def architecture(path):
    with open(path, "rb") as f:
        header = f.read(20)
    return ELF_MACHINES.get(int.from_bytes(header[18:20], "little"), "unknown")


def runner_for(arch):
    if arch == platform.machine() or (arch == "aarch64" and platform.machine() == "arm64"):
        return []
    if arch != "aarch64":
        sys.exit(f"cold_start: cannot run a {arch} bootstrap on {platform.machine()}")
    found = args.runner or shutil.which("qemu-aarch64-static") or shutil.which("qemu-aarch64")
    sysroot = "/usr/aarch64-linux-gnu"
    if not found or not os.path.isdir(sysroot):
        sys.exit(
            "cold_start: the bootstraps are arm64; on this machine they need qemu user emulation and an arm64 C "
            "library: apt-get install qemu-user-static libc6-arm64-cross"
        )
    return [found, "-L", sysroot]


env = {
    "PATH": "/usr/bin:/bin",
    "AWS_LAMBDA_RUNTIME_API": api,
    "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256",
    "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
    "AWS_LAMBDA_LOG_GROUP_NAME": "/aws/lambda/cold-start",
    "AWS_LAMBDA_LOG_STREAM_NAME": "cold-start",
    "AWS_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "test",
    "AWS_SECRET_ACCESS_KEY": "test",
    "AWS_SESSION_TOKEN": "test",
    "APIARY_STACK": "cold-start",
    "APIARY_TABLE": "cold-start-state",
    "APIARY_RECONCILE_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/cold-start-reconcile.fifo",
    "APIARY_RECONCILE_QUEUE_ARN": "arn:aws:sqs:us-east-1:123456789012:cold-start-reconcile.fifo",
    "APIARY_POWER_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/cold-start-power",
    "APIARY_SCHEDULER_ROLE_ARN": "arn:aws:iam::123456789012:role/cold-start-scheduler",
}

print(f"{'function':<10} {'arch':<30} {'median ms':>9} {'p90 ms':>7} {'min ms':>7}   ({args.runs} runs each)")
with tempfile.TemporaryDirectory() as tmp:
    for fn in args.functions:
        zip_path = os.path.join(args.lambda_dir, fn, "bootstrap.zip")
        if not os.path.isfile(zip_path):
            sys.exit(f"cold_start: {zip_path} is missing: run `make package` first")
        with zipfile.ZipFile(zip_path) as z:
            z.extract("bootstrap", os.path.join(tmp, fn))
        exe = os.path.join(tmp, fn, "bootstrap")
        os.chmod(exe, 0o755)
        arch = architecture(exe)
        runner = runner_for(arch)
        times = []
        for _ in range(args.runs):
            arrived.clear()
            started = time.perf_counter()
            proc = subprocess.Popen(
                runner + [exe],
                env=dict(env, AWS_LAMBDA_FUNCTION_NAME=f"cold-start-{fn}"),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            ok = arrived.wait(10)
            elapsed = (time.perf_counter() - started) * 1000
            proc.kill()
            _, err = proc.communicate()
            if not ok:
                sys.exit(f"cold_start: {fn} never asked for an invocation:\n{err.decode(errors='replace')}")
            times.append(elapsed)
        times.sort()
        p90 = times[min(len(times) - 1, int(len(times) * 0.9))]
        how = f"{arch}, under {os.path.basename(runner[0])}" if runner else arch
        print(f"{fn:<10} {how:<30} {statistics.median(times):>9.1f} {p90:>7.1f} {times[0]:>7.1f}")
server.shutdown()

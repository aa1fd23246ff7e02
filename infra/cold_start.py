"""`make cold-start`: each packaged bootstrap's time from exec to its first request to the Lambda runtime API.

Usage: cold_start.py [--runs N] [--runner CMD] FUNCTION...

Serves a minimal runtime API on 127.0.0.1 and starts target/lambda/<function>/bootstrap (unzipped) with the
environment Lambda gives a function, N times. The clock runs from just before exec to the moment the first
`GET /2018-06-01/runtime/invocation/next` arrives: the whole init phase (logging, configuration, the AWS
clients). The process is then killed; no invocation is made.

The zips are arm64. On an x86_64 machine they run under qemu-aarch64 user emulation (found on PATH, or
--runner), which is slower than a Graviton core: the figures are an upper bound.
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

runner = []
if platform.machine() not in ("aarch64", "arm64"):
    found = args.runner or shutil.which("qemu-aarch64-static") or shutil.which("qemu-aarch64")
    if not found:
        sys.exit("cold_start: the bootstraps are arm64; install qemu-user-static (apt-get install qemu-user-static)")
    runner = [found]

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

print(f"{'function':<10} {'median ms':>9} {'p90 ms':>7} {'min ms':>7}   ({args.runs} runs{', under ' + runner[0] if runner else ''})")
with tempfile.TemporaryDirectory() as tmp:
    for fn in args.functions:
        zip_path = os.path.join(args.lambda_dir, fn, "bootstrap.zip")
        if not os.path.isfile(zip_path):
            sys.exit(f"cold_start: {zip_path} is missing: run `make package` first")
        with zipfile.ZipFile(zip_path) as z:
            z.extract("bootstrap", os.path.join(tmp, fn))
        exe = os.path.join(tmp, fn, "bootstrap")
        os.chmod(exe, 0o755)
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
        print(f"{fn:<10} {statistics.median(times):>9.1f} {p90:>7.1f} {times[0]:>7.1f}")
server.shutdown()

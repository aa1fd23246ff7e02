"""The claim API against its own OpenAPI document: schemathesis (pinned in infra/requirements.txt) generates
requests from functions/claim-api/openapi.json, valid and invalid, for every operation, and sends them to the stack
`make run` starts (infra/run-local.sh, on free ports, as tests/doc_examples.py starts it) as a stack admin. It
fails on any server error and on any answer whose status, content type or body the document does not describe.

`make api-fuzz` runs it (`make test` does); FUZZ_EXAMPLES sets the cases per operation (default 25), FUZZ_SEED the
seed (default 1, so a run is repeatable). A failure prints the request that caused it; the stack's logs stay in
the directory named at the end.
"""

import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from doc_examples import ADMIN, ROOT, Stack  # noqa: E402

CHECKS = ",".join([
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
])


def main():
    st = os.path.join(os.path.dirname(sys.executable), "st")
    if not os.path.exists(st):
        raise SystemExit(f"no {st}: install infra/requirements.txt into this virtualenv (make venv does)")
    run_dir = tempfile.mkdtemp(prefix="apiary-fuzz-stack-")
    # The fuzzer's claims go to pools that notify no one: its run is scanned without notifications.
    stack = Stack(run_dir, captures=("logs", "trail", "jobs"))
    report = os.path.join(run_dir, "fuzz-report")
    try:
        env = {**os.environ, "SCHEMATHESIS_HOOKS": "api_fuzz_hooks",
               "PYTHONPATH": os.path.dirname(os.path.abspath(__file__))}
        cmd = [
            st, "--config-file", os.path.join(ROOT, "tests", "api_fuzz.toml"),
            "run", os.path.join(ROOT, "functions", "claim-api", "openapi.json"),
            "--url", stack.base,
            "--checks", CHECKS,
            "--header", f"x-apiary-principal: {ADMIN}",
            "--max-examples", os.environ.get("FUZZ_EXAMPLES", "25"),
            "--seed", os.environ.get("FUZZ_SEED", "1"),
            "--phases", "examples,coverage,fuzzing",
            # One worker: hypothesis describes its strategies by parsing source, which is not safe across threads
            # on this Python (a SystemError in the coverage phase with two).
            "--workers", "1",
            "--request-timeout", "30",
            "--suppress-health-check", "all",
            "--generation-database", "none",
            "--report", "ndjson", "--report-dir", report,
            "--no-color",
        ]
        out = subprocess.run(cmd, cwd=run_dir, env=env, text=True, capture_output=True, timeout=1200)
    finally:
        stack.stop()
    print(out.stdout[-6000:])
    if out.returncode:
        print(out.stderr[-3000:], file=sys.stderr)
        print(f"api fuzz: failures above; the stack's logs: {run_dir}", file=sys.stderr)
        sys.exit(1)
    shutil.rmtree(run_dir, ignore_errors=True)


if __name__ == "__main__":
    main()

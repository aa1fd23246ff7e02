"""The AWS emulator (infra/emulator.py) on a free port, for the Python tests that need one of their own."""
import os
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def start(name, *options):
    """Starts the emulator with `options`, its output in a temporary log named after `name`; returns the process,
    its endpoint URL and the log. Fails, naming the log, if it does not listen within ten seconds."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tempfile.NamedTemporaryFile(prefix=f"apiary-{name}-emulator-", suffix=".log", delete=False)
    process = subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "infra", "emulator.py"), "--port", str(port), *options],
        stdout=log,
        stderr=log,
    )
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process, f"http://127.0.0.1:{port}", log
        except OSError:
            time.sleep(0.1)
    process.terminate()
    raise RuntimeError(f"the emulator did not start; see {log.name}")

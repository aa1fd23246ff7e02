"""A fake cloud in its own process, for a vendor's client to drive (tests/conformance_*.py): one of the binaries of
shared/fakeclouds/src/bin, built by cargo, which prints one JSON line (what a client needs to reach it) and then
takes one command a line on its standard input, answering `ok`, until it closes."""

import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class FakeProcess:
    """The fake `binary`, started; `hello` is the line it printed."""

    def __init__(self, binary):
        cargo = os.environ.get("CARGO", "cargo")
        build = subprocess.run([cargo, "build", "--quiet", "-p", "apiary-fakeclouds", "--bin", binary], cwd=ROOT)
        if build.returncode:
            raise SystemExit(f"conformance: building {binary} failed (above)")
        target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
        self.proc = subprocess.Popen([os.path.join(target, "debug", binary)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.hello = json.loads(self.proc.stdout.readline())

    def tell(self, command):
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "ok", command

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=10)

"""The local AWS emulator: moto's server, with every request but SQS receives handled one at a time.

moto's backends are not thread-safe: two DynamoDB transactions arriving together can both pass their conditions
before either writes, which real DynamoDB never allows. Serializing requests gives the emulator DynamoDB's
atomicity. SQS ReceiveMessage long polls are left outside the lock (they wait for messages that other requests
send).

Usage: emulator.py [--port 5055]
"""
import argparse
import signal
import sys
import threading

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple

parser = argparse.ArgumentParser()
parser.add_argument("--host", default="127.0.0.1")
parser.add_argument("--port", type=int, default=5055)
args = parser.parse_args()

app = DomainDispatcherApplication(create_backend_app)
lock = threading.Lock()


def serialized(environ, start_response):
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    if target.endswith("ReceiveMessage"):
        return app(environ, start_response)
    with lock:
        # Materialize the body inside the lock: the backend runs while it is produced.
        return list(app(environ, start_response))


signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
run_simple(args.host, args.port, serialized, threaded=True, use_reloader=False)

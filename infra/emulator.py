"""The local AWS emulator: moto's server, with every request but SQS receives handled one at a time.

moto's backends are not thread-safe: two DynamoDB transactions arriving together can both pass their conditions
before either writes, which real DynamoDB never allows. Serializing requests gives the emulator DynamoDB's
atomicity. SQS ReceiveMessage long polls are left outside the lock (they wait for messages that other requests
send).

moto backs up a DynamoDB transaction by deep-copying every table it touches, once per item: a cost that grows
with the table (tens of milliseconds per claim for a pool of a few hundred clusters) where DynamoDB's does not.
The backup here copies the tables' item maps instead, which restores the same state, because a Put or a Delete
replaces an item object and never changes one in place; a transaction with an Update (which changes its item in
place; Apiary sends none) keeps moto's deep copy.

Usage: emulator.py [--port 5055]
"""
import argparse
import copy
import signal
import sys
import threading
from collections import defaultdict

import moto.dynamodb.models as dynamodb_models
from moto.dynamodb.models.table import Table
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple

parser = argparse.ArgumentParser()
parser.add_argument("--host", default="127.0.0.1")
parser.add_argument("--port", type=int, default=5055)
args = parser.parse_args()


def _backup(table):
    """A table as moto's transaction backup needs it: its own item maps, the items themselves shared."""
    saved = copy.copy(table)
    if table.range_key_attr is not None:
        saved.items = defaultdict(dict, {h: dict(by_range) for h, by_range in table.items.items()})
    else:
        saved.items = dict(table.items)
    return saved


_transact_write_items = dynamodb_models.DynamoDBBackend.transact_write_items


def transact_write_items(self, transact_items):
    if any("Update" in item for item in transact_items):
        return _transact_write_items(self, transact_items)
    backups = {}

    class ItemMaps:
        @staticmethod
        def deepcopy(value, memo=None):
            if isinstance(value, Table):
                if id(value) not in backups:
                    backups[id(value)] = _backup(value)
                return backups[id(value)]
            return copy.deepcopy(value, memo)

    dynamodb_models.copy = ItemMaps
    try:
        return _transact_write_items(self, transact_items)
    finally:
        dynamodb_models.copy = copy


dynamodb_models.DynamoDBBackend.transact_write_items = transact_write_items

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

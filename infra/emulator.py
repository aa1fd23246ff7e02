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

A Query of a local secondary index makes moto sort every item of the table and size each one of the partition: a
cost that grows with every pool's items. A local index's items all share the table's partition key, so the query
here hands moto only the queried partition's items that the index holds and the key condition selects; moto's own
code does the rest (the condition again, the order, the limit, the projection).

moto writes each DynamoDB answer through botocore's shapes, value by value: a few milliseconds per cluster item, so
a reconcile's Query of a pool's partition held the emulator for half a second at 200 clusters. An answer that is
plain JSON already (no binary values) is written here as it is, which is the same document.

`--as-released` leaves moto as it is released, for comparing answers (`tests/emulator_test.py`).

Usage: emulator.py [--port 5055] [--as-released]
"""
import argparse
import copy
import json
import signal
import sys
import threading
from collections import defaultdict

import moto.dynamodb.models as dynamodb_models
from moto.core.responses import ActionResult
from moto.dynamodb.models.table import Table
from moto.dynamodb.responses import DynamoResult
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple

parser = argparse.ArgumentParser()
parser.add_argument("--host", default="127.0.0.1")
parser.add_argument("--port", type=int, default=5055)
parser.add_argument("--as-released", action="store_true", help="moto's own transactions, index queries and answers")
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



_query = Table.query


def query(self, *args, **kwargs):
    index_name = args[7] if len(args) > 7 else kwargs.get("index_name")
    partition_key = dict(kwargs.get("hash_key_conditions") or []).get(self.hash_key_attr)
    local = next((index for index in self.indexes if index.name == index_name), None)
    if local is None or partition_key is None or self.range_key_attr is None or len(args) < 3:
        return _query(self, *args, **kwargs)
    # Only the items the index holds (those with its sort key) and its key condition selects; moto checks both
    # again, and sizes every item it is handed before it looks at the condition.
    range_attr = next(key["AttributeName"] for key in local.schema if key["KeyType"] == "RANGE")
    comparison, bounds = args[1], args[2]

    def selected(item):
        value = item.attrs.get(range_attr)
        return value is not None and (not comparison or value.compare(comparison, bounds))

    items = self.items[partition_key].values() if partition_key in self.items else []
    partition = [item for item in items if selected(item)]
    partition = _first_page(self, partition, range_attr, args)
    # A keys-only index answers with the keys: handed those, moto copies small items instead of whole ones.
    # (Not when a projection or a filter may name other attributes; the old-style filters come as extra keywords.)
    keys_only = (local.projection or {}).get("ProjectionType") == "KEYS_ONLY"
    projection = args[6] if len(args) > 6 else None
    filtered = (args[9] if len(args) > 9 else None) is not None
    extra = set(kwargs) - {"hash_key_conditions", "range_key_conditions"}
    if keys_only and not projection and not filtered and not extra:
        partition = [local.project(item) for item in partition]
    self.all_items = lambda: partition
    try:
        return _query(self, *args, **kwargs)
    finally:
        del self.all_items


def _first_page(table, items, range_attr, args):
    """Of `items` (one partition, in an index sorted by `range_attr`, both keys strings), those a page of at most
    `Limit` items can hold, in the query's order and after its exclusive start key, and one more: moto sorts and
    sizes fewer items and answers the same page. All of them when anything does not fit that description."""
    limit, start, forward = (args[3], args[4], args[5]) if len(args) > 5 else (None, None, True)
    strings = all(i.attrs[range_attr].type == "S" and i.range_key.type == "S" for i in items)
    if not limit or not strings:
        return items

    def order(item):
        return (item.attrs[range_attr].value, item.range_key.value)

    items = sorted(items, key=order, reverse=forward is False)
    if start:
        try:
            after = (start[range_attr]["S"], start[table.range_key_attr]["S"])
        except (KeyError, TypeError):
            return items
        items = [i for i in items if (order(i) > after if forward is not False else order(i) < after)]
    return items[: limit + 1]


def _present(value):
    """The JSON document without the absent (None) members the shapes would leave out."""
    if isinstance(value, dict):
        return {k: _present(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_present(v) for v in value]
    return value


def execute_result(self, context):
    shape = context.operation_model.output_shape
    if not isinstance(self.result, dict) or shape is None:
        return ActionResult.execute_result(self, context)
    # Only the members the operation's answer has (moto adds a few of its own, which the shapes leave out).
    result = {k: v for k, v in self.result.items() if k in shape.members}
    try:
        body = json.dumps(_present(result), separators=(",", ":"))
    except TypeError:
        # Bytes (a binary attribute): the shapes write them in base64.
        return ActionResult.execute_result(self, context)
    status = context.operation_model.http.get("responseCode", 200)
    return status, {"Content-Type": "application/x-amz-json-1.0"}, body


if not args.as_released:
    dynamodb_models.DynamoDBBackend.transact_write_items = transact_write_items
    Table.query = query
    DynamoResult.execute_result = execute_result

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

"""The local AWS emulator: moto's server, with every request but SQS receives handled one at a time, in the order
they arrive.

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

moto also deep-copies a Query's items before it projects them (projecting makes new items anyway), hands a Query of
the table every item of every partition to sort, converts every answer into plain documents value by value before
writing it, and finds which service a request is for by listing its own package's folders from disk, for every
request. Here a Query of the table is handed its partition only, its items are not copied (the answer is written
while the request holds the lock, before anything can change them), an answer's values are written straight from
moto's own, and the service found for a host is remembered.

werkzeug, moto's HTTP server, ends every connection after one answer, so each request paid for a connection and a
thread of its own; here a connection is kept for the client's next request (`RequestHandler`).

moto's STS assumes any role, existing or not, with any ExternalId: the role ARN's account becomes the account of
the credentials it gives, which is how the emulator keeps accounts apart. Here a role is held to what STS checks
for Apiary's member accounts: it must exist, and a trust policy that requires an ExternalId (`sts:ExternalId` in a
StringEquals condition) gets one of its values, or the answer is AccessDenied. The one role assumed without
existing is `OrganizationAccountAccessRole`, which AWS Organizations makes in every member account: the emulator
has no Organizations to make it, and it is how `deploy_local.py` enters a member account. The caller's identity is
not checked against the trust policy's principal (the local functions run with the emulator's test credentials,
not as the power role).

moto's CloudFormation does not know `AWS::Lambda::Url` (the claim API's function URL, `ClaimEndpoint=function-url`):
it would skip the resource and refuse the template's references to it. Here CloudFormation makes it through moto's
own Lambda (CreateFunctionUrlConfig, DeleteFunctionUrlConfig), and a function URL ends with a slash, as Lambda gives
it. Nor does it know `AWS::CodeBuild::Project` (the reference installer's jobs, infra/installer.yaml): here it is made
through moto's own CodeBuild.

moto's CloudFormation cannot update an `AWS::DynamoDB::Table`: the resource drops out of the stack on any change
to it, and with it every output and reference naming it (the table itself is left, unchanged). Here a table is
updated as CloudFormation updates it, through moto's own UpdateTable: in place for what UpdateTable changes
(deletion protection, billing mode, throughput, global indexes added or removed), replaced, the old one kept as
`UpdateReplacePolicy: Retain` keeps it, when its name or key schema changes.

A request signed by a session of a role (credentials from AssumeRole, as each of Apiary's functions runs locally) is
answered only if the role's policies allow it, as AWS authorizes it (`infra/role_enforcement.py`,
`infra/role_check.py`); `--calls FILE` logs the statements each role used and every call refused. moto also updates
a role's inline policies with its stack here, as CloudFormation does.

`--as-released` leaves moto as it is released, for comparing answers (`tests/emulator_test.py`); the function URLs
CloudFormation makes here, and the table updates, are what moto lacks, not a change to what it does, and stay.

Usage: emulator.py [--port 5055] [--as-released]
"""
import argparse
import copy
import io
import json
import signal
import sys
import threading
from collections import defaultdict, deque

import moto.dynamodb.models as dynamodb_models
import moto.dynamodb.models.table as table_module
from moto.awslambda.models import FunctionUrlConfig, lambda_backends
from moto.codebuild.models import codebuild_backends
from moto.core.common_models import CloudFormationModel
from moto.core.responses import ActionResult
from moto.dynamodb.comparisons import OpDefault
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import Table
from moto.dynamodb.models.utilities import dynamo_to_dict
from moto.dynamodb.responses import DynamoResult
from moto.iam.models import Role as IamRole
from moto.iam.models import iam_backends
from moto.sqs.models import Queue, SQSBackend
from moto.sts.exceptions import STSClientError
from moto.sts.models import STSBackend
from moto.utilities.utils import get_partition
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, run_simple

import role_enforcement

parser = argparse.ArgumentParser()
parser.add_argument("--host", default="127.0.0.1")
parser.add_argument("--port", type=int, default=5055)
parser.add_argument("--as-released", action="store_true", help="moto's own transactions, index queries and answers")
parser.add_argument("--calls", metavar="FILE",
                    help="append each role's first use of a statement, and every refused call, as JSON lines")
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


class ItemsAsTheyAre:
    """moto's `copy` inside a Query: the items found are handed on as they are, not deep-copied."""

    @staticmethod
    def deepcopy(value, memo=None):
        return list(value) if isinstance(value, list) else copy.deepcopy(value, memo)


def query(self, *args, **kwargs):
    table_module.copy = ItemsAsTheyAre
    try:
        return _partition_query(self, *args, **kwargs)
    finally:
        table_module.copy = copy


def _partition_query(self, *args, **kwargs):
    index_name = args[7] if len(args) > 7 else kwargs.get("index_name")
    partition_key = dict(kwargs.get("hash_key_conditions") or []).get(self.hash_key_attr)
    if partition_key is None or self.range_key_attr is None or len(args) < 3:
        return _query(self, *args, **kwargs)
    items = self.items[partition_key].values() if partition_key in self.items else []
    if index_name is None:
        # A Query of the table: its partition's items (moto selects them again, and sorts them).
        partition = list(items)
        self.all_items = lambda: partition
        try:
            return _query(self, *args, **kwargs)
        finally:
            del self.all_items
    local = next((index for index in self.indexes if index.name == index_name), None)
    if local is None:
        return _query(self, *args, **kwargs)
    # Only the items the index holds (those with its sort key) and its key condition selects; moto checks both
    # again, and sizes every item it is handed before it looks at the condition.
    range_attr = next(key["AttributeName"] for key in local.schema if key["KeyType"] == "RANGE")
    comparison, bounds = args[1], args[2]

    def selected(item):
        value = item.attrs.get(range_attr)
        return value is not None and (not comparison or value.compare(comparison, bounds))

    partition = [item for item in items if selected(item)]
    partition = _first_page(self, partition, range_attr, args)
    # A keys-only index answers with the keys: handed those, moto copies small items instead of whole ones.
    # (Not when a projection or a filter may name other attributes; the old-style filters come as extra keywords.)
    keys_only = (local.projection or {}).get("ProjectionType") == "KEYS_ONLY"
    projection = args[6] if len(args) > 6 else None
    filtered = not isinstance(args[9] if len(args) > 9 else None, (type(None), OpDefault))
    extra = set(kwargs) - {"hash_key_conditions", "range_key_conditions"}
    if keys_only and not projection and not filtered and not extra:
        keys = local.table_key_attrs + [key["AttributeName"] for key in local.schema]
        partition = [_keys(item, keys) for item in partition]
    self.all_items = lambda: partition
    try:
        return _query(self, *args, **kwargs)
    finally:
        del self.all_items


def _keys(item, keys):
    """`item` with only its attributes named in `keys`, as a keys-only index holds it (moto's own projection turns
    the whole item into plain values once per key)."""
    return Item(item.hash_key, item.range_key, {k: {item.attrs[k].type: item.attrs[k].value} for k in keys
                                                if k in item.attrs})


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


def _value(value):
    """One of moto's values as its JSON document (`{"S": "x"}`), for the encoder; what is not plain JSON (bytes,
    times) is refused, and the answer is written by the shapes instead."""
    if isinstance(value, DynamoType) and value.type not in ("B", "BS"):
        return {value.type: value.value}
    if hasattr(value, "to_json") and not isinstance(value, DynamoType):
        return _present(value.to_json())
    raise TypeError(type(value).__name__)


def dynamo_result(self, result):
    # Kept as moto's values until it is written (execute_result), in the same request.
    ActionResult.__init__(self, result)


def execute_result(self, context):
    shape = context.operation_model.output_shape
    if isinstance(self.result, dict) and shape is not None:
        # Only the members the operation's answer has (moto adds a few of its own, which the shapes leave out).
        result = {k: v for k, v in self.result.items() if k in shape.members}
        try:
            body = json.dumps(_present(result), separators=(",", ":"), default=_value)
        except TypeError:
            pass
        else:
            status = context.operation_model.http.get("responseCode", 200)
            return status, {"Content-Type": "application/x-amz-json-1.0"}, body
    # Binary values or times: the shapes write them (in base64, as dates).
    self._result = dynamo_to_dict(self.result)
    return ActionResult.execute_result(self, context)


_queue_attributes = Queue.attributes
sending = threading.local()


def send_message(self, *args, **kwargs):
    sending.now = True
    try:
        return _send_message(self, *args, **kwargs)
    finally:
        sending.now = False


def queue_attributes(self):
    """A queue's attributes; while a message is sent, only the one sending reads (moto reads them up to four times
    a send, and counting the queue's messages for them made a send's cost grow with the queue)."""
    if getattr(sending, "now", False):
        value = self.content_based_deduplication
        return {"ContentBasedDeduplication": str(value).lower() if isinstance(value, bool) else value}
    return _queue_attributes.fget(self)


_send_message = SQSBackend.send_message
_backend_for_host = DomainDispatcherApplication.get_backend_for_host


def backend_for_host(self, host):
    """The service a host name is for, looked up once per name (moto lists its own folders every time)."""
    known = self.__dict__.setdefault("known_hosts", {})
    if host not in known:
        known[host] = _backend_for_host(self, host)
    return known[host]


class AssumeRoleDenied(STSClientError):
    code = "AccessDenied"


#: The role AWS Organizations makes in each member account; the emulator lets it be assumed without existing.
ORGANIZATION_ROLE = "OrganizationAccountAccessRole"

_assume_role = STSBackend.assume_role


def _external_ids_required(trust_policy):
    """The ExternalIds a trust policy requires (StringEquals sts:ExternalId), or None when it requires none."""
    try:
        doc = json.loads(trust_policy) if isinstance(trust_policy, str) else trust_policy
    except ValueError:
        return None
    statements = doc.get("Statement", [])
    required = None
    for statement in statements if isinstance(statements, list) else [statements]:
        condition = statement.get("Condition", {}).get("StringEquals", {})
        for key, values in condition.items():
            if key.lower() == "sts:externalid":
                required = (required or set()) | set(values if isinstance(values, list) else [values])
    return required


def assume_role(self, region_name, role_session_name, role_arn, policy, duration, external_id):
    """STS's checks of a role: it exists, and gets the ExternalId its trust policy requires."""
    account = role_arn.split(":")[4] if role_arn.count(":") >= 5 else self.account_id
    name = role_arn.rsplit("/", 1)[-1]
    denied = f"User: arn:aws:iam::{self.account_id}:user/moto is not authorized to perform: sts:AssumeRole on resource: {role_arn}"
    if name != ORGANIZATION_ROLE:
        try:
            role = iam_backends[account][get_partition(region_name)].get_role_by_arn(role_arn)
        except Exception:
            raise AssumeRoleDenied(denied)
        required = _external_ids_required(role.assume_role_policy_document)
        if required is not None and external_id not in required:
            raise AssumeRoleDenied(denied)
    return _assume_role(self, region_name, role_session_name, role_arn, policy, duration, external_id)


class FunctionUrl(CloudFormationModel):
    """`AWS::Lambda::Url`: the URL config of the function `TargetFunctionArn` names, made, changed and removed
    through moto's Lambda; `FunctionUrl` and `FunctionArn` as `Fn::GetAtt` reads them."""

    # moto files each model under the service its module is in.
    __module__ = "moto.awslambda.models"

    def __init__(self, config):
        self.config = config

    @staticmethod
    def cloudformation_name_type():
        return ""

    @staticmethod
    def cloudformation_type():
        return "AWS::Lambda::Url"

    @classmethod
    def has_cfn_attr(cls, attr):
        return attr in ("FunctionUrl", "FunctionArn")

    @property
    def physical_resource_id(self):
        return self.config.function.function_arn

    def get_cfn_attribute(self, attribute_name):
        return self.config.to_dict()[attribute_name]

    @staticmethod
    def _settings(properties):
        return {k: properties[k] for k in ("AuthType", "Cors", "InvokeMode") if k in properties}

    @classmethod
    def create_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
        properties = cloudformation_json["Properties"]
        backend = lambda_backends[account_id][region_name]
        return cls(backend.create_function_url_config(properties["TargetFunctionArn"], cls._settings(properties)))

    @classmethod
    def update_from_cloudformation_json(cls, original_resource, new_resource_name, cloudformation_json, account_id,
                                        region_name):
        properties = cloudformation_json["Properties"]
        backend = lambda_backends[account_id][region_name]
        return cls(backend.update_function_url_config(properties["TargetFunctionArn"], cls._settings(properties)))

    @classmethod
    def delete_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name):
        lambda_backends[account_id][region_name].delete_function_url_config(
            cloudformation_json["Properties"]["TargetFunctionArn"])


def _camel(value):
    """CloudFormation's PascalCase properties as the CodeBuild API names them (`ComputeType` -> `computeType`)."""
    if isinstance(value, dict):
        return {k[:1].lower() + k[1:]: _camel(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_camel(v) for v in value]
    return value


class CodeBuildProject(CloudFormationModel):
    """`AWS::CodeBuild::Project` (the reference installer's jobs), made and removed through moto's CodeBuild;
    `Ref` is its name and `Arn` its ARN, as CloudFormation gives them."""

    __module__ = "moto.codebuild.models"

    def __init__(self, name, arn):
        self.name, self.arn = name, arn

    @staticmethod
    def cloudformation_name_type():
        return "Name"

    @staticmethod
    def cloudformation_type():
        return "AWS::CodeBuild::Project"

    @classmethod
    def has_cfn_attr(cls, attr):
        return attr == "Arn"

    @property
    def physical_resource_id(self):
        return self.name

    def get_cfn_attribute(self, attribute_name):
        return self.arn

    @classmethod
    def create_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
        p = cloudformation_json["Properties"]
        made = codebuild_backends[account_id][region_name].create_project(
            project_name=resource_name, description=p.get("Description"), project_source=_camel(p["Source"]),
            artifacts=_camel(p["Artifacts"]), environment=_camel(p["Environment"]), service_role=p["ServiceRole"],
            tags=_camel(p.get("Tags")), cache=_camel(p.get("Cache")), timeout=p.get("TimeoutInMinutes"),
            queued_timeout=p.get("QueuedTimeoutInMinutes"), source_version=p.get("SourceVersion"),
            logs_config=_camel(p.get("LogsConfig")), vpc_config=_camel(p.get("VpcConfig")))
        return cls(resource_name, made["arn"])

    @classmethod
    def update_from_cloudformation_json(cls, original_resource, new_resource_name, cloudformation_json, account_id,
                                        region_name):
        cls.delete_from_cloudformation_json(original_resource.name, cloudformation_json, account_id, region_name)
        return cls.create_from_cloudformation_json(original_resource.name, cloudformation_json, account_id,
                                                   region_name)

    @classmethod
    def delete_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name):
        codebuild_backends[account_id][region_name].delete_project(resource_name)


_function_url_config = FunctionUrlConfig.__init__


def update_table(cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name):
    """`AWS::DynamoDB::Table` updated by CloudFormation: in place through UpdateTable, or replaced by a new table
    (the old one kept) when its name or key schema changes, as CloudFormation replaces it."""
    properties = cloudformation_json["Properties"]
    if new_resource_name != original_resource.name or properties.get("KeySchema") != original_resource.schema:
        return cls.create_from_cloudformation_json(new_resource_name, cloudformation_json, account_id, region_name)
    have = {i.name for i in original_resource.global_indexes}
    want = {i["IndexName"]: i for i in properties.get("GlobalSecondaryIndexes", [])}
    indexes = [{"Create": i} for name, i in want.items() if name not in have]
    indexes += [{"Delete": {"IndexName": name}} for name in sorted(have - want.keys())]
    billing = "PAY_PER_REQUEST" if properties.get("BillingMode") == "PAY_PER_REQUEST" else "PROVISIONED"
    return dynamodb_models.dynamodb_backends[account_id][region_name].update_table(
        name=original_resource.name,
        attr_definitions=properties.get("AttributeDefinitions"),
        global_index=indexes,
        throughput=properties.get("ProvisionedThroughput"),
        billing_mode=billing,
        stream_spec=None,
        deletion_protection_enabled=str(properties.get("DeletionProtectionEnabled", False)).lower() == "true",
        warm_throughput=None,
    )


Table.update_from_cloudformation_json = classmethod(update_table)

moto_role_update = IamRole.update_from_cloudformation_json.__func__


def update_role(cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name):
    """A role updated as CloudFormation updates it: its inline policies too, each replaced by the template's (moto
    changes only the description and session length, so a stack update would leave the roles' old grants). A policy
    the template no longer names is left: the role cannot tell it from one an `AWS::IAM::Policy` resource put on it
    (as `PowerMemberRolesPolicy` does), and Apiary's roles keep their policies' names."""
    role = moto_role_update(cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name)
    for policy in cloudformation_json["Properties"].get("Policies", []):
        role.put_policy(policy["PolicyName"], policy["PolicyDocument"])
    return role


IamRole.update_from_cloudformation_json = classmethod(update_role)


def function_url_config(self, function, config):
    """A function URL as Lambda gives it: `https://ID.lambda-url.REGION.on.aws/`, with its closing slash."""
    _function_url_config(self, function, config)
    self.url += "/"


if not args.as_released:
    FunctionUrlConfig.__init__ = function_url_config
    dynamodb_models.DynamoDBBackend.transact_write_items = transact_write_items
    Table.query = query
    DynamoResult.__init__ = dynamo_result
    DynamoResult.execute_result = execute_result
    DomainDispatcherApplication.get_backend_for_host = backend_for_host
    SQSBackend.send_message = send_message
    Queue.attributes = property(queue_attributes)
    STSBackend.assume_role = assume_role

app = DomainDispatcherApplication(create_backend_app)


class FairLock:
    """A lock taken in the order it was asked for. `threading.Lock` favours whichever thread runs next: under a
    burst of hundreds of requests some waited more than the SDKs' ten seconds while later ones went ahead."""

    def __init__(self):
        self.guard = threading.Lock()
        self.waiting = deque()
        self.held = False

    def __enter__(self):
        with self.guard:
            if not self.held:
                self.held = True
                return
            turn = threading.Lock()
            turn.acquire()
            self.waiting.append(turn)
        turn.acquire()  # released by the holder before, handing the lock over

    def __exit__(self, *_):
        with self.guard:
            if self.waiting:
                self.waiting.popleft().release()
            else:
                self.held = False


lock = FairLock()


roles = role_enforcement.Enforcer(args.calls)


def serialized(environ, start_response):
    # The request's body read whole before anything else: a slow client holds up no one else while it sends, and the
    # connection is left at the start of its next request.
    if environ.get("CONTENT_LENGTH"):
        environ["wsgi.input"] = io.BytesIO(environ["wsgi.input"].read(int(environ["CONTENT_LENGTH"])))
    if environ.get("HTTP_X_AMZ_TARGET", "").endswith("ReceiveMessage"):
        refused = roles.refusal(environ)
        return refused(start_response) if refused else app(environ, start_response)
    with lock:
        answer = roles.simulation(environ) or roles.alarms(environ) or roles.refusal(environ)
        if answer:
            return answer(start_response)
        # Materialize the answer inside the lock: the backend runs while it is produced.
        return list(app(environ, start_response))


signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))


# A burst of hundreds of claims opens hundreds of connections at once (the emulator answers each request on a
# connection of its own): past werkzeug's listen queue of 128 the kernel drops them, and their clients try again
# one, three, seven seconds later. The kernel caps this at net.core.somaxconn.
BaseWSGIServer.request_queue_size = 4096


class Body(io.RawIOBase):
    """A connection's input as werkzeug's request handler sees it: request lines and headers pass through, and
    `read` stops at the end of the request's stated body. werkzeug reads whatever a client sent after its answer and
    throws it away, which is safe only because it ends every connection; here the next request is left alone."""

    def __init__(self, stream):
        self.stream = stream
        self.left = 0

    def readline(self, limit=-1):
        return self.stream.readline(limit)

    def read(self, size=-1):
        size = self.left if size is None or size < 0 else min(size, self.left)
        data = self.stream.read(size) if size else b""
        self.left -= len(data)
        return data


class RequestHandler(WSGIRequestHandler):
    # An answer's head and body go out in two writes: with Nagle's algorithm the body waits for the client's
    # delayed acknowledgement of the head, milliseconds on every request.
    disable_nagle_algorithm = True

    def setup(self):
        super().setup()
        if keep_alive:
            self.rfile = Body(self.rfile)

    def make_environ(self):
        environ = super().make_environ()
        # A body of a stated length can be read to its end and no further; one sent in chunks ends the connection.
        self.keeps = keep_alive and "HTTP_TRANSFER_ENCODING" not in environ
        if keep_alive:
            self.rfile.left = int(environ.get("CONTENT_LENGTH") or 0) if self.keeps else sys.maxsize
        return environ

    def send_header(self, keyword, value):
        # werkzeug ends every connection after one answer; here a connection carries the client's next request.
        # Without this each of a burst's requests paid for a new connection and a new thread.
        if keyword.lower() == "connection" and value == "close" and getattr(self, "keeps", False):
            return
        super().send_header(keyword, value)


keep_alive = not args.as_released


run_simple(args.host, args.port, serialized, threaded=True, use_reloader=False, request_handler=RequestHandler)

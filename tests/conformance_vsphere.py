"""vCenter's Automation API on the wire against VMware's own SDK: every request Apiary's vSphere adapter sends in a
whole cluster lifecycle (shared/clouds/tests/wire.rs, against the fake vCenter), and every answer of the fake it
reads, held against the operations and types of the vSphere Automation SDK for Python (vmware-vcenter and
vmware-vapi-runtime, pinned in infra/requirements-conformance.txt), which are generated from the same interface
definitions vCenter's `/api` serves.

The SDK's bindings carry each operation's HTTP method, path template, path variables and, for some, the `action`
that tells it apart; its input and output types carry every field. The SDK's own REST metadata is that of the older
`/rest` dialect for some operations, so a request is matched as vCenter's `/api` maps an interface
definition onto HTTP: the operation's path, the operation told apart by `action=<operation>` (`…/power/start` in the
metadata is `…/power?action=start` on `/api`), `vmw-task=true` only on an operation that can run as a task, the
other inputs of a GET or DELETE in the query (a filter's fields by their own names), those of a POST in the body
(a single structure as itself, else an object of the inputs by name). The body is held against the input's type,
and each answer against the output's type (a task's id when run as a task; an error against the API's standard
error): every field one the type names, of its type, each enumeration's value one it lists, no field the type
requires missing; then the SDK's own type converter reads the answer into its Python bindings, as its client
would.

The Python SDK itself speaks JSON-RPC or the `/rest` dialect, not `/api`, so it cannot drive the fake; that part of
the check is the SDK's converter reading every answer. `make conformance` runs it (`make test` does). It prints the
operations it saw, each with what was checked.
"""

import importlib
import json
import re

import requests
from com.vmware.vapi.std import errors_client
from vmware.vapi.bindings import type as T
from vmware.vapi.bindings.converter import RestConverter, TypeConverter
from vmware.vapi.data.serializers.cleanjson import DataValueConverter
from vmware.vapi.lib import connect
from vmware.vapi.stdlib.client.factories import StubConfigurationFactory

from wire import must_catch, recorded, report

# The SDK's modules that hold the interfaces Apiary calls, and their neighbours.
MODULES = [
    "com.vmware.cis_client", "com.vmware.cis.tagging_client", "com.vmware.vcenter_client",
    "com.vmware.vcenter.vm_client", "com.vmware.vcenter.vm.guest_client", "com.vmware.vcenter.vm.hardware_client",
]
PREFIX = "/api"


class Operation:
    """One operation of an interface, as vCenter's /api serves it."""

    def __init__(self, iface, name, rest, info):
        self.id = f"{iface}.{name}"
        self.method = rest.http_method
        template, _, dispatch = rest._url_template.partition("?")
        self.action = rest._dispatch_parameters.get("action") or dict(
            p.split("=", 1) for p in dispatch.split("&") if "=" in p).get("action")
        self.dashed = name.replace("_", "-")
        self.template = template
        self.input = info["input_type"]
        self.output = info["output_type"]
        self.task = bool(info.get("task_type"))
        self.body_name = rest.request_body_parameter
        # The inputs not in the path (its variables are keyed by the inputs' own names).
        self.inputs = {f: self.input.get_field(f) for f in self.input.get_field_names()
                       if f not in rest._path_variables}

    def forms(self):
        """(path pattern, action) pairs the operation may take on /api."""
        def pattern(path):
            return re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(PREFIX + path)) + "$")
        if self.action:
            return [(pattern(self.template), self.action)]
        forms = [(pattern(self.template), None), (pattern(self.template), self.dashed)]
        if self.template.endswith("/" + self.dashed):
            forms.append((pattern(self.template[:-len(self.dashed) - 1]), self.dashed))
        return forms


def operations():
    """Every operation of the SDK's interfaces in MODULES, from their stubs."""
    connector = connect.get_requests_connector(requests.Session(), msg_protocol="rest", url="https://vcenter/api")
    config = StubConfigurationFactory.new_std_configuration(connector)
    found = []
    for name in MODULES:
        module = importlib.import_module(name)
        for attr in dir(module):
            stub_class = getattr(module, attr)
            if not (attr.startswith("_") and attr.endswith("Stub") and isinstance(stub_class, type)):
                continue
            stub = stub_class(config)
            iface = stub._iface_id.get_name()
            for op, rest in stub._rest_metadata.items():
                if op in stub._operations:
                    found.append(Operation(iface, op, rest, stub._operations[op]))
    return found


def resolve(kind):
    while isinstance(kind, T.ReferenceType):
        kind = kind.resolved_type
    return kind


def check_value(kind, value, where, errors):
    """`value` is of the SDK's binding type `kind` as /api writes it."""
    kind = resolve(kind)
    if isinstance(kind, T.OptionalType):
        if value is not None:
            check_value(kind.element_type, value, where, errors)
    elif isinstance(kind, (T.ListType, T.SetType)):
        if not isinstance(value, list):
            errors.append(f"{where}: {json.dumps(value)[:80]} is not a list")
            return
        for i, item in enumerate(value):
            check_value(kind.element_type, item, f"{where}[{i}]", errors)
    elif isinstance(kind, T.MapType):
        if not isinstance(value, dict):
            errors.append(f"{where}: {json.dumps(value)[:80]} is not a map")
            return
        for key, item in value.items():
            check_value(kind.value_type, item, f"{where}[{key}]", errors)
    elif isinstance(kind, (T.StructType, T.ErrorType)):
        if not isinstance(value, dict):
            errors.append(f"{where}: {json.dumps(value)[:80]} is not a {kind.name}")
            return
        names = kind.get_field_names()
        for key, item in value.items():
            if key not in names:
                errors.append(f"{where}: no field {key!r} in {kind.name}")
            else:
                check_value(kind.get_field(key), item, f"{where}.{key}", errors)
        for key in names:
            if key not in value and not isinstance(resolve(kind.get_field(key)), (T.OptionalType, T.VoidType)):
                errors.append(f"{where}: the field {key!r} {kind.name} requires is missing")
    elif isinstance(kind, T.EnumType):
        values = {str(v) for v in kind.binding_class.get_values()} if kind.binding_class else None
        if not isinstance(value, str) or (values and value not in values):
            listed = sorted(values or [])
            more = f", … {len(listed) - 8} more" if len(listed) > 8 else ""
            shown = ", ".join(listed[:8])
            errors.append(f"{where}: {json.dumps(value)[:80]} is not one of {kind.name} ({shown}{more})")
    elif isinstance(kind, (T.StringType, T.IdType, T.URIType, T.SecretType, T.DateTimeType)):
        if not isinstance(value, str):
            errors.append(f"{where}: {json.dumps(value)[:80]} is not a string")
    elif isinstance(kind, T.IntegerType):
        if not isinstance(value, int) or isinstance(value, bool):
            errors.append(f"{where}: {json.dumps(value)[:80]} is not an integer")
    elif isinstance(kind, T.DoubleType):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            errors.append(f"{where}: {json.dumps(value)[:80]} is not a number")
    elif isinstance(kind, T.BooleanType):
        if not isinstance(value, bool):
            errors.append(f"{where}: {json.dumps(value)[:80]} is not a boolean")
    elif isinstance(kind, T.VoidType):
        if value is not None:
            errors.append(f"{where}: {json.dumps(value)[:80]} where the operation answers nothing")


def read_by_sdk(kind, value, where, errors):
    """The SDK's own converter reads `value` into its Python bindings, as its client reads /api."""
    try:
        data = DataValueConverter.convert_to_data_value(json.dumps(value))
        TypeConverter.convert_to_python(data, kind, rest_converter_mode=RestConverter.SWAGGER_REST)
    except Exception as e:  # noqa: BLE001 - whatever the runtime raises is its refusal
        errors.append(f"{where}: the SDK's converter refused it: {e}")


def body_type(op):
    """The type of the body a POST of `op` takes: its single structure input as itself, else its inputs by name."""
    if op.body_name:
        return op.input.get_field(op.body_name)
    structs = [k for k in op.inputs.values() if isinstance(resolve(k), T.StructType)]
    if len(op.inputs) == 1 and structs:
        return structs[0]
    return T.StructType("inputs of " + op.id, op.inputs)


def query_names(op):
    """The query parameters a GET or DELETE of `op` takes: its inputs, a filter's fields by their own names."""
    names = set()
    for name, kind in op.inputs.items():
        inner = resolve(kind)
        inner = resolve(inner.element_type) if isinstance(inner, T.OptionalType) else inner
        if isinstance(inner, T.StructType):
            names.update(inner.get_field_names())
        else:
            names.add(name)
    return names


def check(known, exchange, table):
    """What is wrong with one exchange, as a list; `table` gains what was checked per operation."""
    errors = []
    method, path = exchange["method"], exchange["path"]
    query = [(k, v) for k, v in exchange["query"]]
    action = dict(query).get("action")
    as_task = dict(query).get("vmw-task") == "true"
    candidates = []
    for op in known:
        for pattern, form_action in op.forms():
            if op.method == method and form_action == action and pattern.match(path):
                candidates.append((op.template.count("{"), op))
    if not candidates:
        return [f"{method} {path}{f'?action={action}' if action else ''}: no operation of the SDK is this"]
    op = min(candidates, key=lambda c: c[0])[1]
    where = f"{op.id} ({method} {path})"
    checked = table.setdefault(op.id, set())
    checked.add("operation")
    if as_task and not op.task:
        errors.append(f"{where}: vmw-task=true, but the operation does not run as a task")
    allowed = {"action", "vmw-task"} | (query_names(op) if method in ("GET", "DELETE") else set())
    for name, _ in query:
        if name not in allowed:
            errors.append(f"{where}: query parameter {name!r} is not one the operation takes "
                          f"({', '.join(sorted(allowed))})")
    if query:
        checked.add("query")
    if method in ("POST", "PUT", "PATCH") and op.inputs:
        if exchange["request"] is None:
            errors.append(f"{where}: no body, the operation takes its inputs there")
        else:
            check_value(body_type(op), exchange["request"], f"{where} request", errors)
            checked.add("request body")
    status, body = exchange["status"], exchange["response"]
    if 200 <= status < 300:
        answer = T.IdType() if as_task else op.output
        if body is not None or not isinstance(resolve(answer), T.VoidType):
            check_value(answer, body, f"{where} response", errors)
            read_by_sdk(answer, body, f"{where} response", errors)
            checked.add("response (and the SDK's converter)")
    elif body is not None:
        check_value(errors_client.Error.get_binding_type(), body, f"{where} error {status}", errors)
        checked.add("error as the API's standard error")
    return errors


def self_test(known):
    """The checks refuse what they are for: a path no operation has, an action an operation is not, a query
    parameter the operation does not take, a task of an operation that is none, a body field of the wrong name and
    one of the wrong type, an enumeration's value it does not list, an answer missing a required field."""
    bad = [
        {"method": "POST", "path": "/api/vcenter/vm/vm-1/power", "query": [["action", "boot"]], "request": None,
         "status": 204, "response": None},
        {"method": "GET", "path": "/api/vcenter/vm", "query": [["name", "x"]], "request": None, "status": 200,
         "response": [{"vm": "vm-1", "name": "x", "power_state": "ON", "cpu_count": 1, "memory_size_MiB": 1}]},
        {"method": "DELETE", "path": "/api/vcenter/vm/vm-1", "query": [["vmw-task", "true"]], "request": None,
         "status": 204, "response": None},
        {"method": "POST", "path": "/api/cis/tagging/category", "query": [], "status": 201, "response": "c",
         "request": {"name": "n", "description": "d", "cardinality": "SINGLE", "associable_types": "VM",
                     "category": 1}},
        {"method": "GET", "path": "/api/cis/tasks/t-1", "query": [], "request": None, "status": 200,
         "response": {"status": "SUCCEEDED"}},
        {"method": "GET", "path": "/api/vcenter/nothing", "query": [], "request": None, "status": 200,
         "response": None},
    ]
    errors = [e for exchange in bad for e in check(known, exchange, {})]
    must_catch(errors, ["action=boot: no operation", "'name' is not one", '"ON" is not one of', "not run as a task",
                   "no field 'category'", "associable_types: \"VM\" is not a list", "requires is missing",
                   "converter refused", "/api/vcenter/nothing: no operation"])


def main():
    known = operations()
    self_test(known)
    wire = recorded("vsphere")
    table, errors = {}, []
    for exchange in wire:
        errors.extend(check(known, exchange, table))
    report(f"vCenter /api (vmware-vcenter's interfaces, {len(known)} operations): {len(wire)} exchanges",
           table, errors)


if __name__ == "__main__":
    main()

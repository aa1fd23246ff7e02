"""Azure Resource Manager on the wire against Azure's own SDKs: every request Apiary's Azure adapter sends in a whole
cluster lifecycle (shared/clouds/tests/wire.rs, against the fake ARM), and every answer of the fake it reads, held
against the Python SDKs generated from the Azure REST API specifications (pinned in
infra/requirements-conformance.txt) at the API versions the adapter targets: azure-mgmt-compute's 2024-07-01,
azure-mgmt-resource's resources 2021-04-01, azure-mgmt-network's 2024-05-01.

Each SDK operation's request is what its generated `build_*_request` function makes: the HTTP method, the path
template, the query parameters it can carry and the api-version it sends. A request of the adapter must be one of
them (path matched without regard to case, as ARM matches it), with that operation's api-version and only its query
parameters. Its body, and each successful answer, is held against the model the operation serialises or
deserialises (`ResourceGroup`, `Deployment`, `VirtualMachineListResult`, ...): every field one the model names
(flattened `properties.*` as the model flattens them), of its type; in a request no read-only field and every
required one. A request that follows a link an earlier answer gave (`nextLink`, `Azure-AsyncOperation`,
`Location`) must be that link exactly, as the documented protocol says; an `Azure-AsyncOperation` answer must carry
the `status` azure-core's poller reads. The token exchange is Entra ID's, not ARM's: it is held to azure-identity's
own, which the fake records (the same form fields, less MSAL's `client_info`).

Then Azure's own clients, azure-identity and the mgmt SDKs, drive the fake over HTTPS (fake-azure) through what
Apiary needs of the cloud: the client-credentials token (MSAL finds the token endpoint in the tenant's OpenID
metadata), a resource group, a template deployment followed to the end by the SDK's own poller, get, instance view,
a list of more than one page, deallocate, start, power off, the network interfaces and public addresses, a tag
filter, the resource group's deletion followed to the end; and the errors a client must tell apart: 404, 409, 429
with Retry-After (and the SDK's own retry through it), 503. Where a client refuses what the fake says, the fake is
wrong.

`make conformance` runs it (`make test` does). It prints the operations it saw, each with what was checked.
"""

import importlib
import inspect
import json
import os
import re
import tempfile
import time
from urllib.parse import parse_qsl, urlsplit

from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.identity import ClientSecretCredential
from azure.mgmt.core.exceptions import ARMErrorFormat
from azure.mgmt.compute.v2024_07_01 import ComputeManagementClient
from azure.mgmt.network import NetworkManagementClient
from azure.mgmt.resource.resources.v2021_04_01 import ResourceManagementClient

from fake_process import FakeProcess
from wire import client_grant, compare_grant, grant_self_test, must_catch, recorded, report

# (short name, the operations module, the models module) of each SDK at the version the adapter targets.
SDKS = [
    ("compute", "azure.mgmt.compute.v2024_07_01"),
    ("resources", "azure.mgmt.resource.resources.v2021_04_01"),
    ("network", "azure.mgmt.network"),
]
# What a status of an Azure-AsyncOperation may end in, as azure-core's poller reads it.
TERMINAL = {"succeeded", "failed", "canceled"}
PRIMITIVES = {
    "str": lambda v: isinstance(v, str),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "long": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "bool": lambda v: isinstance(v, bool),
    "iso-8601": lambda v: isinstance(v, str) and re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d", v) is not None,
    "rfc-1123": lambda v: isinstance(v, str),
    "duration": lambda v: isinstance(v, str) and v.startswith("P"),
    "date": lambda v: isinstance(v, str) and re.fullmatch(r"\d{4}-\d\d-\d\d", v) is not None,
    "object": lambda v: True,
}


class Operation:
    """One SDK operation: `id` ("compute virtual_machines_start"), its HTTP method, path pattern, api-version,
    the query parameters it can carry, and the models its body and its answer are."""

    def __init__(self, sdk, models, name, method, pattern, api_version, query, request, response):
        self.id = f"{sdk} {name}"
        self.models, self.method, self.pattern = models, method, pattern
        self.api_version, self.query = api_version, query
        self.request, self.response = request, response


def sample(parameter):
    """A value of the parameter's annotated type, to learn the name it takes in the query."""
    text = str(parameter.annotation)
    if "int" in text:
        return 1
    if "bool" in text:
        return True
    return "x"


def models_used(ops_module):
    """Per build function name, the model its operation's body is serialised from and the models its answer is
    read into: found in the source of the operations that call it (a `begin_*` with the `_*_initial` it calls)."""
    found = {}
    for _, cls in inspect.getmembers(ops_module, inspect.isclass):
        if cls.__module__ != ops_module.__name__ or not cls.__name__.endswith("Operations"):
            continue
        sources = {name: inspect.getsource(f) for name, f in inspect.getmembers(cls, inspect.isfunction)}
        for name, src in sources.items():
            for build in re.findall(r"\b(build_\w+_request)\(", src):
                callers = [src] + [s for n, s in sources.items()
                                   if name.endswith("_initial") and f"self.{name}(" in s]
                request = {m for s in callers for m in re.findall(r'_serialize\.body\(\s*\w+,\s*"(\w+)"', s)}
                response = {m for s in callers for m in re.findall(r'_deserialize\(\s*"(\w+)"', s)}
                seen = found.setdefault(build, (set(), set()))
                seen[0].update(request)
                seen[1].update(response)
    return found


def operations():
    """Every operation of the SDKs, from their generated request builders."""
    found = []
    for sdk, package in SDKS:
        ops = importlib.import_module(f"{package}.operations._operations")
        models = importlib.import_module(f"{package}.models")
        used = models_used(ops)
        for name, build in inspect.getmembers(ops, inspect.isfunction):
            if not (name.startswith("build_") and name.endswith("_request")):
                continue
            args, optional = {}, {}
            for p in inspect.signature(build).parameters.values():
                if p.kind == p.POSITIONAL_OR_KEYWORD:
                    args[p.name] = f"__{p.name}__"
                elif p.kind == p.KEYWORD_ONLY and p.default is None:
                    optional[p.name] = sample(p)
            try:
                plain = build(**args)
                full = build(**args, **optional)
            except Exception:  # noqa: BLE001 - a builder that needs a body or header this walk cannot give
                continue
            path = urlsplit(plain.url).path
            pattern = re.compile("^" + re.sub(r"__\w+?__", "[^/]+", re.escape(path).replace(r"\_", "_")) + "$",
                                 re.IGNORECASE)
            query = dict(parse_qsl(urlsplit(full.url).query, keep_blank_values=True))
            request, response = used.get(name, (set(), set()))
            found.append(Operation(sdk, models, name[len("build_"):-len("_request")], plain.method, pattern,
                                   query.get("api-version"), set(query), request, response))
    return found


def shape(cls):
    """A model's fields as they are on the wire: {name: (type, validation) or a nested {…} of a flattened path}."""
    tree = {}
    for attr, spec in cls._attribute_map.items():
        if not spec["key"]:
            continue  # additional_properties: what the model keeps of fields it does not name
        path = [p.replace("\\.", ".") for p in re.split(r"(?<!\\)\.", spec["key"])]
        node = tree
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = (spec["type"], getattr(cls, "_validation", {}).get(attr, {}))
    return tree


def check_value(models, kind, value, where, errors, sent):
    """`value` is of the SDK's type `kind` (a model's name, `[T]`, `{T}`, or a primitive)."""
    if kind.startswith("[") and kind.endswith("]"):
        if not isinstance(value, list):
            errors.append(f"{where}: {json.dumps(value)[:80]} is not a list")
            return
        for i, item in enumerate(value):
            check_value(models, kind[1:-1], item, f"{where}[{i}]", errors, sent)
    elif kind.startswith("{") and kind.endswith("}"):
        if not isinstance(value, dict):
            errors.append(f"{where}: {json.dumps(value)[:80]} is not a map")
            return
        for key, item in value.items():
            check_value(models, kind[1:-1], item, f"{where}[{key}]", errors, sent)
    elif kind in PRIMITIVES:
        if not PRIMITIVES[kind](value):
            errors.append(f"{where}: {json.dumps(value)[:80]} is not a {kind}")
    else:
        cls = getattr(models, kind, None)
        if cls is None or not hasattr(cls, "_attribute_map"):
            # An enum: its values are strings the service may extend.
            if not isinstance(value, str):
                errors.append(f"{where}: {json.dumps(value)[:80]} is not a {kind}")
            return
        check_model(models, cls, value, where, errors, sent)


def check_model(models, cls, value, where, errors, sent):
    """`value` is a `cls` on the wire (a subtype when the model is polymorphic and names one)."""
    for field, subtypes in getattr(cls, "_subtype_map", {}).items():
        key = cls._attribute_map[field]["key"]
        named = subtypes.get(value.get(key)) if isinstance(value, dict) else None
        if named and getattr(models, named, None) is not None:
            cls = getattr(models, named)
    check_tree(models, shape(cls), cls.__name__, value, where, errors, sent)


def check_tree(models, tree, name, value, where, errors, sent):
    if not isinstance(value, dict):
        errors.append(f"{where}: {json.dumps(value)[:80]} is not an object ({name})")
        return
    for key, item in value.items():
        if key not in tree:
            errors.append(f"{where}: no field {key!r} in {name}")
        elif isinstance(tree[key], dict):
            check_tree(models, tree[key], name, item, f"{where}.{key}", errors, sent)
        else:
            kind, validation = tree[key]
            if sent and validation.get("readonly"):
                errors.append(f"{where}.{key}: read-only in {name}, ARM ignores it in a request")
            check_value(models, kind, item, f"{where}.{key}", errors, sent)
    if sent:
        for key, node in tree.items():
            if not isinstance(node, dict) and node[1].get("required") and key not in value:
                errors.append(f"{where}: the required field {key!r} of {name} is missing")


# The model of an ARM error's `error`, per SDK.
ERRORS = {"compute": "ApiError", "resources": "ErrorResponse", "network": "CloudErrorBody"}


def check_error(op, body, where, errors):
    """An error answer is ARM's envelope, `{"error": {...}}`, its inside the SDK's error model, and azure-mgmt-core's
    ARM error format reads its code and message."""
    if not isinstance(body, dict) or set(body) != {"error"}:
        errors.append(f"{where}: {json.dumps(body)[:80]} is not ARM's error envelope")
        return
    model = ERRORS[op.id.split()[0]]
    check_model(op.models, getattr(op.models, model), body["error"], f"{where}.error", errors, False)
    parsed = ARMErrorFormat(body)
    if not parsed.code or not parsed.message:
        errors.append(f"{where}: azure-mgmt-core read no code or message from it")


def url_of(exchange):
    query = "&".join(f"{k}={v}" for k, v in exchange["query"])
    return exchange["path"] + (f"?{query}" if query else "")


def linked(exchange, links):
    """Whether the request is a link an earlier answer gave, exactly (scheme and host aside)."""
    def same(link):
        parts = urlsplit(link)
        return (parts.path == exchange["path"]
                and sorted(parse_qsl(parts.query, keep_blank_values=True)) == sorted(map(tuple, exchange["query"])))
    return any(same(link) for link in links)


def check(known, exchange, links, table):
    """What is wrong with one exchange, as a list; `links` holds the links earlier answers gave to follow
    (`nextLink`, `Azure-AsyncOperation`) and gains this answer's; `table` gains what was checked per operation."""
    errors = []
    path, method = exchange["path"], exchange["method"]
    if not path.lower().startswith("/subscriptions/"):
        table.setdefault(f"{method} {path.split('/', 2)[-1]} (Entra ID's, not ARM's)", set())
        return errors
    status_link = linked(exchange, links["azure-asyncoperation"])
    page_link = linked(exchange, links["nextLink"])
    headers = dict(exchange.get("headers", []))
    if "azure-asyncoperation" in headers:
        links["azure-asyncoperation"].append(headers["azure-asyncoperation"])
    body = exchange["response"]
    if isinstance(body, dict) and body.get("nextLink"):
        links["nextLink"].append(body["nextLink"])
    if status_link:
        checked = table.setdefault("Azure-AsyncOperation (an asynchronous operation's status)", set())
        checked.add("the link followed as given")
        if exchange["status"] == 200:
            status = body.get("status") if isinstance(body, dict) else None
            if not isinstance(status, str):
                errors.append(f"GET {url_of(exchange)}: an operation's status without a 'status'")
            elif status.lower() in TERMINAL - {"succeeded"} and "error" not in body:
                errors.append(f"GET {url_of(exchange)}: a {status} operation without its 'error'")
            checked.add("response")
        return errors
    matched = [op for op in known if op.method == method and op.pattern.match(path)]
    if not matched:
        return [f"{method} {path}: no operation of the SDKs has this path"]
    op = matched[0]
    where = f"{op.id} ({method} {path})"
    checked = table.setdefault(op.id, set())
    query = dict(exchange["query"])
    if page_link:
        checked.add("nextLink followed as given")
    else:
        if query.get("api-version") != op.api_version:
            errors.append(f"{where}: api-version {query.get('api-version')!r}, the SDK's is {op.api_version!r}")
        for name in query:
            if name not in op.query:
                errors.append(f"{where}: query parameter {name!r} is not one the operation takes "
                              f"({', '.join(sorted(op.query))})")
        checked.add("path, api-version and query")
    if op.request:
        if exchange["request"] is None:
            errors.append(f"{where}: no JSON body, the operation takes a {'/'.join(sorted(op.request))}")
        for model in sorted(op.request):
            check_model(op.models, getattr(op.models, model), exchange["request"], f"{where} request", errors, True)
        checked.add(f"request body as {'/'.join(sorted(op.request))}")
    if 200 <= exchange["status"] < 300 and op.response and body not in (None, {}):
        for model in sorted(op.response):
            check_model(op.models, getattr(op.models, model), body, f"{where} response", errors, False)
        checked.add(f"response as {'/'.join(sorted(op.response))}")
    elif exchange["status"] >= 400 and body is not None:
        check_error(op, body, f"{where} error {exchange['status']}", errors)
        checked.add(f"error as {ERRORS[op.id.split()[0]]}")
    return errors


def new_links():
    return {"azure-asyncoperation": [], "nextLink": []}


def self_test(known):
    """The checks refuse what they are for: an api-version not the SDK's, a query parameter the operation does not
    take, a read-only field sent, a field the answer's model does not name, a value of the wrong type, a path no
    operation has, a status without its `status`."""
    rg = "/subscriptions/s/resourcegroups/g"
    bad = [
        {"method": "PUT", "path": rg, "query": [["api-version", "2019-05-01"], ["force", "true"]],
         "request": {"location": "x", "id": "/subscriptions/s"}, "status": 201, "response": {"name": "g", "size": 2},
         "headers": []},
        {"method": "GET", "path": rg + "/providers/Microsoft.Compute/virtualMachines/v/instanceView",
         "query": [["api-version", "2024-07-01"]], "request": None, "status": 200,
         "response": {"statuses": [{"code": 7}]}, "headers": []},
        {"method": "PATCH", "path": rg + "/providers/Microsoft.Compute/nothing", "query": [], "request": None,
         "status": 200, "response": None,
         "headers": [["azure-asyncoperation", "https://h/subscriptions/op/1?api-version=1"]]},
        {"method": "GET", "path": "/subscriptions/op/1", "query": [["api-version", "1"]], "request": None,
         "status": 200,
         "response": {"state": "Succeeded"}, "headers": []},
        {"method": "DELETE", "path": rg, "query": [["api-version", "2021-04-01"]], "request": None, "status": 409,
         "response": {"code": "ScopeLocked", "message": "locked"}, "headers": []},
    ]
    links = new_links()
    errors = [e for exchange in bad for e in check(known, exchange, links, {})]
    must_catch(errors, ["api-version '2019-05-01'", "'force' is not one", "read-only", "no field 'size'",
                   "statuses[0].code", "no operation of the SDKs", "without a 'status'", "not ARM's error envelope"])


TEMPLATE = {
    "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
    "contentVersion": "1.0.0.0",
    "parameters": {"infraId": {"type": "string"}, "machineCount": {"type": "int", "defaultValue": 3}},
    "resources": [{"type": "Microsoft.Compute/virtualMachines", "apiVersion": "2024-07-01",
                   "name": "[concat(parameters('infraId'), '-', copyIndex())]",
                   "copy": {"name": "nodes", "count": "[parameters('machineCount')]"},
                   "properties": {"hardwareProfile": {"vmSize": "Standard_D4s_v5"}}}],
}


def expect(status, call, what):
    try:
        call()
    except HttpResponseError as e:
        if e.status_code != status:
            raise SystemExit(f"conformance: {what}: {e.status_code}, not {status}: {e}") from e
        if e.error is None or not e.error.code:
            raise SystemExit(f"conformance: {what}: the SDK read no ARM error code from the answer: {e}") from e
        return e
    raise SystemExit(f"conformance: {what}: the client raised nothing")


def powers(compute, group, name):
    return [s.code for s in compute.virtual_machines.instance_view(group, name).statuses
            if s.code.startswith("PowerState/")]


def sdk_lifecycle():
    """Azure's SDKs against the fake: what a client could not take is the fake's fault."""
    fake = FakeProcess("fake-azure")
    done = []
    with tempfile.NamedTemporaryFile("w", suffix=".pem", delete=False) as ca:
        ca.write(fake.hello["caPem"])
    # The fake's certificate, issued by its own CA, is trusted as a private cloud's would be.
    os.environ["REQUESTS_CA_BUNDLE"] = ca.name
    try:
        h = fake.hello
        credential = ClientSecretCredential(h["tenant"], h["clientId"], h["clientSecret"], authority=h["endpoint"],
                                            disable_instance_discovery=True)
        grant = client_grant(fake, lambda: credential.get_token("https://management.azure.com/.default"))
        done.append("azure-identity's client-credentials token (the tenant's OpenID metadata, then the grant)")
        options = {"base_url": h["endpoint"], "credential_scopes": ["https://management.azure.com/.default"],
                   "polling_interval": 0.2}
        sub, group = h["subscription"], "sdk-rg"
        resources = ResourceManagementClient(credential, sub, **options)
        compute = ComputeManagementClient(credential, sub, **options)
        network = NetworkManagementClient(credential, sub, **options)
        made = resources.resource_groups.create_or_update(group, {"location": "westeurope",
                                                                  "tags": {"apiary-pool": "sdk"}})
        assert made.name == group and made.properties.provisioning_state == "Succeeded", made
        deployment = resources.deployments.begin_create_or_update(group, "apiary-1", {"properties": {
            "mode": "Incremental", "template": TEMPLATE, "parameters": {"infraId": {"value": "sdk"}}}}).result()
        assert deployment.properties.provisioning_state == "Succeeded", deployment
        done.append("a resource group and a template deployment, followed by the SDK's poller")
        names = [f"sdk-{n}" for n in range(3)]
        vm = compute.virtual_machines.get(group, names[0])
        assert vm.name == names[0] and vm.provisioning_state == "Succeeded" and vm.vm_id, vm
        assert powers(compute, group, names[0]) == ["PowerState/running"]
        done.append("get and instance view")
        fake.tell("page 2")
        pages = [list(page) for page in compute.virtual_machines.list(group, expand="instanceView").by_page()]
        assert [[v.name for v in page] for page in pages] == [names[:2], names[2:]], pages
        assert all(v.instance_view and v.instance_view.statuses for page in pages for v in page), pages
        done.append("a list over 2 pages, each VM's instance view expanded in it")
        compute.virtual_machines.begin_deallocate(group, names[0]).result()
        assert powers(compute, group, names[0]) == ["PowerState/deallocated"]
        compute.virtual_machines.begin_start(group, names[0]).result()
        assert powers(compute, group, names[0]) == ["PowerState/running"]
        compute.virtual_machines.begin_power_off(group, names[1]).result()
        assert powers(compute, group, names[1]) == ["PowerState/stopped"]
        done.append("deallocate, start, power off, followed by the SDK's poller")
        nics = sorted(n.name for n in network.network_interfaces.list(group))
        ips = sorted(p.name for p in network.public_ip_addresses.list(group))
        assert len(nics) == 3 and len(ips) == 3, (nics, ips)
        done.append("network interfaces and public addresses")
        by_tag = "tagName eq 'apiary-pool' and tagValue eq 'sdk'"
        tagged = [g.name for g in resources.resource_groups.list(filter=by_tag)]
        assert tagged == [group], tagged
        done.append("resource groups by tag")
        missing = expect(404, lambda: compute.virtual_machines.get(group, "none"), "404")
        assert isinstance(missing, ResourceNotFoundError), missing
        stopping = compute.virtual_machines.begin_deallocate(group, names[2])
        expect(409, lambda: compute.virtual_machines.begin_start(group, names[2]).result(), "409")
        stopping.result()
        fake.tell("throttle 1")
        throttled = expect(429, lambda: compute.virtual_machines.get(group, names[0], retry_total=0), "429")
        assert throttled.response.headers.get("Retry-After") is not None, throttled.response.headers
        fake.tell("throttle 1")
        assert compute.virtual_machines.get(group, names[0]).name == names[0], "retried through a 429"
        fake.tell("unavailable 1")
        expect(503, lambda: compute.virtual_machines.get(group, names[0], retry_total=0), "503")
        done.append("404, 409, 429 with Retry-After (and the SDK's retry through it), 503")
        resources.resource_groups.begin_delete(group).result()
        expect(404, lambda: resources.resource_groups.get(group), "the deleted group")
        expect(404, lambda: compute.virtual_machines.get(group, names[0]), "a VM of the deleted group")
        done.append("the group's deletion, followed by the SDK's poller")
    finally:
        fake.close()
        os.unlink(ca.name)
    print(f"azure-identity and the mgmt SDKs against the fake: {'; '.join(done)}")
    return grant


def main():
    known = operations()
    self_test(known)
    grant_self_test()
    wire = recorded("azure")
    table, errors, links = {}, [], new_links()
    for exchange in wire:
        errors.extend(check(known, exchange, links, table))
    report(f"ARM (compute 2024-07-01, resources 2021-04-01, network 2024-05-01; {len(known)} SDK operations): "
          f"{len(wire)} exchanges", table, errors)
    started = time.time()
    theirs = sdk_lifecycle()
    ours = [e["request"] for e in wire if e["method"] == "POST" and e["path"].endswith("/oauth2/v2.0/token")]
    # MSAL asks for `client_info` (the account's identity, for its own token cache); a daemon has no use for it.
    grant = "the client-credentials grant"
    errors = compare_grant(ours[0], theirs, grant, extras=["client_info"]) if ours else ["the adapter asked no token"]
    if ours and not ours[0].get("scope", "").endswith("/.default"):
        errors.append(f"the client-credentials grant: scope {ours[0].get('scope')!r} is not a /.default scope")
    report("the client-credentials grant against azure-identity's (MSAL's): the same form fields", {}, errors)
    print(f"  ({time.time() - started:.1f} s)")


if __name__ == "__main__":
    main()

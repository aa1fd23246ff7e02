"""The Kubernetes readiness check against the official Kubernetes client, `kubernetes` (pinned in
infra/requirements-conformance.txt), whose operations and models are generated from the API server's OpenAPI
document.

First every request the readiness check sends in a recorded look at a cluster (shared/clouds/tests/wire.rs, against
the fake cluster API) is held against the client's operations, as its generated `_*_serialize` functions make them:
the HTTP method and path (the most literal operation that matches), the query parameters that operation takes,
`limit` an integer, `continue` the token the previous page gave, and a request body (a certificate request's
approval) against the model the operation takes (`V1CertificateSigningRequest`). Each answer the check reads is
held against the model the operation answers (`V1NodeList`, `V1CertificateSigningRequestList`: every field one the
model names, of its type); a custom resource's list (the ClusterOperators, the Machines: `object` to the client) by
its envelope: `V1ListMeta` and each item's `V1ObjectMeta`.

Then the client reads the fake cluster
API (shared/fakeclouds/src/bin/fake-cluster-api.rs) as Apiary's readiness check does: the nodes, a page at a time
by `limit` and `continue`, each node's Ready condition; the ClusterOperators (config.openshift.io/v1), a page at a
time; a refused token (401) and a cluster without ClusterOperators (404) as the client's ApiException with the
Status the server sent. Where the client refuses what the fake says, the fake is wrong.

`make conformance` runs it (`make test` does).
"""

import inspect
import json
import os
import re
import tempfile
from urllib.parse import parse_qsl, urlsplit

from kubernetes import client

from fake_process import FakeProcess
from wire import must_catch, recorded, report

# What a `_*_serialize` function takes that is not the operation's own.
META = {"_request_auth": None, "_content_type": None, "_headers": None, "_host_index": 0}
PRIMITIVES = {
    "str": lambda v: isinstance(v, str),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "bool": lambda v: isinstance(v, bool),
    "datetime": lambda v: isinstance(v, str) and re.match(r"^\d{4}-\d\d-\d\dT", v) is not None,
    "date": lambda v: isinstance(v, str),
    "object": lambda v: True,
    # `format: byte`: base64 on the wire.
    "bytes": lambda v: isinstance(v, str) and re.fullmatch(r"[A-Za-z0-9+/]*={0,2}", v) is not None,
    "bytearray": lambda v: isinstance(v, str) and re.fullmatch(r"[A-Za-z0-9+/]*={0,2}", v) is not None,
}


def operations():
    """Every operation of the client: (API class, operation, HTTP method, path pattern, query names, answer type)."""
    found = []
    api_client = client.ApiClient(client.Configuration())
    for name in dir(client):
        if not name.endswith("Api") or name == "ApiClient":
            continue
        api = getattr(client, name)(api_client)
        for member, serialize in inspect.getmembers(api, inspect.ismethod):
            if not (member.startswith("_") and member.endswith("_serialize")):
                continue
            op = member[1:-len("_serialize")]
            args = {p: META.get(p, f"__{p}__") for p in inspect.signature(serialize).parameters}
            method, url, *_ = serialize(**args)
            path = urlsplit(url).path
            holes = len(re.findall(r"__\w+?__", path))
            pattern = re.compile("^" + re.sub(r"__\w+?__", "[^/]+", re.escape(path).replace(r"\_", "_")) + "$")
            query = {k for k, _ in parse_qsl(urlsplit(url).query)}
            source = inspect.getsource(getattr(api, f"{op}_with_http_info"))
            answer = re.search(r"'200': \"(\w+)\"", source)
            body = re.search(r":type body: (\w+)", inspect.getdoc(getattr(api, op)) or "")
            found.append((holes, f"{name}.{op}", method, pattern, query, answer.group(1) if answer else None,
                          body.group(1) if body else None))
    return sorted(found, key=lambda o: o[0])


def check_value(kind, value, where, errors):
    """`value` is of the client's type `kind` (a model's name, `List[T]`, `Dict[str, T]`, or a primitive)."""
    if kind.startswith("List["):
        if not isinstance(value, list):
            errors.append(f"{where}: {json.dumps(value)[:80]} is not a list")
            return
        for i, item in enumerate(value):
            check_value(kind[5:-1], item, f"{where}[{i}]", errors)
    elif kind.startswith("Dict[str, "):
        if not isinstance(value, dict):
            errors.append(f"{where}: {json.dumps(value)[:80]} is not a map")
            return
        for key, item in value.items():
            check_value(kind[10:-1], item, f"{where}[{key}]", errors)
    elif kind in PRIMITIVES:
        if not PRIMITIVES[kind](value):
            errors.append(f"{where}: {json.dumps(value)[:80]} is not a {kind}")
    else:
        model = getattr(client, kind)
        if not isinstance(value, dict):
            errors.append(f"{where}: {json.dumps(value)[:80]} is not a {kind}")
            return
        wire = {v: k for k, v in model.attribute_map.items()}
        for key, item in value.items():
            if key not in wire:
                errors.append(f"{where}: no field {key!r} in {kind}")
            else:
                check_value(model.openapi_types[wire[key]], item, f"{where}.{key}", errors)


def check(known, exchange, previous, table):
    """What is wrong with one exchange of the readiness check (its path under the cluster's server, `/<infraId>`),
    as a list; `previous` is the answer before it; `table` gains what was checked per operation."""
    errors = []
    path = "/" + exchange["path"].strip("/").split("/", 1)[-1]
    if path == "/readyz":
        table.setdefault("GET /readyz (plain text, in no model)", set())
        return errors
    matched = [o for o in known if o[2] == exchange["method"] and o[3].match(path)]
    if not matched:
        return [f"{exchange['method']} {path}: no operation of the client has this path"]
    _, op, _, _, query, answer, body_type = matched[0]
    where = f"{op} ({exchange['method']} {path})"
    checked = table.setdefault(op, set())
    for name, value in exchange["query"]:
        if name not in query:
            errors.append(f"{where}: query parameter {name!r} is not one the operation takes")
        elif name == "limit" and not re.fullmatch(r"\d+", value):
            errors.append(f"{where}: limit={value!r} is not an integer")
        elif name == "continue":
            given = ((previous or {}).get("metadata") or {}).get("continue")
            if value != given:
                errors.append(f"{where}: continue={value!r}, the previous page gave {given!r}")
            checked.add("continue as the previous page gave it")
    checked.add("path and query")
    if exchange.get("request") is not None:
        if not body_type:
            errors.append(f"{where}: a request body, which the operation does not take")
        else:
            check_value(body_type, exchange["request"], f"{where} request", errors)
            checked.add(f"request as {body_type}")
    body = exchange["response"]
    if exchange["status"] == 200 and answer == "object":
        check_value("V1ListMeta", body.get("metadata", {}), f"{where} response.metadata", errors)
        for i, item in enumerate(body.get("items", [])):
            check_value("V1ObjectMeta", item.get("metadata"), f"{where} response.items[{i}].metadata", errors)
        checked.add("response as a custom resource list (V1ListMeta, V1ObjectMeta)")
    elif exchange["status"] == 200 and answer:
        check_value(answer, body, f"{where} response", errors)
        checked.add(f"response as {answer}")
    return errors


def self_test(known):
    """The checks refuse what they are for: a query parameter the operation does not take, a continue token no
    page gave, a field the model does not name, a value of the wrong type, a path the client has no operation for."""
    bad = [
        {"method": "GET", "path": "/c/api/v1/nodes", "query": [["limit", "x"], ["page", "2"]], "status": 200,
         "response": {"kind": "NodeList", "items": [{"metadata": {"name": 3}, "ready": True}]}},
        {"method": "GET", "path": "/c/api/v1/nodes", "query": [["continue", "9"]], "status": 200, "response": {}},
        {"method": "GET", "path": "/c/api/v2/nodes", "query": [], "status": 200, "response": {}},
        {"method": "PUT", "path": "/c/apis/certificates.k8s.io/v1/certificatesigningrequests/csr-1/approval",
         "query": [], "status": 200, "response": {}, "request": {"status": {"approved": True}}},
    ]
    errors, previous = [], None
    for exchange in bad:
        errors.extend(check(known, exchange, previous, {}))
        previous = exchange["response"]
    must_catch(errors, ["'page' is not one", "limit='x'", "no field 'ready'", "metadata.name", "continue='9'",
                   "no operation of the client", "no field 'approved' in V1CertificateSigningRequestStatus"])


def requests():
    """The readiness check's recorded requests, held against the client's operations."""
    known = operations()
    self_test(known)
    wire = recorded("kubernetes")
    table, errors, previous = {}, [], None
    for exchange in wire:
        errors.extend(check(known, exchange, previous, table))
        previous = exchange["response"]
    report(f"kubernetes {client.__version__} ({len(known)} operations): {len(wire)} exchanges of the readiness check",
           table, errors)



class FakeClusterApi(FakeProcess):
    """The fake cluster API (`fake-cluster-api`): its server template, token and CA."""

    def __init__(self):
        super().__init__("fake-cluster-api")
        self.server, self.token, self.ca = self.hello["server"], self.hello["token"], self.hello["caBundle"]


def api(fake, infra, ca_file, token):
    config = client.Configuration()
    config.host = fake.server.replace("{infraId}", infra)
    config.ssl_ca_cert = ca_file
    config.api_key = {"authorization": token}
    config.api_key_prefix = {"authorization": "Bearer"}
    return client.ApiClient(config)


def pages(list_call, **kwargs):
    """Every item of a list, page by page, and the number of pages."""
    items, token, count = [], None, 0
    while True:
        answer = list_call(limit=2, _continue=token, **kwargs) if token else list_call(limit=2, **kwargs)
        count += 1
        meta = answer.metadata if hasattr(answer, "metadata") else None
        items.extend(answer.items if hasattr(answer, "items") and not isinstance(answer, dict) else answer["items"])
        token = meta._continue if meta is not None else (answer.get("metadata") or {}).get("continue")
        if not token:
            return items, count


def main():
    requests()
    fake = FakeClusterApi()
    done = []
    try:
        with tempfile.NamedTemporaryFile("w", suffix=".pem", delete=False) as ca:
            ca.write(fake.ca)
        fake.tell("nodes 5")
        fake.tell("page 2")
        with api(fake, "ci-x7k2p", ca.name, fake.token) as c:
            nodes, count = pages(client.CoreV1Api(c).list_node)
            assert len(nodes) == 5 and count == 3, (len(nodes), count)
            for node in nodes:
                ready = [k for k in node.status.conditions if k.type == "Ready"]
                assert len(ready) == 1 and ready[0].status in ("True", "False"), node.metadata.name
            done.append("nodes as V1NodeList over 3 pages, each with its Ready condition")
            custom = client.CustomObjectsApi(c)
            operators = custom.list_cluster_custom_object("config.openshift.io", "v1", "clusteroperators", limit=2)
            assert operators["apiVersion"] == "config.openshift.io/v1", operators["apiVersion"]
            assert operators["kind"] == "ClusterOperatorList", operators["kind"]
            listed, count = pages(custom.list_cluster_custom_object, group="config.openshift.io", version="v1",
                                  plural="clusteroperators")
            assert count > 1 and all(o["metadata"]["name"] and o["status"]["conditions"] for o in listed)
            done.append(f"ClusterOperators (config.openshift.io/v1) over {count} pages")
        fake.tell("certificates 0")
        with api(fake, "ci-renew", ca.name, fake.token) as c:
            core, certificates = client.CoreV1Api(c), client.CertificatesV1Api(c)
            core.list_node()
            client.CustomObjectsApi(c).list_cluster_custom_object("config.openshift.io", "v1", "clusteroperators")
            nodes = core.list_node().items  # A resume past the kubelets' certificates.
            assert all(k.status == "Unknown" for n in nodes for k in n.status.conditions if k.type == "Ready"), nodes
            pending, count = pages(certificates.list_certificate_signing_request)
            assert len(pending) == 5 and all(r.spec.signer_name.endswith("-client-kubelet") for r in pending), pending
            first = pending[0]
            first.status.conditions = [client.V1CertificateSigningRequestCondition(
                type="Approved", status="True", reason="ApiaryApprove", message="Approved by Apiary")]
            approved = certificates.replace_certificate_signing_request_approval(first.metadata.name, first)
            assert approved.status.conditions[0].type == "Approved" and approved.status.certificate, approved.status
            try:
                certificates.replace_certificate_signing_request_approval(first.metadata.name, first)
                raise SystemExit("conformance: an approval at a stale resourceVersion was taken")
            except client.ApiException as e:
                assert e.status == 409 and json.loads(e.body)["reason"] == "Conflict", e
            after, _ = pages(certificates.list_certificate_signing_request)
            serving = [r for r in after if r.spec.signer_name == "kubernetes.io/kubelet-serving"]
            assert len(serving) == 1 and serving[0].spec.username == "system:node:ci-renew-master-0", [(r.metadata.name, r.spec.signer_name) for r in after]
            machines = client.CustomObjectsApi(c).list_namespaced_custom_object(
                "machine.openshift.io", "v1beta1", "openshift-machine-api", "machines")
            assert machines["kind"] == "MachineList" and len(machines["items"]) == 2, machines["kind"]
            assert machines["items"][0]["status"]["nodeRef"]["name"] == "ci-renew-master-0", machines["items"][0]
        done.append(f"certificate requests as V1CertificateSigningRequestList over {count} pages, an approval as "
                    "V1CertificateSigningRequest (409 when stale), the serving request it brings, Machines")
        fake.tell("plain ci-plain")
        with api(fake, "ci-plain", ca.name, fake.token) as c:
            try:
                client.CustomObjectsApi(c).list_cluster_custom_object("config.openshift.io", "v1", "clusteroperators")
                raise SystemExit("conformance: a plain cluster's ClusterOperators were not a 404")
            except client.ApiException as e:
                status = json.loads(e.body)
                assert e.status == 404 and status["kind"] == "Status" and status["reason"] == "NotFound", e
        done.append("a plain cluster's ClusterOperators: 404 with its Status")
        with api(fake, "ci-x7k2p", ca.name, "not-the-token") as c:
            try:
                client.CoreV1Api(c).list_node()
                raise SystemExit("conformance: a refused token was not an ApiException")
            except client.ApiException as e:
                status = json.loads(e.body)
                assert e.status == 401 and status["kind"] == "Status" and status["code"] == 401, e
        done.append("401 as an ApiException with its Status")
    finally:
        fake.close()
        os.unlink(ca.name)
    print(f"kubernetes (the official client) against the fake cluster API: {'; '.join(done)}")


if __name__ == "__main__":
    main()

"""Compute Engine on the wire against Google's own description of it: every request Apiary's GCP adapter sends
in a whole cluster lifecycle (shared/clouds/tests/wire.rs, against the fake Compute API), and every answer of the
fake it reads, held against the compute v1 discovery document that google-api-python-client (pinned in
infra/requirements-conformance.txt) ships: the method each request is (HTTP method and path template), its query parameters
(each one the method or the API takes, each required one there, each of its type), its body against the method's
request schema, and each successful answer against the method's response schema (every field one the schema
names, of its type). The OAuth token exchange is not Compute's: it is held to google-auth's own (below).

Then Google's own generated client, google-cloud-compute (pinned likewise), drives the fake Compute API
(shared/fakeclouds/src/bin/fake-gcp.rs) through what Apiary needs of the cloud, its token fetched by google-auth
from the fake's token endpoint: create (bulkInsert, its operation followed to DONE through zoneOperations.get), get,
an aggregated list of more than one page, stop, start, delete, and the errors a client must tell apart: 404, 409,
429 with Retry-After, 503. Where the client refuses what the fake says, the fake is wrong. The JWT-bearer grant
google-auth sent (the fake records it) and the adapter's are then held together: the same form fields, the same
claims in the assertion, the same scope.

`make conformance` runs it (`make test` does). It prints the operations it saw, each with what was checked.
"""

import json
import os
import re
import time

import googleapiclient
from google.api_core import exceptions
from google.auth.transport.requests import Request
from google.cloud import compute_v1
from google.oauth2 import credentials as oauth
from google.oauth2 import service_account

from fake_process import FakeProcess
from wire import client_grant, compare_grant, grant_self_test, jwt_claims, must_catch, recorded, report

DISCOVERY = os.path.join(os.path.dirname(googleapiclient.__file__), "discovery_cache", "documents", "compute.v1.json")
PREFIX = "/compute/v1/"


def methods(doc):
    """Every method of the document: (HTTP method, path regex, the method's description)."""
    found = []

    def walk(resources):
        for resource in resources.values():
            for m in resource.get("methods", {}).values():
                path = m.get("flatPath") or m["path"]
                pattern = "^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(path)) + "$"
                found.append((m["httpMethod"], re.compile(pattern), m))
            walk(resource.get("resources", {}))

    walk(doc["resources"])
    return found


def scalar_ok(schema, value, sent):
    """Whether `value` is of `schema`'s type. A 64-bit integer is a decimal string in what the API answers; in what
    it is sent, proto3's JSON mapping takes a number too."""
    kind, fmt = schema.get("type"), schema.get("format", "")
    if kind == "string" and fmt in ("int64", "uint64"):
        if sent and isinstance(value, int) and not isinstance(value, bool):
            return True
        return isinstance(value, str) and re.fullmatch(r"-?\d+", value) is not None
    if kind == "string":
        if not isinstance(value, str):
            return False
        return "enum" not in schema or value in schema["enum"]
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    return kind == "any"


def check_value(doc, schema, value, where, errors, sent=False):
    """Every field of `value` is one `schema` names, of its type (`sent`: a request's body)."""
    if "$ref" in schema:
        schema = doc["schemas"][schema["$ref"]]
    kind = schema.get("type")
    if kind == "object":
        if not isinstance(value, dict):
            errors.append(f"{where}: {json.dumps(value)[:80]} is not an object")
            return
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if key in properties:
                check_value(doc, properties[key], item, f"{where}.{key}", errors, sent)
            elif extra is not None:
                check_value(doc, extra, item, f"{where}[{key}]", errors, sent)
            else:
                errors.append(f"{where}: no field {key!r} in {schema.get('id', 'the schema')}")
    elif kind == "array":
        if not isinstance(value, list):
            errors.append(f"{where}: {json.dumps(value)[:80]} is not an array")
            return
        for i, item in enumerate(value):
            check_value(doc, schema["items"], item, f"{where}[{i}]", errors, sent)
    elif not scalar_ok(schema, value, sent):
        errors.append(f"{where}: {json.dumps(value)[:80]} is not a {schema.get('format') or kind}")


def query_ok(schema, text):
    kind = schema.get("type")
    if kind == "integer" or schema.get("format") in ("int64", "uint64", "uint32", "int32"):
        return re.fullmatch(r"-?\d+", text) is not None
    if kind == "boolean":
        return text in ("true", "false")
    return "enum" not in schema or text in schema["enum"]


def check(doc, known, exchange, table):
    """What is wrong with one exchange (`known`: the document's methods, [`methods`]), as a list; fills `table` with
    what was checked per method."""
    errors = []
    path = exchange["path"]
    if not path.startswith(PREFIX):
        table.setdefault(f"{exchange['method']} {path} (not Compute's)", set())
        return errors
    relative = path[len(PREFIX):]
    matched = [m for verb, pattern, m in known if verb == exchange["method"] and pattern.match(relative)]
    if not matched:
        return [f"{exchange['method']} {path}: no method of compute v1 has this path"]
    method = matched[0]
    checked = table.setdefault(method["id"], set())
    where = f"{method['id']} ({exchange['method']} {path})"
    parameters = {**doc["parameters"], **method.get("parameters", {})}
    names = [k for k, _ in exchange["query"]]
    for name, value in exchange["query"]:
        if name not in parameters:
            errors.append(f"{where}: query parameter {name!r} is not one compute v1 takes "
                          f"(it takes {', '.join(sorted(method.get('parameters', {})))})")
        elif parameters[name].get("location") != "query":
            errors.append(f"{where}: {name!r} belongs in the {parameters[name].get('location')}, not the query")
        elif not query_ok(parameters[name], value):
            errors.append(f"{where}: query parameter {name}={value!r} is not a {parameters[name].get('type')}")
    for name, p in method.get("parameters", {}).items():
        if p.get("required") and p.get("location") == "query" and name not in names:
            errors.append(f"{where}: the required query parameter {name!r} is missing")
    checked.add("query")
    if "request" in method:
        if exchange["request"] is None:
            errors.append(f"{where}: no JSON body, the method takes a {method['request']['$ref']}")
        else:
            check_value(doc, method["request"], exchange["request"], f"{where} request", errors, sent=True)
        checked.add("request body")
    elif exchange["request"] is not None:
        errors.append(f"{where}: a body the method does not take")
    if 200 <= exchange["status"] < 300 and "response" in method:
        check_value(doc, method["response"], exchange["response"], f"{where} response", errors)
        checked.add("response")
    return errors


def self_test(doc):
    """The checks refuse what they are for: a query parameter the method does not take, a field the answer's schema
    does not name, a body field of the wrong type (each once sent by, or answered to, the adapter)."""
    bad = [
        {"method": "GET", "path": PREFIX + "projects/p/aggregated/instances",
         "query": [["returnPartialSuccess", "true"]], "request": None, "status": 200,
         "response": {"items": {}, "bogus": 1}},
        {"method": "POST", "path": PREFIX + "projects/p/zones/z/instances/bulkInsert", "query": [],
         "request": {"count": "three"}, "status": 200, "response": {"id": 7}},
        {"method": "PATCH", "path": PREFIX + "projects/p/zones/z/instances/i", "query": [], "request": None,
         "status": 200, "response": None},
    ]
    known = methods(doc)
    errors = [e for exchange in bad for e in check(doc, known, exchange, {})]
    must_catch(errors, ["'returnPartialSuccess' is not one", "no field 'bogus'", "request.count", "response.id",
                   "no method of compute v1"])


class FakeCompute(FakeProcess):
    """The fake Compute API (`fake-gcp`): its project, its API's root, a service account's key."""

    def __init__(self):
        super().__init__("fake-gcp")
        self.project = self.hello["project"]
        self.base = self.hello["endpoint"].rsplit("/compute/v1", 1)[0]
        self.key = json.loads(self.hello["key"])


def expect(error, call, what):
    try:
        call()
    except error as e:
        return e
    raise SystemExit(f"conformance: {what}: the client raised no {error.__name__}")


def sdk_lifecycle():
    """google-cloud-compute against the fake: what the client could not take is the fake's fault."""
    fake = FakeCompute()
    try:
        account = service_account.Credentials.from_service_account_info(
            fake.key, scopes=["https://www.googleapis.com/auth/compute"])
        # The JWT-bearer grant at the key's token_uri (the fake's), as the fake saw it.
        grant = client_grant(fake, lambda: account.refresh(Request()))
        creds = oauth.Credentials(account.token)
        options = {"api_endpoint": fake.base}
        instances = compute_v1.InstancesClient(credentials=creds, transport="rest", client_options=options)
        operations = compute_v1.ZoneOperationsClient(credentials=creds, transport="rest", client_options=options)
        project, zone = fake.project, "europe-west1-b"

        def follow(op):
            """Polls zoneOperations.get until the operation is DONE, as the documented protocol says. (The
            client's own `.result()` asks compute.googleapis.com whatever the endpoint it was given.)"""
            deadline = time.time() + 30
            while op.status != compute_v1.Operation.Status.DONE:
                if time.time() > deadline:
                    raise SystemExit(f"conformance: operation {op.name} not DONE after 30 s")
                time.sleep(0.2)
                op = operations.get(project=project, zone=zone, operation=op.name)
            if op.error and op.error.errors:
                raise SystemExit(f"conformance: operation {op.name} failed: {op.error}")
            return op
        names = [f"sdk-{n}" for n in range(3)]
        resource = compute_v1.BulkInsertInstanceResource(
            count=3, min_count=3, source_instance_template="global/instanceTemplates/apiary-node",
            per_instance_properties={n: compute_v1.BulkInsertInstanceResourcePerInstanceProperties() for n in names},
            instance_properties=compute_v1.InstanceProperties(labels={"apiary-pool": "sdk"}))
        done = []
        follow(instances.bulk_insert_unary(request=compute_v1.BulkInsertInstanceRequest(
            project=project, zone=zone, bulk_insert_instance_resource_resource=resource,
            request_id="00000000-0000-4000-8000-000000000001")))
        done.append("bulkInsert, its operation followed to DONE")
        for n in names:
            assert instances.get(project=project, zone=zone, instance=n).status == "RUNNING", n
        done.append("get")
        fake.tell("page 2")
        pager = instances.aggregated_list(request=compute_v1.AggregatedListInstancesRequest(
            project=project, filter='labels.apiary-pool = "sdk"', max_results=2))
        pages = list(pager.pages)
        listed = sorted(i.name for page in pages for scoped in page.items.values() for i in scoped.instances)
        assert len(pages) == 2 and listed == names, (len(pages), listed)
        done.append("aggregatedList over 2 pages")
        either = instances.aggregated_list(request=compute_v1.AggregatedListInstancesRequest(
            project=project, filter='(labels.apiary-pool = "none") OR (labels.apiary-pool = "sdk")'))
        listed = sorted(i.name for _, scoped in either for i in scoped.instances)
        assert listed == names, listed
        done.append("aggregatedList filtered by a choice of labels")
        follow(instances.stop_unary(project=project, zone=zone, instance=names[0]))
        assert instances.get(project=project, zone=zone, instance=names[0]).status == "TERMINATED"
        follow(instances.start_unary(project=project, zone=zone, instance=names[0]))
        assert instances.get(project=project, zone=zone, instance=names[0]).status == "RUNNING"
        done.append("stop and start, followed to DONE")
        get = lambda: instances.get(project=project, zone=zone, instance=names[1])  # noqa: E731
        expect(exceptions.NotFound, lambda: instances.get(project=project, zone=zone, instance="none"), "404")
        expect(exceptions.Conflict, lambda: instances.bulk_insert_unary(
            project=project, zone=zone, bulk_insert_instance_resource_resource=resource), "409")
        fake.tell("throttle 1")
        e = expect(exceptions.TooManyRequests, get, "429")
        assert e.response is not None and "retry-after" in {k.lower() for k in e.response.headers}, e
        fake.tell("unavailable 1")
        expect(exceptions.ServiceUnavailable, lambda: instances.get(
            project=project, zone=zone, instance=names[1], retry=None), "503")
        # The client's own policy retries a 503 (UNAVAILABLE) on a read: one is not seen.
        fake.tell("unavailable 1")
        assert get().status == "RUNNING", "retried through a 503"
        done.append("404, 409, 429 with Retry-After, 503 (and its retry)")
        for n in names:
            follow(instances.delete_unary(project=project, zone=zone, instance=n))
            expect(exceptions.NotFound, lambda n=n: instances.get(project=project, zone=zone, instance=n), "gone")
        done.append("delete, followed to DONE")
    finally:
        fake.close()
    print(f"google-cloud-compute against the fake: {'; '.join(done)}")
    return grant


def main():
    doc = json.load(open(DISCOVERY, encoding="utf-8"))
    self_test(doc)
    grant_self_test()
    wire = recorded("gcp")
    known, table, errors = methods(doc), {}, []
    for exchange in wire:
        errors.extend(check(doc, known, exchange, table))
    report(f"compute v1 (discovery revision {doc.get('revision')}): {len(wire)} exchanges", table, errors)
    theirs = sdk_lifecycle()
    ours = [e["request"] for e in wire if e["method"] == "POST" and e["path"] == "/token"]
    if not ours:
        raise SystemExit("conformance: the GCP adapter asked no token")
    errors = compare_grant(ours[0], theirs, "the JWT-bearer grant")
    mine, google = jwt_claims(ours[0]["assertion"]), jwt_claims(theirs["assertion"])
    if set(mine) != set(google):
        errors.append(f"the JWT-bearer grant: Apiary's assertion claims {sorted(mine)}, google-auth's {sorted(google)}")
    if mine.get("scope") != google.get("scope"):
        errors.append(f"the JWT-bearer grant: scope {mine.get('scope')!r}, google-auth's {google.get('scope')!r}")
    report("the OAuth JWT-bearer grant against google-auth's: the same form fields, claims and scope",
           {}, errors)


if __name__ == "__main__":
    main()

"""Compute Engine on the wire against Google's own description of it: every request Apiary's GCP adapter sends
in a whole cluster lifecycle (shared/clouds/tests/wire.rs, against the fake Compute API), and every answer of the
fake it reads, held against the compute v1 discovery document that google-api-python-client (pinned in
infra/requirements.txt) ships: the method each request is (HTTP method and path template), its query parameters
(each one the method or the API takes, each required one there, each of its type), its body against the method's
request schema, and each successful answer against the method's response schema (every field one the schema
names, of its type). The OAuth token exchange is not Compute's and is left out.

`make conformance` runs it (`make test` does). It prints the operations it saw, each with what was checked.
"""

import json
import os
import re
import subprocess
import sys
import tempfile

import googleapiclient

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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


def check(doc, exchange, table):
    """What is wrong with one exchange, as a list; fills `table` with what was checked per method."""
    errors = []
    path = exchange["path"]
    if not path.startswith(PREFIX):
        table.setdefault(f"{exchange['method']} {path} (not Compute's)", set())
        return errors
    relative = path[len(PREFIX):]
    matched = [m for verb, pattern, m in methods(doc) if verb == exchange["method"] and pattern.match(relative)]
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
    errors = [e for exchange in bad for e in check(doc, exchange, {})]
    for wanted in ["'returnPartialSuccess' is not one", "no field 'bogus'", "request.count", "response.id",
                   "no method of compute v1"]:
        if not any(wanted in e for e in errors):
            raise SystemExit(f"conformance: the checks no longer catch {wanted!r}: {errors}")


def main():
    doc = json.load(open(DISCOVERY, encoding="utf-8"))
    self_test(doc)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "wire.json")
        env = {**os.environ, "APIARY_WIRE_OUT": out}
        cargo = os.environ.get("CARGO", "cargo")
        run = subprocess.run([cargo, "test", "--quiet", "-p", "apiary-clouds", "--test", "wire"], cwd=ROOT, env=env)
        if run.returncode:
            raise SystemExit("conformance: the recorded lifecycle failed (above)")
        wire = json.load(open(out, encoding="utf-8"))
    table, errors = {}, []
    for exchange in wire:
        errors.extend(check(doc, exchange, table))
    print(f"compute v1 (discovery revision {doc.get('revision')}): {len(wire)} exchanges")
    for op, checked in sorted(table.items()):
        print(f"  {op}: {', '.join(sorted(checked)) or 'not checked'}")
    for e in dict.fromkeys(errors):
        print(f"conformance: {e}", file=sys.stderr)
    if errors:
        sys.exit(1)


if __name__ == "__main__":
    main()

"""The emulator's IAM enforcement: a request signed by a session of a role is answered only if the role's policies
allow every ask it makes (infra/role_check.py), and refused as AWS refuses it otherwise (AccessDenied in the
service's own error format), so a function sees on the emulator what it would see on AWS.

The call log (`emulator.py --calls FILE`) gets one JSON line for each statement a role uses for the first time (so
the check after the tests can say which statements no call needed) and one for every refused ask, naming the function,
the call, the ask and the statement it lacks.
"""
import io
import json
import threading
import urllib.parse
import uuid

from moto.dynamodb.models import dynamodb_backends
from moto.ec2.models import ec2_backends
from moto.iam.models import iam_backends
from moto.secretsmanager.models import secretsmanager_backends
from moto.sts.models import sts_backends

import role_check

# Apiary's function roles, by the logical id CloudFormation names them after.
FUNCTIONS = {"ClaimApiRole": "claim-api", "ReconcileRole": "reconcile", "PowerRole": "power", "TimeoutsRole": "timeouts"}


class Lookup:
    """What the asks need from the emulator's state: keys, tags, ARNs."""

    @staticmethod
    def hash_key(account, region, table, index=None):
        try:
            t = dynamodb_backends[account][region].get_table(table)
        except Exception:
            return None
        if not index:
            return t.hash_key_attr
        for i in t.indexes + t.global_indexes:
            if i.name == index:
                return next((k["AttributeName"] for k in i.schema if k["KeyType"] == "HASH"), None)
        return None

    @staticmethod
    def instance_tags(account, region, instance):
        try:
            found = ec2_backends[account][region].describe_tags(filters={"resource-id": [instance]})
        except Exception:
            return {}
        return {t["key"]: t["value"] for t in found}

    @staticmethod
    def secret(account, region, secret_id):
        try:
            s = secretsmanager_backends[account][region].secrets.get(secret_id)
        except Exception:
            s = None
        if s is None:
            return None, {}
        return s.arn, {t["Key"]: t["Value"] for t in (s.tags or [])}


def _function(role_name):
    for logical, function in FUNCTIONS.items():
        if f"-{logical}-" in role_name:
            return function
    return f"role {role_name}"


def _header(environ, name):
    return environ.get("HTTP_" + name.upper().replace("-", "_"), "")


class Enforcer:
    def __init__(self, calls_file):
        self.calls_file = calls_file
        self.sessions = {}  # access key -> (account, role ARN)
        self.logged = set()
        self.guard = threading.Lock()

    def _session(self, key):
        if key in self.sessions:
            return self.sessions[key]
        for account in list(sts_backends.keys()):
            for role in sts_backends[account]["aws"].assumed_roles:
                if role.access_key_id == key:
                    self.sessions[key] = (role.account_id, role.role_arn)
                    return self.sessions[key]
        return None

    def _policies(self, account, role_name):
        try:
            role = iam_backends[account]["aws"].get_role(role_name)
        except Exception:
            return None
        policies = [(name, doc) for name, doc in role.policies.items()]
        for policy in role.managed_policies.values():
            policies.append((policy.name, policy.default_version.document))
        return policies

    def refusal(self, environ):
        """None when the request may go on; otherwise a WSGI answer refusing it."""
        auth = _header(environ, "authorization")
        if "Credential=" not in auth:
            return None
        scope = auth.split("Credential=", 1)[1].split(",", 1)[0].split("/")
        if len(scope) < 5:
            return None
        key, region, service = scope[0], scope[2], scope[3]
        session = self._session(key)
        if session is None:
            return None  # long-term keys: the tests' own, an operator's
        account, role_arn = session
        role_name = role_arn.rsplit("/", 1)[-1]
        if role_name in role_check.ADMINISTRATOR_ROLES:
            return None
        body = environ["wsgi.input"].read() if environ.get("CONTENT_LENGTH") else b""
        environ["wsgi.input"] = io.BytesIO(body)
        headers = {k[5:].lower().replace("_", "-"): v for k, v in environ.items() if k.startswith("HTTP_")}
        req = role_check.Request(
            service=service,
            method=environ.get("REQUEST_METHOD", "GET"),
            path=environ.get("PATH_INFO", "/"),
            query=urllib.parse.parse_qs(environ.get("QUERY_STRING", "")),
            headers=headers,
            body=body,
            account=account,
            region=region,
        )
        function = _function(role_name)
        call = f"{service}:{req.target() or req.form().get('Action') or req.method + ' ' + req.path}"
        policies = self._policies(account, role_name)
        try:
            asks = role_check.asks(req, Lookup)
        except role_check.Unknown as e:
            return self._refuse(req, function, role_name, call, "?", f"the emulator cannot map {e} to IAM actions "
                                "(infra/role_check.py): add it there")
        except (KeyError, ValueError, TypeError) as e:
            return self._refuse(req, function, role_name, call, "?", f"a malformed request ({e!r})")
        if policies is None:
            return self._refuse(req, function, role_name, call, "?", f"role {role_arn} does not exist")
        for ask in asks:
            allowed, by, why = role_check.evaluate(policies, ask)
            if not allowed:
                return self._refuse(req, function, role_name, call, repr(ask), why)
            self._log(("allowed", function, tuple(by)),
                      {"function": function, "role": role_name, "call": call, "ask": ask.action, "allowed": True,
                       "by": by})
        return None

    def _log(self, key, entry):
        if not self.calls_file:
            return
        with self.guard:
            if key in self.logged:
                return
            self.logged.add(key)
            with open(self.calls_file, "a") as f:
                f.write(json.dumps(entry) + "\n")

    def _refuse(self, req, function, role_name, call, ask, why):
        message = f"{function} ({role_name}) may not make {call}: {ask}: {why}"
        self._log(("refused", function, call, ask, why),
                  {"function": function, "role": role_name, "call": call, "ask": ask, "allowed": False, "why": why})
        return _answer(req.service, message)


def _answer(service, message):
    """AccessDenied as `service` writes it."""
    request_id = str(uuid.uuid4())
    if service in ("ec2",):
        body = (f"<Response><Errors><Error><Code>UnauthorizedOperation</Code><Message>{_xml(message)}</Message>"
                f"</Error></Errors><RequestID>{request_id}</RequestID></Response>")
        status, headers = "403 Forbidden", [("Content-Type", "text/xml")]
    elif service in ("sts", "iam"):
        body = (f'<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type>'
                f"<Code>AccessDenied</Code><Message>{_xml(message)}</Message></Error>"
                f"<RequestId>{request_id}</RequestId></ErrorResponse>")
        status, headers = "403 Forbidden", [("Content-Type", "text/xml")]
    elif service == "s3":
        body = f"<Error><Code>AccessDenied</Code><Message>{_xml(message)}</Message></Error>"
        status, headers = "403 Forbidden", [("Content-Type", "application/xml")]
    elif service == "scheduler":
        body = json.dumps({"Message": message})
        status = "403 Forbidden"
        headers = [("Content-Type", "application/json"), ("x-amzn-ErrorType", "AccessDeniedException")]
    else:
        body = json.dumps({"__type": "AccessDeniedException", "message": message})
        status, headers = "400 Bad Request", [("Content-Type", "application/x-amz-json-1.0")]
    headers.append(("x-amzn-RequestId", request_id))

    def answer(start_response):
        data = body.encode()
        start_response(status, headers + [("Content-Length", str(len(data)))])
        return [data]

    return answer


def _xml(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

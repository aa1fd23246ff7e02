"""The emulator's IAM enforcement: a request signed by a session of a role is answered only if the role's policies
allow every ask it makes (infra/role_check.py), and refused as AWS refuses it otherwise (AccessDenied in the
service's own error format), so a function sees on the emulator what it would see on AWS.

Two answers moto lacks are given here too, for `apiary stack check`: IAM's SimulatePrincipalPolicy (each action
judged as the enforcement judges a call) and CloudWatch's DescribeAlarms over Smithy RPC v2 CBOR, the protocol the
AWS SDK for Rust now speaks to CloudWatch.

The call log (`emulator.py --calls FILE`) gets one JSON line for each statement a role uses for the first time (so
the check after the tests can say which statements no call needed) and one for every refused ask, naming the function,
the call, the ask and the statement it lacks.
"""
import io
import json
import re
import threading
import urllib.parse
import uuid

import cbor2
from moto.cloudwatch.models import cloudwatch_backends
from moto.dynamodb.models import dynamodb_backends
from moto.ec2.models import ec2_backends
from moto.iam.models import iam_backends
from moto.s3.models import s3_backends
from moto.secretsmanager.models import secretsmanager_backends
from moto.sts.models import sts_backends

import role_check

# The account of the emulator's long-term test keys.
DEFAULT_ACCOUNT = "123456789012"

# Apiary's function roles, by the logical id CloudFormation names them after.
FUNCTIONS = {"ClaimApiRole": "claim-api", "ReconcileRole": "reconcile", "PowerRole": "power", "TimeoutsRole": "timeouts",
             # The reference installer's (infra/installer.yaml): its function, and its jobs' builds.
             "FunctionRole": "installer", "JobsRole": "installer-jobs"}


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
    def s3_object(account, bucket, key):
        """(whether `key` is in `bucket`, the KMS key it is encrypted with)."""
        try:
            found = s3_backends[account]["aws"].buckets[bucket].keys.get(key)
        except Exception:
            found = None
        if found is None:
            return False, None
        return True, found.kms_key_id if found.encryption == "aws:kms" else None

    @staticmethod
    def s3_bucket_encryption(account, bucket):
        """(the bucket's default encryption, its KMS key)."""
        try:
            rule = json.dumps(s3_backends[account]["aws"].buckets[bucket].encryption or {})
        except Exception:
            return None, None
        algorithm = re.search(r'"SSEAlgorithm": "([^"]+)"', rule)
        key = re.search(r'"KMSMasterKeyID": "([^"]+)"', rule)
        return (algorithm[1] if algorithm else None), (key[1] if key else None)

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


def _body(environ):
    """The request's body, left readable for moto (the emulator has already read it into memory)."""
    body = environ["wsgi.input"].read() if environ.get("CONTENT_LENGTH") else b""
    environ["wsgi.input"] = io.BytesIO(body)
    return body


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
        body = _body(environ)
        headers = {k[5:].lower().replace("_", "-"): v for k, v in environ.items() if k.startswith("HTTP_")}
        req = role_check.Request(
            service=service,
            method=environ.get("REQUEST_METHOD", "GET"),
            path=environ.get("PATH_INFO", "/"),
            query=urllib.parse.parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True),
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
            # The stack was deleted under a running function (as `apiary stack delete` does to the local one): AWS
            # refuses its session too, but no grant is missing, so the log does not count it as a refusal.
            self._log(("deleted", function), {"function": function, "role": role_name, "call": call,
                                              "allowed": False, "deleted": True})
            return _answer(req.service, f"{function} ({role_name}) may not make {call}: role {role_arn} does not "
                           "exist")
        for ask in asks:
            allowed, by, why = role_check.evaluate(policies, ask)
            if not allowed:
                return self._refuse(req, function, role_name, call, repr(ask), why)
            what = role_check.kind(ask)
            self._log(("allowed", function, ask.action, what, tuple(by)),
                      {"function": function, "role": role_name, "call": call, "ask": ask.action, "kind": what,
                       "allowed": True, "by": by})
        return None

    def simulation(self, environ):
        """IAM's SimulatePrincipalPolicy (which moto lacks), for `apiary stack check`: each action on each resource
        with the context given, judged as the enforcement judges a call, answered in IAM's format. None for any
        other request."""
        auth = _header(environ, "authorization")
        if "/iam/aws4_request" not in auth or environ.get("REQUEST_METHOD") != "POST":
            return None
        body = _body(environ)
        form = {k: v[-1] for k, v in urllib.parse.parse_qs(body.decode("utf-8", "replace")).items()}
        if form.get("Action") != "SimulatePrincipalPolicy":
            return None
        source = form.get("PolicySourceArn", "")
        parts = source.split(":", 5)
        policies = self._policies(parts[4], parts[5].rsplit("/", 1)[-1]) if len(parts) == 6 else None
        if policies is None:
            return _iam_error("NoSuchEntity", f"The role with name {source} cannot be found.", "404 Not Found")
        actions = [v for k, v in sorted(form.items(), key=_member_order) if k.startswith("ActionNames.member.")]
        resources = [v for k, v in sorted(form.items(), key=_member_order) if k.startswith("ResourceArns.member.")]
        context = {}
        for k, name in form.items():
            if k.startswith("ContextEntries.member.") and k.endswith(".ContextKeyName"):
                prefix = k[: -len("ContextKeyName")]
                values = [v for kk, v in sorted(form.items(), key=_member_order)
                          if kk.startswith(prefix + "ContextKeyValues.member.")]
                many = form.get(prefix + "ContextKeyType", "string").endswith("List")
                context[name] = values if many else (values[0] if values else "")
        results = []
        for action in actions:
            decisions = [(r, role_check.decide(policies, role_check.Ask(action, r, context)))
                         for r in resources or ["*"]]
            overall = next((d for _, (d, _) in decisions if d != "allowed"), "allowed")
            specific = "".join(
                f"<member><EvalResourceName>{_xml(r)}</EvalResourceName><EvalResourceDecision>{d}"
                f"</EvalResourceDecision>{_matched(by)}</member>" for r, (d, by) in decisions)
            name = resources[0] if len(resources) == 1 else "*"
            results.append(
                f"<member><EvalActionName>{_xml(action)}</EvalActionName><EvalResourceName>{_xml(name)}"
                f"</EvalResourceName><EvalDecision>{overall}</EvalDecision>"
                f"{_matched([b for _, (_, by) in decisions for b in by])}<MissingContextValues/>"
                f"<ResourceSpecificResults>{specific}</ResourceSpecificResults></member>")
        body = ('<SimulatePrincipalPolicyResponse xmlns="https://iam.amazonaws.com/doc/2010-05-08/">'
                "<SimulatePrincipalPolicyResult><IsTruncated>false</IsTruncated>"
                f"<EvaluationResults>{''.join(results)}</EvaluationResults></SimulatePrincipalPolicyResult>"
                f"<ResponseMetadata><RequestId>{uuid.uuid4()}</RequestId></ResponseMetadata>"
                "</SimulatePrincipalPolicyResponse>")
        return _xml_answer("200 OK", body)

    @staticmethod
    def alarms(environ):
        """CloudWatch's DescribeAlarms as the AWS SDKs now ask it (Smithy RPC v2 over CBOR), which moto answers only
        over the query protocol: the alarms of moto's own state, filtered by name prefix and state. None for any
        other request."""
        if not environ.get("PATH_INFO", "").endswith("/operation/DescribeAlarms"):
            return None
        if "rpc-v2-cbor" not in _header(environ, "smithy-protocol"):
            return None
        body = _body(environ)
        asked = cbor2.loads(body) if body else {}
        scope = _header(environ, "authorization").split("Credential=", 1)[-1].split("/")
        account = DEFAULT_ACCOUNT  # the operator's keys: the emulator's own account
        region = scope[2] if len(scope) > 2 else "us-east-1"
        prefix, state = asked.get("AlarmNamePrefix", ""), asked.get("StateValue")
        names = set(asked.get("AlarmNames") or [])
        found = [a for a in cloudwatch_backends[account][region].describe_alarms()
                 if a.name.startswith(prefix) and (not state or a.state_value == state) and (not names or a.name in names)]
        answer = {"MetricAlarms": [{"AlarmName": a.name, "AlarmArn": a.alarm_arn, "StateValue": a.state_value,
                                    "StateReason": a.state_reason} for a in found], "CompositeAlarms": []}
        data = cbor2.dumps(answer)

        def respond(start_response):
            start_response("200 OK", [("Content-Type", "application/cbor"), ("smithy-protocol", "rpc-v2-cbor"),
                                      ("Content-Length", str(len(data)))])
            return [data]

        return respond

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


def _member_order(item):
    """`X.member.10` after `X.member.9`."""
    return [int(p) if p.isdigit() else p for p in item[0].split(".")]


def _matched(labels):
    return "<MatchedStatements>" + "".join(
        f"<member><SourcePolicyId>{_xml(label)}</SourcePolicyId><SourcePolicyType>IAM Policy</SourcePolicyType>"
        "</member>" for label in labels) + "</MatchedStatements>"


def _iam_error(code, message, status):
    body = (f'<ErrorResponse xmlns="https://iam.amazonaws.com/doc/2010-05-08/"><Error><Type>Sender</Type>'
            f"<Code>{code}</Code><Message>{_xml(message)}</Message></Error><RequestId>{uuid.uuid4()}</RequestId>"
            "</ErrorResponse>")
    return _xml_answer(status, body)


def _xml_answer(status, body):
    def answer(start_response):
        data = body.encode()
        start_response(status, [("Content-Type", "text/xml"), ("Content-Length", str(len(data)))])
        return [data]

    return answer


def _xml(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

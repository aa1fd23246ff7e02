"""What an AWS request asks of IAM, and whether the caller's role allows it: the emulator's policy enforcement.

The emulator (moto) grants every call whatever a role allows. AWS does not: it authorizes each request as one or more
*asks* — an action on a resource ARN with the request's condition keys — against the caller's identity policies. This
module turns a request the emulator receives into those asks, as AWS's Service Authorization Reference describes
them for the calls Apiary makes, and evaluates each against the policies of the role whose session signed it.

- **Which caller.** Only sessions of a role (credentials from sts:AssumeRole) are evaluated: each of Apiary's
  functions runs as its own role (`apiary-local` assumes it, as Lambda does), and so does a member account's role
  the power function assumes. The tests' own calls (the emulator's long-term test keys) are an operator's, and
  `OrganizationAccountAccessRole` (which the emulator has no Organizations to make) is an account's administrator.
- **What it asks.** `asks()` maps each operation to its IAM actions, resource ARNs and the condition keys the roles
  use: `dynamodb:LeadingKeys`, `aws:ResourceTag/…` (and the service's own `ec2:`/`secretsmanager:ResourceTag/…`),
  `aws:RequestTag/…`, `ec2:CreateAction`, `iam:PassedToService`, `aws:ResourceAccount`. A transaction asks once per
  item (PutItem, DeleteItem, UpdateItem, ConditionCheckItem), a schedule with a target role also asks iam:PassRole,
  RunInstances asks for every resource it touches. An operation this module does not know is refused: an unknown
  call is a gap in the map, never a pass.
- **How it is judged.** By principalmapper's local policy simulation (`policy_has_matching_statement`: actions and
  resources with IAM's wildcards and policy variables, String/Numeric/Date/Bool/Arn/Null operators, IfExists,
  ForAllValues/ForAnyValue), statement by statement, so that an allowed ask names the statements (their `Sid`) that
  allow it and a refused one says which statement is missing. An explicit Deny wins; no Allow is an implicit deny.

Usage as a check of a call log (`--calls` of the emulator):
role_check.py LOG [LOG...] [--template=FILE...] [--calls-list=infra/function-calls.json] [--refusals-only]
"""
import collections
import collections.abc
import html
import json
import re
import urllib.parse

# principalmapper 1.1.5 (its last release) imports Mapping and MutableMapping from `collections`, where Python 3.10
# removed the aliases; they are the same classes in `collections.abc`.
collections.Mapping = collections.abc.Mapping
collections.MutableMapping = collections.abc.MutableMapping

from principalmapper.querying.local_policy_simulation import policy_has_matching_statement  # noqa: E402
from principalmapper.util.case_insensitive_dict import CaseInsensitiveDict  # noqa: E402

# The role every member account has for its administrators (AWS Organizations makes it); not one of Apiary's.
ADMINISTRATOR_ROLES = {"OrganizationAccountAccessRole"}


class Ask:
    """One authorization AWS makes for a request: `action` on `resource` with the condition keys `context`."""

    def __init__(self, action, resource, context=None):
        self.action = action
        self.resource = resource
        self.context = context or {}

    def __repr__(self):
        keys = ", ".join(f"{k}={v}" for k, v in sorted(self.context.items()))
        return f"{self.action} on {self.resource}" + (f" ({keys})" if keys else "")


class Unknown(Exception):
    """A request this module cannot map to IAM actions."""


class Request:
    """What the emulator saw of one request."""

    def __init__(self, service, method, path, query, headers, body, account, region):
        self.service = service
        self.method = method
        self.path = path
        self.query = query  # dict of lists
        self.headers = headers  # lower-case names
        self.body = body  # bytes
        self.account = account
        self.region = region

    def target(self):
        return self.headers.get("x-amz-target", "").rsplit(".", 1)[-1]

    def json(self):
        try:
            return json.loads(self.body or b"{}")
        except ValueError:
            return {}

    def form(self):
        """A query-protocol request's parameters (body and query string), one value each."""
        params = {k: v[-1] for k, v in self.query.items()}
        if self.body:
            params.update({k: v[-1] for k, v in urllib.parse.parse_qs(self.body.decode("utf-8", "replace")).items()})
        return params


def arn(service, region, account, resource, partition="aws"):
    return f"arn:{partition}:{service}:{region}:{account}:{resource}"


# --- DynamoDB -----------------------------------------------------------------------------------------------------

DYNAMO_ITEM = {"GetItem", "PutItem", "DeleteItem", "UpdateItem"}
TRANSACT = {"Put": "PutItem", "Delete": "DeleteItem", "Update": "UpdateItem", "ConditionCheck": "ConditionCheckItem"}


def _leading_key(lookup, req, table, key):
    hash_key = lookup.hash_key(req.account, req.region, table)
    value = (key or {}).get(hash_key) if hash_key else None
    return next(iter(value.values())) if isinstance(value, dict) and value else None


def _query_leading_key(lookup, req, table, index, body):
    """The value a Query's key condition gives the partition key of `table` (or of its `index`)."""
    hash_key = lookup.hash_key(req.account, req.region, table, index)
    names = {k: v for k, v in (body.get("ExpressionAttributeNames") or {}).items()}
    values = body.get("ExpressionAttributeValues") or {}
    for name, value in re.findall(r"([#\w.]+)\s*=\s*(:\w+)", body.get("KeyConditionExpression", "")):
        if names.get(name, name) == hash_key and value in values:
            return next(iter(values[value].values()))
    return None


def _dynamo(req, lookup):
    op, body = req.target(), req.json()
    table_arn = lambda t: arn("dynamodb", req.region, req.account, f"table/{t}")  # noqa: E731

    def item_ask(action, table, key):
        lead = _leading_key(lookup, req, table, key)
        return Ask(f"dynamodb:{action}", table_arn(table), {"dynamodb:LeadingKeys": [lead]} if lead else {})

    if op in DYNAMO_ITEM:
        return [item_ask(op, body["TableName"], body.get("Key") or body.get("Item"))]
    if op in ("Query", "Scan"):
        table, index = body["TableName"], body.get("IndexName")
        resource = table_arn(table) + (f"/index/{index}" if index else "")
        lead = _query_leading_key(lookup, req, table, index, body) if op == "Query" else None
        return [Ask(f"dynamodb:{op}", resource, {"dynamodb:LeadingKeys": [lead]} if lead else {})]
    if op == "BatchGetItem":
        asks = []
        for table, spec in body.get("RequestItems", {}).items():
            leads = [_leading_key(lookup, req, table, k) for k in spec.get("Keys", [])]
            asks.append(Ask("dynamodb:BatchGetItem", table_arn(table), {"dynamodb:LeadingKeys": sorted(set(leads))}))
        return asks
    if op == "BatchWriteItem":
        asks = []
        for table, writes in body.get("RequestItems", {}).items():
            leads = [_leading_key(lookup, req, table, (w.get("PutRequest") or {}).get("Item")
                                  or (w.get("DeleteRequest") or {}).get("Key")) for w in writes]
            asks.append(Ask("dynamodb:BatchWriteItem", table_arn(table), {"dynamodb:LeadingKeys": sorted(set(leads))}))
        return asks
    if op == "TransactWriteItems":
        asks = []
        for entry in body.get("TransactItems", []):
            (kind, spec), = entry.items()
            asks.append(item_ask(TRANSACT[kind], spec["TableName"], spec.get("Key") or spec.get("Item")))
        return asks
    if op == "TransactGetItems":
        return [item_ask("GetItem", e["Get"]["TableName"], e["Get"]["Key"]) for e in body.get("TransactItems", [])]
    if op in ("DescribeTable", "DescribeTimeToLive"):
        return [Ask(f"dynamodb:{op}", table_arn(body["TableName"]))]
    raise Unknown(f"dynamodb {op}")


# --- SQS ----------------------------------------------------------------------------------------------------------

SQS_ACTIONS = {
    "SendMessage": "SendMessage", "SendMessageBatch": "SendMessage", "ReceiveMessage": "ReceiveMessage",
    "DeleteMessage": "DeleteMessage", "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibility": "ChangeMessageVisibility", "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
    "GetQueueAttributes": "GetQueueAttributes", "GetQueueUrl": "GetQueueUrl",
}


def _sqs(req, _lookup):
    if req.headers.get("x-amz-target"):
        op, url = req.target(), req.json().get("QueueUrl", "")
    else:
        form = req.form()
        op, url = form.get("Action", ""), form.get("QueueUrl", "") or req.path
    if op not in SQS_ACTIONS:
        raise Unknown(f"sqs {op}")
    if op == "GetQueueUrl":
        name = req.json().get("QueueName") or req.form().get("QueueName", "")
    else:
        name = url.rstrip("/").rsplit("/", 1)[-1]
    return [Ask(f"sqs:{SQS_ACTIONS[op]}", arn("sqs", req.region, req.account, name))]


# --- EventBridge Scheduler (REST) ---------------------------------------------------------------------------------

def _scheduler(req, _lookup):
    parts = [urllib.parse.unquote(p) for p in req.path.strip("/").split("/")]
    if parts == ["schedules"] and req.method == "GET":
        return [Ask("scheduler:ListSchedules", "*")]
    if len(parts) != 2 or parts[0] != "schedules":
        raise Unknown(f"scheduler {req.method} {req.path}")
    body = req.json() if req.method in ("POST", "PUT") else {}
    group = body.get("GroupName") or (req.query.get("groupName") or ["default"])[-1]
    action = {"POST": "CreateSchedule", "PUT": "UpdateSchedule", "DELETE": "DeleteSchedule",
              "GET": "GetSchedule"}.get(req.method)
    if not action:
        raise Unknown(f"scheduler {req.method} {req.path}")
    asks = [Ask(f"scheduler:{action}", arn("scheduler", req.region, req.account, f"schedule/{group}/{parts[1]}"))]
    role = (body.get("Target") or {}).get("RoleArn")
    if role:
        asks.append(Ask("iam:PassRole", role, {"iam:PassedToService": "scheduler.amazonaws.com"}))
    return asks


# --- EC2 (query protocol) -----------------------------------------------------------------------------------------

def _numbered(form, prefix):
    """The values of `prefix.1`, `prefix.2`, …"""
    return [v for k, v in sorted(form.items()) if re.fullmatch(re.escape(prefix) + r"\.\d+", k)]


def _request_tags(form):
    """TagSpecification.N.Tag.M.Key/Value of a request, by the resource type each applies to."""
    tags = {}
    for k, v in form.items():
        m = re.fullmatch(r"TagSpecification\.(\d+)\.Tag\.(\d+)\.Key", k)
        if m:
            kind = form.get(f"TagSpecification.{m[1]}.ResourceType", "")
            tags.setdefault(kind, {})[v] = form.get(f"TagSpecification.{m[1]}.Tag.{m[2]}.Value", "")
    return tags


def _resource_tags(prefixes, tags):
    context = {}
    for prefix in prefixes:
        for k, v in tags.items():
            context[f"{prefix}:ResourceTag/{k}"] = v
    return context


def _ec2(req, lookup):
    form = req.form()
    op = form.get("Action", "")
    ec2 = lambda r: arn("ec2", req.region, req.account, r)  # noqa: E731
    if op.startswith("Describe"):
        return [Ask(f"ec2:{op}", "*")]
    if op in ("StartInstances", "StopInstances", "TerminateInstances", "RebootInstances"):
        return [
            Ask(f"ec2:{op}", ec2(f"instance/{i}"),
                _resource_tags(["aws", "ec2"], lookup.instance_tags(req.account, req.region, i)))
            for i in _numbered(form, "InstanceId")
        ]
    if op == "RunInstances":
        tags = _request_tags(form).get("instance", {})
        request = {f"aws:RequestTag/{k}": v for k, v in tags.items()}
        if tags:
            request["aws:TagKeys"] = sorted(tags)
        asks = [Ask("ec2:RunInstances", ec2("instance/*"), request)]
        image = form.get("ImageId")
        if image:
            asks.append(Ask("ec2:RunInstances", arn("ec2", req.region, "", f"image/{image}")))
        asks.append(Ask("ec2:RunInstances", ec2(f"subnet/{form.get('SubnetId', '*')}")))
        asks.append(Ask("ec2:RunInstances", ec2("network-interface/*")))
        groups = _numbered(form, "SecurityGroupId") or ["*"]
        asks += [Ask("ec2:RunInstances", ec2(f"security-group/{g}")) for g in groups]
        asks.append(Ask("ec2:RunInstances", ec2("volume/*")))
        if form.get("KeyName"):
            asks.append(Ask("ec2:RunInstances", ec2(f"key-pair/{form['KeyName']}")))
        template = form.get("LaunchTemplate.LaunchTemplateId") or form.get("LaunchTemplate.LaunchTemplateName")
        if template:
            asks.append(Ask("ec2:RunInstances", ec2(f"launch-template/{template}")))
        if tags:
            # Tags given at launch are authorized as ec2:CreateTags made by RunInstances.
            asks.append(Ask("ec2:CreateTags", ec2("instance/*"), {**request, "ec2:CreateAction": "RunInstances"}))
        return asks
    if op == "CreateTags":
        return [Ask("ec2:CreateTags", ec2(f"instance/{i}")) for i in _numbered(form, "ResourceId")]
    raise Unknown(f"ec2 {op}")


# --- Secrets Manager, STS -----------------------------------------------------------------------------------------

def _request_tags_json(tags):
    """`aws:RequestTag/…` and `aws:TagKeys` of a JSON request's `Tags` ([{Key, Value}])."""
    tags = {t.get("Key", ""): t.get("Value", "") for t in tags or []}
    context = {f"aws:RequestTag/{k}": v for k, v in tags.items()}
    if tags:
        context["aws:TagKeys"] = sorted(tags)
    return context


def _secretsmanager(req, lookup):
    op, body = req.target(), req.json()
    if op == "CreateSecret":
        # The new secret's ARN ends in six characters Secrets Manager chooses; policies match it with a wildcard.
        name = body.get("Name", "")
        resource = arn("secretsmanager", req.region, req.account, f"secret:{name}-AbCdEf")
        context = _request_tags_json(body.get("Tags"))
        asks = [Ask("secretsmanager:CreateSecret", resource, context)]
        if body.get("Tags"):
            # Tags given at creation need TagResource too (Secrets Manager's CreateSecret reference).
            asks.append(Ask("secretsmanager:TagResource", resource, context))
        return asks
    if op not in ("GetSecretValue", "DescribeSecret", "PutSecretValue", "TagResource", "DeleteSecret"):
        raise Unknown(f"secretsmanager {op}")
    secret_arn, tags = lookup.secret(req.account, req.region, body.get("SecretId", ""))
    resource = secret_arn or arn("secretsmanager", req.region, req.account, f"secret:{body.get('SecretId', '')}")
    context = _resource_tags(["aws", "secretsmanager"], tags)
    if op == "TagResource":
        context.update(_request_tags_json(body.get("Tags")))
    return [Ask(f"secretsmanager:{op}", resource, context)]


# --- S3 (REST, path-style) and CodeBuild --------------------------------------------------------------------------

def _s3(req, lookup):
    """S3 asks for the object or bucket a path-style request names; an object written or read encrypted with a KMS
    key asks for the key too (kms:GenerateDataKey to write, kms:Decrypt to read), as S3 asks KMS as the caller; and a
    read of a missing object asks s3:ListBucket, without which S3 answers 403 rather than 404."""
    bucket, _, key = urllib.parse.unquote(req.path).lstrip("/").partition("/")
    bucket_arn = f"arn:aws:s3:::{bucket}"
    # (The AWS SDKs name the operation in an `x-id` parameter S3 ignores.)
    q, m = {k: v for k, v in req.query.items() if k != "x-id"}, req.method
    if not bucket:
        raise Unknown(f"s3 {m} /")
    if not key:
        if m == "GET" and not (set(q) - {"list-type", "prefix", "delimiter", "continuation-token", "max-keys",
                                          "encoding-type", "fetch-owner", "start-after", "marker"}):
            return [Ask("s3:ListBucket", bucket_arn, {"s3:prefix": (q.get("prefix") or [""])[-1]})]
        if m == "HEAD" and not q:
            return [Ask("s3:ListBucket", bucket_arn)]
        if m == "POST" and "delete" in q:
            keys = re.findall(r"<Key>(.*?)</Key>", req.body.decode("utf-8", "replace"), re.S)
            return [Ask("s3:DeleteObject", f"{bucket_arn}/{html.unescape(k)}") for k in keys]
        raise Unknown(f"s3 {m} bucket ?{'&'.join(sorted(q))}")
    object_arn = f"{bucket_arn}/{key}"
    if m in ("GET", "HEAD") and not (set(q) - {"versionId", "partNumber"}):
        found, kms_key = lookup.s3_object(req.account, bucket, key)
        asks = [Ask("s3:GetObject", object_arn)]
        if not found:
            asks.append(Ask("s3:ListBucket", bucket_arn, {"s3:prefix": key}))
        elif kms_key and m == "GET":
            asks.append(Ask("kms:Decrypt", _kms_arn(req, kms_key)))
        return asks
    if m == "DELETE" and not (set(q) - {"versionId"}):
        return [Ask("s3:DeleteObject", object_arn)]
    if (m == "PUT" and not (set(q) - {"partNumber", "uploadId"}) and "x-amz-copy-source" not in req.headers) or (
            m == "POST" and ("uploads" in q or "uploadId" in q)):
        asks = [Ask("s3:PutObject", object_arn)]
        encryption = req.headers.get("x-amz-server-side-encryption")
        kms_key = req.headers.get("x-amz-server-side-encryption-aws-kms-key-id")
        if not encryption:
            encryption, kms_key = lookup.s3_bucket_encryption(req.account, bucket)
        if encryption == "aws:kms" and kms_key and ((m == "PUT" and not q) or "uploads" in q):
            asks.append(Ask("kms:GenerateDataKey", _kms_arn(req, kms_key)))
        return asks
    raise Unknown(f"s3 {m} object ?{'&'.join(sorted(q))}")


def _kms_arn(req, key):
    return key if key.startswith("arn:") else arn("kms", req.region, req.account, f"key/{key}")


CODEBUILD = {"StartBuild", "BatchGetBuilds", "StopBuild", "RetryBuild", "BatchGetProjects"}


def _codebuild(req, _lookup):
    op, body = req.target(), req.json()
    if op not in CODEBUILD:
        raise Unknown(f"codebuild {op}")
    project = lambda name: arn("codebuild", req.region, req.account, f"project/{name}")  # noqa: E731
    if op == "StartBuild":
        names = [body.get("projectName", "")]
    elif op == "BatchGetProjects":
        names = body.get("names", [])
    else:  # a build's id is `project:uuid`; CodeBuild authorizes a build's calls on its project
        names = [i.split(":", 1)[0] for i in body.get("ids") or [body.get("id", "")]]
    return [Ask(f"codebuild:{op}", project(n)) for n in dict.fromkeys(names)]


def _sts(req, _lookup):
    form = req.form()
    op = form.get("Action", "")
    if op == "GetCallerIdentity":
        return []  # allowed to every caller
    if op == "AssumeRole":
        role = form.get("RoleArn", "")
        account = role.split(":")[4] if role.count(":") >= 5 else ""
        return [Ask("sts:AssumeRole", role, {"aws:ResourceAccount": account})]
    raise Unknown(f"sts {op}")


SERVICES = {
    "dynamodb": _dynamo, "sqs": _sqs, "scheduler": _scheduler, "ec2": _ec2, "secretsmanager": _secretsmanager,
    "sts": _sts, "s3": _s3, "codebuild": _codebuild,
}


def asks(req, lookup):
    """The authorizations AWS makes for `req`; raises Unknown for a request not mapped here."""
    mapper = SERVICES.get(req.service)
    if mapper is None:
        raise Unknown(f"{req.service} (no map for the service)")
    return mapper(req, lookup)


def kind(ask):
    """What `ask` is made on, as infra/function-calls.json lists it: a resource of the stack (`table`, `index/pools`,
    `power-queue`, ...) or of the account (`instance`, `new-instance` for a launch, `secret`, ...)."""
    r = ask.resource
    if r == "*":
        return "*"
    parts = r.split(":", 5)
    if len(parts) < 6:
        return r
    service, resource = parts[2], parts[5]
    if service == "dynamodb":
        if "/index/" in resource:
            return "index/" + resource.split("/index/", 1)[1]
        return "sweep-item" if ask.context.get("dynamodb:LeadingKeys") == ["SWEEP"] else "table"
    if service == "sqs":
        for suffix, name in (("-power", "power-queue"), ("-reconcile.fifo", "reconcile-queue")):
            if resource.endswith(suffix):
                return name
        return f"queue {resource}"
    if service == "scheduler":
        return "schedule"
    if service == "iam":
        return "scheduler-role" if ask.action == "iam:PassRole" else "member-role"
    if service == "ec2":
        what = resource.split("/", 1)[0]
        return ("new-instance" if resource == "instance/*" else "instance") if what == "instance" else what
    if service == "secretsmanager":
        return "secret"
    if service == "s3":
        return "object " + resource.split("/", 1)[1].split("/", 1)[0] + "/*" if "/" in resource else "bucket"
    if service in ("kms", "codebuild"):
        return resource.split("/", 1)[0]
    return r


# --- Evaluation ---------------------------------------------------------------------------------------------------

def statements(policies):
    """Every statement of `policies` (documents), with the name of the policy that holds it."""
    for name, doc in policies:
        body = doc if isinstance(doc, dict) else json.loads(doc)
        listed = body.get("Statement", [])
        for s in [listed] if isinstance(listed, dict) else listed:
            if s:
                yield name, s


def _matches(statement, effect, ask):
    context = CaseInsensitiveDict(ask.context)
    return policy_has_matching_statement({"Statement": [statement]}, effect, ask.action, ask.resource, context)


def _judge(policies, ask):
    """The `policy/Sid`s of the statements that allow `ask`, and of those that deny it."""
    allowing, denying = [], []
    for name, s in statements(policies):
        label = f"{name}/{s.get('Sid', '?')}"
        if _matches(s, "Deny", ask):
            denying.append(label)
        elif _matches(s, "Allow", ask):
            allowing.append(label)
    return allowing, denying


def decide(policies, ask):
    """IAM's decision for `ask` (`allowed`, `explicitDeny` or `implicitDeny`) and the statements that made it."""
    allowing, denying = _judge(policies, ask)
    if denying:
        return "explicitDeny", denying
    return ("allowed", allowing) if allowing else ("implicitDeny", [])


def evaluate(policies, ask):
    """(allowed, the `policy/Sid`s that allow it, why not) for `ask` under the identity `policies`."""
    allowing, denying = _judge(policies, ask)
    if denying:
        return False, [], f"an explicit Deny ({', '.join(denying)})"
    if allowing:
        return True, allowing, ""
    near = [f"{name}/{s.get('Sid', '?')}" for name, s in statements(policies) if s.get("Effect") == "Allow"
            and _matches({**{k: v for k, v in s.items() if k not in ("Resource", "NotResource", "Condition")},
                          "Resource": "*"}, "Allow", ask)]
    lacking = {"Effect": "Allow", "Action": ask.action, "Resource": ask.resource}
    why = f"no statement allows it; it lacks {json.dumps(lacking)}"
    if ask.context:
        why += f" for the request's {json.dumps(ask.context, sort_keys=True)}"
    if near:
        why += f" (statements {', '.join(near)} allow the action on other resources or conditions)"
    return False, [], why


# --- The call log's check (after the tests) -----------------------------------------------------------------------

def _load_template(path):
    """A CloudFormation template's roles and policies: {logical id: [(Sid, the comment lines above the statement)]}."""
    with open(path) as f:
        text = f.read()
    roles = {}
    current = None
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^  (\w+):\s*$", line)
        if m:
            current = None if m[1] in ("Parameters", "Conditions", "Resources", "Outputs") else m[1]
            continue
        if current and re.match(r"^    Type: ", line) and not re.match(r"^    Type: AWS::IAM::(Role|Policy)\s*$", line):
            current = None  # a resource's policy (a key's, a bucket's) grants no function anything
            continue
        sid = re.search(r"\bSid:\s*(\w+)", line)
        if sid and current:
            # The comment lines above the statement (and above the `- !If` that holds a conditional one).
            comments = []
            j = i - 1
            while j >= 0 and (lines[j].strip().startswith("#") or re.fullmatch(r"\s*- (!If|\w+)\s*", lines[j])):
                if lines[j].strip().startswith("#"):
                    comments.insert(0, lines[j].strip())
                j -= 1
            roles.setdefault(current, []).append((sid[1], " ".join(comments)))
    return roles


FUNCTIONS = ("claim-api", "reconcile", "power", "timeouts")


def listed_calls(path):
    """infra/function-calls.json as {(function, action, resource kind)}."""
    with open(path) as f:
        listed = json.load(f)
    return {(fn, action, entry["resource"]) for fn in FUNCTIONS for entry in listed[fn] for action in entry["actions"]}


def check(logs, templates, calls_list=None):
    """Fails (a list of problems) on any refused call in `logs`; on any statement of the roles in `templates` that no
    allowed call used and that says in no `# Unrecorded: …` comment why it is there; and, with `calls_list`
    (infra/function-calls.json, what `apiary stack check` asks IAM about), on a call the functions made that the list
    lacks or a listed one no function made."""
    problems, used, made = [], set(), set()
    for log in logs:
        try:
            with open(log) as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            problems.append(f"{log}: no call log (did the emulator run with --calls?)")
            continue
        for line in lines:
            entry = json.loads(line)
            if entry.get("deleted"):
                continue  # a session of a role whose stack was deleted under it: no grant is missing
            if entry["allowed"]:
                used.update(sid.split("/")[-1] for sid in entry["by"])
                if entry["function"] in FUNCTIONS and "kind" in entry:
                    made.add((entry["function"], entry["ask"], entry["kind"]))
            else:
                problems.append(f"{entry['function']}: {entry['call']} was refused: {entry['ask']}: {entry['why']}")
    for template in templates:
        seen = set()
        for role, sids in _load_template(template).items():
            for sid, comments in sids:
                if sid in seen:
                    problems.append(f"{template}: Sid {sid} is used twice; each statement's Sid names it alone")
                seen.add(sid)
                if sid not in used and "Unrecorded:" not in comments:
                    problems.append(
                        f"{template}: {role}'s statement {sid} allowed no call the tests made: remove it, or say "
                        f"why it is there in a `# Unrecorded: …` comment above it")
    if calls_list:
        listed = listed_calls(calls_list)
        for fn, action, what in sorted(made - listed):
            problems.append(f"{calls_list}: {fn} made {action} on {what}, which the list lacks: add it, so that "
                            "`apiary stack check` asks IAM about it too")
        for fn, action, what in sorted(listed - made):
            problems.append(f"{calls_list}: {fn}'s {action} on {what} was made by no test: take it out of the list, "
                            "or test the path that makes it")
    return problems


def main(argv):
    options = dict(a.split("=", 1) for a in argv if a.startswith("--") and "=" in a)
    logs = [a for a in argv if not a.startswith("--")]
    templates = [a.split("=", 1)[1] for a in argv if a.startswith("--template=")]
    if "--refusals-only" in argv:  # the tests failed, some did not run: what was not called proves nothing
        templates, options = [], {}
    problems = check(logs, templates, options.get("--calls-list"))
    for p in problems:
        print(f"role check: {p}")
    if problems:
        raise SystemExit(1)
    print(f"role check: every call the functions made was allowed by their roles ({', '.join(logs)})")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])

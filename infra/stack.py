"""Creating or updating Apiary's CloudFormation stack and waiting for it: shared by deploy.py (AWS, or the
emulator in the deploy test) and deploy_local.py (`make run` and the system tests)."""
import os
import re
import sys
import time

import yaml

TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "template.yaml")
#: The template a member account deploys: the role an AWS pool with a roleArn names.
MEMBER_TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "member-account.yaml")
FUNCTIONS = ["claim-api", "reconcile", "power", "timeouts"]


def emulator(script):
    """The local emulator the environment names, for the deploy scripts of `make run` and the tests: a boto3 session
    in `AWS_REGION` (us-east-1 by default), the endpoint (`AWS_ENDPOINT_URL`) and the region. Exits naming `script`
    when no emulator is named."""
    import boto3

    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if not endpoint:
        sys.exit(f"{script}: AWS_ENDPOINT_URL is not set (the emulator's address, e.g. http://127.0.0.1:5000)")
    region = os.environ.get("AWS_REGION", "us-east-1")
    return boto3.session.Session(region_name=region), endpoint, region


def template_body(path=TEMPLATE):
    with open(path) as f:
        return f.read()


def external_id(stack_id, pool):
    """The ExternalId Apiary passes when it assumes the role of `pool` (the planner's `external_id`): the last
    segment of the stack's id, and the pool's name."""
    stack = re.sub(r"[^A-Za-z0-9+=,.@:_-]", "-", stack_id.rsplit("/", 1)[-1])
    return f"apiary-{stack}-{pool}"


def template_parameters(body):
    """The template's parameter names, in order (read from its text: its !Sub tags are not plain YAML)."""
    section = body.split("\nParameters:\n", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^  ([A-Za-z0-9]+):$", section, re.M)


def parameter_problems(body, params):
    """What CloudFormation would refuse of `params` by the template's AllowedPattern and AllowedValues, each with the
    parameter's ConstraintDescription: said before anything is uploaded or changed."""
    section = body.split("\nParameters:\n", 1)[1].split("\n\n", 1)[0]
    declared = yaml.safe_load(section) or {}
    problems = []
    for name, value in params.items():
        spec = declared.get(name) or {}
        pattern, allowed = spec.get("AllowedPattern"), spec.get("AllowedValues")
        if (pattern and not re.fullmatch(pattern, value)) or (allowed and value not in [str(a) for a in allowed]):
            why = spec.get("ConstraintDescription") or (f"one of {', '.join(map(str, allowed))}" if allowed else pattern)
            problems.append(f"parameter {name}={value!r}: {why}")
    return problems


def find(cfn, name):
    """The stack named `name`, or None if there is none (or only a deleted one)."""
    try:
        stacks = cfn.describe_stacks(StackName=name)["Stacks"]
    except cfn.exceptions.ClientError as e:
        if "does not exist" in str(e):
            return None
        raise
    live = [s for s in stacks if s["StackStatus"] != "DELETE_COMPLETE"]
    return live[0] if live else None


def wait(cfn, name, timeout):
    """Waits until the stack's operation ends; returns the stack."""
    deadline = time.time() + timeout
    while True:
        stack = cfn.describe_stacks(StackName=name)["Stacks"][0]
        if not stack["StackStatus"].endswith("_IN_PROGRESS"):
            return stack
        if time.time() > deadline:
            sys.exit(f"stack {name}: still {stack['StackStatus']} after {timeout} s")
        time.sleep(1 if timeout > 300 else 0.5)


def wait_gone(cfn, name, timeout):
    """Waits until the stack's deletion ends: None once it is gone, else the status it stopped at."""
    deadline = time.time() + timeout
    while True:
        stack = find(cfn, name)
        if stack is None:
            return None
        if not stack["StackStatus"].endswith("_IN_PROGRESS") or time.time() > deadline:
            return stack["StackStatus"]
        time.sleep(0.5)


#: Resource types whose replacement or removal loses what they hold: the table (every pool, cluster and claim)
#: and the queues (the messages in flight).
STATEFUL = {"AWS::DynamoDB::Table", "AWS::SQS::Queue"}
CAPABILITIES = ["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM"]


def preview(cfn, name, body, parameters, timeout=300):
    """What updating stack `name` to `body` with `parameters` would change, as CloudFormation's change set lists it:
    each change's `ResourceChange` (`LogicalResourceId`, `ResourceType`, `Action`, and for a modification whether
    it replaces the resource, `Replacement`). The change set is deleted afterwards; nothing is changed."""
    change_set = f"apiary-preview-{int(time.time() * 1000)}"
    cfn.create_change_set(StackName=name, ChangeSetName=change_set, TemplateBody=body, Parameters=parameters,
                          Capabilities=CAPABILITIES, ChangeSetType="UPDATE")
    try:
        deadline = time.time() + timeout
        while True:
            described = cfn.describe_change_set(StackName=name, ChangeSetName=change_set)
            if described["Status"] in ("CREATE_COMPLETE", "FAILED") or time.time() > deadline:
                break
            time.sleep(1)
        if described["Status"] == "FAILED":
            reason = described.get("StatusReason", "")
            if "didn't contain changes" in reason or "No updates" in reason:
                return []
            sys.exit(f"stack {name}: the change set could not be made: {reason}")
        if described["Status"] != "CREATE_COMPLETE":
            sys.exit(f"stack {name}: the change set is still {described['Status']} after {timeout} s")
        changes = list(described.get("Changes", []))
        while described.get("NextToken"):
            described = cfn.describe_change_set(StackName=name, ChangeSetName=change_set,
                                                NextToken=described["NextToken"])
            changes += described.get("Changes", [])
    finally:
        try:
            cfn.delete_change_set(StackName=name, ChangeSetName=change_set)
        except cfn.exceptions.ClientError:
            pass
    return [c["ResourceChange"] for c in changes if "ResourceChange" in c]


def destructive(changes, allowed=()):
    """The changes that would replace or remove a stateful resource ([`STATEFUL`]) whose logical id `allowed` does
    not name: a removal, or a modification CloudFormation replaces (`Replacement` True, or Conditional: it may)."""
    return [
        c for c in changes
        if c.get("ResourceType") in STATEFUL and c.get("LogicalResourceId") not in allowed
        and (c.get("Action") == "Remove" or (c.get("Action") == "Modify" and c.get("Replacement") in ("True", "Conditional")))
    ]


def said(change):
    """One change as a line: its action, resource and type, and whether it replaces the resource."""
    replacement = f", replacement: {change['Replacement']}" if change.get("Replacement") else ""
    return f"  {change.get('Action')} {change.get('LogicalResourceId')} ({change.get('ResourceType')}){replacement}"


def deploy(cfn, name, params, timeout=1800, template=TEMPLATE, allow_replacing=()):
    """Creates the stack of `template`, or updates it in place. Parameters of an existing stack that `params` leaves
    out keep their previous values. An update is previewed first: its changes are printed, and one that would
    replace or remove a stateful resource is refused unless `allow_replacing` names it. Exits with the failed
    resources' reasons if the operation fails; returns the stack."""
    body = template_body(template)
    existing = find(cfn, name)
    if existing is None:
        cfn.create_stack(
            StackName=name,
            TemplateBody=body,
            Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in params.items()],
            Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM"],
        )
        want = "CREATE_COMPLETE"
    else:
        # The previous values are passed as values rather than with UsePreviousValue (the same on AWS, as no
        # parameter is NoEcho): the emulator resolves UsePreviousValue only for parameters given at creation.
        previous = {p["ParameterKey"]: p["ParameterValue"] for p in existing.get("Parameters", [])}
        merged = {k: previous[k] for k in template_parameters(body) if k in previous}
        merged.update(params)
        parameters = [{"ParameterKey": k, "ParameterValue": v} for k, v in merged.items()]
        changes = preview(cfn, name, body, parameters)
        print(f"stack {name}: the update's change set: {len(changes) or 'no'} resource change(s)", file=sys.stderr)
        for change in changes:
            print(said(change), file=sys.stderr)
        refused = destructive(changes, allow_replacing)
        if refused:
            named = ",".join(c["LogicalResourceId"] for c in refused)
            sys.exit(
                f"stack {name}: refused: the update would replace or remove what holds Apiary's state "
                f"({', '.join(c['LogicalResourceId'] + ' ' + c.get('Action', '') for c in refused)}). A replaced "
                f"table is kept, not deleted, but the stack would lose every record in it. Nothing was changed; to "
                f"go ahead, deploy again with ALLOW_REPLACING={named}."
            )
        try:
            cfn.update_stack(
                StackName=name,
                TemplateBody=body,
                Parameters=parameters,
                Capabilities=CAPABILITIES,
            )
        except cfn.exceptions.ClientError as e:
            if "No updates are to be performed" in str(e):
                print(f"stack {name}: already up to date", file=sys.stderr)
                return existing
            raise
        want = "UPDATE_COMPLETE"
    stack = wait(cfn, name, timeout)
    if stack["StackStatus"] != want:
        for e in cfn.describe_stack_events(StackName=name)["StackEvents"]:
            if "FAILED" in e.get("ResourceStatus", ""):
                print(f"  {e['LogicalResourceId']}: {e.get('ResourceStatusReason')}", file=sys.stderr)
        sys.exit(f"stack {name}: {stack['StackStatus']}")
    return stack


def outputs(stack):
    return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}

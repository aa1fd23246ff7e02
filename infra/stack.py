"""Creating or updating Apiary's CloudFormation stack and waiting for it: shared by deploy.py (AWS, or the
emulator in the deploy test) and deploy_local.py (`make run` and the system tests)."""
import os
import re
import sys
import time

TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "template.yaml")
#: The template a member account deploys: the role an AWS pool with a roleArn names.
MEMBER_TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "member-account.yaml")
FUNCTIONS = ["claim-api", "reconcile", "power", "timeouts"]


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


def deploy(cfn, name, params, timeout=1800, template=TEMPLATE):
    """Creates the stack of `template`, or updates it in place. Parameters of an existing stack that `params` leaves
    out keep their previous values. Exits with the failed resources' reasons if the operation fails; returns the
    stack."""
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
        try:
            cfn.update_stack(
                StackName=name,
                TemplateBody=body,
                Parameters=parameters,
                Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM"],
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

"""CodeBuild on the wire against botocore's model of it: every request the reference installer's job adapter
(installer/src/aws.rs, `CodeBuildJobs`) sends in a job's lifecycle against the emulator (installer/tests/aws.rs:
start an install, look until done, stop it, start a destroy and stop it, look at a build CodeBuild does not know),
held against the codebuild service model botocore ships (pinned with moto in infra/requirements.txt): the
protocol (POST /, `application/x-amz-json-1.1`), the target (`CodeBuild_20161006.<Operation>`, an operation the
model has), and the body against the operation's input shape (every member one the shape names, of its type,
within its bounds, every required one there), as botocore's own ParamValidator judges a request before it sends.

The emulator accepts what botocore would refuse in places; the model is the service's own description, so it is
the judge here. `make conformance` runs it with the emulator up (`make test` does).
"""

import sys
from urllib.parse import urlparse

import botocore.session
from botocore.validate import ParamValidator

from wire import recorded

NEEDED = {"StartBuild", "BatchGetBuilds", "StopBuild"}


def main():
    model = botocore.session.get_session().get_service_model("codebuild")
    # The judge refuses what it should: an unknown member, a timeout past CodeBuild's bounds.
    wrong = {"projectName": "p", "timeoutInMinutesOverride": 4000, "bogus": 1}
    if not ParamValidator().validate(wrong, model.operation_model("StartBuild").input_shape).has_errors():
        sys.exit("conformance: botocore's validator took a request it must refuse")
    prefix = model.metadata["targetPrefix"]
    protocol = f"application/x-amz-json-{model.metadata['jsonVersion']}"
    sent = recorded("codebuild", package="apiary-installer", test="aws")
    problems, seen = [], {}
    for req in sent:
        target = req["target"]
        op = target.removeprefix(f"{prefix}.")
        if not target.startswith(f"{prefix}.") or op not in model.operation_names:
            problems.append(f"{target!r} is no CodeBuild operation ({prefix}.<Operation>)")
            continue
        if op == "CreateProject":
            continue  # the test's own set-up, not the adapter's
        if req["method"] != "POST" or urlparse(req["uri"]).path not in ("", "/"):
            problems.append(f"{op}: {req['method']} {req['uri']}, not POST /")
        if req["contentType"] != protocol:
            problems.append(f"{op}: content-type {req['contentType']!r}, not {protocol!r}")
        report = ParamValidator().validate(req["body"], model.operation_model(op).input_shape)
        if report.has_errors():
            problems.append(f"{op}: {report.generate_report()}")
        seen[op] = seen.get(op, 0) + 1
    for op, n in sorted(seen.items()):
        print(f"codebuild {op}: {n} request(s): target, protocol and body against the model's input shape")
    missing = NEEDED - set(seen)
    if missing:
        problems.append(f"the adapter's lifecycle sent no {', '.join(sorted(missing))}")
    if problems:
        for p in problems:
            print(f"conformance: {p}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()

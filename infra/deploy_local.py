"""Deploys infra/template.yaml into the local AWS emulator and writes the stack's outputs as environment settings.

Usage: deploy_local.py STACK ENV_FILE [--admins ARNS] [--max-recheck-seconds N] [--full-sweep-seconds N]

The functions run in the local process (apiary-local), so the stack is deployed with EventSourcesEnabled=false
and placeholder code zips: the emulator must not try to run Lambda itself.
"""
import argparse
import io
import os
import sys
import zipfile

import boto3

import stack as stacks

p = argparse.ArgumentParser()
p.add_argument("stack")
p.add_argument("env_file")
p.add_argument("--admins", default="")
p.add_argument("--max-recheck-seconds", default="900")
p.add_argument("--visibility-seconds", default="10")
p.add_argument("--full-sweep-seconds", default="600")
p.add_argument("--metrics", default="", help="APIARY_METRICS for the local functions (emf, file:PATH or off)")
args = p.parse_args()

endpoint = os.environ.get("AWS_ENDPOINT_URL")
if not endpoint:
    sys.exit("deploy_local.py: AWS_ENDPOINT_URL is not set (the emulator's address, e.g. http://127.0.0.1:5000)")
region = os.environ.get("AWS_REGION", "us-east-1")
session = boto3.session.Session(region_name=region)
s3 = session.client("s3", endpoint_url=endpoint)
cfn = session.client("cloudformation", endpoint_url=endpoint)

bucket = f"{args.stack}-code".lower()
s3.create_bucket(Bucket=bucket)
buf = io.BytesIO()
with zipfile.ZipFile(buf, "w") as z:
    z.writestr("bootstrap", "#!/bin/sh\necho 'the local stack runs this function in apiary-local'\nexit 1\n")
for fn in stacks.FUNCTIONS:
    s3.put_object(Bucket=bucket, Key=f"apiary/{fn}.zip", Body=buf.getvalue())

params = {
    "CodeBucket": bucket,
    "AdminPrincipals": args.admins,
    "EventSourcesEnabled": "false",
    "MaxRecheckSeconds": args.max_recheck_seconds,
    "QueueVisibilitySeconds": args.visibility_seconds,
    "FullSweepSeconds": args.full_sweep_seconds,
}
stack = stacks.deploy(cfn, args.stack, params, timeout=120)
status = stack["StackStatus"]
out = stacks.outputs(stack)
env = {
    "APIARY_STACK": args.stack,
    "APIARY_TABLE": out["TableName"],
    "APIARY_RECONCILE_QUEUE_URL": out["ReconcileQueueUrl"],
    "APIARY_RECONCILE_QUEUE_ARN": out["ReconcileQueueArn"],
    "APIARY_POWER_QUEUE_URL": out["PowerQueueUrl"],
    "APIARY_SCHEDULER_ROLE_ARN": out["SchedulerRoleArn"],
    "APIARY_SCHEDULE_PREFIX": out["SchedulePrefix"],
    "APIARY_ADMINS": args.admins,
    "APIARY_MAX_RECHECK_SECONDS": args.max_recheck_seconds,
    "APIARY_FULL_SWEEP_SECONDS": args.full_sweep_seconds,
}
if args.metrics:
    env["APIARY_METRICS"] = args.metrics
with open(args.env_file, "w") as f:
    for k, v in env.items():
        f.write(f"{k}={v}\n")
print(f"stack {args.stack}: {status}; settings in {args.env_file}")

"""Deploys infra/template.yaml into the local AWS emulator and writes the stack's outputs as environment settings.

Usage: deploy_local.py STACK ENV_FILE [--admins ARNS] [--default-pool-access open|admins]
                       [--max-recheck-seconds N] [--full-sweep-seconds N] [--member-account ID --member-pools P,Q]

The functions run in the local process (apiary-local), so the stack is deployed with EventSourcesEnabled=false
and placeholder code zips: the emulator must not try to run Lambda itself.

With --member-account, the stack allows AWS pools in that (second, emulated) account, and infra/member-account.yaml
is deployed there, as a team would deploy it: entered through OrganizationAccountAccessRole, its role named
apiary-member-STACK, trusting the stack's power role with the ExternalIds of --member-pools. The role's ARN is
written as APIARY_MEMBER_ROLE_ARN (for the demo pool and the system tests; the functions do not read it).
"""
import argparse
import io
import os
import zipfile

import boto3

import stack as stacks

p = argparse.ArgumentParser()
p.add_argument("stack")
p.add_argument("env_file")
p.add_argument("--admins", default="")
p.add_argument("--default-pool-access", default="open", choices=["open", "admins"])
p.add_argument("--max-recheck-seconds", default="900")
p.add_argument("--visibility-seconds", default="10")
p.add_argument("--full-sweep-seconds", default="600")
p.add_argument("--metrics", default="", help="APIARY_METRICS for the local functions (emf, file:PATH or off)")
p.add_argument("--member-account", default="", help="a second account whose role AWS pools may name")
p.add_argument("--member-pools", default="", help="the pools (comma-separated) the member account's role serves")
args = p.parse_args()

session, endpoint, region = stacks.emulator("deploy_local.py")
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
    "DefaultPoolAccess": args.default_pool_access,
    "EventSourcesEnabled": "false",
    "MaxRecheckSeconds": args.max_recheck_seconds,
    "QueueVisibilitySeconds": args.visibility_seconds,
    "FullSweepSeconds": args.full_sweep_seconds,
    "MemberAccountIds": args.member_account,
    # Locally the metrics go to a file and cost nothing: every series, each pool's too.
    "Monitoring": "pools",
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
    "APIARY_DEFAULT_POOL_ACCESS": args.default_pool_access,
    "APIARY_MAX_RECHECK_SECONDS": args.max_recheck_seconds,
    "APIARY_FULL_SWEEP_SECONDS": args.full_sweep_seconds,
    "APIARY_STACK_ID": out["StackId"],
    "APIARY_MEMBER_ACCOUNTS": args.member_account,
    "APIARY_MEMBER_ROLE_PATTERN": "apiary-member-*",
    # The fake clouds and the reference installer listen on loopback, over plain http.
    "APIARY_LOCAL_URLS": "true",
    "APIARY_MONITORING": "pools",
}
# Each function runs as its own role, as Lambda runs it: apiary-local assumes these (and the emulator then holds every
# call to the role's policies).
for output, setting in [("ClaimApiRoleArn", "CLAIM_API"), ("ReconcileRoleArn", "RECONCILE"),
                        ("PowerRoleArn", "POWER"), ("TimeoutsRoleArn", "TIMEOUTS")]:
    env[f"APIARY_LOCAL_{setting}_ROLE_ARN"] = out[output]
if args.member_account:
    org = session.client("sts", endpoint_url=endpoint).assume_role(
        RoleArn=f"arn:aws:iam::{args.member_account}:role/OrganizationAccountAccessRole", RoleSessionName="deploy-local"
    )["Credentials"]
    member = boto3.session.Session(
        aws_access_key_id=org["AccessKeyId"],
        aws_secret_access_key=org["SecretAccessKey"],
        aws_session_token=org["SessionToken"],
        region_name=region,
    )
    pools = [p.strip() for p in args.member_pools.split(",") if p.strip()] or ["demo-member"]
    member_params = {
        "ApiaryPowerRoleArn": out["PowerRoleArn"],
        "ExternalIds": ",".join(stacks.external_id(out["StackId"], p) for p in pools),
        "RoleName": f"apiary-member-{args.stack}"[:64],
    }
    member_cfn = member.client("cloudformation", endpoint_url=endpoint)
    member_stack = stacks.deploy(member_cfn, f"{args.stack}-member", member_params, 120, stacks.MEMBER_TEMPLATE)
    env["APIARY_MEMBER_ROLE_ARN"] = stacks.outputs(member_stack)["RoleArn"]
if args.metrics:
    env["APIARY_METRICS"] = args.metrics
with open(args.env_file, "w") as f:
    for k, v in env.items():
        f.write(f"{k}={v}\n")
print(f"stack {args.stack}: {status}; settings in {args.env_file}")

"""`make deploy`: uploads the packaged functions and creates or updates Apiary's stack, then prints its outputs.

Usage: deploy.py --stack NAME --region REGION --bucket BUCKET [--lambda-dir target/lambda] [NAME=VALUE ...]

- The zips (`make package`) go to s3://BUCKET/apiary/<digest>/<function>.zip, where <digest> is taken over all
  four: a changed function gets new keys, so CloudFormation updates its code; an unchanged one redeploys nothing.
- BUCKET must be in REGION. It is created (private, encrypted) if it does not exist.
- NAME=VALUE pairs are template parameters (see docs/operations.md). On an update, parameters not given keep the values
  the stack has.
- An update shows its change set first, and is refused if it would replace or remove the table or a queue, unless
  --allow-replacing names each (`make deploy ... ALLOW_REPLACING=Table`).
- Credentials and the endpoint come from the usual AWS environment (profile, AWS_ACCESS_KEY_ID, AWS_ENDPOINT_URL).
"""
import argparse
import hashlib
import os
import sys

import boto3
import botocore.exceptions

import stack as stacks

p = argparse.ArgumentParser(description="Deploy Apiary's stack.")
p.add_argument("--stack", required=True, help="stack name (also the prefix of every resource name)")
p.add_argument("--region", required=True)
p.add_argument("--bucket", required=True, help="S3 bucket for the function zips")
p.add_argument("--lambda-dir", default="target/lambda", help="where make package put <function>/bootstrap.zip")
p.add_argument("--timeout", type=int, default=1800, help="seconds to wait for the stack")
p.add_argument("--allow-replacing", default="", metavar="ID,...",
               help="logical ids of stateful resources (Table, a queue) an update may replace or remove")
p.add_argument("--template", default=stacks.TEMPLATE, help=argparse.SUPPRESS)
p.add_argument("params", nargs="*", metavar="NAME=VALUE", help="template parameters")
args = p.parse_args()

known = stacks.template_parameters(stacks.template_body(args.template))
params = {}
for pair in args.params:
    name, sep, value = pair.partition("=")
    if not sep:
        sys.exit(f"deploy: parameter {pair!r}: want NAME=VALUE")
    if name not in known:
        sys.exit(f"deploy: parameter {name!r} is not one of the template's: {', '.join(known)}")
    if name in ("CodeBucket", "CodePrefix"):
        sys.exit(f"deploy: {name} is set by deploy itself (from --bucket and the zips' digest)")
    params[name] = value
for problem in stacks.parameter_problems(stacks.template_body(args.template), params):
    sys.exit(f"deploy: {problem}")
visibility = params.get("QueueVisibilitySeconds", "360")
if not visibility.isdigit() or int(visibility) < 360:
    sys.exit(f"deploy: QueueVisibilitySeconds={visibility!r}: want a whole number of seconds, at least 360 (6 x the consumers' 60 s timeout)")

zips = {}
for fn in stacks.FUNCTIONS:
    path = os.path.join(args.lambda_dir, fn, "bootstrap.zip")
    if not os.path.isfile(path):
        sys.exit(f"deploy: {path} is missing: run `make package` first")
    with open(path, "rb") as f:
        zips[fn] = f.read()
digest = hashlib.sha256(b"".join(hashlib.sha256(z).digest() for z in zips.values())).hexdigest()[:16]
prefix = f"apiary/{digest}/"

session = boto3.session.Session(region_name=args.region)
s3 = session.client("s3")
cfn = session.client("cloudformation")

try:
    s3.head_bucket(Bucket=args.bucket)
except botocore.exceptions.ClientError as e:
    if e.response["Error"]["Code"] not in ("404", "NoSuchBucket"):
        sys.exit(f"deploy: bucket {args.bucket}: {e}")
    print(f"creating bucket {args.bucket} in {args.region}", file=sys.stderr)
    create = {"Bucket": args.bucket}
    if args.region != "us-east-1":
        create["CreateBucketConfiguration"] = {"LocationConstraint": args.region}
    s3.create_bucket(**create)
    s3.put_public_access_block(
        Bucket=args.bucket,
        PublicAccessBlockConfiguration={
            "BlockPublicAcls": True,
            "IgnorePublicAcls": True,
            "BlockPublicPolicy": True,
            "RestrictPublicBuckets": True,
        },
    )
    s3.put_bucket_encryption(
        Bucket=args.bucket,
        ServerSideEncryptionConfiguration={"Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]},
    )

for fn, body in zips.items():
    key = f"{prefix}{fn}.zip"
    print(f"uploading s3://{args.bucket}/{key} ({len(body) / 1e6:.2f} MB)", file=sys.stderr)
    s3.put_object(Bucket=args.bucket, Key=key, Body=body)

params.update({"CodeBucket": args.bucket, "CodePrefix": prefix})
print(f"deploying stack {args.stack} in {args.region}", file=sys.stderr)
allowed = {a.strip() for a in args.allow_replacing.split(",") if a.strip()}
result = stacks.deploy(cfn, args.stack, params, timeout=args.timeout, template=args.template, allow_replacing=allowed)
print(f"stack {args.stack}: {result['StackStatus']}")
for key, value in sorted(stacks.outputs(result).items()):
    print(f"  {key}: {value}")

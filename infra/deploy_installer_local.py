"""Deploys infra/installer.yaml (the reference installer) into the local AWS emulator, as a team deploys it beside
Apiary, and writes its settings as the function's environment, for the installer's tests against the emulator
(installer/tests/aws.rs): the function then runs as a session of its own role, and every call it makes is held to
that role's policies (infra/role_enforcement.py).

Usage: deploy_installer_local.py STACK ENV_FILE

Besides the stack: the function's placeholder code zip (the emulator must not run Lambda), a signing key secret, an
install policy for the jobs, and pool `ocp`'s pull secret, tagged as docs/clouds.md says to tag them.
"""
import argparse
import io
import os
import zipfile


import stack as stacks

INSTALLER_TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "installer.yaml")

p = argparse.ArgumentParser()
p.add_argument("stack")
p.add_argument("env_file")
args = p.parse_args()

session, endpoint, _ = stacks.emulator("deploy_installer_local.py")
client = lambda service: session.client(service, endpoint_url=endpoint)  # noqa: E731
s3, iam, secrets = client("s3"), client("iam"), client("secretsmanager")

code = f"{args.stack}-code".lower()
s3.create_bucket(Bucket=code)
buf = io.BytesIO()
with zipfile.ZipFile(buf, "w") as z:
    z.writestr("bootstrap", "#!/bin/sh\necho 'the installer's tests run this function in process'\nexit 1\n")
s3.put_object(Bucket=code, Key="apiary/installer/bootstrap.zip", Body=buf.getvalue())
# The jobs' rights to install in this account; what they are is the team's (OpenShift's documented list).
install_policy = iam.create_policy(
    PolicyName=f"{args.stack}-install",
    PolicyDocument='{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "ec2:Describe*", '
                   '"Resource": "*"}]}',
)["Policy"]["Arn"]
tags = lambda pools: [{"Key": "apiary", "Value": "true"}, {"Key": "apiary:pools", "Value": pools}]  # noqa: E731
key = secrets.create_secret(Name=f"{args.stack}/signing-key", SecretString="whsec_YXBpYXJ5LWNhbmFyeS1zaWduaW5nLWtleS01ZjFkMGMzYTllN2IyNDY4",
                            Tags=tags("ocp"))["ARN"]
pull = secrets.create_secret(Name=f"{args.stack}/ocp/pull-secret",
                             SecretString='{"auths":{"quay.io":{"auth":"Y2k6YXBpYXJ5LWNhbmFyeS1wdWxsLXNlY3JldC1jNGU5YTdkMmIxZjA4MzU2"}}}', Tags=tags("ocp"))["ARN"]

# The jobs' oc is pinned by its SHA-256 (the emulator runs no build: any well-formed one deploys).
params = {"CodeBucket": code, "SigningKeySecretArns": key, "InstallPolicyArn": install_policy,
          "OcClientSha256": "0" * 64}
stack = stacks.deploy(client("cloudformation"), args.stack, params, 120, INSTALLER_TEMPLATE)
out = stacks.outputs(stack)
env = {
    "APIARY_INSTALLER_TABLE": out["RecordsTable"],
    "APIARY_INSTALLER_BUCKET": out["Bucket"],
    "APIARY_INSTALLER_KMS_KEY": out["KmsKeyArn"],
    "APIARY_INSTALLER_PROJECT": out["JobsProject"],
    "APIARY_INSTALLER_KEYS": key,
    "APIARY_INSTALLER_ROLE_ARN": out["FunctionRoleArn"],
    "APIARY_INSTALLER_JOBS_ROLE_ARN": out["JobsRoleArn"],
    "APIARY_INSTALLER_PULL_SECRET": pull,
}
with open(args.env_file, "w") as f:
    for k, v in env.items():
        f.write(f"{k}={v}\n")
print(f"stack {args.stack}: {stack['StackStatus']}; settings in {args.env_file}")

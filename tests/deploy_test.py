"""The deploy test (`make deploy-test`, part of `make test`): `make package` and `make deploy` against the AWS
emulator's S3, CloudFormation, Lambda and the rest, as a platform engineer runs them against AWS.

It creates the stack, checks that every resource was created and every output is there and that each function
runs the packaged zip under its own role, then deploys again with one parameter changed and checks the stack was
updated in place: same resources, the new value in effect, the other parameters kept.
"""
import base64
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import unittest

import boto3
from cfnlint.decode import decode_str

import local_emulator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "infra"))
import stack as stacks  # noqa: E402  (infra/stack.py, which make deploy runs)
STACK = "apiary-deploy-test"
BUCKET = "apiary-deploy-test-code"
REGION = "us-east-1"
ADMIN = "arn:aws:iam::123456789012:user/admin"
FUNCTIONS = {"claim-api": "ClaimApiFunction", "reconcile": "ReconcileFunction", "power": "PowerFunction",
             "timeouts": "TimeoutsFunction"}
# Reserved concurrency at the template's defaults: the claim API scales with its callers.
RESERVED = {"claim-api": None, "reconcile": 10, "power": 10, "timeouts": 1}
OUTPUTS = {"ApiUrl", "TableName", "ReconcileQueueUrl", "ReconcileQueueArn", "PowerQueueUrl", "SchedulerRoleArn",
           "SchedulePrefix", "DashboardName", "PowerRoleArn", "StackId", "ClaimApiRoleArn", "ReconcileRoleArn",
           "TimeoutsRoleArn"}
# Resource types the emulator's CloudFormation does not implement: it skips them with a warning and lists each as
# a resource without a name, so they are counted here, not inspected. cfn-lint and checkov check them
# (`make lint-infra`).
NOT_EMULATED = {"AWS::Scheduler::Schedule", "AWS::CloudWatch::Alarm", "AWS::ApplicationAutoScaling::ScalableTarget",
                "AWS::ApplicationAutoScaling::ScalingPolicy"}
# Resources whose condition is false at the template's defaults: the dashboard, with Monitoring=alarms (the update
# below asks for it), and the claim API's function URL, with ClaimEndpoint=api-gateway. (The table's auto scaling,
# with TableCapacity=provisioned, is not emulated.)
OFF_BY_DEFAULT = {"Dashboard", "ClaimApiUrl"}
# What ClaimEndpoint=function-url leaves out: API Gateway's API, its method and deployment, its right to invoke.
API_GATEWAY = {"Api", "ApiProxyResource", "ApiProxyMethod", "ApiDeployment", "ApiInvokePermission"}
# Types the emulator can create but not update: after an update it lists them without a name, and they are looked
# up through their own API instead.
NOT_UPDATED_BY_EMULATOR = {"AWS::Logs::LogGroup"}


def template(name="template.yaml"):
    with open(os.path.join(ROOT, "infra", name)) as f:
        parsed, errors = decode_str(f.read())
    assert not errors, errors
    return parsed


# What Lambda needs to manage a function's network interfaces in a VPC.
VPC_ACTIONS = {
    "ec2:CreateNetworkInterface",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
}


class DeployTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        subprocess.run(["make", "--no-print-directory", "package"], cwd=ROOT, check=True)
        cls.emulator, endpoint, cls.log = local_emulator.start("deploy")
        cls.env = dict(os.environ, AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test")
        session = boto3.session.Session(region_name=REGION, aws_access_key_id="test", aws_secret_access_key="test")
        cls.cfn = session.client("cloudformation", endpoint_url=endpoint)
        cls.awslambda = session.client("lambda", endpoint_url=endpoint)
        cls.logs = session.client("logs", endpoint_url=endpoint)
        cls.dynamodb = session.client("dynamodb", endpoint_url=endpoint)
        cls.template = template()

    @classmethod
    def tearDownClass(cls):
        cls.emulator.terminate()
        cls.emulator.wait()

    def deploy(self, params, stack=STACK):
        out = subprocess.run(
            ["make", "--no-print-directory", "deploy", f"STACK={stack}", f"REGION={REGION}", f"BUCKET={BUCKET}",
             f"PARAMS={params}"],
            cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=600,
        )
        self.assertEqual(out.returncode, 0, f"make deploy failed:\n{out.stdout}\n{out.stderr}")
        return out.stdout

    def resources(self, stack=STACK):
        """The stack's resources by name, and how many the emulator lists without one."""
        pages = self.cfn.get_paginator("list_stack_resources").paginate(StackName=stack)
        listed = [r for page in pages for r in page["StackResourceSummaries"]]
        named = {r["LogicalResourceId"]: r for r in listed if r["LogicalResourceId"]}
        return named, len(listed) - len(named)

    def declared(self, leave_out, off=OFF_BY_DEFAULT):
        return {k for k, v in self.template["Resources"].items() if v["Type"] not in leave_out and k not in off}

    def function(self, name, stack=STACK):
        return self.awslambda.get_function(FunctionName=f"{stack}-{name}")["Configuration"]

    def outputs(self, stack):
        stack = self.cfn.describe_stacks(StackName=stack)["Stacks"][0]
        return {o["OutputKey"]: o["OutputValue"] for o in stack["Outputs"]}

    def test_package_and_deploy_then_update_in_place(self):
        # Create.
        printed = self.deploy(f"AdminPrincipals={ADMIN}")
        stack = self.cfn.describe_stacks(StackName=STACK)["Stacks"][0]
        self.assertEqual(stack["StackStatus"], "CREATE_COMPLETE")
        outputs = {o["OutputKey"]: o["OutputValue"] for o in stack["Outputs"]}
        self.assertEqual(set(outputs), OUTPUTS)
        for key in OUTPUTS:
            self.assertIn(f"{key}: {outputs[key]}", printed, "make deploy prints every output")
        self.assertTrue(outputs["ApiUrl"].startswith("https://") and outputs["ApiUrl"].endswith("/v1"))

        created, nameless = self.resources()
        self.assertEqual(set(created), self.declared(NOT_EMULATED), "every resource of the template is in the stack")
        # (The emulator lists a resource whose condition is false, as one it does not emulate, without a name.)
        self.assertEqual(nameless, len(self.template["Resources"]) - len(created))
        self.assertEqual(outputs["DashboardName"], "none (Monitoring=alarms)")
        for name, r in created.items():
            self.assertEqual(r["ResourceStatus"], "CREATE_COMPLETE", name)

        roles = set()
        for fn, logical in FUNCTIONS.items():
            conf = self.function(fn)
            with open(os.path.join(ROOT, "target", "lambda", fn, "bootstrap.zip"), "rb") as f:
                digest = base64.b64encode(hashlib.sha256(f.read()).digest()).decode()
            self.assertEqual(conf["CodeSha256"], digest, f"{fn} runs the packaged zip")
            self.assertEqual(conf["Runtime"], "provided.al2023")
            self.assertEqual(conf["Handler"], "bootstrap")
            # The emulator's CloudFormation drops Architectures (every function reads back x86_64): the template
            # is checked instead.
            self.assertEqual(self.template["Resources"][logical]["Properties"]["Architectures"], ["arm64"], fn)
            # The emulator does not keep LoggingConfig either. The function filters its own lines at the stack's
            # LogLevel (warn by default); Lambda passes them all, and its own only at info and below.
            logging = self.template["Resources"][logical]["Properties"]["LoggingConfig"]
            self.assertEqual((logging["LogFormat"], logging["ApplicationLogLevel"]), ("JSON", "TRACE"), fn)
            self.assertEqual(logging["SystemLogLevel"], {"Fn::If": ["PlatformLogs", "INFO", "WARN"]}, fn)
            self.assertEqual(conf["Environment"]["Variables"]["APIARY_LOG_LEVEL"], "warn", fn)
            reserved = self.awslambda.get_function(FunctionName=f"{STACK}-{fn}").get("Concurrency", {})
            self.assertEqual(reserved.get("ReservedConcurrentExecutions"), RESERVED[fn], fn)
            self.assertEqual(conf["Environment"]["Variables"]["APIARY_STACK"], STACK)
            self.assertEqual(conf["Environment"]["Variables"]["APIARY_ADMINS"], ADMIN)
            self.assertEqual(str(conf["Environment"]["Variables"]["APIARY_MAX_RECHECK_SECONDS"]), "900")
            if fn != "timeouts":
                # The metric series the alarms read, and no more (each is billed by CloudWatch) unless asked for.
                self.assertEqual(conf["Environment"]["Variables"]["APIARY_MONITORING"], "alarms", fn)
            if fn == "claim-api":
                # Pools without an access list stay open to every caller of the API unless the stack says admins.
                self.assertEqual(conf["Environment"]["Variables"]["APIARY_DEFAULT_POOL_ACCESS"], "open")
            if fn in ("claim-api", "power"):
                # What a pool's URLs may reach: no private range by default, and never the stack's own API.
                env = conf["Environment"]["Variables"]
                self.assertEqual(env.get("APIARY_ALLOWED_PRIVATE_RANGES", ""), "", fn)
                api_host = outputs["ApiUrl"].split("/")[2]
                self.assertEqual(env["APIARY_API_HOST"], api_host, fn)
            roles.add(conf["Role"])
        self.assertEqual(len(roles), len(FUNCTIONS), "each function has its own role")

        # On demand by default: billed by the units used, no capacity to keep.
        table = self.dynamodb.describe_table(TableName=outputs["TableName"])["Table"]
        self.assertEqual(table["BillingModeSummary"]["BillingMode"], "PAY_PER_REQUEST")
        # The table outlives the stack and any update that would replace it, and DynamoDB refuses to delete it.
        declared = self.template["Resources"]["Table"]
        self.assertEqual((declared["DeletionPolicy"], declared["UpdateReplacePolicy"]), ("Retain", "Retain"))
        self.assertEqual(self.template["Parameters"]["TableDeletionProtection"]["Default"], "true")
        self.assertIs(table["DeletionProtectionEnabled"], True)

        # Update two parameters: the stack changes in place (the dashboard Monitoring=dashboard asks for is added),
        # and the parameters not given keep their values. The change set is shown first.
        self.deploy("MaxRecheckSeconds=600 Monitoring=dashboard")
        stack = self.cfn.describe_stacks(StackName=STACK)["Stacks"][0]
        self.assertEqual(stack["StackStatus"], "UPDATE_COMPLETE")
        params = {p["ParameterKey"]: p["ParameterValue"] for p in stack["Parameters"]}
        self.assertEqual(params["MaxRecheckSeconds"], "600")
        self.assertEqual(params["AdminPrincipals"], ADMIN)
        updated, _ = self.resources()
        kept = self.declared(NOT_EMULATED | NOT_UPDATED_BY_EMULATOR)
        self.assertEqual(set(updated), kept | {"Dashboard"})
        outputs = {o["OutputKey"]: o["OutputValue"] for o in stack["Outputs"]}
        self.assertEqual(outputs["DashboardName"], f"{STACK}-apiary")

        for name in kept:
            self.assertEqual(updated[name]["PhysicalResourceId"], created[name]["PhysicalResourceId"], f"{name} replaced")
        groups = {g["logGroupName"]: g for g in self.logs.describe_log_groups()["logGroups"]}
        for fn in FUNCTIONS:
            self.assertEqual(groups[f"/aws/lambda/{STACK}-{fn}"].get("retentionInDays"), 30, fn)
            env = self.function(fn)["Environment"]["Variables"]
            # (The emulator returns a Number parameter's value as a number.)
            self.assertEqual(str(env["APIARY_MAX_RECHECK_SECONDS"]), "600", fn)
            self.assertEqual(env["APIARY_ADMINS"], ADMIN, fn)
            if fn != "timeouts":
                self.assertEqual(env["APIARY_MONITORING"], "dashboard", fn)

    def test_an_update_that_would_replace_the_table_is_refused_and_a_deleted_stack_leaves_it(self):
        stack = f"{STACK}-kept"
        self.deploy(f"AdminPrincipals={ADMIN}", stack=stack)
        table = self.outputs(stack)["TableName"]
        self.dynamodb.put_item(TableName=table, Item={"PK": {"S": "POOL#kept"}, "SK": {"S": "POOL"}})
        before, _ = self.resources(stack)
        # The table under another logical id: CloudFormation would remove it and make a new one.
        with open(os.path.join(ROOT, "infra", "template.yaml")) as f:
            body = f.read()
        renamed = body.replace("\n  Table:\n", "\n  StateTable:\n").replace("!GetAtt Table.", "!GetAtt StateTable.")
        renamed = re.sub(r"!Ref Table\b", "!Ref StateTable", renamed).replace("${Table", "${StateTable")
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write(renamed)
        deploy = [sys.executable, os.path.join(ROOT, "infra", "deploy.py"), "--stack", stack, "--region", REGION,
                  "--bucket", BUCKET, "--lambda-dir", os.path.join(ROOT, "target", "lambda"), "--template", f.name]
        out = subprocess.run(deploy, cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=600)
        self.assertNotEqual(out.returncode, 0, f"the replacing update went ahead:\n{out.stderr}")
        self.assertIn("Remove Table (AWS::DynamoDB::Table)", out.stderr, "the change set is shown")
        self.assertIn("refused", out.stderr)
        self.assertIn("ALLOW_REPLACING=Table", out.stderr, "the way to force it is named")
        after, _ = self.resources(stack)
        self.assertEqual(after["Table"]["PhysicalResourceId"], before["Table"]["PhysicalResourceId"])
        self.assertEqual(self.cfn.describe_stacks(StackName=stack)["Stacks"][0]["StackStatus"], "CREATE_COMPLETE")
        # Deleting the stack keeps the table, its records, and its deletion protection.
        self.cfn.delete_stack(StackName=stack)
        self.assertIsNone(stacks.wait_gone(self.cfn, stack, 300))
        kept = self.dynamodb.get_item(TableName=table, Key={"PK": {"S": "POOL#kept"}, "SK": {"S": "POOL"}})
        self.assertIn("Item", kept, "the retained table still holds its records")
        with self.assertRaises(self.dynamodb.exceptions.ClientError) as refused:
            self.dynamodb.delete_table(TableName=table)
        self.assertIn("DeletionProtectionEnabled", str(refused.exception))

    def test_a_change_set_is_refused_where_it_replaces_or_removes_state_unless_allowed(self):
        change = lambda logical, kind, action, replacement=None: {  # noqa: E731
            "LogicalResourceId": logical, "ResourceType": kind, "Action": action,
            **({"Replacement": replacement} if replacement else {})}
        table, queue = "AWS::DynamoDB::Table", "AWS::SQS::Queue"
        changes = [
            change("Table", table, "Modify", "True"),
            change("PowerQueue", queue, "Modify", "Conditional"),
            change("ReconcileQueue", queue, "Remove"),
            change("PowerDlq", queue, "Modify", "False"),
            change("PowerFunction", "AWS::Lambda::Function", "Modify", "True"),
            change("NewQueue", queue, "Add"),
        ]
        refused = [c["LogicalResourceId"] for c in stacks.destructive(changes)]
        self.assertEqual(refused, ["Table", "PowerQueue", "ReconcileQueue"])
        allowed = [c["LogicalResourceId"] for c in stacks.destructive(changes, {"Table", "PowerQueue"})]
        self.assertEqual(allowed, ["ReconcileQueue"])
        self.assertEqual(stacks.said(changes[0]), "  Modify Table (AWS::DynamoDB::Table), replacement: True")

    def test_a_stack_with_provisioned_capacity_scales_each_of_its_four_capacities(self):
        # A stack of its own: the emulator's CloudFormation cannot change a table's billing in an update.
        stack = f"{STACK}-provisioned"
        self.deploy("TableCapacity=provisioned ProvisionedMinCapacity=7 ProvisionedIndexMinCapacity=2 "
                    "ProvisionedTargetUtilization=85", stack=stack)
        outputs = self.outputs(stack)
        # The table and its index are created at DynamoDB's least capacity; on AWS, registering auto scaling brings
        # each to ProvisionedMinCapacity.
        table = self.dynamodb.describe_table(TableName=outputs["TableName"])["Table"]
        self.assertEqual(table["BillingModeSummary"]["BillingMode"], "PROVISIONED")
        least = {"ReadCapacityUnits": 1, "WriteCapacityUnits": 1}
        self.assertEqual({k: table["ProvisionedThroughput"][k] for k in least}, least)
        index = {i["IndexName"]: i for i in table["GlobalSecondaryIndexes"]}["pools"]
        self.assertEqual({k: index["ProvisionedThroughput"][k] for k in least}, least)
        # Auto scaling, which the emulator skips: each of the four capacities between the bounds (the pools index,
        # which holds the pool items alone, from a least of its own: 1 unless told), at the use the stack sets (70 %
        # unless told, from 20 % to 90 %, as target tracking allows for DynamoDB).
        resources = self.template["Resources"]
        targets = {k: v["Properties"] for k, v in resources.items()
                   if v["Type"] == "AWS::ApplicationAutoScaling::ScalableTarget"}
        self.assertEqual(
            {(t["ResourceId"]["Fn::Sub"], t["ScalableDimension"]) for t in targets.values()},
            {(f"table/${{Table}}{on}", f"dynamodb:{kind}:{rw}CapacityUnits")
             for on, kind in (("", "table"), ("/index/pools", "index")) for rw in ("Read", "Write")})
        for name, t in targets.items():
            on_index = "/index/" in t["ResourceId"]["Fn::Sub"]
            least = "ProvisionedIndexMinCapacity" if on_index else "ProvisionedMinCapacity"
            self.assertEqual((t["MinCapacity"], t["MaxCapacity"]),
                             ({"Ref": least}, {"Ref": "ProvisionedMaxCapacity"}), name)
            self.assertEqual(resources[name]["Condition"], "Provisioned", name)
        policies = [v["Properties"] for v in resources.values()
                    if v["Type"] == "AWS::ApplicationAutoScaling::ScalingPolicy"]
        self.assertEqual(sorted(p["ScalingTargetId"]["Ref"] for p in policies), sorted(targets))
        for p in policies:
            tracking = p["TargetTrackingScalingPolicyConfiguration"]
            dimension = targets[p["ScalingTargetId"]["Ref"]]["ScalableDimension"]
            rw = "Read" if "Read" in dimension else "Write"
            self.assertEqual(tracking["PredefinedMetricSpecification"]["PredefinedMetricType"],
                             f"DynamoDB{rw}CapacityUtilization")
            self.assertEqual(tracking["TargetValue"], {"Ref": "ProvisionedTargetUtilization"})
        target = self.template["Parameters"]["ProvisionedTargetUtilization"]
        self.assertEqual((target["Default"], target["MinValue"], target["MaxValue"]), (70, 20, 90))
        index = self.template["Parameters"]["ProvisionedIndexMinCapacity"]
        self.assertEqual((index["Default"], index["MinValue"]), (1, 1))

    def test_a_stack_with_a_function_url_serves_the_claim_api_there_and_has_no_api_gateway(self):
        # A stack of its own: changing the endpoint changes the API's URL, which the first test's stack keeps.
        stack = f"{STACK}-url"
        self.deploy("ClaimEndpoint=function-url", stack=stack)
        outputs = self.outputs(stack)
        config = self.awslambda.get_function_url_config(FunctionName=f"{stack}-claim-api")
        self.assertEqual(outputs["ApiUrl"], config["FunctionUrl"])
        self.assertRegex(outputs["ApiUrl"], r"^https://[0-9a-z]{32}\.lambda-url\.us-east-1\.on\.aws/$")
        # Signed requests only (SigV4, service lambda), whole answers (the claim API's are JSON of a few KB).
        self.assertEqual((config["AuthType"], config["InvokeMode"]), ("AWS_IAM", "BUFFERED"))
        created, _ = self.resources(stack)
        off = (OFF_BY_DEFAULT - {"ClaimApiUrl"}) | API_GATEWAY
        self.assertEqual(set(created), self.declared(NOT_EMULATED, off=off))
        for name in API_GATEWAY:
            self.assertEqual(self.template["Resources"][name]["Condition"], "ApiGateway", name)
        # The power function never calls the API: its host is the URL's. The claim API cannot be told its own URL
        # (the URL is made from the function); it refuses the host each request came to instead.
        host = outputs["ApiUrl"].split("/")[2]
        self.assertEqual(self.function("power", stack)["Environment"]["Variables"]["APIARY_API_HOST"], host)
        self.assertEqual(self.function("claim-api", stack)["Environment"]["Variables"]["APIARY_API_HOST"], "")

    def test_admin_principals_that_name_no_one_are_refused_before_anything_is_deployed(self):
        out = subprocess.run(
            ["make", "--no-print-directory", "deploy", "STACK=apiary-bad-admins", f"REGION={REGION}",
             f"BUCKET={BUCKET}", "PARAMS=AdminPrincipals=arn:aws:iam::111122223333:role/platform-admin,platform-admin"],
            cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=600,
        )
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("parameter AdminPrincipals=", out.stderr)
        self.assertIn("must be a principal pattern", out.stderr)
        self.assertIsNone(stacks.find(self.cfn, "apiary-bad-admins"))

    def test_queue_visibility_is_at_least_six_times_each_consumers_timeout(self):
        resources = self.template["Resources"]
        default = int(self.template["Parameters"]["QueueVisibilitySeconds"]["Default"])
        for name, r in resources.items():
            if r["Type"] != "AWS::Lambda::EventSourceMapping":
                continue
            function = resources[r["Properties"]["FunctionName"]["Ref"]]
            timeout = int(function["Properties"]["Timeout"])
            self.assertGreaterEqual(default, 6 * timeout, name)
            self.assertLessEqual(int(r["Properties"]["BatchSize"]), 10, name)

    def test_the_alarms_fire_only_on_values_the_functions_publish(self):
        # At Monitoring=alarms the functions publish an alarmed value only when some alarm the template allows could
        # fire on it (apiary_ports::metrics::could_alarm): at least one broken cluster or orphan, a claim waiting
        # over PENDING_ALARM_FLOOR_SECONDS. Each alarm must fire only above those floors and read missing data as
        # not breaching, or leaving the values out would change it.
        with open(os.path.join(ROOT, "shared", "ports", "src", "metrics.rs")) as f:
            floor = float(re.search(r"PENDING_ALARM_FLOOR_SECONDS: f64 = ([0-9.]+);", f.read()).group(1))
        params, resources = self.template["Parameters"], self.template["Resources"]
        self.assertGreaterEqual(int(params["PendingClaimAlarmSeconds"]["MinValue"]), floor)
        self.assertGreaterEqual(int(params["BrokenClustersAlarmThreshold"]["MinValue"]), 1)
        custom = {r["Properties"]["MetricName"]: r["Properties"] for r in resources.values()
                  if r["Type"] == "AWS::CloudWatch::Alarm" and r["Properties"]["Namespace"] == "Apiary"}
        self.assertEqual(set(custom), {"ClustersBroken", "OldestPendingClaimSeconds", "OrphansFound"})
        for name, alarm in custom.items():
            self.assertEqual(alarm["TreatMissingData"], "notBreaching", name)
        self.assertEqual(custom["OldestPendingClaimSeconds"]["ComparisonOperator"], "GreaterThanThreshold")
        self.assertEqual(custom["OldestPendingClaimSeconds"]["Threshold"], {"Ref": "PendingClaimAlarmSeconds"})
        self.assertEqual(custom["ClustersBroken"]["Threshold"], {"Ref": "BrokenClustersAlarmThreshold"})
        self.assertEqual(custom["OrphansFound"]["Threshold"], 1)
        for name in ("ClustersBroken", "OrphansFound"):
            self.assertEqual(custom[name]["ComparisonOperator"], "GreaterThanOrEqualToThreshold", name)

    def statements(self, role):
        """Every statement of the role's policies, a conditional one (Fn::If) as granted when it holds."""
        policies = self.template["Resources"][role]["Properties"]["Policies"]
        out = []
        for p in policies:
            for st in p["PolicyDocument"]["Statement"]:
                out.append(st["Fn::If"][1] if "Fn::If" in st else st)
        return out

    def test_each_function_role_grants_only_what_that_function_calls(self):
        roles = {"ClaimApiRole", "ReconcileRole", "PowerRole", "TimeoutsRole"}
        for name, r in self.template["Resources"].items():
            if r["Type"] == "AWS::Lambda::Function":
                self.assertIn(r["Properties"]["Role"]["Fn::GetAtt"][0], roles, name)
            if r["Type"] == "AWS::IAM::Role":
                self.assertNotIn("ManagedPolicyArns", r["Properties"], f"{name}: only inline, scoped policies")
        actions = {}
        for role in roles:
            for st in self.statements(role):
                self.assertEqual(st["Effect"], "Allow")
                for a in [st["Action"]] if isinstance(st["Action"], str) else st["Action"]:
                    self.assertNotIn("*", a, f"{role}: {a}")
                    actions.setdefault(a.split(":")[0], set()).add(role)
        self.assertEqual(actions["ec2"], {"PowerRole"}, "only the power function touches EC2")
        self.assertEqual(actions["scheduler"], {"ClaimApiRole"}, "only the claim API manages schedules")
        self.assertEqual(actions["iam"], {"ClaimApiRole"})
        # Every EC2 action that changes an instance is conditioned on Apiary's tag (or, for CreateTags, on being
        # part of RunInstances); RunInstances on the instance itself requires the tags in the request.
        for st in self.statements("PowerRole"):
            acts = [st["Action"]] if isinstance(st["Action"], str) else st["Action"]
            if not any(a.startswith("ec2:") for a in acts) or all(a.startswith("ec2:Describe") for a in acts):
                continue
            if set(acts) <= VPC_ACTIONS:
                # Lambda's own network interfaces, granted only when the function runs in a VPC (PowerInVpc).
                self.assertNotIn("instance/*", str(st["Resource"]), acts)
                continue
            on_instances = "instance/*" in str(st["Resource"])
            if on_instances:
                cond = str(st.get("Condition"))
                self.assertTrue("apiary:pool" in cond or "ec2:CreateAction" in cond, f"unconditioned: {acts}")
            else:
                self.assertEqual(acts, ["ec2:RunInstances"], "only RunInstances reaches images, subnets, volumes...")
            self.assertNotEqual(st["Resource"], "*", acts)
        # Those statements exist only under the condition that puts the function in a VPC.
        conditional = [
            st["Fn::If"][0]
            for p in self.template["Resources"]["PowerRole"]["Properties"]["Policies"]
            for st in p["PolicyDocument"]["Statement"]
            if "Fn::If" in st
        ]
        self.assertEqual(set(conditional), {"PowerInVpc"})
        vpc = self.template["Resources"]["PowerFunction"]["Properties"]["VpcConfig"]
        self.assertEqual(vpc["Fn::If"][0], "PowerInVpc")

    def test_only_the_power_role_and_the_claim_api_read_secrets_and_only_those_tagged_for_apiarys_pools(self):
        roles = ["ClaimApiRole", "ReconcileRole", "PowerRole", "TimeoutsRole"]
        reading = [
            (role, st) for role in roles for st in self.statements(role)
            if any(a.startswith("secretsmanager:") for a in ([st["Action"]] if isinstance(st["Action"], str)
                                                             else st["Action"]))
        ]
        # The power function reads the clouds' credentials; the claim API a claimed cluster's, for its claimants.
        self.assertEqual([role for role, _ in reading], ["ClaimApiRole", "PowerRole"])
        for _, st in reading:
            self.assertEqual(sorted(st["Action"]), ["secretsmanager:DescribeSecret", "secretsmanager:GetSecretValue"])
            self.assertEqual(st["Condition"]["StringEquals"], {"secretsmanager:ResourceTag/apiary": "true"})
            # The tag naming the pools that may use a secret must be there; the function checks it names the pool.
            self.assertEqual(st["Condition"]["Null"], {"secretsmanager:ResourceTag/apiary:pools": "false"})

    def test_only_the_power_role_assumes_roles_and_only_the_stacks_member_roles(self):
        for role in ["ClaimApiRole", "ReconcileRole", "PowerRole", "TimeoutsRole"]:
            self.assertNotIn("sts:", str(self.statements(role)), role)
        policies = {k: r for k, r in self.template["Resources"].items() if r["Type"] == "AWS::IAM::Policy"}
        self.assertEqual(list(policies), ["PowerMemberRolesPolicy"], "the only policy outside a role's own")
        props = policies["PowerMemberRolesPolicy"]["Properties"]
        self.assertEqual(props["Roles"], [{"Ref": "PowerRole"}])
        [statement] = props["PolicyDocument"]["Statement"]
        condition, allow, otherwise = statement["Fn::If"]
        self.assertEqual(condition, "HasMemberAccounts")
        self.assertEqual((allow["Effect"], allow["Action"]), ("Allow", "sts:AssumeRole"))
        self.assertIn("${MemberRoleNamePattern}", str(allow["Resource"]))
        self.assertEqual(allow["Condition"], {"StringEquals": {"aws:ResourceAccount": {"Ref": "MemberAccountIds"}}})
        self.assertEqual(otherwise, {"Sid": "PowerNoMemberRoles", "Effect": "Deny", "Action": "sts:AssumeRole",
                                     "Resource": "*"}, "no member accounts: no role may be assumed")

    def test_a_member_accounts_role_trusts_only_the_power_role_with_its_pools_external_ids(self):
        role = template("member-account.yaml")["Resources"]["MemberRole"]["Properties"]
        trust = role["AssumeRolePolicyDocument"]["Statement"]
        self.assertEqual(len(trust), 1)
        self.assertEqual(trust[0]["Principal"], {"AWS": {"Ref": "ApiaryPowerRoleArn"}})
        self.assertEqual(trust[0]["Condition"], {"StringEquals": {"sts:ExternalId": {"Ref": "ExternalIds"}}})
        for p in role["Policies"]:
            for st in p["PolicyDocument"]["Statement"]:
                acts = [st["Action"]] if isinstance(st["Action"], str) else st["Action"]
                self.assertTrue(all(a.startswith("ec2:") for a in acts), acts)
                if all(a.startswith("ec2:Describe") for a in acts):
                    continue
                cond = str(st.get("Condition"))
                if "instance/*" in str(st["Resource"]):
                    self.assertTrue("apiary:pool" in cond or "ec2:CreateAction" in cond, f"unconditioned: {acts}")
                else:
                    self.assertEqual(acts, ["ec2:RunInstances"], acts)


if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False, verbosity=2).result.wasSuccessful() else 1)

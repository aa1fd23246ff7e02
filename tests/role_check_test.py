"""infra/role_check.py on its own: requests mapped to the asks AWS makes, and asks judged as IAM judges them. It must
refuse what a policy lacks, or the emulator's enforcement proves nothing.

Run by `make emulator-test`.
"""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "infra"))
import role_check  # noqa: E402
from role_check import Ask, Request, asks, evaluate  # noqa: E402

ACCOUNT, REGION = "123456789012", "us-east-1"
TABLE = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/t"


class Lookup:
    """The emulator's state, as a test gives it."""

    @staticmethod
    def hash_key(account, region, table, index=None):
        return {None: "pk", "pools": "gpk"}[index]

    @staticmethod
    def instance_tags(account, region, instance):
        return {"i-tagged": {"apiary:pool": "p"}}.get(instance, {})

    @staticmethod
    def secret(account, region, secret_id):
        return f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:{secret_id}-AbCdEf", {"apiary": "true"}

    @staticmethod
    def s3_object(account, bucket, key):
        return {"clusters/a/kept": (True, "k-1"), "clusters/a/plain": (True, None)}.get(key, (False, None))

    @staticmethod
    def s3_bucket_encryption(account, bucket):
        return ("aws:kms", f"arn:aws:kms:{REGION}:{ACCOUNT}:key/k-default")


def dynamo(op, body):
    return Request("dynamodb", "POST", "/", {}, {"x-amz-target": f"DynamoDB_20120810.{op}"},
                   json.dumps(body).encode(), ACCOUNT, REGION)


def ec2(params):
    body = "&".join(f"{k}={v}" for k, v in params.items()).encode()
    return Request("ec2", "POST", "/", {}, {}, body, ACCOUNT, REGION)


def s3(method, path, query=None, headers=None, body=b""):
    return Request("s3", method, path, query or {}, headers or {}, body, ACCOUNT, REGION)


def policy(*statements):
    return [("p", {"Version": "2012-10-17", "Statement": list(statements)})]


class Asks(unittest.TestCase):
    def test_a_transaction_asks_once_per_item_with_its_own_action(self):
        req = dynamo("TransactWriteItems", {"TransactItems": [
            {"Put": {"TableName": "t", "Item": {"pk": {"S": "POOL#a"}, "sk": {"S": "x"}}}},
            {"ConditionCheck": {"TableName": "t", "Key": {"pk": {"S": "POOL#a"}, "sk": {"S": "POOL"}}}},
            {"Delete": {"TableName": "t", "Key": {"pk": {"S": "POOL#a"}, "sk": {"S": "y"}}}},
        ]})
        got = [(a.action, a.resource, a.context) for a in asks(req, Lookup)]
        lead = {"dynamodb:LeadingKeys": ["POOL#a"]}
        self.assertEqual(got, [("dynamodb:PutItem", TABLE, lead), ("dynamodb:ConditionCheckItem", TABLE, lead),
                               ("dynamodb:DeleteItem", TABLE, lead)])

    def test_a_query_of_an_index_asks_for_the_index(self):
        req = dynamo("Query", {"TableName": "t", "IndexName": "pools", "KeyConditionExpression": "#k = :v",
                               "ExpressionAttributeNames": {"#k": "gpk"},
                               "ExpressionAttributeValues": {":v": {"S": "POOLS"}}})
        (ask,) = asks(req, Lookup)
        self.assertEqual((ask.action, ask.resource), ("dynamodb:Query", TABLE + "/index/pools"))
        self.assertEqual(ask.context, {"dynamodb:LeadingKeys": ["POOLS"]})

    def test_a_launch_with_tags_asks_for_each_resource_and_the_tags(self):
        req = ec2({"Action": "RunInstances", "ImageId": "ami-1", "TagSpecification.1.ResourceType": "instance",
                   "TagSpecification.1.Tag.1.Key": "apiary:pool", "TagSpecification.1.Tag.1.Value": "p"})
        got = asks(req, Lookup)
        self.assertIn("arn:aws:ec2:us-east-1::image/ami-1", [a.resource for a in got])
        tagging = [a for a in got if a.action == "ec2:CreateTags"]
        self.assertEqual(tagging[0].context["ec2:CreateAction"], "RunInstances")
        self.assertEqual(got[0].context["aws:RequestTag/apiary:pool"], "p")

    def test_an_unknown_operation_is_refused_not_passed(self):
        with self.assertRaises(role_check.Unknown):
            asks(dynamo("Scan2", {"TableName": "t"}), Lookup)
        with self.assertRaises(role_check.Unknown):
            asks(Request("lambda", "POST", "/", {}, {}, b"", ACCOUNT, REGION), Lookup)


    def test_s3_asks_for_the_object_and_for_the_key_s3_uses_as_the_caller(self):
        key = lambda k: f"arn:aws:kms:{REGION}:{ACCOUNT}:key/{k}"  # noqa: E731
        got = lambda req: [(a.action, a.resource) for a in asks(req, Lookup)]  # noqa: E731
        self.assertEqual(got(s3("GET", "/b/clusters/a/kept", {"x-id": ["GetObject"]})),
                         [("s3:GetObject", "arn:aws:s3:::b/clusters/a/kept"), ("kms:Decrypt", key("k-1"))])
        self.assertEqual(got(s3("GET", "/b/clusters/a/plain")), [("s3:GetObject", "arn:aws:s3:::b/clusters/a/plain")])
        # A missing object is a 404 only for a caller who may list the bucket.
        self.assertEqual(got(s3("HEAD", "/b/clusters/a/gone")),
                         [("s3:GetObject", "arn:aws:s3:::b/clusters/a/gone"), ("s3:ListBucket", "arn:aws:s3:::b")])
        put = s3("PUT", "/b/clusters/a/new", {}, {"x-amz-server-side-encryption": "aws:kms",
                                                  "x-amz-server-side-encryption-aws-kms-key-id": key("k-2")})
        self.assertEqual(got(put), [("s3:PutObject", "arn:aws:s3:::b/clusters/a/new"), ("kms:GenerateDataKey", key("k-2"))])
        self.assertEqual(got(s3("PUT", "/b/clusters/a/new"))[1], ("kms:GenerateDataKey", key("k-default")),
                         "the bucket's default key")
        listing = asks(s3("GET", "/b", {"list-type": ["2"], "prefix": ["clusters/a/"]}), Lookup)
        self.assertEqual([(a.action, a.context) for a in listing], [("s3:ListBucket", {"s3:prefix": "clusters/a/"})])
        delete = s3("POST", "/b", {"delete": [""]}, {}, b"<Delete><Object><Key>clusters/a/x</Key></Object>"
                                                     b"<Object><Key>pools/p.json</Key></Object></Delete>")
        self.assertEqual(got(delete), [("s3:DeleteObject", "arn:aws:s3:::b/clusters/a/x"),
                                       ("s3:DeleteObject", "arn:aws:s3:::b/pools/p.json")])
        with self.assertRaises(role_check.Unknown):
            asks(s3("PUT", "/b", {"policy": [""]}), Lookup)

    def test_codebuild_asks_for_the_builds_project_and_a_tagged_secret_for_its_tags(self):
        build = Request("codebuild", "POST", "/", {}, {"x-amz-target": "CodeBuild_20161006.BatchGetBuilds"},
                        b'{"ids": ["jobs:1", "jobs:2"]}', ACCOUNT, REGION)
        self.assertEqual([(a.action, a.resource) for a in asks(build, Lookup)],
                         [("codebuild:BatchGetBuilds", f"arn:aws:codebuild:{REGION}:{ACCOUNT}:project/jobs")])
        create = Request("secretsmanager", "POST", "/", {}, {"x-amz-target": "secretsmanager.CreateSecret"},
                         b'{"Name": "apiary-installer/p/c/kubeconfig", "Tags": [{"Key": "apiary", "Value": "true"}]}',
                         ACCOUNT, REGION)
        got = asks(create, Lookup)
        self.assertEqual([a.action for a in got], ["secretsmanager:CreateSecret", "secretsmanager:TagResource"])
        self.assertEqual(got[0].context, {"aws:RequestTag/apiary": "true", "aws:TagKeys": ["apiary"]})


class Evaluate(unittest.TestCase):
    def test_a_call_its_policy_lacks_is_refused_naming_what_it_lacks(self):
        roles = policy({"Sid": "Rw", "Effect": "Allow", "Action": ["dynamodb:PutItem"], "Resource": TABLE})
        allowed, by, why = evaluate(roles, Ask("dynamodb:ConditionCheckItem", TABLE))
        self.assertFalse(allowed)
        self.assertIn('"Action": "dynamodb:ConditionCheckItem"', why)
        self.assertEqual(evaluate(roles, Ask("dynamodb:PutItem", TABLE))[:2], (True, ["p/Rw"]))

    def test_the_resource_must_match(self):
        roles = policy({"Sid": "Q", "Effect": "Allow", "Action": "sqs:SendMessage",
                        "Resource": f"arn:aws:sqs:{REGION}:{ACCOUNT}:reconcile"})
        allowed, _, why = evaluate(roles, Ask("sqs:SendMessage", f"arn:aws:sqs:{REGION}:{ACCOUNT}:power"))
        self.assertFalse(allowed)
        self.assertIn("p/Q", why)  # the statement that allows the action elsewhere

    def test_conditions_are_held(self):
        leading = policy({"Sid": "S", "Effect": "Allow", "Action": "dynamodb:GetItem", "Resource": TABLE,
                          "Condition": {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": ["SWEEP"]}}})
        self.assertTrue(evaluate(leading, Ask("dynamodb:GetItem", TABLE, {"dynamodb:LeadingKeys": ["SWEEP"]}))[0])
        self.assertFalse(evaluate(leading, Ask("dynamodb:GetItem", TABLE, {"dynamodb:LeadingKeys": ["POOL#a"]}))[0])
        tagged = policy({"Sid": "T", "Effect": "Allow", "Action": "ec2:StopInstances", "Resource": "*",
                         "Condition": {"Null": {"aws:ResourceTag/apiary:pool": "false"}}})
        stop = lambda i: asks(ec2({"Action": "StopInstances", "InstanceId.1": i}), Lookup)[0]  # noqa: E731
        self.assertTrue(evaluate(tagged, stop("i-tagged"))[0])
        self.assertFalse(evaluate(tagged, stop("i-other"))[0])
        passing = policy({"Sid": "P", "Effect": "Allow", "Action": "iam:PassRole", "Resource": "*",
                          "Condition": {"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}}})
        self.assertTrue(evaluate(passing, Ask("iam:PassRole", "r", {"iam:PassedToService": "scheduler.amazonaws.com"}))[0])
        self.assertFalse(evaluate(passing, Ask("iam:PassRole", "r", {"iam:PassedToService": "ec2.amazonaws.com"}))[0])

    def test_an_explicit_deny_wins(self):
        roles = policy({"Sid": "A", "Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*"},
                       {"Sid": "D", "Effect": "Deny", "Action": "sts:AssumeRole", "Resource": "*"})
        allowed, _, why = evaluate(roles, Ask("sts:AssumeRole", "arn:aws:iam::1:role/r"))
        self.assertFalse(allowed)
        self.assertIn("p/D", why)


class Check(unittest.TestCase):
    def test_a_refused_call_and_an_unneeded_statement_fail_the_check(self):
        with tempfile.TemporaryDirectory() as d:
            log, template = os.path.join(d, "calls.jsonl"), os.path.join(d, "t.yaml")
            with open(log, "w") as f:
                f.write(json.dumps({"function": "reconcile", "role": "r", "call": "dynamodb:TransactWriteItems",
                                    "ask": "dynamodb:ConditionCheckItem on t", "allowed": False, "why": "lacks"}) + "\n")
                f.write(json.dumps({"function": "reconcile", "role": "r", "call": "c", "ask": "a", "allowed": True,
                                    "by": ["reconcile/Used"]}) + "\n")
            with open(template, "w") as f:
                f.write("Resources:\n  R:\n    Properties:\n      - Sid: Used\n      - Sid: Spare\n"
                        "      # Unrecorded: the runtime writes logs, not the function.\n      - Sid: Logs\n")
            problems = role_check.check([log], [template])
        self.assertEqual(len(problems), 2, problems)
        self.assertIn("reconcile: dynamodb:TransactWriteItems was refused", problems[0])
        self.assertIn("statement Spare", problems[1])


if __name__ == "__main__":
    unittest.main()

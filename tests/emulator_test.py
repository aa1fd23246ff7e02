"""The local emulator's own promises (infra/emulator.py), through boto3 as any client sees them: a cancelled
DynamoDB transaction leaves every item as it was, with the emulator's lighter transaction backup in place, and
a Query of a local index, which the emulator hands only the queried partition, answers as DynamoDB does; and
every DynamoDB answer the emulator writes itself is the document moto as released writes.

A connection carries one request after another (werkzeug would end it after one answer).

The SQS sends, which read only the attribute they need here, are refused, deduplicated and received as moto as
released does.

STS's checks of a role (which moto as released skips): a role that does not exist, or whose trust policy requires
another ExternalId, is AccessDenied; the credentials of a role assumed are another account's, whose instances the
home account does not see.

CloudFormation updates a table in place, as it does on AWS: an update that turns deletion protection on or adds a
global index keeps the table, its items and the stack's references to it (moto as released drops the resource
from the stack, and every output that names it).

Run by `make test` (`make emulator-test`); needs only the project virtualenv.
"""
import http.client
import json
import unittest
import urllib.error
import urllib.request

import boto3

import local_emulator


def key(sk):
    return {"PK": {"S": "p"}, "SK": {"S": sk}}


class EmulatorCase(unittest.TestCase):
    """An emulator of the class's own, with a table `t` keyed by PK and SK (and `indexes`)."""

    name = "emulator"
    indexes = []

    @classmethod
    def setUpClass(cls):
        cls.emulator, endpoint, cls.log = local_emulator.start(cls.name)
        cls.db = boto3.client(
            "dynamodb", endpoint_url=endpoint, region_name="us-east-1",
            aws_access_key_id="test", aws_secret_access_key="test",
        )
        index_keys = {k["AttributeName"] for i in cls.indexes for k in i["KeySchema"] if k["KeyType"] == "RANGE"}
        sort_keys = {"SK"} | index_keys
        cls.db.create_table(
            TableName="t", BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
            AttributeDefinitions=[{"AttributeName": n, "AttributeType": "S"} for n in ["PK", *sorted(sort_keys)]],
            **({"LocalSecondaryIndexes": cls.indexes} if cls.indexes else {}),
        )

    @classmethod
    def tearDownClass(cls):
        cls.emulator.terminate()
        cls.emulator.wait()


class TransactionTest(EmulatorCase):
    name = "transactions"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        for i in range(50):
            cls.db.put_item(TableName="t", Item={**key(f"c{i:02}"), "n": {"N": str(i)}, "m": {"M": {"k": {"S": "v"}}}})

    def get(self, sk):
        return self.db.get_item(TableName="t", Key=key(sk), ConsistentRead=True).get("Item")

    def transact(self, new, gone, check, n=None, update=False):
        items = [
            {"Put": {"TableName": "t", "Item": {**key(new), "n": {"N": "1"}},
                     "ConditionExpression": "attribute_not_exists(PK)"}},
            {"Delete": {"TableName": "t", "Key": key(gone)}},
            {"ConditionCheck": {"TableName": "t", "Key": key(check), "ConditionExpression": "n = :v",
                                "ExpressionAttributeValues": {":v": {"N": str(n)}}}},
        ]
        if update:
            items.insert(0, {"Update": {"TableName": "t", "Key": key("c49"), "UpdateExpression": "SET n = :n",
                                        "ExpressionAttributeValues": {":n": {"N": "999"}}}})
        self.db.transact_write_items(TransactItems=items)

    def test_a_cancelled_transaction_changes_nothing(self):
        for update in (False, True):
            with self.assertRaises(self.db.exceptions.TransactionCanceledException) as e:
                self.transact("new", "c01", "c00", n=9, update=update)
            codes = [r["Code"] for r in e.exception.response["CancellationReasons"]]
            self.assertEqual(codes[-1], "ConditionalCheckFailed")
            self.assertIsNone(self.get("new"), "the Put was undone")
            self.assertIsNotNone(self.get("c01"), "the Delete was undone")
            self.assertEqual(self.get("c49")["n"], {"N": "49"}, "the Update was undone")
        count = self.db.query(TableName="t", ConsistentRead=True, Select="COUNT",
                              KeyConditionExpression="PK = :p", ExpressionAttributeValues={":p": {"S": "p"}})
        self.assertEqual(count["Count"], 50)

    def test_a_transaction_whose_conditions_hold_writes_everything(self):
        self.transact("kept", "c02", "c03", n=3)
        self.assertEqual(self.get("kept")["n"], {"N": "1"})
        self.assertIsNone(self.get("c02"))
        # And a later cancelled one restores the state after it, not an older one.
        with self.assertRaises(self.db.exceptions.TransactionCanceledException):
            self.transact("other", "c04", "c03", n=9)
        self.assertIsNotNone(self.get("kept"))
        self.assertIsNone(self.get("c02"))
        self.assertIsNotNone(self.get("c04"))


class LocalIndexTest(EmulatorCase):
    """Three partitions; in each, every other item carries the index's sort key `assign`."""

    name = "index"
    indexes = [{
        "IndexName": "assign",
        "KeySchema": [{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "assign", "KeyType": "RANGE"}],
        "Projection": {"ProjectionType": "KEYS_ONLY"},
    }]

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.assigned = {}
        for p in ("a", "b", "c"):
            for i in range(40):
                item = {"PK": {"S": p}, "SK": {"S": f"k{i:02}"}, "n": {"N": str(i)}}
                if i % 2 == 0:
                    # Sort keys in another order than the items': the index orders by them.
                    item["assign"] = {"S": f"{'P' if i % 8 == 0 else 'S'}#{(i * 7) % 40:02}#{i}"}
                    cls.assigned.setdefault(p, []).append((item["assign"]["S"], item["SK"]["S"]))
                cls.db.put_item(TableName="t", Item=item)

    def query(self, partition, low=None, high=None, forward=True, limit=None):
        """Every page of one query, as (assign, SK) pairs, and how many pages it took."""
        condition, values = "PK = :p", {":p": {"S": partition}}
        if low is not None:
            condition += " AND assign BETWEEN :low AND :high"
            values.update({":low": {"S": low}, ":high": {"S": high}})
        args = dict(TableName="t", IndexName="assign", ConsistentRead=True, KeyConditionExpression=condition,
                    ExpressionAttributeValues=values, ScanIndexForward=forward)
        if limit:
            args["Limit"] = limit
        found, pages, start = [], 0, None
        while True:
            page = self.db.query(**args, **({"ExclusiveStartKey": start} if start else {}))
            pages += 1
            self.assertEqual(page["Count"], len(page["Items"]))
            for item in page["Items"]:
                self.assertEqual(set(item), {"PK", "SK", "assign"}, "keys only")
                self.assertEqual(item["PK"]["S"], partition)
                found.append((item["assign"]["S"], item["SK"]["S"]))
            start = page.get("LastEvaluatedKey")
            if not start:
                return found, pages

    def test_a_query_of_the_index_answers_from_its_partition_in_the_index_order(self):
        for p in ("a", "b", "c"):
            every = sorted(self.assigned[p])
            self.assertEqual(self.query(p)[0], every)
            self.assertEqual(self.query(p, forward=False)[0], every[::-1])
            spares = [e for e in every if "S#10" <= e[0] <= "S#~"]
            self.assertEqual(self.query(p, "S#10", "S#~")[0], spares)
            pending = [e for e in every if "P#" <= e[0] <= "P#~"]
            self.assertEqual(self.query(p, "P#", "P#~")[0], pending)
            paged, pages = self.query(p, "S#10", "S#~", limit=3)
            self.assertEqual(paged, spares)
            self.assertGreaterEqual(pages, -(-len(spares) // 3), "three to a page")
        self.assertEqual(self.query("none")[0], [])


def call(endpoint, action, body):
    """One DynamoDB request as the SDKs send it: the status, the content type and the parsed answer."""
    request = urllib.request.Request(endpoint, data=json.dumps(body).encode(), headers={
        "X-Amz-Target": f"DynamoDB_20120810.{action}", "Content-Type": "application/x-amz-json-1.0",
        "Authorization": "AWS4-HMAC-SHA256 Credential=test/20261125/us-east-1/dynamodb/aws4_request, "
                         "SignedHeaders=host, Signature=0",
    })
    try:
        with urllib.request.urlopen(request) as answer:
            return answer.status, answer.headers["Content-Type"], json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], json.loads(e.read())


def unordered_sets(value):
    """`value` with its sets' members sorted: a set has no order (moto writes one projected out of an item in
    Python's own set order, which differs from one process to the next)."""
    if isinstance(value, dict):
        return {k: sorted(v) if k in ("SS", "NS", "BS") else unordered_sets(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(unordered_sets(v) for v in value)
    return value


class AnswersTest(unittest.TestCase):
    """The same requests to this emulator and to moto as released get the same answers."""

    @classmethod
    def setUpClass(cls):
        cls.ours, ours, cls.log = local_emulator.start("answers")
        cls.released, released, cls.released_log = local_emulator.start("released", "--as-released")
        cls.endpoints = (ours, released)

    @classmethod
    def tearDownClass(cls):
        for process in (cls.ours, cls.released):
            process.terminate()
            process.wait()

    def both(self, action, body):
        ours, released = (call(endpoint, action, body) for endpoint in self.endpoints)
        self.maxDiff = None
        self.assertEqual(unordered_sets(ours), unordered_sets(released), f"{action} {body}")
        return ours

    def test_every_answer_is_the_document_moto_writes(self):
        t = {"TableName": "t"}
        for endpoint in self.endpoints:
            call(endpoint, "CreateTable", {
                **t, "BillingMode": "PAY_PER_REQUEST",
                "KeySchema": [{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
                "AttributeDefinitions": [{"AttributeName": n, "AttributeType": "S"} for n in ("PK", "SK", "assign")],
                "LocalSecondaryIndexes": [{
                    "IndexName": "assign", "Projection": {"ProjectionType": "KEYS_ONLY"},
                    "KeySchema": [{"AttributeName": "PK", "KeyType": "HASH"},
                                  {"AttributeName": "assign", "KeyType": "RANGE"}],
                }],
            })
        for i in range(12):
            item = {"PK": {"S": "p"}, "SK": {"S": f"k{i:02}"}, "n": {"N": str(i * 1.5)}, "ok": {"BOOL": i % 2 == 0},
                    "none": {"NULL": True}, "tags": {"SS": ["a", f"b{i}"]}, "nums": {"NS": ["1", str(i + 2)]},
                    "m": {"M": {"deep": {"M": {"x": {"L": [{"S": "y"}, {"N": "3"}, {"M": {}}]}}}, "e": {"S": ""}}}}
            if i % 3:
                item["assign"] = {"S": f"S#{(i * 5) % 12:02}"}
            self.both("PutItem", {**t, "Item": item, "ReturnValues": "ALL_OLD"})
        for i in range(6):
            # Another partition, sorting before and after the first: a Query of one is handed only its own.
            for partition in ("a", "z"):
                self.both("PutItem", {**t, "Item": {"PK": {"S": partition}, "SK": {"S": f"k{i:02}"},
                                                    "assign": {"S": f"S#{i:02}"}, "n": {"N": str(i)}}})
        # A binary value: written by the shapes, in base64.
        self.both("PutItem", {**t, "Item": {"PK": {"S": "z"}, "SK": {"S": "bin"}, "b": {"B": "AAEC"},
                                            "bs": {"BS": ["AQ==", "Ag=="]}, "m": {"M": {"b": {"B": "Aw=="}}}}})
        self.both("GetItem", {**t, "Key": {"PK": {"S": "z"}, "SK": {"S": "bin"}}})
        self.both("Query", {**t, "KeyConditionExpression": "PK = :p", "ExpressionAttributeValues": {":p": {"S": "z"}}})
        described = [call(endpoint, "DescribeTable", t) for endpoint in self.endpoints]
        for status, _, answer in described:
            self.assertEqual(status, 200)
            answer["Table"].pop("CreationDateTime")  # when each emulator made its table
        self.assertEqual(*described)
        self.both("PutItem", {**t, "Item": {"PK": {"S": "p"}, "SK": {"S": "k00"}}, "ReturnValues": "ALL_OLD"})
        self.both("PutItem", {**t, "Item": {"PK": {"S": "p"}, "SK": {"S": "k01"}},
                              "ConditionExpression": "attribute_not_exists(PK)"})
        self.both("GetItem", {**t, "Key": {"PK": {"S": "p"}, "SK": {"S": "k05"}}, "ConsistentRead": True})
        self.both("GetItem", {**t, "Key": {"PK": {"S": "p"}, "SK": {"S": "none"}}})
        self.both("GetItem", {**t, "Key": {"PK": {"S": "p"}, "SK": {"S": "k05"}}, "ProjectionExpression": "m.deep, n"})
        everything = {**t, "KeyConditionExpression": "PK = :p", "ExpressionAttributeValues": {":p": {"S": "p"}}}
        self.both("Query", everything)
        self.both("Query", {**everything, "Limit": 5, "ScanIndexForward": False, "ReturnConsumedCapacity": "TOTAL"})
        page = self.both("Query", {**everything, "IndexName": "assign", "Limit": 3})[2]
        self.both("Query", {**everything, "IndexName": "assign", "ExclusiveStartKey": page["LastEvaluatedKey"]})
        page = self.both("Query", {**everything, "IndexName": "assign", "Limit": 2, "ScanIndexForward": False})[2]
        self.both("Query", {**everything, "IndexName": "assign", "Limit": 2, "ScanIndexForward": False,
                            "ExclusiveStartKey": page["LastEvaluatedKey"]})
        self.both("Query", {**everything, "IndexName": "assign", "Limit": 1, "ConsistentRead": True,
                            "KeyConditionExpression": "PK = :p AND begins_with(assign, :s)",
                            "ExpressionAttributeValues": {":p": {"S": "p"}, ":s": {"S": "S#0"}}})
        self.both("Query", {**t, "IndexName": "assign", "ConsistentRead": True,
                            "KeyConditionExpression": "PK = :p AND assign BETWEEN :a AND :b",
                            "ExpressionAttributeValues": {":p": {"S": "p"}, ":a": {"S": "S#04"}, ":b": {"S": "S#~"}}})
        self.both("Query", {**everything, "KeyConditionExpression": "PK = :p AND SK BETWEEN :a AND :b",
                            "ExpressionAttributeValues": {":p": {"S": "p"}, ":a": {"S": "k03"}, ":b": {"S": "k09"},
                                                          ":yes": {"BOOL": True}},
                            "FilterExpression": "ok = :yes", "ProjectionExpression": "SK, m.deep, tags",
                            "Limit": 4})
        self.both("Query", {**everything, "Select": "COUNT"})
        self.both("Query", {**everything, "ExpressionAttributeValues": {":p": {"S": "nothing"}}})
        self.both("Scan", {**t, "Limit": 4})
        self.both("BatchGetItem", {"RequestItems": {"t": {"Keys": [{"PK": {"S": "p"}, "SK": {"S": "k03"}}]}}})
        self.both("TransactWriteItems", {"TransactItems": [
            {"Delete": {**t, "Key": {"PK": {"S": "p"}, "SK": {"S": "k02"}}}},
            {"ConditionCheck": {**t, "Key": {"PK": {"S": "p"}, "SK": {"S": "k03"}},
                                "ConditionExpression": "ok = :no",
                                "ExpressionAttributeValues": {":no": {"BOOL": True}}}},
        ]})
        self.both("DeleteItem", {**t, "Key": {"PK": {"S": "p"}, "SK": {"S": "k04"}}, "ReturnValues": "ALL_OLD"})
        self.both("Query", everything)


class ConnectionTest(EmulatorCase):
    """A connection carries one request after another, as the SDKs send them; a body sent in chunks, which the
    emulator cannot know the end of beforehand, ends its connection."""

    name = "connections"

    def request(self, connection, body, chunked=False):
        headers = {
            "X-Amz-Target": "DynamoDB_20120810.GetItem", "Content-Type": "application/x-amz-json-1.0",
            "Authorization": "AWS4-HMAC-SHA256 Credential=test/20261125/us-east-1/dynamodb/aws4_request, "
                             "SignedHeaders=host, Signature=0",
        }
        data = json.dumps(body).encode()
        connection.request("POST", "/", body=iter([data]) if chunked else data, headers=headers,
                           encode_chunked=chunked)
        answer = connection.getresponse()
        return answer.status, answer.getheader("Connection"), json.loads(answer.read())

    def test_one_connection_carries_the_next_request(self):
        self.db.put_item(TableName="t", Item={**key("a"), "n": {"N": "1"}})
        port = int(self.db.meta.endpoint_url.rsplit(":", 1)[1])
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        body = {"TableName": "t", "Key": key("a")}
        for _ in range(20):
            # The next request goes out the moment an answer is read: werkzeug, reading past an answered request,
            # would take it as leftovers of the last one and never answer it.
            self.assertEqual(self.request(connection, body), (200, None, {"Item": {**key("a"), "n": {"N": "1"}}}))
        first = connection.sock
        self.request(connection, body)
        self.assertIs(connection.sock, first, "the same connection")
        status, header, answer = self.request(connection, body, chunked=True)
        self.assertEqual((status, header, answer["Item"]["n"]), (200, "close", {"N": "1"}))
        connection.close()


class QueueTest(unittest.TestCase):
    """A send reads only the queue attribute it needs here: sends are refused, deduplicated and received as moto
    as released does."""

    def outcomes(self, *options):
        process, endpoint, _ = local_emulator.start("queues", *options)
        try:
            sqs = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1",
                               aws_access_key_id="test", aws_secret_access_key="test")
            queues = {
                "fifo": sqs.create_queue(QueueName="f.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"],
                "content": sqs.create_queue(QueueName="c.fifo", Attributes={
                    "FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"],
                "standard": sqs.create_queue(QueueName="s")["QueueUrl"],
            }
            sends = [
                ("fifo", "a", {}), ("fifo", "b", {"MessageGroupId": "p"}),
                ("fifo", "c", {"MessageGroupId": "p", "MessageDeduplicationId": "p@1"}),
                ("fifo", "d", {"MessageGroupId": "p", "MessageDeduplicationId": "p@1"}),
                ("fifo", "e", {"MessageGroupId": "p", "MessageDeduplicationId": "p@2"}),
                ("content", "f", {"MessageGroupId": "p"}), ("content", "f", {"MessageGroupId": "p"}),
                ("content", "g", {"MessageGroupId": "p"}),
                ("standard", "h", {}), ("standard", "h", {"DelaySeconds": 0}),
            ]
            seen = []
            for queue, body, extra in sends:
                try:
                    answer = sqs.send_message(QueueUrl=queues[queue], MessageBody=body, **extra)
                    seen.append((queue, "sent", answer["MD5OfMessageBody"]))
                except sqs.exceptions.ClientError as e:
                    seen.append((queue, e.response["Error"]["Code"]))
            for queue, url in queues.items():
                bodies = []
                while True:
                    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
                    if not got:
                        break
                    bodies += [m["Body"] for m in got]
                    for m in got:
                        sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
                seen.append((queue, sorted(bodies)))
                seen.append((queue, sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"].get(
                    "ContentBasedDeduplication")))
            return seen
        finally:
            process.terminate()
            process.wait()

    def test_sends_are_refused_deduplicated_and_received_as_released(self):
        ours = self.outcomes()
        self.assertEqual(ours, self.outcomes("--as-released"))
        self.assertIn(("fifo", ["c", "e"]), ours, "the second send with id p@1 was dropped")
        self.assertIn(("content", ["f", "g"]), ours, "the same body twice was dropped")
        self.assertIn(("standard", ["h", "h"]), ours, "a standard queue keeps both")


class AssumeRoleTest(EmulatorCase):
    """A member account's role, as infra/member-account.yaml makes it, and the ExternalId it requires."""

    name = "sts"
    member = "210987654321"

    def client(self, service, credentials=None):
        keys = {"aws_access_key_id": "test", "aws_secret_access_key": "test"}
        if credentials:
            keys = {
                "aws_access_key_id": credentials["AccessKeyId"],
                "aws_secret_access_key": credentials["SecretAccessKey"],
                "aws_session_token": credentials["SessionToken"],
            }
        return boto3.client(service, endpoint_url=self.db.meta.endpoint_url, region_name="us-east-1", **keys)

    def assume(self, role, external_id=None):
        extra = {"ExternalId": external_id} if external_id else {}
        return self.client("sts").assume_role(RoleArn=role, RoleSessionName="test", **extra)["Credentials"]

    def test_a_role_must_exist_and_get_its_external_id(self):
        admin = self.assume(f"arn:aws:iam::{self.member}:role/OrganizationAccountAccessRole")
        self.assertEqual(self.client("sts", admin).get_caller_identity()["Account"], self.member)
        trust = {"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::123456789012:role/power"},
            "Action": "sts:AssumeRole", "Condition": {"StringEquals": {"sts:ExternalId": ["apiary-s-ci"]}}}]}
        role = self.client("iam", admin).create_role(
            RoleName="apiary-member-ci", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
        # What its sessions may do (the emulator holds them to it, infra/role_enforcement.py).
        launch = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "ec2:RunInstances",
                                                           "Resource": "*"}]}
        self.client("iam", admin).put_role_policy(RoleName="apiary-member-ci", PolicyName="launch",
                                                  PolicyDocument=json.dumps(launch))
        for wrong in [None, "apiary-s-other"]:
            with self.assertRaises(Exception) as refused:
                self.assume(role, wrong)
            self.assertIn("AccessDenied", str(refused.exception))
        with self.assertRaises(Exception) as missing:
            self.assume(f"arn:aws:iam::{self.member}:role/apiary-member-none", "apiary-s-ci")
        self.assertIn("AccessDenied", str(missing.exception))

        ec2 = self.client("ec2", self.assume(role, "apiary-s-ci"))
        launched = ec2.run_instances(ImageId="ami-0123456789abcdef0", MinCount=1, MaxCount=1)
        self.assertEqual(launched["OwnerId"], self.member)
        home = self.client("ec2").describe_instances()["Reservations"]
        self.assertEqual([r for r in home if r["OwnerId"] == self.member], [], "accounts are kept apart")


class StackUpdateTest(EmulatorCase):
    """A stack's table updated in place by CloudFormation, as `make deploy` updates Apiary's."""

    name = "cloudformation"

    def template(self, protected, index):
        table = {
            "TableName": "kept",
            "BillingMode": "PAY_PER_REQUEST",
            "DeletionProtectionEnabled": protected,
            "KeySchema": [{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
            "AttributeDefinitions": [{"AttributeName": n, "AttributeType": "S"} for n in ("PK", "SK", "G")],
        }
        if index:
            table["GlobalSecondaryIndexes"] = [{"IndexName": "by-g", "Projection": {"ProjectionType": "ALL"},
                                                "KeySchema": [{"AttributeName": "G", "KeyType": "HASH"}]}]
        return json.dumps({
            "Resources": {"Table": {"Type": "AWS::DynamoDB::Table", "DeletionPolicy": "Retain",
                                    "UpdateReplacePolicy": "Retain", "Properties": table}},
            "Outputs": {"TableName": {"Value": {"Ref": "Table"}}, "TableArn": {"Value": {"Fn::GetAtt": ["Table", "Arn"]}}},
        })

    def test_a_table_is_updated_in_place_with_its_items_and_its_outputs(self):
        cfn = boto3.client("cloudformation", endpoint_url=self.db.meta.endpoint_url, region_name="us-east-1",
                           aws_access_key_id="test", aws_secret_access_key="test")
        cfn.create_stack(StackName="s", TemplateBody=self.template(False, False))
        self.db.put_item(TableName="kept", Item={**key("c1"), "G": {"S": "g"}})
        cfn.update_stack(StackName="s", TemplateBody=self.template(True, True))
        stack = cfn.describe_stacks(StackName="s")["Stacks"][0]
        self.assertEqual(stack["StackStatus"], "UPDATE_COMPLETE")
        outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
        self.assertEqual(outputs.get("TableName"), "kept")
        self.assertTrue(outputs.get("TableArn", "").endswith(":table/kept"))
        table = self.db.describe_table(TableName="kept")["Table"]
        self.assertTrue(table["DeletionProtectionEnabled"])
        self.assertEqual([i["IndexName"] for i in table.get("GlobalSecondaryIndexes", [])], ["by-g"])
        self.assertEqual(self.db.get_item(TableName="kept", Key=key("c1"))["Item"]["G"], {"S": "g"})
        found = self.db.query(TableName="kept", IndexName="by-g", KeyConditionExpression="G = :g",
                              ExpressionAttributeValues={":g": {"S": "g"}})["Items"]
        self.assertEqual(len(found), 1, "the index added holds the items already there")


class RoleEnforcementTest(EmulatorCase):
    """A session of a role may make only the calls the role's policies allow (infra/role_enforcement.py), refused
    as AWS refuses them; a stack update changes a role's grants as CloudFormation does."""

    name = "roles"

    def template(self, actions):
        role = {
            "AssumeRolePolicyDocument": {"Version": "2012-10-17", "Statement": [{
                "Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}]},
            "Policies": [{"PolicyName": "fn", "PolicyDocument": {"Version": "2012-10-17", "Statement": [{
                "Sid": "Table", "Effect": "Allow", "Action": actions,
                "Resource": "arn:aws:dynamodb:us-east-1:123456789012:table/t"}]}}],
        }
        return json.dumps({"Resources": {"FnRole": {"Type": "AWS::IAM::Role", "Properties": role}},
                           "Outputs": {"Role": {"Value": {"Fn::GetAtt": ["FnRole", "Arn"]}}}})

    def test_a_session_is_held_to_its_roles_policy_and_an_update_changes_it(self):
        endpoint = self.db.meta.endpoint_url
        keys = {"aws_access_key_id": "test", "aws_secret_access_key": "test", "region_name": "us-east-1"}
        cfn = boto3.client("cloudformation", endpoint_url=endpoint, **keys)
        cfn.create_stack(StackName="r", TemplateBody=self.template(["dynamodb:GetItem"]))
        role = cfn.describe_stacks(StackName="r")["Stacks"][0]["Outputs"][0]["OutputValue"]

        def session():
            c = boto3.client("sts", endpoint_url=endpoint, **keys).assume_role(
                RoleArn=role, RoleSessionName="fn")["Credentials"]
            return boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1",
                                aws_access_key_id=c["AccessKeyId"], aws_secret_access_key=c["SecretAccessKey"],
                                aws_session_token=c["SessionToken"])

        db = session()
        db.get_item(TableName="t", Key=key("a"))
        with self.assertRaises(Exception) as refused:
            db.put_item(TableName="t", Item=key("a"))
        self.assertIn("AccessDenied", str(refused.exception))
        self.assertIn('"Action": "dynamodb:PutItem"', str(refused.exception))
        self.assertNotIn("Item", self.db.get_item(TableName="t", Key=key("a")), "nothing was written")
        # The tests' own keys are an operator's: not held to any role.
        self.db.put_item(TableName="t", Item=key("b"))

        cfn.update_stack(StackName="r", TemplateBody=self.template(["dynamodb:GetItem", "dynamodb:PutItem"]))
        session().put_item(TableName="t", Item=key("a"))
        self.assertIn("Item", self.db.get_item(TableName="t", Key=key("a")))


if __name__ == "__main__":
    unittest.main()

"""`make bench-emulator`: what one DynamoDB request costs the local emulator, and moto as released, on its own.

A partition like a pool's (a pool item, 200 cluster items of about 1.2 KB, 120 of them in the `assign` index),
then the median over 200 requests of each of a claim's and a reconcile's reads, sent as the SDKs send them
(one kept-alive connection, no SDK on the client's side). Prints a Markdown table for BENCHMARKS.md.

Then the same reads signed by a session of a role whose policy allows them, as each function's are: what the
emulator's authorization (infra/role_enforcement.py) adds to a request. Prints a second table.
"""
import http.client
import json
import statistics
import time
import urllib.parse

import local_emulator

TARGET = "DynamoDB_20120810."
AUTH = ("AWS4-HMAC-SHA256 Credential=test/20261125/us-east-1/dynamodb/aws4_request, "
        "SignedHeaders=host, Signature=0")


class Emulator:
    def __init__(self, *options):
        self.process, self.endpoint, _ = local_emulator.start("bench", *options)
        self.connection = http.client.HTTPConnection(urllib.parse.urlparse(self.endpoint).netloc)
        self.auth = AUTH

    def as_role(self):
        """Signs from now on as a session of a role allowed the table's reads."""
        import boto3

        keys = {"aws_access_key_id": "test", "aws_secret_access_key": "test", "region_name": "us-east-1"}
        iam = boto3.client("iam", endpoint_url=self.endpoint, **keys)
        trust = {"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}]}
        arn = iam.create_role(RoleName="bench", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
        table = "arn:aws:dynamodb:us-east-1:123456789012:table/t"
        reads = {"Version": "2012-10-17", "Statement": [
            {"Sid": "Reads", "Effect": "Allow", "Action": ["dynamodb:GetItem", "dynamodb:Query"],
             "Resource": [table, f"{table}/index/assign"]}]}
        iam.put_role_policy(RoleName="bench", PolicyName="reads", PolicyDocument=json.dumps(reads))
        key = boto3.client("sts", endpoint_url=self.endpoint, **keys).assume_role(
            RoleArn=arn, RoleSessionName="bench")["Credentials"]["AccessKeyId"]
        self.auth = AUTH.replace("Credential=test/", f"Credential={key}/")

    def call(self, action, body):
        self.connection.request("POST", "/", json.dumps(body).encode(), {
            "X-Amz-Target": TARGET + action, "Content-Type": "application/x-amz-json-1.0", "Authorization": self.auth})
        answer = self.connection.getresponse()
        text = answer.read()
        assert answer.status == 200, (action, answer.status, text[:300])
        return json.loads(text)

    def stop(self):
        self.process.terminate()
        self.process.wait()


def cluster(i):
    item = {"PK": {"S": "pool#burst"}, "SK": {"S": f"cluster#c{i:04}"}, "kind": {"S": "cluster"},
            "name": {"S": f"burst-{i:04}"}, "rev": {"N": "7"}, "powerState": {"S": "Running"},
            "infra": {"M": {k: {"S": "x" * 60} for k in "abcdefghijklmn"}},
            "history": {"L": [{"M": {"at": {"S": "2026-11-25T09:00:00Z"}, "to": {"S": "Running"}}}] * 4}}
    if i % 5 < 3:
        item["assign"] = {"S": f"S#{(i * 37) % 256:02x}#c{i:04}"}
    return item


def measure(emulator, then=None):
    """The reads' medians; with `then`, a second set after `then(emulator)` on the same partition."""
    t = {"TableName": "t"}
    emulator.call("CreateTable", {
        **t, "BillingMode": "PAY_PER_REQUEST",
        "KeySchema": [{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
        "AttributeDefinitions": [{"AttributeName": n, "AttributeType": "S"} for n in ("PK", "SK", "assign")],
        "LocalSecondaryIndexes": [{"IndexName": "assign", "Projection": {"ProjectionType": "KEYS_ONLY"},
                                   "KeySchema": [{"AttributeName": "PK", "KeyType": "HASH"},
                                                 {"AttributeName": "assign", "KeyType": "RANGE"}]}],
    })
    emulator.call("PutItem", {**t, "Item": {"PK": {"S": "pool#burst"}, "SK": {"S": "pool"}, "kind": {"S": "pool"}}})
    for i in range(200):
        emulator.call("PutItem", {**t, "Item": cluster(i)})
    partition = {**t, "ConsistentRead": True, "KeyConditionExpression": "PK = :p",
                 "ExpressionAttributeValues": {":p": {"S": "pool#burst"}}}
    reads = {
        "GetItem (the pool item)": ("GetItem", {**t, "ConsistentRead": True,
                                                "Key": {"PK": {"S": "pool#burst"}, "SK": {"S": "pool"}}}),
        "Query `assign`: a page of 16 spares": ("Query", {
            **partition, "IndexName": "assign", "Limit": 16,
            "KeyConditionExpression": "PK = :p AND assign BETWEEN :a AND :b",
            "ExpressionAttributeValues": {":p": {"S": "pool#burst"}, ":a": {"S": "S#80"}, ":b": {"S": "S#~"}}}),
        "Query: the whole partition (a reconcile)": ("Query", partition),
    }
    def timed():
        figures = {}
        for what, (action, body) in reads.items():
            took = []
            for _ in range(200 if action == "GetItem" else 50):
                started = time.perf_counter()
                emulator.call(action, body)
                took.append(time.perf_counter() - started)
            figures[what] = statistics.median(took) * 1e3
        return figures

    if then is None:
        return timed()
    before = timed()
    then(emulator)
    return before, timed()


def main():
    results = []
    for options in ((), ("--as-released",)):
        emulator = Emulator(*options)
        try:
            results.append(measure(emulator))
        finally:
            emulator.stop()
    print("| request (200 clusters in the partition) | emulator | moto as released | ratio |")
    print("|---|---:|---:|---:|")
    for what, ours in results[0].items():
        released = results[1][what]
        print(f"| {what} | {ours:.2f} ms | {released:.2f} ms | {released / ours:.1f}× |")
    emulator = Emulator()
    try:
        keys, session = measure(emulator, Emulator.as_role)
    finally:
        emulator.stop()
    print()
    print("| request (200 clusters in the partition) | operator's keys | a role's session | authorization adds |")
    print("|---|---:|---:|---:|")
    for what, plain in keys.items():
        print(f"| {what} | {plain:.2f} ms | {session[what]:.2f} ms | {session[what] - plain:+.2f} ms |")


if __name__ == "__main__":
    main()

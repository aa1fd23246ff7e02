"""The local emulator's own promises (infra/emulator.py), through boto3 as any client sees them: a cancelled
DynamoDB transaction leaves every item as it was, with the emulator's lighter transaction backup in place.

Run by `make test` (`make emulator-test`); needs only the project virtualenv.
"""
import unittest

import boto3

import local_emulator


def key(sk):
    return {"PK": {"S": "p"}, "SK": {"S": sk}}


class TransactionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.emulator, endpoint, cls.log = local_emulator.start("transactions")
        cls.db = boto3.client(
            "dynamodb", endpoint_url=endpoint, region_name="us-east-1",
            aws_access_key_id="test", aws_secret_access_key="test",
        )
        cls.db.create_table(
            TableName="t", BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
            AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"},
                                  {"AttributeName": "SK", "AttributeType": "S"}],
        )
        for i in range(50):
            cls.db.put_item(TableName="t", Item={**key(f"c{i:02}"), "n": {"N": str(i)}, "m": {"M": {"k": {"S": "v"}}}})

    @classmethod
    def tearDownClass(cls):
        cls.emulator.terminate()
        cls.emulator.wait()

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


if __name__ == "__main__":
    unittest.main()

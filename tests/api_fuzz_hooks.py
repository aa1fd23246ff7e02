"""Schemathesis hooks for tests/api_fuzz.py: a generated pool stays small, so that a fuzzed spec the API accepts
makes a pool the local stack can fill in a few seconds instead of ten thousand clusters."""

import schemathesis

SMALL = 3


@schemathesis.hook
def map_body(context, body):
    if isinstance(body, dict):
        for field in ("size", "runningCount", "maxSize", "maxConcurrent"):
            if isinstance(body.get(field), int) and body[field] > SMALL:
                body[field] = SMALL
        inventory = body.get("inventory")
        if isinstance(inventory, dict) and isinstance(inventory.get("clusterDeployments"), list):
            del inventory["clusterDeployments"][SMALL:]
    return body

"""The Kubernetes readiness check's fake against the official Kubernetes client: `kubernetes` (pinned in
infra/requirements-conformance.txt), whose models are generated from the API server's OpenAPI document, reads the fake cluster
API (shared/fakeclouds/src/bin/fake-cluster-api.rs) as Apiary's readiness check does: the nodes, a page at a time
by `limit` and `continue`, each node's Ready condition; the ClusterOperators (config.openshift.io/v1), a page at a
time; a refused token (401) and a cluster without ClusterOperators (404) as the client's ApiException with the
Status the server sent. Where the client refuses what the fake says, the fake is wrong.

`make conformance` runs it (`make test` does).
"""

import json
import os
import tempfile

from kubernetes import client

from fake_process import FakeProcess



class FakeClusterApi(FakeProcess):
    """The fake cluster API (`fake-cluster-api`): its server template, token and CA."""

    def __init__(self):
        super().__init__("fake-cluster-api")
        self.server, self.token, self.ca = self.hello["server"], self.hello["token"], self.hello["caBundle"]


def api(fake, infra, ca_file, token):
    config = client.Configuration()
    config.host = fake.server.replace("{infraId}", infra)
    config.ssl_ca_cert = ca_file
    config.api_key = {"authorization": token}
    config.api_key_prefix = {"authorization": "Bearer"}
    return client.ApiClient(config)


def pages(list_call, **kwargs):
    """Every item of a list, page by page, and the number of pages."""
    items, token, count = [], None, 0
    while True:
        answer = list_call(limit=2, _continue=token, **kwargs) if token else list_call(limit=2, **kwargs)
        count += 1
        meta = answer.metadata if hasattr(answer, "metadata") else None
        items.extend(answer.items if hasattr(answer, "items") and not isinstance(answer, dict) else answer["items"])
        token = meta._continue if meta is not None else (answer.get("metadata") or {}).get("continue")
        if not token:
            return items, count


def main():
    fake = FakeClusterApi()
    done = []
    try:
        with tempfile.NamedTemporaryFile("w", suffix=".pem", delete=False) as ca:
            ca.write(fake.ca)
        fake.tell("nodes 5")
        fake.tell("page 2")
        with api(fake, "ci-x7k2p", ca.name, fake.token) as c:
            nodes, count = pages(client.CoreV1Api(c).list_node)
            assert len(nodes) == 5 and count == 3, (len(nodes), count)
            for node in nodes:
                ready = [k for k in node.status.conditions if k.type == "Ready"]
                assert len(ready) == 1 and ready[0].status in ("True", "False"), node.metadata.name
            done.append("nodes as V1NodeList over 3 pages, each with its Ready condition")
            custom = client.CustomObjectsApi(c)
            operators = custom.list_cluster_custom_object("config.openshift.io", "v1", "clusteroperators", limit=2)
            assert operators["apiVersion"] == "config.openshift.io/v1", operators["apiVersion"]
            assert operators["kind"] == "ClusterOperatorList", operators["kind"]
            listed, count = pages(custom.list_cluster_custom_object, group="config.openshift.io", version="v1",
                                  plural="clusteroperators")
            assert count > 1 and all(o["metadata"]["name"] and o["status"]["conditions"] for o in listed)
            done.append(f"ClusterOperators (config.openshift.io/v1) over {count} pages")
        fake.tell("plain ci-plain")
        with api(fake, "ci-plain", ca.name, fake.token) as c:
            try:
                client.CustomObjectsApi(c).list_cluster_custom_object("config.openshift.io", "v1", "clusteroperators")
                raise SystemExit("conformance: a plain cluster's ClusterOperators were not a 404")
            except client.ApiException as e:
                status = json.loads(e.body)
                assert e.status == 404 and status["kind"] == "Status" and status["reason"] == "NotFound", e
        done.append("a plain cluster's ClusterOperators: 404 with its Status")
        with api(fake, "ci-x7k2p", ca.name, "not-the-token") as c:
            try:
                client.CoreV1Api(c).list_node()
                raise SystemExit("conformance: a refused token was not an ApiException")
            except client.ApiException as e:
                status = json.loads(e.body)
                assert e.status == 401 and status["kind"] == "Status" and status["code"] == 401, e
        done.append("401 as an ApiException with its Status")
    finally:
        fake.close()
        os.unlink(ca.name)
    print(f"kubernetes (the official client) against the fake cluster API: {'; '.join(done)}")


if __name__ == "__main__":
    main()

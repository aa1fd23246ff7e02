"""The scan for leaked secrets (tests/canary_scan.py) finds each way a secret leaks, and fails a scan that read
nothing or looked for secrets nobody made."""

import base64
import os
import tempfile
import unittest

import canary_scan

TOKEN = "sha256~apiary-canary-cluster-api-token-0f1e2d3c4b5a6978"
KEY = "whsec_" + base64.b64encode(b"apiary-canary-signing-key-5f1d0c3a9e7b2468").decode()
PEM = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n"


def captured(files, minted="signing-key\n"):
    """A canary directory holding `files` ({relative path: text}) and the kinds `minted` names."""
    directory = tempfile.mkdtemp(prefix="apiary-canary-test-")
    for path, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(directory, path)), exist_ok=True)
        with open(os.path.join(directory, path), "w") as f:
            f.write(text)
    with open(os.path.join(directory, "minted"), "w") as f:
        f.write(minted)
    return directory


class Scan(unittest.TestCase):
    def test_what_was_captured_clean_passes(self):
        d = captured({"logs/a.jsonl": '{"message":"claim assigned","pool":"ci"}\n',
                      "errors/s": 'GET /pools/x 404 {"message":"no pool x"}\n'})
        lines, ok = canary_scan.scan(d, ["logs", "errors"], ["signing-key"])
        self.assertTrue(ok, lines)
        self.assertIn("1 logs, 1 errors", lines[0])

    def test_each_way_a_secret_leaks_is_found_and_named_where(self):
        kubeconfig = "users:\n- user:\n    client-key-data: " + base64.b64encode(PEM.encode()).decode() + "\n"
        d = captured({
            "logs/system-1.jsonl": '{"message":"ok"}\n{"message":"token ' + TOKEN + '"}\n',
            "errors/sys1": 'PUT /pools/p 400 {"message":"bad key ' + KEY + '"}\n',
            "jobs/ocp-ci-1.install.1.out": kubeconfig,
            "notifications/receiver-1": '{"note":"' + PEM.replace("\n", "\\n") + '"}\n',
            "trail/sys1": '[{"message":"password apiary-canary-kubeadmin-pas"}]\n',
        })
        lines, ok = canary_scan.scan(d)
        self.assertFalse(ok)
        text = "\n".join(lines)
        self.assertIn("logs/system-1.jsonl:2: a cluster-api-token leaked", text)
        self.assertIn("errors/sys1:1: a signing-key in base64 leaked", text)
        self.assertIn("jobs/ocp-ci-1.install.1.out:3: a private key in base64 leaked", text)
        self.assertIn("notifications/receiver-1:1: a private key leaked", text)
        self.assertIn("trail/sys1:1: a canary cut short leaked", text)
        self.assertNotIn("0f1e2d3c4b5a6978", text, "the scan names a secret's kind, never the secret")

    def test_a_scan_that_read_nothing_or_found_no_canary_made_fails(self):
        d = captured({"logs/a.jsonl": "{}\n"}, minted="")
        lines, ok = canary_scan.scan(d, ["logs", "trail"], ["pull-secret"])
        self.assertFalse(ok)
        self.assertIn("nothing was captured as trail", "\n".join(lines))
        self.assertIn("no pull-secret canary was made", "\n".join(lines))


if __name__ == "__main__":
    unittest.main()

"""End-to-end tests of the Amazon Cognito Sync compatible API of `offline-sync serve`.

The tests start a live server and drive it with boto3's own, unmodified
"cognito-sync" client (rest-json, botocore's service model 2014-06-30), plus a
few hand-signed SigV4 requests sent with urllib for the signature checks.

Run from the repository root, after building the server:

    OFFLINE_SYNC_BIN=.build/debug/offline-sync python3 -m unittest -v Tests/Cognito/test_cognito_sync.py

Requirements: Python 3.11+, boto3/botocore (only the standard library otherwise).

The server is started once for the whole module with three access keys:

* AKIADEV    - developer key: every identity and the pool-level operations;
* AKIAALICE  - bound to identity ALICE: only ALICE's datasets and devices;
* AKIABOB    - bound to identity BOB: only BOB's datasets and devices.

Each test uses its own dataset names (derived from the test name), so the tests
are independent of each other except for pool-wide state (the pool
configuration and Cognito events), which the numbered test names order: the
device test (07) expects no PushSync configuration yet, bulk publish (10)
configures CognitoStreams afterwards. Every test also passes when run alone.
"""

import contextlib
import datetime
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request
from unittest import mock

import boto3
import botocore.auth
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

REGION = "us-east-1"
SERVICE = "cognito-sync"

POOL = "us-east-1:00000000-0000-0000-0000-000000000001"
PUSH_POOL = "us-east-1:00000000-0000-0000-0000-000000000007"  # push sync configured (test 7)
BULK_POOL = "us-east-1:00000000-0000-0000-0000-000000000010"  # streams configured (test 10)
UNKNOWN_POOL = "us-east-1:99999999-0000-0000-0000-000000000009"
ALICE = "us-east-1:aaaaaaaa-0000-0000-0000-000000000001"
BOB = "us-east-1:bbbbbbbb-0000-0000-0000-000000000002"
# Identities reached only through the developer key.
CAROL = "us-east-1:cccccccc-0000-0000-0000-000000000003"  # dataset-count limit
DAVE = "us-east-1:dddddddd-0000-0000-0000-000000000004"  # ListDatasets paging

DEV_KEY = ("AKIADEV", "devsecret")
ALICE_KEY = ("AKIAALICE", "alicesecret")
BOB_KEY = ("AKIABOB", "bobsecret")

PUSH_SYNC = {
    "ApplicationArns": ["arn:aws:sns:us-east-1:123456789012:app/GCM/offline-sync-test"],
    "RoleArn": "arn:aws:iam::123456789012:role/offline-sync-push",
}
COGNITO_STREAMS = {
    "StreamName": "offline-sync-stream",
    "RoleArn": "arn:aws:iam::123456789012:role/streams",
    "StreamingStatus": "ENABLED",
}
SYNC_TRIGGER_ARN = "arn:aws:lambda:us-east-1:123456789012:function:f"

STARTUP_TIMEOUT = 30.0
SHUTDOWN_TIMEOUT = 20.0
LISTENING = re.compile(r"listening on (http://\S+)")

# Limits of Amazon Cognito Sync.
MAX_KEY_LENGTH = 128
MAX_DATASET_BYTES = 1024 * 1024
MAX_DATASETS = 20


# --------------------------------------------------------------------------- server


class Server:
    """One `offline-sync serve` process with a temporary data directory."""

    def __init__(self):
        binary = os.environ.get("OFFLINE_SYNC_BIN")
        if not binary:
            raise RuntimeError(
                "OFFLINE_SYNC_BIN is not set: point it at the offline-sync binary, e.g. "
                "OFFLINE_SYNC_BIN=.build/debug/offline-sync python3 -m unittest -v "
                "Tests/Cognito/test_cognito_sync.py")
        binary = os.path.abspath(binary)
        if not os.access(binary, os.X_OK):
            raise RuntimeError(f"OFFLINE_SYNC_BIN={binary} is not an executable file")
        self.binary = binary
        self.data_dir = tempfile.mkdtemp(prefix="offline-sync-cognito-")
        self.output = []  # every line the server wrote (stdout and stderr)
        self._lines = queue.Queue()
        self.process = None
        self.url = None

    def start(self):
        command = [
            self.binary, "serve", "--port", "0", "--data", self.data_dir,
            "--cognito-key", "AKIADEV:devsecret",
            "--cognito-key", f"AKIAALICE:alicesecret:{ALICE}",
            "--cognito-key", f"AKIABOB:bobsecret:{BOB}",
        ]
        self.process = subprocess.Popen(
            command, cwd=self.data_dir, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        # The reader keeps draining the pipe for the server's whole life, so the
        # server never blocks on a full pipe and its log is available on failure.
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while self.url is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RuntimeError("the server did not report 'listening on http://HOST:PORT' within "
                                   f"{STARTUP_TIMEOUT:.0f} s; its output:\n{self.log()}")
            try:
                line = self._lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                self.process.wait(timeout=5)
                raise RuntimeError(f"the server exited with status {self.process.returncode} "
                                   f"before listening; its output:\n{self.log()}")
            match = LISTENING.search(line)
            if match:
                url = match.group(1).rstrip("/.,;)")
                # A wildcard listen address is reachable through the loopback interface.
                self.url = url.replace("//0.0.0.0:", "//127.0.0.1:").replace("//[::]:", "//[::1]:")

    def _read(self):
        for line in self.process.stdout:
            self.output.append(line.rstrip("\n"))
            self._lines.put(line)
        self._lines.put(None)

    def log(self):
        return "\n".join(self.output) or "(no output)"

    def stop(self):
        """Sends SIGTERM, waits, and returns the exit status (None if it had to be killed)."""
        if self.process is None:
            return None
        status = None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            status = self.process.wait(timeout=SHUTDOWN_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join(timeout=5)
        return status

    def remove_data(self):
        shutil.rmtree(self.data_dir, ignore_errors=True)


# --------------------------------------------------------------------------- helpers


def make_client(url, key):
    """boto3's stock cognito-sync client against the test server."""
    access_key, secret_key = key
    session = boto3.session.Session()
    return session.client(
        SERVICE, endpoint_url=url, region_name=REGION,
        aws_access_key_id=access_key, aws_secret_access_key=secret_key,
        # No retries (errors surface at once, nothing is sent twice), no proxies
        # from the environment, and short timeouts.
        config=Config(retries={"total_max_attempts": 1}, proxies={},
                      connect_timeout=5, read_timeout=30))


def replace(key, value, sync_count):
    return {"Op": "replace", "Key": key, "Value": value, "SyncCount": sync_count}


def remove(key, sync_count):
    return {"Op": "remove", "Key": key, "SyncCount": sync_count}


def quoted(value):
    """A path segment as botocore encodes it (':' becomes %3A)."""
    return urllib.parse.quote(value, safe="~")


def datasets_path(identity):
    return f"/identitypools/{quoted(POOL)}/identities/{quoted(identity)}/datasets"


_NO_PROXY_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def send_raw(method, url, headers=None, body=None):
    """Sends one request with urllib; returns (status, headers, body bytes) for any status."""
    request = urllib.request.Request(url, data=body, method=method, headers=dict(headers or {}))
    try:
        with _NO_PROXY_OPENER.open(request, timeout=30) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.headers, error.read()


def sign(method, url, body=None, key=ALICE_KEY, signing_time=None):
    """An AWSRequest signed with SigV4 for cognito-sync, optionally at another time (naive UTC)."""
    headers = {"Content-Type": "application/json"} if body is not None else {}
    request = AWSRequest(method=method, url=url, data=body, headers=headers)
    signer = SigV4Auth(Credentials(*key), SERVICE, REGION)
    if signing_time is None:
        signer.add_auth(request)
    else:
        # SigV4Auth.add_auth takes "now" from botocore.auth.get_current_datetime.
        with mock.patch.object(botocore.auth, "get_current_datetime", return_value=signing_time):
            signer.add_auth(request)
    return request


def send_signed(request, body=None):
    """Sends a signed AWSRequest, with `body` instead of the signed body when given."""
    headers = {name: (value.decode() if isinstance(value, bytes) else value)
               for name, value in request.headers.items()}
    return send_raw(request.method, request.url, headers,
                    request.body if body is None else body)


# --------------------------------------------------------------------------- tests


def next_second():
    """Waits for the next wall-clock second. The server runs a signed write's exact bytes
    once and answers a repeat from the first run (SigV4's X-Amz-Date has one-second
    resolution, so an SDK repeating a call within the same second sends the same bytes); a
    test repeating a write to see a different outcome signs it in a later second."""
    time.sleep(1.02 - (time.time() % 1.0))


class CognitoSyncTests(unittest.TestCase):
    server = None

    @classmethod
    def setUpClass(cls):
        server = Server()
        try:
            server.start()
        except BaseException:
            server.stop()
            server.remove_data()
            raise
        cls.server = server
        cls.url = server.url
        cls.dev = make_client(cls.url, DEV_KEY)
        cls.alice = make_client(cls.url, ALICE_KEY)
        cls.bob = make_client(cls.url, BOB_KEY)

    @classmethod
    def tearDownClass(cls):
        server = cls.server
        if server is None:
            return
        try:
            status = server.stop()
        finally:
            server.remove_data()
        if status != 0:
            raise AssertionError(f"the server exited with status {status} on SIGTERM "
                                 f"(expected 0); its output:\n{server.log()}")

    def setUp(self):
        # The pool the test works in. A test that configures its pool (push sync, streams)
        # works in a pool of its own, so the tests pass in any order.
        self.pool = POOL

    # ---- helpers

    def dataset(self, suffix=""):
        """A dataset name unique to the running test."""
        name = self._testMethodName + suffix
        self.assertLessEqual(len(name), 128)
        return name

    @contextlib.contextmanager
    def assert_error(self, client, code, status):
        """Expects the block to fail with `code` and HTTP `status`, as boto3 reports it."""
        outcome = {}
        with self.assertRaises(ClientError) as caught:
            yield outcome
        error = caught.exception
        outcome["error"] = error
        self.assertEqual(error.response["Error"]["Code"], code, error.response)
        self.assertEqual(error.response["ResponseMetadata"]["HTTPStatusCode"], status, error.response)
        self.assertIsInstance(error, getattr(client.exceptions, code))
        self.assertTrue(error.response["Error"].get("Message"),
                        f"{code} without a message: {error.response}")

    def assert_raw_not_authorized(self, status, headers, body):
        self.assertEqual(status, 403, body)
        self.assertTrue((headers.get("x-amzn-ErrorType") or "").startswith("NotAuthorizedException"),
                        f"x-amzn-ErrorType: {headers.get('x-amzn-ErrorType')!r}, body: {body!r}")
        self.assertIn("message", json.loads(body))

    def assert_ok(self, response):
        self.assertEqual(response["ResponseMetadata"]["HTTPStatusCode"], 200)

    def session_token(self, client, identity, dataset):
        response = client.list_records(IdentityPoolId=self.pool, IdentityId=identity, DatasetName=dataset)
        token = response.get("SyncSessionToken")
        self.assertIsInstance(token, str)
        self.assertTrue(token)
        return token

    def update(self, client, identity, dataset, patches):
        """One synchronize write: a fresh session token from ListRecords, then UpdateRecords."""
        token = self.session_token(client, identity, dataset)
        return client.update_records(IdentityPoolId=self.pool, IdentityId=identity, DatasetName=dataset,
                                     SyncSessionToken=token, RecordPatches=patches)

    def records(self, client, identity, dataset, last_sync_count=0):
        """All records changed after `last_sync_count` (by key) and the last ListRecords page."""
        found, token, response = {}, None, None
        for _ in range(100):
            arguments = dict(IdentityPoolId=self.pool, IdentityId=identity, DatasetName=dataset,
                             LastSyncCount=last_sync_count)
            if token:
                arguments["NextToken"] = token
            response = client.list_records(**arguments)
            for record in response.get("Records", []):
                self.assertNotIn(record["Key"], found, "a record was listed twice")
                found[record["Key"]] = record
            token = response.get("NextToken")
            if not token:
                return found, response
        self.fail("ListRecords kept returning a NextToken")

    def list_datasets(self, client, identity, max_results=None):
        """Every page of ListDatasets; checks Count against each page."""
        pages, token = [], None
        for _ in range(100):
            arguments = dict(IdentityPoolId=self.pool, IdentityId=identity)
            if max_results is not None:
                arguments["MaxResults"] = max_results
            if token:
                arguments["NextToken"] = token
            response = client.list_datasets(**arguments)
            page = response.get("Datasets", [])
            self.assertEqual(response.get("Count"), len(page), response)
            pages.append(page)
            token = response.get("NextToken")
            if not token:
                return pages
        self.fail("ListDatasets kept returning a NextToken")

    def dataset_names(self, client, identity):
        return [d["DatasetName"] for page in self.list_datasets(client, identity) for d in page]

    def describe(self, client, identity, dataset):
        return client.describe_dataset(IdentityPoolId=self.pool, IdentityId=identity,
                                       DatasetName=dataset)["Dataset"]

    # ---- 1. synchronize cycle

    def test_01_full_synchronize_cycle(self):
        name = self.dataset()
        c = self.alice

        first = c.list_records(IdentityPoolId=self.pool, IdentityId=ALICE, DatasetName=name)
        self.assertEqual(first.get("Records", []), [])
        self.assertIs(first["DatasetExists"], False)
        self.assertEqual(first["DatasetSyncCount"], 0)
        self.assertIsInstance(first["SyncSessionToken"], str)
        self.assertTrue(first["SyncSessionToken"])

        written = c.update_records(
            IdentityPoolId=self.pool, IdentityId=ALICE, DatasetName=name,
            SyncSessionToken=first["SyncSessionToken"],
            RecordPatches=[replace("k1", "v1", 0), replace("k2", "v2", 0)])
        self.assert_ok(written)
        by_key = {r["Key"]: r for r in written["Records"]}
        self.assertEqual(len(written["Records"]), 2)
        self.assertEqual(set(by_key), {"k1", "k2"})
        self.assertEqual(by_key["k1"]["Value"], "v1")
        self.assertEqual(by_key["k2"]["Value"], "v2")
        self.assertEqual(by_key["k1"]["SyncCount"], 1)
        self.assertEqual(by_key["k2"]["SyncCount"], 1)

        described = self.describe(c, ALICE, name)
        self.assertEqual(described["DatasetName"], name)
        self.assertEqual(described["NumRecords"], 2)
        self.assertEqual(described["DataStorage"], len("k1v1k2v2".encode("utf-8")))
        self.assertIsInstance(described["LastModifiedDate"], datetime.datetime)

        listed = c.list_records(IdentityPoolId=self.pool, IdentityId=ALICE, DatasetName=name, LastSyncCount=0)
        self.assertIs(listed["DatasetExists"], True)
        self.assertEqual(listed["DatasetSyncCount"], 1)
        self.assertEqual({r["Key"]: (r["Value"], r["SyncCount"]) for r in listed["Records"]},
                         {"k1": ("v1", 1), "k2": ("v2", 1)})

        second_token = self.session_token(c, ALICE, name)
        second = c.update_records(
            IdentityPoolId=self.pool, IdentityId=ALICE, DatasetName=name, SyncSessionToken=second_token,
            RecordPatches=[remove("k1", 1), replace("k2", "v2b", 1)])
        self.assertEqual({r["Key"]: r["SyncCount"] for r in second["Records"]}, {"k1": 2, "k2": 2})

        changed = c.list_records(IdentityPoolId=self.pool, IdentityId=ALICE, DatasetName=name, LastSyncCount=1)
        self.assertEqual(changed["DatasetSyncCount"], 2)
        self.assertIs(changed["DatasetExists"], True)
        records = {r["Key"]: r for r in changed["Records"]}
        self.assertEqual(len(changed["Records"]), 2)
        self.assertEqual(set(records), {"k1", "k2"})
        self.assertNotIn("Value", records["k1"], "a removed record has no value")
        self.assertEqual(records["k1"]["SyncCount"], 2)
        self.assertEqual(records["k2"]["Value"], "v2b")
        self.assertEqual(records["k2"]["SyncCount"], 2)

        pages = self.list_datasets(c, ALICE)
        self.assertIn(name, [d["DatasetName"] for page in pages for d in page])

        usage = c.describe_identity_usage(IdentityPoolId=self.pool, IdentityId=ALICE)["IdentityUsage"]
        self.assertGreaterEqual(usage["DatasetCount"], 1)
        self.assertGreater(usage["DataStorage"], 0)

    # ---- 2. conflicts

    def test_02_conflict_applies_nothing(self):
        name = self.dataset()
        c = self.alice
        self.update(c, ALICE, name, [replace("k", "v1", 0)])
        _, before = self.records(c, ALICE, name)
        self.assertEqual(before["DatasetSyncCount"], 1)

        token = self.session_token(c, ALICE, name)
        with self.assert_error(c, "ResourceConflictException", 409):
            c.update_records(IdentityPoolId=self.pool, IdentityId=ALICE, DatasetName=name, SyncSessionToken=token,
                             RecordPatches=[replace("k", "stale", 0), replace("j", "new", 0)])

        records, after = self.records(c, ALICE, name)
        self.assertEqual(set(records), {"k"}, "the patch for j must not be applied")
        self.assertEqual(records["k"]["Value"], "v1")
        self.assertEqual(records["k"]["SyncCount"], 1)
        self.assertEqual(after["DatasetSyncCount"], before["DatasetSyncCount"])
        self.assertEqual(self.describe(c, ALICE, name)["NumRecords"], 1)

    # ---- 3. sync session tokens

    def test_03_sync_session_token_is_checked(self):
        name = self.dataset()
        with self.assert_error(self.alice, "InvalidParameterException", 400):
            self.alice.update_records(IdentityPoolId=self.pool, IdentityId=ALICE, DatasetName=name,
                                      SyncSessionToken="made-up-token",
                                      RecordPatches=[replace("k", "v", 0)])

        bobs_token = self.session_token(self.bob, BOB, name)
        with self.assert_error(self.alice, "InvalidParameterException", 400):
            self.alice.update_records(IdentityPoolId=self.pool, IdentityId=ALICE, DatasetName=name,
                                      SyncSessionToken=bobs_token,
                                      RecordPatches=[replace("k", "v", 0)])

        listed = self.alice.list_records(IdentityPoolId=self.pool, IdentityId=ALICE, DatasetName=name)
        self.assertIs(listed["DatasetExists"], False)
        self.assertEqual(listed.get("Records", []), [])

    # ---- 4. limits

    def test_04a_record_and_dataset_size_limits(self):
        name = self.dataset()
        c = self.alice
        self.update(c, ALICE, name, [replace("base", "1", 0)])

        def assert_unchanged():
            records, listed = self.records(c, ALICE, name)
            self.assertEqual({k: r.get("Value") for k, r in records.items()}, {"base": "1"})
            self.assertEqual(listed["DatasetSyncCount"], 1)
            described = self.describe(c, ALICE, name)
            self.assertEqual(described["NumRecords"], 1)
            self.assertEqual(described["DataStorage"], len("base1"))

        refused = {
            "key of 129 characters": [replace("k" * (MAX_KEY_LENGTH + 1), "v", 0)],
            "value of 1,048,577 characters": [replace("big", "x" * (1024 * 1024 + 1), 0)],
            "dataset over 1 MiB": [replace("a", "x" * 600_000, 0), replace("b", "y" * 600_000, 0)],
        }
        for label, patches in refused.items():
            with self.subTest(label):
                token = self.session_token(c, ALICE, name)
                with self.assert_error(c, "LimitExceededException", 400):
                    c.update_records(IdentityPoolId=self.pool, IdentityId=ALICE, DatasetName=name,
                                     SyncSessionToken=token, RecordPatches=patches)
                assert_unchanged()

        # A key of exactly 128 characters is fine.
        self.update(c, ALICE, name, [replace("k" * MAX_KEY_LENGTH, "v", 0)])
        self.assertEqual(self.describe(c, ALICE, name)["NumRecords"], 2)

    def test_04b_dataset_count_limit(self):
        c = self.dev
        names = [f"limit-{i:02d}" for i in range(MAX_DATASETS)]
        for name in names:
            self.update(c, CAROL, name, [replace("k", name, 0)])
        self.assertEqual(sorted(self.dataset_names(c, CAROL)), names)

        token = self.session_token(c, CAROL, "limit-20")
        with self.assert_error(c, "LimitExceededException", 400):
            c.update_records(IdentityPoolId=self.pool, IdentityId=CAROL, DatasetName="limit-20",
                             SyncSessionToken=token, RecordPatches=[replace("k", "v", 0)])
        self.assertEqual(sorted(self.dataset_names(c, CAROL)), names)
        listed = c.list_records(IdentityPoolId=self.pool, IdentityId=CAROL, DatasetName="limit-20")
        self.assertIs(listed["DatasetExists"], False)

        c.delete_dataset(IdentityPoolId=self.pool, IdentityId=CAROL, DatasetName="limit-00")
        self.assert_ok(self.update(c, CAROL, "limit-20", [replace("k", "v", 0)]))
        self.assertEqual(sorted(self.dataset_names(c, CAROL)), names[1:] + ["limit-20"])

    # ---- 5. paging

    def test_05_paging(self):
        name = self.dataset()
        c = self.alice
        keys = [f"key-{i:02d}" for i in range(25)]
        written = self.update(c, ALICE, name, [replace(k, f"value-{k}", 0) for k in keys])
        self.assertEqual(len(written["Records"]), 25)

        collected, token, pages = [], None, 0
        while True:
            arguments = dict(IdentityPoolId=self.pool, IdentityId=ALICE, DatasetName=name,
                             LastSyncCount=0, MaxResults=10)
            if token:
                arguments["NextToken"] = token
            page = c.list_records(**arguments)
            pages += 1
            self.assertLessEqual(len(page["Records"]), 10)
            self.assertEqual(page.get("Count", len(page["Records"])), len(page["Records"]))
            collected += [r["Key"] for r in page["Records"]]
            token = page.get("NextToken")
            if not token:
                break
            self.assertLess(pages, 10, "ListRecords kept returning a NextToken")
        self.assertEqual(len(collected), len(set(collected)), "a record was listed twice")
        self.assertEqual(sorted(collected), keys)
        self.assertGreaterEqual(pages, 3)

        # ListDatasets pages the same way (on an identity of its own).
        datasets = [f"page-{i}" for i in range(7)]
        for dataset in datasets:
            self.update(self.dev, DAVE, dataset, [replace("k", "v", 0)])
        pages = self.list_datasets(self.dev, DAVE, max_results=3)
        for page in pages:
            self.assertLessEqual(len(page), 3)
        listed = [d["DatasetName"] for page in pages for d in page]
        self.assertEqual(len(listed), len(set(listed)), "a dataset was listed twice")
        self.assertEqual(sorted(listed), datasets)
        self.assertGreaterEqual(len(pages), 3)

    # ---- 6. deleting a dataset

    def test_06_delete_dataset(self):
        name = self.dataset()
        c = self.alice
        self.update(c, ALICE, name, [replace("k", "v1", 0)])
        self.update(c, ALICE, name, [replace("k", "v2", 1)])
        _, listed = self.records(c, ALICE, name)
        last_count = listed["DatasetSyncCount"]
        self.assertEqual(last_count, 2)

        deleted = c.delete_dataset(IdentityPoolId=self.pool, IdentityId=ALICE, DatasetName=name)
        self.assert_ok(deleted)
        self.assertEqual(deleted["Dataset"]["DatasetName"], name)

        with self.assert_error(c, "ResourceNotFoundException", 404):
            c.describe_dataset(IdentityPoolId=self.pool, IdentityId=ALICE, DatasetName=name)

        after = c.list_records(IdentityPoolId=self.pool, IdentityId=ALICE, DatasetName=name,
                               LastSyncCount=last_count)
        self.assertIs(after["DatasetExists"], False)
        self.assertIs(after["DatasetDeletedAfterRequestedSyncCount"], True)
        self.assertEqual(after.get("Records", []), [])

        next_second()
        with self.assert_error(c, "ResourceNotFoundException", 404):
            c.delete_dataset(IdentityPoolId=self.pool, IdentityId=ALICE, DatasetName=name)
        self.assertNotIn(name, self.dataset_names(c, ALICE))

        token = self.session_token(c, ALICE, name)
        rewritten = c.update_records(IdentityPoolId=self.pool, IdentityId=ALICE, DatasetName=name,
                                     SyncSessionToken=token, RecordPatches=[replace("k", "again", 0)])
        self.assertEqual([r["Key"] for r in rewritten["Records"]], ["k"])
        records, relisted = self.records(c, ALICE, name)
        self.assertIs(relisted["DatasetExists"], True)
        self.assertGreater(relisted["DatasetSyncCount"], last_count)
        self.assertEqual(records["k"]["Value"], "again")
        self.assertEqual(self.describe(c, ALICE, name)["NumRecords"], 1)
        self.assertIn(name, self.dataset_names(c, ALICE))

    # ---- 7. devices and subscriptions

    def test_07_devices_and_subscriptions(self):
        self.pool = PUSH_POOL
        name = self.dataset()
        with self.assert_error(self.alice, "InvalidConfigurationException", 400):
            self.alice.register_device(IdentityPoolId=self.pool, IdentityId=ALICE, Platform="GCM", Token="tok-1")

        configured = self.dev.set_identity_pool_configuration(IdentityPoolId=self.pool, PushSync=PUSH_SYNC)
        self.assertEqual(configured["IdentityPoolId"], self.pool)
        self.assertEqual(configured["PushSync"], PUSH_SYNC)
        fetched = self.dev.get_identity_pool_configuration(IdentityPoolId=self.pool)
        self.assertEqual(fetched["IdentityPoolId"], self.pool)
        self.assertEqual(fetched["PushSync"], PUSH_SYNC)

        device = self.alice.register_device(IdentityPoolId=self.pool, IdentityId=ALICE,
                                            Platform="GCM", Token="tok-1")["DeviceId"]
        self.assertIsInstance(device, str)
        self.assertTrue(device)
        again = self.alice.register_device(IdentityPoolId=self.pool, IdentityId=ALICE,
                                           Platform="GCM", Token="tok-1")["DeviceId"]
        self.assertEqual(again, device)
        websocket = self.alice.register_device(IdentityPoolId=self.pool, IdentityId=ALICE,
                                               Platform="WEBSOCKET", Token="ws-tok-1")["DeviceId"]
        self.assertIsInstance(websocket, str)
        self.assertTrue(websocket)
        self.assertNotEqual(websocket, device)

        self.update(self.alice, ALICE, name, [replace("k", "v", 0)])
        target = dict(IdentityPoolId=self.pool, IdentityId=ALICE, DatasetName=name)
        self.assert_ok(self.alice.subscribe_to_dataset(DeviceId=device, **target))
        self.assert_ok(self.alice.unsubscribe_from_dataset(DeviceId=device, **target))
        self.assert_ok(self.alice.subscribe_to_dataset(DeviceId=websocket, **target))

        with self.assert_error(self.alice, "ResourceNotFoundException", 404):
            self.alice.subscribe_to_dataset(DeviceId="no-such-device", **target)
        with self.assert_error(self.alice, "ResourceNotFoundException", 404):
            self.alice.unsubscribe_from_dataset(DeviceId="no-such-device", **target)

        # ALICE's device is not BOB's, even on BOB's own dataset.
        self.update(self.bob, BOB, name, [replace("k", "v", 0)])
        with self.assert_error(self.bob, "ResourceNotFoundException", 404):
            self.bob.subscribe_to_dataset(IdentityPoolId=self.pool, IdentityId=BOB, DatasetName=name,
                                          DeviceId=device)

    # ---- 8. Cognito events

    def test_08_cognito_events(self):
        events = {"SyncTrigger": SYNC_TRIGGER_ARN}
        self.assert_ok(self.dev.set_cognito_events(IdentityPoolId=self.pool, Events=events))
        self.assertEqual(self.dev.get_cognito_events(IdentityPoolId=self.pool)["Events"], events)

        with self.assert_error(self.dev, "InvalidParameterException", 400):
            self.dev.set_cognito_events(IdentityPoolId=self.pool, Events={
                "SyncTrigger": SYNC_TRIGGER_ARN,
                "Other": "arn:aws:lambda:us-east-1:123456789012:function:g"})
        self.assertEqual(self.dev.get_cognito_events(IdentityPoolId=self.pool)["Events"], events)

        with self.assert_error(self.alice, "NotAuthorizedException", 403):
            self.alice.set_cognito_events(IdentityPoolId=self.pool, Events=events)
        with self.assert_error(self.alice, "NotAuthorizedException", 403):
            self.alice.get_cognito_events(IdentityPoolId=self.pool)

    # ---- 9. pool usage

    def test_09_identity_pool_usage(self):
        self.update(self.alice, ALICE, self.dataset(), [replace("k", "v", 0)])

        usage = self.dev.describe_identity_pool_usage(IdentityPoolId=self.pool)["IdentityPoolUsage"]
        self.assertEqual(usage["IdentityPoolId"], POOL)
        self.assertGreaterEqual(usage["SyncSessionsCount"], 1)
        self.assertGreater(usage["DataStorage"], 0)

        with self.assert_error(self.dev, "ResourceNotFoundException", 404):
            self.dev.describe_identity_pool_usage(IdentityPoolId=UNKNOWN_POOL)

        listed = self.dev.list_identity_pool_usage()
        self.assertGreaterEqual(listed["Count"], 1)
        self.assertIn(POOL, [u["IdentityPoolId"] for u in listed["IdentityPoolUsages"]])

    # ---- 10. bulk publish

    def test_10_bulk_publish(self):
        self.pool = BULK_POOL
        name = self.dataset()
        self.update(self.alice, ALICE, name, [replace("k", "v", 0), replace("gone", "soon", 0)])
        self.update(self.alice, ALICE, name, [remove("gone", 1)])

        with self.assert_error(self.dev, "InvalidParameterException", 400):
            self.dev.bulk_publish(IdentityPoolId=self.pool)

        configured = self.dev.set_identity_pool_configuration(
            IdentityPoolId=self.pool, PushSync=PUSH_SYNC, CognitoStreams=COGNITO_STREAMS)
        self.assertEqual(configured["CognitoStreams"], COGNITO_STREAMS)
        self.assertEqual(configured["PushSync"], PUSH_SYNC)
        self.assertEqual(self.dev.get_identity_pool_configuration(IdentityPoolId=self.pool)["CognitoStreams"],
                         COGNITO_STREAMS)

        self.assertEqual(self.dev.bulk_publish(IdentityPoolId=self.pool)["IdentityPoolId"], self.pool)

        deadline = time.monotonic() + 10
        while True:
            details = self.dev.get_bulk_publish_details(IdentityPoolId=self.pool)
            status = details.get("BulkPublishStatus")
            if status in ("SUCCEEDED", "FAILED") or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertEqual(status, "SUCCEEDED", details)
        self.assertIsInstance(details["BulkPublishStartTime"], datetime.datetime)
        self.assertIsInstance(details["BulkPublishCompleteTime"], datetime.datetime)
        self.assertLessEqual(details["BulkPublishStartTime"], details["BulkPublishCompleteTime"])

        path = os.path.join(self.server.data_dir, "streams", "offline-sync-stream.jsonl")
        self.assertTrue(os.path.isfile(path), f"{path} was not written")
        with open(path, encoding="utf-8") as stream:
            lines = [line for line in stream.read().splitlines() if line.strip()]
        self.assertGreaterEqual(len(lines), 1)
        published = []
        for line in lines:
            entry = json.loads(line)
            self.assertIsInstance(entry, dict, line)
            for field in ("identityPoolId", "identityId", "datasetName", "key", "syncCount"):
                self.assertIn(field, entry, line)
            self.assertEqual(entry["identityPoolId"], self.pool, line)
            published.append(entry)
        mine = [e for e in published if e["identityId"] == ALICE and e["datasetName"] == name]
        live = [e for e in mine if e["key"] == "k"]
        self.assertEqual(len(live), 1, mine)
        self.assertEqual(live[0]["value"], "v")
        self.assertEqual(live[0]["syncCount"], 1)
        for entry in mine:
            if entry["key"] == "gone":
                self.assertIsNone(entry.get("value"), "a removed record is published without a value")

        next_second()
        with self.assert_error(self.dev, "AlreadyStreamedException", 400):
            self.dev.bulk_publish(IdentityPoolId=self.pool)

    # ---- 11. authorization and signatures

    def test_11_authorization_and_signatures(self):
        name = self.dataset()
        alice, bob = self.alice, self.bob
        self.update(bob, BOB, name, [replace("k", "bob", 0)])
        bobs_token = self.session_token(bob, BOB, name)
        on_bob = dict(IdentityPoolId=self.pool, IdentityId=BOB)
        attempts = {
            "ListDatasets": lambda: alice.list_datasets(**on_bob),
            "ListRecords": lambda: alice.list_records(DatasetName=name, **on_bob),
            "UpdateRecords": lambda: alice.update_records(
                DatasetName=name, SyncSessionToken=bobs_token,
                RecordPatches=[replace("k", "alice", 1)], **on_bob),
            "DescribeDataset": lambda: alice.describe_dataset(DatasetName=name, **on_bob),
            "DeleteDataset": lambda: alice.delete_dataset(DatasetName=name, **on_bob),
            "DescribeIdentityUsage": lambda: alice.describe_identity_usage(**on_bob),
        }
        for operation, attempt in attempts.items():
            with self.subTest(f"ALICE's key, BOB's identity: {operation}"):
                with self.assert_error(alice, "NotAuthorizedException", 403):
                    attempt()
        records, _ = self.records(bob, BOB, name)
        self.assertEqual({k: (r["Value"], r["SyncCount"]) for k, r in records.items()}, {"k": ("bob", 1)})

        pool_operations = {
            "DescribeIdentityPoolUsage": lambda c: c.describe_identity_pool_usage(IdentityPoolId=self.pool),
            "ListIdentityPoolUsage": lambda c: c.list_identity_pool_usage(),
            "GetIdentityPoolConfiguration": lambda c: c.get_identity_pool_configuration(IdentityPoolId=self.pool),
            "SetIdentityPoolConfiguration": lambda c: c.set_identity_pool_configuration(IdentityPoolId=self.pool),
            "GetCognitoEvents": lambda c: c.get_cognito_events(IdentityPoolId=self.pool),
            "SetCognitoEvents": lambda c: c.set_cognito_events(
                IdentityPoolId=self.pool, Events={"SyncTrigger": SYNC_TRIGGER_ARN}),
            "BulkPublish": lambda c: c.bulk_publish(IdentityPoolId=self.pool),
            "GetBulkPublishDetails": lambda c: c.get_bulk_publish_details(IdentityPoolId=self.pool),
        }
        for operation, attempt in pool_operations.items():
            for label, client in (("ALICE", alice), ("BOB", bob)):
                with self.subTest(f"{label}'s key: {operation}"):
                    with self.assert_error(client, "NotAuthorizedException", 403):
                        attempt(client)

        # Bad credentials.
        for label, key in (("wrong secret", ("AKIAALICE", "not-alices-secret")),
                           ("unknown access key", ("AKIAUNKNOWN", "whatever"))):
            with self.subTest(label):
                client = make_client(self.url, key)
                with self.assert_error(client, "NotAuthorizedException", 403):
                    client.list_datasets(IdentityPoolId=self.pool, IdentityId=ALICE)

        list_url = self.url + datasets_path(ALICE)

        # The hand-signed request is right when signed now...
        status, _, body = send_signed(sign("GET", list_url))
        self.assertEqual(status, 200, body)
        self.assertIn("Datasets", json.loads(body))

        # ... and refused when signed ten minutes ago.
        stale = (datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
                 - datetime.timedelta(minutes=10))
        stale_request = sign("GET", list_url, signing_time=stale)
        self.assertTrue(stale_request.headers["X-Amz-Date"].startswith(stale.strftime("%Y%m%dT%H%M")))
        self.assert_raw_not_authorized(*send_signed(stale_request))

        # No Authorization header at all.
        self.assert_raw_not_authorized(*send_raw("GET", list_url))

        # A body changed after signing (same length, still a valid request).
        tampered_name = self.dataset("-tamper")
        token = self.session_token(alice, ALICE, tampered_name)
        signed_body = json.dumps({"SyncSessionToken": token,
                                  "RecordPatches": [replace("k", "signed", 0)]}).encode()
        forged_body = signed_body.replace(b'"signed"', b'"forged"')
        self.assertEqual(len(forged_body), len(signed_body))
        self.assertNotEqual(forged_body, signed_body)
        update_url = self.url + datasets_path(ALICE) + "/" + quoted(tampered_name)
        update_request = sign("POST", update_url, body=signed_body)
        self.assert_raw_not_authorized(*send_signed(update_request, body=forged_body))
        listed = alice.list_records(IdentityPoolId=self.pool, IdentityId=ALICE, DatasetName=tampered_name)
        self.assertIs(listed["DatasetExists"], False)
        self.assertEqual(listed.get("Records", []), [])

        # The same request with the body it was signed over goes through.
        status, _, body = send_signed(update_request)
        self.assertEqual(status, 200, body)
        records, _ = self.records(alice, ALICE, tampered_name)
        self.assertEqual(records["k"]["Value"], "signed")

    # ---- 12. isolation between identities

    def test_12_identities_are_isolated(self):
        name = self.dataset()
        alice_only = self.dataset("-alice")
        self.update(self.alice, ALICE, alice_only, [replace("k", "alice", 0)])
        # The same dataset name on both identities: two independent datasets.
        self.update(self.alice, ALICE, name, [replace("k", "alice", 0)])
        self.update(self.bob, BOB, name, [replace("k", "bob", 0)])

        bobs = self.list_datasets(self.bob, BOB)
        bob_names = [d["DatasetName"] for page in bobs for d in page]
        self.assertNotIn(alice_only, bob_names)
        self.assertIn(name, bob_names)
        for page in bobs:
            for dataset in page:
                if "IdentityId" in dataset:
                    self.assertEqual(dataset["IdentityId"], BOB, dataset)

        alice_records, _ = self.records(self.alice, ALICE, name)
        bob_records, _ = self.records(self.bob, BOB, name)
        self.assertEqual(alice_records["k"]["Value"], "alice")
        self.assertEqual(bob_records["k"]["Value"], "bob")
        self.assertEqual(alice_records["k"]["SyncCount"], 1)
        self.assertEqual(bob_records["k"]["SyncCount"], 1)

        # The developer key reaches both identities.
        self.assertIn(alice_only, self.dataset_names(self.dev, ALICE))
        self.assertNotIn(alice_only, self.dataset_names(self.dev, BOB))


def load_tests(loader, standard_tests, pattern):
    """Runs the tests in reverse order when OFFLINE_SYNC_TEST_ORDER=reverse (`make cognito-test`
    runs both orders: no test may depend on another having run first)."""
    if os.environ.get("OFFLINE_SYNC_TEST_ORDER") != "reverse":
        return standard_tests
    reverse = unittest.TestLoader()
    reverse.sortTestMethodsUsing = lambda a, b: (a < b) - (a > b)
    return reverse.loadTestsFromTestCase(CognitoSyncTests)


if __name__ == "__main__":
    unittest.main(verbosity=2)

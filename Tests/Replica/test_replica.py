"""Pulls served by a hot standby: read-your-writes, a standby that stops replaying, one that dies.

`make replica-test` (part of `make test`): the test starts a PostgreSQL 15 primary and an
asynchronous streaming standby, and two `offline-sync serve` instances on the primary with
`--postgres-replica` naming the standby. Then:

* devices of three identities each push a row and pull at once, alternating instances: every
  pull holds the device's own acknowledged write, and the standby serves the reads (the
  instances' `offline_sync_replica_reads_total` metric);
* the standby's replay is paused (`pg_wal_replay_pause()`): pushes go on, and a pull right
  after each still holds it (the instances wait briefly, then read the primary);
* the standby is promoted (no longer a copy), then stopped (immediate shutdown): pushes and
  pulls go on, on the primary;
* every device, pulling on with its own cursor, ends with exactly the rows written, none twice.

Run from the repository root, after building the server:

    OFFLINE_SYNC_BIN=.build/debug/offline-sync python3 -m unittest -v Tests/Replica/test_replica.py
"""

import os
import re
import secrets
import subprocess
import sys
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Failover"))
import test_failover as base  # noqa: E402 - the cluster, the instance and the request helpers

IDENTITIES = 3
ROUNDS = 40


class Device:
    """One device of an identity: its cursor and what it pulled."""

    def __init__(self, identity, token):
        self.identity, self.token = identity, token
        self.cursor, self.rows, self.repeats, self.written = None, {}, [], {}

    def push(self, base_url, item):
        operation = {"id": "op-" + item, "table": "todos", "itemId": item, "kind": "insert", "item": {"id": item, "fields": {"n": 1}}}
        answer = base.post(base_url, self.token, "/v1/push", {"operations": [operation]})
        if not answer or answer["results"][0].get("outcome") != "applied":
            raise AssertionError("push of %s not applied: %r" % (item, answer))
        self.written[item] = answer["results"][0]["record"]["version"]

    def pull(self, base_url):
        """Pulls to the end; returns the ids received."""
        received = []
        for _ in range(100):
            body = {"table": "todos"}
            if self.cursor:
                body["cursor"] = self.cursor
            page = base.post(base_url, self.token, "/v1/pull", body)
            if page is None:
                raise AssertionError("a pull failed")
            for record in page["records"]:
                if record["id"] in self.rows:
                    self.repeats.append(record["id"])
                self.rows[record["id"]] = record["version"]
                received.append(record["id"])
            self.cursor = page["nextCursor"]
            if page["remaining"] == 0:
                return received
        raise AssertionError("a pull did not end within 100 pages")


class ReplicaTests(unittest.TestCase):
    def test_pulls_on_a_standby(self):
        binary = os.environ.get("OFFLINE_SYNC_BIN")
        if not binary:
            raise RuntimeError("set OFFLINE_SYNC_BIN to the offline-sync binary")
        binary = os.path.abspath(binary)
        # Asynchronous: the primary commits without the standby (which the test stops).
        cluster = base.Cluster(synchronous=False)
        instances = []
        try:
            cluster.start()
            secret = secrets.token_hex(32)
            # A standby not caught up within the wait is passed over for a second: at the
            # default 100 ms, one replay stall of a busy machine (a checkpoint's fsync) sends a
            # second of pulls to the primary. The test asks whether the standby serves reads,
            # not how fast it replays, so it waits up to a second.
            primary = ("postgres://postgres:%s@127.0.0.1:%d/postgres?connect_timeout=2&schema=osync_replica&replica-wait-ms=1000"
                       % (cluster.password, cluster.ports[0]))
            standby = "postgres://postgres:%s@127.0.0.1:%d/postgres?connect_timeout=2" % (cluster.password, cluster.ports[1])
            metrics_key = secrets.token_hex(16)
            for n in (1, 2):
                instances.append(base.Instance(binary, primary, os.path.join(cluster.root, "serve-%d" % n), secret,
                                               extra=["--postgres-replica", standby, "--metrics-key", metrics_key]))

            def reads_served_by():
                """Both instances' store reads, by what served them."""
                totals = {"replica": 0, "primary": 0}
                for instance in instances:
                    request = urllib.request.Request(instance.base + "/metrics", headers={"Authorization": "Bearer " + metrics_key})
                    with urllib.request.urlopen(request, timeout=10) as response:
                        text = response.read().decode()
                    for server in totals:
                        match = re.search(r'^offline_sync_replica_reads_total\{served_by="%s"\} (\d+)' % server, text, re.M)
                        self.assertIsNotNone(match, "no replica read count in /metrics")
                        totals[server] += int(match.group(1))
                return totals
            devices = []
            for number in range(IDENTITIES):
                identity = "identity-%d" % number
                minted = subprocess.run([binary, "token", "--identity", identity, "--data", os.path.join(cluster.root, "serve-1")],
                                        capture_output=True, text=True, timeout=60, env=dict(os.environ, OFFLINE_SYNC_TOKEN_SECRET=secret))
                self.assertEqual(minted.returncode, 0, minted.stderr)
                devices.append(Device(identity, minted.stdout.strip()))

            def rounds(phase, count):
                for n in range(count):
                    for index, device in enumerate(devices):
                        item = "%s-%s-%d" % (device.identity, phase, n)
                        device.push(instances[(n + index) % 2].base, item)
                        received = device.pull(instances[(n + index + 1) % 2].base)
                        self.assertIn(item, received, "%s's pull right after its push did not hold it (%s)" % (device.identity, phase))

            # The standby serves the pulls (a pull right after a push may wait a moment for the
            # standby to replay it; one whose wait ran out, a first connection's, goes to the
            # primary).
            before = reads_served_by()
            rounds("streaming", ROUNDS)
            streaming = {server: count - before[server] for server, count in reads_served_by().items()}
            self.assertGreaterEqual(streaming["replica"], ROUNDS * IDENTITIES * 9 // 10, "the standby did not serve the pulls: %r" % streaming)

            # Replay paused: every pull still holds its device's write (read on the primary).
            cluster.sql(cluster.ports[1], "SELECT pg_wal_replay_pause()")
            deadline = time.monotonic() + 30
            while cluster.sql(cluster.ports[1], "SELECT pg_get_wal_replay_pause_state()").strip() != "paused":
                self.assertLess(time.monotonic(), deadline, "the standby's replay did not pause")
                time.sleep(0.05)
            before = reads_served_by()
            began = time.monotonic()
            rounds("paused", ROUNDS // 4)
            paused_seconds = time.monotonic() - began
            paused = {server: count - before[server] for server, count in reads_served_by().items()}
            self.assertGreaterEqual(paused["primary"], (ROUNDS // 4) * IDENTITIES, "pulls behind the paused standby: %r" % paused)
            cluster.sql(cluster.ports[1], "SELECT pg_wal_replay_resume()")

            # The standby promoted (a failover elsewhere, or an operator's mistake): it is no
            # longer a copy of the primary, and the primary serves everything.
            cluster.promote()
            before = reads_served_by()
            rounds("promoted", ROUNDS // 4)
            promoted = {server: count - before[server] for server, count in reads_served_by().items()}
            self.assertEqual(promoted["replica"], 0, "a promoted standby served reads: %r" % promoted)

            # The standby gone: the primary serves everything.
            subprocess.run(cluster.as_owner + [os.path.join(cluster.bindir, "pg_ctl"), "-D", cluster.standby, "-m", "immediate", "-w", "stop"],
                           capture_output=True, timeout=60, check=True)
            rounds("down", ROUNDS // 4)

            for device in devices:
                fresh = Device(device.identity, device.token)
                fresh.pull(instances[0].base)
                device.pull(instances[1].base)
                self.assertEqual(device.rows, device.written, "%s's device differs from what it wrote" % device.identity)
                self.assertEqual(device.repeats, [], "%s's device was handed rows twice" % device.identity)
                self.assertEqual(fresh.rows, device.written, "%s: a fresh pull differs from what was written" % device.identity)
            print("\nreplica: %d pushes, each followed at once by a pull on the other instance that held it; while streaming, "
                  "reads served by the standby %d, by the primary %d; with its replay paused, by the standby %d, by the primary %d "
                  "(%d rounds in %.2f s: a standby not caught up within 100 ms is passed over for a second); promoted, by the primary %d; "
                  "stopped, the primary served"
                  % (sum(len(device.written) for device in devices), streaming["replica"], streaming["primary"], paused["replica"],
                     paused["primary"], (ROUNDS // 4) * IDENTITIES, paused_seconds, promoted["primary"]))
        finally:
            for instance in instances:
                instance.stop()
            cluster.stop()


if __name__ == "__main__":
    unittest.main()

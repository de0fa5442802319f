"""A PostgreSQL primary that dies under writers, and its synchronous standby promoted.

The short form of the failover test (`make failover-test`, part of `make test`): the test
starts its own primary and a streaming standby in synchronous mode (PostgreSQL 15 from
Debian's packages), two `offline-sync serve` instances that find the primary themselves
through libpq's multi-host connection string (`target_session_attrs=read-write`), writers
that push one new row at a time through both instances, and readers that pull with their
cursors while they write. Then it kills the primary's postmaster (SIGKILL) and promotes the
standby with `pg_ctl promote`. Afterwards:

* every operation an instance answered `applied` is on the new primary, exactly once;
* every operation that failed during the failover, sent again with its id, is applied once;
* every reader, pulling on with the cursor it held, ends with exactly the rows written
  (none skipped, none twice);
* the time from the kill to the first applied push sent after the promotion, and the longest
  stretch without an applied push, are printed (they include the test's own pause of 1 s
  before promoting, which a failover manager's detection replaces).

Run from the repository root, after building the server:

    OFFLINE_SYNC_BIN=.build/debug/offline-sync python3 -m unittest -v Tests/Failover/test_failover.py
"""

import json
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

IDENTITIES = 3
WRITERS_PER_IDENTITY = 2   # two devices of one identity: its pushes commit out of their start order
SECONDS_BEFORE_KILL = 3.0
SECONDS_BEFORE_PROMOTE = 1.0
SECONDS_AFTER_RECOVERY = 3.0


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def postgres_bindir():
    base = "/usr/lib/postgresql"
    versions = sorted((entry for entry in os.listdir(base) if entry.isdigit()), key=int) if os.path.isdir(base) else []
    for version in reversed(versions):
        path = os.path.join(base, version, "bin")
        if os.access(os.path.join(path, "initdb"), os.X_OK):
            return path
    raise RuntimeError("PostgreSQL server binaries not found under /usr/lib/postgresql (Debian's postgresql package)")


class Cluster:
    """A primary and a streaming standby (synchronous unless told otherwise) in one temporary directory."""

    def __init__(self, synchronous=True):
        self.synchronous = synchronous
        self.bindir = postgres_bindir()
        self.root = tempfile.mkdtemp(prefix="offline-sync-failover.")
        os.chmod(self.root, 0o755)
        self.as_owner = []
        self.owner = None
        if os.geteuid() == 0:
            self.owner = pwd.getpwnam("postgres")
            os.chown(self.root, self.owner.pw_uid, self.owner.pw_gid)
            self.as_owner = ["runuser", "-u", "postgres", "--"]
        self.password = secrets.token_hex(16)
        self.ports = [free_port(), free_port()]
        self.primary = os.path.join(self.root, "primary")
        self.standby = os.path.join(self.root, "standby")

    def run(self, *command, env=None):
        result = subprocess.run(self.as_owner + list(command), capture_output=True, text=True, timeout=120,
                                env=dict(os.environ, **(env or {})))
        if result.returncode != 0:
            raise RuntimeError("%s failed (%s): %s %s" % (command[0], result.returncode, result.stdout, result.stderr))
        return result.stdout

    def start(self):
        pwfile = os.path.join(self.root, "pwfile")
        with open(pwfile, "w") as file:
            file.write(self.password + "\n")
        if self.owner:
            os.chown(pwfile, self.owner.pw_uid, self.owner.pw_gid)
        self.run(os.path.join(self.bindir, "initdb"), "-D", self.primary, "-U", "postgres", "--pwfile=" + pwfile,
                 "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8")
        os.remove(pwfile)
        # synchronous_standby_names on the command line, not in the configuration files, which
        # pg_basebackup copies: the promoted standby must not wait for a standby of its own.
        self.pg_ctl_start(self.primary, self.ports[0], "-c synchronous_standby_names=standby1" if self.synchronous else "")
        self.run(os.path.join(self.bindir, "pg_basebackup"), "-h", "127.0.0.1", "-p", str(self.ports[0]), "-U", "postgres",
                 "-D", self.standby, "-R", "-X", "stream", "-C", "-S", "standby1", env={"PGPASSWORD": self.password})
        self.pg_ctl_start(self.standby, self.ports[1], "-c cluster_name=standby1")
        deadline = time.monotonic() + 60
        while self.sql(self.ports[0], "SELECT sync_state FROM pg_stat_replication").strip() != ("sync" if self.synchronous else "async"):
            if time.monotonic() > deadline:
                raise RuntimeError("the standby did not stream within 60 s")
            time.sleep(0.2)

    def pg_ctl_start(self, data, port, extra):
        self.run(os.path.join(self.bindir, "pg_ctl"), "-D", data, "-l", data + ".log", "-w", "-t", "60", "-o",
                 "-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=200 %s" % (port, self.root, extra), "start")

    def sql(self, port, statement):
        return self.run(os.path.join(self.bindir, "psql"), "-h", self.root, "-p", str(port), "-U", "postgres", "-d", "postgres",
                        "-Atc", statement)

    def kill_primary(self):
        with open(os.path.join(self.primary, "postmaster.pid")) as file:
            pid = int(file.readline())
        os.kill(pid, signal.SIGKILL)

    def promote(self):
        self.run(os.path.join(self.bindir, "pg_ctl"), "-D", self.standby, "-w", "-t", "60", "promote")

    def url(self, schema):
        # With a statement timeout: the store must still never let it cut a COMMIT that waits
        # for the standby.
        return ("postgres://postgres:%s@127.0.0.1:%d,127.0.0.1:%d/postgres?target_session_attrs=read-write&connect_timeout=2"
                "&statement-timeout-ms=5000&schema=%s") % (self.password, self.ports[0], self.ports[1], schema)

    def stored_rows(self, port, schema, table):
        """How many rows, and distinct ids, `table` holds in the store's schema."""
        number = self.sql(port, "SELECT num FROM %s.\"__osync_catalog\" WHERE name = convert_to('%s', 'UTF8')" % (schema, table)).strip()
        counts = self.sql(port, "SELECT count(*), count(DISTINCT id) FROM %s.osync_t%s" % (schema, number)).strip()
        return tuple(int(value) for value in counts.split("|"))

    def stop(self):
        for data in (self.primary, self.standby):
            if os.path.exists(os.path.join(data, "postmaster.pid")):
                subprocess.run(self.as_owner + [os.path.join(self.bindir, "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop"],
                               capture_output=True, timeout=60)
        # The killed primary's children exit once they notice the postmaster is gone.
        shutil.rmtree(self.root, ignore_errors=True)


class Instance:
    """One `offline-sync serve` over the cluster."""

    def __init__(self, binary, store, data, secret, extra=()):
        os.makedirs(data, exist_ok=True)
        self.log_path = os.path.join(data, "server.log")
        self.log = open(self.log_path, "wb")
        env = dict(os.environ, OFFLINE_SYNC_TOKEN_SECRET=secret)
        for name in ("OFFLINE_SYNC_STORE", "OFFLINE_SYNC_HOST", "OFFLINE_SYNC_PORT", "OFFLINE_SYNC_DATA"):
            env.pop(name, None)
        self.process = subprocess.Popen([binary, "serve", "--port", "0", "--data", data, "--store", store, "--log-level", "warning"] + list(extra),
                                        cwd=data, env=env, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            with open(self.log_path, "rb") as file:
                match = re.search(rb"listening on (http://\S+)", file.read())
            if match:
                self.base = match.group(1).decode().rstrip("/")
                return
            if self.process.poll() is not None or time.monotonic() > deadline:
                with open(self.log_path, errors="replace") as file:
                    output = file.read()[-3000:]
                self.stop()
                raise RuntimeError("the server did not start:\n" + output)
            time.sleep(0.1)

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


def post(base, token, path, body, timeout=10):
    """The JSON answer, or None when the request failed (an error status, a refused or cut connection)."""
    request = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError, ValueError):
        return None


class FailoverTests(unittest.TestCase):
    def test_primary_killed_under_writers(self):
        binary = os.environ.get("OFFLINE_SYNC_BIN")
        if not binary:
            raise RuntimeError("set OFFLINE_SYNC_BIN to the offline-sync binary")
        binary = os.path.abspath(binary)
        cluster = Cluster()
        instances = []
        try:
            cluster.start()
            secret = secrets.token_hex(32)
            store = cluster.url("osync_failover")
            for n in (1, 2):
                instances.append(Instance(binary, store, os.path.join(cluster.root, "serve-%d" % n), secret))
            tokens = {}
            for number in range(IDENTITIES):
                identity = "identity-%d" % number
                minted = subprocess.run([binary, "token", "--identity", identity, "--data", os.path.join(cluster.root, "serve-1")],
                                        capture_output=True, text=True, timeout=60,
                                        env=dict(os.environ, OFFLINE_SYNC_TOKEN_SECRET=secret))
                self.assertEqual(minted.returncode, 0, minted.stderr)
                tokens[identity] = minted.stdout.strip()

            stop = threading.Event()
            lock = threading.Lock()
            acknowledged = {identity: {} for identity in tokens}   # item -> version, as the answer gave it
            retried = {identity: 0 for identity in tokens}
            first_after_kill = []
            killed_at, promoted_at, applied_at = [], [], []

            give_up = time.monotonic() + 120

            def write(identity, index):
                token, sent = tokens[identity], 0
                while not stop.is_set():
                    item = "%s-w%d-%d" % (identity, index, sent)
                    operation = {"id": "op-" + item, "table": "todos", "itemId": item, "kind": "insert",
                                 "item": {"id": item, "fields": {"n": sent}}}
                    attempt = 0
                    while True:
                        # Alternate instances; a failed send goes again, unchanged, to the other one.
                        began = time.monotonic()
                        answer = post(instances[(sent + attempt + index) % 2].base, token, "/v1/push", {"operations": [operation]})
                        result = (answer or {}).get("results", [{}])[0] if answer else {}
                        if result.get("outcome") == "applied":
                            with lock:
                                acknowledged[identity][item] = result["record"]["version"]
                                applied_at.append(time.monotonic())
                                # The first push sent once the standby was promoted.
                                if promoted_at and began >= promoted_at[0] and not first_after_kill:
                                    first_after_kill.append(time.monotonic() - killed_at[0])
                            break
                        self.assertIsNone(answer, "a push was answered but not applied: %r" % answer)
                        attempt += 1
                        with lock:
                            retried[identity] += 1
                        if time.monotonic() > give_up:
                            raise AssertionError("%s was not applied within 120 s" % item)
                        time.sleep(0.1)
                    sent += 1

            readers = {identity: {"cursor": None, "rows": {}, "pulls": 0, "seen": set(), "repeats": []} for identity in tokens}

            def read(identity, index):
                state = readers[identity]
                while not stop.is_set():
                    pull_once(identity, state, instances[(state["pulls"] + index) % 2].base)
                    time.sleep(0.05)

            def pull_once(identity, state, base):
                body = {"table": "todos"}
                if state["cursor"]:
                    body["cursor"] = state["cursor"]
                page = post(base, tokens[identity], "/v1/pull", body)
                state["pulls"] += 1
                if page is None:
                    return None
                for record in page["records"]:
                    state["rows"][record["id"]] = record["version"]
                    # Rows are written once each here: a cursor that hands one out twice is wrong.
                    if record["id"] in state["seen"]:
                        state["repeats"].append(record["id"])
                    state["seen"].add(record["id"])
                state["cursor"] = page["nextCursor"]
                return page["remaining"]

            failures = []

            def guarded(function, *args):
                try:
                    function(*args)
                except BaseException as error:  # noqa: BLE001 - reported below
                    failures.append(error)
                    stop.set()

            threads = [threading.Thread(target=guarded, args=(write, identity, device), daemon=True)
                       for identity in tokens for device in range(WRITERS_PER_IDENTITY)]
            threads += [threading.Thread(target=guarded, args=(read, identity, n), daemon=True) for n, identity in enumerate(tokens)]
            for thread in threads:
                thread.start()

            time.sleep(SECONDS_BEFORE_KILL)
            before_kill = sum(len(items) for items in acknowledged.values())
            killed_at.append(time.monotonic())
            cluster.kill_primary()
            time.sleep(SECONDS_BEFORE_PROMOTE)
            cluster.promote()
            promoted_at.append(time.monotonic())
            deadline = time.monotonic() + 60
            while not first_after_kill and time.monotonic() < deadline and not failures:
                time.sleep(0.05)
            self.assertEqual(failures, [])
            self.assertTrue(first_after_kill, "no push was applied within 60 s of the promotion")
            time.sleep(SECONDS_AFTER_RECOVERY)
            stop.set()
            join_by = time.monotonic() + 150
            for thread in threads:
                thread.join(timeout=max(0.0, join_by - time.monotonic()))
            self.assertFalse(any(thread.is_alive() for thread in threads), "a writer or reader did not stop")
            self.assertEqual(failures, [])

            # Every reader pulls on with its own cursor to the end, through the other instance.
            for n, identity in enumerate(tokens):
                state = readers[identity]
                for _ in range(200):
                    remaining = pull_once(identity, state, instances[(n + 1) % 2].base)
                    if remaining == 0:
                        break
                    if remaining is None:
                        time.sleep(0.2)
                self.assertEqual(state["rows"], acknowledged[identity],
                                 "%s's reader: missing %s, extra %s" % (
                                     identity, sorted(set(acknowledged[identity]) - set(state["rows"]))[:10],
                                     sorted(set(state["rows"]) - set(acknowledged[identity]))[:10]))
                self.assertEqual(state["repeats"], [], "%s's reader was handed rows twice" % identity)
            # Exactly once on the new primary: a fresh pull of each identity is its acknowledged
            # rows, at their versions, and the table holds those rows and no others.
            for identity, items in acknowledged.items():
                fresh = {"cursor": None, "rows": {}, "pulls": 0, "seen": set(), "repeats": []}
                for _ in range(400):
                    if pull_once(identity, fresh, instances[0].base) == 0:
                        break
                self.assertEqual(fresh["rows"], items, "%s: the rows on the new primary differ from the acknowledged ones" % identity)
            total = sum(len(items) for items in acknowledged.values())
            self.assertEqual(cluster.stored_rows(cluster.ports[1], "osync_failover", "todos"), (total, total))
            # The longest stretch without an applied push, from the kill on.
            times = sorted(t for t in applied_at if t >= killed_at[0] - 0.5)
            outage = max((later - earlier for earlier, later in zip(times, times[1:])), default=0.0)
            print("\nfailover: %d identities with %d devices each, %d operations applied (%d before the kill), %d sends retried, 0 lost, 0 applied twice; "
                  "promoted %.1f s after the primary's SIGKILL; the first push sent after the promotion applied %.2f s after the kill; "
                  "longest stretch without an applied push %.2f s"
                  % (IDENTITIES, WRITERS_PER_IDENTITY, total, before_kill, sum(retried.values()), SECONDS_BEFORE_PROMOTE, first_after_kill[0], outage))
        finally:
            for instance in instances:
                instance.stop()
            cluster.stop()


if __name__ == "__main__":
    unittest.main()

"""A managed PostgreSQL failover under writers, readers and live change channels, on hosts.

The managed form of the failover test (`make ha-test`; needs root for network namespaces):

* three hosts, each a network namespace joined by a bridge: a pg_auto_failover monitor and two
  PostgreSQL 15 data nodes, a primary and a synchronous standby, kept by `pg_autoctl`
  (Debian's `postgresql-15-auto-failover`), with detection timeouts shortened for a test;
* two `offline-sync serve` instances on the test's own host, which find the primary through
  libpq's multi-host connection string (`target_session_attrs=read-write`, TCP keepalives
  and `tcp_user_timeout`, so a connection to a host that vanished fails rather than hangs);
* per identity, two devices pushing one new row at a time through both instances, a reader
  pulling with its cursor, and a device that pulls only when its change channel (the
  server-sent event stream) tells it to, or when the channel opens again.

Two failures, one after the other: the primary's host dies (SIGKILL of every process in its
namespace, its postmaster and its keeper); the monitor promotes the standby; the dead host's
keeper is started again and rejoins as the standby. Then the new primary's host is cut off
the network (its link set down); the monitor promotes the other node again. After each:

* every operation an instance answered `applied` is on the primary exactly once;
* every send that failed is sent again with its id and applied once;
* every reader, pulling on with its cursor, ends with exactly the rows written;
* every change channel opened again, and every channel-driven device ends with exactly the
  rows written without any pull but those its channel asked for;
* the time from the failure to the first applied push sent after it is printed, with the
  configuration that gave it.

Run from the repository root, as root, after building the server:

    OFFLINE_SYNC_BIN=.build/debug/offline-sync python3 -m unittest -v Tests/HA/test_ha.py
"""

import http.client
import json
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Failover"))
import test_failover as base  # noqa: E402 - the shared cluster-free helpers: Instance, post, postgres_bindir

IDENTITIES = 3
WRITERS_PER_IDENTITY = 2
SECONDS_BEFORE_FAILURE = 4.0
SECONDS_AFTER_RECOVERY = 3.0
SUBNET = "10.89.0"
PREFIX = "osha"

# pg_auto_failover's monitor: a node is unhealthy after 3 s without an answer to checks made
# every second; a primary that cannot be reached is given 8 s to demote before its standby is
# promoted. A keeper that reaches neither the monitor nor its standby for 5 s stops its
# PostgreSQL (network_partition_timeout), before that promotion: never two primaries.
MONITOR_SETTINGS = {
    "pgautofailover.health_check_period": "1000",
    "pgautofailover.health_check_timeout": "1000",
    "pgautofailover.health_check_max_retries": "1",
    "pgautofailover.health_check_retry_delay": "500",
    "pgautofailover.node_considered_unhealthy_timeout": "3000",
    "pgautofailover.primary_demote_timeout": "8s",
}
KEEPER_SETTINGS = {"timeout.network_partition_timeout": "5"}
# libpq: at most 2 s per host to connect; a connection whose peer stopped answering fails in
# about 3 s (keepalives when idle, tcp_user_timeout when it sent something).
CONNECTION_PARAMETERS = ("target_session_attrs=read-write&connect_timeout=2&keepalives=1&keepalives_idle=1"
                         "&keepalives_interval=1&keepalives_count=2&tcp_user_timeout=3000&statement-timeout-ms=5000")


def run(command, timeout=120, check=True, env=None):
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    if check and result.returncode != 0:
        raise RuntimeError("%s failed (%s): %s %s" % (" ".join(command), result.returncode, result.stdout, result.stderr))
    return result.stdout


class Hosts:
    """Network namespaces on one bridge: `name` → address, with its link on the bridge side."""

    def __init__(self, names):
        self.bridge = PREFIX + "br"
        self.names = names
        self.address = {name: "%s.%d" % (SUBNET, 10 + n) for n, name in enumerate(names)}
        self.cleanup()
        run(["ip", "link", "add", self.bridge, "type", "bridge"])
        run(["ip", "addr", "add", SUBNET + ".1/24", "dev", self.bridge])
        run(["ip", "link", "set", self.bridge, "up"])
        for name in names:
            namespace, outside = self.namespace(name), self.link(name)
            run(["ip", "netns", "add", namespace])
            run(["ip", "link", "add", outside, "type", "veth", "peer", "name", "eth0", "netns", namespace])
            run(["ip", "link", "set", outside, "master", self.bridge])
            run(["ip", "link", "set", outside, "up"])
            run(["ip", "netns", "exec", namespace, "ip", "addr", "add", self.address[name] + "/24", "dev", "eth0"])
            run(["ip", "netns", "exec", namespace, "ip", "link", "set", "eth0", "up"])
            run(["ip", "netns", "exec", namespace, "ip", "link", "set", "lo", "up"])
            run(["ip", "netns", "exec", namespace, "ip", "route", "add", "default", "via", SUBNET + ".1"])

    def namespace(self, name):
        return "%s-%s" % (PREFIX, name)

    def link(self, name):
        return "%sv%s" % (PREFIX, name)

    def cut(self, name):
        run(["ip", "link", "set", self.link(name), "down"])

    def mend(self, name):
        run(["ip", "link", "set", self.link(name), "up"])

    def kill(self, name):
        """SIGKILL every process in the host's namespace: the host died."""
        pids = run(["ip", "netns", "pids", self.namespace(name)], check=False).split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass

    def cleanup(self, names=None):
        self.names = names or self.names
        self.bridge = PREFIX + "br"
        for name in self.names:
            self.kill(name)
            subprocess.run(["ip", "netns", "del", self.namespace(name)], capture_output=True)
            subprocess.run(["ip", "link", "del", self.link(name)], capture_output=True)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)


class Formation:
    """A pg_auto_failover monitor and two data nodes, one per host."""

    def __init__(self, hosts):
        self.hosts = hosts
        self.bindir = base.postgres_bindir()
        self.root = tempfile.mkdtemp(prefix="offline-sync-ha.")
        self.owner = pwd.getpwnam("postgres")
        os.chmod(self.root, 0o755)
        os.chown(self.root, self.owner.pw_uid, self.owner.pw_gid)
        # Each keeper's own files (configuration, state, pid) under the test's directory.
        self.env = dict(os.environ, HOME=self.root, XDG_CONFIG_HOME=self.root + "/config", XDG_DATA_HOME=self.root + "/data",
                        XDG_RUNTIME_DIR=self.root + "/run", PATH=self.bindir + ":" + os.environ.get("PATH", ""))
        for name in ("config", "data", "run"):
            os.makedirs(os.path.join(self.root, name), exist_ok=True)
            os.chown(os.path.join(self.root, name), self.owner.pw_uid, self.owner.pw_gid)
        self.port = {"monitor": 5441, "node1": 5442, "node2": 5443}
        self.keepers = {}

    def pgdata(self, name):
        return os.path.join(self.root, name)

    def as_postgres(self, host, *command):
        return ["ip", "netns", "exec", self.hosts.namespace(host), "runuser", "-u", "postgres", "--"] + list(command)

    def autoctl(self, host, *arguments, timeout=120, check=True):
        return run(self.as_postgres(host, "pg_autoctl", *arguments), timeout=timeout, check=check, env=self.env)

    def keep(self, host):
        """Starts (again) the host's keeper, which starts and watches its PostgreSQL."""
        log = open(self.pgdata(host) + ".keeper.log", "ab")
        self.keepers[host] = subprocess.Popen(self.as_postgres(host, "pg_autoctl", "run", "--pgdata", self.pgdata(host)),
                                              env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def monitor_uri(self):
        return "postgres://autoctl_node@%s:%d/pg_auto_failover?sslmode=disable" % (self.hosts.address["monitor"], self.port["monitor"])

    def monitor_sql(self, statement):
        return run(self.as_postgres("monitor", os.path.join(self.bindir, "psql"), "-h", "/var/run/postgresql",
                                    "-p", str(self.port["monitor"]), "-d", "pg_auto_failover", "-Atc", statement), env=self.env)

    def start(self):
        self.autoctl("monitor", "create", "monitor", "--pgdata", self.pgdata("monitor"), "--pgport", str(self.port["monitor"]),
                     "--hostname", self.hosts.address["monitor"], "--auth", "trust", "--no-ssl",
                     "--pgctl", os.path.join(self.bindir, "pg_ctl"))
        self.keep("monitor")
        self.wait(lambda: self.monitor_sql("SELECT 1").strip() == "1", 60, "the monitor did not start")
        for setting, value in MONITOR_SETTINGS.items():
            self.monitor_sql("ALTER SYSTEM SET %s = '%s'" % (setting, value))
        self.monitor_sql("SELECT pg_reload_conf()")
        for host in ("node1", "node2"):
            self.autoctl(host, "create", "postgres", "--pgdata", self.pgdata(host), "--pgport", str(self.port[host]),
                         "--hostname", self.hosts.address[host], "--name", host, "--monitor", self.monitor_uri(),
                         "--auth", "trust", "--no-ssl", "--pg-hba-lan", "--dbname", "postgres",
                         "--pgctl", os.path.join(self.bindir, "pg_ctl"), timeout=300)
            for setting, value in KEEPER_SETTINGS.items():
                self.autoctl(host, "config", "set", "--pgdata", self.pgdata(host), setting, value)
            self.keep(host)
            if host == "node1":
                self.wait(lambda: self.states().get("node1") == ("primary", "primary") or
                          self.states().get("node1") == ("single", "single"), 120, "node1 did not become the primary")
        self.wait_stable(120)

    def states(self):
        """node name → (reported state, goal state), as the monitor sees them."""
        rows = self.monitor_sql("SELECT nodename, reportedstate, goalstate FROM pgautofailover.node")
        return {name: (reported, goal) for name, reported, goal in (line.split("|") for line in rows.split())}

    def primary(self):
        for name, (reported, goal) in self.states().items():
            if reported == goal and reported in ("primary", "wait_primary", "single"):
                return name
        return None

    def wait_stable(self, seconds):
        """Until one node is primary and the other a secondary, both as the monitor wants."""
        self.wait(lambda: sorted(self.states().values()) == [("primary", "primary"), ("secondary", "secondary")],
                  seconds, "the formation did not settle on a primary and a secondary")

    def wait(self, condition, seconds, message):
        deadline = time.monotonic() + seconds
        while True:
            try:
                if condition():
                    return
            except RuntimeError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("%s within %d s: %s" % (message, seconds, self.describe()))
            time.sleep(0.25)

    def describe(self):
        try:
            return repr(self.states())
        except RuntimeError as error:
            return "monitor unreachable: %s" % error

    def url(self, schema):
        hosts = ",".join("%s:%d" % (self.hosts.address[host], self.port[host]) for host in ("node1", "node2"))
        return "postgres://postgres@%s/postgres?%s&schema=%s" % (hosts, CONNECTION_PARAMETERS, schema)

    def stored_rows(self, host, schema, table):
        """How many rows, and distinct ids, `table` holds in the store's schema on `host`."""
        def sql(statement):
            return run(self.as_postgres(host, os.path.join(self.bindir, "psql"), "-h", "/var/run/postgresql", "-p", str(self.port[host]),
                                        "-d", "postgres", "-Atc", statement), env=self.env).strip()
        number = sql("SELECT num FROM %s.\"__osync_catalog\" WHERE name = convert_to('%s', 'UTF8')" % (schema, table))
        return tuple(int(value) for value in sql("SELECT count(*), count(DISTINCT id) FROM %s.osync_t%s" % (schema, number)).split("|"))

    def stop(self):
        for process in self.keepers.values():
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
        for process in self.keepers.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def remove(self):
        if os.environ.get("OFFLINE_SYNC_HA_KEEP"):
            print("kept %s (OFFLINE_SYNC_HA_KEEP)" % self.root)
            return
        shutil.rmtree(self.root, ignore_errors=True)


class Channel:
    """A device that pulls only when its change channel says so, or when it opens again."""

    def __init__(self, identity, token, instances, stop, pull):
        self.identity, self.token, self.instances, self.stop, self.pull = identity, token, instances, stop, pull
        self.opened = []        # monotonic times the channel was subscribed
        self.closed = []        # monotonic times a subscribed channel ended, and how
        self.notices = 0
        self.response = None

    def run(self):
        attempt = 0
        while not self.stop.is_set():
            instance = self.instances[attempt % len(self.instances)]
            attempt += 1
            try:
                self.listen(instance.base)
                ended = "ended by the server"
            except (OSError, http.client.HTTPException, ValueError) as error:
                ended = repr(error)
            if self.opened and (not self.closed or self.closed[-1][0] < self.opened[-1]):
                self.closed.append((time.monotonic(), instance.base, ended))
            if not self.stop.is_set():
                time.sleep(0.2)

    def listen(self, base_url):
        host, port = base_url.split("//", 1)[1].split(":")
        # The stream carries a comment every 10 s: one silent for 30 s is dead.
        connection = http.client.HTTPConnection(host, int(port), timeout=30)
        try:
            connection.request("GET", "/v1/changes", headers={"Authorization": "Bearer " + self.token, "Accept": "text/event-stream"})
            response = connection.getresponse()
            if response.status != 200:
                return
            while not self.stop.is_set():
                line = response.readline()  # the body is chunked: its end is the last chunk
                if not line:
                    return      # the server ended the stream
                if not line.startswith(b"data:"):
                    continue    # comments keep the stream alive
                message = json.loads(line[5:])
                if message.get("type") == "subscribed":
                    self.opened.append(time.monotonic())
                    self.pull()     # caught up once per opening
                elif message.get("type") == "change" and message.get("table") == "todos":
                    self.notices += 1
                    self.pull()
        finally:
            connection.close()


class ManagedFailoverTests(unittest.TestCase):
    def test_host_killed_then_host_cut_off(self):
        binary = os.environ.get("OFFLINE_SYNC_BIN")
        if not binary:
            raise RuntimeError("set OFFLINE_SYNC_BIN to the offline-sync binary")
        if os.geteuid() != 0:
            self.skipTest("network namespaces need root")
        binary = os.path.abspath(binary)
        names = ["monitor", "node1", "node2"]
        hosts, formation, instances = None, None, []
        # Every thread the test starts stops when these are set, whatever ends the test: the
        # writers and readers first, the change channels once their devices caught up.
        self.stopping, self.channels_stopping = threading.Event(), threading.Event()
        try:
            hosts = Hosts(names)
            formation = Formation(hosts)
            formation.start()
            self.run_failovers(binary, hosts, formation, instances)
        finally:
            self.stopping.set()
            self.channels_stopping.set()
            for step in [instance.stop for instance in instances] + ([formation.stop] if formation else []):
                try:
                    step()
                except Exception as error:  # noqa: BLE001 - cleanup goes on
                    print("cleanup: %r" % error)
            (hosts or Hosts.__new__(Hosts)).cleanup(names)
            if formation:
                formation.remove()

    def run_failovers(self, binary, hosts, formation, instances):
        secret = secrets.token_hex(32)
        schema = "osync_ha"
        for n in (1, 2):
            instances.append(base.Instance(binary, formation.url(schema), os.path.join(formation.root, "serve-%d" % n), secret))
        tokens = {}
        for number in range(IDENTITIES):
            identity = "identity-%d" % number
            tokens[identity] = run([binary, "token", "--identity", identity, "--data", os.path.join(formation.root, "serve-1")],
                                   env=dict(os.environ, OFFLINE_SYNC_TOKEN_SECRET=secret)).strip()

        stop = self.stopping
        lock = threading.Lock()
        acknowledged = {identity: {} for identity in tokens}
        retried = {identity: 0 for identity in tokens}
        applied_at = []
        failures = []

        def write(identity, index):
            token, sent = tokens[identity], 0
            while not stop.is_set():
                item = "%s-w%d-%d" % (identity, index, sent)
                operation = {"id": "op-" + item, "table": "todos", "itemId": item, "kind": "insert",
                             "item": {"id": item, "fields": {"n": sent}}}
                attempt = 0
                while True:
                    began = time.monotonic()
                    answer = base.post(instances[(sent + attempt + index) % 2].base, token, "/v1/push", {"operations": [operation]})
                    result = (answer or {}).get("results", [{}])[0] if answer else {}
                    if result.get("outcome") == "applied":
                        with lock:
                            acknowledged[identity][item] = result["record"]["version"]
                            applied_at.append((began, time.monotonic()))
                        break
                    self.assertIsNone(answer, "a push was answered but not applied: %r" % answer)
                    attempt += 1
                    with lock:
                        retried[identity] += 1
                    if attempt > 1200:
                        raise AssertionError("%s was not applied after 1,200 sends" % item)
                    time.sleep(0.1)
                sent += 1

        def new_reader():
            return {"cursor": None, "rows": {}, "seen": set(), "repeats": [], "lock": threading.Lock()}

        def pull_once(identity, state, base_url):
            with state["lock"]:
                body = {"table": "todos"}
                if state["cursor"]:
                    body["cursor"] = state["cursor"]
                page = base.post(base_url, tokens[identity], "/v1/pull", body)
                if page is None:
                    return None
                for record in page["records"]:
                    state["rows"][record["id"]] = record["version"]
                    if record["id"] in state["seen"]:
                        state["repeats"].append(record["id"])
                    state["seen"].add(record["id"])
                state["cursor"] = page["nextCursor"]
                return page["remaining"]

        def pull_to_end(identity, state, base_url):
            for _ in range(100):
                remaining = pull_once(identity, state, base_url)
                if remaining == 0:
                    return True
                if remaining is None:
                    time.sleep(0.2)
            return False

        readers = {identity: new_reader() for identity in tokens}
        devices = {identity: new_reader() for identity in tokens}
        channels = {}

        def read(identity, index):
            state, pulls = readers[identity], 0
            while not stop.is_set():
                pull_once(identity, state, instances[(pulls + index) % 2].base)
                pulls += 1
                time.sleep(0.05)

        def guarded(function, *args):
            try:
                function(*args)
            except BaseException as error:  # noqa: BLE001 - reported below
                failures.append(error)
                stop.set()

        channel_stop = self.channels_stopping
        for n, identity in enumerate(tokens):
            device = devices[identity]
            ordered = instances[n % 2:] + instances[:n % 2]
            channels[identity] = Channel(identity, tokens[identity], ordered, channel_stop,
                                         lambda identity=identity, device=device, ordered=ordered: pull_to_end(identity, device, ordered[0].base)
                                         or pull_to_end(identity, device, ordered[1].base))
        threads = [threading.Thread(target=guarded, args=(write, identity, device), daemon=True)
                   for identity in tokens for device in range(WRITERS_PER_IDENTITY)]
        threads += [threading.Thread(target=guarded, args=(read, identity, n), daemon=True) for n, identity in enumerate(tokens)]
        channel_threads = [threading.Thread(target=guarded, args=(channel.run,), daemon=True) for channel in channels.values()]
        for thread in threads + channel_threads:
            thread.start()
        formation.wait(lambda: all(channel.opened for channel in channels.values()), 30, "the change channels did not open")

        figures = []
        started = time.monotonic()
        for failure in ("kill", "cut"):
            time.sleep(SECONDS_BEFORE_FAILURE)
            old = formation.primary()
            self.assertIsNotNone(old, "no primary before the failure: %s" % formation.describe())
            if failure == "kill":
                hosts.kill(old)
            else:
                hosts.cut(old)
            # From when the host is gone: a push that began a moment before may still commit.
            failed_at = time.monotonic()
            formation.wait(lambda: formation.primary() not in (None, old), 120, "no other node was promoted")
            promoted = time.monotonic() - failed_at
            formation.wait(lambda: any(began >= failed_at and applied >= failed_at for began, applied in applied_at) or failures,
                           60, "no push was applied after the failure")
            self.assertEqual(failures, [])
            first = min(applied for began, applied in applied_at if began >= failed_at) - failed_at
            formation.wait(lambda: all(any(t > failed_at for t in channel.opened) for channel in channels.values()) or failures,
                           60, "a change channel did not open again")
            times = sorted(applied for _, applied in applied_at if applied >= failed_at - 0.5)
            outage = max((later - earlier for earlier, later in zip(times, times[1:])), default=0.0)
            figures.append((failure, old, promoted, first, outage,
                            max(min(t for t in channel.opened if t > failed_at) for channel in channels.values()) - failed_at))
            if failure == "kill":
                # The dead host comes back: its keeper restarts PostgreSQL, which rejoins as
                # the standby (pg_rewind), and the formation is whole again before the cut.
                formation.keep(old)
                formation.wait_stable(180)
            else:
                hosts.mend(old)
        time.sleep(SECONDS_AFTER_RECOVERY)
        stop.set()
        join_by = time.monotonic() + 150
        for thread in threads:
            thread.join(timeout=max(0.0, join_by - time.monotonic()))
        self.assertFalse(any(thread.is_alive() for thread in threads), "a writer or reader did not stop")
        self.assertEqual(failures, [])

        # Channel-driven devices catch up from their notices alone.
        formation.wait(lambda: all(devices[identity]["rows"] == acknowledged[identity] for identity in tokens) or failures, 60,
                       "a channel-driven device did not receive every row: %s" % {
                           identity: len(set(acknowledged[identity]) - set(devices[identity]["rows"])) for identity in tokens})
        channel_stop.set()
        for identity in tokens:
            self.assertGreater(channels[identity].notices, 0, "%s's channel carried no change notice" % identity)
            self.assertEqual(devices[identity]["rows"], acknowledged[identity])
            self.assertEqual(devices[identity]["repeats"], [], "%s's device was handed rows twice" % identity)
        for n, identity in enumerate(tokens):
            state = readers[identity]
            self.assertTrue(pull_to_end(identity, state, instances[(n + 1) % 2].base))
            self.assertEqual(state["rows"], acknowledged[identity],
                             "%s's reader: missing %s, extra %s" % (
                                 identity, sorted(set(acknowledged[identity]) - set(state["rows"]))[:10],
                                 sorted(set(state["rows"]) - set(acknowledged[identity]))[:10]))
            self.assertEqual(state["repeats"], [], "%s's reader was handed rows twice" % identity)
        for identity, items in acknowledged.items():
            fresh = new_reader()
            self.assertTrue(pull_to_end(identity, fresh, instances[0].base))
            self.assertEqual(fresh["rows"], items, "%s: the rows on the primary differ from the acknowledged ones" % identity)
        total = sum(len(items) for items in acknowledged.values())
        formation.wait(lambda: formation.primary() is not None, 60, "no primary after the cut host came back")
        self.assertEqual(formation.stored_rows(formation.primary(), schema, "todos"), (total, total))
        print("\nmanaged failover (pg_auto_failover 2.0, PostgreSQL 15, synchronous standby; monitor %s; keeper %s; libpq %s): "
              "%d identities, %d devices each, %d operations applied, %d sends retried, 0 lost, 0 applied twice"
              % (MONITOR_SETTINGS, KEEPER_SETTINGS, CONNECTION_PARAMETERS, IDENTITIES, WRITERS_PER_IDENTITY, total, sum(retried.values())))
        for identity, channel in channels.items():
            print("  %s's channel: opened at %s; ended at %s" % (
                identity, ["%.1f" % (t - started) for t in channel.opened],
                ["%.1f %s %s" % (t - started, where, how) for t, where, how in channel.closed]))
        for failure, old, promoted, first, outage, reopened in figures:
            print("  %s of %s's host: standby promoted %.1f s after, first push sent after the failure applied %.2f s after it, "
                  "longest stretch without an applied push %.2f s, every change channel open again %.2f s after it"
                  % ("SIGKILL of every process" if failure == "kill" else "network cut", old, promoted, first, outage, reopened))


if __name__ == "__main__":
    unittest.main()

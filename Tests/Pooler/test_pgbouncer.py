"""`offline-sync serve` behind PgBouncer (Debian's pgbouncer package), in front of the
PostgreSQL server `Scripts/with-postgres.sh` started.

* transaction pooling (`pool_mode = transaction`) breaks the session state the server
  relies on (LISTEN for the change notices between instances, SET, prepared statements):
  the server refuses to start, with a message naming the pool mode;
* session pooling (`pool_mode = session`) keeps it: the server starts, and a push and a
  pull go through the pooler.

Run from the repository root, after building the server, inside Scripts/with-postgres.sh:

    OFFLINE_SYNC_BIN=.build/debug/offline-sync Scripts/with-postgres.sh \
        python3 -m unittest -v Tests/Pooler/test_pgbouncer.py
"""

import json
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.parse
import urllib.request

STARTUP_TIMEOUT = 60.0


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def pgbouncer_binary():
    for candidate in ("/usr/sbin/pgbouncer", shutil.which("pgbouncer")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise RuntimeError("pgbouncer is not installed (Debian's pgbouncer package; `make deps` installs it)")


class PgBouncerTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        binary = os.environ.get("OFFLINE_SYNC_BIN")
        url = os.environ.get("OFFLINE_SYNC_TEST_POSTGRES_URL")
        if not binary or not url:
            raise RuntimeError("set OFFLINE_SYNC_BIN and OFFLINE_SYNC_TEST_POSTGRES_URL (run inside Scripts/with-postgres.sh)")
        cls.bin = os.path.abspath(binary)
        cls.pgbouncer = pgbouncer_binary()
        parsed = urllib.parse.urlsplit(url)
        cls.pg = {"user": urllib.parse.unquote(parsed.username or "postgres"),
                  "password": urllib.parse.unquote(parsed.password or ""),
                  "host": parsed.hostname or "127.0.0.1", "port": parsed.port or 5432,
                  "db": parsed.path.lstrip("/") or "postgres"}
        cls.run_id = os.environ.get("OFFLINE_SYNC_TEST_RUN", "local")

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="offline-sync-pgbouncer.")
        self.processes = []
        self.files = []

    def tearDown(self):
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        for file in self.files:
            file.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start_pgbouncer(self, mode):
        """Starts PgBouncer in `mode` in front of the test server; returns its port."""
        port = free_port()
        directory = os.path.join(self.tmp, "pgbouncer-" + mode)
        os.makedirs(directory)
        with open(os.path.join(directory, "userlist.txt"), "w") as userlist:
            userlist.write('"%s" "%s"\n' % (self.pg["user"], self.pg["password"]))
        with open(os.path.join(directory, "pgbouncer.ini"), "w") as ini:
            ini.write("\n".join([
                "[databases]",
                "%s = host=%s port=%d dbname=%s" % (self.pg["db"], self.pg["host"], self.pg["port"], self.pg["db"]),
                "[pgbouncer]",
                "listen_addr = 127.0.0.1",
                "listen_port = %d" % port,
                "unix_socket_dir =",
                "auth_type = plain",
                "auth_file = %s" % os.path.join(directory, "userlist.txt"),
                "pool_mode = %s" % mode,
                "max_client_conn = 200",
                "default_pool_size = 20",
                "ignore_startup_parameters = extra_float_digits,options",
                "logfile = %s" % os.path.join(directory, "pgbouncer.log"),
                "",
            ]))
        command = [self.pgbouncer, os.path.join(directory, "pgbouncer.ini")]
        if os.geteuid() == 0:
            # PgBouncer will not run as root.
            owner = pwd.getpwnam("postgres")
            for root, dirs, files in os.walk(self.tmp):
                for name in [root] + [os.path.join(root, entry) for entry in dirs + files]:
                    os.chown(name, owner.pw_uid, owner.pw_gid)
            command = ["runuser", "-u", "postgres", "--"] + command
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.processes.append(process)
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return port
            except OSError:
                if process.poll() is not None:
                    raise RuntimeError("pgbouncer exited with %s" % process.returncode)
                if time.monotonic() > deadline:
                    raise RuntimeError("pgbouncer did not listen within 30 s")
                time.sleep(0.1)

    def store_url(self, port, name):
        return "postgres://%s:%s@127.0.0.1:%d/%s?schema=osync_test_%s_pgb_%s" % (
            urllib.parse.quote(self.pg["user"], safe=""), urllib.parse.quote(self.pg["password"], safe=""),
            port, self.pg["db"], self.run_id, name)

    def serve(self, store, data):
        os.makedirs(data, exist_ok=True)
        log_path = os.path.join(data, "server.log")
        log = open(log_path, "wb")
        self.files.append(log)
        env = dict(os.environ)
        for name in ("OFFLINE_SYNC_TOKEN_SECRET", "OFFLINE_SYNC_STORE", "OFFLINE_SYNC_HOST", "OFFLINE_SYNC_PORT", "OFFLINE_SYNC_DATA"):
            env.pop(name, None)
        process = subprocess.Popen([self.bin, "serve", "--port", "0", "--data", data, "--store", store, "--log-level", "warning"],
                                   cwd=data, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        self.processes.append(process)
        return process, log_path

    @staticmethod
    def read(path):
        with open(path, "rb") as file:
            return file.read().decode("utf-8", "replace")

    def test_transaction_pooling_is_refused_at_start_up(self):
        port = self.start_pgbouncer("transaction")
        process, log = self.serve(self.store_url(port, "tx"), os.path.join(self.tmp, "tx"))
        try:
            status = process.wait(timeout=STARTUP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.fail("the server kept running behind a pooler in transaction mode:\n" + self.read(log)[-3000:])
        output = self.read(log)
        self.assertNotEqual(status, 0, output)
        self.assertNotIn("listening on", output)
        self.assertIn("pool_mode", output, output[-3000:])
        self.assertIn("session mode", output, output[-3000:])
        self.assertNotIn(self.pg["password"], output, "the password leaked into the message")

    def test_session_pooling_serves(self):
        port = self.start_pgbouncer("session")
        data = os.path.join(self.tmp, "session")
        process, log = self.serve(self.store_url(port, "session"), data)
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            match = re.search(r"listening on (http://\S+)", self.read(log))
            if match:
                base = match.group(1).rstrip("/")
                break
            if process.poll() is not None:
                self.fail("the server exited with %s behind a pooler in session mode:\n%s" % (process.returncode, self.read(log)[-3000:]))
            if time.monotonic() > deadline:
                self.fail("the server did not listen within %d s:\n%s" % (STARTUP_TIMEOUT, self.read(log)[-3000:]))
            time.sleep(0.1)
        minted = subprocess.run([self.bin, "token", "--identity", "pooled", "--data", data], cwd=data,
                                capture_output=True, text=True, timeout=60)
        self.assertEqual(minted.returncode, 0, minted.stderr)
        token = minted.stdout.strip()

        def post(path, body):
            request = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                             headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.loads(response.read())

        pushed = post("/v1/push", {"operations": [{"id": "op-1", "table": "todos", "itemId": "a", "kind": "insert",
                                                    "item": {"id": "a", "fields": {"title": "through the pooler"}}}]})
        self.assertEqual(pushed["results"][0]["outcome"], "applied", pushed)
        pulled = post("/v1/pull", {"table": "todos"})
        self.assertEqual([record["id"] for record in pulled["records"]], ["a"], pulled)


if __name__ == "__main__":
    unittest.main()

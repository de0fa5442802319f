#!/usr/bin/env python3
"""Crash trials: no acknowledged change is lost or duplicated when the client or the server
process is killed with SIGKILL at precise phases of sync.

What it proves
--------------
For each configuration (a client store adapter and a server store), one `offline-sync
crash-trial-client` process makes steps against one `offline-sync serve`. Each step commits
one local transaction (insert `t-<i>` with n=i, set `t-counter` to n=i) and then appends `i`
to an fsynced acknowledgement log: from then on the step is acknowledged to the app and must
reach the server exactly once. The client talks to the server through a fault-injecting
HTTP/1.1 proxy (this file), which follows the request/response framing in both directions
(keep-alive, Content-Length, chunked) and, when armed for a phase, acts on the next matching
exchange:

  before-send       a complete POST /v2/push (the binary push) reached the proxy and is never forwarded;
                    the client is killed.
  after-send        the push is forwarded and the server's complete answer is read but never
                    forwarded (the server applied it, the client never learns); client killed.
  mid-response      only a random prefix of the push answer is forwarded; client killed.
  mid-pull-page     only a random prefix of a pull's page stream (POST /v2/pull: its pages,
                    each with its cursor) is forwarded (the client syncs with
                    --pull-page-size 7, and a second, never-killed "writer" client adds 0-40
                    rows under prefix w- between trials, so there are other rows to pull).
  mid-server-apply  the push is forwarded, and 0-3 ms later the *server* is killed; it counts
                    as mid-apply only if no answer byte had arrived (else after-apply). The
                    server restarts on the same data (new port: the proxy's upstream is
                    switched) and the client is killed too.
  mid-local-write   (random) the client is killed 0-20 ms after a random number of new
                    acknowledgements, while it is still making steps.
  mid-compaction    (encrypted-file client only; the store compacts after 16 KiB) the client
                    is killed while `<file>.compacting` exists; if none is seen within a few
                    seconds the kill falls back to a random one and is counted as such. These
                    trials make 61-120 steps, since compactions grow rarer as the store grows.

Phases are cycled over the trials in a seeded shuffle. Every trial starts the client with
--until-step 1-60 steps past the last acknowledgement (after it, it only pushes or syncs, so
a kill always finds it busy), syncing (pull then push) in half the trials and only pushing in
the others. The last trial of a phase that has not been reached yet uses the most favourable
draws (a 0 ms delay, the longest wait) so that bad luck rarely fails check 5. About one trial in six also kills the server at a random
moment (restarting it on the same data). After the trials the client runs to the end, then
drains (`--drain --sync --dump`) through the disarmed proxy, and the harness checks:

  1. every acknowledged step t-<i> is on the server exactly once with n == i (a full paged
     pull of table `trial`: no id twice), and no row exists that no client acknowledged
     (the writer's w-* rows are checked the same way against its own log);
  2. t-counter holds the last step;
  3. the drain printed pending=0 errors=0 (no false conflict, no failed operation);
  4. the client's local table equals the server's rows (no pulled row skipped);
  5. the kills cut the work short (not every step was acknowledged before the final run),
     and every armed phase was reached in at least one trial;
  6. the server exits 0 on SIGTERM;
  7. (client-sqlite) the push's in-flight marker: a push marks the operations it chose in one
     `__config` row instead of rewriting them as attempted, and a context opened on a store a
     killed push left marked writes them attempted. After every kill the harness reads the
     store file (read-only) for the marker; the before-send, after-send and mid-response kills
     land while a push is in flight, so they leave one. After the next run of the client each
     operation it listed must be settled (gone) or attempted with at least one more attempt,
     and at least one kill must have left a marker.
A client or server that exits by itself during the trials (a crash) also fails the run.

How to run it
-------------
From the repository root, with the binary built (it is not built here):

    python3 Tests/Reliability/crash_trials.py --trials 20
    python3 Tests/Reliability/crash_trials.py --trials 20 --configs client-encrypted/server-sqlite --seed 42 --json out.json
    Scripts/with-postgres.sh python3 Tests/Reliability/crash_trials.py --trials 20   # PostgreSQL configurations too

Options: --trials N (default 20), --configs a,b (default: all), --phases a,b (restrict the
phases, for debugging), --seed N (default: random; always printed), --json FILE (figures per
configuration), --bin PATH (default: $OFFLINE_SYNC_BIN or .build/debug/offline-sync), --harness
PATH (the crash-trial client; default: offline-sync-harness beside --bin),
-v (one line per trial). The PostgreSQL configurations (client-postgres/server-sqlite,
client-sqlite/server-postgres) are skipped, not failed, when OFFLINE_SYNC_TEST_POSTGRES_URL is
unset; their schemas are named osync_test_<OFFLINE_SYNC_TEST_RUN>_crash_* (Scripts/with-
postgres.sh drops them on an external server) and are dropped with psql when it is available.
Each configuration works in a fresh temporary directory, removed at the end unless
OFFLINE_SYNC_KEEP_TMP=1. Exit status 0 only if every check of every configuration passed; a
failure prints the replay command (seed, trials, configuration). The kill moments depend on
timing, so a replay draws the same random numbers but may not land every kill identically.

Standard library only (Python 3.9+).
"""

import argparse
import errno
import json
import os
import random
import re
import select
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

CONFIGS = {
    "client-sqlite/server-sqlite": ("sqlite", "sqlite"),
    "client-lmdb/server-sqlite": ("lmdb", "sqlite"),
    "client-encrypted/server-sqlite": ("encrypted", "sqlite"),
    "client-postgres/server-sqlite": ("postgres", "sqlite"),
    "client-sqlite/server-postgres": ("sqlite", "postgres"),
}
PHASES = ["before-send", "after-send", "mid-response", "mid-pull-page", "mid-server-apply", "mid-local-write",
          "mid-compaction"]
# Phases the proxy carries out (it holds the client's connection until the client is killed).
PROXY_PHASES = {"before-send": "/v2/push", "after-send": "/v2/push", "mid-response": "/v2/push",
                "mid-pull-page": "/v2/pull", "mid-server-apply": "/v2/push"}

TOKEN_SECRET = "crash-trials-token-secret-0123456789abcdef"
PULL_PAGE_SIZE = 7
STEPS_PER_TRIAL = 100          # steps of the whole run = 100 x trials, as in the Swift test
PHASE_TIMEOUT = 20.0           # seconds to wait for an armed phase before killing anyway
COMPACTION_WAIT = 4.0          # seconds to watch for <file>.compacting before a random kill
COMPACT_AFTER = 16384          # the encrypted store compacts after this many appended bytes
SERVER_KILL_EVERY = 6          # about one trial in six also kills the server at a random moment
PROCESS_TIMEOUT = 300.0        # a final run or drain that takes longer is a failure


class HarnessFailure(Exception):
    """A check failed (the message says which); the configuration fails."""


# ---------------------------------------------------------------------------------------------
# Child processes


CHILDREN = []           # every Popen started, so that any failure kills them all
CHILDREN_LOCK = threading.Lock()


def spawn(args, env=None, stdout=None, stderr=None):
    """Starts a child, waiting (up to ~3 minutes) if the binary is missing or busy because it
    is being rebuilt."""
    for attempt in range(19):
        try:
            proc = subprocess.Popen(args, env=env, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL)
        except OSError as error:
            if error.errno in (errno.ENOENT, errno.ETXTBSY, errno.EACCES, errno.ENOEXEC) and attempt < 18:
                print(f"  (cannot start {args[0]}: {error}; waiting 10 s, it may be being rebuilt)", flush=True)
                time.sleep(10)
                continue
            raise
        with CHILDREN_LOCK:
            CHILDREN.append(proc)
        return proc
    raise AssertionError("unreachable")


def kill_children():
    with CHILDREN_LOCK:
        procs = list(CHILDREN)
        CHILDREN.clear()
    for proc in procs:
        if proc.poll() is None:
            try:
                proc.kill()
            except OSError:
                pass
    for proc in procs:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def forget(proc):
    with CHILDREN_LOCK:
        if proc in CHILDREN:
            CHILDREN.remove(proc)


def tail(path, lines=15):
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return "(no output)"
    return "\n".join("      | " + line for line in text.rstrip("\n").split("\n")[-lines:]) or "(no output)"


# ---------------------------------------------------------------------------------------------
# The fault-injecting HTTP/1.1 proxy


class Closed(Exception):
    """The peer closed the connection (or it failed) before a complete message."""


class HTTPStream:
    """Reads whole HTTP/1.1 messages from a socket, returning their exact bytes."""

    def __init__(self, sock):
        self.sock = sock
        self.buffer = bytearray()

    def _fill(self):
        try:
            data = self.sock.recv(65536)
        except OSError as error:
            raise Closed(str(error))
        if not data:
            raise Closed("end of stream")
        self.buffer += data

    def _take(self, count):
        while len(self.buffer) < count:
            self._fill()
        data = bytes(self.buffer[:count])
        del self.buffer[:count]
        return data

    def _line(self):
        while True:
            index = self.buffer.find(b"\r\n")
            if index >= 0:
                return self._take(index + 2)
            if len(self.buffer) > 1 << 20:
                raise Closed("line too long")
            self._fill()

    def read_message(self, request, request_method=None):
        """Returns (start line, headers with lower-case names, raw bytes, keep_alive)."""
        while True:
            index = self.buffer.find(b"\r\n\r\n")
            if index >= 0:
                break
            if len(self.buffer) > 1 << 20:
                raise Closed("header too long")
            self._fill()
        head = self._take(index + 4)
        lines = head.decode("latin-1").split("\r\n")
        start = lines[0]
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                name, value = line.split(":", 1)
                name = name.strip().lower()
                headers[name] = (headers[name] + ", " if name in headers else "") + value.strip()
        parts = start.split(" ")
        version = parts[0] if not request else (parts[2] if len(parts) > 2 else "HTTP/1.0")
        connection = headers.get("connection", "").lower()
        keep_alive = ("close" not in connection) if version == "HTTP/1.1" else ("keep-alive" in connection)
        raw = bytearray(head)
        status = 0 if request else int(parts[1])
        encoding = headers.get("transfer-encoding", "").lower()
        if not request and (100 <= status < 200 or status in (204, 304) or request_method == "HEAD"):
            pass
        elif "chunked" in encoding:
            while True:
                line = self._line()
                raw += line
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while True:        # trailers, up to the empty line
                        trailer = self._line()
                        raw += trailer
                        if trailer == b"\r\n":
                            break
                    break
                raw += self._take(size + 2)
        elif "content-length" in headers:
            raw += self._take(int(headers["content-length"].split(",")[0]))
        elif not request:
            # A response delimited by the end of the connection.
            while True:
                try:
                    self._fill()
                except Closed:
                    break
            raw += self.buffer
            self.buffer.clear()
            keep_alive = False
        return start, headers, bytes(raw), keep_alive


class Action:
    """A phase armed on the proxy: what to do to the next matching exchange."""

    def __init__(self, phase, path, skip=0, cut=0.5, delay_ms=0.0, methods=("POST",), prefix=False, min_request=0):
        self.phase = phase
        self.path = path
        self.methods = methods        # the request methods it matches
        self.prefix = prefix          # path matches by prefix (the attachment routes name a hash)
        self.min_request = min_request  # only requests of at least this many bytes match
        self.skip = skip              # matching exchanges to let through first
        self.cut = cut                # fraction of the answer forwarded (mid-response, mid-pull-page)
        self.delay_ms = delay_ms      # mid-server-apply: how long after forwarding to kill the server
        self.reached = threading.Event()
        self.release = threading.Event()
        self.info = {}


class FaultProxy:
    """A TCP proxy on 127.0.0.1 that parses HTTP/1.1 in both directions and injects faults.

    The client does not pipeline, so each client connection is served in order: read a whole
    request, forward it, read the whole answer, forward it."""

    def __init__(self, kill_server):
        self.kill_server = kill_server   # called by mid-server-apply (SIGKILL and reap the server)
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.upstream = None              # the server's port
        self.generation = 0               # bumped at each switch of upstream
        self.armed = None
        self.taken = []
        self.sockets = set()
        self.stopped = False
        self.exchanges = {"push": 0, "pull": 0, "other": 0}
        self.ranged_downloads = 0         # attachment GETs asking for the rest of a file (Range: bytes=N-, N > 0)
        self.thread = threading.Thread(target=self._accept, name="proxy-accept", daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def set_upstream(self, port):
        with self.lock:
            self.upstream = port
            self.generation += 1

    def arm(self, action):
        with self.lock:
            self.armed = action
        return action

    def disarm(self):
        """Disarms; returns True if the armed action had already been taken by an exchange."""
        with self.lock:
            action, self.armed = self.armed, None
            return action is None

    def close(self):
        with self.lock:
            self.stopped = True
            self.armed = None
            sockets = list(self.sockets)
            taken = list(self.taken)
        for action in taken:
            action.release.set()
        try:
            self.listener.close()
        except OSError:
            pass
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                sock.close()
            except OSError:
                pass

    def _track(self, sock, add=True):
        with self.lock:
            if add:
                self.sockets.add(sock)
            else:
                self.sockets.discard(sock)

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.stopped:
                client.close()
                return
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._track(client)
            threading.Thread(target=self._serve, args=(client,), name="proxy-conn", daemon=True).start()

    def _match(self, method, path, size=0):
        with self.lock:
            action = self.armed
            if action is None or method not in action.methods or size < action.min_request:
                return None
            if not (path.startswith(action.path) if action.prefix else path == action.path):
                return None
            if action.skip > 0:
                action.skip -= 1
                return None
            self.armed = None
            self.taken.append(action)
            return action

    def _connect(self):
        with self.lock:
            port, generation = self.upstream, self.generation
        if port is None:
            return None, generation
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.settimeout(30)
        try:
            sock.connect(("127.0.0.1", port))
        except OSError:
            sock.close()
            return None, generation
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._track(sock)
        return sock, generation

    def _drop(self, sock):
        if sock is None:
            return
        self._track(sock, add=False)
        try:
            sock.close()
        except OSError:
            pass

    @staticmethod
    def _stale(sock):
        """An idle keep-alive upstream connection that is readable was closed by the server."""
        try:
            readable, _, _ = select.select([sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    def _hold(self, action):
        """Reports the phase and keeps the client's connection open until the harness has killed
        the client (so the client never sees an early close and retries)."""
        action.reached.set()
        action.release.wait(timeout=120)

    def _serve(self, client):
        upstream = None
        generation = -1
        upstream_stream = None
        client_stream = HTTPStream(client)
        try:
            while not self.stopped:
                try:
                    start, headers, request, client_keep_alive = client_stream.read_message(request=True)
                except (Closed, ValueError, IndexError):
                    return
                parts = start.split(" ")
                method, path = parts[0], (parts[1].split("?")[0] if len(parts) > 1 else "")
                kind = "push" if path in ("/v1/push", "/v2/push") else "pull" if path in ("/v1/pull", "/v2/pull") else "other"
                ranged = (method == "GET" and path.startswith("/v1/attachments/")
                          and headers.get("range", "").startswith("bytes=") and not headers["range"].startswith("bytes=0-"))
                with self.lock:
                    self.exchanges[kind] += 1
                    self.ranged_downloads += 1 if ranged else 0
                action = self._match(method, path, len(request))
                if action is not None and action.phase in ("before-send", "after-upload"):
                    self._hold(action)
                    return
                with self.lock:
                    current = self.generation
                if upstream is None or generation != current or self._stale(upstream):
                    self._drop(upstream)
                    upstream, generation = self._connect()
                    if upstream is None:
                        if action is not None:      # the server is down: the phase cannot happen here
                            action.info["note"] = "server unreachable"
                            self._hold(action)
                        return
                    upstream_stream = HTTPStream(upstream)
                if action is not None and action.phase == "mid-upload":
                    # Only part of the request's body reaches the server: it keeps the whole
                    # pieces that arrived, and the client is killed.
                    head = request.find(b"\r\n\r\n") + 4
                    sent = head + int(action.cut * (len(request) - head))
                    try:
                        upstream.sendall(request[:sent])
                    except OSError:
                        pass
                    action.info["forwarded"] = f"{sent - head}/{len(request) - head}"
                    self._hold(action)
                    return
                try:
                    upstream.sendall(request)
                except OSError:
                    if action is not None:
                        action.info["note"] = "server unreachable"
                        self._hold(action)
                    return
                if action is not None and action.phase in ("mid-server-apply", "mid-server-chunk"):
                    readable, _, _ = select.select([upstream], [], [], action.delay_ms / 1000.0)
                    arrived = bool(readable) or bool(upstream_stream.buffer)
                    self.kill_server()
                    if not arrived:
                        try:
                            arrived = len(upstream.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)) > 0
                        except OSError:
                            pass
                    action.info["server_kill"] = "after-apply" if arrived else "mid-apply"
                    self._hold(action)
                    return
                try:
                    while True:
                        status_line, _, response, server_keep_alive = upstream_stream.read_message(
                            request=False, request_method=method)
                        status = int(status_line.split(" ")[1])
                        if 100 <= status < 200 and status != 101:
                            client.sendall(response)
                            continue
                        break
                except (Closed, ValueError, IndexError):
                    # The server died or closed mid-answer: nothing of it was forwarded.
                    if action is not None:
                        action.info["note"] = "no answer from the server"
                        self._hold(action)
                    return
                if action is not None:
                    if action.phase == "after-send":
                        action.info["answer_bytes"] = len(response)
                        self._hold(action)
                        return
                    cut = min(len(response) - 1, max(1, int(action.cut * len(response))))
                    client.sendall(response[:cut])
                    action.info["forwarded"] = f"{cut}/{len(response)}"
                    self._hold(action)
                    return
                client.sendall(response)
                if not server_keep_alive:
                    self._drop(upstream)
                    upstream = None
                if not client_keep_alive or status == 101:
                    return
        except OSError:
            return
        finally:
            self._drop(upstream)
            self._drop(client)


# ---------------------------------------------------------------------------------------------
# The server


class Server:
    """`offline-sync serve` on a data directory (and store), restartable on a new port."""

    def __init__(self, binary, data, store, logdir):
        self.binary = binary
        self.data = data
        self.store = store
        self.logdir = logdir
        self.proc = None
        self.port = None
        self.starts = 0
        self.killed = False       # the harness killed the current process
        self.lock = threading.RLock()
        self.log = None

    def env(self):
        env = dict(os.environ)
        env["OFFLINE_SYNC_TOKEN_SECRET"] = TOKEN_SECRET
        return env

    def start(self):
        with self.lock:
            self.starts += 1
            self.log = os.path.join(self.logdir, f"server-{self.starts}.log")
            args = [self.binary, "serve", "--port", "0", "--data", self.data, "--log-level", "warning"]
            if self.store:
                args += ["--store", self.store]
            with open(self.log, "wb") as out:
                self.proc = spawn(args, env=self.env(), stdout=out, stderr=subprocess.STDOUT)
            self.killed = False
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                with open(self.log, "rb") as handle:
                    match = re.search(rb"listening on http://127\.0\.0\.1:(\d+)", handle.read())
                if match:
                    self.port = int(match.group(1))
                    return self.port
                if self.proc.poll() is not None:
                    raise HarnessFailure(f"the server exited with status {self.proc.returncode} while starting:\n"
                                         + tail(self.log))
                time.sleep(0.01)
            raise HarnessFailure("the server did not say it was listening within 60 s:\n" + tail(self.log))

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def kill(self):
        """SIGKILLs the current process and reaps it; False if it was already gone."""
        with self.lock:
            proc = self.proc
            if proc is None or proc.poll() is not None:
                return False
            self.killed = True
            proc.kill()
            proc.wait()
            forget(proc)
            return True

    def check_alive(self, when):
        """Raises if the current process exited without the harness killing it."""
        with self.lock:
            if self.proc is not None and self.proc.poll() is not None and not self.killed:
                raise HarnessFailure(f"the server exited by itself (status {self.proc.returncode}) {when}:\n"
                                     + tail(self.log))

    def running(self):
        with self.lock:
            return self.proc is not None and self.proc.poll() is None

    def stop(self):
        """SIGTERM; returns the exit status (None if it had to be killed after 30 s)."""
        with self.lock:
            proc = self.proc
            proc.send_signal(signal.SIGTERM)
            try:
                status = proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                status = None
            forget(proc)
            return status


# ---------------------------------------------------------------------------------------------
# One configuration


def phase_schedule(phases, trials, rng):
    """The phase of each of `trials` trials: the phases cycled, each cycle in a seeded shuffle."""
    schedule = []
    while len(schedule) < trials:
        block = list(phases)
        rng.shuffle(block)
        schedule += block
    return schedule[:trials]


def read_acks(path):
    """The acknowledged steps, in log order (only complete lines)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return []
    return [int(line) for line in data.split(b"\n")[:-1] if line.strip()]


def count_acks(path):
    try:
        with open(path, "rb") as handle:
            return handle.read().count(b"\n")
    except FileNotFoundError:
        return 0


def stat_id(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_ctime_ns)


class ConfigRun:
    def __init__(self, name, args, seed, postgres_url):
        self.name = name
        self.args = args
        self.seed = seed
        self.trials = args.trials
        self.rng = random.Random(f"{seed}/{name}")
        self.client_kind, self.server_kind = CONFIGS[name]
        self.postgres_url = postgres_url
        self.binary = args.bin
        self.harness = args.harness
        self.verbose = args.verbose
        self.steps = STEPS_PER_TRIAL * self.trials
        self.schemas = []
        self.failures = []
        self.encrypted_file = None
        self.figures = {
            "status": "running", "trials": self.trials, "steps": self.steps, "client_kills": 0, "server_kills": 0,
            "server_kills_by_moment": {}, "phase_trials": {}, "kills_by_phase": {}, "phases_not_reached": {},
            "operations_acknowledged": 0, "acknowledged_before_final": 0, "writer_steps": 0, "lost": 0,
            "duplicated": 0, "unexpected_rows": 0, "wrong_values": 0, "false_conflicts": None,
            "pending_after_drain": None, "pull_mismatches": None, "server_exit_status": None,
            "proxy_exchanges": {}, "seconds": 0.0, "trial_seconds": 0.0, "final_seconds": 0.0,
            "trial_log": [],
            "marker_kills": 0, "marker_operations_checked": None,
        }
        # client-sqlite only: the push's in-flight marker a kill left, checked after the next run.
        self.marker_left = None
        self.client_file = None

    # -- helpers

    def schema(self, role):
        run = os.environ.get("OFFLINE_SYNC_TEST_RUN", "")
        if not re.fullmatch(r"[A-Za-z0-9]{1,16}", run):
            run = "local"
        unique = f"{os.getpid():x}{random.SystemRandom().getrandbits(24):06x}"
        name = f"osync_test_{run}_crash_{role}_{unique}".lower()
        self.schemas.append(name)
        url = self.postgres_url
        return url + ("&" if "?" in url else "?") + "schema=" + name

    def bump(self, key, name, amount=1):
        bucket = self.figures[key]
        bucket[name] = bucket.get(name, 0) + amount

    def client_env(self):
        env = dict(os.environ)
        env["OFFLINE_SYNC_TRIAL_TOKEN"] = self.token
        env["OFFLINE_SYNC_CRASH_TRIAL_KEY"] = self.key
        return env

    def start_client(self, store, server, prefix, acks, steps, until=None, sync=False, push_every=None,
                     drain=False, dump=None, label="client", extra=()):
        args = [self.harness, "crash-trial-client", "--store", store, "--server", server, "--prefix", prefix,
                "--steps", str(steps), "--acks", acks, "--pull-page-size", str(PULL_PAGE_SIZE)]
        if until is not None:
            args += ["--until-step", str(until)]
        if sync:
            args += ["--sync"]
        if push_every is not None:
            args += ["--push-every", str(push_every)]
        if drain:
            args += ["--drain"]
        if dump:
            args += ["--dump", dump]
        args += list(extra)
        self.runs += 1
        log = os.path.join(self.tmp, f"{label}-{self.runs}.log")
        with open(log, "wb") as out:
            proc = spawn(args, env=self.client_env(), stdout=out, stderr=subprocess.STDOUT)
        proc.log = log
        proc.command = " ".join(args)
        return proc

    def finish(self, proc, what):
        """Waits for a client run that must end by itself with status 0; returns its output."""
        try:
            proc.wait(timeout=PROCESS_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise HarnessFailure(f"{what} did not finish within {PROCESS_TIMEOUT:.0f} s:\n" + tail(proc.log))
        finally:
            forget(proc)
        with open(proc.log, "rb") as handle:
            output = handle.read().decode("utf-8", "replace")
        if proc.returncode != 0:
            raise HarnessFailure(f"{what} exited with status {proc.returncode}:\n" + tail(proc.log))
        return output

    def kill_client(self, proc):
        """SIGKILLs a trial client; raises if it had exited by itself."""
        status = proc.poll()
        if status is not None:
            forget(proc)
            raise HarnessFailure(f"the client exited by itself with status {status} during trial {self.trial} "
                                 f"(it must run until killed):\n" + tail(proc.log))
        proc.kill()
        proc.wait()
        forget(proc)
        self.figures["client_kills"] += 1

    def restart_server(self):
        self.server.kill()
        port = self.server.start()
        self.proxy.set_upstream(port)

    def kill_server_for_phase(self):
        """Called from a proxy thread for mid-server-apply."""
        if self.server.kill():
            self.figures["server_kills"] += 1

    # -- the run

    def run(self):
        started = time.monotonic()
        self.tmp = tempfile.mkdtemp(prefix="osync-crash-")
        self.runs = 0
        self.trial = -1
        self.key = "%064x" % self.rng.getrandbits(256)
        self.proxy = None
        try:
            self._run()
            self.figures["status"] = "failed" if self.failures else "passed"
        except HarnessFailure as failure:
            self.failures.append(str(failure))
            self.figures["status"] = "failed"
        except Exception as error:          # a harness bug or an environment problem
            self.failures.append(f"harness error: {type(error).__name__}: {error}")
            self.figures["status"] = "failed"
            if self.verbose:
                import traceback
                traceback.print_exc()
        finally:
            if self.proxy is not None:
                self.figures["proxy_exchanges"] = dict(self.proxy.exchanges)
                self.proxy.close()
            kill_children()
            self.drop_schemas()
            self.figures["seconds"] = round(time.monotonic() - started, 2)
            if os.environ.get("OFFLINE_SYNC_KEEP_TMP") == "1":
                self.figures["tmp"] = self.tmp
            else:
                shutil.rmtree(self.tmp, ignore_errors=True)
        return self.figures

    def drop_schemas(self):
        if not self.schemas or not shutil.which("psql"):
            return
        sql = "".join(f'DROP SCHEMA IF EXISTS "{name}" CASCADE;' for name in self.schemas)
        try:
            subprocess.run(["psql", self.postgres_url, "-q", "-v", "ON_ERROR_STOP=1", "-c", sql],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            pass

    def _run(self):
        tmp = self.tmp
        rng = self.rng
        data = os.path.join(tmp, "server")
        os.makedirs(data)
        server_store = self.schema("srv") if self.server_kind == "postgres" else None
        if self.client_kind == "sqlite":
            self.client_file = os.path.join(tmp, "client.sqlite")
            store = "sqlite://" + self.client_file
        elif self.client_kind == "lmdb":
            os.makedirs(os.path.join(tmp, "client-lmdb"))
            store = "lmdb://" + os.path.join(tmp, "client-lmdb")
        elif self.client_kind == "encrypted":
            self.encrypted_file = os.path.join(tmp, "client.osync")
            store = (f"encrypted-file://{self.encrypted_file}?key-env=OFFLINE_SYNC_CRASH_TRIAL_KEY"
                     f"&compact-after={COMPACT_AFTER}")
        else:
            store = self.schema("cli")
        writer_store = "sqlite://" + os.path.join(tmp, "writer.sqlite")
        acks = os.path.join(tmp, "acks.log")
        writer_acks = os.path.join(tmp, "writer-acks.log")

        self.server = Server(self.binary, data, server_store, tmp)
        self.proxy = FaultProxy(self.kill_server_for_phase)
        self.proxy.set_upstream(self.server.start())
        proc = spawn([self.binary, "token", "--identity", "trial", "--data", data], env=self.server.env(),
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = proc.communicate(timeout=60)
        forget(proc)
        if proc.returncode != 0 or not out.strip():
            raise HarnessFailure("offline-sync token failed: " + err.decode("utf-8", "replace"))
        self.token = out.decode().strip().split()[-1]

        phases = [p for p in PHASES if p != "mid-compaction" or self.client_kind == "encrypted"]
        if self.args.phases:
            phases = [p for p in phases if p in self.args.phases]
            if not phases:
                raise HarnessFailure("no requested phase applies to this configuration")
        schedule = phase_schedule(phases, self.trials, rng)
        server_kill_trials = set(rng.sample(range(self.trials), max(1, round(self.trials / SERVER_KILL_EVERY))))
        last_of_phase = {phase: trial for trial, phase in enumerate(schedule)}

        trials_started = time.monotonic()
        writer_total = 0
        for trial in range(self.trials):
            self.trial = trial
            phase = schedule[trial]
            # Every random number of the trial is drawn here, in a fixed order, whatever happens.
            writer_more = rng.randint(0, 40)
            offset = rng.randint(1, 60)
            sync_draw = rng.random()
            skip_draw = rng.randint(0, 3)
            cut = rng.random()
            delay_ms = rng.uniform(0, 3)
            early_draw = rng.random()
            cap_draw = rng.random()
            sleep_ms = rng.uniform(0, 20)
            server_kill_delay = rng.uniform(0.0, 0.05)
            kill_server_too = trial in server_kill_trials and phase != "mid-server-apply"
            # The last trial of a phase not reached yet uses the draws most likely to reach it
            # (still within the phase's ranges), so that check 5 does not fail by bad luck.
            last_chance = trial == last_of_phase[phase] and self.figures["kills_by_phase"].get(phase, 0) == 0
            if last_chance:
                delay_ms = 0.0
                cap_draw = 0.0
                server_kill_delay = None        # the server, if killed, only with the client

            # The writer adds rows for the trial client to pull; it is never killed.
            if writer_more:
                writer_total += writer_more
                proc = self.start_client(writer_store, self.server.url, "w", writer_acks, writer_total, push_every=1,
                                         label="writer")
                self.finish(proc, f"the writer (before trial {trial})")
            self.server.check_alive(f"before trial {trial}")

            before = count_acks(acks)
            if phase == "mid-local-write":
                offset = max(offset, 5)        # room for a kill between two steps
            elif phase == "mid-compaction":
                # Compactions come every ~15 steps on a small store, every ~50 at 300 rows: give
                # the trial 61-120 steps so that one is likely to start before the client idles.
                offset += 60
            target = min(self.steps - 1, before + offset)
            sync = phase in ("mid-pull-page", "mid-compaction") or sync_draw < 0.5
            self.bump("phase_trials", phase)
            action = None
            if phase in PROXY_PHASES:
                skip = skip_draw
                if PROXY_PHASES[phase] == "/v2/push":
                    # Pushes with operations in this run: one per 5th step, and one after the last.
                    pushes = sum(1 for s in range(before, target) if s % 5 == 4) + (0 if (target - 1) % 5 == 4 else 1)
                    skip = min(skip_draw, max(0, pushes - 1), 2)
                action = self.proxy.arm(Action(phase, PROXY_PHASES[phase], skip=skip, cut=cut, delay_ms=delay_ms))
            stale_compacting = stat_id(self.encrypted_file + ".compacting") if phase == "mid-compaction" else None

            proc = self.start_client(store, self.proxy.url, "t", acks, self.steps, until=target, sync=sync)
            killer = None
            if kill_server_too:
                killer = RandomServerKiller(self, server_kill_delay, acks, before)
                killer.start()

            outcome = ""
            try:
                if action is not None:
                    reached = self.wait_action(action, proc)
                    if not reached and not self.proxy.disarm():
                        reached = action.reached.wait(timeout=5)    # taken just before the disarm
                    if killer:
                        killer.stop(before_client_kill=True)
                    self.kill_client(proc)
                    if phase == "mid-server-apply" and reached and "server_kill" in action.info:
                        kind = action.info["server_kill"]
                        self.bump("server_kills_by_moment", kind)
                        self.bump("kills_by_phase", "mid-server-apply" if kind == "mid-apply" else "after-server-apply")
                        if kind != "mid-apply":
                            self.bump("phases_not_reached", phase)
                        self.restart_server()
                    elif reached and "note" not in action.info:
                        self.bump("kills_by_phase", phase)
                    else:
                        self.bump("phases_not_reached", phase)
                        self.bump("kills_by_phase", "random")
                    outcome = (("reached " if reached else "NOT reached ") + " ".join(
                        f"{k}={v}" for k, v in action.info.items())).strip()
                elif phase == "mid-local-write":
                    early = before + 1 + int(early_draw * max(0, target - before - 1))
                    early = min(early, target - 1) if target - before >= 2 else target
                    deadline = time.monotonic() + PHASE_TIMEOUT
                    while count_acks(acks) < early and time.monotonic() < deadline and proc.poll() is None:
                        time.sleep(0.0005)
                    # 0-20 ms later, but no later than a random further step before the last one,
                    # so that the kill finds the client still writing however fast its steps are.
                    cap = min(target - 1, early + int(cap_draw * (target - early)))
                    deadline = time.monotonic() + sleep_ms / 1000.0
                    while time.monotonic() < deadline and count_acks(acks) < cap and proc.poll() is None:
                        time.sleep(0.0002)
                    if killer:
                        killer.stop(before_client_kill=False)
                    self.kill_client(proc)
                    after = count_acks(acks)
                    if after < target:
                        self.bump("kills_by_phase", phase)
                    else:
                        self.bump("phases_not_reached", phase)
                        self.bump("kills_by_phase", "random")
                    outcome = f"acks {after}/{target} at the kill"
                elif phase == "mid-compaction":
                    path = self.encrypted_file + ".compacting"
                    deadline = time.monotonic() + COMPACTION_WAIT * (3 if last_chance else 1)
                    seen = False
                    while time.monotonic() < deadline:
                        current = stat_id(path)
                        if current is not None and current != stale_compacting:
                            seen = True
                            break
                        if proc.poll() is not None:
                            break
                    if not seen:
                        time.sleep(sleep_ms / 1000.0)
                    if killer:
                        killer.stop(before_client_kill=False)
                    self.kill_client(proc)
                    current = stat_id(path)
                    if seen and current is not None and current != stale_compacting:
                        self.bump("kills_by_phase", phase)
                        outcome = "killed while .compacting existed"
                    else:
                        self.bump("phases_not_reached", phase)
                        self.bump("kills_by_phase", "random")
                        outcome = "compaction seen but finished before the kill" if seen else \
                            "no compaction seen: random kill"
                if killer:
                    killer.finish()
            finally:
                if action is not None:
                    action.release.set()
                self.proxy.disarm()
                if killer:
                    killer.cancel.set()
            self.server.check_alive(f"during trial {trial}")
            if not self.server.running():
                self.restart_server()
            marker = self.check_marker(phase)
            if marker:
                outcome += f" (left {marker} operations marked in flight)"
            self.figures["trial_log"].append({
                "trial": trial, "phase": phase, "sync": sync, "acks_before": before, "acks_after": count_acks(acks),
                "until_step": target, "server_kill": kill_server_too, "last_chance": last_chance, "outcome": outcome})
            if self.verbose:
                print(f"    trial {trial:3d} {phase:16s} sync={int(sync)} acks {before}->{count_acks(acks)} "
                      f"(until {target}){' +server kill' if kill_server_too else ''}"
                      f"{' (last chance)' if last_chance else ''}: {outcome}", flush=True)

        self.figures["trial_seconds"] = round(time.monotonic() - trials_started, 2)
        self.figures["writer_steps"] = writer_total
        acked_before = count_acks(acks)
        self.figures["acknowledged_before_final"] = acked_before
        final_started = time.monotonic()

        # Let the client run to the end, then drain (and pull everything) through the quiet proxy.
        self.trial = "final"
        proc = self.start_client(store, self.proxy.url, "t", acks, self.steps, label="final")
        output = self.finish(proc, "the final client run (to the end)")
        if "done" not in output:
            raise HarnessFailure("the final client run did not print done:\n" + tail(proc.log))
        if writer_total:
            proc = self.start_client(writer_store, self.server.url, "w", writer_acks, writer_total, drain=True,
                                     label="writer-drain")
            output = self.finish(proc, "the writer's drain")
            if "drained pending=0 errors=0" not in output:
                self.failures.append("3. the writer (never killed) did not drain cleanly: " + output.strip())
        dump = os.path.join(tmp, "client-dump.txt")
        proc = self.start_client(store, self.proxy.url, "t", acks, self.steps, drain=True, sync=True, dump=dump,
                                 label="drain")
        drained = self.finish(proc, "the client's drain")
        self.figures["final_seconds"] = round(time.monotonic() - final_started, 2)
        self.check_marker(None)
        if self.client_file is not None and self.figures["marker_kills"] == 0:
            self.failures.append("7. no kill left the push's in-flight marker in the client's store: "
                                 "the kills never reached the recovery at open")
        self.verify(acks, writer_acks, drained, dump, acked_before)

        self.server.check_alive("at the end")
        status = self.server.stop()
        self.figures["server_exit_status"] = status
        if status != 0:
            self.failures.append(f"6. the server did not exit 0 on SIGTERM (status {status}):\n" + tail(self.server.log))

    def read_only(self):
        """A read-only connection to the client-sqlite store (it never checkpoints the WAL, so
        the file stays as the kill left it)."""
        uri = "file:" + urllib.request.pathname2url(self.client_file) + "?mode=ro"
        return sqlite3.connect(uri, uri=True, timeout=30)

    def read_marker(self):
        """The client-sqlite store's in-flight marker (ids) and its operations' rows (id: (state,
        attempts))."""
        connection = self.read_only()
        try:
            if connection.execute("SELECT 1 FROM sqlite_master WHERE name = '__config'").fetchone() is None:
                return [], {}                     # killed before the context defined its tables
            row = connection.execute('SELECT "f_value" FROM "__config" WHERE "f_table" = ? AND "f_key" = ?',
                                     ("__operations", "inFlight")).fetchone()
            ids = [i for i in row[0].split("\n") if i] if row and row[0] else []
            rows = {}
            for start in range(0, len(ids), 500):
                chunk = ids[start:start + 500]
                query = ('SELECT "id", "f_state", "f_attempts" FROM "__operations" WHERE "id" IN (' +
                         ",".join("?" * len(chunk)) + ")")
                for op_id, state, attempts in connection.execute(query, chunk):
                    rows[op_id] = (state, attempts)
            return ids, rows
        finally:
            connection.close()

    def check_marker(self, phase):
        """Check 7 (client-sqlite): the operations a killed push left marked in flight are, after the
        next run of the client on the store, settled (gone) or written attempted with one more
        attempt — the recovery at open (or the next push's first choice) ran. Returns how many
        operations this kill left marked."""
        if self.client_file is None or not os.path.exists(self.client_file):
            return 0
        ids, rows = self.read_marker()
        if self.marker_left is not None:
            left_rows = self.marker_left
            self.marker_left = None
            now = {}
            connection = self.read_only()
            try:
                for op_id, (state, attempts) in left_rows.items():
                    found = connection.execute('SELECT "f_state", "f_attempts" FROM "__operations" WHERE "id" = ?',
                                               (op_id,)).fetchone()
                    if found is not None:
                        now[op_id] = found
            finally:
                connection.close()
            checked = self.figures["marker_operations_checked"] or 0
            self.figures["marker_operations_checked"] = checked + len(left_rows)
            for op_id, (state, attempts) in left_rows.items():
                if op_id not in now:
                    continue                      # settled by the next run
                new_state, new_attempts = now[op_id]
                if new_state != "attempted" or (new_attempts or 0) < (attempts or 0) + 1:
                    self.failures.append(f"7. operation {op_id}, left marked in flight by a kill, reads "
                                         f"{new_state}/{new_attempts} after the next run (was {state}/{attempts}): "
                                         "the marker was not written at the restart")
        if ids and phase is not None:
            self.figures["marker_kills"] += 1
            self.marker_left = rows
        return len(ids)

    def wait_action(self, action, proc):
        deadline = time.monotonic() + PHASE_TIMEOUT
        while time.monotonic() < deadline:
            if action.reached.wait(timeout=0.005):
                return True
            if proc.poll() is not None:
                return action.reached.is_set()
        return False

    # -- the checks

    def pull_all(self):
        rows = []
        cursor = None
        for _ in range(100000):
            body = json.dumps({"table": "trial", "cursor": cursor, "limit": 100}).encode()
            request = urllib.request.Request(self.server.url + "/v1/pull", data=body, method="POST", headers={
                "Authorization": "Bearer " + self.token, "Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=60) as answer:
                page = json.loads(answer.read())
            rows += page["records"]
            cursor = page["nextCursor"]
            if page["remaining"] == 0:
                return rows
        raise HarnessFailure("the server's pull never reached remaining=0")

    def verify(self, acks_path, writer_acks_path, drained, dump, acked_before):
        figures = self.figures
        failures = self.failures
        acks = read_acks(acks_path)
        writer = read_acks(writer_acks_path)
        figures["operations_acknowledged"] = len(acks)
        if acks != list(range(len(acks))) or len(acks) != self.steps:
            failures.append(f"1. the acknowledgement log is not 0..{self.steps - 1} in order "
                            f"({len(acks)} lines, {len(set(acks))} distinct)")
        if writer != list(range(len(writer))) or len(writer) != figures["writer_steps"]:
            failures.append(f"1. the writer's acknowledgement log is not 0..{figures['writer_steps'] - 1} in order")

        rows = self.pull_all()
        seen = {}
        for row in rows:
            seen.setdefault(row["id"], []).append(row)
        duplicated = sorted(i for i, copies in seen.items() if len(copies) > 1)
        expected = {f"t-{i}": i for i in acks}
        if acks:
            expected["t-counter"] = max(acks)
        expected.update({f"w-{i}": i for i in writer})
        if writer:
            expected["w-counter"] = max(writer)
        server = {}
        tombstones = []
        for row_id, copies in seen.items():
            row = copies[-1]
            if row.get("deleted"):
                tombstones.append(row_id)
                continue
            server[row_id] = row.get("fields", {}).get("n")
        lost = sorted(i for i in expected if i not in server)
        unexpected = sorted(set(server) - set(expected)) + sorted(tombstones)
        wrong = sorted(i for i in expected if i in server and server[i] != expected[i])
        figures["lost"] = len(lost)
        figures["duplicated"] = len(duplicated)
        figures["unexpected_rows"] = len(unexpected)
        figures["wrong_values"] = len(wrong)
        figures["server_rows"] = len(server)
        if lost:
            failures.append(f"1. {len(lost)} acknowledged rows are missing on the server (LOST): {lost[:10]}")
        if duplicated:
            failures.append(f"1. {len(duplicated)} ids come more than once in the full paged pull (DUPLICATED): "
                            f"{duplicated[:10]}")
        if unexpected:
            failures.append(f"1. {len(unexpected)} rows on the server were never acknowledged (or are tombstones): "
                            f"{unexpected[:10]}")
        wrong_rows = [i for i in wrong if not i.endswith("-counter")]
        if wrong_rows:
            failures.append(f"1. {len(wrong_rows)} rows have n != i: " +
                            ", ".join(f"{i} n={server[i]}" for i in wrong_rows[:10]))
        if acks and server.get("t-counter") != max(acks):
            failures.append(f"2. t-counter is {server.get('t-counter')} on the server, not the last step {max(acks)}")
        if writer and server.get("w-counter") != max(writer):
            failures.append(f"2. w-counter is {server.get('w-counter')} on the server, not {max(writer)}")

        match = re.search(r"drained pending=(\d+) errors=(\d+) rows=(\d+)", drained)
        if not match:
            failures.append("3. the drain did not print its summary: " + drained.strip()[-500:])
        else:
            pending, errors = int(match.group(1)), int(match.group(2))
            figures["pending_after_drain"] = pending
            figures["false_conflicts"] = errors
            if pending or errors:
                failures.append(f"3. the queue did not drain cleanly: pending={pending} errors={errors} "
                                "(a false conflict or a failed operation)")

        local = {}
        try:
            with open(dump) as handle:
                for line in handle:
                    row_id, _, value = line.rstrip("\n").partition(" ")
                    local[row_id] = int(value) if re.fullmatch(r"-?\d+", value) else value
        except FileNotFoundError:
            failures.append("4. the drain wrote no dump")
        differing = sorted(i for i in set(local) | set(server) if local.get(i) != server.get(i))
        figures["pull_mismatches"] = len(differing)
        if differing:
            failures.append(f"4. the client's table differs from the server's on {len(differing)} rows: " + ", ".join(
                f"{i} client={local.get(i)} server={server.get(i)}" for i in differing[:10]))

        if not 0 < acked_before < self.steps:
            failures.append(f"5. the kills did not cut the work short: {acked_before} of {self.steps} steps "
                            "acknowledged before the final run")
        for phase in figures["phase_trials"]:
            if figures["kills_by_phase"].get(phase, 0) == 0:
                failures.append(f"5. phase {phase} was armed in {figures['phase_trials'][phase]} trials but never "
                                f"reached (not reached: {figures['phases_not_reached'].get(phase, 0)})")


class RandomServerKiller(threading.Thread):
    """Kills the server at a random moment of a trial, `delay` seconds after the client's first
    new acknowledgement (it is at work then), and restarts it; the client keeps running and
    retries. If the trial's client kill comes first (or `delay` is None), the server is killed
    together with the client instead."""

    def __init__(self, run, delay, acks, before):
        super().__init__(name="server-killer", daemon=True)
        self.run_ = run
        self.delay = delay
        self.acks = acks
        self.before = before
        self.cancel = threading.Event()
        self.fired = False
        self.error = None

    def run(self):
        if self.delay is None:
            return
        while count_acks(self.acks) <= self.before:
            if self.cancel.wait(0.001):
                return
        if self.cancel.wait(self.delay):
            return
        try:
            if self.run_.server.kill():
                self.fired = True
                self.run_.figures["server_kills"] += 1
                self.run_.bump("server_kills_by_moment", "random-during-trial")
            self.run_.restart_server()
        except Exception as error:      # reported by finish()
            self.error = error

    def stop(self, before_client_kill):
        """Called just before the client is killed."""
        self.cancel.set()
        if before_client_kill:
            self.finish()

    def finish(self):
        self.cancel.set()
        self.join(timeout=120)
        if self.error:
            raise self.error
        if not self.fired and self.run_.server.kill():
            self.fired = True
            self.run_.figures["server_kills"] += 1
            self.run_.bump("server_kills_by_moment", "with-client-kill")
            self.run_.restart_server()


# ---------------------------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(description="Crash trials of OfflineSync: SIGKILL client and server at precise "
                                                 "phases; no acknowledged change may be lost or duplicated.")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--phases", default="", help="restrict the phases (comma-separated), for debugging")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--json", default=None)
    parser.add_argument("--bin", default=os.environ.get("OFFLINE_SYNC_BIN") or ".build/debug/offline-sync")
    parser.add_argument("--harness", default=None, help="offline-sync-harness (default: beside --bin)")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    if args.trials < 1:
        parser.error("--trials must be at least 1")
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    for config in configs:
        if config not in CONFIGS:
            parser.error(f"unknown configuration {config!r}; known: {', '.join(CONFIGS)}")
    args.phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    for phase in args.phases:
        if phase not in PHASES:
            parser.error(f"unknown phase {phase!r}; known: {', '.join(PHASES)}")
    args.bin = os.path.abspath(args.bin)
    args.harness = os.path.abspath(args.harness or os.path.join(os.path.dirname(args.bin), "offline-sync-harness"))
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 2 ** 63)
    postgres_url = os.environ.get("OFFLINE_SYNC_TEST_POSTGRES_URL", "")

    def binary_stamp():
        try:
            return os.stat(args.bin).st_mtime_ns
        except OSError:
            return None

    stamp = binary_stamp()
    print(f"crash trials: seed {seed}, {args.trials} trials per configuration, binary {args.bin}", flush=True)
    report = {"seed": seed, "trials": args.trials, "binary": args.bin, "configs": {}}
    failed = []

    def on_signal(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_signal)
    try:
        for config in configs:
            client_kind, server_kind = CONFIGS[config]
            if "postgres" in (client_kind, server_kind) and not postgres_url:
                print(f"{config}: skipped (OFFLINE_SYNC_TEST_POSTGRES_URL is unset; run under Scripts/with-postgres.sh)",
                      flush=True)
                report["configs"][config] = {"status": "skipped", "reason": "OFFLINE_SYNC_TEST_POSTGRES_URL is unset"}
                continue
            run = ConfigRun(config, args, seed, postgres_url)
            figures = run.run()
            report["configs"][config] = dict(figures, failures=run.failures)
            phases = ", ".join(f"{k} {v}" for k, v in sorted(figures["kills_by_phase"].items()))
            line = (f"{config}: {figures['status'].upper()} in {figures['seconds']:.1f} s "
                    f"(trials {figures['trial_seconds']:.1f} s, final {figures['final_seconds']:.1f} s): "
                    f"{figures['client_kills']} client kills, {figures['server_kills']} server kills; "
                    f"kills by phase: {phases or '-'}; not reached: "
                    f"{sum(figures['phases_not_reached'].values())}; {figures['acknowledged_before_final']} of "
                    f"{figures['steps']} steps acknowledged before the final run, {figures['writer_steps']} writer steps; "
                    f"lost {figures['lost']}, duplicated {figures['duplicated']}, unexpected {figures['unexpected_rows']}, "
                    f"false conflicts {figures['false_conflicts']}, pending {figures['pending_after_drain']}, "
                    f"pull mismatches {figures['pull_mismatches']}")
            if figures["marker_operations_checked"] is not None or figures["marker_kills"]:
                line += (f"; in-flight markers left by {figures['marker_kills']} kills, "
                         f"{figures['marker_operations_checked'] or 0} marked operations checked after the restart")
            print(line, flush=True)
            if run.failures:
                failed.append(config)
                wrapper = "Scripts/with-postgres.sh " if "postgres" in (client_kind, server_kind) else ""
                print(f"  FAILED: {config}", flush=True)
                for message in run.failures:
                    print("  - " + message.replace("\n", "\n    "), flush=True)
                print(f"  replay: {wrapper}python3 Tests/Reliability/crash_trials.py --seed {seed} --trials {args.trials} "
                      f"--configs {config}" + (f" --phases {','.join(args.phases)}" if args.phases else "") +
                      f" --bin {args.bin} -v   (OFFLINE_SYNC_KEEP_TMP=1 keeps the files)", flush=True)
                if binary_stamp() != stamp:
                    print("  note: the binary changed during the run (it was rebuilt); the failure may come from that",
                          flush=True)
    except KeyboardInterrupt:
        kill_children()
        print("interrupted", flush=True)
        return 130
    finally:
        kill_children()
        if args.json:
            with open(args.json, "w") as handle:
                json.dump(report, handle, indent=2, sort_keys=True)
                handle.write("\n")
    if failed:
        print(f"crash trials FAILED for {', '.join(failed)} (seed {seed})", flush=True)
        return 1
    print(f"crash trials passed (seed {seed})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

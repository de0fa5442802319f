#!/usr/bin/env python3
"""Membership crash trials: the server is SIGKILLed between a membership change and the
member's pull of its move-in (or move-out), and mid-way through that pull; after a restart
on the same data the member's pull continues from its stored cursor and must end holding
exactly the rows the rules let it read, and no page may ever carry a row it could never read.

What it does
------------
One `offline-sync serve --rules` (shared lists: a todo is read through its list's
memberships) on SQLite, or on PostgreSQL when OFFLINE_SYNC_TEST_POSTGRES_URL is set and
--store postgres is given. Alice owns two lists: `L` (shared) and `P` (private, never shared:
its todos carry a secret title). Each trial, alice pushes one change:

  join / leave      bob is added to or removed from `L`;
  crowd             1,100 other members join `L` (or leave it) with bob's change, so with a
                    fan-out limit below that the list crosses it and converts to a large
                    group in more than one bounded step after the push commits;
  move              a todo moves between `L` and `P`, or new todos are added to either.

Then the server is killed at one moment, chosen in a seeded cycle:

  after-change      right after the push's answer, before bob pulls anything;
  mid-change        0-5 ms after the push is sent (it may or may not have committed);
  mid-pull          after bob has pulled 1-6 pages of 7 rows of the move-in or move-out.

The server restarts on the same data and bob pulls to the end from his stored cursor. Checks,
after every trial:
  1. bob's rows equal the todos of the lists he is a member of now (the truth read as alice,
     who owns and is a member of both lists; her pull is a fresh full one each time);
  2. no page bob ever received carried a todo of `P` or any row whose title is the secret;
  3. every id a page told bob to remove is one he was sent before;
  4. the server's logs show no crash; at the end it exits 0 on SIGTERM.

    python3 Tests/Reliability/membership_crash.py --trials 12 --bin .build/debug/offline-sync
    Scripts/with-postgres.sh python3 Tests/Reliability/membership_crash.py --store postgres

Options: --trials N (default 12), --seed N (default random, printed), --fanout-limit K
(default: half the trials 2, half the server's default), --store sqlite|postgres, --bin PATH,
-v. Standard library only.
"""

import argparse
import base64
import hashlib
import hmac
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

TOKEN_SECRET = "membership-crash-token-secret-0123456789"
SECRET = "SECRET-PRIVATE-TODO-51c0"
PAGE = 7
CROWD = 1100
# The shared-lists rules, the same document the other rule tests serve.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Fixtures", "shared-lists-rules.yaml")) as _rules:
    RULES = _rules.read()
MOMENTS = ["after-change", "mid-change", "mid-pull"]


class Failure(Exception):
    pass


def token(identity):
    """A development token as TokenAuthority writes it (HS256 over the secret's UTF-8 bytes)."""
    def b64(data):
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
    now = time.time()
    header = b64(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    claims = b64(json.dumps({"iss": "offline-sync", "iat": now, "exp": now + 3600, "sub": identity},
                            separators=(",", ":")).encode())
    signature = hmac.new(TOKEN_SECRET.encode(), f"{header}.{claims}".encode(), hashlib.sha256).digest()
    return f"{header}.{claims}.{b64(signature)}"


class Server:
    def __init__(self, binary, data, store, rules, fanout):
        self.binary, self.data, self.store, self.rules, self.fanout = binary, data, store, rules, fanout
        self.proc, self.port, self.starts = None, None, 0

    def start(self):
        self.starts += 1
        log = os.path.join(self.data, f"server-{self.starts}.log")
        args = [self.binary, "serve", "--port", "0", "--data", self.data, "--log-level", "warning", "--rules", self.rules]
        if self.fanout is not None:
            args += ["--group-fanout-limit", str(self.fanout)]
        if self.store:
            args += ["--store", self.store]
        env = dict(os.environ, OFFLINE_SYNC_TOKEN_SECRET=TOKEN_SECRET)
        env.pop("OFFLINE_SYNC_STORE", None)
        self.log = log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with open(log, "rb") as handle:
                match = re.search(rb"listening on http://127\.0\.0\.1:(\d+)", handle.read())
            if match:
                self.port = int(match.group(1))
                return
            if self.proc.poll() is not None:
                raise Failure(f"the server exited with {self.proc.returncode} while starting: {self.tail()}")
            time.sleep(0.01)
        raise Failure("the server did not listen within 60 s")

    def tail(self):
        with open(self.log, "rb") as handle:
            return handle.read()[-2000:].decode(errors="replace")

    def kill(self):
        if self.proc.poll() is not None:
            raise Failure(f"the server exited by itself ({self.proc.returncode}): {self.tail()}")
        self.proc.kill()
        self.proc.wait()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return None

    def call(self, identity, route, document, timeout=60):
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{route}", data=json.dumps(document).encode(),
                                         method="POST", headers={"Content-Type": "application/json",
                                                                 "Authorization": "Bearer " + token(identity)})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())


def op(op_id, table, item, kind="insert", fields=None):
    operation = {"id": op_id, "table": table, "itemId": item, "kind": kind}
    if fields is not None:
        operation["item"] = {"id": item, "fields": fields}
    return operation


class Trials:
    def __init__(self, args, fanout, seed, directory):
        self.args, self.random = args, random.Random(seed)
        self.server = Server(args.bin, directory, args.store_url, os.path.join(directory, "rules.yaml"), fanout)
        with open(self.server.rules, "w") as handle:
            handle.write(RULES)
        self.bob_rows, self.bob_cursor, self.bob_ever = {}, None, set()
        self.private_ids, self.l_todos = set(), set()
        self.members_of_l = {"alice"}
        self.next_id = 0
        self.failures = []
        self.figures = {"kills": {m: 0 for m in MOMENTS}, "pages": 0, "removed": 0, "received": 0}

    def push(self, operations, who="alice"):
        for start in range(0, len(operations), 1000):
            answer = self.server.call(who, "/v1/push", {"operations": operations[start:start + 1000]})
            for result in answer["results"]:
                if result["outcome"] != "applied":
                    raise Failure(f"{result} was not applied")

    def new_todo(self, list_id):
        self.next_id += 1
        todo = f"t{self.next_id}"
        title = SECRET if list_id == "P" else f"todo {self.next_id}"
        return todo, op(f"op-{todo}", "todos", todo, fields={"list_id": list_id, "title": title})

    def setup(self):
        operations = [op("op-L", "lists", "L", fields={"name": "shared"}), op("op-P", "lists", "P", fields={"name": "private"}),
                      op("op-m-alice-L", "list_members", "m-alice-L", fields={"list_id": "L", "user_id": "alice"}),
                      op("op-m-alice-P", "list_members", "m-alice-P", fields={"list_id": "P", "user_id": "alice"})]
        for list_id, count in (("L", 150), ("P", 40)):
            for _ in range(count):
                todo, operation = self.new_todo(list_id)
                operations.append(operation)
        self.push(operations)

    def change(self, trial):
        """One push of alice's: a membership change of bob's (with a crowd, sometimes) or moves."""
        operations = []
        kind = self.random.choice(["bob", "bob", "crowd", "move"])
        if kind in ("bob", "crowd"):
            joining = "bob" not in self.members_of_l
            operations.append(op(f"op-{trial}-bob", "list_members", "m-bob-L", "insert" if joining else "delete",
                                 {"list_id": "L", "user_id": "bob"} if joining else None))
            if kind == "crowd":
                crowd_in = "crowd-0" in self.members_of_l
                for number in range(CROWD):
                    member = f"crowd-{number}"
                    operations.append(op(f"op-{trial}-{member}", "list_members", f"m-{member}-L",
                                         "delete" if crowd_in else "insert",
                                         None if crowd_in else {"list_id": "L", "user_id": member}))
        else:
            for _ in range(self.random.randint(1, 3)):
                target = self.random.choice(["L", "P"])
                todo, operation = self.new_todo(target)
                operations.append(operation)
        return kind, operations

    def pull_page(self):
        page = self.server.call("bob", "/v1/pull", {"table": "todos", "cursor": self.bob_cursor, "limit": PAGE})
        self.figures["pages"] += 1
        for record in page["records"]:
            fields = record.get("fields", {})
            if record["id"] in self.private_ids or fields.get("title") == SECRET or fields.get("list_id") == "P":
                self.failures.append(f"bob was sent {record['id']} of the private list")
            self.bob_ever.add(record["id"])
            self.figures["received"] += 1
            if record.get("deleted"):
                self.bob_rows.pop(record["id"], None)
            else:
                self.bob_rows[record["id"]] = fields.get("list_id")
        for removed in page.get("removed", []):
            self.figures["removed"] += 1
            if removed not in self.bob_ever:
                self.failures.append(f"bob was told to remove {removed}, which he was never sent")
            self.bob_rows.pop(removed, None)
        if page.get("cursorReset"):
            self.failures.append("bob's cursor was reset (a restart must not lose the view's position)")
        self.bob_cursor = page["nextCursor"]
        return page["remaining"] == 0

    def truth(self):
        """The todos bob may read now, from alice's fresh full pulls (she is in both lists)."""
        def everything(table):
            rows, cursor = {}, None
            while True:
                page = self.server.call("alice", "/v1/pull", {"table": table, "cursor": cursor, "limit": 1000})
                for record in page["records"]:
                    if record.get("deleted"):
                        rows.pop(record["id"], None)
                    else:
                        rows[record["id"]] = record.get("fields", {})
                cursor = page["nextCursor"]
                if page["remaining"] == 0:
                    return rows
        members = {f.get("user_id") for f in everything("list_members").values() if f.get("list_id") == "L"}
        todos = everything("todos")
        self.private_ids = {i for i, f in todos.items() if f.get("list_id") == "P"}
        self.members_of_l = members
        return {i: "L" for i, f in todos.items() if f.get("list_id") == "L"} if "bob" in members else {}

    def run(self):
        self.server.start()
        self.setup()
        self.truth()
        moments = [MOMENTS[i % len(MOMENTS)] for i in range(self.args.trials)]
        self.random.shuffle(moments)
        for trial, moment in enumerate(moments):
            kind, operations = self.change(trial)
            if moment == "mid-change":
                error = []
                thread = threading.Thread(target=lambda: self._push_ignoring(operations, error))
                thread.start()
                time.sleep(self.random.uniform(0, 0.005))
                self.server.kill()
                thread.join()
            else:
                self.push(operations)
                if moment == "mid-pull":
                    for _ in range(self.random.randint(1, 6)):
                        if self.pull_page():
                            break
                self.server.kill()
            self.figures["kills"][moment] += 1
            self.server.start()
            pages = 0
            while not self.pull_page():
                pages += 1
                if pages > 10_000:
                    raise Failure("bob's pull does not end")
            expected = self.truth()
            if self.bob_rows != expected:
                missing = sorted(set(expected) - set(self.bob_rows))[:5]
                extra = sorted(set(self.bob_rows) - set(expected))[:5]
                self.failures.append(f"trial {trial} ({kind}, {moment}): bob holds {len(self.bob_rows)} todos, "
                                     f"may read {len(expected)}; missing {missing}, extra {extra}")
            if self.args.verbose:
                print(f"  trial {trial}: {kind}, killed {moment}; bob a member: {'bob' in self.members_of_l}, "
                      f"holds {len(self.bob_rows)}", flush=True)
        status = self.server.stop()
        if status != 0:
            self.failures.append(f"the server exited {status} on SIGTERM")

    def _push_ignoring(self, operations, error):
        try:
            self.push(operations)
        except (urllib.error.URLError, ConnectionError, OSError, Failure) as exception:
            error.append(exception)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--fanout-limit", type=int, default=None)
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--bin", default=os.environ.get("OFFLINE_SYNC_BIN") or ".build/debug/offline-sync")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    args.bin = os.path.abspath(args.bin)
    postgres_url = os.environ.get("OFFLINE_SYNC_TEST_POSTGRES_URL", "")
    if args.store == "postgres" and not postgres_url:
        print("membership crash trials: skipped on postgres (OFFLINE_SYNC_TEST_POSTGRES_URL is unset)")
        return 0
    schemas = []

    def store_url():
        """A fresh schema per run, named as Scripts/with-postgres.sh drops them."""
        if args.store != "postgres":
            return None
        run = os.environ.get("OFFLINE_SYNC_TEST_RUN", "")
        if not re.fullmatch(r"[A-Za-z0-9]{1,16}", run):
            run = "local"
        name = f"osync_test_{run}_crash_membership_{os.getpid():x}{random.SystemRandom().getrandbits(24):06x}".lower()
        schemas.append(name)
        return postgres_url + ("&" if "?" in postgres_url else "?") + "schema=" + name
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 2 ** 63)
    limits = [args.fanout_limit] if args.fanout_limit is not None else [2, None]
    print(f"membership crash trials: seed {seed}, {args.trials} trials per fan-out limit, store {args.store}", flush=True)
    failed = False
    for limit in limits:
        directory = tempfile.mkdtemp(prefix="offline-sync-membership-crash-")
        args.store_url = store_url()
        trials = Trials(args, limit, seed, directory)
        started = time.monotonic()
        try:
            trials.run()
        except Failure as failure:
            trials.failures.append(str(failure))
        finally:
            if trials.server.proc and trials.server.proc.poll() is None:
                trials.server.proc.kill()
        name = f"fan-out limit {limit if limit is not None else 'default'}"
        figures = trials.figures
        print(f"{name}: {'FAILED' if trials.failures else 'passed'} in {time.monotonic() - started:.1f} s; kills "
              + ", ".join(f"{m} {n}" for m, n in figures["kills"].items())
              + f"; bob's pages {figures['pages']}, rows received {figures['received']}, removals {figures['removed']}",
              flush=True)
        for message in trials.failures:
            print("  - " + message, flush=True)
        if trials.failures:
            failed = True
            print(f"  replay: python3 Tests/Reliability/membership_crash.py --seed {seed} --trials {args.trials} "
                  f"--store {args.store}" + (f" --fanout-limit {limit}" if limit is not None else ""), flush=True)
        if not os.environ.get("OFFLINE_SYNC_KEEP_TMP"):
            shutil.rmtree(directory, ignore_errors=True)
    if schemas and shutil.which("psql"):
        sql = "".join(f'DROP SCHEMA IF EXISTS "{name}" CASCADE;' for name in schemas)
        subprocess.run(["psql", postgres_url, "-q", "-c", sql], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=60)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Writes a server store with shared data through a previous version of `offline-sync serve`
(its view log holding one entry per identity and row), for the test that opens it with this
one (Tests/OfflineSyncServerTests/SharedUpgradeTests.swift).

    Scripts/make-shared-store.py OLD_OFFLINE_SYNC_BINARY OUTPUT_DIRECTORY

The fixture checked in as Tests/Fixtures/server-before-groups/ was made from commit d76a07a
(the last commit before group logs):

    git worktree add /tmp/old d76a07a && (cd /tmp/old && swift build --product offline-sync)
    Scripts/make-shared-store.py /tmp/old/.build/debug/offline-sync Tests/Fixtures/server-before-groups

What it writes, through the old server's own routes and under the shared-lists rules
(RemoteStoreConformance.sharedListsRules): ann's list L1 shared with ben and cat, ben's list
L2 shared with ann, todos in both, an edit, a delete, a membership ended (cat leaves L1),
each identity's pull cursors after a full pull and the rows it then held (`cursors.json`),
and then more changes that
those cursors have not seen yet (a new todo in L1, dan added to L2, ann's L2 membership
ended), so the test's first pull after the upgrade must bring exactly those.
"""
import json
import os
import shutil
import sys
import tempfile

from fixture_server import call, push, start, token

SECRET = "shared-fixture-secret-0123456789abcdef"
# The shared-lists rules, the same document the other rule tests serve.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "Fixtures", "shared-lists-rules.yaml")) as _rules:
    RULES = _rules.read()
TABLES = ["lists", "list_members", "todos"]
IDENTITIES = ["ann", "ben", "cat", "dan"]


def op(identifier, table, item, kind, fields=None, base_version=None):
    operation = {"id": identifier, "table": table, "itemId": item, "kind": kind}
    if fields is not None:
        operation["item"] = {"id": item, "fields": fields}
    if base_version is not None:
        operation["baseVersion"] = base_version
    return operation


def pull_all(base, bearer, table):
    """Pulls the whole table in pages of two; returns the cursor and what a client then holds
    (each live row's version, by id)."""
    cursor, held = None, {}
    while True:
        body = {"table": table, "limit": 2}
        if cursor is not None:
            body["cursor"] = cursor
        page = call(base, bearer, "POST", "/v1/pull", body)
        for record in page["records"]:
            if record.get("deleted"):
                held.pop(record["id"], None)
            else:
                held[record["id"]] = record["version"]
        for identifier in page.get("removed", []):
            held.pop(identifier, None)
        cursor = page["nextCursor"]
        if page["remaining"] == 0:
            return {"cursor": cursor, "held": held}


def main():
    binary, output = sys.argv[1], sys.argv[2]
    data = tempfile.mkdtemp(prefix="shared-store-")
    try:
        rules = os.path.join(data, "rules.yaml")
        with open(rules, "w") as handle:
            handle.write(RULES)
        process, base = start(binary, data, SECRET, ["--rules", rules])
        try:
            tokens = {identity: token(binary, data, SECRET, identity) for identity in IDENTITIES}
            ann, ben = tokens["ann"], tokens["ben"]
            push(base, ann, [op("a1", "lists", "L1", "insert", {"name": "groceries"}),
                             op("a2", "list_members", "m-L1-ann", "insert", {"list_id": "L1", "user_id": "ann"}),
                             op("a3", "list_members", "m-L1-ben", "insert", {"list_id": "L1", "user_id": "ben"}),
                             op("a4", "list_members", "m-L1-cat", "insert", {"list_id": "L1", "user_id": "cat"})])
            push(base, ben, [op("b1", "lists", "L2", "insert", {"name": "hardware"}),
                             op("b2", "list_members", "m-L2-ben", "insert", {"list_id": "L2", "user_id": "ben"}),
                             op("b3", "list_members", "m-L2-ann", "insert", {"list_id": "L2", "user_id": "ann"})])
            written = push(base, ann, [op("a5", "todos", "t1", "insert", {"list_id": "L1", "title": "milk"}),
                                       op("a6", "todos", "t2", "insert", {"list_id": "L1", "title": "bread"}),
                                       op("a7", "todos", "t3", "insert", {"list_id": "L2", "title": "nails"})])
            push(base, ben, [op("b4", "todos", "t1", "update", {"list_id": "L1", "title": "oat milk"},
                                base_version=written[0]["record"]["version"]),
                             op("b5", "todos", "t2", "delete", base_version=written[1]["record"]["version"])])
            push(base, ann, [op("a8", "list_members", "m-L1-cat", "delete")])
            cursors = {identity: {table: pull_all(base, tokens[identity], table) for table in TABLES}
                       for identity in IDENTITIES}
            push(base, ann, [op("a9", "todos", "t4", "insert", {"list_id": "L1", "title": "eggs"})])
            push(base, ben, [op("b6", "list_members", "m-L2-dan", "insert", {"list_id": "L2", "user_id": "dan"}),
                             op("b7", "list_members", "m-L2-ann", "delete")])
        finally:
            process.terminate()
            if process.wait(timeout=30) != 0:
                raise SystemExit("the old server did not stop cleanly")
        for suffix in ("-wal", "-shm"):
            if os.path.exists(os.path.join(data, "server.sqlite" + suffix)):
                raise SystemExit("the old server left a WAL behind: the fixture would be incomplete")
        os.makedirs(output, exist_ok=True)
        shutil.copyfile(os.path.join(data, "server.sqlite"), os.path.join(output, "server.sqlite"))
        with open(os.path.join(output, "cursors.json"), "w") as handle:
            json.dump(cursors, handle, indent=2, sort_keys=True)
            handle.write("\n")
        print("wrote", output)
    finally:
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()

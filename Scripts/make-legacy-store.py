#!/usr/bin/env python3
"""Writes a server store with a previous version of `offline-sync serve`, for the test that
opens it with this one (Tests/OfflineSyncServerTests/LegacyStoreTests.swift).

    Scripts/make-legacy-store.py OLD_OFFLINE_SYNC_BINARY OUTPUT.sqlite

The fixture checked in as Tests/Fixtures/server-before-rules.sqlite was made from commit
8b7f644 (the last commit before sync rules):

    git worktree add /tmp/old 8b7f644 && (cd /tmp/old && swift build --product offline-sync)
    Scripts/make-legacy-store.py /tmp/old/.build/debug/offline-sync \
        Tests/Fixtures/server-before-rules.sqlite

What it writes, through the old server's own routes: alice's and bob's todos in the same
table, under the same item ids (ids were per identity then, and still are for owner-only
tables), an update, a delete, a row created through the Datasync tables API, and a Cognito
dataset record.
"""
import os
import shutil
import sys
import tempfile

from fixture_server import call, push, start, token

SECRET = "legacy-fixture-secret-0123456789abcdef"


def op(identifier, item, kind, fields=None, base_version=None):
    operation = {"id": identifier, "table": "todos", "itemId": item, "kind": kind}
    if fields is not None:
        operation["item"] = {"id": item, "fields": fields}
    if base_version is not None:
        operation["baseVersion"] = base_version
    return operation


def main():
    binary, output = sys.argv[1], sys.argv[2]
    data = tempfile.mkdtemp(prefix="legacy-store-")
    try:
        process, base = start(binary, data, SECRET)
        try:
            alice, bob = token(binary, data, SECRET, "alice"), token(binary, data, SECRET, "bob")
            written = push(base, alice, [
                op("a1", "t1", "insert", {"title": "milk", "n": 1, "done": False}),
                op("a2", "t2", "insert", {"title": "bread", "n": 2, "done": True, "tags": ["x", "y"]}),
                op("a3", "t3", "insert", {"title": "to delete", "n": 3}),
            ])
            push(base, alice, [op("a4", "t1", "update", {"title": "oat milk", "n": 1, "done": True},
                                  base_version=written[0]["record"]["version"]),
                               op("a5", "t3", "delete", base_version=written[2]["record"]["version"])])
            push(base, bob, [op("b1", "t1", "insert", {"title": "bob's own t1", "n": 10})])
            call(base, bob, "POST", "/tables/todos", {"id": "t9", "title": "through the tables API", "n": 9},
                 {"ZUMO-API-VERSION": "3.0.0"})
            pool = "us-east-1:00000000-0000-0000-0000-000000000001"
            path = f"/identitypools/{pool}/identities/alice/datasets/profile"
            session = call(base, alice, "GET", path + "/records?lastSyncCount=0")
            call(base, alice, "POST", path, {"SyncSessionToken": session["SyncSessionToken"],
                                             "RecordPatches": [{"Op": "replace", "Key": "name", "Value": "Alice",
                                                                "SyncCount": 0}]})
        finally:
            process.terminate()
            if process.wait(timeout=30) != 0:
                raise SystemExit("the old server did not stop cleanly")
        for suffix in ("-wal", "-shm"):
            if os.path.exists(os.path.join(data, "server.sqlite" + suffix)):
                raise SystemExit("the old server left a WAL behind: the fixture would be incomplete")
        shutil.copyfile(os.path.join(data, "server.sqlite"), output)
        print("wrote", output)
    finally:
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Leak tests under sync rules: nothing an identity may not read leaves the server.

Run from the repository root, against a built server binary (`make hostile-test` does):

    OFFLINE_SYNC_BIN=.build/debug/offline-sync python3 -m unittest -v Tests/Hostile/test_leaks.py

One `offline-sync serve --rules` runs for the module, with the shared-lists rules of the
RemoteStore conformance suite. Alice owns two lists: one she shares with bob, one only she is
in; every value of the private list, and alice's Cognito dataset, carries SECRET. Bob (a
member of the shared list) and carol (in no list) then try every route — native push and
pull, the Datasync tables API, the Cognito Sync API, the change notifications — and every
error path we can reach: hidden ids, guessed versions, filters on the secret value, bad
cursors, replayed operation ids. No answer (status line, header or body) may carry SECRET or
the private list's id, no count may include a hidden row, and no notification of alice's
private writes may reach them. The helpers (server fixture, SigV4, WebSocket reader) are
test_auth's.
"""

import json
import os
import sys
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_auth as auth  # noqa: E402

SECRET = "SECRET-ROW-VALUE-7f3a"
PRIVATE = "L-private-9b1"
CAROL = "us-east-1:cccccccc-0000-4000-8000-0000000ca201"
# The shared-lists rules, the same document the other rule tests serve.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Fixtures", "shared-lists-rules.yaml")) as _rules:
    RULES = _rules.read()

S = auth.S


def native(token, route, document):
    return auth.send("POST", route, auth.jbody(document), dict(auth.JSON_HEADERS, **auth.bearer(token)))


def native_stream(token, document):
    """POST /v2/pull: the same request, answered with the binary page stream."""
    return auth.send("POST", "/v2/pull", auth.jbody(document),
                     dict(auth.JSON_HEADERS, Accept=auth.PAGE_STREAM, **auth.bearer(token)))


def stream_frames(body):
    """The (type, payload) frames of a page stream (Docs/Protocol.md): after the bytes
    `OSPS` 1, each frame is a type byte, a 4-byte little-endian length and the payload."""
    if body[:5] != b"OSPS\x01":
        raise AssertionError("not a page stream: %r" % body[:16])
    frames, at = [], 5
    while at < len(body):
        kind, length = body[at], int.from_bytes(body[at + 1:at + 5], "little")
        frames.append((kind, body[at + 5:at + 5 + length]))
        at += 5 + length
    return frames


def op(op_id, table, item, kind="insert", fields=None, base=None):
    operation = {"id": op_id, "table": table, "itemId": item, "kind": kind}
    if fields is not None:
        operation["item"] = {"id": item, "fields": fields}
    if base is not None:
        operation["baseVersion"] = base
    return operation


def setUpModule():
    auth.start_with_rules(RULES, _seed)


def _seed(server):
    """Alice's shared and private lists, bob's membership of the shared one, a todo in each
    and a dataset entry: the values the leak tests look for."""
    S.alice, S.bob, S.carol = server.mint(auth.ALICE), server.mint(auth.BOB), server.mint(CAROL)
    status, _, body = native(S.alice, "/v1/push", {"operations": [
        op("a1", "lists", "L-shared", fields={"name": "groceries"}),
        op("a2", "lists", PRIVATE, fields={"name": SECRET}),
        op("a3", "list_members", "m-shared-alice", fields={"list_id": "L-shared", "user_id": auth.ALICE}),
        op("a4", "list_members", "m-shared-bob", fields={"list_id": "L-shared", "user_id": auth.BOB}),
        op("a5", "list_members", "m-private-alice", fields={"list_id": PRIVATE, "user_id": auth.ALICE}),
        op("a6", "todos", "t-open", fields={"list_id": "L-shared", "title": "milk"}),
        op("a7", "todos", "t-secret", fields={"list_id": PRIVATE, "title": SECRET, "note": SECRET}),
    ]})
    results = json.loads(body)["results"]
    if status != 200 or any(r["outcome"] != "applied" for r in results):
        raise RuntimeError("seeding failed: %s %s" % (status, body[:500]))
    S.secret_version = next(r["record"]["version"] for r in results if r["operationId"] == "a7")
    auth._cognito_write(auth.ALICE, "diary", [{"Op": "replace", "Key": "entry", "Value": SECRET, "SyncCount": 0}],
                        auth.bearer(S.alice))


def tearDownModule():
    if S.server is not None:
        code = S.server.stop()
        if code != 0:
            raise RuntimeError("the server exited with %s on SIGTERM" % code)


class LeakTest(unittest.TestCase):
    def assert_clean(self, answer, what, sent_private_id=False):
        """No 5xx, no secret value, and no mention of the private list unless the caller
        named it itself (a refusal may repeat the id it was sent)."""
        status, headers, body = answer
        text = body.decode("utf-8", "replace") + "".join("%s: %s\n" % item for item in headers.items())
        self.assertLess(status, 500, "%s answered %d" % (what, status))
        self.assertNotIn(SECRET, text, "%s leaked the secret value" % what)
        if not sent_private_id:
            self.assertNotIn(PRIVATE, text, "%s named the private list" % what)
        return status, body

    def test_01_native_pull_pages_counts_and_errors(self):
        for who, token in (("bob", S.bob), ("carol", S.carol)):
            for table in ("lists", "todos", "list_members"):
                for request in ({"table": table, "limit": 1}, {"table": table, "limit": 500},
                                {"table": table, "predicate": {"op": "compare", "field": "title", "cmp": "==", "value": SECRET}},
                                {"table": table, "cursor": "garbage:1"}, {"table": table, "limit": 10 ** 9},
                                {"table": table, "predicate": {"op": "compare", "field": "__owner", "cmp": "==", "value": auth.ALICE}}):
                    status, body = self.assert_clean(native(token, "/v1/pull", request), "%s's pull %s" % (who, request))
                    if status == 200:
                        page = json.loads(body)
                        self.assertEqual(page.get("removed", []), [], "removed ids %s never saw" % who)
                        if who == "carol":
                            self.assertEqual((page["records"], page["remaining"]), ([], 0), "carol's %s" % table)
                    # The page stream answers the same request with the same rows, in binary.
                    streamed, body = self.assert_clean(native_stream(token, request), "%s's streamed pull %s" % (who, request))
                    self.assertEqual(streamed, status, "/v2/pull and /v1/pull answer %s's %s alike" % (who, request))
                    if streamed == 200 and who == "carol":
                        kinds = [kind for kind, _ in stream_frames(body)]
                        self.assertEqual(kinds, [1, 3], "carol's %s stream: one empty page, then the end" % table)
        status, body = self.assert_clean(native(S.bob, "/v1/pull", {"table": "todos", "limit": 1}), "bob's todos")
        page = json.loads(body)
        self.assertEqual(([r["id"] for r in page["records"]], page["remaining"]), (["t-open"], 0))
        status, body = self.assert_clean(native_stream(S.bob, {"table": "todos", "limit": 1}), "bob's streamed todos")
        self.assertEqual([kind for kind, _ in stream_frames(body)], [1, 2, 3], "one page of one record, then the end")
        self.assertIn(b"t-open", stream_frames(body)[1][1])

    def test_02_native_push_refusals_carry_nothing(self):
        attempts = [
            op("b1", "todos", "t-secret", "insert", {"list_id": "L-shared", "title": "mine"}),
            op("b2", "todos", "t-secret", "update", {"list_id": "L-shared", "title": "x"}, base=S.secret_version),
            op("b3", "todos", "t-secret", "update", {"list_id": PRIVATE, "title": "x"}, base="wrong-version"),
            op("b4", "todos", "t-secret", "delete", base=S.secret_version),
            op("b5", "todos", "t-new", "insert", {"list_id": PRIVATE, "title": "x"}),
            op("b6", "lists", PRIVATE, "update", {"name": "x"}),
            op("b7", "list_members", "m-private-bob", "insert", {"list_id": PRIVATE, "user_id": auth.BOB}),
            op("b8", "todos", "t-secret", "update", {"list_id": PRIVATE, "__owner": auth.BOB}),
            op("a7", "todos", "t-secret", "update", {"list_id": PRIVATE, "title": "replayed id"}),
        ]
        for who, token in (("bob", S.bob), ("carol", S.carol)):
            for attempt in attempts:
                attempt = dict(attempt, id=attempt["id"] + who)
                if attempt["id"].startswith("a7"):
                    attempt["id"] = "a7"  # alice's operation id: a replay must not return her outcome
                status, body = self.assert_clean(native(token, "/v1/push", {"operations": [attempt]}),
                                                 "%s's push %s" % (who, attempt["id"]), sent_private_id=PRIVATE in json.dumps(attempt))
                self.assertEqual(status, 200)
                result = json.loads(body)["results"][0]
                self.assertNotEqual(result["outcome"], "applied", "%s's %s was applied" % (who, attempt["id"]))
                self.assertNotIn("record", result, "%s's %s carried a record" % (who, attempt["id"]))
        status, _, body = native(S.alice, "/v1/pull", {"table": "todos"})
        secret = [r for r in json.loads(body)["records"] if r["id"] == "t-secret"] if status == 200 else []
        self.assertEqual(len(secret), 1)
        self.assertEqual(secret[0]["version"], S.secret_version, "a refused write changed the row")

    def test_03_tables_api_lists_counts_lookups_and_writes(self):
        headers = lambda token, extra=None: dict(auth.TABLES_JSON_HEADERS, **auth.bearer(token), **(extra or {}))
        title = "$filter=" + urllib.parse.quote("title eq '%s'" % SECRET)
        in_private = "$filter=" + urllib.parse.quote("list_id eq '%s'" % PRIVATE)
        queries = [("$count=true", 1), (title + "&$count=true", 0), (in_private + "&$count=true", 0),
                   ("$orderby=title%20desc&$select=title,note&__includedeleted=true&$count=true", 1),
                   ("$skip=0&$top=1000&$count=true", 1), ("$filter=" + urllib.parse.quote("__owner eq 'x'"), None)]
        for who, token, member in (("bob", S.bob, True), ("carol", S.carol, False)):
            for query, visible in queries:
                status, body = self.assert_clean(auth.send("GET", "/tables/todos?" + query, None, headers(token)),
                                                 "%s's list %s" % (who, query), sent_private_id=query == queries[2][0])
                if visible is not None:
                    self.assertEqual(status, 200)
                    self.assertEqual(json.loads(body)["count"], visible if member else 0, "%s's count %s" % (who, query))
            for method, extra, body in (("GET", None, None), ("GET", {"If-None-Match": "*"}, None),
                                        ("GET", {"If-None-Match": '"%s"' % S.secret_version}, None),
                                        ("PUT", {"If-Match": '"%s"' % S.secret_version}, {"id": "t-secret", "list_id": "L-shared"}),
                                        ("DELETE", {"If-Match": "*"}, None)):
                status, _ = self.assert_clean(auth.send(method, "/tables/todos/t-secret", auth.jbody(body) if body else None,
                                                        headers(token, extra)), "%s's %s of t-secret" % (who, method))
                self.assertEqual(status, 404, "%s's %s of a hidden row must look like a missing one" % (who, method))
            status, _ = self.assert_clean(auth.send("POST", "/tables/todos", auth.jbody({"id": "t-secret", "title": "x"}),
                                                    headers(token)), "%s's POST of a hidden id" % who)
            self.assertEqual(status, 403)
            status, _ = self.assert_clean(auth.send("GET", "/tables/lists/" + PRIVATE, None, headers(token)),
                                          "%s's GET of the private list" % who, sent_private_id=True)
            self.assertEqual(status, 404)

    def test_04_cognito_routes_of_another_identity(self):
        path = auth.dataset_path(auth.ALICE, "diary")
        credentials = (("bob's key", lambda route: auth._signed_creds("GET", route, None, auth.BOB_KEY)),
                       ("bob's bearer token", lambda route: auth.bearer(S.bob)),
                       ("carol's bearer token", lambda route: auth.bearer(S.carol)))
        for name, creds in credentials:
            for route in (path + "/records", path, auth.identity_path(auth.ALICE) + "/datasets"):
                status, _ = self.assert_clean(auth.send("GET", route, None, creds(route)), "%s on %s" % (name, route))
                self.assertIn(status, (400, 401, 403, 404), "%s reached alice's dataset" % name)

    def test_05_notifications_reach_readers_only(self):
        readers = {}
        for who, token in (("bob", S.bob), ("carol", S.carol)):
            status, sock, rest, _ = auth.ws_open("Bearer " + token)
            self.assertEqual(status, 101)
            reader = auth.WSReader(sock, rest)
            self.assertEqual(reader.message(10), {"type": "subscribed"})
            readers[who] = (reader, sock, token)
        _, _, body = native(S.alice, "/v1/push", {"operations": [
            op("a-notify", "todos", "t-secret", "update", {"list_id": PRIVATE, "title": SECRET + "-2"}, base=S.secret_version)]})
        self.assertEqual(json.loads(body)["results"][0]["outcome"], "applied")
        S.secret_version = json.loads(body)["results"][0]["record"]["version"]
        for who, (reader, sock, token) in readers.items():
            # The reader's own write is announced to it; alice's private write must not come first.
            native(token, "/v1/push", {"operations": [op("own-" + who, "notes", "n-" + who, fields={"text": "mine"})]})
            message = reader.message(10)
            self.assertEqual(message, {"type": "change", "table": "notes"}, "%s heard %r before its own change" % (who, message))
            self.assertNotIn(SECRET, json.dumps(message))
            sock.close()


if __name__ == "__main__":
    unittest.main()

#!/usr/bin/env bash
# What `make serve` gives a user, checked with curl: `offline-sync serve` with its defaults
# (SQLite data in ./offline-sync-data under a scratch working directory, on a free port),
# a token from `offline-sync token`, then health, a push, a pull, the tables API and a
# refused request, and a graceful stop with SIGTERM.
#
#   Scripts/serve-smoke.sh PATH/TO/offline-sync
set -euo pipefail

tool="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
scratch="$(mktemp -d)"
server=""
cleanup() {
    if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then kill -TERM "$server"; wait "$server" || true; fi
    rm -rf "$scratch"
}
trap cleanup EXIT
cd "$scratch"

"$tool" serve --port 0 > serve.log 2>&1 &
server=$!
for _ in $(seq 1 100); do
    grep -q "listening on" serve.log 2>/dev/null && break
    sleep 0.1
done
url="$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' serve.log | head -1)"
[ -n "$url" ] || { echo "serve-smoke: the server did not start:" >&2; cat serve.log >&2; exit 1; }
[ -f offline-sync-data/token-secret ] || { echo "serve-smoke: no token secret in ./offline-sync-data" >&2; exit 1; }
token="$("$tool" token --identity smoke)"

check() {  # check NAME EXPECTED-STATUS curl-arguments…
    local name="$1" expected="$2"; shift 2
    local status
    status="$(curl -s -o body.json -w '%{http_code}' "$@")"
    if [ "$status" != "$expected" ]; then
        echo "serve-smoke: $name answered $status, expected $expected: $(cat body.json)" >&2
        exit 1
    fi
    echo "serve-smoke: $name -> $status"
}
auth=(-H "Authorization: Bearer $token" -H "Content-Type: application/json")
check "GET /health" 200 "$url/health"
check "POST /v1/push" 200 "${auth[@]}" -d '{"operations":[{"id":"op-1","table":"todos","itemId":"a","kind":"insert","item":{"id":"a","fields":{"title":"from curl"}}}]}' "$url/v1/push"
grep -q '"outcome":"applied"' body.json || { echo "serve-smoke: the push was not applied: $(cat body.json)" >&2; exit 1; }
check "POST /v1/pull" 200 "${auth[@]}" -d '{"table":"todos"}' "$url/v1/pull"
grep -q '"title":"from curl"' body.json || { echo "serve-smoke: the pull misses the record: $(cat body.json)" >&2; exit 1; }
check "GET /tables/todos/a" 200 "${auth[@]}" -H "ZUMO-API-VERSION: 3.0.0" "$url/tables/todos/a"
check "POST /v1/pull without a token" 401 -d '{"table":"todos"}' "$url/v1/pull"

kill -TERM "$server"
status=0
wait "$server" || status=$?
server=""
[ "$status" = 0 ] || { echo "serve-smoke: the server exited with $status after SIGTERM" >&2; cat serve.log >&2; exit 1; }
grep -q "offline-sync server stopped" serve.log || { echo "serve-smoke: no graceful stop in the log" >&2; exit 1; }
echo "serve-smoke: SIGTERM -> graceful stop, status 0"

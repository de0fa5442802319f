"""What the fixture generators (make-legacy-store.py, make-shared-store.py) share: an old
`offline-sync serve` started on a data directory, its development tokens, and its native
routes. Standard library only."""

import json
import os
import subprocess
import urllib.request


def start(binary, data, secret, extra=()):
    """Starts `binary serve` on `data` (with `extra` arguments, such as `--rules FILE`);
    returns the process and its base URL once it listens."""
    env = dict(os.environ, OFFLINE_SYNC_TOKEN_SECRET=secret)
    env.pop("OFFLINE_SYNC_STORE", None)
    process = subprocess.Popen([binary, "serve", "--port", "0", "--data", data, "--log-level", "warning", *extra],
                               stdout=subprocess.PIPE, env=env, text=True)
    for line in process.stdout:
        if "listening on " in line:
            return process, line.split("listening on ", 1)[1].split()[0]
    raise SystemExit("the old server exited before it was listening")


def token(binary, data, secret, identity):
    """A development token for `identity`, minted by the old binary."""
    env = dict(os.environ, OFFLINE_SYNC_TOKEN_SECRET=secret)
    out = subprocess.run([binary, "token", "--identity", identity, "--data", data], env=env, check=True,
                         capture_output=True, text=True)
    return out.stdout.strip()


def call(base, bearer, method, path, body=None, headers=None):
    """One request with a bearer token; the JSON answer (`None` for an empty body)."""
    request = urllib.request.Request(base + path, method=method,
                                     data=None if body is None else json.dumps(body).encode())
    request.add_header("Authorization", "Bearer " + bearer)
    request.add_header("Content-Type", "application/json")
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    with urllib.request.urlopen(request) as response:
        return json.loads(response.read() or b"null")


def push(base, bearer, operations):
    """Pushes `operations` and checks every one applied; returns the results."""
    results = call(base, bearer, "POST", "/v1/push", {"operations": operations})["results"]
    for result in results:
        assert result["outcome"] == "applied", result
    return results

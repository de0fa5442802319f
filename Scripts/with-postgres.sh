#!/usr/bin/env bash
# Runs a command with a throwaway PostgreSQL cluster, then stops and removes the cluster
# whatever the command's outcome.
#
#   Scripts/with-postgres.sh COMMAND [ARG...]
#
# The command sees OFFLINE_SYNC_TEST_POSTGRES_URL (postgres://…) naming a database it may do
# anything to. If OFFLINE_SYNC_TEST_POSTGRES_URL is already set, no cluster is started and
# the command runs against that server instead (a developer's own server), and the schemas
# the run's tests created (osync_test_<run>_*, see OFFLINE_SYNC_TEST_RUN) are dropped after it.
#
# The cluster lives in a new temporary directory, listens on 127.0.0.1 at a free port and on
# a Unix socket in that directory, requires a password over TCP (scram-sha-256) and is owned
# by a non-root user (the `postgres` account when run as root). The server binaries come from
# Debian's postgresql package (`make deps` installs it when missing).
set -euo pipefail

# Test schemas are named osync_test_<run>_…, so a run on a shared server removes only its own.
export OFFLINE_SYNC_TEST_RUN="${OFFLINE_SYNC_TEST_RUN:-$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')}"

if [ -n "${OFFLINE_SYNC_TEST_POSTGRES_URL:-}" ]; then
    echo "with-postgres: using the server at OFFLINE_SYNC_TEST_POSTGRES_URL (run $OFFLINE_SYNC_TEST_RUN)"
    status=0
    "$@" || status=$?
    # Drop the schemas this run's tests created (osync_test_<run>_*), leaving everything else.
    if command -v psql >/dev/null 2>&1; then
        psql "$OFFLINE_SYNC_TEST_POSTGRES_URL" -v ON_ERROR_STOP=1 -qAt -v run="osync_test_${OFFLINE_SYNC_TEST_RUN}_%" <<'SQL' \
            || echo "with-postgres: could not drop the test schemas osync_test_${OFFLINE_SYNC_TEST_RUN}_*" >&2
SELECT format('DROP SCHEMA IF EXISTS %I CASCADE', nspname) FROM pg_namespace WHERE nspname LIKE :'run' \gexec
SQL
    else
        echo "with-postgres: psql not found; drop the schemas osync_test_${OFFLINE_SYNC_TEST_RUN}_* yourself" >&2
    fi
    exit "$status"
fi

bindir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
    echo "with-postgres: PostgreSQL server binaries not found under /usr/lib/postgresql (install Debian's postgresql package)" >&2
    exit 1
fi

as_owner=()
if [ "$(id -u)" = 0 ]; then
    owner=postgres
    id "$owner" >/dev/null 2>&1 || { echo "with-postgres: running as root needs the 'postgres' account" >&2; exit 1; }
    as_owner=(runuser -u "$owner" --)
fi

root="$(mktemp -d /tmp/offline-sync-pg.XXXXXX)"
chmod 755 "$root"
[ "${#as_owner[@]}" -gt 0 ] && chown "$owner" "$root"
password="$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"

stop() {
    "${as_owner[@]}" "$bindir/pg_ctl" -D "$root/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$root"
}
trap stop EXIT INT TERM

printf '%s\n' "$password" > "$root/pwfile"
[ "${#as_owner[@]}" -gt 0 ] && chown "$owner" "$root/pwfile"
"${as_owner[@]}" "$bindir/initdb" -D "$root/data" -U postgres --pwfile="$root/pwfile" \
    --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 --data-checksums >"$root/initdb.log" 2>&1 \
    || { cat "$root/initdb.log" >&2; exit 1; }
rm -f "$root/pwfile"
"${as_owner[@]}" "$bindir/pg_ctl" -D "$root/data" -l "$root/server.log" -w -t 60 \
    -o "-p $port -k $root -c listen_addresses=127.0.0.1 -c fsync=on -c max_connections=200" start >/dev/null \
    || { cat "$root/server.log" >&2; exit 1; }

export OFFLINE_SYNC_TEST_POSTGRES_URL="postgres://postgres:$password@127.0.0.1:$port/postgres"
export OFFLINE_SYNC_TEST_POSTGRES_SOCKET_DIR="$root"
echo "with-postgres: PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') on 127.0.0.1:$port (data in $root, removed afterwards)"
status=0
"$@" || status=$?
exit "$status"

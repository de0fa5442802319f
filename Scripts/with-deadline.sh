#!/usr/bin/env bash
# Runs a command with a deadline. A command still running at the deadline is not just killed:
# first every thread of every process under it is printed with its stack (gdb), and, when
# OFFLINE_SYNC_TEST_POSTGRES_URL names a server, what PostgreSQL's sessions are doing and
# waiting for — so a hung test run fails in bounded time and says where it hung.
#
#   Scripts/with-deadline.sh SECONDS COMMAND [ARG...]
#
# Exits with the command's status, or 124 when the deadline passed.
set -uo pipefail

if [ "$#" -lt 2 ]; then
    echo "usage: $0 SECONDS COMMAND [ARG...]" >&2
    exit 2
fi
seconds="$1"
shift

# The command leads a process group of its own, so everything it started can be found and
# stopped together.
set -m
"$@" &
child=$!
set +m

descendants() {
    local pid="$1" kid
    echo "$pid"
    for kid in $(cat "/proc/$pid/task/"*/children 2>/dev/null); do
        descendants "$kid"
    done
}

( sleep "$seconds" && touch "/tmp/with-deadline.$child.expired" && kill -USR1 $$ ) 2>/dev/null &
timer=$!

expired=0
trap 'expired=1' USR1
status=0
wait "$child" || status=$?
if [ "$expired" = 1 ] || [ -e "/tmp/with-deadline.$child.expired" ]; then
    rm -f "/tmp/with-deadline.$child.expired"
    {
        echo "with-deadline: still running after ${seconds} s: $*"
        for pid in $(descendants "$child"); do
            [ -r "/proc/$pid/cmdline" ] || continue
            echo "==== process $pid: $(tr '\0' ' ' <"/proc/$pid/cmdline" | cut -c1-300)"
            if command -v gdb >/dev/null 2>&1; then
                # fflush first: a test run's output held in its stdio buffers (the tests that
                # started and ended last) reaches the log.
                timeout 120 gdb -p "$pid" -batch -nx -q -ex "set pagination off" -ex "call (int)fflush(0)" \
                    -ex "thread apply all bt 40" 2>&1 | grep -v '^\[New LWP\|^warning:' | head -n 4000
            else
                echo "(gdb not installed: no stacks)"
            fi
        done
        if [ -n "${OFFLINE_SYNC_TEST_POSTGRES_URL:-}" ] && command -v psql >/dev/null 2>&1; then
            echo "==== PostgreSQL sessions"
            timeout 30 psql "$OFFLINE_SYNC_TEST_POSTGRES_URL" -X -P pager=off -c \
                "SELECT pid, state, wait_event_type, wait_event, pg_blocking_pids(pid) AS blocked_by,
                        now() - xact_start AS in_transaction, left(query, 200) AS query
                   FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
                  ORDER BY xact_start NULLS LAST" 2>&1 || true
            echo "==== PostgreSQL locks not granted"
            timeout 30 psql "$OFFLINE_SYNC_TEST_POSTGRES_URL" -X -P pager=off -c \
                "SELECT pid, locktype, mode, relation::regclass, classid, objid, transactionid
                   FROM pg_locks WHERE NOT granted" 2>&1 || true
        fi
    } >&2
    kill -KILL -- "-$child" 2>/dev/null || true
    wait "$child" 2>/dev/null || true
    exit 124
fi
pkill -P "$timer" 2>/dev/null || true
kill "$timer" 2>/dev/null || true
exit "$status"

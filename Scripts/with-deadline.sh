#!/usr/bin/env bash
# Runs a command with a deadline. A command still running at the deadline is not just killed:
# first every thread of every process under it is printed with its stack (gdb, when installed;
# each thread's kernel wait channel in any case), and, when OFFLINE_SYNC_TEST_POSTGRES_URL
# names a server, what PostgreSQL's sessions are doing and waiting for — so a hung test run
# fails in bounded time and says where it hung. Then every process under it is killed, also
# those in process groups of their own (`swift test` starts the test binary in one).
#
#   Scripts/with-deadline.sh SECONDS COMMAND [ARG...]
#
# Exits with the command's status, or 124 when the deadline passed. SIGINT, SIGTERM and
# SIGHUP are passed on to the command, which goes on being waited for.
set -uo pipefail

if [ "$#" -lt 2 ]; then
    echo "usage: $0 SECONDS COMMAND [ARG...]" >&2
    exit 2
fi
seconds="$1"
shift

# The command leads a process group of its own, so everything it started can be found and
# stopped together; signals meant for this script are passed on to that group.
set -m
"$@" &
child=$!
sleep "$seconds" >/dev/null 2>&1 &
sleeper=$!
set +m
trap 'kill -INT -- "-$child" 2>/dev/null' INT
trap 'kill -TERM -- "-$child" 2>/dev/null' TERM
trap 'kill -HUP -- "-$child" 2>/dev/null' HUP

# Every process under `pid` (itself first), through /proc's child lists.
descendants() {
    local pid="$1" kid
    echo "$pid"
    for kid in $(cat "/proc/$pid/task/"*/children 2>/dev/null); do
        descendants "$kid"
    done
}

# Wait for whichever ends first; a trapped signal interrupts `wait`, so wait again.
while kill -0 "$child" 2>/dev/null && kill -0 "$sleeper" 2>/dev/null; do
    wait -n "$child" "$sleeper" 2>/dev/null
done
if ! kill -0 "$child" 2>/dev/null; then
    # The command ended (before the deadline, or at the same moment: its status counts).
    kill "$sleeper" 2>/dev/null
    status=0
    wait "$child" || status=$?
    exit "$status"
fi

pids=$(descendants "$child")
{
    echo "with-deadline: still running after ${seconds} s: $*"
    for pid in $pids; do
        [ -r "/proc/$pid/cmdline" ] || continue
        echo "==== process $pid: $(tr '\0' ' ' <"/proc/$pid/cmdline" | cut -c1-300)"
        for task in /proc/"$pid"/task/*; do
            echo "  thread ${task##*/} $(cat "$task/comm" 2>/dev/null) waits in $(cat "$task/wchan" 2>/dev/null)"
        done
        if command -v gdb >/dev/null 2>&1; then
            # The stacks first; then fflush, so output held in the process's stdio buffers
            # (the tests that started and ended last) reaches the log too.
            timeout 120 gdb -p "$pid" -batch -nx -q -ex "set pagination off" -ex "thread apply all bt 40" \
                -ex "call (int)fflush(0)" 2>&1 | grep -v '^\[New LWP\|^warning:' | head -n 20000
        else
            echo "  (gdb is not installed: no stacks)"
        fi
    done
    if [ -n "${OFFLINE_SYNC_TEST_POSTGRES_URL:-}" ] && command -v psql >/dev/null 2>&1; then
        echo "==== PostgreSQL sessions"
        timeout 30 psql "$OFFLINE_SYNC_TEST_POSTGRES_URL" -X -P pager=off -c \
            "SELECT pid, state, wait_event_type, wait_event, pg_blocking_pids(pid) AS blocked_by,
                    now() - xact_start AS in_transaction, left(query, 200) AS query
               FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
              ORDER BY xact_start NULLS LAST" 2>&1
        echo "==== PostgreSQL locks not granted"
        timeout 30 psql "$OFFLINE_SYNC_TEST_POSTGRES_URL" -X -P pager=off -c \
            "SELECT pid, locktype, mode, relation::regclass, classid, objid, transactionid
               FROM pg_locks WHERE NOT granted" 2>&1
    fi
} >&2
# Each process and its group: the test binary leads a group of its own.
for pid in $pids; do
    # The process group: the fifth field of /proc/PID/stat, after the name in parentheses.
    group=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f3)
    [ -n "$group" ] && kill -KILL -- "-$group" 2>/dev/null
    kill -KILL "$pid" 2>/dev/null
done
kill -KILL -- "-$child" 2>/dev/null
wait "$child" 2>/dev/null
exit 124

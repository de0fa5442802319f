#!/usr/bin/env bash
# Runs a command beside N hot standbys of the PostgreSQL server at OFFLINE_SYNC_TEST_POSTGRES_URL
# (run it inside Scripts/with-postgres.sh), and removes them afterwards:
#
#     Scripts/with-postgres.sh Scripts/with-replicas.sh 2 <command> [arguments]
#
# Each standby is a pg_basebackup of the server, streaming asynchronously through a replication
# slot (dropped afterwards), on a port of its own;
# their URLs are exported, space-separated, in OFFLINE_SYNC_TEST_POSTGRES_REPLICAS.
set -euo pipefail

count="${1:?usage: with-replicas.sh COUNT COMMAND [ARGUMENTS]}"
shift
primary="${OFFLINE_SYNC_TEST_POSTGRES_URL:?with-replicas: run inside Scripts/with-postgres.sh (OFFLINE_SYNC_TEST_POSTGRES_URL is not set)}"

bindir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
if [ -z "$bindir" ] || [ ! -x "$bindir/pg_basebackup" ]; then
    echo "with-replicas: PostgreSQL server binaries not found under /usr/lib/postgresql" >&2
    exit 1
fi
as_owner=()
if [ "$(id -u)" = 0 ]; then
    as_owner=(runuser -u postgres --)
fi

root="$(mktemp -d /tmp/offline-sync-replicas.XXXXXX)"
chmod 755 "$root"
[ "${#as_owner[@]}" -gt 0 ] && chown postgres "$root"

# This run's slots: a random prefix, so no other run's slot is touched.
slots="osync_standby_$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')_"
stop() {
    for data in "$root"/standby-*; do
        [ -d "$data" ] && "${as_owner[@]}" "$bindir/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1 || true
    done
    # Their slots would keep the primary's WAL for ever; a slot is still active until the
    # primary's WAL sender notices its standby went away.
    local left=0
    for _ in $(seq 1 50); do
        left="$(psql "$primary" -qAt \
            -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE starts_with(slot_name, '$slots') AND NOT active" \
            -c "SELECT count(*) FROM pg_replication_slots WHERE starts_with(slot_name, '$slots')" 2>/dev/null | tail -n 1)" || left=1
        [ "$left" = 0 ] && break
        sleep 0.1
    done
    [ "$left" = 0 ] || echo "with-replicas: replication slots ${slots}* may remain on the primary; drop them with pg_drop_replication_slot" >&2
    rm -rf "$root"
}
trap stop EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# postgres://USER:PASSWORD@HOST:PORT/DB
credentials="${primary#postgres://}"
credentials="${credentials%%@*}"
user="${credentials%%:*}"
password="${credentials#*:}"
address="${primary#*@}"
database=postgres
case "$address" in */?*) database="${address#*/}"; database="${database%%\?*}" ;; esac
address="${address%%/*}"
host="${address%%:*}"
port="${address##*:}"

urls=()
for n in $(seq 1 "$count"); do
    data="$root/standby-$n"
    standby_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
    "${as_owner[@]}" env PGPASSWORD="$password" "$bindir/pg_basebackup" -h "$host" -p "$port" -U "$user" \
        -D "$data" -R -X stream -C -S "$slots$n" >"$root/basebackup-$n.log" 2>&1 || { cat "$root/basebackup-$n.log" >&2; exit 1; }
    "${as_owner[@]}" "$bindir/pg_ctl" -D "$data" -l "$data.log" -w -t 60 \
        -o "-p $standby_port -k $root -c listen_addresses=127.0.0.1 -c max_connections=200 -c cluster_name=standby$n" start >/dev/null \
        || { cat "$data.log" >&2; exit 1; }
    urls+=("postgres://$user:$password@127.0.0.1:$standby_port/$database")
done

# Until each standby streams.
for n in $(seq 1 100); do
    streaming="$(psql "$primary" -qAt -c "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")"
    [ "$streaming" -ge "$count" ] && break
    sleep 0.1
done
[ "$streaming" -ge "$count" ] || { echo "with-replicas: the standbys did not stream within 10 s" >&2; exit 1; }

export OFFLINE_SYNC_TEST_POSTGRES_REPLICAS="${urls[*]}"
echo "with-replicas: $count hot standbys streaming (data in $root, removed afterwards)"
status=0
"$@" || status=$?
exit "$status"

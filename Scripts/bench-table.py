#!/usr/bin/env python3
"""Renders bench-results.json (written by `make bench`) as the Markdown table of
Docs/Performance.md: one row per workload, our time against its baseline's, the ratio, the
CPU ratio and the peak RSS of both sides.

    python3 Scripts/bench-table.py [bench-results.json] > table.md
"""
import json
import sys

# What each workload measures, and what its baseline is (the harness's own doc comments,
# Sources/offline-sync-harness/Bench+*.swift, say it at length).
WORKLOADS = {
    "local-writes-sqlite": ("100,000 local inserts through a SyncContext (each queued), 1,000 per transaction, SQLite", "the sqlite3 C API writing the same rows"),
    "local-writes-lmdb": ("the same on LMDB", "the LMDB C API writing the same rows"),
    "local-writes-encrypted-file": ("the same on the encrypted file", "swift-crypto sealing the same rows"),
    "local-writes-postgres": ("the same on PostgreSQL", "libpq writing the same rows"),
    "local-writes-grdb": ("the same rows written by the app with GRDB records into its own synced table, captured and queued", "GRDB writing the same rows into the same table, no sync"),
    "push-10k": ("10,000 queued inserts pushed by `push()` over HTTP", "10,000 `POST /tables` requests, one after the other"),
    "push-100k": ("100,000 queued inserts pushed the same way", "push-10k (ratio: the time for 10× the operations)"),
    "push-10k-server": ("the server applying push-10k's batches to SQLite, in process", "multi-row `INSERT`s of the same rows"),
    "push-10k-server-postgres": ("the same apply on PostgreSQL", "the same apply on SQLite"),
    "pull-1m": ("first pull of 1,000,000 records into an empty SQLite store, over the page stream", "the same pages fetched and decoded, nothing stored"),
    "pull-1m-grdb": ("the same first pull into the app's own GRDB table", "pull-1m (the same pull into a SQLite store)"),
    "pull-1m-local": ("the same first pull", "the sqlite3 C API writing the same rows in the same transactions"),
    "pull-10m": ("first pull of 10,000,000 records (`make bench-scale`)", "pull-1m (ratio: the time for 10× the rows)"),
    "pull-delta": ("incremental pull of 100 changes from a 1,000,000-row table", "the same from a 10,000-row table"),
    "pull-delta-shared": ("100 changed todos pulled by a member of 5,000 lists", "the same by a member of 10 lists"),
    "pull-delta-mixed": ("the same member, also in 20 large lists", "the member of 10 lists"),
    "move-in": ("a user added to a list of 10,000 todos, until they are in its store", "the first pull of 10,000 rows the user owns"),
    "move-out": ("the same user removed, until the todos are gone", "the pull of 10,000 deletions of its own rows"),
    "move-in-big": ("move-in with a list of 100,000 todos", "the first pull of 100,000 own rows"),
    "move-out-big": ("move-out with a list of 100,000 todos", "the pull of 100,000 own deletions"),
    "push-shared-big": ("1,000 todos pushed into a list of 10,000 members", "the same push into an owner-only table"),
    "push-shared-big-postgres": ("push-shared-big with the server's store on PostgreSQL", "the same push into an owner-only table"),
    "push-shared-k": ("1,000 todos pushed into a list of 100 members kept small (fan-out to each)", "the same push into an owner-only table"),
    "update-shared-big": ("100 single-row updates of todos in a list of 10,000 members", "100 updates of an owner-only table"),
    "tables-list-shared": ("a Datasync list's first page over 1,000,000 readable shared rows", "the same over an owner-only table"),
    "observe-latency": ("updates to a 100,000-row table with 100 live observations", "the same writer, nothing observed"),
    "observe-burst": ("first pull of 100,000 records with 10 live observations", "the same pull, nothing observed"),
    "local-reads-get": ("20,000 gets by id", "the sqlite3 C API reading the same rows"),
    "local-reads-query": ("indexed queries", "the sqlite3 C API running the same queries"),
    "local-reads-get-in-read": ("20,000 gets by id in one read transaction", "the same in one sqlite3 transaction"),
    "local-reads-query-in-read": ("the queries in one read transaction", "the same in one sqlite3 transaction"),
    "auth-verify": ("30,000 identity-provider tokens verified (RS256, ES256, EdDSA)", "30,000 HS256 development tokens"),
    "attachment-upload": ("a 256 MiB file from `addAttachment(contentsOf:)` until the server acknowledges its record", "the same bytes in one plain request through the same server"),
    "attachment-download": ("that file fetched on first access (`attachmentFileURL`) by a second device", "one plain GET of it to a file"),
    "attachment-upload-urlsession": ("attachment-upload through `URLSessionRemoteStore` (4 MiB requests, bodies whole)", "the same bytes in one plain request through the same server"),
    "attachment-download-urlsession": ("attachment-download through `URLSessionRemoteStore` (4 MiB ranges, one at a time)", "one plain GET of it to a file"),
    "attachment-upload-vs-hash": ("attachment-upload", "the same plain request, its body hashed (SHA-256) as it is read"),
    "attachment-download-vs-hash": ("attachment-download", "the same plain GET, hashed (SHA-256) as it arrives"),
    "attachment-upload-urlsession-vs-hash": ("attachment-upload-urlsession", "the same plain request, its body hashed (SHA-256) as it is read"),
    "attachment-download-urlsession-vs-hash": ("attachment-download-urlsession", "the same plain GET, hashed (SHA-256) as it arrives"),
    "attachment-resume": ("the upload's process killed at 50 %, then restarted (ratio: bytes sent after the restart)", "a client that sends the whole file again"),
    "attachment-small": ("1,000 records with a 50 KiB photo each, pushed, then pulled with `.all` prefetch", "the same records with the bytes inline in a field"),
}


def seconds(value):
    if value is None:
        return "–"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.3f} s"


def mib(value):
    return "–" if value is None else f"{value / (1 << 20):.0f} MiB"


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "bench-results.json"
    with open(path) as file:
        results = json.load(file)
    print(f"Machine: {results['machine']}.\n")
    print("| workload | what it measures | ours | baseline | ratio | CPU ratio | peak RSS (ours / baseline) |")
    print("|---|---|---|---|---|---|---|")
    for workload in results["workloads"]:
        name = workload["name"]
        what, against = WORKLOADS.get(name, (name, workload.get("baseline", "")))
        ratio = workload.get("ratio")
        cpu = workload.get("cpuRatio")
        print(f"| {name} | {what} | {seconds(workload.get('seconds'))} | {against}: {seconds(workload.get('baselineSeconds'))} | "
              f"{'–' if ratio is None else f'{ratio:.2f}×'} | {'–' if cpu is None else f'{cpu:.2f}×'} | "
              f"{mib(workload.get('peakRSSBytes'))} / {mib(workload.get('baselinePeakRSSBytes'))} |")
    served = [w for w in results["workloads"] if (w.get("metrics") or {}).get("serverPeakRSSMiB") is not None]
    if served:
        print("\nThe server's side of the workloads that note it (its own process):\n")
        print("| workload | server peak RSS (ours / baseline) | also measured |")
        print("|---|---|---|")
        for workload in served:
            ours, base = workload.get("metrics", {}), workload.get("baselineMetrics", {})
            other = ", ".join(f"{k} {v:,.3f}".rstrip("0").rstrip(".") for k, v in sorted(ours.items()) if k != "serverPeakRSSMiB")
            baseline = base.get("serverPeakRSSMiB")
            print(f"| {workload['name']} | {ours['serverPeakRSSMiB']:.0f} MiB / {'–' if baseline is None else f'{baseline:.0f} MiB'} | {other or '–'} |")


if __name__ == "__main__":
    main()

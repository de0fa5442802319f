#!/usr/bin/env python3
"""Attachment crash trials: files that travel with their records survive SIGKILL of the client
and of the server at the moments a file is most exposed.

What it proves
--------------
For each client store (SQLite, LMDB, the encrypted file; the server on SQLite), one
`offline-sync-harness crash-trial-client --attachments` process makes steps against one
`offline-sync serve`, through the fault-injecting proxy of crash_trials.py. Each step stores a
file (`addAttachment`) and commits a record `t-<i>` referencing it, then acknowledges `i` in an
fsynced log. A file's bytes follow from its record's id (block k is SHA-256 of
"<prefix>-<i>-<k>", cut to a size from i: every tenth file is 2.1-3.0 MB, three of the server's
1 MiB pieces, the others 1-20 KB), so this script and the client can each check every byte. A
second client ("writer", never killed) adds records with files under w- between trials, which
the trial client downloads as an app opens them. Each trial arms one phase, cycled in a seeded
shuffle:

  mid-file-write    the client is killed while a file is being written on the device (a
                    temporary `.part` file exists in its attachment directory).
  mid-upload        only a random part of an upload request's body (POST or PATCH on
                    /v1/attachments/...) reaches the server; the client is killed. In half
                    of these trials (and of mid-server-chunk's) the request is one of a file
                    of several pieces.
  after-upload      a push (/v2/push) that follows the uploads never reaches the server: the
                    files are there, their records are not; the client is killed.
  mid-download      only a random prefix of a download (GET /v1/attachments/<hash>) reaches the
                    client, which is killed.
  mid-server-chunk  an upload request is forwarded and the *server* is killed 0-3 ms later,
                    while it stores the pieces; it restarts on the same data, the client is
                    killed too.

After the trials the client runs to the end and drains (`--drain --sync`), reading every file of
every row it holds (its own and the writer's) and comparing each byte. The checks:

  1. every acknowledged step t-<i> is on the server exactly once, and its reference names the
     file of step i (hash and size); no row exists that no client acknowledged;
  2. every row on the server references a file the server serves whole: the download hashes
     to the reference (no row points at a missing or partial attachment);
  3. the drain printed pending=0 errors=0 and read every file with unavailable=0; the client
     never handed the app a wrong byte (it exits with status 3 if it does, in any run);
  4. every phase was reached in at least one trial;
  5. the server exits 0 on SIGTERM.

How to run it
-------------
From the repository root, with the binaries built (they are not built here):

    python3 Tests/Reliability/attachment_crash.py --trials 10
    python3 Tests/Reliability/attachment_crash.py --trials 10 --configs client-lmdb --seed 7 -v

Options: --trials N per configuration (default 10), --configs a,b, --phases a,b, --seed N,
--json FILE, --bin PATH (default: $OFFLINE_SYNC_BIN or .build/debug/offline-sync), --harness
PATH, -v. Exit status 0 only if every check of every configuration passed.

Standard library only (Python 3.9+).
"""

import argparse
import glob
import hashlib
import json
import os
import random
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import crash_trials as ct  # noqa: E402  (the proxy, the server and the client runs are shared)

CONFIGS = {
    "client-sqlite": "client-sqlite/server-sqlite",
    "client-lmdb": "client-lmdb/server-sqlite",
    "client-encrypted": "client-encrypted/server-sqlite",
}
PHASES = ["mid-file-write", "mid-upload", "after-upload", "mid-download", "mid-server-chunk"]
PROXY_PHASES = {
    "mid-upload": ("/v1/attachments/", ("POST", "PATCH")),
    "after-upload": ("/v2/push", ("POST",)),
    "mid-download": ("/v1/attachments/", ("GET",)),
    "mid-server-chunk": ("/v1/attachments/", ("POST", "PATCH")),
}
STEPS_PER_TRIAL = 30
FILE_WAIT = 10.0          # seconds to watch for a .part file before a random kill


def trial_bytes(prefix, step):
    """The file of step `step` under `prefix` (TrialAttachments.bytes in the harness)."""
    size = 2_100_000 + (step * 7919) % 900_000 if step % 10 == 9 else 1_000 + (step * 131) % 19_000
    out = bytearray()
    block = 0
    while len(out) < size:
        out += hashlib.sha256(f"{prefix}-{step}-{block}".encode()).digest()
        block += 1
    return bytes(out[:size])


class AttachmentRun(ct.ConfigRun):
    """One client store's attachment trials (the helpers of crash_trials.ConfigRun: client runs,
    kills, server restarts, the full pull)."""

    def __init__(self, name, args, seed):
        super().__init__(CONFIGS[name], args, seed, None)
        self.label = name
        self.steps = STEPS_PER_TRIAL * self.trials
        self.figures.update({"files_checked": 0, "bytes_checked": 0, "phase_reached": {}})

    def attachment_dirs(self):
        return glob.glob(os.path.join(self.tmp, "client*attachments*")) + \
            glob.glob(os.path.join(self.tmp, "client-lmdb", "attachments"))

    def parts(self):
        found = set()
        for directory in self.attachment_dirs():
            found.update(glob.glob(os.path.join(directory, "**", "*.part"), recursive=True))
        return found

    def _run(self):
        tmp = self.tmp
        rng = self.rng
        data = os.path.join(tmp, "server")
        os.makedirs(data)
        if self.client_kind == "sqlite":
            store = "sqlite://" + os.path.join(tmp, "client.sqlite")
        elif self.client_kind == "lmdb":
            os.makedirs(os.path.join(tmp, "client-lmdb"))
            store = "lmdb://" + os.path.join(tmp, "client-lmdb")
        else:
            store = ("encrypted-file://" + os.path.join(tmp, "client.osync")
                     + f"?key-env=OFFLINE_SYNC_CRASH_TRIAL_KEY&compact-after={ct.COMPACT_AFTER}")
        writer_store = "sqlite://" + os.path.join(tmp, "writer.sqlite")
        acks = os.path.join(tmp, "acks.log")
        writer_acks = os.path.join(tmp, "writer-acks.log")
        files = ["--attachments"]

        self.server = ct.Server(self.binary, data, None, tmp)
        self.proxy = ct.FaultProxy(self.kill_server_for_phase)
        self.proxy.set_upstream(self.server.start())
        proc = ct.spawn([self.binary, "token", "--identity", "trial", "--data", data], env=self.server.env(),
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = proc.communicate(timeout=60)
        ct.forget(proc)
        if proc.returncode != 0 or not out.strip():
            raise ct.HarnessFailure("offline-sync token failed: " + err.decode("utf-8", "replace"))
        self.token = out.decode().strip().split()[-1]

        phases = [p for p in PHASES if not self.args.phases or p in self.args.phases]
        schedule = ct.phase_schedule(phases, self.trials, rng)
        last_of_phase = {phase: trial for trial, phase in enumerate(schedule)}
        writer_total = 0
        for trial in range(self.trials):
            self.trial = trial
            phase = schedule[trial]
            writer_more = rng.randint(2, 6) if phase == "mid-download" else rng.randint(0, 2)
            offset = rng.randint(5, 25)
            cut = rng.uniform(0.1, 0.9)
            delay_ms = rng.uniform(0, 3)
            skip = rng.randint(0, 1)
            if writer_more:
                writer_total += writer_more
                proc = self.start_client(writer_store, self.server.url, "w", writer_acks, writer_total, push_every=1,
                                         label="writer", extra=files)
                self.finish(proc, f"the writer (before trial {trial})")
            self.server.check_alive(f"before trial {trial}")
            before = ct.count_acks(acks)
            target = min(self.steps - 1, before + offset)
            # Downloads happen in a syncing client; every tenth step's file is a multi-piece one.
            sync = phase == "mid-download" or rng.random() < 0.5
            # Half the upload phases wait for a file of several server pieces (every tenth step's),
            # but not the last trial of a phase not reached yet: any upload then will do.
            big = rng.random() < 0.5
            if trial == last_of_phase[phase] and self.figures["phase_reached"].get(phase, 0) == 0:
                big = False
                skip = 0
            if phase in ("mid-upload", "mid-server-chunk"):
                skip = 0
                if big:
                    offset = max(offset, 12)
            self.bump("phase_trials", phase)
            action = None
            if phase in PROXY_PHASES:
                path, methods = PROXY_PHASES[phase]
                big_only = 1_000_000 if big and phase in ("mid-upload", "mid-server-chunk") else 0
                action = self.proxy.arm(ct.Action(phase, path, skip=skip, cut=cut, delay_ms=delay_ms,
                                                  methods=methods, prefix=path.endswith("/"), min_request=big_only))
            stale = self.parts()
            proc = self.start_client(store, self.proxy.url, "t", acks, self.steps, until=target, sync=sync, extra=files)
            outcome = ""
            try:
                if action is not None:
                    reached = self.wait_action(action, proc)
                    if not reached and not self.proxy.disarm():
                        reached = action.reached.wait(timeout=5)
                    self.kill_client(proc)
                    if phase == "mid-server-chunk" and reached and "server_kill" in action.info:
                        self.restart_server()
                    reached = reached and "note" not in action.info
                    if action.min_request:
                        action.info["file"] = "several pieces"
                    outcome = (("reached " if reached else "NOT reached ") + " ".join(
                        f"{k}={v}" for k, v in action.info.items())).strip()
                else:
                    deadline = time.monotonic() + FILE_WAIT
                    reached = False
                    while time.monotonic() < deadline and proc.poll() is None:
                        if self.parts() - stale:
                            reached = True
                            break
                    self.kill_client(proc)
                    outcome = "killed while a .part file existed" if reached else "no .part file seen: random kill"
                self.bump("phase_reached" if reached else "phases_not_reached", phase)
            finally:
                if action is not None:
                    action.release.set()
                self.proxy.disarm()
            self.server.check_alive(f"during trial {trial}")
            if not self.server.running():
                self.restart_server()
            self.figures["trial_log"].append({"trial": trial, "phase": phase, "sync": sync, "acks_before": before,
                                              "acks_after": ct.count_acks(acks), "outcome": outcome})
            if self.verbose:
                print(f"    trial {trial:3d} {phase:16s} sync={int(sync)} acks {before}->{ct.count_acks(acks)}: {outcome}",
                      flush=True)

        self.figures["writer_steps"] = writer_total
        self.trial = "final"
        proc = self.start_client(store, self.proxy.url, "t", acks, self.steps, label="final", extra=files)
        self.finish(proc, "the final client run (to the end)")
        dump = os.path.join(tmp, "client-dump.txt")
        proc = self.start_client(store, self.proxy.url, "t", acks, self.steps, sync=True, drain=True, dump=dump,
                                 label="drain", extra=files)
        drained = self.finish(proc, "the client's drain")
        self.verify_files(acks, writer_acks, drained)
        status = self.server.stop()
        if status != 0:
            self.failures.append(f"5. the server exited with status {status} on SIGTERM")

    def download(self, sha256):
        request = urllib.request.Request(self.server.url + "/v1/attachments/" + sha256,
                                         headers={"Authorization": "Bearer " + self.token})
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                return answer.read()
        except urllib.error.HTTPError as error:
            return error.code

    def verify_files(self, acks_path, writer_acks_path, drained):
        failures = self.failures
        acks = set(ct.read_acks(acks_path))
        writer = set(ct.read_acks(writer_acks_path))
        self.figures["operations_acknowledged"] = len(acks)
        rows = self.pull_all()
        seen = {}
        for row in rows:
            seen[row["id"]] = seen.get(row["id"], 0) + 1
        duplicated = [i for i, n in seen.items() if n > 1]
        if duplicated:
            failures.append(f"1. rows on the server more than once: {sorted(duplicated)[:10]}")
        expected = {f"t-{i}" for i in acks} | {f"w-{i}" for i in writer}
        missing = sorted(expected - set(seen))
        if missing:
            failures.append(f"1. acknowledged rows missing on the server: {missing[:10]} ({len(missing)})")
        unexpected = sorted(i for i in seen if i not in expected and not i.endswith("-counter"))
        if unexpected:
            failures.append(f"1. rows on the server that no client acknowledged: {unexpected[:10]}")
        checked = 0
        for row in rows:
            prefix, _, step = row["id"].rpartition("-")
            if step == "counter":
                continue
            if row.get("deleted"):
                failures.append(f"1. {row['id']} is deleted on the server")
                continue
            reference = row.get("fields", {}).get("file")
            if isinstance(reference, dict):
                # The native protocol's JSON doubles the "$" of a key that starts with one.
                reference = {(k[1:] if k.startswith("$$") else k): v for k, v in reference.items()}
            want = trial_bytes(prefix, int(step))
            want_hash = hashlib.sha256(want).hexdigest()
            if not isinstance(reference, dict) or reference.get("$attachment") != want_hash or reference.get("size") != len(want):
                failures.append(f"1. {row['id']} does not reference its file: {json.dumps(reference)[:200]}")
                continue
            body = self.download(want_hash)
            if not isinstance(body, bytes) or hashlib.sha256(body).hexdigest() != want_hash:
                failures.append(f"2. the server does not serve {row['id']}'s file whole: "
                                f"{body if isinstance(body, int) else len(body)}")
                continue
            checked += 1
            self.figures["bytes_checked"] += len(body)
        self.figures["files_checked"] = checked
        # Downloads that went on from bytes a killed client kept (a figure, not a check: a kill
        # before a MiB of a file arrived leaves nothing to go on from).
        self.figures["downloads_resumed"] = self.proxy.ranged_downloads
        line = next((l for l in drained.splitlines() if l.startswith("drained ")), "")
        self.figures["drain"] = line
        fields = dict(part.split("=", 1) for part in line.split()[1:] if "=" in part)
        if fields.get("pending") != "0" or fields.get("errors") != "0" or fields.get("unavailable") != "0":
            failures.append("3. the drain left work or could not read every file: " + line)
        not_reached = [p for p in set(p for p in PHASES if not self.args.phases or p in self.args.phases)
                       if self.figures["phase_reached"].get(p, 0) == 0]
        if not_reached and self.trials >= len(PHASES):
            failures.append(f"4. phases never reached: {sorted(not_reached)}")


def main():
    parser = argparse.ArgumentParser(description="Attachment crash trials of OfflineSync.")
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--phases", default="")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--json", default=None)
    parser.add_argument("--bin", default=os.environ.get("OFFLINE_SYNC_BIN") or ".build/debug/offline-sync")
    parser.add_argument("--harness", default=None)
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    args.bin = os.path.abspath(args.bin)
    args.harness = os.path.abspath(args.harness or os.path.join(os.path.dirname(args.bin), "offline-sync-harness"))
    args.phases = [p for p in args.phases.split(",") if p]
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
    print(f"attachment crash trials: seed {seed}, {args.trials} trials per configuration", flush=True)
    results = {}
    failed = False
    for name in [c for c in args.configs.split(",") if c]:
        if name not in CONFIGS:
            parser.error(f"unknown configuration {name}; known: {', '.join(CONFIGS)}")
        run = AttachmentRun(name, args, seed)
        figures = run.run()
        figures["failures"] = run.failures
        results[name] = figures
        verdict = "FAILED" if run.failures else "passed"
        print(f"  {name}: {verdict} in {figures['seconds']} s: {figures['operations_acknowledged']} acknowledged, "
              f"{figures['files_checked']} files checked ({figures['bytes_checked']} bytes), "
              f"{figures.get('downloads_resumed', 0)} downloads resumed, "
              f"phases reached {figures['phase_reached']}, not reached {figures['phases_not_reached']}", flush=True)
        for failure in run.failures:
            print("    " + failure.replace("\n", "\n    "), flush=True)
        if run.failures:
            failed = True
            print(f"    replay: python3 Tests/Reliability/attachment_crash.py --trials {args.trials} --configs {name} "
                  f"--seed {seed}", flush=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"seed": seed, "configurations": results}, out, indent=2, sort_keys=True, default=str)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

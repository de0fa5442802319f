#!/usr/bin/env python3
"""The long forms of the reliability tests, and the figures they produce.

    make soak        (builds, starts a throwaway PostgreSQL, runs this, writes Docs/Reliability.md)

or by hand, from the repository root, after `swift build --build-tests`:

    Scripts/with-postgres.sh python3 Scripts/soak.py [--trials 200] [--clients 20] [--rounds 20]
                                                    [--seeds 5] [--out Docs/Reliability.md]

It runs, in turn:

1. the crash trials (Tests/Reliability/crash_trials.py) with --trials per configuration, then the
   membership crash trials (Tests/Reliability/membership_crash.py) on SQLite and PostgreSQL;
2. the convergence test (ConvergenceTests) with --clients clients and --rounds rounds, once per
   seed, under each conflict policy;
3. the shared-data differential tests (SharedDataTests in process, SharedDifferentialTests through a
   SQLite server and two PostgreSQL server instances, SQLite and LMDB clients, partitions, every
   conflict policy, fan-out limits that make groups cross K both ways, GroupScaleTests with pulls
   of one to three rows interleaved with shares and revocations) with --shared-seeds seeds each;
4. the corrupt-store sweep of every file adapter with large case counts, and PostgreSQL's
   damaged-catalog sweep (CorruptSchemaTests) with 200 random cases;
5. the hostile-request and authentication-attack tests, schemathesis with more examples;
6. the core, StoreKit, service and adapter suites under the thread and the address sanitizer
   (Scripts/sanitizers.py; --skip-sanitizers leaves them out);

then writes the Markdown report with one table per configuration, the date, the machine and the
commit. It exits with status 1 when any part failed (the report is written either way, and says
which part failed).
"""

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
POLICIES = ["serverWins", "clientWins", "lastWriterWins", "fieldLevelMerge"]


def run(command, env=None, timeout=None):
    """Runs a command from the repository root; returns (status, output, seconds)."""
    started = time.time()
    merged = dict(os.environ, **(env or {}))
    print("soak: $ %s" % " ".join(command), flush=True)
    process = subprocess.run(command, cwd=ROOT, env=merged, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, errors="replace", timeout=timeout)
    return process.returncode, process.stdout, time.time() - started


def tool_path():
    status, output, _ = run(["swift", "build", "--show-bin-path"])
    if status != 0:
        sys.exit("soak: swift build --show-bin-path failed:\n" + output)
    return os.path.join(output.strip().splitlines()[-1], "offline-sync")


def crash_trials(tool, trials, seed, scratch):
    out = os.path.join(scratch, "crash.json")
    status, output, seconds = run([sys.executable, "Tests/Reliability/crash_trials.py", "--trials", str(trials),
                                   "--seed", str(seed), "--json", out, "--bin", tool])
    sys.stdout.write(output[-4000:])
    figures = {}
    if os.path.exists(out):
        with open(out) as f:
            figures = json.load(f)
    return {"status": status, "seconds": seconds, "figures": figures, "seed": seed, "tail": output[-2000:]}


def membership_crash(tool, trials, seed):
    """The membership crash trials on SQLite and PostgreSQL: their summary lines."""
    parts = []
    for store in ("sqlite", "postgres"):
        status, output, seconds = run([sys.executable, "Tests/Reliability/membership_crash.py", "--trials", str(trials),
                                       "--seed", str(seed), "--store", store, "--bin", tool])
        sys.stdout.write(output[-2000:])
        lines = [l for l in output.splitlines() if l.startswith("fan-out limit") or l.startswith("  - ") or "skipped" in l]
        parts.append({"store": store, "status": status, "seconds": seconds, "lines": lines})
    return {"status": max(p["status"] for p in parts), "parts": parts, "trials": trials, "seed": seed}


def convergence(clients, rounds, seeds, first_seed):
    results = {policy: {"seeds": 0, "converged": 0, "conflicts": 0, "dataset_conflicts": 0} for policy in POLICIES}
    failures = []
    started = time.time()
    for seed in range(first_seed, first_seed + seeds):
        status, output, _ = run(["swift", "test", "--skip-build", "--filter", "ConvergenceTests"], env={
            "OFFLINE_SYNC_CONVERGENCE_CLIENTS": str(clients), "OFFLINE_SYNC_CONVERGENCE_ROUNDS": str(rounds),
            "OFFLINE_SYNC_CONVERGENCE_SEED": str(seed)})
        # Failure lines name their policy: the replay hint ends with "(policy <name>)", and Swift
        # Testing's failed test case shows its argument as ".<name>".
        failing = "\n".join(l for l in output.splitlines() if "✘" in l or "replay with" in l)
        for policy in POLICIES:
            match = re.search(r"convergence \(%s\): .*?, (\d+) conflicts checked .*?, (\d+) dataset conflicts" % policy, output)
            results[policy]["seeds"] += 1
            if match:
                results[policy]["conflicts"] += int(match.group(1))
                results[policy]["dataset_conflicts"] += int(match.group(2))
            named = ("(policy %s)" % policy) in failing or ("." + policy) in failing
            if match and (status == 0 or not named):
                results[policy]["converged"] += 1
        if status != 0:
            failures.append("seed %d:\n%s" % (seed, "\n".join(l for l in output.splitlines() if "✘" in l or "replay" in l)[-3000:]))
    return {"results": results, "failures": failures, "seconds": time.time() - started, "clients": clients, "rounds": rounds,
            "seeds": seeds, "first_seed": first_seed}


def shared_data(seeds):
    """The shared-lists differential tests with `seeds` seeds: every client's tables equal
    what the rules let its identity read after every sync (see the tests' doc comments)."""
    status, output, seconds = run(["swift", "test", "--skip-build", "--filter",
                                   "SharedDataTests|SharedDifferentialTests|GroupScaleTests"],
                                  env={"OFFLINE_SYNC_SHARED_SEEDS": str(seeds)})
    failing = [l for l in output.splitlines() if "✘" in l]
    failed_seeds = sorted(set(int(m) for l in failing for m in re.findall(r"seed → (\d+)", l)))
    return {"status": status, "seeds": seeds, "seconds": seconds, "failed_seeds": failed_seeds,
            "tail": "\n".join(failing)[-3000:]}


def sweeps(tool, scratch, seed):
    key = "5a" * 32
    stores = [("sqlite", "sqlite://%s/app.sqlite" % scratch, []),
              ("lmdb", "lmdb://%s/app-lmdb" % scratch, []),
              ("encrypted-file", "encrypted-file://%s/app.osync?key-env=OFFLINE_SYNC_SWEEP_KEY" % scratch, ["--require-detection"])]
    results = {}
    for name, url, extra in stores:
        out = os.path.join(scratch, "sweep-%s.json" % name)
        harness = os.path.join(os.path.dirname(tool), "offline-sync-harness")
        status, output, seconds = run([harness, "corrupt-sweep", "--store", url, "--seed", str(seed), "--truncations", "200",
                                       "--bit-flips", "1000", "--zeroed-pages", "200", "--json", out] + extra,
                                      env={"OFFLINE_SYNC_SWEEP_KEY": key})
        print(output[-1500:])
        figures = {}
        if os.path.exists(out):
            with open(out) as f:
                figures = json.load(f)
        results[name] = {"status": status, "seconds": seconds, "figures": figures}
    # PostgreSQL has no file: CorruptSchemaTests damages its catalog and rows instead.
    status, output, seconds = run(["swift", "test", "--skip-build", "--filter", "CorruptSchemaTests"],
                                  env={"OFFLINE_SYNC_PG_SWEEP_CASES": "200"})
    line = re.search(r"postgres corrupt sweep: (\d+) cases: (.*)", output)
    outcomes = {}
    if line:
        for part in line.group(2).split(", "):
            words = part.rsplit(" ", 1)
            kind = words[0].split(" ")[0]
            outcomes[kind] = outcomes.get(kind, 0) + int(words[1])
    impossible = outcomes.pop("impossible", 0)
    results["postgres"] = {"status": status if line else 1, "seconds": seconds, "figures": {
        "cases": int(line.group(1)) - impossible if line else "?", "failures": 0 if status == 0 and line else "see the test output",
        "impossible": impossible, "outcomes": {"damaged catalog or rows": outcomes}}}
    if status != 0:
        print("\n".join(l for l in output.splitlines() if "✘" in l)[-3000:])
    return results


def hostile(tool, examples):
    status, output, seconds = run([sys.executable, "-m", "unittest", "-v", "Tests/Hostile/test_hostile.py", "Tests/Hostile/test_auth.py",
                                   "Tests/Hostile/test_leaks.py"],
                                  env={"OFFLINE_SYNC_BIN": tool, "HOSTILE_MAX_EXAMPLES": str(examples)})
    generated = re.search(r"schemathesis: (\d+) test cases generated, exit code (\d+)", output)
    ran = re.search(r"Ran (\d+) tests", output)
    failed = re.search(r"FAILED \((?:failures=(\d+))?(?:, )?(?:errors=(\d+))?", output)
    answers = re.findall(r"(hostile|auth): the server answered (\d+) requests, (\d+) with a 5xx", output)
    secrets = re.findall(r"(hostile|auth): the log was searched for (\d+) secrets, (\d+) found", output)
    return {"status": status, "seconds": seconds, "schemathesis_cases": int(generated.group(1)) if generated else None,
            "schemathesis_exit": int(generated.group(2)) if generated else None, "tests": int(ran.group(1)) if ran else None,
            "failed": (sum(int(g) for g in failed.groups() if g) if failed else 0) if ran else None,
            # Both servers must report, or the figure is unknown.
            "requests": sum(int(a[1]) for a in answers) if len(answers) == 2 else None,
            "fives": sum(int(a[2]) for a in answers) if len(answers) == 2 else None,
            "secrets_checked": sum(int(a[1]) for a in secrets) if len(secrets) == 2 else None,
            "secrets_found": sum(int(a[2]) for a in secrets) if len(secrets) == 2 else None,
            "tail": output[-3000:]}


def machine():
    memory = ""
    try:
        with open("/proc/meminfo") as f:
            kilobytes = int(f.readline().split()[1])
            memory = "%.0f GiB" % (kilobytes / 1024 / 1024)
    except OSError:
        pass
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            names = [l.split(":", 1)[1].strip() for l in f if l.startswith("model name")]
            if names:
                cpu = names[0]
    except OSError:
        pass
    return "%s, %d cores, %s, %s %s" % (cpu, os.cpu_count() or 0, memory, platform.system(), platform.release())


def commit():
    status, output, _ = run(["git", "rev-parse", "--short", "HEAD"])
    return output.strip() if status == 0 else "?"


def unknown(value):
    """A figure, or a dash when the run did not produce it."""
    return "—" if value is None else value


def sanitizers(skip):
    """Scripts/sanitizers.py: the core, StoreKit, service and adapter suites under TSan and ASan.
    It writes sanitizer-results.json; the report takes its section from there."""
    if skip:
        return {"status": 0, "skipped": True}
    status = subprocess.run([sys.executable, os.path.join(ROOT, "Scripts", "sanitizers.py"), "--no-doc"], cwd=ROOT).returncode
    return {"status": status}


def report(args, crash, members, converge, shared, sweep, attacks, sanitized):
    lines = ["# Reliability figures", "",
             "Written by `make soak` on %s, commit %s, on %s (debug build)." % (
                 datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), commit(), machine()),
             "What each part proves and how to replay it: [How the figures are made](#how-the-figures-are-made).", ""]

    lines += ["## Crash trials", "",
              "Client and server processes killed with SIGKILL at chosen phases (`Tests/Reliability/crash_trials.py`,",
              "%d trials per configuration, seed %s). After the kills the client runs to the end and drains its queue;" % (args.trials, crash["seed"]),
              "then every acknowledged change must be on the server exactly once, the client's copy must equal the server's,",
              "and nothing may be left queued or failed.", ""]
    configurations = crash["figures"].get("configs", {}) if isinstance(crash["figures"], dict) else {}
    if not configurations:
        lines += ["No figures: the crash trials wrote none.", ""]
    for name, f in sorted(configurations.items()):
        lines += ["### %s" % name, ""]
        if f.get("status") == "skipped":
            lines += ["Skipped: %s" % f.get("reason", "no PostgreSQL server"), ""]
            continue
        phases = f.get("kills_by_phase", {})
        moments = f.get("server_kills_by_moment", {})
        rows = [("trials run", f.get("trials")), ("client kills", f.get("client_kills")), ("server kills", f.get("server_kills"))]
        rows += [("client kills %s" % phase, count) for phase, count in sorted(phases.items())]
        rows += [("server kills %s" % moment, count) for moment, count in sorted(moments.items())]
        rows += [("phases armed but never reached", sum(f.get("phases_not_reached", {}).values()) if isinstance(f.get("phases_not_reached"), dict) else f.get("phases_not_reached")),
                 ("operations acknowledged", f.get("operations_acknowledged")),
                 ("of them acknowledged before the final run", f.get("acknowledged_before_final")),
                 ("writer operations (pulled by the client)", f.get("writer_steps")), ("lost", f.get("lost")),
                 ("duplicated", f.get("duplicated")), ("wrong values", f.get("wrong_values")), ("unexpected rows", f.get("unexpected_rows")),
                 ("false conflicts", f.get("false_conflicts")), ("left queued after the drain", f.get("pending_after_drain")),
                 ("client/server differences", f.get("pull_mismatches"))]
        if f.get("marker_kills"):
            rows += [("kills that left the push's in-flight marker", f.get("marker_kills")),
                     ("marked operations checked written after the restart", f.get("marker_operations_checked"))]
        rows += [("seconds", "%.0f" % f["seconds"] if "seconds" in f else None)]
        lines += ["| figure | value |", "|---|---:|"] + ["| %s | %s |" % (k, "—" if v is None else v) for k, v in rows] + [""]
    if crash["status"] != 0:
        lines += ["**The crash trials failed** (exit %d):" % crash["status"], "", "```", crash["tail"].strip(), "```", ""]

    lines += ["## Membership crash trials", "",
              "The server killed with SIGKILL right after a membership change, during it, or mid-way through the member's pull of",
              "its move-in or move-out (`Tests/Reliability/membership_crash.py`, %d trials per fan-out limit, seed %s); some" % (
                  members["trials"], members["seed"]),
              "changes add or remove 1,100 members at once, so the list converts between small and large in several steps.",
              "After each restart the member's pull continues from its cursor and must end with exactly the rows it may read;",
              "no page may carry a row of the private list, and no removal may name a row it was never sent.", ""]
    for part in members["parts"]:
        lines += ["- %s (exit %d, %.0f s):" % (part["store"], part["status"], part["seconds"])]
        lines += ["  - " + l.strip().lstrip("- ") for l in part["lines"]]
    lines += [""]

    lines += ["## Convergence under partitions", "",
              "`ConvergenceTests` with %d clients and %d rounds, seeds %d…%d: random inserts, updates, deletes and dataset writes" % (
                  converge["clients"], converge["rounds"], converge["first_seed"], converge["first_seed"] + converge["seeds"] - 1),
              "through the HTTP server, each client cut off and reconnected at random. A seed converges when every client and the",
              "server end identical with nothing queued or failed, every row conflict left the item as the policy says, and",
              "every dataset conflict left the key with the newer change (the datasets' documented rule).", "",
              "| policy | seeds run | seeds converged | divergent seeds | row conflicts checked against the policy | dataset conflicts checked |",
              "|---|---:|---:|---:|---:|---:|"]
    for policy in POLICIES:
        r = converge["results"][policy]
        lines.append("| %s | %d | %d | %d | %d | %d |" % (policy, r["seeds"], r["converged"], r["seeds"] - r["converged"], r["conflicts"],
                                                    r["dataset_conflicts"]))
    lines.append("")
    for failure in converge["failures"]:
        lines += ["```", failure.strip(), "```", ""]

    lines += ["## Shared data under sync rules", "",
              "The shared-lists differential tests with %d seeds each: four identities create lists, add and remove members" % shared["seeds"],
              "(only a list's owner may), write todos into lists (refused unless a member) and edit them, at random; after every",
              "sync a client's tables must equal what the rules let its identity read, computed from the server's stored rows by",
              "an independent oracle. `SharedDataTests` runs in process (odd seeds on SQLite files); `SharedDifferentialTests`",
              "runs through live servers — even seeds one server on SQLite, odd seeds two `offline-sync serve` processes sharing",
              "PostgreSQL — with SQLite and LMDB clients behind partitions that cut and heal, and the seed choosing the conflict",
              "policy (all four in turn); the seed also picks the fan-out limit *K* (1, 2 or the default), so lists cross it",
              "both ways. `GroupScaleTests` runs in process with *K* of 1-3 and pulls of one to three rows interleaved with",
              "shares, revocations and moves, so memberships change while a pull is mid-page.", "",
              "| figure | value |", "|---|---:|",
              "| seeds per test | %d |" % shared["seeds"],
              "| failed seeds | %s |" % (", ".join(str(s) for s in shared["failed_seeds"]) or "none"),
              "| exit status | %d |" % shared["status"],
              "| seconds | %.0f |" % shared["seconds"], ""]
    if shared["status"] != 0:
        lines += ["```", shared["tail"].strip(), "```", ""]

    lines += ["## Corrupt and foreign stores", "",
              "`offline-sync-harness corrupt-sweep` per adapter: damaged copies of a 300-record store file, each opened in a child process.",
              "*refused*: a typed error at open; *detected*: a typed error while reading; *intact*: the damage hit unused space;",
              "*undetected*: the store opened and a record differs, or looking a record up by its id or an indexed value misses it.",
              "SQLite rows and LMDB records carry a CRC-32C checked on every read; SQLite's schema definitions and catalog are",
              "checked at open; LMDB checks the order of every key at open and each index entry a query uses against its record.",
              "What remains undetected is index damage no read can see: on SQLite, an index entry damaged so that a lookup",
              "misses its row (`quick_check`, which runs at every open, does not compare indexes with tables; the full",
              "`integrity_check` does, at about ten times the cost); on LMDB, an index key damaged into a value that still",
              "sorts between its neighbours (the encrypted file authenticates every byte, and there it must be zero).",
              "PostgreSQL has no store file:",
              "its sweep (`CorruptSchemaTests`) rewrites, through SQL, the catalog's encoded schemas and names, rows' encoded",
              "ids, versions, values and undeclared fields, and drops or retypes tables and columns; a row value rewritten",
              "through SQL is a write as far as PostgreSQL knows, so those show as undetected (damage on disk is caught by",
              "PostgreSQL's page checksums, see Docs/PostgreSQLAdapter.md).",
              "*crashed*, *untyped*, *reinitialised* and *changed files* must all be zero.", ""]
    for name, s in sweep.items():
        f = s["figures"]
        lines += ["### %s" % name, "", "| damage | cases | refused | detected | intact | undetected | crashed | untyped | reinitialised |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for kind, counts in sorted(f.get("outcomes", {}).items()):
            lines.append("| %s | %d | %s |" % (kind, sum(counts.values()), " | ".join(str(counts.get(o, 0)) for o in
                                                                                   ["refused", "detected", "intact", "undetected", "crashed", "untyped", "reinitialised"])))
        if name == "postgres":
            lines += ["", "Damaged schemas tried: %s; failed cases (untyped error, changed schema): %s. %s damaged ids could not be"
                      " written: they equalled another row's id, and the primary key refused them." % (
                          f.get("cases", "?"), f.get("failures", "?"), f.get("impossible", 0)), ""]
            continue
        lines += ["", "Corrupt files tried: %s; failed cases (crash, untyped error, reinitialised, changed file%s): %s." % (
            f.get("cases", "?"), ", undetected" if name == "encrypted-file" else "", f.get("failures", "?")), ""]

    lines += ["## Hostile requests and authentication attacks", "",
              "`Tests/Hostile/test_hostile.py`, `Tests/Hostile/test_auth.py` and `Tests/Hostile/test_leaks.py` (sync rules:",
              "nothing unreadable in any answer, count or notification) against a live `offline-sync serve`,",
              "schemathesis at %d examples per operation." % args.examples, "",
              "| figure | value |", "|---|---:|",
              "| tests run | %s |" % unknown(attacks["tests"]),
              "| tests failed | %s |" % unknown(attacks["failed"]),
              "| requests fuzzed by schemathesis | %s |" % unknown(attacks["schemathesis_cases"]),
              "| requests the servers answered (their logs) | %s |" % unknown(attacks["requests"]),
              "| 5xx seen (the servers' logs) | %s |" % unknown(attacks["fives"]),
              "| secrets searched for in the logs | %s |" % unknown(attacks["secrets_checked"]),
              "| secrets found in the logs | %s |" % unknown(attacks["secrets_found"]), ""]
    if attacks["status"] != 0:
        lines += ["```", attacks["tail"].strip(), "```", ""]

    # The sanitizer section is Scripts/sanitizers.py's: this run's, or with --skip-sanitizers the
    # last `make sanitize`; the fuzzing section is `make fuzz`'s (Scripts/fuzz.py), its last figures.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import fuzz
    import sanitizers as sanitizer_runs
    for module, results in [(sanitizer_runs, os.path.join(ROOT, "sanitizer-results.json")), (fuzz, os.path.join(ROOT, "fuzz-results.json"))]:
        if os.path.exists(results):
            with open(results) as f:
                lines += [module.section(json.load(f)), ""]

    lines += ["## How the figures are made", "",
              "- Crash trials: `Tests/Reliability/crash_trials.py` (its docstring lists each phase and check); the short form",
              "  runs in `make test`.",
              "- Convergence: `Tests/OfflineSyncServerTests/ConvergenceTests.swift`; replay a seed with",
              "  `OFFLINE_SYNC_CONVERGENCE_SEED=N OFFLINE_SYNC_CONVERGENCE_CLIENTS=20 OFFLINE_SYNC_CONVERGENCE_ROUNDS=20 swift test --filter ConvergenceTests`.",
              "- Shared data: `Tests/OfflineSyncServiceTests/SharedDataTests.swift` and",
              "  `Tests/OfflineSyncServerTests/SharedDifferentialTests.swift`; replay a seed's steps with `SHARED_TRACE=N`.",
              "- Corrupt stores: `offline-sync-harness corrupt-sweep --help`; `make corrupt-sweep` is the short form.",
              "- Hostile requests: `make hostile-test` is the short form.",
              "- Sanitizers: `make sanitize`, or `python3 Scripts/sanitizers.py --sanitizer thread` (or `address`) for one;",
              "  the reports stay in `.build/sanitize-logs`.",
              "- Fuzzing: `make fuzz FUZZ_SECONDS=N` (Scripts/fuzz.py); `offline-sync-fuzz replay TARGET FILE` replays one input on",
              "  a normal build, and `make test` replays every committed seed and regression input.", ""]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--examples", type=int, default=200)
    parser.add_argument("--shared-seeds", type=int, default=200)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--out", default=os.path.join(ROOT, "Docs", "Reliability.md"))
    parser.add_argument("--skip-sanitizers", action="store_true", help="leave out the TSan and ASan runs (about 30 minutes)")
    args = parser.parse_args()
    tool = tool_path()
    with tempfile.TemporaryDirectory(prefix="offline-sync-soak-") as scratch:
        crash = crash_trials(tool, args.trials, args.seed, scratch)
        members = membership_crash(tool, max(12, args.trials // 4), args.seed)
        converge = convergence(args.clients, args.rounds, args.seeds, args.seed)
        shared = shared_data(args.shared_seeds)
        sweep = sweeps(tool, scratch, args.seed)
        attacks = hostile(tool, args.examples)
    sanitized = sanitizers(args.skip_sanitizers)
    text = report(args, crash, members, converge, shared, sweep, attacks, sanitized)
    with open(args.out, "w") as f:
        f.write(text)
    print("soak: wrote %s" % args.out)
    failed = [name for name, status in [("crash trials", crash["status"]), ("membership crash trials", members["status"]),
                                        ("convergence", 1 if converge["failures"] else 0),
                                        ("shared data", shared["status"]),
                                        ("hostile requests", attacks["status"]),
                                        ("sanitizers", sanitized["status"]),
                                        ("5xx or leaked secrets", 0 if attacks["fives"] == 0 and attacks["secrets_found"] == 0 else 1)] + [("sweep " + n, s["status"]) for n, s in sweep.items()]
              if status != 0]
    if failed:
        print("soak: FAILED: " + ", ".join(failed))
        sys.exit(1)
    print("soak: every part passed")


if __name__ == "__main__":
    main()

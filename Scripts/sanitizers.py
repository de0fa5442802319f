#!/usr/bin/env python3
"""Runs the core, StoreKit, service and adapter test suites under the thread sanitizer and
the address sanitizer (with its leak checker), and says what each reported.

    make sanitize        (inside a throwaway PostgreSQL, so the PostgreSQL adapter's suite runs too)
    python3 Scripts/sanitizers.py [--sanitizer thread|address ...] [--no-doc]

`make soak` runs it too. Each sanitizer builds into its own directory (.build/sanitize-thread,
.build/sanitize-address). What a sanitizer reports is a failure, except what
Tests/Sanitizers/tsan.supp and lsan.supp suppress, each entry with its reason beside it.

The thread sanitizer cannot see a contended Synchronization.Mutex on Linux (the kernel hands it
over; Tests/Sanitizers/mutex-blind-spot.swift shows it on every run), so its build passes
-DOFFLINE_SYNC_TSAN_LOCKS, and every Mutex of ours is then a pthread mutex it sees
(ThreadSanitizerMutex): state held in a Mutex is checked for real, and nothing is suppressed
for the blind spot. Every sanitizer report is kept under .build/sanitize-logs.

A run of both sanitizers writes sanitizer-results.json and the "Sanitizers" section of
Docs/Reliability.md (unless --no-doc); `make soak` keeps that section when it is told to skip them.
"""
import argparse, datetime, glob, json, os, re, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fuzz  # noqa: E402  (its description of the machine, shared by every figure this repository writes)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SANITIZERS = os.path.join(ROOT, "Tests", "Sanitizers")
LOGS = os.path.join(ROOT, ".build", "sanitize-logs")
RESULTS = os.path.join(ROOT, "sanitizer-results.json")
DOC = os.path.join(ROOT, "Docs", "Reliability.md")
BEGIN, END = "<!-- sanitizer results: written by Scripts/sanitizers.py -->", "<!-- end of sanitizer results -->"
# Suites whose started contexts run on timers (backoff, polling, the network monitor): under a
# sanitizer on two cores the rest of the run starves them past their deadlines (they failed
# waiting for "ready" in a full TSan run and passed in 0.7 s alone), so they run in a pass of
# their own after the others.
SOLO = ["OfflineSyncTests.LifecycleTests", "OfflineSyncTests.SyncStatusTests"]
SUITES = ["OfflineSyncTests", "OfflineSyncStoreKitTests", "OfflineSyncServiceTests", "OfflineSyncSQLiteTests",
          "OfflineSyncLMDBTests", "OfflineSyncEncryptedFileTests", "OfflineSyncPostgreSQLTests"]


def swift():
    return "swift" if subprocess.run(["which", "swift"], capture_output=True).returncode == 0 else "/opt/swift/usr/bin/swift"


def blind_spot():
    """Whether the thread sanitizer still reports races inside one contended Mutex."""
    binary = os.path.join(ROOT, ".build", "mutex-blind-spot")
    subprocess.run([swift() + "c", "-sanitize=thread", "-g", os.path.join(SANITIZERS, "mutex-blind-spot.swift"), "-o", binary],
                   check=True, capture_output=True)
    run = subprocess.run([binary], capture_output=True, text=True, env=dict(os.environ, TSAN_OPTIONS="halt_on_error=0"))
    return run.stderr.count("WARNING: ThreadSanitizer")


def reports(prefix):
    """The sanitizer reports in the log files starting with `prefix`, and the suppressions matched."""
    found, matched = [], {}
    for path in sorted(glob.glob(prefix + "*")):
        with open(path, errors="replace") as f:
            text = f.read()
        for block in re.split(r"(?m)^=+\n", text):
            head = re.search(r"(WARNING: ThreadSanitizer: [^\n(]+|ERROR: AddressSanitizer: [^\n]+|ERROR: LeakSanitizer: [^\n]+)", block)
            if head:
                frames = re.findall(r"#\d+ (\S+) (\S+)", block)
                ours = [f"{name} {where}" for name, where in frames if "/Sources/" in where or "/Adapters/" in where or "/Tests/" in where]
                found.append({"kind": head.group(1).strip(), "log": os.path.relpath(path, ROOT), "first_frame_of_ours": ours[0] if ours else ""})
        # TSan: "ThreadSanitizer: Matched N suppressions" then "count type:pattern" lines.
        for count, pattern in re.findall(r"(?m)^\s*(\d+) (\S+:\S+)$", text.split("Matched", 1)[1] if "Matched" in text else ""):
            matched[pattern] = matched.get(pattern, 0) + int(count)
        # LSan: "Suppressions used:", a header, then "count bytes template" lines.
        if "Suppressions used:" in text:
            for count, _, pattern in re.findall(r"(?m)^\s*(\d+)\s+(\d+)\s+(\S+)$", text.split("Suppressions used:", 1)[1]):
                matched["leak:" + pattern] = matched.get("leak:" + pattern, 0) + int(count)
    return found, matched


def run(sanitizer, suites):
    scratch = os.path.join(ROOT, ".build", "sanitize-" + sanitizer)
    started = time.time()
    # Under the thread sanitizer every Mutex of ours is a pthread mutex it can see (ThreadSanitizerMutex).
    flags = ["-Xswiftc", "-DOFFLINE_SYNC_TSAN_LOCKS"] if sanitizer == "thread" else []
    build = subprocess.run([swift(), "build", "--build-tests", "--sanitize", sanitizer, "--scratch-path", scratch] + flags,
                           cwd=ROOT, capture_output=True, text=True)
    if build.returncode != 0:
        return {"sanitizer": sanitizer, "status": "build failed", "tail": build.stdout[-3000:] + build.stderr[-3000:]}
    built = time.time() - started
    os.makedirs(LOGS, exist_ok=True)
    prefix = os.path.join(LOGS, sanitizer)
    for old in glob.glob(prefix + "*"):
        os.remove(old)
    env = dict(os.environ, OFFLINE_SYNC_SANITIZER=sanitizer)
    if sanitizer == "thread":
        env["TSAN_OPTIONS"] = "halt_on_error=0:print_suppressions=1:log_path=%s:suppressions=%s" % (
            prefix, os.path.join(SANITIZERS, "tsan.supp"))
    else:
        env["ASAN_OPTIONS"] = "detect_leaks=1:log_path=%s" % prefix
        env["LSAN_OPTIONS"] = "print_suppressions=1:suppressions=%s" % os.path.join(SANITIZERS, "lsan.supp")
    if not env.get("OFFLINE_SYNC_TEST_POSTGRES_URL"):
        suites = [s for s in suites if s != "OfflineSyncPostgreSQLTests"]
    pattern = "^(%s)\\." % "|".join(suites)
    solo = "^(%s)/" % "|".join(re.escape(name) for name in SOLO)
    base = [swift(), "test", "--skip-build", "--sanitize", sanitizer, "--scratch-path", scratch] + flags
    output, returncode = "", 0
    for arguments in (["--filter", pattern, "--skip", solo], ["--filter", solo]):
        test = subprocess.run(base + arguments, cwd=ROOT, capture_output=True, text=True, errors="replace", env=env)
        output += test.stdout + test.stderr
        returncode = returncode or test.returncode
    # The whole run, beside the sanitizer's reports: a failed test's message is in here.
    with open(os.path.join(LOGS, "tests-" + sanitizer + ".log"), "w") as f:
        f.write(output)
    passed = [int(n) for n in re.findall(r"Test run with (\d+) tests? (?:in \d+ suites? )?passed", output)]
    failed = [int(n) for n in re.findall(r"Test run with (\d+) tests? (?:in \d+ suites? )?failed", output)]
    found, matched = reports(prefix)
    return {
        "sanitizer": sanitizer,
        "suites": suites,
        "build_seconds": round(built),
        "test_seconds": round(time.time() - started - built),
        "tests": sum(passed) + sum(failed),
        "tests_failed": bool(failed) or (returncode != 0 and not found),
        "reports": found,
        "suppressed": matched,
        "status": "clean" if not found and not failed and returncode == 0 else "findings",
        "tail": "" if returncode == 0 else "\n".join(line for line in output.splitlines() if line.startswith("\u2718"))[-3000:],
    }


def section(results):
    """The Sanitizers section of Docs/Reliability.md, from sanitizer-results.json's contents."""
    lines = [BEGIN, "## Sanitizers", "",
             "Written by `make sanitize` (or `make soak`) on %s, commit %s, on %s (debug builds)." % (
                 results["date"], results["commit"], results["machine"]),
             "`Scripts/sanitizers.py` builds the core, StoreKit, service and adapter suites (PostgreSQL's too, inside a",
             "throwaway cluster) under each sanitizer and runs them. A report is a failure unless",
             "`Tests/Sanitizers/tsan.supp` or `lsan.supp` suppresses it; each entry there says why. The thread",
             "sanitizer cannot see a contended `Synchronization.Mutex` on Linux (`Tests/Sanitizers/mutex-blind-spot.swift`",
             "shows it on every run: races reported inside one Mutex: %d), so its build makes every Mutex of ours a" % results["blind_spot_races"],
             "pthread mutex it sees (`ThreadSanitizerMutex`, `-DOFFLINE_SYNC_TSAN_LOCKS`): Mutex-held state is checked too.",
             "The suites whose started contexts run on timers (%s) run in a pass of their own after the others: on" % ", ".join(
                 "`%s`" % name.split(".")[-1] for name in SOLO),
             "two cores a sanitized full run starves them past their deadlines.",
             "", "| sanitizer | suites | tests | failed | reports | suppressed (entry: count) | build s | run s |",
             "|---|---|---:|---|---:|---|---:|---:|"]
    for run in results["runs"]:
        suppressed = ", ".join("`%s`: %d" % (k, v) for k, v in sorted(run.get("suppressed", {}).items())) or "none"
        lines.append("| %s | %s | %s | %s | %d | %s | %s | %s |" % (
            run["sanitizer"], ", ".join(s.replace("OfflineSync", "").replace("Tests", "") or "core" for s in run.get("suites", [])),
            run.get("tests", "—"), "yes" if run.get("tests_failed") else "no", len(run.get("reports", [])), suppressed,
            run.get("build_seconds", "—"), run.get("test_seconds", "—")))
    lines.append("")
    for run in results["runs"]:
        for finding in run.get("reports", [])[:20]:
            lines.append("- %s: %s — %s (`%s`)" % (run["sanitizer"], finding["kind"], finding["first_frame_of_ours"], finding["log"]))
        if run.get("tail"):
            lines += ["", "```", run["tail"], "```"]
    lines.append(END)
    return "\n".join(lines)


def write_doc(text):
    """Puts `text` in place of the Sanitizers section, or before the Fuzzing section (or
    "How the figures are made")."""
    with open(DOC) as f:
        doc = f.read()
    if BEGIN in doc and END in doc:
        doc = doc[:doc.index(BEGIN)] + text + doc[doc.index(END) + len(END):]
    else:
        at = len(doc)
        for marker in ["<!-- fuzz results", "## Fuzzing", "## How the figures are made"]:
            if marker in doc:
                at = doc.index(marker)
                break
        doc = doc[:at] + text + "\n\n" + doc[at:]
    with open(DOC, "w") as f:
        f.write(doc)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sanitizer", action="append", choices=["thread", "address"])
    parser.add_argument("--suite", action="append", help="test targets to run (default: %s)" % ", ".join(SUITES))
    parser.add_argument("--out", default=RESULTS, help="where the results go (default: sanitizer-results.json)")
    parser.add_argument("--no-doc", action="store_true", help="do not write the section of Docs/Reliability.md")
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    results = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "commit": commit or "unknown",
               "machine": fuzz.machine(), "blind_spot_races": blind_spot(), "runs": []}
    for sanitizer in args.sanitizer or ["thread", "address"]:
        print("sanitizers: %s" % sanitizer, flush=True)
        result = run(sanitizer, args.suite or SUITES)
        print("sanitizers: %s: %s tests, %d reports, suppressed %s" % (
            sanitizer, result.get("tests"), len(result.get("reports", [])), result.get("suppressed")), flush=True)
        results["runs"].append(result)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
        f.write("\n")
    # Only a run of every sanitizer over every suite stands for the tree in the document.
    if not args.no_doc and not args.sanitizer and not args.suite:
        write_doc(section(results))
        print("sanitizers: wrote %s and %s" % (os.path.relpath(args.out, ROOT), os.path.relpath(DOC, ROOT)))
    if results["blind_spot_races"] == 0:
        print("sanitizers: this toolchain's thread sanitizer sees a contended Mutex; ThreadSanitizerMutex is no longer needed")
    if any(r["status"] != "clean" for r in results["runs"]):
        sys.exit(1)


if __name__ == "__main__":
    main()

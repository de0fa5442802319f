#!/usr/bin/env python3
"""Runs every fuzz target of offline-sync-fuzz (built by `make fuzz` with libFuzzer and the
address sanitizer) for a bounded time, and publishes what each did.

    make fuzz                        (builds, then runs this for FUZZ_SECONDS per target)
    python3 Scripts/fuzz.py --bin PATH [--seconds 60] [--target NAME ...] [--no-doc]

Each target starts from its committed seeds (Tests/Fuzz/Corpus/TARGET) and regression inputs
(Tests/Fuzz/Regressions/TARGET, every input a fixed crash or broken promise came from), and
keeps what it learns in .build/fuzz/corpus/TARGET, so a second run goes on from the first. A
crash, a broken promise (the target aborts naming it), a leak or memory error the address
sanitizer sees, a hang past 10 s or an input that takes 2 GiB is a finding: its input is saved
as .build/fuzz/artifacts/TARGET-crash-… (replay it with `offline-sync-fuzz replay TARGET FILE`
on a normal build), and the run exits 1 after every target ran.

Writes fuzz-results.json and the "Fuzzing" section of Docs/Reliability.md (`make soak` keeps
that section when it rewrites the rest). A run of some targets (`--target`) replaces only their
rows and keeps the others' from the runs that made them: each row carries its run's date,
commit, machine and seconds, and the section names the run of each row when they differ.
"""
import argparse, datetime, glob, json, os, platform, re, subprocess, sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
CORPUS = os.path.join(ROOT, "Tests", "Fuzz", "Corpus")
REGRESSIONS = os.path.join(ROOT, "Tests", "Fuzz", "Regressions")
WORK = os.path.join(ROOT, ".build", "fuzz")
RESULTS = os.path.join(ROOT, "fuzz-results.json")
DOC = os.path.join(ROOT, "Docs", "Reliability.md")
BEGIN, END = "<!-- fuzz results: written by Scripts/fuzz.py -->", "<!-- end of fuzz results -->"


def machine():
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return "%s, %d cores, Linux %s" % (cpu, os.cpu_count() or 0, platform.release())


def inputs(folder):
    return sorted(p for p in glob.glob(os.path.join(folder, "*")) if os.path.isfile(p))


def run_target(binary, target, seconds):
    work = os.path.join(WORK, "corpus", target)
    artifacts = os.path.join(WORK, "artifacts")
    os.makedirs(work, exist_ok=True)
    os.makedirs(artifacts, exist_ok=True)
    folders = [work, os.path.join(CORPUS, target)]
    if os.path.isdir(os.path.join(REGRESSIONS, target)):
        folders.append(os.path.join(REGRESSIONS, target))
    command = [binary, target, "-max_total_time=%d" % seconds, "-timeout=10", "-rss_limit_mb=2048",
               "-print_final_stats=1", "-artifact_prefix=%s/%s-" % (artifacts, target)] + folders
    before = set(glob.glob(os.path.join(artifacts, target + "-*")))
    # ASan's leak check runs at exit; a process that outlives its budget by far has hung.
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=1")
    try:
        process = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=seconds + 120, env=env)
        output, status = process.stderr + process.stdout, process.returncode
    except subprocess.TimeoutExpired as expired:
        output, status = (expired.stderr or b"").decode(errors="replace") if isinstance(expired.stderr, bytes) else (expired.stderr or ""), -1
    found = sorted(set(glob.glob(os.path.join(artifacts, target + "-*"))) - before)
    executions = re.findall(r"stat::number_of_executed_units:\s*(\d+)", output)
    coverage = re.findall(r"\bcov: (\d+) ft: (\d+)", output)
    speed = re.findall(r"exec/s: (\d+)", output)
    corpus = re.findall(r"corp: (\d+)/", output)
    return {
        "target": target,
        "seconds": seconds,
        "executions": int(executions[-1]) if executions else None,
        "executions_per_second": int(speed[-1]) if speed else None,
        "edges_covered": int(coverage[-1][0]) if coverage else None,
        "features": int(coverage[-1][1]) if coverage else None,
        "corpus_inputs": int(corpus[-1]) if corpus else None,
        "seeds": len(inputs(os.path.join(CORPUS, target))),
        "regression_inputs": len(inputs(os.path.join(REGRESSIONS, target))),
        "status": status,
        "findings": [os.path.relpath(path, ROOT) for path in found],
        "tail": "\n".join(output.strip().splitlines()[-25:]) if status != 0 else "",
    }


def summaries(binary):
    listing = subprocess.run([binary, "list"], capture_output=True, text=True, check=True).stdout
    return dict(line.split("\t", 1) for line in listing.strip().splitlines())


RUN_FIELDS = ("date", "commit", "machine", "seconds")


def run_of(row, results):
    """The run a row came from: (date, commit, machine, seconds); a row written before rows
    named their run is the file's run."""
    return tuple(row.get(field, results.get(field)) for field in RUN_FIELDS)


def merged(previous, run, rows, order):
    """fuzz-results.json after `run` (date, commit, machine, seconds) made `rows`: those rows,
    and the previous file's rows of every other target still in `order` (the binary's list),
    each keeping the run that made it (a row written before rows named their run takes the
    file's). Rows follow `order`."""
    kept = {}
    for row in (previous or {}).get("targets", []):
        for field in RUN_FIELDS:
            row.setdefault(field, previous.get(field))
        kept[row["target"]] = row
    for row in rows:
        row.update(zip(RUN_FIELDS, run))
        kept[row["target"]] = row
    results = dict(zip(RUN_FIELDS, run))
    results["targets"] = [kept[name] for name in order if name in kept]
    return results


def section(results):
    """The Fuzzing section of Docs/Reliability.md, from fuzz-results.json's contents. When the
    rows come from more than one run (`--target` ran some), a column numbers each row's run and
    a note under the table gives each run's date, commit, machine and seconds per target."""
    def figure(value):
        return "—" if value is None else "{:,}".format(value)
    runs = []
    for row in results["targets"]:
        if run_of(row, results) not in runs:
            runs.append(run_of(row, results))
    runs.sort(key=lambda run: str(run[0]), reverse=True)
    single = len(runs) <= 1
    date, commit, machine, seconds = runs[0] if runs else run_of(results, results)
    if single:
        intro = ["Written by `make fuzz` on %s, commit %s, on %s: each target for %s s with libFuzzer and the address"
                 % (date, commit, machine, seconds)]
    else:
        intro = ["Written by `make fuzz` over %d runs (the *run* column; each run's date, commit and machine are under"
                 % len(runs), "the table), the latest on %s, commit %s: each target with libFuzzer and the address" % (date, commit)]
    lines = [BEGIN, "## Fuzzing", ""] + intro + [
             "sanitizer (release build). *Edges* and *features* are libFuzzer's coverage counters at the end of the",
             "run (`cov`, `ft`); *corpus* is how many inputs it kept. *Fixed* counts the inputs in",
             "`Tests/Fuzz/Regressions`, each from a crash or broken promise that was fixed; `make test` replays them",
             "and every seed.", ""]
    run_column = "" if single else " run |"
    lines += ["| target | what it reads |%s executions | exec/s | edges | features | corpus | seeds | findings this run | fixed |" % run_column,
              "|---|---|%s---:|---:|---:|---:|---:|---:|---:|---:|" % ("" if single else "---:|")]
    for row in results["targets"]:
        run_cell = "" if single else " %d |" % (runs.index(run_of(row, results)) + 1)
        lines.append("| `%s` | %s |%s %s | %s | %s | %s | %s | %d | %d | %d |" % (
            row["target"], row.get("summary", ""), run_cell, figure(row["executions"]), figure(row["executions_per_second"]),
            figure(row["edges_covered"]), figure(row["features"]), figure(row["corpus_inputs"]), row["seeds"],
            len(row["findings"]), row["regression_inputs"]))
    lines.append("")
    if not single:
        for number, (date, commit, machine, seconds) in enumerate(runs, 1):
            lines.append("%d. %s, commit %s, on %s: %s s per target." % (number, date, commit, machine, seconds))
        lines.append("")
    for row in results["targets"]:
        if row["findings"]:
            lines += ["`%s` found: %s" % (row["target"], ", ".join("`%s`" % f for f in row["findings"])), "",
                      "```", row["tail"], "```", ""]
    lines.append(END)
    return "\n".join(lines)


def write_doc(text):
    """Puts `text` in place of the Fuzzing section, or before "How the figures are made"."""
    with open(DOC) as f:
        doc = f.read()
    if BEGIN in doc and END in doc:
        doc = doc[:doc.index(BEGIN)] + text + doc[doc.index(END) + len(END):]
    else:
        marker = "## How the figures are made"
        at = doc.index(marker) if marker in doc else len(doc)
        doc = doc[:at] + text + "\n\n" + doc[at:]
    with open(DOC, "w") as f:
        f.write(doc)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", required=True)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--target", action="append", help="run only these targets (repeatable)")
    parser.add_argument("--no-doc", action="store_true", help="write fuzz-results.json only")
    args = parser.parse_args()
    known = summaries(args.bin)
    targets = args.target or list(known)
    unknown = [t for t in targets if t not in known]
    if unknown:
        sys.exit("unknown targets: %s (offline-sync-fuzz list names them)" % ", ".join(unknown))
    rows = []
    for target in targets:
        print("fuzz: %s for %d s" % (target, args.seconds), flush=True)
        row = run_target(args.bin, target, args.seconds)
        row["summary"] = known[target]
        print("fuzz: %s: %s executions, %s edges, %d findings" % (target, row["executions"], row["edges_covered"], len(row["findings"])), flush=True)
        if row["status"] != 0:
            print(row["tail"], flush=True)
        rows.append(row)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    run = (datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), commit or "unknown", machine(), args.seconds)
    # A run of some targets keeps the other targets' rows from the runs that made them.
    previous = None
    if args.target and os.path.exists(RESULTS):
        with open(RESULTS) as f:
            previous = json.load(f)
    results = merged(previous, run, rows, list(known))
    with open(RESULTS, "w") as f:
        json.dump(results, f, indent=1)
        f.write("\n")
    if not args.no_doc:
        write_doc(section(results))
        print("fuzz: wrote %s and %s" % (os.path.relpath(RESULTS, ROOT), os.path.relpath(DOC, ROOT)))
    failed = [row["target"] for row in rows if row["status"] != 0 or row["findings"]]
    if failed:
        sys.exit("fuzz: findings in %s (inputs under .build/fuzz/artifacts)" % ", ".join(failed))


if __name__ == "__main__":
    main()
